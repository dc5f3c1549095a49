//! The acknowledged-write audit end to end, against the simulator's
//! replica set with rollback of unreplicated `w: 1` writes turned on:
//! with `w: "majority"` and three failovers nothing is missing and the
//! documents the workloads delete on purpose (mixed deletes, a `max_docs`
//! bound) are never reported; with `w: 1`, exactly the writes a step-down
//! rolled back are reported missing, count and ids, in the metrics and the
//! stage report; `ctl audit` runs a pass on request.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use crate::common::{sample, sum};
use mongoload::control::{client, Command};
use mongoload::sim::{self, ReplSetConfig, SimConfig, SimHandle, WriteKind};

async fn replset(rollback: usize) -> SimHandle {
    let mut set = ReplSetConfig::new("rs0", 3);
    set.election = sim::ElectionTime::fixed(Duration::from_secs(1));
    set.rollback_writes = rollback;
    sim::start_replset(SimConfig::default(), set)
        .await
        .expect("the replica set starts")
}

fn target(uri: &str, log: &Path, extra: &str) -> String {
    format!(
        r#"[target]
uri = "{uri}"
database = "audit"
connect_timeout = "2s"
server_selection_timeout = "10s"
operation_timeout = "15s"
{extra}
[http]
listen = "127.0.0.1:0"
[run]
shutdown_grace = "10s"
log = "{log}"
"#,
        log = log.display()
    )
}

