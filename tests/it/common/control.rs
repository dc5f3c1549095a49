//! Shared helpers of the daemon integration tests: a config against a
//! simulator, metric lookups on the encoded registry, polling.
#![allow(dead_code)]

use std::path::Path;
use std::time::Duration;

use mongoload::config::{self, Config};
use mongoload::metrics::Metrics;

/// A one-workload config (`w`, mixed, 1 KB documents, 200 docs loaded) at
/// `rate` ops/s for an hour, against the test's deployment, HTTP on a free
/// loopback port, the control socket at `socket` if given.
pub fn config_text(db: &super::TestDb, rate: f64, socket: Option<&Path>) -> String {
    let (uri, database) = (db.uri(), db.database("loadtest"));
    let control = socket.map_or(String::new(), |p| {
        format!("[control]\nsocket = {:?}\n", p.display().to_string())
    });
    format!(
        r#"
[target]
uri = "{uri}"
database = "{database}"

[http]
listen = "127.0.0.1:0"

[run]
shutdown_grace = "2s"

{control}
[[workloads]]
name = "w"
kind = "mixed"
max_inflight = 64
seed = 7
[workloads.mixed]
doc_size = "1KB"
initial_docs = 200
collection = "w"
[[workloads.stages]]
name = "hold"
rate = {rate}
duration = "1h"
"#
    )
}

/// Parses config text as if from `path`, with no environment overrides.
pub fn parse(text: &str, path: &Path) -> Config {
    config::parse_with_env(text, path, Vec::new()).unwrap_or_else(|e| panic!("{e}"))
}

/// The sum of the samples of `name` whose labels include every `labels`
/// fragment (such as `workload="w"`); 0 when there is none.
pub fn metric(metrics: &Metrics, name: &str, labels: &[&str]) -> f64 {
    let text = metrics.encode().unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter(|l| labels.iter().all(|f| l.contains(f)))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Operations of workload `w` finished so far (ok and error).
pub fn ops(metrics: &Metrics) -> f64 {
    metric(metrics, "mongoload_operations_total", &["workload=\"w\""])
}

/// Polls `check` every 50 ms until it holds, failing after `limit`.
pub async fn eventually(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    let start = std::time::Instant::now();
    while !check() {
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
