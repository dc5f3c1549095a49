//! Insert keys: the one place every workload kind takes the `_id` of a new
//! document from, so that the members of a cluster insert disjoint keys.
//! Member `i` of `N` takes the keys `≡ i (mod N)`, in order (interleaved:
//! `row + i` for rows `0, N, 2N, …` from the first free row), while reads
//! and updates go on over the whole key space below [`Keys::bound`]. A
//! lone daemon is member 0 of 1: its keys are 0, 1, 2, … as always.

use std::sync::atomic::{AtomicU64, Ordering};

use super::Member;

/// The insert keys of one collection, shared by a workload's workers.
#[derive(Debug)]
pub struct Keys {
    /// The next row: a multiple of `size`; this member's next key is
    /// `row + index`. Every key below it was taken (by some member).
    next: AtomicU64,
    /// The documents the prepare step loads (`_id` 0 .. initial).
    initial: u64,
    index: AtomicU64,
    size: AtomicU64,
}

/// `n` keys of one member: `first`, `first + stride`, …
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRun {
    pub first: u64,
    pub stride: u64,
    pub len: u64,
}

impl KeyRun {
    /// The keys in order.
    pub fn iter(self) -> impl Iterator<Item = u64> {
        (0..self.len).map(move |j| self.first + j * self.stride)
    }
}

/// `x` rounded up to a multiple of `n` (n ≥ 1).
fn align_up(x: u64, n: u64) -> u64 {
    x.div_ceil(n).saturating_mul(n)
}

impl Keys {
    /// Keys above `initial` loaded documents, for a lone daemon until
    /// [`Keys::join`] says otherwise.
    pub fn new(initial: u64) -> Keys {
        Keys {
            next: AtomicU64::new(initial),
            initial,
            index: AtomicU64::new(0),
            size: AtomicU64::new(1),
        }
    }

    /// Makes these the keys of `member`; called once, before any insert.
    /// The first row is the loaded documents rounded up to whole rows, so
    /// that every member's keys stay `≡ index (mod size)` after a restart.
    pub fn join(&self, member: Member) {
        let size = u64::from(member.size.max(1));
        self.index
            .store(u64::from(member.index) % size, Ordering::Relaxed);
        self.size.store(size, Ordering::Relaxed);
        self.next
            .store(align_up(self.initial, size), Ordering::Relaxed);
    }

    /// The member these keys belong to.
    pub fn member(&self) -> Member {
        Member {
            index: self.index.load(Ordering::Relaxed) as u32,
            size: self.size.load(Ordering::Relaxed) as u32,
        }
    }

    /// The distance between two keys of this member (the cluster's size).
    pub fn stride(&self) -> u64 {
        self.size.load(Ordering::Relaxed)
    }

    /// The key of this member's next insert.
    pub fn next(&self) -> u64 {
        let size = self.stride();
        self.next.fetch_add(size, Ordering::Relaxed) + self.index.load(Ordering::Relaxed)
    }

    /// The keys of `n` inserts of one batch.
    pub fn next_run(&self, n: u64) -> KeyRun {
        let size = self.stride();
        let row = self.next.fetch_add(n * size, Ordering::Relaxed);
        KeyRun {
            first: row + self.index.load(Ordering::Relaxed),
            stride: size,
            len: n,
        }
    }

