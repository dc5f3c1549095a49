//! The template language of kind `custom`: filter, update, document and
//! pipeline templates are TOML values in which a table with the key
//! `"$gen"` is a generator instead of a literal:
//!
//! | `$gen` | keys | value |
//! |---|---|---|
//! | `uniform`, `zipfian`, `latest`, `sequential` | `min` (0), `max` | an integer in `[min, max)`; without `max` an existing document's sequence number (`_id`) |
//! | `double` | `min` (0), `max` (1) | a float in `[min, max)` |
//! | `string` | `length` | random ASCII of that length |
//! | `date` | `from`, `to` (RFC 3339), or `within` (a duration) | uniform between them, or in the last `within` before now; without them the current time |
//! | `array` | `of`, `min` (0), `max` | an array of `min..=max` values of template `of` |
//! | `choice` | `values` | one of the values, uniformly |
//! | `objectid` | | a random ObjectId |
//!
//! In a document template `sequential` is `min +` the document's sequence
//! number, so loaded and inserted documents count on from each other;
//! elsewhere it walks the existing documents in order. A template is
//! compiled once ([`Template::compile`], errors naming the key) and drawn
//! per operation ([`Template::eval`]).

use mongodb::bson::{Bson, DateTime, Document};
use rand::rngs::SmallRng;
use rand::{Rng, RngCore};
use serde_json::Value;

use crate::config_values::KeyError;
use crate::workload::generators::{KeyDist, KeyGen, PadPool};

pub(super) fn err<T>(key: &str, reason: impl Into<String>) -> Result<T, KeyError> {
    Err(KeyError {
        key: key.to_string(),
        reason: reason.into(),
    })
}

