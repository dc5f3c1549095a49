//! An independent client: the real `mongoload sim` binary started as a
//! separate process, checked by a pymongo script (CRUD, aggregate, cursors).

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

#[test]
fn pymongo_script_passes_against_the_sim_binary() {
    if !pymongo_available() {
        if std::env::var_os("CI").is_some() {
            panic!("pymongo is not importable by python3 and CI is set: install it (pip install pymongo)");
        }
        eprintln!(
            "\n*** SKIPPED sim_pymongo: python3 cannot import pymongo (pip install pymongo) ***\n"
        );
        return;
    }
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["sim", "--listen", &format!("127.0.0.1:{port}")])
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

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/pymongo/sim_check.py");
    let started = Instant::now();
    let out = Command::new("python3")
        .args([script, &format!("mongodb://127.0.0.1:{port}/")])
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "pymongo check failed ({:?}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("pymongo check passed"), "{stdout}");
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(
        sim.0.try_wait().unwrap().is_none(),
        "the simulator is still running"
    );
}
