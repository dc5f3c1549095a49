//! Per-interval samples of a stage, for `report --compare`'s statistics:
//! for each whole interval of the measured time (1 s, or longer for long
//! stages so a stage keeps at most [`TARGET_SAMPLES`]), the operations ok
//! and failed and the latency p50/p99/p99.9 that finished in it, overall
//! and per operation. Pure: fed with plain values by [`super::StageStats`].
//!
//! The counts are exact whatever order results arrive in. Results reach
//! the stage's figures in batches (a worker hands over 64 at a time, or
//! what it holds after a second), so an interval's latency histogram
//! stays open until [`OPEN`] later ones have started; the latency of a
//! result for an interval already closed counts in the oldest open one.

use std::collections::VecDeque;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// A stage is cut into about this many intervals at most (1 s each for a
/// stage up to 10 minutes).
pub(crate) const TARGET_SAMPLES: u64 = 600;
/// Never more samples than this (a count-based stage of unknown length).
pub(crate) const MAX_SAMPLES: u64 = 3600;
/// Intervals kept open for late results.
const OPEN: usize = 8;
const MAX_TRACKABLE_NS: u64 = 3_600 * 1_000_000_000;

/// One series of samples (the stage's, or one operation's), one entry per
/// interval; the percentiles are 0 where nothing finished.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SampleSeries {
    pub ok: Vec<u64>,
    pub error: Vec<u64>,
    pub p50_ns: Vec<u64>,
    pub p99_ns: Vec<u64>,
    pub p999_ns: Vec<u64>,
}

impl SampleSeries {
    pub fn len(&self) -> usize {
        self.ok.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ok.is_empty()
    }

    fn push(&mut self, ok: u64, error: u64, hist: Option<&Histogram<u32>>) {
        self.ok.push(ok);
        self.error.push(error);
        let q = |p: f64| {
            hist.filter(|h| !h.is_empty())
                .map_or(0, |h| h.value_at_quantile(p))
        };
        self.p50_ns.push(q(0.5));
        self.p99_ns.push(q(0.99));
        self.p999_ns.push(q(0.999));
    }

    /// Appends another run of samples (a later occurrence of the stage).
    pub fn extend(&mut self, other: &SampleSeries) {
        self.ok.extend(&other.ok);
        self.error.extend(&other.error);
        self.p50_ns.extend(&other.p50_ns);
        self.p99_ns.extend(&other.p99_ns);
        self.p999_ns.extend(&other.p999_ns);
    }
}

/// The samples of a stage as its report keeps them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Samples {
    /// Length of one interval.
    pub interval_seconds: f64,
    /// All operations together.
    pub all: SampleSeries,
}

/// The interval for a stage planned to last `planned` (1 s up to 10
/// minutes, then whole seconds so that it has about [`TARGET_SAMPLES`]).
pub(crate) fn interval_for(planned: Duration) -> Duration {
    let secs = planned.as_secs().div_ceil(TARGET_SAMPLES).max(1);
    Duration::from_secs(secs)
}

#[derive(Debug, Clone)]
struct Open {
    index: u64,
    /// Per series (0: all, then the ops): the latency. While open, series
    /// 0 holds only results of out-of-range ops; closing adds the ops'.
    series: Vec<Histogram<u32>>,
}

/// Collects the samples of a stage while it runs.
#[derive(Debug, Clone)]
pub(crate) struct IntervalRecorder {
    interval_ns: u64,
    open: VecDeque<Open>,
    /// Per series (0: all, then the ops, then the steps of the operations
    /// of several steps): ok and failed per interval. Series 0 counts only
    /// out-of-range ops; [`IntervalRecorder::finish`] adds the ops'.
    counts: Vec<(Vec<u64>, Vec<u64>)>,
    /// Per series: the latency of the closed intervals (counts unused).
    closed: Vec<SampleSeries>,
    /// Per op, per step: its series, for the steps of operations of
    /// several steps (a single-call operation's step is the operation).
    steps: Vec<Vec<Option<usize>>>,
}

/// The samples of a finished stage: the stage's, each operation's, and
/// each step's of the operations of several steps.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Finished {
    pub samples: Samples,
    pub ops: Vec<SampleSeries>,
    /// Per op, per step (`None` for a single-call operation's step).
    pub steps: Vec<Vec<Option<SampleSeries>>>,
}

fn histogram() -> Histogram<u32> {
    // 2 significant digits: 1 % resolution, a few KB per open interval.
    Histogram::new(2).expect("2 significant digits is a valid precision")
}

