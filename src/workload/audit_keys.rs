//! How the acknowledged-write audit names a workload's documents: the
//! mapping between their `_id`s and the audit ledger's integer ids, given
//! by the workload ([`super::Workload::audit_keys`]) and read by `audit/`.

use mongodb::bson::Bson;

/// Maps a workload's document `_id`s to the ledger's integer ids and back.
/// Workloads with integer `_id`s (every kind but YCSB) use [`IntKeys`].
pub trait AuditKeys: Send + Sync {
    /// The ledger id of the `_id` of a document about to be inserted, or
    /// named by a delete; `None` for an `_id` the audit does not follow.
    /// Called once per inserted document (YCSB's keys forget it then).
    fn ledger_id(&self, id: &Bson) -> Option<u64>;
    /// The document `_id` of a ledger id.
    fn key(&self, id: u64) -> Bson;
    /// Whether ids are integers ordered like the `_id`s, so a delete by
    /// `_id` range deletes that range of ledger ids.
    fn ordered(&self) -> bool {
        true
    }
}

/// `_id`s that are non-negative integers: the ledger id is the `_id`.
#[derive(Debug, Clone, Copy, Default)]
pub struct IntKeys;

impl AuditKeys for IntKeys {
    fn ledger_id(&self, id: &Bson) -> Option<u64> {
        int_id(id)
    }

    fn key(&self, id: u64) -> Bson {
        Bson::Int64(i64::try_from(id).unwrap_or(i64::MAX))
    }
}

/// The ledger id of an `_id` that is a non-negative integer (an `Int64`,
/// an `Int32` or a whole `Double`).
pub(crate) fn int_id(id: &Bson) -> Option<u64> {
    match id {
        Bson::Int64(i) => u64::try_from(*i).ok(),
        Bson::Int32(i) => u64::try_from(*i).ok(),
        Bson::Double(d) if *d >= 0.0 && d.fract() == 0.0 && *d < u64::MAX as f64 => Some(*d as u64),
        _ => None,
    }
}
