//! Fault injection for the simulator: added latency, stalls, error replies,
//! dropped and refused connections. A [`Faults`] handle is shared by the
//! server and whoever holds the [`super::SimHandle`], so a test can change
//! faults while the server runs.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use rand::Rng;
use tokio_util::sync::CancellationToken;

/// Added latency per command.
#[derive(Debug, Clone, PartialEq)]
pub enum LatencyDist {
    /// The same delay every time.
    Fixed(Duration),
    /// Uniform between the bounds.
    Uniform { min: Duration, max: Duration },
    /// Exponential with this mean.
    Exponential { mean: Duration },
}

impl LatencyDist {
    /// Draws one delay.
    pub fn sample(&self, rng: &mut impl Rng) -> Duration {
        match *self {
            LatencyDist::Fixed(d) => d,
            LatencyDist::Uniform { min, max } => {
                if max <= min {
                    min
                } else {
                    min + scale(max - min, rng.random::<f64>())
                }
            }
            LatencyDist::Exponential { mean } => {
                let u: f64 = rng.random();
                // 1 - u is in (0, 1], so the logarithm is finite.
                scale(mean, -(1.0 - u).ln())
            }
        }
    }
}

/// `d * factor`, saturating instead of panicking on overflow.
fn scale(d: Duration, factor: f64) -> Duration {
    Duration::try_from_secs_f64(d.as_secs_f64() * factor).unwrap_or(Duration::MAX)
}

/// A malformed fault option.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("invalid {what} {value:?}: {reason}")]
pub struct FaultParseError {
    what: &'static str,
    value: String,
    reason: String,
}

fn parse_duration(what: &'static str, s: &str) -> Result<Duration, FaultParseError> {
    humantime::parse_duration(s.trim()).map_err(|e| FaultParseError {
        what,
        value: s.to_owned(),
        reason: e.to_string(),
    })
}

impl FromStr for LatencyDist {
    type Err = FaultParseError;

    /// `2ms`, `fixed:2ms`, `uniform:1ms..5ms`, `exp:2ms`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| FaultParseError {
            what: "latency distribution",
            value: s.to_owned(),
            reason: reason.to_owned(),
        };
        match s.split_once(':') {
            None => Ok(LatencyDist::Fixed(parse_duration("latency", s)?)),
            Some(("fixed", d)) => Ok(LatencyDist::Fixed(parse_duration("latency", d)?)),
            Some(("exp", d)) => Ok(LatencyDist::Exponential {
                mean: parse_duration("latency", d)?,
            }),
            Some(("uniform", range)) => {
                let (lo, hi) = range
                    .split_once("..")
                    .ok_or_else(|| err("expected uniform:MIN..MAX"))?;
                let (min, max) = (
                    parse_duration("latency", lo)?,
                    parse_duration("latency", hi)?,
                );
                if min > max {
                    return Err(err("MIN is above MAX"));
                }
                Ok(LatencyDist::Uniform { min, max })
            }
            Some((kind, _)) => Err(err(&format!(
                "unknown kind {kind:?}; expected fixed, uniform or exp"
            ))),
        }
    }
}

/// Hold every reply for `duration` once every `period`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stall {
    pub duration: Duration,
    pub period: Duration,
}

impl FromStr for Stall {
    type Err = FaultParseError;

    /// `1s/10s`: stall for 1 s every 10 s.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = |reason: &str| FaultParseError {
            what: "stall",
            value: s.to_owned(),
            reason: reason.to_owned(),
        };
        let (d, p) = s
            .split_once('/')
            .ok_or_else(|| err("expected DURATION/PERIOD, e.g. 1s/10s"))?;
        let stall = Stall {
            duration: parse_duration("stall", d)?,
            period: parse_duration("stall", p)?,
        };
        if stall.period.is_zero() || stall.duration > stall.period {
            return Err(err("the period must be non-zero and at least the duration"));
        }
        Ok(stall)
    }
}

