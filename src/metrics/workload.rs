//! Per-workload, per-operation and per-step (request) metric handles,
//! resolved once so the hot path never hashes label values or takes the
//! registry's locks.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use prometheus::{Gauge, Histogram, IntCounter, IntGauge, IntGaugeVec};

use super::window::LatencyWindow;
use super::Vecs;
use crate::error_kind::ErrorKind;
use crate::workload::{Label, OpSpec};

/// A workload's capacity search gauges (`mongoload_capacity_*`), whose
/// series appear with the first probe, so a workload without a search
/// exports none; and whether a search runs now, which keeps the sliding
/// threshold monitor off its probes (the search judges each probe whole).
#[derive(Clone)]
pub struct CapacityMetrics {
    workload: Arc<str>,
    capacity: prometheus::GaugeVec,
    search_end: prometheus::GaugeVec,
    probe_rate: prometheus::GaugeVec,
    probe_passed: IntGaugeVec,
    searching: Arc<AtomicBool>,
}

impl CapacityMetrics {
    /// A probe at `rate` begins (0: the search has ended).
    pub fn probing(&self, rate: f64) {
        self.searching.store(rate > 0.0, Ordering::Relaxed);
        self.probe_rate
            .with_label_values(&[&*self.workload])
            .set(rate);
    }

    /// The last probe was judged.
    pub fn judged(&self, passed: bool) {
        self.probe_passed
            .with_label_values(&[&*self.workload])
            .set(i64::from(passed));
    }

    /// A search ended with `capacity` at Unix time `at`. The end is set
    /// first: the registry gathers in name order, capacity before the
    /// end, so a scrape that shows the new capacity shows its end.
    pub fn found(&self, capacity: f64, at: f64) {
        let wl = &[&*self.workload];
        self.search_end.with_label_values(wl).set(at);
        self.capacity.with_label_values(wl).set(capacity);
    }

    /// Whether a capacity search runs now.
    pub fn searching(&self) -> bool {
        self.searching.load(Ordering::Relaxed)
    }
}

/// The metrics of one workload: its schedule gauges, its stage, and one
/// [`OpMetrics`] per operation. Cloning shares the same series.
#[derive(Clone)]
pub struct WorkloadMetrics {
    name: Arc<str>,
    /// `mongoload_target_rate{workload}`: scheduled ops/s, 0 in closed loop.
    pub target_rate: Gauge,
    /// `mongoload_target_concurrency{workload}`: scheduled workers, 0 in open loop.
    pub target_concurrency: IntGauge,
    /// `mongoload_inflight_operations{workload}`.
    pub inflight: IntGauge,
    /// `mongoload_schedule_lag_seconds{workload}`.
    pub schedule_lag_seconds: Gauge,
    /// `mongoload_send_lateness_seconds{workload}`: the distribution of
    /// what `schedule_lag_seconds` shows only the last value of.
    pub send_lateness: Histogram,
    /// `mongoload_missed_operations_total{workload}`.
    pub missed_operations: IntCounter,
    /// `mongoload_prepare_progress_ratio{workload}`: 0 to 1.
    pub prepare_progress: Gauge,
    /// `mongoload_prepare_steps_total` and `mongoload_prepare_errors_total`.
    pub prepare: PrepareMetrics,
    stage_info: IntGaugeVec,
    /// The capacity search's gauges, created at its first probe.
    pub capacity: CapacityMetrics,
    /// The stage whose `mongoload_phase_info` series is 1; shared by every
    /// handle of this workload name so a reload removes the right series.
    stage: Arc<Mutex<Option<String>>>,
    ops: Vec<OpMetrics>,
}

impl WorkloadMetrics {
    pub(super) fn resolve(
        vecs: &Vecs,
        name: &str,
        ops: Vec<OpMetrics>,
        stage: Arc<Mutex<Option<String>>>,
    ) -> Self {
        let wl = &[name];
        WorkloadMetrics {
            name: Arc::from(name),
            target_rate: vecs.target_rate.with_label_values(wl),
            target_concurrency: vecs.target_concurrency.with_label_values(wl),
            inflight: vecs.inflight.with_label_values(wl),
            schedule_lag_seconds: vecs.schedule_lag.with_label_values(wl),
            send_lateness: vecs.send_lateness.with_label_values(wl),
            missed_operations: vecs.missed.with_label_values(wl),
            prepare_progress: vecs.prepare_progress.with_label_values(wl),
            prepare: PrepareMetrics {
                ok: vecs.prepare_steps.with_label_values(&[name, "ok"]),
                error: vecs.prepare_steps.with_label_values(&[name, "error"]),
                errors: ErrorKind::ALL.map(|kind| {
                    vecs.prepare_errors
                        .with_label_values(&[name, kind.as_str()])
                }),
            },
            stage_info: vecs.stage_info.clone(),
            capacity: CapacityMetrics {
                workload: Arc::from(name),
                capacity: vecs.capacity.clone(),
                search_end: vecs.capacity_search_end.clone(),
                probe_rate: vecs.capacity_probe_rate.clone(),
                probe_passed: vecs.capacity_probe_passed.clone(),
                searching: Arc::new(AtomicBool::new(false)),
            },
            stage,
            ops,
        }
    }

