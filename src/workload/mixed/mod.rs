//! Kind `mixed`: a weighted mix of insert / update / delete / find by `_id`
//! (and optionally find / update by the secondary key `k`) on documents of
//! a fixed BSON size, from a published MongoDB replication test (defaults
//! 6.5 / 3 / 3 / 87.5 and 76 KB).
//!
//! Documents are `{ _id: i64, k: i64, pad: string }` with an index on `k`.
//! The prepare step loads `_id` 0..initial_docs; inserts take new `_id`s
//! from a counter shared by all workers and, past the bound (`max_docs`,
//! by default ten times `initial_docs`), delete the oldest; updates,
//! deletes and finds pick an `_id` uniformly among the live keys (a
//! deleted key simply matches nothing).
//! `k` is uniform in `[0, max(initial_docs, 1))`, so lookups by `k` mostly
//! hit.

pub(crate) mod params;

pub use params::MixedConfig;

use std::sync::Arc;

use mongodb::bson::{doc, Document};
use rand::rngs::SmallRng;
use rand::Rng;

use super::generators::PadPool;
use super::{
    bson_len, Action, BoundedInserts, Built, Generator, LastInsert, Mix, Op, OpSource, OpSpec,
    PrepareStep,
};

/// The collection index of the single collection.
const COLL: usize = 0;

/// What an operation of the mix does, in the order of
/// [`MixedConfig::weights`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum What {
    Insert,
    Update,
    Delete,
    Find,
    FindByK,
    UpdateByK,
}

const WHATS: [What; 6] = [
    What::Insert,
    What::Update,
    What::Delete,
    What::Find,
    What::FindByK,
    What::UpdateByK,
];

/// The `mixed` workload's generator, shared by every worker.
#[derive(Debug)]
pub(crate) struct Mixed {
    pad: PadPool,
    /// Characters of padding that bring a document to `doc_size` bytes.
    pad_len: usize,
    k_range: u64,
    inserts: BoundedInserts,
    /// The operations of positive weight; their index is the `op`.
    mix: Mix<What>,
}

impl Mixed {
    fn document(&self, rng: &mut SmallRng, id: u64) -> Document {
        doc! {
            "_id": id as i64,
            "k": rng.random_range(0..self.k_range) as i64,
            "pad": self.pad.pad(rng, self.pad_len),
        }
    }

    /// The shared `_id` counter: the next key an insert takes.
    #[cfg(test)]
    pub(crate) fn next_id(&self) -> &Arc<crate::cluster::Keys> {
        self.inserts.counter()
    }
}

/// Builds the workload from validated parameters ([`Kind::build`]
/// validates them); `seed` fixes the padding and the loaded documents.
///
/// [`Kind::build`]: crate::workload::kind_trait::Kind::build
pub(crate) fn build(cfg: &MixedConfig, seed: u64) -> Built<Mixed> {
    let mix = Mix::positive(
        cfg.weights()
            .into_iter()
            .zip(WHATS)
            .map(|((_, w), what)| (what, w)),
    )
    .expect("validated: a weight is positive");
    // With a bound, an insert past it evicts the oldest document as its
    // second step (`evict`), under the insert's own label.
    let inserts = BoundedInserts::new(COLL, cfg.initial_docs, cfg.bound());
    let ops = cfg
        .weights()
        .iter()
        .filter(|(_, w)| *w > 0.0)
        .map(|(name, _)| match *name {
            "insert" => inserts.spec(name),
            _ => OpSpec::single(name),
        })
        .collect();
    let overhead = bson_len(&doc! { "_id": 0i64, "k": 0i64, "pad": "" });
    let mixed = Arc::new(Mixed {
        pad: PadPool::new(seed, PadPool::DEFAULT_SIZE),
        pad_len: (cfg.doc_size.bytes() as usize).saturating_sub(overhead),
        k_range: cfg.initial_docs.max(1),
        inserts,
        mix,
    });
    let mut prepare = vec![PrepareStep::index(COLL, doc! { "k": 1 }, Some("k_1"))];
    prepare.extend(
        mixed
            .inserts
            .prepare((cfg.load_batch, seed), &mixed, Mixed::document),
    );
    let keys = vec![Arc::clone(mixed.inserts.counter())];
    Built::new("mixed", ops, vec![cfg.collection.clone()], prepare, mixed).with_keys(keys)
}

impl Generator for Mixed {
    fn source(self: Arc<Self>, _worker: u32, rng: SmallRng) -> Box<dyn OpSource> {
        Box::new(Source {
            mixed: self,
            rng,
            last: LastInsert::default(),
        })
    }
}

/// One worker's generator.
struct Source {
    mixed: Arc<Mixed>,
    rng: SmallRng,
    /// This worker's previous insert ([`LastInsert`]).
    last: LastInsert,
}

