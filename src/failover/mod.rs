//! Failover as the load sees it: the primary and its changes (from the
//! driver's SDAM events), the write outage around each failover (from
//! every write's outcome: the workers' requests and, through the pool's
//! checkouts, each attempt of a write, so a failure hidden by the driver's
//! retryable writes still starts an outage), the writes the driver retried,
//! and a log of the failovers for the stage reports and the audits.
//!
//! A **write outage** runs from the first write that fails with an
//! availability error (`not_primary`, `network`, `server_selection`,
//! `timeout`; a write that waited unanswered, `timeout` or
//! `server_selection`, from when it was sent), or from the moment the driver loses the primary if that is
//! earlier, to the first write acknowledged after it. Only writes sent
//! after the outage began can end it (a reply from the old primary to a
//! write sent before does not), and only writes sent after the last outage
//! ended can start one (stragglers of an outage do not start another). A
//! workload that writes rarely adds the wait for its next write.
//!
//! Here: [`clock`] (the outage state machine), [`attempts`] (a write's
//! attempts from the pool's events, their classes from the SDAM events),
//! [`records`] (the failovers seen), and [`Failover`], which the workers
//! and the driver's SDAM events feed and the reports, audits and
//! `/status` read. Its Prometheus families are in
//! [`families`]: `mongoload_write_outage_seconds` (histogram of finished
//! outages), `mongoload_write_outage_ongoing_seconds` (0, or how long the
//! current outage has lasted), `mongoload_write_outage_last_seconds`,
//! `mongoload_no_primary_seconds` (histogram: periods the driver knew no
//! primary), `mongoload_primary_changes_total` (new primaries or new
//! elections), `mongoload_primary_info{primary}` (1 for the current primary),
//! `mongoload_primary_elected_timestamp_seconds`, and
//! `mongoload_retried_writes_total{kind}` (write attempts the driver sent
//! again, by the class of the failure it retried).

pub(crate) mod attempts;
pub(crate) mod clock;
pub(crate) mod driver_events;
mod families;
pub(crate) mod records;
pub(crate) mod shards;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use mongodb::event::sdam::ServerDescriptionChangedEvent;
use prometheus::Registry;
use tokio::sync::watch;

use crate::error_kind::ErrorKind;
use crate::mongo::attempts::Attempts;
pub use attempts::is_write_command;
use attempts::Members;
use clock::OutageClock;
pub use families::FailoverFamilies;
pub use records::FailoverRecord;
use records::PrimaryState;
use shards::{ShardChange, ShardPrimaries};

/// How long after the primary is back an outage begun by its loss, which no
/// write failure confirmed, waits for a write to end it before it is dropped.
pub const UNCONFIRMED_GRACE: Duration = Duration::from_secs(5);

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

/// How the primary the driver knew looks in the topology description that
/// has none (or another): what the line saying it was lost names, and its
/// class for the log limiter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrimaryLoss {
    /// It answers as a secondary (or another non-primary state): it
    /// stepped down, an election follows.
    SteppedDown,
    /// The driver timed out talking to it (a check or a connection): the
    /// member is frozen or unreachable.
    Unreachable,
    /// A connection to it failed (dropped, reset, refused): the driver
    /// cleared its pool and checks it again; often one lost socket, the
    /// same primary back within its 0.5 s minimum heartbeat.
    ConnectionLost,
    /// Anything else (an error reply, or gone from the topology).
    Other,
}

impl PrimaryLoss {
    /// Every class, in limiter order.
    pub const ALL: [PrimaryLoss; 4] = [
        PrimaryLoss::SteppedDown,
        PrimaryLoss::Unreachable,
        PrimaryLoss::ConnectionLost,
        PrimaryLoss::Other,
    ];

    fn class(self) -> usize {
        self as usize
    }

