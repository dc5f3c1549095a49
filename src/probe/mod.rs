//! The replication-lag probe (`[lag_probe]`): replication lag as clients
//! see it. Every `interval` it writes a heartbeat `{_id: <run id>, seq,
//! at}` on the primary (`w: 1`, an upsert in its own collection of
//! `target.database`), and reads it back from each secondary through a
//! client pinned to that member (`directConnection`, which reads from a
//! secondary without any admin command) every `poll`. A heartbeat's lag on
//! a member is the time from sending its write to the first read of that
//! member that shows it; between heartbeats the gauge also rises with the
//! wait for one not yet seen, so a member that stops applying shows a
//! growing lag. Needs only `readWrite`.
//!
//! Metrics: `mongoload_replication_lag_seconds{member}` (gauge: the last
//! lag, or the current wait if longer), `mongoload_replication_lag_probe_seconds{member}`
//! (histogram of the heartbeats' lags), `mongoload_lag_probe_heartbeats_total{outcome}`,
//! `mongoload_lag_probe_errors_total{member,kind}`.

mod config;
mod families;

pub use config::LagProbeConfig;
pub(crate) use families::ProbeFamilies;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use mongodb::bson::{doc, DateTime, Document};
use mongodb::options::{ClientOptions, CollectionOptions, ServerAddress, WriteConcern};
use mongodb::{Client, Collection};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::error_kind::classify;
use crate::error_kind::ErrorKind;
use crate::metrics::Metrics;

/// Heartbeats remembered (their send times), the newest.
const KEEP_BEATS: usize = 1024;

impl ProbeFamilies {
    fn forget(&self, member: &str) {
        let _ = self.lag.remove_label_values(&[member]);
        let _ = self.observed.remove_label_values(&[member]);
        for k in ErrorKind::ALL {
            let _ = self.errors.remove_label_values(&[member, k.as_str()]);
        }
    }
}

/// The heartbeats written so far: sequence number → when its write was sent.
#[derive(Debug, Default)]
pub(crate) struct Beats {
    sent: VecDeque<(i64, Instant)>,
}

impl Beats {
    /// Heartbeat `seq` (increasing) was written, its write sent at `at`.
    pub(crate) fn push(&mut self, seq: i64, at: Instant) {
        if self.sent.len() == KEEP_BEATS {
            self.sent.pop_front();
        }
        self.sent.push_back((seq, at));
    }

    /// When heartbeat `seq` was sent, if remembered.
    pub(crate) fn sent(&self, seq: i64) -> Option<Instant> {
        let i = self.sent.binary_search_by_key(&seq, |(s, _)| *s).ok()?;
        Some(self.sent[i].1)
    }

    /// The oldest heartbeat after `seen`: (seq, sent).
    pub(crate) fn first_after(&self, seen: i64) -> Option<(i64, Instant)> {
        let i = self.sent.partition_point(|(s, _)| *s <= seen);
        self.sent.get(i).copied()
    }
}

/// What one read of a member says: the lag of a heartbeat newly seen, and
/// the gauge's value. Pure: the reader keeps `seen` and `last`.
pub(crate) fn read_outcome(
    beats: &Beats,
    seen: &mut i64,
    last: &mut Option<Duration>,
    shown: i64,
    at: Instant,
) -> (Option<Duration>, Option<Duration>) {
    let mut newly = None;
    if shown > *seen {
        if let Some(sent) = beats.sent(shown) {
            let lag = at.saturating_duration_since(sent);
            newly = Some(lag);
            *last = Some(lag);
        }
        *seen = shown;
    }
    let waiting = beats
        .first_after(*seen)
        .map(|(_, sent)| at.saturating_duration_since(sent));
    let gauge = match (*last, waiting) {
        (Some(l), Some(w)) => Some(l.max(w)),
        (l, w) => l.or(w),
    };
    (newly, gauge)
}

