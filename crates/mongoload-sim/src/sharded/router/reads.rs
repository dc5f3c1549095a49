//! The router's reads: `find`, `explain`, `aggregate`, `count` and `distinct`,
//! targeted by shard key or scatter-gather, merged here, and the `config`
//! database's collections served from the catalog.

use super::*;

impl Cluster {
    /// The metadata collection `config.<coll>` as documents.
    pub(super) fn config_docs(&self, coll: &str) -> Vec<Document> {
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
    pub(super) fn cursor_reply(
        shared: &Shared,
        ns: &str,
        docs: Vec<Document>,
        batch: Option<usize>,
        single: bool,
    ) -> Document {
        let (first, id) = shared.cursors.open(ns, docs, batch, single);
        doc! { "cursor": { "firstBatch": first, "id": id, "ns": ns }, "ok": 1.0 }
    }

    pub(super) async fn find(&self, shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
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
    pub(super) async fn explain(&self, db: &str, cmd: &Document) -> CmdResult {
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

    pub(super) async fn aggregate(&self, shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
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

    pub(super) async fn count(&self, db: &str, cmd: &Document) -> CmdResult {
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

    pub(super) async fn distinct(&self, db: &str, cmd: &Document) -> CmdResult {
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
}
