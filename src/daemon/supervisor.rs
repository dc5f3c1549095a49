//! The running plan: one engine task per workload, the state `/status` and
//! the control socket see, and live reload (SIGHUP). The daemon starts a
//! [`Supervisor`]; it runs until every workload's schedule has ended (or
//! the daemon is stopped) and applies new configs in between.
//!
//! Reload semantics: workloads are matched by name. Unchanged ones run on
//! untouched; one whose only changes are to stages after the one it runs
//! now (edited, added or removed) keeps running where it is and takes the
//! new stages when it reaches them; any other changed one (any key of its
//! `[[workloads]]` table) is drained (up to `run.shutdown_grace`) and
//! started again from its first stage, its prepare step re-run (it is
//! resumable: it loads only what is missing); removed ones stop; new ones
//! start. Counters continue (the
//! metrics registry hands back the same series for a known name) and
//! runtime control (pause, override, scale) stays with the workload's name.
//! Keys the process binds at start (`target.*`, `http.listen`,
//! `control.socket`, `run.log`) cannot change live: such a reload is refused as a
//! whole and the running plan goes on.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::audit::Audit;
use crate::config::{self, Config, ConfigError, WorkloadConfig};
use crate::control::{ControlMetrics, ControlState};
use crate::daemon::service;
use crate::daemon::status::{ControlSnapshot, WorkloadSnapshot};
use crate::engine::{self, AuditSetup, WorkloadRun, WorkloadStatus};
use crate::metrics::{Metrics, WorkloadMetrics};
use crate::mongo::Deployment;
use crate::schedule::Schedule;
use crate::workload::Workload;

/// One workload as `/status`, the control socket and the final summary
/// see it. Survives a restart of its engine by reload.
pub struct Slot {
    /// The config name (the `workload` label).
    pub name: String,
    /// The workload kind, as written in the config.
    pub kind: &'static str,
    /// Live figures.
    pub status: Arc<WorkloadStatus>,
    /// Runtime control; the engine holds a receiver.
    pub control: watch::Sender<ControlState>,
    /// The acknowledged-write audit of the running engine, if it has one.
    pub audit: Mutex<Option<Arc<Audit>>>,
    /// The running engine's metric handles (its operations' counters and
    /// latency windows), for the terminal's progress lines.
    pub metrics: Mutex<Option<WorkloadMetrics>>,
    /// The running engine's thresholds, if it has any.
    pub thresholds: Mutex<Option<Arc<crate::threshold::monitor::ThresholdBook>>>,
}

impl Slot {
    /// The workload now, as `/status`, `ctl status` and the final summary
    /// show it.
    pub fn snapshot(&self) -> WorkloadSnapshot {
        WorkloadSnapshot {
            name: self.name.clone(),
            kind: self.kind,
            stage: self.status.stage(),
            prepare: self.status.prepare(),
            control: ControlSnapshot::from(&*self.control.borrow()),
            operations_ok: self.status.ok.load(Ordering::Relaxed),
            operations_error: self.status.errors.load(Ordering::Relaxed),
            missed: self.status.missed.load(Ordering::Relaxed),
            audit: self.audit().map(|a| a.summary()),
            thresholds: self.thresholds().map_or_else(Vec::new, |t| t.status()),
            threshold_aborted: self.thresholds().is_some_and(|t| t.aborted()),
            fatal_exit: self.status.fatal(),
        }
    }

