//! Cost of recording one operation (counters, Prometheus histogram and
//! HdrHistogram window), the hot path of every worker; target < 200 ns.
//! Also the cost of a scrape. Run: `cargo bench --bench record`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use mongoload::error_kind::ErrorKind;
use mongoload::metrics::Metrics;

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
    let workload = metrics.workload("bench", &["find", "insert", "update", "delete"]);
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
