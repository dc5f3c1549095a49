//! The integration tests, as one test binary: each module drives the real
//! driver (or the real binary, or the real Prometheus tools) against the
//! simulator; `common` holds the helpers they share. One binary links the
//! library and the driver once instead of once per file.

mod common;

mod audit;
mod auth_tls;
mod bad_input;
mod capacity;
mod capture;
mod capture_query_stats;
mod capture_roundtrip;
mod check_target;
mod cli;
mod cluster;
mod compression;
mod control;
mod coordinated_omission;
mod daemon;
mod dashboards;
mod doc_drift;
mod doc_links;
mod etc_files;
mod failover;
mod fault_matrix;
mod faults;
mod html_report;
mod http_metrics;
mod isolation;
mod kubernetes;
mod lag_probe;
mod layers;
mod packaging;
mod percentiles;
mod progress;
mod prometheus_e2e;
mod prometheus_rules;
mod reload;
mod runlog;
mod shard_failover;
mod shard_stats;
mod sharding;
mod sim_driver;
mod sim_pymongo;
mod sim_replset;
mod sim_sharded;
mod systemd_notify;
mod thresholds;
mod windows;
mod workloads;
