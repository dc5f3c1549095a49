//! The official `mongodb` driver against the simulator over TCP: every
//! command of issue 2, cursors, duplicate keys, indexes, aggregation and
//! each fault kind.

use crate::common;

use std::time::{Duration, Instant};

use common::error_code as code;
use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::options::{FindOptions, IndexOptions, ReturnDocument};
use mongodb::{Client, IndexModel};
use mongoload::sim::{ErrorFault, LatencyDist, SimHandle, Stall};

async fn sim_and_client() -> (SimHandle, Client) {
    let sim = common::sim().await;
    let client = client_for(&sim, true).await;
    (sim, client)
}

async fn client_for(sim: &SimHandle, retry: bool) -> Client {
    common::driver_client(&sim.uri(), retry, Duration::from_secs(2)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_admin_commands_and_unknown_command() {
    let (sim, client) = sim_and_client().await;
    let admin = client.database("admin");
    assert_eq!(
        admin
            .run_command(doc! {"ping": 1})
            .await
            .unwrap()
            .get_f64("ok"),
        Ok(1.0)
    );
    let hello = admin.run_command(doc! {"hello": 1}).await.unwrap();
    assert_eq!(hello.get_bool("isWritablePrimary"), Ok(true));
    assert_eq!(hello.get_i32("maxWireVersion"), Ok(21));
    assert_eq!(hello.get_i32("maxBsonObjectSize"), Ok(16 * 1024 * 1024));
    assert_eq!(hello.get_i32("maxMessageSizeBytes"), Ok(48_000_000));
    assert_eq!(hello.get_i32("maxWriteBatchSize"), Ok(100_000));
    assert_eq!(hello.get_i32("logicalSessionTimeoutMinutes"), Ok(30));
    assert!(!hello.contains_key("compression"));
    let build = admin.run_command(doc! {"buildInfo": 1}).await.unwrap();
    assert!(build.get_str("version").unwrap().contains("mongoload-sim"));

    let coll = client.database("d").collection::<Document>("c");
    coll.insert_many((0..5).map(|i| doc! {"_id": i}))
        .await
        .unwrap();
    coll.find_one(doc! {"_id": 1}).await.unwrap();
    let status = admin.run_command(doc! {"serverStatus": 1}).await.unwrap();
    let ops = status.get_document("opcounters").unwrap();
    assert_eq!(ops.get_i64("insert"), Ok(5));
    assert!(ops.get_i64("query").unwrap() >= 1);
    assert!(
        status
            .get_document("connections")
            .unwrap()
            .get_i32("current")
            .unwrap()
            >= 1
    );
    assert!(status.contains_key("uptime"));

    let err = admin.run_command(doc! {"frobnicate": 1}).await.unwrap_err();
    match &*err.kind {
        ErrorKind::Command(c) => {
            assert_eq!(c.code, 59);
            assert_eq!(c.code_name, "CommandNotFound");
            assert_eq!(c.message, "no such command: 'frobnicate'");
        }
        other => panic!("unexpected {other:?}"),
    }
    let names = client.list_database_names().await.unwrap();
    assert_eq!(names, vec!["d".to_owned()]);
    client.database("d").run_command(doc! {"endSessions": [{"id": Bson::Binary(mongodb::bson::Binary { subtype: mongodb::bson::spec::BinarySubtype::Uuid, bytes: vec![0; 16] })}]}).await.unwrap();
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crud_round_trip() {
    let (_sim, client) = sim_and_client().await;
    let coll = client.database("shop").collection::<Document>("items");
    let id = coll
        .insert_one(doc! {"name": "a", "qty": 1, "tags": ["x"]})
        .await
        .unwrap()
        .inserted_id;
    assert!(matches!(id, Bson::ObjectId(_)));
    coll.insert_many(
        (0..10).map(
            |i| doc! {"_id": i, "name": format!("n{i}"), "qty": i, "meta": {"even": i % 2 == 0}},
        ),
    )
    .await
    .unwrap();
    assert_eq!(
        coll.find_one(doc! {"_id": 3})
            .await
            .unwrap()
            .unwrap()
            .get_str("name"),
        Ok("n3")
    );
    assert_eq!(
        coll.find_one(doc! {"_id": &id})
            .await
            .unwrap()
            .unwrap()
            .get_str("name"),
        Ok("a")
    );
    assert!(coll.find_one(doc! {"_id": 99}).await.unwrap().is_none());

    let found: Vec<Document> = coll
        .find(doc! {"qty": {"$gte": 2, "$lt": 8}, "meta.even": true})
        .sort(doc! {"qty": -1})
        .skip(1)
        .limit(2)
        .projection(doc! {"name": 1, "_id": 0})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(found, vec![doc! {"name": "n4"}, doc! {"name": "n2"}]);

    let r = coll
        .update_one(
            doc! {"_id": 1},
            doc! {"$set": {"name": "one"}, "$inc": {"qty": 10}},
        )
        .await
        .unwrap();
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    let r = coll
        .update_many(doc! {"qty": {"$lt": 5}}, doc! {"$unset": {"meta": ""}})
        .await
        .unwrap();
    assert_eq!(r.matched_count, 5); // _id 0, 2, 3, 4 and the "a" document
    let r = coll
        .update_one(
            doc! {"_id": 50},
            doc! {"$set": {"name": "up"}, "$setOnInsert": {"new": true}},
        )
        .upsert(true)
        .await
        .unwrap();
    assert_eq!(r.upserted_id, Some(Bson::Int32(50)));
    assert_eq!(
        coll.find_one(doc! {"_id": 50}).await.unwrap().unwrap(),
        doc! {"_id": 50, "name": "up", "new": true}
    );
    let r = coll
        .replace_one(doc! {"_id": 2}, doc! {"name": "two"})
        .await
        .unwrap();
    assert_eq!(r.modified_count, 1);
    assert_eq!(
        coll.find_one(doc! {"_id": 2}).await.unwrap().unwrap(),
        doc! {"_id": 2, "name": "two"}
    );

    let after = coll
        .find_one_and_update(doc! {"_id": 3}, doc! {"$inc": {"qty": 100}})
        .return_document(ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after.get_i32("qty"), Ok(103));
    let before = coll
        .find_one_and_update(doc! {"_id": 3}, doc! {"$inc": {"qty": 1}})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(before.get_i32("qty"), Ok(103));
    let gone = coll
        .find_one_and_delete(doc! {"_id": 3})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(gone.get_i32("qty"), Ok(104));
    let replaced = coll
        .find_one_and_replace(doc! {"_id": 4}, doc! {"k": 1})
        .return_document(ReturnDocument::After)
        .await
        .unwrap();
    assert_eq!(replaced, Some(doc! {"_id": 4, "k": 1}));

    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 11);
    assert_eq!(
        coll.count_documents(doc! {"qty": {"$gte": 5}})
            .await
            .unwrap(),
        6
    );
    assert_eq!(coll.estimated_document_count().await.unwrap(), 11);
    let mut names = coll
        .distinct("name", doc! {"_id": {"$in": [0, 1, 2]}})
        .await
        .unwrap();
    names.sort_by_key(|b| b.to_string());
    assert_eq!(
        names,
        vec![Bson::from("n0"), Bson::from("one"), Bson::from("two")]
    );

    assert_eq!(
        coll.delete_one(doc! {"qty": {"$gte": 5}})
            .await
            .unwrap()
            .deleted_count,
        1
    );
    assert_eq!(
        coll.delete_many(doc! {"qty": {"$gte": 5}})
            .await
            .unwrap()
            .deleted_count,
        5
    );
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursors_page_through_getmore_and_are_killed() {
    let (sim, client) = sim_and_client().await;
    let coll = client.database("d").collection::<Document>("many");
    coll.insert_many((0..250).map(|i| doc! {"_id": i, "v": i % 7}))
        .await
        .unwrap();
    let opts = FindOptions::builder().batch_size(20).build();
    let all: Vec<Document> = coll
        .find(doc! {})
        .with_options(opts)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let ids: Vec<i32> = all.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(ids, (0..250).collect::<Vec<_>>());
    let status = client
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .await
        .unwrap();
    assert!(
        status
            .get_document("opcounters")
            .unwrap()
            .get_i64("getmore")
            .unwrap()
            >= 12
    );
    assert_eq!(sim.open_cursors(), 0);

    // A cursor dropped half-way is killed by the driver.
    let mut cursor = coll.find(doc! {}).batch_size(10).await.unwrap();
    for _ in 0..15 {
        cursor.try_next().await.unwrap().unwrap();
    }
    assert_eq!(sim.open_cursors(), 1);
    drop(cursor);
    let deadline = Instant::now() + Duration::from_secs(5);
    while sim.open_cursors() != 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(sim.open_cursors(), 0, "killCursors freed the cursor");

    // getMore on an unknown cursor is CursorNotFound.
    let err = client
        .database("d")
        .run_command(doc! {"getMore": 12345i64, "collection": "many"})
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(43));
    let killed = client
        .database("d")
        .run_command(doc! {"killCursors": "many", "cursors": [777i64]})
        .await
        .unwrap();
    assert_eq!(
        killed.get_array("cursorsNotFound").unwrap(),
        &vec![Bson::Int64(777)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn duplicate_keys_in_ordered_and_unordered_batches() {
    let (_sim, client) = sim_and_client().await;
    let coll = client.database("d").collection::<Document>("dups");
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    let err = coll.insert_one(doc! {"_id": 1}).await.unwrap_err();
    match &*err.kind {
        ErrorKind::Write(WriteFailure::WriteError(w)) => {
            assert_eq!(w.code, 11000);
            assert_eq!(
                w.message,
                "E11000 duplicate key error collection: d.dups index: _id_ dup key: { _id: 1 }"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    // Ordered: stops at the first error (index 1), so 3 and 4 are not inserted.
    let err = coll
        .insert_many(vec![
            doc! {"_id": 2},
            doc! {"_id": 1},
            doc! {"_id": 3},
            doc! {"_id": 1},
        ])
        .await
        .unwrap_err();
    let ErrorKind::InsertMany(m) = &*err.kind else {
        panic!("unexpected {err:?}")
    };
    let we = m.write_errors.as_ref().unwrap();
    assert_eq!(we.len(), 1);
    assert_eq!((we[0].index, we[0].code), (1, 11000));
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 2);
    // Unordered: goes on after errors.
    let err = coll
        .insert_many(vec![
            doc! {"_id": 1},
            doc! {"_id": 4},
            doc! {"_id": 2},
            doc! {"_id": 5},
        ])
        .ordered(false)
        .await
        .unwrap_err();
    let ErrorKind::InsertMany(m) = &*err.kind else {
        panic!("unexpected {err:?}")
    };
    let idx: Vec<usize> = m
        .write_errors
        .as_ref()
        .unwrap()
        .iter()
        .map(|w| w.index)
        .collect();
    assert_eq!(idx, vec![0, 2]);
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 4);

    // Unique secondary index: documents without the field count as null
    // duplicates, as in MongoDB; with distinct values it builds.
    let unique_email = || {
        IndexModel::builder()
            .keys(doc! {"email": 1})
            .options(IndexOptions::builder().unique(true).build())
            .build()
    };
    let err = coll.create_index(unique_email()).await.unwrap_err();
    assert_eq!(code(&err), Some(11000));
    for i in [1, 2, 4, 5] {
        coll.update_one(doc! {"_id": i}, doc! {"$set": {"email": format!("e{i}@x")}})
            .await
            .unwrap();
    }
    coll.create_index(unique_email()).await.unwrap();
    let err = coll
        .update_one(doc! {"_id": 2}, doc! {"$set": {"email": "e1@x"}})
        .await
        .unwrap_err();
    match &*err.kind {
        ErrorKind::Write(WriteFailure::WriteError(w)) => {
            assert_eq!(w.code, 11000);
            assert!(
                w.message
                    .contains("index: email_1 dup key: { email: \"e1@x\" }"),
                "{}",
                w.message
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    let err = coll
        .insert_one(doc! {"_id": 9, "email": "e4@x"})
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(11000));
    // A unique index cannot be built over existing duplicates.
    coll.update_many(doc! {}, doc! {"$set": {"team": 1}})
        .await
        .unwrap();
    let err = coll
        .create_index(
            IndexModel::builder()
                .keys(doc! {"team": 1})
                .options(IndexOptions::builder().unique(true).build())
                .build(),
        )
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(11000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_serve_range_scans_and_sorts() {
    let (_sim, client) = sim_and_client().await;
    let coll = client.database("d").collection::<Document>("ix");
    coll.insert_many(
        (0..500).map(|i| doc! {"_id": i, "k": (i * 37) % 100, "c": format!("c{}", i % 3)}),
    )
    .await
    .unwrap();
    let created = coll
        .create_index(IndexModel::builder().keys(doc! {"k": 1}).build())
        .await
        .unwrap();
    assert_eq!(created.index_name, "k_1");
    coll.create_index(IndexModel::builder().keys(doc! {"c": 1, "k": 1}).build())
        .await
        .unwrap();
    let mut names = coll.list_index_names().await.unwrap();
    names.sort();
    assert_eq!(names, vec!["_id_", "c_1_k_1", "k_1"]);

    // Range on k with a sort on k, limited: correct order and content.
    let got: Vec<Document> = coll
        .find(doc! {"k": {"$gt": 10, "$lte": 20}})
        .sort(doc! {"k": 1, "_id": 1})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let mut expect: Vec<(i32, i32)> = (0..500)
        .map(|i| ((i * 37) % 100, i))
        .filter(|(k, _)| *k > 10 && *k <= 20)
        .collect();
    expect.sort();
    let pairs: Vec<(i32, i32)> = got
        .iter()
        .map(|d| (d.get_i32("k").unwrap(), d.get_i32("_id").unwrap()))
        .collect();
    assert_eq!(pairs, expect);
    // Descending sort on the indexed field with a limit.
    let top: Vec<i32> = coll
        .find(doc! {})
        .sort(doc! {"k": -1})
        .limit(3)
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .iter()
        .map(|d| d.get_i32("k").unwrap())
        .collect();
    assert_eq!(top, vec![99, 99, 99]);
    // Compound index, equality on its first field, and the index kept on writes.
    coll.update_many(doc! {"c": "c1"}, doc! {"$set": {"c": "moved"}})
        .await
        .unwrap();
    assert_eq!(coll.count_documents(doc! {"c": "c1"}).await.unwrap(), 0);
    assert_eq!(
        coll.count_documents(doc! {"c": "moved"}).await.unwrap(),
        167
    );
    coll.delete_many(doc! {"k": {"$in": [1, 2, 3]}})
        .await
        .unwrap();
    assert_eq!(
        coll.count_documents(doc! {"k": {"$lte": 3}}).await.unwrap(),
        5
    );
    coll.drop_index("k_1").await.unwrap();
    assert_eq!(coll.list_index_names().await.unwrap().len(), 2);
    assert_eq!(code(&coll.drop_index("nope").await.unwrap_err()), Some(27));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregate_count_and_group() {
    let (_sim, client) = sim_and_client().await;
    let coll = client.database("d").collection::<Document>("agg");
    coll.insert_many((0..30).map(|i| doc! {"_id": i, "g": i % 3, "v": i}))
        .await
        .unwrap();
    let out: Vec<Document> = coll
        .aggregate(vec![
            doc! {"$match": {"_id": {"$gte": 3}}},
            doc! {"$group": {"_id": "$g", "total": {"$sum": "$v"}, "n": {"$sum": 1}, "hi": {"$max": "$v"}}},
            doc! {"$sort": {"_id": 1}},
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].get("_id"), Some(&Bson::Int32(0)));
    let total0: i64 = (3..30).filter(|i| i % 3 == 0).sum();
    let t = out[0].get("total").unwrap();
    assert_eq!(t.as_i64().or(t.as_i32().map(i64::from)), Some(total0));
    assert_eq!(out[2].get("hi"), Some(&Bson::Int32(29)));
    let counted: Vec<Document> = coll
        .aggregate(vec![
            doc! {"$match": {"g": 1}},
            doc! {"$skip": 2},
            doc! {"$limit": 5},
            doc! {"$count": "n"},
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(counted, vec![doc! {"n": 5}]);
    let err = coll.aggregate(vec![doc! {"$frob": {}}]).await.unwrap_err();
    assert_eq!(code(&err), Some(40324));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collections_and_databases() {
    let (_sim, client) = sim_and_client().await;
    let db = client.database("cat");
    db.create_collection("a").await.unwrap();
    // Again with the same options: ok, as MongoDB 7.0; with others: 48.
    db.create_collection("a").await.unwrap();
    assert_eq!(
        code(
            &db.create_collection("a")
                .capped(true)
                .size(4096)
                .await
                .unwrap_err()
        ),
        Some(48)
    );
    db.collection::<Document>("b")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    let mut names = db.list_collection_names().await.unwrap();
    names.sort();
    assert_eq!(names, vec!["a", "b"]);
    let filtered = db
        .list_collection_names()
        .filter(doc! {"name": "b"})
        .await
        .unwrap();
    assert_eq!(filtered, vec!["b"]);
    db.collection::<Document>("a").drop().await.unwrap();
    db.collection::<Document>("never").drop().await.unwrap();
    assert_eq!(db.list_collection_names().await.unwrap(), vec!["b"]);
    assert_eq!(
        code(
            &db.collection::<Document>("zz")
                .list_index_names()
                .await
                .unwrap_err()
        ),
        Some(26)
    );
    db.drop().await.unwrap();
    assert!(client.list_database_names().await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_max_time_and_stall_faults() {
    let (sim, client) = sim_and_client().await;
    let coll = client.database("d").collection::<Document>("f");
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    sim.faults()
        .set_latency(Some(LatencyDist::Fixed(Duration::from_millis(150))));
    let t = Instant::now();
    coll.find_one(doc! {"_id": 1}).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(150));
    // Injected latency beyond maxTimeMS: code 50 after maxTimeMS.
    let t = Instant::now();
    let err = coll
        .find(doc! {})
        .max_time(Duration::from_millis(40))
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(50));
    assert!(
        t.elapsed() < Duration::from_millis(140),
        "{:?}",
        t.elapsed()
    );
    sim.faults()
        .set_latency(Some("uniform:5ms..10ms".parse().unwrap()));
    let t = Instant::now();
    coll.find_one(doc! {"_id": 1}).await.unwrap();
    assert!(t.elapsed() >= Duration::from_millis(5));
    sim.faults().set_latency(None);

    // A stall of 300 ms every 10 s, just set: the next reply is held.
    sim.faults().set_stall(Some(Stall {
        duration: Duration::from_millis(300),
        period: Duration::from_secs(10),
    }));
    let t = Instant::now();
    coll.find_one(doc! {"_id": 1}).await.unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(250),
        "{:?}",
        t.elapsed()
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = Instant::now();
    coll.find_one(doc! {"_id": 1}).await.unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(250),
        "outside the window: {:?}",
        t.elapsed()
    );
    sim.faults().clear();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_injection_by_code_and_command() {
    let (sim, client) = sim_and_client().await;
    let no_retry = client_for(&sim, false).await;
    let coll = client.database("d").collection::<Document>("e");
    let coll_nr = no_retry.database("d").collection::<Document>("e");
    coll.insert_one(doc! {"_id": 0}).await.unwrap();
    sim.faults().set_error(Some(ErrorFault {
        rate: 1.0,
        code: 10107,
        commands: vec!["insert".into()],
    }));
    let err = coll.insert_one(doc! {"_id": 1}).await.unwrap_err();
    assert_eq!(code(&err), Some(10107));
    // Other commands still work.
    assert!(coll.find_one(doc! {"_id": 0}).await.unwrap().is_some());
    sim.faults().set_error(Some(ErrorFault {
        rate: 1.0,
        code: 112,
        commands: vec![],
    }));
    let err = coll_nr.find_one(doc! {}).await.unwrap_err();
    assert_eq!(code(&err), Some(112));
    assert!(err.contains_label("TransientTransactionError"));
    sim.faults().set_error(Some(ErrorFault {
        rate: 1.0,
        code: 91,
        commands: vec!["find".into()],
    }));
    let err = coll_nr.find_one(doc! {}).await.unwrap_err();
    assert_eq!(code(&err), Some(91));
    sim.faults().set_error(None);
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_refused_connections_and_listener_restart() {
    let (sim, client) = sim_and_client().await;
    let no_retry = client_for(&sim, false).await;
    let coll = no_retry.database("d").collection::<Document>("n");
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    client
        .database("d")
        .collection::<Document>("n")
        .find_one(doc! {})
        .await
        .unwrap();

    sim.faults().set_drop_rate(1.0);
    let err = coll.find_one(doc! {}).await.unwrap_err();
    assert!(
        matches!(
            *err.kind,
            ErrorKind::Io(_)
                | ErrorKind::ServerSelection { .. }
                | ErrorKind::ConnectionPoolCleared { .. }
        ),
        "{err:?}"
    );
    sim.faults().set_drop_rate(0.0);
    assert!(coll.find_one(doc! {}).await.unwrap().is_some());

    // Refuse new connections and drop the existing ones: nothing works.
    sim.faults().set_refuse(true);
    sim.faults().drop_connections();
    let err = coll.find_one(doc! {}).await.unwrap_err();
    assert!(
        matches!(
            *err.kind,
            ErrorKind::Io(_)
                | ErrorKind::ServerSelection { .. }
                | ErrorKind::ConnectionPoolCleared { .. }
        ),
        "{err:?}"
    );
    sim.faults().set_refuse(false);
    let t = Instant::now();
    loop {
        match client
            .database("d")
            .collection::<Document>("n")
            .find_one(doc! {})
            .await
        {
            Ok(d) => {
                assert!(d.is_some());
                break;
            }
            Err(_) if t.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("never recovered: {e:?}"),
        }
    }

    // Stop the listener: the port refuses; restart on the same port: data kept.
    let addr = sim.addr();
    sim.stop_listener().await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
    assert!(coll.find_one(doc! {}).await.is_err());
    sim.restart_listener().await.unwrap();
    assert_eq!(sim.addr(), addr);
    let t = Instant::now();
    loop {
        match coll.find_one(doc! {"_id": 1}).await {
            Ok(d) => {
                assert!(d.is_some());
                break;
            }
            Err(_) if t.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("never recovered: {e:?}"),
        }
    }
}

/// Writes raw bytes to the simulator and reads one reply frame, if any.
async fn raw_exchange(addr: std::net::SocketAddr, bytes: &[u8]) -> Option<Vec<u8>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    let mut len = [0u8; 4];
    match tokio::time::timeout(Duration::from_secs(5), s.read_exact(&mut len))
        .await
        .expect("server answers or closes")
    {
        Ok(_) => {}
        Err(_) => return None,
    }
    let n = i32::from_le_bytes(len) as usize;
    let mut rest = vec![0u8; n - 4];
    s.read_exact(&mut rest).await.unwrap();
    let mut frame = len.to_vec();
    frame.extend(rest);
    Some(frame)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_op_query_handshake_and_malformed_frames() {
    let sim = common::sim().await;
    // OP_QUERY isMaster on admin.$cmd gets an OP_REPLY.
    let mut q = Vec::new();
    q.extend_from_slice(&[0; 4]);
    q.extend_from_slice(&77i32.to_le_bytes());
    q.extend_from_slice(&0i32.to_le_bytes());
    q.extend_from_slice(&2004i32.to_le_bytes());
    q.extend_from_slice(&0i32.to_le_bytes());
    q.extend_from_slice(b"admin.$cmd\0");
    q.extend_from_slice(&0i32.to_le_bytes());
    q.extend_from_slice(&(-1i32).to_le_bytes());
    doc! {"isMaster": 1, "helloOk": true}
        .to_writer(&mut q)
        .unwrap();
    let len = q.len() as i32;
    q[..4].copy_from_slice(&len.to_le_bytes());
    let reply = raw_exchange(sim.addr(), &q).await.expect("a reply");
    assert_eq!(
        i32::from_le_bytes(reply[8..12].try_into().unwrap()),
        77,
        "responseTo"
    );
    assert_eq!(
        i32::from_le_bytes(reply[12..16].try_into().unwrap()),
        1,
        "OP_REPLY"
    );
    let d = Document::from_reader(&reply[36..]).unwrap();
    assert_eq!(d.get_bool("ismaster"), Ok(true));
    assert_eq!(d.get_i32("maxWireVersion"), Ok(21));

    // Malformed frames close that connection only.
    let bad_len = [1u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 7, 0, 0];
    assert!(raw_exchange(sim.addr(), &bad_len).await.is_none());
    let mut too_big = 48_000_001i32.to_le_bytes().to_vec();
    too_big.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 7, 0, 0]);
    assert!(raw_exchange(sim.addr(), &too_big).await.is_none());
    let mut unknown_op = 16i32.to_le_bytes().to_vec();
    unknown_op.extend_from_slice(&[0; 8]);
    unknown_op.extend_from_slice(&2010i32.to_le_bytes());
    assert!(raw_exchange(sim.addr(), &unknown_op).await.is_none());
    let mut bad_bson = 26i32.to_le_bytes().to_vec();
    bad_bson.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0, 0, 0xdd, 7, 0, 0]);
    bad_bson.extend_from_slice(&[0, 0, 0, 0, 0, 5, 0, 0, 0, 0x42]);
    assert!(raw_exchange(sim.addr(), &bad_bson).await.is_none());
    // The server still serves drivers.
    let client = client_for(&sim, true).await;
    client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
}

/// The driver's topology worker handed a pool fill (`warm_connection_pool`,
/// which the daemon calls at start) to the pools and waited for it inline:
/// against a server that stalls while the pool fills, the fill lasts until
/// the new connections' handshakes are answered, and meanwhile the worker
/// applied no topology update and did not hear the shutdown, so the client
/// did not shut down (the daemon's "did not shut down within 2s" after a
/// freeze drill on a busy machine). With the patch (the broadcast answered
/// in the background, vendor/mongodb/src/sdam/topology.rs) the client shuts
/// down at once; unpatched, it waits for the handshakes' timeout (30 s
/// here: the test's 5 s bound ends it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_shuts_down_while_its_pool_fills_against_a_frozen_server() {
    // Without logical sessions the shutdown has no `endSessions` to send
    // (which would itself wait on the frozen server): what is left to wait
    // for is the driver's own tasks.
    let sim = common::sim_with(mongoload::sim::SimConfig {
        sessions: false,
        ..Default::default()
    })
    .await;
    let mut opts = mongodb::options::ClientOptions::parse(sim.uri())
        .await
        .unwrap();
    opts.connect_timeout = Some(Duration::from_secs(30));
    opts.min_pool_size = Some(64);
    opts.max_pool_size = Some(64);
    let client = Client::with_options(opts).unwrap();
    client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
    assert!(sim.faults().freeze());
    let warm = client.clone();
    let warming = tokio::spawn(async move { warm.warm_connection_pool().await });
    // The fill is under way: its first handshakes wait on the frozen server.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !warming.is_finished(),
        "the pool filled against a frozen server"
    );
    let started = Instant::now();
    let shut =
        tokio::time::timeout(Duration::from_secs(5), client.shutdown().immediate(true)).await;
    let took = started.elapsed();
    assert!(sim.faults().thaw());
    assert!(
        shut.is_ok() && took < Duration::from_secs(2),
        "the client took {took:?} to shut down while its pool filled against a frozen server"
    );
    warming.abort();
}

/// What mongoload's command event handler reads (`Failover::on_command`),
/// from the published driver's standard command monitoring: every write
/// attempt has its started and succeeded or failed event, in order, and
/// its started event the session (`lsid`) in the command's body. The
/// driver sends the events of the reads too (a find and its `getMore`);
/// the handler leaves them on their name (`is_write_command`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_events_carry_what_the_failover_handler_reads() {
    use mongodb::event::command::CommandEvent;
    use mongoload::failover::is_write_command;
    use std::sync::{Arc, Mutex};

    let sim = common::sim().await;
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let reads: Arc<Mutex<usize>> = Arc::default();
    let mut opts = mongodb::options::ClientOptions::parse(sim.uri())
        .await
        .unwrap();
    let (log, read_log) = (seen.clone(), reads.clone());
    opts.command_event_handler = Some(mongodb::event::EventHandler::callback(
        move |ev: CommandEvent| {
            let name = match &ev {
                CommandEvent::Started(e) => &e.command_name,
                CommandEvent::Succeeded(e) => &e.command_name,
                CommandEvent::Failed(e) => &e.command_name,
                _ => return,
            };
            if !is_write_command(name) {
                if name == "find" || name == "getMore" {
                    *read_log.lock().unwrap() += 1;
                }
                return;
            }
            let what = match ev {
                CommandEvent::Started(e) => {
                    let lsid = if e.command.contains_key("lsid") {
                        " lsid"
                    } else {
                        ""
                    };
                    format!("started {}{lsid}", e.command_name)
                }
                CommandEvent::Succeeded(e) => format!("succeeded {}", e.command_name),
                CommandEvent::Failed(e) => format!("failed {}", e.command_name),
                _ => "other".to_owned(),
            };
            log.lock().unwrap().push(what);
        },
    ));
    let client = Client::with_options(opts).unwrap();
    let coll = client.database("d").collection::<Document>("c");
    coll.insert_many((0..5).map(|i| doc! {"_id": i}))
        .await
        .unwrap();
    coll.find_one(doc! {"_id": 1}).await.unwrap();
    let all: Vec<Document> = coll
        .find(doc! {})
        .batch_size(2)
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(all.len(), 5);
    coll.update_one(doc! {"_id": 1}, doc! {"$set": {"x": 1}})
        .await
        .unwrap();
    let duplicate = coll.insert_one(doc! {"_id": 2}).await.unwrap_err();
    assert!(
        matches!(*duplicate.kind, ErrorKind::Write(_)),
        "{duplicate}"
    );
    coll.delete_one(doc! {"_id": 3}).await.unwrap();
    // A write error is a reply with `writeErrors`: the command succeeded.
    assert_eq!(
        *seen.lock().unwrap(),
        [
            "started insert lsid",
            "succeeded insert",
            "started update lsid",
            "succeeded update",
            "started insert lsid",
            "succeeded insert",
            "started delete lsid",
            "succeeded delete",
        ]
    );
    // A find_one, and a find of 5 in batches of 2 (find, two getMores):
    // four reads, a started and a succeeded event each.
    assert_eq!(*reads.lock().unwrap(), 8);
}

tokio::task_local! {
    static CHECKOUTS: std::cell::RefCell<Vec<String>>;
}

/// Runs `call` with a task-local list of the pool's checkout events.
async fn run(call: impl std::future::Future<Output = ()>) -> Vec<String> {
    let mut call = std::pin::pin!(CHECKOUTS.scope(Default::default(), call));
    call.as_mut().await;
    call.as_mut().take_value().unwrap().into_inner()
}

/// What mongoload's write attempts read (`mongo::attempts`), from the
/// published driver's pool (CMAP) events: each attempt of an operation
/// checks a connection out, and the events of that checkout come in the
/// operation's own task, through the callback called inline, so a
/// task-local set around the call sees them and nothing else's. A write
/// the primary refuses with a state-change error is sent again: two
/// checkouts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_events_carry_each_attempt_in_the_operations_task() {
    use mongodb::event::cmap::CmapEvent;
    use std::sync::{Arc, Mutex};

    let mut set = mongoload::sim::ReplSetConfig::new("rs0", 3);
    set.election = mongoload::sim::ElectionTime::fixed(Duration::from_secs(1));
    let sim = mongoload::sim::start_replset(mongoload::sim::SimConfig::default(), set)
        .await
        .expect("the replica set starts");
    let replset = sim.replset().unwrap().clone();
    let outside: Arc<Mutex<usize>> = Arc::default();
    let mut opts = mongodb::options::ClientOptions::parse(sim.uri())
        .await
        .unwrap();
    let seen_outside = outside.clone();
    opts.cmap_event_handler = Some(mongodb::event::EventHandler::callback(
        move |ev: CmapEvent| {
            let what = match &ev {
                CmapEvent::ConnectionCheckoutStarted(e) => format!("started {}", e.address),
                CmapEvent::ConnectionCheckedOut(e) => format!("checked out {}", e.address),
                CmapEvent::ConnectionCheckoutFailed(e) => format!("failed {}", e.address),
                _ => return,
            };
            if CHECKOUTS.try_with(|c| c.borrow_mut().push(what)).is_err() {
                *seen_outside.lock().unwrap() += 1;
            }
        },
    ));
    let client = Client::with_options(opts).unwrap();
    let coll = client.database("d").collection::<Document>("c");
    coll.insert_one(doc! {"_id": 0}).await.unwrap();
    let primary = replset.primary().expect("a primary");
    let host = replset.hosts()[primary].clone();
    // One attempt: one checkout, started then checked out, in the task.
    let seen = run(async {
        coll.insert_one(doc! {"_id": 1}).await.unwrap();
    })
    .await;
    assert_eq!(
        seen,
        [format!("started {host}"), format!("checked out {host}")]
    );
    let seen = run(async {
        coll.find_one(doc! {"_id": 1}).await.unwrap();
    })
    .await;
    assert_eq!(seen.len(), 2, "{seen:?}");

    // Refused with NotWritablePrimary: sent again, refused again.
    replset.faults(primary).set_error(Some(ErrorFault {
        rate: 1.0,
        code: 10107,
        commands: vec!["insert".into()],
    }));
    let seen = run(async {
        let err = coll.insert_one(doc! {"_id": 2}).await.unwrap_err();
        assert_eq!(code(&err), Some(10107));
    })
    .await;
    replset.faults(primary).set_error(None);
    let checkouts = seen.iter().filter(|s| s.starts_with("started")).count();
    assert_eq!(checkouts, 2, "one checkout per attempt: {seen:?}");
    // Checkouts outside any scope (the driver's own, and calls made
    // without one) reach the handler with no task-local to write to.
    let before = *outside.lock().unwrap();
    coll.insert_one(doc! {"_id": 3}).await.unwrap();
    assert!(*outside.lock().unwrap() > before);
    sim.shutdown().await;
}
