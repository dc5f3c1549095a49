//! A capacity search stage, run by the controller in place of the stage's
//! own level: each probe is published as a hold at its rate for its settle
//! time and judged length, with the settle time as the warm-up its report
//! leaves out; once its operations have settled, the stage's thresholds
//! judge the probe's report whole, and [`Search`] picks the next rate.
//! Each probe is an occurrence of the search stage in the run log, with
//! its rate and verdict (`probe`), the last with the search's result.
//!
//! In a cluster the search is of the cluster's total rate: each member
//! runs its share of every probe, and the probe is judged once for all
//! from the members' reports together ([`crate::cluster::search`]), so
//! every member takes the same steps and finds the same capacity.

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::controller::settle;
use super::{ActiveStage, Published, StageLabel, StageState, WorkloadRun};
use crate::cluster::search::{Probe, ProbeEnd, Verdict};
use crate::cluster::{ClusterRun, Joined, Member};
use crate::control::ControlState;
use crate::report::live::{ReportContext, StageCollector};
use crate::report::{ProbeReport, SearchResultReport, StageReport};
use crate::schedule::search::{ProbeResult, SearchEnd, JUDGE_ALLOWANCE};
use crate::schedule::{Search, Stage};

/// One search stage occurrence: what it needs from the controller.
pub(super) struct SearchStage<'a> {
    pub run: &'a WorkloadRun,
    pub publish: &'a watch::Sender<Published>,
    pub cancel: &'a CancellationToken,
    pub control: &'a mut watch::Receiver<ControlState>,
    pub reports: &'a Arc<ReportContext>,
    pub stage: &'a Stage,
    pub index: usize,
    /// The stage's occurrence count: one per probe.
    pub cycle: &'a mut u64,
    /// The stage's scheduled end: no probe runs past it.
    pub end: Instant,
    /// In a cluster: its coordination, the epoch joined, and the search
    /// occurrence's key (the same on every member).
    pub cluster: Option<(&'a ClusterRun, &'a Joined, String)>,
}

/// A probe's verdict, from this host's report or the cluster's.
struct Judged {
    passed: bool,
    error_ratio: f64,
    p99: Duration,
    /// When the next probe may start (a cluster's verdict names it).
    next: Option<Instant>,
}

/// Why a probe ended before its time.
enum Cut {
    Cancelled,
    Control,
}