impl IntervalRecorder {
    /// A recorder for `ops` single-call operations cut into `interval`s.
    #[cfg(test)]
    pub(crate) fn new(ops: usize, interval: Duration) -> Self {
        IntervalRecorder::with_steps(&vec![1; ops], interval)
    }

    /// A recorder for operations of `steps[i]` steps each, cut into
    /// `interval`s: the steps of an operation of several get series of
    /// their own.
    pub(crate) fn with_steps(steps: &[usize], interval: Duration) -> Self {
        let mut next = steps.len() + 1;
        let steps: Vec<Vec<Option<usize>>> = steps
            .iter()
            .map(|&n| {
                (0..n)
                    .map(|_| {
                        (n > 1).then(|| {
                            next += 1;
                            next - 1
                        })
                    })
                    .collect()
            })
            .collect();
        IntervalRecorder {
            interval_ns: u64::try_from(interval.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1),
            open: VecDeque::new(),
            counts: vec![(Vec::new(), Vec::new()); next],
            closed: vec![SampleSeries::default(); next],
            steps,
        }
    }

    /// The step counts this recorder was made for.
    pub(crate) fn step_counts(&self) -> Vec<usize> {
        self.steps.iter().map(Vec::len).collect()
    }

    pub(crate) fn interval(&self) -> Duration {
        Duration::from_nanos(self.interval_ns)
    }

    /// Records one operation `op` that finished `done` after the start of
    /// measurement.
    pub(crate) fn record(&mut self, op: usize, done: Duration, latency: Duration, ok: bool) {
        // The stage's series is the sum of the operations' (added up as an
        // interval closes and at the end): one record per result, not two.
        // An out-of-range op counts in the stage's series only.
        let series = if op < self.steps.len() { op + 1 } else { 0 };
        self.record_in(&[series], done, latency, ok);
    }

    /// Records one request of step `step` of operation `op`, answered
    /// `done` after the start of measurement (kept only for operations of
    /// several steps).
    pub(crate) fn record_step(
        &mut self,
        op: usize,
        step: usize,
        done: Duration,
        latency: Duration,
        ok: bool,
    ) {
        if let Some(&Some(s)) = self.steps.get(op).and_then(|o| o.get(step)) {
            self.record_in(&[s], done, latency, ok);
        }
    }

    /// Records one result in each of `series`.
    fn record_in(&mut self, series: &[usize], done: Duration, latency: Duration, ok: bool) {
        let index =
            u64::try_from(done.as_nanos() / u128::from(self.interval_ns)).unwrap_or(u64::MAX);
        if index >= MAX_SAMPLES {
            return;
        }
        for &s in series {
            if let Some((oks, errors)) = self.counts.get_mut(s) {
                let i = index as usize;
                if oks.len() <= i {
                    oks.resize(i + 1, 0);
                    errors.resize(i + 1, 0);
                }
                if ok {
                    oks[i] += 1;
                } else {
                    errors[i] += 1;
                }
            }
        }
        let closed = self.closed[0].len() as u64;
        let index = index.max(closed);
        let pos = match self.open.iter().position(|o| o.index >= index) {
            Some(p) if self.open[p].index == index => p,
            Some(p) => {
                self.open.insert(p, self.new_open(index));
                p
            }
            None => {
                self.open.push_back(self.new_open(index));
                self.open.len() - 1
            }
        };
        let ns = u64::try_from(latency.as_nanos())
            .unwrap_or(u64::MAX)
            .min(MAX_TRACKABLE_NS);
        for &s in series {
            if let Some(h) = self.open[pos].series.get_mut(s) {
                if h.record(ns).is_err() {
                    h.saturating_record(ns);
                }
            }
        }
        while self.open.len() > OPEN {
            self.close_oldest();
        }
    }

    fn new_open(&self, index: u64) -> Open {
        Open {
            index,
            series: (0..self.closed.len()).map(|_| histogram()).collect(),
        }
    }

    /// Closes the oldest open interval, with empty ones before it.
    fn close_oldest(&mut self) {
        let Some(mut o) = self.open.pop_front() else {
            return;
        };
        if let Some((all, rest)) = o.series.split_first_mut() {
            for op in &rest[..self.steps.len()] {
                // Both auto-resize, so adding cannot go out of range.
                let _ = all.add(op);
            }
        }
        while (self.closed[0].len() as u64) < o.index {
            for s in &mut self.closed {
                s.push(0, 0, None);
            }
        }
        for (s, h) in self.closed.iter_mut().zip(&o.series) {
            s.push(h.len(), 0, Some(h));
        }
    }

