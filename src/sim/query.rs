//! Query semantics of the simulator, as plain functions on BSON values:
//! MongoDB's comparison order, dotted paths, filters, sorts and projections.
//! No I/O and no storage here: the store and the command layer call in.

use std::cmp::Ordering;

use mongodb::bson::{Bson, Document};

/// A failure MongoDB reports as a command error (`ok: 0`, `code`, `codeName`, `errmsg`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code_name} ({code}): {message}")]
pub struct QueryError {
    /// MongoDB's numeric error code (2 BadValue, 9 FailedToParse, ...).
    pub code: i32,
    /// MongoDB's `codeName` for `code`.
    pub code_name: &'static str,
    /// The `errmsg` text, worded as MongoDB words it where it matters.
    pub message: String,
}

impl QueryError {
    /// Code 2, BadValue: the usual answer to a malformed filter, update or stage.
    pub fn bad_value(message: impl Into<String>) -> Self {
        QueryError {
            code: 2,
            code_name: "BadValue",
            message: message.into(),
        }
    }

    /// An error with any code; `code_name` is MongoDB's name for `code`.
    pub fn new(code: i32, code_name: &'static str, message: impl Into<String>) -> Self {
        QueryError {
            code,
            code_name,
            message: message.into(),
        }
    }

    /// Code 9, FailedToParse.
    pub fn failed_to_parse(message: impl Into<String>) -> Self {
        QueryError::new(9, "FailedToParse", message)
    }
}

/// Rank of a value's type in the comparison order. Numbers share one rank,
/// as do strings and symbols (MongoDB's "canonical type").
fn type_rank(v: &Bson) -> u8 {
    match v {
        Bson::MinKey => 0,
        Bson::Undefined => 1,
        Bson::Null => 2,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 3,
        Bson::String(_) | Bson::Symbol(_) => 4,
        Bson::Document(_) => 5,
        Bson::Array(_) => 6,
        Bson::Binary(_) => 7,
        Bson::ObjectId(_) => 8,
        Bson::Boolean(_) => 9,
        Bson::DateTime(_) => 10,
        Bson::Timestamp(_) => 11,
        Bson::RegularExpression(_) => 12,
        Bson::DbPointer(_) => 13,
        Bson::JavaScriptCode(_) => 14,
        Bson::JavaScriptCodeWithScope(_) => 15,
        Bson::MaxKey => 16,
    }
}

/// Whether two values belong to the same comparison class (both numbers,
/// both strings, ...): MongoDB's `$gt`/`$lt` only compare within a class.
pub fn same_type_class(a: &Bson, b: &Bson) -> bool {
    type_rank(a) == type_rank(b)
}

/// A number reduced to what comparison needs: exact integers or a double.
#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

fn as_num(v: &Bson) -> Option<Num> {
    match v {
        Bson::Int32(i) => Some(Num::Int(i64::from(*i))),
        Bson::Int64(i) => Some(Num::Int(*i)),
        Bson::Double(f) => Some(Num::Float(*f)),
        Bson::Decimal128(d) => Some(Num::Float(decimal_to_f64(&d.bytes()))),
        _ => None,
    }
}

/// The numeric value of a number as a double (`None` for other types).
/// Decimal128 is converted to the nearest double: the simulator does no
/// decimal arithmetic.
pub fn number_as_f64(v: &Bson) -> Option<f64> {
    as_num(v).map(|n| match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    })
}

/// Exact powers of ten a double holds without rounding.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Converts an IEEE 754-2008 decimal128 (BID encoding, little-endian bytes as
/// BSON stores them) to the nearest double, close enough for ordering.
fn decimal_to_f64(bytes: &[u8; 16]) -> f64 {
    let mut lo_bytes = [0u8; 8];
    let mut hi_bytes = [0u8; 8];
    lo_bytes.copy_from_slice(&bytes[..8]);
    hi_bytes.copy_from_slice(&bytes[8..]);
    let lo = u64::from_le_bytes(lo_bytes);
    let hi = u64::from_le_bytes(hi_bytes);
    let negative = hi >> 63 == 1;
    let sign = if negative { -1.0 } else { 1.0 };
    if (hi >> 61) & 3 == 3 {
        return match (hi >> 58) & 0x1f {
            0x1e => sign * f64::INFINITY,
            0x1f => f64::NAN,
            // A coefficient above 10^34 - 1 is non-canonical and reads as zero.
            _ => sign * 0.0,
        };
    }
    let exponent = ((hi >> 49) & 0x3fff) as i32 - 6176;
    let coefficient = (u128::from(hi & ((1u64 << 49) - 1)) << 64) | u128::from(lo);
    if coefficient >= 10u128.pow(34) {
        return sign * 0.0;
    }
    let mut value = coefficient as f64;
    let mut e = exponent;
    while e > 22 {
        value *= 1e22;
        e -= 22;
    }
    while e < -22 {
        value /= 1e22;
        e += 22;
    }
    value = if e >= 0 {
        value * POW10[e as usize]
    } else {
        value / POW10[(-e) as usize]
    };
    sign * value
}

