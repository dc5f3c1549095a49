//! Filters: parsed once from the query language into predicates, then
//! matched against documents.

use std::cmp::Ordering;

use bson::{Bson, Document};

use super::*;

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum CmpOp {
    Gt,
    Gte,
    Lt,
    Lte,
}

/// A condition on the value(s) at one path.
#[derive(Debug, Clone)]
pub(super) enum Pred {
    Eq(Bson),
    Ne(Bson),
    Cmp(CmpOp, Bson),
    In(Vec<Bson>),
    Nin(Vec<Bson>),
    Exists(bool),
    Not(Vec<Pred>),
    Size(usize),
    All(Vec<Bson>),
    ElemMatchDoc(Box<Expr>),
    ElemMatchValue(Vec<Pred>),
    Type(Vec<i32>),
    Mod(i64, i64),
}

/// A parsed filter expression.
#[derive(Debug, Clone)]
pub(super) enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Nor(Vec<Expr>),
    Cond { path: String, pred: Pred },
}

pub(super) fn eq_match(x: Option<&Bson>, v: &Bson) -> bool {
    match x {
        None => matches!(v, Bson::Null),
        Some(x) => compare(x, v) == Ordering::Equal,
    }
}

pub(super) fn cmp_match(op: CmpOp, x: Option<&Bson>, v: &Bson) -> bool {
    let Some(x) = x else {
        // A missing field counts as null for the inclusive comparisons only.
        return matches!(v, Bson::Null) && matches!(op, CmpOp::Gte | CmpOp::Lte);
    };
    // MinKey and MaxKey bound every type; other operands compare within
    // their own type class only.
    if !matches!(v, Bson::MinKey | Bson::MaxKey) && type_rank(x) != type_rank(v) {
        return false;
    }
    // NaN equals NaN but is neither above nor below anything.
    let (xn, vn) = (is_nan(x), is_nan(v));
    if xn || vn {
        return xn && vn && matches!(op, CmpOp::Gte | CmpOp::Lte);
    }
    let o = compare(x, v);
    match op {
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Gte => o != Ordering::Less,
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Lte => o != Ordering::Greater,
    }
}

/// BSON type numbers for `$type`, with MongoDB's aliases.
pub(super) fn type_number(v: &Bson) -> i32 {
    match v {
        Bson::MinKey => -1,
        Bson::MaxKey => 127,
        other => other.element_type() as i32,
    }
}

pub(super) fn parse_type_alias(v: &Bson) -> Result<Vec<i32>, QueryError> {
    let one = |v: &Bson| -> Result<Vec<i32>, QueryError> {
        if let Some(n) = number_as_f64(v) {
            return Ok(vec![n as i32]);
        }
        let name = match v {
            Bson::String(s) => s.as_str(),
            _ => {
                return Err(QueryError::bad_value(
                    "type must be represented as a number or a string",
                ))
            }
        };
        let n = match name {
            "double" => 1,
            "string" => 2,
            "object" => 3,
            "array" => 4,
            "binData" => 5,
            "undefined" => 6,
            "objectId" => 7,
            "bool" => 8,
            "date" => 9,
            "null" => 10,
            "regex" => 11,
            "dbPointer" => 12,
            "javascript" => 13,
            "symbol" => 14,
            "javascriptWithScope" => 15,
            "int" => 16,
            "timestamp" => 17,
            "long" => 18,
            "decimal" => 19,
            "minKey" => -1,
            "maxKey" => 127,
            "number" => return Ok(vec![1, 16, 18, 19]),
            other => {
                return Err(QueryError::bad_value(format!(
                    "Unknown type name alias: {other}"
                )))
            }
        };
        Ok(vec![n])
    };
    match v {
        Bson::Array(a) => {
            let mut out = Vec::new();
            for e in a {
                out.extend(one(e)?);
            }
            Ok(out)
        }
        other => one(other),
    }
}

