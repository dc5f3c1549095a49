//! Documents per shard (`target.shard_stats_interval`): through a mongos,
//! each workload's collections read with `$collStats: { count: {} }` (which
//! the `read` role allows; a mongos answers one document per shard, each
//! with its `shard`), summed per shard into
//! `mongoload_shard_documents{workload,shard}`. Read every interval, when a
//! workload's stage changes (a stage ended) and once more at the end of
//! the run.
//!
//! Not a mongos (`hello` has no `msg: "isdbgrid"`): one log line and the
//! task ends, the metric absent. A refused or failed read: the workload's
//! series are removed (unknown, never a stale figure) and one line is
//! logged when the reading starts failing (and one when it recovers), never
//! a line per attempt. The task is off the load path: its own requests on
//! the daemon's client, one at a time.
//!
//! Chunk migrations: at each interval (and at the end) the task also reads
//! `config.changelog` for the `moveChunk.commit` documents of the
//! workloads' namespaces newer than the last one seen (at first: since the
//! task started) and counts them into
//! `mongoload_shard_chunk_migrations_total{workload,from,to}`. Once a
//! reading succeeded, every ordered pair of the shards a workload's
//! documents are on has a series (at 0 until a migration), so a first
//! migration shows in `increase()`. A refused read (13 Unauthorized: a
//! user with only `readWrite`): the family is removed (unknown), one line
//! is logged, and the changelog is not read again for the run. A failed
//! one (a timeout, a failover): one line when reading starts failing and
//! one when it recovers; the series keep their counts, and the next
//! reading counts what was missed. The documents per shard go on either
//! way.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// How often the workloads' stages are looked at for a change.
const STAGE_POLL: Duration = Duration::from_secs(1);
/// The longest one workload's reading may take.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest the last reading at the run's end may take (a task gets 5 s
/// to stop).
const FINAL_READ_TIMEOUT: Duration = Duration::from_secs(4);
/// The longest a stage report waits for its reading.
const REPORT_READ_TIMEOUT: Duration = Duration::from_secs(5);

/// Documents per shard name.
pub(crate) type PerShard = BTreeMap<String, i64>;

/// One workload's documents per shard as `/status` shows them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct ShardDocuments {
    pub workload: String,
    /// When the last successful reading was taken (RFC 3339, UTC); `null`:
    /// unknown (not read yet, or the last reading failed).
    pub read_at: Option<String>,
    /// Documents of the workload's collections per shard (empty while
    /// unknown); their sum is the collections' documents.
    pub shards: PerShard,
}

/// The last readings, shared by the task (writer) and `/status` (reader):
/// empty unless the target is a mongos and the task is on.
#[derive(Debug, Default)]
pub(crate) struct ShardBook(std::sync::Mutex<Vec<ShardDocuments>>);

