//! Cluster faults and shutdown, against `mongoload run` as its own process
//! and the simulator in the test: every fault the simulator injects is
//! counted under its class, the load recovers to its scheduled rate within
//! 5 s of the fault ending, no counter ever goes backwards, the log holds
//! one line per error class per 10 s whatever the number of workers, and
//! SIGTERM at any moment ends the run within its grace period with the
//! final summary and a complete run log.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;
use mongoload::report::StageReport;
use mongoload::sim::{ErrorFault, Fault as SimFault, ReplSetConfig, SimConfig, SimHandle, Stall};

/// The scheduled rate: easily sustained by a debug build on a busy 2-core
/// machine.
pub(super) const RATE: f64 = 200.0;

/// Every counter-like series of a page (`*_total`, `*_count`, `*_sum`,
/// `*_bucket`), keyed by name and labels.
fn counters(page: &str) -> HashMap<String, f64> {
    parse_metrics(page)
        .unwrap()
        .into_iter()
        .filter(|s| {
            ["_total", "_count", "_sum", "_bucket"]
                .iter()
                .any(|x| s.name.ends_with(x))
                && !s.name.starts_with("process_")
        })
        .map(|s| (format!("{}{:?}", s.name, s.labels), s.value))
        .collect()
}

/// Scrapes every 250 ms until stopped, failing on any counter that goes
/// backwards between two scrapes; returns how many pages it compared.
fn watch_counters(
    addr: std::net::SocketAddr,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<usize>,
) {
    watch_counters_every(addr, Duration::from_millis(250))
}

/// [`watch_counters`], scraping every `interval`.
pub(super) fn watch_counters_every(
    addr: std::net::SocketAddr,
    interval: Duration,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<usize>,
) {
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut last: HashMap<String, f64> = HashMap::new();
        let mut pages = 0;
        loop {
            if let Ok(r) = get(addr, "/metrics").await {
                if r.status == 200 {
                    // Parsed off the runtime's threads: a page takes a
                    // debug build a while, and the test's timing must not
                    // wait behind it.
                    let now = tokio::task::spawn_blocking(move || counters(&r.body))
                        .await
                        .expect("the page parses");
                    for (series, v) in &now {
                        if let Some(before) = last.get(series) {
                            assert!(v >= before, "{series} went backwards: {before} → {v}");
                        }
                    }
                    last = now;
                    pages += 1;
                }
            }
            tokio::select! {
                _ = &mut stopped => return pages,
                _ = tokio::time::sleep(interval) => {}
            }
        }
    });
    (stop, task)
}

pub(super) fn errors_by_kind(page: &str) -> HashMap<String, f64> {
    let mut out = HashMap::new();
    for s in samples(page, "mongoload_errors_total", &[("workload", "w")]) {
        if s.label("op") != Some("prepare") {
            *out.entry(s.label("kind").unwrap().to_owned()).or_default() += s.value;
        }
    }
    out
}

pub(super) fn ok_ops(page: &str) -> f64 {
    sum(
        page,
        "mongoload_operations_total",
        &[("workload", "w"), ("outcome", "ok")],
    )
}

/// A fault the simulator injects for a few seconds, and the error classes
/// its failures may be counted under.
struct Fault {
    name: &'static str,
    kinds: &'static [&'static str],
}

const FAULTS: &[Fault] = &[
    Fault {
        // Shorter than the operation timeout: operations wait, none fails.
        name: "stall",
        kinds: &[],
    },
    Fault {
        name: "error 10107",
        kinds: &["not_primary"],
    },
    Fault {
        // ShutdownInProgress clears the driver's pool: operations on other
        // connections of it fail as network errors.
        name: "error 91",
        kinds: &["not_primary", "network"],
    },
    Fault {
        name: "error 112",
        kinds: &["write_conflict"],
    },
    Fault {
        name: "error 50",
        kinds: &["timeout"],
    },
    Fault {
        // The driver marks the server unknown after a network error, so
        // operations in between fail server selection (or time out).
        name: "dropped connections",
        kinds: &["network", "server_selection", "timeout"],
    },
    Fault {
        name: "refused connections",
        kinds: &["network", "server_selection", "timeout"],
    },
    Fault {
        name: "listener stopped",
        kinds: &["network", "server_selection", "timeout"],
    },
];

async fn inject(sim: &SimHandle, name: &str) {
    let error = |code| {
        Some(ErrorFault {
            rate: 1.0,
            code,
            commands: vec![],
        })
    };
    match name {
        "stall" => sim.faults().set_stall(Some(Stall {
            duration: Duration::from_millis(1500),
            period: Duration::from_secs(3600),
        })),
        "error 10107" => sim.faults().set_error(error(10107)),
        "error 91" => sim.faults().set_error(error(91)),
        "error 112" => sim.faults().set_error(error(112)),
        "error 50" => sim.faults().set_error(error(50)),
        "dropped connections" => sim.faults().set_drop_rate(1.0),
        "refused connections" => {
            sim.faults().set_refuse(true);
            sim.faults().drop_connections();
        }
        "listener stopped" => sim.stop_listener().await,
        other => panic!("unknown fault {other}"),
    }
}

async fn clear(sim: &SimHandle) {
    sim.faults().clear();
    sim.restart_listener().await.expect("the listener restarts");
}

