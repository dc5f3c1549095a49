//! Tests of the workloads' own tables: each kind's parameters, the data a
//! plan grows, shard keys and the shard statistics' interval.

use super::*;

/// BASE with another kind and a parameter table.
fn with_kind(kind: &str, table: &str) -> String {
    BASE.replace(
        "kind = \"mixed\"\n",
        &format!("kind = \"{kind}\"\n{table}\n"),
    )
}

#[test]
fn every_kind_parses_with_its_table_and_defaults() {
    for &kind in KindConfig::NAMES {
        // A custom workload needs its operations; every other kind has
        // defaults for everything.
        let table = if kind == "custom" {
            "[[workloads.custom.operations]]\nop = \"count\""
        } else {
            ""
        };
        let c = parse(&with_kind(kind, table)).unwrap();
        assert_eq!(c.workloads[0].kind.name(), kind);
        if kind != "custom" {
            assert_eq!(
                Some(&c.workloads[0].kind),
                KindConfig::with_defaults(kind).as_ref()
            );
        }
        assert!(c.describe().contains(&format!("kind: {kind}")));
    }
    let c = parse(&with_kind(
        "sysbench",
        "[workloads.sysbench]\ncollections = 4\nread_only = true",
    ))
    .unwrap();
    let KindConfig::Sysbench(p) = &c.workloads[0].kind else {
        panic!("{:?}", c.workloads[0].kind)
    };
    assert_eq!(
        (p.collections, p.docs_per_collection, p.read_only),
        (4, 10_000, true)
    );
    assert!(c.describe().contains("sbtest1..4"), "{}", c.describe());
    let c = parse(&with_kind("ycsb", "[workloads.ycsb]\nworkload = \"d\"")).unwrap();
    assert!(matches!(&c.workloads[0].kind, KindConfig::Ycsb(p) if p.workload == YcsbLetter::D));
    let c = parse(&with_kind(
        "name-num",
        "[workloads.name_num]\nmode = \"insert-query\"",
    ))
    .unwrap();
    assert!(matches!(
        &c.workloads[0].kind,
        KindConfig::NameNum(p) if p.mode == NameNumMode::InsertQuery
    ));
}

#[test]
fn workload_tables_are_validated_with_their_key() {
    err_at(
        &with_kind("sysbench", "[workloads.mixed]\nfind = 1"),
        "workloads[0].mixed",
    );
    err_at(
        &with_kind("sysbench", "[workloads.sysbench]\ncollections = 0"),
        "workloads[0].sysbench.collections",
    );
    err_at(
        &with_kind("sysbench", "[workloads.sysbench]\ncolections = 3"),
        "workloads[0].sysbench.colections",
    );
    err_at(
        &with_kind(
            "insert-benchmark",
            "[workloads.insert_benchmark]\nmax_docs = 10\nbatch_size = 100",
        ),
        "workloads[0].insert_benchmark.max_docs",
    );
    err_at(
        &with_kind("ycsb", "[workloads.ycsb]\nworkload = \"G\""),
        "workloads[0].ycsb.workload",
    );
    err_at(
        &with_kind("large-doc", "[workloads.large_doc]\ndoc_size = 10"),
        "workloads[0].large_doc.doc_size",
    );
    err_at(
        &with_kind("custom", "[workloads.custom]\ncollection = \"c\""),
        "workloads[0].custom.operations",
    );
    let msg = err_at(
        &with_kind(
            "custom",
            "[[workloads.custom.operations]]\nop = \"find\"\nfilter = { x = { \"$gen\" = \"nope\" } }",
        ),
        "workloads[0].custom.operations[0].filter.x.$gen",
    );
    assert!(msg.contains("unknown generator \"nope\""), "{msg}");
    err_at(
        &with_kind(
            "custom",
            "[[workloads.custom.operations]]\nop = \"find\"\n[[workloads.custom.operations]]\nop = \"find\"",
        ),
        "workloads[0].custom.operations[1].name",
    );
}

#[test]
fn a_huge_ycsb_field_length_is_rejected_not_an_overflow() {
    let text = "[target]\nuri = \"mongodb://db1\"\n[[workloads]]\nname = \"y\"\nkind = \"ycsb\"\n\
                [workloads.ycsb]\nfield_count = 10\nfield_length = 9223372036854775807\n\
                [[workloads.stages]]\nrate = 10\nduration = \"1m\"\n";
    let msg = err_at(text, "workloads[0].ycsb.field_length");
    assert!(msg.contains("8MiB"), "{msg}");
}

