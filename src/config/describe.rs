//! The resolved plan as `check-config` prints it: the target (password
//! redacted), each workload with its kind's parameters and stages, and the
//! timeline of the next 24 hours.

use std::fmt::Write as _;
use std::time::Duration;

use chrono::{DateTime, Utc};

use super::{uri_hosts, Config, SecretUri, TargetConfig};
use crate::schedule::{Mode, Schedule, Stage, WindowPlan};
use crate::workload::footprint::{self, Growth};

/// How far ahead `check-config` prints the timeline.
pub const TIMELINE_HORIZON: Duration = Duration::from_secs(24 * 3600);

/// At most this many timeline rows are printed (a repeating schedule of
/// short stages would otherwise print thousands).
const TIMELINE_MAX_ROWS: usize = 60;

impl TargetConfig {
    /// What `describe` and the start-up log line show for the target.
    fn describe_uri(&self) -> String {
        match (&self.uri, &self.uri_file) {
            (Some(u), _) => u.redacted(),
            (None, Some(p)) => format!("(from uri_file {})", p.display()),
            (None, None) => "(none)".into(),
        }
    }
}

impl super::WorkloadConfig {
    /// The data the workload keeps, at the plan's mean rate (a week of
    /// windows from `now`), and whether the plan repeats (then unbounded
    /// growth fills any disk); `None` when the kind gives no estimate or
    /// the schedule is invalid.
    pub fn data_growth(&self, now: DateTime<Utc>) -> Option<(Growth, bool)> {
        let fp = self.kind.params().footprint()?;
        let schedule = self.schedule().ok()?;
        let level = |s: &Stage, at: Duration| match s.mode() {
            Mode::Rate => Some(s.rate_at(at)),
            Mode::Concurrency => None,
        };
        let (rate, repeats) = match schedule.windows() {
            Some(plan) => {
                let stages = plan.stages();
                const STEP: Duration = Duration::from_secs(300);
                const SAMPLES: u32 = 7 * 24 * 12;
                let mut sum = Some(0.0);
                for i in 0..SAMPLES {
                    let t = now + chrono::Duration::from_std(STEP * i).unwrap_or_default();
                    let r = match plan.at(t).index {
                        Some(idx) => level(&stages[idx], Duration::ZERO),
                        None => Some(0.0),
                    };
                    sum = sum.zip(r).map(|(a, b)| a + b);
                }
                (sum.map(|s| s / f64::from(SAMPLES)), true)
            }
            None => (
                footprint::mean_rate(schedule.stages(), Stage::duration, level),
                schedule.repeats(),
            ),
        };
        Some((footprint::growth(&fp, rate), repeats))
    }
}

impl Config {
    /// One warning per workload whose data grows without bound in a plan
    /// that repeats: such a plan fills any disk in time.
    pub fn growth_warnings(&self) -> Vec<String> {
        let now = Utc::now();
        self.workloads
            .iter()
            .filter_map(|w| {
                let (growth, repeats) = w.data_growth(now)?;
                (repeats && growth.unbounded()).then(|| {
                    format!(
                        "workload {:?} repeats and its data {growth}: workloads[].{}.max_docs bounds it",
                        w.name,
                        w.kind.table()
                    )
                })
            })
            .collect()
    }

    /// One warning per workload sharded on a ranged key that its inserts
    /// only grow.
    pub fn shard_warnings(&self) -> Vec<String> {
        self.workloads
            .iter()
            .filter_map(super::WorkloadConfig::shard_warning)
            .collect()
    }

    /// The resolved plan, as `check-config` prints it: target (redacted),
    /// http, each workload with kind, parameters and stages, and the
    /// timeline of the next 24 hours.
    pub fn describe(&self) -> String {
        self.describe_at(Utc::now())
    }

    /// As [`Config::describe`], with the timeline starting at `now` (stage
    /// lists start when the daemon does; windows follow the clock).
    pub fn describe_at(&self, now: DateTime<Utc>) -> String {
        let mut out = String::new();
        self.describe_target(&mut out);
        self.describe_daemon(&mut out);
        for w in &self.workloads {
            w.describe_to(&mut out, now);
        }
        out
    }

    /// The `target:` section: the URI redacted, its hosts, the pool and
    /// the timeouts, the concerns.
    fn describe_target(&self, out: &mut String) {
        let t = &self.target;
        let hosts = t
            .uri
            .as_ref()
            .map(|u| uri_hosts(u.expose()))
            .unwrap_or_default();
        let _ = writeln!(out, "target:");
        let _ = writeln!(out, "  uri: {}", t.describe_uri());
        if !hosts.is_empty() {
            let _ = writeln!(out, "  hosts: {}", hosts.join(", "));
        }
        let _ = writeln!(out, "  database: {}", t.database);
        let _ = writeln!(out, "  app_name: {}", t.app_name);
        let pool = if t.pool_size == 0 {
            format!("{} (sized to the plan)", self.effective_pool_size())
        } else {
            t.pool_size.to_string()
        };
        let _ = writeln!(out, "  pool_size: {pool}");
        let _ = writeln!(
            out,
            "  timeouts: connect {}, server selection {}, operation {}",
            humantime::format_duration(t.connect_timeout),
            humantime::format_duration(t.server_selection_timeout),
            humantime::format_duration(t.operation_timeout)
        );
        out.push_str(
            &t.describe_concerns(t.uri.as_ref().map(SecretUri::expose), self.command_events()),
        );
    }

