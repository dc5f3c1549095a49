//! `[workloads.sysbench]`: the parameters of kind `sysbench`, their defaults
//! (those of the benchmark the kind reproduces), validation and the lines
//! `check-config` prints for them.

use std::sync::Arc;

use serde::Deserialize;

use crate::config_values::KeyError;
use crate::workload::kind_trait::Kind;
use crate::workload::validate::{at_least_one, check_collection};
use crate::workload::Workload;

/// `[workloads.sysbench]`: sysbench's OLTP transaction for MongoDB.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SysbenchConfig {
    /// Number of collections `sbtest1..N`.
    pub collections: u32,
    /// Documents per collection (sysbench's `--table-size`).
    pub docs_per_collection: u64,
    /// Collection name prefix.
    pub collection_prefix: String,
    /// Documents per range query.
    pub range_size: u64,
    /// Point lookups of `c` by `_id` per transaction.
    pub point_selects: u32,
    /// Ranges of `range_size` by `_id` per transaction.
    pub simple_ranges: u32,
    /// `$sum` of `k` over a range, per transaction.
    pub sum_ranges: u32,
    /// Ranges sorted by `c`, per transaction.
    pub order_ranges: u32,
    /// Distinct `c` over a range, per transaction.
    pub distinct_ranges: u32,
    /// Updates of the indexed `k`, per transaction.
    pub index_updates: u32,
    /// Updates of the unindexed `c`, per transaction.
    pub non_index_updates: u32,
    /// Delete-and-reinsert of one `_id`, per transaction.
    pub delete_inserts: u32,
    /// Only the reads (sysbench's `oltp_read_only`).
    pub read_only: bool,
    /// Run each transaction in a MongoDB multi-document transaction
    /// (replica sets and sharded clusters), retried on
    /// `TransientTransactionError`.
    pub transactions: bool,
    /// Documents per insert call during the prepare step.
    pub load_batch: usize,
}

impl Default for SysbenchConfig {
    fn default() -> Self {
        SysbenchConfig {
            collections: 16,
            docs_per_collection: 10_000,
            collection_prefix: "sbtest".into(),
            range_size: 100,
            point_selects: 10,
            simple_ranges: 1,
            sum_ranges: 1,
            order_ranges: 1,
            distinct_ranges: 1,
            index_updates: 1,
            non_index_updates: 1,
            delete_inserts: 1,
            read_only: false,
            transactions: false,
            load_batch: 1000,
        }
    }
}

impl SysbenchConfig {
    /// Requests per transaction with their `step` labels, in the order a
    /// transaction runs them (the writes left out when `read_only`).
    pub fn steps(&self) -> Vec<(&'static str, u32)> {
        let mut v = vec![
            ("point_select", self.point_selects),
            ("simple_range", self.simple_ranges),
            ("sum_range", self.sum_ranges),
            ("order_range", self.order_ranges),
            ("distinct_range", self.distinct_ranges),
        ];
        if !self.read_only {
            v.extend([
                ("update_index", self.index_updates),
                ("update_non_index", self.non_index_updates),
                ("delete", self.delete_inserts),
                ("insert", self.delete_inserts),
            ]);
        }
        v
    }
}

impl Kind for SysbenchConfig {
    fn key_shape(&self, field: &str) -> crate::workload::shard::KeyShape {
        match field {
            // `delete_inserts` put back the `_id` they deleted.
            "_id" => crate::workload::shard::KeyShape::Within {
                start: 0,
                end: self.docs_per_collection.min(i64::MAX as u64) as i64,
            },
            _ => crate::workload::shard::KeyShape::Unknown,
        }
    }
    fn inserts(&self) -> bool {
        !self.read_only && self.delete_inserts > 0
    }

    fn writes(&self) -> bool {
        !self.read_only
    }

    fn validate(&self) -> Result<(), KeyError> {
        at_least_one("collections", u64::from(self.collections))?;
        at_least_one("docs_per_collection", self.docs_per_collection)?;
        at_least_one("range_size", self.range_size)?;
        at_least_one("load_batch", self.load_batch as u64)?;
        check_collection("collection_prefix", &self.collection_prefix)?;
        if self.steps().iter().all(|(_, n)| *n == 0) {
            return Err(KeyError::new(
                "point_selects",
                "a transaction needs at least one operation",
            ));
        }
        Ok(())
    }

    fn describe(&self) -> String {
        let steps: Vec<String> = self
            .steps()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{n} {k}"))
            .collect();
        format!(
            "  collections: {}{}..{}, docs_per_collection: {}, range_size: {}{}\n  transaction: {}\n",
            self.collection_prefix,
            1,
            self.collections,
            self.docs_per_collection,
            self.range_size,
            match (self.read_only, self.transactions) {
                (true, true) => ", read only, in MongoDB transactions",
                (true, false) => ", read only",
                (false, true) => ", in MongoDB transactions",
                (false, false) => "",
            },
            steps.join(", ")
        )
    }

    /// Each delete-insert deletes a row and inserts it again: the count
    /// stays; a row (`_id`, `k`, `c` of 120 and `pad` of 60 characters)
    /// is about 230 bytes.
    fn footprint(&self) -> Option<crate::workload::footprint::Footprint> {
        Some(crate::workload::footprint::Footprint {
            doc_bytes: 230.0,
            initial_docs: self
                .docs_per_collection
                .saturating_mul(u64::from(self.collections)),
            net_docs_per_op: 0.0,
            bound: None,
        })
    }

    fn build(&self, seed: u64) -> Result<Arc<dyn Workload>, KeyError> {
        self.validate()?;
        Ok(Arc::new(super::build(self, seed)))
    }
}
