//! Fault injection for the simulator: added latency, stalls, error replies,
//! dropped and refused connections. A [`Faults`] handle is shared by the
//! server and whoever holds the [`super::SimHandle`], so a test can change
//! faults while the server runs.

use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};
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
    /// Close new connections as soon as they are accepted.
    pub refuse: bool,
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
}

struct Inner {
    config: RwLock<FaultConfig>,
    /// Fast path: no lock taken while no fault is configured.
    active: AtomicBool,
    /// When the stall was set; stall windows are counted from here.
    stall_anchor: RwLock<Instant>,
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
        let active =
            c.latency.is_some() || c.stall.is_some() || c.error.is_some() || c.drop_rate > 0.0;
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
        if !self.0.active.load(Ordering::Acquire) {
            return Decision::default();
        }
        let c = self.0.config.read().unwrap_or_else(|e| e.into_inner());
        let handshake = is_handshake(command);
        let mut d = Decision::default();
        if !handshake {
            if let Some(l) = &c.latency {
                d.delay = l.sample(rng);
            }
            if c.drop_rate > 0.0 && rng.random::<f64>() < c.drop_rate {
                d.drop = true;
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
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn latency_parses_every_form() {
        assert_eq!(
            "2ms".parse(),
            Ok(LatencyDist::Fixed(Duration::from_millis(2)))
        );
        assert_eq!(
            "fixed:1s".parse(),
            Ok(LatencyDist::Fixed(Duration::from_secs(1)))
        );
        assert_eq!(
            "uniform:1ms..5ms".parse(),
            Ok(LatencyDist::Uniform {
                min: Duration::from_millis(1),
                max: Duration::from_millis(5)
            })
        );
        assert_eq!(
            "exp:2ms".parse(),
            Ok(LatencyDist::Exponential {
                mean: Duration::from_millis(2)
            })
        );
        assert!("uniform:5ms..1ms".parse::<LatencyDist>().is_err());
        assert!("normal:1ms".parse::<LatencyDist>().is_err());
        assert!("fast".parse::<LatencyDist>().is_err());
    }

    #[test]
    fn samples_stay_in_their_distribution() {
        let mut rng = SmallRng::seed_from_u64(1);
        let u = LatencyDist::Uniform {
            min: Duration::from_millis(1),
            max: Duration::from_millis(5),
        };
        let e = LatencyDist::Exponential {
            mean: Duration::from_millis(2),
        };
        let mut sum = Duration::ZERO;
        for _ in 0..10_000 {
            let s = u.sample(&mut rng);
            assert!(s >= Duration::from_millis(1) && s <= Duration::from_millis(5));
            sum += e.sample(&mut rng);
        }
        let mean = sum / 10_000;
        assert!(
            mean > Duration::from_micros(1800) && mean < Duration::from_micros(2200),
            "{mean:?}"
        );
    }

    #[test]
    fn stall_holds_only_inside_its_window() {
        let s: Stall = "1s/10s".parse().unwrap();
        assert_eq!(s.hold(Duration::from_millis(0)), Duration::from_secs(1));
        assert_eq!(
            s.hold(Duration::from_millis(400)),
            Duration::from_millis(600)
        );
        assert_eq!(s.hold(Duration::from_millis(1500)), Duration::ZERO);
        assert_eq!(
            s.hold(Duration::from_millis(10_250)),
            Duration::from_millis(750)
        );
        assert!("2s/1s".parse::<Stall>().is_err());
        assert!("1s".parse::<Stall>().is_err());
    }

    #[test]
    fn errors_respect_rate_and_command_filter() {
        let mut rng = SmallRng::seed_from_u64(2);
        let f = Faults::new(FaultConfig::default());
        assert_eq!(f.decide("insert", &mut rng), Decision::default());
        f.set_error(Some(ErrorFault {
            rate: 1.0,
            code: 10107,
            commands: vec!["insert".into()],
        }));
        assert_eq!(f.decide("insert", &mut rng).error, Some(10107));
        assert_eq!(f.decide("find", &mut rng).error, None);
        assert_eq!(f.decide("hello", &mut rng).error, None);
        f.set_error(Some(ErrorFault {
            rate: 0.5,
            code: 91,
            commands: vec![],
        }));
        let hits = (0..2000)
            .filter(|_| f.decide("find", &mut rng).error.is_some())
            .count();
        assert!((800..1200).contains(&hits), "{hits}");
        f.clear();
        assert_eq!(f.decide("find", &mut rng), Decision::default());
    }
}
