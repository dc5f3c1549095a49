//! Tests of the query semantics on plain values.

use std::cmp::Ordering;

use super::*;
use bson::{
    doc, oid::ObjectId, spec::BinarySubtype, Binary, Bson, DateTime, Decimal128, Document, Regex,
    Timestamp,
};

fn f(filter: Document) -> Filter {
    Filter::parse(&filter).expect("filter parses")
}

fn m(filter: Document, d: Document) -> bool {
    f(filter).matches(&d)
}

/// Decimal128 from a coefficient and exponent (BID, small coefficients).
fn dec(coefficient: u64, exponent: i32, negative: bool) -> Bson {
    let biased = (exponent + 6176) as u64;
    let hi = (u64::from(negative) << 63) | (biased << 49);
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&coefficient.to_le_bytes());
    bytes[8..].copy_from_slice(&hi.to_le_bytes());
    Bson::Decimal128(Decimal128::from_bytes(bytes))
}

#[test]
fn type_order_follows_mongodb() {
    let ascending = vec![
        Bson::MinKey,
        Bson::Undefined,
        Bson::Null,
        Bson::Double(f64::NAN),
        Bson::Double(f64::NEG_INFINITY),
        Bson::Int64(-5),
        Bson::Int32(1),
        Bson::Double(1.5),
        Bson::Int64(i64::MAX),
        Bson::Double(f64::INFINITY),
        Bson::String(String::new()),
        Bson::String("a".into()),
        Bson::Symbol("b".into()),
        Bson::String("ba".into()),
        Bson::Document(doc! {}),
        Bson::Document(doc! {"a": 1}),
        Bson::Document(doc! {"a": 1, "b": 0}),
        Bson::Document(doc! {"b": 0}),
        Bson::Array(vec![]),
        Bson::Array(vec![Bson::Int32(1)]),
        Bson::Array(vec![Bson::Int32(1), Bson::Int32(0)]),
        Bson::Array(vec![Bson::Int32(2)]),
        Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![9],
        }),
        Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![1, 1],
        }),
        Bson::ObjectId(ObjectId::from_bytes([0; 12])),
        Bson::ObjectId(ObjectId::from_bytes([1; 12])),
        Bson::Boolean(false),
        Bson::Boolean(true),
        Bson::DateTime(DateTime::from_millis(-1)),
        Bson::DateTime(DateTime::from_millis(0)),
        Bson::Timestamp(Timestamp {
            time: 1,
            increment: 9,
        }),
        Bson::Timestamp(Timestamp {
            time: 2,
            increment: 0,
        }),
        Bson::RegularExpression(Regex {
            pattern: "a".into(),
            options: String::new(),
        }),
        Bson::JavaScriptCode("x".into()),
        Bson::MaxKey,
    ];
    for (i, a) in ascending.iter().enumerate() {
        for (j, b) in ascending.iter().enumerate() {
            assert_eq!(compare(a, b), i.cmp(&j), "{a:?} vs {b:?}");
        }
    }
}

#[test]
fn numbers_compare_by_value_across_types() {
    let five = [
        Bson::Int32(5),
        Bson::Int64(5),
        Bson::Double(5.0),
        dec(5, 0, false),
        dec(50, -1, false),
    ];
    for a in &five {
        for b in &five {
            assert_eq!(compare(a, b), Ordering::Equal, "{a:?} vs {b:?}");
        }
    }
    assert_eq!(compare(&Bson::Int32(5), &Bson::Double(5.5)), Ordering::Less);
    assert_eq!(
        compare(&Bson::Double(-0.0), &Bson::Int32(0)),
        Ordering::Equal
    );
    assert_eq!(
        compare(&dec(15, -1, true), &Bson::Double(-1.5)),
        Ordering::Equal
    );
    // 2^53 + 1 has no exact double: the integer side must not be rounded.
    let big = (1i64 << 53) + 1;
    assert_eq!(
        compare(&Bson::Int64(big), &Bson::Double((1i64 << 53) as f64)),
        Ordering::Greater
    );
    assert_eq!(
        compare(&Bson::Double(1e19), &Bson::Int64(i64::MAX)),
        Ordering::Greater
    );
    assert_eq!(
        compare(&Bson::Double(-1e19), &Bson::Int64(i64::MIN)),
        Ordering::Less
    );
    assert_eq!(
        compare(&Bson::Double(f64::NAN), &Bson::Double(f64::NAN)),
        Ordering::Equal
    );
    assert_eq!(
        compare(&Bson::Double(f64::NAN), &Bson::Int64(i64::MIN)),
        Ordering::Less
    );
}