/// Runs the probe until `stop` fires (then deletes its heartbeat document):
/// spawn it as a task.
pub(crate) async fn run(
    config: LagProbeConfig,
    uri: String,
    db: mongodb::Database,
    run_id: String,
    metrics: Arc<Metrics>,
    m: ProbeFamilies,
    stop: CancellationToken,
) {
    let base = match ClientOptions::parse(&uri).await {
        Ok(o) => o,
        Err(e) => {
            tracing::error!(
                "lag probe: cannot read the connection string: {}",
                crate::uri::scrub(&e.to_string(), &uri)
            );
            return;
        }
    };
    let coll: Collection<Document> = db.collection_with_options(
        &config.collection,
        CollectionOptions::builder()
            .write_concern(WriteConcern::nodes(1))
            .build(),
    );
    let beats = Arc::new(Mutex::new(Beats::default()));
    let mut readers = Readers {
        running: HashMap::new(),
        tasks: JoinSet::new(),
        template: Reader {
            member: String::new(),
            options: base,
            collection: config.collection.clone(),
            database: db.name().to_owned(),
            id: run_id.clone(),
            poll: config.poll(),
            beats: beats.clone(),
            metrics: m.clone(),
        },
    };
    let mut tick = tokio::time::interval(config.interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut heartbeat = Heartbeat {
        coll,
        run_id,
        seq: 0,
        failing: false,
        beats,
        metrics: m,
    };
    tracing::info!(
        "lag probe: a heartbeat every {} in {}.{}, read back from each secondary every {}",
        humantime::format_duration(config.interval),
        db.name(),
        config.collection,
        humantime::format_duration(config.poll())
    );
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => break,
        }
        readers.follow(metrics.topology().secondaries, &stop);
        let timeout = config.interval.max(Duration::from_secs(1));
        if !heartbeat.write(timeout, &stop).await {
            break;
        }
    }
    readers.stop().await;
    heartbeat.delete().await;
}

/// The readers of the secondaries the driver sees: one task each.
struct Readers {
    /// Each member read, with its reader's stop token.
    running: HashMap<String, CancellationToken>,
    tasks: JoinSet<()>,
    /// What every reader is given; its `member` is set per reader.
    template: Reader,
}

impl Readers {
    /// Stops the readers of members no longer among `secondaries` (and
    /// forgets their series), and starts one for each new member.
    fn follow(&mut self, secondaries: Vec<String>, stop: &CancellationToken) {
        let metrics = &self.template.metrics;
        self.running.retain(|member, token| {
            let keep = secondaries.contains(member);
            if !keep {
                token.cancel();
                metrics.forget(member);
            }
            keep
        });
        for member in secondaries {
            if self.running.contains_key(&member) {
                continue;
            }
            let token = stop.child_token();
            self.running.insert(member.clone(), token.clone());
            let reader = Reader {
                member,
                ..self.template.clone()
            };
            self.tasks.spawn(reader.run(token));
        }
    }

    /// Stops every reader and waits for them.
    async fn stop(mut self) {
        for t in self.running.values() {
            t.cancel();
        }
        while self.tasks.join_next().await.is_some() {}
    }
}

/// The probe's heartbeat document on the primary, and how its writes go.
struct Heartbeat {
    coll: Collection<Document>,
    run_id: String,
    /// The last heartbeat's sequence number.
    seq: i64,
    /// The last write failed: logged once, until one succeeds again.
    failing: bool,
    beats: Arc<Mutex<Beats>>,
    metrics: ProbeFamilies,
}

impl Heartbeat {
    /// Writes the next heartbeat (waiting at most `timeout`) and records
    /// how it went; false, without recording, if `stop` fires first.
    async fn write(&mut self, timeout: Duration, stop: &CancellationToken) -> bool {
        self.seq += 1;
        let sent = Instant::now();
        let write = self
            .coll
            .update_one(
                doc! {"_id": &self.run_id},
                doc! {"$set": {"seq": self.seq, "at": DateTime::now()}},
            )
            .upsert(true);
        let outcome = tokio::select! {
            r = tokio::time::timeout(timeout, write) => r,
            _ = stop.cancelled() => return false,
        };
        let m = &self.metrics;
        match outcome {
            Ok(Ok(_)) => {
                self.beats
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(self.seq, sent);
                m.heartbeats.with_label_values(&["ok"]).inc();
                if self.failing {
                    tracing::info!("lag probe: heartbeats written again");
                    self.failing = false;
                }
            }
            other => {
                m.heartbeats.with_label_values(&["error"]).inc();
                if !self.failing {
                    let why = match other {
                        Ok(Err(e)) => e.to_string(),
                        _ => "timed out".into(),
                    };
                    tracing::warn!(
                        "lag probe: cannot write the heartbeat (retried every interval): {why}"
                    );
                    self.failing = true;
                }
            }
        }
        true
    }

    /// Deletes the heartbeat document (at most 2 s, errors ignored).
    async fn delete(&self) {
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            self.coll.delete_one(doc! {"_id": &self.run_id}),
        )
        .await;
    }
}

/// Reads the heartbeat from one member.
#[derive(Clone)]
struct Reader {
    member: String,
    options: ClientOptions,
    collection: String,
    database: String,
    id: String,
    poll: Duration,
    beats: Arc<Mutex<Beats>>,
    metrics: ProbeFamilies,
}

