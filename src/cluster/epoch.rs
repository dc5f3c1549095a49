//! A workload's run as one member of a cluster ([`ClusterRun`]): its time
//! 0 is the shared epoch (joined, or begun a little in the future), a
//! task keeps the epoch alive and applies the cluster-wide control as this
//! member's share, and the end of the schedule ends the epoch.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::coord::{Coordinator, Epoch, POLL};
use super::Member;
use crate::control::ControlState;

/// Applies a control state to this member's workload (logged, and
/// `mongoload_paused` kept).
pub(crate) type ApplyControl = Arc<dyn Fn(ControlState) + Send + Sync>;

/// What a workload's engine needs to run as a cluster member.
#[derive(Clone)]
pub struct ClusterRun {
    pub coord: Arc<Coordinator>,
    /// Applies the cluster-wide control (already this member's share).
    pub apply: ApplyControl,
}

/// An epoch this member runs on.
pub struct Joined {
    /// The schedule's time 0 on this host's clock.
    pub t0: Instant,
    /// Joined after the start (a late or restarted member).
    pub late: bool,
    epoch: Epoch,
    watcher: CancellationToken,
}

/// Joining more than this after the epoch's start is joining late: the
/// first stage is re-based at now instead of sending what is past.
const LATE: Duration = Duration::from_millis(100);

impl Joined {
    /// The epoch's start: the schedule's time 0 on the wall clock.
    pub fn start(&self) -> chrono::DateTime<Utc> {
        self.epoch.start
    }

    /// The epoch's generation (it changes when the epoch is replaced).
    pub(super) fn generation(&self) -> i64 {
        self.epoch.generation
    }
}

impl ClusterRun {
    /// This member.
    pub fn member(&self) -> Member {
        self.coord.member()
    }

    /// Joins (or begins) the shared epoch of `workload`, starts keeping it
    /// alive, and waits for its start if it is ahead. `None` when
    /// cancelled first.
    pub async fn start(&self, workload: &str, cancel: &CancellationToken) -> Option<Joined> {
        let coord = &self.coord;
        let epoch = loop {
            match coord.join_epoch(workload).await {
                Ok(e) => break e,
                Err(e) => coord.failed("epoch", &e),
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = cancel.cancelled() => return None,
            }
        };
        let now = Utc::now();
        // Count-based stages that ended early moved the later stages up.
        let zero = epoch.start - chrono::Duration::from_std(epoch.skipped).unwrap_or_default();
        let t0 = match (zero - now).to_std() {
            Ok(ahead) => Instant::now() + ahead,
            Err(_) => {
                let behind = (now - zero).to_std().unwrap_or_default();
                Instant::now()
                    .checked_sub(behind)
                    .unwrap_or_else(Instant::now)
            }
        };
        let at = epoch
            .start
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        if epoch.began {
            tracing::info!(workload, epoch = %at, "cluster: {}: began the run epoch; the stages start at {at}", self.member());
        } else {
            tracing::info!(workload, epoch = %at, "cluster: {}: joined the run epoch of {at}", self.member());
        }
        coord
            .metrics
            .epoch
            .with_label_values(&[workload])
            .set(epoch.start.timestamp_millis() as f64 / 1e3);
        let watcher = CancellationToken::new();
        tokio::spawn(watch(
            coord.clone(),
            workload.to_owned(),
            epoch.generation,
            self.apply.clone(),
            watcher.clone(),
        ));
        if t0 > Instant::now() {
            tokio::select! {
                _ = tokio::time::sleep_until(t0) => {}
                _ = cancel.cancelled() => {
                    watcher.cancel();
                    return None;
                }
            }
        }
        let late = Instant::now().saturating_duration_since(t0) > LATE;
        Some(Joined {
            t0,
            late,
            epoch,
            watcher,
        })
    }

    /// When the count-based stage occurrence `key` ends for the whole
    /// cluster, this member having run its share: once every member has
    /// (the last one's finish), or at its cap `cap` if some never do.
    pub async fn count_stage_end(
        &self,
        workload: &str,
        joined: &Joined,
        key: &str,
        cap: Instant,
    ) -> Instant {
        let coord = &self.coord;
        let generation = joined.epoch.generation;
        while let Err(e) = coord
            .count_done(workload, generation, key, Utc::now())
            .await
        {
            coord.failed("epoch", &e);
            tokio::time::sleep(POLL).await;
        }
        let cap_end = wall(cap);
        loop {
            match coord.count_end(workload, generation, key, cap_end).await {
                Ok(Some(end)) => return instant(end),
                Ok(None) => {}
                Err(e) => coord.failed("epoch", &e),
            }
            if Instant::now() >= cap {
                return cap;
            }
            tokio::time::sleep(POLL.min(cap.saturating_duration_since(Instant::now()))).await;
        }
    }

    /// Stops keeping the epoch alive; `finished`: the schedule has ended,
    /// so the epoch ends too (a later start begins a new run).
    pub async fn leave(&self, workload: &str, joined: Joined, finished: bool) {
        joined.watcher.cancel();
        if finished {
            if let Err(e) = self
                .coord
                .end_epoch(workload, joined.epoch.generation)
                .await
            {
                self.coord.failed("epoch", &e);
            }
        }
    }
}

/// `i` on the wall clock.
pub(super) fn wall(i: Instant) -> chrono::DateTime<Utc> {
    let now = Instant::now();
    let at = Utc::now();
    match i.checked_duration_since(now) {
        Some(ahead) => at + chrono::Duration::from_std(ahead).unwrap_or_default(),
        None => at - chrono::Duration::from_std(now - i).unwrap_or_default(),
    }
}

/// Wall-clock `at` on this host's monotonic clock.
pub(super) fn instant(at: chrono::DateTime<Utc>) -> Instant {
    let now = Utc::now();
    match (at - now).to_std() {
        Ok(ahead) => Instant::now() + ahead,
        Err(_) => {
            let behind = (now - at).to_std().unwrap_or_default();
            Instant::now()
                .checked_sub(behind)
                .unwrap_or_else(Instant::now)
        }
    }
}

/// Keeps the epoch alive and applies each new cluster-wide control until
/// `stop`.
async fn watch(
    coord: Arc<Coordinator>,
    workload: String,
    generation: i64,
    apply: ApplyControl,
    stop: CancellationToken,
) {
    let mut seen = 0;
    let mut replaced = false;
    loop {
        match coord.touch_epoch(&workload, generation).await {
            Ok(Some(state)) => {
                if state.control_seq != seen {
                    seen = state.control_seq;
                    apply(coord.member().share_control(&state.control));
                }
            }
            Ok(None) if !replaced => {
                replaced = true;
                tracing::warn!(workload, "cluster: the run epoch was replaced by a newer one (this member was cut off for longer than the lease); it keeps its own until it restarts");
            }
            Ok(None) => {}
            Err(e) => coord.failed("epoch", &e),
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = stop.cancelled() => return,
        }
    }
}
