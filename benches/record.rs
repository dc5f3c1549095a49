//! Cost of recording one operation (counters, Prometheus histogram and
//! HdrHistogram window), the hot path of every worker; target < 200 ns.
//! Also one request (step) of an operation, the whole per-operation
//! recording path of the engine (gauges, send lateness, service and
//! response time, the request, the stage report batch) beside the same
//! path without the request families (as mongoload 0.1 recorded a
//! single-call operation), and the cost of a scrape. Run:
//! `cargo bench --bench record`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use mongoload::error_kind::ErrorKind;
use mongoload::metrics::Metrics;
use mongoload::report::live::{ReportContext, StageBatch, StageCollector};
use mongoload::report::writer::ReportWriter;
use mongoload::report::RunInfo;
use mongoload::schedule::Stage;
use mongoload::workload::OpSpec;

/// Latencies spread over the buckets, as a real run records them.
const LATENCIES: [Duration; 8] = [
    Duration::from_micros(120),
    Duration::from_micros(450),
    Duration::from_micros(900),
    Duration::from_micros(1_300),
    Duration::from_micros(2_700),
    Duration::from_micros(8_000),
    Duration::from_millis(35),
    Duration::from_millis(400),
];

fn record(c: &mut Criterion) {
    let metrics = Metrics::new().unwrap();
    let ops = OpSpec::singles(&["find", "insert", "update", "delete"]);
    let workload = metrics.workload("bench", &ops);
    let find = workload.op("find").unwrap().clone();

    let mut i = 0usize;
    c.bench_function("record_ok", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            find.record_ok(black_box(LATENCIES[i % LATENCIES.len()]), black_box(1));
        })
    });
    c.bench_function("record_error", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            find.record_error(
                black_box(LATENCIES[i % LATENCIES.len()]),
                ErrorKind::Timeout,
            );
        })
    });

    let step = find.step(0).unwrap();
    c.bench_function("record_request", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            step.record(black_box(LATENCIES[i % LATENCIES.len()]), Ok(black_box(1)));
        })
    });

    // Two threads recording the same op at once, as two Tokio workers do:
    // reports wall time per operation across both threads.
    c.bench_function("record_ok_2_threads_same_op", |b| {
        b.iter_custom(|iters| {
            let start = Instant::now();
            std::thread::scope(|s| {
                for t in 0..2u64 {
                    let op = find.clone();
                    s.spawn(move || {
                        for n in 0..iters / 2 {
                            let k = (n + t) as usize % LATENCIES.len();
                            op.record_ok(black_box(LATENCIES[k]), 1);
                        }
                    });
                }
            });
            start.elapsed()
        })
    });

    // Everything the engine records for one open-loop single-call
    // operation besides the driver call (src/engine/mod.rs: Worker::run,
    // execute, request): the lag gauge and lateness histogram, in-flight
    // gauge up and down, the clock reads, the request (its step's
    // counters and duration histogram, its stage report sample), service
    // time, the operation's stage report sample (samples flushed into the
    // stage's collector every 64), response time and the status counter.
    let stage = Stage::rate("hold", 1000.0, Duration::from_secs(3600)).unwrap();
    // The report task is not run: only the recording path is measured.
    let (writer, _task) = ReportWriter::new(RunInfo::new(None));
    let ctx = ReportContext::new(writer, "bench", &ops);
    let start = tokio::time::Instant::now();
    let collector = StageCollector::new(ctx, &stage, 0, 0, start);
    let mut batch = StageBatch::new();
    batch.follow(Some(&collector));
    let status_ok = std::sync::atomic::AtomicU64::new(0);
    let mut engine_path = |with_request: bool| {
        i = i.wrapping_add(1);
        let intended = tokio::time::Instant::now();
        let lag = tokio::time::Instant::now().saturating_duration_since(intended);
        workload.schedule_lag_seconds.set(lag.as_secs_f64());
        workload.send_lateness.observe(lag.as_secs_f64());
        workload.inflight.inc();
        let sent = tokio::time::Instant::now();
        let done = sent + black_box(LATENCIES[i % LATENCIES.len()]);
        if with_request {
            let request_done = tokio::time::Instant::now().max(done);
            step.record(request_done.saturating_duration_since(sent), Ok(1));
            batch.record_request(3, 0, intended, sent, request_done, Ok(()));
        }
        workload.inflight.dec();
        find.record_service(done.saturating_duration_since(sent));
        batch.record(3, intended, done, Ok(()));
        find.record_ok(done.saturating_duration_since(intended), 1);
        status_ok.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    };
    c.bench_function("record_engine_path", |b| b.iter(|| engine_path(true)));
    // The same without the request: what 0.1 recorded per operation.
    c.bench_function("record_engine_path_without_request", |b| {
        b.iter(|| engine_path(false))
    });
    drop(batch);

    // A scrape: flush the windows and encode the whole registry.
    let metrics = Arc::new(metrics);
    for op in workload.ops() {
        for (n, l) in LATENCIES.iter().enumerate() {
            for _ in 0..=n * 100 {
                op.record_ok(*l, 1);
            }
        }
    }
    c.bench_function("encode_4_ops", |b| {
        b.iter(|| black_box(metrics.encode().unwrap().len()))
    });
}

criterion_group!(benches, record);
criterion_main!(benches);