impl ShardBook {
    /// The readings now, in the workloads' order.
    pub(crate) fn snapshot(&self) -> Vec<ShardDocuments> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Keeps the readings of `workloads` only, in their order (a reload
    /// stopped the others).
    fn keep(&self, workloads: &[String]) {
        let mut all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        all.retain(|d| workloads.contains(&d.workload));
        all.sort_by_key(|d| workloads.iter().position(|w| *w == d.workload));
    }

    fn set(&self, workload: &str, read_at: Option<String>, shards: PerShard) {
        let mut all = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let entry = ShardDocuments {
            workload: workload.to_owned(),
            read_at,
            shards,
        };
        match all.iter_mut().find(|d| d.workload == workload) {
            Some(d) => *d = entry,
            None => all.push(entry),
        }
    }
}

/// Adds the `$collStats` documents of one collection (each `{shard,
/// count}`) to `into`. A document without `shard` (a mongod answered) or
/// without a numeric `count` is an error: the figure would be wrong.
pub(crate) fn add_counts(into: &mut PerShard, docs: &[Document]) -> Result<(), String> {
    for d in docs {
        let shard = d
            .get_str("shard")
            .map_err(|_| "a $collStats result without 'shard' (not a mongos?)".to_owned())?;
        let count = match d.get("count") {
            Some(Bson::Int32(n)) => i64::from(*n),
            Some(Bson::Int64(n)) => *n,
            Some(Bson::Double(n)) if n.fract() == 0.0 => *n as i64,
            _ => return Err(format!("shard {shard}: $collStats gave no count")),
        };
        *into.entry(shard.to_owned()).or_default() += count;
    }
    Ok(())
}

/// Whether a `hello` reply is a mongos's.
pub(crate) fn is_mongos(hello: &Document) -> bool {
    hello.get_str("msg") == Ok("isdbgrid")
}

/// Whether a failed `$collStats` means the collection does not exist yet
/// (26 NamespaceNotFound): zero documents, not an unknown figure.
fn not_created_yet(e: &mongodb::error::Error) -> bool {
    matches!(e.kind.as_ref(), mongodb::error::ErrorKind::Command(c) if c.code == 26)
}

/// One workload's documents per shard, over its collections.
async fn read(db: &mongodb::Database, collections: &[String]) -> Result<PerShard, String> {
    let mut out = PerShard::new();
    for coll in collections {
        let c = db.collection::<Document>(coll);
        let docs: Vec<Document> = match c.aggregate(vec![doc! {"$collStats": {"count": {}}}]).await
        {
            Ok(cursor) => cursor
                .try_collect()
                .await
                .map_err(|e| format!("{coll}: {}", crate::error_kind::explain(&e)))?,
            Err(e) if not_created_yet(&e) => continue,
            Err(e) => return Err(format!("{coll}: {}", crate::error_kind::explain(&e))),
        };
        add_counts(&mut out, &docs).map_err(|e| format!("{coll}: {e}"))?;
    }
    Ok(out)
}

/// One workload: its collections, the shards it last exported and whether
/// its last reading failed (so a failure is logged once).
struct Watched {
    name: String,
    collections: Vec<String>,
    shown: Vec<String>,
    failing: bool,
    stage: Option<String>,
}

impl Watched {
    fn forget(&mut self, metrics: &Metrics) {
        for shard in self.shown.drain(..) {
            let _ = metrics
                .shard_documents()
                .remove_label_values(&[&self.name, &shard]);
        }
    }

    async fn update(&mut self, db: &mongodb::Database, metrics: &Metrics, book: &ShardBook) {
        let result = tokio::time::timeout(READ_TIMEOUT, read(db, &self.collections))
            .await
            .unwrap_or_else(|_| Err(format!("no answer within {READ_TIMEOUT:?}")));
        match result {
            Ok(per_shard) => {
                if self.failing {
                    tracing::info!(workload = %self.name, "documents per shard: read again");
                    self.failing = false;
                }
                // A shard no longer holding any of them leaves the series.
                let gone: Vec<String> = self
                    .shown
                    .iter()
                    .filter(|s| !per_shard.contains_key(*s))
                    .cloned()
                    .collect();
                for shard in gone {
                    let _ = metrics
                        .shard_documents()
                        .remove_label_values(&[&self.name, &shard]);
                }
                for (shard, n) in &per_shard {
                    metrics
                        .shard_documents()
                        .with_label_values(&[&self.name, shard])
                        .set(*n);
                }
                self.shown = per_shard.keys().cloned().collect();
                let now = crate::report::rfc3339(chrono::Utc::now());
                book.set(&self.name, Some(now), per_shard);
            }
            Err(reason) => {
                if !self.failing {
                    tracing::warn!(
                        workload = %self.name,
                        "documents per shard unknown (mongoload_shard_documents removed until a read succeeds; logged once): {reason}"
                    );
                    self.failing = true;
                }
                self.forget(metrics);
                book.set(&self.name, None, PerShard::new());
            }
        }
    }
}

/// One chunk migration as `config.changelog` records its commit.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChunkMove {
    /// The changelog document's `_id` (MongoDB's `<host>-<time>-<n>`).
    pub id: String,
    pub ns: String,
    pub from: String,
    pub to: String,
    /// When it committed (the document's `time`).
    pub time: mongodb::bson::DateTime,
}

