//! Command dispatch: one function per MongoDB command, each taking the
//! command document and returning the reply MongoDB 7.0 would send. Runs
//! synchronously under short store locks; faults are applied by the caller.
//! The commands live by family: `handshake`, `catalog`, `crud`, `reads`
//! (aggregate, distinct, count), `explain`; `args` reads their arguments.

use std::sync::atomic::Ordering as AtomicOrdering;

use bson::{doc, Document};

mod args;
/// Argument readers the sharded router shares.
pub(crate) use args::{as_i64, coll_name};
/// The router checks write statements before it routes them.
pub(crate) use crud::check_write_statements;
mod catalog;
mod crud;
pub(crate) mod explain;
mod handshake;
mod reads;

use args::*;
use catalog::*;
use crud::*;
use handshake::*;
use reads::*;

pub use super::error::{code_name, command_name, injected_error, CmdError};

use super::aggregate::Pipeline;
use super::cursor::GetMore;
use super::query::{values_at_path, Filter, Projection, QueryError, SortSpec};
use super::shared::Shared;
use super::store::{index_name, rlock, wlock, Index, IndexOptions, Key, WriteError, HASHED};
use super::update::{type_name, upsert_seed, Update};
use super::wire::{MAX_BSON_SIZE, MAX_MESSAGE_SIZE};

/// The version `buildInfo` and `serverStatus` report: says it is the simulator.
pub const VERSION: &str = "7.0.0-mongoload-sim";
/// Largest write batch accepted, as MongoDB.
pub const MAX_WRITE_BATCH: usize = 100_000;

type CmdResult = Result<Document, CmdError>;

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
    // Nor does it have retryable writes: a txnNumber sent to a standalone
    // is refused, never ignored (a retry would apply the write twice).
    if cmd.contains_key("txnNumber") && shared.role.get().is_none() {
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
                reply.insert("compression", crate::wire::compress::negotiate(offered));
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
        "explain" => explain::explain(shared, &db, &cmd),
        "profile" => crate::profile::command(&shared.profiler, &db, &cmd),
        _ => Err(CmdError::new(
            59,
            "CommandNotFound",
            format!("no such command: '{name}'"),
        )),
    };
    result.unwrap_or_else(|e| e.to_doc())
}

#[cfg(test)]
mod tests;
