//! Thresholds (k6's model): a condition on a workload's figures, such as
//! `p99 < 50ms` or `error_ratio < 0.001`, optionally for one `op` and one
//! stage, evaluated over a sliding window while the run goes (see
//! [`monitor`]) and over each whole stage at its end (the stage report's
//! verdicts, `report/verdicts.rs`). Everything here but [`monitor`] is pure: parsing,
//! the figures a check reads, the evaluation and the state of a
//! threshold over time ([`Tracker`]), tested with plain values.

pub(crate) mod monitor;

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Exit status of `mongoload run` when a threshold with `abort_on_fail`
/// stopped a workload or the run (k6 uses the same number).
pub(crate) const EXIT_THRESHOLD_ABORT: u8 = 99;

/// What a check reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    /// Response-time percentiles (50th, 99th, 99.9th).
    P50,
    P99,
    P999,
    /// Failed operations over finished ones.
    ErrorRatio,
    /// Successful operations over scheduled ones (ok + errors + missed).
    AchievedRatio,
}

impl Figure {
    fn parse(s: &str) -> Option<Figure> {
        Some(match s {
            "p50" => Figure::P50,
            "p99" => Figure::P99,
            "p999" | "p99.9" => Figure::P999,
            "error_ratio" => Figure::ErrorRatio,
            "achieved_ratio" => Figure::AchievedRatio,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Figure::P50 => "p50",
            Figure::P99 => "p99",
            Figure::P999 => "p999",
            Figure::ErrorRatio => "error_ratio",
            Figure::AchievedRatio => "achieved_ratio",
        }
    }

    fn is_latency(self) -> bool {
        matches!(self, Figure::P50 | Figure::P99 | Figure::P999)
    }
}

/// How a figure is compared with the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cmp {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cmp {
    fn as_str(self) -> &'static str {
        match self {
            Cmp::Lt => "<",
            Cmp::Le => "<=",
            Cmp::Gt => ">",
            Cmp::Ge => ">=",
        }
    }

    fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Cmp::Lt => value < limit,
            Cmp::Le => value <= limit,
            Cmp::Gt => value > limit,
            Cmp::Ge => value >= limit,
        }
    }
}

/// A parsed check: `figure cmp limit`; latency limits in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Check {
    pub figure: Figure,
    pub cmp: Cmp,
    /// Seconds for a latency figure, a ratio (0..=1) otherwise.
    pub limit: f64,
}

impl Check {
    /// Parses `p99 < 50ms`, `p999 < "200ms"`, `error_ratio < 0.001`,
    /// `achieved_ratio > 99%`.
    pub fn parse(text: &str) -> Result<Check, String> {
        let t = text.trim();
        let at = t.find(['<', '>']).ok_or_else(|| {
            format!("expected FIGURE < LIMIT or FIGURE > LIMIT (e.g. p99 < 50ms), got {text:?}")
        })?;
        let (name, rest) = t.split_at(at);
        let (cmp, value) = if let Some(v) = rest.strip_prefix("<=") {
            (Cmp::Le, v)
        } else if let Some(v) = rest.strip_prefix(">=") {
            (Cmp::Ge, v)
        } else if let Some(v) = rest.strip_prefix('<') {
            (Cmp::Lt, v)
        } else {
            (Cmp::Gt, &rest[1..])
        };
        let name = name.trim();
        let figure = Figure::parse(name).ok_or_else(|| {
            format!(
                "unknown figure {name:?}: expected p50, p99, p999, error_ratio or achieved_ratio"
            )
        })?;
        let value = value.trim().trim_matches('"').trim();
        let limit = if figure.is_latency() {
            humantime::parse_duration(value)
                .map_err(|e| {
                    format!("{name}: limit {value:?} is not a duration such as 50ms: {e}")
                })?
                .as_secs_f64()
        } else {
            match crate::config_values::parse_ratio(value) {
                Some(v) if (0.0..=1.0).contains(&v) => v,
                _ => {
                    return Err(format!(
                        "{name}: limit {value:?} is not a ratio between 0 and 1 (or 0% and 100%)"
                    ))
                }
            }
        };
        Ok(Check { figure, cmp, limit })
    }

    /// The value the check compares, or `None` when the figures hold no
    /// operation to judge (no data: neither pass nor fail).
    pub fn value(&self, f: &Figures) -> Option<f64> {
        let finished = f.ok + f.error;
        match self.figure {
            Figure::P50 | Figure::P99 | Figure::P999 if finished == 0 => None,
            Figure::P50 => Some(f.p50.as_secs_f64()),
            Figure::P99 => Some(f.p99.as_secs_f64()),
            Figure::P999 => Some(f.p999.as_secs_f64()),
            Figure::ErrorRatio => (finished > 0).then(|| f.error as f64 / finished as f64),
            Figure::AchievedRatio => {
                let scheduled = finished + f.missed;
                (scheduled > 0).then(|| f.ok as f64 / scheduled as f64)
            }
        }
    }

