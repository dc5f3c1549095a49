//! The Prometheus registry of the daemon and the hot-path recorder: every
//! metric of the contract (docs/metrics.md), the driver's pool and
//! topology metrics, and the HdrHistogram window summary.
//!
//! Child metrics are resolved once, when a workload is registered
//! ([`Metrics::workload`]); the handles it returns touch only atomics (and one
//! uncontended per-thread lock for the HdrHistogram) per operation.

pub mod buckets;
mod driver;
mod window;
mod workload;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus::{
    Encoder, GaugeVec, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Registry, TextEncoder,
};

pub use driver::{server_type_label, TopologyView, CHECKOUT_FAILURE_REASONS, SERVER_TYPES};
pub use window::{LatencySummary, WindowConfig, WINDOW_QUANTILES};
pub use workload::{OpMetrics, PrepareMetrics, RequestMetrics, WorkloadMetrics};

use crate::family::families;
use crate::workload::OpSpec;
pub(crate) use driver::DriverMetrics;
use window::WindowCollector;

/// Content type of [`Metrics::encode`]'s output (Prometheus text format 0.0.4).
pub const TEXT_CONTENT_TYPE: &str = prometheus::TEXT_FORMAT;

/// Upper bounds of the pool checkout wait buckets above 100 µs, in seconds:
/// 1-2-5 per decade, ending at 60 s. (The latency histograms use the finer
/// [`buckets::latency_buckets`], whose quantiles agree with HdrHistogram's
/// within 5 %.)
pub const COARSE_BUCKETS: [f64; 19] = [
    0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0,
    10.0, 20.0, 50.0, 60.0,
];

/// Upper bounds of the send-lateness histogram buckets in seconds: fine
/// below 1 ms, where a healthy pacer sends (timer granularity and task
/// wake-up), coarse above, where a backlog or a busy machine shows.
pub const LATENESS_BUCKETS: [f64; 16] = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.0002, 0.0003, 0.0005, 0.00075, 0.001, 0.002, 0.005, 0.01,
    0.05, 0.1, 1.0, 10.0,
];

/// The revision compiled into `mongoload_build_info`: set the environment
/// variable `MONGOLOAD_BUILD_REVISION` (e.g. to `git rev-parse --short HEAD`)
/// when building.
pub const BUILD_REVISION: &str = match option_env!("MONGOLOAD_BUILD_REVISION") {
    Some(rev) => rev,
    None => "unknown",
};

/// Why the metrics could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    /// A metric could not be created or registered (a programming error:
    /// a clashing name or label set).
    #[error("cannot register metric: {0}")]
    Prometheus(#[from] prometheus::Error),
    /// The latency window configuration is unusable.
    #[error("invalid latency window: {0}")]
    Window(String),
    /// The registry could not be encoded as text.
    #[error("cannot encode metrics: {0}")]
    Encode(String),
}

/// The process-wide metrics: one registry holding every metric the daemon
/// exports. Create once, share as `Arc<Metrics>`.
pub struct Metrics {
    registry: Registry,
    target_up: IntGauge,
    vecs: Vecs,
    driver: Arc<DriverMetrics>,
    thresholds: ThresholdFamilies,
    run_info: IntGaugeVec,
    http_unauthorized: IntCounterVec,
    windows: Arc<WindowCollector>,
    /// The current stage of each workload name, shared by every
    /// `WorkloadMetrics` of that name, so after a reload the new handle
    /// removes the series the old one set.
    current_stages: Mutex<BTreeMap<String, Arc<Mutex<Option<String>>>>>,
}

impl Metrics {
    /// Creates the registry with every metric of the contract, the process
    /// collector and a 60 s latency window.
    pub fn new() -> Result<Self, MetricsError> {
        Self::with_window(WindowConfig::default())
    }

