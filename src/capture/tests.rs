//! Unit tests of `capture`'s pure parts, on real mongod logs.
//!
//! Fixtures (tests/fixtures/mongod-log/, see PROVENANCE.md there): lines of
//! mongod's own structured log taken unmodified from
//! https://github.com/simagix/hatchet (Apache License 2.0, Copyright
//! 2022-present Kuei-chun Chen) at commit
//! c109eedfbb6b466be2ea23850796cfc9c80d2234:
//! - `hatchet-sample-slice.log`: `logs/sample-mongod.log.gz` lines
//!   12001–12250 (mongod 7.0, slowms = 0, a Keyhole-driven load);
//! - `hatchet-sample-rare.log`: `logs/sample-mongod.log.gz`, its first
//!   `distinct`, `find` on testdb.vehicles and `aggregate` entries;
//! - `hatchet-slowops-test.log`: the log lines `slowops_test.go` parses.

use serde_json::{json, Value};

use super::log::{parse_line, Line};
use super::render::{self, plan_keys, Options};
use super::shape::{statements, Skip};
use super::*;
use crate::workload::custom::CustomOpKind;

const SLICE: &str = include_str!("../../tests/fixtures/mongod-log/hatchet-sample-slice.log");
const RARE: &str = include_str!("../../tests/fixtures/mongod-log/hatchet-sample-rare.log");
const SLOWOPS: &str = include_str!("../../tests/fixtures/mongod-log/hatchet-slowops-test.log");

fn opts() -> Options {
    Options {
        source: "test.log".into(),
        scale: 1.0,
        keep_literals: false,
        database: None,
        duration: "1h".into(),
        initial_docs: 100,
    }
}

fn slow(line: &str) -> log::SlowQuery {
    match parse_line(line) {
        Line::Slow(e) => *e,
        other => panic!("{other:?}"),
    }
}

/// Loads a rendered config as `mongoload run` would.
fn load(config: &str) -> Result<crate::config::Config, crate::config::ConfigError> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("captured.toml");
    std::fs::write(&p, config).unwrap();
    crate::config::load(&p)
}

