//! `mongoload capture`: a `custom` workload config drawn from what a
//! deployment recorded about its own traffic. This slice reads mongod's
//! structured JSON log offline ([`log`]); each logged statement is
//! normalized into a shape ([`shape`]), shapes are counted with the
//! values seen in each slot ([`Capture`]), and [`render`] writes one
//! `custom` workload per collection: weights from the counts, a rate from
//! the observed throughput times `--scale`, generators drawn from the
//! observed values' type and range (never the values themselves unless
//! `--keep-literals`), a comment per operation.

pub mod log;
pub mod profile;
pub(crate) mod query_stats;
pub(crate) mod render;
pub(crate) mod sampled;
pub(crate) mod shape;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use serde_json::Value;

use log::{Line, SlowQuery};
use shape::{Obs, Skip, Stmt};

/// `mongoload capture`'s command line.
#[derive(Debug, Args)]
pub struct CaptureArgs {
    /// mongod's structured JSON log (4.4+); "Slow query" entries are read
    /// (set slowms = 0 for a window to log every operation).
    #[arg(long, value_name = "FILE", required_unless_present_any = ["profile", "query_stats"])]
    pub log: Option<PathBuf>,
    /// Read the profiler's system.profile of these databases instead
    /// (comma-separated; needs --uri or --config and the `read` role).
    #[arg(long, value_name = "DB", value_delimiter = ',', conflicts_with = "log")]
    pub profile: Vec<String>,
    /// Read the server's $queryStats instead (MongoDB 7.1+/8.0; needs
    /// --uri or --config and the queryStatsRead privilege): find,
    /// aggregate and distinct shapes with their counts, no writes.
    #[arg(long, conflicts_with_all = ["log", "profile"])]
    pub query_stats: bool,
    /// Read $queryStats twice this long apart and capture what ran
    /// between (the default: everything since the server started, at the
    /// rate between each shape's first and latest execution).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "query_stats")]
    pub query_stats_for: Option<std::time::Duration>,
    /// The deployment to read the profiler or $queryStats of, or, with
    /// --log, to draw the collections' documents ($sample) and indexes
    /// from (the password never shown).
    #[arg(
        long,
        env = "MONGOLOAD_URI",
        hide_env_values = true,
        conflicts_with = "config"
    )]
    pub uri: Option<String>,
    /// Take the deployment from this config's [target].
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Entries at or after this: an RFC 3339 time or a duration ago (15m).
    #[arg(long, requires = "profile")]
    pub since: Option<String>,
    /// Entries before this: an RFC 3339 time or a duration ago.
    #[arg(long, requires = "profile")]
    pub until: Option<String>,
    /// Only the newest N entries of each database (of the window).
    #[arg(long, value_name = "N", requires = "profile")]
    pub last: Option<u64>,
    /// Profile every operation (level 2, which needs dbAdmin) for this long
    /// first, then put each database's level back and read that window.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, requires = "profile")]
    pub profile_for: Option<std::time::Duration>,
    /// Write the config here instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Multiply the observed throughput by this for each workload's rate.
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// The database to capture (default: the one with the most operations).
    #[arg(long)]
    pub database: Option<String>,
    /// Use the observed values (choice of them) instead of synthesized ones.
    #[arg(long)]
    pub keep_literals: bool,
    /// Skip entries whose appName starts with this (mongoload's own traffic).
    #[arg(long, default_value = "mongoload")]
    pub own_app_name: String,
    /// How long the generated stage runs.
    #[arg(long, default_value = "1h")]
    pub duration: String,
    /// Documents each generated workload loads before running.
    #[arg(long, default_value_t = 1000)]
    pub initial_docs: u64,
}

