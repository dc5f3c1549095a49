//! The engine: drives one workload through its schedule. A fixed set of
//! worker tasks (no task per operation) executes operations; in open loop
//! they claim numbered tickets whose intended start times come from the
//! stage (`start + offset(i)`, absolute, no drift) and latency counts from
//! that intended instant, so a stalled server shows in the percentiles; in
//! closed loop the first N workers issue back to back. In-flight work is
//! bounded by the number of workers; what the schedule asked for and could
//! not be issued is counted as missed. Runtime control (a
//! `watch::Receiver<ControlState>`) pauses, overrides or scales the
//! current stage; the controller re-publishes it anchored at its start.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::audit::{verify, Audit, Pending};
use crate::control::{effective_stage, ControlState};
use crate::error_kind::ErrorKind;
use crate::error_log::ErrorLog;
use crate::metrics::failover::FailoverMetrics;
use crate::metrics::{OpMetrics, WorkloadMetrics};
use crate::report::live::{ReportContext, ReportExtras, StageBatch, StageCollector};
use crate::report::RunInfo;
use crate::schedule::{Limit, Mode, Schedule, Stage};
use crate::target::{classify, Target};
use crate::workload::{Action, Body, Op, OpSource, PrepareStep, Request, Workload};

/// The ticket counter of a finished stage: far past any stage's last
/// operation, so a late claim finds no intended start and waits for the
/// next stage (with room for any number of late increments).
const TICKETS_CLOSED: u64 = u64::MAX / 2;

/// Everything one workload's run needs.
pub struct WorkloadRun {
    pub name: String,
    pub workload: Arc<dyn Workload>,
    /// The stage list. A reload that changes only stages after the current
    /// one sends the edited list here; the controller takes it at the next
    /// stage boundary and keeps its position ([`Schedule::carry_position`]).
    pub schedule: watch::Receiver<Schedule>,
    pub target: Target,
    pub metrics: WorkloadMetrics,
    /// Worker tasks: the open-loop bound on operations in flight, or the
    /// highest closed-loop concurrency, whichever is larger.
    pub workers: usize,
    /// Open loop: an operation whose send is later than this behind its
    /// intended start is counted missed instead of sent.
    pub max_lag: Duration,
    pub seed: u64,
    pub status: Arc<WorkloadStatus>,
    /// The run this workload's stage reports belong to (id, run log path).
    pub run_info: Arc<RunInfo>,
    /// Runtime control (pause, overrides, scale); the controller re-publishes
    /// the stage whenever it changes. A receiver whose sender is gone (or
    /// that never changes) leaves the schedule as configured.
    pub control: watch::Receiver<ControlState>,
    /// In a cluster: the coordination (prepare lease, shared epoch,
    /// cluster-wide control); `None` runs alone.
    pub cluster: Option<crate::cluster::ClusterRun>,
    /// `mongoload_cluster_stage_index{workload}`: the stage it runs, which
    /// a cluster's members compare (a lone daemon exports it too).
    pub stage_index: prometheus::IntGauge,
    /// Failover: every write's outcome goes here (write outages), and the
    /// stage reports list the failovers it saw.
    pub failover: Arc<FailoverMetrics>,
    /// The acknowledged-write audit, when the workload has `audit = true`.
    pub audit: Option<AuditSetup>,
}

/// A workload's audit and how its verification task runs.
pub struct AuditSetup {
    pub audit: Arc<Audit>,
    /// Background checks, ids per second (0: none).
    pub rate: f64,
    /// Longest wait for one audit query.
    pub timeout: Duration,
}

/// Live figures of a workload for `/status` and the final summary.
#[derive(Debug, Default)]
pub struct WorkloadStatus {
    pub ok: AtomicU64,
    pub errors: AtomicU64,
    pub missed: AtomicU64,
    /// When the controller last ticked: the systemd watchdog pings only
    /// while every running workload's controller is alive.
    pub heartbeat: Heartbeat,
    stage: Mutex<StageLabel>,
    prepare: Mutex<PrepareProgress>,
}

/// How far the prepare steps are, as `/status` shows it: documents of all
/// load steps in place out of their total, the load rate and the ETA.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PrepareProgress {
    /// Prepare steps finished, of `steps`.
    pub steps_done: usize,
    pub steps: usize,
    /// Documents in place over all load steps, of `documents_total`.
    pub documents_done: u64,
    pub documents_total: u64,
    /// `documents_done / documents_total` (1 with nothing to load).
    pub ratio: f64,
    /// Documents per second inserted by this prepare so far.
    pub rate: f64,
    /// Seconds left at that rate; `None` before any progress.
    pub eta_seconds: Option<f64>,
    /// Whether every step has finished.
    pub done: bool,
}

/// When a workload's controller last ticked (it ticks at least once a
/// second while a stage runs), or "not watched" while the workload
/// prepares, drains or has stopped: those phases have no tick to miss.
#[derive(Debug, Default)]
pub struct Heartbeat {
    /// Microseconds since [`heartbeat_origin`] plus one; 0 = not watched.
    at: AtomicU64,
}

