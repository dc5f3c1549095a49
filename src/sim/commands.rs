//! Command dispatch: one function per MongoDB command, each taking the
//! command document and returning the reply MongoDB 7.0 would send. Runs
//! synchronously under short store locks; faults are applied by the caller.

use std::collections::BTreeSet;
use std::sync::atomic::Ordering as AtomicOrdering;

use mongodb::bson::{doc, Bson, DateTime, Document};

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
        "hello" => Ok(hello(connection_id, false)),
        "isMaster" | "ismaster" => Ok(hello(connection_id, true)),
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
        _ => Err(CmdError::new(
            59,
            "CommandNotFound",
            format!("no such command: '{name}'"),
        )),
    };
    result.unwrap_or_else(|e| e.to_doc())
}

fn hello(connection_id: i64, legacy: bool) -> Document {
    let mut d = Document::new();
    d.insert("helloOk", true);
    d.insert(
        if legacy {
            "ismaster"
        } else {
            "isWritablePrimary"
        },
        true,
    );
    d.extend(doc! {
        "maxBsonObjectSize": MAX_BSON_SIZE as i32,
        "maxMessageSizeBytes": MAX_MESSAGE_SIZE as i32,
        "maxWriteBatchSize": MAX_WRITE_BATCH as i32,
        "localTime": DateTime::now(),
        "logicalSessionTimeoutMinutes": 30,
        "connectionId": connection_id,
        "minWireVersion": 0,
        "maxWireVersion": 21,
        "readOnly": false,
        "ok": 1.0,
    });
    d
}

fn build_info() -> Document {
    doc! {
        "version": VERSION,
        "gitVersion": "mongoload-sim",
        "versionArray": [7, 0, 0, 0],
        "modules": [],
        "allocator": "system",
        "javascriptEngine": "none",
        "sysInfo": "mongoload sim: an in-memory test double, not a database",
        "bits": 64,
        "debug": false,
        "maxBsonObjectSize": MAX_BSON_SIZE as i32,
        "storageEngines": ["mongoload-sim-memory"],
        "ok": 1.0,
    }
}

fn server_status(shared: &Shared) -> Document {
    let s = &shared.stats;
    let up = shared.started.elapsed();
    let get = |c: &std::sync::atomic::AtomicU64| c.load(AtomicOrdering::Relaxed) as i64;
    doc! {
        "host": "mongoload-sim",
        "version": VERSION,
        "process": "mongoload-sim",
        "pid": std::process::id() as i64,
        "uptime": up.as_secs_f64().floor(),
        "uptimeMillis": up.as_millis() as i64,
        "uptimeEstimate": up.as_secs() as i64,
        "localTime": DateTime::now(),
        "connections": {
            "current": get(&s.conns_current) as i32,
            "available": 1_000_000 - get(&s.conns_current) as i32,
            "totalCreated": get(&s.conns_total),
            "active": get(&s.conns_current) as i32,
        },
        "opcounters": {
            "insert": get(&s.insert),
            "query": get(&s.query),
            "update": get(&s.update),
            "delete": get(&s.delete),
            "getmore": get(&s.getmore),
            "command": get(&s.command),
        },
        "ok": 1.0,
    }
}

// ---- argument helpers ----

fn as_i64(b: &Bson) -> Option<i64> {
    match *b {
        Bson::Int32(v) => Some(v as i64),
        Bson::Int64(v) => Some(v),
        Bson::Double(v) if v.fract() == 0.0 && v.is_finite() => Some(v as i64),
        _ => None,
    }
}

fn opt_i64(cmd: &Document, field: &str) -> Result<Option<i64>, CmdError> {
    match cmd.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(v) => as_i64(v)
            .map(Some)
            .ok_or_else(|| CmdError::type_mismatch(format!("'{field}' must be a number"))),
    }
}

