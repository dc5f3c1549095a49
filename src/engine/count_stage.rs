//! Count-based stages: how many operations a stage occurrence has
//! claimed and settled, in all or per worker, so the controller ends the
//! stage when every one of its operations is done.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::ActiveStage;
use crate::schedule::{Limit, Stage};

/// How far a count-based stage occurrence is: operations claimed (in all,
/// or per worker by the workers themselves) and settled (finished, or
/// missed in open loop). The controller ends the stage when every one of
/// its operations has settled.
pub(super) struct CountProgress {
    limit: Limit,
    /// Operations the stage runs in all.
    target: u64,
    claimed: AtomicU64,
    settled: AtomicU64,
    pub(super) complete: tokio::sync::Notify,
}

impl CountProgress {
    pub(super) fn new(stage: &Stage) -> Option<Arc<CountProgress>> {
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
    pub(super) fn claim(&self, mine: u64) -> bool {
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
    pub(super) fn unclaim(&self) {
        if let Limit::Total(_) = self.limit {
            self.claimed.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// One claimed operation finished or was missed.
    pub(super) fn settle(&self) {
        if self.settled.fetch_add(1, Ordering::Relaxed) + 1 == self.target {
            self.complete.notify_one();
        }
    }
}

/// A worker's part in the count-based stage occurrence it is in: the
/// operations it ran of it (per-worker counts) and whether it holds a
/// claim on the next one. Timed stages claim nothing.
#[derive(Default)]
pub(super) struct WorkerCount {
    stage: Option<Arc<CountProgress>>,
    mine: u64,
    claimed: bool,
}

impl WorkerCount {
    /// Claims the next operation of `active`; false once its count is
    /// reached (always true for a timed stage).
    pub(super) fn claim(&mut self, active: &ActiveStage) -> bool {
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
    pub(super) fn unclaim(&mut self) {
        if let (true, Some(c)) = (std::mem::take(&mut self.claimed), &self.stage) {
            c.unclaim();
            self.mine -= 1;
        }
    }

    /// The claimed operation finished or was missed.
    pub(super) fn settle(&mut self) {
        if let (true, Some(c)) = (std::mem::take(&mut self.claimed), &self.stage) {
            c.settle();
        }
    }
}