impl Heartbeat {
    /// Records a tick now.
    pub fn beat(&self) {
        let now = heartbeat_origin().elapsed().as_micros() as u64;
        self.at.store(now.saturating_add(1), Ordering::Relaxed);
    }

    /// Takes the workload out of the watch (schedule over, draining).
    pub fn clear(&self) {
        self.at.store(0, Ordering::Relaxed);
    }

    /// Time since the last tick; `None` when not watched.
    pub fn age(&self) -> Option<Duration> {
        let at = self.at.load(Ordering::Relaxed).checked_sub(1)?;
        let now = heartbeat_origin().elapsed();
        Some(now.saturating_sub(Duration::from_micros(at)))
    }
}

/// A fixed instant the heartbeats count from, so one atomic holds one.
fn heartbeat_origin() -> std::time::Instant {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(std::time::Instant::now)
}

/// Test-only fault injection: stalls every controller in the process so a
/// test can check that the systemd watchdog notices a wedged load loop
/// (`tests/watchdog_stall.rs`). Not part of the API; never set in
/// production, where the one cost is an atomic load per controller tick.
#[doc(hidden)]
pub mod fault {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;

    use tokio_util::sync::CancellationToken;

    static STALL: AtomicBool = AtomicBool::new(false);

    /// While `on`, controllers stop ticking (as a wedged loop would) until
    /// it is turned off again or the run is cancelled.
    pub fn stall_controllers(on: bool) {
        STALL.store(on, Ordering::SeqCst);
    }

    pub(super) async fn hold_while_stalled(cancel: &CancellationToken) {
        while STALL.load(Ordering::Relaxed) && !cancel.is_cancelled() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// The current stage as `/status` shows it.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct StageLabel {
    pub index: Option<usize>,
    pub name: String,
    pub rate: f64,
    pub concurrency: u32,
    pub state: &'static str,
}

impl WorkloadStatus {
    pub fn stage(&self) -> StageLabel {
        self.stage.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// The prepare progress (final once `done`).
    pub fn prepare(&self) -> PrepareProgress {
        self.prepare.lock().map(|p| p.clone()).unwrap_or_default()
    }

    pub(crate) fn set_prepare(&self, progress: PrepareProgress) {
        if let Ok(mut p) = self.prepare.lock() {
            *p = progress;
        }
    }

    fn set_stage(&self, label: StageLabel) {
        if let Ok(mut s) = self.stage.lock() {
            *s = label;
        }
    }
}

/// What the workers are told to do; replaced at every stage change.
#[derive(Clone)]
enum Phase {
    /// Nothing to do yet, or between stages.
    Idle,
    Stage(Arc<ActiveStage>),
    /// The schedule has ended or the run is stopping.
    Done,
}

struct ActiveStage {
    stage: Stage,
    start: Instant,
    /// Next open-loop ticket (operation number within the stage).
    next_ticket: AtomicU64,
    /// A count-based stage's progress, shared by every publication of the
    /// same stage occurrence.
    count: Option<Arc<CountProgress>>,
    /// The stage's report, written once the driver and every worker have
    /// let go of this stage.
    report: Arc<StageCollector>,
}

/// How far a count-based stage occurrence is: operations claimed (in all,
/// or per worker by the workers themselves) and settled (finished, or
/// missed in open loop). The controller ends the stage when every one of
/// its operations has settled.
struct CountProgress {
    limit: Limit,
    /// Operations the stage runs in all.
    target: u64,
    claimed: AtomicU64,
    settled: AtomicU64,
    complete: tokio::sync::Notify,
}

impl CountProgress {
    fn new(stage: &Stage) -> Option<Arc<CountProgress>> {
        let progress = CountProgress {
            limit: stage.limit()?,
            target: stage.operations_target()?,
            claimed: AtomicU64::new(0),
            settled: AtomicU64::new(0),
            complete: tokio::sync::Notify::new(),
        };
        // A cluster member's share of a count may be nothing at all.
        if progress.target == 0 {
            progress.complete.notify_one();
        }
        Some(Arc::new(progress))
    }

    /// Claims one operation of the stage for a worker that has run `mine`
    /// of them; false once the count is reached (the worker waits for the
    /// next stage).
    fn claim(&self, mine: u64) -> bool {
        match self.limit {
            Limit::PerWorker(n) => mine < n,
            Limit::Total(n) => {
                if self.claimed.fetch_add(1, Ordering::Relaxed) < n {
                    true
                } else {
                    self.claimed.fetch_sub(1, Ordering::Relaxed);
                    false
                }
            }
        }
    }

