//! `$queryStats` (MongoDB 7.1+/8.0): the server's in-memory store of
//! query shapes with their counts and latencies, read with
//! `{ aggregate: 1, pipeline: [{ $queryStats: {} }], cursor: {} }` on
//! `admin`. Recorded as 8.0 does: `find`, `aggregate` and `distinct`
//! (writes are not recorded), each under a key of its query shape
//! (literals replaced by their type: `"?number"`, `"?string"`, …), the
//! client's handshake metadata and the collection type. A command that
//! leaves a cursor open is recorded when the cursor is exhausted or
//! killed, its `getMore`s included (`totalExecMicros`, `docsReturned`),
//! as mongod does. The simulator reports no `keysExamined`,
//! `docsExamined` or plan flags.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use base64::Engine as _;
use bson::{doc, Bson, DateTime, Decimal128, Document, Timestamp};
use sha2::{Digest, Sha256};

use crate::error::CmdError;

/// One metric's running figures (`sum`, `max`, `min`, `sumOfSquares`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Agg {
    pub sum: i64,
    pub max: i64,
    pub min: i64,
    pub sum_of_squares: u128,
}

impl Agg {
    fn add(&mut self, v: i64, first: bool) {
        self.sum += v;
        self.max = if first { v } else { self.max.max(v) };
        self.min = if first { v } else { self.min.min(v) };
        self.sum_of_squares += (v as i128 * v as i128) as u128;
    }

    fn to_doc(self) -> Document {
        doc! {
            "sum": self.sum,
            "max": self.max,
            "min": self.min,
            "sumOfSquares": decimal(self.sum_of_squares),
        }
    }
}

/// An integer as a Decimal128 (IEEE 754-2008 BID, exponent 0), as the
/// server reports `sumOfSquares`.
pub fn decimal(n: u128) -> Decimal128 {
    // Biased exponent 6176 (exponent 0) above a 113-bit coefficient.
    let coefficient = n & ((1u128 << 113) - 1);
    Decimal128::from_bytes(((6176u128 << 113) | coefficient).to_le_bytes())
}

/// One entry of the store: a key and its metrics.
#[derive(Debug, Clone)]
struct Entry {
    key: Document,
    key_hash: String,
    query_shape_hash: String,
    exec_count: i64,
    last_execution_micros: i64,
    total_exec_micros: Agg,
    first_response_exec_micros: Agg,
    docs_returned: Agg,
    first_seen: DateTime,
    latest_seen: DateTime,
}

/// An execution whose cursor is still open: recorded when it closes.
#[derive(Debug, Clone)]
struct Open {
    key: Document,
    first_micros: i64,
    total_micros: i64,
    docs: i64,
    at: DateTime,
}

/// Open executions kept at most; beyond, the oldest are recorded as they
/// stand (a client that abandons its cursors).
const MAX_OPEN: usize = 10_000;

/// The store of one server.
#[derive(Debug)]
pub struct QueryStats {
    /// Entries by their key's BSON.
    entries: Mutex<HashMap<Vec<u8>, Entry>>,
    /// Executions by the id of their open cursor.
    open: Mutex<HashMap<i64, Open>>,
    /// The server has `$queryStats` (8.0); false: an older server, which
    /// neither records nor knows the stage.
    pub enabled: bool,
    /// The authenticated user holds `queryStatsRead` (with `--auth`).
    pub read_allowed: bool,
}

impl Default for QueryStats {
    fn default() -> Self {
        QueryStats::new(true, true)
    }
}

/// Whether `$queryStats` records the command named `name` (or, for
/// `getMore` and `killCursors`, adds it to the execution it continues).
pub fn records(name: &str) -> bool {
    matches!(
        name,
        "find" | "aggregate" | "distinct" | "getMore" | "killCursors"
    )
}

