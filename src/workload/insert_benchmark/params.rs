//! `[workloads.insert_benchmark]`: the parameters of kind `insert-benchmark`, their defaults
//! (those of the benchmark the kind reproduces), validation and the lines
//! `check-config` prints for them.

use std::fmt::Write as _;
use std::sync::Arc;

use serde::Deserialize;

use crate::config_values::KeyError;
use crate::workload::kind_trait::Kind;
use crate::workload::validate::{at_least_one, bound, check_bound, check_collection, MAX_DOC_SIZE};
use crate::workload::Workload;

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

/// The bytes of a document besides `data` (`_id`, the date, three ids and
/// the price, with their names): an estimate for `check-config`.
const DOC_OVERHEAD_ESTIMATE: f64 = 120.0;

impl Kind for InsertBenchmarkConfig {
    fn inserts(&self) -> bool {
        true
    }

    fn writes(&self) -> bool {
        true
    }

    fn validate(&self) -> Result<(), KeyError> {
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

    fn describe(&self) -> String {
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

    /// Each operation inserts a batch (an over-budget query worker too):
    /// an upper bound of `batch_size` documents per operation.
    fn key_shape(&self, field: &str) -> crate::workload::shard::KeyShape {
        let within = |n: u64| crate::workload::shard::KeyShape::Within {
            start: 0,
            end: n.min(i64::MAX as u64) as i64,
        };
        match field {
            "_id" => crate::workload::shard::KeyShape::counter(
                true,
                self.initial_docs.max(self.max_docs),
            ),
            // The insert's time.
            "dateandtime" => crate::workload::shard::KeyShape::Grows { range: None },
            "cashregisterid" => within(self.cashregisters),
            "customerid" => within(self.customers),
            "productid" => within(self.products),
            "price" => crate::workload::shard::KeyShape::Scattered,
            _ => crate::workload::shard::KeyShape::Unknown,
        }
    }
    fn footprint(&self) -> Option<crate::workload::footprint::Footprint> {
        Some(crate::workload::footprint::Footprint {
            doc_bytes: self.data_length as f64 + DOC_OVERHEAD_ESTIMATE,
            initial_docs: self.initial_docs,
            net_docs_per_op: self.batch_size as f64,
            bound: (self.max_docs > 0).then_some(self.max_docs),
        })
    }

    fn build(&self, seed: u64) -> Result<Arc<dyn Workload>, KeyError> {
        self.validate()?;
        Ok(Arc::new(super::build(self, seed)))
    }
}
