//! A router (mongos): answers `hello` as a mongos, keeps the catalog's
//! commands (`enableSharding`, `shardCollection`, `split`, `moveChunk`,
//! `listShards`, `balancerStatus`), serves the `config` database's
//! metadata collections, and routes every other command to the shards
//! over [`ShardLink`]s: targeted by shard key, scatter-gather otherwise,
//! with sort, skip, limit, projection and the pipeline after its leading
//! `$match` run at the router over what the shards return. Cursors the
//! client sees are the router's own (`getMore` is answered here).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use bson::{doc, Bson, Document};
use tokio::sync::{OwnedRwLockReadGuard, RwLock};

use super::catalog::{Catalog, MetaError, ShardKey, ShardedColl};
use super::link::ShardLink;
use super::merge;
use crate::aggregate::Pipeline;
use crate::commands::{self, as_i64, coll_name, command_name, CmdError};
use crate::query::{compare, Filter, Projection, SortSpec};
use crate::shared::Shared;

mod reads;
mod sharding;
mod writes;

/// The metadata collections the router serves from its catalog (and
/// `changelog` from its migration records).
const CONFIG_COLLECTIONS: [&str; 5] = ["shards", "databases", "collections", "chunks", "changelog"];

/// The `server` of the changelog's documents: the config server that
/// wrote them, which the simulator has none of.
const CHANGELOG_SERVER: &str = "mongoload-sim-config";

/// One chunk migration as it really happened: its namespace and range,
/// the shards, the documents moved and when it began and ended (wall
/// clock and monotonic), like the fault records.
#[derive(Debug, Clone, PartialEq)]
pub struct Migration {
    pub ns: String,
    pub min: Document,
    pub max: Document,
    pub from: String,
    pub to: String,
    /// Documents copied to `to` and removed from `from`.
    pub docs: usize,
    pub started: SystemTime,
    pub start: Instant,
    pub end: Instant,
    /// Whether the balancer (rather than a `moveChunk`) moved it.
    pub by_balancer: bool,
}