    /// Gives back a claim whose operation was not sent (its stage was
    /// re-published before it was due).
    fn unclaim(&self) {
        if let Limit::Total(_) = self.limit {
            self.claimed.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// One claimed operation finished or was missed.
    fn settle(&self) {
        if self.settled.fetch_add(1, Ordering::Relaxed) + 1 == self.target {
            self.complete.notify_one();
        }
    }
}

/// A worker's part in the count-based stage occurrence it is in: the
/// operations it ran of it (per-worker counts) and whether it holds a
/// claim on the next one. Timed stages claim nothing.
#[derive(Default)]
struct WorkerCount {
    stage: Option<Arc<CountProgress>>,
    mine: u64,
    claimed: bool,
}

impl WorkerCount {
    /// Claims the next operation of `active`; false once its count is
    /// reached (always true for a timed stage).
    fn claim(&mut self, active: &ActiveStage) -> bool {
        let Some(c) = &active.count else {
            self.claimed = false;
            return true;
        };
        if !self.stage.as_ref().is_some_and(|s| Arc::ptr_eq(s, c)) {
            self.stage = Some(c.clone());
            self.mine = 0;
        }
        self.claimed = c.claim(self.mine);
        self.mine += u64::from(self.claimed);
        self.claimed
    }

    /// Gives the claim back: the operation was not sent.
    fn unclaim(&mut self) {
        if let (true, Some(c)) = (std::mem::take(&mut self.claimed), &self.stage) {
            c.unclaim();
            self.mine -= 1;
        }
    }

    /// The claimed operation finished or was missed.
    fn settle(&mut self) {
        if let (true, Some(c)) = (std::mem::take(&mut self.claimed), &self.stage) {
            c.settle();
        }
    }
}

/// Runs the workload: its prepare steps (retried while the deployment is
/// unreachable), then its schedule until it ends or `cancel` fires; then
/// lets in-flight operations finish for up to `grace`.
pub async fn run(run: WorkloadRun, cancel: CancellationToken, grace: Duration) {
    let run = Arc::new(run);
    run.status.set_stage(StageLabel {
        state: "preparing",
        ..Default::default()
    });
    if !prepare(&run, &cancel).await {
        run.status.set_stage(StageLabel {
            state: "stopped",
            ..Default::default()
        });
        return;
    }

    // The schedule's time 0: now, or the cluster's shared epoch.
    let (t0, late, epoch) = match &run.cluster {
        None => (Instant::now(), false, None),
        Some(c) => match c.start(&run.name, &cancel).await {
            Some(joined) => (joined.t0, joined.late, Some(joined)),
            None => {
                run.status.set_stage(StageLabel {
                    state: "stopped",
                    ..Default::default()
                });
                return;
            }
        },
    };

    // The audit's verification task writes the stage reports (after each
    // stage-end pass); without an audit they are written as they end.
    let mut verifier = run
        .audit
        .as_ref()
        .map(|a| verify::spawn(a.audit.clone(), a.rate, run.failover.subscribe(), a.timeout));
    let extras = ReportExtras {
        failovers: Some(run.failover.clone()),
        sink: verifier.as_ref().map(|v| v.sink.clone()),
        member: epoch.as_ref().map(|j| {
            let member = run
                .cluster
                .as_ref()
                .map_or(crate::cluster::Member::SOLE, |c| c.member());
            crate::report::MemberReport {
                index: member.index,
                size: member.size,
                epoch: j
                    .start()
                    .to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                merged: Vec::new(),
            }
        }),
    };

    let (phase_tx, phase_rx) = watch::channel(Phase::Idle);
    let workers_stop = CancellationToken::new();
    let mut workers = JoinSet::new();
    let op_metrics: Arc<[OpMetrics]> = run.metrics.ops().into();
    // One error log for all the workers: lines per class, not per worker.
    let errors = Arc::new(ErrorLog::default());
    for id in 0..run.workers.max(1) {
        let worker = Worker {
            id: id as u32,
            run: run.clone(),
            ops: op_metrics.clone(),
            errors: errors.clone(),
            phase: phase_rx.clone(),
            stop: workers_stop.clone(),
        };
        workers.spawn(worker.run());
    }

    let finished = drive(&run, &phase_tx, &cancel, (t0, late), epoch.as_ref(), extras).await;
    if let (Some(c), Some(e)) = (&run.cluster, epoch) {
        c.leave(&run.name, e, finished).await;
    }
    // Draining has its own deadline (grace); no ticks to watch.
    run.status.heartbeat.clear();

    let _ = phase_tx.send(Phase::Done);
    workers_stop.cancel();
    let drained = tokio::time::timeout(grace, async {
        while workers.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(workload = %run.name, grace = ?grace, "in-flight operations did not finish within the grace period; abandoning them");
        workers.abort_all();
        // Wait for the aborted tasks to be dropped, so their results reach
        // the last stage's report before this function returns.
        while workers.join_next().await.is_some() {}
    }
    // The last stage's report waits for its audit pass: up to `grace`,
    // then it is written with the audit as far as it got.
    if let Some(v) = verifier.take() {
        let verify::Verifier {
            sink,
            stop,
            mut task,
        } = v;
        drop(sink);
        if tokio::time::timeout(grace, &mut task).await.is_err() {
            tracing::warn!(workload = %run.name, grace = ?grace, "the audit's last pass did not finish within the grace period; its report says so");
            stop.cancel();
            let _ = task.await;
        }
    }
    run.metrics.inflight.set(0);
    run.metrics.clear_stage();
    run.stage_index.set(-1);
    run.status.set_stage(StageLabel {
        state: "stopped",
        ..Default::default()
    });
}

/// Runs the prepare steps: all of them alone, in a cluster under the
/// prepare lease ([`crate::cluster::prepare`]). Returns false when
/// cancelled first.
async fn prepare(run: &WorkloadRun, cancel: &CancellationToken) -> bool {
    match &run.cluster {
        None => prepare_steps(run, cancel, &run.workload.prepare()).await,
        Some(c) => crate::cluster::prepare::run(run, c, cancel).await,
    }
}

/// Runs `steps` in order, retrying each with backoff while it fails (the
/// deployment may be down at start: that is counted, not fatal), keeping
/// the progress in `/status` and the metrics. Returns false when
/// cancelled first.
pub(crate) async fn prepare_steps(
    run: &WorkloadRun,
    cancel: &CancellationToken,
    steps: &[PrepareStep],
) -> bool {
    let prepare_metrics = &run.metrics.prepare;
    // Progress over all load steps together (sysbench loads one per
    // collection): documents of the finished steps plus the current one's.
    let documents_total: u64 = steps
        .iter()
        .map(|s| match s {
            PrepareStep::Load { count, .. } => *count,
            _ => 0,
        })
        .sum();
    let prepare_started = std::time::Instant::now();
    let mut finished_docs = 0u64;
    let report = |steps_done: usize, docs_done: u64, loaded: u64| {
        let ratio = if documents_total == 0 {
            1.0
        } else {
            (docs_done as f64 / documents_total as f64).min(1.0)
        };
        let rate = loaded as f64 / prepare_started.elapsed().as_secs_f64().max(1e-3);
        let done = steps_done == steps.len();
        run.metrics
            .prepare_progress
            .set(if done { 1.0 } else { ratio });
        run.status.set_prepare(PrepareProgress {
            steps_done,
            steps: steps.len(),
            documents_done: docs_done,
            documents_total,
            ratio: if done { 1.0 } else { ratio },
            rate,
            eta_seconds: (rate > 0.0)
                .then(|| documents_total.saturating_sub(docs_done) as f64 / rate),
            done,
        });
    };
    // Documents inserted by this run (not found in place from an earlier one).
    let mut loaded = 0u64;
    report(0, 0, 0);
    for (n, step) in steps.iter().enumerate() {
        let mut resumed_at: Option<u64> = None;
        let mut backoff = Duration::from_millis(500);
        loop {
            let started = std::time::Instant::now();
            let mut last_log = started;
            let name = &run.name;
            let progress = |done: u64, total: u64| {
                // The first call says what an earlier run left in place.
                let from = *resumed_at.get_or_insert(done);
                report(n, finished_docs + done, loaded + done.saturating_sub(from));
                let now = std::time::Instant::now();
                if now.duration_since(last_log) >= Duration::from_secs(5) || done == total {
                    last_log = now;
                    let secs = now.duration_since(started).as_secs_f64().max(1e-3);
                    let rate = done as f64 / secs;
                    let eta = if rate > 0.0 {
                        (total - done) as f64 / rate
                    } else {
                        f64::INFINITY
                    };
                    let percent = if total == 0 {
                        100.0
                    } else {
                        100.0 * done as f64 / total as f64
                    };
                    tracing::info!(workload = %name, step = n, "prepare: {done}/{total} documents ({percent:.1}%), {rate:.0} docs/s, ETA {eta:.0}s");
                }
            };
            let result = tokio::select! {
                r = run.target.prepare(step, progress) => r,
                _ = cancel.cancelled() => return false,
            };
            match result {
                Ok(()) => {
                    prepare_metrics.record_ok();
                    if let PrepareStep::Load { count, .. } = step {
                        finished_docs += count;
                        loaded += count.saturating_sub(resumed_at.unwrap_or(0));
                    }
                    report(n + 1, finished_docs, loaded);
                    break;
                }
                Err(e) => {
                    let kind = classify(&e);
                    prepare_metrics.record_error(kind);
                    tracing::warn!(workload = %run.name, step = n, error_kind = %kind, "prepare failed, retrying in {backoff:?}: {e}");
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = cancel.cancelled() => return false,
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
            }
        }
    }
    true
}

/// The controller: walks the schedule, publishes each stage (as runtime
/// control makes it effective) to the workers, keeps the target gauges
/// current, and counts the operations a stage asked for that were never
/// claimed. A control change mid-stage re-publishes the stage anchored at
/// its start, with the ticket counter moved to the first operation due
/// from now on.
///
/// `t0` is the schedule's time 0 (now, or a cluster's shared epoch);
/// `late`: the member joins its cluster's schedule mid-way, so the first
/// stage is published re-based at now; `extras` go into every stage
/// report (failovers, the audit's sink, the cluster member). Returns true
/// when the schedule has ended (false when cancelled).
async fn drive(
    run: &WorkloadRun,
    phase: &watch::Sender<Phase>,
    cancel: &CancellationToken,
    (mut t0, mut late): (Instant, bool),
    joined: Option<&crate::cluster::Joined>,
    extras: ReportExtras,
) -> bool {
    let member = run
        .cluster
        .as_ref()
        .map_or(crate::cluster::Member::SOLE, |c| c.member());
    // Schedule time a count-based stage did not use (it ended before its
    // cap): the stages after it move up by that much.
    let mut skipped = Duration::ZERO;
    let report_ctx =
        ReportContext::with_extras(run.run_info.clone(), &run.name, run.workload.ops(), extras);
    let mut schedules = run.schedule.clone();
    let mut schedule = schedules.borrow_and_update().clone();
    let mut cycles = vec![0u64; schedule.stages().len()];
    let mut control = run.control.clone();
    let mut control_open = true;
    loop {
        let now = Instant::now();
        if schedules.has_changed().unwrap_or(false) {
            let edited = schedules.borrow_and_update().clone();
            let at = schedule.carry_position(&edited, now - t0 + skipped);
            t0 = now.checked_sub(at).unwrap_or(now);
            skipped = Duration::ZERO;
            cycles.resize(edited.stages().len(), 0);
            schedule = edited;
            tracing::info!(workload = %run.name, "the edited stage list applies from here on; the position is kept");
        }
        let elapsed = now - t0 + skipped;
        let Some(occurrence) = schedule.occurrence(elapsed, chrono::Utc::now()) else {
            tracing::info!(workload = %run.name, "schedule finished");
            return true;
        };
        // now - (elapsed - occurrence.start), without going below t0.
        let start = (t0 + occurrence.start)
            .checked_sub(skipped)
            .unwrap_or(t0)
            .max(t0);
        let end = start + occurrence.duration;
        // A cluster member runs its share of the stage.
        let shared = occurrence.stage.as_ref().map(|s| member.share(s));
        let scheduled = shared.as_ref();
        let label = scheduled.map_or(IDLE_STAGE, |s| s.name());
        run.metrics.set_stage(label);
        run.stage_index
            .set(occurrence.index.map_or(-1, |i| i as i64));
        log_stage(run, occurrence.index, scheduled, occurrence.duration);
        let mut ctl = control.borrow_and_update().clone();
        let report = scheduled.zip(occurrence.index).map(|(stage, index)| {
            // The cycle: how many times this stage has run before (a
            // repeating list, or a window that comes back).
            let cycle = cycles[index];
            cycles[index] += 1;
            StageCollector::new(report_ctx.clone(), stage, index, cycle, start)
        });
        let count = scheduled
            .and_then(|s| effective_stage(s, &ctl).or_else(|| Some(s.clone())))
            .and_then(|s| CountProgress::new(&s));
        let mut active = publish(
            phase,
            scheduled,
            &ctl,
            (start, std::mem::take(&mut late)),
            report.as_ref(),
            count.as_ref(),
        );
        let counted = async {
            let Some(c) = &count else {
                return std::future::pending().await;
            };
            c.complete.notified().await;
            // A cluster's count-based stage ends when every member has run
            // its share: at the same instant for all of them.
            match (&run.cluster, joined) {
                (Some(cluster), Some(joined)) => {
                    let key = format!(
                        "{}_{}",
                        occurrence.start.as_millis(),
                        occurrence.index.unwrap_or(0)
                    );
                    cluster.count_stage_end(&run.name, joined, &key, end).await
                }
                _ => Instant::now(),
            }
        };
        tokio::pin!(counted);
        let mut ended = end;

        // Refresh the target gauges every second so ramps show as ramps.
        loop {
            let elapsed = Instant::now().saturating_duration_since(start);
            update_targets(
                run,
                occurrence.index,
                label,
                active.as_deref(),
                elapsed,
                &ctl,
            );
            run.status.heartbeat.beat();
            let tick = (Instant::now() + Duration::from_secs(1)).min(end);
            tokio::select! {
                _ = tokio::time::sleep_until(tick) => {}
                at = &mut counted => {
                    // Every operation of a count-based stage has settled.
                    ended = at;
                    skipped += end.saturating_duration_since(ended);
                    break;
                }
                changed = control.changed(), if control_open => {
                    if changed.is_err() {
                        control_open = false;
                        continue;
                    }
                    let new = control.borrow_and_update().clone();
                    let effective = scheduled.and_then(|s| effective_stage(s, &new));
                    if effective.as_ref() != active.as_ref().map(|a| &a.stage) {
                        if let Some(a) = &active {
                            settle(run, a, Instant::now());
                        }
                        active = publish(
                            phase,
                            scheduled,
                            &new,
                            (start, true),
                            report.as_ref(),
                            count.as_ref(),
                        );
                    }
                    ctl = new;
                }
                _ = cancel.cancelled() => {
                    if let Some(a) = &active {
                        settle(run, a, Instant::now());
                    }
                    if let Some(r) = &report {
                        r.finish(Instant::now(), true);
                    }
                    return false;
                }
            }
            fault::hold_while_stalled(cancel).await;
            if Instant::now() >= end {
                break;
            }
        }
        if let Some(a) = &active {
            settle(run, a, ended);
        }
        if let Some(r) = &report {
            r.finish(ended, false);
        }
    }
}

/// The `stage` label while a window schedule has no level to run.
const IDLE_STAGE: &str = "idle";

/// Tells the workers what to run: the effective stage, or idle. `rebase`:
/// the stage is re-published mid-way, so tickets due before now are
/// skipped (they belonged to a pause or another level).
fn publish(
    phase: &watch::Sender<Phase>,
    scheduled: Option<&Stage>,
    control: &ControlState,
    (start, rebase): (Instant, bool),
    report: Option<&Arc<StageCollector>>,
    count: Option<&Arc<CountProgress>>,
) -> Option<Arc<ActiveStage>> {
    let (Some(stage), Some(report)) = (scheduled.and_then(|s| effective_stage(s, control)), report)
    else {
        let _ = phase.send(Phase::Idle);
        return None;
    };
    let first = if rebase {
        stage.first_ticket_at(Instant::now().saturating_duration_since(start))
    } else {
        0
    };
    let active = Arc::new(ActiveStage {
        stage,
        start,
        next_ticket: AtomicU64::new(first),
        count: count.cloned(),
        report: report.clone(),
    });
    let _ = phase.send(Phase::Stage(active.clone()));
    Some(active)
}

/// Open loop: counts as missed the operations of `active` due before `at`
/// that no worker claimed (all were busy).
fn settle(run: &WorkloadRun, active: &ActiveStage, at: Instant) {
    let stage = &active.stage;
    if stage.mode() != Mode::Rate {
        return;
    }
    let due = stage.first_ticket_at(at.saturating_duration_since(active.start));
    // Close the tickets in the same atomic step as reading them: a lagging
    // worker could otherwise still claim (and send) a ticket just counted
    // as missed.
    let claimed = active
        .next_ticket
        .swap(TICKETS_CLOSED, Ordering::Relaxed)
        .min(due);
    let unclaimed = due - claimed;
    // Tickets are claimed in order: the unclaimed ones are the last, and
    // only those after the warm-up count in the stage report.
    let due_in_warmup = stage.first_ticket_at(stage.warmup()).min(due);
    active.report.add_missed(due - claimed.max(due_in_warmup));
    if unclaimed > 0 {
        run.metrics.missed_operations.inc_by(unclaimed);
        run.status.missed.fetch_add(unclaimed, Ordering::Relaxed);
        tracing::warn!(workload = %run.name, stage = %stage.name(), "{unclaimed} operations missed: all {} workers were busy", run.workers);
    }
}

fn log_stage(run: &WorkloadRun, index: Option<usize>, stage: Option<&Stage>, duration: Duration) {
    let what = match (index, stage) {
        (Some(index), Some(stage)) => format!("stage {index} {stage}"),
        _ => format!(
            "idle outside every window for {}",
            humantime::format_duration(Duration::from_secs(duration.as_secs()))
        ),
    };
    tracing::info!(workload = %run.name, stage = %stage.map_or(IDLE_STAGE, |s| s.name()), "{what}");
}

fn update_targets(
    run: &WorkloadRun,
    index: Option<usize>,
    label: &str,
    active: Option<&ActiveStage>,
    elapsed: Duration,
    control: &ControlState,
) {
    let (rate, concurrency) = match active.map(|a| (&a.stage, a.stage.mode())) {
        Some((stage, Mode::Rate)) => (stage.rate_at(elapsed), 0),
        // More workers than the pool has cannot run: show what runs.
        Some((stage, Mode::Concurrency)) => (
            0.0,
            stage
                .concurrency_at(elapsed)
                .min(u32::try_from(run.workers).unwrap_or(u32::MAX)),
        ),
        None => (0.0, 0),
    };
    run.metrics.target_rate.set(rate);
    run.metrics.target_concurrency.set(i64::from(concurrency));
    let state = if control.paused {
        "paused"
    } else if active.is_none() {
        "idle"
    } else {
        "running"
    };
    run.status.set_stage(StageLabel {
        index,
        name: label.to_owned(),
        rate,
        concurrency,
        state,
    });
}

struct Worker {
    id: u32,
    run: Arc<WorkloadRun>,
    ops: Arc<[OpMetrics]>,
    errors: Arc<ErrorLog>,
    phase: watch::Receiver<Phase>,
    stop: CancellationToken,
}

impl Worker {
    async fn run(mut self) {
        let mut source = self
            .run
            .workload
            .worker(self.id, self.run.seed.wrapping_add(u64::from(self.id)));
        let errors = self.errors.clone();
        let mut batch = StageBatch::for_worker(self.id);
        let mut count = WorkerCount::default();
        loop {
            if self.stop.is_cancelled() {
                return;
            }
            let phase = self.phase.borrow_and_update().clone();
            batch.follow(match &phase {
                Phase::Stage(active) => Some(&active.report),
                _ => None,
            });
            let active = match phase {
                Phase::Done => return,
                Phase::Idle => {
                    if !self.wait_change().await {
                        return;
                    }
                    continue;
                }
                Phase::Stage(active) => active,
            };
            if !count.claim(&active) {
                // The count is reached: nothing more to send in this stage.
                if !self.wait_change().await {
                    return;
                }
                continue;
            }
            match active.stage.mode() {
                Mode::Rate => {
                    let i = active.next_ticket.fetch_add(1, Ordering::Relaxed);
                    let Some(offset) = active.stage.intended_offset(i) else {
                        // Past the end of this stage: wait for the next one.
                        count.unclaim();
                        if !self.wait_change().await {
                            return;
                        }
                        continue;
                    };
                    let intended = active.start + offset;
                    // Biased: a ticket already due when the run stops is
                    // still sent (the schedule asked for it and it was
                    // claimed, so it is not counted missed); only tickets
                    // still in the future are dropped on stop.
                    tokio::select! {
                        // A ticket already due is sent even if the phase
                        // changed meanwhile: it was claimed, so dropping it
                        // would lose it from the missed count.
                        biased;
                        _ = tokio::time::sleep_until(intended) => {}
                        // Re-published (control change, next stage): this
                        // ticket is not due yet and the new phase has its
                        // own, so drop it rather than send a burst.
                        changed = self.phase.changed() => {
                            count.unclaim();
                            if changed.is_err() {
                                return;
                            }
                            continue;
                        }
                        _ = self.stop.cancelled() => return,
                    }
                    let lag = Instant::now().saturating_duration_since(intended);
                    self.run.metrics.schedule_lag_seconds.set(lag.as_secs_f64());
                    self.run.metrics.send_lateness.observe(lag.as_secs_f64());
                    if lag > self.run.max_lag {
                        self.run.metrics.missed_operations.inc();
                        self.run.status.missed.fetch_add(1, Ordering::Relaxed);
                        if active.report.measures(intended) {
                            active.report.add_missed(1);
                        }
                        count.settle();
                        continue;
                    }
                    self.execute(source.as_mut(), intended, &errors, &mut batch)
                        .await;
                    count.settle();
                }
                Mode::Concurrency => {
                    let elapsed = Instant::now().saturating_duration_since(active.start);
                    if self.id >= active.stage.concurrency_at(elapsed) {
                        count.unclaim();
                        // Not needed at this level; look again when the
                        // stage changes or, for ramps, a little later.
                        tokio::select! {
                            changed = self.phase.changed() => if changed.is_err() { return },
                            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                            _ = self.stop.cancelled() => return,
                        }
                        continue;
                    }
                    if self.phase.has_changed().unwrap_or(true) {
                        count.unclaim();
                        continue;
                    }
                    let start = Instant::now();
                    self.execute(source.as_mut(), start, &errors, &mut batch)
                        .await;
                    count.settle();
                }
            }
        }
    }

    /// Waits for the next phase; false when the run is over.
    async fn wait_change(&mut self) -> bool {
        tokio::select! {
            changed = self.phase.changed() => changed.is_ok(),
            _ = self.stop.cancelled() => false,
        }
    }

    /// Runs one scheduled operation intended to start at `from`: its
    /// requests in order (each recorded under its step), then the
    /// operation once, with the latency of the whole. A failing request
    /// ends the operation, which fails with that request's error kind.
    async fn execute(
        &self,
        source: &mut dyn OpSource,
        from: Instant,
        errors: &ErrorLog,
        batch: &mut StageBatch,
    ) {
        let Op { op, body } = source.next_op();
        let metrics = &self.ops[op];
        self.run.metrics.inflight.inc();
        let sent = Instant::now();
        let outcome = match body {
            Body::One(action) => self.request((op, from), 0, action, None, None, batch).await,
            Body::Steps(requests) => self.steps((op, from), requests, batch).await,
            Body::Transaction {
                requests,
                commit_step,
            } => {
                self.transaction((op, from), requests, commit_step, batch)
                    .await
            }
        };
        let done = Instant::now();
        let latency = done.saturating_duration_since(from);
        self.run.metrics.inflight.dec();
        metrics.record_service(done.saturating_duration_since(sent));
        batch.record(
            op,
            from,
            done,
            outcome.as_ref().map(|_| ()).map_err(|f| f.kind),
        );
        match outcome {
            Ok(docs) => {
                metrics.record_ok(latency, docs);
                self.run.status.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(f) => {
                metrics.record_error(latency, f.kind);
                self.run.status.errors.fetch_add(1, Ordering::Relaxed);
                let steps = &self.run.workload.ops()[op].steps;
                let step = f
                    .step
                    .and_then(|s| steps.get(s))
                    .map_or(metrics.name(), |s| &**s);
                errors.log(&self.run.name, metrics.name(), step, f.kind, &f.error);
            }
        }
    }

    /// Sends one request of step `step` of operation `op` intended to start
    /// at `from` (in `session`'s transaction if given) and records it under
    /// its step. Returns the documents that count as the operation's. An
    /// audited insert goes into the ledger once acknowledged, or into
    /// `acks` when given (a transaction's inserts count once committed).
    async fn request(
        &self,
        op: OpAt,
        step: usize,
        action: Action,
        session: Option<&mut mongodb::ClientSession>,
        acks: Option<&mut Vec<Pending>>,
        batch: &mut StageBatch,
    ) -> Result<u64, Failed> {
        let write = crate::audit::ids::is_write(&action);
        let audit = self.run.audit.as_ref().map(|a| &a.audit);
        let pending = audit.and_then(|a| a.before_send(&action));
        let sent = Instant::now();
        let outcome = match session {
            None => self.run.target.execute(action).await,
            Some(session) => self.run.target.execute_in(action, session).await,
        };
        let result = self.finish_request(op, step, sent, outcome, write, batch);
        if let (Some(p), Some(a)) = (pending, audit) {
            match (&result, acks) {
                (Ok(_), Some(acks)) => acks.push(p),
                (Ok(_), None) => a.acknowledge(p),
                (Err(_), _) => a.abandon(p),
            }
        }
        result
    }

    /// Records a request sent at `sent` that just returned `outcome`
    /// (`write`: it inserts, updates or deletes, so its outcome feeds the
    /// write-outage clock).
    fn finish_request(
        &self,
        (op, from): OpAt,
        step: usize,
        sent: Instant,
        outcome: Result<u64, mongodb::error::Error>,
        write: bool,
        batch: &mut StageBatch,
    ) -> Result<u64, Failed> {
        let done = Instant::now();
        let result = outcome.map_err(|error| Failed {
            step: Some(step),
            kind: classify(&error),
            error,
        });
        if write {
            self.run.failover.write_result(
                sent.into_std(),
                done.into_std(),
                result.as_ref().map(|_| ()).map_err(|f| f.kind),
            );
        }
        let counted = match self.ops[op].step(step) {
            Some(m) => {
                m.record(
                    done.saturating_duration_since(sent),
                    result.as_ref().map(|d| *d).map_err(|f| f.kind),
                );
                m.counts_documents()
            }
            None => true,
        };
        batch.record_request(
            op,
            step,
            from,
            sent,
            done,
            result.as_ref().map(|_| ()).map_err(|f| f.kind),
        );
        result.map(|docs| if counted { docs } else { 0 })
    }

    /// Runs an operation's requests in order; the first failure ends it.
    async fn steps(
        &self,
        op: OpAt,
        requests: Vec<Request>,
        batch: &mut StageBatch,
    ) -> Result<u64, Failed> {
        let mut docs = 0;
        for r in requests {
            docs += self
                .request(op, r.step, r.action, None, None, batch)
                .await?;
        }
        Ok(docs)
    }

    /// Runs an operation's requests in one multi-document transaction and
    /// commits it (a request of `commit_step`). The whole transaction is
    /// retried, a few times at most, on a `TransientTransactionError`, and
    /// the commit on an `UnknownTransactionCommitResult`; every attempt's
    /// requests are counted, the operation once.
    async fn transaction(
        &self,
        op: OpAt,
        requests: Vec<Request>,
        commit_step: usize,
        batch: &mut StageBatch,
    ) -> Result<u64, Failed> {
        use mongodb::error::{TRANSIENT_TRANSACTION_ERROR, UNKNOWN_TRANSACTION_COMMIT_RESULT};
        const ATTEMPTS: u32 = 5;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut session =
                self.run
                    .target
                    .start_transaction()
                    .await
                    .map_err(|error| Failed {
                        step: None,
                        kind: classify(&error),
                        error,
                    })?;
            let mut docs = 0;
            let mut failed = None;
            let mut acks = Vec::new();
            for r in &requests {
                let action = r.action.clone();
                match self
                    .request(
                        op,
                        r.step,
                        action,
                        Some(&mut session),
                        Some(&mut acks),
                        batch,
                    )
                    .await
                {
                    Ok(n) => docs += n,
                    Err(f) => {
                        failed = Some(f);
                        break;
                    }
                }
            }
            if failed.is_none() {
                let mut commits = 0;
                failed = loop {
                    commits += 1;
                    let sent = Instant::now();
                    let outcome = self.run.target.commit(&mut session).await;
                    let outcome = outcome.map(|()| 0u64);
                    match self.finish_request(op, commit_step, sent, outcome, true, batch) {
                        Ok(_) => {
                            if let Some(a) = &self.run.audit {
                                acks.drain(..).for_each(|p| a.audit.acknowledge(p));
                            }
                            return Ok(docs);
                        }
                        Err(f)
                            if commits < ATTEMPTS
                                && f.error.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT) => {}
                        Err(f) => break Some(f),
                    }
                };
            } else {
                self.run.target.abort(&mut session).await;
            }
            // Not committed: its inserts are not acknowledged.
            if let Some(a) = &self.run.audit {
                acks.drain(..).for_each(|p| a.audit.abandon(p));
            }
            let Some(f) = failed else {
                return Ok(docs);
            };
            if attempt >= ATTEMPTS || !f.error.contains_label(TRANSIENT_TRANSACTION_ERROR) {
                return Err(f);
            }
        }
    }
}

/// An operation in flight: its index and intended start.
type OpAt = (usize, Instant);

/// Why an operation failed: the request (step) that failed, its error and
/// error class. `step` is `None` when no request could be sent (a
/// transaction's session could not start).
struct Failed {
    step: Option<usize>,
    kind: ErrorKind,
    error: mongodb::error::Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heartbeat_is_unwatched_until_the_first_beat_and_after_clear() {
        let h = Heartbeat::default();
        assert_eq!(h.age(), None);
        h.beat();
        let age = h.age().expect("watched after a beat");
        assert!(age < Duration::from_secs(1), "{age:?}");
        std::thread::sleep(Duration::from_millis(30));
        assert!(h.age().unwrap() >= Duration::from_millis(30));
        h.beat();
        assert!(h.age().unwrap() < Duration::from_millis(30));
        h.clear();
        assert_eq!(h.age(), None);
    }
}
