//! From one logged command to the statements it ran and their *shapes*:
//! the command, the collection and its filter, update or pipeline with
//! every literal replaced by a typed slot. Two statements of one shape
//! differ only in their literals; the values seen in each slot are kept
//! (as [`Obs`]) for the generator that replaces them.

use serde_json::{Map, Value};

use super::log::{date_ms, number, SlowQuery};
use crate::workload::custom::CustomOpKind;

/// A literal seen in a slot.
#[derive(Debug, Clone, PartialEq)]
pub enum Obs {
    Int(i64),
    Double(f64),
    Str(String),
    Bool(bool),
    /// ms since the epoch.
    Date(i64),
    ObjectId,
    /// Binary data (any subtype): its length in bytes.
    Binary(usize),
    /// An array of scalar literals (of one type).
    Array(Vec<Obs>),
}

impl Obs {
    /// The type name, part of the shape.
    pub fn type_name(&self) -> String {
        match self {
            Obs::Int(_) => "int".into(),
            Obs::Double(_) => "double".into(),
            Obs::Str(_) => "string".into(),
            Obs::Bool(_) => "bool".into(),
            Obs::Date(_) => "date".into(),
            Obs::ObjectId => "objectId".into(),
            Obs::Binary(_) => "binary".into(),
            Obs::Array(a) => match a.first() {
                Some(e) => format!("array<{}>", e.type_name()),
                None => "array<>".into(),
            },
        }
    }
}

/// Marks a slot in a skeleton: the string `"\u{1}N:TYPE"`.
pub(crate) const SLOT: char = '\u{1}';

/// One statement of a logged command, normalized.
#[derive(Debug, Clone, PartialEq)]
pub struct Stmt {
    pub op: CustomOpKind,
    pub db: String,
    pub coll: String,
    /// The skeleton of the statement's templates (`filter`, `update`,
    /// `pipeline`), literals replaced by slots numbered in walk order.
    pub skeleton: Map<String, Value>,
    /// Literal parts kept as they are (`sort`, `projection`, `field`).
    pub fixed: Map<String, Value>,
    /// The literals, by slot number.
    pub obs: Vec<Obs>,
    /// The slots whose field is `_id` (drawn from the loaded documents).
    pub id_slots: Vec<usize>,
    /// `limit` (find), if set.
    pub limit: Option<i64>,
    /// Update or delete every match.
    pub many: bool,
    /// Options of the original that `custom` does not run (`skip`,
    /// `upsert`, `hint`, …): named in the operation's comment.
    pub dropped: Vec<String>,
    /// Documents an insert carried in the command, if the log shows them.
    pub documents: Vec<Value>,
}

impl Stmt {
    /// The key two statements of one shape share.
    pub fn key(&self) -> String {
        format!(
            "{}.{}|{}|{}|{}|{}|{}",
            self.db,
            self.coll,
            self.op.as_str(),
            Value::Object(self.skeleton.clone()),
            Value::Object(self.fixed.clone()),
            self.limit.is_some(),
            self.many
        )
    }
}

/// Why an entry yields no statement.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Skip {
    /// mongoload's own traffic (its appName).
    OwnTraffic,
    /// admin, config, local or a `system.*` collection.
    SystemNamespace,
    /// A `getMore`: the rest of a cursor, counted with the command that
    /// opened it.
    CursorContinuation,
    /// An `update`/`delete` command's envelope: its statements are logged
    /// (and counted) on their own.
    WriteEnvelope,
    /// A shape `custom` cannot run: what it is.
    Unsupported(String),
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Skip::OwnTraffic => f.write_str("mongoload's own traffic (appName)"),
            Skip::SystemNamespace => f.write_str("system namespaces (admin, config, local, system.*)"),
            Skip::CursorContinuation => {
                f.write_str("getMore (a cursor's next batches, counted with its command)")
            }
            Skip::WriteEnvelope => f.write_str(
                "update/delete command envelopes (their statements are counted from their own entries)",
            ),
            Skip::Unsupported(what) => write!(f, "unsupported: {what}"),
        }
    }
}

