//! mongoload shards what it loads (docs/sharding.md): the real daemon,
//! through the official driver, against a sharded cluster: the simulator's
//! (2 shards, each a standalone, behind 2 routers), or the deployment
//! `MONGOLOAD_TEST_URI` names when it is a mongos (docs/testing.md).
//! Where the chunks are is read from the cluster's `config` database,
//! where the documents are from each shard itself (the simulator's shards
//! directly, a real cluster's through `$collStats`), never through
//! mongoload.

use std::time::Duration;

use crate::common::shards::{mongos_test_db, ShardView};
use crate::common::{config_toml_in, spawn_run, wait_exit, write_config, TestDb};
use mongodb::bson::doc;
use mongoload::report;
use mongoload::sim::{self, ShardedConfig, SimConfig};

/// The test's sharded cluster (see [`mongos_test_db`]).
async fn cluster() -> TestDb {
    mongos_test_db(async {
        sim::start_sharded(SimConfig::default(), ShardedConfig::new(2, 1, 2))
            .await
            .expect("the sharded cluster starts")
    })
    .await
}

/// The common test config against `uri` in database `db`, with `extra`
/// keys in the workload's table and one 3 s stage at 100 ops/s; the run
/// log beside it.
fn config(uri: &str, db: &str, extra: &str) -> String {
    let stage = "[[workloads.stages]]\nname = \"soak\"\nrate = 100\nduration = \"3s\"\n";
    config_toml_in(uri, db, stage).replace("seed = 7\n", &format!("seed = 7\n{extra}\n"))
}

