//! Aggregation and the read commands built on it: aggregate, distinct,
//! count.

use std::collections::BTreeSet;

use bson::{doc, Bson, Document};

use super::*;

pub(super) fn aggregate(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    if let Some(reply) = query_stats(shared, db, cmd) {
        return reply;
    }
    let coll = match cmd.get("aggregate") {
        Some(Bson::String(s)) => s.as_str(),
        _ => {
            return Err(CmdError::new(
                73,
                "InvalidNamespace",
                "mongoload sim supports only collection aggregations",
            ))
        }
    };
    if !cmd.contains_key("cursor") && !opt_bool(cmd, "explain") {
        return Err(CmdError::new(
            9,
            "FailedToParse",
            "The 'cursor' option is required, except for aggregate with the explain argument",
        ));
    }
    let stages = docs_array(cmd, "pipeline")?;
    let pipeline = Pipeline::parse(&stages)?;
    // A plan, not results: what `explain` of this aggregate answers.
    if opt_bool(cmd, "explain") {
        return explain::explain_reply(shared, db, &explain::explained_aggregate(cmd));
    }
    let ns = format!("{db}.{coll}");
    if let Some(spec) = pipeline.coll_stats() {
        let stats = match shared.store.collection(db, coll) {
            Some(c) => {
                let c = rlock(&c);
                let nindexes = c.indexes.len() + 1;
                crate::aggregate::coll_stats_document(
                    spec,
                    &ns,
                    "mongoload-sim",
                    bson::DateTime::now(),
                    nindexes,
                    c.iter(),
                )
            }
            // As mongod: counts of a collection that does not exist are an error.
            None if spec.count || spec.storage => {
                return Err(CmdError::new(
                    26,
                    "NamespaceNotFound",
                    format!("Unable to retrieve count in $collStats stage :: caused by :: Collection [{ns}] not found."),
                ))
            }
            None => crate::aggregate::coll_stats_document(
                spec,
                &ns,
                "mongoload-sim",
                bson::DateTime::now(),
                0,
                std::iter::empty(),
            ),
        };
        let out = pipeline.run(std::iter::once(stats))?;
        let (first, id) = shared.cursors.open(&ns, out, batch_size(cmd)?, false);
        return Ok(cursor_reply(&ns, first, id, true));
    }
    let input: Vec<Document> = match shared.store.collection(db, coll) {
        None => Vec::new(),
        Some(c) => {
            let c = rlock(&c);
            match pipeline.leading_match() {
                Some(f) => c.select(f, None, 0, None).into_iter().cloned().collect(),
                None => c.iter().cloned().collect(),
            }
        }
    };
    let out = pipeline.run(input.into_iter())?;
    let (first, id) = shared.cursors.open(&ns, out, batch_size(cmd)?, false);
    Ok(cursor_reply(&ns, first, id, true))
}

/// `{ aggregate: 1, pipeline: [{ $queryStats: {} }, …] }` on `admin`:
/// the store's entries through the rest of the pipeline; `None` when the
/// pipeline has no `$queryStats` stage.
fn query_stats(shared: &Shared, db: &str, cmd: &Document) -> Option<CmdResult> {
    let stages = cmd.get_array("pipeline").ok()?;
    let at = stages.iter().position(|s| {
        s.as_document()
            .is_some_and(|d| d.contains_key("$queryStats"))
    })?;
    let qs = &shared.profiler.query_stats;
    Some((|| {
        if at != 0 && qs.enabled {
            return Err(CmdError::new(
                40602,
                "Location40602",
                "$queryStats is only valid as the first stage in a pipeline",
            ));
        }
        let stages = docs_array(cmd, "pipeline")?;
        // An older server answers 40324 here, wherever the stage is.
        let arg = stages[at].get("$queryStats").cloned().unwrap_or(Bson::Null);
        let rows = qs.stage(db, cmd, &arg, shared.auth.is_some())?;
        let rest = Pipeline::parse(&stages[1..])?;
        let out = rest.run(rows.into_iter())?;
        let ns = "admin.$cmd.aggregate";
        let (first, id) = shared.cursors.open(ns, out, batch_size(cmd)?, false);
        Ok(cursor_reply(ns, first, id, true))
    })())
}

pub(super) fn distinct(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "distinct")?;
    let key = cmd
        .get_str("key")
        .map_err(|_| CmdError::type_mismatch("'key' must be a string"))?;
    let empty = Document::new();
    let filter = Filter::parse(opt_doc(cmd, "query")?.unwrap_or(&empty))?;
    let mut values = BTreeSet::new();
    if let Some(c) = shared.store.collection(db, coll) {
        let c = rlock(&c);
        // Through arrays of embedded documents, an array at the end of the
        // path unwound one level, as MongoDB's distinct reads the path.
        for d in c.select(&filter, None, 0, None) {
            values.extend(values_at_path(d, key).into_iter().cloned().map(Key));
        }
    }
    let values: Vec<Bson> = values.into_iter().map(|k| k.0).collect();
    Ok(doc! { "values": values, "ok": 1.0 })
}

pub(super) fn count(shared: &Shared, db: &str, cmd: &Document) -> CmdResult {
    let coll = coll_name(cmd, "count")?;
    let args = find_args(cmd, "query")?;
    let n = match shared.store.collection(db, coll) {
        None => 0,
        Some(c) => {
            let c = rlock(&c);
            if cmd
                .get("query")
                .is_none_or(|q| q.as_document().is_some_and(|d| d.is_empty()))
            {
                let total = c.len().saturating_sub(args.skip);
                args.limit.map_or(total, |l| total.min(l))
            } else {
                c.select(&args.filter, None, args.skip, args.limit).len()
            }
        }
    };
    Ok(doc! { "n": n as i64, "ok": 1.0 })
}
