//! The cluster's own metric families, apart from the `op` label space:
//! which member this is, what it knows of the shared epoch and the
//! prepare lease, and failed coordination requests. Prometheus adds the
//! members up; docs/metrics.md's table gives each family's sum rule.

use prometheus::{GaugeVec, IntCounterVec, IntGauge, IntGaugeVec, Registry};

use crate::family::families;

families! {
    /// Handles on the cluster families, registered once per daemon.
    #[derive(Clone)]
    pub struct ClusterMetrics {
        /// The configured member count (same on every member: `max`, never `sum`).
        pub size: IntGauge = "mongoload_cluster_size",
            "Members of the cluster this daemon is one of (1 alone)";
        /// This member's index.
        pub index: IntGauge = "mongoload_cluster_member_index",
            "This member's index in the cluster (0-based)";
        /// The shared run epoch (Unix seconds) this member places its stages on.
        pub epoch: GaugeVec = "mongoload_cluster_epoch_timestamp_seconds",
            "The shared run epoch (Unix time) the member places the workload's stages on",
            labels ["workload"];
        /// The stage this member runs (-1 idle or not started): members
        /// disagree when it differs.
        pub stage: IntGaugeVec = "mongoload_cluster_stage_index",
            "Index of the stage the member runs (-1 when none)",
            labels ["workload"];
        /// 1 while this member holds the prepare lease.
        pub leader: IntGaugeVec = "mongoload_cluster_prepare_leader",
            "1 while this member holds the workload's prepare lease",
            labels ["workload"];
        /// Failed coordination requests, by request.
        pub errors: IntCounterVec = "mongoload_cluster_coordination_errors_total",
            "Coordination requests to the cluster collection that failed, by request",
            labels ["request"];
    }
}

/// The coordination requests whose failures are counted.
pub(crate) const REQUESTS: [&str; 4] = ["heartbeat", "lease", "epoch", "control"];

impl ClusterMetrics {
    /// Creates the families in `registry`, every request's errors at 0.
    pub fn register_in(registry: &Registry) -> Result<ClusterMetrics, prometheus::Error> {
        let m = ClusterMetrics::new()?;
        m.register(registry)?;
        for r in REQUESTS {
            m.errors.with_label_values(&[r]);
        }
        Ok(m)
    }
}
