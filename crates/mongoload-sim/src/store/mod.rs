//! In-memory storage of the simulator: databases of collections, each an
//! ordered map on `_id` plus secondary indexes (single or compound, unique or
//! not) kept on every write and used to answer equality/range filters and
//! sorts. Locks are plain `std` locks held only inside synchronous calls,
//! never across an `.await`.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound as StdBound;
use std::sync::{Arc, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bson::{doc, oid::ObjectId, Bson, Document};

use super::query::{
    array_on_path, compare, hash, index_values, path_exists, Bound, Filter, Interval, SortSpec,
};

mod plan;

/// A BSON value ordered by MongoDB's comparison order.
#[derive(Debug, Clone)]
pub struct Key(pub Bson);

impl Ord for Key {
    fn cmp(&self, other: &Self) -> Ordering {
        compare(&self.0, &other.0)
    }
}
impl PartialOrd for Key {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl PartialEq for Key {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Key {}

/// A write that MongoDB would reject for one document.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteError {
    pub code: i32,
    pub code_name: &'static str,
    pub errmsg: String,
    /// For duplicate keys: `keyPattern` and `keyValue`.
    pub key: Option<Box<(Document, Document)>>,
}

impl From<super::query::QueryError> for WriteError {
    fn from(e: super::query::QueryError) -> Self {
        WriteError {
            code: e.code,
            code_name: e.code_name,
            errmsg: e.message,
            key: None,
        }
    }
}

/// Locks without propagating poisoning: the data is plain maps that every
/// write leaves consistent before it can fail.
pub fn rlock<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}
/// See [`rlock`].
pub fn wlock<T>(l: &RwLock<T>) -> RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}

/// A hashed field's direction in an index key (`{a: "hashed"}`): the
/// index holds the value's [`hash`], so it finds equalities only and never
/// gives a sort order, as MongoDB's hashed index.
pub const HASHED: i32 = 0;

/// A key pattern's value for a field: its direction, or `"hashed"`.
pub fn key_direction(dir: i32) -> Bson {
    match dir {
        HASHED => Bson::String("hashed".into()),
        d => Bson::Int32(d),
    }
}

/// What [`Collection::winning_plan`] reads.
#[derive(Debug, Clone, PartialEq)]
pub enum WinningPlan {
    /// Every document.
    CollScan,
    /// One `_id` by equality.
    IdHack,
    /// An index's range (`_id`'s included), then the documents.
    IndexScan {
        name: String,
        key: Vec<(String, i32)>,
    },
}

/// The options of a secondary index that change what it holds.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IndexOptions {
    /// No two documents may share a key.
    pub unique: bool,
    /// Documents missing every indexed field are left out.
    pub sparse: bool,
    /// `partialFilterExpression`: documents not matching it are left out.
    pub partial: Option<Document>,
}

/// One secondary index.
#[derive(Debug)]
pub struct Index {
    pub name: String,
    pub key: Vec<(String, i32)>,
    pub options: IndexOptions,
    /// The spec as created, for `listIndexes`.
    pub spec: Document,
    /// `options.partial`, parsed.
    partial: Option<Filter>,
    /// Whether some document had an array in an indexed field.
    multikey: bool,
    entries: BTreeMap<Vec<Key>, BTreeSet<Key>>,
}

impl Index {
    /// Whether the index holds every document: neither sparse nor partial.
    /// Only such an index can answer a query, since one that leaves
    /// documents out would miss those the query matches.
    fn complete(&self) -> bool {
        !self.options.sparse && self.partial.is_none()
    }

    /// Whether `doc` has entries in this index: a sparse index leaves out
    /// a document missing every indexed field, a partial one a document
    /// not matching its filter.
    fn holds(&self, doc: &Document) -> bool {
        if self.options.sparse && !self.key.iter().any(|(f, _)| path_exists(doc, f)) {
            return false;
        }
        self.partial.as_ref().is_none_or(|p| p.matches(doc))
    }

