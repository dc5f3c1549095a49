//! The cluster's metadata as the config server keeps it: shards, databases
//! (each with its primary shard), sharded collections with their key
//! pattern and chunk table, and the documents `config.shards`,
//! `config.databases`, `config.collections` and `config.chunks` hold.
//! Pure values: no I/O, tested with plain documents.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, DateTime, Document, Timestamp};

use crate::query::{compare, hash};
use crate::query::{get_path, Bound, Filter, Interval};

/// How one field of a shard key partitions: by value, or by its hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    Ranged,
    Hashed,
}

/// A shard key pattern: its fields in order.
#[derive(Debug, Clone, PartialEq)]
pub struct ShardKey {
    pub fields: Vec<(String, KeyKind)>,
}

/// An error of the metadata commands, as `CmdError` takes it.
#[derive(Debug, Clone, PartialEq)]
pub struct MetaError {
    pub code: i32,
    pub code_name: &'static str,
    pub message: String,
}

impl MetaError {
    pub fn new(code: i32, code_name: &'static str, message: impl Into<String>) -> MetaError {
        MetaError {
            code,
            code_name,
            message: message.into(),
        }
    }
}

fn invalid(message: impl Into<String>) -> MetaError {
    MetaError::new(72, "InvalidOptions", message)
}

impl ShardKey {
    /// Parses `{a: 1}`, `{_id: "hashed"}`, `{a: 1, b: 1}`: each field 1
    /// (ranged) or "hashed" (at most one hashed field), as
    /// `shardCollection` accepts.
    pub fn parse(pattern: &Document) -> Result<ShardKey, MetaError> {
        if pattern.is_empty() {
            return Err(invalid("Shard key cannot be empty"));
        }
        let mut fields = Vec::new();
        for (name, v) in pattern {
            let kind = match v {
                Bson::String(s) if s == "hashed" => KeyKind::Hashed,
                Bson::Int32(1) | Bson::Int64(1) => KeyKind::Ranged,
                Bson::Double(f) if *f == 1.0 => KeyKind::Ranged,
                other => {
                    return Err(invalid(format!(
                        "Unsupported shard key pattern {pattern}: field {name} is {other}; \
                         pattern must contain only 1 or \"hashed\""
                    )))
                }
            };
            fields.push((name.clone(), kind));
        }
        if fields.iter().filter(|(_, k)| *k == KeyKind::Hashed).count() > 1 {
            return Err(invalid(format!(
                "Shard key {pattern} may contain at most one hashed field"
            )));
        }
        Ok(ShardKey { fields })
    }

    /// The pattern document (`{_id: "hashed"}`).
    pub fn pattern(&self) -> Document {
        let mut d = Document::new();
        for (f, k) in &self.fields {
            match k {
                KeyKind::Hashed => d.insert(f.clone(), "hashed"),
                KeyKind::Ranged => d.insert(f.clone(), 1),
            };
        }
        d
    }

    /// The key as an index key: each field ascending, or hashed.
    pub fn index_key(&self) -> Vec<(String, i32)> {
        self.fields
            .iter()
            .map(|(f, k)| {
                let dir = match k {
                    KeyKind::Hashed => crate::store::HASHED,
                    KeyKind::Ranged => 1,
                };
                (f.clone(), dir)
            })
            .collect()
    }

    /// The single hashed field's position, if any.
    pub fn hashed(&self) -> Option<usize> {
        self.fields.iter().position(|(_, k)| *k == KeyKind::Hashed)
    }

    /// The key of `doc`: each field's value (hashed where the pattern
    /// says), a missing field as null, as MongoDB 4.4+ treats it.
    pub fn key_of(&self, doc: &Document) -> Vec<Bson> {
        self.fields
            .iter()
            .map(|(f, k)| {
                let v = get_path(doc, f).cloned().unwrap_or(Bson::Null);
                match k {
                    KeyKind::Hashed => Bson::Int64(hash(&v)),
                    KeyKind::Ranged => v,
                }
            })
            .collect()
    }