fn opt_bool(cmd: &Document, field: &str) -> bool {
    match cmd.get(field) {
        Some(Bson::Boolean(b)) => *b,
        Some(v) => as_i64(v).is_some_and(|n| n != 0),
        None => false,
    }
}

fn opt_doc<'a>(cmd: &'a Document, field: &str) -> Result<Option<&'a Document>, CmdError> {
    match cmd.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d)),
        Some(_) => Err(CmdError::type_mismatch(format!(
            "'{field}' must be an object"
        ))),
    }
}

fn coll_name<'a>(cmd: &'a Document, name: &str) -> Result<&'a str, CmdError> {
    match cmd.get(name) {
        Some(Bson::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(CmdError::new(
            73,
            "InvalidNamespace",
            format!("collection name must be a non-empty string for '{name}'"),
        )),
    }
}

fn batch_size(cmd: &Document) -> Result<Option<usize>, CmdError> {
    let c = match cmd.get("cursor") {
        Some(Bson::Document(c)) => opt_i64(c, "batchSize")?,
        _ => opt_i64(cmd, "batchSize")?,
    };
    match c {
        Some(n) if n < 0 => Err(CmdError::bad_value("batchSize must be non-negative")),
        Some(n) => Ok(Some(n as usize)),
        None => Ok(None),
    }
}

fn docs_array(cmd: &Document, field: &str) -> Result<Vec<Document>, CmdError> {
    match cmd.get(field) {
        Some(Bson::Array(a)) => a
            .iter()
            .map(|b| match b {
                Bson::Document(d) => Ok(d.clone()),
                _ => Err(CmdError::type_mismatch(format!(
                    "'{field}' entries must be objects"
                ))),
            })
            .collect(),
        _ => Err(CmdError::new(
            40414,
            "IDLFailedToParse",
            format!("BSON field '{field}' is missing but a required field"),
        )),
    }
}

fn cursor_reply(ns: &str, batch: Vec<Document>, id: i64, first: bool) -> Document {
    let key = if first { "firstBatch" } else { "nextBatch" };
    let batch: Vec<Bson> = batch.into_iter().map(Bson::Document).collect();
    let mut cursor = Document::new();
    cursor.insert(key, batch);
    cursor.insert("id", id);
    cursor.insert("ns", ns);
    doc! { "cursor": cursor, "ok": 1.0 }
}

fn write_error_doc(index: usize, e: WriteError) -> Bson {
    let mut d = doc! { "index": index as i32, "code": e.code };
    if let Some(k) = e.key {
        let (pattern, value) = *k;
        d.insert("keyPattern", pattern);
        d.insert("keyValue", value);
    }
    d.insert("errmsg", e.errmsg);
    Bson::Document(d)
}

// ---- catalog commands ----

fn list_databases(shared: &Shared, cmd: &Document) -> CmdResult {
    let filter = opt_doc(cmd, "filter")?.map(Filter::parse).transpose()?;
    let mut dbs = Vec::new();
    let mut total = 0i64;
    for (name, docs) in shared.store.databases() {
        let size = docs as i64 * 256;
        let d = doc! { "name": name, "sizeOnDisk": size, "empty": docs == 0 };
        if filter.as_ref().is_none_or(|f| f.matches(&d)) {
            total += size;
            dbs.push(Bson::Document(d));
        }
    }
    Ok(
        doc! { "databases": dbs, "totalSize": total, "totalSizeMb": total / (1024 * 1024), "ok": 1.0 },
    )
}

fn list_collections(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let filter = opt_doc(cmd, "filter")?.map(Filter::parse).transpose()?;
    let name_only = opt_bool(cmd, "nameOnly");
    let mut out = Vec::new();
    for (name, _) in shared.store.collections(db) {
        let d = if name_only {
            doc! { "name": name, "type": "collection" }
        } else {
            doc! {
                "name": name,
                "type": "collection",
                "options": {},
                "info": { "readOnly": false },
                "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
            }
        };
        if filter.as_ref().is_none_or(|f| f.matches(&d)) {
            out.push(d);
        }
    }
    let ns = format!("{db}.$cmd.listCollections");
    let (batch, id) = shared.cursors.open(&ns, out, batch_size(cmd)?, false);
    Ok(cursor_reply(&ns, batch, id, true))
}

