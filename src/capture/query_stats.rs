//! `mongoload capture --query-stats`: MongoDB's `$queryStats` (7.1+/8.0,
//! needs `queryStatsRead`) as a source. Each entry is a query shape of a
//! `find`, `aggregate` or `distinct` with its execution count and
//! latency; writes are not recorded. `$queryStats` keeps each literal's
//! type (`"?number"`), not its value: the shape is rebuilt as commands
//! whose literals come from a `$sample` of the collection (the field's
//! own values, so their type and range), or from the type's default range
//! where no sampled document has the field. The rebuilt commands go
//! through the same normalizer as a log line ([`super::shape`]) and the
//! same renderer.

use std::collections::{BTreeMap, HashMap};

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::Client;
use serde_json::{json, Map, Value};

use super::log::SlowQuery;
use super::shape::{self, Obs, Skip};
use super::{Capture, ExecStats, Group, SlotStats};

/// One `$queryStats` entry: what `capture` reads of it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub key_hash: String,
    pub db: String,
    pub coll: String,
    /// `key.client.application.name`.
    pub app_name: Option<String>,
    /// `key.queryShape` (relaxed extended JSON).
    pub shape: Map<String, Value>,
    /// `metrics.execCount`.
    pub exec_count: u64,
    /// `metrics.totalExecMicros`: sum, min, max.
    pub exec_micros: (f64, i64, i64),
    /// `metrics.docsReturned`: sum, max.
    pub docs_returned: (u64, u64),
    /// `metrics.firstSeenTimestamp`, `metrics.latestSeenTimestamp` (ms).
    pub first_seen_ms: i64,
    pub latest_seen_ms: i64,
}

fn int(d: &Document, k: &str) -> Option<i64> {
    match d.get(k)? {
        Bson::Int32(n) => Some(i64::from(*n)),
        Bson::Int64(n) => Some(*n),
        Bson::Double(x) => Some(*x as i64),
        _ => None,
    }
}

/// Reads one `$queryStats` output document; the error names the field.
pub(crate) fn parse(d: &Document) -> Result<Entry, String> {
    let missing = |f: &str| format!("a $queryStats entry without {f}");
    let key = d.get_document("key").map_err(|_| missing("key"))?;
    let shape = key
        .get_document("queryShape")
        .map_err(|_| missing("key.queryShape"))?;
    let ns = shape
        .get_document("cmdNs")
        .map_err(|_| missing("key.queryShape.cmdNs"))?;
    let db = ns
        .get_str("db")
        .map_err(|_| missing("key.queryShape.cmdNs.db"))?;
    let coll = ns.get_str("coll").unwrap_or_default();
    let m = d.get_document("metrics").map_err(|_| missing("metrics"))?;
    let exec_count = int(m, "execCount").ok_or_else(|| missing("metrics.execCount"))?;
    let agg = |k: &str| m.get_document(k).ok();
    let exec_micros = agg("totalExecMicros")
        .map(|t| {
            (
                int(t, "sum").unwrap_or(0) as f64,
                int(t, "min").unwrap_or(0),
                int(t, "max").unwrap_or(0),
            )
        })
        .unwrap_or_default();
    let docs_returned = agg("docsReturned")
        .map(|t| {
            (
                int(t, "sum").unwrap_or(0).max(0) as u64,
                int(t, "max").unwrap_or(0).max(0) as u64,
            )
        })
        .unwrap_or_default();
    let seen = |k: &str| {
        m.get_datetime(k)
            .map(|t| t.timestamp_millis())
            .map_err(|_| missing(&format!("metrics.{k}")))
    };
    Ok(Entry {
        key_hash: d.get_str("keyHash").unwrap_or_default().to_owned(),
        db: db.to_owned(),
        coll: coll.to_owned(),
        app_name: key
            .get_document("client")
            .and_then(|c| c.get_document("application"))
            .and_then(|a| a.get_str("name"))
            .ok()
            .map(str::to_owned),
        shape: match Bson::Document(shape.clone()).into_relaxed_extjson() {
            Value::Object(o) => o,
            _ => Map::new(),
        },
        exec_count: exec_count.max(0) as u64,
        exec_micros,
        docs_returned,
        first_seen_ms: seen("firstSeenTimestamp")?,
        latest_seen_ms: seen("latestSeenTimestamp")?,
    })
}

