//! Schedules: a workload's list of stages over time, and the pure math that
//! turns a stage into intended start times (open loop) or a worker count
//! (closed loop). No clocks here: every function takes an elapsed
//! [`Duration`], so the engine drives it with real time and tests with plain
//! values.
//!
//! A stage has a mode (open loop at a *rate* in operations per second, or
//! closed loop with a *concurrency* of workers), a shape and a duration:
//! - `Hold(level)`: the level for the whole stage;
//! - `Ramp { from, to }`: linear from → to over the stage;
//! - `Steps { levels, each }`: each level in turn for `each`; the stage lasts
//!   `levels.len() × each` (a concurrency sweep such as 3, 6, 15, 25, 50).
//!
//! Open-loop offsets are computed from the operation's index `i` directly
//! (`i / rate` for a hold, the inverse of the integral of the rate for a
//! ramp), never accumulated, so a long stage does not drift.
//!
//! A hold may end after a number of operations instead of a duration
//! ([`Limit`], `operations = N` in the config): in total, or per worker in
//! closed loop. Its duration is then a cap (default [`COUNT_STAGE_CAP`]),
//! and the engine moves the rest of the schedule up when it ends sooner.

pub(crate) mod arrival;
mod offsets;
mod position;
pub(crate) mod search;
pub(crate) mod window;

use offsets::step_bases;

pub use arrival::{Arrival, PoissonPoints};
pub use search::{Search, SearchSpec};

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, Utc};

pub use window::WindowPlan;

const NANOS_PER_SEC: f64 = 1e9;

/// The load a stage asks for at one instant.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Load {
    /// Open loop: operations per second, each with an intended start time.
    Rate(f64),
    /// Closed loop: workers that each issue the next operation when the last
    /// one returns.
    Concurrency(u32),
}

/// Whether a stage is open loop (rate) or closed loop (concurrency).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Levels are operations per second.
    Rate,
    /// Levels are worker counts.
    Concurrency,
}

/// How the level changes over a stage. Levels are ops/s in rate mode and
/// worker counts in concurrency mode.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// One level for the whole stage.
    Hold(f64),
    /// Linear from `from` to `to` over the stage's duration.
    Ramp { from: f64, to: f64 },
    /// Each level in turn, for `each`.
    Steps { levels: Vec<f64>, each: Duration },
}

/// A count-based stage's end: after this many operations in all, or (in
/// closed loop) this many per worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Total(u64),
    PerWorker(u64),
}

/// How long a count-based stage may run at most when no `duration` caps it.
pub const COUNT_STAGE_CAP: Duration = Duration::from_secs(30 * 86_400);

