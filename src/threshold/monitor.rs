//! The thresholds of one workload while it runs: once a second, each
//! threshold's sliding-window figures (counts from the workload's totals,
//! latency from the exact HdrHistogram window) are judged
//! ([`super::Tracker`]); `mongoload_threshold_ok` and
//! `mongoload_threshold_breaches_total` follow, a journal line marks each
//! crossing, and `abort_on_fail` stops the workload or the run.
//!
//! Counts never span two stages (the window starts over at a stage
//! change); the latency quantiles come from the per-op window of
//! `mongoload_latency_window_seconds`, over the threshold's window rounded
//! up to its 10 s slots and at most its 60 s.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use super::{AbortScope, CountWindow, Figures, Threshold, Tracker};
use crate::metrics::{ThresholdFamilies, WorkloadMetrics};

/// One threshold's state as `/status` shows it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ThresholdStatus {
    pub threshold: String,
    /// `pass`, `fail` or `no data`.
    pub state: &'static str,
    /// The figure over the window (seconds or ratio), when there was data.
    pub value: Option<f64>,
    pub breaches: u64,
}

/// A workload's thresholds and their state, shared by the monitor, the
/// stage reports and `/status`.
pub struct ThresholdBook {
    workload: String,
    thresholds: Vec<Threshold>,
    families: ThresholdFamilies,
    state: Mutex<BookState>,
    aborted: AtomicBool,
}

#[derive(Default)]
struct BookState {
    trackers: Vec<Tracker>,
    values: Vec<Option<f64>>,
    /// Breaches per stage name and threshold, taken by the stage reports.
    stage_breaches: BTreeMap<String, Vec<u64>>,
}

impl ThresholdBook {
    pub fn new(workload: &str, thresholds: Vec<Threshold>, families: &ThresholdFamilies) -> Self {
        for t in &thresholds {
            families.ok.with_label_values(&[workload, &t.name]).set(1);
            families.breaches.with_label_values(&[workload, &t.name]);
        }
        let n = thresholds.len();
        ThresholdBook {
            workload: workload.to_owned(),
            thresholds,
            families: families.clone(),
            state: Mutex::new(BookState {
                trackers: vec![Tracker::default(); n],
                values: vec![None; n],
                stage_breaches: BTreeMap::new(),
            }),
            aborted: AtomicBool::new(false),
        }
    }

    pub fn thresholds(&self) -> &[Threshold] {
        &self.thresholds
    }

    /// Whether a threshold stopped this workload or the run.
    pub fn aborted(&self) -> bool {
        self.aborted.load(Ordering::SeqCst)
    }

    /// The breaches counted so far in stages named `stage`, per threshold.
    pub fn stage_breaches(&self, stage: &str) -> Vec<u64> {
        let s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        s.stage_breaches
            .get(stage)
            .cloned()
            .unwrap_or_else(|| vec![0; self.thresholds.len()])
    }

    /// The thresholds' states now.
    pub fn status(&self) -> Vec<ThresholdStatus> {
        let s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        self.thresholds
            .iter()
            .zip(s.trackers.iter().zip(&s.values))
            .map(|(t, (tr, v))| ThresholdStatus {
                threshold: t.name.clone(),
                state: match tr.ok {
                    Some(true) => "pass",
                    Some(false) => "fail",
                    None => "no data",
                },
                value: *v,
                breaches: tr.breaches,
            })
            .collect()
    }

