//! How the daemon starts: [`start_with`] and its steps, in the order they
//! run, and the end of the run ([`Ending`]), which stops the tasks in
//! [`STOP_ORDER`].

use super::*;

/// As [`start`], each stage report also kept in `tap` (for the table the
/// terminal shows at exit). The steps, in order: metrics and workloads
/// built (a bad workload fails before anything runs), the driver client,
/// the listeners (HTTP, control socket), then the tasks under one root
/// token: reports, lag probe, the supervisor's engines, control and HTTP
/// on the side runtime, window ticker, pings and pool warm-up, cluster
/// heartbeat, watchdog, STATUS= line; [`finish`] stops them in order.
pub async fn start_with(
    config: Config,
    tap: Option<Arc<crate::report::ReportTap>>,
) -> Result<Running, StartError> {
    let started = Instant::now();
    let mut base = Base::set_up(&config).await?;
    let (listener, http_addr) = bind_http(&config)?;
    let web = web_slot(&config)?;
    announce(
        &config,
        &base.hosts,
        http_addr,
        web.read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref(),
    );
    let (run_info, run_status) = identify_run(&config, tap, &base.metrics);
    let control_socket = bind_control(&config)?;

    // One root token: the load and every long-lived task stop under it.
    let mut tasks = Tasks::new();
    let load = tasks.token();
    let (reports, report_task) = ReportWriter::new(run_info);
    tasks.spawn(Task::Reports, |_| report_task);
    let db = base.client.database(&config.target.database);
    spawn_probe(
        &mut tasks,
        &config,
        base.uri.expose(),
        &db,
        &reports,
        (&base.metrics, &base.probe_metrics),
    );
    let (shard_book, collections) = spawn_sharding(&mut tasks, &config, &db, &base, &reports);
    let (statuses, reloader, workloads) = start_engines(
        &config,
        &mut base,
        (db, collections),
        (reports, web.clone()),
        &load,
    );

    // HTTP and the control socket run on a thread of their own, so no
    // client of theirs ever takes the load runtime's workers.
    let side = SideRuntime::start("mongoload-http").map_err(StartError::SideRuntime)?;
    let control_path = control_socket.as_ref().map(|c| c.path().to_path_buf());
    let control = control_socket.map(|socket| (socket, control_handler(&base, &statuses)));
    let target_up = Arc::new(AtomicBool::new(false));
    let state = http_state(
        &config,
        &base,
        &statuses,
        &target_up,
        started,
        (run_status, shard_book),
    )
    .with_web(web);
    serve_side(&mut tasks, &side, control, (listener, http_addr, state));
    spawn_background(&mut tasks, &config, &base, &target_up);
    if let Some(c) = &base.cluster {
        spawn_heartbeat(&mut tasks, &config, c.clone());
    }
    let stopping_sent = spawn_service(&mut tasks, &statuses, &load);
    let done = Ending {
        started,
        stopping_sent,
        statuses: statuses.clone(),
        tasks,
        side,
        client: base.client,
    }
    .after(workloads);
    Ok(Running {
        http_addr,
        metrics: base.metrics,
        failover: base.failover,
        control_socket: control_path,
        slots: statuses,
        cancel: load,
        reloader,
        done,
    })
}

/// The run's report header (with `tap`) and the status the HTTP API shows
/// of it; sets the run-info metric.
fn identify_run(
    config: &Config,
    tap: Option<Arc<crate::report::ReportTap>>,
    metrics: &Metrics,
) -> (crate::report::RunInfo, crate::daemon::status::RunStatus) {
    let run_info = run_info(config, tap);
    metrics.set_run_info(
        run_info.label(),
        run_info.config_hash.as_deref().unwrap_or(""),
    );
    let run_status = crate::daemon::status::RunStatus {
        id: run_info.id.clone(),
        name: run_info.name.clone(),
        config_hash: run_info.config_hash.clone().unwrap_or_default(),
    };
    (run_info, run_status)
}

/// The sharding tasks: documents per shard and shard failovers. Returns
/// the book the shard statistics fill, and the sender of each workload's
/// collections, which the supervisor keeps at reloads.
fn spawn_sharding(
    tasks: &mut Tasks,
    config: &Config,
    db: &mongodb::Database,
    base: &Base,
    reports: &ReportWriter,
) -> (
    Arc<crate::sharding::documents::ShardBook>,
    tokio::sync::watch::Sender<crate::sharding::documents::WorkloadCollections>,
) {
    let shard_book = Arc::new(crate::sharding::documents::ShardBook::default());
    let (collections, collections_rx) = tokio::sync::watch::channel(
        base.built
            .iter()
            .map(supervisor::Built::collections)
            .collect(),
    );
    spawn_shard_stats(
        tasks,
        config,
        (db, collections_rx),
        base,
        (&shard_book, reports.run().shards.clone()),
    );
    spawn_shard_failover(tasks, config, base);
    (shard_book, collections)
}