fn page(running: &mongoload::daemon::Running) -> String {
    running.metrics.encode().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn majority_writes_survive_three_failovers_and_deletes_are_never_missing() {
    let sim = replset(50).await;
    let set = sim.replset().unwrap().clone();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let socket = dir.path().join("control.sock");
    let text = format!(
        r#"{target}
[control]
socket = "{socket}"

[[workloads]]
name = "mix"
kind = "mixed"
max_inflight = 64
seed = 5
audit = true
audit_rate = 2000
[workloads.mixed]
insert = 40
update = 10
delete = 20
find = 30
doc_size = 256
initial_docs = 100
collection = "mix"
[[workloads.stages]]
name = "drills"
rate = 100
duration = "18s"

[[workloads]]
name = "bounded"
kind = "name-num"
max_inflight = 64
seed = 6
audit = true
[workloads.name_num]
mode = "insert"
initial_docs = 50
max_docs = 150
collection = "bounded"
[[workloads.stages]]
name = "drills"
rate = 100
duration = "18s"
"#,
        target = target(&sim.uri(), &log, "write_concern = \"majority\""),
        socket = socket.display()
    );
    let (_file, running) = crate::common::start_daemon(&text).await;
    let metrics = running.metrics.clone();
    for (i, at) in [4u64, 8, 12].into_iter().enumerate() {
        crate::common::wait_for("the next drill", Duration::from_secs(40), || async {
            let p = page(&running);
            let ops = sum(&p, "mongoload_operations_total", &[("outcome", "ok")]);
            let changes = sample(&p, "mongoload_primary_changes_total", &[]);
            (ops >= (at * 150) as f64 && changes >= Some(i as f64)).then_some(())
        })
        .await;
        set.step_down().expect("a primary to step down");
    }
    // A pass on request, while the load runs.
    let reply = client::request(&socket, &Command::Audit("mix".into()))
        .await
        .unwrap();
    assert_eq!(reply["ok"], true, "{reply}");
    assert!(reply["audit"]["acknowledged"].as_u64().is_some(), "{reply}");
    let refused = client::request(&socket, &Command::Audit("nope".into()))
        .await
        .unwrap();
    assert_eq!(refused["ok"], false);
    tokio::time::timeout(Duration::from_secs(90), running.wait())
        .await
        .expect("the run ends");

    let failovers = set.failovers();
    assert_eq!(failovers.len(), 3);
    assert!(
        failovers.iter().all(|f| f.rolled_back.is_empty()),
        "w: majority writes are never rolled back: {failovers:?}"
    );
    let p = metrics.encode().unwrap();
    for w in ["mix", "bounded"] {
        let get = |name: &str, extra: &[(&str, &str)]| {
            let mut labels = vec![("workload", w)];
            labels.extend_from_slice(extra);
            sum(&p, name, &labels)
        };
        let acknowledged = get("mongoload_audit_acknowledged_total", &[]);
        let forgotten = get("mongoload_audit_forgotten_total", &[]);
        eprintln!(
            "{w}: {acknowledged} acknowledged, {forgotten} deleted on purpose, {} checks, {} failover passes",
            get("mongoload_audit_checked_total", &[]),
            get("mongoload_audit_passes_total", &[("trigger", "failover")])
        );
        assert_eq!(get("mongoload_audit_missing_total", &[]), 0.0, "{w}");
        assert!(acknowledged > 100.0, "{w}: {acknowledged}");
        assert!(forgotten > 10.0, "{w}: deletes on purpose: {forgotten}");
        assert!(get("mongoload_audit_checked_total", &[]) >= acknowledged - forgotten);
        assert!(get("mongoload_audit_passes_total", &[("trigger", "failover")]) >= 3.0);
        assert!(get("mongoload_audit_passes_total", &[("trigger", "stage_end")]) >= 1.0);
        // The sum rule of docs/metrics.md.
        assert_eq!(
            acknowledged - forgotten,
            get("mongoload_audit_ledger_ids", &[("state", "present")])
                + get("mongoload_audit_ledger_ids", &[("state", "missing")]),
            "{w}"
        );
    }
    assert!(
        sum(
            &p,
            "mongoload_audit_passes_total",
            &[("workload", "mix"), ("trigger", "ctl")]
        ) >= 1.0
    );
    let reports = crate::common::read_run_log(&log);
    assert_eq!(reports.len(), 2);
    for r in &reports {
        let a = r.audit.as_ref().expect("an audited workload's report");
        assert_eq!((a.missing, a.missing_total), (0, 0), "{}", r.workload);
        assert!(a.complete && a.acknowledged > 0 && a.checked > 0, "{a:?}");
        assert_eq!(r.failovers.len(), 3, "{}", r.workload);
    }
    drop(sim);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_the_rolled_back_w1_writes_are_reported_missing() {
    let sim = replset(50).await;
    let set = sim.replset().unwrap().clone();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    // Inserts at w: 1, then a quiet stage (one insert at its start) in
    // which the primary steps down with no write in flight, so every
    // rolled-back write was acknowledged.
    let text = format!(
        r#"{target}
[[workloads]]
name = "ins"
kind = "mixed"
max_inflight = 64
seed = 9
audit = true
audit_rate = 0
[workloads.mixed]
insert = 1
update = 0
delete = 0
find = 0
doc_size = 256
initial_docs = 20
collection = "ins"
[[workloads.stages]]
name = "load"
rate = 100
duration = "4s"
[[workloads.stages]]
name = "quiet"
rate = 0.1
duration = "6s"
[[workloads.stages]]
name = "after"
rate = 20
duration = "3s"
"#,
        target = target(&sim.uri(), &log, "write_concern = 1"),
    );
    let (_file, running) = crate::common::start_daemon(&text).await;
    let metrics = running.metrics.clone();
    crate::common::wait_for("the quiet stage", Duration::from_secs(40), || async {
        (sample(
            &page(&running),
            "mongoload_phase_info",
            &[("workload", "ins"), ("stage", "quiet")],
        ) == Some(1.0))
        .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let down = set.step_down().expect("a primary to step down");
    let lost: BTreeSet<i64> = down
        .rolled_back
        .iter()
        .filter(|w| w.ns == "audit.ins" && w.kind == WriteKind::Insert)
        .map(|w| match &w.id {
            mongodb::bson::Bson::Int64(i) => *i,
            other => panic!("an integer _id: {other}"),
        })
        .collect();
    assert_eq!(lost.len(), 50, "{:?}", down.rolled_back);
    tokio::time::timeout(Duration::from_secs(60), running.wait())
        .await
        .expect("the run ends");

    let p = metrics.encode().unwrap();
    let w = [("workload", "ins")];
    assert_eq!(sum(&p, "mongoload_audit_missing_total", &w), 50.0);
    assert_eq!(
        sum(
            &p,
            "mongoload_audit_ledger_ids",
            &[("workload", "ins"), ("state", "missing")]
        ),
        50.0
    );
    let reports = crate::common::read_run_log(&log);
    let mut reported = BTreeSet::new();
    let mut count = 0;
    for r in &reports {
        let a = r.audit.as_ref().unwrap();
        count += a.missing;
        for id in a.missing_ids.get("ins").into_iter().flatten() {
            assert!(reported.insert(id.as_i64().unwrap()), "{id} reported twice");
        }
    }
    assert_eq!(count, 50);
    assert_eq!(reported, lost, "the ids reported are the ids rolled back");
    let quiet = reports.iter().find(|r| r.stage == "quiet").unwrap();
    assert_eq!(quiet.failovers.len(), 1);
    assert_eq!(
        quiet.audit.as_ref().unwrap().missing,
        50,
        "found by the pass after the failover, during the stage"
    );
    assert_eq!(
        reports
            .last()
            .unwrap()
            .audit
            .as_ref()
            .unwrap()
            .missing_total,
        50
    );
    drop(sim);
}
