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
//! "string"` stores random characters instead). Inserts (D, E) take record
//! numbers from a counter shared by all workers, raised at prepare time to
//! the number of records present.
//!
//! **The bound.** Under `max_docs` (by default ten times `record_count`)
//! record `n` is stored under the key of slot `n mod max_docs`: past the
//! bound an insert deletes the record in its slot first (step `evict`),
//! then inserts (step `insert`), so the collection never holds more than
//! `max_docs` records, every slot below the records inserted is filled,
//! and a restart (counter = records present) goes on wrapping with no key
//! to find. Reads draw a record number as YCSB does and read its slot.

pub(crate) mod params;

pub use params::{YcsbConfig, YcsbFieldType, YcsbLetter, YcsbOp};

use std::sync::Arc;

use mongodb::bson::spec::BinarySubtype;
use mongodb::bson::{doc, Binary, Bson, Document};
use rand::rngs::SmallRng;
use rand::Rng;

use super::generators::{fnv1a64, KeyGen, PadPool};
use super::{Action, BoundedInserts, Built, Generator, Mix, Op, OpSource, OpSpec, Request, EVICT};

const COLL: usize = 0;

/// Read-modify-write's steps, in order.
const RMW_STEPS: [&str; 2] = ["read", "update"];

/// A bounded insert's steps, in order: the slot's old record goes first.
const BOUNDED_INSERT_STEPS: [&str; 2] = [EVICT, "insert"];

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
    /// Keys of requests generated and not yet sent → (slot, requests
    /// still to send: a bounded insert's eviction and insert name the
    /// same key).
    pending: std::sync::Mutex<std::collections::HashMap<String, (u64, u8)>>,
}

impl YcsbKeys {
    /// Notes that `uses` requests about to be sent name `key`, slot `n`.
    fn note(&self, key: String, n: u64, uses: u8) {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key, (n, uses));
    }
}

impl crate::workload::AuditKeys for YcsbKeys {
    fn ledger_id(&self, id: &Bson) -> Option<u64> {
        let mut pending = self
            .pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = id.as_str()?;
        let (n, uses) = pending.get_mut(key)?;
        let n = *n;
        *uses -= 1;
        if *uses == 0 {
            pending.remove(key);
        }
        Some(n)
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
    /// Record numbers: the next to insert is also the number of records
    /// inserted.
    inserts: BoundedInserts,
    /// `max_docs`: records are stored in slot `n mod slots`; 0: unbounded.
    slots: u64,
    /// Key chooser, built once (zeta is O(record_count)) and cloned per
    /// worker.
    keys: KeyGen,
    /// The operations of the core workload; the index is the `op`.
    mix: Mix<YcsbOp>,
    /// Set once the workload is audited: inserts note their record numbers.
    audit: std::sync::OnceLock<Arc<YcsbKeys>>,
}

impl Ycsb {
    /// Record `n`'s slot: its key number.
    fn slot(&self, n: u64) -> u64 {
        if self.slots == 0 {
            n
        } else {
            n % self.slots
        }
    }

    /// The insert of record `n` (operation `op`): under the bound, the
    /// slot's previous record is deleted first once there is one.
    fn insert(&self, op: usize, rng: &mut SmallRng, n: u64) -> Op {
        let slot = self.slot(n);
        let evict = self.slots > 0 && n >= self.slots;
        let key = key_name(slot);
        if let Some(audit) = self.audit.get() {
            audit.note(key.clone(), slot, 1 + u8::from(evict));
        }
        let delete = evict.then(|| Action::DeleteOne {
            collection: COLL,
            filter: doc! { "_id": key.clone() },
        });
        let insert = Action::InsertOne {
            collection: COLL,
            doc: self.record_with_key(rng, key),
        };
        match (self.slots, delete) {
            (0, _) => Op::one(op, insert),
            (_, None) => Op::steps(op, vec![Request::new(1, insert)]),
            (_, Some(delete)) => {
                Op::steps(op, vec![Request::new(0, delete), Request::new(1, insert)])
            }
        }
    }

    fn record(&self, rng: &mut SmallRng, n: u64) -> Document {
        self.record_with_key(rng, key_name(n))
    }

    fn record_with_key(&self, rng: &mut SmallRng, key: String) -> Document {
        let mut d = Document::new();
        d.insert("_id", key);
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
            YcsbOp::Insert if cfg.bound() > 0 => OpSpec {
                evict_step: Some(0),
                ..OpSpec::with_steps(op.label(), &BOUNDED_INSERT_STEPS)
            },
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
        slots: cfg.bound(),
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

    fn audit_keys(&self) -> Arc<dyn crate::workload::AuditKeys> {
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
        key_name(self.ycsb.slot(self.keys.next_key(&mut self.rng, n)))
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
                let n = y.inserts.next_key();
                return y.insert(op, &mut self.rng, n);
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
mod tests;
