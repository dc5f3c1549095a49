//! A collection's document template from documents `$sample` drew from
//! it: each field (a dotted path into embedded documents) draws like the
//! values of that field in the sample, its type and range, never the
//! values themselves. The operations' values are no evidence of the
//! documents: an update's `$inc: {total: 1}` says nothing of `total`.

use serde_json::{Map, Value};

use super::shape::{scalar_obs, Obs};
use super::SlotStats;

/// A field of the sampled documents: its path, the values' stats, and in
/// how many documents it was found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    pub path: String,
    pub stats: SlotStats,
    pub seen: usize,
}

/// The fields of `docs` (canonical extended JSON) in first-seen order,
/// `_id` left out; dates' ages are as of `t` (ms). A field whose values
/// are of several types keeps the first type seen (integers and doubles
/// together are doubles).
pub(crate) fn fields(docs: &[Value], t: i64) -> Vec<Field> {
    let mut out: Vec<Field> = Vec::new();
    for d in docs {
        if let Value::Object(m) = d {
            walk(m, "", t, &mut out);
        }
    }
    out
}

fn walk(m: &Map<String, Value>, prefix: &str, t: i64, out: &mut Vec<Field>) {
    for (k, v) in m {
        if prefix.is_empty() && k == "_id" {
            continue;
        }
        let path = format!("{prefix}{k}");
        match v {
            Value::Object(o) if !o.keys().any(|k| k.starts_with('$')) => {
                walk(o, &format!("{path}."), t, out);
            }
            _ => {
                if let Some(obs) = observe(v) {
                    add(out, path, &obs, t);
                }
            }
        }
    }
}

/// A value as an observation: a scalar, or an array of scalars (an
/// array's documents and nulls are left out).
fn observe(v: &Value) -> Option<Obs> {
    match v {
        Value::Array(a) => Some(Obs::Array(a.iter().filter_map(scalar_obs).collect())),
        v => scalar_obs(v),
    }
}

fn add(out: &mut Vec<Field>, path: String, obs: &Obs, t: i64) {
    let Some(f) = out.iter_mut().find(|f| f.path == path) else {
        out.push(Field {
            path,
            stats: SlotStats::new(obs, t),
            seen: 1,
        });
        return;
    };
    f.seen += 1;
    // Integers and doubles in one field are numbers: doubles.
    let as_double = |o: &Obs| match o {
        Obs::Int(i) => Some(*i as f64),
        Obs::Double(d) => Some(*d),
        _ => None,
    };
    match (&mut f.stats, as_double(obs)) {
        (SlotStats::Int { min, max }, Some(x)) if matches!(obs, Obs::Double(_)) => {
            f.stats = SlotStats::Double {
                min: (*min as f64).min(x),
                max: (*max as f64).max(x),
            };
        }
        (SlotStats::Double { .. }, Some(x)) => f.stats.add(&Obs::Double(x), t),
        _ => f.stats.add(obs, t),
    }
}

/// Whether a field is in enough of the sample to be in every generated
/// document: at least half of it (a template has no optional field).
pub(crate) fn common(f: &Field, docs: usize) -> bool {
    2 * f.seen >= docs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_field_takes_its_type_and_range_from_the_sample() {
        let docs = [
            json!({"_id": 1, "total": {"$numberDouble": "12.5"}, "n": {"$numberInt": "3"},
                   "who": {"name": "ab", "age": {"$numberInt": "30"}}, "tags": ["x", "yz"]}),
            json!({"_id": 2, "total": {"$numberInt": "90"}, "n": {"$numberInt": "7"},
                   "who": {"name": "abcd", "age": {"$numberInt": "40"}}, "rare": true}),
            json!({"_id": 3, "total": {"$numberDouble": "0.5"}, "n": {"$numberLong": "5"},
                   "when": {"$date": {"$numberLong": "1000"}}}),
        ];
        let f = fields(&docs, 61_000);
        let paths: Vec<&str> = f.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(
            paths,
            ["total", "n", "who.name", "who.age", "tags", "rare", "when"]
        );
        assert_eq!(
            f[0].stats,
            SlotStats::Double {
                min: 0.5,
                max: 90.0
            }
        );
        assert_eq!(f[1].stats, SlotStats::Int { min: 3, max: 7 });
        assert!(matches!(
            f[2].stats,
            SlotStats::Str {
                min_len: 2,
                max_len: 4,
                ..
            }
        ));
        assert_eq!(f[3].stats, SlotStats::Int { min: 30, max: 40 });
        assert!(matches!(f[4].stats, SlotStats::Array { min_len: 2, .. }));
        assert_eq!(
            f[6].stats,
            SlotStats::Date {
                min_age: 60_000,
                max_age: 60_000
            }
        );
        assert_eq!(f[5].seen, 1);
        assert!(common(&f[1], 3) && common(&f[2], 3) && !common(&f[5], 3));
    }
}
