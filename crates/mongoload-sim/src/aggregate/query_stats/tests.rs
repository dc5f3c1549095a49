//! Tests of `$queryStats`: the shapes, literals as types, metrics per key,
//! cursors and errors.

use super::*;

fn ok_reply(n: usize) -> Document {
    let batch: Vec<Bson> = (0..n)
        .map(|i| Bson::Document(doc! { "i": i as i32 }))
        .collect();
    doc! { "cursor": { "firstBatch": batch, "id": 0_i64, "ns": "test.products" }, "ok": 1.0 }
}

/// The examples of MongoDB's `$queryStats` page: `find({ item: "card" })`
/// and `aggregate([{ $match: { qty: { $gt: 20 } } }])` on test.products.
#[test]
fn shapes_are_the_documented_ones() {
    let find = doc! { "find": "products", "filter": { "item": "card" }, "$db": "test" };
    let k = key(&find, None).unwrap();
    assert_eq!(
        k.get_document("queryShape").unwrap(),
        &doc! {
            "cmdNs": { "db": "test", "coll": "products" },
            "command": "find",
            "filter": { "item": { "$eq": "?string" } },
        }
    );
    assert_eq!(k.get_str("collectionType").unwrap(), "collection");
    let agg = doc! {
        "aggregate": "products",
        "pipeline": [{ "$match": { "qty": { "$gt": 20 } } }],
        "cursor": {},
        "$db": "test",
    };
    let k = key(&agg, None).unwrap();
    assert_eq!(
        k.get_document("queryShape").unwrap(),
        &doc! {
            "cmdNs": { "db": "test", "coll": "products" },
            "command": "aggregate",
            "pipeline": [{ "$match": { "qty": { "$gt": "?number" } } }],
        }
    );
    assert_eq!(k.get_document("cursor").unwrap(), &doc! {});
}

#[test]
fn literals_become_their_types_and_structure_stays() {
    let find = doc! {
        "find": "c",
        "filter": {
            "a": { "$gte": 1_i64, "$lt": 2.5 },
            "b": { "$in": ["x", "y"] },
            "$or": [{ "d": bson::DateTime::from_millis(0) }, { "e": true }],
            "f": { "$exists": true },
        },
        "sort": { "a": -1 },
        "projection": { "a": 1, "_id": 0 },
        "limit": 5,
        "$db": "db",
    };
    let s = key(&find, None)
        .unwrap()
        .get_document("queryShape")
        .unwrap()
        .clone();
    assert_eq!(
        s.get_document("filter").unwrap(),
        &doc! {
            "a": { "$gte": "?number", "$lt": "?number" },
            "b": { "$in": "?array<?string>" },
            "$or": [{ "d": { "$eq": "?date" } }, { "e": { "$eq": "?bool" } }],
            "f": { "$exists": true },
        }
    );
    assert_eq!(s.get_document("sort").unwrap(), &doc! { "a": -1 });
    assert_eq!(
        s.get_document("projection").unwrap(),
        &doc! { "a": true, "_id": false }
    );
    assert_eq!(s.get_str("limit").unwrap(), "?number");
    let distinct = doc! { "distinct": "c", "key": "k", "query": { "n": 3 }, "$db": "db" };
    let s = key(&distinct, None)
        .unwrap()
        .get_document("queryShape")
        .unwrap()
        .clone();
    assert_eq!(s.get_str("key").unwrap(), "k");
    assert_eq!(
        s.get_document("query").unwrap(),
        &doc! { "n": { "$eq": "?number" } }
    );
    let group = doc! {
        "aggregate": "c",
        "pipeline": [
            { "$group": { "_id": "$s", "n": { "$sum": 1 } } },
            { "$limit": 3 },
        ],
        "cursor": { "batchSize": 10 },
        "$db": "db",
    };
    let k = key(&group, None).unwrap();
    assert_eq!(
        k.get_document("queryShape")
            .unwrap()
            .get_array("pipeline")
            .unwrap(),
        &vec![
            Bson::Document(doc! { "$group": { "_id": "$s", "n": { "$sum": "?number" } } }),
            Bson::Document(doc! { "$limit": "?number" }),
        ]
    );
    assert_eq!(
        k.get_document("cursor").unwrap(),
        &doc! { "batchSize": "?number" }
    );
    // Writes, system namespaces and failed commands are not recorded.
    for cmd in [
        doc! { "insert": "c", "documents": [{ "a": 1 }], "$db": "db" },
        doc! { "update": "c", "updates": [], "$db": "db" },
        doc! { "find": "system.profile", "$db": "db" },
        doc! { "find": "c", "$db": "admin" },
    ] {
        assert_eq!(key(&cmd, None), None, "{cmd}");
    }
}

