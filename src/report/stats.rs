//! The statistics of one stage, pure: counts, per-second completion
//! buckets for the insert benchmark's ips.75/95/99, and HdrHistograms of
//! latency (ns, 3 significant digits) overall, per operation and per step
//! (request) of each operation. Fed with plain values;
//! [`StageStats::merge`] joins the parts recorded apart.

use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::error_kind::ErrorKind;

/// Latencies above this are recorded as this (one hour): a stalled server
/// cannot grow a histogram without bound.
const MAX_TRACKABLE_NS: u64 = 3_600 * 1_000_000_000;
const SIGNIFICANT_DIGITS: u8 = 3;
/// The per-second buckets stop growing here (31 days): a stage longer than
/// that still counts every operation, its ips figures cover the first month.
const MAX_SECONDS: u64 = 31 * 86_400;

fn new_histogram() -> Histogram<u64> {
    // 3 significant digits is always a valid precision; the histogram
    // auto-resizes to the largest value recorded.
    Histogram::new(SIGNIFICANT_DIGITS).expect("3 significant digits is a valid precision")
}

fn record(h: &mut Histogram<u64>, latency: Duration) {
    let ns = u64::try_from(latency.as_nanos())
        .unwrap_or(u64::MAX)
        .min(MAX_TRACKABLE_NS);
    // Auto-resizing: only values beyond i64::MAX / 2 could fail, far above the cap.
    if h.record(ns).is_err() {
        h.saturating_record(ns);
    }
}

/// Counts and latency of one operation (or of all of them).
#[derive(Debug, Clone)]
pub struct OpStats {
    /// Operations that succeeded.
    pub ok: u64,
    /// Operations that failed.
    pub error: u64,
    latency: Histogram<u64>,
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats {
            ok: 0,
            error: 0,
            latency: new_histogram(),
        }
    }
}

impl OpStats {
    fn record(&mut self, latency: Duration, ok: bool) {
        if ok {
            self.ok += 1;
        } else {
            self.error += 1;
        }
        record(&mut self.latency, latency);
    }

    fn merge(&mut self, other: &OpStats) {
        self.ok += other.ok;
        self.error += other.error;
        // Both auto-resize, so adding cannot go out of range.
        let _ = self.latency.add(&other.latency);
    }

    /// The latency quantiles of the operations recorded (failed ones too).
    pub fn latency(&self) -> LatencyNs {
        LatencyNs::of(&self.latency)
    }

    /// The latency histogram as the run log keeps it for merging members'
    /// reports: HdrHistogram's V2 format, deflated, in base64 (a few
    /// hundred bytes to a few KB).
    pub fn encoded_latency(&self) -> String {
        encode_histogram(&self.latency)
    }
}

/// A histogram as [`OpStats::encoded_latency`] writes it.
pub(super) fn encode_histogram(h: &Histogram<u64>) -> String {
    use base64::Engine as _;
    use hdrhistogram::serialization::Serializer as _;
    let mut buf = Vec::new();
    match hdrhistogram::serialization::V2DeflateSerializer::new().serialize(h, &mut buf) {
        Ok(_) => base64::engine::general_purpose::STANDARD.encode(buf),
        Err(_) => String::new(),
    }
}

/// The histogram of [`encode_histogram`]'s text; `None` when it is not one.
pub fn decode_histogram(text: &str) -> Option<Histogram<u64>> {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .ok()?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .ok()
}

/// Several histograms added up (`None` when any is missing or unreadable).
pub fn merged_latency<'a>(texts: impl IntoIterator<Item = Option<&'a str>>) -> Option<LatencyNs> {
    let mut all = new_histogram();
    for t in texts {
        all.add(decode_histogram(t?)?).ok()?;
    }
    Some(LatencyNs::of(&all))
}

/// Latency figures in nanoseconds; all zero when nothing was recorded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LatencyNs {
    /// Operations the quantiles are over.
    pub count: u64,
    pub p50: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
    pub max: u64,
}

