//! Reading a command's arguments, with MongoDB's errors for bad ones,
//! and the shapes of cursor and write-error replies.

use bson::{doc, Bson, Document};

use super::*;

pub(crate) fn as_i64(b: &Bson) -> Option<i64> {
    match *b {
        Bson::Int32(v) => Some(v as i64),
        Bson::Int64(v) => Some(v),
        Bson::Double(v) if v.fract() == 0.0 && v.is_finite() => Some(v as i64),
        _ => None,
    }
}

pub(super) fn opt_i64(cmd: &Document, field: &str) -> Result<Option<i64>, CmdError> {
    match cmd.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(v) => as_i64(v)
            .map(Some)
            .ok_or_else(|| CmdError::type_mismatch(format!("'{field}' must be a number"))),
    }
}

pub(super) fn opt_bool(cmd: &Document, field: &str) -> bool {
    match cmd.get(field) {
        Some(Bson::Boolean(b)) => *b,
        Some(v) => as_i64(v).is_some_and(|n| n != 0),
        None => false,
    }
}

pub(super) fn opt_doc<'a>(
    cmd: &'a Document,
    field: &str,
) -> Result<Option<&'a Document>, CmdError> {
    match cmd.get(field) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d)),
        Some(_) => Err(CmdError::type_mismatch(format!(
            "'{field}' must be an object"
        ))),
    }
}

pub(crate) fn coll_name<'a>(cmd: &'a Document, name: &str) -> Result<&'a str, CmdError> {
    match cmd.get(name) {
        Some(Bson::String(s)) if !s.is_empty() => Ok(s),
        _ => Err(CmdError::new(
            73,
            "InvalidNamespace",
            format!("collection name must be a non-empty string for '{name}'"),
        )),
    }
}

pub(super) fn batch_size(cmd: &Document) -> Result<Option<usize>, CmdError> {
    let c = match cmd.get("cursor") {
        Some(Bson::Document(c)) => opt_i64(c, "batchSize")?,
        _ => opt_i64(cmd, "batchSize")?,
    };
    match c {
        Some(n) if n < 0 => Err(CmdError::bad_value("batchSize must be non-negative")),
        Some(n) => Ok(Some(n as usize)),
        None => Ok(None),
    }
}

pub(super) fn docs_array(cmd: &Document, field: &str) -> Result<Vec<Document>, CmdError> {
    match cmd.get(field) {
        Some(Bson::Array(a)) => a
            .iter()
            .map(|b| match b {
                Bson::Document(d) => Ok(d.clone()),
                _ => Err(CmdError::type_mismatch(format!(
                    "'{field}' entries must be objects"
                ))),
            })
            .collect(),
        _ => Err(CmdError::new(
            40414,
            "IDLFailedToParse",
            format!("BSON field '{field}' is missing but a required field"),
        )),
    }
}

pub(super) fn cursor_reply(ns: &str, batch: Vec<Document>, id: i64, first: bool) -> Document {
    let key = if first { "firstBatch" } else { "nextBatch" };
    let batch: Vec<Bson> = batch.into_iter().map(Bson::Document).collect();
    let mut cursor = Document::new();
    cursor.insert(key, batch);
    cursor.insert("id", id);
    cursor.insert("ns", ns);
    doc! { "cursor": cursor, "ok": 1.0 }
}

pub(super) fn write_error_doc(index: usize, e: WriteError) -> Bson {
    let mut d = doc! { "index": index as i32, "code": e.code };
    if let Some(k) = e.key {
        let (pattern, value) = *k;
        d.insert("keyPattern", pattern);
        d.insert("keyValue", value);
    }
    d.insert("errmsg", e.errmsg);
    Bson::Document(d)
}

pub(super) struct FindArgs {
    pub(super) filter: Filter,
    pub(super) sort: Option<SortSpec>,
    pub(super) projection: Option<Projection>,
    pub(super) skip: usize,
    pub(super) limit: Option<usize>,
    pub(super) single_batch: bool,
}

pub(super) fn find_args(cmd: &Document, filter_field: &str) -> Result<FindArgs, CmdError> {
    let empty = Document::new();
    let filter = Filter::parse(opt_doc(cmd, filter_field)?.unwrap_or(&empty))?;
    let sort = opt_doc(cmd, "sort")?
        .filter(|s| !s.is_empty())
        .map(SortSpec::parse)
        .transpose()?;
    let projection_field = if filter_field == "query" && cmd.contains_key("fields") {
        "fields"
    } else {
        "projection"
    };
    let projection = opt_doc(cmd, projection_field)?
        .filter(|p| !p.is_empty())
        .map(Projection::parse)
        .transpose()?;
    let skip = opt_i64(cmd, "skip")?.unwrap_or(0);
    if skip < 0 {
        return Err(CmdError::bad_value("skip value must be non-negative"));
    }
    let limit = opt_i64(cmd, "limit")?.unwrap_or(0);
    let mut single_batch = opt_bool(cmd, "singleBatch");
    // A negative limit is the legacy spelling of "one batch of this size".
    if limit < 0 {
        single_batch = true;
    }
    let limit = (limit != 0).then_some(limit.unsigned_abs() as usize);
    Ok(FindArgs {
        filter,
        sort,
        projection,
        skip: skip as usize,
        limit,
        single_batch,
    })
}
