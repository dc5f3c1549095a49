//! Per-stage reports: the statistics of a stage ([`StageStats`], pure), the
//! JSON line written to the run log at every stage end ([`StageReport`],
//! its schema in `etc/runlog.schema.json`), reading run logs back, and the
//! tables and comparisons `mongoload report` prints. The engine feeds it
//! through [`live`]; the report task ([`writer`]) writes the reports.

pub(crate) mod compare;
pub(crate) mod exit_reports;
pub mod html;
pub mod live;
pub mod merge;
pub(crate) mod samples;
pub(crate) mod significance;
mod stats;
pub mod table;
pub(crate) mod verdicts;
pub mod writer;

use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};

use crate::error_kind::ErrorKind;
use crate::workload::OpSpec;

pub use exit_reports::ReportTap;
pub use stats::{decode_histogram, merged_latency, rate_reached, LatencyNs, OpStats, StageStats};

/// Documents per shard of a workload's collections as a mongos counts
/// them now (`None`: not a mongos, or the read failed): read by the report
/// task for each stage report, off the load path.
pub trait ShardCounter: Send + Sync + std::fmt::Debug {
    fn documents<'a>(&'a self, workload: &'a str) -> ShardReading<'a>;
}

/// What [`ShardCounter::documents`] returns: documents by shard name.
pub type ShardReading<'a> = futures::future::BoxFuture<'a, Option<BTreeMap<String, i64>>>;

/// Identifies one run of the daemon in its run log lines.
#[derive(Debug, Clone)]
pub struct RunInfo {
    /// `YYYYMMDDTHHMMSSZ-xxxx`: the start time and four random hex digits.
    pub id: String,
    /// When the daemon started.
    pub started: DateTime<Utc>,
    /// The JSON-lines file stage reports are appended to, if any.
    pub log: Option<PathBuf>,
    /// Also keeps a copy of each report (the terminal's table at exit).
    pub tap: Option<std::sync::Arc<ReportTap>>,
    /// `[run] name`, if set.
    pub name: Option<String>,
    /// The config's hash ([`crate::config::Config::hash`]).
    pub config_hash: Option<String>,
    /// The plan as `check-config` prints it (the URI's password
    /// redacted), as the daemon started; the first stage report written to
    /// the run log carries it ([`RunInfo::take_config`]).
    pub config: Option<String>,
    /// Whether [`RunInfo::take_config`] gave the config away.
    pub(crate) config_taken: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Reads documents per shard into each stage report (set once the
    /// daemon knows the target is a mongos).
    pub shards: std::sync::Arc<std::sync::OnceLock<std::sync::Arc<dyn ShardCounter>>>,
}

impl RunInfo {
    /// A new run starting now.
    pub fn new(log: Option<PathBuf>) -> RunInfo {
        let started = Utc::now();
        let id = format!(
            "{}-{:04x}",
            started.format("%Y%m%dT%H%M%SZ"),
            rand::random::<u16>()
        );
        RunInfo {
            id,
            started,
            log,
            tap: None,
            name: None,
            config_hash: None,
            config: None,
            config_taken: Default::default(),
            shards: Default::default(),
        }
    }

    /// The config, the first time only: once per run in the run log.
    pub fn take_config(&self) -> Option<String> {
        use std::sync::atomic::Ordering;
        let config = self.config.as_ref()?;
        (!self.config_taken.swap(true, Ordering::Relaxed)).then(|| config.clone())
    }

    /// The run's label: its name, else its id.
    pub fn label(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.id)
    }
}

/// Where and what one stage occurrence was: everything in a report besides
/// the statistics.
#[derive(Debug, Clone, PartialEq)]
pub struct StageMeta {
    pub workload: String,
    pub stage: String,
    /// Index into the workload's stage list.
    pub stage_index: usize,
    /// Pass through a repeating schedule (0 for the first).
    pub cycle: u64,
    /// `rate` (open loop) or `concurrency` (closed loop).
    pub mode: &'static str,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    /// Left out of the statistics at the start of the stage.
    pub warmup: Duration,
    /// The stage was cut short (shutdown) rather than run to its end.
    pub partial: bool,
}

/// Successful and failed operation counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub ok: u64,
    pub error: u64,
}

