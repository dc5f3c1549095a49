//! An independent client: the real `mongoload sim` binary started as a
//! separate process, checked by pymongo scripts (CRUD, aggregate, cursors;
//! SCRAM authentication over TLS; a replica set through a failover; cluster
//! time and a causally consistent read from a lagging secondary).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::certs::Certs;
use crate::common::{free_port, free_ports, spawn_sim};

fn pymongo_available() -> bool {
    Command::new("python3")
        .args(["-c", "import pymongo"])
        .status()
        .is_ok_and(|s| s.success())
}

/// False (after a loud notice) when pymongo is missing outside CI; in CI a
/// missing pymongo fails the test.
fn require_pymongo(test: &str) -> bool {
    if pymongo_available() {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "pymongo is not importable by python3 and CI is set: install it (pip install pymongo)"
        );
    }
    eprintln!("\n*** SKIPPED {test}: python3 cannot import pymongo (pip install pymongo) ***\n");
    false
}

/// Runs `tests/pymongo/SCRIPT ARGS…` and asserts it passed, printing `passed`.
fn run_script(script: &str, args: &[&str], passed: &str) {
    let path = format!("{}/tests/pymongo/{script}", env!("CARGO_MANIFEST_DIR"));
    let started = Instant::now();
    let out = Command::new("python3")
        .arg(&path)
        .args(args)
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "pymongo check {script} failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains(passed), "{stdout}");
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn pymongo_script_passes_against_the_sim_binary() {
    if !require_pymongo("sim_pymongo") {
        return;
    }
    let port = free_port().port();
    let mut sim = spawn_sim(port, &[]);
    run_script(
        "sim_check.py",
        &[&format!("mongodb://127.0.0.1:{port}/")],
        "pymongo check passed",
    );
    assert!(
        sim.0.try_wait().unwrap().is_none(),
        "the simulator is still running"
    );
}

/// SCRAM and TLS checked by an independent client: pymongo against
/// `mongoload sim --auth … --tls-cert … --tls-key …`, certificates made
/// at test time.
#[test]
fn pymongo_authenticates_over_tls_against_the_sim_binary() {
    if !require_pymongo("sim_pymongo (auth)") {
        return;
    }
    let certs = Certs::new("mongoload pymongo CA");
    let other = Certs::new("a CA pymongo must not trust");
    let (user, password) = ("pyuser", "py:p@ss w0rd");
    let port = free_port().port();
    let mut sim = spawn_sim(
        port,
        &[
            "--auth",
            &format!("{user}:{password}"),
            "--tls-cert",
            &certs.cert.display().to_string(),
            "--tls-key",
            &certs.key.display().to_string(),
        ],
    );
    run_script(
        "auth_check.py",
        &[
            &format!("localhost:{port}"),
            user,
            password,
            &certs.ca.display().to_string(),
            &other.ca.display().to_string(),
        ],
        "pymongo auth check passed",
    );
    assert!(
        sim.0.try_wait().unwrap().is_none(),
        "the simulator is still running"
    );
}

/// Runs pymongo script `script` against a three-member simulator replica
/// set `rs0` started with `flags` besides.
fn replset_script(test: &str, flags: &[&str], script: &str, passed: &str) {
    if !require_pymongo(test) {
        return;
    }
    let mut args = vec!["--replset", "rs0", "--members", "3"];
    args.extend_from_slice(flags);
    let port = free_ports(3);
    let _sim = spawn_sim(port, &args);
    let seeds: Vec<String> = (0..3).map(|i| format!("127.0.0.1:{}", port + i)).collect();
    run_script(
        script,
        &[&format!("mongodb://{}/?replicaSet=rs0", seeds.join(","))],
        passed,
    );
}

#[test]
fn pymongo_follows_a_failover_of_the_sim_replica_set() {
    replset_script(
        "sim_pymongo (replica set)",
        &["--election", "300ms..600ms"],
        "replset_check.py",
        "pymongo replica-set check passed",
    );
}

#[test]
fn pymongo_reads_its_own_write_from_a_lagging_secondary_in_a_causal_session() {
    replset_script(
        "sim_pymongo (causal consistency)",
        &["--replication-lag", "500ms"],
        "causal_check.py",
        "pymongo causal consistency check passed",
    );
}
