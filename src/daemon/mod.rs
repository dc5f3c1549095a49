//! `mongoload run`: wires the validated config to the driver, the engine,
//! the metrics registry, the HTTP endpoint and systemd. [`start`] returns
//! once everything is up (the HTTP address is known); [`Running::wait`]
//! returns when every schedule has ended or [`Running::stop`] was called
//! and in-flight operations have drained.

pub(crate) mod control;
pub(crate) mod endpoint_thread;
pub mod http;
pub mod limits;
pub(crate) mod logging;
pub(crate) mod service;
pub(crate) mod status;
pub mod supervisor;
pub(crate) mod writable_paths;

mod start;

pub use start::start_with;

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mongodb::bson::doc;
use tokio_util::sync::CancellationToken;

use crate::config::{uri_hosts, uri_user, Config, ConfigError, UriUser};
use crate::control::server::ControlSocket;
use crate::control::ControlMetrics;
use crate::daemon::endpoint_thread::SideRuntime;
use crate::daemon::http::HttpState;
use crate::daemon::status::{ClusterStatus, Snapshot, TargetStatus, WorkloadSummary};
use crate::daemon::supervisor::{Env, ReloadError, Reloader, Supervisor};
use crate::error_kind::ErrorKind;
use crate::metrics::{Metrics, MetricsError};
use crate::mongo::{self, Timeouts};
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
    /// Documents per shard, through a mongos.
    ShardStats,
    /// Each shard's primary and failovers, through a mongos.
    ShardFailover,
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
const STOP_ORDER: [Task; 11] = [
    Task::Status,
    Task::Watchdog,
    Task::Reports,
    Task::Ping,
    Task::Heartbeat,
    Task::Probe,
    Task::ShardStats,
    Task::ShardFailover,
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
    /// The driver refused the connection string (exit 78, as a config
    /// error): one line naming the key.
    #[error("{key}: {reason}")]
    Uri { key: &'static str, reason: String },
    /// The deployment cannot be found (an SRV lookup failed): `run` exits
    /// 69 (EX_UNAVAILABLE), which systemd restarts, not 78.
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
    /// Failover: the primary, write outages, the failovers seen.
    pub failover: Arc<crate::failover::Failover>,
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
        let mut text = status_line(&slots.list());
        if let Some(refused) = slots.reload_refused() {
            text.push_str(&format!("; last reload refused: {refused}"));
        }
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
                Ok(Err(e)) => Some(crate::error_kind::classify(&e)),
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
