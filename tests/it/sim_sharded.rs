//! The simulator as a sharded cluster, driven by the official `mongodb`
//! driver through its routers (and pymongo against the `mongoload sim
//! --sharded` binary): discovery as mongos through two routers, hashed
//! and ranged shard keys with split and moveChunk, routed reads compared
//! with one unsharded collection loaded alike, a shard primary's
//! step-down failing writes to that shard only, and the balancer moving
//! chunks under load without losing an acknowledged write. Where
//! documents are is read from each shard directly (its own URI), never
//! from a router.

use crate::common;
use crate::common::{free_ports, spawn_sim};

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::event::sdam::SdamEvent;
use mongodb::event::EventHandler;
use mongodb::options::ClientOptions;
use mongodb::{Client, Collection, ServerType};
use mongoload::sim::{self, ElectionTime, ShardedConfig, SimConfig, SimHandle};

async fn cluster(shards: usize, members: usize, routers: usize) -> SimHandle {
    cluster_with(ShardedConfig::new(shards, members, routers)).await
}

async fn cluster_with(config: ShardedConfig) -> SimHandle {
    sim::start_sharded(SimConfig::default(), config)
        .await
        .expect("the sharded cluster starts")
}

async fn client(uri: &str) -> Client {
    common::driver_client(uri, true, Duration::from_secs(10)).await
}

/// Documents of `db.coll` on shard `i`, read by the driver from the shard itself.
async fn on_shard(sim: &SimHandle, i: usize, db: &str, coll: &str) -> u64 {
    let shard = sim.sharded().unwrap().shard(i);
    let c = client(&shard.uri()).await;
    c.database(db)
        .collection::<Document>(coll)
        .count_documents(doc! {})
        .await
        .unwrap()
}

async fn admin(c: &Client, cmd: Document) -> Document {
    c.database("admin").run_command(cmd).await.unwrap()
}

async fn all(
    coll: &Collection<Document>,
    filter: Document,
    sort: Option<Document>,
) -> Vec<Document> {
    let mut f = coll.find(filter);
    if let Some(s) = sort {
        f = f.sort(s);
    }
    f.await.unwrap().try_collect().await.unwrap()
}