/// One operation's part of a stage report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpReport {
    pub op: String,
    pub operations: Counts,
    /// Successful operations per second of the measured duration.
    pub ops_per_sec: f64,
    /// Response time of the whole operation.
    pub latency_ns: LatencyNs,
    /// Its histogram, for merging ([`OpStats::encoded_latency`]); absent
    /// from run logs before clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
    /// The operation's requests by step, in the op's step order (a
    /// single-call operation has one step named like the op). Absent from
    /// run logs of mongoload 0.1.
    #[serde(default)]
    pub steps: Vec<StepReport>,
    /// Its per-interval samples (at the stage's `samples.interval_seconds`);
    /// absent from run logs before mongoload 0.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<samples::SampleSeries>,
}

/// One step's requests (driver calls) within an operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepReport {
    pub step: String,
    pub requests: Counts,
    /// Successful requests per second of the measured duration.
    pub requests_per_sec: f64,
    /// Request duration, from its send to its reply.
    pub latency_ns: LatencyNs,
    /// Its histogram, for merging; absent from run logs before clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
    /// Its per-interval samples (at the stage's
    /// `samples.interval_seconds`), for `report --compare`'s statistics:
    /// only the steps of an operation of several steps (a single call's
    /// step is its operation); absent before mongoload 0.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<samples::SampleSeries>,
}

/// One line of the run log: what a stage did, after its warm-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StageReport {
    pub run_id: String,
    /// `[run] name`, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_name: Option<String>,
    /// The mongoload version that wrote the line (absent before 0.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The hash of the run's config (absent before 0.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// The run's plan as `check-config` prints it (the URI's password
    /// redacted): on the run's first line in the run log only (absent
    /// before 0.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// RFC 3339, UTC.
    pub run_started: String,
    pub workload: String,
    pub stage: String,
    pub stage_index: usize,
    pub cycle: u64,
    pub mode: String,
    /// Start of the stage (RFC 3339, UTC), warm-up included.
    pub start: String,
    /// End of the stage (RFC 3339, UTC).
    pub end: String,
    /// Measured time: end − start − warm-up, in seconds.
    pub duration_seconds: f64,
    pub warmup_seconds: f64,
    pub partial: bool,
    pub operations: Counts,
    /// Successful operations per second of the measured duration.
    pub ops_per_sec: f64,
    /// Whole seconds the ips figures are over.
    pub whole_seconds: u64,
    /// The successful-operations rate that 75 % of whole seconds reached.
    pub ips_75: u64,
    pub ips_95: u64,
    pub ips_99: u64,
    /// Response time (from the intended start in open loop), all operations.
    pub latency_ns: LatencyNs,
    /// Its histogram, for merging cluster members' reports; absent from
    /// run logs before clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram: Option<String>,
    /// In a cluster: the member that wrote the report (or, merged, the
    /// members it adds up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member: Option<MemberReport>,
    /// Failed operations by class; every class is present.
    pub errors: std::collections::BTreeMap<String, u64>,
    /// Operations the schedule asked for and could not issue.
    pub missed: u64,
    /// Per-interval samples of the measured time, for `report --compare`'s
    /// statistics; absent from run logs before mongoload 0.3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<samples::Samples>,
    /// Per operation label, in the workload's order.
    pub ops: Vec<OpReport>,
    /// Count-based stages only: the count and each worker's batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<CountReport>,
    /// The failovers the driver saw during the stage (absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failovers: Vec<FailoverReport>,
    /// Audited workloads only: the acknowledged-write audit of the stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audit: Option<AuditReport>,
    /// The verdict of each threshold that applies in this stage, over the
    /// whole stage (absent: no thresholds).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<crate::threshold::ThresholdVerdict>,
    /// Through a mongos: the documents of the workload's collections per
    /// shard, read when the report was written (absent: not a mongos, off,
    /// or unknown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard_documents: Option<BTreeMap<String, i64>>,
    /// A capacity search's probe: each probe is an occurrence of its
    /// search stage (absent: not a search).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<ProbeReport>,
}

/// One probe of a capacity search, as its stage report carries it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    /// 1 for the search's first probe.
    pub number: u32,
    /// The probe's rate (ops/s).
    pub rate: f64,
    /// `pass` (every threshold of the stage held) or `fail`.
    pub verdict: String,
    /// Failed over finished operations in the judged part.
    pub error_ratio: f64,
    /// On the search's last probe: what the search found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<SearchResultReport>,
}