/// The values seen in one slot of a shape.
#[derive(Debug, Clone, PartialEq)]
pub enum SlotStats {
    Int {
        min: i64,
        max: i64,
    },
    Double {
        min: f64,
        max: f64,
    },
    Str {
        min_len: usize,
        max_len: usize,
        sum_len: usize,
        n: u64,
    },
    Bool {
        seen_true: bool,
        seen_false: bool,
    },
    /// Ages (ms before the entry's time; negative: after it).
    Date {
        min_age: i64,
        max_age: i64,
    },
    ObjectId,
    Binary {
        min_len: usize,
        max_len: usize,
        sum_len: usize,
        n: u64,
    },
    Array {
        min_len: usize,
        max_len: usize,
        of: Option<Box<SlotStats>>,
    },
}

/// Distinct values kept per slot for `--keep-literals`.
const KEEP_MAX: usize = 1000;

impl SlotStats {
    /// The stats of one value seen in an entry logged at `t` (ms).
    fn new(o: &Obs, t: i64) -> SlotStats {
        match o {
            Obs::Int(i) => SlotStats::Int { min: *i, max: *i },
            Obs::Double(d) => SlotStats::Double { min: *d, max: *d },
            Obs::Str(s) => {
                let l = s.chars().count();
                SlotStats::Str {
                    min_len: l,
                    max_len: l,
                    sum_len: l,
                    n: 1,
                }
            }
            Obs::Bool(b) => SlotStats::Bool {
                seen_true: *b,
                seen_false: !*b,
            },
            Obs::Date(ms) => SlotStats::Date {
                min_age: t - ms,
                max_age: t - ms,
            },
            Obs::ObjectId => SlotStats::ObjectId,
            Obs::Binary(l) => SlotStats::Binary {
                min_len: *l,
                max_len: *l,
                sum_len: *l,
                n: 1,
            },
            Obs::Array(a) => {
                let mut of: Option<Box<SlotStats>> = None;
                for e in a {
                    match &mut of {
                        Some(s) => s.add(e, t),
                        None => of = Some(Box::new(SlotStats::new(e, t))),
                    }
                }
                SlotStats::Array {
                    min_len: a.len(),
                    max_len: a.len(),
                    of,
                }
            }
        }
    }

    fn add(&mut self, o: &Obs, t: i64) {
        match (self, o) {
            (SlotStats::Int { min, max }, Obs::Int(i)) => {
                *min = (*min).min(*i);
                *max = (*max).max(*i);
            }
            (SlotStats::Double { min, max }, Obs::Double(d)) => {
                *min = min.min(*d);
                *max = max.max(*d);
            }
            (
                SlotStats::Str {
                    min_len,
                    max_len,
                    sum_len,
                    n,
                },
                Obs::Str(s),
            ) => {
                let l = s.chars().count();
                *min_len = (*min_len).min(l);
                *max_len = (*max_len).max(l);
                *sum_len += l;
                *n += 1;
            }
            (
                SlotStats::Bool {
                    seen_true,
                    seen_false,
                },
                Obs::Bool(b),
            ) => {
                *seen_true |= *b;
                *seen_false |= !*b;
            }
            (
                SlotStats::Binary {
                    min_len,
                    max_len,
                    sum_len,
                    n,
                },
                Obs::Binary(l),
            ) => {
                *min_len = (*min_len).min(*l);
                *max_len = (*max_len).max(*l);
                *sum_len += l;
                *n += 1;
            }
            (SlotStats::Date { min_age, max_age }, Obs::Date(ms)) => {
                *min_age = (*min_age).min(t - ms);
                *max_age = (*max_age).max(t - ms);
            }
            (
                SlotStats::Array {
                    min_len,
                    max_len,
                    of,
                },
                Obs::Array(a),
            ) => {
                *min_len = (*min_len).min(a.len());
                *max_len = (*max_len).max(a.len());
                for e in a {
                    match of {
                        Some(s) => s.add(e, t),
                        None => *of = Some(Box::new(SlotStats::new(e, t))),
                    }
                }
            }
            // A shape's key holds its slots' types: no other pair occurs.
            _ => {}
        }
    }
}