fn unsupported<T>(what: impl Into<String>) -> Result<T, Skip> {
    Err(Skip::Unsupported(what.into()))
}

/// Splits `db.collection`.
fn split_ns(ns: &str) -> (&str, &str) {
    ns.split_once('.').unwrap_or((ns, ""))
}

fn is_system(db: &str, coll: &str) -> bool {
    matches!(db, "admin" | "config" | "local") || coll.starts_with("system.")
}

/// The statements `e` ran, or why it yields none. `own_app` is the
/// appName prefix of mongoload's own traffic.
pub(crate) fn statements(e: &SlowQuery, own_app: &str) -> Result<Vec<Stmt>, Skip> {
    if e.app_name
        .as_deref()
        .is_some_and(|a| a.starts_with(own_app))
    {
        return Err(Skip::OwnTraffic);
    }
    let (db, ns_coll) = split_ns(&e.ns);
    let cmd = e
        .command
        .as_object()
        .ok_or_else(|| Skip::Unsupported("a command that is not a document".into()))?;
    if cmd.contains_key("$truncated") {
        return unsupported("commands the log truncated");
    }
    let name_of = |key: &str| -> Result<String, Skip> {
        match cmd.get(key).and_then(Value::as_str) {
            Some(c) => Ok(c.to_owned()),
            None => unsupported(format!("{key} without a collection name")),
        }
    };
    match e.kind.as_str() {
        "update" | "remove" => {
            if is_system(db, ns_coll) {
                return Err(Skip::SystemNamespace);
            }
            let stmt = if e.kind == "update" {
                update_stmt(db, ns_coll, cmd)?
            } else {
                delete_stmt(db, ns_coll, cmd)?
            };
            return Ok(vec![stmt]);
        }
        "command" | "query" => {}
        other => return unsupported(format!("attr.type {other:?}")),
    }
    let Some(first) = cmd.keys().next().cloned() else {
        return unsupported("an empty command");
    };
    let coll = match first.as_str() {
        "find" | "aggregate" | "count" | "distinct" | "insert" | "update" | "delete" => {
            name_of(&first)?
        }
        "getMore" => ns_coll.to_owned(),
        _ => String::new(),
    };
    let coll_for_check = if coll.is_empty() { ns_coll } else { &coll };
    if is_system(db, coll_for_check) {
        return Err(Skip::SystemNamespace);
    }
    match first.as_str() {
        "find" => find_stmt(db, &coll, cmd).map(|s| vec![s]),
        "aggregate" => aggregate_stmt(db, &coll, cmd).map(|s| vec![s]),
        "count" => count_stmt(db, &coll, cmd).map(|s| vec![s]),
        "distinct" => distinct_stmt(db, &coll, cmd).map(|s| vec![s]),
        "insert" => insert_stmt(db, &coll, cmd).map(|s| vec![s]),
        "update" | "delete" => write_stmts(db, &coll, cmd, &first),
        "getMore" => Err(Skip::CursorContinuation),
        other => unsupported(format!("command {other}")),
    }
}

/// The keys of a command that are about the connection, not the query.
const ENVELOPE: &[&str] = &[
    "$db",
    "lsid",
    "$clusterTime",
    "txnNumber",
    "autocommit",
    "startTransaction",
    "$readPreference",
    "readConcern",
    "writeConcern",
    "maxTimeMS",
    "comment",
    "cursor",
    "batchSize",
    "singleBatch",
    "ordered",
    "allowDiskUse",
    "bypassDocumentValidation",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
    "$audit",
    "$client",
    "$configServerState",
    "shardVersion",
    "databaseVersion",
    "mayBypassWriteBlocking",
    "$queryOptions",
    "let",
    "collation",
];

fn count_stmt(db: &str, coll: &str, cmd: &Map<String, Value>) -> Result<Stmt, Skip> {
    let mut s = Stmt::new(CustomOpKind::Count, db, coll);
    s.template("filter", cmd.get("query"), Mode::Filter)?;
    s.drop_options(cmd, &["query", "limit", "skip", "hint"]);
    Ok(s)
}