/// What ran between two readings: each entry of `after` with the counts
/// and sums of `before` taken off (an entry new in `after` counts whole);
/// entries that did not run are left out. `min` and `max` stay the
/// server's since it started.
pub(crate) fn deltas(before: &[Entry], after: Vec<Entry>) -> Vec<Entry> {
    let was: HashMap<&str, &Entry> = before.iter().map(|e| (e.key_hash.as_str(), e)).collect();
    after
        .into_iter()
        .filter_map(|mut e| {
            if let Some(b) = was.get(e.key_hash.as_str()) {
                e.exec_count = e.exec_count.saturating_sub(b.exec_count);
                e.exec_micros.0 = (e.exec_micros.0 - b.exec_micros.0).max(0.0);
                e.docs_returned.0 = e.docs_returned.0.saturating_sub(b.docs_returned.0);
            }
            (e.exec_count > 0).then_some(e)
        })
        .collect()
}

/// How a reconstruction fills a placeholder.
struct Ctx<'a> {
    /// The sampled documents of the entry's collection (canonical
    /// extended JSON).
    docs: &'a [Value],
    /// Candidate values by (field path, placeholder), and whether they
    /// are the type's defaults.
    cache: HashMap<(String, String), (Vec<Value>, bool)>,
    /// The variant being built.
    k: usize,
    /// A placeholder `custom` cannot run (`?regex`, …).
    unsupported: Option<String>,
    /// Fields drawn from the type's default range, and from the sample.
    defaulted: Vec<String>,
    sampled: Vec<String>,
    /// The `limit` a `"?number"` limit stands for.
    limit: i64,
    now_ms: i64,
}

/// The values at `path` in a canonical extended-JSON document, array
/// elements included.
fn values_at<'v>(doc: &'v Value, path: &str, out: &mut Vec<&'v Value>) {
    let mut cur = vec![doc];
    for part in path.split('.') {
        let mut next = Vec::new();
        for v in cur {
            match v {
                Value::Object(o) => {
                    if let Some(x) = o.get(part) {
                        next.push(x);
                    }
                }
                Value::Array(a) => {
                    for e in a {
                        if let Some(x) = e.as_object().and_then(|o| o.get(part)) {
                            next.push(x);
                        }
                    }
                }
                _ => {}
            }
        }
        cur = next;
    }
    for v in cur {
        match v {
            Value::Array(a) => out.extend(a.iter()),
            other => out.push(other),
        }
    }
}

/// Whether a sampled value's type is the placeholder's.
fn fits(o: &Obs, ty: &str) -> bool {
    matches!(
        (ty, o),
        ("?number", Obs::Int(_) | Obs::Double(_))
            | ("?string", Obs::Str(_))
            | ("?bool", Obs::Bool(_))
            | ("?date", Obs::Date(_))
            | ("?objectId", Obs::ObjectId)
            | ("?binData", Obs::Binary(_))
    )
}

