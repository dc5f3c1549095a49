//! Runtime control of running workloads without a restart: pause, resume,
//! set a rate or a concurrency, scale the scheduled level. This module holds
//! the pure parts (the per-workload [`ControlState`], the commands and their
//! line syntax, and [`effective_stage`], which turns a scheduled stage and a
//! control state into what the workers run); [`server`] serves them on a
//! unix socket and [`client`] is what `mongoload ctl` uses.
//!
//! The engine holds a `watch::Receiver<ControlState>` per workload; the
//! daemon keeps the sender and applies commands with
//! [`Command::apply`].

pub mod client;
pub(crate) mod server;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::schedule::{Load, Mode, Shape, Stage};

/// The socket `mongoload ctl` talks to when `--socket` is not given.
pub const DEFAULT_SOCKET: &str = "/run/mongoload/control.sock";

/// The environment variable naming the control socket, for the daemon (it
/// overrides `[control] socket`) and for `mongoload ctl` alike. The generic
/// override's spelling, `MONGOLOAD_CONTROL__SOCKET`, is still accepted by
/// both, with a deprecation warning.
pub const SOCKET_ENV: &str = "MONGOLOAD_CONTROL_SOCKET";

/// The deprecated spelling of [`SOCKET_ENV`].
pub const DEPRECATED_SOCKET_ENV: &str = "MONGOLOAD_CONTROL__SOCKET";

/// Largest accepted `scale` factor: beyond it a typo (`scale w 100`
/// meant as percent) would be a load spike nobody asked for.
pub const MAX_SCALE: f64 = 100.0;

/// Where `mongoload ctl` connects: `$MONGOLOAD_CONTROL_SOCKET`, else
/// [`DEFAULT_SOCKET`].
pub fn default_socket() -> PathBuf {
    let set = |value: Option<std::ffi::OsString>| value.filter(|v| !v.is_empty());
    if let Some(path) = set(std::env::var_os(SOCKET_ENV)) {
        return PathBuf::from(path);
    }
    if let Some(path) = set(std::env::var_os(DEPRECATED_SOCKET_ENV)) {
        eprintln!(
            "mongoload: warning: {DEPRECATED_SOCKET_ENV} is deprecated: set {SOCKET_ENV} instead"
        );
        return PathBuf::from(path);
    }
    PathBuf::from(DEFAULT_SOCKET)
}

/// A rate for people to read: three significant digits at most, no
/// trailing zeros (`13.0042…` → `13`, `55.26` → `55.3`, `0.5` → `0.5`,
/// `1234.6` → `1235`). `ctl status` and systemd's STATUS= line use it.
pub fn fmt_rate(rate: f64) -> String {
    if !rate.is_finite() {
        return rate.to_string();
    }
    let decimals = match rate.abs() {
        r if r >= 100.0 || r == 0.0 => 0,
        r if r >= 10.0 => 1,
        r if r >= 1.0 => 2,
        _ => 3,
    };
    let text = format!("{rate:.decimals$}");
    if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        text
    }
}

/// What an operator has changed on one workload at run time. The default
/// (not paused, no override, scale 1) runs the schedule as configured.
#[derive(Debug, Clone, PartialEq)]
pub struct ControlState {
    /// Workers idle; in-flight operations finish.
    pub paused: bool,
    /// Replaces the scheduled level (and mode): `set-rate` makes the
    /// workload open loop at that rate, `set-concurrency` closed loop with
    /// that many workers, until `reset`.
    pub override_load: Option<Load>,
    /// Multiplies the scheduled level (not an override).
    pub scale: f64,
}

impl Default for ControlState {
    fn default() -> Self {
        ControlState {
            paused: false,
            override_load: None,
            scale: 1.0,
        }
    }
}

impl ControlState {
    /// Whether the schedule runs exactly as configured.
    pub fn is_default(&self) -> bool {
        *self == ControlState::default()
    }
}

