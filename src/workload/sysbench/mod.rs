//! Kind `sysbench`: sysbench's OLTP transaction for MongoDB. N collections
//! `sbtest1..N` of M documents `{ _id, k, c (120 chars), pad (60 chars) }`
//! with an index on `k`. One transaction is one operation `transaction`
//! on one collection picked at random, of these requests (steps) by
//! default: 10 point lookups of `c` by `_id`, one range of 100 by `_id`,
//! one `$sum` of `k` over a range by aggregate, one range sorted by `c`,
//! one distinct `c` over a range, an update of `k` (indexed), an update of
//! `c` (unindexed), and the delete of one `_id` followed by its
//! reinsertion. `read_only = true` keeps only the reads; `transactions =
//! true` runs the requests in a MongoDB multi-document transaction.
//!
//! `_id`s are `0..M`, `k` is uniform in `[0, M)`, as sysbench's
//! `k = sb_rand(1, table_size)`; ids and range starts are uniform. The
//! `_id` a transaction deletes and reinserts is claimed for it (no other
//! transaction in flight deletes the same one), so two workers never race
//! to reinsert one `_id` and mongoload causes no `duplicate_key` itself.

pub(crate) mod params;

pub use params::SysbenchConfig;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};

use mongodb::bson::{doc, Document};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::generators::splitmix64;
use super::{Action, Body, Built, Generator, Op, OpSource, OpSpec, PrepareStep, Request};
use crate::cluster::Keys;

/// Characters of `c` and of `pad`.
pub const C_LEN: usize = 120;
/// See [`C_LEN`].
pub const PAD_LEN: usize = 60;

/// sysbench's value shape: groups of 11 random digits, each followed by
/// `-`, cut to `len` characters.
pub fn digits(rng: &mut impl Rng, len: usize) -> String {
    let mut s = String::with_capacity(len);
    for i in 0..len {
        if i % 12 == 11 {
            s.push('-');
        } else {
            s.push(char::from(b'0' + rng.random_range(0..10u8)));
        }
    }
    s
}

/// The `sysbench` workload's generator, shared by every worker.
#[derive(Debug)]
pub struct Sysbench {
    cfg: SysbenchConfig,
    seed: u64,
    /// The step index of each transaction step label.
    ops: StepOps,
    /// The (collection, `_id`) each worker's transaction in flight deletes
    /// and reinserts: a worker runs one transaction at a time, so its
    /// claim is released when it asks for the next.
    claimed: Mutex<HashSet<(usize, i64)>>,
    /// Whose `_id`s this member deletes and reinserts: a cluster member
    /// only its own (reads and updates go over every `_id`).
    keys: Arc<Keys>,
}

/// Step indexes of the steps (those of a read-only transaction are `None`).
#[derive(Debug, Clone, Copy)]
struct StepOps {
    point_select: usize,
    simple_range: usize,
    sum_range: usize,
    order_range: usize,
    distinct_range: usize,
    update_index: Option<usize>,
    update_non_index: Option<usize>,
    delete: Option<usize>,
    insert: Option<usize>,
    /// With `transactions`: the commit (the last step).
    commit: usize,
}

impl Sysbench {
    /// Document `id` of a collection as the prepare step loads it: the
    /// same for every collection but keyed on (seed, collection, id).
    fn document(&self, rng: &mut SmallRng, id: u64) -> Document {
        doc! {
            "_id": id as i64,
            "k": rng.random_range(0..self.cfg.docs_per_collection) as i64,
            "c": digits(rng, C_LEN),
            "pad": digits(rng, PAD_LEN),
        }
    }
}

/// The op label of the whole transaction; the only op.
pub const TRANSACTION: &str = "transaction";
/// The step label of the commit, with `transactions = true`.
pub const COMMIT: &str = "commit";

