//! The retry book: which sessions' retryable writes were seen, to tell a
//! retry of the driver's retryable writes (the same session and
//! `txnNumber` again) from a new write, and the class of the failure each
//! retry followed.

use foldhash::HashMap;

use mongodb::bson::{Bson, Document};

use crate::error_kind::ErrorKind;

/// Sessions whose last retryable write is remembered (sessions are pooled,
/// about one per concurrent operation); beyond this the table restarts.
const MAX_SESSIONS: usize = 65_536;

/// A session id: the driver makes each as a UUID (16 bytes).
type SessionId = u128;

/// Which sessions' retryable writes were seen, to tell a retry (the same
/// session and `txnNumber` again) from a new write.
#[derive(Debug, Default)]
pub(super) struct RetryBook {
    /// lsid → (last txnNumber, class of its last failed attempt).
    sessions: HashMap<SessionId, (i64, Option<ErrorKind>)>,
    /// request id → lsid of a write attempt in flight.
    inflight: HashMap<i32, SessionId>,
}

/// The write commands (their attempts feed the outage clock).
pub fn is_write_command(name: &str) -> bool {
    matches!(
        name,
        "insert" | "update" | "delete" | "findAndModify" | "commitTransaction"
    )
}

/// The session id and transaction number of a retryable write (not one
/// inside a multi-document transaction, whose statements share a number),
/// read from the command as sent (the started event's copy of it).
fn retryable_write_key(command: &Document) -> Option<(SessionId, i64)> {
    if command.contains_key("autocommit") {
        return None;
    }
    let txn = match command.get("txnNumber")? {
        Bson::Int64(n) => *n,
        Bson::Int32(n) => i64::from(*n),
        _ => return None,
    };
    let id = match command.get_document("lsid").ok()?.get("id")? {
        Bson::Binary(b) => SessionId::from_be_bytes(b.bytes.as_slice().try_into().ok()?),
        _ => return None,
    };
    Some((id, txn))
}

impl RetryBook {
    /// A write attempt `request_id` of `command` was sent: the class of the
    /// failure it retries when it is a retry (a retryable write of a
    /// session and `txnNumber` seen before), else none.
    pub(super) fn started(&mut self, request_id: i32, command: &Document) -> Option<ErrorKind> {
        let (lsid, txn) = retryable_write_key(command)?;
        if self.sessions.len() >= MAX_SESSIONS {
            self.sessions.clear();
        }
        let retry = match self.sessions.get(&lsid) {
            Some((last, failure)) if *last == txn => Some(failure.unwrap_or(ErrorKind::Other)),
            _ => None,
        };
        self.sessions.insert(lsid, (txn, None));
        self.inflight.insert(request_id, lsid);
        retry
    }

    /// Attempt `request_id` failed with an error of class `kind`.
    pub(super) fn failed(&mut self, request_id: i32, kind: ErrorKind) {
        if let Some(lsid) = self.inflight.remove(&request_id) {
            if let Some(s) = self.sessions.get_mut(&lsid) {
                s.1 = Some(kind);
            }
        }
    }

    /// Attempt `request_id` got a reply.
    pub(super) fn succeeded(&mut self, request_id: i32) {
        self.inflight.remove(&request_id);
    }
}
