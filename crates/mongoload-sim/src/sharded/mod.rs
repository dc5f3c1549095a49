//! The simulator as a sharded cluster: K routers (each answering `hello`
//! as a mongos does) in front of N shards, each shard a standalone or a
//! replica set started with the same configuration as `start` or
//! `start_replset` would (faults, replica-set settings), so every fault
//! and `--replset` flag applies per shard. Routers reach shards over TCP
//! through the wire protocol (no authentication or TLS inside the
//! cluster); clients authenticate to the routers as to any simulator.
//!
//! One file per part: the catalog and chunk table (`catalog`, pure), the
//! merge of the shards' answers (`merge`, pure), a router's connection to
//! a shard (`link`) and the router's commands, migrations and balancer
//! (`router`).

pub mod catalog;
mod link;
pub mod merge;
mod router;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bson::Document;

pub use catalog::{Catalog, KeyKind, ShardKey};
pub(crate) use router::Cluster;
pub use router::Migration;

use crate::faults::FaultConfig;
use crate::node::{self, new_shared, open_log, Node, SimConfig};
use crate::profile::ProfileConfig;
use crate::replset::{ReplSet, ReplSetConfig};

/// Shards and routers a sharded cluster may have.
pub const MAX_SHARDS: usize = 16;
pub const MAX_ROUTERS: usize = 16;

/// How to start a sharded cluster (beside the [`SimConfig`] every router
/// and shard is started with).
#[derive(Debug, Clone, PartialEq)]
pub struct ShardedConfig {
    /// Shards (1 to [`MAX_SHARDS`]), named `shard0`, `shard1`, ...
    pub shards: usize,
    /// Members per shard: 1, a standalone; more, a replica set named as
    /// the shard, with `replset`'s settings.
    pub shard_members: usize,
    /// Routers (1 to [`MAX_ROUTERS`]), on consecutive ports from the
    /// config's `listen` (each on a free port when it is 0).
    pub mongos: usize,
    /// Run a balancer round this often; none: no balancer (`moveChunk`
    /// still moves chunks).
    pub balance_every: Option<Duration>,
    /// Each replica-set shard's settings (its `name` and `members` are
    /// the shard's name and `shard_members`).
    pub replset: ReplSetConfig,
}

impl ShardedConfig {
    /// `shards` shards of `shard_members` members behind `mongos` routers,
    /// no balancer, default replica-set settings.
    pub fn new(shards: usize, shard_members: usize, mongos: usize) -> ShardedConfig {
        ShardedConfig {
            shards,
            shard_members,
            mongos,
            balance_every: None,
            replset: ReplSetConfig::new("shard", shard_members.max(1)),
        }
    }

    /// Refuses a count of shards, routers or shard members out of range.
    fn check(&self) -> std::io::Result<()> {
        if !(1..=MAX_SHARDS).contains(&self.shards) {
            return Err(invalid(format!(
                "a sharded cluster has 1 to {MAX_SHARDS} shards, not {}",
                self.shards
            )));
        }
        if !(1..=MAX_ROUTERS).contains(&self.mongos) {
            return Err(invalid(format!(
                "a sharded cluster has 1 to {MAX_ROUTERS} routers, not {}",
                self.mongos
            )));
        }
        if !(1..=50).contains(&self.shard_members) {
            return Err(invalid(format!(
                "a shard has 1 to 50 members, not {}",
                self.shard_members
            )));
        }
        Ok(())
    }
}

/// A chunk of a sharded collection, for inspection.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkInfo {
    pub min: Document,
    pub max: Document,
    /// The owning shard's index (see [`Sharded::shard`]).
    pub shard: usize,
}

/// A running sharded cluster, from [`crate::SimHandle::sharded`]: the routers,
/// each shard as the simulator it is, the chunk tables and migrations.
pub struct Sharded {
    cluster: Arc<Cluster>,
    routers: Vec<SocketAddr>,
    /// Routers after the first (the first is the crate's handle itself).
    other_routers: Vec<Node>,
    shards: Vec<Node>,
    names: Vec<String>,
}

fn invalid(message: String) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, message)
}