impl Stall {
    /// How long a reply due at `elapsed` (since the stall was set) is held.
    pub fn hold(&self, elapsed: Duration) -> Duration {
        let period = self.period.as_nanos();
        if period == 0 {
            return Duration::ZERO;
        }
        let phase = Duration::from_nanos((elapsed.as_nanos() % period) as u64);
        self.duration.saturating_sub(phase)
    }
}

/// Error replies at a rate.
#[derive(Debug, Clone, PartialEq)]
pub struct ErrorFault {
    /// Probability per command, 0..=1.
    pub rate: f64,
    /// The MongoDB error code to answer with (e.g. 10107, 91, 112, 50).
    pub code: i32,
    /// Command names the fault applies to; empty means every command except
    /// the handshake (`hello`, `isMaster`, `saslStart`, `saslContinue`)
    /// and `endSessions`.
    pub commands: Vec<String>,
}

/// The whole fault configuration; `Default` is no fault at all.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FaultConfig {
    pub latency: Option<LatencyDist>,
    pub stall: Option<Stall>,
    pub error: Option<ErrorFault>,
    /// Probability per command of closing the connection instead of replying.
    pub drop_rate: f64,
    /// Probability per command of running it, then closing the connection
    /// instead of sending the reply (the reply lost after the write was
    /// applied, which a retryable write's retry must not apply again).
    pub lose_reply_rate: f64,
    /// A server with a capacity (ops/s): every command but the handshake
    /// waits its turn in one FIFO queue and takes an exponentially
    /// distributed service time of mean 1/capacity (an M/M/1 server under
    /// Poisson arrivals), so latency grows as the load nears the capacity
    /// and without bound beyond it (until `maxTimeMS`: 50).
    pub capacity: Option<f64>,
    /// Close new connections as soon as they are accepted.
    pub refuse: bool,
}

/// The faults as the command line gives them (`latency 5ms; errors 10107
/// at 5 % on insert`), for the start-up log line; `none` without any.
impl std::fmt::Display for FaultConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let d = |d: Duration| humantime::format_duration(d).to_string();
        let mut parts = Vec::new();
        if let Some(l) = &self.latency {
            parts.push(match *l {
                LatencyDist::Fixed(x) => format!("latency {}", d(x)),
                LatencyDist::Uniform { min, max } => {
                    format!("latency uniform {}..{}", d(min), d(max))
                }
                LatencyDist::Exponential { mean } => format!("latency exp mean {}", d(mean)),
            });
        }
        if let Some(s) = &self.stall {
            parts.push(format!("stall {} every {}", d(s.duration), d(s.period)));
        }
        if let Some(e) = &self.error {
            let on = match e.commands.is_empty() {
                true => "every command".to_owned(),
                false => e.commands.join(","),
            };
            parts.push(format!("error {} at {}% on {on}", e.code, e.rate * 100.0));
        }
        if self.drop_rate > 0.0 {
            parts.push(format!("drop {}%", self.drop_rate * 100.0));
        }
        if self.lose_reply_rate > 0.0 {
            parts.push(format!("lose reply {}%", self.lose_reply_rate * 100.0));
        }
        if let Some(c) = self.capacity {
            parts.push(format!("capacity {c} ops/s"));
        }
        if self.refuse {
            parts.push("refuse connections".to_owned());
        }
        if parts.is_empty() {
            f.write_str("none")
        } else {
            f.write_str(&parts.join("; "))
        }
    }
}

/// What the server does with one command.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Decision {
    /// Wait this long before answering.
    pub delay: Duration,
    /// Answer with this error code instead of running the command.
    pub error: Option<i32>,
    /// Close the connection without answering.
    pub drop: bool,
    /// Run the command, then close the connection without answering.
    pub lose_reply: bool,
}

