//! Shared helpers for the tests that run Debian's Prometheus tools
//! (`promtool`, `prometheus`, `prometheus-node-exporter`): find a tool or
//! skip loudly, and the repository paths of the rules and dashboards.

#![allow(dead_code)] // each test crate uses a different subset

use std::path::{Path, PathBuf};

/// Where Debian's `prometheus` and `prometheus-node-exporter` packages put
/// their binaries (.ci/run installs both).
pub const PROMTOOL: &str = "/usr/bin/promtool";
pub const PROMETHEUS: &str = "/usr/bin/prometheus";
pub const NODE_EXPORTER: &str = "/usr/bin/prometheus-node-exporter";

/// Returns the tool's path if it is installed. Without it the test fails
/// when `CI` is set (the CI installs it, so a missing tool is a broken CI),
/// and otherwise prints a loud notice so a developer knows what was not run.
pub fn require_tool(path: &str) -> Option<PathBuf> {
    let p = PathBuf::from(path);
    if p.is_file() {
        return Some(p);
    }
    if std::env::var_os("CI").is_some() {
        panic!("{path} is missing and CI is set: install the Debian packages prometheus and prometheus-node-exporter");
    }
    eprintln!(
        "\n!!!!!!!! SKIPPED: {path} is not installed; this test did not run.\n\
         !!!!!!!! apt-get install -y prometheus prometheus-node-exporter\n"
    );
    None
}

/// `promtool check metrics` must accept the page: Prometheus parses it and
/// its linter finds no naming or type problems. Without promtool this is a
/// loud notice (or a failure in CI), as [`require_tool`] says.
pub fn check_metrics(page: &str) {
    use std::io::Write;
    use std::process::{Command, Stdio};
    let Some(promtool) = require_tool(PROMTOOL) else {
        return;
    };
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(page.as_bytes())
        .expect("write the page to promtool");
    let out = child.wait_with_output().expect("promtool ends");
    assert!(
        out.status.success(),
        "promtool check metrics failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The repository root (where Cargo.toml is).
pub fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The Prometheus rule files under etc/prometheus (every `*.yml` except the
/// example scrape config), sorted.
pub fn rule_files() -> Vec<PathBuf> {
    yml_files(&repo().join("etc/prometheus"))
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "prometheus.yml"))
        .collect()
}

/// The promtool unit test files under etc/prometheus/tests, sorted.
pub fn rule_test_files() -> Vec<PathBuf> {
    yml_files(&repo().join("etc/prometheus/tests"))
}

/// The dashboard JSON files under dashboards/, sorted.
pub fn dashboard_files() -> Vec<PathBuf> {
    files_with_ext(&repo().join("dashboards"), "json")
}

fn yml_files(dir: &Path) -> Vec<PathBuf> {
    files_with_ext(dir, "yml")
}

fn files_with_ext(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == ext))
        .collect();
    v.sort();
    assert!(!v.is_empty(), "no *.{ext} files in {}", dir.display());
    v
}

/// A dashboard file, parsed.
pub struct Dashboard {
    /// File name, for messages.
    pub file: String,
    pub json: serde_json::Value,
}

/// Reads and parses every dashboard under dashboards/.
pub fn dashboards() -> Vec<Dashboard> {
    dashboard_files()
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", p.display()));
            let json = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{} is not valid JSON: {e}", p.display()));
            Dashboard {
                file: p.file_name().unwrap().to_string_lossy().into_owned(),
                json,
            }
        })
        .collect()
}

/// Every panel of a dashboard, rows included, with the panels nested in
/// collapsed rows.
pub fn all_panels(dash: &serde_json::Value) -> Vec<&serde_json::Value> {
    let mut out = Vec::new();
    for p in dash["panels"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        out.push(p);
        if let Some(nested) = p["panels"].as_array() {
            out.extend(nested);
        }
    }
    out
}

/// One PromQL query of a dashboard: a panel target or an annotation.
#[derive(Debug, Clone)]
pub struct DashQuery {
    /// "file: panel title (refId)", for messages.
    pub source: String,
    pub expr: String,
}

