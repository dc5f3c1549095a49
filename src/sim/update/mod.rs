//! Update documents of the simulator: replacement, and the operators
//! `$set`, `$inc`, `$unset`, `$setOnInsert` (plus `$mul`, `$min`, `$max`,
//! `$push`, `$addToSet`, `$currentDate`), applied to plain documents.

use std::cmp::Ordering;

use mongodb::bson::{Bson, Document};

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
    CurrentDate,
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

fn type_name(v: &Bson) -> &'static str {
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
                    "$currentDate" => OpKind::CurrentDate,
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
            match cur {
                // $mul on a missing field sets a zero of the operand's type.
                None if mul => arith(v, &Bson::Int32(0), true).unwrap_or(Bson::Int32(0)),
                None => v.clone(),
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
                        return Ok(false);
                    }
                    r
                }
                Some(c) => {
                    return Err(QueryError::new(
                        14,
                        "TypeMismatch",
                        format!(
                            "Cannot apply {} to a value of non-numeric type. {} has the field \
                             '{last}' of non-numeric type {}",
                            if mul { "$mul" } else { "$inc" },
                            id_text(id),
                            type_name(c)
                        ),
                    ))
                }
            }
        }
        OpKind::Unset => {
            return Ok(match parent {
                Parent::Doc(d) => d.remove(last).is_some(),
                // Unsetting an array element leaves a null in its place.
                Parent::Arr(a) => match array_index(last).and_then(|i| a.get_mut(i)) {
                    Some(slot) if !matches!(slot, Bson::Null) => {
                        *slot = Bson::Null;
                        true
                    }
                    _ => false,
                },
            });
        }
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
                return Ok(false);
            }
            Bson::Array(arr)
        }
        OpKind::CurrentDate => Bson::DateTime(mongodb::bson::DateTime::now()),
    };
    put(&mut parent, last, new)?;
    Ok(true)
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
mod tests {
    use super::*;
    use mongodb::bson::doc;

    fn upd(u: Document) -> Update {
        Update::parse(&u).expect("update parses")
    }

    /// Applies `u` to `d` and returns (changed, result).
    fn run(u: Document, mut d: Document) -> (bool, Document) {
        let changed = upd(u).apply(&mut d, false).expect("update applies");
        (changed, d)
    }

    fn err(u: Document, mut d: Document) -> QueryError {
        let before = d.clone();
        let e = match Update::parse(&u) {
            Ok(parsed) => parsed.apply(&mut d, false).unwrap_err(),
            Err(e) => e,
        };
        assert_eq!(d, before, "a failed update leaves the document alone");
        e
    }

    #[test]
    fn set_creates_intermediate_documents() {
        let (changed, d) = run(doc! {"$set": {"a.b.c": 5, "x": "y"}}, doc! {"_id": 1});
        assert!(changed);
        assert_eq!(d, doc! {"_id": 1, "a": {"b": {"c": 5}}, "x": "y"});
        let (_, d) = run(doc! {"$set": {"a.c": 6}}, doc! {"_id": 1, "a": {"b": 5}});
        assert_eq!(d, doc! {"_id": 1, "a": {"b": 5, "c": 6}});
        let (_, d) = run(
            doc! {"$set": {"l.1": 9, "m.3": 1}},
            doc! {"_id": 1, "l": [1, 2], "m": []},
        );
        assert_eq!(d, doc! {"_id": 1, "l": [1, 9], "m": [null, null, null, 1]});
    }

    #[test]
    fn set_to_the_same_value_is_not_a_modification() {
        let (changed, _) = run(doc! {"$set": {"a": 5}}, doc! {"_id": 1, "a": 5});
        assert!(!changed);
        let (changed, _) = run(
            doc! {"$set": {"a.b": [1, 2]}},
            doc! {"_id": 1, "a": {"b": [1, 2]}},
        );
        assert!(!changed);
        // A change of type is a change, even for an equal number.
        let (changed, d) = run(doc! {"$set": {"a": 5.0}}, doc! {"_id": 1, "a": 5});
        assert!(changed);
        assert_eq!(d.get("a"), Some(&Bson::Double(5.0)));
        // So is a change of field order in an embedded document.
        let (changed, _) = run(
            doc! {"$set": {"a": {"y": 1, "x": 2}}},
            doc! {"a": {"x": 2, "y": 1}},
        );
        assert!(changed);
    }

