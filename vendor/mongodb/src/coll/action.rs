mod drop;
