//! MongoDB's comparison order of BSON values: type ranks, numbers of
//! mixed types compared exactly, and the keys of the in-memory indexes.

use std::cmp::Ordering;

use bson::{Bson, Document};

/// Rank of a value's type in the comparison order. Numbers share one rank,
/// as do strings and symbols (MongoDB's "canonical type").
pub(super) fn type_rank(v: &Bson) -> u8 {
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
pub(super) enum Num {
    Int(i64),
    Float(f64),
}

pub(super) fn as_num(v: &Bson) -> Option<Num> {
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
pub(super) const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16,
    1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
];

/// Converts an IEEE 754-2008 decimal128 (BID encoding, little-endian bytes as
/// BSON stores them) to the nearest double, close enough for ordering.
pub(super) fn decimal_to_f64(bytes: &[u8; 16]) -> f64 {
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
pub(super) fn cmp_int_float(i: i64, f: f64) -> Ordering {
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

pub(super) fn cmp_float(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Less,
        (false, true) => Ordering::Greater,
        // Neither is NaN, so partial_cmp answers (and -0.0 == 0.0).
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

pub(super) fn cmp_num(a: Num, b: Num) -> Ordering {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x.cmp(&y),
        (Num::Float(x), Num::Float(y)) => cmp_float(x, y),
        (Num::Int(x), Num::Float(y)) => cmp_int_float(x, y),
        (Num::Float(x), Num::Int(y)) => cmp_int_float(y, x).reverse(),
    }
}

pub(super) fn is_nan(v: &Bson) -> bool {
    match v {
        Bson::Double(f) => f.is_nan(),
        Bson::Decimal128(d) => decimal_to_f64(&d.bytes()).is_nan(),
        _ => false,
    }
}

pub(super) fn str_of(v: &Bson) -> &str {
    match v {
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => s,
        _ => "",
    }
}

/// Compares two documents as MongoDB does: element by element, each by
/// type class, then field name, then value; a prefix sorts first.
pub(super) fn cmp_docs(a: &Document, b: &Document) -> Ordering {
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