#[test]
fn index_keys_unify_equal_numbers() {
    let mut map = std::collections::BTreeMap::new();
    map.insert(IndexKey(Bson::Int32(5)), "int");
    map.insert(IndexKey(Bson::Double(5.0)), "double");
    map.insert(IndexKey(Bson::String("5".into())), "string");
    assert_eq!(map.len(), 2);
    assert_eq!(map.get(&IndexKey(Bson::Int64(5))), Some(&"double"));
    let a = CompoundKey(vec![Bson::Int32(1), Bson::String("b".into())]);
    let b = CompoundKey(vec![Bson::Double(1.0), Bson::String("c".into())]);
    assert!(a < b);
    assert_eq!(
        a,
        CompoundKey(vec![Bson::Int64(1), Bson::String("b".into())])
    );
}

#[test]
fn get_path_descends_documents_and_array_indexes() {
    let d = doc! {"a": {"b": [10, {"c": "x"}]}, "n": 1};
    assert_eq!(get_path(&d, "n"), Some(&Bson::Int32(1)));
    assert_eq!(get_path(&d, "a.b.0"), Some(&Bson::Int32(10)));
    assert_eq!(get_path(&d, "a.b.1.c"), Some(&Bson::String("x".into())));
    assert_eq!(get_path(&d, "a.b.2"), None);
    assert_eq!(get_path(&d, "a.b.x"), None);
    assert_eq!(get_path(&d, "n.x"), None);
    assert_eq!(get_path(&d, "missing"), None);
}

#[test]
fn values_at_path_expands_arrays() {
    let d = doc! {"a": [{"b": 1}, {"b": [2, 3]}, {"c": 4}]};
    let vals: Vec<Bson> = values_at_path(&d, "a.b").into_iter().cloned().collect();
    assert_eq!(vals, vec![Bson::Int32(1), Bson::Int32(2), Bson::Int32(3)]);
    assert!(values_at_path(&doc! {"a": []}, "a").is_empty());
    assert!(values_at_path(&doc! {"b": 1}, "a").is_empty());
}

#[test]
fn implicit_equality_and_numeric_types() {
    assert!(m(doc! {"_id": 5}, doc! {"_id": 5i64}));
    assert!(m(doc! {"_id": 5}, doc! {"_id": 5.0}));
    assert!(!m(doc! {"_id": 5}, doc! {"_id": "5"}));
    assert!(!m(doc! {"_id": 5}, doc! {"x": 5}));
    assert!(m(doc! {}, doc! {"x": 5}));
    assert!(f(doc! {}).matches_all());
    assert!(f(doc! {"$comment": "hi"}).matches_all());
    assert!(!f(doc! {"x": 5}).matches_all());
    assert!(m(doc! {"a": 1, "b": "x"}, doc! {"a": 1, "b": "x"}));
    assert!(!m(doc! {"a": 1, "b": "x"}, doc! {"a": 1, "b": "y"}));
}

#[test]
fn equality_on_embedded_documents_is_exact_and_ordered() {
    assert!(m(
        doc! {"a": {"x": 1, "y": 2}},
        doc! {"a": {"x": 1, "y": 2}}
    ));
    assert!(!m(
        doc! {"a": {"x": 1, "y": 2}},
        doc! {"a": {"y": 2, "x": 1}}
    ));
    assert!(!m(doc! {"a": {"x": 1}}, doc! {"a": {"x": 1, "y": 2}}));
    assert!(m(doc! {"a.x": 1}, doc! {"a": {"x": 1, "y": 2}}));
}

