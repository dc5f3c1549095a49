//! Catalog commands: databases, collections, indexes.

use bson::{doc, Bson, Document};

use super::*;

pub(super) fn list_databases(shared: &Shared, cmd: &Document) -> CmdResult {
    let filter = opt_doc(cmd, "filter")?.map(Filter::parse).transpose()?;
    let mut dbs = Vec::new();
    let mut total = 0i64;
    for (name, docs) in shared.store.databases() {
        let size = docs as i64 * 256;
        let d = doc! { "name": name, "sizeOnDisk": size, "empty": docs == 0 };
        if filter.as_ref().is_none_or(|f| f.matches(&d)) {
            total += size;
            dbs.push(Bson::Document(d));
        }
    }
    Ok(
        doc! { "databases": dbs, "totalSize": total, "totalSizeMb": total / (1024 * 1024), "ok": 1.0 },
    )
}

pub(super) fn list_collections(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let filter = opt_doc(cmd, "filter")?.map(Filter::parse).transpose()?;
    let name_only = opt_bool(cmd, "nameOnly");
    let mut out = Vec::new();
    for (name, _) in shared.store.collections(db) {
        let d = if name_only {
            doc! { "name": name, "type": "collection" }
        } else {
            doc! {
                "name": name,
                "type": "collection",
                "options": {},
                "info": { "readOnly": false },
                "idIndex": { "v": 2, "key": { "_id": 1 }, "name": "_id_" },
            }
        };
        if filter.as_ref().is_none_or(|f| f.matches(&d)) {
            out.push(d);
        }
    }
    let ns = format!("{db}.$cmd.listCollections");
    let (batch, id) = shared.cursors.open(&ns, out, batch_size(cmd)?, false);
    Ok(cursor_reply(&ns, batch, id, true))
}

/// Fields of a `create` command that are not options of the collection.
const CREATE_GENERIC_FIELDS: &[&str] = &[
    "create",
    "lsid",
    "txnNumber",
    "autocommit",
    "startTransaction",
    "writeConcern",
    "readConcern",
    "comment",
    "maxTimeMS",
    "apiVersion",
    "apiStrict",
    "apiDeprecationErrors",
];

/// Whether a `create` asks for a plain collection: no collection option
/// beside the default `capped: false`.
fn plain_create(cmd: &Document) -> bool {
    cmd.iter().all(|(k, v)| {
        k.starts_with('$')
            || CREATE_GENERIC_FIELDS.contains(&k.as_str())
            || (k == "capped" && !opt_bool(cmd, "capped") && !matches!(v, Bson::Document(_)))
    })
}

pub(super) fn create(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "create")?;
    // Every collection is a plain one (options are ignored), so an
    // existing one has the same options as a plain create, which MongoDB
    // 7.0 answers ok; any option differs from them.
    if shared.store.create(db, coll) || plain_create(cmd) {
        Ok(doc! { "ok": 1.0 })
    } else {
        Err(CmdError::new(
            48,
            "NamespaceExists",
            format!("namespace {db}.{coll} already exists, but with different options: {{}}"),
        ))
    }
}

pub(super) fn drop(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "drop")?;
    match shared.store.drop_collection(db, coll) {
        Some(c) => {
            let n = rlock(&c).indexes.len() as i32 + 1;
            Ok(doc! { "nIndexesWas": n, "ns": format!("{db}.{coll}"), "ok": 1.0 })
        }
        // MongoDB 7.0 answers ok for a missing collection.
        None => Ok(doc! { "ok": 1.0 }),
    }
}

