//! The router's sharding commands (`enableSharding`, `shardCollection`,
//! `split`, `moveChunk`, `balancerStatus`) and the balancer's migrations.

use super::*;

impl Cluster {
    pub(super) fn enable_sharding(&self, db: &str, cmd: &Document) -> CmdResult {
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

    pub(super) async fn shard_collection(&self, db: &str, cmd: &Document) -> CmdResult {
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

    pub(super) fn split(&self, db: &str, cmd: &Document) -> CmdResult {
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

    pub(super) async fn move_chunk_cmd(&self, db: &str, cmd: &Document) -> CmdResult {
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

    pub(super) async fn delete_ids(
        &self,
        shard: usize,
        db: &str,
        coll: &str,
        ids: &[Bson],
    ) -> Document {
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

    pub(super) fn balancer_status(&self) -> Document {
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
}