/// `(kind, [seconds since the first line])` of the `operation failed`
/// lines of a log.
fn error_lines(stderr: &str) -> HashMap<String, Vec<f64>> {
    let mut out: HashMap<String, Vec<f64>> = HashMap::new();
    let mut first = None;
    for line in stderr.lines().filter(|l| l.contains("operation failed")) {
        let at = chrono::DateTime::parse_from_rfc3339(line.split_whitespace().next().unwrap())
            .expect("a timestamp starts the line");
        let t0 = *first.get_or_insert(at);
        let kind = line
            .split("error_kind=")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .unwrap_or("?")
            .to_owned();
        out.entry(kind)
            .or_default()
            .push((at - t0).num_milliseconds() as f64 / 1000.0);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_is_counted_by_class_and_the_rate_recovers() {
    // Rates are measured: one daemon at a time.
    let sim = sim().await;
    let http = free_port();
    // 512 workers: an outage fails hundreds of operations at once.
    let toml = config_toml(
        &sim.uri(),
        "[[workloads.stages]]\nrate = 200\nduration = \"1h\"\n",
    )
    .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{http}\""))
    .replace("max_inflight = 32", "max_inflight = 512")
    .replace("operation_timeout", "pool_size = 64\noperation_timeout");
    let file = write_config(&toml);
    let (mut child, stderr_path) = spawn_run(&file, "info");
    wait_status(http, "/readyz", 200, Duration::from_secs(30)).await;
    let (stop_watch, watcher) = watch_counters(http);
    tokio::time::sleep(Duration::from_secs(2)).await;

    let mut log = Vec::new();
    for fault in FAULTS {
        let before = errors_by_kind(&scrape(http).await);
        inject(&sim, fault.name).await;
        tokio::time::sleep(Duration::from_secs(3)).await;
        clear(&sim).await;
        let ended = Instant::now();
        // Within 5 s of the fault ending the load is back: from then on,
        // no error and the scheduled rate.
        tokio::time::sleep_until((ended + Duration::from_secs(5)).into()).await;
        let p1 = scrape(http).await;
        let t1 = Instant::now();
        tokio::time::sleep(Duration::from_secs(3)).await;
        let p2 = scrape(http).await;
        let secs = t1.elapsed().as_secs_f64();
        let after = errors_by_kind(&p1);
        let counted: Vec<(String, f64)> = after
            .iter()
            .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
            .filter(|(_, d)| *d > 0.0)
            .collect();
        let new_errors: f64 =
            errors_by_kind(&p2).values().sum::<f64>() - after.values().sum::<f64>();
        let rate = (ok_ops(&p2) - ok_ops(&p1)) / secs;
        log.push(format!(
            "{}: counted {counted:?}, then {new_errors} errors and {rate:.0} ops/s",
            fault.name
        ));
        eprintln!("{}", log.last().unwrap());
        assert_eq!(
            counted.is_empty(),
            fault.kinds.is_empty(),
            "{} was not counted as expected: {log:#?}",
            fault.name
        );
        for (kind, _) in &counted {
            assert!(
                fault.kinds.contains(&kind.as_str()),
                "{} counted as {kind}: {log:#?}",
                fault.name
            );
        }
        assert_eq!(
            new_errors, 0.0,
            "errors 5 s after {} ended: {log:#?}",
            fault.name
        );
        assert!(
            rate >= 0.85 * RATE,
            "not back to {RATE} ops/s 5 s after {} ended: {log:#?}",
            fault.name
        );
    }

    let _ = stop_watch.send(());
    let pages = watcher.await.expect("no counter went backwards");
    assert!(pages > 50, "only {pages} pages compared");
    sigterm(child.id());
    let status = wait_exit(&mut child, Duration::from_secs(20)).await;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");

    // One line per class per 10 s, whatever the 512 workers did.
    let lines = error_lines(&stderr);
    for (kind, at) in &lines {
        for pair in at.windows(2) {
            assert!(
                pair[1] - pair[0] >= 9.9,
                "two {kind} lines {:.1} s apart: {at:?}",
                pair[1] - pair[0]
            );
        }
    }
    let total: usize = lines.values().map(Vec::len).sum();
    eprintln!("operation failed lines: {total} ({lines:?})");
    assert!(total >= 4, "the faults were not logged at all:\n{stderr}");
    assert!(
        stderr.contains("not logged)"),
        "no line gave a suppressed count:\n{stderr}"
    );
}

/// A run with a run log and a grace period of 3 s; `stages` as given.
fn shutdown_config(
    sim: &SimHandle,
    http: std::net::SocketAddr,
    runlog: &Path,
    stages: &str,
) -> String {
    config_toml(&sim.uri(), stages)
        .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{http}\""))
        .replace(
            "shutdown_grace = \"3s\"",
            &format!("shutdown_grace = \"3s\"\nlog = \"{}\"", runlog.display()),
        )
}

/// Every line of the run log is a whole stage report, the file ends with
/// a newline, and the last report is the stage cut short.
fn assert_run_log_complete(path: &Path, expect_partial: bool) -> Vec<StageReport> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    if text.is_empty() {
        assert!(!expect_partial, "no run log at {}", path.display());
        return Vec::new();
    }
    assert!(text.ends_with('\n'), "torn last line: {text:?}");
    let reports = mongoload::report::read(path).unwrap_or_else(|e| panic!("{e}:\n{text}"));
    if expect_partial {
        let last = reports
            .last()
            .unwrap_or_else(|| panic!("no stage report:\n{text}"));
        assert!(
            last.partial,
            "the stage cut short is not marked partial: {text}"
        );
    }
    reports
}

/// SIGTERM; the process must end with exit 0 within the 3 s grace period
/// (plus 3 s of slack for a busy machine), having logged its final summary.
async fn terminate(child: &mut ChildGuard, stderr_path: &Path, phase: &str) -> String {
    let t0 = Instant::now();
    sigterm(child.id());
    let status = wait_exit(child, Duration::from_secs(30)).await;
    let took = t0.elapsed();
    let stderr = std::fs::read_to_string(stderr_path).unwrap();
    eprintln!("{phase}: exited {status} {took:.2?} after SIGTERM");
    assert_eq!(status.code(), Some(0), "{phase}:\n{stderr}");
    assert!(
        took < Duration::from_secs(6),
        "{phase}: took {took:?} after SIGTERM with a 3 s grace:\n{stderr}"
    );
    assert!(
        stderr.contains("final: "),
        "{phase}: no final summary:\n{stderr}"
    );
    stderr
}