    /// Like [`Metrics::new`], with a chosen latency window for
    /// `mongoload_latency_window_seconds`.
    pub fn with_window(window: WindowConfig) -> Result<Self, MetricsError> {
        window.validate()?;
        let registry = Registry::new();

        let process = ProcessFamilies::new()?;
        process
            .build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION"), BUILD_REVISION])
            .set(1);
        process.register(&registry)?;
        let target_up = process.target_up;
        let run_info = process.run_info;
        let http_unauthorized = process.http_unauthorized;
        for reason in ["missing", "wrong"] {
            http_unauthorized.with_label_values(&[reason]);
        }

        let vecs = Vecs::new()?;
        vecs.register(&registry)?;

        let driver = Arc::new(DriverMetrics::new()?);
        driver.register(&registry)?;

        let thresholds = ThresholdFamilies::new()?;
        thresholds.register(&registry)?;

        let windows = Arc::new(WindowCollector::new(window)?);
        registry.register(Box::new(window::SharedCollector(Arc::clone(&windows))))?;

        #[cfg(target_os = "linux")]
        registry.register(Box::new(
            prometheus::process_collector::ProcessCollector::for_self(),
        ))?;

        Ok(Metrics {
            registry,
            target_up,
            vecs,
            driver,
            thresholds,
            run_info,
            http_unauthorized,
            windows,
            current_stages: Mutex::new(BTreeMap::new()),
        })
    }

    /// The name of every family [`Metrics::new`] registers (the process
    /// collector's `process_*` aside), from their declarations.
    pub fn family_names() -> Vec<&'static str> {
        [
            ProcessFamilies::NAMES,
            Vecs::NAMES,
            driver::DriverFamilies::NAMES,
            ThresholdFamilies::NAMES,
            &[window::NAME],
        ]
        .concat()
    }

    /// The registry, for callers that want to add metrics of their own.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Sets the one `mongoload_run_info` series.
    pub fn set_run_info(&self, run: &str, config_hash: &str) {
        self.run_info.reset();
        self.run_info
            .with_label_values(&[run, env!("CARGO_PKG_VERSION"), config_hash])
            .set(1);
    }

    /// Counts a request answered 401: `missing` credentials or `wrong` ones.
    pub fn count_unauthorized(&self, reason: &'static str) {
        self.http_unauthorized.with_label_values(&[reason]).inc();
    }

    /// Sets `mongoload_target_up`.
    pub fn set_target_up(&self, up: bool) {
        self.target_up.set(i64::from(up));
    }

    /// Resolves every child metric of one workload, its operations and
    /// their steps (requests). Call once per workload at start (and again
    /// on reload: the same name gets the same series back, counters are
    /// never reset). Error children are created for every
    /// [`ErrorKind`](crate::error_kind::ErrorKind) so they are exported at 0.
    pub fn workload(&self, name: &str, ops: &[OpSpec]) -> WorkloadMetrics {
        let stage = Arc::clone(
            self.current_stages
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(name.to_owned())
                .or_default(),
        );
        let ops = ops
            .iter()
            .map(|op| {
                let window = self.windows.window(name, &op.name);
                OpMetrics::resolve(&self.vecs, name, op, window)
            })
            .collect();
        WorkloadMetrics::resolve(&self.vecs, name, ops, stage)
    }

    /// The pool and topology metrics the driver's events feed (through
    /// the handlers of [`crate::failover::driver_events`]).
    pub(crate) fn driver(&self) -> &Arc<DriverMetrics> {
        &self.driver
    }

    /// The thresholds' families.
    pub fn thresholds(&self) -> &ThresholdFamilies {
        &self.thresholds
    }

    /// The stage workload `name` runs now (none: not started, or ended).
    pub fn current_stage(&self, name: &str) -> Option<String> {
        let stages = self
            .current_stages
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let stage = stages.get(name)?;
        let current = stage.lock().unwrap_or_else(PoisonError::into_inner);
        current.clone()
    }

    /// `mongoload_shard_documents{workload,shard}`.
    pub fn shard_documents(&self) -> &prometheus::IntGaugeVec {
        &self.vecs.shard_documents
    }

    /// `mongoload_shard_chunk_migrations_total{workload,from,to}`.
    pub fn shard_chunk_migrations(&self) -> &prometheus::IntCounterVec {
        &self.vecs.shard_chunk_migrations
    }

    /// What the SDAM events said last: servers by type, whether a primary is
    /// known (for `/status` and readiness).
    pub fn topology(&self) -> TopologyView {
        self.driver.topology()
    }

    /// The exact latency quantiles of one operation over the sliding window
    /// (the numbers `mongoload_latency_window_seconds` exports), or `None`
    /// when that workload and op were never registered.
    pub fn latency_window(&self, workload: &str, op: &str) -> Option<LatencySummary> {
        self.windows.summary(workload, op, Instant::now())
    }

    /// Moves the latency recorded by the workers into the sliding window.
    /// Scrapes do this too; calling it every second (see
    /// [`Metrics::run_window_ticker`]) keeps the window's time slots exact
    /// when scrapes are rare.
    pub fn flush_windows(&self) {
        self.windows.flush(Instant::now());
    }

    /// Calls [`Metrics::flush_windows`] every second until `shutdown` is
    /// cancelled. Spawn it once next to the engine.
    pub async fn run_window_ticker(&self, shutdown: tokio_util::sync::CancellationToken) {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => return,
                _ = tick.tick() => self.flush_windows(),
            }
        }
    }

    /// The whole registry in the Prometheus text format 0.0.4
    /// ([`TEXT_CONTENT_TYPE`]).
    pub fn encode(&self) -> Result<String, MetricsError> {
        let families = self.registry.gather();
        let mut buf = Vec::with_capacity(16 * 1024);
        TextEncoder::new()
            .encode(&families, &mut buf)
            .map_err(|e| MetricsError::Encode(e.to_string()))?;
        String::from_utf8(buf).map_err(|e| MetricsError::Encode(e.to_string()))
    }
}

