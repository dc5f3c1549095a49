//! mongoload: constant or scheduled synthetic load for MongoDB, with
//! Prometheus metrics. The binary in `main.rs` only parses the command line
//! and calls into this library, so tests and benches reach everything.
#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod audit;
pub mod capture;
pub(crate) mod check_target;
pub mod cli;
pub(crate) mod cluster;
pub mod config;
pub(crate) mod config_values;
pub mod control;
pub mod daemon;
pub mod engine;
pub mod error_kind;
pub(crate) mod error_log;
pub mod exit;
pub mod failover;
pub(crate) mod family;
pub mod metrics;
pub mod mongo;
pub(crate) mod probe;
pub(crate) mod progress;
pub mod report;
pub mod schedule;
pub(crate) mod sharding;
pub(crate) mod threshold;
pub(crate) mod throttle;
pub(crate) mod uri;
pub(crate) mod web;
pub mod workload;

/// The simulator, a crate of its own in this workspace (`crates/mongoload-sim`):
/// the binary ships it as `mongoload sim` and `mongoload demo`, and the tests
/// and benches reach it here as `mongoload::sim`.
pub use mongoload_sim as sim;