/// A daemon for the shutdown cases: `stages`, a run log, the 3 s grace,
/// `edit` applied to the config text.
struct ShutdownRun {
    http: std::net::SocketAddr,
    runlog: std::path::PathBuf,
    child: ChildGuard,
    stderr: std::path::PathBuf,
    _dir: tempfile::TempDir,
    _file: ConfigFile,
}

fn shutdown_run(sim: &SimHandle, stages: &str, edit: impl Fn(String) -> String) -> ShutdownRun {
    let http = free_port();
    let dir = tempfile::tempdir().unwrap();
    let runlog = dir.path().join("runs.jsonl");
    let file = write_config(&edit(shutdown_config(sim, http, &runlog, stages)));
    let (child, stderr) = spawn_run(&file, "info");
    ShutdownRun {
        http,
        runlog,
        child,
        stderr,
        _dir: dir,
        _file: file,
    }
}

/// Waits until the text of `path` satisfies `pred`.
async fn wait_file(path: &Path, what: &str, pred: fn(&str) -> bool) {
    wait_for(what, Duration::from_secs(30), || async move {
        std::fs::read_to_string(path)
            .ok()
            .filter(|t| pred(t))
            .map(|_| ())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_prepare_mid_stage_and_in_a_reconnect_storm() {
    // Rates are measured: one daemon at a time.
    // During prepare: a load slowed to a crawl by 20 ms per command.
    let sim = sim().await;
    sim.faults()
        .set_latency(Some(mongoload::sim::LatencyDist::Fixed(
            Duration::from_millis(20),
        )));
    let mut run = shutdown_run(
        &sim,
        "[[workloads.stages]]\nrate = 100\nduration = \"1m\"\n",
        |t| {
            t.replace("initial_docs = 200", "initial_docs = 1000000")
                .replace("load_batch = 100", "load_batch = 10")
        },
    );
    wait_file(&run.stderr, "prepare to be under way", |t| {
        t.contains("prepare: ")
    })
    .await;
    let stderr = terminate(&mut run.child, &run.stderr, "during prepare").await;
    assert!(!stderr.contains("did not shut down"), "{stderr}");
    assert!(assert_run_log_complete(&run.runlog, false).is_empty());

    // Mid-stage.
    let sim = crate::common::sim().await;
    let mut run = shutdown_run(
        &sim,
        "[[workloads.stages]]\nname = \"a\"\nrate = 200\nduration = \"2s\"\n\
         [[workloads.stages]]\nname = \"b\"\nrate = 200\nduration = \"1m\"\n",
        |t| t,
    );
    wait_file(&run.runlog, "stage b", |t| !t.is_empty()).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stderr = terminate(&mut run.child, &run.stderr, "mid-stage").await;
    assert!(!stderr.contains("did not shut down"), "{stderr}");
    let reports = assert_run_log_complete(&run.runlog, true);
    assert_eq!(reports.len(), 2);
    assert!(!reports[0].partial && reports[1].stage == "b");

    // In a reconnect storm: the deployment went away with operations in
    // flight, and the driver is reconnecting.
    let mut run = shutdown_run(
        &sim,
        "[[workloads.stages]]\nrate = 200\nduration = \"1m\"\n",
        |t| t.replace("max_inflight = 32", "max_inflight = 256"),
    );
    wait_status(run.http, "/readyz", 200, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    sim.stop_listener().await;
    wait_metric(
        run.http,
        "errors from the outage",
        Duration::from_secs(20),
        |p| sum(p, "mongoload_errors_total", &[("workload", "w")]) >= 10.0,
    )
    .await;
    terminate(&mut run.child, &run.stderr, "reconnect storm").await;
    let reports = assert_run_log_complete(&run.runlog, true);
    assert_eq!(reports.len(), 1);
    assert!(reports[0].operations.error > 0);
}

/// `mongoload sim` shut down with driver connections open logs no line per
/// connection at INFO.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_logs_no_line_per_connection_at_shutdown() {
    let addr = free_port();
    let dir = tempfile::tempdir().unwrap();
    let stderr_path = dir.path().join("stderr");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["sim", "--listen", &addr.to_string()])
        .env("RUST_LOG", "info")
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .unwrap();
    let mut child = ChildGuard::new(child);
    let mut options = mongodb::options::ClientOptions::parse(format!("mongodb://{addr}/"))
        .await
        .unwrap();
    options.min_pool_size = Some(16);
    options.max_pool_size = Some(16);
    let client = wait_for("the simulator to answer", Duration::from_secs(20), || {
        let options = options.clone();
        async move {
            let c = mongodb::Client::with_options(options).ok()?;
            c.database("admin")
                .run_command(mongodb::bson::doc! {"ping": 1})
                .await
                .ok()?;
            Some(c)
        }
    })
    .await;
    client.warm_connection_pool().await;
    sigterm(child.id());
    let status = wait_exit(&mut child, Duration::from_secs(10)).await;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(status.success(), "{stderr}");
    assert!(stderr.contains("shutting down"), "{stderr}");
    assert!(!stderr.contains("connection closed"), "{stderr}");
}

/// The rate of the freeze drill: the drill runs 2,000/s on a
/// release build; the suite runs a debug build on a shared 2-core machine
/// (a load average of 30 seen while it ran), so the drill runs the rate
/// the other fault tests hold there. A 1 s timeout still leaves hundreds
/// of checkouts abandoned in the driver's queue with a pool of 64.
const FREEZE_RATE: f64 = RATE;

/// Slack for a loaded machine: an operation sent at the thaw may be late
/// by this much on its own, and a scrape there takes up to 0.7 s.
pub(super) const SLACK: f64 = 0.5;

/// Sends `signal` (`STOP`, `CONT`) to process `pid`.
fn signal(pid: u32, signal: &str) {
    let st = std::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill -{signal} {pid} failed: {st}");
}

/// How a drill freezes the server.
enum Freezer {
    /// SIGSTOP and SIGCONT of a `mongoload sim` process.
    Signal(SimProcess),
    /// The simulator's `freeze` fault, through its handle.
    Fault(SimHandle),
}

impl Freezer {
    fn uri(&self, port: u16) -> String {
        match self {
            Freezer::Signal(_) => format!("mongodb://127.0.0.1:{port}/"),
            Freezer::Fault(sim) => sim.uri(),
        }
    }

    fn freeze(&self) {
        match self {
            Freezer::Signal(p) => signal(p.0.id(), "STOP"),
            Freezer::Fault(sim) => assert!(sim.faults().freeze()),
        }
    }

    fn thaw(&self) {
        match self {
            Freezer::Signal(p) => signal(p.0.id(), "CONT"),
            Freezer::Fault(sim) => assert!(sim.faults().thaw()),
        }
    }

    /// The freeze's true length when the simulator recorded it.
    fn recorded(&self) -> Option<f64> {
        match self {
            Freezer::Signal(_) => None,
            Freezer::Fault(sim) => {
                let records = sim.faults().records();
                assert_eq!(records.len(), 1, "{records:?}");
                assert!(records[0].end.is_some(), "{records:?}");
                Some(records[0].length().as_secs_f64())
            }
        }
    }
}

/// Freezes the server (`freezer`) for 3 s, three times
/// `operation_timeout`, under 512 workers with the pool set by `pool`
/// (empty: sized to the plan), and returns what the drill read: (freeze,
/// write outage, seconds after the thaw until the load was back). The
/// freeze is the simulator's record when it keeps one, else the time
/// between the signals.
async fn freeze_drill(freezer: Freezer, port: u16, pool: &str) -> (f64, f64, f64) {
    let http = free_port();
    let toml = config_toml(
        &freezer.uri(port),
        &format!("[[workloads.stages]]\nrate = {FREEZE_RATE}\nduration = \"1h\"\n"),
    )
    .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{http}\""))
    .replace("max_inflight = 32", "max_inflight = 512")
    .replace(
        "operation_timeout = \"2s\"",
        &format!("operation_timeout = \"1s\"\n{pool}"),
    );
    let file = write_config(&toml);
    let (mut child, stderr_path) = spawn_run(&file, "info");
    wait_status(http, "/readyz", 200, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let outages = |p: &str| sum(p, "mongoload_write_outage_seconds_count", &[]);
    let errors = |p: &str| sum(p, "mongoload_errors_total", &[("workload", "w")]);
    let before = scrape(http).await;

    freezer.freeze();
    let stopped = Instant::now();
    tokio::time::sleep(Duration::from_secs(3)).await;
    freezer.thaw();
    let resumed = Instant::now();
    let freeze = freezer
        .recorded()
        .unwrap_or((resumed - stopped).as_secs_f64());

    // Scrapes every 100 ms for 4 s: (seconds since SIGCONT, ok, errors).
    let mut seen = Vec::new();
    while resumed.elapsed() < Duration::from_secs(4) {
        let page = scrape(http).await;
        seen.push((
            resumed.elapsed().as_secs_f64(),
            ok_ops(&page),
            errors(&page),
        ));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = scrape(http).await;
    sigterm(child.id());
    let status = wait_exit(&mut child, Duration::from_secs(20)).await;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    let clears: Vec<(String, f64)> = samples(&after, "mongoload_pool_clears_total", &[])
        .into_iter()
        .map(|s| (s.label("cause").unwrap_or("?").to_owned(), s.value))
        .collect();
    let closed = |p: &str, reason: &str| {
        sum(
            p,
            "mongoload_pool_connections_closed_total",
            &[("reason", reason)],
        )
    };
    let dropped = closed(&after, "dropped") - closed(&before, "dropped");
    let context = format!(
        "pool {pool:?}, freeze {freeze:.3}s, pool clears {clears:?}, connections closed as dropped {dropped}, seen (s after the thaw, ok, errors) {seen:?}\n{stderr}"
    );
    eprintln!("pool {pool:?}: connections closed as dropped during the drill: {dropped}");
    assert_eq!(status.code(), Some(0), "{context}");
    assert!(
        !stderr.contains("did not shut down"),
        "the client hung at exit: {context}"
    );
    assert!(
        errors(&after) > errors(&before),
        "the freeze was not felt: {context}"
    );
    // The connections of the operations the timeout dropped while waiting
    // for their replies are reused once the late replies are read (the
    // driver patch), not closed: closing them emptied the pool, and the
    // load then waited for the pool to be re-established after the thaw.
    assert_eq!(
        dropped, 0.0,
        "connections closed because their operation timed out: {context}"
    );

    // Back: the first scrape from which a 500 ms window holds the rate,
    // and no error counted from one operation_timeout after SIGCONT on
    // (only operations sent during the freeze may fail).
    let oks: Vec<(f64, f64)> = seen.iter().map(|&(t, ok, _)| (t, ok)).collect();
    let back = back_at_rate(&oks, FREEZE_RATE);
    let settled = seen
        .iter()
        .find(|&&(t, _, _)| t >= 1.0 + SLACK)
        .expect("scrapes after the thaw");
    let late_errors = seen.last().unwrap().2 - settled.2;
    assert_eq!(
        late_errors, 0.0,
        "errors one operation_timeout after the thaw: {context}"
    );
    assert!(
        back <= 1.0 + SLACK,
        "not back at rate within 1 s ({back:.2}s): {context}"
    );

    // The outage reads as long as the freeze: the write outages of the
    // drill add up to it (one, or with a loaded machine a straggler of a
    // few ms after it).
    let count = outages(&after) - outages(&before);
    let outage = sum(&after, "mongoload_write_outage_seconds_sum", &[])
        - sum(&before, "mongoload_write_outage_seconds_sum", &[]);
    assert!(count >= 1.0, "no write outage: {context}");
    assert!(
        // Within 0.5 s: the first write sent into the freeze (writes are
        // an eighth of the operations) dates its start.
        (outage - freeze).abs() <= 0.5,
        "outage {outage:.3}s ({count} outages) for a {freeze:.3}s freeze: {context}"
    );
    (freeze, outage, back)
}

/// A server frozen longer than `operation_timeout` (a VM pause, SIGSTOP):
/// the load is back at its rate within 1 s of the server answering again,
/// with the pool sized to the plan and with a pool smaller than the
/// workers, the write outage reads as long as the freeze, and the daemon
/// exits cleanly after. Before the pool fix (vendor/mongodb) the checkouts
/// abandoned by the timeout held the head of the driver's wait queue and
/// the load stayed down 10 s and more after the freeze.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_freeze_reads_as_long_as_it_was_and_the_load_is_back_within_a_second() {
    for pool in ["", "pool_size = 64"] {
        let port = free_ports(1);
        let sim = spawn_sim(port, &[]);
        let (freeze, outage, back) = freeze_drill(Freezer::Signal(sim), port, pool).await;
        eprintln!(
            "pool {pool:?}: freeze {freeze:.3}s, write outage {outage:.3}s, back at rate {back:.2}s after SIGCONT"
        );
    }
}

/// The simulator's `freeze` fault (connections stay open, nothing is read
/// or answered, nothing accepted) reads as SIGSTOP does: the write outage
/// within 0.5 s of the freeze the simulator recorded, the load back at
/// rate within 1 s of the thaw.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulators_freeze_fault_reads_as_long_as_its_record() {
    let sim = sim().await;
    let (freeze, outage, back) = freeze_drill(Freezer::Fault(sim), 0, "").await;
    eprintln!(
        "freeze fault: recorded {freeze:.3}s, write outage {outage:.3}s, back at rate {back:.2}s after the thaw"
    );
}

