//! The replica set's oplog: every change the primary made, in order, and
//! each member's replication position. It decides what a secondary may
//! apply now (after the replication lag, never the newest writes held back
//! for a rollback unless a write concern needs them), where the majority
//! commit point is, and what a step-down rolls back. Pure: no locks, no
//! clock reads (the caller passes `now`), tested on plain values.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, DateTime, Document, Timestamp};

use crate::store::{IndexOptions, Key};

/// A position in the oplog: the entry's sequence number (increasing, with
/// gaps after a rollback), the term it was written in and its wall time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpTime {
    pub seq: u64,
    pub term: i64,
    pub wall: DateTime,
}

impl OpTime {
    /// Before the first write.
    pub fn zero() -> OpTime {
        OpTime {
            seq: 0,
            term: 0,
            wall: DateTime::from_millis(0),
        }
    }

    /// The oplog `Timestamp`: the wall clock's second, the sequence number.
    pub fn ts(&self) -> Timestamp {
        Timestamp {
            time: (self.wall.timestamp_millis() / 1000).max(0) as u32,
            increment: self.seq as u32,
        }
    }

    /// `{ts: Timestamp, t: term}` as `hello`'s `lastWrite` shows it.
    pub fn to_doc(&self) -> Document {
        doc! { "ts": self.ts(), "t": self.term }
    }
}

/// A secondary index as the catalog replicates it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSpec {
    pub name: String,
    pub key: Vec<(String, i32)>,
    /// Unique, sparse, partial: what the index holds and refuses.
    pub options: IndexOptions,
    pub spec: Document,
}

/// A catalog change. Catalog changes commit at once on a majority (as
/// MongoDB's DDL waits for one), so a rollback never undoes them.
#[derive(Debug, Clone, PartialEq)]
pub enum Catalog {
    /// The collection exists with exactly these secondary indexes.
    Collection {
        db: String,
        coll: String,
        indexes: Vec<IndexSpec>,
    },
    DropCollection {
        db: String,
        coll: String,
    },
    DropDatabase {
        db: String,
    },
}

/// One oplog entry's change.
// Nearly every entry is a `Doc`, and entries live behind an `Arc`: boxing
// it would only add an allocation per write.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Change {
    /// The document `id` of `ns` (`db.coll`) becomes `after` (removed when
    /// `None`); `before` undoes it (`None`: it did not exist).
    Doc {
        ns: String,
        id: Key,
        before: Option<Document>,
        after: Option<Document>,
    },
    Catalog(Catalog),
}

/// One entry: what changed, when and in which term.
#[derive(Debug, PartialEq)]
pub struct Entry {
    pub time: OpTime,
    /// When the primary wrote it (replication lag counts from here).
    pub at: Instant,
    pub change: Change,
}

/// The oplog and the members' positions.
#[derive(Debug)]
pub struct Oplog {
    /// Entries some member has not applied yet, or that a rollback may
    /// still remove, in sequence order.
    entries: VecDeque<Arc<Entry>>,
    next_seq: u64,
    /// The newest entry every member applied and that was trimmed.
    base: OpTime,
    /// Entries up to here were asked for by a write concern above 1 or are
    /// catalog changes: never held back, never rolled back.
    barrier: u64,
    /// Per member: the newest entry it applied (the primary: its last write).
    applied: Vec<OpTime>,
    primary: Option<usize>,
    term: i64,
    /// Secondaries apply an entry this long after the primary wrote it.
    pub lag: Duration,
    /// The newest this many entries above the barrier stay off the
    /// secondaries (as if replication were cut), so a step-down rolls them back.
    pub hold_back: usize,
}

impl Oplog {
    /// An empty oplog for `members` members, `primary` elected in `term`.
    pub fn new(members: usize, primary: Option<usize>, term: i64) -> Oplog {
        Oplog {
            entries: VecDeque::new(),
            next_seq: 1,
            base: OpTime::zero(),
            barrier: 0,
            applied: vec![OpTime::zero(); members],
            primary,
            term,
            lag: Duration::ZERO,
            hold_back: 0,
        }
    }

    pub fn primary(&self) -> Option<usize> {
        self.primary
    }