/// A capacity search's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResultReport {
    /// The highest passing rate (0: none passed).
    pub capacity: f64,
    /// Why it ended: `converged`, `ceiling`, `floor`, `stopped`,
    /// `out_of_time` or `interrupted`.
    pub end: String,
    /// Probes run.
    pub probes: u32,
}

/// Which cluster member a stage report is from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberReport {
    /// The member's index (0-based); in a merged row, the lowest.
    pub index: u32,
    /// The cluster's size.
    pub size: u32,
    /// The shared run epoch (RFC 3339): members' reports of one run agree on it.
    pub epoch: String,
    /// A merged row: the members it adds up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged: Vec<u32>,
}

/// One failover seen during a stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailoverReport {
    /// When the driver learnt of the new primary (RFC 3339, UTC).
    pub at: String,
    /// The primary before (absent if never known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The new primary.
    pub to: String,
    /// How long the driver knew no primary before it (absent: the primary
    /// changed without a gap).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_primary_seconds: Option<f64>,
    /// From the first failed write to the first acknowledged one after it
    /// (absent: no write failed, or the outage had not ended by the report).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub write_outage_seconds: Option<f64>,
    /// Through a mongos: the shard whose replica set failed over (absent:
    /// the target's own primary).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
}

impl FailoverReport {
    /// The report of a failover the driver saw.
    pub fn from_record(r: &crate::failover::FailoverRecord) -> FailoverReport {
        FailoverReport {
            at: rfc3339(r.wall.into()),
            from: r.from.clone(),
            to: r.to.clone(),
            no_primary_seconds: r.no_primary.map(|d| d.as_secs_f64()),
            write_outage_seconds: r.write_outage.map(|d| d.as_secs_f64()),
            shard: r.shard.clone(),
        }
    }
}

/// The acknowledged-write audit during a stage: what was checked since
/// the previous stage report, through the pass run at the stage's end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    /// Ids in the ledger after the stage-end pass: inserts acknowledged,
    /// not deleted on purpose, not found missing.
    pub acknowledged: u64,
    /// Id checks against the server during the stage (an id is checked
    /// again in every pass).
    pub checked: u64,
    /// Acknowledged ids found missing during the stage (each once).
    pub missing: u64,
    /// Found missing since the workload started.
    pub missing_total: u64,
    /// The `_id`s found missing during the stage, by collection (the
    /// first [`AUDIT_REPORT_IDS`]).
    #[serde(default)]
    pub missing_ids: std::collections::BTreeMap<String, Vec<serde_json::Value>>,
    /// Whether the stage-end pass went through every id (not when cut
    /// short at shutdown).
    pub complete: bool,
}

/// At most this many missing `_id`s are listed in a stage report.
pub const AUDIT_REPORT_IDS: usize = 1000;

/// What a count-based stage ran: the stage's own figures are its elapsed
/// time (`duration_seconds`) and operations; this adds the count and each
/// worker's time for its batch of operations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CountReport {
    /// The count the stage ran to (per worker when `per_worker`).
    pub operations: u64,
    pub per_worker: bool,
    /// One entry per worker that ran operations, by worker number.
    pub workers: Vec<WorkerBatch>,
}

/// One worker's batch of a count-based stage.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerBatch {
    pub worker: u32,
    /// Operations it ran (after the warm-up).
    pub operations: u64,
    /// From its first operation's (intended) start to its last reply.
    pub seconds: f64,
}

pub(crate) fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

