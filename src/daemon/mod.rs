//! `mongoload run`: wires the validated config to the driver, the engine,
//! the metrics registry, the HTTP endpoint and systemd. [`start`] returns
//! once everything is up (the HTTP address is known); [`Running::wait`]
//! returns when every schedule has ended or [`Running::stop`] was called
//! and in-flight operations have drained.

pub mod http;
pub mod limits;
pub mod logging;
pub mod probe;
pub mod service;
pub mod side_runtime;
pub mod status;
pub mod supervisor;
pub mod writable;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mongodb::bson::doc;
use tokio_util::sync::CancellationToken;

use crate::config::{scrub, uri_hosts, uri_user, Config, ConfigError, UriUser};
use crate::control::server::ControlSocket;
use crate::control::ControlMetrics;
use crate::daemon::http::HttpState;
use crate::daemon::side_runtime::SideRuntime;
use crate::daemon::status::{ClusterStatus, Snapshot, TargetStatus, WorkloadSummary};
use crate::daemon::supervisor::{Env, ReloadError, Reloader, Supervisor};
use crate::error_kind::ErrorKind;
use crate::metrics::{Metrics, MetricsError};
use crate::mongo::{self, Handlers, Timeouts};
use crate::report::writer::ReportWriter;

pub use crate::daemon::status::Summary;

/// How often systemd's STATUS= line is brought up to date (it is sent only
/// when its text changes).
const STATUS_INTERVAL: Duration = Duration::from_secs(1);

/// How often the deployment is pinged for `mongoload_target_up`.
const PING_INTERVAL: Duration = Duration::from_secs(2);

/// How long the driver gets to end its sessions and close its pool at exit.
const CLIENT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(2);
/// A running workload whose controller has not ticked for this long is
/// wedged: WATCHDOG=1 is withheld. Controllers tick every second, so this
/// leaves room for a busy machine without hiding a real stall for long.
pub const HEARTBEAT_MAX_AGE: Duration = Duration::from_secs(5);

/// How long each task gets to stop, in the shutdown order, before it is
/// aborted.
const TASK_STOP_TIMEOUT: Duration = Duration::from_secs(5);

/// The daemon's long-lived tasks besides the load (the engines, which
/// stop first: SIGTERM or the end of every schedule).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    /// systemd's STATUS= line.
    Status,
    /// WATCHDOG=1 while the controllers tick.
    Watchdog,
    /// The stage reports still to write once the load has drained.
    Reports,
    /// Pings for `mongoload_target_up` and readiness.
    Ping,
    /// A cluster member's heartbeat in the coordination collection.
    Heartbeat,
    /// The replication-lag probe.
    Probe,
    /// `/metrics`, `/healthz`, `/readyz`, `/status`.
    Http,
    /// The control socket (its file goes with it).
    Control,
    /// The latency window's ticker.
    Window,
}

/// The order the tasks stop in once the load has drained: systemd's
/// loops, then the last reports, then what serves and measures, so a
/// scrape during the drain still answers. HTTP and the control socket run
/// on the side runtime, which stops after them.
const STOP_ORDER: [Task; 9] = [
    Task::Status,
    Task::Watchdog,
    Task::Reports,
    Task::Ping,
    Task::Heartbeat,
    Task::Probe,
    Task::Http,
    Task::Control,
    Task::Window,
];

/// The running tasks, each under a child token of one root.
struct Tasks {
    root: CancellationToken,
    running: Vec<(Task, CancellationToken, tokio::task::JoinHandle<()>)>,
}

impl Tasks {
    fn new() -> Tasks {
        Tasks {
            root: CancellationToken::new(),
            running: Vec::new(),
        }
    }

    /// A child token of the root (the load's).
    fn token(&self) -> CancellationToken {
        self.root.child_token()
    }

