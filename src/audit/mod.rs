//! The acknowledged-write audit: which documents the server acknowledged
//! and the workload did not delete on purpose, so that a background check
//! can find the ones a failover lost. This module holds the pure part, the
//! [`ledger::Ledger`]; the task that queries the server is built on it.

pub mod ledger;

pub use ledger::{Cursor, Ledger};
