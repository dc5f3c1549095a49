//! Connection-pool and topology metrics from the driver's CMAP and SDAM
//! events, so client-side queueing and failovers show on the dashboard
//! without wrapping driver calls. The handlers that feed them (and the
//! failover state beside them) are built in
//! [`crate::failover::driver_events`].
//!
//! Metrics: `mongoload_pool_connections{state="idle"|"in_use"}` (disjoint:
//! their sum is the open connections),
//! `mongoload_pool_checkout_wait_seconds` (histogram),
//! `mongoload_pool_checkout_failures_total{reason}`,
//! `mongoload_pool_clears_total{cause}`, `mongoload_topology_servers{type}`
//! (the primary's changes are failover's: `crate::failover::families`).

use std::collections::BTreeMap;
use std::hash::Hash;
use std::sync::{Mutex, PoisonError};

use foldhash::{HashMap, HashMapExt, HashSet};

use mongodb::event::cmap::{CmapEvent, ConnectionCheckoutFailedReason, ConnectionClosedReason};
use mongodb::event::sdam::TopologyDescription;
use mongodb::options::ServerAddress;
use mongodb::ServerType;
use prometheus::{Histogram, IntCounterVec, IntGauge, IntGaugeVec, Registry};
use serde::Serialize;

use super::COARSE_BUCKETS;
use crate::family::families;

/// `type` label values of `mongoload_topology_servers`, in SDAM spec order.
pub const SERVER_TYPES: [&str; 9] = [
    "standalone",
    "mongos",
    "rs_primary",
    "rs_secondary",
    "rs_arbiter",
    "rs_other",
    "rs_ghost",
    "load_balancer",
    "unknown",
];

/// `cause` label values of `mongoload_pool_clears_total`.
pub(super) const POOL_CLEAR_CAUSES: [&str; 2] = ["timeout", "error"];

/// `reason` label values of `mongoload_pool_connections_closed_total`.
pub(super) const CONNECTION_CLOSED_REASONS: [&str; 6] =
    ["error", "dropped", "stale", "idle", "pool_closed", "other"];

/// The `reason` label of a closed connection: `dropped` is a connection
/// closed because its operation was dropped (timed out) while it was being
/// written, or its reply was partly read or never came in time.
fn closed_reason_label(reason: &ConnectionClosedReason) -> &'static str {
    match reason {
        ConnectionClosedReason::Error => "error",
        ConnectionClosedReason::Dropped => "dropped",
        ConnectionClosedReason::Stale => "stale",
        ConnectionClosedReason::Idle => "idle",
        ConnectionClosedReason::PoolClosed => "pool_closed",
        _ => "other",
    }
}

/// `reason` label values of `mongoload_pool_checkout_failures_total`.
pub const CHECKOUT_FAILURE_REASONS: [&str; 3] = ["timeout", "connection_error", "other"];

/// The `type` label of a server type; types added by later drivers count as
/// "unknown".
pub fn server_type_label(t: ServerType) -> &'static str {
    match t {
        ServerType::Standalone => "standalone",
        ServerType::Mongos => "mongos",
        ServerType::RsPrimary => "rs_primary",
        ServerType::RsSecondary => "rs_secondary",
        ServerType::RsArbiter => "rs_arbiter",
        ServerType::RsOther => "rs_other",
        ServerType::RsGhost => "rs_ghost",
        ServerType::LoadBalancer => "load_balancer",
        _ => "unknown",
    }
}

/// What the last topology event said, for `/status` and readiness.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TopologyView {
    /// The driver's topology type (`Single`, `ReplicaSetWithPrimary`, …);
    /// empty before the first SDAM event.
    pub topology_type: String,
    /// Servers by `type` label; only types with at least one server.
    pub servers: BTreeMap<&'static str, u64>,
    /// Address of the primary, if one is known.
    pub primary: Option<String>,
    /// Whether the driver can select a server for writes.
    pub writable: bool,
    /// Primary changes seen since start.
    pub primary_changes: u64,
    /// Addresses of the secondaries, sorted (the lag probe reads each).
    pub secondaries: Vec<String>,
}

/// Which connections are checked out, per pool, so a connection closed
/// while checked out (its pool closed under it) still leaves `in_use`.
#[derive(Debug)]
pub(crate) struct PoolBook<K> {
    checked_out: HashMap<K, HashSet<u32>>,
}

impl<K: Hash + Eq + Clone> PoolBook<K> {
    pub(crate) fn new() -> Self {
        PoolBook {
            checked_out: HashMap::new(),
        }
    }