    /// A bound document (`{_id: NumberLong(..)}`) from key values.
    pub fn bound(&self, values: &[Bson]) -> Document {
        self.fields
            .iter()
            .zip(values)
            .map(|((f, _), v)| (f.clone(), v.clone()))
            .collect()
    }

    /// Key values from a bound document with exactly the key's fields.
    pub fn values_of_bound(&self, bound: &Document) -> Result<Vec<Bson>, MetaError> {
        if bound.len() != self.fields.len() {
            return Err(invalid(format!(
                "{bound} does not match the shard key {}",
                self.pattern()
            )));
        }
        self.fields
            .iter()
            .map(|(f, _)| {
                bound.get(f).cloned().ok_or_else(|| {
                    invalid(format!(
                        "{bound} does not match the shard key {}",
                        self.pattern()
                    ))
                })
            })
            .collect()
    }

    /// The key a filter pins exactly (every field an equality), hashed
    /// where the pattern says; none when any field is not one value.
    pub fn exact(&self, filter: &Filter) -> Option<Vec<Bson>> {
        self.fields
            .iter()
            .map(|(f, k)| {
                let iv = filter.intervals(f)?;
                match iv.as_slice() {
                    [Interval {
                        lower: Bound::Included(l),
                        upper: Bound::Included(u),
                    }] if compare(l, u) == Ordering::Equal => Some(match k {
                        KeyKind::Hashed => Bson::Int64(hash(l)),
                        KeyKind::Ranged => l.clone(),
                    }),
                    _ => None,
                }
            })
            .collect()
    }
}

/// Compares two keys field by field in BSON order.
pub fn compare_keys(a: &[Bson], b: &[Bson]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match compare(x, y) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    Ordering::Equal
}

/// One chunk: the key range `[min, max)` and the shard that owns it.
#[derive(Debug, Clone, PartialEq)]
pub struct Chunk {
    pub id: bson::oid::ObjectId,
    pub min: Vec<Bson>,
    pub max: Vec<Bson>,
    pub shard: usize,
    /// The chunk version (major, minor): a migration bumps the major, a
    /// split the minor.
    pub lastmod: (u32, u32),
    /// When the chunk arrived on its shard.
    pub since: Timestamp,
}

impl Chunk {
    pub fn contains(&self, key: &[Bson]) -> bool {
        compare_keys(&self.min, key) != Ordering::Greater
            && compare_keys(key, &self.max) == Ordering::Less
    }
}

/// A sharded collection.
#[derive(Debug, Clone)]
pub struct ShardedColl {
    pub ns: String,
    pub key: ShardKey,
    pub unique: bool,
    pub uuid: Binary,
    pub epoch: bson::oid::ObjectId,
    pub timestamp: Timestamp,
    pub created: DateTime,
    /// Sorted by `min`, contiguous from MinKey to MaxKey.
    pub chunks: Vec<Chunk>,
}

impl ShardedColl {
    /// The collection version: the highest chunk version.
    pub fn version(&self) -> (u32, u32) {
        self.chunks
            .iter()
            .map(|c| c.lastmod)
            .max()
            .unwrap_or((1, 0))
    }

    /// The chunk holding `key`.
    pub fn chunk_of(&self, key: &[Bson]) -> usize {
        let i = self
            .chunks
            .partition_point(|c| compare_keys(&c.min, key) != Ordering::Greater);
        i.saturating_sub(1)
    }

    /// The shard owning the document `doc`.
    pub fn shard_of(&self, doc: &Document) -> usize {
        self.chunks[self.chunk_of(&self.key.key_of(doc))].shard
    }

