//! `mongoload run`: wires the validated config to the driver, the engine,
//! the metrics registry, the HTTP endpoint and systemd. [`start`] returns
//! once everything is up (the HTTP address is known); [`Running::wait`]
//! returns when every schedule has ended or [`Running::stop`] was called
//! and in-flight operations have drained.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mongodb::bson::doc;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::{uri_hosts, uri_user, Config, ConfigError, UriUser};
use crate::control::server::ControlSocket;
use crate::control::ControlMetrics;
use crate::error_kind::ErrorKind;
use crate::http::{self, HttpState};
use crate::metrics::{Metrics, MetricsError};
use crate::service;
use crate::side_runtime::SideRuntime;
use crate::supervisor::{self, Env, ReloadError, Reloader, Supervisor};
use crate::target::{self, Handlers, Timeouts};

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

/// What a run did, per workload, for the final log line.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Summary {
    pub elapsed_seconds: f64,
    pub workloads: Vec<WorkloadSummary>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct WorkloadSummary {
    pub name: String,
    pub ok: u64,
    pub errors: u64,
    pub missed: u64,
}

impl Running {
    /// Stops dispatch; in-flight operations get the configured grace period.
    pub fn stop(&self) {
        self.cancel.cancel();
    }

    /// A token that stops the daemon when cancelled.
    pub fn cancel_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// A handle that applies new configs to this run (SIGHUP).
    pub fn reloader(&self) -> Reloader {
        self.reloader.clone()
    }