/// Reads a `config.changelog` document of a committed migration
/// (`what: "moveChunk.commit"`, `ns`, `time`, `details: {from, to, ..}`).
/// Any other document, or one without those fields, is an error: counting
/// it would make a wrong figure.
pub(crate) fn parse_migration(d: &Document) -> Result<ChunkMove, String> {
    let id = match d.get("_id") {
        Some(Bson::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => return Err("a changelog document without _id".to_owned()),
    };
    let what = d
        .get_str("what")
        .map_err(|_| format!("changelog {id}: no 'what'"))?;
    if what != "moveChunk.commit" {
        return Err(format!("changelog {id}: '{what}', not moveChunk.commit"));
    }
    let field = |doc: &Document, k: &str| {
        doc.get_str(k)
            .map(str::to_owned)
            .map_err(|_| format!("changelog {id}: no '{k}'"))
    };
    let details = d
        .get_document("details")
        .map_err(|_| format!("changelog {id}: no 'details'"))?;
    Ok(ChunkMove {
        ns: field(d, "ns")?,
        from: field(details, "from")?,
        to: field(details, "to")?,
        time: *d
            .get_datetime("time")
            .map_err(|_| format!("changelog {id}: no 'time' date"))?,
        id,
    })
}

/// The migrations of `docs` (read with `time >= since`, any order) not
/// seen yet: later than `since`, or at `since` and not among `at_since`
/// (the ids already counted at that instant). Advances `since` and
/// `at_since` past them. In commit order.
pub(crate) fn newer_migrations(
    docs: &[Document],
    since: &mut mongodb::bson::DateTime,
    at_since: &mut HashSet<String>,
) -> Result<Vec<ChunkMove>, String> {
    let mut moves: Vec<ChunkMove> = docs
        .iter()
        .map(parse_migration)
        .filter(|m| match m {
            Ok(m) => m.time > *since || (m.time == *since && !at_since.contains(&m.id)),
            Err(_) => true,
        })
        .collect::<Result<_, _>>()?;
    moves.sort_by_key(|m| m.time);
    if let Some(last) = moves.last().map(|m| m.time) {
        if last > *since {
            at_since.clear();
            *since = last;
        }
        at_since.extend(
            moves
                .iter()
                .filter(|m| m.time == last)
                .map(|m| m.id.clone()),
        );
    }
    Ok(moves)
}

/// The changelog's reader: which workload each namespace is, the last
/// migration seen, the series exported, and whether it gave up.
struct Changelog {
    /// Namespace (`db.coll`) → the workloads loading it.
    workloads_of: BTreeMap<String, Vec<String>>,
    since: mongodb::bson::DateTime,
    at_since: HashSet<String>,
    /// `(workload, from, to)` of every series exported.
    shown: BTreeSet<(String, String, String)>,
    /// Refused: not read again this run.
    off: bool,
    /// The last reading failed (logged once, until one succeeds).
    failing: bool,
}

impl Changelog {
    fn new(db: &str, workloads: &[(String, Vec<String>)]) -> Changelog {
        let mut changelog = Changelog {
            workloads_of: BTreeMap::new(),
            since: mongodb::bson::DateTime::now(),
            at_since: HashSet::new(),
            shown: BTreeSet::new(),
            off: false,
            failing: false,
        };
        changelog.set_workloads(db, workloads);
        changelog
    }

    /// The workloads whose namespaces are read from now on (a reload's);
    /// the series counted so far stay.
    fn set_workloads(&mut self, db: &str, workloads: &[(String, Vec<String>)]) {
        self.workloads_of.clear();
        for (name, collections) in workloads {
            for c in collections {
                self.workloads_of
                    .entry(format!("{db}.{c}"))
                    .or_default()
                    .push(name.clone());
            }
        }
    }

    /// The commits since the last one seen; `Err((refused, reason))`.
    async fn read(&self, db: &mongodb::Database) -> Result<Vec<Document>, (bool, String)> {
        let namespaces: Vec<&String> = self.workloads_of.keys().collect();
        let filter = doc! {
            "what": "moveChunk.commit",
            "ns": {"$in": namespaces},
            "time": {"$gte": self.since},
        };
        let changelog = db
            .client()
            .database("config")
            .collection::<Document>("changelog");
        let read = async {
            changelog
                .find(filter)
                .sort(doc! {"time": 1})
                .await?
                .try_collect::<Vec<Document>>()
                .await
        };
        match tokio::time::timeout(READ_TIMEOUT, read).await {
            Ok(Ok(docs)) => Ok(docs),
            Ok(Err(e)) => Err((
                crate::error_kind::is_unauthorized(&e),
                crate::error_kind::explain(&e),
            )),
            Err(_) => Err((false, format!("no answer within {READ_TIMEOUT:?}"))),
        }
    }

    /// Reads the migrations since the last reading and counts them;
    /// `watched`: the workloads with the shards their documents are on.
    async fn update(&mut self, db: &mongodb::Database, metrics: &Metrics, watched: &[Watched]) {
        if self.off || self.workloads_of.is_empty() {
            return;
        }
        // A document that is not a commit would make a wrong figure: as
        // a refusal, the family is unknown from then on.
        let counted = match self.read(db).await {
            Ok(docs) => newer_migrations(&docs, &mut self.since, &mut self.at_since)
                .map_err(|reason| (true, reason)),
            Err(e) => Err(e),
        };
        let moves = match counted {
            Ok(moves) => moves,
            Err((true, reason)) => {
                tracing::warn!(
                    "chunk migrations unknown (mongoload_shard_chunk_migrations_total absent; config.changelog not read again this run): {reason}"
                );
                self.off = true;
                for (w, from, to) in std::mem::take(&mut self.shown) {
                    let _ = metrics
                        .shard_chunk_migrations()
                        .remove_label_values(&[&w, &from, &to]);
                }
                return;
            }
            Err((false, reason)) => {
                if !self.failing {
                    tracing::warn!(
                        "chunk migrations not read (counted when config.changelog answers again; logged once): {reason}"
                    );
                    self.failing = true;
                }
                return;
            }
        };
        if self.failing {
            tracing::info!("chunk migrations: config.changelog read again");
            self.failing = false;
        }
        let family = metrics.shard_chunk_migrations();
        // Every pair of the shards a workload is on at 0, so a first
        // migration between them is an increase, not a new series.
        for w in watched {
            for from in &w.shown {
                for to in w.shown.iter().filter(|t| *t != from) {
                    if self
                        .shown
                        .insert((w.name.clone(), from.clone(), to.clone()))
                    {
                        family.with_label_values(&[&w.name, from, to]);
                    }
                }
            }
        }
        for m in &moves {
            for w in self.workloads_of.get(&m.ns).into_iter().flatten() {
                family.with_label_values(&[w, &m.from, &m.to]).inc();
                self.shown.insert((w.clone(), m.from.clone(), m.to.clone()));
            }
        }
    }
}

/// The stage reports' reader (the report task asks it for each report):
/// the same reading as the task's, which also updates the gauge and
/// `/status`, so a report and the metric agree at that moment.
struct Counter {
    db: mongodb::Database,
    workloads: watch::Receiver<WorkloadCollections>,
    metrics: Arc<Metrics>,
    book: Arc<ShardBook>,
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counter")
            .field("workloads", &*self.workloads.borrow())
            .finish_non_exhaustive()
    }
}