/// Why a stage could not be built. The config layer adds file and key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StageError {
    /// A hold or step level that is not a positive finite number (or, for
    /// concurrency, not a whole number ≥ 1).
    #[error("must be a positive number, got {0}")]
    BadLevel(f64),
    /// A concurrency level that is not a whole number.
    #[error("concurrency must be a whole number, got {0}")]
    FractionalConcurrency(f64),
    /// A ramp end that is negative or not finite, or a ramp from 0 to 0.
    #[error("ramp ends must be ≥ 0 and not both 0, got {from} → {to}")]
    BadRamp { from: f64, to: f64 },
    /// A zero duration (or zero step length).
    #[error("duration must be greater than zero")]
    ZeroDuration,
    /// A steps shape without levels.
    #[error("steps need at least one level")]
    NoSteps,
    /// An operation count on a ramp or steps, a zero count, or a
    /// per-worker count in open loop.
    #[error("{0}")]
    BadLimit(&'static str),
    /// Poisson arrivals on a closed-loop stage.
    #[error("poisson arrivals need rate (open loop): closed-loop workers start when the last operation returns")]
    ArrivalNeedsRate,
    /// A bad key of a search stage's `search` table.
    #[error("search.{0}: {1}")]
    BadSearch(&'static str, String),
    /// A warm-up as long as the stage or longer.
    #[error("warm-up {} must be shorter than the stage ({})", humantime::format_duration(*.warmup), humantime::format_duration(*.duration))]
    WarmupTooLong {
        warmup: Duration,
        duration: Duration,
    },
}

/// One stage of a schedule, validated, with the step boundaries precomputed.
#[derive(Debug, Clone, PartialEq)]
pub struct Stage {
    name: String,
    mode: Mode,
    shape: Shape,
    duration: Duration,
    /// For `Steps` in rate mode: the index of the first operation of each
    /// step, plus the total at the end (len = levels + 1). Empty otherwise.
    step_bases: Vec<u64>,
    /// The start of the stage left out of its report (see [`Stage::with_warmup`]).
    warmup: Duration,
    /// Count-based: the stage ends after this many operations.
    limit: Option<Limit>,
    /// How operations are spaced (open loop).
    arrival: Arrival,
    /// The stage's draw of a Poisson process, for `Arrival::Poisson`.
    poisson: Option<PoissonPoints>,
    /// A capacity search: the controller runs its probes (each a hold at
    /// one rate) instead of the stage's own level (a hold at `from`).
    search: Option<SearchSpec>,
}

impl Stage {
    /// Builds a stage. For `Shape::Steps` the `duration` argument is ignored
    /// and the stage lasts `levels.len() × each`.
    pub fn new(
        name: impl Into<String>,
        mode: Mode,
        shape: Shape,
        duration: Duration,
    ) -> Result<Stage, StageError> {
        let check_level = |l: f64| -> Result<(), StageError> {
            if !(l.is_finite() && l > 0.0) {
                return Err(StageError::BadLevel(l));
            }
            if mode == Mode::Concurrency && l.fract() != 0.0 {
                return Err(StageError::FractionalConcurrency(l));
            }
            if mode == Mode::Concurrency && l > u32::MAX as f64 {
                return Err(StageError::BadLevel(l));
            }
            Ok(())
        };
        let duration = match &shape {
            Shape::Hold(l) => {
                check_level(*l)?;
                duration
            }
            Shape::Ramp { from, to } => {
                let ok = |v: f64| v.is_finite() && v >= 0.0;
                if !ok(*from) || !ok(*to) || (*from == 0.0 && *to == 0.0) {
                    return Err(StageError::BadRamp {
                        from: *from,
                        to: *to,
                    });
                }
                if mode == Mode::Concurrency {
                    for v in [*from, *to] {
                        if v.fract() != 0.0 {
                            return Err(StageError::FractionalConcurrency(v));
                        }
                    }
                }
                duration
            }
            Shape::Steps { levels, each } => {
                if levels.is_empty() {
                    return Err(StageError::NoSteps);
                }
                for l in levels {
                    check_level(*l)?;
                }
                if each.is_zero() {
                    return Err(StageError::ZeroDuration);
                }
                each.saturating_mul(levels.len() as u32)
            }
        };
        if duration.is_zero() {
            return Err(StageError::ZeroDuration);
        }
        Ok(Stage {
            name: name.into(),
            mode,
            step_bases: step_bases(mode, &shape),
            shape,
            duration,
            warmup: Duration::ZERO,
            limit: None,
            arrival: Arrival::Uniform,
            poisson: None,
            search: None,
        })
    }

    /// A capacity search stage (open loop) of at most `duration` (by
    /// default the longest the search can take, [`SearchSpec::longest`]).
    pub fn search(
        name: impl Into<String>,
        spec: SearchSpec,
        duration: Option<Duration>,
    ) -> Result<Stage, StageError> {
        if let Some((key, why)) = spec.problem() {
            return Err(StageError::BadSearch(key, why));
        }
        let duration = duration.unwrap_or_else(|| spec.longest());
        let mut stage = Stage::new(name, Mode::Rate, Shape::Hold(spec.from), duration)?;
        stage.search = Some(spec);
        Ok(stage)
    }

    /// The capacity search this stage runs, if it is one.
    pub fn search_spec(&self) -> Option<&SearchSpec> {
        self.search.as_ref()
    }

    /// Spaces the stage's operations by `arrival`: Poisson arrivals draw
    /// the stage's operations from the seed, at the same mean rate. Only
    /// open loop.
    pub fn with_arrival(mut self, arrival: Arrival) -> Result<Stage, StageError> {
        if matches!(arrival, Arrival::Poisson { .. }) && self.mode != Mode::Rate {
            return Err(StageError::ArrivalNeedsRate);
        }
        self.arrival = arrival;
        self.poisson = match arrival {
            Arrival::Uniform => None,
            Arrival::Poisson { seed } => Some(PoissonPoints::new(seed, self.mass())),
        };
        Ok(self)
    }

    /// How the stage spaces its operations.
    pub fn arrival(&self) -> Arrival {
        self.arrival
    }

    /// The same stage with its Poisson arrivals drawn again from the seed
    /// mixed with `salt` (a cluster member's index: members do not send
    /// their bursts in step). Uniform stages are unchanged.
    pub fn reseeded(self, salt: u64) -> Stage {
        match self.arrival {
            Arrival::Poisson { seed } => {
                let seed = seed ^ salt.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                let mode_ok = self.with_arrival(Arrival::Poisson { seed });
                mode_ok.expect("a Poisson stage is open loop")
            }
            Arrival::Uniform => self,
        }
    }

    /// Shorthand for a hold at a rate.
    pub fn rate(
        name: impl Into<String>,
        rate: f64,
        duration: Duration,
    ) -> Result<Stage, StageError> {
        Stage::new(name, Mode::Rate, Shape::Hold(rate), duration)
    }

    /// Shorthand for a hold at a concurrency.
    pub fn concurrency(
        name: impl Into<String>,
        workers: u32,
        duration: Duration,
    ) -> Result<Stage, StageError> {
        Stage::new(
            name,
            Mode::Concurrency,
            Shape::Hold(workers as f64),
            duration,
        )
    }

    /// The stage's name (the `stage` label of `mongoload_phase_info`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Open or closed loop.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The shape as configured.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// How long the stage lasts.
    pub fn duration(&self) -> Duration {
        self.duration
    }

    /// Declares a warm-up: the first `warmup` of the stage runs and is
    /// exported live but is left out of the stage's report. Fails unless
    /// it is shorter than the stage.
    pub fn with_warmup(mut self, warmup: Duration) -> Result<Stage, StageError> {
        if warmup >= self.duration {
            return Err(StageError::WarmupTooLong {
                warmup,
                duration: self.duration,
            });
        }
        self.warmup = warmup;
        Ok(self)
    }

    /// The warm-up declared with [`Stage::with_warmup`] (zero if none).
    pub fn warmup(&self) -> Duration {
        self.warmup
    }

    /// Makes the stage count-based: it ends after `limit` operations, its
    /// duration being the longest it may take. Only holds; per worker only
    /// in closed loop.
    pub fn with_limit(mut self, limit: Limit) -> Result<Stage, StageError> {
        if !matches!(self.shape, Shape::Hold(_)) {
            return Err(StageError::BadLimit(
                "an operation count needs a constant level (not a ramp or steps)",
            ));
        }
        match limit {
            Limit::Total(0) | Limit::PerWorker(0) => {
                return Err(StageError::BadLimit("must be at least 1"))
            }
            Limit::PerWorker(_) if self.mode == Mode::Rate => {
                return Err(StageError::BadLimit(
                    "per_worker needs concurrency (closed loop): a rate is shared by all workers",
                ))
            }
            _ => {}
        }
        self.limit = Some(limit);
        Ok(self)
    }

    /// The same stage (name, mode, duration, warm-up) with another shape
    /// and count: a cluster member's share of it, whose levels and count
    /// may be 0 (closed loop: fewer workers than members), which a
    /// configured stage may not be. Rate levels must stay positive.
    pub fn reshaped(&self, shape: Shape, limit: Option<Limit>) -> Stage {
        let stage = Stage {
            step_bases: step_bases(self.mode, &shape),
            shape,
            limit,
            ..self.clone()
        };
        // The arrivals are drawn again for the new rate.
        let arrival = stage.arrival;
        stage.clone().with_arrival(arrival).unwrap_or(stage)
    }

    /// The operation count that ends the stage, if count-based.
    pub fn limit(&self) -> Option<Limit> {
        self.limit
    }

    /// A count-based stage's operations in all: the total, or the count
    /// per worker × the stage's workers. `None` for a timed stage.
    pub fn operations_target(&self) -> Option<u64> {
        match self.limit? {
            Limit::Total(n) => Some(n),
            Limit::PerWorker(n) => {
                Some(n.saturating_mul(u64::from(self.concurrency_at(Duration::ZERO))))
            }
        }
    }

    /// The level (ops/s or workers, unrounded) at `elapsed` into the stage,
    /// clamped to the stage's end.
    fn level_at(&self, elapsed: Duration) -> f64 {
        let elapsed = elapsed.min(self.duration);
        match &self.shape {
            Shape::Hold(l) => *l,
            Shape::Ramp { from, to } => {
                let f = elapsed.as_secs_f64() / self.duration.as_secs_f64();
                from + (to - from) * f
            }
            Shape::Steps { levels, each } => {
                let j = (elapsed.as_nanos() / each.as_nanos()) as usize;
                levels[j.min(levels.len() - 1)]
            }
        }
    }

    /// The scheduled rate at `elapsed` into the stage (for the
    /// `mongoload_target_rate` gauge); 0 in concurrency mode.
    pub fn rate_at(&self, elapsed: Duration) -> f64 {
        match self.mode {
            Mode::Rate => self.level_at(elapsed),
            Mode::Concurrency => 0.0,
        }
    }

    /// The scheduled number of workers at `elapsed` into the stage; 0 in rate
    /// mode. A ramp is rounded to the nearest whole worker.
    pub fn concurrency_at(&self, elapsed: Duration) -> u32 {
        match self.mode {
            Mode::Rate => 0,
            Mode::Concurrency => self.level_at(elapsed).round() as u32,
        }
    }

    /// Closed loop: the earliest time into the stage, from `elapsed` on,
    /// at which worker `id` (0-based) is within the level, i.e.
    /// `concurrency_at(t) > id`; `None` when it is not again in this stage
    /// (a hold below it, a falling ramp, open loop). An idle worker sleeps
    /// until then instead of looking again and again.
    pub fn worker_needed_at(&self, id: u32, elapsed: Duration) -> Option<Duration> {
        if self.mode != Mode::Concurrency {
            return None;
        }
        let needed = |t: Duration| self.concurrency_at(t) > id;
        if needed(elapsed) {
            return Some(elapsed);
        }
        let end = self.duration;
        match &self.shape {
            Shape::Hold(_) => None,
            // The first later step whose level reaches the worker.
            Shape::Steps { each, .. } => {
                let from = elapsed.as_nanos() / each.as_nanos() + 1;
                (from..)
                    .map(|j| nanos_to_duration(j * each.as_nanos()))
                    .take_while(|t| *t < end)
                    .find(|t| needed(*t))
            }
            // The level only changes one way: the first nanosecond that
            // needs the worker, by bisection (exact, whatever the rounding).
            Shape::Ramp { .. } => {
                if !needed(end) {
                    return None;
                }
                let (mut lo, mut hi) = (elapsed.as_nanos(), end.as_nanos());
                while hi - lo > 1 {
                    let mid = lo + (hi - lo) / 2;
                    if needed(nanos_to_duration(mid)) {
                        hi = mid;
                    } else {
                        lo = mid;
                    }
                }
                Some(nanos_to_duration(hi))
            }
        }
    }

    /// The load at `elapsed` into the stage.
    pub fn load_at(&self, elapsed: Duration) -> Load {
        match self.mode {
            Mode::Rate => Load::Rate(self.rate_at(elapsed)),
            Mode::Concurrency => Load::Concurrency(self.concurrency_at(elapsed)),
        }
    }

    /// The same stage with every level multiplied by `factor` (runtime
    /// `scale`): same name, mode and duration, so intended start times stay
    /// anchored to the stage's start. Concurrency levels are rounded to
    /// whole workers, at least 1 for holds and steps. `None` when nothing
    /// would run (factor 0, or a ramp scaled to 0 → 0).
    pub fn scaled(&self, factor: f64) -> Option<Stage> {
        if !(factor.is_finite() && factor > 0.0) {
            return None;
        }
        if factor == 1.0 {
            return Some(self.clone());
        }
        // A search sets its own rates; runtime control interrupts it.
        if self.search.is_some() {
            return Some(self.clone());
        }
        let level = |l: f64, min: f64| match self.mode {
            Mode::Rate => l * factor,
            Mode::Concurrency => (l * factor).round().max(min),
        };
        let shape = match &self.shape {
            Shape::Hold(l) => Shape::Hold(level(*l, 1.0)),
            Shape::Ramp { from, to } => Shape::Ramp {
                from: level(*from, 0.0),
                to: level(*to, 0.0),
            },
            Shape::Steps { levels, each } => Shape::Steps {
                levels: levels.iter().map(|l| level(*l, 1.0)).collect(),
                each: *each,
            },
        };
        let stage = Stage::new(self.name.clone(), self.mode, shape, self.duration)
            .and_then(|s| s.with_warmup(self.warmup))
            .and_then(|s| s.with_arrival(self.arrival))
            .ok()?;
        Some(stage.limited_like(self))
    }

    /// This stage with `other`'s operation count, if any: runtime control
    /// changes the level of a count-based stage, not how many operations
    /// it runs (a per-worker count under a rate override becomes the same
    /// total).
    pub fn limited_like(self, other: &Stage) -> Stage {
        let Some(limit) = other.limit else {
            return self;
        };
        let limit = match (limit, self.mode) {
            (Limit::PerWorker(_), Mode::Rate) => {
                Limit::Total(other.operations_target().unwrap_or(1).max(1))
            }
            (l, _) => l,
        };
        self.clone().with_limit(limit).unwrap_or(self)
    }
}
impl fmt::Display for Stage {
    /// One line for check-config and logs, e.g. `warm: rate 500/s for 30s`;
    /// `{:#}` leaves out the duration (`warm: rate 500/s`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.mode {
            Mode::Rate => "/s",
            Mode::Concurrency => " workers",
        };
        let what = match self.mode {
            Mode::Rate => "rate",
            Mode::Concurrency => "concurrency",
        };
        if let Some(spec) = &self.search {
            write!(f, "{}: {spec}", self.name)?;
            if !f.alternate() {
                write!(f, ", at most {}", humantime::format_duration(self.duration))?;
            }
            return Ok(());
        }
        let level = match &self.shape {
            Shape::Hold(l) => format!("{l}{unit}"),
            Shape::Ramp { from, to } => format!("ramp {from} → {to}{unit}"),
            Shape::Steps { levels, each } => {
                let ls: Vec<String> = levels.iter().map(|l| l.to_string()).collect();
                format!(
                    "steps [{}]{unit}, {} each",
                    ls.join(", "),
                    humantime::format_duration(*each)
                )
            }
        };
        write!(f, "{}: {what} {level}", self.name)?;
        match (self.limit, f.alternate()) {
            (Some(Limit::Total(n)), _) => write!(f, " for {n} operations")?,
            (Some(Limit::PerWorker(n)), _) => write!(f, " for {n} operations per worker")?,
            (None, false) => write!(f, " for {}", humantime::format_duration(self.duration))?,
            (None, true) => {}
        }
        if self.limit.is_some() && !f.alternate() {
            write!(
                f,
                " (at most {})",
                humantime::format_duration(self.duration)
            )?;
        }
        if !self.warmup.is_zero() {
            write!(f, " (warm-up {})", humantime::format_duration(self.warmup))?;
        }
        if let Some(p) = &self.poisson {
            write!(f, ", poisson arrivals")?;
            if !f.alternate() {
                write!(f, " ({} operations drawn)", p.count())?;
            }
        }
        Ok(())
    }
}

