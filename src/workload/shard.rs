//! Sharding what a workload loads: the `shard_key` and `presplit` of a
//! workload (docs/sharding.md), their validation, the split points of a
//! ranged `presplit`, and the rule that warns when a ranged key only
//! grows. Pure values; the prepare step that applies them is
//! [`super::PrepareStep::Shard`].

use std::fmt;

use mongodb::bson::{Bson, Document};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use std::sync::Arc;

use super::{Keys, OpSource, OpSpec, PrepareStep, Workload};
use crate::config_values::KeyError;

/// One field of a shard key: ranged (`1`) or `"hashed"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyDir {
    Ranged,
    Hashed,
}

/// A shard key as written, `{ _id = "hashed" }` or `{ k = 1, _id = 1 }`,
/// its fields in the order given (a compound key's order matters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardKey {
    /// Each field with its direction, as read; checked by
    /// [`ShardKey::validate`] (a value other than `1` or `"hashed"` is
    /// kept as `Err(value)` so that the error names the field).
    pub fields: Vec<(String, Result<KeyDir, String>)>,
}

impl<'de> Deserialize<'de> for ShardKey {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ShardKey, D::Error> {
        struct Fields;
        impl<'de> Visitor<'de> for Fields {
            type Value = ShardKey;

            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a table of fields, each 1 or \"hashed\": { _id = \"hashed\" }")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ShardKey, A::Error> {
                let mut fields = Vec::new();
                while let Some(name) = map.next_key::<String>()? {
                    let dir = match map.next_value::<RawDir>()? {
                        RawDir::Int(1) => Ok(KeyDir::Ranged),
                        RawDir::Str(s) if s == "hashed" => Ok(KeyDir::Hashed),
                        RawDir::Int(n) => Err(n.to_string()),
                        RawDir::Str(s) => Err(format!("{s:?}")),
                        RawDir::Other(s) => Err(s),
                    };
                    fields.push((name, dir));
                }
                Ok(ShardKey { fields })
            }
        }
        d.deserialize_map(Fields)
    }
}

/// A shard key field's value as written, judged by [`ShardKey::validate`].
enum RawDir {
    Int(i64),
    Str(String),
    Other(String),
}

