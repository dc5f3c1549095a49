//! A capacity search: the highest open-loop rate at which a workload's
//! thresholds still hold. Probes run at one rate each; a geometric ramp
//! from `from` (× `factor` a probe, never above `to`) until a probe fails,
//! then a bisection between the highest passing and the lowest failing
//! rate until they are within `precision` of each other. A failing probe
//! whose error ratio is above `stop_error_ratio` ends the search at once,
//! so a sick cluster is not hammered further. Pure: the controller runs
//! the probes and hands each verdict to [`Search::record`].

use std::fmt;
use std::time::Duration;

/// How a search runs (a stage's `search = { ... }`).
#[derive(Debug, Clone, PartialEq)]
pub struct SearchSpec {
    /// The first probe's rate (ops/s).
    pub from: f64,
    /// The highest rate probed (ops/s).
    pub to: f64,
    /// The ramp's factor from one probe to the next (> 1).
    pub factor: f64,
    /// The bisection stops when the failing rate is within this share
    /// above the passing one (0.05: 5 %).
    pub precision: f64,
    /// The judged part of a probe, at least (see [`SearchSpec::probe_length`]).
    pub probe: Duration,
    /// And at least this many operations in the judged part.
    pub min_operations: u64,
    /// Run at the new rate before the judged part, not judged.
    pub settle: Duration,
    /// A failing probe with more errors than this ends the search.
    pub stop_error_ratio: f64,
}

/// How long a probe's operations still in flight may take to land in its
/// report before it is judged (without them: failed).
pub(crate) const JUDGE_ALLOWANCE: Duration = Duration::from_secs(5);

/// The defaults a stage's `search` table fills in.
pub(crate) const DEFAULT_FACTOR: f64 = 2.0;
pub(crate) const DEFAULT_PRECISION: f64 = 0.05;
pub(crate) const DEFAULT_PROBE: Duration = Duration::from_secs(30);
pub(crate) const DEFAULT_MIN_OPERATIONS: u64 = 1_000;
pub(crate) const DEFAULT_SETTLE: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_STOP_ERROR_RATIO: f64 = 0.05;

impl SearchSpec {
    /// A spec from `from` to `to` with the defaults.
    pub fn new(from: f64, to: f64) -> SearchSpec {
        SearchSpec {
            from,
            to,
            factor: DEFAULT_FACTOR,
            precision: DEFAULT_PRECISION,
            probe: DEFAULT_PROBE,
            min_operations: DEFAULT_MIN_OPERATIONS,
            settle: DEFAULT_SETTLE,
            stop_error_ratio: DEFAULT_STOP_ERROR_RATIO,
        }
    }

    /// What is wrong with the spec, naming its key, if anything.
    pub fn problem(&self) -> Option<(&'static str, String)> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(self.from) {
            return Some((
                "from",
                format!("must be a positive rate, got {}", self.from),
            ));
        }
        if !positive(self.to) || self.to < self.from {
            return Some((
                "to",
                format!("must be a rate ≥ from ({}), got {}", self.from, self.to),
            ));
        }
        if !(self.factor.is_finite() && self.factor > 1.0) {
            return Some(("factor", format!("must be above 1, got {}", self.factor)));
        }
        if !(self.precision > 0.0 && self.precision < 1.0) {
            return Some((
                "precision",
                format!("must be between 0 and 100 %, got {}", self.precision),
            ));
        }
        if self.probe.is_zero() {
            return Some(("probe", "must be greater than zero".into()));
        }
        if !(self.stop_error_ratio > 0.0 && self.stop_error_ratio <= 1.0) {
            return Some((
                "stop_error_ratio",
                format!(
                    "must be above 0 and at most 100 %, got {}",
                    self.stop_error_ratio
                ),
            ));
        }
        None
    }

    /// A probe's judged length at `rate`: `probe`, or longer so that it
    /// holds `min_operations`.
    pub fn probe_length(&self, rate: f64) -> Duration {
        let for_count = Duration::from_secs_f64(self.min_operations as f64 / rate);
        self.probe.max(for_count)
    }

    /// The most probes a search can take: the ramp's, then the
    /// bisection's from a gap of one factor down to `precision`.
    pub fn max_probes(&self) -> u32 {
        let ramp = ((self.to / self.from).ln() / self.factor.ln())
            .ceil()
            .max(0.0) as u32
            + 1;
        let halvings = ((self.factor - 1.0) / self.precision)
            .log2()
            .ceil()
            .max(0.0) as u32;
        ramp + halvings
    }

    /// The longest a search can take: every probe at its longest (the
    /// lowest rate's), settle included, and [`JUDGE_ALLOWANCE`] after
    /// each for its last operations to land. A stage's duration by default.
    pub fn longest(&self) -> Duration {
        (self.settle + self.probe_length(self.from) + JUDGE_ALLOWANCE)
            .saturating_mul(self.max_probes())
    }
}

