//! Kind `name-num`: documents `{ _id, Name: "Edison", Num: <random int> }`
//! with an index on `Num`, from the published MongoDB 3.0 WiredTiger
//! tests. Modes: `insert`, `update` (one document by `Num`), `query` (one
//! document by `Num`), and `insert-query` (both, weighted).
//!
//! `_id`s are sequence numbers: the prepare step loads `0..initial_docs`
//! and inserts take the next ones from a shared counter. With `max_docs`
//! every insert also deletes the document `max_docs` behind it, so the
//! collection never grows past the bound (delete-per-insert).

use std::sync::Arc;

use mongodb::bson::{doc, Document};
use rand::rngs::SmallRng;
use rand::Rng;

use super::gen::{document_rng, worker_rng};
use super::{
    bounded_insert, evict_one, Action, Op, OpSource, OpSpec, PrepareStep, WeightedPick, Workload,
};
use crate::cluster::Keys;
use crate::config::{NameNumConfig, NameNumMode};

const COLL: usize = 0;

#[derive(Debug)]
struct Shared {
    name: String,
    num_max: u64,
    max_docs: u64,
    next_id: Arc<Keys>,
    seed: u64,
}

impl Shared {
    fn document(&self, rng: &mut SmallRng, id: u64) -> Document {
        doc! {
            "_id": id as i64,
            "Name": self.name.as_str(),
            "Num": rng.random_range(0..self.num_max) as i64,
        }
    }
}

/// What one draw does.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Insert,
    Update,
    Query,
}

/// The `name-num` workload.
#[derive(Debug)]
pub struct NameNum {
    shared: Arc<Shared>,
    collections: Vec<String>,
    ops: Vec<OpSpec>,
    /// The kinds this mode draws from, and their weights.
    kinds: Vec<Kind>,
    pick: WeightedPick,
    initial_docs: u64,
    load_batch: usize,
}

impl NameNum {
    /// Builds the workload from validated parameters.
    pub fn new(cfg: &NameNumConfig, seed: u64) -> Result<NameNum, String> {
        let (kinds, weights) = match cfg.mode {
            NameNumMode::Insert => (vec![Kind::Insert], vec![1.0]),
            NameNumMode::Update => (vec![Kind::Update], vec![1.0]),
            NameNumMode::Query => (vec![Kind::Query], vec![1.0]),
            NameNumMode::InsertQuery => (
                vec![Kind::Insert, Kind::Query],
                vec![cfg.insert_weight, cfg.query_weight],
            ),
        };
        let pick = WeightedPick::new(&weights).ok_or("the mode's weights sum to zero")?;
        let ops = kinds
            .iter()
            .map(|k| match k {
                // A bounded insert evicts as its second step, same label.
                Kind::Insert => OpSpec::insert("insert", cfg.max_docs > 0),
                Kind::Update => OpSpec::single("update"),
                Kind::Query => OpSpec::single("query"),
            })
            .collect();
        if cfg.num_max == 0 {
            return Err("num_max must be at least 1".into());
        }
        Ok(NameNum {
            shared: Arc::new(Shared {
                name: cfg.name.clone(),
                num_max: cfg.num_max,
                max_docs: cfg.max_docs,
                next_id: Arc::new(Keys::new(cfg.initial_docs)),
                seed,
            }),
            collections: vec![cfg.collection.clone()],
            ops,
            kinds,
            pick,
            initial_docs: cfg.initial_docs,
            load_batch: cfg.load_batch.max(1),
        })
    }

    /// The shared `_id` counter: the next key an insert takes.
    pub fn next_id(&self) -> &Arc<Keys> {
        &self.shared.next_id
    }
}

impl Workload for NameNum {
    fn kind(&self) -> &'static str {
        "name-num"
    }

    fn ops(&self) -> &[OpSpec] {
        &self.ops
    }

    fn collections(&self) -> &[String] {
        &self.collections
    }

    fn prepare(&self) -> Vec<PrepareStep> {
        let shared = Arc::clone(&self.shared);
        vec![
            PrepareStep::CreateIndex {
                collection: COLL,
                keys: doc! { "Num": 1 },
                unique: false,
                name: Some("Num_1".into()),
            },
            PrepareStep::Load {
                collection: COLL,
                count: self.initial_docs,
                batch: self.load_batch,
                make: Arc::new(move |i| {
                    let mut rng = document_rng(shared.seed, i);
                    shared.document(&mut rng, i)
                }),
            },
            PrepareStep::SeekKeys {
                collection: COLL,
                counter: Arc::clone(&self.shared.next_id),
            },
        ]
    }

    fn keys(&self) -> Vec<&Keys> {
        vec![&self.shared.next_id]
    }

    fn worker(&self, worker_id: u32, seed: u64) -> Box<dyn OpSource> {
        Box::new(Source {
            shared: Arc::clone(&self.shared),
            kinds: self.kinds.clone(),
            pick: self.pick.clone(),
            rng: worker_rng(seed, worker_id),
        })
    }
}

struct Source {
    shared: Arc<Shared>,
    kinds: Vec<Kind>,
    pick: WeightedPick,
    rng: SmallRng,
}

impl OpSource for Source {
    fn next_op(&mut self) -> Op {
        let op = self.pick.pick(&mut self.rng);
        let num = |rng: &mut SmallRng, max| rng.random_range(0..max) as i64;
        match self.kinds[op] {
            Kind::Insert => {
                let id = self.shared.next_id.next();
                let insert = Action::InsertOne {
                    collection: COLL,
                    doc: self.shared.document(&mut self.rng, id),
                };
                let evict = evict_one(&self.shared.next_id, COLL, id, self.shared.max_docs);
                bounded_insert(op, insert, evict)
            }
            Kind::Update => {
                let (from, to) = (
                    num(&mut self.rng, self.shared.num_max),
                    num(&mut self.rng, self.shared.num_max),
                );
                Op::one(
                    op,
                    Action::UpdateOne {
                        collection: COLL,
                        filter: doc! { "Num": from },
                        update: doc! { "$set": { "Num": to } },
                    },
                )
            }
            Kind::Query => Op::one(
                op,
                Action::FindOne {
                    collection: COLL,
                    filter: doc! { "Num": num(&mut self.rng, self.shared.num_max) },
                },
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
            let w = NameNum::new(&cfg(mode), 1).unwrap();
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
        let w = NameNum::new(&c, 1).unwrap();
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
        let w = NameNum::new(&cfg(NameNumMode::Query), 9).unwrap();
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
