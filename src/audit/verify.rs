//! The audit's verification task, one per audited workload: checks the
//! ledger's ids against the server with `find({_id: {$in: […]}})` (the
//! primary, read concern `local`, only `_id` returned), in batches of
//! [`BATCH`]:
//!
//! - in the background, a pass after pass at `audit_rate` ids per second;
//! - in a full pass, as fast as one query at a time goes, after each
//!   failover the driver sees, at each stage end and on `ctl audit`. A stage's
//!   report waits for the pass that follows its end, then carries what the
//!   audit found since the previous report ([`AuditReport`]).
//!
//! A query that fails (no primary during an election, a timeout) is
//! counted in `mongoload_audit_errors_total{kind}` and retried with backoff
//! until it succeeds, the task is stopped, or it has failed for [`GIVE_UP`]
//! (the pass is then incomplete, and its stage report says so).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mongodb::bson::{doc, Bson, Document};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Audit, PassSummary, Trigger, BATCH};
use crate::error_kind::classify;
use crate::report::live::ReportSink;
use crate::report::writer::ReportWriter;
use crate::report::{AuditReport, StageReport, AUDIT_REPORT_IDS};

/// How often the background check runs and the gauges are refreshed.
const TICK: Duration = Duration::from_secs(1);

/// Longest wait between retries of a failed audit query.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// A pass whose queries have failed for this long gives up (it is then
/// incomplete): a stage report does not wait for a deployment that is down.
const GIVE_UP: Duration = Duration::from_secs(30);

type Submitted = StageReport;

/// Hands finished stage reports to the verification task.
struct Sink {
    tx: mpsc::UnboundedSender<Submitted>,
    writer: ReportWriter,
}

impl ReportSink for Sink {
    fn submit(&self, report: StageReport) {
        if let Err(mpsc::error::SendError(report)) = self.tx.send(report) {
            // The task is gone (stopped at the deadline): write it as it is.
            self.writer.write(report);
        }
    }
}

/// A running verification task.
pub(crate) struct Verifier {
    /// Where the workload's stage reports go (they are written after the
    /// stage-end pass).
    pub sink: Arc<dyn ReportSink>,
    /// Stops the task at once: reports still waiting are written with the
    /// audit as far as it got (`complete: false`).
    pub stop: CancellationToken,
    pub task: JoinHandle<()>,
}

/// Starts the verification task of `audit`: background checks at `rate`
/// ids/s (0: none), full passes after each change of `failovers`, at each
/// stage end and on request. Each query waits at most `timeout`. The
/// reports, once the audit's figures are in, go to `writer`. The task
/// ends once every holder of its sink is gone and the reports are written,
/// or when `stop` fires.
pub(crate) fn spawn(
    audit: Arc<Audit>,
    rate: f64,
    failovers: watch::Receiver<u64>,
    timeout: Duration,
    writer: ReportWriter,
) -> Verifier {
    let (tx, rx) = mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let task = Task {
        audit,
        rate,
        timeout,
        stop: stop.clone(),
        since_report: Delta::default(),
        missing_total: 0,
        background: Position::default(),
        background_checked: 0,
        allowance: 0.0,
        writer: writer.clone(),
    };
    Verifier {
        sink: Arc::new(Sink { tx, writer }),
        stop,
        task: tokio::spawn(task.run(rx, failovers)),
    }
}

/// Where a pass is: the collection and the cursor in its ledger.
#[derive(Default)]
struct Position {
    collection: usize,
    cursor: super::Cursor,
}

/// What the audit found since the last stage report.
#[derive(Default)]
struct Delta {
    checked: u64,
    missing: u64,
    ids: BTreeMap<String, Vec<serde_json::Value>>,
    listed: usize,
}

/// The outcome of one batch.
enum Step {
    /// Checked this many ids, this many newly missing.
    Checked(u64, u64),
    /// The pass is over.
    Done,
}

struct Task {
    audit: Arc<Audit>,
    /// Where the reports go once the audit's figures are in.
    writer: ReportWriter,
    rate: f64,
    timeout: Duration,
    stop: CancellationToken,
    since_report: Delta,
    /// Found missing since this task started.
    missing_total: u64,
    background: Position,
    /// Ids the background pass has checked so far.
    background_checked: u64,
    /// Ids the background check may still look at (rate × time).
    allowance: f64,
}

