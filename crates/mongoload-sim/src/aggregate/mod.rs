//! Aggregation pipelines of the simulator: `$match`, `$group` (with `$sum`,
//! `$avg`, `$min`, `$max`, `$count`, `$first`, `$last`, `$push`,
//! `$addToSet`), `$sort`, `$skip`, `$limit`, `$project`, `$addFields`/`$set`,
//! `$unwind`, `$count`, run over documents in memory; `$collStats` (`count`
//! and `storageStats`) as the first stage, its one document made by the
//! caller from the collection ([`coll_stats_document`]).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use bson::{Bson, Document};

pub mod query_stats;

use super::query::{
    compare, get_path, Filter, IndexKey, Projection, QueryError, SortSpec, ValueExpr,
};

/// Stages MongoDB has that the simulator does not run: refused with a
/// message saying so rather than "unrecognized".
const UNSUPPORTED: &[&str] = &[
    "$lookup",
    "$facet",
    "$bucket",
    "$bucketAuto",
    "$sample",
    "$out",
    "$merge",
    "$replaceRoot",
    "$replaceWith",
    "$sortByCount",
    "$unionWith",
    "$geoNear",
    "$graphLookup",
    "$redact",
    "$densify",
    "$fill",
    "$setWindowFields",
    "$indexStats",
    "$documents",
    "$changeStream",
    "$currentOp",
    "$listSessions",
    "$planCacheStats",
    "$search",
    "$unset",
];

/// Accumulators of `$group`.
#[derive(Debug, Clone, Copy, PartialEq)]
enum AccOp {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    Push,
    AddToSet,
}

#[derive(Debug, Clone)]
struct Accumulator {
    name: String,
    op: AccOp,
    arg: ValueExpr,
}

#[derive(Debug, Clone)]
struct Group {
    id: ValueExpr,
    accs: Vec<Accumulator>,
}

#[derive(Debug, Clone)]
enum Stage {
    Match(Filter),
    Group(Group),
    Sort(SortSpec),
    Skip(u64),
    Limit(u64),
    Project(Projection),
    AddFields(Vec<(Vec<String>, ValueExpr)>),
    Unwind { path: Vec<String>, preserve: bool },
    Count(String),
    CollStats(CollStats),
}

/// What a `$collStats` stage asks for: `{ count: {} }` and
/// `{ storageStats: {} }` (`latencyStats` and `queryExecStats` are refused
/// as unsupported).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CollStats {
    pub count: bool,
    pub storage: bool,
}

fn parse_coll_stats(arg: &Bson) -> Result<CollStats, QueryError> {
    let Bson::Document(spec) = arg else {
        return Err(location(
            5447000,
            "$collStats must take a nested object but found a non-object",
        ));
    };
    let mut out = CollStats::default();
    for (k, v) in spec {
        let Bson::Document(_) = v else {
            return Err(QueryError::new(
                14,
                "TypeMismatch",
                format!("BSON field '$collStats.{k}' is the wrong type, expected type 'object'"),
            ));
        };
        match k.as_str() {
            "count" => out.count = true,
            "storageStats" => out.storage = true,
            "latencyStats" | "queryExecStats" => {
                return Err(QueryError::bad_value(format!(
                    "$collStats {k} is not supported by the mongoload simulator"
                )))
            }
            other => {
                return Err(QueryError::new(
                    40415,
                    "Location40415",
                    format!("BSON field '$collStats.{other}' is an unknown field."),
                ))
            }
        }
    }
    Ok(out)
}

/// The one document `$collStats` outputs on a mongod for the collection
/// `ns` holding `docs` (MongoDB 7.0's field names): `ns`, `host`,
/// `localTime`, then `storageStats` (`size`: the documents' BSON bytes,
/// `count`, `avgObjSize`: `size / count` rounded down, only when there are
/// documents, `storageSize`, `totalIndexSize`, `totalSize`, `nindexes`,
/// `scaleFactor`: 1) and `count`, as asked. A router adds `shard`.
pub fn coll_stats_document<'a>(
    spec: CollStats,
    ns: &str,
    host: &str,
    now: bson::DateTime,
    nindexes: usize,
    docs: impl Iterator<Item = &'a Document>,
) -> Document {
    let mut count: i64 = 0;
    let mut size: i64 = 0;
    if spec.count || spec.storage {
        for d in docs {
            count += 1;
            size += bson::to_vec(d).map_or(0, |b| b.len() as i64);
        }
    }
    let mut out = bson::doc! { "ns": ns, "host": host, "localTime": now };
    if spec.storage {
        let mut st = bson::doc! { "size": size, "count": count };
        if count > 0 {
            st.insert("avgObjSize", size / count);
        }
        st.insert("storageSize", size);
        st.insert("freeStorageSize", 0_i64);
        st.insert("capped", false);
        st.insert("nindexes", nindexes as i32);
        st.insert("totalIndexSize", 0_i64);
        st.insert("totalSize", size);
        st.insert("scaleFactor", 1_i32);
        out.insert("storageStats", st);
    }
    if spec.count {
        out.insert("count", count);
    }
    out
}

