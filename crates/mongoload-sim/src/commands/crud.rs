//! CRUD commands: insert, find (with getMore and killCursors), update,
//! delete, findAndModify.

use std::sync::atomic::Ordering as AtomicOrdering;

use bson::{doc, Bson, Document};

use super::*;

pub(super) fn insert(shared: &Shared, db: &str, mut cmd: Document) -> CmdResult {
    let coll = coll_name(&cmd, "insert")?.to_owned();
    let ordered = cmd.get_bool("ordered").unwrap_or(true);
    let docs = match cmd.remove("documents") {
        Some(Bson::Array(a)) => a,
        _ => {
            return Err(CmdError::new(
                40414,
                "IDLFailedToParse",
                "BSON field 'insert.documents' is missing but a required field",
            ))
        }
    };
    if docs.len() > MAX_WRITE_BATCH {
        return Err(CmdError::new(
            16,
            "InvalidLength",
            format!(
                "Write batch sizes must be between 1 and {MAX_WRITE_BATCH}. Got {} operations.",
                docs.len()
            ),
        ));
    }
    let (c, _) = shared.store.collection_or_create(db, &coll);
    let mut c = wlock(&c);
    let mut n = 0i32;
    let mut errors = Vec::new();
    for (i, d) in docs.into_iter().enumerate() {
        let result = match d {
            Bson::Document(d) => c.insert(d).map(|_| ()),
            _ => Err(WriteError::from(QueryError {
                code: 14,
                code_name: "TypeMismatch",
                message: "documents must be objects".into(),
            })),
        };
        match result {
            Ok(()) => n += 1,
            Err(e) => {
                errors.push(write_error_doc(i, e));
                if ordered {
                    break;
                }
            }
        }
    }
    drop_guard(c);
    shared
        .stats
        .insert
        .fetch_add(n as u64, AtomicOrdering::Relaxed);
    let mut reply = doc! { "n": n };
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    reply.insert("ok", 1.0);
    Ok(reply)
}

pub(super) fn drop_guard<T>(_guard: T) {}

pub(super) fn find(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "find")?;
    let args = find_args(cmd, "filter")?;
    let ns = format!("{db}.{coll}");
    let docs: Vec<Document> = match shared.store.collection(db, coll) {
        None => Vec::new(),
        Some(c) => {
            let c = rlock(&c);
            let found = c.select(&args.filter, args.sort.as_ref(), args.skip, args.limit);
            match &args.projection {
                Some(p) => found.into_iter().map(|d| p.apply(d)).collect(),
                None => found.into_iter().cloned().collect(),
            }
        }
    };
    let mut batch = batch_size(cmd)?;
    if args.single_batch {
        batch = Some(
            batch
                .unwrap_or(usize::MAX)
                .min(args.limit.unwrap_or(usize::MAX)),
        );
    }
    let (first, id) = shared.cursors.open(&ns, docs, batch, args.single_batch);
    Ok(cursor_reply(&ns, first, id, true))
}

pub(super) fn get_more(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let id = cmd
        .get("getMore")
        .and_then(as_i64)
        .ok_or_else(|| CmdError::type_mismatch("'getMore' must be a cursor id (int64)"))?;
    let coll = coll_name(cmd, "collection")?;
    let batch = opt_i64(cmd, "batchSize")?
        .filter(|&b| b > 0)
        .map(|b| b as usize);
    let ns = format!("{db}.{coll}");
    match shared.cursors.get_more(id, &ns, batch) {
        GetMore::Batch { ns, docs, id } => Ok(cursor_reply(&ns, docs, id, false)),
        GetMore::NotFound => Err(CmdError::new(43, "CursorNotFound", format!("cursor id {id} not found"))),
        GetMore::WrongNs(owner) => Err(CmdError::new(13, "Unauthorized", format!("Requested getMore on namespace '{ns}', but cursor belongs to a different namespace {owner}"))),
    }
}

pub(super) fn kill_cursors(shared: &Shared, cmd: &Document) -> CmdResult {
    let ids = match cmd.get("cursors") {
        Some(Bson::Array(a)) => a
            .iter()
            .map(|b| as_i64(b).ok_or_else(|| CmdError::type_mismatch("cursor ids must be int64")))
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(CmdError::new(
                40414,
                "IDLFailedToParse",
                "BSON field 'killCursors.cursors' is missing but a required field",
            ))
        }
    };
    let (mut killed, mut missing) = (Vec::new(), Vec::new());
    for id in ids {
        if shared.cursors.kill(id) {
            killed.push(id);
        } else {
            missing.push(id);
        }
    }
    Ok(
        doc! { "cursorsKilled": killed, "cursorsNotFound": missing, "cursorsAlive": [], "cursorsUnknown": [], "ok": 1.0 },
    )
}

pub(super) fn ids_of(docs: &[&Document]) -> Vec<Key> {
    docs.iter()
        .map(|d| Key(d.get("_id").cloned().unwrap_or(Bson::Null)))
        .collect()
}