/// One query shape and what was seen of it.
#[derive(Debug, Clone)]
pub struct Group {
    /// The first statement of the shape (its skeleton and fixed parts).
    pub stmt: Stmt,
    pub count: u64,
    pub durations_ms: Vec<f64>,
    pub nreturned: (u64, u64),
    pub plans: BTreeMap<String, u64>,
    pub slots: Vec<SlotStats>,
    /// Observed values per slot (distinct, at most [`KEEP_MAX`]), for
    /// `--keep-literals`.
    pub literals: Vec<Vec<Value>>,
    pub limits: BTreeMap<i64, u64>,
    /// BSON sizes of documents inserts carried in the log.
    pub doc_sizes: Vec<usize>,
    /// The execution times a source reports only in sum (`$queryStats`);
    /// `durations_ms` is then empty.
    pub exec: Option<ExecStats>,
    /// What the operation's comment must say of how it was drawn.
    pub notes: Vec<String>,
}

/// Execution times in sum: `$queryStats`' `totalExecMicros`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExecStats {
    pub count: u64,
    pub sum_micros: f64,
    pub min_micros: i64,
    pub max_micros: i64,
}

/// What a log yielded: the shapes, what was skipped, the time span.
#[derive(Debug, Default)]
pub struct Capture {
    pub groups: Vec<Group>,
    index: HashMap<String, usize>,
    /// Entries (or statements) skipped, by reason.
    pub skipped: BTreeMap<Skip, u64>,
    /// Lines that are not logv2 entries: (line number, reason), the first few.
    pub bad: Vec<(usize, String)>,
    pub bad_total: u64,
    /// Entries read ("Slow query" lines, or `system.profile` documents).
    pub entries: u64,
    /// Statements counted into shapes.
    pub statements: u64,
    /// `update`/`delete` command envelopes by (database, collection, op).
    pub envelopes: BTreeMap<(String, String, String), u64>,
    pub first_ms: Option<i64>,
    pub last_ms: Option<i64>,
    /// Index key patterns by (database, collection), from `listIndexes`
    /// when connected (otherwise the plans seen name them).
    pub listed_indexes: BTreeMap<(String, String), Vec<Value>>,
    /// Documents `$sample` drew from each captured collection, by
    /// (database, collection), as canonical extended JSON: the document
    /// template's fields, types and ranges. Empty when not connected.
    pub sampled: BTreeMap<(String, String), Vec<Value>>,
    /// When the collections were sampled (ms): dates' ages are as of then.
    pub sampled_at_ms: i64,
    /// Why no collection was sampled (a log read with no deployment to
    /// connect to), said in the file.
    pub unsampled: Option<String>,
    /// Read from `system.profile` (not a log).
    pub from_profiler: bool,
    /// Read from `$queryStats` (not a log): no writes seen.
    pub from_query_stats: bool,
    /// Observed operations per second by (database, collection) where the
    /// source gives each shape its own window (`$queryStats` read once);
    /// otherwise a collection's count over the capture's span.
    pub coll_rates: BTreeMap<(String, String), f64>,
    own_app: String,
}

impl Capture {
    pub fn new(own_app: &str) -> Capture {
        Capture {
            own_app: own_app.to_owned(),
            ..Capture::default()
        }
    }

    /// Reads a whole log.
    pub fn read(text: &str, own_app: &str) -> Capture {
        let mut c = Capture::new(own_app);
        for (i, line) in text.lines().enumerate() {
            c.add_line(i + 1, line);
        }
        c
    }

    /// Reads a log line by line (a mongod log may be larger than memory);
    /// a line that is not UTF-8 is read lossily.
    pub fn read_from(r: impl std::io::BufRead, own_app: &str) -> std::io::Result<Capture> {
        let mut c = Capture::new(own_app);
        for (i, line) in r.split(b'\n').enumerate() {
            c.add_line(i + 1, &String::from_utf8_lossy(&line?));
        }
        Ok(c)
    }

    pub fn add_line(&mut self, lineno: usize, line: &str) {
        match log::parse_line(line) {
            Line::Slow(e) => self.add(&e),
            Line::Other => {}
            Line::Bad(why) => {
                self.bad_total += 1;
                if self.bad.len() < 5 {
                    self.bad.push((lineno, why));
                }
            }
        }
    }