/// A fault with a true start and end (see [`Faults::begin`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The server stops reading and answering and accepts nothing;
    /// connections stay open (a VM pause, a stuck disk, SIGSTOP).
    Freeze,
    /// The server is unreachable: new connections hang unanswered in the
    /// kernel's backlog, open ones go silent (nothing read or answered);
    /// a network partition.
    Blackhole,
    /// Every open connection is reset (RST) and new ones are reset as soon
    /// as they are accepted: a crashed process, a firewall rejecting.
    Reset,
    /// Every command but the handshake waits this long more (one slow
    /// member: a slow disk, a noisy neighbour).
    Slow(Duration),
}

impl Fault {
    /// `freeze`, `blackhole`, `reset` or `slow`: the record's kind.
    pub fn name(self) -> &'static str {
        match self {
            Fault::Freeze => "freeze",
            Fault::Blackhole => "blackhole",
            Fault::Reset => "reset",
            Fault::Slow(_) => "slow",
        }
    }

    /// What the server does meanwhile, for the log line.
    fn doing(self) -> String {
        match self {
            Fault::Freeze => "reading and answering nothing".to_owned(),
            Fault::Blackhole => "unreachable: connects hang, open sockets silent".to_owned(),
            Fault::Reset => "connections reset (RST), new ones too".to_owned(),
            Fault::Slow(d) => format!(
                "every command but the handshake {} slower",
                humantime::format_duration(d)
            ),
        }
    }
}

/// One fault as it really happened: its kind, and when it began and ended
/// (wall clock and monotonic), as the simulator logged it.
#[derive(Debug, Clone, PartialEq)]
pub struct FaultRecord {
    /// `freeze`, `blackhole`, `reset` or `slow` ([`Fault::name`]).
    pub kind: &'static str,
    pub started: std::time::SystemTime,
    pub start: Instant,
    /// `None` while the fault lasts.
    pub end: Option<Instant>,
    /// A replica-set primary frozen or blackholed for the election timeout
    /// is replaced: when the other members elected a new primary (`None`:
    /// no election, as for a secondary or a fault shorter than the
    /// timeout).
    pub election: Option<Instant>,
}

impl FaultRecord {
    /// How long it lasted (so far, while it lasts).
    pub fn length(&self) -> Duration {
        self.end
            .unwrap_or_else(Instant::now)
            .saturating_duration_since(self.start)
    }
}

/// Whether the server is silent: frozen or blackholed, connections read
/// and answer nothing and the listener accepts nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Gate {
    pub(crate) frozen: bool,
    pub(crate) blackhole: bool,
}

impl Gate {
    /// Frozen or blackholed: nothing read, answered or accepted.
    pub(crate) fn silent(self) -> bool {
        self.frozen || self.blackhole
    }
}

struct Inner {
    config: RwLock<FaultConfig>,
    /// Frozen or blackholed ([`Gate`]); connections stay open.
    gate: tokio::sync::watch::Sender<Gate>,
    /// Resetting: connections are reset (RST) when accepted.
    reset: AtomicBool,
    /// A slow member's added latency in nanoseconds; 0: not slow.
    slow: AtomicU64,
    /// Every fault with a start and an end, in order.
    records: Mutex<Vec<FaultRecord>>,
    /// Fast path: no lock taken while no fault is configured.
    active: AtomicBool,
    /// When the stall was set; stall windows are counted from here.
    stall_anchor: RwLock<Instant>,
    /// With a capacity: when the queue's server is next free.
    queue: Mutex<Instant>,
    /// Cancelled when the simulator shuts down.
    root: CancellationToken,
    /// A child of `root` that every connection takes a child of; cancelled
    /// and replaced to close every open connection. Each connection waits
    /// on its own child token, so the hot path shares no lock.
    kill: Mutex<CancellationToken>,
}

/// Shared, cloneable handle to the fault configuration of one simulator.
#[derive(Clone)]
pub struct Faults(Arc<Inner>);

impl std::fmt::Debug for Faults {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Faults").field(&self.get()).finish()
    }
}

