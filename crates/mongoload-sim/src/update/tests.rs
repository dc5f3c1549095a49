//! Tests of update operators on plain values.

use super::*;
use bson::doc;

fn upd(u: Document) -> Update {
    Update::parse(&u).expect("update parses")
}

/// Applies `u` to `d` and returns (changed, result).
fn run(u: Document, mut d: Document) -> (bool, Document) {
    let changed = upd(u).apply(&mut d, false).expect("update applies");
    (changed, d)
}

fn err(u: Document, mut d: Document) -> QueryError {
    let before = d.clone();
    let e = match Update::parse(&u) {
        Ok(parsed) => parsed.apply(&mut d, false).unwrap_err(),
        Err(e) => e,
    };
    assert_eq!(d, before, "a failed update leaves the document alone");
    e
}

#[test]
fn set_creates_intermediate_documents() {
    let (changed, d) = run(doc! {"$set": {"a.b.c": 5, "x": "y"}}, doc! {"_id": 1});
    assert!(changed);
    assert_eq!(d, doc! {"_id": 1, "a": {"b": {"c": 5}}, "x": "y"});
    let (_, d) = run(doc! {"$set": {"a.c": 6}}, doc! {"_id": 1, "a": {"b": 5}});
    assert_eq!(d, doc! {"_id": 1, "a": {"b": 5, "c": 6}});
    let (_, d) = run(
        doc! {"$set": {"l.1": 9, "m.3": 1}},
        doc! {"_id": 1, "l": [1, 2], "m": []},
    );
    assert_eq!(d, doc! {"_id": 1, "l": [1, 9], "m": [null, null, null, 1]});
}

#[test]
fn set_to_the_same_value_is_not_a_modification() {
    let (changed, _) = run(doc! {"$set": {"a": 5}}, doc! {"_id": 1, "a": 5});
    assert!(!changed);
    let (changed, _) = run(
        doc! {"$set": {"a.b": [1, 2]}},
        doc! {"_id": 1, "a": {"b": [1, 2]}},
    );
    assert!(!changed);
    // A change of type is a change, even for an equal number.
    let (changed, d) = run(doc! {"$set": {"a": 5.0}}, doc! {"_id": 1, "a": 5});
    assert!(changed);
    assert_eq!(d.get("a"), Some(&Bson::Double(5.0)));
    // So is a change of field order in an embedded document.
    let (changed, _) = run(
        doc! {"$set": {"a": {"y": 1, "x": 2}}},
        doc! {"a": {"x": 2, "y": 1}},
    );
    assert!(changed);
}

#[test]
fn inc_keeps_integer_types_and_widens() {
    let (changed, d) = run(
        doc! {"$inc": {"a": 1, "b": 2.5, "c": 1i64, "n": 3}},
        doc! {"_id": 1, "a": 1, "b": 1, "c": 1},
    );
    assert!(changed);
    assert_eq!(d, doc! {"_id": 1, "a": 2, "b": 3.5, "c": 2i64, "n": 3});
    let (_, d) = run(doc! {"$inc": {"a": 1}}, doc! {"a": i32::MAX});
    assert_eq!(d.get("a"), Some(&Bson::Int64(i64::from(i32::MAX) + 1)));
    let (changed, _) = run(doc! {"$inc": {"a": 0}}, doc! {"a": 7});
    assert!(!changed);
    let (_, d) = run(doc! {"$mul": {"a": 3, "z": 2.0}}, doc! {"a": 4});
    assert_eq!(d, doc! {"a": 12, "z": 0.0});
    assert_eq!(err(doc! {"$inc": {"a": 1}}, doc! {"a": i64::MAX}).code, 2);
}

#[test]
fn inc_type_errors() {
    let e = err(doc! {"$inc": {"a": 1}}, doc! {"_id": 7, "a": "x"});
    assert_eq!((e.code, e.code_name), (14, "TypeMismatch"));
    assert!(
        e.message.contains("non-numeric type string"),
        "{}",
        e.message
    );
    let e = err(doc! {"$inc": {"a": "x"}}, doc! {"_id": 7});
    assert_eq!(e.code, 14);
    assert!(e
        .message
        .starts_with("Cannot increment with non-numeric argument"));
    // The whole update fails: the earlier $set is not kept.
    let e = err(
        doc! {"$set": {"b": 1}, "$inc": {"a": 1}},
        doc! {"_id": 7, "a": "x"},
    );
    assert_eq!(e.code, 14);
}

