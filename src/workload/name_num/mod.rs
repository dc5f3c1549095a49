//! Kind `name-num`: documents `{ _id, Name: "Edison", Num: <random int> }`
//! with an index on `Num`, from the published MongoDB 3.0 WiredTiger
//! tests. Modes: `insert`, `update` (one document by `Num`), `query` (one
//! document by `Num`), and `insert-query` (both, weighted).
//!
//! `_id`s are sequence numbers: the prepare step loads `0..initial_docs`
//! and inserts take the next ones from a shared counter. With `max_docs`
//! every insert also deletes the document `max_docs` behind it, so the
//! collection never grows past the bound (delete-per-insert).

pub(crate) mod params;

pub use params::{NameNumConfig, NameNumMode};

use std::sync::Arc;

use mongodb::bson::{doc, Document};
use rand::rngs::SmallRng;
use rand::Rng;

use super::{
    Action, BoundedInserts, Built, Generator, LastInsert, Mix, Op, OpSource, OpSpec, PrepareStep,
};

const COLL: usize = 0;

/// What one draw does.
#[derive(Debug, Clone, Copy, PartialEq)]
enum What {
    Insert,
    Update,
    Query,
}

/// The `name-num` workload's generator, shared by every worker.
#[derive(Debug)]
pub(crate) struct NameNum {
    name: String,
    num_max: u64,
    inserts: BoundedInserts,
    /// What this mode draws from; the index is the `op`.
    mix: Mix<What>,
}

impl NameNum {
    fn document(&self, rng: &mut SmallRng, id: u64) -> Document {
        doc! {
            "_id": id as i64,
            "Name": self.name.as_str(),
            "Num": self.num(rng),
        }
    }

    fn num(&self, rng: &mut SmallRng) -> i64 {
        rng.random_range(0..self.num_max) as i64
    }
}

/// Builds the workload from validated parameters.
pub(crate) fn build(cfg: &NameNumConfig, seed: u64) -> Built<NameNum> {
    let whats = match cfg.mode {
        NameNumMode::Insert => vec![(What::Insert, 1.0)],
        NameNumMode::Update => vec![(What::Update, 1.0)],
        NameNumMode::Query => vec![(What::Query, 1.0)],
        NameNumMode::InsertQuery => vec![
            (What::Insert, cfg.insert_weight),
            (What::Query, cfg.query_weight),
        ],
    };
    let mix = Mix::new(whats).expect("validated: insert_weight and query_weight sum above zero");
    let inserts = BoundedInserts::new(COLL, cfg.initial_docs, cfg.max_docs);
    let ops = mix
        .items()
        .iter()
        .map(|what| match what {
            // A bounded insert evicts as its second step, same label.
            What::Insert => inserts.spec("insert"),
            What::Update => OpSpec::single("update"),
            What::Query => OpSpec::single("query"),
        })
        .collect();
    let w = Arc::new(NameNum {
        name: cfg.name.clone(),
        num_max: cfg.num_max,
        inserts,
        mix,
    });
    let mut prepare = vec![PrepareStep::index(COLL, doc! { "Num": 1 }, Some("Num_1"))];
    prepare.extend(
        w.inserts
            .prepare((cfg.load_batch, seed), &w, NameNum::document),
    );
    let keys = vec![Arc::clone(w.inserts.counter())];
    Built::new("name-num", ops, vec![cfg.collection.clone()], prepare, w).with_keys(keys)
}

impl Generator for NameNum {
    fn source(self: Arc<Self>, _worker: u32, rng: SmallRng) -> Box<dyn OpSource> {
        Box::new(Source {
            name_num: self,
            rng,
            last: LastInsert::default(),
        })
    }
}

struct Source {
    name_num: Arc<NameNum>,
    rng: SmallRng,
    /// This worker's previous insert ([`LastInsert`]).
    last: LastInsert,
}