impl fmt::Display for ControlState {
    /// One phrase for log lines: `paused, rate 500/s (override), scale 2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if self.paused {
            parts.push("paused".to_string());
        }
        match self.override_load {
            Some(Load::Rate(r)) => parts.push(format!("rate {r}/s (override)")),
            Some(Load::Concurrency(c)) => parts.push(format!("concurrency {c} (override)")),
            None => {}
        }
        if self.scale != 1.0 {
            parts.push(format!("scale {}", self.scale));
        }
        if parts.is_empty() {
            f.write_str("as scheduled")
        } else {
            f.write_str(&parts.join(", "))
        }
    }
}

/// What the workers run during a scheduled stage under `control`: `None`
/// to stay idle (paused, or a level of 0). The result keeps the stage's
/// name and duration, so it is anchored at the stage's start and intended
/// start times re-base by skipping to [`Stage::first_ticket_at`] — no burst
/// for what a pause skipped, no gap.
pub fn effective_stage(stage: &Stage, control: &ControlState) -> Option<Stage> {
    if control.paused {
        return None;
    }
    let overridden = match control.override_load {
        Some(Load::Rate(r)) => {
            Stage::new(stage.name(), Mode::Rate, Shape::Hold(r), stage.duration()).ok()
        }
        Some(Load::Concurrency(c)) => Stage::new(
            stage.name(),
            Mode::Concurrency,
            Shape::Hold(f64::from(c)),
            stage.duration(),
        )
        .ok(),
        None => return stage.scaled(control.scale),
    };
    // A count-based stage keeps its count under an override.
    overridden.map(|s| s.limited_like(stage))
}

crate::family::families! {
    /// The metrics of runtime control and reload, registered beside the
    /// contract's metrics: `mongoload_paused{workload}` (1 while paused) and
    /// `mongoload_config_reloads_total{result}` (`ok` / `error`).
    #[derive(Clone)]
    pub struct ControlMetrics {
        paused: prometheus::IntGaugeVec = "mongoload_paused",
            "1 while the workload is paused through the control socket",
            labels ["workload"];
        reloads: prometheus::IntCounterVec = "mongoload_config_reloads_total",
            "Config reloads (SIGHUP) by result: ok or error",
            labels ["result"];
    }
}

impl ControlMetrics {
    /// Creates the families and registers them in `registry`.
    pub fn register_in(
        registry: &prometheus::Registry,
    ) -> Result<ControlMetrics, prometheus::Error> {
        let m = ControlMetrics::new()?;
        m.register(registry)?;
        // Both results exist from the start, so rate() and alerts see 0.
        for result in ["ok", "error"] {
            m.reloads.with_label_values(&[result]);
        }
        Ok(m)
    }

    /// Sets `mongoload_paused{workload}`.
    pub fn set_paused(&self, workload: &str, paused: bool) {
        self.paused
            .with_label_values(&[workload])
            .set(i64::from(paused));
    }

    /// Removes the workload's series (the workload was removed by a reload).
    pub fn remove(&self, workload: &str) {
        let _ = self.paused.remove_label_values(&[workload]);
    }

    /// Counts one reload attempt.
    pub fn count_reload(&self, ok: bool) {
        self.reloads
            .with_label_values(&[if ok { "ok" } else { "error" }])
            .inc();
    }
}

/// A control request, as `mongoload ctl` takes it on the command line and
/// sends it on the socket: one line of words.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Every workload's stage, targets and control state.
    Status,
    /// Idle the workload's workers.
    Pause(String),
    /// Undo a pause.
    Resume(String),
    /// Open loop at this rate, replacing the scheduled level.
    SetRate(String, f64),
    /// Closed loop with this many workers, replacing the scheduled level.
    SetConcurrency(String, u32),
    /// Multiply the scheduled level.
    Scale(String, f64),
    /// Back to the schedule as configured (clears pause, override, scale).
    Reset(String),
    /// A full pass of the workload's acknowledged-write audit.
    Audit(String),
    /// A command for every member of a cluster (`ctl --all`), its levels
    /// the cluster's totals: handed on through the database.
    All(Box<Command>),
}

/// A request line that is not a command.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ParseError(pub String);

/// The usage line shown with parse errors.
pub const USAGE: &str =
    "status | pause W | resume W | set-rate W N | set-concurrency W N | scale W F | reset W | audit W";

