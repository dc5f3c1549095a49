//! The capture round trip, all real parts: a known mix (YCSB B and a
//! `custom` plan with a range query, a sort/limit, an `$inc` update, an
//! aggregation and inserts) runs through the daemon against the simulator
//! with the profiler at level 2 and the slow-query log at slowms 0;
//! `mongoload capture` reads the profiler (`--profile`) and the log
//! (`--log`, with `--uri` to sample the collections); both configs pass
//! `check-config` and each runs against a fresh simulator, profiled the
//! same way. Checked: each shape's share of each replay within 2 points of
//! the original's, the inserted documents' mean size within 10 % (the
//! profiler's capture: the log records no inserted document), the
//! replayed collection's numeric fields over the original's range within
//! 10 % of it (the `$inc` of `total` by 1 is no evidence of `total`'s
//! range), each workload's rate within 5 % of the original's × `--scale`,
//! and no string value of the original documents in either generated
//! file. A log captured with no deployment to sample says so in its file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongoload::capture::{profile, Capture};
use mongoload::config::{self, SecretUri, StageConfig};
use mongoload::daemon;
use mongoload::sim::{ProfileConfig, SimConfig, SimHandle};

use crate::common;

const DB: &str = "shop";
/// The rate of each workload of the original run: low enough that a debug
/// build holds it beside the suite's other tests on two cores (at 250/s it
/// missed a third of its operations there).
const RATE: f64 = 150.0;
/// How long each run lasts, and the window recorded within it (both
/// workloads run throughout the window): 1,200 operations of each, as
/// many as 5 s at 250/s gave.
const RUN: &str = "12s";
const WINDOW: Duration = Duration::from_secs(8);
/// The replay records about twice as long: its shares are compared with
/// the original's within 2 points, and its own sampling noise (about
/// 0.87 points for a 10 % shape over 8 s at 150/s) must stay well inside
/// that for every shape at once.
const REPLAY_RUN: &str = "19s";
const REPLAY_WINDOW: Duration = Duration::from_secs(15);
const SCALE: f64 = 2.0;

const ORIGINAL: &str = r#"
[target]
uri = "URI"
database = "shop"

[http]
listen = "127.0.0.1:0"

[[workloads]]
name = "ycsb"
kind = "ycsb"
seed = 7

[workloads.ycsb]
workload = "B"
record_count = 300

[[workloads.stages]]
name = "run"
rate = RATE
duration = "RUN"

[[workloads]]
name = "orders"
kind = "custom"
seed = 1

[workloads.custom]
collection = "orders"
initial_docs = 300
document = { customer = { "$gen" = "uniform", min = 1, max = 1000 }, status = { "$gen" = "choice", values = ["new", "paid", "shipped"] }, total = { "$gen" = "double", min = 1.0, max = 500.0 }, note = { "$gen" = "string", length = 60 } }

[[workloads.custom.indexes]]
keys = { customer = 1 }

[[workloads.custom.operations]]
op = "insert"
weight = 15

[[workloads.custom.operations]]
op = "find"
name = "range"
weight = 30
filter = { customer = { "$gte" = { "$gen" = "uniform", min = 1, max = 900 }, "$lt" = { "$gen" = "uniform", min = 900, max = 1000 } } }

[[workloads.custom.operations]]
op = "find"
name = "top"
weight = 25
filter = { status = { "$gen" = "choice", values = ["new", "paid"] } }
sort = { total = -1 }
limit = 5

[[workloads.custom.operations]]
op = "update"
name = "bump"
weight = 20
filter = { _id = { "$gen" = "latest" } }
update = { "$inc" = { total = 1.0 } }

[[workloads.custom.operations]]
op = "aggregate"
name = "revenue"
weight = 10
pipeline = [
  { "$match" = { customer = { "$gen" = "uniform", min = 1, max = 1000 } } },
  { "$group" = { _id = "$status", revenue = { "$sum" = "$total" } } },
]

[[workloads.stages]]
name = "run"
rate = RATE
duration = "RUN"
"#;

