//! The sd_notify protocol as systemd sees it: the real `mongoload run`
//! binary with NOTIFY_SOCKET pointing at this test's datagram socket and
//! WATCHDOG_USEC=1s, against the simulator. READY=1 once up, STATUS= at
//! stage changes and runtime control, WATCHDOG=1 every half second,
//! RELOADING=1 (with MONOTONIC_USEC) then READY=1 on SIGHUP, STOPPING=1
//! (once) with a stopping STATUS= and exit 0 on SIGTERM.

use crate::common::{self, notify_socket};

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use notify_socket::{config_toml, pings, NotifySocket};

fn kill(signal: &str, pid: u32) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notify_protocol_of_the_real_binary() {
    let sim = common::sim().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mongoload.toml");
    let control = dir.path().join("control.sock");
    std::fs::write(
        &config,
        format!(
            "{}\n[control]\nsocket = {:?}\n",
            config_toml(&sim.uri()),
            control.display().to_string()
        ),
    )
    .unwrap();
    let log = dir.path().join("stderr.log");

    // The blocking waits below run on this thread while the simulator
    // serves from the runtime's worker threads.
    let mut socket = NotifySocket::bind();
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["run", "--config"])
        .arg(&config)
        .env("NOTIFY_SOCKET", &socket.path)
        .env("WATCHDOG_USEC", "1000000")
        .env_remove("WATCHDOG_PID")
        .env_remove("JOURNAL_STREAM")
        .env("RUST_LOG", "info")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    let stderr = || std::fs::read_to_string(&log).unwrap_or_default();

    let ready = socket.wait_for("READY=1", Duration::from_secs(15));
    assert!(ready.at - started < Duration::from_secs(15), "{}", stderr());

    // STATUS= with the stage, at the first stage and at the change to the
    // second (2 s later, after the prepare step).
    socket.wait_until("STATUS for stage 0", Duration::from_secs(15), |m| {
        m.text.starts_with("STATUS=") && m.text.contains("stage 0")
    });
    socket.wait_until("STATUS for stage 1", Duration::from_secs(10), |m| {
        m.text.starts_with("STATUS=") && m.text.contains("stage 1")
    });

    // STATUS= follows runtime control: a pause, then an override.
    let ctl = |line: &str| {
        let reply = Command::new(env!("CARGO_BIN_EXE_mongoload"))
            .args(["ctl", "--socket"])
            .arg(&control)
            .args(line.split(' '))
            .output()
            .unwrap();
        assert!(reply.status.success(), "ctl {line}: {reply:?}");
    };
    ctl("pause w");
    socket.wait_until("STATUS paused", Duration::from_secs(10), |m| {
        m.text == "STATUS=w: paused in stage 1 second\n"
    });
    ctl("set-rate w 13.26");
    ctl("resume w");
    socket.wait_until("STATUS with the override", Duration::from_secs(10), |m| {
        m.text == "STATUS=w: stage 1 second, 13.3 ops/s [control: rate 13.26/s (override)]\n"
    });
    ctl("reset w");

    // WATCHDOG_USEC=1s: a ping every 0.5 s, never a gap systemd would
    // punish (1 s), never a flood.
    let window = socket.collect_for(Duration::from_secs(3));
    let at = pings(&window);
    assert!(
        (4..=8).contains(&at.len()),
        "{} pings in 3 s: {:?}",
        at.len(),
        window
    );
    for pair in at.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap > Duration::from_millis(250) && gap < Duration::from_millis(950),
            "gap {gap:?} between pings"
        );
    }

    // SIGHUP: RELOADING=1 with MONOTONIC_USEC, then READY=1, in order.
    kill("-HUP", pid);
    let reloading = socket.wait_for("RELOADING=1", Duration::from_secs(5));
    let usec = reloading
        .text
        .lines()
        .find_map(|l| l.strip_prefix("MONOTONIC_USEC="))
        .expect("MONOTONIC_USEC with RELOADING=1");
    assert!(usec.parse::<u64>().unwrap() > 0);
    let ready_again = socket.wait_for("READY=1", Duration::from_secs(5));
    assert!(ready_again.at >= reloading.at);
    // Still pinging after the reload.
    let after = socket.collect_for(Duration::from_millis(1500));
    assert!(pings(&after).len() >= 2, "{after:?}");

    // SIGTERM: STOPPING=1 and a stopping STATUS=, drain, exit 0.
    kill("-TERM", pid);
    socket.wait_for("STOPPING=1", Duration::from_secs(5));
    socket.wait_until("STATUS stopping", Duration::from_secs(5), |m| {
        m.text.starts_with("STATUS=stopping")
    });
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("no exit within 15 s of SIGTERM\n{}", stderr());
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "{}", stderr());
    // Whatever else arrived, STOPPING=1 came once.
    socket.collect_for(Duration::from_millis(200));
    let stopping = socket.seen.iter().filter(|m| m.has("STOPPING=1")).count();
    assert_eq!(stopping, 1, "{:?}", socket.seen);
    sim.shutdown().await;
}

/// A plain SIGHUP with a broken file (configuration management's `kill
/// -HUP`): STATUS= says "last reload refused: <file>: <key>" and keeps
/// saying it through later status changes, until a reload succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reload_stays_in_status_until_one_succeeds() {
    let sim = common::sim().await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mongoload.toml");
    let good = config_toml(&sim.uri());
    std::fs::write(&config, &good).unwrap();
    let log = dir.path().join("stderr.log");
    let mut socket = NotifySocket::bind();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["run", "--config"])
        .arg(&config)
        .env("NOTIFY_SOCKET", &socket.path)
        .env_remove("WATCHDOG_USEC")
        .env_remove("JOURNAL_STREAM")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    socket.wait_for("READY=1", Duration::from_secs(15));
    socket.wait_until("STATUS for stage 0", Duration::from_secs(15), |m| {
        m.text.starts_with("STATUS=") && m.text.contains("stage 0")
    });

    // Broken during the first stage: the change to the second stage (a
    // new STATUS=) comes after the refusal and must keep it.
    std::fs::write(&config, good.replacen("rate = 40", "rate = -40", 1)).unwrap();
    kill("-HUP", pid);
    let want = format!(
        "last reload refused: {}: workloads[0].stages[1].rate",
        config.display()
    );
    socket.wait_until("STATUS with the refusal", Duration::from_secs(10), |m| {
        m.text.starts_with("STATUS=") && m.text.contains(&want)
    });
    let later = socket.wait_until("STATUS for stage 1", Duration::from_secs(10), |m| {
        m.text.starts_with("STATUS=") && m.text.contains("stage 1")
    });
    assert!(later.text.contains(&want), "{:?}", later.text);
    socket.collect_for(Duration::from_millis(1500));
    let last = socket
        .seen
        .iter()
        .rev()
        .find(|m| m.text.starts_with("STATUS="))
        .unwrap();
    assert!(last.text.contains(&want), "{:?}", last.text);

    // Fixed: the next STATUS= drops it.
    std::fs::write(&config, &good).unwrap();
    kill("-HUP", pid);
    socket.wait_until("STATUS without the refusal", Duration::from_secs(10), |m| {
        m.text.starts_with("STATUS=") && !m.text.contains("refused")
    });
    kill("-TERM", pid);
    let _ = child.wait();
    sim.shutdown().await;
}
