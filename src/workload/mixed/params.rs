//! `[workloads.mixed]`: the parameters of kind `mixed`, their defaults
//! (those of the benchmark the kind reproduces), validation and the lines
//! `check-config` prints for them.

use std::sync::Arc;

use serde::Deserialize;

use crate::config_values::{ByteSize, KeyError};
use crate::workload::kind_trait::Kind;
use crate::workload::validate::{at_least_one, check_collection, check_doc_size, check_weight};
use crate::workload::Workload;

/// `[workloads.mixed]`: parameters of kind `mixed`. Weights are relative
/// (they need not sum to 100).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MixedConfig {
    /// Weight of inserts of a new document.
    pub insert: f64,
    /// Weight of updates of one document by `_id`.
    pub update: f64,
    /// Weight of deletes of one document by `_id`.
    pub delete: f64,
    /// Weight of finds of one document by `_id`.
    pub find: f64,
    /// Weight of finds by the secondary key `k`.
    pub find_by_k: f64,
    /// Weight of updates of one document by the secondary key `k`.
    pub update_by_k: f64,
    /// Target BSON size of each document.
    pub doc_size: ByteSize,
    /// Documents loaded by the prepare step (`_id` 0..initial_docs).
    pub initial_docs: u64,
    /// Documents per insert call during the prepare step.
    pub load_batch: usize,
    /// The most documents the collection keeps: each insert past it
    /// deletes the oldest (step `evict` of the insert), and updates,
    /// deletes and finds pick among the live ones. Absent: ten times
    /// `initial_docs` (at least [`DEFAULT_MAX_DOCS_FLOOR`]), so a soak never
    /// fills the disk; 0: unbounded, which `check-config` warns about in
    /// a repeating plan.
    pub max_docs: Option<u64>,
    /// The collection's name.
    pub collection: String,
}

/// The smallest default bound of `mixed` (`max_docs` absent).
pub(crate) const DEFAULT_MAX_DOCS_FLOOR: u64 = 10_000;

impl Default for MixedConfig {
    fn default() -> Self {
        MixedConfig {
            insert: 6.5,
            update: 3.0,
            delete: 3.0,
            find: 87.5,
            find_by_k: 0.0,
            update_by_k: 0.0,
            doc_size: ByteSize(76 * 1024),
            initial_docs: 10_000,
            load_batch: 100,
            max_docs: None,
            collection: "mixed".into(),
        }
    }
}

impl Kind for MixedConfig {
    fn inserts(&self) -> bool {
        self.insert > 0.0
    }

    fn writes(&self) -> bool {
        self.insert + self.update + self.delete + self.update_by_k > 0.0
    }

    fn validate(&self) -> Result<(), KeyError> {
        for (k, w) in self.weights() {
            check_weight(k, w)?;
        }
        if self.weights().iter().map(|(_, w)| w).sum::<f64>() <= 0.0 {
            return Err(KeyError::new(
                "insert",
                "the weights insert, update, delete, find, find_by_k, update_by_k sum to zero; \
                 give at least one a positive weight",
            ));
        }
        check_doc_size("doc_size", self.doc_size)?;
        at_least_one("load_batch", self.load_batch as u64)?;
        if let Some(max) = self.max_docs.filter(|m| *m > 0) {
            crate::workload::validate::check_bound(max, self.initial_docs)?;
        }
        check_collection("collection", &self.collection)
    }

    fn describe(&self) -> String {
        let weights: Vec<String> = self
            .weights()
            .iter()
            .filter(|(_, v)| *v > 0.0)
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        format!(
            "  weights: {}\n  collection: {}, doc_size: {} ({} bytes), initial_docs: {}, load_batch: {}, max_docs: {}\n",
            weights.join(", "),
            self.collection,
            self.doc_size,
            self.doc_size.bytes(),
            self.initial_docs,
            self.load_batch,
            match (self.max_docs, self.bound()) {
                (_, 0) => "unbounded".to_owned(),
                (None, b) => format!("{b} (the default: 10 × initial_docs)"),
                (Some(_), b) => b.to_string(),
            }
        )
    }

    fn key_shape(&self, field: &str) -> crate::workload::shard::KeyShape {
        match field {
            // Inserts take the next `_id`; evictions drop the oldest.
            "_id" => {
                crate::workload::shard::KeyShape::counter(true, self.initial_docs.max(self.bound()))
            }
            "k" => crate::workload::shard::KeyShape::Scattered,
            _ => crate::workload::shard::KeyShape::Unknown,
        }
    }
    fn footprint(&self) -> Option<crate::workload::footprint::Footprint> {
        let total: f64 = self.weights().iter().map(|(_, w)| w).sum();
        Some(crate::workload::footprint::Footprint {
            doc_bytes: self.doc_size.bytes() as f64,
            initial_docs: self.initial_docs,
            net_docs_per_op: (self.insert - self.delete) / total,
            bound: (self.bound() > 0).then(|| self.bound()),
        })
    }

    fn build(&self, seed: u64) -> Result<Arc<dyn Workload>, KeyError> {
        self.validate()?;
        Ok(Arc::new(super::build(self, seed)))
    }
}

impl MixedConfig {
    /// The bound inserts keep to: `max_docs`, else ten times
    /// `initial_docs` (at least [`DEFAULT_MAX_DOCS_FLOOR`]); 0: unbounded.
    pub fn bound(&self) -> u64 {
        self.max_docs.unwrap_or_else(|| {
            self.initial_docs
                .saturating_mul(10)
                .max(DEFAULT_MAX_DOCS_FLOOR)
        })
    }

    /// The weights in the order of the mixed workload's op names.
    pub fn weights(&self) -> [(&'static str, f64); 6] {
        [
            ("insert", self.insert),
            ("update", self.update),
            ("delete", self.delete),
            ("find", self.find),
            ("find_by_k", self.find_by_k),
            ("update_by_k", self.update_by_k),
        ]
    }
}
