//! What a router does with the shards' answers, as plain functions: the
//! merge of a scatter-gather read (sort, skip, limit, projection), the
//! split of a pipeline into what the shards run (its leading `$match`
//! stages) and what the router runs (the rest: `$group`, `$sort`, ...), and
//! the merge of the shards' write replies into one, indexes as the client
//! sent them.

use bson::{doc, Bson, Document};

use crate::query::{Projection, SortSpec};

/// The documents the client gets from what the shards returned: sorted
/// (a stable sort, so shard order breaks ties), `skip` dropped, at most
/// `limit` (0: no limit) kept, then projected.
pub fn finish(
    mut docs: Vec<Document>,
    sort: Option<&SortSpec>,
    skip: usize,
    limit: usize,
    projection: Option<&Projection>,
) -> Vec<Document> {
    if let Some(s) = sort {
        s.sort(&mut docs);
    }
    let docs = docs.into_iter().skip(skip);
    let docs: Vec<Document> = if limit > 0 {
        docs.take(limit).collect()
    } else {
        docs.collect()
    };
    match projection {
        Some(p) => docs.iter().map(|d| p.apply(d)).collect(),
        None => docs,
    }
}

/// The pipeline's leading `$match` stages (the shards run them) and the
/// rest (the router runs it over every shard's output).
pub fn split_pipeline(stages: &[Document]) -> (Vec<Document>, Vec<Document>) {
    let n = stages
        .iter()
        .take_while(|s| s.len() == 1 && s.contains_key("$match"))
        .count();
    (stages[..n].to_vec(), stages[n..].to_vec())
}

/// The filter the leading `$match` stages amount to (for targeting).
pub fn lead_filter(lead: &[Document]) -> Document {
    let filters: Vec<Document> = lead
        .iter()
        .filter_map(|s| s.get_document("$match").ok().cloned())
        .collect();
    match filters.len() {
        0 => Document::new(),
        1 => filters.into_iter().next().expect("one"),
        _ => doc! { "$and": filters },
    }
}

/// The merged reply of a write the router split among shards.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct WriteReply {
    pub n: i64,
    pub n_modified: i64,
    pub upserted: Vec<Document>,
    pub write_errors: Vec<Document>,
    pub write_concern_error: Option<Document>,
}

fn count(d: &Document, field: &str) -> i64 {
    match d.get(field) {
        Some(Bson::Int32(n)) => (*n).into(),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(n)) => *n as i64,
        _ => 0,
    }
}

fn is_ok(reply: &Document) -> bool {
    matches!(reply.get("ok"), Some(Bson::Double(f)) if *f == 1.0)
        || matches!(reply.get("ok"), Some(Bson::Int32(1)) | Some(Bson::Int64(1)))
}

impl WriteReply {
    /// Adds one shard's reply to a sub-command whose statement `j` was the
    /// client's statement `indexes[j]`. A command error (the shard had no
    /// primary, could not be reached) becomes a write error of each of its
    /// statements (of the first only when `ordered`: the rest did not run).
    pub fn absorb(&mut self, reply: &Document, indexes: &[usize], ordered: bool) {
        if !is_ok(reply) {
            let code = reply.get_i32("code").unwrap_or(1);
            let msg = reply.get_str("errmsg").unwrap_or("shard error").to_owned();
            let name = reply
                .get_str("codeName")
                .unwrap_or_else(|_| crate::commands::code_name(code))
                .to_owned();
            let take = if ordered { 1 } else { indexes.len() };
            for &i in indexes.iter().take(take) {
                self.error(i, code, &name, msg.clone());
            }
            return;
        }
        self.n += count(reply, "n");
        self.n_modified += count(reply, "nModified");
        let remap = |d: &Bson| -> Option<Document> {
            let Bson::Document(d) = d else { return None };
            let mut d = d.clone();
            let j = count(&d, "index") as usize;
            d.insert("index", indexes.get(j).copied().unwrap_or(j) as i32);
            Some(d)
        };
        if let Ok(u) = reply.get_array("upserted") {
            self.upserted.extend(u.iter().filter_map(remap));
        }
        if let Ok(e) = reply.get_array("writeErrors") {
            self.write_errors.extend(e.iter().filter_map(remap));
        }
        if self.write_concern_error.is_none() {
            if let Ok(w) = reply.get_document("writeConcernError") {
                self.write_concern_error = Some(w.clone());
            }
        }
    }

    /// A write error of the router's own for statement `index`.
    pub fn error(&mut self, index: usize, code: i32, code_name: &str, errmsg: String) {
        self.write_errors.push(doc! {
            "index": index as i32, "code": code, "codeName": code_name, "errmsg": errmsg,
        });
    }

