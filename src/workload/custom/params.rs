//! `[workloads.custom]`: the parameters of kind `custom`, their defaults
//! (those of the benchmark the kind reproduces), validation and the lines
//! `check-config` prints for them.

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Deserialize;

use crate::config_values::{ByteSize, KeyError};
use crate::workload::kind_trait::Kind;
use crate::workload::validate::{
    at_least_one, bound, check_bound, check_collection, check_weight, MAX_DOC_SIZE,
};
use crate::workload::Workload;

/// `[workloads.custom]`: operations declared in the config.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CustomConfig {
    /// The collection.
    pub collection: String,
    /// The template of inserted and loaded documents (`_id` is added: the
    /// document's sequence number).
    pub document: serde_json::Value,
    /// Pad documents with a `pad` string up to this BSON size.
    pub doc_size: Option<ByteSize>,
    /// Documents loaded by the prepare step.
    pub initial_docs: u64,
    /// Documents per insert call during the prepare step.
    pub load_batch: usize,
    /// Hold the collection to this many documents (each insert deletes the
    /// oldest); 0 = unbounded.
    pub max_docs: u64,
    /// Indexes created by the prepare step.
    pub indexes: Vec<CustomIndex>,
    /// The operations and their weights.
    pub operations: Vec<CustomOp>,
}

impl Default for CustomConfig {
    fn default() -> Self {
        CustomConfig {
            collection: "custom".into(),
            document: serde_json::Value::Object(Default::default()),
            doc_size: None,
            initial_docs: 0,
            load_batch: 100,
            max_docs: 0,
            indexes: Vec::new(),
            operations: Vec::new(),
        }
    }
}

/// `[[workloads.custom.indexes]]`: one index.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomIndex {
    /// The key pattern, e.g. `{ customer = 1, date = -1 }`.
    pub keys: serde_json::Value,
    /// A unique index.
    #[serde(default)]
    pub unique: bool,
    /// The index name (default: the server's).
    #[serde(default)]
    pub name: Option<String>,
}

/// The commands a custom operation can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CustomOpKind {
    Insert,
    Find,
    Update,
    Delete,
    Aggregate,
    Count,
    Distinct,
}

impl CustomOpKind {
    /// The name as written in the config (and the default `op` label).
    pub fn as_str(self) -> &'static str {
        match self {
            CustomOpKind::Insert => "insert",
            CustomOpKind::Find => "find",
            CustomOpKind::Update => "update",
            CustomOpKind::Delete => "delete",
            CustomOpKind::Aggregate => "aggregate",
            CustomOpKind::Count => "count",
            CustomOpKind::Distinct => "distinct",
        }
    }
}

/// `[[workloads.custom.operations]]`: one operation of the mix.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CustomOp {
    /// The command.
    pub op: CustomOpKind,
    /// The `op` metric label (default: the command); unique.
    #[serde(default)]
    pub name: Option<String>,
    /// Relative weight.
    #[serde(default = "one")]
    pub weight: f64,
    /// Filter template (find, update, delete, count, distinct).
    #[serde(default)]
    pub filter: Option<serde_json::Value>,
    /// Update template (update): operators such as `$set`, `$inc`.
    #[serde(default)]
    pub update: Option<serde_json::Value>,
    /// Document template (insert), instead of the workload's.
    #[serde(default)]
    pub document: Option<serde_json::Value>,
    /// Pipeline templates (aggregate).
    #[serde(default)]
    pub pipeline: Option<Vec<serde_json::Value>>,
    /// The field (distinct).
    #[serde(default)]
    pub field: Option<String>,
    /// Sort (find).
    #[serde(default)]
    pub sort: Option<serde_json::Value>,
    /// Projection (find).
    #[serde(default)]
    pub projection: Option<serde_json::Value>,
    /// At most this many documents (find; 0 = no limit).
    #[serde(default)]
    pub limit: i64,
    /// Update or delete every match, not only the first.
    #[serde(default)]
    pub many: bool,
}

fn one() -> f64 {
    1.0
}

impl CustomOp {
    /// The `op` label.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(self.op.as_str())
    }
}

impl Kind for CustomConfig {
    fn writes(&self) -> bool {
        // An aggregation may end in `$out` or `$merge`.
        self.operations.iter().any(|o| {
            o.weight > 0.0
                && !matches!(
                    o.op,
                    CustomOpKind::Find | CustomOpKind::Count | CustomOpKind::Distinct
                )
        })
    }

    fn inserts(&self) -> bool {
        self.operations
            .iter()
            .any(|o| o.op == CustomOpKind::Insert && o.weight > 0.0)
    }

