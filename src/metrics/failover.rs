//! Failover as the load sees it: the primary and its changes (from the
//! driver's SDAM events), the write outage around each failover (from
//! every write's outcome: the workers' requests and, through command
//! monitoring, each attempt of a write, so a failure hidden by the driver's
//! retryable writes still starts an outage), the writes the driver retried,
//! and a log of the failovers for the stage reports and the audits.
//!
//! A **write outage** runs from the first write that fails with an
//! availability error (`not_primary`, `network`, `server_selection`,
//! `timeout`; a write that waited unanswered, `timeout` or
//! `server_selection`, from when it was sent), or from the moment the
//! driver loses the primary if that is earlier, to the first write
//! acknowledged after it. Only writes sent
//! after the outage began can end it (a reply from the old primary to a
//! write sent before does not), and only writes sent after the last outage
//! ended can start one (stragglers of an outage do not start another). A
//! workload that writes rarely adds the wait for its next write.
//!
//! Metrics: `mongoload_write_outage_seconds` (histogram of finished
//! outages), `mongoload_write_outage_ongoing_seconds` (0, or how long the
//! current outage has lasted), `mongoload_write_outage_last_seconds`,
//! `mongoload_no_primary_seconds` (histogram: periods the driver knew no
//! primary), `mongoload_primary_info{primary}` (1 for the current primary),
//! `mongoload_primary_elected_timestamp_seconds`, and
//! `mongoload_retried_writes_total{kind}` (write attempts the driver sent
//! again, by the class of the failure it retried).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use mongodb::bson::{Bson, Document};
use mongodb::event::command::CommandEvent;
use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Gauge, Histogram, HistogramOpts, IntCounterVec, IntGaugeVec, Opts, Registry};
use tokio::sync::watch;

use crate::error_kind::ErrorKind;

/// Buckets of the outage and no-primary histograms, in seconds: elections
/// take from a fraction of a second to tens of seconds.
pub const OUTAGE_BUCKETS: [f64; 14] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0,
];

/// How long after the primary is back an outage begun by its loss, which no
/// write failure confirmed, waits for a write to end it before it is dropped.
pub const UNCONFIRMED_GRACE: Duration = Duration::from_secs(5);

/// Failovers kept for the stage reports (the newest).
const KEEP_FAILOVERS: usize = 256;

/// Sessions whose last retryable write is remembered (sessions are pooled,
/// about one per concurrent operation); beyond this the table restarts.
const MAX_SESSIONS: usize = 65_536;

/// Whether a failed write with this error class counts toward an outage.
pub fn is_outage_error(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::NotPrimary
            | ErrorKind::Network
            | ErrorKind::ServerSelection
            | ErrorKind::Timeout
    )
}

/// When an outage shown by a write sent at `sent` and failed at `failed`
/// with an error of class `kind` began: a write that waited unanswered
/// (`timeout`, `server_selection`) shows the server gone since it was sent,
/// not since the client gave up on it, so a 3 s freeze with a 1 s
/// `operation_timeout` reads 3 s, not 2 s; a refusal or a dropped
/// connection shows it when it failed.
pub fn outage_start(kind: ErrorKind, sent: u64, failed: u64) -> u64 {
    match kind {
        ErrorKind::Timeout | ErrorKind::ServerSelection => sent.min(failed),
        _ => failed,
    }
}

/// The write-outage state machine on nanoseconds since an origin (pure:
/// tested with plain numbers). Lock-free: workers feed it on every write.
/// An outage begun by the loss of the primary is *unconfirmed* until a
/// write fails: one that no write confirmed is dropped a while after the
/// primary is back (a read-only load has no write outage).
#[derive(Debug, Default)]
pub(crate) struct OutageClock {
    /// 0 when writes go through; else `(start + 1) << 1 | confirmed`.
    state: AtomicU64,
    /// When the last outage ended.
    last_end: AtomicU64,
}

fn encode(start: u64, confirmed: bool) -> u64 {
    ((start + 1) << 1) | u64::from(confirmed)
}

