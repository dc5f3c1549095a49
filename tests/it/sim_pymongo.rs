//! An independent client: the real `mongoload sim` binary started as a
//! separate process, checked by pymongo scripts (CRUD, aggregate, cursors;
//! SCRAM authentication over TLS; a replica set through a failover).

use crate::common::certs;

use certs::Certs;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the simulator process when the test ends, pass or fail.
struct Sim(Child);

impl Drop for Sim {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

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

/// Starts `mongoload sim --listen 127.0.0.1:PORT ARGS…` and waits for the
/// line saying it listens; returns it with its port.
fn start_sim(args: &[&str]) -> (Sim, u16) {
    start_sim_on(free_port(), args)
}

/// [`start_sim`] on a given port (a replica set's first member).
fn start_sim_on(port: u16, args: &[&str]) -> (Sim, u16) {
    let child = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["sim", "--listen", &format!("127.0.0.1:{port}")])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start mongoload sim");
    let mut sim = Sim(child);
    // Wait for the log line that says it listens.
    let stderr = sim.0.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("listening") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("mongoload sim logs that it listens");
    (sim, port)
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
    let (mut sim, port) = start_sim(&[]);
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
    let (mut sim, port) = start_sim(&[
        "--auth",
        &format!("{user}:{password}"),
        "--tls-cert",
        &certs.cert.display().to_string(),
        "--tls-key",
        &certs.key.display().to_string(),
    ]);
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

/// Three consecutive free loopback ports (bound to find them, then released).
fn free_ports3() -> u16 {
    loop {
        let first = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = first.local_addr().unwrap().port();
        let rest: Vec<TcpListener> = (1..3)
            .filter_map(|i| TcpListener::bind(("127.0.0.1", port.checked_add(i)?)).ok())
            .collect();
        if rest.len() == 2 {
            return port;
        }
    }
}

#[test]
fn pymongo_follows_a_failover_of_the_sim_replica_set() {
    if !require_pymongo("sim_pymongo (replica set)") {
        return;
    }
    let args = [
        "--replset",
        "rs0",
        "--members",
        "3",
        "--election",
        "300ms..600ms",
    ];
    let (_sim, port) = start_sim_on(free_ports3(), &args);
    let seeds: Vec<String> = (0..3).map(|i| format!("127.0.0.1:{}", port + i)).collect();
    run_script(
        "replset_check.py",
        &[&format!("mongodb://{}/?replicaSet=rs0", seeds.join(","))],
        "pymongo replica-set check passed",
    );
}
