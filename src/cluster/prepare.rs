//! Prepare once for the whole cluster: the member holding the workload's
//! prepare lease runs its shared steps (indexes, loads) and renews the
//! lease with its progress; the others wait and show that progress as
//! their own (`/status`, `mongoload_prepare_progress_ratio`). When the
//! holder dies its lease expires and the next member to look takes it and
//! resumes. Steps that set this member's own state (where its insert keys
//! go on) run on every member once the data is in place.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use tokio_util::sync::CancellationToken;

use super::coord::{Lease, SharedProgress, POLL};
use super::ClusterRun;
use crate::engine::{prepare_steps, PrepareProgress, WorkloadRun};
use crate::workload::PrepareStep;

/// Whether a step sets this member's own state rather than the data.
fn is_local(step: &PrepareStep) -> bool {
    matches!(
        step,
        PrepareStep::SeekKeys { .. } | PrepareStep::CountKeys { .. }
    )
}

/// A fingerprint of what the shared steps prepare: the kind, its
/// collections and the steps (indexes, document counts), so a lease done
/// for another plan (an edited `initial_docs`) is prepared again.
pub fn plan(kind: &str, collections: &[String], steps: &[PrepareStep]) -> String {
    let mut h = DefaultHasher::new();
    (kind, collections, format!("{steps:?}")).hash(&mut h);
    format!("{:016x}", h.finish())
}

/// The progress a waiting member shows: the holder's.
fn waiting(p: Option<SharedProgress>) -> PrepareProgress {
    let p = p.unwrap_or_default();
    let ratio = if p.documents_total == 0 {
        0.0
    } else {
        (p.documents_done as f64 / p.documents_total as f64).min(1.0)
    };
    PrepareProgress {
        steps_done: p.steps_done as usize,
        steps: p.steps as usize,
        documents_done: p.documents_done,
        documents_total: p.documents_total,
        ratio,
        rate: p.rate,
        eta_seconds: (p.rate > 0.0)
            .then(|| p.documents_total.saturating_sub(p.documents_done) as f64 / p.rate),
        done: false,
    }
}

/// Runs `run`'s prepare as one member of the cluster; false when cancelled.
pub async fn run(run: &WorkloadRun, cluster: &ClusterRun, cancel: &CancellationToken) -> bool {
    let coord = &cluster.coord;
    let (local, shared): (Vec<PrepareStep>, Vec<PrepareStep>) =
        run.workload.prepare().into_iter().partition(is_local);
    let plan = plan(run.workload.kind(), run.workload.collections(), &shared);
    let leader = coord.metrics.leader.with_label_values(&[&run.name]);
    let mut waiting_on = None;
    loop {
        if cancel.is_cancelled() {
            return false;
        }
        match coord.try_lease(&run.name, &plan).await {
            Ok(Lease::Done) => break,
            Ok(Lease::Mine) => {
                tracing::info!(workload = %run.name, "prepare: this member holds the lease and prepares for the cluster");
                leader.set(1);
                let lost = cancel.child_token();
                let renewing = renew(run, cluster, lost.clone());
                let prepared = tokio::select! {
                    ok = prepare_steps(run, &lost, &shared) => ok,
                    () = renewing => false,
                };
                leader.set(0);
                if prepared {
                    match coord.finish_lease(&run.name, &plan).await {
                        Ok(true) => {
                            tracing::info!(workload = %run.name, "prepare: done for the cluster");
                            break;
                        }
                        Ok(false) => {
                            tracing::warn!(workload = %run.name, "prepare: the lease was taken over before it was marked done")
                        }
                        Err(e) => coord.failed("lease", &e),
                    }
                } else if cancel.is_cancelled() {
                    return false;
                }
            }
            Ok(Lease::Held { holder, progress }) => {
                if waiting_on != Some(holder) {
                    tracing::info!(workload = %run.name, holder, "prepare: waiting for member {holder}, which holds the lease");
                    waiting_on = Some(holder);
                }
                let p = waiting(progress);
                run.metrics.prepare_progress.set(p.ratio);
                run.status.set_prepare(p);
            }
            Err(e) => coord.failed("lease", &e),
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = cancel.cancelled() => return false,
        }
    }
    prepare_steps(run, cancel, &local).await
}

/// Renews this member's lease with its progress until `lost` is cancelled;
/// returns (cancelling `lost`) when another member has taken the lease.
async fn renew(run: &WorkloadRun, cluster: &ClusterRun, lost: CancellationToken) {
    let coord = &cluster.coord;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(coord.renew_every()) => {}
            _ = lost.cancelled() => return,
        }
        let p = run.status.prepare();
        let progress = SharedProgress {
            steps_done: p.steps_done as u64,
            steps: p.steps as u64,
            documents_done: p.documents_done,
            documents_total: p.documents_total,
            rate: p.rate,
        };
        match coord.renew(&run.name, progress).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(workload = %run.name, "prepare: another member took the lease over; waiting on it instead");
                lost.cancel();
                return;
            }
            Err(e) => coord.failed("lease", &e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_changes_with_what_is_loaded() {
        let steps = |count| {
            vec![PrepareStep::Load {
                collection: 0,
                count,
                batch: 100,
                make: std::sync::Arc::new(|i| mongodb::bson::doc! { "_id": i as i64 }),
            }]
        };
        let colls = vec!["mixed".to_string()];
        assert_eq!(
            plan("mixed", &colls, &steps(10)),
            plan("mixed", &colls, &steps(10))
        );
        assert_ne!(
            plan("mixed", &colls, &steps(10)),
            plan("mixed", &colls, &steps(11))
        );
        assert_ne!(
            plan("mixed", &colls, &steps(10)),
            plan("ycsb", &colls, &steps(10))
        );
    }

    #[test]
    fn a_waiting_member_shows_the_holders_progress() {
        let p = waiting(Some(SharedProgress {
            steps_done: 1,
            steps: 3,
            documents_done: 250,
            documents_total: 1000,
            rate: 50.0,
        }));
        assert_eq!(p.ratio, 0.25);
        assert_eq!(p.eta_seconds, Some(15.0));
        assert!(!p.done);
        assert_eq!(waiting(None).ratio, 0.0);
    }
}
