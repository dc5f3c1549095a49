//! Tests of the aggregation pipeline on plain values.

use super::*;
use bson::doc;

fn run(stages: Vec<Document>, input: Vec<Document>) -> Vec<Document> {
    Pipeline::parse(&stages)
        .expect("pipeline parses")
        .run(input.into_iter())
        .expect("runs")
}

fn err(stages: Vec<Document>) -> QueryError {
    Pipeline::parse(&stages).unwrap_err()
}

fn sales() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "item": "a", "qty": 2, "price": 10.0, "tag": {"c": "x"}},
        doc! {"_id": 2, "item": "b", "qty": 1, "price": 20.5, "tag": {"c": "y"}},
        doc! {"_id": 3, "item": "a", "qty": 5, "price": 10.0, "tag": {"c": "x"}},
        doc! {"_id": 4, "item": "c", "qty": 7i64, "tag": {"c": "x"}},
        doc! {"_id": 5, "item": "b", "qty": "n/a", "price": 1.5},
    ]
}

#[test]
fn group_all_with_sum_avg_min_max_count() {
    let out = run(
        vec![doc! {"$group": {
            "_id": null,
            "n": {"$count": {}},
            "ones": {"$sum": 1},
            "qty": {"$sum": "$qty"},
            "price": {"$sum": "$price"},
            "avgPrice": {"$avg": "$price"},
            "avgMissing": {"$avg": "$none"},
            "minQty": {"$min": "$qty"},
            "maxQty": {"$max": "$qty"},
            "maxNone": {"$max": "$none"},
            "first": {"$first": "$item"},
            "last": {"$last": "$item"},
        }}],
        sales(),
    );
    // qty: 2 + 1 + 5 + 7 (int64 makes the sum an int64); "n/a" is ignored.
    // price: 10 + 20.5 + 10 + 1.5 = 42, over 4 documents: 10.5.
    // min/max compare across types: every number sorts below a string.
    assert_eq!(
        out,
        vec![doc! {
            "_id": null,
            "n": 5,
            "ones": 5,
            "qty": 15i64,
            "price": 42.0,
            "avgPrice": 10.5,
            "avgMissing": null,
            "minQty": 1,
            "maxQty": "n/a",
            "maxNone": null,
            "first": "a",
            "last": "b",
        }]
    );
}

#[test]
fn sum_types_follow_mongodb() {
    let sum = |vals: Vec<Bson>| {
        let input = vals.into_iter().map(|v| doc! {"v": v}).collect();
        let out = run(
            vec![doc! {"$group": {"_id": null, "s": {"$sum": "$v"}}}],
            input,
        );
        out[0].get("s").cloned().unwrap()
    };
    assert_eq!(sum(vec![Bson::Int32(1), Bson::Int32(2)]), Bson::Int32(3));
    assert_eq!(
        sum(vec![Bson::Int32(i32::MAX), Bson::Int32(1)]),
        Bson::Int64(i64::from(i32::MAX) + 1)
    );
    assert_eq!(sum(vec![Bson::Int32(1), Bson::Int64(2)]), Bson::Int64(3));
    assert_eq!(
        sum(vec![Bson::Int32(1), Bson::Double(0.5)]),
        Bson::Double(1.5)
    );
    assert_eq!(
        sum(vec![Bson::Int64(i64::MAX), Bson::Int64(1)]),
        Bson::Double(i64::MAX as f64 + 1.0)
    );
    // No input, no group (MongoDB emits nothing, not a zero).
    let none = run(
        vec![doc! {"$group": {"_id": null, "s": {"$sum": "$v"}}}],
        vec![],
    );
    assert!(none.is_empty());
    assert_eq!(sum(vec![Bson::String("x".into())]), Bson::Int32(0));
}

