//! The acknowledged-write ledger: a compact set of the integer `_id`s whose
//! inserts the server acknowledged, minus those the workload deleted on
//! purpose, with the ids an audit found missing kept apart.
//!
//! Ids are the integers a workload draws its keys from (sequential for
//! inserts; a string key such as YCSB's `user…` maps from its integer), so
//! the set is a compressed bitmap (roaring): 10 million sequential ids take
//! about 1.3 MB whatever the deletes in between (BENCHMARKS.md).
//!
//! How an audit uses it, without ever reporting a document the workload
//! deleted itself:
//! - the workload calls [`Ledger::acknowledge`] once the server acknowledged
//!   an insert, and [`Ledger::forget`] *before* it sends a delete (a delete
//!   that then fails only means that id is no longer checked);
//! - the audit takes a batch with [`Ledger::batch`], releases the ledger,
//!   asks the server which of those ids exist, and hands the ids the server
//!   did not return to [`Ledger::confirm_missing`], which keeps only those
//!   still in the ledger (not forgotten meanwhile) and moves them to the
//!   missing set, so each lost document is reported once.
//!
//! Pure and single-threaded: the owner wraps it in a lock.

use std::ops::Range;

use roaring::RoaringTreemap;

/// The ids acknowledged and not deleted on purpose, and those found missing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Ledger {
    /// Acknowledged, not deleted on purpose, not (yet) found missing.
    present: RoaringTreemap,
    /// Acknowledged, not deleted on purpose, and absent from the server when
    /// an audit looked.
    missing: RoaringTreemap,
}

/// Where a verification pass over the ledger stands: the next id to look
/// at, or the end of the pass. A cursor stays valid while the ledger
/// changes: ids acknowledged behind it are checked on the next pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cursor {
    next: Option<u64>,
}

impl Default for Cursor {
    fn default() -> Self {
        Cursor::new()
    }
}

impl Cursor {
    /// A cursor at the start of a pass.
    pub fn new() -> Cursor {
        Cursor { next: Some(0) }
    }

    /// Whether the pass has gone through every id.
    pub fn is_done(&self) -> bool {
        self.next.is_none()
    }
}

impl Ledger {
    /// An empty ledger.
    pub fn new() -> Ledger {
        Ledger::default()
    }

    /// Records that the server acknowledged the insert of `id` (an id found
    /// missing before and inserted again counts as present again). Returns
    /// whether the ledger gained an id (not if it was present or missing).
    pub fn acknowledge(&mut self, id: u64) -> bool {
        self.present.insert(id) & !self.missing.remove(id)
    }

    /// [`Ledger::acknowledge`] for every id of `ids` (an acknowledged batch
    /// of sequential ids). Returns how many ids the ledger gained.
    pub fn acknowledge_range(&mut self, ids: Range<u64>) -> u64 {
        let added = self.present.insert_range(ids.clone());
        added - self.missing.remove_range(ids)
    }

    /// Stops checking every id (a delete the workload cannot name by
    /// `_id`). Returns how many were in the ledger.
    pub fn forget_all(&mut self) -> u64 {
        let n = self.present.len() + self.missing.len();
        self.present.clear();
        self.missing.clear();
        n
    }

    /// Stops checking `id`: call it *before* sending a delete of `id`.
    /// Returns whether `id` was in the ledger (present or missing).
    pub fn forget(&mut self, id: u64) -> bool {
        self.present.remove(id) | self.missing.remove(id)
    }

    /// [`Ledger::forget`] for every id of `ids` (an eviction of the oldest
    /// documents). Returns how many were in the ledger.
    pub fn forget_range(&mut self, ids: Range<u64>) -> u64 {
        self.present.remove_range(ids.clone()) + self.missing.remove_range(ids)
    }

    /// Whether `id` is acknowledged, not deleted and not found missing.
    pub fn contains(&self, id: u64) -> bool {
        self.present.contains(id)
    }

    /// Ids acknowledged, not deleted and not found missing.
    pub fn len(&self) -> u64 {
        self.present.len()
    }

    /// Whether [`Ledger::len`] is zero.
    pub fn is_empty(&self) -> bool {
        self.present.is_empty()
    }

    /// Ids found missing and not acknowledged or forgotten since.
    pub fn missing_len(&self) -> u64 {
        self.missing.len()
    }