    /// Spawns `task` as `run(its own child token of the root)`; returns
    /// the token (others may stop with it).
    fn spawn<F>(
        &mut self,
        task: Task,
        run: impl FnOnce(CancellationToken) -> F,
    ) -> CancellationToken
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.spawn_on(&tokio::runtime::Handle::current(), task, run)
    }

    /// As [`Tasks::spawn`], on the runtime of `on` (the side runtime).
    fn spawn_on<F>(
        &mut self,
        on: &tokio::runtime::Handle,
        task: Task,
        run: impl FnOnce(CancellationToken) -> F,
    ) -> CancellationToken
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        let token = self.root.child_token();
        let handle = on.spawn(run(token.clone()));
        self.running.push((task, token.clone(), handle));
        token
    }

    /// Stops the tasks in [`STOP_ORDER`]: cancels each one's token (a task
    /// that ends by itself, such as the report task once its senders are
    /// gone, is only waited for) and waits up to [`TASK_STOP_TIMEOUT`]
    /// before aborting it; then cancels the root, so nothing outlives it.
    async fn stop(mut self) {
        for task in STOP_ORDER {
            while let Some(i) = self.running.iter().position(|(t, ..)| *t == task) {
                let (_, token, mut handle) = self.running.swap_remove(i);
                token.cancel();
                if tokio::time::timeout(TASK_STOP_TIMEOUT, &mut handle)
                    .await
                    .is_err()
                {
                    tracing::warn!(
                        "the {task:?} task did not stop within {TASK_STOP_TIMEOUT:?}; aborting it"
                    );
                    handle.abort();
                }
            }
        }
        self.root.cancel();
    }
}