    /// Applies a new, validated config without restarting: see
    /// [`crate::supervisor`] for what changes how.
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
        ControlMetrics::register(metrics.registry()).map_err(MetricsError::from)?;
    let cluster_metrics =
        crate::cluster::ClusterMetrics::register(metrics.registry()).map_err(MetricsError::from)?;
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
        command: config
            .target
            .command_events
            .then(|| metrics.command_handler()),
    };
    let timeouts = Timeouts {
        connect: config.target.connect_timeout,
        server_selection: config.target.server_selection_timeout,
    };
    let client = target::connect(
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
        workloads = %config.workloads.iter().map(|w| format!("{} ({})", w.name, w.kind.as_str())).collect::<Vec<_>>().join(", "),
        "mongoload {} starting against {hosts}; metrics on http://{http_addr}/metrics",
        env!("CARGO_PKG_VERSION"),
    );

    let run_info = Arc::new(crate::report::RunInfo {
        tap,
        ..crate::report::RunInfo::new(config.run.log.clone())
    });
    let report_to = match &run_info.log {
        Some(p) => format!("the journal and {}", p.display()),
        None => "the journal".to_owned(),
    };
    tracing::info!(run_id = %run_info.id, "run {}: stage reports go to {report_to}", run_info.id);
    let control_socket = match &config.control.socket {
        Some(path) => Some(
            ControlSocket::bind(path).map_err(|source| StartError::Control {
                path: path.clone(),
                source,
            })?,
        ),
        None => None,
    };

    let cancel = CancellationToken::new();
    let target_up = Arc::new(AtomicBool::new(false));
    let probe_stop = CancellationToken::new();
    let probe_task = config.lag_probe.clone().map(|probe| {
        tokio::spawn(crate::probe::run(
            probe,
            uri.expose().to_owned(),
            db.clone(),
            run_info.id.clone(),
            metrics.clone(),
            probe_stop.clone(),
        ))
    });
    let env = Env {
        db: db.clone(),
        metrics: metrics.clone(),
        control_metrics: control_metrics.clone(),
        cancel: cancel.clone(),
        run_info,
        cluster: cluster.clone(),
        cluster_metrics,
    };
    let (statuses, reloader, workloads) = Supervisor::start(env, config.clone(), built);

    // HTTP and the control socket run on a thread of their own, so no
    // client of theirs ever takes the load runtime's workers.
    let side = SideRuntime::start("mongoload-http").map_err(StartError::SideRuntime)?;
    let control_stop = CancellationToken::new();
    let control_path = control_socket.as_ref().map(|c| c.path().to_path_buf());
    let control_task = control_socket.map(|socket| {
        tracing::info!("control socket on {}", socket.path().display());
        let (slots, m) = (statuses.clone(), control_metrics.clone());
        let cluster = cluster.clone();
        // The handler runs on the side runtime; the database write of
        // `ctl --all` belongs on the load runtime, with the driver.
        let load = tokio::runtime::Handle::current();
        let handler: crate::control::server::Handler = Arc::new(move |cmd| match cmd {
            crate::control::Command::All(inner) => cluster_control(cluster.as_ref(), *inner, &load),
            cmd => {
                let mut answer = supervisor::control(&slots, &m, cmd)?;
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
        side.spawn(socket.serve(handler, control_stop.clone()))
    });

    let state = HttpState::new(metrics.clone())
        .with_ready({
            let (up, statuses) = (target_up.clone(), statuses.clone());
            // Paused and idle (outside every window) are deliberate: ready.
            move || up.load(Ordering::Relaxed) && statuses.list().iter().all(|s| matches!(s.status.stage().state, "running" | "paused" | "idle"))
        })
        .with_status({
            let (up, statuses, hosts, database) = (target_up.clone(), statuses.clone(), hosts.clone(), config.target.database.clone());
            let cluster = (!member.is_sole()).then(|| json!({ "index": member.index, "size": member.size, "collection": config.cluster.collection }));
            let failover = metrics.failover().clone();
            move || {
                let failovers: Vec<_> = failover.recent(10).iter().map(crate::report::FailoverReport::from_record).collect();
                json!({
                    "version": env!("CARGO_PKG_VERSION"),
                    "cluster": cluster,
                    "uptime_seconds": started.elapsed().as_secs_f64(),
                    "target": { "hosts": hosts, "database": database, "up": up.load(Ordering::Relaxed) },
                    "failovers": failovers,
                    "workloads": statuses.list().iter().map(|s| s.to_json()).collect::<Vec<_>>(),
                })
            }
        });
    let http_stop = CancellationToken::new();
    let http_task = {
        let stop = http_stop.clone();
        side.spawn(async move {
            if let Err(e) = http::serve(listener, state, stop).await {
                tracing::error!("cannot serve HTTP on {http_addr}: {e}");
            }
        })
    };

    // Keeps the latency window's time slots exact between scrapes.
    let window_stop = CancellationToken::new();
    let window_task = {
        let (metrics, stop) = (metrics.clone(), window_stop.clone());
        tokio::spawn(async move { metrics.run_window_ticker(stop).await })
    };

    let ping_stop = CancellationToken::new();
    if let Some(c) = &cluster {
        tracing::info!(
            "cluster: {}; coordinating through {}.{}",
            c.member(),
            config.target.database,
            config.cluster.collection
        );
        let (c, stop) = (c.clone(), ping_stop.clone());
        tokio::spawn(async move { c.heartbeat(stop).await });
    }
    let ping_task = tokio::spawn(ping_loop(
        db.clone(),
        metrics.clone(),
        target_up.clone(),
        uri_user(uri.expose()),
        ping_stop.clone(),
    ));

    // Warm the pool in the background so an unreachable deployment does not
    // hold up the start (the workloads' prepare steps wait on the driver's
    // server selection anyway), and only once a ping has succeeded: while
    // every handshake fails authentication, the driver's warm-up can wedge
    // the pool so that every later checkout waits forever, and a wrong
    // password would then show as timeouts instead of `auth` errors.
    let warm_client = client.clone();
    let (warm_up, warm_stop) = (target_up.clone(), ping_stop.clone());
    tokio::spawn(async move {
        while !warm_up.load(Ordering::Relaxed) {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = warm_stop.cancelled() => return,
            }
        }
        warm_client.warm_connection_pool().await
    });

    let watchdog_task = service::watchdog_interval()
        .map(|interval| tokio::spawn(watchdog_loop(interval, statuses.clone(), cancel.clone())));

    let stopping_sent = Arc::new(AtomicBool::new(false));
    let status_task = tokio::spawn(status_loop(
        statuses.clone(),
        cancel.clone(),
        stopping_sent.clone(),
    ));
    let _ = service::notify_ready();

    let slots = statuses.clone();
    let done = tokio::spawn(async move {
        let _ = workloads.await;
        announce_stopping(&stopping_sent);
        status_task.abort();
        if let Some(task) = watchdog_task {
            task.abort();
        }
        ping_stop.cancel();
        let _ = ping_task.await;
        probe_stop.cancel();
        if let Some(task) = probe_task {
            let _ = task.await;
        }
        let summary = Summary {
            elapsed_seconds: started.elapsed().as_secs_f64(),
            workloads: statuses
                .list()
                .iter()
                .map(|s| WorkloadSummary {
                    name: s.name.clone(),
                    ok: s.status.ok.load(Ordering::Relaxed),
                    errors: s.status.errors.load(Ordering::Relaxed),
                    missed: s.status.missed.load(Ordering::Relaxed),
                })
                .collect(),
        };
        for w in &summary.workloads {
            tracing::info!(workload = %w.name, "final: {} operations ok, {} errors, {} missed in {:.1}s", w.ok, w.errors, w.missed, summary.elapsed_seconds);
        }
        http_stop.cancel();
        let _ = http_task.await;
        // Stopping the server drops the socket, which removes its file.
        control_stop.cancel();
        if let Some(task) = control_task {
            let _ = task.await;
        }
        side.shutdown().await;
        window_stop.cancel();
        let _ = window_task.await;
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
        cancel,
        reloader,
        done,
    })
}

/// `ctl --all`: hands the command to every member through the database
/// (written in the background: the control socket answers at once) and
/// says so; refused without a cluster.
fn cluster_control(
    cluster: Option<&Arc<crate::cluster::Coordinator>>,
    command: crate::control::Command,
    load: &tokio::runtime::Handle,
) -> Result<serde_json::Value, String> {
    let Some(c) = cluster else {
        return Err(
            "--all needs a [cluster]: this daemon runs the whole load; leave out --all".into(),
        );
    };
    if command.workload().is_none() {
        return Err("status is per member: ask each member's control socket".into());
    }
    let (member, line) = (c.member(), command.to_string());
    let c = c.clone();
    load.spawn(async move {
        match c.control(&command).await {
            Ok(state) => tracing::info!(
                "control (sent to every member): {command}: the cluster's totals are now {state}"
            ),
            Err(e) => tracing::error!("control (for every member): {command}: not applied: {e}"),
        }
    });
    Ok(json!({
        "message": format!(
            "{line}: sent to every member of the cluster through the database; each applies its share within a second ({} of {} here)",
            member.index,
            member.size
        ),
    }))
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
    slots: Arc<crate::supervisor::Slots>,
    cancel: CancellationToken,
    stopping_sent: Arc<AtomicBool>,
) {
    let mut ticker = tokio::time::interval(STATUS_INTERVAL);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = String::new();
    loop {
        tokio::select! {
            _ = ticker.tick() => {}
            _ = cancel.cancelled() => {
                announce_stopping(&stopping_sent);
                return;
            }
        }
        let text = status_line(&slots.list());
        if text != last {
            let _ = service::notify_status(&text);
            last = text;
        }
    }
}

/// The STATUS= line: every workload's phrase ([`service::status_phrase`]).
fn status_line(slots: &[Arc<crate::supervisor::Slot>]) -> String {
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
                Ok(Err(e)) => Some(target::classify(&e)),
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
    slots: Arc<crate::supervisor::Slots>,
    stopping: CancellationToken,
) {
    let mut ticker = tokio::time::interval(interval);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut withheld = false;
    loop {
        ticker.tick().await;
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

/// Removes the URI's password from a message, in case an error echoes
/// part of the URI back.
pub(crate) fn scrub(message: &str, uri: &str) -> String {
    let redacted = crate::config::redact_uri(uri);
    let mut out = message.replace(uri, &redacted);
    if let Some(password) = password_of(uri) {
        if !password.is_empty() {
            out = out.replace(password, "***");
        }
    }
    out
}

fn password_of(uri: &str) -> Option<&str> {
    let rest = uri.split_once("://")?.1;
    let userinfo = &rest[..rest.rfind('@')?];
    Some(userinfo.split_once(':')?.1)
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

    #[test]
    fn scrub_removes_password_and_uri() {
        let uri = "mongodb://app:s3cr%3Et@db1:27017,db2/?replicaSet=rs0";
        let msg = format!("bad thing with {uri} and s3cr%3Et");
        let out = scrub(&msg, uri);
        assert!(!out.contains("s3cr%3Et"), "{out}");
        assert!(out.contains("db1:27017"), "{out}");
    }
}
