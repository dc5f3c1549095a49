//! `mongoload capture --log` as a user runs it: on a real mongod log
//! (tests/fixtures/mongod-log/hatchet-sample-slice.log: lines 12001–12250
//! of `logs/sample-mongod.log.gz` in https://github.com/simagix/hatchet,
//! Apache License 2.0, commit c109eedfbb6b466be2ea23850796cfc9c80d2234;
//! see PROVENANCE.md there), then `mongoload check-config` on its output;
//! and the captured configs run against the simulator through the real
//! driver, every captured shape accepted, in the captured proportions.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mongoload::config::{self, SecretUri, StageConfig};
use mongoload::daemon;

use crate::common::{self, sum};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mongod-log")
        .join(name)
}

#[test]
fn capture_writes_a_config_check_config_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("captured.toml");
    let cap = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["capture", "--scale", "2", "--log"])
        .arg(fixture("hatchet-sample-slice.log"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&cap.stderr);
    assert!(cap.status.success(), "{stderr}");
    // The summary names what was skipped, with counts.
    assert!(
        stderr.contains("unsupported: command listIndexes"),
        "{stderr}"
    );
    assert!(stderr.contains("129 operations on testdb"), "{stderr}");
    let config = std::fs::read_to_string(&out).unwrap();
    for op in ["\"find\"", "\"update\"", "\"delete\"", "\"insert\""] {
        assert!(config.contains(&format!("op = {op}")), "{config}");
    }
    let check = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["check-config", "--config"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}\n{config}",
        String::from_utf8_lossy(&check.stderr)
    );
    let plan = String::from_utf8_lossy(&check.stdout);
    assert!(plan.contains("__examples"), "{plan}");

    // A file that is not a mongod log: an error naming it, exit 2.
    let bad = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["capture", "--log"])
        .arg(dir.path().join("missing.log"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("missing.log"));
}

/// `mongoload capture --log FIXTURE`'s config text.
fn capture(fixture_name: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["capture", "--log"])
        .arg(fixture(fixture_name))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn captured_shapes_run_against_the_simulator_in_their_proportions() {
    const OPS: u64 = 1600;
    let sim = common::test_db().await;
    for (i, name) in ["hatchet-sample-slice.log", "hatchet-sample-rare.log"]
        .into_iter()
        .enumerate()
    {
        let text = capture(name);
        let mut cfg = config::parse_with_env(&text, Path::new("captured.toml"), std::iter::empty())
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        cfg.target.uri = Some(SecretUri::new(sim.uri()));
        cfg.target.database = sim.database(&format!("captured{i}"));
        cfg.http.listen = "127.0.0.1:0".parse().unwrap();
        cfg.run.shutdown_grace = Duration::from_secs(20);
        let mut weights = Vec::new();
        for w in &mut cfg.workloads {
            let config::KindConfig::Custom(c) = &mut w.kind else {
                panic!("{text}")
            };
            c.initial_docs = 200;
            weights = c
                .operations
                .iter()
                .map(|o| (o.label().to_owned(), o.weight))
                .collect::<Vec<_>>();
            w.stages = vec![serde_json::from_value::<StageConfig>(serde_json::json!({
                "name": "captured", "rate": 400.0, "operations": OPS
            }))
            .unwrap()];
        }
        assert_eq!(cfg.workloads.len(), 1, "{text}");
        cfg.validate()
            .expect("the captured config, pointed at the simulator");
        let workload = cfg.workloads[0].name.clone();
        let running = daemon::start(cfg).await.expect("daemon starts");
        let metrics = running.metrics.clone();
        let summary = tokio::time::timeout(Duration::from_secs(120), running.wait())
            .await
            .expect("the run ends");
        let page = metrics.encode().unwrap();
        let w = &summary.workloads[0];
        assert_eq!(w.errors, 0, "{name}: {w:?}\n{page}");
        assert_eq!(w.ok, OPS, "{name}: {w:?}");
        let total_weight: f64 = weights.iter().map(|(_, w)| w).sum();
        let mut counted = 0;
        for (op, weight) in &weights {
            let n = sum(
                &page,
                "mongoload_operations_total",
                &[("workload", &workload), ("op", op), ("outcome", "ok")],
            ) as u64;
            counted += n;
            let share = n as f64 / OPS as f64;
            let want = weight / total_weight;
            // 1600 draws: one standard deviation is at most 1.25 points.
            assert!(
                (share - want).abs() < 0.05,
                "{name}: {op} ran {share:.3} of the operations, captured {want:.3}"
            );
        }
        assert_eq!(counted, OPS, "the operations sum over op");
    }
    sim.shutdown().await;
}

