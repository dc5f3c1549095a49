//! The Prometheus rules in etc/prometheus: `promtool check rules`,
//! `promtool check config` on the example scrape config, `promtool test
//! rules` on the unit tests, and a check that every alert has summary and
//! description annotations and unit tests that see it fire and stay quiet.

use crate::common::prometheus_tools;

use std::process::{Command, Output};

use prometheus_tools::{repo, require_tool, rule_files, rule_test_files, PROMTOOL};

fn run(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn promtool_check_rules_accepts_the_rule_files() {
    let Some(promtool) = require_tool(PROMTOOL) else {
        return;
    };
    let out = run(Command::new(promtool)
        .arg("check")
        .arg("rules")
        .args(rule_files()));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("SUCCESS"), "{text}");
    assert!(!text.contains("FAILED"), "{text}");
}

#[test]
fn promtool_check_config_accepts_the_example_scrape_config() {
    let Some(promtool) = require_tool(PROMTOOL) else {
        return;
    };
    // check config also loads the rule files the config names.
    let out = run(Command::new(promtool)
        .arg("check")
        .arg("config")
        .arg(repo().join("etc/prometheus/prometheus.yml")));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("1 rule files found"), "{text}");
}

#[test]
fn promtool_unit_tests_pass() {
    let Some(promtool) = require_tool(PROMTOOL) else {
        return;
    };
    let files = rule_test_files();
    // promtool resolves rule_files relative to each test file.
    let out = run(Command::new(promtool).arg("test").arg("rules").args(&files));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.matches("SUCCESS").count(),
        files.len(),
        "every test file must report SUCCESS:\n{text}"
    );
}

/// One `- alert:` or `- record:` entry of a rules file, as lines.
struct Rule {
    alert: bool,
    name: String,
    lines: Vec<String>,
}

/// Splits a rules file into its rules by the `- alert:` / `- record:`
/// lines. Enough for our own files, whose layout `promtool check rules`
/// has already accepted; not a YAML parser.
fn rules_of(text: &str) -> Vec<Rule> {
    let mut rules: Vec<Rule> = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if let Some(name) = t.strip_prefix("- alert:") {
            rules.push(Rule {
                alert: true,
                name: name.trim().to_owned(),
                lines: Vec::new(),
            });
        } else if let Some(name) = t.strip_prefix("- record:") {
            rules.push(Rule {
                alert: false,
                name: name.trim().to_owned(),
                lines: Vec::new(),
            });
        } else if t.starts_with("- name:") {
            // a new group: the previous rule has ended
            rules.push(Rule {
                alert: false,
                name: String::new(),
                lines: Vec::new(),
            });
        } else if let Some(r) = rules.last_mut() {
            r.lines.push(t.to_owned());
        }
    }
    rules.retain(|r| !r.name.is_empty());
    rules
}

/// For each `alertname:` in promtool test files, whether its `exp_alerts`
/// expects alerts (true) or none (false).
fn alert_cases(text: &str) -> Vec<(String, bool)> {
    let lines: Vec<&str> = text.lines().map(str::trim).collect();
    let mut cases = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(name) = l.trim_start_matches("- ").strip_prefix("alertname:") else {
            continue;
        };
        let exp = lines[i + 1..]
            .iter()
            .find(|l| l.starts_with("exp_alerts:"))
            .unwrap_or_else(|| panic!("alertname {name} without exp_alerts"));
        cases.push((name.trim().to_owned(), *exp != "exp_alerts: []"));
    }
    cases
}

#[test]
fn every_alert_says_what_to_look_at_and_is_tested_firing_and_quiet() {
    let mut rules = Vec::new();
    for f in rule_files() {
        rules.extend(rules_of(&std::fs::read_to_string(&f).expect("read rules")));
    }
    let mut tests = String::new();
    for f in rule_test_files() {
        tests.push_str(&std::fs::read_to_string(&f).expect("read tests"));
    }
    let cases = alert_cases(&tests);
    let alerts: Vec<&Rule> = rules.iter().filter(|r| r.alert).collect();
    // the list: regression, below target, errors, p99, generator
    // (lag, missed), deployment down, mongoload down and absent
    assert!(alerts.len() >= 9, "only {} alerts", alerts.len());
    for a in &alerts {
        for key in ["summary:", "description:"] {
            assert!(
                a.lines.iter().any(|l| l.starts_with(key)),
                "alert {} has no {key} annotation",
                a.name
            );
        }
        let firing = cases.iter().any(|(n, f)| *n == a.name && *f);
        let quiet = cases.iter().any(|(n, f)| *n == a.name && !*f);
        assert!(firing, "no promtool test sees {} fire", a.name);
        assert!(quiet, "no promtool test sees {} stay quiet", a.name);
    }
    for r in rules.iter().filter(|r| !r.alert) {
        assert!(
            tests.contains(&format!("expr: {}\n", r.name)),
            "no promql_expr_test checks the recording rule {}",
            r.name
        );
    }
    for (name, _) in &cases {
        assert!(
            alerts.iter().any(|a| a.name == *name),
            "the tests name an alert {name} the rules do not define"
        );
    }
}

#[test]
fn rule_scanner_reads_alerts_records_and_cases() {
    let rules = rules_of(
        "groups:\n  - name: g\n    rules:\n      - record: a:b:c\n        expr: x\n      - alert: A\n        annotations:\n          summary: s\n",
    );
    assert_eq!(rules.len(), 2);
    assert!(!rules[0].alert && rules[0].name == "a:b:c");
    assert!(rules[1].alert && rules[1].name == "A");
    assert!(rules[1].lines.contains(&"summary: s".to_owned()));
    let cases = alert_cases("  - alertname: A\n    exp_alerts: []\n  - alertname: A\n    exp_alerts:\n    - exp_labels: {}\n");
    assert_eq!(cases, vec![("A".to_owned(), false), ("A".to_owned(), true)]);
}
