//! Kind `ycsb`: YCSB's core workloads A–F with YCSB's defaults — records
//! of 10 fields of 100 bytes, keys `"user" + fnvhash64(n)` as YCSB's
//! `CoreWorkload.buildKeyName` makes them (hashed insert order), requests
//! drawn from a scrambled zipfian (latest for D), scans of uniform length
//! up to 100 (E), and read-modify-write (F) as one operation
//! `read_modify_write` of two requests, steps `read` and `update` (one
//! field). Reads return all fields; updates write one random field (YCSB's
//! `readallfields=true`, `writeallfields=false`).
//!
//! Documents are `{ _id: key, field0: …, field9: … }` in the collection
//! `usertable`, as YCSB's MongoDB binding stores them: each field BSON
//! binary (subtype 0) of `field_length` random bytes (`field_type =
//! "string"` stores random characters instead). Inserts (D, E) take key numbers from a counter shared by
//! all workers, raised at prepare time to the number of records present.

pub mod params;

pub use params::{YcsbConfig, YcsbFieldType, YcsbLetter, YcsbOp};

use std::sync::Arc;

use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{doc, Binary, Bson, Document};
use rand::rngs::SmallRng;
use rand::Rng;

use super::gen::{fnv1a64, KeyGen, PadPool};
use super::{Action, BoundedInserts, Built, Generator, Mix, Op, OpSource, OpSpec, Request};

const COLL: usize = 0;

/// Read-modify-write's steps, in order.
const RMW_STEPS: [&str; 2] = ["read", "update"];

/// YCSB's key for record number `n`: `"user"` followed by the decimal of
/// `fnvhash64(n)` (Java's `Math.abs` of the signed hash, so `i64::MIN`
/// stays negative as in Java).
pub fn key_name(n: u64) -> String {
    let h = fnv1a64(n) as i64;
    format!("user{}", h.wrapping_abs())
}

/// The audit's ledger ids of YCSB keys: the record number. Keys are
/// hashes (`"user" + fnvhash64(n)`), so the number is not read back from
/// the key: each insert's source notes it here when the workload is
/// audited, and the audit takes it when the insert is sent. The ledger then
/// holds sequential numbers (compact), not 63-bit hashes (about 200 bytes
/// each in a roaring treemap).
#[derive(Debug, Default)]
struct YcsbKeys {
    /// Keys of inserts generated and not yet sent → record number.
    pending: std::sync::Mutex<std::collections::HashMap<String, u64>>,
}

impl crate::audit::AuditKeys for YcsbKeys {
    fn ledger_id(&self, id: &Bson) -> Option<u64> {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(id.as_str()?)
    }

    fn key(&self, id: u64) -> Bson {
        Bson::String(key_name(id))
    }

    fn ordered(&self) -> bool {
        false
    }
}

/// The `ycsb` workload's generator, shared by every worker.
#[derive(Debug)]
pub struct Ycsb {
    pad: PadPool,
    field_names: Vec<String>,
    field_length: usize,
    field_type: YcsbFieldType,
    max_scan: i64,
    /// Record numbers: the next to insert is also the number of records.
    inserts: BoundedInserts,
    /// Key chooser, built once (zeta is O(record_count)) and cloned per
    /// worker.
    keys: KeyGen,
    /// The operations of the core workload; the index is the `op`.
    mix: Mix<YcsbOp>,
    /// Set once the workload is audited: inserts note their record numbers.
    audit: std::sync::OnceLock<Arc<YcsbKeys>>,
}

impl Ycsb {
    fn record(&self, rng: &mut SmallRng, n: u64) -> Document {
        let mut d = Document::new();
        d.insert("_id", key_name(n));
        for f in &self.field_names {
            d.insert(f.clone(), self.field(rng));
        }
        d
    }