/// Why a schedule could not be built.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ScheduleError {
    /// A schedule needs at least one stage.
    #[error("a schedule needs at least one stage")]
    Empty,
}

/// A workload's stages in order, played once or repeated forever.
#[derive(Debug, Clone, PartialEq)]
pub struct Schedule {
    stages: Vec<Stage>,
    repeat: bool,
    /// Start offset of each stage within one pass, plus the pass length.
    starts: Vec<Duration>,
    /// Time-of-day windows: when set, the schedule follows wall-clock time
    /// and `stages` holds one nominal stage per window (then the default).
    windows: Option<WindowPlan>,
}

/// The stage that runs now and for how long, as the engine needs it: for a
/// stage list the stage occurrence; for windows the active window's level
/// until the next window change.
#[derive(Debug, Clone, PartialEq)]
pub struct Occurrence {
    /// Index into [`Schedule::stages`]; `None` outside every window when no
    /// default is configured.
    pub index: Option<usize>,
    /// The stage to run (its duration is the occurrence's), `None` to stay
    /// idle until `start + duration`.
    pub stage: Option<Stage>,
    /// Offset of the occurrence's start from the schedule's start.
    pub start: Duration,
    /// How long it lasts.
    pub duration: Duration,
    /// A window's (or the default's) end on the wall clock; `None` for a
    /// stage list. The same for every cluster member, unlike `start`.
    pub until: Option<DateTime<Utc>>,
}