/// The supervisor and its engines, one per workload, under `load`.
fn start_engines(
    config: &Config,
    base: &mut Base,
    (db, collections): (
        mongodb::Database,
        tokio::sync::watch::Sender<crate::sharding::documents::WorkloadCollections>,
    ),
    (reports, web): (ReportWriter, crate::daemon::http::WebSlot),
    load: &CancellationToken,
) -> (
    Arc<supervisor::Slots>,
    Reloader,
    tokio::task::JoinHandle<()>,
) {
    let env = Env {
        web,
        db,
        metrics: base.metrics.clone(),
        failover: base.failover.clone(),
        control_metrics: base.control_metrics.clone(),
        cancel: load.clone(),
        reports,
        cluster: base.cluster.clone(),
        cluster_metrics: base.cluster_metrics.clone(),
        audit_metrics: base.audit_metrics.clone(),
        collections,
    };
    Supervisor::start(env, config.clone(), std::mem::take(&mut base.built))
}

/// Serves the control socket (when set) and HTTP on the side runtime.
fn serve_side(
    tasks: &mut Tasks,
    side: &SideRuntime,
    control: Option<(ControlSocket, crate::control::server::Handler)>,
    (listener, http_addr, state): (std::net::TcpListener, SocketAddr, HttpState),
) {
    if let Some((socket, handler)) = control {
        tracing::info!("control socket on {}", socket.path().display());
        tasks.spawn_on(side.handle(), Task::Control, |stop| {
            socket.serve(handler, stop)
        });
    }
    tasks.spawn_on(side.handle(), Task::Http, |stop| async move {
        if let Err(e) = http::serve(listener, state, stop).await {
            tracing::error!("cannot serve HTTP on {http_addr}: {e}");
        }
    });
}

/// What the start sets up before any task runs: the metrics (with the
/// control and cluster families), the workloads built, the driver client
/// and, in a cluster, the coordinator.
struct Base {
    metrics: Arc<Metrics>,
    failover: Arc<crate::failover::Failover>,
    uri: crate::config::SecretUri,
    hosts: String,
    control_metrics: ControlMetrics,
    cluster_metrics: crate::cluster::ClusterMetrics,
    probe_metrics: crate::probe::ProbeFamilies,
    audit_metrics: crate::audit::AuditFamilies,
    built: Vec<supervisor::Built>,
    client: mongodb::Client,
    cluster: Option<Arc<crate::cluster::Coordinator>>,
}

impl Base {
    async fn set_up(config: &Config) -> Result<Base, StartError> {
        let metrics = Arc::new(Metrics::new()?);
        let uri = config.target.resolve_uri()?;
        let hosts = uri_hosts(uri.expose()).join(",");
        let control_metrics =
            ControlMetrics::register_in(metrics.registry()).map_err(MetricsError::from)?;
        let cluster_metrics = crate::cluster::ClusterMetrics::register_in(metrics.registry())
            .map_err(MetricsError::from)?;
        let probe_metrics = crate::probe::ProbeFamilies::register_in(metrics.registry())
            .map_err(MetricsError::from)?;
        let audit_metrics = crate::audit::AuditFamilies::register_in(metrics.registry())
            .map_err(MetricsError::from)?;
        let failover = crate::failover::Failover::register_in(metrics.registry())
            .map_err(MetricsError::from)?;
        let built = build_workloads(config)?;
        let client = connect(config, (&metrics, &failover), uri.expose(), &hosts).await?;
        let member = config.cluster.member();
        cluster_metrics.size.set(i64::from(member.size));
        let cluster = (!member.is_sole()).then(|| {
            Arc::new(crate::cluster::Coordinator::new(
                &client.database(&config.target.database),
                &config.cluster,
                cluster_metrics.clone(),
            ))
        });
        Ok(Base {
            metrics,
            failover,
            uri,
            hosts,
            control_metrics,
            cluster_metrics,
            probe_metrics,
            audit_metrics,
            built,
            client,
            cluster,
        })
    }
}

/// Every workload of `config` built (generators, schedules, seeds), so a
/// bad one fails the start before anything runs.
fn build_workloads(config: &Config) -> Result<Vec<supervisor::Built>, StartError> {
    supervisor::build(config).map_err(|e| match e {
        ReloadError::Workload { name, reason } => StartError::Workload { name, reason },
        other => StartError::Workload {
            name: String::new(),
            reason: other.to_string(),
        },
    })
}

