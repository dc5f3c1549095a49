//! What mongod records about the operations it runs, kept here the same
//! way: the `profile` command (level 0, 1 or 2 per database, `slowms`
//! and `sampleRate` for the server), a capped `system.profile` per
//! database, and the "Slow query" entries of the structured JSON log
//! (`mongoload sim --log FILE`) for operations at or above `slowms`.
//!
//! The simulator does not count what a query touches: `keysExamined` and
//! `docsExamined` are what the plan implies (a collection scan examines
//! every document and no key; an index or `_id` lookup examines the keys
//! and documents it returns or changes).

use std::collections::{HashMap, VecDeque};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bson::{doc, oid::ObjectId, Bson, DateTime, Document};

use super::error::{command_name, CmdError};
use super::query::{Filter, SortSpec};
use super::store::{rlock, wlock, Key, Store};

/// mongod's default `slowms`.
pub const DEFAULT_SLOWMS: i64 = 100;
/// mongod's default size of `system.profile` (1 MiB), the default here
/// ([`ProfileConfig::cap_bytes`]): the oldest entries go first once the
/// entries' BSON sizes exceed it.
pub const PROFILE_CAP_BYTES: usize = 1024 * 1024;
/// The log id of mongod's "Slow query" entries.
pub const SLOW_QUERY_ID: i32 = 51803;

/// How the server starts recording (mongod's `--profile`, `--slowms`,
/// `--slowOpSampleRate`), and where its log goes.
#[derive(Debug, Clone, PartialEq)]
pub struct ProfileConfig {
    /// The profiling level of every database until `profile` changes it.
    pub level: i32,
    pub slowms: i64,
    pub sample_rate: f64,
    /// Append "Slow query" entries to this file (mongod's JSON log format).
    pub log: Option<PathBuf>,
    /// The size of each `system.profile` (mongod's is 1 MiB unless the
    /// collection is recreated larger).
    pub cap_bytes: usize,
    /// The server has `$queryStats` (as 8.0); false: an older server.
    pub query_stats: bool,
    /// The `--auth` user holds `queryStatsRead` (it holds every other
    /// privilege).
    pub query_stats_read: bool,
}

impl Default for ProfileConfig {
    fn default() -> Self {
        ProfileConfig {
            level: 0,
            slowms: DEFAULT_SLOWMS,
            sample_rate: 1.0,
            log: None,
            cap_bytes: PROFILE_CAP_BYTES,
            query_stats: true,
            query_stats_read: true,
        }
    }
}

/// The client of one connection, as the profiler names it.
#[derive(Debug, Clone, Default)]
pub struct Client {
    /// `client.application.name` of the connection's handshake.
    pub app_name: Option<String>,
    /// The peer's `ip:port`.
    pub remote: String,
    /// The handshake's whole `client` document (driver, os, platform,
    /// application), as `$queryStats` keys show it.
    pub metadata: Option<Document>,
}

impl Client {
    pub fn new(remote: String) -> Client {
        Client {
            app_name: None,
            remote,
            metadata: None,
        }
    }

    /// Learns the appName from a handshake (`hello`/`isMaster` with `client`).
    pub fn observe(&mut self, cmd: &Document) {
        if let Ok(c) = cmd.get_document("client") {
            self.metadata = Some(c.clone());
        }
        if let Ok(name) = cmd
            .get_document("client")
            .and_then(|c| c.get_document("application"))
            .and_then(|a| a.get_str("name"))
        {
            self.app_name = Some(name.to_owned());
        }
    }

    fn ip(&self) -> &str {
        match self.remote.rsplit_once(':') {
            Some((ip, _)) => ip.trim_start_matches('[').trim_end_matches(']'),
            None => &self.remote,
        }
    }
}

#[derive(Debug)]
struct State {
    default_level: i32,
    levels: HashMap<String, i32>,
    slowms: i64,
    sample_rate: f64,
    /// Per database: the entries of `system.profile`, oldest first, and
    /// their total size.
    capped: HashMap<String, (VecDeque<(Key, usize)>, usize)>,
    cap_bytes: usize,
}

