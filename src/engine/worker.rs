//! A worker: follows the published stage, claims its next operation
//! (an open-loop ticket, or its turn in closed loop), executes it request
//! by request, and records the operation once and each request under its
//! step.

use std::pin::{pin, Pin};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::{Instant, Sleep};
use tokio_util::sync::CancellationToken;

use super::count_stage::WorkerCount;
use super::worker_set::{Crew, SPARE_WORKERS};
use super::{ActiveStage, Published, WorkloadRun};
use crate::audit::Pending;
use crate::error_kind::classify;
use crate::error_kind::ErrorKind;
use crate::error_log::ErrorLog;
use crate::metrics::OpMetrics;
use crate::mongo::attempts::{self, Attempts};
use crate::report::live::StageBatch;
use crate::schedule::Mode;
use crate::workload::{Action, Body, Op, OpSource, Request};

/// The longest operation deadline: 30 years, as far as tokio's own
/// `sleep` goes (a longer `operation_timeout` would overflow `Instant`).
const FAR_FUTURE: Duration = Duration::from_secs(86_400 * 365 * 30);

/// One worker task of a workload.
pub(super) struct Worker {
    pub(super) id: u32,
    /// The workload's workers: this one spawns the next when it takes up
    /// an operation while no other worker is free.
    pub(super) crew: Arc<Crew>,
    pub(super) run: Arc<WorkloadRun>,
    /// The operations' metric handles, resolved once.
    pub(super) ops: Arc<[OpMetrics]>,
    /// The workload's error log, shared by its workers.
    pub(super) errors: Arc<ErrorLog>,
    /// What to do: the published stage.
    pub(super) stage: watch::Receiver<Published>,
    pub(super) stop: CancellationToken,
}

impl Worker {
    /// Starts a workload's crew: its first [`SPARE_WORKERS`] workers (or
    /// `run.workers`, if fewer), each given the same; later ones
    /// join as operations take them up ([`Crew`]).
    pub(super) fn start_crew(
        run: Arc<WorkloadRun>,
        ops: Arc<[OpMetrics]>,
        errors: Arc<ErrorLog>,
        stage: watch::Receiver<Published>,
        stop: CancellationToken,
    ) -> Arc<Crew> {
        let crew = Crew::new(run.workers);
        let template = Worker {
            id: 0,
            crew: crew.clone(),
            run,
            ops,
            errors,
            stage,
            stop,
        };
        for _ in 0..SPARE_WORKERS {
            if let Some(id) = crew.headcount.reserve() {
                template.hire(id);
            }
        }
        crew
    }

    /// Spawns worker `id` (reserved from the headcount) with what this
    /// one was given.
    fn hire(&self, id: u32) {
        let worker = Worker {
            id,
            crew: self.crew.clone(),
            run: self.run.clone(),
            ops: self.ops.clone(),
            errors: self.errors.clone(),
            stage: self.stage.clone(),
            stop: self.stop.clone(),
        };
        self.crew.spawn(worker.run());
    }

    /// Follows the published stage until it is done or the run stops:
    /// each turn claims an operation ([`Self::ticket`] in rate mode,
    /// [`Self::turn`] in concurrency mode) and executes it.
    pub(super) async fn run(mut self) {
        let mut source = self
            .run
            .workload
            .worker(self.id, self.run.seed.wrapping_add(u64::from(self.id)));
        let errors = self.errors.clone();
        let mut batch = StageBatch::for_worker(self.id);
        let mut count = WorkerCount::default();
        // The worker's own session for requests outside a transaction:
        // one server session reused by every operation instead of the
        // driver's implicit session per call.
        let mut session = WorkerSession::default();
        // The stage this worker follows, taken from the channel only when
        // the controller publishes: one version check per operation, no
        // lock and no shared reference count on the hot path.
        let mut published = Published::Idle;
        // Set after every wait on the channel (which marks what it saw as
        // seen): take the publication again.
        let mut stale = true;
        // The operations' deadline: one timer for the worker's life, moved
        // forward at each operation. Moving a registered timer later is one
        // atomic store in tokio (the wheel re-files it only when its old
        // time comes); a timer per operation was registered in the wheel
        // and removed from it, under its lock, every time.
        let mut deadline = pin!(tokio::time::sleep(Duration::ZERO));
        loop {
            if self.stop.is_cancelled() {
                return;
            }
            // A closed channel (the controller is gone) still holds its
            // last publication: Done.
            if std::mem::take(&mut stale) || self.stage.has_changed().unwrap_or(true) {
                published = self.stage.borrow_and_update().clone();
                batch.follow(match &published {
                    Published::Stage(active) => Some(&active.report),
                    _ => None,
                });
            }
            let turn = match &published {
                Published::Done => return,
                Published::Idle => self.next_publication().await,
                Published::Stage(active) => {
                    if !count.claim(active) {
                        // The count is reached: nothing more to send in
                        // this stage.
                        self.next_publication().await
                    } else {
                        match active.stage.mode() {
                            Mode::Rate => self.ticket(active, &mut count).await,
                            Mode::Concurrency => self.turn(active, &mut count).await,
                        }
                    }
                }
            };
            let from = match turn {
                Turn::Go(from) => from,
                Turn::Skip => continue,
                Turn::Republished => {
                    stale = true;
                    continue;
                }
                Turn::Stop => return,
            };
            // Boxed: an operation's state (the driver's futures, some KiB)
            // exists only while it runs, so an idle worker is small.
            Box::pin(self.execute(
                source.as_mut(),
                from,
                &errors,
                &mut batch,
                &mut session,
                deadline.as_mut(),
            ))
            .await;
            count.settle();
        }
    }