/// Where the report task finds its [`ShardCounter`].
pub(crate) type ReportCounter = Arc<std::sync::OnceLock<Arc<dyn crate::report::ShardCounter>>>;

impl crate::report::ShardCounter for Counter {
    fn documents<'a>(&'a self, workload: &'a str) -> crate::report::ShardReading<'a> {
        Box::pin(async move {
            let collections = self
                .workloads
                .borrow()
                .iter()
                .find(|(n, _)| n == workload)
                .map(|(_, c)| c.clone())?;
            let per_shard = tokio::time::timeout(REPORT_READ_TIMEOUT, read(&self.db, &collections))
                .await
                .ok()?
                .ok()?;
            // A reload may have stopped the workload while it was read (its
            // last stage's report is this reading): its series are gone
            // then, and must not come back.
            let listed = self.workloads.borrow().iter().any(|(n, _)| n == workload);
            if !listed {
                return Some(per_shard);
            }
            for (shard, n) in &per_shard {
                self.metrics
                    .shard_documents()
                    .with_label_values(&[workload, shard])
                    .set(*n);
            }
            let now = crate::report::rfc3339(chrono::Utc::now());
            self.book.set(workload, Some(now), per_shard.clone());
            Some(per_shard)
        })
    }
}

/// Each workload's name and collections, in the config's order (kept
/// current by the supervisor at each reload).
pub(crate) type WorkloadCollections = Vec<(String, Vec<String>)>;