impl Task {
    async fn run(
        mut self,
        mut reports: mpsc::UnboundedReceiver<Submitted>,
        mut failovers: watch::Receiver<u64>,
    ) {
        let _ = failovers.borrow_and_update();
        let mut failovers_open = true;
        let mut tick = tokio::time::interval(TICK);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last_tick = Instant::now();
        let audit = self.audit.clone();
        loop {
            tokio::select! {
                biased;
                _ = self.stop.cancelled() => {
                    let mut pending = Vec::new();
                    while let Ok(r) = reports.try_recv() {
                        pending.push(r);
                    }
                    self.write_reports(pending, false);
                    return;
                }
                r = reports.recv() => {
                    let Some(first) = r else {
                        self.audit.refresh();
                        return;
                    };
                    let mut pending = vec![first];
                    while let Ok(r) = reports.try_recv() {
                        pending.push(r);
                    }
                    let complete = self.full_pass(Trigger::StageEnd).await;
                    self.write_reports(pending, complete);
                    if self.stop.is_cancelled() {
                        return;
                    }
                }
                changed = failovers.changed(), if failovers_open => {
                    if changed.is_err() {
                        failovers_open = false;
                        continue;
                    }
                    let _ = failovers.borrow_and_update();
                    self.full_pass(Trigger::Failover).await;
                }
                _ = audit.requested.notified() => {
                    self.full_pass(Trigger::Ctl).await;
                }
                _ = tick.tick() => {
                    let now = Instant::now();
                    let dt = now.duration_since(last_tick).as_secs_f64();
                    last_tick = now;
                    if self.rate > 0.0 {
                        self.allowance = (self.allowance + self.rate * dt).min(self.rate.max(1.0));
                        self.background_step().await;
                    }
                    self.audit.refresh();
                }
            }
        }
    }

    /// Checks what the background allowance permits, continuing the
    /// background pass where it stopped.
    async fn background_step(&mut self) {
        while self.allowance >= 1.0 && !self.stop.is_cancelled() {
            let max = (self.allowance as usize).clamp(1, BATCH);
            let mut pos = std::mem::take(&mut self.background);
            let step = self.step(&mut pos, max, Trigger::Background).await;
            self.background = pos;
            match step {
                Some(Step::Checked(n, newly)) => {
                    self.allowance -= n as f64;
                    self.background_checked += n;
                    if newly > 0 {
                        self.log_missing(Trigger::Background, newly);
                    }
                }
                Some(Step::Done) => {
                    self.background = Position::default();
                    // A pass over an empty ledger is not worth counting.
                    if std::mem::take(&mut self.background_checked) > 0 {
                        self.audit.handles.passes[0].inc();
                        self.audit.update_summary(|s| s.passes += 1);
                    }
                    break;
                }
                None => break,
            }
        }
    }

    /// A full pass over every ledger; returns whether it went through
    /// every id (false when stopped).
    async fn full_pass(&mut self, trigger: Trigger) -> bool {
        let started = Instant::now();
        self.audit.update_summary(|s| s.running = Some(trigger));
        let mut pos = Position::default();
        let (mut checked, mut newly) = (0u64, 0u64);
        let complete = loop {
            match self.step(&mut pos, BATCH, trigger).await {
                Some(Step::Checked(n, m)) => {
                    checked += n;
                    newly += m;
                }
                Some(Step::Done) => break true,
                None => break false,
            }
        };
        if complete {
            let i = Trigger::ALL.iter().position(|t| *t == trigger).unwrap_or(0);
            self.audit.handles.passes[i].inc();
        }
        self.audit.refresh();
        let seconds = started.elapsed().as_secs_f64();
        self.audit.update_summary(|s| {
            s.running = None;
            s.passes += u64::from(complete);
            s.last_pass = Some(PassSummary {
                trigger,
                finished: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
                seconds,
                checked,
                missing: newly,
                complete,
            });
        });
        if newly > 0 {
            self.log_missing(trigger, newly);
        } else {
            tracing::info!(
                workload = %self.audit.workload(),
                trigger = trigger.as_str(),
                checked,
                "audit pass ({}): {checked} acknowledged ids checked in {seconds:.2}s, none missing{}",
                trigger.as_str(),
                if complete { "" } else { " (cut short)" },
            );
        }
        complete
    }

    fn log_missing(&self, trigger: Trigger, newly: u64) {
        let s = self.audit.summary();
        tracing::error!(
            workload = %self.audit.workload(),
            trigger = trigger.as_str(),
            missing = newly,
            missing_now = s.missing,
            "audit ({}): {newly} acknowledged documents are missing from the server; {} missing in all, first: {}",
            trigger.as_str(),
            s.missing,
            s.missing_ids.join(", "),
        );
    }

