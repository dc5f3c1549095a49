//! The coordinated-omission check of issue 4: the simulator holds every
//! reply for 1 s once every 10 s. In open loop at 1,000 ops/s, latency
//! counts from each operation's intended start, so the operations that
//! were due during a stall carry its wait: about 10 % of them are late by
//! up to a second and the p99 is ≥ 0.5 s. In closed loop the 20 workers
//! simply stop issuing during a stall, so only ~20 operations per stall are
//! slow among tens of thousands: the same server shows a p99 of a few
//! milliseconds. Runs for about 80 s (the issue asks for a minute of open
//! loop).

use crate::common;

use std::path::Path;
use std::time::Duration;

use mongoload::config;
use mongoload::daemon;
use mongoload::report::{self, StageReport};
use mongoload::sim::{FaultConfig, SimConfig, Stall};

async fn run_stage(stage: &str) -> (StageReport, Option<mongoload::metrics::LatencySummary>) {
    let sim = common::sim_with(SimConfig {
        faults: FaultConfig {
            stall: Some(Stall {
                duration: Duration::from_secs(1),
                period: Duration::from_secs(10),
            }),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let text = format!(
        r#"
[target]
uri = "{uri}"
database = "co_test"
pool_size = 64
[http]
listen = "127.0.0.1:0"
[run]
shutdown_grace = "5s"
log = "{log}"
[[workloads]]
name = "co"
kind = "mixed"
max_inflight = 2000
max_lag = "30s"
seed = 3
[workloads.mixed]
insert = 0
update = 0
delete = 0
find = 100
doc_size = 64
initial_docs = 1000
{stage}
"#,
        uri = sim.uri(),
        log = log.display()
    );
    let config = config::parse_with_env(&text, Path::new("co.toml"), std::iter::empty())
        .expect("test config is valid");
    let running = daemon::start(config).await.unwrap();
    let metrics = running.metrics.clone();
    tokio::time::timeout(Duration::from_secs(180), running.wait())
        .await
        .expect("the schedule ends");
    let window = metrics.latency_window("co", "find");
    sim.shutdown().await;
    let mut lines = report::read(&log).unwrap();
    assert_eq!(lines.len(), 1, "{lines:#?}");
    (lines.remove(0), window)
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The rate the issue asks for.
const RATE: f64 = 1000.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_loop_p99_carries_the_stalls_closed_loop_hides_them() {
    let (closed, _) = run_stage(
        r#"
[[workloads.stages]]
name = "closed"
concurrency = 20
duration = "20s"
"#,
    )
    .await;
    eprintln!(
        "closed loop: {} ops, {:.0} ops/s, p50 {:.4}s p99 {:.4}s p99.9 {:.4}s max {:.4}s",
        closed.operations.ok,
        closed.ops_per_sec,
        secs(closed.latency_ns.p50),
        secs(closed.latency_ns.p99),
        secs(closed.latency_ns.p999),
        secs(closed.latency_ns.max),
    );
    // Open loop must not be overloaded, or the backlog (not the stalls)
    // makes the latency: a debug build on a busy machine may not sustain
    // 1,000 ops/s with room to drain a second's backlog. Then run at half
    // the closed-loop capacity and say so; the stalls show the same way.
    let rate = RATE.min((closed.ops_per_sec / 2.0).floor());
    assert!(
        rate >= 100.0,
        "this machine sustains only {:.0} ops/s in closed loop",
        closed.ops_per_sec
    );
    if rate < RATE {
        eprintln!(
            "open loop at {rate} ops/s instead of {RATE}: closed loop reached only {:.0} ops/s here",
            closed.ops_per_sec
        );
    }
    let (open, open_window) = run_stage(&format!(
        r#"
[[workloads.stages]]
name = "open"
rate = {rate}
duration = "60s"
"#
    ))
    .await;
    eprintln!(
        "open loop at {rate} ops/s: {} ops, {:.0} ops/s, p50 {:.4}s p99 {:.4}s p99.9 {:.4}s max {:.4}s, missed {}; window p99 {:?}",
        open.operations.ok,
        open.ops_per_sec,
        secs(open.latency_ns.p50),
        secs(open.latency_ns.p99),
        secs(open.latency_ns.p999),
        secs(open.latency_ns.max),
        open.missed,
        open_window.map(|w| w.p99),
    );

    // Open loop: the schedule was kept (nothing missed, every operation
    // done) and the stalls are in the percentiles.
    assert_eq!(open.missed, 0, "{open:?}");
    assert_eq!(open.operations.error, 0, "{open:?}");
    assert!(open.operations.ok as f64 >= rate * 60.0 * 0.98, "{open:?}");
    assert!(secs(open.latency_ns.p99) >= 0.5, "{open:?}");
    assert!(secs(open.latency_ns.max) >= 0.9, "{open:?}");
    // The live window summary agrees (it covers the last 50–60 s).
    let w = open_window.expect("the window of co/find exists");
    assert!(w.p99 >= Duration::from_millis(500), "{w:?}");

    // Closed loop: the same stalls, but each worker had one slow operation
    // per stall; the p99 is far lower.
    assert!(closed.operations.ok > 0, "{closed:?}");
    assert!(
        secs(closed.latency_ns.max) >= 0.5,
        "the stalls happened: {closed:?}"
    );
    assert!(
        open.latency_ns.p99 >= 5 * closed.latency_ns.p99,
        "open p99 {} ns, closed p99 {} ns",
        open.latency_ns.p99,
        closed.latency_ns.p99
    );
}
