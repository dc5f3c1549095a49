//! A workload's [`PrepareStep::Shard`](crate::workload::PrepareStep::Shard)
//! against the deployment: through a mongos only, `enableSharding`,
//! `shardCollection` of each collection, and a ranged `presplit`'s `split`s
//! and `moveChunk`s round-robin over `listShards`. Idempotent and
//! resumable: a collection already sharded on the same key is not sharded
//! again, and a ranged presplit does what its chunks (`config.chunks`) do
//! not show done yet, so one interrupted by a restart ends the same way.

use mongodb::bson::{doc, Document};

use super::Deployment;
use crate::exit::Exit;
use crate::workload::shard::{
    missing_splits, same_key, shard_names, split_middle, spreading_moves, ChunkAt, Presplit,
    ShardPlan,
};

/// Why sharding did not happen.
#[derive(Debug)]
pub enum ShardError {
    /// A failure that may pass (the deployment is down): retried as any
    /// prepare step.
    Retry(mongodb::error::Error),
    /// It cannot work against this deployment: the run stops with `exit`
    /// (78 config, 77 a missing privilege).
    Fatal { exit: Exit, message: String },
}

/// The server's error code of `e`, if it is a command error.
fn code_of(e: &mongodb::error::Error) -> Option<i32> {
    match &*e.kind {
        mongodb::error::ErrorKind::Command(c) => Some(c.code),
        _ => None,
    }
}

/// Unauthorized (13) becomes a fatal refusal naming the privilege action
/// `action` on `resource`; anything else is retried.
fn refused(e: mongodb::error::Error, workload: &str, action: &str, resource: &str) -> ShardError {
    if code_of(&e) == Some(13) {
        ShardError::Fatal {
            exit: Exit::Refused,
            message: format!(
                "workload {workload:?}: the user lacks the privilege action {action:?} on {resource}, which sharding its collections needs (the built-in role clusterManager has it); {}",
                super::explain(&e)
            ),
        }
    } else {
        ShardError::Retry(e)
    }
}

impl Deployment {
    /// Shards every collection of the workload as `plan` says (see the
    /// module doc). `workload` names it in errors.
    pub async fn shard(&self, workload: &str, plan: &ShardPlan) -> Result<(), ShardError> {
        let client = self.db.client();
        let admin = client.database("admin");
        let db = self.db.name().to_owned();
        let hello = self
            .bounded(async { admin.run_command(doc! { "hello": 1 }).await })
            .await
            .map_err(ShardError::Retry)?;
        if hello.get_str("msg") != Ok("isdbgrid") {
            let what = if hello.get_str("setName").is_ok() {
                "a replica set"
            } else {
                "a standalone server"
            };
            return Err(ShardError::Fatal {
                exit: Exit::Config,
                message: format!(
                    "workload {workload:?}: shard_key {} needs a sharded cluster, but the target is {what}, not a mongos; connect to the routers, or remove shard_key",
                    plan.key
                ),
            });
        }
        // Needed before 6.0, harmless since.
        match self
            .bounded(async { admin.run_command(doc! { "enableSharding": &db }).await })
            .await
        {
            // 23 AlreadyInitialized: enabled before (old servers).
            Err(e) if code_of(&e) != Some(23) => {
                return Err(refused(
                    e,
                    workload,
                    "enableSharding",
                    &format!("database {db:?}"),
                ))
            }
            _ => {}
        }
        for coll in self.collections.iter() {
            let ns = format!("{db}.{}", coll.name());
            if self.sharded_as(workload, &ns, plan).await? {
                tracing::info!(workload, ns, key = %plan.key, "prepare: already sharded on this key");
                if let Presplit::Ranged(points) = &plan.presplit {
                    self.presplit(workload, &ns, plan, points).await?;
                }
                continue;
            }
            let mut cmd = doc! { "shardCollection": &ns, "key": plan.key.to_document() };
            if let Presplit::Hashed(n) = plan.presplit {
                cmd.insert("numInitialChunks", i64::from(n));
            }
            match self
                .bounded(async { admin.run_command(cmd.clone()).await })
                .await
            {
                Ok(_) => {}
                // Another load host sharded it meanwhile: same key or not?
                Err(e) if code_of(&e) == Some(23) => {
                    if self.sharded_as(workload, &ns, plan).await? {
                        continue;
                    }
                    return Err(ShardError::Retry(e));
                }
                Err(e) => return Err(refused(e, workload, "enableSharding", &ns)),
            }
            tracing::info!(workload, ns, key = %plan.key, "prepare: sharded the collection");
            if let Presplit::Ranged(points) = &plan.presplit {
                self.presplit(workload, &ns, plan, points).await?;
            }
        }
        Ok(())
    }

