//! Tests of the commands on a standalone: each runs through [`execute`]
//! as a client's command would.

use bson::{doc, Bson, Document};

use super::*;

fn shared() -> Shared {
    Shared::new(crate::faults::Faults::new(Default::default()))
}

/// Runs `cmd` on database `db` of `s`.
fn run(s: &Shared, cmd: Document) -> Document {
    let mut cmd = cmd;
    cmd.insert("$db", "db");
    execute(s, 1, cmd)
}

fn ok(reply: &Document) -> bool {
    reply.get_f64("ok") == Ok(1.0)
}

fn insert(s: &Shared, coll: &str, docs: Vec<Document>) {
    let reply = run(s, doc! { "insert": coll, "documents": docs });
    assert!(ok(&reply) && !reply.contains_key("writeErrors"), "{reply}");
}

#[test]
fn distinct_reads_a_path_through_arrays_of_documents() {
    let s = shared();
    insert(
        &s,
        "c",
        vec![
            doc! { "_id": 1, "a": [{ "b": 1 }, { "b": 2 }] },
            doc! { "_id": 2, "a": { "b": [3, [4]] } },
            doc! { "_id": 3, "a": [{ "c": 5 }, { "b": 1 }] },
            doc! { "_id": 4, "a": 7 },
        ],
    );
    let reply = run(&s, doc! { "distinct": "c", "key": "a.b" });
    assert!(ok(&reply), "{reply}");
    let values = reply.get_array("values").unwrap();
    // Arrays unwound one level: [4] stays an array.
    assert_eq!(
        values,
        &vec![
            Bson::Int32(1),
            Bson::Int32(2),
            Bson::Int32(3),
            Bson::Array(vec![Bson::Int32(4)]),
        ]
    );
    let reply = run(
        &s,
        doc! { "distinct": "c", "key": "a.b", "query": { "_id": { "$gte": 3 } } },
    );
    assert_eq!(reply.get_array("values").unwrap(), &vec![Bson::Int32(1)]);
}

/// The first batch of a cursor reply.
fn batch(reply: &Document) -> Vec<Document> {
    reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap_or_else(|_| panic!("no cursor in {reply}"))
        .iter()
        .filter_map(|d| d.as_document().cloned())
        .collect()
}