    /// The missing ids in increasing order (e.g. `.take(20)` for a log line).
    pub fn missing(&self) -> impl Iterator<Item = u64> + '_ {
        self.missing.iter()
    }

    /// Appends to `out` up to `max` present ids from `cursor` on, in
    /// increasing order, and moves the cursor past them. Appends nothing
    /// once the pass is done (`cursor.is_done()`); start a new pass with a
    /// new [`Cursor`].
    pub fn batch(&self, cursor: &mut Cursor, max: usize, out: &mut Vec<u64>) {
        let Some(from) = cursor.next else { return };
        let mut it = self.present.iter();
        it.advance_to(from);
        let start = out.len();
        out.extend(it.take(max));
        cursor.next = match out[start..].last() {
            Some(&last) if out.len() - start == max => last.checked_add(1),
            _ => None,
        };
    }

    /// Takes the ids an audit did not find on the server: those still
    /// present (not forgotten, not already missing) move to the missing set
    /// and are returned in increasing order; the others are ignored.
    pub fn confirm_missing(&mut self, absent: impl IntoIterator<Item = u64>) -> Vec<u64> {
        let mut newly: Vec<u64> = absent
            .into_iter()
            .filter(|&id| self.present.remove(id))
            .collect();
        newly.sort_unstable();
        newly.dedup();
        for &id in &newly {
            self.missing.insert(id);
        }
        newly
    }

    /// Compresses runs of consecutive ids (roaring run containers); worth
    /// calling now and then on a ledger of sequential ids, e.g. after a pass.
    pub fn optimize(&mut self) {
        self.present.optimize();
        self.missing.optimize();
    }

    /// Approximate heap size in bytes (the serialized size, which tracks
    /// the containers' size), for a gauge.
    pub fn approx_bytes(&self) -> usize {
        self.present.serialized_size() + self.missing.serialized_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pass(l: &Ledger, max: usize) -> Vec<Vec<u64>> {
        let mut c = Cursor::new();
        let mut out = Vec::new();
        while !c.is_done() {
            let mut b = Vec::new();
            l.batch(&mut c, max, &mut b);
            out.push(b);
        }
        out
    }

    #[test]
    fn acknowledged_minus_forgotten() {
        let mut l = Ledger::new();
        assert_eq!(l.acknowledge_range(0..10), 10);
        assert!(l.acknowledge(20));
        assert!(!l.acknowledge(20), "already there");
        assert_eq!(l.acknowledge_range(5..12), 2);
        l.forget_range(10..12);
        assert!(l.forget(3));
        assert!(!l.forget(11));
        assert_eq!(l.forget_range(5..8), 3);
        assert_eq!(l.len(), 7);
        assert!(l.contains(20) && !l.contains(3) && !l.contains(6));
        assert_eq!(
            pass(&l, 100).concat(),
            vec![0, 1, 2, 4, 8, 9, 20],
            "a pass sees exactly the acknowledged, undeleted ids"
        );
    }

    #[test]
    fn batches_cover_a_pass_once_in_order() {
        let mut l = Ledger::new();
        l.acknowledge_range(0..1000);
        for id in (0..1000).step_by(7) {
            l.forget(id);
        }
        let batches = pass(&l, 64);
        assert!(batches.iter().all(|b| b.len() <= 64));
        let all = batches.concat();
        let want: Vec<u64> = (0..1000).filter(|i| i % 7 != 0).collect();
        assert_eq!(all, want);
        // An exact multiple of the batch size ends with an empty batch.
        let mut l = Ledger::new();
        l.acknowledge_range(0..128);
        assert_eq!(
            pass(&l, 64).iter().map(Vec::len).collect::<Vec<_>>(),
            [64, 64, 0]
        );
        assert_eq!(pass(&Ledger::new(), 10), vec![Vec::<u64>::new()]);
    }

    #[test]
    fn a_cursor_survives_changes_during_the_pass() {
        let mut l = Ledger::new();
        l.acknowledge_range(0..100);
        let mut c = Cursor::new();
        let mut b = Vec::new();
        l.batch(&mut c, 10, &mut b);
        assert_eq!(b, (0..10).collect::<Vec<_>>());
        // Deleted ahead of the cursor: skipped; acknowledged behind: next pass.
        l.forget_range(10..15);
        l.acknowledge(1_000);
        b.clear();
        l.batch(&mut c, 10, &mut b);
        assert_eq!(b, (15..25).collect::<Vec<_>>());
        let mut rest = Vec::new();
        while !c.is_done() {
            l.batch(&mut c, 10, &mut rest);
        }
        assert_eq!(rest.last(), Some(&1_000));
        // The largest id ends the pass without overflowing.
        let mut l = Ledger::new();
        l.acknowledge(u64::MAX);
        let mut c = Cursor::new();
        let mut b = Vec::new();
        l.batch(&mut c, 1, &mut b);
        assert_eq!((b, c.is_done()), (vec![u64::MAX], true));
    }

    #[test]
    fn missing_ids_are_reported_once_and_never_deleted_ones() {
        let mut l = Ledger::new();
        l.acknowledge_range(0..100);
        // The audit took 40..50 and the server returned only the even ones;
        // meanwhile the workload deleted 41 on purpose.
        l.forget(41);
        let absent = (40..50).filter(|i| i % 2 == 1);
        assert_eq!(l.confirm_missing(absent), vec![43, 45, 47, 49]);
        assert_eq!(l.missing_len(), 4);
        assert_eq!(l.len(), 95);
        assert!(!l.contains(43));
        // Reported once: a second audit of the same ids finds nothing new.
        assert!(l.confirm_missing([43, 45, 99_999]).is_empty());
        assert_eq!(l.missing().collect::<Vec<_>>(), vec![43, 45, 47, 49]);
        // Inserted again, or deleted on purpose: no longer missing (and the
        // ledger gains nothing: the id moved from missing to present).
        assert!(!l.acknowledge(43));
        l.forget(45);
        assert_eq!(l.missing().collect::<Vec<_>>(), vec![47, 49]);
        assert!(l.contains(43));
        assert_eq!(l.forget_all(), 98);
        assert!(l.is_empty() && l.missing_len() == 0);
    }

    #[test]
    fn sequential_ids_stay_small() {
        let mut l = Ledger::new();
        for id in 0..1_000_000u64 {
            l.acknowledge(id);
        }
        let plain = l.approx_bytes();
        assert!(plain < 200_000, "{plain} bytes for 1M sequential ids");
        l.optimize();
        assert!(
            l.approx_bytes() < 1_000,
            "{} bytes after optimize",
            l.approx_bytes()
        );
        assert_eq!(l.len(), 1_000_000);
    }
}
