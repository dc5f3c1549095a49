//! Tests of loading, overrides and validation on literal config texts.

use super::*;

const BASE: &str = r#"
[target]
uri = "mongodb://load:pa55word@db1:27017,db2:27017/?replicaSet=rs0"

[[workloads]]
name = "mixed"
kind = "mixed"
[[workloads.stages]]
name = "warm"
rate = 500
duration = "30s"
[[workloads.stages]]
concurrency = 16
duration = "1m"
"#;

fn path() -> &'static Path {
    Path::new("/etc/mongoload/mongoload.toml")
}

fn parse(text: &str) -> Result<Config, ConfigError> {
    parse_with_env(text, path(), Vec::new())
}

fn parse_env(text: &str, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    parse_with_env(
        text,
        path(),
        env.iter().map(|(k, v)| (k.to_string(), v.to_string())),
    )
}

/// The parameters of a workload of kind mixed.
fn mixed(w: &WorkloadConfig) -> &MixedConfig {
    match &w.kind {
        KindConfig::Mixed(p) => p,
        other => panic!("not kind mixed: {other:?}"),
    }
}

/// The error for `text`, asserting it names `key`.
fn err_at(text: &str, key: &str) -> String {
    let e = parse(text).expect_err("config should be rejected");
    assert_eq!(e.key(), Some(key), "wrong key in: {e}");
    let msg = e.to_string();
    assert!(
        msg.starts_with("/etc/mongoload/mongoload.toml: "),
        "file not named: {msg}"
    );
    msg
}

#[test]
fn minimal_config_gets_defaults() {
    let c = parse(BASE).unwrap();
    assert_eq!(c.target.database, "mongoload");
    assert_eq!(c.target.app_name, "mongoload");
    assert_eq!(c.target.connect_timeout, Duration::from_secs(5));
    assert_eq!(c.target.operation_timeout, Duration::from_secs(10));
    assert_eq!(c.http.listen, "127.0.0.1:9480".parse().unwrap());
    assert_eq!(c.run.shutdown_grace, Duration::from_secs(10));
    let w = &c.workloads[0];
    assert_eq!(w.kind, KindConfig::Mixed(MixedConfig::default()));
    assert_eq!(w.max_inflight, 256);
    assert_eq!(w.max_lag, Duration::from_secs(10));
    assert!(!w.repeat);
    let s = w.schedule().unwrap();
    assert_eq!(s.stages()[0].name(), "warm");
    assert_eq!(s.stages()[1].name(), "stage-2");
    assert_eq!(s.total_duration(), Duration::from_secs(90));
    // Pool: max(max_inflight for the rate stage, 16 workers).
    assert_eq!(c.planned_connections(), 256);
    assert_eq!(c.effective_pool_size(), 256);
}

#[test]
fn shipped_configs_are_valid() {
    let c = parse(include_str!("../../etc/mongoload.toml")).unwrap();
    assert!(!c.workloads.is_empty());
    let demo = parse(include_str!("../../etc/examples/demo.toml")).unwrap();
    let w = &demo.workloads[0];
    let KindConfig::Mixed(params) = &w.kind else {
        panic!("the demo runs kind mixed: {:?}", w.kind)
    };
    let s = w.schedule().unwrap();
    assert!(s.stages().len() >= 2, "demo shows stage changes");
    assert!(s.stages()[0].duration() <= Duration::from_secs(30));
    assert!(params.doc_size.bytes() <= 4096);
}

