//! Credentials and TLS end to end: the simulator under `--auth` and
//! `--tls-cert/--tls-key`, the official driver over TCP (SCRAM-SHA-256,
//! SCRAM-SHA-1, speculative authentication, wrong passwords, commands
//! before authentication, trusted and untrusted certificates), the daemon
//! binary with the password in `uri_file`, and pymongo as an independent
//! SCRAM and TLS client.

use crate::common;
use crate::common::certs;

use std::net::SocketAddr;
use std::process::Command;

use std::time::Duration;

use certs::Certs;
use common::*;
use mongodb::bson::{doc, Document};
use mongodb::options::ClientOptions;
use mongodb::Client;
use mongoload::error_kind::ErrorKind;
use mongoload::sim::{AuthUser, SimConfig, SimHandle};

/// A name found nowhere else in the logs, so lines naming it can be counted.
const USER: &str = "mlrunner";
/// Characters a URI must percent-encode, so the tests cover the decoding too.
const PASSWORD: &str = "s3cr:t@pw";
const PASSWORD_ENCODED: &str = "s3cr%3At%40pw";

async fn sim_with(auth: bool, certs: Option<&Certs>) -> SimHandle {
    common::sim_with(SimConfig {
        auth: auth.then(|| AuthUser {
            user: USER.into(),
            password: PASSWORD.into(),
        }),
        tls: certs.map(Certs::tls_files),
        ..Default::default()
    })
    .await
}

async fn client(uri: &str) -> Client {
    let mut options = ClientOptions::parse(uri).await.expect("a valid URI");
    options.server_selection_timeout = Some(Duration::from_secs(5));
    options.connect_timeout = Some(Duration::from_secs(5));
    Client::with_options(options).expect("a client")
}

/// Inserts a document and reads it back through `uri`.
async fn round_trip(uri: &str) -> Result<(), mongodb::error::Error> {
    let client = client(uri).await;
    let coll = client.database("authtest").collection::<Document>("c");
    coll.insert_one(doc! {"uri": uri}).await?;
    let found = coll.find_one(doc! {"uri": uri}).await?;
    assert!(found.is_some(), "the document inserted through {uri}");
    client.shutdown().immediate(true).await;
    Ok(())
}

