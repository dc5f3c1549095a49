//! Exact latency quantiles over a sliding window: HdrHistogram (ns, 3
//! significant digits) per workload and op, exported as the summary
//! `mongoload_latency_window_seconds` through a custom Collector.
//!
//! Recording goes into one of a few per-thread stripes (a stripe's lock is
//! shared only with the once-a-second flush, so it is uncontended); a flush
//! swaps each stripe's histogram out and adds it into the time slot of
//! "now". The window is a ring of `slots` such slots; a scrape merges those
//! younger than the window. Counts are `u32` (saturating) to halve memory.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use prometheus::core::{Collector, Desc};
use prometheus::proto::{LabelPair, Metric, MetricFamily, MetricType, Quantile, Summary};

use super::MetricsError;

/// The quantiles exported; 1 is the maximum.
pub const WINDOW_QUANTILES: [f64; 5] = [0.5, 0.9, 0.99, 0.999, 1.0];

pub(super) const NAME: &str = "mongoload_latency_window_seconds";
const HELP: &str = "Exact response-time quantiles over the last window (HdrHistogram); \
                    _sum and _count are totals since start.";
/// Larger latencies are recorded as one hour: bounds a histogram's memory
/// whatever a stalled server does.
const MAX_TRACKABLE_NS: u64 = 3_600 * 1_000_000_000;
const SIGNIFICANT_DIGITS: u8 = 3;

/// Length and granularity of the sliding window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowConfig {
    /// How much history the quantiles cover (default 60 s).
    pub window: Duration,
    /// Into how many time slots the window is cut (default 6): the quantiles
    /// cover between `window - window/slots` and `window` of history.
    pub slots: u32,
}

impl Default for WindowConfig {
    fn default() -> Self {
        WindowConfig {
            window: Duration::from_secs(60),
            slots: 6,
        }
    }
}

impl WindowConfig {
    pub(super) fn validate(&self) -> Result<(), MetricsError> {
        if !(1..=120).contains(&self.slots) {
            return Err(MetricsError::Window(format!(
                "slots must be between 1 and 120, got {}",
                self.slots
            )));
        }
        if self.window < Duration::from_secs(1) || self.window > Duration::from_secs(86_400) {
            return Err(MetricsError::Window(format!(
                "window must be between 1s and 1 day, got {:?}",
                self.window
            )));
        }
        Ok(())
    }

    fn slot_len_ns(&self) -> u64 {
        let ns = self.window.as_nanos() / u128::from(self.slots);
        u64::try_from(ns).unwrap_or(u64::MAX).max(1)
    }
}

/// The quantiles of one operation over the window, plus totals since start.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatencySummary {
    /// Operations recorded in the window.
    pub count: u64,
    /// Median. Zero when `count` is 0, as are the other quantiles.
    pub p50: Duration,
    /// 90th percentile.
    pub p90: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// 99.9th percentile.
    pub p999: Duration,
    /// Largest latency in the window.
    pub max: Duration,
    /// Operations recorded since start.
    pub total_count: u64,
    /// Sum of their latencies.
    pub total_sum: Duration,
}

impl LatencySummary {
    /// The values of [`WINDOW_QUANTILES`] in seconds; NaN when the window is
    /// empty, as Prometheus summaries report "no observations".
    pub fn quantile_seconds(&self) -> [f64; 5] {
        if self.count == 0 {
            return [f64::NAN; 5];
        }
        [self.p50, self.p90, self.p99, self.p999, self.max].map(|d| d.as_secs_f64())
    }
}

fn new_histogram() -> Histogram<u32> {
    // 3 significant digits is always a valid precision; auto-resizing
    // histograms grow to the largest value recorded, so idle ones stay small.
    Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is a valid precision")
}

struct Recorder {
    hist: Histogram<u32>,
    sum_ns: u64,
}

impl Recorder {
    fn new() -> Self {
        Recorder {
            hist: new_histogram(),
            sum_ns: 0,
        }
    }