    fn keys_of(&self, doc: &Document) -> (Vec<Vec<Key>>, bool) {
        if !self.holds(doc) {
            return (Vec::new(), false);
        }
        let mut out: Vec<Vec<Key>> = vec![Vec::with_capacity(self.key.len())];
        let mut multikey = false;
        for (field, dir) in &self.key {
            // Every value reached through arrays, as a multikey index holds
            // them: `a.b` over `a: [{b: 1}, {b: 2}]` files the document
            // under 1 and under 2.
            let (values, array) = index_values(doc, field);
            multikey |= array;
            let values: Vec<Bson> = match *dir {
                HASHED => values.iter().map(|v| Bson::Int64(hash(v))).collect(),
                _ => values.into_iter().cloned().collect(),
            };
            if values.len() == 1 {
                for k in &mut out {
                    k.push(Key(values[0].clone()));
                }
            } else {
                let mut next = Vec::with_capacity(out.len() * values.len());
                for k in &out {
                    for v in &values {
                        let mut k2 = k.clone();
                        k2.push(Key(v.clone()));
                        next.push(k2);
                    }
                }
                out = next;
            }
        }
        out.sort();
        out.dedup();
        (out, multikey)
    }

    fn pattern(&self) -> Document {
        let mut d = Document::new();
        for (f, dir) in &self.key {
            d.insert(f.clone(), key_direction(*dir));
        }
        d
    }

    /// 16766 where a hashed field holds an array, as MongoDB refuses it.
    fn check_hashable(&self, doc: &Document) -> Result<(), WriteError> {
        for (field, _) in self.key.iter().filter(|(_, d)| *d == HASHED) {
            if let Some(at) = array_on_path(doc, field) {
                return Err(WriteError {
                    code: 16766,
                    code_name: "Location16766",
                    errmsg: format!("Error: hashed indexes do not currently support array values. Found array at path: {at}"),
                    key: None,
                });
            }
        }
        Ok(())
    }

    /// The duplicate-key error if `doc` (with `_id` `id`) clashes with another document.
    /// Whether `doc` may enter the index: a hashed field holds no array,
    /// and no other document has its key under a unique index.
    fn check(&self, ns: &str, id: &Key, doc: &Document) -> Result<(), WriteError> {
        if !self.holds(doc) {
            return Ok(());
        }
        self.check_hashable(doc)?;
        if !self.options.unique {
            return Ok(());
        }
        for k in self.keys_of(doc).0 {
            if let Some(ids) = self.entries.get(&k) {
                if ids.iter().any(|other| other != id) {
                    let mut value = Document::new();
                    for ((f, _), v) in self.key.iter().zip(&k) {
                        value.insert(f.clone(), v.0.clone());
                    }
                    return Err(dup_key(ns, &self.name, self.pattern(), value));
                }
            }
        }
        Ok(())
    }

    fn add(&mut self, id: &Key, doc: &Document) {
        let (keys, multikey) = self.keys_of(doc);
        self.multikey |= multikey;
        for k in keys {
            self.entries.entry(k).or_default().insert(id.clone());
        }
    }

    fn remove(&mut self, id: &Key, doc: &Document) {
        for k in self.keys_of(doc).0 {
            if let Some(ids) = self.entries.get_mut(&k) {
                ids.remove(id);
                if ids.is_empty() {
                    self.entries.remove(&k);
                }
            }
        }
    }

    /// Whether iterating this index gives `sort`'s order: `Some(false)`
    /// forward, `Some(true)` reversed.
    fn sort_direction(&self, sort: &SortSpec) -> Option<bool> {
        sort_direction(&self.key, sort.fields()).filter(|_| !self.multikey)
    }
}

fn sort_direction(key: &[(String, i32)], sort: &[(String, i32)]) -> Option<bool> {
    if sort.is_empty() || sort.len() > key.len() {
        return None;
    }
    let same = sort
        .iter()
        .zip(key)
        .all(|((sf, sd), (kf, kd))| sf == kf && sd.signum() == kd.signum());
    let reversed = sort
        .iter()
        .zip(key)
        .all(|((sf, sd), (kf, kd))| sf == kf && sd.signum() == -kd.signum());
    // The map is ascending in every field: an index with a descending field
    // still iterates ascending, so only all-ascending keys are usable; a
    // hashed field's order is its hashes'.
    if key.iter().any(|(_, d)| *d <= 0) {
        return None;
    }
    match (same, reversed) {
        (true, _) => Some(false),
        (_, true) => Some(true),
        _ => None,
    }
}