    /// One field value: `field_length` random bytes as BSON binary
    /// (subtype 0), or as a string.
    fn field(&self, rng: &mut SmallRng) -> Bson {
        let chars = self.pad.pad(rng, self.field_length);
        match self.field_type {
            YcsbFieldType::Binary => Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: chars.into_bytes(),
            }),
            YcsbFieldType::String => Bson::String(chars),
        }
    }

    /// The shared record counter (next insert's record number).
    pub fn next_key(&self) -> &Arc<crate::cluster::Keys> {
        self.inserts.counter()
    }
}

/// Builds the workload from validated parameters.
pub fn build(cfg: &YcsbConfig, seed: u64) -> Built<Ycsb> {
    let mix = Mix::positive(cfg.workload.proportions().iter().copied())
        .expect("every core workload has an operation of positive proportion");
    let ops = mix
        .items()
        .iter()
        .map(|op| match op {
            YcsbOp::ReadModifyWrite => OpSpec::with_steps(op.label(), &RMW_STEPS),
            _ => OpSpec::single(op.label()),
        })
        .collect();
    let ycsb = Arc::new(Ycsb {
        pad: PadPool::new(seed, PadPool::DEFAULT_SIZE),
        field_names: (0..cfg.field_count).map(|i| format!("field{i}")).collect(),
        field_length: cfg.field_length,
        field_type: cfg.field_type,
        max_scan: cfg.max_scan_length.max(1),
        inserts: BoundedInserts::counted(COLL, cfg.record_count),
        keys: KeyGen::new(cfg.distribution(), cfg.record_count),
        mix,
        audit: std::sync::OnceLock::new(),
    });
    let prepare = ycsb
        .inserts
        .prepare((cfg.load_batch, seed), &ycsb, Ycsb::record);
    let keys = vec![Arc::clone(ycsb.inserts.counter())];
    Built::new(
        "ycsb",
        ops,
        vec![cfg.collection.clone()],
        prepare.into(),
        ycsb,
    )
    .with_keys(keys)
}

impl Generator for Ycsb {
    fn source(self: Arc<Self>, _worker: u32, rng: SmallRng) -> Box<dyn OpSource> {
        Box::new(Source {
            keys: self.keys.clone(),
            ycsb: self,
            rng,
        })
    }

    fn audit_keys(&self) -> Arc<dyn crate::audit::AuditKeys> {
        self.audit.get_or_init(Arc::default).clone()
    }
}

struct Source {
    ycsb: Arc<Ycsb>,
    keys: KeyGen,
    rng: SmallRng,
}

impl Source {
    fn existing_key(&mut self) -> String {
        let n = self.ycsb.inserts.present().end;
        key_name(self.keys.next_key(&mut self.rng, n))
    }

    fn update(&mut self, key: String) -> Action {
        let y = &*self.ycsb;
        let field = &y.field_names[self.rng.random_range(0..y.field_names.len())];
        let value = y.field(&mut self.rng);
        let mut set = Document::new();
        set.insert(field.clone(), value);
        Action::UpdateOne {
            collection: COLL,
            filter: doc! { "_id": key },
            update: doc! { "$set": set },
        }
    }
}