/// The truth MongoDB gives a value used as a flag (`$exists: 0`, projections).
pub(crate) fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        other => number_as_f64(other).is_none_or(|n| n != 0.0),
    }
}

pub(super) fn eval_pred(pred: &Pred, doc: &Document, path: &str) -> bool {
    match pred {
        Pred::Eq(v) => walk_doc(doc, path, Leaf::ElementsAndWhole, &mut |x| eq_match(x, v)),
        Pred::Ne(v) => !walk_doc(doc, path, Leaf::ElementsAndWhole, &mut |x| eq_match(x, v)),
        Pred::Cmp(op, v) => walk_doc(doc, path, Leaf::ElementsAndWhole, &mut |x| {
            cmp_match(*op, x, v)
        }),
        Pred::In(vs) => walk_doc(doc, path, Leaf::ElementsAndWhole, &mut |x| {
            vs.iter().any(|v| eq_match(x, v))
        }),
        Pred::Nin(vs) => !walk_doc(doc, path, Leaf::ElementsAndWhole, &mut |x| {
            vs.iter().any(|v| eq_match(x, v))
        }),
        Pred::Exists(want) => walk_doc(doc, path, Leaf::Whole, &mut |x| x.is_some()) == *want,
        Pred::Not(ps) => !ps.iter().all(|p| eval_pred(p, doc, path)),
        Pred::All(vs) => {
            !vs.is_empty()
                && vs
                    .iter()
                    .all(|v| walk_doc(doc, path, Leaf::ElementsAndWhole, &mut |x| eq_match(x, v)))
        }
        _ => walk_doc(doc, path, Leaf::Whole, &mut |x| {
            x.is_some_and(|x| value_pred(pred, x))
        }),
    }
}

/// Evaluates a predicate on one value (for `$elemMatch` on scalars, and the
/// predicates that look at an array as a whole).
pub(super) fn value_pred(pred: &Pred, x: &Bson) -> bool {
    // Equality with `v` of the value or of one of its elements.
    let eq = |v: &Bson| eq_match(Some(x), v) || elements(x).any(|e| eq_match(Some(e), v));
    match pred {
        Pred::Eq(v) => eq(v),
        Pred::Ne(v) => !eq(v),
        Pred::Cmp(op, v) => {
            cmp_match(*op, Some(x), v) || elements(x).any(|e| cmp_match(*op, Some(e), v))
        }
        Pred::In(vs) => vs.iter().any(eq),
        Pred::Nin(vs) => !vs.iter().any(eq),
        Pred::Exists(want) => *want,
        Pred::Not(ps) => !ps.iter().all(|p| value_pred(p, x)),
        Pred::All(vs) => !vs.is_empty() && vs.iter().all(eq),
        Pred::Size(n) => matches!(x, Bson::Array(a) if a.len() == *n),
        Pred::ElemMatchDoc(e) => match x {
            Bson::Array(a) => a
                .iter()
                .any(|el| matches!(el, Bson::Document(d) if e.matches(d))),
            _ => false,
        },
        Pred::ElemMatchValue(ps) => match x {
            Bson::Array(a) => a.iter().any(|el| ps.iter().all(|p| value_pred(p, el))),
            _ => false,
        },
        Pred::Type(types) => {
            types.contains(&type_number(x)) || elements(x).any(|e| types.contains(&type_number(e)))
        }
        Pred::Mod(d, r) => {
            let m = |v: &Bson| match as_num(v) {
                Some(Num::Int(i)) => i.wrapping_rem(*d) == *r,
                Some(Num::Float(f)) => f.is_finite() && (f.trunc() as i64).wrapping_rem(*d) == *r,
                None => false,
            };
            m(x) || elements(x).any(m)
        }
    }
}

/// The elements of an array value (nothing for other values).
pub(super) fn elements(x: &Bson) -> std::slice::Iter<'_, Bson> {
    match x {
        Bson::Array(a) => a.iter(),
        _ => [].iter(),
    }
}