/// `check-config`'s data line and warning: the shipped soak without a
/// bound grows about 22 GiB a day at 100 ops/s and is warned about when it
/// repeats; with the default bound it settles; a plan that ends is not
/// warned about.
#[test]
fn unbounded_growth_in_a_repeating_plan_is_warned_about() {
    let plan = |max_docs: &str, repeat: bool| {
        parse(&format!(
            "[target]\nuri = \"mongodb://h\"\n[[workloads]]\nname = \"soak\"\nkind = \"mixed\"\n\
             repeat = {repeat}\n[workloads.mixed]\ninitial_docs = 10000\n{max_docs}\n\
             [[workloads.stages]]\nrate = 100\nduration = \"1h\"\n"
        ))
        .unwrap()
    };
    let unbounded = plan("max_docs = 0", true);
    let warnings = unbounded.growth_warnings();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(
        warnings[0].contains("grows about 21.9 GiB a day") && warnings[0].contains("max_docs"),
        "{warnings:?}"
    );
    assert!(unbounded
        .describe()
        .contains("  data: grows about 21.9 GiB a day"));
    let bounded = plan("", true);
    assert!(bounded.growth_warnings().is_empty());
    assert!(
        bounded
            .describe()
            .contains("  data: about 7.25 GiB at steady state, bounded by max_docs"),
        "{}",
        bounded.describe()
    );
    assert!(plan("max_docs = 0", false).growth_warnings().is_empty());
    // Below initial_docs a bound makes no sense.
    assert!(parse(
        "[target]\nuri = \"mongodb://h\"\n[[workloads]]\nname = \"w\"\nkind = \"mixed\"\n\
         [workloads.mixed]\ninitial_docs = 100\nmax_docs = 10\n\
         [[workloads.stages]]\nrate = 1\nduration = \"1s\"\n"
    )
    .is_err());
}

/// `shard_key` and `presplit` as a file gives them: read in order,
/// checked with the file, key and reason, described by `check-config`, and
/// the ranged key that the kind's inserts only grow warned about (derived
/// from the kind, not the field's name: YCSB's hashed `_id` is not).
#[test]
fn shard_keys_are_validated_described_and_warned_about() {
    let one = |kind: &str, keys: &str| load_one("", &format!("kind = \"{kind}\"\n{keys}"));
    let hashed = one("mixed", "shard_key = { _id = \"hashed\" }\npresplit = 8").unwrap();
    let text = hashed.describe();
    assert!(
        text.contains("  sharding: every collection on { _id: \"hashed\" }, 8 initial chunks"),
        "{text}"
    );
    assert!(hashed.shard_warnings().is_empty());

    let compound = one("mixed", "shard_key = { k = 1, _id = 1 }").unwrap();
    assert_eq!(
        compound.workloads[0]
            .shard_key
            .as_ref()
            .unwrap()
            .to_string(),
        "{ k: 1, _id: 1 }"
    );
    // `k` is random: no warning.
    assert!(compound.shard_warnings().is_empty());

    let ranged = one("insert-benchmark", "shard_key = { _id = 1 }").unwrap();
    let w = ranged.shard_warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("\"a\"") && w[0].contains("only grow"),
        "{w:?}"
    );
    let split = one(
        "mixed",
        "shard_key = { _id = 1 }\npresplit = 4\n[workloads.mixed]\ninitial_docs = 1000\nmax_docs = 1000",
    )
    .unwrap();
    assert_eq!(
        split.workloads[0].shard_plan().unwrap().unwrap().presplit,
        crate::workload::shard::Presplit::Ranged(vec![250, 500, 750])
    );
    assert!(one("ycsb", "shard_key = { _id = 1 }")
        .unwrap()
        .shard_warnings()
        .is_empty());

    for (keys, key, reason) in [
        ("presplit = 4", "presplit", "needs shard_key"),
        (
            "shard_key = { _id = \"hashed\", k = \"hashed\" }",
            "shard_key",
            "one hashed field",
        ),
        ("shard_key = { _id = -1 }", "shard_key._id", "got -1"),
        (
            "shard_key = { _id = 1 }\npresplit = 0",
            "presplit",
            "at least 1",
        ),
    ] {
        let e = one("mixed", keys).unwrap_err();
        assert!(
            e.contains("t.toml") && e.contains(key) && e.contains(reason),
            "{keys}: {e}"
        );
    }
    let e = one("ycsb", "shard_key = { _id = 1 }\npresplit = 4").unwrap_err();
    assert!(e.contains("no known integer range"), "{e}");
}

#[test]
fn shard_stats_interval_is_off_or_at_least_a_second() {
    let c = parse(BASE).unwrap();
    assert_eq!(c.target.shard_stats_interval, SHARD_STATS_INTERVAL);
    let with = |v: &str| {
        BASE.replace(
            "[target]",
            &format!("[target]\nshard_stats_interval = \"{v}\""),
        )
    };
    assert!(parse(&with("0s"))
        .unwrap()
        .target
        .shard_stats_interval
        .is_zero());
    assert_eq!(
        parse(&with("5s")).unwrap().target.shard_stats_interval,
        Duration::from_secs(5)
    );
    let msg = err_at(&with("100ms"), "target.shard_stats_interval");
    assert!(msg.contains("at least 1s"), "{msg}");
    err_at(&with("often"), "target.shard_stats_interval");
}
