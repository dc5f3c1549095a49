//! Tests of the registry as a scrape sees it: exact sample lines of the
//! encoded text.

use std::time::Duration;

use super::*;
use crate::error_kind::ErrorKind;
use crate::workload::OpSpec;

fn lines(text: &str) -> Vec<&str> {
    text.lines().collect()
}

fn assert_has(text: &str, line: &str) {
    assert!(
        lines(text).contains(&line),
        "missing line {line:?} in:\n{text}"
    );
}

fn assert_lacks_prefix(text: &str, prefix: &str) {
    assert!(
        !text.lines().any(|l| l.starts_with(prefix)),
        "unexpected line starting {prefix:?} in:\n{text}"
    );
}

/// The value of the one sample line that starts with `prefix`.
fn sample(text: &str, prefix: &str) -> f64 {
    let hits: Vec<&str> = text.lines().filter(|l| l.starts_with(prefix)).collect();
    assert_eq!(hits.len(), 1, "{prefix:?} matched {hits:?}");
    hits[0][prefix.len()..].trim().parse().expect("a number")
}

#[test]
fn recorded_operations_appear_as_exact_samples() {
    let m = Metrics::new().unwrap();
    let w = m.workload("mixed1", &OpSpec::singles(&["find", "insert"]));
    let find = w.op("find").unwrap().clone();
    find.record_ok(Duration::from_micros(1500), 3);
    find.record_ok(Duration::from_micros(150), 1);
    find.record_error(Duration::from_millis(20), ErrorKind::Timeout);
    w.op("insert")
        .unwrap()
        .record_error(Duration::from_secs(61), ErrorKind::DuplicateKey);

    let text = m.encode().unwrap();
    for line in [
        r#"mongoload_operations_total{op="find",outcome="ok",workload="mixed1"} 2"#,
        r#"mongoload_operations_total{op="find",outcome="error",workload="mixed1"} 1"#,
        r#"mongoload_operations_total{op="insert",outcome="ok",workload="mixed1"} 0"#,
        r#"mongoload_operations_total{op="insert",outcome="error",workload="mixed1"} 1"#,
        r#"mongoload_documents_total{op="find",workload="mixed1"} 4"#,
        r#"mongoload_documents_total{op="insert",workload="mixed1"} 0"#,
        r#"mongoload_errors_total{kind="timeout",op="find",workload="mixed1"} 1"#,
        r#"mongoload_errors_total{kind="duplicate_key",op="insert",workload="mixed1"} 1"#,
        r#"mongoload_latency_seconds_bucket{op="find",workload="mixed1",le="0.0001"} 0"#,
        r#"mongoload_latency_seconds_bucket{op="find",workload="mixed1",le="0.0001445"} 0"#,
        r#"mongoload_latency_seconds_bucket{op="find",workload="mixed1",le="0.0001514"} 1"#,
        r#"mongoload_latency_seconds_bucket{op="find",workload="mixed1",le="0.001445"} 1"#,
        r#"mongoload_latency_seconds_bucket{op="find",workload="mixed1",le="0.001514"} 2"#,
        r#"mongoload_latency_seconds_bucket{op="find",workload="mixed1",le="0.01995"} 2"#,
        r#"mongoload_latency_seconds_bucket{op="find",workload="mixed1",le="0.02089"} 3"#,
        r#"mongoload_latency_seconds_bucket{op="find",workload="mixed1",le="+Inf"} 3"#,
        r#"mongoload_latency_seconds_count{op="find",workload="mixed1"} 3"#,
        r#"mongoload_latency_seconds_bucket{op="insert",workload="mixed1",le="60"} 0"#,
        r#"mongoload_latency_seconds_bucket{op="insert",workload="mixed1",le="+Inf"} 1"#,
        r#"mongoload_latency_window_seconds_count{op="find",workload="mixed1"} 3"#,
        r#"mongoload_target_up 0"#,
        r#"mongoload_missed_operations_total{workload="mixed1"} 0"#,
    ] {
        assert_has(&text, line);
    }
    let sum = sample(
        &text,
        r#"mongoload_latency_seconds_sum{op="find",workload="mixed1"}"#,
    );
    assert!((sum - 0.02165).abs() < 1e-9, "{sum}");
    let max = sample(
        &text,
        r#"mongoload_latency_window_seconds{op="find",workload="mixed1",quantile="1"}"#,
    );
    assert!((max - 0.020).abs() < 0.020 * 0.001, "{max}");
    let median = sample(
        &text,
        r#"mongoload_latency_window_seconds{op="find",workload="mixed1",quantile="0.5"}"#,
    );
    assert!((median - 0.0015).abs() < 0.0015 * 0.001, "{median}");
    assert_eq!(find.ok_total(), 2);
    assert_eq!(find.error_total(), 1);
    assert_eq!(find.errors_of(ErrorKind::Timeout), 1);
}