/// Runs `mongoload run` on `text` to its end; its exit code, stderr and
/// stage reports.
async fn run(text: &str) -> (Option<i32>, String, Vec<report::StageReport>) {
    let log_dir = tempfile::tempdir().unwrap();
    let log = log_dir.path().join("runs.jsonl");
    let text = text.replace("[run]\n", &format!("[run]\nlog = \"{}\"\n", log.display()));
    let file = write_config(&text);
    let (mut child, stderr) = spawn_run(&file, "info");
    let status = wait_exit(&mut child, Duration::from_secs(90)).await;
    let err = std::fs::read_to_string(stderr).unwrap_or_default();
    (status.code(), err, report::read(&log).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hashed_id_spreads_the_documents_over_both_shards_and_a_rerun_keeps_the_key() {
    let db = cluster().await;
    let view = ShardView::of(&db).await;
    let name = db.database("shard");
    let ns = format!("{name}.m");
    let text = config(
        &db.uri(),
        &name,
        "shard_key = { _id = \"hashed\" }\npresplit = 4",
    );
    let (code, err, reports) = run(&text).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("sharded the collection"), "{err}");
    assert_eq!(view.shard_key(&ns).await, Some(doc! {"_id": "hashed"}));
    let chunks = view.chunks(&ns).await;
    assert_eq!(chunks.len(), 4, "numInitialChunks: {chunks:?}");
    // Counted on the shards themselves.
    let per = view.documents(&name, "m").await;
    let on: Vec<i64> = per.values().copied().collect();
    assert!(
        on.iter().filter(|&&n| n > 0).count() >= 2,
        "documents per shard: {per:?}"
    );
    // 200 loaded, then the soak's inserts (6.5 %) less its deletes.
    let soak = reports
        .iter()
        .find(|r| r.stage == "soak")
        .expect("a soak report");
    assert!(soak.operations.ok > 100, "{soak:?}");
    let total: i64 = on.iter().sum();
    assert!((150..400).contains(&total), "documents per shard: {per:?}");

    // Again: found sharded on the same key, and on it goes.
    let (code, err, _) = run(&text).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("already sharded on this key"), "{err}");
    assert_eq!(view.chunks(&ns).await.len(), 4);

    // Another key: exit 78 naming both.
    let other = config(&db.uri(), &name, "shard_key = { k = 1 }");
    let (code, err, _) = run(&other).await;
    assert_eq!(code, Some(78), "{err}");
    assert!(
        err.contains("already sharded on { \"_id\": \"hashed\" }") && err.contains("{ k: 1 }"),
        "{err}"
    );
    db.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ranged_presplit_puts_chunks_on_both_shards_and_the_audit_finds_none_missing() {
    let db = cluster().await;
    let view = ShardView::of(&db).await;
    let name = db.database("ranged");
    // initial_docs 200, max_docs 400: the range [0, 400) in 4 chunks.
    let text = config(
        &db.uri(),
        &name,
        "shard_key = { _id = 1 }\npresplit = 4\naudit = true",
    )
    .replace("load_batch = 100\n", "load_batch = 100\nmax_docs = 400\n");
    let (code, err, reports) = run(&text).await;
    assert_eq!(code, Some(0), "{err}");
    let chunks = view.chunks(&format!("{name}.m")).await;
    assert_eq!(chunks.len(), 4, "{chunks:?}");
    let mins: Vec<_> = chunks.iter().map(|c| c.min.get("_id").cloned()).collect();
    assert!(
        mins.contains(&Some(100i64.into())) && mins.contains(&Some(300i64.into())),
        "split at 100, 200, 300: {chunks:?}"
    );
    // Round-robin over the shards (of 2, two chunks each), and documents
    // on the first two (the first two chunks hold the 200 loaded).
    let shards = view.shards().await;
    let per = view.documents(&name, "m").await;
    for s in shards.iter().take(4) {
        let held = chunks.iter().filter(|c| &c.shard == s).count();
        assert!(
            (1..=4usize.div_ceil(shards.len())).contains(&held),
            "round-robin: {chunks:?}"
        );
    }
    for s in shards.iter().take(2) {
        assert!(per[s] > 0, "documents per shard: {per:?}");
    }
    let soak = reports
        .iter()
        .find(|r| r.stage == "soak")
        .expect("a soak report");
    let audit = soak.audit.as_ref().expect("an audit report");
    assert!(audit.acknowledged > 0 && audit.complete, "{audit:?}");
    assert_eq!(audit.missing_total, 0, "{audit:?}");
    db.shutdown().await;
}

/// A ranged presplit interrupted after its first split (the collection
/// sharded, split at 100, nothing moved: as a restart would find it) is
/// finished by the next run: split at 200 and 300 too, and its 4 chunks
/// spread round-robin; a run after that finds it done and moves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_ranged_presplit_is_finished_by_the_next_run() {
    let db = cluster().await;
    let view = ShardView::of(&db).await;
    let name = db.database("resplit");
    let ns = format!("{name}.m");
    let admin = db.client().await.database("admin");
    admin
        .run_command(doc! {"shardCollection": &ns, "key": {"_id": 1}})
        .await
        .expect("shardCollection");
    admin
        .run_command(doc! {"split": &ns, "middle": {"_id": 100_i64}})
        .await
        .expect("split");
    assert_eq!(view.chunks(&ns).await.len(), 2);
    let text = config(&db.uri(), &name, "shard_key = { _id = 1 }\npresplit = 4")
        .replace("load_batch = 100\n", "load_batch = 100\nmax_docs = 400\n");
    let (code, err, _) = run(&text).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("already sharded on this key"), "{err}");
    assert!(
        err.contains("presplit and spread over the shards") && err.contains("splits=2"),
        "{err}"
    );
    let chunks = view.chunks(&ns).await;
    let mut mins: Vec<_> = chunks
        .iter()
        .filter_map(|c| c.min.get_i64("_id").ok())
        .collect();
    mins.sort_unstable();
    assert_eq!(mins, [100, 200, 300], "{chunks:?}");
    let shards = view.shards().await;
    for s in shards.iter().take(4) {
        let held = chunks.iter().filter(|c| &c.shard == s).count();
        assert!(
            (1..=4usize.div_ceil(shards.len())).contains(&held),
            "round-robin: {chunks:?}"
        );
    }
    let (code, err, _) = run(&text).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("presplit done before"), "{err}");
    db.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_key_against_a_replica_set_exits_78_naming_the_workload_and_key() {
    let sim = sim::start_replset(SimConfig::default(), sim::ReplSetConfig::new("rs0", 1))
        .await
        .unwrap();
    let text = config(&sim.uri(), "mlnoshard", "shard_key = { _id = \"hashed\" }");
    let (code, err, _) = run(&text).await;
    assert_eq!(code, Some(78), "{err}");
    assert!(
        err.contains("workload \"w\": shard_key { _id: \"hashed\" } needs a sharded cluster")
            && err.contains("a replica set"),
        "{err}"
    );
    sim.shutdown().await;
}