/// `$collStats` through a router as through a mongos: one document per
/// shard holding the collection, each with its `shard`, `count` and
/// `storageStats` equal to what that shard holds (read from the shard
/// itself); on a shard directly, one document without `shard`; not first
/// in the pipeline, refused with 40602; an unsharded collection, one
/// document from its primary shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coll_stats_through_a_router_gives_one_document_per_shard() {
    let sim = cluster(2, 1, 1).await;
    let cluster = sim.sharded().unwrap();
    let c = client(&sim.uri()).await;
    admin(
        &c,
        doc! {"shardCollection": "app.stats", "key": {"_id": "hashed"}},
    )
    .await;
    let coll = c.database("app").collection::<Document>("stats");
    let docs: Vec<Document> = (0..500).map(|i| doc! {"_id": i, "pad": "x"}).collect();
    coll.insert_many(docs).await.unwrap();
    let stats = |coll: Collection<Document>| async move {
        let cursor = coll
            .aggregate(vec![doc! {"$collStats": {"count": {}, "storageStats": {}}}])
            .await
            .unwrap();
        cursor.try_collect::<Vec<Document>>().await.unwrap()
    };
    let mut out = stats(coll.clone()).await;
    out.sort_by_key(|d| d.get_str("shard").unwrap().to_owned());
    assert_eq!(out.len(), 2, "{out:?}");
    let mut total = 0;
    for (i, d) in out.iter().enumerate() {
        assert_eq!(d.get_str("shard").unwrap(), cluster.shard_name(i));
        assert_eq!(d.get_str("ns").unwrap(), "app.stats");
        let truth = on_shard(&sim, i, "app", "stats").await as i64;
        assert_eq!(d.get_i64("count").unwrap(), truth, "shard {i}");
        let st = d.get_document("storageStats").unwrap();
        assert_eq!(st.get_i64("count").unwrap(), truth);
        assert_eq!(
            st.get_i64("avgObjSize").unwrap(),
            st.get_i64("size").unwrap() / truth
        );
        total += truth;
    }
    assert_eq!(total, 500);

    // On a shard itself: its own document, no `shard`.
    let shard0 = client(&cluster.shard(0).uri()).await;
    let own = stats(shard0.database("app").collection("stats")).await;
    assert_eq!(own.len(), 1);
    assert!(!own[0].contains_key("shard"));
    assert_eq!(
        own[0].get_i64("count").unwrap(),
        out[0].get_i64("count").unwrap()
    );

    // Later stages run over the shards' documents at the router.
    let summed: Vec<Document> = coll
        .aggregate(vec![
            doc! {"$collStats": {"count": {}}},
            doc! {"$group": {"_id": null, "n": {"$sum": "$count"}}},
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(summed[0].get_i64("n").unwrap(), 500);

    let e = coll
        .aggregate(vec![
            doc! {"$match": {}},
            doc! {"$collStats": {"count": {}}},
        ])
        .await
        .unwrap_err();
    assert!(e.to_string().contains("40602"), "{e}");

    // An unsharded collection: its primary shard's one document.
    let plain = c.database("app").collection::<Document>("plain");
    plain.insert_one(doc! {"_id": 1}).await.unwrap();
    let out = stats(plain).await;
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(out[0].get_i64("count").unwrap(), 1);
    assert!(out[0].contains_key("shard"));
}

/// The driver classifies every router as a mongos (a URI listing both),
/// a hashed `_id` gets MongoDB 7.0's two initial chunks per shard and
/// spreads inserts over both shards; the metadata reads back through a
/// router as `config.collections` and `config.chunks`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_sees_mongos_and_hashed_id_spreads_over_shards() {
    let sim = cluster(2, 1, 2).await;
    let cluster = sim.sharded().unwrap();
    assert_eq!(cluster.routers().len(), 2);
    let uri = sim.uri();
    assert!(uri.contains(&cluster.routers()[1].to_string()), "{uri}");
    let types = Arc::new(Mutex::new(Vec::new()));
    let seen = types.clone();
    let mut opts = ClientOptions::parse(&uri).await.unwrap();
    opts.sdam_event_handler = Some(EventHandler::callback(move |ev: SdamEvent| {
        if let SdamEvent::ServerDescriptionChanged(c) = ev {
            seen.lock()
                .unwrap()
                .push((c.address.to_string(), c.new_description.server_type()));
        }
    }));
    let c = Client::with_options(opts).unwrap();
    admin(&c, doc! {"ping": 1}).await;
    let hello = admin(&c, doc! {"hello": 1}).await;
    assert_eq!(hello.get_str("msg").unwrap(), "isdbgrid");
    assert!(!hello.contains_key("setName") && !hello.contains_key("hosts"));

    let reply = admin(
        &c,
        doc! {"shardCollection": "app.users", "key": {"_id": "hashed"}},
    )
    .await;
    assert_eq!(reply.get_str("collectionsharded").unwrap(), "app.users");
    let chunks = cluster.chunks("app.users");
    assert_eq!(chunks.len(), 4, "two chunks per shard: {chunks:?}");
    assert_eq!(chunks.iter().filter(|c| c.shard == 0).count(), 2);
    // Each shard holds the shard key's hashed index, as MongoDB creates it.
    for i in 0..2 {
        let shard = client(&cluster.shard(i).uri()).await;
        let indexes = shard
            .database("app")
            .run_command(doc! {"listIndexes": "users"})
            .await
            .unwrap();
        let batch = indexes
            .get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap();
        let hashed = doc! {"_id": "hashed"};
        assert!(
            batch.iter().any(|ix| {
                let ix = ix.as_document().unwrap();
                ix.get_str("name") == Ok("_id_hashed") && ix.get_document("key") == Ok(&hashed)
            }),
            "shard {i}: {batch:?}"
        );
    }

    let coll = c.database("app").collection::<Document>("users");
    let docs: Vec<Document> = (0..1000).map(|i| doc! {"_id": i, "v": i % 7}).collect();
    coll.insert_many(docs).await.unwrap();
    for i in 0..200 {
        coll.insert_one(doc! {"_id": 1000 + i, "v": 0})
            .await
            .unwrap();
    }
    let (a, b) = (
        on_shard(&sim, 0, "app", "users").await,
        on_shard(&sim, 1, "app", "users").await,
    );
    assert_eq!(a + b, 1200, "every document on exactly one shard");
    assert!(
        (480..=720).contains(&a),
        "hashed _id spreads evenly: {a} / {b}"
    );
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 1200);
    // A targeted read by _id finds its document on whichever shard.
    for id in [0, 1, 517, 1199] {
        let d = coll.find_one(doc! {"_id": id}).await.unwrap().unwrap();
        assert_eq!(d.get_i32("_id").unwrap(), id);
    }

    // Targeted reads reach one shard each, a scatter-gather read every
    // shard: the shards' own query counters say so.
    let queries = |i: usize| {
        let uri = cluster.shard(i).uri();
        async move {
            let s = client(&uri).await;
            let status = admin(&s, doc! {"serverStatus": 1}).await;
            status
                .get_document("opcounters")
                .unwrap()
                .get_i64("query")
                .unwrap()
        }
    };
    let before = [queries(0).await, queries(1).await];
    for id in 0..50 {
        coll.find_one(doc! {"_id": id}).await.unwrap().unwrap();
    }
    let targeted = [queries(0).await - before[0], queries(1).await - before[1]];
    assert_eq!(
        targeted[0] + targeted[1],
        50,
        "one shard per read: {targeted:?}"
    );
    assert!(targeted[0] > 0 && targeted[1] > 0, "{targeted:?}");
    all(&coll, doc! {"v": 3}, None).await;
    let scattered = [
        queries(0).await - before[0] - targeted[0],
        queries(1).await - before[1] - targeted[1],
    ];
    assert_eq!(
        scattered,
        [1, 1],
        "a filter without the key goes to every shard"
    );

    let config = c.database("config");
    let colls = all(
        &config.collection("collections"),
        doc! {"_id": "app.users"},
        None,
    )
    .await;
    assert_eq!(colls.len(), 1);
    assert_eq!(
        colls[0].get_document("key").unwrap(),
        &doc! {"_id": "hashed"}
    );
    let uuid = colls[0].get("uuid").unwrap().clone();
    let chunk_docs = all(
        &config.collection("chunks"),
        doc! {"uuid": uuid},
        Some(doc! {"min": 1}),
    )
    .await;
    assert_eq!(chunk_docs.len(), 4);
    assert_eq!(
        chunk_docs[0].get_document("min").unwrap(),
        &doc! {"_id": Bson::MinKey}
    );
    let shards = admin(&c, doc! {"listShards": 1}).await;
    assert_eq!(shards.get_array("shards").unwrap().len(), 2);
    let status = admin(&c, doc! {"balancerStatus": 1}).await;
    assert_eq!(status.get_str("mode").unwrap(), "off");

    // Both routers were discovered, each as a mongos.
    let types = types.lock().unwrap().clone();
    for r in cluster.routers() {
        assert!(
            types
                .iter()
                .any(|(a, t)| a == &r.to_string() && *t == ServerType::Mongos),
            "{r} seen as a mongos: {types:?}"
        );
    }
    assert!(types
        .iter()
        .all(|(_, t)| matches!(t, ServerType::Mongos | ServerType::Unknown)));
}

