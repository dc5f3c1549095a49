//! The load generator's own figures, measured side by side in one run
//! against the simulator running as a separate `mongoload sim` process (so
//! its CPU is never counted as mongoload's):
//!
//! - `accuracy` / `cost`: the real daemon (`daemon::start`, mixed workload
//!   of find-by-`_id` only) holds a fixed rate; achieved rate from the
//!   stage report, send lateness from `mongoload_send_lateness_seconds`,
//!   CPU seconds of this process per 100,000 operations. Beside it the
//!   floor: the same driver calls from the same number of tasks at the same
//!   rate, paced by a bare sleep, with no metrics. Alternated, median of
//!   the repetitions.
//! - `closed`: the daemon in closed loop (a stage of `concurrency = 32`,
//!   `max_inflight` left at its default 256), CPU seconds per operation,
//!   beside the floor of 32 tasks in this process that call
//!   `find_one({_id})` back to back: one daemon paused and resumed through
//!   its control socket, alternated with the floor in short windows
//!   (`GEN_ROUNDS`, default 8, of `GEN_SECS`, default 5 s here), median of
//!   the rounds' ratios. Twice (`GEN_CLOSED`: `both`, `process`,
//!   `inprocess`): the shipped `mongoload run` as its own process, and the
//!   daemon library in this process (the floor's allocator and runtime).
//!   `GEN_MIX=write`: 90 % find by `_id`, 10 % insert of ~100 B documents
//!   on both sides instead of finds only. `GEN_FLOOR`: `naive` (the
//!   driver's implicit session per call), `session` (each task with one
//!   explicit session, as the workers keep), or `both`, alternated with
//!   the daemon in every round and each printed beside it. The shipped
//!   process's comparison runs each floor as a process of its own (this
//!   executable again, `GEN_FLOOR_CHILD`) and defaults to `both`: the
//!   naive floor on glibc malloc and the strongest, a session per task on
//!   jemalloc, as issue 26 defines them. The in-process comparison
//!   defaults to `naive`. `GEN_ALLOCATOR=jemalloc`: this process (its
//!   floors, and the daemon run in it) on the shipped binary's allocator
//!   instead of glibc's; with `GEN_FLOOR=session` and
//!   `GEN_CLOSED=inprocess`, the strongest floor beside the daemon on the
//!   same allocator and runtime.
//! - `memory`: `mongoload run` as its own process against a simulator that
//!   delays every reply by 1 s, 1,000 ops/s (`GEN_MEM_RATE`): VmRSS /
//!   VmHWM with ~1,000 operations in flight, `max_inflight` 1.5 × that and
//!   the pool sized to the plan (`GEN_MEM_POOL`, default 0), and VmRSS
//!   with the pool warm before the load (the open connections in every
//!   sample); beside each VmRSS its RssAnon, without the binary's pages.
//! - `peak`: the daemon stepping its rate up until it falls behind, with
//!   the CPU use of both processes per step.
//! - `events`: the daemon's CPU per operation with the write attempts
//!   read from the pool's events (`target.command_events = true`, the
//!   default for a plan that writes) and without, alternated.
//!
//! Run: `cargo bench --bench generator [-- accuracy|closed|memory|peak|events]`.
//! Environment: `GEN_SECS` (measured seconds per stage, default 20),
//! `GEN_REPS` (repetitions, default 3), `GEN_RATE` (default 5000),
//! `GEN_PEAK_RATES` (comma-separated steps, default 6000,…,30000),
//! `GEN_COMMAND_EVENTS` (`true` or `false`: `target.command_events` of the
//! daemon runs other than `events`; unset by default, which is off for
//! these read-only runs), `GEN_BIN` (the `mongoload` binary to run as
//! the daemon and simulator processes, default the one cargo built).
//! CPU time comes from /proc (utime + stime), so figures stay meaningful on
//! a shared machine where wall-clock rates do not.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mongodb::bson::{doc, Document};
use rand::{rngs::SmallRng, Rng, SeedableRng};
use tokio::time::Instant;

/// This process's allocator, for the floor and for the daemon run in this
/// process (`GEN_CLOSED=inprocess`): glibc malloc by default, the naive
/// floor's; `GEN_ALLOCATOR=jemalloc`: the shipped binary's, for the
/// strongest floor (with `GEN_FLOOR=session`). Chosen at the first
/// allocation, from the environment, and never again.
struct BenchAlloc;

/// 0: not chosen yet; 1: glibc malloc; 2: jemalloc.
static ALLOCATOR: AtomicU8 = AtomicU8::new(0);

extern "C" {
    fn getenv(name: *const std::ffi::c_char) -> *const std::ffi::c_char;
}

fn jemalloc() -> bool {
    match ALLOCATOR.load(Ordering::Relaxed) {
        1 => false,
        2 => true,
        _ => {
            // SAFETY: `getenv` allocates nothing (this runs inside the
            // allocator) and the bench never sets its environment.
            let value = unsafe { getenv(c"GEN_ALLOCATOR".as_ptr()) };
            let je = !value.is_null() && unsafe { std::ffi::CStr::from_ptr(value) } == c"jemalloc";
            ALLOCATOR.store(if je { 2 } else { 1 }, Ordering::Relaxed);
            je
        }
    }
}

/// The allocator chosen (see [`BenchAlloc`]).
fn chosen() -> &'static dyn std::alloc::GlobalAlloc {
    if jemalloc() {
        &tikv_jemallocator::Jemalloc
    } else {
        &std::alloc::System
    }
}

