//! Three members of a `[cluster]`, each a separate `mongoload run`
//! process, against one simulator through the real driver: together they
//! run the configured load (rates and workers split), insert disjoint
//! keys, prepare the data once (and finish it when the preparing member
//! is killed), switch stages together, let a restarted member rejoin the
//! current stage, and take `ctl --all` as cluster totals.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::{sample, wait_for, ChildGuard};
use mongodb::bson::doc;
use mongoload::report::{self, StageReport};

/// One member's files and process.
struct Member {
    index: u32,
    http: SocketAddr,
    config: PathBuf,
    log: PathBuf,
    stderr: PathBuf,
    socket: PathBuf,
    child: Option<ChildGuard>,
}

/// The shared part of the members' configs: `workload` is the
/// `[[workloads]]` table with its stages. `connect_timeout` is also the
/// driver's timeout for a monitor's check, whose failure clears the pool
/// and fails what is in flight. At 2 s, with eight tests at once beside
/// the lints and the image build, a member once counted one network error
/// in a run of over 10,000 operations, the mark of such a check (the
/// simulator answers from this busy test process). No member here waits
/// on a dead server.
fn config(uri: &str, lease: &str, workload: &str, m: &Member, size: u32) -> String {
    format!(
        r#"[target]
uri = "{uri}"
database = "mlcluster"
connect_timeout = "10s"
server_selection_timeout = "2s"
operation_timeout = "5s"

[http]
listen = "{http}"

[run]
shutdown_grace = "3s"
log = "{log}"

[control]
socket = "{socket}"

[cluster]
size = {size}
index = {index}
lease = "{lease}"

{workload}
"#,
        http = m.http,
        log = m.log.display(),
        socket = m.socket.display(),
        index = m.index,
    )
}

fn members(dir: &Path, uri: &str, lease: &str, workload: &str) -> Vec<Member> {
    members_of(3, dir, uri, lease, workload)
}

/// `size` members sharing `workload`.
fn members_of(size: u32, dir: &Path, uri: &str, lease: &str, workload: &str) -> Vec<Member> {
    (0..size)
        .map(|index| {
            let m = Member {
                index,
                http: crate::common::free_port(),
                config: dir.join(format!("m{index}.toml")),
                log: dir.join(format!("runs{index}.jsonl")),
                stderr: dir.join(format!("stderr{index}")),
                socket: dir.join(format!("ctl{index}.sock")),
                child: None,
            };
            std::fs::write(&m.config, config(uri, lease, workload, &m, size)).unwrap();
            m
        })
        .collect()
}

impl Member {
    /// Starts (or restarts) the member's process; its stderr is appended.
    fn start(&mut self) {
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.stderr)
            .unwrap();
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
            .args(["run", "--config"])
            .arg(&self.config)
            .env_remove("JOURNAL_STREAM")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("MONGOLOAD_CONFIG")
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn mongoload run");
        self.child = Some(ChildGuard::new(child));
    }

    /// SIGKILL: a member dying without a word.
    fn kill(&mut self) {
        drop(self.child.take());
    }

    /// Waits (bounded) for the process to exit by itself; its status.
    async fn exited(&mut self, timeout: Duration) -> std::process::ExitStatus {
        let mut c = self.child.as_mut().expect("running").take();
        self.child = None;
        wait_for("a member to finish its schedule", timeout, || {
            let s = c.try_wait().expect("try_wait");
            async move { s }
        })
        .await
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    fn reports(&self) -> Vec<StageReport> {
        report::read(&self.log).unwrap_or_default()
    }
}

/// The reports of `stage` of every member, in member order.
fn stage_reports(members: &[Member], stage: &str) -> Vec<StageReport> {
    members
        .iter()
        .map(|m| {
            let mut r: Vec<StageReport> = m
                .reports()
                .into_iter()
                .filter(|r| r.stage == stage && !r.partial)
                .collect();
            assert_eq!(r.len(), 1, "member {}: one report of {stage}", m.index);
            r.remove(0)
        })
        .collect()
}

/// The spread of the members' starts of `stage`, from their own run logs.
fn start_spread(reports: &[StageReport]) -> Duration {
    let starts: Vec<i64> = reports
        .iter()
        .map(|r| {
            chrono::DateTime::parse_from_rfc3339(&r.start)
                .unwrap()
                .timestamp_millis()
        })
        .collect();
    let spread = starts.iter().max().unwrap() - starts.iter().min().unwrap();
    Duration::from_millis(spread as u64)
}

