//! What the types of the config cannot check: one of `uri` and
//! `uri_file`, names, timeouts, the kinds' parameters, and each workload's
//! schedule (stages or time-of-day windows), built here into the
//! [`Schedule`] the engine runs. Errors carry the full dotted key.

use std::collections::HashMap;
use std::time::Duration;

use super::{
    check_uri_scheme, Config, KeyError, LevelSpec, SecretUri, StageConfig, WindowConfig,
    WorkloadConfig,
};
use crate::schedule::window::{WindowLevel, Windows};
use crate::schedule::{Mode, Schedule, SearchSpec, Shape, Stage, WindowPlan};

impl Config {
    /// Checks what the types alone cannot: one of uri / uri_file, weights,
    /// stages, unique names. Errors carry the full dotted key.
    pub fn validate(&self) -> Result<(), KeyError> {
        self.validate_uri_source()?;
        self.validate_run()?;
        if self.target.database.is_empty()
            || self
                .target
                .database
                .contains(['/', '\\', '.', ' ', '"', '$', '\0'])
        {
            return Err(KeyError::new(
                "target.database",
                format!("not a valid database name: {:?}", self.target.database),
            ));
        }
        self.target.validate_concerns()?;
        if let Some(p) = &self.lag_probe {
            p.validate()?;
        }
        self.validate_timeouts()?;
        self.validate_workloads()
    }

    /// Exactly one of `target.uri` (its scheme and the driver's parse
    /// checked) and a non-empty `target.uri_file`.
    fn validate_uri_source(&self) -> Result<(), KeyError> {
        match (&self.target.uri, &self.target.uri_file) {
            (None, None) => {
                return Err(KeyError::new(
                    "target.uri",
                    "missing: set target.uri or target.uri_file",
                ))
            }
            (Some(_), Some(_)) => {
                return Err(KeyError::new(
                    "target.uri_file",
                    "give either target.uri or target.uri_file, not both",
                ))
            }
            (Some(u), None) => {
                check_uri_scheme(u.expose()).map_err(|r| KeyError::new("target.uri", r))?
            }
            (None, Some(p)) if p.as_os_str().is_empty() => {
                return Err(KeyError::new("target.uri_file", "must not be empty"))
            }
            (None, Some(_)) => {}
        }
        Ok(())
    }