/// A ranged key, split at 100 and the upper chunk moved: the range lives
/// on the other shard (counted there), reads of it are targeted, and a
/// refused command gets MongoDB's code.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ranged_key_split_and_move_chunk_put_a_range_on_the_other_shard() {
    let sim = cluster(2, 3, 1).await;
    let cluster = sim.sharded().unwrap();
    let c = client(&sim.uri()).await;
    admin(&c, doc! {"enableSharding": "shop"}).await;
    admin(&c, doc! {"shardCollection": "shop.orders", "key": {"x": 1}}).await;
    let primary = cluster.chunks("shop.orders")[0].shard;
    let other = 1 - primary;
    let coll = c.database("shop").collection::<Document>("orders");
    coll.insert_many((0..200).map(|i| doc! {"_id": i, "x": i}))
        .await
        .unwrap();
    assert_eq!(on_shard(&sim, primary, "shop", "orders").await, 200);

    admin(&c, doc! {"split": "shop.orders", "middle": {"x": 100}}).await;
    let moved = admin(
        &c,
        doc! {"moveChunk": "shop.orders", "find": {"x": 150}, "to": cluster.shard_name(other)},
    )
    .await;
    assert!(moved.get_i64("millis").is_ok(), "{moved}");
    assert_eq!(on_shard(&sim, primary, "shop", "orders").await, 100);
    assert_eq!(on_shard(&sim, other, "shop", "orders").await, 100);
    let chunks = cluster.chunks("shop.orders");
    assert_eq!(chunks.len(), 2);
    assert_eq!(chunks[1].min, doc! {"x": 100});
    assert_eq!(chunks[1].shard, other);
    let m = cluster.migrations();
    assert_eq!((m.len(), m[0].docs, m[0].by_balancer), (1, 100, false));
    assert!(m[0].end >= m[0].start);

    // New documents of the range go to its new shard.
    coll.insert_one(doc! {"_id": 1000, "x": 500}).await.unwrap();
    assert_eq!(on_shard(&sim, other, "shop", "orders").await, 101);
    let upper = all(&coll, doc! {"x": {"$gte": 150}}, Some(doc! {"x": 1})).await;
    assert_eq!(upper.len(), 51);
    assert_eq!(upper[0].get_i32("x").unwrap(), 150);

    // What mongos refuses, with its codes.
    let e = c
        .database("admin")
        .run_command(doc! {"shardCollection": "shop.orders", "key": {"y": 1}})
        .await
        .unwrap_err();
    assert_eq!(common::error_code(&e), Some(23));
    let e = c
        .database("admin")
        .run_command(doc! {"moveChunk": "shop.orders", "find": {"x": 1}, "to": "shard9"})
        .await
        .unwrap_err();
    assert_eq!(common::error_code(&e), Some(70));
    let e = c
        .database("admin")
        .run_command(doc! {"split": "shop.nothing", "middle": {"x": 1}})
        .await
        .unwrap_err();
    assert_eq!(common::error_code(&e), Some(118));
    let e = coll
        .update_one(doc! {"other": 1}, doc! {"$set": {"y": 1}})
        .await
        .unwrap_err();
    assert_eq!(common::error_code(&e), Some(61));
    // A router is no replica-set member, though its shards are.
    let e = c
        .database("admin")
        .run_command(doc! {"replSetGetStatus": 1})
        .await
        .unwrap_err();
    assert_eq!(common::error_code(&e), Some(59));
}

