//! Failover drills against the simulator's three-member replica set, with
//! the daemon in-process and the official driver discovering the set from
//! a seed list: a step-down mid-stage (as MongoDB 4.2 and later do it,
//! connections kept, and as older servers did, connections closed) shows
//! as a primary change, its write outage and time without a primary match
//! the simulator's record of the election, the load recovers to its
//! scheduled rate, errors during an election are counted by class and
//! retried writes as such; the stage report and the run log carry the
//! failover.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::{sample, sum};
use mongoload::report::StageReport;
use mongoload::sim::{self, FaultConfig, LatencyDist, ReplSetConfig, SimConfig, SimHandle};

/// A three-member set with fixed elections of `election`; every reply
/// delayed by `latency` (so writes are in flight when a primary steps down).
async fn replset(election: Duration, latency: Duration) -> SimHandle {
    replset_stepping_down(election, latency, false).await
}

/// [`replset`] whose step-downs close the old primary's connections when
/// `closes` (servers before MongoDB 4.2).
async fn replset_stepping_down(election: Duration, latency: Duration, closes: bool) -> SimHandle {
    let mut set = ReplSetConfig::new("rs0", 3);
    set.election = sim::ElectionTime::fixed(election);
    set.step_down_closes = closes;
    let config = SimConfig {
        faults: FaultConfig {
            latency: (!latency.is_zero()).then_some(LatencyDist::Fixed(latency)),
            ..Default::default()
        },
        ..Default::default()
    };
    sim::start_replset(config, set)
        .await
        .expect("the replica set starts")
}

/// An insert-only workload `w` at `rate` ops/s for `secs`, against `uri`,
/// with the run log at `log`.
fn config(uri: &str, log: &Path, selection: &str, rate: u32, secs: u32) -> String {
    format!(
        r#"[target]
uri = "{uri}"
database = "mltest"
connect_timeout = "2s"
server_selection_timeout = "{selection}"
operation_timeout = "15s"
[http]
listen = "127.0.0.1:0"
[run]
shutdown_grace = "5s"
log = "{log}"
[[workloads]]
name = "w"
kind = "mixed"
max_inflight = 256
seed = 3
[workloads.mixed]
insert = 1
update = 0
delete = 0
find = 0
doc_size = 256
initial_docs = 10
collection = "f"
[[workloads.stages]]
name = "drill"
rate = {rate}
duration = "{secs}s"
"#,
        log = log.display()
    )
}

fn page(running: &mongoload::daemon::Running) -> String {
    running.metrics.encode().unwrap()
}