    /// Rate mode, an operation claimed: takes the stage's next ticket and
    /// sleeps until it is due. A ticket sent too late is counted missed
    /// (and settled) instead of sent.
    async fn ticket(&mut self, active: &ActiveStage, count: &mut WorkerCount) -> Turn {
        let i = active.next_ticket.fetch_add(1, Ordering::Relaxed);
        let Some(offset) = active.stage.intended_offset(i) else {
            // Past the end of this stage: wait for the next one.
            count.unclaim();
            return self.next_publication().await;
        };
        let intended = active.start + offset;
        // Biased: a ticket already due when the run stops is
        // still sent (the schedule asked for it and it was
        // claimed, so it is not counted missed); only tickets
        // still in the future are dropped on stop.
        tokio::select! {
            // A ticket already due is sent even if the stage
            // changed meanwhile: it was claimed, so dropping it
            // would lose it from the missed count.
            biased;
            _ = tokio::time::sleep_until(intended) => {}
            // Re-published (control change, next stage): this
            // ticket is not due yet and the new stage has its
            // own, so drop it rather than send a burst.
            changed = self.stage.changed() => {
                count.unclaim();
                return if changed.is_err() { Turn::Stop } else { Turn::Republished };
            }
            _ = self.stop.cancelled() => return Turn::Stop,
        }
        // The lag gauge is the controller's (once a tick); the
        // lateness of every send is a histogram.
        let lag = Instant::now().saturating_duration_since(intended);
        self.run.metrics.send_lateness.observe(lag.as_secs_f64());
        if lag > self.run.max_lag {
            self.run.metrics.missed_operations.inc();
            self.run.status.missed.fetch_add(1, Ordering::Relaxed);
            if active.report.measures(intended) {
                active.report.add_missed(1);
            }
            count.settle();
            return Turn::Skip;
        }
        Turn::Go(intended)
    }

    /// Concurrency mode, an operation claimed: goes now if the stage's
    /// level includes this worker; otherwise gives the claim back and
    /// sleeps until the level reaches it or the stage is published again.
    async fn turn(&mut self, active: &ActiveStage, count: &mut WorkerCount) -> Turn {
        let elapsed = Instant::now().saturating_duration_since(active.start);
        if self.id >= active.stage.concurrency_at(elapsed) {
            count.unclaim();
            // Not needed at this level: sleep until the level
            // reaches this worker (a ramp, a step), or park
            // until the stage is published again.
            let wake = active
                .stage
                .worker_needed_at(self.id, elapsed)
                .map(|t| active.start + t);
            tokio::select! {
                changed = self.stage.changed() => {
                    return if changed.is_err() { Turn::Stop } else { Turn::Republished };
                }
                _ = sleep_until_some(wake) => {}
                _ = self.stop.cancelled() => return Turn::Stop,
            }
            return Turn::Skip;
        }
        if self.stage.has_changed().unwrap_or(true) {
            count.unclaim();
            return Turn::Skip;
        }
        Turn::Go(Instant::now())
    }

    /// Waits for the next publication, to take it up.
    async fn next_publication(&mut self) -> Turn {
        if self.wait_change().await {
            Turn::Republished
        } else {
            Turn::Stop
        }
    }

    /// Waits for the next publication; false when the run is over.
    async fn wait_change(&mut self) -> bool {
        tokio::select! {
            changed = self.stage.changed() => changed.is_ok(),
            _ = self.stop.cancelled() => false,
        }
    }

