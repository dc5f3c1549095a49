//! Workloads as data: each built-in workload says which collections it
//! uses, how to prepare them, and generates operations ([`Op`]) that the
//! deployment layer ([`crate::mongo`]) executes with the driver. Nothing here talks to MongoDB, so
//! the operation mix and the documents are tested on plain values.
//!
//! One folder per kind (`mixed/`, `sysbench/`, …): its parameters
//! (`params.rs`, implementing [`kind_trait::Kind`]: validation, description,
//! build) and its workload (`mod.rs`: a `build` function returning a
//! [`Built`] and the kind's [`Generator`], which makes each worker's
//! [`OpSource`]). [`kinds`] lists the kinds; the pieces they share live
//! once here: sequence-numbered, optionally bounded inserts
//! ([`BoundedInserts`]), weighted choice ([`Mix`]), the prepare steps
//! ([`PrepareStep::index`], [`PrepareStep::load`]), key and value
//! generators ([`gen`]) and the parameter checks ([`validate`]).
//!
//! The daemon builds a workload once from its config
//! (`WorkloadConfig::build`, in `config/build.rs`); the engine runs its
//! [`Workload::prepare`] steps in order, then asks for one [`OpSource`] per
//! worker (or per pacer) and calls [`OpSource::next_op`] on the hot path.
//!
//! An [`Op`] is one scheduled operation (what a stage's rate counts); it
//! makes one or more [`Request`]s, each a single driver call ([`Action`])
//! labelled with a step of the op ([`OpSpec`]).

pub(crate) mod audit_keys;
pub(crate) mod bounded;
pub(crate) mod custom;
pub(crate) mod footprint;
pub(crate) mod generators;
pub mod insert_benchmark;
pub(crate) mod kind_list;
pub(crate) mod kind_trait;
pub(crate) mod large_doc;
pub(crate) mod mixed;
pub(crate) mod name_num;
pub(crate) mod shard;
pub mod sysbench;
pub(crate) mod validate;
pub(crate) mod weighted;
pub mod ycsb;

pub use audit_keys::{AuditKeys, IntKeys};
pub use bounded::{BoundedInserts, LastInsert};
pub use weighted::{Mix, WeightedPick};

use std::fmt;
use std::sync::Arc;

use mongodb::bson::Document;
use rand::rngs::SmallRng;

use crate::cluster::{Keys, Member};

/// An `op` or `step` label: shared, cheap to clone, never leaked.
pub type Label = Arc<str>;

/// One scheduled operation: what a stage's `rate` and `concurrency`
/// count. It is one or more [`Request`]s (driver calls) and is counted
/// once, under its `op` label, with the latency of the whole.
#[derive(Debug, Clone, PartialEq)]
pub struct Op {
    /// Index into [`Workload::ops`]: the `op` metric label.
    pub op: usize,
    /// The driver calls it makes.
    pub body: Body,
}

impl Op {
    /// A single-call operation (its one request is step 0 of the op).
    pub fn one(op: usize, action: Action) -> Op {
        Op {
            op,
            body: Body::One(action),
        }
    }

    /// An operation of several requests run in order.
    pub fn steps(op: usize, requests: Vec<Request>) -> Op {
        Op {
            op,
            body: Body::Steps(requests),
        }
    }

    /// The action of a single-call operation.
    pub fn action(&self) -> Option<&Action> {
        match &self.body {
            Body::One(a) => Some(a),
            Body::Steps(_) | Body::Transaction { .. } => None,
        }
    }

    /// The action of a single-call operation, by value.
    pub fn into_action(self) -> Option<Action> {
        match self.body {
            Body::One(a) => Some(a),
            Body::Steps(_) | Body::Transaction { .. } => None,
        }
    }

    /// The requests of a multi-step operation (empty for a single call).
    pub fn requests(&self) -> &[Request] {
        match &self.body {
            Body::One(_) => &[],
            Body::Steps(r) | Body::Transaction { requests: r, .. } => r,
        }
    }
}

/// What an operation sends.
// The single-call variant holds its action inline: boxing it would cost an
// allocation per operation on the hot path; an op is moved, not stored.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    /// One driver call: the op's step 0.
    One(Action),
    /// Driver calls one after another; the first failure ends the
    /// operation, which then fails with that step's error.
    Steps(Vec<Request>),
    /// Like `Steps`, inside one multi-document transaction that is retried
    /// as a whole on a `TransientTransactionError`; the commit is a request
    /// of step `commit_step`.
    Transaction {
        requests: Vec<Request>,
        commit_step: usize,
    },
}

/// One driver call of an operation.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Index into the op's [`OpSpec::steps`]: the `step` metric label.
    pub step: usize,
    pub action: Action,
}

impl Request {
    pub fn new(step: usize, action: Action) -> Request {
        Request { step, action }
    }
}