impl FromStr for Command {
    type Err = ParseError;

    fn from_str(line: &str) -> Result<Command, ParseError> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let bad = |why: String| ParseError(format!("{why} (commands: {USAGE})"));
        let Some((&verb, args)) = words.split_first() else {
            return Err(bad("empty request".into()));
        };
        if verb == "all" {
            return match args.join(" ").parse::<Command>()? {
                Command::All(_) => Err(bad("all takes one command".into())),
                c => Ok(Command::All(Box::new(c))),
            };
        }
        let want = |n: usize| -> Result<(), ParseError> {
            if args.len() == n {
                Ok(())
            } else {
                Err(bad(format!(
                    "{verb} takes {n} argument(s), got {}",
                    args.len()
                )))
            }
        };
        let number = |s: &str, what: &str| -> Result<f64, ParseError> {
            match s.parse::<f64>() {
                Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
                _ => Err(ParseError(format!(
                    "{verb}: {what} must be a number ≥ 0, got {s:?}"
                ))),
            }
        };
        let name = || args[0].to_string();
        Ok(match verb {
            "status" => {
                want(0)?;
                Command::Status
            }
            "pause" => {
                want(1)?;
                Command::Pause(name())
            }
            "resume" => {
                want(1)?;
                Command::Resume(name())
            }
            "reset" => {
                want(1)?;
                Command::Reset(name())
            }
            "audit" => {
                want(1)?;
                Command::Audit(name())
            }
            "set-rate" => {
                want(2)?;
                Command::SetRate(name(), number(args[1], "the rate (ops/s)")?)
            }
            "set-concurrency" => {
                want(2)?;
                let n = args[1].parse::<u32>().map_err(|_| {
                    ParseError(format!(
                        "set-concurrency: workers must be a whole number ≥ 0, got {:?}",
                        args[1]
                    ))
                })?;
                Command::SetConcurrency(name(), n)
            }
            "scale" => {
                want(2)?;
                let f = number(args[1], "the factor")?;
                if f > MAX_SCALE {
                    return Err(ParseError(format!(
                        "scale: the factor must be at most {MAX_SCALE}, got {f}"
                    )));
                }
                Command::Scale(name(), f)
            }
            other => return Err(bad(format!("unknown command {other:?}"))),
        })
    }
}

impl fmt::Display for Command {
    /// The request line, the inverse of `FromStr`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::Status => f.write_str("status"),
            Command::Pause(w) => write!(f, "pause {w}"),
            Command::Resume(w) => write!(f, "resume {w}"),
            Command::SetRate(w, r) => write!(f, "set-rate {w} {r}"),
            Command::SetConcurrency(w, n) => write!(f, "set-concurrency {w} {n}"),
            Command::Scale(w, x) => write!(f, "scale {w} {x}"),
            Command::Reset(w) => write!(f, "reset {w}"),
            Command::Audit(w) => write!(f, "audit {w}"),
            Command::All(c) => write!(f, "all {c}"),
        }
    }
}

impl Command {
    /// The workload the command is about (`None` for `status`).
    pub fn workload(&self) -> Option<&str> {
        match self {
            Command::Status => None,
            Command::Pause(w)
            | Command::Resume(w)
            | Command::SetRate(w, _)
            | Command::SetConcurrency(w, _)
            | Command::Scale(w, _)
            | Command::Reset(w)
            | Command::Audit(w) => Some(w),
            Command::All(c) => c.workload(),
        }
    }