impl Ctx<'_> {
    /// The type's default values (their range when nothing is sampled);
    /// `None`: a type `custom` cannot draw.
    fn defaults(&self, ty: &str) -> Option<Vec<Value>> {
        let day_ago = chrono::DateTime::from_timestamp_millis(self.now_ms - 86_400_000)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let now = chrono::DateTime::from_timestamp_millis(self.now_ms)
            .unwrap_or_default()
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        Some(match ty {
            "?number" => vec![json!(0), json!(1000)],
            "?string" => vec![json!("s".repeat(DEFAULT_STRING_LEN))],
            "?bool" => vec![json!(true), json!(false)],
            "?date" => vec![json!({ "$date": day_ago }), json!({ "$date": now })],
            "?objectId" => vec![json!({ "$oid": "000000000000000000000000" })],
            "?binData" => vec![
                json!({ "$binary": { "base64": "AAAAAAAAAAAAAAAAAAAAAA==", "subType": "00" } }),
            ],
            _ => return None,
        })
    }

    /// The candidates for `ty` at `path`: the sampled values of the
    /// field's most frequent type that fits, or the type's defaults.
    fn candidates(&mut self, path: &str, ty: &str) -> Option<(Vec<Value>, bool)> {
        let key = (path.to_owned(), ty.to_owned());
        if let Some(c) = self.cache.get(&key) {
            return Some(c.clone());
        }
        let mut seen = Vec::new();
        for d in self.docs {
            values_at(d, path, &mut seen);
        }
        let mut by_type: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for v in seen {
            if let Some(o) = shape::scalar_obs(v).filter(|o| fits(o, ty)) {
                by_type.entry(o.type_name()).or_default().push(v.clone());
            }
        }
        let best = by_type
            .into_values()
            .max_by_key(|vs| vs.len())
            .filter(|vs| !vs.is_empty());
        let c = match best {
            Some(vs) => (vs, false),
            None => (self.defaults(ty)?, true),
        };
        self.cache.insert(key, c.clone());
        Some(c)
    }

    /// The value of placeholder `ty` at `path` in this variant.
    fn value(&mut self, path: &str, ty: &str) -> Value {
        if let Some(inner) = ty.strip_prefix("?array<").and_then(|t| t.strip_suffix('>')) {
            if inner.is_empty() {
                return json!([]);
            }
            if inner == "?mixed" {
                self.unsupported = Some("arrays of mixed types".into());
                return Value::Null;
            }
            // $queryStats keeps no array length: 1 to ARRAY_MAX elements.
            let n = 1 + self.k % ARRAY_MAX;
            let k = self.k;
            let items = (0..n)
                .map(|i| {
                    self.k = k * ARRAY_MAX + i;
                    self.value(path, inner)
                })
                .collect();
            self.k = k;
            return Value::Array(items);
        }
        match self.candidates(path, ty) {
            Some((vs, defaulted)) => {
                let list = if defaulted {
                    &mut self.defaulted
                } else {
                    &mut self.sampled
                };
                if !list.iter().any(|p| p == path) {
                    list.push(path.to_owned());
                }
                vs[self.k % vs.len()].clone()
            }
            None => {
                self.unsupported = Some(format!("{} values", &ty[1..]));
                Value::Null
            }
        }
    }

    /// A query filter with each placeholder filled; `field` is the field
    /// the value belongs to.
    fn filter(&mut self, v: &Value, field: Option<&str>) -> Value {
        match v {
            Value::String(s) if is_placeholder(s) => self.value(field.unwrap_or(""), s),
            Value::Object(o) => {
                let mut out = Map::new();
                for (k, x) in o {
                    let filled = if matches!(k.as_str(), "$and" | "$or" | "$nor") {
                        self.filter(x, None)
                    } else if k == "$expr" {
                        self.expr(x)
                    } else if k.starts_with('$') {
                        self.filter(x, field)
                    } else {
                        let path = match field {
                            Some(f) => format!("{f}.{k}"),
                            None => k.clone(),
                        };
                        self.filter(x, Some(&path))
                    };
                    out.insert(k.clone(), filled);
                }
                Value::Object(out)
            }
            Value::Array(a) => Value::Array(a.iter().map(|x| self.filter(x, field)).collect()),
            other => other.clone(),
        }
    }

    /// An aggregation expression: its constants keep only their type, so
    /// a constant of that type stands in (numbers are structure there:
    /// accumulators, flags).
    fn expr(&mut self, v: &Value) -> Value {
        match v {
            Value::String(s) if is_placeholder(s) => match s.as_str() {
                "?number" => json!(1),
                "?bool" => json!(true),
                "?null" => Value::Null,
                "?object" => json!({}),
                "?string" => json!("s"),
                other => {
                    self.unsupported = Some(format!("{} constants", &other[1..]));
                    Value::Null
                }
            },
            Value::Object(o) => {
                Value::Object(o.iter().map(|(k, x)| (k.clone(), self.expr(x))).collect())
            }
            Value::Array(a) => Value::Array(a.iter().map(|x| self.expr(x)).collect()),
            other => other.clone(),
        }
    }

    /// The command a query shape stands for, in this variant.
    fn command(&mut self, e: &Entry) -> Result<Value, Skip> {
        let s = &e.shape;
        let cmd_name = s.get("command").and_then(Value::as_str).unwrap_or("");
        let mut c = Map::new();
        c.insert(cmd_name.to_owned(), json!(e.coll));
        match cmd_name {
            "find" => {
                for (k, v) in s {
                    let filled = match k.as_str() {
                        "cmdNs" | "command" => continue,
                        "filter" => self.filter(v, None),
                        "limit" if v.as_str() == Some("?number") => json!(self.limit),
                        "skip" if v.as_str() == Some("?number") => json!(0),
                        _ => v.clone(),
                    };
                    c.insert(k.clone(), filled);
                }
            }
            "distinct" => {
                for (k, v) in s {
                    let filled = match k.as_str() {
                        "cmdNs" | "command" => continue,
                        "query" => self.filter(v, None),
                        _ => v.clone(),
                    };
                    c.insert(k.clone(), filled);
                }
            }
            "aggregate" => {
                let Some(Value::Array(stages)) = s.get("pipeline") else {
                    return Err(Skip::Unsupported("aggregate without a pipeline".into()));
                };
                let mut out = Vec::new();
                for st in stages {
                    let Some((name, body)) = st.as_object().and_then(|o| o.iter().next()) else {
                        out.push(st.clone());
                        continue;
                    };
                    let filled = match name.as_str() {
                        "$match" => self.filter(body, None),
                        "$limit" if body.as_str() == Some("?number") => json!(self.limit),
                        "$skip" if body.as_str() == Some("?number") => json!(0),
                        _ => self.expr(body),
                    };
                    out.push(json!({ name.clone(): filled }));
                }
                c.insert("pipeline".into(), Value::Array(out));
                for (k, v) in s {
                    if !matches!(k.as_str(), "cmdNs" | "command" | "pipeline") {
                        c.insert(k.clone(), v.clone());
                    }
                }
            }
            other => {
                return Err(Skip::Unsupported(format!(
                    "$queryStats entries of command {other:?}"
                )))
            }
        }
        match self.unsupported.take() {
            Some(why) => Err(Skip::Unsupported(why)),
            None => Ok(Value::Object(c)),
        }
    }
}

