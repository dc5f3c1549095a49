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
    /// (78 config, 77 a missing privilege, 76 a command the server does
    /// not have).
    Fatal { exit: Exit, message: String },
}

/// The server's error code of `e`, if it is a command error.
fn code_of(e: &mongodb::error::Error) -> Option<i32> {
    match &*e.kind {
        mongodb::error::ErrorKind::Command(c) => Some(c.code),
        _ => None,
    }
}

/// The wire version of MongoDB 6.0, the first that shards a collection
/// without `enableSharding` on its database first.
const WIRE_6_0: i32 = 17;

/// Whether a router whose `hello` says `max_wire` needs `enableSharding`
/// before `shardCollection` (before 6.0; unknown: asked, to be safe).
pub(crate) fn needs_enable_sharding(max_wire: Option<i32>) -> bool {
    max_wire.is_none_or(|w| w < WIRE_6_0)
}

/// One command of the sharding step, for its errors: the command, the
/// privilege action it needs, what it acts on, and what to do when the
/// server does not have it.
struct Asked<'a> {
    command: &'a str,
    action: &'a str,
    resource: &'a str,
    way_out: &'a str,
}

/// What a ranged presplit's commands suggest when the server lacks one.
const PRESPLIT_WAY_OUT: &str =
    "remove the ranged presplit (a hashed shard_key spreads its chunks itself)";
/// What the other commands suggest.
const SHARD_WAY_OUT: &str =
    "remove shard_key, and shard the collection by other means if the server can";

/// A permanent answer becomes a fatal error: Unauthorized (13) names the
/// privilege action, a command or option the server does not have
/// (exit 76) names the command and the way out; anything else is retried.
fn refused(e: mongodb::error::Error, workload: &str, asked: &Asked) -> ShardError {
    use crate::error_kind::{permanent, Permanent};
    let Asked {
        command,
        action,
        resource,
        way_out,
    } = asked;
    match permanent(&e) {
        Some(Permanent::Refused) => ShardError::Fatal {
            exit: Exit::Refused,
            message: format!(
                "workload {workload:?}: the user lacks the privilege action {action:?} on {resource}, which sharding its collections needs (the built-in role clusterManager has it); {}",
                crate::error_kind::explain(&e)
            ),
        },
        Some(Permanent::Unsupported) => ShardError::Fatal {
            exit: Exit::Unsupported,
            message: format!(
                "workload {workload:?}: the server does not support {command} on {resource} ({}), which sharding its collections needs; {way_out}",
                crate::error_kind::explain(&e)
            ),
        },
        None => ShardError::Retry(e),
    }
}

/// A `find` on a `config` collection.
fn read(collection: &str) -> Asked<'_> {
    Asked {
        command: "find",
        action: "find",
        resource: collection,
        way_out: SHARD_WAY_OUT,
    }
}

/// A command of a ranged presplit.
fn presplit<'a>(command: &'a str, action: &'a str, resource: &'a str) -> Asked<'a> {
    Asked {
        command,
        action,
        resource,
        way_out: PRESPLIT_WAY_OUT,
    }
}

impl Deployment {
    /// Shards every collection of the workload as `plan` says (see the
    /// module doc). `workload` names it in errors.
    pub async fn shard(&self, workload: &str, plan: &ShardPlan) -> Result<(), ShardError> {
        let db = self.db.name().to_owned();
        let hello = self.router_hello(workload, plan).await?;
        let max_wire = hello.get_i32("maxWireVersion").ok();
        // Needed before 6.0 only: not asked of a server that does not need
        // it, nor held against one that answers it does not have it (the
        // shardCollection after it decides).
        if needs_enable_sharding(max_wire) {
            self.enable_sharding(workload, &db).await?;
        }
        for coll in self.collections.iter() {
            let ns = format!("{db}.{}", coll.name());
            self.shard_collection(workload, &ns, plan).await?;
        }
        Ok(())
    }

