//! `mongoload capture --profile`: the profiler's `system.profile` as a
//! source. Each entry becomes the same [`SlowQuery`] a log line gives, so
//! both sources share one normalizer ([`super::shape`]). Reading needs
//! only `read` on the database; `--profile-for` sets level 2 for a window
//! (which needs `dbAdmin`) and puts the old level back.

use std::time::Duration;

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::Client;
use serde_json::Value;

use super::log::SlowQuery;

/// The window of entries to read.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Window {
    /// Entries with `ts` at or after this (ms since the epoch).
    pub since_ms: Option<i64>,
    /// Entries with `ts` before this.
    pub until_ms: Option<i64>,
    /// Only the newest N entries (of the window) per database.
    pub last: Option<u64>,
}

impl Window {
    /// The `system.profile` filter of the window.
    pub fn filter(&self) -> Document {
        let mut ts = Document::new();
        if let Some(s) = self.since_ms {
            ts.insert("$gte", mongodb::bson::DateTime::from_millis(s));
        }
        if let Some(u) = self.until_ms {
            ts.insert("$lt", mongodb::bson::DateTime::from_millis(u));
        }
        if ts.is_empty() {
            Document::new()
        } else {
            doc! { "ts": ts }
        }
    }
}

/// A `--since`/`--until` value: an RFC 3339 time, or a duration meaning
/// that long before `now_ms` (`15m`).
pub fn parse_time(s: &str, now_ms: i64) -> Result<i64, String> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.timestamp_millis());
    }
    match humantime::parse_duration(s) {
        Ok(d) => Ok(now_ms - d.as_millis() as i64),
        Err(_) => Err(format!(
            "{s:?} is neither an RFC 3339 time (2024-05-01T12:00:00Z) nor a duration ago (15m)"
        )),
    }
}

/// One `system.profile` entry as the log reader would have read its
/// "Slow query" line; `None` for an entry without `ns` or `command`.
pub fn to_slow_query(d: &Document) -> Option<SlowQuery> {
    let ns = d.get_str("ns").ok()?.to_owned();
    let command = d.get_document("command").ok()?;
    // The profiler's `op` of one write statement is the log's `type`.
    let kind = match d.get_str("op").unwrap_or("command") {
        "update" => "update",
        "remove" => "remove",
        _ => "command",
    };
    let num = |k: &str| -> Option<f64> {
        match d.get(k)? {
            Bson::Int32(n) => Some(f64::from(*n)),
            Bson::Int64(n) => Some(*n as f64),
            Bson::Double(x) => Some(*x),
            _ => None,
        }
    };
    Some(SlowQuery {
        t_ms: d.get_datetime("ts").ok().map(|t| t.timestamp_millis()),
        ns,
        app_name: d.get_str("appName").ok().map(str::to_owned),
        kind: kind.to_owned(),
        command: Bson::Document(command.clone()).into_relaxed_extjson(),
        duration_ms: num("millis").unwrap_or(0.0),
        nreturned: num("nreturned").map(|n| n as u64),
        plan_summary: d.get_str("planSummary").ok().map(str::to_owned),
    })
}

/// The entries of `db`'s `system.profile` in the window, oldest first.
pub async fn read(client: &Client, db: &str, w: &Window) -> Result<Vec<Document>, String> {
    let coll = client.database(db).collection::<Document>("system.profile");
    let mut find = coll.find(w.filter());
    if let Some(n) = w.last {
        find = find.sort(doc! { "ts": -1 }).limit(n as i64);
    } else {
        find = find.sort(doc! { "ts": 1 });
    }
    let mut out: Vec<Document> = find
        .await
        .map_err(|e| format!("reading {db}.system.profile: {e}"))?
        .try_collect()
        .await
        .map_err(|e| format!("reading {db}.system.profile: {e}"))?;
    if w.last.is_some() {
        out.reverse();
    }
    Ok(out)
}

/// Up to `n` documents of `db.coll` drawn at random (`$sample`; where the
/// server has no `$sample`, the newest `n` by `_id`): the shapes and sizes
/// of what inserts write, as the profiler records inserts without their
/// documents. Err: neither could be read (the error of the second).
pub async fn sample(client: &Client, db: &str, coll: &str, n: i64) -> Result<Vec<Value>, String> {
    let c = client.database(db).collection::<Document>(coll);
    let docs: Vec<Document> = match c.aggregate([doc! { "$sample": { "size": n } }]).await {
        Ok(cursor) => cursor.try_collect().await.unwrap_or_default(),
        Err(_) => c
            .find(doc! {})
            .sort(doc! { "_id": -1 })
            .limit(n)
            .await
            .map_err(|e| format!("sampling {db}.{coll}: {e}"))?
            .try_collect()
            .await
            .unwrap_or_default(),
    };
    Ok(docs
        .into_iter()
        .map(|d| Bson::Document(d).into_canonical_extjson())
        .collect())
}

/// The key patterns of `db.coll`'s indexes but `_id`'s (`listIndexes`).
pub async fn list_indexes(client: &Client, db: &str, coll: &str) -> Vec<Value> {
    let c = client.database(db).collection::<Document>(coll);
    let Ok(cursor) = c.list_indexes().await else {
        return Vec::new();
    };
    let models: Vec<mongodb::IndexModel> = cursor.try_collect().await.unwrap_or_default();
    models
        .into_iter()
        .map(|m| m.keys)
        .filter(|k| !(k.len() == 1 && k.contains_key("_id")))
        .map(|k| Bson::Document(k).into_relaxed_extjson())
        .collect()
}

/// Sets `db`'s profiling level; returns the level before.
pub async fn set_level(client: &Client, db: &str, level: i32) -> Result<i32, String> {
    let reply = client
        .database(db)
        .run_command(doc! { "profile": level })
        .await
        .map_err(|e| format!("profile {level} on {db}: {e}"))?;
    match reply.get("was") {
        Some(Bson::Int32(n)) => Ok(*n),
        Some(Bson::Int64(n)) => Ok(*n as i32),
        Some(Bson::Double(x)) => Ok(*x as i32),
        _ => Err(format!("profile {level} on {db}: the reply has no \"was\"")),
    }
}

/// Profiles every operation on `dbs` for `d` (level 2), then puts each
/// database's level back, also when the wait was cut short.
pub async fn profile_for(client: &Client, dbs: &[String], d: Duration) -> Result<(), String> {
    let mut was = Vec::new();
    for db in dbs {
        match set_level(client, db, 2).await {
            Ok(l) => was.push((db.clone(), l)),
            Err(e) => {
                restore(client, &was).await;
                return Err(e);
            }
        }
    }
    eprintln!(
        "mongoload capture: profiling {} at level 2 for {}",
        dbs.join(", "),
        humantime::format_duration(d)
    );
    tokio::select! {
        _ = tokio::time::sleep(d) => {}
        _ = tokio::signal::ctrl_c() => eprintln!("mongoload capture: interrupted; restoring the profiling level"),
    }
    restore(client, &was).await;
    Ok(())
}

async fn restore(client: &Client, was: &[(String, i32)]) {
    for (db, l) in was {
        if let Err(e) = set_level(client, db, *l).await {
            eprintln!("mongoload capture: cannot put the profiling level back to {l}: {e}");
        }
    }
}
