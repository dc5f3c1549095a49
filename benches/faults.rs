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
//! whether the client shut down cleanly; for a frozen primary also what
//! the daemon saw of the election, from its log. "Back" and "last error"
//! count from the instant the fault is over: SIGCONT, or the election the
//! simulator records. Run: `cargo bench --bench faults` (about 4
//! minutes); `-- 1 10` runs only those freeze lengths, `-- election` only
//! the frozen primaries (`election=2`: with a 2 s election timeout), and
//! `rate=500` sets the rate.

// The suite's helpers (they allow their own dead code); its unit tests'
// `use super::*` is unused in a bench built for clippy.
#[allow(unused_imports)]
#[path = "../tests/it/common/mod.rs"]
mod common;

use std::time::{Duration, Instant, SystemTime};

use common::{
    back_at_rate, config_toml, free_port, free_ports, log_time, oks_since, sample_status, samples,
    scrape, sigterm, spawn_run, spawn_sim, sum, wait_exit, wait_status, write_config, StatusPoint,
};
use mongoload::sim::{ReplSetConfig, SimConfig};

/// The rate; `rate=N` on the command line sets another (a debug
/// build on a shared machine holds a few hundred per second).
const RATE: f64 = 2000.0;

static RATE_SET: std::sync::OnceLock<f64> = std::sync::OnceLock::new();

fn rate() -> f64 {
    *RATE_SET.get().unwrap_or(&RATE)
}

/// What one drill read.
struct Reading {
    outage: f64,
    outages: f64,
    back: f64,
    /// Seconds after the fault was over until the last operation failed
    /// (the last `/status` reading whose error count rose).
    last_error: f64,
    /// The lowest rate over 0.5 s from `back` on, as a fraction of the
    /// scheduled rate: whether it held (the thaw of a replaced primary
    /// falls inside the watch).
    held: f64,
    errors: Vec<(String, f64)>,
    dropped: f64,
    clean_exit: bool,
    /// The daemon's log, to date what it saw.
    stderr: String,
}

/// When a fault was over (the server answers again, or was replaced), on
/// the bench's clock and on the wall clock, and its length.
struct Over {
    at: Instant,
    wall: SystemTime,
    length: f64,
}

fn config(uri: &str, pool: &str, http: std::net::SocketAddr) -> String {
    config_toml(
        uri,
        &format!(
            "[[workloads.stages]]\nrate = {}\nduration = \"1h\"\n",
            rate()
        ),
    )
    .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{http}\""))
    .replace("max_inflight = 32", "max_inflight = 512")
    .replace(
        "operation_timeout = \"2s\"",
        &format!("operation_timeout = \"1s\"\n{pool}"),
    )
}

/// Runs the daemon against `uri`, awaits `fault` once it has run 5 s
/// (which returns as soon as the fault is over — the instant the server
/// answers again, or is replaced), then watches for 5 s more. `/status`
/// is read every 100 ms from before the fault to the end, each reading
/// dated by the daemon's own clock (a `/metrics` page may be 250 ms old).
async fn drill(
    uri: &str,
    pool: &str,
    fault: impl std::future::Future<Output = Over>,
) -> (Reading, Over) {
    let http = free_port();
    let file = write_config(&config(uri, pool, http));
    let (mut child, stderr_path) = spawn_run(&file, "info");
    wait_status(http, "/readyz", 200, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let before = scrape(http).await;
    let (stop_sampler, sampler) = sample_status(http);
    let over = fault.await;
    tokio::time::sleep_until((over.at + Duration::from_secs(5)).into()).await;
    let _ = stop_sampler.send(());
    let points: Vec<StatusPoint> = sampler.await.expect("the /status sampler");
    let after = scrape(http).await;
    sigterm(child.0.as_ref().unwrap().id());
    let status = wait_exit(&mut child, Duration::from_secs(30)).await;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let delta = |name: &str, labels: &[(&str, &str)]| {
        sum(&after, name, labels) - sum(&before, name, labels)
    };
    let seen = oks_since(&points, over.at);
    let back = back_at_rate(&seen, rate());
    let held = seen
        .iter()
        .filter(|&&(t, _)| t >= back)
        .filter_map(|&(t, ok)| {
            let &(u, ok2) = seen.iter().find(|&&(u, _)| u >= t + 0.5)?;
            Some((ok2 - ok) / (u - t) / rate())
        })
        .fold(f64::INFINITY, f64::min);
    let last_error = points
        .windows(2)
        .filter(|w| w[1].error > w[0].error)
        .map(|w| w[1].at)
        .max()
        .map_or(f64::NAN, |t| {
            t.saturating_duration_since(over.at).as_secs_f64()
                - over.at.saturating_duration_since(t).as_secs_f64()
        });
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
        last_error,
        held,
        errors,
        dropped: delta(
            "mongoload_pool_connections_closed_total",
            &[("reason", "dropped")],
        ),
        clean_exit: status.code() == Some(0) && !stderr.contains("did not shut down"),
        stderr,
    };
    (reading, over)
}

