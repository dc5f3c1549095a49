//! `mongoload sim`: an in-memory server that speaks the MongoDB wire
//! protocol well enough for the official drivers and every built-in
//! workload, with fault injection, standalone or as a replica set. A test
//! double and demo target, never a database: no persistence, no real
//! transactions.
//!
//! In Rust: [`start`] a simulator (or [`start_replset`] a replica set, or
//! [`start_sharded`] a sharded cluster), keep the [`SimHandle`], point a
//! driver at [`SimHandle::uri`], change faults through
//! [`SimHandle::faults`], drive elections through [`SimHandle::replset`]
//! and reach a cluster's shards, chunks and migrations through
//! [`SimHandle::sharded`]. With [`SimConfig::auth`] clients must
//! authenticate (SCRAM), with [`SimConfig::tls`] they connect over TLS
//! (every member of a replica set alike).
#![forbid(unsafe_code)]

pub mod aggregate;
pub mod auth;
pub mod commands;
pub mod cursor;
pub mod error;
pub mod faults;
pub mod node;
pub mod profile;
pub mod query;
pub mod replset;
pub mod server;
pub mod sharded;
pub mod shared;
pub mod store;
pub mod tls;
pub mod update;
pub mod wire;

use std::net::SocketAddr;
use std::time::Duration;

pub use auth::AuthUser;
pub use faults::{
    Decision, ErrorFault, Fault, FaultConfig, FaultRecord, Faults, LatencyDist, Stall,
};
pub use node::{Node, SimConfig};
pub use profile::ProfileConfig;
pub use replset::{
    ElectionTime, Failover, ReplSet, ReplSetConfig, RolledBack, StepDown, StepDownError, WriteKind,
    DEFAULT_ELECTION_TIMEOUT,
};
pub use sharded::{ChunkInfo, Migration, Sharded, ShardedConfig};
pub use tls::TlsFiles;

/// A running simulator: a standalone, a replica set (the handle is member
/// 0's [`Node`] and holds the set) or a sharded cluster (the first
/// router's, with the cluster beside it). It derefs to its [`Node`] for
/// the address, faults, listener and replica set. Dropping it shuts the
/// simulator down.
pub struct SimHandle {
    /// Set on a sharded cluster: its shards and other routers, which stop
    /// as it drops (before the first router).
    sharded: Option<Box<Sharded>>,
    node: Node,
}

impl From<Node> for SimHandle {
    fn from(node: Node) -> SimHandle {
        SimHandle {
            sharded: None,
            node,
        }
    }
}

impl std::ops::Deref for SimHandle {
    type Target = Node;
    fn deref(&self) -> &Node {
        &self.node
    }
}

/// Starts a simulator on `config.listen` and returns once it accepts
/// connections. Unreadable TLS files are an `InvalidInput` error naming the file.
pub async fn start(config: SimConfig) -> std::io::Result<SimHandle> {
    node::start(config).await.map(SimHandle::from)
}

/// Starts a replica set of `set.members` members on consecutive ports from
/// `config.listen` (from a free one when its port is 0), each with the
/// faults of `config.faults`; member 0 is primary. The handle's
/// [`Node::addr`], [`Node::faults`] and listener methods are member 0's;
/// [`SimHandle::uri`] is the seed list.
pub async fn start_replset(config: SimConfig, set: ReplSetConfig) -> std::io::Result<SimHandle> {
    node::start_replset(config, set).await.map(SimHandle::from)
}

/// Starts a sharded cluster as [`sharded::start`] describes: the handle's
/// [`Node::addr`] is the first router's, [`SimHandle::uri`] lists every
/// router, [`SimHandle::sharded`] gives the cluster.
pub async fn start_sharded(
    config: SimConfig,
    sharded: ShardedConfig,
) -> std::io::Result<SimHandle> {
    let (node, cluster) = sharded::start(config, sharded).await?;
    Ok(SimHandle {
        sharded: Some(Box::new(cluster)),
        node,
    })
}