    /// Checks the next batch of at most `max` ids from `pos`. `None` when
    /// stopped or given up.
    async fn step(&mut self, pos: &mut Position, max: usize, trigger: Trigger) -> Option<Step> {
        let mut batch = Vec::with_capacity(max);
        loop {
            let Some(ledger) = self.audit.ledgers.get(pos.collection) else {
                return Some(Step::Done);
            };
            ledger
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .ledger
                .batch(&mut pos.cursor, max, &mut batch);
            if !batch.is_empty() {
                break;
            }
            pos.collection += 1;
            pos.cursor = super::Cursor::new();
        }
        let c = pos.collection;
        if pos.cursor.is_done() {
            pos.collection += 1;
            pos.cursor = super::Cursor::new();
        }
        let found = self.query(c, &batch, trigger).await?;
        let absent = batch.iter().copied().filter(|id| !found.contains(id));
        let newly = self.audit.ledgers[c]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .ledger
            .confirm_missing(absent);
        let n = batch.len() as u64;
        let m = newly.len() as u64;
        self.audit.handles.checked.inc_by(n);
        self.audit.handles.missing.inc_by(m);
        self.missing_total += m;
        let d = &mut self.since_report;
        d.checked += n;
        d.missing += m;
        for id in newly {
            if d.listed == AUDIT_REPORT_IDS {
                break;
            }
            d.listed += 1;
            d.ids
                .entry(self.audit.names[c].clone())
                .or_default()
                .push(self.audit.json_id(id));
        }
        Some(Step::Checked(n, m))
    }

    /// The ids of `batch` the server has in collection `c`; retried until
    /// the query succeeds. `None` when stopped, or after failing for
    /// [`GIVE_UP`].
    async fn query(&self, c: usize, batch: &[u64], trigger: Trigger) -> Option<HashSet<u64>> {
        let keys: Vec<Bson> = batch.iter().map(|&id| self.audit.keys.key(id)).collect();
        // Found `_id`s map back through the batch (a hashed key cannot be
        // read back as its ledger id).
        let wanted: HashMap<String, u64> = keys
            .iter()
            .zip(batch)
            .map(|(k, &id)| (key_text(k), id))
            .collect();
        let filter = doc! { "_id": { "$in": keys } };
        let coll = &self.audit.collections[c];
        let mut backoff = Duration::from_millis(200);
        let mut failures = 0u32;
        let first_try = Instant::now();
        loop {
            let attempt = async {
                let mut cursor = coll
                    .find(filter.clone())
                    .projection(doc! { "_id": 1 })
                    .batch_size(BATCH as u32)
                    .await?;
                let mut found = HashSet::with_capacity(batch.len());
                while cursor.advance().await? {
                    let d: Document = cursor.deserialize_current()?;
                    if let Some(&id) = d.get("_id").and_then(|i| wanted.get(&key_text(i))) {
                        found.insert(id);
                    }
                }
                Ok::<_, mongodb::error::Error>(found)
            };
            let outcome = tokio::select! {
                r = tokio::time::timeout(self.timeout, attempt) => r,
                _ = self.stop.cancelled() => return None,
            };
            let kind = match outcome {
                Ok(Ok(found)) => return Some(found),
                Ok(Err(e)) => {
                    let kind = classify(&e);
                    if failures == 0 {
                        tracing::warn!(
                            workload = %self.audit.workload(),
                            trigger = trigger.as_str(),
                            error_kind = %kind,
                            "audit query failed, retrying: {e}"
                        );
                    }
                    kind
                }
                Err(_) => crate::error_kind::ErrorKind::Timeout,
            };
            failures += 1;
            self.audit
                .handles
                .errors
                .with_label_values(&[self.audit.workload(), kind.as_str()])
                .inc();
            if first_try.elapsed() >= GIVE_UP {
                tracing::warn!(
                    workload = %self.audit.workload(),
                    trigger = trigger.as_str(),
                    "audit queries have failed for {GIVE_UP:?}: this pass gives up"
                );
                return None;
            }
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = self.stop.cancelled() => return None,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Adds the audit's figures since the last report to the first of
    /// `reports` (the later ones, if several waited for one pass, get
    /// nothing new) and writes them all.
    fn write_reports(&mut self, reports: Vec<Submitted>, complete: bool) {
        if reports.is_empty() {
            return;
        }
        self.audit.refresh();
        let acknowledged = self.audit.summary().acknowledged;
        for mut report in reports {
            let d = std::mem::take(&mut self.since_report);
            report.audit = Some(AuditReport {
                acknowledged,
                checked: d.checked,
                missing: d.missing,
                missing_total: self.missing_total,
                missing_ids: d.ids,
                complete,
            });
            self.writer.write(report);
        }
    }
}

/// An `_id` as text to match found documents with their ledger ids: an
/// integer whatever its BSON width, a string as itself.
fn key_text(id: &Bson) -> String {
    match id {
        Bson::Int64(i) => i.to_string(),
        Bson::Int32(i) => i.to_string(),
        Bson::String(s) => format!("s:{s}"),
        other => format!("{other:?}"),
    }
}
