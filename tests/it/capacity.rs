//! Capacity search end to end: the daemon (in-process) searches the
//! highest rate at which `p99 < 20ms` holds against a simulator with a
//! capacity (one FIFO server with exponential service times), and finds
//! the knee the queueing model gives; a simulator failing a fifth of the
//! operations stops the search at its first probe.

use crate::common::*;

use std::time::Duration;

use mongoload::report::StageReport;
use mongoload::sim::{ErrorFault, FaultConfig, SimConfig};

const READY: Duration = Duration::from_secs(20);

/// The rate at which a single server of `capacity` ops/s with exponential
/// service times, fed evenly spaced arrivals (a D/M/1 queue: mongoload's
/// uniform open loop), has a 99th percentile response time of `p99`. Its
/// response time is exponential with rate μ(1 − σ), σ the root in (0, 1)
/// of σ = exp(−μ(1 − σ)/λ); so μ(1 − σ) = ln 100 / p99 and
/// λ = −μ(1 − σ) / ln σ.
fn model_knee(capacity: f64, p99: Duration) -> f64 {
    let decay = 100f64.ln() / p99.as_secs_f64();
    let sigma = 1.0 - decay / capacity;
    -decay / sigma.ln()
}

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

fn probes(reports: &[StageReport]) -> Vec<(f64, String)> {
    reports
        .iter()
        .filter_map(|r| r.probe.as_ref())
        .map(|p| (p.rate, p.verdict.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_finds_the_rate_at_which_the_model_s_p99_crosses_the_threshold() {
    let capacity = 1000.0;
    let sim = sim_with(SimConfig {
        faults: FaultConfig {
            capacity: Some(capacity),
            ..FaultConfig::default()
        },
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let (_file, running) = start_daemon(&config(
        &sim.uri(),
        &log,
        r#"[[workloads.stages]]
name = "capacity"
search = { from = 250, to = 4000, precision = "2.5%", probe = "5s", settle = "1s" }

[[workloads.thresholds]]
check = "p99 < 20ms"
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
        "no result before the first search ends"
    );
    let summary = tokio::time::timeout(Duration::from_secs(150), running.wait())
        .await
        .expect("the search ends");
    assert!(!summary.workloads[0].threshold_aborted);
    let reports = run_log(&log);
    let probes = probes(&reports);
    let last = reports.last().unwrap().probe.clone().expect("probes only");
    let result = last.result.expect("the last probe carries the result");
    let knee = model_knee(capacity, Duration::from_millis(20));
    eprintln!(
        "capacity {} ops/s, the model's knee {knee:.1}; probes {probes:?}",
        result.capacity
    );
    assert!(
        (result.capacity - knee).abs() <= 0.05 * knee,
        "capacity {} against the model's knee {knee:.0}: {probes:?}",
        result.capacity
    );
    assert_eq!(result.end, "converged", "{probes:?}");
    assert_eq!(result.probes as usize, probes.len());
    // The ramp doubles from 250 until a probe fails, then bisects.
    assert_eq!(
        probes[..3].iter().map(|p| p.0).collect::<Vec<_>>(),
        [250.0, 500.0, 1000.0]
    );
    assert_eq!(probes[2].1, "fail", "{probes:?}");
    let best = probes
        .iter()
        .filter(|p| p.1 == "pass")
        .map(|p| p.0)
        .fold(0.0, f64::max);
    assert_eq!(best, result.capacity);
    // Each probe is judged over its probe time, the settle time left out.
    for r in &reports {
        assert_eq!(r.stage, "capacity");
        assert!(
            (r.warmup_seconds - 1.0).abs() < 0.01,
            "{}",
            r.warmup_seconds
        );
        assert!(r.duration_seconds >= 4.9, "{}", r.duration_seconds);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_search_against_a_failing_cluster_stops_at_its_first_probe() {
    let sim = sim_with(SimConfig {
        faults: FaultConfig {
            error: Some(ErrorFault {
                rate: 0.2,
                code: 2,
                commands: Vec::new(),
            }),
            ..FaultConfig::default()
        },
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let (_file, running) = start_daemon(&config(
        &sim.uri(),
        &log,
        r#"[[workloads.stages]]
name = "capacity"
search = { from = 200, to = 4000, probe = "3s", settle = "1s" }

[[workloads.thresholds]]
check = "error_ratio < 1%"
"#,
    ))
    .await;
    wait_status(running.http_addr, "/readyz", 200, READY).await;
    let summary = tokio::time::timeout(Duration::from_secs(60), running.wait())
        .await
        .expect("the search ends");
    assert!(!summary.workloads[0].threshold_aborted);
    let reports = run_log(&log);
    assert_eq!(reports.len(), 1, "one probe only");
    let probe = reports[0].probe.as_ref().unwrap();
    assert_eq!((probe.rate, probe.verdict.as_str()), (200.0, "fail"));
    assert!(probe.error_ratio > 0.15, "{}", probe.error_ratio);
    let result = probe.result.as_ref().unwrap();
    assert_eq!((result.end.as_str(), result.capacity), ("stopped", 0.0));
}
