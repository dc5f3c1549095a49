//! A workload's [`PrepareStep::Shard`](crate::workload::PrepareStep::Shard)
//! against the deployment: through a mongos only, `enableSharding`,
//! `shardCollection` of each collection, and a ranged `presplit`'s `split`s
//! and `moveChunk`s round-robin over `listShards`. Idempotent: a collection
//! already sharded on the same key is left as it is.

use mongodb::bson::{doc, Document};

use super::Deployment;
use crate::exit::Exit;
use crate::workload::shard::{same_key, shard_names, split_middle, Presplit, ShardPlan};

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

    /// A ranged `presplit`: splits `ns` at `points` and moves chunk `i` to
    /// the `i`-th shard of `listShards`, round-robin.
    async fn presplit(
        &self,
        workload: &str,
        ns: &str,
        plan: &ShardPlan,
        points: &[i64],
    ) -> Result<(), ShardError> {
        let admin = self.db.client().database("admin");
        for p in points {
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
        if shards.is_empty() {
            return Ok(());
        }
        // A point inside each chunk: the first chunk holds everything below
        // the first split point.
        let starts = std::iter::once(points.first().map_or(0, |p| p.saturating_sub(1)))
            .chain(points.iter().copied());
        for (i, start) in starts.enumerate() {
            let to = &shards[i % shards.len()];
            let find = split_middle(&plan.key, start);
            self.bounded(async {
                admin
                    .run_command(doc! { "moveChunk": ns, "find": find, "to": to.as_str() })
                    .await
            })
            .await
            .map_err(|e| refused(e, workload, "moveChunk", ns))?;
        }
        tracing::info!(
            workload,
            ns,
            chunks = points.len() + 1,
            shards = shards.len(),
            "prepare: presplit and spread over the shards"
        );
        Ok(())
    }
}