/// Targeted and scatter-gather reads (sort, skip, limit, projection,
/// counts, `$group`, distinct) return exactly what one unsharded
/// collection loaded alike returns.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routed_reads_match_one_unsharded_collection() {
    let plain = common::sim().await;
    let sim = cluster(2, 1, 1).await;
    let p = client(&plain.uri()).await;
    let s = client(&sim.uri()).await;
    admin(
        &s,
        doc! {"shardCollection": "r.hashed", "key": {"_id": "hashed"}},
    )
    .await;
    admin(&s, doc! {"shardCollection": "r.ranged", "key": {"k": 1}}).await;
    for at in [30, 60] {
        admin(&s, doc! {"split": "r.ranged", "middle": {"k": at}}).await;
    }
    let cluster = sim.sharded().unwrap();
    let first = cluster.chunks("r.ranged")[0].shard;
    admin(
        &s,
        doc! {"moveChunk": "r.ranged", "find": {"k": 40}, "to": cluster.shard_name(1 - first)},
    )
    .await;
    let docs: Vec<Document> = (0..90)
        .map(|i| doc! {"_id": i, "k": (i * 37) % 90, "g": i % 4, "s": format!("n{}", i % 11)})
        .collect();
    for name in ["hashed", "ranged"] {
        p.database("r")
            .collection::<Document>(name)
            .insert_many(docs.clone())
            .await
            .unwrap();
        s.database("r")
            .collection::<Document>(name)
            .insert_many(docs.clone())
            .await
            .unwrap();
    }
    for i in 0..2 {
        assert!(
            on_shard(&sim, i, "r", "ranged").await > 0,
            "shard {i} holds a range"
        );
    }
    let queries: Vec<(Document, Document, u64, i64)> = vec![
        (doc! {}, doc! {"k": 1}, 0, 0),
        (doc! {}, doc! {"g": -1, "_id": 1}, 5, 10),
        (doc! {"k": {"$gte": 25, "$lt": 65}}, doc! {"k": -1}, 3, 7),
        (doc! {"k": 44}, doc! {"_id": 1}, 0, 0),
        (doc! {"_id": {"$in": [3, 50, 77]}}, doc! {"_id": 1}, 0, 0),
        (doc! {"g": 2}, doc! {"s": 1, "_id": 1}, 2, 5),
    ];
    for name in ["hashed", "ranged"] {
        let (pc, sc) = (
            p.database("r").collection::<Document>(name),
            s.database("r").collection::<Document>(name),
        );
        for (filter, sort, skip, limit) in &queries {
            let run = |c: Collection<Document>| {
                let (filter, sort) = (filter.clone(), sort.clone());
                async move {
                    let mut f = c.find(filter).sort(sort).skip(*skip).batch_size(7);
                    if *limit > 0 {
                        f = f.limit(*limit);
                    }
                    f.projection(doc! {"s": 0})
                        .await
                        .unwrap()
                        .try_collect::<Vec<Document>>()
                        .await
                        .unwrap()
                }
            };
            let (want, got) = (run(pc.clone()).await, run(sc.clone()).await);
            assert!(!want.is_empty());
            assert_eq!(
                got, want,
                "{name}: {filter} sort {sort} skip {skip} limit {limit}"
            );
            assert_eq!(
                sc.count_documents(filter.clone()).await.unwrap(),
                pc.count_documents(filter.clone()).await.unwrap(),
                "{name}: count {filter}"
            );
        }
        let pipeline = vec![
            doc! {"$match": {"k": {"$lt": 70}}},
            doc! {"$group": {"_id": "$g", "n": {"$sum": 1}, "total": {"$sum": "$k"}}},
            doc! {"$sort": {"_id": 1}},
        ];
        let agg = |c: Collection<Document>| {
            let pipeline = pipeline.clone();
            async move {
                c.aggregate(pipeline)
                    .await
                    .unwrap()
                    .try_collect::<Vec<Document>>()
                    .await
                    .unwrap()
            }
        };
        let (want, got) = (agg(pc.clone()).await, agg(sc.clone()).await);
        assert_eq!(want.len(), 4);
        assert_eq!(got, want, "{name}: $group");
        assert_eq!(
            sc.distinct("s", doc! {}).await.unwrap(),
            pc.distinct("s", doc! {}).await.unwrap()
        );
        // Writes routed alike leave the same collection.
        for c in [&pc, &sc] {
            c.update_many(doc! {"g": 1}, doc! {"$inc": {"k": 1000}})
                .await
                .unwrap();
            c.delete_one(doc! {"_id": 7}).await.unwrap();
            c.delete_many(doc! {"g": 3}).await.unwrap();
        }
        assert_eq!(
            all(&sc, doc! {}, Some(doc! {"_id": 1})).await,
            all(&pc, doc! {}, Some(doc! {"_id": 1})).await,
            "{name}: after writes"
        );
    }
}

