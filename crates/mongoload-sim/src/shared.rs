//! What the connections of one server share ([`Shared`]): its store,
//! cursors, faults, counters, user, profiler and its [`Role`] when it is a
//! replica-set member or a router. A leaf: the commands, a member and the
//! router all take a `Shared`, and the role lets the connection loop
//! (`server.rs`) hand a command to a member or a router without importing
//! either.

use std::sync::atomic::{AtomicI64, AtomicU64};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bson::{Bson, Document};
use futures::future::BoxFuture;

use crate::auth::Credentials;
use crate::cursor::Cursors;
use crate::faults::Faults;
use crate::profile::Profiler;
use crate::store::Store;

/// Adds `operationTime` and `$clusterTime` to `reply`, as a replica-set
/// member or a mongos adds them to every reply: `operation` and
/// `cluster` as they keep them, the signature a zero hash of key 0 (a
/// server without keys signs so).
pub(crate) fn stamp_cluster_time(reply: &mut Document, operation: Bson, cluster: Bson) {
    reply.insert("operationTime", operation);
    reply.insert(
        "$clusterTime",
        bson::doc! {
            "clusterTime": cluster,
            "signature": {
                "hash": Bson::Binary(bson::Binary {
                    subtype: bson::spec::BinarySubtype::Generic,
                    bytes: vec![0; 20],
                }),
                "keyId": 0_i64,
            },
        },
    );
}

/// Who answers a server's commands when it is not a standalone: a
/// replica-set member (`replset::Link`) or a sharded cluster's router
/// (`sharded::Cluster`).
pub(crate) trait Role: Send + Sync {
    /// Answers one command (faults and authentication already applied).
    fn respond<'a>(
        &'a self,
        shared: &'a Shared,
        connection_id: i64,
        body: Document,
    ) -> BoxFuture<'a, Document>;

    /// The reply to an injected error with `code` (`retryable_write`: the
    /// command carried a `txnNumber`); as a standalone sends it unless the
    /// role says otherwise.
    fn injected_error(&self, code: i32, retryable_write: bool) -> Document {
        crate::error::injected_error(code, retryable_write)
    }
}

/// Counters `serverStatus` reports.
#[derive(Debug, Default)]
pub struct Stats {
    pub insert: AtomicU64,
    pub query: AtomicU64,
    pub update: AtomicU64,
    pub delete: AtomicU64,
    pub getmore: AtomicU64,
    pub command: AtomicU64,
    pub conns_current: AtomicU64,
    pub conns_total: AtomicU64,
    /// Requests that came in OP_COMPRESSED, by compressor id (noop,
    /// snappy, zlib, zstd); each is answered compressed the same way.
    pub compressed: [AtomicU64; 4],
}

/// Everything the connections of one simulator share.
pub struct Shared {
    pub store: Store,
    pub cursors: Cursors,
    pub faults: Faults,
    pub stats: Stats,
    pub started: Instant,
    /// The user clients must authenticate as (`--auth`); none: no authentication.
    pub auth: Option<Credentials>,
    /// Serve TLS with this (`--tls-cert`/`--tls-key`); none: plain TCP.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Set when this server is a replica-set member or a sharded
    /// cluster's router: who answers its commands.
    pub(crate) role: OnceLock<Arc<dyn Role>>,
    /// Whether `hello` announces logical sessions.
    pub sessions: bool,
    /// The profiler and the slow-query log.
    pub profiler: Profiler,
    pub(crate) next_connection: AtomicI64,
    pub(crate) next_request: AtomicI64,
}

impl Shared {
    pub fn new(faults: Faults) -> Shared {
        Shared {
            store: Store::default(),
            cursors: Cursors::default(),
            faults,
            stats: Stats::default(),
            started: Instant::now(),
            auth: None,
            tls: None,
            role: OnceLock::new(),
            sessions: true,
            profiler: Profiler::default(),
            next_connection: AtomicI64::new(1),
            next_request: AtomicI64::new(1),
        }
    }
}