    fn reset(&mut self) {
        self.hist.reset();
        self.sum_ns = 0;
    }
}

/// Padded to its own cache lines so threads on different stripes do not
/// false-share.
#[repr(align(128))]
struct Stripe(Mutex<Recorder>);

struct Slot {
    number: Option<u64>,
    hist: Histogram<u32>,
}

struct WindowState {
    slots: Box<[Slot]>,
    total_count: u64,
    total_sum_ns: u128,
    /// Swapped with a stripe's recorder on flush, so the stripe's lock is
    /// held for a swap, not for an add over every bucket.
    spare: Recorder,
    merged: Histogram<u32>,
}

static NEXT_STRIPE: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static STRIPE: usize = NEXT_STRIPE.fetch_add(1, Ordering::Relaxed);
}

/// The sliding latency window of one workload and op.
pub(crate) struct LatencyWindow {
    stripes: Box<[Stripe]>,
    state: Mutex<WindowState>,
    slot_len_ns: u64,
    origin: Instant,
}

impl LatencyWindow {
    pub(crate) fn new(config: WindowConfig, origin: Instant) -> Self {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        // A few more stripes than cores: Tokio runs one worker per core, and
        // the main and blocking threads may take stripes first.
        let stripes = (threads + 2).clamp(4, 32);
        LatencyWindow {
            stripes: (0..stripes)
                .map(|_| Stripe(Mutex::new(Recorder::new())))
                .collect(),
            state: Mutex::new(WindowState {
                slots: (0..config.slots)
                    .map(|_| Slot {
                        number: None,
                        hist: new_histogram(),
                    })
                    .collect(),
                total_count: 0,
                total_sum_ns: 0,
                spare: Recorder::new(),
                merged: new_histogram(),
            }),
            slot_len_ns: config.slot_len_ns(),
            origin,
        }
    }

    /// Records one latency into this thread's stripe.
    #[inline]
    pub(crate) fn record(&self, latency: Duration) {
        let ns = u64::try_from(latency.as_nanos())
            .unwrap_or(u64::MAX)
            .min(MAX_TRACKABLE_NS);
        let index = STRIPE.with(|s| *s) % self.stripes.len();
        let mut rec = self.stripes[index]
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // `record` grows the auto-resizing histogram; `saturating_record`
        // would clamp to its current range. Resizing only fails for values
        // beyond i64::MAX / 2, far above the cap.
        if rec.hist.record(ns).is_err() {
            rec.hist.saturating_record(ns);
        }
        rec.sum_ns = rec.sum_ns.saturating_add(ns);
    }

    fn slot_number(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.origin).as_nanos();
        u64::try_from(elapsed / u128::from(self.slot_len_ns)).unwrap_or(u64::MAX)
    }

    /// Moves what the stripes hold into the slot of `now`.
    pub(crate) fn flush(&self, now: Instant) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.flush_locked(&mut state, now);
    }

    fn flush_locked(&self, state: &mut WindowState, now: Instant) {
        let number = self.slot_number(now);
        let WindowState {
            slots,
            total_count,
            total_sum_ns,
            spare,
            ..
        } = state;
        let len = slots.len() as u64;
        let slot = &mut slots[(number % len) as usize];
        if slot.number != Some(number) {
            // This slot last held data from `len` or more slots ago.
            slot.hist.reset();
            slot.number = Some(number);
        }
        for stripe in self.stripes.iter() {
            {
                let mut rec = stripe.0.lock().unwrap_or_else(PoisonError::into_inner);
                if rec.hist.is_empty() {
                    continue;
                }
                std::mem::swap(&mut *rec, spare);
            }
            // Both histograms auto-resize, so adding cannot go out of range.
            let _ = slot.hist.add(&spare.hist);
            *total_count = total_count.saturating_add(spare.hist.len());
            *total_sum_ns = total_sum_ns.saturating_add(u128::from(spare.sum_ns));
            spare.reset();
        }
    }

    /// Flushes, then merges the slots younger than the window.
    pub(crate) fn summary(&self, now: Instant) -> LatencySummary {
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.flush_locked(&mut guard, now);
        let state = &mut *guard;
        state.merged.reset();
        add_live_slots(&state.slots, self.slot_number(now), &mut state.merged);
        summarize(&state.merged, state.total_count, state.total_sum_ns)
    }
}