impl SearchStage<'_> {
    /// Runs the search; returns when it ended, `None` when cancelled.
    pub(super) async fn run(mut self) -> Option<Instant> {
        let spec = self
            .stage
            .search_spec()
            .expect("a search stage has a spec")
            .clone();
        let name = self.stage.name().to_owned();
        tracing::info!(workload = %self.run.name, stage = %name, "capacity search begins: {spec}");
        let mut search = Search::new(spec.clone());
        // The last probe's report, held open until the search knows
        // whether it was the last (its result goes on it).
        let mut last: Option<(Arc<StageCollector>, ProbeReport)> = None;
        // A cluster's members start each probe at the same instant (the
        // one the start's or the last probe's verdict names), so that
        // their reports of it are one occurrence with one start.
        let (mut shared_start, mut interrupted) = self.begin(&name).await?;
        while let Some(rate) = search.next_rate().filter(|_| !interrupted) {
            let length = spec.settle + spec.probe_length(rate);
            let start = shared_start.take().unwrap_or_else(Instant::now);
            if start + length > self.end {
                search.out_of_time();
                break;
            }
            if *self.control.borrow_and_update() != ControlState::default() {
                interrupted = true;
                break;
            }
            if let Some((collector, probe)) = last.take() {
                collector.set_probe(probe);
            }
            let (collector, cut, ended, landed) = self
                .probe(
                    &name,
                    (rate, spec.settle),
                    (start, length),
                    search.probes().len() + 1,
                )
                .await;
            match cut {
                Some(Cut::Cancelled) => {
                    collector.finish(ended, true);
                    self.run.metrics.capacity.probing(0.0);
                    return None;
                }
                Some(Cut::Control) => {
                    collector.finish(ended, true);
                    interrupted = true;
                    break;
                }
                None => collector.finish(ended, false),
            }
            let report = collector.report();
            let number = search.probes().len() as u32 + 1;
            let judged = match self.judge(rate, number, &report, landed, &collector).await {
                Ok(j) => j,
                Err(None) => {
                    self.run.metrics.capacity.probing(0.0);
                    return None;
                }
                Err(Some(why)) => {
                    tracing::warn!(workload = %self.run.name, stage = %name, "capacity probe {number} not judged: {why}; the search ends without a result");
                    let error_ratio = verdict(&report, landed).error_ratio;
                    last = Some((
                        collector,
                        probe_report(number, rate, "unjudged", error_ratio),
                    ));
                    interrupted = true;
                    break;
                }
            };
            let result = ProbeResult {
                rate,
                passed: judged.passed,
                error_ratio: judged.error_ratio,
            };
            search.record(result);
            self.run.metrics.capacity.judged(result.passed);
            log_probe(self.run, &name, number, result, &judged, landed);
            // A cluster's members start the next probe (or end the search)
            // together, at the instant its verdict names.
            if let Some(next) = judged.next {
                shared_start = Some(next);
                if !self.wait_for(next).await {
                    return None;
                }
            }
            let outcome = if result.passed { "pass" } else { "fail" };
            let number = search.probes().len() as u32;
            last = Some((
                collector,
                probe_report(number, rate, outcome, result.error_ratio),
            ));
        }
        self.conclude(&name, &search, interrupted, last);
        Some(Instant::now().min(self.end))
    }

    /// Runs probe `number` at `rate` from `start` for `length`, its first
    /// `warmup` (the search's settle time) left out of its report:
    /// publishes it as a hold, holds it, counts what was never claimed,
    /// then waits (up to the judging allowance) for every worker to let go
    /// of it. Returns its report's collector, why it was cut short if it
    /// was, when it ended and whether every operation had landed.
    async fn probe(
        &mut self,
        name: &str,
        (rate, warmup): (f64, Duration),
        (start, length): (Instant, Duration),
        number: usize,
    ) -> (Arc<StageCollector>, Option<Cut>, Instant, bool) {
        let probe = Stage::rate(name, self.member().rate(rate), length)
            .and_then(|s| s.with_warmup(warmup))
            .expect("a probe's rate is positive and its settle shorter than it");
        let collector =
            StageCollector::new(self.reports.clone(), &probe, self.index, *self.cycle, start);
        *self.cycle += 1;
        let active = Arc::new(ActiveStage {
            stage: probe,
            start,
            next_ticket: AtomicU64::new(0),
            count: None,
            report: collector.clone(),
        });
        let _ = self.publish.send(Published::Stage(active.clone()));
        self.targets(rate, number);
        let cut = self.hold(start + length).await;
        let ended = Instant::now().min(start + length);
        settle(self.run, &active, ended);
        let _ = self.publish.send(Published::Idle);
        // Every worker lets go of the probe once its operation is
        // done: then the report holds every operation of the probe.
        let landed = wait_until(JUDGE_ALLOWANCE, || Arc::strong_count(&active) == 1).await;
        drop(active);
        (collector, cut, ended, landed)
    }

    /// Waits until `next`, the instant a cluster's verdict names. False
    /// when the run is cancelled first (the probing gauge then reads 0).
    async fn wait_for(&self, next: Instant) -> bool {
        tokio::select! {
            _ = tokio::time::sleep_until(next) => true,
            _ = self.cancel.cancelled() => {
                self.run.metrics.capacity.probing(0.0);
                false
            }
        }
    }

    /// Ends the search: its result goes on the last probe's report, the
    /// probing gauge reads 0, and the capacity found is exported and
    /// logged (an interrupted search has none).
    fn conclude(
        &self,
        name: &str,
        search: &Search,
        interrupted: bool,
        last: Option<(Arc<StageCollector>, ProbeReport)>,
    ) {
        let end = if interrupted {
            "interrupted"
        } else {
            search.end().unwrap_or(SearchEnd::OutOfTime).as_str()
        };
        let capacity = search.capacity();
        if let Some((collector, mut probe)) = last {
            probe.result = Some(SearchResultReport {
                capacity,
                end: end.to_owned(),
                probes: search.probes().len() as u32,
            });
            collector.set_probe(probe);
        }
        self.run.metrics.capacity.probing(0.0);
        if interrupted {
            tracing::warn!(workload = %self.run.name, stage = %name, "capacity search interrupted by runtime control (pause, set-rate, scale): no result");
        } else {
            let now = chrono::Utc::now();
            self.run
                .metrics
                .capacity
                .found(capacity, now.timestamp_millis() as f64 / 1000.0);
            tracing::info!(workload = %self.run.name, stage = %name, "capacity search ended ({end}) after {} probes: capacity {capacity} ops/s", search.probes().len());
        }
    }

    /// Where the search starts: alone, now; in a cluster, at the instant
    /// the members meet at (`(Some(at), false)`), or not at all when one
    /// never comes (`(None, true)`: interrupted). `None` when cancelled.
    async fn begin(&self, name: &str) -> Option<(Option<Instant>, bool)> {
        if self.cluster.is_none() {
            return Some((None, false));
        }
        match self.start_together().await {
            Ok(at) => Some((Some(at), false)),
            Err(None) => None,
            Err(Some(why)) => {
                tracing::warn!(workload = %self.run.name, stage = %name, "capacity search not started: {why}");
                Some((None, true))
            }
        }
    }

    /// Waits until every member of the cluster has reached the search,
    /// then until the instant they start its first probe at.
    /// `Err(None)`: cancelled; `Err(Some(why))`: some member never came.
    async fn start_together(&self) -> Result<Instant, Option<String>> {
        let (cluster, joined, key) = self.cluster.as_ref().expect("in a cluster");
        let probe = Probe {
            workload: &self.run.name,
            joined,
            search: key,
            number: 0,
        };
        let ready = |_: Vec<()>, _| Verdict {
            passed: true,
            error_ratio: 0.0,
            p99: Duration::ZERO,
        };
        let wait = cluster.coord.lease();
        match cluster
            .probe_end(&probe, &(), true, ready, wait, self.cancel)
            .await
        {
            ProbeEnd::Judged { next, .. } => {
                tokio::select! {
                    _ = tokio::time::sleep_until(next) => Ok(next),
                    _ = self.cancel.cancelled() => Err(None),
                }
            }
            ProbeEnd::Unjudged(why) => Err(Some(why)),
            ProbeEnd::Cancelled => Err(None),
        }
    }

    /// This member (a lone daemon is member 0 of 1).
    fn member(&self) -> Member {
        self.cluster
            .as_ref()
            .map_or(Member::SOLE, |(c, _, _)| c.member())
    }

    /// Judges probe `number` at `rate` from this member's `report`: alone,
    /// by the stage's thresholds over it; in a cluster, once for all
    /// members from their reports merged. `Err(None)`: cancelled;
    /// `Err(Some(why))`: the cluster could not judge it.
    async fn judge(
        &self,
        rate: f64,
        number: u32,
        report: &StageReport,
        landed: bool,
        collector: &StageCollector,
    ) -> Result<Judged, Option<String>> {
        let Some((cluster, joined, key)) = &self.cluster else {
            let v = verdict(report, landed);
            return Ok(Judged {
                passed: v.passed,
                error_ratio: v.error_ratio,
                p99: v.p99,
                next: None,
            });
        };
        let probe = Probe {
            workload: &self.run.name,
            joined,
            search: key,
            number,
        };
        let judge = |parts: Vec<StageReport>, landed: bool| {
            let mut all = crate::report::merge::merge(parts);
            all.thresholds = collector.verdicts(&all);
            verdict(&all, landed)
        };
        // The others' last operations land within the same allowance.
        let wait = cluster.coord.lease() + JUDGE_ALLOWANCE;
        tracing::debug!(workload = %self.run.name, "capacity probe {number} at {rate} ops/s: waiting for the cluster's verdict");
        match cluster
            .probe_end(&probe, report, landed, judge, wait, self.cancel)
            .await
        {
            ProbeEnd::Judged { verdict, next } => Ok(Judged {
                passed: verdict.passed,
                error_ratio: verdict.error_ratio,
                p99: verdict.p99,
                next: Some(next),
            }),
            ProbeEnd::Unjudged(why) => Err(Some(why)),
            ProbeEnd::Cancelled => Err(None),
        }
    }

    /// The target gauges and `/status` (and so the progress line) for
    /// probe `number` at `rate`.
    fn targets(&self, rate: f64, number: usize) {
        let run = self.run;
        // The probe's rate is the cluster's; this host runs its share.
        let share = self.member().rate(rate);
        run.metrics.capacity.probing(rate);
        run.metrics.target_rate.set(share);
        run.metrics.target_concurrency.set(0);
        run.status.set_stage(StageLabel {
            index: Some(self.index),
            name: format!("{} (capacity probe {number})", self.stage.name()),
            rate: share,
            concurrency: 0,
            state: StageState::Running,
        });
    }

    /// Holds the probe until `until`, beating the heartbeat; ends it early
    /// when the run is cancelled or runtime control changes.
    async fn hold(&mut self, until: Instant) -> Option<Cut> {
        loop {
            self.run.status.heartbeat.beat();
            let tick = (Instant::now() + Duration::from_secs(1)).min(until);
            tokio::select! {
                _ = tokio::time::sleep_until(tick) => {}
                changed = self.control.changed() => {
                    if changed.is_ok() && *self.control.borrow_and_update() != ControlState::default() {
                        return Some(Cut::Control);
                    }
                }
                _ = self.cancel.cancelled() => return Some(Cut::Cancelled),
            }
            if Instant::now() >= until {
                return None;
            }
        }
    }
}

