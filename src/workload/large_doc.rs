//! Kind `large-doc`: documents of a fixed BSON size (10 KB by default),
//! insert workers and random-`_id` query workers side by side, as in the
//! published test with 10 insert and 10 query threads.
//!
//! Workers are split by the ratio `insert_workers : query_workers`,
//! interleaved by worker number so any concurrency keeps the ratio as
//! closely as it can (10:10 alternates query, insert, query, …). Inserts
//! take sequence-number `_id`s from a shared counter; queries pick an
//! `_id` uniformly among those inserted (within the `max_docs` window
//! when bounded, where each insert also deletes the document `max_docs`
//! behind it).

use std::sync::Arc;

use mongodb::bson::{doc, Document};
use rand::rngs::SmallRng;
use rand::Rng;

use super::gen::{document_rng, worker_rng, PadPool};
use super::{
    bounded_insert, bson_len, evict_one, Action, Op, OpSource, OpSpec, PrepareStep, Workload,
};
use crate::cluster::Keys;
use crate::config::LargeDocConfig;

const COLL: usize = 0;
const INSERT: usize = 0;
const QUERY: usize = 1;

#[derive(Debug)]
struct Shared {
    pad: PadPool,
    pad_len: usize,
    max_docs: u64,
    next_id: Arc<Keys>,
    seed: u64,
}

impl Shared {
    fn document(&self, rng: &mut SmallRng, id: u64) -> Document {
        doc! { "_id": id as i64, "pad": self.pad.pad(rng, self.pad_len) }
    }
}

/// The `large-doc` workload.
#[derive(Debug)]
pub struct LargeDoc {
    shared: Arc<Shared>,
    collections: Vec<String>,
    ops: Vec<OpSpec>,
    inserters: u32,
    queriers: u32,
    initial_docs: u64,
    load_batch: usize,
}

/// Whether worker `id` inserts, for a ratio `i : q`: worker `id` inserts
/// when `floor((id+1)·i/(i+q))` steps up from `floor(id·i/(i+q))`, which
/// spreads the inserters evenly over the worker numbers.
pub fn is_inserter(id: u32, inserters: u32, queriers: u32) -> bool {
    let total = u64::from(inserters) + u64::from(queriers);
    if total == 0 {
        return true;
    }
    let (id, i) = (u64::from(id) % total, u64::from(inserters));
    (id + 1) * i / total > id * i / total
}

impl LargeDoc {
    /// Builds the workload from validated parameters.
    pub fn new(cfg: &LargeDocConfig, seed: u64) -> Result<LargeDoc, String> {
        let over = bson_len(&doc! { "_id": 0i64, "pad": "" });
        let size = cfg.doc_size.bytes() as usize;
        if size < over {
            return Err(format!("doc_size {size} is below the {over}-byte minimum"));
        }
        if cfg.insert_workers + cfg.query_workers == 0 {
            return Err("insert_workers and query_workers are both 0".into());
        }
        let ops = vec![
            OpSpec::insert("insert", cfg.max_docs > 0),
            OpSpec::single("query"),
        ];
        Ok(LargeDoc {
            shared: Arc::new(Shared {
                pad: PadPool::new(seed, PadPool::DEFAULT_SIZE),
                pad_len: size - over,
                max_docs: cfg.max_docs,
                next_id: Arc::new(Keys::new(cfg.initial_docs)),
                seed,
            }),
            collections: vec![cfg.collection.clone()],
            ops,
            inserters: cfg.insert_workers,
            queriers: cfg.query_workers,
            initial_docs: cfg.initial_docs,
            load_batch: cfg.load_batch.max(1),
        })
    }
}

impl Workload for LargeDoc {
    fn kind(&self) -> &'static str {
        "large-doc"
    }

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn collections(&self) -> &[String] {
        &self.collections
    }

    fn prepare(&self) -> Vec<PrepareStep> {
        let shared = Arc::clone(&self.shared);
        vec![
            PrepareStep::Load {
                collection: COLL,
                count: self.initial_docs,
                batch: self.load_batch,
                make: Arc::new(move |i| {
                    let mut rng = document_rng(shared.seed, i);
                    shared.document(&mut rng, i)
                }),
            },
            PrepareStep::SeekKeys {
                collection: COLL,
                counter: Arc::clone(&self.shared.next_id),
            },
        ]
    }

    fn keys(&self) -> Vec<&Keys> {
        vec![&self.shared.next_id]
    }

    fn worker(&self, worker_id: u32, seed: u64) -> Box<dyn OpSource> {
        Box::new(Source {
            shared: Arc::clone(&self.shared),
            inserter: is_inserter(worker_id, self.inserters, self.queriers),
            rng: worker_rng(seed, worker_id),
        })
    }
}