impl<'de> Deserialize<'de> for RawDir {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<RawDir, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawDir;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("1 or \"hashed\"")
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawDir, E> {
                Ok(RawDir::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawDir, E> {
                Ok(i64::try_from(v).map_or(RawDir::Other(v.to_string()), RawDir::Int))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<RawDir, E> {
                Ok(RawDir::Other(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<RawDir, E> {
                Ok(RawDir::Other(v.to_string()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawDir, E> {
                Ok(RawDir::Str(v.to_owned()))
            }
        }
        d.deserialize_any(V)
    }
}

impl ShardKey {
    /// A key of `(field, direction)` pairs (tests, plain values).
    pub fn of(fields: &[(&str, KeyDir)]) -> ShardKey {
        ShardKey {
            fields: fields
                .iter()
                .map(|(f, d)| ((*f).to_owned(), Ok(*d)))
                .collect(),
        }
    }

    /// Checks the key as MongoDB would take it: at least one field, names
    /// without `$` or an empty part, each `1` or `"hashed"`, at most one
    /// hashed field. Errors name `shard_key[.field]`.
    pub fn validate(&self) -> Result<(), KeyError> {
        if self.fields.is_empty() {
            return Err(KeyError::new(
                "shard_key",
                "must name at least one field: { _id = \"hashed\" } or { k = 1 }",
            ));
        }
        for (name, dir) in &self.fields {
            if name.is_empty() || name.starts_with('$') || name.split('.').any(str::is_empty) {
                return Err(KeyError::new(
                    "shard_key",
                    format!("{name:?} is not a field name (empty, or starting with '$')"),
                ));
            }
            if let Err(v) = dir {
                return Err(KeyError::new(
                    format!("shard_key.{name}"),
                    format!("must be 1 (ranged) or \"hashed\", got {v}"),
                ));
            }
        }
        let hashed: Vec<&str> = self
            .fields
            .iter()
            .filter(|(_, d)| *d == Ok(KeyDir::Hashed))
            .map(|(n, _)| n.as_str())
            .collect();
        if hashed.len() > 1 {
            return Err(KeyError::new(
                "shard_key",
                format!(
                    "hashes {} fields ({}); MongoDB allows one hashed field in a shard key",
                    hashed.len(),
                    hashed.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// The first field (what a ranged `presplit` splits on).
    pub fn first(&self) -> &str {
        self.fields.first().map_or("", |(n, _)| n.as_str())
    }

    /// Whether a field is hashed.
    pub fn is_hashed(&self) -> bool {
        self.fields.iter().any(|(_, d)| *d == Ok(KeyDir::Hashed))
    }

    /// Whether the key is hashed on its first field (MongoDB takes
    /// `numInitialChunks` only then).
    pub fn hashed_prefix(&self) -> bool {
        matches!(self.fields.first(), Some((_, Ok(KeyDir::Hashed))))
    }

    /// The key as `shardCollection` takes it: `{ _id: "hashed" }`.
    pub fn to_document(&self) -> Document {
        let mut d = Document::new();
        for (name, dir) in &self.fields {
            match dir {
                Ok(KeyDir::Hashed) => d.insert(name.clone(), "hashed"),
                _ => d.insert(name.clone(), 1i32),
            };
        }
        d
    }
}

impl fmt::Display for ShardKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{ ")?;
        for (i, (name, dir)) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            match dir {
                Ok(KeyDir::Hashed) => write!(f, "{name}: \"hashed\"")?,
                Ok(KeyDir::Ranged) => write!(f, "{name}: 1")?,
                Err(v) => write!(f, "{name}: {v}")?,
            }
        }
        f.write_str(" }")
    }
}

/// What a kind's key generator says of one field of its documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyShape {
    /// Values that inserts take in increasing order (a counter, a
    /// timestamp): under a ranged key every insert lands on the shard
    /// owning the top chunk. `range`: the integers `[start, end)` the
    /// prepare loads and the bound keeps, where known.
    Grows { range: Option<(i64, i64)> },
    /// Integers that stay within `[start, end)`, drawn without order.
    Within { start: i64, end: i64 },
    /// Values inserts draw without order (hashed or random keys).
    Scattered,
    /// The kind says nothing of the field.
    Unknown,
}

impl KeyShape {
    /// A counter `_id` over `[0, end)`: taken in increasing order by a
    /// plan that inserts, drawn within the range by one that does not.
    pub fn counter(inserts: bool, end: u64) -> KeyShape {
        let end = end.min(i64::MAX as u64) as i64;
        if inserts {
            KeyShape::Grows {
                range: Some((0, end)),
            }
        } else {
            KeyShape::Within { start: 0, end }
        }
    }
}

/// The sharding of one workload: its key, and `presplit` (hashed: the
/// initial chunk count; ranged: the chunks to split the known range into).
#[derive(Debug, Clone, PartialEq)]
pub struct ShardPlan {
    pub key: ShardKey,
    /// Hashed: `numInitialChunks`. Ranged: where to split, each chunk then
    /// moved round-robin over the shards.
    pub presplit: Presplit,
}

impl ShardPlan {
    /// The `check-config` line: `{ _id: "hashed" }, 8 initial chunks`.
    pub fn describe(&self, kind: &str) -> String {
        let how = match &self.presplit {
            Presplit::None if self.key.hashed_prefix() => {
                "the server's initial chunks (2 per shard)".to_owned()
            }
            Presplit::None => "one chunk on the primary shard, split as it grows".to_owned(),
            Presplit::Hashed(n) => format!("{n} initial chunks (numInitialChunks)"),
            Presplit::Ranged(points) => format!(
                "{} chunks of the {kind} kind's {:?} range, split at {}{}, moved round-robin over the shards",
                points.len() + 1,
                self.key.first(),
                points.iter().take(4).map(i64::to_string).collect::<Vec<_>>().join(", "),
                if points.len() > 4 { ", …" } else { "" }
            ),
        };
        format!("every collection on {}, {how}", self.key)
    }
}

/// What a plan does beyond `shardCollection`.
#[derive(Debug, Clone, PartialEq)]
pub enum Presplit {
    None,
    /// `numInitialChunks`.
    Hashed(u32),
    /// Split at these values of the first field.
    Ranged(Vec<i64>),
}

/// The most chunks `presplit` may ask for (MongoDB: 8192 per shard for a
/// hashed key; a load generator needs far fewer).
pub(crate) const PRESPLIT_MAX: u32 = 8192;

/// The plan of a workload whose `shard_key` and `presplit` are `key` and
/// `presplit`, its kind saying `shape` of the key's first field. Errors
/// name the key (`presplit`, `shard_key…`).
pub(crate) fn plan(
    key: Option<&ShardKey>,
    presplit: Option<u32>,
    shape: KeyShape,
    kind: &str,
) -> Result<Option<ShardPlan>, KeyError> {
    let Some(key) = key else {
        return match presplit {
            Some(_) => Err(KeyError::new(
                "presplit",
                "needs shard_key: presplit says how to split a sharded collection",
            )),
            None => Ok(None),
        };
    };
    key.validate()?;
    let presplit = match presplit {
        None => Presplit::None,
        Some(0) => return Err(KeyError::new("presplit", "must be at least 1, got 0")),
        Some(n) if n > PRESPLIT_MAX => {
            return Err(KeyError::new(
                "presplit",
                format!("must be at most {PRESPLIT_MAX}, got {n}"),
            ))
        }
        Some(n) if key.hashed_prefix() => Presplit::Hashed(n),
        Some(_) if key.is_hashed() => {
            return Err(KeyError::new(
                "presplit",
                format!(
                    "a compound hashed key presplits only when hashed on its first field; {key} is not"
                ),
            ))
        }
        Some(n) => match shape {
            KeyShape::Grows {
                range: Some((start, end)),
            }
            | KeyShape::Within { start, end } => {
                Presplit::Ranged(split_points(start, end, n).map_err(|r| {
                    KeyError::new(
                        "presplit",
                        format!("{r} (the {kind} kind's {} range)", key.first()),
                    )
                })?)
            }
            _ => {
                return Err(KeyError::new(
                    "presplit",
                    format!(
                        "the {kind} kind has no known integer range of {:?} to split; shard on a hashed key, or give no presplit",
                        key.first()
                    ),
                ))
            }
        },
    };
    Ok(Some(ShardPlan {
        key: key.clone(),
        presplit,
    }))
}

/// The `chunks - 1` points that split `[start, end)` into `chunks` ranges
/// as equal as integers allow (the first chunk also takes everything
/// below `start`, the last everything above).
pub(crate) fn split_points(start: i64, end: i64, chunks: u32) -> Result<Vec<i64>, String> {
    let len = end.saturating_sub(start);
    if len < i64::from(chunks) {
        return Err(format!(
            "{chunks} chunks need at least {chunks} keys, the range [{start}, {end}) has {}",
            len.max(0)
        ));
    }
    Ok((1..i64::from(chunks))
        .map(|i| start + (i128::from(len) * i128::from(i) / i128::from(chunks)) as i64)
        .collect())
}

/// The warning for a ranged key whose first field the kind's inserts only
/// grow: every insert lands on one shard.
pub(crate) fn grows_warning(
    workload: &str,
    key: &ShardKey,
    shape: KeyShape,
    kind: &str,
) -> Option<String> {
    if key.hashed_prefix() {
        return None;
    }
    matches!(shape, KeyShape::Grows { .. }).then(|| {
        format!(
            "workload {workload:?}: shard_key {key} is ranged on {:?}, which the {kind} kind's inserts only grow: every insert lands on the shard owning the top chunk; a hashed key ({{ {} = \"hashed\" }}) spreads them",
            key.first(),
            key.first()
        )
    })
}

/// The `split` commands' `middle` for a ranged plan: each point on the
/// first field, the key's other fields at MinKey.
pub(crate) fn split_middle(key: &ShardKey, point: i64) -> Document {
    let mut d = Document::new();
    for (i, (name, _)) in key.fields.iter().enumerate() {
        d.insert(
            name.clone(),
            if i == 0 {
                Bson::Int64(point)
            } else {
                Bson::MinKey
            },
        );
    }
    d
}

/// `listShards`' shard names, in order, from its reply.
pub(crate) fn shard_names(reply: &Document) -> Vec<String> {
    reply
        .get_array("shards")
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_document()?.get_str("_id").ok().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// One chunk of a collection as a ranged presplit sees it: where its range
/// starts on the key's first field (`None`: at MinKey, the first chunk)
/// and the shard holding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChunkAt {
    pub start: Option<i64>,
    pub shard: String,
}

impl ChunkAt {
    /// From a `config.chunks` document (`min`, `shard`), for `key`; `None`
    /// when its `min` does not start with an integer or MinKey on the
    /// key's first field (a chunk this presplit did not make).
    pub(crate) fn from_chunk(d: &Document, key: &ShardKey) -> Option<ChunkAt> {
        let min = d.get_document("min").ok()?;
        let start = match min.get(key.first())? {
            Bson::MinKey => None,
            Bson::Int64(n) => Some(*n),
            Bson::Int32(n) => Some(i64::from(*n)),
            _ => return None,
        };
        Some(ChunkAt {
            start,
            shard: d.get_str("shard").ok()?.to_owned(),
        })
    }
}

/// The split points of a ranged presplit that are not yet chunk
/// boundaries: an interrupted presplit resumes with these.
pub(crate) fn missing_splits(points: &[i64], chunks: &[ChunkAt]) -> Vec<i64> {
    points
        .iter()
        .copied()
        .filter(|p| !chunks.iter().any(|c| c.start == Some(*p)))
        .collect()
}

/// The moves that spread a ranged presplit's chunks round-robin over
/// `shards` (chunk `i` in key order to shard `i mod n`): `(a point inside
/// the chunk, to)`, only for a chunk not on its shard. None once the
/// chunks are spread (every shard's count within one of the others', as
/// round-robin leaves them), whoever spread them: a presplit that ran to
/// its end, or the balancer since. `points` gives the first chunk's
/// point (below the first split).
pub(crate) fn spreading_moves(
    points: &[i64],
    chunks: &[ChunkAt],
    shards: &[String],
) -> Vec<(i64, String)> {
    if shards.is_empty() || chunks.is_empty() {
        return Vec::new();
    }
    let count = |s: &String| chunks.iter().filter(|c| c.shard == *s).count();
    let most = shards.iter().map(count).max().unwrap_or(0);
    let fewest = shards.iter().map(count).min().unwrap_or(0);
    if most <= fewest + 1 {
        return Vec::new();
    }
    let mut ordered: Vec<&ChunkAt> = chunks.iter().collect();
    ordered.sort_by_key(|c| c.start.unwrap_or(i64::MIN));
    let below = points.first().map_or(0, |p| p.saturating_sub(1));
    ordered
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let to = &shards[i % shards.len()];
            (c.shard != *to).then(|| (c.start.unwrap_or(below), to.clone()))
        })
        .collect()
}

/// `{ key: … }` of a collection as `config.collections` holds it, compared
/// with the planned key (field order included).
pub(crate) fn same_key(found: &Document, planned: &ShardKey) -> bool {
    let planned = planned.to_document();
    found.len() == planned.len()
        && found.iter().zip(planned.iter()).all(|((a, av), (b, bv))| {
            a == b
                && match (av, bv) {
                    (Bson::String(x), Bson::String(y)) => x == y,
                    (x, Bson::Int32(1)) => {
                        matches!(x, Bson::Int32(1))
                            || *x == Bson::Int64(1)
                            || *x == Bson::Double(1.0)
                    }
                    _ => false,
                }
        })
}

/// A workload whose collections are sharded: the same workload with
/// [`PrepareStep::Shard`] first among its prepare steps.
pub(crate) struct Sharded {
    inner: Arc<dyn Workload>,
    plan: ShardPlan,
}

impl Sharded {
    /// `inner`, sharded as `plan` says.
    pub(crate) fn wrap(inner: Arc<dyn Workload>, plan: ShardPlan) -> Arc<dyn Workload> {
        Arc::new(Sharded { inner, plan })
    }
}

impl Workload for Sharded {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }
    fn ops(&self) -> &[OpSpec] {
        self.inner.ops()
    }
    fn op_names(&self) -> Vec<&str> {
        self.inner.op_names()
    }
    fn collections(&self) -> &[String] {
        self.inner.collections()
    }
    fn prepare(&self) -> Vec<PrepareStep> {
        let mut steps = vec![PrepareStep::Shard {
            plan: self.plan.clone(),
        }];
        steps.extend(self.inner.prepare());
        steps
    }
    fn worker(&self, worker_id: u32, seed: u64) -> Box<dyn OpSource> {
        self.inner.worker(worker_id, seed)
    }
    fn keys(&self) -> Vec<&Keys> {
        self.inner.keys()
    }
    fn audit_keys(&self) -> Arc<dyn super::AuditKeys> {
        self.inner.audit_keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mongodb::bson::doc;

    fn key(text: &str) -> ShardKey {
        #[derive(Deserialize)]
        struct W {
            shard_key: ShardKey,
        }
        serde_json::from_str::<W>(text).unwrap().shard_key
    }

    #[test]
    fn keys_read_in_order_and_validate_as_mongodb_allows() {
        let k = key(r#"{"shard_key": {"b": 1, "a": "hashed"}}"#);
        assert_eq!(
            k,
            ShardKey::of(&[("b", KeyDir::Ranged), ("a", KeyDir::Hashed)])
        );
        assert!(k.validate().is_ok());
        assert_eq!(k.to_string(), "{ b: 1, a: \"hashed\" }");
        assert_eq!(k.to_document(), doc! {"b": 1, "a": "hashed"});

        let two = key(r#"{"shard_key": {"a": "hashed", "b": "hashed"}}"#);
        let e = two.validate().unwrap_err();
        assert_eq!(e.key, "shard_key");
        assert!(e.reason.contains("one hashed field"), "{e}");

        let bad = key(r#"{"shard_key": {"a": -1}}"#);
        let e = bad.validate().unwrap_err();
        assert_eq!(e.key, "shard_key.a");
        assert!(e.reason.contains("got -1"), "{e}");

        assert_eq!(
            key(r#"{"shard_key": {}}"#).validate().unwrap_err().key,
            "shard_key"
        );
        assert!(key(r#"{"shard_key": {"$x": 1}}"#).validate().is_err());
    }

    #[test]
    fn presplit_needs_a_key_and_a_known_range_when_ranged() {
        let grows = KeyShape::Grows {
            range: Some((0, 1000)),
        };
        let e = plan(None, Some(4), grows, "mixed").unwrap_err();
        assert_eq!(e.key, "presplit");
        assert!(e.reason.contains("needs shard_key"));
        assert_eq!(plan(None, None, grows, "mixed").unwrap(), None);

        let hashed = ShardKey::of(&[("_id", KeyDir::Hashed)]);
        let p = plan(Some(&hashed), Some(8), KeyShape::Unknown, "custom")
            .unwrap()
            .unwrap();
        assert_eq!(p.presplit, Presplit::Hashed(8));

        let ranged = ShardKey::of(&[("_id", KeyDir::Ranged)]);
        let p = plan(Some(&ranged), Some(4), grows, "mixed")
            .unwrap()
            .unwrap();
        assert_eq!(p.presplit, Presplit::Ranged(vec![250, 500, 750]));
        let e = plan(Some(&ranged), Some(4), KeyShape::Scattered, "ycsb").unwrap_err();
        assert!(e.reason.contains("no known integer range"), "{e}");
        let e = plan(Some(&ranged), Some(2), KeyShape::Grows { range: None }, "x").unwrap_err();
        assert!(e.reason.contains("no known integer range"), "{e}");
        let within = KeyShape::Within { start: 0, end: 10 };
        let p = plan(Some(&ranged), Some(2), within, "sysbench")
            .unwrap()
            .unwrap();
        assert_eq!(p.presplit, Presplit::Ranged(vec![5]));
        let e = plan(Some(&ranged), Some(0), grows, "mixed").unwrap_err();
        assert!(e.reason.contains("at least 1"));

        let compound = ShardKey::of(&[("k", KeyDir::Ranged), ("_id", KeyDir::Hashed)]);
        assert!(plan(Some(&compound), Some(4), grows, "mixed").is_err());
        assert_eq!(
            plan(Some(&compound), None, grows, "mixed")
                .unwrap()
                .unwrap()
                .presplit,
            Presplit::None
        );
    }

    #[test]
    fn split_points_cut_the_range_evenly() {
        assert_eq!(split_points(0, 10, 2).unwrap(), vec![5]);
        assert_eq!(split_points(0, 10, 3).unwrap(), vec![3, 6]);
        assert_eq!(split_points(100, 104, 4).unwrap(), vec![101, 102, 103]);
        assert_eq!(split_points(0, 10, 1).unwrap(), Vec::<i64>::new());
        assert!(split_points(0, 3, 4).unwrap_err().contains("has 3"));
        assert!(split_points(5, 0, 2).unwrap_err().contains("has 0"));
    }

    #[test]
    fn only_a_ranged_key_on_a_growing_field_warns() {
        let grows = KeyShape::Grows {
            range: Some((0, 10)),
        };
        let ranged = ShardKey::of(&[("_id", KeyDir::Ranged)]);
        let w = grows_warning("w", &ranged, grows, "insert-benchmark").unwrap();
        assert!(
            w.contains("only grow") && w.contains("insert-benchmark"),
            "{w}"
        );
        assert!(grows_warning("w", &ranged, KeyShape::Scattered, "ycsb").is_none());
        assert!(grows_warning("w", &ranged, KeyShape::Unknown, "custom").is_none());
        let within = KeyShape::Within { start: 0, end: 10 };
        assert!(grows_warning("w", &ranged, within, "sysbench").is_none());
        let time = KeyShape::Grows { range: None };
        assert!(grows_warning("w", &ranged, time, "insert-benchmark").is_some());
        let hashed = ShardKey::of(&[("_id", KeyDir::Hashed)]);
        assert!(grows_warning("w", &hashed, grows, "mixed").is_none());
    }

    #[test]
    fn a_found_key_compares_with_the_planned_one() {
        let ranged = ShardKey::of(&[("k", KeyDir::Ranged), ("_id", KeyDir::Ranged)]);
        assert!(same_key(&doc! {"k": 1, "_id": 1}, &ranged));
        assert!(same_key(&doc! {"k": 1.0, "_id": 1i64}, &ranged));
        assert!(!same_key(&doc! {"_id": 1, "k": 1}, &ranged));
        assert!(!same_key(&doc! {"k": "hashed", "_id": 1}, &ranged));
        assert!(!same_key(&doc! {"k": 1}, &ranged));
        assert_eq!(
            split_middle(&ranged, 5),
            doc! {"k": 5i64, "_id": Bson::MinKey}
        );
        assert_eq!(
            shard_names(&doc! {"shards": [{"_id": "shard0"}, {"_id": "shard1"}], "ok": 1}),
            vec!["shard0", "shard1"]
        );
    }

    fn at(start: Option<i64>, shard: &str) -> ChunkAt {
        ChunkAt {
            start,
            shard: shard.to_owned(),
        }
    }

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("shard{i}")).collect()
    }

    #[test]
    fn a_fresh_presplit_splits_everywhere_and_spreads_round_robin() {
        let points = [100, 200, 300];
        let one = [at(None, "shard1")];
        assert_eq!(missing_splits(&points, &one), vec![100, 200, 300]);
        let split: Vec<ChunkAt> = [None, Some(100), Some(200), Some(300)]
            .into_iter()
            .map(|s| at(s, "shard1"))
            .collect();
        // Chunk 1 belongs on shard1, where it is: no move for it.
        assert_eq!(
            spreading_moves(&points, &split, &names(3)),
            vec![
                (99, "shard0".to_owned()),
                (200, "shard2".to_owned()),
                (300, "shard0".to_owned()),
            ]
        );
    }

    #[test]
    fn an_interrupted_presplit_resumes_with_what_is_missing_only() {
        let points = [100, 200, 300];
        // Split at 100 and 200 only, nothing moved yet.
        let part = [
            at(None, "shard0"),
            at(Some(100), "shard0"),
            at(Some(200), "shard0"),
        ];
        assert_eq!(missing_splits(&points, &part), vec![300]);
        // All split, chunks 0 and 1 moved, then interrupted: 3 on shard0.
        let moved = [
            at(Some(300), "shard0"),
            at(None, "shard0"),
            at(Some(200), "shard0"),
            at(Some(100), "shard1"),
        ];
        assert!(missing_splits(&points, &moved).is_empty());
        assert_eq!(
            spreading_moves(&points, &moved, &names(3)),
            vec![(200, "shard2".to_owned())]
        );
        // Spread (by the presplit or the balancer since): nothing to do.
        let spread = [
            at(None, "shard2"),
            at(Some(100), "shard0"),
            at(Some(200), "shard1"),
            at(Some(300), "shard0"),
        ];
        assert!(spreading_moves(&points, &spread, &names(3)).is_empty());
    }

    #[test]
    fn a_chunk_document_gives_its_start_on_the_first_field_and_its_shard() {
        let key = ShardKey {
            fields: vec![
                ("k".into(), Ok(KeyDir::Ranged)),
                ("_id".into(), Ok(KeyDir::Ranged)),
            ],
        };
        let first = doc! {"min": {"k": Bson::MinKey, "_id": Bson::MinKey}, "shard": "s0"};
        assert_eq!(ChunkAt::from_chunk(&first, &key), Some(at(None, "s0")));
        let next = doc! {"min": {"k": 5_i64, "_id": Bson::MinKey}, "shard": "s1"};
        assert_eq!(ChunkAt::from_chunk(&next, &key), Some(at(Some(5), "s1")));
        let other = doc! {"min": {"k": "x"}, "shard": "s1"};
        assert_eq!(ChunkAt::from_chunk(&other, &key), None);
    }
}