/// One row of [`Schedule::timeline`]: a stage occurrence.
#[derive(Debug, Clone, PartialEq)]
pub struct TimelineEntry {
    /// Offset from the schedule's start.
    pub start: Duration,
    /// Offset of the end (exclusive), clipped to the horizon.
    pub end: Duration,
    /// Which pass of a repeating schedule (0 for the first).
    pub cycle: u64,
    /// Index into [`Schedule::stages`].
    pub stage: usize,
}

impl Schedule {
    /// Builds a schedule from stages (at least one).
    pub fn new(stages: Vec<Stage>, repeat: bool) -> Result<Schedule, ScheduleError> {
        if stages.is_empty() {
            return Err(ScheduleError::Empty);
        }
        let mut starts = Vec::with_capacity(stages.len() + 1);
        let mut t = Duration::ZERO;
        for s in &stages {
            starts.push(t);
            t = t.saturating_add(s.duration());
        }
        starts.push(t);
        Ok(Schedule {
            stages,
            repeat,
            starts,
            windows: None,
        })
    }

    /// A schedule that follows time-of-day windows forever.
    pub fn from_windows(plan: WindowPlan) -> Schedule {
        let stages = plan.stages();
        Schedule {
            starts: vec![Duration::ZERO; stages.len() + 1],
            stages,
            repeat: true,
            windows: Some(plan),
        }
    }