#[test]
fn group_by_field_path_and_compound_key() {
    let out = run(
        vec![
            doc! {"$group": {"_id": "$item", "total": {"$sum": "$qty"}, "ids": {"$push": "$_id"}}},
            doc! {"$sort": {"_id": 1}},
        ],
        sales(),
    );
    assert_eq!(
        out,
        vec![
            doc! {"_id": "a", "total": 7, "ids": [1, 3]},
            doc! {"_id": "b", "total": 1, "ids": [2, 5]},
            doc! {"_id": "c", "total": 7i64, "ids": [4]},
        ]
    );
    let out = run(
        vec![
            doc! {"$group": {"_id": {"item": "$item", "c": "$tag.c"}, "n": {"$sum": 1}}},
            doc! {"$sort": {"n": -1, "_id.item": 1}},
        ],
        sales(),
    );
    assert_eq!(
        out,
        vec![
            doc! {"_id": {"item": "a", "c": "x"}, "n": 2},
            doc! {"_id": {"item": "b", "c": "y"}, "n": 1},
            doc! {"_id": {"item": "b"}, "n": 1},
            doc! {"_id": {"item": "c", "c": "x"}, "n": 1},
        ]
    );
    // Equal numbers of different types fall in one group; missing is null.
    let out = run(
        vec![doc! {"$group": {"_id": "$k", "n": {"$sum": 1}, "set": {"$addToSet": "$k"}}}],
        vec![doc! {"k": 1}, doc! {"k": 1.0}, doc! {"k": 1i64}, doc! {}],
    );
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "n": 3, "set": [1]},
            doc! {"_id": null, "n": 1, "set": []}
        ]
    );
    let out = run(
        vec![doc! {"$group": {"_id": "const", "n": {"$sum": 2}}}],
        sales(),
    );
    assert_eq!(out, vec![doc! {"_id": "const", "n": 10}]);
}

#[test]
fn match_sort_skip_limit_project_count() {
    let out = run(
        vec![
            doc! {"$match": {"price": {"$gte": 10}}},
            doc! {"$sort": {"price": -1, "_id": 1}},
            doc! {"$skip": 1},
            doc! {"$limit": 1},
            doc! {"$project": {"item": 1, "p": "$price"}},
        ],
        sales(),
    );
    assert_eq!(out, vec![doc! {"_id": 1, "item": "a", "p": 10.0}]);
    let out = run(
        vec![doc! {"$match": {"item": "a"}}, doc! {"$count": "many"}],
        sales(),
    );
    assert_eq!(out, vec![doc! {"many": 2}]);
    let out = run(
        vec![doc! {"$match": {"item": "zz"}}, doc! {"$count": "many"}],
        sales(),
    );
    assert!(out.is_empty());
    let out = run(
        vec![
            doc! {"$project": {"tag": 0, "price": 0, "qty": 0}},
            doc! {"$limit": 2},
        ],
        sales(),
    );
    assert_eq!(
        out,
        vec![doc! {"_id": 1, "item": "a"}, doc! {"_id": 2, "item": "b"}]
    );
}

#[test]
fn sort_stage_is_stable() {
    let input = (0..20).map(|i| doc! {"i": i, "k": i % 3}).collect();
    let out = run(vec![doc! {"$sort": {"k": 1}}], input);
    let order: Vec<i32> = out.iter().map(|d| d.get_i32("i").unwrap()).collect();
    assert_eq!(
        order,
        vec![0, 3, 6, 9, 12, 15, 18, 1, 4, 7, 10, 13, 16, 19, 2, 5, 8, 11, 14, 17]
    );
}

#[test]
fn limit_stops_reading_input() {
    let mut read = 0;
    let input = (0..1000).map(|i| {
        read += 1;
        doc! {"i": i}
    });
    let p = Pipeline::parse(&[doc! {"$match": {"i": {"$gte": 10}}}, doc! {"$limit": 3}]).unwrap();
    let out = p.run(input).unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(out[0], doc! {"i": 10});
    assert!(read <= 14, "read {read} documents for a limit of 3");
}

#[test]
fn unwind_and_add_fields() {
    let input = vec![
        doc! {"_id": 1, "l": [1, 2]},
        doc! {"_id": 2, "l": []},
        doc! {"_id": 3},
    ];
    let out = run(vec![doc! {"$unwind": "$l"}], input.clone());
    assert_eq!(out, vec![doc! {"_id": 1, "l": 1}, doc! {"_id": 1, "l": 2}]);
    let out = run(
        vec![doc! {"$unwind": {"path": "$l", "preserveNullAndEmptyArrays": true}}],
        input.clone(),
    );
    assert_eq!(out.len(), 4);
    let out = run(
        vec![
            doc! {"$addFields": {"m": "$_id", "n.o": 1}},
            doc! {"$limit": 1},
        ],
        input,
    );
    assert_eq!(
        out,
        vec![doc! {"_id": 1, "l": [1, 2], "m": 1, "n": {"o": 1}}]
    );
}

