//! `[workloads.large_doc]`: the parameters of kind `large-doc`, their defaults
//! (those of the benchmark the kind reproduces), validation and the lines
//! `check-config` prints for them.

use std::sync::Arc;

use serde::Deserialize;

use crate::config_values::{ByteSize, KeyError};
use crate::workload::kind_trait::Kind;
use crate::workload::validate::{
    at_least_one, bound, check_bound, check_collection, check_doc_size,
};
use crate::workload::Workload;

/// `[workloads.large_doc]`: large documents, inserts and `_id` finds side
/// by side.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LargeDocConfig {
    /// The collection.
    pub collection: String,
    /// BSON size of each document.
    pub doc_size: ByteSize,
    /// Share of workers that insert (with `query_workers`: the ratio).
    pub insert_workers: u32,
    /// Share of workers that find a random `_id`.
    pub query_workers: u32,
    /// Documents loaded by the prepare step.
    pub initial_docs: u64,
    /// Documents per insert call during the prepare step.
    pub load_batch: usize,
    /// Hold the collection to this many documents (each insert deletes the
    /// oldest); 0 = unbounded.
    pub max_docs: u64,
}

impl Default for LargeDocConfig {
    fn default() -> Self {
        LargeDocConfig {
            collection: "largedoc".into(),
            doc_size: ByteSize(10 * 1024),
            insert_workers: 10,
            query_workers: 10,
            initial_docs: 10_000,
            load_batch: 100,
            max_docs: 0,
        }
    }
}

impl Kind for LargeDocConfig {
    fn key_shape(&self, field: &str) -> crate::workload::shard::KeyShape {
        match field {
            // Inserts take the next `_id`.
            "_id" => crate::workload::shard::KeyShape::counter(
                self.inserts(),
                self.initial_docs.max(self.max_docs),
            ),
            _ => crate::workload::shard::KeyShape::Unknown,
        }
    }
    fn inserts(&self) -> bool {
        self.insert_workers > 0
    }

    fn writes(&self) -> bool {
        self.inserts()
    }

    fn validate(&self) -> Result<(), KeyError> {
        check_collection("collection", &self.collection)?;
        at_least_one("load_batch", self.load_batch as u64)?;
        if self.insert_workers + self.query_workers == 0 {
            return Err(KeyError::new(
                "insert_workers",
                "insert_workers and query_workers are both 0",
            ));
        }
        check_doc_size("doc_size", self.doc_size)?;
        check_bound(self.max_docs, self.initial_docs)
    }

    fn describe(&self) -> String {
        format!(
            "  collection: {}, doc_size: {} ({} bytes), insert/query workers {}:{}, initial_docs: {}, max_docs: {}\n",
            self.collection,
            self.doc_size,
            self.doc_size.bytes(),
            self.insert_workers,
            self.query_workers,
            self.initial_docs,
            bound(self.max_docs)
        )
    }

    /// Insert workers insert one document per operation: their share of
    /// the workers is the share of the operations that insert.
    fn footprint(&self) -> Option<crate::workload::footprint::Footprint> {
        let workers = f64::from(self.insert_workers + self.query_workers).max(1.0);
        Some(crate::workload::footprint::Footprint {
            doc_bytes: self.doc_size.bytes() as f64,
            initial_docs: self.initial_docs,
            net_docs_per_op: f64::from(self.insert_workers) / workers,
            bound: (self.max_docs > 0).then_some(self.max_docs),
        })
    }

    fn build(&self, seed: u64) -> Result<Arc<dyn Workload>, KeyError> {
        self.validate()?;
        Ok(Arc::new(super::build(self, seed)))
    }
}