impl LatencyNs {
    fn of(h: &Histogram<u64>) -> LatencyNs {
        if h.is_empty() {
            return LatencyNs::default();
        }
        LatencyNs {
            count: h.len(),
            p50: h.value_at_quantile(0.5),
            p95: h.value_at_quantile(0.95),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

/// Everything recorded during one stage (after its warm-up). Offsets are
/// from the start of measurement (stage start + warm-up).
#[derive(Debug, Clone)]
pub struct StageStats {
    /// Successful completions in each whole second since the start of
    /// measurement; grown on demand. u32: 4 bytes a second keeps a day-long
    /// stage at 340 KB.
    per_second: Vec<u32>,
    /// The operations of out-of-range op indexes (the total adds the ops').
    all: OpStats,
    ops: Vec<OpStats>,
    /// Per op, per step: the requests.
    steps: Vec<Vec<OpStats>>,
    errors: [u64; ErrorKind::ALL.len()],
    missed: u64,
    /// Per-interval samples for `report --compare`'s statistics.
    samples: super::samples::IntervalRecorder,
}

impl StageStats {
    /// Empty statistics for a workload with `ops` single-call operations.
    pub fn new(ops: usize) -> StageStats {
        StageStats::with_steps(&vec![1; ops])
    }

    /// Empty statistics for a workload whose operation `i` has `steps[i]`
    /// steps.
    pub fn with_steps(steps: &[usize]) -> StageStats {
        let stats = |n: usize| (0..n).map(|_| OpStats::default()).collect::<Vec<_>>();
        StageStats {
            per_second: Vec::new(),
            all: OpStats::default(),
            ops: stats(steps.len()),
            steps: steps.iter().map(|&n| stats(n)).collect(),
            errors: [0; ErrorKind::ALL.len()],
            missed: 0,
            samples: super::samples::IntervalRecorder::with_steps(steps, Duration::from_secs(1)),
        }
    }

    /// Records one request of step `step` of operation `op`, answered
    /// `done` after the start of measurement, that took `latency` (from
    /// its send); out-of-range indexes are ignored.
    pub fn record_request(
        &mut self,
        op: usize,
        step: usize,
        done: Duration,
        latency: Duration,
        outcome: Result<(), ErrorKind>,
    ) {
        if let Some(s) = self.steps.get_mut(op).and_then(|s| s.get_mut(step)) {
            s.record(latency, outcome.is_ok());
            self.samples
                .record_step(op, step, done, latency, outcome.is_ok());
        }
    }

    /// One step's requests, by op and step index.
    pub fn step(&self, op: usize, step: usize) -> Option<&OpStats> {
        self.steps.get(op)?.get(step)
    }

    /// Records one finished operation: `op` indexes the workload's op
    /// names (out of range ones are counted in the totals only), `done` is
    /// when it finished (offset from the start of measurement), `latency`
    /// its response time, `outcome` `Ok` or the class of its error.
    pub fn record(
        &mut self,
        op: usize,
        done: Duration,
        latency: Duration,
        outcome: Result<(), ErrorKind>,
    ) {
        let ok = outcome.is_ok();
        self.samples.record(op, done, latency, ok);
        // The total is the sum of the ops' (see [`StageStats::total`]).
        match self.ops.get_mut(op) {
            Some(o) => o.record(latency, ok),
            None => self.all.record(latency, ok),
        }
        match outcome {
            Ok(()) => {
                let second = done.as_secs().min(MAX_SECONDS) as usize;
                if second >= self.per_second.len() {
                    self.per_second.resize(second + 1, 0);
                }
                self.per_second[second] = self.per_second[second].saturating_add(1);
            }
            Err(kind) => self.errors[kind as usize] += 1,
        }
    }

    /// Cuts the per-interval samples into intervals of `interval` (before
    /// anything is recorded; 1 s by default).
    pub fn set_sample_interval(&mut self, interval: Duration) {
        self.samples =
            super::samples::IntervalRecorder::with_steps(&self.samples.step_counts(), interval);
    }

    /// The samples of the whole intervals of `measured`: the stage's,
    /// each operation's, and each step's of operations of several steps.
    pub fn samples(&self, measured: Duration) -> super::samples::Finished {
        self.samples.finish(measured)
    }

    /// Counts operations the schedule asked for and could not issue.
    pub fn add_missed(&mut self, n: u64) {
        self.missed += n;
    }

    /// Adds what `other` recorded (another worker's part of the stage).
    pub fn merge(&mut self, other: &StageStats) {
        if other.per_second.len() > self.per_second.len() {
            self.per_second.resize(other.per_second.len(), 0);
        }
        for (a, b) in self.per_second.iter_mut().zip(&other.per_second) {
            *a = a.saturating_add(*b);
        }
        self.all.merge(&other.all);
        for (a, b) in self.ops.iter_mut().zip(&other.ops) {
            a.merge(b);
        }
        for (a, b) in self.steps.iter_mut().zip(&other.steps) {
            for (a, b) in a.iter_mut().zip(b) {
                a.merge(b);
            }
        }
        for (a, b) in self.errors.iter_mut().zip(other.errors) {
            *a += b;
        }
        self.missed += other.missed;
    }

    /// All operations together: the ops' figures added up, with those
    /// of out-of-range ops (a histogram record per result, not two).
    pub fn total(&self) -> OpStats {
        let mut all = self.all.clone();
        for o in &self.ops {
            all.merge(o);
        }
        all
    }

    /// One operation's figures, by index into the op names.
    pub fn op(&self, op: usize) -> Option<&OpStats> {
        self.ops.get(op)
    }

    /// Errors of one class.
    pub fn errors_of(&self, kind: ErrorKind) -> u64 {
        self.errors[kind as usize]
    }

    /// Missed operations.
    pub fn missed(&self) -> u64 {
        self.missed
    }

    /// The successful completions in each of the first `seconds` whole
    /// seconds of measurement (seconds without any are 0).
    pub fn per_second(&self, seconds: u64) -> Vec<u64> {
        let n = seconds.min(MAX_SECONDS + 1) as usize;
        let mut v: Vec<u64> = self.per_second.iter().map(|&c| u64::from(c)).collect();
        v.resize(n, 0);
        v
    }
}

/// The rate that a fraction `p` (0..=1) of the seconds reached or beat, as
/// the insert benchmark reports ips.75/ips.95/ips.99: the largest count `c`
/// with at least `ceil(p × n)` of the `n` seconds at `c` or above. 0 when
/// there are no seconds.
pub fn rate_reached(per_second: &[u64], p: f64) -> u64 {
    let n = per_second.len();
    if n == 0 {
        return 0;
    }
    let mut sorted = per_second.to_vec();
    sorted.sort_unstable();
    let need = ((p.clamp(0.0, 1.0) * n as f64).ceil() as usize).clamp(1, n);
    // The seconds from index n - need on are the `need` fastest; the
    // slowest of them is the rate they all reached.
    sorted[n - need]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn close(actual: u64, expected: u64) -> bool {
        let (a, e) = (actual as f64, expected as f64);
        (a - e).abs() <= e * 0.001 + 1.0
    }

    #[test]
    fn rate_reached_matches_the_definition() {
        // 100 seconds at rates 1..=100: 75 of them reached 26 or more.
        let secs: Vec<u64> = (1..=100).collect();
        assert_eq!(rate_reached(&secs, 0.75), 26);
        assert_eq!(rate_reached(&secs, 0.95), 6);
        assert_eq!(rate_reached(&secs, 0.99), 2);
        assert_eq!(rate_reached(&secs, 1.0), 1);
        // Order does not matter.
        let mut rev = secs.clone();
        rev.reverse();
        assert_eq!(rate_reached(&rev, 0.95), 6);
        // Few seconds: 99 % of 3 seconds is all of them, so the slowest.
        assert_eq!(rate_reached(&[500, 10, 400], 0.99), 10);
        assert_eq!(rate_reached(&[500, 10, 400], 0.5), 400);
        assert_eq!(rate_reached(&[], 0.99), 0);
    }

    #[test]
    fn one_slow_second_in_a_hundred_shows_in_ips_99_only() {
        let mut secs = vec![1000u64; 100];
        secs[42] = 100;
        assert_eq!(rate_reached(&secs, 0.75), 1000);
        assert_eq!(rate_reached(&secs, 0.95), 1000);
        assert_eq!(rate_reached(&secs, 0.99), 1000);
        secs[7] = 50;
        assert_eq!(rate_reached(&secs, 0.99), 100);
    }

    #[test]
    fn records_counts_buckets_and_quantiles() {
        let mut s = StageStats::new(2);
        for i in 0..1000u64 {
            // 1000 ops over 10 s: 100 in each second.
            let done = ms(i * 10);
            s.record((i % 2) as usize, done, ms(i + 1), Ok(()));
        }
        s.record(1, ms(500), ms(5000), Err(ErrorKind::Timeout));
        s.add_missed(3);

        assert_eq!(s.total().ok, 1000);
        assert_eq!(s.total().error, 1);
        assert_eq!(s.op(0).unwrap().ok, 500);
        assert_eq!(s.op(1).unwrap().ok, 500);
        assert_eq!(s.op(1).unwrap().error, 1);
        assert_eq!(s.errors_of(ErrorKind::Timeout), 1);
        assert_eq!(s.errors_of(ErrorKind::Network), 0);
        assert_eq!(s.missed(), 3);
        // Errors are not completions in the per-second rate.
        assert_eq!(s.per_second(10), vec![100; 10]);
        // Asking for more seconds than recorded pads with zeros.
        assert_eq!(s.per_second(12)[10..], [0, 0]);

        let l = s.total().latency();
        assert_eq!(l.count, 1001);
        assert!(close(l.p50, 501_000_000), "{l:?}");
        assert!(close(l.p99, 991_000_000), "{l:?}");
        assert!(close(l.max, 5_000_000_000), "{l:?}");
        // Per op: op 0 had the odd latencies 1, 3, …, 999 ms.
        let l0 = s.op(0).unwrap().latency();
        assert!(close(l0.max, 999_000_000), "{l0:?}");
    }

    #[test]
    fn merge_equals_recording_in_one() {
        let mut one = StageStats::new(1);
        let mut a = StageStats::new(1);
        let mut b = StageStats::new(1);
        for i in 0..300u64 {
            let (done, lat) = (ms(i * 17), ms(1 + i % 50));
            one.record(0, done, lat, Ok(()));
            if i % 3 == 0 { &mut a } else { &mut b }.record(0, done, lat, Ok(()));
        }
        b.record(0, ms(10), ms(2), Err(ErrorKind::Network));
        one.record(0, ms(10), ms(2), Err(ErrorKind::Network));
        a.add_missed(2);
        one.add_missed(2);
        // b has the longer bucket vector; merging it into the shorter one
        // must grow it.
        a.merge(&b);
        assert_eq!(a.per_second(6), one.per_second(6));
        assert_eq!(a.total().latency(), one.total().latency());
        assert_eq!(a.total().ok, 300);
        assert_eq!(a.errors_of(ErrorKind::Network), 1);
        assert_eq!(a.missed(), 2);
    }

    #[test]
    fn empty_stats_report_zeros_and_out_of_range_ops_count_in_totals() {
        let mut s = StageStats::new(1);
        assert_eq!(s.total().latency(), LatencyNs::default());
        assert_eq!(s.per_second(3), vec![0, 0, 0]);
        s.record(5, ms(0), ms(1), Ok(()));
        assert_eq!(s.total().ok, 1);
        assert_eq!(s.op(0).unwrap().ok, 0);
        // A latency far beyond an hour is capped, not lost.
        s.record(0, ms(0), Duration::from_secs(100_000), Ok(()));
        assert!(close(s.total().latency().max, MAX_TRACKABLE_NS));
    }
}
