//! Update documents of the simulator: replacement, and the operators
//! `$set`, `$inc`, `$unset`, `$setOnInsert` (plus `$mul`, `$min`, `$max`,
//! `$push`, `$addToSet`, `$currentDate`), applied to plain documents.

use std::cmp::Ordering;

use bson::{Bson, Document};

use super::query::{compare, number_as_f64, QueryError};

/// One update operator applied to one path.
#[derive(Debug, Clone)]
enum OpKind {
    Set(Bson),
    SetOnInsert(Bson),
    Inc(Bson),
    Mul(Bson),
    Unset,
    Min(Bson),
    Max(Bson),
    Push(Vec<Bson>),
    AddToSet(Vec<Bson>),
    /// The current time: a Timestamp when true, else a Date.
    CurrentDate(bool),
}

#[derive(Debug, Clone)]
struct Op {
    path: String,
    parts: Vec<String>,
    kind: OpKind,
}

#[derive(Debug, Clone)]
enum Kind {
    Replace(Document),
    Ops(Vec<Op>),
}

/// A parsed update: a replacement document or a list of operators.
#[derive(Debug, Clone)]
pub struct Update {
    kind: Kind,
}

fn unknown_modifier(name: &str) -> QueryError {
    QueryError::failed_to_parse(format!(
        "Unknown modifier: {name}. Expected a valid update modifier or pipeline-style update \
         specified as an array"
    ))
}

/// A value's BSON type as MongoDB names it in messages (`int`, `object`, ...).
pub(crate) fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Array(_) => "array",
        Bson::Document(_) => "object",
        Bson::Boolean(_) => "bool",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Int64(_) => "long",
        Bson::Timestamp(_) => "timestamp",
        Bson::Binary(_) => "binData",
        Bson::ObjectId(_) => "objectId",
        Bson::DateTime(_) => "date",
        Bson::Symbol(_) => "symbol",
        Bson::Decimal128(_) => "decimal",
        Bson::Undefined => "undefined",
        Bson::MaxKey => "maxKey",
        Bson::MinKey => "minKey",
        Bson::DbPointer(_) => "dbPointer",
    }
}

/// What `$currentDate` sets a field to, as MongoDB reads its argument:
/// `true`/`false` or `{$type: "date"}` a Date, `{$type: "timestamp"}` a
/// Timestamp (true); anything else is refused with 2 BadValue.
fn current_date_is_timestamp(v: &Bson) -> Result<bool, QueryError> {
    match v {
        Bson::Boolean(_) => Ok(false),
        Bson::Document(d) => {
            let mut timestamp = None;
            for (k, t) in d {
                if k != "$type" {
                    return Err(QueryError::bad_value(format!(
                        "Unrecognized $currentDate option: {k}"
                    )));
                }
                match t.as_str() {
                    Some("date") => timestamp = Some(false),
                    Some("timestamp") => timestamp = Some(true),
                    _ => {}
                }
            }
            timestamp.ok_or_else(|| {
                QueryError::bad_value(
                    "The '$type' string field is required to be 'date' or 'timestamp': \
                     {$currentDate: {field : {$type: 'date'}}}",
                )
            })
        }
        other => Err(QueryError::bad_value(format!(
            "{} is not valid type for $currentDate. Please use a boolean ('true') or a $type \
             expression ({{$type: 'timestamp/date'}}).",
            type_name(other)
        ))),
    }
}

/// A Timestamp of the current second, its increment counting the ones
/// given out in that second: each later than the one before, as MongoDB's
/// logical clock gives them.
fn next_timestamp() -> bson::Timestamp {
    use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
    static LAST: AtomicU64 = AtomicU64::new(0);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        .min(u64::from(u32::MAX));
    let now = (secs << 32) | 1;
    let mut last = LAST.load(AtomicOrdering::Relaxed);
    let next = loop {
        let next = now.max(last + 1);
        match LAST.compare_exchange_weak(
            last,
            next,
            AtomicOrdering::Relaxed,
            AtomicOrdering::Relaxed,
        ) {
            Ok(_) => break next,
            Err(seen) => last = seen,
        }
    };
    bson::Timestamp {
        time: (next >> 32) as u32,
        increment: next as u32,
    }
}