    /// Appends a change written by the primary at `at` / `wall`; returns its
    /// sequence number. Catalog changes move the barrier to themselves.
    pub fn push(&mut self, change: Change, at: Instant, wall: DateTime) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        let time = OpTime {
            seq,
            term: self.term,
            wall,
        };
        if matches!(change, Change::Catalog(_)) {
            self.barrier = seq;
        }
        self.entries.push_back(Arc::new(Entry { time, at, change }));
        if let Some(p) = self.primary {
            self.applied[p] = time;
        }
        seq
    }

    /// The newest entry (or the trimmed base).
    pub fn last(&self) -> OpTime {
        self.entries.back().map_or(self.base, |e| e.time)
    }

    /// What `member` applied last.
    pub fn applied(&self, member: usize) -> OpTime {
        self.applied[member]
    }

    /// A write concern above 1 needs everything up to `seq` replicated.
    pub fn require(&mut self, seq: u64) {
        self.barrier = self.barrier.max(seq);
    }

    /// The newest entry a secondary may apply, lag aside.
    pub fn limit(&self) -> u64 {
        let n = self.entries.len();
        let boundary = if n > self.hold_back {
            self.entries[n - self.hold_back - 1].time.seq
        } else {
            self.base.seq
        };
        boundary.max(self.barrier).min(self.last().seq)
    }

    /// Index of the first entry after `seq`.
    fn after(&self, seq: u64) -> usize {
        self.entries.partition_point(|e| e.time.seq <= seq)
    }

    /// The entries `member` may apply at `now`, in order, and when the next
    /// one becomes due (`None`: nothing is waiting on the clock). The
    /// primary applies nothing.
    pub fn due(&self, member: usize, now: Instant) -> (Vec<Arc<Entry>>, Option<Instant>) {
        if self.primary == Some(member) {
            return (Vec::new(), None);
        }
        let limit = self.limit();
        let mut out = Vec::new();
        for e in self.entries.range(self.after(self.applied[member].seq)..) {
            if e.time.seq > limit {
                break;
            }
            let ready = e.at + self.lag;
            if ready > now {
                return (out, Some(ready));
            }
            out.push(e.clone());
        }
        (out, None)
    }

    /// Every entry after what `member` applied, up to `upto`, lag ignored
    /// (a secondary catching up before an election).
    pub fn pending(&self, member: usize, upto: u64) -> Vec<Arc<Entry>> {
        self.entries
            .range(self.after(self.applied[member].seq)..)
            .take_while(|e| e.time.seq <= upto)
            .cloned()
            .collect()
    }

    /// Records that `member` applied up to `time`.
    pub fn set_applied(&mut self, member: usize, time: OpTime) {
        self.applied[member] = time;
    }

    /// How many members applied `seq` or later.
    pub fn count_applied(&self, seq: u64) -> usize {
        self.applied.iter().filter(|t| t.seq >= seq).count()
    }

    /// Members needed for a majority.
    pub fn majority(&self) -> usize {
        self.applied.len() / 2 + 1
    }

    /// The newest entry a majority applied.
    pub fn commit_point(&self) -> OpTime {
        let mut seqs: Vec<OpTime> = self.applied.clone();
        seqs.sort_by_key(|t| std::cmp::Reverse(t.seq));
        seqs[self.majority() - 1]
    }

    /// Drops the entries every member applied (no secondary applies a
    /// held-back entry, so a rollback never needs a dropped one).
    pub fn trim(&mut self) {
        let floor = self.applied.iter().map(|t| t.seq).min().unwrap_or(0);
        while let Some(front) = self.entries.front() {
            if front.time.seq > floor {
                break;
            }
            self.base = front.time;
            self.entries.pop_front();
        }
    }

    /// The primary steps down: no member is primary any more, and the
    /// entries above [`Oplog::limit`] (held back, so on no secondary) are
    /// removed and returned in order, for the old primary to undo. The
    /// others then catch up to [`Oplog::last`] with [`Oplog::pending`].
    pub fn step_down(&mut self) -> Vec<Arc<Entry>> {
        let cut = self.limit();
        let keep = self.after(cut);
        let rolled_back: Vec<Arc<Entry>> = self.entries.drain(keep..).collect();
        if let Some(p) = self.primary.take() {
            self.applied[p] = self.last();
        }
        rolled_back
    }

    /// `member` becomes primary in `term` (it must have caught up).
    pub fn elect(&mut self, member: usize, term: i64) {
        self.primary = Some(member);
        self.term = term;
        self.applied[member] = self.last();
    }

    /// Entries kept now (for tests and `replSetGetStatus`-like views).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::Bson;

    fn ins(i: i32) -> Change {
        Change::Doc {
            ns: "d.c".into(),
            id: Key(Bson::Int32(i)),
            before: None,
            after: Some(doc! {"_id": i}),
        }
    }

    fn seqs(v: &[Arc<Entry>]) -> Vec<u64> {
        v.iter().map(|e| e.time.seq).collect()
    }

    fn apply_due(o: &mut Oplog, m: usize, now: Instant) -> Vec<u64> {
        let (batch, _) = o.due(m, now);
        if let Some(last) = batch.last() {
            o.set_applied(m, last.time);
        }
        seqs(&batch)
    }

    #[test]
    fn secondaries_apply_after_the_lag_and_the_majority_commits() {
        let t0 = Instant::now();
        let wall = DateTime::now();
        let mut o = Oplog::new(3, Some(0), 1);
        o.lag = Duration::from_millis(500);
        for i in 0..3 {
            o.push(ins(i), t0 + Duration::from_millis(100 * i as u64), wall);
        }
        assert_eq!(o.applied(0).seq, 3, "the primary has its own writes");
        assert_eq!(o.commit_point().seq, 0);
        let (none, next) = o.due(1, t0 + Duration::from_millis(499));
        assert!(none.is_empty());
        assert_eq!(next, Some(t0 + Duration::from_millis(500)));
        assert_eq!(
            apply_due(&mut o, 1, t0 + Duration::from_millis(650)),
            [1, 2]
        );
        assert_eq!(o.commit_point().seq, 2, "primary and one secondary");
        assert_eq!(o.count_applied(2), 2);
        assert_eq!(o.count_applied(3), 1);
        assert!(o.due(0, t0 + Duration::from_secs(9)).0.is_empty());
        assert_eq!(apply_due(&mut o, 2, t0 + Duration::from_secs(9)), [1, 2, 3]);
        o.trim();
        assert_eq!(o.len(), 1, "entry 3 is not on member 1 yet");
        assert_eq!(o.last().seq, 3);
    }

    #[test]
    fn held_back_writes_are_rolled_back_and_majority_ones_never() {
        let t0 = Instant::now();
        let wall = DateTime::now();
        let mut o = Oplog::new(3, Some(0), 1);
        o.hold_back = 5;
        for i in 0..10 {
            o.push(ins(i), t0, wall);
        }
        assert_eq!(o.limit(), 5);
        assert_eq!(apply_due(&mut o, 1, t0), [1, 2, 3, 4, 5]);
        // A w:majority write at 12 releases everything up to it.
        o.push(ins(10), t0, wall);
        let w = o.push(ins(11), t0, wall);
        o.require(w);
        assert_eq!(o.limit(), 12);
        assert_eq!(apply_due(&mut o, 2, t0).len(), 12);
        for i in 12..15 {
            o.push(ins(i), t0, wall);
        }
        // Three w:1 writes above the barrier: fewer than 5, all rolled back.
        let rolled = o.step_down();
        assert_eq!(seqs(&rolled), [13, 14, 15]);
        assert_eq!(o.primary(), None);
        assert_eq!(o.applied(0).seq, 12, "the old primary is back at the cut");
        assert_eq!(
            seqs(&o.pending(1, o.last().seq)),
            (6..=12).collect::<Vec<_>>()
        );
        // Sequence numbers are never reused after a rollback.
        o.elect(1, 2);
        let next = o.push(ins(99), t0, wall);
        assert_eq!((next, o.applied(1).seq, o.last().term), (16, 16, 2));
    }

    #[test]
    fn only_the_newest_n_above_the_barrier_are_lost() {
        let t0 = Instant::now();
        let wall = DateTime::now();
        let mut o = Oplog::new(3, Some(0), 1);
        o.hold_back = 50;
        for i in 0..1000 {
            o.push(ins(i), t0, wall);
            apply_due(&mut o, 1, t0);
            apply_due(&mut o, 2, t0);
            o.trim();
        }
        assert_eq!(o.len(), 50);
        let rolled = o.step_down();
        assert_eq!(seqs(&rolled), (951..=1000).collect::<Vec<_>>());
        assert!(o.is_empty());
        assert_eq!(o.last().seq, 950);
        // A catalog change is its own barrier.
        let mut o = Oplog::new(3, Some(0), 1);
        o.hold_back = 50;
        o.push(ins(0), t0, wall);
        o.push(
            Change::Catalog(Catalog::DropDatabase { db: "d".into() }),
            t0,
            wall,
        );
        assert_eq!(o.limit(), 2);
        assert!(o.step_down().is_empty());
    }

    #[test]
    fn a_five_member_majority_is_three() {
        let t0 = Instant::now();
        let mut o = Oplog::new(5, Some(0), 1);
        o.push(ins(0), t0, DateTime::now());
        apply_due(&mut o, 3, t0);
        assert_eq!(o.commit_point().seq, 0);
        apply_due(&mut o, 4, t0);
        assert_eq!(o.commit_point().seq, 1);
        assert_eq!(o.majority(), 3);
    }
}
