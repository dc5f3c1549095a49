//! The daemon end to end: `mongoload::daemon::start` in-process (and the
//! real binary for SIGTERM) against the simulator over TCP, asserting on
//! the scraped `/metrics` page, `/readyz`, `/status` and the simulator's
//! own view of the data.

use crate::common;
use crate::common::prometheus_tools;

use std::time::{Duration, Instant};

use common::*;
use mongodb::bson::{doc, Document};
use mongoload::daemon::Running;
use mongoload::sim::{ErrorFault, LatencyDist, SimHandle};

const OPS: [&str; 4] = ["insert", "update", "delete", "find"];
/// The weights of `config_toml`, in the order of `OPS`.
const WEIGHTS: [f64; 4] = [6.5, 3.0, 3.0, 87.5];
const READY: Duration = Duration::from_secs(20);

fn ops_total(page: &str, op: &str, outcome: &str) -> f64 {
    sample(
        page,
        "mongoload_operations_total",
        &[("workload", "w"), ("op", op), ("outcome", outcome)],
    )
    .unwrap_or(0.0)
}

/// Failed prepare attempts of workload `w` of class `kind`.
fn prepare_errors(page: &str, kind: &str) -> f64 {
    sample(
        page,
        "mongoload_prepare_errors_total",
        &[("workload", "w"), ("kind", kind)],
    )
    .unwrap_or(0.0)
}

/// Prepare step attempts of workload `w` by outcome.
fn prepare_steps(page: &str, outcome: &str) -> f64 {
    sample(
        page,
        "mongoload_prepare_steps_total",
        &[("workload", "w"), ("outcome", outcome)],
    )
    .unwrap_or(0.0)
}

fn errors(page: &str, op: &str, kind: &str) -> f64 {
    sample(
        page,
        "mongoload_errors_total",
        &[("workload", "w"), ("op", op), ("kind", kind)],
    )
    .unwrap_or(0.0)
}

/// Finished operations of the load ops (the prepare step excluded).
fn load_ops(page: &str) -> f64 {
    OPS.iter()
        .map(|op| ops_total(page, op, "ok") + ops_total(page, op, "error"))
        .sum()
}

/// Operations of workload `w` missed (0 when none were).
fn missed_ops(page: &str) -> f64 {
    sample(
        page,
        "mongoload_missed_operations_total",
        &[("workload", "w")],
    )
    .unwrap_or(0.0)
}

fn gauge(page: &str, name: &str) -> f64 {
    sample(page, name, &[("workload", "w")]).unwrap_or_else(|| panic!("{name} is exported"))
}

/// CPU time (user + system) of this process so far, from /proc/self/stat.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the
    // 14th and 15th fields overall, in clock ticks (100 per second on Linux).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0.0))
        .collect();
    f.get(11)
        .zip(f.get(12))
        .map_or(f64::NAN, |(u, s)| (u + s) / 100.0)
}

fn target_up(page: &str) -> Option<f64> {
    sample(page, "mongoload_target_up", &[])
}