families! {
    /// The labelled families behind [`WorkloadMetrics`].
    #[derive(Clone)]
    pub(crate) struct Vecs {
        pub(crate) operations: IntCounterVec = "mongoload_operations_total",
            "Finished scheduled operations by outcome (ok or error); a \
             composite operation (several requests) counts once.",
            labels ["workload", "op", "outcome"];
        pub(crate) documents: IntCounterVec = "mongoload_documents_total",
            "Documents written or returned by successful operations \
             (a bounded insert's evicted documents not included).",
            labels ["workload", "op"];
        pub(crate) errors: IntCounterVec = "mongoload_errors_total",
            "Failed operations by error class (of the failing request).",
            labels ["workload", "op", "kind"];
        pub(crate) latency: HistogramVec = "mongoload_latency_seconds",
            "Response time of operations (from the intended start in open loop).",
            labels ["workload", "op"], buckets buckets::latency_buckets();
        pub(crate) service_time: HistogramVec = "mongoload_service_time_seconds",
            "Service time of operations: from the actual send to the reply \
             (equals the response time in closed loop).",
            labels ["workload", "op"], buckets buckets::latency_buckets();
        pub(crate) target_rate: GaugeVec = "mongoload_target_rate",
            "Scheduled operations per second (0 in closed loop).",
            labels ["workload"];
        pub(crate) target_concurrency: IntGaugeVec = "mongoload_target_concurrency",
            "Scheduled workers (0 in open loop).",
            labels ["workload"];
        pub(crate) inflight: IntGaugeVec = "mongoload_inflight_operations",
            "Operations in flight.",
            labels ["workload"];
        pub(crate) schedule_lag: GaugeVec = "mongoload_schedule_lag_seconds",
            "How far dispatch is behind the schedule.",
            labels ["workload"];
        pub(crate) send_lateness: HistogramVec = "mongoload_send_lateness_seconds",
            "Open loop: how late each operation was sent after its intended start.",
            labels ["workload"], buckets LATENESS_BUCKETS;
        pub(crate) missed: IntCounterVec = "mongoload_missed_operations_total",
            "Operations the schedule asked for and could not issue.",
            labels ["workload"];
        pub(crate) stage_info: IntGaugeVec = "mongoload_phase_info",
            "1 for the stage a workload is running now.",
            labels ["workload", "stage"];
        pub(crate) prepare_progress: GaugeVec = "mongoload_prepare_progress_ratio",
            "Share of the prepare step's documents in place, 0 to 1 (1 when prepared).",
            labels ["workload"];
        pub(crate) requests: IntCounterVec = "mongoload_requests_total",
            "Driver calls (requests) by operation, step and outcome; a \
             single-call operation's step is the op.",
            labels ["workload", "op", "step", "outcome"];
        pub(crate) request_duration: HistogramVec = "mongoload_request_duration_seconds",
            "Duration of each request, from its send to its reply.",
            labels ["workload", "op", "step"], buckets buckets::latency_buckets();
        pub(crate) request_errors: IntCounterVec = "mongoload_request_errors_total",
            "Failed requests by error class.",
            labels ["workload", "op", "step", "kind"];
        pub(crate) request_documents: IntCounterVec = "mongoload_request_documents_total",
            "Documents written or returned by successful requests.",
            labels ["workload", "op", "step"];
        pub(crate) prepare_steps: IntCounterVec = "mongoload_prepare_steps_total",
            "Prepare step attempts (indexes, loads, key scans) by outcome.",
            labels ["workload", "outcome"];
        pub(crate) prepare_errors: IntCounterVec = "mongoload_prepare_errors_total",
            "Failed prepare step attempts by error class.",
            labels ["workload", "kind"];
        pub(crate) shard_documents: IntGaugeVec = "mongoload_shard_documents",
            "Documents of the workload's collections on each shard, by \
             $collStats through a mongos (absent: not a mongos, or unknown).",
            labels ["workload", "shard"];
        pub(crate) capacity: GaugeVec = "mongoload_capacity_ops_per_second",
            "The last completed capacity search's result: the highest probed \
             rate (ops/s) at which the search stage's thresholds held; 0 when \
             none held (absent: no search has ended).",
            labels ["workload"];
        pub(crate) capacity_search_end: GaugeVec = "mongoload_capacity_search_end_timestamp_seconds",
            "When the last capacity search ended (Unix time; absent: none has).",
            labels ["workload"];
        pub(crate) capacity_probe_rate: GaugeVec = "mongoload_capacity_probe_rate",
            "The rate (ops/s) of the capacity probe running now; 0 between \
             searches (absent: no search has begun).",
            labels ["workload"];
        pub(crate) capacity_probe_passed: IntGaugeVec = "mongoload_capacity_probe_passed",
            "1 if the last judged capacity probe passed (every threshold of \
             its stage held), 0 if it failed (absent: none judged yet).",
            labels ["workload"];
        pub(crate) shard_chunk_migrations: IntCounterVec = "mongoload_shard_chunk_migrations_total",
            "Chunk migrations of the workload's collections committed since the \
             daemon started, from config.changelog through a mongos (absent: not \
             a mongos, or unknown).",
            labels ["workload", "from", "to"];
    }
}

families! {
    /// The thresholds' families (what they judge: [`crate::threshold`]),
    /// set by each workload's threshold book.
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

families! {
    /// The process's own families.
    struct ProcessFamilies {
        build_info: IntGaugeVec = "mongoload_build_info",
            "Always 1; the labels say which build is running.",
            labels ["version", "revision"];
        target_up: IntGauge = "mongoload_target_up",
            "1 while the MongoDB deployment answers, 0 otherwise.";
        run_info: IntGaugeVec = "mongoload_run_info",
            "Always 1; the labels say which run this is: [run] name (else the run id), version, config hash.",
            labels ["run", "version", "config_hash"];
        http_unauthorized: IntCounterVec = "mongoload_http_unauthorized_total",
            "HTTP requests answered 401 under [http] web_config's basic_auth_users, by reason: missing (no credentials) or wrong (an unknown user or a wrong password).",
            labels ["reason"];
    }
}

#[cfg(test)]
mod tests;