#[test]
fn leading_match_is_exposed() {
    let p = Pipeline::parse(&[doc! {"$match": {"_id": 5}}, doc! {"$limit": 1}]).unwrap();
    let f = p.leading_match().expect("leading $match");
    assert!(f.matches(&doc! {"_id": 5}));
    assert!(!f.matches(&doc! {"_id": 6}));
    let p = Pipeline::parse(&[doc! {"$limit": 1}, doc! {"$match": {"_id": 5}}]).unwrap();
    assert!(p.leading_match().is_none());
}

#[test]
fn parse_errors_carry_mongodb_codes() {
    let e = err(vec![doc! {"$foo": {}}]);
    assert_eq!(e.code, 40324);
    assert_eq!(e.message, "Unrecognized pipeline stage name: '$foo'");
    assert_eq!(err(vec![doc! {"$lookup": {}}]).code, 2);
    assert_eq!(err(vec![doc! {"$match": {}, "$limit": 1}]).code, 40323);
    assert_eq!(err(vec![doc! {"$match": {"a": {"$bad": 1}}}]).code, 2);
    assert_eq!(err(vec![doc! {"$group": {"n": {"$sum": 1}}}]).code, 15955);
    assert_eq!(
        err(vec![doc! {"$group": {"_id": null, "n": {"$bad": 1}}}]).code,
        15952
    );
    assert_eq!(
        err(vec![doc! {"$group": {"_id": null, "n": 1}}]).code,
        40234
    );
    assert_eq!(
        err(vec![doc! {"$group": {"_id": null, "a.b": {"$sum": 1}}}]).code,
        40235
    );
    assert_eq!(
        err(vec![doc! {"$group": {"_id": {"$add": [1, 2]}}}]).code,
        168
    );
    assert_eq!(err(vec![doc! {"$sort": {}}]).code, 15976);
    assert_eq!(err(vec![doc! {"$sort": {"a": 0}}]).code, 15975);
    assert_eq!(err(vec![doc! {"$limit": 0}]).code, 15958);
    assert_eq!(err(vec![doc! {"$limit": "x"}]).code, 15957);
    assert_eq!(err(vec![doc! {"$skip": -1}]).code, 15956);
    assert_eq!(err(vec![doc! {"$count": ""}]).code, 40157);
    assert_eq!(err(vec![doc! {"$count": "$x"}]).code, 40158);
    assert_eq!(err(vec![doc! {"$count": "a.b"}]).code, 40160);
    assert_eq!(err(vec![doc! {"$count": 1}]).code, 40156);
    assert_eq!(err(vec![doc! {"$project": {"a": 1, "b": 0}}]).code, 31254);
    assert_eq!(err(vec![doc! {"$project": {}}]).code, 51272);
}