#[test]
fn unset_and_set_on_insert() {
    let (changed, d) = run(
        doc! {"$unset": {"a": "", "b.c": 1}},
        doc! {"_id": 1, "a": 1, "b": {"c": 1, "d": 2}},
    );
    assert!(changed);
    assert_eq!(d, doc! {"_id": 1, "b": {"d": 2}});
    let (changed, _) = run(
        doc! {"$unset": {"zz": 1, "b.x.y": 1}},
        doc! {"_id": 1, "b": 1},
    );
    assert!(!changed);
    let (_, d) = run(doc! {"$unset": {"l.0": 1}}, doc! {"l": [1, 2]});
    assert_eq!(d, doc! {"l": [null, 2]});
    let u = upd(doc! {"$set": {"a": 1}, "$setOnInsert": {"created": true}});
    let mut d = doc! {"_id": 1};
    assert!(u.apply(&mut d, false).unwrap());
    assert_eq!(d, doc! {"_id": 1, "a": 1});
    let mut d = doc! {"_id": 1};
    assert!(u.apply(&mut d, true).unwrap());
    assert_eq!(d, doc! {"_id": 1, "a": 1, "created": true});
    let only = upd(doc! {"$setOnInsert": {"created": true}});
    let mut d = doc! {"_id": 1};
    assert!(!only.apply(&mut d, false).unwrap());
}

#[test]
fn min_max_push_add_to_set() {
    let (changed, d) = run(
        doc! {"$min": {"a": 3, "b": 10, "c": 1}},
        doc! {"a": 5, "b": 5},
    );
    assert!(changed);
    assert_eq!(d, doc! {"a": 3, "b": 5, "c": 1});
    let (changed, _) = run(doc! {"$max": {"a": 5.0}}, doc! {"a": 5});
    assert!(!changed);
    let (_, d) = run(
        doc! {"$push": {"l": 3, "m": {"$each": [1, 2]}}},
        doc! {"l": [1]},
    );
    assert_eq!(d, doc! {"l": [1, 3], "m": [1, 2]});
    let (changed, d) = run(
        doc! {"$addToSet": {"l": {"$each": [1, 2, 2]}}},
        doc! {"l": [1]},
    );
    assert!(changed);
    assert_eq!(d, doc! {"l": [1, 2]});
    let (changed, _) = run(doc! {"$addToSet": {"l": 1}}, doc! {"l": [1]});
    assert!(!changed);
    assert_eq!(err(doc! {"$push": {"a": 1}}, doc! {"a": 1}).code, 2);
}

#[test]
fn replacement_keeps_id_and_detects_changes() {
    let u = upd(doc! {"b": 2, "a": 1});
    assert!(u.is_replacement());
    let mut d = doc! {"x": 1, "_id": 9};
    assert!(u.apply(&mut d, false).unwrap());
    // Field order matters (Document's == ignores it): `_id` leads.
    assert!(identical_docs(&d, &doc! {"_id": 9, "b": 2, "a": 1}), "{d}");
    assert!(!u.apply(&mut d, false).unwrap());
    let same_id = upd(doc! {"_id": 9, "b": 2, "a": 1});
    assert!(!same_id.apply(&mut d, false).unwrap());
    let e = err(doc! {"_id": 10, "b": 2}, doc! {"_id": 9});
    assert_eq!((e.code, e.code_name), (66, "ImmutableField"));
    assert!(upd(doc! {}).is_replacement());
    assert!(!upd(doc! {"$set": {"a": 1}}).is_replacement());
}

#[test]
fn changing_id_is_refused() {
    let e = err(doc! {"$set": {"_id": 2}}, doc! {"_id": 1});
    assert_eq!(e.code, 66);
    assert_eq!(err(doc! {"$unset": {"_id": 1}}, doc! {"_id": 1}).code, 66);
    assert_eq!(err(doc! {"$inc": {"_id": 1}}, doc! {"_id": 1}).code, 66);
    // Setting the same _id is fine, and an upsert may set a missing one.
    let (changed, _) = run(doc! {"$set": {"_id": 1}}, doc! {"_id": 1});
    assert!(!changed);
    let mut d = doc! {};
    assert!(upd(doc! {"$set": {"_id": 5}}).apply(&mut d, true).unwrap());
    assert_eq!(d, doc! {"_id": 5});
}