#[test]
fn environment_overrides_keys_and_ignores_non_keys() {
    let c = parse_env(
        BASE,
        &[
            ("MONGOLOAD_TARGET__URI", "mongodb://127.0.0.1:27018"),
            ("MONGOLOAD_HTTP__LISTEN", "127.0.0.1:9999"),
            ("MONGOLOAD_TARGET__POOL_SIZE", "32"),
            ("MONGOLOAD_RUN__SHUTDOWN_GRACE", "3s"),
            ("MONGOLOAD_CONFIG", "/somewhere/else.toml"),
            ("MONGOLOAD_TEST_URI", "mongodb://127.0.0.1:1"),
            ("PATH", "/usr/bin"),
            ("MONGOLOADÖ__X", "x"),
            ("MONGOLOAD_", "x"),
        ],
    )
    .unwrap();
    assert_eq!(
        c.target.uri.as_ref().unwrap().expose(),
        "mongodb://127.0.0.1:27018"
    );
    assert_eq!(c.http.listen, "127.0.0.1:9999".parse().unwrap());
    assert_eq!(c.target.pool_size, 32);
    assert_eq!(c.effective_pool_size(), 32);
    assert_eq!(c.run.shutdown_grace, Duration::from_secs(3));
}

#[test]
fn environment_override_with_unknown_key_is_named() {
    let e = parse_env(BASE, &[("MONGOLOAD_TARGET__URL", "x")]).unwrap_err();
    assert_eq!(e.key(), Some("target.url"), "{e}");
}

#[test]
fn unknown_keys_are_rejected_with_their_path() {
    let msg = err_at(&format!("{BASE}\n[extra]\nx = 1\n"), "extra");
    assert!(msg.contains("unknown field `extra`"), "{msg}");
    let msg = err_at(
        &BASE.replace("duration = \"1m\"", "duration = \"1m\"\nrat = 5"),
        "workloads[0].stages[1].rat",
    );
    assert!(msg.contains("unknown field `rat`"), "{msg}");
    err_at(
        &BASE.replace(
            "kind = \"mixed\"",
            "kind = \"mixed\"\n[workloads.mixed]\nfnd = 3",
        ),
        "workloads[0].mixed.fnd",
    );
}

#[test]
fn wrong_types_are_rejected_with_their_path() {
    let msg = err_at(
        &BASE.replace("rate = 500", "rate = \"fast\""),
        "workloads[0].stages[0].rate",
    );
    assert!(msg.contains("fast"), "{msg}");
    err_at(
        &BASE.replace(
            "kind = \"mixed\"",
            "kind = \"mixed\"\nmax_inflight = \"lots\"",
        ),
        "workloads[0].max_inflight",
    );
    err_at(
        &BASE.replace("[target]", "[http]\nlisten = \"nowhere\"\n[target]"),
        "http.listen",
    );
    err_at(
        &BASE.replace("kind = \"mixed\"", "kind = \"nosuch\""),
        "workloads[0].kind",
    );
}

#[test]
fn negative_and_zero_rates_are_rejected() {
    let text = BASE.replace("concurrency = 16", "rate = -5");
    assert_eq!(
        parse(&text).unwrap_err().to_string(),
        "/etc/mongoload/mongoload.toml: workloads[0].stages[1].rate: \
         must be a positive number, got -5"
    );
    err_at(
        &BASE.replace("rate = 500", "rate = 0"),
        "workloads[0].stages[0].rate",
    );
    err_at(
        &BASE.replace("concurrency = 16", "concurrency = 2.5"),
        "workloads[0].stages[1].concurrency",
    );
}

#[test]
fn zero_weights_are_rejected() {
    let text = BASE.replace(
        "kind = \"mixed\"",
        "kind = \"mixed\"\n[workloads.mixed]\ninsert = 0\nupdate = 0\ndelete = 0\nfind = 0",
    );
    let msg = err_at(&text, "workloads[0].mixed.insert");
    assert!(msg.contains("sum to zero"), "{msg}");
    let text = BASE.replace(
        "kind = \"mixed\"",
        "kind = \"mixed\"\n[workloads.mixed]\nfind = -1",
    );
    err_at(&text, "workloads[0].mixed.find");
}

