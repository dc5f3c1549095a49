//! Parameter tables of the built-in workload kinds other than `mixed`:
//! `[workloads.insert_benchmark]`, `[workloads.sysbench]`,
//! `[workloads.name_num]`, `[workloads.large_doc]`, `[workloads.ycsb]` and
//! `[workloads.custom]`. Every key is optional; the defaults are those of
//! the benchmark each kind reproduces (see the README's Workloads section).

use std::fmt::Write as _;

use serde::Deserialize;

use super::{ByteSize, KeyError, MAX_DOC_SIZE};
use crate::workload::gen::KeyDist;

fn check_collection(key: &str, name: &str) -> Result<(), KeyError> {
    if name.is_empty() || name.contains(['$', '\0']) || name.starts_with("system.") {
        return Err(KeyError::new(
            key,
            format!("not a valid collection name: {name:?}"),
        ));
    }
    Ok(())
}

fn at_least_one(key: &str, v: u64) -> Result<(), KeyError> {
    if v == 0 {
        return Err(KeyError::new(key, "must be at least 1, got 0"));
    }
    Ok(())
}

fn check_weight(key: &str, w: f64) -> Result<(), KeyError> {
    if !(w.is_finite() && w >= 0.0) {
        return Err(KeyError::new(
            key,
            format!("weight must be a number ≥ 0, got {w}"),
        ));
    }
    Ok(())
}

/// A `max_docs` bound must leave room for the loaded data, or the first
/// inserts would delete documents the run expects to find.
fn check_bound(max_docs: u64, initial_docs: u64) -> Result<(), KeyError> {
    if max_docs > 0 && max_docs < initial_docs {
        return Err(KeyError::new(
            "max_docs",
            format!("{max_docs} is below initial_docs {initial_docs}; use 0 (unbounded) or a bound ≥ initial_docs"),
        ));
    }
    Ok(())
}

/// `[workloads.insert_benchmark]`: the insert benchmark (iibench).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct InsertBenchmarkConfig {
    /// The collection (iibench-mongodb's default name).
    pub collection: String,
    /// Documents per `insertMany` call.
    pub batch_size: usize,
    /// Documents loaded by the prepare step (iibench starts empty).
    pub initial_docs: u64,
    /// Documents per insert call during the prepare step.
    pub load_batch: usize,
    /// Hold the collection to this many documents by deleting the oldest
    /// batch with every insert batch (delete-per-insert); 0 = unbounded.
    pub max_docs: u64,
    /// Characters of the `data` padding field.
    pub data_length: usize,
    /// `cashregisterid` is uniform in `[0, cashregisters)`.
    pub cashregisters: u64,
    /// `productid` is uniform in `[0, products)`.
    pub products: u64,
    /// `customerid` is uniform in `[0, customers)`.
    pub customers: u64,
    /// `price` is `(uniform(0, max_price) + customerid) / 100`.
    pub max_price: f64,
    /// Workers (the first ones) that run range queries instead of inserts.
    pub query_workers: u32,
    /// Queries per second per query worker at most; 0 = no cap. A query
    /// worker over its budget inserts a batch instead of waiting.
    pub query_rate: f64,
    /// Documents returned by each range query.
    pub query_limit: i64,
}

impl Default for InsertBenchmarkConfig {
    fn default() -> Self {
        InsertBenchmarkConfig {
            collection: "purchases_index".into(),
            batch_size: 100,
            initial_docs: 0,
            load_batch: 1000,
            max_docs: 0,
            data_length: 10,
            cashregisters: 1000,
            products: 10_000,
            customers: 100_000,
            max_price: 500.0,
            query_workers: 0,
            query_rate: 100.0,
            query_limit: 10,
        }
    }
}

impl InsertBenchmarkConfig {
    pub(super) fn validate(&self) -> Result<(), KeyError> {
        check_collection("collection", &self.collection)?;
        at_least_one("batch_size", self.batch_size as u64)?;
        at_least_one("load_batch", self.load_batch as u64)?;
        at_least_one("cashregisters", self.cashregisters)?;
        at_least_one("products", self.products)?;
        at_least_one("customers", self.customers)?;
        at_least_one("query_limit", self.query_limit.max(0) as u64)?;
        if !(self.max_price.is_finite() && self.max_price > 0.0) {
            return Err(KeyError::new(
                "max_price",
                format!("must be a number > 0, got {}", self.max_price),
            ));
        }
        if !(self.query_rate.is_finite() && self.query_rate >= 0.0) {
            return Err(KeyError::new(
                "query_rate",
                format!("must be a number ≥ 0, got {}", self.query_rate),
            ));
        }
        if self.data_length as u64 > MAX_DOC_SIZE {
            return Err(KeyError::new("data_length", "must be below 16MiB"));
        }
        if self.max_docs > 0 && self.max_docs < self.batch_size as u64 {
            return Err(KeyError::new(
                "max_docs",
                format!(
                    "{} is below batch_size {}; use 0 (unbounded) or a bound ≥ batch_size",
                    self.max_docs, self.batch_size
                ),
            ));
        }
        check_bound(self.max_docs, self.initial_docs)
    }

