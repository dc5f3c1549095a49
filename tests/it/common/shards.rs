//! A sharded cluster as the tests see it: the deployment
//! `MONGOLOAD_TEST_URI` names when it is a mongos, or else a simulator
//! cluster of the test's own; and what it holds (shards, shard keys,
//! chunks, documents per shard) read through the official driver as any
//! client reads it, so that the same assertions hold on both.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::Duration;

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongoload::sim::{Sharded, SimHandle};

use super::{driver_client, TestDb, TEST_URI};

/// The test's sharded cluster: `MONGOLOAD_TEST_URI`'s deployment when
/// it answers `hello` as a mongos (`msg: "isdbgrid"`), else the simulator
/// `start` starts (so with a replica set there, the sharding tests still
/// run, against the simulator).
pub async fn mongos_test_db(start: impl Future<Output = SimHandle>) -> TestDb {
    match std::env::var(TEST_URI) {
        Ok(uri) if !uri.is_empty() && is_mongos(&uri).await => TestDb::real(uri),
        _ => TestDb::of_sim(start.await),
    }
}

/// Whether `uri`'s deployment is a sharded cluster's router.
pub async fn is_mongos(uri: &str) -> bool {
    let client = driver_client(uri, true, Duration::from_secs(5)).await;
    let hello = client
        .database("admin")
        .run_command(doc! { "hello": 1 })
        .await
        .unwrap_or_else(|e| panic!("{TEST_URI}: hello failed: {e}"));
    hello.get_str("msg") == Ok("isdbgrid")
}

/// One chunk as `config.chunks` holds it.
#[derive(Debug, Clone)]
pub struct Chunk {
    pub min: Document,
    pub max: Document,
    pub shard: String,
}

/// The cluster's metadata and placement, read through a router.
pub struct ShardView<'a> {
    /// The test's own simulator cluster, whose shards count their
    /// documents themselves.
    sim: Option<&'a Sharded>,
    client: mongodb::Client,
}

impl<'a> ShardView<'a> {
    pub async fn of(db: &'a TestDb) -> ShardView<'a> {
        ShardView {
            sim: db.sim().and_then(SimHandle::sharded),
            client: db.client().await,
        }
    }

    /// Through `client`'s router only.
    pub fn over(client: mongodb::Client) -> ShardView<'static> {
        ShardView { sim: None, client }
    }

    /// `listShards`' shard names, in its order.
    pub async fn shards(&self) -> Vec<String> {
        let reply = self
            .client
            .database("admin")
            .run_command(doc! { "listShards": 1 })
            .await
            .expect("listShards");
        reply
            .get_array("shards")
            .expect("listShards' shards")
            .iter()
            .filter_map(|s| Some(s.as_document()?.get_str("_id").ok()?.to_owned()))
            .collect()
    }

    /// `ns`'s `config.collections` document, when sharded.
    async fn collection(&self, ns: &str) -> Option<Document> {
        self.client
            .database("config")
            .collection::<Document>("collections")
            .find_one(doc! { "_id": ns })
            .await
            .expect("find in config.collections")
            .filter(|c| c.get_bool("dropped") != Ok(true))
    }

    /// `ns`'s shard key pattern, when sharded.
    pub async fn shard_key(&self, ns: &str) -> Option<Document> {
        self.collection(ns)
            .await
            .and_then(|c| c.get_document("key").ok().cloned())
    }

    /// `ns`'s chunks (by the collection's uuid, as since MongoDB 5.0;
    /// by namespace before), in no particular order.
    pub async fn chunks(&self, ns: &str) -> Vec<Chunk> {
        let Some(coll) = self.collection(ns).await else {
            return Vec::new();
        };
        let filter = match coll.get("uuid") {
            Some(uuid) => doc! { "uuid": uuid.clone() },
            None => doc! { "ns": ns },
        };
        let docs: Vec<Document> = self
            .client
            .database("config")
            .collection::<Document>("chunks")
            .find(filter)
            .await
            .expect("find in config.chunks")
            .try_collect()
            .await
            .expect("config.chunks' documents");
        docs.into_iter()
            .map(|c| Chunk {
                min: c.get_document("min").cloned().unwrap_or_default(),
                max: c.get_document("max").cloned().unwrap_or_default(),
                shard: c.get_str("shard").unwrap_or_default().to_owned(),
            })
            .collect()
    }

    /// Documents of `db.coll` per shard name (every shard listed, 0 where
    /// none). On the test's own simulator each shard counts them itself
    /// (the truth of where they are); on a real cluster each shard
    /// answers `$collStats`' count through the router.
    pub async fn documents(&self, db: &str, coll: &str) -> BTreeMap<String, i64> {
        let mut per: BTreeMap<String, i64> =
            self.shards().await.into_iter().map(|s| (s, 0)).collect();
        if let Some(cluster) = self.sim {
            for i in 0..cluster.shards() {
                let n = cluster.shard_documents(i, db, coll).await.unwrap();
                per.insert(cluster.shard_name(i).to_owned(), n);
            }
            return per;
        }
        let stats: Vec<Document> = self
            .client
            .database(db)
            .collection::<Document>(coll)
            .aggregate([doc! { "$collStats": { "count": {} } }])
            .await
            .expect("$collStats")
            .try_collect()
            .await
            .expect("$collStats' documents");
        for s in stats {
            let n = match s.get("count") {
                Some(Bson::Int32(n)) => i64::from(*n),
                Some(Bson::Int64(n)) => *n,
                Some(Bson::Double(n)) => *n as i64,
                _ => 0,
            };
            if let Ok(shard) = s.get_str("shard") {
                per.insert(shard.to_owned(), n);
            }
        }
        per
    }

    /// `balancerStatus`' mode (`full`, `off`).
    pub async fn balancer_mode(&self) -> String {
        let reply = self
            .client
            .database("admin")
            .run_command(doc! { "balancerStatus": 1 })
            .await
            .expect("balancerStatus");
        reply.get_str("mode").unwrap_or("unknown").to_owned()
    }
}
