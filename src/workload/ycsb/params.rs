//! `[workloads.ycsb]`: the parameters of kind `ycsb`, their defaults
//! (those of the benchmark the kind reproduces), validation and the lines
//! `check-config` prints for them.

use std::sync::Arc;

use serde::Deserialize;

use crate::config_values::KeyError;
use crate::workload::generators::KeyDist;
use crate::workload::kind_trait::Kind;
use crate::workload::validate::{at_least_one, check_collection, MAX_DOC_SIZE};
use crate::workload::Workload;

/// How YCSB record fields are stored.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum YcsbFieldType {
    /// BSON binary (subtype 0) of `field_length` random bytes, as YCSB's
    /// MongoDB binding stores them.
    #[default]
    Binary,
    /// A string of `field_length` random characters (mongoload 0.1).
    String,
}

impl YcsbFieldType {
    pub fn as_str(self) -> &'static str {
        match self {
            YcsbFieldType::Binary => "binary",
            YcsbFieldType::String => "string",
        }
    }
}

/// YCSB's operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum YcsbOp {
    /// Read one record, every field.
    Read,
    /// Write one random field of one record.
    Update,
    /// Insert a new record.
    Insert,
    /// Read a short range of records in key order (workload E).
    Scan,
    /// Read a record, then update one field of it (workload F): one
    /// operation of two requests, steps `read` and `update`.
    ReadModifyWrite,
}

impl YcsbOp {
    /// The `op` label.
    pub fn label(self) -> &'static str {
        match self {
            YcsbOp::Read => "read",
            YcsbOp::Update => "update",
            YcsbOp::Insert => "insert",
            YcsbOp::Scan => "scan",
            YcsbOp::ReadModifyWrite => "read_modify_write",
        }
    }
}

/// YCSB's core workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum YcsbLetter {
    /// Update heavy: 50 % reads, 50 % updates.
    #[serde(alias = "a")]
    A,
    /// Read mostly: 95 % reads, 5 % updates.
    #[serde(alias = "b")]
    B,
    /// Read only.
    #[serde(alias = "c")]
    C,
    /// Read latest: 95 % reads, 5 % inserts, latest distribution.
    #[serde(alias = "d")]
    D,
    /// Short ranges: 95 % scans, 5 % inserts.
    #[serde(alias = "e")]
    E,
    /// Read-modify-write: 50 % reads, 50 % read-modify-writes.
    #[serde(alias = "f")]
    F,
}

impl YcsbLetter {
    /// The letter.
    pub fn as_str(self) -> &'static str {
        match self {
            YcsbLetter::A => "A",
            YcsbLetter::B => "B",
            YcsbLetter::C => "C",
            YcsbLetter::D => "D",
            YcsbLetter::E => "E",
            YcsbLetter::F => "F",
        }
    }

    /// The proportion of each operation, as in YCSB's
    /// `workloads/workload[a-f]` files (those not listed are 0).
    pub fn proportions(self) -> &'static [(YcsbOp, f64)] {
        use YcsbOp::*;
        match self {
            YcsbLetter::A => &[(Read, 0.5), (Update, 0.5)],
            YcsbLetter::B => &[(Read, 0.95), (Update, 0.05)],
            YcsbLetter::C => &[(Read, 1.0)],
            YcsbLetter::D => &[(Read, 0.95), (Insert, 0.05)],
            YcsbLetter::E => &[(Insert, 0.05), (Scan, 0.95)],
            YcsbLetter::F => &[(Read, 0.5), (ReadModifyWrite, 0.5)],
        }
    }

    /// YCSB's request distribution of the workload: latest for D, zipfian
    /// (scrambled, as YCSB's `zipfian` is) otherwise.
    pub fn request_distribution(self) -> KeyDist {
        match self {
            YcsbLetter::D => KeyDist::Latest,
            _ => KeyDist::ScrambledZipfian,
        }
    }
}

/// `[workloads.ycsb]`: YCSB's core workloads A–F.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct YcsbConfig {
    /// Which core workload.
    pub workload: YcsbLetter,
    /// Records loaded by the prepare step (`recordcount`).
    pub record_count: u64,
    /// Fields per record (`fieldcount`).
    pub field_count: u32,
    /// Bytes per field (`fieldlength`).
    pub field_length: usize,
    /// `binary` (YCSB's MongoDB binding) or `string`.
    pub field_type: YcsbFieldType,
    /// Overrides the workload's request distribution.
    pub request_distribution: Option<KeyDist>,
    /// Longest scan of workload E (`maxscanlength`); lengths are uniform
    /// in `[1, max_scan_length]`.
    pub max_scan_length: i64,
    /// Records per insert call during the prepare step.
    pub load_batch: usize,
    /// The most records kept by the inserts of D and E: past it record
    /// `n` takes the key of record `n - max_docs`, deleted first (step
    /// `evict` of `insert`). Absent: ten times `record_count` (at least
    /// [`DEFAULT_MAX_DOCS_FLOOR`]); 0: unbounded, as YCSB itself.
    pub max_docs: Option<u64>,
    /// The collection (YCSB's `table`).
    pub collection: String,
}