fn create(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "create")?;
    if shared.store.create(db, coll) {
        Ok(doc! { "ok": 1.0 })
    } else {
        Err(CmdError::new(
            48,
            "NamespaceExists",
            format!("Collection {db}.{coll} already exists."),
        ))
    }
}

fn drop(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "drop")?;
    match shared.store.drop_collection(db, coll) {
        Some(c) => {
            let n = rlock(&c).indexes.len() as i32 + 1;
            Ok(doc! { "nIndexesWas": n, "ns": format!("{db}.{coll}"), "ok": 1.0 })
        }
        // MongoDB 7.0 answers ok for a missing collection.
        None => Ok(doc! { "ok": 1.0 }),
    }
}

fn parse_index_key(key: &Document) -> Result<Vec<(String, i32)>, CmdError> {
    if key.is_empty() {
        return Err(CmdError::new(
            67,
            "CannotCreateIndex",
            "Index keys cannot be empty.",
        ));
    }
    key.iter()
        .map(|(f, v)| match as_i64(v) {
            Some(d) if d == 1 || d == -1 => Ok((f.clone(), d as i32)),
            _ => Err(CmdError::new(67, "CannotCreateIndex", format!("Values in the index key pattern must be 1 or -1 in the simulator, got {f}: {v}"))),
        })
        .collect()
}

fn create_indexes(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "createIndexes")?;
    let specs = docs_array(cmd, "indexes")?;
    let mut parsed = Vec::new();
    for spec in &specs {
        let key_doc = opt_doc(spec, "key")?.ok_or_else(|| {
            CmdError::new(
                9,
                "FailedToParse",
                "The 'key' field is a required property of an index specification",
            )
        })?;
        let key = parse_index_key(key_doc)?;
        let name = match spec.get("name") {
            Some(Bson::String(n)) => n.clone(),
            _ => index_name(&key),
        };
        let mut stored = doc! { "v": 2, "key": key_doc.clone(), "name": &name };
        let unique = opt_bool(spec, "unique");
        if unique {
            stored.insert("unique", true);
        }
        parsed.push((name, key, unique, stored));
    }
    let (c, created) = shared.store.collection_or_create(db, coll);
    let mut c = wlock(&c);
    let before = c.indexes.len() as i32 + 1;
    let mut note = None;
    for (name, key, unique, stored) in parsed {
        if key == [("_id".to_owned(), 1)] {
            note = Some("all indexes already exist");
            continue;
        }
        if let Some(existing) = c.indexes.iter().find(|ix| ix.name == name || ix.key == key) {
            if existing.key == key && existing.name == name && existing.unique == unique {
                note = Some("all indexes already exist");
                continue;
            }
            if existing.name == name {
                return Err(CmdError::new(86, "IndexKeySpecsConflict", format!("An existing index has the same name as the requested index. Requested index: {stored}, existing index: {}", existing.spec)));
            }
            return Err(CmdError::new(
                85,
                "IndexOptionsConflict",
                format!(
                    "Index already exists with a different name: {}",
                    existing.name
                ),
            ));
        }
        c.create_index(name, key, unique, stored)?;
    }
    let mut reply = doc! {
        "numIndexesBefore": before,
        "numIndexesAfter": c.indexes.len() as i32 + 1,
        "createdCollectionAutomatically": created,
    };
    if let Some(n) = note {
        reply.insert("note", n);
    }
    reply.insert("ok", 1.0);
    Ok(reply)
}

fn ns_not_found(db: &str, coll: &str) -> CmdError {
    CmdError::new(
        26,
        "NamespaceNotFound",
        format!("ns does not exist: {db}.{coll}"),
    )
}