/// A replica set of `members` whose primary a fault may silence, with a
/// 2 s election timeout (MongoDB's is 10 s: the drill keeps the test short).
async fn set_with_election_timeout(members: usize) -> SimHandle {
    replset_of(SimConfig::default(), members, Duration::from_secs(2)).await
}

/// A replica set `rs0` of `members`, each with `config`'s faults, whose
/// primary a fault silenced for `election_timeout` is replaced.
pub(super) async fn replset_of(
    config: SimConfig,
    members: usize,
    election_timeout: Duration,
) -> SimHandle {
    let mut set = ReplSetConfig::new("rs0", members);
    set.election_timeout = election_timeout;
    mongoload::sim::start_replset(config, set)
        .await
        .expect("the replica set starts")
}

/// A run of `w` as its own process; the files live as long as it.
pub(super) struct DrillRun {
    _file: ConfigFile,
    _dir: tempfile::TempDir,
    pub(super) child: ChildGuard,
    pub(super) stderr: std::path::PathBuf,
    pub(super) http: std::net::SocketAddr,
    pub(super) log: std::path::PathBuf,
}

/// A run of `w` at [`RATE`] ops/s for `secs` against `uri` with a 1 s
/// `operation_timeout`, `max_inflight` 128 and a run log.
fn drill_run(uri: &str, secs: u32) -> DrillRun {
    drill_run_of(uri, &format!("rate = {RATE}"), secs, |t| t)
}