impl StageReport {
    /// Builds the report of a stage from its statistics; `ops` are the
    /// workload's operations, in the order the statistics index them.
    pub fn build(run: &RunInfo, meta: &StageMeta, stats: &StageStats, ops: &[OpSpec]) -> Self {
        let span = (meta.end - meta.start).to_std().unwrap_or(Duration::ZERO);
        let measured = span.saturating_sub(meta.warmup);
        let secs = measured.as_secs_f64();
        let rate = |ok: u64| if secs > 0.0 { ok as f64 / secs } else { 0.0 };
        let whole = measured.as_secs();
        let per_second = stats.per_second(whole);
        let total = stats.total();
        let samples::Finished {
            samples,
            ops: op_samples,
            steps: mut step_samples,
        } = stats.samples(measured);
        let mut op_samples = op_samples.into_iter().map(Some).collect::<Vec<_>>();
        StageReport {
            run_id: run.id.clone(),
            run_name: run.name.clone(),
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
            config_hash: run.config_hash.clone(),
            config: None,
            run_started: rfc3339(run.started),
            workload: meta.workload.clone(),
            stage: meta.stage.clone(),
            stage_index: meta.stage_index,
            cycle: meta.cycle,
            mode: meta.mode.to_owned(),
            start: rfc3339(meta.start),
            end: rfc3339(meta.end),
            duration_seconds: secs,
            warmup_seconds: meta.warmup.as_secs_f64(),
            partial: meta.partial,
            operations: Counts {
                ok: total.ok,
                error: total.error,
            },
            ops_per_sec: rate(total.ok),
            whole_seconds: per_second.len() as u64,
            ips_75: rate_reached(&per_second, 0.75),
            ips_95: rate_reached(&per_second, 0.95),
            ips_99: rate_reached(&per_second, 0.99),
            latency_ns: total.latency(),
            histogram: Some(total.encoded_latency()),
            member: None,
            errors: ErrorKind::ALL
                .iter()
                .map(|&k| (k.as_str().to_owned(), stats.errors_of(k)))
                .collect(),
            missed: stats.missed(),
            samples: Some(samples),
            ops: ops
                .iter()
                .enumerate()
                .filter_map(|(i, spec)| {
                    let o = stats.op(i)?;
                    Some(OpReport {
                        op: spec.name.to_string(),
                        operations: Counts {
                            ok: o.ok,
                            error: o.error,
                        },
                        ops_per_sec: rate(o.ok),
                        latency_ns: o.latency(),
                        histogram: Some(o.encoded_latency()),
                        steps: spec
                            .steps
                            .iter()
                            .enumerate()
                            .filter_map(|(j, step)| {
                                let s = stats.step(i, j)?;
                                Some(StepReport {
                                    step: step.to_string(),
                                    requests: Counts {
                                        ok: s.ok,
                                        error: s.error,
                                    },
                                    requests_per_sec: rate(s.ok),
                                    latency_ns: s.latency(),
                                    histogram: Some(s.encoded_latency()),
                                    samples: step_samples
                                        .get_mut(i)
                                        .and_then(|o| o.get_mut(j))
                                        .and_then(Option::take),
                                })
                            })
                            .collect(),
                        samples: op_samples.get_mut(i).and_then(Option::take),
                    })
                })
                .collect(),
            count: None,
            failovers: Vec::new(),
            audit: None,
            thresholds: Vec::new(),
            shard_documents: None,
            probe: None,
        }
    }

    /// Failed operations, all classes.
    pub fn errors_total(&self) -> u64 {
        self.errors.values().sum()
    }
}

/// Why a run log could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RunLogError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: not a stage report: {reason}")]
    Parse {
        path: PathBuf,
        line: usize,
        reason: String,
    },
}

/// Appends one report as a JSON line. The line is written with a single
/// `write` on a file opened for appending, so concurrent writers (several
/// workloads) do not interleave within a line.
pub fn append(path: &Path, report: &StageReport) -> Result<(), RunLogError> {
    let io = |source| RunLogError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut line = serde_json::to_vec(report).map_err(|e| io(std::io::Error::other(e)))?;
    line.push(b'\n');
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    file.write_all(&line).map_err(io)
}

