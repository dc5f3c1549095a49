//! Live reload: a new config applied to a running daemon (in-process, and
//! through SIGHUP to the real binary) against the simulator. Counters
//! continue; an invalid config changes nothing and says why.

use crate::common;

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{eventually, metric, ops};
use mongoload::daemon;

use mongoload::daemon::supervisor::ReloadError;

const W: &str = "workload=\"w\"";

/// A tracing writer into a shared buffer, to assert on log lines.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_applies_a_new_rate_and_keeps_counting() {
    let sim = common::test_db().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mongoload.toml");
    let text = common::config_text(&sim, 100.0, None);
    std::fs::write(&path, &text).unwrap();
    let running = daemon::start(common::parse(&text, &path)).await.unwrap();
    let m = running.metrics.clone();
    eventually("operations to flow", Duration::from_secs(20), || {
        ops(&m) > 30.0
    })
    .await;
    assert_eq!(metric(&m, "mongoload_target_rate", &[W]), 100.0);

    // A new rate and a second workload.
    let second = "\n[[workloads]]\nname = \"x\"\nkind = \"mixed\"\n[workloads.mixed]\ndoc_size = \"1KB\"\ninitial_docs = 10\ncollection = \"x\"\n[[workloads.stages]]\nconcurrency = 1\nduration = \"1h\"\n";
    let new_text = format!("{}{second}", text.replace("rate = 100", "rate = 40"));
    let before = ops(&m);
    let summary = running
        .reload(common::parse(&new_text, &path))
        .await
        .unwrap();
    assert_eq!(summary.restarted, vec!["w"]);
    assert_eq!(summary.started, vec!["x"]);
    eventually("target rate 40", Duration::from_secs(20), || {
        metric(&m, "mongoload_target_rate", &[W]) == 40.0
    })
    .await;
    eventually("workload x running", Duration::from_secs(20), || {
        metric(&m, "mongoload_operations_total", &["workload=\"x\""]) > 5.0
    })
    .await;
    // Counters continued from where they were.
    assert!(ops(&m) >= before, "counter reset: {} < {before}", ops(&m));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = ops(&m);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rate = (ops(&m) - start) / 2.0;
    assert!(
        (28.0..=52.0).contains(&rate),
        "after reload to 40/s: {rate} ops/s"
    );

    // Removing x stops it; its phase series goes, w is kept as is.
    let summary = running
        .reload(common::parse(&new_text.replace(second, ""), &path))
        .await
        .unwrap();
    assert_eq!(
        (summary.kept, summary.stopped),
        (vec!["w".to_string()], vec!["x".to_string()])
    );
    assert_eq!(metric(&m, "mongoload_phase_info", &["workload=\"x\""]), 0.0);
    assert_eq!(
        metric(&m, "mongoload_target_concurrency", &["workload=\"x\""]),
        0.0
    );

    running.stop();
    running.wait().await;
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_reload_keeps_the_plan_and_logs_why() {
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    // The reload logs from this test's own task.
    let _guard = tracing::subscriber::set_default(subscriber);

    let sim = common::test_db().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mongoload.toml");
    let text = common::config_text(&sim, 100.0, None);
    let running = daemon::start(common::parse(&text, &path)).await.unwrap();
    let m = running.metrics.clone();
    eventually("operations to flow", Duration::from_secs(20), || {
        ops(&m) > 20.0
    })
    .await;

    std::fs::write(&path, text.replace("rate = 100", "rate = -5")).unwrap();
    let err = running.reloader().reload_file(&path).await.unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ReloadError::Config(_)), "{err:?}");
    assert!(msg.contains(&path.display().to_string()), "{msg}");
    assert!(msg.contains("workloads[0].stages[0].rate"), "{msg}");
    let logged = logs.text();
    assert!(logged.contains("reload refused"), "{logged}");
    assert!(
        logged.contains("workloads[0].stages[0].rate: must be a positive number"),
        "{logged}"
    );
    assert!(logged.contains("the running plan goes on"), "{logged}");
    assert_eq!(
        metric(&m, "mongoload_config_reloads_total", &["result=\"error\""]),
        1.0
    );

    // A changed target is refused as a whole, naming the key.
    let moved = text.replace(&sim.uri(), "mongodb://127.0.0.1:1/");
    let err = running
        .reload(common::parse(&moved, &path))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "target.uri changed; restart mongoload to apply it"
    );

    // The old plan goes on.
    assert_eq!(metric(&m, "mongoload_target_rate", &[W]), 100.0);
    let before = ops(&m);
    eventually("operations to continue", Duration::from_secs(5), || {
        ops(&m) > before + 20.0
    })
    .await;

    running.stop();
    running.wait().await;
    sim.shutdown().await;
}

/// GET `path` on `addr`, the body.
async fn get(addr: &str, path: &str) -> Option<String> {
    let reply = common::get(addr.parse().ok()?, path).await.ok()?;
    Some(reply.body)
}