fn creds_uri(addr: SocketAddr, password: &str, query: &str) -> String {
    format!("mongodb://{USER}:{password}@{addr}/?{query}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_authenticates_with_each_scram_mechanism() {
    let sim = sim_with(true, None).await;
    let addr = sim.addr();
    // No mechanism: negotiated through saslSupportedMechs, with the first
    // round speculative in the handshake's hello.
    for query in [
        "",
        "authSource=admin",
        "authMechanism=SCRAM-SHA-256",
        "authMechanism=SCRAM-SHA-1",
    ] {
        let uri = creds_uri(addr, PASSWORD_ENCODED, query);
        round_trip(&uri)
            .await
            .unwrap_or_else(|e| panic!("{query:?}: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_credentials_fail_as_auth_and_no_credentials_are_unauthorized() {
    let sim = sim_with(true, None).await;
    let addr = sim.addr();
    for uri in [
        creds_uri(addr, "wrong", ""),
        creds_uri(addr, "wrong", "authMechanism=SCRAM-SHA-1"),
        format!("mongodb://nobody:{PASSWORD_ENCODED}@{addr}/"),
        // The user lives in admin, not in the database the URI names.
        format!("mongodb://{USER}:{PASSWORD_ENCODED}@{addr}/authtest"),
    ] {
        let e = round_trip(&uri).await.expect_err(&uri);
        assert_eq!(
            mongoload::error_kind::classify(&e),
            ErrorKind::Auth,
            "{uri}: {e}"
        );
        assert!(
            e.to_string().contains("Authentication failed"),
            "{uri}: {e}"
        );
    }

    // Without credentials the handshake and ping work; the rest is refused.
    let client = client(&format!("mongodb://{addr}/")).await;
    let db = client.database("authtest");
    db.run_command(doc! {"ping": 1})
        .await
        .expect("ping needs no auth");
    let e = db
        .collection::<Document>("c")
        .find_one(doc! {})
        .await
        .expect_err("find needs auth");
    assert_eq!(mongoload::error_kind::classify(&e), ErrorKind::Auth, "{e}");
    match *e.kind {
        mongodb::error::ErrorKind::Command(ref c) => {
            assert_eq!((c.code, c.code_name.as_str()), (13, "Unauthorized"));
            assert_eq!(c.message, "command find requires authentication");
        }
        ref other => panic!("a command error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_the_ca_file_works_and_an_untrusted_certificate_is_named() {
    let certs = Certs::new("mongoload test CA");
    let sim = sim_with(true, Some(&certs)).await;
    let addr = sim.addr();
    let ca = certs.ca.display();
    for host in ["localhost", "127.0.0.1"] {
        let uri = format!(
            "mongodb://{USER}:{PASSWORD_ENCODED}@{host}:{}/?tls=true&tlsCAFile={ca}",
            addr.port()
        );
        round_trip(&uri)
            .await
            .unwrap_or_else(|e| panic!("{uri}: {e}"));
    }

    // A CA the server's certificate does not chain to.
    let other = Certs::new("another CA");
    let uri = format!(
        "mongodb://{USER}:{PASSWORD_ENCODED}@localhost:{}/?tls=true&tlsCAFile={}&serverSelectionTimeoutMS=2000",
        addr.port(),
        other.ca.display()
    );
    let e = round_trip(&uri)
        .await
        .expect_err("an untrusted certificate");
    let text = e.to_string();
    assert!(
        text.contains("invalid peer certificate") && text.contains("UnknownIssuer"),
        "{text}"
    );

    // Plain TCP to a TLS server fails; it does not hang.
    let uri = format!("mongodb://{USER}:{PASSWORD_ENCODED}@{addr}/?serverSelectionTimeoutMS=2000");
    assert!(round_trip(&uri).await.is_err());
}

/// A config whose `target.uri_file` holds `uri`, HTTP on `http`.
fn uri_file_config(uri: &str, http: SocketAddr) -> ConfigFile {
    let toml = config_toml(
        "mongodb://placeholder/",
        "[[workloads.stages]]\nrate = 50\nduration = \"120s\"\n",
    )
    .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{http}\""));
    let file = write_config("");
    let uri_path = file.dir.path().join("uri");
    std::fs::write(&uri_path, format!("{uri}\n")).unwrap();
    let toml = toml.replace(
        "uri = \"mongodb://placeholder/\"",
        &format!("uri_file = \"{}\"", uri_path.display()),
    );
    std::fs::write(&file.path, toml).unwrap();
    file
}

/// Failures of class `kind`: of operations, and of prepare steps (which
/// are what fail first when the login is refused).
fn errors(page: &str, kind: &str) -> f64 {
    sum(page, "mongoload_errors_total", &[("kind", kind)])
        + sum(page, "mongoload_prepare_errors_total", &[("kind", kind)])
}

/// A wrong password: prepare steps fail under the `auth` class,
/// `mongoload_target_up` is 0, and the journal gets one line naming the
/// user — not one per retry — and never the password.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_password_is_one_log_line_naming_the_user() {
    let sim = sim_with(true, None).await;
    let http = free_port();
    let wrong = "WrongPassw0rd";
    let file = uri_file_config(&creds_uri(sim.addr(), wrong, ""), http);
    let (mut child, stderr_path) = spawn_run(&file, "debug");
    // Several prepare retries (backoff 0.5 s, 1 s, 2 s, …) and pings.
    let page = wait_metric(http, "auth errors", Duration::from_secs(30), |p| {
        errors(p, "auth") >= 4.0
    })
    .await;
    assert_eq!(
        sample(&page, "mongoload_target_up", &[]),
        Some(0.0),
        "target down"
    );
    assert_eq!(errors(&page, "other"), 0.0, "every failure has a class");
    assert!(!page.contains(wrong));
    let status = must_get(http, "/status").await.body;
    assert!(!status.contains(wrong), "{status}");

    let exit = terminate(&mut child).await;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert_eq!(exit.code(), Some(0), "{stderr}");
    assert!(!stderr.contains(wrong), "{stderr}");
    let naming: Vec<&str> = stderr.lines().filter(|l| l.contains(USER)).collect();
    assert_eq!(naming.len(), 1, "one line names the user:\n{stderr}");
    assert!(
        naming[0].contains("authentication failed for user 'mlrunner' (authSource admin"),
        "{}",
        naming[0]
    );
    assert!(
        !stderr.contains("deployment unreachable"),
        "a refused login is not an unreachable deployment:\n{stderr}"
    );
}

/// The documented production path: the password in `uri_file` (as systemd
/// `LoadCredential=` hands it over), TLS with `tlsCAFile`. The load runs,
/// and the password is in no output: the binary's stderr at debug level,
/// /metrics, /status, `check-config`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_password_in_uri_file_over_tls_works_and_never_shows() {
    let certs = Certs::new("mongoload daemon CA");
    let sim = sim_with(true, Some(&certs)).await;
    let http = free_port();
    let uri = format!(
        "mongodb://{USER}:{PASSWORD_ENCODED}@localhost:{}/?tls=true&tlsCAFile={}",
        sim.addr().port(),
        certs.ca.display()
    );
    let file = uri_file_config(&uri, http);
    let (mut child, stderr_path) = spawn_run(&file, "debug");
    let page = wait_metric(http, "operations", Duration::from_secs(30), |p| {
        sum(p, "mongoload_operations_total", &[("outcome", "ok")]) >= 50.0
    })
    .await;
    assert_eq!(sample(&page, "mongoload_target_up", &[]), Some(1.0));
    let status = must_get(http, "/status").await.body;

    let check_config = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["check-config", "--config"])
        .arg(&file.path)
        .env_remove("MONGOLOAD_CONFIG")
        .output()
        .expect("run check-config");
    assert!(check_config.status.success());

    let exit = terminate(&mut child).await;
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert_eq!(exit.code(), Some(0), "{stderr}");
    assert!(stderr.contains("deployment reachable"), "{stderr}");
    let outputs = [
        ("/metrics", page),
        ("/status", status),
        ("stderr", stderr),
        (
            "check-config",
            String::from_utf8_lossy(&check_config.stdout).into_owned(),
        ),
    ];
    for (what, text) in &outputs {
        for secret in [PASSWORD, PASSWORD_ENCODED, "s3cr"] {
            assert!(!text.contains(secret), "{what} shows {secret:?}:\n{text}");
        }
    }
}