/// The cluster every router of it shares: the catalog, the shards as the
/// routers reach them, the per-collection gates of migrations, the
/// migration records and the balancer's state.
pub(crate) struct Cluster {
    pub(crate) catalog: Mutex<Catalog>,
    pub(crate) links: Vec<ShardLink>,
    gates: Mutex<HashMap<String, Arc<RwLock<()>>>>,
    pub(crate) migrations: Mutex<Vec<Migration>>,
    pub(crate) balancer_on: AtomicBool,
    pub(crate) balancer_rounds: AtomicU64,
    pub(crate) in_round: AtomicBool,
    /// Refuse the sharding commands of a client as Unauthorized (13), as
    /// MongoDB does for a user with `readWrite` only (a test's switch).
    pub(crate) refuse_sharding: AtomicBool,
    /// Refuse `listShards` as Unauthorized (13), as MongoDB does for a
    /// user without `clusterMonitor` (a test's switch).
    pub(crate) refuse_list_shards: AtomicBool,
    /// Refuse reads of `config.changelog` as Unauthorized (13), as
    /// MongoDB does for a user with only `readWrite` (a test's switch).
    pub(crate) refuse_changelog: AtomicBool,
    /// The `processId` of the routers' `topologyVersion` (they run in one
    /// process).
    process_id: bson::oid::ObjectId,
    /// The routers' cluster time: its increment, advanced by each write.
    clock: AtomicU64,
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

type CmdResult = Result<Document, CmdError>;

impl From<MetaError> for CmdError {
    fn from(e: MetaError) -> Self {
        CmdError::new(e.code, e.code_name, e.message)
    }
}

/// A shard's error reply as a command error (its code, name and message).
fn reply_error(reply: &Document) -> CmdError {
    let code = reply.get_i32("code").unwrap_or(1);
    let mut e = CmdError::new(
        code,
        commands::code_name(code),
        reply.get_str("errmsg").unwrap_or("shard error").to_owned(),
    );
    // The shard's own codeName (the simulator's table of names is short)
    // and labels go through as they came.
    let mut extra = Document::new();
    if let Ok(name) = reply.get_str("codeName") {
        extra.insert("codeName", name);
    }
    if let Ok(labels) = reply.get_array("errorLabels") {
        extra.insert("errorLabels", labels.clone());
    }
    if !extra.is_empty() {
        e.extra = Some(Box::new(extra));
    }
    e
}

fn ok(reply: &Document) -> bool {
    match reply.get("ok") {
        Some(Bson::Double(f)) => *f == 1.0,
        Some(Bson::Int32(i)) => *i == 1,
        Some(Bson::Int64(i)) => *i == 1,
        Some(Bson::Boolean(b)) => *b,
        _ => false,
    }
}

fn num(cmd: &Document, field: &str) -> Option<i64> {
    cmd.get(field).and_then(as_i64)
}

fn doc_arg(cmd: &Document, field: &str) -> Result<Document, CmdError> {
    match cmd.get(field) {
        None | Some(Bson::Null) => Ok(Document::new()),
        Some(Bson::Document(d)) => Ok(d.clone()),
        Some(_) => Err(CmdError::new(
            14,
            "TypeMismatch",
            format!("'{field}' must be an object"),
        )),
    }
}

/// `cmd` as a shard receives it: no `$clusterTime` or read preference
/// (the router reads from primaries), and the retryable write's
/// `txnNumber` made sub-command `k`'s own (`txnNumber × 1024 + k`, the
/// same on a retry, increasing on the session), so a shard answers a
/// retried sub-command once and never takes a sibling for a retry.
fn forwarded(cmd: &Document, k: usize) -> Document {
    let mut out = Document::new();
    for (key, v) in cmd {
        match key.as_str() {
            "$clusterTime" | "$readPreference" => {}
            "txnNumber" => {
                let t = as_i64(v).unwrap_or(0);
                out.insert("txnNumber", t * 1024 + k as i64);
            }
            _ => {
                out.insert(key.clone(), v.clone());
            }
        }
    }
    out
}

fn admin_only(name: &str, db: &str) -> Result<(), CmdError> {
    if db == "admin" {
        Ok(())
    } else {
        Err(CmdError::new(
            13,
            "Unauthorized",
            format!("{name} may only be run against the admin database."),
        ))
    }
}

/// The collection of a namespace argument (`"db.coll"`).
fn split_ns(ns: &str) -> Result<(&str, &str), CmdError> {
    ns.split_once('.')
        .filter(|(d, c)| !d.is_empty() && !c.is_empty())
        .ok_or_else(|| CmdError::new(73, "InvalidNamespace", format!("Invalid namespace {ns}")))
}

impl Cluster {
    pub(crate) fn new(catalog: Catalog, links: Vec<ShardLink>, balancer_on: bool) -> Cluster {
        Cluster {
            catalog: Mutex::new(catalog),
            links,
            gates: Mutex::new(HashMap::new()),
            migrations: Mutex::new(Vec::new()),
            balancer_on: AtomicBool::new(balancer_on),
            refuse_sharding: AtomicBool::new(false),
            refuse_list_shards: AtomicBool::new(false),
            refuse_changelog: AtomicBool::new(false),
            balancer_rounds: AtomicU64::new(0),
            in_round: AtomicBool::new(false),
            process_id: bson::oid::ObjectId::new(),
            clock: AtomicU64::new(1),
        }
    }

