//! The acknowledged-write audit: which documents the server acknowledged
//! and the workload did not delete on purpose, so that a background check
//! can find the ones a failover lost.
//!
//! - [`ledger`]: the pure set of acknowledged ids (compressed bitmap).
//! - [`ids`]: what each request does to it, read off its action.
//! - [`Audit`] (here): one workload's ledgers (one per collection), fed by
//!   its workers ([`Audit::before_send`], [`Audit::acknowledge`]), and the
//!   figures `/status`, `ctl audit` and the metrics show.
//! - [`verify`]: the task that checks the ledger against the server, in
//!   the background at `audit_rate` ids/s and in full passes after each
//!   failover, at each stage end (before the stage report is written) and
//!   on `mongoload ctl audit W`. It reads with `find` on `_id` only: no
//!   admin command, `readWrite` is enough.
//!
//! Metrics (each with a `workload` label): `mongoload_audit_checked_total`,
//! `mongoload_audit_missing_total`, `mongoload_audit_acknowledged_total`,
//! `mongoload_audit_forgotten_total`, `mongoload_audit_ledger_ids{state}`
//! (`present`, `missing`), `mongoload_audit_ledger_bytes`,
//! `mongoload_audit_passes_total{trigger}`, `mongoload_audit_errors_total{kind}`.
//! At all times `acknowledged_total − forgotten_total = ledger_ids{present}
//! + ledger_ids{missing}` for a workload that has not been restarted.

pub(crate) mod collection_ledger;
mod config;
mod families;
pub(crate) mod ids;
pub(crate) mod ledger;
pub(crate) mod verify;

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use mongodb::bson::{Bson, Document};
use mongodb::Collection;
use prometheus::{IntCounter, IntCounterVec, IntGauge};
use serde::Serialize;
use tokio::sync::Notify;

use crate::error_kind::ErrorKind;
use crate::workload::{Action, AuditKeys};

pub use collection_ledger::Book;
pub use families::AuditFamilies;
pub use ids::{Effect, Ids};
pub use ledger::{Cursor, Ledger};

/// Ids checked by one `find` (`_id: {$in: […]}`).
pub const BATCH: usize = 1000;

/// Missing ids kept for `/status`, `ctl audit` and the log lines.
pub const SHOWN_IDS: usize = 20;

/// What triggers a verification pass (the `trigger` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The slow continuous check at `audit_rate`.
    Background,
    /// A failover the driver saw.
    Failover,
    /// The end of a stage (its report waits for the pass).
    StageEnd,
    /// `mongoload ctl audit W`.
    Ctl,
}

impl Trigger {
    pub const ALL: [Trigger; 4] = [
        Trigger::Background,
        Trigger::Failover,
        Trigger::StageEnd,
        Trigger::Ctl,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Background => "background",
            Trigger::Failover => "failover",
            Trigger::StageEnd => "stage_end",
            Trigger::Ctl => "ctl",
        }
    }
}

/// One workload's metric handles, resolved once.
struct Handles {
    checked: IntCounter,
    missing: IntCounter,
    acknowledged: IntCounter,
    forgotten: IntCounter,
    present: IntGauge,
    missing_now: IntGauge,
    bytes: IntGauge,
    passes: Vec<IntCounter>,
    errors: IntCounterVec,
    workload: String,
}

impl Handles {
    fn new(f: &AuditFamilies, workload: &str) -> Handles {
        let w = [workload];
        let errors = f.errors.clone();
        for k in ErrorKind::ALL {
            errors.with_label_values(&[workload, k.as_str()]);
        }
        Handles {
            checked: f.checked.with_label_values(&w),
            missing: f.missing.with_label_values(&w),
            acknowledged: f.acknowledged.with_label_values(&w),
            forgotten: f.forgotten.with_label_values(&w),
            present: f.ledger_ids.with_label_values(&[workload, "present"]),
            missing_now: f.ledger_ids.with_label_values(&[workload, "missing"]),
            bytes: f.ledger_bytes.with_label_values(&w),
            passes: Trigger::ALL
                .iter()
                .map(|t| f.passes.with_label_values(&[workload, t.as_str()]))
                .collect(),
            errors,
            workload: workload.to_owned(),
        }
    }
}

/// An insert in flight: [`Audit::acknowledge`] it once the server did,
/// [`Audit::abandon`] it if it failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub struct Pending {
    collection: usize,
    token: u64,
}

