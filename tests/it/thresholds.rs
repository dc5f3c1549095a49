//! Thresholds end to end: the daemon (in-process, or the real binary for
//! the exit code) against the simulator with its error and latency
//! faults; a threshold crosses and recovers on `/metrics`, `/status` and
//! in the stage report, `abort_on_fail` ends the run with exit 99, and a
//! fault-free run breaches nothing.

use crate::common::*;

use std::time::{Duration, Instant};

use mongoload::report::StageReport;
use mongoload::sim::{ErrorFault, LatencyDist};

const READY: Duration = Duration::from_secs(20);

fn threshold_ok(page: &str, name: &str) -> Option<f64> {
    sample(
        page,
        "mongoload_threshold_ok",
        &[("workload", "w"), ("threshold", name)],
    )
}

fn breaches(page: &str, name: &str) -> f64 {
    sample(
        page,
        "mongoload_threshold_breaches_total",
        &[("workload", "w"), ("threshold", name)],
    )
    .unwrap_or_else(|| panic!("breaches of {name} exported:\n{page}"))
}

/// `config_toml` with a run log and these extra workload tables.
fn config_with(uri: &str, log: &std::path::Path, tables: &str) -> String {
    config_toml(uri, tables).replace(
        "shutdown_grace = \"3s\"",
        &format!("shutdown_grace = \"3s\"\nlog = \"{}\"", log.display()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_threshold_crosses_and_recovers_with_an_error_fault() {
    let sim = sim().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let (_file, running) = start_daemon(&config_with(
        &sim.uri(),
        &log,
        r#"[[workloads.stages]]
name = "steady"
rate = 100
duration = "16s"

[[workloads.thresholds]]
check = "error_ratio < 0.05"
window = "2s"

[[workloads.thresholds]]
check = "p99 < 2s"
"#,
    ))
    .await;
    let addr = running.http_addr;
    wait_status(addr, "/readyz", 200, READY).await;
    let errors = "error_ratio<0.05";
    let latency = "p99<2s";
    wait_metric(
        addr,
        "operations pass the thresholds",
        Duration::from_secs(10),
        |p| {
            sample(
                p,
                "mongoload_operations_total",
                &[("op", "find"), ("outcome", "ok")],
            )
            .unwrap_or(0.0)
                > 100.0
                && threshold_ok(p, errors) == Some(1.0)
        },
    )
    .await;

    // Every find fails: 87.5 % of the operations.
    sim.faults().set_error(Some(ErrorFault {
        rate: 1.0,
        code: 2,
        commands: vec!["find".to_owned()],
    }));
    let fault = Instant::now();
    let page = wait_metric(addr, "the threshold fails", Duration::from_secs(5), |p| {
        threshold_ok(p, errors) == Some(0.0)
    })
    .await;
    assert!(
        fault.elapsed() < Duration::from_secs(4),
        "seen failing after {:?}",
        fault.elapsed()
    );
    assert_eq!(breaches(&page, errors), 1.0);
    let status = must_get(addr, "/status").await.body;
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    let t = &status["workloads"][0]["thresholds"];
    assert_eq!(t[0]["threshold"], errors, "{status}");
    assert_eq!(t[0]["state"], "fail", "{status}");
    assert!(t[0]["value"].as_f64().unwrap() > 0.05, "{status}");

    tokio::time::sleep(Duration::from_secs(2)).await;
    sim.faults().set_error(None);
    let cleared = Instant::now();
    let page = wait_metric(
        addr,
        "the threshold passes again",
        Duration::from_secs(6),
        |p| threshold_ok(p, errors) == Some(1.0),
    )
    .await;
    assert!(
        cleared.elapsed() < Duration::from_secs(5),
        "passing again after {:?} (window 2s)",
        cleared.elapsed()
    );
    // One crossing into failure, however long it failed.
    assert_eq!(breaches(&page, errors), 1.0);
    assert_eq!(breaches(&page, latency), 0.0);
    assert_eq!(threshold_ok(&page, latency), Some(1.0));

    let summary = tokio::time::timeout(Duration::from_secs(30), running.wait())
        .await
        .expect("the schedule ends");
    assert!(!summary.workloads[0].threshold_aborted);
    let reports: Vec<StageReport> = mongoload::report::read(&log).unwrap();
    assert_eq!(reports.len(), 1);
    let r = &reports[0];
    let v: Vec<(&str, &str, u64)> = r
        .thresholds
        .iter()
        .map(|t| (t.threshold.as_str(), t.verdict.as_str(), t.breaches))
        .collect();
    // Over the whole stage: about 3 s of 16 at 87.5 % errors.
    let ratio = r.operations.error as f64 / (r.operations.ok + r.operations.error) as f64;
    assert!(ratio > 0.05, "stage error ratio {ratio}");
    assert_eq!(v, [(errors, "fail", 1), (latency, "pass", 0)], "{r:?}");
    assert_eq!(r.thresholds[0].value, Some(ratio));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fault_free_run_breaches_nothing() {
    let sim = sim().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    // Named: the run identity is checked here too.
    let (_file, running) = start_daemon(
        &config_with(
            &sim.uri(),
            &log,
            r#"[[workloads.stages]]
name = "steady"
rate = 100
duration = "5s"

[[workloads.thresholds]]
check = "error_ratio < 0.001"
window = "2s"
abort_on_fail = true

[[workloads.thresholds]]
check = "p99 < 500ms"
abort_on_fail = true

[[workloads.thresholds]]
check = "achieved_ratio > 0.95"
"#,
        )
        .replace("[run]\n", "[run]\nname = \"fault-free\"\n"),
    )
    .await;
    let metrics = running.metrics.clone();
    let status: serde_json::Value =
        serde_json::from_str(&must_get(running.http_addr, "/status").await.body).unwrap();
    assert_eq!(status["run"]["name"], "fault-free", "{status}");
    let hash = status["run"]["config_hash"].as_str().unwrap().to_owned();
    assert_eq!(hash.len(), 12, "{status}");
    let page = metrics.encode().unwrap();
    assert_eq!(
        sample(
            &page,
            "mongoload_run_info",
            &[("run", "fault-free"), ("config_hash", &hash)]
        ),
        Some(1.0),
        "{page}"
    );
    let summary = tokio::time::timeout(Duration::from_secs(40), running.wait())
        .await
        .expect("the schedule ends");
    assert!(!summary.workloads[0].threshold_aborted);
    let page = metrics.encode().unwrap();
    for name in ["error_ratio<0.001", "p99<500ms", "achieved_ratio>0.95"] {
        assert_eq!(breaches(&page, name), 0.0, "{name}");
        assert_eq!(threshold_ok(&page, name), Some(1.0), "{name}");
    }
    let reports = mongoload::report::read(&log).unwrap();
    let verdicts: Vec<&str> = reports[0]
        .thresholds
        .iter()
        .map(|t| t.verdict.as_str())
        .collect();
    assert_eq!(verdicts, ["pass", "pass", "pass"], "{:?}", reports[0]);
    assert_eq!(reports[0].run_name.as_deref(), Some("fault-free"));
    assert_eq!(reports[0].config_hash.as_deref(), Some(hash.as_str()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abort_on_fail_ends_the_run_with_exit_99() {
    let sim = sim().await;
    // Every command takes 100 ms from the start.
    sim.faults()
        .set_latency(Some(LatencyDist::Fixed(Duration::from_millis(100))));
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let file = write_config(&config_with(
        &sim.uri(),
        &log,
        r#"[[workloads.stages]]
name = "steady"
rate = 50
duration = "120s"

[[workloads.thresholds]]
check = "p99 < 20ms"
window = "10s"
abort_on_fail = true
grace = "2s"
"#,
    ));
    let started = Instant::now();
    let (mut child, stderr_path) = spawn_run(&file, "info");
    let status = wait_exit(&mut child, Duration::from_secs(60)).await;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert_eq!(status.code(), Some(99), "stderr:\n{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
    let failing = stderr
        .lines()
        .position(|l| l.contains("threshold failing") && l.contains("p99<20ms"))
        .unwrap_or_else(|| panic!("no crossing line:\n{stderr}"));
    let abort = stderr
        .lines()
        .position(|l| l.contains("abort_on_fail") && l.contains("p99<20ms"))
        .unwrap_or_else(|| panic!("no abort line:\n{stderr}"));
    assert!(failing < abort, "{stderr}");
    // The stage cut short still reports, and fails the threshold.
    let reports = mongoload::report::read(&log).unwrap();
    let last = reports.last().expect("a stage report");
    assert!(last.partial);
    assert_eq!(last.thresholds[0].verdict, "fail", "{last:?}");
    assert!(last.thresholds[0].value.unwrap() >= 0.1, "{last:?}");
}