    /// Whether the figures pass (`None`: no data).
    pub fn passes(&self, f: &Figures) -> Option<bool> {
        self.value(f).map(|v| self.cmp.holds(v, self.limit))
    }
}

impl fmt::Display for Check {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let limit = if self.figure.is_latency() {
            humantime::format_duration(Duration::from_secs_f64(self.limit)).to_string()
        } else {
            format!("{}", self.limit)
        };
        write!(f, "{}{}{}", self.figure.as_str(), self.cmp.as_str(), limit)
    }
}

/// What a threshold with `abort_on_fail` stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AbortScope {
    /// Every workload: the daemon exits.
    #[default]
    Run,
    /// Only the workload the threshold is on.
    Workload,
}

/// One entry of a workload's `thresholds = [...]`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ThresholdConfig {
    /// `p99 < 50ms`, `error_ratio < 0.001`, `achieved_ratio > 0.99`.
    pub check: String,
    /// Only this operation (default: all of the workload's together).
    #[serde(default)]
    pub op: Option<String>,
    /// Only in stages of this name (default: every stage).
    #[serde(default)]
    pub stage: Option<String>,
    /// The sliding window evaluated while the run goes (default 1m).
    #[serde(default = "default_window", with = "humantime_serde")]
    pub window: Duration,
    /// Stop when the threshold fails (after `grace`).
    #[serde(default)]
    pub abort_on_fail: bool,
    /// With `abort_on_fail`: how long it must fail without a break first.
    #[serde(default, with = "humantime_serde")]
    pub grace: Duration,
    /// With `abort_on_fail`: `run` (default) or `workload`.
    #[serde(default)]
    pub abort: AbortScope,
}

fn default_window() -> Duration {
    Duration::from_secs(60)
}

/// A validated threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Threshold {
    /// The `threshold` label: the check, then ` op=…` and ` stage=…`.
    pub name: String,
    pub check: Check,
    pub op: Option<String>,
    pub stage: Option<String>,
    pub window: Duration,
    pub abort_on_fail: bool,
    pub grace: Duration,
    pub abort: AbortScope,
}

impl ThresholdConfig {
    /// Checks the entry against the workload's operation names; errors
    /// name the key relative to the entry (`check`, `op`, `window`).
    pub fn build(&self, ops: &[&str]) -> Result<Threshold, (&'static str, String)> {
        let check = Check::parse(&self.check).map_err(|r| ("check", r))?;
        if let Some(op) = &self.op {
            if !ops.contains(&op.as_str()) {
                return Err((
                    "op",
                    format!(
                        "the workload has no operation {op:?} (it has {})",
                        ops.join(", ")
                    ),
                ));
            }
            if check.figure == Figure::AchievedRatio {
                return Err((
                    "op",
                    "achieved_ratio is the workload's (missed operations have no op): drop op"
                        .to_owned(),
                ));
            }
        }
        if self.window < Duration::from_secs(1) || self.window > Duration::from_secs(3600) {
            return Err((
                "window",
                format!(
                    "must be between 1s and 1h, got {}",
                    humantime::format_duration(self.window)
                ),
            ));
        }
        let mut name = check.to_string();
        if let Some(op) = &self.op {
            name.push_str(&format!(" op={op}"));
        }
        if let Some(stage) = &self.stage {
            name.push_str(&format!(" stage={stage}"));
        }
        Ok(Threshold {
            name,
            check,
            op: self.op.clone(),
            stage: self.stage.clone(),
            window: self.window,
            abort_on_fail: self.abort_on_fail,
            grace: self.grace,
            abort: self.abort,
        })
    }
}

impl Threshold {
    /// Whether the threshold applies in stage `stage`.
    pub fn applies_in(&self, stage: &str) -> bool {
        self.stage.as_deref().is_none_or(|s| s == stage)
    }
}

/// The figures a check reads, over a window or a stage.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    pub ok: u64,
    pub error: u64,
    /// Scheduled and never issued (a workload's figure; 0 for one op).
    pub missed: u64,
    pub p50: Duration,
    pub p99: Duration,
    pub p999: Duration,
}

/// A threshold's verdict on one stage, as the stage report keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThresholdVerdict {
    pub threshold: String,
    /// `pass`, `fail` or `no data` (nothing the check could judge).
    pub verdict: String,
    /// The figure (seconds or ratio); absent with no data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<f64>,
    /// Times the threshold crossed into failure during the stage
    /// (sliding window).
    #[serde(default)]
    pub breaches: u64,
}