    /// The shards a query with `filter` must visit (sorted, distinct):
    /// one when the filter pins the key, those owning the chunks its
    /// ranges on the key's first field overlap, else all owning a chunk.
    pub fn targets(&self, filter: &Filter) -> Vec<usize> {
        let mut out: Vec<usize> = if let Some(key) = self.key.exact(filter) {
            vec![self.chunks[self.chunk_of(&key)].shard]
        } else {
            let (first, kind) = &self.key.fields[0];
            match (kind, filter.intervals(first)) {
                (KeyKind::Ranged, Some(ivs)) => {
                    let single = self.key.fields.len() == 1;
                    self.chunks
                        .iter()
                        .filter(|c| {
                            ivs.iter()
                                .any(|iv| overlaps(iv, &c.min[0], &c.max[0], single))
                        })
                        .map(|c| c.shard)
                        .collect()
                }
                (KeyKind::Hashed, Some(ivs)) if ivs.iter().all(is_point) => ivs
                    .iter()
                    .map(|iv| match &iv.lower {
                        Bound::Included(v) => {
                            let mut key = vec![Bson::Int64(hash(v))];
                            // A compound key with a hashed first field:
                            // the other fields are unknown, so the lowest
                            // chunk of that hash and those after it.
                            key.extend(std::iter::repeat_n(
                                Bson::MinKey,
                                self.key.fields.len() - 1,
                            ));
                            self.chunks[self.chunk_of(&key)].shard
                        }
                        _ => unreachable!("points are included"),
                    })
                    .collect(),
                _ => self.chunks.iter().map(|c| c.shard).collect(),
            }
        };
        out.sort_unstable();
        out.dedup();
        out
    }
}

fn is_point(iv: &Interval) -> bool {
    matches!((&iv.lower, &iv.upper), (Bound::Included(l), Bound::Included(u)) if compare(l, u) == Ordering::Equal)
}

/// Whether interval `iv` meets the chunk `[min, max)` on one field
/// (`[min, max]` when the key has more fields: the chunk's ends on the
/// first field then both belong to it in part).
fn overlaps(iv: &Interval, min: &Bson, max: &Bson, single: bool) -> bool {
    let below_max = match &iv.lower {
        Bound::Unbounded => true,
        Bound::Included(l) | Bound::Excluded(l) => match compare(l, max) {
            Ordering::Less => true,
            Ordering::Equal => !single,
            Ordering::Greater => false,
        },
    };
    let above_min = match &iv.upper {
        Bound::Unbounded => true,
        Bound::Included(u) => compare(u, min) != Ordering::Less,
        Bound::Excluded(u) => compare(u, min) == Ordering::Greater,
    };
    below_max && above_min
}

/// A database's entry: its primary shard.
#[derive(Debug, Clone)]
pub struct DbEntry {
    pub primary: usize,
    pub uuid: Binary,
    pub timestamp: Timestamp,
}

/// The whole catalog.
#[derive(Debug, Clone)]
pub struct Catalog {
    /// Shard names (`shard0`, ...) and their connection strings (`host:port`
    /// or `rs/host:port,...`).
    pub shards: Vec<(String, String)>,
    pub databases: BTreeMap<String, DbEntry>,
    pub collections: BTreeMap<String, ShardedColl>,
    /// Incremented for each new timestamp the catalog hands out.
    clock: u32,
    next_primary: usize,
}

fn uuid() -> Binary {
    Binary {
        subtype: BinarySubtype::Uuid,
        bytes: rand::random::<[u8; 16]>().to_vec(),
    }
}

/// The largest number of initial chunks per shard `shardCollection` accepts.
pub const MAX_INITIAL_CHUNKS_PER_SHARD: i64 = 8192;

impl Catalog {
    pub fn new(shards: Vec<(String, String)>) -> Catalog {
        Catalog {
            shards,
            databases: BTreeMap::new(),
            collections: BTreeMap::new(),
            clock: 0,
            next_primary: 0,
        }
    }

