//! Tests of loading, overrides and validation on literal config texts.

use super::*;

mod stages;
mod workloads;

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
pub(crate) fn load_one(target: &str, workload: &str) -> Result<Config, String> {
    let text = format!(
        "[target]\nuri = \"mongodb://h/\"\n{target}\n[[workloads]]\nname = \"a\"\n{workload}\n\
         [[workloads.stages]]\nrate = 1\nduration = \"1s\"\n"
    );
    parse_with_env(&text, std::path::Path::new("t.toml"), std::iter::empty())
        .map_err(|e| e.to_string())
}
