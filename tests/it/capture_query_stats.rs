//! `mongoload capture --query-stats`, all real parts: a known mix of
//! finds, a distinct and an aggregation runs through the daemon against
//! the simulator; `capture --query-stats` reads the simulator's
//! `$queryStats` over the driver; the config passes `check-config` and
//! runs against a fresh simulator. Checked: each query shape's share of
//! the replay within 2 points of the original's (both read from the
//! simulators' `$queryStats` directly, by `key.queryShape`), the rate
//! within 5 % of the original's (as the simulator's profiler recorded it)
//! × `--scale`, no string value of the
//! original documents in the file, and the file saying that writes are
//! not seen. And the errors: a server without `$queryStats` (code 40324)
//! and a user without `queryStatsRead` (code 13), exit 1 naming the way
//! out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongoload::config::{self, SecretUri, StageConfig};
use mongoload::daemon;
use mongoload::sim::{AuthUser, ProfileConfig, SimConfig, SimHandle};

use crate::common;

const DB: &str = "shop";
/// The original's rate: low enough for a test machine shared with
/// builds to keep (the captured rate is checked against it).
const RATE: f64 = 150.0;
const SCALE: f64 = 2.0;
const RUN: &str = "10s";
/// The replay runs at the file's rate (RATE × SCALE) this long: about
/// 6 000 operations, so its own sampling noise (0.6 points for a 30 %
/// shape) stays well inside the 2 points for every shape at once.
const REPLAY_RUN: &str = "20s";

const ORIGINAL: &str = r#"
[target]
uri = "URI"
database = "shop"

[http]
listen = "127.0.0.1:0"

[[workloads]]
name = "orders"
kind = "custom"
seed = 3

[workloads.custom]
collection = "orders"
initial_docs = 300
document = { customer = { "$gen" = "uniform", min = 1, max = 1000 }, status = { "$gen" = "choice", values = ["new", "paid", "shipped"] }, total = { "$gen" = "double", min = 1.0, max = 500.0 }, note = { "$gen" = "string", length = 60 } }

[[workloads.custom.indexes]]
keys = { customer = 1 }

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
op = "distinct"
name = "statuses"
weight = 20
field = "status"
filter = { total = { "$gt" = { "$gen" = "double", min = 1.0, max = 400.0 } } }

[[workloads.custom.operations]]
op = "aggregate"
name = "revenue"
weight = 25
pipeline = [
  { "$match" = { customer = { "$gen" = "uniform", min = 1, max = 1000 } } },
  { "$group" = { _id = "$status", revenue = { "$sum" = "$total" } } },
]

[[workloads.stages]]
name = "run"
rate = RATE
duration = "RUN"
"#;