#[test]
fn arrays_match_by_element_or_whole() {
    assert!(m(doc! {"a": 5}, doc! {"a": [5, 6]}));
    assert!(!m(doc! {"a": 7}, doc! {"a": [5, 6]}));
    assert!(m(doc! {"a": [5, 6]}, doc! {"a": [5, 6]}));
    assert!(!m(doc! {"a": [6, 5]}, doc! {"a": [5, 6]}));
    assert!(m(doc! {"a": [5]}, doc! {"a": [[5], 6]}));
    // Only one level of nesting is expanded.
    assert!(!m(doc! {"a": 5}, doc! {"a": [[5]]}));
    assert!(m(doc! {"a": {"$gt": 5}}, doc! {"a": [1, 10]}));
    assert!(!m(doc! {"a": {"$gt": 50}}, doc! {"a": [1, 10]}));
    // Each condition may be met by a different element.
    assert!(m(doc! {"a": {"$gt": 5, "$lt": 3}}, doc! {"a": [1, 10]}));
    assert!(m(doc! {"a.b": 2}, doc! {"a": [{"b": 1}, {"b": 2}]}));
    assert!(m(doc! {"a.b": 2}, doc! {"a": [{"b": [1, 2]}]}));
    assert!(m(doc! {"a.1": 6}, doc! {"a": [5, 6]}));
    assert!(m(doc! {"a.1.b": 6}, doc! {"a": [{"b": 5}, {"b": 6}]}));
    assert!(!m(doc! {"a.0.b": 6}, doc! {"a": [{"b": 5}, {"b": 6}]}));
}

#[test]
fn ne_and_nin_negate_any_element() {
    assert!(!m(doc! {"a": {"$ne": 5}}, doc! {"a": [5, 6]}));
    assert!(m(doc! {"a": {"$ne": 7}}, doc! {"a": [5, 6]}));
    assert!(m(doc! {"a": {"$ne": 7}}, doc! {}));
    assert!(!m(doc! {"a": {"$ne": 5}}, doc! {"a": 5.0}));
    assert!(!m(doc! {"a": {"$nin": [1, 6]}}, doc! {"a": [5, 6]}));
    assert!(m(doc! {"a": {"$nin": [1, 2]}}, doc! {"a": [5, 6]}));
    assert!(m(doc! {"a": {"$nin": [1, 2]}}, doc! {}));
}

#[test]
fn comparisons_stay_within_type_class() {
    assert!(m(doc! {"a": {"$gt": 5}}, doc! {"a": 6.5}));
    assert!(!m(doc! {"a": {"$gt": 5}}, doc! {"a": "zzz"}));
    assert!(!m(doc! {"a": {"$lt": "a"}}, doc! {"a": 1}));
    assert!(m(doc! {"a": {"$gte": 5}}, doc! {"a": 5i64}));
    assert!(!m(doc! {"a": {"$gt": 5}}, doc! {"a": 5i64}));
    assert!(m(doc! {"a": {"$lte": 5}}, doc! {"a": 5.0}));
    assert!(!m(doc! {"a": {"$lt": 5}}, doc! {"a": 5}));
    assert!(m(doc! {"a": {"$lt": "b"}}, doc! {"a": "a"}));
    assert!(!m(doc! {"a": {"$gt": 5}}, doc! {}));
    assert!(!m(doc! {"a": {"$lt": 5}}, doc! {"a": null}));
    // MinKey and MaxKey bound every type.
    assert!(m(doc! {"a": {"$gt": Bson::MinKey}}, doc! {"a": "s"}));
    assert!(m(doc! {"a": {"$lt": Bson::MaxKey}}, doc! {"a": true}));
    // NaN is only equal to NaN.
    assert!(!m(doc! {"a": {"$lt": 5}}, doc! {"a": f64::NAN}));
    assert!(m(doc! {"a": {"$gte": f64::NAN}}, doc! {"a": f64::NAN}));
    assert!(m(doc! {"a": f64::NAN}, doc! {"a": f64::NAN}));
    assert!(!m(doc! {"a": {"$gt": f64::NAN}}, doc! {"a": 1}));
    let t0 = DateTime::from_millis(1000);
    assert!(m(
        doc! {"t": {"$gte": t0}},
        doc! {"t": DateTime::from_millis(2000)}
    ));
    assert!(!m(doc! {"t": {"$gte": t0}}, doc! {"t": 2000}));
}

