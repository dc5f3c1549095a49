//! Kind `insert-benchmark`: Mark Callaghan's insert benchmark in the
//! iibench style. Documents
//! `{ _id, dateandtime, cashregisterid, customerid, productid, price, data }`
//! with three secondary indexes — `{price, customerid}`,
//! `{cashregisterid, price, customerid}`, `{price, dateandtime, customerid}`
//! — inserted in batches (100 per `insertMany` by default). Documents per
//! second show as `mongoload_documents_total{op="insert"}`.
//!
//! Optional query workers (the first `query_workers` workers) run short
//! range scans on the secondary indexes — `limit` documents from a random
//! start, in index order, projected on the index's fields — at most
//! `query_rate` per second each; a query worker over its budget inserts a
//! batch instead, because the engine has no idle operation.
//!
//! With `max_docs` every insert batch also deletes the oldest batch
//! (delete-per-insert, as the benchmark's own option does), so the
//! collection holds at most `max_docs` documents for as long as it runs.

pub(crate) mod params;

pub use params::InsertBenchmarkConfig;

use std::sync::Arc;
use std::time::{Duration, Instant};

use mongodb::bson::{doc, DateTime, Document};
use rand::rngs::SmallRng;
use rand::Rng;

use super::generators::PadPool;
use super::{
    Action, BoundedInserts, Built, Generator, LastInsert, Op, OpSource, OpSpec, PrepareStep,
};

const COLL: usize = 0;
const INSERT: usize = 0;
const QUERY: usize = 1;

/// Loaded documents get `dateandtime` = this instant + `_id` milliseconds
/// (2026-01-01T00:00:00Z), so a load is deterministic; run-time inserts
/// take the current time, as iibench does.
const LOAD_EPOCH_MS: i64 = 1_767_225_600_000;

/// The three secondary indexes: key patterns of the iibench schema.
pub fn index_keys() -> [Document; 3] {
    [
        doc! { "price": 1, "customerid": 1 },
        doc! { "cashregisterid": 1, "price": 1, "customerid": 1 },
        doc! { "price": 1, "dateandtime": 1, "customerid": 1 },
    ]
}

/// The `insert-benchmark` workload's generator, shared by every worker.
#[derive(Debug)]
pub struct InsertBenchmark {
    pad: PadPool,
    cfg: InsertBenchmarkConfig,
    inserts: BoundedInserts,
}

impl InsertBenchmark {
    fn document(&self, rng: &mut SmallRng, id: u64, at: DateTime) -> Document {
        let c = &self.cfg;
        let customer = rng.random_range(0..c.customers);
        let price = (rng.random::<f64>() * c.max_price + customer as f64) / 100.0;
        doc! {
            "_id": id as i64,
            "dateandtime": at,
            "cashregisterid": rng.random_range(0..c.cashregisters) as i64,
            "customerid": customer as i64,
            "productid": rng.random_range(0..c.products) as i64,
            "price": price,
            "data": self.pad.pad(rng, c.data_length),
        }
    }

    /// Document `i` as the prepare step loads it: `dateandtime` from
    /// [`LOAD_EPOCH_MS`], so a load is deterministic.
    fn loaded(&self, rng: &mut SmallRng, i: u64) -> Document {
        self.document(rng, i, DateTime::from_millis(LOAD_EPOCH_MS + i as i64))
    }

    /// The highest price a document can have.
    fn price_top(&self) -> f64 {
        (self.cfg.max_price + self.cfg.customers as f64) / 100.0
    }

    /// The shared `_id` counter: the first key of the next insert batch.
    pub fn next_id(&self) -> &Arc<crate::cluster::Keys> {
        self.inserts.counter()
    }
}