fn lock<T>(l: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    l.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<T: Clone>(l: &RwLock<T>) -> T {
    l.read().unwrap_or_else(|e| e.into_inner()).clone()
}

impl Faults {
    /// A handle starting from `config`.
    pub fn new(config: FaultConfig) -> Faults {
        let root = CancellationToken::new();
        let f = Faults(Arc::new(Inner {
            config: RwLock::new(FaultConfig::default()),
            active: AtomicBool::new(false),
            stall_anchor: RwLock::new(Instant::now()),
            queue: Mutex::new(Instant::now()),
            gate: tokio::sync::watch::channel(Gate::default()).0,
            reset: AtomicBool::new(false),
            slow: AtomicU64::new(0),
            records: Mutex::new(Vec::new()),
            kill: Mutex::new(root.child_token()),
            root,
        }));
        f.set(config);
        f
    }

    /// The current configuration.
    pub fn get(&self) -> FaultConfig {
        read(&self.0.config)
    }

    /// Replaces the whole configuration.
    pub fn set(&self, config: FaultConfig) {
        self.update(|c| *c = config);
    }

    /// Changes the configuration in place.
    pub fn update(&self, change: impl FnOnce(&mut FaultConfig)) {
        let mut c = self.0.config.write().unwrap_or_else(|e| e.into_inner());
        let old_stall = c.stall;
        change(&mut c);
        if c.stall != old_stall {
            *self
                .0
                .stall_anchor
                .write()
                .unwrap_or_else(|e| e.into_inner()) = Instant::now();
        }
        let active = c.latency.is_some()
            || c.stall.is_some()
            || c.error.is_some()
            || c.drop_rate > 0.0
            || c.lose_reply_rate > 0.0
            || c.capacity.is_some();
        self.0.active.store(active, Ordering::Release);
    }

    /// Removes every fault.
    pub fn clear(&self) {
        self.set(FaultConfig::default());
    }

    pub fn set_latency(&self, latency: Option<LatencyDist>) {
        self.update(|c| c.latency = latency);
    }

    pub fn set_stall(&self, stall: Option<Stall>) {
        self.update(|c| c.stall = stall);
    }

    pub fn set_error(&self, error: Option<ErrorFault>) {
        self.update(|c| c.error = error);
    }

    pub fn set_drop_rate(&self, rate: f64) {
        self.update(|c| c.drop_rate = rate);
    }

    pub fn set_lose_reply_rate(&self, rate: f64) {
        self.update(|c| c.lose_reply_rate = rate);
    }

    /// Gives the server a capacity in ops/s (`None`: unlimited).
    pub fn set_capacity(&self, capacity: Option<f64>) {
        self.update(|c| c.capacity = capacity);
    }

    /// With a capacity: the command's time in the queue and in service,
    /// from now (its place is taken at once, FIFO).
    fn queue(&self, capacity: f64, rng: &mut impl Rng) -> Duration {
        let u: f64 = rng.random();
        let service = Duration::from_secs_f64(-(1.0 - u).ln() / capacity);
        let mut next = lock(&self.0.queue);
        let now = Instant::now();
        let done = (*next).max(now) + service;
        *next = done;
        done - now
    }

    /// Refuse (accept and close at once) new connections, or stop refusing.
    pub fn set_refuse(&self, refuse: bool) {
        self.update(|c| c.refuse = refuse);
    }

    /// Whether new connections are refused.
    pub fn refusing(&self) -> bool {
        self.0
            .config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .refuse
    }

    /// Freezes the server: from now on no connection reads or answers a
    /// message and no connection is accepted (they wait in the kernel's
    /// backlog), until [`Faults::thaw`]; open connections stay open. The
    /// true start is recorded and logged. Returns false if already frozen.
    pub fn freeze(&self) -> bool {
        self.begin(Fault::Freeze)
    }

    /// Ends a freeze: connections read and answer again (the messages that
    /// arrived meanwhile first). The true end is recorded and logged.
    /// Returns false if not frozen.
    pub fn thaw(&self) -> bool {
        self.end(Fault::Freeze)
    }

    /// Makes the server unreachable until [`Faults::end`]: as a freeze,
    /// new connections hang and open ones read and answer nothing; a
    /// replica-set primary is replaced after the election timeout.
    pub fn blackhole(&self) -> bool {
        self.begin(Fault::Blackhole)
    }

    /// Resets every open connection (RST) and every new one until
    /// [`Faults::end`].
    pub fn reset(&self) -> bool {
        self.begin(Fault::Reset)
    }

    /// Makes every command but the handshake `latency` slower until
    /// [`Faults::end`] (on top of `--latency`).
    pub fn slow(&self, latency: Duration) -> bool {
        self.begin(Fault::Slow(latency))
    }

    /// Begins `fault`; its true start is recorded and logged. Returns
    /// false (and changes nothing) if a fault of that kind already lasts.
    pub fn begin(&self, fault: Fault) -> bool {
        let began = match fault {
            Fault::Freeze => self
                .0
                .gate
                .send_if_modified(|g| !std::mem::replace(&mut g.frozen, true)),
            Fault::Blackhole => self
                .0
                .gate
                .send_if_modified(|g| !std::mem::replace(&mut g.blackhole, true)),
            Fault::Reset => !self.0.reset.swap(true, Ordering::AcqRel),
            Fault::Slow(d) => {
                let nanos = (d.as_nanos().min(u64::MAX as u128) as u64).max(1);
                self.0
                    .slow
                    .compare_exchange(0, nanos, Ordering::AcqRel, Ordering::Acquire)
                    .is_ok()
            }
        };
        if began {
            lock(&self.0.records).push(FaultRecord {
                kind: fault.name(),
                started: std::time::SystemTime::now(),
                start: Instant::now(),
                end: None,
                election: None,
            });
            if fault == Fault::Reset {
                self.drop_connections();
            }
            tracing::info!(
                fault = fault.name(),
                "fault {} began: {}",
                fault.name(),
                fault.doing()
            );
        }
        began
    }

    /// Ends the fault of `fault`'s kind (a slow member's latency is
    /// ignored); its true end is recorded and logged. Returns false if no
    /// such fault lasts.
    pub fn end(&self, fault: Fault) -> bool {
        let ended = match fault {
            Fault::Freeze => self
                .0
                .gate
                .send_if_modified(|g| std::mem::replace(&mut g.frozen, false)),
            Fault::Blackhole => self
                .0
                .gate
                .send_if_modified(|g| std::mem::replace(&mut g.blackhole, false)),
            Fault::Reset => self.0.reset.swap(false, Ordering::AcqRel),
            Fault::Slow(_) => self.0.slow.swap(0, Ordering::AcqRel) != 0,
        };
        if ended {
            let now = Instant::now();
            let kind = fault.name();
            let mut records = lock(&self.0.records);
            if let Some(r) = records
                .iter_mut()
                .rev()
                .find(|r| r.kind == kind && r.end.is_none())
            {
                r.end = Some(now);
                let secs = r.length().as_secs_f64();
                tracing::info!(
                    fault = kind,
                    length_s = secs,
                    "fault {kind} ended after {secs:.3}s"
                );
            }
        }
        ended
    }

    /// Whether the server is frozen now.
    pub fn frozen(&self) -> bool {
        self.0.gate.borrow().frozen
    }

    /// Whether the server is blackholed now.
    pub fn blackholed(&self) -> bool {
        self.0.gate.borrow().blackhole
    }

    /// Whether connections are being reset now.
    pub fn resetting(&self) -> bool {
        self.0.reset.load(Ordering::Acquire)
    }

    /// The slow member's added latency now, if slow.
    pub fn slowed(&self) -> Option<Duration> {
        match self.0.slow.load(Ordering::Acquire) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    /// Every fault with a start and an end so far (the simulator's own
    /// record, to compare what a client measured with).
    pub fn records(&self) -> Vec<FaultRecord> {
        lock(&self.0.records).clone()
    }

    /// Notes on the lasting freeze or blackhole that the set elected
    /// another primary now; returns when, if there was one.
    pub(crate) fn record_election(&self) -> Option<Instant> {
        let now = Instant::now();
        let mut records = lock(&self.0.records);
        let r = records.iter_mut().rev().find(|r| {
            matches!(r.kind, "freeze" | "blackhole") && r.end.is_none() && r.election.is_none()
        })?;
        r.election = Some(now);
        let after = now.saturating_duration_since(r.start).as_secs_f64();
        tracing::info!(
            fault = r.kind,
            after_s = after,
            "fault {}: the other members elected a new primary {after:.3}s after it began",
            r.kind
        );
        Some(now)
    }

    /// The silence state (frozen, blackholed), to wait on.
    pub(crate) fn gate(&self) -> tokio::sync::watch::Receiver<Gate> {
        self.0.gate.subscribe()
    }

    /// Returns once the server is neither frozen nor blackholed (at once
    /// when it is not).
    pub(crate) async fn while_silent(&self) {
        if !self.0.gate.borrow().silent() {
            return;
        }
        let mut rx = self.0.gate.subscribe();
        let _ = rx.wait_for(|g| !g.silent()).await;
    }

    /// Closes every connection open now (new ones are unaffected).
    pub fn drop_connections(&self) {
        let mut kill = self.0.kill.lock().unwrap_or_else(|e| e.into_inner());
        kill.cancel();
        *kill = self.0.root.child_token();
    }

    /// The token cancelled when the simulator shuts down.
    pub(crate) fn root(&self) -> &CancellationToken {
        &self.0.root
    }

    /// A token for one new connection: cancelled by shutdown or by
    /// [`Faults::drop_connections`].
    pub(crate) fn connection_token(&self) -> CancellationToken {
        self.0
            .kill
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .child_token()
    }

    /// Decides the fate of one command named `command`.
    pub fn decide(&self, command: &str, rng: &mut impl Rng) -> Decision {
        let handshake = is_handshake(command);
        let slow = match self.slowed() {
            Some(d) if !handshake => d,
            _ => Duration::ZERO,
        };
        if !self.0.active.load(Ordering::Acquire) {
            return Decision {
                delay: slow,
                ..Decision::default()
            };
        }
        let c = self.0.config.read().unwrap_or_else(|e| e.into_inner());
        let mut d = Decision {
            delay: slow,
            ..Decision::default()
        };
        if !handshake {
            if let Some(l) = &c.latency {
                d.delay += l.sample(rng);
            }
            if c.drop_rate > 0.0 && rng.random::<f64>() < c.drop_rate {
                d.drop = true;
            }
            if c.lose_reply_rate > 0.0 && rng.random::<f64>() < c.lose_reply_rate {
                d.lose_reply = true;
            }
            if let Some(capacity) = c.capacity {
                d.delay += self.queue(capacity, rng);
            }
            if let Some(e) = &c.error {
                let applies = if e.commands.is_empty() {
                    true
                } else {
                    e.commands.iter().any(|n| n.eq_ignore_ascii_case(command))
                };
                if applies && e.rate > 0.0 && rng.random::<f64>() < e.rate {
                    d.error = Some(e.code);
                }
            }
        }
        if let Some(s) = c.stall {
            let anchor = read(&self.0.stall_anchor);
            d.delay += s.hold(anchor.elapsed() + d.delay);
        }
        d
    }
}

/// Commands that never get injected latency, errors or drops, so a driver
/// can always connect and monitor (stalls still hold them).
pub fn is_handshake(command: &str) -> bool {
    matches!(
        command,
        "hello" | "isMaster" | "ismaster" | "saslStart" | "saslContinue" | "endSessions"
    )
}

#[cfg(test)]
mod tests;
