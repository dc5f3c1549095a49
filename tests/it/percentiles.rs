//! The dashboards' percentiles against the exact ones: the daemon runs an
//! open-loop stage against the simulator with exponential latencies, then
//! Prometheus' `histogram_quantile` over the bucket series of its
//! `/metrics` page (the text the endpoint serves) is compared with the
//! run log's HdrHistogram quantiles: p50, p90, p99 and p99.9 of each
//! operation, and of the workload (its operations' buckets summed, as the
//! recording rules and panels sum load hosts, against the merged
//! HdrHistogram). Every figure must be within 5 %.

use crate::common::{self, parse_metrics, Sample};

use std::path::Path;
use std::time::Duration;

use mongoload::config;
use mongoload::daemon;
use mongoload::metrics::buckets::histogram_quantile;
use mongoload::report::{self, decode_histogram};
use mongoload::sim::{FaultConfig, LatencyDist, SimConfig};

const QUANTILES: [f64; 4] = [0.5, 0.9, 0.99, 0.999];

/// The cumulative `(le, count)` of `mongoload_latency_seconds` for the
/// samples `keep` selects, summed over them by `le`.
fn buckets(samples: &[Sample], keep: impl Fn(&Sample) -> bool) -> Vec<(f64, f64)> {
    let mut by_le: Vec<(f64, f64)> = Vec::new();
    for s in samples
        .iter()
        .filter(|s| s.name == "mongoload_latency_seconds_bucket" && keep(s))
    {
        let le = match s.label("le").expect("a bucket has le") {
            "+Inf" => f64::INFINITY,
            v => v.parse().expect("le is a number"),
        };
        match by_le.iter_mut().find(|(l, _)| *l == le) {
            Some(b) => b.1 += s.value,
            None => by_le.push((le, s.value)),
        }
    }
    by_le
}

/// The largest relative error over [`QUANTILES`], with a line per quantile.
fn compare(what: &str, exact: &hdrhistogram::Histogram<u64>, b: &[(f64, f64)]) -> (f64, String) {
    let mut worst = 0.0f64;
    let mut lines = String::new();
    for q in QUANTILES {
        let want = exact.value_at_quantile(q) as f64 / 1e9;
        let got = histogram_quantile(q, b).expect("the histogram has observations");
        let err = (got - want).abs() / want;
        worst = worst.max(err);
        lines += &format!(
            "{what} p{}: exact {:.6}s, histogram_quantile {:.6}s, {:+.2}%\n",
            q * 100.0,
            want,
            got,
            (got / want - 1.0) * 100.0
        );
    }
    (worst, lines)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn histogram_quantiles_agree_with_the_run_logs_exact_quantiles() {
    let sim = common::sim_with(SimConfig {
        faults: FaultConfig {
            latency: Some(LatencyDist::Exponential {
                mean: Duration::from_millis(4),
            }),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let text = format!(
        r#"
[target]
uri = "mongodb://{addr}/"
database = "percentiles_test"
[http]
listen = "127.0.0.1:0"
[run]
shutdown_grace = "2s"
log = "{log}"
[[workloads]]
name = "pct"
kind = "mixed"
max_inflight = 128
seed = 21
[workloads.mixed]
insert = 20
update = 10
find = 70
doc_size = 100
initial_docs = 100
[[workloads.stages]]
name = "open"
rate = 400
duration = "8s"
"#,
        addr = sim.addr(),
        log = log.display()
    );
    let cfg = config::parse_with_env(&text, Path::new("percentiles.toml"), std::iter::empty())
        .expect("test config is valid");
    let running = daemon::start(cfg).await.expect("the daemon starts");
    let metrics = running.metrics.clone();
    tokio::time::timeout(Duration::from_secs(60), running.wait())
        .await
        .expect("the schedule ends");
    let page = metrics.encode().expect("the metrics encode");
    // Encoding time (the scrape's CPU side): the fastest of 20, a rough
    // figure on a busy machine.
    let encode = (0..20)
        .map(|_| {
            let t = std::time::Instant::now();
            let _ = metrics.encode();
            t.elapsed()
        })
        .min()
        .unwrap();
    let gzipped = {
        use std::io::Write as _;
        let mut child = std::process::Command::new("gzip")
            .arg("-c")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("gzip runs");
        child
            .stdin
            .take()
            .unwrap()
            .write_all(page.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap().stdout.len()
    };
    let samples = parse_metrics(&page).expect("the page parses");
    let stage = report::read(&log).expect("the run log reads").remove(0);
    sim.shutdown().await;

    let mut worst = 0.0f64;
    let mut detail = String::new();
    for op in &stage.ops {
        let exact = decode_histogram(op.histogram.as_deref().expect("the op's histogram"))
            .expect("the histogram decodes");
        let b = buckets(&samples, |s| {
            s.label("workload") == Some("pct") && s.label("op") == Some(op.op.as_str())
        });
        // The same operations on both sides.
        assert_eq!(
            b.last().unwrap().1 as u64,
            exact.len(),
            "{}: histogram count against the run log",
            op.op
        );
        let (w, lines) = compare(&op.op, &exact, &b);
        worst = worst.max(w);
        detail += &lines;
    }
    // The workload: every op's buckets summed (as `sum by (workload, le)`)
    // against the stage's merged HdrHistogram.
    let exact = decode_histogram(stage.histogram.as_deref().expect("the stage's histogram"))
        .expect("the histogram decodes");
    assert!(exact.len() >= 2500, "{} operations", exact.len());
    assert!(
        exact.value_at_quantile(0.5) > 2_000_000,
        "the simulator's latency should dominate: p50 {} ns",
        exact.value_at_quantile(0.5)
    );
    let (w, lines) = compare(
        "all ops",
        &exact,
        &buckets(&samples, |s| s.label("workload") == Some("pct")),
    );
    worst = worst.max(w);
    detail += &lines;
    // The scrape's size, for docs/metrics.md and BENCHMARKS.md.
    let series = |prefix: &str| {
        samples
            .iter()
            .filter(|s| s.name.starts_with(prefix))
            .count()
    };
    eprintln!(
        "{detail}scrape: {} bytes ({gzipped} gzipped, encoded in {encode:?}), {} series; latency {}, service time {}, request duration {}, \
         workload pct's {} series in all",
        page.len(),
        samples.len(),
        series("mongoload_latency_seconds"),
        series("mongoload_service_time_seconds"),
        series("mongoload_request_duration_seconds"),
        samples
            .iter()
            .filter(|s| s.label("workload") == Some("pct"))
            .count()
    );
    assert!(worst < 0.05, "worst {:.2}%:\n{detail}", worst * 100.0);
}
