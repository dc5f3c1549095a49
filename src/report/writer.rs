//! The report task: writes each stage's report once every operation of
//! the stage has finished or been abandoned (every holder of its
//! [`StageCollector`] has let go), as journal lines and one run-log line
//! per stage. An audited workload's reports make a detour through the
//! audit's verification task (its stage-end pass adds the audit's
//! figures), which hands them back with [`ReportWriter::write`]. The engines feed it over a channel; the file is appended on
//! a blocking thread, never on a runtime worker, and nothing is written
//! from `Drop`. The task ends once every [`ReportWriter`] is gone and every
//! pending stage is written: the daemon waits for it before it exits.
//!
//! [`StageCollector`]: super::live::StageCollector

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;

use super::live::StageFigures;
use super::{append, RunInfo, StageReport};

/// What the report task is handed.
enum Due {
    /// A stage whose report is due once `open` closes.
    Closing {
        figures: Arc<StageFigures>,
        open: mpsc::Receiver<()>,
    },
    /// A finished report, to write now.
    Ready(Box<StageReport>),
}

/// Hands finished stages to the report task. Cloning shares the task.
#[derive(Debug, Clone)]
pub struct ReportWriter {
    run: Arc<RunInfo>,
    tx: mpsc::UnboundedSender<Due>,
}

impl std::fmt::Debug for Due {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Due::Closing { .. } => "Closing",
            Due::Ready(_) => "Ready",
        })
    }
}

/// The report task of a run, to be spawned (or dropped, where reports do
/// not matter).
pub type ReportTask = Pin<Box<dyn Future<Output = ()> + Send>>;

impl ReportWriter {
    /// The writer of run `run`'s reports and the task that writes them.
    pub fn new(run: RunInfo) -> (ReportWriter, ReportTask) {
        let run = Arc::new(run);
        let (tx, rx) = mpsc::unbounded_channel();
        let task = Box::pin(write_reports(run.clone(), rx));
        (ReportWriter { run, tx }, task)
    }

    /// The run the reports belong to.
    pub fn run(&self) -> &Arc<RunInfo> {
        &self.run
    }

    /// Reports `figures` once `open` closes (every sender dropped).
    pub(super) fn close_when_done(&self, figures: Arc<StageFigures>, open: mpsc::Receiver<()>) {
        // A writer whose task is gone (stopped, or never spawned) drops the
        // report: nothing else could write it.
        let _ = self.tx.send(Due::Closing { figures, open });
    }

    /// Writes a finished report (one a [`ReportSink`] took and is done
    /// with). Without a task to write it (the run is over), it goes to the
    /// journal and the run log from here.
    ///
    /// [`ReportSink`]: super::live::ReportSink
    pub fn write(&self, report: StageReport) {
        if let Err(mpsc::error::SendError(Due::Ready(r))) =
            self.tx.send(Due::Ready(Box::new(report)))
        {
            journal(&r);
            if let Some(path) = &self.run.log {
                let mut r = r;
                r.config = self.run.take_config();
                if let Err(e) = append(path, &r) {
                    tracing::warn!(workload = %r.workload, stage = %r.stage, "cannot append the stage report to the run log: {e}");
                }
            }
        }
    }
}

/// Writes the reports of stages as they close, in the order they close.
async fn write_reports(run: Arc<RunInfo>, mut rx: mpsc::UnboundedReceiver<Due>) {
    let mut pending = FuturesUnordered::new();
    let mut open = true;
    loop {
        tokio::select! {
            due = rx.recv(), if open => match due {
                Some(Due::Closing { figures, mut open }) => pending.push(async move {
                    // Nothing is ever sent: this returns when every handle is gone.
                    let _ = open.recv().await;
                    figures
                }),
                Some(Due::Ready(report)) => write(&run, *report).await,
                None => open = false,
            },
            Some(figures) = pending.next() => {
                let report = figures.report();
                match figures.sink() {
                    Some(sink) if !within_warmup(&report) => sink.submit(report),
                    _ => write(&run, report).await,
                }
            }
            else => return,
        }
    }
}

/// Whether a stage ended within its warm-up: nothing to report.
fn within_warmup(r: &StageReport) -> bool {
    r.duration_seconds <= 0.0 && r.operations.ok + r.operations.error == 0
}

/// Writes one report: journal lines, then its run-log line if the run has
/// a log. A stage that ended within its warm-up has nothing to report.
async fn write(run: &RunInfo, r: StageReport) {
    if within_warmup(&r) {
        tracing::info!(workload = %r.workload, stage = %r.stage, "stage ended within its warm-up: no report");
        return;
    }
    let mut r = r;
    if r.shard_documents.is_none() {
        if let Some(counter) = run.shards.get() {
            r.shard_documents = counter.documents(&r.workload).await;
        }
    }
    if let Some(tap) = &run.tap {
        tap.keep(&r);
    }
    journal(&r);
    let Some(path) = run.log.clone() else {
        return;
    };
    r.config = run.take_config();
    let (workload, stage) = (r.workload.clone(), r.stage.clone());
    let written = tokio::task::spawn_blocking(move || append(&path, &r)).await;
    match written {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            tracing::warn!(workload = %workload, stage = %stage, "cannot append the stage report to the run log: {e}")
        }
        Err(e) => {
            tracing::warn!(workload = %workload, stage = %stage, "the run log write did not finish: {e}")
        }
    }
}