    pub fn add(&mut self, e: &SlowQuery) {
        self.entries += 1;
        if let Some(t) = e.t_ms {
            self.first_ms = Some(self.first_ms.map_or(t, |f| f.min(t)));
            self.last_ms = Some(self.last_ms.map_or(t, |l| l.max(t)));
        }
        let stmts = match shape::statements(e, &self.own_app) {
            Ok(s) => s,
            Err(skip) => {
                if skip == Skip::WriteEnvelope {
                    if let Some((op, coll)) = e.command.as_object().and_then(|c| c.iter().next()) {
                        let db = e.ns.split('.').next().unwrap_or_default().to_owned();
                        let coll = coll.as_str().unwrap_or_default().to_owned();
                        *self.envelopes.entry((db, coll, op.clone())).or_default() += 1;
                    }
                }
                *self.skipped.entry(skip).or_default() += 1;
                return;
            }
        };
        // Dates are kept as ages: without the entry's time, as of the epoch.
        let t = e.t_ms.unwrap_or(0);
        for s in stmts {
            self.statements += 1;
            let key = s.key();
            let i = match self.index.get(&key) {
                Some(&i) => i,
                None => {
                    self.groups.push(Group {
                        slots: s.obs.iter().map(|o| SlotStats::new(o, t)).collect(),
                        literals: vec![Vec::new(); s.obs.len()],
                        stmt: s.clone(),
                        count: 0,
                        durations_ms: Vec::new(),
                        nreturned: (0, 0),
                        plans: BTreeMap::new(),
                        limits: BTreeMap::new(),
                        doc_sizes: Vec::new(),
                        exec: None,
                        notes: Vec::new(),
                    });
                    self.index.insert(key, self.groups.len() - 1);
                    self.groups.len() - 1
                }
            };
            let g = &mut self.groups[i];
            if g.count > 0 {
                for (st, o) in g.slots.iter_mut().zip(&s.obs) {
                    st.add(o, t);
                }
            }
            for (lits, o) in g.literals.iter_mut().zip(&s.obs) {
                if let Some(v) = literal(o) {
                    if lits.len() < KEEP_MAX && !lits.contains(&v) {
                        lits.push(v);
                    }
                }
            }
            g.count += 1;
            g.durations_ms.push(e.duration_ms);
            if let Some(n) = e.nreturned {
                g.nreturned.0 += n;
                g.nreturned.1 += 1;
            }
            if let Some(p) = &e.plan_summary {
                *g.plans.entry(p.clone()).or_default() += 1;
            }
            if let Some(l) = s.limit {
                *g.limits.entry(l).or_default() += 1;
            }
            for d in &s.documents {
                if let Some(n) = bson_size(d) {
                    g.doc_sizes.push(n);
                }
            }
        }
    }

    /// The observed span in seconds.
    pub fn span_secs(&self) -> Option<f64> {
        match (self.first_ms, self.last_ms) {
            (Some(f), Some(l)) if l > f => Some((l - f) as f64 / 1000.0),
            _ => None,
        }
    }
}

/// A literal `--keep-literals` can write back (TOML has no ObjectId,
/// date or binary literal: those always draw).
fn literal(o: &Obs) -> Option<Value> {
    match o {
        Obs::Int(i) => Some(Value::from(*i)),
        Obs::Double(d) => serde_json::Number::from_f64(*d).map(Value::Number),
        Obs::Str(s) => Some(Value::String(s.clone())),
        Obs::Bool(b) => Some(Value::Bool(*b)),
        Obs::Array(a) => a
            .iter()
            .map(literal)
            .collect::<Option<Vec<_>>>()
            .map(Value::Array),
        Obs::Date(_) | Obs::ObjectId | Obs::Binary(_) => None,
    }
}

