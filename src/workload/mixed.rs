//! Kind `mixed`: a weighted mix of insert / update / delete / find by `_id`
//! (and optionally find / update by the secondary key `k`) on documents of
//! a fixed BSON size, from a published MongoDB replication test (defaults
//! 6.5 / 3 / 3 / 87.5 and 76 KB).
//!
//! Documents are `{ _id: i64, k: i64, pad: string }` with an index on `k`.
//! The prepare step loads `_id` 0..initial_docs; inserts take new `_id`s
//! from a counter shared by all workers; updates, deletes and finds pick an
//! `_id` uniformly in `[0, counter)` (a deleted key simply matches nothing).
//! `k` is uniform in `[0, max(initial_docs, 1))`, so lookups by `k` mostly
//! hit.

use std::sync::Arc;

use mongodb::bson::{doc, Document};
use rand::rngs::SmallRng;
use rand::Rng;

use super::gen::{document_rng, worker_rng, PadPool};
use super::{Action, Op, OpSource, OpSpec, PrepareStep, Workload};
use crate::cluster::Keys;
use crate::config::MixedConfig;

/// The collection index of the single collection.
const COLL: usize = 0;

/// The kinds of operation, in the order of [`MixedConfig::weights`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Insert,
    Update,
    Delete,
    Find,
    FindByK,
    UpdateByK,
}

const KINDS: [Kind; 6] = [
    Kind::Insert,
    Kind::Update,
    Kind::Delete,
    Kind::Find,
    Kind::FindByK,
    Kind::UpdateByK,
];

/// The shared, immutable parts of the workload; cloned (by `Arc`) into
/// every worker.
#[derive(Debug)]
struct Shared {
    pad: PadPool,
    /// Characters of padding that bring a document to `doc_size` bytes.
    pad_len: usize,
    k_range: u64,
    next_id: Arc<Keys>,
    seed: u64,
}

impl Shared {
    fn document(&self, rng: &mut SmallRng, id: u64) -> Document {
        doc! {
            "_id": id as i64,
            "k": rng.random_range(0..self.k_range) as i64,
            "pad": self.pad.pad(rng, self.pad_len),
        }
    }
}

/// The `mixed` workload.
#[derive(Debug)]
pub struct Mixed {
    shared: Arc<Shared>,
    collections: Vec<String>,
    ops: Vec<OpSpec>,
    /// Kinds with a positive weight, parallel to `ops`.
    kinds: Vec<Kind>,
    /// Cumulative thresholds over `u32` draws, parallel to `kinds`.
    thresholds: Vec<u64>,
    initial_docs: u64,
    load_batch: usize,
}

/// BSON size of a document with an empty pad: the fixed overhead.
fn overhead() -> usize {
    let d = doc! { "_id": 0i64, "k": 0i64, "pad": "" };
    let mut buf = Vec::new();
    // Writing into a Vec cannot fail for a document this simple.
    d.to_writer(&mut buf).map(|_| buf.len()).unwrap_or(39)
}

impl Mixed {
    /// Builds the workload from validated parameters; `seed` fixes the
    /// padding and the loaded documents.
    pub fn new(cfg: &MixedConfig, seed: u64) -> Result<Mixed, String> {
        let weights = cfg.weights();
        let sum: f64 = weights.iter().map(|(_, w)| w.max(0.0)).sum();
        if !(sum.is_finite() && sum > 0.0) {
            return Err("the operation weights sum to zero".into());
        }
        let size = cfg.doc_size.bytes() as usize;
        let over = overhead();
        if size < over {
            return Err(format!("doc_size {size} is below the {over}-byte minimum"));
        }
        let mut kinds = Vec::new();
        let mut ops = Vec::new();
        let mut thresholds = Vec::new();
        let mut acc = 0.0;
        for ((name, w), kind) in weights.iter().zip(KINDS) {
            if *w > 0.0 {
                acc += w;
                kinds.push(kind);
                ops.push(OpSpec::single(name));
                thresholds.push(((acc / sum) * (1u64 << 32) as f64) as u64);
            }
        }
        // Rounding must not leave a gap at the top.
        if let Some(last) = thresholds.last_mut() {
            *last = 1u64 << 32;
        }
        Ok(Mixed {
            shared: Arc::new(Shared {
                pad: PadPool::new(seed, PadPool::DEFAULT_SIZE),
                pad_len: size - over,
                k_range: cfg.initial_docs.max(1),
                next_id: Arc::new(Keys::new(cfg.initial_docs)),
                seed,
            }),
            collections: vec![cfg.collection.clone()],
            ops,
            kinds,
            thresholds,
            initial_docs: cfg.initial_docs,
            load_batch: cfg.load_batch.max(1),
        })
    }