async fn count(uri: &str, collection: &str) -> u64 {
    let client = crate::common::driver_client(uri, true, Duration::from_secs(5)).await;
    client
        .database("mlcluster")
        .collection::<mongodb::bson::Document>(collection)
        .count_documents(doc! {})
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_run_one_load_with_disjoint_keys_in_step() {
    let sim = crate::common::sim().await;
    let dir = tempfile::tempdir().unwrap();
    let workload = r#"[[workloads]]
name = "mix"
kind = "mixed"
seed = 3
max_inflight = 64
[workloads.mixed]
insert = 50
find = 40
update = 10
delete = 0
doc_size = 512
initial_docs = 2000
load_batch = 200
# Unbounded, so that every insert leaves its document: the default bound
# (ten times initial_docs) is within reach of a fast closed-loop stage.
max_docs = 0
collection = "m"
[[workloads.stages]]
name = "warm"
rate = 300
duration = "4s"
[[workloads.stages]]
name = "hold"
rate = 900
duration = "10s"
[[workloads.stages]]
name = "closed"
concurrency = 7
duration = "3s"
[[workloads.stages]]
name = "count"
rate = 600
operations = 1000
duration = "1m"
[[workloads.stages]]
name = "after"
rate = 300
duration = "2s"

[[workloads]]
name = "bounded"
kind = "name-num"
seed = 4
[workloads.name_num]
mode = "insert"
initial_docs = 0
max_docs = 300
collection = "bounded"
[[workloads.stages]]
rate = 150
duration = "8s"
"#;
    let mut ms = members(dir.path(), &sim.uri(), "5s", workload);
    for m in &mut ms {
        m.start();
    }
    // During "hold" each member exports its share, and the cluster's own
    // families say who it is.
    let mut shares = Vec::new();
    for m in &ms {
        let page =
            crate::common::wait_metric(m.http, "the hold stage", Duration::from_secs(60), |p| {
                sample(p, "mongoload_phase_info", &[("stage", "hold")]) == Some(1.0)
            })
            .await;
        shares.push(sample(&page, "mongoload_target_rate", &[("workload", "mix")]).unwrap());
        assert_eq!(sample(&page, "mongoload_cluster_size", &[]), Some(3.0));
        assert_eq!(
            sample(&page, "mongoload_cluster_member_index", &[]),
            Some(f64::from(m.index))
        );
        assert_eq!(
            sample(
                &page,
                "mongoload_cluster_stage_index",
                &[("workload", "mix")]
            ),
            Some(1.0)
        );
    }
    assert!(
        (shares.iter().sum::<f64>() - 900.0).abs() < 1e-6,
        "{shares:?}"
    );
    for m in &mut ms {
        let status = m.exited(Duration::from_secs(60)).await;
        assert!(
            status.success(),
            "member {}: {status}\n{}",
            m.index,
            m.stderr()
        );
    }

    // Prepared once: one member held each workload's lease, the others waited.
    for workload in ["mix", "bounded"] {
        let preparers: Vec<u32> = ms
            .iter()
            .filter(|m| {
                m.stderr().lines().any(|l| {
                    l.contains("holds the lease and prepares")
                        && l.contains(&format!("workload={workload}"))
                })
            })
            .map(|m| m.index)
            .collect();
        assert_eq!(preparers.len(), 1, "{workload}: {preparers:?}");
    }

    // The sum of the achieved rates is the configured rate.
    let hold = stage_reports(&ms, "hold");
    let achieved: f64 = hold.iter().map(|r| r.ops_per_sec).sum();
    assert!(
        (achieved - 900.0).abs() <= 9.0,
        "achieved {achieved} ops/s in all, configured 900"
    );
    let merged = report::merge::merge_members(hold.clone());
    assert_eq!(merged.len(), 1);
    assert!((merged[0].ops_per_sec - achieved).abs() < 1e-9);
    assert_eq!(
        merged[0].operations.ok,
        hold.iter().map(|r| r.operations.ok).sum::<u64>()
    );
    // Closed loop: 7 workers as 3 + 2 + 2.
    let closed = stage_reports(&ms, "closed");
    assert!(closed.iter().all(|r| r.operations.ok > 0));

    // A count in all is split (334 + 333 + 333) and ends for all three
    // together, long before its cap, the next stage moving up.
    let counted = stage_reports(&ms, "count");
    let ops: Vec<u64> = counted.iter().map(|r| r.operations.ok).collect();
    assert_eq!(ops, vec![334, 333, 333]);
    assert!(
        counted.iter().all(|r| r.duration_seconds < 10.0),
        "{counted:?}"
    );

    // Stage switches of the three, from their own run logs.
    for stage in ["warm", "hold", "closed", "count", "after"] {
        let spread = start_spread(&stage_reports(&ms, stage));
        assert!(spread <= Duration::from_millis(100), "{stage}: {spread:?}");
    }

    // No duplicate keys, no errors at all; every insert made one document.
    let mut inserted = 0;
    for m in &ms {
        for r in m.reports() {
            assert_eq!(r.errors["duplicate_key"], 0, "{r:?}");
            assert_eq!(r.errors_total(), 0, "member {}: {:?}", m.index, r.errors);
            assert_eq!(r.member.as_ref().map(|x| x.index), Some(m.index));
            if r.workload == "mix" {
                inserted += r
                    .ops
                    .iter()
                    .find(|o| o.op == "insert")
                    .map_or(0, |o| o.operations.ok);
            }
        }
        assert!(!m.stderr().contains("duplicate key"), "{}", m.stderr());
    }
    assert!(inserted > 1000, "{inserted}");
    assert_eq!(count(&sim.uri(), "m").await, 2000 + inserted);
    // The bound holds together: each member evicted its own oldest keys.
    assert_eq!(count(&sim.uri(), "bounded").await, 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_preparer_is_replaced_and_a_restarted_member_rejoins_its_stage() {
    let sim = crate::common::sim().await;
    let dir = tempfile::tempdir().unwrap();
    // Reads only, so the document count stays what prepare loads.
    let workload = r#"[[workloads]]
name = "reads"
kind = "mixed"
seed = 5
max_inflight = 32
[workloads.mixed]
insert = 0
find = 1
update = 0
delete = 0
doc_size = 1024
initial_docs = 40000
load_batch = 100
collection = "r"
[[workloads.stages]]
name = "hold"
rate = 300
duration = "20s"
[[workloads.stages]]
name = "up"
rate = 600
duration = "8s"
"#;
    let mut ms = members(dir.path(), &sim.uri(), "2s", workload);
    // Member 0 alone takes the lease; killed a little into the load. Every
    // command 10 ms late from the start, so that the load (400 batches)
    // takes seconds and the wait below sees it partway however fast the
    // machine is. Without it the wait ran out once (60 s) on an otherwise
    // idle machine: most likely the load went from under 5 % to over 60 %
    // between two looks.
    sim.faults()
        .set_latency(Some(mongoload::sim::LatencyDist::Fixed(
            Duration::from_millis(10),
        )));
    ms[0].start();
    crate::common::wait_metric(ms[0].http, "a partial load", Duration::from_secs(60), |p| {
        sample(
            p,
            "mongoload_prepare_progress_ratio",
            &[("workload", "reads")],
        )
        .is_some_and(|r| r > 0.05 && r < 0.6)
    })
    .await;
    // Slow every command down so the holder cannot finish before the
    // others have started and seen it (how fast it loads is the machine's).
    sim.faults()
        .set_latency(Some(mongoload::sim::LatencyDist::Fixed(
            Duration::from_millis(50),
        )));
    ms[1].start();
    ms[2].start();
    // The waiting members show the holder's progress as their own.
    for m in &ms[1..] {
        crate::common::wait_metric(
            m.http,
            "the holder's progress",
            Duration::from_secs(30),
            |p| {
                sample(
                    p,
                    "mongoload_prepare_progress_ratio",
                    &[("workload", "reads")],
                )
                .is_some_and(|r| r > 0.0 && r < 1.0)
            },
        )
        .await;
    }
    ms[0].kill();
    sim.faults().set_latency(None);
    let before = count(&sim.uri(), "r").await;
    assert!(before < 40000, "{before}");

    // Another member takes the lease over once it expires and finishes.
    let page =
        crate::common::wait_metric(ms[1].http, "the hold stage", Duration::from_secs(90), |p| {
            sample(p, "mongoload_phase_info", &[("stage", "hold")]) == Some(1.0)
        })
        .await;
    assert_eq!(
        sample(&page, "mongoload_target_rate", &[("workload", "reads")]),
        Some(100.0)
    );
    assert_eq!(count(&sim.uri(), "r").await, 40000, "loaded exactly once");
    let takers: Vec<u32> = ms[1..]
        .iter()
        .filter(|m| m.stderr().contains("holds the lease and prepares"))
        .map(|m| m.index)
        .collect();
    assert_eq!(takers.len(), 1, "{takers:?}");

    // Member 0 restarts mid-stage: it joins the epoch where it is now.
    ms[0].start();
    let page = crate::common::wait_metric(
        ms[0].http,
        "the rejoined member's stage",
        Duration::from_secs(30),
        |p| sample(p, "mongoload_phase_info", &[("stage", "hold")]) == Some(1.0),
    )
    .await;
    assert_eq!(
        sample(&page, "mongoload_target_rate", &[("workload", "reads")]),
        Some(100.0)
    );
    assert!(
        ms[0].stderr().contains("joined the run epoch"),
        "{}",
        ms[0].stderr()
    );

    // A cluster-wide override through one member reaches all three, each
    // at its share.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["ctl", "--all", "--socket"])
        .arg(&ms[2].socket)
        .args(["set-rate", "reads", "1500"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for m in &ms {
        crate::common::wait_metric(
            m.http,
            "the cluster-wide override",
            Duration::from_secs(10),
            |p| sample(p, "mongoload_target_rate", &[("workload", "reads")]) == Some(500.0),
        )
        .await;
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["ctl", "--all", "--socket"])
        .arg(&ms[0].socket)
        .args(["reset", "reads"])
        .output()
        .unwrap();
    assert!(out.status.success());

    for m in &mut ms {
        let status = m.exited(Duration::from_secs(60)).await;
        assert!(status.success(), "member {}: {status}", m.index);
    }
    // The three switch to "up" together, the restarted one included.
    let up = stage_reports(&ms, "up");
    let spread = start_spread(&up);
    assert!(spread <= Duration::from_millis(100), "{spread:?}");
    let achieved: f64 = up.iter().map(|r| r.ops_per_sec).sum();
    assert!((achieved - 600.0).abs() <= 6.0, "{achieved}");
    assert_eq!(count(&sim.uri(), "r").await, 40000);
}

#[test]
fn an_index_neither_set_nor_in_the_hostname_is_a_config_error() {
    let file = crate::common::write_config(
        "[target]\nuri = \"mongodb://127.0.0.1:1\"\n[cluster]\nsize = 3\n\
         [[workloads]]\nname = \"w\"\nkind = \"mixed\"\n[[workloads.stages]]\nrate = 1\nduration = \"1s\"\n",
    );
    let run = |host: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
            .args(["check-config", "--config"])
            .arg(&file.path)
            .env("HOSTNAME", host)
            .output()
            .unwrap()
    };
    let out = run("loadhost");
    assert_eq!(out.status.code(), Some(78));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cluster.index"), "{err}");
    assert!(err.contains("\"loadhost\" has no trailing -<n>"), "{err}");
    let out = run("mongoload-7");
    assert_eq!(out.status.code(), Some(78));
    assert!(String::from_utf8_lossy(&out.stderr).contains("out of range for cluster.size = 3"));
    // A StatefulSet pod's ordinal.
    let out = run("mongoload-2");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan = String::from_utf8_lossy(&out.stdout);
    assert!(
        plan.contains("member: 2 of 3 (from the hostname mongoload-2)"),
        "{plan}"
    );
}

/// Two members search the capacity of a simulator that serves 300 ops/s
/// in all: every probe is of the cluster's total rate, each member runs
/// half of it from the same instant, and both take the same steps to the
/// same capacity, judged once from both halves together. Then member 1 is
/// killed during a second search: its part of the probe never comes, so
/// member 0 leaves the probe unjudged and ends the search without a
/// result instead of judging half a load.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_members_search_their_total_rate_together() {
    let sim = crate::common::sim_with_capacity(300.0).await;
    let dir = tempfile::tempdir().unwrap();
    let search = r#"search = { from = 50, to = 2000, precision = "10%", probe = "4s", settle = "1s", min_operations = 100 }"#;
    let workload = format!(
        r#"[[workloads]]
name = "s"
kind = "mixed"
seed = 6
max_inflight = 128
[workloads.mixed]
doc_size = 256
initial_docs = 500
collection = "s"
[[workloads.stages]]
name = "capacity"
{search}
[[workloads.stages]]
name = "gap"
rate = 50
duration = "2s"
[[workloads.stages]]
name = "again"
{search}
[[workloads.thresholds]]
check = "p99 < 100ms"
"#
    );
    let mut ms = members_of(2, dir.path(), &sim.uri(), "5s", &workload);
    for m in &mut ms {
        m.start();
    }
    // Member 1 dies once the second search is under way.
    crate::common::wait_metric(
        ms[1].http,
        "the second search",
        Duration::from_secs(150),
        |p| {
            sample(p, "mongoload_phase_info", &[("stage", "again")]) == Some(1.0)
                && sample(p, "mongoload_capacity_probe_rate", &[("workload", "s")])
                    .is_some_and(|r| r > 0.0)
        },
    )
    .await;
    // Both export the first search's result: the cluster's, the same.
    let mut exported = Vec::new();
    for m in &ms {
        let page = crate::common::must_get(m.http, "/metrics").await.body;
        exported.push(sample(
            &page,
            "mongoload_capacity_ops_per_second",
            &[("workload", "s")],
        ));
    }
    ms[1].kill();
    let status = ms[0].exited(Duration::from_secs(120)).await;
    assert!(status.success(), "member 0: {status}\n{}", ms[0].stderr());

    let probes = |m: &Member, stage: &str| -> Vec<StageReport> {
        m.reports()
            .into_iter()
            .filter(|r| r.stage == stage && r.probe.is_some())
            .collect()
    };
    let (first, second) = (probes(&ms[0], "capacity"), probes(&ms[1], "capacity"));
    let steps = |rs: &[StageReport]| -> Vec<(u32, f64, String)> {
        rs.iter()
            .map(|r| r.probe.as_ref().unwrap())
            .map(|p| (p.number, p.rate, p.verdict.clone()))
            .collect()
    };
    // The same steps, and the same result, on both.
    assert_eq!(steps(&first), steps(&second));
    let result = first.last().and_then(|r| r.probe.as_ref()?.result.clone());
    assert_eq!(
        result,
        second.last().and_then(|r| r.probe.as_ref()?.result.clone())
    );
    let result = result.expect("the last probe carries the result");
    assert_eq!(exported, vec![Some(result.capacity); 2]);
    assert_eq!(result.end, "converged", "{:?}", steps(&first));
    // The rates are the cluster's: the ramp doubles from 50 in all.
    let all = steps(&first);
    assert_eq!((all[0].1, all[1].1), (50.0, 100.0), "{all:?}");
    // Never 5 % over the capacity; how low a busy machine reads it is the
    // bench's (BENCHMARKS.md, "Capacity search accuracy").
    assert!(result.capacity > 0.0 && result.capacity <= 315.0, "{all:?}");
    // Each probe starts at one instant on both, so `report` makes one row
    // of each; the first (50 ops/s, 4 s judged) ran 200 operations, half
    // on each member.
    for (a, b) in first.iter().zip(&second) {
        assert_eq!(a.start, b.start, "probe {:?}", a.probe);
    }
    let rows = report::merge::merge_members(first.iter().chain(&second).cloned().collect());
    assert_eq!(rows.len(), first.len());
    let done = |r: &StageReport| r.operations.ok + r.operations.error;
    assert!(
        (190..=210).contains(&done(&rows[0])),
        "{:?}",
        rows[0].operations
    );
    for r in [&first[0], &second[0]] {
        assert!((95..=105).contains(&done(r)), "{:?}", r.operations);
    }

    // The second search lost member 1: its probe was not judged.
    let again = probes(&ms[0], "again");
    let last = again.last().and_then(|r| r.probe.clone()).expect("a probe");
    assert_eq!(last.verdict, "unjudged", "{again:?}");
    assert_eq!(last.result.map(|r| r.end).as_deref(), Some("interrupted"));
    assert!(
        ms[0]
            .stderr()
            .contains("not judged: no report from member 1 in time"),
        "{}",
        ms[0].stderr()
    );
}