struct Source {
    shared: Arc<Shared>,
    inserter: bool,
    rng: SmallRng,
}

impl OpSource for Source {
    fn next_op(&mut self) -> Op {
        let s = &self.shared;
        if self.inserter {
            let id = s.next_id.next();
            let insert = Action::InsertOne {
                collection: COLL,
                doc: s.document(&mut self.rng, id),
            };
            let evict = evict_one(&s.next_id, COLL, id, s.max_docs);
            return bounded_insert(INSERT, insert, evict);
        }
        let top = s.next_id.bound().max(1);
        let low = if s.max_docs > 0 {
            top.saturating_sub(s.max_docs)
        } else {
            0
        };
        Op::one(
            QUERY,
            Action::FindOne {
                collection: COLL,
                filter: doc! { "_id": self.rng.random_range(low..top) as i64 },
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ByteSize;

    #[test]
    fn workers_split_by_the_ratio() {
        let ins: Vec<bool> = (0..20).map(|i| is_inserter(i, 10, 10)).collect();
        assert_eq!(ins.iter().filter(|b| **b).count(), 10);
        // Interleaved: any 2 consecutive workers hold one of each.
        assert!(ins.windows(2).all(|w| w[0] != w[1]), "{ins:?}");
        let ins: Vec<bool> = (0..8).map(|i| is_inserter(i, 1, 3)).collect();
        assert_eq!(ins.iter().filter(|b| **b).count(), 2, "{ins:?}");
        assert!((0..10).all(|i| is_inserter(i, 5, 0)));
        assert!((0..10).all(|i| !is_inserter(i, 0, 5)));
    }

    #[test]
    fn documents_have_the_size_and_queries_hit_existing_ids() {
        let cfg = LargeDocConfig {
            initial_docs: 50,
            ..LargeDocConfig::default()
        };
        let w = LargeDoc::new(&cfg, 3).unwrap();
        let mut inserter = w.worker(1, 1);
        let mut querier = w.worker(0, 1);
        for _ in 0..5 {
            let Action::InsertOne { doc, .. } = inserter.next_op().into_action().unwrap() else {
                panic!()
            };
            assert_eq!(bson_len(&doc), 10 * 1024);
        }
        for _ in 0..500 {
            let Action::FindOne { filter, .. } = querier.next_op().into_action().unwrap() else {
                panic!()
            };
            assert!((0..55).contains(&filter.get_i64("_id").unwrap()));
        }
        let PrepareStep::Load { make, .. } = &w.prepare()[0] else {
            panic!()
        };
        assert_eq!(bson_len(&make(3)), 10 * 1024);
        let tiny = LargeDocConfig {
            doc_size: ByteSize(8),
            ..cfg
        };
        assert!(LargeDoc::new(&tiny, 1).is_err());
    }

    #[test]
    fn bounded_queries_stay_in_the_window() {
        let cfg = LargeDocConfig {
            initial_docs: 100,
            max_docs: 100,
            doc_size: ByteSize(256),
            ..LargeDocConfig::default()
        };
        let w = LargeDoc::new(&cfg, 3).unwrap();
        let mut inserter = w.worker(1, 1);
        for _ in 0..300 {
            let op = inserter.next_op();
            // The label stays insert; the eviction is its second step.
            assert_eq!(op.op, INSERT);
            assert_eq!(op.requests()[1].step, 1);
        }
        let mut querier = w.worker(0, 1);
        for _ in 0..300 {
            let Action::FindOne { filter, .. } = querier.next_op().into_action().unwrap() else {
                panic!()
            };
            assert!((300..400).contains(&filter.get_i64("_id").unwrap()));
        }
    }
}