/// Why the daemon could not start. Messages never contain the password.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("workload '{name}': {reason}")]
    Workload { name: String, reason: String },
    #[error("cannot listen for HTTP on {addr}: {source}")]
    Http {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot set up the MongoDB client for {hosts}: {reason}")]
    Client { hosts: String, reason: String },
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    #[error("cannot create the control socket {}: {source}", path.display())]
    Control {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the thread serving HTTP and the control socket: {0}")]
    SideRuntime(std::io::Error),
}

/// A started daemon.
pub struct Running {
    /// Where `/metrics`, `/healthz`, `/readyz` and `/status` are served.
    pub http_addr: SocketAddr,
    pub metrics: Arc<Metrics>,
    /// Where the control socket listens, when `[control] socket` is set.
    pub control_socket: Option<std::path::PathBuf>,
    /// The workloads' live figures (the terminal's progress reads them).
    pub slots: Arc<supervisor::Slots>,
    cancel: CancellationToken,
    reloader: Reloader,
    done: tokio::task::JoinHandle<Summary>,
}

impl Running {
    /// Stops the load: dispatch stops, in-flight operations get the
    /// configured grace period, then the daemon's tasks stop in order.
    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// The load's token: cancelling it stops the daemon as
    /// [`Running::stop`] does.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// A handle that applies new configs to this run (SIGHUP).
    pub fn reloader(&self) -> Reloader {
        self.reloader.clone()
    }

    /// Applies a new, validated config without restarting: see
    /// [`crate::daemon::supervisor`] for what changes how.
    pub async fn reload(&self, config: Config) -> Result<supervisor::ReloadSummary, ReloadError> {
        self.reloader.reload(config).await
    }

    /// Waits until the run has ended and returns its summary.
    pub async fn wait(self) -> Summary {
        match self.done.await {
            Ok(summary) => summary,
            Err(e) => {
                tracing::error!("the run task failed: {e}");
                Summary {
                    elapsed_seconds: 0.0,
                    workloads: Vec::new(),
                }
            }
        }
    }
}

/// Starts the daemon: HTTP listening, driver client created, workloads
/// preparing. An unreachable deployment is not an error: it shows as
/// `mongoload_target_up 0`, errors counted by class, and retries.
pub async fn start(config: Config) -> Result<Running, StartError> {
    start_with(config, None).await
}

/// As [`start`], each stage report also kept in `tap` (for the table the
/// terminal shows at exit).
pub async fn start_with(
    config: Config,
    tap: Option<Arc<crate::progress::ReportTap>>,
) -> Result<Running, StartError> {
    let started = Instant::now();
    let metrics = Arc::new(Metrics::new()?);
    let uri = config.target.resolve_uri()?;
    let hosts = uri_hosts(uri.expose()).join(",");

    let control_metrics =
        ControlMetrics::register_in(metrics.registry()).map_err(MetricsError::from)?;
    let cluster_metrics = crate::cluster::ClusterMetrics::register_in(metrics.registry())
        .map_err(MetricsError::from)?;
    let built = supervisor::build(&config).map_err(|e| match e {
        ReloadError::Workload { name, reason } => StartError::Workload { name, reason },
        other => StartError::Workload {
            name: String::new(),
            reason: other.to_string(),
        },
    })?;

    let pool_size = config.effective_pool_size();
    let handlers = Handlers {
        cmap: Some(metrics.cmap_handler()),
        sdam: Some(metrics.sdam_handler()),
        command: config.command_events().then(|| metrics.command_handler()),
    };
    let timeouts = Timeouts {
        connect: config.target.connect_timeout,
        server_selection: config.target.server_selection_timeout,
    };
    let client = mongo::connect(
        uri.expose(),
        &config.target.app_name,
        pool_size,
        timeouts,
        handlers,
    )
    .await
    .map_err(|e| StartError::Client {
        hosts: hosts.clone(),
        reason: scrub(&e.to_string(), uri.expose()),
    })?;
    let db = client.database(&config.target.database);
    let member = config.cluster.member();
    cluster_metrics.size.set(i64::from(member.size));
    let cluster = (!member.is_sole()).then(|| {
        Arc::new(crate::cluster::Coordinator::new(
            &db,
            &config.cluster,
            cluster_metrics.clone(),
        ))
    });

    // A std listener: the side runtime registers it (see below).
    let listener =
        std::net::TcpListener::bind(config.http.listen).map_err(|source| StartError::Http {
            addr: config.http.listen,
            source,
        })?;
    let http_addr = listener.local_addr().map_err(|source| StartError::Http {
        addr: config.http.listen,
        source,
    })?;

    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        hosts = %hosts,
        database = %config.target.database,
        pool_size,
        workloads = %config.workloads.iter().map(|w| format!("{} ({})", w.name, w.kind.name())).collect::<Vec<_>>().join(", "),
        "mongoload {} starting against {hosts}; metrics on http://{http_addr}/metrics",
        env!("CARGO_PKG_VERSION"),
    );

    let run_info = crate::report::RunInfo {
        tap,
        name: config.run.name.clone(),
        config_hash: Some(config.hash()),
        ..crate::report::RunInfo::new(config.run.log.clone())
    };
    metrics.set_run_info(
        run_info.label(),
        run_info.config_hash.as_deref().unwrap_or(""),
    );
    let run_status = crate::daemon::status::RunStatus {
        id: run_info.id.clone(),
        name: run_info.name.clone(),
        config_hash: run_info.config_hash.clone().unwrap_or_default(),
    };
    let report_to = match &run_info.log {
        Some(p) => format!("the journal and {}", p.display()),
        None => "the journal".to_owned(),
    };
    tracing::info!(run_id = %run_info.id, run = %run_info.label(), config_hash = ?run_info.config_hash, "run {}: stage reports go to {report_to}", run_info.label());
    let control_socket = match &config.control.socket {
        Some(path) => Some(
            ControlSocket::bind(path).map_err(|source| StartError::Control {
                path: path.clone(),
                source,
            })?,
        ),
        None => None,
    };

    // One root token: the load and every long-lived task stop under it.
    let mut tasks = Tasks::new();
    let load = tasks.token();
    let (reports, report_task) = ReportWriter::new(run_info);
    tasks.spawn(Task::Reports, |_| report_task);
    let target_up = Arc::new(AtomicBool::new(false));
    if let Some(probe) = config.lag_probe.clone() {
        let (uri, db, run_id, metrics) = (
            uri.expose().to_owned(),
            db.clone(),
            reports.run().id.clone(),
            metrics.clone(),
        );
        tasks.spawn(Task::Probe, |stop| {
            crate::daemon::probe::run(probe, uri, db, run_id, metrics, stop)
        });
    }
    let env = Env {
        db: db.clone(),
        metrics: metrics.clone(),
        control_metrics: control_metrics.clone(),
        cancel: load.clone(),
        reports,
        cluster: cluster.clone(),
        cluster_metrics,
    };
    let (statuses, reloader, workloads) = Supervisor::start(env, config.clone(), built);

    // HTTP and the control socket run on a thread of their own, so no
    // client of theirs ever takes the load runtime's workers.
    let side = SideRuntime::start("mongoload-http").map_err(StartError::SideRuntime)?;
    let control_path = control_socket.as_ref().map(|c| c.path().to_path_buf());
    if let Some(socket) = control_socket {
        tracing::info!("control socket on {}", socket.path().display());
        let (slots, m) = (statuses.clone(), control_metrics.clone());
        let cluster = cluster.clone();
        // The handler runs on the side runtime; the database write of
        // `ctl --all` belongs on the load runtime, with the driver.
        let load = tokio::runtime::Handle::current();
        let handler: crate::control::server::Handler = Arc::new(move |cmd| match cmd {
            crate::control::Command::All(inner) => {
                crate::cluster::control_all(cluster.as_ref(), *inner, &load)
            }
            cmd => {
                let mut answer = crate::control::answer::answer(&slots, &m, cmd)?;
                // In a cluster, say that the command acted on this member only.
                if let (Some(c), Some(text)) = (&cluster, answer["message"].as_str()) {
                    answer["message"] = format!(
                        "{text} (this member only, {}; ctl --all acts on every member)",
                        c.member()
                    )
                    .into();
                }
                Ok(answer)
            }
        });
        tasks.spawn_on(side.handle(), Task::Control, |stop| {
            socket.serve(handler, stop)
        });
    }

    let state = HttpState::new(metrics.clone())
        .with_ready({
            let (up, statuses) = (target_up.clone(), statuses.clone());
            // Paused and idle (outside every window) are deliberate: ready.
            move || {
                up.load(Ordering::Relaxed)
                    && statuses
                        .list()
                        .iter()
                        .all(|s| s.status.stage().state.on_plan())
            }
        })
        .with_status({
            let (up, statuses) = (target_up.clone(), statuses.clone());
            let (hosts, database) = (hosts.clone(), config.target.database.clone());
            let cluster = (!member.is_sole()).then(|| ClusterStatus {
                index: member.index,
                size: member.size,
                collection: config.cluster.collection.clone(),
            });
            let failover = metrics.failover().clone();
            move || {
                let snapshot = Snapshot {
                    version: env!("CARGO_PKG_VERSION"),
                    run: run_status.clone(),
                    cluster: cluster.clone(),
                    uptime_seconds: started.elapsed().as_secs_f64(),
                    target: TargetStatus {
                        hosts: hosts.clone(),
                        database: database.clone(),
                        up: up.load(Ordering::Relaxed),
                    },
                    failovers: failover
                        .recent(10)
                        .iter()
                        .map(crate::report::FailoverReport::from_record)
                        .collect(),
                    workloads: statuses.snapshots(),
                };
                serde_json::to_value(snapshot)
                    .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }))
            }
        });
    tasks.spawn_on(side.handle(), Task::Http, |stop| async move {
        if let Err(e) = http::serve(listener, state, stop).await {
            tracing::error!("cannot serve HTTP on {http_addr}: {e}");
        }
    });

    // Keeps the latency window's time slots exact between scrapes.
    let window_metrics = metrics.clone();
    tasks.spawn(Task::Window, |stop| async move {
        window_metrics.run_window_ticker(stop).await
    });

    // The pings' token also ends the pool warm-up below.
    let (ping_db, ping_metrics, ping_up) = (db.clone(), metrics.clone(), target_up.clone());
    let user = uri_user(uri.expose());
    let ping_stop = tasks.spawn(Task::Ping, |stop| {
        ping_loop(ping_db, ping_metrics, ping_up, user, stop)
    });
    if let Some(c) = &cluster {
        tracing::info!(
            "cluster: {}; coordinating through {}.{}",
            c.member(),
            config.target.database,
            config.cluster.collection
        );
        let c = c.clone();
        tasks.spawn(
            Task::Heartbeat,
            |stop| async move { c.heartbeat(stop).await },
        );
    }

    // Warm the pool in the background so an unreachable deployment does not
    // hold up the start (the workloads' prepare steps wait on the driver's
    // server selection anyway), and only once a ping has succeeded: while
    // every handshake fails authentication, the driver's warm-up can wedge
    // the pool so that every later checkout waits forever, and a wrong
    // password would then show as timeouts instead of `auth` errors.
    let warm_client = client.clone();
    let warm_up = target_up.clone();
    tokio::spawn(async move {
        while !warm_up.load(Ordering::Relaxed) {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = ping_stop.cancelled() => return,
            }
        }
        warm_client.warm_connection_pool().await
    });

    if let Some(interval) = service::watchdog_interval() {
        let (slots, stopping) = (statuses.clone(), load.clone());
        tasks.spawn(Task::Watchdog, |stop| {
            watchdog_loop(interval, slots, stopping, stop)
        });
    }

    let stopping_sent = Arc::new(AtomicBool::new(false));
    let (slots, stopping, sent) = (statuses.clone(), load.clone(), stopping_sent.clone());
    tasks.spawn(Task::Status, |stop| {
        status_loop(slots, (stopping, stop), sent)
    });
    let _ = service::notify_ready();

    let slots = statuses.clone();
    let done = tokio::spawn(async move {
        let _ = workloads.await;
        announce_stopping(&stopping_sent);
        let summary = Summary {
            elapsed_seconds: started.elapsed().as_secs_f64(),
            workloads: statuses
                .snapshots()
                .iter()
                .map(WorkloadSummary::from)
                .collect(),
        };
        for w in &summary.workloads {
            tracing::info!(workload = %w.name, "final: {} operations ok, {} errors, {} missed in {:.1}s", w.ok, w.errors, w.missed, summary.elapsed_seconds);
        }
        tasks.stop().await;
        side.shutdown().await;
        // Shutdown sends endSessions, which waits on a connection checkout
        // that may never come (a deployment failing every handshake); the
        // process must exit anyway.
        if tokio::time::timeout(CLIENT_SHUTDOWN_TIMEOUT, client.shutdown().immediate(true))
            .await
            .is_err()
        {
            tracing::warn!("the MongoDB client did not shut down within {CLIENT_SHUTDOWN_TIMEOUT:?}; exiting anyway");
        }
        summary
    });

    Ok(Running {
        http_addr,
        metrics,
        control_socket: control_path,
        slots,
        cancel: load,
        reloader,
        done,
    })
}