/// The quantiles of several windows together (a workload over all its
/// operations) at `now`, each flushed first; totals are their sums.
pub(crate) fn merged_summary(windows: &[&LatencyWindow], now: Instant) -> LatencySummary {
    let mut merged = new_histogram();
    let (mut total_count, mut total_sum_ns) = (0u64, 0u128);
    for w in windows {
        let mut state = w.state.lock().unwrap_or_else(PoisonError::into_inner);
        w.flush_locked(&mut state, now);
        add_live_slots(&state.slots, w.slot_number(now), &mut merged);
        total_count = total_count.saturating_add(state.total_count);
        total_sum_ns = total_sum_ns.saturating_add(state.total_sum_ns);
    }
    summarize(&merged, total_count, total_sum_ns)
}

/// The quantiles of several windows together over the last `span` at
/// `now` (rounded up to whole slots, at most the whole window), each
/// flushed first; totals are their sums. Thresholds read this.
pub(crate) fn merged_summary_over(
    windows: &[&LatencyWindow],
    now: Instant,
    span: Duration,
) -> LatencySummary {
    let mut merged = new_histogram();
    let (mut total_count, mut total_sum_ns) = (0u64, 0u128);
    for w in windows {
        let mut state = w.state.lock().unwrap_or_else(PoisonError::into_inner);
        w.flush_locked(&mut state, now);
        let wanted = u64::try_from(span.as_nanos().div_ceil(u128::from(w.slot_len_ns)))
            .unwrap_or(u64::MAX)
            .max(1);
        add_recent_slots(&state.slots, w.slot_number(now), wanted, &mut merged);
        total_count = total_count.saturating_add(state.total_count);
        total_sum_ns = total_sum_ns.saturating_add(state.total_sum_ns);
    }
    summarize(&merged, total_count, total_sum_ns)
}

/// Adds the slots younger than the window (slot `current` and the
/// `slots.len() - 1` before it) into `into`.
fn add_live_slots(slots: &[Slot], current: u64, into: &mut Histogram<u32>) {
    add_recent_slots(slots, current, slots.len() as u64, into);
}

/// Adds slot `current` and the `wanted - 1` before it (as far as the ring
/// holds them) into `into`.
fn add_recent_slots(slots: &[Slot], current: u64, wanted: u64, into: &mut Histogram<u32>) {
    let len = (slots.len() as u64).min(wanted);
    for slot in slots {
        if let Some(number) = slot.number {
            if number <= current && current - number < len {
                // Both histograms auto-resize, so adding cannot go out of range.
                let _ = into.add(&slot.hist);
            }
        }
    }
}

fn summarize(h: &Histogram<u32>, total_count: u64, total_sum_ns: u128) -> LatencySummary {
    let count = h.len();
    let at = |q: f64| {
        if count == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(h.value_at_quantile(q))
        }
    };
    LatencySummary {
        count,
        p50: at(0.5),
        p90: at(0.9),
        p99: at(0.99),
        p999: at(0.999),
        max: if count == 0 {
            Duration::ZERO
        } else {
            Duration::from_nanos(h.max())
        },
        total_count,
        total_sum: Duration::from_nanos(u64::try_from(total_sum_ns).unwrap_or(u64::MAX)),
    }
}

/// All windows, keyed by (workload, op); the Collector registered in the
/// registry.
pub(crate) struct WindowCollector {
    desc: Desc,
    config: WindowConfig,
    origin: Instant,
    windows: RwLock<BTreeMap<(String, String), Arc<LatencyWindow>>>,
}