impl Stage {
    /// Whether the stage needs all its input before it emits anything.
    fn is_blocking(&self) -> bool {
        matches!(self, Stage::Group(_) | Stage::Sort(_) | Stage::Count(_))
    }
}

/// A parsed pipeline.
#[derive(Debug, Clone)]
pub struct Pipeline {
    stages: Vec<Stage>,
}

fn location(code: i32, message: impl Into<String>) -> QueryError {
    let name = match code {
        15952 => "Location15952",
        15955 => "Location15955",
        15956 => "Location15956",
        15957 => "Location15957",
        15958 => "Location15958",
        15976 => "Location15976",
        16872 => "Location16872",
        28812 => "Location28812",
        40156 => "Location40156",
        40157 => "Location40157",
        40158 => "Location40158",
        40160 => "Location40160",
        40234 => "Location40234",
        40235 => "Location40235",
        40323 => "Location40323",
        40415 => "Location40415",
        40602 => "Location40602",
        40324 => "Location40324",
        51272 => "Location51272",
        5447000 => "Location5447000",
        _ => "Location",
    };
    QueryError::new(code, name, message)
}

fn non_negative_int(v: &Bson) -> Option<u64> {
    match v {
        Bson::Int32(i) => u64::try_from(*i).ok(),
        Bson::Int64(i) => u64::try_from(*i).ok(),
        Bson::Double(f) if f.fract() == 0.0 && *f >= 0.0 && *f < 1.8e19 => Some(*f as u64),
        _ => None,
    }
}

fn parse_stage(stage: &Document) -> Result<Stage, QueryError> {
    let mut it = stage.iter();
    let (name, arg) = match (it.next(), it.next()) {
        (Some(first), None) => first,
        _ => {
            return Err(location(
                40323,
                "A pipeline stage specification object must contain exactly one field.",
            ))
        }
    };
    let doc_arg = |what: &str| -> Result<&Document, QueryError> {
        match arg {
            Bson::Document(d) => Ok(d),
            _ => Err(QueryError::failed_to_parse(format!(
                "{what} specification must be an object"
            ))),
        }
    };
    Ok(match name.as_str() {
        "$match" => Stage::Match(Filter::parse(doc_arg("$match")?)?),
        "$group" => Stage::Group(parse_group(doc_arg("$group")?)?),
        "$sort" => Stage::Sort(SortSpec::parse(non_empty(
            doc_arg("$sort")?,
            15976,
            "$sort stage must have at least one sort key",
        )?)?),
        "$skip" => Stage::Skip(parse_skip(arg)?),
        "$limit" => Stage::Limit(parse_limit(arg)?),
        "$project" => Stage::Project(Projection::parse(non_empty(
            doc_arg("$project")?,
            51272,
            "Invalid $project :: caused by :: projection specification must have at least one field",
        )?)?),
        "$addFields" | "$set" => Stage::AddFields(parse_add_fields(doc_arg(name)?)?),
        "$unwind" => parse_unwind(arg)?,
        "$count" => Stage::Count(parse_count(arg)?),
        "$collStats" => Stage::CollStats(parse_coll_stats(arg)?),
        other if UNSUPPORTED.contains(&other) => {
            return Err(QueryError::bad_value(format!(
                "the {other} stage is not supported by the mongoload simulator"
            )))
        }
        other => {
            return Err(location(
                40324,
                format!("Unrecognized pipeline stage name: '{other}'"),
            ))
        }
    })
}

/// `spec`, unless it is empty: then the error `code` with `message`.
fn non_empty<'d>(spec: &'d Document, code: i32, message: &str) -> Result<&'d Document, QueryError> {
    if spec.is_empty() {
        return Err(location(code, message));
    }
    Ok(spec)
}

