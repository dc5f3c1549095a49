//! Prepare once for the whole cluster: the member holding the workload's
//! prepare lease runs its shared steps (indexes, loads) and renews the
//! lease with its progress; the others wait and show that progress as
//! their own (`/status`, `mongoload_prepare_progress_ratio`). When the
//! holder dies its lease expires and the next member to look takes it and
//! resumes. Steps that set this member's own state (where its insert keys
//! go on) run on every member once the data is in place.

use mongodb::bson::{doc, Bson, Document};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::{prepare_steps, PrepareProgress, WorkloadRun};
use crate::cluster::coord::{Lease, SharedProgress, POLL};
use crate::cluster::ClusterRun;
use crate::workload::shard::Presplit;
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
/// for another plan (an edited `initial_docs`) is prepared again. Members
/// store it in the coordination collection and compare it, so every build
/// must compute the same one for the same plan (a rolling upgrade of the
/// load hosts must not prepare again): SHA-256, in lower-case hex, of the
/// BSON bytes of [`canonical`], whose fields and order are fixed here.
pub(super) fn plan(kind: &str, collections: &[String], steps: &[PrepareStep]) -> String {
    let bytes = mongodb::bson::to_vec(&canonical(kind, collections, steps))
        .expect("a document of strings, numbers and documents serialises");
    Sha256::digest(&bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The canonical form of a prepare plan: `{kind, collections, steps}`,
/// each step one of `{index: {collection, keys, unique, name}}` (`name`
/// null when the server names it), `{shard: {key, presplit}}`,
/// `{load: {collection, count, batch}}`,
/// `{seek_keys: {collection}}`, `{count_keys: {collection}}`; numbers as
/// 64-bit integers. Changing it makes every cluster prepare once more.
pub(super) fn canonical(kind: &str, collections: &[String], steps: &[PrepareStep]) -> Document {
    let int = |n: u64| Bson::Int64(i64::try_from(n).unwrap_or(i64::MAX));
    let steps: Vec<Bson> = steps
        .iter()
        .map(|step| {
            Bson::Document(match step {
                PrepareStep::CreateIndex {
                    collection,
                    keys,
                    unique,
                    name,
                } => doc! {"index": {
                    "collection": int(*collection as u64),
                    "keys": keys.clone(),
                    "unique": *unique,
                    "name": name.as_deref().map_or(Bson::Null, |n| Bson::String(n.to_owned())),
                }},
                PrepareStep::Load {
                    collection,
                    count,
                    batch,
                    ..
                } => doc! {"load": {
                    "collection": int(*collection as u64),
                    "count": int(*count),
                    "batch": int(*batch as u64),
                }},
                PrepareStep::SeekKeys { collection, .. } => {
                    doc! {"seek_keys": {"collection": int(*collection as u64)}}
                }
                PrepareStep::CountKeys { collection, .. } => {
                    doc! {"count_keys": {"collection": int(*collection as u64)}}
                }
                PrepareStep::Shard { plan } => doc! {"shard": {
                    "key": plan.key.to_document(),
                    "presplit": match &plan.presplit {
                        Presplit::None => Bson::Null,
                        Presplit::Hashed(n) => Bson::Int64(i64::from(*n)),
                        Presplit::Ranged(points) => Bson::Array(points.iter().map(|p| Bson::Int64(*p)).collect()),
                    },
                }},
            })
        })
        .collect();
    doc! {"kind": kind, "collections": collections, "steps": steps}
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
pub(super) async fn run(
    run: &WorkloadRun,
    cluster: &ClusterRun,
    cancel: &CancellationToken,
) -> bool {
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

    /// A member of another build (older or newer, as in a rolling
    /// upgrade) computes the same fingerprint for the same plan: it is
    /// SHA-256 of the canonical document, built here by hand, and its value
    /// is pinned (a change to it makes every cluster prepare again).
    #[test]
    fn the_fingerprint_is_the_same_in_every_build() {
        let steps = vec![
            PrepareStep::index(0, doc! {"k": 1}, Some("k_1")),
            PrepareStep::Load {
                collection: 0,
                count: 1000,
                batch: 100,
                make: std::sync::Arc::new(|i| doc! { "_id": i as i64 }),
            },
        ];
        let colls = vec!["mixed".to_string()];
        let by_hand = doc! {
            "kind": "mixed",
            "collections": ["mixed"],
            "steps": [
                {"index": {"collection": 0i64, "keys": {"k": 1}, "unique": false, "name": "k_1"}},
                {"load": {"collection": 0i64, "count": 1000i64, "batch": 100i64}},
            ],
        };
        assert_eq!(canonical("mixed", &colls, &steps), by_hand);
        let digest: String = Sha256::digest(mongodb::bson::to_vec(&by_hand).unwrap())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let got = plan("mixed", &colls, &steps);
        assert_eq!(got, digest);
        assert_eq!(got, PINNED, "the stored fingerprint of this plan changed");
    }

    /// `the_fingerprint_is_the_same_in_every_build`'s plan, as every build
    /// since the canonical encoding stores it.
    /// (pymongo's `bson.encode` of the same document hashes to it as well.)
    const PINNED: &str = "8525ac079f2975141bfa63781fe32082786ba06cd9745e55d4ddfc462a075ad6";

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
