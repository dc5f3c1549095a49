//! The fault matrix (issue 21): the faults the simulator records —
//! `freeze`, `blackhole`, `reset` and a slow server ([`FAULTS`])
//! — on a standalone server and on a replica set (the fault on the
//! primary; a slow member is the one the reads go to), under an open-loop
//! and a closed-loop load of `mongoload run` as its own process. Each cell
//! is held to the simulator's own record of its fault, never to what the
//! test meant to inject:
//!
//! - the write outage mongoload measured is the record's within 0.5 s
//!   (a reset: plus the driver's next check, [`driver_check`]): from the
//!   fault's start to its end, or to the election that replaced the
//!   primary if there was one (a slow server: no outage, no error;
//!   the latency of what reads the slow server rises, the rest does not);
//! - the load is back at its level within 1 s plus one
//!   `operation_timeout` of the record's end (open loop: the scheduled
//!   rate, and it holds it; closed loop: the throughput before the fault,
//!   from the run log's per-second counts), and no operation fails after
//!   that;
//! - no counter goes backwards (`/metrics` scraped every 200 ms);
//! - every operation is accounted for: open loop ok + errors + missed =
//!   scheduled; closed loop, the run log's ok + errors = the daemon's own
//!   count (its final summary) = the sum of the run log's operations.
//!
//! The cells of a topology run [`AT_ONCE`] at a time, each with a
//! simulator and a daemon of its own (the bounds are against each cell's
//! own record, and a cell uses a tenth of a core); each prints its line of
//! the table in BENCHMARKS.md, "Faults", and every bound a cell misses is
//! reported with the whole table at the end.

use std::time::{Duration, Instant, SystemTime};

use crate::common::*;
use crate::faults::{accounted, drill_run_of, replset_of, watch_counters_every, RATE, SLACK};
use mongoload::report::StageReport;
use mongoload::sim::{
    Fault, FaultConfig, FaultRecord, Faults, LatencyDist, SimConfig, SimHandle,
    DEFAULT_ELECTION_TIMEOUT,
};