    /// What the loss means, as the log says it.
    pub fn explain(self) -> &'static str {
        match self {
            PrimaryLoss::SteppedDown => "it stepped down: an election",
            PrimaryLoss::Unreachable => {
                "no answer within the timeout: the member frozen or unreachable"
            }
            PrimaryLoss::ConnectionLost => {
                "a connection to it failed (dropped, reset or refused): its pool cleared"
            }
            PrimaryLoss::Other => "the member is unknown to the driver now",
        }
    }
}

/// The tail of a rate-limited line: how many like it were not logged.
fn suppressed(n: u64, what: &str) -> String {
    if n == 0 {
        String::new()
    } else {
        format!(" ({n} more {what} in the last 10s not logged)")
    }
}

/// Log-limiter classes of the failover lines: one per [`PrimaryLoss`]
/// for "lost the primary", one per [`PrimaryLoss`] for "the same primary
/// back, no election".
const LOSS_LINES: usize = PrimaryLoss::ALL.len();

/// Log-limiter classes, after the [`LOSS_LINES`] pairs: the line for a
/// write outage that began (writes fail), and for one that ended with no
/// primary change.
const OUTAGE_START_LINE: usize = 2 * LOSS_LINES;
const OUTAGE_LINE: usize = 2 * LOSS_LINES + 1;

/// Failover as the load sees it, and its log; one per process, fed by the
/// SDAM event handler and by the workers (with their writes' attempts).
pub struct Failover {
    origin: Instant,
    clock: OutageClock,
    /// When the primary came back after a gap (0: none since the last loss).
    primary_back: AtomicU64,
    families: FailoverFamilies,
    state: Mutex<PrimaryState>,
    /// The members' faults from the SDAM events: the class of an attempt
    /// that failed on one ([`attempts`]).
    members: Mutex<Members>,
    /// Whether write attempts are read (`target.command_events`).
    attempts_on: AtomicBool,
    /// The number of failovers seen; audits wait on it.
    failovers: watch::Sender<u64>,
    /// The lines about losing the primary and getting the same one back:
    /// one per class per 10 s (a dropped connection clears the pool and
    /// loses the primary for the 0.5 s minimum heartbeat, which would
    /// otherwise log a line per dropped connection), and so the line for an
    /// outage over with no primary change.
    lines: crate::error_log::LogLimiter,
    /// Through a mongos: each shard's primary ([`shards`]); `watching`:
    /// whether any shard is monitored (write failures are attributed only
    /// then).
    shards: Mutex<ShardPrimaries>,
    watching: AtomicBool,
}

impl Failover {
    pub(crate) fn new() -> Result<Self, prometheus::Error> {
        Ok(Failover {
            origin: Instant::now(),
            clock: OutageClock::default(),
            primary_back: AtomicU64::new(0),
            families: FailoverFamilies::with_series()?,
            state: Mutex::new(PrimaryState::default()),
            members: Mutex::new(Members::default()),
            attempts_on: AtomicBool::new(true),
            failovers: watch::channel(0).0,
            lines: crate::error_log::LogLimiter::new(
                OUTAGE_LINE + 1,
                crate::error_log::LOG_INTERVAL,
            ),
            shards: Mutex::new(ShardPrimaries::default()),
            watching: AtomicBool::new(false),
        })
    }

    /// The failover state, its families registered in `registry` (the
    /// daemon's, beside the other features').
    pub fn register_in(registry: &Registry) -> Result<Arc<Self>, prometheus::Error> {
        let failover = Arc::new(Self::new()?);
        failover.register(registry)?;
        Ok(failover)
    }