/// A probe's verdict from its report (this host's, or the cluster's
/// parts merged): it passes when every threshold of its stage passed over
/// the judged part (none without data), and every operation had landed.
fn verdict(report: &StageReport, landed: bool) -> Verdict {
    let finished = report.operations.ok + report.operations.error;
    let error_ratio = if finished == 0 {
        0.0
    } else {
        report.operations.error as f64 / finished as f64
    };
    let passed = landed
        && !report.thresholds.is_empty()
        && report.thresholds.iter().all(|v| v.verdict == "pass");
    Verdict {
        passed,
        error_ratio,
        p99: Duration::from_nanos(report.latency_ns.p99),
    }
}

/// Probe `number`'s part of its stage report; the search's result goes on
/// the last one.
fn probe_report(number: u32, rate: f64, verdict: &str, error_ratio: f64) -> ProbeReport {
    ProbeReport {
        number,
        rate,
        verdict: verdict.to_owned(),
        error_ratio,
        result: None,
    }
}

/// Logs probe `number`'s verdict: pass or fail, its p99 and error ratio.
fn log_probe(
    run: &WorkloadRun,
    name: &str,
    number: u32,
    result: ProbeResult,
    judged: &Judged,
    landed: bool,
) {
    tracing::info!(
        workload = %run.name,
        stage = %name,
        "capacity probe {number} at {} ops/s: {} (p99 {:?}, errors {:.2} %{})",
        result.rate,
        if result.passed { "pass" } else { "fail" },
        judged.p99,
        result.error_ratio * 100.0,
        if landed { "" } else { ", operations still in flight: failed" },
    );
}

/// Polls `done` every 5 ms until it holds (true) or `limit` passes (false).
async fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if done() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