    fn tick(&mut self) -> Timestamp {
        self.clock += 1;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as u32);
        Timestamp {
            time: now,
            increment: self.clock,
        }
    }

    /// The shard index named `name`.
    pub fn shard_named(&self, name: &str) -> Option<usize> {
        self.shards.iter().position(|(n, _)| n == name)
    }

    /// The database's entry, created on first use with the next primary
    /// shard in turn (as MongoDB picks the least loaded shard).
    pub fn database(&mut self, db: &str) -> &DbEntry {
        if !self.databases.contains_key(db) {
            let primary = self.next_primary % self.shards.len();
            self.next_primary += 1;
            let timestamp = self.tick();
            self.databases.insert(
                db.to_owned(),
                DbEntry {
                    primary,
                    uuid: uuid(),
                    timestamp,
                },
            );
        }
        &self.databases[db]
    }

    /// The primary shard of `db` (created on first use). `admin` and
    /// `config` are the config server's, not in `config.databases`: the
    /// first shard answers for them.
    pub fn primary_of(&mut self, db: &str) -> usize {
        if matches!(db, "admin" | "config") {
            return 0;
        }
        self.database(db).primary
    }

    /// Shards `ns` with `key`. An empty collection with a hashed key gets
    /// `initial_chunks` (default two per shard, as MongoDB 7.0) spread
    /// round-robin over the shards; otherwise one chunk on the primary
    /// shard. Sharding again with the same key is a no-op (`Ok(false)`).
    pub fn shard_collection(
        &mut self,
        ns: &str,
        key: ShardKey,
        unique: bool,
        initial_chunks: Option<i64>,
        empty: bool,
    ) -> Result<bool, MetaError> {
        if let Some(existing) = self.collections.get(ns) {
            if existing.key == key {
                return Ok(false);
            }
            return Err(MetaError::new(
                23,
                "AlreadyInitialized",
                format!(
                    "sharding already enabled for collection {ns} with options {{ key: {}, unique: {} }}",
                    existing.key.pattern(),
                    existing.unique
                ),
            ));
        }
        let (db, _) = ns.split_once('.').ok_or_else(|| {
            MetaError::new(73, "InvalidNamespace", format!("Invalid namespace {ns}"))
        })?;
        if unique && key.hashed().is_some() {
            return Err(invalid(
                "Hashed shard keys cannot be declared unique. It's possible to ensure uniqueness on the hashed field by declaring an additional (non-hashed) unique index on the field.",
            ));
        }
        let n_shards = self.shards.len();
        if let Some(n) = initial_chunks {
            if key.hashed().is_none() && n != 0 {
                return Err(invalid(
                    "numInitialChunks is only supported when the collection is empty and has a hashed field in the shard key pattern",
                ));
            }
            if n < 0 || n > MAX_INITIAL_CHUNKS_PER_SHARD * n_shards as i64 {
                return Err(invalid(format!(
                    "numInitialChunks cannot be more than either: {MAX_INITIAL_CHUNKS_PER_SHARD} * number of shards; or 8192"
                )));
            }
        }
        let primary = self.primary_of(db);
        let timestamp = self.tick();
        let width = key.fields.len();
        let lowest = vec![Bson::MinKey; width];
        let highest = vec![Bson::MaxKey; width];
        let chunks = match (key.hashed(), empty) {
            (Some(0), true) => {
                let n = match initial_chunks {
                    Some(n) if n > 0 => n as usize,
                    _ => 2 * n_shards,
                };
                let points = hashed_split_points(n);
                let mut bounds = vec![lowest.clone()];
                for p in points {
                    let mut b = vec![Bson::Int64(p)];
                    b.extend(std::iter::repeat_n(Bson::MinKey, width - 1));
                    bounds.push(b);
                }
                bounds.push(highest);
                bounds
                    .windows(2)
                    .enumerate()
                    .map(|(i, w)| Chunk {
                        id: bson::oid::ObjectId::new(),
                        min: w[0].clone(),
                        max: w[1].clone(),
                        shard: (primary + i * n_shards / n) % n_shards,
                        lastmod: (1, i as u32),
                        since: timestamp,
                    })
                    .collect()
            }
            _ => vec![Chunk {
                id: bson::oid::ObjectId::new(),
                min: lowest,
                max: highest,
                shard: primary,
                lastmod: (1, 0),
                since: timestamp,
            }],
        };
        self.collections.insert(
            ns.to_owned(),
            ShardedColl {
                ns: ns.to_owned(),
                key,
                unique,
                uuid: uuid(),
                epoch: bson::oid::ObjectId::new(),
                timestamp,
                created: DateTime::now(),
                chunks,
            },
        );
        Ok(true)
    }

    fn sharded(&mut self, ns: &str) -> Result<&mut ShardedColl, MetaError> {
        self.collections.get_mut(ns).ok_or_else(|| {
            MetaError::new(118, "NamespaceNotSharded", format!("{ns} is not sharded"))
        })
    }

    /// Splits the chunk holding `middle` at it (`split` with `middle`).
    pub fn split(&mut self, ns: &str, middle: &Document) -> Result<(), MetaError> {
        let coll = self.sharded(ns)?;
        let at = coll.key.values_of_bound(middle)?;
        let i = coll.chunk_of(&at);
        let c = &coll.chunks[i];
        if compare_keys(&c.min, &at) == Ordering::Equal {
            return Err(invalid(format!(
                "cannot split chunk {} at its own lower bound {middle}",
                bound_text(&coll.key, c)
            )));
        }
        let version = coll.version();
        let mut right = c.clone();
        right.id = bson::oid::ObjectId::new();
        right.min = at.clone();
        right.lastmod = (version.0, version.1 + 2);
        let left = &mut coll.chunks[i];
        left.max = at;
        left.lastmod = (version.0, version.1 + 1);
        coll.chunks.insert(i + 1, right);
        Ok(())
    }

    /// The chunk `moveChunk` names, by `find` (a document with the shard
    /// key's fields, hashed as the pattern says) or `bounds` (exactly a
    /// chunk's `[min, max]`), as its index.
    pub fn find_chunk(
        &self,
        ns: &str,
        find: Option<&Document>,
        bounds: Option<&[Bson]>,
    ) -> Result<usize, MetaError> {
        let coll = self.collections.get(ns).ok_or_else(|| {
            MetaError::new(118, "NamespaceNotSharded", format!("{ns} is not sharded"))
        })?;
        match (find, bounds) {
            (Some(f), None) => Ok(coll.chunk_of(&coll.key.key_of(f))),
            (None, Some([Bson::Document(min), Bson::Document(max)])) => {
                let (min, max) = (
                    coll.key.values_of_bound(min)?,
                    coll.key.values_of_bound(max)?,
                );
                coll.chunks
                    .iter()
                    .position(|c| {
                        compare_keys(&c.min, &min) == Ordering::Equal
                            && compare_keys(&c.max, &max) == Ordering::Equal
                    })
                    .ok_or_else(|| {
                        invalid(format!(
                            "no chunk has the bounds [{}, {})",
                            coll.key.bound(&min),
                            coll.key.bound(&max)
                        ))
                    })
            }
            (None, Some(_)) => Err(invalid("bounds must be an array of two documents")),
            _ => Err(invalid("need either find or bounds, and not both")),
        }
    }

    /// Records chunk `i` of `ns` as on shard `to`: its version becomes the
    /// collection's next major version.
    pub fn commit_move(&mut self, ns: &str, i: usize, to: usize) -> Result<(), MetaError> {
        let since = self.tick();
        let coll = self.sharded(ns)?;
        let (major, _) = coll.version();
        let c = &mut coll.chunks[i];
        c.shard = to;
        c.lastmod = (major + 1, 0);
        c.since = since;
        Ok(())
    }

    /// Forgets `ns` (dropped).
    pub fn drop_collection(&mut self, ns: &str) {
        self.collections.remove(ns);
    }

    /// Forgets `db` and its collections (dropped).
    pub fn drop_database(&mut self, db: &str) {
        self.databases.remove(db);
        let prefix = format!("{db}.");
        self.collections.retain(|ns, _| !ns.starts_with(&prefix));
    }

    /// Chunks per shard of `ns`, indexed by shard.
    pub fn chunk_counts(&self, ns: &str) -> Vec<usize> {
        let mut n = vec![0; self.shards.len()];
        if let Some(c) = self.collections.get(ns) {
            for ch in &c.chunks {
                n[ch.shard] += 1;
            }
        }
        n
    }

    /// `config.shards` documents.
    pub fn shard_docs(&self) -> Vec<Document> {
        self.shards
            .iter()
            .map(|(name, host)| {
                doc! { "_id": name, "host": host, "state": 1, "topologyTime": Timestamp { time: 0, increment: 1 } }
            })
            .collect()
    }

    /// `config.databases` documents.
    pub fn database_docs(&self) -> Vec<Document> {
        self.databases
            .iter()
            .map(|(name, e)| {
                doc! {
                    "_id": name,
                    "primary": &self.shards[e.primary].0,
                    "partitioned": false,
                    "version": { "uuid": e.uuid.clone(), "timestamp": e.timestamp, "lastMod": 1 },
                }
            })
            .collect()
    }

    /// `config.collections` documents.
    pub fn collection_docs(&self) -> Vec<Document> {
        self.collections
            .values()
            .map(|c| {
                doc! {
                    "_id": &c.ns,
                    "lastmodEpoch": c.epoch,
                    "lastmod": c.created,
                    "timestamp": c.timestamp,
                    "uuid": c.uuid.clone(),
                    "key": c.key.pattern(),
                    "unique": c.unique,
                    "noBalance": false,
                }
            })
            .collect()
    }

    /// `config.chunks` documents (by collection uuid, as since 5.0).
    pub fn chunk_docs(&self) -> Vec<Document> {
        self.collections
            .values()
            .flat_map(|c| {
                c.chunks.iter().map(move |ch| {
                    doc! {
                        "_id": ch.id,
                        "uuid": c.uuid.clone(),
                        "min": c.key.bound(&ch.min),
                        "max": c.key.bound(&ch.max),
                        "shard": &self.shards[ch.shard].0,
                        "lastmod": Timestamp { time: ch.lastmod.0, increment: ch.lastmod.1 },
                        "onCurrentShardSince": ch.since,
                        "history": [{ "validAfter": ch.since, "shard": &self.shards[ch.shard].0 }],
                    }
                })
            })
            .collect()
    }
}