impl Expr {
    fn matches(&self, doc: &Document) -> bool {
        match self {
            Expr::And(es) => es.iter().all(|e| e.matches(doc)),
            Expr::Or(es) => es.iter().any(|e| e.matches(doc)),
            Expr::Nor(es) => !es.iter().any(|e| e.matches(doc)),
            Expr::Cond { path, pred } => eval_pred(pred, doc, path),
        }
    }

    fn intervals(&self, path: &str) -> Option<Vec<Interval>> {
        match self {
            Expr::And(es) => {
                let mut acc: Option<Vec<Interval>> = None;
                for e in es {
                    if let Some(list) = e.intervals(path) {
                        acc = Some(match acc {
                            None => list,
                            Some(prev) => {
                                let mut out = Vec::new();
                                for a in &prev {
                                    for b in &list {
                                        out.push(a.intersect(b));
                                    }
                                }
                                normalize(out)
                            }
                        });
                    }
                }
                acc
            }
            Expr::Or(es) => {
                let mut all = Vec::new();
                for e in es {
                    all.extend(e.intervals(path)?);
                }
                Some(normalize(all))
            }
            Expr::Nor(_) => None,
            Expr::Cond { path: p, pred, .. } => {
                if p != path {
                    return None;
                }
                pred_intervals(pred)
            }
        }
    }
}

/// Index intervals of a predicate; `None` when it cannot be expressed (the
/// caller scans). An array operand is left to a scan, since equality with
/// an array also matches documents whose array holds it as an element.
pub(super) fn pred_intervals(pred: &Pred) -> Option<Vec<Interval>> {
    match pred {
        Pred::Eq(v) if !matches!(v, Bson::Array(_)) => Some(vec![Interval::point(v.clone())]),
        Pred::In(vs) if !vs.iter().any(|v| matches!(v, Bson::Array(_))) => {
            Some(normalize(vs.iter().cloned().map(Interval::point).collect()))
        }
        Pred::Cmp(op, v) => {
            if matches!(v, Bson::Array(_)) || is_nan(v) {
                return None;
            }
            let (lo, hi) = class_bounds(v);
            let i = match op {
                CmpOp::Gt => Interval {
                    lower: Bound::Excluded(v.clone()),
                    upper: hi,
                },
                CmpOp::Gte => Interval {
                    lower: Bound::Included(v.clone()),
                    upper: hi,
                },
                CmpOp::Lt => Interval {
                    lower: lo,
                    upper: Bound::Excluded(v.clone()),
                },
                CmpOp::Lte => Interval {
                    lower: lo,
                    upper: Bound::Included(v.clone()),
                },
            };
            Some(normalize(vec![i]))
        }
        _ => None,
    }
}

pub(super) fn split_path(path: &str) -> Vec<String> {
    path.split('.').map(str::to_owned).collect()
}

pub(super) fn parse_expr(filter: &Document) -> Result<Expr, QueryError> {
    let mut terms = Vec::new();
    for (key, value) in filter {
        if let Some(op) = key.strip_prefix('$') {
            match op {
                "and" | "or" | "nor" => {
                    let list = match value {
                        Bson::Array(a) if !a.is_empty() => a,
                        _ => {
                            return Err(QueryError::bad_value(format!(
                                "{key} must be a nonempty array"
                            )))
                        }
                    };
                    let mut subs = Vec::with_capacity(list.len());
                    for item in list {
                        match item {
                            Bson::Document(d) => subs.push(parse_expr(d)?),
                            _ => {
                                return Err(QueryError::bad_value(format!(
                                    "{key} argument's entries must be objects"
                                )))
                            }
                        }
                    }
                    terms.push(match op {
                        "and" => Expr::And(subs),
                        "or" => Expr::Or(subs),
                        _ => Expr::Nor(subs),
                    });
                }
                "comment" => {}
                "expr" | "where" | "text" | "jsonSchema" | "sampleRate" => {
                    return Err(QueryError::bad_value(format!(
                        "{key} is not supported by the mongoload simulator"
                    )))
                }
                _ => {
                    return Err(QueryError::bad_value(format!(
                        "unknown top level operator: {key}. If you have a field name that \
                         starts with a '$' symbol, consider using $getField or $setField."
                    )))
                }
            }
        } else {
            for pred in parse_field(key, value)? {
                terms.push(Expr::Cond {
                    path: key.clone(),
                    pred,
                });
            }
        }
    }
    Ok(if terms.len() == 1 {
        terms.pop().unwrap_or(Expr::And(Vec::new()))
    } else {
        Expr::And(terms)
    })
}