#[test]
fn uri_must_be_given_once() {
    let no_uri = BASE.replace(
        "uri = \"mongodb://load:pa55word@db1:27017,db2:27017/?replicaSet=rs0\"",
        "database = \"x\"",
    );
    let msg = err_at(&no_uri, "target.uri");
    assert!(msg.contains("missing"), "{msg}");
    let both = BASE.replace("[target]", "[target]\nuri_file = \"/run/credentials/uri\"");
    err_at(&both, "target.uri_file");
    let bad = BASE.replace("mongodb://load", "http://load");
    let msg = err_at(&bad, "target.uri");
    assert!(!msg.contains("pa55word"), "password leaked: {msg}");
}

#[test]
fn bad_durations_are_rejected() {
    let msg = err_at(
        &BASE.replace("duration = \"30s\"", "duration = \"30 parsecs\""),
        "workloads[0].stages[0].duration",
    );
    assert!(
        msg.contains("parsecs") || msg.contains("unknown time unit"),
        "{msg}"
    );
    err_at(
        &BASE.replace("duration = \"30s\"", "duration = \"0s\""),
        "workloads[0].stages[0].duration",
    );
    err_at(
        &BASE.replace("duration = \"30s\"\n", ""),
        "workloads[0].stages[0].duration",
    );
}

#[test]
fn stage_needs_exactly_one_load() {
    err_at(
        &BASE.replace("rate = 500", "rate = 500\nconcurrency = 3"),
        "workloads[0].stages[0]",
    );
    err_at(&BASE.replace("rate = 500\n", ""), "workloads[0].stages[0]");
    err_at(
        &BASE
            .replace("name = \"warm\"\nrate = 500\nduration = \"30s\"\n", "")
            .replace(
                "[[workloads.stages]]\n[[workloads.stages]]",
                "[[workloads.stages]]",
            )
            .replace("concurrency = 16\nduration = \"1m\"\n", "")
            .replace("[[workloads.stages]]\n", ""),
        "workloads[0].stages",
    );
}

#[test]
fn duplicate_workload_names_are_rejected() {
    let second = "\n[[workloads]]\nname = \"mixed\"\nkind = \"mixed\"\n\
                  [[workloads.stages]]\nrate = 10\nduration = \"1s\"\n";
    let msg = err_at(&format!("{BASE}{second}"), "workloads[1].name");
    assert!(msg.contains("duplicate"), "{msg}");
}

#[test]
fn unreadable_file_names_the_file() {
    let e = load_with_env(Path::new("/nonexistent/mongoload.toml"), Vec::new()).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }));
    let msg = e.to_string();
    assert!(
        msg.starts_with("/nonexistent/mongoload.toml: cannot read: "),
        "{msg}"
    );
}

#[test]
fn syntax_errors_name_the_file() {
    let e = parse("[target\nuri = 1").unwrap_err();
    assert!(matches!(e, ConfigError::Syntax { .. }), "{e:?}");
    assert!(e.to_string().starts_with("/etc/mongoload/mongoload.toml: "));
}

#[test]
fn ramps_and_steps_parse() {
    let text = BASE
        .replace("rate = 500", "rate = { from = 100, to = 2000 }")
        .replace(
            "concurrency = 16\nduration = \"1m\"",
            "concurrency = { steps = [3, 6, 15, 25, 50], each = \"1m\" }",
        );
    let c = parse(&text).unwrap();
    let s = c.workloads[0].schedule().unwrap();
    assert_eq!(s.total_duration(), Duration::from_secs(30 + 300));
    assert_eq!(s.stages()[0].rate_at(Duration::from_secs(15)), 1050.0);
    assert_eq!(s.stages()[1].concurrency_at(Duration::from_secs(130)), 15);
    assert_eq!(c.workloads[0].peak_concurrency(), 256);

    let with_duration = text.replace("each = \"1m\" }", "each = \"1m\" }\nduration = \"5m\"");
    err_at(&with_duration, "workloads[0].stages[1].duration");
    let mixed_table = BASE.replace("rate = 500", "rate = { from = 1, steps = [2] }");
    err_at(&mixed_table, "workloads[0].stages[0].rate");
    let bad_step = text.replace("[3, 6, 15, 25, 50]", "[3, 0]");
    err_at(&bad_step, "workloads[0].stages[1].concurrency");
}

