//! `mongoload sim --replset NAME`: the simulator as a replica set. Members
//! listen on consecutive loopback ports, each with its own copy of the data
//! set, fed from the primary's oplog ([`oplog`]) after an optional
//! replication lag. Each answers `hello` as a real member does, so a driver
//! discovers the set from a seed list and follows elections through its
//! streaming monitor ([`member`] handles the commands).
//!
//! A step-down (from [`ReplSet::step_down`], `--failover-every` or the
//! `replSetStepDown` command) makes the primary refuse writes with
//! NotWritablePrimary and a new `topologyVersion`, its connections left
//! open as MongoDB 4.2 and later leave them (closing them, as servers
//! before 4.2 did, is [`ReplSetConfig::step_down_closes`]); the newest w:1 writes held back from the secondaries
//! (`--rollback-writes N`) are rolled back, everything else is caught up;
//! after the election time another member becomes primary in a new term.
//! Writes acknowledged with a write concern above 1 (the default is
//! `w: "majority"`, as MongoDB's) are never lost.

mod election;
pub mod member;
pub mod oplog;
mod txn;

pub use election::{ElectionParseError, ElectionTime};

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use bson::{oid::ObjectId, Bson, DateTime, Document};
use futures::future::BoxFuture;
use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::net::TcpListener;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::faults::Faults;
use super::server;
use super::shared::{Role, Shared};
use super::store::{rlock, wlock, ChangeLog, Key, Store};
use oplog::{Catalog, Change, Entry, Oplog};

/// How to run a replica set.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplSetConfig {
    /// The set's name (`setName`, the URI's `replicaSet`).
    pub name: String,
    /// Members, on consecutive ports from the listen port (1 to 50).
    pub members: usize,
    /// How long a set has no primary after a step-down.
    pub election: ElectionTime,
    /// Step the primary down this often.
    pub failover_every: Option<Duration>,
    /// A step-down rolls back up to this many of the newest writes that no
    /// write concern above 1 asked to replicate (they are kept off the
    /// secondaries until then).
    pub rollback_writes: usize,
    /// Secondaries apply a write this long after the primary made it.
    pub replication_lag: Duration,
    /// A primary frozen or blackholed this long (no heartbeats) is
    /// replaced by an election among the members that answer, as
    /// MongoDB's `electionTimeoutMillis` (10 s by default).
    pub election_timeout: Duration,
    /// A step-down closes the old primary's connections, as servers
    /// before MongoDB 4.2 did (4.2 and later keep them open and answer
    /// writes with NotWritablePrimary).
    pub step_down_closes: bool,
}

/// MongoDB's default `electionTimeoutMillis`.
pub const DEFAULT_ELECTION_TIMEOUT: Duration = Duration::from_secs(10);

impl ReplSetConfig {
    /// `members` members named `name`; 2 s elections, no lag, no rollback,
    /// no periodic failover.
    pub fn new(name: impl Into<String>, members: usize) -> ReplSetConfig {
        ReplSetConfig {
            name: name.into(),
            members,
            election: ElectionTime::default(),
            failover_every: None,
            rollback_writes: 0,
            replication_lag: Duration::ZERO,
            election_timeout: DEFAULT_ELECTION_TIMEOUT,
            step_down_closes: false,
        }
    }
}

/// What a write that was rolled back had done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    Insert,
    Update,
    Delete,
}

/// One document write a step-down rolled back.
#[derive(Debug, Clone, PartialEq)]
pub struct RolledBack {
    /// `db.collection`.
    pub ns: String,
    pub id: Bson,
    pub kind: WriteKind,
}

/// What a step-down did.
#[derive(Debug, Clone, PartialEq)]
pub struct StepDown {
    pub old_primary: usize,
    /// The member the running election makes primary.
    pub new_primary: usize,
    /// How long the set stays without a primary.
    pub election: Duration,
    /// The writes rolled back, oldest first.
    pub rolled_back: Vec<RolledBack>,
}