/// [`drill_run`] at `level` (`rate = N` or `concurrency = N`), `edit`
/// applied to the config text.
pub(super) fn drill_run_of(
    uri: &str,
    level: &str,
    secs: u32,
    edit: impl Fn(String) -> String,
) -> DrillRun {
    let http = free_port();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let toml = config_toml(
        uri,
        &format!("[[workloads.stages]]\nname = \"drill\"\n{level}\nduration = \"{secs}s\"\n"),
    )
    .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{http}\""))
    .replace("operation_timeout = \"2s\"", "operation_timeout = \"1s\"")
    .replace("max_inflight = 32", "max_inflight = 128")
    .replace("[run]\n", &format!("[run]\nlog = \"{}\"\n", log.display()));
    let file = write_config(&edit(toml));
    let (child, stderr) = spawn_run(&file, "info");
    DrillRun {
        _file: file,
        _dir: dir,
        child,
        stderr,
        http,
        log,
    }
}

/// A three-member set with a 2 s election timeout, and a [`drill_run`] of
/// `secs` against it, ready and watched ([`watch_counters`]).
async fn replset_drill(
    secs: u32,
) -> (
    SimHandle,
    mongoload::sim::ReplSet,
    DrillRun,
    (
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<usize>,
    ),
) {
    let sim = set_with_election_timeout(3).await;
    let set = sim.replset().unwrap().clone();
    let run = drill_run(&set.uri(), secs);
    wait_status(run.http, "/readyz", 200, Duration::from_secs(30)).await;
    let watch = watch_counters(run.http);
    (sim, set, run, watch)
}

/// Every scheduled operation of a timed stage is accounted for once: ok,
/// failed or missed.
pub(super) fn assert_accounted(r: &StageReport, secs: u32) {
    if let Err(e) = accounted(r, secs) {
        panic!("{e}");
    }
}

/// [`assert_accounted`] as a value: what does not add up, if anything.
pub(super) fn accounted(r: &StageReport, secs: u32) -> Result<(), String> {
    let scheduled = RATE as u64 * u64::from(secs);
    let seen = r.operations.ok + r.operations.error + r.missed;
    if seen.abs_diff(scheduled) <= 1 {
        return Ok(());
    }
    Err(format!(
        "ok {} + errors {} + missed {} = {seen}, scheduled {scheduled}",
        r.operations.ok, r.operations.error, r.missed
    ))
}