/// How long each fault lasts.
const FAULT: Duration = Duration::from_secs(2);
/// The stage: the load before the fault, the fault, and the time after
/// it that is watched, with a margin for the daemon's start.
const SECS: u32 = 12;
/// Time at the level before the fault.
const BEFORE: Duration = Duration::from_secs(2);
/// Time watched after the fault's end: the bound below and a 0.5 s window.
const AFTER: Duration = Duration::from_millis(2500);
/// The drill's `operation_timeout` ([`drill_run_of`]), in seconds.
const OPERATION_TIMEOUT: f64 = 1.0;
/// The load is back within this of the record's end: 1 s, plus one
/// `operation_timeout` for the operations already sent.
const BACK_WITHIN: f64 = 1.0 + OPERATION_TIMEOUT;
/// The closed loop's workers.
const WORKERS: u32 = 16;
/// Every command but the handshake takes this long on every server: the
/// closed loop's 16 workers then run about 16 / 50 ms = 320 ops/s, near
/// the open loop's 200/s, instead of as fast as the machine allows.
const LATENCY: Duration = Duration::from_millis(50);
/// A slow server's added latency.
const SLOW: Duration = Duration::from_millis(300);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Topology {
    Standalone,
    /// Three members with MongoDB's 10 s election timeout (the fault on
    /// the primary: shorter than the timeout, so no election); for a slow
    /// member, two with the reads sent to the secondary, the slow one.
    ReplicaSet,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Loop {
    /// [`RATE`] ops/s, `max_inflight` 128.
    Open,
    /// [`WORKERS`] workers.
    Closed,
}

#[derive(Debug, Clone, Copy)]
struct Cell {
    fault: Fault,
    topology: Topology,
    load: Loop,
}

/// The faults of the matrix.
const FAULTS: [Fault; 4] = [
    Fault::Freeze,
    Fault::Blackhole,
    Fault::Reset,
    Fault::Slow(SLOW),
];

/// What the driver adds to a reset's outage: a reset makes it mark the
/// server unknown, and it finds the server again only at its next check,
/// at most one every 500 ms (the SDAM specification's
/// minHeartbeatFrequencyMS, fixed), so every client of the deployment is
/// without it until then, and the outage mongoload reads is the record
/// rounded up to that check plus about 0.1 s (BENCHMARKS.md, "Faults":
/// up to 2.62 s for a reset of 2.05 s). A silent server (freeze,
/// blackhole) keeps its connections and its monitor's: nothing to add.
fn driver_check(fault: Fault) -> f64 {
    match fault {
        Fault::Reset => 0.5,
        _ => 0.0,
    }
}

/// The cells of one topology: each fault under each loop.
fn cells(topology: Topology) -> Vec<Cell> {
    FAULTS
        .into_iter()
        .flat_map(|fault| {
            [Loop::Open, Loop::Closed].map(|load| Cell {
                fault,
                topology,
                load,
            })
        })
        .collect()
}

/// The deployment of a cell: the simulator, the fault handle of the
/// server the fault goes on, and the connection string.
async fn deploy(cell: Cell) -> (SimHandle, Faults, String) {
    let config = SimConfig {
        faults: FaultConfig {
            latency: Some(LatencyDist::Fixed(LATENCY)),
            ..FaultConfig::default()
        },
        ..SimConfig::default()
    };
    match (cell.topology, cell.fault) {
        (Topology::Standalone, _) => {
            let sim = sim_with(config).await;
            let faults = sim.faults().clone();
            let uri = sim.uri();
            (sim, faults, uri)
        }
        (Topology::ReplicaSet, Fault::Slow(_)) => {
            // With two secondaries the driver sends few reads to the slow
            // one (it picks the member with fewer operations in flight).
            let sim = replset_of(config, 2, DEFAULT_ELECTION_TIMEOUT).await;
            let set = sim.replset().unwrap().clone();
            assert_eq!(set.primary(), Some(0));
            let uri = format!("{}&readPreference=secondary", set.uri());
            (sim, set.faults(1).clone(), uri)
        }
        (Topology::ReplicaSet, _) => {
            let sim = replset_of(config, 3, DEFAULT_ELECTION_TIMEOUT).await;
            let set = sim.replset().unwrap().clone();
            assert_eq!(set.primary(), Some(0));
            let uri = set.uri();
            (sim, set.faults(0).clone(), uri)
        }
    }
}

/// The whole intervals of the run log's samples inside `from..to` (wall
/// clock), by index.
fn intervals_between(stage: &StageReport, from: SystemTime, to: SystemTime) -> Vec<usize> {
    let start = SystemTime::from(chrono::DateTime::parse_from_rfc3339(&stage.start).unwrap());
    let samples = stage.samples.as_ref().expect("samples");
    let interval = Duration::from_secs_f64(samples.interval_seconds);
    (0..samples.all.ok.len())
        .filter(|&i| {
            let a = start + interval * i as u32;
            a >= from && a + interval <= to
        })
        .collect()
}

/// Successful operations per second over the whole intervals of the run
/// log's samples inside `from..to` (`NaN` if there is none): the
/// daemon's own count, however slowly `/status` answered meanwhile.
fn ok_rate_between(stage: &StageReport, from: SystemTime, to: SystemTime) -> f64 {
    let samples = stage.samples.as_ref().expect("samples");
    let ok: Vec<f64> = intervals_between(stage, from, to)
        .into_iter()
        .map(|i| samples.all.ok[i] as f64)
        .collect();
    ok.iter().sum::<f64>() / ok.len() as f64 / samples.interval_seconds
}

/// The mean of the per-second p50 latencies the run log holds for `op`
/// over the whole intervals of the stage inside `from..to` (wall clock);
/// `NaN` if there is none.
fn p50_between(stage: &StageReport, op: &str, from: SystemTime, to: SystemTime) -> f64 {
    let series = stage
        .ops
        .iter()
        .find(|o| o.op == op)
        .and_then(|o| o.samples.as_ref())
        .unwrap_or_else(|| panic!("no samples of {op}"));
    let p50: Vec<f64> = intervals_between(stage, from, to)
        .into_iter()
        .map(|i| series.p50_ns[i])
        .filter(|&p| p > 0)
        .map(|p| p as f64 / 1e9)
        .collect();
    p50.iter().sum::<f64>() / p50.len() as f64
}

/// How much the per-second p50 latency of `op` rose from before the
/// fault to inside it, in seconds. A fault lasts at least [`FAULT`], 2 s,
/// so a whole interval of the samples lies inside it wherever the fault
/// began on the samples' 1 s grid (a busy machine delays the fault's
/// start from the stage's); what was sent before the fault finishes in
/// that interval's first [`LATENCY`], too few operations to move a p50.
fn p50_rise(stage: &StageReport, op: &str, record: &FaultRecord) -> f64 {
    let start = record.started;
    let end = start + record.length();
    p50_between(stage, op, start, end) - p50_between(stage, op, SystemTime::UNIX_EPOCH, start)
}

const READS: &[&str] = &["find"];
const WRITES: &[&str] = &["insert", "update", "delete"];

/// `(ok, errors, missed)` of the daemon's final summary line.
fn final_summary(stderr: &str) -> Option<(u64, u64, u64)> {
    let line = stderr.lines().find(|l| l.contains("final: "))?;
    let words: Vec<&str> = line.split("final: ").nth(1)?.split_whitespace().collect();
    // "N operations ok, N errors, N missed in …"
    let n = |i: usize| words.get(i)?.trim_end_matches(',').parse().ok();
    Some((n(0)?, n(3)?, n(5)?))
}

/// What one cell measured, and the bounds it missed.
struct Figures {
    cell: Cell,
    record: FaultRecord,
    /// The write outages mongoload measured over the cell, summed, and
    /// how many.
    outage: f64,
    outages: f64,
    /// Time the driver knew no primary over the cell.
    no_primary: f64,
    /// The level the load must be back at, and when it was, after the
    /// record's end.
    level: f64,
    back: f64,
    /// The rise of the per-second p50 latency (the run log's samples) of
    /// reads and of writes (the most of any write operation) from before
    /// the fault to inside it ([`p50_rise`]), in seconds.
    rise: (f64, f64),
    stage: StageReport,
    failed: Vec<String>,
}

/// The table's head, for the lines of [`Figures::line`].
const HEAD: &str = "| fault | topology | loop | recorded | write outage | no primary | back at level | level | errors by class | latency rise (reads, writes) | ok / errors / missed | bounds |\n|---|---|---|---|---|---|---|---|---|---|---|---|";

impl Figures {
    /// The cell's line of the table ([`HEAD`]).
    fn line(&self) -> String {
        let c = self.cell;
        let s = |x: f64| format!("{x:.3} s");
        let recorded = match self.record.election {
            Some(e) => format!(
                "{} (election at {})",
                s(self.record.length().as_secs_f64()),
                s((e - self.record.start).as_secs_f64())
            ),
            None => s(self.record.length().as_secs_f64()),
        };
        let outage = if self.outages == 0.0 {
            "none".to_owned()
        } else if self.outages > 1.0 {
            format!("{} ({} outages)", s(self.outage), self.outages)
        } else {
            s(self.outage)
        };
        let no_primary = match self.no_primary {
            x if x > 0.0 => s(x),
            _ => "none".to_owned(),
        };
        let errors: Vec<String> = self
            .stage
            .errors
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        let errors = match errors.is_empty() {
            true => "none".to_owned(),
            false => errors.join(", "),
        };
        let rise = match c.fault {
            Fault::Slow(_) => format!("{:+.0} ms, {:+.0} ms", self.rise.0 * 1e3, self.rise.1 * 1e3),
            _ => "–".to_owned(),
        };
        let topology = match c.topology {
            Topology::Standalone => "standalone",
            Topology::ReplicaSet => "replica set",
        };
        let load = match c.load {
            Loop::Open => "open",
            Loop::Closed => "closed",
        };
        let o = &self.stage.operations;
        let bounds = match self.failed.is_empty() {
            true => "met".to_owned(),
            false => format!("FAILED: {}", self.failed.join("; ")),
        };
        format!(
            "| {} | {topology} | {load} | {recorded} | {outage} | {no_primary} | {:.2} s | {:.0}/s | {errors} | {rise} | {} / {} / {} | {bounds} |",
            c.fault.name(),
            self.back,
            self.level,
            o.ok,
            o.error,
            self.stage.missed,
        )
    }
}

/// Runs one cell: the load, the fault 2 s after the daemon is ready, 2.5 s
/// watched after its end; returns the figures and the bounds missed.
async fn run_cell(cell: Cell) -> Figures {
    let (sim, faults, uri) = deploy(cell).await;
    let level = match cell.load {
        Loop::Open => format!("rate = {RATE}"),
        Loop::Closed => format!("concurrency = {WORKERS}"),
    };
    // Half the operations write, so that the first write into the fault
    // dates the outage's start closely even with the closed loop's 16
    // operations in flight.
    let mut run = drill_run_of(&uri, &level, SECS, |t| {
        let mix = "insert = 6.5\nupdate = 3\ndelete = 3\nfind = 87.5";
        assert!(t.contains(mix), "{t}");
        t.replace(mix, "insert = 25\nupdate = 12.5\ndelete = 12.5\nfind = 50")
    });
    let http = run.http;
    wait_status(http, "/readyz", 200, Duration::from_secs(30)).await;
    let ready = Instant::now();
    let (stop_watch, watcher) = watch_counters_every(http, Duration::from_millis(200));
    let (stop_sampler, sampler) = sample_status(http);
    // The timeline keeps to its deadlines however long a scrape takes on
    // a busy machine (only the fault's record counts, not these).
    tokio::time::sleep(BEFORE / 2).await;
    let before = scrape(http).await;
    tokio::time::sleep_until((ready + BEFORE).into()).await;

    assert!(faults.begin(cell.fault), "{cell:?}");
    let began = Instant::now();
    tokio::time::sleep_until((began + FAULT).into()).await;
    assert!(faults.end(cell.fault), "{cell:?}");
    let record = faults
        .records()
        .last()
        .cloned()
        .expect("the fault's record");
    let end = record.end.expect("the record's end");
    tokio::time::sleep_until((end + AFTER).into()).await;
    let after = scrape(http).await;
    let watched = SystemTime::now();
    let _ = stop_sampler.send(());
    let points = sampler.await.expect("the /status sampler");

    let status = wait_exit(&mut run.child, Duration::from_secs(30)).await;
    let _ = stop_watch.send(());
    let pages = watcher.await;
    let stderr = std::fs::read_to_string(&run.stderr).unwrap();
    assert!(status.success(), "{cell:?}: {stderr}");
    let reports = read_run_log(&run.log);
    assert_eq!(reports.len(), 1, "{reports:#?}");
    let stage = reports.into_iter().next().unwrap();
    sim.shutdown().await;

    let mut failed = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            failed.push(what);
        }
    };
    match pages {
        Ok(n) => check(n >= 5, format!("only {n} pages compared")),
        Err(e) => check(false, format!("a counter went backwards: {e}")),
    }
    let ended = chrono::DateTime::parse_from_rfc3339(&stage.end).unwrap();
    check(
        SystemTime::from(ended) >= watched,
        format!(
            "the stage ended at {} before the cell was watched to its end",
            stage.end
        ),
    );

    // The outage against the record.
    let diff = |name: &str| sum(&after, name, &[]) - sum(&before, name, &[]);
    let outage = diff("mongoload_write_outage_seconds_sum");
    let outages = diff("mongoload_write_outage_seconds_count");
    let no_primary = diff("mongoload_no_primary_seconds_sum");
    let expected = match cell.fault {
        Fault::Slow(_) => None,
        _ => Some((record.election.unwrap_or(end) - record.start).as_secs_f64()),
    };
    match expected {
        Some(x) => {
            check(outages >= 1.0, "no write outage".into());
            let late = driver_check(cell.fault);
            check(
                outage >= x - 0.5 && outage <= x + 0.5 + late,
                format!("write outage {outage:.3} s for the record's {x:.3} s"),
            );
            check(
                no_primary <= x + 0.5 + late,
                format!("no primary {no_primary:.3} s for the record's {x:.3} s"),
            );
            check(stage.operations.error > 0, "the fault was not felt".into());
            // A silent server's operations time out; a reset fails them
            // on the reset and then in the driver's server selection.
            let classes: &[&str] = match cell.fault {
                Fault::Reset => &["network", "server_selection", "timeout"],
                _ => &["timeout"],
            };
            for (kind, n) in &stage.errors {
                check(
                    *n == 0 || classes.contains(&kind.as_str()),
                    format!("{n} {kind} errors"),
                );
            }
        }
        None => {
            check(outages == 0.0, format!("{outages} write outages"));
            check(no_primary == 0.0, format!("no primary {no_primary:.3} s"));
            check(
                stage.operations.error == 0,
                format!("errors {:?}", stage.errors),
            );
        }
    }

    // The level before the fault, and back at it after.
    // (An open loop's schedule is its level: one slow second of a busy
    // machine before the fault says nothing about the fault.)
    let level = match cell.load {
        Loop::Open => RATE,
        Loop::Closed => ok_rate_between(&stage, SystemTime::UNIX_EPOCH, record.started),
    };
    check(level > 0.0, format!("{level:.0} ops/s before the fault"));
    let seen = oks_since(&points, end);
    let back = back_at_rate(&seen, level);
    check(
        back <= BACK_WITHIN,
        format!("back at {level:.0}/s {back:.2} s after the record's end"),
    );
    // Open loop, the schedule holds from then on. (A closed loop's
    // throughput follows the CPU it gets, which a busy machine changes
    // more than the fault did: only its return is held to a bound.)
    if let (Loop::Open, Some(&(t, ok)), Some(&(u, last))) = (
        cell.load,
        seen.iter().find(|&&(t, _)| t >= back),
        seen.last(),
    ) {
        let held = (last - ok) / (u - t);
        check(
            u - t < 0.5 || held >= 0.85 * level,
            format!("{held:.0} ops/s from {t:.2} s to {u:.2} s after the end, under {level:.0}/s"),
        );
    }
    // Only operations sent during the fault, or in flight when it began,
    // may fail: none from one operation_timeout after its end on.
    let settled = points
        .iter()
        .find(|p| p.at >= end + Duration::from_secs_f64(OPERATION_TIMEOUT + SLACK));
    if let (Some(s), Some(last)) = (settled, points.last()) {
        check(
            last.error == s.error,
            format!(
                "{} errors from {:.1} s after the end on",
                last.error - s.error,
                OPERATION_TIMEOUT + SLACK
            ),
        );
    } else {
        check(false, "no /status point after the fault settled".into());
    }

    // A slow server: what reads it is slower, the rest is not.
    let rise = |ops: &[&str]| {
        ops.iter()
            .map(|op| p50_rise(&stage, op, &record))
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let rise = (rise(READS), rise(WRITES));
    if let Fault::Slow(slow) = cell.fault {
        let half = slow.as_secs_f64() / 2.0;
        check(
            rise.0 >= half,
            format!("reads {:+.0} ms during the fault", rise.0 * 1e3),
        );
        match cell.topology {
            // Everything is on the slow server.
            Topology::Standalone => check(
                rise.1 >= half,
                format!("writes {:+.0} ms during the fault", rise.1 * 1e3),
            ),
            // The writes go to the primary.
            Topology::ReplicaSet => check(
                rise.1 < half / 2.0,
                format!("writes {:+.0} ms during the fault", rise.1 * 1e3),
            ),
        }
    }

    // Every operation accounted for.
    match cell.load {
        Loop::Open => {
            if let Err(e) = accounted(&stage, SECS) {
                check(false, e);
            }
        }
        Loop::Closed => check(stage.missed == 0, format!("{} missed", stage.missed)),
    }
    let ops: (u64, u64) = stage.ops.iter().fold((0, 0), |(o, e), op| {
        (o + op.operations.ok, e + op.operations.error)
    });
    check(
        ops == (stage.operations.ok, stage.operations.error),
        format!(
            "the ops add up to {ops:?}, the stage's {:?}",
            stage.operations
        ),
    );
    let summary = final_summary(&stderr);
    check(
        summary == Some((stage.operations.ok, stage.operations.error, stage.missed)),
        format!(
            "final summary {summary:?}, run log {:?} and {} missed",
            stage.operations, stage.missed
        ),
    );
    if let Some(last) = points.last() {
        check(
            last.ok + last.error <= (stage.operations.ok + stage.operations.error) as f64,
            format!(
                "/status counted {} + {}, more than the run log",
                last.ok, last.error
            ),
        );
    }

    if !failed.is_empty() {
        eprintln!("{cell:?} {record:?}: {failed:?}\n{stderr}");
    }
    Figures {
        cell,
        record,
        outage,
        outages,
        no_primary,
        level,
        back,
        rise,
        stage,
        failed,
    }
}

/// How many cells of a topology run at once: each is a daemon process at
/// about 200–320 ops/s against a simulator of its own in this process.
const AT_ONCE: usize = 4;

/// Runs the cells of `topology` ([`AT_ONCE`] at a time), prints the
/// table, and fails naming every bound a cell missed.
async fn matrix(topology: Topology) {
    use futures::StreamExt;
    let mut lines = Vec::new();
    let mut failed = Vec::new();
    let mut figures = futures::stream::iter(cells(topology))
        .map(run_cell)
        .buffered(AT_ONCE);
    while let Some(f) = figures.next().await {
        let cell = f.cell;
        let line = f.line();
        eprintln!("{line}");
        lines.push(line);
        if !f.failed.is_empty() {
            failed.push(format!("{cell:?}: {:?}", f.failed));
        }
    }
    let table = lines.join("\n");
    eprintln!("fault matrix, {topology:?}:\n{HEAD}\n{table}");
    assert!(failed.is_empty(), "{failed:#?}\n{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_matrix_on_a_standalone_server() {
    matrix(Topology::Standalone).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_matrix_on_a_replica_set() {
    matrix(Topology::ReplicaSet).await;
}