/// MongoDB's E11000 error.
pub fn dup_key(ns: &str, index: &str, pattern: Document, value: Document) -> WriteError {
    let shown: Vec<String> = value
        .iter()
        .map(|(k, v)| format!("{k}: {}", display_value(v)))
        .collect();
    WriteError {
        code: 11000,
        code_name: "DuplicateKey",
        errmsg: format!(
            "E11000 duplicate key error collection: {ns} index: {index} dup key: {{ {} }}",
            shown.join(", ")
        ),
        key: Some(Box::new((pattern, value))),
    }
}

fn display_value(v: &Bson) -> String {
    match v {
        Bson::String(s) => format!("\"{s}\""),
        Bson::ObjectId(o) => format!("ObjectId('{o}')"),
        other => other.to_string(),
    }
}

/// The default index name: `a_1_b_-1`.
pub fn index_name(key: &[(String, i32)]) -> String {
    key.iter()
        .map(|(f, d)| match *d {
            HASHED => format!("{f}_hashed"),
            d => format!("{f}_{d}"),
        })
        .collect::<Vec<_>>()
        .join("_")
}

/// Receives every document change a collection makes through
/// [`Collection::insert`], [`Collection::replace`] and
/// [`Collection::remove`]: a replica-set member's oplog. `before` is the
/// document before the change (none for an insert), `after` the document
/// after it (none for a removal).
pub trait ChangeLog: Send + Sync + std::fmt::Debug {
    fn record(&self, ns: &str, id: &Key, before: Option<&Document>, after: Option<&Document>);
}

/// One collection.
#[derive(Debug)]
pub struct Collection {
    pub ns: String,
    docs: BTreeMap<Key, Document>,
    pub indexes: Vec<Index>,
    /// Where document changes are recorded (replica-set members only).
    log: Option<Arc<dyn ChangeLog>>,
}

impl Collection {
    pub fn new(ns: String) -> Collection {
        Collection {
            ns,
            docs: BTreeMap::new(),
            indexes: Vec::new(),
            log: None,
        }
    }