/// The length of a string drawn when no sampled document has the field.
pub(crate) const DEFAULT_STRING_LEN: usize = 12;
/// The longest array drawn for an `"?array<…>"` (its length is not kept).
pub(crate) const ARRAY_MAX: usize = 3;
/// Variants rebuilt per entry at most (the sampled documents drawn).
const MAX_VARIANTS: usize = 200;

fn is_placeholder(s: &str) -> bool {
    s.len() > 1 && s.starts_with('?') && s[1..].chars().next().is_some_and(char::is_alphabetic)
}

/// The entries as a [`Capture`]: each entry's shape rebuilt from the
/// sampled documents of its collection (`samples`, canonical extended
/// JSON by `(db, collection)`), counted `execCount` times. `window`: the
/// span of two readings (ms), every shape's rate over it; otherwise each
/// shape's rate is its count over its own first to latest execution, and
/// a collection's the sum of its shapes'.
pub(crate) fn to_capture(
    entries: &[Entry],
    samples: &BTreeMap<(String, String), Vec<Value>>,
    window: Option<(i64, i64)>,
    own_app: &str,
    now_ms: i64,
) -> Capture {
    let mut c = Capture::new(own_app);
    c.from_query_stats = true;
    let empty = Vec::new();
    // (database, collection, count, first, latest) of each captured entry.
    let mut windows: Vec<(String, String, u64, i64, i64)> = Vec::new();
    for e in entries {
        c.entries += 1;
        if e.exec_count == 0 {
            continue;
        }
        let docs = samples
            .get(&(e.db.clone(), e.coll.clone()))
            .unwrap_or(&empty);
        let mut ctx = Ctx {
            docs,
            cache: HashMap::new(),
            k: 0,
            unsupported: None,
            defaulted: Vec::new(),
            sampled: Vec::new(),
            limit: e.docs_returned.1.max(1) as i64,
            now_ms,
        };
        match group(e, &mut ctx, own_app, now_ms) {
            Ok(g) => {
                if window.is_none() {
                    c.first_ms = Some(
                        c.first_ms
                            .map_or(e.first_seen_ms, |f| f.min(e.first_seen_ms)),
                    );
                    c.last_ms = Some(
                        c.last_ms
                            .map_or(e.latest_seen_ms, |l| l.max(e.latest_seen_ms)),
                    );
                }
                c.statements += g.count;
                windows.push((
                    g.stmt.db.clone(),
                    g.stmt.coll.clone(),
                    e.exec_count,
                    e.first_seen_ms,
                    e.latest_seen_ms,
                ));
                merge(&mut c, g);
            }
            Err(skip) => *c.skipped.entry(skip).or_default() += e.exec_count,
        }
    }
    if let Some((from, to)) = window {
        c.first_ms = Some(from);
        c.last_ms = Some(to);
    } else if let Some(span) = c.span_secs() {
        // Read once, each shape ran over its own window: a query run once
        // at midnight must not dilute the rate of the day's steady load.
        // A shape seen once (or within a second) counts over the whole span.
        for (db, coll, n, first, latest) in windows {
            let own = (latest - first) as f64 / 1000.0;
            let rate = if n >= 2 && own >= 1.0 {
                n as f64 / own
            } else {
                n as f64 / span
            };
            *c.coll_rates.entry((db, coll)).or_default() += rate;
        }
    }
    c
}