fn distinct_stmt(db: &str, coll: &str, cmd: &Map<String, Value>) -> Result<Stmt, Skip> {
    let mut s = Stmt::new(CustomOpKind::Distinct, db, coll);
    let Some(key) = cmd.get("key").and_then(Value::as_str) else {
        return unsupported("distinct without a key");
    };
    s.fixed
        .insert("field".into(), Value::String(key.to_owned()));
    s.template("filter", cmd.get("query"), Mode::Filter)?;
    s.drop_options(cmd, &["key", "query", "hint"]);
    Ok(s)
}

fn insert_stmt(db: &str, coll: &str, cmd: &Map<String, Value>) -> Result<Stmt, Skip> {
    let mut s = Stmt::new(CustomOpKind::Insert, db, coll);
    if let Some(Value::Array(docs)) = cmd.get("documents") {
        s.documents = docs.clone();
        // The first document's shape is the template (mongoload
        // sets `_id`; TOML has no null: null fields are left out).
        if let Some(Value::Object(d)) = docs.first() {
            let mut d = d.clone();
            d.remove("_id");
            let d = without_nulls(Value::Object(d));
            s.template("document", Some(&d), Mode::Filter)?;
        }
    }
    Ok(s)
}

/// The statements of an `update` or `delete` command (`command`), one per
/// entry of its `updates` or `deletes`.
fn write_stmts(
    db: &str,
    coll: &str,
    cmd: &Map<String, Value>,
    command: &str,
) -> Result<Vec<Stmt>, Skip> {
    let list = if command == "update" {
        "updates"
    } else {
        "deletes"
    };
    let Some(Value::Array(items)) = cmd.get(list) else {
        return Err(Skip::WriteEnvelope);
    };
    items
        .iter()
        .map(|it| {
            let Some(it) = it.as_object() else {
                return unsupported(format!("{list} entries that are not documents"));
            };
            if command == "update" {
                update_stmt(db, coll, it)
            } else {
                delete_stmt(db, coll, it)
            }
        })
        .collect()
}

fn find_stmt(db: &str, coll: &str, cmd: &Map<String, Value>) -> Result<Stmt, Skip> {
    let mut s = Stmt::new(CustomOpKind::Find, db, coll);
    s.template("filter", cmd.get("filter"), Mode::Filter)?;
    for key in ["sort", "projection"] {
        if let Some(v) = cmd.get(key) {
            if !structural(v) {
                return unsupported(format!("find with a {key} holding values"));
            }
            if v.as_object().is_some_and(|o| !o.is_empty()) {
                s.fixed.insert(key.into(), v.clone());
            }
        }
    }
    if let Some(l) = cmd.get("limit").and_then(number) {
        if l != 0.0 {
            s.limit = Some(l.abs() as i64);
        }
    }
    if cmd.get("singleBatch").and_then(Value::as_bool) == Some(true) && s.limit.is_none() {
        s.dropped.push("singleBatch".into());
    }
    s.drop_options(
        cmd,
        &["filter", "sort", "projection", "limit", "singleBatch"],
    );
    Ok(s)
}

/// Stages `custom` can send as captured: values in `$match` draw, the
/// others are structure (field paths, accumulators, limits).
const STAGES: &[&str] = &[
    "$match",
    "$group",
    "$sort",
    "$limit",
    "$skip",
    "$project",
    "$unwind",
    "$count",
    "$addFields",
    "$set",
    "$unset",
    "$replaceRoot",
    "$replaceWith",
    "$sortByCount",
    "$sample",
    "$lookup",
    "$bucket",
    "$facet",
];

