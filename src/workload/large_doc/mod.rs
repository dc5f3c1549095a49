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

pub(crate) mod params;

pub use params::LargeDocConfig;

use std::sync::Arc;

use mongodb::bson::{doc, Document};
use rand::rngs::SmallRng;
use rand::Rng;

use super::generators::PadPool;
use super::{bson_len, Action, BoundedInserts, Built, Generator, LastInsert, Op, OpSource, OpSpec};

const COLL: usize = 0;
const INSERT: usize = 0;
const QUERY: usize = 1;

/// The `large-doc` workload's generator, shared by every worker.
#[derive(Debug)]
pub(crate) struct LargeDoc {
    pad: PadPool,
    pad_len: usize,
    inserts: BoundedInserts,
    inserters: u32,
    queriers: u32,
}

impl LargeDoc {
    fn document(&self, rng: &mut SmallRng, id: u64) -> Document {
        doc! { "_id": id as i64, "pad": self.pad.pad(rng, self.pad_len) }
    }
}

/// Whether worker `id` inserts, for a ratio `i : q`: worker `id` inserts
/// when `floor((id+1)·i/(i+q))` steps up from `floor(id·i/(i+q))`, which
/// spreads the inserters evenly over the worker numbers.
pub(crate) fn is_inserter(id: u32, inserters: u32, queriers: u32) -> bool {
    let total = u64::from(inserters) + u64::from(queriers);
    if total == 0 {
        return true;
    }
    let (id, i) = (u64::from(id) % total, u64::from(inserters));
    (id + 1) * i / total > id * i / total
}

/// Builds the workload from validated parameters.
pub(crate) fn build(cfg: &LargeDocConfig, seed: u64) -> Built<LargeDoc> {
    let overhead = bson_len(&doc! { "_id": 0i64, "pad": "" });
    let inserts = BoundedInserts::new(COLL, cfg.initial_docs, cfg.max_docs);
    let ops = vec![inserts.spec("insert"), OpSpec::single("query")];
    let w = Arc::new(LargeDoc {
        pad: PadPool::new(seed, PadPool::DEFAULT_SIZE),
        pad_len: (cfg.doc_size.bytes() as usize).saturating_sub(overhead),
        inserts,
        inserters: cfg.insert_workers,
        queriers: cfg.query_workers,
    });
    let prepare = w
        .inserts
        .prepare((cfg.load_batch, seed), &w, LargeDoc::document);
    let keys = vec![Arc::clone(w.inserts.counter())];
    Built::new(
        "large-doc",
        ops,
        vec![cfg.collection.clone()],
        prepare.into(),
        w,
    )
    .with_keys(keys)
}

impl Generator for LargeDoc {
    fn source(self: Arc<Self>, worker: u32, rng: SmallRng) -> Box<dyn OpSource> {
        Box::new(Source {
            inserter: is_inserter(worker, self.inserters, self.queriers),
            large_doc: self,
            rng,
            last: LastInsert::default(),
        })
    }
}

struct Source {
    large_doc: Arc<LargeDoc>,
    inserter: bool,
    rng: SmallRng,
    /// This worker's previous insert ([`LastInsert`]).
    last: LastInsert,
}

impl OpSource for Source {
    fn next_op(&mut self) -> Op {
        let (w, rng) = (&*self.large_doc, &mut self.rng);
        if self.inserter {
            return w
                .inserts
                .insert_one(INSERT, &mut self.last, |id| w.document(rng, id));
        }
        Op::one(
            QUERY,
            Action::FindOne {
                collection: COLL,
                filter: doc! { "_id": rng.random_range(w.inserts.present()) as i64 },
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_values::ByteSize;
    use crate::workload::{kind_trait::Kind, PrepareStep, Workload};

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
        let w = build(&cfg, 3);
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
        assert!(tiny.validate().is_err());
    }

    #[test]
    fn bounded_queries_stay_in_the_window() {
        let cfg = LargeDocConfig {
            initial_docs: 100,
            max_docs: 100,
            doc_size: ByteSize(256),
            ..LargeDocConfig::default()
        };
        let w = build(&cfg, 3);
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
