//! Kind `custom`: operations declared in the config — insert, find,
//! update, delete, aggregate, count, distinct — with weights, and filter,
//! update, document and pipeline templates whose values may be generators
//! (the template language: [`template`]).
//!
//! Every document gets `_id` = its sequence number (loads resume by it),
//! and with `doc_size` a `pad` string that brings it to that BSON size.

pub(crate) mod params;
pub(crate) mod template;

pub use params::{CustomConfig, CustomIndex, CustomOp, CustomOpKind};
pub(crate) use template::{Ctx, Template};

use std::sync::Arc;

use mongodb::bson::{Bson, Document};
use rand::rngs::SmallRng;
use serde_json::Value;

use super::generators::PadPool;
use super::{
    bson_len, Action, BoundedInserts, Built, Generator, LastInsert, Mix, Op, OpSource, OpSpec,
    PrepareStep,
};
use crate::config_values::KeyError;
use template::{err, json_to_bson};

const COLL: usize = 0;

/// Bytes a `pad` string field adds beyond its characters: type byte,
/// `"pad\0"`, length prefix and the string's NUL.
const PAD_OVERHEAD: usize = 10;

/// One compiled operation.
#[derive(Debug, Clone)]
enum CompiledOp {
    Insert(Template),
    Find {
        filter: Template,
        sort: Option<Document>,
        projection: Option<Document>,
        limit: i64,
    },
    Update {
        filter: Template,
        update: Template,
        many: bool,
    },
    Delete {
        filter: Template,
        many: bool,
    },
    Aggregate(Vec<Template>),
    Count(Template),
    Distinct {
        field: String,
        filter: Template,
    },
}

fn literal_doc(v: &Option<Value>, at: &str) -> Result<Option<Document>, KeyError> {
    match v {
        None => Ok(None),
        Some(v @ Value::Object(_)) => match Template::compile(v, at)? {
            Template::Lit(Bson::Document(d)) => Ok(Some(d)),
            _ => err(at, "is fixed: it cannot draw values with \"$gen\""),
        },
        Some(v) => err(at, format!("expected a table, got {v}")),
    }
}

fn compile_op(cfg: &CustomConfig, i: usize, document: &Template) -> Result<CompiledOp, KeyError> {
    let op = &cfg.operations[i];
    let at = |k: &str| format!("operations[{i}].{k}");
    let filter = match &op.filter {
        Some(f) => Template::compile_doc(f, &at("filter"))?,
        None => Template::Lit(Bson::Document(Document::new())),
    };
    reject_unused_keys(op, at)?;
    Ok(match op.op {
        CustomOpKind::Insert => match &op.document {
            Some(d) => CompiledOp::Insert(document_template(d, &at("document"))?),
            None => CompiledOp::Insert(document.clone()),
        },
        CustomOpKind::Find => {
            if op.limit < 0 {
                return err(
                    &at("limit"),
                    format!("must be ≥ 0 (0: no limit), got {}", op.limit),
                );
            }
            CompiledOp::Find {
                filter,
                sort: literal_doc(&op.sort, &at("sort"))?,
                projection: literal_doc(&op.projection, &at("projection"))?,
                limit: op.limit,
            }
        }
        CustomOpKind::Update => {
            let Some(u) = &op.update else {
                return err(
                    &at("update"),
                    "is required: operators such as { \"$set\" = { … } }",
                );
            };
            let ok = u.as_object().is_some_and(|o| {
                !o.is_empty() && o.keys().all(|k| k.starts_with('$') && k != "$gen")
            });
            if !ok {
                return err(&at("update"), format!("must be a table of update operators such as {{ \"$set\" = {{ status = \"shipped\" }} }}, got {u}"));
            }
            CompiledOp::Update {
                filter,
                update: Template::compile_doc(u, &at("update"))?,
                many: op.many,
            }
        }
        CustomOpKind::Delete => CompiledOp::Delete {
            filter,
            many: op.many,
        },
        CustomOpKind::Aggregate => {
            let Some(p) = op.pipeline.as_ref().filter(|p| !p.is_empty()) else {
                return err(&at("pipeline"), "is required: a non-empty list of stages");
            };
            CompiledOp::Aggregate(
                p.iter()
                    .enumerate()
                    .map(|(j, s)| Template::compile_doc(s, &format!("{}[{j}]", at("pipeline"))))
                    .collect::<Result<_, _>>()?,
            )
        }
        CustomOpKind::Count => CompiledOp::Count(filter),
        CustomOpKind::Distinct => {
            let Some(field) = op.field.clone().filter(|f| !f.is_empty()) else {
                return err(
                    &at("field"),
                    "is required: the field whose distinct values to return",
                );
            };
            CompiledOp::Distinct { field, filter }
        }
    })
}