// SAFETY: every call goes to the one allocator chosen at the first, so a
// block is always freed by the allocator that gave it.
unsafe impl std::alloc::GlobalAlloc for BenchAlloc {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        unsafe { chosen().alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        unsafe { chosen().alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { chosen().dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, size: usize) -> *mut u8 {
        unsafe { chosen().realloc(ptr, layout, size) }
    }
}

#[global_allocator]
static ALLOC: BenchAlloc = BenchAlloc;

/// `target.command_events` of the daemon runs: 0 unset (the default: off
/// for these read-only runs), 1 false, 2 true (the `events` comparison
/// turns it off and on).
static COMMAND_EVENTS: AtomicU8 = AtomicU8::new(0);

fn set_command_events(events: Option<bool>) {
    COMMAND_EVENTS.store(events.map_or(0, |e| 1 + u8::from(e)), Ordering::Relaxed);
}

/// The `command_events` line of a daemon's `[target]` (none when unset).
fn command_events_line() -> &'static str {
    match COMMAND_EVENTS.load(Ordering::Relaxed) {
        1 => "command_events = false\n",
        2 => "command_events = true\n",
        _ => "",
    }
}

/// Documents preloaded by the workload's prepare step (and looked up).
const DOCS: u64 = 10_000;
/// Worker tasks of the daemon (`max_inflight`) and tasks of the floor.
const TASKS: usize = 64;
/// Workers of the closed-loop daemon (`concurrency`) and tasks of each of
/// its floors.
const CLOSED_WORKERS: usize = 32;
/// Connections in the driver's pool, for both.
const POOL: u32 = 32;
/// The `_id`s of the closed-loop floor's inserts (a floor child starts at
/// the base its parent gives it, so that two floors never insert the
/// same id).
static FLOOR_IDS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(1 << 40);
/// The variable that makes this executable a floor child (its value: the
/// deployment's URI); see [`FloorSide`].
const FLOOR_CHILD: &str = "GEN_FLOOR_CHILD";
/// Unmeasured lead-in of every run at the measured rate (pool, caches).
const WARM: Duration = Duration::from_secs(3);

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Ok(uri) = std::env::var(FLOOR_CHILD) {
        floor_child(&rt, &uri);
        return;
    }
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let wants = |name: &str| args.is_empty() || args.iter().any(|a| a == name);
    let bin = mongoload_binary();
    set_command_events(
        std::env::var("GEN_COMMAND_EVENTS")
            .ok()
            .map(|v| v == "true"),
    );
    println!(
        "mongoload binary: {}; {} CPUs; load average at start: {}; this process's allocator: {}; command_events = {}",
        bin.display(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load_average(),
        if jemalloc() { "jemalloc" } else { "glibc malloc" },
        match command_events_line() {
            "" if std::env::var("GEN_MIX").is_ok_and(|m| m == "write") => {
                "unset (on for GEN_MIX=write, which inserts)"
            }
            "" => "unset (off: the runs only read)",
            line => line.trim_end(),
        }
    );
    rt.block_on(async {
        if wants("accuracy") || wants("cost") {
            accuracy_and_cost(&bin).await;
        }
        if wants("closed") {
            closed_loop_cost(&bin).await;
        }
        if wants("memory") {
            memory(&bin).await;
        }
        if wants("peak") {
            peak(&bin).await;
        }
        if wants("events") {
            command_events().await;
        }
    });
    println!("load average at end: {}", load_average());
}

// ---------------------------------------------------------------- processes

/// `GEN_BIN`, or `target/<profile>/mongoload`: cargo builds the package's binaries beside
/// the bench executable's `deps` directory.
fn mongoload_binary() -> PathBuf {
    if let Some(bin) = std::env::var_os("GEN_BIN") {
        return PathBuf::from(bin);
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("bench executable in target/<profile>/deps");
    let bin = dir.join("mongoload");
    assert!(
        bin.exists(),
        "{} not found: build it with `cargo bench --bench generator` (it builds the binary)",
        bin.display()
    );
    bin
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

/// A child process killed when dropped.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Proc {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

/// Starts `mongoload sim` with `extra` options and waits until it accepts.
async fn start_sim(bin: &Path, extra: &[&str]) -> (Proc, SocketAddr) {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let child = Command::new(bin)
        .arg("sim")
        .arg("--listen")
        .arg(addr.to_string())
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn mongoload sim");
    let proc = Proc(child);
    wait_listening(addr).await;
    (proc, addr)
}

/// Starts `mongoload run` on `config` (written to `dir/mongoload.toml`).
fn spawn_run(bin: &Path, dir: &Path, config: &str) -> Proc {
    let path = dir.join("mongoload.toml");
    std::fs::write(&path, config).expect("write config");
    let child = Command::new(bin)
        .arg("run")
        .arg("--config")
        .arg(&path)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn mongoload run");
    Proc(child)
}

async fn wait_listening(addr: SocketAddr) {
    for _ in 0..200 {
        if TcpStream::connect(addr).is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("nothing listens on {addr}");
}

/// CPU seconds (user + system) of a process from `/proc/<pid>/stat`.
fn cpu_seconds(pid: &str) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may contain spaces) start at 3.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 (1-based), i.e. 11 and 12 here.
    (ticks(11) + ticks(12)) / clock_ticks()
}

fn clock_ticks() -> f64 {
    // sysconf(_SC_CLK_TCK) is 100 on every Linux architecture cargo targets.
    100.0
}

fn status_kib(pid: u32, key: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim_start_matches(':').split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

// ------------------------------------------------------------- daemon runs

/// The config of a daemon run: find-by-`_id` only, small documents, the
/// given rate stages (name, ops/s, duration) after a warm-up stage.
fn config_text(
    uri: &str,
    db: &str,
    http: &str,
    log: &Path,
    inflight: usize,
    pool: u32,
    stages: &[(String, f64, Duration)],
) -> String {
    let mut text = format!(
        r#"[target]
uri = "{uri}"
database = "{db}"
pool_size = {pool}
operation_timeout = "10s"
{events}[http]
listen = "{http}"
[run]
shutdown_grace = "2s"
log = "{log}"
[[workloads]]
name = "gen"
kind = "mixed"
max_inflight = {inflight}
max_lag = "10s"
[workloads.mixed]
insert = 0
update = 0
delete = 0
find = 1
doc_size = "100B"
initial_docs = {DOCS}
load_batch = 1000
collection = "gen"
"#,
        log = log.display(),
        events = command_events_line(),
    );
    for (name, rate, duration) in stages {
        text.push_str(&format!(
            "[[workloads.stages]]\nname = \"{name}\"\nrate = {rate}\nduration = \"{}ms\"\n",
            duration.as_millis()
        ));
    }
    text
}

/// What one measured stage of a daemon run gave.
#[derive(Debug, Clone)]
struct StageFigures {
    name: String,
    target: f64,
    secs: f64,
    /// From the stage report (run log).
    operations: u64,
    ops_per_sec: f64,
    missed: u64,
    /// CPU seconds of this process (the daemon) and of the simulator.
    cpu: f64,
    sim_cpu: f64,
    /// Send lateness bucket counts (cumulative, by upper bound) in the stage.
    lateness: Vec<(f64, u64)>,
}

/// Runs the daemon in this process through `stages` (after a warm-up at
/// the first stage's rate) and measures each stage. With `stop_when_behind`
/// the run stops after the first stage that fell behind (< 99 % of target
/// or missed > 0).
async fn run_daemon(
    sim: &SimRef,
    db: &str,
    stages: &[(String, f64, Duration)],
    stop_when_behind: bool,
) -> Vec<StageFigures> {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = dir.path().join("run.jsonl");
    let mut all = vec![("warm".to_owned(), stages[0].1, WARM)];
    all.extend(stages.iter().cloned());
    let text = config_text(
        &sim.uri,
        db,
        "127.0.0.1:0",
        &log,
        TASKS.max(sim.inflight),
        sim.pool,
        &all,
    );

    let config = mongoload::config::parse_with_env(&text, Path::new("bench.toml"), [])
        .expect("bench config is valid");
    let running = mongoload::daemon::start(config)
        .await
        .expect("daemon starts");
    let metrics = running.metrics.clone();

    // Wait (polling; not measured) for the warm-up stage, then for the
    // first measured stage; stage boundaries then follow the schedule.
    let phase = |stage: &str| {
        let page = metrics.encode().unwrap_or_default();
        page.contains(&format!(
            "mongoload_phase_info{{stage=\"{stage}\",workload=\"gen\"}} 1"
        ))
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while !phase("warm") {
        assert!(Instant::now() < deadline, "warm-up stage never started");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut at = Instant::now() + WARM;
    tokio::time::sleep_until(at).await;
    let mut before = (
        cpu_seconds("self"),
        cpu_seconds(&sim.pid),
        lateness(&metrics),
    );
    let mut figures = Vec::new();
    for (name, rate, duration) in stages {
        at += *duration;
        tokio::time::sleep_until(at).await;
        let end = (
            cpu_seconds("self"),
            cpu_seconds(&sim.pid),
            lateness(&metrics),
        );
        figures.push(StageFigures {
            name: name.clone(),
            target: *rate,
            secs: duration.as_secs_f64(),
            operations: 0,
            ops_per_sec: 0.0,
            missed: 0,
            cpu: end.0 - before.0,
            sim_cpu: end.1 - before.1,
            lateness: end
                .2
                .iter()
                .zip(&before.2)
                .map(|(e, b)| (e.0, e.1 - b.1))
                .collect(),
        });
        before = end;
        if stop_when_behind {
            // The report is written at the stage's end: wait a moment for it.
            tokio::time::sleep(Duration::from_millis(300)).await;
            fill_reports(&log, &mut figures);
            let last = figures.last().unwrap();
            if last.ops_per_sec < 0.99 * last.target || last.missed > 0 {
                break;
            }
        }
    }
    running.stop();
    let _ = tokio::time::timeout(Duration::from_secs(10), running.wait()).await;
    fill_reports(&log, &mut figures);
    figures
}

/// Fills operations, ops/s and missed of each stage from the run log.
fn fill_reports(log: &Path, figures: &mut [StageFigures]) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let Some(f) = figures.iter_mut().find(|f| v["stage"] == f.name.as_str()) else {
            continue;
        };
        let counts = &v["operations"];
        f.operations = counts["ok"].as_u64().unwrap_or(0) + counts["error"].as_u64().unwrap_or(0);
        f.ops_per_sec = v["ops_per_sec"].as_f64().unwrap_or(0.0);
        f.missed = v["missed"].as_u64().unwrap_or(0);
    }
}

/// The cumulative buckets of `mongoload_send_lateness_seconds` now.
fn lateness(metrics: &mongoload::metrics::Metrics) -> Vec<(f64, u64)> {
    let page = metrics.encode().unwrap_or_default();
    page.lines()
        .filter(|l| l.starts_with("mongoload_send_lateness_seconds_bucket{"))
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            let n = l.rsplit(' ').next()?.parse().ok()?;
            Some((le, n))
        })
        .collect()
}

/// The upper bound of the bucket holding quantile `q`, and the fraction of
/// sends within `bound` seconds.
fn lateness_quantile(buckets: &[(f64, u64)], q: f64) -> f64 {
    let total = buckets.last().map_or(0, |b| b.1);
    let want = (q * total as f64).ceil() as u64;
    buckets
        .iter()
        .find(|(_, n)| *n >= want.max(1))
        .map_or(f64::NAN, |b| b.0)
}

fn lateness_within(buckets: &[(f64, u64)], bound: f64) -> f64 {
    let total = buckets.last().map_or(0, |b| b.1).max(1);
    let n = buckets
        .iter()
        .filter(|(le, _)| *le <= bound + 1e-12)
        .map(|b| b.1)
        .max()
        .unwrap_or(0);
    n as f64 / total as f64
}

/// The highest non-empty bucket: the maximum lateness is at most this.
fn lateness_max(buckets: &[(f64, u64)]) -> f64 {
    let total = buckets.last().map_or(0, |b| b.1);
    buckets
        .iter()
        .find(|(_, n)| *n == total)
        .map_or(f64::NAN, |b| b.0)
}

/// A simulator for the find-by-`_id` runs, with the daemon's pool and tasks.
async fn find_sim(bin: &Path) -> (Proc, SimRef) {
    let (sim_proc, addr) = start_sim(bin, &[]).await;
    let sim = SimRef {
        uri: format!("mongodb://{addr}/?directConnection=true"),
        pid: sim_proc.pid().to_string(),
        pool: POOL,
        inflight: TASKS,
    };
    (sim_proc, sim)
}

/// The simulator a run goes against.
struct SimRef {
    uri: String,
    pid: String,
    pool: u32,
    inflight: usize,
}

// ------------------------------------------------------------------- floor

/// The floor: `tasks` tasks issue `find_one({_id})` at `rate` in total,
/// each sleeping until its next slot, with no metrics and no engine.
/// Returns (operations completed in the measured window, CPU seconds, the
/// sorted lateness of the measured sends in µs: the tokio timer alone).
async fn floor(sim: &SimRef, db: &str, rate: f64, secs: Duration) -> (u64, f64, Vec<u64>) {
    let client = floor_client(&sim.uri, sim.pool).await;
    let coll = client.database(db).collection::<Document>("gen");
    let done = Arc::new(AtomicU64::new(0));
    let start = Instant::now() + Duration::from_millis(100);
    let measure_from = start + WARM;
    let end = measure_from + secs;
    let period = Duration::from_secs_f64(TASKS as f64 / rate);
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..TASKS {
        let coll = coll.clone();
        let done = done.clone();
        tasks.spawn(async move {
            let mut rng = SmallRng::seed_from_u64(t as u64);
            let mut next = start + Duration::from_secs_f64(t as f64 / rate);
            let mut late = Vec::new();
            while next < end {
                tokio::time::sleep_until(next).await;
                if next >= measure_from {
                    late.push(Instant::now().saturating_duration_since(next).as_micros() as u64);
                }
                let id = rng.random_range(0..DOCS) as i64;
                let found = coll.find_one(doc! {"_id": id}).await;
                if matches!(found, Ok(Some(_))) && next >= measure_from {
                    done.fetch_add(1, Ordering::Relaxed);
                }
                next += period;
            }
            late
        });
    }
    tokio::time::sleep_until(measure_from).await;
    let cpu0 = cpu_seconds("self");
    tokio::time::sleep_until(end).await;
    let cpu1 = cpu_seconds("self");
    let mut late = Vec::new();
    while let Some(task) = tasks.join_next().await {
        late.extend(task.unwrap_or_default());
    }
    late.sort_unstable();
    client.shutdown().await;
    (done.load(Ordering::Relaxed), cpu1 - cpu0, late)
}

/// The floor's client: made by the daemon's own `mongo::connect`, with
/// no event handlers.
async fn floor_client(uri: &str, pool: u32) -> mongodb::Client {
    mongoload::mongo::connect(
        uri,
        "floor",
        pool,
        mongoload::mongo::Timeouts {
            connect: Duration::from_secs(5),
            server_selection: Duration::from_secs(5),
        },
        mongoload::mongo::Handlers::default(),
    )
    .await
    .expect("client")
}

/// The closed-loop floor: `tasks` tasks each call `find_one({_id})` back
/// to back on `coll` for `secs` after `warm`, with no metrics and no
/// engine (`writes`: one call in ten an `insert_one` of a ~100 B document
/// instead, as the daemon's 90/10 plan). Returns the calls completed in
/// the measured window whatever their outcome (as the daemon's
/// `mongoload_operations_total` counts them), those of them that failed or
/// found nothing, and the CPU seconds of this process in the window.
/// `sessions`: each task keeps one explicit session (no causal
/// consistency) for all its calls, as mongoload's workers do, instead of
/// the driver's implicit session per call (the naive floor).
async fn floor_closed(
    coll: &mongodb::Collection<Document>,
    tasks: usize,
    warm: Duration,
    secs: Duration,
    writes: bool,
    sessions: bool,
) -> (u64, u64, f64) {
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let measure_from = Instant::now() + warm;
    let end = measure_from + secs;
    let mut set = tokio::task::JoinSet::new();
    for t in 0..tasks {
        let (coll, done, failed) = (coll.clone(), done.clone(), failed.clone());
        set.spawn(async move {
            let mut rng = SmallRng::seed_from_u64(t as u64);
            let mut session = if sessions {
                let client = coll.client();
                let started = client.start_session().causal_consistency(false).await;
                Some(started.expect("a session"))
            } else {
                None
            };
            loop {
                let ok = if writes && rng.random_ratio(1, 10) {
                    // Ids of their own, never the daemon's, unique across rounds.
                    let next_id = FLOOR_IDS.fetch_add(1, Ordering::Relaxed);
                    let pad = "x".repeat(80);
                    let insert = coll.insert_one(doc! {"_id": next_id, "pad": pad});
                    let inserted = match session.as_mut() {
                        Some(s) => insert.session(s).await,
                        None => insert.await,
                    };
                    inserted.is_ok()
                } else {
                    let id = rng.random_range(0..DOCS) as i64;
                    let find = coll.find_one(doc! {"_id": id});
                    let found = match session.as_mut() {
                        Some(s) => find.session(s).await,
                        None => find.await,
                    };
                    matches!(found, Ok(Some(_)))
                };
                let now = Instant::now();
                if now >= end {
                    return;
                }
                if now >= measure_from {
                    done.fetch_add(1, Ordering::Relaxed);
                    if !ok {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        });
    }
    tokio::time::sleep_until(measure_from).await;
    let cpu0 = cpu_seconds("self");
    tokio::time::sleep_until(end).await;
    let cpu1 = cpu_seconds("self");
    while set.join_next().await.is_some() {}
    (
        done.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed),
        cpu1 - cpu0,
    )
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    if v.is_empty() {
        return f64::NAN;
    }
    v[v.len() / 2]
}

// ------------------------------------------------------------ measurements

async fn accuracy_and_cost(bin: &Path) {
    let secs = Duration::from_secs(env_or("GEN_SECS", 20));
    let reps: usize = env_or("GEN_REPS", 3);
    let rate: f64 = env_or("GEN_RATE", 5000.0);
    let (sim_proc, sim) = find_sim(bin).await;
    println!(
        "\n== accuracy and cost: {rate} ops/s find-by-_id, {reps} x ({}s daemon + {}s floor), {TASKS} tasks, pool {POOL}",
        secs.as_secs(),
        secs.as_secs()
    );
    let mut daemon_us = Vec::new();
    let mut floor_us = Vec::new();
    let mut accuracy = Vec::new();
    for rep in 0..reps {
        let db = format!("acc{rep}");
        // Alternate the order (daemon first, then floor first, ...) so a
        // change in the machine's load during the run biases neither side.
        // The floor reads the documents the first daemon run loaded.
        let floor_first = rep % 2 == 1;
        let floor_run = if floor_first {
            Some(floor(&sim, "acc0", rate, secs).await)
        } else {
            None
        };
        let f = run_daemon(&sim, &db, &[("hold".to_owned(), rate, secs)], false).await;
        let f = &f[0];
        let d_us = f.cpu / f.operations.max(1) as f64 * 1e6;
        let achieved = f.ops_per_sec / f.target;
        println!(
            "rep {rep} daemon: {} ops in {:.0}s = {:.1} ops/s ({:.3} % of target), missed {}, lateness p50 <= {:.0} us p99 <= {:.0} us max <= {:.0} us, within 1 ms {:.4} %; CPU {:.2}s = {d_us:.1} us/op ({:.2}s per 100k); sim CPU {:.1} us/op",
            f.operations,
            f.secs,
            f.ops_per_sec,
            achieved * 100.0,
            f.missed,
            lateness_quantile(&f.lateness, 0.5) * 1e6,
            lateness_quantile(&f.lateness, 0.99) * 1e6,
            lateness_max(&f.lateness) * 1e6,
            lateness_within(&f.lateness, 0.001) * 100.0,
            f.cpu,
            d_us / 10.0,
            f.sim_cpu / f.operations.max(1) as f64 * 1e6,
        );
        let (ops, cpu, late) = match floor_run {
            Some(r) => r,
            None => floor(&sim, "acc0", rate, secs).await,
        };
        let f_us = cpu / ops.max(1) as f64 * 1e6;
        let q = |q: f64| {
            late.get(((late.len() as f64 * q) as usize).min(late.len().saturating_sub(1)))
                .copied()
                .unwrap_or(0)
        };
        println!(
            "rep {rep} floor{}:  {ops} ops in {:.0}s = {:.1} ops/s; timer lateness p50 {} us p99 {} us max {} us, within 1 ms {:.4} %; CPU {cpu:.2}s = {f_us:.1} us/op ({:.2}s per 100k)",
            if floor_first { " (run first)" } else { "" },
            secs.as_secs_f64(),
            ops as f64 / secs.as_secs_f64(),
            q(0.5),
            q(0.99),
            late.last().copied().unwrap_or(0),
            100.0 * late.iter().filter(|l| **l <= 1000).count() as f64 / late.len().max(1) as f64,
            f_us / 10.0
        );
        daemon_us.push(d_us);
        floor_us.push(f_us);
        accuracy.push(achieved * 100.0);
    }
    let (d, fl) = (median(daemon_us.clone()), median(floor_us.clone()));
    let ratios: Vec<f64> = daemon_us
        .iter()
        .zip(&floor_us)
        .map(|(d, f)| d / f)
        .collect();
    println!(
        "MEDIAN accuracy {:.3} % of target; daemon {d:.1} us/op = {:.2} CPU-s per 100k = {:.0} ops per CPU-second; floor {fl:.1} us/op = {:.2} CPU-s per 100k; ratio daemon/floor (median of per-rep ratios) {:.2}x",
        median(accuracy),
        d / 10.0,
        1e6 / d,
        fl / 10.0,
        median(ratios)
    );
    drop(sim_proc);
}

/// One floor of a closed-loop comparison: 32 bare tasks in this process
/// (`GEN_CLOSED=inprocess`, the daemon's allocator and runtime), or in a
/// process of their own (`GEN_CLOSED=process`: this executable again,
/// with the allocator of its floor), measured one window at a time.
enum FloorSide {
    InProcess {
        coll: mongodb::Collection<Document>,
        sessions: bool,
        writes: bool,
    },
    Child {
        proc: Proc,
        stdin: std::process::ChildStdin,
        stdout: std::io::BufReader<std::process::ChildStdout>,
    },
}

/// A floor of the comparison: its name in the output, and whether its
/// tasks keep a session each (the strongest floor) or use the driver's
/// implicit session per call (the naive one).
#[derive(Clone, Copy)]
struct FloorKind {
    name: &'static str,
    sessions: bool,
    /// The allocator of a floor child (`None`: this process's).
    allocator: Option<&'static str>,
}

/// The floors `GEN_FLOOR` asks for: `naive`, `session` (on this process's
/// allocator, `GEN_ALLOCATOR`), or `both`: the naive floor on glibc
/// malloc and the strongest, a session per task on jemalloc (the shipped
/// binary's allocator), as issue 26 defines them. Both is the default of
/// the `mongoload run` process's comparison, where each floor is a
/// process of its own; naive, of the daemon in this process.
fn floor_kinds(process: bool) -> Vec<FloorKind> {
    let naive = FloorKind {
        name: "naive",
        sessions: false,
        allocator: None,
    };
    let session = FloorKind {
        name: "session",
        sessions: true,
        allocator: None,
    };
    let asked = std::env::var("GEN_FLOOR")
        .unwrap_or_else(|_| if process { "both" } else { "naive" }.to_owned());
    match asked.as_str() {
        "session" => vec![session],
        "both" if process => vec![
            FloorKind {
                allocator: Some("glibc"),
                ..naive
            },
            FloorKind {
                name: "strongest",
                allocator: Some("jemalloc"),
                ..session
            },
        ],
        "both" => vec![naive, session],
        _ => vec![naive],
    }
}

impl FloorSide {
    async fn start(
        kind: FloorKind,
        process: bool,
        uri: &str,
        writes: bool,
        ids_from: i64,
    ) -> FloorSide {
        if !process {
            let client = floor_client(uri, POOL).await;
            return FloorSide::InProcess {
                coll: client.database("closed").collection("gen"),
                sessions: kind.sessions,
                writes,
            };
        }
        let mut cmd = Command::new(std::env::current_exe().expect("this executable"));
        cmd.env(FLOOR_CHILD, uri)
            .env("GEN_FLOOR", if kind.sessions { "session" } else { "naive" })
            .env("GEN_FLOOR_IDS", ids_from.to_string())
            .env("GEN_MIX", if writes { "write" } else { "find" })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        if let Some(a) = kind.allocator {
            cmd.env("GEN_ALLOCATOR", a);
        }
        let mut child = cmd.spawn().expect("spawn a floor child");
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = std::io::BufReader::new(child.stdout.take().expect("piped stdout"));
        FloorSide::Child {
            proc: Proc(child),
            stdin,
            stdout,
        }
    }

    /// One measured window after `settle`: the calls completed, those
    /// that failed or found nothing, and the floor process's CPU seconds.
    async fn measure(&mut self, settle: Duration, secs: Duration) -> (u64, u64, f64) {
        match self {
            FloorSide::InProcess {
                coll,
                sessions,
                writes,
            } => floor_closed(coll, CLOSED_WORKERS, settle, secs, *writes, *sessions).await,
            FloorSide::Child { stdin, stdout, .. } => {
                use std::io::BufRead;
                writeln!(stdin, "{} {}", settle.as_millis(), secs.as_millis())
                    .expect("write to the floor child");
                let mut line = String::new();
                tokio::task::block_in_place(|| stdout.read_line(&mut line))
                    .expect("read from the floor child");
                let f: Vec<&str> = line.split_whitespace().collect();
                match f.as_slice() {
                    [n, failed, cpu] => (
                        n.parse().expect("calls"),
                        failed.parse().expect("failed calls"),
                        cpu.parse().expect("CPU seconds"),
                    ),
                    _ => panic!("the floor child answered {line:?}"),
                }
            }
        }
    }

    async fn stop(self) {
        match self {
            FloorSide::InProcess { coll, .. } => coll.client().clone().shutdown().await,
            FloorSide::Child { proc, stdin, .. } => {
                drop(stdin);
                drop(proc);
            }
        }
    }
}

/// A floor child's whole life (`GEN_FLOOR_CHILD=<uri>`): for each line
/// `<settle ms> <secs ms>` on stdin, one window of [`floor_closed`] (its
/// tasks and mix from `GEN_FLOOR` and `GEN_MIX`), answered on stdout as
/// `<calls> <failed> <CPU seconds>`.
fn floor_child(rt: &tokio::runtime::Runtime, uri: &str) {
    use std::io::BufRead;
    FLOOR_IDS.store(env_or("GEN_FLOOR_IDS", 1 << 40), Ordering::Relaxed);
    let sessions = std::env::var("GEN_FLOOR").is_ok_and(|f| f == "session");
    let writes = std::env::var("GEN_MIX").is_ok_and(|m| m == "write");
    let coll = rt.block_on(async {
        floor_client(uri, POOL)
            .await
            .database("closed")
            .collection::<Document>("gen")
    });
    let mut out = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let Ok(line) = line else { return };
        let ms: Vec<u64> = line
            .split_whitespace()
            .filter_map(|v| v.parse().ok())
            .collect();
        let [settle, secs] = ms[..] else { return };
        let (n, failed, cpu) = rt.block_on(floor_closed(
            &coll,
            CLOSED_WORKERS,
            Duration::from_millis(settle),
            Duration::from_millis(secs),
            writes,
            sessions,
        ));
        writeln!(out, "{n} {failed} {cpu}").expect("write to the parent");
        out.flush().expect("flush to the parent");
    }
}

/// The daemon of the closed-loop comparison: `mongoload run` as its own
/// process (the shipped binary, with its allocator), or the library in
/// this process beside the floor (the same allocator and runtime as the
/// floor).
enum ClosedDaemon {
    Process { proc: Proc, http: SocketAddr },
    InProcess(mongoload::daemon::Running),
}

impl ClosedDaemon {
    fn name(&self) -> &'static str {
        match self {
            ClosedDaemon::Process { .. } => "mongoload run process",
            ClosedDaemon::InProcess(_) => "daemon in the floor's process",
        }
    }

    /// Operations so far (`mongoload_operations_total`, all labels).
    fn ops(&self) -> f64 {
        let page = match self {
            ClosedDaemon::Process { http, .. } => http_get(*http, "/metrics").unwrap_or_default(),
            ClosedDaemon::InProcess(running) => running.metrics.encode().unwrap_or_default(),
        };
        page.lines()
            .filter(|l| l.starts_with("mongoload_operations_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    }

    fn cpu(&self) -> f64 {
        match self {
            ClosedDaemon::Process { proc, .. } => cpu_seconds(&proc.pid().to_string()),
            ClosedDaemon::InProcess(_) => cpu_seconds("self"),
        }
    }

    async fn stop(self) {
        match self {
            ClosedDaemon::Process { proc, .. } => drop(proc),
            ClosedDaemon::InProcess(running) => {
                running.stop();
                let _ = tokio::time::timeout(Duration::from_secs(10), running.wait()).await;
            }
        }
    }
}

/// Closed loop: CPU per operation of the daemon at `concurrency = 32`
/// (`max_inflight` 256, its default) beside 32 bare tasks, for the daemon
/// as the shipped `mongoload run` process and (`GEN_CLOSED=both`, the
/// default; or `process`, `inprocess`) as the library in this process.
/// One daemon runs throughout and is paused and resumed through its
/// control socket, so the two sides alternate in short windows
/// (`GEN_ROUNDS` of `GEN_SECS` each, defaults 8 × 5 s, the order swapped
/// every round) and see the same load on a shared machine; the figure is
/// the median of the rounds' ratios. Operations come from
/// `mongoload_operations_total`.
async fn closed_loop_cost(bin: &Path) {
    let which = std::env::var("GEN_CLOSED").unwrap_or_else(|_| "both".into());
    if which == "both" || which == "process" {
        closed_loop_one(bin, true).await;
    }
    if which == "both" || which == "inprocess" {
        closed_loop_one(bin, false).await;
    }
}

async fn closed_loop_one(bin: &Path, process: bool) {
    let secs = Duration::from_secs(env_or("GEN_SECS", 5));
    let rounds: usize = env_or("GEN_ROUNDS", 8);
    let settle = Duration::from_secs(1);
    let (sim_proc, addr) = start_sim(bin, &[]).await;
    let uri = format!("mongodb://{addr}/?directConnection=true");
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("control.sock");
    let http: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let text = config_text(
        &uri,
        "closed",
        &http.to_string(),
        &dir.path().join("run.jsonl"),
        256,
        POOL,
        &[(
            "hold".to_owned(),
            CLOSED_WORKERS as f64,
            Duration::from_secs(24 * 3600),
        )],
    )
    .replace("\nrate = ", "\nconcurrency = ");
    // GEN_MIX=write: 90 % find by `_id`, 10 % insert of a ~100 B document,
    // on both sides (the daemon's plan then writes: command monitoring is
    // on unless GEN_COMMAND_EVENTS says otherwise).
    let writes = std::env::var("GEN_MIX").is_ok_and(|m| m == "write");
    // GEN_FLOOR: the naive floor (an implicit session per call), the
    // strongest (a session per task, as the workers keep one), or both
    // (see `floor_kinds`).
    let kinds = floor_kinds(process);
    // Unbounded (`max_docs = 0`): past its default bound of ten times the
    // preloaded documents `mixed` deletes the oldest with each insert (two
    // requests where the floor sends one), and the floor's finds of those
    // ids would find nothing.
    let text = if writes {
        text.replace("insert = 0\n", "insert = 1\n")
            .replace("find = 1\n", "find = 9\nmax_docs = 0\n")
    } else {
        text
    };
    let text = format!("{text}[control]\nsocket = \"{}\"\n", socket.display());
    let daemon = if process {
        let proc = spawn_run(bin, dir.path(), &text);
        wait_listening(http).await;
        ClosedDaemon::Process { proc, http }
    } else {
        let config = mongoload::config::parse_with_env(&text, Path::new("bench.toml"), [])
            .expect("bench config is valid");
        ClosedDaemon::InProcess(
            mongoload::daemon::start(config)
                .await
                .expect("daemon starts"),
        )
    };
    let control = |line: &'static str| {
        let socket = socket.clone();
        async move {
            let cmd = line.parse().expect("a control command");
            mongoload::control::client::request(&socket, &cmd)
                .await
                .expect("the control socket answers");
        }
    };
    // The prepare step loads the documents; then the stage runs.
    let deadline = Instant::now() + Duration::from_secs(120);
    while daemon.ops() < 1000.0 {
        assert!(Instant::now() < deadline, "the daemon never ran");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    control("pause gen").await;
    let mut floors = Vec::new();
    for (i, kind) in kinds.iter().enumerate() {
        let ids_from = (1i64 << 40) + ((i as i64) << 36);
        floors.push(FloorSide::start(*kind, process, &uri, writes, ids_from).await);
    }
    println!(
        "\n== closed loop ({}): {CLOSED_WORKERS} workers {}, {rounds} rounds of {}s each for the daemon and each floor ({}), in turn, max_inflight 256, pool {POOL}; load average {}",
        daemon.name(),
        if writes {
            "90 % find-by-_id, 10 % insert"
        } else {
            "find-by-_id"
        },
        secs.as_secs(),
        kinds
            .iter()
            .map(|k| format!(
                "{}: {}{}",
                k.name,
                if k.sessions {
                    "a session per task"
                } else {
                    "implicit sessions"
                },
                match (k.allocator, process) {
                    (Some(a), _) => format!(", {a} in its own process"),
                    (None, true) => " in its own process".to_owned(),
                    (None, false) => String::new(),
                }
            ))
            .collect::<Vec<_>>()
            .join("; "),
        load_average()
    );
    // Per side (0 the daemon, then the floors): µs of CPU per operation in
    // each round.
    let sides = floors.len() + 1;
    let mut us: Vec<Vec<f64>> = vec![Vec::new(); sides];
    // The median over the rounds of side `a`'s figure over side `b`'s.
    let ratio = |us: &[Vec<f64>], a: usize, b: usize| {
        median(us[a].iter().zip(&us[b]).map(|(x, y)| x / y).collect())
    };
    for round in 0..rounds {
        // Each round starts with the next side, so that no side always
        // follows the same one.
        let mut this = vec![(0.0, 0.0); sides];
        for k in 0..sides {
            let side = (round + k) % sides;
            this[side] = if side == 0 {
                control("resume gen").await;
                tokio::time::sleep(settle).await;
                let (ops0, cpu0) = (daemon.ops(), daemon.cpu());
                tokio::time::sleep(secs).await;
                let (ops1, cpu1) = (daemon.ops(), daemon.cpu());
                control("pause gen").await;
                tokio::time::sleep(Duration::from_millis(300)).await;
                ((cpu1 - cpu0) / (ops1 - ops0).max(1.0) * 1e6, ops1 - ops0)
            } else {
                let (n, failed, cpu) = floors[side - 1].measure(settle, secs).await;
                if failed > 0 {
                    let name = kinds[side - 1].name;
                    println!("  {name} floor: {failed} of {n} calls failed or found nothing");
                }
                (cpu / n.max(1) as f64 * 1e6, n as f64)
            };
        }
        let rate = |n: f64| n / secs.as_secs_f64();
        let (d, dn) = this[0];
        let mut line = format!("round {round}: daemon {d:.1} us/op ({:.0} ops/s)", rate(dn));
        for (i, &(f, n)) in this[1..].iter().enumerate() {
            line += &format!(
                ", {} floor {f:.1} us/op ({:.0} ops/s), ratio {:.2}",
                kinds[i].name,
                rate(n),
                d / f
            );
        }
        println!("{line}");
        for (side, &(u, _)) in this.iter().enumerate() {
            us[side].push(u);
        }
    }
    let mut line = format!(
        "MEDIAN closed loop ({}): daemon {:.1} us/op",
        daemon.name(),
        median(us[0].clone())
    );
    for (i, kind) in kinds.iter().enumerate() {
        line += &format!(
            "; {} floor {:.1} us/op, ratio daemon/floor (median of {rounds} rounds) {:.2}x",
            kind.name,
            median(us[i + 1].clone()),
            ratio(&us, 0, i + 1)
        );
    }
    if sides == 3 {
        // The floors against each other: what a session per task (and,
        // in processes of their own, jemalloc) saves the bare loop.
        line += &format!(
            "; {} floor / {} floor (median of {rounds} rounds) {:.2}x",
            kinds[1].name,
            kinds[0].name,
            ratio(&us, 2, 1)
        );
    }
    println!("{line}; load average {}", load_average());
    daemon.stop().await;
    for f in floors {
        f.stop().await;
    }
    drop(sim_proc);
}

async fn memory(bin: &Path) {
    // In flight ≈ rate × 1 s (the simulator's latency).
    let rate: f64 = env_or("GEN_MEM_RATE", 1000.0);
    let inflight = (rate * 1.5) as usize;
    // 0: sized to the plan (max_inflight connections, kept warm).
    let pool: u32 = env_or("GEN_MEM_POOL", 0);
    let (sim_proc, addr) = start_sim(bin, &["--latency", "1s"]).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let http = format!("127.0.0.1:{}", free_port());
    let secs = env_or("GEN_SECS", 20);
    let text = config_text(
        &format!("mongodb://{addr}/?directConnection=true"),
        "mem",
        &http,
        &dir.path().join("run.jsonl"),
        inflight,
        pool,
        &[("hold".to_owned(), rate, Duration::from_secs(secs))],
    );
    // Fewer preloaded documents: each prepare batch also waits 1 s.
    let text = text.replace(&format!("initial_docs = {DOCS}"), "initial_docs = 2000");
    let proc = spawn_run(bin, dir.path(), &text);
    let pid = proc.pid();
    let pool = if pool == 0 {
        format!("{inflight} (sized to the plan)")
    } else {
        pool.to_string()
    };
    println!("\n== memory: mongoload run (pid {pid}) at {rate} ops/s, simulator latency 1 s, max_inflight {inflight}, pool {pool}");
    let http: SocketAddr = http.parse().unwrap();
    wait_listening(http).await;
    let t0 = Instant::now();
    let mut peak_inflight = 0.0f64;
    let mut at_peak = (0, 0, 0);
    let mut hwm_seen = 0;
    let mut warm = (0, 0.0, 0);
    let until = t0 + Duration::from_secs(secs + 8);
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let page = http_get(http, "/metrics").unwrap_or_default();
        let inflight = page
            .lines()
            .find(|l| l.starts_with("mongoload_inflight_operations{"))
            .and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0.0);
        let ok = page
            .lines()
            .find(|l| l.starts_with("mongoload_operations_total{") && l.contains("outcome=\"ok\""))
            .and_then(|l| l.rsplit(' ').next())
            .unwrap_or("0")
            .to_owned();
        // Open connections: idle + in use.
        let connections: f64 = page
            .lines()
            .filter(|l| l.starts_with("mongoload_pool_connections{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum();
        let rss = status_kib(pid, "VmRSS");
        let hwm = status_kib(pid, "VmHWM");
        // VmRSS = RssAnon (heap, stacks) + RssFile (the binary's pages
        // touched, shared with every process of the same binary).
        let anon = status_kib(pid, "RssAnon");
        hwm_seen = hwm_seen.max(hwm);
        println!(
            "t={:>2}s in flight {inflight:>5} connections {connections:>5} ok {ok:>7} VmRSS {:.1} MiB VmHWM {:.1} MiB RssAnon {:.1} MiB",
            t0.elapsed().as_secs(),
            rss as f64 / 1024.0,
            hwm as f64 / 1024.0,
            anon as f64 / 1024.0
        );
        // The pool warm and nothing in flight yet: what connections cost
        // before any operation does.
        if peak_inflight == 0.0 && inflight == 0.0 && connections > 0.0 {
            warm = (rss, connections, anon);
        }
        if inflight >= peak_inflight {
            peak_inflight = inflight;
            at_peak = (rss, hwm, anon);
        }
    }
    println!(
        "RESULT memory: {peak_inflight} in flight: VmRSS {:.1} MiB (RssAnon {:.1} MiB), VmHWM {:.1} MiB \
         (whole run high-water mark {:.1} MiB); before the load, {} connections open and nothing \
         in flight: VmRSS {:.1} MiB (RssAnon {:.1} MiB)",
        at_peak.0 as f64 / 1024.0,
        at_peak.2 as f64 / 1024.0,
        at_peak.1 as f64 / 1024.0,
        hwm_seen as f64 / 1024.0,
        warm.1,
        warm.0 as f64 / 1024.0,
        warm.2 as f64 / 1024.0
    );
    drop(proc);
    drop(sim_proc);
}

/// A plain HTTP/1.0 GET on loopback; the body.
fn http_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())
}

async fn peak(bin: &Path) {
    let rates: Vec<f64> = std::env::var("GEN_PEAK_RATES")
        .unwrap_or_else(|_| "6000,9000,12000,15000,18000,21000,25000,30000".into())
        .split(',')
        .filter_map(|r| r.trim().parse().ok())
        .collect();
    let step = Duration::from_secs(env_or("GEN_PEAK_SECS", 8));
    let (sim_proc, addr) = start_sim(bin, &[]).await;
    let sim = SimRef {
        uri: format!("mongodb://{addr}/?directConnection=true"),
        pid: sim_proc.pid().to_string(),
        pool: 64,
        inflight: 256,
    };
    println!(
        "\n== peak: rate steps of {}s {rates:?}, max_inflight 256, pool 64",
        step.as_secs()
    );
    let stages: Vec<(String, f64, Duration)> =
        rates.iter().map(|r| (format!("r{r}"), *r, step)).collect();
    let figures = run_daemon(&sim, "peak", &stages, true).await;
    let mut best = None;
    for f in &figures {
        let ok = f.ops_per_sec >= 0.99 * f.target && f.missed == 0;
        println!(
            "step {:>6}: achieved {:>8.1} ops/s ({:.1} %), missed {}, lateness p99 <= {:.0} us; mongoload CPU {:.0} % of a core ({:.1} us/op), simulator CPU {:.0} % ({:.1} us/op){}",
            f.target,
            f.ops_per_sec,
            100.0 * f.ops_per_sec / f.target,
            f.missed,
            lateness_quantile(&f.lateness, 0.99) * 1e6,
            100.0 * f.cpu / f.secs,
            f.cpu / f.operations.max(1) as f64 * 1e6,
            100.0 * f.sim_cpu / f.secs,
            f.sim_cpu / f.operations.max(1) as f64 * 1e6,
            if ok { "" } else { "  <- fell behind" }
        );
        if ok {
            best = Some(f.target);
        }
    }
    println!(
        "RESULT peak sustained: {best:?} ops/s; load average {}",
        load_average()
    );
    drop(sim_proc);
}

// ------------------------------------------------------- write attempts

/// The daemon's CPU per operation with and without its write attempts read,
/// alternated (on, off, off, on, …) at the accuracy run's rate, against an
/// in-process-free simulator: what `target.command_events` costs.
async fn command_events() {
    let bin = mongoload_binary();
    let secs = Duration::from_secs(env_or("GEN_SECS", 20));
    let reps: usize = env_or("GEN_REPS", 3);
    let rate: f64 = env_or("GEN_RATE", 5000.0);
    let (sim_proc, sim) = find_sim(&bin).await;
    println!(
        "\n== command events: {rate} ops/s find-by-_id, {reps} x ({}s with + {}s without)",
        secs.as_secs(),
        secs.as_secs()
    );
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for rep in 0..reps {
        let order = if rep % 2 == 0 {
            [true, false]
        } else {
            [false, true]
        };
        for events in order {
            set_command_events(Some(events));
            let f = run_daemon(&sim, "events", &[("hold".to_owned(), rate, secs)], false).await;
            let f = &f[0];
            let us = f.cpu / f.operations.max(1) as f64 * 1e6;
            println!(
                "rep {rep} command_events = {events}: {} ops = {:.1} ops/s, CPU {:.2}s = {us:.1} us/op",
                f.operations, f.ops_per_sec, f.cpu
            );
            if events {
                on.push(us);
            } else {
                off.push(us);
            }
        }
    }
    set_command_events(None);
    let ratios: Vec<f64> = on.iter().zip(&off).map(|(a, b)| a / b).collect();
    let (a, b) = (median(on), median(off));
    println!(
        "MEDIAN with command events {a:.1} us/op, without {b:.1} us/op: +{:.1} us/op, ratio (median of per-rep ratios) {:.3}x",
        a - b,
        median(ratios)
    );
    drop(sim_proc);
}