#[test]
fn byte_sizes_accept_numbers_and_units() {
    let with = |v: &str| {
        BASE.replace(
            "kind = \"mixed\"",
            &format!("kind = \"mixed\"\n[workloads.mixed]\ndoc_size = {v}"),
        )
    };
    let c = parse(&with("\"1KB\"")).unwrap();
    assert_eq!(mixed(&c.workloads[0]).doc_size, ByteSize(1024));
    let c = parse(&with("2000")).unwrap();
    assert_eq!(mixed(&c.workloads[0]).doc_size, ByteSize(2000));
    err_at(&with("\"lots\""), "workloads[0].mixed.doc_size");
    err_at(&with("10"), "workloads[0].mixed.doc_size");
    err_at(&with("\"17MiB\""), "workloads[0].mixed.doc_size");
}

#[test]
fn debug_output_hides_the_password() {
    let c = parse(BASE).unwrap();
    let dbg = format!("{c:?}");
    assert!(!dbg.contains("pa55word"), "{dbg}");
    assert!(dbg.contains("load:***@db1"), "{dbg}");
}

#[test]
fn resolve_uri_reads_and_trims_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("uri");
    std::fs::write(&file, "  mongodb://u:secret@127.0.0.1:27017/\n").unwrap();
    let text = BASE.replace(
        "uri = \"mongodb://load:pa55word@db1:27017,db2:27017/?replicaSet=rs0\"",
        &format!("uri_file = {:?}", file.display().to_string()),
    );
    let c = parse(&text).unwrap();
    let uri = c.target.resolve_uri().unwrap();
    assert_eq!(uri.expose(), "mongodb://u:secret@127.0.0.1:27017/");
    assert!(!c.describe().contains("secret"));

    std::fs::remove_file(&file).unwrap();
    let e = c.target.resolve_uri().unwrap_err();
    assert!(e.to_string().contains("cannot read uri_file"), "{e}");
}

#[test]
fn describe_shows_the_plan_without_secrets() {
    let text = BASE.replace("kind = \"mixed\"", "kind = \"mixed\"\nrepeat = true");
    let d = parse(&text).unwrap().describe();
    assert!(!d.contains("pa55word"), "{d}");
    for needle in [
        "uri: mongodb://load:***@db1:27017,db2:27017/?replicaSet=rs0",
        "hosts: db1:27017, db2:27017",
        "listen: 127.0.0.1:9480",
        "workload \"mixed\":",
        "kind: mixed",
        "weights: insert 6.5, update 3, delete 3, find 87.5",
        "1. warm: rate 500/s for 30s",
        "2. stage-2: concurrency 16 workers for 1m",
        "timeline (next 24h):",
        "+1m 30s",
    ] {
        assert!(d.contains(needle), "missing {needle:?} in:\n{d}");
    }
}

#[test]
fn default_path_is_etc() {
    // Only checks the fallback when the variable is unset in this process;
    // tests do not mutate the environment.
    if std::env::var_os(CONFIG_ENV).is_none() {
        assert_eq!(default_path(), PathBuf::from(DEFAULT_PATH));
    }
}