    /// Registers the failover families; the ongoing-outage gauge reads
    /// this clock when the registry is gathered.
    fn register(self: &Arc<Self>, registry: &Registry) -> Result<(), prometheus::Error> {
        let me = Arc::downgrade(self);
        self.families.ongoing.set_source(move || {
            me.upgrade()
                .and_then(|f| f.ongoing_outage())
                .map_or(0.0, |d| d.as_secs_f64())
        });
        self.families.register(registry)
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
                let start = outage_start(kind, s, d);
                let watching = self.watching.load(Ordering::Relaxed);
                if self.clock.failed(s, start) {
                    // Through a mongos a shard's election makes many short
                    // router-level outages: the shard's lines tell it.
                    if watching {
                        tracing::debug!(error_kind = %kind, "write outage: writes fail ({kind})");
                    } else if let Some(n) = self.lines.admit(OUTAGE_START_LINE, done) {
                        tracing::warn!(error_kind = %kind, suppressed = n,
                            "write outage: writes fail ({kind}){}", suppressed(n, "such outages"));
                    }
                }
                if watching {
                    let start = self.origin + Duration::from_nanos(start);
                    self.shard_state().failed(start, done);
                }
            }
            Err(_) => {}
        }
    }

    fn outage_ended(&self, start: u64, length: Duration) {
        let secs = length.as_secs_f64();
        self.families.outage.observe(secs);
        self.families.outage_last.set(secs);
        let start = self.origin + Duration::from_nanos(start);
        let mut state = self.state();
        let attached = state.attach_outage(start, length);
        if attached.is_none() && state.lost.is_some() {
            // Acknowledged while the events still say "no primary": the
            // event naming the primary the write reached is on its way.
            state.pending_outage = Some(length);
            return;
        }
        drop(state);
        self.log_outage_over(secs, attached.as_deref());
    }

    /// The line for an outage that ended: by the failover to `primary`, or
    /// with no primary change (one per [`OUTAGE_LINE`] interval: a dropped
    /// connection makes one).
    fn log_outage_over(&self, secs: f64, primary: Option<&str>) {
        if primary.is_none() && self.watching.load(Ordering::Relaxed) {
            tracing::debug!(
                outage_s = mongoload_loglimit::round(secs, 3),
                "write outage over after {secs:.3}s (through a mongos)"
            );
            return;
        }
        match primary {
            Some(primary) => tracing::info!(
                outage_s = mongoload_loglimit::round(secs, 3),
                primary = %primary,
                "write outage over after {secs:.3}s: writes acknowledged by the new primary {primary}"
            ),
            None => {
                if let Some(n) = self.lines.admit(OUTAGE_LINE, Instant::now()) {
                    tracing::info!(
                        outage_s = mongoload_loglimit::round(secs, 3),
                        suppressed = n,
                        "write outage over after {secs:.3}s (no primary change){}",
                        suppressed(n, "such outages")
                    );
                }
            }
        }
    }

    /// The primary the driver knows now.
    pub(crate) fn primary(&self) -> Option<String> {
        self.state().current.clone()
    }

    /// The primary of a new topology description (`changed`: a different
    /// member or a new election than the last primary known).
    /// `loss`: how the last primary looks in this description.
    pub(crate) fn on_topology(&self, primary: Option<&str>, changed: bool, loss: PrimaryLoss) {
        let now = Instant::now();
        if changed && primary.is_some() {
            self.families.primary_changes.inc();
        }
        let state = self.state();
        match primary {
            None => self.primary_lost(state, loss, now),
            Some(p) => self.primary_seen(state, p, changed, now),
        }
    }

    /// The driver knows no primary any more (nothing if it knew none).
    fn primary_lost(
        &self,
        mut state: MutexGuard<'_, PrimaryState>,
        loss: PrimaryLoss,
        now: Instant,
    ) {
        let Some(old) = state.current.take() else {
            return;
        };
        let _ = self.families.primary_info.remove_label_values(&[&old]);
        state.lost = Some((Some(old.clone()), now));
        state.loss = Some(loss);
        drop(state);
        // Writes cannot be acknowledged from here on, whether
        // or not one fails: with streaming monitoring the
        // driver often knows before any write is sent, and
        // writes then wait in server selection instead.
        self.primary_back.store(0, Ordering::Release);
        self.clock.lost_primary(self.ns(now));
        if let Some(n) = self.lines.admit(loss.class(), now) {
            let tail = suppressed(n, "such losses");
            let why = loss.explain();
            if loss == PrimaryLoss::Other {
                // No error behind it: the driver reset its view
                // (the client closing at exit, a new seed list).
                tracing::info!(primary = %old, cause = ?loss, suppressed = n,
                    "the driver lost the primary {old}: {why}{tail}");
            } else {
                tracing::warn!(primary = %old, cause = ?loss, suppressed = n,
                    "the driver lost the primary {old}: {why}{tail}");
            }
        }
    }

    /// The driver knows `p` as the primary: a failover when `changed`
    /// (a new primary or a new election), else the same primary back.
    fn primary_seen(
        &self,
        mut state: MutexGuard<'_, PrimaryState>,
        p: &str,
        changed: bool,
        now: Instant,
    ) {
        if state.current.as_deref() == Some(p) && !changed {
            return;
        }
        if let Some(old) = state.current.take() {
            let _ = self.families.primary_info.remove_label_values(&[&old]);
        }
        self.families.primary_info.with_label_values(&[p]).set(1);
        let gap = state
            .lost
            .take()
            .map(|(_, at)| now.saturating_duration_since(at));
        if let Some(g) = gap {
            self.families.no_primary.observe(g.as_secs_f64());
            self.primary_back
                .store(self.ns(now).max(1), Ordering::Release);
        }
        let from = state.last.replace(p.to_owned());
        state.current = Some(p.to_owned());
        state.current_since = Some(now);
        let loss = state.loss.take();
        let pending = state.pending_outage.take();
        if !changed {
            drop(state);
            self.same_primary_back(p, gap.zip(loss), pending, now);
            return;
        }
        let wall = SystemTime::now();
        self.families.elected_at.set(
            wall.duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        );
        state.push(FailoverRecord {
            at: now,
            wall,
            from: from.clone(),
            to: p.to_owned(),
            no_primary: gap,
            write_outage: pending,
            shard: None,
        });
        drop(state);
        tracing::warn!(
            from = from.as_deref().unwrap_or("-"),
            to = %p,
            no_primary_s = mongoload_loglimit::round(gap.map_or(0.0, |g| g.as_secs_f64()), 3),
            "failover: new primary {p} (was {}){}",
            from.as_deref().unwrap_or("unknown"),
            gap.map_or(String::new(), |g| format!(", {:.3}s without a primary", g.as_secs_f64())),
        );
        if let Some(length) = pending {
            self.log_outage_over(length.as_secs_f64(), Some(p));
        }
        self.failovers.send_modify(|n| *n += 1);
    }

    /// The primary `p` back without an election, after `gap` without one
    /// lost for `loss`: logged, no failover.
    fn same_primary_back(
        &self,
        p: &str,
        gap: Option<(Duration, PrimaryLoss)>,
        pending: Option<Duration>,
        now: Instant,
    ) {
        if let Some(length) = pending {
            self.log_outage_over(length.as_secs_f64(), None);
        }
        if let Some((g, loss)) = gap {
            if let Some(n) = self.lines.admit(LOSS_LINES + loss.class(), now) {
                tracing::info!(
                    primary = %p,
                    cause = ?loss,
                    no_primary_s = g.as_secs_f64(),
                    suppressed = n,
                    "the same primary {p} back after {:.3}s, no election ({:?}){}",
                    g.as_secs_f64(),
                    loss,
                    suppressed(n, "such returns"),
                );
            }
        }
    }

    fn shard_state(&self) -> MutexGuard<'_, ShardPrimaries> {
        self.shards.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Shard `shard`'s monitoring-only client saw `primary` (none: no
    /// primary) in a new topology description; `changed`: a different
    /// member or a new election than the last primary known. A new primary
    /// after the first is a failover on the shard: a record naming it (the
    /// stage reports, `/status`, the audits' `failover` trigger) and its
    /// `shard` series.
    pub fn on_shard_topology(&self, shard: &str, primary: Option<&str>, changed: bool) {
        self.watching.store(true, Ordering::Relaxed);
        let now = Instant::now();
        let change = self.shard_state().topology(shard, primary, changed, now);
        let f = &self.families;
        match change {
            ShardChange::None => {}
            ShardChange::First { primary } => {
                f.shard_primary_info
                    .with_label_values(&[shard, &primary])
                    .set(1);
                f.shard_primary_changes.with_label_values(&[shard]);
                tracing::info!(shard, primary = %primary, "shard {shard}: primary {primary}");
            }
            ShardChange::Lost { old } => {
                let _ = f.shard_primary_info.remove_label_values(&[shard, &old]);
                tracing::warn!(shard, primary = %old, "shard {shard}: no primary (it was {old})");
            }
            ShardChange::Back {
                primary,
                from,
                gap,
                failover,
            } => {
                f.shard_no_primary
                    .with_label_values(&[shard])
                    .observe(gap.as_secs_f64());
                f.shard_primary_info
                    .with_label_values(&[shard, &primary])
                    .set(1);
                if failover {
                    self.shard_failover(shard, from, primary, Some(gap), now);
                } else {
                    tracing::info!(shard, primary = %primary, no_primary_s = mongoload_loglimit::round(gap.as_secs_f64(), 3),
                        "shard {shard}: the same primary {primary} back after {:.3}s, no election", gap.as_secs_f64());
                }
            }
            ShardChange::Changed { from, to } => {
                if let Some(old) = &from {
                    let _ = f.shard_primary_info.remove_label_values(&[shard, old]);
                }
                f.shard_primary_info.with_label_values(&[shard, &to]).set(1);
                self.shard_failover(shard, from, to, None, now);
            }
        }
    }

    fn shard_failover(
        &self,
        shard: &str,
        from: Option<String>,
        to: String,
        gap: Option<Duration>,
        now: Instant,
    ) {
        self.families
            .shard_primary_changes
            .with_label_values(&[shard])
            .inc();
        tracing::warn!(
            shard,
            from = from.as_deref().unwrap_or("-"),
            to = %to,
            no_primary_s = mongoload_loglimit::round(gap.map_or(0.0, |g| g.as_secs_f64()), 3),
            "failover on shard {shard}: new primary {to} (was {}){}",
            from.as_deref().unwrap_or("unknown"),
            gap.map_or(String::new(), |g| format!(", {:.3}s without a primary", g.as_secs_f64())),
        );
        self.state().push(FailoverRecord {
            at: now,
            wall: SystemTime::now(),
            from,
            to,
            no_primary: gap,
            write_outage: None,
            shard: Some(shard.to_owned()),
        });
        self.failovers.send_modify(|n| *n += 1);
    }

    /// Ends the shards' periods without a primary that are over (see
    /// [`shards`]): each write outage attributed to a shard goes to
    /// `mongoload_shard_write_outage_seconds{shard}` and to the shard's
    /// failover record. The shards' monitor calls it every second.
    pub fn settle_shards(&self) {
        let done = self.shard_state().settle(Instant::now());
        for o in done {
            let secs = o.length.as_secs_f64();
            self.families
                .shard_write_outage
                .with_label_values(&[&o.shard])
                .observe(secs);
            self.state().attach_shard_outage(&o.shard, o.back, o.length);
            tracing::info!(
                shard = %o.shard,
                outage_s = mongoload_loglimit::round(secs, 3),
                "shard {}: write outage of {secs:.3}s (from the first failed write routed to it to the last)",
                o.shard
            );
        }
    }

    /// Whether the attempts of each write are read ([`attempts`]):
    /// `target.command_events`, on by default when a workload writes.
    pub fn track_attempts(&self, on: bool) {
        self.attempts_on.store(on, Ordering::Relaxed);
    }

    /// Feeds an SDAM `ServerDescriptionChanged` event: a member's fault
    /// (the error its new description carries, or a primary that stepped
    /// down) is the class of the write attempts that failed on it.
    pub(crate) fn on_server(&self, ev: &ServerDescriptionChangedEvent) {
        let error = ev.new_description.error().map(crate::error_kind::classify);
        self.members().changed(
            &ev.address,
            ev.previous_description.server_type(),
            ev.new_description.server_type(),
            error,
            Instant::now(),
        );
    }

    /// A write request sent at `sent` returned at `done` with `outcome`
    /// after the checkouts in `attempts` (one per attempt the driver sent;
    /// [`attempts`]). With two or more, the driver's retryable writes sent
    /// it again: each earlier attempt failed, counts as a retry by its
    /// class and feeds the outage clock from its sending to the next
    /// attempt's checkout (or to when the driver learnt of the fault, if
    /// that is between). The outcome is the last attempt's; acknowledged,
    /// it is dated from that attempt's sending, so a retry that succeeds
    /// ends the outage its first attempt began. A write concern error is
    /// an error outcome here: no acknowledgement at the concern asked for.
    pub(crate) fn write_done(
        &self,
        sent: Instant,
        done: Instant,
        attempts: &Attempts,
        outcome: Result<(), ErrorKind>,
    ) {
        if !self.attempts_on.load(Ordering::Relaxed) {
            self.write_result(sent, done, outcome);
            return;
        }
        if attempts.count() >= 2 {
            self.hidden_failures(attempts);
        }
        let sent = match (outcome, attempts.last()) {
            (Ok(()), Some(last)) => last.sent.max(sent),
            _ => sent,
        };
        self.write_result(sent, done, outcome);
    }

    /// The attempts before the last of a write the driver sent again:
    /// each failed (see [`Failover::write_done`]). A `not_primary`
    /// refusal by a member the driver had already replaced as primary
    /// when the attempt was sent is not an outage: the route was picked
    /// before the failover (the driver retries the write at the new
    /// primary), and counted, it would start a second outage of about
    /// 0 s after the real one.
    fn hidden_failures(&self, attempts: &Attempts) {
        let n = attempts.count();
        let failed: Vec<_> = {
            let members = self.members();
            (0..n - 1)
                .map(|i| {
                    let a = attempts.get(i)?;
                    let next = attempts.get(i + 1)?;
                    Some((a, next.started, members.fault(&a)))
                })
                .collect()
        };
        for f in failed {
            let Some((a, next, fault)) = f else {
                // Beyond the attempts kept: counted, its class unknown.
                self.count_retry(ErrorKind::Other);
                continue;
            };
            self.count_retry(fault.kind);
            if !is_outage_error(fault.kind) {
                continue;
            }
            let end = fault
                .at
                .filter(|&at| at >= a.sent && at <= next)
                .unwrap_or(next);
            if fault.kind == ErrorKind::NotPrimary
                && fault
                    .address
                    .as_deref()
                    .is_some_and(|addr| self.state().sent_to_replaced_primary(addr, a.sent))
            {
                continue;
            }
            self.write_result(a.sent, end, Err(fault.kind));
        }
    }

    fn count_retry(&self, kind: ErrorKind) {
        self.families
            .retried
            .with_label_values(&[kind.as_str()])
            .inc();
    }

    fn members(&self) -> MutexGuard<'_, Members> {
        self.members.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// How many failovers the driver has seen; changes with each.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.failovers.subscribe()
    }

    /// The failovers whose new primary the driver learnt of in
    /// `[from, to]`, oldest first.
    pub fn between(&self, from: Instant, to: Instant) -> Vec<FailoverRecord> {
        self.state().between(from, to)
    }

    /// The newest failovers (at most `n`), oldest first, for `/status`.
    pub fn recent(&self, n: usize) -> Vec<FailoverRecord> {
        self.state().recent(n)
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

#[cfg(test)]
mod tests;