async fn profiled_sim(log: Option<&Path>) -> SimHandle {
    common::sim_with(SimConfig {
        profile: ProfileConfig {
            // Nothing is logged until the load is done (see `record`).
            slowms: 1_000_000,
            log: log.map(Path::to_path_buf),
            cap_bytes: 64 * 1024 * 1024,
            ..Default::default()
        },
        ..Default::default()
    })
    .await
}

/// Runs `cfg` against `sim`, turning the profiler (level 2) and the log
/// (slowms 0) on for `window` once every collection is loaded, so that
/// only the steady mix is recorded, as a capture window would be chosen.
///
/// The original run must keep its rate (the captured rate is checked
/// against it); a replay may miss operations on a busy machine (`strict`
/// false): the shares it is checked on do not depend on how many ran.
async fn record(
    sim: &SimHandle,
    cfg: config::Config,
    loaded: &[(&str, u64)],
    window: Duration,
    strict: bool,
) {
    let client = common::driver_client(&sim.uri(), false, Duration::from_secs(5)).await;
    let db = client.database(DB);
    let running = daemon::start(cfg).await.expect("daemon starts");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut ready = true;
        for (coll, n) in loaded {
            let c = db.collection::<Document>(coll);
            if c.estimated_document_count().await.unwrap() < *n {
                ready = false;
            }
        }
        if ready {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the load ends");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    db.run_command(doc! { "profile": 2, "slowms": 0 })
        .await
        .unwrap();
    tokio::time::sleep(window).await;
    db.run_command(doc! { "profile": 0, "slowms": 1_000_000 })
        .await
        .unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(60), running.wait())
        .await
        .expect("the run ends");
    for w in &summary.workloads {
        assert_eq!(w.errors, 0, "{w:?}");
        assert!(!strict || w.missed == 0, "the run kept its rate: {w:?}");
    }
}

/// The shapes `system.profile` of `sim` holds and their shares (of the
/// statements counted), read in-process with capture's own normalizer.
async fn shares(sim: &SimHandle) -> (BTreeMap<String, f64>, Capture) {
    let client = common::driver_client(&sim.uri(), false, Duration::from_secs(5)).await;
    let entries = profile::read(&client, DB, &profile::Window::default())
        .await
        .unwrap();
    let mut c = Capture::new("mongoload-capture");
    for e in &entries {
        if let Some(q) = profile::to_slow_query(e) {
            c.add(&q);
        }
    }
    let total: u64 = c.groups.iter().map(|g| g.count).sum();
    assert!(total > 0, "the profiler recorded the run");
    let mut out = BTreeMap::new();
    for g in &c.groups {
        *out.entry(id_untyped(&g.stmt.key())).or_default() += g.count as f64 / total as f64;
    }
    (out, c)
}