/// `$push`/`$addToSet` take a value or `{$each: [values]}`.
fn each_values(v: &Bson) -> Result<Vec<Bson>, QueryError> {
    if let Bson::Document(d) = v {
        if let Some(each) = d.get("$each") {
            if d.len() > 1 {
                return Err(QueryError::bad_value(
                    "$push/$addToSet modifiers other than $each are not supported by the \
                     mongoload simulator",
                ));
            }
            return match each {
                Bson::Array(a) => Ok(a.clone()),
                other => Err(QueryError::bad_value(format!(
                    "The argument to $each in $push must be an array but it was of type: {}",
                    type_name(other)
                ))),
            };
        }
    }
    Ok(vec![v.clone()])
}

impl Update {
    /// Parses an update document; mixing operators and plain fields, or an
    /// unknown operator, is an error as MongoDB reports it (code 9,
    /// FailedToParse); two operators on the same path, or on a path and its
    /// parent, are code 40 (ConflictingUpdateOperators).
    pub fn parse(update: &Document) -> Result<Update, QueryError> {
        let operators = update.keys().next().is_some_and(|k| k.starts_with('$'));
        if !operators {
            if let Some(k) = update.keys().find(|k| k.starts_with('$')) {
                return Err(QueryError::failed_to_parse(format!(
                    "The dollar ($) prefixed field '{k}' is not allowed in a replacement \
                     document: an update either replaces the document or uses operators only"
                )));
            }
            return Ok(Update {
                kind: Kind::Replace(update.clone()),
            });
        }
        let mut ops = Vec::new();
        for (name, arg) in update {
            let fields = match arg {
                Bson::Document(d) => d,
                _ if !name.starts_with('$') => return Err(unknown_modifier(name)),
                other => {
                    return Err(QueryError::failed_to_parse(format!(
                        "Modifiers operate on fields but we found type {} instead. For \
                         example: {{$mod: {{<field>: ...}}}} not {{{name}: {other}}}",
                        type_name(other)
                    )))
                }
            };
            for (path, v) in fields {
                let kind = match name.as_str() {
                    "$set" => OpKind::Set(v.clone()),
                    "$setOnInsert" => OpKind::SetOnInsert(v.clone()),
                    "$inc" | "$mul" => {
                        if number_as_f64(v).is_none() {
                            let verb = if name == "$inc" {
                                "increment"
                            } else {
                                "multiply"
                            };
                            return Err(QueryError::new(
                                14,
                                "TypeMismatch",
                                format!("Cannot {verb} with non-numeric argument: {{{path}: {v}}}"),
                            ));
                        }
                        if name == "$inc" {
                            OpKind::Inc(v.clone())
                        } else {
                            OpKind::Mul(v.clone())
                        }
                    }
                    "$unset" => OpKind::Unset,
                    "$min" => OpKind::Min(v.clone()),
                    "$max" => OpKind::Max(v.clone()),
                    "$push" => OpKind::Push(each_values(v)?),
                    "$addToSet" => OpKind::AddToSet(each_values(v)?),
                    "$currentDate" => OpKind::CurrentDate(current_date_is_timestamp(v)?),
                    other => return Err(unknown_modifier(other)),
                };
                ops.push(Op {
                    path: path.clone(),
                    parts: parse_path(path)?,
                    kind,
                });
            }
        }
        check_conflicts(&ops)?;
        Ok(Update {
            kind: Kind::Ops(ops),
        })
    }

    /// Whether this update replaces the whole document.
    pub fn is_replacement(&self) -> bool {
        matches!(self.kind, Kind::Replace(_))
    }