/// Runs until `stop`: spawn it as a task. `workloads`: each workload's
/// name and collections, as the config has them after each reload;
/// `reports`: given the stage reports' reader once the target is known to
/// be a mongos.
pub(crate) async fn run(
    interval: Duration,
    db: mongodb::Database,
    mut workloads: watch::Receiver<WorkloadCollections>,
    metrics: Arc<Metrics>,
    book: Arc<ShardBook>,
    reports: ReportCounter,
    stop: CancellationToken,
) {
    if interval.is_zero() {
        return;
    }
    // Migrations are counted from the task's start.
    let mut changelog = Changelog::new(db.name(), &workloads.borrow_and_update());
    // Whether the target is a mongos, asked until it answers.
    loop {
        let hello = tokio::select! {
            () = stop.cancelled() => return,
            r = db.run_command(doc! {"hello": 1}) => r,
        };
        match hello {
            Ok(h) if is_mongos(&h) => break,
            Ok(_) => {
                tracing::info!("the target is not a mongos: no documents per shard");
                return;
            }
            Err(_) => {
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(STAGE_POLL * 2) => {}
                }
            }
        }
    }
    let counter = Counter {
        db: db.clone(),
        workloads: workloads.clone(),
        metrics: metrics.clone(),
        book: book.clone(),
    };
    let _ = reports.set(Arc::new(counter));
    let mut watched: Vec<Watched> = Vec::new();
    let mut reloads = true;
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    ticker.tick().await;
    let mut poll = tokio::time::interval(STAGE_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    poll.tick().await;
    // The first round reads every workload, as a reload's does.
    let mut all = true;
    loop {
        let list = workloads.borrow_and_update().clone();
        if watched.len() != list.len()
            || watched
                .iter()
                .zip(&list)
                .any(|(w, (name, c))| w.name != *name || w.collections != *c)
        {
            watched = rewatch(std::mem::take(&mut watched), &list, &metrics, &book);
            changelog.set_workloads(db.name(), &list);
            all = true;
        }
        for w in &mut watched {
            let stage = metrics.current_stage(&w.name);
            let changed = stage != w.stage;
            w.stage = stage;
            if all || changed {
                w.update(&db, &metrics, &book).await;
            }
        }
        if all {
            changelog.update(&db, &metrics, &watched).await;
        }
        all = tokio::select! {
            () = stop.cancelled() => break,
            _ = ticker.tick() => true,
            _ = poll.tick() => false,
            // A reload: the next round reads the new list.
            r = workloads.changed(), if reloads => {
                reloads = r.is_ok();
                false
            }
        };
    }
    // The run's end: the figures after the last stage, within the time
    // a task gets to stop.
    let last = async {
        for w in &mut watched {
            w.update(&db, &metrics, &book).await;
        }
        changelog.update(&db, &metrics, &watched).await;
    };
    let _ = tokio::time::timeout(FINAL_READ_TIMEOUT, last).await;
}