/// A shape key with its `_id` slots' type left out: a replay draws `_id`
/// values from its own documents (mongoload numbers them), so an original
/// `_id` of strings comes back as integers, the same shape.
fn id_untyped(key: &str) -> String {
    // The key is JSON: a slot's marker character is written escaped.
    let marker = "\"_id\":\"\\u0001";
    let mut out = String::new();
    let mut rest = key;
    while let Some(i) = rest.find(marker) {
        out.push_str(&rest[..i + marker.len()]);
        rest = &rest[i + marker.len()..];
        let end = rest.find('"').unwrap_or(rest.len());
        let slot = &rest[..end];
        out.push_str(slot.split(':').next().unwrap_or(slot));
        out.push_str(":id");
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Each numeric field's range over `docs`.
fn ranges(docs: &[Document]) -> BTreeMap<String, (f64, f64)> {
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for d in docs {
        for (k, v) in d {
            let x = match v {
                Bson::Int32(i) => f64::from(*i),
                Bson::Int64(i) => *i as f64,
                Bson::Double(x) => *x,
                _ => continue,
            };
            let r = out.entry(k.clone()).or_insert((x, x));
            *r = (r.0.min(x), r.1.max(x));
        }
    }
    out
}

fn mean_size(docs: &[Document]) -> f64 {
    let total: usize = docs
        .iter()
        .map(|d| mongodb::bson::to_vec(d).unwrap().len())
        .sum();
    total as f64 / docs.len() as f64
}

/// The documents of `coll` in `_id` order after the first `skip` (the
/// loaded ones: mongoload numbers its documents).
async fn all_docs(sim: &SimHandle, coll: &str, skip: u64) -> Vec<Document> {
    let client = common::driver_client(&sim.uri(), false, Duration::from_secs(5)).await;
    client
        .database(DB)
        .collection::<Document>(coll)
        .find(doc! {})
        .sort(doc! { "_id": 1 })
        .skip(skip)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

fn strings(b: &Bson, out: &mut BTreeSet<String>) {
    match b {
        Bson::String(s) if s.len() >= 6 => {
            out.insert(s.clone());
        }
        Bson::Document(d) => d.values().for_each(|v| strings(v, out)),
        Bson::Array(a) => a.iter().for_each(|v| strings(v, out)),
        _ => {}
    }
}

fn mongoload(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(args)
        .env_remove("MONGOLOAD_URI")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The rate of a generated workload's one stage.
fn rate(w: &config::WorkloadConfig) -> f64 {
    match &w.stages[0].rate {
        Some(config::LevelSpec::Hold(r)) => *r,
        other => panic!("a captured stage holds one rate: {other:?}"),
    }
}

/// The rate of each generated workload.
fn rates(cfg: &config::Config) -> BTreeMap<String, f64> {
    cfg.workloads
        .iter()
        .map(|w| (w.name.clone(), rate(w)))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_captured_mix_replays_in_its_proportions_sizes_and_rate() {
    // The original run must keep its rate: not beside other daemons.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mongod.log");
    let sim = profiled_sim(Some(&log)).await;
    let original = ORIGINAL
        .replace("URI", &format!("{}?appName=original", sim.uri()))
        .replace("RATE", &RATE.to_string())
        .replace("RUN", RUN);
    let cfg = config::parse_with_env(&original, Path::new("original.toml"), std::iter::empty())
        .unwrap_or_else(|e| panic!("{e}"));
    record(
        &sim,
        cfg,
        &[("usertable", 300), ("orders", 300)],
        WINDOW,
        true,
    )
    .await;
    let (want, _) = shares(&sim).await;
    let original_orders = all_docs(&sim, "orders", 300).await;
    let original_ranges = ranges(&all_docs(&sim, "orders", 0).await);
    let mut literals = BTreeSet::new();
    for coll in ["orders", "usertable"] {
        for d in all_docs(&sim, coll, 0).await {
            strings(&Bson::Document(d), &mut literals);
        }
    }
    assert!(literals.len() > 300, "{}", literals.len());

    // Capture from the profiler and from the log.
    let from_profile = dir.path().join("profile.toml");
    let (ok, _, err) = mongoload(&[
        "capture",
        "--profile",
        DB,
        "--uri",
        &sim.uri(),
        "--scale",
        &SCALE.to_string(),
        "--out",
        from_profile.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    let profile_summary = err;
    let from_log = dir.path().join("log.toml");
    let (ok, _, err) = mongoload(&[
        "capture",
        "--log",
        log.to_str().unwrap(),
        "--uri",
        &sim.uri(),
        "--scale",
        &SCALE.to_string(),
        "--out",
        from_log.to_str().unwrap(),
    ]);
    assert!(ok, "{err}");
    // With no deployment, the template comes from the operations, and the
    // file says so.
    let (ok, offline, e) = mongoload(&["capture", "--log", log.to_str().unwrap()]);
    assert!(ok, "{e}");
    assert!(
        offline.contains("# The document holds the fields the operations filter and set")
            && offline.contains("No document was sampled: no --uri or --config was given"),
        "{offline}"
    );
    let summaries = [profile_summary, err];
    let mut captured = Vec::new();
    for (file, summary) in [&from_profile, &from_log].into_iter().zip(&summaries) {
        let text = std::fs::read_to_string(file).unwrap();
        let (ok, _, err) = mongoload(&["check-config", "--config", file.to_str().unwrap()]);
        assert!(ok, "{err}\n{text}");
        for l in &literals {
            assert!(!text.contains(l.as_str()), "{l:?} copied into\n{text}");
        }
        let cfg = config::parse_with_env(&text, file, std::iter::empty()).unwrap();
        // The rate: each collection's workload at its observed rate × scale.
        for (name, rate) in rates(&cfg) {
            let want = RATE * SCALE;
            assert!(
                (rate - want).abs() <= 0.05 * want,
                "{}: {name} at {rate}/s, want {want} ± 5 %\n{summary}\n{text}",
                file.display()
            );
        }
        captured.push((text, cfg));
    }

    // Replay each capture against a fresh simulator, profiled the same way.
    for (source, (text, cfg)) in ["profiler", "log"].into_iter().zip(captured) {
        let replay_sim = replay(cfg, &text).await;
        let (got, _) = shares(&replay_sim).await;
        let keys: BTreeSet<&String> = want.keys().chain(got.keys()).collect();
        let mut report = String::new();
        for k in &keys {
            let (w, g) = (
                want.get(*k).copied().unwrap_or(0.0),
                got.get(*k).copied().unwrap_or(0.0),
            );
            report.push_str(&format!("{:6.2} {:6.2}  {k}\n", w * 100.0, g * 100.0));
        }
        for k in &keys {
            let (w, g) = (
                want.get(*k).copied().unwrap_or(0.0),
                got.get(*k).copied().unwrap_or(0.0),
            );
            assert!(
                (w - g).abs() <= 0.02,
                "{source}: shape share off by more than 2 points (original, replay):\n{report}\n{text}"
            );
        }
        // The documents' fields: the replayed collection's values over
        // the original's range. The log's capture samples the collection
        // too (--uri); before, its `total` drew like the `$inc` operand.
        let replayed_ranges = ranges(&all_docs(&replay_sim, "orders", 0).await);
        for field in ["customer", "total"] {
            let ((lo, hi), (rlo, rhi)) = (original_ranges[field], replayed_ranges[field]);
            let span = hi - lo;
            assert!(
                (rlo - lo).abs() <= 0.10 * span && (rhi - hi).abs() <= 0.10 * span,
                "{source}: {field} over [{rlo}, {rhi}], the original's [{lo}, {hi}]\n{text}"
            );
        }
        // Inserted documents: the replay's inserts against the original's.
        // Only the profiler's capture knows them (drawn from the
        // collection); the log records inserts without documents.
        if source == "profiler" {
            let replayed = all_docs(&replay_sim, "orders", 300).await;
            assert!(replayed.len() > 100, "{}", replayed.len());
            let (a, b) = (mean_size(&original_orders), mean_size(&replayed));
            assert!(
                (a - b).abs() <= 0.10 * a,
                "inserted documents: {b:.0} bytes on average, the original's {a:.0}\n{text}"
            );
        }
    }
}

/// Runs a captured config against a fresh simulator, recorded as the
/// original was.
async fn replay(mut cfg: config::Config, text: &str) -> SimHandle {
    let replay_sim = profiled_sim(None).await;
    cfg.target.uri = Some(SecretUri::new(format!(
        "{}?appName=replay",
        replay_sim.uri()
    )));
    cfg.http.listen = "127.0.0.1:0".parse().unwrap();
    let mut loaded = Vec::new();
    for w in &mut cfg.workloads {
        let config::KindConfig::Custom(c) = &mut w.kind else {
            panic!("{text}")
        };
        c.initial_docs = 300;
        loaded.push(c.collection.clone());
        // The file's rate was checked above; the replay runs at the
        // original's (rate / scale) so a loaded test machine keeps it.
        let rate = rate(w) / SCALE;
        w.stages = vec![serde_json::from_value::<StageConfig>(serde_json::json!({
            "name": "replay", "rate": rate, "duration": REPLAY_RUN
        }))
        .unwrap()];
    }
    let loaded: Vec<(&str, u64)> = loaded.iter().map(|c| (c.as_str(), 300)).collect();
    record(&replay_sim, cfg, &loaded, REPLAY_WINDOW, false).await;
    replay_sim
}