/// The daemon on `sim` with the default workload and `stages`, once
/// `/readyz` answers 200.
async fn ready_daemon(sim: &SimHandle, stages: &str) -> (ConfigFile, Running) {
    let (file, running) = start_daemon(&config_toml(&sim.uri(), stages)).await;
    wait_status(running.http_addr, "/readyz", 200, READY).await;
    (file, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fixed_rate_counts_match_the_mix_and_the_deployment() {
    let sim = crate::common::test_db().await;
    let (_file, running) = start_daemon(&crate::common::config_toml_in(
        &sim.uri(),
        &sim.database("mltest"),
        "[[workloads.stages]]\nname = \"steady\"\nrate = 200\nduration = \"4s\"\n",
    ))
    .await;
    let addr = running.http_addr;
    let metrics = running.metrics.clone();
    wait_status(addr, "/readyz", 200, READY).await;

    // While the stage runs: the target gauges, the phase, in-flight bound
    // and the achieved rate over a measured interval.
    let (t1, p1, cpu0) = (Instant::now(), scrape(addr).await, cpu_seconds());
    assert_eq!(gauge(&p1, "mongoload_target_rate"), 200.0);
    assert_eq!(gauge(&p1, "mongoload_target_concurrency"), 0.0);
    assert_eq!(
        sample(
            &p1,
            "mongoload_phase_info",
            &[("workload", "w"), ("stage", "steady")]
        ),
        Some(1.0)
    );
    assert_eq!(target_up(&p1), Some(1.0));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let p2 = scrape(addr).await;
    assert!(gauge(&p2, "mongoload_inflight_operations") <= 32.0);

    let summary = tokio::time::timeout(Duration::from_secs(20), running.wait())
        .await
        .expect("the run ends after its only stage");
    // The page as /metrics would serve it after the last operation (the
    // HTTP server stops with the run).
    let page = metrics.encode().unwrap();
    let missed = missed_ops(&page);
    let total = load_ops(&page);
    // Every intended operation of 4 s at 200/s is either done or missed:
    // the schedule asked for exactly 800.
    assert_eq!(total + missed, 800.0, "done {total} + missed {missed}");
    // Rate achieved from the first scrape to the end of the run (drain
    // included). A debug build spends about 1.4 ms of CPU per operation
    // (simulator, driver and daemon together), so 200/s needs a third of a
    // core; this test may share two cores with builds: when starved of CPU
    // the daemon counts what it could not issue as missed (asserted exact
    // above), so the bounds here are loose; never more than scheduled.
    let cpu = cpu_seconds() - cpu0;
    let elapsed = t1.elapsed().as_secs_f64();
    let achieved = (total - load_ops(&p1)) / elapsed;
    let context = format!(
        "achieved {achieved:.1} ops/s against 200; {missed} missed; \
         {cpu:.2} s of CPU (simulator, driver and daemon) in {elapsed:.2} s"
    );
    assert!((120.0..=220.0).contains(&achieved), "{context}");
    assert!(missed <= 0.3 * 800.0, "{context}");
    eprintln!("{context}");
    let w = &summary.workloads[0];
    assert_eq!(w.ok as f64 + w.errors as f64, total);
    assert_eq!(w.errors, 0);

    let sum_w: f64 = WEIGHTS.iter().sum();
    for (op, weight) in OPS.iter().zip(WEIGHTS) {
        let ok = ops_total(&page, op, "ok");
        let err = ops_total(&page, op, "error");
        assert_eq!(err, 0.0, "{op} errors");
        let p = weight / sum_w;
        let tol = binomial_tolerance(total, p);
        assert!(
            (ok - total * p).abs() <= tol,
            "{op}: {ok} of {total}, expected {:.1} ± {tol:.1}",
            total * p
        );
        // Every finished operation is in the histogram exactly once.
        let labels = [("workload", "w"), ("op", *op)];
        let count = sample(&page, "mongoload_latency_seconds_count", &labels).unwrap();
        assert_eq!(count, ok + err, "{op}: histogram count vs operations");
        let inf = sample(
            &page,
            "mongoload_latency_seconds_bucket",
            &[("workload", "w"), ("op", op), ("le", "+Inf")],
        )
        .unwrap();
        assert_eq!(inf, count, "{op}: +Inf bucket");
        let sum = sample(&page, "mongoload_latency_seconds_sum", &labels).unwrap();
        assert!(sum > 0.0 && sum < count * 1.0, "{op}: latency sum {sum}");
    }

    let docs = |op: &str| {
        sample(
            &page,
            "mongoload_documents_total",
            &[("workload", "w"), ("op", op)],
        )
        .unwrap_or(0.0)
    };
    assert_eq!(docs("insert"), ops_total(&page, "insert", "ok"));
    assert!(docs("find") <= ops_total(&page, "find", "ok"));
    // Finds pick keys from the loaded range; few were deleted.
    assert!(docs("find") >= 0.8 * ops_total(&page, "find", "ok"));
    assert!(docs("delete") <= ops_total(&page, "delete", "ok"));
    assert!(docs("update") <= ops_total(&page, "update", "ok"));

    // The deployment's view: loaded + inserted − deleted.
    let client = sim.client().await;
    let coll = client
        .database(&sim.database("mltest"))
        .collection::<Document>("m");
    let n = coll.count_documents(doc! {}).await.unwrap() as f64;
    assert_eq!(n, 200.0 + docs("insert") - docs("delete"));
    assert!(coll
        .list_index_names()
        .await
        .unwrap()
        .iter()
        .any(|i| i != "_id_"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_stage_keeps_concurrency_workers_busy() {
    let sim = sim().await;
    sim.faults()
        .set_latency(Some(LatencyDist::Fixed(Duration::from_millis(5))));
    let (_file, running) = ready_daemon(
        &sim,
        "[[workloads.stages]]\nname = \"closed\"\nconcurrency = 4\nduration = \"60s\"\n",
    )
    .await;
    let addr = running.http_addr;

    let mut max_inflight = 0.0f64;
    let mut last = 0.0;
    for _ in 0..8 {
        let page = scrape(addr).await;
        assert_eq!(gauge(&page, "mongoload_target_concurrency"), 4.0);
        assert_eq!(gauge(&page, "mongoload_target_rate"), 0.0);
        let inflight = gauge(&page, "mongoload_inflight_operations");
        assert!((0.0..=4.0).contains(&inflight), "in flight {inflight}");
        max_inflight = max_inflight.max(inflight);
        let ops = load_ops(&page);
        assert!(ops >= last);
        last = ops;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(max_inflight >= 1.0, "workers were never seen busy");
    // 4 workers with 5 ms per op do far more than a paced trickle; and no
    // more connections than the pool sized to the plan (+ monitoring).
    assert!(last > 50.0, "only {last} operations in closed loop");
    assert!(
        sim.connections() <= 4 + 2,
        "{} connections",
        sim.connections()
    );

    running.stop();
    let summary = tokio::time::timeout(Duration::from_secs(10), running.wait())
        .await
        .expect("stop drains within the grace period");
    assert!(summary.workloads[0].ok as f64 >= last);
    assert_eq!(summary.workloads[0].missed, 0, "closed loop never misses");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_error_codes_land_under_their_kind() {
    let sim = sim().await;
    let (_file, running) = start_daemon(&config_toml(
        &sim.uri(),
        // Writes are 12.5% of the mix; a higher rate gives each a few per second.
        "[[workloads.stages]]\nrate = 300\nduration = \"60s\"\n",
    ))
    .await;
    let addr = running.http_addr;
    let metrics = running.metrics.clone();
    wait_status(addr, "/readyz", 200, READY).await;

    let cases = [
        (10107, "find", "not_primary"),
        (112, "update", "write_conflict"),
        (11000, "insert", "duplicate_key"),
        (50, "delete", "timeout"),
    ];
    for (code, command, kind) in cases {
        let before = scrape(addr).await;
        let base = errors(&before, command, kind);
        sim.faults().set_error(Some(ErrorFault {
            rate: 1.0,
            code,
            commands: vec![command.to_owned()],
        }));
        wait_metric(
            addr,
            &format!("code {code} on {command} counted as {kind}"),
            Duration::from_secs(15),
            |page| errors(page, command, kind) >= base + 3.0,
        )
        .await;
        sim.faults().set_error(None);
    }

    running.stop();
    tokio::time::timeout(Duration::from_secs(10), running.wait())
        .await
        .expect("stop drains");
    let page = metrics.encode().unwrap();
    for op in OPS {
        let by_kind = sum(
            &page,
            "mongoload_errors_total",
            &[("workload", "w"), ("op", op)],
        );
        assert_eq!(
            by_kind,
            ops_total(&page, op, "error"),
            "{op}: errors by kind vs outcome=\"error\""
        );
    }
    // Writes errors that do not disturb the topology are only their kind.
    for (op, kind) in [
        ("update", "write_conflict"),
        ("insert", "duplicate_key"),
        ("delete", "timeout"),
    ] {
        assert_eq!(
            errors(&page, op, kind),
            ops_total(&page, op, "error"),
            "{op}: every error is {kind}"
        );
    }
    // No code was injected into finds except 10107.
    assert_eq!(errors(&page, "find", "duplicate_key"), 0.0);
    assert_eq!(errors(&page, "find", "write_conflict"), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_and_target_up_follow_the_deployment() {
    let sim = sim().await;
    let (_file, running) = ready_daemon(
        &sim,
        "[[workloads.stages]]\nrate = 100\nduration = \"120s\"\n",
    )
    .await;
    let addr = running.http_addr;
    assert_eq!(target_up(&scrape(addr).await), Some(1.0));
    let before = scrape(addr).await;
    let net_before = sum(&before, "mongoload_errors_total", &[("workload", "w")]);

    // The server goes away: listener closed, connections dropped.
    sim.stop_listener().await;
    wait_status(addr, "/readyz", 503, Duration::from_secs(15)).await;
    let down = wait_metric(addr, "target_up 0", Duration::from_secs(10), |p| {
        target_up(p) == Some(0.0)
    })
    .await;
    assert_eq!(must_get(addr, "/healthz").await.status, 200);
    let status: serde_json::Value =
        serde_json::from_str(&must_get(addr, "/status").await.body).unwrap();
    assert_eq!(status["target"]["up"], false);
    // Operations during the outage fail as network or server selection errors.
    let page = wait_metric(
        addr,
        "outage errors counted",
        Duration::from_secs(10),
        |p| sum(p, "mongoload_errors_total", &[("workload", "w")]) > net_before,
    )
    .await;
    let outage: f64 = ["network", "server_selection", "timeout"]
        .iter()
        .map(|k| {
            sum(
                &page,
                "mongoload_errors_total",
                &[("workload", "w"), ("kind", k)],
            )
        })
        .sum();
    let all = sum(&page, "mongoload_errors_total", &[("workload", "w")]);
    assert_eq!(outage, all, "outage errors are network-like:\n{down}");

    sim.restart_listener().await.unwrap();
    wait_status(addr, "/readyz", 200, Duration::from_secs(20)).await;
    let up = scrape(addr).await;
    assert_eq!(target_up(&up), Some(1.0));
    let ok = ops_total(&up, "find", "ok");
    wait_metric(addr, "finds succeed again", Duration::from_secs(10), |p| {
        ops_total(p, "find", "ok") > ok + 10.0
    })
    .await;
    running.stop();
    let _ = tokio::time::timeout(Duration::from_secs(10), running.wait()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_at_start_runs_and_becomes_ready_later() {
    let addr = free_port();
    let uri = format!("mongodb://{addr}/");
    let (_file, running) = start_daemon(&config_toml(
        &uri,
        "[[workloads.stages]]\nrate = 100\nduration = \"120s\"\n",
    ))
    .await;
    let http = running.http_addr;
    assert_eq!(must_get(http, "/healthz").await.status, 200);
    assert_eq!(must_get(http, "/readyz").await.status, 503);
    let page = wait_metric(
        http,
        "failed prepare attempts counted",
        Duration::from_secs(15),
        |p| prepare_steps(p, "error") >= 1.0,
    )
    .await;
    assert_eq!(target_up(&page), Some(0.0));
    let classed: f64 = ["network", "server_selection"]
        .iter()
        .map(|k| prepare_errors(&page, k))
        .sum();
    assert_eq!(
        classed,
        prepare_steps(&page, "error"),
        "prepare errors are server_selection or network"
    );
    // Prepare has its own families: no op label of that name.
    assert!(!page.contains(r#"op="prepare""#));
    assert_eq!(must_get(http, "/readyz").await.status, 503);

    // The deployment comes up on that port.
    let sim = sim_on(addr).await;
    wait_status(http, "/readyz", 200, Duration::from_secs(40)).await;
    let page = wait_metric(http, "operations succeed", Duration::from_secs(10), |p| {
        ops_total(p, "find", "ok") > 10.0
    })
    .await;
    assert_eq!(target_up(&page), Some(1.0));
    // After a complete prepare every step counts ok once.
    let cfg = mongoload::config::parse_with_env(
        &config_toml(
            &uri,
            "[[workloads.stages]]\nrate = 100\nduration = \"120s\"\n",
        ),
        std::path::Path::new("t.toml"),
        std::iter::empty(),
    )
    .unwrap();
    let steps = cfg.workloads[0].build().unwrap().prepare().len();
    assert_eq!(prepare_steps(&page, "ok"), steps as f64);
    running.stop();
    let _ = tokio::time::timeout(Duration::from_secs(10), running.wait()).await;
    drop(sim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stop_drains_and_returns_the_summary() {
    let sim = sim().await;
    // Every command takes 200 ms: stopping finds operations in flight.
    let (_file, running) = ready_daemon(
        &sim,
        "[[workloads.stages]]\nrate = 100\nduration = \"120s\"\n",
    )
    .await;
    let addr = running.http_addr;
    sim.faults()
        .set_latency(Some(LatencyDist::Fixed(Duration::from_millis(200))));
    wait_metric(addr, "operations in flight", Duration::from_secs(5), |p| {
        gauge(p, "mongoload_inflight_operations") >= 5.0
    })
    .await;
    let metrics = running.metrics.clone();
    let t = Instant::now();
    running.stop();
    let summary = tokio::time::timeout(Duration::from_secs(10), running.wait())
        .await
        .expect("stop drains within the grace period");
    assert!(
        t.elapsed() < Duration::from_secs(3),
        "drain took {:?}",
        t.elapsed()
    );
    let page = metrics.encode().unwrap();
    let w = &summary.workloads[0];
    assert_eq!(w.name, "w");
    // In-flight operations finished (not abandoned): all counted.
    assert_eq!((w.ok + w.errors) as f64, load_ops(&page));
    assert_eq!(w.errors, 0);
    assert!(w.ok >= 5, "{} operations ok", w.ok);
    assert_eq!(gauge(&page, "mongoload_inflight_operations"), 0.0);
    assert!(
        get(addr, "/healthz").await.is_err(),
        "HTTP stops with the run"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_the_binary_with_exit_0_and_a_summary() {
    let sim = sim().await;
    let http = free_port();
    let toml = config_toml(
        &sim.uri(),
        "[[workloads.stages]]\nrate = 100\nduration = \"120s\"\n",
    )
    .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{http}\""));
    let file = write_config(&toml);
    let (mut child, stderr_path) = spawn_run(&file, "info");
    wait_status(http, "/readyz", 200, READY).await;
    wait_metric(http, "some operations", Duration::from_secs(5), |p| {
        ops_total(p, "find", "ok") > 10.0
    })
    .await;
    let status = terminate(&mut child).await;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert_eq!(status.code(), Some(0), "stderr:\n{stderr}");
    assert!(stderr.contains("stopping"), "stderr:\n{stderr}");
    let final_line = stderr
        .lines()
        .find(|l| l.contains("final:"))
        .unwrap_or_else(|| panic!("no final summary line in stderr:\n{stderr}"));
    assert!(
        final_line.contains("operations ok") && final_line.contains("0 errors"),
        "{final_line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promtool_accepts_the_page_under_load() {
    let sim = sim().await;
    let (_file, running) = ready_daemon(
        &sim,
        "[[workloads.stages]]\nrate = 200\nduration = \"120s\"\n",
    )
    .await;
    let addr = running.http_addr;
    // An error kind and a window summary on the page too.
    sim.faults().set_error(Some(ErrorFault {
        rate: 0.5,
        code: 11000,
        commands: vec!["insert".into()],
    }));
    let page = wait_metric(
        addr,
        "an error and operations",
        Duration::from_secs(10),
        |p| errors(p, "insert", "duplicate_key") >= 1.0 && ops_total(p, "find", "ok") > 100.0,
    )
    .await;
    running.stop();
    let _ = tokio::time::timeout(Duration::from_secs(10), running.wait()).await;

    // Every line parses, and every family the contract names is present.
    parse_metrics(&page).unwrap();
    for name in [
        "mongoload_operations_total",
        "mongoload_documents_total",
        "mongoload_errors_total",
        "mongoload_latency_seconds_bucket",
        "mongoload_target_rate",
        "mongoload_target_concurrency",
        "mongoload_inflight_operations",
        "mongoload_schedule_lag_seconds",
        "mongoload_target_up",
        "mongoload_build_info",
        "process_cpu_seconds_total",
    ] {
        assert!(!samples(&page, name, &[]).is_empty(), "{name} missing");
    }
    prometheus_tools::check_metrics(&page);
}

/// A simulator started without `--auth` does not know `saslStart`, so
/// with credentials every operation fails authentication:
/// the password must stay out of every output all the same, the failures
/// must be counted, and SIGTERM must still end the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_never_appears() {
    let sim = sim().await;
    let http = free_port();
    let uri = format!("mongodb://user:hunter2@{}/", sim.addr());
    let toml = config_toml(
        &uri,
        "[[workloads.stages]]\nrate = 100\nduration = \"120s\"\n",
    )
    .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{http}\""));
    let file = write_config(&toml);
    let (mut child, stderr_path) = spawn_run(&file, "info");
    let page = wait_metric(
        http,
        "failed prepare attempts",
        Duration::from_secs(20),
        |p| prepare_steps(p, "error") >= 2.0,
    )
    .await;
    let prepare = prepare_steps(&page, "error");
    // Refused authentication, or a checkout the driver never completes
    // (bounded by the operation timeout); on a loaded machine the handshake
    // can also outlast the connect or server selection timeout. Never
    // "other": every failure has a class.
    let by_kind: Vec<(&str, f64)> = ["auth", "timeout", "server_selection", "network", "other"]
        .into_iter()
        .map(|k| (k, prepare_errors(&page, k)))
        .collect();
    assert_eq!(
        by_kind.iter().take(4).map(|(_, n)| n).sum::<f64>(),
        prepare,
        "prepare errors by kind: {by_kind:?}"
    );
    assert_eq!(target_up(&page), Some(0.0));
    assert!(!page.contains("hunter2"));
    let status = must_get(http, "/status").await;
    assert_eq!(status.status, 200);
    assert!(!status.body.contains("hunter2"), "{}", status.body);
    assert!(
        status.body.contains(&sim.addr().to_string()),
        "{}",
        status.body
    );
    assert_eq!(must_get(http, "/readyz").await.status, 503);

    let exit = terminate(&mut child).await;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert_eq!(exit.code(), Some(0), "stderr:\n{stderr}");
    assert!(!stderr.contains("hunter2"), "stderr:\n{stderr}");
    assert!(
        stderr.contains(&sim.addr().to_string()),
        "stderr:\n{stderr}"
    );
    assert!(stderr.contains("prepare failed"), "stderr:\n{stderr}");
}

/// Tickets due in the last millisecond of a stage share a timer tick with
/// the stage's end; each must still be executed or counted missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_of_a_stage_is_done_or_missed() {
    let sim = sim().await;
    let (_file, running) = start_daemon(&config_toml(
        &sim.uri(),
        "[[workloads.stages]]\nrate = 1000\nduration = \"1s\"\n\
         [[workloads.stages]]\nrate = 2000\nduration = \"1s\"\n",
    ))
    .await;
    let metrics = running.metrics.clone();
    let summary = tokio::time::timeout(Duration::from_secs(30), running.wait())
        .await
        .expect("the run ends after its stages");
    let page = metrics.encode().unwrap();
    let missed = missed_ops(&page);
    let done = load_ops(&page);
    assert_eq!(done + missed, 3000.0, "done {done} + missed {missed}");
    let w = &summary.workloads[0];
    assert_eq!((w.ok + w.errors) as f64, done);
    assert_eq!(w.missed as f64, missed);
}

/// A long prepare: `/readyz` is 503 (the plan does not run yet), while
/// `/readyz?preparing=ready`, the Kubernetes readiness probe, is 200 so a
/// first prepare does not stall a rolling update; both 200 once it runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_can_count_a_preparing_workload_as_ready() {
    let sim = sim().await;
    // 100 load batches, each held 300 ms: half a minute of prepare.
    sim.faults()
        .set_latency(Some(mongoload::sim::LatencyDist::Fixed(
            Duration::from_millis(300),
        )));
    let toml = config_toml(
        &sim.uri(),
        "[[workloads.stages]]\nrate = 50\nduration = \"120s\"\n",
    )
    .replace("load_batch = 100", "load_batch = 2");
    let (_file, running) = start_daemon(&toml).await;
    let http = running.http_addr;
    wait_status(
        http,
        "/readyz?preparing=ready",
        200,
        Duration::from_secs(20),
    )
    .await;
    let status = must_get(http, "/status").await.body;
    assert!(status.contains("\"preparing\""), "{status}");
    assert_eq!(must_get(http, "/readyz").await.status, 503);
    sim.faults().set_latency(None);
    wait_status(http, "/readyz", 200, Duration::from_secs(40)).await;
    assert_eq!(must_get(http, "/readyz?preparing=ready").await.status, 200);
    running.stop();
    let _ = tokio::time::timeout(Duration::from_secs(10), running.wait()).await;
    sim.shutdown().await;
}