    /// `reply` with the routers' `operationTime` and `$clusterTime`, as a
    /// mongos adds them to every reply: the cluster time advances with
    /// each write command (`name`) through any router.
    fn stamped(&self, name: &str, mut reply: Document) -> Document {
        let writes = matches!(
            name,
            "insert" | "update" | "delete" | "findAndModify" | "findandmodify"
        );
        let increment = if writes {
            self.clock.fetch_add(1, Ordering::Relaxed) + 1
        } else {
            self.clock.load(Ordering::Relaxed)
        };
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let ts = bson::Timestamp {
            time: now as u32,
            increment: increment as u32,
        };
        crate::shared::stamp_cluster_time(&mut reply, Bson::Timestamp(ts), Bson::Timestamp(ts));
        reply
    }

    fn gate_of(&self, ns: &str) -> Arc<RwLock<()>> {
        lock(&self.gates)
            .entry(ns.to_owned())
            .or_insert_with(|| Arc::new(RwLock::new(())))
            .clone()
    }

    /// For an operation on `ns`: the gate held while it runs (none when
    /// unsharded: its collection never migrates) and a snapshot of the
    /// collection's metadata, or the database's primary shard.
    async fn route(
        &self,
        ns: &str,
    ) -> (Option<OwnedRwLockReadGuard<()>>, Result<ShardedColl, usize>) {
        let sharded = lock(&self.catalog).collections.contains_key(ns);
        let guard = if sharded {
            Some(self.gate_of(ns).read_owned().await)
        } else {
            None
        };
        let mut catalog = lock(&self.catalog);
        let target = match catalog.collections.get(ns) {
            Some(c) => Ok(c.clone()),
            None => Err(catalog.primary_of(ns.split_once('.').map_or(ns, |(d, _)| d))),
        };
        (guard, target)
    }

    fn shard_name(&self, i: usize) -> String {
        lock(&self.catalog).shards[i].0.clone()
    }

    /// Runs `cmd` on each of `shards` at once; replies in `shards` order.
    async fn scatter(&self, shards: &[usize], cmd: &Document) -> Vec<Document> {
        futures::future::join_all(shards.iter().map(|&s| self.links[s].run(cmd))).await
    }

    /// Reads a cursor command to its end on each of `shards` at once.
    async fn gather(&self, shards: &[usize], cmd: &Document) -> Result<Vec<Document>, CmdError> {
        let all = futures::future::join_all(shards.iter().map(|&s| self.links[s].drain(cmd))).await;
        let mut out = Vec::new();
        for r in all {
            out.extend(r.map_err(|e| reply_error(&e))?);
        }
        Ok(out)
    }

