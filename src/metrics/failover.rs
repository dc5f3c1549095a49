//! The failover families (what they measure: [`crate::failover`]):
//! `mongoload_write_outage_seconds`, `mongoload_write_outage_last_seconds`,
//! `mongoload_write_outage_ongoing_seconds` (set when the registry is
//! gathered), `mongoload_no_primary_seconds`, `mongoload_primary_info`,
//! `mongoload_primary_elected_timestamp_seconds` and
//! `mongoload_retried_writes_total`.

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{Gauge, Histogram, HistogramOpts, IntCounterVec, IntGaugeVec, Opts, Registry};

use crate::error_kind::ErrorKind;

/// Buckets of the outage and no-primary histograms, in seconds: elections
/// take from a fraction of a second to tens of seconds.
pub const OUTAGE_BUCKETS: [f64; 14] = [
    0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0,
];

/// The failover families, fed by [`crate::failover::Failover`].
pub struct FailoverFamilies {
    pub outage: Histogram,
    pub outage_last: Gauge,
    pub ongoing: Gauge,
    pub no_primary: Histogram,
    pub primary_info: IntGaugeVec,
    pub elected_at: Gauge,
    pub retried: IntCounterVec,
}

impl FailoverFamilies {
    pub fn new() -> Result<Self, prometheus::Error> {
        let primary_info = IntGaugeVec::new(
            Opts::new(
                "mongoload_primary_info",
                "1 for the replica set member the driver knows as primary; no series while there is none.",
            ),
            &["primary"],
        )?;
        let retried = IntCounterVec::new(
            Opts::new(
                "mongoload_retried_writes_total",
                "Write attempts the driver's retryable writes sent again, by the class of the failed attempt.",
            ),
            &["kind"],
        )?;
        for k in ErrorKind::ALL {
            retried.with_label_values(&[k.as_str()]);
        }
        Ok(FailoverFamilies {
            outage: Histogram::with_opts(
                HistogramOpts::new(
                    "mongoload_write_outage_seconds",
                    "Write outages: from the first write failing with an availability error to the first acknowledged one after it.",
                )
                .buckets(OUTAGE_BUCKETS.to_vec()),
            )?,
            outage_last: Gauge::new(
                "mongoload_write_outage_last_seconds",
                "Duration of the last finished write outage (0 before any).",
            )?,
            ongoing: Gauge::new(
                "mongoload_write_outage_ongoing_seconds",
                "How long writes have been failing now (0 while they are acknowledged).",
            )?,
            no_primary: Histogram::with_opts(
                HistogramOpts::new(
                    "mongoload_no_primary_seconds",
                    "Periods without a known primary, as the driver's topology monitoring saw them (elections).",
                )
                .buckets(OUTAGE_BUCKETS.to_vec()),
            )?,
            primary_info,
            elected_at: Gauge::new(
                "mongoload_primary_elected_timestamp_seconds",
                "Unix time the driver last learnt of a new primary (0 before any change).",
            )?,
            retried,
        })
    }

    /// Registers every family; `ongoing` gives the ongoing-outage gauge its
    /// value each time the registry is gathered.
    pub fn register(
        &self,
        registry: &Registry,
        ongoing: impl Fn() -> f64 + Send + Sync + 'static,
    ) -> Result<(), prometheus::Error> {
        registry.register(Box::new(self.outage.clone()))?;
        registry.register(Box::new(self.outage_last.clone()))?;
        registry.register(Box::new(ScrapeGauge {
            gauge: self.ongoing.clone(),
            value: Box::new(ongoing),
        }))?;
        registry.register(Box::new(self.no_primary.clone()))?;
        registry.register(Box::new(self.primary_info.clone()))?;
        registry.register(Box::new(self.elected_at.clone()))?;
        registry.register(Box::new(self.retried.clone()))?;
        Ok(())
    }
}

/// A gauge set from `value` when the registry is gathered.
struct ScrapeGauge {
    gauge: Gauge,
    value: Box<dyn Fn() -> f64 + Send + Sync>,
}

impl Collector for ScrapeGauge {
    fn desc(&self) -> Vec<&Desc> {
        self.gauge.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        self.gauge.set((self.value)());
        self.gauge.collect()
    }
}