/// A shard primary's step-down fails the writes sent to that shard while
/// it has no primary; writes to the other shard succeed meanwhile; then
/// the new primary takes them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shard_step_down_fails_writes_to_that_shard_only() {
    let mut config = ShardedConfig::new(2, 3, 1);
    config.replset.election = ElectionTime::fixed(Duration::from_secs(2));
    let sim = cluster_with(config).await;
    let cluster = sim.sharded().unwrap();
    let c = common::driver_client(&sim.uri(), false, Duration::from_secs(10)).await;
    admin(&c, doc! {"shardCollection": "w.t", "key": {"x": 1}}).await;
    admin(&c, doc! {"split": "w.t", "middle": {"x": 0}}).await;
    let low = cluster.chunks("w.t")[0].shard;
    let high = 1 - low;
    admin(
        &c,
        doc! {"moveChunk": "w.t", "find": {"x": 5}, "to": cluster.shard_name(high)},
    )
    .await;
    let coll = c.database("w").collection::<Document>("t");
    coll.insert_one(doc! {"x": -1}).await.unwrap();
    coll.insert_one(doc! {"x": 1}).await.unwrap();

    let set = cluster.shard(low).replset().unwrap().clone();
    let step = set.step_down().unwrap();
    let (mut failed, mut other_ok) = (0, 0);
    let started = Instant::now();
    for i in 0..20 {
        if let Err(e) = coll.insert_one(doc! {"x": -10 - i}).await {
            // The old primary's NotWritablePrimary, then no primary to find.
            let code = common::error_code(&e);
            assert!(matches!(code, Some(10107 | 133)), "{e}");
            failed += 1;
        }
        coll.insert_one(doc! {"x": 10 + i}).await.unwrap();
        other_ok += 1;
    }
    assert!(
        started.elapsed() < step.election,
        "the writes ran during the election"
    );
    assert_eq!((failed, other_ok), (20, 20));
    // After the election the shard takes writes again (the router finds
    // its new primary).
    common::wait_for("the shard's new primary", Duration::from_secs(10), || {
        let coll = coll.clone();
        async move { coll.insert_one(doc! {"x": -100}).await.ok() }
    })
    .await;
    assert_eq!(on_shard(&sim, high, "w", "t").await, 21);
    assert!(on_shard(&sim, low, "w", "t").await >= 2);
}

/// Clients authenticate to the routers (SCRAM), as to any simulator:
/// without credentials a router refuses the command, with them it routes
/// it (the routers reach the shards without authentication).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_authenticate_to_the_routers() {
    let config = SimConfig {
        auth: Some(sim::AuthUser {
            user: "app".into(),
            password: "s3cret".into(),
        }),
        ..SimConfig::default()
    };
    let sim = sim::start_sharded(config, ShardedConfig::new(2, 1, 2))
        .await
        .unwrap();
    let anonymous = client(&sim.uri()).await;
    let e = anonymous
        .database("a")
        .collection::<Document>("t")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap_err();
    assert_eq!(common::error_code(&e), Some(13));
    let hosts: Vec<String> = sim
        .sharded()
        .unwrap()
        .routers()
        .iter()
        .map(|a| a.to_string())
        .collect();
    let c = client(&format!("mongodb://app:s3cret@{}/", hosts.join(","))).await;
    admin(
        &c,
        doc! {"shardCollection": "a.t", "key": {"_id": "hashed"}},
    )
    .await;
    let coll = c.database("a").collection::<Document>("t");
    coll.insert_many((0..100).map(|i| doc! {"_id": i}))
        .await
        .unwrap();
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 100);
    assert_eq!(
        on_shard(&sim, 0, "a", "t").await + on_shard(&sim, 1, "a", "t").await,
        100
    );
}

/// A frozen shard stalls the requests routed to it, not those routed to
/// the other shard; thawed, the stalled write completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_shard_stalls_only_its_own_requests() {
    let sim = cluster(2, 1, 1).await;
    let cluster = sim.sharded().unwrap();
    let c = client(&sim.uri()).await;
    admin(&c, doc! {"shardCollection": "f.t", "key": {"x": 1}}).await;
    admin(&c, doc! {"split": "f.t", "middle": {"x": 0}}).await;
    let low = cluster.chunks("f.t")[0].shard;
    let high = 1 - low;
    admin(
        &c,
        doc! {"moveChunk": "f.t", "find": {"x": 5}, "to": cluster.shard_name(high)},
    )
    .await;
    let coll = c.database("f").collection::<Document>("t");
    coll.insert_one(doc! {"x": -1}).await.unwrap();
    assert!(cluster.shard(low).faults().freeze());
    let stalled = tokio::spawn({
        let coll = coll.clone();
        async move { coll.insert_one(doc! {"x": -2}).await }
    });
    let started = Instant::now();
    for i in 0..20 {
        coll.insert_one(doc! {"x": 10 + i}).await.unwrap();
    }
    assert_eq!(
        coll.count_documents(doc! {"x": {"$gte": 0}}).await.unwrap(),
        20
    );
    tokio::time::sleep(Duration::from_millis(300).saturating_sub(started.elapsed())).await;
    assert!(
        !stalled.is_finished(),
        "the write to the frozen shard waits"
    );
    assert!(cluster.shard(low).faults().thaw());
    tokio::time::timeout(Duration::from_secs(10), stalled)
        .await
        .expect("the stalled write completes once thawed")
        .unwrap()
        .unwrap();
    assert_eq!(on_shard(&sim, low, "f", "t").await, 2);
}