impl QueryStats {
    pub fn new(enabled: bool, read_allowed: bool) -> QueryStats {
        QueryStats {
            entries: Mutex::new(HashMap::new()),
            open: Mutex::new(HashMap::new()),
            enabled,
            read_allowed,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Vec<u8>, Entry>> {
        lock(&self.entries)
    }

    /// Records one successful `find`, `aggregate` or `distinct` that took
    /// `took`, at `now`; `client` is the connection's handshake `client`
    /// document. One that leaves a cursor open is recorded when a
    /// `getMore` exhausts it or `killCursors` kills it, with their time
    /// and documents added. Failed commands, other commands,
    /// `$queryStats` itself and the system namespaces are not recorded.
    pub fn record(
        &self,
        cmd: &Document,
        reply: &Document,
        took: Duration,
        client: Option<&Document>,
        now: DateTime,
    ) {
        if !self.enabled {
            return;
        }
        let micros = took.as_micros().min(i64::MAX as u128) as i64;
        match cmd.keys().next().map(String::as_str) {
            Some("getMore") => return self.get_more(cmd, reply, micros),
            Some("killCursors") => return self.kill_cursors(cmd),
            _ => {}
        }
        if !ok(reply) {
            return;
        }
        let Some(key) = key(cmd, client) else {
            return;
        };
        let run = Open {
            key,
            first_micros: micros,
            total_micros: micros,
            docs: docs_returned(reply),
            at: now,
        };
        match cursor_id(reply) {
            Some(id) if id != 0 => {
                let mut open = lock(&self.open);
                if open.len() >= MAX_OPEN {
                    let mut all: Vec<(i64, Open)> = open.drain().collect();
                    all.sort_by_key(|(_, o)| o.at);
                    let keep = all.split_off(all.len() / 2);
                    open.extend(keep);
                    drop(open);
                    for (_, o) in all {
                        self.add(o);
                    }
                    open = lock(&self.open);
                }
                open.insert(id, run);
            }
            _ => self.add(run),
        }
    }

    /// A `getMore`: its time and documents join its cursor's execution,
    /// recorded once the cursor is exhausted (or the `getMore` fails).
    fn get_more(&self, cmd: &Document, reply: &Document, micros: i64) {
        let Some(id) = cmd.get("getMore").and_then(|v| match v {
            Bson::Int64(n) => Some(*n),
            Bson::Int32(n) => Some(i64::from(*n)),
            _ => None,
        }) else {
            return;
        };
        let mut open = lock(&self.open);
        let Some(run) = open.get_mut(&id) else {
            return;
        };
        run.total_micros += micros;
        if !ok(reply) {
            let run = open.remove(&id);
            drop(open);
            self.add(run.expect("present"));
            return;
        }
        if let Ok(b) = reply
            .get_document("cursor")
            .and_then(|c| c.get_array("nextBatch"))
        {
            run.docs += b.len() as i64;
        }
        if cursor_id(reply) == Some(0) {
            let run = open.remove(&id);
            drop(open);
            self.add(run.expect("present"));
        }
    }

    /// `killCursors`: the killed cursors' executions are recorded.
    fn kill_cursors(&self, cmd: &Document) {
        let Ok(ids) = cmd.get_array("cursors") else {
            return;
        };
        let mut done = Vec::new();
        {
            let mut open = lock(&self.open);
            for id in ids {
                if let Bson::Int64(id) = id {
                    done.extend(open.remove(id));
                }
            }
        }
        for run in done {
            self.add(run);
        }
    }

    /// Adds one finished execution to its key's entry. Entries are found
    /// by the key's BSON; its hashes are computed once, for a new entry.
    fn add(&self, run: Open) {
        let bytes = bson::to_vec(&run.key).unwrap_or_default();
        let mut entries = self.lock();
        let e = entries.entry(bytes).or_insert_with(|| {
            let shape = run
                .key
                .get_document("queryShape")
                .cloned()
                .unwrap_or_default();
            Entry {
                query_shape_hash: hash_hex(&shape),
                key_hash: hash_b64(&run.key),
                key: run.key.clone(),
                exec_count: 0,
                last_execution_micros: 0,
                total_exec_micros: Agg::default(),
                first_response_exec_micros: Agg::default(),
                docs_returned: Agg::default(),
                first_seen: run.at,
                latest_seen: run.at,
            }
        });
        let first = e.exec_count == 0;
        e.exec_count += 1;
        e.last_execution_micros = run.total_micros;
        e.total_exec_micros.add(run.total_micros, first);
        e.first_response_exec_micros.add(run.first_micros, first);
        e.docs_returned.add(run.docs, first);
        e.first_seen = e.first_seen.min(run.at);
        e.latest_seen = e.latest_seen.max(run.at);
    }

    /// The stage's output: one document per entry, read at `now`.
    pub fn output(&self, now: DateTime) -> Vec<Document> {
        let secs = (now.timestamp_millis() / 1000).max(0) as u32;
        let mut out: Vec<&Entry> = Vec::new();
        let entries = self.lock();
        out.extend(entries.values());
        out.sort_by_key(|e| (e.first_seen, e.key_hash.clone()));
        out.into_iter()
            .map(|e| {
                doc! {
                    "key": e.key.clone(),
                    "keyHash": &e.key_hash,
                    "queryShapeHash": &e.query_shape_hash,
                    "metrics": {
                        "lastExecutionMicros": e.last_execution_micros,
                        "execCount": e.exec_count,
                        "totalExecMicros": e.total_exec_micros.to_doc(),
                        "firstResponseExecMicros": e.first_response_exec_micros.to_doc(),
                        "docsReturned": e.docs_returned.to_doc(),
                        "firstSeenTimestamp": e.first_seen,
                        "latestSeenTimestamp": e.latest_seen,
                    },
                    "asOf": Timestamp { time: secs, increment: 0 },
                }
            })
            .collect()
    }

    /// Runs `{ aggregate: 1, pipeline: [{ $queryStats: {} }, …] }`: checks
    /// where it runs and who asks, and returns the entries (the caller runs
    /// the rest of the pipeline over them). `authenticated`: the server
    /// requires authentication (the one user then asks).
    pub fn stage(
        &self,
        db: &str,
        cmd: &Document,
        arg: &Bson,
        authenticated: bool,
    ) -> Result<Vec<Document>, CmdError> {
        if !self.enabled {
            return Err(CmdError::new(
                40324,
                "Location40324",
                "Unrecognized pipeline stage name: '$queryStats'",
            ));
        }
        if db != "admin" || !matches!(cmd.get("aggregate"), Some(Bson::Int32(1) | Bson::Int64(1))) {
            return Err(CmdError::new(
                73,
                "InvalidNamespace",
                "$queryStats must be run against the 'admin' database with {aggregate: 1}",
            ));
        }
        match arg {
            Bson::Document(d) if d.is_empty() => {}
            Bson::Document(d) if d.contains_key("transformIdentifiers") => {
                return Err(CmdError::new(
                    2,
                    "BadValue",
                    "mongoload sim does not run $queryStats with transformIdentifiers",
                ))
            }
            Bson::Document(d) => {
                let field = d.keys().next().cloned().unwrap_or_default();
                return Err(CmdError::new(
                    40415,
                    "Location40415",
                    format!("BSON field '$queryStats.{field}' is an unknown field."),
                ));
            }
            _ => {
                return Err(CmdError::new(
                    14,
                    "TypeMismatch",
                    "$queryStats spec must be an object",
                ))
            }
        }
        if authenticated && !self.read_allowed {
            let mut shown = cmd.clone();
            for k in ["lsid", "$clusterTime", "$readPreference"] {
                shown.remove(k);
            }
            return Err(CmdError::new(
                13,
                "Unauthorized",
                format!("not authorized on admin to execute command {shown}"),
            ));
        }
        Ok(self.output(DateTime::now()))
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The id of the cursor a reply leaves open (0: none).
fn cursor_id(reply: &Document) -> Option<i64> {
    match reply.get_document("cursor").ok()?.get("id")? {
        Bson::Int64(n) => Some(*n),
        Bson::Int32(n) => Some(i64::from(*n)),
        _ => None,
    }
}

fn ok(reply: &Document) -> bool {
    match reply.get("ok") {
        Some(Bson::Double(x)) => *x == 1.0,
        Some(Bson::Int32(n)) => *n == 1,
        Some(Bson::Int64(n)) => *n == 1,
        _ => false,
    }
}

/// The documents a reply returned: a cursor's first batch or distinct's
/// values.
fn docs_returned(reply: &Document) -> i64 {
    if let Ok(c) = reply.get_document("cursor") {
        if let Ok(b) = c.get_array("firstBatch") {
            return b.len() as i64;
        }
    }
    reply.get_array("values").map_or(0, |v| v.len() as i64)
}

fn hash(d: &Document) -> Vec<u8> {
    let bytes = bson::to_vec(d).unwrap_or_default();
    Sha256::digest(&bytes).to_vec()
}

fn hash_b64(d: &Document) -> String {
    base64::engine::general_purpose::STANDARD.encode(hash(d))
}

fn hash_hex(d: &Document) -> String {
    hash(d).iter().map(|b| format!("{b:02X}")).collect()
}

/// The key of a command: its query shape, the client, the collection
/// type and the options recorded beside the shape; `None` for a command
/// `$queryStats` does not record.
pub fn key(cmd: &Document, client: Option<&Document>) -> Option<Document> {
    let name = cmd.keys().next()?.as_str();
    if !records(name) {
        return None;
    }
    let db = cmd.get_str("$db").unwrap_or("test");
    let coll = cmd.get_str(name).ok()?;
    if matches!(db, "admin" | "config" | "local") || coll.starts_with("system.") {
        return None;
    }
    let mut shape = doc! { "cmdNs": { "db": db, "coll": coll }, "command": name };
    match name {
        "find" => {
            let filter = cmd.get_document("filter").cloned().unwrap_or_default();
            shape.insert("filter", filter_shape(&filter));
            if let Ok(s) = cmd.get_document("sort") {
                if !s.is_empty() {
                    shape.insert("sort", s.clone());
                }
            }
            if let Ok(p) = cmd.get_document("projection") {
                if !p.is_empty() {
                    shape.insert("projection", projection_shape(p));
                }
            }
            for k in ["skip", "limit"] {
                if cmd.contains_key(k) {
                    shape.insert(k, "?number");
                }
            }
            if let Ok(b) = cmd.get_bool("singleBatch") {
                shape.insert("singleBatch", b);
            }
        }
        "aggregate" => {
            let stages = cmd.get_array("pipeline").ok()?;
            if stages.iter().any(|s| {
                s.as_document()
                    .is_some_and(|d| d.contains_key("$queryStats"))
            }) {
                return None;
            }
            let stages: Vec<Bson> = stages
                .iter()
                .map(|s| match s {
                    Bson::Document(d) => Bson::Document(stage_shape(d)),
                    other => literal(other),
                })
                .collect();
            shape.insert("pipeline", stages);
        }
        _ => {
            // distinct
            shape.insert("key", cmd.get_str("key").unwrap_or_default());
            if let Ok(q) = cmd.get_document("query") {
                if !q.is_empty() {
                    shape.insert("query", filter_shape(q));
                }
            }
        }
    }
    let mut key = doc! { "queryShape": shape };
    if let Some(c) = client {
        key.insert("client", c.clone());
    }
    key.insert("collectionType", "collection");
    if name == "aggregate" {
        if let Ok(c) = cmd.get_document("cursor") {
            let mut cur = Document::new();
            if c.contains_key("batchSize") {
                cur.insert("batchSize", "?number");
            }
            key.insert("cursor", cur);
        }
    } else if cmd.contains_key("batchSize") {
        key.insert("batchSize", "?number");
    }
    for k in ["comment", "maxTimeMS"] {
        if cmd.contains_key(k) {
            key.insert(k, literal(cmd.get(k).unwrap_or(&Bson::Null)));
        }
    }
    Some(key)
}

/// A literal's type as `$queryStats` writes it.
pub fn literal(v: &Bson) -> Bson {
    Bson::String(type_name(v))
}

fn type_name(v: &Bson) -> String {
    match v {
        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Decimal128(_) => "?number".into(),
        Bson::String(_) | Bson::Symbol(_) => "?string".into(),
        Bson::Document(_) => "?object".into(),
        Bson::Array(a) => {
            let mut types: Vec<String> = a.iter().map(type_name).collect();
            types.sort();
            types.dedup();
            match types.as_slice() {
                [] => "?array<>".into(),
                [one] => format!("?array<{one}>"),
                _ => "?array<?mixed>".into(),
            }
        }
        Bson::Binary(_) => "?binData".into(),
        Bson::ObjectId(_) => "?objectId".into(),
        Bson::Boolean(_) => "?bool".into(),
        Bson::DateTime(_) => "?date".into(),
        Bson::Null => "?null".into(),
        Bson::RegularExpression(_) => "?regex".into(),
        Bson::Timestamp(_) => "?timestamp".into(),
        Bson::MinKey => "?minKey".into(),
        Bson::MaxKey => "?maxKey".into(),
        Bson::Undefined => "?undefined".into(),
        Bson::JavaScriptCode(_) => "?javascript".into(),
        Bson::JavaScriptCodeWithScope(_) => "?javascriptWithScope".into(),
        Bson::DbPointer(_) => "?dbPointer".into(),
    }
}

/// Operators whose argument is a list of expressions or clauses.
const LOGICAL: &[&str] = &["$and", "$or", "$nor"];

/// A query filter's shape: each equality is written as `$eq`, every
/// literal as its type, operators and field names kept.
pub fn filter_shape(f: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in f {
        if LOGICAL.contains(&k.as_str()) {
            let clauses: Vec<Bson> = match v {
                Bson::Array(a) => a
                    .iter()
                    .map(|c| match c {
                        Bson::Document(d) => Bson::Document(filter_shape(d)),
                        other => literal(other),
                    })
                    .collect(),
                other => vec![literal(other)],
            };
            out.insert(k, clauses);
        } else if k == "$expr" {
            out.insert(k, expr_shape(v));
        } else if k.starts_with('$') {
            out.insert(k, literal(v));
        } else {
            match v {
                Bson::Document(d) if d.keys().next().is_some_and(|o| o.starts_with('$')) => {
                    out.insert(k, operators_shape(d));
                }
                other => {
                    out.insert(k, doc! { "$eq": literal(other) });
                }
            }
        }
    }
    out
}

/// The operators applied to one field.
fn operators_shape(ops: &Document) -> Document {
    let mut out = Document::new();
    for (op, v) in ops {
        match (op.as_str(), v) {
            ("$not", Bson::Document(d)) => {
                out.insert(op, operators_shape(d));
            }
            ("$elemMatch", Bson::Document(d)) => {
                let inner = if d.keys().next().is_some_and(|o| o.starts_with('$')) {
                    operators_shape(d)
                } else {
                    filter_shape(d)
                };
                out.insert(op, inner);
            }
            // `$exists: true` and `$type` keep their argument.
            ("$exists", Bson::Boolean(b)) => {
                out.insert(op, *b);
            }
            ("$type", t) => {
                out.insert(op, t.clone());
            }
            ("$options", _) => {}
            _ => {
                out.insert(op, literal(v));
            }
        }
    }
    out
}

/// An aggregation expression's shape: field paths (`"$a"`) and operators
/// kept, constants written as their type.
pub fn expr_shape(v: &Bson) -> Bson {
    match v {
        Bson::String(s) if s.starts_with('$') => v.clone(),
        Bson::Document(d) => {
            let mut out = Document::new();
            for (k, x) in d {
                out.insert(k, expr_shape(x));
            }
            Bson::Document(out)
        }
        Bson::Array(a) => Bson::Array(a.iter().map(expr_shape).collect()),
        other => literal(other),
    }
}

/// A projection's shape: inclusions and exclusions as `true`/`false`,
/// computed fields as expressions.
fn projection_shape(p: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in p {
        match v {
            Bson::Boolean(b) => {
                out.insert(k, *b);
            }
            Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => {
                let on = crate::query::number_as_f64(v).is_some_and(|x| x != 0.0);
                out.insert(k, on);
            }
            other => {
                out.insert(k, expr_shape(other));
            }
        }
    }
    out
}

/// One pipeline stage's shape.
fn stage_shape(stage: &Document) -> Document {
    let mut out = Document::new();
    for (name, arg) in stage {
        let shaped = match (name.as_str(), arg) {
            ("$match", Bson::Document(f)) => Bson::Document(filter_shape(f)),
            ("$limit" | "$skip", _) => Bson::String("?number".into()),
            ("$sort", _) => arg.clone(),
            ("$project", Bson::Document(p)) => Bson::Document(projection_shape(p)),
            ("$count" | "$unset", _) => arg.clone(),
            ("$unwind", Bson::String(_)) => arg.clone(),
            ("$group", Bson::Document(g)) => {
                let mut o = Document::new();
                for (k, v) in g {
                    o.insert(k, expr_shape(v));
                }
                Bson::Document(o)
            }
            _ => expr_shape(arg),
        };
        out.insert(name, shaped);
    }
    out
}

#[cfg(test)]
mod tests;