/// One failover, as kept by [`ReplSet::failovers`].
#[derive(Debug, Clone, PartialEq)]
pub struct Failover {
    pub old_primary: usize,
    pub new_primary: usize,
    pub stepped_down: SystemTime,
    /// When the new primary was elected (`None` while the election runs).
    pub elected: Option<SystemTime>,
    /// The term the new primary was elected in.
    pub term: Option<i64>,
    pub election: Duration,
    /// The writes the step-down rolled back, oldest first.
    pub rolled_back: Vec<RolledBack>,
}

/// Why a step-down was refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StepDownError {
    #[error("no primary to step down (an election is under way)")]
    NoPrimary,
    #[error("member {0} does not exist")]
    NoSuchMember(usize),
    /// A set of one member (MongoDB: no electable secondary caught up).
    #[error("No electable secondaries caught up")]
    NoElectable,
}

/// Locks without propagating poisoning (the state stays consistent).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The oplog and what wakes the replicator and the write-concern waiters.
#[derive(Debug)]
pub(crate) struct Core {
    oplog: Mutex<Oplog>,
    /// A change was recorded or the barrier moved: the replicator looks again.
    wake: Notify,
    /// Bumped whenever a member's position moves: write concerns look again.
    progress: watch::Sender<u64>,
}

impl Core {
    fn oplog(&self) -> MutexGuard<'_, Oplog> {
        lock(&self.oplog)
    }
}

/// Records a primary's document changes in the oplog (installed on every
/// member's store; only the primary runs client writes).
#[derive(Debug)]
struct Sink(Arc<Core>);

impl ChangeLog for Sink {
    fn record(&self, ns: &str, id: &Key, before: Option<&Document>, after: Option<&Document>) {
        let change = Change::Doc {
            ns: ns.to_owned(),
            id: id.clone(),
            before: before.cloned(),
            after: after.cloned(),
        };
        self.0.oplog().push(change, Instant::now(), DateTime::now());
        self.0.wake.notify_one();
    }
}

/// Who is primary, in which term; `version` is every member's
/// `topologyVersion.counter` and moves on each change.
#[derive(Debug)]
struct Topology {
    primary: Option<usize>,
    term: i64,
    version: i64,
}

/// One member.
pub(crate) struct Member {
    /// `host:port` as `hello` shows it.
    pub(crate) name: String,
    pub(crate) addr: SocketAddr,
    /// `topologyVersion.processId`.
    pub(crate) process_id: ObjectId,
    pub(crate) shared: Arc<Shared>,
    /// Held while changes are applied to this member's store.
    apply: Mutex<()>,
    /// Members other than the first keep their accept loop here.
    listener: Mutex<Option<(CancellationToken, JoinHandle<()>)>>,
}

/// The state every member shares.
pub(crate) struct Inner {
    pub(crate) name: String,
    pub(crate) members: Vec<Member>,
    topology: RwLock<Topology>,
    version: watch::Sender<i64>,
    pub(crate) core: Arc<Core>,
    pub(crate) txns: Mutex<txn::TxnTable>,
    election: Mutex<ElectionTime>,
    rng: Mutex<SmallRng>,
    failovers: Mutex<Vec<Failover>>,
    /// [`ReplSetConfig::step_down_closes`].
    step_down_closes: bool,
    /// Cancels the set's tasks (replicator, failover timer, elections).
    tasks: CancellationToken,
}

/// A member's way back to its set, kept in its [`Shared`].
pub(crate) struct Link {
    set: Weak<Inner>,
    index: usize,
}

/// The codes MongoDB sends for a change of a member's state
/// (NotWritablePrimary, NotPrimaryNoSecondaryOk, NotPrimaryOrSecondary,
/// InterruptedDueToReplStateChange, PrimarySteppedDown): the driver reads
/// each as "this member's state changed" and asks it again.
pub(crate) const STATE_CHANGE_CODES: [i32; 5] = [10107, 13435, 13436, 11602, 189];