#[test]
fn real_logs_parse_without_error() {
    for (name, text) in [("slice", SLICE), ("rare", RARE), ("slowops", SLOWOPS)] {
        let c = Capture::read(text, "mongoload");
        assert_eq!(c.bad_total, 0, "{name}: {:?}", c.bad);
        assert_eq!(c.entries as usize, text.lines().count(), "{name}");
        assert!(c.span_secs().is_some(), "{name}");
    }
    let e = slow(SLICE.lines().next().unwrap());
    assert_eq!(e.t_ms, Some(1_695_500_792_349));
    assert!(matches!(parse_line("not json"), Line::Bad(_)));
    assert!(matches!(parse_line(r#"{"t":1}"#), Line::Bad(_)));
    assert_eq!(
        parse_line(
            r#"{"t":{"$date":"2023-09-23T16:24:35.756-04:00"},"s":"I","c":"CONTROL","id":23285,"ctx":"-","msg":"x"}"#
        ),
        Line::Other
    );
}

#[test]
fn write_statements_count_once_and_unsupported_entries_are_named() {
    let c = Capture::read(SLICE, "mongoload");
    // Per statement: the update/remove entries; their command envelopes
    // are skipped, not counted twice.
    let by_op = |op: CustomOpKind| -> u64 {
        c.groups
            .iter()
            .filter(|g| g.stmt.op == op)
            .map(|g| g.count)
            .sum()
    };
    assert_eq!(by_op(CustomOpKind::Update), 33);
    assert_eq!(by_op(CustomOpKind::Delete), 32);
    assert_eq!(by_op(CustomOpKind::Insert), 32);
    assert_eq!(by_op(CustomOpKind::Find), 32);
    assert_eq!(c.skipped[&Skip::WriteEnvelope], 63);
    assert_eq!(
        c.skipped[&Skip::Unsupported("command listIndexes".into())],
        18
    );
    assert_eq!(c.skipped[&Skip::SystemNamespace], 20);
    // A database command (ns without a collection) is named, not "system".
    assert_eq!(c.skipped[&Skip::Unsupported("command dbStats".into())], 2);
    let counted: u64 =
        c.groups.iter().map(|g| g.count).sum::<u64>() + c.skipped.values().sum::<u64>();
    assert_eq!(counted, c.entries, "every entry is counted or skipped");

    let c = Capture::read(SLOWOPS, "mongoload");
    assert_eq!(c.skipped[&Skip::CursorContinuation], 2);
    assert_eq!(
        c.skipped[&Skip::Unsupported("aggregate with $collStats".into())],
        1
    );
    assert!(c.skipped[&Skip::SystemNamespace] >= 3);
    // Its aggregate ($match, $group, $sort, $project) is captured.
    let agg = c
        .groups
        .iter()
        .find(|g| g.stmt.op == CustomOpKind::Aggregate)
        .unwrap();
    assert_eq!(agg.stmt.coll, "hatchet");
}

#[test]
fn own_traffic_is_skipped_by_app_name() {
    let c = Capture::read(RARE, "mongosh");
    assert_eq!(c.skipped[&Skip::OwnTraffic], 3);
    let c = Capture::read(RARE, "mongoload");
    assert!(!c.skipped.contains_key(&Skip::OwnTraffic));
}

#[test]
fn one_shape_per_structure_literals_become_typed_slots() {
    let line = |filter: &str| {
        format!(
            r#"{{"t":{{"$date":"2024-01-01T00:00:00Z"}},"id":51803,"attr":{{"type":"command","ns":"shop.orders","command":{{"find":"orders","filter":{filter},"sort":{{"at":-1}},"limit":10,"$db":"shop"}},"durationMillis":3}}}}"#
        )
    };
    let shape = |filter: &str| {
        let s = statements(&slow(&line(filter)), "mongoload").unwrap();
        assert_eq!(s.len(), 1);
        s.into_iter().next().unwrap()
    };
    let a = shape(r#"{"customer":17,"status":{"$in":["new","paid"]}}"#);
    let b = shape(r#"{"customer":99,"status":{"$in":["shipped"]}}"#);
    assert_eq!(a.key(), b.key());
    assert_eq!(a.obs.len(), 2);
    assert_eq!(a.limit, Some(10));
    // Another type, another shape.
    assert_ne!(
        shape(r#"{"customer":"x","status":{"$in":["a"]}}"#).key(),
        a.key()
    );
    // _id draws an existing document's.
    assert_eq!(
        shape(r#"{"_id":{"$oid":"650f3c2b9d1e8a0012345678"}}"#).id_slots,
        [0]
    );
    // Values TOML cannot hold make the shape unsupported, named.
    let e = statements(&slow(&line(r#"{"deletedAt":null}"#)), "mongoload").unwrap_err();
    assert_eq!(
        e,
        Skip::Unsupported("null values (TOML has no null)".into())
    );

    let mut c = Capture::new("mongoload");
    c.add(&slow(&line(
        r#"{"customer":17,"status":{"$in":["new","paid"]}}"#,
    )));
    c.add(&slow(&line(
        r#"{"customer":99,"status":{"$in":["shipped"]}}"#,
    )));
    let g = &c.groups[0];
    assert_eq!(g.count, 2);
    assert_eq!(g.slots[0], SlotStats::Int { min: 17, max: 99 });
    assert_eq!(
        render::generator(&g.slots[0]),
        json!({ "$gen": "uniform", "min": 17, "max": 100 })
    );
    assert_eq!(
        render::generator(&g.slots[1]),
        json!({ "$gen": "array", "of": { "$gen": "string", "length": 5 }, "min": 1, "max": 2 })
    );
}

#[test]
fn pipelines_keep_structure_and_draw_match_values() {
    let l = r#"{"t":{"$date":"2024-01-01T00:00:00Z"},"id":51803,"attr":{"type":"command","ns":"shop.orders","command":{"aggregate":"orders","pipeline":[{"$match":{"status":"paid","total":{"$gte":10}}},{"$group":{"_id":"$customer","n":{"$sum":1}}},{"$sort":{"n":-1}},{"$limit":5},{"$project":{"tag":"secret-label"}}],"cursor":{},"$db":"shop"},"durationMillis":3}}"#;
    let s = statements(&slow(l), "mongoload").unwrap().remove(0);
    let p = &s.skeleton["pipeline"];
    assert_eq!(
        p[1],
        json!({ "$group": { "_id": "$customer", "n": { "$sum": 1 } } })
    );
    assert_eq!(p[3], json!({ "$limit": 5 }));
    // $match values and literal strings outside it draw.
    assert_eq!(s.obs.len(), 3);
    assert!(!Value::Array(vec![p.clone()])
        .to_string()
        .contains("secret-label"));
}

#[test]
fn plan_summaries_give_index_keys() {
    assert_eq!(
        plan_keys("IXSCAN { color: 1, brand: -1 }"),
        [json!({ "color": 1, "brand": -1 })
            .as_object()
            .unwrap()
            .clone()]
    );
    assert_eq!(plan_keys("IXSCAN { a: 1 }, IXSCAN { b: 1 }").len(), 2);
    assert!(plan_keys("COLLSCAN").is_empty());
    assert!(plan_keys("IDHACK").is_empty());
}

#[test]
fn the_config_loads_with_weights_and_rate_from_the_log() {
    let c = Capture::read(SLICE, "mongoload");
    let out = render::render(
        &c,
        &Options {
            scale: 2.0,
            ..opts()
        },
    )
    .unwrap();
    let cfg = load(&out.config).unwrap_or_else(|e| panic!("{e}\n{}", out.config));
    assert_eq!(cfg.target.database, "testdb");
    assert_eq!(cfg.workloads.len(), 1);
    let w = &cfg.workloads[0];
    let span = c.span_secs().unwrap();
    let Some(crate::config::LevelSpec::Hold(rate)) = w.stages[0].rate else {
        panic!("{:?}", w.stages[0].rate)
    };
    let want = 129.0 / span * 2.0;
    assert!((rate - want).abs() / want < 0.001, "{rate} vs {want}");
    let text = &out.config;
    assert!(text.contains("weight = 33"), "{text}");
    assert!(text.contains("keys = { email = 1 }"), "{text}");
    assert!(out.summary.contains("unsupported: command listIndexes"));
    assert!(text.contains("#        18  unsupported: command listIndexes"));
}

/// Every string literal of the capture's operations.
fn literals(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    fn walk(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) if s.len() > 3 && !s.starts_with('$') => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| walk(x, out)),
            Value::Object(o) => o.values().for_each(|x| walk(x, out)),
            _ => {}
        }
    }
    for l in text.lines() {
        if let Line::Slow(e) = parse_line(l) {
            let c = &e.command;
            for k in ["filter", "q", "u", "query", "pipeline"] {
                if let Some(v) = c.get(k) {
                    walk(v, &mut out);
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[test]
fn no_observed_value_reaches_the_config_unless_asked() {
    for text in [SLICE, RARE] {
        let lits = literals(text);
        assert!(!lits.is_empty());
        let c = Capture::read(text, "mongoload");
        let out = render::render(&c, &opts()).unwrap();
        for l in &lits {
            assert!(
                !out.config.contains(&format!("\"{l}\"")),
                "{l} leaked into\n{}",
                out.config
            );
        }
        let kept = render::render(
            &c,
            &Options {
                keep_literals: true,
                ..opts()
            },
        )
        .unwrap();
        assert!(
            lits.iter()
                .any(|l| kept.config.contains(&format!("\"{l}\""))),
            "--keep-literals keeps them"
        );
        load(&kept.config).unwrap_or_else(|e| panic!("{e}\n{}", kept.config));
    }
}

#[test]
fn a_log_without_operations_or_time_is_an_error_naming_why() {
    let one = SLICE.lines().next().unwrap();
    let c = Capture::read(one, "mongoload");
    let e = render::render(&c, &opts()).unwrap_err();
    assert!(e.contains("span no time"), "{e}");
    let collstats = RARE.lines().find(|l| l.contains("$collStats")).unwrap();
    let c = Capture::read(collstats, "mongoload");
    let e = render::render(&c, &opts()).unwrap_err();
    assert!(
        e.contains("skipped: 1 unsupported: aggregate with $collStats"),
        "{e}"
    );
    let c = Capture::read("", "mongoload");
    assert!(render::render(&c, &opts()).is_err());
    let c = Capture::read(SLICE, "mongoload");
    let e = render::render(
        &c,
        &Options {
            scale: 0.0,
            ..opts()
        },
    )
    .unwrap_err();
    assert!(e.contains("--scale"), "{e}");
}

#[test]
fn dates_draw_relative_to_now_as_far_back_as_seen() {
    let line = |d: &str| {
        format!(
            r#"{{"t":{{"$date":"2024-01-02T00:00:00Z"}},"id":51803,"attr":{{"type":"command","ns":"shop.orders","command":{{"find":"orders","filter":{{"at":{{"$gte":{{"$date":"{d}"}}}},"owner":{{"$oid":"650f3c2b9d1e8a0012345678"}}}},"$db":"shop"}},"durationMillis":3}}}}"#
        )
    };
    let mut c = Capture::new("mongoload");
    c.add(&slow(&line("2024-01-01T12:00:00Z")));
    c.add(&slow(&line("2024-01-01T00:00:00Z")));
    let g = &c.groups[0];
    assert_eq!(g.count, 2);
    assert_eq!(
        render::generator(&g.slots[0]),
        json!({ "$gen": "date", "within": "1day" })
    );
    assert_eq!(
        render::generator(&g.slots[1]),
        json!({ "$gen": "objectid" })
    );
}

#[test]
fn databases_other_than_the_captured_one_are_named() {
    let c = Capture::read(SLOWOPS, "mongoload");
    let out = render::render(&c, &opts()).unwrap();
    assert!(out.config.contains("database = \"demo\""), "{}", out.config);
    assert!(
        out.summary
            .contains("other databases (not captured): edu (1)"),
        "{}",
        out.summary
    );
    let edu = render::render(
        &c,
        &Options {
            database: Some("edu".into()),
            ..opts()
        },
    )
    .unwrap();
    assert!(edu.config.contains("database = \"edu\""), "{}", edu.config);
    load(&edu.config).unwrap_or_else(|e| panic!("{e}\n{}", edu.config));
    let e = render::render(
        &c,
        &Options {
            database: Some("nope".into()),
            ..opts()
        },
    )
    .unwrap_err();
    assert!(e.contains("nope"), "{e}");
}

#[test]
fn documents_an_insert_carries_give_the_size_and_reading_streams() {
    let l = |t: &str| {
        format!(
            r#"{{"t":{{"$date":"{t}"}},"id":51803,"attr":{{"type":"command","ns":"shop.orders","command":{{"insert":"orders","documents":[{{"_id":1,"name":"abcdefghij"}}],"$db":"shop"}},"ninserted":1,"durationMillis":1}}}}"#
        )
    };
    let text = format!(
        "{}\n{}\n",
        l("2024-01-01T00:00:00Z"),
        l("2024-01-01T00:00:10Z")
    );
    let c = Capture::read_from(std::io::Cursor::new(text.as_bytes()), "mongoload").unwrap();
    // {_id: int32 1, name: "abcdefghij"}: 4 + (1+4+4) + (1+5+4+11) + 1.
    assert_eq!(c.groups[0].doc_sizes, [35, 35]);
    let out = render::render(&c, &opts()).unwrap();
    assert!(out.config.contains("doc_size = 35"), "{}", out.config);
    // The insert's own template: the document's shape, its value drawn.
    assert!(
        out.config
            .contains("document = { name = { \"$gen\" = \"string\", length = 10 } }"),
        "{}",
        out.config
    );
    assert!(!out.config.contains("abcdefghij"), "{}", out.config);
    assert!(out.config.contains("rate = 0.2000"), "{}", out.config);
    load(&out.config).unwrap_or_else(|e| panic!("{e}\n{}", out.config));
}

#[test]
fn write_commands_logged_without_statements_are_warned_about() {
    // The slice's update/delete envelopes have their statements: no warning.
    let c = Capture::read(SLICE, "mongoload");
    let out = render::render(&c, &opts()).unwrap();
    assert!(!out.summary.contains("warning"), "{}", out.summary);
    // Without the statement entries, the envelopes alone are named.
    let only_envelopes: String = SLICE
        .lines()
        .filter(|l| !l.contains(r#""type":"update""#) && !l.contains(r#""type":"remove""#))
        .map(|l| format!("{l}\n"))
        .collect();
    let c = Capture::read(&only_envelopes, "mongoload");
    let out = render::render(&c, &opts()).unwrap();
    assert!(
        out.summary
            .contains("update commands on testdb.__examples were logged without a statement"),
        "{}",
        out.summary
    );
    assert!(out.config.contains("# Warning: "), "{}", out.config);
}

#[test]
fn a_group_on_null_is_a_group_on_a_constant() {
    let l = r#"{"t":{"$date":"2024-01-01T00:00:00Z"},"id":51803,"attr":{"type":"command","ns":"shop.orders","command":{"aggregate":"orders","pipeline":[{"$group":{"_id":null,"n":{"$sum":"$total"}}}],"cursor":{},"$db":"shop"},"durationMillis":3}}"#;
    let s = statements(&slow(l), "mongoload").unwrap().remove(0);
    assert_eq!(
        s.skeleton["pipeline"][0],
        json!({ "$group": { "_id": 0, "n": { "$sum": "$total" } } })
    );
}

#[test]
fn a_replacement_runs_as_a_set_of_its_fields() {
    let l = r#"{"t":{"$date":"2024-01-01T00:00:00Z"},"id":51803,"attr":{"type":"update","ns":"hr.employees","command":{"q":{"_id":7},"u":{"_id":7,"name":"Ann","grade":3},"multi":false,"upsert":false},"durationMillis":1}}"#;
    let s = statements(&slow(l), "mongoload").unwrap().remove(0);
    assert_eq!(s.op, CustomOpKind::Update);
    assert_eq!(s.skeleton["update"]["$set"].as_object().unwrap().len(), 2);
    assert!(s.dropped[0].starts_with("replacement"), "{:?}", s.dropped);
    assert!(!s
        .skeleton
        .to_owned()
        .values()
        .any(|v| v.to_string().contains("Ann")));
}

/// A `system.profile` entry for an update statement, written by hand
/// after the fields of MongoDB's "Database Profiler Output" page (no real
/// profiler fixture is in the repository yet): read as the log line of
/// the same statement would be.
#[test]
fn a_profiler_entry_reads_as_its_log_line() {
    use mongodb::bson::{doc, DateTime};
    let entry = doc! {
        "op": "update",
        "ns": "shop.orders",
        "command": { "q": { "_id": 7 }, "u": { "$inc": { "n": 1 } }, "multi": false, "upsert": false },
        "keysExamined": 1, "docsExamined": 1, "nMatched": 1, "nModified": 1,
        "millis": 3,
        "planSummary": "IDHACK",
        "ts": DateTime::from_millis(1_700_000_000_000),
        "client": "10.0.0.7",
        "appName": "shop-api",
        "allUsers": [], "user": "",
    };
    let q = super::profile::to_slow_query(&entry).unwrap();
    assert_eq!(q.kind, "update");
    assert_eq!(q.ns, "shop.orders");
    assert_eq!(q.t_ms, Some(1_700_000_000_000));
    assert_eq!(q.duration_ms, 3.0);
    assert_eq!(q.app_name.as_deref(), Some("shop-api"));
    assert_eq!(q.plan_summary.as_deref(), Some("IDHACK"));
    assert_eq!(q.command["u"]["$inc"]["n"], 1);
    let stmts = super::shape::statements(&q, "mongoload").unwrap();
    assert_eq!(stmts.len(), 1);
    assert_eq!(stmts[0].op.as_str(), "update");

    let find = doc! { "op": "query", "ns": "shop.orders", "command": { "find": "orders", "filter": { "a": 1 } }, "nreturned": 4, "millis": 0_i64 };
    let q = super::profile::to_slow_query(&find).unwrap();
    assert_eq!((q.kind.as_str(), q.nreturned), ("command", Some(4)));
    // mongoload's own traffic is skipped by its appName, as in a log.
    let own = doc! { "op": "query", "ns": "shop.orders", "appName": "mongoload-capture", "command": { "find": "orders" } };
    let q = super::profile::to_slow_query(&own).unwrap();
    assert_eq!(
        super::shape::statements(&q, "mongoload").unwrap_err(),
        super::shape::Skip::OwnTraffic
    );
    assert!(super::profile::to_slow_query(&doc! { "op": "query" }).is_none());
}

#[test]
fn profiler_windows() {
    use super::profile::{parse_time, Window};
    let now = 1_700_000_000_000;
    assert_eq!(parse_time("15m", now), Ok(now - 900_000));
    assert_eq!(
        parse_time("2023-11-14T22:13:20Z", now),
        Ok(1_700_000_000_000)
    );
    let e = parse_time("yesterday", now).unwrap_err();
    assert!(e.contains("RFC 3339"), "{e}");
    let w = Window {
        since_ms: Some(1),
        until_ms: Some(2),
        last: None,
    };
    let f = w.filter();
    let ts = f.get_document("ts").unwrap();
    assert_eq!(ts.get_datetime("$gte").unwrap().timestamp_millis(), 1);
    assert_eq!(ts.get_datetime("$lt").unwrap().timestamp_millis(), 2);
    assert!(Window::default().filter().is_empty());
}

/// Binary values (YCSB's fields) are captured as their length, never
/// their bytes, in both extended-JSON forms.
#[test]
fn binary_values_draw_random_bytes_of_the_observed_length() {
    let line = |b64: &str| {
        format!(
            r#"{{"t":{{"$date":"2024-01-01T00:00:00.000+00:00"}},"s":"I","c":"WRITE","id":51803,"ctx":"conn1","msg":"Slow query","attr":{{"type":"update","ns":"db.usertable","command":{{"q":{{"_id":"user1"}},"u":{{"$set":{{"field3":{{"$binary":{{"base64":"{b64}","subType":"0"}}}}}}}},"multi":false,"upsert":false}},"durationMillis":0}}}}"#
        )
    };
    let text = [line("AAECAwQFBgcICQ=="), line("AAECAwQFBgcICQoL")].join("\n");
    let mut c = Capture::read(&text, "mongoload");
    c.last_ms = Some(1_704_067_201_000);
    assert_eq!(c.groups.len(), 1, "{:?}", c.skipped);
    let g = &c.groups[0];
    assert_eq!(g.stmt.obs[1].type_name(), "binary");
    assert_eq!(
        render::generator(&g.slots[1]),
        json!({ "$gen": "binary", "length": 11 })
    );
    let legacy = r#"{"t":{"$date":"2024-01-01T00:00:00.000+00:00"},"s":"I","c":"WRITE","id":51803,"ctx":"conn1","msg":"Slow query","attr":{"type":"update","ns":"db.u","command":{"q":{"_id":1},"u":{"$set":{"f":{"$binary":"AAEC","$type":"00"}}}},"durationMillis":0}}"#;
    let c = Capture::read(legacy, "mongoload");
    assert_eq!(c.groups.len(), 1, "{:?}", c.skipped);
}

/// The untransformed `find` entry of MongoDB's `$queryStats` page
/// (https://www.mongodb.com/docs/manual/reference/operator/aggregation/queryStats/,
/// "Untransformed Example"; CC BY-NC-SA 3.0, quoted as the test needs
/// it), its shell types written as canonical extended JSON.
const QUERY_STATS_DOC_EXAMPLE: &str = r#"{
  "key": {
    "queryShape": {
      "cmdNs": { "db": "test", "coll": "products" },
      "command": "find",
      "filter": { "item": { "$eq": "?string" } }
    },
    "client": {
      "driver": { "name": "nodejs|mongosh", "version": "5.1.0" },
      "os": { "type": "Darwin", "name": "darwin", "architecture": "arm64", "version": "22.6.0" },
      "platform": "Node.js v16.19.1, LE (unified)",
      "version": "5.1.0|1.8.0",
      "application": { "name": "mongosh 1.8.0" }
    },
    "collectionType": "collection"
  },
  "keyHash": "dsoJ+LHAru0z6MJ1/IygJnnLTrlpVYYmPnlmNZbZrLI=",
  "queryShapeHash": "uxMLCvpiJ5N/IRqt4c28/0A8F01C8AA16CA805FF5C1A5737535F97E40C2A90CE91A82CCB7A74C7CCB9C48",
  "metrics": {
    "lastExecutionMicros": { "$numberLong": "4254" },
    "execCount": { "$numberLong": "1" },
    "totalExecMicros": {
      "sum": { "$numberLong": "4254" }, "max": { "$numberLong": "4254" },
      "min": { "$numberLong": "4254" }, "sumOfSquares": { "$numberDecimal": "18096516" }
    },
    "firstResponseExecMicros": {
      "sum": { "$numberLong": "4254" }, "max": { "$numberLong": "4254" },
      "min": { "$numberLong": "4254" }, "sumOfSquares": { "$numberDecimal": "18096516" }
    },
    "docsReturned": {
      "sum": { "$numberLong": "1" }, "max": { "$numberLong": "1" },
      "min": { "$numberLong": "1" }, "sumOfSquares": { "$numberDecimal": "1" }
    },
    "firstSeenTimestamp": { "$date": "2023-09-14T12:30:27.989Z" },
    "latestSeenTimestamp": { "$date": "2023-09-14T12:30:27.989Z" }
  },
  "asOf": { "$timestamp": { "t": 1694695007, "i": 0 } }
}"#;

fn qs_doc(text: &str) -> mongodb::bson::Document {
    let v: Value = serde_json::from_str(text).unwrap();
    match mongodb::bson::Bson::try_from(v).unwrap() {
        mongodb::bson::Bson::Document(d) => d,
        other => panic!("{other:?}"),
    }
}

/// An entry as the simulator writes one, from the example's figures.
fn qs_entry(shape: Value, exec_count: u64, first_ms: i64, latest_ms: i64) -> query_stats::Entry {
    let Value::Object(shape) = shape else {
        panic!()
    };
    query_stats::Entry {
        key_hash: format!("{shape:?}"),
        db: "shop".into(),
        coll: "orders".into(),
        app_name: Some("shop-api".into()),
        shape,
        exec_count,
        exec_micros: (exec_count as f64 * 1500.0, 200, 9000),
        docs_returned: (exec_count * 3, 5),
        first_seen_ms: first_ms,
        latest_seen_ms: latest_ms,
    }
}

#[test]
fn the_documented_query_stats_entry_reads() {
    let e = query_stats::parse(&qs_doc(QUERY_STATS_DOC_EXAMPLE)).unwrap();
    assert_eq!((e.db.as_str(), e.coll.as_str()), ("test", "products"));
    assert_eq!(e.app_name.as_deref(), Some("mongosh 1.8.0"));
    assert_eq!(e.exec_count, 1);
    assert_eq!(e.exec_micros, (4254.0, 4254, 4254));
    assert_eq!(e.docs_returned, (1, 1));
    assert_eq!(e.first_seen_ms, 1_694_694_627_989);
    assert_eq!(e.shape["filter"], json!({ "item": { "$eq": "?string" } }));
    // Without a sample, the string draws the type's default length; the
    // one execution has no span to take a rate from.
    let c = query_stats::to_capture(&[e], &BTreeMap::new(), None, "mongoload", 1_700_000_000_000);
    assert_eq!(c.groups.len(), 1);
    let g = &c.groups[0];
    assert_eq!(g.stmt.op, CustomOpKind::Find);
    assert_eq!(
        render::generator(&g.slots[0]),
        json!({ "$gen": "string", "length": query_stats::DEFAULT_STRING_LEN })
    );
    assert!(
        g.notes
            .iter()
            .any(|n| n.contains("no sampled document has item")),
        "{:?}",
        g.notes
    );
    let err = render::render(&c, &opts()).unwrap_err();
    assert!(err.contains("span no time"), "{err}");
    // A missing field is named.
    let mut d = qs_doc(QUERY_STATS_DOC_EXAMPLE);
    d.get_document_mut("metrics").unwrap().remove("execCount");
    let err = query_stats::parse(&d).unwrap_err();
    assert!(err.contains("metrics.execCount"), "{err}");
}

#[test]
fn query_stats_shapes_draw_from_the_sampled_documents() {
    let t0 = 1_700_000_000_000;
    let entries = vec![
        qs_entry(
            json!({ "cmdNs": { "db": "shop", "coll": "orders" }, "command": "find",
                    "filter": { "customer": { "$gte": "?number", "$lt": "?number" }, "tags": { "$in": "?array<?string>" } },
                    "sort": { "total": -1 }, "limit": "?number" }),
            300,
            t0,
            t0 + 10_000,
        ),
        qs_entry(
            json!({ "cmdNs": { "db": "shop", "coll": "orders" }, "command": "aggregate",
                    "pipeline": [{ "$match": { "placed": { "$gte": "?date" } } },
                                 { "$group": { "_id": "$status", "n": { "$sum": "?number" } } }] }),
            100,
            t0 + 1000,
            t0 + 9000,
        ),
        qs_entry(
            json!({ "cmdNs": { "db": "shop", "coll": "orders" }, "command": "distinct",
                    "key": "status", "query": { "note": { "$regex": "?regex" } } }),
            50,
            t0,
            t0 + 20_000,
        ),
    ];
    let samples: BTreeMap<(String, String), Vec<Value>> = [(
        ("shop".to_owned(), "orders".to_owned()),
        vec![
            json!({ "customer": { "$numberInt": "17" }, "tags": ["gift-wrap", "express"], "placed": { "$date": { "$numberLong": (t0 - 3_600_000).to_string() } } }),
            json!({ "customer": { "$numberInt": "930" }, "tags": ["x"], "placed": { "$date": { "$numberLong": (t0 - 60_000).to_string() } } }),
            json!({ "customer": { "$numberInt": "402" } }),
        ],
    )]
    .into_iter()
    .collect();
    let c = query_stats::to_capture(&entries, &samples, None, "mongoload", t0 + 10_000);
    assert_eq!(c.groups.len(), 2);
    assert_eq!(c.statements, 400);
    // The regex shape is unsupported and counted by its executions.
    assert_eq!(
        c.skipped.get(&Skip::Unsupported("regex values".into())),
        Some(&50)
    );
    // The span: the counted entries' first to latest execution.
    assert_eq!(c.span_secs(), Some(10.0));
    let find = &c.groups[0];
    assert_eq!(find.count, 300);
    assert_eq!(
        render::generator(&find.slots[0]),
        json!({ "$gen": "uniform", "min": 17, "max": 931 })
    );
    // The most documents one execution returned stands for the limit.
    assert_eq!(find.limits.get(&5), Some(&300));
    match &find.slots[2] {
        SlotStats::Array {
            min_len,
            max_len,
            of,
        } => {
            assert_eq!((*min_len, *max_len), (1, query_stats::ARRAY_MAX));
            assert!(
                matches!(
                    of.as_deref(),
                    Some(SlotStats::Str {
                        min_len: 1,
                        max_len: 9,
                        ..
                    })
                ),
                "{of:?}"
            );
        }
        other => panic!("{other:?}"),
    }
    let agg = &c.groups[1];
    assert_eq!(
        render::generator(&agg.slots[0]),
        json!({ "$gen": "date", "within": "1h 10s" })
    );
    let out = render::render(&c, &opts()).unwrap();
    let cfg = load(&out.config).unwrap_or_else(|e| panic!("{e}\n{}", out.config));
    assert_eq!(cfg.workloads.len(), 1);
    // Each shape over its own window: 300 in 10 s and 100 in 8 s.
    assert!(out.config.contains("rate = 42.50"), "{}", out.config);
    assert!(
        out.config.contains(
            "42.500/s observed (each shape's count over its own first to latest execution, summed)"
        ),
        "{}",
        out.config
    );
    assert!(
        out.config
            .contains("latency seen mean 1.500 ms, min 0.200 ms, max 9.000 ms"),
        "{}",
        out.config
    );
    assert!(
        out.config
            .contains("customer, tags drawn like the values of the collection's sampled documents"),
        "{}",
        out.config
    );
    assert!(out.config.contains("{ \"$sum\" = 1 }"), "{}", out.config);
    for l in ["gift-wrap", "express"] {
        assert!(!out.config.contains(l), "{l} copied into\n{}", out.config);
    }
    assert!(
        out.summary
            .contains("not seen: $queryStats records find, aggregate and distinct only"),
        "{}",
        out.summary
    );
    assert!(
        out.config
            .contains("# deletes and other commands are not in this capture"),
        "{}",
        out.config
    );

    // Two readings: what ran between, over the readings' window.
    let mut later = entries.clone();
    later[0].exec_count = 420;
    later[0].exec_micros.0 += 120.0 * 1000.0;
    let d = query_stats::deltas(&entries, later);
    assert_eq!(d.len(), 1);
    assert_eq!(d[0].exec_count, 120);
    let c = query_stats::to_capture(&d, &samples, Some((t0, t0 + 60_000)), "mongoload", t0);
    assert_eq!(c.span_secs(), Some(60.0));
    assert_eq!(c.groups[0].exec.unwrap().sum_micros, 120_000.0);
    // mongoload's own traffic is skipped.
    let mut own = entries[0].clone();
    own.app_name = Some("mongoload-capture".into());
    let c = query_stats::to_capture(&[own], &samples, None, "mongoload", t0);
    assert_eq!(c.skipped.get(&Skip::OwnTraffic), Some(&300));
}

#[test]
fn query_stats_errors_say_what_to_do() {
    let older = query_stats::explain_error(
        Some(40324),
        "Unrecognized pipeline stage name: '$queryStats'",
    );
    assert!(
        older.contains("no $queryStats")
            && older.contains("--profile DB")
            && older.contains("--log FILE"),
        "{older}"
    );
    let denied = query_stats::explain_error(Some(13), "not authorized on admin");
    assert!(
        denied.contains("queryStatsRead") && denied.contains("clusterMonitor"),
        "{denied}"
    );
}

/// Real `system.profile` documents: tests/fixtures/profile/ (see
/// PROVENANCE.md there): `mongo/tests/fixtures/system.profile` of
/// https://github.com/DataDog/integrations-core (BSD 3-Clause License,
/// Copyright (c) 2016, Datadog, Inc.) at commit
/// 2ba5c3754a79c65743a253a58b4635755660ade6, unmodified.
const DATADOG_PROFILE: &str =
    include_str!("../../tests/fixtures/profile/datadog-system.profile.json");

#[test]
fn real_profiler_entries_read_without_error() {
    let docs: Vec<Value> = serde_json::from_str(DATADOG_PROFILE).unwrap();
    assert_eq!(docs.len(), 4);
    let mut c = Capture::new("mongoload");
    c.from_profiler = true;
    for d in docs {
        let mongodb::bson::Bson::Document(d) = mongodb::bson::Bson::try_from(d).unwrap() else {
            panic!("a profiler entry is a document")
        };
        let q = profile::to_slow_query(&d).expect("an entry with ns and command");
        c.add(&q);
    }
    assert_eq!(c.entries, 4);
    // Nothing skipped: the two finds and the two update statements are
    // shapes custom runs (the test of unsupported entries by name is
    // `write_statements_count_once_and_unsupported_entries_are_named`).
    assert!(c.skipped.is_empty(), "{:?}", c.skipped);
    assert_eq!(c.groups.len(), 2);
    let find = c
        .groups
        .iter()
        .find(|g| g.stmt.op == CustomOpKind::Find)
        .unwrap();
    assert_eq!(find.count, 2);
    assert_eq!(find.durations_ms, vec![85.0, 14.0]);
    assert_eq!(find.limits.get(&34), Some(&2));
    assert_eq!(find.stmt.fixed["sort"], json!({ "name": 1 }));
    assert_eq!(
        render::generator(&find.slots[0]),
        json!({ "$gen": "uniform", "min": 63, "max": 64 })
    );
    let update = c
        .groups
        .iter()
        .find(|g| g.stmt.op == CustomOpKind::Update)
        .unwrap();
    assert_eq!(update.count, 2);
    assert!(update.stmt.many);
    // `{ $set: { subscribed: true } }` and `false`: one shape, both values.
    assert_eq!(
        render::generator(&update.slots[1]),
        json!({ "$gen": "choice", "values": [true, false] })
    );
    // 18:41:15.716 to 18:44:27.336.
    assert_eq!(c.span_secs(), Some(191.62));
    let out = render::render(&c, &opts()).unwrap();
    load(&out.config).unwrap_or_else(|e| panic!("{e}\n{}", out.config));
    // The indexes come from the plans seen.
    assert!(out.config.contains("keys = { name = 1 }"), "{}", out.config);
    assert!(out.config.contains("keys = { age = -1 }"), "{}", out.config);
    assert!(
        out.config.contains("plan IXSCAN { name: 1 }"),
        "{}",
        out.config
    );
}

#[test]
fn a_shape_seen_once_long_before_does_not_dilute_the_rate() {
    let t0 = 1_700_000_000_000;
    let steady = qs_entry(
        json!({ "cmdNs": { "db": "shop", "coll": "orders" }, "command": "find",
                "filter": { "customer": { "$eq": "?number" } } }),
        6000,
        t0,
        t0 + 60_000,
    );
    let nightly = qs_entry(
        json!({ "cmdNs": { "db": "shop", "coll": "orders" }, "command": "distinct", "key": "status" }),
        1,
        t0 - 3_600_000,
        t0 - 3_600_000,
    );
    let c = query_stats::to_capture(&[steady, nightly], &BTreeMap::new(), None, "mongoload", t0);
    // The span is 61 minutes, but the steady find ran 100/s for its minute.
    assert_eq!(c.span_secs(), Some(3660.0));
    let r = c.coll_rates[&("shop".to_owned(), "orders".to_owned())];
    assert!((r - (100.0 + 1.0 / 3660.0)).abs() < 1e-9, "{r}");
    let out = render::render(&c, &opts()).unwrap();
    assert!(out.config.contains("rate = 100.0\n"), "{}", out.config);
}