/// Builds the workload from validated parameters.
pub fn build(cfg: &SysbenchConfig, seed: u64) -> Built<Sysbench> {
    let mut steps: Vec<&str> = cfg.steps().iter().map(|(name, _)| *name).collect();
    if cfg.transactions {
        steps.push(COMMIT);
    }
    let at = |name: &str| steps.iter().position(|n| *n == name);
    let ops = StepOps {
        point_select: 0,
        simple_range: 1,
        sum_range: 2,
        order_range: 3,
        distinct_range: 4,
        update_index: at("update_index"),
        update_non_index: at("update_non_index"),
        delete: at("delete"),
        insert: at("insert"),
        commit: steps.len().saturating_sub(1),
    };
    let collections: Vec<String> = (1..=cfg.collections)
        .map(|i| format!("{}{i}", cfg.collection_prefix))
        .collect();
    let sysbench = Arc::new(Sysbench {
        cfg: cfg.clone(),
        seed,
        ops,
        claimed: Mutex::new(HashSet::new()),
        keys: Arc::new(Keys::new(cfg.docs_per_collection)),
    });
    let mut prepare = Vec::new();
    for c in 0..collections.len() {
        prepare.push(PrepareStep::index(c, doc! { "k": 1 }, Some("k_1")));
        let loaded = Arc::clone(&sysbench);
        prepare.push(PrepareStep::Load {
            collection: c,
            count: cfg.docs_per_collection,
            batch: cfg.load_batch.max(1),
            make: Arc::new(move |i| loaded.loaded_document(c, i)),
        });
    }
    let ops = vec![OpSpec::with_steps(TRANSACTION, &steps)];
    let keys = vec![Arc::clone(&sysbench.keys)];
    Built::new("sysbench", ops, collections, prepare, sysbench).with_keys(keys)
}

impl Sysbench {
    /// Document `id` of collection `collection` as loaded by the prepare
    /// step (for checks of what the data implies).
    pub fn loaded_document(&self, collection: usize, id: u64) -> Document {
        let mut rng = load_rng(self.seed, collection, id);
        self.document(&mut rng, id)
    }
}

fn load_rng(seed: u64, collection: usize, id: u64) -> SmallRng {
    SmallRng::seed_from_u64(splitmix64(
        seed ^ splitmix64(collection as u64) ^ id.rotate_left(24),
    ))
}

impl Generator for Sysbench {
    fn source(self: Arc<Self>, _worker: u32, rng: SmallRng) -> Box<dyn OpSource> {
        Box::new(Source {
            collections: self.cfg.collections as usize,
            sysbench: self,
            rng,
            claims: Vec::new(),
        })
    }
}

struct Source {
    sysbench: Arc<Sysbench>,
    collections: usize,
    rng: SmallRng,
    /// The `_id`s this worker's last transaction deletes and reinserts.
    claims: Vec<(usize, i64)>,
}

impl Drop for Source {
    fn drop(&mut self) {
        self.release();
    }
}

impl Source {
    fn id(&mut self) -> i64 {
        self.rng
            .random_range(0..self.sysbench.cfg.docs_per_collection) as i64
    }

    /// `{_id: {$gte: a, $lt: a + range_size}}` from a random start.
    fn range(&mut self) -> Document {
        let a = self.id();
        doc! { "_id": { "$gte": a, "$lt": a + self.sysbench.cfg.range_size as i64 } }
    }

    /// Lets go of the last transaction's delete/reinsert `_id`s: it has
    /// finished (the engine asks for the next operation only then).
    fn release(&mut self) {
        if self.claims.is_empty() {
            return;
        }
        let mut claimed = self
            .sysbench
            .claimed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for c in self.claims.drain(..) {
            claimed.remove(&c);
        }
    }

    /// A random `_id` of collection `coll` that no transaction in flight
    /// deletes and reinserts, claimed for this one. After a few draws that
    /// all collide (more workers than documents) it takes the last one.
    fn claim(&mut self, coll: usize) -> i64 {
        let mut claimed = self
            .sysbench
            .claimed
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let keys = &self.sysbench.keys;
        let owned = keys.owned_below(self.sysbench.cfg.docs_per_collection);
        let mut id = 0;
        for _ in 0..64 {
            id = match owned {
                0 => self
                    .rng
                    .random_range(0..self.sysbench.cfg.docs_per_collection),
                n => keys.owned(self.rng.random_range(0..n)),
            } as i64;
            if claimed.insert((coll, id)) {
                self.claims.push((coll, id));
                return id;
            }
        }
        id
    }