    /// Applies the command to a workload's state. `scale` keeps an override
    /// (it multiplies the schedule, which an override replaces); `set-*`
    /// keeps the scale for when the override is reset.
    pub fn apply(&self, state: &mut ControlState) {
        match self {
            Command::Status | Command::Audit(_) => {}
            Command::Pause(_) => state.paused = true,
            Command::Resume(_) => state.paused = false,
            Command::SetRate(_, r) => state.override_load = Some(Load::Rate(*r)),
            Command::SetConcurrency(_, n) => state.override_load = Some(Load::Concurrency(*n)),
            Command::Scale(_, f) => state.scale = *f,
            Command::Reset(_) => *state = ControlState::default(),
            Command::All(c) => c.apply(state),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn cmd(s: &str) -> Result<Command, ParseError> {
        s.parse()
    }

    #[test]
    fn commands_parse_and_print_back() {
        for line in [
            "status",
            "pause mixed",
            "resume mixed",
            "set-rate mixed 2500",
            "set-rate mixed 0.5",
            "set-concurrency mixed 16",
            "scale mixed 1.5",
            "reset mixed",
            "audit mixed",
        ] {
            let c = cmd(line).unwrap();
            assert_eq!(c.to_string(), line);
            assert_eq!(cmd(&c.to_string()), Ok(c));
        }
        assert_eq!(
            cmd("  set-rate   w  100 \n"),
            Ok(Command::SetRate("w".into(), 100.0))
        );
    }

    #[test]
    fn bad_commands_say_why() {
        for (line, why) in [
            ("", "empty request"),
            ("jump w", "unknown command \"jump\""),
            ("pause", "pause takes 1 argument(s), got 0"),
            ("set-rate w", "set-rate takes 2 argument(s), got 1"),
            ("set-rate w fast", "the rate (ops/s) must be a number ≥ 0"),
            ("set-rate w -5", "must be a number ≥ 0"),
            ("set-rate w NaN", "must be a number ≥ 0"),
            ("set-concurrency w 2.5", "whole number"),
            ("scale w 150", "at most 100"),
        ] {
            let e = cmd(line).expect_err(line).to_string();
            assert!(e.contains(why), "{line:?}: {e}");
        }
    }

    #[test]
    fn rates_read_as_people_write_them() {
        for (rate, text) in [
            (13.004_206_094_5, "13"),
            (55.26, "55.3"),
            (0.5, "0.5"),
            (1234.6, "1235"),
            (100.0, "100"),
            (2.333_33, "2.33"),
            (0.012_34, "0.012"),
            (0.0, "0"),
            (99.96, "100"),
        ] {
            assert_eq!(fmt_rate(rate), text, "{rate}");
        }
    }

    #[test]
    fn apply_and_reset() {
        let mut s = ControlState::default();
        assert!(s.is_default());
        assert_eq!(s.to_string(), "as scheduled");
        Command::Pause("w".into()).apply(&mut s);
        Command::Scale("w".into(), 2.0).apply(&mut s);
        Command::SetRate("w".into(), 500.0).apply(&mut s);
        assert_eq!(s.to_string(), "paused, rate 500/s (override), scale 2");
        Command::Resume("w".into()).apply(&mut s);
        assert!(!s.paused);
        assert_eq!(s.override_load, Some(Load::Rate(500.0)));
        Command::Reset("w".into()).apply(&mut s);
        assert!(s.is_default());
    }

    #[test]
    fn effective_stage_follows_the_control_state() {
        let ramp = Stage::new(
            "ramp",
            Mode::Rate,
            Shape::Ramp {
                from: 100.0,
                to: 200.0,
            },
            Duration::from_secs(10),
        )
        .unwrap();
        let mut c = ControlState::default();
        assert_eq!(effective_stage(&ramp, &c).as_ref(), Some(&ramp));

        c.scale = 3.0;
        let e = effective_stage(&ramp, &c).unwrap();
        assert_eq!(e.rate_at(Duration::from_secs(5)), 450.0);
        assert_eq!((e.name(), e.duration()), ("ramp", ramp.duration()));

        c.override_load = Some(Load::Concurrency(7));
        let e = effective_stage(&ramp, &c).unwrap();
        assert_eq!(e.mode(), Mode::Concurrency);
        assert_eq!(e.concurrency_at(Duration::from_secs(9)), 7);

        c.override_load = Some(Load::Rate(0.0));
        assert_eq!(effective_stage(&ramp, &c), None, "rate 0 idles");
        c.override_load = None;
        c.scale = 0.0;
        assert_eq!(effective_stage(&ramp, &c), None, "scale 0 idles");
        c.scale = 1.0;
        c.paused = true;
        assert_eq!(effective_stage(&ramp, &c), None);
    }
}
