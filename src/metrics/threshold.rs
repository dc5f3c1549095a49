//! The thresholds' families (what they judge: [`crate::threshold`]); a
//! workload's threshold book sets them.

use prometheus::{IntCounterVec, IntGaugeVec};

use super::family::families;

families! {
    /// `mongoload_threshold_ok` and `mongoload_threshold_breaches_total`.
    #[derive(Clone)]
    pub struct ThresholdFamilies {
        pub(crate) ok: IntGaugeVec = "mongoload_threshold_ok",
            "1 while a threshold passes over its sliding window (or has no data yet), 0 while it fails.",
            labels ["workload", "threshold"];
        pub(crate) breaches: IntCounterVec = "mongoload_threshold_breaches_total",
            "Times a threshold crossed from passing into failing.",
            labels ["workload", "threshold"];
    }
}