impl Role for Link {
    /// An injected error with `code` as this member sends it. A state
    /// change error comes with its state change, as MongoDB's does: the
    /// member's `topologyVersion` moves on (in the reply, and in what an
    /// awaitable `hello` waiting on it answers at once), so the driver
    /// that marks the member unknown learns its state again from that
    /// `hello` instead of waiting out its heartbeat.
    fn injected_error(&self, code: i32, retryable_write: bool) -> Document {
        match self.set.upgrade() {
            Some(set) if STATE_CHANGE_CODES.contains(&code) => {
                set.state_changed();
                member::not_primary(&set, self.index, code, retryable_write)
            }
            _ => super::commands::injected_error(code, retryable_write),
        }
    }

    /// Answers one command as this member.
    fn respond<'a>(
        &'a self,
        shared: &'a Shared,
        connection_id: i64,
        body: Document,
    ) -> BoxFuture<'a, Document> {
        Box::pin(async move {
            match self.set.upgrade() {
                Some(set) => member::respond(&set, self.index, shared, connection_id, body).await,
                None => super::commands::injected_error(91, false),
            }
        })
    }
}

/// A running replica set (cloning shares it). The first member is the
/// [`super::SimHandle`]'s own address; dropping the handle stops them all.
#[derive(Clone)]
pub struct ReplSet(Arc<Inner>);

impl std::fmt::Debug for ReplSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReplSet")
            .field("name", &self.0.name)
            .field("members", &self.hosts())
            .field("primary", &self.primary())
            .finish()
    }
}

/// The listeners of one started set: the first member's, for the handle.
pub(crate) struct Started {
    pub(crate) set: ReplSet,
    /// Address, state, root token, listener stop token and accept task.
    pub(crate) first: (
        SocketAddr,
        Arc<Shared>,
        CancellationToken,
        CancellationToken,
        JoinHandle<()>,
    ),
}

/// The name members advertise for a bound address: an unspecified address
/// (`0.0.0.0`, `::`) is advertised as the loopback of its family.
fn advertised(addr: SocketAddr) -> SocketAddr {
    let ip = match addr.ip() {
        IpAddr::V4(v4) if v4.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(v6) if v6.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
        ip => ip,
    };
    SocketAddr::new(ip, addr.port())
}

/// Binds `n` consecutive ports from `listen` (from a free one when its port
/// is 0, trying again elsewhere if a neighbour is taken).
async fn bind_consecutive(listen: SocketAddr, n: usize) -> std::io::Result<Vec<TcpListener>> {
    for _ in 0..64 {
        let first = TcpListener::bind(listen).await?;
        let port = first.local_addr()?.port();
        let mut all = vec![first];
        for i in 1..n {
            let next = port.checked_add(i as u16).ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::AddrNotAvailable,
                    format!("{n} members from port {port} go past port 65535"),
                )
            });
            let bound = match next {
                Ok(p) => TcpListener::bind(SocketAddr::new(listen.ip(), p)).await,
                Err(e) => Err(e),
            };
            match bound {
                Ok(l) => all.push(l),
                Err(e) if listen.port() != 0 => return Err(e),
                Err(_) => break,
            }
        }
        if all.len() == n {
            return Ok(all);
        }
    }
    Err(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!("found no {n} consecutive free ports on {}", listen.ip()),
    ))
}