impl State {
    fn settings(&self, db: &str) -> Settings {
        Settings {
            level: self.levels.get(db).copied().unwrap_or(self.default_level),
            slowms: self.slowms,
            sample_rate: self.sample_rate,
        }
    }
}

/// The profiler and slow-query log of one server.
#[derive(Debug)]
pub struct Profiler {
    state: Mutex<State>,
    /// Whether any database's level is above 0: with none (the usual
    /// case), a command is not recorded without taking the lock.
    on: AtomicBool,
    log: Option<Arc<Mutex<std::fs::File>>>,
    /// `$queryStats`' store.
    pub query_stats: super::aggregate::query_stats::QueryStats,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler::new(&ProfileConfig::default(), None)
    }
}

/// The settings the `profile` command reports.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Settings {
    pub level: i32,
    pub slowms: i64,
    pub sample_rate: f64,
}

impl Profiler {
    /// A profiler as `config` says, writing its log to `log` (the opened
    /// `config.log`; the members of a replica set share one).
    pub fn new(config: &ProfileConfig, log: Option<Arc<Mutex<std::fs::File>>>) -> Profiler {
        Profiler {
            state: Mutex::new(State {
                default_level: config.level,
                levels: HashMap::new(),
                slowms: config.slowms,
                sample_rate: config.sample_rate,
                capped: HashMap::new(),
                cap_bytes: config.cap_bytes,
            }),
            on: AtomicBool::new(config.level > 0),
            log,
            query_stats: super::aggregate::query_stats::QueryStats::new(
                config.query_stats,
                config.query_stats_read,
            ),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The settings as `db` sees them.
    pub fn settings(&self, db: &str) -> Settings {
        self.state().settings(db)
    }

    /// Sets `db`'s level (`None`: unchanged) and the server's `slowms` and
    /// `sampleRate`; returns the settings before.
    pub fn set(
        &self,
        db: &str,
        level: Option<i32>,
        slowms: Option<i64>,
        sample_rate: Option<f64>,
    ) -> Settings {
        let mut s = self.state();
        let was = s.settings(db);
        if let Some(l) = level {
            s.levels.insert(db.to_owned(), l);
            let on = s.default_level > 0 || s.levels.values().any(|&l| l > 0);
            self.on.store(on, Ordering::Relaxed);
        }
        if let Some(ms) = slowms {
            s.slowms = ms;
        }
        if let Some(r) = sample_rate {
            s.sample_rate = r;
        }
        was
    }

    /// Whether the command `name` on `db` may be recorded (the caller then
    /// keeps a copy of the command for [`Profiler::record`]).
    pub fn wants(&self, db: &str, name: &str) -> bool {
        self.log.is_some()
            || (self.query_stats.enabled && super::aggregate::query_stats::records(name))
            || (self.on.load(Ordering::Relaxed) && self.settings(db).level > 0)
    }

    /// Records one command that took `took`: in `system.profile` when
    /// `db`'s level says so, in the log when at or above `slowms`.
    pub fn record(
        &self,
        store: &Store,
        cmd: &Document,
        reply: &Document,
        took: Duration,
        connection_id: i64,
        client: &Client,
    ) {
        let name = command_name(cmd);
        if SKIPPED.contains(&name) {
            return;
        }
        let now = DateTime::now();
        self.query_stats
            .record(cmd, reply, took, client.metadata.as_ref(), now);
        let db = cmd.get_str("$db").unwrap_or("test");
        let millis = took.as_millis() as i64;
        let set = self.settings(db);
        let slow = millis >= set.slowms
            && (set.sample_rate >= 1.0 || rand::random::<f64>() < set.sample_rate);
        let profile = set.level == 2 || (set.level == 1 && slow);
        let log = self.log.is_some() && slow;
        if !profile && !log {
            return;
        }
        let entries = entries(store, db, cmd, reply);
        if entries.iter().any(|e| e.ns.ends_with(".system.profile")) {
            // Reading the profile is not itself profiled (it would fill it).
            return;
        }
        if profile {
            for e in entries.iter().filter(|e| e.profiled) {
                let mut d = doc! { "op": e.op, "ns": &e.ns, "command": e.command.clone() };
                d.extend(e.fields.clone());
                d.insert("millis", millis);
                if e.read {
                    d.insert("planSummary", &e.plan);
                }
                d.insert("ts", now);
                d.insert("client", client.ip());
                if let Some(a) = &client.app_name {
                    d.insert("appName", a);
                }
                d.insert("allUsers", Vec::<Bson>::new());
                d.insert("user", "");
                self.store(store, db, d);
            }
        }
        if let Some(file) = &self.log {
            if log {
                let mut text = String::new();
                for e in entries.iter().filter(|e| e.logged) {
                    text.push_str(&log_line(e, now, millis, connection_id, client));
                    text.push('\n');
                }
                let mut f = file.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(err) = f.write_all(text.as_bytes()) {
                    tracing::warn!(error = %err, "cannot write the slow-query log");
                }
            }
        }
    }

    /// Appends `entry` to `db`'s `system.profile`, dropping the oldest
    /// entries beyond [`PROFILE_CAP_BYTES`]. The entry is put without the
    /// change log: mongod does not replicate `system.profile`.
    fn store(&self, store: &Store, db: &str, mut entry: Document) {
        let id = ObjectId::new();
        let mut with_id = doc! { "_id": id };
        with_id.extend(std::mem::take(&mut entry));
        let size = bson::to_vec(&with_id).map_or(0, |b| b.len());
        let key = Key(Bson::ObjectId(id));
        let (c, _) = store.collection_or_create(db, "system.profile");
        let mut st = self.state();
        let cap = st.cap_bytes;
        let (queue, total) = st.capped.entry(db.to_owned()).or_default();
        let mut c = wlock(&c);
        c.put(&key, Some(with_id));
        queue.push_back((key, size));
        *total += size;
        while *total > cap && queue.len() > 1 {
            if let Some((old, n)) = queue.pop_front() {
                c.put(&old, None);
                *total -= n;
            }
        }
    }
}

/// Commands neither recorded here nor by mongod's slow-query log at
/// `slowms = 0` in practice: the handshake and the drivers' heartbeats.
const SKIPPED: &[&str] = &["hello", "isMaster", "ismaster", "profile"];

/// One operation as the profiler and the log describe it.
#[derive(Debug)]
struct Entry {
    /// The profiler's `op`: query, getmore, insert, update, remove, command.
    op: &'static str,
    ns: String,
    /// The log's `attr.type`: command, update or remove.
    kind: &'static str,
    /// The log's component: COMMAND or WRITE.
    component: &'static str,
    command: Document,
    /// keysExamined, docsExamined, nreturned, nMatched, … in mongod's order.
    fields: Document,
    plan: String,
    /// A read with a plan (planSummary is reported).
    read: bool,
    /// In `system.profile` (an update command's envelope is not).
    profiled: bool,
    /// In the log.
    logged: bool,
}

fn entry(op: &'static str, ns: String, command: Document) -> Entry {
    Entry {
        op,
        ns,
        kind: "command",
        component: "COMMAND",
        command,
        fields: Document::new(),
        plan: String::new(),
        read: false,
        profiled: true,
        logged: true,
    }
}

/// The plan of `filter` (and `sort`) on `db.coll`: its summary, keys and
/// documents examined for `hits` results.
fn plan(
    store: &Store,
    db: &str,
    coll: &str,
    filter: Option<&Document>,
    sort: Option<&Document>,
    hits: i64,
) -> (String, i64, i64) {
    let empty = Document::new();
    let Ok(filter) = Filter::parse(filter.unwrap_or(&empty)) else {
        return ("COLLSCAN".into(), 0, 0);
    };
    let sort = sort
        .filter(|s| !s.is_empty())
        .and_then(|s| SortSpec::parse(s).ok());
    match store.collection(db, coll) {
        None => ("EOF".into(), 0, 0),
        Some(c) => {
            let c = rlock(&c);
            let (summary, scan) = c.plan_summary(&filter, sort.as_ref());
            if scan && summary == "COLLSCAN" {
                (summary, 0, c.len() as i64)
            } else if scan {
                (summary, c.len() as i64, c.len() as i64)
            } else {
                (summary, hits, hits)
            }
        }
    }
}

fn batch_len(reply: &Document, which: &str) -> Option<i64> {
    reply
        .get_document("cursor")
        .ok()
        .and_then(|c| c.get_array(which).ok())
        .map(|a| a.len() as i64)
}

fn int(reply: &Document, key: &str) -> Option<i64> {
    match reply.get(key)? {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(d) => Some(*d as i64),
        _ => None,
    }
}

/// What the profiler and the log record of `cmd`, answered by `reply`.
fn entries(store: &Store, db: &str, cmd: &Document, reply: &Document) -> Vec<Entry> {
    let name = command_name(cmd);
    let coll = cmd.get_str(name).unwrap_or_default().to_owned();
    let ns = format!("{db}.{coll}");
    let mut out = Vec::new();
    match name {
        "find" => {
            let n = batch_len(reply, "firstBatch").unwrap_or(0);
            let (p, keys, docs) = plan(
                store,
                db,
                &coll,
                cmd.get_document("filter").ok(),
                cmd.get_document("sort").ok(),
                n,
            );
            let mut e = entry("query", ns, cmd.clone());
            e.fields = doc! { "keysExamined": keys, "docsExamined": docs, "nreturned": n };
            e.plan = p;
            e.read = true;
            out.push(e);
        }
        "getMore" => {
            let coll = cmd.get_str("collection").unwrap_or_default();
            let n = batch_len(reply, "nextBatch").unwrap_or(0);
            let mut e = entry("getmore", format!("{db}.{coll}"), cmd.clone());
            e.fields = doc! { "nreturned": n };
            out.push(e);
        }
        "aggregate" | "count" | "distinct" => {
            let filter = match name {
                "aggregate" => cmd
                    .get_array("pipeline")
                    .ok()
                    .and_then(|p| p.first())
                    .and_then(Bson::as_document)
                    .and_then(|s| s.get_document("$match").ok()),
                _ => cmd.get_document("query").ok(),
            };
            let n = batch_len(reply, "firstBatch");
            let hits = n.or_else(|| int(reply, "n")).unwrap_or(0);
            let (p, keys, docs) = plan(store, db, &coll, filter, None, hits);
            // A pipeline without a leading $match reads the collection.
            let (keys, docs) = match (name, filter) {
                ("aggregate", None) => (0, docs.max(hits)),
                _ => (keys, docs),
            };
            let mut e = entry("command", ns, cmd.clone());
            e.fields = doc! { "keysExamined": keys, "docsExamined": docs };
            if let Some(n) = n {
                e.fields.insert("nreturned", n);
            }
            e.plan = p;
            e.read = true;
            out.push(e);
        }
        "insert" => {
            let mut c = cmd.clone();
            // mongod records inserts without their documents.
            c.remove("documents");
            let mut e = entry("insert", ns, c);
            e.fields = doc! { "ninserted": int(reply, "n").unwrap_or(0) };
            out.push(e);
        }
        "update" | "delete" => out.extend(write_entries(store, db, &coll, name, cmd, reply)),
        _ => {
            let ns = if coll.is_empty() {
                format!("{db}.$cmd")
            } else {
                ns
            };
            out.push(entry("command", ns, cmd.clone()));
        }
    }
    if int(reply, "ok") == Some(0) {
        add_error(&mut out, reply);
    }
    out
}

/// The entries of an `update` or `delete` command (`name`): one per
/// statement, then the command itself (logged, not profiled).
fn write_entries(
    store: &Store,
    db: &str,
    coll: &str,
    name: &str,
    cmd: &Document,
    reply: &Document,
) -> Vec<Entry> {
    let mut out = Vec::new();
    let (list, op, kind) = if name == "update" {
        ("updates", "update", "update")
    } else {
        ("deletes", "remove", "remove")
    };
    let stmts: Vec<Document> = cmd
        .get_array(list)
        .map(|a| a.iter().filter_map(|s| s.as_document().cloned()).collect())
        .unwrap_or_default();
    let single = stmts.len() == 1;
    let n = int(reply, "n").unwrap_or(0);
    for s in &stmts {
        let hits = if single { n } else { 1 };
        let (p, keys, docs) = plan(store, db, coll, s.get_document("q").ok(), None, hits);
        let mut stmt = s.clone();
        if name == "update" {
            // mongod records an update statement with its defaults.
            for key in ["multi", "upsert"] {
                if !stmt.contains_key(key) {
                    stmt.insert(key, false);
                }
            }
        }
        let mut e = entry(op, format!("{db}.{coll}"), stmt);
        e.kind = kind;
        e.component = "WRITE";
        e.fields = doc! { "keysExamined": keys, "docsExamined": docs };
        if single {
            if name == "update" {
                e.fields.insert("nMatched", n);
                e.fields
                    .insert("nModified", int(reply, "nModified").unwrap_or(0));
            } else {
                e.fields.insert("ndeleted", n);
            }
        }
        e.plan = p;
        e.read = true;
        out.push(e);
    }
    // mongod (before 8.0) logs the command itself too, on
    // `db.$cmd`, without its statements; the profiler does not.
    let mut c = cmd.clone();
    c.remove(list);
    let mut e = entry("command", format!("{db}.$cmd"), c);
    e.profiled = false;
    out.push(e);
    out
}

/// Adds the error of a failed command's `reply` to its entries.
fn add_error(out: &mut [Entry], reply: &Document) {
    for e in out {
        if let Some(code) = int(reply, "code") {
            e.fields.insert("errCode", code);
        }
        if let Ok(name) = reply.get_str("codeName") {
            e.fields.insert("errName", name);
        }
        if let Ok(msg) = reply.get_str("errmsg") {
            e.fields.insert("errMsg", msg);
        }
    }
}

/// One "Slow query" line of mongod's structured JSON log (relaxed
/// extended JSON, as mongod writes it).
fn log_line(e: &Entry, t: DateTime, millis: i64, connection_id: i64, client: &Client) -> String {
    let mut attr = doc! { "type": e.kind, "ns": &e.ns };
    if let Some(a) = &client.app_name {
        attr.insert("appName", a);
    }
    attr.insert("command", e.command.clone());
    if e.read {
        attr.insert("planSummary", &e.plan);
    }
    attr.extend(e.fields.clone());
    attr.insert("remote", &client.remote);
    if e.kind == "command" {
        attr.insert("protocol", "op_msg");
    }
    attr.insert("durationMillis", millis);
    let line = doc! {
        "t": { "$date": log_time(t) },
        "s": "I",
        "c": e.component,
        "id": SLOW_QUERY_ID,
        "ctx": format!("conn{connection_id}"),
        "msg": "Slow query",
    };
    let mut v = Bson::Document(line).into_relaxed_extjson();
    if let Some(o) = v.as_object_mut() {
        o.insert("attr".into(), Bson::Document(attr).into_relaxed_extjson());
    }
    v.to_string()
}

/// mongod's log time: ISO 8601 with milliseconds and the UTC offset.
fn log_time(t: DateTime) -> String {
    let s = t.try_to_rfc3339_string().unwrap_or_default();
    let s = s.trim_end_matches('Z');
    if s.contains('.') {
        format!("{s}+00:00")
    } else {
        format!("{s}.000+00:00")
    }
}

/// The `profile` command: `profile` -1 reads, 0/1/2 sets `$db`'s level;
/// `slowms` and `sampleRate` set the server's. The reply holds the
/// settings before: `{was, slowms, sampleRate, ok}`.
pub fn command(profiler: &Profiler, db: &str, cmd: &Document) -> Result<Document, CmdError> {
    let level = match cmd.get("profile") {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(d)) if d.fract() == 0.0 => *d as i64,
        _ => {
            return Err(CmdError::new(
                14,
                "TypeMismatch",
                "BSON field 'profile.profile' is the wrong type, expected a number",
            ))
        }
    };
    if !(-1..=2).contains(&level) {
        return Err(CmdError::new(
            2,
            "BadValue",
            format!("Invalid profiling level: {level}"),
        ));
    }
    let slowms = match cmd.get("slowms") {
        None => None,
        Some(Bson::Int32(n)) => Some(i64::from(*n)),
        Some(Bson::Int64(n)) => Some(*n),
        Some(Bson::Double(d)) => Some(*d as i64),
        Some(_) => {
            return Err(CmdError::new(
                14,
                "TypeMismatch",
                "BSON field 'profile.slowms' is the wrong type, expected a number",
            ))
        }
    };
    let sample_rate = match cmd.get("sampleRate") {
        None => None,
        Some(Bson::Int32(n)) => Some(f64::from(*n)),
        Some(Bson::Int64(n)) => Some(*n as f64),
        Some(Bson::Double(d)) => Some(*d),
        Some(_) => {
            return Err(CmdError::new(
                14,
                "TypeMismatch",
                "BSON field 'profile.sampleRate' is the wrong type, expected a number",
            ))
        }
    };
    if let Some(r) = sample_rate {
        if !(0.0..=1.0).contains(&r) {
            return Err(CmdError::new(
                2,
                "BadValue",
                "'sampleRate' must be between 0.0 and 1.0 inclusive",
            ));
        }
    }
    let level = (level >= 0).then_some(level as i32);
    let was = profiler.set(db, level, slowms, sample_rate);
    Ok(doc! {
        "was": was.level,
        "slowms": was.slowms,
        "sampleRate": was.sample_rate,
        "ok": 1.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shared::Shared;

    fn shared() -> Shared {
        Shared::new(crate::faults::Faults::new(Default::default()))
    }

    fn lines(shared: &Shared, cmd: Document, reply: Document) -> Vec<serde_json::Value> {
        let client = Client {
            app_name: Some("app".into()),
            remote: "127.0.0.1:5000".into(),
            metadata: None,
        };
        entries(&shared.store, "db", &cmd, &reply)
            .iter()
            .filter(|e| e.logged)
            .map(|e| {
                let l = log_line(e, DateTime::from_millis(1_700_000_000_000), 7, 3, &client);
                serde_json::from_str(&l).unwrap()
            })
            .collect()
    }

    #[test]
    fn a_find_is_logged_as_mongod_logs_it() {
        let s = shared();
        let cmd = doc! { "find": "c", "filter": { "a": { "$gt": 5_i64 } }, "$db": "db" };
        let reply = doc! { "cursor": { "firstBatch": [ { "a": 6 } ], "id": 0_i64, "ns": "db.c" }, "ok": 1.0 };
        let l = &lines(&s, cmd, reply)[0];
        assert_eq!(l["id"], 51803);
        assert_eq!(l["msg"], "Slow query");
        assert_eq!(l["c"], "COMMAND");
        assert_eq!(l["ctx"], "conn3");
        assert_eq!(l["t"]["$date"], "2023-11-14T22:13:20.000+00:00");
        let a = &l["attr"];
        assert_eq!(a["type"], "command");
        assert_eq!(a["ns"], "db.c");
        assert_eq!(a["appName"], "app");
        assert_eq!(a["command"]["filter"]["a"]["$gt"], 5);
        // No such collection: mongod's plan for it is EOF.
        assert_eq!(a["planSummary"], "EOF");
        assert_eq!(a["nreturned"], 1);
        assert_eq!(a["durationMillis"], 7);
        assert_eq!(a["remote"], "127.0.0.1:5000");
    }

    #[test]
    fn an_update_is_logged_per_statement_and_as_its_envelope() {
        let s = shared();
        let (c, _) = s.store.collection_or_create("db", "c");
        wlock(&c).insert(doc! { "_id": 1, "n": 1 }).unwrap();
        let cmd = doc! { "update": "c", "updates": [ { "q": { "_id": 1 }, "u": { "$inc": { "n": 1 } } } ], "ordered": true, "$db": "db" };
        let reply = doc! { "n": 1, "nModified": 1, "ok": 1.0 };
        let l = lines(&s, cmd, reply);
        assert_eq!(l.len(), 2);
        assert_eq!(l[0]["c"], "WRITE");
        assert_eq!(l[0]["attr"]["type"], "update");
        assert_eq!(l[0]["attr"]["ns"], "db.c");
        assert_eq!(l[0]["attr"]["command"]["u"]["$inc"]["n"], 1);
        assert_eq!(l[0]["attr"]["planSummary"], "IDHACK");
        assert_eq!(l[0]["attr"]["nMatched"], 1);
        assert_eq!(l[1]["attr"]["ns"], "db.$cmd");
        assert!(l[1]["attr"]["command"].get("updates").is_none());
    }

    #[test]
    fn an_insert_is_recorded_without_its_documents() {
        let s = shared();
        let cmd = doc! { "insert": "c", "documents": [ { "secret": "x" } ], "$db": "db" };
        let l = lines(&s, cmd, doc! { "n": 1, "ok": 1.0 });
        assert_eq!(l[0]["attr"]["ninserted"], 1);
        assert!(l[0]["attr"]["command"].get("documents").is_none());
    }

    #[test]
    fn profile_levels_and_the_cap() {
        let s = shared();
        let reply = command(&s.profiler, "db", &doc! { "profile": 2, "slowms": 0 }).unwrap();
        assert_eq!(
            reply,
            doc! { "was": 0, "slowms": 100_i64, "sampleRate": 1.0, "ok": 1.0 }
        );
        let reply = command(&s.profiler, "db", &doc! { "profile": -1 }).unwrap();
        assert_eq!(reply.get_i32("was").unwrap(), 2);
        assert_eq!(reply.get_i64("slowms").unwrap(), 0);
        assert!(command(&s.profiler, "db", &doc! { "profile": 3 }).is_err());
        assert!(command(&s.profiler, "db", &doc! { "profile": 1, "sampleRate": 1.5 }).is_err());
        let client = Client::new("10.0.0.1:1".into());
        let cmd = doc! { "find": "c", "filter": { "x": "y".repeat(1000) }, "$db": "db" };
        let reply = doc! { "cursor": { "firstBatch": [], "id": 0_i64, "ns": "db.c" }, "ok": 1.0 };
        for _ in 0..3000 {
            s.profiler
                .record(&s.store, &cmd, &reply, Duration::ZERO, 1, &client);
        }
        let c = s.store.collection("db", "system.profile").unwrap();
        let c = rlock(&c);
        let total: usize = c.iter().map(|d| bson::to_vec(d).unwrap().len()).sum();
        assert!(total <= PROFILE_CAP_BYTES, "{total}");
        assert!(c.len() > 500 && c.len() < 3000, "{}", c.len());
        let d = c.iter().next().unwrap();
        assert_eq!(d.get_str("op").unwrap(), "query");
        assert_eq!(d.get_str("ns").unwrap(), "db.c");
        assert_eq!(d.get_str("client").unwrap(), "10.0.0.1");
        assert_eq!(d.get_i64("millis").unwrap(), 0);
        assert!(d.get_datetime("ts").is_ok());
        // Level 1 records only what reaches slowms.
        command(&s.profiler, "other", &doc! { "profile": 1, "slowms": 50 }).unwrap();
        let cmd = doc! { "find": "c", "$db": "other" };
        s.profiler.record(
            &s.store,
            &cmd,
            &reply,
            Duration::from_millis(10),
            1,
            &client,
        );
        assert!(s.store.collection("other", "system.profile").is_none());
        s.profiler.record(
            &s.store,
            &cmd,
            &reply,
            Duration::from_millis(60),
            1,
            &client,
        );
        assert_eq!(
            rlock(&s.store.collection("other", "system.profile").unwrap()).len(),
            1
        );
    }
}