/// An operation label and the labels of its steps. A single-call
/// operation has one step labelled like the op.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSpec {
    pub name: Label,
    pub steps: Vec<Label>,
    /// The step whose documents are not the operation's (a bounded
    /// insert's eviction: documents/s of an insert stay the inserted ones).
    pub evict_step: Option<usize>,
}

/// The step label of a bounded insert's eviction.
pub const EVICT: &str = "evict";

impl OpSpec {
    /// A single-call operation.
    pub fn single(name: &str) -> OpSpec {
        let name: Label = Arc::from(name);
        OpSpec {
            steps: vec![name.clone()],
            name,
            evict_step: None,
        }
    }

    /// Single-call operations, one per name.
    pub fn singles(names: &[&str]) -> Vec<OpSpec> {
        names.iter().map(|n| OpSpec::single(n)).collect()
    }

    /// An operation of several steps, in the order its requests index them.
    pub fn with_steps(name: &str, steps: &[&str]) -> OpSpec {
        OpSpec {
            name: Arc::from(name),
            steps: steps.iter().map(|s| Arc::from(*s)).collect(),
            evict_step: None,
        }
    }
}

/// A driver call, as data (one request). `collection` indexes
/// [`Workload::collections`].
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
    /// `delete_one(filter)`.
    DeleteOne { collection: usize, filter: Document },
    /// `delete_many(filter)`.
    DeleteMany { collection: usize, filter: Document },
    /// `count_documents(filter)`.
    Count { collection: usize, filter: Document },
    /// `aggregate(pipeline)`, the cursor drained: its documents counted,
    /// never decoded.
    Aggregate {
        collection: usize,
        pipeline: Vec<Document>,
    },
    /// `distinct(field, filter)`.
    Distinct {
        collection: usize,
        field: String,
        filter: Document,
    },
}

impl Action {
    /// The collection index the action targets.
    pub fn collection(&self) -> usize {
        match self {
            Action::InsertOne { collection, .. }
            | Action::InsertMany { collection, .. }
            | Action::FindOne { collection, .. }
            | Action::Find { collection, .. }
            | Action::UpdateOne { collection, .. }
            | Action::UpdateMany { collection, .. }
            | Action::DeleteOne { collection, .. }
            | Action::DeleteMany { collection, .. }
            | Action::Aggregate { collection, .. }
            | Action::Count { collection, .. }
            | Action::Distinct { collection, .. } => *collection,
        }
    }
}

/// Makes document number `i` of a [`PrepareStep::Load`].
pub type DocMaker = Arc<dyn Fn(u64) -> Document + Send + Sync>;

impl PrepareStep {
    /// `createIndexes` of the non-unique index `keys`, named `name` (or by
    /// the server).
    pub fn index(collection: usize, keys: Document, name: Option<&str>) -> PrepareStep {
        PrepareStep::CreateIndex {
            collection,
            keys,
            unique: false,
            name: name.map(str::to_owned),
        }
    }

    /// Loads documents `0..count` in batches of `batch`; `make` makes
    /// document `i` with the RNG of (`seed`, `i`) alone, so a resumed load
    /// writes what an uninterrupted one would have.
    pub fn load(
        collection: usize,
        count: u64,
        batch: usize,
        seed: u64,
        make: impl Fn(&mut SmallRng, u64) -> Document + Send + Sync + 'static,
    ) -> PrepareStep {
        PrepareStep::Load {
            collection,
            count,
            batch: batch.max(1),
            make: Arc::new(move |i| make(&mut generators::document_rng(seed, i), i)),
        }
    }
}

/// One step of a workload's prepare, run in order by the deployment
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
        counter: Arc<Keys>,
    },
    /// Raise `counter` to the collection's document count (`fetch_max`):
    /// for collections whose keys are not integers (YCSB's hashed
    /// `"user…"` keys) and are never deleted, the count is the next key
    /// number.
    CountKeys {
        collection: usize,
        counter: Arc<Keys>,
    },
    /// Shard every collection of the workload as `plan` says, through a
    /// mongos (docs/sharding.md); first of the steps, before any load.
    Shard { plan: shard::ShardPlan },
}

impl PrepareStep {
    /// The command the step sends (the first of a load, which reads before
    /// it inserts), for the message when the server refuses it for good.
    pub fn command(&self) -> &'static str {
        match self {
            PrepareStep::CreateIndex { .. } => "createIndexes",
            PrepareStep::Load { .. } => "insert",
            PrepareStep::SeekKeys { .. } => "find",
            PrepareStep::CountKeys { .. } => "aggregate (countDocuments)",
            PrepareStep::Shard { .. } => "shardCollection",
        }
    }

    /// What to change when the server does not support the step.
    pub fn way_out(&self) -> &'static str {
        match self {
            PrepareStep::CreateIndex { .. } => {
                "change the workload's indexes (an option or a unique index the server does not support)"
            }
            PrepareStep::Load { .. } => {
                "change the workload's documents (a type or a size the server does not support)"
            }
            PrepareStep::SeekKeys { .. } | PrepareStep::CountKeys { .. } => {
                "use a workload kind whose prepare this server supports"
            }
            PrepareStep::Shard { .. } => "remove shard_key",
        }
    }
}