fn parse_skip(arg: &Bson) -> Result<u64, QueryError> {
    non_negative_int(arg).ok_or_else(|| {
        location(
            15956,
            format!("invalid argument to $skip stage: expected a non-negative integer, got {arg}"),
        )
    })
}

fn parse_limit(arg: &Bson) -> Result<u64, QueryError> {
    match non_negative_int(arg) {
        Some(0) => Err(location(15958, "the limit must be positive")),
        Some(n) => Ok(n),
        None if super::query::number_as_f64(arg).is_some() => {
            Err(location(15958, "the limit must be positive"))
        }
        None => Err(location(15957, "the limit must be specified as a number")),
    }
}

/// `$addFields` (or `$set`): each dotted path with its expression.
fn parse_add_fields(spec: &Document) -> Result<Vec<(Vec<String>, ValueExpr)>, QueryError> {
    let mut fields = Vec::with_capacity(spec.len());
    for (k, v) in spec {
        fields.push((
            k.split('.').map(str::to_owned).collect(),
            ValueExpr::parse(v)?,
        ));
    }
    Ok(fields)
}

/// `$unwind`: a `$`-prefixed path, or `{ path, preserveNullAndEmptyArrays }`.
fn parse_unwind(arg: &Bson) -> Result<Stage, QueryError> {
    let (path, preserve) = match arg {
        Bson::String(s) => (s.as_str(), false),
        Bson::Document(d) => match d.get("path") {
            Some(Bson::String(s)) => (
                s.as_str(),
                d.get("preserveNullAndEmptyArrays")
                    .is_some_and(super::query::truthy),
            ),
            _ => return Err(location(28812, "no path specified to $unwind stage")),
        },
        _ => {
            return Err(QueryError::failed_to_parse(
                "expected either a string or an object as specification for $unwind stage",
            ))
        }
    };
    let Some(p) = path.strip_prefix('$').filter(|p| !p.is_empty()) else {
        return Err(location(
            28812,
            format!("path option to $unwind stage should be prefixed with a '$': {path}"),
        ));
    };
    Ok(Stage::Unwind {
        path: p.split('.').map(str::to_owned).collect(),
        preserve,
    })
}

/// `$count`: the name of the field to count into.
fn parse_count(arg: &Bson) -> Result<String, QueryError> {
    match arg {
        Bson::String(s) if s.is_empty() => Err(location(
            40157,
            "the count field must be a non-empty string",
        )),
        Bson::String(s) if s.starts_with('$') => Err(location(
            40158,
            "the count field cannot be a $-prefixed path",
        )),
        Bson::String(s) if s.contains('.') => {
            Err(location(40160, "the count field cannot contain '.'"))
        }
        Bson::String(s) => Ok(s.clone()),
        _ => Err(location(
            40156,
            "the count field must be a non-empty string",
        )),
    }
}

fn parse_group(spec: &Document) -> Result<Group, QueryError> {
    let id = match spec.get("_id") {
        Some(v) => ValueExpr::parse(v)?,
        None => return Err(location(15955, "a group specification must include an _id")),
    };
    let mut accs = Vec::new();
    for (name, v) in spec {
        if name == "_id" {
            continue;
        }
        if name.contains('.') {
            return Err(location(
                40235,
                format!("The field name '{name}' cannot contain '.'"),
            ));
        }
        let (op_name, arg) = match v {
            Bson::Document(d) if d.len() == 1 => match d.iter().next() {
                Some((k, a)) if k.starts_with('$') => (k.as_str(), a),
                _ => {
                    return Err(location(
                        40234,
                        format!("The field '{name}' must be an accumulator object"),
                    ))
                }
            },
            _ => {
                return Err(location(
                    40234,
                    format!("The field '{name}' must be an accumulator object"),
                ))
            }
        };
        let (op, arg) = match op_name {
            "$sum" => (AccOp::Sum, ValueExpr::parse(arg)?),
            "$avg" => (AccOp::Avg, ValueExpr::parse(arg)?),
            "$min" => (AccOp::Min, ValueExpr::parse(arg)?),
            "$max" => (AccOp::Max, ValueExpr::parse(arg)?),
            "$first" => (AccOp::First, ValueExpr::parse(arg)?),
            "$last" => (AccOp::Last, ValueExpr::parse(arg)?),
            "$push" => (AccOp::Push, ValueExpr::parse(arg)?),
            "$addToSet" => (AccOp::AddToSet, ValueExpr::parse(arg)?),
            // `$count: {}` is `$sum: 1`.
            "$count" => match arg {
                Bson::Document(d) if d.is_empty() => {
                    (AccOp::Sum, ValueExpr::parse(&Bson::Int32(1))?)
                }
                _ => {
                    return Err(QueryError::bad_value(
                        "$count takes no arguments, i.e. $count:{}",
                    ))
                }
            },
            other => return Err(location(15952, format!("unknown group operator '{other}'"))),
        };
        accs.push(Accumulator {
            name: name.clone(),
            op,
            arg,
        });
    }
    Ok(Group { id, accs })
}