#[test]
fn check_config_warns_of_a_ranged_key_that_only_grows() {
    let text = "[target]\nuri = \"mongodb://127.0.0.1:1/\"\n[[workloads]]\nname = \"ib\"\n\
                kind = \"insert-benchmark\"\nshard_key = { _id = 1 }\n\
                [[workloads.stages]]\nrate = 1\nduration = \"1s\"\n";
    let file = write_config(text);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["check-config", "--config"])
        .arg(&file.path)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("  sharding: every collection on { _id: 1 }"),
        "{stdout}"
    );
    assert!(
        stderr.contains("warning") && stderr.contains("only grow") && stderr.contains("\"ib\""),
        "{stderr}"
    );
    // Hashed: no warning.
    let file = write_config(&text.replace("{ _id = 1 }", "{ _id = \"hashed\" }"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["check-config", "--config"])
        .arg(&file.path)
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&out.stderr).contains("only grow"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_load_hosts_shard_once() {
    let db = cluster().await;
    let view = ShardView::of(&db).await;
    let name = db.database("two");
    let base = config(
        &db.uri(),
        &name,
        "shard_key = { _id = \"hashed\" }\npresplit = 6",
    );
    let files: Vec<_> = (0..2)
        .map(|i| {
            write_config(&format!(
                "{base}\n[cluster]\nsize = 2\nindex = {i}\nlease = \"3s\"\n"
            ))
        })
        .collect();
    let mut children: Vec<_> = files.iter().map(|f| spawn_run(f, "info")).collect();
    let mut errs = Vec::new();
    for (child, stderr) in &mut children {
        let status = wait_exit(child, Duration::from_secs(90)).await;
        let err = std::fs::read_to_string(&*stderr).unwrap_or_default();
        assert_eq!(status.code(), Some(0), "{err}");
        errs.push(err);
    }
    let sharding = |e: &String| e.matches("prepare: sharded the collection").count();
    assert_eq!(
        errs.iter().map(sharding).sum::<usize>(),
        1,
        "one member shards, the other waits for the lease: {errs:?}"
    );
    assert!(
        errs.iter().all(|e| !e.contains("already sharded")),
        "the waiting member does not shard again: {errs:?}"
    );
    let chunks = view.chunks(&format!("{name}.m")).await;
    assert_eq!(chunks.len(), 6, "{chunks:?}");
    let per = view.documents(&name, "m").await;
    for s in view.shards().await.iter().take(6) {
        assert!(per[s] > 0, "documents per shard: {per:?}");
    }
    db.shutdown().await;
}

/// `mongoload check-target --json` on `text`: exit code and the report.
async fn check_target(text: &str) -> (Option<i32>, serde_json::Value, String) {
    let file = write_config(text);
    let path = file.path.clone();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
            .args(["check-target", "--json", "--config"])
            .arg(&path)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let json = serde_json::from_slice(&out.stdout).unwrap_or_default();
    (
        out.status.code(),
        json,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `mongoload check-target` on `text`: its text report.
fn check_target_text(text: &str) -> String {
    let file = write_config(text);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["check-target", "--config"])
        .arg(&file.path)
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_target_on_the_routers_lists_the_shards_the_balancer_and_the_sharding() {
    let db = cluster().await;
    let view = ShardView::of(&db).await;
    let name = db.database("check");
    let ns = format!("{name}.m");
    let client = db.client().await;
    // Before MongoDB 6.0 a database is enabled for sharding first.
    client
        .database("admin")
        .run_command(doc! {"enableSharding": &name})
        .await
        .unwrap();
    client
        .database("admin")
        .run_command(doc! {"shardCollection": &ns, "key": {"k": 1}})
        .await
        .unwrap();
    // The simulator's balancer is turned off, to see the report say so; a
    // real cluster's is left as it is.
    if let Some(cluster) = db.sim().and_then(|s| s.sharded()) {
        cluster.set_balancer(false);
    }
    let mode = view.balancer_mode().await;
    let shards = view.shards().await;
    let planned = config(&db.uri(), &name, "shard_key = { _id = \"hashed\" }");
    let (code, report, err) = check_target(&planned).await;
    let s = &report["sharding"];
    assert_eq!(s["mongos"], true, "{report:#}\n{err}");
    assert_eq!(s["shards"], serde_json::json!(shards), "{report:#}");
    assert!(
        s["balancer"].as_str().unwrap().starts_with(&mode),
        "balancerStatus says {mode}: {report:#}"
    );
    if db.sim().is_some() {
        assert_eq!(mode, "off");
        // The simulator's user-less server shows no privileges: unknown,
        // not refused, but for the commands check-target ran (listShards,
        // and enableSharding whose action was not shown), which answered.
        assert_eq!(
            s["actions"],
            serde_json::json!([
                ["enableSharding", true],
                ["splitChunk", null],
                ["moveChunk", null],
                ["listShards", true]
            ]),
            "{report:#}"
        );
        assert_eq!(s["unsupported"], serde_json::json!([]), "{report:#}");
    }
    // Sharded on { k: 1 } already, planned hashed _id: exit 78 naming both.
    let c = &s["collections"][0];
    assert_eq!(c["namespace"], ns.as_str());
    assert_eq!(c["conflict"], true, "{report:#}");
    assert_eq!(code, Some(78), "{report:#}");
    assert!(
        report["verdict"]
            .as_str()
            .unwrap()
            .contains("{ _id: \"hashed\" }"),
        "{report:#}"
    );
    // The same key: ready, and the text report shows the section.
    let same = config(&db.uri(), &name, "shard_key = { k = 1 }");
    let (code, report, _) = check_target(&same).await;
    assert_eq!(code, Some(0), "{report:#}");
    let text = check_target_text(&same);
    assert!(
        text.contains(&format!(
            "shards         {} ({})",
            shards.len(),
            shards.join(", ")
        )) && text.contains(&format!("balancer       {mode}"))
            && text.contains(&format!("{ns}: now {{ \"k\": 1 }}, planned {{ k: 1 }}")),
        "{text}"
    );
    db.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_target_refuses_a_shard_key_against_a_replica_set() {
    let sim = sim::start_replset(SimConfig::default(), sim::ReplSetConfig::new("rs0", 1))
        .await
        .unwrap();
    let text = config(&sim.uri(), "mlcheckrs", "shard_key = { _id = \"hashed\" }");
    let (code, report, _) = check_target(&text).await;
    assert_eq!(code, Some(78), "{report:#}");
    assert!(
        report["verdict"].as_str().unwrap().contains("not a mongos"),
        "{report:#}"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_refused_the_sharding_commands_exits_77_naming_the_action() {
    // The simulator's own cluster: it refuses on demand.
    let sim = sim::start_sharded(SimConfig::default(), ShardedConfig::new(2, 1, 2))
        .await
        .unwrap();
    let sharded = sim.sharded().unwrap();
    sharded.refuse_sharding(true);
    let text = config(&sim.uri(), "mlrefused", "shard_key = { _id = \"hashed\" }");
    let (code, err, _) = run(&text).await;
    assert_eq!(code, Some(77), "{err}");
    assert!(
        err.contains("lacks the privilege action \"enableSharding\"") && err.contains("\"w\""),
        "{err}"
    );
    assert_eq!(sharded.shard_key("mlrefused.m"), None);
    sim.shutdown().await;
}

/// A router that has neither `enableSharding` nor `listShards` (it answers
/// 115 CommandNotSupported, as a MongoDB-compatible server may), with one
/// router so that every command meets it.
async fn router_without_enable_sharding_and_list_shards() -> sim::SimHandle {
    let sim = sim::start_sharded(SimConfig::default(), ShardedConfig::new(2, 1, 1))
        .await
        .unwrap();
    sim.faults().set_error(Some(sim::ErrorFault {
        rate: 1.0,
        code: 115,
        commands: vec!["enableSharding".into(), "listShards".into()],
    }));
    sim
}

/// MongoDB 6.0 and later shard a collection without `enableSharding`:
/// a hashed key is sharded with `shardCollection` alone, and check-target
/// says which commands the server does not have instead of calling them
/// refused privileges.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_enable_sharding_shards_with_shard_collection_alone() {
    let sim = router_without_enable_sharding_and_list_shards().await;
    let text = config(&sim.uri(), "mlnoenable", "shard_key = { _id = \"hashed\" }");
    let (code, report, err) = check_target(&text).await;
    assert_eq!(code, Some(0), "{report:#}\n{err}");
    let unsupported = &report["sharding"]["unsupported"];
    assert_eq!(
        unsupported,
        &serde_json::json!(["listShards", "enableSharding"]),
        "{report:#}"
    );
    let stdout = check_target_text(&text);
    assert!(
        stdout.contains("enableSharding not supported by this server")
            && stdout.contains("listShards not supported by this server")
            && !stdout.contains("NO"),
        "{stdout}"
    );

    let (code, err, _) = run(&text).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(!err.contains("retrying"), "{err}");
    let key = sim.sharded().unwrap().shard_key("mlnoenable.m");
    assert_eq!(key, Some(doc! {"_id": "hashed"}));
    sim.shutdown().await;
}

/// A ranged presplit needs `listShards` to spread its chunks: against a
/// server without it the run ends at prepare with exit 76, naming the
/// command, the server's answer and the way out, instead of retrying
/// for ever; check-target says so first, with the same status.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_the_server_does_not_have_ends_the_run_with_76() {
    let sim = router_without_enable_sharding_and_list_shards().await;
    let text = config(
        &sim.uri(),
        "mlnolist",
        "shard_key = { _id = 1 }\npresplit = 4",
    )
    .replace("load_batch = 100\n", "load_batch = 100\nmax_docs = 400\n");
    let (code, report, err) = check_target(&text).await;
    assert_eq!(code, Some(76), "{report:#}\n{err}");
    assert_eq!(
        report["verdict"], "not supported by this server: listShards (a ranged presplit needs it)",
        "{report:#}"
    );
    let started = std::time::Instant::now();
    let (code, err, _) = run(&text).await;
    assert_eq!(code, Some(76), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "ended after {:?}",
        started.elapsed()
    );
    assert!(
        err.contains("the server does not support listShards")
            && err.contains("CommandNotSupported")
            && err.contains("remove the ranged presplit"),
        "{err}"
    );
    assert!(!err.contains("retrying"), "{err}");
    sim.shutdown().await;
}