/// The workloads watched after a reload: those still in `list` keep what
/// they showed, a stopped one leaves `mongoload_shard_documents` and
/// `/status`, and a new one starts unread.
fn rewatch(
    old: Vec<Watched>,
    list: &[(String, Vec<String>)],
    metrics: &Metrics,
    book: &ShardBook,
) -> Vec<Watched> {
    let mut old = old;
    let mut kept = Vec::with_capacity(list.len());
    for (name, collections) in list {
        let w = match old.iter().position(|w| w.name == *name) {
            Some(i) => {
                let mut w = old.swap_remove(i);
                w.collections.clone_from(collections);
                w
            }
            None => Watched {
                name: name.clone(),
                collections: collections.clone(),
                shown: Vec::new(),
                failing: false,
                stage: None,
            },
        };
        kept.push(w);
    }
    for mut gone in old {
        gone.forget(metrics);
    }
    let names: Vec<String> = list.iter().map(|(n, _)| n.clone()).collect();
    book.keep(&names);
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_per_shard_over_collections() {
        let mut per = PerShard::new();
        add_counts(
            &mut per,
            &[
                doc! {"ns": "db.a", "shard": "shard0", "count": 10_i64},
                doc! {"ns": "db.a", "shard": "shard1", "count": 7_i32},
            ],
        )
        .unwrap();
        add_counts(
            &mut per,
            &[doc! {"ns": "db.b", "shard": "shard1", "count": 3.0}],
        )
        .unwrap();
        assert_eq!(per["shard0"], 10);
        assert_eq!(per["shard1"], 10);
        assert_eq!(per.values().sum::<i64>(), 20);
    }

    #[test]
    fn a_result_without_shard_or_count_is_an_error() {
        let mut per = PerShard::new();
        let e = add_counts(&mut per, &[doc! {"ns": "db.a", "count": 1}]).unwrap_err();
        assert!(e.contains("not a mongos"), "{e}");
        let e = add_counts(&mut per, &[doc! {"shard": "s0"}]).unwrap_err();
        assert!(e.contains("s0"), "{e}");
    }

    fn commit(id: &str, ms: i64, from: &str, to: &str) -> Document {
        doc! {
            "_id": id,
            "server": "cfg1:27019",
            "shard": "config",
            "clientAddr": "",
            "time": mongodb::bson::DateTime::from_millis(ms),
            "what": "moveChunk.commit",
            "ns": "db.a",
            "details": {"min": {"_id": 0}, "max": {"_id": 10}, "from": from, "to": to, "counts": {"cloned": 5_i64}},
        }
    }

    #[test]
    fn a_commit_gives_its_shards_and_time() {
        let m = parse_migration(&commit("c1", 1_000, "shard0", "shard1")).unwrap();
        assert_eq!(
            m,
            ChunkMove {
                id: "c1".into(),
                ns: "db.a".into(),
                from: "shard0".into(),
                to: "shard1".into(),
                time: mongodb::bson::DateTime::from_millis(1_000),
            }
        );
    }

    #[test]
    fn other_or_incomplete_changelog_documents_are_errors() {
        let mut start = commit("s1", 1, "shard0", "shard1");
        start.insert("what", "moveChunk.start");
        assert!(parse_migration(&start)
            .unwrap_err()
            .contains("moveChunk.start"));
        let mut no_to = commit("c1", 1, "shard0", "shard1");
        no_to.insert("details", doc! {"from": "shard0"});
        assert!(parse_migration(&no_to).unwrap_err().contains("'to'"));
        let mut no_time = commit("c2", 1, "shard0", "shard1");
        no_time.insert("time", "yesterday");
        assert!(parse_migration(&no_time).unwrap_err().contains("time"));
    }

    #[test]
    fn each_migration_is_counted_once_across_readings() {
        let mut since = mongodb::bson::DateTime::from_millis(100);
        let mut at = HashSet::new();
        // An older one (before the task started) is not counted.
        let first = [
            commit("c2", 200, "shard1", "shard0"),
            commit("c0", 50, "shard0", "shard1"),
            commit("c1", 200, "shard0", "shard1"),
        ];
        let got = newer_migrations(&first, &mut since, &mut at).unwrap();
        let ids: Vec<&str> = got.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["c2", "c1"]);
        assert_eq!(since.timestamp_millis(), 200);
        // The next reading (time >= 200) has both again and a third at
        // the same millisecond: only the third counts.
        let second = [
            commit("c1", 200, "shard0", "shard1"),
            commit("c2", 200, "shard1", "shard0"),
            commit("c3", 200, "shard0", "shard2"),
        ];
        let got = newer_migrations(&second, &mut since, &mut at).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].to, "shard2");
        assert!(newer_migrations(&second, &mut since, &mut at)
            .unwrap()
            .is_empty());
        let later = [commit("c4", 300, "shard2", "shard0")];
        assert_eq!(
            newer_migrations(&later, &mut since, &mut at).unwrap().len(),
            1
        );
        assert_eq!(at.len(), 1);
        // A document that is not a commit spoils the reading.
        let mut bad = commit("x", 400, "a", "b");
        bad.remove("details");
        assert!(newer_migrations(&[bad], &mut since, &mut at).is_err());
    }

    #[test]
    fn only_a_router_is_a_mongos() {
        assert!(is_mongos(&doc! {"msg": "isdbgrid", "ok": 1.0}));
        assert!(!is_mongos(&doc! {"setName": "rs0", "ok": 1.0}));
        assert!(!is_mongos(&doc! {"ok": 1.0}));
    }
}
