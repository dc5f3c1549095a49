//! Workloads as data: each built-in workload says which collections it
//! uses, how to prepare them, and generates operations ([`Op`]) that the
//! target layer executes with the driver. Nothing here talks to MongoDB, so
//! the operation mix and the documents are tested on plain values.
//!
//! The engine builds a workload once ([`build`]), runs its
//! [`Workload::prepare`] steps in order, then asks for one [`OpSource`] per
//! worker (or per pacer) and calls [`OpSource::next_op`] on the hot path.

pub mod custom;
pub mod gen;
pub mod insert_benchmark;
pub mod large_doc;
pub mod mixed;
pub mod name_num;
pub mod sysbench;
pub mod ycsb;

use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use mongodb::bson::Document;
use rand::Rng;

use crate::config::{WorkloadConfig, WorkloadKind};

/// One operation to execute.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// Index into [`Workload::op_names`]: the `op` metric label.
    pub op: usize,
    /// What to send.
    pub action: Action,
}

/// A driver call, as data. `collection` indexes [`Workload::collections`].
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// `insert_one(doc)`.
    InsertOne { collection: usize, doc: Document },
    /// `insert_many(docs)` (ordered).
    InsertMany {
        collection: usize,
        docs: Vec<Document>,
    },
    /// `find_one(filter)`.
    FindOne { collection: usize, filter: Document },
    /// `find(filter)` with options, the cursor drained.
    Find {
        collection: usize,
        filter: Document,
        sort: Option<Document>,
        limit: i64,
        projection: Option<Document>,
    },
    /// `update_one(filter, update)`.
    UpdateOne {
        collection: usize,
        filter: Document,
        update: Document,
    },
    /// `update_many(filter, update)`.
    UpdateMany {
        collection: usize,
        filter: Document,
        update: Document,
    },
    /// `replace_one(filter, replacement)`.
    ReplaceOne {
        collection: usize,
        filter: Document,
        replacement: Document,
    },
    /// `delete_one(filter)`.
    DeleteOne { collection: usize, filter: Document },
    /// `delete_many(filter)`.
    DeleteMany { collection: usize, filter: Document },
    /// `aggregate(pipeline)`, the cursor drained.
    Aggregate {
        collection: usize,
        pipeline: Vec<Document>,
    },
    /// `count_documents(filter)`.
    Count { collection: usize, filter: Document },
    /// `distinct(field, filter)`.
    Distinct {
        collection: usize,
        field: String,
        filter: Document,
    },
    /// Operations run one after another, each counted under its own `op`
    /// label with its own latency, the whole under the outer op's label
    /// (a sysbench transaction). The first failure ends the sequence.
    Sequence(Vec<Op>),
}

impl Action {
    /// The collection index the action targets (a sequence: its first step's).
    pub fn collection(&self) -> usize {
        match self {
            Action::InsertOne { collection, .. }
            | Action::InsertMany { collection, .. }
            | Action::FindOne { collection, .. }
            | Action::Find { collection, .. }
            | Action::UpdateOne { collection, .. }
            | Action::UpdateMany { collection, .. }
            | Action::ReplaceOne { collection, .. }
            | Action::DeleteOne { collection, .. }
            | Action::DeleteMany { collection, .. }
            | Action::Aggregate { collection, .. }
            | Action::Count { collection, .. }
            | Action::Distinct { collection, .. } => *collection,
            Action::Sequence(ops) => ops.first().map_or(0, |op| op.action.collection()),
        }
    }
}

/// Makes document number `i` of a [`PrepareStep::Load`].
pub type DocMaker = Arc<dyn Fn(u64) -> Document + Send + Sync>;