fn bound_text(key: &ShardKey, c: &Chunk) -> String {
    format!("[{}, {})", key.bound(&c.min), key.bound(&c.max))
}

/// The `n - 1` split points that cut the hashed (signed 64-bit) key space
/// into `n` equal chunks.
pub fn hashed_split_points(n: usize) -> Vec<i64> {
    let width = (u64::MAX as u128 + 1) / n as u128;
    (1..n)
        .map(|i| (i64::MIN as i128 + (width * i as u128) as i128) as i64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalog() -> Catalog {
        Catalog::new(vec![
            ("shard0".into(), "127.0.0.1:1".into()),
            ("shard1".into(), "127.0.0.1:2".into()),
        ])
    }

    fn filter(d: Document) -> Filter {
        Filter::parse(&d).unwrap()
    }

    #[test]
    fn hashed_key_gets_two_chunks_per_shard_spread_evenly() {
        let mut c = catalog();
        let key = ShardKey::parse(&doc! {"_id": "hashed"}).unwrap();
        assert!(c.shard_collection("db.c", key, false, None, true).unwrap());
        let coll = &c.collections["db.c"];
        assert_eq!(coll.chunks.len(), 4);
        assert_eq!(c.chunk_counts("db.c"), vec![2, 2]);
        assert_eq!(coll.chunks[0].min, vec![Bson::MinKey]);
        assert_eq!(coll.chunks[2].min, vec![Bson::Int64(0)]);
        assert_eq!(coll.chunks[3].max, vec![Bson::MaxKey]);
        // numInitialChunks as given.
        let key = ShardKey::parse(&doc! {"_id": "hashed"}).unwrap();
        c.shard_collection("db.d", key, false, Some(6), true)
            .unwrap();
        assert_eq!(c.chunk_counts("db.d"), vec![3, 3]);
        assert_eq!(hashed_split_points(2), vec![0]);
        assert_eq!(
            hashed_split_points(4),
            vec![i64::MIN / 2, 0, i64::MAX / 2 + 1]
        );
    }

    #[test]
    fn sharding_again_with_another_key_is_refused() {
        let mut c = catalog();
        let key = ShardKey::parse(&doc! {"a": 1}).unwrap();
        assert!(c
            .shard_collection("db.c", key.clone(), false, None, true)
            .unwrap());
        assert!(!c.shard_collection("db.c", key, false, None, true).unwrap());
        let other = ShardKey::parse(&doc! {"b": 1}).unwrap();
        let e = c
            .shard_collection("db.c", other, false, None, true)
            .unwrap_err();
        assert_eq!(e.code, 23);
        assert_eq!(ShardKey::parse(&doc! {"a": -1}).unwrap_err().code, 72);
        let hashed = ShardKey::parse(&doc! {"a": "hashed"}).unwrap();
        assert_eq!(
            c.shard_collection("db.u", hashed, true, None, true)
                .unwrap_err()
                .code,
            72
        );
    }

    #[test]
    fn ranged_split_move_and_targeting() {
        let mut c = catalog();
        let key = ShardKey::parse(&doc! {"x": 1}).unwrap();
        c.shard_collection("db.c", key, false, None, true).unwrap();
        let primary = c.collections["db.c"].chunks[0].shard;
        let other = 1 - primary;
        c.split("db.c", &doc! {"x": 100}).unwrap();
        assert_eq!(c.split("db.c", &doc! {"x": 100}).unwrap_err().code, 72);
        let i = c.find_chunk("db.c", Some(&doc! {"x": 150}), None).unwrap();
        assert_eq!(i, 1);
        let by_bounds = c
            .find_chunk(
                "db.c",
                None,
                Some(&[
                    Bson::Document(doc! {"x": 100}),
                    Bson::Document(doc! {"x": Bson::MaxKey}),
                ]),
            )
            .unwrap();
        assert_eq!(by_bounds, 1);
        c.commit_move("db.c", i, other).unwrap();
        let coll = &c.collections["db.c"];
        assert_eq!(coll.version(), (2, 0));
        assert_eq!(coll.shard_of(&doc! {"x": 99}), primary);
        assert_eq!(coll.shard_of(&doc! {"x": 100}), other);
        // A missing key is null: below every number, on the low chunk.
        assert_eq!(coll.shard_of(&doc! {"y": 1}), primary);
        assert_eq!(coll.targets(&filter(doc! {"x": 5})), vec![primary]);
        assert_eq!(
            coll.targets(&filter(doc! {"x": {"$gte": 100}})),
            vec![other]
        );
        assert_eq!(
            coll.targets(&filter(doc! {"x": {"$lt": 100}})),
            vec![primary]
        );
        assert_eq!(
            coll.targets(&filter(doc! {"x": {"$in": [1, 200]}})),
            vec![0, 1]
        );
        assert_eq!(coll.targets(&filter(doc! {"y": 1})), vec![0, 1]);
        assert_eq!(c.split("db.none", &doc! {"x": 1}).unwrap_err().code, 118);
        let docs = c.chunk_docs();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1].get_document("min").unwrap(), &doc! {"x": 100});
        assert_eq!(docs[1].get_str("shard").unwrap(), c.shards[other].0);
    }

    #[test]
    fn hashed_equality_targets_one_shard() {
        let mut c = catalog();
        let key = ShardKey::parse(&doc! {"_id": "hashed"}).unwrap();
        c.shard_collection("db.c", key, false, None, true).unwrap();
        let coll = &c.collections["db.c"];
        let mut seen = [0usize; 2];
        for i in 0..1000 {
            let s = coll.shard_of(&doc! {"_id": i});
            assert_eq!(coll.targets(&filter(doc! {"_id": i})), vec![s]);
            seen[s] += 1;
        }
        assert!(seen.iter().all(|&n| n > 400), "{seen:?}");
        // A range on a hashed key goes everywhere.
        assert_eq!(coll.targets(&filter(doc! {"_id": {"$gt": 5}})), vec![0, 1]);
        assert_eq!(hash(&Bson::Int32(7)), hash(&Bson::Int64(7)));
        assert_eq!(hash(&Bson::Int32(7)), hash(&Bson::Double(7.0)));
        assert_ne!(hash(&Bson::Int32(7)), hash(&Bson::String("7".into())));
    }
}