/// How soon after the election that replaces a silent primary the load
/// is back at its rate: 1 s, plus one `operation_timeout` (1 s, the
/// drill's) for the operations sent to the silent primary before it.
const BACK_AFTER_ELECTION: f64 = 2.0;

/// A primary silenced by `fault` (frozen, or blackholed) for 3 s is
/// replaced by member 1 once the 2 s election timeout passes and refuses
/// writes when it answers again; mongoload's
/// write outage and time without a primary match the simulator's record
/// of the fault (its start to the election) within 0.5 s; the load is
/// back at its rate within [`BACK_AFTER_ELECTION`] of the election the
/// simulator records, and nothing fails from one `operation_timeout`
/// after it on; every scheduled operation is accounted for and no counter
/// goes backwards.
async fn silent_primary_drill(fault: SimFault) {
    const SECS: u32 = 14;
    let (sim, set, mut run, (stop, watcher)) = replset_drill(SECS).await;
    let (stderr_path, log) = (run.stderr.clone(), run.log.clone());
    let (stop_sampler, sampler) = sample_status(run.http);
    tokio::time::sleep(Duration::from_secs(3)).await;

    assert!(set.faults(0).begin(fault));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(set.faults(0).end(fault));
    // Back, the old primary knows the new term: it refuses a write sent
    // to it alone, never acting as a second primary.
    let old = driver_client(&set.member_uri(0), false, Duration::from_secs(5)).await;
    let refused = old
        .database("mltest")
        .collection::<mongodb::bson::Document>("m")
        .insert_one(mongodb::bson::doc! {"second_primary": true})
        .await;
    assert_eq!(
        refused.as_ref().err().and_then(error_code),
        Some(10107),
        "{fault:?}: {refused:?}"
    );

    // Watched until 4 s after the election the record holds (the bound
    // below and a 0.5 s window, with a margin), before the stage ends.
    let elected_at = set.faults(0).records()[0]
        .election
        .expect("an election 2 s into the fault");
    tokio::time::sleep_until((elected_at + Duration::from_secs(4)).into()).await;
    let _ = stop_sampler.send(());
    let points = sampler.await.expect("the /status sampler");
    let status = wait_exit(&mut run.child, Duration::from_secs(30)).await;
    let _ = stop.send(());
    let pages = watcher.await.expect("no counter went backwards");
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    let records = set.faults(0).records();
    let context = format!("{fault:?}: {records:?}\n{stderr}");
    assert!(status.success(), "{context}");
    // The simulator's record: the fault, and the election 2 s into it.
    assert_eq!(records.len(), 1, "{context}");
    let r = &records[0];
    assert_eq!(r.kind, fault.name());
    let elected = r.election.expect("the record holds the election") - r.start;
    let elected = elected.as_secs_f64();
    assert!(
        r.end.is_some() && (1.99..3.0).contains(&elected),
        "{context}"
    );
    // The frozen member came back a secondary: one election, one term.
    assert_eq!((set.primary(), set.term()), (Some(1), 2), "{context}");
    assert_eq!(set.failovers().len(), 1, "{context}");

    let reports = read_run_log(&log);
    assert_eq!(reports.len(), 1, "{reports:#?}");
    let stage = &reports[0];
    assert_accounted(stage, SECS);
    assert!(
        stage.operations.error > 0,
        "the fault was not felt: {context}"
    );
    let f = &stage.failovers;
    assert_eq!(f.len(), 1, "{f:?}: {context}");
    assert_eq!(f[0].to, set.hosts()[1]);
    let outage = f[0]
        .write_outage_seconds
        .expect("a write outage in the report");
    // The driver knew no primary only between noticing the silence (if
    // it did) and hearing of the election: never longer than the record.
    let no_primary = f[0].no_primary_seconds.unwrap_or(0.0);
    eprintln!(
        "{fault:?} primary: recorded election {elected:.3}s after the start, fault {:.3}s; \
         write outage {outage:.3}s, no primary {no_primary:.3}s; errors {:?}",
        r.length().as_secs_f64(),
        stage.errors
    );
    assert!(
        (outage - elected).abs() <= 0.5,
        "write outage {outage:.3}s, election {elected:.3}s into the fault: {context}"
    );
    assert!(
        no_primary <= elected + 0.5,
        "no primary {no_primary:.3}s, election {elected:.3}s into the fault: {context}"
    );
    // The new primary answers from the election on: the load is back at
    // its rate within 1 s plus one operation_timeout (for the operations
    // sent to the silent primary before it) of the record's election, and
    // no operation fails from one operation_timeout after it on.
    let seen = oks_since(&points, elected_at);
    let back = back_at_rate(&seen, RATE);
    let timeline: Vec<String> = points
        .iter()
        .map(|p| {
            let t = p.at.saturating_duration_since(elected_at).as_secs_f64()
                - elected_at.saturating_duration_since(p.at).as_secs_f64();
            format!("{t:+.2}s ok {} err {}", p.ok, p.error)
        })
        .collect();
    // When the daemon heard of the new primary (its driver's topology
    // event) and saw the first write acknowledged after the outage, from
    // its log, against the record's election (which the simulator writes
    // just after the new primary answers: a line may precede it by a hair).
    let elected_wall = r.started + (elected_at - r.start);
    let logged = |what: &str| {
        let from = elected_wall - Duration::from_millis(100);
        log_time(&stderr, what, from).map_or(f64::NAN, |t| match t.duration_since(elected_wall) {
            Ok(d) => d.as_secs_f64(),
            Err(e) => -e.duration().as_secs_f64(),
        })
    };
    eprintln!(
        "{fault:?} primary: after the recorded election, the driver's new primary {:+.3}s, the first write acknowledged {:+.3}s",
        logged("failover: new primary"),
        logged("write outage over"),
    );
    // What the release bench read before it watched from the election:
    // it began reading 2 s after it, once it had thawed the old primary.
    let from_thaw = back_at_rate(
        &oks_since(&points, elected_at + Duration::from_secs(2)),
        RATE,
    );
    eprintln!(
        "{fault:?} primary: watched only from 2 s after the election (the bench's old reading), back at {:.2}s",
        2.0 + from_thaw
    );
    eprintln!(
        "{fault:?} primary: back at {RATE}/s {back:.2}s after the recorded election; /status around it: {:?}",
        timeline
            .iter()
            .zip(&points)
            .filter(|(_, p)| {
                p.at + Duration::from_secs(2) >= elected_at
                    && p.at <= elected_at + Duration::from_secs(3)
            })
            .map(|(l, _)| l)
            .collect::<Vec<_>>()
    );
    assert!(
        back <= BACK_AFTER_ELECTION,
        "back at {RATE}/s {back:.2}s after the recorded election, over {BACK_AFTER_ELECTION}s: {timeline:?}\n{context}"
    );
    let settled = points
        .iter()
        .find(|p| p.at >= elected_at + Duration::from_secs_f64(1.0 + SLACK))
        .expect("/status points after the election");
    let late = points.last().unwrap().error - settled.error;
    assert_eq!(
        late,
        0.0,
        "errors from {:.1}s after the recorded election on: {timeline:?}\n{context}",
        1.0 + SLACK
    );
    assert!(pages >= 10, "{pages} scrapes: {context}");
    sim.shutdown().await;
}