/// The BSON size of an extended-JSON document.
fn bson_size(d: &Value) -> Option<usize> {
    let b = mongodb::bson::Bson::try_from(d.clone()).ok()?;
    let doc = b.as_document()?;
    let mut buf = Vec::new();
    doc.to_writer(&mut buf).ok()?;
    Some(buf.len())
}

/// Runs `mongoload capture`.
pub async fn run_cli(args: &CaptureArgs) -> ExitCode {
    let (capture, source) = match &args.log {
        Some(path) => {
            let read = std::fs::File::open(path)
                .and_then(|f| Capture::read_from(std::io::BufReader::new(f), &args.own_app_name));
            match read {
                Ok(mut c) => {
                    from_deployment(args, &mut c).await;
                    (c, path.display().to_string())
                }
                Err(e) => {
                    eprintln!("mongoload capture: {}: {e}", path.display());
                    return ExitCode::from(crate::exit::Exit::Usage.code());
                }
            }
        }
        None if args.query_stats => match from_query_stats(args).await {
            Ok(c) => c,
            Err((e, code)) => {
                eprintln!("mongoload capture: {e}");
                return ExitCode::from(code.code());
            }
        },
        None => match from_profiler(args).await {
            Ok(c) => c,
            Err((e, code)) => {
                eprintln!("mongoload capture: {e}");
                return ExitCode::from(code.code());
            }
        },
    };
    let opts = render::Options {
        source: source.clone(),
        scale: args.scale,
        keep_literals: args.keep_literals,
        database: args.database.clone(),
        duration: args.duration.clone(),
        initial_docs: args.initial_docs,
    };
    let out = match render::render(&capture, &opts) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("mongoload capture: {source}: {e}");
            return ExitCode::from(crate::exit::Exit::Failure.code());
        }
    };
    eprint!("{}", out.summary);
    let written = match &args.out {
        Some(p) => std::fs::write(p, &out.config).map_err(|e| format!("{}: {e}", p.display())),
        None => {
            use std::io::Write;
            std::io::stdout()
                .write_all(out.config.as_bytes())
                .map_err(|e| format!("stdout: {e}"))
        }
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mongoload capture: cannot write {e}");
            ExitCode::FAILURE
        }
    }
}

/// Documents drawn per collection for the inserts' shapes and sizes.
const SAMPLE_DOCS: i64 = 200;

