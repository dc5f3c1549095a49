//! Freezes of 1 to 30 s on a release build: what mongoload reads and how
//! fast the load is back. The suite's drills (tests/it/faults.rs) run 3 s
//! freezes on a debug build at the rate a shared machine holds; this runs
//! the drill — 2,000 ops/s `mixed`, `max_inflight = 512`, a 1 s
//! `operation_timeout` — on the binary as shipped, for freezes longer than
//! the driver's bounds (the 30 s wait for a timed-out operation's late
//! reply), with the pool sized to the plan and with `pool_size = 64`:
//!
//! - a standalone `mongoload sim` process, SIGSTOP and SIGCONT: the freeze
//!   is the time between the signals;
//! - a three-member replica set with MongoDB's 10 s election timeout whose
//!   primary the simulator freezes (its `freeze` fault): the outage is the
//!   time to the election the simulator records.
//!
//! One line per drill: the freeze, the write outage mongoload measured,
//! when the load was back at 85 % of its rate after the thaw (or the
//! election), errors by class, connections closed as `dropped`, and
//! whether the client shut down cleanly. Run:
//! `cargo bench --bench faults` (about 4 minutes); `-- 1 10` runs only
//! those freeze lengths.

// The suite's helpers (they allow their own dead code); its unit tests'
// `use super::*` is unused in a bench built for clippy.
#[allow(unused_imports)]
#[path = "../tests/it/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::{
    config_toml, free_port, free_ports, samples, scrape, sigterm, spawn_run, spawn_sim, sum,
    wait_exit, wait_status, write_config,
};
use mongoload::sim::{ReplSetConfig, SimConfig};

const RATE: f64 = 2000.0;

/// What one drill read.
struct Reading {
    outage: f64,
    outages: f64,
    back: f64,
    errors: Vec<(String, f64)>,
    dropped: f64,
    clean_exit: bool,
}

fn config(uri: &str, pool: &str, http: std::net::SocketAddr) -> String {
    config_toml(
        uri,
        &format!("[[workloads.stages]]\nrate = {RATE}\nduration = \"1h\"\n"),
    )
    .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{http}\""))
    .replace("max_inflight = 32", "max_inflight = 512")
    .replace(
        "operation_timeout = \"2s\"",
        &format!("operation_timeout = \"1s\"\n{pool}"),
    )
}

fn ok_ops(page: &str) -> f64 {
    sum(
        page,
        "mongoload_operations_total",
        &[("workload", "w"), ("outcome", "ok")],
    )
}

/// Runs the daemon against `uri`, awaits `fault` once it has run 5 s
/// (which returns when the fault is over — the instant the server answers
/// again, or is replaced — and the fault's length), then watches for 5 s.
async fn drill(
    uri: &str,
    pool: &str,
    fault: impl std::future::Future<Output = (Instant, f64)>,
) -> (Reading, f64) {
    let http = free_port();
    let file = write_config(&config(uri, pool, http));
    let (mut child, stderr_path) = spawn_run(&file, "info");
    wait_status(http, "/readyz", 200, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = scrape(http).await;
    let (over, length) = fault.await;
    let mut seen = Vec::new();
    while over.elapsed() < Duration::from_secs(5) {
        seen.push((over.elapsed().as_secs_f64(), ok_ops(&scrape(http).await)));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = scrape(http).await;
    sigterm(child.0.as_ref().unwrap().id());
    let status = wait_exit(&mut child, Duration::from_secs(30)).await;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let delta = |name: &str, labels: &[(&str, &str)]| {
        sum(&after, name, labels) - sum(&before, name, labels)
    };
    let back = seen
        .iter()
        .find(|&&(t, ok)| {
            seen.iter()
                .find(|&&(u, _)| u >= t + 0.5)
                .is_some_and(|&(u, ok2)| (ok2 - ok) / (u - t) >= 0.85 * RATE)
        })
        .map_or(f64::INFINITY, |&(t, _)| t);
    let mut kinds: Vec<String> = samples(&after, "mongoload_errors_total", &[])
        .iter()
        .filter_map(|s| s.label("kind").map(str::to_owned))
        .collect();
    kinds.sort();
    kinds.dedup();
    let errors = kinds
        .into_iter()
        .map(|kind| {
            let n = delta("mongoload_errors_total", &[("kind", &kind)]);
            (kind, n)
        })
        .filter(|(_, n)| *n > 0.0)
        .collect();
    let reading = Reading {
        outage: delta("mongoload_write_outage_seconds_sum", &[]),
        outages: delta("mongoload_write_outage_seconds_count", &[]),
        back,
        errors,
        dropped: delta(
            "mongoload_pool_connections_closed_total",
            &[("reason", "dropped")],
        ),
        clean_exit: status.code() == Some(0) && !stderr.contains("did not shut down"),
    };
    (reading, length)
}

fn row(drill: &str, pool: &str, freeze: f64, r: &Reading) {
    let errors: Vec<String> = r
        .errors
        .iter()
        .map(|(k, n)| format!("{k} {n:.0}"))
        .collect();
    println!(
        "| {drill} | {} | {freeze:.3} s | {:.3} s ({:.0}) | {:.2} s | {} | {:.0} | {} |",
        if pool.is_empty() { "plan (512)" } else { "64" },
        r.outage,
        r.outages,
        r.back,
        if errors.is_empty() {
            "none".to_owned()
        } else {
            errors.join(", ")
        },
        r.dropped,
        if r.clean_exit { "yes" } else { "NO" },
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let mut lengths: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    if lengths.is_empty() {
        lengths = vec![1, 3, 10, 30];
    }
    println!("| drill | pool | freeze | write outage (outages) | back after | errors | dropped | clean exit |");
    println!("|---|---|---|---|---|---|---|---|");
    for &secs in &lengths {
        for pool in ["", "pool_size = 64"] {
            let port = free_ports(1);
            let sim = spawn_sim(port, &[]);
            let pid = sim.0.id();
            let (r, freeze) = drill(&format!("mongodb://127.0.0.1:{port}/"), pool, async {
                signal(pid, "STOP");
                let stopped = Instant::now();
                tokio::time::sleep(Duration::from_secs(secs)).await;
                signal(pid, "CONT");
                (Instant::now(), stopped.elapsed().as_secs_f64())
            })
            .await;
            drop(sim);
            row("SIGSTOP", pool, freeze, &r);
        }
    }
    // A frozen primary, replaced after MongoDB's 10 s election timeout.
    for pool in ["", "pool_size = 64"] {
        let sim = mongoload::sim::start_replset(SimConfig::default(), ReplSetConfig::new("rs0", 3))
            .await
            .expect("the replica set starts");
        let set = sim.replset().unwrap().clone();
        let (r, freeze) = drill(&set.uri(), pool, async {
            let primary = set.primary().expect("a primary");
            assert!(set.faults(primary).freeze());
            while set.primary() == Some(primary) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let elected = Instant::now();
            let record = set.faults(primary).records();
            let until_election = record
                .last()
                .and_then(|r| r.election.map(|e| e - r.start))
                .map_or(f64::NAN, |d| d.as_secs_f64());
            tokio::time::sleep(Duration::from_secs(2)).await;
            assert!(set.faults(primary).thaw());
            (elected, until_election)
        })
        .await;
        row("frozen primary, 10 s election timeout", pool, freeze, &r);
        sim.shutdown().await;
    }
}

fn signal(pid: u32, signal: &str) {
    let st = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill -{signal} {pid} failed");
}