    /// Runs one scheduled operation intended to start at `from`: its
    /// requests in order (each recorded under its step), then the
    /// operation once, with the latency of the whole. A failing request
    /// ends the operation, which fails with that request's error kind.
    async fn execute(
        &self,
        source: &mut dyn OpSource,
        from: Instant,
        errors: &ErrorLog,
        batch: &mut StageBatch,
        session: &mut WorkerSession,
        mut deadline: Pin<&mut Sleep>,
    ) {
        if let Some(id) = self.crew.headcount.busy() {
            self.hire(id);
        }
        let Op { op, body } = source.next_op();
        let metrics = &self.ops[op];
        self.run.metrics.inflight.inc();
        let sent = Instant::now();
        // One deadline for the whole operation, however many requests it
        // makes.
        let timeout = self.run.deployment.operation_timeout().min(FAR_FUTURE);
        deadline.as_mut().reset(sent + timeout);
        let mut at = OpAt {
            op,
            from,
            deadline,
            attempts: Attempts::default(),
        };
        let outcome = match body {
            Body::One(action) => {
                self.request(&mut at, 0, action, Within::Plain(session), batch)
                    .await
            }
            // Boxed: the composite paths' state (several requests, a
            // transaction's retries) would otherwise size every worker.
            Body::Steps(requests) => Box::pin(self.steps(&mut at, requests, batch, session)).await,
            Body::Transaction {
                requests,
                commit_step,
            } => Box::pin(self.transaction(&mut at, requests, commit_step, batch)).await,
        };
        let done = Instant::now();
        let latency = done.saturating_duration_since(from);
        self.run.metrics.inflight.dec();
        self.crew.headcount.free();
        metrics.record_service(done.saturating_duration_since(sent));
        batch.record(
            op,
            from,
            done,
            outcome.as_ref().map(|_| ()).map_err(|f| f.kind),
        );
        match outcome {
            Ok(docs) => {
                metrics.record_ok(latency, docs);
                self.run.status.ok.fetch_add(1, Ordering::Relaxed);
            }
            Err(f) => {
                metrics.record_error(latency, f.kind);
                self.run.status.errors.fetch_add(1, Ordering::Relaxed);
                let steps = &self.run.workload.ops()[op].steps;
                let step = f
                    .step
                    .and_then(|s| steps.get(s))
                    .map_or(metrics.name(), |s| &**s);
                errors.log(&self.run.name, metrics.name(), step, f.kind, &f.error);
            }
        }
    }

    /// Sends one request of step `step` of the operation `at` (in the
    /// worker's session or in a transaction) and records it under its
    /// step; a request still running at the operation's deadline fails
    /// with a timeout. Returns the documents that count as the operation's.
    /// An audited insert goes into the ledger once acknowledged, or, in a
    /// transaction, into its `acks` (they count once committed).
    async fn request(
        &self,
        at: &mut OpAt<'_>,
        step: usize,
        action: Action,
        within: Within<'_>,
        batch: &mut StageBatch,
    ) -> Result<u64, Failed> {
        let write = crate::audit::ids::is_write(&action);
        let audit = self.run.audit.as_ref().map(|a| &a.audit);
        let pending = audit.and_then(|a| a.before_send(&action));
        let sent = Instant::now();
        let deployment = &self.run.deployment;
        let (result, acks) = match within {
            Within::Plain(session) => {
                let in_session = session.get(deployment).await;
                let outcome = at
                    .bounded(pin!(deployment.execute(action, in_session)), write)
                    .await;
                let result = self.finish_request(at, step, sent, outcome, write, batch);
                if let Err(f) = &result {
                    session.after_error(f.kind);
                }
                (result, None)
            }
            Within::Transaction(session, acks) => {
                let outcome = at
                    .bounded(pin!(deployment.execute_in(action, session)), write)
                    .await;
                let result = self.finish_request(at, step, sent, outcome, write, batch);
                (result, Some(acks))
            }
        };
        if let (Some(p), Some(a)) = (pending, audit) {
            match (&result, acks) {
                (Ok(_), Some(acks)) => acks.push(p),
                (Ok(_), None) => a.acknowledge(p),
                (Err(_), _) => a.abandon(p),
            }
        }
        result
    }