impl fmt::Display for SearchSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "search {}..{} ops/s (×{} then halving to {}%), probes of {} after {} settling",
            self.from,
            self.to,
            self.factor,
            self.precision * 100.0,
            humantime::format_duration(self.probe),
            humantime::format_duration(self.settle),
        )
    }
}

/// What one probe found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeResult {
    pub rate: f64,
    pub passed: bool,
    /// Failed over finished operations in the judged part.
    pub error_ratio: f64,
}

/// Why a search ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchEnd {
    /// The passing and failing rates are within `precision`.
    Converged,
    /// `to` passed: the capacity is at least `to`.
    Ceiling,
    /// `from` failed: the capacity is below `from`.
    Floor,
    /// A probe failed with errors above `stop_error_ratio`.
    Stopped,
    /// The stage's duration ran out first.
    OutOfTime,
}

impl SearchEnd {
    pub fn as_str(self) -> &'static str {
        match self {
            SearchEnd::Converged => "converged",
            SearchEnd::Ceiling => "ceiling",
            SearchEnd::Floor => "floor",
            SearchEnd::Stopped => "stopped",
            SearchEnd::OutOfTime => "out_of_time",
        }
    }
}

/// The state of one search.
#[derive(Debug, Clone)]
pub struct Search {
    spec: SearchSpec,
    probes: Vec<ProbeResult>,
    /// The highest passing rate and the lowest failing one so far.
    passing: Option<f64>,
    failing: Option<f64>,
    end: Option<SearchEnd>,
}

impl Search {
    pub fn new(spec: SearchSpec) -> Search {
        Search {
            spec,
            probes: Vec::new(),
            passing: None,
            failing: None,
            end: None,
        }
    }

    pub fn spec(&self) -> &SearchSpec {
        &self.spec
    }

    /// The rate of the next probe; `None` once the search has ended.
    pub fn next_rate(&self) -> Option<f64> {
        if self.end.is_some() {
            return None;
        }
        Some(match (self.passing, self.failing) {
            (None, _) => self.spec.from,
            (Some(p), None) => (p * self.spec.factor).min(self.spec.to),
            (Some(p), Some(f)) => (p + f) / 2.0,
        })
    }

    /// Records the verdict of the probe at `next_rate`.
    pub fn record(&mut self, probe: ProbeResult) {
        self.probes.push(probe);
        if self.end.is_some() {
            return;
        }
        if probe.passed {
            self.passing = Some(self.passing.map_or(probe.rate, |p| p.max(probe.rate)));
        } else {
            self.failing = Some(self.failing.map_or(probe.rate, |f| f.min(probe.rate)));
        }
        self.end = match (self.passing, self.failing) {
            _ if !probe.passed && probe.error_ratio > self.spec.stop_error_ratio => {
                Some(SearchEnd::Stopped)
            }
            (None, Some(_)) => Some(SearchEnd::Floor),
            (Some(p), None) if p >= self.spec.to => Some(SearchEnd::Ceiling),
            (Some(p), Some(f)) if f - p <= p * self.spec.precision => Some(SearchEnd::Converged),
            _ => None,
        };
    }

    /// Ends the search before it converged (the stage ran out of time).
    pub fn out_of_time(&mut self) {
        self.end.get_or_insert(SearchEnd::OutOfTime);
    }

    /// Why it ended, once it has.
    pub fn end(&self) -> Option<SearchEnd> {
        self.end
    }

    /// The capacity found: the highest passing rate (0 when none passed).
    pub fn capacity(&self) -> f64 {
        self.passing.unwrap_or(0.0)
    }