#[test]
fn parse_errors() {
    let e = Update::parse(&doc! {"$set": {"a": 1}, "b": 2}).unwrap_err();
    assert_eq!((e.code, e.code_name), (9, "FailedToParse"));
    assert!(e.message.starts_with("Unknown modifier: b"));
    assert_eq!(
        Update::parse(&doc! {"b": 2, "$set": {"a": 1}})
            .unwrap_err()
            .code,
        9
    );
    let e = Update::parse(&doc! {"$foo": {"a": 1}}).unwrap_err();
    assert_eq!(e.code, 9);
    assert!(e.message.starts_with("Unknown modifier: $foo"));
    assert_eq!(Update::parse(&doc! {"$set": 5}).unwrap_err().code, 9);
    let e = Update::parse(&doc! {"$set": {"a": 1}, "$inc": {"a": 1}}).unwrap_err();
    assert_eq!((e.code, e.code_name), (40, "ConflictingUpdateOperators"));
    assert_eq!(
        Update::parse(&doc! {"$set": {"a.b": 1, "a": 1}})
            .unwrap_err()
            .code,
        40
    );
    assert!(Update::parse(&doc! {"$set": {"a.b": 1, "a.c": 1}}).is_ok());
    assert_eq!(Update::parse(&doc! {"$set": {"": 1}}).unwrap_err().code, 56);
    assert_eq!(
        Update::parse(&doc! {"$set": {"a..b": 1}}).unwrap_err().code,
        56
    );
    let e = err(doc! {"$set": {"a.b": 1}}, doc! {"a": 5});
    assert_eq!((e.code, e.code_name), (28, "PathNotViable"));
    assert_eq!(
        err(doc! {"$set": {"l.99999999999": 1}}, doc! {"l": []}).code,
        2
    );
    assert_eq!(
        err(doc! {"$set": {"l.99999999999.x": 1}}, doc! {"l": []}).code,
        2
    );
}

#[test]
fn upsert_seed_takes_equalities() {
    let seed = upsert_seed(&doc! {
        "a": 1,
        "b.c": 2,
        "d": {"$eq": "x"},
        "e": {"$gt": 5},
        "f": {"$in": [7]},
        "g": {"$in": [7, 8]},
        "$and": [{"h": true}],
        "$or": [{"i": 1}],
        "s": {"t": 1},
    });
    assert_eq!(
        seed,
        doc! {"a": 1, "b": {"c": 2}, "d": "x", "f": 7, "s": {"t": 1}, "h": true}
    );
    let mut d = upsert_seed(&doc! {"_id": 3});
    assert!(upd(doc! {"$inc": {"n": 1}}).apply(&mut d, true).unwrap());
    assert_eq!(d, doc! {"_id": 3, "n": 1});
}

#[test]
fn current_date_sets_a_date_or_a_timestamp_as_asked() {
    let (changed, d) = run(
        doc! {"$currentDate": {"d": true, "e": {"$type": "date"}, "t": {"$type": "timestamp"}}},
        doc! {"_id": 1},
    );
    assert!(changed);
    assert!(matches!(d.get("d"), Some(Bson::DateTime(_))), "{d}");
    assert!(matches!(d.get("e"), Some(Bson::DateTime(_))), "{d}");
    let Some(Bson::Timestamp(t)) = d.get("t") else {
        panic!("not a Timestamp: {d}");
    };
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as u32;
    assert!(t.time.abs_diff(now) <= 1, "{t:?}");
    // Each later than the one before.
    let (_, d2) = run(
        doc! {"$currentDate": {"t": {"$type": "timestamp"}}},
        doc! {"_id": 1},
    );
    let Some(Bson::Timestamp(t2)) = d2.get("t") else {
        panic!("not a Timestamp: {d2}");
    };
    assert!((t2.time, t2.increment) > (t.time, t.increment));
    // Anything else is refused, as MongoDB refuses it.
    let e = err(doc! {"$currentDate": {"t": 1}}, doc! {"_id": 1});
    assert_eq!(e.code, 2);
    assert_eq!(
        e.message,
        "int is not valid type for $currentDate. Please use a boolean ('true') or a $type \
         expression ({$type: 'timestamp/date'})."
    );
    let e = err(
        doc! {"$currentDate": {"t": {"$type": "Date"}}},
        doc! {"_id": 1},
    );
    assert_eq!(
        e.message,
        "The '$type' string field is required to be 'date' or 'timestamp': \
         {$currentDate: {field : {$type: 'date'}}}"
    );
    let e = err(
        doc! {"$currentDate": {"t": {"type": "date"}}},
        doc! {"_id": 1},
    );
    assert_eq!(e.message, "Unrecognized $currentDate option: type");
}