    /// Appends `n` requests of step `step`, each action made by `make`.
    fn repeat(
        &mut self,
        steps: &mut Vec<Request>,
        (n, step): (u32, usize),
        mut make: impl FnMut(&mut Self) -> Action,
    ) {
        for _ in 0..n {
            let action = make(self);
            steps.push(Request::new(step, action));
        }
    }

    fn transaction(&mut self) -> Vec<Request> {
        self.release();
        let sysbench = Arc::clone(&self.sysbench);
        let (cfg, o) = (&sysbench.cfg, sysbench.ops);
        let coll = self.rng.random_range(0..self.collections);
        let mut steps = Vec::with_capacity(20);
        let c_only = doc! { "c": 1, "_id": 0 };
        let find = |filter, sort, limit| Action::Find {
            collection: coll,
            filter,
            sort,
            limit,
            projection: Some(c_only.clone()),
        };
        let by_id = |s: &mut Self| doc! { "_id": s.id() };
        self.repeat(&mut steps, (cfg.point_selects, o.point_select), |s| {
            find(by_id(s), None, 1)
        });
        self.repeat(&mut steps, (cfg.simple_ranges, o.simple_range), |s| {
            find(s.range(), None, 0)
        });
        self.repeat(&mut steps, (cfg.sum_ranges, o.sum_range), |s| {
            Action::Aggregate {
                collection: coll,
                pipeline: sum_pipeline(s.range()),
            }
        });
        self.repeat(&mut steps, (cfg.order_ranges, o.order_range), |s| {
            find(s.range(), Some(doc! { "c": 1 }), 0)
        });
        self.repeat(&mut steps, (cfg.distinct_ranges, o.distinct_range), |s| {
            Action::Distinct {
                collection: coll,
                field: "c".into(),
                filter: s.range(),
            }
        });
        if let Some(step) = o.update_index {
            self.repeat(&mut steps, (cfg.index_updates, step), |s| {
                Action::UpdateOne {
                    collection: coll,
                    filter: by_id(s),
                    update: doc! { "$inc": { "k": 1 } },
                }
            });
        }
        if let Some(step) = o.update_non_index {
            self.repeat(&mut steps, (cfg.non_index_updates, step), |s| {
                Action::UpdateOne {
                    collection: coll,
                    filter: by_id(s),
                    update: doc! { "$set": { "c": digits(&mut s.rng, C_LEN) } },
                }
            });
        }
        if let (Some(delete), Some(insert)) = (o.delete, o.insert) {
            for _ in 0..cfg.delete_inserts {
                let id = self.claim(coll);
                steps.push(Request::new(
                    delete,
                    Action::DeleteOne {
                        collection: coll,
                        filter: doc! { "_id": id },
                    },
                ));
                let doc = self.sysbench.document(&mut self.rng, id as u64);
                steps.push(Request::new(
                    insert,
                    Action::InsertOne {
                        collection: coll,
                        doc,
                    },
                ));
            }
        }
        steps
    }
}

/// The sum step's pipeline: `$sum` of `k` over the documents `filter`
/// selects, one result document `{_id: null, total}`.
pub fn sum_pipeline(filter: Document) -> Vec<Document> {
    vec![
        doc! { "$match": filter },
        doc! { "$group": { "_id": null, "total": { "$sum": "$k" } } },
    ]
}

