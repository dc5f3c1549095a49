//! Time-of-day window schedules in the running daemon (in-process, against
//! the simulator): the active window's level and label, the default's
//! outside every window.

use crate::common;

use std::path::Path;
use std::time::Duration;

use chrono::Timelike;
use common::{eventually, metric};
use mongoload::daemon;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn engine_follows_the_wall_clock_windows() {
    let sim = common::test_db().await;
    // A window that holds all day, and one that starts two hours from now.
    let later = (chrono::Utc::now().hour() + 2) % 24;
    let text = format!(
        r#"
[target]
uri = "{uri}"
database = "{database}"
[http]
listen = "127.0.0.1:0"
[run]
shutdown_grace = "2s"

[[workloads]]
name = "day"
kind = "mixed"
windows = [{{ when = "daily 00:00-24:00", rate = 50, name = "all-day" }}]
[workloads.mixed]
doc_size = "1KB"
initial_docs = 10
collection = "day"

[[workloads]]
name = "later"
kind = "mixed"
timezone = "UTC"
windows = [{{ when = "{later:02}:00-{end:02}:00", rate = 500 }}]
default = {{ concurrency = 2, name = "quiet" }}
[workloads.mixed]
doc_size = "1KB"
initial_docs = 10
collection = "later"
"#,
        uri = sim.uri(),
        database = sim.database("windows"),
        end = (later + 1) % 24,
    );
    let config = common::parse(&text, Path::new("windows.toml"));
    let running = daemon::start(config).await.unwrap();
    let m = running.metrics.clone();
    eventually("both workloads running", Duration::from_secs(20), || {
        metric(&m, "mongoload_operations_total", &["workload=\"day\""]) > 10.0
            && metric(&m, "mongoload_operations_total", &["workload=\"later\""]) > 10.0
    })
    .await;
    let day = "workload=\"day\"";
    let later = "workload=\"later\"";
    assert_eq!(metric(&m, "mongoload_target_rate", &[day]), 50.0);
    assert_eq!(
        metric(&m, "mongoload_phase_info", &[day, "stage=\"all-day\""]),
        1.0
    );
    assert_eq!(metric(&m, "mongoload_target_concurrency", &[later]), 2.0);
    assert_eq!(metric(&m, "mongoload_target_rate", &[later]), 0.0);
    assert_eq!(
        metric(&m, "mongoload_phase_info", &[later, "stage=\"quiet\""]),
        1.0
    );
    running.stop();
    running.wait().await;
    sim.shutdown().await;
}