/// `--profile`: connects, optionally profiles a window, reads each
/// database's `system.profile`, draws the inserted collections' document
/// shapes (`$sample`) and lists their indexes.
async fn from_profiler(
    args: &CaptureArgs,
) -> Result<(Capture, String), (String, crate::exit::Exit)> {
    use crate::exit::Exit;
    let usage = |e: String| (e, Exit::Usage);
    let now = chrono::Utc::now().timestamp_millis();
    let mut window = profile::Window {
        since_ms: args
            .since
            .as_deref()
            .map(|s| profile::parse_time(s, now))
            .transpose()
            .map_err(|e| usage(format!("--since: {e}")))?,
        until_ms: args
            .until
            .as_deref()
            .map(|s| profile::parse_time(s, now))
            .transpose()
            .map_err(|e| usage(format!("--until: {e}")))?,
        last: args.last,
    };
    let failure = |e: String| (e, Exit::Failure);
    let client = connect(args, "--profile reads a deployment's profiler").await?;
    if let Some(d) = args.profile_for {
        let start = chrono::Utc::now().timestamp_millis();
        profile::profile_for(&client, &args.profile, d)
            .await
            .map_err(failure)?;
        window.since_ms = Some(window.since_ms.map_or(start, |s| s.max(start)));
    }
    let mut entries = Vec::new();
    for db in &args.profile {
        entries.extend(profile::read(&client, db, &window).await.map_err(failure)?);
    }
    // The profiler records inserts without their documents: their shapes
    // and sizes come from the collections themselves.
    let mut samples: BTreeMap<(String, String), (Vec<Value>, usize)> = BTreeMap::new();
    for e in &entries {
        if e.get_str("op") == Ok("insert") {
            if let Some((db, coll)) = e.get_str("ns").ok().and_then(|n| n.split_once('.')) {
                let key = (db.to_owned(), coll.to_owned());
                if let std::collections::btree_map::Entry::Vacant(v) = samples.entry(key) {
                    let docs = profile::sample(&client, db, coll, SAMPLE_DOCS).await;
                    v.insert((docs.unwrap_or_default(), 0));
                }
            }
        }
    }
    let mut capture = Capture::new(&args.own_app_name);
    capture.from_profiler = true;
    for e in &entries {
        let Some(mut q) = profile::to_slow_query(e) else {
            continue;
        };
        if e.get_str("op") == Ok("insert") {
            let n = e
                .get_i64("ninserted")
                .or(e.get_i32("ninserted").map(i64::from))
                .unwrap_or(1);
            if let Some((db, coll)) = q.ns.split_once('.') {
                if let Some((docs, next)) = samples.get_mut(&(db.to_owned(), coll.to_owned())) {
                    if !docs.is_empty() {
                        let mut drawn = Vec::new();
                        for _ in 0..n.clamp(1, 100) {
                            drawn.push(docs[*next % docs.len()].clone());
                            *next += 1;
                        }
                        if let Some(c) = q.command.as_object_mut() {
                            c.insert("documents".into(), Value::Array(drawn));
                        }
                    }
                }
            }
        }
        capture.add(&q);
    }
    capture.sampled = samples
        .into_iter()
        .map(|(k, (docs, _))| (k, docs))
        .collect();
    // A collection that cannot be sampled draws from the operations.
    let _ = sample_collections(&client, &mut capture).await;
    list_indexes(&client, &mut capture).await;
    let source = format!(
        "system.profile of {} ({} entries)",
        args.profile.join(", "),
        entries.len()
    );
    Ok((capture, source))
}

/// Connects to the deployment of `--uri` or `--config` (`what` says why
/// one is needed when neither is given).
async fn connect(
    args: &CaptureArgs,
    what: &str,
) -> Result<mongodb::Client, (String, crate::exit::Exit)> {
    let usage = |e: String| (e, crate::exit::Exit::Usage);
    let uri = match (&args.uri, &args.config) {
        (Some(u), _) => crate::config::SecretUri::new(u.clone()),
        (None, Some(path)) => crate::config::load(path)
            .and_then(|c| c.target.resolve_uri())
            .map_err(|e| usage(format!("{}: {e}", path.display())))?,
        (None, None) => {
            return Err(usage(format!(
                "{what}: give --uri (or MONGOLOAD_URI) or --config"
            )))
        }
    };
    crate::mongo::connect(
        uri.expose(),
        "mongoload-capture",
        2,
        crate::mongo::Timeouts {
            connect: std::time::Duration::from_secs(10),
            server_selection: std::time::Duration::from_secs(10),
        },
        crate::mongo::Handlers::default(),
    )
    .await
    .map_err(|e| usage(format!("--uri {}: {e}", uri.redacted())))
}