impl OpSource for Source {
    fn next_op(&mut self) -> Op {
        let requests = self.transaction();
        Op {
            op: 0,
            body: if self.sysbench.cfg.transactions {
                Body::Transaction {
                    requests,
                    commit_step: self.sysbench.ops.commit,
                }
            } else {
                Body::Steps(requests)
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    #[test]
    fn a_transaction_has_sysbench_s_steps_in_order_on_one_collection() {
        let w = build(&SysbenchConfig::default(), 1);
        assert_eq!(w.collections().len(), 16);
        assert_eq!(w.collections()[0], "sbtest1");
        assert_eq!(w.collections()[15], "sbtest16");
        let mut src = w.worker(0, 5);
        let mut colls = std::collections::HashSet::new();
        assert_eq!(w.op_names(), ["transaction"]);
        for _ in 0..200 {
            let op = src.next_op();
            assert_eq!(op.op, 0);
            assert!(matches!(op.body, Body::Steps(_)));
            let steps = op.requests();
            let labels: Vec<&str> = steps.iter().map(|s| &*w.ops()[0].steps[s.step]).collect();
            let mut expect = vec!["point_select"; 10];
            expect.extend([
                "simple_range",
                "sum_range",
                "order_range",
                "distinct_range",
                "update_index",
                "update_non_index",
                "delete",
                "insert",
            ]);
            assert_eq!(labels, expect);
            let c = steps[0].action.collection();
            assert!(steps.iter().all(|s| s.action.collection() == c));
            colls.insert(c);
            // Delete and reinsert the same _id.
            let (Action::DeleteOne { filter, .. }, Action::InsertOne { doc, .. }) =
                (&steps[16].action, &steps[17].action)
            else {
                panic!()
            };
            assert_eq!(filter.get("_id"), doc.get("_id"));
            assert_eq!(doc.get_str("c").unwrap().len(), C_LEN);
            assert_eq!(doc.get_str("pad").unwrap().len(), PAD_LEN);
        }
        assert_eq!(
            colls.len(),
            16,
            "each transaction picks a random collection"
        );
    }

    #[test]
    fn read_only_keeps_the_reads() {
        let cfg = SysbenchConfig {
            read_only: true,
            ..SysbenchConfig::default()
        };
        let w = build(&cfg, 1);
        let labels: Vec<&str> = w.ops()[0].steps.iter().map(|s| &**s).collect();
        assert_eq!(
            labels,
            [
                "point_select",
                "simple_range",
                "sum_range",
                "order_range",
                "distinct_range"
            ]
        );
        let op = w.worker(0, 1).next_op();
        let steps = op.requests();
        assert_eq!(steps.len(), 14);
        assert!(steps.iter().all(|s| matches!(
            s.action,
            Action::Find { .. } | Action::Aggregate { .. } | Action::Distinct { .. }
        )));
    }

    #[test]
    fn transactions_in_flight_never_share_a_delete_and_reinsert_id() {
        let cfg = SysbenchConfig {
            collections: 1,
            docs_per_collection: 20,
            ..SysbenchConfig::default()
        };
        let w = build(&cfg, 1);
        let deleted = |op: &Op| match &op.requests()[16].action {
            Action::DeleteOne { filter, .. } => filter.get_i64("_id").unwrap(),
            other => panic!("{other:?}"),
        };
        // 15 workers with a transaction in flight each, over 20 ids.
        let mut workers: Vec<_> = (0..15).map(|i| w.worker(i, 3)).collect();
        for _ in 0..50 {
            let ids: HashSet<i64> = workers.iter_mut().map(|s| deleted(&s.next_op())).collect();
            assert_eq!(ids.len(), 15, "{ids:?}");
        }
        // A finished worker's claim is released.
        drop(workers);
        assert!(w.claimed.lock().unwrap().is_empty());
        let multi = build(
            &SysbenchConfig {
                transactions: true,
                ..cfg
            },
            1,
        );
        assert!(matches!(
            multi.worker(0, 1).next_op().body,
            Body::Transaction { commit_step: 9, .. }
        ));
        assert_eq!(&*multi.ops()[0].steps[9], "commit");
    }

    #[test]
    fn loaded_documents_are_deterministic_and_shaped() {
        let w = build(&SysbenchConfig::default(), 7);
        let steps = w.prepare();
        assert_eq!(steps.len(), 32);
        let PrepareStep::Load { make, count, .. } = &steps[1] else {
            panic!()
        };
        assert_eq!(*count, 10_000);
        let d = make(42);
        assert_eq!(d, w.loaded_document(0, 42));
        assert_ne!(d, w.loaded_document(1, 42));
        assert_eq!(d.get_i64("_id"), Ok(42));
        let c = d.get_str("c").unwrap();
        assert_eq!(c.len(), 120);
        assert_eq!(c.matches('-').count(), 10);
        assert!((0..10_000).contains(&d.get_i64("k").unwrap()));
    }
}
