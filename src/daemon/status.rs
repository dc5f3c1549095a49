//! One typed snapshot of the running daemon, taken in one place and
//! rendered by every reader: `/status` serves it as JSON, `mongoload ctl
//! status` prints its workloads, the final summary is made from it.

use serde::Serialize;

use crate::control::ControlState;
use crate::engine::{PrepareProgress, StageLabel};
use crate::schedule::Load;

/// The daemon as `/status` shows it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Snapshot {
    pub version: &'static str,
    /// Which run this is.
    pub run: RunStatus,
    /// In a cluster: this member (`null` alone).
    pub cluster: Option<ClusterStatus>,
    pub uptime_seconds: f64,
    pub target: TargetStatus,
    /// The last failovers the driver saw (at most 10).
    pub failovers: Vec<crate::report::FailoverReport>,
    pub workloads: Vec<WorkloadSnapshot>,
    /// Through a mongos: each workload's documents per shard, as last read
    /// (empty: not a mongos, or `target.shard_stats_interval = 0`).
    pub shard_documents: Vec<crate::sharding::documents::ShardDocuments>,
}

/// The run's identity: its generated id, `[run] name`, the config's hash.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunStatus {
    pub id: String,
    pub name: Option<String>,
    pub config_hash: String,
}

/// This daemon as a member of its cluster.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ClusterStatus {
    pub index: u32,
    pub size: u32,
    /// The coordination collection.
    pub collection: String,
}

/// The deployment under load (hosts only: never the URI or a password).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct TargetStatus {
    pub hosts: String,
    pub database: String,
    /// The last ping succeeded.
    pub up: bool,
}

/// One workload now.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadSnapshot {
    pub name: String,
    /// The kind, as written in the config.
    pub kind: &'static str,
    pub stage: StageLabel,
    pub prepare: PrepareProgress,
    pub control: ControlSnapshot,
    /// Operations finished since start (ok and failed), and those the
    /// schedule asked for that were never sent.
    pub operations_ok: u64,
    pub operations_error: u64,
    pub missed: u64,
    /// The acknowledged-write audit, when the workload has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audit: Option<crate::audit::AuditSummary>,
    /// The thresholds over their sliding windows (absent: none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub thresholds: Vec<crate::threshold::monitor::ThresholdStatus>,
    /// A threshold with `abort_on_fail` stopped the workload or the run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub threshold_aborted: bool,
    /// Its prepare cannot succeed against this deployment and stopped the
    /// run with this exit status (78: a `shard_key` without a mongos).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fatal_exit: Option<u8>,
}

/// Runtime control of a workload: what an operator changed, and the same
/// as one phrase.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ControlSnapshot {
    pub paused: bool,
    #[serde(rename = "override")]
    pub override_load: OverrideSnapshot,
    pub scale: f64,
    /// `paused, rate 500/s (override), scale 2`, or `as scheduled`.
    pub summary: String,
}

/// The level that replaces the schedule's, if any: one of the two is set.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OverrideSnapshot {
    pub rate: Option<f64>,
    pub concurrency: Option<u32>,
}

impl From<&ControlState> for ControlSnapshot {
    fn from(c: &ControlState) -> ControlSnapshot {
        let (rate, concurrency) = match c.override_load {
            Some(Load::Rate(r)) => (Some(r), None),
            Some(Load::Concurrency(n)) => (None, Some(n)),
            None => (None, None),
        };
        ControlSnapshot {
            paused: c.paused,
            override_load: OverrideSnapshot { rate, concurrency },
            scale: c.scale,
            summary: c.to_string(),
        }
    }
}

/// The workloads, as `mongoload ctl status` asks for them.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WorkloadsReply {
    pub workloads: Vec<WorkloadSnapshot>,
}

/// What a run did, per workload, for the final log line.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub elapsed_seconds: f64,
    pub workloads: Vec<WorkloadSummary>,
}

/// One workload's counts at the end of the run.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadSummary {
    pub name: String,
    pub ok: u64,
    pub errors: u64,
    pub missed: u64,
    /// A threshold with `abort_on_fail` stopped it (exit 99).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub threshold_aborted: bool,
    /// Its prepare stopped the run with this exit status.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fatal_exit: Option<u8>,
}

impl From<&WorkloadSnapshot> for WorkloadSummary {
    fn from(w: &WorkloadSnapshot) -> WorkloadSummary {
        WorkloadSummary {
            name: w.name.clone(),
            ok: w.operations_ok,
            errors: w.operations_error,
            missed: w.missed,
            threshold_aborted: w.threshold_aborted,
            fatal_exit: w.fatal_exit,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_serializes_as_status_and_ctl_show_it() {
        let c = ControlState {
            paused: true,
            override_load: Some(Load::Rate(500.0)),
            scale: 2.0,
        };
        let v = serde_json::to_value(ControlSnapshot::from(&c)).unwrap();
        assert_eq!(
            v,
            serde_json::json!({
                "paused": true,
                "override": { "rate": 500.0, "concurrency": null },
                "scale": 2.0,
                "summary": "paused, rate 500/s (override), scale 2",
            })
        );
    }
}
