//! Tests of the store: collections, indexes, cursors.

use super::*;

fn coll() -> Collection {
    let mut c = Collection::new("d.c".into());
    c.create_index(
        "k_1".into(),
        vec![("k".into(), 1)],
        IndexOptions::default(),
        doc! {},
    )
    .unwrap();
    c.create_index(
        "a_1_b_1".into(),
        vec![("a".into(), 1), ("b".into(), 1)],
        IndexOptions::default(),
        doc! {},
    )
    .unwrap();
    c.create_index("u_1".into(), vec![("u".into(), 1)], unique(), doc! {})
        .unwrap();
    for i in 0..100 {
        c.insert(doc! {"_id": i, "k": i % 10, "a": i % 3, "b": i, "u": i, "tags": [i % 2, 7]})
            .unwrap();
    }
    c
}

fn unique() -> IndexOptions {
    IndexOptions {
        unique: true,
        ..IndexOptions::default()
    }
}

fn f(d: Document) -> Filter {
    Filter::parse(&d).unwrap()
}

fn s(d: Document) -> SortSpec {
    SortSpec::parse(&d).unwrap()
}

fn ids(docs: Vec<&Document>) -> Vec<i32> {
    docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

#[test]
fn plans_use_id_and_secondary_indexes() {
    let c = coll();
    assert_eq!(c.explain(&f(doc! {"_id": 5}), None), "IDSCAN");
    assert_eq!(c.explain(&f(doc! {"k": {"$gte": 3}}), None), "IXSCAN k_1");
    assert_eq!(
        c.explain(&f(doc! {"a": 1, "b": {"$gt": 5}}), None),
        "IXSCAN a_1_b_1"
    );
    assert_eq!(c.explain(&f(doc! {"z": 1}), None), "COLLSCAN");
    assert_eq!(
        c.explain(&f(doc! {}), Some(&s(doc! {"k": -1}))),
        "IXSCAN k_1 SORTED"
    );
    assert_eq!(
        c.explain(&f(doc! {"k": {"$lt": 4}}), Some(&s(doc! {"k": 1}))),
        "IXSCAN k_1 SORTED"
    );
    assert_eq!(
        c.explain(&f(doc! {"_id": {"$gt": 4}}), Some(&s(doc! {"_id": -1}))),
        "IDSCAN SORTED"
    );
    assert_eq!(
        c.explain(&f(doc! {"z": 1}), Some(&s(doc! {"z": 1}))),
        "COLLSCAN"
    );
}

#[test]
fn selects_match_a_plain_scan() {
    let c = coll();
    let cases = [
        (
            doc! {"k": {"$gt": 2, "$lte": 4}},
            Some(doc! {"k": 1, "_id": 1}),
            0,
            None,
        ),
        (
            doc! {"k": {"$gt": 2, "$lte": 4}},
            Some(doc! {"k": -1}),
            3,
            Some(5),
        ),
        (
            doc! {"_id": {"$gte": 10, "$lt": 20}},
            Some(doc! {"_id": -1}),
            2,
            Some(3),
        ),
        (doc! {"_id": {"$in": [3, 1, 3, 99, 500]}}, None, 0, None),
        (
            doc! {"a": 2, "b": {"$lt": 30}},
            Some(doc! {"b": -1}),
            0,
            Some(4),
        ),
        (
            doc! {"k": {"$in": [1, 2]}, "u": {"$gte": 50}},
            Some(doc! {"u": 1}),
            1,
            Some(3),
        ),
        (doc! {"tags": 1}, Some(doc! {"_id": 1}), 0, Some(5)),
        (doc! {}, Some(doc! {"u": -1}), 0, Some(2)),
    ];
    for (filter, sort, skip, limit) in cases {
        let filter = f(filter);
        let sort = sort.map(s);
        let got = ids(c.select(&filter, sort.as_ref(), skip, limit));
        let mut want: Vec<&Document> = c.iter().filter(|d| filter.matches(d)).collect();
        if let Some(s) = &sort {
            want.sort_by(|a, b| s.compare(a, b));
        }
        let want: Vec<i32> = ids(want)
            .into_iter()
            .skip(skip)
            .take(limit.unwrap_or(usize::MAX))
            .collect();
        assert_eq!(got, want, "{filter:?} {sort:?}");
    }
}

#[test]
fn indexes_follow_writes_and_reject_duplicates() {
    let mut c = coll();
    let id = Key(Bson::Int32(5));
    let mut d = c.get(&id).unwrap().clone();
    d.insert("k", 42);
    c.replace(&id, d).unwrap();
    assert_eq!(ids(c.select(&f(doc! {"k": 42}), None, 0, None)), vec![5]);
    assert_eq!(
        ids(c.select(&f(doc! {"k": 5}), None, 0, None)),
        vec![15, 25, 35, 45, 55, 65, 75, 85, 95]
    );
    c.remove(&id);
    assert!(c.select(&f(doc! {"k": 42}), None, 0, None).is_empty());
    let e = c.insert(doc! {"_id": 1000, "u": 7}).unwrap_err();
    assert_eq!(e.code, 11000);
    assert_eq!(
        e.errmsg,
        "E11000 duplicate key error collection: d.c index: u_1 dup key: { u: 7 }"
    );
    let e = c.insert(doc! {"_id": 7}).unwrap_err();
    assert_eq!(
        e.errmsg,
        "E11000 duplicate key error collection: d.c index: _id_ dup key: { _id: 7 }"
    );
    // 1 and 1.0 are the same _id, as in MongoDB.
    assert_eq!(
        c.insert(doc! {"_id": 1.0, "u": -1}).unwrap_err().code,
        11000
    );
    let before = c.len();
    let id = c.insert(doc! {"x": 1, "u": -2}).unwrap();
    assert!(matches!(id, Bson::ObjectId(_)));
    assert_eq!(
        c.get(&Key(id)).unwrap().keys().next().map(String::as_str),
        Some("_id")
    );
    assert_eq!(c.len(), before + 1);
}

#[test]
fn a_hashed_index_finds_equalities_only_and_refuses_arrays() {
    let mut c = Collection::new("d.c".into());
    c.create_index(
        "h_hashed".into(),
        vec![("h".into(), HASHED)],
        IndexOptions::default(),
        doc! {},
    )
    .unwrap();
    for i in 0..50 {
        c.insert(doc! {"_id": i, "h": i % 5}).unwrap();
    }
    c.insert(doc! {"_id": 50}).unwrap();
    // 1, 1L and 1.0 hash alike, so an equality finds all of them.
    c.insert(doc! {"_id": 51, "h": 1.0}).unwrap();
    let eq = f(doc! {"h": 1});
    assert_eq!(c.explain(&eq, None), "IXSCAN h_hashed");
    assert_eq!(c.plan_summary(&eq, None).0, "IXSCAN { h: \"hashed\" }");
    let mut found = ids(c.select(&eq, None, 0, None));
    found.sort();
    assert_eq!(found, vec![1, 6, 11, 16, 21, 26, 31, 36, 41, 46, 51]);
    let some = f(doc! {"h": {"$in": [2, 3, 2]}});
    assert_eq!(c.explain(&some, None), "IXSCAN h_hashed");
    assert_eq!(c.select(&some, None, 0, None).len(), 20);
    // A missing field is indexed as null.
    assert_eq!(ids(c.select(&f(doc! {"h": null}), None, 0, None)), vec![50]);
    // A range or a sort cannot use the hashes.
    let range = f(doc! {"h": {"$gt": 3}});
    assert_eq!(c.explain(&range, None), "COLLSCAN");
    assert_eq!(c.select(&range, None, 0, None).len(), 10);
    assert_eq!(c.explain(&f(doc! {}), Some(&s(doc! {"h": 1}))), "COLLSCAN");
    // An array in the hashed field is refused, and the document not stored.
    let e = c.insert(doc! {"_id": 99, "h": [1, 2]}).unwrap_err();
    assert_eq!(e.code, 16766, "{e:?}");
    assert!(c.select(&f(doc! {"_id": 99}), None, 0, None).is_empty());
    assert_eq!(
        index_name(&[("a".into(), 1), ("h".into(), HASHED)]),
        "a_1_h_hashed"
    );
}

#[test]
fn an_index_on_a_path_through_an_array_of_documents_holds_every_value_reached() {
    let mut c = Collection::new("d.c".into());
    // Built over documents already there, and kept on inserts after.
    c.insert(doc! {"_id": 1, "a": [{"b": 1}, {"b": 2}]})
        .unwrap();
    c.create_index(
        "a.b_1".into(),
        vec![("a.b".into(), 1)],
        IndexOptions::default(),
        doc! {},
    )
    .unwrap();
    c.insert(doc! {"_id": 2, "a": {"b": 3}}).unwrap();
    c.insert(doc! {"_id": 3, "a": [{"b": [4, 5]}, {"c": 6}]})
        .unwrap();
    c.insert(doc! {"_id": 4}).unwrap();
    let two = f(doc! {"a.b": 2});
    assert_eq!(c.explain(&two, None), "IXSCAN a.b_1");
    assert_eq!(ids(c.select(&two, None, 0, None)), vec![1]);
    assert_eq!(ids(c.select(&f(doc! {"a.b": 5}), None, 0, None)), vec![3]);
    let range = f(doc! {"a.b": {"$gte": 2, "$lte": 4}});
    assert_eq!(c.explain(&range, None), "IXSCAN a.b_1");
    assert_eq!(ids(c.select(&range, None, 0, None)), vec![1, 2, 3]);
    // An embedded document without `b` is filed under null, as the
    // missing field of a whole document is.
    let null = f(doc! {"a.b": null});
    assert_eq!(c.explain(&null, None), "IXSCAN a.b_1");
    assert_eq!(ids(c.select(&null, None, 0, None)), vec![3, 4]);
    // A multikey index gives no sort order.
    assert_eq!(
        c.explain(&f(doc! {}), Some(&s(doc! {"a.b": 1}))),
        "COLLSCAN"
    );
    // Removing a document removes each of its keys.
    c.remove(&Key(Bson::Int32(1)));
    assert!(c.select(&two, None, 0, None).is_empty());
}

#[test]
fn a_unique_index_on_a_path_through_an_array_compares_each_value() {
    let mut c = Collection::new("d.c".into());
    c.create_index("a.b_1".into(), vec![("a.b".into(), 1)], unique(), doc! {})
        .unwrap();
    c.insert(doc! {"_id": 1, "a": [{"b": 1}, {"b": 2}]})
        .unwrap();
    // The same value twice in one document is no duplicate.
    c.insert(doc! {"_id": 2, "a": [{"b": 3}, {"b": 3}]})
        .unwrap();
    let e = c.insert(doc! {"_id": 3, "a": {"b": 2}}).unwrap_err();
    assert_eq!(e.code, 11000);
    assert_eq!(
        e.errmsg,
        "E11000 duplicate key error collection: d.c index: a.b_1 dup key: { a.b: 2 }"
    );
    let e = c
        .insert(doc! {"_id": 4, "a": [{"b": 5}, {"b": 3}]})
        .unwrap_err();
    assert_eq!(e.code, 11000);
    c.insert(doc! {"_id": 5, "a": [{"b": 4}]}).unwrap();
    // A document clashing with one already there cannot enter a new index.
    let mut d = Collection::new("d.d".into());
    d.insert(doc! {"_id": 1, "x": [{"y": 1}]}).unwrap();
    d.insert(doc! {"_id": 2, "x": [{"y": 2}, {"y": 1}]})
        .unwrap();
    let e = d
        .create_index("x.y_1".into(), vec![("x.y".into(), 1)], unique(), doc! {})
        .unwrap_err();
    assert_eq!(e.code, 11000);
    assert!(d.indexes.is_empty());
}

#[test]
fn a_hashed_index_refuses_an_array_anywhere_on_its_path() {
    let mut c = Collection::new("d.c".into());
    c.create_index(
        "a.b_hashed".into(),
        vec![("a.b".into(), HASHED)],
        IndexOptions::default(),
        doc! {},
    )
    .unwrap();
    let e = c
        .insert(doc! {"_id": 1, "a": [{"b": 1}, {"b": 2}]})
        .unwrap_err();
    assert_eq!(e.code, 16766);
    assert_eq!(
        e.errmsg,
        "Error: hashed indexes do not currently support array values. Found array at path: a"
    );
    c.insert(doc! {"_id": 2, "a": {"b": 1}}).unwrap();
    assert_eq!(ids(c.select(&f(doc! {"a.b": 1}), None, 0, None)), vec![2]);
}

#[test]
fn a_sparse_unique_index_leaves_out_documents_missing_its_fields() {
    let mut c = Collection::new("d.c".into());
    let sparse = IndexOptions {
        unique: true,
        sparse: true,
        partial: None,
    };
    c.create_index("a_1".into(), vec![("a".into(), 1)], sparse, doc! {})
        .unwrap();
    c.insert(doc! {"_id": 1}).unwrap();
    c.insert(doc! {"_id": 2, "b": 1}).unwrap();
    c.insert(doc! {"_id": 3, "a": 1}).unwrap();
    assert_eq!(c.insert(doc! {"_id": 4, "a": 1}).unwrap_err().code, 11000);
    // A null is a value: it is indexed, and unique.
    c.insert(doc! {"_id": 5, "a": null}).unwrap();
    assert_eq!(
        c.insert(doc! {"_id": 6, "a": null}).unwrap_err().code,
        11000
    );
    // A document that loses the field leaves the index.
    c.replace(&Key(Bson::Int32(3)), doc! {"_id": 3}).unwrap();
    c.insert(doc! {"_id": 7, "a": 1}).unwrap();
    // A compound sparse index holds a document with any of its fields.
    let mut d = Collection::new("d.d".into());
    let sparse = IndexOptions {
        unique: true,
        sparse: true,
        partial: None,
    };
    d.create_index(
        "a_1_b_1".into(),
        vec![("a".into(), 1), ("b".into(), 1)],
        sparse,
        doc! {},
    )
    .unwrap();
    d.insert(doc! {"_id": 1}).unwrap();
    d.insert(doc! {"_id": 2}).unwrap();
    d.insert(doc! {"_id": 3, "b": 1}).unwrap();
    assert_eq!(d.insert(doc! {"_id": 4, "b": 1}).unwrap_err().code, 11000);
    // The index cannot answer a query: it misses documents without `a`.
    let null = f(doc! {"a": null});
    assert_eq!(c.explain(&null, None), "COLLSCAN");
    assert_eq!(ids(c.select(&null, None, 0, None)), vec![1, 2, 3, 5]);
    assert_eq!(c.explain(&f(doc! {"a": 1}), None), "COLLSCAN");
    assert_eq!(c.explain(&f(doc! {}), Some(&s(doc! {"a": 1}))), "COLLSCAN");
}

#[test]
fn a_partial_unique_index_leaves_out_documents_outside_its_filter() {
    let mut c = Collection::new("d.c".into());
    let partial = IndexOptions {
        unique: true,
        sparse: false,
        partial: Some(doc! {"live": true}),
    };
    c.create_index("e_1".into(), vec![("e".into(), 1)], partial, doc! {})
        .unwrap();
    c.insert(doc! {"_id": 1, "e": "x", "live": true}).unwrap();
    // Outside the filter: no clash, with each other or with _id 1.
    c.insert(doc! {"_id": 2, "e": "x", "live": false}).unwrap();
    c.insert(doc! {"_id": 3, "e": "x"}).unwrap();
    let e = c
        .insert(doc! {"_id": 4, "e": "x", "live": true})
        .unwrap_err();
    assert_eq!(e.code, 11000);
    // A document moving into the filter is checked, and refused.
    let e = c
        .replace(
            &Key(Bson::Int32(2)),
            doc! {"_id": 2, "e": "x", "live": true},
        )
        .unwrap_err();
    assert_eq!(e.code, 11000);
    // Leaving it frees the key.
    c.replace(&Key(Bson::Int32(1)), doc! {"_id": 1, "e": "x"})
        .unwrap();
    c.insert(doc! {"_id": 4, "e": "x", "live": true}).unwrap();
    // Never planned with: a query on `e` must see every document.
    let x = f(doc! {"e": "x"});
    assert_eq!(c.explain(&x, None), "COLLSCAN");
    assert_eq!(ids(c.select(&x, None, 0, None)), vec![1, 2, 3, 4]);
    // A filter that does not parse builds no index.
    let bad = IndexOptions {
        partial: Some(doc! {"a": {"$foo": 1}}),
        ..IndexOptions::default()
    };
    assert_eq!(
        c.create_index("a_1".into(), vec![("a".into(), 1)], bad, doc! {})
            .unwrap_err()
            .code,
        2
    );
    assert_eq!(c.indexes.len(), 1);
}