    /// Applies the update to `doc` in place and says whether it changed.
    /// `inserting` is true on the insert half of an upsert ($setOnInsert
    /// applies then only). A replacement keeps `doc`'s `_id`; changing
    /// `_id` is an error (code 66, ImmutableField).
    ///
    /// On error `doc` is left as it was. A change is a real change of
    /// value or type (`$set` to the same value is not one), as MongoDB
    /// counts `nModified`.
    pub fn apply(&self, doc: &mut Document, inserting: bool) -> Result<bool, QueryError> {
        match &self.kind {
            Kind::Replace(r) => {
                let mut new = Document::new();
                match (doc.get("_id"), r.get("_id")) {
                    (Some(old), Some(want)) if !identical(old, want) => {
                        return Err(QueryError::new(
                            66,
                            "ImmutableField",
                            format!(
                                "After applying the update, the (immutable) field '_id' was \
                                 found to have been altered to _id: {want}"
                            ),
                        ))
                    }
                    (Some(id), _) | (None, Some(id)) => {
                        new.insert("_id", id.clone());
                    }
                    (None, None) => {}
                }
                for (k, v) in r {
                    if k != "_id" {
                        new.insert(k.clone(), v.clone());
                    }
                }
                let changed = !identical_docs(doc, &new);
                if changed {
                    *doc = new;
                }
                Ok(changed)
            }
            Kind::Ops(ops) => {
                // Work on a copy so a failing operator leaves `doc` untouched.
                let mut work = doc.clone();
                let mut changed = false;
                for op in ops {
                    if matches!(op.kind, OpKind::SetOnInsert(_)) && !inserting {
                        continue;
                    }
                    changed |= apply_op(&mut work, op, doc.get("_id"))?;
                }
                if let Some(old) = doc.get("_id") {
                    if !work.get("_id").is_some_and(|new| identical(old, new)) {
                        return Err(QueryError::new(
                            66,
                            "ImmutableField",
                            "Performing an update on the path '_id' would modify the immutable \
                             field '_id'",
                        ));
                    }
                }
                if changed {
                    *doc = work;
                }
                Ok(changed)
            }
        }
    }
}

fn parse_path(path: &str) -> Result<Vec<String>, QueryError> {
    if path.is_empty() {
        return Err(QueryError::new(
            56,
            "EmptyFieldName",
            "An empty update path is not valid.",
        ));
    }
    let parts: Vec<String> = path.split('.').map(str::to_owned).collect();
    if parts.iter().any(String::is_empty) {
        return Err(QueryError::new(
            56,
            "EmptyFieldName",
            format!("The update path '{path}' contains an empty field name, which is not allowed."),
        ));
    }
    if parts.iter().any(|p| p.starts_with('$')) {
        return Err(QueryError::bad_value(format!(
            "positional and dollar-prefixed update paths ('{path}') are not supported by the \
             mongoload simulator"
        )));
    }
    Ok(parts)
}

