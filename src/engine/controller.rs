//! The controller of one workload: walks the schedule, publishes each
//! stage to the workers, keeps the target gauges and `/status` current,
//! and counts what was never claimed as missed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::count_stage::CountProgress;
use super::{ActiveStage, Published, StageLabel, StageState, WorkloadRun, TICKETS_CLOSED};
use crate::control::{effective_stage, ControlState};
use crate::report::live::{ReportContext, ReportExtras, StageCollector};
use crate::schedule::{Mode, Occurrence, Stage};

/// Test-only fault injection: stalls every controller in the process so a
/// test can check that the systemd watchdog notices a wedged load loop
/// (`tests/watchdog_stall.rs`). A runtime switch, off unless a test turns
/// it on (nothing else calls [`fault::stall_controllers`]): one relaxed
/// load per controller tick (once a second), and the library is compiled
/// once for the binary and the tests instead of once more with a feature.
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
pub(super) async fn drive(
    run: &WorkloadRun,
    stage_tx: &watch::Sender<Published>,
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
        ReportContext::with_extras(run.reports.clone(), &run.name, run.workload.ops(), extras);
    let mut schedules = run.schedule.clone();
    let mut schedule = schedules.borrow_and_update().clone();
    let mut c = Controller {
        run,
        stage_tx,
        cancel,
        joined,
        report_ctx,
        cycles: vec![0u64; schedule.stages().len()],
        control: run.control.clone(),
        control_open: true,
    };
    loop {
        let now = Instant::now();
        if schedules.has_changed().unwrap_or(false) {
            let edited = schedules.borrow_and_update().clone();
            let at = schedule.carry_position(&edited, now - t0 + skipped);
            t0 = now.checked_sub(at).unwrap_or(now);
            skipped = Duration::ZERO;
            c.cycles.resize(edited.stages().len(), 0);
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
        let late = std::mem::take(&mut late);
        // A capacity search runs its probes in place of the stage's level.
        let search = scheduled.filter(|s| s.search_spec().is_some());
        let unused = if let (Some(stage), Some(index)) = (search, occurrence.index) {
            c.search(stage, index, &occurrence, end, late).await
        } else {
            c.run_stage(scheduled, label, &occurrence, (start, end), late)
                .await
        };
        let Some(unused) = unused else {
            return false;
        };
        skipped += unused;
    }
}

/// What [`drive`] keeps from one occurrence to the next besides its place
/// in the schedule: where it publishes and reports, the runtime control it
/// follows, and how many times each stage has run.
struct Controller<'a> {
    run: &'a WorkloadRun,
    stage_tx: &'a watch::Sender<Published>,
    cancel: &'a CancellationToken,
    joined: Option<&'a crate::cluster::Joined>,
    report_ctx: Arc<ReportContext>,
    /// Per stage, how many times it has run before (a repeating list, or a
    /// window that comes back): the cycle of its next report.
    cycles: Vec<u64>,
    control: watch::Receiver<ControlState>,
    /// False once the control channel has closed: stop waiting on it.
    control_open: bool,
}

