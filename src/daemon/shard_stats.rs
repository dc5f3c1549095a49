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

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
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
pub type PerShard = BTreeMap<String, i64>;

/// One workload's documents per shard as `/status` shows them.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ShardDocuments {
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
pub struct ShardBook(std::sync::Mutex<Vec<ShardDocuments>>);

impl ShardBook {
    /// The readings now, in the workloads' order.
    pub fn snapshot(&self) -> Vec<ShardDocuments> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
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
pub fn add_counts(into: &mut PerShard, docs: &[Document]) -> Result<(), String> {
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
pub fn is_mongos(hello: &Document) -> bool {
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
                .map_err(|e| format!("{coll}: {}", crate::mongo::explain(&e)))?,
            Err(e) if not_created_yet(&e) => continue,
            Err(e) => return Err(format!("{coll}: {}", crate::mongo::explain(&e))),
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

/// The stage reports' reader (the report task asks it for each report):
/// the same reading as the task's, which also updates the gauge and
/// `/status`, so a report and the metric agree at that moment.
struct Counter {
    db: mongodb::Database,
    workloads: Vec<(String, Vec<String>)>,
    metrics: Arc<Metrics>,
    book: Arc<ShardBook>,
}

impl std::fmt::Debug for Counter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counter")
            .field("workloads", &self.workloads)
            .finish_non_exhaustive()
    }
}

/// Where the report task finds its [`ShardCounter`].
pub type ReportCounter = Arc<std::sync::OnceLock<Arc<dyn crate::report::ShardCounter>>>;

impl crate::report::ShardCounter for Counter {
    fn documents<'a>(&'a self, workload: &'a str) -> crate::report::ShardReading<'a> {
        Box::pin(async move {
            let (_, collections) = self.workloads.iter().find(|(n, _)| n == workload)?;
            let per_shard = tokio::time::timeout(REPORT_READ_TIMEOUT, read(&self.db, collections))
                .await
                .ok()?
                .ok()?;
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

/// Runs until `stop`: spawn it as a task. `workloads`: each workload's
/// name and collections; `reports`: given the stage reports' reader once
/// the target is known to be a mongos.
pub async fn run(
    interval: Duration,
    db: mongodb::Database,
    workloads: Vec<(String, Vec<String>)>,
    metrics: Arc<Metrics>,
    book: Arc<ShardBook>,
    reports: ReportCounter,
    stop: CancellationToken,
) {
    if interval.is_zero() || workloads.is_empty() {
        return;
    }
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
    let mut watched: Vec<Watched> = workloads
        .into_iter()
        .map(|(name, collections)| Watched {
            name,
            collections,
            shown: Vec::new(),
            failing: false,
            stage: None,
        })
        .collect();
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut poll = tokio::time::interval(STAGE_POLL);
    poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let all = tokio::select! {
            () = stop.cancelled() => break,
            _ = ticker.tick() => true,
            _ = poll.tick() => false,
        };
        for w in &mut watched {
            let stage = metrics.current_stage(&w.name);
            let changed = stage != w.stage;
            w.stage = stage;
            if all || changed {
                w.update(&db, &metrics, &book).await;
            }
        }
    }
    // The run's end: the figures after the last stage, within the time
    // a task gets to stop.
    let last = async {
        for w in &mut watched {
            w.update(&db, &metrics, &book).await;
        }
    };
    let _ = tokio::time::timeout(FINAL_READ_TIMEOUT, last).await;
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

    #[test]
    fn only_a_router_is_a_mongos() {
        assert!(is_mongos(&doc! {"msg": "isdbgrid", "ok": 1.0}));
        assert!(!is_mongos(&doc! {"setName": "rs0", "ok": 1.0}));
        assert!(!is_mongos(&doc! {"ok": 1.0}));
    }
}