fn list_indexes(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "listIndexes")?;
    let c = shared
        .store
        .collection(db, coll)
        .ok_or_else(|| ns_not_found(db, coll))?;
    let mut out = vec![doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" }];
    out.extend(rlock(&c).indexes.iter().map(|ix| ix.spec.clone()));
    let ns = format!("{db}.$cmd.listIndexes.{coll}");
    let (batch, id) = shared.cursors.open(&ns, out, batch_size(cmd)?, false);
    Ok(cursor_reply(&ns, batch, id, true))
}

fn drop_indexes(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, command_name(cmd))?;
    let c = shared
        .store
        .collection(db, coll)
        .ok_or_else(|| ns_not_found(db, coll))?;
    let mut c = wlock(&c);
    let was = c.indexes.len() as i32 + 1;
    let not_found = |what: String| {
        CmdError::new(
            27,
            "IndexNotFound",
            format!("index not found with name [{what}]"),
        )
    };
    match cmd.get("index") {
        Some(Bson::String(s)) if s == "*" => c.indexes.clear(),
        Some(Bson::String(s)) if s == "_id_" => {
            return Err(CmdError::new(72, "InvalidOptions", "cannot drop _id index"))
        }
        Some(Bson::String(s)) => {
            let i = c
                .indexes
                .iter()
                .position(|ix| &ix.name == s)
                .ok_or_else(|| not_found(s.clone()))?;
            c.indexes.remove(i);
        }
        Some(Bson::Array(names)) => {
            for n in names {
                let s = n
                    .as_str()
                    .ok_or_else(|| CmdError::type_mismatch("index names must be strings"))?;
                let i = c
                    .indexes
                    .iter()
                    .position(|ix| ix.name == s)
                    .ok_or_else(|| not_found(s.to_owned()))?;
                c.indexes.remove(i);
            }
        }
        Some(Bson::Document(key)) => {
            let key = parse_index_key(key)?;
            let i = c
                .indexes
                .iter()
                .position(|ix| ix.key == key)
                .ok_or_else(|| CmdError::new(27, "IndexNotFound", "can't find index with key"))?;
            c.indexes.remove(i);
        }
        _ => {
            return Err(CmdError::type_mismatch(
                "'index' must be a string, an array of strings or a key pattern",
            ))
        }
    }
    Ok(doc! { "nIndexesWas": was, "ok": 1.0 })
}

// ---- CRUD ----

fn insert(shared: &Shared, db: &str, mut cmd: Document) -> CmdResult {
    let coll = coll_name(&cmd, "insert")?.to_owned();
    let ordered = cmd.get_bool("ordered").unwrap_or(true);
    let docs = match cmd.remove("documents") {
        Some(Bson::Array(a)) => a,
        _ => {
            return Err(CmdError::new(
                40414,
                "IDLFailedToParse",
                "BSON field 'insert.documents' is missing but a required field",
            ))
        }
    };
    if docs.len() > MAX_WRITE_BATCH {
        return Err(CmdError::new(
            16,
            "InvalidLength",
            format!(
                "Write batch sizes must be between 1 and {MAX_WRITE_BATCH}. Got {} operations.",
                docs.len()
            ),
        ));
    }
    let (c, _) = shared.store.collection_or_create(db, &coll);
    let mut c = wlock(&c);
    let mut n = 0i32;
    let mut errors = Vec::new();
    for (i, d) in docs.into_iter().enumerate() {
        let result = match d {
            Bson::Document(d) => c.insert(d).map(|_| ()),
            _ => Err(WriteError::from(QueryError {
                code: 14,
                code_name: "TypeMismatch",
                message: "documents must be objects".into(),
            })),
        };
        match result {
            Ok(()) => n += 1,
            Err(e) => {
                errors.push(write_error_doc(i, e));
                if ordered {
                    break;
                }
            }
        }
    }
    drop_guard(c);
    shared
        .stats
        .insert
        .fetch_add(n as u64, AtomicOrdering::Relaxed);
    let mut reply = doc! { "n": n };
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    reply.insert("ok", 1.0);
    Ok(reply)
}