    /// `run.log` a file path, `run.name` a short name safe in a file name.
    fn validate_run(&self) -> Result<(), KeyError> {
        if let Some(log) = &self.run.log {
            if log.as_os_str().is_empty() || log.to_string_lossy().ends_with('/') {
                return Err(KeyError::new(
                    "run.log",
                    format!("must be a file path, got {:?}", log.display().to_string()),
                ));
            }
        }
        if let Some(name) = &self.run.name {
            if name.is_empty()
                || name.len() > 64
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                return Err(KeyError::new(
                    "run.name",
                    format!("must be 1 to 64 letters, digits, '-', '_' or '.', got {name:?}"),
                ));
            }
        }
        Ok(())
    }

    /// The target's timeouts above zero; its shard statistics' interval off
    /// or at least a second.
    fn validate_timeouts(&self) -> Result<(), KeyError> {
        for (key, d) in [
            ("target.connect_timeout", self.target.connect_timeout),
            (
                "target.server_selection_timeout",
                self.target.server_selection_timeout,
            ),
            ("target.operation_timeout", self.target.operation_timeout),
        ] {
            if d.is_zero() {
                return Err(KeyError::new(key, "must be greater than zero"));
            }
        }
        let shard_stats = self.target.shard_stats_interval;
        if !shard_stats.is_zero() && shard_stats < Duration::from_secs(1) {
            return Err(KeyError::new(
                "target.shard_stats_interval",
                format!(
                    "must be 0 (off) or at least 1s, not {}",
                    humantime::format_duration(shard_stats)
                ),
            ));
        }
        Ok(())
    }

    /// At least one workload, each valid (its errors under
    /// `workloads[i].`), no two with the same name.
    fn validate_workloads(&self) -> Result<(), KeyError> {
        if self.workloads.is_empty() {
            return Err(KeyError::new(
                "workloads",
                "at least one [[workloads]] is required",
            ));
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, w) in self.workloads.iter().enumerate() {
            let uri = self.target.uri.as_ref().map(SecretUri::expose);
            w.validate()
                .and_then(|()| w.validate_concerns())
                .and_then(|()| w.validate_audit(&self.target, uri))
                .map_err(|e| KeyError {
                    key: format!("workloads[{i}].{}", e.key),
                    reason: e.reason,
                })?;
            if let Some(first) = seen.insert(w.name.as_str(), i) {
                return Err(KeyError::new(
                    format!("workloads[{i}].name"),
                    format!(
                        "duplicate workload name {:?} (also workloads[{first}])",
                        w.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The connections the plan can use at once: the sum over workloads of
    /// their peak concurrency. The driver's pool is sized to this when
    /// `target.pool_size` is 0.
    pub fn planned_connections(&self) -> u32 {
        self.workloads
            .iter()
            .map(WorkloadConfig::peak_concurrency)
            .fold(0u32, u32::saturating_add)
    }

    /// The pool size to give the driver: `target.pool_size`, or the planned
    /// connections when that is 0 (at least 1).
    pub fn effective_pool_size(&self) -> u32 {
        if self.target.pool_size > 0 {
            self.target.pool_size
        } else {
            self.planned_connections().max(1)
        }
    }
}

impl WorkloadConfig {
    /// Builds the schedule. Errors carry the key relative to this workload
    /// (`stages[1].rate`).
    pub fn schedule(&self) -> Result<Schedule, KeyError> {
        if !self.windows.is_empty() {
            return self.window_schedule();
        }
        for (key, set) in [
            ("default", self.default.is_some()),
            ("timezone", self.timezone.is_some()),
        ] {
            if set {
                return Err(KeyError::new(key, "only used with windows"));
            }
        }
        if self.stages.is_empty() {
            return Err(KeyError::new("stages", "at least one stage is required"));
        }
        let stages = self
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| s.build(i, self.seed.unwrap_or(0)))
            .collect::<Result<Vec<_>, _>>()?;
        Schedule::new(stages, self.repeat).map_err(|e| KeyError::new("stages", e.to_string()))
    }

    /// The time-of-day schedule of `windows`, `default` and `timezone`.
    fn window_schedule(&self) -> Result<Schedule, KeyError> {
        if !self.stages.is_empty() {
            return Err(KeyError::new(
                "windows",
                "give either stages or windows, not both",
            ));
        }
        if self.repeat {
            return Err(KeyError::new(
                "repeat",
                "not used with windows: they repeat forever",
            ));
        }
        let tz = Windows::parse_tz(self.timezone.as_deref().unwrap_or("UTC"))
            .map_err(|r| KeyError::new("timezone", r))?;
        let mut windows = Vec::with_capacity(self.windows.len());
        for (i, w) in self.windows.iter().enumerate() {
            let at = format!("windows[{i}]");
            let Some(when) = &w.when else {
                return Err(KeyError::new(format!("{at}.when"), "is required"));
            };
            let window: crate::schedule::window::Window = when
                .parse()
                .map_err(|r: String| KeyError::new(format!("{at}.when"), r))?;
            let level = w.level(&at, when.trim())?;
            if let Some(spec) = &level.search {
                if spec.longest() > window.length() {
                    return Err(KeyError::new(
                        format!("{at}.search"),
                        format!(
                            "the window is open for {}, and this search may take up to {} ({} probes of up to {} each, with settle time and judging): widen the window, or narrow from and to, or shorten probe or settle",
                            humantime::format_duration(window.length()),
                            humantime::format_duration(spec.longest()),
                            spec.max_probes(),
                            humantime::format_duration(spec.settle + spec.probe_length(spec.from) + crate::schedule::search::JUDGE_ALLOWANCE),
                        ),
                    ));
                }
            }
            windows.push((window, level));
        }
        let default = match &self.default {
            Some(d) if d.when.is_some() => {
                return Err(KeyError::new(
                    "default.when",
                    "the default applies outside every window; it has no when",
                ))
            }
            Some(d) => Some(d.level("default", "default")?),
            None => None,
        };
        let plan = WindowPlan::new(tz, windows, default).map_err(|(i, e)| {
            let key = match i {
                Some(i) => self.windows[i].level_key(&format!("windows[{i}]")),
                None => self
                    .default
                    .as_ref()
                    .map_or("default".into(), |d| d.level_key("default")),
            };
            KeyError::new(key, e.to_string())
        })?;
        Ok(Schedule::from_windows(plan))
    }

    /// The most workers or in-flight operations this workload's plan can
    /// use at once: `max_inflight` if any stage is open loop, and the largest
    /// concurrency level of its closed-loop stages.
    pub fn peak_concurrency(&self) -> u32 {
        let mut peak = 0u32;
        for s in &self.stages {
            match (&s.rate, &s.concurrency) {
                (Some(_), _) => peak = peak.max(self.max_inflight),
                _ if s.search.is_some() => peak = peak.max(self.max_inflight),
                (None, Some(c)) => {
                    let top = match c {
                        LevelSpec::Hold(v) => *v,
                        LevelSpec::Ramp { from, to } => from.max(*to),
                        LevelSpec::Steps { steps, .. } => steps.iter().copied().fold(0.0, f64::max),
                    };
                    peak = peak.max(top.clamp(0.0, u32::MAX as f64) as u32);
                }
                (None, None) => {}
            }
        }
        for w in self.windows.iter().chain(&self.default) {
            match (w.rate, w.concurrency) {
                (Some(_), _) => peak = peak.max(self.max_inflight),
                (None, Some(c)) => peak = peak.max(c.clamp(0.0, u32::MAX as f64) as u32),
                (None, None) => {}
            }
        }
        peak
    }

    fn validate(&self) -> Result<(), KeyError> {
        if self.name.trim().is_empty() {
            return Err(KeyError::new("name", "must not be empty"));
        }
        if self.max_inflight == 0 {
            return Err(KeyError::new("max_inflight", "must be at least 1, got 0"));
        }
        if self.max_lag.is_zero() {
            return Err(KeyError::new("max_lag", "must be greater than zero"));
        }
        super::check_workers(self)?;
        if let Some(table) = self.stray_tables.first() {
            return Err(KeyError::new(
                *table,
                format!(
                    "parameters of another kind than this workload's {:?}; its table is [workloads.{}]",
                    self.kind.name(),
                    self.kind.table()
                ),
            ));
        }
        self.kind.validate()?;
        self.shard_plan()?;
        let schedule = self.schedule()?;
        let thresholds = self.thresholds()?;
        // A search judges its probes by the thresholds of its stage.
        for (i, stage) in schedule.stages().iter().enumerate() {
            if stage.search_spec().is_some()
                && !thresholds.iter().any(|t| t.applies_in(stage.name()))
            {
                let key = match (self.windows.is_empty(), i < self.windows.len()) {
                    (true, _) => format!("stages[{i}].search"),
                    (false, true) => format!("windows[{i}].search"),
                    (false, false) => "default.search".to_owned(),
                };
                return Err(KeyError::new(
                    key,
                    format!(
                        "needs at least one threshold that applies in stage {:?} (thresholds without a stage, or with stage = {:?}): the search judges each probe by them",
                        stage.name(),
                        stage.name()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// How the workload's collections are sharded (`shard_key`,
    /// `presplit`), `None` unsharded; errors name the key.
    pub fn shard_plan(&self) -> Result<Option<crate::workload::shard::ShardPlan>, KeyError> {
        crate::workload::shard::plan(
            self.shard_key.as_ref(),
            self.presplit,
            self.key_shape(),
            self.kind.name(),
        )
    }

    /// What the kind's key generator says of the shard key's first field.
    fn key_shape(&self) -> crate::workload::shard::KeyShape {
        match &self.shard_key {
            Some(k) => self.kind.params().key_shape(k.first()),
            None => crate::workload::shard::KeyShape::Unknown,
        }
    }

    /// The warning for a ranged shard key whose first field the kind's
    /// inserts only grow (every insert lands on one shard).
    pub fn shard_warning(&self) -> Option<String> {
        let key = self.shard_key.as_ref()?;
        crate::workload::shard::grows_warning(&self.name, key, self.key_shape(), self.kind.name())
    }

    /// The validated thresholds, checked against the kind's operations;
    /// errors name `thresholds[i].<key>`.
    pub fn thresholds(&self) -> Result<Vec<crate::threshold::Threshold>, KeyError> {
        if self.thresholds.is_empty() {
            return Ok(Vec::new());
        }
        let workload = self.kind.build(0)?;
        let ops = workload.op_names();
        let mut out: Vec<crate::threshold::Threshold> = Vec::new();
        for (i, t) in self.thresholds.iter().enumerate() {
            let built = t
                .build(&ops)
                .map_err(|(key, reason)| KeyError::new(format!("thresholds[{i}].{key}"), reason))?;
            if let Some(j) = out.iter().position(|o| o.name == built.name) {
                return Err(KeyError::new(
                    format!("thresholds[{i}].check"),
                    format!("the same threshold as thresholds[{j}] ({})", built.name),
                ));
            }
            out.push(built);
        }
        Ok(out)
    }
}

impl WindowConfig {
    /// The level; `at` is the key prefix for errors (`windows[0]`).
    fn level(&self, at: &str, default_name: &str) -> Result<WindowLevel, KeyError> {
        let (mode, level) = match (self.rate, self.concurrency, &self.search) {
            (Some(r), None, None) => (Mode::Rate, r),
            (None, Some(c), None) => (Mode::Concurrency, c),
            (None, None, Some(search)) => (Mode::Rate, search.from),
            (None, None, None) => {
                return Err(KeyError::new(
                    at,
                    "needs rate (open loop), concurrency (closed loop) or search (a capacity search)",
                ))
            }
            _ => {
                return Err(KeyError::new(
                    at,
                    "give one of rate (open loop), concurrency (closed loop) and search (a capacity search)",
                ))
            }
        };
        let search = match &self.search {
            Some(s) => Some(search_spec(&format!("{at}.search"), s)?),
            None => None,
        };
        let name = match &self.name {
            Some(n) if n.trim().is_empty() => {
                return Err(KeyError::new(format!("{at}.name"), "must not be empty"))
            }
            Some(n) => n.clone(),
            None => default_name.to_string(),
        };
        Ok(WindowLevel {
            name,
            mode,
            level,
            search,
        })
    }

    fn level_key(&self, at: &str) -> String {
        if self.search.is_some() {
            format!("{at}.search")
        } else if self.rate.is_some() {
            format!("{at}.rate")
        } else {
            format!("{at}.concurrency")
        }
    }
}

/// A `search` table as a search, with the defaults filled in; `at` is its
/// key (`stages[2].search`, `windows[0].search`) for errors.
fn search_spec(at: &str, search: &super::SearchConfig) -> Result<SearchSpec, KeyError> {
    let ratio = |key: &str, r: &Option<super::RatioSpec>, default: f64| match r {
        Some(r) => r
            .value()
            .map_err(|e| KeyError::new(format!("{at}.{key}"), e)),
        None => Ok(default),
    };
    use crate::schedule::search as s;
    let spec = SearchSpec {
        from: search.from,
        to: search.to,
        factor: search.factor.unwrap_or(s::DEFAULT_FACTOR),
        precision: ratio("precision", &search.precision, s::DEFAULT_PRECISION)?,
        probe: search.probe.unwrap_or(s::DEFAULT_PROBE),
        min_operations: search.min_operations.unwrap_or(s::DEFAULT_MIN_OPERATIONS),
        settle: search.settle.unwrap_or(s::DEFAULT_SETTLE),
        stop_error_ratio: ratio(
            "stop_error_ratio",
            &search.stop_error_ratio,
            s::DEFAULT_STOP_ERROR_RATIO,
        )?,
    };
    match spec.problem() {
        Some((key, why)) => Err(KeyError::new(format!("{at}.{key}"), why)),
        None => Ok(spec),
    }
}

impl StageConfig {
    /// The stage's name: the configured one or `stage-N`.
    pub fn display_name(&self, index: usize) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("stage-{}", index + 1))
    }

    fn build(&self, index: usize, seed: u64) -> Result<Stage, KeyError> {
        let at = |k: &str| format!("stages[{index}].{k}");
        let stage = self.build_level(index)?;
        match self.arrival {
            Some(super::ArrivalConfig::Poisson) => {
                // Each stage its own draw: the workload's seed and the index.
                let seed = seed ^ (index as u64 + 1).wrapping_mul(0xa076_1d64_78bd_642f);
                stage
                    .with_arrival(crate::schedule::Arrival::Poisson { seed })
                    .map_err(|e| KeyError::new(at("arrival"), e.to_string()))
            }
            Some(super::ArrivalConfig::Uniform) | None => Ok(stage),
        }
    }

    /// A capacity search stage: `search` with nothing of a level stage's.
    fn build_search(&self, index: usize, search: &super::SearchConfig) -> Result<Stage, KeyError> {
        let at = |k: &str| format!("stages[{index}].{k}");
        let unused = [
            ("rate", self.rate.is_some()),
            ("concurrency", self.concurrency.is_some()),
            ("operations", self.operations.is_some()),
            ("per_worker", self.per_worker),
            ("warmup", self.warmup.is_some()),
            ("arrival", self.arrival.is_some()),
        ];
        if let Some((key, _)) = unused.iter().find(|(_, set)| *set) {
            return Err(KeyError::new(
                at(key),
                "not used with search: the search sets each probe's rate (open loop, uniform) and leaves out its settle time",
            ));
        }
        let spec = search_spec(&at("search"), search)?;
        Stage::search(self.display_name(index), spec, self.duration).map_err(|e| match e {
            crate::schedule::StageError::BadSearch(key, why) => {
                KeyError::new(at(&format!("search.{key}")), why)
            }
            e => KeyError::new(at("duration"), e.to_string()),
        })
    }

    fn build_level(&self, index: usize) -> Result<Stage, KeyError> {
        let at = |k: &str| format!("stages[{index}].{k}");
        if let Some(search) = &self.search {
            return self.build_search(index, search);
        }
        let (mode, field, spec) = match (&self.rate, &self.concurrency) {
            (Some(r), None) => (Mode::Rate, "rate", r),
            (None, Some(c)) => (Mode::Concurrency, "concurrency", c),
            (Some(_), Some(_)) => {
                return Err(KeyError::new(
                    format!("stages[{index}]"),
                    "give either rate (open loop) or concurrency (closed loop), not both",
                ))
            }
            (None, None) => return Err(KeyError::new(
                format!("stages[{index}]"),
                "needs rate (open loop), concurrency (closed loop) or search (a capacity search)",
            )),
        };
        if let Some(n) = &self.name {
            if n.trim().is_empty() {
                return Err(KeyError::new(at("name"), "must not be empty"));
            }
        }
        let (shape, duration) = match spec {
            LevelSpec::Hold(v) => (Shape::Hold(*v), self.duration),
            LevelSpec::Ramp { from, to } => (
                Shape::Ramp {
                    from: *from,
                    to: *to,
                },
                self.duration,
            ),
            LevelSpec::Steps { steps, each } => {
                if self.duration.is_some() {
                    return Err(KeyError::new(
                        at("duration"),
                        "not used with steps: the stage lasts steps × each",
                    ));
                }
                (
                    Shape::Steps {
                        levels: steps.clone(),
                        each: *each,
                    },
                    Some(each.saturating_mul(steps.len() as u32)),
                )
            }
        };
        if self.per_worker && self.operations.is_none() {
            return Err(KeyError::new(
                at("per_worker"),
                "needs operations (how many per worker)",
            ));
        }
        let duration = match (duration, self.operations) {
            (Some(d), _) => d,
            // A count-based stage runs until its count, at most this long.
            (None, Some(_)) => crate::schedule::COUNT_STAGE_CAP,
            (None, None) => {
                return Err(KeyError::new(
                    at("duration"),
                    "is required (or operations, for a count-based stage)",
                ))
            }
        };
        let stage = Stage::new(self.display_name(index), mode, shape, duration).map_err(|e| {
            use crate::schedule::StageError as E;
            let key = match e {
                E::ZeroDuration => match spec {
                    LevelSpec::Steps { .. } => at(&format!("{field}.each")),
                    _ => at("duration"),
                },
                E::NoSteps => at(&format!("{field}.steps")),
                _ => at(field),
            };
            KeyError::new(key, e.to_string())
        })?;
        let stage = match self.warmup {
            Some(w) => stage
                .with_warmup(w)
                .map_err(|e| KeyError::new(at("warmup"), e.to_string()))?,
            None => stage,
        };
        match self.operations {
            Some(n) => {
                let limit = if self.per_worker {
                    crate::schedule::Limit::PerWorker(n)
                } else {
                    crate::schedule::Limit::Total(n)
                };
                stage
                    .with_limit(limit)
                    .map_err(|e| KeyError::new(at("operations"), e.to_string()))
            }
            None => Ok(stage),
        }
    }
}