    /// True if the connection was not already counted as checked out.
    pub(crate) fn check_out(&mut self, pool: &K, id: u32) -> bool {
        match self.checked_out.get_mut(pool) {
            Some(set) => set.insert(id),
            None => {
                self.checked_out
                    .insert(pool.clone(), HashSet::from_iter([id]));
                true
            }
        }
    }

    /// True if the connection was counted as checked out (check-in, or
    /// close of a checked-out connection).
    pub(crate) fn release(&mut self, pool: &K, id: u32) -> bool {
        self.checked_out
            .get_mut(pool)
            .is_some_and(|set| set.remove(&id))
    }

    /// Forgets a closed pool; returns how many connections it had out.
    pub(crate) fn close_pool(&mut self, pool: &K) -> usize {
        self.checked_out.remove(pool).map_or(0, |set| set.len())
    }
}

families! {
    /// The driver's families (CMAP and SDAM events).
    pub(super) struct DriverFamilies {
        connections: IntGaugeVec = "mongoload_pool_connections",
            "Driver pool connections by state, disjoint (their sum is the open connections): in_use (checked out) and idle (established or being established, not checked out).",
            labels ["state"];
        checkout_wait: Histogram = "mongoload_pool_checkout_wait_seconds",
            "Time operations waited to check a connection out of the driver pool.",
            buckets checkout_buckets();
        checkout_failures: IntCounterVec = "mongoload_pool_checkout_failures_total",
            "Connection checkouts that failed, by reason.",
            labels ["reason"];
        closed: IntCounterVec = "mongoload_pool_connections_closed_total",
            "Driver pool connections closed, by reason: error (the connection failed), dropped (its operation timed out while the request was being written or the reply read, or the reply to a timed-out operation did not come within 30 s), stale (the pool was cleared), idle, pool_closed, other.",
            labels ["reason"];
        clears: IntCounterVec = "mongoload_pool_clears_total",
            "Times the driver cleared a connection pool, by cause: timeout (a check or a connection timed out: the member frozen or unreachable; connections in use interrupted) or error (a connection failed: dropped, reset, refused, or the server shutting down).",
            labels ["cause"];
        servers: IntGaugeVec = "mongoload_topology_servers",
            "Servers of the deployment by type, as the driver sees them.",
            labels ["type"];
    }
}

/// Checkout waits are usually microseconds: three buckets below 100 µs,
/// then 1-2-5 per decade (a queueing signal, not a latency figure: the
/// fine latency layout would add 235 series for no panel).
fn checkout_buckets() -> Vec<f64> {
    let mut buckets = vec![0.00001, 0.00002, 0.00005];
    buckets.extend_from_slice(&COARSE_BUCKETS);
    buckets
}

pub(crate) struct DriverMetrics {
    /// Open connections (established or being established): not exported,
    /// `idle` is this minus `in_use`.
    open: IntGauge,
    idle: IntGauge,
    in_use: IntGauge,
    f: DriverFamilies,
    pool: Mutex<PoolBook<ServerAddress>>,
    topology: Mutex<TopologyView>,
}

impl DriverMetrics {
    pub(crate) fn new() -> Result<Self, prometheus::Error> {
        let f = DriverFamilies::new()?;
        for reason in CHECKOUT_FAILURE_REASONS {
            f.checkout_failures.with_label_values(&[reason]);
        }
        for reason in CONNECTION_CLOSED_REASONS {
            f.closed.with_label_values(&[reason]);
        }
        for cause in POOL_CLEAR_CAUSES {
            f.clears.with_label_values(&[cause]);
        }
        for t in SERVER_TYPES {
            f.servers.with_label_values(&[t]).set(0);
        }
        Ok(DriverMetrics {
            open: IntGauge::new("mongoload_pool_connections_open", "not exported")?,
            idle: f.connections.with_label_values(&["idle"]),
            in_use: f.connections.with_label_values(&["in_use"]),
            f,
            pool: Mutex::new(PoolBook::new()),
            topology: Mutex::new(TopologyView::default()),
        })
    }

    pub(crate) fn register(&self, registry: &Registry) -> Result<(), prometheus::Error> {
        self.f.register(registry)
    }

    pub(crate) fn on_cmap(&self, event: &CmapEvent) {
        self.on_cmap_counts(event);
        self.idle.set(self.open.get() - self.in_use.get());
    }

