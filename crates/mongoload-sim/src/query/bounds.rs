//! Intervals of values on an indexed field, from a filter's predicates:
//! what an index scan visits.

use std::cmp::Ordering;

use bson::{Bson, Document};

use super::*;

/// One end of an interval on an indexed field.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    /// No limit on this side.
    Unbounded,
    /// The value itself is in the interval.
    Included(Bson),
    /// Values up to (or from) this one, not the value itself.
    Excluded(Bson),
}

/// A range of values of one field, for index planning.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// The low end, in [`compare`] order.
    pub lower: Bound,
    /// The high end, in [`compare`] order.
    pub upper: Bound,
}

impl Interval {
    /// The interval holding `v` only.
    pub fn point(v: Bson) -> Interval {
        Interval {
            lower: Bound::Included(v.clone()),
            upper: Bound::Included(v),
        }
    }

    /// Whether `v` lies in the interval.
    pub fn contains(&self, v: &Bson) -> bool {
        let above = match &self.lower {
            Bound::Unbounded => true,
            Bound::Included(l) => compare(v, l) != Ordering::Less,
            Bound::Excluded(l) => compare(v, l) == Ordering::Greater,
        };
        let below = match &self.upper {
            Bound::Unbounded => true,
            Bound::Included(u) => compare(v, u) != Ordering::Greater,
            Bound::Excluded(u) => compare(v, u) == Ordering::Less,
        };
        above && below
    }

    fn is_empty(&self) -> bool {
        match (&self.lower, &self.upper) {
            (Bound::Included(l), Bound::Included(u)) => compare(l, u) == Ordering::Greater,
            (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(u))
            | (Bound::Excluded(l), Bound::Included(u)) => compare(l, u) != Ordering::Less,
            _ => false,
        }
    }

    pub(super) fn intersect(&self, other: &Interval) -> Interval {
        Interval {
            lower: tighter_lower(&self.lower, &other.lower),
            upper: tighter_upper(&self.upper, &other.upper),
        }
    }
}

pub(super) fn tighter_lower(a: &Bound, b: &Bound) -> Bound {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x.clone(),
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            match compare(x, y) {
                Ordering::Greater => a.clone(),
                Ordering::Less => b.clone(),
                Ordering::Equal => {
                    if matches!(a, Bound::Excluded(_)) {
                        a.clone()
                    } else {
                        b.clone()
                    }
                }
            }
        }
    }
}

pub(super) fn tighter_upper(a: &Bound, b: &Bound) -> Bound {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x.clone(),
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            match compare(x, y) {
                Ordering::Less => a.clone(),
                Ordering::Greater => b.clone(),
                Ordering::Equal => {
                    if matches!(a, Bound::Excluded(_)) {
                        a.clone()
                    } else {
                        b.clone()
                    }
                }
            }
        }
    }
}

/// Orders lower bounds: unbounded first, then by value, included before excluded.
pub(super) fn cmp_lower(a: &Bound, b: &Bound) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            compare(x, y)
                .then_with(|| matches!(a, Bound::Excluded(_)).cmp(&matches!(b, Bound::Excluded(_))))
        }
    }
}

/// Whether an interval whose upper bound is `upper` overlaps or touches
/// one starting at `lower`, so the two can merge.
pub(super) fn reaches(upper: &Bound, lower: &Bound) -> bool {
    match (upper, lower) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Included(u), Bound::Included(l)) => compare(u, l) != Ordering::Less,
        (Bound::Included(u) | Bound::Excluded(u), Bound::Included(l) | Bound::Excluded(l)) => {
            compare(u, l) == Ordering::Greater
        }
    }
}

pub(super) fn looser_upper(a: &Bound, b: &Bound) -> Bound {
    match (a, b) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => Bound::Unbounded,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            match compare(x, y) {
                Ordering::Greater => a.clone(),
                Ordering::Less => b.clone(),
                Ordering::Equal => {
                    if matches!(a, Bound::Included(_)) {
                        a.clone()
                    } else {
                        b.clone()
                    }
                }
            }
        }
    }
}

/// Sorts intervals and merges overlapping ones, so an index scan over the
/// list visits each key once.
pub(super) fn normalize(mut list: Vec<Interval>) -> Vec<Interval> {
    list.retain(|i| !i.is_empty());
    list.sort_by(|a, b| cmp_lower(&a.lower, &b.lower));
    let mut out: Vec<Interval> = Vec::with_capacity(list.len());
    for i in list {
        if let Some(last) = out.last_mut() {
            if reaches(&last.upper, &i.lower) {
                last.upper = looser_upper(&last.upper, &i.upper);
                continue;
            }
        }
        out.push(i);
    }
    out
}

/// The smallest value of `v`'s type class (inclusive) and the smallest value
/// of the next class (exclusive): the range `$gt`/`$lt` stay within.
pub(super) fn class_bounds(v: &Bson) -> (Bound, Bound) {
    use bson::{spec::BinarySubtype, Binary, Regex, Timestamp};
    let first = |rank: u8| -> Bound {
        let v = match rank {
            0 => Bson::MinKey,
            1 => Bson::Undefined,
            2 => Bson::Null,
            3 => Bson::Double(f64::NAN),
            4 => Bson::String(String::new()),
            5 => Bson::Document(Document::new()),
            6 => Bson::Array(Vec::new()),
            7 => Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: Vec::new(),
            }),
            8 => Bson::ObjectId(bson::oid::ObjectId::from_bytes([0; 12])),
            9 => Bson::Boolean(false),
            10 => Bson::DateTime(bson::DateTime::from_millis(i64::MIN)),
            11 => Bson::Timestamp(Timestamp {
                time: 0,
                increment: 0,
            }),
            12 => Bson::RegularExpression(Regex {
                pattern: String::new(),
                options: String::new(),
            }),
            // DBPointers cannot be built; the next class starts below it.
            _ => return Bound::Unbounded,
        };
        Bound::Included(v)
    };
    let rank = type_rank(v);
    if rank == 0 || rank >= 12 {
        return (Bound::Unbounded, Bound::Unbounded);
    }
    let upper = match first(rank + 1) {
        Bound::Included(x) => Bound::Excluded(x),
        other => other,
    };
    (first(rank), upper)
}
