//! Documents per shard (`mongoload_shard_documents`): the real daemon
//! loads a collection the test shards itself (hashed `_id`) through the
//! sharded simulator's router; at the end of each stage and of the run the
//! gauge per shard equals the documents read from that shard itself (the
//! truth), and its sum over `shard` equals the collection's count; `/status`
//! shows the reading and the run log's stage reports carry it (the last,
//! written after the load drained, equal to the shards' counts). Against a replica set the metric is absent and
//! `/status` lists no shards.

use std::time::Duration;

use mongodb::bson::{doc, Document};
use mongoload::sim::{self, ErrorFault, ReplSetConfig, ShardedConfig, SimConfig};

use crate::common::{sample, samples};

fn config(uri: &str, db: &str, stages: &str, log: &std::path::Path) -> String {
    format!(
        r#"[target]
uri = "{uri}"
database = "{db}"
shard_stats_interval = "1s"
[http]
listen = "127.0.0.1:0"
[run]
shutdown_grace = "2s"
log = "{log}"
[[workloads]]
name = "w"
kind = "mixed"
seed = 1
[workloads.mixed]
insert = 1
update = 0
delete = 0
find = 0
doc_size = 64
initial_docs = 0
{stages}"#,
        log = log.display()
    )
}

/// Two shards of one member behind one router, with each of `namespaces`
/// sharded on a hashed `_id` through it; the cluster and a client of its
/// router.
async fn two_shards(namespaces: &[&str]) -> (sim::SimHandle, mongodb::Client) {
    let sim = sim::start_sharded(SimConfig::default(), ShardedConfig::new(2, 1, 1))
        .await
        .expect("the sharded cluster starts");
    let client = crate::common::driver_client(&sim.uri(), true, Duration::from_secs(10)).await;
    for ns in namespaces {
        client
            .database("admin")
            .run_command(doc! {"shardCollection": *ns, "key": {"_id": "hashed"}})
            .await
            .unwrap();
    }
    (sim, client)
}

/// Waits until the daemon at `addr` shows `workload`'s documents on both
/// shards.
async fn wait_both_shards(addr: std::net::SocketAddr, workload: &str) {
    crate::common::wait_for(
        &format!("{workload}'s documents on both shards"),
        Duration::from_secs(10),
        || async {
            let text = crate::common::scrape(addr).await;
            (samples(
                &text,
                "mongoload_shard_documents",
                &[("workload", workload)],
            )
            .len()
                == 2)
                .then_some(())
        },
    )
    .await;
}

