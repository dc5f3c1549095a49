//! `mongoload check-target`, the binary against the simulator over TCP:
//! a ready deployment (human and JSON output), a wrong password (77), a
//! refused privilege (77), nothing listening (69), an untrusted TLS
//! certificate (69, named), a config error (78), a replica set found from
//! one seed (members and primary, before and after a failover); the
//! scratch collection never stays behind and the password is in no output.

use crate::common;
use crate::common::certs;

use std::path::Path;
use std::process::{Command, Output};

use certs::Certs;
use common::*;
use mongodb::bson::{doc, Document};
use mongoload::sim::{AuthUser, ErrorFault, FaultConfig, SimConfig, SimHandle};

const USER: &str = "checker";
const PASSWORD: &str = "ch3ck-p4ss";

async fn sim_with(faults: FaultConfig, certs: Option<&Certs>) -> SimHandle {
    common::sim_with(SimConfig {
        auth: Some(AuthUser {
            user: USER.into(),
            password: PASSWORD.into(),
        }),
        tls: certs.map(Certs::tls_files),
        faults,
        ..Default::default()
    })
    .await
}

/// A config with two workloads whose URI is in `uri_file`.
fn config(uri: &str) -> ConfigFile {
    config_in(uri, "ctdb")
}

/// [`config`] with the database named.
fn config_in(uri: &str, database: &str) -> ConfigFile {
    let file = write_config("");
    let uri_path = file.dir.path().join("uri");
    std::fs::write(&uri_path, format!("{uri}\n")).unwrap();
    let toml = format!(
        r#"[target]
uri_file = "{}"
database = "{database}"
server_selection_timeout = "2s"
operation_timeout = "5s"

[[workloads]]
name = "mix"
kind = "mixed"
[workloads.mixed]
doc_size = "1KB"
initial_docs = 500
collection = "m"
[[workloads.stages]]
rate = 10
duration = "10s"

[[workloads]]
name = "sb"
kind = "sysbench"
[workloads.sysbench]
collections = 2
docs_per_collection = 100
[[workloads.stages]]
concurrency = 2
duration = "10s"
"#,
        uri_path.display()
    );
    std::fs::write(&file.path, toml).unwrap();
    file
}

fn check_target(path: &Path, json: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mongoload"));
    cmd.args(["check-target", "--config"])
        .arg(path)
        .env_remove("MONGOLOAD_CONFIG");
    if json {
        cmd.arg("--json");
    }
    // The binary blocks; the simulator runs on the test's runtime threads.
    cmd.output().expect("run mongoload check-target")
}

async fn run(path: &Path, json: bool) -> (Option<i32>, String, String) {
    let path = path.to_path_buf();
    let out = tokio::task::spawn_blocking(move || check_target(&path, json))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        !stdout.contains(PASSWORD) && !stderr.contains(PASSWORD),
        "{stdout}{stderr}"
    );
    (out.status.code(), stdout, stderr)
}

fn uri(sim: &SimHandle, password: &str) -> String {
    format!("mongodb://{USER}:{password}@{}/?w=majority", sim.addr())
}

/// The collections of `ctdb` as the simulator has them.
async fn collections(sim: &SimHandle) -> Vec<String> {
    let client = mongodb::Client::with_uri_str(uri(sim, PASSWORD))
        .await
        .unwrap();
    let names = client
        .database("ctdb")
        .list_collection_names()
        .await
        .unwrap();
    client.shutdown().immediate(true).await;
    names
}