async fn stage_rate(addr: &str) -> Option<f64> {
    let body = get(addr, "/status").await?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    v["workloads"][0]["stage"]["rate"].as_f64()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_the_binary() {
    let sim = common::test_db().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mongoload.toml");
    let addr = common::free_port().to_string();
    let text = common::config_text(&sim, 100.0, None).replace("127.0.0.1:0", &addr);
    std::fs::write(&path, &text).unwrap();
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["run", "--config"])
        .arg(&path)
        .env_remove("NOTIFY_SOCKET")
        .env_remove("JOURNAL_STREAM")
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = child.id().unwrap().to_string();
    let hup = || {
        let ok = std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success();
        assert!(ok, "kill -HUP");
    };

    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while stage_rate(&addr).await != Some(100.0) {
        assert!(std::time::Instant::now() < deadline, "daemon did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    std::fs::write(&path, text.replace("rate = 100", "rate = 30")).unwrap();
    hup();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while stage_rate(&addr).await != Some(30.0) {
        assert!(std::time::Instant::now() < deadline, "reload not applied");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let metrics = get(&addr, "/metrics").await.unwrap();
    assert!(
        metrics.contains("mongoload_config_reloads_total{result=\"ok\"} 1"),
        "{metrics}"
    );

    std::fs::write(&path, "this is not toml = = =").unwrap();
    hup();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let metrics = get(&addr, "/metrics").await.unwrap_or_default();
        if metrics.contains("mongoload_config_reloads_total{result=\"error\"} 1") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "invalid reload not counted"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(stage_rate(&addr).await, Some(30.0), "the plan changed");

    let ok = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success();
    assert!(ok);
    let out = tokio::time::timeout(Duration::from_secs(20), child.wait_with_output())
        .await
        .expect("daemon stops on SIGTERM")
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("reloaded"), "{stderr}");
    assert!(stderr.contains("restarted w"), "{stderr}");
    assert!(stderr.contains("reload refused"), "{stderr}");
    assert!(stderr.contains(&path.display().to_string()), "{stderr}");
    sim.shutdown().await;
}

/// The current stage of the first workload in `/status`: (index, name, rate).
async fn stage_of(addr: &str) -> Option<(Option<u64>, String, f64)> {
    let body = get(addr, "/status").await?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let s = &v["workloads"][0]["stage"];
    Some((
        s["index"].as_u64(),
        s["name"].as_str()?.to_string(),
        s["rate"].as_f64()?,
    ))
}

/// A workload changed only in stages after the one it runs keeps its
/// position (no drain, no prepare again, no return to stage 0) and runs
/// the edited stages when it gets there; a change to the current stage
/// starts it again from the first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_of_later_stages_keeps_the_position() {
    let sim = common::test_db().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mongoload.toml");
    let stages = |second: u32, third: &str| {
        format!(
            "name = \"first\"\nrate = 20\nduration = \"5s\"\n\
             [[workloads.stages]]\nname = \"second\"\nrate = {second}\nduration = \"3s\"\n{third}"
        )
    };
    let base = common::config_text(&sim, 20.0, None);
    let hold = "name = \"hold\"\nrate = 20\nduration = \"1h\"\n";
    assert!(base.contains(hold));
    let text = base.replace(hold, &stages(20, ""));
    let running = daemon::start(common::parse(&text, &path)).await.unwrap();
    let addr = running.http_addr.to_string();
    common::wait_for("stage 0", Duration::from_secs(20), || async {
        stage_of(&addr).await.filter(|s| s.0 == Some(0))
    })
    .await;

    // The second stage edited, a third added, while the first runs.
    let third = "[[workloads.stages]]\nname = \"third\"\nrate = 30\nduration = \"1h\"\n";
    let summary = running
        .reload(common::parse(
            &base.replace(hold, &stages(40, third)),
            &path,
        ))
        .await
        .unwrap();
    assert_eq!(summary.rescheduled, vec!["w"]);
    assert!(summary.restarted.is_empty(), "{summary:?}");
    assert_eq!(summary.to_string(), "rescheduled w");
    let now = stage_of(&addr).await.unwrap();
    assert_eq!((now.0, now.1.as_str()), (Some(0), "first"), "position kept");

    for (index, name, rate) in [(1, "second", 40.0), (2, "third", 30.0)] {
        common::wait_for(name, Duration::from_secs(10), || async {
            stage_of(&addr)
                .await
                .filter(|s| *s == (Some(index), name.to_string(), rate))
        })
        .await;
    }

    // The current stage changed: restarted from the first stage.
    let text = base.replace(hold, &stages(40, &third.replace("rate = 30", "rate = 35")));
    let summary = running.reload(common::parse(&text, &path)).await.unwrap();
    assert_eq!(summary.restarted, vec!["w"]);
    common::wait_for("back at stage 0", Duration::from_secs(20), || async {
        stage_of(&addr).await.filter(|s| s.0 == Some(0))
    })
    .await;

    running.stop();
    running.wait().await;
    sim.shutdown().await;
}
