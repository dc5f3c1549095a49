//! The set's table of sessions (MongoDB's `config.transactions`):
//! retryable writes answered once per `(lsid, txnNumber)`, and
//! multi-document transactions as far as their life across an election.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};

use super::member::{access, not_primary, number, write, Access, WriteConcern};
use super::{lock, Inner};
use crate::commands::{self, command_name, CmdError};
use crate::shared::Shared;
use crate::store::{rlock, Key};

/// The last retryable write of one session.
struct TxnRecord {
    txn: i64,
    reply: Document,
    /// The oplog position after it (a rollback above it forgets it).
    seq: u64,
    used: Instant,
}

/// What a retryable write finds in the table.
#[derive(Debug, PartialEq)]
pub(crate) enum Retry {
    /// Not seen: run it.
    New,
    /// Already done: answer this again (and wait for its write concern at `seq`).
    Replay(Document, u64),
    /// A newer txnNumber already ran on this session.
    TooOld(i64),
}

/// Sessions whose table grows past this drop the ones idle for longer than
/// MongoDB's `logicalSessionTimeoutMinutes` (30).
const MAX_SESSIONS: usize = 100_000;
const SESSION_IDLE: Duration = Duration::from_secs(30 * 60);

/// The retryable writes the set has seen (MongoDB's
/// `config.transactions`): per session, the last `txnNumber` and its reply;
/// and the multi-document transactions open or committed, per session.
#[derive(Default)]
pub(crate) struct TxnTable {
    sessions: BTreeMap<Key, TxnRecord>,
    transactions: BTreeMap<Key, Transaction>,
}

/// A session's multi-document transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Transaction {
    txn: i64,
    /// The term it started in: an election aborts it.
    term: i64,
    committed: bool,
}

impl TxnTable {
    pub(crate) fn check(&mut self, lsid: &Key, txn: i64) -> Retry {
        match self.sessions.get_mut(lsid) {
            Some(r) if r.txn == txn => {
                r.used = Instant::now();
                Retry::Replay(r.reply.clone(), r.seq)
            }
            Some(r) if r.txn > txn => Retry::TooOld(r.txn),
            _ => Retry::New,
        }
    }

    pub(crate) fn record(&mut self, lsid: Key, txn: i64, reply: Document, seq: u64) {
        if self.sessions.len() >= MAX_SESSIONS {
            self.sessions.retain(|_, r| r.used.elapsed() < SESSION_IDLE);
        }
        self.sessions.insert(
            lsid,
            TxnRecord {
                txn,
                reply,
                seq,
                used: Instant::now(),
            },
        );
    }

    /// A rollback removed every write above `seq`.
    pub(crate) fn forget_after(&mut self, seq: u64) {
        self.sessions.retain(|_, r| r.seq <= seq);
    }

    /// Transaction `txn` of `lsid` starts in `term`.
    fn start_transaction(&mut self, lsid: Key, txn: i64, term: i64) {
        if self.transactions.len() >= MAX_SESSIONS {
            self.transactions
                .retain(|_, t| !t.committed && t.term == term);
        }
        self.transactions.insert(
            lsid,
            Transaction {
                txn,
                term,
                committed: false,
            },
        );
    }

    /// Whether transaction `txn` of `lsid` is open in `term` (`committed`:
    /// or already committed, for a commit sent again).
    fn transaction(&self, lsid: &Key, txn: i64, term: i64, committed: bool) -> bool {
        self.transactions
            .get(lsid)
            .is_some_and(|t| t.txn == txn && t.term == term && (committed || !t.committed))
    }

    /// Ends transaction `txn` of `lsid`: committed, or forgotten (abort).
    fn end_transaction(&mut self, lsid: &Key, commit: bool) {
        if commit {
            if let Some(t) = self.transactions.get_mut(lsid) {
                t.committed = true;
            }
        } else {
            self.transactions.remove(lsid);
        }
    }
}