/// One step of a workload's prepare phase, run in order by the target
/// layer before the first stage. Every step is idempotent, so a prepare
/// interrupted halfway can be run again.
#[derive(Clone)]
pub enum PrepareStep {
    /// `createIndexes` (a no-op when the index exists).
    CreateIndex {
        collection: usize,
        keys: Document,
        unique: bool,
        name: Option<String>,
    },
    /// Load documents `make(0) .. make(count - 1)` in batches of `batch`.
    /// `make(i)` has a distinct `_id` for every `i` (normally `i` as i64;
    /// YCSB's `"user…"` keys otherwise) and depends only on `i`, so a
    /// loader can resume: skip the documents already present (probing
    /// `make(i)`'s `_id`) and insert the rest unordered, ignoring
    /// duplicate keys.
    Load {
        collection: usize,
        count: u64,
        batch: usize,
        make: DocMaker,
    },
    /// Find the highest integer `_id` in the collection and raise `counter`
    /// to one past it (`fetch_max`), so inserts after a restart take fresh
    /// keys instead of colliding with documents of the previous run.
    SeekKeys {
        collection: usize,
        counter: Arc<AtomicU64>,
    },
    /// Raise `counter` to the collection's document count (`fetch_max`):
    /// for collections whose keys are not integers (YCSB's hashed
    /// `"user…"` keys) and are never deleted, the count is the next key
    /// number.
    CountKeys {
        collection: usize,
        counter: Arc<AtomicU64>,
    },
}

impl fmt::Debug for PrepareStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrepareStep::CreateIndex {
                collection,
                keys,
                unique,
                name,
            } => f
                .debug_struct("CreateIndex")
                .field("collection", collection)
                .field("keys", keys)
                .field("unique", unique)
                .field("name", name)
                .finish(),
            PrepareStep::Load {
                collection,
                count,
                batch,
                ..
            } => f
                .debug_struct("Load")
                .field("collection", collection)
                .field("count", count)
                .field("batch", batch)
                .finish_non_exhaustive(),
            PrepareStep::CountKeys {
                collection,
                counter,
            } => f
                .debug_struct("CountKeys")
                .field("collection", collection)
                .field("counter", counter)
                .finish(),
            PrepareStep::SeekKeys {
                collection,
                counter,
            } => f
                .debug_struct("SeekKeys")
                .field("collection", collection)
                .field("counter", counter)
                .finish(),
        }
    }
}

/// A built-in workload: its collections, prepare steps and operation
/// sources. Shared by all workers (`Arc<dyn Workload>`).
pub trait Workload: Send + Sync {
    /// The kind as written in the config (`mixed`).
    fn kind(&self) -> &'static str;
    /// The `op` metric labels; [`Op::op`] indexes this list.
    fn op_names(&self) -> &[&'static str];
    /// Collection names (in the target database); actions index this list.
    fn collections(&self) -> &[String];
    /// The prepare steps, in order.
    fn prepare(&self) -> Vec<PrepareStep>;
    /// A per-worker operation source with its own RNG and buffers. The same
    /// (`seed`, `worker_id`) gives the same stream of choices.
    fn worker(&self, worker_id: u32, seed: u64) -> Box<dyn OpSource>;
}

/// Generates one worker's operations.
pub trait OpSource: Send {
    /// The next operation to execute.
    fn next_op(&mut self) -> Op;
}

/// A workload config that cannot be built (normally caught by config
/// validation first).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("workload {workload:?}: {reason}")]
pub struct BuildError {
    /// The workload's name.
    pub workload: String,
    /// Why it cannot be built.
    pub reason: String,
}

/// Builds the workload a config describes.
pub fn build(cfg: &WorkloadConfig) -> Result<Arc<dyn Workload>, BuildError> {
    let seed = cfg.seed.unwrap_or(0);
    fn arc<W: Workload + 'static>(w: W) -> Arc<dyn Workload> {
        Arc::new(w)
    }
    let built = match cfg.kind {
        WorkloadKind::Mixed => mixed::Mixed::new(&cfg.mixed_params(), seed).map(arc),
        WorkloadKind::InsertBenchmark => {
            insert_benchmark::InsertBenchmark::new(&cfg.insert_benchmark_params(), seed).map(arc)
        }
        WorkloadKind::Sysbench => sysbench::Sysbench::new(&cfg.sysbench_params(), seed).map(arc),
        WorkloadKind::NameNum => name_num::NameNum::new(&cfg.name_num_params(), seed).map(arc),
        WorkloadKind::LargeDoc => large_doc::LargeDoc::new(&cfg.large_doc_params(), seed).map(arc),
        WorkloadKind::Ycsb => ycsb::Ycsb::new(&cfg.ycsb_params(), seed).map(arc),
        WorkloadKind::Custom => custom::Custom::new(&cfg.custom_params(), seed)
            .map(arc)
            .map_err(|e| format!("{}: {}", e.key, e.reason)),
    };
    built.map_err(|reason| BuildError {
        workload: cfg.name.clone(),
        reason,
    })
}