/// Adds a group to the capture, merged with one of the same shape (the
/// same shape from another client or with other options).
fn merge(c: &mut Capture, g: Group) {
    let key = g.stmt.key();
    match c.index.get(&key) {
        Some(&i) => {
            let into = &mut c.groups[i];
            into.count += g.count;
            into.nreturned.0 += g.nreturned.0;
            into.nreturned.1 += g.nreturned.1;
            for (l, n) in g.limits {
                *into.limits.entry(l).or_default() += n;
            }
            if let (Some(a), Some(b)) = (&mut into.exec, g.exec) {
                a.count += b.count;
                a.sum_micros += b.sum_micros;
                a.min_micros = a.min_micros.min(b.min_micros);
                a.max_micros = a.max_micros.max(b.max_micros);
            }
        }
        None => {
            c.groups.push(g);
            c.index.insert(key, c.groups.len() - 1);
        }
    }
}

/// One entry's group: its shape rebuilt once per sampled value (so each
/// slot sees the field's range), counted `execCount` times.
fn group(e: &Entry, ctx: &mut Ctx, own_app: &str, now_ms: i64) -> Result<Group, Skip> {
    let mut g: Option<Group> = None;
    let mut variants = 1;
    let mut k = 0;
    while k < variants {
        ctx.k = k;
        let command = ctx.command(e)?;
        if k == 0 {
            variants = ctx
                .cache
                .values()
                .filter(|(_, d)| !d)
                .map(|(v, _)| v.len())
                .chain([2])
                .max()
                .unwrap_or(2)
                .min(MAX_VARIANTS);
        }
        let q = SlowQuery {
            t_ms: Some(now_ms),
            ns: format!("{}.{}", e.db, e.coll),
            app_name: e.app_name.clone(),
            kind: "command".into(),
            command,
            duration_ms: 0.0,
            nreturned: None,
            plan_summary: None,
        };
        let stmt = shape::statements(&q, own_app)?
            .into_iter()
            .next()
            .ok_or_else(|| Skip::Unsupported("an empty statement".into()))?;
        match &mut g {
            None => {
                g = Some(Group {
                    slots: stmt.obs.iter().map(|o| SlotStats::new(o, now_ms)).collect(),
                    literals: vec![Vec::new(); stmt.obs.len()],
                    count: e.exec_count,
                    durations_ms: Vec::new(),
                    nreturned: (e.docs_returned.0, e.exec_count),
                    plans: BTreeMap::new(),
                    limits: stmt.limit.map(|l| (l, e.exec_count)).into_iter().collect(),
                    doc_sizes: Vec::new(),
                    exec: Some(ExecStats {
                        count: e.exec_count,
                        sum_micros: e.exec_micros.0,
                        min_micros: e.exec_micros.1,
                        max_micros: e.exec_micros.2,
                    }),
                    notes: Vec::new(),
                    stmt,
                });
            }
            // A variant of another shape (a sampled value of another type
            // where the first had none) is not counted.
            Some(g) if g.stmt.key() == stmt.key() => {
                for (st, o) in g.slots.iter_mut().zip(&stmt.obs) {
                    st.add(o, now_ms);
                }
            }
            Some(_) => {}
        }
        k += 1;
    }
    let mut g = g.ok_or_else(|| Skip::Unsupported("an empty statement".into()))?;
    if !ctx.sampled.is_empty() {
        g.notes.push(format!(
            "$queryStats keeps types, not values: {} drawn like the values of the collection's sampled documents",
            ctx.sampled.join(", ")
        ));
    }
    if !ctx.defaulted.is_empty() {
        g.notes.push(format!(
            "no sampled document has {}: drawn from the type's default range (numbers 0–1000, strings of {DEFAULT_STRING_LEN}, dates within a day)",
            ctx.defaulted.join(", ")
        ));
    }
    if g.stmt.limit.is_some()
        || e.shape
            .get("pipeline")
            .is_some_and(|p| p.to_string().contains("\"$limit\":\"?number\""))
    {
        g.notes.push(format!(
            "limit: $queryStats keeps only its type; {} is the most documents one execution returned",
            ctx.limit
        ));
    }
    Ok(g)
}

