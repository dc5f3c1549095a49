//! One running server and how to start it: a standalone, a replica set
//! (the node is member 0 and holds the set), or a router of a sharded
//! cluster. It sits under `sharded`, which assembles a cluster from
//! nodes, and under the crate's root, whose handle is a node with, for a
//! cluster, the cluster beside it.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::auth::{self, AuthUser};
use crate::faults::{FaultConfig, Faults};
use crate::profile::{self, ProfileConfig};
use crate::replset::{self, ReplSet, ReplSetConfig};
use crate::server;
use crate::shared::Shared;
use crate::tls::{self, TlsFiles};
use crate::wire;

/// How to start a simulator.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// Faults active from the start.
    pub faults: FaultConfig,
    /// The one user (in `admin`) clients must authenticate as; none: no authentication.
    pub auth: Option<AuthUser>,
    /// Serve TLS with this certificate and key; none: plain TCP.
    pub tls: Option<TlsFiles>,
    /// Announce logical sessions in `hello` (as MongoDB does); without
    /// them the driver sends no session ids and refuses explicit sessions,
    /// as with a server that has none.
    pub sessions: bool,
    /// The profiler's start settings and the slow-query log file.
    pub profile: ProfileConfig,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            faults: FaultConfig::default(),
            auth: None,
            tls: None,
            sessions: true,
            profile: ProfileConfig::default(),
        }
    }
}

type Listener = (CancellationToken, JoinHandle<()>);

/// One running server: a standalone, a replica set's member 0 (holding
/// the set), or a sharded cluster's router. Dropping it shuts it down.
/// The crate root's handle derefs to it.
pub struct Node {
    pub(crate) addr: SocketAddr,
    shared: Arc<Shared>,
    pub(crate) root: CancellationToken,
    listener: Mutex<Option<Listener>>,
    replset: Option<ReplSet>,
}

/// Starts a simulator on `config.listen` and returns once it accepts
/// connections. Unreadable TLS files are an `InvalidInput` error naming the file.
pub(crate) async fn start(config: SimConfig) -> std::io::Result<Node> {
    let tls = config.tls.as_ref().map(tls::acceptor).transpose()?;
    let log = open_log(&config)?;
    serve(config.listen, Arc::new(new_shared(&config, &tls, &log))).await
}

/// Serves `shared` on `listen` (a standalone server or a router), its idle
/// cursors reaped, and returns its handle.
pub(crate) async fn serve(listen: SocketAddr, shared: Arc<Shared>) -> std::io::Result<Node> {
    let root = shared.faults.root().clone();
    let (addr, stop, task) = server::listen(listen, shared.clone(), &root).await?;
    tokio::spawn(server::reap_cursors(shared.clone(), root.clone()));
    Ok(Node {
        addr,
        shared,
        root,
        listener: Mutex::new(Some((stop, task))),
        replset: None,
    })
}

/// Starts a replica set of `set.members` members on consecutive ports from
/// `config.listen` (from a free one when its port is 0), each with the
/// faults of `config.faults`; member 0 is primary. The node is member 0
/// ([`Node::addr`], [`Node::faults`] and the listener methods are its
/// own); [`Node::uri`] is the seed list.
pub(crate) async fn start_replset(config: SimConfig, set: ReplSetConfig) -> std::io::Result<Node> {
    let tls = config.tls.as_ref().map(tls::acceptor).transpose()?;
    let log = open_log(&config)?;
    let started = replset::start(config.listen, &|| new_shared(&config, &tls, &log), set).await?;
    let (addr, shared, root, stop, task) = started.first;
    Ok(Node {
        addr,
        shared,
        root,
        listener: Mutex::new(Some((stop, task))),
        replset: Some(started.set),
    })
}

/// Opens the slow-query log for appending (an `InvalidInput` error naming
/// the file when it cannot be).
pub(crate) fn open_log(config: &SimConfig) -> std::io::Result<Option<Arc<Mutex<std::fs::File>>>> {
    let Some(path) = &config.profile.log else {
        return Ok(None);
    };
    let f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("--log {}: {e}", path.display()),
            )
        })?;
    Ok(Some(Arc::new(Mutex::new(f))))
}

/// One server's state as `config` describes it (faults, user, TLS); a
/// replica set makes one per member.
pub(crate) fn new_shared(
    config: &SimConfig,
    tls: &Option<tokio_rustls::TlsAcceptor>,
    log: &Option<Arc<Mutex<std::fs::File>>>,
) -> Shared {
    let mut shared = Shared::new(Faults::new(config.faults.clone()));
    shared.profiler = profile::Profiler::new(&config.profile, log.clone());
    shared.auth = config.auth.as_ref().map(auth::Credentials::new);
    shared.tls = tls.clone();
    shared.sessions = config.sessions;
    shared
}

impl Node {
    /// The address it listens on (the real port when started with port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A connection string for the driver: `mongodb://127.0.0.1:PORT/`, for
    /// a replica set the seed list `mongodb://h1,h2,h3/?replicaSet=NAME`.
    pub fn uri(&self) -> String {
        match &self.replset {
            Some(set) => set.uri(),
            None => format!("mongodb://{}/", self.addr),
        }
    }

    /// The replica set, when started as one: members,
    /// elections, replication lag and rollback.
    pub fn replset(&self) -> Option<&ReplSet> {
        self.replset.as_ref()
    }

    /// The fault-injection handle; changes apply to the next command.
    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Connections open now.
    pub fn connections(&self) -> u64 {
        self.shared
            .stats
            .conns_current
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Requests that arrived compressed with `compressor` (`snappy`,
    /// `zlib`, `zstd`, `noop`) since start.
    pub fn compressed_requests(&self, compressor: &str) -> u64 {
        wire::compress::id_of(compressor).map_or(0, |id| {
            self.shared.stats.compressed[usize::from(id)].load(std::sync::atomic::Ordering::Relaxed)
        })
    }

    /// Server-side cursors open now.
    pub fn open_cursors(&self) -> usize {
        self.shared.cursors.len()
    }

    /// Stops listening (new connections are refused by the OS) and closes
    /// every open connection, as if the server went down. Data is kept.
    pub async fn stop_listener(&self) {
        let current = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((stop, task)) = current {
            stop.cancel();
            let _ = task.await;
        }
        self.shared.faults.drop_connections();
    }

    /// Listens again on the same address after [`Node::stop_listener`].
    pub async fn restart_listener(&self) -> std::io::Result<()> {
        if self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
        {
            return Ok(());
        }
        let (_, stop, task) = server::listen(self.addr, self.shared.clone(), &self.root).await?;
        let mut slot = self.listener.lock().unwrap_or_else(|e| e.into_inner());
        match slot.as_ref() {
            // Another restart won the race: keep it and drop ours.
            Some(_) => stop.cancel(),
            None => *slot = Some((stop, task)),
        }
        Ok(())
    }

    /// Stops listening, closes every connection and waits for the listener to end.
    pub async fn shutdown(self) {
        self.root.cancel();
        if let Some(set) = &self.replset {
            set.shutdown();
        }
        let current = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some((_, task)) = current {
            let _ = task.await;
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.root.cancel();
        if let Some(set) = &self.replset {
            set.shutdown();
        }
    }
}
