//! mongoload: constant or scheduled synthetic load for MongoDB, with
//! Prometheus metrics. The binary in `main.rs` only parses the command line
//! and calls into this library, so tests and benches reach everything.
#![forbid(unsafe_code)]

pub mod audit;
pub mod check_target;
pub mod cli;
pub mod cluster;
pub mod config;
pub mod control;
pub mod daemon;
pub mod engine;
pub mod error_kind;
pub mod error_log;
pub mod http;
pub mod limits;
pub mod logging;
pub mod manpage;
pub mod metrics;
pub mod mongo;
pub mod probe;
pub mod progress;
pub mod report;
pub mod schedule;
pub mod service;
pub mod side_runtime;
pub mod sim;
pub mod status;
pub mod supervisor;
pub mod threshold;
pub mod throttle;
pub mod workload;
pub mod writable;