#[test]
fn sparse_and_partial_indexes_keep_their_options_and_leave_documents_out() {
    let s = shared();
    let reply = run(
        &s,
        doc! { "createIndexes": "c", "indexes": [
            { "key": { "a": 1 }, "name": "a_1", "unique": true, "sparse": true },
            { "key": { "e": 1 }, "name": "e_1", "unique": true,
              "partialFilterExpression": { "live": true } },
        ] },
    );
    assert!(ok(&reply), "{reply}");
    let specs = batch(&run(&s, doc! { "listIndexes": "c" }));
    assert_eq!(
        specs[1],
        doc! { "v": 2, "key": { "a": 1 }, "name": "a_1", "unique": true, "sparse": true }
    );
    assert_eq!(
        specs[2],
        doc! { "v": 2, "key": { "e": 1 }, "name": "e_1", "unique": true,
        "partialFilterExpression": { "live": true } }
    );
    // Two documents without `a`, two with `e: 1` outside the filter.
    insert(
        &s,
        "c",
        vec![
            doc! { "_id": 1, "e": 1 },
            doc! { "_id": 2, "e": 1 },
            doc! { "_id": 3, "e": 1, "live": true },
        ],
    );
    let reply = run(
        &s,
        doc! { "insert": "c", "documents": [{ "_id": 4, "e": 1, "live": true }] },
    );
    let errors = reply.get_array("writeErrors").unwrap();
    assert_eq!(
        errors[0].as_document().unwrap().get_i32("code"),
        Ok(11000),
        "{reply}"
    );
    // Asking again for the same index is no change; the same name with
    // other options is a conflict.
    let again = run(
        &s,
        doc! { "createIndexes": "c", "indexes": [
            { "key": { "a": 1 }, "name": "a_1", "unique": true, "sparse": true },
        ] },
    );
    assert_eq!(again.get_str("note"), Ok("all indexes already exist"));
    let other = run(
        &s,
        doc! { "createIndexes": "c", "indexes": [{ "key": { "a": 1 }, "name": "a_1" }] },
    );
    assert_eq!(other.get_i32("code"), Ok(86), "{other}");
    // The same key under another filter is another index.
    let reply = run(
        &s,
        doc! { "createIndexes": "c", "indexes": [
            { "key": { "e": 1 }, "name": "e_1_dead", "partialFilterExpression": { "live": false } },
        ] },
    );
    assert!(ok(&reply), "{reply}");
    let reply = run(&s, doc! { "dropIndexes": "c", "index": { "e": 1 } });
    assert_eq!(reply.get_i32("code"), Ok(181), "{reply}");
    // A query is answered by a scan: each index misses documents.
    let explain = run(
        &s,
        doc! { "explain": { "find": "c", "filter": { "e": 1 } } },
    );
    let plan = explain
        .get_document("queryPlanner")
        .and_then(|p| p.get_document("winningPlan"))
        .unwrap();
    assert_eq!(plan.get_str("stage"), Ok("COLLSCAN"), "{explain}");
    let found = batch(&run(&s, doc! { "find": "c", "filter": { "e": 1 } }));
    assert_eq!(found.len(), 3);
    // A filter that is not a document, or does not parse, is refused.
    let reply = run(
        &s,
        doc! { "createIndexes": "c", "indexes": [
            { "key": { "b": 1 }, "name": "b_1", "partialFilterExpression": 5 },
        ] },
    );
    assert_eq!(reply.get_i32("code"), Ok(14), "{reply}");
    assert_eq!(
        reply.get_str("errmsg"),
        Ok("The field 'partialFilterExpression' must be an object, but got int")
    );
    let reply = run(
        &s,
        doc! { "createIndexes": "c", "indexes": [
            { "key": { "b": 1 }, "name": "b_1", "partialFilterExpression": { "b": { "$foo": 1 } } },
        ] },
    );
    assert_eq!(reply.get_i32("code"), Ok(2), "{reply}");
}

fn count(s: &Shared, coll: &str) -> i64 {
    let reply = run(s, doc! { "count": coll });
    reply.get_i64("n").unwrap()
}

#[test]
fn a_write_statement_without_q_refuses_the_whole_command() {
    let s = shared();
    insert(&s, "c", (0..3).map(|i| doc! { "_id": i, "x": i }).collect());
    let refused = |cmd: Document, code: i32, errmsg: &str| {
        let reply = run(&s, cmd.clone());
        assert_eq!(reply.get_f64("ok"), Ok(0.0), "{cmd} -> {reply}");
        assert_eq!(reply.get_i32("code"), Ok(code), "{cmd} -> {reply}");
        assert_eq!(reply.get_str("errmsg"), Ok(errmsg), "{cmd} -> {reply}");
    };
    refused(
        doc! { "delete": "c", "deletes": [{ "limit": 0 }] },
        40414,
        "BSON field 'delete.deletes.q' is missing but a required field",
    );
    refused(
        doc! { "delete": "c", "deletes": [{ "q": {} }] },
        40414,
        "BSON field 'delete.deletes.limit' is missing but a required field",
    );
    refused(
        doc! { "delete": "c", "deletes": [{ "q": 5, "limit": 0 }] },
        14,
        "BSON field 'delete.deletes.q' is the wrong type 'int', expected type 'object'",
    );
    refused(
        doc! { "delete": "c", "deletes": [{ "q": {}, "limit": 0.5 }] },
        9,
        "The limit field in delete objects must be 0 or 1. Got 0.5",
    );
    // A good statement before a bad one does not run either.
    refused(
        doc! { "delete": "c", "deletes": [{ "q": { "_id": 0 }, "limit": 1 }, { "limit": 0 }] },
        40414,
        "BSON field 'delete.deletes.q' is missing but a required field",
    );
    assert_eq!(count(&s, "c"), 3);
    refused(
        doc! { "update": "c", "updates": [{ "u": { "$set": { "x": 9 } }, "multi": true }] },
        40414,
        "BSON field 'update.updates.q' is missing but a required field",
    );
    refused(
        doc! { "update": "c", "updates": [{ "q": {} }] },
        40414,
        "BSON field 'update.updates.u' is missing but a required field",
    );
    refused(
        doc! { "update": "c", "updates": [{ "q": [], "u": { "$set": { "x": 9 } } }] },
        14,
        "BSON field 'update.updates.q' is the wrong type 'array', expected type 'object'",
    );
    let unchanged = run(&s, doc! { "count": "c", "query": { "x": 9 } });
    assert_eq!(unchanged.get_i64("n"), Ok(0));
    // With every field, both run.
    let reply = run(
        &s,
        doc! { "delete": "c", "deletes": [{ "q": { "x": { "$gte": 1 } }, "limit": 1 }] },
    );
    assert_eq!(reply.get_i32("n"), Ok(1), "{reply}");
    let reply = run(
        &s,
        doc! { "delete": "c", "deletes": [{ "q": {}, "limit": 0 }] },
    );
    assert_eq!(reply.get_i32("n"), Ok(2), "{reply}");
}