/// What any deployment must answer for the plan to run (the test that
/// `MONGOLOAD_TEST_URI` points at a real one): ready, readWrite enough,
/// the prepare plan counted, the scratch collection gone afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_test_deployment_is_ready_for_the_plan() {
    let db = test_db().await;
    let database = db.database("ctdb");
    let file = config_in(&db.uri(), &database);
    let (code, stdout, stderr) = run(&file.path, true).await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(v["verdict"], "ready", "{v}");
    assert_eq!(v["target"]["database"], database.as_str());
    assert_eq!(v["reachable"]["status"], "ok");
    assert!(!v["server_version"].as_str().unwrap().is_empty(), "{v}");
    let kind = v["topology"]["kind"].as_str().unwrap();
    assert!(
        ["standalone", "replica_set", "sharded"].contains(&kind),
        "{kind}"
    );
    assert_eq!(v["privileges"]["status"], "ok", "{v}");
    assert_eq!(v["privileges"]["steps"].as_array().unwrap().len(), 8, "{v}");
    assert_eq!(v["prepare"][0]["documents"], 500);
    assert_eq!(v["prepare"][1]["documents"], 200);
    let left = db
        .client()
        .await
        .database(&database)
        .list_collection_names()
        .await
        .unwrap();
    assert!(
        left.is_empty(),
        "the scratch collection is dropped: {left:?}"
    );
    db.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ready_deployment_exits_0_with_the_whole_report() {
    let sim = sim_with(FaultConfig::default(), None).await;
    let file = config(&uri(&sim, PASSWORD));
    let (code, stdout, stderr) = run(&file.path, false).await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let addr = sim.addr();
    let lines: Vec<&str> = stdout.lines().collect();
    let expect = [
        format!("  config         {}", file.path.display()),
        format!("  target         mongodb://{USER}:***@{addr}/?w=majority (database ctdb)"),
        "  reachable      yes (".to_owned(),
        format!("  authentication ok: user {USER} (authSource admin, negotiated; server offers SCRAM-SHA-1, SCRAM-SHA-256); roles: root@admin"),
        "  server         7.0.0-mongoload-sim".to_owned(),
        "  topology       standalone".to_owned(),
        "  write concern  w=majority (uri)".to_owned(),
        "  readWrite      ok: create, insert, find, update, delete, createIndexes, dropIndexes, drop in ctdb.mongoload_check_target_".to_owned(),
        "  prepare        mix (mixed): 500 documents, ≈ 500.0 KiB, 1 index in ctdb.m (0 already there)".to_owned(),
        "                 sb (sysbench): 200 documents, ≈ ".to_owned(),
        "ready (exit 0)".to_owned(),
    ];
    assert_eq!(lines.len(), expect.len(), "{stdout}");
    for (line, want) in lines.iter().zip(&expect) {
        assert!(
            line.starts_with(want.as_str()),
            "{line:?} should start with {want:?}:\n{stdout}"
        );
    }
    assert!(
        lines[9].ends_with(
            "2 indexes in ctdb.sbtest1 (0 already there), ctdb.sbtest2 (0 already there)"
        ),
        "{stdout}"
    );
    assert!(
        collections(&sim).await.is_empty(),
        "the scratch collection is dropped"
    );

    // Documents already loaded show up.
    let client = mongodb::Client::with_uri_str(uri(&sim, PASSWORD))
        .await
        .unwrap();
    let m = client.database("ctdb").collection::<Document>("m");
    m.insert_many((0..7).map(|i| doc! {"_id": i as i64}))
        .await
        .unwrap();
    client.shutdown().immediate(true).await;

    let (code, stdout, _) = run(&file.path, true).await;
    assert_eq!(code, Some(0), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(v["ready"], true);
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["verdict"], "ready");
    assert_eq!(v["target"]["database"], "ctdb");
    assert_eq!(v["target"]["hosts"][0], addr.to_string());
    assert_eq!(v["target"]["tls"], false);
    assert_eq!(v["reachable"]["status"], "ok");
    assert!(v["reachable"]["round_trip_ms"].as_f64().unwrap() > 0.0);
    assert_eq!(v["authentication"]["status"], "ok");
    assert_eq!(v["authentication"]["user"], USER);
    assert_eq!(v["authentication"]["source"], "admin");
    assert_eq!(v["authentication"]["roles"][0], "root@admin");
    assert_eq!(v["server_version"], "7.0.0-mongoload-sim");
    assert_eq!(v["topology"]["kind"], "standalone");
    assert_eq!(v["write_concern"]["source"], "uri");
    assert_eq!(v["write_concern"]["effective"], "w=majority");
    assert_eq!(v["privileges"]["status"], "ok");
    let steps: Vec<&str> = v["privileges"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        [
            "create",
            "insert",
            "find",
            "update",
            "delete",
            "createIndexes",
            "dropIndexes",
            "drop"
        ]
    );
    let mix = &v["prepare"][0];
    assert_eq!(mix["workload"], "mix");
    assert_eq!(mix["kind"], "mixed");
    assert_eq!(mix["documents"], 500);
    assert_eq!(mix["bytes"], 500 * 1024);
    assert_eq!(mix["indexes"], 1);
    assert_eq!(mix["collections"][0]["name"], "m");
    assert_eq!(mix["collections"][0]["present"], 7);
    assert_eq!(v["prepare"][1]["documents"], 200);
    assert_eq!(v["prepare"][1]["collections"].as_array().unwrap().len(), 2);
    assert_eq!(collections(&sim).await, ["m"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_exits_77_naming_the_user() {
    let sim = sim_with(FaultConfig::default(), None).await;
    let file = config(&uri(&sim, "not-the-password"));
    let (code, stdout, _) = run(&file.path, false).await;
    assert_eq!(code, Some(77), "{stdout}");
    assert!(
        stdout.contains(&format!("  authentication REFUSED: user {USER} (authSource admin, negotiated): SCRAM failure: Authentication failed.\n")),
        "{stdout}"
    );
    assert!(stdout.contains("  reachable      yes\n"), "{stdout}");
    assert!(stdout.contains("  readWrite      skipped\n"), "{stdout}");
    assert!(
        stdout.ends_with(&format!(
            "authentication refused for user '{USER}' (exit 77)\n"
        )),
        "{stdout}"
    );
    assert!(!stdout.contains("not-the-password"), "{stdout}");

    let (code, stdout, _) = run(&file.path, true).await;
    assert_eq!(code, Some(77));
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (v["ready"].as_bool(), v["exit_code"].as_u64()),
        (Some(false), Some(77))
    );
    assert_eq!(v["authentication"]["status"], "refused");
    assert!(v["privileges"].is_null());
}

/// A user without readWrite on the database: the simulator answers
/// `create` with 13 Unauthorized, as MongoDB does for such a user.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_privilege_exits_77() {
    let faults = FaultConfig {
        error: Some(ErrorFault {
            rate: 1.0,
            code: 13,
            commands: vec!["create".into()],
        }),
        ..Default::default()
    };
    let sim = sim_with(faults, None).await;
    let file = config(&uri(&sim, PASSWORD));
    let (code, stdout, _) = run(&file.path, false).await;
    assert_eq!(code, Some(77), "{stdout}");
    assert!(
        stdout.contains("  readWrite      REFUSED at create in ctdb.mongoload_check_target_"),
        "{stdout}"
    );
    assert!(stdout.contains("Unauthorized (13)"), "{stdout}");
    assert!(
        stdout.ends_with(
            "privilege refused: create (readWrite on the database is needed) (exit 77)\n"
        ),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_listening_exits_69() {
    let addr = free_port();
    let file = config(&format!("mongodb://{USER}:{PASSWORD}@{addr}/"));
    let (code, stdout, _) = run(&file.path, false).await;
    assert_eq!(code, Some(69), "{stdout}");
    assert!(
        stdout.contains("  reachable      NO: connection refused"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("  authentication not tried: user {USER}")),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_is_reported_and_an_untrusted_certificate_is_named() {
    let certs = Certs::new("check-target CA");
    let sim = sim_with(FaultConfig::default(), Some(&certs)).await;
    let port = sim.addr().port();
    let good = config(&format!(
        "mongodb://{USER}:{PASSWORD}@localhost:{port}/?tls=true&tlsCAFile={}",
        certs.ca.display()
    ));
    let (code, stdout, _) = run(&good.path, false).await;
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("(database ctdb, TLS)"), "{stdout}");

    let other = Certs::new("not the signer");
    let bad = config(&format!(
        "mongodb://{USER}:{PASSWORD}@localhost:{port}/?tls=true&tlsCAFile={}",
        other.ca.display()
    ));
    let (code, stdout, _) = run(&bad.path, false).await;
    assert_eq!(code, Some(69), "{stdout}");
    assert!(
        stdout.contains("  reachable      NO: TLS handshake failed: invalid peer certificate: UnknownIssuer; the server's certificate is not signed by a CA this host trusts: set tlsCAFile to the CA that signed it\n"),
        "{stdout}"
    );

    // Plain TCP to a TLS-only server.
    let plain = config(&format!("mongodb://{USER}:{PASSWORD}@localhost:{port}/"));
    let (code, stdout, _) = run(&plain.path, false).await;
    assert_eq!(code, Some(69), "{stdout}");
    assert!(
        stdout.contains("does it require TLS? then add tls=true"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_error_exits_78() {
    let file = config("mongodb://h/");
    std::fs::remove_file(file.dir.path().join("uri")).unwrap();
    let (code, stdout, stderr) = run(&file.path, false).await;
    assert_eq!(code, Some(78), "{stdout}{stderr}");
    assert!(stderr.contains("cannot read uri_file"), "{stderr}");
    let (code, stdout, _) = run(&file.path, true).await;
    assert_eq!(code, Some(78));
    let v: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        (v["ready"].as_bool(), v["exit_code"].as_u64()),
        (Some(false), Some(78))
    );
}

/// A replica set found from a seed list: the topology line names the set,
/// its members and its primary, also after a failover moved the primary.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_is_reported_with_its_members_and_primary() {
    let mut set = mongoload::sim::ReplSetConfig::new("rs0", 3);
    set.election = mongoload::sim::ElectionTime::fixed(std::time::Duration::from_millis(200));
    let sim = mongoload::sim::start_replset(
        SimConfig {
            auth: Some(AuthUser {
                user: USER.into(),
                password: PASSWORD.into(),
            }),
            ..Default::default()
        },
        set,
    )
    .await
    .expect("the replica set starts");
    let rs = sim.replset().unwrap().clone();
    let hosts = rs.hosts();
    // Seeded from the last member only: the driver must discover the rest.
    let seed = format!("mongodb://{USER}:{PASSWORD}@{}/?replicaSet=rs0", hosts[2]);
    let file = config(&seed);

    let (code, stdout, stderr) = run(&file.path, false).await;
    assert_eq!(code, Some(0), "{stdout}{stderr}");
    let want = format!(
        "  topology       replica set rs0 (3 members: {}; primary {}; answered by ",
        hosts.join(", "),
        hosts[0]
    );
    assert!(
        stdout.lines().any(|l| l.starts_with(&want)),
        "want {want:?} in:\n{stdout}"
    );

    rs.step_down().expect("a primary to step down");
    let primary = rs
        .wait_for_primary(std::time::Duration::from_secs(10))
        .await
        .expect("a new primary");
    assert_ne!(primary, 0);
    let (code, stdout, _) = run(&file.path, true).await;
    assert_eq!(code, Some(0), "{stdout}");
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("one JSON object");
    assert_eq!(v["topology"]["kind"], "replica_set");
    assert_eq!(v["topology"]["set_name"], "rs0");
    assert_eq!(v["topology"]["members"].as_array().unwrap().len(), 3);
    assert_eq!(v["topology"]["primary"], hosts[primary].as_str());
    assert_eq!(v["privileges"]["status"], "ok", "{stdout}");
}