/// A frozen primary (a paused VM) is replaced after the election timeout,
/// as a real set does, and the write outage reads as the simulator's
/// record of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_primary_is_replaced_after_the_election_timeout() {
    silent_primary_drill(SimFault::Freeze).await;
}

/// A blackholed primary (a partition: connects hang, sockets silent) is
/// replaced after the election timeout; the outage reads as the record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackholed_primary_is_replaced_after_the_election_timeout() {
    silent_primary_drill(SimFault::Blackhole).await;
}

/// Every connection reset (RST) for 2 s, new ones too: the failures are
/// counted under the classes a lost server gives (the driver retries a
/// read or write that met the reset once, so most fail its server
/// selection, not as `network`), the load is back at its rate within 1 s of the record's
/// end, every scheduled operation is accounted for and no counter goes
/// backwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_is_counted_by_class_and_the_load_is_back_within_a_second() {
    const SECS: u32 = 12;
    let sim = sim().await;
    let mut run = drill_run(&sim.uri(), SECS);
    let (stderr_path, log) = (run.stderr.clone(), run.log.clone());
    let http = run.http;
    wait_status(http, "/readyz", 200, Duration::from_secs(30)).await;
    let (stop, watcher) = watch_counters(http);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = scrape(http).await;

    assert!(sim.faults().reset());
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert!(sim.faults().end(SimFault::Reset));
    let record = sim.faults().records()[0].clone();
    let ended = record.end.expect("the record's end");

    // (seconds since the record's end, ok) every 100 ms for 3 s.
    let mut seen = Vec::new();
    while ended.elapsed() < Duration::from_secs(3) {
        let page = scrape(http).await;
        seen.push((ended.elapsed().as_secs_f64(), ok_ops(&page)));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let after = scrape(http).await;
    let status = wait_exit(&mut run.child, Duration::from_secs(30)).await;
    let _ = stop.send(());
    watcher.await.expect("no counter went backwards");
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    let context = format!("{record:?}, seen {seen:?}\n{stderr}");
    assert!(status.success(), "{context}");
    assert_eq!(record.kind, "reset");

    let mut errors = errors_by_kind(&after);
    for (kind, n) in errors_by_kind(&before) {
        *errors.entry(kind).or_default() -= n;
    }
    errors.retain(|_, n| *n > 0.0);
    eprintln!(
        "reset {:.3}s: errors by class {errors:?}",
        record.length().as_secs_f64()
    );
    assert!(
        errors.values().sum::<f64>() > 0.0,
        "the reset was not felt: {context}"
    );
    for kind in errors.keys() {
        assert!(
            ["network", "server_selection", "timeout"].contains(&kind.as_str()),
            "{kind} counted for a reset: {errors:?}: {context}"
        );
    }
    let back = back_at_rate(&seen, RATE);
    eprintln!("reset: back at rate {back:.2}s after the record's end");
    assert!(
        back <= 1.0 + SLACK,
        "not back at rate within 1 s ({back:.2}s): {context}"
    );
    let reports = read_run_log(&log);
    assert_accounted(&reports[0], SECS);
}