/// Running state of one accumulator in one group.
#[derive(Debug)]
enum AccState {
    /// Integer sum while it fits an i64 (`None` after overflow), the double
    /// sum of everything, and the widest type seen.
    Sum {
        int: Option<i64>,
        float: f64,
        long: bool,
        double: bool,
    },
    Avg {
        sum: f64,
        count: u64,
    },
    Extreme(Option<Bson>),
    First(Option<Bson>),
    Last(Bson),
    List(Vec<Bson>),
}

impl AccState {
    fn new(op: AccOp) -> AccState {
        match op {
            AccOp::Sum => AccState::Sum {
                int: Some(0),
                float: 0.0,
                long: false,
                double: false,
            },
            AccOp::Avg => AccState::Avg { sum: 0.0, count: 0 },
            AccOp::Min | AccOp::Max => AccState::Extreme(None),
            AccOp::First => AccState::First(None),
            AccOp::Last => AccState::Last(Bson::Null),
            AccOp::Push | AccOp::AddToSet => AccState::List(Vec::new()),
        }
    }

    fn add(&mut self, op: AccOp, v: Option<Bson>) {
        match self {
            AccState::Sum {
                int,
                float,
                long,
                double,
            } => {
                let Some(v) = v else { return };
                match v {
                    Bson::Int32(i) => {
                        *int = int.and_then(|s| s.checked_add(i64::from(i)));
                        *float += f64::from(i);
                    }
                    Bson::Int64(i) => {
                        *long = true;
                        *int = int.and_then(|s| s.checked_add(i));
                        *float += i as f64;
                    }
                    other => {
                        // Non-numbers are ignored, as MongoDB's $sum does.
                        if let Some(f) = super::query::number_as_f64(&other) {
                            *double = true;
                            *float += f;
                        }
                    }
                }
            }
            AccState::Avg { sum, count } => {
                if let Some(f) = v.as_ref().and_then(super::query::number_as_f64) {
                    *sum += f;
                    *count += 1;
                }
            }
            AccState::Extreme(best) => {
                let Some(v) = v else { return };
                if matches!(v, Bson::Null | Bson::Undefined) {
                    return;
                }
                let want = if op == AccOp::Min {
                    Ordering::Less
                } else {
                    Ordering::Greater
                };
                if best.as_ref().is_none_or(|b| compare(&v, b) == want) {
                    *best = Some(v);
                }
            }
            AccState::First(first) => {
                if first.is_none() {
                    *first = Some(v.unwrap_or(Bson::Null));
                }
            }
            AccState::Last(last) => *last = v.unwrap_or(Bson::Null),
            AccState::List(list) => {
                let Some(v) = v else { return };
                if op == AccOp::AddToSet && list.iter().any(|e| compare(e, &v) == Ordering::Equal) {
                    return;
                }
                list.push(v);
            }
        }
    }

    fn finish(self) -> Bson {
        match self {
            AccState::Sum {
                int,
                float,
                long,
                double,
            } => match int {
                _ if double => Bson::Double(float),
                Some(s) => match i32::try_from(s) {
                    Ok(small) if !long => Bson::Int32(small),
                    _ => Bson::Int64(s),
                },
                // An integer sum past i64 carries on as a double, as MongoDB's does.
                None => Bson::Double(float),
            },
            AccState::Avg { sum, count } => {
                if count == 0 {
                    Bson::Null
                } else {
                    Bson::Double(sum / count as f64)
                }
            }
            AccState::Extreme(v) | AccState::First(v) => v.unwrap_or(Bson::Null),
            AccState::Last(v) => v,
            AccState::List(l) => Bson::Array(l),
        }
    }
}