#[test]
fn null_matches_missing() {
    assert!(m(doc! {"a": null}, doc! {}));
    assert!(m(doc! {"a": null}, doc! {"a": null}));
    assert!(!m(doc! {"a": null}, doc! {"a": 0}));
    assert!(!m(doc! {"a": null}, doc! {"a": Bson::Undefined}));
    assert!(m(doc! {"a.b": null}, doc! {"a": 5}));
    // MongoDB's jstests/core/null2.js: through an array, only embedded
    // documents lacking the field count as null.
    let null2 = [
        (doc! {"a": [{"b": 5}]}, false),
        (doc! {"a": [{}]}, true),
        (doc! {"a": []}, false),
        (doc! {"a": [{}, {"b": 5}]}, true),
        (doc! {"a": [5, {"b": 5}]}, false),
    ];
    for (d, want) in null2 {
        assert_eq!(m(doc! {"a.b": null}, d.clone()), want, "{d}");
        assert_eq!(m(doc! {"a.b": {"$in": [null]}}, d.clone()), want, "{d}");
    }
    assert!(m(doc! {"a": {"$gte": null}}, doc! {}));
    assert!(!m(doc! {"a": {"$ne": null}}, doc! {}));
    assert!(m(doc! {"a": {"$ne": null}}, doc! {"a": 1}));
    assert!(m(doc! {"a": {"$in": [null, 3]}}, doc! {}));
}

#[test]
fn in_exists_and_logic() {
    assert!(m(doc! {"a": {"$in": [1, 2]}}, doc! {"a": 2.0}));
    assert!(m(doc! {"a": {"$in": [1, 2]}}, doc! {"a": [0, 2]}));
    assert!(!m(doc! {"a": {"$in": []}}, doc! {"a": 1}));
    assert!(m(doc! {"a": {"$exists": true}}, doc! {"a": null}));
    assert!(!m(doc! {"a": {"$exists": true}}, doc! {}));
    assert!(m(doc! {"a": {"$exists": 0}}, doc! {}));
    assert!(m(
        doc! {"a.b": {"$exists": true}},
        doc! {"a": [1, {"b": 2}]}
    ));
    assert!(!m(
        doc! {"a.b": {"$exists": true}},
        doc! {"a": [1, {"c": 2}]}
    ));
    let d = doc! {"a": 1, "b": 2};
    assert!(m(doc! {"$and": [{"a": 1}, {"b": 2}]}, d.clone()));
    assert!(!m(doc! {"$and": [{"a": 1}, {"b": 3}]}, d.clone()));
    assert!(m(doc! {"$or": [{"a": 9}, {"b": 2}]}, d.clone()));
    assert!(!m(doc! {"$or": [{"a": 9}, {"b": 9}]}, d.clone()));
    assert!(m(doc! {"$nor": [{"a": 9}, {"b": 9}]}, d.clone()));
    assert!(!m(doc! {"$nor": [{"a": 1}, {"b": 9}]}, d.clone()));
    assert!(m(doc! {"a": {"$not": {"$gt": 5}}}, d.clone()));
    assert!(!m(doc! {"a": {"$not": {"$lt": 5}}}, d.clone()));
    // $not also matches where the field is missing or of another type.
    assert!(m(doc! {"z": {"$not": {"$gt": 5}}}, d.clone()));
    assert!(m(doc! {"a": {"$not": {"$gt": 0, "$lt": 1}}}, d.clone()));
    assert!(!m(doc! {"a": {"$not": {"$gt": 0, "$lt": 2}}}, d));
}