    /// Sets the document to `doc` (or removes it when `None`) without the
    /// unique checks and without recording the change: a replica-set
    /// member applying (or undoing) a change its primary already checked.
    pub fn put(&mut self, id: &Key, doc: Option<Document>) {
        if let Some(old) = self.docs.remove(id) {
            for ix in &mut self.indexes {
                ix.remove(id, &old);
            }
        }
        if let Some(doc) = doc {
            for ix in &mut self.indexes {
                ix.add(id, &doc);
            }
            self.docs.insert(id.clone(), doc);
        }
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// Every document in `_id` order.
    pub fn iter(&self) -> impl Iterator<Item = &Document> {
        self.docs.values()
    }

    pub fn get(&self, id: &Key) -> Option<&Document> {
        self.docs.get(id)
    }

    /// Inserts `doc`, adding an ObjectId `_id` first if it has none.
    /// Returns the `_id`.
    pub fn insert(&mut self, mut doc: Document) -> Result<Bson, WriteError> {
        let id = match doc.get("_id") {
            Some(Bson::Array(_)) => {
                return Err(WriteError {
                    code: 2,
                    code_name: "BadValue",
                    errmsg: "can't use an array for _id".into(),
                    key: None,
                })
            }
            Some(id) => id.clone(),
            None => {
                let id = Bson::ObjectId(ObjectId::new());
                let mut with_id = doc! { "_id": id.clone() };
                with_id.extend(doc);
                doc = with_id;
                id
            }
        };
        let key = Key(id.clone());
        if self.docs.contains_key(&key) {
            return Err(dup_key(&self.ns, "_id_", doc! {"_id": 1}, doc! {"_id": id}));
        }
        for ix in &self.indexes {
            ix.check(&self.ns, &key, &doc)?;
        }
        for ix in &mut self.indexes {
            ix.add(&key, &doc);
        }
        if let Some(log) = &self.log {
            log.record(&self.ns, &key, None, Some(&doc));
        }
        self.docs.insert(key, doc);
        Ok(id)
    }

    /// Replaces the document with `_id` `id` by `new` (same `_id`).
    pub fn replace(&mut self, id: &Key, new: Document) -> Result<(), WriteError> {
        for ix in &self.indexes {
            ix.check(&self.ns, id, &new)?;
        }
        let Some(old) = self.docs.get_mut(id) else {
            return Ok(());
        };
        let old = std::mem::replace(old, new);
        let new = &self.docs[id];
        for ix in &mut self.indexes {
            ix.remove(id, &old);
            ix.add(id, new);
        }
        if let Some(log) = &self.log {
            log.record(&self.ns, id, Some(&old), Some(new));
        }
        Ok(())
    }

    /// Removes the document with `_id` `id`.
    pub fn remove(&mut self, id: &Key) -> Option<Document> {
        let old = self.docs.remove(id)?;
        for ix in &mut self.indexes {
            ix.remove(id, &old);
        }
        if let Some(log) = &self.log {
            log.record(&self.ns, id, Some(&old), None);
        }
        Some(old)
    }

    /// Builds an index over the existing documents; a duplicate under a
    /// unique index, or a partial filter that does not parse, fails and
    /// leaves the collection unchanged.
    pub fn create_index(
        &mut self,
        name: String,
        key: Vec<(String, i32)>,
        options: IndexOptions,
        spec: Document,
    ) -> Result<(), WriteError> {
        let partial = options.partial.as_ref().map(Filter::parse).transpose()?;
        let mut ix = Index {
            name,
            key,
            options,
            spec,
            partial,
            multikey: false,
            entries: BTreeMap::new(),
        };
        for (id, doc) in &self.docs {
            ix.check(&self.ns, id, doc)?;
            ix.add(id, doc);
        }
        self.indexes.push(ix);
        Ok(())
    }
}

/// A shared collection.
pub type SharedCollection = Arc<RwLock<Collection>>;

/// Every database and collection.
#[derive(Debug, Default)]
pub struct Store {
    dbs: RwLock<BTreeMap<String, BTreeMap<String, SharedCollection>>>,
    /// Given to every collection created after it is set.
    log: OnceLock<Arc<dyn ChangeLog>>,
}

impl Store {
    /// Records the document changes of every collection created from now
    /// on in `log` (set once, before the first collection exists).
    pub fn set_log(&self, log: Arc<dyn ChangeLog>) {
        let _ = self.log.set(log);
    }

    pub fn collection(&self, db: &str, coll: &str) -> Option<SharedCollection> {
        rlock(&self.dbs).get(db)?.get(coll).cloned()
    }

    /// The collection, created if missing; the flag says whether it was.
    pub fn collection_or_create(&self, db: &str, coll: &str) -> (SharedCollection, bool) {
        if let Some(c) = self.collection(db, coll) {
            return (c, false);
        }
        let mut dbs = wlock(&self.dbs);
        let colls = dbs.entry(db.to_owned()).or_default();
        if let Some(c) = colls.get(coll) {
            return (c.clone(), false);
        }
        let mut c = Collection::new(format!("{db}.{coll}"));
        c.log = self.log.get().cloned();
        let c = Arc::new(RwLock::new(c));
        colls.insert(coll.to_owned(), c.clone());
        (c, true)
    }

    /// Creates an empty collection; false if it exists.
    pub fn create(&self, db: &str, coll: &str) -> bool {
        self.collection_or_create(db, coll).1
    }

    /// Drops a collection, returning it if it existed.
    pub fn drop_collection(&self, db: &str, coll: &str) -> Option<SharedCollection> {
        let mut dbs = wlock(&self.dbs);
        let colls = dbs.get_mut(db)?;
        let c = colls.remove(coll);
        if colls.is_empty() {
            dbs.remove(db);
        }
        c
    }

    pub fn drop_database(&self, db: &str) -> bool {
        wlock(&self.dbs).remove(db).is_some()
    }

    /// Names of the databases with their document counts.
    pub fn databases(&self) -> Vec<(String, usize)> {
        rlock(&self.dbs)
            .iter()
            .map(|(name, colls)| (name.clone(), colls.values().map(|c| rlock(c).len()).sum()))
            .collect()
    }

    pub fn collections(&self, db: &str) -> Vec<(String, SharedCollection)> {
        rlock(&self.dbs)
            .get(db)
            .map(|c| c.iter().map(|(n, c)| (n.clone(), c.clone())).collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