impl OpSource for Source {
    fn next_op(&mut self) -> Op {
        let y = Arc::clone(&self.ycsb);
        let (op, what) = y.mix.draw(&mut self.rng);
        let action = match what {
            YcsbOp::Read => Action::FindOne {
                collection: COLL,
                filter: doc! { "_id": self.existing_key() },
            },
            YcsbOp::Update => {
                let key = self.existing_key();
                self.update(key)
            }
            YcsbOp::Insert => {
                let rng = &mut self.rng;
                return y.inserts.insert_one(op, |n| {
                    if let Some(audit) = y.audit.get() {
                        audit
                            .pending
                            .lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .insert(key_name(n), n);
                    }
                    y.record(rng, n)
                });
            }
            YcsbOp::Scan => {
                let len = self.rng.random_range(1..=y.max_scan);
                Action::Find {
                    collection: COLL,
                    filter: doc! { "_id": { "$gte": self.existing_key() } },
                    sort: Some(doc! { "_id": 1 }),
                    limit: len,
                    projection: None,
                }
            }
            YcsbOp::ReadModifyWrite => {
                let key = self.existing_key();
                let read = Action::FindOne {
                    collection: COLL,
                    filter: doc! { "_id": key.clone() },
                };
                let update = self.update(key);
                return Op::steps(op, vec![Request::new(0, read), Request::new(1, update)]);
            }
        };
        Op::one(op, action)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{bson_len, PrepareStep, Workload};

    fn cfg(letter: YcsbLetter) -> YcsbConfig {
        YcsbConfig {
            workload: letter,
            ..YcsbConfig::default()
        }
    }

    #[test]
    fn keys_are_named_as_ycsb_names_them() {
        // FNV-1a 64 of the 8 little-endian bytes of 0, as YCSB's
        // Utils.fnvhash64(0): offset basis xor'd with 0 and multiplied 8
        // times; computed independently here.
        let mut h: u64 = 0xCBF2_9CE4_8422_2325;
        for _ in 0..8 {
            h = h.wrapping_mul(1_099_511_628_211);
        }
        assert_eq!(key_name(0), format!("user{}", (h as i64).wrapping_abs()));
        assert_ne!(key_name(1), key_name(2));
        assert!(key_name(12345).starts_with("user"));
        assert!(key_name(12345)[4..].parse::<i64>().is_ok());
    }

    #[test]
    fn records_have_ten_fields_of_a_hundred_bytes() {
        let w = build(&cfg(YcsbLetter::A), 1);
        let PrepareStep::Load { make, count, .. } = &w.prepare()[0] else {
            panic!()
        };
        assert_eq!(*count, 1000);
        let r = make(3);
        assert_eq!(r.get_str("_id").unwrap(), key_name(3));
        assert_eq!(r.len(), 11);
        for i in 0..10 {
            let f = r.get_binary_generic(format!("field{i}")).unwrap();
            assert_eq!(f.len(), 100);
        }
        assert!(bson_len(&r) > 1000);
        // YCSB's record size: 10 binary fields of 100 bytes and the key.
        let strings = build(
            &YcsbConfig {
                field_type: YcsbFieldType::String,
                ..cfg(YcsbLetter::A)
            },
            1,
        );
        let PrepareStep::Load { make, .. } = &strings.prepare()[0] else {
            panic!()
        };
        let s = make(3);
        assert_eq!(s.get_str("field0").unwrap().len(), 100);
        // Binary costs one subtype byte per field more than a string's NUL.
        assert_eq!(bson_len(&r), bson_len(&s));
    }

    #[test]
    fn audited_inserts_are_ledgered_by_record_number() {
        use crate::audit::{ids::effect, Effect, Ids};
        let w = build(&cfg(YcsbLetter::E), 1);
        let keys = w.audit_keys();
        let mut src = w.worker(0, 2);
        let mut seen = Vec::new();
        while seen.len() < 3 {
            let op = src.next_op();
            let Some(a @ Action::InsertOne { .. }) = op.action() else {
                continue;
            };
            let Effect::Insert {
                ids: Ids::One(n), ..
            } = effect(a, keys.as_ref())
            else {
                panic!("an insert's ledger id: {a:?}")
            };
            let Action::InsertOne { doc, .. } = a else {
                unreachable!()
            };
            assert_eq!(doc.get("_id"), Some(&keys.key(n)));
            seen.push(n);
        }
        // Record numbers after the loaded ones, in order: a compact ledger.
        assert_eq!(seen, vec![1000, 1001, 1002]);
        // A key is taken once: the same insert seen again maps to nothing.
        assert_eq!(keys.ledger_id(&keys.key(1000)), None);
    }

    fn shares(letter: YcsbLetter) -> Vec<(String, f64)> {
        let w = build(&cfg(letter), 1);
        let mut src = w.worker(0, 2);
        let mut counts = vec![0u32; w.op_names().len()];
        let n = 20_000;
        for _ in 0..n {
            let op = src.next_op();
            counts[op.op] += 1;
            let ok = matches!(
                (w.op_names()[op.op], op.action()),
                ("read", Some(Action::FindOne { .. }))
                    | ("update", Some(Action::UpdateOne { .. }))
                    | ("insert", Some(Action::InsertOne { .. }))
                    | ("scan", Some(Action::Find { .. }))
                    | ("read_modify_write", None)
            );
            assert!(ok, "{letter:?}: {op:?}");
        }
        w.op_names()
            .iter()
            .zip(counts)
            .map(|(n_, c)| (n_.to_string(), c as f64 / n as f64))
            .filter(|(_, s)| *s > 0.0)
            .collect()
    }

    #[test]
    fn each_core_workload_has_its_mix() {
        let close = |got: &[(String, f64)], expect: &[(&str, f64)]| {
            assert_eq!(got.len(), expect.len(), "{got:?}");
            for ((g, gs), (e, es)) in got.iter().zip(expect) {
                assert_eq!(g, e);
                assert!((gs - es).abs() < 0.015, "{got:?}");
            }
        };
        close(&shares(YcsbLetter::A), &[("read", 0.5), ("update", 0.5)]);
        close(&shares(YcsbLetter::B), &[("read", 0.95), ("update", 0.05)]);
        close(&shares(YcsbLetter::C), &[("read", 1.0)]);
        close(&shares(YcsbLetter::D), &[("read", 0.95), ("insert", 0.05)]);
        close(&shares(YcsbLetter::E), &[("insert", 0.05), ("scan", 0.95)]);
        close(
            &shares(YcsbLetter::F),
            &[("read", 0.5), ("read_modify_write", 0.5)],
        );
    }

    #[test]
    fn f_reads_then_updates_the_same_key_and_e_scans_up_to_100() {
        let w = build(&cfg(YcsbLetter::F), 1);
        assert_eq!(w.op_names(), ["read", "read_modify_write"]);
        assert_eq!(w.ops()[1].steps, [Arc::from("read"), Arc::from("update")]);
        let mut src = w.worker(0, 1);
        let rmw = loop {
            let op = src.next_op();
            if op.op == 1 {
                break op.requests().to_vec();
            }
        };
        let (Action::FindOne { filter: f1, .. }, Action::UpdateOne { filter: f2, .. }) =
            (&rmw[0].action, &rmw[1].action)
        else {
            panic!()
        };
        assert_eq!(f1, f2);
        assert_eq!((rmw[0].step, rmw[1].step), (0, 1));

        let w = build(&cfg(YcsbLetter::E), 1);
        let mut src = w.worker(0, 1);
        let mut lens = Vec::new();
        while lens.len() < 2000 {
            if let Action::Find { limit, sort, .. } = src.next_op().into_action().unwrap() {
                assert_eq!(sort, Some(doc! {"_id": 1}));
                lens.push(limit);
            }
        }
        assert!(lens.iter().all(|l| (1..=100).contains(l)));
        let mean = lens.iter().sum::<i64>() as f64 / lens.len() as f64;
        assert!((mean - 50.5).abs() < 3.0, "uniform lengths: mean {mean}");
    }

    #[test]
    fn d_reads_the_latest_records() {
        let w = build(&cfg(YcsbLetter::D), 1);
        let mut src = w.worker(0, 1);
        let recent: std::collections::HashSet<String> = (990..1000).map(key_name).collect();
        let (mut reads, mut hits) = (0, 0);
        for _ in 0..5000 {
            if let Action::FindOne { filter, .. } = src.next_op().into_action().unwrap() {
                reads += 1;
                // Inserts move the newest keys; count reads of the 10
                // loaded last or anything inserted since.
                let k = filter.get_str("_id").unwrap().to_string();
                let n = w.next_key().bound();
                if recent.contains(&k) || (1000..n).any(|i| key_name(i) == k) {
                    hits += 1;
                }
            }
        }
        // Under a uniform choice 1 % of reads would be this recent.
        assert!(hits as f64 / reads as f64 > 0.3, "{hits}/{reads}");
    }
}