    /// The samples of the whole intervals of `measured` (a partial last
    /// interval is left out).
    pub(crate) fn finish(&self, measured: Duration) -> Finished {
        let mut r = self.clone();
        while !r.open.is_empty() {
            r.close_oldest();
        }
        // The stage's counts: its own (out-of-range ops) plus the ops'.
        if let Some(((oks, errors), rest)) = r.counts.split_first_mut() {
            for (op_oks, op_errors) in &rest[..self.steps.len()] {
                for (all, op) in [(&mut *oks, op_oks), (&mut *errors, op_errors)] {
                    if all.len() < op.len() {
                        all.resize(op.len(), 0);
                    }
                    for (a, b) in all.iter_mut().zip(op) {
                        *a += b;
                    }
                }
            }
        }
        let whole = u64::try_from(measured.as_nanos() / u128::from(self.interval_ns))
            .unwrap_or(u64::MAX)
            .min(MAX_SAMPLES) as usize;
        for (s, (oks, errors)) in r.closed.iter_mut().zip(&r.counts) {
            while s.len() < whole {
                s.push(0, 0, None);
            }
            let at = |v: &Vec<u64>, i: usize| v.get(i).copied().unwrap_or(0);
            s.ok = (0..s.len()).map(|i| at(oks, i)).collect();
            s.error = (0..s.len()).map(|i| at(errors, i)).collect();
            s.ok.truncate(whole);
            s.error.truncate(whole);
            s.p50_ns.truncate(whole);
            s.p99_ns.truncate(whole);
            s.p999_ns.truncate(whole);
        }
        let ops = self.steps.len();
        let mut series: Vec<Option<SampleSeries>> = r.closed.into_iter().map(Some).collect();
        let mut take = |i: usize| series.get_mut(i).and_then(Option::take).unwrap_or_default();
        let all = take(0);
        let op_series = (1..=ops).map(&mut take).collect();
        let steps = self
            .steps
            .iter()
            .map(|o| o.iter().map(|s| s.map(&mut take)).collect())
            .collect();
        Finished {
            samples: Samples {
                interval_seconds: self.interval().as_secs_f64(),
                all,
            },
            ops: op_series,
            steps,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn intervals_follow_the_planned_length() {
        assert_eq!(
            interval_for(Duration::from_secs(60)),
            Duration::from_secs(1)
        );
        assert_eq!(
            interval_for(Duration::from_secs(600)),
            Duration::from_secs(1)
        );
        assert_eq!(
            interval_for(Duration::from_secs(601)),
            Duration::from_secs(2)
        );
        assert_eq!(
            interval_for(Duration::from_secs(86_400)),
            Duration::from_secs(144)
        );
        assert_eq!(interval_for(Duration::ZERO), Duration::from_secs(1));
    }

    #[test]
    fn samples_count_each_whole_interval() {
        let mut r = IntervalRecorder::new(2, Duration::from_secs(1));
        // Second 0: 10 ok finds at 1 ms; second 1: nothing; second 2: 5
        // inserts at 10 ms, one failed; a late find for second 0 arrives
        // after second 2 (still open); second 3 is partial.
        for i in 0..10 {
            r.record(1, MS * (i * 50), MS, true);
        }
        for i in 0..5 {
            r.record(0, Duration::from_secs(2) + MS * i, MS * 10, i != 0);
        }
        r.record(1, MS * 999, MS * 3, true);
        r.record(1, Duration::from_millis(3500), MS, true);
        let Finished {
            samples: s, ops, ..
        } = r.finish(Duration::from_millis(3900));
        assert_eq!(s.interval_seconds, 1.0);
        assert_eq!(s.all.ok, [11, 0, 4]);
        assert_eq!(s.all.error, [0, 0, 1]);
        assert_eq!(ops[1].ok, [11, 0, 0]);
        assert_eq!(ops[0].ok, [0, 0, 4]);
        let near = |v: u64, ms: u64| (v as f64 - ms as f64 * 1e6).abs() <= ms as f64 * 1e6 * 0.01;
        assert!(near(s.all.p50_ns[0], 1), "{:?}", s.all.p50_ns);
        assert!(near(s.all.p999_ns[0], 3), "{:?}", s.all.p999_ns);
        assert_eq!(s.all.p99_ns[1], 0, "an empty interval has no latency");
        assert!(near(s.all.p50_ns[2], 10));
        // A measured time longer than the results pads with empty intervals.
        let s = r.finish(Duration::from_secs(5)).samples;
        assert_eq!(s.all.ok, [11, 0, 4, 1, 0]);
    }

    #[test]
    fn the_stages_series_is_the_operations_added_up() {
        // Interval 0: op 0 90 × 1 ms, op 1 10 × 100 ms, one result of an
        // out-of-range op at 1 s (it counts in the stage's series only);
        // interval 1 is closed before the end (OPEN later ones follow).
        let mut r = IntervalRecorder::new(2, Duration::from_secs(1));
        for i in 0..90 {
            r.record(0, MS * i, MS, true);
        }
        for i in 0..10 {
            r.record(1, MS * i, MS * 100, i != 0);
        }
        r.record(5, MS * 500, Duration::from_secs(1), true);
        r.record(1, Duration::from_secs(1), MS * 7, true);
        for sec in 2..(OPEN as u64 + 3) {
            r.record(0, Duration::from_secs(sec), MS, true);
        }
        let f = r.finish(Duration::from_secs(2));
        assert_eq!(f.samples.all.ok, [100, 1]);
        assert_eq!(f.samples.all.error, [1, 0]);
        assert_eq!(
            (f.ops[0].ok[0], f.ops[1].ok[0], f.ops[1].error[0]),
            (90, 9, 1)
        );
        let near = |v: u64, ms: u64| (v as f64 - ms as f64 * 1e6).abs() <= ms as f64 * 1e6 * 0.01;
        let all = &f.samples.all;
        assert!(near(all.p50_ns[0], 1), "{all:?}");
        assert!(near(all.p99_ns[0], 100), "{all:?}");
        assert!(near(all.p999_ns[0], 1000), "{all:?}");
        assert!(near(all.p50_ns[1], 7), "{all:?}");
        assert!(near(f.ops[1].p50_ns[0], 100), "{:?}", f.ops[1]);
    }

    #[test]
    fn a_result_for_a_closed_interval_counts_in_the_oldest_open_one() {
        let mut r = IntervalRecorder::new(1, Duration::from_secs(1));
        for sec in 0..(OPEN as u64 + 2) {
            r.record(0, Duration::from_secs(sec), MS, true);
        }
        // Intervals 0 and 1 are closed by now: a late 50 ms result counts
        // in interval 0, its latency in interval 2.
        r.record(0, Duration::ZERO, MS * 50, true);
        let s = r.finish(Duration::from_secs(OPEN as u64 + 2)).samples;
        assert_eq!(s.all.ok[..3], [2, 1, 1]);
        assert_eq!(s.all.ok.iter().sum::<u64>(), OPEN as u64 + 3);
        assert!(
            s.all.p50_ns[0] < 2_000_000 && s.all.p999_ns[2] > 49_000_000,
            "{s:?}"
        );
    }

    #[test]
    fn the_steps_of_an_operation_of_several_have_their_own_series() {
        // Op 0 single-call, op 1 of two steps.
        let mut r = IntervalRecorder::with_steps(&[1, 2], Duration::from_secs(1));
        r.record(0, MS * 10, MS, true);
        r.record_step(0, 0, MS * 10, MS, true);
        for i in 0..4 {
            r.record_step(1, 0, MS * (100 + i), MS * 2, true);
            r.record_step(1, 1, Duration::from_secs(1) + MS * i, MS * 20, i != 0);
            r.record(1, Duration::from_secs(1) + MS * i, MS * 22, i != 0);
        }
        let f = r.finish(Duration::from_secs(2));
        assert_eq!(f.samples.all.ok, [1, 3]);
        assert_eq!(f.ops[1].ok, [0, 3]);
        assert!(f.steps[0][0].is_none(), "a single call is its operation");
        let (read, write) = (
            f.steps[1][0].as_ref().unwrap(),
            f.steps[1][1].as_ref().unwrap(),
        );
        assert_eq!(
            (read.ok.clone(), read.error.clone()),
            (vec![4, 0], vec![0, 0])
        );
        assert_eq!(
            (write.ok.clone(), write.error.clone()),
            (vec![0, 3], vec![0, 1])
        );
        assert!(write.p50_ns[1] > 19_000_000 && read.p50_ns[0] < 3_000_000);
        // Requests never count in the stage's or the operation's series.
        assert_eq!(f.samples.all.error, [0, 1]);
    }
}