/// The run log's lines, each validated against etc/runlog.schema.json.
fn run_log(path: &std::path::Path) -> Vec<serde_json::Value> {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../etc/runlog.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let text = std::fs::read_to_string(path).expect("the run log exists");
    text.lines()
        .map(|line| {
            let v: serde_json::Value = serde_json::from_str(line).unwrap();
            let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
            assert!(errors.is_empty(), "{errors:?}\n{line}");
            v
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn documents_per_shard_equal_what_each_shard_holds() {
    let (sim, client) = two_shards(&["shst.mixed"]).await;
    let cluster = sim.sharded().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let text = config(
        &sim.uri(),
        "shst",
        "[[workloads.stages]]\nrate = 200\nduration = \"2s\"\n[[workloads.stages]]\nrate = 200\nduration = \"2s\"\n",
        &log,
    );
    let (_file, running) = crate::common::start_daemon(&text).await;
    let addr = running.http_addr;
    // During the run: both shards appear, each with documents.
    let seen = crate::common::wait_for("both shards' gauges", Duration::from_secs(10), || async {
        let text = crate::common::scrape(addr).await;
        let s = samples(&text, "mongoload_shard_documents", &[("workload", "w")]);
        (s.len() == 2 && s.iter().all(|s| s.value > 0.0)).then_some(s)
    })
    .await;
    assert_eq!(seen.len(), 2);
    // /status: the same workload, two shards, a reading time; the
    // documents it counts are there (read before the count, which only grows).
    let status: serde_json::Value =
        serde_json::from_str(&crate::common::must_get(addr, "/status").await.body).unwrap();
    let shards = &status["shard_documents"];
    assert_eq!(shards.as_array().map(Vec::len), Some(1), "{status}");
    assert_eq!(shards[0]["workload"], "w");
    assert!(shards[0]["read_at"].is_string(), "{shards}");
    let per: Vec<i64> = shards[0]["shards"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(per.len(), 2, "{shards}");
    let counted = client
        .database("shst")
        .collection::<Document>("mixed")
        .count_documents(doc! {})
        .await
        .unwrap() as i64;
    assert!(per.iter().sum::<i64>() <= counted, "{shards} vs {counted}");
    let metrics = running.metrics.clone();
    running.wait().await;

    // After the run: the last reading, taken once the load had drained.
    let text = metrics.encode().unwrap();
    let coll = client.database("shst").collection::<Document>("mixed");
    let total = coll.count_documents(doc! {}).await.unwrap() as f64;
    let mut sum = 0.0;
    for i in 0..cluster.shards() {
        let name = cluster.shard_name(i).to_owned();
        let truth = cluster.shard_documents(i, "shst", "mixed").await.unwrap() as f64;
        let got = sample(
            &text,
            "mongoload_shard_documents",
            &[("workload", "w"), ("shard", name.as_str())],
        )
        .unwrap_or_else(|| panic!("no gauge for {name}:\n{text}"));
        assert_eq!(got, truth, "shard {name}");
        assert!(truth > 0.0, "hashed _id puts documents on {name}");
        sum += got;
    }
    assert_eq!(sum, total, "sum over shard = the collection's documents");
    let inserted = sample(
        &text,
        "mongoload_operations_total",
        &[("workload", "w"), ("op", "insert"), ("outcome", "ok")],
    )
    .unwrap();
    assert_eq!(sum, inserted, "every acknowledged insert counted once");

    // The run log: both stages carry documents per shard; the last one,
    // written once the load had drained, equals the shards' own counts.
    let lines = run_log(&log);
    assert_eq!(lines.len(), 2, "two stage reports");
    for l in &lines {
        let per = l["shard_documents"]
            .as_object()
            .unwrap_or_else(|| panic!("{l}"));
        assert_eq!(per.len(), 2, "{l}");
    }
    let last = &lines[1]["shard_documents"];
    for i in 0..cluster.shards() {
        let truth = cluster.shard_documents(i, "shst", "mixed").await.unwrap();
        assert_eq!(last[cluster.shard_name(i)].as_i64(), Some(truth), "{last}");
    }
    let first: i64 = lines[0]["shard_documents"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_i64().unwrap())
        .sum();
    assert!(first > 0 && first <= sum as i64, "{first} then {sum}");

    // `mongoload report` shows the run log's figures, one row per shard.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .arg("report")
        .arg(&log)
        .output()
        .expect("mongoload report runs");
    assert!(out.status.success(), "{out:?}");
    let printed = String::from_utf8(out.stdout).unwrap();
    for i in 0..cluster.shards() {
        let name = cluster.shard_name(i);
        let n = last[name].as_i64().unwrap();
        assert!(
            printed.lines().any(|l| {
                let cells: Vec<&str> = l.split_whitespace().collect();
                cells.len() >= 5 && cells[2] == name && cells[3] == n.to_string()
            }),
            "no row for {name} with {n}:\n{printed}"
        );
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn against_a_replica_set_there_is_no_shard_metric() {
    let sim = sim::start_replset(SimConfig::default(), ReplSetConfig::new("rs0", 3))
        .await
        .expect("the replica set starts");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let text = config(
        &sim.uri(),
        "shst_rs",
        "[[workloads.stages]]\nrate = 100\nduration = \"3s\"\n",
        &log,
    );
    let (_file, running) = crate::common::start_daemon(&text).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status: serde_json::Value = serde_json::from_str(
        &crate::common::must_get(running.http_addr, "/status")
            .await
            .body,
    )
    .unwrap();
    assert_eq!(status["shard_documents"], serde_json::json!([]), "{status}");
    let metrics = running.metrics.clone();
    running.wait().await;
    let text = metrics.encode().unwrap();
    assert!(
        samples(&text, "mongoload_shard_documents", &[]).is_empty(),
        "{text}"
    );
    let lines = run_log(&log);
    assert!(!lines.is_empty());
    assert!(lines.iter().all(|l| l.get("shard_documents").is_none()));
    assert!(
        sample(
            &text,
            "mongoload_operations_total",
            &[("workload", "w"), ("op", "insert"), ("outcome", "ok")]
        )
        .unwrap()
            > 0.0
    );
    sim.shutdown().await;
}

/// `$collStats` refused by the router (13 Unauthorized, as for a user
/// without `read`): the figure is unknown — no series, `/status` with no
/// reading time and no shards — and the load runs on; once the router
/// answers again the documents per shard come back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_read_is_unknown_and_recovers() {
    let (sim, _client) = two_shards(&["shst_refused.mixed"]).await;
    sim.faults().set_error(Some(ErrorFault {
        rate: 1.0,
        code: 13,
        commands: vec!["aggregate".into()],
    }));
    let dir = tempfile::tempdir().unwrap();
    let text = config(
        &sim.uri(),
        "shst_refused",
        "[[workloads.stages]]\nrate = 100\nduration = \"1h\"\n",
        &dir.path().join("runs.jsonl"),
    );
    let (_file, running) = crate::common::start_daemon(&text).await;
    let addr = running.http_addr;
    // Three readings' worth (interval 1 s), all refused.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let text = crate::common::scrape(addr).await;
    assert!(
        samples(&text, "mongoload_shard_documents", &[]).is_empty(),
        "{text}"
    );
    assert!(
        sample(
            &text,
            "mongoload_operations_total",
            &[("workload", "w"), ("op", "insert"), ("outcome", "ok")]
        )
        .unwrap()
            > 0.0
    );
    let status: serde_json::Value =
        serde_json::from_str(&crate::common::must_get(addr, "/status").await.body).unwrap();
    let shards = &status["shard_documents"][0];
    assert_eq!(shards["workload"], "w", "{status}");
    assert!(shards["read_at"].is_null(), "{shards}");
    assert_eq!(shards["shards"], serde_json::json!({}), "{shards}");

    sim.faults().set_error(None);
    crate::common::wait_for(
        "the documents per shard again",
        Duration::from_secs(10),
        || async {
            let text = crate::common::scrape(addr).await;
            (samples(&text, "mongoload_shard_documents", &[("workload", "w")]).len() == 2)
                .then_some(())
        },
    )
    .await;
    running.stop();
    running.wait().await;
    sim.shutdown().await;
}

/// A migration's commit as `config.changelog` dates it.
fn committed(m: &sim::Migration) -> std::time::SystemTime {
    m.started + m.end.duration_since(m.start)
}

/// Chunk migrations (`mongoload_shard_chunk_migrations_total`): chunks of
/// the workload's collection moved from the test before and while the
/// daemon runs; at the end the counter, per (from, to), equals the
/// migrations of that namespace in the simulator's own record that
/// committed after the daemon started (the one before is not counted), and
/// the router's `config.changelog` has one `moveChunk.commit` per record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunk_migrations_equal_the_simulators_record() {
    let ns = "shmig.mixed";
    let (sim, client) = two_shards(&[ns]).await;
    let cluster = sim.sharded().unwrap();
    // One migration before the daemon starts: not the daemon's to count.
    let chunk_of = |k: i64| doc! {"_id": k};
    let mut before = cluster.move_chunk(ns, &chunk_of(1), 1).await.unwrap();
    if before.is_none() {
        before = cluster.move_chunk(ns, &chunk_of(1), 0).await.unwrap();
    }
    assert!(before.is_some(), "a migration before the daemon");
    let started = std::time::SystemTime::now();
    let dir = tempfile::tempdir().unwrap();
    let text = config(
        &sim.uri(),
        "shmig",
        "[[workloads.stages]]\nrate = 100\nduration = \"8s\"\n",
        &dir.path().join("runs.jsonl"),
    );
    let (_file, running) = crate::common::start_daemon(&text).await;
    let addr = running.http_addr;
    wait_both_shards(addr, "w").await;
    // Chunks back and forth while the load runs, across several readings.
    for round in 0..6_usize {
        for k in [1_i64, 2] {
            cluster
                .move_chunk(ns, &chunk_of(k), (round + k as usize) % 2)
                .await
                .expect("the chunk moves");
        }
        tokio::time::sleep(Duration::from_millis(700)).await;
    }
    let metrics = running.metrics.clone();
    running.wait().await;

    let truth: Vec<sim::Migration> = cluster
        .migrations()
        .into_iter()
        .filter(|m| m.ns == ns && committed(m) > started)
        .collect();
    assert!(truth.len() >= 6, "{} migrations", truth.len());
    let mut want: std::collections::BTreeMap<(String, String), f64> = Default::default();
    for m in &truth {
        *want.entry((m.from.clone(), m.to.clone())).or_default() += 1.0;
    }
    let text = metrics.encode().unwrap();
    let got = samples(
        &text,
        "mongoload_shard_chunk_migrations_total",
        &[("workload", "w")],
    );
    assert!(!got.is_empty(), "{text}");
    let mut counted: std::collections::BTreeMap<(String, String), f64> = Default::default();
    for s in &got {
        let pair = (
            s.label("from").unwrap().to_owned(),
            s.label("to").unwrap().to_owned(),
        );
        if s.value > 0.0 {
            counted.insert(pair, s.value);
        } else {
            assert!(!want.contains_key(&pair), "{pair:?} at 0");
        }
    }
    assert_eq!(counted, want, "per (from, to)\n{text}");
    let total: f64 = got.iter().map(|s| s.value).sum();
    assert_eq!(total, truth.len() as f64);

    // What the daemon read: the router's changelog, one commit per record.
    let commits = client
        .database("config")
        .collection::<Document>("changelog")
        .count_documents(doc! {"what": "moveChunk.commit", "ns": ns})
        .await
        .unwrap();
    let all = cluster.migrations().len() as u64;
    assert_eq!(commits, all);
    sim.shutdown().await;
}

/// `config.changelog` refused (13, as for a user with only `readWrite`):
/// the migrations family is absent although chunks moved, the daemon's
/// stderr has one line about it over many intervals, and the documents
/// per shard are read on as before.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_changelog_leaves_migrations_unknown_with_one_line() {
    let ns = "shmig_refused.mixed";
    let (sim, client) = two_shards(&[ns]).await;
    let cluster = sim.sharded().unwrap();
    cluster.refuse_changelog(true);
    let refused = client
        .database("config")
        .collection::<Document>("changelog")
        .find_one(doc! {})
        .await
        .unwrap_err();
    assert_eq!(crate::common::error_code(&refused), Some(13));
    let dir = tempfile::tempdir().unwrap();
    let addr = crate::common::free_port();
    let text = config(
        &sim.uri(),
        "shmig_refused",
        "[[workloads.stages]]\nrate = 100\nduration = \"1h\"\n",
        &dir.path().join("runs.jsonl"),
    )
    .replace("127.0.0.1:0", &addr.to_string());
    let file = crate::common::write_config(&text);
    let (mut child, stderr) = crate::common::spawn_run(&file, "info");
    crate::common::wait_for("both shards' gauges", Duration::from_secs(15), || async {
        let text = crate::common::get(addr, "/metrics").await.ok()?.body;
        (samples(&text, "mongoload_shard_documents", &[("workload", "w")]).len() == 2).then_some(())
    })
    .await;
    for to in [1, 0, 1] {
        cluster
            .move_chunk(ns, &doc! {"_id": 1_i64}, to)
            .await
            .expect("the chunk moves");
    }
    // Four readings' worth (interval 1 s) after the migrations.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let text = crate::common::must_get(addr, "/metrics").await.body;
    assert!(
        samples(&text, "mongoload_shard_chunk_migrations_total", &[]).is_empty(),
        "{text}"
    );
    assert_eq!(
        samples(&text, "mongoload_shard_documents", &[("workload", "w")]).len(),
        2,
        "{text}"
    );
    assert!(!cluster.migrations().is_empty());
    let status = crate::common::terminate(&mut child).await;
    assert!(status.success(), "{status}");
    let log = std::fs::read_to_string(&stderr).unwrap();
    let lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("chunk migrations") || l.contains("changelog"))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    assert!(lines[0].contains("not authorized"), "{}", lines[0]);
    sim.shutdown().await;
}

/// A reload (the supervisor's, as SIGHUP applies it) changes the workloads
/// whose documents per shard are read: a workload it starts gets its
/// gauges per shard, equal to what each shard holds after the run, and
/// one it stops leaves `mongoload_shard_documents` and `/status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_changes_the_workloads_read_per_shard() {
    let (sim, _client) = two_shards(&["shrl.mixed", "shrl.second"]).await;
    let cluster = sim.sharded().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let text = config(
        &sim.uri(),
        "shrl",
        "[[workloads.stages]]\nrate = 100\nduration = \"1h\"\n",
        &dir.path().join("runs.jsonl"),
    );
    let (file, running) = crate::common::start_daemon(&text).await;
    let addr = running.http_addr;
    wait_both_shards(addr, "w").await;

    // w replaced by v, which loads another collection until stopped (a
    // run that ended by itself could take the HTTP server with it before
    // the reads below on a slow machine).
    let new_text = text.replace("name = \"w\"", "name = \"v\"").replace(
        "initial_docs = 0",
        "initial_docs = 0\ncollection = \"second\"",
    );
    let summary = running
        .reload(crate::common::parse(&new_text, &file.path))
        .await
        .expect("the reload applies");
    assert_eq!(summary.stopped, vec!["w"]);
    assert_eq!(summary.started, vec!["v"]);
    // What was seen last, for the message when the wait runs out.
    let seen = std::sync::Mutex::new(String::new());
    let waited = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let text = crate::common::scrape(addr).await;
            let v = samples(&text, "mongoload_shard_documents", &[("workload", "v")]);
            let w = samples(&text, "mongoload_shard_documents", &[("workload", "w")]);
            if v.len() == 2 && w.is_empty() {
                return;
            }
            let ops: Vec<String> = text
                .lines()
                .filter(|l| {
                    l.starts_with("mongoload_operations_total")
                        || l.starts_with("mongoload_errors_total")
                })
                .map(str::to_owned)
                .collect();
            *seen.lock().unwrap() = format!("v {v:?}, w {w:?}\n{}", ops.join("\n"));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "v's shards, and w's gone, not within 10 s: {}",
        seen.lock().unwrap()
    );
    let status: serde_json::Value =
        serde_json::from_str(&crate::common::must_get(addr, "/status").await.body).unwrap();
    let listed: Vec<&str> = status["shard_documents"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|d| d["workload"].as_str())
        .collect();
    assert_eq!(listed, ["v"], "{status}");
    let metrics = running.metrics.clone();
    running.stop();
    running.wait().await;

    // After the run: v's last reading is each shard's own count.
    let text = metrics.encode().unwrap();
    for i in 0..cluster.shards() {
        let name = cluster.shard_name(i).to_owned();
        let truth = cluster.shard_documents(i, "shrl", "second").await.unwrap() as f64;
        let got = sample(
            &text,
            "mongoload_shard_documents",
            &[("workload", "v"), ("shard", name.as_str())],
        )
        .unwrap_or_else(|| panic!("no gauge of v for {name}:\n{text}"));
        assert_eq!(got, truth, "shard {name}");
        assert!(truth > 0.0, "v's documents on {name}");
    }
    assert!(samples(&text, "mongoload_shard_documents", &[("workload", "w")]).is_empty());
    sim.shutdown().await;
}