/// The smallest default bound of `ycsb` (`max_docs` absent).
pub(crate) const DEFAULT_MAX_DOCS_FLOOR: u64 = 10_000;

impl Default for YcsbConfig {
    fn default() -> Self {
        YcsbConfig {
            workload: YcsbLetter::A,
            record_count: 1000,
            field_count: 10,
            field_length: 100,
            field_type: YcsbFieldType::Binary,
            request_distribution: None,
            max_scan_length: 100,
            load_batch: 100,
            max_docs: None,
            collection: "usertable".into(),
        }
    }
}

impl YcsbConfig {
    /// The bound inserts keep to: `max_docs`, else ten times
    /// `record_count` (at least [`DEFAULT_MAX_DOCS_FLOOR`]); 0: unbounded.
    /// Workloads that never insert have none.
    pub fn bound(&self) -> u64 {
        if !self.inserts() {
            return 0;
        }
        self.max_docs.unwrap_or_else(|| {
            self.record_count
                .saturating_mul(10)
                .max(DEFAULT_MAX_DOCS_FLOOR)
        })
    }

    /// The request distribution in effect.
    pub fn distribution(&self) -> KeyDist {
        self.request_distribution
            .unwrap_or_else(|| self.workload.request_distribution())
    }
}

impl Kind for YcsbConfig {
    fn inserts(&self) -> bool {
        self.workload
            .proportions()
            .iter()
            .any(|(op, p)| *op == YcsbOp::Insert && *p > 0.0)
    }

    fn writes(&self) -> bool {
        self.workload
            .proportions()
            .iter()
            .any(|(op, p)| !matches!(op, YcsbOp::Read | YcsbOp::Scan) && *p > 0.0)
    }

    fn validate(&self) -> Result<(), KeyError> {
        check_collection("collection", &self.collection)?;
        at_least_one("record_count", self.record_count)?;
        at_least_one("field_count", u64::from(self.field_count))?;
        at_least_one("load_batch", self.load_batch as u64)?;
        at_least_one("max_scan_length", self.max_scan_length.max(0) as u64)?;
        if let Some(max) = self.max_docs {
            crate::workload::validate::check_bound_of(max, self.record_count, "record_count")?;
        }
        // Saturating: a huge field_length is an error here, not an overflow.
        if u64::from(self.field_count).saturating_mul(self.field_length as u64) > MAX_DOC_SIZE / 2 {
            return Err(KeyError::new(
                "field_length",
                "field_count × field_length must stay below 8MiB",
            ));
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "  workload: {}, record_count: {}, fields: {} × {} bytes ({}), distribution: {:?}, collection: {}{}{}\n",
            self.workload.as_str(),
            self.record_count,
            self.field_count,
            self.field_length,
            self.field_type.as_str(),
            self.distribution(),
            self.collection,
            if self.workload == YcsbLetter::E {
                format!(", max_scan_length: {}", self.max_scan_length)
            } else {
                String::new()
            },
            match (self.inserts(), self.max_docs, self.bound()) {
                (false, _, _) => String::new(),
                (true, _, 0) => ", max_docs: unbounded".to_owned(),
                (true, None, b) => format!(", max_docs: {b} (the default: 10 × record_count)"),
                (true, Some(_), b) => format!(", max_docs: {b}"),
            }
        )
    }

    /// Workloads D and E insert (5 % of their operations) up to their
    /// bound, past which an insert replaces the oldest record.
    fn key_shape(&self, field: &str) -> crate::workload::shard::KeyShape {
        match field {
            // `"user" + fnvhash64(n)`: hashed, in no order.
            "_id" => crate::workload::shard::KeyShape::Scattered,
            _ => crate::workload::shard::KeyShape::Unknown,
        }
    }
    fn footprint(&self) -> Option<crate::workload::footprint::Footprint> {
        let inserts: f64 = self
            .workload
            .proportions()
            .iter()
            .filter(|(op, _)| *op == YcsbOp::Insert)
            .map(|(_, p)| *p)
            .sum();
        Some(crate::workload::footprint::Footprint {
            doc_bytes: f64::from(self.field_count) * (self.field_length as f64 + 10.0) + 30.0,
            initial_docs: self.record_count,
            net_docs_per_op: inserts,
            bound: (self.bound() > 0).then(|| self.bound()),
        })
    }

    fn build(&self, seed: u64) -> Result<Arc<dyn Workload>, KeyError> {
        self.validate()?;
        Ok(Arc::new(super::build(self, seed)))
    }
}
