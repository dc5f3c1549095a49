//! What a request does to the audit's ledger, read off its action: the
//! `_id`s an insert adds once acknowledged, the `_id`s a delete removes on
//! purpose (from its filter: a value, `$in`, or a range), with the
//! workload's mapping between document `_id`s and the ledger's integer ids
//! ([`AuditKeys`]). Pure: tested on plain values.

use std::ops::Range;

use mongodb::bson::{Bson, Document};

use crate::workload::audit_keys::int_id;
use crate::workload::{Action, AuditKeys};

/// A set of ledger ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ids {
    One(u64),
    /// Consecutive ids (a batch of sequential inserts, an eviction).
    Range(Range<u64>),
    List(Vec<u64>),
}

impl Ids {
    /// How many ids.
    pub fn len(&self) -> u64 {
        match self {
            Ids::One(_) => 1,
            Ids::Range(r) => r.end.saturating_sub(r.start),
            Ids::List(l) => l.len() as u64,
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Ids in increasing order of arrival: a range when consecutive.
    fn from_list(mut ids: Vec<u64>) -> Option<Ids> {
        match ids.len() {
            0 => None,
            1 => Some(Ids::One(ids[0])),
            n => {
                let first = ids[0];
                if ids
                    .iter()
                    .enumerate()
                    .all(|(i, &id)| id == first + i as u64)
                {
                    Some(Ids::Range(first..first + n as u64))
                } else {
                    ids.sort_unstable();
                    ids.dedup();
                    Some(Ids::List(ids))
                }
            }
        }
    }
}

/// What a request does to the documents the audit follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// Nothing (a read, an update).
    None,
    /// Inserts these ids into collection `collection` (index into the
    /// workload's collections): add them once acknowledged.
    Insert { collection: usize, ids: Ids },
    /// Deletes (at most) these ids: stop checking them before sending.
    Delete { collection: usize, ids: Ids },
    /// Deletes documents the filter does not name by `_id`: stop checking
    /// the whole collection (configs that audit never make these).
    DeleteUnknown { collection: usize },
}

/// Whether a request writes (inserts, updates, replaces or deletes, or an
/// aggregation ending in `$out` or `$merge`, which `Kind::writes` counts
/// too): its outcome feeds the write-outage clock.
pub(crate) fn is_write(action: &Action) -> bool {
    match action {
        Action::InsertOne { .. }
        | Action::InsertMany { .. }
        | Action::UpdateOne { .. }
        | Action::UpdateMany { .. }
        | Action::DeleteOne { .. }
        | Action::DeleteMany { .. } => true,
        Action::Aggregate { pipeline, .. } => pipeline
            .iter()
            .any(|stage| stage.contains_key("$out") || stage.contains_key("$merge")),
        Action::FindOne { .. }
        | Action::Find { .. }
        | Action::Count { .. }
        | Action::Distinct { .. } => false,
    }
}

/// The effect of `action` on the ledger, with `keys` mapping `_id`s.
pub(crate) fn effect(action: &Action, keys: &dyn AuditKeys) -> Effect {
    match action {
        Action::InsertOne { collection, doc } => inserted(*collection, [doc], keys),
        Action::InsertMany { collection, docs } => inserted(*collection, docs.iter(), keys),
        Action::DeleteOne { collection, filter } | Action::DeleteMany { collection, filter } => {
            match deleted(filter, keys) {
                Some(Some(ids)) => Effect::Delete {
                    collection: *collection,
                    ids,
                },
                Some(None) => Effect::None,
                None => Effect::DeleteUnknown {
                    collection: *collection,
                },
            }
        }
        _ => Effect::None,
    }
}

fn inserted<'a>(
    collection: usize,
    docs: impl IntoIterator<Item = &'a Document>,
    keys: &dyn AuditKeys,
) -> Effect {
    let ids: Vec<u64> = docs
        .into_iter()
        .filter_map(|d| keys.ledger_id(d.get("_id")?))
        .collect();
    match Ids::from_list(ids) {
        Some(ids) => Effect::Insert { collection, ids },
        None => Effect::None,
    }
}

