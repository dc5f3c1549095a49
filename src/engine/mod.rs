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

mod controller;
mod count;
mod prepare;
mod status;
mod worker;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::control::ControlState;
use crate::metrics::{OpMetrics, WorkloadMetrics};
use crate::mongo::Deployment;
use crate::report::live::StageCollector;
use crate::report::writer::ReportWriter;
use crate::schedule::{Schedule, Stage};
use crate::workload::Workload;

use count::CountProgress;
use worker::Worker;

pub use controller::fault;
pub use status::{Heartbeat, PrepareProgress, StageLabel, StageState, WorkloadStatus};

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
    /// Worker tasks: the open-loop bound on operations in flight, or the
    /// highest closed-loop concurrency, whichever is larger.
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
    run.status.set_stage(StageLabel {
        state: StageState::Preparing,
        ..Default::default()
    });
    if !prepare::prepare(&run, &cancel).await {
        run.status.set_stage(StageLabel {
            state: StageState::Stopped,
            ..Default::default()
        });
        return;
    }

    let (stage_tx, stage_rx) = watch::channel(Published::Idle);
    // Cancelled once the controller is done (or with the run).
    let workers_stop = cancel.child_token();
    let mut workers = JoinSet::new();
    let op_metrics: Arc<[OpMetrics]> = run.metrics.ops().into();
    for id in 0..run.workers.max(1) {
        let worker = Worker {
            id: id as u32,
            run: run.clone(),
            ops: op_metrics.clone(),
            stage: stage_rx.clone(),
            stop: workers_stop.clone(),
        };
        workers.spawn(worker.run());
    }

    controller::drive(&run, &stage_tx, &cancel).await;
    // Draining has its own deadline (grace); no ticks to watch.
    run.status.heartbeat.clear();

    let _ = stage_tx.send(Published::Done);
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
    run.metrics.inflight.set(0);
    run.metrics.schedule_lag_seconds.set(0.0);
    run.metrics.clear_stage();
    run.status.set_stage(StageLabel {
        state: StageState::Stopped,
        ..Default::default()
    });
}