/// The figures `/status` and `ctl audit` show.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct AuditSummary {
    /// Ids in the ledger: acknowledged, not deleted, not found missing.
    pub acknowledged: u64,
    /// Ids found missing (and not since inserted again or deleted).
    pub missing: u64,
    /// The first missing `_id`s, as `collection: _id`.
    pub missing_ids: Vec<String>,
    /// Id checks against the server so far.
    pub checked: u64,
    /// Completed passes over the whole ledger.
    pub passes: u64,
    /// The pass running now, if one (`background` between event passes).
    pub running: Option<Trigger>,
    /// The last completed full pass.
    pub last_pass: Option<PassSummary>,
}

/// A finished verification pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PassSummary {
    pub trigger: Trigger,
    /// When it finished (RFC 3339, UTC).
    pub finished: String,
    pub seconds: f64,
    pub checked: u64,
    /// Newly found missing.
    pub missing: u64,
    /// Whether every id was looked at (not cut short by a shutdown).
    pub complete: bool,
}

/// One workload's audit: its ledgers (one per collection), the collections
/// to check them against, and what triggers a pass.
pub struct Audit {
    keys: Arc<dyn AuditKeys>,
    /// Collection names, as the ledgers index them.
    names: Vec<String>,
    ledgers: Vec<Mutex<Book>>,
    /// The collections as the audit reads them: primary, read concern
    /// `local` (a `majority` read would miss acknowledged `w: 1` writes
    /// that are still there).
    collections: Vec<Collection<Document>>,
    handles: Handles,
    /// `ctl audit`: a full pass as soon as possible.
    requested: Notify,
    summary: Mutex<AuditSummary>,
}

impl Audit {
    /// The audit of workload `workload`, whose requests index
    /// `collections` (names in `db`), with `keys` mapping its `_id`s.
    pub fn new(
        workload: &str,
        db: &mongodb::Database,
        collections: &[String],
        keys: Arc<dyn AuditKeys>,
        families: &AuditFamilies,
    ) -> Arc<Audit> {
        let options = mongodb::options::CollectionOptions::builder()
            .read_concern(mongodb::options::ReadConcern::local())
            .selection_criteria(mongodb::options::SelectionCriteria::ReadPreference(
                mongodb::options::ReadPreference::Primary,
            ))
            .build();
        let handles = Handles::new(families, workload);
        handles.present.set(0);
        handles.missing_now.set(0);
        Arc::new(Audit {
            keys,
            names: collections.to_vec(),
            ledgers: collections.iter().map(|_| Mutex::default()).collect(),
            collections: collections
                .iter()
                .map(|n| db.collection_with_options(n, options.clone()))
                .collect(),
            handles,
            requested: Notify::new(),
            summary: Mutex::new(AuditSummary::default()),
        })
    }

    /// The workload's name.
    pub fn workload(&self) -> &str {
        &self.handles.workload
    }