fn drop_guard<T>(_guard: T) {}

struct FindArgs {
    filter: Filter,
    sort: Option<SortSpec>,
    projection: Option<Projection>,
    skip: usize,
    limit: Option<usize>,
    single_batch: bool,
}

fn find_args(cmd: &Document, filter_field: &str) -> Result<FindArgs, CmdError> {
    let empty = Document::new();
    let filter = Filter::parse(opt_doc(cmd, filter_field)?.unwrap_or(&empty))?;
    let sort = opt_doc(cmd, "sort")?
        .filter(|s| !s.is_empty())
        .map(SortSpec::parse)
        .transpose()?;
    let projection_field = if filter_field == "query" && cmd.contains_key("fields") {
        "fields"
    } else {
        "projection"
    };
    let projection = opt_doc(cmd, projection_field)?
        .filter(|p| !p.is_empty())
        .map(Projection::parse)
        .transpose()?;
    let skip = opt_i64(cmd, "skip")?.unwrap_or(0);
    if skip < 0 {
        return Err(CmdError::bad_value("skip value must be non-negative"));
    }
    let limit = opt_i64(cmd, "limit")?.unwrap_or(0);
    let mut single_batch = opt_bool(cmd, "singleBatch");
    // A negative limit is the legacy spelling of "one batch of this size".
    if limit < 0 {
        single_batch = true;
    }
    let limit = (limit != 0).then_some(limit.unsigned_abs() as usize);
    Ok(FindArgs {
        filter,
        sort,
        projection,
        skip: skip as usize,
        limit,
        single_batch,
    })
}

fn find(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "find")?;
    let args = find_args(cmd, "filter")?;
    let ns = format!("{db}.{coll}");
    let docs: Vec<Document> = match shared.store.collection(db, coll) {
        None => Vec::new(),
        Some(c) => {
            let c = rlock(&c);
            let found = c.select(&args.filter, args.sort.as_ref(), args.skip, args.limit);
            match &args.projection {
                Some(p) => found.into_iter().map(|d| p.apply(d)).collect(),
                None => found.into_iter().cloned().collect(),
            }
        }
    };
    let mut batch = batch_size(cmd)?;
    if args.single_batch {
        batch = Some(
            batch
                .unwrap_or(usize::MAX)
                .min(args.limit.unwrap_or(usize::MAX)),
        );
    }
    let (first, id) = shared.cursors.open(&ns, docs, batch, args.single_batch);
    Ok(cursor_reply(&ns, first, id, true))
}

fn get_more(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let id = cmd
        .get("getMore")
        .and_then(as_i64)
        .ok_or_else(|| CmdError::type_mismatch("'getMore' must be a cursor id (int64)"))?;
    let coll = coll_name(cmd, "collection")?;
    let batch = opt_i64(cmd, "batchSize")?
        .filter(|&b| b > 0)
        .map(|b| b as usize);
    let ns = format!("{db}.{coll}");
    match shared.cursors.get_more(id, &ns, batch) {
        GetMore::Batch { ns, docs, id } => Ok(cursor_reply(&ns, docs, id, false)),
        GetMore::NotFound => Err(CmdError::new(43, "CursorNotFound", format!("cursor id {id} not found"))),
        GetMore::WrongNs(owner) => Err(CmdError::new(13, "Unauthorized", format!("Requested getMore on namespace '{ns}', but cursor belongs to a different namespace {owner}"))),
    }
}