    /// Answers one command as a router.
    pub(crate) async fn respond(
        &self,
        shared: &Shared,
        connection_id: i64,
        body: Document,
    ) -> Document {
        let name = command_name(&body).to_owned();
        let db = body.get_str("$db").unwrap_or("test").to_owned();
        if body.contains_key("autocommit") {
            return CmdError::new(
                20,
                "IllegalOperation",
                "multi-document transactions are not supported by the mongoload sim router",
            )
            .to_doc();
        }
        if self.refuses(&name, &db, &body) {
            return CmdError::new(
                13,
                "Unauthorized",
                format!("not authorized on {db} to execute command {{ {name}: ... }}"),
            )
            .to_doc();
        }
        let result = match name.as_str() {
            "hello" | "isMaster" | "ismaster" => Ok(self.hello(shared, connection_id, body)),
            "isdbgrid" => Ok(doc! { "isdbgrid": 1, "hostname": "localhost", "ok": 1.0 }),
            "explain" => self.explain(&db, &body).await,
            "ping" | "buildInfo" | "buildinfo" | "whatsmyuri" | "endSessions"
            | "killAllSessions" | "killSessions" | "getMore" | "killCursors" | "serverStatus"
            | "profile" => Ok(commands::execute(shared, connection_id, body)),
            "enableSharding" | "enablesharding" => self.enable_sharding(&db, &body),
            "shardCollection" | "shardcollection" => self.shard_collection(&db, &body).await,
            "split" => self.split(&db, &body),
            "moveChunk" | "movechunk" => self.move_chunk_cmd(&db, &body).await,
            "listShards" | "listshards" => admin_only(&name, &db).map(|()| {
                doc! { "shards": lock(&self.catalog).shard_docs(), "ok": 1.0 }
            }),
            "balancerStatus" => admin_only(&name, &db).map(|()| self.balancer_status()),
            "balancerStart" | "balancerStop" => admin_only(&name, &db).map(|()| {
                self.balancer_on
                    .store(name == "balancerStart", Ordering::Relaxed);
                doc! { "ok": 1.0 }
            }),
            "listDatabases" => self.list_databases(&body).await,
            "find" => self.find(shared, &db, &body).await,
            "aggregate" => self.aggregate(shared, &db, &body).await,
            "count" => self.count(&db, &body).await,
            "distinct" => self.distinct(&db, &body).await,
            "insert" => self.insert(&db, &body).await,
            "update" => self.update_or_delete(&db, &body, true).await,
            "delete" => self.update_or_delete(&db, &body, false).await,
            "findAndModify" | "findandmodify" => self.find_and_modify(&db, &body).await,
            "drop" => self.drop(&db, &body).await,
            "dropDatabase" => self.drop_database(&db, &body).await,
            "createIndexes" | "dropIndexes" | "deleteIndexes" => {
                self.indexes(&db, &name, &body).await
            }
            // A mongos has no replica-set commands.
            "replSetGetStatus" | "replSetStepDown" | "replSetGetConfig" | "replSetFreeze"
            | "replSetReconfig" | "replSetInitiate" => Err(CmdError::new(
                59,
                "CommandNotFound",
                format!("no such cmd: {name}"),
            )),
            _ => Ok(self.forward_to_primary(&name, &db, &body).await),
        };
        result.unwrap_or_else(|e| e.to_doc())
    }

    /// Whether a privilege fault refuses `name` on `db` (`body`): the
    /// sharding commands, `listShards`, or reading `config.changelog`.
    fn refuses(&self, name: &str, db: &str, body: &Document) -> bool {
        let sharding_command = matches!(
            name,
            "enableSharding"
                | "enablesharding"
                | "shardCollection"
                | "shardcollection"
                | "split"
                | "moveChunk"
                | "movechunk"
        );
        let reads_changelog = db == "config"
            && matches!(name, "find" | "aggregate" | "count" | "distinct")
            && body.get_str(name) == Ok("changelog");
        (sharding_command && self.refuse_sharding.load(Ordering::Relaxed))
            || (matches!(name, "listShards" | "listshards")
                && self.refuse_list_shards.load(Ordering::Relaxed))
            || (reads_changelog && self.refuse_changelog.load(Ordering::Relaxed))
    }

    /// `hello` as a mongos answers it.
    fn hello(&self, shared: &Shared, connection_id: i64, body: Document) -> Document {
        let mut reply = commands::execute(shared, connection_id, body);
        reply.insert("msg", "isdbgrid");
        // A mongos's counter moves only when it shuts down.
        reply.insert(
            "topologyVersion",
            doc! { "processId": self.process_id, "counter": 0_i64 },
        );
        reply
    }

    /// Any other command: run on the primary shard of its database.
    async fn forward_to_primary(&self, name: &str, db: &str, body: &Document) -> Document {
        // renameCollection runs on admin but belongs to its
        // namespace's database.
        let home = match body.get_str("renameCollection") {
            Ok(ns) if name == "renameCollection" => ns
                .split_once('.')
                .map_or(db.to_owned(), |(d, _)| d.to_owned()),
            _ => db.to_owned(),
        };
        let primary = lock(&self.catalog).primary_of(&home);
        self.links[primary].run(&forwarded(body, 0)).await
    }