#[test]
fn metrics_sum_the_executions_of_one_key() {
    let qs = QueryStats::default();
    let client =
        doc! { "application": { "name": "shop" }, "driver": { "name": "rust", "version": "3" } };
    let t0 = DateTime::from_millis(1_700_000_000_000);
    let t1 = DateTime::from_millis(1_700_000_005_000);
    for (i, micros) in [(1, 100_u64), (2, 300), (3, 200)] {
        let find = doc! { "find": "c", "filter": { "a": i }, "$db": "db" };
        let at = if i == 3 { t1 } else { t0 };
        qs.record(
            &find,
            &ok_reply(i as usize),
            Duration::from_micros(micros),
            Some(&client),
            at,
        );
    }
    // Another client is another key; a failure is not recorded.
    let find = doc! { "find": "c", "filter": { "a": 9 }, "$db": "db" };
    qs.record(&find, &ok_reply(1), Duration::from_micros(5), None, t0);
    qs.record(
        &find,
        &doc! { "ok": 0.0, "code": 2 },
        Duration::from_micros(5),
        None,
        t0,
    );
    let out = qs.output(t1);
    assert_eq!(out.len(), 2);
    let e = out
        .iter()
        .find(|e| e.get_document("key").unwrap().contains_key("client"))
        .unwrap();
    let m = e.get_document("metrics").unwrap();
    assert_eq!(m.get_i64("execCount").unwrap(), 3);
    assert_eq!(m.get_i64("lastExecutionMicros").unwrap(), 200);
    let t = m.get_document("totalExecMicros").unwrap();
    assert_eq!(
        (
            t.get_i64("sum").unwrap(),
            t.get_i64("max").unwrap(),
            t.get_i64("min").unwrap()
        ),
        (600, 300, 100)
    );
    assert_eq!(
        t.get("sumOfSquares"),
        Some(&Bson::Decimal128(decimal(140_000)))
    );
    assert_eq!(decimal(140_000).to_string(), "140000");
    let d = m.get_document("docsReturned").unwrap();
    assert_eq!(
        (d.get_i64("sum").unwrap(), d.get_i64("max").unwrap()),
        (6, 3)
    );
    assert_eq!(m.get_datetime("firstSeenTimestamp").unwrap(), &t0);
    assert_eq!(m.get_datetime("latestSeenTimestamp").unwrap(), &t1);
    assert_eq!(
        e.get_timestamp("asOf").unwrap(),
        Timestamp {
            time: 1_700_000_005,
            increment: 0
        }
    );
    let k = e.get_document("key").unwrap();
    assert_eq!(k.get_document("client").unwrap(), &client);
    assert_eq!(e.get_str("keyHash").unwrap(), hash_b64(k));
    assert_eq!(e.get_str("queryShapeHash").unwrap().len(), 64);
    // Both entries share the query shape, so its hash.
    assert_eq!(
        out[0].get_str("queryShapeHash").unwrap(),
        out[1].get_str("queryShapeHash").unwrap()
    );
}

/// A cursor's getMores join its command's execution, recorded when
/// the cursor is exhausted or killed.
#[test]
fn an_execution_spans_its_cursor() {
    let qs = QueryStats::default();
    let t0 = DateTime::from_millis(1_700_000_000_000);
    let batch = |key: &str, n: usize, id: i64| {
        let docs: Vec<Bson> = (0..n)
            .map(|i| Bson::Document(doc! { "i": i as i32 }))
            .collect();
        doc! { "cursor": { key: docs, "id": id, "ns": "db.c" }, "ok": 1.0 }
    };
    let find = doc! { "find": "c", "filter": { "a": 1 }, "$db": "db" };
    let more = |id: i64| doc! { "getMore": id, "collection": "c", "$db": "db" };
    qs.record(
        &find,
        &batch("firstBatch", 2, 7),
        Duration::from_micros(100),
        None,
        t0,
    );
    assert!(qs.output(t0).is_empty(), "recorded when the cursor closes");
    qs.record(
        &more(7),
        &batch("nextBatch", 3, 7),
        Duration::from_micros(40),
        None,
        t0,
    );
    qs.record(
        &more(7),
        &batch("nextBatch", 1, 0),
        Duration::from_micros(10),
        None,
        t0,
    );
    // Another execution, killed after its first batch.
    qs.record(
        &find,
        &batch("firstBatch", 4, 8),
        Duration::from_micros(60),
        None,
        t0,
    );
    qs.record(
        &doc! { "killCursors": "c", "cursors": [8_i64], "$db": "db" },
        &doc! { "ok": 1.0 },
        Duration::from_micros(1),
        None,
        t0,
    );
    let out = qs.output(t0);
    assert_eq!(out.len(), 1);
    let m = out[0].get_document("metrics").unwrap();
    assert_eq!(m.get_i64("execCount").unwrap(), 2);
    let total = m.get_document("totalExecMicros").unwrap();
    assert_eq!(
        (total.get_i64("sum").unwrap(), total.get_i64("max").unwrap()),
        (210, 150)
    );
    let first = m.get_document("firstResponseExecMicros").unwrap();
    assert_eq!(
        (first.get_i64("sum").unwrap(), first.get_i64("max").unwrap()),
        (160, 100)
    );
    let docs = m.get_document("docsReturned").unwrap();
    assert_eq!(
        (
            docs.get_i64("sum").unwrap(),
            docs.get_i64("max").unwrap(),
            docs.get_i64("min").unwrap()
        ),
        (10, 6, 4)
    );
}

#[test]
fn the_stage_answers_mongodb_errors() {
    let cmd =
        doc! { "aggregate": 1, "pipeline": [{ "$queryStats": {} }], "cursor": {}, "$db": "admin" };
    let empty = Bson::Document(Document::new());
    assert!(QueryStats::default()
        .stage("admin", &cmd, &empty, true)
        .is_ok());
    let older = QueryStats::new(false, true).stage("admin", &cmd, &empty, false);
    assert_eq!(older.unwrap_err().code, 40324);
    let on_db = QueryStats::default().stage("shop", &cmd, &empty, false);
    assert_eq!(on_db.unwrap_err().code, 73);
    let denied = QueryStats::new(true, false)
        .stage("admin", &cmd, &empty, true)
        .unwrap_err();
    assert_eq!((denied.code, denied.code_name), (13, "Unauthorized"));
    assert!(
        denied
            .message
            .starts_with("not authorized on admin to execute command"),
        "{}",
        denied.message
    );
    // Without authentication there is no privilege to lack.
    assert!(QueryStats::new(true, false)
        .stage("admin", &cmd, &empty, false)
        .is_ok());
}