/// Picks an index by relative weights with one `u32` draw: the mix of
/// operations of a workload. Zero weights are never picked.
#[derive(Debug, Clone)]
pub struct WeightedPick {
    /// Cumulative thresholds over `u32` draws, one per weight.
    thresholds: Vec<u64>,
}

impl WeightedPick {
    /// `None` when no weight is positive (or one is negative or not finite).
    pub fn new(weights: &[f64]) -> Option<WeightedPick> {
        if weights.iter().any(|w| !(w.is_finite() && *w >= 0.0)) {
            return None;
        }
        let sum: f64 = weights.iter().sum();
        if sum <= 0.0 {
            return None;
        }
        let mut acc = 0.0;
        let mut thresholds: Vec<u64> = weights
            .iter()
            .map(|w| {
                acc += w;
                ((acc / sum) * (1u64 << 32) as f64) as u64
            })
            .collect();
        // Rounding must not leave a gap at the top (nor pick a trailing
        // zero weight).
        if let Some(last) = weights.iter().rposition(|w| *w > 0.0) {
            for t in &mut thresholds[last..] {
                *t = 1u64 << 32;
            }
        }
        Some(WeightedPick { thresholds })
    }

    /// An index in `0..weights.len()` with probability ∝ its weight.
    pub fn pick(&self, rng: &mut impl Rng) -> usize {
        let draw = rng.random::<u32>() as u64;
        self.thresholds
            .iter()
            .position(|&t| draw < t)
            .unwrap_or(self.thresholds.len() - 1)
    }
}

/// The BSON size of a document in bytes.
pub fn bson_len(doc: &Document) -> usize {
    let mut buf = Vec::new();
    // Serialising a Document into a Vec only fails for keys with NULs,
    // which no workload makes; 0 then just means "no padding needed".
    doc.to_writer(&mut buf).map_or(0, |_| buf.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weighted_pick_follows_the_weights_and_skips_zeros() {
        let p = WeightedPick::new(&[1.0, 0.0, 3.0, 0.0]).unwrap();
        let mut rng = gen::worker_rng(1, 0);
        let mut counts = [0u32; 4];
        for _ in 0..40_000 {
            counts[p.pick(&mut rng)] += 1;
        }
        assert_eq!((counts[1], counts[3]), (0, 0), "{counts:?}");
        let share = counts[2] as f64 / 40_000.0;
        assert!((share - 0.75).abs() < 0.02, "{counts:?}");
        assert!(WeightedPick::new(&[0.0, 0.0]).is_none());
        assert!(WeightedPick::new(&[1.0, f64::NAN]).is_none());
        assert!(WeightedPick::new(&[-1.0, 2.0]).is_none());
    }

    #[test]
    fn bson_len_is_the_encoded_size() {
        let d = mongodb::bson::doc! { "a": 1i32 };
        // 4 (length) + 1 (type) + 2 ("a\0") + 4 (i32) + 1 (end)
        assert_eq!(bson_len(&d), 12);
    }
}