/// The PromQL queries of a dashboard: every panel target and every
/// annotation query. Template variable queries are separate
/// ([`variable_queries`]): they are `label_values(...)`, not PromQL.
pub fn dashboard_queries(d: &Dashboard) -> Vec<DashQuery> {
    let mut out = Vec::new();
    for p in all_panels(&d.json) {
        for t in p["targets"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            out.push(DashQuery {
                source: format!(
                    "{}: panel {:?} ({})",
                    d.file,
                    p["title"].as_str().unwrap_or(""),
                    t["refId"].as_str().unwrap_or("?")
                ),
                expr: t["expr"].as_str().unwrap_or("").to_owned(),
            });
        }
    }
    for a in d.json["annotations"]["list"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        if let Some(expr) = a["expr"].as_str() {
            out.push(DashQuery {
                source: format!(
                    "{}: annotation {:?}",
                    d.file,
                    a["name"].as_str().unwrap_or("")
                ),
                expr: expr.to_owned(),
            });
        }
    }
    out
}

/// The template variables of a dashboard: (name, type, query text).
pub fn variables(dash: &serde_json::Value) -> Vec<(String, String, String)> {
    dash["templating"]["list"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .map(|v| {
            let query = match &v["query"] {
                serde_json::Value::String(s) => s.clone(),
                q => q["query"].as_str().unwrap_or("").to_owned(),
            };
            (
                v["name"].as_str().unwrap_or("").to_owned(),
                v["type"].as_str().unwrap_or("").to_owned(),
                query,
            )
        })
        .collect()
}

/// Grafana's own variables, which dashboards use without defining them.
pub const BUILTIN_VARIABLES: &[&str] = &["__rate_interval", "__interval", "__range", "__all"];

/// The template variable names a string refers to, in the forms Grafana
/// accepts: `$name`, `${name}`, `${name:format}` and `[[name]]`.
pub fn variable_refs(s: &str) -> Vec<String> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(i) = rest.find(['$', '[']) {
        let after = &rest[i + 1..];
        let name: String = if rest[i..].starts_with("${") {
            after[1..].chars().take_while(|&c| is_word(c)).collect()
        } else if rest[i..].starts_with("[[") {
            after[1..].chars().take_while(|&c| is_word(c)).collect()
        } else if rest[i..].starts_with('$') {
            after.chars().take_while(|&c| is_word(c)).collect()
        } else {
            String::new()
        };
        if !name.is_empty() {
            out.push(name);
        }
        rest = after;
    }
    out
}

/// Replaces template variable references with values, as Grafana does
/// before sending a query. A reference to a variable without a value is an
/// error, so a typo in a variable name cannot pass as an empty matcher.
pub fn fill_variables(expr: &str, values: &[(&str, &str)]) -> Result<String, String> {
    let mut out = expr.to_owned();
    // longest names first: `$instance` must not be taken for `$in…`
    let mut sorted: Vec<&(&str, &str)> = values.iter().collect();
    sorted.sort_by_key(|(n, _)| std::cmp::Reverse(n.len()));
    for (name, value) in &sorted {
        for pattern in [format!("${{{name}}}"), format!("[[{name}]]")] {
            out = out.replace(&pattern, value);
        }
        // `$name` only where the name ends (not a prefix of a longer name)
        let pat = format!("${name}");
        let mut res = String::with_capacity(out.len());
        let mut rest = out.as_str();
        while let Some(i) = rest.find(&pat) {
            let end = i + pat.len();
            let boundary = rest[end..]
                .chars()
                .next()
                .is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '_'));
            res.push_str(&rest[..i]);
            res.push_str(if boundary { value } else { &pat });
            rest = &rest[end..];
        }
        res.push_str(rest);
        out = res;
    }
    match variable_refs(&out).first() {
        Some(left) => Err(format!("no value for ${left} in {expr}")),
        None => Ok(out),
    }
}