/// Compares an integer and a double exactly (no rounding of large integers).
fn cmp_int_float(i: i64, f: f64) -> Ordering {
    if f.is_nan() {
        return Ordering::Greater;
    }
    // 2^63 as a double: every i64 is below it, and at or above -2^63.
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if f >= TWO_63 {
        return Ordering::Less;
    }
    if f < -TWO_63 {
        return Ordering::Greater;
    }
    let t = f.trunc();
    match i.cmp(&(t as i64)) {
        Ordering::Equal => {
            if f > t {
                Ordering::Less
            } else if f < t {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        o => o,
    }
}

fn cmp_float(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        // Neither is NaN, so partial_cmp answers (and -0.0 == 0.0).
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

fn cmp_num(a: Num, b: Num) -> Ordering {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        (Num::Float(x), Num::Float(y)) => cmp_float(x, y),
        (Num::Int(x), Num::Float(y)) => cmp_int_float(x, y),
        (Num::Float(x), Num::Int(y)) => cmp_int_float(y, x).reverse(),
    }
}

fn is_nan(v: &Bson) -> bool {
    match v {
        Bson::Double(f) => f.is_nan(),
        Bson::Decimal128(d) => decimal_to_f64(&d.bytes()).is_nan(),
        _ => false,
    }
}

fn str_of(v: &Bson) -> &str {
    match v {
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => s,
        _ => "",
    }
}

/// Compares two documents as MongoDB does: element by element, each by
/// type class, then field name, then value; a prefix sorts first.
fn cmp_docs(a: &Document, b: &Document) -> Ordering {
    let mut ia = a.iter();
    let mut ib = b.iter();
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let o = type_rank(va)
                    .cmp(&type_rank(vb))
                    .then_with(|| ka.as_bytes().cmp(kb.as_bytes()))
                    .then_with(|| compare(va, vb));
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

/// Compares two values in MongoDB's BSON comparison order: MinKey < null <
/// numbers (int32, int64, double, decimal compared by value) < string <
/// object < array < binary < ObjectId < bool < date < timestamp < regex < MaxKey.
///
/// Undefined sorts just below null. NaN sorts below every other number and
/// equals itself, so the order is total. DBPointers (deprecated, fields not
/// reachable through the bson crate) all compare equal to each other.
/// Decimal128 values compare through their nearest double.
pub fn compare(a: &Bson, b: &Bson) -> Ordering {
    let (ra, rb) = (type_rank(a), type_rank(b));
    if ra != rb {
        return ra.cmp(&rb);
    }
    match (a, b) {
        (Bson::Document(x), Bson::Document(y)) => cmp_docs(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            for (p, q) in x.iter().zip(y.iter()) {
                let o = compare(p, q);
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Bson::Binary(x), Bson::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then_with(|| u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then_with(|| x.bytes.cmp(&y.bytes)),
        (Bson::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::DateTime(x), Bson::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (Bson::Timestamp(x), Bson::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (Bson::RegularExpression(x), Bson::RegularExpression(y)) => x
            .pattern
            .cmp(&y.pattern)
            .then_with(|| x.options.cmp(&y.options)),
        (Bson::JavaScriptCodeWithScope(x), Bson::JavaScriptCodeWithScope(y)) => x
            .code
            .cmp(&y.code)
            .then_with(|| cmp_docs(&x.scope, &y.scope)),
        _ => match (as_num(a), as_num(b)) {
            (Some(x), Some(y)) => cmp_num(x, y),
            // Same rank and not numbers: strings/symbols, code, or unit types
            // (MinKey, null, ...), for which both strings are empty.
            _ => str_of(a).as_bytes().cmp(str_of(b).as_bytes()),
        },
    }
}

/// A BSON value ordered by [`compare`], for `BTreeMap` index keys and
/// `$group` keys: `IndexKey(Int32(5)) == IndexKey(Double(5.0))`.
#[derive(Debug, Clone)]
pub struct IndexKey(pub Bson);

impl PartialEq for IndexKey {
    fn eq(&self, other: &Self) -> bool {
        compare(&self.0, &other.0) == Ordering::Equal
    }
}
impl Eq for IndexKey {}
impl PartialOrd for IndexKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for IndexKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(&self.0, &other.0)
    }
}

/// A compound index key (one value per indexed field), ordered field by
/// field with [`compare`]. Field directions are the storage's concern.
#[derive(Debug, Clone)]
pub struct CompoundKey(pub Vec<Bson>);

impl PartialEq for CompoundKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for CompoundKey {}
impl PartialOrd for CompoundKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for CompoundKey {
    fn cmp(&self, other: &Self) -> Ordering {
        for (a, b) in self.0.iter().zip(other.0.iter()) {
            let o = compare(a, b);
            if o != Ordering::Equal {
                return o;
            }
        }
        self.0.len().cmp(&other.0.len())
    }
}

/// Whether a path component addresses an array element (all ASCII digits).
fn array_index(part: &str) -> Option<usize> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

/// The value at a dotted path (`a.b.c`), descending into embedded documents
/// (and array elements by numeric index). `None` when a part is missing.
pub fn get_path<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    let mut parts = path.split('.');
    let mut cur = doc.get(parts.next()?)?;
    for part in parts {
        cur = match cur {
            Bson::Document(d) => d.get(part)?,
            Bson::Array(a) => a.get(array_index(part)?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Every value a query on `path` considers, as MongoDB's `distinct` sees
/// them: through arrays of embedded documents, and with arrays at the end
/// of the path expanded into their elements.
pub fn values_at_path<'a>(doc: &'a Document, path: &str) -> Vec<&'a Bson> {
    let mut out = Vec::new();
    walk_doc(doc, path, Leaf::Elements, &mut |v| {
        // An empty array stands for undefined in sort keys; distinct skips it.
        if let Some(v) = v.filter(|v| !std::ptr::eq(*v, &UNDEFINED)) {
            out.push(v);
        }
        false
    });
    out
}

/// What a walk hands to its callback when the path ends on an array.
#[derive(Clone, Copy, PartialEq)]
enum Leaf {
    /// The array itself only (`$size`, `$elemMatch`).
    Whole,
    /// Each element, then the array itself (equality, comparisons).
    ElementsAndWhole,
    /// Each element only (sort keys, distinct); an empty array gives undefined.
    Elements,
}

static UNDEFINED: Bson = Bson::Undefined;
static NULL: Bson = Bson::Null;

/// Splits a dotted path into its first component and the rest.
fn split_first(path: &str) -> (&str, Option<&str>) {
    match path.split_once('.') {
        Some((head, tail)) => (head, Some(tail)),
        None => (path, None),
    }
}

/// Calls `f` on each value at the dotted `path` below `doc` as a query sees
/// them (`None` where the path is missing) until `f` says true; returns
/// whether it did. No allocation: this is the hot path of `matches`.
fn walk_doc<'a, F: FnMut(Option<&'a Bson>) -> bool>(
    doc: &'a Document,
    path: &str,
    leaf: Leaf,
    f: &mut F,
) -> bool {
    let (head, tail) = split_first(path);
    match doc.get(head) {
        None => f(None),
        Some(v) => walk(v, tail, leaf, f),
    }
}

fn walk<'a, F: FnMut(Option<&'a Bson>) -> bool>(
    v: &'a Bson,
    rest: Option<&str>,
    leaf: Leaf,
    f: &mut F,
) -> bool {
    let Some(rest) = rest else {
        if let Bson::Array(a) = v {
            match leaf {
                Leaf::Whole => {}
                Leaf::ElementsAndWhole => {
                    if a.iter().any(|e| f(Some(e))) {
                        return true;
                    }
                }
                Leaf::Elements => {
                    if a.is_empty() {
                        return f(Some(&UNDEFINED));
                    }
                    return a.iter().any(|e| f(Some(e)));
                }
            }
        }
        return f(Some(v));
    };
    match v {
        Bson::Document(d) => walk_doc(d, rest, leaf, f),
        Bson::Array(a) => {
            let (head, tail) = split_first(rest);
            if let Some(i) = array_index(head) {
                if let Some(e) = a.get(i) {
                    if walk(e, tail, leaf, f) {
                        return true;
                    }
                }
            }
            // Only embedded documents carry the path on (and count as
            // missing when they lack it): scalars and an empty array give
            // nothing, so `{"a.b": null}` does not match `a: [5]` or `a: []`.
            a.iter()
                .any(|e| matches!(e, Bson::Document(d) if walk_doc(d, rest, leaf, f)))
        }
        _ => f(None),
    }
}

/// One end of an interval on an indexed field.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    /// No limit on this side.
    Unbounded,
    /// The value itself is in the interval.
    Included(Bson),
    /// Values up to (or from) this one, not the value itself.
    Excluded(Bson),
}

/// A range of values of one field, for index planning.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    /// The low end, in [`compare`] order.
    pub lower: Bound,
    /// The high end, in [`compare`] order.
    pub upper: Bound,
}

impl Interval {
    /// The interval holding `v` only.
    pub fn point(v: Bson) -> Interval {
        Interval {
            lower: Bound::Included(v.clone()),
            upper: Bound::Included(v),
        }
    }

    /// Whether `v` lies in the interval.
    pub fn contains(&self, v: &Bson) -> bool {
        let above = match &self.lower {
            Bound::Unbounded => true,
            Bound::Included(l) => compare(v, l) != Ordering::Less,
            Bound::Excluded(l) => compare(v, l) == Ordering::Greater,
        };
        let below = match &self.upper {
            Bound::Unbounded => true,
            Bound::Included(u) => compare(v, u) != Ordering::Greater,
            Bound::Excluded(u) => compare(v, u) == Ordering::Less,
        };
        above && below
    }

    fn is_empty(&self) -> bool {
        match (&self.lower, &self.upper) {
            (Bound::Included(l), Bound::Included(u)) => compare(l, u) == Ordering::Greater,
            (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(u))
            | (Bound::Excluded(l), Bound::Included(u)) => compare(l, u) != Ordering::Less,
            _ => false,
        }
    }

    fn intersect(&self, other: &Interval) -> Interval {
        Interval {
            lower: tighter_lower(&self.lower, &other.lower),
            upper: tighter_upper(&self.upper, &other.upper),
        }
    }
}

fn tighter_lower(a: &Bound, b: &Bound) -> Bound {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x.clone(),
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            match compare(x, y) {
                Ordering::Greater => a.clone(),
                Ordering::Less => b.clone(),
                Ordering::Equal => {
                    if matches!(a, Bound::Excluded(_)) {
                        a.clone()
                    } else {
                        b.clone()
                    }
                }
            }
        }
    }
}

fn tighter_upper(a: &Bound, b: &Bound) -> Bound {
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x.clone(),
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            match compare(x, y) {
                Ordering::Less => a.clone(),
                Ordering::Greater => b.clone(),
                Ordering::Equal => {
                    if matches!(a, Bound::Excluded(_)) {
                        a.clone()
                    } else {
                        b.clone()
                    }
                }
            }
        }
    }
}

/// Orders lower bounds: unbounded first, then by value, included before excluded.
fn cmp_lower(a: &Bound, b: &Bound) -> Ordering {
    match (a, b) {
        (Bound::Unbounded, Bound::Unbounded) => Ordering::Equal,
        (Bound::Unbounded, _) => Ordering::Less,
        (_, Bound::Unbounded) => Ordering::Greater,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            compare(x, y)
                .then_with(|| matches!(a, Bound::Excluded(_)).cmp(&matches!(b, Bound::Excluded(_))))
        }
    }
}