impl WindowCollector {
    pub(crate) fn new(config: WindowConfig) -> Result<Self, MetricsError> {
        let desc = Desc::new(
            NAME.to_owned(),
            HELP.to_owned(),
            vec!["workload".to_owned(), "op".to_owned()],
            HashMap::new(),
        )?;
        Ok(WindowCollector {
            desc,
            config,
            origin: Instant::now(),
            windows: RwLock::new(BTreeMap::new()),
        })
    }

    /// The window of (workload, op), created on first use.
    pub(crate) fn window(&self, workload: &str, op: &str) -> Arc<LatencyWindow> {
        let key = (workload.to_owned(), op.to_owned());
        if let Some(w) = self
            .windows
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&key)
        {
            return Arc::clone(w);
        }
        let mut windows = self.windows.write().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            windows
                .entry(key)
                .or_insert_with(|| Arc::new(LatencyWindow::new(self.config, self.origin))),
        )
    }

    fn all(&self) -> Vec<((String, String), Arc<LatencyWindow>)> {
        self.windows
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(k, w)| (k.clone(), Arc::clone(w)))
            .collect()
    }

    pub(crate) fn flush(&self, now: Instant) {
        for (_, w) in self.all() {
            w.flush(now);
        }
    }

    pub(crate) fn summary(&self, workload: &str, op: &str, now: Instant) -> Option<LatencySummary> {
        let w = self
            .windows
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(workload.to_owned(), op.to_owned()))
            .map(Arc::clone)?;
        Some(w.summary(now))
    }

    fn collect_at(&self, now: Instant) -> Vec<MetricFamily> {
        let metrics: Vec<Metric> = self
            .all()
            .into_iter()
            .map(|((workload, op), w)| summary_metric(&workload, &op, &w.summary(now)))
            .collect();
        if metrics.is_empty() {
            return Vec::new();
        }
        let mut family = MetricFamily::default();
        family.set_name(NAME.to_owned());
        family.set_help(HELP.to_owned());
        family.set_field_type(MetricType::SUMMARY);
        family.set_metric(metrics);
        vec![family]
    }
}

fn label(name: &str, value: &str) -> LabelPair {
    let mut pair = LabelPair::default();
    pair.set_name(name.to_owned());
    pair.set_value(value.to_owned());
    pair
}

fn summary_metric(workload: &str, op: &str, s: &LatencySummary) -> Metric {
    let quantiles = WINDOW_QUANTILES
        .iter()
        .zip(s.quantile_seconds())
        .map(|(&q, v)| {
            let mut quantile = Quantile::default();
            quantile.set_quantile(q);
            quantile.set_value(v);
            quantile
        })
        .collect();
    let mut summary = Summary::default();
    summary.set_quantile(quantiles);
    summary.set_sample_count(s.total_count);
    summary.set_sample_sum(s.total_sum.as_secs_f64());
    // Sorted by label name, as rust-prometheus writes its own metrics.
    let mut metric = Metric::from_label(vec![label("op", op), label("workload", workload)]);
    metric.set_summary(summary);
    metric
}

/// The registry owns a `Box<dyn Collector>`; this shares the collector with
/// [`super::Metrics`].
pub(crate) struct SharedCollector(pub(crate) Arc<WindowCollector>);

impl Collector for SharedCollector {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.0.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.0.collect_at(Instant::now())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Within HdrHistogram's 3-significant-digit precision.
    fn assert_close(actual: Duration, expected: Duration) {
        let a = actual.as_secs_f64();
        let e = expected.as_secs_f64();
        assert!(
            (a - e).abs() <= e * 0.001 + 1e-9,
            "{actual:?} is not within 0.1% of {expected:?}"
        );
    }

