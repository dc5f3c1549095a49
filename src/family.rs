//! A metric declared once: [`families!`] turns one line per family (field,
//! type, name, help, labels, buckets) into the struct that holds the
//! families, its constructor, its registration, and the list of the names
//! it registers (`NAMES`, which the contract test holds against
//! docs/metrics.md). Adding a family to a set is that one line; a family
//! the hot path touches per workload also gets its resolved handle in
//! `workload.rs` (see docs/architecture.md, "Adding a metric").

use std::sync::{Arc, OnceLock};

use prometheus::core::{Collector, Desc};
use prometheus::proto::MetricFamily;
use prometheus::{
    Gauge, GaugeVec, Histogram, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge,
    IntGaugeVec, Opts,
};

/// What a family is made from: one line of a [`families!`] declaration.
pub(crate) struct Decl {
    pub name: &'static str,
    pub help: &'static str,
    pub labels: &'static [&'static str],
    /// Histograms only: the bucket bounds.
    pub buckets: Option<Vec<f64>>,
}

impl Decl {
    fn opts(&self) -> Opts {
        Opts::new(self.name, self.help)
    }

    fn histogram_opts(&self) -> Result<HistogramOpts, prometheus::Error> {
        let buckets = self.buckets.clone().ok_or_else(|| {
            prometheus::Error::Msg(format!("{}: a histogram needs buckets", self.name))
        })?;
        Ok(HistogramOpts::new(self.name, self.help).buckets(buckets))
    }

    fn unlabelled(&self) -> Result<(), prometheus::Error> {
        if self.labels.is_empty() && self.buckets.is_none() {
            Ok(())
        } else {
            Err(prometheus::Error::Msg(format!(
                "{}: a family without labels takes neither labels nor buckets",
                self.name
            )))
        }
    }
}

/// A Prometheus family that a [`Decl`] makes.
pub(crate) trait Family: Collector + Clone + Sized + 'static {
    fn declare(decl: Decl) -> Result<Self, prometheus::Error>;
}

macro_rules! plain {
    ($($ty:ty),*) => {$(
        impl Family for $ty {
            fn declare(decl: Decl) -> Result<Self, prometheus::Error> {
                decl.unlabelled()?;
                <$ty>::with_opts(decl.opts())
            }
        }
    )*};
}
plain!(IntCounter, IntGauge, Gauge);

macro_rules! labelled {
    ($($ty:ty),*) => {$(
        impl Family for $ty {
            fn declare(decl: Decl) -> Result<Self, prometheus::Error> {
                <$ty>::new(decl.opts(), decl.labels)
            }
        }
    )*};
}
labelled!(IntCounterVec, IntGaugeVec, GaugeVec);

impl Family for Histogram {
    fn declare(decl: Decl) -> Result<Self, prometheus::Error> {
        if !decl.labels.is_empty() {
            return Err(prometheus::Error::Msg(format!(
                "{}: a Histogram takes no labels (HistogramVec does)",
                decl.name
            )));
        }
        Histogram::with_opts(decl.histogram_opts()?)
    }
}

impl Family for HistogramVec {
    fn declare(decl: Decl) -> Result<Self, prometheus::Error> {
        HistogramVec::new(decl.histogram_opts()?, decl.labels)
    }
}

/// A gauge whose value is read from a source when the registry is
/// gathered (a duration that grows between events); 0 until the source is
/// set.
#[derive(Clone)]
pub struct ScrapeGauge {
    gauge: Gauge,
    source: Arc<OnceLock<Box<dyn Fn() -> f64 + Send + Sync>>>,
}

impl ScrapeGauge {
    /// Sets where the value comes from (once; later calls are ignored).
    pub fn set_source(&self, source: impl Fn() -> f64 + Send + Sync + 'static) {
        let _ = self.source.set(Box::new(source));
    }

    /// The value exported at the last gathering.
    pub fn get(&self) -> f64 {
        self.gauge.get()
    }
}

impl Family for ScrapeGauge {
    fn declare(decl: Decl) -> Result<Self, prometheus::Error> {
        Ok(ScrapeGauge {
            gauge: Gauge::declare(decl)?,
            source: Arc::default(),
        })
    }
}

impl Collector for ScrapeGauge {
    fn desc(&self) -> Vec<&Desc> {
        self.gauge.desc()
    }

    fn collect(&self) -> Vec<MetricFamily> {
        if let Some(source) = self.source.get() {
            self.gauge.set(source());
        }
        self.gauge.collect()
    }
}

/// Declares a set of metric families once:
///
/// ```text
/// families! {
///     /// The audit's families.
///     pub struct AuditFamilies {
///         pub checked: IntCounterVec = "mongoload_audit_checked_total",
///             "Acknowledged ids checked against the server.", labels ["workload"];
///         pub lag: Histogram = "mongoload_lag_seconds", "Lag.", buckets LAG_BUCKETS;
///     }
/// }
/// ```
///
/// gives the struct with those fields, `new()` (every family made, or the
/// first error), `register(&self, registry)` (every family, in order) and
/// `NAMES` (every family's name, in order).
macro_rules! families {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $fvis:vis $field:ident: $ty:ty = $metric:literal, $help:literal
                    $(, labels [$($label:literal),* $(,)?])?
                    $(, buckets $buckets:expr)? ;
            )*
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $ty, )*
        }

        impl $name {
            /// The name of every family of the set, in declaration order.
            #[allow(dead_code)]
            $vis const NAMES: &'static [&'static str] = &[$($metric),*];

            /// Makes every family of the set.
            $vis fn new() -> Result<Self, prometheus::Error> {
                Ok($name {
                    $(
                        $field: <$ty as $crate::family::Family>::declare(
                            $crate::family::Decl {
                                name: $metric,
                                help: $help,
                                labels: &[$($($label),*)?],
                                buckets: None::<Vec<f64>> $(.or(Some($buckets.to_vec())))?,
                            },
                        )?,
                    )*
                })
            }

            /// Registers every family of the set in `registry`.
            $vis fn register(&self, registry: &prometheus::Registry) -> Result<(), prometheus::Error> {
                $( registry.register(Box::new(self.$field.clone()))?; )*
                Ok(())
            }
        }
    };
}
pub(crate) use families;