impl SimHandle {
    /// A connection string for the driver: `mongodb://127.0.0.1:PORT/`, for
    /// a replica set the seed list `mongodb://h1,h2,h3/?replicaSet=NAME`,
    /// for a sharded cluster every router `mongodb://r1,r2/`.
    pub fn uri(&self) -> String {
        match &self.sharded {
            Some(cluster) => cluster.uri(),
            None => self.node.uri(),
        }
    }

    /// The sharded cluster, when started with [`start_sharded`]: routers,
    /// shards (each a [`Node`] of its own), chunks and migrations.
    pub fn sharded(&self) -> Option<&Sharded> {
        self.sharded.as_deref()
    }

    /// Stops listening, closes every connection and waits for the listener
    /// to end (a cluster's shards and other routers first).
    pub async fn shutdown(mut self) {
        drop(self.sharded.take());
        self.node.shutdown().await;
    }
}

/// `mongoload sim` options.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("replica").args(["replset", "shard_members"]).multiple(true)))]
pub struct SimArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:27017")]
    pub listen: SocketAddr,
    /// Fixed latency added to every command (e.g. 2ms).
    #[arg(long, value_parser = humantime::parse_duration, conflicts_with = "latency_dist")]
    pub latency: Option<Duration>,
    /// Latency drawn per command: fixed:2ms, uniform:1ms..5ms or exp:2ms.
    #[arg(long)]
    pub latency_dist: Option<LatencyDist>,
    /// Hold every reply for D once every P, written D/P (e.g. 1s/10s).
    #[arg(long)]
    pub stall: Option<Stall>,
    /// Freeze for D once every P, written D/P (e.g. 3s/60s): read and answer nothing, accept no connection, keep connections open (a VM pause); with --replset, the member that is primary when the freeze begins (or --fault-member); a primary frozen past --election-timeout is replaced. Each freeze's true start and end is logged.
    #[arg(long)]
    pub freeze: Option<Stall>,
    /// Blackhole for D once every P, written D/P: unreachable, new connections hang unanswered and open ones go silent (a network partition); with --replset, the primary when it begins (or --fault-member). Each one's true start and end is logged.
    #[arg(long)]
    pub blackhole: Option<Stall>,
    /// Reset for D once every P, written D/P: every open connection is reset (RST) as it begins, and every new one while it lasts; with --replset, the primary when it begins (or --fault-member). Logged as freeze is.
    #[arg(long)]
    pub reset: Option<Stall>,
    /// Slow for D once every P, written D/P: every command but the handshake waits --slow-latency more; with --replset, the primary when it begins (or --fault-member). Logged as freeze is.
    #[arg(long)]
    pub slow: Option<Stall>,
    /// The added latency of --slow.
    #[arg(long, default_value = "100ms", value_parser = humantime::parse_duration)]
    pub slow_latency: Duration,
    /// With --replset (or --shard-members): --freeze, --blackhole, --reset and --slow hit member N (0 is the first) instead of the primary (of each shard).
    #[arg(long, value_name = "N", requires = "replica")]
    pub fault_member: Option<usize>,
    /// Probability (0..=1) of answering a command with --error-code instead of running it.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub error_rate: f64,
    /// The error code injected (10107 NotWritablePrimary, 91 ShutdownInProgress, 112 WriteConflict, 50 MaxTimeMSExpired, ...).
    #[arg(long, default_value_t = 10107)]
    pub error_code: i32,
    /// Commands the errors apply to (comma-separated); default every command but the handshake.
    #[arg(long, value_delimiter = ',')]
    pub error_commands: Vec<String>,
    /// Probability (0..=1) of closing the connection instead of answering a command.
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub drop_rate: f64,
    /// Probability (0..=1) of running a command, then closing the connection instead of answering (a reply lost after the write was applied).
    #[arg(long, default_value_t = 0.0, value_parser = parse_rate)]
    pub lose_reply_rate: f64,
    /// Serve at most this many commands per second, queued FIFO with exponential service times of mean 1/N (latency grows as the load nears N).
    #[arg(long, value_name = "N", value_parser = parse_capacity)]
    pub capacity: Option<f64>,
    /// Close every new connection at once.
    #[arg(long)]
    pub refuse: bool,
    /// Require SCRAM-SHA-256 or SCRAM-SHA-1 authentication as this user (defined in `admin`).
    #[arg(
        long,
        value_name = "USER:PASSWORD",
        env = "MONGOLOAD_SIM_AUTH",
        hide_env_values = true
    )]
    pub auth: Option<AuthUser>,
    /// Serve TLS with this PEM certificate chain (with --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
    /// Announce no logical sessions (no `logicalSessionTimeoutMinutes` in
    /// `hello`), as a server without sessions does.
    #[arg(long)]
    pub no_sessions: bool,
    /// Run a replica set named NAME: --members members on consecutive ports from --listen's.
    #[arg(long, value_name = "NAME", help_heading = "Replica set")]
    pub replset: Option<String>,
    /// Members of the replica set (1 to 50); member 0 starts as primary.
    #[arg(long, default_value_t = 3, requires = "replset", value_parser = clap::value_parser!(u16).range(1..=50), help_heading = "Replica set")]
    pub members: u16,
    /// Step the primary down this often (e.g. 60s).
    #[arg(long, value_parser = humantime::parse_duration, requires = "replica", help_heading = "Replica set")]
    pub failover_every: Option<Duration>,
    /// How long a step-down leaves the set without a primary: 2s, or a uniform range 2s..10s.
    #[arg(
        long,
        default_value = "2s",
        requires = "replica",
        help_heading = "Replica set"
    )]
    pub election: ElectionTime,
    /// A step-down rolls back up to N of the newest writes acknowledged with w:1 (kept off the secondaries until then); w:"majority" writes are never lost.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 0,
        requires = "replica",
        help_heading = "Replica set"
    )]
    pub rollback_writes: usize,
    /// Secondaries apply each write this long after the primary (e.g. 500ms).
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration, requires = "replica", help_heading = "Replica set")]
    pub replication_lag: Duration,
    /// A primary frozen or blackholed this long is replaced by an election among the other members (MongoDB's electionTimeoutMillis).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, requires = "replica", help_heading = "Replica set")]
    pub election_timeout: Duration,
    /// A step-down closes the old primary's connections, as servers before MongoDB 4.2 did (by default they stay open and writes get NotWritablePrimary, as on 4.2 and later).
    #[arg(long, requires = "replica", help_heading = "Replica set")]
    pub step_down_closes: bool,
    /// Run a sharded cluster: --mongos routers on consecutive ports from
    /// --listen's (their URI lists them all) in front of --shards shards;
    /// faults and replica-set flags apply to each shard.
    #[arg(long, conflicts_with = "replset", help_heading = "Sharded cluster")]
    pub sharded: bool,
    /// Shards of the cluster (1 to 16), named shard0, shard1, ...
    #[arg(long, default_value_t = 2, requires = "sharded", value_parser = clap::value_parser!(u16).range(1..=16), help_heading = "Sharded cluster")]
    pub shards: u16,
    /// Members of each shard: 1 (the default) a standalone, more a replica set named as the shard.
    #[arg(long, value_name = "M", requires = "sharded", value_parser = clap::value_parser!(u16).range(1..=50), help_heading = "Sharded cluster")]
    pub shard_members: Option<u16>,
    /// Routers (mongos) of the cluster (1 to 16).
    #[arg(long, default_value_t = 1, requires = "sharded", value_parser = clap::value_parser!(u16).range(1..=16), help_heading = "Sharded cluster")]
    pub mongos: u16,
    /// Run a balancer round this often (e.g. 10s): one chunk from the shard with most chunks to the one with fewest, per sharded collection; off by default.
    #[arg(long, value_name = "D", value_parser = humantime::parse_duration, requires = "sharded", help_heading = "Sharded cluster")]
    pub balance_every: Option<Duration>,
    /// Append mongod's "Slow query" log entries (structured JSON) for
    /// operations at or above the slow threshold to FILE.
    #[arg(long, value_name = "FILE", help_heading = "Profiler")]
    pub log: Option<std::path::PathBuf>,
    /// The slow-operation threshold (mongod's --slowms): what the log and
    /// profiling level 1 record.
    #[arg(long, default_value_t = profile::DEFAULT_SLOWMS, value_name = "MS", help_heading = "Profiler")]
    pub slowms: i64,
    /// The profiling level of every database at start (mongod's --profile):
    /// 0 off, 1 operations at or above --slowms, 2 all.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(i32).range(0..=2), help_heading = "Profiler")]
    pub profile: i32,
    /// Answer as a server before 7.1: no `$queryStats` (code 40324) and
    /// nothing recorded for it.
    #[arg(long, help_heading = "Profiler")]
    pub no_query_stats: bool,
    /// The --auth user lacks the `queryStatsRead` privilege (it holds
    /// every other): `$queryStats` answers code 13 Unauthorized.
    #[arg(long, requires = "auth", help_heading = "Profiler")]
    pub no_query_stats_read: bool,
}

