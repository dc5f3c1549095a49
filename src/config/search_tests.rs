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
    let (key, msg) = err_key(&format!("{SEARCH}\n[cluster]\nsize = 2\nindex = 0\n"));
    assert_eq!(
        key.as_deref(),
        Some("workloads[0].stages[0].search"),
        "{msg}"
    );
}
