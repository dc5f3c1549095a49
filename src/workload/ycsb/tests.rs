//! The `ycsb` kind's generator on plain values.

use super::*;
use crate::workload::kind_trait::Kind;
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
        let Some(a @ Action::InsertOne { .. }) = inserted(&op) else {
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

/// An operation's insert request: the only one of an unbounded insert,
/// the last of a bounded one.
fn inserted(op: &Op) -> Option<&Action> {
    op.action()
        .or_else(|| op.requests().last().map(|r| &r.action))
        .filter(|a| matches!(a, Action::InsertOne { .. }))
}

#[test]
fn d_and_e_are_bounded_by_default_and_wrap_into_the_oldest_slot() {
    use crate::audit::{ids::effect, Effect, Ids};
    let small = YcsbConfig {
        max_docs: Some(1000),
        ..cfg(YcsbLetter::E)
    };
    assert_eq!(cfg(YcsbLetter::E).bound(), 10_000);
    assert_eq!(cfg(YcsbLetter::D).bound(), 10_000);
    assert_eq!(cfg(YcsbLetter::A).bound(), 0, "A never inserts");
    let w = build(&small, 1);
    let spec = &w.ops()[w.op_names().iter().position(|n| *n == "insert").unwrap()];
    assert_eq!(spec.evict_step, Some(0));
    assert_eq!(&*spec.steps[0], EVICT);
    let keys = w.audit_keys();
    let mut src = w.worker(0, 2);
    // record_count = max_docs: the first insert (record 1000) replaces
    // record 0 in slot 0, the eviction first.
    let op = loop {
        let op = src.next_op();
        if inserted(&op).is_some() {
            break op;
        }
    };
    let [evict, insert] = op.requests() else {
        panic!("{op:?}")
    };
    assert_eq!((evict.step, insert.step), (0, 1));
    assert_eq!(
        evict.action,
        Action::DeleteOne {
            collection: 0,
            filter: doc! {"_id": key_name(0)}
        }
    );
    let Action::InsertOne { doc, .. } = &insert.action else {
        panic!()
    };
    assert_eq!(doc.get_str("_id").unwrap(), key_name(0));
    // The audit stops checking slot 0 at the eviction and checks it again
    // once the insert is acknowledged.
    assert_eq!(
        effect(&evict.action, keys.as_ref()),
        Effect::Delete {
            collection: 0,
            ids: Ids::One(0)
        }
    );
    assert_eq!(
        effect(&insert.action, keys.as_ref()),
        Effect::Insert {
            collection: 0,
            ids: Ids::One(0)
        }
    );
    // Reads and scans only name slots below the bound.
    let slots: std::collections::HashSet<String> = (0..1000).map(key_name).collect();
    for _ in 0..2000 {
        let op = src.next_op();
        let filter = match op.action() {
            Some(Action::Find { filter, .. }) => filter.get_document("_id").unwrap().clone(),
            _ => continue,
        };
        assert!(slots.contains(filter.get_str("$gte").unwrap()), "{filter}");
    }
    assert!(w.next_key().bound() > 1050, "the inserts went on");

    // 0: unbounded, as YCSB itself: one request, a fresh key.
    let w = build(
        &YcsbConfig {
            max_docs: Some(0),
            ..cfg(YcsbLetter::E)
        },
        1,
    );
    let mut src = w.worker(0, 1);
    let op = loop {
        let op = src.next_op();
        if inserted(&op).is_some() {
            break op;
        }
    };
    let Some(Action::InsertOne { doc, .. }) = op.action() else {
        panic!("{op:?}")
    };
    assert_eq!(doc.get_str("_id").unwrap(), key_name(1000));
}

#[test]
fn a_bound_below_record_count_is_refused() {
    let err = YcsbConfig {
        max_docs: Some(999),
        ..cfg(YcsbLetter::D)
    }
    .validate()
    .unwrap_err();
    assert_eq!(err.key, "max_docs");
    assert!(err.to_string().contains("record_count 1000"), "{err}");
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
            (w.op_names()[op.op], op.action().or(inserted(&op))),
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
        if let Some(Action::Find { limit, sort, .. }) = src.next_op().into_action() {
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
        if let Some(Action::FindOne { filter, .. }) = src.next_op().into_action() {
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