fn aggregate_stmt(db: &str, coll: &str, cmd: &Map<String, Value>) -> Result<Stmt, Skip> {
    let mut s = Stmt::new(CustomOpKind::Aggregate, db, coll);
    let Some(Value::Array(stages)) = cmd.get("pipeline") else {
        return unsupported("aggregate without a pipeline");
    };
    if stages.is_empty() {
        return unsupported("aggregate with an empty pipeline");
    }
    let mut out = Vec::with_capacity(stages.len());
    for st in stages {
        let Some((name, body)) = st
            .as_object()
            .filter(|o| o.len() == 1)
            .and_then(|o| o.iter().next())
        else {
            return unsupported("aggregate stages that are not one-key documents");
        };
        if !STAGES.contains(&name.as_str()) {
            return unsupported(format!("aggregate with {name}"));
        }
        let mode = if name == "$match" {
            Mode::Filter
        } else {
            Mode::Expr
        };
        let mut one = Map::new();
        one.insert(name.clone(), s.walk(body, mode, Some(name))?);
        out.push(Value::Object(one));
    }
    s.skeleton.insert("pipeline".into(), Value::Array(out));
    s.drop_options(cmd, &["pipeline", "explain", "hint"]);
    if cmd.get("explain").is_some() {
        return unsupported("aggregate explain");
    }
    Ok(s)
}

fn update_stmt(db: &str, coll: &str, st: &Map<String, Value>) -> Result<Stmt, Skip> {
    let mut s = Stmt::new(CustomOpKind::Update, db, coll);
    s.template("filter", st.get("q"), Mode::Filter)?;
    match st.get("u") {
        Some(Value::Object(u)) if !u.is_empty() && u.keys().all(|k| k.starts_with('$')) => {
            let u = Value::Object(u.clone());
            let sk = s.walk(&u, Mode::Update, None)?;
            s.skeleton.insert("update".into(), sk);
        }
        // A replacement runs as a `$set` of its fields (custom updates
        // with operators): the same fields written, the others kept.
        Some(Value::Object(u)) if u.keys().all(|k| !k.starts_with('$')) => {
            let mut fields = u.clone();
            fields.remove("_id");
            if fields.is_empty() {
                return unsupported("update replacing a document with an empty one");
            }
            let set = serde_json::json!({ "$set": without_nulls(Value::Object(fields)) });
            let sk = s.walk(&set, Mode::Update, None)?;
            s.skeleton.insert("update".into(), sk);
            s.dropped
                .push("replacement (run as a $set of its fields)".into());
        }
        Some(Value::Object(_)) => return unsupported("update mixing operators and fields"),
        Some(Value::Array(_)) => return unsupported("update with an aggregation pipeline"),
        _ => return unsupported("update without u"),
    }
    s.many = st.get("multi").and_then(Value::as_bool) == Some(true);
    if st.get("upsert").and_then(Value::as_bool) == Some(true) {
        s.dropped.push("upsert".into());
    }
    for k in ["arrayFilters", "hint", "collation"] {
        if st.contains_key(k) {
            s.dropped.push(k.into());
        }
    }
    Ok(s)
}

fn delete_stmt(db: &str, coll: &str, st: &Map<String, Value>) -> Result<Stmt, Skip> {
    let mut s = Stmt::new(CustomOpKind::Delete, db, coll);
    s.template("filter", st.get("q"), Mode::Filter)?;
    s.many = st.get("limit").and_then(number) == Some(0.0);
    for k in ["hint", "collation"] {
        if st.contains_key(k) {
            s.dropped.push(k.into());
        }
    }
    Ok(s)
}

/// True when a sort or projection holds only structure: numbers,
/// booleans, `$meta`s and field paths.
fn structural(v: &Value) -> bool {
    match v {
        Value::Number(_) | Value::Bool(_) => true,
        Value::String(s) => s.starts_with('$'),
        Value::Object(o) => o
            .iter()
            .all(|(k, v)| (k == "$meta" && v.is_string()) || structural(v)),
        Value::Array(_) | Value::Null => false,
    }
}

/// How literals in a part of a statement are read.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mode {
    /// A query filter: every literal is data.
    Filter,
    /// An update document: values under operators are data.
    Update,
    /// An aggregation expression outside `$match`: numbers and booleans
    /// are structure (flags, accumulators, limits), strings are field
    /// paths or names unless a data key holds them.
    Expr,
}