/// Whether an interval whose upper bound is `upper` overlaps or touches
/// one starting at `lower`, so the two can merge.
fn reaches(upper: &Bound, lower: &Bound) -> bool {
    match (upper, lower) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Included(u), Bound::Included(l)) => compare(u, l) != Ordering::Less,
        (Bound::Included(u) | Bound::Excluded(u), Bound::Included(l) | Bound::Excluded(l)) => {
            compare(u, l) == Ordering::Greater
        }
    }
}

fn looser_upper(a: &Bound, b: &Bound) -> Bound {
    match (a, b) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => Bound::Unbounded,
        (Bound::Included(x) | Bound::Excluded(x), Bound::Included(y) | Bound::Excluded(y)) => {
            match compare(x, y) {
                Ordering::Greater => a.clone(),
                Ordering::Less => b.clone(),
                Ordering::Equal => {
                    if matches!(a, Bound::Included(_)) {
                        a.clone()
                    } else {
                        b.clone()
                    }
                }
            }
        }
    }
}

/// Sorts intervals and merges overlapping ones, so an index scan over the
/// list visits each key once.
fn normalize(mut list: Vec<Interval>) -> Vec<Interval> {
    list.retain(|i| !i.is_empty());
    list.sort_by(|a, b| cmp_lower(&a.lower, &b.lower));
    let mut out: Vec<Interval> = Vec::with_capacity(list.len());
    for i in list {
        if let Some(last) = out.last_mut() {
            if reaches(&last.upper, &i.lower) {
                last.upper = looser_upper(&last.upper, &i.upper);
                continue;
            }
        }
        out.push(i);
    }
    out
}

/// The smallest value of `v`'s type class (inclusive) and the smallest value
/// of the next class (exclusive): the range `$gt`/`$lt` stay within.
fn class_bounds(v: &Bson) -> (Bound, Bound) {
    use mongodb::bson::{spec::BinarySubtype, Binary, Regex, Timestamp};
    let first = |rank: u8| -> Bound {
        let v = match rank {
            0 => Bson::MinKey,
            1 => Bson::Undefined,
            2 => Bson::Null,
            3 => Bson::Double(f64::NAN),
            4 => Bson::String(String::new()),
            5 => Bson::Document(Document::new()),
            6 => Bson::Array(Vec::new()),
            7 => Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: Vec::new(),
            }),
            8 => Bson::ObjectId(mongodb::bson::oid::ObjectId::from_bytes([0; 12])),
            9 => Bson::Boolean(false),
            10 => Bson::DateTime(mongodb::bson::DateTime::from_millis(i64::MIN)),
            11 => Bson::Timestamp(Timestamp {
                time: 0,
                increment: 0,
            }),
            12 => Bson::RegularExpression(Regex {
                pattern: String::new(),
                options: String::new(),
            }),
            // DBPointers cannot be built; the next class starts below it.
            _ => return Bound::Unbounded,
        };
        Bound::Included(v)
    };
    let rank = type_rank(v);
    if rank == 0 || rank >= 12 {
        return (Bound::Unbounded, Bound::Unbounded);
    }
    let upper = match first(rank + 1) {
        Bound::Included(x) => Bound::Excluded(x),
        other => other,
    };
    (first(rank), upper)
}

/// Comparison operators of a filter.
#[derive(Debug, Clone, Copy, PartialEq)]
enum CmpOp {
    Gt,
    Gte,
    Lt,
    Lte,
}

/// A condition on the value(s) at one path.
#[derive(Debug, Clone)]
enum Pred {
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
enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Nor(Vec<Expr>),
    Cond { path: String, pred: Pred },
}

fn eq_match(x: Option<&Bson>, v: &Bson) -> bool {
    match x {
        None => matches!(v, Bson::Null),
        Some(x) => compare(x, v) == Ordering::Equal,
    }
}