/// `--query-stats`: connects, reads `$queryStats` (twice, `--query-stats-for`
/// apart, when given), draws each captured collection's documents
/// (`$sample`) for the literals' types and ranges and lists its indexes.
async fn from_query_stats(
    args: &CaptureArgs,
) -> Result<(Capture, String), (String, crate::exit::Exit)> {
    use crate::exit::Exit;
    let failure = |e: String| (e, Exit::Failure);
    let client = connect(args, "--query-stats reads a deployment's $queryStats").await?;
    let (entries, window) = match args.query_stats_for {
        None => (query_stats::read(&client).await.map_err(failure)?, None),
        Some(d) => {
            let before = query_stats::read(&client).await.map_err(failure)?;
            let from = chrono::Utc::now().timestamp_millis();
            eprintln!(
                "mongoload capture: reading $queryStats again in {}",
                humantime::format_duration(d)
            );
            tokio::select! {
                _ = tokio::time::sleep(d) => {}
                _ = tokio::signal::ctrl_c() => eprintln!("mongoload capture: interrupted; reading $queryStats now"),
            }
            let after = query_stats::read(&client).await.map_err(failure)?;
            let to = chrono::Utc::now().timestamp_millis();
            (query_stats::deltas(&before, after), Some((from, to)))
        }
    };
    let read = entries.len();
    let mut samples = BTreeMap::new();
    for e in &entries {
        let own = e
            .app_name
            .as_deref()
            .is_some_and(|a| a.starts_with(&args.own_app_name));
        let key = (e.db.clone(), e.coll.clone());
        if own || shape_is_system(&e.db, &e.coll) || samples.contains_key(&key) {
            continue;
        }
        let docs = profile::sample(&client, &e.db, &e.coll, SAMPLE_DOCS).await;
        samples.insert(key, docs.unwrap_or_default());
    }
    let now = chrono::Utc::now().timestamp_millis();
    let mut capture = query_stats::to_capture(&entries, &samples, window, &args.own_app_name, now);
    capture.sampled = samples;
    capture.sampled_at_ms = now;
    list_indexes(&client, &mut capture).await;
    let source = match args.query_stats_for {
        Some(d) => format!(
            "$queryStats read twice {} apart ({read} shapes ran between)",
            humantime::format_duration(d)
        ),
        None => format!("$queryStats ({read} entries)"),
    };
    Ok((capture, source))
}

/// A log's capture with `--uri` or `--config`: the collections' documents
/// (`$sample`) and indexes from the deployment, as the profiler's and
/// `$queryStats`' captures have them. Without either, or when the
/// deployment cannot be reached, the document template is drawn from the
/// operations' values and the file says why.
async fn from_deployment(args: &CaptureArgs, capture: &mut Capture) {
    if args.uri.is_none() && args.config.is_none() {
        capture.unsampled =
            Some("no --uri or --config was given to draw the collection's documents from".into());
        return;
    }
    let client = match connect(args, "--log with a deployment").await {
        Ok(c) => c,
        Err((e, _)) => {
            eprintln!("mongoload capture: {e}; the documents are drawn from the operations");
            capture.unsampled = Some(format!("the deployment could not be reached ({e})"));
            return;
        }
    };
    if let Err(e) = sample_collections(&client, capture).await {
        eprintln!("mongoload capture: {e}; the documents are drawn from the operations");
        capture.unsampled = Some(e);
        return;
    }
    list_indexes(&client, capture).await;
}

/// The collections the capture's shapes touch (not system ones).
fn collections(capture: &Capture) -> std::collections::BTreeSet<(String, String)> {
    capture
        .groups
        .iter()
        .filter(|g| !shape_is_system(&g.stmt.db, &g.stmt.coll))
        .map(|g| (g.stmt.db.clone(), g.stmt.coll.clone()))
        .collect()
}

/// Draws documents (`$sample`, which `read` allows) of every captured
/// collection not sampled yet, for the document template; stops at the
/// first collection that cannot be read.
async fn sample_collections(client: &mongodb::Client, capture: &mut Capture) -> Result<(), String> {
    capture.sampled_at_ms = chrono::Utc::now().timestamp_millis();
    for key in collections(capture) {
        if let std::collections::btree_map::Entry::Vacant(v) = capture.sampled.entry(key) {
            let (db, coll) = v.key();
            let docs = profile::sample(client, db, coll, SAMPLE_DOCS).await?;
            v.insert(docs);
        }
    }
    Ok(())
}

/// The indexes of every collection the capture's shapes touch
/// (`listIndexes`, which `read` allows), for the config's `indexes`.
async fn list_indexes(client: &mongodb::Client, capture: &mut Capture) {
    for (db, coll) in collections(capture) {
        let keys = profile::list_indexes(client, &db, &coll).await;
        capture.listed_indexes.insert((db, coll), keys);
    }
}

fn shape_is_system(db: &str, coll: &str) -> bool {
    matches!(db, "admin" | "config" | "local") || coll.starts_with("system.")
}