    /// The running engine's thresholds, if it has any.
    pub fn thresholds(&self) -> Option<Arc<crate::threshold::monitor::ThresholdBook>> {
        self.thresholds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The running engine's audit, if it has one.
    pub fn audit(&self) -> Option<Arc<Audit>> {
        self.audit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// The workloads in config order, shared with HTTP and the control socket;
/// and the last reload's refusal, until a reload succeeds.
#[derive(Default)]
pub struct Slots(Mutex<Vec<Arc<Slot>>>, Mutex<Option<String>>);

impl Slots {
    /// `<file>: <key>` of the last refused reload, until one succeeds:
    /// systemd's STATUS= line keeps saying it.
    pub fn reload_refused(&self) -> Option<String> {
        self.1
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set_reload_refused(&self, refusal: Option<String>) {
        *self.1.lock().unwrap_or_else(PoisonError::into_inner) = refusal;
    }

    /// Every workload's snapshot, in config order.
    pub fn snapshots(&self) -> Vec<WorkloadSnapshot> {
        self.list().iter().map(|s| s.snapshot()).collect()
    }

    /// The current workloads.
    pub fn list(&self) -> Vec<Arc<Slot>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, slots: Vec<Arc<Slot>>) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = slots;
    }
}

/// Why a reload was not applied. The running plan goes on in every case.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The new file is invalid: names file, key and reason.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A key that is bound at start changed.
    #[error("{key} changed; restart mongoload to apply it")]
    NeedsRestart { key: &'static str },
    /// A workload could not be built from the new config.
    #[error("workload '{name}': {reason}")]
    Workload { name: String, reason: String },
    /// The daemon is stopping.
    #[error("the daemon is stopping")]
    Stopping,
}

/// What a reload did, by workload name.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReloadSummary {
    /// Unchanged: kept running.
    pub kept: Vec<String>,
    /// Changed only in stages after the current one: kept running at its
    /// position; the new stages apply when reached.
    pub rescheduled: Vec<String>,
    /// Changed: drained and started again.
    pub restarted: Vec<String>,
    /// Not in the new config: stopped.
    pub stopped: Vec<String>,
    /// New: started.
    pub started: Vec<String>,
}

impl std::fmt::Display for ReloadSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        for (what, names) in [
            ("kept", &self.kept),
            ("rescheduled", &self.rescheduled),
            ("restarted", &self.restarted),
            ("stopped", &self.stopped),
            ("started", &self.started),
        ] {
            if !names.is_empty() {
                parts.push(format!("{what} {}", names.join(", ")));
            }
        }
        f.write_str(&parts.join("; "))
    }
}

/// The first key bound at process start that differs between `old` and
/// `new`, if any: those need a restart.
pub fn restart_only_change(old: &Config, new: &Config) -> Option<&'static str> {
    let (a, b) = (&old.target, &new.target);
    let keys: [(&'static str, bool); 17] = [
        ("target.uri", a.uri != b.uri),
        ("target.uri_file", a.uri_file != b.uri_file),
        ("target.database", a.database != b.database),
        ("target.app_name", a.app_name != b.app_name),
        ("target.pool_size", a.pool_size != b.pool_size),
        (
            "target.connect_timeout",
            a.connect_timeout != b.connect_timeout,
        ),
        (
            "target.server_selection_timeout",
            a.server_selection_timeout != b.server_selection_timeout,
        ),
        (
            "target.operation_timeout",
            a.operation_timeout != b.operation_timeout,
        ),
        ("target.write_concern", a.write_concern != b.write_concern),
        ("target.read_concern", a.read_concern != b.read_concern),
        (
            "target.command_events",
            a.command_events != b.command_events,
        ),
        ("lag_probe", old.lag_probe != new.lag_probe),
        ("http.listen", old.http.listen != new.http.listen),
        ("control.socket", old.control != new.control),
        // The run id and its log file are fixed for the process's life.
        ("run.log", old.run.log != new.run.log),
        ("run.name", old.run.name != new.run.name),
        // A member's share and its coordination are fixed at start.
        ("cluster", old.cluster != new.cluster),
    ];
    keys.into_iter()
        .find(|(_, changed)| *changed)
        .map(|(k, _)| k)
}

/// Sorts the new config's workloads against the running ones by name.
pub fn diff(old: &[WorkloadConfig], new: &[WorkloadConfig]) -> ReloadSummary {
    let mut s = ReloadSummary::default();
    for w in new {
        match old.iter().find(|o| o.name == w.name) {
            Some(o) if o == w => s.kept.push(w.name.clone()),
            Some(_) => s.restarted.push(w.name.clone()),
            None => s.started.push(w.name.clone()),
        }
    }
    for o in old {
        if !new.iter().any(|w| w.name == o.name) {
            s.stopped.push(o.name.clone());
        }
    }
    s
}