/// Rejects a key that the operation's kind does not use (a `sort` on an
/// update, a `filter` on an insert), naming the first such key.
fn reject_unused_keys(op: &CustomOp, at: impl Fn(&str) -> String) -> Result<(), KeyError> {
    use CustomOpKind as K;
    // (key, present, used by this kind), in the order they are checked.
    let keys = [
        ("update", op.update.is_some(), op.op == K::Update),
        ("pipeline", op.pipeline.is_some(), op.op == K::Aggregate),
        ("document", op.document.is_some(), op.op == K::Insert),
        ("field", op.field.is_some(), op.op == K::Distinct),
        ("sort", op.sort.is_some(), op.op == K::Find),
        ("projection", op.projection.is_some(), op.op == K::Find),
        ("limit", op.limit != 0, op.op == K::Find),
        ("many", op.many, matches!(op.op, K::Update | K::Delete)),
        (
            "filter",
            op.filter.is_some(),
            !matches!(op.op, K::Insert | K::Aggregate),
        ),
    ];
    for (key, present, used) in keys {
        if present && !used {
            return err(
                &at(key),
                format!("not used by a {} operation", op.op.as_str()),
            );
        }
    }
    Ok(())
}

fn document_template(v: &Value, at: &str) -> Result<Template, KeyError> {
    if v.get("_id").is_some() {
        return err(
            &format!("{at}._id"),
            "is set by mongoload: the document's sequence number",
        );
    }
    Template::compile_doc(v, at)
}

/// The `custom` workload's generator, shared by every worker.
#[derive(Debug)]
pub(crate) struct Custom {
    pad: PadPool,
    doc_size: Option<usize>,
    /// The template of loaded and inserted documents.
    document: Template,
    inserts: BoundedInserts,
    /// The compiled operations by weight; each worker draws from its own
    /// clone (generators keep state).
    mix: Mix<CompiledOp>,
}

impl Custom {
    /// The context a template draws in, `docs` documents inserted so far.
    fn ctx<'a>(&'a self, rng: &'a mut SmallRng, docs: u64, seq: Option<u64>) -> Ctx<'a> {
        Ctx {
            rng,
            pad: &self.pad,
            docs,
            first: self.inserts.present_at(docs).start,
            seq,
        }
    }

    /// Document `seq` from `template`: `_id` first, then the template's
    /// fields, then padding up to the size target.
    fn document(&self, template: &mut Template, rng: &mut SmallRng, seq: u64) -> Document {
        let docs = self.inserts.counter().bound();
        let mut ctx = self.ctx(rng, docs, Some(seq));
        let body = template.eval_doc(&mut ctx);
        let mut d = Document::new();
        d.insert("_id", seq as i64);
        d.extend(body);
        if let Some(target) = self.doc_size {
            let len = bson_len(&d);
            if target >= len + PAD_OVERHEAD {
                d.insert("pad", self.pad.pad(ctx.rng, target - len - PAD_OVERHEAD));
            }
        }
        d
    }

    /// Document `i` as the prepare step loads it. Generators keep state (a
    /// zipfian's table): a fresh template per document keeps document `i`
    /// a function of `i` alone.
    fn loaded(&self, rng: &mut SmallRng, i: u64) -> Document {
        self.document(&mut self.document.clone(), rng, i)
    }