/// Keys whose string values name fields, collections or outputs, not data.
const NAME_KEYS: &[&str] = &[
    "from",
    "localField",
    "foreignField",
    "as",
    "path",
    "includeArrayIndex",
    "$count",
    "$unset",
    "$sortByCount",
    "$meta",
    "groupBy",
];

/// The decoded length of a base64 text.
fn base64_len(b64: &str) -> usize {
    let t = b64.trim_end_matches('=');
    t.len() * 3 / 4
}

/// The extended-JSON wrappers of scalar types.
fn ejson_scalar(o: &Map<String, Value>) -> Option<Result<Obs, Skip>> {
    if o.len() != 1 && !(o.len() == 2 && (o.contains_key("$regex") || o.contains_key("$binary"))) {
        return None;
    }
    let (k, v) = o.iter().next()?;
    Some(match k.as_str() {
        "$numberLong" | "$numberInt" => match number(&Value::Object(o.clone())) {
            Some(n) => Ok(Obs::Int(n as i64)),
            None => unsupported(format!("a malformed {k}")),
        },
        "$numberDouble" => match number(&Value::Object(o.clone())) {
            Some(n) => Ok(Obs::Double(n)),
            None => unsupported("a malformed $numberDouble"),
        },
        "$date" => match date_ms(&Value::Object(o.clone())) {
            Some(ms) => Ok(Obs::Date(ms)),
            None => unsupported("a malformed $date"),
        },
        "$oid" => Ok(Obs::ObjectId),
        // Canonical {"$binary": {"base64": …, "subType": …}}, or the legacy
        // {"$binary": "…", "$type": "…"} form.
        "$binary" => match v.get("base64").or(Some(v)).and_then(Value::as_str) {
            Some(b64) => Ok(Obs::Binary(base64_len(b64))),
            None => unsupported("a malformed $binary"),
        },
        "$numberDecimal" | "$uuid" | "$regularExpression" | "$timestamp" | "$minKey"
        | "$maxKey" | "$undefined" | "$symbol" | "$code" | "$dbPointer" => {
            unsupported(format!("{} values", &k[1..]))
        }
        _ => {
            let _ = v;
            return None;
        }
    })
}

impl Stmt {
    fn new(op: CustomOpKind, db: &str, coll: &str) -> Stmt {
        Stmt {
            op,
            db: db.to_owned(),
            coll: coll.to_owned(),
            skeleton: Map::new(),
            fixed: Map::new(),
            obs: Vec::new(),
            id_slots: Vec::new(),
            limit: None,
            many: false,
            dropped: Vec::new(),
            documents: Vec::new(),
        }
    }

    /// Names the options of `cmd` that are neither envelope nor `used`.
    fn drop_options(&mut self, cmd: &Map<String, Value>, used: &[&str]) {
        let first = cmd.keys().next().cloned().unwrap_or_default();
        for k in cmd.keys() {
            if *k != first && !used.contains(&k.as_str()) && !ENVELOPE.contains(&k.as_str()) {
                self.dropped.push(k.clone());
            }
        }
    }

    /// Normalizes a template part (`filter`) into the skeleton; an absent
    /// or empty one is left out.
    fn template(&mut self, key: &str, v: Option<&Value>, mode: Mode) -> Result<(), Skip> {
        match v {
            None => Ok(()),
            Some(Value::Object(o)) if o.is_empty() => Ok(()),
            Some(v @ Value::Object(_)) => {
                let sk = self.walk(v, mode, None)?;
                self.skeleton.insert(key.into(), sk);
                Ok(())
            }
            Some(other) => unsupported(format!("a {key} that is not a document: {}", kind(other))),
        }
    }

    fn slot(&mut self, o: Obs, field: Option<&str>) -> Value {
        let n = self.obs.len();
        if field == Some("_id") {
            self.id_slots.push(n);
        }
        let v = Value::String(format!("{SLOT}{n}:{}", o.type_name()));
        self.obs.push(o);
        v
    }

