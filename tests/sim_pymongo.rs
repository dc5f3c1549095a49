//! An independent client: the real `mongoload sim` binary started as a
//! separate process, checked by pymongo scripts (CRUD, aggregate, cursors;
//! and a replica set through a failover).

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

/// Starts `mongoload sim --listen 127.0.0.1:PORT EXTRA…` and waits for
/// its "listening" log line; `None` (after saying so) when pymongo is
/// missing outside CI.
fn start_sim(port: u16, extra: &[&str]) -> Option<Sim> {
    if !pymongo_available() {
        if std::env::var_os("CI").is_some() {
            panic!("pymongo is not importable by python3 and CI is set: install it (pip install pymongo)");
        }
        eprintln!(
            "\n*** SKIPPED sim_pymongo: python3 cannot import pymongo (pip install pymongo) ***\n"
        );
        return None;
    }
    let listen = format!("127.0.0.1:{port}");
    let child = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["sim", "--listen", &listen])
        .args(extra)
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
    Some(sim)
}

/// Runs `tests/pymongo/SCRIPT URI` and checks it printed `passed`.
fn run_script(script: &str, uri: &str, passed: &str) {
    let script = format!("{}/tests/pymongo/{script}", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new("python3")
        .args([&script, uri])
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "pymongo check failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains(passed), "{stdout}");
}

#[test]
fn pymongo_script_passes_against_the_sim_binary() {
    let port = free_port();
    let Some(mut sim) = start_sim(port, &[]) else {
        return;
    };
    let started = Instant::now();
    run_script(
        "sim_check.py",
        &format!("mongodb://127.0.0.1:{port}/"),
        "pymongo check passed",
    );
    assert!(started.elapsed() < Duration::from_secs(30));
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
    let port = free_ports3();
    let args = [
        "--replset",
        "rs0",
        "--members",
        "3",
        "--election",
        "300ms..600ms",
    ];
    let Some(_sim) = start_sim(port, &args) else {
        return;
    };
    let seeds: Vec<String> = (0..3).map(|i| format!("127.0.0.1:{}", port + i)).collect();
    run_script(
        "replset_check.py",
        &format!("mongodb://{}/?replicaSet=rs0", seeds.join(",")),
        "pymongo replica-set check passed",
    );
}