/// Whether `new` differs from `old` in nothing but stages after `current`
/// (the index of the stage running now; `None` before the first stage), so
/// the running engine can keep its position and take the edited list at
/// its next stage boundary. Time-of-day windows follow the clock, not a
/// position: a change there restarts the workload.
pub fn later_stages_only(
    old: &WorkloadConfig,
    new: &WorkloadConfig,
    current: Option<usize>,
) -> bool {
    if !old.windows.is_empty() || !new.windows.is_empty() || old.stages.is_empty() {
        return false;
    }
    let without_stages = |w: &WorkloadConfig| WorkloadConfig {
        stages: Vec::new(),
        ..w.clone()
    };
    let done = current.map_or(0, |i| i + 1);
    without_stages(old) == without_stages(new)
        && old.stages.len() >= done
        && new.stages.len() >= done
        && old.stages[..done] == new.stages[..done]
}

/// A workload built from its config, ready to start.
pub struct Built {
    config: WorkloadConfig,
    workload: Arc<dyn Workload>,
    /// The seed of the documents and of the workers alike.
    seed: u64,
    schedule: Schedule,
}

impl Built {
    /// The workload's name and its collections.
    pub fn collections(&self) -> (String, Vec<String>) {
        (
            self.config.name.clone(),
            self.workload.collections().to_vec(),
        )
    }
}

/// Builds every workload of `config` (generators and schedules), so a bad
/// one fails before anything starts or stops.
pub fn build(config: &Config) -> Result<Vec<Built>, ReloadError> {
    config
        .workloads
        .iter()
        .map(|w| {
            let err = |reason: String| ReloadError::Workload {
                name: w.name.clone(),
                reason,
            };
            let seed = w.run_seed();
            if w.seed.is_none() {
                tracing::info!(workload = %w.name, seed, "no seed configured: this start draws {seed}");
            }
            let workload = w
                .build_with_seed(seed)
                .map_err(|e| err(format!("{}: {}", e.error.key, e.error.reason)))?;
            // A cluster member inserts keys of its own.
            crate::workload::join(workload.as_ref(), config.cluster.member());
            Ok(Built {
                config: w.clone(),
                workload,
                seed,
                schedule: w.schedule().map_err(|e| err(e.to_string()))?,
            })
        })
        .collect()
}

/// What every engine needs from the daemon.
pub struct Env {
    /// The HTTP server's web configuration, replaced at each reload.
    pub web: crate::daemon::http::WebSlot,
    /// The database the workloads use.
    pub db: mongodb::Database,
    /// The registry.
    pub metrics: Arc<Metrics>,
    /// Failover: every engine's writes feed it.
    pub failover: Arc<crate::failover::Failover>,
    /// `mongoload_paused` and the reload counter.
    pub control_metrics: ControlMetrics,
    /// Stops everything (SIGTERM).
    pub cancel: CancellationToken,
    /// Where the stage reports go (the run's report task).
    pub reports: crate::report::writer::ReportWriter,
    /// In a cluster: the coordination every engine runs with.
    pub cluster: Option<Arc<crate::cluster::Coordinator>>,
    /// The cluster families (exported alone too).
    pub cluster_metrics: crate::cluster::ClusterMetrics,
    /// The acknowledged-write audit's families.
    pub audit_metrics: crate::audit::AuditFamilies,
    /// Each workload's collections, sent again after each reload (the
    /// documents-per-shard task reads them).
    pub collections: watch::Sender<crate::sharding::documents::WorkloadCollections>,
}

/// A running engine of one workload.
struct EngineHandle {
    config: WorkloadConfig,
    /// Stops this engine only.
    stop: CancellationToken,
    /// Cancelled when the engine task has returned.
    finished: CancellationToken,
    /// Hands the engine an edited stage list (see [`later_stages_only`]).
    schedule: watch::Sender<Schedule>,
}

type ReloadRequest = (Config, oneshot::Sender<Result<ReloadSummary, ReloadError>>);

/// Asks the running supervisor to apply a new config.
#[derive(Clone)]
pub struct Reloader {
    tx: mpsc::Sender<ReloadRequest>,
    control_metrics: ControlMetrics,
    slots: Arc<Slots>,
}