    #[test]
    fn inc_keeps_integer_types_and_widens() {
        let (changed, d) = run(
            doc! {"$inc": {"a": 1, "b": 2.5, "c": 1i64, "n": 3}},
            doc! {"_id": 1, "a": 1, "b": 1, "c": 1},
        );
        assert!(changed);
        assert_eq!(d, doc! {"_id": 1, "a": 2, "b": 3.5, "c": 2i64, "n": 3});
        let (_, d) = run(doc! {"$inc": {"a": 1}}, doc! {"a": i32::MAX});
        assert_eq!(d.get("a"), Some(&Bson::Int64(i64::from(i32::MAX) + 1)));
        let (changed, _) = run(doc! {"$inc": {"a": 0}}, doc! {"a": 7});
        assert!(!changed);
        let (_, d) = run(doc! {"$mul": {"a": 3, "z": 2.0}}, doc! {"a": 4});
        assert_eq!(d, doc! {"a": 12, "z": 0.0});
        assert_eq!(err(doc! {"$inc": {"a": 1}}, doc! {"a": i64::MAX}).code, 2);
    }

    #[test]
    fn inc_type_errors() {
        let e = err(doc! {"$inc": {"a": 1}}, doc! {"_id": 7, "a": "x"});
        assert_eq!((e.code, e.code_name), (14, "TypeMismatch"));
        assert!(
            e.message.contains("non-numeric type string"),
            "{}",
            e.message
        );
        let e = err(doc! {"$inc": {"a": "x"}}, doc! {"_id": 7});
        assert_eq!(e.code, 14);
        assert!(e
            .message
            .starts_with("Cannot increment with non-numeric argument"));
        // The whole update fails: the earlier $set is not kept.
        let e = err(
            doc! {"$set": {"b": 1}, "$inc": {"a": 1}},
            doc! {"_id": 7, "a": "x"},
        );
        assert_eq!(e.code, 14);
    }

    #[test]
    fn unset_and_set_on_insert() {
        let (changed, d) = run(
            doc! {"$unset": {"a": "", "b.c": 1}},
            doc! {"_id": 1, "a": 1, "b": {"c": 1, "d": 2}},
        );
        assert!(changed);
        assert_eq!(d, doc! {"_id": 1, "b": {"d": 2}});
        let (changed, _) = run(
            doc! {"$unset": {"zz": 1, "b.x.y": 1}},
            doc! {"_id": 1, "b": 1},
        );
        assert!(!changed);
        let (_, d) = run(doc! {"$unset": {"l.0": 1}}, doc! {"l": [1, 2]});
        assert_eq!(d, doc! {"l": [null, 2]});
        let u = upd(doc! {"$set": {"a": 1}, "$setOnInsert": {"created": true}});
        let mut d = doc! {"_id": 1};
        assert!(u.apply(&mut d, false).unwrap());
        assert_eq!(d, doc! {"_id": 1, "a": 1});
        let mut d = doc! {"_id": 1};
        assert!(u.apply(&mut d, true).unwrap());
        assert_eq!(d, doc! {"_id": 1, "a": 1, "created": true});
        let only = upd(doc! {"$setOnInsert": {"created": true}});
        let mut d = doc! {"_id": 1};
        assert!(!only.apply(&mut d, false).unwrap());
    }

    #[test]
    fn min_max_push_add_to_set() {
        let (changed, d) = run(
            doc! {"$min": {"a": 3, "b": 10, "c": 1}},
            doc! {"a": 5, "b": 5},
        );
        assert!(changed);
        assert_eq!(d, doc! {"a": 3, "b": 5, "c": 1});
        let (changed, _) = run(doc! {"$max": {"a": 5.0}}, doc! {"a": 5});
        assert!(!changed);
        let (_, d) = run(
            doc! {"$push": {"l": 3, "m": {"$each": [1, 2]}}},
            doc! {"l": [1]},
        );
        assert_eq!(d, doc! {"l": [1, 3], "m": [1, 2]});
        let (changed, d) = run(
            doc! {"$addToSet": {"l": {"$each": [1, 2, 2]}}},
            doc! {"l": [1]},
        );
        assert!(changed);
        assert_eq!(d, doc! {"l": [1, 2]});
        let (changed, _) = run(doc! {"$addToSet": {"l": 1}}, doc! {"l": [1]});
        assert!(!changed);
        assert_eq!(err(doc! {"$push": {"a": 1}}, doc! {"a": 1}).code, 2);
    }

