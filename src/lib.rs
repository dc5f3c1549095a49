//! mongoload: constant or scheduled synthetic load for MongoDB, with
//! Prometheus metrics. The binary in `main.rs` only parses the command line
//! and calls into this library, so tests and benches reach everything.
#![forbid(unsafe_code)]

pub mod audit;
pub mod capture;
pub mod check_target;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod control;
pub mod daemon;
pub mod engine;
pub mod error_kind;
pub mod error_log;
pub mod exit;
pub mod failover;
pub mod family;
pub mod metrics;
pub mod mongo;
pub mod probe;
pub mod progress;
pub mod report;
pub mod schedule;
pub mod sharding;
pub mod threshold;
pub mod throttle;
pub mod uri;
pub mod values;
pub mod web;
pub mod workload;

/// The simulator, a crate of its own in this workspace (`crates/mongoload-sim`):
/// the binary ships it as `mongoload sim` and `mongoload demo`, and the tests
/// and benches reach it here as `mongoload::sim`.
pub use mongoload_sim as sim;