/// Why `$queryStats` could not be read, for the user.
pub(crate) fn explain_error(code: Option<i32>, message: &str) -> String {
    match code {
        Some(40324) => format!(
            "this server has no $queryStats (MongoDB 7.1+/8.0; it answered code 40324, {message:?}): capture from the profiler (--profile DB) or the log (--log FILE) instead"
        ),
        Some(13) => format!(
            "reading $queryStats needs the queryStatsRead privilege (the clusterMonitor role grants it; the server answered code 13 Unauthorized, {message:?})"
        ),
        Some(c) => format!("reading $queryStats: code {c}: {message}"),
        None => format!("reading $queryStats: {message}"),
    }
}

/// Reads every `$queryStats` entry (`aggregate: 1` on `admin`).
pub(crate) async fn read(client: &Client) -> Result<Vec<Entry>, String> {
    let fail = |e: mongodb::error::Error| {
        let code = match e.kind.as_ref() {
            mongodb::error::ErrorKind::Command(c) => Some(c.code),
            _ => None,
        };
        let message = match e.kind.as_ref() {
            mongodb::error::ErrorKind::Command(c) => c.message.clone(),
            _ => e.to_string(),
        };
        explain_error(code, &message)
    };
    let docs: Vec<Document> = client
        .database("admin")
        .aggregate([doc! { "$queryStats": {} }])
        .await
        .map_err(fail)?
        .try_collect()
        .await
        .map_err(fail)?;
    docs.iter().map(parse).collect()
}