#[test]
fn create_of_an_existing_collection_is_ok_unless_it_asks_for_options() {
    let s = shared();
    let plain = doc! { "create": "c", "writeConcern": { "w": 1 }, "lsid": { "id": 1 } };
    assert!(ok(&run(&s, plain.clone())));
    insert(&s, "c", vec![doc! { "_id": 1 }]);
    // The same plain create again: ok, and the documents stay.
    let again = run(&s, plain);
    assert!(ok(&again), "{again}");
    assert!(ok(&run(&s, doc! { "create": "c", "capped": false })));
    assert_eq!(count(&s, "c"), 1);
    // Options a plain collection does not have differ from its own.
    for options in [
        doc! { "capped": true, "size": 4096 },
        doc! { "validator": { "a": { "$exists": true } } },
        doc! { "viewOn": "d", "pipeline": [] },
    ] {
        let mut cmd = doc! { "create": "c" };
        cmd.extend(options);
        let reply = run(&s, cmd.clone());
        assert_eq!(reply.get_i32("code"), Ok(48), "{cmd} -> {reply}");
        assert_eq!(reply.get_str("codeName"), Ok("NamespaceExists"));
    }
}

#[test]
fn aggregate_with_explain_answers_the_plan_explain_gives() {
    let s = shared();
    insert(
        &s,
        "c",
        (0..10).map(|i| doc! { "_id": i, "a": i % 3 }).collect(),
    );
    let reply = run(
        &s,
        doc! { "createIndexes": "c", "indexes": [{ "key": { "a": 1 }, "name": "a_1" }] },
    );
    assert!(ok(&reply), "{reply}");
    let pipeline = vec![
        doc! { "$match": { "a": 1 } },
        doc! { "$group": { "_id": null, "n": { "$sum": 1 } } },
    ];
    let reply = run(
        &s,
        doc! { "aggregate": "c", "pipeline": pipeline.clone(), "explain": true, "lsid": { "id": 1 } },
    );
    assert!(ok(&reply), "{reply}");
    // A plan, not the pipeline's results.
    assert!(!reply.contains_key("cursor"), "{reply}");
    let explained = run(
        &s,
        doc! { "explain": { "aggregate": "c", "pipeline": pipeline.clone() } },
    );
    assert_eq!(reply, explained);
    let plan = reply
        .get_document("queryPlanner")
        .and_then(|p| p.get_document("winningPlan"))
        .unwrap();
    assert_eq!(
        plan.get_document("inputStage")
            .and_then(|s| s.get_str("indexName")),
        Ok("a_1"),
        "{reply}"
    );
    // With a cursor too; an unknown stage is still refused.
    let with_cursor = run(
        &s,
        doc! { "aggregate": "c", "pipeline": pipeline, "cursor": {}, "explain": true },
    );
    assert_eq!(
        with_cursor.get_document("queryPlanner"),
        reply.get_document("queryPlanner")
    );
    let bad = run(
        &s,
        doc! { "aggregate": "c", "pipeline": [{ "$nope": {} }], "explain": true },
    );
    assert_eq!(bad.get_i32("code"), Ok(40324), "{bad}");
}