/// Builds the workload from validated parameters.
pub fn build(cfg: &InsertBenchmarkConfig, seed: u64) -> Built<InsertBenchmark> {
    let inserts = BoundedInserts::new(COLL, cfg.initial_docs, cfg.max_docs);
    let ops = vec![inserts.spec("insert"), OpSpec::single("query")];
    let ib = Arc::new(InsertBenchmark {
        pad: PadPool::new(seed, PadPool::DEFAULT_SIZE),
        cfg: cfg.clone(),
        inserts,
    });
    let mut prepare: Vec<PrepareStep> = index_keys()
        .into_iter()
        .map(|keys| PrepareStep::index(COLL, keys, None))
        .collect();
    prepare.extend(
        ib.inserts
            .prepare((cfg.load_batch, seed), &ib, InsertBenchmark::loaded),
    );
    let keys = vec![Arc::clone(ib.inserts.counter())];
    Built::new(
        "insert-benchmark",
        ops,
        vec![cfg.collection.clone()],
        prepare,
        ib,
    )
    .with_keys(keys)
}

impl Generator for InsertBenchmark {
    fn source(self: Arc<Self>, worker: u32, rng: SmallRng) -> Box<dyn OpSource> {
        let cfg = &self.cfg;
        Box::new(Source {
            querier: worker < cfg.query_workers,
            interval: (cfg.query_rate > 0.0).then(|| Duration::from_secs_f64(1.0 / cfg.query_rate)),
            next_query: None,
            next_index: worker as usize % 3,
            ib: self,
            rng,
            last: LastInsert::default(),
        })
    }
}

struct Source {
    ib: Arc<InsertBenchmark>,
    querier: bool,
    /// Time between two queries of this worker; `None`: no cap.
    interval: Option<Duration>,
    /// When this worker may query next.
    next_query: Option<Instant>,
    /// The secondary index the next query scans (round robin).
    next_index: usize,
    rng: SmallRng,
    /// This worker's previous insert ([`LastInsert`]).
    last: LastInsert,
}

impl Source {
    /// Whether the query budget allows a query now, spending it if so.
    fn may_query(&mut self) -> bool {
        let Some(interval) = self.interval else {
            return true;
        };
        let now = Instant::now();
        match self.next_query {
            Some(at) if now < at => false,
            // A budget unused for a while is not saved up beyond one query.
            Some(at) => {
                self.next_query = Some((at + interval).max(now));
                true
            }
            None => {
                self.next_query = Some(now + interval);
                true
            }
        }
    }

    fn query(&mut self) -> Action {
        let s = &*self.ib;
        let index = self.next_index;
        self.next_index = (index + 1) % 3;
        let keys = &index_keys()[index];
        let mut projection = doc! { "_id": 0 };
        for (k, _) in keys {
            projection.insert(k.clone(), 1);
        }
        let filter = if index == 1 {
            doc! { "cashregisterid": { "$gte": self.rng.random_range(0..s.cfg.cashregisters) as i64 } }
        } else {
            doc! { "price": { "$gte": self.rng.random::<f64>() * s.price_top() } }
        };
        Action::Find {
            collection: COLL,
            filter,
            sort: Some(keys.clone()),
            limit: s.cfg.query_limit,
            projection: Some(projection),
        }
    }

    fn insert(&mut self) -> Op {
        let (ib, rng) = (&*self.ib, &mut self.rng);
        let now = DateTime::now();
        ib.inserts
            .insert_many(INSERT, ib.cfg.batch_size as u64, &mut self.last, |id| {
                ib.document(rng, id, now)
            })
    }
}