impl Reloader {
    /// Applies `config` (already validated) as described in the module
    /// docs. Returns what changed, or why nothing did.
    pub async fn reload(&self, config: Config) -> Result<ReloadSummary, ReloadError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send((config, reply))
            .await
            .map_err(|_| ReloadError::Stopping)?;
        answer.await.map_err(|_| ReloadError::Stopping)?
    }

    /// SIGHUP: loads and validates `path`, applies it, tells systemd
    /// (RELOADING=1 before, READY=1 after), logs the outcome and counts it
    /// in `mongoload_config_reloads_total`. An invalid file is logged with
    /// its reason (file, key) and the running plan goes on.
    pub async fn reload_file(&self, path: &Path) -> Result<ReloadSummary, ReloadError> {
        let _ = service::notify_reloading();
        tracing::info!("SIGHUP: reloading {}", path.display());
        let result = match config::load(path) {
            Ok(c) => self.reload(c).await,
            Err(e) => Err(ReloadError::Config(e)),
        };
        // STATUS= stays the daemon's line of workload stages, with the
        // refusal kept at its end until a reload succeeds.
        match &result {
            Ok(summary) => {
                tracing::info!("reloaded {}: {summary}", path.display());
                self.slots.set_reload_refused(None);
            }
            Err(e) => {
                tracing::error!("reload refused: {e}; the running plan goes on");
                self.slots.set_reload_refused(Some(refusal(path, e)));
            }
        }
        self.control_metrics.count_reload(result.is_ok());
        let _ = service::notify_ready();
        result
    }
}

/// What STATUS= says of a refused reload: the file and the key at fault
/// (the reason is in the journal).
fn refusal(path: &Path, e: &ReloadError) -> String {
    let file = path.display();
    match e {
        ReloadError::Config(ConfigError::Invalid { path, key, .. }) => {
            format!("{}: {key}", path.display())
        }
        ReloadError::Config(ConfigError::Syntax { .. }) => format!("{file}: not valid TOML"),
        ReloadError::Config(ConfigError::Read { .. }) => format!("{file}: cannot be read"),
        ReloadError::Config(ConfigError::UriFile { .. }) => format!("{file}: target.uri_file"),
        ReloadError::NeedsRestart { key } => format!("{file}: {key} (needs a restart)"),
        ReloadError::Workload { name, .. } => format!("{file}: workload '{name}'"),
        ReloadError::Stopping => format!("{file}: the daemon is stopping"),
    }
}

/// Runs the workloads of a config and applies reloads.
pub struct Supervisor {
    env: Env,
    config: Config,
    slots: Arc<Slots>,
    engines: HashMap<String, EngineHandle>,
    tasks: JoinSet<()>,
}

impl Supervisor {
    /// Starts every workload of `config` (built by [`build`]). Returns the
    /// shared slots, a [`Reloader`], and the task that ends when every
    /// workload has stopped.
    pub fn start(
        env: Env,
        config: Config,
        built: Vec<Built>,
    ) -> (Arc<Slots>, Reloader, tokio::task::JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(4);
        let slots = Arc::new(Slots::default());
        let reloader = Reloader {
            tx,
            control_metrics: env.control_metrics.clone(),
            slots: slots.clone(),
        };
        let mut sup = Supervisor {
            env,
            config,
            slots,
            engines: HashMap::new(),
            tasks: JoinSet::new(),
        };
        let mut slots = Vec::new();
        for b in built {
            let slot = sup.new_slot(&b.config);
            sup.spawn(&slot, b);
            slots.push(slot);
        }
        sup.slots.set(slots);
        let shared = sup.slots.clone();
        let task = tokio::spawn(sup.run(rx));
        (shared, reloader, task)
    }

    async fn run(mut self, mut rx: mpsc::Receiver<ReloadRequest>) {
        loop {
            tokio::select! {
                joined = self.tasks.join_next() => {
                    if joined.is_none() {
                        return;
                    }
                }
                Some((config, reply)) = rx.recv() => {
                    let result = if self.env.cancel.is_cancelled() {
                        Err(ReloadError::Stopping)
                    } else {
                        self.apply(config).await
                    };
                    let _ = reply.send(result);
                }
            }
        }
    }