#[test]
fn array_operators() {
    let d = doc! {"a": [1, 2, 3], "e": [{"x": 1, "y": 1}, {"x": 2, "y": 0}]};
    assert!(m(doc! {"a": {"$size": 3}}, d.clone()));
    assert!(!m(doc! {"a": {"$size": 2}}, d.clone()));
    assert!(m(doc! {"a": {"$all": [3, 1]}}, d.clone()));
    assert!(!m(doc! {"a": {"$all": [3, 4]}}, d.clone()));
    assert!(m(doc! {"e": {"$elemMatch": {"x": 2, "y": 0}}}, d.clone()));
    assert!(!m(doc! {"e": {"$elemMatch": {"x": 2, "y": 1}}}, d.clone()));
    assert!(m(
        doc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}},
        d.clone()
    ));
    assert!(!m(doc! {"a": {"$elemMatch": {"$gt": 3}}}, d.clone()));
    assert!(m(
        doc! {"a": {"$elemMatch": {"$in": [7, 2], "$ne": 1}}},
        d.clone()
    ));
    assert!(!m(
        doc! {"a": {"$elemMatch": {"$nin": [1, 2, 3]}}},
        d.clone()
    ));
    assert!(m(doc! {"a": {"$type": "array"}}, d.clone()));
    assert!(m(doc! {"a": {"$type": "int"}}, d.clone()));
    assert!(m(doc! {"a": {"$type": "number"}}, d.clone()));
    assert!(!m(doc! {"a": {"$type": "string"}}, d.clone()));
    assert!(m(doc! {"a": {"$mod": [3, 0]}}, d.clone()));
    assert!(!m(doc! {"a": {"$mod": [5, 4]}}, d));
}

#[test]
fn errors_carry_mongodb_codes_and_messages() {
    let err = |d: Document| Filter::parse(&d).unwrap_err();
    let e = err(doc! {"a": {"$foo": 1}});
    assert_eq!(
        (e.code, e.code_name, e.message.as_str()),
        (2, "BadValue", "unknown operator: $foo")
    );
    assert_eq!(
        err(doc! {"a": {"$gt": 1, "b": 1}}).message,
        "unknown operator: b"
    );
    assert!(err(doc! {"$foo": 1})
        .message
        .starts_with("unknown top level operator: $foo"));
    assert_eq!(err(doc! {"a": {"$in": 1}}).message, "$in needs an array");
    assert_eq!(
        err(doc! {"a": {"$nin": "x"}}).message,
        "$nin needs an array"
    );
    assert_eq!(
        err(doc! {"$or": []}).message,
        "$or must be a nonempty array"
    );
    assert_eq!(err(doc! {"$and": [1]}).code, 2);
    assert_eq!(
        err(doc! {"a": {"$not": 1}}).message,
        "$not needs a regex or a document"
    );
    assert_eq!(err(doc! {"a": {"$not": {}}}).code, 2);
    assert_eq!(err(doc! {"a": {"$mod": [0, 1]}}).code, 2);
}

#[test]
fn intervals_for_index_planning() {
    let pt = |v: Bson| Interval::point(v);
    assert_eq!(
        f(doc! {"_id": 5}).intervals("_id"),
        Some(vec![pt(Bson::Int32(5))])
    );
    assert_eq!(f(doc! {"_id": 5}).intervals("k"), None);
    assert_eq!(
        f(doc! {"k": {"$in": [3, 1, 3]}}).intervals("k"),
        Some(vec![pt(Bson::Int32(1)), pt(Bson::Int32(3))])
    );
    assert_eq!(
        f(doc! {"k": {"$gte": 10, "$lt": 20}}).intervals("k"),
        Some(vec![Interval {
            lower: Bound::Included(Bson::Int32(10)),
            upper: Bound::Excluded(Bson::Int32(20)),
        }])
    );
    // A one-sided range stays within numbers.
    let gt = f(doc! {"k": {"$gt": 10}}).intervals("k").unwrap();
    assert_eq!(gt.len(), 1);
    assert_eq!(gt[0].lower, Bound::Excluded(Bson::Int32(10)));
    assert!(gt[0].contains(&Bson::Double(1e300)));
    assert!(!gt[0].contains(&Bson::String(String::new())));
    // Contradictions give no interval at all.
    assert_eq!(
        f(doc! {"k": {"$gt": 10, "$lt": 5}}).intervals("k"),
        Some(vec![])
    );
    assert_eq!(
        f(doc! {"k": 5, "$and": [{"k": 6}]}).intervals("k"),
        Some(vec![])
    );
    // $and with other fields, and $or over the same field.
    assert_eq!(
        f(doc! {"$and": [{"k": {"$gte": 1}}, {"c": "x"}, {"k": {"$lte": 1}}]}).intervals("k"),
        Some(vec![Interval {
            lower: Bound::Included(Bson::Int32(1)),
            upper: Bound::Included(Bson::Int32(1)),
        }])
    );
    assert_eq!(
        f(doc! {"$or": [{"k": 2}, {"k": {"$in": [1, 2]}}]}).intervals("k"),
        Some(vec![pt(Bson::Int32(1)), pt(Bson::Int32(2))])
    );
    assert_eq!(f(doc! {"$or": [{"k": 2}, {"c": 1}]}).intervals("k"), None);
    assert_eq!(f(doc! {"k": {"$ne": 2}}).intervals("k"), None);
    assert_eq!(f(doc! {"k": [1, 2]}).intervals("k"), None);
    // Overlapping ranges merge.
    let merged = f(doc! {"$or": [{"k": {"$gte": 1, "$lte": 5}}, {"k": {"$gt": 3, "$lt": 9}}]})
        .intervals("k")
        .unwrap();
    assert_eq!(
        merged,
        vec![Interval {
            lower: Bound::Included(Bson::Int32(1)),
            upper: Bound::Excluded(Bson::Int32(9)),
        }]
    );
}

