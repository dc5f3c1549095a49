//! Runtime control end to end: the daemon in-process against the
//! simulator, commands through the real unix socket (the library client
//! and the `mongoload ctl` binary), effects read from the metrics.

use crate::common;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{eventually, metric, ops};
use mongoload::control::{client, Command as Request};
use mongoload::daemon::{self, Running};

const W: &str = "workload=\"w\"";

async fn send(socket: &Path, line: &str) -> serde_json::Value {
    let request: Request = line.parse().unwrap();
    client::request(socket, &request).await.unwrap()
}

async fn start(db: &common::TestDb, rate: f64, socket: &Path) -> Running {
    let text = common::config_text(db, rate, Some(socket));
    let config = common::parse(&text, Path::new("control-test.toml"));
    daemon::start(config).await.unwrap()
}

/// Operations per second over `window`.
async fn achieved(running: &Running, window: Duration) -> f64 {
    let before = ops(&running.metrics);
    tokio::time::sleep(window).await;
    (ops(&running.metrics) - before) / window.as_secs_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_resume_set_rate_scale_and_concurrency() {
    let sim = common::test_db().await;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let running = start(&sim, 200.0, &socket).await;
    let m = running.metrics.clone();
    assert_eq!(running.control_socket.as_deref(), Some(socket.as_path()));
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "socket mode {mode:o}");

    eventually("operations to flow", Duration::from_secs(20), || {
        ops(&m) > 50.0
    })
    .await;
    assert_eq!(metric(&m, "mongoload_target_rate", &[W]), 200.0);
    assert_eq!(metric(&m, "mongoload_paused", &[W]), 0.0);

    // Pause: the counter stops.
    let reply = send(&socket, "pause w").await;
    assert_eq!(reply["ok"], true, "{reply}");
    assert_eq!(reply["control"]["paused"], true);
    assert_eq!(reply["message"], "workload w: paused");
    eventually("target rate 0 while paused", Duration::from_secs(3), || {
        metric(&m, "mongoload_target_rate", &[W]) == 0.0
    })
    .await;
    assert_eq!(metric(&m, "mongoload_paused", &[W]), 1.0);
    tokio::time::sleep(Duration::from_millis(300)).await; // in-flight ops finish
    let frozen = ops(&m);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(ops(&m), frozen, "operations continued while paused");
    let status = send(&socket, "status").await;
    assert_eq!(
        status["workloads"][0]["stage"]["state"], "paused",
        "{status}"
    );
    assert_eq!(status["workloads"][0]["control"]["paused"], true);

    // Resume: it flows again at the scheduled rate, without a burst for
    // the paused second (no catching up on skipped tickets).
    send(&socket, "resume w").await;
    let rate = achieved(&running, Duration::from_secs(2)).await;
    assert!(
        (120.0..=260.0).contains(&rate),
        "after resume: {rate} ops/s"
    );
    assert_eq!(metric(&m, "mongoload_paused", &[W]), 0.0);

    // Set rate: the target gauge and the achieved rate follow.
    // Downwards, so a debug build on a loaded 2-core machine keeps up.
    let reply = send(&socket, "set-rate w 60").await;
    assert_eq!(reply["control"]["override"]["rate"], 60.0, "{reply}");
    eventually("target rate 60", Duration::from_secs(3), || {
        metric(&m, "mongoload_target_rate", &[W]) == 60.0
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rate = achieved(&running, Duration::from_secs(2)).await;
    let lag = metric(&m, "mongoload_schedule_lag_seconds", &[W]);
    assert!(
        (45.0..=75.0).contains(&rate),
        "at set-rate 60: {rate} ops/s (lag {lag}s)"
    );

    // Reset, then scale the schedule's 200/s by 1.5.
    send(&socket, "reset w").await;
    let reply = send(&socket, "scale w 1.5").await;
    assert_eq!(reply["control"]["scale"], 1.5);
    assert!(reply["control"]["override"]["rate"].is_null());
    eventually("target rate 300", Duration::from_secs(3), || {
        metric(&m, "mongoload_target_rate", &[W]) == 300.0
    })
    .await;

    // Closed loop on demand.
    send(&socket, "set-concurrency w 3").await;
    eventually("target concurrency 3", Duration::from_secs(3), || {
        metric(&m, "mongoload_target_concurrency", &[W]) == 3.0
            && metric(&m, "mongoload_target_rate", &[W]) == 0.0
    })
    .await;
    let before = ops(&m);
    eventually("closed-loop operations", Duration::from_secs(5), || {
        ops(&m) > before + 50.0
    })
    .await;

    // Refusals name the problem and change nothing.
    let reply = send(&socket, "pause nosuch").await;
    assert_eq!(reply["ok"], false);
    assert_eq!(reply["error"], "no workload \"nosuch\" (workloads: w)");

    running.stop();
    running.wait().await;
    assert!(!socket.exists(), "the socket file is removed at exit");
    sim.shutdown().await;
}

fn ctl(socket: &Path, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .arg("ctl")
        .arg("--socket")
        .arg(socket)
        .args(args)
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctl_subcommand_talks_to_the_socket() {
    let sim = common::test_db().await;
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("control.sock");
    let running = start(&sim, 100.0, &socket).await;
    let m = running.metrics.clone();
    eventually("operations to flow", Duration::from_secs(20), || {
        ops(&m) > 10.0
    })
    .await;

    let s = socket.clone();
    let out = tokio::task::spawn_blocking(move || ctl(&s, &["pause", "w"]))
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "workload w: paused\n");
    assert_eq!(metric(&m, "mongoload_paused", &[W]), 1.0);

    let s = socket.clone();
    let out = tokio::task::spawn_blocking(move || ctl(&s, &["status"]))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{out:?}");
    let row = text
        .lines()
        .find(|l| l.starts_with("w "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("paused") && row.contains("hold"), "{text}");

    let s = socket.clone();
    let out = tokio::task::spawn_blocking(move || ctl(&s, &["--json", "set-rate", "w", "250"]))
        .await
        .unwrap();
    let reply: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(reply["control"]["override"]["rate"], 250.0, "{reply}");

    // A refusal exits 1 with the reason on stderr.
    let s = socket.clone();
    let out = tokio::task::spawn_blocking(move || ctl(&s, &["resume", "nosuch"]))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no workload \"nosuch\""));

    // Bad arguments never reach the daemon.
    let s = socket.clone();
    let out = tokio::task::spawn_blocking(move || ctl(&s, &["scale", "w", "500"]))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("at most 100"),
        "{out:?}"
    );

    running.stop();
    running.wait().await;

    // No daemon: EX_UNAVAILABLE and a hint.
    let s = socket.clone();
    let out = tokio::task::spawn_blocking(move || ctl(&s, &["status"]))
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(69));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cannot connect"),
        "{out:?}"
    );
    sim.shutdown().await;
}
