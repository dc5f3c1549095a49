//! Command dispatch: one function per MongoDB command, each taking the
//! command document and returning the reply MongoDB 7.0 would send. Runs
//! synchronously under short store locks; faults are applied by the caller.
//! The commands live by family: `handshake`, `catalog`, `crud`, `reads`
//! (aggregate, distinct, count); `args` reads their arguments.

use std::sync::atomic::Ordering as AtomicOrdering;

use bson::{doc, Document};

mod args;
/// Argument readers the sharded router shares.
pub(crate) use args::{as_i64, coll_name};
mod catalog;
mod crud;
mod handshake;
mod reads;

use args::*;
use catalog::*;
use crud::*;
use handshake::*;
use reads::*;

use super::aggregate::Pipeline;
use super::cursor::GetMore;
use super::query::{get_path, Filter, Projection, QueryError, SortSpec};
use super::server::Shared;
use super::store::{index_name, rlock, wlock, Key, WriteError};
use super::update::{upsert_seed, Update};
use super::wire::{MAX_BSON_SIZE, MAX_MESSAGE_SIZE};

/// The version `buildInfo` and `serverStatus` report: says it is the simulator.
pub const VERSION: &str = "7.0.0-mongoload-sim";
/// Largest write batch accepted, as MongoDB.
pub const MAX_WRITE_BATCH: usize = 100_000;

/// A command failure: `ok: 0` with `code`, `codeName` and `errmsg`.
#[derive(Debug, Clone, PartialEq)]
pub struct CmdError {
    pub code: i32,
    pub code_name: &'static str,
    pub message: String,
    /// Extra top-level fields (e.g. keyPattern/keyValue on a duplicate key).
    pub extra: Option<Box<Document>>,
}

impl CmdError {
    pub fn new(code: i32, code_name: &'static str, message: impl Into<String>) -> CmdError {
        CmdError {
            code,
            code_name,
            message: message.into(),
            extra: None,
        }
    }

    fn bad_value(message: impl Into<String>) -> CmdError {
        CmdError::new(2, "BadValue", message)
    }

    fn type_mismatch(message: impl Into<String>) -> CmdError {
        CmdError::new(14, "TypeMismatch", message)
    }

    /// The reply document.
    pub fn to_doc(&self) -> Document {
        let mut d = doc! { "ok": 0.0, "errmsg": &self.message, "code": self.code, "codeName": self.code_name };
        if let Some(extra) = &self.extra {
            d.extend(extra.as_ref().clone());
        }
        d
    }
}

impl From<QueryError> for CmdError {
    fn from(e: QueryError) -> Self {
        CmdError::new(e.code, e.code_name, e.message)
    }
}

impl From<WriteError> for CmdError {
    fn from(e: WriteError) -> Self {
        let mut c = CmdError::new(e.code, e.code_name, e.errmsg);
        if let Some(k) = e.key {
            let (pattern, value) = *k;
            c.extra = Some(Box::new(doc! { "keyPattern": pattern, "keyValue": value }));
        }
        c
    }
}

type CmdResult = Result<Document, CmdError>;

/// The codeName MongoDB uses for `code` (for injected errors).
pub fn code_name(code: i32) -> &'static str {
    match code {
        1 => "InternalError",
        2 => "BadValue",
        6 => "HostUnreachable",
        7 => "HostNotFound",
        11 => "UserNotFound",
        13 => "Unauthorized",
        18 => "AuthenticationFailed",
        26 => "NamespaceNotFound",
        43 => "CursorNotFound",
        50 => "MaxTimeMSExpired",
        59 => "CommandNotFound",
        89 => "NetworkTimeout",
        91 => "ShutdownInProgress",
        112 => "WriteConflict",
        189 => "PrimarySteppedDown",
        262 => "ExceededTimeLimit",
        9001 => "SocketException",
        10107 => "NotWritablePrimary",
        11000 => "DuplicateKey",
        11600 => "InterruptedAtShutdown",
        11602 => "InterruptedDueToReplStateChange",
        13435 => "NotPrimaryNoSecondaryOk",
        13436 => "NotPrimaryOrSecondary",
        _ => "UnknownError",
    }
}