#[test]
fn messages_are_plain() {
    let msg = err_at(
        &BASE.replace("kind = \"mixed\"", "kind = \"nosuch\""),
        "workloads[0].kind",
    );
    assert!(
        msg.ends_with(
            "unknown workload kind \"nosuch\"; known kinds: mixed, insert-benchmark, \
             sysbench, name-num, large-doc, ycsb, custom"
        ),
        "{msg}"
    );
    let msg = err_at(
        &BASE.replace("duration = \"1m\"", "duration = \"1m\"\nrat = 5"),
        "workloads[0].stages[1].rat",
    );
    // The config crate's own "for key `…`" suffix is not repeated.
    assert!(!msg.contains("for key"), "{msg}");
    let msg = err_at(&BASE.replace("name = \"mixed\"\n", ""), "workloads[0].name");
    assert!(msg.ends_with("workloads[0].name: is required"), "{msg}");
    let e = parse_env(BASE, &[("MONGOLOAD_TARGET__POOL_SIZE", "many")]).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("(set by MONGOLOAD_TARGET__POOL_SIZE)"),
        "{e}"
    );
}

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
fn run_log_and_stage_warmup_parse_and_are_checked() {
    let text = BASE
        .replace(
            "[[workloads]]",
            "[run]\nlog = \"/var/lib/mongoload/runs.jsonl\"\n\n[[workloads]]",
        )
        .replace("duration = \"30s\"", "duration = \"30s\"\nwarmup = \"5s\"");
    let c = parse(&text).unwrap();
    assert_eq!(
        c.run.log.as_deref(),
        Some(Path::new("/var/lib/mongoload/runs.jsonl"))
    );
    let s = c.workloads[0].schedule().unwrap();
    assert_eq!(s.stages()[0].warmup(), Duration::from_secs(5));
    assert_eq!(s.stages()[1].warmup(), Duration::ZERO);
    assert!(c.describe().contains("log: /var/lib/mongoload/runs.jsonl"));
    assert!(c.describe().contains("(warm-up 5s)"));
    // Default: no run log.
    assert_eq!(parse(BASE).unwrap().run.log, None);

    let msg = err_at(
        &text.replace("warmup = \"5s\"", "warmup = \"30s\""),
        "workloads[0].stages[0].warmup",
    );
    assert!(msg.contains("must be shorter than the stage"), "{msg}");
    err_at(
        &text.replace("warmup = \"5s\"", "warmup = \"soon\""),
        "workloads[0].stages[0].warmup",
    );
    err_at(
        &text.replace("/var/lib/mongoload/runs.jsonl", ""),
        "run.log",
    );
}

#[test]
fn count_based_stages_parse_and_are_checked() {
    let text = BASE
        .replace(
            "rate = 500\nduration = \"30s\"",
            "rate = 500\noperations = 100000",
        )
        .replace(
            "concurrency = 16\nduration = \"1m\"",
            "concurrency = 16\noperations = 1000\nper_worker = true\nduration = \"1h\"",
        );
    let c = parse(&text).unwrap();
    let s = c.workloads[0].schedule().unwrap();
    use crate::schedule::{Limit, COUNT_STAGE_CAP};
    assert_eq!(s.stages()[0].limit(), Some(Limit::Total(100_000)));
    assert_eq!(s.stages()[0].duration(), COUNT_STAGE_CAP);
    assert_eq!(s.stages()[1].limit(), Some(Limit::PerWorker(1000)));
    assert_eq!(s.stages()[1].operations_target(), Some(16_000));
    assert_eq!(s.stages()[1].duration(), Duration::from_secs(3600));
    let d = c.describe();
    assert!(
        d.contains("warm: rate 500/s for 100000 operations (at most 30days)"),
        "{d}"
    );
    assert!(
        d.contains("for 1000 operations per worker (at most 1h)"),
        "{d}"
    );

    let msg = err_at(
        &text.replace(
            "rate = 500\noperations = 100000",
            "rate = 500\noperations = 100000\nper_worker = true",
        ),
        "workloads[0].stages[0].operations",
    );
    assert!(msg.contains("per_worker needs concurrency"), "{msg}");
    let msg = err_at(
        &text.replace(
            "rate = 500\noperations = 100000",
            "rate = { from = 1, to = 5 }\noperations = 10",
        ),
        "workloads[0].stages[0].operations",
    );
    assert!(msg.contains("constant level"), "{msg}");
    err_at(
        &text.replace("operations = 100000", "operations = 0"),
        "workloads[0].stages[0].operations",
    );
    let msg = err_at(
        &BASE.replace(
            "rate = 500\nduration = \"30s\"",
            "rate = 500\nduration = \"30s\"\nper_worker = true",
        ),
        "workloads[0].stages[0].per_worker",
    );
    assert!(msg.contains("needs operations"), "{msg}");
    let msg = err_at(
        &BASE.replace("rate = 500\nduration = \"30s\"", "rate = 500"),
        "workloads[0].stages[0].duration",
    );
    assert!(msg.contains("or operations"), "{msg}");
}