impl Group {
    fn run(&self, docs: Vec<Document>) -> Vec<Document> {
        let mut index: BTreeMap<IndexKey, usize> = BTreeMap::new();
        let mut groups: Vec<(Bson, Vec<AccState>)> = Vec::new();
        for doc in &docs {
            let id = self.id.eval(doc).unwrap_or(Bson::Null);
            let slot = match index.get(&IndexKey(id.clone())) {
                Some(i) => *i,
                None => {
                    index.insert(IndexKey(id.clone()), groups.len());
                    groups.push((id, self.accs.iter().map(|a| AccState::new(a.op)).collect()));
                    groups.len() - 1
                }
            };
            for (acc, state) in self.accs.iter().zip(groups[slot].1.iter_mut()) {
                state.add(acc.op, acc.arg.eval(doc));
            }
        }
        groups
            .into_iter()
            .map(|(id, states)| {
                let mut out = Document::new();
                out.insert("_id", id);
                for (acc, state) in self.accs.iter().zip(states) {
                    out.insert(acc.name.clone(), state.finish());
                }
                out
            })
            .collect()
    }
}

/// Sets `value` at `parts` in `doc`, creating or replacing embedded
/// documents on the way (`$unwind` puts each element back so).
fn set_path(doc: &mut Document, parts: &[String], value: Bson) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.insert(first.clone(), value);
        return;
    }
    if !matches!(doc.get(first), Some(Bson::Document(_))) {
        doc.insert(first.clone(), Document::new());
    }
    if let Some(Bson::Document(sub)) = doc.get_mut(first) {
        set_path(sub, rest, value);
    }
}

/// Sets `value` at `parts` in `doc` as `$addFields` does: through
/// embedded documents, created where missing; through an array, in each
/// of its elements (one that is not a document or an array becomes a
/// document holding the path); a value of another type on the way is
/// replaced by a document.
fn add_field(doc: &mut Document, parts: &[String], value: &Bson) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    if rest.is_empty() {
        doc.insert(first.clone(), value.clone());
        return;
    }
    match doc.get_mut(first) {
        Some(v @ (Bson::Document(_) | Bson::Array(_))) => add_field_in(v, rest, value),
        _ => {
            let mut sub = Document::new();
            add_field(&mut sub, rest, value);
            doc.insert(first.clone(), sub);
        }
    }
}

/// [`add_field`] below a value the path reached.
fn add_field_in(v: &mut Bson, parts: &[String], value: &Bson) {
    match v {
        Bson::Document(d) => add_field(d, parts, value),
        Bson::Array(items) => {
            for item in items {
                add_field_in(item, parts, value);
            }
        }
        other => {
            let mut sub = Document::new();
            add_field(&mut sub, parts, value);
            *other = Bson::Document(sub);
        }
    }
}

/// Per-run counters of the `$skip`/`$limit` stages of a streaming run.
struct Stream<'a> {
    stages: &'a [Stage],
    counts: Vec<u64>,
}

impl Stream<'_> {
    /// Whether a `$limit` is full, so no further input can reach the output.
    fn exhausted(&self) -> bool {
        self.stages
            .iter()
            .zip(&self.counts)
            .any(|(s, c)| matches!(s, Stage::Limit(n) if c >= n))
    }

    fn push(&mut self, i: usize, doc: Document, out: &mut Vec<Document>) {
        let Some(stage) = self.stages.get(i) else {
            out.push(doc);
            return;
        };
        match stage {
            Stage::Match(f) => {
                if f.matches(&doc) {
                    self.push(i + 1, doc, out);
                }
            }
            Stage::Skip(n) => {
                if self.counts[i] < *n {
                    self.counts[i] += 1;
                } else {
                    self.push(i + 1, doc, out);
                }
            }
            Stage::Limit(n) => {
                if self.counts[i] < *n {
                    self.counts[i] += 1;
                    self.push(i + 1, doc, out);
                }
            }
            Stage::Project(p) => {
                let projected = p.apply(&doc);
                self.push(i + 1, projected, out);
            }
            Stage::AddFields(fields) => {
                // Expressions see the document as it came into the stage:
                // every value is computed before any is set.
                let values: Vec<Option<Bson>> = fields.iter().map(|(_, e)| e.eval(&doc)).collect();
                let mut d = doc;
                for ((parts, _), v) in fields.iter().zip(values) {
                    if let Some(v) = v {
                        add_field(&mut d, parts, &v);
                    }
                }
                self.push(i + 1, d, out);
            }
            Stage::Unwind { path, preserve } => {
                let dotted = path.join(".");
                match get_path(&doc, &dotted) {
                    Some(Bson::Array(a)) if !a.is_empty() => {
                        for e in a.clone() {
                            let mut d = doc.clone();
                            set_path(&mut d, path, e);
                            self.push(i + 1, d, out);
                        }
                    }
                    None | Some(Bson::Null) | Some(Bson::Array(_)) => {
                        if *preserve {
                            self.push(i + 1, doc, out);
                        }
                    }
                    Some(_) => self.push(i + 1, doc, out),
                }
            }
            // Its document is the input the caller gave.
            Stage::CollStats(_) => self.push(i + 1, doc, out),
            // Blocking stages never reach a stream.
            Stage::Group(_) | Stage::Sort(_) | Stage::Count(_) => out.push(doc),
        }
    }
}