/// Starts the members on consecutive ports from `listen`, each with the
/// faults of `faults`; member 0 is primary in term 1.
pub(crate) async fn start(
    listen: SocketAddr,
    make_shared: &dyn Fn() -> Shared,
    config: ReplSetConfig,
) -> std::io::Result<Started> {
    if !(1..=50).contains(&config.members) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("a replica set has 1 to 50 members, not {}", config.members),
        ));
    }
    let listeners = bind_consecutive(listen, config.members).await?;
    let addrs: Vec<SocketAddr> = listeners
        .iter()
        .map(|l| l.local_addr())
        .collect::<Result<_, _>>()?;
    let mut oplog = Oplog::new(config.members, Some(0), 1);
    oplog.lag = config.replication_lag;
    oplog.hold_back = config.rollback_writes;
    let core = Arc::new(Core {
        oplog: Mutex::new(oplog),
        wake: Notify::new(),
        progress: watch::Sender::new(0),
    });
    let tasks = CancellationToken::new();
    let inner = Arc::new_cyclic(|weak: &Weak<Inner>| {
        let members = addrs
            .iter()
            .enumerate()
            .map(|(index, &addr)| {
                let shared = Arc::new(make_shared());
                shared.store.set_log(Arc::new(Sink(core.clone())));
                let _ = shared.role.set(Arc::new(Link {
                    set: weak.clone(),
                    index,
                }));
                Member {
                    name: advertised(addr).to_string(),
                    addr,
                    process_id: ObjectId::new(),
                    shared,
                    apply: Mutex::new(()),
                    listener: Mutex::new(None),
                }
            })
            .collect();
        Inner {
            name: config.name.clone(),
            members,
            topology: RwLock::new(Topology {
                primary: Some(0),
                term: 1,
                version: 0,
            }),
            version: watch::Sender::new(0),
            core: core.clone(),
            txns: Mutex::new(txn::TxnTable::default()),
            election: Mutex::new(config.election),
            rng: Mutex::new(SmallRng::from_os_rng()),
            failovers: Mutex::new(Vec::new()),
            step_down_closes: config.step_down_closes,
            tasks: tasks.clone(),
        }
    });
    let mut first = None;
    for (m, listener) in inner.members.iter().zip(listeners) {
        let root = m.shared.faults.root().clone();
        let stop = root.child_token();
        let task = tokio::spawn(server::accept_loop(
            listener,
            m.shared.clone(),
            stop.clone(),
            root.clone(),
        ));
        tokio::spawn(server::reap_cursors(m.shared.clone(), root.clone()));
        if first.is_none() {
            first = Some((m.addr, m.shared.clone(), root, stop, task));
        } else {
            *lock(&m.listener) = Some((stop, task));
        }
    }
    tokio::spawn(replicate(inner.clone()));
    for m in 0..inner.members.len() {
        tokio::spawn(election_timeout(inner.clone(), m, config.election_timeout));
    }
    if let Some(every) = config.failover_every {
        tokio::spawn(failover_every(inner.clone(), every));
    }
    Ok(Started {
        set: ReplSet(inner),
        first: first.expect("at least one member"),
    })
}

/// Applies one change to a member's store (`forward`), or undoes it.
fn apply(store: &Store, change: &Change, forward: bool) {
    match change {
        Change::Doc {
            ns,
            id,
            before,
            after,
        } => {
            let Some((db, coll)) = ns.split_once('.') else {
                return;
            };
            let (c, _) = store.collection_or_create(db, coll);
            let doc = if forward { after } else { before };
            wlock(&c).put(id, doc.clone());
        }
        // Catalog changes are never rolled back.
        Change::Catalog(_) if !forward => {}
        Change::Catalog(Catalog::Collection { db, coll, indexes }) => {
            let (c, _) = store.collection_or_create(db, coll);
            let mut c = wlock(&c);
            c.indexes.retain(|ix| {
                indexes
                    .iter()
                    .any(|s| s.name == ix.name && s.key == ix.key && s.options == ix.options)
            });
            for s in indexes {
                if c.indexes.iter().any(|ix| ix.name == s.name) {
                    continue;
                }
                if let Err(e) = c.create_index(
                    s.name.clone(),
                    s.key.clone(),
                    s.options.clone(),
                    s.spec.clone(),
                ) {
                    tracing::warn!(ns = %c.ns, index = %s.name, error = %e.errmsg, "a secondary could not build an index its primary has");
                }
            }
        }
        Change::Catalog(Catalog::DropCollection { db, coll }) => {
            store.drop_collection(db, coll);
        }
        Change::Catalog(Catalog::DropDatabase { db }) => {
            store.drop_database(db);
        }
    }
}

/// Applies `batch` to member `m` and records its new position.
fn apply_batch(inner: &Inner, m: usize, batch: &[Arc<Entry>]) {
    let Some(last) = batch.last() else { return };
    let store = &inner.members[m].shared.store;
    for e in batch {
        apply(store, &e.change, true);
    }
    inner.core.oplog().set_applied(m, last.time);
}