    /// The reply document (`nModified` for an update).
    pub fn into_doc(mut self, update: bool) -> Document {
        let mut d = doc! { "n": self.n as i32 };
        if update {
            d.insert("nModified", self.n_modified as i32);
        }
        if !self.upserted.is_empty() {
            self.upserted.sort_by_key(|u| count(u, "index"));
            d.insert("upserted", self.upserted);
        }
        if !self.write_errors.is_empty() {
            self.write_errors.sort_by_key(|u| count(u, "index"));
            d.insert("writeErrors", self.write_errors);
        }
        if let Some(w) = self.write_concern_error {
            d.insert("writeConcernError", w);
        }
        d.insert("ok", 1.0);
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn docs(xs: &[i32]) -> Vec<Document> {
        xs.iter().map(|&x| doc! { "_id": x, "x": x % 3 }).collect()
    }

    #[test]
    fn sort_skip_limit_and_projection_merge_as_one_collection() {
        let sort = SortSpec::parse(&doc! { "x": 1, "_id": -1 }).unwrap();
        let proj = Projection::parse(&doc! { "x": 0 }).unwrap();
        // Two shards' outputs, concatenated.
        let mut all = docs(&[1, 4, 7]);
        all.extend(docs(&[2, 3, 5, 6]));
        let out = finish(all, Some(&sort), 1, 3, Some(&proj));
        assert_eq!(out, vec![doc! {"_id": 3}, doc! {"_id": 7}, doc! {"_id": 4}]);
        assert_eq!(finish(docs(&[1, 2]), None, 0, 0, None).len(), 2);
        assert!(finish(docs(&[1, 2]), None, 5, 0, None).is_empty());
    }

    #[test]
    fn pipelines_split_after_their_leading_matches() {
        let stages = vec![
            doc! { "$match": { "a": 1 } },
            doc! { "$match": { "b": 2 } },
            doc! { "$group": { "_id": null, "n": { "$sum": 1 } } },
            doc! { "$match": { "n": 3 } },
        ];
        let (lead, rest) = split_pipeline(&stages);
        assert_eq!(lead.len(), 2);
        assert_eq!(rest.len(), 2);
        assert_eq!(
            lead_filter(&lead),
            doc! { "$and": [{ "a": 1 }, { "b": 2 }] }
        );
        assert_eq!(lead_filter(&[]), doc! {});
        // $group over two shards' documents gives one collection's answer.
        let mut all = docs(&[1, 2, 3]);
        all.extend(docs(&[4, 5, 6, 7]));
        let group = crate::aggregate::Pipeline::parse(&[
            doc! { "$group": { "_id": "$x", "n": { "$sum": 1 }, "s": { "$sum": "$_id" } } },
            doc! { "$sort": { "_id": 1 } },
        ])
        .unwrap();
        assert_eq!(
            group.run(all.into_iter()).unwrap(),
            vec![
                doc! { "_id": 0, "n": 2, "s": 9 },
                doc! { "_id": 1, "n": 3, "s": 12 },
                doc! { "_id": 2, "n": 2, "s": 7 },
            ]
        );
    }

    #[test]
    fn write_replies_merge_with_the_clients_indexes() {
        let mut w = WriteReply::default();
        w.absorb(
            &doc! { "n": 2, "writeErrors": [{ "index": 1, "code": 11000, "errmsg": "dup" }], "ok": 1.0 },
            &[0, 3, 4],
            false,
        );
        w.absorb(&doc! { "n": 1, "ok": 1.0 }, &[1], false);
        w.absorb(
            &doc! { "ok": 0.0, "code": 10107, "codeName": "NotWritablePrimary", "errmsg": "not primary" },
            &[2, 5],
            false,
        );
        let d = w.into_doc(false);
        assert_eq!(d.get_i32("n").unwrap(), 3);
        let errs: Vec<(i32, i32)> = d
            .get_array("writeErrors")
            .unwrap()
            .iter()
            .map(|e| {
                let e = e.as_document().unwrap();
                (e.get_i32("index").unwrap(), e.get_i32("code").unwrap())
            })
            .collect();
        assert_eq!(errs, vec![(2, 10107), (3, 11000), (5, 10107)]);
        let mut u = WriteReply::default();
        u.absorb(
            &doc! { "n": 1, "nModified": 0, "upserted": [{ "index": 0, "_id": 9 }], "ok": 1.0 },
            &[4],
            true,
        );
        let d = u.into_doc(true);
        assert_eq!(d.get_i32("nModified").unwrap(), 0);
        assert_eq!(
            d.get_array("upserted").unwrap()[0].as_document().unwrap(),
            &doc! { "index": 4, "_id": 9 }
        );
    }
}