const SOAK: &str = r#"
[target]
uri = "mongodb://127.0.0.1:27017"

[control]
socket = "/run/mongoload/control.sock"

[[workloads]]
name = "soak"
kind = "mixed"
timezone = "Europe/Berlin"
windows = [
  { when = "mon-fri 09:00-17:00", rate = 2000, name = "business" },
  { when = "sat,sun 10:00-12:00", concurrency = 8 },
]
default = { rate = 300 }
"#;

#[test]
fn windows_build_a_wall_clock_schedule() {
    let c = parse(SOAK).unwrap();
    assert_eq!(
        c.control.socket.as_deref(),
        Some(Path::new("/run/mongoload/control.sock"))
    );
    let w = &c.workloads[0];
    let s = w.schedule().unwrap();
    let plan = s.windows().expect("a window schedule");
    assert_eq!(plan.windows().tz().name(), "Europe/Berlin");
    let names: Vec<&str> = s.stages().iter().map(|s| s.name()).collect();
    assert_eq!(names, ["business", "sat,sun 10:00-12:00", "default"]);
    // Open-loop windows need max_inflight workers, closed-loop ones 8.
    assert_eq!(w.peak_concurrency(), 256);
    assert_eq!(c.planned_connections(), 256);
}

#[test]
fn bad_windows_name_their_key() {
    let with = |from: &str, to: &str| SOAK.replace(from, to);
    let msg = err_at(
        &with("mon-fri 09:00-17:00", "mon-fri 9-17"),
        "workloads[0].windows[0].when",
    );
    assert!(msg.contains("not a window"), "{msg}");
    err_at(
        &with("Europe/Berlin", "Mars/Olympus"),
        "workloads[0].timezone",
    );
    err_at(
        &with("concurrency = 8", "concurrency = 8.5"),
        "workloads[0].windows[1].concurrency",
    );
    err_at(
        &with("rate = 300", "rate = -1"),
        "workloads[0].default.rate",
    );
    err_at(
        &with("rate = 2000, ", "rate = 2000, concurrency = 3, "),
        "workloads[0].windows[0]",
    );
    err_at(
        &with(
            "default = { rate = 300 }",
            "default = { rate = 300, when = \"09:00-10:00\" }",
        ),
        "workloads[0].default.when",
    );
    err_at(
        &with("{ when = \"sat,sun 10:00-12:00\", ", "{ "),
        "workloads[0].windows[1].when",
    );
    err_at(
        &with("kind = \"mixed\"", "kind = \"mixed\"\nrepeat = true"),
        "workloads[0].repeat",
    );
    let both = format!("{SOAK}[[workloads.stages]]\nrate = 5\nduration = \"1s\"\n");
    err_at(&both, "workloads[0].windows");
    err_at(
        &BASE.replace("kind = \"mixed\"", "kind = \"mixed\"\ntimezone = \"UTC\""),
        "workloads[0].timezone",
    );
    let msg = err_at(
        &with("socket = \"/run/mongoload/control.sock\"", "port = 1"),
        "control.port",
    );
    assert!(msg.contains("unknown field"), "{msg}");
}