impl ThresholdVerdict {
    pub fn failed(&self) -> bool {
        self.verdict == "fail"
    }
}

/// One threshold's state over time: evaluated once a tick with its
/// window's figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Tracker {
    /// The last verdict with data (`None`: none yet).
    pub ok: Option<bool>,
    /// Crossings into failure.
    pub breaches: u64,
    /// When the current failing spell began.
    failing_since: Option<Duration>,
}

/// What one evaluation changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Update {
    /// The threshold crossed: `Some(false)` into failure, `Some(true)`
    /// back to passing (the first verdict counts as a crossing only when
    /// it fails).
    pub crossed: Option<bool>,
    /// `abort_on_fail` and failing for at least its grace.
    pub abort: bool,
}

impl Tracker {
    /// Takes the verdict at time `now` (any monotonic clock); no data
    /// keeps the state.
    pub(crate) fn update(&mut self, t: &Threshold, now: Duration, verdict: Option<bool>) -> Update {
        let Some(ok) = verdict else {
            return Update::default();
        };
        let before = self.ok.replace(ok);
        let crossed = match (before, ok) {
            (Some(true) | None, false) => {
                self.breaches += 1;
                self.failing_since = Some(now);
                Some(false)
            }
            (Some(false), true) => {
                self.failing_since = None;
                Some(true)
            }
            _ => None,
        };
        let abort = t.abort_on_fail
            && !ok
            && self
                .failing_since
                .is_some_and(|since| now.saturating_sub(since) >= t.grace);
        Update { crossed, abort }
    }

    /// Forgets the state (a stage-bound threshold leaving its stage).
    pub(crate) fn reset(&mut self) {
        self.ok = None;
        self.failing_since = None;
    }
}

/// Per-second counts of a workload (or an op) kept for a sliding window:
/// the window's counts are the sum of its last `window` seconds.
#[derive(Debug, Clone, Default)]
pub(crate) struct CountWindow {
    /// (ok, error, missed) per second, oldest first.
    seconds: std::collections::VecDeque<(u64, u64, u64)>,
    last: Option<(u64, u64, u64)>,
}

impl CountWindow {
    /// Takes the cumulative totals at the end of one more second.
    pub(crate) fn push_totals(&mut self, ok: u64, error: u64, missed: u64, keep: usize) {
        let now = (ok, error, missed);
        let delta = match self.last {
            // A counter that went back (a reset) counts from zero.
            Some(l) => (
                ok.checked_sub(l.0).unwrap_or(ok),
                error.checked_sub(l.1).unwrap_or(error),
                missed.checked_sub(l.2).unwrap_or(missed),
            ),
            None => (0, 0, 0),
        };
        if self.last.is_some() {
            self.seconds.push_back(delta);
        }
        self.last = Some(now);
        while self.seconds.len() > keep.max(1) {
            self.seconds.pop_front();
        }
    }

    /// (ok, error, missed) over the last `secs` seconds.
    pub(crate) fn sum(&self, secs: usize) -> (u64, u64, u64) {
        self.seconds
            .iter()
            .rev()
            .take(secs)
            .fold((0, 0, 0), |a, s| (a.0 + s.0, a.1 + s.1, a.2 + s.2))
    }