    fn on_cmap_counts(&self, event: &CmapEvent) {
        match event {
            CmapEvent::ConnectionCreated(_) => self.open.inc(),
            CmapEvent::ConnectionClosed(ev) => {
                self.open.dec();
                self.f
                    .closed
                    .with_label_values(&[closed_reason_label(&ev.reason)])
                    .inc();
                self.release(&ev.address, ev.connection_id);
            }
            CmapEvent::ConnectionCheckedOut(ev) => {
                self.f.checkout_wait.observe(ev.duration.as_secs_f64());
                if self.book().check_out(&ev.address, ev.connection_id) {
                    self.in_use.inc();
                }
            }
            CmapEvent::ConnectionCheckedIn(ev) => self.release(&ev.address, ev.connection_id),
            CmapEvent::ConnectionCheckoutFailed(ev) => {
                let reason = match ev.reason {
                    ConnectionCheckoutFailedReason::Timeout => "timeout",
                    ConnectionCheckoutFailedReason::ConnectionError => "connection_error",
                    _ => "other",
                };
                self.f.checkout_failures.with_label_values(&[reason]).inc();
            }
            CmapEvent::PoolCleared(ev) => {
                // The driver interrupts the connections in use exactly when
                // a network timeout caused the clear.
                let cause = if ev.interrupt_in_use_connections {
                    "timeout"
                } else {
                    "error"
                };
                self.f.clears.with_label_values(&[cause]).inc();
            }
            CmapEvent::PoolClosed(ev) => {
                let out = self.book().close_pool(&ev.address);
                self.in_use.sub(i64::try_from(out).unwrap_or(i64::MAX));
            }
            _ => {}
        }
    }

    /// A connection went back or was closed: no longer in use, if it was.
    fn release(&self, pool: &ServerAddress, id: u32) {
        if self.book().release(pool, id) {
            self.in_use.dec();
        }
    }

    fn book(&self) -> std::sync::MutexGuard<'_, PoolBook<ServerAddress>> {
        self.pool.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A new topology description: the servers by type and the view for
    /// `/status` (`changed`: its primary is a change, the failover's
    /// call).
    pub(crate) fn on_topology(&self, desc: &TopologyDescription, changed: bool) {
        let mut counts = BTreeMap::new();
        let mut primary = None;
        let mut secondaries = Vec::new();
        for (addr, info) in desc.servers() {
            let label = server_type_label(info.server_type());
            *counts.entry(label).or_insert(0u64) += 1;
            match info.server_type() {
                ServerType::RsPrimary => primary = Some(addr.to_string()),
                ServerType::RsSecondary => secondaries.push(addr.to_string()),
                _ => {}
            }
        }
        secondaries.sort();
        for t in SERVER_TYPES {
            let n = counts.get(t).copied().unwrap_or(0);
            self.f
                .servers
                .with_label_values(&[t])
                .set(i64::try_from(n).unwrap_or(i64::MAX));
        }
        let mut view = self.topology.lock().unwrap_or_else(PoisonError::into_inner);
        let primary_changes = view.primary_changes + u64::from(changed);
        *view = TopologyView {
            topology_type: desc.topology_type().to_string(),
            servers: counts,
            primary,
            writable: desc.has_writable_server(),
            primary_changes,
            secondaries,
        };
    }

    pub(crate) fn topology(&self) -> TopologyView {
        self.topology
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_book_counts_each_connection_once() {
        let mut book = PoolBook::new();
        let a = "a:27017".to_owned();
        let b = "b:27017".to_owned();
        assert!(book.check_out(&a, 1));
        assert!(!book.check_out(&a, 1), "duplicate checkout counted twice");
        assert!(book.check_out(&b, 1), "ids are per pool");
        assert!(book.release(&a, 1));
        assert!(!book.release(&a, 1), "double check-in counted twice");
        assert!(!book.release(&a, 7), "unknown connection");
        assert!(book.check_out(&b, 2));
        assert_eq!(book.close_pool(&b), 2);
        assert_eq!(book.close_pool(&b), 0);
        assert!(!book.release(&b, 1), "closed pool forgotten");
    }

    #[test]
    fn server_type_labels_are_the_declared_ones() {
        for t in [
            ServerType::Standalone,
            ServerType::Mongos,
            ServerType::RsPrimary,
            ServerType::RsSecondary,
            ServerType::RsArbiter,
            ServerType::RsOther,
            ServerType::RsGhost,
            ServerType::LoadBalancer,
            ServerType::Unknown,
        ] {
            assert!(SERVER_TYPES.contains(&server_type_label(t)), "{t:?}");
        }
        assert_eq!(server_type_label(ServerType::RsPrimary), "rs_primary");
    }
}
