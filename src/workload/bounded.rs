//! Inserts keyed by sequence number, the one way every kind inserts new
//! documents: the next key from the [`Keys`] all workers share (raised at
//! prepare time past what a previous run left; a cluster member's own
//! keys, disjoint from the other members'), and, with a bound, the
//! eviction of the oldest documents as the insert's second step, under the
//! insert's own `op` label (step [`EVICT`]), so the collection holds at
//! most `max_docs` documents for as long as the workload runs.
//!
//! An eviction names exactly the keys `max_docs` behind (the insert
//! benchmark's range delete: the server's cursor starts at the first key
//! to delete, never walking over the deleted ones before it). That holds
//! the bound while inserts land in key order; a worker whose insert was
//! still in flight when the counter passed it by `max_docs` (it stalled
//! while the others went on) may see its keys evicted before they land, so
//! its next eviction reaches back over them too ([`LastInsert`]).

use std::ops::Range;
use std::sync::Arc;

use mongodb::bson::{doc, Document};
use rand::rngs::SmallRng;

use super::{Action, Op, OpSpec, PrepareStep, Request, EVICT};
use crate::cluster::Keys;

/// The sequence-numbered inserts of one collection. Cloning shares the
/// counter.
#[derive(Debug, Clone)]
pub struct BoundedInserts {
    collection: usize,
    /// Documents the prepare step loads: keys `0..loaded`.
    loaded: u64,
    next: Arc<Keys>,
    /// In all (a cluster member holds its share); 0: unbounded.
    max_docs: u64,
    /// Keys that are not integers (never evicted): the counter is raised
    /// to the document count instead of past the highest `_id`.
    counted: bool,
}

/// A worker's previous insert (its first key), done, landed or failed,
/// by the time the worker asks for its next operation: when the keys
/// taken meanwhile may have evicted it before it landed
/// ([`Keys::passed`]), the next eviction reaches back to it.
#[derive(Debug, Default, Clone, Copy)]
pub struct LastInsert(Option<u64>);

impl LastInsert {
    /// The first key of the previous insert when a later key may have
    /// evicted it (before taking the next); then forgotten, since the
    /// eviction about to be made covers it.
    fn overtaken(&mut self, keys: &Keys, max_docs: u64) -> Option<u64> {
        self.0.take().filter(|&k| keys.passed(k, max_docs))
    }
}

impl BoundedInserts {
    /// Inserts into collection `collection` after `initial_docs` loaded
    /// documents (keys `0..initial_docs`), held to `max_docs` documents
    /// (0: unbounded).
    pub fn new(collection: usize, initial_docs: u64, max_docs: u64) -> BoundedInserts {
        BoundedInserts {
            collection,
            loaded: initial_docs,
            next: Arc::new(Keys::new(initial_docs)),
            max_docs,
            counted: false,
        }
    }

    /// Unbounded inserts whose keys are derived from the sequence number
    /// but are not integers (YCSB's hashed `"user…"` keys): a restart
    /// continues from the document count.
    pub fn counted(collection: usize, initial_docs: u64) -> BoundedInserts {
        BoundedInserts {
            counted: true,
            ..BoundedInserts::new(collection, initial_docs, 0)
        }
    }

