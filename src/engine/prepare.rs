//! A workload's prepare steps, retried with backoff while they fail, with
//! their progress in `/status` and the journal.

use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::{PrepareProgress, WorkloadRun};
use crate::error_kind::classify;
use crate::error_kind::{permanent, Permanent};
use crate::exit::Exit;
use crate::mongo::shard::ShardError;
use crate::workload::shard::ShardPlan;
use crate::workload::PrepareStep;

/// The longest wait between two attempts of a failed prepare step (from
/// 0.5 s, doubling): a deployment back after an outage is prepared within
/// seconds, not half a minute later.
pub(super) const PREPARE_RETRY_MAX: Duration = Duration::from_secs(5);

/// Runs the prepare steps: all of them alone, in a cluster under the
/// prepare lease ([`super::prepare_lease`]). Returns false when
/// cancelled first.
pub(super) async fn prepare(run: &WorkloadRun, cancel: &CancellationToken) -> bool {
    match &run.cluster {
        None => prepare_steps(run, cancel, &run.workload.prepare()).await,
        Some(c) => super::prepare_lease::run(run, c, cancel).await,
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
    let progress = Progress::new(run, steps);
    let mut finished_docs = 0u64;
    // Documents inserted by this run (not found in place from an earlier one).
    let mut loaded = 0u64;
    progress.report(0, 0, 0);
    for (n, step) in steps.iter().enumerate() {
        let mut resumed_at: Option<u64> = None;
        let mut backoff = Duration::from_millis(500);
        loop {
            let started = std::time::Instant::now();
            let mut last_log = started;
            let name = &run.name;
            let on_progress = |done: u64, total: u64| {
                // The first call says what an earlier run left in place.
                let from = *resumed_at.get_or_insert(done);
                progress.report(n, finished_docs + done, loaded + done.saturating_sub(from));
                log_load_progress(name, n, (done, total), started, &mut last_log);
            };
            let result = match step {
                PrepareStep::Shard { plan } => match shard_step(run, plan, cancel).await {
                    Some(result) => result,
                    None => return false,
                },
                _ => tokio::select! {
                    r = run.deployment.prepare(step, on_progress) => r,
                    _ = cancel.cancelled() => return false,
                },
            };
            match result {
                Ok(()) => {
                    prepare_metrics.record_ok();
                    if let PrepareStep::Load { count, .. } = step {
                        finished_docs += count;
                        loaded += count.saturating_sub(resumed_at.unwrap_or(0));
                    }
                    progress.report(n + 1, finished_docs, loaded);
                    break;
                }
                Err(e) => {
                    let kind = classify(&e);
                    prepare_metrics.record_error(kind);
                    // The driver's reason in a sentence, not its
                    // `Kind: …, labels: {}, source: None` dump.
                    let reason = crate::error_kind::explain(&e);
                    if let Some(p) = permanent(&e) {
                        let (exit, message) = permanent_message(p, &run.name, n, step, &reason);
                        give_up(run, exit, &message);
                        return false;
                    }
                    tracing::warn!(
                        workload = %run.name,
                        step = n,
                        error_kind = %kind,
                        "prepare failed ({kind}): {reason}; retrying in {}",
                        humantime::format_duration(backoff)
                    );
                    tokio::select! {
                        _ = tokio::time::sleep(backoff) => {}
                        _ = cancel.cancelled() => return false,
                    }
                    backoff = (backoff * 2).min(PREPARE_RETRY_MAX);
                }
            }
        }
    }
    true
}

/// The prepare's progress as the metrics and `/status` show it: over all
/// load steps together (sysbench loads one per collection), documents of
/// the finished steps plus the current one's.
struct Progress<'a> {
    run: &'a WorkloadRun,
    steps: usize,
    documents_total: u64,
    started: std::time::Instant,
}

impl<'a> Progress<'a> {
    fn new(run: &'a WorkloadRun, steps: &[PrepareStep]) -> Self {
        let documents_total: u64 = steps
            .iter()
            .map(|s| match s {
                PrepareStep::Load { count, .. } => *count,
                _ => 0,
            })
            .sum();
        Progress {
            run,
            steps: steps.len(),
            documents_total,
            started: std::time::Instant::now(),
        }
    }

    /// `steps_done` steps finished, `docs_done` documents in place of
    /// which this run inserted `loaded` (the rate counts those).
    fn report(&self, steps_done: usize, docs_done: u64, loaded: u64) {
        let documents_total = self.documents_total;
        let ratio = if documents_total == 0 {
            1.0
        } else {
            (docs_done as f64 / documents_total as f64).min(1.0)
        };
        let rate = loaded as f64 / self.started.elapsed().as_secs_f64().max(1e-3);
        let done = steps_done == self.steps;
        self.run
            .metrics
            .prepare_progress
            .set(if done { 1.0 } else { ratio });
        self.run.status.set_prepare(PrepareProgress {
            steps_done,
            steps: self.steps,
            documents_done: docs_done,
            documents_total,
            ratio: if done { 1.0 } else { ratio },
            rate,
            eta_seconds: (rate > 0.0)
                .then(|| documents_total.saturating_sub(docs_done) as f64 / rate),
            done,
        });
    }
}

/// Logs step `n`'s progress (`done` of `total` documents) every 5 s and at
/// its end, with the rate and ETA since the attempt `started`.
fn log_load_progress(
    name: &str,
    n: usize,
    (done, total): (u64, u64),
    started: std::time::Instant,
    last_log: &mut std::time::Instant,
) {
    let now = std::time::Instant::now();
    if now.duration_since(*last_log) >= Duration::from_secs(5) || done == total {
        *last_log = now;
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
}

/// Runs a sharding step (shard key, presplit): the result to retry on as
/// any step's, or `None` to stop, when cancelled or when the deployment
/// cannot be sharded so (the run then ends with its exit status).
async fn shard_step(
    run: &WorkloadRun,
    plan: &ShardPlan,
    cancel: &CancellationToken,
) -> Option<Result<(), mongodb::error::Error>> {
    let shard = tokio::select! {
        r = run.deployment.shard(&run.name, plan) => r,
        _ = cancel.cancelled() => return None,
    };
    match shard {
        Ok(()) => Some(Ok(())),
        Err(ShardError::Retry(e)) => Some(Err(e)),
        // Not for retrying: stop the run with its status.
        Err(ShardError::Fatal { exit, message }) => {
            give_up(run, exit, &message);
            None
        }
    }
}

/// Ends the run at prepare: asking again cannot help. The message goes to
/// the journal, the exit status to `/status` and the process.
fn give_up(run: &WorkloadRun, exit: Exit, message: &str) {
    tracing::error!(workload = %run.name, exit = exit.code(), "prepare: {message}");
    run.status.set_fatal(exit.code());
    run.run_cancel.cancel();
}

/// The exit status and the message for prepare step `n` (`step`) of
/// `workload` answered for good with `reason`: what the server said, and
/// the way out.
fn permanent_message(
    p: Permanent,
    workload: &str,
    n: usize,
    step: &PrepareStep,
    reason: &str,
) -> (Exit, String) {
    let command = step.command();
    match p {
        Permanent::Unsupported => (
            Exit::Unsupported,
            format!(
                "workload {workload:?}, step {}: the server does not support {command} as this workload sends it ({reason}); {}",
                n + 1,
                step.way_out()
            ),
        ),
        Permanent::Refused => (
            Exit::Refused,
            format!(
                "workload {workload:?}, step {}: the server refused {command} to this user ({reason}); grant readWrite on the target database, which is all a run needs",
                n + 1
            ),
        ),
    }
}
