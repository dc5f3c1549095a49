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
        let sharding_command = matches!(
            name.as_str(),
            "enableSharding"
                | "enablesharding"
                | "shardCollection"
                | "shardcollection"
                | "split"
                | "moveChunk"
                | "movechunk"
        );
        let reads_changelog = db == "config"
            && matches!(name.as_str(), "find" | "aggregate" | "count" | "distinct")
            && body.get_str(&name) == Ok("changelog");
        let refused = (sharding_command && self.refuse_sharding.load(Ordering::Relaxed))
            || (matches!(name.as_str(), "listShards" | "listshards")
                && self.refuse_list_shards.load(Ordering::Relaxed))
            || (reads_changelog && self.refuse_changelog.load(Ordering::Relaxed));
        if refused {
            return CmdError::new(
                13,
                "Unauthorized",
                format!("not authorized on {db} to execute command {{ {name}: ... }}"),
            )
            .to_doc();
        }
        let result = match name.as_str() {
            "hello" | "isMaster" | "ismaster" => {
                let mut reply = commands::execute(shared, connection_id, body);
                reply.insert("msg", "isdbgrid");
                // A mongos's counter moves only when it shuts down.
                reply.insert(
                    "topologyVersion",
                    doc! { "processId": self.process_id, "counter": 0_i64 },
                );
                Ok(reply)
            }
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
            _ => {
                // renameCollection runs on admin but belongs to its
                // namespace's database.
                let home = match body.get_str("renameCollection") {
                    Ok(ns) if name == "renameCollection" => {
                        ns.split_once('.').map_or(db.clone(), |(d, _)| d.to_owned())
                    }
                    _ => db.clone(),
                };
                let primary = lock(&self.catalog).primary_of(&home);
                Ok(self.links[primary].run(&forwarded(&body, 0)).await)
            }
        };
        result.unwrap_or_else(|e| e.to_doc())
    }

    fn enable_sharding(&self, db: &str, cmd: &Document) -> CmdResult {
        admin_only("enableSharding", db)?;
        let target = cmd.get_str(command_name(cmd)).map_err(|_| {
            CmdError::new(14, "TypeMismatch", "enableSharding takes a database name")
        })?;
        let mut catalog = lock(&self.catalog);
        if let Ok(primary) = cmd.get_str("primaryShard") {
            let i = catalog.shard_named(primary).ok_or_else(|| {
                CmdError::new(70, "ShardNotFound", format!("Shard {primary} not found"))
            })?;
            if !catalog.databases.contains_key(target) {
                catalog.database(target);
                if let Some(e) = catalog.databases.get_mut(target) {
                    e.primary = i;
                }
            }
        }
        catalog.database(target);
        Ok(doc! { "ok": 1.0 })
    }

    async fn shard_collection(&self, db: &str, cmd: &Document) -> CmdResult {
        admin_only("shardCollection", db)?;
        let ns = cmd
            .get_str(command_name(cmd))
            .map_err(|_| CmdError::new(14, "TypeMismatch", "shardCollection takes a namespace"))?
            .to_owned();
        let (cdb, coll) = split_ns(&ns)?;
        let key = ShardKey::parse(&doc_arg(cmd, "key")?)?;
        if cmd.get_bool("presplitHashedZones") == Ok(true) {
            return Err(CmdError::new(
                72,
                "InvalidOptions",
                "presplitHashedZones is true but the cluster has no zones",
            ));
        }
        let unique = cmd.get_bool("unique").unwrap_or(false);
        let initial = num(cmd, "numInitialChunks");
        let primary = lock(&self.catalog).primary_of(cdb);
        // The collection's documents, where they are now: on its primary.
        let count = self.links[primary]
            .run(&doc! { "count": coll, "$db": cdb })
            .await;
        let empty = !ok(&count) || num(&count, "n").unwrap_or(0) == 0;
        // The shard key's index on every shard (MongoDB creates it on the
        // primary and on each shard receiving a chunk).
        let index = doc! {
            "createIndexes": coll,
            "indexes": [{ "key": key.pattern(), "name": crate::store::index_name(&key.index_key()) }],
            "$db": cdb,
        };
        // `{_id: 1}` is the `_id_` index every collection has.
        if key.hashed().is_some() || key.fields.len() > 1 || key.fields[0].0 != "_id" {
            let n = self.links.len();
            for r in self.scatter(&(0..n).collect::<Vec<_>>(), &index).await {
                if !ok(&r) {
                    return Err(reply_error(&r));
                }
            }
        }
        // The collection on every shard, as MongoDB creates it on each
        // shard that receives a chunk (so each answers `$collStats`).
        // A plain create answers ok where the collection exists already
        // (the primary shard, a shard that had a chunk), as MongoDB 7.0.
        let create = doc! { "create": coll, "$db": cdb };
        let n = self.links.len();
        for r in self.scatter(&(0..n).collect::<Vec<_>>(), &create).await {
            if !ok(&r) {
                return Err(reply_error(&r));
            }
        }
        let uuid = {
            let mut catalog = lock(&self.catalog);
            catalog.shard_collection(&ns, key, unique, initial, empty)?;
            catalog.collections[&ns].uuid.clone()
        };
        Ok(doc! { "collectionsharded": &ns, "collectionUUID": uuid, "ok": 1.0 })
    }

    fn split(&self, db: &str, cmd: &Document) -> CmdResult {
        admin_only("split", db)?;
        let ns = cmd
            .get_str("split")
            .map_err(|_| CmdError::new(14, "TypeMismatch", "split takes a namespace"))?;
        let middle = match cmd.get("middle") {
            Some(Bson::Document(m)) => m.clone(),
            _ => {
                return Err(CmdError::new(
                    72,
                    "InvalidOptions",
                    "split needs 'middle' (a document with the shard key's fields)",
                ))
            }
        };
        lock(&self.catalog).split(ns, &middle)?;
        Ok(doc! { "ok": 1.0 })
    }

    async fn move_chunk_cmd(&self, db: &str, cmd: &Document) -> CmdResult {
        admin_only("moveChunk", db)?;
        let ns = cmd
            .get_str("moveChunk")
            .or_else(|_| cmd.get_str("movechunk"))
            .map_err(|_| CmdError::new(14, "TypeMismatch", "moveChunk takes a namespace"))?
            .to_owned();
        let to = cmd.get_str("to").map_err(|_| {
            CmdError::new(72, "InvalidOptions", "moveChunk needs 'to' (a shard name)")
        })?;
        let (i, to) = {
            let catalog = lock(&self.catalog);
            let to = catalog.shard_named(to).ok_or_else(|| {
                CmdError::new(70, "ShardNotFound", format!("Shard {to} not found"))
            })?;
            let find = cmd.get_document("find").ok();
            let bounds = cmd.get_array("bounds").ok().map(Vec::as_slice);
            (catalog.find_chunk(&ns, find, bounds)?, to)
        };
        let started = Instant::now();
        self.move_chunk(&ns, i, to, false).await?;
        Ok(doc! { "millis": started.elapsed().as_millis() as i64, "ok": 1.0 })
    }

    /// Moves chunk `i` of `ns` to shard `to`: with the collection's gate
    /// held (its reads and writes wait), copies the chunk's documents to
    /// `to`, removes them from their shard and records the new owner.
    pub(crate) async fn move_chunk(
        &self,
        ns: &str,
        i: usize,
        to: usize,
        by_balancer: bool,
    ) -> Result<Option<Migration>, CmdError> {
        let gate = self.gate_of(ns);
        let _write = gate.write().await;
        let (chunk, key) = {
            let catalog = lock(&self.catalog);
            let coll = catalog.collections.get(ns).ok_or_else(|| {
                CmdError::new(118, "NamespaceNotSharded", format!("{ns} is not sharded"))
            })?;
            let chunk = coll.chunks.get(i).cloned().ok_or_else(|| {
                CmdError::new(72, "InvalidOptions", "the chunk changed; try again")
            })?;
            (chunk, coll.key.clone())
        };
        if chunk.shard == to {
            return Ok(None);
        }
        let (started, start) = (SystemTime::now(), Instant::now());
        let (db, coll) = split_ns(ns)?;
        let from = chunk.shard;
        let all = self.links[from]
            .drain(&doc! { "find": coll, "filter": {}, "$db": db })
            .await
            .map_err(|e| reply_error(&e))?;
        let moving: Vec<Document> = all
            .into_iter()
            .filter(|d| chunk.contains(&key.key_of(d)))
            .collect();
        let ids: Vec<Bson> = moving
            .iter()
            .filter_map(|d| d.get("_id").cloned())
            .collect();
        for batch in moving.chunks(1000) {
            let r = self.links[to]
                .run(&doc! {
                    "insert": coll, "documents": batch.to_vec(), "ordered": false,
                    "writeConcern": { "w": "majority" }, "$db": db,
                })
                .await;
            let dup_only = r
                .get_array("writeErrors")
                .map(|e| {
                    e.iter()
                        .all(|w| matches!(w, Bson::Document(w) if w.get_i32("code") == Ok(11000)))
                })
                .unwrap_or(true);
            if !ok(&r) || !dup_only {
                // Take back what was copied: no copy may outlive a failed move.
                self.delete_ids(to, db, coll, &ids).await;
                return Err(if ok(&r) {
                    CmdError::new(
                        96,
                        "OperationFailed",
                        format!("migration of {ns} to {} failed: {r}", self.shard_name(to)),
                    )
                } else {
                    reply_error(&r)
                });
            }
        }
        let r = self.delete_ids(from, db, coll, &ids).await;
        if !ok(&r) {
            self.delete_ids(to, db, coll, &ids).await;
            return Err(reply_error(&r));
        }
        lock(&self.catalog).commit_move(ns, i, to)?;
        let m = Migration {
            ns: ns.to_owned(),
            min: key.bound(&chunk.min),
            max: key.bound(&chunk.max),
            from: self.shard_name(from),
            to: self.shard_name(to),
            docs: ids.len(),
            started,
            start,
            end: Instant::now(),
            by_balancer,
        };
        tracing::info!(
            ns, min = %m.min, max = %m.max, from = %m.from, to = %m.to, docs = m.docs,
            millis = m.end.duration_since(m.start).as_millis() as u64,
            "chunk migrated"
        );
        lock(&self.migrations).push(m.clone());
        Ok(Some(m))
    }

    async fn delete_ids(&self, shard: usize, db: &str, coll: &str, ids: &[Bson]) -> Document {
        let mut last = doc! { "ok": 1.0 };
        for batch in ids.chunks(1000) {
            last = self.links[shard]
                .run(&doc! {
                    "delete": coll,
                    "deletes": [{ "q": { "_id": { "$in": batch.to_vec() } }, "limit": 0 }],
                    "writeConcern": { "w": "majority" },
                    "$db": db,
                })
                .await;
            if !ok(&last) {
                return last;
            }
        }
        last
    }

    fn balancer_status(&self) -> Document {
        doc! {
            "mode": if self.balancer_on.load(Ordering::Relaxed) { "full" } else { "off" },
            "inBalancerRound": self.in_round.load(Ordering::Relaxed),
            "numBalancerRounds": self.balancer_rounds.load(Ordering::Relaxed) as i64,
            "ok": 1.0,
        }
    }

    /// One balancer round: for each sharded collection, one chunk from
    /// the shard with most chunks to the one with fewest when they differ
    /// by two or more.
    pub(crate) async fn balance_round(&self) -> Vec<Migration> {
        self.in_round.store(true, Ordering::Relaxed);
        let plan: Vec<(String, usize, usize)> = {
            let catalog = lock(&self.catalog);
            catalog
                .collections
                .values()
                .filter_map(|c| {
                    let counts = catalog.chunk_counts(&c.ns);
                    let most =
                        (0..counts.len()).max_by_key(|&s| (counts[s], std::cmp::Reverse(s)))?;
                    let fewest = (0..counts.len()).min_by_key(|&s| (counts[s], s))?;
                    if counts[most] < counts[fewest] + 2 {
                        return None;
                    }
                    let i = c.chunks.iter().position(|ch| ch.shard == most)?;
                    Some((c.ns.clone(), i, fewest))
                })
                .collect()
        };
        let mut done = Vec::new();
        for (ns, i, to) in plan {
            match self.move_chunk(&ns, i, to, true).await {
                Ok(Some(m)) => done.push(m),
                Ok(None) => {}
                Err(e) => tracing::warn!(ns, error = %e.message, "balancer: migration failed"),
            }
        }
        self.balancer_rounds.fetch_add(1, Ordering::Relaxed);
        self.in_round.store(false, Ordering::Relaxed);
        done
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

    /// The metadata collection `config.<coll>` as documents.
    fn config_docs(&self, coll: &str) -> Vec<Document> {
        if coll == "changelog" {
            return changelog_docs(&lock(&self.migrations));
        }
        let catalog = lock(&self.catalog);
        match coll {
            "shards" => catalog.shard_docs(),
            "databases" => catalog.database_docs(),
            "collections" => catalog.collection_docs(),
            _ => catalog.chunk_docs(),
        }
    }

    /// Opens the router's cursor over `docs` and answers as `find` or
    /// `aggregate` does.
    fn cursor_reply(
        shared: &Shared,
        ns: &str,
        docs: Vec<Document>,
        batch: Option<usize>,
        single: bool,
    ) -> Document {
        let (first, id) = shared.cursors.open(ns, docs, batch, single);
        doc! { "cursor": { "firstBatch": first, "id": id, "ns": ns }, "ok": 1.0 }
    }

    async fn find(&self, shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
        let coll = coll_name(cmd, "find")?;
        let ns = format!("{db}.{coll}");
        let filter_doc = doc_arg(cmd, "filter")?;
        let filter = Filter::parse(&filter_doc)?;
        let sort_doc = doc_arg(cmd, "sort")?;
        let sort = (!sort_doc.is_empty())
            .then(|| SortSpec::parse(&sort_doc))
            .transpose()?;
        let projection = doc_arg(cmd, "projection")?;
        let projection = (!projection.is_empty())
            .then(|| Projection::parse(&projection))
            .transpose()?;
        let skip = num(cmd, "skip").unwrap_or(0).max(0) as usize;
        let limit = num(cmd, "limit").unwrap_or(0);
        let single = cmd.get_bool("singleBatch") == Ok(true) || limit < 0;
        let limit = limit.unsigned_abs() as usize;
        let batch = num(cmd, "batchSize").map(|b| b.max(0) as usize);
        let docs = if db == "config" && CONFIG_COLLECTIONS.contains(&coll) {
            self.config_docs(coll)
                .into_iter()
                .filter(|d| filter.matches(d))
                .collect()
        } else {
            let (_gate, route) = self.route(&ns).await;
            let shards = match &route {
                Ok(c) => c.targets(&filter),
                Err(primary) => vec![*primary],
            };
            let mut sub = doc! { "find": coll, "filter": filter_doc, "$db": db };
            if !sort_doc.is_empty() {
                sub.insert("sort", sort_doc.clone());
            }
            if limit > 0 {
                sub.insert("limit", (skip + limit) as i64);
            }
            for k in ["readConcern", "maxTimeMS", "lsid", "hint"] {
                if let Some(v) = cmd.get(k) {
                    sub.insert(k, v.clone());
                }
            }
            self.gather(&shards, &sub).await?
        };
        let docs = merge::finish(docs, sort.as_ref(), skip, limit, projection.as_ref());
        Ok(Self::cursor_reply(shared, &ns, docs, batch, single))
    }

    /// `explain` through the router: the shards the command targets, each
    /// with its own plan, under `SINGLE_SHARD` (one shard) or
    /// `SHARD_MERGE` (several, their results merged here).
    async fn explain(&self, db: &str, cmd: &Document) -> CmdResult {
        let inner = cmd
            .get_document("explain")
            .map_err(|_| CmdError::new(14, "TypeMismatch", "explain takes a command document"))?;
        let (coll, filter_doc, _) = commands::explain::query_of(inner)?;
        let filter = Filter::parse(&filter_doc)?;
        let ns = format!("{db}.{coll}");
        let (_gate, route) = self.route(&ns).await;
        let shards = match &route {
            Ok(c) => c.targets(&filter),
            Err(primary) => vec![*primary],
        };
        let sub = doc! { "explain": inner.clone(), "$db": db };
        let replies =
            futures::future::join_all(shards.iter().map(|&s| self.links[s].run(&sub))).await;
        let names: Vec<(String, String)> = lock(&self.catalog).shards.clone();
        let mut plans = Vec::new();
        for (&s, reply) in shards.iter().zip(replies) {
            if reply.get_f64("ok") != Ok(1.0) {
                return Err(reply_error(&reply));
            }
            let mut planner = reply
                .get_document("queryPlanner")
                .cloned()
                .unwrap_or_default();
            let mut shard = doc! {
                "shardName": names[s].0.as_str(),
                "connectionString": names[s].1.as_str(),
                "serverInfo": reply.get_document("serverInfo").cloned().unwrap_or_default(),
            };
            for k in [
                "namespace",
                "indexFilterSet",
                "parsedQuery",
                "winningPlan",
                "rejectedPlans",
            ] {
                if let Some(v) = planner.remove(k) {
                    shard.insert(k, v);
                }
            }
            plans.push(Bson::Document(shard));
        }
        let stage = if shards.len() == 1 {
            "SINGLE_SHARD"
        } else {
            "SHARD_MERGE"
        };
        let mut command = inner.clone();
        command.insert("$db", db);
        Ok(doc! {
            "queryPlanner": {
                "mongosPlannerVersion": 1,
                "winningPlan": { "stage": stage, "shards": plans },
            },
            "serverInfo": { "version": commands::VERSION },
            "command": command,
            "ok": 1.0,
        })
    }

    async fn aggregate(&self, shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
        let coll = coll_name(cmd, "aggregate")?;
        let ns = format!("{db}.{coll}");
        let stages: Vec<Document> = match cmd.get_array("pipeline") {
            Ok(a) => a
                .iter()
                .map(|s| match s {
                    Bson::Document(d) => Ok(d.clone()),
                    _ => Err(CmdError::new(
                        14,
                        "TypeMismatch",
                        "Each element of the 'pipeline' array must be an object",
                    )),
                })
                .collect::<Result<_, _>>()?,
            Err(_) => {
                return Err(CmdError::new(
                    14,
                    "TypeMismatch",
                    "'pipeline' must be an array",
                ))
            }
        };
        let batch = cmd
            .get_document("cursor")
            .ok()
            .and_then(|c| num(c, "batchSize"))
            .map(|b| b.max(0) as usize);
        // Parse the whole pipeline first: an unknown stage is refused here.
        Pipeline::parse(&stages)?;
        // A plan, not results: what `explain` of this aggregate answers.
        if cmd.get_bool("explain") == Ok(true) {
            let inner = commands::explain::explained_aggregate(cmd);
            return self.explain(db, &doc! { "explain": inner }).await;
        }
        let collstats = stages
            .first()
            .is_some_and(|s| command_name(s) == "$collStats");
        let (lead, rest) = merge::split_pipeline(&stages);
        let docs = if db == "config" && CONFIG_COLLECTIONS.contains(&coll) {
            Pipeline::parse(&stages)?.run(self.config_docs(coll).into_iter())?
        } else {
            let (_gate, route) = self.route(&ns).await;
            let filter = Filter::parse(&merge::lead_filter(&lead))?;
            let shards = match &route {
                Ok(c) if collstats => {
                    let mut s: Vec<usize> = c.chunks.iter().map(|ch| ch.shard).collect();
                    s.sort_unstable();
                    s.dedup();
                    s
                }
                Ok(c) => c.targets(&filter),
                Err(primary) => vec![*primary],
            };
            if collstats {
                // $collStats runs on each shard; each result names its
                // shard, and the router runs the rest of the pipeline over
                // them (as mongos merges).
                let sub = doc! {
                    "aggregate": coll, "pipeline": [stages[0].clone()], "cursor": {}, "$db": db,
                };
                let mut out = Vec::new();
                for &s in &shards {
                    let docs = self.links[s]
                        .drain(&sub)
                        .await
                        .map_err(|e| reply_error(&e))?;
                    let name = self.shard_name(s);
                    out.extend(docs.into_iter().map(|mut d| {
                        d.insert("shard", name.clone());
                        d
                    }));
                }
                Pipeline::parse(&stages[1..])?.run(out.into_iter())?
            } else {
                let mut sub = doc! { "aggregate": coll, "pipeline": lead, "cursor": {}, "$db": db };
                for k in ["readConcern", "maxTimeMS", "lsid", "hint"] {
                    if let Some(v) = cmd.get(k) {
                        sub.insert(k, v.clone());
                    }
                }
                let docs = self.gather(&shards, &sub).await?;
                Pipeline::parse(&rest)?.run(docs.into_iter())?
            }
        };
        Ok(Self::cursor_reply(shared, &ns, docs, batch, false))
    }

    async fn count(&self, db: &str, cmd: &Document) -> CmdResult {
        let coll = coll_name(cmd, "count")?;
        let ns = format!("{db}.{coll}");
        let query = doc_arg(cmd, "query")?;
        let filter = Filter::parse(&query)?;
        let skip = num(cmd, "skip").unwrap_or(0).max(0);
        let limit = num(cmd, "limit").unwrap_or(0).abs();
        let total = if db == "config" && CONFIG_COLLECTIONS.contains(&coll) {
            self.config_docs(coll)
                .iter()
                .filter(|d| filter.matches(d))
                .count() as i64
        } else {
            let (_gate, route) = self.route(&ns).await;
            let shards = match &route {
                Ok(c) => c.targets(&filter),
                Err(p) => vec![*p],
            };
            let mut total = 0;
            for r in self
                .scatter(&shards, &doc! { "count": coll, "query": query, "$db": db })
                .await
            {
                if !ok(&r) {
                    return Err(reply_error(&r));
                }
                total += num(&r, "n").unwrap_or(0);
            }
            total
        };
        let mut n = (total - skip).max(0);
        if limit > 0 {
            n = n.min(limit);
        }
        Ok(doc! { "n": i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32), "ok": 1.0 })
    }

    async fn distinct(&self, db: &str, cmd: &Document) -> CmdResult {
        let coll = coll_name(cmd, "distinct")?;
        let ns = format!("{db}.{coll}");
        let query = doc_arg(cmd, "query")?;
        let filter = Filter::parse(&query)?;
        let (_gate, route) = self.route(&ns).await;
        let shards = match &route {
            Ok(c) => c.targets(&filter),
            Err(p) => vec![*p],
        };
        let mut values: Vec<Bson> = Vec::new();
        for r in self.scatter(&shards, &forwarded(cmd, 0)).await {
            if !ok(&r) {
                return Err(reply_error(&r));
            }
            values.extend(r.get_array("values").cloned().unwrap_or_default());
        }
        values.sort_by(compare);
        values.dedup_by(|a, b| compare(a, b) == std::cmp::Ordering::Equal);
        Ok(doc! { "values": values, "ok": 1.0 })
    }

    async fn insert(&self, db: &str, cmd: &Document) -> CmdResult {
        let coll = coll_name(cmd, "insert")?;
        let ns = format!("{db}.{coll}");
        let (_gate, route) = self.route(&ns).await;
        let c = match route {
            Ok(c) => c,
            Err(primary) => return Ok(self.links[primary].run(&forwarded(cmd, 0)).await),
        };
        let docs = cmd.get_array("documents").cloned().unwrap_or_default();
        let ordered = cmd.get_bool("ordered").unwrap_or(true);
        // Documents per shard, with their index in the command.
        let mut groups: BTreeMap<usize, Vec<(usize, Document)>> = BTreeMap::new();
        for (i, d) in docs.into_iter().enumerate() {
            let Bson::Document(mut d) = d else {
                return Err(CmdError::new(
                    14,
                    "TypeMismatch",
                    "documents must be objects",
                ));
            };
            if !d.contains_key("_id") {
                let mut with_id = doc! { "_id": bson::oid::ObjectId::new() };
                with_id.extend(d);
                d = with_id;
            }
            groups.entry(c.shard_of(&d)).or_default().push((i, d));
        }
        let subs: Vec<(usize, Vec<(usize, Document)>)> = groups.into_iter().collect();
        let make = |k: usize, group: &[(usize, Document)]| {
            let mut sub = forwarded(cmd, k);
            sub.insert(
                "documents",
                group
                    .iter()
                    .map(|(_, d)| Bson::Document(d.clone()))
                    .collect::<Vec<_>>(),
            );
            sub
        };
        let replies: Vec<Document> =
            if ordered {
                let mut out = Vec::new();
                for (k, (s, group)) in subs.iter().enumerate() {
                    let r = self.links[*s].run(&make(k, group)).await;
                    let failed = !ok(&r) || r.get_array("writeErrors").is_ok_and(|e| !e.is_empty());
                    out.push(r);
                    if failed {
                        break;
                    }
                }
                out
            } else {
                futures::future::join_all(subs.iter().enumerate().map(
                    |(k, (s, group))| async move { self.links[*s].run(&make(k, group)).await },
                ))
                .await
            };
        let mut merged = merge::WriteReply::default();
        for (r, (_, group)) in replies.iter().zip(&subs) {
            let indexes: Vec<usize> = group.iter().map(|(i, _)| *i).collect();
            merged.absorb(r, &indexes, ordered);
        }
        Ok(merged.into_doc(false))
    }

    /// `update` or `delete`: statement by statement, each to the shards
    /// its filter targets.
    async fn update_or_delete(&self, db: &str, cmd: &Document, update: bool) -> CmdResult {
        let name = if update { "update" } else { "delete" };
        let list = if update { "updates" } else { "deletes" };
        let coll = coll_name(cmd, name)?;
        // As mongos parses the command: a statement without `q` is refused
        // whole, never routed with an empty filter.
        commands::check_write_statements(cmd)?;
        let ns = format!("{db}.{coll}");
        let (_gate, route) = self.route(&ns).await;
        let c = match route {
            Ok(c) => c,
            Err(primary) => return Ok(self.links[primary].run(&forwarded(cmd, 0)).await),
        };
        let ordered = cmd.get_bool("ordered").unwrap_or(true);
        let statements = cmd.get_array(list).cloned().unwrap_or_default();
        let mut merged = merge::WriteReply::default();
        let mut k = 0;
        for (i, st) in statements.into_iter().enumerate() {
            let Bson::Document(st) = st else {
                return Err(CmdError::new(
                    14,
                    "TypeMismatch",
                    format!("{list} must be objects"),
                ));
            };
            let q = doc_arg(&st, "q")?;
            let filter = Filter::parse(&q)?;
            let multi = if update {
                st.get_bool("multi").unwrap_or(false)
            } else {
                num(&st, "limit").unwrap_or(0) == 0
            };
            let upsert = update && st.get_bool("upsert").unwrap_or(false);
            let targets = c.targets(&filter);
            let exact = c.key.exact(&filter).is_some();
            let by_id = filter
                .intervals("_id")
                .is_some_and(|iv| iv.len() == 1 && matches!(&iv[0].lower, crate::query::Bound::Included(l) if matches!(&iv[0].upper, crate::query::Bound::Included(u) if compare(l, u).is_eq())));
            let refused = if upsert && !exact {
                Some(format!(
                    "Failed to target upsert by query :: could not extract exact shard key from {q} for the shard key {}",
                    c.key.pattern()
                ))
            } else if !multi && targets.len() > 1 && !by_id {
                Some(format!(
                    "A {{multi:false}} {name} on a sharded collection must contain an exact match on _id (and have the collection default collation) or contain the shard key (and have the simple collation). Query: {q}, shard key pattern: {}",
                    c.key.pattern()
                ))
            } else {
                None
            };
            if let Some(message) = refused {
                merged.error(i, 61, "ShardKeyNotFound", message);
                if ordered {
                    break;
                }
                continue;
            }
            let mut failed = false;
            for s in targets {
                let mut sub = forwarded(cmd, k);
                k += 1;
                sub.insert(list, vec![Bson::Document(st.clone())]);
                let r = self.links[s].run(&sub).await;
                failed |= !ok(&r) || r.get_array("writeErrors").is_ok_and(|e| !e.is_empty());
                let n = num(&r, "n").unwrap_or(0);
                merged.absorb(&r, &[i], ordered);
                // A single-document statement is done once a shard did it.
                if failed || (!multi && n > 0) {
                    break;
                }
            }
            if failed && ordered {
                break;
            }
        }
        Ok(merged.into_doc(update))
    }

    async fn find_and_modify(&self, db: &str, cmd: &Document) -> CmdResult {
        let coll = coll_name(cmd, command_name(cmd))?;
        let ns = format!("{db}.{coll}");
        let (_gate, route) = self.route(&ns).await;
        let c = match route {
            Ok(c) => c,
            Err(primary) => return Ok(self.links[primary].run(&forwarded(cmd, 0)).await),
        };
        let query = doc_arg(cmd, "query")?;
        let filter = Filter::parse(&query)?;
        let targets = c.targets(&filter);
        let upsert = cmd.get_bool("upsert").unwrap_or(false);
        if targets.len() != 1 || (upsert && c.key.exact(&filter).is_none()) {
            return Err(CmdError::new(
                61,
                "ShardKeyNotFound",
                format!(
                    "Query for sharded findAndModify must contain the shard key: {query}, shard key pattern: {}",
                    c.key.pattern()
                ),
            ));
        }
        Ok(self.links[targets[0]].run(&forwarded(cmd, 0)).await)
    }

    async fn drop(&self, db: &str, cmd: &Document) -> CmdResult {
        let coll = coll_name(cmd, "drop")?;
        let ns = format!("{db}.{coll}");
        let gate = self.gate_of(&ns);
        let _w = gate.write().await;
        let n = self.links.len();
        let replies = self
            .scatter(&(0..n).collect::<Vec<_>>(), &forwarded(cmd, 0))
            .await;
        lock(&self.catalog).drop_collection(&ns);
        // Dropped where it was; a shard that never had it answers
        // NamespaceNotFound, which a drop of a collection that exists ignores.
        Ok(replies
            .into_iter()
            .find(ok)
            .unwrap_or_else(|| doc! { "ok": 1.0 }))
    }

    async fn drop_database(&self, db: &str, cmd: &Document) -> CmdResult {
        let n = self.links.len();
        for r in self
            .scatter(&(0..n).collect::<Vec<_>>(), &forwarded(cmd, 0))
            .await
        {
            if !ok(&r) {
                return Err(reply_error(&r));
            }
        }
        lock(&self.catalog).drop_database(db);
        Ok(doc! { "ok": 1.0 })
    }

    async fn indexes(&self, db: &str, name: &str, cmd: &Document) -> CmdResult {
        let coll = coll_name(cmd, name)?;
        let ns = format!("{db}.{coll}");
        let (sharded, primary) = {
            let mut catalog = lock(&self.catalog);
            (
                catalog.collections.contains_key(&ns),
                catalog.primary_of(db),
            )
        };
        if !sharded {
            return Ok(self.links[primary].run(&forwarded(cmd, 0)).await);
        }
        if name == "createIndexes" {
            let key = lock(&self.catalog).collections[&ns].key.clone();
            unique_compatible(&key, cmd)?;
        }
        let n = self.links.len();
        let mut replies = self
            .scatter(&(0..n).collect::<Vec<_>>(), &forwarded(cmd, 0))
            .await;
        if let Some(bad) = replies.iter().find(|r| !ok(r)) {
            return Err(reply_error(bad));
        }
        Ok(replies.swap_remove(primary))
    }
}