    /// Whether `ns` is sharded already: on the planned key `true`; on
    /// another key a fatal error naming both; unsharded `false`.
    async fn sharded_as(
        &self,
        workload: &str,
        ns: &str,
        plan: &ShardPlan,
    ) -> Result<bool, ShardError> {
        let colls = self
            .db
            .client()
            .database("config")
            .collection::<Document>("collections");
        let found = self
            .bounded(async { colls.find_one(doc! { "_id": ns }).await })
            .await
            .map_err(|e| refused(e, workload, "find", "config.collections"))?;
        let Some(found) = found.filter(|d| d.get_bool("dropped") != Ok(true)) else {
            return Ok(false);
        };
        let key = found.get_document("key").cloned().unwrap_or_default();
        if same_key(&key, &plan.key) {
            return Ok(true);
        }
        Err(ShardError::Fatal {
            exit: Exit::Config,
            message: format!(
                "workload {workload:?}: {ns} is already sharded on {key}, but its shard_key is {}; drop the collection or change shard_key",
                plan.key
            ),
        })
    }

    /// A ranged `presplit`: splits `ns` at those of `points` that are not
    /// chunk boundaries yet, then, unless the chunks are spread already,
    /// moves chunk `i` to the `i`-th shard of `listShards` (round-robin)
    /// where it is elsewhere.
    async fn presplit(
        &self,
        workload: &str,
        ns: &str,
        plan: &ShardPlan,
        points: &[i64],
    ) -> Result<(), ShardError> {
        let admin = self.db.client().database("admin");
        let chunks = self.chunks(workload, ns, plan).await?;
        let splits = missing_splits(points, &chunks);
        for p in &splits {
            let middle = split_middle(&plan.key, *p);
            self.bounded(async {
                admin
                    .run_command(doc! { "split": ns, "middle": middle })
                    .await
            })
            .await
            .map_err(|e| refused(e, workload, "splitChunk", ns))?;
        }
        let reply = self
            .bounded(async { admin.run_command(doc! { "listShards": 1 }).await })
            .await
            .map_err(|e| refused(e, workload, "listShards", "the cluster"))?;
        let shards = shard_names(&reply);
        let chunks = self.chunks(workload, ns, plan).await?;
        let moves = spreading_moves(points, &chunks, &shards);
        for (point, to) in &moves {
            let find = split_middle(&plan.key, *point);
            self.bounded(async {
                admin
                    .run_command(doc! { "moveChunk": ns, "find": find, "to": to.as_str() })
                    .await
            })
            .await
            .map_err(|e| refused(e, workload, "moveChunk", ns))?;
        }
        if splits.is_empty() && moves.is_empty() {
            tracing::info!(workload, ns, "prepare: presplit done before");
        } else {
            tracing::info!(
                workload,
                ns,
                chunks = points.len() + 1,
                shards = shards.len(),
                splits = splits.len(),
                moves = moves.len(),
                "prepare: presplit and spread over the shards"
            );
        }
        Ok(())
    }

    /// The chunks of `ns` from `config.chunks` (by the collection's `uuid`
    /// since MongoDB 5.0, by `ns` before).
    async fn chunks(
        &self,
        workload: &str,
        ns: &str,
        plan: &ShardPlan,
    ) -> Result<Vec<ChunkAt>, ShardError> {
        let config = self.db.client().database("config");
        let coll = self
            .bounded(async {
                config
                    .collection::<Document>("collections")
                    .find_one(doc! { "_id": ns })
                    .await
            })
            .await
            .map_err(|e| refused(e, workload, "find", "config.collections"))?;
        let filter = match coll.as_ref().and_then(|c| c.get("uuid")) {
            Some(uuid) => doc! { "$or": [{ "uuid": uuid.clone() }, { "ns": ns }] },
            None => doc! { "ns": ns },
        };
        let docs: Vec<Document> = self
            .bounded(async {
                use futures::TryStreamExt;
                config
                    .collection::<Document>("chunks")
                    .find(filter)
                    .await?
                    .try_collect()
                    .await
            })
            .await
            .map_err(|e| refused(e, workload, "find", "config.chunks"))?;
        Ok(docs
            .iter()
            .filter_map(|d| ChunkAt::from_chunk(d, &plan.key))
            .collect())
    }
}
