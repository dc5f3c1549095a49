//! The workers of one workload, spawned as they are needed: a workload
//! starts with [`SPARE_WORKERS`] (or `max_inflight`, if lower), and a
//! worker that takes up an operation while fewer than that are free
//! spawns one more, up to the workload's bound on operations in flight.
//! So a workload has at most `SPARE_WORKERS` workers more than it ever had
//! operations in flight (or closed-loop level), and a high `max_inflight`
//! costs nothing until it is used; a worker once spawned stays until the
//! run ends (no churn when the load varies).
//!
//! The spare workers matter in open loop: each free worker holds the
//! claim of a ticket ahead, so a runtime that wakes late sends those
//! tickets late (lateness, latency from the intended start) instead of
//! leaving them unclaimed, which would count them missed.
//!
//! Worker ids stay dense (0, 1, 2, …, in spawn order): a closed-loop
//! stage of level N runs workers 0..N, as when every worker was spawned
//! up front.

/// Free workers kept ready (each holding an open-loop ticket claim).
pub(super) const SPARE_WORKERS: usize = 64;

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::task::JoinSet;

/// How many workers exist and how many are busy; decides when to spawn
/// one more. Pure bookkeeping, no tasks: see [`Crew`] for those.
#[derive(Debug)]
pub(super) struct Headcount {
    /// The bound: `WorkloadRun::workers`.
    max: usize,
    /// Free workers to keep ready.
    spare: usize,
    spawned: AtomicUsize,
    busy: AtomicUsize,
}

impl Headcount {
    pub(super) fn new(max: usize, spare: usize) -> Self {
        Headcount {
            max: max.max(1),
            spare: spare.max(1),
            spawned: AtomicUsize::new(0),
            busy: AtomicUsize::new(0),
        }
    }

    /// Reserves the next worker id, unless `max` workers exist already.
    pub(super) fn reserve(&self) -> Option<u32> {
        self.spawned
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max).then_some(n + 1)
            })
            .ok()
            .map(|id| u32::try_from(id).unwrap_or(u32::MAX))
    }

    /// A worker takes up an operation. Returns the id of a worker to spawn
    /// when fewer than `spare` are left free (and the bound allows one
    /// more).
    pub(super) fn busy(&self) -> Option<u32> {
        let busy = self.busy.fetch_add(1, Ordering::AcqRel) + 1;
        if busy + self.spare > self.spawned.load(Ordering::Acquire) {
            self.reserve()
        } else {
            None
        }
    }

    /// A worker is done with its operation.
    pub(super) fn free(&self) {
        self.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The worker tasks of a workload: their headcount and the set they run
/// in, closed once the engine drains them (a worker that would spawn
/// another after that does not). What a worker is, and what each is
/// given, is `worker.rs`'s: the crew only counts and holds the tasks.
pub(super) struct Crew {
    pub(super) headcount: Headcount,
    tasks: Mutex<Option<JoinSet<()>>>,
}

impl Crew {
    /// An empty crew of at most `max` workers, keeping [`SPARE_WORKERS`]
    /// free.
    pub(super) fn new(max: usize) -> Arc<Self> {
        Arc::new(Crew {
            headcount: Headcount::new(max, SPARE_WORKERS),
            tasks: Mutex::new(Some(JoinSet::new())),
        })
    }

    /// Runs a worker's task (its id reserved from the headcount), unless
    /// the set is closed.
    pub(super) fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let mut tasks = self.tasks.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(set) = tasks.as_mut() {
            // Finished workers leave their result in the set until it is
            // joined: collect them here, so the set does not grow with the
            // run (they finish only at its end, so this is rarely any).
            while set.try_join_next().is_some() {}
            set.spawn(task);
        }
    }

    /// Closes the set and hands it over (to be drained): no worker is
    /// spawned after this.
    pub(super) fn close(&self) -> JoinSet<()> {
        self.tasks
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spare_worker_more_than_ever_busy_and_never_past_the_bound() {
        let h = Headcount::new(3, 1);
        assert_eq!(h.reserve(), Some(0), "the first worker");
        // Worker 0 takes an operation: it was the only free one.
        assert_eq!(h.busy(), Some(1));
        // Worker 1 takes one too: spawn 2.
        assert_eq!(h.busy(), Some(2));
        // Worker 0 finishes and takes the next: 2 is still free.
        h.free();
        assert_eq!(h.busy(), None);
        // Worker 2 takes one: the bound is reached, nothing to spawn.
        assert_eq!(h.busy(), None);
        assert_eq!(h.reserve(), None, "3 workers exist");
    }

    #[test]
    fn spare_workers_stay_free() {
        let h = Headcount::new(100, 2);
        assert_eq!((h.reserve(), h.reserve()), (Some(0), Some(1)));
        // One busy of two: one free, below the two spare.
        assert_eq!(h.busy(), Some(2));
        assert_eq!(h.busy(), Some(3), "two busy of three");
        h.free();
        h.free();
        assert_eq!(h.busy(), None, "one busy of four: three free");
        assert_eq!(h.busy(), None, "two busy of four: two free");
        assert_eq!(h.busy(), Some(4), "three busy of four: one free");
    }

    #[test]
    fn ids_are_dense_when_workers_spawn_at_once() {
        let h = Arc::new(Headcount::new(1000, 1));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let h = h.clone();
                std::thread::spawn(move || (0..400).filter_map(|_| h.reserve()).collect::<Vec<_>>())
            })
            .collect();
        let mut ids: Vec<u32> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, (0..1000).collect::<Vec<u32>>());
    }
}