fn ok_ops(page: &str) -> f64 {
    sum(
        page,
        "mongoload_operations_total",
        &[("workload", "w"), ("outcome", "ok")],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_down_mid_stage_is_seen_timed_and_recovered_from() {
    step_down_drill(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_down_that_closes_the_connections_is_seen_timed_and_recovered_from() {
    step_down_drill(true).await;
}

/// A step-down 2 s into a 22 s stage at 200 ops/s; `closes`: as servers
/// before 4.2 did it.
async fn step_down_drill(closes: bool) {
    const RATE: u32 = 200;
    let election = Duration::from_secs(2);
    let sim = replset_stepping_down(election, Duration::from_millis(20), closes).await;
    let set = sim.replset().unwrap().clone();
    // Seed the driver with one secondary only: it discovers the rest.
    let seed = format!("mongodb://{}/?replicaSet=rs0", set.hosts()[1]);
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let (_file, running) = crate::common::start_daemon(&config(&seed, &log, "10s", RATE, 22)).await;
    let failover = running.failover.clone();

    let p = crate::common::wait_for("discovery and load", Duration::from_secs(30), || async {
        let p = page(&running);
        (sample(&p, "mongoload_topology_servers", &[("type", "rs_primary")]) == Some(1.0)
            && sample(
                &p,
                "mongoload_topology_servers",
                &[("type", "rs_secondary")],
            ) == Some(2.0)
            && ok_ops(&p) > f64::from(RATE))
        .then_some(p)
    })
    .await;
    let first = set.hosts()[0].clone();
    assert_eq!(
        sample(&p, "mongoload_primary_info", &[("primary", &first)]),
        Some(1.0),
        "member 0 is primary"
    );
    assert_eq!(
        sample(&p, "mongoload_primary_changes_total", &[]),
        Some(0.0)
    );

    let down = set.step_down().expect("a primary to step down");
    assert_eq!(down.election, election);
    let new = set.hosts()[down.new_primary].clone();
    let seen = crate::common::wait_for(
        "the failover and its write outage",
        Duration::from_secs(20),
        || async {
            let p = page(&running);
            let f = failover.recent(1);
            (sample(&p, "mongoload_write_outage_seconds_count", &[]) >= Some(1.0)
                && f.first().is_some_and(|r| r.write_outage.is_some()))
            .then(|| (p, f[0].clone()))
        },
    )
    .await;
    let (p, record) = seen;
    assert_eq!(
        sample(&p, "mongoload_primary_changes_total", &[]),
        Some(1.0)
    );
    assert_eq!(record.to, new);
    assert_eq!(record.from.as_deref(), Some(first.as_str()));
    assert_eq!(
        sample(&p, "mongoload_primary_info", &[("primary", &new)]),
        Some(1.0)
    );
    assert_eq!(
        sample(&p, "mongoload_primary_info", &[("primary", &first)]),
        None
    );
    let outage = sample(&p, "mongoload_write_outage_last_seconds", &[]).unwrap();
    // The simulator's own record of the election: from the step-down to
    // the new primary's election.
    let sim_record = set.failovers();
    let recorded = sim_record[0]
        .elected
        .expect("the election ended")
        .duration_since(sim_record[0].stepped_down)
        .unwrap()
        .as_secs_f64();
    let want = recorded;
    assert!(
        (outage - want).abs() <= 0.2 * want,
        "write outage {outage:.3}s, the simulator's election {want:.3}s"
    );
    let gap = record
        .no_primary
        .expect("a time without primary")
        .as_secs_f64();
    assert!(
        (gap - want).abs() <= 0.2 * want,
        "no primary for {gap:.3}s, the simulator's election {want:.3}s"
    );
    // Within 5 s of the new primary the load is back at its scheduled rate.
    tokio::time::sleep_until((record.at + Duration::from_secs(5)).into()).await;
    let a = ok_ops(&page(&running));
    tokio::time::sleep_until((record.at + Duration::from_secs(10)).into()).await;
    let later = page(&running);
    let b = ok_ops(&later);
    let rate = (b - a) / 5.0;
    // Writes in flight at the step-down were retried by the driver, and the
    // retries are counted as such, each when its write returns (which may
    // be after the first write that ended the outage, read above).
    let retried = sum(&later, "mongoload_retried_writes_total", &[]);
    assert!(retried >= 1.0, "no retried write counted: {retried}");
    eprintln!(
        "election {:?} (step-down closing connections: {closes}), {want:.3}s by the simulator's record: \
         write outage {outage:.3}s, no primary {gap:.3}s, {retried} retried writes; \
         {rate:.1} ok ops/s 5-10 s after the new primary (scheduled {RATE})",
        election
    );
    assert!(
        (rate - f64::from(RATE)).abs() <= 0.1 * f64::from(RATE),
        "{rate:.1} ok ops/s from 5 s to 10 s after the new primary (scheduled {RATE})"
    );

    tokio::time::timeout(Duration::from_secs(60), running.wait())
        .await
        .expect("the run ends");
    let reports = crate::common::read_run_log(&log);
    let f = &reports[0].failovers;
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(f[0].to, new);
    let reported = f[0].write_outage_seconds.expect("the outage in the report");
    assert!((reported - outage).abs() < 1e-9, "{reported} vs {outage}");
    assert!(f[0].no_primary_seconds.is_some());
    drop(sim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_during_an_election_are_counted_by_class() {
    // Server selection gives up before the election ends: writes fail with
    // server_selection (after the driver's one retry) until it is over.
    let election = Duration::from_secs(3);
    let sim = replset(election, Duration::ZERO).await;
    let set = sim.replset().unwrap().clone();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let (_file, running) =
        crate::common::start_daemon(&config(&sim.uri(), &log, "500ms", 100, 60)).await;
    crate::common::wait_for("load", Duration::from_secs(30), || async {
        (ok_ops(&page(&running)) > 100.0).then_some(())
    })
    .await;
    set.step_down().unwrap();
    let p = crate::common::wait_for("the new primary", Duration::from_secs(20), || async {
        let p = page(&running);
        (sample(&p, "mongoload_primary_changes_total", &[]) >= Some(1.0)).then_some(p)
    })
    .await;
    let selection = sum(
        &p,
        "mongoload_errors_total",
        &[("workload", "w"), ("kind", "server_selection")],
    );
    assert!(selection >= 1.0, "no server_selection errors:\n{p}");
    assert_eq!(
        sum(
            &p,
            "mongoload_errors_total",
            &[("workload", "w"), ("kind", "other")]
        ),
        0.0,
        "every election error has its class"
    );
    let requests = sum(
        &p,
        "mongoload_request_errors_total",
        &[("workload", "w"), ("kind", "server_selection")],
    );
    assert_eq!(requests, selection, "one request per insert operation");
    // The outage is over once a write is acknowledged again.
    crate::common::wait_for(
        "the write outage to end",
        Duration::from_secs(20),
        || async {
            (running.failover.ongoing_outage().is_none()
                && sample(&page(&running), "mongoload_write_outage_seconds_count", &[])
                    >= Some(1.0))
            .then_some(())
        },
    )
    .await;
    running.stop();
    tokio::time::timeout(Duration::from_secs(60), running.wait())
        .await
        .expect("the run ends");
    let p = page_after(&log);
    assert!(p.errors["server_selection"] >= 1, "{:?}", p.errors);
    let outage = p.failovers[0].write_outage_seconds.unwrap();
    let want = election.as_secs_f64();
    eprintln!(
        "election {want}s, server selection 500ms: write outage {outage:.3}s, {} server_selection errors",
        p.errors["server_selection"]
    );
    assert!((outage - want).abs() <= 0.2 * want, "outage {outage}");
    drop(sim);
}

fn page_after(log: &Path) -> StageReport {
    crate::common::read_run_log(log).into_iter().next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_workload_sees_the_failover_but_no_outage() {
    let sim = replset(Duration::from_millis(500), Duration::ZERO).await;
    let set = sim.replset().unwrap().clone();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let text = config(&sim.uri(), &log, "5s", 50, 60)
        .replace("insert = 1", "insert = 0")
        .replace("find = 0", "find = 1");
    let (_file, running) = crate::common::start_daemon(&text).await;
    crate::common::wait_for("load", Duration::from_secs(30), || async {
        (ok_ops(&page(&running)) > 20.0).then_some(())
    })
    .await;
    let started = Instant::now();
    let down = set.step_down().unwrap();
    let new = set.hosts()[down.new_primary].clone();
    // The driver's view of the new primary (its metric page on failure).
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let p = page(&running);
        if sample(&p, "mongoload_primary_info", &[("primary", &new)]) == Some(1.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no new primary {new} after 20 s:\n{p}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "new primary seen {:?} after the step-down",
        started.elapsed()
    );
    // The outage begun by the loss of the primary is dropped 5 s after it
    // is back, since no write was waiting.
    crate::common::wait_for(
        "the unconfirmed outage dropped",
        Duration::from_secs(15),
        || async { running.failover.ongoing_outage().is_none().then_some(()) },
    )
    .await;
    running.stop();
    tokio::time::timeout(Duration::from_secs(30), running.wait())
        .await
        .expect("the run ends");
    let r = page_after(&log);
    assert!(!r.failovers.is_empty(), "the failover in the report");
    // The driver lost its primary, so an outage began; no write ended it.
    assert!(
        r.failovers.iter().all(|f| f.write_outage_seconds.is_none()),
        "{:?}",
        r.failovers
    );
    assert_eq!(r.failovers.last().unwrap().to, new);
    drop(sim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulators_transactions_end_with_an_election() {
    use mongodb::bson::doc;
    use mongodb::error::TRANSIENT_TRANSACTION_ERROR;
    let sim = replset(Duration::from_millis(300), Duration::ZERO).await;
    let set = sim.replset().unwrap().clone();
    let client = crate::common::driver_client(&sim.uri(), true, Duration::from_secs(10)).await;
    let coll = client
        .database("txn")
        .collection::<mongodb::bson::Document>("c");
    coll.insert_one(doc! {"_id": 0}).await.unwrap();

    // A transaction commits (a replica set accepts them, unlike a standalone).
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    coll.insert_one(doc! {"_id": 1})
        .session(&mut s)
        .await
        .unwrap();
    coll.delete_one(doc! {"_id": 0})
        .session(&mut s)
        .await
        .unwrap();
    assert_eq!(
        coll.count_documents(doc! {}).session(&mut s).await.unwrap(),
        1
    );
    s.commit_transaction().await.unwrap();
    assert!(coll.find_one(doc! {"_id": 1}).await.unwrap().is_some());

    // An election aborts an open transaction: its commit fails with a
    // transient error, and the whole transaction can be retried.
    s.start_transaction().await.unwrap();
    coll.insert_one(doc! {"_id": 2})
        .session(&mut s)
        .await
        .unwrap();
    set.step_down().unwrap();
    set.wait_for_primary(Duration::from_secs(10)).await.unwrap();
    let e = s
        .commit_transaction()
        .await
        .expect_err("aborted by the election");
    assert!(
        e.contains_label(TRANSIENT_TRANSACTION_ERROR) || crate::common::error_code(&e) == Some(251),
        "{e}"
    );
    s.start_transaction().await.unwrap();
    coll.insert_one(doc! {"_id": 3})
        .session(&mut s)
        .await
        .unwrap();
    s.commit_transaction().await.unwrap();
    drop(sim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sysbench_transactions_are_retried_through_a_failover() {
    // Every reply 5 ms late: a transaction (18 statements) is always in
    // flight when the primary steps down.
    let sim = replset(Duration::from_secs(1), Duration::from_millis(5)).await;
    let set = sim.replset().unwrap().clone();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let text = format!(
        r#"[target]
uri = "{uri}"
database = "sbtxn"
server_selection_timeout = "10s"
operation_timeout = "20s"
[http]
listen = "127.0.0.1:0"
[run]
shutdown_grace = "5s"
log = "{log}"
[[workloads]]
name = "sb"
kind = "sysbench"
max_inflight = 32
seed = 4
audit = true
[workloads.sysbench]
collections = 2
docs_per_collection = 200
transactions = true
[[workloads.stages]]
rate = 20
duration = "1m"
"#,
        uri = sim.uri(),
        log = log.display()
    );
    let (_file, running) = crate::common::start_daemon(&text).await;
    let ok = |p: &str| {
        sum(
            p,
            "mongoload_operations_total",
            &[("workload", "sb"), ("outcome", "ok")],
        )
    };
    crate::common::wait_for("transactions", Duration::from_secs(30), || async {
        (ok(&page(&running)) >= 20.0).then_some(())
    })
    .await;
    let down = set.step_down().unwrap();
    let new = set.hosts()[down.new_primary].clone();
    let before = crate::common::wait_for("the new primary", Duration::from_secs(20), || async {
        let p = page(&running);
        (sample(&p, "mongoload_primary_info", &[("primary", &new)]) == Some(1.0)).then(|| ok(&p))
    })
    .await;
    crate::common::wait_for(
        "transactions on the new primary",
        Duration::from_secs(30),
        || async { (ok(&page(&running)) >= before + 40.0).then_some(()) },
    )
    .await;
    running.stop();
    let p = running.metrics.encode().unwrap();
    tokio::time::timeout(Duration::from_secs(30), running.wait())
        .await
        .expect("the run ends");
    let failed_requests = sum(
        &p,
        "mongoload_request_errors_total",
        &[("workload", "sb"), ("op", "transaction")],
    );
    let failed_transactions = sum(&p, "mongoload_errors_total", &[("workload", "sb")]);
    eprintln!(
        "{} transactions ok, {failed_transactions} failed, {failed_requests} failed requests (retried)",
        ok(&p)
    );
    assert!(
        failed_requests >= 1.0,
        "the step-down failed a statement or commit:\n{p}"
    );
    assert_eq!(
        failed_transactions, 0.0,
        "every transaction the election aborted was retried to its commit:\n{p}"
    );
    // The audit follows the reinserts of committed transactions only, and
    // none is lost (w: "majority").
    let w = [("workload", "sb")];
    assert!(
        sum(&p, "mongoload_audit_acknowledged_total", &w) >= 60.0,
        "{p}"
    );
    assert_eq!(sum(&p, "mongoload_audit_missing_total", &w), 0.0);
    let r = crate::common::read_run_log(&log);
    assert_eq!(r[0].audit.as_ref().unwrap().missing, 0);
    drop(sim);
}

/// A replica set (2 s elections) and `mongoload run` against it at 100
/// inserts/s with its log at INFO, ready and 2 s into its load: the set,
/// the HTTP address, the config file (kept for the run's life), the child
/// and its stderr file.
async fn logging_daemon() -> (
    SimHandle,
    std::net::SocketAddr,
    crate::common::ConfigFile,
    crate::common::ChildGuard,
    std::path::PathBuf,
) {
    use crate::common::{free_port, spawn_run, wait_status, write_config};
    let set = replset(Duration::from_secs(2), Duration::ZERO).await;
    let http = free_port();
    let dir = tempfile::tempdir().unwrap();
    let toml = config(&set.uri(), &dir.path().join("run.log"), "5s", 100, 3600)
        .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{http}\""));
    let file = write_config(&toml);
    let (child, stderr_path) = spawn_run(&file, "info");
    wait_status(http, "/readyz", 200, Duration::from_secs(30)).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    (set, http, file, child, stderr_path)
}

/// Connections dropped on a replica set: each drop makes the driver clear
/// the member's pool and lose the primary until its next check, with no
/// election. The log says a connection failed (not an election), once per
/// 10 s with the rest counted, the same primary's return is logged as no
/// election (so is the end of the write outage, if a write saw one), and
/// `mongoload_pool_clears_total{cause="error"}` counts the clears.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_is_logged_as_one_not_as_an_election() {
    use crate::common::{scrape, terminate};
    // Alone: run beside the freeze drills (tests/it/faults.rs), the set
    // stopped answering after the drop in 3 runs of 3, with the published
    // driver as with the patched one (not understood yet).
    let (set, http, _file, mut child, stderr_path) = logging_daemon().await;
    let before = scrape(http).await;
    for _ in 0..4 {
        set.faults().drop_connections();
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    let after = scrape(http).await;
    let status = terminate(&mut child).await;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let clears = |p: &str, cause| {
        sample(p, "mongoload_pool_clears_total", &[("cause", cause)]).expect("the series")
    };
    assert!(
        clears(&after, "error") - clears(&before, "error") >= 1.0,
        "no pool clear counted as error (timeout: {} → {}):\n{stderr}",
        clears(&before, "timeout"),
        clears(&after, "timeout"),
    );
    assert_eq!(
        sum(&after, "mongoload_primary_changes_total", &[]),
        sum(&before, "mongoload_primary_changes_total", &[]),
        "no election happened:\n{stderr}"
    );
    let lost: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("the driver lost the primary"))
        .collect();
    assert_eq!(lost.len(), 1, "one line per 10 s: {lost:#?}\n{stderr}");
    assert!(lost[0].contains("a connection to it failed"), "{lost:#?}");
    assert!(!stderr.contains("an election"), "{stderr}");
    assert!(!stderr.contains("failover: new primary"), "{stderr}");
    let back: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("back after") && l.contains("no election"))
        .collect();
    assert_eq!(back.len(), 1, "one line per 10 s: {back:#?}\n{stderr}");
    let over: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("write outage over") && l.contains("no primary change"))
        .collect();
    assert!(over.len() <= 1, "one line per 10 s: {over:#?}\n{stderr}");
    set.shutdown().await;
}

/// Dropped connections on a replica set for 40 s, about one a second:
/// the log holds at most one line of each kind per 10 s (the loss, the
/// same primary back, the outage begun and over, the error by class),
/// so a day of drops writes at most 8,640 lines of a kind instead of one
/// per drop, and the drops are counted in `mongoload_pool_clears_total`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minute_of_dropped_connections_logs_one_line_of_a_kind_per_10_s() {
    use crate::common::{scrape, terminate};
    use std::collections::BTreeMap;
    const SOAK: Duration = Duration::from_secs(40);
    let (set, http, _file, mut child, stderr_path) = logging_daemon().await;
    let before = scrape(http).await;
    let logged_before = std::fs::read_to_string(&stderr_path)
        .unwrap()
        .lines()
        .count();
    // 100 inserts/s and the driver's checks: a drop about every second.
    set.faults().set_drop_rate(0.01);
    tokio::time::sleep(SOAK).await;
    set.faults().set_drop_rate(0.0);
    let after = scrape(http).await;
    let status = terminate(&mut child).await;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert_eq!(status.code(), Some(0), "{stderr}");
    let clears = sample(&after, "mongoload_pool_clears_total", &[("cause", "error")])
        .unwrap_or(0.0)
        - sample(
            &before,
            "mongoload_pool_clears_total",
            &[("cause", "error")],
        )
        .unwrap_or(0.0);
    assert!(clears >= 10.0, "{clears} pool clears counted:\n{stderr}");
    // A line's kind: its level, target and first words, digits left out.
    let mut kinds: BTreeMap<String, usize> = BTreeMap::new();
    let soak: Vec<&str> = stderr.lines().skip(logged_before).collect();
    for line in &soak {
        let words: Vec<String> = line
            .split_whitespace()
            .skip(1)
            .take(6)
            .map(|w| w.chars().filter(|c| !c.is_ascii_digit()).collect())
            .collect();
        *kinds.entry(words.join(" ")).or_default() += 1;
    }
    let bound = (SOAK.as_secs() / 10 + 2) as usize;
    let over: Vec<_> = kinds.iter().filter(|(_, n)| **n > bound).collect();
    eprintln!(
        "{clears} pool clears in {SOAK:?}: {} lines, {} kinds: {kinds:#?}",
        soak.len(),
        kinds.len()
    );
    assert!(
        over.is_empty(),
        "more than {bound} lines of a kind in {SOAK:?}: {over:#?}\n{stderr}"
    );
    set.shutdown().await;
}

/// A failed transaction's abort runs within the operation's deadline, as
/// its statements do: with every reply 300 ms late and failing, the first
/// statement fails at 300 ms and the abort is cut at the 400 ms
/// `operation_timeout` (before, the abort had 400 ms of its own, and the
/// operation took 600 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_transactions_abort_ends_by_the_operations_deadline() {
    let sim = replset(Duration::from_secs(1), Duration::ZERO).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let text = format!(
        r#"[target]
uri = "{uri}"
database = "sbabort"
operation_timeout = "400ms"
[http]
listen = "127.0.0.1:0"
[run]
shutdown_grace = "5s"
log = "{log}"
[[workloads]]
name = "sb"
kind = "sysbench"
max_inflight = 16
seed = 5
[workloads.sysbench]
collections = 1
docs_per_collection = 50
transactions = true
[[workloads.stages]]
rate = 10
duration = "1m"
"#,
        uri = sim.uri(),
        log = log.display()
    );
    let (_file, running) = crate::common::start_daemon(&text).await;
    let ops = |p: &str, outcome: &str| {
        sum(
            p,
            "mongoload_operations_total",
            &[("workload", "sb"), ("outcome", outcome)],
        )
    };
    crate::common::wait_for("transactions", Duration::from_secs(30), || async {
        (ops(&page(&running), "ok") >= 5.0).then_some(())
    })
    .await;
    // From here every reply is 300 ms late and an error (not transient:
    // the transaction is not retried), the abortTransaction's too.
    sim.faults().set(FaultConfig {
        latency: Some(LatencyDist::Fixed(Duration::from_millis(300))),
        error: Some(sim::ErrorFault {
            rate: 1.0,
            code: 2,
            commands: Vec::new(),
        }),
        ..Default::default()
    });
    let before = running
        .metrics
        .latency_window("sb", "transaction")
        .unwrap()
        .total_count;
    let errors = ops(&page(&running), "error");
    crate::common::wait_for("failed transactions", Duration::from_secs(30), || async {
        (ops(&page(&running), "error") >= errors + 30.0).then_some(())
    })
    .await;
    running.stop();
    // The operations recorded since the fault: each took about the 400 ms
    // deadline, none the 600 ms of a statement and a whole abort.
    let failed = running.metrics.latency_window("sb", "transaction").unwrap();
    eprintln!(
        "{} failed transactions: p50 {:?}, max {:?}",
        failed.total_count - before,
        failed.p50,
        failed.max
    );
    // (The window holds the few fast transactions before the fault too:
    // the failed ones are most of it.)
    assert!(failed.total_count - before >= 30);
    assert!(
        failed.p50 >= Duration::from_millis(380) && failed.p50 < Duration::from_millis(530),
        "p50 {:?}: the abort ran past the operation's deadline",
        failed.p50
    );
    tokio::time::timeout(Duration::from_secs(30), running.wait())
        .await
        .expect("the run ends");
    drop(sim);
}