impl fmt::Debug for PrepareStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrepareStep::Shard { plan } => f.debug_struct("Shard").field("plan", plan).finish(),
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
    /// The operations with their steps; [`Op::op`] indexes this list.
    fn ops(&self) -> &[OpSpec];
    /// The `op` labels, in the order of [`Workload::ops`].
    fn op_names(&self) -> Vec<&str> {
        self.ops().iter().map(|o| &*o.name).collect()
    }
    /// Collection names (in the target database); actions index this list.
    fn collections(&self) -> &[String];
    /// The prepare steps, in order.
    fn prepare(&self) -> Vec<PrepareStep>;
    /// A per-worker operation source with its own RNG and buffers. The same
    /// (`seed`, `worker_id`) gives the same stream of choices.
    fn worker(&self, worker_id: u32, seed: u64) -> Box<dyn OpSource>;
    /// The insert keys of its collections (see [`Keys`]), so that a
    /// cluster member takes its own ([`join`]).
    fn keys(&self) -> Vec<&Keys> {
        Vec::new()
    }
    /// How the acknowledged-write audit maps this workload's `_id`s to its
    /// ledger's integer ids (integer `_id`s unless said otherwise).
    fn audit_keys(&self) -> Arc<dyn AuditKeys> {
        Arc::new(IntKeys)
    }
}

/// Makes `workload`'s insert keys those of `member` (before any insert).
pub fn join(workload: &dyn Workload, member: Member) {
    for keys in workload.keys() {
        keys.join(member);
    }
}

/// Generates one worker's operations.
pub trait OpSource: Send {
    /// The next operation to execute.
    fn next_op(&mut self) -> Op;
}

/// What a kind generates its operations from, shared by every worker:
/// it makes each worker's [`OpSource`].
pub trait Generator: Send + Sync {
    /// The operation source of worker `worker`, drawing from `rng` (the
    /// worker's own: the same seed and worker give the same stream).
    fn source(self: Arc<Self>, worker: u32, rng: SmallRng) -> Box<dyn OpSource>;
    /// How the acknowledged-write audit maps the kind's `_id`s to its
    /// ledger's integer ids (integer `_id`s unless said otherwise).
    fn audit_keys(&self) -> Arc<dyn AuditKeys> {
        Arc::new(IntKeys)
    }
}

/// A kind's workload as built: what every kind has (its name, operations,
/// collections and prepare steps) and the kind's [`Generator`], which it
/// dereferences to for the kind's own accessors.
pub struct Built<G> {
    pub kind: &'static str,
    pub ops: Vec<OpSpec>,
    pub collections: Vec<String>,
    pub prepare: Vec<PrepareStep>,
    pub generator: Arc<G>,
    /// The insert keys of its collections ([`Workload::keys`]).
    pub keys: Vec<Arc<Keys>>,
}

impl<G> Built<G> {
    /// A kind's workload: its name, operations, collections, prepare
    /// steps and generator.
    pub fn new(
        kind: &'static str,
        ops: Vec<OpSpec>,
        collections: Vec<String>,
        prepare: Vec<PrepareStep>,
        generator: Arc<G>,
    ) -> Built<G> {
        Built {
            kind,
            ops,
            collections,
            prepare,
            generator,
            keys: Vec::new(),
        }
    }

    /// The same, with these insert keys (a cluster member takes its own).
    pub fn with_keys(mut self, keys: Vec<Arc<Keys>>) -> Built<G> {
        self.keys = keys;
        self
    }
}

impl<G: Generator> Workload for Built<G> {
    fn kind(&self) -> &'static str {
        self.kind
    }

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn collections(&self) -> &[String] {
        &self.collections
    }

    fn prepare(&self) -> Vec<PrepareStep> {
        self.prepare.clone()
    }

    fn worker(&self, worker_id: u32, seed: u64) -> Box<dyn OpSource> {
        Arc::clone(&self.generator).source(worker_id, generators::worker_rng(seed, worker_id))
    }

    fn keys(&self) -> Vec<&Keys> {
        self.keys.iter().map(|k| &**k).collect()
    }

    fn audit_keys(&self) -> Arc<dyn AuditKeys> {
        self.generator.audit_keys()
    }
}

impl<G> std::ops::Deref for Built<G> {
    type Target = G;

    fn deref(&self) -> &G {
        &self.generator
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
    fn bson_len_is_the_encoded_size() {
        let d = mongodb::bson::doc! { "a": 1i32 };
        // 4 (length) + 1 (type) + 2 ("a\0") + 4 (i32) + 1 (end)
        assert_eq!(bson_len(&d), 12);
    }
}