/// A two-member set whose secondary is slow (300 ms on every command),
/// with reads sent to the secondary: the reads are slow, the writes (on
/// the primary) are not. (With two secondaries the driver sends few reads
/// to the slow one: it picks the member with fewer operations in flight.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_member_slows_only_what_reads_from_it() {
    const SECS: u32 = 8;
    let slow = Duration::from_millis(300);
    let sim = set_with_election_timeout(2).await;
    let set = sim.replset().unwrap().clone();
    assert!(set.faults(1).slow(slow));
    let uri = format!("{}&readPreference=secondary", set.uri());
    let mut run = drill_run(&uri, SECS);
    let (stderr_path, log) = (run.stderr.clone(), run.log.clone());
    wait_status(run.http, "/readyz", 200, Duration::from_secs(30)).await;
    let (stop, watcher) = watch_counters(run.http);
    let status = wait_exit(&mut run.child, Duration::from_secs(60)).await;
    let _ = stop.send(());
    watcher.await.expect("no counter went backwards");
    assert!(set.faults(1).end(SimFault::Slow(slow)));
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(status.success(), "{stderr}");
    let record = set.faults(1).records()[0].clone();
    assert_eq!(record.kind, "slow");
    let reports = read_run_log(&log);
    let stage = &reports[0];
    assert_accounted(stage, SECS);
    let started = chrono::DateTime::parse_from_rfc3339(&stage.start).unwrap();
    assert!(
        std::time::SystemTime::from(started) >= record.started,
        "the stage ran inside the fault: {record:?}"
    );
    let op = |name: &str| {
        stage
            .ops
            .iter()
            .find(|o| o.op == name)
            .unwrap_or_else(|| panic!("no {name} in {stage:?}"))
            .latency_ns
    };
    let (find, insert) = (op("find"), op("insert"));
    let ms = |ns: u64| ns as f64 / 1e6;
    eprintln!(
        "slow member {slow:?}: find p50 {:.1} ms p95 {:.1} ms, insert p50 {:.1} ms p99 {:.1} ms",
        ms(find.p50),
        ms(find.p95),
        ms(insert.p50),
        ms(insert.p99)
    );
    // Every read goes to the slow secondary; no write does.
    assert!(find.p50 >= slow.as_nanos() as u64, "{find:?}: {stderr}");
    assert!(
        insert.p99 < slow.as_nanos() as u64 / 2,
        "{insert:?}: {stderr}"
    );
    sim.shutdown().await;
}

/// Runs `mongoload sim ARGS…` on free ports for `secs` and returns its log.
fn sim_log(args: &[&str], secs: u64) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stderr");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["sim", "--listen", "127.0.0.1:0"])
        .args(args)
        .env("RUST_LOG", "info")
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&path).unwrap())
        .spawn()
        .expect("start mongoload sim");
    let mut child = ChildGuard::new(child);
    std::thread::sleep(Duration::from_secs(secs));
    sigterm(child.id());
    let _ = child.take().wait();
    std::fs::read_to_string(&path).unwrap()
}

/// The fault flags repeat their fault with its true start and end in the
/// log; a blackholed primary is replaced after `--election-timeout`, and
/// the log says when.
#[test]
fn the_fault_flags_log_each_fault_from_its_start_to_its_end() {
    let log = sim_log(
        &[
            "--replset",
            "rs0",
            "--election-timeout",
            "400ms",
            "--blackhole",
            "1s/1500ms",
        ],
        3,
    );
    for line in [
        "fault blackhole began",
        "the other members elected a new primary",
        "new primary elected",
        "fault blackhole ended after 1.",
    ] {
        assert!(log.contains(line), "no {line:?} in\n{log}");
    }
    let log = sim_log(
        &[
            "--reset",
            "200ms/1s",
            "--slow",
            "300ms/1s",
            "--slow-latency",
            "5ms",
        ],
        2,
    );
    for line in [
        "fault reset began",
        "fault reset ended after 0.",
        "fault slow began: every command but the handshake 5ms slower",
        "fault slow ended after 0.",
    ] {
        assert!(log.contains(line), "no {line:?} in\n{log}");
    }
}

/// A state-change error comes with its state change, as MongoDB's does:
/// the primary that answers NotWritablePrimary moves its
/// `topologyVersion` on, the driver's streaming `hello` hears of it at
/// once and finds the same primary again, so the driver retries the write
/// there within milliseconds. Before, the primary's state stood still and
/// the driver knew no primary until its next heartbeat (5–10 s each time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_change_error_comes_with_its_state_change() {
    const SECS: u32 = 12;
    let (sim, set, mut run, (stop, watcher)) = replset_drill(SECS).await;
    let (stderr_path, log) = (run.stderr.clone(), run.log.clone());
    let http = run.http;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let term = set.term();
    // A fifth of the writes (about 20/s at this rate and mix): some 20
    // errors in 5 s. At 5 % (some 5 expected) fewer than 3 came one run in
    // eight, and the check below failed with nothing wrong.
    set.faults(0).set_error(Some(ErrorFault {
        rate: 0.2,
        code: 10107,
        commands: vec!["insert".into(), "update".into(), "delete".into()],
    }));
    tokio::time::sleep(Duration::from_secs(5)).await;
    set.faults(0).set_error(None);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let page = scrape(http).await;
    let status = wait_exit(&mut run.child, Duration::from_secs(30)).await;
    let _ = stop.send(());
    let pages = watcher.await.expect("no counter went backwards");
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(status.success(), "{stderr}");
    assert!(pages >= 5, "{pages} scrapes");
    // No election: the same primary all along.
    assert_eq!((set.primary(), set.term()), (Some(0), term));
    let reports = read_run_log(&log);
    let stage = &reports[0];
    assert_accounted(stage, SECS);
    assert!(stage.failovers.is_empty(), "{:?}", stage.failovers);
    let errors: u64 = stage
        .errors
        .iter()
        .filter(|(k, _)| k.as_str() != "not_primary")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(
        errors, 0,
        "only the injected class may fail: {:?}\n{stderr}",
        stage.errors
    );
    // The driver retried the writes that met the error on the same
    // primary at once: the load kept its rate, nothing waited for a
    // heartbeat.
    let retried = sum(&page, "mongoload_retried_writes_total", &[]);
    let errors_seen = sum(&page, "mongoload_errors_total", &[("kind", "not_primary")]);
    let gaps = sum(&page, "mongoload_no_primary_seconds_count", &[]);
    let without = sum(&page, "mongoload_no_primary_seconds_sum", &[]);
    eprintln!(
        "state-change errors: {retried} writes retried, {errors_seen} failed; \
         {gaps} periods without a primary, {without:.3}s in all"
    );
    assert!(
        retried + errors_seen >= 3.0,
        "the fault was not felt: {page}"
    );
    assert!(
        without <= 0.5,
        "{gaps} periods without a primary, {without:.3}s in all: {stderr}"
    );
    sim.shutdown().await;
}
