//! The replication-lag probe against the simulator's replica set whose
//! secondaries apply each write 500 ms late: each secondary's measured
//! lag is that within 20 % (the mean of twenty heartbeats; three in four
//! near it), the primary has no lag series, and after a failover the
//! former primary is measured and the new one no longer is.

use std::time::Duration;

use crate::common::{sample, samples};
use mongoload::sim::{self, ReplSetConfig, SimConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_probe_reads_the_configured_lag_on_each_secondary() {
    let lag = Duration::from_millis(500);
    let mut set = ReplSetConfig::new("rs0", 3);
    set.replication_lag = lag;
    set.election = sim::ElectionTime::fixed(Duration::from_millis(500));
    let sim = sim::start_replset(SimConfig::default(), set)
        .await
        .expect("the replica set starts");
    let rs = sim.replset().unwrap().clone();
    let text = format!(
        r#"[target]
uri = "{uri}"
database = "probe"
server_selection_timeout = "5s"
[http]
listen = "127.0.0.1:0"
[run]
shutdown_grace = "2s"
[lag_probe]
interval = "500ms"
[[workloads]]
name = "w"
kind = "mixed"
seed = 1
[workloads.mixed]
insert = 0
update = 0
delete = 0
find = 1
doc_size = 128
initial_docs = 10
[[workloads.stages]]
rate = 5
duration = "1h"
"#,
        uri = sim.uri()
    );
    let (_file, running) = crate::common::start_daemon(&text).await;
    let hosts = rs.hosts();
    let (primary, secondaries) = (&hosts[0], &hosts[1..]);
    let count = |p: &str, m: &str| {
        sample(
            p,
            "mongoload_replication_lag_probe_seconds_count",
            &[("member", m)],
        )
        .unwrap_or(0.0)
    };
    let p = crate::common::wait_for(
        "twenty heartbeats seen on each secondary",
        Duration::from_secs(30),
        || async {
            let p = running.metrics.encode().unwrap();
            secondaries
                .iter()
                .all(|m| count(&p, m) >= 20.0)
                .then_some(p)
        },
    )
    .await;
    let want = lag.as_secs_f64();
    for m in secondaries {
        let mean = sample(
            &p,
            "mongoload_replication_lag_probe_seconds_sum",
            &[("member", m)],
        )
        .unwrap()
            / count(&p, m);
        let gauge = sample(&p, "mongoload_replication_lag_seconds", &[("member", m)]).unwrap();
        eprintln!(
            "{m}: mean lag {mean:.3}s over {} heartbeats, gauge {gauge:.3}s (configured {want}s)",
            count(&p, m)
        );
        // On a loaded machine one read in a while comes late (a heartbeat
        // seen an interval later): over twenty heartbeats one such read
        // moves the mean by 5 %, and three in four must be near the lag.
        let le = |b: &str| {
            sample(
                &p,
                "mongoload_replication_lag_probe_seconds_bucket",
                &[("member", m), ("le", b)],
            )
            .unwrap()
        };
        let typical = (le("0.75") - le("0.25")) / count(&p, m);
        assert!(
            typical >= 0.75,
            "{m}: {typical:.2} of heartbeats near {want}s"
        );
        assert!(
            (mean - want).abs() <= 0.2 * want,
            "{m}: mean lag {mean:.3}s"
        );
        assert!(gauge >= 0.8 * want && gauge < 2.0, "{m}: gauge {gauge:.3}s");
    }
    assert!(
        samples(
            &p,
            "mongoload_replication_lag_seconds",
            &[("member", primary)]
        )
        .is_empty(),
        "the primary has no lag series"
    );
    assert!(
        sample(
            &p,
            "mongoload_lag_probe_heartbeats_total",
            &[("outcome", "ok")]
        ) >= Some(6.0)
    );

    // After a failover the old primary is a secondary and is measured; the
    // new primary's series is gone.
    let down = rs.step_down().unwrap();
    let new = hosts[down.new_primary].clone();
    let before = count(&running.metrics.encode().unwrap(), primary);
    assert_eq!(before, 0.0);
    crate::common::wait_for(
        "the old primary measured",
        Duration::from_secs(30),
        || async {
            let p = running.metrics.encode().unwrap();
            (count(&p, primary) >= 3.0
                && samples(&p, "mongoload_replication_lag_seconds", &[("member", &new)]).is_empty())
            .then_some(())
        },
    )
    .await;
    running.stop();
    tokio::time::timeout(Duration::from_secs(30), running.wait())
        .await
        .expect("the daemon stops");
    drop(sim);
}