/// What the pings say about the deployment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    Up,
    Down,
    /// The deployment answers but refuses the connection string's credentials.
    AuthRefused,
}

/// The state after a ping that succeeded (`None`) or failed with an error
/// of class `Some(kind)` (a timeout of ours counts as `Timeout`). A refused
/// authentication holds until a ping succeeds: the driver marks the server
/// unknown after it, so the next pings fail server selection instead.
fn next_reach(prev: Option<Reach>, failure: Option<ErrorKind>) -> Reach {
    match failure {
        None => Reach::Up,
        Some(ErrorKind::Auth) => Reach::AuthRefused,
        Some(_) if prev == Some(Reach::AuthRefused) => Reach::AuthRefused,
        Some(_) => Reach::Down,
    }
}

/// Keeps systemd's STATUS= line current — each workload's stage and
/// effective level, runtime control, prepare progress — checked every
/// [`STATUS_INTERVAL`] and sent when its text changes; once the run is
/// cancelled, says STOPPING=1 (once) with the draining status.
async fn status_loop(
    slots: Arc<crate::daemon::supervisor::Slots>,
    (load, stop): (CancellationToken, CancellationToken),
    stopping_sent: Arc<AtomicBool>,
) {
    let mut ticker = tokio::time::interval(STATUS_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = String::new();
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = load.cancelled() => {
                announce_stopping(&stopping_sent);
                return;
            }
            _ = stop.cancelled() => return,
        }
        let text = status_line(&slots.list());
        if text != last {
            let _ = service::notify_status(&text);
            last = text;
        }
    }
}