/// The simulator records like mongod: `profile` answers with the settings
/// before, `system.profile` holds the documented fields and the driver
/// reads it with `find`, and `--log` gets "Slow query" entries that
/// `capture`'s own log reader takes (the same reader the real fixtures
/// pass through).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_profiles_and_logs_like_mongod() {
    use futures::TryStreamExt;
    use mongodb::bson::{doc, Document};
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("mongod.log");
    let sim = common::sim_with(mongoload::sim::SimConfig {
        profile: mongoload::sim::ProfileConfig {
            slowms: 0,
            log: Some(log.clone()),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let uri = format!("{}?appName=shop", sim.uri());
    let client = common::driver_client(&uri, false, Duration::from_secs(5)).await;
    let db = client.database("shop");
    let reply = db.run_command(doc! { "profile": 2 }).await.unwrap();
    assert_eq!(reply.get_i32("was").unwrap(), 0);
    assert_eq!(reply.get_i64("slowms").unwrap(), 0);
    assert_eq!(reply.get_f64("sampleRate").unwrap(), 1.0);
    assert_eq!(reply.get_f64("ok").unwrap(), 1.0);
    let err = db.run_command(doc! { "profile": 5 }).await.unwrap_err();
    assert_eq!(common::error_code(&err), Some(2));
    let orders = db.collection::<Document>("orders");
    orders
        .insert_one(doc! { "_id": 1, "total": 5 })
        .await
        .unwrap();
    orders
        .update_one(doc! { "_id": 1 }, doc! { "$inc": { "total": 1 } })
        .await
        .unwrap();
    let found: Vec<Document> = orders
        .find(doc! { "total": { "$gte": 2 } })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found.len(), 1);
    let profile: Vec<Document> = db
        .collection::<Document>("system.profile")
        .find(doc! { "ns": "shop.orders" })
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let ops: Vec<&str> = profile.iter().map(|d| d.get_str("op").unwrap()).collect();
    assert_eq!(ops, ["insert", "update", "query"], "{profile:#?}");
    let q = &profile[2];
    for field in [
        "op",
        "ns",
        "command",
        "keysExamined",
        "docsExamined",
        "nreturned",
        "millis",
        "ts",
        "appName",
        "planSummary",
        "client",
    ] {
        assert!(q.contains_key(field), "{field} missing from {q:#?}");
    }
    assert_eq!(q.get_str("appName").unwrap(), "shop");
    assert_eq!(q.get_str("planSummary").unwrap(), "COLLSCAN");
    assert_eq!(q.get_i64("docsExamined").unwrap(), 1);
    assert_eq!(q.get_i64("nreturned").unwrap(), 1);
    assert_eq!(q.get_str("client").unwrap(), "127.0.0.1");
    assert_eq!(
        profile[1].get_document("command").unwrap(),
        &doc! { "q": { "_id": 1 }, "u": { "$inc": { "total": 1 } }, "multi": false, "upsert": false }
    );
    assert_eq!(profile[1].get_str("planSummary").unwrap(), "IDHACK");
    // The insert is recorded without its documents, as mongod does.
    assert!(!profile[0]
        .get_document("command")
        .unwrap()
        .contains_key("documents"));

    // The log: every operation at or above slowms (0 here), one JSON
    // document per line, read by capture's parser.
    let text = std::fs::read_to_string(&log).unwrap();
    let mut seen = Vec::new();
    for line in text.lines() {
        match mongoload::capture::log::parse_line(line) {
            mongoload::capture::log::Line::Slow(e) if e.ns == "shop.orders" => {
                assert_eq!(e.app_name.as_deref(), Some("shop"));
                seen.push(e.kind.clone());
            }
            mongoload::capture::log::Line::Bad(why) => panic!("{why}: {line}"),
            _ => {}
        }
    }
    assert_eq!(seen, ["command", "update", "command"], "{text}");
}

/// `capture --profile` changes no profiling level unless told; with
/// `--profile-for` it profiles the window at level 2 and puts each
/// database's old level back, and reads only that window.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capture_profile_for_restores_the_level_it_found() {
    use mongodb::bson::{doc, Document};
    let sim = common::sim().await;
    let uri = format!("{}?appName=shop-api", sim.uri());
    let client = common::driver_client(&uri, false, Duration::from_secs(5)).await;
    let db = client.database("shop");
    db.run_command(doc! { "profile": 1, "slowms": 50 })
        .await
        .unwrap();
    let orders = db.collection::<Document>("orders");
    for i in 0..20 {
        orders.insert_one(doc! { "_id": i, "n": i }).await.unwrap();
    }
    let capture = tokio::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args([
            "capture",
            "--profile",
            "shop",
            "--profile-for",
            "2s",
            "--uri",
        ])
        .arg(sim.uri())
        .env_remove("MONGOLOAD_URI")
        .output();
    let traffic = async {
        // Traffic during the window, once capture has set level 2.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let r = db.run_command(doc! { "profile": -1 }).await.unwrap();
            if r.get_i32("was").unwrap() == 2 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "capture sets level 2"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for i in 0..50 {
            orders.find_one(doc! { "_id": i % 20 }).await.unwrap();
        }
    };
    let (out, ()) = tokio::join!(capture, traffic);
    let out = out.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let config = String::from_utf8_lossy(&out.stdout);
    // The window's finds only: the inserts came before it.
    assert!(config.contains("op = \"find\""), "{config}");
    assert!(!config.contains("op = \"insert\""), "{config}");
    assert!(config.contains("weight = 50"), "{config}");
    let r = db.run_command(doc! { "profile": -1 }).await.unwrap();
    assert_eq!(r.get_i32("was").unwrap(), 1, "the level capture found");
    assert_eq!(r.get_i64("slowms").unwrap(), 50);

    // Without --profile-for, reading changes nothing.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["capture", "--profile", "shop", "--uri"])
        .arg(sim.uri())
        .env_remove("MONGOLOAD_URI")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = db.run_command(doc! { "profile": -1 }).await.unwrap();
    assert_eq!(r.get_i32("was").unwrap(), 1);

    // No deployment named: a usage error (exit 2) saying what to give.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["capture", "--profile", "shop"])
        .env_remove("MONGOLOAD_URI")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--uri"));
}