pub(super) fn is_operator_doc(v: &Bson) -> Option<&Document> {
    match v {
        Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => Some(d),
        _ => None,
    }
}

/// Parses the condition on one field (`path`): an operator document or a
/// value for implicit equality.
pub(super) fn parse_field(path: &str, value: &Bson) -> Result<Vec<Pred>, QueryError> {
    match is_operator_doc(value) {
        Some(ops) => parse_ops(path, ops),
        None => {
            if let Bson::RegularExpression(_) = value {
                return Err(QueryError::bad_value(
                    "regular expressions are not supported by the mongoload simulator",
                ));
            }
            Ok(vec![Pred::Eq(value.clone())])
        }
    }
}

pub(super) fn array_arg<'a>(op: &str, v: &'a Bson) -> Result<&'a Vec<Bson>, QueryError> {
    match v {
        Bson::Array(a) => Ok(a),
        _ => Err(QueryError::bad_value(format!("{op} needs an array"))),
    }
}

/// The values of `$in`, `$nin` or `$all`. MongoDB matches a regular
/// expression among them as a pattern; the simulator has no regular
/// expressions, so it refuses one as it refuses them elsewhere (2).
fn value_list(op: &str, v: &Bson) -> Result<Vec<Bson>, QueryError> {
    let values = array_arg(op, v)?;
    if values
        .iter()
        .any(|e| matches!(e, Bson::RegularExpression(_)))
    {
        return Err(QueryError::bad_value(
            "regular expressions are not supported by the mongoload simulator",
        ));
    }
    Ok(values.clone())
}

/// A comparison's operand: MongoDB refuses a regular expression there.
fn comparand(path: &str, v: &Bson) -> Result<Bson, QueryError> {
    match v {
        Bson::RegularExpression(_) => Err(QueryError::bad_value(format!(
            "Can't have RegEx as arg to predicate over field '{path}'."
        ))),
        other => Ok(other.clone()),
    }
}