    /// Forgets the per-second history (keeps the totals it counts from).
    pub(crate) fn clear(&mut self) {
        self.seconds.clear();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn threshold(check: &str) -> Threshold {
        ThresholdConfig {
            check: check.into(),
            op: None,
            stage: None,
            window: Duration::from_secs(60),
            abort_on_fail: false,
            grace: Duration::ZERO,
            abort: AbortScope::Run,
        }
        .build(&["find"])
        .unwrap()
    }

    #[test]
    fn checks_parse_like_k6_and_name_what_is_wrong() {
        let c = Check::parse("p99 < \"50ms\"").unwrap();
        assert_eq!((c.figure, c.cmp, c.limit), (Figure::P99, Cmp::Lt, 0.05));
        assert_eq!(c.to_string(), "p99<50ms");
        let c = Check::parse("achieved_ratio>=99%").unwrap();
        assert_eq!((c.figure, c.cmp), (Figure::AchievedRatio, Cmp::Ge));
        assert!((c.limit - 0.99).abs() < 1e-12);
        assert_eq!(Check::parse("p99.9 < 200ms").unwrap().figure, Figure::P999);
        assert_eq!(
            Check::parse("error_ratio < 0.001").unwrap().to_string(),
            "error_ratio<0.001"
        );
        for (bad, says) in [
            ("p99 50ms", "expected FIGURE"),
            ("p98 < 5ms", "unknown figure \"p98\""),
            ("p99 < fast", "not a duration"),
            ("error_ratio < 2", "between 0 and 1"),
        ] {
            let e = Check::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn config_entries_are_checked_against_the_workload() {
        let mut c = ThresholdConfig {
            check: "p99 < 50ms".into(),
            op: Some("find".into()),
            stage: Some("peak".into()),
            window: Duration::from_secs(60),
            abort_on_fail: false,
            grace: Duration::ZERO,
            abort: AbortScope::Run,
        };
        assert_eq!(
            c.build(&["find"]).unwrap().name,
            "p99<50ms op=find stage=peak"
        );
        let e = c.build(&["insert"]).unwrap_err();
        assert_eq!(e.0, "op");
        assert!(e.1.contains("no operation \"find\""), "{}", e.1);
        c.check = "achieved_ratio > 0.99".into();
        assert_eq!(c.build(&["find"]).unwrap_err().0, "op");
        c.op = None;
        c.window = Duration::ZERO;
        assert_eq!(c.build(&["find"]).unwrap_err().0, "window");
    }

    #[test]
    fn figures_judge_ratios_over_what_was_scheduled() {
        let f = Figures {
            ok: 980,
            error: 10,
            missed: 10,
            p99: Duration::from_millis(40),
            ..Figures::default()
        };
        assert_eq!(threshold("p99 < 50ms").check.passes(&f), Some(true));
        assert_eq!(threshold("p99 < 40ms").check.passes(&f), Some(false));
        assert_eq!(threshold("p99 <= 40ms").check.passes(&f), Some(true));
        // 10 / 990 finished.
        let e = threshold("error_ratio < 0.01").check;
        assert!((e.value(&f).unwrap() - 10.0 / 990.0).abs() < 1e-12);
        assert_eq!(e.passes(&f), Some(false));
        // 980 ok of 1000 scheduled.
        let a = threshold("achieved_ratio > 0.99").check;
        assert_eq!(a.value(&f), Some(0.98));
        assert_eq!(a.passes(&f), Some(false));
        // Nothing finished: no data for latency and errors, but a schedule
        // that only missed achieved nothing.
        let idle = Figures {
            missed: 5,
            ..Figures::default()
        };
        assert_eq!(threshold("p99 < 50ms").check.passes(&idle), None);
        assert_eq!(e.passes(&idle), None);
        assert_eq!(a.passes(&idle), Some(false));
        assert_eq!(a.passes(&Figures::default()), None);
    }

    #[test]
    fn a_tracker_counts_crossings_and_aborts_after_its_grace() {
        let mut t = threshold("p99 < 50ms");
        t.abort_on_fail = true;
        t.grace = Duration::from_secs(3);
        let mut tr = Tracker::default();
        let s = Duration::from_secs;
        // A first pass is no crossing; no data keeps the state.
        assert_eq!(tr.update(&t, s(0), Some(true)), Update::default());
        assert_eq!(tr.update(&t, s(1), None), Update::default());
        // Fails at 2: a crossing, no abort before 5.
        let u = tr.update(&t, s(2), Some(false));
        assert_eq!((u.crossed, u.abort), (Some(false), false));
        assert_eq!(tr.update(&t, s(4), Some(false)), Update::default());
        // Recovers at 4.5 and fails again at 5: the grace starts over.
        assert_eq!(
            tr.update(&t, Duration::from_millis(4500), Some(true))
                .crossed,
            Some(true)
        );
        assert!(!tr.update(&t, s(5), Some(false)).abort);
        assert!(!tr.update(&t, s(7), Some(false)).abort);
        let u = tr.update(&t, s(8), Some(false));
        assert!(u.abort && u.crossed.is_none());
        assert_eq!(tr.breaches, 2);
        // Without abort_on_fail it never aborts.
        t.abort_on_fail = false;
        assert!(!tr.update(&t, s(100), Some(false)).abort);
        // A first verdict that fails is a crossing.
        let mut fresh = Tracker::default();
        assert_eq!(fresh.update(&t, s(0), Some(false)).crossed, Some(false));
        assert_eq!(fresh.breaches, 1);
    }

    #[test]
    fn count_windows_sum_the_last_seconds() {
        let mut w = CountWindow::default();
        w.push_totals(100, 0, 0, 3);
        assert_eq!(w.sum(3), (0, 0, 0));
        w.push_totals(200, 1, 0, 3);
        w.push_totals(300, 1, 5, 3);
        w.push_totals(400, 3, 5, 3);
        w.push_totals(500, 3, 5, 3);
        // Kept: the last 3 seconds.
        assert_eq!(w.sum(10), (300, 2, 5));
        assert_eq!(w.sum(1), (100, 0, 0));
        // A counter reset counts from zero.
        w.push_totals(7, 0, 0, 3);
        assert_eq!(w.sum(1), (7, 0, 0));
    }
}