impl Reader {
    async fn run(self, stop: CancellationToken) {
        let Ok(address) = ServerAddress::parse(&self.member) else {
            return;
        };
        let mut options = self.options.clone();
        options.hosts = vec![address];
        options.direct_connection = Some(true);
        options.repl_set_name = None;
        options.min_pool_size = None;
        options.max_pool_size = Some(1);
        options.server_selection_timeout = Some(self.poll.max(Duration::from_secs(1)));
        options.app_name = Some(format!(
            "{}-lag-probe",
            options.app_name.as_deref().unwrap_or("mongoload")
        ));
        let client = match Client::with_options(options) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(member = %self.member, "lag probe: cannot set up a client for {}: {e}", self.member);
                return;
            }
        };
        let coll: Collection<Document> =
            client.database(&self.database).collection(&self.collection);
        let lag = self.metrics.lag.with_label_values(&[&self.member]);
        let observed = self.metrics.observed.with_label_values(&[&self.member]);
        let (mut seen, mut last) = (0i64, None);
        let mut tick = tokio::time::interval(self.poll);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.cancelled() => break,
            }
            let read = tokio::select! {
                r = tokio::time::timeout(self.poll.max(Duration::from_secs(1)), coll.find_one(doc! {"_id": &self.id}).projection(doc! {"seq": 1})) => r,
                _ = stop.cancelled() => break,
            };
            let at = Instant::now();
            let shown = match read {
                Ok(Ok(d)) => d.and_then(|d| d.get_i64("seq").ok()).unwrap_or(0),
                Ok(Err(e)) => {
                    self.count_error(classify(&e));
                    continue;
                }
                Err(_) => {
                    self.count_error(ErrorKind::Timeout);
                    continue;
                }
            };
            let beats = self.beats.lock().unwrap_or_else(PoisonError::into_inner);
            let (newly, gauge) = read_outcome(&beats, &mut seen, &mut last, shown, at);
            drop(beats);
            if let Some(l) = newly {
                observed.observe(l.as_secs_f64());
            }
            if let Some(g) = gauge {
                lag.set(g.as_secs_f64());
            }
        }
        client.shutdown().immediate(true).await;
    }

    fn count_error(&self, kind: ErrorKind) {
        self.metrics
            .errors
            .with_label_values(&[&self.member, kind.as_str()])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_heartbeats_lag_is_from_its_write_to_the_first_read_showing_it() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut beats = Beats::default();
        beats.push(1, t0);
        let (mut seen, mut last) = (0, None);
        // Not there yet: the gauge is the wait so far.
        assert_eq!(
            read_outcome(&beats, &mut seen, &mut last, 0, t0 + ms(200)),
            (None, Some(ms(200)))
        );
        // Seen at 500 ms: one sample of 500 ms.
        assert_eq!(
            read_outcome(&beats, &mut seen, &mut last, 1, t0 + ms(500)),
            (Some(ms(500)), Some(ms(500)))
        );
        // The next heartbeat is written at 1 s; at 1.2 s the gauge keeps
        // the last lag (the wait is shorter), at 1.7 s it shows the wait.
        beats.push(2, t0 + ms(1000));
        assert_eq!(
            read_outcome(&beats, &mut seen, &mut last, 1, t0 + ms(1200)),
            (None, Some(ms(500)))
        );
        assert_eq!(
            read_outcome(&beats, &mut seen, &mut last, 1, t0 + ms(1700)),
            (None, Some(ms(700)))
        );
        // Two heartbeats at once: the newer one's lag is the sample.
        beats.push(3, t0 + ms(2000));
        assert_eq!(
            read_outcome(&beats, &mut seen, &mut last, 3, t0 + ms(2100)),
            (Some(ms(100)), Some(ms(100)))
        );
        // A heartbeat of another run (unknown seq) moves nothing.
        assert_eq!(beats.sent(99), None);
    }

    #[test]
    fn beats_keep_the_newest() {
        let t0 = Instant::now();
        let mut b = Beats::default();
        for s in 1..=(KEEP_BEATS as i64 + 10) {
            b.push(s, t0);
        }
        assert_eq!(b.sent(5), None);
        assert!(b.sent(KEEP_BEATS as i64 + 10).is_some());
        assert_eq!(b.first_after(KEEP_BEATS as i64 + 10), None);
        assert_eq!(b.first_after(0).map(|(s, _)| s), Some(11));
    }
}