    /// The time-of-day windows, when this schedule follows them.
    pub fn windows(&self) -> Option<&WindowPlan> {
        self.windows.as_ref()
    }

    /// What runs at `elapsed` since the schedule's start, which is the
    /// wall-clock instant `now` (used only by window schedules); `None` once
    /// a non-repeating stage list has ended.
    pub fn occurrence(&self, elapsed: Duration, now: DateTime<Utc>) -> Option<Occurrence> {
        if let Some(plan) = &self.windows {
            let slot = plan.at(now);
            let duration = slot
                .until
                .and_then(|u| (u - now).to_std().ok())
                .filter(|d| !d.is_zero())
                .unwrap_or(window::MAX_SLOT)
                .min(window::MAX_SLOT);
            // A window's level is a hold (or a search): only its length
            // changes with the slot.
            let stage = slot.index.map(|i| Stage {
                duration,
                ..self.stages[i].clone()
            });
            return Some(Occurrence {
                index: slot.index,
                stage,
                start: elapsed,
                duration,
                until: slot.until,
            });
        }
        let (index, start) = self.stage_at(elapsed)?;
        let stage = self.stages[index].clone();
        Some(Occurrence {
            index: Some(index),
            duration: stage.duration(),
            stage: Some(stage),
            start,
            until: None,
        })
    }