    /// The skeleton of `v`; `field` is the field the value belongs to.
    fn walk(&mut self, v: &Value, mode: Mode, field: Option<&str>) -> Result<Value, Skip> {
        Ok(match v {
            // `{ $group: { _id: null } }`: one group; any constant does.
            Value::Null if mode == Mode::Expr && field == Some("_id") => Value::from(0),
            Value::Null => return unsupported("null values (TOML has no null)"),
            Value::Bool(b) if mode == Mode::Expr => Value::Bool(*b),
            Value::Bool(b) => self.slot(Obs::Bool(*b), field),
            Value::Number(n) if mode == Mode::Expr => Value::Number(n.clone()),
            Value::Number(n) => match n.as_i64() {
                Some(i) => self.slot(Obs::Int(i), field),
                None => self.slot(Obs::Double(n.as_f64().unwrap_or(0.0)), field),
            },
            Value::String(s) if mode == Mode::Expr && s.starts_with('$') => v.clone(),
            Value::String(s) if field.is_some_and(|f| NAME_KEYS.contains(&f)) => {
                let _ = s;
                v.clone()
            }
            Value::String(s) => self.slot(Obs::Str(s.clone()), field),
            Value::Array(a) => {
                let scalars: Option<Vec<Obs>> = a.iter().map(scalar_obs).collect();
                match scalars {
                    Some(items) if mode != Mode::Expr && !a.is_empty() => {
                        let t = items[0].type_name();
                        if items.iter().any(|o| o.type_name() != t) {
                            return unsupported("arrays of mixed types");
                        }
                        self.slot(Obs::Array(items), field)
                    }
                    _ => Value::Array(
                        a.iter()
                            .map(|x| self.walk(x, mode, field))
                            .collect::<Result<_, _>>()?,
                    ),
                }
            }
            Value::Object(o) => {
                if let Some(r) = ejson_scalar(o) {
                    let obs = r?;
                    return Ok(self.slot(obs, field));
                }
                let mut out = Map::new();
                for (k, x) in o {
                    let (m, f) = match (mode, k.as_str()) {
                        // Operators keep the field they apply to.
                        (Mode::Filter, "$exists" | "$type" | "$options") => {
                            out.insert(k.clone(), x.clone());
                            continue;
                        }
                        (Mode::Filter, "$expr") => (Mode::Expr, None),
                        // `$unset` ignores its values: only the field names stay.
                        (Mode::Update, "$unset") => {
                            let fields = match x {
                                Value::Object(f) => {
                                    f.keys().map(|k| (k.clone(), Value::from(""))).collect()
                                }
                                _ => Map::new(),
                            };
                            out.insert(k.clone(), Value::Object(fields));
                            continue;
                        }
                        (Mode::Update, op) if op.starts_with('$') => (Mode::Filter, None),
                        (_, op) if op.starts_with('$') && !NAME_KEYS.contains(&op) => (mode, field),
                        _ => (mode, Some(k.as_str())),
                    };
                    out.insert(k.clone(), self.walk(x, m, f)?);
                }
                Value::Object(out)
            }
        })
    }
}

/// `v` without its null fields (at any depth).
fn without_nulls(v: Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.into_iter()
                .filter(|(_, x)| !x.is_null())
                .map(|(k, x)| (k, without_nulls(x)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

/// A scalar literal as an observation; None for documents and arrays.
pub(crate) fn scalar_obs(v: &Value) -> Option<Obs> {
    match v {
        Value::Bool(b) => Some(Obs::Bool(*b)),
        Value::Number(n) => Some(match n.as_i64() {
            Some(i) => Obs::Int(i),
            None => Obs::Double(n.as_f64().unwrap_or(0.0)),
        }),
        Value::String(s) => Some(Obs::Str(s.clone())),
        Value::Object(o) => ejson_scalar(o).and_then(Result::ok),
        _ => None,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a document",
    }
}