    /// The shared `_id` counter: the next key an insert takes.
    pub fn next_id(&self) -> &Arc<Keys> {
        &self.shared.next_id
    }
}

impl Workload for Mixed {
    fn kind(&self) -> &'static str {
        "mixed"
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
            PrepareStep::CreateIndex {
                collection: COLL,
                keys: doc! { "k": 1 },
                unique: false,
                name: Some("k_1".into()),
            },
            PrepareStep::Load {
                collection: COLL,
                count: self.initial_docs,
                batch: self.load_batch,
                // Document i depends only on (seed, i): a resumed load
                // writes what an uninterrupted one would have.
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
        Box::new(MixedSource {
            shared: Arc::clone(&self.shared),
            kinds: self.kinds.clone(),
            thresholds: self.thresholds.clone(),
            rng: worker_rng(seed, worker_id),
        })
    }
}

/// One worker's generator.
struct MixedSource {
    shared: Arc<Shared>,
    kinds: Vec<Kind>,
    thresholds: Vec<u64>,
    rng: SmallRng,
}

impl MixedSource {
    fn existing_id(&mut self) -> i64 {
        let n = self.shared.next_id.bound().max(1);
        self.rng.random_range(0..n) as i64
    }

    fn random_k(&mut self) -> i64 {
        self.rng.random_range(0..self.shared.k_range) as i64
    }
}

impl OpSource for MixedSource {
    fn next_op(&mut self) -> Op {
        let draw = self.rng.random::<u32>() as u64;
        let op = self
            .thresholds
            .iter()
            .position(|&t| draw < t)
            .unwrap_or(self.thresholds.len() - 1);
        let action = match self.kinds[op] {
            Kind::Insert => {
                let id = self.shared.next_id.next();
                Action::InsertOne {
                    collection: COLL,
                    doc: self.shared.document(&mut self.rng, id),
                }
            }
            Kind::Update => {
                let id = self.existing_id();
                let k = self.random_k();
                Action::UpdateOne {
                    collection: COLL,
                    filter: doc! { "_id": id },
                    update: doc! { "$set": { "k": k } },
                }
            }
            Kind::Delete => Action::DeleteOne {
                collection: COLL,
                filter: doc! { "_id": self.existing_id() },
            },
            Kind::Find => Action::FindOne {
                collection: COLL,
                filter: doc! { "_id": self.existing_id() },
            },
            Kind::FindByK => Action::FindOne {
                collection: COLL,
                filter: doc! { "k": self.random_k() },
            },
            Kind::UpdateByK => {
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
    use crate::config::ByteSize;

    fn bson_len(d: &Document) -> usize {
        let mut buf = Vec::new();
        d.to_writer(&mut buf).unwrap();
        buf.len()
    }

    fn params() -> MixedConfig {
        MixedConfig {
            doc_size: ByteSize(1024),
            initial_docs: 1000,
            ..MixedConfig::default()
        }
    }

    #[test]
    fn op_mix_matches_the_weights() {
        let w = Mixed::new(&params(), 1).unwrap();
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
        let w = Mixed::new(&cfg, 1).unwrap();
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
        assert!(Mixed::new(&all_zero, 1).is_err());
    }

    #[test]
    fn documents_have_the_configured_size() {
        for size in [64u64, 1024, 76 * 1024, 1 << 20] {
            let cfg = MixedConfig {
                doc_size: ByteSize(size),
                ..params()
            };
            let w = Mixed::new(&cfg, 5).unwrap();
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
        let w = Mixed::new(&params(), 1).unwrap();
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
        let w = Mixed::new(&params(), 1).unwrap();
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
        let w = Mixed::new(&params(), 1).unwrap();
        let w2 = Mixed::new(&params(), 1).unwrap();
        let mut a = w.worker(2, 77);
        let mut b = w2.worker(2, 77);
        for _ in 0..100 {
            assert_eq!(a.next_op(), b.next_op());
        }
    }
}
