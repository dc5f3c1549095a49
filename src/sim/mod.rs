//! `mongoload sim`: an in-memory server that speaks the MongoDB wire
//! protocol well enough for the official drivers and every built-in
//! workload, with fault injection. A test double and demo target, never a
//! database: no persistence, no replication, no real transactions.

pub mod aggregate;
pub mod query;
pub mod update;
