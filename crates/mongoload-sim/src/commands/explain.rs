//! `explain` of a `find`, `aggregate`, `count` or `distinct` on one
//! server: MongoDB 7.0's `queryPlanner` section (verbosity
//! `queryPlanner`; the others answer the same, without execution
//! statistics) with the plan the store runs: `COLLSCAN`, `IDHACK`, or an
//! `IXSCAN` under a `FETCH`. An `aggregate` with `explain: true` gets the
//! same reply. A router's explain ([`crate::sharded`]) puts each targeted
//! shard's answer under `SINGLE_SHARD` or `SHARD_MERGE`.

use bson::{doc, Bson, Document};

use crate::error::{command_name, CmdError};
use crate::query::{Filter, SortSpec};
use crate::shared::Shared;
use crate::store::{key_direction, rlock, WinningPlan};

/// The collection, filter and sort the explained command reads: a find's
/// filter and sort, an aggregation's leading `$match` (and a `$sort` right
/// after it), a count's or a distinct's query.
pub fn query_of(inner: &Document) -> Result<(String, Document, Document), CmdError> {
    let name = command_name(inner).to_owned();
    let coll = inner
        .get_str(&name)
        .map_err(|_| CmdError::new(2, "BadValue", "explain needs a collection name"))?
        .to_owned();
    let doc_of = |key: &str| inner.get_document(key).cloned().unwrap_or_default();
    let (filter, sort) = match name.as_str() {
        "find" => (doc_of("filter"), doc_of("sort")),
        "count" | "distinct" => (doc_of("query"), Document::new()),
        "aggregate" => {
            let stages: Vec<&Document> = inner
                .get_array("pipeline")
                .map(|a| a.iter().filter_map(Bson::as_document).collect())
                .unwrap_or_default();
            let mut filter = Document::new();
            let mut sort = Document::new();
            let mut rest = stages.iter();
            let mut next = rest.next();
            if let Some(m) = next.and_then(|s| s.get_document("$match").ok()) {
                filter = m.clone();
                next = rest.next();
            }
            if let Some(s) = next.and_then(|s| s.get_document("$sort").ok()) {
                sort = s.clone();
            }
            (filter, sort)
        }
        other => {
            return Err(CmdError::new(
                59,
                "CommandNotFound",
                format!("explain of {other} is not supported by the simulator"),
            ))
        }
    };
    Ok((coll, filter, sort))
}

/// The `winningPlan` document of a plan (`filter` shown on the stage that
/// applies it).
pub fn plan_doc(plan: &WinningPlan, filter: &Document) -> Document {
    match plan {
        WinningPlan::CollScan => {
            let mut d = doc! { "stage": "COLLSCAN" };
            if !filter.is_empty() {
                d.insert("filter", filter.clone());
            }
            d.insert("direction", "forward");
            d
        }
        WinningPlan::IdHack => doc! { "stage": "IDHACK" },
        WinningPlan::IndexScan { name, key } => {
            let key_pattern: Document = key
                .iter()
                .map(|(f, d)| (f.clone(), key_direction(*d)))
                .collect();
            doc! {
                "stage": "FETCH",
                "inputStage": {
                    "stage": "IXSCAN",
                    "keyPattern": key_pattern,
                    "indexName": name.as_str(),
                    "direction": "forward",
                },
            }
        }
    }
}

/// This server's `queryPlanner` for `filter` and `sort` on `db.coll`: an
/// `EOF` stage where the collection does not exist.
pub fn query_planner(
    shared: &Shared,
    db: &str,
    coll: &str,
    filter_doc: &Document,
    sort_doc: &Document,
) -> Result<Document, CmdError> {
    let filter = Filter::parse(filter_doc)?;
    let sort = (!sort_doc.is_empty())
        .then(|| SortSpec::parse(sort_doc))
        .transpose()?;
    let winning = match shared.store.collection(db, coll) {
        None => doc! { "stage": "EOF" },
        Some(c) => plan_doc(&rlock(&c).winning_plan(&filter, sort.as_ref()), filter_doc),
    };
    Ok(doc! {
        "namespace": format!("{db}.{coll}"),
        "indexFilterSet": false,
        "parsedQuery": filter_doc.clone(),
        "winningPlan": winning,
        "rejectedPlans": [],
    })
}

/// `explain` on this server.
pub fn explain(shared: &Shared, db: &str, cmd: &Document) -> Result<Document, CmdError> {
    let inner = cmd
        .get_document("explain")
        .map_err(|_| CmdError::new(14, "TypeMismatch", "explain takes a command document"))?;
    explain_reply(shared, db, inner)
}

/// The command an `aggregate` with `explain: true` explains: the
/// aggregate itself, without `explain` and the fields a driver adds to
/// every command (`lsid`, `$clusterTime`, ...).
pub fn explained_aggregate(cmd: &Document) -> Document {
    cmd.iter()
        .filter(|(k, _)| {
            !k.starts_with('$') && !matches!(k.as_str(), "explain" | "lsid" | "txnNumber")
        })
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// The reply to `explain` of `inner` (a find, aggregate, count or
/// distinct) on this server; an `aggregate` with `explain: true` gets the
/// same.
pub fn explain_reply(shared: &Shared, db: &str, inner: &Document) -> Result<Document, CmdError> {
    let (coll, filter, sort) = query_of(inner)?;
    let planner = query_planner(shared, db, &coll, &filter, &sort)?;
    let mut command = inner.clone();
    command.insert("$db", db);
    Ok(doc! {
        "explainVersion": "1",
        "queryPlanner": planner,
        "command": command,
        "serverInfo": { "version": super::VERSION },
        "ok": 1.0,
    })
}