fn cmp_match(op: CmpOp, x: Option<&Bson>, v: &Bson) -> bool {
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
fn type_number(v: &Bson) -> i32 {
    match v {
        Bson::MinKey => -1,
        Bson::MaxKey => 127,
        other => other.element_type() as i32,
    }
}

fn parse_type_alias(v: &Bson) -> Result<Vec<i32>, QueryError> {
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

fn eval_pred(pred: &Pred, doc: &Document, path: &str) -> bool {
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
fn value_pred(pred: &Pred, x: &Bson) -> bool {
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
fn elements(x: &Bson) -> std::slice::Iter<'_, Bson> {
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
fn pred_intervals(pred: &Pred) -> Option<Vec<Interval>> {
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

fn split_path(path: &str) -> Vec<String> {
    path.split('.').map(str::to_owned).collect()
}

fn parse_expr(filter: &Document) -> Result<Expr, QueryError> {
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
            for pred in parse_field(value)? {
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

fn is_operator_doc(v: &Bson) -> Option<&Document> {
    match v {
        Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => Some(d),
        _ => None,
    }
}

/// Parses the condition on one field: an operator document or a value for
/// implicit equality.
fn parse_field(value: &Bson) -> Result<Vec<Pred>, QueryError> {
    match is_operator_doc(value) {
        Some(ops) => parse_ops(ops),
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

fn array_arg<'a>(op: &str, v: &'a Bson) -> Result<&'a Vec<Bson>, QueryError> {
    match v {
        Bson::Array(a) => Ok(a),
        _ => Err(QueryError::bad_value(format!("{op} needs an array"))),
    }
}

fn parse_ops(ops: &Document) -> Result<Vec<Pred>, QueryError> {
    let mut preds = Vec::with_capacity(ops.len());
    for (op, arg) in ops {
        let pred = match op.as_str() {
            "$eq" => Pred::Eq(arg.clone()),
            "$ne" => Pred::Ne(arg.clone()),
            "$gt" => Pred::Cmp(CmpOp::Gt, arg.clone()),
            "$gte" => Pred::Cmp(CmpOp::Gte, arg.clone()),
            "$lt" => Pred::Cmp(CmpOp::Lt, arg.clone()),
            "$lte" => Pred::Cmp(CmpOp::Lte, arg.clone()),
            "$in" => Pred::In(array_arg(op, arg)?.clone()),
            "$nin" => Pred::Nin(array_arg(op, arg)?.clone()),
            "$all" => Pred::All(array_arg(op, arg)?.clone()),
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
                    Pred::Not(parse_ops(d)?)
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
                    Some(ops) => Pred::ElemMatchValue(parse_ops(ops)?),
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

/// A parsed sort specification (`{a: 1, b: -1}`).
#[derive(Debug, Clone)]
pub struct SortSpec {
    fields: Vec<(String, i32)>,
}

/// The value a document sorts by on `path`: the smallest element of an
/// array ascending, the largest descending; null when missing.
fn sort_key<'a>(doc: &'a Document, path: &str, dir: i32) -> &'a Bson {
    let mut best: Option<&'a Bson> = None;
    walk_doc(doc, path, Leaf::Elements, &mut |x| {
        let x = x.unwrap_or(&NULL);
        let better = match best {
            None => true,
            Some(b) => {
                let o = compare(x, b);
                if dir >= 0 {
                    o == Ordering::Less
                } else {
                    o == Ordering::Greater
                }
            }
        };
        if better {
            best = Some(x);
        }
        false
    });
    best.unwrap_or(&NULL)
}

impl SortSpec {
    /// Parses `{field: 1 | -1, ...}`; other directions are an error (code
    /// 15975). An empty spec sorts nothing.
    pub fn parse(spec: &Document) -> Result<SortSpec, QueryError> {
        let mut fields = Vec::with_capacity(spec.len());
        for (k, v) in spec {
            let dir = match number_as_f64(v) {
                Some(1.0) => 1,
                Some(-1.0) => -1,
                _ => {
                    return Err(QueryError::new(
                        15975,
                        "Location15975",
                        "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                    ))
                }
            };
            if k.is_empty() {
                return Err(QueryError::new(
                    40352,
                    "Location40352",
                    "FieldPath cannot be constructed with empty string",
                ));
            }
            fields.push((k.clone(), dir));
        }
        Ok(SortSpec { fields })
    }

    /// The sort keys in order, with direction 1 or -1.
    pub fn fields(&self) -> &[(String, i32)] {
        &self.fields
    }

    /// Orders two documents by this spec (missing fields sort as null).
    /// Use a stable sort so that ties keep their input order.
    pub fn compare(&self, a: &Document, b: &Document) -> Ordering {
        for (path, dir) in &self.fields {
            let o = compare(sort_key(a, path, *dir), sort_key(b, path, *dir));
            let o = if *dir < 0 { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// Sorts `docs` in place by this spec, stably.
    pub fn sort(&self, docs: &mut [Document]) {
        if !self.fields.is_empty() {
            docs.sort_by(|a, b| self.compare(a, b));
        }
    }
}

/// A computed value of a projection or `$group`: an aggregation expression
/// of the few forms the simulator evaluates.
#[derive(Debug, Clone)]
pub(crate) enum ValueExpr {
    /// `"$a.b"`: the value at a path, through arrays as aggregation does.
    Path(Vec<String>),
    /// `"$$ROOT"` / `"$$CURRENT"`.
    Root,
    /// A constant (or `{$literal: v}`).
    Literal(Bson),
    /// `{k: expr, ...}`: a document of expressions.
    Object(Vec<(String, ValueExpr)>),
}

impl ValueExpr {
    /// Parses an expression; unsupported operators are an error (code 168).
    pub(crate) fn parse(v: &Bson) -> Result<ValueExpr, QueryError> {
        match v {
            Bson::String(s) if s.starts_with("$$") => match s.as_str() {
                "$$ROOT" | "$$CURRENT" => Ok(ValueExpr::Root),
                _ => Err(QueryError::new(
                    17276,
                    "Location17276",
                    format!("Use of undefined variable: {}", &s[2..]),
                )),
            },
            Bson::String(s) if s.starts_with('$') => {
                if s.len() == 1 {
                    return Err(QueryError::new(
                        16872,
                        "Location16872",
                        "'$' by itself is not a valid FieldPath",
                    ));
                }
                Ok(ValueExpr::Path(split_path(&s[1..])))
            }
            Bson::Document(d) => {
                if let Some((k, arg)) = d.iter().next() {
                    if k.starts_with('$') {
                        if k == "$literal" && d.len() == 1 {
                            return Ok(ValueExpr::Literal(arg.clone()));
                        }
                        return Err(QueryError::new(
                            168,
                            "InvalidPipelineOperator",
                            format!("Unrecognized expression '{k}'"),
                        ));
                    }
                }
                let mut fields = Vec::with_capacity(d.len());
                for (k, v) in d {
                    fields.push((k.clone(), ValueExpr::parse(v)?));
                }
                Ok(ValueExpr::Object(fields))
            }
            other => Ok(ValueExpr::Literal(other.clone())),
        }
    }

    /// Evaluates against `root`; `None` when the value is missing.
    pub(crate) fn eval(&self, root: &Document) -> Option<Bson> {
        match self {
            ValueExpr::Path(parts) => {
                let first = root.get(&parts[0])?;
                agg_path(first, &parts[1..])
            }
            ValueExpr::Root => Some(Bson::Document(root.clone())),
            ValueExpr::Literal(v) => Some(v.clone()),
            ValueExpr::Object(fields) => {
                let mut out = Document::new();
                for (k, e) in fields {
                    if let Some(v) = e.eval(root) {
                        out.insert(k.clone(), v);
                    }
                }
                Some(Bson::Document(out))
            }
        }
    }
}

/// Aggregation path semantics: through arrays, the path maps over the
/// elements (`"$a.b"` on `a: [{b: 1}, {b: 2}]` is `[1, 2]`).
fn agg_path(v: &Bson, rest: &[String]) -> Option<Bson> {
    if rest.is_empty() {
        return Some(v.clone());
    }
    match v {
        Bson::Document(d) => agg_path(d.get(&rest[0])?, &rest[1..]),
        Bson::Array(a) => Some(Bson::Array(
            a.iter()
                .filter(|e| matches!(e, Bson::Document(_) | Bson::Array(_)))
                .filter_map(|e| agg_path(e, rest))
                .collect(),
        )),
        _ => None,
    }
}

/// One node of a projection tree.
#[derive(Debug, Clone)]
enum ProjNode {
    Include,
    Exclude,
    Computed(ValueExpr),
    Sub(Vec<(String, ProjNode)>),
}

/// A parsed projection (inclusion or exclusion, `_id` included unless excluded).
#[derive(Debug, Clone)]
pub struct Projection {
    inclusion: bool,
    tree: Vec<(String, ProjNode)>,
}

fn find_node<'a>(tree: &'a [(String, ProjNode)], key: &str) -> Option<&'a ProjNode> {
    tree.iter().find(|(k, _)| k == key).map(|(_, n)| n)
}

fn insert_node(
    tree: &mut Vec<(String, ProjNode)>,
    parts: &[String],
    node: ProjNode,
    full: &str,
) -> Result<(), QueryError> {
    let collision = || QueryError::new(31250, "Location31250", format!("Path collision at {full}"));
    let pos = tree.iter().position(|(k, _)| *k == parts[0]);
    if parts.len() == 1 {
        if pos.is_some() {
            return Err(collision());
        }
        tree.push((parts[0].clone(), node));
        return Ok(());
    }
    let idx = match pos {
        Some(i) => i,
        None => {
            tree.push((parts[0].clone(), ProjNode::Sub(Vec::new())));
            tree.len() - 1
        }
    };
    match &mut tree[idx].1 {
        ProjNode::Sub(sub) => insert_node(sub, &parts[1..], node, full),
        _ => Err(collision()),
    }
}

/// What a projection spec value asks for.
enum Kind {
    Include,
    Exclude,
    Computed(ValueExpr),
    Nested(Document),
}

fn classify(v: &Bson) -> Result<Kind, QueryError> {
    Ok(match v {
        Bson::Boolean(b) => {
            if *b {
                Kind::Include
            } else {
                Kind::Exclude
            }
        }
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            if truthy(v) {
                Kind::Include
            } else {
                Kind::Exclude
            }
        }
        Bson::Document(d) if is_operator_doc(v).is_none() && !d.is_empty() => {
            Kind::Nested(d.clone())
        }
        Bson::Document(d) if d.is_empty() => {
            return Err(QueryError::new(
                51270,
                "Location51270",
                "An empty sub-projection is not a valid value",
            ))
        }
        other => Kind::Computed(ValueExpr::parse(other)?),
    })
}

impl Projection {
    /// Parses a projection; mixing inclusion and exclusion (other than on
    /// `_id`) is an error (codes 31254 and 31253, as MongoDB), as is a path
    /// given twice or inside another (31250).
    pub fn parse(spec: &Document) -> Result<Projection, QueryError> {
        let mut flat: Vec<(String, Kind)> = Vec::new();
        flatten(spec, "", &mut flat)?;
        let mut mode: Option<bool> = None;
        let mut id_rule: Option<ProjNode> = None;
        let mut tree = Vec::new();
        for (path, kind) in flat {
            let node = match kind {
                Kind::Include => ProjNode::Include,
                Kind::Exclude => ProjNode::Exclude,
                Kind::Computed(e) => ProjNode::Computed(e),
                Kind::Nested(_) => continue,
            };
            if path == "_id" {
                id_rule = Some(node);
                continue;
            }
            let inclusive = !matches!(node, ProjNode::Exclude);
            match mode {
                None => mode = Some(inclusive),
                Some(true) if !inclusive => {
                    return Err(QueryError::new(
                        31254,
                        "Location31254",
                        format!("Cannot do exclusion on field {path} in inclusion projection"),
                    ))
                }
                Some(false) if inclusive => {
                    if matches!(node, ProjNode::Computed(_)) {
                        return Err(QueryError::new(
                            31252,
                            "Location31252",
                            "Cannot use expression other than $meta in exclusion projection",
                        ));
                    }
                    return Err(QueryError::new(
                        31253,
                        "Location31253",
                        format!("Cannot do inclusion on field {path} in exclusion projection"),
                    ));
                }
                _ => {}
            }
            insert_node(&mut tree, &split_path(&path), node, &path)?;
        }
        let inclusion = match (mode, &id_rule) {
            (Some(m), _) => m,
            // Only `_id` given: `{_id: 0}` excludes it, `{_id: 1}` or a
            // computed `_id` keeps only it.
            (None, Some(ProjNode::Exclude)) => false,
            (None, Some(_)) => true,
            (None, None) => false,
        };
        let id_node = match id_rule {
            Some(n) => n,
            None => ProjNode::Include,
        };
        // `_id` leads the tree so an inclusion keeps it first, as MongoDB does.
        match (inclusion, id_node) {
            (true, ProjNode::Exclude) => {}
            (true, n) => tree.insert(0, ("_id".to_owned(), n)),
            (false, ProjNode::Exclude) => tree.insert(0, ("_id".to_owned(), ProjNode::Exclude)),
            (false, _) => {}
        }
        Ok(Projection { inclusion, tree })
    }

    /// Whether the projection changes nothing (`{}`).
    pub fn is_identity(&self) -> bool {
        !self.inclusion && self.tree.is_empty()
    }

    /// The projected copy of `doc`.
    pub fn apply(&self, doc: &Document) -> Document {
        if self.inclusion {
            let mut out = include(doc, &self.tree);
            add_computed(&mut out, &self.tree, doc);
            // A computed `_id` still leads the output, as in MongoDB.
            if let Some(ProjNode::Computed(_)) = find_node(&self.tree, "_id") {
                if let Some(id) = out.remove("_id") {
                    let mut first = Document::new();
                    first.insert("_id", id);
                    first.extend(out);
                    return first;
                }
            }
            out
        } else {
            exclude(doc, &self.tree)
        }
    }
}

fn flatten(spec: &Document, prefix: &str, out: &mut Vec<(String, Kind)>) -> Result<(), QueryError> {
    for (k, v) in spec {
        if k.split('.').any(|part| part.starts_with('$')) {
            // Covers the positional `a.$` projection, which the simulator lacks.
            return Err(QueryError::new(
                16410,
                "Location16410",
                "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
            ));
        }
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match classify(v)? {
            Kind::Nested(d) => flatten(&d, &path, out)?,
            kind => out.push((path, kind)),
        }
    }
    Ok(())
}

fn include(doc: &Document, tree: &[(String, ProjNode)]) -> Document {
    let mut out = Document::new();
    // `_id` first when kept, whatever its place in the stored document.
    if let Some(ProjNode::Include) = find_node(tree, "_id") {
        if let Some(id) = doc.get("_id") {
            out.insert("_id", id.clone());
        }
    }
    for (k, v) in doc {
        if k == "_id" {
            continue;
        }
        match find_node(tree, k) {
            Some(ProjNode::Include) => {
                out.insert(k.clone(), v.clone());
            }
            Some(ProjNode::Sub(sub)) => match v {
                Bson::Document(d) => {
                    out.insert(k.clone(), include(d, sub));
                }
                Bson::Array(a) => {
                    out.insert(k.clone(), include_array(a, sub));
                }
                _ => {}
            },
            _ => {}
        }
    }
    out
}

fn include_array(a: &[Bson], tree: &[(String, ProjNode)]) -> Bson {
    Bson::Array(
        a.iter()
            .filter_map(|e| match e {
                Bson::Document(d) => Some(Bson::Document(include(d, tree))),
                Bson::Array(inner) => Some(include_array(inner, tree)),
                _ => None,
            })
            .collect(),
    )
}

/// Adds the computed fields of an inclusion, in spec order, after the
/// included ones; paths are evaluated against the whole document.
fn add_computed(out: &mut Document, tree: &[(String, ProjNode)], root: &Document) {
    for (k, node) in tree {
        match node {
            ProjNode::Computed(e) => {
                if let Some(v) = e.eval(root) {
                    out.insert(k.clone(), v);
                }
            }
            ProjNode::Sub(sub) if has_computed(sub) => {
                if !matches!(out.get(k), Some(Bson::Document(_))) {
                    if out.contains_key(k) {
                        continue;
                    }
                    out.insert(k.clone(), Document::new());
                }
                if let Some(Bson::Document(d)) = out.get_mut(k) {
                    add_computed(d, sub, root);
                }
            }
            _ => {}
        }
    }
}

fn has_computed(tree: &[(String, ProjNode)]) -> bool {
    tree.iter().any(|(_, n)| match n {
        ProjNode::Computed(_) => true,
        ProjNode::Sub(s) => has_computed(s),
        _ => false,
    })
}

fn exclude(doc: &Document, tree: &[(String, ProjNode)]) -> Document {
    let mut out = Document::new();
    for (k, v) in doc {
        match find_node(tree, k) {
            None | Some(ProjNode::Include) | Some(ProjNode::Computed(_)) => {
                out.insert(k.clone(), v.clone());
            }
            Some(ProjNode::Exclude) => {}
            Some(ProjNode::Sub(sub)) => {
                out.insert(k.clone(), exclude_value(v, sub));
            }
        }
    }
    out
}

fn exclude_value(v: &Bson, tree: &[(String, ProjNode)]) -> Bson {
    match v {
        Bson::Document(d) => Bson::Document(exclude(d, tree)),
        Bson::Array(a) => Bson::Array(a.iter().map(|e| exclude_value(e, tree)).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mongodb::bson::{
        doc, oid::ObjectId, spec::BinarySubtype, Binary, DateTime, Decimal128, Regex, Timestamp,
    };

    fn f(filter: Document) -> Filter {
        Filter::parse(&filter).expect("filter parses")
    }

    fn m(filter: Document, d: Document) -> bool {
        f(filter).matches(&d)
    }

    /// Decimal128 from a coefficient and exponent (BID, small coefficients).
    fn dec(coefficient: u64, exponent: i32, negative: bool) -> Bson {
        let biased = (exponent + 6176) as u64;
        let hi = (u64::from(negative) << 63) | (biased << 49);
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&coefficient.to_le_bytes());
        bytes[8..].copy_from_slice(&hi.to_le_bytes());
        Bson::Decimal128(Decimal128::from_bytes(bytes))
    }

    #[test]
    fn type_order_follows_mongodb() {
        let ascending = vec![
            Bson::MinKey,
            Bson::Undefined,
            Bson::Null,
            Bson::Double(f64::NAN),
            Bson::Double(f64::NEG_INFINITY),
            Bson::Int64(-5),
            Bson::Int32(1),
            Bson::Double(1.5),
            Bson::Int64(i64::MAX),
            Bson::Double(f64::INFINITY),
            Bson::String(String::new()),
            Bson::String("a".into()),
            Bson::Symbol("b".into()),
            Bson::String("ba".into()),
            Bson::Document(doc! {}),
            Bson::Document(doc! {"a": 1}),
            Bson::Document(doc! {"a": 1, "b": 0}),
            Bson::Document(doc! {"b": 0}),
            Bson::Array(vec![]),
            Bson::Array(vec![Bson::Int32(1)]),
            Bson::Array(vec![Bson::Int32(1), Bson::Int32(0)]),
            Bson::Array(vec![Bson::Int32(2)]),
            Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![9],
            }),
            Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![1, 1],
            }),
            Bson::ObjectId(ObjectId::from_bytes([0; 12])),
            Bson::ObjectId(ObjectId::from_bytes([1; 12])),
            Bson::Boolean(false),
            Bson::Boolean(true),
            Bson::DateTime(DateTime::from_millis(-1)),
            Bson::DateTime(DateTime::from_millis(0)),
            Bson::Timestamp(Timestamp {
                time: 1,
                increment: 9,
            }),
            Bson::Timestamp(Timestamp {
                time: 2,
                increment: 0,
            }),
            Bson::RegularExpression(Regex {
                pattern: "a".into(),
                options: String::new(),
            }),
            Bson::JavaScriptCode("x".into()),
            Bson::MaxKey,
        ];
        for (i, a) in ascending.iter().enumerate() {
            for (j, b) in ascending.iter().enumerate() {
                assert_eq!(compare(a, b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn numbers_compare_by_value_across_types() {
        let five = [
            Bson::Int32(5),
            Bson::Int64(5),
            Bson::Double(5.0),
            dec(5, 0, false),
            dec(50, -1, false),
        ];
        for a in &five {
            for b in &five {
                assert_eq!(compare(a, b), Ordering::Equal, "{a:?} vs {b:?}");
            }
        }
        assert_eq!(compare(&Bson::Int32(5), &Bson::Double(5.5)), Ordering::Less);
        assert_eq!(
            compare(&Bson::Double(-0.0), &Bson::Int32(0)),
            Ordering::Equal
        );
        assert_eq!(
            compare(&dec(15, -1, true), &Bson::Double(-1.5)),
            Ordering::Equal
        );
        // 2^53 + 1 has no exact double: the integer side must not be rounded.
        let big = (1i64 << 53) + 1;
        assert_eq!(
            compare(&Bson::Int64(big), &Bson::Double((1i64 << 53) as f64)),
            Ordering::Greater
        );
        assert_eq!(
            compare(&Bson::Double(1e19), &Bson::Int64(i64::MAX)),
            Ordering::Greater
        );
        assert_eq!(
            compare(&Bson::Double(-1e19), &Bson::Int64(i64::MIN)),
            Ordering::Less
        );
        assert_eq!(
            compare(&Bson::Double(f64::NAN), &Bson::Double(f64::NAN)),
            Ordering::Equal
        );
        assert_eq!(
            compare(&Bson::Double(f64::NAN), &Bson::Int64(i64::MIN)),
            Ordering::Less
        );
    }

    #[test]
    fn index_keys_unify_equal_numbers() {
        let mut map = std::collections::BTreeMap::new();
        map.insert(IndexKey(Bson::Int32(5)), "int");
        map.insert(IndexKey(Bson::Double(5.0)), "double");
        map.insert(IndexKey(Bson::String("5".into())), "string");
        assert_eq!(map.len(), 2);
        assert_eq!(map.get(&IndexKey(Bson::Int64(5))), Some(&"double"));
        let a = CompoundKey(vec![Bson::Int32(1), Bson::String("b".into())]);
        let b = CompoundKey(vec![Bson::Double(1.0), Bson::String("c".into())]);
        assert!(a < b);
        assert_eq!(
            a,
            CompoundKey(vec![Bson::Int64(1), Bson::String("b".into())])
        );
    }

    #[test]
    fn get_path_descends_documents_and_array_indexes() {
        let d = doc! {"a": {"b": [10, {"c": "x"}]}, "n": 1};
        assert_eq!(get_path(&d, "n"), Some(&Bson::Int32(1)));
        assert_eq!(get_path(&d, "a.b.0"), Some(&Bson::Int32(10)));
        assert_eq!(get_path(&d, "a.b.1.c"), Some(&Bson::String("x".into())));
        assert_eq!(get_path(&d, "a.b.2"), None);
        assert_eq!(get_path(&d, "a.b.x"), None);
        assert_eq!(get_path(&d, "n.x"), None);
        assert_eq!(get_path(&d, "missing"), None);
    }

    #[test]
    fn values_at_path_expands_arrays() {
        let d = doc! {"a": [{"b": 1}, {"b": [2, 3]}, {"c": 4}]};
        let vals: Vec<Bson> = values_at_path(&d, "a.b").into_iter().cloned().collect();
        assert_eq!(vals, vec![Bson::Int32(1), Bson::Int32(2), Bson::Int32(3)]);
        assert!(values_at_path(&doc! {"a": []}, "a").is_empty());
        assert!(values_at_path(&doc! {"b": 1}, "a").is_empty());
    }

    #[test]
    fn implicit_equality_and_numeric_types() {
        assert!(m(doc! {"_id": 5}, doc! {"_id": 5i64}));
        assert!(m(doc! {"_id": 5}, doc! {"_id": 5.0}));
        assert!(!m(doc! {"_id": 5}, doc! {"_id": "5"}));
        assert!(!m(doc! {"_id": 5}, doc! {"x": 5}));
        assert!(m(doc! {}, doc! {"x": 5}));
        assert!(f(doc! {}).matches_all());
        assert!(f(doc! {"$comment": "hi"}).matches_all());
        assert!(!f(doc! {"x": 5}).matches_all());
        assert!(m(doc! {"a": 1, "b": "x"}, doc! {"a": 1, "b": "x"}));
        assert!(!m(doc! {"a": 1, "b": "x"}, doc! {"a": 1, "b": "y"}));
    }

    #[test]
    fn equality_on_embedded_documents_is_exact_and_ordered() {
        assert!(m(
            doc! {"a": {"x": 1, "y": 2}},
            doc! {"a": {"x": 1, "y": 2}}
        ));
        assert!(!m(
            doc! {"a": {"x": 1, "y": 2}},
            doc! {"a": {"y": 2, "x": 1}}
        ));
        assert!(!m(doc! {"a": {"x": 1}}, doc! {"a": {"x": 1, "y": 2}}));
        assert!(m(doc! {"a.x": 1}, doc! {"a": {"x": 1, "y": 2}}));
    }

    #[test]
    fn arrays_match_by_element_or_whole() {
        assert!(m(doc! {"a": 5}, doc! {"a": [5, 6]}));
        assert!(!m(doc! {"a": 7}, doc! {"a": [5, 6]}));
        assert!(m(doc! {"a": [5, 6]}, doc! {"a": [5, 6]}));
        assert!(!m(doc! {"a": [6, 5]}, doc! {"a": [5, 6]}));
        assert!(m(doc! {"a": [5]}, doc! {"a": [[5], 6]}));
        // Only one level of nesting is expanded.
        assert!(!m(doc! {"a": 5}, doc! {"a": [[5]]}));
        assert!(m(doc! {"a": {"$gt": 5}}, doc! {"a": [1, 10]}));
        assert!(!m(doc! {"a": {"$gt": 50}}, doc! {"a": [1, 10]}));
        // Each condition may be met by a different element.
        assert!(m(doc! {"a": {"$gt": 5, "$lt": 3}}, doc! {"a": [1, 10]}));
        assert!(m(doc! {"a.b": 2}, doc! {"a": [{"b": 1}, {"b": 2}]}));
        assert!(m(doc! {"a.b": 2}, doc! {"a": [{"b": [1, 2]}]}));
        assert!(m(doc! {"a.1": 6}, doc! {"a": [5, 6]}));
        assert!(m(doc! {"a.1.b": 6}, doc! {"a": [{"b": 5}, {"b": 6}]}));
        assert!(!m(doc! {"a.0.b": 6}, doc! {"a": [{"b": 5}, {"b": 6}]}));
    }

    #[test]
    fn ne_and_nin_negate_any_element() {
        assert!(!m(doc! {"a": {"$ne": 5}}, doc! {"a": [5, 6]}));
        assert!(m(doc! {"a": {"$ne": 7}}, doc! {"a": [5, 6]}));
        assert!(m(doc! {"a": {"$ne": 7}}, doc! {}));
        assert!(!m(doc! {"a": {"$ne": 5}}, doc! {"a": 5.0}));
        assert!(!m(doc! {"a": {"$nin": [1, 6]}}, doc! {"a": [5, 6]}));
        assert!(m(doc! {"a": {"$nin": [1, 2]}}, doc! {"a": [5, 6]}));
        assert!(m(doc! {"a": {"$nin": [1, 2]}}, doc! {}));
    }

    #[test]
    fn comparisons_stay_within_type_class() {
        assert!(m(doc! {"a": {"$gt": 5}}, doc! {"a": 6.5}));
        assert!(!m(doc! {"a": {"$gt": 5}}, doc! {"a": "zzz"}));
        assert!(!m(doc! {"a": {"$lt": "a"}}, doc! {"a": 1}));
        assert!(m(doc! {"a": {"$gte": 5}}, doc! {"a": 5i64}));
        assert!(!m(doc! {"a": {"$gt": 5}}, doc! {"a": 5i64}));
        assert!(m(doc! {"a": {"$lte": 5}}, doc! {"a": 5.0}));
        assert!(!m(doc! {"a": {"$lt": 5}}, doc! {"a": 5}));
        assert!(m(doc! {"a": {"$lt": "b"}}, doc! {"a": "a"}));
        assert!(!m(doc! {"a": {"$gt": 5}}, doc! {}));
        assert!(!m(doc! {"a": {"$lt": 5}}, doc! {"a": null}));
        // MinKey and MaxKey bound every type.
        assert!(m(doc! {"a": {"$gt": Bson::MinKey}}, doc! {"a": "s"}));
        assert!(m(doc! {"a": {"$lt": Bson::MaxKey}}, doc! {"a": true}));
        // NaN is only equal to NaN.
        assert!(!m(doc! {"a": {"$lt": 5}}, doc! {"a": f64::NAN}));
        assert!(m(doc! {"a": {"$gte": f64::NAN}}, doc! {"a": f64::NAN}));
        assert!(m(doc! {"a": f64::NAN}, doc! {"a": f64::NAN}));
        assert!(!m(doc! {"a": {"$gt": f64::NAN}}, doc! {"a": 1}));
        let t0 = DateTime::from_millis(1000);
        assert!(m(
            doc! {"t": {"$gte": t0}},
            doc! {"t": DateTime::from_millis(2000)}
        ));
        assert!(!m(doc! {"t": {"$gte": t0}}, doc! {"t": 2000}));
    }

    #[test]
    fn null_matches_missing() {
        assert!(m(doc! {"a": null}, doc! {}));
        assert!(m(doc! {"a": null}, doc! {"a": null}));
        assert!(!m(doc! {"a": null}, doc! {"a": 0}));
        assert!(!m(doc! {"a": null}, doc! {"a": Bson::Undefined}));
        assert!(m(doc! {"a.b": null}, doc! {"a": 5}));
        // MongoDB's jstests/core/null2.js: through an array, only embedded
        // documents lacking the field count as null.
        let null2 = [
            (doc! {"a": [{"b": 5}]}, false),
            (doc! {"a": [{}]}, true),
            (doc! {"a": []}, false),
            (doc! {"a": [{}, {"b": 5}]}, true),
            (doc! {"a": [5, {"b": 5}]}, false),
        ];
        for (d, want) in null2 {
            assert_eq!(m(doc! {"a.b": null}, d.clone()), want, "{d}");
            assert_eq!(m(doc! {"a.b": {"$in": [null]}}, d.clone()), want, "{d}");
        }
        assert!(m(doc! {"a": {"$gte": null}}, doc! {}));
        assert!(!m(doc! {"a": {"$ne": null}}, doc! {}));
        assert!(m(doc! {"a": {"$ne": null}}, doc! {"a": 1}));
        assert!(m(doc! {"a": {"$in": [null, 3]}}, doc! {}));
    }

    #[test]
    fn in_exists_and_logic() {
        assert!(m(doc! {"a": {"$in": [1, 2]}}, doc! {"a": 2.0}));
        assert!(m(doc! {"a": {"$in": [1, 2]}}, doc! {"a": [0, 2]}));
        assert!(!m(doc! {"a": {"$in": []}}, doc! {"a": 1}));
        assert!(m(doc! {"a": {"$exists": true}}, doc! {"a": null}));
        assert!(!m(doc! {"a": {"$exists": true}}, doc! {}));
        assert!(m(doc! {"a": {"$exists": 0}}, doc! {}));
        assert!(m(
            doc! {"a.b": {"$exists": true}},
            doc! {"a": [1, {"b": 2}]}
        ));
        assert!(!m(
            doc! {"a.b": {"$exists": true}},
            doc! {"a": [1, {"c": 2}]}
        ));
        let d = doc! {"a": 1, "b": 2};
        assert!(m(doc! {"$and": [{"a": 1}, {"b": 2}]}, d.clone()));
        assert!(!m(doc! {"$and": [{"a": 1}, {"b": 3}]}, d.clone()));
        assert!(m(doc! {"$or": [{"a": 9}, {"b": 2}]}, d.clone()));
        assert!(!m(doc! {"$or": [{"a": 9}, {"b": 9}]}, d.clone()));
        assert!(m(doc! {"$nor": [{"a": 9}, {"b": 9}]}, d.clone()));
        assert!(!m(doc! {"$nor": [{"a": 1}, {"b": 9}]}, d.clone()));
        assert!(m(doc! {"a": {"$not": {"$gt": 5}}}, d.clone()));
        assert!(!m(doc! {"a": {"$not": {"$lt": 5}}}, d.clone()));
        // $not also matches where the field is missing or of another type.
        assert!(m(doc! {"z": {"$not": {"$gt": 5}}}, d.clone()));
        assert!(m(doc! {"a": {"$not": {"$gt": 0, "$lt": 1}}}, d.clone()));
        assert!(!m(doc! {"a": {"$not": {"$gt": 0, "$lt": 2}}}, d));
    }

    #[test]
    fn array_operators() {
        let d = doc! {"a": [1, 2, 3], "e": [{"x": 1, "y": 1}, {"x": 2, "y": 0}]};
        assert!(m(doc! {"a": {"$size": 3}}, d.clone()));
        assert!(!m(doc! {"a": {"$size": 2}}, d.clone()));
        assert!(m(doc! {"a": {"$all": [3, 1]}}, d.clone()));
        assert!(!m(doc! {"a": {"$all": [3, 4]}}, d.clone()));
        assert!(m(doc! {"e": {"$elemMatch": {"x": 2, "y": 0}}}, d.clone()));
        assert!(!m(doc! {"e": {"$elemMatch": {"x": 2, "y": 1}}}, d.clone()));
        assert!(m(
            doc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}},
            d.clone()
        ));
        assert!(!m(doc! {"a": {"$elemMatch": {"$gt": 3}}}, d.clone()));
        assert!(m(
            doc! {"a": {"$elemMatch": {"$in": [7, 2], "$ne": 1}}},
            d.clone()
        ));
        assert!(!m(
            doc! {"a": {"$elemMatch": {"$nin": [1, 2, 3]}}},
            d.clone()
        ));
        assert!(m(doc! {"a": {"$type": "array"}}, d.clone()));
        assert!(m(doc! {"a": {"$type": "int"}}, d.clone()));
        assert!(m(doc! {"a": {"$type": "number"}}, d.clone()));
        assert!(!m(doc! {"a": {"$type": "string"}}, d.clone()));
        assert!(m(doc! {"a": {"$mod": [3, 0]}}, d.clone()));
        assert!(!m(doc! {"a": {"$mod": [5, 4]}}, d));
    }

    #[test]
    fn errors_carry_mongodb_codes_and_messages() {
        let err = |d: Document| Filter::parse(&d).unwrap_err();
        let e = err(doc! {"a": {"$foo": 1}});
        assert_eq!(
            (e.code, e.code_name, e.message.as_str()),
            (2, "BadValue", "unknown operator: $foo")
        );
        assert_eq!(
            err(doc! {"a": {"$gt": 1, "b": 1}}).message,
            "unknown operator: b"
        );
        assert!(err(doc! {"$foo": 1})
            .message
            .starts_with("unknown top level operator: $foo"));
        assert_eq!(err(doc! {"a": {"$in": 1}}).message, "$in needs an array");
        assert_eq!(
            err(doc! {"a": {"$nin": "x"}}).message,
            "$nin needs an array"
        );
        assert_eq!(
            err(doc! {"$or": []}).message,
            "$or must be a nonempty array"
        );
        assert_eq!(err(doc! {"$and": [1]}).code, 2);
        assert_eq!(
            err(doc! {"a": {"$not": 1}}).message,
            "$not needs a regex or a document"
        );
        assert_eq!(err(doc! {"a": {"$not": {}}}).code, 2);
        assert_eq!(err(doc! {"a": {"$mod": [0, 1]}}).code, 2);
    }

    #[test]
    fn intervals_for_index_planning() {
        let pt = |v: Bson| Interval::point(v);
        assert_eq!(
            f(doc! {"_id": 5}).intervals("_id"),
            Some(vec![pt(Bson::Int32(5))])
        );
        assert_eq!(f(doc! {"_id": 5}).intervals("k"), None);
        assert_eq!(
            f(doc! {"k": {"$in": [3, 1, 3]}}).intervals("k"),
            Some(vec![pt(Bson::Int32(1)), pt(Bson::Int32(3))])
        );
        assert_eq!(
            f(doc! {"k": {"$gte": 10, "$lt": 20}}).intervals("k"),
            Some(vec![Interval {
                lower: Bound::Included(Bson::Int32(10)),
                upper: Bound::Excluded(Bson::Int32(20)),
            }])
        );
        // A one-sided range stays within numbers.
        let gt = f(doc! {"k": {"$gt": 10}}).intervals("k").unwrap();
        assert_eq!(gt.len(), 1);
        assert_eq!(gt[0].lower, Bound::Excluded(Bson::Int32(10)));
        assert!(gt[0].contains(&Bson::Double(1e300)));
        assert!(!gt[0].contains(&Bson::String(String::new())));
        // Contradictions give no interval at all.
        assert_eq!(
            f(doc! {"k": {"$gt": 10, "$lt": 5}}).intervals("k"),
            Some(vec![])
        );
        assert_eq!(
            f(doc! {"k": 5, "$and": [{"k": 6}]}).intervals("k"),
            Some(vec![])
        );
        // $and with other fields, and $or over the same field.
        assert_eq!(
            f(doc! {"$and": [{"k": {"$gte": 1}}, {"c": "x"}, {"k": {"$lte": 1}}]}).intervals("k"),
            Some(vec![Interval {
                lower: Bound::Included(Bson::Int32(1)),
                upper: Bound::Included(Bson::Int32(1)),
            }])
        );
        assert_eq!(
            f(doc! {"$or": [{"k": 2}, {"k": {"$in": [1, 2]}}]}).intervals("k"),
            Some(vec![pt(Bson::Int32(1)), pt(Bson::Int32(2))])
        );
        assert_eq!(f(doc! {"$or": [{"k": 2}, {"c": 1}]}).intervals("k"), None);
        assert_eq!(f(doc! {"k": {"$ne": 2}}).intervals("k"), None);
        assert_eq!(f(doc! {"k": [1, 2]}).intervals("k"), None);
        // Overlapping ranges merge.
        let merged = f(doc! {"$or": [{"k": {"$gte": 1, "$lte": 5}}, {"k": {"$gt": 3, "$lt": 9}}]})
            .intervals("k")
            .unwrap();
        assert_eq!(
            merged,
            vec![Interval {
                lower: Bound::Included(Bson::Int32(1)),
                upper: Bound::Excluded(Bson::Int32(9)),
            }]
        );
    }

    #[test]
    fn sort_orders_stably_with_missing_as_null() {
        let spec = SortSpec::parse(&doc! {"a": 1, "b": -1}).unwrap();
        assert_eq!(spec.fields(), &[("a".to_owned(), 1), ("b".to_owned(), -1)]);
        let mut docs = vec![
            doc! {"i": 0, "a": 2, "b": 1},
            doc! {"i": 1, "a": 1, "b": 1},
            doc! {"i": 2},
            doc! {"i": 3, "a": 1, "b": 5},
            doc! {"i": 4, "a": 1.0, "b": 1},
            doc! {"i": 5, "a": "s"},
        ];
        spec.sort(&mut docs);
        let order: Vec<i32> = docs.iter().map(|d| d.get_i32("i").unwrap()).collect();
        assert_eq!(order, vec![2, 3, 1, 4, 0, 5]);
        // Arrays sort by their smallest element ascending, largest descending.
        let asc = SortSpec::parse(&doc! {"a": 1}).unwrap();
        let desc = SortSpec::parse(&doc! {"a": -1}).unwrap();
        let (x, y) = (doc! {"a": [1, 10]}, doc! {"a": 5});
        assert_eq!(asc.compare(&x, &y), Ordering::Less);
        assert_eq!(desc.compare(&x, &y), Ordering::Less);
        assert_eq!(SortSpec::parse(&doc! {"a": 2}).unwrap_err().code, 15975);
        assert_eq!(SortSpec::parse(&doc! {"a": "x"}).unwrap_err().code, 15975);
    }

    fn p(spec: Document, d: &Document) -> Document {
        Projection::parse(&spec)
            .expect("projection parses")
            .apply(d)
    }

    #[test]
    fn projection_inclusion_and_exclusion() {
        let d = doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 4, "d": 5}, 6]};
        assert_eq!(p(doc! {"a": 1}, &d), doc! {"_id": 1, "a": 1});
        assert_eq!(p(doc! {"a": true, "_id": 0}, &d), doc! {"a": 1});
        assert_eq!(
            p(doc! {"_id": 0}, &d),
            doc! {"a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 4, "d": 5}, 6]}
        );
        assert_eq!(p(doc! {"_id": 1}, &d), doc! {"_id": 1});
        assert_eq!(
            p(doc! {"a": 0, "b": 0}, &d),
            doc! {"_id": 1, "e": [{"c": 4, "d": 5}, 6]}
        );
        assert_eq!(p(doc! {"b.c": 1}, &d), doc! {"_id": 1, "b": {"c": 2}});
        assert_eq!(p(doc! {"b": {"c": 1}}, &d), doc! {"_id": 1, "b": {"c": 2}});
        assert_eq!(
            p(doc! {"b.c": 0, "_id": 0}, &d),
            doc! {"a": 1, "b": {"d": 3}, "e": [{"c": 4, "d": 5}, 6]}
        );
        assert_eq!(p(doc! {"e.c": 1}, &d), doc! {"_id": 1, "e": [{"c": 4}]});
        assert_eq!(
            p(doc! {"e.c": 0, "_id": 0, "a": 0, "b": 0}, &d),
            doc! {"e": [{"d": 5}, 6]}
        );
        assert_eq!(p(doc! {"missing": 1}, &d), doc! {"_id": 1});
        assert_eq!(p(doc! {}, &d), d);
        assert!(Projection::parse(&doc! {}).unwrap().is_identity());
    }

    #[test]
    fn projection_computed_fields() {
        let d = doc! {"_id": 1, "a": 1, "b": {"c": 2}, "l": [{"x": 1}, {"x": 2}]};
        assert_eq!(p(doc! {"x": "$b.c", "_id": 0}, &d), doc! {"x": 2});
        assert_eq!(
            p(doc! {"a": 1, "y": "$missing"}, &d),
            doc! {"_id": 1, "a": 1}
        );
        assert_eq!(p(doc! {"k": "lit", "_id": 0}, &d), doc! {"k": "lit"});
        assert_eq!(p(doc! {"k": {"$literal": 1}, "_id": 0}, &d), doc! {"k": 1});
        assert_eq!(p(doc! {"xs": "$l.x", "_id": 0}, &d), doc! {"xs": [1, 2]});
        assert_eq!(p(doc! {"n.m": "$a", "_id": 0}, &d), doc! {"n": {"m": 1}});
        assert_eq!(p(doc! {"_id": "$a"}, &d), doc! {"_id": 1});
        let out = p(doc! {"_id": "$b.c", "a": 1}, &d);
        assert_eq!(out.keys().collect::<Vec<_>>(), vec!["_id", "a"]);
        assert_eq!(out, doc! {"_id": 2, "a": 1});
    }

    #[test]
    fn projection_errors() {
        let e = Projection::parse(&doc! {"a": 1, "b": 0}).unwrap_err();
        assert_eq!(e.code, 31254);
        assert_eq!(
            e.message,
            "Cannot do exclusion on field b in inclusion projection"
        );
        let e = Projection::parse(&doc! {"a": 0, "b": 1}).unwrap_err();
        assert_eq!(e.code, 31253);
        assert_eq!(
            e.message,
            "Cannot do inclusion on field b in exclusion projection"
        );
        assert!(Projection::parse(&doc! {"_id": 0, "b": 1}).is_ok());
        assert!(Projection::parse(&doc! {"_id": 1, "b": 0}).is_ok());
        assert_eq!(
            Projection::parse(&doc! {"a": 1, "a.b": 1})
                .unwrap_err()
                .code,
            31250
        );
        assert_eq!(
            Projection::parse(&doc! {"a.b": 1, "a": 1})
                .unwrap_err()
                .code,
            31250
        );
        assert_eq!(
            Projection::parse(&doc! {"a": {"$add": [1, 2]}})
                .unwrap_err()
                .code,
            168
        );
    }
}