fn kill_cursors(shared: &Shared, cmd: &Document) -> CmdResult {
    let ids = match cmd.get("cursors") {
        Some(Bson::Array(a)) => a
            .iter()
            .map(|b| as_i64(b).ok_or_else(|| CmdError::type_mismatch("cursor ids must be int64")))
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(CmdError::new(
                40414,
                "IDLFailedToParse",
                "BSON field 'killCursors.cursors' is missing but a required field",
            ))
        }
    };
    let (mut killed, mut missing) = (Vec::new(), Vec::new());
    for id in ids {
        if shared.cursors.kill(id) {
            killed.push(id);
        } else {
            missing.push(id);
        }
    }
    Ok(
        doc! { "cursorsKilled": killed, "cursorsNotFound": missing, "cursorsAlive": [], "cursorsUnknown": [], "ok": 1.0 },
    )
}

fn ids_of(docs: &[&Document]) -> Vec<Key> {
    docs.iter()
        .map(|d| Key(d.get("_id").cloned().unwrap_or(Bson::Null)))
        .collect()
}

fn update_doc(u: &Bson) -> Result<&Document, WriteError> {
    match u {
        Bson::Document(d) => Ok(d),
        Bson::Array(_) => Err(QueryError::bad_value(
            "pipeline-style updates are not supported by mongoload sim",
        )
        .into()),
        _ => Err(QueryError {
            code: 14,
            code_name: "TypeMismatch",
            message: "'u' must be an object".into(),
        }
        .into()),
    }
}

/// Result of one update statement.
struct Updated {
    matched: i32,
    modified: i32,
    upserted: Option<Bson>,
    /// The document before (or after, when `return_new`) for findAndModify.
    value: Option<Document>,
}

#[allow(clippy::too_many_arguments)]
fn update_one_statement(
    coll: &mut super::store::Collection,
    filter_doc: &Document,
    update: &Update,
    sort: Option<&SortSpec>,
    multi: bool,
    upsert: bool,
    return_new: bool,
) -> Result<Updated, WriteError> {
    let filter = Filter::parse(filter_doc)?;
    let ids = ids_of(&coll.select(&filter, sort, 0, (!multi).then_some(1)));
    let mut out = Updated {
        matched: 0,
        modified: 0,
        upserted: None,
        value: None,
    };
    for id in ids {
        let Some(old) = coll.get(&id) else { continue };
        let mut new = old.clone();
        let changed = update.apply(&mut new, false)?;
        out.matched += 1;
        if changed {
            out.modified += 1;
            if return_new {
                out.value = Some(new.clone());
            } else if out.value.is_none() {
                out.value = Some(old.clone());
            }
            coll.replace(&id, new)?;
        } else if out.value.is_none() {
            out.value = Some(new);
        }
    }
    if out.matched == 0 && upsert {
        let mut seed = upsert_seed(filter_doc);
        update.apply(&mut seed, true)?;
        let id = coll.insert(seed)?;
        if return_new {
            out.value = coll.get(&Key(id.clone())).cloned();
        }
        out.upserted = Some(id);
    }
    Ok(out)
}

fn update(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "update")?;
    let ordered = cmd.get_bool("ordered").unwrap_or(true);
    let statements = docs_array(cmd, "updates")?;
    if statements.len() > MAX_WRITE_BATCH {
        return Err(CmdError::new(16, "InvalidLength", "Write batch too large"));
    }
    let (c, _) = shared.store.collection_or_create(db, coll);
    let mut c = wlock(&c);
    let (mut n, mut modified) = (0i32, 0i32);
    let mut upserted = Vec::new();
    let mut errors = Vec::new();
    for (i, st) in statements.iter().enumerate() {
        let empty = Document::new();
        let result = (|| {
            let q = match st.get("q") {
                Some(Bson::Document(q)) => q,
                None => &empty,
                Some(_) => {
                    return Err(QueryError {
                        code: 14,
                        code_name: "TypeMismatch",
                        message: "'q' must be an object".into(),
                    }
                    .into())
                }
            };
            let u = update_doc(st.get("u").unwrap_or(&Bson::Null))?;
            let update = Update::parse(u)?;
            let multi = opt_bool(st, "multi");
            if multi && update.is_replacement() {
                return Err(WriteError::from(QueryError {
                    code: 9,
                    code_name: "FailedToParse",
                    message: "multi update is not supported for replacement-style update".into(),
                }));
            }
            update_one_statement(
                &mut c,
                q,
                &update,
                None,
                multi,
                opt_bool(st, "upsert"),
                false,
            )
        })();
        match result {
            Ok(r) => {
                n += r.matched;
                modified += r.modified;
                if let Some(id) = r.upserted {
                    n += 1;
                    upserted.push(doc! { "index": i as i32, "_id": id });
                }
            }
            Err(e) => {
                errors.push(write_error_doc(i, e));
                if ordered {
                    break;
                }
            }
        }
    }
    drop_guard(c);
    shared
        .stats
        .update
        .fetch_add(statements.len() as u64, AtomicOrdering::Relaxed);
    let mut reply = doc! { "n": n, "nModified": modified };
    if !upserted.is_empty() {
        reply.insert("upserted", upserted);
    }
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    reply.insert("ok", 1.0);
    Ok(reply)
}