/// The replicator: applies due entries to every secondary, then sleeps
/// until the next is due or a change comes.
async fn replicate(inner: Arc<Inner>) {
    loop {
        let now = Instant::now();
        let mut next: Option<Instant> = None;
        let mut moved = false;
        for m in 0..inner.members.len() {
            let _applying = lock(&inner.members[m].apply);
            let (batch, due) = inner.core.oplog().due(m, now);
            moved |= !batch.is_empty();
            apply_batch(&inner, m, &batch);
            next = match (next, due) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        if moved {
            inner.core.oplog().trim();
            inner.core.progress.send_modify(|v| *v += 1);
        }
        let sleep = async {
            match next {
                Some(at) => tokio::time::sleep_until(at.into()).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = inner.tasks.cancelled() => return,
            _ = inner.core.wake.notified() => {}
            _ = sleep => {}
        }
    }
}

/// Watches member `m`: once it has been silent (frozen or blackholed) for
/// `timeout` while primary, the members that answer elect another.
async fn election_timeout(inner: Arc<Inner>, m: usize, timeout: Duration) {
    let faults = inner.members[m].shared.faults.clone();
    let mut gate = faults.gate();
    loop {
        tokio::select! {
            _ = inner.tasks.cancelled() => return,
            r = gate.wait_for(|g| g.silent()) => if r.is_err() { return },
        }
        let answered = tokio::select! {
            _ = inner.tasks.cancelled() => return,
            _ = tokio::time::sleep(timeout) => false,
            r = gate.wait_for(|g| !g.silent()) => r.is_ok(),
        };
        if !answered && inner.primary() == Some(m) {
            inner.replace_silent(m);
        }
        tokio::select! {
            _ = inner.tasks.cancelled() => return,
            r = gate.wait_for(|g| !g.silent()) => if r.is_err() { return },
        }
    }
}

async fn failover_every(inner: Arc<Inner>, every: Duration) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = inner.tasks.cancelled() => return,
            _ = tick.tick() => {
                if let Err(e) = inner.step_down(None) {
                    tracing::info!(reason = %e, "scheduled failover skipped");
                }
            }
        }
    }
}

impl Inner {
    /// The primary now.
    pub(crate) fn primary(&self) -> Option<usize> {
        rlock(&self.topology).primary
    }

    /// Catches member `m` up with the whole oplog, lag ignored.
    fn catch_up(&self, m: usize) {
        let _applying = lock(&self.members[m].apply);
        let batch = {
            let o = self.core.oplog();
            o.pending(m, o.last().seq)
        };
        apply_batch(self, m, &batch);
    }

    /// Steps the primary down; `to` picks the next primary (default: the
    /// member after the old one).
    pub(crate) fn step_down(
        self: &Arc<Self>,
        to: Option<usize>,
    ) -> Result<StepDown, StepDownError> {
        if let Some(t) = to.filter(|&t| t >= self.members.len()) {
            return Err(StepDownError::NoSuchMember(t));
        }
        if self.members.len() == 1 {
            return Err(StepDownError::NoElectable);
        }
        let election = lock(&self.election).sample(&mut *lock(&self.rng));
        self.remove_primary(to, Some(election))
    }

    /// Primary `m` has been silent for the election timeout: the members
    /// that answer elect the next of them at once (their votes take
    /// milliseconds), it keeps its connections (it hears of the new term
    /// when it answers again, and refuses writes from then on), and the
    /// writes it held back from the others are rolled back.
    fn replace_silent(self: &Arc<Self>, m: usize) {
        let n = self.members.len();
        let Some(next) = (1..n)
            .map(|i| (m + i) % n)
            .find(|&c| !self.members[c].shared.faults.gate().borrow().silent())
        else {
            tracing::warn!(set = %self.name, primary = %self.members[m].name, "the primary is silent past the election timeout, but no other member answers: no election");
            return;
        };
        if self.remove_primary(Some(next), None).is_ok() {
            self.members[m].shared.faults.record_election();
        }
    }