#[test]
fn describe_prints_the_windows_next_24_hours() {
    use chrono::TimeZone;
    // Friday 2026-06-05 12:00 UTC = 14:00 CEST.
    let now = chrono::Utc.with_ymd_and_hms(2026, 6, 5, 12, 0, 0).unwrap();
    let d = parse(SOAK).unwrap().describe_at(now);
    for needle in [
        "socket: /run/mongoload/control.sock",
        "windows (Europe/Berlin, repeating forever; the first active wins):",
        "1. mon-fri 09:00-17:00  business: rate 2000/s",
        "2. sat,sun 10:00-12:00  sat,sun 10:00-12:00: concurrency 8 workers",
        "outside: default: rate 300/s",
        "timeline (next 24h, Europe/Berlin):",
        "Fri 2026-06-05 14:00 CEST .. Fri 2026-06-05 17:00 CEST  business: rate 2000/s",
        "Fri 2026-06-05 17:00 CEST .. Sat 2026-06-06 10:00 CEST  default: rate 300/s",
        "Sat 2026-06-06 10:00 CEST .. Sat 2026-06-06 12:00 CEST  sat,sun 10:00-12:00: concurrency 8 workers",
        "Sat 2026-06-06 12:00 CEST .. Sat 2026-06-06 14:00 CEST  default: rate 300/s",
    ] {
        assert!(d.contains(needle), "missing {needle:?} in:\n{d}");
    }
    // Without a default the gaps are idle.
    let idle = parse(&SOAK.replace("default = { rate = 300 }\n", ""))
        .unwrap()
        .describe_at(now);
    assert!(idle.contains("outside: idle"), "{idle}");
    assert!(
        idle.contains("Fri 2026-06-05 17:00 CEST .. Sat 2026-06-06 10:00 CEST  idle"),
        "{idle}"
    );
    // Stage lists still show offsets from the start, and control is off.
    let d = parse(BASE).unwrap().describe_at(now);
    assert!(d.contains("socket: (off)"), "{d}");
    assert!(d.contains("timeline (next 24h):"), "{d}");
}