    /// Checks what [`build`] would compile, without building it: for
    /// config validation.
    pub(crate) fn check(cfg: &CustomConfig) -> Result<(), KeyError> {
        compile(cfg).map(|_| ())
    }
}

/// Compiles the operations and templates of a custom workload. With a
/// bound, every insert evicts the oldest document as its second step
/// (step label `evict`), under the insert's own `op` label.
pub(crate) fn build(cfg: &CustomConfig, seed: u64) -> Result<Built<Custom>, KeyError> {
    let (ops, document, indexes) = compile(cfg)?;
    let has_insert = ops.iter().any(|o| matches!(o, CompiledOp::Insert(_)));
    let max_docs = if has_insert { cfg.max_docs } else { 0 };
    let inserts = BoundedInserts::new(COLL, cfg.initial_docs, max_docs);
    let specs = cfg
        .operations
        .iter()
        .map(|o| match o.op {
            CustomOpKind::Insert => inserts.spec(o.label()),
            _ => OpSpec::single(o.label()),
        })
        .collect();
    let weights = cfg.operations.iter().map(|o| o.weight);
    let Some(mix) = Mix::new(ops.into_iter().zip(weights)) else {
        return err("operations", "the operation weights sum to zero");
    };
    let custom = Arc::new(Custom {
        pad: PadPool::new(seed, PadPool::DEFAULT_SIZE),
        doc_size: cfg.doc_size.map(|s| s.bytes() as usize),
        document,
        inserts,
        mix,
    });
    let mut prepare: Vec<PrepareStep> = indexes
        .into_iter()
        .map(|(keys, unique, name)| PrepareStep::CreateIndex {
            collection: COLL,
            keys,
            unique,
            name,
        })
        .collect();
    prepare.extend(
        custom
            .inserts
            .prepare((cfg.load_batch, seed), &custom, Custom::loaded),
    );
    let keys = vec![Arc::clone(custom.inserts.counter())];
    Ok(Built::new(
        "custom",
        specs,
        vec![cfg.collection.clone()],
        prepare,
        custom,
    )
    .with_keys(keys))
}

type Compiled = (
    Vec<CompiledOp>,
    Template,
    Vec<(Document, bool, Option<String>)>,
);

fn compile(cfg: &CustomConfig) -> Result<Compiled, KeyError> {
    let document = document_template(&cfg.document, "document")?;
    let ops = (0..cfg.operations.len())
        .map(|i| compile_op(cfg, i, &document))
        .collect::<Result<Vec<_>, _>>()?;
    let mut indexes = Vec::new();
    for (i, ix) in cfg.indexes.iter().enumerate() {
        let keys = match json_to_bson(&ix.keys) {
            Bson::Document(d) if !d.is_empty() => d,
            _ => {
                return err(
                    &format!("indexes[{i}].keys"),
                    format!(
                        "must be a non-empty table such as {{ customer = 1 }}, got {}",
                        ix.keys
                    ),
                )
            }
        };
        indexes.push((keys, ix.unique, ix.name.clone()));
    }
    Ok((ops, document, indexes))
}

impl Generator for Custom {
    fn source(self: Arc<Self>, _worker: u32, rng: SmallRng) -> Box<dyn OpSource> {
        Box::new(Source {
            mix: self.mix.clone(),
            custom: self,
            rng,
            last: LastInsert::default(),
        })
    }
}

struct Source {
    custom: Arc<Custom>,
    /// This worker's own copy of the operations (their generators' state).
    mix: Mix<CompiledOp>,
    rng: SmallRng,
    /// This worker's previous insert ([`LastInsert`]).
    last: LastInsert,
}