    /// Moves `topologyVersion` on without an election: what a member
    /// that answered a state-change error reports.
    fn state_changed(&self) {
        let mut topo = wlock(&self.topology);
        topo.version += 1;
        self.version.send_replace(topo.version);
    }

    /// Takes the primary away (rolling back what it held back, catching
    /// the others up) and elects `to` (default: the member after it) after
    /// `election`, or at once when `None` (a silent primary, which keeps
    /// its connections).
    fn remove_primary(
        self: &Arc<Self>,
        to: Option<usize>,
        election: Option<Duration>,
    ) -> Result<StepDown, StepDownError> {
        let n = self.members.len();
        // Waits for the writes running on the primary, then refuses new ones.
        let old = {
            let mut topo = wlock(&self.topology);
            let old = topo.primary.take().ok_or(StepDownError::NoPrimary)?;
            topo.version += 1;
            self.version.send_replace(topo.version);
            old
        };
        let next = to.unwrap_or((old + 1) % n);
        let rolled = self.core.oplog().step_down();
        let cut = self.core.oplog().last().seq;
        lock(&self.txns).forget_after(cut);
        {
            let _applying = lock(&self.members[old].apply);
            let store = &self.members[old].shared.store;
            for e in rolled.iter().rev() {
                apply(store, &e.change, false);
            }
        }
        for m in (0..n).filter(|&m| m != old) {
            self.catch_up(m);
        }
        self.core.progress.send_modify(|v| *v += 1);
        if election.is_some() && self.step_down_closes {
            self.members[old].shared.faults.drop_connections();
        }
        let rolled_back: Vec<RolledBack> = rolled
            .iter()
            .filter_map(|e| match &e.change {
                Change::Doc {
                    ns,
                    id,
                    before,
                    after,
                } => Some(RolledBack {
                    ns: ns.clone(),
                    id: id.0.clone(),
                    kind: match (before, after) {
                        (None, _) => WriteKind::Insert,
                        (Some(_), Some(_)) => WriteKind::Update,
                        (Some(_), None) => WriteKind::Delete,
                    },
                }),
                Change::Catalog(_) => None,
            })
            .collect();
        lock(&self.failovers).push(Failover {
            old_primary: old,
            new_primary: next,
            stepped_down: SystemTime::now(),
            elected: None,
            term: None,
            election: election.unwrap_or_default(),
            rolled_back: rolled_back.clone(),
        });
        match election {
            Some(election) => {
                tracing::info!(
                    set = %self.name,
                    old_primary = %self.members[old].name,
                    next_primary = %self.members[next].name,
                    election_ms = election.as_millis() as u64,
                    rolled_back = rolled_back.len(),
                    "primary stepped down"
                );
                let inner = self.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        _ = inner.tasks.cancelled() => {}
                        _ = tokio::time::sleep(election) => inner.elect(next),
                    }
                });
            }
            None => {
                tracing::info!(
                    set = %self.name,
                    old_primary = %self.members[old].name,
                    next_primary = %self.members[next].name,
                    rolled_back = rolled_back.len(),
                    "the primary has been silent for the election timeout: the others elect a new one"
                );
                self.elect(next);
            }
        }
        Ok(StepDown {
            old_primary: old,
            new_primary: next,
            election: election.unwrap_or_default(),
            rolled_back,
        })
    }

    /// Member `next` wins the election: a new term, a new electionId.
    fn elect(&self, next: usize) {
        self.catch_up(next);
        let term = {
            let mut topo = wlock(&self.topology);
            if topo.primary.is_some() {
                return;
            }
            topo.term += 1;
            self.core.oplog().elect(next, topo.term);
            // The failover is complete before anyone can see the new
            // primary (wait_for_primary, hello).
            if let Some(f) = lock(&self.failovers).last_mut() {
                f.elected = Some(SystemTime::now());
                f.term = Some(topo.term);
            }
            topo.primary = Some(next);
            topo.version += 1;
            self.version.send_replace(topo.version);
            topo.term
        };
        tracing::info!(set = %self.name, primary = %self.members[next].name, term, "new primary elected");
    }
}