/// The driver client, its events feeding `metrics` and `failover` (the
/// write attempts read from its pool's events only when the plan writes
/// or the config asks).
async fn connect(
    config: &Config,
    (metrics, failover): (&Metrics, &Arc<crate::failover::Failover>),
    uri: &str,
    hosts: &str,
) -> Result<mongodb::Client, StartError> {
    let handlers = crate::failover::driver_events::handlers(metrics.driver(), failover);
    failover.track_attempts(config.command_events());
    let timeouts = Timeouts {
        connect: config.target.connect_timeout,
        server_selection: config.target.server_selection_timeout,
    };
    mongo::connect(
        uri,
        &config.target.app_name,
        config.effective_pool_size(),
        timeouts,
        handlers,
    )
    .await
    .map_err(|e| match e.kind.as_ref() {
        // What the parser refuses is the config's (check-config refuses it
        // too); anything else, an SRV lookup that failed, is the target's.
        mongodb::error::ErrorKind::InvalidArgument { .. } => StartError::Uri {
            key: if config.target.uri.is_some() {
                "target.uri"
            } else {
                "target.uri_file"
            },
            reason: crate::config::driver_reason(&e, uri),
        },
        _ => StartError::Client {
            hosts: hosts.to_owned(),
            reason: crate::config::driver_reason(&e, uri),
        },
    })
}

/// The HTTP listener: a std one, which the side runtime registers.
fn bind_http(config: &Config) -> Result<(std::net::TcpListener, SocketAddr), StartError> {
    let err = |source| StartError::Http {
        addr: config.http.listen,
        source,
    };
    let listener = std::net::TcpListener::bind(config.http.listen).map_err(err)?;
    let addr = listener.local_addr().map_err(err)?;
    Ok((listener, addr))
}

/// The web configuration in force at start (`[http] web_config`, read
/// and checked when the config was loaded; read again here).
fn web_slot(config: &Config) -> Result<crate::daemon::http::WebSlot, StartError> {
    let web = crate::config::load_web(config)?;
    Ok(Arc::new(std::sync::RwLock::new(web)))
}

/// The control socket, when `[control] socket` is set.
fn bind_control(config: &Config) -> Result<Option<ControlSocket>, StartError> {
    let Some(path) = &config.control.socket else {
        return Ok(None);
    };
    ControlSocket::bind(path)
        .map(Some)
        .map_err(|source| StartError::Control {
            path: path.clone(),
            source,
        })
}

/// The start's log line: version, deployment, pool, workloads, metrics.
fn announce(
    config: &Config,
    hosts: &str,
    http_addr: SocketAddr,
    web: Option<&crate::web::WebConfig>,
) {
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        hosts = %hosts,
        database = %config.target.database,
        pool_size = config.effective_pool_size(),
        workloads = %config.workloads.iter().map(|w| format!("{} ({})", w.name, w.kind.name())).collect::<Vec<_>>().join(", "),
        "mongoload {} starting against {hosts}; metrics on {}://{http_addr}/metrics{}",
        env!("CARGO_PKG_VERSION"),
        if web.is_some_and(|w| w.tls.is_some()) { "https" } else { "http" },
        if web.is_some_and(|w| w.asks_password()) { " (basic authentication)" } else { "" },
    );
}

/// This run's identity and where its stage reports go (logged).
fn run_info(config: &Config, tap: Option<Arc<crate::report::ReportTap>>) -> crate::report::RunInfo {
    let run_info = crate::report::RunInfo {
        tap,
        name: config.run.name.clone(),
        config_hash: Some(config.hash()),
        config: Some(config.describe()),
        ..crate::report::RunInfo::new(config.run.log.clone())
    };
    let report_to = match &run_info.log {
        Some(p) => format!("the journal and {}", p.display()),
        None => "the journal".to_owned(),
    };
    tracing::info!(run_id = %run_info.id, run = %run_info.label(), config_hash = ?run_info.config_hash, "run {}: stage reports go to {report_to}", run_info.label());
    run_info
}