fn parse_rate(s: &str) -> Result<f64, String> {
    let r: f64 = s.parse().map_err(|e| format!("{e}"))?;
    if (0.0..=1.0).contains(&r) {
        Ok(r)
    } else {
        Err(format!("{r} is not a probability between 0 and 1"))
    }
}

fn parse_capacity(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(c) if c.is_finite() && c > 0.0 => Ok(c),
        _ => Err(format!(
            "{s:?} is not a positive number of operations per second"
        )),
    }
}

impl SimArgs {
    /// The TLS files, when both flags are given.
    pub fn tls_files(&self) -> Option<TlsFiles> {
        Some(TlsFiles {
            cert: self.tls_cert.clone()?,
            key: self.tls_key.clone()?,
        })
    }

    /// The replica set these flags describe, if `--replset` is given.
    pub fn replset_config(&self) -> Option<ReplSetConfig> {
        self.replset.as_ref().map(|name| ReplSetConfig {
            name: name.clone(),
            members: self.members.into(),
            election: self.election,
            failover_every: self.failover_every,
            rollback_writes: self.rollback_writes,
            replication_lag: self.replication_lag,
            election_timeout: self.election_timeout,
            step_down_closes: self.step_down_closes,
        })
    }

    /// The sharded cluster these flags describe, if `--sharded` is given.
    pub fn sharded_config(&self) -> Option<ShardedConfig> {
        if !self.sharded {
            return None;
        }
        let members = self.shard_members.unwrap_or(1).into();
        Some(ShardedConfig {
            shards: self.shards.into(),
            shard_members: members,
            mongos: self.mongos.into(),
            balance_every: self.balance_every,
            replset: ReplSetConfig {
                name: "shard".into(),
                members,
                election: self.election,
                failover_every: self.failover_every,
                rollback_writes: self.rollback_writes,
                replication_lag: self.replication_lag,
                election_timeout: self.election_timeout,
                step_down_closes: self.step_down_closes,
            },
        })
    }