/// Runs streaming (non-blocking) `stages` over `input`, stopping early
/// once a `$limit` is full.
fn stream(stages: &[Stage], input: impl Iterator<Item = Document>) -> Vec<Document> {
    let mut out = Vec::new();
    let mut s = Stream {
        stages,
        counts: vec![0; stages.len()],
    };
    for doc in input {
        if s.exhausted() {
            break;
        }
        s.push(0, doc, &mut out);
    }
    out
}

impl Pipeline {
    /// Parses the stages; an unknown stage is an error (code 40324,
    /// "Unrecognized pipeline stage name: '$x'"), as MongoDB answers.
    pub fn parse(stages: &[Document]) -> Result<Pipeline, QueryError> {
        let stages = stages
            .iter()
            .map(parse_stage)
            .collect::<Result<Vec<_>, _>>()?;
        if stages
            .iter()
            .skip(1)
            .any(|s| matches!(s, Stage::CollStats(_)))
        {
            return Err(location(
                40602,
                "$collStats is only valid as the first stage in a pipeline",
            ));
        }
        Ok(Pipeline { stages })
    }

    /// The filter of a leading `$match`, so the caller can use an index to
    /// choose the input; `run` still applies it.
    pub fn leading_match(&self) -> Option<&Filter> {
        match self.stages.first() {
            Some(Stage::Match(f)) => Some(f),
            _ => None,
        }
    }

    /// The leading `$collStats`: its input is then the one document
    /// [`coll_stats_document`] makes, not the collection's documents.
    pub fn coll_stats(&self) -> Option<CollStats> {
        match self.stages.first() {
            Some(Stage::CollStats(c)) => Some(*c),
            _ => None,
        }
    }

    /// Runs the pipeline over `input` and returns the output documents.
    ///
    /// Stages up to the first blocking one (`$group`, `$sort`, `$count`)
    /// stream, so `[{$match}, {$limit: 10}]` stops reading input after ten
    /// matches. Errors are reserved for evaluation failures; the stages the
    /// simulator runs today have none once parsed.
    pub fn run(&self, input: impl Iterator<Item = Document>) -> Result<Vec<Document>, QueryError> {
        let next_blocking = |from: usize| {
            from + self.stages[from..]
                .iter()
                .take_while(|s| !s.is_blocking())
                .count()
        };
        let mut b = next_blocking(0);
        let mut docs = stream(&self.stages[..b], input);
        while b < self.stages.len() {
            docs = match &self.stages[b] {
                Stage::Group(g) => g.run(docs),
                Stage::Sort(s) => {
                    s.sort(&mut docs);
                    docs
                }
                Stage::Count(name) => {
                    if docs.is_empty() {
                        Vec::new()
                    } else {
                        let n = docs.len();
                        let v = i32::try_from(n).map_or(Bson::Int64(n as i64), Bson::Int32);
                        let mut d = Document::new();
                        d.insert(name.clone(), v);
                        vec![d]
                    }
                }
                _ => docs,
            };
            let end = next_blocking(b + 1);
            docs = stream(&self.stages[b + 1..end], docs.into_iter());
            b = end;
        }
        Ok(docs)
    }
}

#[cfg(test)]
mod tests;