    fn new_slot(&self, w: &WorkloadConfig) -> Arc<Slot> {
        self.env.control_metrics.set_paused(&w.name, false);
        Arc::new(Slot {
            name: w.name.clone(),
            kind: w.kind.name(),
            status: Arc::new(WorkloadStatus::default()),
            control: watch::channel(ControlState::default()).0,
            audit: Mutex::new(None),
            metrics: Mutex::new(None),
            thresholds: Mutex::new(None),
        })
    }

    /// Starts the engine of `built` for `slot`.
    fn spawn(&mut self, slot: &Arc<Slot>, built: Built) {
        let w = &built.config;
        let (schedule, schedule_rx) = watch::channel(built.schedule);
        // A restarted engine starts a new ledger.
        let audit = w.audit.then(|| AuditSetup {
            audit: Audit::new(
                &w.name,
                &self.env.db,
                built.workload.collections(),
                built.workload.audit_keys(),
                &self.env.audit_metrics,
            ),
            rate: w.audit_rate,
            timeout: self.config.target.operation_timeout,
        });
        *slot.audit.lock().unwrap_or_else(PoisonError::into_inner) =
            audit.as_ref().map(|a| a.audit.clone());
        let metrics = self.env.metrics.workload(&w.name, built.workload.ops());
        *slot.metrics.lock().unwrap_or_else(PoisonError::into_inner) = Some(metrics.clone());
        // Validated with the config: a failure here cannot happen.
        let thresholds = w.thresholds().unwrap_or_default();
        let thresholds = (!thresholds.is_empty()).then(|| {
            Arc::new(crate::threshold::monitor::ThresholdBook::new(
                &w.name,
                thresholds,
                self.env.metrics.thresholds(),
            ))
        });
        *slot
            .thresholds
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = thresholds.clone();
        let run = WorkloadRun {
            name: w.name.clone(),
            deployment: Deployment::new(
                self.config.target.database_for(&self.env.db, w),
                built.workload.as_ref(),
                self.config.target.operation_timeout,
            ),
            metrics,
            // Room for runtime overrides up to max_inflight workers, as
            // well as the highest configured concurrency.
            workers: w.peak_concurrency().max(w.max_inflight) as usize,
            max_lag: w.max_lag,
            seed: built.seed,
            workload: built.workload,
            schedule: schedule_rx,
            status: slot.status.clone(),
            control: slot.control.subscribe(),
            reports: self.env.reports.clone(),
            cluster: self
                .env
                .cluster
                .clone()
                .map(|coord| crate::cluster::ClusterRun {
                    coord,
                    apply: cluster_control(slot.clone(), self.env.control_metrics.clone()),
                }),
            stage_index: self.env.cluster_metrics.stage.with_label_values(&[&w.name]),
            failover: self.env.failover.clone(),
            audit,
            thresholds,
            run_cancel: self.env.cancel.clone(),
        };
        let stop = self.env.cancel.child_token();
        let finished = CancellationToken::new();
        let grace = self.config.run.shutdown_grace;
        let (task_stop, task_finished) = (stop.clone(), finished.clone());
        self.tasks.spawn(async move {
            engine::run(run, task_stop, grace).await;
            task_finished.cancel();
        });
        self.engines.insert(
            w.name.clone(),
            EngineHandle {
                config: built.config,
                stop,
                finished,
                schedule,
            },
        );
    }

    /// Stops one engine and waits until its operations have drained.
    async fn stop_engine(&mut self, name: &str) {
        if let Some(e) = self.engines.remove(name) {
            e.stop.cancel();
            e.finished.cancelled().await;
        }
    }