fn row(drill: &str, pool: &str, freeze: f64, r: &Reading) {
    let errors: Vec<String> = r
        .errors
        .iter()
        .map(|(k, n)| format!("{k} {n:.0}"))
        .collect();
    println!(
        "| {drill} | {} | {freeze:.3} s | {:.3} s ({:.0}) | {:.2} s | {:.0} % | {:.2} s | {} | {:.0} | {} |",
        if pool.is_empty() { "plan (512)" } else { "64" },
        r.outage,
        r.outages,
        r.back,
        r.held * 100.0,
        r.last_error,
        if errors.is_empty() {
            "none".to_owned()
        } else {
            errors.join(", ")
        },
        r.dropped,
        if r.clean_exit { "yes" } else { "NO" },
    );
}

/// Seconds from `from` to `t` (negative when earlier).
fn since(from: SystemTime, t: SystemTime) -> f64 {
    match t.duration_since(from) {
        Ok(d) => d.as_secs_f64(),
        Err(e) => -e.duration().as_secs_f64(),
    }
}

/// What the daemon saw of an election, from its log, in seconds after
/// the election the simulator recorded (`over`): when its driver reported
/// the new primary (the topology event), and when the first write after
/// the outage was acknowledged (the outage's end).
fn election_parts(over: &Over, r: &Reading) {
    // The simulator records the election just after the new primary
    // answers: a line of the daemon's may precede the record by a hair.
    let from = over.wall - Duration::from_millis(100);
    let logged =
        |what: &str| log_time(&r.stderr, what, from).map_or(f64::NAN, |t| since(over.wall, t));
    println!(
        "  after the recorded election: driver's new primary {:+.3} s, first write acknowledged {:+.3} s, last error {:+.2} s, back at rate {:+.2} s",
        logged("failover: new primary"),
        logged("write outage over"),
        r.last_error,
        r.back,
    );
}

/// What to run: freeze lengths (seconds) of SIGSTOP drills, and whether
/// to run the frozen-primary drills, with which election timeout.
/// Arguments: numbers are freeze lengths; `election` runs the
/// frozen-primary drills alone (MongoDB's 10 s election timeout),
/// `election=SECS` with that timeout. None: every drill.
fn plan() -> (Vec<u64>, Option<u64>) {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(r) = args.iter().find_map(|a| a.strip_prefix("rate=")) {
        RATE_SET
            .set(
                r.parse()
                    .expect("rate=N: a number of operations per second"),
            )
            .expect("one rate");
    }
    let lengths: Vec<u64> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let election = args.iter().find_map(|a| match a.strip_prefix("election") {
        Some("") => Some(10),
        Some(n) => n.strip_prefix('=').and_then(|n| n.parse().ok()),
        None => None,
    });
    match (lengths.is_empty(), election) {
        (true, None) => (vec![1, 3, 10, 30], Some(10)),
        (false, None) => (lengths, None),
        (_, Some(e)) => (lengths, Some(e)),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let (lengths, election) = plan();
    println!("| drill | pool | freeze | write outage (outages) | back after | lowest 0.5 s after | last error | errors | dropped | clean exit |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for &secs in &lengths {
        for pool in ["", "pool_size = 64"] {
            let port = free_ports(1);
            let sim = spawn_sim(port, &[]);
            let pid = sim.0.id();
            let (r, over) = drill(&format!("mongodb://127.0.0.1:{port}/"), pool, async {
                signal(pid, "STOP");
                let stopped = Instant::now();
                tokio::time::sleep(Duration::from_secs(secs)).await;
                signal(pid, "CONT");
                Over {
                    at: Instant::now(),
                    wall: SystemTime::now(),
                    length: stopped.elapsed().as_secs_f64(),
                }
            })
            .await;
            drop(sim);
            row("SIGSTOP", pool, over.length, &r);
        }
    }
    // A frozen primary, replaced after the election timeout (MongoDB's
    // 10 s by default); the frozen member thaws 2 s after the election
    // (it comes back a secondary), inside the 5 s watched.
    let Some(timeout) = election else { return };
    for pool in ["", "pool_size = 64"] {
        let mut config = ReplSetConfig::new("rs0", 3);
        config.election_timeout = Duration::from_secs(timeout);
        let sim = mongoload::sim::start_replset(SimConfig::default(), config)
            .await
            .expect("the replica set starts");
        let set = sim.replset().unwrap().clone();
        let primary = set.primary().expect("a primary");
        let thaw_set = set.clone();
        let (r, over) = drill(&set.uri(), pool, async {
            assert!(set.faults(primary).freeze());
            // The record's election: the instant the new primary answers.
            let record = loop {
                match set.faults(primary).records().last() {
                    Some(r) if r.election.is_some() => break r.clone(),
                    _ => tokio::time::sleep(Duration::from_millis(10)).await,
                }
            };
            let elected = record.election.unwrap();
            tokio::spawn(async move {
                tokio::time::sleep_until((elected + Duration::from_secs(2)).into()).await;
                assert!(thaw_set.faults(primary).thaw());
            });
            Over {
                at: elected,
                wall: record.started + (elected - record.start),
                length: (elected - record.start).as_secs_f64(),
            }
        })
        .await;
        row(
            &format!("frozen primary, {timeout} s election timeout"),
            pool,
            over.length,
            &r,
        );
        election_parts(&over, &r);
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