fn delete(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "delete")?;
    let ordered = cmd.get_bool("ordered").unwrap_or(true);
    let statements = docs_array(cmd, "deletes")?;
    let mut n = 0i32;
    let mut errors = Vec::new();
    if let Some(c) = shared.store.collection(db, coll) {
        let mut c = wlock(&c);
        for (i, st) in statements.iter().enumerate() {
            let result = (|| -> Result<i32, WriteError> {
                let empty = Document::new();
                let q = match st.get("q") {
                    Some(Bson::Document(q)) => q,
                    _ => &empty,
                };
                let limit = st.get("limit").and_then(as_i64).unwrap_or(0);
                if limit != 0 && limit != 1 {
                    return Err(QueryError {
                        code: 9,
                        code_name: "FailedToParse",
                        message: "The limit field in delete objects must be 0 or 1".into(),
                    }
                    .into());
                }
                let filter = Filter::parse(q)?;
                let ids = ids_of(&c.select(&filter, None, 0, (limit == 1).then_some(1)));
                Ok(ids.iter().filter(|id| c.remove(id).is_some()).count() as i32)
            })();
            match result {
                Ok(k) => n += k,
                Err(e) => {
                    errors.push(write_error_doc(i, e));
                    if ordered {
                        break;
                    }
                }
            }
        }
    }
    shared
        .stats
        .delete
        .fetch_add(statements.len() as u64, AtomicOrdering::Relaxed);
    let mut reply = doc! { "n": n };
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    reply.insert("ok", 1.0);
    Ok(reply)
}

fn find_and_modify(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, command_name(cmd))?;
    let empty = Document::new();
    let query = opt_doc(cmd, "query")?.unwrap_or(&empty);
    let sort = opt_doc(cmd, "sort")?
        .filter(|s| !s.is_empty())
        .map(SortSpec::parse)
        .transpose()?;
    let projection = opt_doc(cmd, "fields")?
        .filter(|p| !p.is_empty())
        .map(Projection::parse)
        .transpose()?;
    let remove = opt_bool(cmd, "remove");
    let return_new = opt_bool(cmd, "new");
    let upsert = opt_bool(cmd, "upsert");
    let update = match (remove, cmd.get("update")) {
        (true, Some(_)) => {
            return Err(CmdError::new(
                9,
                "FailedToParse",
                "Cannot specify both an update and remove=true",
            ))
        }
        (true, None) => None,
        (false, Some(u)) => Some(Update::parse(update_doc(u).map_err(CmdError::from)?)?),
        (false, None) => {
            return Err(CmdError::new(
                9,
                "FailedToParse",
                "Either an update or remove=true must be specified",
            ))
        }
    };
    let (c, _) = shared.store.collection_or_create(db, coll);
    let mut c = wlock(&c);
    let (last_error, value) = match update {
        None => {
            let filter = Filter::parse(query)?;
            let ids = ids_of(&c.select(&filter, sort.as_ref(), 0, Some(1)));
            let removed = ids.first().and_then(|id| c.remove(id));
            shared.stats.delete.fetch_add(1, AtomicOrdering::Relaxed);
            (doc! { "n": i32::from(removed.is_some()) }, removed)
        }
        Some(update) => {
            let r = update_one_statement(
                &mut c,
                query,
                &update,
                sort.as_ref(),
                false,
                upsert,
                return_new,
            )?;
            shared.stats.update.fetch_add(1, AtomicOrdering::Relaxed);
            let mut le = doc! { "n": r.matched + i32::from(r.upserted.is_some()), "updatedExisting": r.matched > 0 };
            if let Some(id) = &r.upserted {
                le.insert("upserted", id.clone());
            }
            (le, r.value)
        }
    };
    drop_guard(c);
    let value = match (value, projection) {
        (Some(v), Some(p)) => Bson::Document(p.apply(&v)),
        (Some(v), None) => Bson::Document(v),
        (None, _) => Bson::Null,
    };
    Ok(doc! { "lastErrorObject": last_error, "value": value, "ok": 1.0 })
}