#[test]
fn command_events_default_to_on_when_a_workload_writes() {
    let with = |target: &str, workload: &str| {
        let text = BASE.replace("[target]\n", &format!("[target]\n{target}")) + workload;
        let c = parse(&text).unwrap();
        (c.command_events(), c.describe())
    };
    // The default mix writes.
    let (on, text) = with("", "");
    assert!(on);
    assert!(
        text.contains("command events: on, as a workload writes"),
        "{text}"
    );
    // A second workload that only reads changes nothing; alone it turns
    // monitoring off, unless the key says otherwise.
    let reader = |kind: &str, table: &str| {
        format!(
            "[[workloads]]\nname = \"r\"\nkind = \"{kind}\"\n{table}\n\
             [[workloads.stages]]\nrate = 10\nduration = \"1m\"\n"
        )
    };
    let find_only = reader(
        "mixed",
        "[workloads.mixed]\ninsert = 0\nupdate = 0\ndelete = 0\nfind = 1\nfind_by_k = 1",
    );
    assert!(with("", &find_only).0);
    let only = |workload: &str, target: &str| {
        let c = parse(&format!(
            "[target]\nuri = \"mongodb://db1\"\n{target}{workload}"
        ))
        .unwrap();
        (c.command_events(), c.describe())
    };
    let (on, text) = only(&find_only, "");
    assert!(!on);
    assert!(
        text.contains("command events: off, as no workload writes"),
        "{text}"
    );
    assert!(only(&find_only, "command_events = true\n").0);
    assert!(!only(&reader("mixed", ""), "command_events = false\n").0);
    assert!(!only(&reader("ycsb", "[workloads.ycsb]\nworkload = \"c\""), "").0);
    assert!(only(&reader("ycsb", "[workloads.ycsb]\nworkload = \"b\""), "").0);
    assert!(
        !only(
            &reader("sysbench", "[workloads.sysbench]\nread_only = true"),
            ""
        )
        .0
    );
    assert!(only(&reader("sysbench", ""), "").0);
    assert!(
        !only(
            &reader("name-num", "[workloads.name_num]\nmode = \"query\""),
            ""
        )
        .0
    );
    assert!(
        only(
            &reader("name-num", "[workloads.name_num]\nmode = \"update\""),
            ""
        )
        .0
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

#[test]
fn arrival_parses_per_open_loop_stage_and_check_config_prints_it() {
    use crate::schedule::Arrival;
    let text = BASE.replace(
        "rate = 500\nduration = \"30s\"",
        "rate = 500\nduration = \"30s\"\narrival = \"poisson\"",
    );
    let seeded = text.replace("kind = \"mixed\"", "kind = \"mixed\"\nseed = 9");
    let c = parse(&seeded).unwrap();
    let s = c.workloads[0].schedule().unwrap();
    assert!(matches!(s.stages()[0].arrival(), Arrival::Poisson { .. }));
    assert_eq!(s.stages()[1].arrival(), Arrival::Uniform);
    // Reproducible: the same config draws the same arrivals; another seed
    // others.
    assert_eq!(s, parse(&seeded).unwrap().workloads[0].schedule().unwrap());
    let other = parse(&text).unwrap().workloads[0].schedule().unwrap();
    assert_ne!(s.stages()[0], other.stages()[0]);
    let d = c.describe();
    assert!(
        d.contains("warm: rate 500/s for 30s, poisson arrivals ("),
        "{d}"
    );

    let uniform = BASE.replace(
        "rate = 500\nduration = \"30s\"",
        "rate = 500\nduration = \"30s\"\narrival = \"uniform\"",
    );
    let u = parse(&uniform).unwrap().workloads[0].schedule().unwrap();
    assert_eq!(u.stages()[0].arrival(), Arrival::Uniform);

    let msg = err_at(
        &BASE.replace(
            "concurrency = 16\nduration = \"1m\"",
            "concurrency = 16\nduration = \"1m\"\narrival = \"poisson\"",
        ),
        "workloads[0].stages[1].arrival",
    );
    assert!(msg.contains("need rate (open loop)"), "{msg}");
    let msg = parse(&text.replace("\"poisson\"", "\"bursty\""))
        .unwrap_err()
        .to_string();
    assert!(msg.contains("arrival") && msg.contains("bursty"), "{msg}");
}

#[test]
fn run_name_and_thresholds_parse_and_are_checked() {
    let text = BASE
        .replace("[[workloads]]", "[run]\nname = \"baseline-1\"\n\n[[workloads]]")
        .replacen(
            "[[workloads.stages]]",
            "[[workloads.thresholds]]\ncheck = \"p99 < 50ms\"\nop = \"find\"\n\n[[workloads.stages]]",
            1,
        );
    let c = parse(&text).unwrap();
    assert_eq!(c.run.name.as_deref(), Some("baseline-1"));
    let t = c.workloads[0].thresholds().unwrap();
    assert_eq!(t[0].name, "p99<50ms op=find");
    // The hash is stable for one config and changes with it.
    assert_eq!(c.hash(), parse(&text).unwrap().hash());
    assert_eq!(c.hash().len(), 12);
    assert_ne!(
        c.hash(),
        parse(&text.replace("p99 < 50ms", "p99 < 60ms"))
            .unwrap()
            .hash()
    );
    // The run's name is not the plan.
    assert_eq!(
        c.hash(),
        parse(&text.replace("baseline-1", "candidate"))
            .unwrap()
            .hash()
    );
    let msg = err_at(&text.replace("baseline-1", "a b"), "run.name");
    assert!(msg.contains("letters, digits"), "{msg}");
    let msg = err_at(
        &text.replace("op = \"find\"", "op = \"nope\""),
        "workloads[0].thresholds[0].op",
    );
    assert!(msg.contains("no operation \"nope\""), "{msg}");
    let msg = err_at(
        &text.replace("p99 < 50ms", "p99 < soon"),
        "workloads[0].thresholds[0].check",
    );
    assert!(msg.contains("not a duration"), "{msg}");
}

/// A config of `target` keys and one workload of `workload` keys, with one
/// stage: for the tests of one concern.
pub(super) fn load_one(target: &str, workload: &str) -> Result<Config, String> {
    let text = format!(
        "[target]\nuri = \"mongodb://h/\"\n{target}\n[[workloads]]\nname = \"a\"\n{workload}\n\
         [[workloads.stages]]\nrate = 1\nduration = \"1s\"\n"
    );
    parse_with_env(&text, std::path::Path::new("t.toml"), std::iter::empty())
        .map_err(|e| e.to_string())
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