impl OpSource for Source {
    fn next_op(&mut self) -> Op {
        let w = &*self.name_num;
        let rng = &mut self.rng;
        let (op, what) = w.mix.draw(rng);
        match what {
            What::Insert => w
                .inserts
                .insert_one(op, &mut self.last, |id| w.document(rng, id)),
            What::Update => {
                let (from, to) = (w.num(rng), w.num(rng));
                Op::one(
                    op,
                    Action::UpdateOne {
                        collection: COLL,
                        filter: doc! { "Num": from },
                        update: doc! { "$set": { "Num": to } },
                    },
                )
            }
            What::Query => Op::one(
                op,
                Action::FindOne {
                    collection: COLL,
                    filter: doc! { "Num": w.num(rng) },
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::Workload;

    fn cfg(mode: NameNumMode) -> NameNumConfig {
        NameNumConfig {
            mode,
            initial_docs: 100,
            num_max: 1000,
            ..NameNumConfig::default()
        }
    }

    #[test]
    fn each_mode_issues_its_operations() {
        for (mode, names) in [
            (NameNumMode::Insert, vec!["insert"]),
            (NameNumMode::Update, vec!["update"]),
            (NameNumMode::Query, vec!["query"]),
            (NameNumMode::InsertQuery, vec!["insert", "query"]),
        ] {
            let w = build(&cfg(mode), 1);
            assert_eq!(w.op_names(), names.as_slice());
            let mut src = w.worker(0, 3);
            let mut seen = vec![0u32; names.len()];
            for _ in 0..2000 {
                let op = src.next_op();
                seen[op.op] += 1;
                match (op.action().unwrap(), w.op_names()[op.op]) {
                    (Action::InsertOne { doc, .. }, "insert") => {
                        assert_eq!(doc.get_str("Name"), Ok("Edison"));
                        assert!((0..1000).contains(&doc.get_i64("Num").unwrap()));
                        assert!(doc.get_i64("_id").unwrap() >= 100);
                    }
                    (Action::UpdateOne { filter, update, .. }, "update") => {
                        assert!(filter.get_i64("Num").is_ok());
                        assert!(update.get_document("$set").unwrap().contains_key("Num"));
                    }
                    (Action::FindOne { filter, .. }, "query") => {
                        assert!(filter.get_i64("Num").is_ok())
                    }
                    other => panic!("{mode:?}: {other:?}"),
                }
            }
            // insert-query's default weights are 1:1.
            for s in &seen {
                assert!(*s as usize > 2000 / names.len() - 150, "{mode:?} {seen:?}");
            }
        }
    }

    #[test]
    fn a_bound_evicts_the_document_max_docs_behind_in_the_same_insert() {
        let c = NameNumConfig {
            max_docs: 150,
            ..cfg(NameNumMode::Insert)
        };
        let w = build(&c, 1);
        assert_eq!(w.op_names(), ["insert"]);
        let mut src = w.worker(0, 1);
        for id in 100..400i64 {
            let op = src.next_op();
            assert_eq!(op.op, 0, "the label stays insert");
            if id < 150 {
                assert!(matches!(op.action(), Some(Action::InsertOne { .. })));
                continue;
            }
            let steps = op.requests();
            assert_eq!(steps[0].step, 0);
            assert_eq!(steps[1].step, 1);
            match &steps[1].action {
                Action::DeleteOne { filter, .. } => {
                    assert_eq!(filter.get_i64("_id"), Ok(id - 150))
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn prepare_indexes_num_and_loads_deterministically() {
        let w = build(&cfg(NameNumMode::Query), 9);
        let steps = w.prepare();
        assert!(
            matches!(&steps[0], PrepareStep::CreateIndex { keys, .. } if keys == &doc! {"Num": 1})
        );
        let PrepareStep::Load { count, make, .. } = &steps[1] else {
            panic!()
        };
        assert_eq!(*count, 100);
        assert_eq!(make(5), make(5));
        assert_eq!(make(5).get_i64("_id"), Ok(5));
    }
}