    /// Records a request of step `step` of the operation `at`, sent at
    /// `sent`, that just returned `outcome` (`write`: it inserts, updates
    /// or deletes, so its outcome feeds the write-outage clock).
    fn finish_request(
        &self,
        at: &OpAt<'_>,
        step: usize,
        sent: Instant,
        outcome: Result<u64, mongodb::error::Error>,
        write: bool,
        batch: &mut StageBatch,
    ) -> Result<u64, Failed> {
        let done = Instant::now();
        let result = outcome.map_err(|error| Failed {
            step: Some(step),
            kind: classify(&error),
            error,
        });
        if write {
            self.run.failover.write_done(
                sent.into_std(),
                done.into_std(),
                &at.attempts,
                result.as_ref().map(|_| ()).map_err(|f| f.kind),
            );
        }
        let counted = match self.ops[at.op].step(step) {
            Some(m) => {
                m.record(
                    done.saturating_duration_since(sent),
                    result.as_ref().map(|d| *d).map_err(|f| f.kind),
                );
                m.counts_documents()
            }
            None => true,
        };
        batch.record_request(
            at.op,
            step,
            at.from,
            sent,
            done,
            result.as_ref().map(|_| ()).map_err(|f| f.kind),
        );
        result.map(|docs| if counted { docs } else { 0 })
    }

    /// Runs an operation's requests in order; the first failure ends it.
    async fn steps(
        &self,
        at: &mut OpAt<'_>,
        requests: Vec<Request>,
        batch: &mut StageBatch,
        session: &mut WorkerSession,
    ) -> Result<u64, Failed> {
        let mut docs = 0;
        for r in requests {
            docs += self
                .request(at, r.step, r.action, Within::Plain(&mut *session), batch)
                .await?;
        }
        Ok(docs)
    }

    /// Runs an operation's requests in one multi-document transaction and
    /// commits it (a request of `commit_step`). The whole transaction is
    /// retried, a few times at most, on a `TransientTransactionError`, and
    /// the commit on an `UnknownTransactionCommitResult`; every attempt's
    /// requests are counted, the operation once.
    async fn transaction(
        &self,
        at: &mut OpAt<'_>,
        requests: Vec<Request>,
        commit_step: usize,
        batch: &mut StageBatch,
    ) -> Result<u64, Failed> {
        use mongodb::error::{TRANSIENT_TRANSACTION_ERROR, UNKNOWN_TRANSACTION_COMMIT_RESULT};
        const ATTEMPTS: u32 = 5;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let mut session = at
                .bounded(pin!(self.run.deployment.start_transaction()), true)
                .await
                .map_err(|error| Failed {
                    step: None,
                    kind: classify(&error),
                    error,
                })?;
            let mut docs = 0;
            let mut failed = None;
            let mut acks = Vec::new();
            for r in &requests {
                let action = r.action.clone();
                match self
                    .request(
                        at,
                        r.step,
                        action,
                        Within::Transaction(&mut session, &mut acks),
                        batch,
                    )
                    .await
                {
                    Ok(n) => docs += n,
                    Err(f) => {
                        failed = Some(f);
                        break;
                    }
                }
            }
            if failed.is_none() {
                let mut commits = 0;
                failed = loop {
                    commits += 1;
                    let sent = Instant::now();
                    let outcome = at
                        .bounded(pin!(self.run.deployment.commit(&mut session)), true)
                        .await;
                    let outcome = outcome.map(|()| 0u64);
                    match self.finish_request(at, commit_step, sent, outcome, true, batch) {
                        Ok(_) => {
                            if let Some(a) = &self.run.audit {
                                acks.drain(..).for_each(|p| a.audit.acknowledge(p));
                            }
                            return Ok(docs);
                        }
                        Err(f)
                            if commits < ATTEMPTS
                                && f.error.contains_label(UNKNOWN_TRANSACTION_COMMIT_RESULT) => {}
                        Err(f) => break Some(f),
                    }
                };
            } else {
                // Within the operation's deadline, like its requests; errors
                // ignored (the server aborts an abandoned transaction by
                // itself, and the driver aborts it when the session drops).
                let _ = at
                    .bounded(pin!(self.run.deployment.abort(&mut session)), true)
                    .await;
            }
            // Not committed: its inserts are not acknowledged.
            if let Some(a) = &self.run.audit {
                acks.drain(..).for_each(|p| a.audit.abandon(p));
            }
            let Some(f) = failed else {
                return Ok(docs);
            };
            if attempt >= ATTEMPTS || !f.error.contains_label(TRANSIENT_TRANSACTION_ERROR) {
                return Err(f);
            }
        }
    }
}