    /// Judges every threshold at `now` (seconds since the monitor began)
    /// in stage `stage` with its figures; returns the abort to carry out,
    /// if any.
    fn judge(
        &self,
        now: Duration,
        stage: Option<&str>,
        figures: impl Fn(&Threshold) -> Figures,
    ) -> Option<AbortScope> {
        let mut abort = None;
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let s = &mut *guard;
        for (i, t) in self.thresholds.iter().enumerate() {
            let gauge = self
                .families
                .ok
                .with_label_values(&[&self.workload, &t.name]);
            let Some(stage) = stage.filter(|st| t.applies_in(st)) else {
                s.trackers[i].reset();
                s.values[i] = None;
                gauge.set(1);
                continue;
            };
            let f = figures(t);
            let value = t.check.value(&f);
            s.values[i] = value;
            let update = s.trackers[i].update(t, now, t.check.passes(&f));
            match update.crossed {
                Some(false) => {
                    self.families
                        .breaches
                        .with_label_values(&[&self.workload, &t.name])
                        .inc();
                    let per_stage = s
                        .stage_breaches
                        .entry(stage.to_owned())
                        .or_insert_with(|| vec![0; self.thresholds.len()]);
                    per_stage[i] += 1;
                    tracing::warn!(
                        workload = %self.workload,
                        stage,
                        threshold = %t.name,
                        value = value.unwrap_or(f64::NAN),
                        window = %humantime::format_duration(t.window),
                        "threshold failing"
                    );
                }
                Some(true) => tracing::info!(
                    workload = %self.workload,
                    stage,
                    threshold = %t.name,
                    value = value.unwrap_or(f64::NAN),
                    "threshold passing again"
                ),
                None => {}
            }
            gauge.set(i64::from(s.trackers[i].ok != Some(false)));
            if update.abort {
                tracing::error!(
                    workload = %self.workload,
                    stage,
                    threshold = %t.name,
                    scope = ?t.abort,
                    exit = super::EXIT_THRESHOLD_ABORT,
                    "threshold failed with abort_on_fail: stopping"
                );
                abort = Some(match (abort, t.abort) {
                    (Some(AbortScope::Run), _) | (_, AbortScope::Run) => AbortScope::Run,
                    _ => AbortScope::Workload,
                });
            }
        }
        abort
    }
}

/// Watches `book`'s thresholds once a second until `stop` fires, the
/// counts read from `totals` (the workload's operations ok, in error and
/// missed so far). An abort cancels `workload` (this workload) or `run`
/// (all of them).
pub(crate) async fn watch(
    book: Arc<ThresholdBook>,
    metrics: WorkloadMetrics,
    totals: impl Fn() -> (u64, u64, u64),
    stop: CancellationToken,
    workload: CancellationToken,
    run: CancellationToken,
) {
    let keep = book
        .thresholds
        .iter()
        .map(|t| t.window.as_secs() as usize)
        .max()
        .unwrap_or(60)
        .max(1);
    let op_index: Vec<Option<usize>> = book
        .thresholds
        .iter()
        .map(|t| {
            t.op.as_deref()
                .and_then(|name| metrics.ops().iter().position(|o| o.name() == name))
        })
        .collect();
    let mut all = CountWindow::default();
    let mut per_op: Vec<CountWindow> = vec![CountWindow::default(); metrics.ops().len()];
    let mut stage: Option<String> = None;
    let begun = tokio::time::Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        // A capacity search judges each probe whole, and its probes above
        // the capacity fail by design: the sliding window leaves them be.
        let now_stage = metrics.stage().filter(|_| !metrics.capacity.searching());
        if now_stage != stage {
            all.clear();
            per_op.iter_mut().for_each(CountWindow::clear);
            stage = now_stage;
        }
        let (ok, errors, missed) = totals();
        all.push_totals(ok, errors, missed, keep);
        for (w, o) in per_op.iter_mut().zip(metrics.ops()) {
            w.push_totals(o.ok_total(), o.error_total(), 0, keep);
        }
        let figures = |t: &Threshold| {
            let i = book.thresholds.iter().position(|x| x.name == t.name);
            let op = i.and_then(|i| op_index[i]);
            let secs = t.window.as_secs() as usize;
            let (ok, error, missed) = match op {
                Some(o) => per_op[o].sum(secs),
                None => all.sum(secs),
            };
            let lat = metrics.latency_over(op, t.window);
            Figures {
                ok,
                error,
                missed,
                p50: lat.p50,
                p99: lat.p99,
                p999: lat.p999,
            }
        };
        match book.judge(begun.elapsed(), stage.as_deref(), figures) {
            Some(AbortScope::Run) => {
                book.aborted.store(true, Ordering::SeqCst);
                run.cancel();
                return;
            }
            Some(AbortScope::Workload) => {
                book.aborted.store(true, Ordering::SeqCst);
                workload.cancel();
                return;
            }
            None => {}
        }
    }
}