/// Starts a sharded cluster: `sharded.shards` shards (standalones, or
/// replica sets of `sharded.shard_members`) on free ports of
/// `config.listen`'s address, each with `config`'s faults, then
/// `sharded.mongos` routers on consecutive ports from `config.listen`
/// (free ones when its port is 0) with `config`'s authentication, TLS and
/// profiler. Returns the first router and the cluster, which
/// [`crate::start_sharded`] keeps together in its handle.
pub(crate) async fn start(
    config: SimConfig,
    sharded: ShardedConfig,
) -> std::io::Result<(Node, Sharded)> {
    sharded.check()?;
    let (shards, names, cluster) = start_shards(&config, &sharded).await?;
    let cluster = Arc::new(cluster);
    let mut routers = start_routers(&config, sharded.mongos, &cluster).await?;
    let first = routers.remove(0);
    if let Some(every) = sharded.balance_every {
        tokio::spawn(router::balancer(cluster.clone(), every, first.root.clone()));
    }
    // A one-member shard has no member to fail over to.
    if let Some(every) = sharded
        .replset
        .failover_every
        .filter(|_| sharded.shard_members > 1)
    {
        let n = shards.len();
        for (i, set) in shards.iter().filter_map(Node::replset).enumerate() {
            let first_at = every.mul_f64((i + 1) as f64 / n as f64);
            tokio::spawn(staggered_failovers(
                set.clone(),
                first_at,
                every,
                first.root.clone(),
            ));
        }
    }
    let addrs = std::iter::once(first.addr)
        .chain(routers.iter().map(|r| r.addr))
        .collect();
    let cluster = Sharded {
        cluster,
        routers: addrs,
        other_routers: routers,
        shards,
        names,
    };
    Ok((first, cluster))
}

/// Starts `sharded.shards` shards, each a replica set named `shard<i>`, on
/// free ports of `config.listen`'s address with `config`'s faults (no
/// authentication, TLS or log). Returns their nodes and names, and the
/// cluster that links the routers to them.
async fn start_shards(
    config: &SimConfig,
    sharded: &ShardedConfig,
) -> std::io::Result<(Vec<Node>, Vec<String>, Cluster)> {
    let shard_config = SimConfig {
        listen: SocketAddr::new(config.listen.ip(), 0),
        faults: config.faults.clone(),
        auth: None,
        tls: None,
        sessions: config.sessions,
        profile: ProfileConfig {
            log: None,
            ..config.profile.clone()
        },
    };
    let mut shards = Vec::new();
    let mut names = Vec::new();
    let mut links = Vec::new();
    let mut hosts = Vec::new();
    for i in 0..sharded.shards {
        let name = format!("shard{i}");
        // A shard is a replica set, of one member at least, as MongoDB's
        // have been since 3.6: its members answer a retried write once
        // (by session and txnNumber), which a standalone cannot.
        // Failovers are scheduled below, staggered over the shards.
        let set = ReplSetConfig {
            name: name.clone(),
            members: sharded.shard_members,
            failover_every: None,
            ..sharded.replset.clone()
        };
        let handle = node::start_replset(shard_config.clone(), set).await?;
        let (members, host) = match handle.replset() {
            Some(set) => (
                (0..set.members()).map(|m| set.addr(m)).collect(),
                format!("{name}/{}", set.hosts().join(",")),
            ),
            None => (vec![handle.addr()], handle.addr().to_string()),
        };
        links.push(link::ShardLink::new(members));
        hosts.push((name.clone(), host));
        names.push(name);
        shards.push(handle);
    }
    let cluster = Cluster::new(Catalog::new(hosts), links, sharded.balance_every.is_some());
    Ok((shards, names, cluster))
}

/// Starts `mongos` routers of `cluster` on consecutive ports from
/// `config.listen` (free ones when its port is 0), with `config`'s
/// authentication, TLS and profiler but none of its faults.
async fn start_routers(
    config: &SimConfig,
    mongos: usize,
    cluster: &Arc<Cluster>,
) -> std::io::Result<Vec<Node>> {
    let tls = config.tls.as_ref().map(crate::tls::acceptor).transpose()?;
    let log = open_log(config)?;
    let mut routers = Vec::new();
    for k in 0..mongos {
        let mut listen = config.listen;
        if listen.port() != 0 {
            listen.set_port(listen.port().checked_add(k as u16).ok_or_else(|| {
                invalid(format!("no port for router {k} after {}", config.listen))
            })?);
        }
        // Faults are the shards' (a router's own may be set through its handle).
        let router_config = SimConfig {
            faults: FaultConfig::default(),
            ..config.clone()
        };
        let shared = new_shared(&router_config, &tls, &log);
        let _ = shared.role.set(cluster.clone());
        routers.push(node::serve(listen, Arc::new(shared)).await?);
    }
    Ok(routers)
}

