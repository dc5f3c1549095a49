//! Memory and speed of the acknowledged-write ledger (`audit::Ledger`):
//! 10 million acknowledged inserts, sequential, out of order, with
//! interleaved deletes and as a sliding window; 100 million sequential; a
//! whole verification pass in batches. Heap bytes are counted exactly by a
//! counting global allocator around the system one (live bytes after the
//! inserts, and the high-water mark while inserting). Target: under 16 MB
//! for 10 million sequential ids. Run: `cargo bench --bench ledger`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use mongoload::audit::{Cursor, Ledger};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

/// The system allocator, counting live and peak bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every call is forwarded unchanged to `System`; only counters are
// updated beside it.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const TEN_MILLION: u64 = 10_000_000;
const MB: f64 = 1_000_000.0;

/// Runs `fill` on a fresh ledger and prints its heap bytes, peak, time per
/// operation and the size after `optimize`.
fn measure(name: &str, ops: u64, fill: impl FnOnce(&mut Ledger)) -> Ledger {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let mut ledger = Ledger::new();
    let started = Instant::now();
    fill(&mut ledger);
    let took = started.elapsed();
    let live = LIVE.load(Ordering::Relaxed) - base;
    let peak = PEAK.load(Ordering::Relaxed) - base;
    ledger.optimize();
    let optimized = LIVE.load(Ordering::Relaxed) - base;
    println!(
        "{name:<44} {:>11} ids  heap {:>7.2} MB  peak {:>7.2} MB  after optimize {:>7.2} MB  {:>6.1} ns/op",
        ledger.len(),
        live as f64 / MB,
        peak as f64 / MB,
        optimized as f64 / MB,
        took.as_nanos() as f64 / ops as f64,
    );
    ledger
}

fn main() {
    // `cargo bench` passes `--bench`; any other argument filters nothing.
    println!("== audit ledger: heap bytes counted by the global allocator");
    let sequential = measure("10M sequential inserts, one at a time", TEN_MILLION, |l| {
        for id in 0..TEN_MILLION {
            l.acknowledge(id);
        }
    });
    measure(
        "10M sequential inserts, batches of 100",
        TEN_MILLION / 100,
        |l| {
            for start in (0..TEN_MILLION).step_by(100) {
                l.acknowledge_range(start..start + 100);
            }
        },
    );
    measure(
        "10M inserts acknowledged out of order (64 in flight)",
        TEN_MILLION,
        |l| {
            let mut rng = SmallRng::seed_from_u64(1);
            let mut window: Vec<u64> = Vec::with_capacity(64);
            for start in (0..TEN_MILLION).step_by(64) {
                window.clear();
                window.extend(start..(start + 64).min(TEN_MILLION));
                window.shuffle(&mut rng);
                for &id in &window {
                    l.acknowledge(id);
                }
            }
        },
    );
    // mixed's default 6.5 % inserts / 3 % deletes: about one delete of a
    // random earlier document for every two inserts.
    measure(
        "10M inserts, random deletes (46 % of inserts)",
        TEN_MILLION,
        |l| {
            let mut rng = SmallRng::seed_from_u64(2);
            for id in 0..TEN_MILLION {
                l.acknowledge(id);
                if rng.random_bool(0.46) {
                    l.forget(rng.random_range(0..=id));
                }
            }
        },
    );
    // insert-benchmark with max_docs: the oldest document goes when a new one comes.
    measure(
        "10M inserts, sliding window of 1M (max_docs)",
        TEN_MILLION,
        |l| {
            for id in 0..TEN_MILLION {
                l.acknowledge(id);
                if id >= 1_000_000 {
                    l.forget(id - 1_000_000);
                }
            }
        },
    );
    measure(
        "100M sequential inserts, one at a time",
        10 * TEN_MILLION,
        |l| {
            for id in 0..10 * TEN_MILLION {
                l.acknowledge(id);
            }
        },
    );

    // One verification pass over 10M ids in batches of 1,000.
    let started = Instant::now();
    let (mut cursor, mut batch, mut seen) = (Cursor::new(), Vec::with_capacity(1000), 0u64);
    while !cursor.is_done() {
        batch.clear();
        sequential.batch(&mut cursor, 1000, &mut batch);
        seen += batch.len() as u64;
    }
    let took = started.elapsed();
    assert_eq!(seen, TEN_MILLION);
    println!(
        "pass over 10M ids in batches of 1,000: {:.1} ms ({:.2} ns/id)",
        took.as_secs_f64() * 1e3,
        took.as_nanos() as f64 / seen as f64
    );
}