/// Refuses a unique index on a sharded collection whose key does not
/// start with the shard key's fields (`_id`'s own index aside), as
/// MongoDB does (67 CannotCreateIndex): a shard can only enforce
/// uniqueness over documents the shard key keeps together.
fn unique_compatible(key: &ShardKey, cmd: &Document) -> Result<(), CmdError> {
    let Ok(specs) = cmd.get_array("indexes") else {
        return Ok(());
    };
    for spec in specs.iter().filter_map(Bson::as_document) {
        if spec.get_bool("unique") != Ok(true) {
            continue;
        }
        let Ok(fields) = spec.get_document("key") else {
            continue;
        };
        let names: Vec<&str> = fields.keys().map(String::as_str).collect();
        let prefix = key.fields.len() <= names.len()
            && key.fields.iter().zip(&names).all(|((f, _), n)| f == n);
        if prefix || names == ["_id"] {
            continue;
        }
        let pattern: Document = key
            .fields
            .iter()
            .map(|(f, k)| {
                let v = match k {
                    super::catalog::KeyKind::Hashed => Bson::String("hashed".into()),
                    super::catalog::KeyKind::Ranged => Bson::Double(1.0),
                };
                (f.clone(), v)
            })
            .collect();
        return Err(CmdError::new(
            67,
            "CannotCreateIndex",
            format!("cannot create unique index over {fields} with shard key pattern {pattern}"),
        ));
    }
    Ok(())
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