pub(super) fn parse_index_key(key: &Document) -> Result<Vec<(String, i32)>, CmdError> {
    if key.is_empty() {
        return Err(CmdError::new(
            67,
            "CannotCreateIndex",
            "Index keys cannot be empty.",
        ));
    }
    let parsed = key.iter()
        .map(|(f, v)| match (as_i64(v), v) {
            (Some(d), _) if d == 1 || d == -1 => Ok((f.clone(), d as i32)),
            (_, Bson::String(s)) if s == "hashed" => Ok((f.clone(), HASHED)),
            _ => Err(CmdError::new(67, "CannotCreateIndex", format!("Values in the index key pattern must be 1, -1 or \"hashed\" in the simulator, got {f}: {v}"))),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let hashed = parsed.iter().filter(|(_, d)| *d == HASHED).count();
    if hashed > 1 {
        return Err(CmdError::new(31303, "Location31303", format!("A maximum of one index field is allowed to be hashed but found {hashed} for 'key' {key}")));
    }
    Ok(parsed)
}

pub(super) fn create_indexes(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "createIndexes")?;
    let specs = docs_array(cmd, "indexes")?;
    let mut parsed = Vec::new();
    for spec in &specs {
        let key_doc = opt_doc(spec, "key")?.ok_or_else(|| {
            CmdError::new(
                9,
                "FailedToParse",
                "The 'key' field is a required property of an index specification",
            )
        })?;
        let key = parse_index_key(key_doc)?;
        let name = match spec.get("name") {
            Some(Bson::String(n)) => n.clone(),
            _ => index_name(&key),
        };
        let mut stored = doc! { "v": 2, "key": key_doc.clone(), "name": &name };
        let unique = opt_bool(spec, "unique");
        if unique && key.iter().any(|(_, d)| *d == HASHED) {
            return Err(CmdError::new(
                16764,
                "Location16764",
                "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
            ));
        }
        if unique {
            stored.insert("unique", true);
        }
        let sparse = opt_bool(spec, "sparse");
        if sparse {
            stored.insert("sparse", true);
        }
        let partial = match spec.get("partialFilterExpression") {
            None => None,
            Some(Bson::Document(f)) => {
                // Refused here as MongoDB refuses it: with the filter's own error.
                Filter::parse(f)?;
                stored.insert("partialFilterExpression", f.clone());
                Some(f.clone())
            }
            Some(other) => {
                return Err(CmdError::type_mismatch(format!(
                    "The field 'partialFilterExpression' must be an object, but got {}",
                    type_name(other)
                )))
            }
        };
        let options = IndexOptions {
            unique,
            sparse,
            partial,
        };
        parsed.push((name, key, options, stored));
    }
    let (c, created) = shared.store.collection_or_create(db, coll);
    let mut c = wlock(&c);
    let before = c.indexes.len() as i32 + 1;
    let mut note = None;
    for (name, key, options, stored) in parsed {
        if key == [("_id".to_owned(), 1)] {
            note = Some("all indexes already exist");
            continue;
        }
        // Indexes with the same key and different partial filters may
        // coexist, as in MongoDB.
        let same_key = |ix: &&Index| ix.key == key && ix.options.partial == options.partial;
        if let Some(existing) = c.indexes.iter().find(|ix| ix.name == name || same_key(ix)) {
            if existing.key == key && existing.name == name && existing.options == options {
                note = Some("all indexes already exist");
                continue;
            }
            if existing.name == name {
                return Err(CmdError::new(86, "IndexKeySpecsConflict", format!("An existing index has the same name as the requested index. Requested index: {stored}, existing index: {}", existing.spec)));
            }
            return Err(CmdError::new(
                85,
                "IndexOptionsConflict",
                format!(
                    "Index already exists with a different name: {}",
                    existing.name
                ),
            ));
        }
        c.create_index(name, key, options, stored)?;
    }
    let mut reply = doc! {
        "numIndexesBefore": before,
        "numIndexesAfter": c.indexes.len() as i32 + 1,
        "createdCollectionAutomatically": created,
    };
    if let Some(n) = note {
        reply.insert("note", n);
    }
    reply.insert("ok", 1.0);
    Ok(reply)
}

pub(super) fn ns_not_found(db: &str, coll: &str) -> CmdError {
    CmdError::new(
        26,
        "NamespaceNotFound",
        format!("ns does not exist: {db}.{coll}"),
    )
}

pub(super) fn list_indexes(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "listIndexes")?;
    let c = shared
        .store
        .collection(db, coll)
        .ok_or_else(|| ns_not_found(db, coll))?;
    let mut out = vec![doc! { "v": 2, "key": { "_id": 1 }, "name": "_id_" }];
    out.extend(rlock(&c).indexes.iter().map(|ix| ix.spec.clone()));
    let ns = format!("{db}.$cmd.listIndexes.{coll}");
    let (batch, id) = shared.cursors.open(&ns, out, batch_size(cmd)?, false);
    Ok(cursor_reply(&ns, batch, id, true))
}

pub(super) fn drop_indexes(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, command_name(cmd))?;
    let c = shared
        .store
        .collection(db, coll)
        .ok_or_else(|| ns_not_found(db, coll))?;
    let mut c = wlock(&c);
    let was = c.indexes.len() as i32 + 1;
    let not_found = |what: String| {
        CmdError::new(
            27,
            "IndexNotFound",
            format!("index not found with name [{what}]"),
        )
    };
    match cmd.get("index") {
        Some(Bson::String(s)) if s == "*" => c.indexes.clear(),
        Some(Bson::String(s)) if s == "_id_" => {
            return Err(CmdError::new(72, "InvalidOptions", "cannot drop _id index"))
        }
        Some(Bson::String(s)) => {
            let i = c
                .indexes
                .iter()
                .position(|ix| &ix.name == s)
                .ok_or_else(|| not_found(s.clone()))?;
            c.indexes.remove(i);
        }
        Some(Bson::Array(names)) => {
            for n in names {
                let s = n
                    .as_str()
                    .ok_or_else(|| CmdError::type_mismatch("index names must be strings"))?;
                let i = c
                    .indexes
                    .iter()
                    .position(|ix| ix.name == s)
                    .ok_or_else(|| not_found(s.to_owned()))?;
                c.indexes.remove(i);
            }
        }
        Some(Bson::Document(key_doc)) => {
            let key = parse_index_key(key_doc)?;
            let found: Vec<usize> = (0..c.indexes.len())
                .filter(|&i| c.indexes[i].key == key)
                .collect();
            match found[..] {
                [] => return Err(CmdError::new(27, "IndexNotFound", "can't find index with key")),
                [i] => {
                    c.indexes.remove(i);
                }
                // Partial indexes on one key: only a name tells them apart.
                [a, b, ..] => {
                    return Err(CmdError::new(
                        181,
                        "AmbiguousIndexKeyPattern",
                        format!(
                            "{} indexes found for key: {key_doc}, identify by name instead. Conflicting indexes: {}, {}",
                            found.len(),
                            c.indexes[a].spec,
                            c.indexes[b].spec
                        ),
                    ))
                }
            }
        }
        _ => {
            return Err(CmdError::type_mismatch(
                "'index' must be a string, an array of strings or a key pattern",
            ))
        }
    }
    Ok(doc! { "nIndexesWas": was, "ok": 1.0 })
}