pub(super) fn update_doc(u: &Bson) -> Result<&Document, WriteError> {
    match u {
        Bson::Document(d) => Ok(d),
        Bson::Array(_) => Err(QueryError::bad_value(
            "pipeline-style updates are not supported by mongoload sim",
        )
        .into()),
        _ => Err(QueryError {
            code: 14,
            code_name: "TypeMismatch",
            message: "'u' must be an object".into(),
        }
        .into()),
    }
}

/// Result of one update statement.
pub(super) struct Updated {
    matched: i32,
    modified: i32,
    upserted: Option<Bson>,
    /// The document before (or after, when `return_new`) for findAndModify.
    value: Option<Document>,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn update_one_statement(
    coll: &mut crate::store::Collection,
    filter_doc: &Document,
    update: &Update,
    sort: Option<&SortSpec>,
    multi: bool,
    upsert: bool,
    return_new: bool,
) -> Result<Updated, WriteError> {
    let filter = Filter::parse(filter_doc)?;
    let ids = ids_of(&coll.select(&filter, sort, 0, (!multi).then_some(1)));
    let mut out = Updated {
        matched: 0,
        modified: 0,
        upserted: None,
        value: None,
    };
    for id in ids {
        let Some(old) = coll.get(&id) else { continue };
        let mut new = old.clone();
        let changed = update.apply(&mut new, false)?;
        out.matched += 1;
        if changed {
            out.modified += 1;
            if return_new {
                out.value = Some(new.clone());
            } else if out.value.is_none() {
                out.value = Some(old.clone());
            }
            coll.replace(&id, new)?;
        } else if out.value.is_none() {
            out.value = Some(new);
        }
    }
    if out.matched == 0 && upsert {
        let mut seed = upsert_seed(filter_doc);
        update.apply(&mut seed, true)?;
        let id = coll.insert(seed)?;
        if return_new {
            out.value = coll.get(&Key(id.clone())).cloned();
        }
        out.upserted = Some(id);
    }
    Ok(out)
}

/// A delete statement's `limit` as MongoDB reads it: as a double, 0 for
/// a value that is not a number (so `limit: "x"` deletes every match).
fn delete_limit(v: &Bson) -> f64 {
    crate::query::number_as_f64(v).unwrap_or(0.0)
}

/// Checks the statements of an `update` or `delete` command as MongoDB's
/// command parser does, before any of them runs: each needs `q` (a
/// document, else 14 TypeMismatch) and `u` (an update) or `limit` (a
/// delete; 0 or 1, else 9 FailedToParse); a missing one answers 40414.
/// The whole command fails, not the statement.
pub(crate) fn check_write_statements(cmd: &Document) -> Result<(), CmdError> {
    let (name, list, second) = match command_name(cmd) {
        "update" => ("update", "updates", "u"),
        "delete" => ("delete", "deletes", "limit"),
        _ => return Ok(()),
    };
    let Ok(statements) = cmd.get_array(list) else {
        return Ok(());
    };
    for st in statements.iter().filter_map(Bson::as_document) {
        match st.get("q") {
            None => {
                return Err(CmdError::new(
                    40414,
                    "IDLFailedToParse",
                    format!("BSON field '{name}.{list}.q' is missing but a required field"),
                ))
            }
            Some(Bson::Document(_)) => {}
            Some(other) => {
                return Err(CmdError::type_mismatch(format!(
                    "BSON field '{name}.{list}.q' is the wrong type '{}', expected type 'object'",
                    type_name(other)
                )))
            }
        }
        match st.get(second) {
            None => {
                return Err(CmdError::new(
                    40414,
                    "IDLFailedToParse",
                    format!("BSON field '{name}.{list}.{second}' is missing but a required field"),
                ))
            }
            Some(limit) if name == "delete" => {
                let limit = delete_limit(limit);
                if limit != 0.0 && limit != 1.0 {
                    return Err(CmdError::new(
                        9,
                        "FailedToParse",
                        format!("The limit field in delete objects must be 0 or 1. Got {limit}"),
                    ));
                }
            }
            Some(_) => {}
        }
    }
    Ok(())
}

pub(super) fn update(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "update")?;
    let ordered = cmd.get_bool("ordered").unwrap_or(true);
    let statements = docs_array(cmd, "updates")?;
    if statements.len() > MAX_WRITE_BATCH {
        return Err(CmdError::new(16, "InvalidLength", "Write batch too large"));
    }
    check_write_statements(cmd)?;
    let (c, _) = shared.store.collection_or_create(db, coll);
    let mut c = wlock(&c);
    let (mut n, mut modified) = (0i32, 0i32);
    let mut upserted = Vec::new();
    let mut errors = Vec::new();
    for (i, st) in statements.iter().enumerate() {
        let result = (|| {
            // check_write_statements saw both.
            let empty = Document::new();
            let q = st.get_document("q").unwrap_or(&empty);
            let u = update_doc(st.get("u").unwrap_or(&Bson::Null))?;
            let update = Update::parse(u)?;
            let multi = opt_bool(st, "multi");
            if multi && update.is_replacement() {
                return Err(WriteError::from(QueryError {
                    code: 9,
                    code_name: "FailedToParse",
                    message: "multi update is not supported for replacement-style update".into(),
                }));
            }
            update_one_statement(
                &mut c,
                q,
                &update,
                None,
                multi,
                opt_bool(st, "upsert"),
                false,
            )
        })();
        match result {
            Ok(r) => {
                n += r.matched;
                modified += r.modified;
                if let Some(id) = r.upserted {
                    n += 1;
                    upserted.push(doc! { "index": i as i32, "_id": id });
                }
            }
            Err(e) => {
                errors.push(write_error_doc(i, e));
                if ordered {
                    break;
                }
            }
        }
    }
    drop_guard(c);
    shared
        .stats
        .update
        .fetch_add(statements.len() as u64, AtomicOrdering::Relaxed);
    let mut reply = doc! { "n": n, "nModified": modified };
    if !upserted.is_empty() {
        reply.insert("upserted", upserted);
    }
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    reply.insert("ok", 1.0);
    Ok(reply)
}

