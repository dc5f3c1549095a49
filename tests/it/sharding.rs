//! mongoload shards what it loads (docs/sharding.md): the real daemon,
//! through the official driver, against the simulator as a sharded cluster
//! (2 shards, each a standalone, behind 2 routers). Where the documents and
//! chunks are is read from the simulator's own record and from each shard
//! itself, never through mongoload.

use std::time::Duration;

use crate::common::{config_toml_in, spawn_run, wait_exit, write_config};
use mongodb::bson::doc;
use mongoload::report;
use mongoload::sim::{self, ShardedConfig, SimConfig, SimHandle};

async fn cluster() -> SimHandle {
    sim::start_sharded(SimConfig::default(), ShardedConfig::new(2, 1, 2))
        .await
        .expect("the sharded cluster starts")
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
    let sim = cluster().await;
    let sharded = sim.sharded().unwrap();
    let text = config(
        &sim.uri(),
        "mlshard",
        "shard_key = { _id = \"hashed\" }\npresplit = 4",
    );
    let (code, err, reports) = run(&text).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("sharded the collection"), "{err}");
    assert_eq!(sharded.shard_key("mlshard.m"), Some(doc! {"_id": "hashed"}));
    let chunks = sharded.chunks("mlshard.m");
    assert_eq!(chunks.len(), 4, "numInitialChunks: {chunks:?}");
    // Counted on the shards themselves.
    let on: Vec<i64> =
        futures::future::join_all((0..2).map(|i| sharded.shard_documents(i, "mlshard", "m")))
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
    assert!(on[0] > 0 && on[1] > 0, "documents per shard: {on:?}");
    // 200 loaded, then the soak's inserts (6.5 %) less its deletes.
    let soak = reports
        .iter()
        .find(|r| r.stage == "soak")
        .expect("a soak report");
    assert!(soak.operations.ok > 100, "{soak:?}");
    let total: i64 = on.iter().sum();
    assert!((150..400).contains(&total), "documents per shard: {on:?}");

    // Again: found sharded on the same key, and on it goes.
    let (code, err, _) = run(&text).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("already sharded on this key"), "{err}");
    assert_eq!(sharded.chunks("mlshard.m").len(), 4);

    // Another key: exit 78 naming both.
    let other = config(&sim.uri(), "mlshard", "shard_key = { k = 1 }");
    let (code, err, _) = run(&other).await;
    assert_eq!(code, Some(78), "{err}");
    assert!(
        err.contains("already sharded on { \"_id\": \"hashed\" }") && err.contains("{ k: 1 }"),
        "{err}"
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ranged_presplit_puts_chunks_on_both_shards_and_the_audit_finds_none_missing() {
    let sim = cluster().await;
    let sharded = sim.sharded().unwrap();
    // initial_docs 200, max_docs 400: the range [0, 400) in 4 chunks.
    let text = config(
        &sim.uri(),
        "mlranged",
        "shard_key = { _id = 1 }\npresplit = 4\naudit = true",
    )
    .replace("load_batch = 100\n", "load_batch = 100\nmax_docs = 400\n");
    let (code, err, reports) = run(&text).await;
    assert_eq!(code, Some(0), "{err}");
    let chunks = sharded.chunks("mlranged.m");
    assert_eq!(chunks.len(), 4, "{chunks:?}");
    let mins: Vec<_> = chunks.iter().map(|c| c.min.get("_id").cloned()).collect();
    assert!(
        mins.contains(&Some(100i64.into())) && mins.contains(&Some(300i64.into())),
        "split at 100, 200, 300: {chunks:?}"
    );
    for s in 0..2 {
        assert_eq!(
            chunks.iter().filter(|c| c.shard == s).count(),
            2,
            "round-robin: {chunks:?}"
        );
        assert!(sharded.shard_documents(s, "mlranged", "m").await.unwrap() > 0);
    }
    let soak = reports
        .iter()
        .find(|r| r.stage == "soak")
        .expect("a soak report");
    let audit = soak.audit.as_ref().expect("an audit report");
    assert!(audit.acknowledged > 0 && audit.complete, "{audit:?}");
    assert_eq!(audit.missing_total, 0, "{audit:?}");
    sim.shutdown().await;
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
    let sim = cluster().await;
    let sharded = sim.sharded().unwrap();
    let base = config(
        &sim.uri(),
        "mltwo",
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
    assert_eq!(sharded.chunks("mltwo.m").len(), 6);
    for s in 0..2 {
        assert!(sharded.shard_documents(s, "mltwo", "m").await.unwrap() > 0);
    }
    sim.shutdown().await;
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_target_on_the_routers_lists_the_shards_the_balancer_and_the_sharding() {
    let sim = cluster().await;
    let sharded = sim.sharded().unwrap();
    let client = crate::common::driver_client(&sim.uri(), true, Duration::from_secs(5)).await;
    client
        .database("admin")
        .run_command(doc! {"shardCollection": "mlcheck.m", "key": {"k": 1}})
        .await
        .unwrap();
    sharded.set_balancer(false);
    let planned = config(&sim.uri(), "mlcheck", "shard_key = { _id = \"hashed\" }");
    let (code, report, err) = check_target(&planned).await;
    let s = &report["sharding"];
    assert_eq!(s["mongos"], true, "{report:#}\n{err}");
    assert_eq!(
        s["shards"],
        serde_json::json!(["shard0", "shard1"]),
        "{report:#}"
    );
    assert!(
        s["balancer"].as_str().unwrap().starts_with("off"),
        "{report:#}"
    );
    // The simulator's user-less server: privileges unknown, not refused.
    assert!(
        s["actions"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a[1].is_null()),
        "{report:#}"
    );
    // Sharded on { k: 1 } already, planned hashed _id: exit 78 naming both.
    let c = &s["collections"][0];
    assert_eq!(c["namespace"], "mlcheck.m");
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
    let same = config(&sim.uri(), "mlcheck", "shard_key = { k = 1 }");
    let (code, report, _) = check_target(&same).await;
    assert_eq!(code, Some(0), "{report:#}");
    let file = write_config(&same);
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["check-target", "--config"])
        .arg(&file.path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("shards         2 (shard0, shard1)")
            && text.contains("balancer       off")
            && text.contains("mlcheck.m: now { \"k\": 1 }, planned { k: 1 }"),
        "{text}"
    );
    sim.shutdown().await;
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
    let sim = cluster().await;
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