/// The replication-lag probe's task, when `[lag_probe]` is set.
fn spawn_probe(
    tasks: &mut Tasks,
    config: &Config,
    uri: &str,
    db: &mongodb::Database,
    reports: &ReportWriter,
    (metrics, families): (&Arc<Metrics>, &crate::probe::ProbeFamilies),
) {
    let Some(probe) = config.lag_probe.clone() else {
        return;
    };
    let (uri, db, run_id, metrics, families) = (
        uri.to_owned(),
        db.clone(),
        reports.run().id.clone(),
        metrics.clone(),
        families.clone(),
    );
    tasks.spawn(Task::Probe, |stop| {
        crate::probe::run(probe, uri, db, run_id, metrics, families, stop)
    });
}

/// Documents per shard of each workload's collections, through a mongos
/// (`target.shard_stats_interval`; 0: off).
fn spawn_shard_stats(
    tasks: &mut Tasks,
    config: &Config,
    (db, workloads): (
        &mongodb::Database,
        tokio::sync::watch::Receiver<crate::sharding::documents::WorkloadCollections>,
    ),
    base: &Base,
    (book, reports): (
        &Arc<crate::sharding::documents::ShardBook>,
        crate::sharding::documents::ReportCounter,
    ),
) {
    let interval = config.target.shard_stats_interval;
    if interval.is_zero() {
        return;
    }
    let (db, metrics, book) = (db.clone(), base.metrics.clone(), book.clone());
    tasks.spawn(Task::ShardStats, |stop| {
        crate::sharding::documents::run(interval, db, workloads, metrics, book, reports, stop)
    });
}

/// Each shard's primary and failovers, through a mongos
/// (`sharding/failover.rs`; off the load path, ends at once elsewhere).
fn spawn_shard_failover(tasks: &mut Tasks, config: &Config, base: &Base) {
    let uri = base.uri.expose().to_owned();
    let admin = base.client.database("admin");
    let failover = base.failover.clone();
    let timeouts = crate::mongo::Timeouts {
        connect: config.target.connect_timeout,
        server_selection: config.target.server_selection_timeout,
    };
    tasks.spawn(Task::ShardFailover, |stop| {
        crate::sharding::failover::run(uri, admin, failover, timeouts, stop)
    });
}

/// What the control socket does with a command: `--all` through the
/// cluster, anything else answered against this daemon's workloads.
fn control_handler(base: &Base, slots: &Arc<supervisor::Slots>) -> crate::control::server::Handler {
    let (slots, m, cluster) = (
        slots.clone(),
        base.control_metrics.clone(),
        base.cluster.clone(),
    );
    // The handler runs on the side runtime; the database write of
    // `ctl --all` belongs on the load runtime, with the driver.
    let load = tokio::runtime::Handle::current();
    Arc::new(move |cmd| match cmd {
        crate::control::Command::All(inner) => {
            crate::cluster::control_all(cluster.as_ref(), *inner, &load)
        }
        cmd => {
            let mut answer = super::control::answer(&slots, &m, cmd)?;
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
    })
}

/// What HTTP serves: `/metrics`, readiness, and the `/status` snapshot.
fn http_state(
    config: &Config,
    base: &Base,
    statuses: &Arc<supervisor::Slots>,
    target_up: &Arc<AtomicBool>,
    started: Instant,
    (run, shard_book): (
        crate::daemon::status::RunStatus,
        Arc<crate::sharding::documents::ShardBook>,
    ),
) -> HttpState {
    let (metrics, hosts) = (&base.metrics, &base.hosts);
    let member = config.cluster.member();
    let ready = {
        let (up, statuses) = (target_up.clone(), statuses.clone());
        // Paused and idle (outside every window) are deliberate: ready.
        move || {
            up.load(Ordering::Relaxed)
                && statuses
                    .list()
                    .iter()
                    .all(|s| s.status.stage().state.on_plan())
        }
    };
    // Preparing counts as ready too: the Kubernetes readiness probe, so a
    // first long prepare neither stalls a rollout nor blocks a drain.
    let ready_while_preparing = {
        let (up, statuses) = (target_up.clone(), statuses.clone());
        move || {
            up.load(Ordering::Relaxed)
                && statuses.list().iter().all(|s| {
                    let state = s.status.stage().state;
                    state.on_plan() || state == crate::engine::StageState::Preparing
                })
        }
    };
    let (up, statuses) = (target_up.clone(), statuses.clone());
    let (hosts, database) = (hosts.clone(), config.target.database.clone());
    let cluster = (!member.is_sole()).then(|| ClusterStatus {
        index: member.index,
        size: member.size,
        collection: config.cluster.collection.clone(),
    });
    let failover = base.failover.clone();
    let status = move || {
        let snapshot = Snapshot {
            version: env!("CARGO_PKG_VERSION"),
            run: run.clone(),
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
            shard_documents: shard_book.snapshot(),
        };
        serde_json::to_value(snapshot)
            .unwrap_or_else(|e| serde_json::json!({ "error": e.to_string() }))
    };
    HttpState::new(metrics.clone())
        .with_ready(ready)
        .with_ready_while_preparing(ready_while_preparing)
        .with_status(status)
}

/// The latency window's ticker, the pings behind `mongoload_target_up`,
/// and the pool's warm-up once a ping has succeeded.
fn spawn_background(tasks: &mut Tasks, config: &Config, base: &Base, target_up: &Arc<AtomicBool>) {
    let (metrics, client, uri) = (&base.metrics, &base.client, base.uri.expose());
    // Keeps the latency window's time slots exact between scrapes.
    let window_metrics = metrics.clone();
    tasks.spawn(Task::Window, |stop| async move {
        window_metrics.run_window_ticker(stop).await
    });
    // The pings' token also ends the pool warm-up below.
    let db = client.database(&config.target.database);
    let (ping_metrics, ping_up, user) = (metrics.clone(), target_up.clone(), uri_user(uri));
    let ping_stop = tasks.spawn(Task::Ping, |stop| {
        ping_loop(db, ping_metrics, ping_up, user, stop)
    });
    // Warm the pool in the background so an unreachable deployment does not
    // hold up the start (the workloads' prepare steps wait on the driver's
    // server selection anyway), and only once a ping has succeeded: while
    // every handshake fails authentication, the driver's warm-up can wedge
    // the pool so that every later checkout waits forever, and a wrong
    // password would then show as timeouts instead of `auth` errors.
    let (warm_client, warm_up) = (client.clone(), target_up.clone());
    tokio::spawn(async move {
        while !warm_up.load(Ordering::Relaxed) {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = ping_stop.cancelled() => return,
            }
        }
        warm_client.warm_connection_pool().await
    });
}

