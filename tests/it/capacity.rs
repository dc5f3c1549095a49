//! Capacity search end to end: the daemon (in-process) searches the
//! highest rate at which `p99 < 100ms` holds against a simulator with a
//! capacity (one FIFO server with exponential service times), probe by
//! probe as the run log and the gauges show; a simulator failing a fifth
//! of the operations stops the search at its first probe.

use crate::common::*;

use std::time::Duration;

use mongoload::report::StageReport;
use mongoload::sim::{ErrorFault, FaultConfig, SimConfig};

const READY: Duration = Duration::from_secs(20);

fn config(uri: &str, log: &std::path::Path, stages: &str) -> String {
    config_toml(uri, stages)
        .replace(
            "shutdown_grace = \"3s\"",
            &format!("shutdown_grace = \"3s\"\nlog = \"{}\"", log.display()),
        )
        .replace("max_inflight = 32", "max_inflight = 256")
}

/// The run log's reports, each line validated against etc/runlog.schema.json.
fn run_log(path: &std::path::Path) -> Vec<StageReport> {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../etc/runlog.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let text = std::fs::read_to_string(path).expect("the run log exists");
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?}\n{line}");
    }
    mongoload::report::read(path).unwrap()
}

/// A quick search against a simulator of capacity 300 ops/s: its probes
/// follow the ramp and the bisection, each is judged over its probe time
/// with the settle time left out, the run log carries them (schema-valid)
/// and the gauges follow. How close a search comes to the knee takes
/// longer probes and a quiet machine: `cargo bench --bench capacity`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_ramps_then_bisects_and_reports_its_probes_and_result() {
    let sim = sim_with_capacity(300.0).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let (_file, running) = start_daemon(&config(
        &sim.uri(),
        &log,
        r#"[[workloads.stages]]
name = "capacity"
search = { from = 50, to = 2000, precision = "10%", probe = "4s", settle = "1s", min_operations = 100 }

[[workloads.stages]]
name = "after"
rate = 50
duration = "3s"

[[workloads.thresholds]]
check = "p99 < 100ms"
"#,
    ))
    .await;
    let addr = running.http_addr;
    wait_status(addr, "/readyz", 200, READY).await;
    let page = wait_metric(addr, "a probe runs", Duration::from_secs(20), |p| {
        sample(p, "mongoload_capacity_probe_rate", &[("workload", "w")]).unwrap_or(0.0) > 0.0
    })
    .await;
    assert_eq!(
        sample(
            &page,
            "mongoload_capacity_ops_per_second",
            &[("workload", "w")]
        ),
        None,
        "no result before the search ends"
    );
    // `/status` (and the progress line it feeds) names the probe.
    let status: serde_json::Value =
        serde_json::from_str(&must_get(addr, "/status").await.body).unwrap();
    let stage = &status["workloads"][0]["stage"];
    assert!(
        stage["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("capacity (capacity probe ")),
        "{status}"
    );
    assert!(stage["rate"].as_f64().unwrap() >= 50.0, "{status}");
    let page = wait_metric(addr, "the search's result", Duration::from_secs(90), |p| {
        sample(p, "mongoload_capacity_ops_per_second", &[("workload", "w")]).is_some()
    })
    .await;
    let exported = sample(
        &page,
        "mongoload_capacity_ops_per_second",
        &[("workload", "w")],
    );
    let summary = tokio::time::timeout(Duration::from_secs(30), running.wait())
        .await
        .expect("the schedule ends");
    assert!(!summary.workloads[0].threshold_aborted);
    let reports = run_log(&log);
    let (searched, after): (Vec<_>, Vec<_>) = reports.iter().partition(|r| r.stage == "capacity");
    assert_eq!(after.len(), 1, "the next stage runs once the search ends");
    assert!(after[0].probe.is_none());
    let probes: Vec<(f64, String)> = searched
        .iter()
        .map(|r| r.probe.as_ref().expect("each occurrence is a probe"))
        .map(|p| (p.rate, p.verdict.clone()))
        .collect();
    let result = searched
        .last()
        .and_then(|r| r.probe.as_ref())
        .and_then(|p| p.result.clone())
        .expect("the last probe carries the result");
    assert_eq!(exported, Some(result.capacity), "{probes:?}");
    assert_eq!(result.probes as usize, probes.len());
    assert_eq!(result.end, "converged", "{probes:?}");
    // The ramp doubles from 50 until a probe fails; then every probe
    // lies between the highest pass and the lowest failure so far.
    assert_eq!(probes[0].0, 50.0);
    let first_fail = probes
        .iter()
        .position(|p| p.1 == "fail")
        .expect("a failure");
    for w in probes[..=first_fail].windows(2) {
        assert_eq!(w[1].0, w[0].0 * 2.0, "{probes:?}");
    }
    let (mut pass, mut fail) = (0.0f64, f64::INFINITY);
    for (rate, verdict) in &probes {
        assert!(*rate > pass && *rate < fail || pass == 0.0, "{probes:?}");
        match verdict.as_str() {
            "pass" => pass = pass.max(*rate),
            _ => fail = fail.min(*rate),
        }
    }
    assert_eq!(result.capacity, pass);
    assert!(fail - pass <= 0.1 * pass, "converged to 10 %: {probes:?}");
    // The capacity is 300 ops/s (the model's knee at 100 ms: 276). A
    // queue at its capacity, empty when a probe begins, may still pass a
    // short probe, but none 5 % over it (it grows by 15 requests a second
    // of the probe); a third of it passes however busy the machine.
    assert!((100.0..=315.0).contains(&pass), "{probes:?}");
    for (i, r) in searched.iter().enumerate() {
        let p = r.probe.as_ref().unwrap();
        assert_eq!(p.number as usize, i + 1);
        assert_eq!(r.cycle as usize, i, "one occurrence per probe");
        assert!(
            (r.warmup_seconds - 1.0).abs() < 0.01,
            "{}",
            r.warmup_seconds
        );
        assert!(r.duration_seconds >= 3.9, "{}", r.duration_seconds);
        assert!(i + 1 == searched.len() || p.result.is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_against_a_failing_cluster_stops_at_its_first_probe() {
    // Every update and delete fails: 20 % of the operations, and none of
    // the prepare's (its inserts, index and reads go through).
    let sim = sim_with(SimConfig {
        faults: FaultConfig {
            error: Some(ErrorFault {
                rate: 1.0,
                code: 2,
                commands: vec!["update".into(), "delete".into()],
            }),
            ..FaultConfig::default()
        },
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let toml = config(
        &sim.uri(),
        &log,
        r#"[[workloads.stages]]
name = "capacity"
search = { from = 200, to = 4000, probe = "3s", settle = "1s" }

[[workloads.thresholds]]
check = "error_ratio < 1%"
"#,
    )
    .replace("update = 3\n", "update = 17\n")
    .replace("find = 87.5\n", "find = 73.5\n");
    assert!(toml.contains("update = 17") && toml.contains("find = 73.5"));
    let (_file, running) = start_daemon(&toml).await;
    wait_status(running.http_addr, "/readyz", 200, READY).await;
    let summary = tokio::time::timeout(Duration::from_secs(60), running.wait())
        .await
        .expect("the search ends");
    assert!(!summary.workloads[0].threshold_aborted);
    let reports = run_log(&log);
    assert_eq!(reports.len(), 1, "one probe only");
    let probe = reports[0].probe.as_ref().unwrap();
    assert_eq!((probe.rate, probe.verdict.as_str()), (200.0, "fail"));
    assert!(
        (0.15..0.25).contains(&probe.error_ratio),
        "{}",
        probe.error_ratio
    );
    let result = probe.result.as_ref().unwrap();
    assert_eq!((result.end.as_str(), result.capacity), ("stopped", 0.0));
}

/// A window with a search (the nightly capacity figure beside a daytime
/// soak): the search runs once when the window opens, then the workload
/// idles until the window closes, sending nothing, instead of searching
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_window_searches_once_then_idles_until_it_closes() {
    use chrono::Timelike;
    let sim = sim_with_capacity(300.0).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    // Open from a minute ago for fifteen minutes (UTC, across midnight too).
    let now = chrono::Utc::now();
    let minute = |m: i64| {
        let t = now + chrono::Duration::minutes(m);
        format!("{:02}:{:02}", t.hour(), t.minute())
    };
    let (_file, running) = start_daemon(&config(
        &sim.uri(),
        &log,
        &format!(
            r#"[[workloads.windows]]
when = "{}-{}"
name = "nightly"
search = {{ from = 50, to = 2000, precision = "10%", probe = "4s", settle = "1s", min_operations = 100 }}

[[workloads.thresholds]]
check = "p99 < 100ms"
stage = "nightly"
"#,
            minute(-1),
            minute(14)
        ),
    ))
    .await;
    let addr = running.http_addr;
    wait_status(addr, "/readyz", 200, READY).await;
    let page = wait_metric(addr, "the search's result", Duration::from_secs(120), |p| {
        sample(p, "mongoload_capacity_ops_per_second", &[("workload", "w")]).is_some()
    })
    .await;
    let w = [("workload", "w")];
    let capacity = sample(&page, "mongoload_capacity_ops_per_second", &w).unwrap();
    // A result, never 5 % over the capacity; how low a busy machine reads
    // it is not this test's (one full CI run read 93.75).
    assert!(capacity > 0.0 && capacity <= 315.0, "{capacity}");
    // Idle for the rest of the window: no probe, no operation.
    let page = wait_metric(
        addr,
        "idle after the search",
        Duration::from_secs(10),
        |p| sample(p, "mongoload_phase_info", &[("stage", "idle")]) == Some(1.0),
    )
    .await;
    assert_eq!(sample(&page, "mongoload_target_rate", &w), Some(0.0));
    assert_eq!(
        sample(&page, "mongoload_capacity_probe_rate", &w),
        Some(0.0)
    );
    let ops = |p: &str| {
        let finds = [("workload", "w"), ("op", "find"), ("outcome", "ok")];
        sample(p, "mongoload_operations_total", &finds)
    };
    let before = ops(&page);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let page = must_get(addr, "/metrics").await.body;
    assert_eq!(ops(&page), before, "nothing is sent while idle");
    assert_eq!(
        sample(&page, "mongoload_capacity_probe_rate", &w),
        Some(0.0)
    );
    running.stop();
    tokio::time::timeout(Duration::from_secs(30), running.wait())
        .await
        .expect("the daemon stops");
    // One search in the run log: probes 1..n, the last with the result.
    let probes: Vec<_> = run_log(&log).into_iter().filter_map(|r| r.probe).collect();
    let numbers: Vec<u32> = probes.iter().map(|p| p.number).collect();
    assert_eq!(numbers, (1..=probes.len() as u32).collect::<Vec<_>>());
    let result = probes.last().and_then(|p| p.result.clone()).unwrap();
    assert_eq!(
        (result.capacity, result.end.as_str()),
        (capacity, "converged")
    );
}