fn mongoload(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(args)
        .env_remove("MONGOLOAD_URI")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The share of each query shape among `app`'s executions, read from the
/// simulator's `$queryStats` with the driver.
async fn shares(sim: &SimHandle, app: &str) -> BTreeMap<String, f64> {
    let client = common::driver_client(&sim.uri(), false, Duration::from_secs(5)).await;
    let entries: Vec<Document> = client
        .database("admin")
        .aggregate([doc! { "$queryStats": {} }])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut counts: BTreeMap<String, i64> = BTreeMap::new();
    for e in &entries {
        let key = e.get_document("key").unwrap();
        let name = key
            .get_document("client")
            .and_then(|c| c.get_document("application"))
            .and_then(|a| a.get_str("name"));
        if name != Ok(app) {
            continue;
        }
        let shape = Bson::Document(key.get_document("queryShape").unwrap().clone())
            .into_relaxed_extjson()
            .to_string();
        *counts.entry(shape).or_default() += e
            .get_document("metrics")
            .unwrap()
            .get_i64("execCount")
            .unwrap();
    }
    let total: i64 = counts.values().sum();
    assert!(total > 0, "$queryStats recorded {app}'s run: {entries:?}");
    counts
        .into_iter()
        .map(|(k, n)| (k, n as f64 / total as f64))
        .collect()
}

/// The rate of `app`'s reads (find, aggregate, distinct; not their
/// getMores) as the simulator's profiler recorded them: their count over
/// the time from the first to the last.
async fn profiled_rate(sim: &SimHandle, app: &str) -> f64 {
    let client = common::driver_client(&sim.uri(), false, Duration::from_secs(5)).await;
    let entries: Vec<Document> = client
        .database(DB)
        .collection::<Document>("system.profile")
        .find(doc! { "appName": app, "op": { "$in": ["query", "command"] } })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut times: Vec<i64> = entries
        .iter()
        .filter(|e| {
            e.get_document("command").is_ok_and(|c| {
                ["find", "aggregate", "distinct"]
                    .iter()
                    .any(|k| c.contains_key(*k))
            })
        })
        .map(|e| e.get_datetime("ts").unwrap().timestamp_millis())
        .collect();
    times.sort();
    assert!(
        times.len() > 100,
        "the profiler recorded the run: {}",
        times.len()
    );
    let span = (times[times.len() - 1] - times[0]) as f64 / 1000.0;
    times.len() as f64 / span
}

/// Runs `cfg` to its end. The original must nearly keep its rate (`strict`:
/// at most 5 % missed; the captured rate is checked against the rate the
/// server saw, not the configured one); a replay may miss more: the
/// shares it is checked on do not depend on how many ran.
async fn run(cfg: config::Config, strict: bool) {
    let running = daemon::start(cfg).await.expect("daemon starts");
    let summary = tokio::time::timeout(Duration::from_secs(90), running.wait())
        .await
        .expect("the run ends");
    for w in &summary.workloads {
        assert_eq!(w.errors, 0, "{w:?}");
        assert!(
            !strict || w.missed * 20 <= w.ok + w.missed,
            "the run nearly kept its rate: {w:?}"
        );
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mix_captured_from_query_stats_replays_in_its_proportions_and_rate() {
    // The profiler keeps the server's own account of the original run
    // (each operation's time), against which the captured rate is checked.
    let sim = common::sim_with(SimConfig {
        profile: ProfileConfig {
            level: 2,
            cap_bytes: 64 * 1024 * 1024,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let original = ORIGINAL
        .replace("URI", &format!("{}?appName=original", sim.uri()))
        .replace("RATE", &RATE.to_string())
        .replace("RUN", RUN);
    let cfg = config::parse_with_env(&original, Path::new("original.toml"), std::iter::empty())
        .unwrap_or_else(|e| panic!("{e}"));
    run(cfg, true).await;
    let actual = profiled_rate(&sim, "original").await;
    let want = shares(&sim, "original").await;
    // The four operations' shapes (and the daemon's one lookup of the
    // highest `_id`).
    assert!(
        want.values().filter(|s| **s > 0.1).count() == 4,
        "{want:#?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("query-stats.toml");
    let (code, _, summary) = mongoload(&[
        "capture",
        "--query-stats",
        "--uri",
        &sim.uri(),
        "--scale",
        &SCALE.to_string(),
        "--out",
        file.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{summary}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        summary.contains("not seen: $queryStats records find, aggregate and distinct only"),
        "{summary}"
    );
    assert!(text.contains("inserts, updates"), "{text}");
    assert!(text.contains("(--profile DB) or the log"), "{text}");
    // The original documents' strings (read after the capture, which
    // would otherwise see this find too).
    let client = common::driver_client(&sim.uri(), false, Duration::from_secs(5)).await;
    let docs: Vec<Document> = client
        .database(DB)
        .collection::<Document>("orders")
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut literals = BTreeSet::new();
    for d in docs {
        strings(&Bson::Document(d), &mut literals);
    }
    assert!(literals.len() >= 300, "{}", literals.len());
    let (code, _, err) = mongoload(&["check-config", "--config", file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}\n{text}");
    for l in &literals {
        assert!(!text.contains(l.as_str()), "{l:?} copied into\n{text}");
    }
    // Each operation came with its latency and how its values draw.
    assert!(text.contains("latency seen mean"), "{text}");
    assert!(
        text.contains("customer drawn like the values of the collection's sampled documents"),
        "{text}"
    );
    let mut cfg = config::parse_with_env(&text, &file, std::iter::empty()).unwrap();
    assert_eq!(cfg.workloads.len(), 1, "{text}");
    let rate = match &cfg.workloads[0].stages[0].rate {
        Some(config::LevelSpec::Hold(r)) => *r,
        other => panic!("a captured stage holds one rate: {other:?}"),
    };
    // The original's rate as the server saw it (a machine busy with
    // builds may run the 1 500 operations over more than RUN: the daemon
    // does not count a late operation as missed), × scale.
    let want_rate = actual * SCALE;
    eprintln!(
        "captured rate {rate}/s; the original's, from the profiler, × {SCALE}: {want_rate}/s (configured {})",
        RATE * SCALE
    );
    assert!(
        (rate - want_rate).abs() <= 0.05 * want_rate,
        "rate {rate}/s, want {want_rate} ± 5 %\n{summary}\n{text}"
    );
    assert!(
        (actual - RATE).abs() <= 0.2 * RATE,
        "the original ran at {actual}/s, configured {RATE}/s: too busy a machine"
    );

    // The replay, against a fresh simulator at the file's rate.
    let replay_sim = common::sim().await;
    cfg.target.uri = Some(SecretUri::new(format!(
        "{}?appName=replay",
        replay_sim.uri()
    )));
    cfg.http.listen = "127.0.0.1:0".parse().unwrap();
    for w in &mut cfg.workloads {
        let config::KindConfig::Custom(c) = &mut w.kind else {
            panic!("{text}")
        };
        c.initial_docs = 300;
        w.stages = vec![serde_json::from_value::<StageConfig>(serde_json::json!({
            "name": "replay", "rate": rate, "duration": REPLAY_RUN
        }))
        .unwrap()];
    }
    run(cfg, false).await;
    let got = shares(&replay_sim, "replay").await;
    let keys: BTreeSet<&String> = want.keys().chain(got.keys()).collect();
    let mut report = String::new();
    for k in &keys {
        let (w, g) = (
            want.get(*k).copied().unwrap_or(0.0),
            got.get(*k).copied().unwrap_or(0.0),
        );
        report.push_str(&format!("{:6.2} {:6.2}  {k}\n", w * 100.0, g * 100.0));
    }
    eprintln!("shares (original, replay):\n{report}");
    for k in &keys {
        let (w, g) = (
            want.get(*k).copied().unwrap_or(0.0),
            got.get(*k).copied().unwrap_or(0.0),
        );
        assert!(
            (w - g).abs() <= 0.02,
            "shape share off by more than 2 points (original, replay):\n{report}\n{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_query_stats_names_an_older_server_and_a_missing_privilege() {
    // A server before 7.1: code 40324, and the way out named.
    let older = common::sim_with(SimConfig {
        profile: ProfileConfig {
            query_stats: false,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let (code, out, err) = mongoload(&["capture", "--query-stats", "--uri", &older.uri()]);
    assert_eq!(code, Some(1), "{err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("this server has no $queryStats"), "{err}");
    assert!(err.contains("40324"), "{err}");
    assert!(err.contains("--profile DB"), "{err}");

    // A user without queryStatsRead: code 13, the privilege named; the
    // password never shown.
    let denied = common::sim_with(SimConfig {
        auth: Some(AuthUser {
            user: "ops".into(),
            password: "s3cret-pw".into(),
        }),
        profile: ProfileConfig {
            query_stats_read: false,
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let uri = format!("mongodb://ops:s3cret-pw@{}/", denied.addr());
    let (code, _, err) = mongoload(&["capture", "--query-stats", "--uri", &uri]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("queryStatsRead"), "{err}");
    assert!(err.contains("Unauthorized"), "{err}");
    assert!(!err.contains("s3cret-pw"), "{err}");

    // Neither --uri nor --config: a usage error.
    let (code, _, err) = mongoload(&["capture", "--query-stats"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--query-stats reads a deployment's $queryStats"),
        "{err}"
    );
}

/// `--query-stats-for`: two readings apart, what ran between them. A
/// client runs one find every 10 ms throughout (after an earlier burst of
/// another shape, which the window must leave out).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn query_stats_for_captures_what_ran_between_two_readings() {
    let sim = common::sim().await;
    let uri = format!("{}?appName=shop-api", sim.uri());
    let client = common::driver_client(&uri, false, Duration::from_secs(5)).await;
    let coll = client.database(DB).collection::<Document>("orders");
    coll.insert_many((0..50).map(|i| doc! { "_id": i, "customer": i * 10 }))
        .await
        .unwrap();
    // Before the window: a burst of another shape.
    for i in 0..200 {
        coll.find_one(doc! { "_id": i % 50 }).await.unwrap();
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        let coll = coll.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(10));
            let mut n = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                tick.tick().await;
                let _: Vec<Document> = coll
                    .find(doc! { "customer": { "$gte": (n % 400) as i64 } })
                    .limit(3)
                    .await
                    .unwrap()
                    .try_collect()
                    .await
                    .unwrap();
                n += 1;
            }
            n
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("window.toml");
    let sim_uri = sim.uri();
    let file_arg = file.to_str().unwrap().to_owned();
    let (code, _, summary) = tokio::task::spawn_blocking(move || {
        mongoload(&[
            "capture",
            "--query-stats",
            "--query-stats-for",
            "3s",
            "--uri",
            &sim_uri,
            "--out",
            &file_arg,
        ])
    })
    .await
    .unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let ran = load.await.unwrap();
    assert_eq!(code, Some(0), "{summary}");
    assert!(ran > 200, "{ran}");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains("$queryStats read twice 3s apart"), "{text}");
    // Only the steady find ran in the window; the burst of _id lookups
    // before it is not in the file.
    assert_eq!(
        text.matches("[[workloads.custom.operations]]").count(),
        1,
        "{text}"
    );
    assert!(text.contains("customer = { \"$gte\""), "{text}");
    let cfg = config::parse_with_env(&text, &file, std::iter::empty()).unwrap();
    let rate = match &cfg.workloads[0].stages[0].rate {
        Some(config::LevelSpec::Hold(r)) => *r,
        other => panic!("{other:?}"),
    };
    // The client's pace: one find per 10 ms (a loaded machine may fall
    // behind, never ahead).
    assert!(
        (60.0..=105.0).contains(&rate),
        "rate {rate}/s\n{summary}\n{text}"
    );
}