    async fn list_databases(&self, cmd: &Document) -> CmdResult {
        let n = self.links.len();
        let replies = self
            .scatter(&(0..n).collect::<Vec<_>>(), &forwarded(cmd, 0))
            .await;
        let mut by_name: BTreeMap<String, Document> = BTreeMap::new();
        for r in replies {
            if !ok(&r) {
                return Err(reply_error(&r));
            }
            for d in r.get_array("databases").into_iter().flatten() {
                let Bson::Document(d) = d else { continue };
                let Ok(name) = d.get_str("name") else {
                    continue;
                };
                match by_name.get_mut(name) {
                    Some(seen) => {
                        let size = num(seen, "sizeOnDisk").unwrap_or(0)
                            + num(d, "sizeOnDisk").unwrap_or(0);
                        if seen.contains_key("sizeOnDisk") {
                            seen.insert("sizeOnDisk", size);
                        }
                    }
                    None => {
                        by_name.insert(name.to_owned(), d.clone());
                    }
                }
            }
        }
        let total: i64 = by_name.values().filter_map(|d| num(d, "sizeOnDisk")).sum();
        let dbs: Vec<Document> = by_name.into_values().collect();
        let mut reply = doc! { "databases": dbs };
        if cmd.get_bool("nameOnly") != Ok(true) {
            reply.insert("totalSize", total);
        }
        reply.insert("ok", 1.0);
        Ok(reply)
    }
}

/// `config.changelog` as MongoDB's config server writes it for the
/// migrations: per migration a `moveChunk.start` (at its start) and a
/// `moveChunk.commit` (at its commit: the record's end), each with
/// `details: {min, max, from, to}`, in the order the records were made
/// (the simulator records a migration when it commits, so a start shows
/// only with its commit).
pub(crate) fn changelog_docs(migrations: &[Migration]) -> Vec<Document> {
    let mut out = Vec::with_capacity(migrations.len() * 2);
    for (i, m) in migrations.iter().enumerate() {
        let committed = m.started + m.end.duration_since(m.start);
        for (k, (what, at)) in [
            ("moveChunk.start", m.started),
            ("moveChunk.commit", committed),
        ]
        .into_iter()
        .enumerate()
        {
            let time = bson::DateTime::from_system_time(at);
            out.push(doc! {
                // MongoDB's `<host>-<time>-<increment>`.
                "_id": format!(
                    "{CHANGELOG_SERVER}-{}-{}",
                    time.try_to_rfc3339_string().unwrap_or_default(),
                    i * 2 + k
                ),
                "server": CHANGELOG_SERVER,
                "shard": "config",
                "clientAddr": "",
                "time": time,
                "what": what,
                "ns": &m.ns,
                "details": {
                    "min": m.min.clone(),
                    "max": m.max.clone(),
                    "from": &m.from,
                    "to": &m.to,
                },
            });
        }
    }
    out
}

/// The balancer: one round every `every` while the cluster's token lives.
pub(crate) async fn balancer(
    cluster: Arc<Cluster>,
    every: Duration,
    stop: tokio_util::sync::CancellationToken,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if cluster.balancer_on.load(Ordering::Relaxed) {
            cluster.balance_round().await;
        }
    }
}

/// A router's server hands every command to its cluster ([`Cluster::respond`]).
impl crate::shared::Role for Cluster {
    fn respond<'a>(
        &'a self,
        shared: &'a Shared,
        connection_id: i64,
        body: Document,
    ) -> futures::future::BoxFuture<'a, Document> {
        Box::pin(async move {
            let name = command_name(&body).to_owned();
            let body = without_after_cluster_time(body);
            let reply = Cluster::respond(self, shared, connection_id, body).await;
            self.stamped(&name, reply)
        })
    }
}

/// `body` without `readConcern.afterClusterTime`: the router reads from
/// the shards' primaries, which hold every write it acknowledged, and
/// the shards keep clocks of their own.
fn without_after_cluster_time(mut body: Document) -> Document {
    if let Ok(rc) = body.get_document_mut("readConcern") {
        rc.remove("afterClusterTime");
    }
    body
}