    /// The daemon's own sections: `http:`, `run:`, `control:`, the
    /// cluster and the lag probe.
    fn describe_daemon(&self, out: &mut String) {
        let _ = writeln!(out, "http:\n  listen: {}", self.http.listen);
        if let Some(web) = &self.http.web_config {
            let _ = writeln!(out, "  web_config: {}", web.display());
        }
        let _ = writeln!(
            out,
            "run:\n  shutdown_grace: {}",
            humantime::format_duration(self.run.shutdown_grace)
        );
        if let Some(log) = &self.run.log {
            let _ = writeln!(out, "  log: {}", log.display());
        }
        let _ = writeln!(
            out,
            "control:\n  socket: {}",
            self.control
                .socket
                .as_ref()
                .map_or("(off)".into(), |p| p.display().to_string())
        );
        out.push_str(&self.cluster.describe());
        if let Some(p) = &self.lag_probe {
            let _ = writeln!(
                out,
                "lag_probe:\n  interval: {}, collection: {}, secondaries read every {}",
                humantime::format_duration(p.interval),
                p.collection,
                humantime::format_duration(p.poll())
            );
        }
    }
}

impl super::WorkloadConfig {
    /// One `workload` section: kind, parameters, data growth, sharding,
    /// concerns, audit, then its windows or its stages and timeline from
    /// `now`.
    fn describe_to(&self, out: &mut String, now: DateTime<Utc>) {
        let _ = writeln!(out, "workload {:?}:", self.name);
        let _ = writeln!(out, "  kind: {}", self.kind.name());
        let _ = writeln!(
            out,
            "  max_inflight: {}, max_lag: {}, seed: {}, repeat: {}",
            self.max_inflight,
            humantime::format_duration(self.max_lag),
            self.seed.map_or("random".to_string(), |s| s.to_string()),
            if self.windows.is_empty() {
                self.repeat.to_string()
            } else {
                "forever (windows)".to_string()
            }
        );
        out.push_str(&self.kind.params().describe());
        if let Some((growth, _)) = self.data_growth(now) {
            let _ = writeln!(out, "  data: {growth}");
        }
        if let Ok(Some(plan)) = self.shard_plan() {
            let _ = writeln!(out, "  sharding: {}", plan.describe(self.kind.name()));
        }
        out.push_str(&self.describe_concerns());
        out.push_str(&self.describe_audit());
        let Ok(schedule) = self.schedule() else {
            let _ = writeln!(out, "  (invalid schedule)");
            return;
        };
        if let Some(plan) = schedule.windows() {
            describe_windows(out, plan, now);
            return;
        }
        describe_stages(out, &schedule);
    }
}

/// A stage list as `check-config` prints it: the stages, then the timeline
/// of the next 24 hours (two passes of a repeating list, then a summary).
fn describe_stages(out: &mut String, schedule: &Schedule) {
    let _ = writeln!(
        out,
        "  stages ({} per pass{}):",
        humantime::format_duration(schedule.total_duration()),
        if schedule.repeats() { ", repeated" } else { "" }
    );
    for (i, s) in schedule.stages().iter().enumerate() {
        let _ = writeln!(out, "    {}. {s}", i + 1);
    }
    // A repeating schedule shows two passes, then a summary.
    let max_rows = if schedule.repeats() {
        (2 * schedule.stages().len()).min(TIMELINE_MAX_ROWS)
    } else {
        TIMELINE_MAX_ROWS
    };
    let rows = schedule.timeline(TIMELINE_HORIZON, max_rows);
    let _ = writeln!(out, "  timeline (next 24h):");
    for r in &rows {
        let s = &schedule.stages()[r.stage];
        let _ = writeln!(
            out,
            "    +{:<12} .. +{:<12} {}",
            humantime::format_duration(r.start).to_string(),
            humantime::format_duration(r.end).to_string(),
            s
        );
    }
    let last_end = rows.last().map_or(Duration::ZERO, |r| r.end);
    if last_end < TIMELINE_HORIZON {
        if schedule.repeats() {
            let pass = schedule.total_duration();
            let passes = TIMELINE_HORIZON.as_nanos().div_ceil(pass.as_nanos());
            let _ = writeln!(
                out,
                "    … repeats every {} ({passes} passes in 24h)",
                humantime::format_duration(pass)
            );
        } else {
            let _ = writeln!(
                out,
                "    +{} end: the workload stops",
                humantime::format_duration(last_end)
            );
        }
    }
}

/// The windows of a workload and the next 24 hours in their zone, as
/// `check-config` prints them.
fn describe_windows(out: &mut String, plan: &WindowPlan, now: DateTime<Utc>) {
    let tz = plan.windows().tz();
    let stages = plan.stages();
    let _ = writeln!(
        out,
        "  windows ({tz}, repeating forever; the first active wins):"
    );
    for (i, (w, s)) in plan.windows().windows().iter().zip(&stages).enumerate() {
        let _ = writeln!(out, "    {}. {w}  {s:#}", i + 1);
    }
    match stages.get(plan.windows().windows().len()) {
        Some(d) => {
            let _ = writeln!(out, "    outside: {d:#}");
        }
        None => {
            let _ = writeln!(out, "    outside: idle");
        }
    }
    let _ = writeln!(out, "  timeline (next 24h, {tz}):");
    let fmt = |t: DateTime<Utc>| {
        t.with_timezone(&tz)
            .format("%a %Y-%m-%d %H:%M %Z")
            .to_string()
    };
    for span in plan
        .timeline(now, TIMELINE_HORIZON)
        .iter()
        .take(TIMELINE_MAX_ROWS)
    {
        let what = span
            .window
            .map_or("idle".to_string(), |i| format!("{:#}", stages[i]));
        let _ = writeln!(out, "    {} .. {}  {what}", fmt(span.from), fmt(span.to));
    }
}
