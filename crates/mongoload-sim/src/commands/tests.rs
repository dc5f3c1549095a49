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