fn check_conflicts(ops: &[Op]) -> Result<(), QueryError> {
    for (i, a) in ops.iter().enumerate() {
        for b in &ops[i + 1..] {
            let n = a.parts.len().min(b.parts.len());
            if a.parts[..n] == b.parts[..n] {
                let (long, short) = if a.parts.len() >= b.parts.len() {
                    (a, b)
                } else {
                    (b, a)
                };
                return Err(QueryError::new(
                    40,
                    "ConflictingUpdateOperators",
                    format!(
                        "Updating the path '{}' would create a conflict at '{}'",
                        long.path, short.path
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Strict equality: same types, same values, same field order, as MongoDB
/// decides whether an update modified a document (`5` and `5.0` differ).
pub fn identical(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Document(x), Bson::Document(y)) => identical_docs(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| identical(p, q))
        }
        (Bson::Double(x), Bson::Double(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// [`identical`] for documents: same fields in the same order.
pub fn identical_docs(a: &Document, b: &Document) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((ka, va), (kb, vb))| ka == kb && identical(va, vb))
}

/// The container holding the last part of a path.
enum Parent<'a> {
    Doc(&'a mut Document),
    Arr(&'a mut Vec<Bson>),
}

fn path_not_viable(part: &str, holder: &Bson) -> QueryError {
    QueryError::new(
        28,
        "PathNotViable",
        format!("Cannot create field '{part}' in element {holder}"),
    )
}

fn array_index(part: &str) -> Option<usize> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

/// Descends one step; `create` makes missing embedded documents (and pads
/// arrays with nulls), otherwise a missing step gives `None`.
fn step<'a>(
    parent: Parent<'a>,
    part: &str,
    create: bool,
) -> Result<Option<Parent<'a>>, QueryError> {
    let slot: &'a mut Bson = match parent {
        Parent::Doc(d) => {
            if !d.contains_key(part) {
                if !create {
                    return Ok(None);
                }
                d.insert(part.to_owned(), Document::new());
            }
            match d.get_mut(part) {
                Some(v) => v,
                None => return Ok(None),
            }
        }
        Parent::Arr(a) => {
            let Some(i) = array_index(part) else {
                if create {
                    return Err(path_not_viable(part, &Bson::Array(a.clone())));
                }
                return Ok(None);
            };
            if i >= a.len() {
                if !create {
                    return Ok(None);
                }
                check_backfill(i)?;
                a.resize(i, Bson::Null);
                a.push(Bson::Document(Document::new()));
            }
            &mut a[i]
        }
    };
    match slot {
        Bson::Document(d) => Ok(Some(Parent::Doc(d))),
        Bson::Array(a) => Ok(Some(Parent::Arr(a))),
        other if create => Err(path_not_viable(part, other)),
        _ => Ok(None),
    }
}

/// MongoDB's bound on null padding when a path names an element past the
/// end of an array; it also keeps a hostile index from exhausting memory.
const MAX_BACKFILL: usize = 1_500_000;

fn check_backfill(index: usize) -> Result<(), QueryError> {
    if index >= MAX_BACKFILL {
        return Err(QueryError::bad_value(format!(
            "can't backfill array to larger than {MAX_BACKFILL} elements"
        )));
    }
    Ok(())
}

fn get<'a>(parent: &'a Parent<'_>, key: &str) -> Option<&'a Bson> {
    match parent {
        Parent::Doc(d) => d.get(key),
        Parent::Arr(a) => a.get(array_index(key)?),
    }
}

fn put(parent: &mut Parent<'_>, key: &str, value: Bson) -> Result<(), QueryError> {
    match parent {
        Parent::Doc(d) => {
            d.insert(key.to_owned(), value);
        }
        Parent::Arr(a) => {
            let Some(i) = array_index(key) else {
                return Err(path_not_viable(key, &Bson::Array(a.to_vec())));
            };
            if i >= a.len() {
                check_backfill(i)?;
                a.resize(i + 1, Bson::Null);
            }
            a[i] = value;
        }
    }
    Ok(())
}

/// Adds or multiplies two numbers with MongoDB's type rules: integers stay
/// integers (int32 widening to int64 on overflow), anything with a double
/// gives a double. `None` on int64 overflow, which MongoDB refuses.
fn arith(a: &Bson, b: &Bson, mul: bool) -> Option<Bson> {
    let int = |v: &Bson| match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        _ => None,
    };
    match (int(a), int(b)) {
        (Some(x), Some(y)) => {
            let r = if mul {
                x.checked_mul(y)?
            } else {
                x.checked_add(y)?
            };
            let both32 = matches!((a, b), (Bson::Int32(_), Bson::Int32(_)));
            Some(match i32::try_from(r) {
                Ok(small) if both32 => Bson::Int32(small),
                _ => Bson::Int64(r),
            })
        }
        _ => {
            let (x, y) = (number_as_f64(a)?, number_as_f64(b)?);
            Some(Bson::Double(if mul { x * y } else { x + y }))
        }
    }
}

fn id_text(id: Option<&Bson>) -> String {
    match id {
        Some(id) => format!("{{_id: {id}}}"),
        None => "{}".to_owned(),
    }
}

/// Applies one operator; returns whether the document changed.
fn apply_op(doc: &mut Document, op: &Op, id: Option<&Bson>) -> Result<bool, QueryError> {
    let (last, prefix) = match op.parts.split_last() {
        Some(x) => x,
        None => return Ok(false),
    };
    let create = !matches!(op.kind, OpKind::Unset);
    let mut parent = Parent::Doc(doc);
    for part in prefix {
        match step(parent, part, create)? {
            Some(p) => parent = p,
            None => return Ok(false),
        }
    }
    let cur = get(&parent, last);
    let new = match &op.kind {
        OpKind::Set(v) | OpKind::SetOnInsert(v) => {
            if cur.is_some_and(|c| identical(c, v)) {
                return Ok(false);
            }
            v.clone()
        }
        OpKind::Inc(v) | OpKind::Mul(v) => {
            let mul = matches!(op.kind, OpKind::Mul(_));
            let Some(r) = arithmetic(cur, v, mul, last, id)? else {
                return Ok(false);
            };
            r
        }
        OpKind::Unset => return Ok(unset(parent, last)),
        OpKind::Min(v) | OpKind::Max(v) => {
            let want = if matches!(op.kind, OpKind::Min(_)) {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            match cur {
                Some(c) if compare(v, c) != want => return Ok(false),
                _ => v.clone(),
            }
        }
        OpKind::Push(vals) | OpKind::AddToSet(vals) => {
            let set = matches!(op.kind, OpKind::AddToSet(_));
            let Some(arr) = pushed(cur, vals, set, last, id)? else {
                return Ok(false);
            };
            arr
        }
        OpKind::CurrentDate(false) => Bson::DateTime(bson::DateTime::now()),
        OpKind::CurrentDate(true) => Bson::Timestamp(next_timestamp()),
    };
    put(&mut parent, last, new)?;
    Ok(true)
}

/// `$inc` (or `$mul`, `mul`) of `v` on the field `last` whose value is
/// `cur`: the new value, or none when it does not change.
fn arithmetic(
    cur: Option<&Bson>,
    v: &Bson,
    mul: bool,
    last: &str,
    id: Option<&Bson>,
) -> Result<Option<Bson>, QueryError> {
    match cur {
        // $mul on a missing field sets a zero of the operand's type.
        None if mul => Ok(Some(
            arith(v, &Bson::Int32(0), true).unwrap_or(Bson::Int32(0)),
        )),
        None => Ok(Some(v.clone())),
        Some(c) if number_as_f64(c).is_some() => {
            let Some(r) = arith(c, v, mul) else {
                return Err(QueryError::bad_value(format!(
                    "Failed to apply {} operations to current value ({c}) for document \
                     {}: integer overflow",
                    if mul { "$mul" } else { "$inc" },
                    id_text(id)
                )));
            };
            if identical(c, &r) {
                return Ok(None);
            }
            Ok(Some(r))
        }
        Some(c) => Err(QueryError::new(
            14,
            "TypeMismatch",
            format!(
                "Cannot apply {} to a value of non-numeric type. {} has the field \
                 '{last}' of non-numeric type {}",
                if mul { "$mul" } else { "$inc" },
                id_text(id),
                type_name(c)
            ),
        )),
    }
}

/// `$unset` of the field `last` of `parent`: whether it was there.
fn unset(parent: Parent, last: &str) -> bool {
    match parent {
        Parent::Doc(d) => d.remove(last).is_some(),
        // Unsetting an array element leaves a null in its place.
        Parent::Arr(a) => match array_index(last).and_then(|i| a.get_mut(i)) {
            Some(slot) if !matches!(slot, Bson::Null) => {
                *slot = Bson::Null;
                true
            }
            _ => false,
        },
    }
}

/// `$push` (or `$addToSet`, `set`) of `vals` on the field `last` whose
/// value is `cur`: the new array, or none when it does not change.
fn pushed(
    cur: Option<&Bson>,
    vals: &[Bson],
    set: bool,
    last: &str,
    id: Option<&Bson>,
) -> Result<Option<Bson>, QueryError> {
    let mut arr = match cur {
        None => Vec::new(),
        Some(Bson::Array(a)) => a.clone(),
        Some(other) => {
            return Err(QueryError::bad_value(format!(
                "The field '{last}' must be an array but is of type {} in document {}",
                type_name(other),
                id_text(id)
            )))
        }
    };
    let before = arr.len();
    for v in vals {
        if !set || !arr.iter().any(|e| compare(e, v) == Ordering::Equal) {
            arr.push(v.clone());
        }
    }
    if cur.is_some() && arr.len() == before {
        return Ok(None);
    }
    Ok(Some(Bson::Array(arr)))
}

/// The document an upsert starts from: the equality conditions of the
/// filter (`{a: 1, "b.c": 2}` gives `{a: 1, b: {c: 2}}`), before the update
/// is applied with `inserting = true`.
///
/// Equality means a plain value, `{$eq: v}`, or `{$in: [v]}` with one
/// element, at the top level or inside `$and`; other conditions add nothing.
pub fn upsert_seed(filter: &Document) -> Document {
    let mut out = Document::new();
    collect_equalities(filter, &mut out);
    out
}

fn collect_equalities(filter: &Document, out: &mut Document) {
    for (k, v) in filter {
        if k == "$and" {
            if let Bson::Array(items) = v {
                for item in items {
                    if let Bson::Document(d) = item {
                        collect_equalities(d, out);
                    }
                }
            }
            continue;
        }
        if k.starts_with('$') {
            continue;
        }
        let value = match v {
            Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
                match (d.get("$eq"), d.get("$in")) {
                    (Some(eq), _) => eq.clone(),
                    (None, Some(Bson::Array(a))) if a.len() == 1 => a[0].clone(),
                    _ => continue,
                }
            }
            Bson::RegularExpression(_) => continue,
            other => other.clone(),
        };
        let Ok(parts) = parse_path(k) else { continue };
        let op = Op {
            path: k.clone(),
            parts,
            kind: OpKind::Set(value),
        };
        // A seed that cannot hold the path (`a: 1` and `a.b: 2`) keeps what it has.
        let _ = apply_op(out, &op, None);
    }
}

#[cfg(test)]
mod tests;