    /// The key space reads and updates draw from: every key below it has
    /// been taken by some member (this member's view: the others insert
    /// at the same pace).
    pub fn bound(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// This member's part of a bound of `max_docs` documents in all: the
    /// members' parts add up to `max_docs`.
    pub fn share_of(&self, max_docs: u64) -> u64 {
        self.member().split(max_docs)
    }

    /// Under a bound of `max_docs` in all, the key the insert of `key`
    /// evicts: this member's own key [`Keys::share_of`] inserts back, so
    /// each member holds its part whatever the pace of the others. `None`
    /// while there is none that far back.
    pub fn evicted(&self, key: u64, max_docs: u64) -> Option<u64> {
        key.checked_sub(self.reach(max_docs))
    }

    /// How far back in keys an insert evicts under a bound of `max_docs`
    /// in all: this member's part, in keys of every member.
    pub fn reach(&self, max_docs: u64) -> u64 {
        self.share_of(max_docs) * self.stride()
    }

    /// Whether a key taken since may have evicted `key` under a bound of
    /// `max_docs`: the counter has passed `key` by more than
    /// [`Keys::reach`].
    pub fn passed(&self, key: u64, max_docs: u64) -> bool {
        self.bound() > key.saturating_add(self.reach(max_docs))
    }

    /// The keys evicted by the inserts of `run` under a bound of
    /// `max_docs`: `[from, to)` of this member's keys (every `stride`-th,
    /// `≡ index (mod stride)`); `None` while there is none.
    pub fn evicted_range(&self, run: KeyRun, max_docs: u64) -> Option<(u64, u64)> {
        let back = self.reach(max_docs);
        let end = run.first + run.len * run.stride;
        let to = end.checked_sub(back).filter(|&t| t > 0)?;
        Some((run.first.saturating_sub(back), to))
    }

    /// Raises the next key above `top`, the highest key found in the
    /// collection (a restart: inserts go on above every member's keys).
    pub fn raise_past(&self, top: u64) {
        let row = align_up(top.saturating_add(1), self.stride());
        self.next.fetch_max(row, Ordering::Relaxed);
    }

    /// Raises the next key past a collection of `count` documents whose
    /// keys are never deleted and cannot be sorted (YCSB's hashed keys):
    /// above the loaded ones, as many rows as documents were inserted, so
    /// even if one member inserted them all its next key is free.
    pub fn raise_to_count(&self, count: u64) {
        let size = self.stride();
        let inserted = count.saturating_sub(self.initial);
        let row = align_up(self.initial, size).saturating_add(inserted.saturating_mul(size));
        self.next.fetch_max(row.max(count), Ordering::Relaxed);
    }

    /// How many keys below `n` are this member's.
    pub fn owned_below(&self, n: u64) -> u64 {
        let index = self.index.load(Ordering::Relaxed);
        n.saturating_sub(index).div_ceil(self.stride())
    }

    /// This member's `k`-th key (0-based).
    pub fn owned(&self, k: u64) -> u64 {
        k * self.stride() + self.index.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn member(index: u32, size: u32) -> Member {
        Member { index, size }
    }

    #[test]
    fn a_lone_daemon_counts_up_from_the_loaded_documents() {
        let k = Keys::new(10);
        assert_eq!((k.next(), k.next()), (10, 11));
        assert_eq!(k.bound(), 12);
        assert_eq!(k.next_run(3).iter().collect::<Vec<_>>(), vec![12, 13, 14]);
        assert_eq!(k.evicted(14, 5), Some(9));
        assert_eq!(k.evicted(4, 5), None);
        // As the insert benchmark evicts: [first − max, end − max).
        let run = KeyRun {
            first: 100,
            stride: 1,
            len: 10,
        };
        assert_eq!(k.evicted_range(run, 100), Some((0, 10)));
        assert_eq!(k.evicted_range(run, 110), None);
        assert_eq!(k.evicted_range(run, 105), Some((0, 5)));
        k.raise_past(41);
        assert_eq!(k.next(), 42);
        k.raise_to_count(100);
        assert_eq!(k.next(), 100);
    }

    #[test]
    fn members_take_disjoint_keys_that_fill_the_space_together() {
        let members: Vec<Keys> = (0..3)
            .map(|i| {
                let k = Keys::new(10);
                k.join(member(i, 3));
                k
            })
            .collect();
        let mut seen = HashSet::new();
        for _ in 0..50 {
            for k in &members {
                assert!(seen.insert(k.next()));
            }
            for k in &members {
                for key in k.next_run(4).iter() {
                    assert!(seen.insert(key));
                }
            }
        }
        // From row 12 (10 loaded, rounded up to whole rows of 3), no gaps.
        assert_eq!(seen.len(), 750);
        assert_eq!(*seen.iter().min().unwrap(), 12);
        assert_eq!(*seen.iter().max().unwrap(), 12 + 749);
        for k in &members {
            assert_eq!(k.bound(), 12 + 750);
        }
    }

    #[test]
    fn a_restarted_member_goes_on_above_every_key_and_in_its_own_residue() {
        let k = Keys::new(10);
        k.join(member(2, 3));
        // Another member's key 40 is the highest there.
        k.raise_past(40);
        let key = k.next();
        assert!(key > 40 && key % 3 == 2, "{key}");
        // Counted keys: 10 loaded and 30 inserted, by whoever.
        let k = Keys::new(10);
        k.join(member(1, 3));
        k.raise_to_count(40);
        let key = k.next();
        assert!(key >= 12 + 30 * 3 && key % 3 == 1, "{key}");
    }

    #[test]
    fn each_member_evicts_its_own_keys_and_the_parts_add_up_to_the_bound() {
        let members: Vec<Keys> = (0..3)
            .map(|i| {
                let k = Keys::new(0);
                k.join(member(i, 3));
                k
            })
            .collect();
        let max_docs = 100;
        assert_eq!(
            members.iter().map(|k| k.share_of(max_docs)).sum::<u64>(),
            100
        );
        // Member 0 runs far ahead of the others: each still holds its part.
        let mut live: HashSet<u64> = HashSet::new();
        for (i, k) in members.iter().enumerate() {
            for _ in 0..(1000 * (i as u64 + 1)) {
                let key = k.next();
                live.insert(key);
                if let Some(old) = k.evicted(key, max_docs) {
                    assert_eq!(old % 3, i as u64);
                    assert!(live.remove(&old), "{old} evicted twice or never inserted");
                }
            }
        }
        assert_eq!(live.len(), 100);
        // A batch evicts a range of the member's own keys.
        let k = &members[1];
        let run = k.next_run(10);
        let (from, to) = k.evicted_range(run, max_docs).unwrap();
        assert_eq!(to - from, 30);
        assert_eq!(from, run.first - k.share_of(max_docs) * 3);
    }

    #[test]
    fn owned_keys_are_the_members_residue() {
        let k = Keys::new(0);
        k.join(member(1, 3));
        assert_eq!(k.owned_below(10), 3);
        assert_eq!(
            (0..3).map(|j| k.owned(j)).collect::<Vec<_>>(),
            vec![1, 4, 7]
        );
        assert_eq!(k.owned_below(1), 0);
        assert_eq!(k.owned_below(2), 1);
    }
}