/// The STATUS= line: every workload's phrase ([`service::status_phrase`]).
fn status_line(slots: &[Arc<crate::daemon::supervisor::Slot>]) -> String {
    slots
        .iter()
        .map(|s| {
            let control = s.control.borrow().clone();
            service::status_phrase(&s.name, &s.status.stage(), &control, &s.status.prepare())
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// STOPPING=1 and the stopping status, the first time only: SIGTERM and
/// the end of every schedule both lead here.
fn announce_stopping(sent: &AtomicBool) {
    if !sent.swap(true, Ordering::SeqCst) {
        let _ = service::notify_stopping();
        let _ = service::notify_status(service::STOPPING_STATUS);
    }
}

/// Pings the deployment every couple of seconds and keeps
/// `mongoload_target_up` and readiness current. `ping` needs no privilege.
/// Each change of state is logged once; a refused authentication as one
/// line naming the user (never the password), however many retries follow.
async fn ping_loop(
    db: mongodb::Database,
    metrics: Arc<Metrics>,
    up: Arc<AtomicBool>,
    user: Option<UriUser>,
    stop: CancellationToken,
) {
    let mut was: Option<Reach> = None;
    loop {
        let failure = tokio::select! {
            r = tokio::time::timeout(PING_INTERVAL * 2, db.run_command(doc! {"ping": 1})) => match r {
                Ok(Ok(_)) => None,
                Ok(Err(e)) => Some(mongo::classify(&e)),
                Err(_) => Some(ErrorKind::Timeout),
            },
            _ = stop.cancelled() => return,
        };
        let now = next_reach(was, failure);
        let ok = now == Reach::Up;
        up.store(ok, Ordering::Relaxed);
        metrics.set_target_up(ok);
        if was != Some(now) {
            match (now, &user) {
                (Reach::Up, _) => tracing::info!("deployment reachable"),
                (Reach::Down, _) => tracing::warn!(
                    "deployment unreachable; operations are counted as errors and retried"
                ),
                (Reach::AuthRefused, Some(u)) => tracing::error!(
                    user = %u.user,
                    auth_source = %u.source,
                    "authentication failed for user '{}' (authSource {}, mechanism {}): the deployment refuses the credentials of target.uri/uri_file; prepare steps and operations are counted as auth errors and retried",
                    u.user,
                    u.source,
                    u.mechanism.as_deref().unwrap_or("negotiated"),
                ),
                (Reach::AuthRefused, None) => tracing::error!(
                    "the deployment requires authentication and the connection string has no user; prepare steps and operations are counted as auth errors and retried"
                ),
            }
            was = Some(now);
        }
        tokio::select! {
            _ = tokio::time::sleep(PING_INTERVAL) => {}
            _ = stop.cancelled() => return,
        }
    }
}

/// Sends WATCHDOG=1 every `interval` (half of WatchdogSec) while every
/// running workload's controller has ticked within [`HEARTBEAT_MAX_AGE`],
/// so systemd restarts a wedged engine, not only a dead process. Once the
/// run is stopping, draining has its own deadline and pings go on.
async fn watchdog_loop(
    interval: Duration,
    slots: Arc<crate::daemon::supervisor::Slots>,
    stopping: CancellationToken,
    stop: CancellationToken,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut withheld = false;
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = stop.cancelled() => return,
        }
        let slots = slots.list();
        let ages: Vec<Option<Duration>> = slots.iter().map(|s| s.status.heartbeat.age()).collect();
        let stalled = if stopping.is_cancelled() {
            Vec::new()
        } else {
            service::stalled_workloads(&ages, HEARTBEAT_MAX_AGE)
        };
        if stalled.is_empty() {
            if withheld {
                tracing::info!("every load loop is ticking again; watchdog pings resumed");
                withheld = false;
            }
            if let Err(e) = service::notify_watchdog() {
                tracing::warn!("cannot send WATCHDOG=1 to systemd: {e}");
            }
        } else if !withheld {
            withheld = true;
            for i in stalled {
                let name = &slots[i].name;
                let age = ages[i].unwrap_or_default();
                tracing::error!(workload = %name, stalled_for = ?age, "the load loop has not ticked for {age:.1?}; withholding WATCHDOG=1 so systemd restarts the service");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_authentication_holds_until_a_ping_succeeds() {
        use ErrorKind::*;
        assert_eq!(next_reach(None, None), Reach::Up);
        assert_eq!(next_reach(None, Some(Timeout)), Reach::Down);
        assert_eq!(
            next_reach(Some(Reach::Down), Some(Auth)),
            Reach::AuthRefused
        );
        for other in [ServerSelection, Timeout, Network] {
            assert_eq!(
                next_reach(Some(Reach::AuthRefused), Some(other)),
                Reach::AuthRefused
            );
        }
        assert_eq!(next_reach(Some(Reach::AuthRefused), None), Reach::Up);
        assert_eq!(
            next_reach(Some(Reach::Up), Some(ServerSelection)),
            Reach::Down
        );
    }

    #[tokio::test]
    async fn tasks_stop_in_the_stop_order_and_the_root_last() {
        let mut tasks = Tasks::new();
        let root = tasks.root.clone();
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        // Registered in another order than they stop in.
        for task in [
            Task::Window,
            Task::Http,
            Task::Reports,
            Task::Status,
            Task::Ping,
        ] {
            let order = order.clone();
            tasks.spawn(task, |stop| async move {
                stop.cancelled().await;
                order.lock().unwrap().push(task);
            });
        }
        let load = tasks.token();
        tasks.stop().await;
        assert_eq!(
            *order.lock().unwrap(),
            [
                Task::Status,
                Task::Reports,
                Task::Ping,
                Task::Http,
                Task::Window
            ]
        );
        assert!(root.is_cancelled() && load.is_cancelled());
    }
}