    /// The prepare steps of the collection's documents: keys
    /// `0..initial_docs` loaded in batches of `batch`, document `i` made
    /// by `make` from `generator` with the RNG of (`seed`, `i`) alone (see
    /// [`PrepareStep::load`]); then the counter raised past the keys
    /// present ([`BoundedInserts::seek_keys`], or
    /// [`BoundedInserts::count_keys`] for [`BoundedInserts::counted`]).
    pub fn prepare<G: Send + Sync + 'static>(
        &self,
        (batch, seed): (usize, u64),
        generator: &Arc<G>,
        make: fn(&G, &mut SmallRng, u64) -> Document,
    ) -> [PrepareStep; 2] {
        let g = Arc::clone(generator);
        let load = PrepareStep::load(self.collection, self.loaded, batch, seed, move |rng, i| {
            make(&g, rng, i)
        });
        let keys = if self.counted {
            self.count_keys()
        } else {
            self.seek_keys()
        };
        [load, keys]
    }

    /// Whether inserts evict.
    pub fn bounded(&self) -> bool {
        self.max_docs > 0
    }

    /// The operation of an insert labelled `name`: with a bound, its
    /// eviction is step 1 ([`EVICT`]), whose documents are not the
    /// operation's. The label stays the same before and after the bound
    /// is reached.
    pub fn spec(&self, name: &str) -> OpSpec {
        let mut spec = OpSpec::single(name);
        if self.bounded() {
            spec.steps.push(Arc::from(EVICT));
            spec.evict_step = Some(1);
        }
        spec
    }

    /// The shared insert keys.
    pub fn counter(&self) -> &Arc<Keys> {
        &self.next
    }

    /// The prepare step that raises the counter past the highest integer
    /// `_id` in the collection (a restart continues after its own
    /// documents).
    pub fn seek_keys(&self) -> PrepareStep {
        PrepareStep::SeekKeys {
            collection: self.collection,
            counter: Arc::clone(&self.next),
        }
    }

    /// The prepare step that raises the counter to the collection's
    /// document count: for keys that are not integers and never evicted.
    pub fn count_keys(&self) -> PrepareStep {
        PrepareStep::CountKeys {
            collection: self.collection,
            counter: Arc::clone(&self.next),
        }
    }

    /// The keys present now: from the oldest not evicted to the last one
    /// taken (never empty: key 0 counts as present before any insert, so
    /// a draw always has a range).
    pub fn present(&self) -> Range<u64> {
        self.present_at(self.next.bound().max(1))
    }

    /// The keys present when `inserted` keys have been taken.
    pub fn present_at(&self, inserted: u64) -> Range<u64> {
        let first = if self.bounded() {
            inserted.saturating_sub(self.max_docs)
        } else {
            0
        };
        first..inserted
    }

    /// Takes the next key.
    pub fn next_key(&self) -> u64 {
        self.next.next()
    }

    /// Operation `op`: one document, made by `make` from its key; with a
    /// bound, the document the bound reaches back to is deleted after it
    /// (a cluster member's own, [`Keys::evicted`]), with the worker's
    /// previous insert when it may have been evicted before it landed.
    pub fn insert_one(
        &self,
        op: usize,
        last: &mut LastInsert,
        make: impl FnOnce(u64) -> Document,
    ) -> Op {
        let overtaken = self.overtaken(last);
        let id = self.next_key();
        *last = LastInsert(Some(id));
        let insert = Action::InsertOne {
            collection: self.collection,
            doc: make(id),
        };
        let evict = self
            .bounded()
            .then(|| self.next.evicted(id, self.max_docs))
            .flatten()
            .map(|old| match overtaken {
                None => Action::DeleteOne {
                    collection: self.collection,
                    filter: doc! { "_id": old as i64 },
                },
                Some(first) => self.evict(first.min(old), old + 1, self.next.stride(), id),
            });
        self.op(op, insert, evict)
    }

    /// Operation `op`: a batch of `n` documents (one `insertMany`), made
    /// by `make` from their keys; with a bound, the batch the bound
    /// reaches back to is deleted after it (one `deleteMany` of the key
    /// range; a cluster member's keys are every stride-th), from the
    /// worker's previous batch when it may have been evicted before it
    /// landed.
    pub fn insert_many(
        &self,
        op: usize,
        n: u64,
        last: &mut LastInsert,
        make: impl FnMut(u64) -> Document,
    ) -> Op {
        let overtaken = self.overtaken(last);
        let run = self.next.next_run(n);
        *last = LastInsert(Some(run.first));
        let insert = Action::InsertMany {
            collection: self.collection,
            docs: run.iter().map(make).collect(),
        };
        let evict = self
            .bounded()
            .then(|| self.next.evicted_range(run, self.max_docs))
            .flatten()
            .map(|(from, to)| {
                let from = overtaken.map_or(from, |first| first.min(from));
                self.evict(from, to, run.stride, run.first)
            });
        self.op(op, insert, evict)
    }

    fn overtaken(&self, last: &mut LastInsert) -> Option<u64> {
        if self.bounded() {
            last.overtaken(&self.next, self.max_docs)
        } else {
            None
        }
    }

    /// The eviction of this member's keys in `[from, to)` (one
    /// `deleteMany`): the keys `≡ key (mod stride)` when members share the
    /// key space.
    fn evict(&self, from: u64, to: u64, stride: u64, key: u64) -> Action {
        let mut range = doc! { "$gte": from as i64, "$lt": to as i64 };
        if stride > 1 {
            range.insert("$mod", vec![stride as i64, (key % stride) as i64]);
        }
        Action::DeleteMany {
            collection: self.collection,
            filter: doc! { "_id": range },
        }
    }

    fn op(&self, op: usize, insert: Action, evict: Option<Action>) -> Op {
        match evict {
            None => Op::one(op, insert),
            Some(evict) => Op::steps(op, vec![Request::new(0, insert), Request::new(1, evict)]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evicted(op: &Op) -> Option<&Document> {
        match &op.requests().get(1)?.action {
            Action::DeleteOne { filter, .. } | Action::DeleteMany { filter, .. } => Some(filter),
            _ => None,
        }
    }

    #[test]
    fn unbounded_inserts_take_fresh_keys_and_evict_nothing() {
        let b = BoundedInserts::new(0, 10, 0);
        assert_eq!(b.spec("insert").steps.len(), 1);
        let op = b.insert_one(
            3,
            &mut LastInsert::default(),
            |id| doc! { "_id": id as i64 },
        );
        assert_eq!(op.op, 3);
        assert!(
            matches!(op.action(), Some(Action::InsertOne { doc, .. }) if doc.get_i64("_id") == Ok(10))
        );
        assert_eq!(b.present(), 0..11);
        assert_eq!(b.present_at(11), 0..11);
    }

    #[test]
    fn a_bound_evicts_the_key_max_docs_behind_once_reached() {
        let b = BoundedInserts::new(0, 3, 5);
        let spec = b.spec("insert");
        assert_eq!((&*spec.steps[1], spec.evict_step), (EVICT, Some(1)));
        // Keys 3 and 4 fit under the bound; key 5 evicts key 0.
        let mut last = LastInsert::default();
        for _ in 0..2 {
            assert!(evicted(&b.insert_one(0, &mut last, |_| Document::new())).is_none());
        }
        let op = b.insert_one(0, &mut last, |_| Document::new());
        assert_eq!(evicted(&op), Some(&doc! { "_id": 0i64 }));
        assert_eq!(b.present(), 1..6);
    }

    #[test]
    fn an_insert_overtaken_in_flight_is_evicted_again_by_its_worker() {
        let b = BoundedInserts::new(0, 0, 5);
        let (mut slow, mut fast) = (LastInsert::default(), LastInsert::default());
        // The slow worker takes key 0; the fast one takes 1..=5, and key 5
        // evicts key 0 (maybe before it landed).
        b.insert_one(0, &mut slow, |_| Document::new());
        for _ in 1..=5 {
            b.insert_one(0, &mut fast, |_| Document::new());
        }
        // The fast worker's own previous key (5) was not overtaken.
        let op = b.insert_one(0, &mut fast, |_| Document::new());
        assert_eq!(evicted(&op), Some(&doc! { "_id": 1i64 }));
        // The slow worker's next eviction reaches back to key 0 once.
        let op = b.insert_one(0, &mut slow, |_| Document::new());
        assert_eq!(
            evicted(&op),
            Some(&doc! { "_id": { "$gte": 0i64, "$lt": 3i64 } })
        );
        let op = b.insert_one(0, &mut slow, |_| Document::new());
        assert_eq!(evicted(&op), Some(&doc! { "_id": 3i64 }));
    }

    #[test]
    fn a_bounded_batch_evicts_the_batch_max_docs_behind() {
        let b = BoundedInserts::new(0, 1000, 1000);
        let op = b.insert_many(
            0,
            100,
            &mut LastInsert::default(),
            |id| doc! { "_id": id as i64 },
        );
        let Some(Action::InsertMany { docs, .. }) = op.requests().first().map(|r| &r.action) else {
            panic!("{op:?}")
        };
        assert_eq!(docs.len(), 100);
        assert_eq!(
            evicted(&op),
            Some(&doc! { "_id": { "$gte": 0i64, "$lt": 100i64 } })
        );
    }
}