/// The ids a delete filter can delete: `Some(Some(ids))`, `Some(None)` when
/// it names `_id`s the audit does not follow, `None` when it is not a
/// filter on `_id` the audit can read (any document could go).
fn deleted(filter: &Document, keys: &dyn AuditKeys) -> Option<Option<Ids>> {
    // Other keys only narrow what the `_id` condition selects.
    let cond = filter.get("_id")?;
    let ops = match cond {
        Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => d,
        value => return Some(keys.ledger_id(value).map(Ids::One)),
    };
    let mut low = 0u64;
    let mut high = u64::MAX;
    let mut list: Option<Vec<u64>> = None;
    for (op, v) in ops {
        match op.as_str() {
            "$eq" => return Some(keys.ledger_id(v).map(Ids::One)),
            "$in" => {
                let Bson::Array(items) = v else { return None };
                list = Some(items.iter().filter_map(|i| keys.ledger_id(i)).collect());
            }
            "$gte" | "$gt" | "$lt" | "$lte" if keys.ordered() => {
                // A bound that is not an integer (a negative one, a string)
                // makes the range unreadable.
                let b = int_id(v).or(match v {
                    Bson::Int64(i) if *i < 0 => Some(0),
                    Bson::Int32(i) if *i < 0 => Some(0),
                    _ => None,
                })?;
                match op.as_str() {
                    "$gte" => low = low.max(b),
                    "$gt" => low = low.max(b.saturating_add(1)),
                    "$lt" => high = high.min(b),
                    _ => high = high.min(b.saturating_add(1)),
                }
            }
            _ => return None,
        }
    }
    if let Some(l) = list {
        return Some(Ids::from_list(
            l.into_iter().filter(|&i| i >= low && i < high).collect(),
        ));
    }
    Some((low < high).then_some(Ids::Range(low..high)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::IntKeys;
    use mongodb::bson::doc;

    fn delete(filter: Document) -> Effect {
        effect(
            &Action::DeleteMany {
                collection: 2,
                filter,
            },
            &IntKeys,
        )
    }

    #[test]
    fn inserts_add_their_ids_as_a_range_when_sequential() {
        let one = Action::InsertOne {
            collection: 0,
            doc: doc! {"_id": 7i64, "x": 1},
        };
        assert_eq!(
            effect(&one, &IntKeys),
            Effect::Insert {
                collection: 0,
                ids: Ids::One(7)
            }
        );
        let batch = Action::InsertMany {
            collection: 1,
            docs: (100..200i64).map(|i| doc! {"_id": i}).collect(),
        };
        assert_eq!(
            effect(&batch, &IntKeys),
            Effect::Insert {
                collection: 1,
                ids: Ids::Range(100..200)
            }
        );
        let scattered = Action::InsertMany {
            collection: 1,
            docs: vec![doc! {"_id": 5i32}, doc! {"_id": 3i64}, doc! {"_id": "x"}],
        };
        assert_eq!(
            effect(&scattered, &IntKeys),
            Effect::Insert {
                collection: 1,
                ids: Ids::List(vec![3, 5])
            }
        );
        let foreign = Action::InsertOne {
            collection: 0,
            doc: doc! {"_id": "user1"},
        };
        assert_eq!(effect(&foreign, &IntKeys), Effect::None);
    }

    #[test]
    fn deletes_name_what_they_delete() {
        let d = |ids| Effect::Delete { collection: 2, ids };
        assert_eq!(delete(doc! {"_id": 5i64}), d(Ids::One(5)));
        assert_eq!(delete(doc! {"_id": {"$eq": 6i32}}), d(Ids::One(6)));
        // The insert benchmark's eviction and a bounded insert's.
        assert_eq!(
            delete(doc! {"_id": {"$gte": 0i64, "$lt": 100i64}}),
            d(Ids::Range(0..100))
        );
        assert_eq!(
            delete(doc! {"_id": {"$gt": 9i64, "$lte": 20i64}}),
            d(Ids::Range(10..21))
        );
        assert_eq!(delete(doc! {"_id": {"$lt": 50i64}}), d(Ids::Range(0..50)));
        assert_eq!(
            delete(doc! {"_id": {"$gte": -5i64, "$lt": 3i64}}),
            d(Ids::Range(0..3))
        );
        assert_eq!(
            delete(doc! {"_id": {"$in": [4i64, 2i64, 9i64]}, "k": 1}),
            d(Ids::List(vec![2, 4, 9]))
        );
        assert_eq!(delete(doc! {"_id": {"$lt": 0i64}}), Effect::None);
        assert_eq!(delete(doc! {"_id": "not ours"}), Effect::None);
        for unknown in [
            doc! {"k": 5},
            doc! {},
            doc! {"_id": {"$ne": 5i64}},
            doc! {"_id": {"$gte": "a"}},
        ] {
            assert_eq!(
                delete(unknown.clone()),
                Effect::DeleteUnknown { collection: 2 },
                "{unknown}"
            );
        }
    }

    #[test]
    fn writes_are_told_from_reads() {
        assert!(is_write(&Action::UpdateOne {
            collection: 0,
            filter: doc! {},
            update: doc! {}
        }));
        assert!(!is_write(&Action::FindOne {
            collection: 0,
            filter: doc! {}
        }));
        // An aggregation writes when it ends in $out or $merge.
        let aggregate = |last: Document| Action::Aggregate {
            collection: 0,
            pipeline: vec![doc! {"$match": {}}, last],
        };
        assert!(is_write(&aggregate(doc! {"$out": "copy"})));
        assert!(is_write(&aggregate(
            doc! {"$merge": {"into": "copy", "whenMatched": "replace"}}
        )));
        assert!(!is_write(&aggregate(doc! {"$group": {"_id": "$k"}})));
        assert_eq!(
            effect(
                &Action::UpdateOne {
                    collection: 0,
                    filter: doc! {"_id": 1i64},
                    update: doc! {}
                },
                &IntKeys
            ),
            Effect::None
        );
    }
}
