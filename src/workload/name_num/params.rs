//! `[workloads.name_num]`: the parameters of kind `name-num`, their defaults
//! (those of the benchmark the kind reproduces), validation and the lines
//! `check-config` prints for them.

use std::sync::Arc;

use serde::Deserialize;

use crate::config_values::KeyError;
use crate::workload::kind_trait::Kind;
use crate::workload::validate::{at_least_one, bound, check_bound, check_collection, check_weight};
use crate::workload::Workload;

/// The modes of `name-num`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NameNumMode {
    /// Inserts only.
    Insert,
    /// Updates of one document by `Num`.
    Update,
    /// Finds of one document by `Num`.
    Query,
    /// Inserts and finds by `Num`, weighted.
    InsertQuery,
}

impl NameNumMode {
    /// The name as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            NameNumMode::Insert => "insert",
            NameNumMode::Update => "update",
            NameNumMode::Query => "query",
            NameNumMode::InsertQuery => "insert-query",
        }
    }
}

/// `[workloads.name_num]`: `{Name, Num}` documents from the MongoDB 3.0
/// WiredTiger tests.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NameNumConfig {
    /// What the run does.
    pub mode: NameNumMode,
    /// The collection.
    pub collection: String,
    /// The value of every document's `Name`.
    pub name: String,
    /// `Num` is uniform in `[0, num_max)`.
    pub num_max: u64,
    /// Documents loaded by the prepare step.
    pub initial_docs: u64,
    /// Documents per insert call during the prepare step.
    pub load_batch: usize,
    /// Mode `insert-query`: relative weight of inserts.
    pub insert_weight: f64,
    /// Mode `insert-query`: relative weight of queries.
    pub query_weight: f64,
    /// Hold the collection to this many documents (each insert deletes the
    /// oldest); 0 = unbounded.
    pub max_docs: u64,
}

impl Default for NameNumConfig {
    fn default() -> Self {
        NameNumConfig {
            mode: NameNumMode::Insert,
            collection: "namenum".into(),
            name: "Edison".into(),
            num_max: 1_000_000,
            initial_docs: 100_000,
            load_batch: 1000,
            insert_weight: 1.0,
            query_weight: 1.0,
            max_docs: 0,
        }
    }
}

impl Kind for NameNumConfig {
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
        match self.mode {
            NameNumMode::Insert => true,
            NameNumMode::InsertQuery => self.insert_weight > 0.0,
            NameNumMode::Update | NameNumMode::Query => false,
        }
    }

    fn writes(&self) -> bool {
        self.inserts() || self.mode == NameNumMode::Update
    }

    fn validate(&self) -> Result<(), KeyError> {
        check_collection("collection", &self.collection)?;
        at_least_one("num_max", self.num_max)?;
        at_least_one("load_batch", self.load_batch as u64)?;
        check_weight("insert_weight", self.insert_weight)?;
        check_weight("query_weight", self.query_weight)?;
        if self.mode == NameNumMode::InsertQuery && self.insert_weight + self.query_weight <= 0.0 {
            return Err(KeyError::new(
                "insert_weight",
                "insert_weight and query_weight sum to zero",
            ));
        }
        check_bound(self.max_docs, self.initial_docs)
    }

    fn describe(&self) -> String {
        format!(
            "  mode: {}, collection: {}, Name: {:?}, num_max: {}, initial_docs: {}, max_docs: {}{}\n",
            self.mode.as_str(),
            self.collection,
            self.name,
            self.num_max,
            self.initial_docs,
            bound(self.max_docs),
            if self.mode == NameNumMode::InsertQuery {
                format!(
                    ", insert/query weights {}/{}",
                    self.insert_weight, self.query_weight
                )
            } else {
                String::new()
            }
        )
    }

    /// `{_id, Name, Num}`: about 60 bytes with a short name.
    fn footprint(&self) -> Option<crate::workload::footprint::Footprint> {
        let per_op = match self.mode {
            NameNumMode::Insert => 1.0,
            NameNumMode::InsertQuery => {
                let total = self.insert_weight + self.query_weight;
                if total > 0.0 {
                    self.insert_weight / total
                } else {
                    0.0
                }
            }
            NameNumMode::Update | NameNumMode::Query => 0.0,
        };
        Some(crate::workload::footprint::Footprint {
            doc_bytes: 50.0 + self.name.len() as f64,
            initial_docs: self.initial_docs,
            net_docs_per_op: per_op,
            bound: (self.max_docs > 0).then_some(self.max_docs),
        })
    }

    fn build(&self, seed: u64) -> Result<Arc<dyn Workload>, KeyError> {
        self.validate()?;
        Ok(Arc::new(super::build(self, seed)))
    }
}