/// The reply MongoDB sends for an error with `code`, as an injected fault.
/// `retryable_write` says the command carried a `txnNumber`: then the
/// codes MongoDB retries get the `RetryableWriteError` label, as a 4.4+
/// server adds it (the driver relies on the server for that label).
pub fn injected_error(code: i32, retryable_write: bool) -> Document {
    let message = match code {
        10107 => "not primary".to_owned(),
        91 => "The server is in quiesce mode and will shut down".to_owned(),
        112 => "WriteConflict error: this operation conflicted with another operation. Please retry your operation or multi-document transaction.".to_owned(),
        50 => "operation exceeded time limit".to_owned(),
        c => format!("simulated error (code {c}) injected by mongoload sim"),
    };
    let mut d = CmdError::new(code, code_name(code), message).to_doc();
    let mut labels = Vec::new();
    if code == 112 {
        labels.push("TransientTransactionError");
    }
    const RETRYABLE: [i32; 13] = [
        6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 134,
    ];
    if retryable_write && RETRYABLE.contains(&code) {
        labels.push("RetryableWriteError");
    }
    if !labels.is_empty() {
        d.insert("errorLabels", labels);
    }
    d
}

/// The command name: the first key of the document.
pub fn command_name(cmd: &Document) -> &str {
    cmd.keys().next().map(String::as_str).unwrap_or("")
}

/// Runs one command and returns the reply (success or error shape).
pub fn execute(shared: &Shared, connection_id: i64, cmd: Document) -> Document {
    let name = command_name(&cmd).to_owned();
    let db = cmd.get_str("$db").unwrap_or("test").to_owned();
    let c = &shared.stats;
    // Writes are counted per document or statement by their handlers.
    let counter = match name.as_str() {
        "find" => Some(&c.query),
        "getMore" => Some(&c.getmore),
        "insert" | "update" | "delete" => None,
        _ => Some(&c.command),
    };
    if let Some(counter) = counter {
        counter.fetch_add(1, AtomicOrdering::Relaxed);
    }
    // The simulator is a standalone, and a standalone refuses any command
    // of a multi-document transaction with this error.
    if cmd.contains_key("autocommit") {
        return CmdError::new(
            20,
            "IllegalOperation",
            "Transaction numbers are only allowed on a replica set member or mongos",
        )
        .to_doc();
    }
    let result = match name.as_str() {
        "hello" | "isMaster" | "ismaster" => {
            let mut reply = hello(connection_id, name != "hello", shared.sessions);
            // The compressors the client offers that this server speaks.
            if let Ok(offered) = cmd.get_array("compression") {
                reply.insert("compression", crate::compress::negotiate(offered));
            }
            Ok(reply)
        }
        "ping" | "endSessions" | "killAllSessions" | "killSessions" => Ok(doc! { "ok": 1.0 }),
        "buildInfo" | "buildinfo" => Ok(build_info()),
        "serverStatus" => Ok(server_status(shared)),
        "whatsmyuri" => Ok(doc! { "you": "127.0.0.1", "ok": 1.0 }),
        "listDatabases" => list_databases(shared, &cmd),
        "listCollections" => list_collections(shared, &db, &cmd),
        "create" => create(shared, &db, &cmd),
        "drop" => drop(shared, &db, &cmd),
        "dropDatabase" => {
            shared.store.drop_database(&db);
            Ok(doc! { "ok": 1.0 })
        }
        "createIndexes" => create_indexes(shared, &db, &cmd),
        "listIndexes" => list_indexes(shared, &db, &cmd),
        "dropIndexes" | "deleteIndexes" => drop_indexes(shared, &db, &cmd),
        "insert" => insert(shared, &db, cmd),
        "find" => find(shared, &db, &cmd),
        "getMore" => get_more(shared, &db, &cmd),
        "killCursors" => kill_cursors(shared, &cmd),
        "update" => update(shared, &db, &cmd),
        "delete" => delete(shared, &db, &cmd),
        "findAndModify" | "findandmodify" => find_and_modify(shared, &db, &cmd),
        "aggregate" => aggregate(shared, &db, &cmd),
        "distinct" => distinct(shared, &db, &cmd),
        "count" => count(shared, &db, &cmd),
        "profile" => crate::profile::command(&shared.profiler, &db, &cmd),
        _ => Err(CmdError::new(
            59,
            "CommandNotFound",
            format!("no such command: '{name}'"),
        )),
    };
    result.unwrap_or_else(|e| e.to_doc())
}
