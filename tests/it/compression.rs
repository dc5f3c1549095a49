//! `compressors=zstd` (and snappy, zlib) in the connection string, end to
//! end: `check-config` accepts it, the daemon runs its load through the
//! official driver against the simulator, which negotiates OP_COMPRESSED
//! in its `hello` and counts the compressed requests it unwraps.

use crate::common::*;

use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_compressor_carries_the_load_end_to_end() {
    for name in ["zstd", "snappy", "zlib"] {
        let sim = sim().await;
        let uri = format!("{}?compressors={name}", sim.uri());
        let toml = config_toml(
            &uri,
            "[[workloads.stages]]\nrate = 200\nduration = \"60s\"\n",
        );
        let (file, running) = start_daemon(&toml).await;
        let check = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
            .args(["check-config", "--config"])
            .arg(&file.path)
            .env_remove("MONGOLOAD_TARGET__URI")
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{name}: check-config: {}",
            String::from_utf8_lossy(&check.stderr)
        );
        let page = wait_metric(
            running.http_addr,
            "operations succeed",
            Duration::from_secs(30),
            |p| sum(p, "mongoload_operations_total", &[("outcome", "ok")]) >= 50.0,
        )
        .await;
        assert_eq!(
            sum(&page, "mongoload_operations_total", &[("outcome", "error")]),
            0.0,
            "{name}"
        );
        let compressed = sim.compressed_requests(name);
        assert!(
            compressed >= 50,
            "{name}: the simulator unwrapped {compressed} compressed requests"
        );
        // Nothing arrived under another compressor.
        for other in ["zstd", "snappy", "zlib"].iter().filter(|o| **o != name) {
            assert_eq!(sim.compressed_requests(other), 0, "{name}: {other}");
        }
        running.stop();
        let _ = tokio::time::timeout(Duration::from_secs(15), running.wait()).await;
        sim.shutdown().await;
    }
}

/// Without `compressors` nothing is compressed: the counter proves the
/// option, not the simulator, made the difference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_compressors_nothing_is_compressed() {
    let sim = sim().await;
    let (_file, running) = start_daemon(&config_toml(
        &sim.uri(),
        "[[workloads.stages]]\nrate = 200\nduration = \"60s\"\n",
    ))
    .await;
    wait_metric(
        running.http_addr,
        "operations succeed",
        Duration::from_secs(30),
        |p| sum(p, "mongoload_operations_total", &[("outcome", "ok")]) >= 50.0,
    )
    .await;
    for name in ["zstd", "snappy", "zlib"] {
        assert_eq!(sim.compressed_requests(name), 0, "{name}");
    }
    running.stop();
    let _ = tokio::time::timeout(Duration::from_secs(15), running.wait()).await;
    sim.shutdown().await;
}
