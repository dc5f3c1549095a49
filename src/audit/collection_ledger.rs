//! One collection's ledger and the inserts in flight into it. A delete of
//! an id whose insert is in flight (sent, not yet acknowledged) can reach
//! the server after the insert and before its acknowledgement reaches the
//! workload; the book remembers that, so the acknowledgement does not add
//! an id the workload itself deleted. Pure and single-threaded: the owner
//! wraps it in a lock.

use super::ids::Ids;
use super::Ledger;

/// An insert in flight.
#[derive(Debug)]
struct InFlight {
    token: u64,
    ids: Ids,
    /// Its ids a delete named while it was in flight.
    deleted: Vec<u64>,
    /// A delete the audit could not read ran meanwhile: all of them.
    all_deleted: bool,
}

/// A collection's ledger and its inserts in flight.
#[derive(Debug, Default)]
pub struct Book {
    pub ledger: Ledger,
    inflight: Vec<InFlight>,
    next: u64,
}

impl Ids {
    /// Whether `id` is one of these.
    pub fn contains(&self, id: u64) -> bool {
        match self {
            Ids::One(i) => *i == id,
            Ids::Range(r) => r.contains(&id),
            Ids::List(l) => l.binary_search(&id).is_ok(),
        }
    }

    /// The ids in both (enumerating the smaller side).
    fn overlap(&self, other: &Ids) -> Vec<u64> {
        let (small, big) = if self.len() <= other.len() {
            (self, other)
        } else {
            (other, self)
        };
        match small {
            Ids::One(i) => big.contains(*i).then_some(*i).into_iter().collect(),
            Ids::List(l) => l.iter().copied().filter(|&i| big.contains(i)).collect(),
            Ids::Range(r) => match big {
                Ids::Range(b) => (r.start.max(b.start)..r.end.min(b.end)).collect(),
                _ => r.clone().filter(|&i| big.contains(i)).collect(),
            },
        }
    }
}

impl Book {
    /// An insert of `ids` is about to be sent; returns its token.
    pub fn sending(&mut self, ids: Ids) -> u64 {
        self.next += 1;
        self.inflight.push(InFlight {
            token: self.next,
            ids,
            deleted: Vec::new(),
            all_deleted: false,
        });
        self.next
    }

    /// A delete of `ids` is about to be sent: they leave the ledger, and
    /// inserts in flight will not add them. Returns how many left.
    pub fn deleting(&mut self, ids: &Ids) -> u64 {
        for f in &mut self.inflight {
            let both = f.ids.overlap(ids);
            f.deleted.extend(both);
        }
        match ids {
            Ids::One(id) => u64::from(self.ledger.forget(*id)),
            Ids::Range(r) => self.ledger.forget_range(r.clone()),
            Ids::List(l) => l.iter().map(|&id| u64::from(self.ledger.forget(id))).sum(),
        }
    }

    /// A delete that can take any document: nothing is checked any more.
    pub fn deleting_all(&mut self) -> u64 {
        for f in &mut self.inflight {
            f.all_deleted = true;
        }
        self.ledger.forget_all()
    }

    /// The insert `token` was acknowledged: its ids join the ledger, but
    /// those deleted meanwhile. Returns how many the ledger gained.
    pub fn acknowledged(&mut self, token: u64) -> u64 {
        let Some(f) = self.take(token) else { return 0 };
        if f.all_deleted {
            return 0;
        }
        match (f.ids, f.deleted.is_empty()) {
            (Ids::One(id), true) => u64::from(self.ledger.acknowledge(id)),
            (Ids::Range(r), true) => self.ledger.acknowledge_range(r),
            (ids, _) => {
                let mut n = 0;
                let mut add = |id| {
                    if !f.deleted.contains(&id) {
                        n += u64::from(self.ledger.acknowledge(id));
                    }
                };
                match ids {
                    Ids::One(id) => add(id),
                    Ids::Range(r) => r.for_each(add),
                    Ids::List(l) => l.into_iter().for_each(add),
                }
                n
            }
        }
    }

    /// The insert `token` failed: nothing to add.
    pub fn abandoned(&mut self, token: u64) {
        self.take(token);
    }

    fn take(&mut self, token: u64) -> Option<InFlight> {
        let i = self.inflight.iter().position(|f| f.token == token)?;
        Some(self.inflight.swap_remove(i))
    }

    /// Inserts in flight (for tests and sanity checks).
    pub fn in_flight(&self) -> usize {
        self.inflight.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_racing_its_insert_never_becomes_a_loss() {
        let mut b = Book::default();
        let t = b.sending(Ids::One(7));
        // The workload deletes 7 before 7's acknowledgement arrives.
        assert_eq!(b.deleting(&Ids::One(7)), 0);
        assert_eq!(b.acknowledged(t), 0);
        assert!(!b.ledger.contains(7), "deleted on purpose: not checked");
        // A batch partly evicted while in flight.
        let t = b.sending(Ids::Range(10..20));
        b.deleting(&Ids::Range(0..12));
        assert_eq!(b.acknowledged(t), 8);
        assert!(!b.ledger.contains(11) && b.ledger.contains(12));
        // Deleted after the acknowledgement: as the ledger does.
        assert_eq!(b.deleting(&Ids::List(vec![12, 13])), 2);
        assert_eq!(b.ledger.len(), 6);
        // A failed insert leaves nothing behind; nor does an unknown token.
        let t = b.sending(Ids::List(vec![30, 31]));
        b.abandoned(t);
        assert_eq!(b.acknowledged(t), 0);
        assert_eq!(b.in_flight(), 0);
        // A delete the audit cannot read: in-flight inserts add nothing.
        let t = b.sending(Ids::One(40));
        assert_eq!(b.deleting_all(), 6);
        assert_eq!(b.acknowledged(t), 0);
        assert!(b.ledger.is_empty());
    }

    #[test]
    fn overlaps_of_every_shape() {
        assert_eq!(
            Ids::Range(0..10).overlap(&Ids::Range(5..20)),
            (5..10).collect::<Vec<_>>()
        );
        assert_eq!(Ids::Range(0..10).overlap(&Ids::One(3)), vec![3]);
        assert_eq!(
            Ids::List(vec![1, 5, 9]).overlap(&Ids::Range(4..10)),
            vec![5, 9]
        );
        assert!(Ids::Range(0..10).overlap(&Ids::Range(10..20)).is_empty());
        assert!(Ids::List(vec![2, 4]).contains(4) && !Ids::List(vec![2, 4]).contains(3));
    }
}