    /// The stages in order.
    pub fn stages(&self) -> &[Stage] {
        &self.stages
    }

    /// Whether the stage list repeats forever.
    pub fn repeats(&self) -> bool {
        self.repeat
    }

    /// Length of one pass through the stages.
    pub fn total_duration(&self) -> Duration {
        self.starts[self.stages.len()]
    }

    /// The stage running at `elapsed` since the schedule's start and the
    /// offset (since the schedule's start) at which that stage occurrence
    /// began; `None` once a non-repeating schedule has ended.
    pub fn stage_at(&self, elapsed: Duration) -> Option<(usize, Duration)> {
        let total = self.total_duration();
        let (cycle_start, within) = if elapsed < total {
            (Duration::ZERO, elapsed)
        } else if self.repeat {
            let total_ns = total.as_nanos();
            let cycles = elapsed.as_nanos() / total_ns;
            let start = nanos_to_duration(cycles * total_ns);
            (start, elapsed - start)
        } else {
            return None;
        };
        // The last stage start ≤ within.
        let idx = self.starts[..self.stages.len()].partition_point(|&s| s <= within) - 1;
        Some((idx, cycle_start + self.starts[idx]))
    }

    /// The stage occurrences that overlap `[0, horizon)`, in order; stops at
    /// `max_entries` rows so a repeating schedule of short stages stays
    /// printable.
    pub fn timeline(&self, horizon: Duration, max_entries: usize) -> Vec<TimelineEntry> {
        let mut out = Vec::new();
        let mut cycle = 0u64;
        let mut cycle_start = Duration::ZERO;
        while cycle_start < horizon && out.len() < max_entries {
            for (i, s) in self.stages.iter().enumerate() {
                let start = cycle_start + self.starts[i];
                if start >= horizon || out.len() >= max_entries {
                    break;
                }
                out.push(TimelineEntry {
                    start,
                    end: (start + s.duration()).min(horizon),
                    cycle,
                    stage: i,
                });
            }
            if !self.repeat {
                break;
            }
            cycle += 1;
            cycle_start += self.total_duration();
        }
        out
    }
}

fn nanos_to_duration(n: u128) -> Duration {
    Duration::new((n / 1_000_000_000) as u64, (n % 1_000_000_000) as u32)
}

#[cfg(test)]
mod tests;