    /// The probes in the order they ran.
    pub fn probes(&self) -> &[ProbeResult] {
        &self.probes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a search against a cluster that passes every rate up to
    /// `knee` and fails above it with `errors` (a ratio).
    fn run(spec: SearchSpec, knee: f64, errors: f64) -> Search {
        let mut s = Search::new(spec);
        while let Some(rate) = s.next_rate() {
            let passed = rate <= knee;
            s.record(ProbeResult {
                rate,
                passed,
                error_ratio: if passed { 0.0 } else { errors },
            });
            assert!(s.probes().len() <= 64, "the search does not end");
        }
        s
    }

    #[test]
    fn the_ramp_doubles_until_a_failure_then_halves_the_gap_to_the_precision() {
        let s = run(SearchSpec::new(500.0, 20_000.0), 2_700.0, 0.0);
        let rates: Vec<f64> = s.probes().iter().map(|p| p.rate).collect();
        assert_eq!(
            rates,
            vec![500.0, 1000.0, 2000.0, 4000.0, 3000.0, 2500.0, 2750.0, 2625.0]
        );
        // 2,750 fails within 5 % of 2,625.
        assert_eq!(s.end(), Some(SearchEnd::Converged));
        assert_eq!(s.capacity(), 2625.0);
        assert!(rates.len() as u32 <= s.spec().max_probes());
    }

    #[test]
    fn the_result_is_within_precision_below_the_knee_for_any_knee() {
        for knee in [120.0, 999.0, 1000.0, 3_333.0, 7_777.0, 15_999.0] {
            let s = run(SearchSpec::new(100.0, 16_000.0), knee, 0.0);
            let c = s.capacity();
            assert!(c <= knee && c >= knee / 1.05, "knee {knee}: {c}");
            assert!(
                s.probes().len() as u32 <= s.spec().max_probes(),
                "knee {knee}"
            );
            assert!(s.probes().iter().all(|p| p.rate <= 16_000.0));
        }
    }

    #[test]
    fn a_search_ends_at_its_ceiling_or_floor() {
        let s = run(SearchSpec::new(100.0, 1_000.0), 5_000.0, 0.0);
        assert_eq!(s.end(), Some(SearchEnd::Ceiling));
        assert_eq!(s.capacity(), 1_000.0);
        assert_eq!(s.probes().last().unwrap().rate, 1_000.0, "never above to");
        let s = run(SearchSpec::new(100.0, 1_000.0), 50.0, 0.0);
        assert_eq!((s.end(), s.capacity()), (Some(SearchEnd::Floor), 0.0));
        assert_eq!(s.probes().len(), 1);
    }

    #[test]
    fn a_probe_failing_with_errors_above_the_limit_stops_the_search_at_once() {
        let s = run(SearchSpec::new(100.0, 10_000.0), 450.0, 0.2);
        assert_eq!(s.end(), Some(SearchEnd::Stopped));
        assert_eq!(s.probes().len(), 4, "100, 200, 400 pass; 800 fails");
        assert_eq!(s.capacity(), 400.0);
        // Errors at the limit or below fail the probe but go on.
        let s = run(SearchSpec::new(100.0, 10_000.0), 450.0, 0.05);
        assert_eq!(s.end(), Some(SearchEnd::Converged));
    }

    #[test]
    fn probes_last_long_enough_for_their_count_and_the_longest_search_is_bounded() {
        let spec = SearchSpec::new(10.0, 1_000.0);
        assert_eq!(spec.probe_length(1_000.0), Duration::from_secs(30));
        assert_eq!(spec.probe_length(10.0), Duration::from_secs(100));
        // 10 → 1,280 in 8 probes, then 5 halvings from 100 % to under 5 %.
        assert_eq!(spec.max_probes(), 13);
        assert_eq!(spec.longest(), Duration::from_secs(115 * 13));
        assert!(spec.problem().is_none());
        let bad = SearchSpec {
            factor: 1.0,
            ..spec.clone()
        };
        assert_eq!(bad.problem().unwrap().0, "factor");
        let bad = SearchSpec { to: 5.0, ..spec };
        assert_eq!(bad.problem().unwrap().0, "to");
    }
}