fn start_of(state: u64) -> u64 {
    (state >> 1) - 1
}

impl OutageClock {
    /// A write sent at `sent` failed with an availability error that shows
    /// the server gone since `now` (see [`outage_start`]). Returns whether
    /// this started an outage.
    pub(crate) fn failed(&self, sent: u64, now: u64) -> bool {
        if sent < self.last_end.load(Ordering::Acquire) {
            return false;
        }
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            let next = match cur {
                0 => encode(now, true),
                c if c & 1 == 1 => return false,
                c => c | 1,
            };
            match self
                .state
                .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return cur == 0,
                Err(actual) => cur = actual,
            }
        }
    }

    /// The driver lost the primary at `now`: an (unconfirmed) outage
    /// begins unless one runs.
    pub(crate) fn lost_primary(&self, now: u64) -> bool {
        self.state
            .compare_exchange(0, encode(now, false), Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Drops the current outage if no write failure confirmed it.
    pub(crate) fn discard_unconfirmed(&self) -> bool {
        let cur = self.state.load(Ordering::Acquire);
        cur != 0
            && cur & 1 == 0
            && self
                .state
                .compare_exchange(cur, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// A write sent at `sent` was acknowledged at `now`. Returns the
    /// outage it ended: (start, duration in ns).
    pub(crate) fn acknowledged(&self, sent: u64, now: u64) -> Option<(u64, u64)> {
        let cur = self.state.load(Ordering::Acquire);
        if cur == 0 {
            return None;
        }
        let start = start_of(cur);
        if sent < start
            || self
                .state
                .compare_exchange(cur, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return None;
        }
        self.last_end.fetch_max(now, Ordering::AcqRel);
        Some((start, now.saturating_sub(start)))
    }

    /// How long the current outage has lasted at `now`, if one runs.
    pub(crate) fn ongoing(&self, now: u64) -> Option<u64> {
        match self.state.load(Ordering::Acquire) {
            0 => None,
            s => Some(now.saturating_sub(start_of(s))),
        }
    }
}

/// One failover as the driver saw it, for the stage reports.
#[derive(Debug, Clone, PartialEq)]
pub struct FailoverRecord {
    /// When the driver learnt of the new primary.
    pub at: Instant,
    pub wall: SystemTime,
    /// The primary before (none if it was never known).
    pub from: Option<String>,
    pub to: String,
    /// How long the driver knew no primary before this one (none when the
    /// primary changed without a gap).
    pub no_primary: Option<Duration>,
    /// The write outage around it, once it ended.
    pub write_outage: Option<Duration>,
}

/// What the topology events left behind.
#[derive(Debug, Default)]
struct PrimaryState {
    current: Option<String>,
    /// The primary before the current gap, and when the gap began.
    lost: Option<(Option<String>, Instant)>,
    /// The last primary known (what a failover is "from").
    last: Option<String>,
    records: VecDeque<FailoverRecord>,
}

/// Which sessions' retryable writes were seen, to tell a retry (the same
/// session and `txnNumber` again) from a new write.
#[derive(Debug, Default)]
struct RetryBook {
    /// lsid → (last txnNumber, class of its last failed attempt).
    sessions: HashMap<Vec<u8>, (i64, Option<ErrorKind>)>,
    /// request id → lsid of a write attempt in flight.
    inflight: HashMap<i32, Vec<u8>>,
}

/// The write commands (their attempts feed the outage clock).
fn is_write_command(name: &str) -> bool {
    matches!(
        name,
        "insert" | "update" | "delete" | "findAndModify" | "commitTransaction"
    )
}

/// The session id and transaction number of a retryable write (not one
/// inside a multi-document transaction, whose statements share a number).
fn retryable_write_key(command: &Document) -> Option<(Vec<u8>, i64)> {
    if command.contains_key("autocommit") {
        return None;
    }
    let txn = match command.get("txnNumber")? {
        Bson::Int64(n) => *n,
        Bson::Int32(n) => i64::from(*n),
        _ => return None,
    };
    let id = match command.get_document("lsid").ok()?.get("id")? {
        Bson::Binary(b) => b.bytes.clone(),
        _ => return None,
    };
    Some((id, txn))
}

/// The failover metrics and log; one per process, fed by the SDAM and
/// command event handlers and by the workers.
pub struct FailoverMetrics {
    origin: Instant,
    clock: OutageClock,
    /// When the primary came back after a gap (0: none since the last loss).
    primary_back: AtomicU64,
    outage: Histogram,
    outage_last: Gauge,
    ongoing: OngoingGauge,
    no_primary: Histogram,
    primary_info: IntGaugeVec,
    elected_at: Gauge,
    retried: IntCounterVec,
    state: Mutex<PrimaryState>,
    retries: Mutex<RetryBook>,
    /// The number of failovers seen; audits wait on it.
    failovers: watch::Sender<u64>,
}

/// `mongoload_write_outage_ongoing_seconds`, computed at scrape time.
struct OngoingGauge {
    gauge: Gauge,
}

impl FailoverMetrics {
    pub(crate) fn new() -> Result<Self, prometheus::Error> {
        let primary_info = IntGaugeVec::new(
            Opts::new(
                "mongoload_primary_info",
                "1 for the replica set member the driver knows as primary; no series while there is none.",
            ),
            &["primary"],
        )?;
        let retried = IntCounterVec::new(
            Opts::new(
                "mongoload_retried_writes_total",
                "Write attempts the driver's retryable writes sent again, by the class of the failed attempt.",
            ),
            &["kind"],
        )?;
        for k in ErrorKind::ALL {
            retried.with_label_values(&[k.as_str()]);
        }
        Ok(FailoverMetrics {
            origin: Instant::now(),
            clock: OutageClock::default(),
            primary_back: AtomicU64::new(0),
            outage: Histogram::with_opts(
                HistogramOpts::new(
                    "mongoload_write_outage_seconds",
                    "Write outages: from the first write failing with an availability error to the first acknowledged one after it.",
                )
                .buckets(OUTAGE_BUCKETS.to_vec()),
            )?,
            outage_last: Gauge::new(
                "mongoload_write_outage_last_seconds",
                "Duration of the last finished write outage (0 before any).",
            )?,
            ongoing: OngoingGauge {
                gauge: Gauge::new(
                    "mongoload_write_outage_ongoing_seconds",
                    "How long writes have been failing now (0 while they are acknowledged).",
                )?,
            },
            no_primary: Histogram::with_opts(
                HistogramOpts::new(
                    "mongoload_no_primary_seconds",
                    "Periods without a known primary, as the driver's topology monitoring saw them (elections).",
                )
                .buckets(OUTAGE_BUCKETS.to_vec()),
            )?,
            primary_info,
            elected_at: Gauge::new(
                "mongoload_primary_elected_timestamp_seconds",
                "Unix time the driver last learnt of a new primary (0 before any change).",
            )?,
            retried,
            state: Mutex::new(PrimaryState::default()),
            retries: Mutex::new(RetryBook::default()),
            failovers: watch::channel(0).0,
        })
    }

    pub(crate) fn register(
        self: &std::sync::Arc<Self>,
        registry: &Registry,
    ) -> Result<(), prometheus::Error> {
        registry.register(Box::new(self.outage.clone()))?;
        registry.register(Box::new(self.outage_last.clone()))?;
        registry.register(Box::new(OngoingCollector(std::sync::Arc::clone(self))))?;
        registry.register(Box::new(self.no_primary.clone()))?;
        registry.register(Box::new(self.primary_info.clone()))?;
        registry.register(Box::new(self.elected_at.clone()))?;
        registry.register(Box::new(self.retried.clone()))?;
        Ok(())
    }

    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_nanos() as u64
    }

    fn state(&self) -> MutexGuard<'_, PrimaryState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A write sent at `sent` returned at `done`: acknowledged, or failed
    /// with an error of class `kind`.
    pub fn write_result(&self, sent: Instant, done: Instant, outcome: Result<(), ErrorKind>) {
        let (s, d) = (self.ns(sent), self.ns(done));
        match outcome {
            Ok(()) => {
                self.settle(d);
                if let Some((start, length)) = self.clock.acknowledged(s, d) {
                    self.outage_ended(start, Duration::from_nanos(length));
                }
            }
            Err(kind) if is_outage_error(kind) => {
                if self.clock.failed(s, outage_start(kind, s, d)) {
                    tracing::warn!(error_kind = %kind, "write outage: writes fail ({kind})");
                }
            }
            Err(_) => {}
        }
    }

    fn outage_ended(&self, start: u64, length: Duration) {
        let secs = length.as_secs_f64();
        self.outage.observe(secs);
        self.outage_last.set(secs);
        let start = self.origin + Duration::from_nanos(start);
        let mut state = self.state();
        let attached = state
            .records
            .iter_mut()
            .rev()
            .find(|r| r.write_outage.is_none() && r.at >= start)
            .map(|r| {
                r.write_outage = Some(length);
                r.to.clone()
            });
        drop(state);
        match attached {
            Some(primary) => tracing::info!(
                outage_s = secs,
                primary = %primary,
                "write outage over after {secs:.3}s: writes acknowledged by the new primary {primary}"
            ),
            None => tracing::info!(
                outage_s = secs,
                "write outage over after {secs:.3}s (no primary change)"
            ),
        }
    }

    /// The primary of a new topology description (`changed`: a different
    /// member or a new election than the last primary known).
    pub(crate) fn on_topology(&self, primary: Option<&str>, changed: bool) {
        let now = Instant::now();
        let mut state = self.state();
        match primary {
            None => {
                if let Some(old) = state.current.take() {
                    let _ = self.primary_info.remove_label_values(&[&old]);
                    state.lost = Some((Some(old.clone()), now));
                    drop(state);
                    // Writes cannot be acknowledged from here on, whether
                    // or not one fails: with streaming monitoring the
                    // driver often knows before any write is sent, and
                    // writes then wait in server selection instead.
                    self.primary_back.store(0, Ordering::Release);
                    self.clock.lost_primary(self.ns(now));
                    tracing::warn!(primary = %old, "the driver knows no primary (was {old}): an election or a member down");
                }
            }
            Some(p) => {
                if state.current.as_deref() == Some(p) && !changed {
                    return;
                }
                if let Some(old) = state.current.take() {
                    let _ = self.primary_info.remove_label_values(&[&old]);
                }
                self.primary_info.with_label_values(&[p]).set(1);
                let gap = state
                    .lost
                    .take()
                    .map(|(_, at)| now.saturating_duration_since(at));
                if let Some(g) = gap {
                    self.no_primary.observe(g.as_secs_f64());
                    self.primary_back
                        .store(self.ns(now).max(1), Ordering::Release);
                }
                let from = state.last.replace(p.to_owned());
                state.current = Some(p.to_owned());
                if !changed {
                    return;
                }
                let wall = SystemTime::now();
                self.elected_at.set(
                    wall.duration_since(SystemTime::UNIX_EPOCH)
                        .map_or(0.0, |d| d.as_secs_f64()),
                );
                if state.records.len() == KEEP_FAILOVERS {
                    state.records.pop_front();
                }
                state.records.push_back(FailoverRecord {
                    at: now,
                    wall,
                    from: from.clone(),
                    to: p.to_owned(),
                    no_primary: gap,
                    write_outage: None,
                });
                drop(state);
                tracing::warn!(
                    from = from.as_deref().unwrap_or("-"),
                    to = %p,
                    no_primary_s = gap.map_or(0.0, |g| g.as_secs_f64()),
                    "failover: new primary {p} (was {}){}",
                    from.as_deref().unwrap_or("unknown"),
                    gap.map_or(String::new(), |g| format!(", {:.3}s without a primary", g.as_secs_f64())),
                );
                self.failovers.send_modify(|n| *n += 1);
            }
        }
    }

    /// Feeds one command event: retries of retryable writes, and each
    /// write attempt's outcome to the outage clock.
    pub(crate) fn on_command(&self, event: &CommandEvent) {
        match event {
            CommandEvent::Started(ev) => {
                self.write_started(&ev.command_name, ev.request_id, &ev.command)
            }
            CommandEvent::Failed(ev) => self.write_failed(
                &ev.command_name,
                ev.request_id,
                ev.duration,
                crate::mongo::classify(&ev.failure),
            ),
            CommandEvent::Succeeded(ev) => {
                self.write_succeeded(&ev.command_name, ev.request_id, ev.duration, &ev.reply)
            }
            _ => {}
        }
    }

    /// A command was sent: a retry when it is a retryable write of a
    /// session and `txnNumber` seen before.
    fn write_started(&self, name: &str, request_id: i32, command: &Document) {
        if !is_write_command(name) {
            return;
        }
        let Some((lsid, txn)) = retryable_write_key(command) else {
            return;
        };
        let mut book = self.retries.lock().unwrap_or_else(PoisonError::into_inner);
        if book.sessions.len() >= MAX_SESSIONS {
            book.sessions.clear();
        }
        let retry = match book.sessions.get(&lsid) {
            Some((last, failure)) if *last == txn => Some(failure.unwrap_or(ErrorKind::Other)),
            _ => None,
        };
        book.sessions.insert(lsid.clone(), (txn, None));
        book.inflight.insert(request_id, lsid);
        drop(book);
        if let Some(kind) = retry {
            self.retried.with_label_values(&[kind.as_str()]).inc();
        }
    }

    /// A command sent `took` ago failed with an error of class `kind`.
    fn write_failed(&self, name: &str, request_id: i32, took: Duration, kind: ErrorKind) {
        if !is_write_command(name) {
            return;
        }
        let mut book = self.retries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(lsid) = book.inflight.remove(&request_id) {
            if let Some(s) = book.sessions.get_mut(&lsid) {
                s.1 = Some(kind);
            }
        }
        drop(book);
        let now = Instant::now();
        self.write_result(now.checked_sub(took).unwrap_or(now), now, Err(kind));
    }

    /// A command sent `took` ago succeeded with `reply`.
    fn write_succeeded(&self, name: &str, request_id: i32, took: Duration, reply: &Document) {
        if !is_write_command(name) {
            return;
        }
        self.retries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .inflight
            .remove(&request_id);
        // A write concern error is no acknowledgement at the concern asked for.
        if reply.contains_key("writeConcernError") {
            return;
        }
        let now = Instant::now();
        self.write_result(now.checked_sub(took).unwrap_or(now), now, Ok(()));
    }

    /// How many failovers the driver has seen; changes with each.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.failovers.subscribe()
    }

    /// The failovers whose new primary the driver learnt of in
    /// `[from, to]`, oldest first.
    pub fn between(&self, from: Instant, to: Instant) -> Vec<FailoverRecord> {
        self.state()
            .records
            .iter()
            .filter(|r| r.at >= from && r.at <= to)
            .cloned()
            .collect()
    }

    /// The newest failovers (at most `n`), oldest first, for `/status`.
    pub fn recent(&self, n: usize) -> Vec<FailoverRecord> {
        let state = self.state();
        let skip = state.records.len().saturating_sub(n);
        state.records.iter().skip(skip).cloned().collect()
    }

    /// How long the current write outage has lasted, if one runs. An
    /// outage no write failure confirmed ends [`UNCONFIRMED_GRACE`] after
    /// the primary is back if no write ended it (no write was waiting).
    pub fn ongoing_outage(&self) -> Option<Duration> {
        let now = self.ns(Instant::now());
        self.settle(now);
        self.clock.ongoing(now).map(Duration::from_nanos)
    }

    /// Drops an unconfirmed outage [`UNCONFIRMED_GRACE`] after the primary
    /// came back.
    fn settle(&self, now: u64) {
        let back = self.primary_back.load(Ordering::Acquire);
        if back != 0
            && now > back + UNCONFIRMED_GRACE.as_nanos() as u64
            && self.clock.discard_unconfirmed()
        {
            tracing::info!("the primary is back and no write was waiting: no write outage");
        }
    }
}

/// Sets the ongoing-outage gauge when the registry is gathered.
struct OngoingCollector(std::sync::Arc<FailoverMetrics>);

impl Collector for OngoingCollector {
    fn desc(&self) -> Vec<&Desc> {
        self.0.ongoing.gauge.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let g = &self.0.ongoing.gauge;
        g.set(self.0.ongoing_outage().map_or(0.0, |d| d.as_secs_f64()));
        g.collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mongodb::bson::{doc, spec::BinarySubtype, Binary};

    #[test]
    fn an_outage_runs_from_the_first_failure_to_the_first_later_ack() {
        let c = OutageClock::default();
        assert_eq!(c.acknowledged(5, 10), None, "no outage");
        assert!(c.failed(90, 100), "the first failure starts it");
        assert!(!c.failed(95, 120), "later failures do not restart it");
        assert_eq!(c.ongoing(150), Some(50));
        // A write sent before the outage, acknowledged late: not the end.
        assert_eq!(c.acknowledged(99, 160), None);
        assert_eq!(c.acknowledged(100, 2_100), Some((100, 2_000)));
        assert_eq!(c.ongoing(2_200), None);
        // A straggler sent during the outage fails after it: no new one.
        assert!(!c.failed(1_000, 2_300));
        assert_eq!(c.ongoing(2_400), None);
        // A failure of a write sent after the end starts the next.
        assert!(c.failed(2_500, 2_600));
        assert_eq!(c.acknowledged(2_600, 2_700), Some((2_600, 100)));
        // The primary lost: an unconfirmed outage, dropped if nothing
        // confirms it, kept once a write fails.
        assert!(c.lost_primary(3_000));
        assert!(!c.lost_primary(3_100), "one runs");
        assert!(c.discard_unconfirmed());
        assert_eq!(c.ongoing(3_200), None);
        assert!(c.lost_primary(4_000));
        assert!(!c.failed(4_050, 4_100), "confirms, does not restart");
        assert!(!c.discard_unconfirmed());
        assert_eq!(c.acknowledged(4_500, 6_000), Some((4_000, 2_000)));
    }

    #[test]
    fn a_write_that_waited_unanswered_dates_the_outage_from_its_sending() {
        // Frozen at 1_000 for 3_000 with a 1_000 timeout: the first write
        // sent into the freeze fails at 2_010, the first sent after it is
        // acknowledged at 4_005.
        let c = OutageClock::default();
        let start = outage_start(ErrorKind::Timeout, 1_010, 2_010);
        assert_eq!(start, 1_010);
        assert!(c.failed(1_010, start));
        assert_eq!(c.acknowledged(1_020, 4_005), Some((1_010, 2_995)));
        assert_eq!(outage_start(ErrorKind::ServerSelection, 10, 30), 10);
        // A refusal or a dropped socket shows the fault when it happens.
        assert_eq!(outage_start(ErrorKind::Network, 10, 30), 30);
        assert_eq!(outage_start(ErrorKind::NotPrimary, 10, 30), 30);
    }

    #[test]
    fn only_availability_errors_make_an_outage() {
        assert!(is_outage_error(ErrorKind::NotPrimary));
        assert!(is_outage_error(ErrorKind::ServerSelection));
        assert!(!is_outage_error(ErrorKind::DuplicateKey));
        assert!(!is_outage_error(ErrorKind::Auth));
        let m = FailoverMetrics::new().unwrap();
        let t0 = Instant::now();
        m.write_result(t0, t0, Err(ErrorKind::DuplicateKey));
        assert_eq!(m.ongoing_outage(), None);
        m.write_result(t0, t0 + Duration::from_millis(1), Err(ErrorKind::Network));
        assert!(m.ongoing_outage().is_some());
        m.write_result(
            t0 + Duration::from_millis(2),
            t0 + Duration::from_millis(500),
            Ok(()),
        );
        assert_eq!(m.ongoing_outage(), None);
        assert_eq!(m.outage.get_sample_count(), 1);
        assert!(
            (m.outage_last.get() - 0.499).abs() < 1e-9,
            "{}",
            m.outage_last.get()
        );
    }

    #[test]
    fn failovers_are_recorded_with_their_gap_and_outage() {
        let m = FailoverMetrics::new().unwrap();
        let mut seen = m.subscribe();
        m.on_topology(Some("a:1"), false);
        assert!(m.recent(10).is_empty(), "the first primary is no failover");
        assert_eq!(m.primary_info.with_label_values(&["a:1"]).get(), 1);
        let t0 = Instant::now();
        m.write_result(t0, t0, Err(ErrorKind::NotPrimary));
        m.on_topology(None, false);
        m.on_topology(Some("b:1"), true);
        assert!(seen.has_changed().unwrap());
        let _ = seen.borrow_and_update();
        let r = m.recent(10);
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].from.as_deref(), r[0].to.as_str()),
            (Some("a:1"), "b:1")
        );
        assert!(r[0].no_primary.is_some());
        assert_eq!(r[0].write_outage, None);
        // The a:1 series is gone, b:1 is primary.
        let page = {
            let reg = Registry::new();
            reg.register(Box::new(m.primary_info.clone())).unwrap();
            format!("{:?}", reg.gather())
        };
        assert!(!page.contains("a:1") && page.contains("b:1"), "{page}");
        m.write_result(Instant::now(), Instant::now(), Ok(()));
        let r = m.between(t0, Instant::now());
        assert!(
            r[0].write_outage.is_some(),
            "the outage is attached to the failover"
        );
        assert_eq!(m.no_primary.get_sample_count(), 1);
        assert_ne!(
            m.primary_back.load(Ordering::Relaxed),
            0,
            "the primary is back"
        );
        // The same primary again after a gap: no failover.
        m.on_topology(None, false);
        m.on_topology(Some("b:1"), false);
        assert_eq!(m.recent(10).len(), 1);
        assert!(!seen.has_changed().unwrap());
    }

    fn insert(lsid: u8, txn: i64) -> Document {
        let id = Binary {
            subtype: BinarySubtype::Uuid,
            bytes: vec![lsid; 16],
        };
        doc! { "insert": "c", "lsid": { "id": id }, "txnNumber": txn }
    }

    #[test]
    fn the_same_session_and_txn_number_again_is_a_retry() {
        let m = FailoverMetrics::new().unwrap();
        let ms = Duration::from_millis(1);
        m.write_started("insert", 1, &insert(1, 5));
        m.write_started("insert", 2, &insert(2, 5));
        m.write_succeeded("insert", 1, ms, &doc! {"ok": 1});
        m.write_started("insert", 3, &insert(1, 6));
        m.write_failed("insert", 3, ms, ErrorKind::Network);
        assert_eq!(m.retried.with_label_values(&["network"]).get(), 0);
        assert!(
            m.ongoing_outage().is_some(),
            "a failed attempt starts an outage"
        );
        m.write_started("insert", 4, &insert(1, 6));
        assert_eq!(m.retried.with_label_values(&["network"]).get(), 1);
        m.write_succeeded("insert", 4, Duration::ZERO, &doc! {"ok": 1});
        assert_eq!(
            m.ongoing_outage(),
            None,
            "the retry's acknowledgement ends it"
        );
        // Statements of a transaction share a number: no retries.
        let mut txn = insert(3, 1);
        txn.insert("autocommit", false);
        m.write_started("insert", 5, &txn);
        m.write_started("insert", 6, &txn);
        // Reads are not looked at.
        m.write_started("find", 7, &insert(2, 5));
        let total: u64 = ErrorKind::ALL
            .iter()
            .map(|k| m.retried.with_label_values(&[k.as_str()]).get())
            .sum();
        assert_eq!(total, 1);
    }
}