    /// The workload's name (its `workload` label).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The operations, in the order their names were given to
    /// [`super::Metrics::workload`].
    pub fn ops(&self) -> &[OpMetrics] {
        &self.ops
    }

    /// The operation with this `op` label, if registered.
    pub fn op(&self, name: &str) -> Option<&OpMetrics> {
        self.ops.iter().find(|op| op.name() == name)
    }

    /// Marks `stage` as the current stage: `mongoload_phase_info{stage}` is
    /// set to 1 and the previous stage's series is removed, so
    /// `mongoload_phase_info == 1` always names one stage.
    pub fn set_stage(&self, stage: &str) {
        let mut current = self.stage.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(previous) = current.as_deref() {
            if previous != stage {
                // NotFound only if someone removed it behind our back: nothing to do.
                let _ = self
                    .stage_info
                    .remove_label_values(&[&*self.name, previous]);
            }
        }
        self.stage_info
            .with_label_values(&[&*self.name, stage])
            .set(1);
        *current = Some(stage.to_owned());
    }

    /// Removes the current stage's `mongoload_phase_info` series (the
    /// workload finished or was removed by a reload).
    pub fn clear_stage(&self) {
        let mut current = self.stage.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(previous) = current.take() {
            let _ = self
                .stage_info
                .remove_label_values(&[&*self.name, previous.as_str()]);
        }
    }

    /// The exact latency quantiles of all the workload's operations
    /// together over the sliding window (each op's is
    /// `mongoload_latency_window_seconds`).
    pub fn latency_window(&self) -> super::LatencySummary {
        let windows: Vec<&LatencyWindow> = self.ops.iter().map(|o| &*o.inner.window).collect();
        super::window::merged_summary(&windows, std::time::Instant::now())
    }

    /// The exact latency quantiles over the last `span` (rounded up to the
    /// window's slots, at most the whole window) of operation `op`, or of
    /// all of them.
    pub fn latency_over(&self, op: Option<usize>, span: Duration) -> super::LatencySummary {
        let windows: Vec<&LatencyWindow> = match op {
            Some(i) => self
                .ops
                .get(i)
                .map(|o| &*o.inner.window)
                .into_iter()
                .collect(),
            None => self.ops.iter().map(|o| &*o.inner.window).collect(),
        };
        super::window::merged_summary_over(&windows, std::time::Instant::now(), span)
    }

    /// Failed operations of class `kind` so far, over every operation.
    pub fn errors_of(&self, kind: ErrorKind) -> u64 {
        self.ops.iter().map(|o| o.errors_of(kind)).sum()
    }

