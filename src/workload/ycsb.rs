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

use std::sync::Arc;

use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{doc, Binary, Bson, Document};
use rand::rngs::SmallRng;
use rand::Rng;

use super::gen::{document_rng, fnv1a64, worker_rng, KeyGen, PadPool};
use super::{Action, Op, OpSource, OpSpec, PrepareStep, Request, WeightedPick, Workload};
use crate::cluster::Keys;
use crate::config::{YcsbConfig, YcsbFieldType};

const COLL: usize = 0;

/// The op labels, in the order of [`crate::config::YcsbLetter::proportions`].
const OPS: [&str; 5] = ["read", "update", "insert", "scan", "read_modify_write"];
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

#[derive(Debug)]
struct Shared {
    pad: PadPool,
    field_names: Vec<String>,
    field_length: usize,
    field_type: YcsbFieldType,
    max_scan: i64,
    /// Next record number to insert; also the number of records.
    next_key: Arc<Keys>,
    /// Key chooser, built once (zeta is O(record_count)) and cloned.
    keys: KeyGen,
    /// Set once the workload is audited: inserts note their record numbers.
    audit: std::sync::OnceLock<Arc<YcsbKeys>>,
    seed: u64,
}

impl Shared {
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
}

/// The `ycsb` workload.
#[derive(Debug)]
pub struct Ycsb {
    shared: Arc<Shared>,
    collections: Vec<String>,
    ops: Vec<OpSpec>,
    /// Op kind (index into [`OPS`]) of each op label.
    kinds: Vec<usize>,
    pick: WeightedPick,
    record_count: u64,
    load_batch: usize,
}

impl Ycsb {
    /// Builds the workload from validated parameters.
    pub fn new(cfg: &YcsbConfig, seed: u64) -> Result<Ycsb, String> {
        if cfg.field_count == 0 {
            return Err("field_count must be at least 1".into());
        }
        let props = cfg.workload.proportions();
        let kinds: Vec<usize> = (0..OPS.len()).filter(|&i| props[i] > 0.0).collect();
        let weights: Vec<f64> = kinds.iter().map(|&i| props[i]).collect();
        let pick = WeightedPick::new(&weights).ok_or("no operation has a positive proportion")?;
        let ops = kinds
            .iter()
            .map(|&i| match i {
                4 => OpSpec::with_steps(OPS[i], &RMW_STEPS),
                _ => OpSpec::single(OPS[i]),
            })
            .collect();
        Ok(Ycsb {
            shared: Arc::new(Shared {
                pad: PadPool::new(seed, PadPool::DEFAULT_SIZE),
                field_names: (0..cfg.field_count).map(|i| format!("field{i}")).collect(),
                field_length: cfg.field_length,
                field_type: cfg.field_type,
                max_scan: cfg.max_scan_length.max(1),
                next_key: Arc::new(Keys::new(cfg.record_count)),
                keys: KeyGen::new(cfg.distribution(), cfg.record_count),
                audit: std::sync::OnceLock::new(),
                seed,
            }),
            collections: vec![cfg.collection.clone()],
            ops,
            kinds,
            pick,
            record_count: cfg.record_count,
            load_batch: cfg.load_batch.max(1),
        })
    }

    /// The shared record counter (next insert's record number).
    pub fn next_key(&self) -> &Arc<Keys> {
        &self.shared.next_key
    }
}

impl Workload for Ycsb {
    fn kind(&self) -> &'static str {
        "ycsb"
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
            PrepareStep::Load {
                collection: COLL,
                count: self.record_count,
                batch: self.load_batch,
                make: Arc::new(move |i| {
                    let mut rng = document_rng(shared.seed, i);
                    shared.record(&mut rng, i)
                }),
            },
            PrepareStep::CountKeys {
                collection: COLL,
                counter: Arc::clone(&self.shared.next_key),
            },
        ]
    }

    fn keys(&self) -> Vec<&Keys> {
        vec![&self.shared.next_key]
    }

    fn audit_keys(&self) -> Arc<dyn crate::audit::AuditKeys> {
        self.shared.audit.get_or_init(Arc::default).clone()
    }

    fn worker(&self, worker_id: u32, seed: u64) -> Box<dyn OpSource> {
        Box::new(Source {
            shared: Arc::clone(&self.shared),
            keys: self.shared.keys.clone(),
            kinds: self.kinds.clone(),
            pick: self.pick.clone(),
            rng: worker_rng(seed, worker_id),
        })
    }
}

struct Source {
    shared: Arc<Shared>,
    keys: KeyGen,
    kinds: Vec<usize>,
    pick: WeightedPick,
    rng: SmallRng,
}

impl Source {
    fn existing_key(&mut self) -> String {
        let n = self.shared.next_key.bound();
        key_name(self.keys.next_key(&mut self.rng, n))
    }

    fn update(&mut self, key: String) -> Action {
        let s = &self.shared;
        let field = &s.field_names[self.rng.random_range(0..s.field_names.len())];
        let value = s.field(&mut self.rng);
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
        let op = self.pick.pick(&mut self.rng);
        let action = match self.kinds[op] {
            0 => Action::FindOne {
                collection: COLL,
                filter: doc! { "_id": self.existing_key() },
            },
            1 => {
                let key = self.existing_key();
                self.update(key)
            }
            2 => {
                let n = self.shared.next_key.next();
                if let Some(audit) = self.shared.audit.get() {
                    audit
                        .pending
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .insert(key_name(n), n);
                }
                Action::InsertOne {
                    collection: COLL,
                    doc: self.shared.record(&mut self.rng, n),
                }
            }
            3 => {
                let len = self.rng.random_range(1..=self.shared.max_scan);
                Action::Find {
                    collection: COLL,
                    filter: doc! { "_id": { "$gte": self.existing_key() } },
                    sort: Some(doc! { "_id": 1 }),
                    limit: len,
                    projection: None,
                }
            }
            _ => {
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
    use crate::config::YcsbLetter;
    use crate::workload::bson_len;

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
        let w = Ycsb::new(&cfg(YcsbLetter::A), 1).unwrap();
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
        let strings = Ycsb::new(
            &YcsbConfig {
                field_type: YcsbFieldType::String,
                ..cfg(YcsbLetter::A)
            },
            1,
        )
        .unwrap();
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
        let w = Ycsb::new(&cfg(YcsbLetter::E), 1).unwrap();
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
        let w = Ycsb::new(&cfg(letter), 1).unwrap();
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
        let w = Ycsb::new(&cfg(YcsbLetter::F), 1).unwrap();
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

        let w = Ycsb::new(&cfg(YcsbLetter::E), 1).unwrap();
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
        let w = Ycsb::new(&cfg(YcsbLetter::D), 1).unwrap();
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
