//! Kind `custom`: operations declared in the config — insert, find,
//! update, delete, aggregate, count, distinct — with weights, and filter,
//! update, document and pipeline templates whose values may be generators.
//!
//! A template is any TOML value. A table with the key `"$gen"` is a
//! generator instead of a literal:
//!
//! | `$gen` | keys | value |
//! |---|---|---|
//! | `uniform`, `zipfian`, `latest`, `sequential` | `min` (0), `max` | an integer in `[min, max)`; without `max` an existing document's sequence number (`_id`) |
//! | `double` | `min` (0), `max` (1) | a float in `[min, max)` |
//! | `string` | `length` | random ASCII of that length |
//! | `date` | `from`, `to` (RFC 3339) | uniform between them; without them the current time |
//! | `array` | `of`, `min` (0), `max` | an array of `min..=max` values of template `of` |
//! | `choice` | `values` | one of the values, uniformly |
//!
//! In a document template `sequential` is `min +` the document's sequence
//! number, so loaded and inserted documents count on from each other;
//! elsewhere it walks the existing documents in order. Every document gets
//! `_id` = its sequence number (loads resume by it), and with `doc_size` a
//! `pad` string that brings it to that BSON size.

use std::sync::Arc;

use mongodb::bson::{Bson, DateTime, Document};
use rand::rngs::SmallRng;
use rand::Rng;
use serde_json::Value;

use super::gen::{document_rng, worker_rng, KeyDist, KeyGen, PadPool};
use super::{
    bounded_insert, bson_len, evict_one, Action, Op, OpSource, OpSpec, PrepareStep, WeightedPick,
    Workload,
};
use crate::cluster::Keys;
use crate::config::{CustomConfig, CustomOpKind};

const COLL: usize = 0;

/// Bytes a `pad` string field adds beyond its characters: type byte,
/// `"pad\0"`, length prefix and the string's NUL.
const PAD_OVERHEAD: usize = 10;

/// A template or operation that cannot be compiled: the dotted key
/// (relative to `[workloads.custom]`) and why.
#[derive(Debug, Clone, PartialEq)]
pub struct TemplateError {
    /// Where, e.g. `operations[1].filter.customer`.
    pub key: String,
    /// What is wrong.
    pub reason: String,
}

fn err<T>(key: &str, reason: impl Into<String>) -> Result<T, TemplateError> {
    Err(TemplateError {
        key: key.to_string(),
        reason: reason.into(),
    })
}

/// A compiled template: literals pre-built, generators ready to draw.
#[derive(Debug, Clone)]
pub enum Template {
    /// A value without generators.
    Lit(Bson),
    /// A document some of whose values draw.
    Doc(Vec<(String, Template)>),
    /// An array some of whose values draw.
    Arr(Vec<Template>),
    /// A generator.
    Gen(Box<Gen>),
}

/// A generator of one value.
#[derive(Debug, Clone)]
pub enum Gen {
    /// An integer `min + key` where the key follows a distribution over
    /// `span` values, or over the existing documents when `span` is None.
    Int {
        dist: KeyDist,
        min: i64,
        span: Option<u64>,
        keys: KeyGen,
    },
    /// A float uniform in `[min, max)`.
    Double { min: f64, max: f64 },
    /// Random ASCII.
    Str { len: usize },
    /// A date uniform in `[from, to)` (ms), or now.
    Date { range: Option<(i64, i64)> },
    /// An array of `min..=max` values.
    Array {
        of: Template,
        min: usize,
        max: usize,
    },
    /// One of these values.
    Choice(Vec<Bson>),
}

/// What a template draws from besides the worker's RNG.
pub struct Ctx<'a> {
    /// The worker's RNG.
    pub rng: &'a mut SmallRng,
    /// Random ASCII to cut strings from.
    pub pad: &'a PadPool,
    /// Documents inserted so far (the next sequence number).
    pub docs: u64,
    /// The oldest sequence number still present: above 0 when `max_docs`
    /// evicts the oldest documents.
    pub first: u64,
    /// The sequence number of the document being made, if any.
    pub seq: Option<u64>,
}

fn json_to_bson(v: &Value) -> Bson {
    match v {
        Value::Null => Bson::Null,
        Value::Bool(b) => Bson::Boolean(*b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Bson::Int64(i),
            None => Bson::Double(n.as_f64().unwrap_or(0.0)),
        },
        Value::String(s) => Bson::String(s.clone()),
        Value::Array(a) => Bson::Array(a.iter().map(json_to_bson).collect()),
        Value::Object(o) => Bson::Document(
            o.iter()
                .map(|(k, v)| (k.clone(), json_to_bson(v)))
                .collect(),
        ),
    }
}