/// The journal lines of a report: the stage, its count-based batches if
/// any, one line per scheduled operation with its steps, its failovers and
/// its audit.
fn journal(r: &StageReport) {
    let l = &r.latency_ns;
    tracing::info!(
        run_id = %r.run_id,
        workload = %r.workload,
        stage = %r.stage,
        stage_index = r.stage_index,
        cycle = r.cycle,
        partial = r.partial,
        duration_s = log_s(r.duration_seconds),
        ops_ok = r.operations.ok,
        ops_error = r.operations.error,
        ops_per_sec = log_rate(r.ops_per_sec),
        ips_75 = r.ips_75,
        ips_95 = r.ips_95,
        ips_99 = r.ips_99,
        p50_ms = log_ms(l.p50),
        p95_ms = log_ms(l.p95),
        p99_ms = log_ms(l.p99),
        p999_ms = log_ms(l.p999),
        max_ms = log_ms(l.max),
        missed = r.missed,
        "stage report: {} {}: {} ok, {} errors in {:.1}s, {:.1} ops/s (ips.75/95/99 {}/{}/{}), latency p50 {:.3} ms p99 {:.3} ms p99.9 {:.3} ms max {:.3} ms, {} missed",
        r.workload, r.stage, r.operations.ok, r.operations.error, r.duration_seconds, r.ops_per_sec,
        r.ips_75, r.ips_95, r.ips_99, to_ms(l.p50), to_ms(l.p99), to_ms(l.p999), to_ms(l.max), r.missed,
    );
    journal_count(r);
    journal_ops(r);
    journal_failovers(r);
    journal_audit(r);
}

/// Nanoseconds as milliseconds.
fn to_ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// A log field in milliseconds, rounded to the microsecond (log fields are
/// rounded; the run log keeps full precision).
fn log_ms(ns: u64) -> f64 {
    mongoload_loglimit::round(to_ms(ns), 3)
}

/// A log field in seconds, rounded to the millisecond.
fn log_s(s: f64) -> f64 {
    mongoload_loglimit::round(s, 3)
}

/// A log field's rate, rounded to 0.1.
fn log_rate(r: f64) -> f64 {
    mongoload_loglimit::round(r, 1)
}

/// A count-based stage's line: its operations and each worker's share.
fn journal_count(r: &StageReport) {
    if let Some(c) = &r.count {
        let secs: Vec<String> = c
            .workers
            .iter()
            .map(|w| format!("{}:{}/{:.3}s", w.worker, w.operations, w.seconds))
            .collect();
        tracing::info!(
            run_id = %r.run_id,
            workload = %r.workload,
            stage = %r.stage,
            count = c.operations,
            per_worker = c.per_worker,
            elapsed_s = log_s(r.duration_seconds),
            workers = %secs.join(" "),
            "stage report: {} {}: {} operations{} in {:.3}s; worker:operations/time {}",
            r.workload, r.stage, c.operations, if c.per_worker { " per worker" } else { "" },
            r.duration_seconds, secs.join(" "),
        );
    }
}

/// One line per scheduled operation, its steps' figures in one field.
fn journal_ops(r: &StageReport) {
    for o in &r.ops {
        let steps: Vec<String> = o
            .steps
            .iter()
            .map(|s| {
                format!(
                    "{} {} ok {} errors p99 {:.3} ms",
                    s.step,
                    s.requests.ok,
                    s.requests.error,
                    to_ms(s.latency_ns.p99)
                )
            })
            .collect();
        let l = &o.latency_ns;
        tracing::info!(
            run_id = %r.run_id,
            workload = %r.workload,
            stage = %r.stage,
            op = %o.op,
            ops_ok = o.operations.ok,
            ops_error = o.operations.error,
            ops_per_sec = log_rate(o.ops_per_sec),
            p50_ms = log_ms(l.p50),
            p99_ms = log_ms(l.p99),
            max_ms = log_ms(l.max),
            steps = %steps.join("; "),
            "stage report: {} {} op {}: {} ok, {} errors, {:.1} ops/s, latency p50 {:.3} ms p99 {:.3} ms; steps: {}",
            r.workload, r.stage, o.op, o.operations.ok, o.operations.error, o.ops_per_sec,
            to_ms(l.p50), to_ms(l.p99), steps.join("; "),
        );
    }
}

/// One line per failover the stage saw.
fn journal_failovers(r: &StageReport) {
    for f in &r.failovers {
        let secs = |s: Option<f64>| s.map_or("-".to_owned(), |s| format!("{s:.3}s"));
        let on = f
            .shard
            .as_ref()
            .map_or(String::new(), |s| format!(" on shard {s}"));
        tracing::info!(
            run_id = %r.run_id,
            workload = %r.workload,
            stage = %r.stage,
            failover_at = %f.at,
            to = %f.to,
            shard = f.shard.as_deref(),
            no_primary_s = f.no_primary_seconds.map(log_s),
            write_outage_s = f.write_outage_seconds.map(log_s),
            "stage report: {} {}: failover{on} at {} to {} (from {}): {} without a primary, write outage {}",
            r.workload, r.stage, f.at, f.to, f.from.as_deref().unwrap_or("unknown"),
            secs(f.no_primary_seconds), secs(f.write_outage_seconds),
        );
    }
}

/// The audit's line: ids acknowledged, checked and missing.
fn journal_audit(r: &StageReport) {
    if let Some(a) = &r.audit {
        tracing::info!(
            run_id = %r.run_id,
            workload = %r.workload,
            stage = %r.stage,
            audit_acknowledged = a.acknowledged,
            audit_checked = a.checked,
            audit_missing = a.missing,
            audit_missing_total = a.missing_total,
            audit_complete = a.complete,
            "stage report: {} {}: audit: {} acknowledged ids, {} checks, {} missing in this stage ({} in all){}",
            r.workload, r.stage, a.acknowledged, a.checked, a.missing, a.missing_total,
            if a.complete { "" } else { "; the stage-end pass was cut short" },
        );
    }
}