    #[test]
    fn replacement_keeps_id_and_detects_changes() {
        let u = upd(doc! {"b": 2, "a": 1});
        assert!(u.is_replacement());
        let mut d = doc! {"x": 1, "_id": 9};
        assert!(u.apply(&mut d, false).unwrap());
        // Field order matters (Document's == ignores it): `_id` leads.
        assert!(identical_docs(&d, &doc! {"_id": 9, "b": 2, "a": 1}), "{d}");
        assert!(!u.apply(&mut d, false).unwrap());
        let same_id = upd(doc! {"_id": 9, "b": 2, "a": 1});
        assert!(!same_id.apply(&mut d, false).unwrap());
        let e = err(doc! {"_id": 10, "b": 2}, doc! {"_id": 9});
        assert_eq!((e.code, e.code_name), (66, "ImmutableField"));
        assert!(upd(doc! {}).is_replacement());
        assert!(!upd(doc! {"$set": {"a": 1}}).is_replacement());
    }

    #[test]
    fn changing_id_is_refused() {
        let e = err(doc! {"$set": {"_id": 2}}, doc! {"_id": 1});
        assert_eq!(e.code, 66);
        assert_eq!(err(doc! {"$unset": {"_id": 1}}, doc! {"_id": 1}).code, 66);
        assert_eq!(err(doc! {"$inc": {"_id": 1}}, doc! {"_id": 1}).code, 66);
        // Setting the same _id is fine, and an upsert may set a missing one.
        let (changed, _) = run(doc! {"$set": {"_id": 1}}, doc! {"_id": 1});
        assert!(!changed);
        let mut d = doc! {};
        assert!(upd(doc! {"$set": {"_id": 5}}).apply(&mut d, true).unwrap());
        assert_eq!(d, doc! {"_id": 5});
    }

    #[test]
    fn parse_errors() {
        let e = Update::parse(&doc! {"$set": {"a": 1}, "b": 2}).unwrap_err();
        assert_eq!((e.code, e.code_name), (9, "FailedToParse"));
        assert!(e.message.starts_with("Unknown modifier: b"));
        assert_eq!(
            Update::parse(&doc! {"b": 2, "$set": {"a": 1}})
                .unwrap_err()
                .code,
            9
        );
        let e = Update::parse(&doc! {"$foo": {"a": 1}}).unwrap_err();
        assert_eq!(e.code, 9);
        assert!(e.message.starts_with("Unknown modifier: $foo"));
        assert_eq!(Update::parse(&doc! {"$set": 5}).unwrap_err().code, 9);
        let e = Update::parse(&doc! {"$set": {"a": 1}, "$inc": {"a": 1}}).unwrap_err();
        assert_eq!((e.code, e.code_name), (40, "ConflictingUpdateOperators"));
        assert_eq!(
            Update::parse(&doc! {"$set": {"a.b": 1, "a": 1}})
                .unwrap_err()
                .code,
            40
        );
        assert!(Update::parse(&doc! {"$set": {"a.b": 1, "a.c": 1}}).is_ok());
        assert_eq!(Update::parse(&doc! {"$set": {"": 1}}).unwrap_err().code, 56);
        assert_eq!(
            Update::parse(&doc! {"$set": {"a..b": 1}}).unwrap_err().code,
            56
        );
        let e = err(doc! {"$set": {"a.b": 1}}, doc! {"a": 5});
        assert_eq!((e.code, e.code_name), (28, "PathNotViable"));
        assert_eq!(
            err(doc! {"$set": {"l.99999999999": 1}}, doc! {"l": []}).code,
            2
        );
        assert_eq!(
            err(doc! {"$set": {"l.99999999999.x": 1}}, doc! {"l": []}).code,
            2
        );
    }

    #[test]
    fn upsert_seed_takes_equalities() {
        let seed = upsert_seed(&doc! {
            "a": 1,
            "b.c": 2,
            "d": {"$eq": "x"},
            "e": {"$gt": 5},
            "f": {"$in": [7]},
            "g": {"$in": [7, 8]},
            "$and": [{"h": true}],
            "$or": [{"i": 1}],
            "s": {"t": 1},
        });
        assert_eq!(
            seed,
            doc! {"a": 1, "b": {"c": 2}, "d": "x", "f": 7, "s": {"t": 1}, "h": true}
        );
        let mut d = upsert_seed(&doc! {"_id": 3});
        assert!(upd(doc! {"$inc": {"n": 1}}).apply(&mut d, true).unwrap());
        assert_eq!(d, doc! {"_id": 3, "n": 1});
    }
}