/// A cluster member's heartbeat in the coordination collection.
fn spawn_heartbeat(tasks: &mut Tasks, config: &Config, c: Arc<crate::cluster::Coordinator>) {
    tracing::info!(
        "cluster: {}; coordinating through {}.{}",
        c.member(),
        config.target.database,
        config.cluster.collection
    );
    tasks.spawn(
        Task::Heartbeat,
        |stop| async move { c.heartbeat(stop).await },
    );
}

/// systemd: the watchdog pings (when the unit has a watchdog), the
/// STATUS= line, and READY=1; the flag that STOPPING=1 was sent.
fn spawn_service(
    tasks: &mut Tasks,
    statuses: &Arc<supervisor::Slots>,
    load: &CancellationToken,
) -> Arc<AtomicBool> {
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
    stopping_sent
}

/// What the end of the run needs: the tasks to stop, the side runtime,
/// the client to close, and the workloads' final figures.
struct Ending {
    started: Instant,
    stopping_sent: Arc<AtomicBool>,
    statuses: Arc<supervisor::Slots>,
    tasks: Tasks,
    side: SideRuntime,
    client: mongodb::Client,
}

impl Ending {
    /// Spawns [`Ending::finish`] for when `workloads` (the supervisor) ends.
    fn after(self, workloads: tokio::task::JoinHandle<()>) -> tokio::task::JoinHandle<Summary> {
        tokio::spawn(async move {
            let _ = workloads.await;
            self.finish().await
        })
    }

    /// Once every engine has ended: STOPPING=1, the final figures logged,
    /// the tasks stopped in [`STOP_ORDER`], the side runtime and the
    /// client shut down; the run's summary.
    async fn finish(self) -> Summary {
        announce_stopping(&self.stopping_sent);
        let summary = Summary {
            elapsed_seconds: self.started.elapsed().as_secs_f64(),
            workloads: self
                .statuses
                .snapshots()
                .iter()
                .map(WorkloadSummary::from)
                .collect(),
        };
        for w in &summary.workloads {
            tracing::info!(workload = %w.name, "final: {} operations ok, {} errors, {} missed in {:.1}s", w.ok, w.errors, w.missed, summary.elapsed_seconds);
        }
        self.tasks.stop().await;
        self.side.shutdown().await;
        // Shutdown sends endSessions, which waits on a connection checkout
        // that may never come (a deployment failing every handshake); the
        // process must exit anyway.
        if tokio::time::timeout(
            CLIENT_SHUTDOWN_TIMEOUT,
            self.client.shutdown().immediate(true),
        )
        .await
        .is_err()
        {
            tracing::warn!("the MongoDB client did not shut down within {CLIENT_SHUTDOWN_TIMEOUT:?}; exiting anyway");
        }
        summary
    }
}