    #[test]
    fn windows_merge_into_one_summary() {
        let origin = Instant::now();
        let (a, b) = (
            LatencyWindow::new(WindowConfig::default(), origin),
            LatencyWindow::new(WindowConfig::default(), origin),
        );
        for _ in 0..98 {
            a.record(ms(1));
        }
        b.record(ms(100));
        b.record(ms(200));
        let s = merged_summary(&[&a, &b], origin + Duration::from_secs(1));
        assert_eq!((s.count, s.total_count), (100, 100));
        assert_close(s.p50, ms(1));
        assert_close(s.p99, ms(100));
        assert_close(s.max, ms(200));
        assert_close(s.total_sum, ms(398));
        // Each window alone is unchanged by the merge.
        assert_eq!(b.summary(origin + Duration::from_secs(1)).count, 2);
        let empty = merged_summary(&[], origin);
        assert_eq!((empty.count, empty.p99), (0, Duration::ZERO));
    }

    #[test]
    fn quantiles_of_known_values() {
        let origin = Instant::now();
        let w = LatencyWindow::new(WindowConfig::default(), origin);
        for i in 1..=1000 {
            w.record(ms(i));
        }
        let s = w.summary(origin + Duration::from_secs(1));
        assert_eq!(s.count, 1000);
        assert_eq!(s.total_count, 1000);
        assert_close(s.p50, ms(500));
        assert_close(s.p90, ms(900));
        assert_close(s.p99, ms(990));
        assert_close(s.p999, ms(999));
        assert_close(s.max, ms(1000));
        // 1 + 2 + ... + 1000 ms, exact: the sum is kept beside the histogram.
        assert_eq!(s.total_sum, ms(500_500));
    }

    #[test]
    fn old_slots_leave_the_window_but_totals_stay() {
        let origin = Instant::now();
        let config = WindowConfig {
            window: Duration::from_secs(60),
            slots: 6,
        };
        let w = LatencyWindow::new(config, origin);
        w.record(ms(900));
        w.flush(origin + Duration::from_secs(5));
        w.record(ms(10));
        w.flush(origin + Duration::from_secs(35));

        let s = w.summary(origin + Duration::from_secs(40));
        assert_eq!(s.count, 2);
        assert_close(s.max, ms(900));

        // Slot 0 (0..10 s) is out of a window ending in slot 6 (60..70 s).
        let s = w.summary(origin + Duration::from_secs(65));
        assert_eq!(s.count, 1);
        assert_close(s.max, ms(10));
        assert_eq!(s.total_count, 2);
        assert_eq!(s.total_sum, ms(910));

        // Everything aged out: NaN quantiles, totals kept.
        let s = w.summary(origin + Duration::from_secs(200));
        assert_eq!(s.count, 0);
        assert!(s.quantile_seconds().iter().all(|v| v.is_nan()));
        assert_eq!(s.total_count, 2);
    }

    #[test]
    fn records_from_many_threads_all_arrive() {
        let origin = Instant::now();
        let w = Arc::new(LatencyWindow::new(WindowConfig::default(), origin));
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let w = Arc::clone(&w);
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        w.record(ms(t + 1));
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let s = w.summary(origin);
        assert_eq!(s.count, 8000);
        assert_close(s.max, ms(8));
        assert_close(s.p50, ms(4));
    }

    #[test]
    fn huge_latencies_are_capped_not_lost() {
        let origin = Instant::now();
        let w = LatencyWindow::new(WindowConfig::default(), origin);
        w.record(Duration::from_secs(100_000));
        let s = w.summary(origin);
        assert_eq!(s.count, 1);
        assert_close(s.max, Duration::from_secs(3600));
    }

    #[test]
    fn window_config_is_validated() {
        assert!(WindowConfig::default().validate().is_ok());
        let zero_slots = WindowConfig {
            window: Duration::from_secs(60),
            slots: 0,
        };
        assert!(zero_slots.validate().is_err());
        let tiny = WindowConfig {
            window: Duration::from_millis(10),
            slots: 6,
        };
        assert!(tiny.validate().is_err());
    }
}
