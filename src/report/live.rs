//! The engine's side of stage reports. Each stage occurrence gets a
//! [`StageCollector`]; each worker keeps a [`StageBatch`] of its last few
//! results (no lock per operation) and hands it to the collector when it
//! fills, when the stage changes, and when the worker ends. The report
//! task ([`super::writer`]) writes the report (journal line + run log
//! line) once the last holder has let go of the collector, i.e. once every
//! operation of the stage has finished or been abandoned: operations in
//! flight at the stage end still count in it.
//!
//! Why batches and not a histogram per worker: open loop runs thousands of
//! workers, and an HdrHistogram covering seconds in ns is tens of KB; a
//! batch of 64 results is 1.5 KB and the collector's lock is taken once per
//! 64 operations per worker.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::writer::ReportWriter;
use super::{StageMeta, StageReport, StageStats, WorkerBatch};
use crate::error_kind::ErrorKind;
use crate::schedule::{Limit, Mode, Stage};
use crate::workload::OpSpec;

/// Results a worker keeps before handing them to the collector.
const BATCH: usize = 64;
/// ... or for at most this long (ns) when it runs few operations.
const HOLD_NS: u64 = 1_000_000_000;

/// What every stage report of one workload shares.
pub struct ReportContext {
    writer: ReportWriter,
    workload: String,
    ops: Vec<OpSpec>,
    extras: ReportExtras,
}

/// Takes a finished stage's report instead of the report task writing it
/// at once: the audit first runs its stage-end pass, then adds its
/// figures and hands the report back to the report task
/// ([`ReportWriter::write`]).
pub trait ReportSink: Send + Sync {
    /// The report of a stage that has ended.
    fn submit(&self, report: StageReport);
}

/// What a workload's reports carry beyond its own figures.
#[derive(Default, Clone)]
pub struct ReportExtras {
    /// The failovers the driver saw, listed in the stages they fell in.
    pub failovers: Option<Arc<crate::failover::Failover>>,
    /// Where finished reports go instead of straight to the run log.
    pub sink: Option<Arc<dyn ReportSink>>,
    /// In a cluster: the member its reports come from.
    pub member: Option<super::MemberReport>,
    /// The workload's thresholds: each report carries their verdicts.
    pub thresholds: Option<Arc<crate::threshold::monitor::ThresholdBook>>,
}

impl ReportContext {
    /// The context of workload `workload` with these operations (in the
    /// order `Op::op` indexes them), its reports written by `writer`.
    pub fn new(writer: ReportWriter, workload: &str, ops: &[OpSpec]) -> Arc<Self> {
        Self::with_extras(writer, workload, ops, ReportExtras::default())
    }

    /// As [`ReportContext::new`], with failovers, a sink and the member.
    pub fn with_extras(
        writer: ReportWriter,
        workload: &str,
        ops: &[OpSpec],
        extras: ReportExtras,
    ) -> Arc<Self> {
        Arc::new(ReportContext {
            writer,
            workload: workload.to_owned(),
            ops: ops.to_vec(),
            extras,
        })
    }
}

/// A handle on one stage occurrence's figures, held by the controller and
/// by every worker that runs operations of it. When the last handle is
/// dropped the report task builds and writes the report (see
/// [`ReportWriter`]): the handles carry the sending half of a channel
/// nothing is sent on, whose closing is the signal.
pub struct StageCollector {
    figures: Arc<StageFigures>,
    _open: tokio::sync::mpsc::Sender<()>,
}

impl std::ops::Deref for StageCollector {
    type Target = StageFigures;

    fn deref(&self) -> &StageFigures {
        &self.figures
    }
}

/// One stage occurrence's figures as the workers hand them over.
pub struct StageFigures {
    ctx: Arc<ReportContext>,
    stage: String,
    index: usize,
    cycle: u64,
    mode: &'static str,
    start: Instant,
    wall_start: DateTime<Utc>,
    warmup: Duration,
    measure_from: Instant,
    /// When and whether cut short; the first [`StageCollector::finish`] wins.
    ended: OnceLock<(Instant, bool)>,
    missed: AtomicU64,
    stats: Mutex<StageStats>,
    /// Count-based stages: the count, and each worker's batch.
    limit: Option<Limit>,
    workers: Mutex<Vec<WorkerBatch>>,
    /// A capacity search's probe, set by the controller once judged.
    probe: Mutex<Option<super::ProbeReport>>,
}