#[test]
fn sort_orders_stably_with_missing_as_null() {
    let spec = SortSpec::parse(&doc! {"a": 1, "b": -1}).unwrap();
    assert_eq!(spec.fields(), &[("a".to_owned(), 1), ("b".to_owned(), -1)]);
    let mut docs = vec![
        doc! {"i": 0, "a": 2, "b": 1},
        doc! {"i": 1, "a": 1, "b": 1},
        doc! {"i": 2},
        doc! {"i": 3, "a": 1, "b": 5},
        doc! {"i": 4, "a": 1.0, "b": 1},
        doc! {"i": 5, "a": "s"},
    ];
    spec.sort(&mut docs);
    let order: Vec<i32> = docs.iter().map(|d| d.get_i32("i").unwrap()).collect();
    assert_eq!(order, vec![2, 3, 1, 4, 0, 5]);
    // Arrays sort by their smallest element ascending, largest descending.
    let asc = SortSpec::parse(&doc! {"a": 1}).unwrap();
    let desc = SortSpec::parse(&doc! {"a": -1}).unwrap();
    let (x, y) = (doc! {"a": [1, 10]}, doc! {"a": 5});
    assert_eq!(asc.compare(&x, &y), Ordering::Less);
    assert_eq!(desc.compare(&x, &y), Ordering::Less);
    assert_eq!(SortSpec::parse(&doc! {"a": 2}).unwrap_err().code, 15975);
    assert_eq!(SortSpec::parse(&doc! {"a": "x"}).unwrap_err().code, 15975);
}

fn p(spec: Document, d: &Document) -> Document {
    Projection::parse(&spec)
        .expect("projection parses")
        .apply(d)
}

#[test]
fn projection_inclusion_and_exclusion() {
    let d = doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 4, "d": 5}, 6]};
    assert_eq!(p(doc! {"a": 1}, &d), doc! {"_id": 1, "a": 1});
    assert_eq!(p(doc! {"a": true, "_id": 0}, &d), doc! {"a": 1});
    assert_eq!(
        p(doc! {"_id": 0}, &d),
        doc! {"a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 4, "d": 5}, 6]}
    );
    assert_eq!(p(doc! {"_id": 1}, &d), doc! {"_id": 1});
    assert_eq!(
        p(doc! {"a": 0, "b": 0}, &d),
        doc! {"_id": 1, "e": [{"c": 4, "d": 5}, 6]}
    );
    assert_eq!(p(doc! {"b.c": 1}, &d), doc! {"_id": 1, "b": {"c": 2}});
    assert_eq!(p(doc! {"b": {"c": 1}}, &d), doc! {"_id": 1, "b": {"c": 2}});
    assert_eq!(
        p(doc! {"b.c": 0, "_id": 0}, &d),
        doc! {"a": 1, "b": {"d": 3}, "e": [{"c": 4, "d": 5}, 6]}
    );
    assert_eq!(p(doc! {"e.c": 1}, &d), doc! {"_id": 1, "e": [{"c": 4}]});
    assert_eq!(
        p(doc! {"e.c": 0, "_id": 0, "a": 0, "b": 0}, &d),
        doc! {"e": [{"d": 5}, 6]}
    );
    assert_eq!(p(doc! {"missing": 1}, &d), doc! {"_id": 1});
    assert_eq!(p(doc! {}, &d), d);
    assert!(Projection::parse(&doc! {}).unwrap().is_identity());
}