    /// The faults with a start and an end the flags repeat, each with its
    /// length and period.
    pub fn periodic_faults(&self) -> Vec<(Fault, Stall)> {
        [
            (Fault::Freeze, self.freeze),
            (Fault::Blackhole, self.blackhole),
            (Fault::Reset, self.reset),
            (Fault::Slow(self.slow_latency), self.slow),
        ]
        .into_iter()
        .filter_map(|(f, every)| Some((f, every?)))
        .collect()
    }

    /// The fault configuration these flags describe.
    pub fn fault_config(&self) -> FaultConfig {
        FaultConfig {
            latency: self
                .latency
                .map(LatencyDist::Fixed)
                .or_else(|| self.latency_dist.clone()),
            stall: self.stall,
            error: (self.error_rate > 0.0).then(|| ErrorFault {
                rate: self.error_rate,
                code: self.error_code,
                commands: self.error_commands.clone(),
            }),
            drop_rate: self.drop_rate,
            lose_reply_rate: self.lose_reply_rate,
            capacity: self.capacity,
            refuse: self.refuse,
        }
    }
}

/// Runs the simulator until SIGINT or SIGTERM.
pub async fn run_cli(args: SimArgs) -> anyhow::Result<()> {
    // The lead unifies logging later; until then make sure logs reach stderr.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
    let set_members = match args.sharded {
        true => args.shard_members.unwrap_or(1),
        false => args.members,
    };
    if let Some(m) = args.fault_member.filter(|&m| m >= set_members.into()) {
        anyhow::bail!("--fault-member {m}: the set has {set_members} members, numbered from 0");
    }
    let faults = args.fault_config();
    let config = SimConfig {
        listen: args.listen,
        faults: faults.clone(),
        auth: args.auth.clone(),
        tls: args.tls_files(),
        sessions: !args.no_sessions,
        profile: ProfileConfig {
            level: args.profile,
            slowms: args.slowms,
            sample_rate: 1.0,
            log: args.log.clone(),
            query_stats: !args.no_query_stats,
            query_stats_read: !args.no_query_stats_read,
            ..ProfileConfig::default()
        },
    };
    let handle = start_cli(&args, config).await?;
    log_started(&args, &handle, &faults);
    spawn_periodic_faults(&args, &handle);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    tracing::info!("mongoload sim shutting down");
    handle.shutdown().await;
    Ok(())
}

