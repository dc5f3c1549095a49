//! The router's writes: `insert`, `update`, `delete` and `findAndModify`
//! routed statement by statement, and `drop`, `dropDatabase` and the index
//! commands sent to every shard.

use super::*;

impl Cluster {
    pub(super) async fn insert(&self, db: &str, cmd: &Document) -> CmdResult {
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
    pub(super) async fn update_or_delete(
        &self,
        db: &str,
        cmd: &Document,
        update: bool,
    ) -> CmdResult {
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

    pub(super) async fn find_and_modify(&self, db: &str, cmd: &Document) -> CmdResult {
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

    pub(super) async fn drop(&self, db: &str, cmd: &Document) -> CmdResult {
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

    pub(super) async fn drop_database(&self, db: &str, cmd: &Document) -> CmdResult {
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

    pub(super) async fn indexes(&self, db: &str, name: &str, cmd: &Document) -> CmdResult {
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
pub(super) fn unique_compatible(key: &ShardKey, cmd: &Document) -> Result<(), CmdError> {
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
                    super::super::catalog::KeyKind::Hashed => Bson::String("hashed".into()),
                    super::super::catalog::KeyKind::Ranged => Bson::Double(1.0),
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