/// Steps `set`'s primary down at `first_at`, then every `every`, until
/// `stop`: shard `i` of N first at `(i + 1)·every/N`, so the shards' elections
/// are spread over the period instead of all at once.
async fn staggered_failovers(
    set: ReplSet,
    first_at: Duration,
    every: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + first_at, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {
                if let Err(e) = set.step_down() {
                    tracing::info!(set = set.name(), reason = %e, "scheduled failover skipped");
                }
            }
        }
    }
}

impl Sharded {
    /// The routers' addresses (the first is the crate's handle's).
    pub fn routers(&self) -> &[SocketAddr] {
        &self.routers
    }

    /// A connection string listing every router.
    pub fn uri(&self) -> String {
        let hosts: Vec<String> = self.routers.iter().map(SocketAddr::to_string).collect();
        format!("mongodb://{}/", hosts.join(","))
    }

    /// Router `k` (0 is the crate's handle itself, so `k` from 1): its
    /// faults and listener.
    pub fn router(&self, k: usize) -> Option<&Node> {
        k.checked_sub(1).and_then(|k| self.other_routers.get(k))
    }

    /// How many shards.
    pub fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Shard `i` as the simulator it is: a standalone, or a replica set
    /// ([`Node::replset`]), with its faults and its own URI (for
    /// reading what it holds directly).
    pub fn shard(&self, i: usize) -> &Node {
        &self.shards[i]
    }

    /// Shard `i`'s name (`shard0`, ...), as `listShards` and
    /// `config.chunks` give it.
    pub fn shard_name(&self, i: usize) -> &str {
        &self.names[i]
    }

    /// The sharded collections' namespaces.
    pub fn collections(&self) -> Vec<String> {
        router::lock(&self.cluster.catalog)
            .collections
            .keys()
            .cloned()
            .collect()
    }

    /// `ns`'s shard key pattern, when sharded.
    pub fn shard_key(&self, ns: &str) -> Option<Document> {
        router::lock(&self.cluster.catalog)
            .collections
            .get(ns)
            .map(|c| c.key.pattern())
    }

    /// `ns`'s chunks in key order (empty when not sharded).
    pub fn chunks(&self, ns: &str) -> Vec<ChunkInfo> {
        let catalog = router::lock(&self.cluster.catalog);
        catalog.collections.get(ns).map_or_else(Vec::new, |c| {
            c.chunks
                .iter()
                .map(|ch| ChunkInfo {
                    min: c.key.bound(&ch.min),
                    max: c.key.bound(&ch.max),
                    shard: ch.shard,
                })
                .collect()
        })
    }

    /// Moves the chunk of `ns` holding the document `find` (its shard
    /// key's fields; hashed as the pattern says) to shard `to`, as
    /// `moveChunk` does. `Ok(None)`: it was there already.
    pub async fn move_chunk(
        &self,
        ns: &str,
        find: &Document,
        to: usize,
    ) -> Result<Option<Migration>, String> {
        if to >= self.shards.len() {
            return Err(format!(
                "no shard {to}: the cluster has {}",
                self.shards.len()
            ));
        }
        let i = router::lock(&self.cluster.catalog)
            .find_chunk(ns, Some(find), None)
            .map_err(|e| e.message)?;
        self.cluster
            .move_chunk(ns, i, to, false)
            .await
            .map_err(|e| e.message)
    }

    /// Runs one balancer round now (whether or not the balancer is on)
    /// and returns the migrations it made.
    pub async fn balance_round(&self) -> Vec<Migration> {
        self.cluster.balance_round().await
    }

