//! A wedged load loop stops the WATCHDOG=1 pings, and they resume when it
//! ticks again. The daemon runs in-process (the stall is the engine's
//! test-only fault `engine::fault::stall_controllers`, which parks every
//! controller in this process exactly as a stuck await would), so this file
//! holds a single test: NOTIFY_SOCKET and WATCHDOG_USEC are process-wide.

#[path = "it/common/notify_socket.rs"]
mod notify_socket;

use std::path::Path;
use std::time::{Duration, Instant};

use mongoload::daemon::HEARTBEAT_MAX_AGE;
use mongoload::engine::fault::stall_controllers;
use notify_socket::{config_toml, pings, NotifySocket};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_load_loop_stops_the_watchdog_pings() {
    let sim = mongoload::sim::start(mongoload::sim::SimConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..Default::default()
    })
    .await
    .unwrap();
    let mut socket = NotifySocket::bind();
    std::env::set_var("NOTIFY_SOCKET", &socket.path);
    std::env::set_var("WATCHDOG_USEC", "1000000");
    std::env::remove_var("WATCHDOG_PID");

    let config = mongoload::config::parse_with_env(
        &config_toml(&sim.uri()),
        Path::new("watchdog_stall.toml"),
        std::iter::empty(),
    )
    .unwrap();
    let running = mongoload::daemon::start(config).await.unwrap();

    // The blocking waits run on a blocking thread so the daemon's tasks
    // keep the runtime's workers.
    let socket = tokio::task::spawn_blocking(move || {
        socket.wait_for("READY=1", Duration::from_secs(15));
        // The schedule runs (so its controller is under watch) and pings flow.
        socket.wait_until("STATUS for stage 0", Duration::from_secs(15), |m| {
            m.text.starts_with("STATUS=") && m.text.contains("stage 0")
        });
        let healthy = socket.collect_for(Duration::from_millis(1500));
        assert!(pings(&healthy).len() >= 2, "{healthy:?}");

        let stalled_at = Instant::now();
        stall_controllers(true);
        let limit = HEARTBEAT_MAX_AGE + Duration::from_millis(1500);
        let during = socket.collect_for(limit + Duration::from_secs(2));
        let during = pings(&during);
        let last = *during.last().expect("pings go on while the tick is young");
        assert!(
            last - stalled_at <= limit,
            "pinged {:?} after the stall (limit {limit:?})",
            last - stalled_at
        );
        // Not cut at once either: the controller may miss a tick or two.
        assert!(
            last - stalled_at >= HEARTBEAT_MAX_AGE - Duration::from_millis(1500),
            "pings stopped after {:?}",
            last - stalled_at
        );
        assert!(
            Instant::now() - last >= Duration::from_secs(2),
            "no pings for the last 2 s"
        );

        stall_controllers(false);
        let resumed = socket.collect_for(Duration::from_secs(3));
        assert!(
            pings(&resumed).len() >= 2,
            "pings resume once the loop ticks: {resumed:?}"
        );
        socket
    })
    .await
    .unwrap();

    running.stop();
    tokio::time::timeout(Duration::from_secs(15), running.wait())
        .await
        .expect("the daemon stops");
    drop(socket);
    sim.shutdown().await;
}
