//! Aggregation pipelines of the simulator: `$match`, `$group` (with `$sum`,
//! `$avg`, `$min`, `$max`, `$count`, `$first`, `$last`, `$push`,
//! `$addToSet`), `$sort`, `$skip`, `$limit`, `$project`, `$addFields`/`$set`,
//! `$unwind`, `$count`, run over documents in memory.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use mongodb::bson::{Bson, Document};

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
    "$collStats",
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
        40324 => "Location40324",
        51272 => "Location51272",
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
        "$sort" => {
            let spec = doc_arg("$sort")?;
            if spec.is_empty() {
                return Err(location(
                    15976,
                    "$sort stage must have at least one sort key",
                ));
            }
            Stage::Sort(SortSpec::parse(spec)?)
        }
        "$skip" => match non_negative_int(arg) {
            Some(n) => Stage::Skip(n),
            None => {
                return Err(location(
                    15956,
                    format!(
                    "invalid argument to $skip stage: expected a non-negative integer, got {arg}"
                ),
                ))
            }
        },
        "$limit" => match non_negative_int(arg) {
            Some(0) => return Err(location(15958, "the limit must be positive")),
            Some(n) => Stage::Limit(n),
            None if super::query::number_as_f64(arg).is_some() => {
                return Err(location(15958, "the limit must be positive"))
            }
            None => return Err(location(15957, "the limit must be specified as a number")),
        },
        "$project" => {
            let spec = doc_arg("$project")?;
            if spec.is_empty() {
                return Err(location(
                    51272,
                    "Invalid $project :: caused by :: projection specification must have at least one field",
                ));
            }
            Stage::Project(Projection::parse(spec)?)
        }
        "$addFields" | "$set" => {
            let spec = doc_arg(name)?;
            let mut fields = Vec::with_capacity(spec.len());
            for (k, v) in spec {
                fields.push((
                    k.split('.').map(str::to_owned).collect(),
                    ValueExpr::parse(v)?,
                ));
            }
            Stage::AddFields(fields)
        }
        "$unwind" => {
            let (path, preserve) =
                match arg {
                    Bson::String(s) => (s.as_str(), false),
                    Bson::Document(d) => match d.get("path") {
                        Some(Bson::String(s)) => (
                            s.as_str(),
                            d.get("preserveNullAndEmptyArrays")
                                .is_some_and(super::query::truthy),
                        ),
                        _ => return Err(location(28812, "no path specified to $unwind stage")),
                    },
                    _ => return Err(QueryError::failed_to_parse(
                        "expected either a string or an object as specification for $unwind stage",
                    )),
                };
            let Some(p) = path.strip_prefix('$').filter(|p| !p.is_empty()) else {
                return Err(location(
                    28812,
                    format!("path option to $unwind stage should be prefixed with a '$': {path}"),
                ));
            };
            Stage::Unwind {
                path: p.split('.').map(str::to_owned).collect(),
                preserve,
            }
        }
        "$count" => match arg {
            Bson::String(s) if s.is_empty() => {
                return Err(location(
                    40157,
                    "the count field must be a non-empty string",
                ))
            }
            Bson::String(s) if s.starts_with('$') => {
                return Err(location(
                    40158,
                    "the count field cannot be a $-prefixed path",
                ))
            }
            Bson::String(s) if s.contains('.') => {
                return Err(location(40160, "the count field cannot contain '.'"))
            }
            Bson::String(s) => Stage::Count(s.clone()),
            _ => {
                return Err(location(
                    40156,
                    "the count field must be a non-empty string",
                ))
            }
        },
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
/// documents on the way (as `$addFields` does).
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
                let mut d = doc;
                for (parts, e) in fields {
                    // Expressions see the document as it came into the stage.
                    if let Some(v) = e.eval(&d) {
                        set_path(&mut d, parts, v);
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
mod tests {
    use super::*;
    use mongodb::bson::doc;

    fn run(stages: Vec<Document>, input: Vec<Document>) -> Vec<Document> {
        Pipeline::parse(&stages)
            .expect("pipeline parses")
            .run(input.into_iter())
            .expect("runs")
    }

    fn err(stages: Vec<Document>) -> QueryError {
        Pipeline::parse(&stages).unwrap_err()
    }

    fn sales() -> Vec<Document> {
        vec![
            doc! {"_id": 1, "item": "a", "qty": 2, "price": 10.0, "tag": {"c": "x"}},
            doc! {"_id": 2, "item": "b", "qty": 1, "price": 20.5, "tag": {"c": "y"}},
            doc! {"_id": 3, "item": "a", "qty": 5, "price": 10.0, "tag": {"c": "x"}},
            doc! {"_id": 4, "item": "c", "qty": 7i64, "tag": {"c": "x"}},
            doc! {"_id": 5, "item": "b", "qty": "n/a", "price": 1.5},
        ]
    }

    #[test]
    fn group_all_with_sum_avg_min_max_count() {
        let out = run(
            vec![doc! {"$group": {
                "_id": null,
                "n": {"$count": {}},
                "ones": {"$sum": 1},
                "qty": {"$sum": "$qty"},
                "price": {"$sum": "$price"},
                "avgPrice": {"$avg": "$price"},
                "avgMissing": {"$avg": "$none"},
                "minQty": {"$min": "$qty"},
                "maxQty": {"$max": "$qty"},
                "maxNone": {"$max": "$none"},
                "first": {"$first": "$item"},
                "last": {"$last": "$item"},
            }}],
            sales(),
        );
        // qty: 2 + 1 + 5 + 7 (int64 makes the sum an int64); "n/a" is ignored.
        // price: 10 + 20.5 + 10 + 1.5 = 42, over 4 documents: 10.5.
        // min/max compare across types: every number sorts below a string.
        assert_eq!(
            out,
            vec![doc! {
                "_id": null,
                "n": 5,
                "ones": 5,
                "qty": 15i64,
                "price": 42.0,
                "avgPrice": 10.5,
                "avgMissing": null,
                "minQty": 1,
                "maxQty": "n/a",
                "maxNone": null,
                "first": "a",
                "last": "b",
            }]
        );
    }

    #[test]
    fn sum_types_follow_mongodb() {
        let sum = |vals: Vec<Bson>| {
            let input = vals.into_iter().map(|v| doc! {"v": v}).collect();
            let out = run(
                vec![doc! {"$group": {"_id": null, "s": {"$sum": "$v"}}}],
                input,
            );
            out[0].get("s").cloned().unwrap()
        };
        assert_eq!(sum(vec![Bson::Int32(1), Bson::Int32(2)]), Bson::Int32(3));
        assert_eq!(
            sum(vec![Bson::Int32(i32::MAX), Bson::Int32(1)]),
            Bson::Int64(i64::from(i32::MAX) + 1)
        );
        assert_eq!(sum(vec![Bson::Int32(1), Bson::Int64(2)]), Bson::Int64(3));
        assert_eq!(
            sum(vec![Bson::Int32(1), Bson::Double(0.5)]),
            Bson::Double(1.5)
        );
        assert_eq!(
            sum(vec![Bson::Int64(i64::MAX), Bson::Int64(1)]),
            Bson::Double(i64::MAX as f64 + 1.0)
        );
        // No input, no group (MongoDB emits nothing, not a zero).
        let none = run(
            vec![doc! {"$group": {"_id": null, "s": {"$sum": "$v"}}}],
            vec![],
        );
        assert!(none.is_empty());
        assert_eq!(sum(vec![Bson::String("x".into())]), Bson::Int32(0));
    }

    #[test]
    fn group_by_field_path_and_compound_key() {
        let out = run(
            vec![
                doc! {"$group": {"_id": "$item", "total": {"$sum": "$qty"}, "ids": {"$push": "$_id"}}},
                doc! {"$sort": {"_id": 1}},
            ],
            sales(),
        );
        assert_eq!(
            out,
            vec![
                doc! {"_id": "a", "total": 7, "ids": [1, 3]},
                doc! {"_id": "b", "total": 1, "ids": [2, 5]},
                doc! {"_id": "c", "total": 7i64, "ids": [4]},
            ]
        );
        let out = run(
            vec![
                doc! {"$group": {"_id": {"item": "$item", "c": "$tag.c"}, "n": {"$sum": 1}}},
                doc! {"$sort": {"n": -1, "_id.item": 1}},
            ],
            sales(),
        );
        assert_eq!(
            out,
            vec![
                doc! {"_id": {"item": "a", "c": "x"}, "n": 2},
                doc! {"_id": {"item": "b", "c": "y"}, "n": 1},
                doc! {"_id": {"item": "b"}, "n": 1},
                doc! {"_id": {"item": "c", "c": "x"}, "n": 1},
            ]
        );
        // Equal numbers of different types fall in one group; missing is null.
        let out = run(
            vec![doc! {"$group": {"_id": "$k", "n": {"$sum": 1}, "set": {"$addToSet": "$k"}}}],
            vec![doc! {"k": 1}, doc! {"k": 1.0}, doc! {"k": 1i64}, doc! {}],
        );
        assert_eq!(
            out,
            vec![
                doc! {"_id": 1, "n": 3, "set": [1]},
                doc! {"_id": null, "n": 1, "set": []}
            ]
        );
        let out = run(
            vec![doc! {"$group": {"_id": "const", "n": {"$sum": 2}}}],
            sales(),
        );
        assert_eq!(out, vec![doc! {"_id": "const", "n": 10}]);
    }

    #[test]
    fn match_sort_skip_limit_project_count() {
        let out = run(
            vec![
                doc! {"$match": {"price": {"$gte": 10}}},
                doc! {"$sort": {"price": -1, "_id": 1}},
                doc! {"$skip": 1},
                doc! {"$limit": 1},
                doc! {"$project": {"item": 1, "p": "$price"}},
            ],
            sales(),
        );
        assert_eq!(out, vec![doc! {"_id": 1, "item": "a", "p": 10.0}]);
        let out = run(
            vec![doc! {"$match": {"item": "a"}}, doc! {"$count": "many"}],
            sales(),
        );
        assert_eq!(out, vec![doc! {"many": 2}]);
        let out = run(
            vec![doc! {"$match": {"item": "zz"}}, doc! {"$count": "many"}],
            sales(),
        );
        assert!(out.is_empty());
        let out = run(
            vec![
                doc! {"$project": {"tag": 0, "price": 0, "qty": 0}},
                doc! {"$limit": 2},
            ],
            sales(),
        );
        assert_eq!(
            out,
            vec![doc! {"_id": 1, "item": "a"}, doc! {"_id": 2, "item": "b"}]
        );
    }

    #[test]
    fn sort_stage_is_stable() {
        let input = (0..20).map(|i| doc! {"i": i, "k": i % 3}).collect();
        let out = run(vec![doc! {"$sort": {"k": 1}}], input);
        let order: Vec<i32> = out.iter().map(|d| d.get_i32("i").unwrap()).collect();
        assert_eq!(
            order,
            vec![0, 3, 6, 9, 12, 15, 18, 1, 4, 7, 10, 13, 16, 19, 2, 5, 8, 11, 14, 17]
        );
    }

    #[test]
    fn limit_stops_reading_input() {
        let mut read = 0;
        let input = (0..1000).map(|i| {
            read += 1;
            doc! {"i": i}
        });
        let p =
            Pipeline::parse(&[doc! {"$match": {"i": {"$gte": 10}}}, doc! {"$limit": 3}]).unwrap();
        let out = p.run(input).unwrap();
        assert_eq!(out.len(), 3);
        assert_eq!(out[0], doc! {"i": 10});
        assert!(read <= 14, "read {read} documents for a limit of 3");
    }

    #[test]
    fn unwind_and_add_fields() {
        let input = vec![
            doc! {"_id": 1, "l": [1, 2]},
            doc! {"_id": 2, "l": []},
            doc! {"_id": 3},
        ];
        let out = run(vec![doc! {"$unwind": "$l"}], input.clone());
        assert_eq!(out, vec![doc! {"_id": 1, "l": 1}, doc! {"_id": 1, "l": 2}]);
        let out = run(
            vec![doc! {"$unwind": {"path": "$l", "preserveNullAndEmptyArrays": true}}],
            input.clone(),
        );
        assert_eq!(out.len(), 4);
        let out = run(
            vec![
                doc! {"$addFields": {"m": "$_id", "n.o": 1}},
                doc! {"$limit": 1},
            ],
            input,
        );
        assert_eq!(
            out,
            vec![doc! {"_id": 1, "l": [1, 2], "m": 1, "n": {"o": 1}}]
        );
    }

    #[test]
    fn leading_match_is_exposed() {
        let p = Pipeline::parse(&[doc! {"$match": {"_id": 5}}, doc! {"$limit": 1}]).unwrap();
        let f = p.leading_match().expect("leading $match");
        assert!(f.matches(&doc! {"_id": 5}));
        assert!(!f.matches(&doc! {"_id": 6}));
        let p = Pipeline::parse(&[doc! {"$limit": 1}, doc! {"$match": {"_id": 5}}]).unwrap();
        assert!(p.leading_match().is_none());
    }

    #[test]
    fn parse_errors_carry_mongodb_codes() {
        let e = err(vec![doc! {"$foo": {}}]);
        assert_eq!(e.code, 40324);
        assert_eq!(e.message, "Unrecognized pipeline stage name: '$foo'");
        assert_eq!(err(vec![doc! {"$lookup": {}}]).code, 2);
        assert_eq!(err(vec![doc! {"$match": {}, "$limit": 1}]).code, 40323);
        assert_eq!(err(vec![doc! {"$match": {"a": {"$bad": 1}}}]).code, 2);
        assert_eq!(err(vec![doc! {"$group": {"n": {"$sum": 1}}}]).code, 15955);
        assert_eq!(
            err(vec![doc! {"$group": {"_id": null, "n": {"$bad": 1}}}]).code,
            15952
        );
        assert_eq!(
            err(vec![doc! {"$group": {"_id": null, "n": 1}}]).code,
            40234
        );
        assert_eq!(
            err(vec![doc! {"$group": {"_id": null, "a.b": {"$sum": 1}}}]).code,
            40235
        );
        assert_eq!(
            err(vec![doc! {"$group": {"_id": {"$add": [1, 2]}}}]).code,
            168
        );
        assert_eq!(err(vec![doc! {"$sort": {}}]).code, 15976);
        assert_eq!(err(vec![doc! {"$sort": {"a": 0}}]).code, 15975);
        assert_eq!(err(vec![doc! {"$limit": 0}]).code, 15958);
        assert_eq!(err(vec![doc! {"$limit": "x"}]).code, 15957);
        assert_eq!(err(vec![doc! {"$skip": -1}]).code, 15956);
        assert_eq!(err(vec![doc! {"$count": ""}]).code, 40157);
        assert_eq!(err(vec![doc! {"$count": "$x"}]).code, 40158);
        assert_eq!(err(vec![doc! {"$count": "a.b"}]).code, 40160);
        assert_eq!(err(vec![doc! {"$count": 1}]).code, 40156);
        assert_eq!(err(vec![doc! {"$project": {"a": 1, "b": 0}}]).code, 31254);
        assert_eq!(err(vec![doc! {"$project": {}}]).code, 51272);
    }
}