/// A compiled template: literals pre-built, generators ready to draw.
#[derive(Debug, Clone)]
pub(crate) enum Template {
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
pub(crate) enum Gen {
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
    /// Random bytes (BSON binary, subtype 0).
    Bin { len: usize },
    /// A date uniform in `[from, to)` (ms), or in the last `within` ms
    /// before now, or now.
    Date {
        range: Option<(i64, i64)>,
        within: Option<i64>,
    },
    /// An array of `min..=max` values.
    Array {
        of: Template,
        min: usize,
        max: usize,
    },
    /// One of these values.
    Choice(Vec<Bson>),
    /// A random ObjectId.
    ObjectId,
}

/// What a template draws from besides the worker's RNG.
pub(crate) struct Ctx<'a> {
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

pub(super) fn json_to_bson(v: &Value) -> Bson {
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
) -> Result<Option<i64>, KeyError> {
    typed_of(g, key, at, "an integer", Value::as_i64)
}

fn float_of(
    g: &serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<f64>, KeyError> {
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
) -> Result<Option<T>, KeyError> {
    match g.get(key) {
        None => Ok(None),
        Some(v) => as_t(v).map(Some).ok_or_else(|| KeyError {
            key: format!("{at}.{key}"),
            reason: format!("expected {what}, got {v}"),
        }),
    }
}

fn date_of(
    g: &serde_json::Map<String, Value>,
    key: &str,
    at: &str,
) -> Result<Option<i64>, KeyError> {
    match g.get(key) {
        None => Ok(None),
        Some(Value::String(s)) => DateTime::parse_rfc3339_str(s)
            .map(|d| Some(d.timestamp_millis()))
            .map_err(|e| KeyError {
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
    pub(crate) fn compile(v: &Value, at: &str) -> Result<Template, KeyError> {
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
    pub(crate) fn compile_doc(v: &Value, at: &str) -> Result<Template, KeyError> {
        if !v.is_object() || v.get("$gen").is_some() {
            return err(at, format!("expected a table (a document), got {v}"));
        }
        Template::compile(v, at)
    }

    /// Draws one value.
    pub(crate) fn eval(&mut self, ctx: &mut Ctx<'_>) -> Bson {
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
    pub(crate) fn eval_doc(&mut self, ctx: &mut Ctx<'_>) -> Document {
        match self.eval(ctx) {
            Bson::Document(d) => d,
            _ => Document::new(),
        }
    }
}

impl Gen {
    /// Compiles a `{ $gen = ... }` table: checks the generator's name and
    /// keys, then hands it to the generator's own compile below.
    fn compile(g: &serde_json::Map<String, Value>, at: &str) -> Result<Gen, KeyError> {
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
            "string" | "binary" => &["length"],
            "date" => &["from", "to", "within"],
            "array" => &["of", "min", "max"],
            "choice" => &["values"],
            "objectid" => &[],
            _ => {
                return err(
                    &format!("{at}.$gen"),
                    format!("unknown generator {kind:?}; known: uniform, zipfian, latest, sequential, double, string, binary, date, array, choice, objectid"),
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
        match kind {
            "uniform" | "zipfian" | "latest" | "sequential" => Gen::compile_int(kind, g, at),
            "double" => Gen::compile_double(g, at),
            "string" | "binary" => Gen::compile_bytes(kind, g, at),
            "date" => Gen::compile_date(g, at),
            "array" => Gen::compile_array(g, at),
            "objectid" => Ok(Gen::ObjectId),
            _ => Gen::compile_choice(g, at),
        }
    }

    /// `uniform`, `zipfian`, `latest` and `sequential`: integers from `min`
    /// over an optional span; the skewed ones have a table to fit in memory.
    fn compile_int(
        kind: &str,
        g: &serde_json::Map<String, Value>,
        at: &str,
    ) -> Result<Gen, KeyError> {
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
        Ok(Gen::Int {
            dist,
            min,
            span,
            keys: KeyGen::new(dist, span.unwrap_or(1)),
        })
    }

    /// `double`: a float in [min, max).
    fn compile_double(g: &serde_json::Map<String, Value>, at: &str) -> Result<Gen, KeyError> {
        let min = float_of(g, "min", at)?.unwrap_or(0.0);
        let max = float_of(g, "max", at)?.unwrap_or(1.0);
        if !(max > min && min.is_finite() && max.is_finite()) {
            return err(
                &format!("{at}.max"),
                format!("must be greater than min ({min}), got {max}"),
            );
        }
        Ok(Gen::Double { min, max })
    }

    /// `string` and `binary`: a required `length` of at most 16 MiB.
    fn compile_bytes(
        kind: &str,
        g: &serde_json::Map<String, Value>,
        at: &str,
    ) -> Result<Gen, KeyError> {
        let len = int_of(g, "length", at)?.ok_or_else(|| KeyError {
            key: format!("{at}.length"),
            reason: "is required".into(),
        })?;
        if !(0..=16 << 20).contains(&len) {
            return err(
                &format!("{at}.length"),
                format!("must be between 0 and 16MiB, got {len}"),
            );
        }
        Ok(if kind == "binary" {
            Gen::Bin { len: len as usize }
        } else {
            Gen::Str { len: len as usize }
        })
    }

    /// `date`: between `from` and `to`, within a duration before now, or now.
    fn compile_date(g: &serde_json::Map<String, Value>, at: &str) -> Result<Gen, KeyError> {
        let from = date_of(g, "from", at)?;
        let to = date_of(g, "to", at)?;
        let within = match g.get("within") {
            None => None,
            Some(Value::String(s)) => match humantime::parse_duration(s) {
                Ok(d) if !d.is_zero() && from.is_none() && to.is_none() => {
                    Some(d.as_millis().min(i64::MAX as u128) as i64)
                }
                Ok(d) if d.is_zero() => return err(&format!("{at}.within"), "must be above 0"),
                Ok(_) => {
                    return err(
                        &format!("{at}.within"),
                        "give within (before now) or from and to, not both",
                    )
                }
                Err(e) => {
                    return err(
                        &format!("{at}.within"),
                        format!("not a duration such as \"24h\": {e}"),
                    )
                }
            },
            Some(v) => {
                return err(
                    &format!("{at}.within"),
                    format!("expected a duration string such as \"24h\", got {v}"),
                )
            }
        };
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
        Ok(Gen::Date { range, within })
    }

    /// `array`: `min` to `max` elements, each drawn from the `of` template.
    fn compile_array(g: &serde_json::Map<String, Value>, at: &str) -> Result<Gen, KeyError> {
        let of = g.get("of").ok_or_else(|| KeyError {
            key: format!("{at}.of"),
            reason: "is required: the template of each element".into(),
        })?;
        let min = int_of(g, "min", at)?.unwrap_or(0);
        let max = int_of(g, "max", at)?.ok_or_else(|| KeyError {
            key: format!("{at}.max"),
            reason: "is required: the most elements".into(),
        })?;
        if min < 0 || max < min || max > 100_000 {
            return err(
                &format!("{at}.max"),
                format!("need 0 ≤ min ≤ max ≤ 100000, got min {min}, max {max}"),
            );
        }
        Ok(Gen::Array {
            of: Template::compile(of, &format!("{at}.of"))?,
            min: min as usize,
            max: max as usize,
        })
    }

    /// `choice`: one of a non-empty array of `values`.
    fn compile_choice(g: &serde_json::Map<String, Value>, at: &str) -> Result<Gen, KeyError> {
        match g.get("values") {
            Some(Value::Array(a)) if !a.is_empty() => {
                Ok(Gen::Choice(a.iter().map(json_to_bson).collect()))
            }
            _ => err(&format!("{at}.values"), "must be a non-empty array"),
        }
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
            Gen::Bin { len } => {
                let mut bytes = vec![0u8; *len];
                ctx.rng.fill_bytes(&mut bytes);
                Bson::Binary(mongodb::bson::Binary {
                    subtype: mongodb::bson::spec::BinarySubtype::Generic,
                    bytes,
                })
            }
            Gen::ObjectId => {
                Bson::ObjectId(mongodb::bson::oid::ObjectId::from_bytes(ctx.rng.random()))
            }
            Gen::Date { range, within } => Bson::DateTime(match (range, within) {
                (Some((f, t)), _) => DateTime::from_millis(ctx.rng.random_range(*f..*t)),
                (None, Some(w)) => DateTime::from_millis(
                    DateTime::now().timestamp_millis() - ctx.rng.random_range(0..*w),
                ),
                (None, None) => DateTime::now(),
            }),
            Gen::Array { of, min, max } => {
                let n = ctx.rng.random_range(*min..=*max);
                Bson::Array((0..n).map(|_| of.eval(ctx)).collect())
            }
            Gen::Choice(values) => values[ctx.rng.random_range(0..values.len())].clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::generators::worker_rng;
    use serde_json::json;

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
            "h": { "$gen": "binary", "length": 9 },
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
            let h = d.get_binary_generic("h").unwrap();
            assert_eq!(h.len(), 9);
            assert_eq!(d.get_i64("g"), Ok(42));
        }
    }

    #[test]
    fn objectids_are_random_and_dates_within_go_back_from_now() {
        let mut rng = worker_rng(1, 0);
        let v = json!({
            "o": { "$gen": "objectid" },
            "w": { "$gen": "date", "within": "1h" },
        });
        let mut t = Template::compile_doc(&v, "document").unwrap();
        let mut ids = std::collections::HashSet::new();
        for _ in 0..200 {
            let before = DateTime::now().timestamp_millis();
            let Bson::Document(d) = ctx_eval(&mut t, 5, None, &mut rng) else {
                panic!()
            };
            let after = DateTime::now().timestamp_millis();
            ids.insert(d.get_object_id("o").unwrap());
            let w = d.get_datetime("w").unwrap().timestamp_millis();
            assert!(w <= after && w > before - 3_600_000, "{w} {before}");
        }
        assert_eq!(ids.len(), 200);
        for (bad, key) in [
            (json!({ "$gen": "date", "within": "soon" }), "x.within"),
            (json!({ "$gen": "date", "within": "0s" }), "x.within"),
            (
                json!({ "$gen": "date", "within": "1h", "from": "2024-01-01T00:00:00Z", "to": "2024-01-02T00:00:00Z" }),
                "x.within",
            ),
            (json!({ "$gen": "objectid", "max": 3 }), "x.max"),
        ] {
            let e = Template::compile(&bad, "x").unwrap_err();
            assert_eq!(e.key, key, "{e:?}");
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
}