    async fn apply(&mut self, new: Config) -> Result<ReloadSummary, ReloadError> {
        if let Some(key) = restart_only_change(&self.config, &new) {
            return Err(ReloadError::NeedsRestart { key });
        }
        // Read again (the file or its certificates may have changed since
        // the config was loaded); a failure keeps everything as it was.
        let web = config::load_web(&new).map_err(ReloadError::Config)?;
        let running: Vec<WorkloadConfig> = self
            .slots
            .list()
            .iter()
            .filter_map(|s| self.engines.get(&s.name).map(|e| e.config.clone()))
            .collect();
        let mut summary = diff(&running, &new.workloads);
        // Build everything that will start before stopping anything.
        let all = build(&new)?;
        let collections: Vec<(String, Vec<String>)> = all.iter().map(Built::collections).collect();
        let mut built: HashMap<String, Built> = all
            .into_iter()
            .filter(|b| !summary.kept.contains(&b.config.name))
            .map(|b| (b.config.name.clone(), b))
            .collect();
        // Changed only after the current stage: the engine runs on with the
        // edited list. (It may pass a stage boundary meanwhile; then the
        // stage it entered runs as it was, and the edit applies after it.)
        let current = |name: &str| {
            let slots = self.slots.list();
            slots
                .iter()
                .find(|s| s.name == name)
                .and_then(|s| s.status.stage().index)
        };
        let (rescheduled, restarted): (Vec<String>, Vec<String>) =
            summary.restarted.drain(..).partition(|name| {
                let (Some(engine), Some(b)) = (self.engines.get(name), built.get(name)) else {
                    return false;
                };
                !engine.finished.is_cancelled()
                    && later_stages_only(&engine.config, &b.config, current(name))
            });
        summary.restarted = restarted;
        for name in &rescheduled {
            if let (Some(engine), Some(b)) = (self.engines.get_mut(name), built.remove(name)) {
                engine.schedule.send_replace(b.schedule);
                engine.config = b.config;
            }
        }
        summary.rescheduled = rescheduled;
        // The write attempts are read from the pool's events, which the
        // driver sends whatever the config: on or off with the plan.
        self.env.failover.track_attempts(new.command_events());
        self.config = new;
        *self
            .env
            .web
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = web;

        let old_slots = self.slots.list();
        for name in summary.stopped.iter().chain(&summary.restarted) {
            self.stop_engine(name).await;
        }
        for name in &summary.stopped {
            let m = self.env.metrics.workload(name, &[]);
            m.target_rate.set(0.0);
            m.target_concurrency.set(0);
            self.env.control_metrics.remove(name);
        }
        let mut slots = Vec::with_capacity(self.config.workloads.len());
        let workloads = self.config.workloads.clone();
        for w in &workloads {
            let slot = match old_slots.iter().find(|s| s.name == w.name) {
                Some(s) => s.clone(),
                None => self.new_slot(w),
            };
            if let Some(b) = built.remove(&w.name) {
                self.spawn(&slot, b);
            }
            slots.push(slot);
        }
        self.slots.set(slots);
        self.env.collections.send_replace(collections);
        Ok(summary)
    }
}

