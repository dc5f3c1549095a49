//! The engine: drives one workload through its schedule. Worker tasks (no
//! task per operation; spawned as they are needed, up to the workload's
//! bound, see `crew`) execute operations; in open loop
//! they claim numbered tickets whose intended start times come from the
//! stage (`start + offset(i)`, absolute, no drift) and latency counts from
//! that intended instant, so a stalled server shows in the percentiles; in
//! closed loop the first N workers issue back to back. In-flight work is
//! bounded by the number of workers; what the schedule asked for and could
//! not be issued is counted as missed. Runtime control (a
//! `watch::Receiver<ControlState>`) pauses, overrides or scales the
//! current stage; the controller re-publishes it anchored at its start.

mod controller;
mod count_stage;
mod live_status;
mod prepare;
mod prepare_lease;
mod search;
mod worker;
mod worker_set;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::audit::{verify, Audit};
use crate::control::ControlState;
use crate::error_log::ErrorLog;
use crate::failover::Failover;
use crate::metrics::{OpMetrics, WorkloadMetrics};
use crate::mongo::Deployment;
use crate::report::live::{ReportExtras, StageCollector};
use crate::report::writer::ReportWriter;
use crate::schedule::{Schedule, Stage};
use crate::workload::Workload;

use count_stage::CountProgress;
use worker::Worker;

#[doc(hidden)]
pub use controller::fault;
pub use live_status::{Heartbeat, PrepareProgress, StageLabel, StageState, WorkloadStatus};
pub(crate) use prepare::prepare_steps;

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
    pub deployment: Deployment,
    pub metrics: WorkloadMetrics,
    /// Worker tasks at most (spawned as they are needed): the open-loop
    /// bound on operations in flight, or the highest closed-loop
    /// concurrency, whichever is larger.
    pub workers: usize,
    /// Open loop: an operation whose send is later than this behind its
    /// intended start is counted missed instead of sent.
    pub max_lag: Duration,
    pub seed: u64,
    pub status: Arc<WorkloadStatus>,
    /// Where this workload's stage reports go (the run's report task).
    pub reports: ReportWriter,
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
    pub failover: Arc<Failover>,
    /// The acknowledged-write audit, when the workload has `audit = true`.
    pub audit: Option<AuditSetup>,
    /// The workload's thresholds, watched while its schedule runs.
    pub thresholds: Option<Arc<crate::threshold::monitor::ThresholdBook>>,
    /// The whole run's token: a threshold aborting the run cancels it.
    pub run_cancel: CancellationToken,
}

/// A workload's audit and how its verification task runs.
pub struct AuditSetup {
    pub audit: Arc<Audit>,
    /// Background checks, ids per second (0: none).
    pub rate: f64,
    /// Longest wait for one audit query.
    pub timeout: Duration,
}

