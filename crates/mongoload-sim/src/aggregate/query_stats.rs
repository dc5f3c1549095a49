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
mod tests {
    use super::*;

    fn ok_reply(n: usize) -> Document {
        let batch: Vec<Bson> = (0..n)
            .map(|i| Bson::Document(doc! { "i": i as i32 }))
            .collect();
        doc! { "cursor": { "firstBatch": batch, "id": 0_i64, "ns": "test.products" }, "ok": 1.0 }
    }

    /// The examples of MongoDB's `$queryStats` page: `find({ item: "card" })`
    /// and `aggregate([{ $match: { qty: { $gt: 20 } } }])` on test.products.
    #[test]
    fn shapes_are_the_documented_ones() {
        let find = doc! { "find": "products", "filter": { "item": "card" }, "$db": "test" };
        let k = key(&find, None).unwrap();
        assert_eq!(
            k.get_document("queryShape").unwrap(),
            &doc! {
                "cmdNs": { "db": "test", "coll": "products" },
                "command": "find",
                "filter": { "item": { "$eq": "?string" } },
            }
        );
        assert_eq!(k.get_str("collectionType").unwrap(), "collection");
        let agg = doc! {
            "aggregate": "products",
            "pipeline": [{ "$match": { "qty": { "$gt": 20 } } }],
            "cursor": {},
            "$db": "test",
        };
        let k = key(&agg, None).unwrap();
        assert_eq!(
            k.get_document("queryShape").unwrap(),
            &doc! {
                "cmdNs": { "db": "test", "coll": "products" },
                "command": "aggregate",
                "pipeline": [{ "$match": { "qty": { "$gt": "?number" } } }],
            }
        );
        assert_eq!(k.get_document("cursor").unwrap(), &doc! {});
    }

    #[test]
    fn literals_become_their_types_and_structure_stays() {
        let find = doc! {
            "find": "c",
            "filter": {
                "a": { "$gte": 1_i64, "$lt": 2.5 },
                "b": { "$in": ["x", "y"] },
                "$or": [{ "d": bson::DateTime::from_millis(0) }, { "e": true }],
                "f": { "$exists": true },
            },
            "sort": { "a": -1 },
            "projection": { "a": 1, "_id": 0 },
            "limit": 5,
            "$db": "db",
        };
        let s = key(&find, None)
            .unwrap()
            .get_document("queryShape")
            .unwrap()
            .clone();
        assert_eq!(
            s.get_document("filter").unwrap(),
            &doc! {
                "a": { "$gte": "?number", "$lt": "?number" },
                "b": { "$in": "?array<?string>" },
                "$or": [{ "d": { "$eq": "?date" } }, { "e": { "$eq": "?bool" } }],
                "f": { "$exists": true },
            }
        );
        assert_eq!(s.get_document("sort").unwrap(), &doc! { "a": -1 });
        assert_eq!(
            s.get_document("projection").unwrap(),
            &doc! { "a": true, "_id": false }
        );
        assert_eq!(s.get_str("limit").unwrap(), "?number");
        let distinct = doc! { "distinct": "c", "key": "k", "query": { "n": 3 }, "$db": "db" };
        let s = key(&distinct, None)
            .unwrap()
            .get_document("queryShape")
            .unwrap()
            .clone();
        assert_eq!(s.get_str("key").unwrap(), "k");
        assert_eq!(
            s.get_document("query").unwrap(),
            &doc! { "n": { "$eq": "?number" } }
        );
        let group = doc! {
            "aggregate": "c",
            "pipeline": [
                { "$group": { "_id": "$s", "n": { "$sum": 1 } } },
                { "$limit": 3 },
            ],
            "cursor": { "batchSize": 10 },
            "$db": "db",
        };
        let k = key(&group, None).unwrap();
        assert_eq!(
            k.get_document("queryShape")
                .unwrap()
                .get_array("pipeline")
                .unwrap(),
            &vec![
                Bson::Document(doc! { "$group": { "_id": "$s", "n": { "$sum": "?number" } } }),
                Bson::Document(doc! { "$limit": "?number" }),
            ]
        );
        assert_eq!(
            k.get_document("cursor").unwrap(),
            &doc! { "batchSize": "?number" }
        );
        // Writes, system namespaces and failed commands are not recorded.
        for cmd in [
            doc! { "insert": "c", "documents": [{ "a": 1 }], "$db": "db" },
            doc! { "update": "c", "updates": [], "$db": "db" },
            doc! { "find": "system.profile", "$db": "db" },
            doc! { "find": "c", "$db": "admin" },
        ] {
            assert_eq!(key(&cmd, None), None, "{cmd}");
        }
    }