impl StageCollector {
    /// A collector for occurrence `cycle` of stage `index`, which started
    /// (or was scheduled to start) at `start`. Its report is written once
    /// every handle on it is gone.
    pub fn new(
        ctx: Arc<ReportContext>,
        stage: &Stage,
        index: usize,
        cycle: u64,
        start: Instant,
    ) -> Arc<Self> {
        let figures = Arc::new(StageFigures::new(ctx, stage, index, cycle, start));
        let (open, closed) = tokio::sync::mpsc::channel(1);
        figures.ctx.writer.close_when_done(figures.clone(), closed);
        Arc::new(StageCollector {
            figures,
            _open: open,
        })
    }
}

impl StageFigures {
    fn new(
        ctx: Arc<ReportContext>,
        stage: &Stage,
        index: usize,
        cycle: u64,
        start: Instant,
    ) -> Self {
        let ago = Instant::now().saturating_duration_since(start);
        let wall_start = Utc::now() - chrono::Duration::from_std(ago).unwrap_or_default();
        let warmup = stage.warmup();
        let mut stats =
            StageStats::with_steps(&ctx.ops.iter().map(|o| o.steps.len()).collect::<Vec<_>>());
        stats.set_sample_interval(super::samples::interval_for(
            stage.duration().saturating_sub(warmup),
        ));
        StageFigures {
            stats: Mutex::new(stats),
            ctx,
            stage: stage.name().to_owned(),
            index,
            cycle,
            mode: match stage.mode() {
                Mode::Rate => "rate",
                Mode::Concurrency => "concurrency",
            },
            start,
            wall_start,
            warmup,
            measure_from: start + warmup,
            ended: OnceLock::new(),
            missed: AtomicU64::new(0),
            limit: stage.limit(),
            workers: Mutex::new(Vec::new()),
            probe: Mutex::new(None),
        }
    }

    /// Marks the stage occurrence as a capacity search's probe.
    pub fn set_probe(&self, probe: super::ProbeReport) {
        *self.probe.lock().unwrap_or_else(PoisonError::into_inner) = Some(probe);
    }

    /// Marks the end of the stage: `at` its scheduled end, or the moment
    /// the run was stopped (`partial`). Later calls are ignored.
    pub fn finish(&self, at: Instant, partial: bool) {
        let _ = self.ended.set((at, partial));
    }

    /// Whether an operation intended to start at `at` counts in the report
    /// (it is not in the warm-up).
    pub fn measures(&self, at: Instant) -> bool {
        at >= self.measure_from
    }

    /// Counts `n` operations the schedule asked for after the warm-up and
    /// that were never issued.
    pub fn add_missed(&self, n: u64) {
        self.missed.fetch_add(n, Ordering::Relaxed);
    }

    /// One worker's part of a count-based stage: the operations it ran
    /// (after the warm-up) and the time from its first send to its last
    /// reply.
    fn add_worker(&self, worker: u32, operations: u64, seconds: f64) {
        if self.limit.is_none() || operations == 0 {
            return;
        }
        let mut w = self.workers.lock().unwrap_or_else(PoisonError::into_inner);
        match w.iter_mut().find(|b| b.worker == worker) {
            // The same worker again (it followed another stage between).
            Some(b) => {
                b.operations += operations;
                b.seconds += seconds;
            }
            None => w.push(WorkerBatch {
                worker,
                operations,
                seconds,
            }),
        }
    }

    fn absorb(&self, samples: &[Sample]) {
        let mut stats = self.stats.lock().unwrap_or_else(PoisonError::into_inner);
        for s in samples {
            let latency = Duration::from_nanos(s.latency_ns);
            if s.step == OPERATION {
                stats.record(
                    s.op as usize,
                    Duration::from_nanos(s.done_ns),
                    latency,
                    s.outcome,
                );
            } else {
                stats.record_request(
                    s.op as usize,
                    s.step as usize,
                    Duration::from_nanos(s.done_ns),
                    latency,
                    s.outcome,
                );
            }
        }
    }

    /// The report as of now (the stage's end if finished, else now).
    pub fn report(&self) -> StageReport {
        let (end, partial) = self
            .ended
            .get()
            .copied()
            .unwrap_or_else(|| (Instant::now(), true));
        let span = end.saturating_duration_since(self.start);
        let meta = StageMeta {
            workload: self.ctx.workload.clone(),
            stage: self.stage.clone(),
            stage_index: self.index,
            cycle: self.cycle,
            mode: self.mode,
            start: self.wall_start,
            end: self.wall_start + chrono::Duration::from_std(span).unwrap_or_default(),
            warmup: self.warmup.min(span),
            partial,
        };
        let mut stats = self
            .stats
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        stats.add_missed(self.missed.load(Ordering::Relaxed));
        let mut r = StageReport::build(self.ctx.writer.run(), &meta, &stats, &self.ctx.ops);
        r.member = self.ctx.extras.member.clone();
        r.probe = self
            .probe
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if let Some(limit) = self.limit {
            let (n, per_worker) = match limit {
                Limit::Total(n) => (n, false),
                Limit::PerWorker(n) => (n, true),
            };
            let mut workers = self
                .workers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            workers.sort_by_key(|w| w.worker);
            r.count = Some(super::CountReport {
                operations: n,
                per_worker,
                workers,
            });
        }
        r.thresholds = self.verdicts(&r);
        if let Some(f) = &self.ctx.extras.failovers {
            r.failovers = f
                .between(self.start.into_std(), end.into_std())
                .iter()
                .map(super::FailoverReport::from_record)
                .collect();
        }
        r
    }