impl OpSource for Source {
    fn next_op(&mut self) -> Op {
        if self.querier && self.may_query() {
            return Op::one(QUERY, self.query());
        }
        self.insert()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    fn cfg() -> InsertBenchmarkConfig {
        InsertBenchmarkConfig {
            initial_docs: 1000,
            ..InsertBenchmarkConfig::default()
        }
    }

    #[test]
    fn inserts_are_batches_of_iibench_documents_with_fresh_ids() {
        let w = build(&cfg(), 1);
        let mut a = w.worker(0, 1);
        let mut b = w.worker(1, 1);
        let mut ids = std::collections::HashSet::new();
        for i in 0..20 {
            let op = if i % 2 == 0 { a.next_op() } else { b.next_op() };
            assert_eq!(op.op, INSERT);
            let Some(Action::InsertMany { docs, .. }) = op.into_action() else {
                panic!()
            };
            assert_eq!(docs.len(), 100);
            for d in docs {
                let id = d.get_i64("_id").unwrap();
                assert!(id >= 1000 && ids.insert(id));
                let customer = d.get_i64("customerid").unwrap();
                assert!((0..100_000).contains(&customer));
                assert!((0..1000).contains(&d.get_i64("cashregisterid").unwrap()));
                assert!((0..10_000).contains(&d.get_i64("productid").unwrap()));
                let price = d.get_f64("price").unwrap();
                assert!(price >= customer as f64 / 100.0);
                assert!(price < (customer as f64 + 500.0) / 100.0);
                assert_eq!(d.get_str("data").unwrap().len(), 10);
                assert!(d.get_datetime("dateandtime").is_ok());
            }
        }
        assert_eq!(ids.len(), 2000);
    }

    #[test]
    fn prepare_creates_the_three_indexes() {
        let w = build(&cfg(), 1);
        let steps = w.prepare();
        let keys: Vec<&Document> = steps
            .iter()
            .filter_map(|s| match s {
                PrepareStep::CreateIndex { keys, .. } => Some(keys),
                _ => None,
            })
            .collect();
        assert_eq!(keys.len(), 3);
        assert_eq!(
            keys[1],
            &doc! { "cashregisterid": 1, "price": 1, "customerid": 1 }
        );
        let PrepareStep::Load { make, count, .. } = &steps[3] else {
            panic!()
        };
        assert_eq!(*count, 1000);
        assert_eq!(make(7), make(7));
    }

    #[test]
    fn query_workers_scan_each_index_within_their_rate() {
        let c = InsertBenchmarkConfig {
            query_workers: 1,
            query_rate: 0.0,
            ..cfg()
        };
        let w = build(&c, 1);
        let mut q = w.worker(0, 1);
        let mut sorts = Vec::new();
        for _ in 0..3 {
            let op = q.next_op();
            assert_eq!(op.op, QUERY);
            let Some(Action::Find {
                sort,
                limit,
                projection,
                ..
            }) = op.into_action()
            else {
                panic!()
            };
            assert_eq!(limit, 10);
            assert_eq!(projection.unwrap().get_i32("_id"), Ok(0));
            sorts.push(sort.unwrap());
        }
        assert_eq!(sorts, index_keys().to_vec());
        // Worker 1 is not a query worker.
        assert_eq!(w.worker(1, 1).next_op().op, INSERT);

        // Capped at 2/s: back to back, one query then inserts.
        let capped = InsertBenchmarkConfig {
            query_workers: 1,
            query_rate: 2.0,
            ..cfg()
        };
        let w = build(&capped, 1);
        let mut q = w.worker(0, 1);
        let ops: Vec<usize> = (0..5).map(|_| q.next_op().op).collect();
        assert_eq!(ops, [QUERY, INSERT, INSERT, INSERT, INSERT]);
    }

    #[test]
    fn a_bound_evicts_the_oldest_batch_in_the_same_insert() {
        let c = InsertBenchmarkConfig {
            initial_docs: 1000,
            max_docs: 1000,
            ..InsertBenchmarkConfig::default()
        };
        let w = build(&c, 1);
        assert_eq!(w.op_names(), ["insert", "query"]);
        assert_eq!(&*w.ops()[0].steps[1], "evict");
        let mut src = w.worker(0, 1);
        for batch in 0..5i64 {
            let op = src.next_op();
            assert_eq!(op.op, INSERT);
            let steps = op.requests();
            assert_eq!((steps[0].step, steps[1].step), (0, 1));
            assert!(matches!(steps[0].action, Action::InsertMany { .. }));
            let Action::DeleteMany { filter, .. } = &steps[1].action else {
                panic!()
            };
            let range = filter.get_document("_id").unwrap();
            assert_eq!(range.get_i64("$gte"), Ok(batch * 100));
            assert_eq!(range.get_i64("$lt"), Ok(batch * 100 + 100));
        }
    }
}