    /// Turns the balancer on or off (`balancerStart`/`balancerStop`); it
    /// only runs rounds when started with a `balance_every`.
    pub fn set_balancer(&self, on: bool) {
        self.cluster
            .balancer_on
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Refuses (`true`) or allows the sharding commands (`enableSharding`,
    /// `shardCollection`, `split`, `moveChunk`) as Unauthorized (13), as
    /// MongoDB refuses them to a user with only `readWrite`.
    pub fn refuse_sharding(&self, refuse: bool) {
        self.cluster
            .refuse_sharding
            .store(refuse, std::sync::atomic::Ordering::Relaxed);
    }

    /// Refuses (`true`) or allows `listShards` as Unauthorized (13), as
    /// MongoDB refuses it to a user without `clusterMonitor`.
    pub fn refuse_list_shards(&self, refuse: bool) {
        self.cluster
            .refuse_list_shards
            .store(refuse, std::sync::atomic::Ordering::Relaxed);
    }

    /// Refuses (`true`) or allows reads of `config.changelog` (`find`,
    /// `aggregate`, `count`, `distinct`) as Unauthorized (13), as MongoDB
    /// refuses them to a user with only `readWrite`.
    pub fn refuse_changelog(&self, refuse: bool) {
        self.cluster
            .refuse_changelog
            .store(refuse, std::sync::atomic::Ordering::Relaxed);
    }

    /// Every migration so far, in the order they ended, each with its
    /// true start and end.
    pub fn migrations(&self) -> Vec<Migration> {
        router::lock(&self.cluster.migrations).clone()
    }

    /// Documents of `db.coll` on shard `i`, as its primary counts them
    /// (the truth of where documents are, not what a router says).
    pub async fn shard_documents(&self, i: usize, db: &str, coll: &str) -> Result<i64, String> {
        let r = self.cluster.links[i]
            .run(&bson::doc! { "count": coll, "$db": db })
            .await;
        match r.get("n") {
            Some(bson::Bson::Int32(n)) => Ok((*n).into()),
            Some(bson::Bson::Int64(n)) => Ok(*n),
            _ => Err(format!("count on {}: {r}", self.names[i])),
        }
    }
}

#[cfg(test)]
mod tests {
    use bson::doc;

    use super::link::ShardLink;
    use super::*;

    #[tokio::test]
    async fn shard_collection_creates_the_collection_on_every_shard_where_it_exists_already() {
        let sim = crate::start_sharded(
            SimConfig {
                listen: "127.0.0.1:0".parse().unwrap(),
                ..SimConfig::default()
            },
            ShardedConfig::new(2, 1, 1),
        )
        .await
        .unwrap();
        let router = ShardLink::new(vec![sim.addr()]);
        let run = |cmd: Document| {
            let router = &router;
            async move {
                let reply = router.run(&cmd).await;
                assert_eq!(reply.get_f64("ok"), Ok(1.0), "{cmd} -> {reply}");
                reply
            }
        };
        // The collection is on its primary shard before it is sharded.
        run(doc! { "insert": "c", "documents": [{ "_id": 1 }, { "_id": 2 }], "$db": "d" }).await;
        run(doc! { "create": "c", "$db": "d" }).await;
        run(doc! { "shardCollection": "d.c", "key": { "_id": 1 }, "$db": "admin" }).await;
        assert_eq!(sim.sharded().unwrap().collections(), vec!["d.c".to_owned()]);
        for i in 0..2 {
            let shard = ShardLink::new(vec![sim.sharded().unwrap().shard(i).addr()]);
            let reply = shard
                .run(&doc! { "listCollections": 1, "nameOnly": true, "$db": "d" })
                .await;
            let names = reply
                .get_document("cursor")
                .unwrap()
                .get_array("firstBatch")
                .unwrap();
            assert_eq!(names.len(), 1, "shard {i}: {reply}");
        }
        let n = run(doc! { "count": "c", "$db": "d" }).await;
        assert_eq!(n.get_i32("n"), Ok(2), "{n}");
        sim.shutdown().await;
    }

    #[tokio::test]
    async fn aggregate_with_explain_through_a_router_answers_the_routers_plan() {
        let sim = crate::start_sharded(
            SimConfig {
                listen: "127.0.0.1:0".parse().unwrap(),
                ..SimConfig::default()
            },
            ShardedConfig::new(2, 1, 1),
        )
        .await
        .unwrap();
        let router = ShardLink::new(vec![sim.addr()]);
        let reply = router
            .run(&doc! { "insert": "c", "documents": [{ "_id": 1 }], "$db": "d" })
            .await;
        assert_eq!(reply.get_f64("ok"), Ok(1.0), "{reply}");
        let pipeline = vec![doc! { "$match": { "_id": 1 } }];
        let reply = router
            .run(&doc! { "aggregate": "c", "pipeline": pipeline.clone(), "explain": true, "$db": "d" })
            .await;
        assert_eq!(reply.get_f64("ok"), Ok(1.0), "{reply}");
        assert!(!reply.contains_key("cursor"), "{reply}");
        let explained = router
            .run(&doc! { "explain": { "aggregate": "c", "pipeline": pipeline }, "$db": "d" })
            .await;
        assert_eq!(
            reply.get_document("queryPlanner"),
            explained.get_document("queryPlanner")
        );
        let stage = reply
            .get_document("queryPlanner")
            .and_then(|p| p.get_document("winningPlan"))
            .and_then(|p| p.get_str("stage"));
        assert_eq!(stage, Ok("SINGLE_SHARD"), "{reply}");
        sim.shutdown().await;
    }
}