/// Parses an operator document on the field `path` (empty inside a
/// value `$elemMatch`).
pub(super) fn parse_ops(path: &str, ops: &Document) -> Result<Vec<Pred>, QueryError> {
    let mut preds = Vec::with_capacity(ops.len());
    for (op, arg) in ops {
        let pred = match op.as_str() {
            "$eq" => Pred::Eq(arg.clone()),
            "$ne" if matches!(arg, Bson::RegularExpression(_)) => {
                return Err(QueryError::bad_value("Can't have regex as arg to $ne."))
            }
            "$ne" => Pred::Ne(arg.clone()),
            "$gt" => Pred::Cmp(CmpOp::Gt, comparand(path, arg)?),
            "$gte" => Pred::Cmp(CmpOp::Gte, comparand(path, arg)?),
            "$lt" => Pred::Cmp(CmpOp::Lt, comparand(path, arg)?),
            "$lte" => Pred::Cmp(CmpOp::Lte, comparand(path, arg)?),
            "$in" => Pred::In(value_list(op, arg)?),
            "$nin" => Pred::Nin(value_list(op, arg)?),
            "$all" => Pred::All(value_list(op, arg)?),
            "$exists" => Pred::Exists(truthy(arg)),
            "$not" => match arg {
                Bson::RegularExpression(_) => {
                    return Err(QueryError::bad_value(
                        "regular expressions are not supported by the mongoload simulator",
                    ))
                }
                Bson::Document(d) if d.is_empty() => {
                    return Err(QueryError::bad_value("$not cannot be empty"))
                }
                Bson::Document(d) => {
                    if is_operator_doc(arg).is_none() {
                        return Err(QueryError::bad_value(format!(
                            "unknown operator: {}",
                            d.keys().next().map(String::as_str).unwrap_or("")
                        )));
                    }
                    Pred::Not(parse_ops(path, d)?)
                }
                _ => return Err(QueryError::bad_value("$not needs a regex or a document")),
            },
            "$size" => match number_as_f64(arg) {
                Some(n) if n >= 0.0 && n.fract() == 0.0 => Pred::Size(n as usize),
                Some(_) => {
                    return Err(QueryError::bad_value(
                        "Failed to parse $size. Expected a non-negative integer",
                    ))
                }
                None => {
                    return Err(QueryError::bad_value(
                        "Failed to parse $size. Expected a number",
                    ))
                }
            },
            "$elemMatch" => match arg {
                Bson::Document(d) => match is_operator_doc(arg) {
                    Some(ops) => Pred::ElemMatchValue(parse_ops("", ops)?),
                    None => Pred::ElemMatchDoc(Box::new(parse_expr(d)?)),
                },
                _ => return Err(QueryError::bad_value("$elemMatch needs an Object")),
            },
            "$type" => Pred::Type(parse_type_alias(arg)?),
            "$mod" => {
                let a = array_arg(op, arg)?;
                let nums: Vec<f64> = a.iter().filter_map(number_as_f64).collect();
                if a.len() != 2 || nums.len() != 2 {
                    return Err(QueryError::bad_value(
                        "malformed mod, needs to be an array of two numbers",
                    ));
                }
                if nums[0] as i64 == 0 {
                    return Err(QueryError::bad_value("divisor cannot be 0"));
                }
                Pred::Mod(nums[0] as i64, nums[1] as i64)
            }
            "$regex" | "$options" => {
                return Err(QueryError::bad_value(
                    "regular expressions are not supported by the mongoload simulator",
                ))
            }
            "$comment" => continue,
            other => return Err(QueryError::bad_value(format!("unknown operator: {other}"))),
        };
        preds.push(pred);
    }
    Ok(preds)
}

/// A parsed query filter.
#[derive(Debug, Clone)]
pub struct Filter {
    expr: Expr,
}

impl Filter {
    /// Parses a filter document; an unknown operator is an error (code 2).
    pub fn parse(filter: &Document) -> Result<Filter, QueryError> {
        Ok(Filter {
            expr: parse_expr(filter)?,
        })
    }

    /// Whether `doc` matches.
    pub fn matches(&self, doc: &Document) -> bool {
        self.expr.matches(doc)
    }

    /// Whether the filter is empty (`{}`), so every document matches and a
    /// count can skip the scan.
    pub fn matches_all(&self) -> bool {
        matches!(&self.expr, Expr::And(terms) if terms.is_empty())
    }

    /// The intervals that any matching document's value at `path` must lie
    /// in, from conditions on that path at the top level of the filter
    /// (implicitly or explicitly `$and`ed): equality gives a point, `$in`
    /// several points, `$gt`/`$gte`/`$lt`/`$lte` a range. `None` when the
    /// filter does not constrain `path` that way (the caller then scans).
    /// The result is a superset: callers still run `matches` on candidates.
    ///
    /// Intervals come sorted and disjoint. A range stays within its
    /// operand's type class (`$gt: 5` is `(5, first string)`). A point on
    /// null also stands for documents missing the field, so an index must
    /// file those under null, as MongoDB's do; `$or` branches that all
    /// constrain `path` give the union of their intervals.
    pub fn intervals(&self, path: &str) -> Option<Vec<Interval>> {
        self.expr.intervals(path)
    }
}