/// Reads every stage report of a run log; blank lines are skipped, any
/// other line that is not a report is an error naming file and line.
pub fn read(path: &Path) -> Result<Vec<StageReport>, RunLogError> {
    let io = |source| RunLogError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut out = Vec::new();
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(io)?;
        if line.trim().is_empty() {
            continue;
        }
        let report = serde_json::from_str(&line).map_err(|e| RunLogError::Parse {
            path: path.to_path_buf(),
            line: n + 1,
            reason: e.to_string(),
        })?;
        out.push(report);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn meta(warmup: Duration, secs: i64) -> StageMeta {
        let start = Utc.with_ymd_and_hms(2026, 11, 29, 12, 0, 0).unwrap();
        StageMeta {
            workload: "w".into(),
            stage: "hold".into(),
            stage_index: 1,
            cycle: 0,
            mode: "rate",
            start,
            end: start + chrono::Duration::seconds(secs),
            warmup,
            partial: false,
        }
    }

    #[test]
    fn report_covers_the_measured_time_after_warmup() {
        let mut s = StageStats::new(2);
        // 10 measured seconds: 100 finds a second, except 10 in second 3.
        for sec in 0..10u64 {
            let n = if sec == 3 { 10 } else { 100 };
            for i in 0..n {
                let done = Duration::from_secs(sec) + Duration::from_millis(i * 9);
                s.record(1, done, Duration::from_millis(2), Ok(()));
            }
        }
        s.record(
            0,
            Duration::from_secs(1),
            Duration::from_secs(1),
            Err(ErrorKind::Timeout),
        );
        let run = RunInfo {
            shards: Default::default(),
            id: "r1".into(),
            started: Utc.with_ymd_and_hms(2026, 11, 29, 11, 59, 0).unwrap(),
            log: None,
            tap: None,
            name: None,
            config_hash: None,
            config: None,
            config_taken: Default::default(),
        };
        let r = StageReport::build(
            &run,
            &meta(Duration::from_secs(5), 15),
            &s,
            &[OpSpec::single("insert"), OpSpec::single("find")],
        );
        assert_eq!(r.duration_seconds, 10.0);
        assert_eq!(r.warmup_seconds, 5.0);
        assert_eq!(r.operations, Counts { ok: 910, error: 1 });
        assert_eq!(r.ops_per_sec, 91.0);
        assert_eq!(r.whole_seconds, 10);
        assert_eq!(r.ips_75, 100);
        assert_eq!(r.ips_99, 10);
        assert_eq!(r.errors["timeout"], 1);
        assert_eq!(r.errors.len(), ErrorKind::ALL.len());
        assert_eq!(r.errors_total(), 1);
        assert_eq!(r.ops[0].op, "insert");
        assert_eq!(r.ops[0].operations, Counts { ok: 0, error: 1 });
        assert_eq!(r.ops[1].ops_per_sec, 91.0);
        assert_eq!(r.start, "2026-11-29T12:00:00.000Z");
        assert_eq!(r.end, "2026-11-29T12:00:15.000Z");
        assert_eq!(r.run_started, "2026-11-29T11:59:00.000Z");
    }

    #[test]
    fn the_config_is_given_once_per_run() {
        let run = RunInfo {
            config: Some("target: mongodb://u:<redacted>@h".into()),
            ..RunInfo::new(None)
        };
        let shared = run.clone();
        assert_eq!(shared.take_config().as_deref(), run.config.as_deref());
        assert_eq!(run.take_config(), None);
        assert_eq!(RunInfo::new(None).take_config(), None);
    }

    #[test]
    fn a_stage_cut_short_in_its_warmup_reports_zero_rates() {
        let s = StageStats::new(1);
        let run = RunInfo::new(None);
        let r = StageReport::build(
            &run,
            &meta(Duration::from_secs(30), 10),
            &s,
            &[OpSpec::single("find")],
        );
        assert_eq!(r.duration_seconds, 0.0);
        assert_eq!(r.ops_per_sec, 0.0);
        assert_eq!(r.whole_seconds, 0);
        assert_eq!(r.ips_99, 0);
    }

    #[test]
    fn run_log_round_trips_and_names_bad_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("runs.jsonl");
        let mut s = StageStats::new(1);
        s.record(0, Duration::ZERO, Duration::from_millis(1), Ok(()));
        let run = RunInfo::new(Some(path.clone()));
        assert_eq!(run.id.len(), "20261129T120000Z-abcd".len());
        let r = StageReport::build(
            &run,
            &meta(Duration::ZERO, 1),
            &s,
            &[OpSpec::single("find")],
        );
        append(&path, &r).unwrap();
        append(&path, &r).unwrap();
        let back = read(&path).unwrap();
        assert_eq!(back, vec![r.clone(), r]);

        std::fs::write(&path, "\n{\"run_id\": 1}\n").unwrap();
        let err = read(&path).unwrap_err().to_string();
        assert!(err.contains("runs.jsonl:2: not a stage report"), "{err}");
        let err = read(&dir.path().join("nope")).unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
    }
}