    /// The stage set last by [`WorkloadMetrics::set_stage`].
    pub fn stage(&self) -> Option<String> {
        self.stage
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The prepare step counters of one workload: their own family, apart
/// from the operations.
#[derive(Clone)]
pub struct PrepareMetrics {
    ok: IntCounter,
    error: IntCounter,
    errors: [IntCounter; ErrorKind::ALL.len()],
}

impl PrepareMetrics {
    /// Counts one prepare step that finished.
    pub fn record_ok(&self) {
        self.ok.inc();
    }

    /// Counts one failed attempt at a prepare step (it is retried).
    pub fn record_error(&self, kind: ErrorKind) {
        self.error.inc();
        self.errors[kind as usize].inc();
    }

    /// Prepare steps finished so far.
    pub fn ok_total(&self) -> u64 {
        self.ok.get()
    }

    /// Failed prepare attempts so far.
    pub fn error_total(&self) -> u64 {
        self.error.get()
    }
}

/// The handles of one operation of one workload. Cloning is one reference
/// count; give each worker its own clone.
#[derive(Clone)]
pub struct OpMetrics {
    inner: Arc<OpInner>,
}

struct OpInner {
    name: Label,
    /// One per step of the op, in [`OpSpec::steps`] order.
    steps: Box<[RequestMetrics]>,
    ok: IntCounter,
    error: IntCounter,
    documents: IntCounter,
    /// Indexed by `ErrorKind as usize` (the order of [`ErrorKind::ALL`]).
    errors: [IntCounter; ErrorKind::ALL.len()],
    latency: Histogram,
    service_time: Histogram,
    window: Arc<LatencyWindow>,
}

impl OpMetrics {
    pub(super) fn resolve(
        vecs: &Vecs,
        workload: &str,
        spec: &OpSpec,
        window: Arc<LatencyWindow>,
    ) -> Self {
        let op = &*spec.name;
        let errors = ErrorKind::ALL.map(|kind| {
            vecs.errors
                .with_label_values(&[workload, op, kind.as_str()])
        });
        let steps = spec
            .steps
            .iter()
            .enumerate()
            .map(|(i, step)| {
                RequestMetrics::resolve(vecs, workload, op, step, spec.evict_step != Some(i))
            })
            .collect();
        OpMetrics {
            inner: Arc::new(OpInner {
                name: spec.name.clone(),
                steps,
                ok: vecs.operations.with_label_values(&[workload, op, "ok"]),
                error: vecs.operations.with_label_values(&[workload, op, "error"]),
                documents: vecs.documents.with_label_values(&[workload, op]),
                errors,
                latency: vecs.latency.with_label_values(&[workload, op]),
                service_time: vecs.service_time.with_label_values(&[workload, op]),
                window,
            }),
        }
    }

    /// The operation's name (its `op` label).
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The metrics of the op's step `step` (index into [`OpSpec::steps`]).
    #[inline]
    pub fn step(&self, step: usize) -> Option<&RequestMetrics> {
        self.inner.steps.get(step)
    }

    /// The metrics of every step, in [`OpSpec::steps`] order.
    pub fn steps(&self) -> &[RequestMetrics] {
        &self.inner.steps
    }

    /// Counts one successful operation that took `latency` and wrote or
    /// returned `docs` documents.
    #[inline]
    pub fn record_ok(&self, latency: Duration, docs: u64) {
        let inner = &*self.inner;
        inner.ok.inc();
        if docs > 0 {
            inner.documents.inc_by(docs);
        }
        inner.latency.observe(latency.as_secs_f64());
        inner.window.record(latency);
    }

    /// Counts one failed operation of class `kind` that took `latency`.
    /// Failed operations are in the latency histogram and window too, so
    /// histogram counts equal operation counts.
    #[inline]
    pub fn record_error(&self, latency: Duration, kind: ErrorKind) {
        let inner = &*self.inner;
        inner.error.inc();
        inner.errors[kind as usize].inc();
        inner.latency.observe(latency.as_secs_f64());
        inner.window.record(latency);
    }

    /// Observes the service time of one operation (from its actual send to
    /// the reply), beside the response time `record_ok`/`record_error`
    /// observe (from the intended start in open loop). Call it for every
    /// operation, ok or failed, so both histograms count the same.
    #[inline]
    pub fn record_service(&self, service: Duration) {
        self.inner.service_time.observe(service.as_secs_f64());
    }

    /// Operations counted as ok so far (since process start).
    pub fn ok_total(&self) -> u64 {
        self.inner.ok.get()
    }

    /// Operations counted as errors so far (since process start).
    pub fn error_total(&self) -> u64 {
        self.inner.error.get()
    }

    /// Errors of one class so far (since process start).
    pub fn errors_of(&self, kind: ErrorKind) -> u64 {
        self.inner.errors[kind as usize].get()
    }
}

/// The handles of one step of one operation: its requests (driver calls).
pub struct RequestMetrics {
    ok: IntCounter,
    error: IntCounter,
    errors: [IntCounter; ErrorKind::ALL.len()],
    documents: IntCounter,
    duration: Histogram,
    /// Whether the step's documents are its operation's too (not a
    /// bounded insert's eviction).
    counts_documents: bool,
}

impl RequestMetrics {
    fn resolve(vecs: &Vecs, workload: &str, op: &str, step: &str, counts_documents: bool) -> Self {
        RequestMetrics {
            ok: vecs.requests.with_label_values(&[workload, op, step, "ok"]),
            error: vecs
                .requests
                .with_label_values(&[workload, op, step, "error"]),
            errors: ErrorKind::ALL.map(|kind| {
                vecs.request_errors
                    .with_label_values(&[workload, op, step, kind.as_str()])
            }),
            documents: vecs
                .request_documents
                .with_label_values(&[workload, op, step]),
            duration: vecs
                .request_duration
                .with_label_values(&[workload, op, step]),
            counts_documents,
        }
    }

    /// Counts one request that took `duration` and wrote or returned `docs`
    /// documents (`Ok`), or failed with an error of class `kind`.
    #[inline]
    pub fn record(&self, duration: Duration, outcome: Result<u64, ErrorKind>) {
        match outcome {
            Ok(docs) => {
                self.ok.inc();
                if docs > 0 {
                    self.documents.inc_by(docs);
                }
            }
            Err(kind) => {
                self.error.inc();
                self.errors[kind as usize].inc();
            }
        }
        self.duration.observe(duration.as_secs_f64());
    }

    /// Whether this step's documents count as its operation's.
    #[inline]
    pub fn counts_documents(&self) -> bool {
        self.counts_documents
    }

    /// Requests counted as ok so far (since process start).
    pub fn ok_total(&self) -> u64 {
        self.ok.get()
    }

    /// Requests counted as errors so far (since process start).
    pub fn error_total(&self) -> u64 {
        self.error.get()
    }
}
