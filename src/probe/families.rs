//! The replication-lag probe's families (what they measure:
//! [`super`]).

use prometheus::{GaugeVec, HistogramVec, IntCounterVec};

use crate::family::families;

/// Buckets of the lag histogram, in seconds.
pub(super) const LAG_BUCKETS: [f64; 15] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0,
];

families! {
    /// The probe's families, registered once per process.
    #[derive(Clone)]
    pub(crate) struct ProbeFamilies {
        pub(crate) lag: GaugeVec = "mongoload_replication_lag_seconds",
            "Replication lag of each secondary as a client reading it sees it: the last heartbeat's, or the wait for one not yet seen if longer.",
            labels ["member"];
        pub(crate) observed: HistogramVec = "mongoload_replication_lag_probe_seconds",
            "Lag of each heartbeat on each secondary: from its write on the primary to the first read of the member that shows it.",
            labels ["member"], buckets LAG_BUCKETS;
        pub(crate) heartbeats: IntCounterVec = "mongoload_lag_probe_heartbeats_total",
            "Heartbeats the replication-lag probe wrote on the primary, by outcome.",
            labels ["outcome"];
        pub(crate) errors: IntCounterVec = "mongoload_lag_probe_errors_total",
            "Failed reads of the lag probe on a member, by class.",
            labels ["member", "kind"];
    }
}

impl ProbeFamilies {
    /// Creates the families in `registry`, both heartbeat outcomes at 0.
    pub(crate) fn register_in(registry: &prometheus::Registry) -> Result<Self, prometheus::Error> {
        let f = ProbeFamilies::new()?;
        f.register(registry)?;
        for o in ["ok", "error"] {
            f.heartbeats.with_label_values(&[o]);
        }
        Ok(f)
    }
}