pub(super) fn delete(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "delete")?;
    let ordered = cmd.get_bool("ordered").unwrap_or(true);
    let statements = docs_array(cmd, "deletes")?;
    check_write_statements(cmd)?;
    let mut n = 0i32;
    let mut errors = Vec::new();
    if let Some(c) = shared.store.collection(db, coll) {
        let mut c = wlock(&c);
        for (i, st) in statements.iter().enumerate() {
            let result = (|| -> Result<i32, WriteError> {
                // check_write_statements saw both.
                let empty = Document::new();
                let q = st.get_document("q").unwrap_or(&empty);
                let one = st.get("limit").map(delete_limit) == Some(1.0);
                let filter = Filter::parse(q)?;
                let ids = ids_of(&c.select(&filter, None, 0, one.then_some(1)));
                Ok(ids.iter().filter(|id| c.remove(id).is_some()).count() as i32)
            })();
            match result {
                Ok(k) => n += k,
                Err(e) => {
                    errors.push(write_error_doc(i, e));
                    if ordered {
                        break;
                    }
                }
            }
        }
    }
    shared
        .stats
        .delete
        .fetch_add(statements.len() as u64, AtomicOrdering::Relaxed);
    let mut reply = doc! { "n": n };
    if !errors.is_empty() {
        reply.insert("writeErrors", errors);
    }
    reply.insert("ok", 1.0);
    Ok(reply)
}

pub(super) fn find_and_modify(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, command_name(cmd))?;
    let empty = Document::new();
    let query = opt_doc(cmd, "query")?.unwrap_or(&empty);
    let sort = opt_doc(cmd, "sort")?
        .filter(|s| !s.is_empty())
        .map(SortSpec::parse)
        .transpose()?;
    let projection = opt_doc(cmd, "fields")?
        .filter(|p| !p.is_empty())
        .map(Projection::parse)
        .transpose()?;
    let remove = opt_bool(cmd, "remove");
    let return_new = opt_bool(cmd, "new");
    let upsert = opt_bool(cmd, "upsert");
    let update = match (remove, cmd.get("update")) {
        (true, Some(_)) => {
            return Err(CmdError::new(
                9,
                "FailedToParse",
                "Cannot specify both an update and remove=true",
            ))
        }
        (true, None) => None,
        (false, Some(u)) => Some(Update::parse(update_doc(u).map_err(CmdError::from)?)?),
        (false, None) => {
            return Err(CmdError::new(
                9,
                "FailedToParse",
                "Either an update or remove=true must be specified",
            ))
        }
    };
    let (c, _) = shared.store.collection_or_create(db, coll);
    let mut c = wlock(&c);
    let (last_error, value) = match update {
        None => {
            let filter = Filter::parse(query)?;
            let ids = ids_of(&c.select(&filter, sort.as_ref(), 0, Some(1)));
            let removed = ids.first().and_then(|id| c.remove(id));
            shared.stats.delete.fetch_add(1, AtomicOrdering::Relaxed);
            (doc! { "n": i32::from(removed.is_some()) }, removed)
        }
        Some(update) => {
            let r = update_one_statement(
                &mut c,
                query,
                &update,
                sort.as_ref(),
                false,
                upsert,
                return_new,
            )?;
            shared.stats.update.fetch_add(1, AtomicOrdering::Relaxed);
            let mut le = doc! { "n": r.matched + i32::from(r.upserted.is_some()), "updatedExisting": r.matched > 0 };
            if let Some(id) = &r.upserted {
                le.insert("upserted", id.clone());
            }
            (le, r.value)
        }
    };
    drop_guard(c);
    let value = match (value, projection) {
        (Some(v), Some(p)) => Bson::Document(p.apply(&v)),
        (Some(v), None) => Bson::Document(v),
        (None, _) => Bson::Null,
    };
    Ok(doc! { "lastErrorObject": last_error, "value": value, "ok": 1.0 })
}
