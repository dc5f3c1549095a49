//! The failover families (what they measure: [`crate::failover`]); the
//! ongoing outage's gauge reads the outage clock when the registry is
//! gathered.

use prometheus::{Gauge, Histogram, HistogramVec, IntCounter, IntCounterVec, IntGaugeVec};

use crate::error_kind::ErrorKind;
use crate::family::{families, ScrapeGauge};

/// Buckets of the outage and no-primary histograms, in seconds: elections
/// take from a fraction of a second to tens of seconds.
pub(super) const OUTAGE_BUCKETS: [f64; 14] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0,
];

families! {
    /// The failover families, fed by [`crate::failover::Failover`].
    pub struct FailoverFamilies {
        pub outage: Histogram = "mongoload_write_outage_seconds",
            "Write outages: from the first write failing with an availability error to the first acknowledged one after it.",
            buckets OUTAGE_BUCKETS;
        pub outage_last: Gauge = "mongoload_write_outage_last_seconds",
            "Duration of the last finished write outage (0 before any).";
        pub ongoing: ScrapeGauge = "mongoload_write_outage_ongoing_seconds",
            "How long writes have been failing now (0 while they are acknowledged).";
        pub no_primary: Histogram = "mongoload_no_primary_seconds",
            "Periods without a known primary, as the driver's topology monitoring saw them (elections).",
            buckets OUTAGE_BUCKETS;
        pub primary_changes: IntCounter = "mongoload_primary_changes_total",
            "Replica set primary changes (new primary or new election) seen by the driver.";
        pub primary_info: IntGaugeVec = "mongoload_primary_info",
            "1 for the replica set member the driver knows as primary; no series while there is none.",
            labels ["primary"];
        pub elected_at: Gauge = "mongoload_primary_elected_timestamp_seconds",
            "Unix time the driver last learnt of a new primary (0 before any change).";
        pub retried: IntCounterVec = "mongoload_retried_writes_total",
            "Write attempts the driver's retryable writes sent again, by the class of the failed attempt.",
            labels ["kind"];
        pub shard_primary_changes: IntCounterVec = "mongoload_shard_primary_changes_total",
            "Through a mongos: new primaries of each shard's replica set (failovers), as a monitoring-only client of the shard sees them.",
            labels ["shard"];
        pub shard_no_primary: HistogramVec = "mongoload_shard_no_primary_seconds",
            "Through a mongos: periods each shard's replica set had no known primary.",
            labels ["shard"], buckets OUTAGE_BUCKETS;
        pub shard_write_outage: HistogramVec = "mongoload_shard_write_outage_seconds",
            "Through a mongos: write outages attributed to a shard, from the first write failing with an availability error in its period without a primary to the last.",
            labels ["shard"], buckets OUTAGE_BUCKETS;
        pub shard_primary_info: IntGaugeVec = "mongoload_shard_primary_info",
            "Through a mongos: 1 for each shard's primary; no series while a shard has none.",
            labels ["shard", "primary"];
    }
}

impl FailoverFamilies {
    /// The families, with a `mongoload_retried_writes_total` series at 0
    /// for every error class.
    pub fn with_series() -> Result<Self, prometheus::Error> {
        let f = FailoverFamilies::new()?;
        for k in ErrorKind::ALL {
            f.retried.with_label_values(&[k.as_str()]);
        }
        Ok(f)
    }
}