/// Applies the cluster-wide control (as this member's share) to `slot`,
/// as [`super::control::answer`] applies a command: logged, `mongoload_paused` kept.
fn cluster_control(
    slot: Arc<Slot>,
    metrics: ControlMetrics,
) -> crate::cluster::epoch::ApplyControl {
    Arc::new(move |state: ControlState| {
        let before = slot.control.borrow().clone();
        if before == state {
            return;
        }
        slot.control.send_replace(state.clone());
        metrics.set_paused(&slot.name, state.paused);
        tracing::info!(workload = %slot.name, "control (cluster-wide): {before} → {state}");
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    const BASE: &str = r#"
[target]
uri = "mongodb://127.0.0.1:27017"
[[workloads]]
name = "a"
kind = "mixed"
[[workloads.stages]]
rate = 100
duration = "1m"
[[workloads]]
name = "b"
kind = "mixed"
[[workloads.stages]]
rate = 100
duration = "1m"
"#;

    fn parse(text: &str) -> Config {
        config::parse_with_env(text, Path::new("t.toml"), Vec::new()).unwrap()
    }

    /// The first document a workload's prepare loads.
    fn first_loaded(workload: &dyn Workload) -> mongodb::bson::Document {
        workload
            .prepare()
            .into_iter()
            .find_map(|step| match step {
                crate::workload::PrepareStep::Load { make, .. } => Some(make(0)),
                _ => None,
            })
            .expect("mixed loads documents")
    }

    /// One seed rule: without `seed`, each start draws one, and its
    /// documents are made with the seed its workers get.
    #[test]
    fn a_workload_without_a_seed_draws_one_for_its_documents_and_workers() {
        let config = parse(BASE);
        let starts: Vec<Built> = (0..2).map(|_| build(&config).unwrap().remove(0)).collect();
        assert_ne!(starts[0].seed, starts[1].seed);
        assert_ne!(
            first_loaded(starts[0].workload.as_ref()),
            first_loaded(starts[1].workload.as_ref()),
            "documents follow the drawn seed, as the workers do"
        );
        for b in &starts {
            let again = b.config.build_with_seed(b.seed).unwrap();
            assert_eq!(
                first_loaded(b.workload.as_ref()),
                first_loaded(again.as_ref())
            );
        }
        // A configured seed is the seed of both.
        let seeded = parse(&BASE.replacen("kind = \"mixed\"", "kind = \"mixed\"\nseed = 7", 1));
        let b = build(&seeded).unwrap().remove(0);
        assert_eq!(b.seed, 7);
        let again = b.config.build_with_seed(7).unwrap();
        assert_eq!(
            first_loaded(b.workload.as_ref()),
            first_loaded(again.as_ref())
        );
    }

    #[test]
    fn diff_matches_by_name() {
        let old = parse(BASE);
        let text = BASE
            .replacen("rate = 100", "rate = 200", 1)
            .replace("name = \"b\"", "name = \"c\"");
        let new = parse(&text);
        let d = diff(&old.workloads, &new.workloads);
        assert_eq!(d.restarted, vec!["a"]);
        assert_eq!(d.started, vec!["c"]);
        assert_eq!(d.stopped, vec!["b"]);
        assert!(d.kept.is_empty());
        assert_eq!(d.to_string(), "restarted a; stopped b; started c");
        let same = diff(&old.workloads, &old.workloads);
        assert_eq!(same.kept, vec!["a", "b"]);
    }

    #[test]
    fn only_stages_after_the_current_one_keep_the_position() {
        let three = |second: &str, third: &str| {
            let text = format!(
                "[target]\nuri = \"mongodb://127.0.0.1:27017\"\n[[workloads]]\nname = \"a\"\nkind = \"mixed\"\n\
                 [[workloads.stages]]\nrate = 10\nduration = \"1m\"\n{second}{third}"
            );
            parse(&text).workloads[0].clone()
        };
        let stage = |rate: u32| format!("[[workloads.stages]]\nrate = {rate}\nduration = \"1m\"\n");
        let old = three(&stage(20), &stage(30));
        // The third stage edited, removed, or a fourth added.
        for new in [
            three(&stage(20), &stage(99)),
            three(&stage(20), ""),
            three(&stage(20), &(stage(30) + &stage(40))),
        ] {
            assert!(later_stages_only(&old, &new, Some(1)));
            assert!(later_stages_only(&old, &new, Some(0)));
            assert!(
                later_stages_only(&old, &new, None),
                "before the first stage"
            );
        }
        // The current stage or an earlier one changed.
        let new = three(&stage(25), &stage(30));
        assert!(later_stages_only(&old, &new, Some(0)));
        assert!(!later_stages_only(&old, &new, Some(1)));
        assert!(!later_stages_only(&old, &new, Some(2)));
        // Removing the current stage is not a later change.
        assert!(!later_stages_only(&old, &three(&stage(20), ""), Some(2)));
        // Any other key restarts.
        let mut other = three(&stage(20), &stage(99));
        other.max_inflight += 1;
        assert!(!later_stages_only(&old, &other, Some(0)));
        let mut repeat = old.clone();
        repeat.repeat = true;
        assert!(!later_stages_only(&old, &repeat, Some(0)));
    }

    #[test]
    fn start_bound_keys_need_a_restart() {
        let old = parse(BASE);
        assert_eq!(restart_only_change(&old, &old), None);
        let new = parse(&BASE.replace("27017\"", "27018\""));
        assert_eq!(restart_only_change(&old, &new), Some("target.uri"));
        let new = parse(&format!("{BASE}\n[http]\nlisten = \"127.0.0.1:1\"\n"));
        assert_eq!(restart_only_change(&old, &new), Some("http.listen"));
        let new = parse(&format!("{BASE}\n[control]\nsocket = \"/tmp/x.sock\"\n"));
        assert_eq!(restart_only_change(&old, &new), Some("control.socket"));
        // [run] and workloads apply live.
        let new = parse(&format!("{BASE}\n[run]\nshutdown_grace = \"1s\"\n"));
        assert_eq!(restart_only_change(&old, &new), None);
    }
}