#[test]
fn projection_computed_fields() {
    let d = doc! {"_id": 1, "a": 1, "b": {"c": 2}, "l": [{"x": 1}, {"x": 2}]};
    assert_eq!(p(doc! {"x": "$b.c", "_id": 0}, &d), doc! {"x": 2});
    assert_eq!(
        p(doc! {"a": 1, "y": "$missing"}, &d),
        doc! {"_id": 1, "a": 1}
    );
    assert_eq!(p(doc! {"k": "lit", "_id": 0}, &d), doc! {"k": "lit"});
    assert_eq!(p(doc! {"k": {"$literal": 1}, "_id": 0}, &d), doc! {"k": 1});
    assert_eq!(p(doc! {"xs": "$l.x", "_id": 0}, &d), doc! {"xs": [1, 2]});
    assert_eq!(p(doc! {"n.m": "$a", "_id": 0}, &d), doc! {"n": {"m": 1}});
    assert_eq!(p(doc! {"_id": "$a"}, &d), doc! {"_id": 1});
    let out = p(doc! {"_id": "$b.c", "a": 1}, &d);
    assert_eq!(out.keys().collect::<Vec<_>>(), vec!["_id", "a"]);
    assert_eq!(out, doc! {"_id": 2, "a": 1});
}

#[test]
fn projection_errors() {
    let e = Projection::parse(&doc! {"a": 1, "b": 0}).unwrap_err();
    assert_eq!(e.code, 31254);
    assert_eq!(
        e.message,
        "Cannot do exclusion on field b in inclusion projection"
    );
    let e = Projection::parse(&doc! {"a": 0, "b": 1}).unwrap_err();
    assert_eq!(e.code, 31253);
    assert_eq!(
        e.message,
        "Cannot do inclusion on field b in exclusion projection"
    );
    assert!(Projection::parse(&doc! {"_id": 0, "b": 1}).is_ok());
    assert!(Projection::parse(&doc! {"_id": 1, "b": 0}).is_ok());
    assert_eq!(
        Projection::parse(&doc! {"a": 1, "a.b": 1})
            .unwrap_err()
            .code,
        31250
    );
    assert_eq!(
        Projection::parse(&doc! {"a.b": 1, "a": 1})
            .unwrap_err()
            .code,
        31250
    );
    assert_eq!(
        Projection::parse(&doc! {"a": {"$add": [1, 2]}})
            .unwrap_err()
            .code,
        168
    );
}

#[test]
fn a_regex_where_mongodb_matches_or_refuses_one_is_refused() {
    let err = |d: Document| Filter::parse(&d).unwrap_err();
    let re = || {
        Bson::RegularExpression(Regex {
            pattern: "^x".into(),
            options: String::new(),
        })
    };
    // MongoDB matches these as patterns; the simulator has none.
    for op in ["$in", "$nin", "$all"] {
        let e = err(doc! {"a": {op: [1, re()]}});
        assert_eq!(
            (e.code, e.message.as_str()),
            (
                2,
                "regular expressions are not supported by the mongoload simulator"
            ),
            "{op}"
        );
    }
    let e = err(doc! {"a": {"$not": {"$in": [re()]}}});
    assert_eq!(e.code, 2);
    // MongoDB refuses these, with these words.
    assert_eq!(
        err(doc! {"a": {"$ne": re()}}).message,
        "Can't have regex as arg to $ne."
    );
    let e = err(doc! {"a.b": {"$gt": re()}});
    assert_eq!(
        (e.code, e.message.as_str()),
        (2, "Can't have RegEx as arg to predicate over field 'a.b'.")
    );
    assert_eq!(
        err(doc! {"a": {"$elemMatch": {"$lte": re()}}}).message,
        "Can't have RegEx as arg to predicate over field ''."
    );
    // $eq compares a regex as a value, as MongoDB does.
    let f = Filter::parse(&doc! {"a": {"$eq": re()}}).unwrap();
    assert!(f.matches(&doc! {"a": re()}));
    assert!(!f.matches(&doc! {"a": "xyz"}));
}