/// A statement, `commitTransaction` or `abortTransaction` of a
/// multi-document transaction (a command with `autocommit: false`). The
/// simulator runs each statement at once, with no isolation, and an abort
/// undoes nothing: what it models is a transaction's life across an
/// election. A transaction belongs to the term it started in; after an
/// election its statements and commit get NoSuchTransaction (251) with the
/// `TransientTransactionError` label, as a real set answers once the
/// election aborted it, so that clients' retry loops can be exercised. A
/// commit waits for its write concern (default `"majority"`) over every
/// write made so far; a commit sent again after it succeeded succeeds.
pub(super) async fn transaction(
    set: &Inner,
    me: usize,
    shared: &Shared,
    connection_id: i64,
    mut body: Document,
) -> Document {
    let name = command_name(&body).to_owned();
    let Some((lsid, txn)) = retry_key(&body) else {
        return CmdError::new(
            50768,
            "InvalidOptions",
            "a transaction needs lsid and txnNumber",
        )
        .to_doc();
    };
    let ending = matches!(name.as_str(), "commitTransaction" | "abortTransaction");
    let term = rlock(&set.topology).term;
    if set.primary() != Some(me) {
        let mut d = not_primary(set, me, 10107, ending);
        if !ending {
            d.insert("errorLabels", vec!["TransientTransactionError"]);
        }
        return d;
    }
    let starts = body.get_bool("startTransaction") == Ok(true);
    {
        let mut txns = lock(&set.txns);
        if starts {
            txns.start_transaction(lsid.clone(), txn, term);
        } else if !txns.transaction(&lsid, txn, term, name == "commitTransaction") {
            return no_such_transaction(txn);
        }
    }
    if ending {
        let commit = name == "commitTransaction";
        lock(&set.txns).end_transaction(&lsid, commit);
        if !commit {
            return doc! { "ok": 1.0 };
        }
        let (wc, needed) = match WriteConcern::parse_for(&body, set.members.len()) {
            Ok(parsed) => parsed,
            Err(e) => return e.to_doc(),
        };
        let seq = set.core.oplog().last().seq;
        let mut reply = doc! { "ok": 1.0 };
        set.await_write_concern(seq, needed, &wc, &mut reply).await;
        return reply;
    }
    // A statement: run as a plain command (a write acknowledged by the
    // primary alone; the commit waits for the write concern).
    for k in [
        "autocommit",
        "startTransaction",
        "txnNumber",
        "readConcern",
        "writeConcern",
    ] {
        body.remove(k);
    }
    match access(&name, &body) {
        Access::Write => {
            body.insert("writeConcern", doc! { "w": 1 });
            write(set, me, shared, connection_id, body).await
        }
        Access::Read | Access::Any => commands::execute(shared, connection_id, body),
    }
}

/// The answer to a statement or commit of a transaction the set does not
/// know (never started here, or aborted by an election).
fn no_such_transaction(txn: i64) -> Document {
    let mut d = CmdError::new(
        251,
        "NoSuchTransaction",
        format!("Transaction with txnNumber {txn} has been aborted."),
    )
    .to_doc();
    d.insert("errorLabels", vec!["TransientTransactionError"]);
    d
}

/// `(lsid, txnNumber)` of a retryable write.
pub(super) fn retry_key(body: &Document) -> Option<(Key, i64)> {
    let lsid = body.get_document("lsid").ok()?;
    let txn = body.get("txnNumber").and_then(number)?;
    Some((Key(Bson::Document(lsid.clone())), txn))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_writes_are_answered_once_per_txn_number() {
        let mut t = TxnTable::default();
        let a = Key(Bson::Document(doc! {"id": 1}));
        let b = Key(Bson::Document(doc! {"id": 2}));
        assert_eq!(t.check(&a, 1), Retry::New);
        t.record(a.clone(), 1, doc! {"n": 1, "ok": 1.0}, 10);
        t.record(b.clone(), 7, doc! {"n": 3, "ok": 1.0}, 12);
        assert_eq!(t.check(&a, 1), Retry::Replay(doc! {"n": 1, "ok": 1.0}, 10));
        assert_eq!(t.check(&a, 2), Retry::New);
        assert_eq!(t.check(&b, 6), Retry::TooOld(7));
        t.forget_after(11);
        assert_eq!(t.check(&b, 7), Retry::New, "rolled back: runs again");
        assert_eq!(t.check(&a, 1), Retry::Replay(doc! {"n": 1, "ok": 1.0}, 10));
        assert_eq!(
            retry_key(&doc! {"insert": "c", "lsid": {"id": 1}, "txnNumber": 5_i64}),
            Some((a, 5))
        );
        assert_eq!(retry_key(&doc! {"insert": "c", "lsid": {"id": 1}}), None);
    }
}