/// With the balancer on, a running insert and find load loses no
/// acknowledged write while chunks move, and every document stays
/// findable through the router, on exactly one shard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn balancer_moves_chunks_under_load_and_loses_no_write() {
    let mut config = ShardedConfig::new(2, 1, 2);
    config.balance_every = Some(Duration::from_millis(150));
    let sim = cluster_with(config).await;
    let cluster = sim.sharded().unwrap();
    let c = client(&sim.uri()).await;
    admin(&c, doc! {"shardCollection": "b.t", "key": {"k": 1}}).await;
    for at in (1..8).map(|i| i * 1000) {
        admin(&c, doc! {"split": "b.t", "middle": {"k": at}}).await;
    }
    let status = admin(&c, doc! {"balancerStatus": 1}).await;
    assert_eq!(status.get_str("mode").unwrap(), "full");
    let coll = c.database("b").collection::<Document>("t");
    let acked = Arc::new(Mutex::new(Vec::new()));
    let mut tasks = Vec::new();
    for w in 0..4 {
        let (coll, acked) = (coll.clone(), acked.clone());
        tasks.push(tokio::spawn(async move {
            let mut found = 0;
            for i in 0..400 {
                let id = w * 100_000 + i;
                let k = (i * 7919 + w * 13) % 8000;
                if coll.insert_one(doc! {"_id": id, "k": k}).await.is_ok() {
                    acked.lock().unwrap().push(id);
                }
                if i % 10 == 0 && coll.find_one(doc! {"_id": id}).await.unwrap().is_some() {
                    found += 1;
                }
            }
            found
        }));
    }
    for t in tasks {
        assert_eq!(
            t.await.unwrap(),
            40,
            "each acknowledged document found at once"
        );
    }
    common::wait_for("the balancer to even out", Duration::from_secs(20), || {
        let counts: Vec<usize> = (0..2)
            .map(|s| {
                cluster
                    .chunks("b.t")
                    .iter()
                    .filter(|c| c.shard == s)
                    .count()
            })
            .collect();
        async move { (counts == [4, 4]).then_some(()) }
    })
    .await;
    let migrations = cluster.migrations();
    assert!(migrations.len() >= 4, "{migrations:?}");
    assert!(migrations.iter().all(|m| m.by_balancer && m.end >= m.start));
    let acked = acked.lock().unwrap().clone();
    assert_eq!(acked.len(), 1600, "every insert acknowledged");
    let ids: Vec<Document> = all(&coll, doc! {}, Some(doc! {"_id": 1})).await;
    let mut want = acked.clone();
    want.sort_unstable();
    let got: Vec<i32> = ids.iter().map(|d| d.get_i32("_id").unwrap()).collect();
    assert_eq!(
        got, want,
        "every acknowledged write findable through a router"
    );
    let (a, b) = (
        on_shard(&sim, 0, "b", "t").await,
        on_shard(&sim, 1, "b", "t").await,
    );
    assert_eq!(a + b, 1600, "each document on exactly one shard: {a} + {b}");
    assert!(a > 0 && b > 0);
}

/// False (after a loud notice) when pymongo is missing outside CI; in CI a
/// missing pymongo fails the test (`.ci/run` installs it).
fn require_pymongo(test: &str) -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import pymongo"])
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!(
            "pymongo is not importable by python3 and CI is set: install it (pip install pymongo)"
        );
    }
    eprintln!("\n*** SKIPPED {test}: python3 cannot import pymongo (pip install pymongo) ***\n");
    false
}