    fn ledger(&self, collection: usize) -> Option<MutexGuard<'_, Book>> {
        self.ledgers
            .get(collection)
            .map(|l| l.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Before a request is sent: a delete's ids leave the ledger now (a
    /// delete that then fails only means they are no longer checked, and
    /// an insert of them in flight will not add them); an insert is
    /// returned as [`Pending`], for [`Audit::acknowledge`] or
    /// [`Audit::abandon`].
    pub fn before_send(&self, action: &Action) -> Option<Pending> {
        match ids::effect(action, self.keys.as_ref()) {
            Effect::None => None,
            Effect::Insert { collection, ids } => {
                let token = self.ledger(collection)?.sending(ids);
                Some(Pending { collection, token })
            }
            Effect::Delete { collection, ids } => {
                let n = self.ledger(collection)?.deleting(&ids);
                self.handles.forgotten.inc_by(n);
                None
            }
            Effect::DeleteUnknown { collection } => {
                let n = self.ledger(collection)?.deleting_all();
                self.handles.forgotten.inc_by(n);
                if n > 0 {
                    tracing::warn!(
                        workload = %self.handles.workload,
                        "audit: a delete not on _id in {}: its {n} acknowledged ids are no longer checked",
                        self.names.get(collection).map_or("?", |s| s.as_str())
                    );
                }
                None
            }
        }
    }

    /// The server acknowledged the insert of `pending`.
    pub fn acknowledge(&self, pending: Pending) {
        if let Some(mut b) = self.ledger(pending.collection) {
            let n = b.acknowledged(pending.token);
            drop(b);
            self.handles.acknowledged.inc_by(n);
        }
    }

    /// The insert of `pending` failed (or its transaction did not commit).
    pub fn abandon(&self, pending: Pending) {
        if let Some(mut b) = self.ledger(pending.collection) {
            b.abandoned(pending.token);
        }
    }

    /// Asks for a full pass (`ctl audit`); the reply is the summary as of
    /// now.
    pub fn request_pass(&self) -> AuditSummary {
        self.requested.notify_one();
        self.summary()
    }

    /// The figures as of the last update (every second, and after passes).
    pub fn summary(&self) -> AuditSummary {
        self.summary
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn update_summary(&self, f: impl FnOnce(&mut AuditSummary)) {
        f(&mut self.summary.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// `collection: _id` of a ledger id, for messages.
    fn describe_id(&self, collection: usize, id: u64) -> String {
        format!(
            "{}: {}",
            self.names.get(collection).map_or("?", |s| s.as_str()),
            self.keys.key(id)
        )
    }

    /// The `_id` of a ledger id as JSON (numbers stay numbers).
    fn json_id(&self, id: u64) -> serde_json::Value {
        match self.keys.key(id) {
            Bson::Int64(i) => i.into(),
            Bson::Int32(i) => i.into(),
            Bson::String(s) => s.into(),
            other => other.to_string().into(),
        }
    }

    /// Brings the ledger gauges and the summary's counts up to date.
    fn refresh(&self) {
        let (mut present, mut missing, mut bytes) = (0u64, 0u64, 0usize);
        let mut shown = Vec::new();
        for (c, l) in self.ledgers.iter().enumerate() {
            let b = l.lock().unwrap_or_else(PoisonError::into_inner);
            let l = &b.ledger;
            present += l.len();
            missing += l.missing_len();
            bytes += l.approx_bytes();
            shown.extend(
                l.missing()
                    .take(SHOWN_IDS.saturating_sub(shown.len()))
                    .map(|id| (c, id)),
            );
        }
        let h = &self.handles;
        h.present.set(i64::try_from(present).unwrap_or(i64::MAX));
        h.missing_now
            .set(i64::try_from(missing).unwrap_or(i64::MAX));
        h.bytes.set(i64::try_from(bytes).unwrap_or(i64::MAX));
        let shown = shown
            .into_iter()
            .map(|(c, id)| self.describe_id(c, id))
            .collect();
        self.update_summary(|s| {
            s.acknowledged = present;
            s.missing = missing;
            s.missing_ids = shown;
            s.checked = h.checked.get();
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::IntKeys;
    use mongodb::bson::doc;

    async fn audit() -> Arc<Audit> {
        let client = mongodb::Client::with_uri_str("mongodb://127.0.0.1:1/")
            .await
            .unwrap();
        let families = AuditFamilies::new().unwrap();
        Audit::new(
            "w",
            &client.database("d"),
            &["a".to_owned(), "b".to_owned()],
            Arc::new(IntKeys),
            &families,
        )
    }

    #[tokio::test]
    async fn acknowledged_minus_forgotten_is_what_the_ledger_holds() {
        let a = audit().await;
        let insert = |c: usize, ids: std::ops::Range<i64>| Action::InsertMany {
            collection: c,
            docs: ids.map(|i| doc! {"_id": i}).collect(),
        };
        let p = a.before_send(&insert(0, 0..100)).unwrap();
        a.acknowledge(p);
        let p = a.before_send(&insert(1, 0..10)).unwrap();
        a.acknowledge(p);
        // A failed insert is never acknowledged: nothing to check.
        let p = a.before_send(&insert(0, 100..110)).unwrap();
        a.abandon(p);
        assert!(a
            .before_send(&Action::DeleteMany {
                collection: 0,
                filter: doc! {"_id": {"$gte": 0i64, "$lt": 20i64}},
            })
            .is_none());
        a.before_send(&Action::DeleteOne {
            collection: 1,
            filter: doc! {"_id": 3i64},
        });
        // Deleting what is not in the ledger forgets nothing.
        a.before_send(&Action::DeleteOne {
            collection: 1,
            filter: doc! {"_id": 3i64},
        });
        a.refresh();
        let s = a.summary();
        assert_eq!(s.acknowledged, 80 + 9);
        let h = &a.handles;
        assert_eq!((h.acknowledged.get(), h.forgotten.get()), (110, 21));
        assert_eq!(
            h.acknowledged.get() - h.forgotten.get(),
            (h.present.get() + h.missing_now.get()) as u64
        );
        // A delete the audit cannot read stops checking the collection.
        a.before_send(&Action::DeleteMany {
            collection: 0,
            filter: doc! {"k": 1},
        });
        a.refresh();
        assert_eq!(a.summary().acknowledged, 9);
        assert_eq!(h.forgotten.get(), 21 + 80);
    }
}