fn int_of(
    g: &serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<i64>, TemplateError> {
    typed_of(g, key, at, "an integer", Value::as_i64)
}

fn float_of(
    g: &serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<f64>, TemplateError> {
    typed_of(g, key, at, "a number", Value::as_f64)
}

/// `g[key]` converted by `as_t`, `None` when absent, an error naming
/// `at.key` and `what` was expected when present but of another type.
fn typed_of<T>(
    g: &serde_json::Map<String, Value>,
    key: &str,
    at: &str,
    what: &str,
    as_t: impl Fn(&Value) -> Option<T>,
) -> Result<Option<T>, TemplateError> {
    match g.get(key) {
        None => Ok(None),
        Some(v) => as_t(v).map(Some).ok_or_else(|| TemplateError {
            key: format!("{at}.{key}"),
            reason: format!("expected {what}, got {v}"),
        }),
    }
}

fn date_of(
    g: &serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<i64>, TemplateError> {
    match g.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => DateTime::parse_rfc3339_str(s)
            .map(|d| Some(d.timestamp_millis()))
            .map_err(|e| TemplateError {
                key: format!("{at}.{key}"),
                reason: format!("not an RFC 3339 date such as \"2024-01-01T00:00:00Z\": {e}"),
            }),
        Some(v) => err(
            &format!("{at}.{key}"),
            format!("expected an RFC 3339 date string, got {v}"),
        ),
    }
}

impl Template {
    /// Compiles a TOML/JSON value; `at` names it in errors.
    pub fn compile(v: &Value, at: &str) -> Result<Template, TemplateError> {
        let t = match v {
            Value::Object(o) if o.contains_key("$gen") => {
                Template::Gen(Box::new(Gen::compile(o, at)?))
            }
            Value::Object(o) => {
                let mut fields = Vec::with_capacity(o.len());
                for (k, v) in o {
                    fields.push((k.clone(), Template::compile(v, &format!("{at}.{k}"))?));
                }
                if fields.iter().all(|(_, t)| matches!(t, Template::Lit(_))) {
                    return Ok(Template::Lit(json_to_bson(v)));
                }
                Template::Doc(fields)
            }
            Value::Array(a) => {
                let items = a
                    .iter()
                    .enumerate()
                    .map(|(i, v)| Template::compile(v, &format!("{at}[{i}]")))
                    .collect::<Result<Vec<_>, _>>()?;
                if items.iter().all(|t| matches!(t, Template::Lit(_))) {
                    return Ok(Template::Lit(json_to_bson(v)));
                }
                Template::Arr(items)
            }
            other => Template::Lit(json_to_bson(other)),
        };
        Ok(t)
    }

    /// Compiles a template that must make a document.
    pub fn compile_doc(v: &Value, at: &str) -> Result<Template, TemplateError> {
        if !v.is_object() || v.get("$gen").is_some() {
            return err(at, format!("expected a table (a document), got {v}"));
        }
        Template::compile(v, at)
    }

    /// Draws one value.
    pub fn eval(&mut self, ctx: &mut Ctx<'_>) -> Bson {
        match self {
            Template::Lit(b) => b.clone(),
            Template::Doc(fields) => Bson::Document(
                fields
                    .iter_mut()
                    .map(|(k, t)| (k.clone(), t.eval(ctx)))
                    .collect(),
            ),
            Template::Arr(items) => Bson::Array(items.iter_mut().map(|t| t.eval(ctx)).collect()),
            Template::Gen(g) => g.eval(ctx),
        }
    }

    /// Draws a document (a template compiled by [`Template::compile_doc`]).
    pub fn eval_doc(&mut self, ctx: &mut Ctx<'_>) -> Document {
        match self.eval(ctx) {
            Bson::Document(d) => d,
            _ => Document::new(),
        }
    }
}

impl Gen {
    fn compile(g: &serde_json::Map<String, Value>, at: &str) -> Result<Gen, TemplateError> {
        let kind = match g.get("$gen") {
            Some(Value::String(s)) => s.as_str(),
            other => {
                return err(
                    &format!("{at}.$gen"),
                    format!("expected a generator name, got {other:?}"),
                )
            }
        };
        let allowed: &[&str] = match kind {
            "uniform" | "zipfian" | "latest" | "sequential" | "double" => &["min", "max"],
            "string" => &["length"],
            "date" => &["from", "to"],
            "array" => &["of", "min", "max"],
            "choice" => &["values"],
            _ => {
                return err(
                    &format!("{at}.$gen"),
                    format!("unknown generator {kind:?}; known: uniform, zipfian, latest, sequential, double, string, date, array, choice"),
                )
            }
        };
        if let Some(k) = g
            .keys()
            .find(|k| *k != "$gen" && !allowed.contains(&k.as_str()))
        {
            return err(
                &format!("{at}.{k}"),
                format!(
                    "unknown key for generator {kind:?}; it takes {}",
                    allowed.join(", ")
                ),
            );
        }
        let gen = match kind {
            "uniform" | "zipfian" | "latest" | "sequential" => {
                let min = int_of(g, "min", at)?.unwrap_or(0);
                let max = int_of(g, "max", at)?;
                let span = match max {
                    Some(max) if max <= min => {
                        return err(
                            &format!("{at}.max"),
                            format!("must be greater than min ({min}), got {max}"),
                        )
                    }
                    Some(max) => Some(max.abs_diff(min)),
                    None => None,
                };
                let dist = match kind {
                    "uniform" => KeyDist::Uniform,
                    "zipfian" => KeyDist::Zipfian,
                    "latest" => KeyDist::Latest,
                    _ => KeyDist::Sequential,
                };
                if span.is_some_and(|s| s > 100_000_000)
                    && matches!(dist, KeyDist::Zipfian | KeyDist::Latest)
                {
                    return err(&format!("{at}.max"), "a zipfian or latest range is limited to 100 000 000 values (its table is computed at start)");
                }
                Gen::Int {
                    dist,
                    min,
                    span,
                    keys: KeyGen::new(dist, span.unwrap_or(1)),
                }
            }
            "double" => {
                let min = float_of(g, "min", at)?.unwrap_or(0.0);
                let max = float_of(g, "max", at)?.unwrap_or(1.0);
                if !(max > min && min.is_finite() && max.is_finite()) {
                    return err(
                        &format!("{at}.max"),
                        format!("must be greater than min ({min}), got {max}"),
                    );
                }
                Gen::Double { min, max }
            }
            "string" => {
                let len = int_of(g, "length", at)?.ok_or_else(|| TemplateError {
                    key: format!("{at}.length"),
                    reason: "is required".into(),
                })?;
                if !(0..=16 << 20).contains(&len) {
                    return err(
                        &format!("{at}.length"),
                        format!("must be between 0 and 16MiB, got {len}"),
                    );
                }
                Gen::Str { len: len as usize }
            }
            "date" => {
                let from = date_of(g, "from", at)?;
                let to = date_of(g, "to", at)?;
                let range = match (from, to) {
                    (None, None) => None,
                    (Some(f), Some(t)) if t > f => Some((f, t)),
                    (Some(_), Some(_)) => return err(&format!("{at}.to"), "must be after from"),
                    _ => {
                        return err(
                            &format!("{at}.from"),
                            "give both from and to, or neither (the current time)",
                        )
                    }
                };
                Gen::Date { range }
            }
            "array" => {
                let of = g.get("of").ok_or_else(|| TemplateError {
                    key: format!("{at}.of"),
                    reason: "is required: the template of each element".into(),
                })?;
                let min = int_of(g, "min", at)?.unwrap_or(0);
                let max = int_of(g, "max", at)?.ok_or_else(|| TemplateError {
                    key: format!("{at}.max"),
                    reason: "is required: the most elements".into(),
                })?;
                if min < 0 || max < min || max > 100_000 {
                    return err(
                        &format!("{at}.max"),
                        format!("need 0 ≤ min ≤ max ≤ 100000, got min {min}, max {max}"),
                    );
                }
                Gen::Array {
                    of: Template::compile(of, &format!("{at}.of"))?,
                    min: min as usize,
                    max: max as usize,
                }
            }
            _ => match g.get("values") {
                Some(Value::Array(a)) if !a.is_empty() => {
                    Gen::Choice(a.iter().map(json_to_bson).collect())
                }
                _ => return err(&format!("{at}.values"), "must be a non-empty array"),
            },
        };
        Ok(gen)
    }

    fn eval(&mut self, ctx: &mut Ctx<'_>) -> Bson {
        match self {
            Gen::Int {
                dist,
                min,
                span,
                keys,
            } => {
                let key = match (*dist, ctx.seq) {
                    // In a document: the document's own number.
                    (KeyDist::Sequential, Some(seq)) => span.map_or(seq, |s| seq % s),
                    _ => match span {
                        Some(s) => keys.next_key(ctx.rng, *s),
                        None => {
                            let first = ctx.first.min(ctx.docs);
                            first + keys.next_key(ctx.rng, ctx.docs - first)
                        }
                    },
                };
                Bson::Int64(min.wrapping_add(key as i64))
            }
            Gen::Double { min, max } => Bson::Double(ctx.rng.random_range(*min..*max)),
            Gen::Str { len } => Bson::String(ctx.pad.pad(ctx.rng, *len)),
            Gen::Date { range } => Bson::DateTime(match range {
                Some((f, t)) => DateTime::from_millis(ctx.rng.random_range(*f..*t)),
                None => DateTime::now(),
            }),
            Gen::Array { of, min, max } => {
                let n = ctx.rng.random_range(*min..=*max);
                Bson::Array((0..n).map(|_| of.eval(ctx)).collect())
            }
            Gen::Choice(values) => values[ctx.rng.random_range(0..values.len())].clone(),
        }
    }
}

/// One compiled operation.
#[derive(Debug, Clone)]
enum CompiledOp {
    Insert(Template),
    Find {
        filter: Template,
        sort: Option<Document>,
        projection: Option<Document>,
        limit: i64,
    },
    Update {
        filter: Template,
        update: Template,
        many: bool,
    },
    Delete {
        filter: Template,
        many: bool,
    },
    Aggregate(Vec<Template>),
    Count(Template),
    Distinct {
        field: String,
        filter: Template,
    },
}

fn literal_doc(v: &Option<Value>, at: &str) -> Result<Option<Document>, TemplateError> {
    match v {
        None => Ok(None),
        Some(v @ Value::Object(_)) => match Template::compile(v, at)? {
            Template::Lit(Bson::Document(d)) => Ok(Some(d)),
            _ => err(at, "is fixed: it cannot draw values with \"$gen\""),
        },
        Some(v) => err(at, format!("expected a table, got {v}")),
    }
}

fn compile_op(
    cfg: &CustomConfig,
    i: usize,
    document: &Template,
) -> Result<CompiledOp, TemplateError> {
    let op = &cfg.operations[i];
    let at = |k: &str| format!("operations[{i}].{k}");
    let filter = match &op.filter {
        Some(f) => Template::compile_doc(f, &at("filter"))?,
        None => Template::Lit(Bson::Document(Document::new())),
    };
    let unused = |key: &str, present: bool| -> Result<(), TemplateError> {
        if present {
            return err(
                &at(key),
                format!("not used by a {} operation", op.op.as_str()),
            );
        }
        Ok(())
    };
    unused(
        "update",
        op.update.is_some() && op.op != CustomOpKind::Update,
    )?;
    unused(
        "pipeline",
        op.pipeline.is_some() && op.op != CustomOpKind::Aggregate,
    )?;
    unused(
        "document",
        op.document.is_some() && op.op != CustomOpKind::Insert,
    )?;
    unused(
        "field",
        op.field.is_some() && op.op != CustomOpKind::Distinct,
    )?;
    unused("sort", op.sort.is_some() && op.op != CustomOpKind::Find)?;
    unused(
        "projection",
        op.projection.is_some() && op.op != CustomOpKind::Find,
    )?;
    unused("limit", op.limit != 0 && op.op != CustomOpKind::Find)?;
    unused(
        "many",
        op.many && !matches!(op.op, CustomOpKind::Update | CustomOpKind::Delete),
    )?;
    unused(
        "filter",
        op.filter.is_some() && matches!(op.op, CustomOpKind::Insert | CustomOpKind::Aggregate),
    )?;
    Ok(match op.op {
        CustomOpKind::Insert => match &op.document {
            Some(d) => CompiledOp::Insert(document_template(d, &at("document"))?),
            None => CompiledOp::Insert(document.clone()),
        },
        CustomOpKind::Find => {
            if op.limit < 0 {
                return err(
                    &at("limit"),
                    format!("must be ≥ 0 (0: no limit), got {}", op.limit),
                );
            }
            CompiledOp::Find {
                filter,
                sort: literal_doc(&op.sort, &at("sort"))?,
                projection: literal_doc(&op.projection, &at("projection"))?,
                limit: op.limit,
            }
        }
        CustomOpKind::Update => {
            let Some(u) = &op.update else {
                return err(
                    &at("update"),
                    "is required: operators such as { \"$set\" = { … } }",
                );
            };
            let ok = u.as_object().is_some_and(|o| {
                !o.is_empty() && o.keys().all(|k| k.starts_with('$') && k != "$gen")
            });
            if !ok {
                return err(&at("update"), format!("must be a table of update operators such as {{ \"$set\" = {{ status = \"shipped\" }} }}, got {u}"));
            }
            CompiledOp::Update {
                filter,
                update: Template::compile_doc(u, &at("update"))?,
                many: op.many,
            }
        }
        CustomOpKind::Delete => CompiledOp::Delete {
            filter,
            many: op.many,
        },
        CustomOpKind::Aggregate => {
            let Some(p) = op.pipeline.as_ref().filter(|p| !p.is_empty()) else {
                return err(&at("pipeline"), "is required: a non-empty list of stages");
            };
            CompiledOp::Aggregate(
                p.iter()
                    .enumerate()
                    .map(|(j, s)| Template::compile_doc(s, &format!("{}[{j}]", at("pipeline"))))
                    .collect::<Result<_, _>>()?,
            )
        }
        CustomOpKind::Count => CompiledOp::Count(filter),
        CustomOpKind::Distinct => {
            let Some(field) = op.field.clone().filter(|f| !f.is_empty()) else {
                return err(
                    &at("field"),
                    "is required: the field whose distinct values to return",
                );
            };
            CompiledOp::Distinct { field, filter }
        }
    })
}

fn document_template(v: &Value, at: &str) -> Result<Template, TemplateError> {
    if v.get("_id").is_some() {
        return err(
            &format!("{at}._id"),
            "is set by mongoload: the document's sequence number",
        );
    }
    Template::compile_doc(v, at)
}

#[derive(Debug)]
struct Shared {
    pad: PadPool,
    doc_size: Option<usize>,
    max_docs: u64,
    /// Whether inserts evict the oldest documents (a bound and an insert).
    bounded: bool,
    next_id: Arc<Keys>,
    seed: u64,
}

impl Shared {
    /// The oldest sequence number still present when `docs` were inserted.
    fn first(&self, docs: u64) -> u64 {
        if self.bounded {
            docs.saturating_sub(self.max_docs)
        } else {
            0
        }
    }

    /// Document `seq` from `template`: `_id` first, then the template's
    /// fields, then padding up to the size target.
    fn document(&self, template: &mut Template, rng: &mut SmallRng, seq: u64) -> Document {
        let docs = self.next_id.bound();
        let mut ctx = Ctx {
            rng,
            pad: &self.pad,
            docs,
            first: self.first(docs),
            seq: Some(seq),
        };
        let body = template.eval_doc(&mut ctx);
        let mut d = Document::new();
        d.insert("_id", seq as i64);
        d.extend(body);
        if let Some(target) = self.doc_size {
            let len = bson_len(&d);
            if target >= len + PAD_OVERHEAD {
                d.insert("pad", self.pad.pad(ctx.rng, target - len - PAD_OVERHEAD));
            }
        }
        d
    }
}

/// The `custom` workload.
#[derive(Debug)]
pub struct Custom {
    shared: Arc<Shared>,
    collections: Vec<String>,
    specs: Vec<OpSpec>,
    ops: Vec<CompiledOp>,
    pick: WeightedPick,
    document: Template,
    indexes: Vec<(Document, bool, Option<String>)>,
    initial_docs: u64,
    load_batch: usize,
}

impl Custom {
    /// Compiles the operations and templates of a custom workload. With a
    /// bound, every insert evicts the oldest document as its second step
    /// (step label `evict`), under the insert's own `op` label.
    pub fn new(cfg: &CustomConfig, seed: u64) -> Result<Custom, TemplateError> {
        let (ops, document, indexes) = compile(cfg)?;
        let weights: Vec<f64> = cfg.operations.iter().map(|o| o.weight).collect();
        let Some(pick) = WeightedPick::new(&weights) else {
            return err("operations", "the operation weights sum to zero");
        };
        let bounded = cfg.max_docs > 0 && ops.iter().any(|o| matches!(o, CompiledOp::Insert(_)));
        let specs = cfg
            .operations
            .iter()
            .map(|o| match o.op {
                CustomOpKind::Insert => OpSpec::insert(o.label(), bounded),
                _ => OpSpec::single(o.label()),
            })
            .collect();
        Ok(Custom {
            shared: Arc::new(Shared {
                pad: PadPool::new(seed, PadPool::DEFAULT_SIZE),
                doc_size: cfg.doc_size.map(|s| s.bytes() as usize),
                max_docs: cfg.max_docs,
                bounded,
                next_id: Arc::new(Keys::new(cfg.initial_docs)),
                seed,
            }),
            collections: vec![cfg.collection.clone()],
            specs,
            ops,
            pick,
            document,
            indexes,
            initial_docs: cfg.initial_docs,
            load_batch: cfg.load_batch.max(1),
        })
    }

    /// Checks what [`Custom::new`] would build, without building it: for
    /// config validation.
    pub fn check(cfg: &CustomConfig) -> Result<(), TemplateError> {
        compile(cfg).map(|_| ())
    }
}

type Compiled = (
    Vec<CompiledOp>,
    Template,
    Vec<(Document, bool, Option<String>)>,
);

fn compile(cfg: &CustomConfig) -> Result<Compiled, TemplateError> {
    let document = document_template(&cfg.document, "document")?;
    let ops = (0..cfg.operations.len())
        .map(|i| compile_op(cfg, i, &document))
        .collect::<Result<Vec<_>, _>>()?;
    let mut indexes = Vec::new();
    for (i, ix) in cfg.indexes.iter().enumerate() {
        let keys = match json_to_bson(&ix.keys) {
            Bson::Document(d) if !d.is_empty() => d,
            _ => {
                return err(
                    &format!("indexes[{i}].keys"),
                    format!(
                        "must be a non-empty table such as {{ customer = 1 }}, got {}",
                        ix.keys
                    ),
                )
            }
        };
        indexes.push((keys, ix.unique, ix.name.clone()));
    }
    Ok((ops, document, indexes))
}

impl Workload for Custom {
    fn kind(&self) -> &'static str {
        "custom"
    }

    fn ops(&self) -> &[OpSpec] {
        &self.specs
    }

    fn collections(&self) -> &[String] {
        &self.collections
    }

    fn prepare(&self) -> Vec<PrepareStep> {
        let mut steps: Vec<PrepareStep> = self
            .indexes
            .iter()
            .map(|(keys, unique, name)| PrepareStep::CreateIndex {
                collection: COLL,
                keys: keys.clone(),
                unique: *unique,
                name: name.clone(),
            })
            .collect();
        let shared = Arc::clone(&self.shared);
        let template = self.document.clone();
        steps.push(PrepareStep::Load {
            collection: COLL,
            count: self.initial_docs,
            batch: self.load_batch,
            make: Arc::new(move |i| {
                // Generators keep state (a zipfian's table): a fresh clone
                // per document keeps document i a function of i alone.
                let mut t = template.clone();
                let mut rng = document_rng(shared.seed, i);
                shared.document(&mut t, &mut rng, i)
            }),
        });
        steps.push(PrepareStep::SeekKeys {
            collection: COLL,
            counter: Arc::clone(&self.shared.next_id),
        });
        steps
    }

    fn keys(&self) -> Vec<&Keys> {
        vec![&self.shared.next_id]
    }

    fn worker(&self, worker_id: u32, seed: u64) -> Box<dyn OpSource> {
        Box::new(Source {
            shared: Arc::clone(&self.shared),
            ops: self.ops.clone(),
            pick: self.pick.clone(),
            rng: worker_rng(seed, worker_id),
        })
    }
}

struct Source {
    shared: Arc<Shared>,
    ops: Vec<CompiledOp>,
    pick: WeightedPick,
    rng: SmallRng,
}

impl OpSource for Source {
    fn next_op(&mut self) -> Op {
        let op = self.pick.pick(&mut self.rng);
        let s = &*self.shared;
        let docs = s.next_id.bound();
        let rng = &mut self.rng;
        let mut ctx = Ctx {
            rng,
            pad: &s.pad,
            docs,
            first: s.first(docs),
            seq: None,
        };
        let action = match &mut self.ops[op] {
            CompiledOp::Insert(t) => {
                let id = s.next_id.next();
                let insert = Action::InsertOne {
                    collection: COLL,
                    doc: s.document(t, ctx.rng, id),
                };
                let evict = evict_one(&s.next_id, COLL, id, if s.bounded { s.max_docs } else { 0 });
                return bounded_insert(op, insert, evict);
            }
            CompiledOp::Find {
                filter,
                sort,
                projection,
                limit,
            } => Action::Find {
                collection: COLL,
                filter: filter.eval_doc(&mut ctx),
                sort: sort.clone(),
                limit: *limit,
                projection: projection.clone(),
            },
            CompiledOp::Update {
                filter,
                update,
                many,
            } => {
                let (filter, update) = (filter.eval_doc(&mut ctx), update.eval_doc(&mut ctx));
                if *many {
                    Action::UpdateMany {
                        collection: COLL,
                        filter,
                        update,
                    }
                } else {
                    Action::UpdateOne {
                        collection: COLL,
                        filter,
                        update,
                    }
                }
            }
            CompiledOp::Delete { filter, many } => {
                let filter = filter.eval_doc(&mut ctx);
                if *many {
                    Action::DeleteMany {
                        collection: COLL,
                        filter,
                    }
                } else {
                    Action::DeleteOne {
                        collection: COLL,
                        filter,
                    }
                }
            }
            CompiledOp::Aggregate(stages) => Action::Aggregate {
                collection: COLL,
                pipeline: stages.iter_mut().map(|t| t.eval_doc(&mut ctx)).collect(),
            },
            CompiledOp::Count(filter) => Action::Count {
                collection: COLL,
                filter: filter.eval_doc(&mut ctx),
            },
            CompiledOp::Distinct { field, filter } => Action::Distinct {
                collection: COLL,
                field: field.clone(),
                filter: filter.eval_doc(&mut ctx),
            },
        };
        Op::one(op, action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{ByteSize, CustomOp};
    use mongodb::bson::doc;
    use serde_json::json;

    fn op(kind: CustomOpKind) -> CustomOp {
        CustomOp {
            op: kind,
            name: None,
            weight: 1.0,
            filter: None,
            update: None,
            document: None,
            pipeline: None,
            field: None,
            sort: None,
            projection: None,
            limit: 0,
            many: false,
        }
    }

    fn ctx_eval(t: &mut Template, docs: u64, seq: Option<u64>, rng: &mut SmallRng) -> Bson {
        let pad = PadPool::new(1, 4096);
        t.eval(&mut Ctx {
            rng,
            pad: &pad,
            docs,
            first: 0,
            seq,
        })
    }

    #[test]
    fn generators_draw_in_their_ranges() {
        let mut rng = worker_rng(1, 0);
        let v = json!({
            "a": { "$gen": "uniform", "min": 10, "max": 20 },
            "b": { "$gen": "string", "length": 7 },
            "c": { "nested": { "$gen": "zipfian", "max": 1000 }, "lit": [1, 2] },
            "d": { "$gen": "array", "of": { "$gen": "choice", "values": ["x", "y"] }, "min": 1, "max": 3 },
            "e": { "$gen": "date", "from": "2024-01-01T00:00:00Z", "to": "2024-01-02T00:00:00Z" },
            "f": { "$gen": "double", "min": 1.5, "max": 2.5 },
            "g": 42,
        });
        let mut t = Template::compile_doc(&v, "document").unwrap();
        let from = DateTime::parse_rfc3339_str("2024-01-01T00:00:00Z").unwrap();
        for _ in 0..500 {
            let Bson::Document(d) = ctx_eval(&mut t, 5, None, &mut rng) else {
                panic!()
            };
            assert!((10..20).contains(&d.get_i64("a").unwrap()));
            assert_eq!(d.get_str("b").unwrap().len(), 7);
            let c = d.get_document("c").unwrap();
            assert!((0..1000).contains(&c.get_i64("nested").unwrap()));
            assert_eq!(c.get_array("lit").unwrap().len(), 2);
            let arr = d.get_array("d").unwrap();
            assert!((1..=3).contains(&arr.len()));
            assert!(arr
                .iter()
                .all(|x| x.as_str() == Some("x") || x.as_str() == Some("y")));
            let e = d.get_datetime("e").unwrap().timestamp_millis() - from.timestamp_millis();
            assert!((0..86_400_000).contains(&e));
            let f = d.get_f64("f").unwrap();
            assert!((1.5..2.5).contains(&f));
            assert_eq!(d.get_i64("g"), Ok(42));
        }
    }

    #[test]
    fn generators_spread_as_their_distribution_and_repeat_for_a_seed() {
        let v = json!({
            "u": { "$gen": "uniform", "max": 100 },
            "d": { "$gen": "double", "min": 0.0, "max": 10.0 },
            "z": { "$gen": "zipfian", "max": 1000 },
        });
        let mut t = Template::compile_doc(&v, "document").unwrap();
        let mut rng = worker_rng(5, 0);
        let (mut u_dec, mut d_dec, mut z_top) = ([0u32; 10], [0u32; 10], 0u32);
        let n = 50_000;
        for _ in 0..n {
            let Bson::Document(d) = ctx_eval(&mut t, 0, None, &mut rng) else {
                panic!()
            };
            u_dec[(d.get_i64("u").unwrap() / 10) as usize] += 1;
            d_dec[d.get_f64("d").unwrap() as usize] += 1;
            if d.get_i64("z").unwrap() < 10 {
                z_top += 1;
            }
        }
        // Uniform: each decile within 6 % of n/10.
        for c in u_dec.iter().chain(&d_dec) {
            assert!((4_700..=5_300).contains(c), "{u_dec:?} {d_dec:?}");
        }
        // Zipfian (theta 0.99) over 1000: the top 1 % take about 39 %.
        let share = z_top as f64 / n as f64;
        assert!((0.35..0.43).contains(&share), "zipfian top share {share}");
        // The same seed draws the same documents.
        let draw = |seed| {
            let mut t = Template::compile_doc(&v, "document").unwrap();
            let mut rng = worker_rng(seed, 0);
            (0..20)
                .map(|_| ctx_eval(&mut t, 0, None, &mut rng))
                .collect::<Vec<_>>()
        };
        assert_eq!(draw(9), draw(9));
        assert_ne!(draw(9), draw(10));
    }

    #[test]
    fn id_generators_follow_the_existing_documents() {
        let mut rng = worker_rng(2, 0);
        // Without max: the existing documents' numbers.
        let mut t = Template::compile(&json!({ "$gen": "uniform" }), "f").unwrap();
        for _ in 0..200 {
            let v = ctx_eval(&mut t, 50, None, &mut rng).as_i64().unwrap();
            assert!((0..50).contains(&v));
        }
        let mut latest = Template::compile(&json!({ "$gen": "latest" }), "f").unwrap();
        let recent = (0..2000)
            .filter(|_| {
                ctx_eval(&mut latest, 1000, None, &mut rng)
                    .as_i64()
                    .unwrap()
                    >= 990
            })
            .count();
        assert!(recent > 600, "latest favours the newest: {recent}/2000");
        // Sequential in a document: min + the document's number.
        let mut seq = Template::compile(&json!({ "$gen": "sequential", "min": 100 }), "f").unwrap();
        assert_eq!(ctx_eval(&mut seq, 0, Some(7), &mut rng), Bson::Int64(107));
        // Elsewhere: walks the existing documents.
        let walk: Vec<i64> = (0..4)
            .map(|_| ctx_eval(&mut seq, 3, None, &mut rng).as_i64().unwrap())
            .collect();
        assert_eq!(walk, [100, 101, 102, 100]);
    }

    #[test]
    fn bad_templates_name_the_key() {
        let bad = [
            (json!({ "x": { "$gen": "gaussian" } }), "document.x.$gen"),
            (
                json!({ "x": { "$gen": "uniform", "max": 5, "min": 9 } }),
                "document.x.max",
            ),
            (json!({ "x": { "$gen": "string" } }), "document.x.length"),
            (
                json!({ "x": { "$gen": "string", "length": 3, "colour": 1 } }),
                "document.x.colour",
            ),
            (
                json!({ "x": { "$gen": "date", "from": "yesterday", "to": "2024-01-01T00:00:00Z" } }),
                "document.x.from",
            ),
            (
                json!({ "x": { "y": [{ "$gen": "choice", "values": [] }] } }),
                "document.x.y[0].values",
            ),
            (json!({ "_id": 1 }), "document._id"),
        ];
        for (doc, key) in bad {
            let cfg = CustomConfig {
                document: doc,
                operations: vec![op(CustomOpKind::Insert)],
                ..CustomConfig::default()
            };
            let e = Custom::check(&cfg).unwrap_err();
            assert_eq!(e.key, key, "{e:?}");
        }
        let mut update_without_operators = op(CustomOpKind::Update);
        update_without_operators.update = Some(json!({ "status": "x" }));
        let cfg = CustomConfig {
            operations: vec![update_without_operators],
            ..CustomConfig::default()
        };
        assert_eq!(Custom::check(&cfg).unwrap_err().key, "operations[0].update");
        let mut distinct = op(CustomOpKind::Distinct);
        distinct.limit = 3;
        let cfg = CustomConfig {
            operations: vec![distinct],
            ..CustomConfig::default()
        };
        assert_eq!(Custom::check(&cfg).unwrap_err().key, "operations[0].limit");
        let mut find = op(CustomOpKind::Find);
        find.sort = Some(json!({ "x": { "$gen": "uniform", "max": 2 } }));
        let cfg = CustomConfig {
            operations: vec![find],
            ..CustomConfig::default()
        };
        assert_eq!(Custom::check(&cfg).unwrap_err().key, "operations[0].sort");
    }

    #[test]
    fn operations_follow_weights_and_documents_the_size_target() {
        let mut find = op(CustomOpKind::Find);
        find.weight = 3.0;
        find.filter = Some(json!({ "customer": { "$gen": "uniform", "max": 100 } }));
        find.limit = 5;
        let mut update = op(CustomOpKind::Update);
        update.update = Some(json!({ "$inc": { "n": 1 } }));
        update.filter = Some(json!({ "_id": { "$gen": "uniform" } }));
        let mut agg = op(CustomOpKind::Aggregate);
        agg.pipeline = Some(vec![
            json!({ "$match": { "customer": { "$gen": "zipfian", "max": 100 } } }),
            json!({ "$group": { "_id": null, "n": { "$sum": 1 } } }),
        ]);
        let cfg = CustomConfig {
            document: json!({ "customer": { "$gen": "uniform", "max": 100 }, "tags": ["a"] }),
            doc_size: Some(ByteSize(1000)),
            initial_docs: 10,
            operations: vec![op(CustomOpKind::Insert), find, update, agg],
            ..CustomConfig::default()
        };
        let w = Custom::new(&cfg, 1).unwrap();
        assert_eq!(w.op_names(), ["insert", "find", "update", "aggregate"]);
        let mut src = w.worker(0, 1);
        let mut counts = [0u32; 4];
        for _ in 0..6000 {
            let o = src.next_op();
            counts[o.op] += 1;
            match o.into_action().unwrap() {
                Action::InsertOne { doc, .. } => {
                    assert_eq!(bson_len(&doc), 1000);
                    assert!(doc.get_i64("_id").unwrap() >= 10);
                }
                Action::Find { filter, limit, .. } => {
                    assert_eq!(limit, 5);
                    assert!((0..100).contains(&filter.get_i64("customer").unwrap()));
                }
                Action::UpdateOne { update, .. } => {
                    assert_eq!(update, doc! { "$inc": { "n": 1i64 } })
                }
                Action::Aggregate { pipeline, .. } => assert_eq!(pipeline.len(), 2),
                other => panic!("{other:?}"),
            }
        }
        let share = counts[1] as f64 / 6000.0;
        assert!((share - 0.5).abs() < 0.03, "{counts:?}");
        let PrepareStep::Load { make, .. } = &w.prepare()[0] else {
            panic!()
        };
        assert_eq!(make(3), make(3));
        assert_eq!(bson_len(&make(3)), 1000);
    }

    #[test]
    fn a_bound_evicts_the_oldest() {
        let cfg = CustomConfig {
            document: json!({ "x": 1 }),
            initial_docs: 5,
            max_docs: 5,
            operations: vec![op(CustomOpKind::Insert)],
            ..CustomConfig::default()
        };
        let w = Custom::new(&cfg, 1).unwrap();
        assert_eq!(w.op_names(), ["insert"]);
        assert_eq!(w.ops()[0].steps, [Arc::from("insert"), Arc::from("evict")]);
        // Reads of existing _ids stay within the window of kept documents.
        let cfg_reads = CustomConfig {
            operations: vec![op(CustomOpKind::Insert), {
                let mut f = op(CustomOpKind::Find);
                f.filter = Some(json!({ "_id": { "$gen": "uniform" } }));
                f
            }],
            ..cfg.clone()
        };
        let r = Custom::new(&cfg_reads, 1).unwrap();
        let mut reads = r.worker(0, 1);
        for _ in 0..400 {
            let o = reads.next_op();
            if let Some(Action::Find { filter, .. }) = o.action() {
                let id = filter.get_i64("_id").unwrap() as u64;
                let docs = r.shared.next_id.bound();
                assert!(
                    id + 5 >= docs && id < docs,
                    "{id} outside the last 5 of {docs}"
                );
            }
        }
        let mut src = w.worker(0, 1);
        let o = src.next_op();
        assert_eq!(o.op, 0);
        let steps = o.requests();
        assert_eq!(steps[1].step, 1);
        assert!(
            matches!(&steps[1].action, Action::DeleteOne { filter, .. } if filter == &doc! {"_id": 0i64})
        );
    }
}
