//! The cluster's own metric families, apart from the `op` label space:
//! which member this is, what it knows of the shared epoch and the
//! prepare lease, and failed coordination requests. Prometheus adds the
//! members up; docs/metrics.md's table gives each family's sum rule.

use prometheus::{GaugeVec, IntCounterVec, IntGauge, IntGaugeVec, Opts, Registry};

/// Handles on the cluster families, registered once per daemon.
#[derive(Clone)]
pub struct ClusterMetrics {
    /// `mongoload_cluster_size`: the configured member count (same on
    /// every member: `max`, never `sum`).
    pub size: IntGauge,
    /// `mongoload_cluster_member_index`: this member's index.
    pub index: IntGauge,
    /// `mongoload_cluster_epoch_seconds{workload}`: the shared run epoch
    /// (Unix seconds) this member places its stages on.
    pub epoch: GaugeVec,
    /// `mongoload_cluster_stage_index{workload}`: the stage this member runs
    /// (-1 idle or not started): members disagree when it differs.
    pub stage: IntGaugeVec,
    /// `mongoload_cluster_prepare_leader{workload}`: 1 while this member
    /// holds the prepare lease.
    pub leader: IntGaugeVec,
    /// `mongoload_cluster_coordination_errors_total{request}`.
    pub errors: IntCounterVec,
}

/// The coordination requests whose failures are counted.
pub const REQUESTS: [&str; 4] = ["heartbeat", "lease", "epoch", "control"];

impl ClusterMetrics {
    /// Creates the families in `registry`.
    pub fn register(registry: &Registry) -> Result<ClusterMetrics, prometheus::Error> {
        let size = IntGauge::new(
            "mongoload_cluster_size",
            "Members of the cluster this daemon is one of (1 alone)",
        )?;
        let index = IntGauge::new(
            "mongoload_cluster_member_index",
            "This member's index in the cluster (0-based)",
        )?;
        let epoch = GaugeVec::new(
            Opts::new(
                "mongoload_cluster_epoch_seconds",
                "The shared run epoch (Unix time) the member places the workload's stages on",
            ),
            &["workload"],
        )?;
        let stage = IntGaugeVec::new(
            Opts::new(
                "mongoload_cluster_stage_index",
                "Index of the stage the member runs (-1 when none)",
            ),
            &["workload"],
        )?;
        let leader = IntGaugeVec::new(
            Opts::new(
                "mongoload_cluster_prepare_leader",
                "1 while this member holds the workload's prepare lease",
            ),
            &["workload"],
        )?;
        let errors = IntCounterVec::new(
            Opts::new(
                "mongoload_cluster_coordination_errors_total",
                "Coordination requests to the cluster collection that failed, by request",
            ),
            &["request"],
        )?;
        registry.register(Box::new(size.clone()))?;
        registry.register(Box::new(index.clone()))?;
        registry.register(Box::new(epoch.clone()))?;
        registry.register(Box::new(stage.clone()))?;
        registry.register(Box::new(leader.clone()))?;
        registry.register(Box::new(errors.clone()))?;
        for r in REQUESTS {
            errors.with_label_values(&[r]);
        }
        Ok(ClusterMetrics {
            size,
            index,
            epoch,
            stage,
            leader,
            errors,
        })
    }
}