    fn validate(&self) -> Result<(), KeyError> {
        check_collection("collection", &self.collection)?;
        at_least_one("load_batch", self.load_batch as u64)?;
        check_bound(self.max_docs, self.initial_docs)?;
        if let Some(size) = self.doc_size {
            if size.bytes() > MAX_DOC_SIZE {
                return Err(KeyError::new("doc_size", "must be at most 16MiB"));
            }
        }
        if self.operations.is_empty() {
            return Err(KeyError::new(
                "operations",
                "at least one [[workloads.custom.operations]] is required",
            ));
        }
        let mut sum = 0.0;
        for (i, op) in self.operations.iter().enumerate() {
            check_weight(&format!("operations[{i}].weight"), op.weight)?;
            sum += op.weight;
            let label = op.label();
            if label.is_empty() {
                return Err(KeyError::new(
                    format!("operations[{i}].name"),
                    format!("{label:?} cannot be an op label"),
                ));
            }
            if let Some(j) = self.operations[..i].iter().position(|o| o.label() == label) {
                return Err(KeyError::new(
                    format!("operations[{i}].name"),
                    format!(
                        "op label {label:?} is also operations[{j}]'s; give each a distinct name"
                    ),
                ));
            }
        }
        if sum <= 0.0 {
            return Err(KeyError::new(
                "operations",
                "the operation weights sum to zero",
            ));
        }
        // Templates, pipelines and generator specs: compiled as the
        // workload will compile them, so check-config reports their errors.
        super::Custom::check(self)
    }

    fn describe(&self) -> String {
        let mut s = format!(
            "  collection: {}, initial_docs: {}, max_docs: {}, doc_size: {}\n",
            self.collection,
            self.initial_docs,
            bound(self.max_docs),
            self.doc_size
                .map_or("(template)".to_string(), |d| format!("{d}"))
        );
        let _ = writeln!(s, "  document: {}", self.document);
        for i in &self.indexes {
            let _ = writeln!(
                s,
                "  index: {}{}",
                i.keys,
                if i.unique { " (unique)" } else { "" }
            );
        }
        for op in &self.operations {
            let _ = writeln!(
                s,
                "  op {} ({}), weight {}",
                op.label(),
                op.op.as_str(),
                op.weight
            );
        }
        s
    }

    /// Inserts add a document each (`many`: an estimate of one), deletes
    /// take one each; the document's size is `doc_size`, else its JSON's.
    fn footprint(&self) -> Option<crate::workload::footprint::Footprint> {
        let total: f64 = self.operations.iter().map(|o| o.weight).sum();
        if total <= 0.0 {
            return None;
        }
        let share = |kind: CustomOpKind| {
            self.operations
                .iter()
                .filter(|o| o.op == kind)
                .map(|o| o.weight)
                .sum::<f64>()
                / total
        };
        let doc_bytes = match self.doc_size {
            Some(size) => size.bytes() as f64,
            None => self.document.to_string().len() as f64,
        };
        Some(crate::workload::footprint::Footprint {
            doc_bytes,
            initial_docs: self.initial_docs,
            net_docs_per_op: share(CustomOpKind::Insert) - share(CustomOpKind::Delete),
            bound: (self.max_docs > 0).then_some(self.max_docs),
        })
    }

    fn build(&self, seed: u64) -> Result<Arc<dyn Workload>, KeyError> {
        self.validate()?;
        Ok(Arc::new(super::build(self, seed)?))
    }

    /// A custom workload's deletes must name the `_id`s they delete (as a
    /// value or a range), or the audit could not tell a deliberate delete
    /// from a lost write; pipelines must not write (`$out`, `$merge`).
    fn check_audit(&self) -> Result<(), KeyError> {
        for (i, op) in self.operations.iter().enumerate() {
            match op.op {
                CustomOpKind::Delete => {
                    let only_id = op
                        .filter
                        .as_ref()
                        .and_then(|f| f.as_object())
                        .is_some_and(|f| f.len() == 1 && f.contains_key("_id"));
                    if !only_id {
                        return Err(KeyError::new(
                            format!("operations[{i}].filter"),
                            "with audit = true a delete's filter must be on _id alone \
                             (a value or a range), so the audit knows which documents it deletes",
                        ));
                    }
                }
                CustomOpKind::Aggregate => {
                    let writes = op.pipeline.iter().flatten().any(|stage| {
                        stage
                            .as_object()
                            .is_some_and(|s| s.contains_key("$out") || s.contains_key("$merge"))
                    });
                    if writes {
                        return Err(KeyError::new(
                            format!("operations[{i}].pipeline"),
                            "with audit = true a pipeline must not write ($out, $merge)",
                        ));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }
}
