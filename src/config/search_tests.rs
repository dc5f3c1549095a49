//! Tests of a capacity search stage's keys.

use super::*;

const SEARCH: &str = r#"
[target]
uri = "mongodb://db1:27017"

[[workloads]]
name = "w"
kind = "mixed"
[[workloads.stages]]
name = "capacity"
search = { from = 500, to = 20000, precision = "2.5%", probe = "20s" }
[[workloads.thresholds]]
check = "p99 < 20ms"
"#;

fn parse(text: &str) -> Result<Config, ConfigError> {
    parse_with_env(text, Path::new("/etc/mongoload/mongoload.toml"), Vec::new())
}

fn err_key(text: &str) -> (Option<String>, String) {
    let e = parse(text).expect_err("config should be rejected");
    (e.key().map(str::to_owned), e.to_string())
}

#[test]
fn a_search_stage_takes_its_keys_and_the_defaults() {
    let c = parse(SEARCH).unwrap();
    let w = &c.workloads[0];
    let s = w.schedule().unwrap();
    let spec = s.stages()[0].search_spec().expect("a search stage");
    assert_eq!(
        (spec.from, spec.to, spec.precision),
        (500.0, 20_000.0, 0.025)
    );
    assert_eq!(spec.probe, Duration::from_secs(20));
    assert_eq!(spec.settle, crate::schedule::search::DEFAULT_SETTLE);
    assert_eq!(spec.stop_error_ratio, 0.05);
    // By default the stage lasts the longest the search can take.
    assert_eq!(s.stages()[0].duration(), spec.longest());
    // Open loop: the pool is sized for max_inflight.
    assert_eq!(c.planned_connections(), w.max_inflight);
}

#[test]
fn a_search_stage_is_refused_with_the_key_at_fault() {
    let bad = |from: &str, to: &str| err_key(&SEARCH.replace(from, to));
    let (key, msg) = bad("to = 20000", "to = 100");
    assert_eq!(
        key.as_deref(),
        Some("workloads[0].stages[0].search.to"),
        "{msg}"
    );
    let (key, msg) = bad("precision = \"2.5%\"", "precision = \"a lot\"");
    assert_eq!(
        key.as_deref(),
        Some("workloads[0].stages[0].search.precision"),
        "{msg}"
    );
    let (key, msg) = bad("name = \"capacity\"", "name = \"capacity\"\nrate = 100");
    assert_eq!(key.as_deref(), Some("workloads[0].stages[0].rate"), "{msg}");
    assert!(msg.contains("not used with search"), "{msg}");
    // No threshold applies in the stage: nothing could judge a probe.
    let (key, msg) = bad(
        "check = \"p99 < 20ms\"",
        "check = \"p99 < 20ms\"\nstage = \"soak\"",
    );
    assert_eq!(
        key.as_deref(),
        Some("workloads[0].stages[0].search"),
        "{msg}"
    );
    assert!(msg.contains("needs at least one threshold"), "{msg}");
}

#[test]
fn several_load_hosts_search_their_total_rate() {
    let c = parse(&format!("{SEARCH}\n[cluster]\nsize = 2\nindex = 1\n")).unwrap();
    let s = c.workloads[0].schedule().unwrap();
    // The search is of the cluster's total: each member's spec is whole.
    assert_eq!(s.stages()[0].search_spec().unwrap().from, 500.0);
}

const NIGHTLY: &str = r#"
[target]
uri = "mongodb://db1:27017"

[[workloads]]
name = "w"
kind = "mixed"
timezone = "Europe/Berlin"
[[workloads.windows]]
when = "mon-fri 08:00-20:00"
name = "soak"
rate = 300
[[workloads.windows]]
when = "daily 02:00-03:00"
name = "nightly"
search = { from = 500, to = 20000, probe = "30s" }
[[workloads.thresholds]]
check = "p99 < 20ms"
stage = "nightly"
"#;

#[test]
fn a_window_searches_once_each_time_it_opens() {
    let c = parse(NIGHTLY).unwrap();
    let s = c.workloads[0].schedule().unwrap();
    let nightly = &s.stages()[1];
    assert_eq!(nightly.name(), "nightly");
    let spec = nightly.search_spec().expect("the window searches");
    assert_eq!((spec.from, spec.to), (500.0, 20_000.0));
    // At 02:30 Berlin (winter: 01:30 UTC) the search runs, with its spec,
    // until the window closes.
    let now = "2026-12-08T01:30:00Z".parse().unwrap();
    let o = s.occurrence(Duration::ZERO, now).unwrap();
    assert_eq!(o.index, Some(1));
    assert_eq!(o.duration, Duration::from_secs(1800));
    assert_eq!(o.until, Some("2026-12-08T02:00:00Z".parse().unwrap()));
    assert_eq!(o.stage.unwrap().search_spec(), Some(spec));
    // The soak window's level is a plain hold.
    assert!(s.stages()[0].search_spec().is_none());
}

#[test]
fn a_window_search_is_refused_with_the_key_at_fault() {
    let bad = |from: &str, to: &str| err_key(&NIGHTLY.replace(from, to));
    // Rate and search: which one?
    let (key, msg) = bad("name = \"nightly\"", "name = \"nightly\"\nrate = 100");
    assert_eq!(key.as_deref(), Some("workloads[0].windows[1]"), "{msg}");
    assert!(msg.contains("give one of"), "{msg}");
    let (key, msg) = bad("to = 20000", "to = 100");
    assert_eq!(
        key.as_deref(),
        Some("workloads[0].windows[1].search.to"),
        "{msg}"
    );
    // A window too short for the search's longest.
    let (key, msg) = bad("daily 02:00-03:00", "daily 02:00-02:05");
    assert_eq!(
        key.as_deref(),
        Some("workloads[0].windows[1].search"),
        "{msg}"
    );
    assert!(msg.contains("the window is open for 5m"), "{msg}");
    // No threshold applies in the window's stage.
    let (key, msg) = bad("stage = \"nightly\"", "stage = \"soak\"");
    assert_eq!(
        key.as_deref(),
        Some("workloads[0].windows[1].search"),
        "{msg}"
    );
    assert!(msg.contains("needs at least one threshold"), "{msg}");
}