impl Controller<'_> {
    /// Runs a capacity search stage (stage `index` of the schedule) from
    /// now to at most `end`, its probes in place of the stage's level.
    /// A window then idles until it closes; a stage list moves on when the
    /// search has ended (for a cluster, when every member's has). Returns
    /// the schedule time the search left unused, `None` when cancelled.
    async fn search(
        &mut self,
        stage: &Stage,
        index: usize,
        occurrence: &Occurrence,
        end: Instant,
        late: bool,
    ) -> Option<Duration> {
        let run = self.run;
        // The occurrence as every cluster member names it: a window by
        // its end on the wall clock, a listed stage by its offset.
        let key = format!(
            "{}_{index}",
            occurrence
                .until
                .map_or(occurrence.start.as_millis() as i64, |u| u
                    .timestamp_millis())
        );
        let cluster = run.cluster.as_ref().zip(self.joined);
        let ended = if late && cluster.is_some() {
            // The others' probes are under way: joining one half-way
            // would leave the probe short of this member's share.
            tracing::warn!(workload = %run.name, stage = %stage.name(), "cluster: joined during a capacity search; this member sits it out (the others' search ends without a result when a probe misses a member)");
            Some(end)
        } else {
            super::search::SearchStage {
                run,
                publish: self.stage_tx,
                cancel: self.cancel,
                control: &mut self.control,
                reports: &self.report_ctx,
                stage,
                index,
                cycle: &mut self.cycles[index],
                end,
                cluster: cluster.map(|(c, j)| (c, j, key.clone())),
            }
            .run()
            .await
        };
        let ended = ended?;
        if occurrence.until.is_some() {
            // A window searches once each time it opens: idle until
            // it closes.
            if !idle_until(run, end, self.cancel).await {
                return None;
            }
            return Some(Duration::ZERO);
        }
        if let Some((cluster, joined)) = cluster {
            cluster
                .search_ended(&run.name, joined, &key, ended, end)
                .await;
        }
        Some(end.saturating_duration_since(ended))
    }

    /// Runs an occurrence's level (or idle, with no stage) from `start`
    /// until `end`, or until a count-based stage has settled every
    /// operation: publishes it, refreshes the target gauges every second
    /// so ramps show as ramps, re-publishes it on a control change, then
    /// counts what was never claimed and finishes its report. `late`: the
    /// first publication is re-based at now. Returns the schedule time a
    /// count-based stage left unused, `None` when cancelled.
    async fn run_stage(
        &mut self,
        scheduled: Option<&Stage>,
        label: &str,
        occurrence: &Occurrence,
        (start, end): (Instant, Instant),
        late: bool,
    ) -> Option<Duration> {
        let run = self.run;
        let mut ctl = self.control.borrow_and_update().clone();
        let report = scheduled.zip(occurrence.index).map(|(stage, index)| {
            let cycle = self.cycles[index];
            self.cycles[index] += 1;
            StageCollector::new(self.report_ctx.clone(), stage, index, cycle, start)
        });
        let count = scheduled
            .and_then(|s| effective_stage(s, &ctl).or_else(|| Some(s.clone())))
            .and_then(|s| CountProgress::new(&s));
        let mut active = publish(
            self.stage_tx,
            scheduled,
            &ctl,
            (start, late),
            report.as_ref(),
            count.as_ref(),
        );
        let counted = count_settled(run, self.joined, count.as_ref(), occurrence, end);
        tokio::pin!(counted);
        let mut ended = end;
        let mut unused = Duration::ZERO;

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
                    unused = end.saturating_duration_since(ended);
                    break;
                }
                changed = self.control.changed(), if self.control_open => {
                    if changed.is_err() {
                        self.control_open = false;
                        continue;
                    }
                    let new = self.control.borrow_and_update().clone();
                    let effective = scheduled.and_then(|s| effective_stage(s, &new));
                    if effective.as_ref() != active.as_ref().map(|a| &a.stage) {
                        if let Some(a) = &active {
                            settle(run, a, Instant::now());
                        }
                        active = publish(
                            self.stage_tx,
                            scheduled,
                            &new,
                            (start, true),
                            report.as_ref(),
                            count.as_ref(),
                        );
                    }
                    ctl = new;
                }
                _ = self.cancel.cancelled() => {
                    if let Some(a) = &active {
                        settle(run, a, Instant::now());
                    }
                    if let Some(r) = &report {
                        r.finish(Instant::now(), true);
                    }
                    return None;
                }
            }
            fault::hold_while_stalled(self.cancel).await;
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
        Some(unused)
    }
}

/// When every operation of a count-based stage has settled; never for a
/// stage without a count. A cluster's count-based stage ends when every
/// member has run its share: at the same instant for all of them.
async fn count_settled(
    run: &WorkloadRun,
    joined: Option<&crate::cluster::Joined>,
    count: Option<&Arc<CountProgress>>,
    occurrence: &Occurrence,
    end: Instant,
) -> Instant {
    let Some(c) = count else {
        return std::future::pending().await;
    };
    c.complete.notified().await;
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
}