    /// The verdicts of the workload's thresholds that apply in `r`'s stage,
    /// over the whole of `r` (this stage's, or the cluster's probe parts
    /// merged), with the crossings the sliding window saw.
    pub fn verdicts(&self, r: &StageReport) -> Vec<crate::threshold::ThresholdVerdict> {
        let Some(book) = &self.ctx.extras.thresholds else {
            return Vec::new();
        };
        let breaches = book.stage_breaches(&r.stage);
        super::verdicts::stage_verdicts(r, book.thresholds(), |name| {
            book.thresholds()
                .iter()
                .position(|t| t.name == name)
                .and_then(|i| breaches.get(i).copied())
                .unwrap_or(0)
        })
    }

    /// Where the finished report goes: the audit's sink, if any (it hands
    /// the report back to the report task after its stage-end pass).
    pub(super) fn sink(&self) -> Option<&Arc<dyn ReportSink>> {
        self.ctx.extras.sink.as_ref()
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// [`Sample::step`] of an operation's own sample (not a request's).
const OPERATION: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Sample {
    op: u32,
    /// The request's step, or [`OPERATION`].
    step: u32,
    outcome: Result<(), ErrorKind>,
    latency_ns: u64,
    done_ns: u64,
}

/// A worker's pending results for the stage it is in. Flushes on drop, so
/// a worker that ends (or is aborted) still delivers what it holds.
#[derive(Default)]
pub struct StageBatch {
    stage: Option<Arc<StageCollector>>,
    samples: Vec<Sample>,
    worker: u32,
    /// This worker's operations in the followed stage (after its warm-up),
    /// and the first send and last reply among them.
    run: Option<(u64, Instant, Instant)>,
}

impl StageBatch {
    /// An empty batch, following no stage.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch of worker `worker` (count-based stages report each
    /// worker's batch).
    pub fn for_worker(worker: u32) -> Self {
        let mut batch = Self::default();
        batch.worker = worker;
        batch
    }

    /// Follows the stage the worker is in now (`None` between stages):
    /// results of the previous stage are handed over and its collector let
    /// go, so its report is not held back by this worker.
    pub fn follow(&mut self, stage: Option<&Arc<StageCollector>>) {
        let same = match (&self.stage, stage) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            self.flush();
            self.hand_over_run();
            self.stage = stage.cloned();
        }
    }

    /// Tells the followed stage this worker's batch (count-based stages).
    fn hand_over_run(&mut self) {
        if let (Some(stage), Some((n, first, last))) = (&self.stage, self.run.take()) {
            let secs = last.saturating_duration_since(first).as_secs_f64();
            stage.add_worker(self.worker, n, secs);
        }
    }

    /// Records one operation of the followed stage, intended to start at
    /// `from` and finished at `done`. Warm-up operations are left out.
    #[inline]
    pub fn record(
        &mut self,
        op: usize,
        from: Instant,
        done: Instant,
        outcome: Result<(), ErrorKind>,
    ) {
        let Some(measure_from) = self.measured(from) else {
            return;
        };
        self.run = Some(match self.run {
            None => (1, from, done),
            Some((n, first, _)) => (n + 1, first, done),
        });
        self.push(Sample {
            op: u32::try_from(op).unwrap_or(u32::MAX),
            step: OPERATION,
            outcome,
            latency_ns: nanos(done.saturating_duration_since(from)),
            done_ns: nanos(done.saturating_duration_since(measure_from)),
        });
    }

    /// Records one request of step `step` of operation `op`, sent at
    /// `sent` and answered at `done`, for an operation intended to start
    /// at `from` (its requests count where it does: not in the warm-up).
    #[inline]
    pub fn record_request(
        &mut self,
        op: usize,
        step: usize,
        from: Instant,
        sent: Instant,
        done: Instant,
        outcome: Result<(), ErrorKind>,
    ) {
        let Some(measure_from) = self.measured(from) else {
            return;
        };
        self.push(Sample {
            op: u32::try_from(op).unwrap_or(u32::MAX),
            step: u32::try_from(step).unwrap_or(OPERATION - 1),
            outcome,
            latency_ns: nanos(done.saturating_duration_since(sent)),
            done_ns: nanos(done.saturating_duration_since(measure_from)),
        });
    }

    /// The start of measurement of the followed stage, if an operation
    /// intended to start at `from` counts in it.
    #[inline]
    fn measured(&self, from: Instant) -> Option<Instant> {
        let stage = self.stage.as_ref()?;
        stage.measures(from).then_some(stage.measure_from)
    }

    #[inline]
    fn push(&mut self, sample: Sample) {
        self.samples.push(sample);
        // Full, or holding results older than a second: the per-interval
        // samples of the report (1 s) get them while their interval is open.
        if self.samples.len() >= BATCH
            || sample.done_ns.saturating_sub(self.samples[0].done_ns) >= HOLD_NS
        {
            self.flush();
        }
    }

    /// Hands the pending results to the collector.
    pub fn flush(&mut self) {
        if let Some(stage) = &self.stage {
            if !self.samples.is_empty() {
                stage.absorb(&self.samples);
            }
        }
        self.samples.clear();
    }
}

impl Drop for StageBatch {
    fn drop(&mut self) {
        self.flush();
        self.hand_over_run();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::report::writer::{ReportTask, ReportWriter};
    use crate::report::RunInfo;
    use std::path::PathBuf;

    /// A context whose reports go to `log`, and the report task (to run,
    /// or to drop where only the figures matter).
    fn ctx(log: Option<PathBuf>) -> (Arc<ReportContext>, ReportTask) {
        let (writer, task) = ReportWriter::new(RunInfo::new(log));
        let ops = [OpSpec::single("insert"), OpSpec::single("find")];
        (ReportContext::new(writer, "w", &ops), task)
    }

    #[test]
    fn batches_reach_the_report_and_warmup_is_left_out() {
        let stage = Stage::rate("hold", 100.0, Duration::from_secs(10))
            .unwrap()
            .with_warmup(Duration::from_secs(2))
            .unwrap();
        let start = Instant::now();
        let c = StageCollector::new(ctx(None).0, &stage, 3, 1, start);
        let mut a = StageBatch::new();
        let mut b = StageBatch::new();
        a.follow(Some(&c));
        b.follow(Some(&c));
        // One op a second from 0 to 9 s on each worker, 5 ms each; the
        // first two seconds are warm-up.
        for s in 0..10 {
            let from = start + Duration::from_secs(s);
            let done = from + Duration::from_millis(5);
            a.record(1, from, done, Ok(()));
            b.record(
                0,
                from,
                done,
                if s == 9 {
                    Err(ErrorKind::Timeout)
                } else {
                    Ok(())
                },
            );
        }
        c.add_missed(4);
        // Below 64 results, a batch is handed over once it holds results a
        // second apart: here in pairs (2-3 s, …, 8-9 s), so all are in.
        assert_eq!(c.report().operations.ok, 15);
        a.follow(None);
        drop(b);
        c.finish(start + Duration::from_secs(10), false);
        let r = c.report();
        assert_eq!(r.operations.ok, 15);
        assert_eq!(r.operations.error, 1);
        assert_eq!(r.errors["timeout"], 1);
        assert_eq!(r.missed, 4);
        assert_eq!(r.duration_seconds, 8.0);
        assert_eq!(r.whole_seconds, 8);
        // Seconds 0..7 of measurement: 2 ok each, except the last (1).
        assert_eq!(r.ips_75, 2);
        assert_eq!(r.ips_99, 1);
        assert_eq!((r.stage_index, r.cycle, r.partial), (3, 1, false));
        assert_eq!(r.ops[1].operations.ok, 8);
        assert!(
            (5_000_000..5_010_000).contains(&r.latency_ns.max),
            "{:?}",
            r.latency_ns
        );
    }

    #[tokio::test]
    async fn the_report_task_writes_the_run_log_line_once_the_last_holder_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let stage = Stage::concurrency("c", 4, Duration::from_secs(5)).unwrap();
        let start = Instant::now();
        let (ctx, task) = ctx(Some(path.clone()));
        let task = tokio::spawn(task);
        let c = StageCollector::new(ctx, &stage, 0, 0, start);
        let mut batch = StageBatch::new();
        batch.follow(Some(&c));
        let stopped = start + Duration::from_secs(3);
        batch.record(0, start, stopped, Ok(()));
        // Stopped after 3 s: partial.
        c.finish(stopped, true);
        drop(c);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!path.exists(), "the batch still holds the stage");
        drop(batch);
        // The task ends once the report is written and no writer is left.
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the report task ends")
            .unwrap();
        let lines = crate::report::read(&path).unwrap();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].partial);
        assert_eq!(lines[0].mode, "concurrency");
        assert_eq!(lines[0].duration_seconds, 3.0);
        assert_eq!(lines[0].operations.ok, 1);
    }
}