/// pymongo against `mongoload sim --sharded`: discovery as mongos through
/// two routers, then shardCollection, split, moveChunk, listShards,
/// balancerStatus and CRUD; then, as MongoDB 7.0's documentation has them:
/// `isdbgrid`, the router's `topologyVersion`, `explain` of a find
/// (`SINGLE_SHARD` on the shard key, `SHARD_MERGE` off it, each shard's
/// `IDHACK`, `IXSCAN` or `COLLSCAN`) and of an aggregate, and a unique
/// index without the shard key as prefix refused (67), the hashed shard
/// key's index and a hashed index's plans and refusals, the cluster time
/// on every reply, and a retryable write resent with its session and
/// txnNumber applied once through a router over one-member shards.
#[test]
fn pymongo_uses_the_sharded_sim_binary() {
    if !require_pymongo("sim_sharded (pymongo)") {
        return;
    }
    let port = free_ports(2);
    let _sim = spawn_sim(port, &["--sharded", "--shards", "2", "--mongos", "2"]);
    let uri = format!("mongodb://127.0.0.1:{port},127.0.0.1:{}/", port + 1);
    let script = r#"
import sys, time
from pymongo import MongoClient
from pymongo.errors import OperationFailure
c = MongoClient(sys.argv[1], serverSelectionTimeoutMS=10000)
c.admin.command("ping")
# Each router is checked by its own monitor: wait until both were.
deadline = time.monotonic() + 10
while any(s.server_type_name == "Unknown" for s in c.topology_description.server_descriptions().values()):
    assert time.monotonic() < deadline, c.topology_description
    time.sleep(0.05)
td = c.topology_description
assert td.topology_type_name == "Sharded", td.topology_type_name
assert all(s.server_type_name == "Mongos" for s in td.server_descriptions().values()), td
assert len(td.server_descriptions()) == 2, td
shards = c.admin.command("listShards")["shards"]
assert [s["_id"] for s in shards] == ["shard0", "shard1"], shards
assert c.admin.command("balancerStatus")["mode"] == "off"
c.admin.command("enableSharding", "py")
c.admin.command("shardCollection", "py.h", key={"_id": "hashed"})
c.admin.command("shardCollection", "py.r", key={"x": 1})
c.admin.command("split", "py.r", middle={"x": 50})
chunks = list(c.config.chunks.find({}, sort=[("min", 1)]))
primary = [ch for ch in chunks if ch["uuid"] == c.config.collections.find_one({"_id": "py.r"})["uuid"]][0]["shard"]
other = "shard1" if primary == "shard0" else "shard0"
c.admin.command("moveChunk", "py.r", find={"x": 70}, to=other)
for name in ("h", "r"):
    coll = c.py[name]
    coll.insert_many([{"_id": i, "x": i} for i in range(100)])
    assert coll.count_documents({}) == 100
    assert [d["_id"] for d in coll.find({"x": {"$gte": 90}}).sort("x", -1).limit(3)] == [99, 98, 97]
    assert coll.find_one({"_id": 42})["x"] == 42
    assert coll.update_one({"_id": 42}, {"$set": {"y": 1}}).modified_count == 1
    assert coll.update_many({"x": {"$lt": 10}}, {"$set": {"y": 2}}).modified_count == 10
    assert coll.delete_many({"y": 2}).deleted_count == 10
    assert coll.find_one_and_update({"x": 60} if name == "r" else {"_id": 60}, {"$set": {"z": 1}})["_id"] == 60
    total = list(coll.aggregate([{"$group": {"_id": None, "n": {"$sum": 1}}}]))
    assert total == [{"_id": None, "n": 90}], total
chunk_shards = {ch["shard"] for ch in c.config.chunks.find({"min.x": 50})}
assert chunk_shards == {other}, chunk_shards
try:
    c.admin.command("moveChunk", "py.r", find={"x": 1}, to="nowhere")
    raise SystemExit("moveChunk to an unknown shard passed")
except OperationFailure as e:
    assert e.code == 70, e

# Cluster time: on every reply of a router, advancing with writes.
t0 = c.admin.command("ping")
assert "operationTime" in t0 and "clusterTime" in t0["$clusterTime"], t0
c.py.h.insert_one({"_id": 1000, "x": 1000})
t1 = c.admin.command("ping")
assert t1["$clusterTime"]["clusterTime"] > t0["$clusterTime"]["clusterTime"], (t0, t1)

# A retryable write resent with the same session and txnNumber (a
# driver's retry after a lost reply) is answered once, through a router
# over one-member shards: no duplicate key, no second $inc.
from bson.int64 import Int64
from bson.son import SON
with c.start_session() as s:
    ins = SON([("insert", "h"), ("documents", [{"_id": 5000, "n": 0}]), ("txnNumber", Int64(41))])
    first = c.py.command(ins, session=s)
    again = c.py.command(ins, session=s)
    assert first["n"] == 1 and again["n"] == 1 and "writeErrors" not in again, (first, again)
    inc = SON([("update", "h"), ("updates", [{"q": {"_id": 5000}, "u": {"$inc": {"n": 1}}}]), ("txnNumber", Int64(42))])
    c.py.command(inc, session=s)
    c.py.command(inc, session=s)
assert c.py.h.find_one({"_id": 5000})["n"] == 1, c.py.h.find_one({"_id": 5000})
assert c.py.h.count_documents({"_id": 5000}) == 1

# A router is a mongos: isdbgrid answers, hello has a topologyVersion.
assert c.admin.command("isdbgrid")["isdbgrid"] == 1
tv = c.admin.command("hello")["topologyVersion"]
assert set(tv) == {"processId", "counter"}, tv

# explain: the shards a query targets and each one's plan.
c.py.r.create_index([("y", 1)])
def planner(cmd):
    return c.py.command("explain", cmd, verbosity="queryPlanner")["queryPlanner"]
one = planner({"find": "r", "filter": {"x": 70}})["winningPlan"]
assert one["stage"] == "SINGLE_SHARD", one
assert [s["shardName"] for s in one["shards"]] == [other], one
by_id = planner({"find": "h", "filter": {"_id": 7}})["winningPlan"]
assert by_id["stage"] == "SINGLE_SHARD", by_id
assert by_id["shards"][0]["winningPlan"]["stage"] == "IDHACK", by_id
merged = planner({"find": "r", "filter": {"y": 1}})["winningPlan"]
assert merged["stage"] == "SHARD_MERGE", merged
assert sorted(s["shardName"] for s in merged["shards"]) == ["shard0", "shard1"], merged
for s in merged["shards"]:
    w = s["winningPlan"]
    assert w["stage"] == "FETCH" and w["inputStage"]["stage"] == "IXSCAN", w
    assert w["inputStage"]["keyPattern"] == {"y": 1}, w
scan = planner({"find": "r", "filter": {"z": 1}})["winningPlan"]
assert {s["winningPlan"]["stage"] for s in scan["shards"]} == {"COLLSCAN"}, scan
agg = planner({"aggregate": "r", "pipeline": [{"$match": {"x": 70}}, {"$count": "n"}], "cursor": {}})
assert agg["winningPlan"]["stage"] == "SINGLE_SHARD", agg
# pymongo's cursor.explain() reads the same.
assert c.py.r.find({"x": 70}).explain()["queryPlanner"]["winningPlan"]["stage"] == "SINGLE_SHARD"

# The hashed shard key's index is there, as sharding an empty collection
# on a hashed key creates it; a hashed index finds equalities (IXSCAN on
# its hashes), never ranges, refuses unique and refuses arrays.
assert c.py.h.index_information()["_id_hashed"]["key"] == [("_id", "hashed")], c.py.h.index_information()
c.py.r.create_index([("w", "hashed")])
c.py.r.insert_one({"_id": 6000, "x": 6000, "w": 3})
hx = planner({"find": "r", "filter": {"w": 3}})["winningPlan"]
for s in hx["shards"]:
    w = s["winningPlan"]
    assert w["stage"] == "FETCH" and w["inputStage"]["keyPattern"] == {"w": "hashed"}, w
assert c.py.r.find_one({"w": 3})["_id"] == 6000
hr = planner({"find": "r", "filter": {"w": {"$gt": 2}}})["winningPlan"]
assert {s["winningPlan"]["stage"] for s in hr["shards"]} == {"COLLSCAN"}, hr
try:
    c.py.r.create_index([("x", "hashed")], unique=True)
    raise SystemExit("a unique hashed index was created")
except OperationFailure as e:
    assert e.code == 16764, e
from pymongo.errors import WriteError
try:
    c.py.r.insert_one({"_id": 6001, "x": 6001, "w": [1, 2]})
    raise SystemExit("an array was stored under a hashed index")
except WriteError as e:
    assert e.code == 16766, e

# A unique index must start with the shard key (or be _id's).
try:
    c.py.r.create_index([("y", 1), ("x", 1)], unique=True)
    raise SystemExit("a unique index without the shard key as prefix was created")
except OperationFailure as e:
    assert e.code == 67, e
c.py.r.create_index([("x", 1), ("y", 1)], unique=True)
print("pymongo sharded check passed")
"#;
    let out = std::process::Command::new("python3")
        .args(["-c", script, &uri])
        .output()
        .expect("run python3");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("pymongo sharded check passed"),
        "pymongo check failed ({:?}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// pymongo's own retry of a write whose reply was lost, through a router:
/// the router runs each write, then closes the connection instead of
/// answering 30 % of them (`lose_reply_rate`), so pymongo resends the
/// write once on a new connection with the same session and txnNumber.
/// Each `$inc` and each insert is applied exactly once, retried or not,
/// even where the retry's reply was lost too (pymongo then raises).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pymongo_retries_a_write_whose_reply_was_lost_and_it_applies_once() {
    if !require_pymongo("sim_sharded (pymongo lost reply)") {
        return;
    }
    let sim = cluster(2, 1, 1).await;
    let c = client(&sim.uri()).await;
    admin(
        &c,
        doc! {"shardCollection": "py.lost", "key": {"_id": "hashed"}},
    )
    .await;
    let coll = c.database("py").collection::<Document>("lost");
    coll.insert_one(doc! {"_id": "counter", "n": 0})
        .await
        .unwrap();
    sim.faults().set_lose_reply_rate(0.3);
    let script = r#"
import sys
from pymongo import MongoClient, monitoring
from pymongo.errors import AutoReconnect
started = {"update": 0, "insert": 0}
class Count(monitoring.CommandListener):
    def started(self, e):
        if e.command_name in started:
            started[e.command_name] += 1
    def succeeded(self, e): pass
    def failed(self, e): pass
c = MongoClient(sys.argv[1], event_listeners=[Count()], serverSelectionTimeoutMS=10000)
coll = c.py.lost
lost = 0
for i in range(100):
    try:
        coll.update_one({"_id": "counter"}, {"$inc": {"n": 1}})
    except AutoReconnect:
        lost += 1
    try:
        coll.insert_one({"_id": i})
    except AutoReconnect:
        lost += 1
print("started", started["update"], started["insert"], "lost", lost)
"#;
    let uri = sim.uri();
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("python3")
            .args(["-c", script, &uri])
            .output()
            .expect("run python3")
    })
    .await
    .unwrap();
    sim.faults().set_lose_reply_rate(0.0);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "pymongo failed ({:?}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let figures: Vec<u64> = stdout
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    let [updates, inserts, _lost] = figures[..] else {
        panic!("unexpected output: {stdout}");
    };
    // Retries happened: more commands were sent than operations asked.
    assert!(updates > 100 && inserts > 100, "{stdout}");
    let counter = coll
        .find_one(doc! {"_id": "counter"})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        counter.get_i32("n").unwrap(),
        100,
        "each $inc applied once ({stdout})"
    );
    let inserted = coll
        .count_documents(doc! {"_id": {"$type": "number"}})
        .await
        .unwrap();
    assert_eq!(inserted, 100, "each insert applied once ({stdout})");
}
