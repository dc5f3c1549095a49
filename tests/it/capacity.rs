//! Capacity search end to end: daemons (in-process) search the highest
//! rate at which `p99 < 100ms` holds against simulators with a capacity
//! (one FIFO server with exponential service times), and find the knee
//! the queueing model gives; a simulator failing a fifth of the
//! operations stops the search at its first probe.

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

fn probes(reports: &[StageReport]) -> Vec<(f64, String)> {
    reports
        .iter()
        .filter_map(|r| r.probe.as_ref())
        .map(|p| (p.rate, p.verdict.clone()))
        .collect()
}

/// The simulator's capacity and the threshold of the searches. The knee
/// ([`model_knee`]: 880 ops/s) is far below what the machine can do, and
/// each probe judges 20 s: a queue this close to its capacity is
/// correlated over about 0.25 s (1/(μ(1 − √ρ)²)), so a p99 over 5 s
/// varies enough to move single probes across the knee (a model of the
/// search with 5 s probes lands outside 5 % of the knee in 3 of 40
/// searches; with 20 s, in none of 60, within −4 % and +3 %).
const CAPACITY: f64 = 1000.0;
const P99: Duration = Duration::from_millis(20);
const SEARCH: &str = r#"[[workloads.stages]]
name = "capacity"
search = { from = 250, to = 4000, precision = "2.5%", probe = "20s", settle = "2s" }

[[workloads.thresholds]]
check = "p99 < 20ms"
"#;

/// One search by a daemon of seed `seed` against a simulator of its own
/// with [`CAPACITY`]: the reports of its run log.
async fn search(seed: u64) -> Vec<StageReport> {
    let sim = sim_with(SimConfig {
        faults: FaultConfig {
            capacity: Some(CAPACITY),
            ..FaultConfig::default()
        },
        ..SimConfig::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("run.jsonl");
    let toml = config(&sim.uri(), &log, SEARCH).replace("seed = 7", &format!("seed = {seed}"));
    let (_file, running) = start_daemon(&toml).await;
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
    let summary = tokio::time::timeout(Duration::from_secs(280), running.wait())
        .await
        .expect("the search ends");
    assert!(!summary.workloads[0].threshold_aborted);
    run_log(&log)
}

/// Three searches with different seeds, at once, each against its own
/// simulator: each finds the knee of the queueing model within 5 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn searches_find_the_rate_at_which_the_model_s_p99_crosses_the_threshold() {
    let knee = model_knee(CAPACITY, P99);
    let runs = futures::future::join_all([1, 2, 3].map(search)).await;
    let mut found = Vec::new();
    for (seed, reports) in [1, 2, 3].iter().zip(&runs) {
        let probes = probes(reports);
        let last = reports.last().unwrap().probe.clone().expect("probes only");
        let result = last.result.expect("the last probe carries the result");
        eprintln!(
            "seed {seed}: capacity {} ops/s, the model's knee {knee:.1}; probes {probes:?}",
            result.capacity
        );
        assert!(
            (result.capacity - knee).abs() <= 0.05 * knee,
            "seed {seed}: capacity {} against the model's knee {knee:.0}: {probes:?}",
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
        // Each probe is judged over its probe time, the settle time left
        // out, and long enough for min_operations.
        for r in reports {
            assert_eq!(r.stage, "capacity");
            assert!(
                (r.warmup_seconds - 2.0).abs() < 0.01,
                "{}",
                r.warmup_seconds
            );
            let rate = r.probe.as_ref().unwrap().rate;
            let judged = (1000.0 / rate).max(20.0);
            assert!(
                r.duration_seconds >= judged - 0.1,
                "{} at {rate}",
                r.duration_seconds
            );
        }
        found.push(result.capacity);
    }
    eprintln!("three searches: {found:?}, the model's knee {knee:.1}");
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