/// Starts what the flags ask for: a sharded cluster, a replica set or one
/// node. The error names the ports it could not listen on; unreadable TLS
/// files (InvalidInput) name the file themselves.
async fn start_cli(args: &SimArgs, config: SimConfig) -> anyhow::Result<SimHandle> {
    Ok(match (args.sharded_config(), args.replset_config()) {
        (Some(cluster), _) => {
            let routers = cluster.mongos;
            start_sharded(config, cluster)
                .await
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::InvalidInput => anyhow::anyhow!("{e}"),
                    _ => anyhow::anyhow!(
                        "cannot listen on {routers} consecutive ports from {}: {e}",
                        args.listen
                    ),
                })?
        }
        (None, Some(set)) => {
            let members = set.members;
            start_replset(config, set)
                .await
                .map_err(|e| match e.kind() {
                    std::io::ErrorKind::InvalidInput => anyhow::anyhow!("{e}"),
                    _ => anyhow::anyhow!(
                        "cannot listen on {members} consecutive ports from {}: {e}",
                        args.listen
                    ),
                })?
        }
        (None, None) => start(config).await.map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidInput => anyhow::anyhow!("{e}"),
            _ => anyhow::anyhow!("cannot listen on {}: {e}", args.listen),
        })?,
    })
}

/// Logs what listens: the replica set, the sharded cluster, then the
/// address, URI, faults, auth and TLS.
fn log_started(args: &SimArgs, handle: &SimHandle, faults: &FaultConfig) {
    if let Some(set) = handle.replset() {
        tracing::info!(
            replset = set.name(),
            members = ?set.hosts(),
            election = %args.election,
            failover_every = %args
                .failover_every
                .map_or("never".to_owned(), |d| humantime::format_duration(d).to_string()),
            rollback_writes = args.rollback_writes,
            replication_lag = %humantime::format_duration(args.replication_lag),
            "replica set: member 0 is primary"
        );
    }
    if let Some(cluster) = handle.sharded() {
        let shards: Vec<String> = (0..cluster.shards())
            .map(|i| format!("{}={}", cluster.shard_name(i), cluster.shard(i).uri()))
            .collect();
        tracing::info!(
            routers = cluster.routers().len(),
            shards = ?shards,
            balance_every = %args
                .balance_every
                .map_or("never".to_owned(), |d| humantime::format_duration(d).to_string()),
            "sharded cluster: routers in front of shards"
        );
    }
    tracing::info!(
        addr = %handle.addr(),
        uri = %handle.uri(),
        faults = %faults,
        auth = args.auth.as_ref().map_or("off", |u| u.user.as_str()),
        tls = args.tls_files().is_some(),
        "mongoload sim listening (an in-memory test double, not a database)"
    );
}