/// The `stage` label while a window schedule has no level to run.
const IDLE_STAGE: &str = "idle";

/// Runs nothing until `end` (the rest of a window whose search has
/// ended), beating the heartbeat. False when cancelled first.
async fn idle_until(run: &WorkloadRun, end: Instant, cancel: &CancellationToken) -> bool {
    run.metrics.set_stage(IDLE_STAGE);
    run.stage_index.set(-1);
    let ctl = ControlState::default();
    update_targets(run, None, IDLE_STAGE, None, Duration::ZERO, &ctl);
    while Instant::now() < end {
        run.status.heartbeat.beat();
        let tick = (Instant::now() + Duration::from_secs(1)).min(end);
        tokio::select! {
            _ = tokio::time::sleep_until(tick) => {}
            _ = cancel.cancelled() => return false,
        }
    }
    true
}

/// Tells the workers what to run: the effective stage, or idle. `rebase`:
/// the stage is re-published mid-way, so tickets due before now are
/// skipped (they belonged to a pause or another level).
fn publish(
    to: &watch::Sender<Published>,
    scheduled: Option<&Stage>,
    control: &ControlState,
    (start, rebase): (Instant, bool),
    report: Option<&Arc<StageCollector>>,
    count: Option<&Arc<CountProgress>>,
) -> Option<Arc<ActiveStage>> {
    let (Some(stage), Some(report)) = (scheduled.and_then(|s| effective_stage(s, control)), report)
    else {
        let _ = to.send(Published::Idle);
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
    let _ = to.send(Published::Stage(active.clone()));
    Some(active)
}

/// Open loop: counts as missed the operations of `active` due before `at`
/// that no worker claimed (all were busy).
pub(super) fn settle(run: &WorkloadRun, active: &ActiveStage, at: Instant) {
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

/// Open loop: how far the oldest operation not yet sent is behind its
/// intended start at `now` (0 while the workers keep up, and in closed
/// loop). Measured once a controller tick for the whole workload, where a
/// gauge set by every send would show only the last worker's.
fn schedule_lag(active: &ActiveStage, now: Instant) -> Duration {
    let next = active.next_ticket.load(Ordering::Relaxed);
    active
        .stage
        .intended_offset(next)
        .map_or(Duration::ZERO, |offset| {
            now.saturating_duration_since(active.start + offset)
        })
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
    let lag = active.map_or(Duration::ZERO, |a| schedule_lag(a, Instant::now()));
    run.metrics.schedule_lag_seconds.set(lag.as_secs_f64());
    let state = if control.paused {
        StageState::Paused
    } else if active.is_none() {
        StageState::Idle
    } else {
        StageState::Running
    };
    run.status.set_stage(StageLabel {
        index,
        name: label.to_owned(),
        rate,
        concurrency,
        state,
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::writer::ReportWriter;
    use crate::report::RunInfo;
    use crate::workload::OpSpec;

    #[test]
    fn the_lag_is_the_age_of_the_oldest_operation_not_yet_sent() {
        let stage = Stage::rate("r", 100.0, Duration::from_secs(10)).unwrap();
        let start = Instant::now();
        let (writer, _task) = ReportWriter::new(RunInfo::new(None));
        let ctx = ReportContext::new(writer, "w", &[OpSpec::single("find")]);
        let active = ActiveStage {
            report: StageCollector::new(ctx, &stage, 0, 0, start),
            stage,
            start,
            // Tickets 0..50 claimed: ticket 50 is due at 0.5 s.
            next_ticket: AtomicU64::new(50),
            count: None,
        };
        let at = |ms| start + Duration::from_millis(ms);
        assert_eq!(schedule_lag(&active, at(2000)), Duration::from_millis(1500));
        assert_eq!(schedule_lag(&active, at(200)), Duration::ZERO, "ahead");
        active.next_ticket.store(TICKETS_CLOSED, Ordering::Relaxed);
        assert_eq!(schedule_lag(&active, at(20_000)), Duration::ZERO, "ended");
    }
}