impl Source {
    fn existing_id(&mut self) -> i64 {
        self.rng.random_range(self.mixed.inserts.present()) as i64
    }

    fn random_k(&mut self) -> i64 {
        self.rng.random_range(0..self.mixed.k_range) as i64
    }
}

impl OpSource for Source {
    fn next_op(&mut self) -> Op {
        let m = Arc::clone(&self.mixed);
        let (op, what) = m.mix.draw(&mut self.rng);
        let action = match what {
            What::Insert => {
                let rng = &mut self.rng;
                return m
                    .inserts
                    .insert_one(op, &mut self.last, |id| m.document(rng, id));
            }
            What::Update => {
                let id = self.existing_id();
                let k = self.random_k();
                Action::UpdateOne {
                    collection: COLL,
                    filter: doc! { "_id": id },
                    update: doc! { "$set": { "k": k } },
                }
            }
            What::Delete => Action::DeleteOne {
                collection: COLL,
                filter: doc! { "_id": self.existing_id() },
            },
            What::Find => Action::FindOne {
                collection: COLL,
                filter: doc! { "_id": self.existing_id() },
            },
            What::FindByK => Action::FindOne {
                collection: COLL,
                filter: doc! { "k": self.random_k() },
            },
            What::UpdateByK => {
                let (k, new_k) = (self.random_k(), self.random_k());
                Action::UpdateOne {
                    collection: COLL,
                    filter: doc! { "k": k },
                    update: doc! { "$set": { "k": new_k } },
                }
            }
        };
        Op::one(op, action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_values::ByteSize;
    use crate::workload::{kind_trait::Kind, Workload};

    fn params() -> MixedConfig {
        MixedConfig {
            doc_size: ByteSize(1024),
            initial_docs: 1000,
            ..MixedConfig::default()
        }
    }

    #[test]
    fn by_default_inserts_past_ten_times_initial_docs_evict_the_oldest() {
        let c = MixedConfig {
            insert: 1.0,
            update: 0.0,
            delete: 0.0,
            find: 0.0,
            ..params()
        };
        assert_eq!(c.bound(), 10_000, "10 × initial_docs 1000");
        let c = MixedConfig {
            initial_docs: 100,
            max_docs: Some(150),
            ..c
        };
        let w = build(&c, 1);
        assert_eq!(w.op_names(), ["insert"]);
        assert_eq!(w.ops()[0].steps.len(), 2, "insert, evict");
        let mut src = w.worker(0, 1);
        for id in 100..400i64 {
            let op = src.next_op();
            assert_eq!(op.op, 0, "the label stays insert");
            if id < 150 {
                assert!(matches!(op.action(), Some(Action::InsertOne { .. })));
                continue;
            }
            match &op.requests()[1].action {
                Action::DeleteOne { filter, .. } => {
                    assert_eq!(filter.get_i64("_id"), Ok(id - 150))
                }
                other => panic!("{other:?}"),
            }
        }
        // Finds, updates and deletes pick among the live documents.
        let live = MixedConfig {
            insert: 0.0,
            find: 1.0,
            ..c
        };
        let w = build(&live, 1);
        w.keys()[0].raise_past(999);
        let mut src = w.worker(0, 2);
        for _ in 0..1000 {
            let op = src.next_op();
            let Some(Action::FindOne { filter, .. }) = op.action() else {
                panic!("{:?}", op.body)
            };
            let id = filter.get_i64("_id").unwrap();
            assert!((850..1000).contains(&id), "{id} is not live");
        }
    }

    #[test]
    fn op_mix_matches_the_weights() {
        // Unbounded, so every insert is one request.
        let w = build(
            &MixedConfig {
                max_docs: Some(0),
                ..params()
            },
            1,
        );
        assert_eq!(w.op_names(), ["insert", "update", "delete", "find"]);
        let mut src = w.worker(0, 42);
        let draws = 200_000;
        let mut counts = [0u32; 4];
        for _ in 0..draws {
            let op = src.next_op();
            counts[op.op] += 1;
            // The action matches its label.
            let ok = matches!(
                (op.op, op.action()),
                (0, Some(Action::InsertOne { .. }))
                    | (1, Some(Action::UpdateOne { .. }))
                    | (2, Some(Action::DeleteOne { .. }))
                    | (3, Some(Action::FindOne { .. }))
            );
            assert!(ok, "op {} with {:?}", op.op, op.body);
        }
        for (c, expect) in counts.iter().zip([6.5, 3.0, 3.0, 87.5]) {
            let share = *c as f64 / draws as f64 * 100.0;
            // Within 0.3 percentage points (several standard deviations).
            assert!(
                (share - expect).abs() < 0.3,
                "{counts:?}: {share} vs {expect}"
            );
        }
    }

    #[test]
    fn zero_weights_drop_their_op_and_secondary_ops_work() {
        let cfg = MixedConfig {
            insert: 0.0,
            update: 0.0,
            delete: 0.0,
            find: 1.0,
            find_by_k: 1.0,
            update_by_k: 0.0,
            ..params()
        };
        let w = build(&cfg, 1);
        assert_eq!(w.op_names(), ["find", "find_by_k"]);
        let mut src = w.worker(3, 1);
        let mut by_k = 0;
        for _ in 0..1000 {
            let o = src.next_op();
            match (o.op, o.action()) {
                (1, Some(Action::FindOne { filter, .. })) => {
                    let k = filter.get_i64("k").unwrap();
                    assert!((0..1000).contains(&k));
                    by_k += 1;
                }
                (0, Some(Action::FindOne { filter, .. })) => assert!(filter.get_i64("_id").is_ok()),
                _ => panic!("unexpected {o:?}"),
            }
        }
        assert!((400..600).contains(&by_k), "{by_k}");
        let all_zero = MixedConfig {
            find: 0.0,
            find_by_k: 0.0,
            ..cfg
        };
        assert!(all_zero.validate().is_err());
    }

    #[test]
    fn documents_have_the_configured_size() {
        for size in [64u64, 1024, 76 * 1024, 1 << 20] {
            let cfg = MixedConfig {
                doc_size: ByteSize(size),
                ..params()
            };
            let w = build(&cfg, 5);
            let mut src = w.worker(0, 1);
            let mut seen = 0;
            while seen < 3 {
                if let Action::InsertOne { doc, .. } = src.next_op().into_action().unwrap() {
                    assert_eq!(bson_len(&doc) as u64, size, "doc_size {size}");
                    seen += 1;
                }
            }
            let PrepareStep::Load { make, .. } = &w.prepare()[1] else {
                panic!("second step loads")
            };
            assert_eq!(bson_len(&make(7)) as u64, size);
        }
    }

    #[test]
    fn inserts_take_fresh_keys_and_others_pick_existing_ones() {
        let w = build(&params(), 1);
        let mut a = w.worker(0, 9);
        let mut b = w.worker(1, 9);
        let mut inserted = std::collections::HashSet::new();
        for i in 0..20_000 {
            let op = if i % 2 == 0 { a.next_op() } else { b.next_op() };
            match op.into_action().unwrap() {
                Action::InsertOne { doc, .. } => {
                    let id = doc.get_i64("_id").unwrap();
                    assert!(id >= 1000, "insert reused a loaded key {id}");
                    assert!(inserted.insert(id), "two inserts took {id}");
                }
                Action::UpdateOne { filter, .. }
                | Action::DeleteOne { filter, .. }
                | Action::FindOne { filter, .. } => {
                    let id = filter.get_i64("_id").unwrap();
                    let next = w.next_id().bound() as i64;
                    assert!((0..next).contains(&id));
                }
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(w.next_id().bound(), 1000 + inserted.len() as u64);
    }

    #[test]
    fn prepare_indexes_loads_and_seeks() {
        let w = build(&params(), 1);
        let steps = w.prepare();
        assert_eq!(steps.len(), 3);
        match &steps[0] {
            PrepareStep::CreateIndex { keys, unique, .. } => {
                assert_eq!(keys, &doc! { "k": 1 });
                assert!(!unique);
            }
            other => panic!("{other:?}"),
        }
        let PrepareStep::Load {
            count, batch, make, ..
        } = &steps[1]
        else {
            panic!("{:?}", steps[1])
        };
        assert_eq!((*count, *batch), (1000, 100));
        assert_eq!(make(42).get_i64("_id").unwrap(), 42);
        // Deterministic: a resumed load writes the same documents.
        assert_eq!(make(42), make(42));
        assert_ne!(make(42).get_str("pad"), make(43).get_str("pad"));
        let PrepareStep::SeekKeys { counter, .. } = &steps[2] else {
            panic!("{:?}", steps[2])
        };
        // Raising the counter moves inserts past existing data.
        counter.raise_past(4999);
        let mut src = w.worker(0, 1);
        loop {
            if let Action::InsertOne { doc, .. } = src.next_op().into_action().unwrap() {
                assert_eq!(doc.get_i64("_id").unwrap(), 5000);
                break;
            }
        }
    }

    #[test]
    fn same_seed_same_stream() {
        let w = build(&params(), 1);
        let w2 = build(&params(), 1);
        let mut a = w.worker(2, 77);
        let mut b = w2.worker(2, 77);
        for _ in 0..100 {
            assert_eq!(a.next_op(), b.next_op());
        }
    }
}