/// Starts one task per periodic fault (`--freeze` and the like) and
/// target: the simulator, or each shard of a cluster; on a replica set the
/// fault hits `--fault-member`, else the primary of the moment.
fn spawn_periodic_faults(args: &SimArgs, handle: &SimHandle) {
    let targets: Vec<(Faults, Option<ReplSet>)> = match handle.sharded() {
        Some(cluster) => (0..cluster.shards())
            .map(|i| {
                let shard = cluster.shard(i);
                (shard.faults().clone(), shard.replset().cloned())
            })
            .collect(),
        None => vec![(handle.faults().clone(), handle.replset().cloned())],
    };
    for ((fault, every), (base, set)) in args
        .periodic_faults()
        .into_iter()
        .flat_map(|f| targets.iter().map(move |t| (f, t.clone())))
    {
        let member = args.fault_member;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every.period.saturating_sub(every.duration)).await;
                let target = set
                    .as_ref()
                    .and_then(|s| Some((s, member.or_else(|| s.primary())?)));
                let faults = match target {
                    Some((s, m)) => s.faults(m).clone(),
                    None => base.clone(),
                };
                faults.begin(fault);
                tokio::time::sleep(every.duration).await;
                faults.end(fault);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Wrap {
        #[command(flatten)]
        sim: SimArgs,
    }

    fn parse(args: &[&str]) -> Result<SimArgs, clap::Error> {
        Wrap::try_parse_from(std::iter::once("sim").chain(args.iter().copied())).map(|w| w.sim)
    }

    #[test]
    fn flags_become_a_fault_config() {
        let a = parse(&[
            "--listen",
            "127.0.0.1:4000",
            "--latency-dist",
            "uniform:1ms..5ms",
            "--stall",
            "1s/10s",
            "--error-rate",
            "0.01",
            "--error-code",
            "91",
            "--error-commands",
            "insert,update",
            "--drop-rate",
            "0.5",
            "--lose-reply-rate",
            "0.25",
            "--capacity",
            "3000",
            "--refuse",
        ])
        .unwrap();
        assert_eq!(a.listen, "127.0.0.1:4000".parse().unwrap());
        let f = a.fault_config();
        assert_eq!(
            f.latency,
            Some(LatencyDist::Uniform {
                min: Duration::from_millis(1),
                max: Duration::from_millis(5)
            })
        );
        assert_eq!(
            f.stall,
            Some(Stall {
                duration: Duration::from_secs(1),
                period: Duration::from_secs(10)
            })
        );
        assert_eq!(
            f.error,
            Some(ErrorFault {
                rate: 0.01,
                code: 91,
                commands: vec!["insert".into(), "update".into()]
            })
        );
        assert_eq!(
            (f.drop_rate, f.lose_reply_rate, f.refuse),
            (0.5, 0.25, true)
        );
        assert_eq!(
            parse(&["--latency", "2ms"]).unwrap().fault_config().latency,
            Some(LatencyDist::Fixed(Duration::from_millis(2)))
        );
        assert_eq!(parse(&[]).unwrap().fault_config(), FaultConfig::default());
    }

    #[test]
    fn auth_and_tls_flags() {
        let a = parse(&[
            "--auth",
            "app:p:w",
            "--tls-cert",
            "c.pem",
            "--tls-key",
            "k.pem",
        ])
        .unwrap();
        assert_eq!(
            a.auth,
            Some(AuthUser {
                user: "app".into(),
                password: "p:w".into()
            })
        );
        assert_eq!(
            a.tls_files(),
            Some(TlsFiles {
                cert: "c.pem".into(),
                key: "k.pem".into()
            })
        );
        assert!(parse(&["--tls-cert", "c.pem"]).is_err(), "needs --tls-key");
        assert!(parse(&["--auth", "nopassword"]).is_err());
    }

    #[test]
    fn bad_flags_are_rejected() {
        assert!(parse(&["--error-rate", "1.5"]).is_err());
        assert!(parse(&["--drop-rate", "-0.1"]).is_err());
        assert!(parse(&["--stall", "10s/1s"]).is_err());
        let freeze = parse(&["--freeze", "3s/60s"]).unwrap().freeze.unwrap();
        assert_eq!(
            (freeze.duration, freeze.period),
            (Duration::from_secs(3), Duration::from_secs(60))
        );
        assert!(parse(&["--freeze", "60s/3s"]).is_err());
        let a = parse(&[
            "--blackhole",
            "2s/30s",
            "--reset",
            "1s/20s",
            "--slow",
            "5s/60s",
            "--slow-latency",
            "250ms",
        ])
        .unwrap();
        let every = |d, p| Stall {
            duration: Duration::from_secs(d),
            period: Duration::from_secs(p),
        };
        assert_eq!(
            a.periodic_faults(),
            [
                (Fault::Blackhole, every(2, 30)),
                (Fault::Reset, every(1, 20)),
                (Fault::Slow(Duration::from_millis(250)), every(5, 60)),
            ]
        );
        assert!(parse(&[]).unwrap().periodic_faults().is_empty());
        assert!(parse(&["--blackhole", "2s"]).is_err());
        assert!(parse(&["--latency-dist", "gauss:1ms"]).is_err());
        assert!(parse(&["--latency", "2ms", "--latency-dist", "exp:1ms"]).is_err());
    }

    #[test]
    fn sharded_cluster_flags() {
        assert_eq!(parse(&[]).unwrap().sharded_config(), None);
        let a = parse(&[
            "--sharded",
            "--shards",
            "3",
            "--shard-members",
            "3",
            "--mongos",
            "2",
            "--balance-every",
            "10s",
            "--failover-every",
            "30s",
            "--fault-member",
            "1",
        ])
        .unwrap();
        let c = a.sharded_config().unwrap();
        assert_eq!((c.shards, c.shard_members, c.mongos), (3, 3, 2));
        assert_eq!(c.balance_every, Some(Duration::from_secs(10)));
        assert_eq!(c.replset.failover_every, Some(Duration::from_secs(30)));
        assert_eq!(c.replset.members, 3);
        let d = parse(&["--sharded"]).unwrap().sharded_config().unwrap();
        assert_eq!(
            (d.shards, d.shard_members, d.mongos, d.balance_every),
            (2, 1, 1, None)
        );
        // Cluster flags need --sharded; a cluster is not also a replica set.
        assert!(parse(&["--shards", "2"]).is_err());
        assert!(parse(&["--mongos", "2"]).is_err());
        assert!(parse(&["--balance-every", "1s"]).is_err());
        assert!(parse(&["--sharded", "--replset", "rs"]).is_err());
        assert!(parse(&["--sharded", "--shards", "0"]).is_err());
        assert!(parse(&["--sharded", "--shards", "17"]).is_err());
        // Replica-set flags apply to the shards' sets.
        assert!(parse(&["--sharded", "--shard-members", "3", "--election", "1s"]).is_ok());
    }

    #[test]
    fn replica_set_flags() {
        assert_eq!(parse(&[]).unwrap().replset_config(), None);
        let a = parse(&[
            "--replset",
            "rs0",
            "--members",
            "5",
            "--failover-every",
            "60s",
            "--election",
            "2s..10s",
            "--rollback-writes",
            "50",
            "--replication-lag",
            "500ms",
            "--election-timeout",
            "2s",
            "--step-down-closes",
        ])
        .unwrap();
        assert_eq!(
            a.replset_config(),
            Some(ReplSetConfig {
                name: "rs0".into(),
                members: 5,
                election: ElectionTime {
                    min: Duration::from_secs(2),
                    max: Duration::from_secs(10)
                },
                failover_every: Some(Duration::from_secs(60)),
                rollback_writes: 50,
                replication_lag: Duration::from_millis(500),
                election_timeout: Duration::from_secs(2),
                step_down_closes: true,
            })
        );
        assert_eq!(
            parse(&["--replset", "rs"]).unwrap().replset_config(),
            Some(ReplSetConfig::new("rs", 3))
        );
        // Replica-set flags need --replset; member counts are bounded.
        assert!(parse(&["--members", "3"]).is_err());
        assert!(parse(&["--replication-lag", "1s"]).is_err());
        assert!(parse(&["--election-timeout", "1s"]).is_err());
        assert!(parse(&["--fault-member", "1"]).is_err());
        assert!(parse(&["--replset", "rs", "--members", "0"]).is_err());
        assert!(parse(&["--replset", "rs", "--members", "51"]).is_err());
        assert!(parse(&["--replset", "rs", "--election", "5s..1s"]).is_err());
    }
}