    /// The `hello` of the target, which must be a mongos: anything else
    /// is a config error naming what it is.
    async fn router_hello(&self, workload: &str, plan: &ShardPlan) -> Result<Document, ShardError> {
        let admin = self.db.client().database("admin");
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
        Ok(hello)
    }

    /// `enableSharding` on database `db`: done before, or not supported
    /// (the shardCollection after it decides), is fine.
    async fn enable_sharding(&self, workload: &str, db: &str) -> Result<(), ShardError> {
        let admin = self.db.client().database("admin");
        let database = format!("database {db:?}");
        match self
            .bounded(async { admin.run_command(doc! { "enableSharding": db }).await })
            .await
        {
            Ok(_) => Ok(()),
            // 23 AlreadyInitialized: enabled before (old servers).
            Err(e) if code_of(&e) == Some(23) => Ok(()),
            Err(e)
                if crate::error_kind::permanent(&e)
                    == Some(crate::error_kind::Permanent::Unsupported) =>
            {
                tracing::info!(workload, error = %crate::error_kind::explain(&e),
                    "prepare: enableSharding is not supported by this server; sharding the collections without it");
                Ok(())
            }
            Err(e) => Err(refused(
                e,
                workload,
                &Asked {
                    command: "enableSharding",
                    action: "enableSharding",
                    resource: &database,
                    way_out: SHARD_WAY_OUT,
                },
            )),
        }
    }

    /// Shards the collection `ns` on the planned key, unless it is already
    /// (then only its ranged presplit is made sure of), and presplits it.
    async fn shard_collection(
        &self,
        workload: &str,
        ns: &str,
        plan: &ShardPlan,
    ) -> Result<(), ShardError> {
        if self.sharded_as(workload, ns, plan).await? {
            tracing::info!(workload, ns, key = %plan.key, "prepare: already sharded on this key");
            if let Presplit::Ranged(points) = &plan.presplit {
                self.presplit(workload, ns, plan, points).await?;
            }
            return Ok(());
        }
        let admin = self.db.client().database("admin");
        let mut cmd = doc! { "shardCollection": ns, "key": plan.key.to_document() };
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
                if self.sharded_as(workload, ns, plan).await? {
                    return Ok(());
                }
                return Err(ShardError::Retry(e));
            }
            Err(e) => {
                return Err(refused(
                    e,
                    workload,
                    &Asked {
                        command: "shardCollection",
                        action: "enableSharding",
                        resource: ns,
                        way_out: SHARD_WAY_OUT,
                    },
                ))
            }
        }
        tracing::info!(workload, ns, key = %plan.key, "prepare: sharded the collection");
        if let Presplit::Ranged(points) = &plan.presplit {
            self.presplit(workload, ns, plan, points).await?;
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
            .map_err(|e| refused(e, workload, &read("config.collections")))?;
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
            .map_err(|e| refused(e, workload, &presplit("split", "splitChunk", ns)))?;
        }
        let reply = self
            .bounded(async { admin.run_command(doc! { "listShards": 1 }).await })
            .await
            .map_err(|e| {
                refused(
                    e,
                    workload,
                    &presplit("listShards", "listShards", "the cluster"),
                )
            })?;
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
            .map_err(|e| refused(e, workload, &presplit("moveChunk", "moveChunk", ns)))?;
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
            .map_err(|e| refused(e, workload, &read("config.collections")))?;
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
            .map_err(|e| refused(e, workload, &read("config.chunks")))?;
        Ok(docs
            .iter()
            .filter_map(|d| ChunkAt::from_chunk(d, &plan.key))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enable_sharding_is_asked_before_6_0_only() {
        assert!(needs_enable_sharding(Some(13)), "5.0");
        assert!(needs_enable_sharding(Some(WIRE_6_0 - 1)));
        assert!(!needs_enable_sharding(Some(WIRE_6_0)), "6.0");
        assert!(!needs_enable_sharding(Some(21)), "7.0");
        assert!(needs_enable_sharding(None), "unknown: asked");
    }
}