/// An operation in flight: its index, its intended start, and the deadline
/// of the whole operation (one timer, however many requests it makes).
struct OpAt<'d> {
    op: usize,
    from: Instant,
    deadline: Pin<&'d mut Sleep>,
    /// The attempts (pool checkouts) of its last driver call.
    attempts: Attempts,
}

impl OpAt<'_> {
    /// Runs `call` until the operation's deadline; running out of time is
    /// an I/O `TimedOut` error (classified `timeout`). The driver can wait
    /// forever on a connection checkout (seen with a pool whose every
    /// handshake fails authentication), so no request goes unbounded.
    /// `call` is pinned by the caller (`pin!`): taken by value, the call's
    /// state (some KiB) was stored twice, as the argument and in the
    /// `select!`, and copied between the two. A `write`'s connection
    /// checkouts (one per attempt the driver sends) are left in
    /// `attempts`, for the failover clock (`Failover::write_done`); a
    /// read's are not kept.
    async fn bounded<T>(
        &mut self,
        call: impl std::future::Future<Output = Result<T, mongodb::error::Error>> + Unpin,
        write: bool,
    ) -> Result<T, mongodb::error::Error> {
        let mut call = pin!(attempts::watch(call, write));
        let outcome = tokio::select! {
            biased;
            outcome = call.as_mut() => outcome,
            () = self.deadline.as_mut() => {
                Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into())
            }
        };
        self.attempts = attempts::taken(call);
        outcome
    }
}

/// Where a request runs: outside a transaction (in the worker's session),
/// or in a transaction with the audited inserts it waits to commit.
enum Within<'s> {
    Plain(&'s mut WorkerSession),
    Transaction(&'s mut mongodb::ClientSession, &'s mut Vec<Pending>),
}

/// A worker's session for its requests outside transactions: one server
/// session for all its operations (one at a time), where the driver would
/// check an implicit session out and back in, on a task of its own, for
/// every call. Started on first use; given up after a network error or a
/// timeout (the server may still be running the abandoned call, and the
/// driver discards a session a network error made dirty); not used at all
/// on a deployment without sessions.
#[derive(Default)]
struct WorkerSession(Option<mongodb::ClientSession>);

impl WorkerSession {
    async fn get(
        &mut self,
        deployment: &crate::mongo::Deployment,
    ) -> Option<&mut mongodb::ClientSession> {
        if self.0.is_none() {
            self.0 = deployment.plain_session().await;
        }
        self.0.as_mut()
    }

    fn after_error(&mut self, kind: ErrorKind) {
        if matches!(kind, ErrorKind::Network | ErrorKind::Timeout) {
            self.0 = None;
        }
    }
}

/// What a worker does next in [`Worker::run`].
enum Turn {
    /// Execute an operation intended to start at this instant.
    Go(Instant),
    /// Loop again (the claim given back or settled).
    Skip,
    /// The stage was published again: take it up, then loop.
    Republished,
    /// The run is over.
    Stop,
}

/// Sleeps until `at`, or forever without one.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Why an operation failed: the request (step) that failed, its error and
/// error class. `step` is `None` when no request could be sent (a
/// transaction's session could not start).
struct Failed {
    step: Option<usize>,
    kind: ErrorKind,
    error: mongodb::error::Error,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `f` returns, without making one.
    fn future_size<A, F: FnOnce(A) -> R, R>(_: &F) -> usize {
        std::mem::size_of::<R>()
    }

    fn future_size6<A, B, C, D, E, G, F: FnOnce(A, B, C, D, E, G) -> R, R>(_: &F) -> usize {
        std::mem::size_of::<R>()
    }

    fn future_size7<A, B, C, D, E, G, H, F: FnOnce(A, B, C, D, E, G, H) -> R, R>(_: &F) -> usize {
        std::mem::size_of::<R>()
    }

    /// A worker waiting for its next operation holds no operation state:
    /// `execute` is boxed while it runs, the request's call is pinned in
    /// place (not passed by value to `bounded`, which stored it twice), and
    /// the deadline timer is the worker's, not each operation's. The bounds
    /// hold the idle worker (1,544 bytes in the debug build) and an
    /// operation's boxed state.
    #[test]
    fn an_idle_worker_is_small() {
        let worker = future_size(&Worker::run);
        let execute = future_size7(&Worker::execute);
        let request = future_size6(&Worker::request);
        println!("worker future: {worker} bytes; execute {execute}; request {request}");
        assert!(worker <= 2048, "a worker future of {worker} bytes");
        assert!(execute <= 3584, "an operation's state of {execute} bytes");
    }
}