#[test]
fn coll_stats_counts_and_sizes_the_documents() {
    let docs = sales();
    let bytes: i64 = docs
        .iter()
        .map(|d| bson::to_vec(d).unwrap().len() as i64)
        .sum();
    let stages = vec![doc! {"$collStats": {"count": {}, "storageStats": {}}}];
    let p = Pipeline::parse(&stages).unwrap();
    let spec = p.coll_stats().expect("a leading $collStats");
    assert_eq!(
        spec,
        CollStats {
            count: true,
            storage: true
        }
    );
    let now = bson::DateTime::from_millis(1_700_000_000_000);
    let stats = coll_stats_document(spec, "db.c", "h:1", now, 2, docs.iter());
    let out = p.run(std::iter::once(stats)).unwrap();
    assert_eq!(out.len(), 1);
    let d = &out[0];
    assert_eq!(d.get_str("ns").unwrap(), "db.c");
    assert_eq!(d.get_str("host").unwrap(), "h:1");
    assert_eq!(d.get_datetime("localTime").unwrap(), &now);
    assert_eq!(d.get_i64("count").unwrap(), 5);
    let st = d.get_document("storageStats").unwrap();
    assert_eq!(st.get_i64("count").unwrap(), 5);
    assert_eq!(st.get_i64("size").unwrap(), bytes);
    assert_eq!(st.get_i64("avgObjSize").unwrap(), bytes / 5);
    assert_eq!(st.get_i32("nindexes").unwrap(), 2);

    // Only what was asked for; no avgObjSize without documents.
    let count_only = CollStats {
        count: true,
        storage: false,
    };
    let d = coll_stats_document(count_only, "db.c", "h", now, 1, [].iter());
    assert_eq!(d.get_i64("count").unwrap(), 0);
    assert!(!d.contains_key("storageStats"));
    let storage_only = CollStats {
        count: false,
        storage: true,
    };
    let d = coll_stats_document(storage_only, "db.c", "h", now, 1, [].iter());
    assert!(!d.contains_key("count"));
    assert!(!d
        .get_document("storageStats")
        .unwrap()
        .contains_key("avgObjSize"));

    // Later stages run on its document.
    let stages = vec![
        doc! {"$collStats": {"count": {}}},
        doc! {"$project": {"count": 1, "_id": 0}},
    ];
    let p = Pipeline::parse(&stages).unwrap();
    let stats = coll_stats_document(p.coll_stats().unwrap(), "db.c", "h", now, 1, docs.iter());
    assert_eq!(
        p.run(std::iter::once(stats)).unwrap(),
        vec![doc! {"count": 5_i64}]
    );
}

#[test]
fn coll_stats_is_first_stage_only_and_checks_its_spec() {
    let e = err(vec![
        doc! {"$match": {}},
        doc! {"$collStats": {"count": {}}},
    ]);
    assert_eq!(e.code, 40602);
    let e = err(vec![doc! {"$collStats": {"count": 1}}]);
    assert_eq!(e.code, 14);
    let e = err(vec![doc! {"$collStats": {"bogus": {}}}]);
    assert_eq!(e.code, 40415);
    let e = err(vec![doc! {"$collStats": 1}]);
    assert_eq!(e.code, 5447000);
    assert!(err(vec![doc! {"$collStats": {"latencyStats": {}}}])
        .message
        .contains("not supported"));
}

#[test]
fn add_fields_of_a_dotted_path_sets_it_in_each_element_of_an_array() {
    let input = vec![
        doc! {"_id": 1, "a": [{"b": 1}, {"b": 2}]},
        // Nested arrays are gone through too; a scalar element becomes a
        // document, an empty array stays empty.
        doc! {"_id": 2, "a": [[{"b": 3}], 5]},
        doc! {"_id": 3, "a": []},
        doc! {"_id": 4, "a": 7},
        doc! {"_id": 5},
        doc! {"_id": 6, "a": {"b": [{"c": 1}]}},
    ];
    let out = run(vec![doc! {"$set": {"a.z": 1, "a.b.y": "$_id"}}], input);
    assert_eq!(
        out,
        vec![
            doc! {"_id": 1, "a": [{"b": {"y": 1}, "z": 1}, {"b": {"y": 1}, "z": 1}]},
            doc! {"_id": 2, "a": [[{"b": {"y": 2}, "z": 1}], {"z": 1, "b": {"y": 2}}]},
            doc! {"_id": 3, "a": []},
            doc! {"_id": 4, "a": {"z": 1, "b": {"y": 4}}},
            doc! {"_id": 5, "a": {"z": 1, "b": {"y": 5}}},
            doc! {"_id": 6, "a": {"b": [{"c": 1, "y": 6}], "z": 1}},
        ]
    );
}

#[test]
fn add_fields_expressions_read_the_document_as_it_came_into_the_stage() {
    let out = run(
        vec![doc! {"$addFields": {"a": 1, "b": "$a", "c.d": "$c"}}],
        vec![doc! {"_id": 1, "a": 5, "c": 7}],
    );
    assert_eq!(out, vec![doc! {"_id": 1, "a": 1, "c": {"d": 7}, "b": 5}]);
}
