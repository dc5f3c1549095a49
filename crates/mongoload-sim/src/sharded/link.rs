//! A router's connection to one shard, over TCP through the wire protocol
//! as a mongos's is: a frozen shard member stalls the router's request, a
//! step-down fails the writes sent to that shard. Commands go to the
//! shard's primary (a standalone's only member), found by `hello` and
//! found again after a state-change error or a broken connection. No
//! authentication or TLS between router and shard (internal).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use bson::{doc, Bson, Document};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::wire::{self, Request, HEADER_LEN};

/// How long the router waits for a shard member's `hello` while looking
/// for its primary: a frozen member is skipped, not waited on.
const DISCOVERY_TIMEOUT: Duration = Duration::from_secs(2);

/// Connections kept open per shard member.
const POOL_MAX: usize = 256;

/// One shard as a router reaches it.
pub(crate) struct ShardLink {
    /// Member addresses (one for a standalone).
    members: Vec<SocketAddr>,
    /// The member taken for primary, when known.
    primary: Mutex<Option<usize>>,
    /// Idle connections, by member.
    pool: Mutex<Vec<Vec<TcpStream>>>,
    next_id: AtomicI32,
}

/// The reply of a shard that could not be reached: a command error, as a
/// mongos reports it.
pub(crate) fn unreachable(code: i32, code_name: &'static str, message: String) -> Document {
    crate::commands::CmdError::new(code, code_name, message).to_doc()
}

impl ShardLink {
    pub(crate) fn new(members: Vec<SocketAddr>) -> ShardLink {
        let n = members.len();
        ShardLink {
            members,
            primary: Mutex::new(if n == 1 { Some(0) } else { None }),
            pool: Mutex::new((0..n).map(|_| Vec::new()).collect()),
            next_id: AtomicI32::new(1),
        }
    }

    fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `cmd` on the shard's primary and returns its reply (an error
    /// reply when no primary answers). A state-change error makes the
    /// router look for the primary again on the next command.
    pub(crate) async fn run(&self, cmd: &Document) -> Document {
        let Some(m) = self.find_primary().await else {
            return unreachable(
                133,
                "FailedToSatisfyReadPreference",
                format!(
                    "Could not find host matching read preference {{ mode: \"primary\" }} for set of {}",
                    self.hosts()
                ),
            );
        };
        let mut result = self.call(m, cmd).await;
        if result.is_err() {
            // A pooled connection the member closed (a step-down closes
            // them): once more on a new connection.
            Self::lock(&self.pool)[m].clear();
            result = self.call(m, cmd).await;
        }
        match result {
            Ok(reply) => {
                if let Ok(code) = reply.get_i32("code") {
                    if crate::replset::STATE_CHANGE_CODES.contains(&code) || code == 91 {
                        self.forget(m);
                    }
                }
                reply
            }
            Err(e) => {
                self.forget(m);
                unreachable(
                    6,
                    "HostUnreachable",
                    format!(
                        "HostUnreachable: connection to {} failed: {e}",
                        self.members[m]
                    ),
                )
            }
        }
    }

    /// The members as a host list.
    pub(crate) fn hosts(&self) -> String {
        self.members
            .iter()
            .map(SocketAddr::to_string)
            .collect::<Vec<_>>()
            .join(",")
    }

    fn forget(&self, m: usize) {
        if self.members.len() > 1 {
            let mut p = Self::lock(&self.primary);
            if *p == Some(m) {
                *p = None;
            }
        }
        Self::lock(&self.pool)[m].clear();
    }

    async fn find_primary(&self) -> Option<usize> {
        if let Some(m) = *Self::lock(&self.primary) {
            return Some(m);
        }
        let asks = (0..self.members.len()).map(|m| async move {
            let hello = doc! { "hello": 1, "$db": "admin" };
            let r = tokio::time::timeout(DISCOVERY_TIMEOUT, self.call(m, &hello)).await;
            match r {
                Ok(Ok(reply)) if reply.get_bool("isWritablePrimary") == Ok(true) => Some(m),
                _ => None,
            }
        });
        let found = futures_first(asks).await;
        if let Some(m) = found {
            *Self::lock(&self.primary) = Some(m);
        }
        found
    }

    async fn call(&self, m: usize, cmd: &Document) -> std::io::Result<Document> {
        let pooled = Self::lock(&self.pool)[m].pop();
        let mut stream = match pooled {
            Some(s) => s,
            None => {
                let s = TcpStream::connect(self.members[m]).await?;
                s.set_nodelay(true)?;
                s
            }
        };
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut out = Vec::with_capacity(256);
        wire::encode_msg(&mut out, id, 0, cmd);
        stream.write_all(&out).await?;
        let mut head = [0u8; HEADER_LEN];
        stream.read_exact(&mut head).await?;
        let header = wire::parse_header(&head).map_err(std::io::Error::other)?;
        let mut frame = head.to_vec();
        frame.resize(header.length, 0);
        stream.read_exact(&mut frame[HEADER_LEN..]).await?;
        let reply = match wire::parse_message(&frame).map_err(std::io::Error::other)? {
            Request::Msg { body, .. } => body,
            Request::Query { query, .. } => query,
        };
        let mut pool = Self::lock(&self.pool);
        if pool[m].len() < POOL_MAX {
            pool[m].push(stream);
        }
        Ok(reply)
    }

    /// Runs a cursor command (`find`, `aggregate`) and reads the cursor to
    /// its end with `getMore`; an error reply as it came.
    pub(crate) async fn drain(&self, cmd: &Document) -> Result<Vec<Document>, Document> {
        let db = cmd.get_str("$db").unwrap_or("test").to_owned();
        let mut reply = self.run(cmd).await;
        let mut docs = Vec::new();
        let mut batch_key = "firstBatch";
        loop {
            if reply.get_f64("ok").ok() != Some(1.0) && reply.get_i32("ok").ok() != Some(1) {
                return Err(reply);
            }
            let Ok(cursor) = reply.get_document("cursor") else {
                return Err(reply);
            };
            if let Ok(batch) = cursor.get_array(batch_key) {
                docs.extend(batch.iter().filter_map(|b| match b {
                    Bson::Document(d) => Some(d.clone()),
                    _ => None,
                }));
            }
            let id = cursor.get_i64("id").unwrap_or(0);
            if id == 0 {
                return Ok(docs);
            }
            let coll = cursor
                .get_str("ns")
                .ok()
                .and_then(|ns| ns.split_once('.'))
                .map_or_else(String::new, |(_, c)| c.to_owned());
            reply = self
                .run(&doc! { "getMore": id, "collection": coll, "$db": &db })
                .await;
            batch_key = "nextBatch";
        }
    }
}

/// The first `Some` of several futures run at once (`None` when all are).
async fn futures_first<F>(futs: impl Iterator<Item = F>) -> Option<usize>
where
    F: std::future::Future<Output = Option<usize>>,
{
    let mut set: Vec<std::pin::Pin<Box<F>>> = futs.map(Box::pin).collect();
    std::future::poll_fn(move |cx| {
        let mut i = 0;
        while i < set.len() {
            match set[i].as_mut().poll(cx) {
                std::task::Poll::Ready(Some(m)) => return std::task::Poll::Ready(Some(m)),
                std::task::Poll::Ready(None) => {
                    drop(set.swap_remove(i));
                }
                std::task::Poll::Pending => i += 1,
            }
        }
        if set.is_empty() {
            std::task::Poll::Ready(None)
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}