impl OpSource for Source {
    fn next_op(&mut self) -> Op {
        let c = &*self.custom;
        let (op, compiled) = self.mix.draw_mut(&mut self.rng);
        let docs = c.inserts.counter().bound();
        let mut ctx = c.ctx(&mut self.rng, docs, None);
        let action = match compiled {
            CompiledOp::Insert(t) => {
                return c
                    .inserts
                    .insert_one(op, &mut self.last, |id| c.document(t, ctx.rng, id));
            }
            CompiledOp::Find {
                filter,
                sort,
                projection,
                limit,
            } => Action::Find {
                collection: COLL,
                filter: filter.eval_doc(&mut ctx),
                sort: sort.clone(),
                limit: *limit,
                projection: projection.clone(),
            },
            CompiledOp::Update {
                filter,
                update,
                many,
            } => {
                let (filter, update) = (filter.eval_doc(&mut ctx), update.eval_doc(&mut ctx));
                if *many {
                    Action::UpdateMany {
                        collection: COLL,
                        filter,
                        update,
                    }
                } else {
                    Action::UpdateOne {
                        collection: COLL,
                        filter,
                        update,
                    }
                }
            }
            CompiledOp::Delete { filter, many } => {
                let filter = filter.eval_doc(&mut ctx);
                if *many {
                    Action::DeleteMany {
                        collection: COLL,
                        filter,
                    }
                } else {
                    Action::DeleteOne {
                        collection: COLL,
                        filter,
                    }
                }
            }
            CompiledOp::Aggregate(stages) => Action::Aggregate {
                collection: COLL,
                pipeline: stages.iter_mut().map(|t| t.eval_doc(&mut ctx)).collect(),
            },
            CompiledOp::Count(filter) => Action::Count {
                collection: COLL,
                filter: filter.eval_doc(&mut ctx),
            },
            CompiledOp::Distinct { field, filter } => Action::Distinct {
                collection: COLL,
                field: field.clone(),
                filter: filter.eval_doc(&mut ctx),
            },
        };
        Op::one(op, action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config_values::ByteSize;
    use crate::workload::Workload;
    use mongodb::bson::doc;
    use serde_json::json;

    fn op(kind: CustomOpKind) -> CustomOp {
        CustomOp {
            op: kind,
            name: None,
            weight: 1.0,
            filter: None,
            update: None,
            document: None,
            pipeline: None,
            field: None,
            sort: None,
            projection: None,
            limit: 0,
            many: false,
        }
    }

    #[test]
    fn bad_templates_name_the_key() {
        let bad = [
            (json!({ "x": { "$gen": "gaussian" } }), "document.x.$gen"),
            (
                json!({ "x": { "$gen": "uniform", "max": 5, "min": 9 } }),
                "document.x.max",
            ),
            (json!({ "x": { "$gen": "string" } }), "document.x.length"),
            (
                json!({ "x": { "$gen": "string", "length": 3, "colour": 1 } }),
                "document.x.colour",
            ),
            (
                json!({ "x": { "$gen": "date", "from": "yesterday", "to": "2024-01-01T00:00:00Z" } }),
                "document.x.from",
            ),
            (
                json!({ "x": { "y": [{ "$gen": "choice", "values": [] }] } }),
                "document.x.y[0].values",
            ),
            (json!({ "_id": 1 }), "document._id"),
        ];
        for (doc, key) in bad {
            let cfg = CustomConfig {
                document: doc,
                operations: vec![op(CustomOpKind::Insert)],
                ..CustomConfig::default()
            };
            let e = Custom::check(&cfg).unwrap_err();
            assert_eq!(e.key, key, "{e:?}");
        }
        let mut update_without_operators = op(CustomOpKind::Update);
        update_without_operators.update = Some(json!({ "status": "x" }));
        let cfg = CustomConfig {
            operations: vec![update_without_operators],
            ..CustomConfig::default()
        };
        assert_eq!(Custom::check(&cfg).unwrap_err().key, "operations[0].update");
        let mut distinct = op(CustomOpKind::Distinct);
        distinct.limit = 3;
        let cfg = CustomConfig {
            operations: vec![distinct],
            ..CustomConfig::default()
        };
        assert_eq!(Custom::check(&cfg).unwrap_err().key, "operations[0].limit");
        let mut find = op(CustomOpKind::Find);
        find.sort = Some(json!({ "x": { "$gen": "uniform", "max": 2 } }));
        let cfg = CustomConfig {
            operations: vec![find],
            ..CustomConfig::default()
        };
        assert_eq!(Custom::check(&cfg).unwrap_err().key, "operations[0].sort");
    }

    #[test]
    fn operations_follow_weights_and_documents_the_size_target() {
        let mut find = op(CustomOpKind::Find);
        find.weight = 3.0;
        find.filter = Some(json!({ "customer": { "$gen": "uniform", "max": 100 } }));
        find.limit = 5;
        let mut update = op(CustomOpKind::Update);
        update.update = Some(json!({ "$inc": { "n": 1 } }));
        update.filter = Some(json!({ "_id": { "$gen": "uniform" } }));
        let mut agg = op(CustomOpKind::Aggregate);
        agg.pipeline = Some(vec![
            json!({ "$match": { "customer": { "$gen": "zipfian", "max": 100 } } }),
            json!({ "$group": { "_id": null, "n": { "$sum": 1 } } }),
        ]);
        let cfg = CustomConfig {
            document: json!({ "customer": { "$gen": "uniform", "max": 100 }, "tags": ["a"] }),
            doc_size: Some(ByteSize(1000)),
            initial_docs: 10,
            operations: vec![op(CustomOpKind::Insert), find, update, agg],
            ..CustomConfig::default()
        };
        let w = build(&cfg, 1).unwrap();
        assert_eq!(w.op_names(), ["insert", "find", "update", "aggregate"]);
        let mut src = w.worker(0, 1);
        let mut counts = [0u32; 4];
        for _ in 0..6000 {
            let o = src.next_op();
            counts[o.op] += 1;
            match o.into_action().unwrap() {
                Action::InsertOne { doc, .. } => {
                    assert_eq!(bson_len(&doc), 1000);
                    assert!(doc.get_i64("_id").unwrap() >= 10);
                }
                Action::Find { filter, limit, .. } => {
                    assert_eq!(limit, 5);
                    assert!((0..100).contains(&filter.get_i64("customer").unwrap()));
                }
                Action::UpdateOne { update, .. } => {
                    assert_eq!(update, doc! { "$inc": { "n": 1i64 } })
                }
                Action::Aggregate { pipeline, .. } => assert_eq!(pipeline.len(), 2),
                other => panic!("{other:?}"),
            }
        }
        let share = counts[1] as f64 / 6000.0;
        assert!((share - 0.5).abs() < 0.03, "{counts:?}");
        let PrepareStep::Load { make, .. } = &w.prepare()[0] else {
            panic!()
        };
        assert_eq!(make(3), make(3));
        assert_eq!(bson_len(&make(3)), 1000);
    }

    #[test]
    fn a_bound_evicts_the_oldest() {
        let cfg = CustomConfig {
            document: json!({ "x": 1 }),
            initial_docs: 5,
            max_docs: 5,
            operations: vec![op(CustomOpKind::Insert)],
            ..CustomConfig::default()
        };
        let w = build(&cfg, 1).unwrap();
        assert_eq!(w.op_names(), ["insert"]);
        assert_eq!(w.ops()[0].steps, [Arc::from("insert"), Arc::from("evict")]);
        // Reads of existing _ids stay within the window of kept documents.
        let cfg_reads = CustomConfig {
            operations: vec![op(CustomOpKind::Insert), {
                let mut f = op(CustomOpKind::Find);
                f.filter = Some(json!({ "_id": { "$gen": "uniform" } }));
                f
            }],
            ..cfg.clone()
        };
        let r = build(&cfg_reads, 1).unwrap();
        let mut reads = r.worker(0, 1);
        for _ in 0..400 {
            let o = reads.next_op();
            if let Some(Action::Find { filter, .. }) = o.action() {
                let id = filter.get_i64("_id").unwrap() as u64;
                let docs = r.inserts.counter().bound();
                assert!(
                    id + 5 >= docs && id < docs,
                    "{id} outside the last 5 of {docs}"
                );
            }
        }
        let mut src = w.worker(0, 1);
        let o = src.next_op();
        assert_eq!(o.op, 0);
        let steps = o.requests();
        assert_eq!(steps[1].step, 1);
        assert!(
            matches!(&steps[1].action, Action::DeleteOne { filter, .. } if filter == &doc! {"_id": 0i64})
        );
    }
}