impl ReplSet {
    /// The set's name.
    pub fn name(&self) -> &str {
        &self.0.name
    }

    /// How many members it has.
    pub fn members(&self) -> usize {
        self.0.members.len()
    }

    /// The address member `m` listens on.
    pub fn addr(&self, m: usize) -> SocketAddr {
        self.0.members[m].addr
    }

    /// Every member's `host:port`, as `hello` lists them.
    pub fn hosts(&self) -> Vec<String> {
        self.0.members.iter().map(|m| m.name.clone()).collect()
    }

    /// A seed-list connection string for the driver:
    /// `mongodb://h1,h2,h3/?replicaSet=NAME`.
    pub fn uri(&self) -> String {
        format!(
            "mongodb://{}/?replicaSet={}",
            self.hosts().join(","),
            self.0.name
        )
    }

    /// A connection string to member `m` alone (`directConnection=true`).
    pub fn member_uri(&self, m: usize) -> String {
        format!(
            "mongodb://{}/?directConnection=true",
            self.0.members[m].name
        )
    }

    /// Member `m`'s fault-injection handle.
    pub fn faults(&self, m: usize) -> &Faults {
        &self.0.members[m].shared.faults
    }

    /// Connections open now to member `m`.
    pub fn connections(&self, m: usize) -> u64 {
        self.0.members[m]
            .shared
            .stats
            .conns_current
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The primary now (`None` during an election).
    pub fn primary(&self) -> Option<usize> {
        self.0.primary()
    }

    /// The current term (1 at start, +1 per election).
    pub fn term(&self) -> i64 {
        rlock(&self.0.topology).term
    }

    /// Waits until some member is primary, at most `timeout`.
    pub async fn wait_for_primary(&self, timeout: Duration) -> Option<usize> {
        let mut rx = self.0.version.subscribe();
        let wait = async {
            loop {
                if let Some(p) = self.primary() {
                    return Some(p);
                }
                if rx.changed().await.is_err() {
                    return None;
                }
            }
        };
        tokio::time::timeout(timeout, wait).await.ok().flatten()
    }

    /// Steps the primary down; the member after it wins the election.
    pub fn step_down(&self) -> Result<StepDown, StepDownError> {
        self.0.step_down(None)
    }

    /// Steps the primary down; member `next` wins the election.
    pub fn step_down_to(&self, next: usize) -> Result<StepDown, StepDownError> {
        self.0.step_down(Some(next))
    }

    /// Changes the election time for the next step-downs.
    pub fn set_election(&self, election: ElectionTime) {
        *lock(&self.0.election) = election;
    }

    /// Changes the replication lag (entries not yet applied included).
    pub fn set_replication_lag(&self, lag: Duration) {
        self.0.core.oplog().lag = lag;
        self.0.core.wake.notify_one();
    }

    /// Changes how many of the newest w:1 writes a step-down rolls back.
    pub fn set_rollback_writes(&self, n: usize) {
        self.0.core.oplog().hold_back = n;
        self.0.core.wake.notify_one();
    }

    /// Every failover so far, oldest first.
    pub fn failovers(&self) -> Vec<Failover> {
        lock(&self.0.failovers).clone()
    }

    /// The oplog position (sequence number) member `m` has applied.
    pub fn applied(&self, m: usize) -> u64 {
        self.0.core.oplog().applied(m).seq
    }

    /// The newest oplog position.
    pub fn last_write(&self) -> u64 {
        self.0.core.oplog().last().seq
    }

    /// Stops every member's tasks and connections.
    pub(crate) fn shutdown(&self) {
        self.0.tasks.cancel();
        for m in &self.0.members {
            m.shared.faults.root().cancel();
            if let Some((stop, _)) = lock(&m.listener).as_ref() {
                stop.cancel();
            }
        }
    }
}

#[cfg(test)]
mod tests;