fn aggregate(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = match cmd.get("aggregate") {
        Some(Bson::String(s)) => s.as_str(),
        _ => {
            return Err(CmdError::new(
                73,
                "InvalidNamespace",
                "mongoload sim supports only collection aggregations",
            ))
        }
    };
    if !cmd.contains_key("cursor") && !opt_bool(cmd, "explain") {
        return Err(CmdError::new(
            9,
            "FailedToParse",
            "The 'cursor' option is required, except for aggregate with the explain argument",
        ));
    }
    let stages = docs_array(cmd, "pipeline")?;
    let pipeline = Pipeline::parse(&stages)?;
    let input: Vec<Document> = match shared.store.collection(db, coll) {
        None => Vec::new(),
        Some(c) => {
            let c = rlock(&c);
            match pipeline.leading_match() {
                Some(f) => c.select(f, None, 0, None).into_iter().cloned().collect(),
                None => c.iter().cloned().collect(),
            }
        }
    };
    let out = pipeline.run(input.into_iter())?;
    let ns = format!("{db}.{coll}");
    let (first, id) = shared.cursors.open(&ns, out, batch_size(cmd)?, false);
    Ok(cursor_reply(&ns, first, id, true))
}

fn distinct(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "distinct")?;
    let key = cmd
        .get_str("key")
        .map_err(|_| CmdError::type_mismatch("'key' must be a string"))?;
    let empty = Document::new();
    let filter = Filter::parse(opt_doc(cmd, "query")?.unwrap_or(&empty))?;
    let mut values = BTreeSet::new();
    if let Some(c) = shared.store.collection(db, coll) {
        let c = rlock(&c);
        for d in c.select(&filter, None, 0, None) {
            match get_path(d, key) {
                Some(Bson::Array(items)) => values.extend(items.iter().cloned().map(Key)),
                Some(v) => {
                    values.insert(Key(v.clone()));
                }
                None => {}
            }
        }
    }
    let values: Vec<Bson> = values.into_iter().map(|k| k.0).collect();
    Ok(doc! { "values": values, "ok": 1.0 })
}

fn count(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "count")?;
    let args = find_args(cmd, "query")?;
    let n = match shared.store.collection(db, coll) {
        None => 0,
        Some(c) => {
            let c = rlock(&c);
            if cmd
                .get("query")
                .is_none_or(|q| q.as_document().is_some_and(|d| d.is_empty()))
            {
                let total = c.len().saturating_sub(args.skip);
                args.limit.map_or(total, |l| total.min(l))
            } else {
                c.select(&args.filter, None, args.skip, args.limit).len()
            }
        }
    };
    Ok(doc! { "n": n as i64, "ok": 1.0 })
}