/// What the workers are told to do; replaced at every stage change.
#[derive(Clone)]
enum Published {
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

/// Runs the workload: its prepare steps (retried while the deployment is
/// unreachable), then its schedule until it ends or `cancel` fires; then
/// lets in-flight operations finish for up to `grace`.
pub async fn run(run: WorkloadRun, cancel: CancellationToken, grace: Duration) {
    let run = Arc::new(run);
    set_state(&run, StageState::Preparing);
    if !prepare::prepare(&run, &cancel).await {
        set_state(&run, StageState::Stopped);
        return;
    }

    // The schedule's time 0: now, or the cluster's shared epoch.
    let Some((t0, late, epoch)) = time_zero(&run, &cancel).await else {
        set_state(&run, StageState::Stopped);
        return;
    };

    // The audit's verification task writes the stage reports (after each
    // stage-end pass); without an audit they are written as they end.
    let verifier = run.audit.as_ref().map(|a| {
        verify::spawn(
            a.audit.clone(),
            a.rate,
            run.failover.subscribe(),
            a.timeout,
            run.reports.clone(),
        )
    });
    let extras = report_extras(&run, verifier.as_ref(), epoch.as_ref());

    let (stage_tx, stage_rx) = watch::channel(Published::Idle);
    // Cancelled once the controller is done (or with the run).
    let workers_stop = cancel.child_token();
    let op_metrics: Arc<[OpMetrics]> = run.metrics.ops().into();
    // One error log for all the workers: lines per class, not per worker.
    let errors = Arc::new(ErrorLog::default());
    // Workers are spawned as they are needed, up to `run.workers`.
    let crew = Worker::start_crew(
        run.clone(),
        op_metrics,
        errors,
        stage_rx,
        workers_stop.clone(),
    );

    let monitor_stop = cancel.child_token();
    let monitor = run.thresholds.clone().map(|book| {
        let status = run.status.clone();
        tokio::spawn(crate::threshold::monitor::watch(
            book,
            run.metrics.clone(),
            move || status.totals(),
            monitor_stop.clone(),
            cancel.clone(),
            run.run_cancel.clone(),
        ))
    });
    let finished =
        controller::drive(&run, &stage_tx, &cancel, (t0, late), epoch.as_ref(), extras).await;
    if let (Some(c), Some(e)) = (&run.cluster, epoch) {
        c.leave(&run.name, e, finished).await;
    }
    // Draining has its own deadline (grace); no ticks to watch.
    run.status.heartbeat.clear();
    monitor_stop.cancel();
    if let Some(m) = monitor {
        let _ = m.await;
    }

    let _ = stage_tx.send(Published::Done);
    workers_stop.cancel();
    drain(&run, &crew, grace).await;
    // The last stage's report waits for its audit pass: up to `grace`,
    // then it is written with the audit as far as it got.
    if let Some(v) = verifier {
        finish_audit(&run, v, grace).await;
    }
    run.metrics.inflight.set(0);
    run.metrics.schedule_lag_seconds.set(0.0);
    run.metrics.clear_stage();
    run.stage_index.set(-1);
    set_state(&run, StageState::Stopped);
}

/// Shows `state` (preparing, stopped) on `/status` with no stage.
fn set_state(run: &WorkloadRun, state: StageState) {
    run.status.set_stage(StageLabel {
        state,
        ..Default::default()
    });
}

/// The schedule's time 0 and whether this member joins it late: now when
/// alone, else the cluster's shared epoch with the membership it returns.
/// `None` when cancelled while joining the cluster.
async fn time_zero(
    run: &WorkloadRun,
    cancel: &CancellationToken,
) -> Option<(Instant, bool, Option<crate::cluster::Joined>)> {
    match &run.cluster {
        None => Some((Instant::now(), false, None)),
        Some(c) => {
            let joined = c.start(&run.name, cancel).await?;
            Some((joined.t0, joined.late, Some(joined)))
        }
    }
}

/// What goes into every stage report besides its figures: the thresholds,
/// the failovers, the audit's sink and, in a cluster, this member.
fn report_extras(
    run: &WorkloadRun,
    verifier: Option<&verify::Verifier>,
    epoch: Option<&crate::cluster::Joined>,
) -> ReportExtras {
    ReportExtras {
        thresholds: run.thresholds.clone(),
        failovers: Some(run.failover.clone()),
        sink: verifier.map(|v| v.sink.clone()),
        member: epoch.map(|j| {
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
    }
}

/// Lets the stopped workers finish their in-flight operations for up to
/// `grace`, then aborts the rest and waits for them to be dropped, so
/// their results reach the last stage's report.
async fn drain(run: &WorkloadRun, crew: &worker_set::Crew, grace: Duration) {
    let mut workers = crew.close();
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
}

/// Waits up to `grace` for the audit's last pass (the last stage's report
/// waits for it), then stops it: the report says how far it got.
async fn finish_audit(run: &WorkloadRun, v: verify::Verifier, grace: Duration) {
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