    #[test]
    fn metrics_sum_the_executions_of_one_key() {
        let qs = QueryStats::default();
        let client = doc! { "application": { "name": "shop" }, "driver": { "name": "rust", "version": "3" } };
        let t0 = DateTime::from_millis(1_700_000_000_000);
        let t1 = DateTime::from_millis(1_700_000_005_000);
        for (i, micros) in [(1, 100_u64), (2, 300), (3, 200)] {
            let find = doc! { "find": "c", "filter": { "a": i }, "$db": "db" };
            let at = if i == 3 { t1 } else { t0 };
            qs.record(
                &find,
                &ok_reply(i as usize),
                Duration::from_micros(micros),
                Some(&client),
                at,
            );
        }
        // Another client is another key; a failure is not recorded.
        let find = doc! { "find": "c", "filter": { "a": 9 }, "$db": "db" };
        qs.record(&find, &ok_reply(1), Duration::from_micros(5), None, t0);
        qs.record(
            &find,
            &doc! { "ok": 0.0, "code": 2 },
            Duration::from_micros(5),
            None,
            t0,
        );
        let out = qs.output(t1);
        assert_eq!(out.len(), 2);
        let e = out
            .iter()
            .find(|e| e.get_document("key").unwrap().contains_key("client"))
            .unwrap();
        let m = e.get_document("metrics").unwrap();
        assert_eq!(m.get_i64("execCount").unwrap(), 3);
        assert_eq!(m.get_i64("lastExecutionMicros").unwrap(), 200);
        let t = m.get_document("totalExecMicros").unwrap();
        assert_eq!(
            (
                t.get_i64("sum").unwrap(),
                t.get_i64("max").unwrap(),
                t.get_i64("min").unwrap()
            ),
            (600, 300, 100)
        );
        assert_eq!(
            t.get("sumOfSquares"),
            Some(&Bson::Decimal128(decimal(140_000)))
        );
        assert_eq!(decimal(140_000).to_string(), "140000");
        let d = m.get_document("docsReturned").unwrap();
        assert_eq!(
            (d.get_i64("sum").unwrap(), d.get_i64("max").unwrap()),
            (6, 3)
        );
        assert_eq!(m.get_datetime("firstSeenTimestamp").unwrap(), &t0);
        assert_eq!(m.get_datetime("latestSeenTimestamp").unwrap(), &t1);
        assert_eq!(
            e.get_timestamp("asOf").unwrap(),
            Timestamp {
                time: 1_700_000_005,
                increment: 0
            }
        );
        let k = e.get_document("key").unwrap();
        assert_eq!(k.get_document("client").unwrap(), &client);
        assert_eq!(e.get_str("keyHash").unwrap(), hash_b64(k));
        assert_eq!(e.get_str("queryShapeHash").unwrap().len(), 64);
        // Both entries share the query shape, so its hash.
        assert_eq!(
            out[0].get_str("queryShapeHash").unwrap(),
            out[1].get_str("queryShapeHash").unwrap()
        );
    }

    /// A cursor's getMores join its command's execution, recorded when
    /// the cursor is exhausted or killed.
    #[test]
    fn an_execution_spans_its_cursor() {
        let qs = QueryStats::default();
        let t0 = DateTime::from_millis(1_700_000_000_000);
        let batch = |key: &str, n: usize, id: i64| {
            let docs: Vec<Bson> = (0..n)
                .map(|i| Bson::Document(doc! { "i": i as i32 }))
                .collect();
            doc! { "cursor": { key: docs, "id": id, "ns": "db.c" }, "ok": 1.0 }
        };
        let find = doc! { "find": "c", "filter": { "a": 1 }, "$db": "db" };
        let more = |id: i64| doc! { "getMore": id, "collection": "c", "$db": "db" };
        qs.record(
            &find,
            &batch("firstBatch", 2, 7),
            Duration::from_micros(100),
            None,
            t0,
        );
        assert!(qs.output(t0).is_empty(), "recorded when the cursor closes");
        qs.record(
            &more(7),
            &batch("nextBatch", 3, 7),
            Duration::from_micros(40),
            None,
            t0,
        );
        qs.record(
            &more(7),
            &batch("nextBatch", 1, 0),
            Duration::from_micros(10),
            None,
            t0,
        );
        // Another execution, killed after its first batch.
        qs.record(
            &find,
            &batch("firstBatch", 4, 8),
            Duration::from_micros(60),
            None,
            t0,
        );
        qs.record(
            &doc! { "killCursors": "c", "cursors": [8_i64], "$db": "db" },
            &doc! { "ok": 1.0 },
            Duration::from_micros(1),
            None,
            t0,
        );
        let out = qs.output(t0);
        assert_eq!(out.len(), 1);
        let m = out[0].get_document("metrics").unwrap();
        assert_eq!(m.get_i64("execCount").unwrap(), 2);
        let total = m.get_document("totalExecMicros").unwrap();
        assert_eq!(
            (total.get_i64("sum").unwrap(), total.get_i64("max").unwrap()),
            (210, 150)
        );
        let first = m.get_document("firstResponseExecMicros").unwrap();
        assert_eq!(
            (first.get_i64("sum").unwrap(), first.get_i64("max").unwrap()),
            (160, 100)
        );
        let docs = m.get_document("docsReturned").unwrap();
        assert_eq!(
            (
                docs.get_i64("sum").unwrap(),
                docs.get_i64("max").unwrap(),
                docs.get_i64("min").unwrap()
            ),
            (10, 6, 4)
        );
    }

    #[test]
    fn the_stage_answers_mongodb_errors() {
        let cmd = doc! { "aggregate": 1, "pipeline": [{ "$queryStats": {} }], "cursor": {}, "$db": "admin" };
        let empty = Bson::Document(Document::new());
        assert!(QueryStats::default()
            .stage("admin", &cmd, &empty, true)
            .is_ok());
        let older = QueryStats::new(false, true).stage("admin", &cmd, &empty, false);
        assert_eq!(older.unwrap_err().code, 40324);
        let on_db = QueryStats::default().stage("shop", &cmd, &empty, false);
        assert_eq!(on_db.unwrap_err().code, 73);
        let denied = QueryStats::new(true, false)
            .stage("admin", &cmd, &empty, true)
            .unwrap_err();
        assert_eq!((denied.code, denied.code_name), (13, "Unauthorized"));
        assert!(
            denied
                .message
                .starts_with("not authorized on admin to execute command"),
            "{}",
            denied.message
        );
        // Without authentication there is no privilege to lack.
        assert!(QueryStats::new(true, false)
            .stage("admin", &cmd, &empty, false)
            .is_ok());
    }
}