    pub(super) fn describe(&self) -> String {
        let mut s = format!(
            "  collection: {}, batch_size: {}, initial_docs: {}, max_docs: {}, data_length: {}\n",
            self.collection,
            self.batch_size,
            self.initial_docs,
            bound(self.max_docs),
            self.data_length
        );
        let _ = writeln!(
            s,
            "  cashregisters: {}, products: {}, customers: {}, max_price: {}",
            self.cashregisters, self.products, self.customers, self.max_price
        );
        let _ = writeln!(
            s,
            "  query_workers: {}, query_rate: {}/s each, query_limit: {}",
            self.query_workers,
            if self.query_rate > 0.0 {
                self.query_rate.to_string()
            } else {
                "uncapped".into()
            },
            self.query_limit
        );
        s
    }
}

fn bound(max_docs: u64) -> String {
    if max_docs == 0 {
        "unbounded".into()
    } else {
        max_docs.to_string()
    }
}

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

    pub(super) fn validate(&self) -> Result<(), KeyError> {
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

    pub(super) fn describe(&self) -> String {
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
}

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

impl NameNumConfig {
    pub(super) fn validate(&self) -> Result<(), KeyError> {
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

    pub(super) fn describe(&self) -> String {
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
}

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

impl LargeDocConfig {
    pub(super) fn validate(&self) -> Result<(), KeyError> {
        check_collection("collection", &self.collection)?;
        at_least_one("load_batch", self.load_batch as u64)?;
        if self.insert_workers + self.query_workers == 0 {
            return Err(KeyError::new(
                "insert_workers",
                "insert_workers and query_workers are both 0",
            ));
        }
        let size = self.doc_size.bytes();
        if !(64..=MAX_DOC_SIZE).contains(&size) {
            return Err(KeyError::new(
                "doc_size",
                format!("must be between 64 bytes and 16MiB, got {size} bytes"),
            ));
        }
        check_bound(self.max_docs, self.initial_docs)
    }

    pub(super) fn describe(&self) -> String {
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
}

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

    /// Proportions of read, update, insert, scan, read-modify-write, as in
    /// YCSB's `workloads/workload[a-f]` files.
    pub fn proportions(self) -> [f64; 5] {
        match self {
            YcsbLetter::A => [0.5, 0.5, 0.0, 0.0, 0.0],
            YcsbLetter::B => [0.95, 0.05, 0.0, 0.0, 0.0],
            YcsbLetter::C => [1.0, 0.0, 0.0, 0.0, 0.0],
            YcsbLetter::D => [0.95, 0.0, 0.05, 0.0, 0.0],
            YcsbLetter::E => [0.0, 0.0, 0.05, 0.95, 0.0],
            YcsbLetter::F => [0.5, 0.0, 0.0, 0.0, 0.5],
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
    /// The collection (YCSB's `table`).
    pub collection: String,
}

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
            collection: "usertable".into(),
        }
    }
}

impl YcsbConfig {
    /// The request distribution in effect.
    pub fn distribution(&self) -> KeyDist {
        self.request_distribution
            .unwrap_or_else(|| self.workload.request_distribution())
    }

    pub(super) fn validate(&self) -> Result<(), KeyError> {
        check_collection("collection", &self.collection)?;
        at_least_one("record_count", self.record_count)?;
        at_least_one("field_count", u64::from(self.field_count))?;
        at_least_one("load_batch", self.load_batch as u64)?;
        at_least_one("max_scan_length", self.max_scan_length.max(0) as u64)?;
        if self.field_count as u64 * self.field_length as u64 > MAX_DOC_SIZE / 2 {
            return Err(KeyError::new(
                "field_length",
                "field_count × field_length must stay below 8MiB",
            ));
        }
        Ok(())
    }

    pub(super) fn describe(&self) -> String {
        format!(
            "  workload: {}, record_count: {}, fields: {} × {} bytes ({}), distribution: {:?}, collection: {}{}\n",
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
            }
        )
    }
}

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

impl CustomConfig {
    pub(super) fn validate(&self) -> Result<(), KeyError> {
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
        crate::workload::custom::Custom::check(self).map_err(|e| KeyError::new(e.key, e.reason))
    }

    pub(super) fn describe(&self) -> String {
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
}