#[test]
fn requests_are_counted_by_step_apart_from_their_operation() {
    let m = Metrics::new().unwrap();
    let spec = crate::workload::BoundedInserts::new(0, 0, 10).spec("insert");
    let w = m.workload("bounded", &[spec, OpSpec::single("find")]);
    let insert = w.op("insert").unwrap();
    // One insert of 2 documents that evicted 2: one operation, two requests.
    insert
        .step(0)
        .unwrap()
        .record(Duration::from_millis(3), Ok(2));
    insert
        .step(1)
        .unwrap()
        .record(Duration::from_millis(1), Ok(2));
    insert.record_ok(Duration::from_millis(4), 2);
    // One whose eviction failed: the operation fails with its kind.
    insert
        .step(0)
        .unwrap()
        .record(Duration::from_millis(3), Ok(2));
    insert
        .step(1)
        .unwrap()
        .record(Duration::from_millis(1), Err(ErrorKind::NotPrimary));
    insert.record_error(Duration::from_millis(4), ErrorKind::NotPrimary);
    assert!(insert.step(0).unwrap().counts_documents());
    assert!(!insert.step(1).unwrap().counts_documents());
    assert!(insert.step(2).is_none());
    w.prepare.record_ok();
    w.prepare.record_error(ErrorKind::ServerSelection);

    let text = m.encode().unwrap();
    for line in [
        r#"mongoload_operations_total{op="insert",outcome="ok",workload="bounded"} 1"#,
        r#"mongoload_operations_total{op="insert",outcome="error",workload="bounded"} 1"#,
        r#"mongoload_errors_total{kind="not_primary",op="insert",workload="bounded"} 1"#,
        r#"mongoload_requests_total{op="insert",outcome="ok",step="insert",workload="bounded"} 2"#,
        r#"mongoload_requests_total{op="insert",outcome="ok",step="evict",workload="bounded"} 1"#,
        r#"mongoload_requests_total{op="insert",outcome="error",step="evict",workload="bounded"} 1"#,
        r#"mongoload_requests_total{op="find",outcome="ok",step="find",workload="bounded"} 0"#,
        r#"mongoload_request_errors_total{kind="not_primary",op="insert",step="evict",workload="bounded"} 1"#,
        r#"mongoload_request_errors_total{kind="timeout",op="find",step="find",workload="bounded"} 0"#,
        r#"mongoload_request_documents_total{op="insert",step="insert",workload="bounded"} 4"#,
        r#"mongoload_request_documents_total{op="insert",step="evict",workload="bounded"} 2"#,
        r#"mongoload_request_duration_seconds_count{op="insert",step="evict",workload="bounded"} 2"#,
        r#"mongoload_request_duration_seconds_bucket{op="insert",step="insert",workload="bounded",le="0.002884"} 0"#,
        r#"mongoload_request_duration_seconds_bucket{op="insert",step="insert",workload="bounded",le="0.00302"} 2"#,
        r#"mongoload_prepare_steps_total{outcome="ok",workload="bounded"} 1"#,
        r#"mongoload_prepare_steps_total{outcome="error",workload="bounded"} 1"#,
        r#"mongoload_prepare_errors_total{kind="server_selection",workload="bounded"} 1"#,
    ] {
        assert_has(&text, line);
    }
    // Prepare never shares the op label space.
    assert!(!text.contains(r#"op="prepare""#), "{text}");
    assert_eq!(w.prepare.ok_total(), 1);
}

#[test]
fn every_error_kind_exists_at_zero() {
    let m = Metrics::new().unwrap();
    let _w = m.workload("w", &OpSpec::singles(&["find"]));
    let text = m.encode().unwrap();
    for kind in ErrorKind::ALL {
        assert_has(
            &text,
            &format!(
                r#"mongoload_errors_total{{kind="{}",op="find",workload="w"}} 0"#,
                kind.as_str()
            ),
        );
    }
}

#[test]
fn the_latency_histograms_export_the_fine_layout() {
    let m = Metrics::new().unwrap();
    let _w = m.workload("w", &OpSpec::singles(&["find"]));
    let text = m.encode().unwrap();
    let les: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("mongoload_latency_seconds_bucket{"))
        .map(|l| l.split("le=\"").nth(1).unwrap().split('"').next().unwrap())
        .collect();
    assert_eq!(les.len(), buckets::latency_buckets().len() + 1);
    assert_eq!(&les[..4], ["0.0001", "0.0001047", "0.0001096", "0.0001148"]);
    assert_eq!(les[50], "0.001");
    assert_eq!(les[250], "10");
    assert_eq!(&les[251..], ["20", "30", "60", "+Inf"]);
}

#[test]
fn gauges_and_build_info() {
    let m = Metrics::new().unwrap();
    let w = m.workload("w", &OpSpec::singles(&[]));
    w.target_rate.set(2000.0);
    w.target_concurrency.set(0);
    w.inflight.set(17);
    w.schedule_lag_seconds.set(0.25);
    w.missed_operations.inc_by(5);
    m.set_target_up(true);
    let text = m.encode().unwrap();
    for line in [
        r#"mongoload_target_rate{workload="w"} 2000"#,
        r#"mongoload_target_concurrency{workload="w"} 0"#,
        r#"mongoload_inflight_operations{workload="w"} 17"#,
        r#"mongoload_schedule_lag_seconds{workload="w"} 0.25"#,
        r#"mongoload_missed_operations_total{workload="w"} 5"#,
        r#"mongoload_target_up 1"#,
        r#"mongoload_pool_connections{state="idle"} 0"#,
        r#"mongoload_pool_connections{state="in_use"} 0"#,
        r#"mongoload_topology_servers{type="rs_primary"} 0"#,
        r#"mongoload_pool_checkout_wait_seconds_count 0"#,
    ] {
        assert_has(&text, line);
    }
    assert_has(
        &text,
        &format!(
            r#"mongoload_build_info{{revision="{BUILD_REVISION}",version="{}"}} 1"#,
            env!("CARGO_PKG_VERSION")
        ),
    );
    // The process collector is registered (its samples need /proc).
    assert!(text.contains("# TYPE process_cpu_seconds_total counter"));
}

#[test]
fn stage_info_names_one_stage_at_a_time() {
    let m = Metrics::new().unwrap();
    let w = m.workload("w", &OpSpec::singles(&["find"]));
    let other = m.workload("v", &OpSpec::singles(&["find"]));
    other.set_stage("warmup");
    w.set_stage("ramp");
    let text = m.encode().unwrap();
    assert_has(
        &text,
        r#"mongoload_phase_info{stage="ramp",workload="w"} 1"#,
    );

    w.set_stage("hold");
    let text = m.encode().unwrap();
    assert_has(
        &text,
        r#"mongoload_phase_info{stage="hold",workload="w"} 1"#,
    );
    assert_lacks_prefix(&text, r#"mongoload_phase_info{stage="ramp""#);
    assert_has(
        &text,
        r#"mongoload_phase_info{stage="warmup",workload="v"} 1"#,
    );
    assert_eq!(w.stage().as_deref(), Some("hold"));

    // Setting the same stage again keeps one series.
    w.set_stage("hold");
    let text = m.encode().unwrap();
    let n = text
        .lines()
        .filter(|l| l.starts_with("mongoload_phase_info{") && l.contains(r#"workload="w""#))
        .count();
    assert_eq!(n, 1);

    // A reload re-registers the workload: the new handle knows the stage.
    let reloaded = m.workload("w", &OpSpec::singles(&["find"]));
    reloaded.set_stage("steps");
    let text = m.encode().unwrap();
    assert_lacks_prefix(&text, r#"mongoload_phase_info{stage="hold""#);
    assert_has(
        &text,
        r#"mongoload_phase_info{stage="steps",workload="w"} 1"#,
    );

    reloaded.clear_stage();
    let text = m.encode().unwrap();
    assert_lacks_prefix(&text, r#"mongoload_phase_info{stage="steps""#);
    assert_has(
        &text,
        r#"mongoload_phase_info{stage="warmup",workload="v"} 1"#,
    );
}

#[test]
fn reregistering_a_workload_keeps_counters_and_window() {
    let m = Metrics::new().unwrap();
    let first = m.workload("w", &OpSpec::singles(&["find"]));
    first.ops()[0].record_ok(Duration::from_millis(1), 1);
    let second = m.workload("w", &OpSpec::singles(&["find"]));
    second.ops()[0].record_ok(Duration::from_millis(3), 1);
    assert_eq!(first.ops()[0].ok_total(), 2);
    let text = m.encode().unwrap();
    assert_has(
        &text,
        r#"mongoload_operations_total{op="find",outcome="ok",workload="w"} 2"#,
    );
    assert_has(
        &text,
        r#"mongoload_latency_window_seconds_count{op="find",workload="w"} 2"#,
    );
    let summary = m.latency_window("w", "find").unwrap();
    assert_eq!(summary.count, 2);
    assert!(m.latency_window("w", "nope").is_none());
}

#[test]
fn empty_window_exports_nan_quantiles() {
    let m = Metrics::new().unwrap();
    let _w = m.workload("w", &OpSpec::singles(&["find"]));
    let text = m.encode().unwrap();
    assert_has(
        &text,
        r#"mongoload_latency_window_seconds{op="find",workload="w",quantile="0.99"} NaN"#,
    );
    assert_has(
        &text,
        r#"mongoload_latency_window_seconds_count{op="find",workload="w"} 0"#,
    );
}

#[test]
fn invalid_window_is_an_error() {
    let err = Metrics::with_window(WindowConfig {
        window: Duration::from_secs(60),
        slots: 0,
    })
    .err()
    .expect("0 slots rejected");
    assert!(err.to_string().contains("slots"), "{err}");
}

#[test]
fn service_time_is_its_own_histogram_with_the_latency_buckets() {
    let m = Metrics::new().unwrap();
    let w = m.workload("open", &OpSpec::singles(&["find"]));
    let find = w.op("find").unwrap();
    // Open loop: 900 ms late behind a stall, served in 3 ms.
    find.record_ok(Duration::from_millis(903), 1);
    find.record_service(Duration::from_millis(3));
    let text = m.encode().unwrap();
    for line in [
        r#"mongoload_latency_seconds_bucket{op="find",workload="open",le="0.871"} 0"#,
        r#"mongoload_latency_seconds_bucket{op="find",workload="open",le="0.912"} 1"#,
        r#"mongoload_service_time_seconds_bucket{op="find",workload="open",le="0.002884"} 0"#,
        r#"mongoload_service_time_seconds_bucket{op="find",workload="open",le="0.00302"} 1"#,
        r#"mongoload_service_time_seconds_count{op="find",workload="open"} 1"#,
    ] {
        assert_has(&text, line);
    }
    let buckets = |name: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| Some(l.split("le=\"").nth(1)?.split('"').next()?.to_owned()))
            .collect()
    };
    assert_eq!(
        buckets("mongoload_service_time_seconds_bucket{op=\"find\""),
        buckets("mongoload_latency_seconds_bucket{op=\"find\"")
    );
    assert_eq!(
        buckets("mongoload_latency_seconds_bucket{op=\"find\"").len(),
        buckets::latency_buckets().len() + 1
    );
}

#[tokio::test]
async fn window_ticker_stops_when_cancelled() {
    let m = Arc::new(Metrics::new().unwrap());
    let _w = m.workload("w", &OpSpec::singles(&["find"]));
    let shutdown = tokio_util::sync::CancellationToken::new();
    let ticker = tokio::spawn({
        let m = Arc::clone(&m);
        let shutdown = shutdown.clone();
        async move { m.run_window_ticker(shutdown).await }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!ticker.is_finished(), "runs until cancelled");
    shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(1), ticker)
        .await
        .expect("ticker stops on cancel")
        .unwrap();
}

#[test]
fn send_lateness_is_a_histogram_fine_below_a_millisecond() {
    let m = Metrics::new().unwrap();
    let w = m.workload("w", &OpSpec::singles(&[]));
    w.send_lateness.observe(0.000_04);
    w.send_lateness.observe(0.000_4);
    w.send_lateness.observe(0.003);
    let text = m.encode().unwrap();
    for line in [
        r#"mongoload_send_lateness_seconds_bucket{workload="w",le="0.00005"} 1"#,
        r#"mongoload_send_lateness_seconds_bucket{workload="w",le="0.0005"} 2"#,
        r#"mongoload_send_lateness_seconds_bucket{workload="w",le="0.001"} 2"#,
        r#"mongoload_send_lateness_seconds_bucket{workload="w",le="0.005"} 3"#,
        r#"mongoload_send_lateness_seconds_count{workload="w"} 3"#,
    ] {
        assert_has(&text, line);
    }
}

/// docs/metrics.md's table is the contract: every family the daemon
/// registers has a row, and every row names a family that is registered.
#[test]
fn the_contract_table_and_the_registry_name_the_same_families() {
    use std::collections::BTreeSet;
    let table = include_str!("../../docs/metrics.md");
    let documented: BTreeSet<&str> = table
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| {
            let cell = l.split('|').nth(1).unwrap_or("");
            cell.split('`')
                .filter(|w| w.starts_with("mongoload_"))
                .map(|w| w.split('{').next().unwrap_or(w))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(documented.len() > 40, "{documented:?}");

    let m = Metrics::new().unwrap();
    crate::control::ControlMetrics::register_in(m.registry()).unwrap();
    crate::cluster::ClusterMetrics::register_in(m.registry()).unwrap();
    crate::probe::ProbeFamilies::register_in(m.registry()).unwrap();
    crate::audit::AuditFamilies::register_in(m.registry()).unwrap();
    crate::failover::Failover::register_in(m.registry()).unwrap();
    let declared: BTreeSet<&str> = Metrics::family_names()
        .into_iter()
        .chain(crate::control::ControlMetrics::NAMES.iter().copied())
        .chain(crate::cluster::ClusterMetrics::NAMES.iter().copied())
        .chain(crate::probe::ProbeFamilies::NAMES.iter().copied())
        .chain(crate::audit::AuditFamilies::NAMES.iter().copied())
        .chain(crate::failover::FailoverFamilies::NAMES.iter().copied())
        .collect();
    let undocumented: Vec<_> = declared.difference(&documented).collect();
    let undeclared: Vec<_> = documented.difference(&declared).collect();
    assert!(
        undocumented.is_empty() && undeclared.is_empty(),
        "declared without a row in docs/metrics.md: {undocumented:?}; \
         in the table but not declared: {undeclared:?}"
    );

    // What is declared is registered: the registry refuses each name again.
    for name in &documented {
        let again = prometheus::IntGauge::new(*name, "probe").unwrap();
        assert!(
            m.registry().register(Box::new(again)).is_err(),
            "{name} is not registered"
        );
    }
    // And nothing is registered beside the declarations (every family
    // with a series; the process collector's process_* aside).
    for family in m.registry().gather() {
        let name = family.name();
        assert!(
            name.starts_with("process_") || declared.contains(name),
            "{name} is registered but not declared"
        );
    }
}
