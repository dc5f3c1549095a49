//! End to end: every dashboard query and every rule expression returns data
//! from a real Prometheus scraping a real mongoload and node_exporter.
//!
//! The test starts Debian's `prometheus` (scrape and rule evaluation every
//! 1 s, the rules of etc/prometheus loaded), `prometheus-node-exporter`, and
//! `mongoload demo` (the simulator and the daemon under load), all on
//! loopback ports, waits for 25 scrapes of each, and then asks Prometheus'
//! HTTP API (`/api/v1/query`, evaluated now):
//!
//! - every panel target and annotation query of every dashboard, with the
//!   template variables filled as Grafana would (`job`, `run` = ".+" as "All", `instance` = this
//!   daemon, `workload` = one seen in the data, `db_host` = this
//!   node_exporter, `device` = `.+` as "All", `$__rate_interval` = 15s,
//!   `$__interval` = 5s, `$__range` = 30s), must return at least one series;
//! - every `label_values(selector, label)` variable query, run as
//!   `count by (label) (selector)`, must return a series carrying the label;
//! - every rule must be healthy in `/api/v1/rules` (evaluated without
//!   error); every recording rule's expression and its recorded series must
//!   return at least one series;
//! - every alert expression must evaluate without error. A healthy system
//!   makes an alert expression return nothing, so emptiness proves nothing;
//!   instead the expression is cut at its top-level comparison and set
//!   operators (`> 1`, `==`, `and`, `unless`, ...), parenthesised groups and
//!   `absent(...)` are opened, numeric thresholds are dropped, and `offset
//!   1d` / `offset 1w` are removed (a fresh Prometheus has no history a day
//!   back). Each remaining operand — the alert's condition without its
//!   threshold — must return at least one series. A misspelt metric, label
//!   or matcher value then shows as an empty operand.
//!
//! A misspelt metric or label name in a dashboard or a rule therefore fails
//! this test. Children are killed when the test ends, panics included.
//!
//! Set `MONGOLOAD_E2E_METRICS_ADDR=host:port` to scrape an already running
//! mongoload instead of starting `mongoload demo`.

use crate::common::prometheus_tools;
use crate::common::{free_port, get_blocking, spawn_sim};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use prometheus_tools::{
    dashboard_queries, dashboards, fill_variables, require_tool, rule_files, variables,
    NODE_EXPORTER, PROMETHEUS,
};
use serde_json::Value;

/// The families only a mongos gives data for: their panels, annotations and
/// alert are checked against the sharded simulator
/// ([`the_shards_row_and_imbalance_read_a_sharded_cluster`]).
const SHARDED_ONLY: [&str; 3] = [
    "mongoload_shard_documents",
    "mongoload_shard_primary_info",
    "mongoload_shard_chunk_migrations_total",
];

fn sharded_only(expr: &str) -> bool {
    SHARDED_ONLY.iter().any(|f| expr.contains(f))
}

/// The families only a capacity search exports: the demo runs none, so
/// their panels and alert only have to evaluate there; they are checked
/// with data in [`a_capacity_drop_fires_the_alert_in_a_real_prometheus`].
fn search_only(expr: &str) -> bool {
    expr.contains("mongoload_capacity_")
}

/// How many 1 s scrapes to wait for before querying: enough for the 5 m
/// rates of the rules (two samples) and the 15 s dashboard rates.
const SCRAPES: u64 = 25;

/// Child processes, killed and reaped on drop (also when a test panics).
struct Children(Vec<(&'static str, Child)>);

impl Children {
    /// Panics with the child's log if it has exited: a dead child would
    /// otherwise show only as missing data.
    fn assert_running(&mut self, logs: &Path) {
        for (name, child) in &mut self.0 {
            if let Ok(Some(status)) = child.try_wait() {
                let log =
                    std::fs::read_to_string(logs.join(format!("{name}.log"))).unwrap_or_default();
                panic!("{name} exited early ({status}):\n{log}");
            }
        }
    }
}

impl Children {
    /// The process id of child `name`.
    fn pid(&self, name: &str) -> u32 {
        self.0
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, c)| c.id())
            .unwrap_or_else(|| panic!("no child {name}"))
    }
}

impl Drop for Children {
    fn drop(&mut self) {
        for (_, child) in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn spawn(children: &mut Children, logs: &Path, name: &'static str, cmd: &mut Command) {
    let log = std::fs::File::create(logs.join(format!("{name}.log"))).expect("log file");
    let child = cmd
        .stdin(Stdio::null())
        .stdout(log.try_clone().expect("log file"))
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {name} ({cmd:?}): {e}"));
    children.0.push((name, child));
}

/// `mongoload run --config CONFIG` with its log at `level`, as child
/// "mongoload" (its log in `logs/mongoload.log`).
fn spawn_run(children: &mut Children, logs: &Path, config: &Path, level: &str) {
    spawn(
        children,
        logs,
        "mongoload",
        Command::new(env!("CARGO_BIN_EXE_mongoload"))
            .args(["run", "--config"])
            .arg(config)
            .env("RUST_LOG", level),
    );
}

/// Percent-encodes a query parameter value (RFC 3986 unreserved kept).
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A GET on loopback: status and body.
fn http_get(addr: &str, target: &str) -> Result<(u16, String), String> {
    let addr = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    get_blocking(addr, target).map(|r| (r.status, r.body))
}

/// Starts Prometheus on a free loopback port: scrapes and rule evaluation
/// every second, the rules of etc/prometheus loaded, one scrape job per
/// `(job, address)`.
fn start_prometheus(
    children: &mut Children,
    logs: &Path,
    binary: &Path,
    jobs: &[(&str, &str)],
) -> Prometheus {
    start_prometheus_with(children, logs, binary, jobs, None)
}

/// [`start_prometheus`] with the rules' 5-minute range (`[5m]`, in every
/// rule file of etc/prometheus) replaced by `window`: a test that needs a
/// full window of data then waits for that instead of 5 minutes. The
/// expressions are the shipped ones otherwise, and so are the record
/// names (`…:rate5m` then holds a rate over `window`).
fn start_prometheus_with(
    children: &mut Children,
    logs: &Path,
    binary: &Path,
    jobs: &[(&str, &str)],
    window: Option<&str>,
) -> Prometheus {
    let rules: Vec<String> = rule_files()
        .iter()
        .map(|p| {
            let Some(window) = window else {
                return format!("  - {}\n", p.display());
            };
            let text = std::fs::read_to_string(p).expect("read a rule file");
            let copy = logs.join(p.file_name().expect("a rule file's name"));
            std::fs::write(&copy, text.replace("[5m]", &format!("[{window}]")))
                .expect("write the rule file's copy");
            format!("  - {}\n", copy.display())
        })
        .collect();
    let scrapes: Vec<String> = jobs
        .iter()
        .map(|(job, addrs)| {
            // Several targets of one job: comma-separated.
            let targets: Vec<String> = addrs.split(',').map(|a| format!("'{a}'")).collect();
            format!(
                "  - job_name: {job}\n    static_configs:\n      - targets: [{}]\n",
                targets.join(", ")
            )
        })
        .collect();
    launch_prometheus(children, logs, binary, &rules.concat(), &scrapes.concat())
}

/// Prometheus on a free loopback port with `rules` (the `rule_files`
/// entries) and `scrapes` (the `scrape_configs` entries) as written.
fn launch_prometheus(
    children: &mut Children,
    logs: &Path,
    binary: &Path,
    rules: &str,
    scrapes: &str,
) -> Prometheus {
    let config = logs.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
             rule_files:\n{rules}scrape_configs:\n{scrapes}",
        ),
    )
    .expect("write prometheus.yml");
    let prom = Prometheus {
        addr: free_port().to_string(),
        at: None,
    };
    spawn(
        children,
        logs,
        "prometheus",
        Command::new(binary)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                logs.join("data").display()
            ))
            .arg(format!("--web.listen-address={}", prom.addr)),
    );
    prom
}

struct Prometheus {
    addr: String,
    /// Evaluation time (Unix seconds) for every query once set, so related
    /// queries see the same instant.
    at: Option<f64>,
}

impl Prometheus {
    fn api(&self, target: &str) -> Result<Value, String> {
        let (_, body) = http_get(&self.addr, target)?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{e}: {body}"))?;
        if v["status"] != "success" {
            return Err(format!("{}: {}", v["errorType"], v["error"]));
        }
        Ok(v["data"].clone())
    }

    /// An instant query now; the result series (vector) or an error.
    fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let time = self.at.map(|t| format!("&time={t:.3}")).unwrap_or_default();
        let data = self.api(&format!("/api/v1/query?query={}{time}", encode(expr)))?;
        match data["resultType"].as_str() {
            Some("vector") | Some("matrix") => {
                Ok(data["result"].as_array().cloned().unwrap_or_default())
            }
            // a scalar or string is one value
            _ => Ok(vec![data["result"].clone()]),
        }
    }
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool, mut check: impl FnMut()) {
    let start = Instant::now();
    while !ok() {
        check();
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
}

// ---------------------------------------------------------------------------
// Cutting an alert expression into the operands of its condition.

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':' || b == b'.'
}

/// Splits a PromQL expression at its top level (outside any brackets and
/// strings) on comparison operators and `and`/`or`/`unless`, and strips the
/// `bool`, `on(...)`, `ignoring(...)` and `group_*(...)` modifiers that
/// follow an operator. Arithmetic stays inside the operands.
fn split_top_level(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let (mut parts, mut start, mut depth, mut i) = (Vec::new(), 0, 0i32, 0);
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            if c == b'\\' {
                i += 1;
            } else if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        match c {
            b'"' | b'\'' | b'`' => quote = Some(c),
            b'(' | b'{' | b'[' => depth += 1,
            b')' | b'}' | b']' => depth -= 1,
            _ if depth > 0 => {}
            b'=' | b'!' | b'>' | b'<' => {
                let len = if b.get(i + 1) == Some(&b'=') { 2 } else { 1 };
                if len == 1 && (c == b'=' || c == b'!') {
                    i += 1; // not an operator at the top level
                    continue;
                }
                parts.push(expr[start..i].to_owned());
                i += len;
                start = i;
                continue;
            }
            _ if is_ident(c) => {
                let from = i;
                while i < b.len() && is_ident(b[i]) {
                    i += 1;
                }
                if matches!(&expr[from..i], "and" | "or" | "unless") {
                    parts.push(expr[start..from].to_owned());
                    start = i;
                }
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    parts.push(expr[start..].to_owned());
    parts.into_iter().map(|p| strip_modifiers(&p)).collect()
}

/// Removes leading `bool`, `on(...)`, `ignoring(...)`, `group_left(...)`,
/// `group_right(...)`.
fn strip_modifiers(s: &str) -> String {
    let mut s = s.trim();
    loop {
        let word_end = s
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .unwrap_or(s.len());
        let word = &s[..word_end];
        if !matches!(
            word,
            "bool" | "on" | "ignoring" | "group_left" | "group_right"
        ) {
            return s.to_owned();
        }
        let rest = s[word_end..].trim_start();
        s = match (word, rest.starts_with('(')) {
            (_, true) if word != "bool" => match rest.find(')') {
                Some(close) => rest[close + 1..].trim_start(),
                None => return s.to_owned(),
            },
            _ => rest,
        };
    }
}

/// The inside of `(...)` when the parentheses enclose the whole string.
fn unwrap_parens(s: &str) -> Option<&str> {
    let inner = s.strip_prefix('(')?.strip_suffix(')')?;
    // the first '(' must close at the end, not earlier as in "(a) + (b)"
    let mut depth = 0;
    for c in inner.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return None,
            ')' => depth -= 1,
            _ => {}
        }
    }
    Some(inner)
}

fn normalise(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The operands of an alert's condition without its thresholds and
/// offsets: each should return series on a system that produces the
/// metrics, healthy or not.
fn alert_operands(expr: &str) -> Vec<String> {
    let expr = expr.trim();
    let parts = split_top_level(expr);
    if parts.len() > 1 {
        return parts
            .iter()
            .filter(|p| p.trim().parse::<f64>().is_err())
            .flat_map(|p| alert_operands(p))
            .collect();
    }
    if let Some(inner) = unwrap_parens(expr) {
        return alert_operands(inner);
    }
    if let Some(inner) = expr
        .strip_prefix("absent")
        .map(str::trim_start)
        .and_then(unwrap_parens)
    {
        return alert_operands(inner);
    }
    vec![normalise(&strip_offsets(expr))]
}

/// Removes `offset <duration>` modifiers, keeping a bracket that closes
/// right after the duration ("(x offset 1d)" becomes "(x )").
fn strip_offsets(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("offset") {
        let before_ok = i == 0 || !is_ident(rest.as_bytes()[i - 1]);
        let after = &rest[i + "offset".len()..];
        if before_ok && after.starts_with(char::is_whitespace) {
            out.push_str(&rest[..i]);
            let dur = after.trim_start();
            let end = dur
                .find(|c: char| !c.is_ascii_alphanumeric())
                .unwrap_or(dur.len());
            rest = &dur[end..];
        } else {
            out.push_str(&rest[..i + "offset".len()]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// `label_values(selector, label)` as `(selector, label)`; `label_values(label)`
/// as `("{label!=\"\"}", label)`.
fn parse_label_values(q: &str) -> Option<(String, String)> {
    let inner = q.trim().strip_prefix("label_values(")?.strip_suffix(')')?;
    match inner.rsplit_once(',') {
        Some((sel, label)) => Some((sel.trim().to_owned(), label.trim().to_owned())),
        None => Some((
            format!("{{{}!=\"\"}}", inner.trim()),
            inner.trim().to_owned(),
        )),
    }
}

// ---------------------------------------------------------------------------

#[test]
fn alert_operands_drop_thresholds_offsets_and_modifiers() {
    let ops = |e| alert_operands(e);
    assert_eq!(ops("max by (job) (lag) > 1"), vec!["max by (job) (lag)"]);
    assert_eq!(ops(r#"absent(up{job="m"})"#), vec![r#"up{job="m"}"#]);
    assert_eq!(
        ops(r#"x{a!="b", c=~"<|>"} >= 0.5"#),
        vec![r#"x{a!="b", c=~"<|>"}"#]
    );
    assert_eq!(
        ops("(a < 0.8 * (a offset 1d)) and (b == (b offset 1w))"),
        vec!["a", "0.8 * (a )", "b", "b"]
    );
    assert_eq!(
        ops("a / on (job) group_left () b > bool 2 unless ignoring(op) c"),
        vec!["a / on (job) group_left () b", "c"]
    );
    assert_eq!(
        ops("sort_desc(x) or vector(1)"),
        vec!["sort_desc(x)", "vector(1)"]
    );
    assert_eq!(ops("(a) + (b) != 0"), vec!["(a) + (b)"]);
    assert_eq!(
        ops(r#"up{job="mongoload"} == 0"#),
        vec![r#"up{job="mongoload"}"#]
    );
}

#[test]
fn label_values_queries_are_parsed() {
    assert_eq!(
        parse_label_values(r#"label_values(m{job=~"$job"}, instance)"#),
        Some((r#"m{job=~"$job"}"#.to_owned(), "instance".to_owned()))
    );
    assert_eq!(
        parse_label_values("label_values(job)"),
        Some((r#"{job!=""}"#.to_owned(), "job".to_owned()))
    );
    assert_eq!(parse_label_values("query_result(x)"), None);
}

#[test]

fn dashboards_and_rules_return_data_from_a_real_prometheus() {
    let Some(prometheus) = require_tool(PROMETHEUS) else {
        return;
    };
    // It reads rates and stage times: not beside other daemons.
    let Some(node_exporter) = require_tool(NODE_EXPORTER) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let logs = tmp.path();
    let mut children = Children(Vec::new());

    let node_addr = free_port().to_string();
    spawn(
        &mut children,
        logs,
        "node_exporter",
        Command::new(node_exporter).arg(format!("--web.listen-address={node_addr}")),
    );
    let demo = std::env::var("MONGOLOAD_E2E_METRICS_ADDR").is_err();
    let daemon_addr = match std::env::var("MONGOLOAD_E2E_METRICS_ADDR") {
        Ok(addr) => addr,
        Err(_) => {
            let addr = free_port().to_string();
            spawn(
                &mut children,
                logs,
                "mongoload",
                Command::new(env!("CARGO_BIN_EXE_mongoload"))
                    .args(["demo", "--http-listen", &addr])
                    .arg("--run-log")
                    .arg(logs.join("demo.jsonl"))
                    .env("RUST_LOG", "warn"),
            );
            addr
        }
    };

    let mut prom = start_prometheus(
        &mut children,
        logs,
        &prometheus,
        &[("mongoload", &daemon_addr), ("node", &node_addr)],
    );

    let started = Instant::now();
    wait_for(
        "Prometheus to be ready",
        Duration::from_secs(30),
        || http_get(&prom.addr, "/-/ready").is_ok_and(|(s, _)| s == 200),
        || children.assert_running(logs),
    );
    // the first value of an instant query, 0 when it has none
    let value = |q: &str| {
        prom.query(q)
            .ok()
            .and_then(|r| {
                r.first()
                    .and_then(|s| s["value"][1].as_str()?.parse::<f64>().ok())
            })
            .unwrap_or(0.0)
    };
    // SCRAPES successful scrapes of both targets
    let scraped = |job: &str| value(&format!("sum_over_time(up{{job=\"{job}\"}}[1m])"));
    wait_for(
        &format!("{SCRAPES} scrapes of mongoload and node_exporter"),
        Duration::from_secs(SCRAPES + 30),
        || scraped("mongoload") >= SCRAPES as f64 && scraped("node") >= SCRAPES as f64,
        || children.assert_running(logs),
    );

    // the demo's replica set fails over every 20 s: the failover panels,
    // the annotation and the new alerts are checked during a run that has
    // had one (a primary change and the write outage around it)
    if demo {
        wait_for(
            "a failover and its write outage in the demo",
            Duration::from_secs(60),
            || {
                value(r#"sum(mongoload_primary_changes_total{job="mongoload"})"#) >= 1.0
                    && value(r#"sum(mongoload_write_outage_seconds_count{job="mongoload"})"#) >= 1.0
            },
            || children.assert_running(logs),
        );
    }

    // one instant for all queries, a little in the past so every target's
    // latest scrape is in
    let now = unix_now();
    prom.at = Some(now - 1.0);
    let workloads = prom
        .query(r#"count by (workload) (mongoload_operations_total{job="mongoload"})"#)
        .expect("workloads");
    let workload = workloads
        .iter()
        .filter_map(|s| s["metric"]["workload"].as_str())
        .min()
        .unwrap_or_else(|| panic!("mongoload exports no mongoload_operations_total"))
        .to_owned();
    let values = [
        ("datasource", "prometheus"),
        ("job", "mongoload"),
        // "All" runs (the variable's allValue).
        ("run", ".+"),
        ("instance", daemon_addr.as_str()),
        ("workload", workload.as_str()),
        ("db_host", node_addr.as_str()),
        ("device", ".+"),
        ("__rate_interval", "15s"),
        ("__interval", "5s"),
        ("__range", "30s"),
    ];

    let mut failures: Vec<String> = Vec::new();
    let mut checked = 0;
    let mut expect_series = |what: &str, expr: &str, failures: &mut Vec<String>| {
        checked += 1;
        match prom.query(expr) {
            Ok(r) if !r.is_empty() => {}
            Ok(_) => failures.push(format!("{what}: no series for {expr}")),
            Err(e) => failures.push(format!("{what}: {e} in {expr}")),
        }
    };

    for d in dashboards() {
        for q in dashboard_queries(&d) {
            match fill_variables(&q.expr, &values) {
                // The demo is a replica set: documents per shard are
                // checked against a sharded cluster below; here they only
                // have to evaluate.
                Ok(expr) if demo && (sharded_only(&expr) || search_only(&expr)) => {
                    if let Err(e) = prom.query(&expr) {
                        failures.push(format!("{}: {e} in {expr}", q.source));
                    }
                }
                Ok(expr) => expect_series(&q.source, &expr, &mut failures),
                Err(e) => failures.push(format!("{}: {e}", q.source)),
            }
        }
        for (name, kind, query) in variables(&d.json) {
            if kind != "query" {
                continue;
            }
            let Some((sel, label)) = parse_label_values(&query) else {
                failures.push(format!(
                    "{}: variable {name}: not label_values(...): {query}",
                    d.file
                ));
                continue;
            };
            match fill_variables(&sel, &values)
                .map(|s| prom.query(&format!("count by ({label}) ({s})")))
            {
                Ok(Ok(r)) if r.iter().any(|s| s["metric"][&label].is_string()) => {}
                other => failures.push(format!(
                    "{}: variable {name} ({query}) lists nothing: {other:?}",
                    d.file
                )),
            }
        }
    }

    // the per-operation host cost divides node_exporter series by
    // mongoload's: check the join gives exactly host rate / op rate per host
    let mut cost_checked = 0;
    for d in dashboards() {
        for q in dashboard_queries(&d) {
            let Some((host, ops)) = q.expr.split_once(" / on () group_left () ") else {
                continue;
            };
            let fill = |e: &str| fill_variables(e, &values).expect("filled above");
            let value = |s: &Value| s["value"][1].as_str().and_then(|v| v.parse::<f64>().ok());
            let (Ok(full), Ok(host), Ok(ops)) = (
                prom.query(&fill(&q.expr)),
                prom.query(&fill(host)),
                prom.query(&fill(ops)),
            ) else {
                failures.push(format!("{}: a part does not evaluate", q.source));
                continue;
            };
            let ops = ops.first().and_then(value).unwrap_or(f64::NAN);
            assert!(
                ops > 0.0,
                "{}: no operations/s ({ops}) in {}",
                q.source,
                q.expr
            );
            assert_eq!(
                full.len(),
                host.len(),
                "{}: one result per database host",
                q.source
            );
            for h in &host {
                let got = full
                    .iter()
                    .find(|f| f["metric"] == h["metric"])
                    .and_then(value)
                    .unwrap_or(f64::NAN);
                let want = value(h).unwrap_or(f64::NAN) / ops;
                assert!(
                    (got - want).abs() <= 1e-9 * want.abs().max(1.0),
                    "{}: {got} != host {} / ops {ops}",
                    q.source,
                    h["value"][1]
                );
            }
            cost_checked += 1;
        }
    }
    assert!(
        cost_checked >= 4,
        "only {cost_checked} per-operation cost queries"
    );

    // the rules: evaluated without error; recording rules and alert
    // conditions return series
    let mut rules_seen = 0;
    wait_for(
        "every rule to be evaluated",
        Duration::from_secs(10),
        || {
            prom.api("/api/v1/rules").is_ok_and(|d| {
                d["groups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .flat_map(|g| g["rules"].as_array().into_iter().flatten())
                    .all(|r| r["health"] != "unknown")
            })
        },
        || {},
    );
    let data = prom.api("/api/v1/rules").expect("rules");
    for g in data["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            rules_seen += 1;
            let name = r["name"].as_str().unwrap_or("?");
            let expr = r["query"].as_str().unwrap_or("");
            if r["health"] != "ok" {
                failures.push(format!(
                    "rule {name}: health {} {}",
                    r["health"], r["lastError"]
                ));
            }
            if r["type"] == "recording" {
                expect_series(&format!("recording rule {name}"), expr, &mut failures);
                expect_series(&format!("recorded series {name}"), name, &mut failures);
            } else {
                if let Err(e) = prom.query(expr) {
                    failures.push(format!("alert {name}: {e}"));
                }
                let operands = alert_operands(expr);
                assert!(!operands.is_empty(), "alert {name}: no operands in {expr}");
                if demo && (sharded_only(expr) || search_only(expr)) {
                    continue;
                }
                for op in operands {
                    expect_series(&format!("alert {name} operand"), &op, &mut failures);
                }
            }
        }
    }
    let rule_count: usize = rule_files()
        .iter()
        .map(|p| {
            let t = std::fs::read_to_string(p).expect("rules");
            t.lines()
                .filter(|l| {
                    l.trim_start().starts_with("- alert:")
                        || l.trim_start().starts_with("- record:")
                })
                .count()
        })
        .sum();
    assert_eq!(rules_seen, rule_count, "Prometheus did not load every rule");

    eprintln!(
        "checked {checked} queries against Prometheus after {:?} (workload {workload})",
        started.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of the queries failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The sysbench workload's fixed rate in the test below (transactions/s).
const SYSBENCH_RATE: f64 = 20.0;

/// A composite workload read through the real Prometheus: a sysbench
/// workload at a fixed open-loop rate (each transaction 18 requests) must
/// show that rate, not 18 times it, in the overview's "Achieved ops/s"
/// panel query and in the recording rule `workload:mongoload_operations:rate5m`
/// (within 2 %), while its point selects show 10 times it among the
/// requests. The rules' 5-minute window is 1 minute here
/// ([`start_prometheus_with`]), so the test scrapes for a little over a
/// minute of the stage instead of 5 (1,200 transactions in the window,
/// 60 scrapes: the series began 20 s before it, so nothing is
/// extrapolated from a series' start, and a transaction more or less is
/// 0.1 % of the figure against the 2 % allowed). The panel is read with
/// `$__rate_interval` = 1m (at 1 s scrapes Grafana's would be shorter and
/// noisier; the query is the same).
#[test]
fn a_sysbench_rate_reads_right_in_the_dashboard_and_the_recording_rule() {
    let Some(prometheus) = require_tool(PROMETHEUS) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let logs = tmp.path();
    let mut children = Children(Vec::new());
    let sim_port = free_port().port();
    let _sim = spawn_sim(sim_port, &[]);
    let sim_addr = format!("127.0.0.1:{sim_port}");
    let daemon_addr = free_port().to_string();
    let config = logs.join("mongoload.toml");
    std::fs::write(
        &config,
        format!(
            "[target]\nuri = \"mongodb://{sim_addr}\"\ndatabase = \"e2e\"\n\
             [http]\nlisten = \"{daemon_addr}\"\n\
             [[workloads]]\nname = \"sb\"\nkind = \"sysbench\"\nmax_inflight = 32\nseed = 1\n\
             [workloads.sysbench]\ncollections = 2\ndocs_per_collection = 500\n\
             [[workloads.stages]]\nname = \"fixed\"\nrate = {SYSBENCH_RATE}\nduration = \"1h\"\n"
        ),
    )
    .expect("write mongoload.toml");
    spawn_run(&mut children, logs, &config, "warn");
    let mut prom = start_prometheus_with(
        &mut children,
        logs,
        &prometheus,
        &[("mongoload", &daemon_addr)],
        Some("1m"),
    );
    let value = first_value;
    // The stage has run at its rate for the whole 1-minute window, and
    // the series began before it (a series that starts inside a rate's
    // window is extrapolated by half a scrape only, which would read low):
    // the target gauge was scraped for 80 s and at the rate for the last
    // minute.
    let target = r#"mongoload_target_rate{job="mongoload",workload="sb"}"#;
    wait_for(
        "a minute of the sysbench stage in Prometheus",
        Duration::from_secs(200),
        || {
            let n = value(prom.query(&format!("count_over_time({target}[2m])")));
            let min = value(prom.query(&format!("min_over_time({target}[1m])")));
            n >= 80.0 && min == SYSBENCH_RATE
        },
        || children.assert_running(logs),
    );
    // Let the recording rule and the rates see one more scrape of it.
    std::thread::sleep(Duration::from_secs(3));
    let now = unix_now();
    prom.at = Some(now - 1.0);

    let overview = dashboards()
        .into_iter()
        .find(|d| d.file.contains("overview"))
        .expect("the overview dashboard");
    let achieved = dashboard_queries(&overview)
        .into_iter()
        .find(|q| q.source.contains("Achieved ops/s"))
        .expect("the Achieved ops/s panel");
    let values = [
        ("job", "mongoload"),
        ("instance", daemon_addr.as_str()),
        ("workload", "sb"),
        ("__rate_interval", "1m"),
    ];
    let expr = fill_variables(&achieved.expr, &values).expect("fills");
    let panel = value(prom.query(&expr));
    let rule = value(prom.query(r#"workload:mongoload_operations:rate5m{workload="sb"}"#));
    let point_selects =
        value(prom.query(
            r#"workload_op_step:mongoload_requests:rate5m{workload="sb",step="point_select"}"#,
        ));
    eprintln!("sysbench at {SYSBENCH_RATE}/s: panel {panel}, rate5m (over 1m) {rule}, point selects {point_selects}/s");
    let within = |v: f64, want: f64| (v - want).abs() <= 0.02 * want;
    assert!(
        within(panel, SYSBENCH_RATE),
        "Achieved ops/s {panel} for {SYSBENCH_RATE}/s: {expr}"
    );
    assert!(
        within(rule, SYSBENCH_RATE),
        "rate5m {rule} for {SYSBENCH_RATE}/s"
    );
    assert!(
        within(point_selects, 10.0 * SYSBENCH_RATE),
        "point selects {point_selects}/s for {SYSBENCH_RATE} transactions/s"
    );
}

/// How many members of job `mongoload` have a sample of their scrapes
/// within `slack` seconds of each end of the `window` (seconds) before
/// [`Prometheus::at`]: for those a `rate()` over the window is measured,
/// not extrapolated over a gap that missed scrapes left at an end.
fn members_with_window_edges(prom: &Prometheus, window: f64, slack: f64) -> usize {
    let at = prom.at.expect("an evaluation time");
    let series = prom
        .query(&format!(
            r#"mongoload_target_rate{{job="mongoload",workload="mix"}}[{window}s]"#
        ))
        .unwrap_or_default();
    series
        .iter()
        .filter(|s| {
            let stamps: Vec<f64> = s["values"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v[0].as_f64())
                .collect();
            let first = stamps.iter().copied().fold(f64::INFINITY, f64::min);
            let last = stamps.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            first <= at - window + slack && last >= at - slack
        })
        .count()
}

/// Now, in Unix seconds (an evaluation time for [`Prometheus::at`]).
fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64()
}

/// The first value of an instant query's result (NaN when there is none).
fn first_value(r: Result<Vec<Value>, String>) -> f64 {
    r.ok()
        .and_then(|r| {
            r.first()
                .and_then(|s| s["value"][1].as_str()?.parse::<f64>().ok())
        })
        .unwrap_or(f64::NAN)
}

/// The total rate of the three-member cluster test.
const CLUSTER_RATE: f64 = 300.0;

/// Three members of a `[cluster]` (separate processes) scraped as three
/// targets of one job: the cluster recording rules see three members of
/// three in one stage, the target-rate rule and the overview's "Members
/// (cluster)" totals add the members' shares up to the configured rate,
/// the per-member query has one series per member, and when a member
/// stops the members count drops (what MongoloadClusterMemberMissing
/// compares). About 40 s.
#[test]
fn three_cluster_members_add_up_in_the_rules_and_the_overview() {
    let Some(prometheus) = require_tool(PROMETHEUS) else {
        return;
    };
    // It reads rates and stage times: not beside other daemons.
    let tmp = tempfile::tempdir().expect("temp dir");
    let logs = tmp.path();
    let mut children = Children(Vec::new());
    let sim_port = free_port().port();
    let _sim = spawn_sim(sim_port, &[]);
    let sim_addr = format!("127.0.0.1:{sim_port}");
    let addrs: Vec<String> = (0..3).map(|_| free_port().to_string()).collect();
    for (i, name) in ["member0", "member1", "member2"].into_iter().enumerate() {
        let config = logs.join(format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "[target]\nuri = \"mongodb://{sim_addr}\"\ndatabase = \"e2ecluster\"\n\
                 [http]\nlisten = \"{}\"\n[cluster]\nsize = 3\nindex = {i}\n\
                 [[workloads]]\nname = \"mix\"\nkind = \"mixed\"\nseed = 1\n\
                 [workloads.mixed]\ndoc_size = 256\ninitial_docs = 300\n\
                 [[workloads.stages]]\nname = \"fixed\"\nrate = {CLUSTER_RATE}\nduration = \"1h\"\n",
                addrs[i]
            ),
        )
        .expect("write the member's config");
        spawn(
            &mut children,
            logs,
            name,
            Command::new(env!("CARGO_BIN_EXE_mongoload"))
                .args(["run", "--config"])
                .arg(&config)
                .env("RUST_LOG", "warn"),
        );
    }
    let mut prom = start_prometheus(
        &mut children,
        logs,
        &prometheus,
        &[("mongoload", &addrs.join(","))],
    );
    let value = first_value;
    // Every query below reads one instant: one where each member has run
    // at its rate for 20 s (for the 15 s rates) with at least 12 scrapes
    // in them, and whose last three scrapes all answered, so the recording
    // rules evaluated in the last second saw all three. A scrape that
    // fails leaves a member stale until its next one: on a loaded machine
    // the daemon's HTTP thread, at a lower priority than everything else
    // the suite runs (the side runtime's nice +10), misses the 1 s scrape
    // timeout now and then.
    // Each new reading is printed: a timeout then says which part was missing.
    let mut last = String::new();
    let started = Instant::now();
    loop {
        prom.at = Some(unix_now());
        let shares = value(prom.query(
            r#"count(min_over_time(mongoload_target_rate{job="mongoload",workload="mix"}[20s]) > 0)"#,
        ));
        let scraped = value(prom.query(
            r#"min(count_over_time(mongoload_target_rate{job="mongoload",workload="mix"}[20s]))"#,
        ));
        let tried = value(prom.query(r#"min(count_over_time(up{job="mongoload"}[20s]))"#));
        let answered = value(prom.query(r#"count(min_over_time(up{job="mongoload"}[3s]) == 1)"#));
        let edges = members_with_window_edges(&prom, 15.0, 1.5);
        if shares == 3.0 && scraped >= 12.0 && tried >= 19.0 && answered == 3.0 && edges == 3 {
            break;
        }
        let now = format!(
            "members at their rate for 20 s: {shares}, fewest scrapes in 20 s: {scraped} \
             (tried: {tried}), members whose last 3 s of scrapes answered: {answered}, \
             members with samples at both ends of the 15 s rate window: {edges}"
        );
        if now != last {
            // Per member: scrapes that answered of those tried in 20 s,
            // the slowest scrape, and the target rate now.
            let per = |expr: &str| {
                let r = prom.query(expr).unwrap_or_default();
                let mut v: Vec<String> = r
                    .iter()
                    .map(|s| {
                        format!(
                            "{}={}",
                            s["metric"]["instance"].as_str().unwrap_or("?"),
                            s["value"][1].as_str().unwrap_or("?")
                        )
                    })
                    .collect();
                v.sort();
                v.join(" ")
            };
            eprintln!(
                "{now}; answered: {}; tried: {}; slowest scrape: {}; target rate: {}",
                per(r#"sum_over_time(up{job="mongoload"}[20s])"#),
                per(r#"count_over_time(up{job="mongoload"}[20s])"#),
                per(r#"max_over_time(scrape_duration_seconds{job="mongoload"}[20s])"#),
                per(r#"mongoload_target_rate{job="mongoload",workload="mix"}"#),
            );
            last = now;
        }
        children.assert_running(logs);
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "timed out after 120 s waiting for 20 s of the three members' stage in Prometheus"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert_eq!(value(prom.query("job:mongoload_cluster_size:max")), 3.0);
    assert_eq!(
        value(prom.query("job:mongoload_cluster_members:count")),
        3.0
    );
    assert_eq!(
        value(prom.query(r#"workload:mongoload_cluster_stages:count{workload="mix"}"#)),
        1.0
    );
    assert_eq!(
        value(prom.query(r#"workload:mongoload_target_rate:sum{workload="mix"}"#)),
        CLUSTER_RATE
    );
    let overview = dashboards()
        .into_iter()
        .find(|d| d.file.contains("overview"))
        .expect("the overview dashboard");
    let queries = dashboard_queries(&overview);
    let values = [
        ("job", "mongoload"),
        ("instance", ".+"),
        ("workload", "mix"),
        ("__rate_interval", "15s"),
    ];
    let panel = |title: &str, ref_id: &str| {
        let q = queries
            .iter()
            .find(|q| q.source.contains(title) && q.source.ends_with(&format!("({ref_id})")))
            .unwrap_or_else(|| panic!("the {title} panel's query {ref_id}"));
        fill_variables(&q.expr, &values).expect("fills")
    };
    let by_member = prom
        .query(&panel("Achieved ops/s by member", "A"))
        .expect("the per-member query");
    assert_eq!(by_member.len(), 3, "{by_member:?}");
    let total = value(prom.query(&panel("Achieved ops/s by member", "B")));
    let target = value(prom.query(&panel("Achieved ops/s by member", "C")));
    eprintln!("cluster at {CLUSTER_RATE}/s: achieved {total}, target {target}");
    assert_eq!(target, CLUSTER_RATE);
    assert!(
        (total - CLUSTER_RATE).abs() <= 0.05 * CLUSTER_RATE,
        "achieved {total} for {CLUSTER_RATE}/s"
    );
    // A member stops: Prometheus sees two of three.
    let (_, member) = children
        .0
        .iter_mut()
        .find(|(name, _)| *name == "member2")
        .expect("member2");
    let _ = member.kill();
    let _ = member.wait();
    prom.at = None;
    wait_for(
        "two members scraped of three",
        Duration::from_secs(30),
        || value(prom.query("job:mongoload_cluster_members:count")) == 2.0,
        || {},
    );
    assert_eq!(value(prom.query("job:mongoload_cluster_size:max")), 3.0);
}

/// The Shards row and `MongoloadShardImbalance` against a real Prometheus
/// scraping `mongoload run` through the sharded simulator (`mongoload sim
/// --sharded --shards 2`), its collection sharded on a hashed `_id` by the
/// test: every dashboard query and alert operand on
/// `mongoload_shard_documents` returns series, the documents per shard add
/// up to the collection's count as the router gives it, and the imbalance
/// panel equals max / mean of those. A chunk moved by the test (through
/// the router's `moveChunk`) to the other shard and back (so the shards
/// stay even for the imbalance check) shows in the "Chunk migrations"
/// annotation as one series per direction for its workload.
#[test]
fn the_shards_row_and_imbalance_read_a_sharded_cluster() {
    let Some(prometheus) = require_tool(PROMETHEUS) else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let logs = tmp.path();
    let mut children = Children(Vec::new());
    let port = crate::common::free_ports(3);
    // Shards of 3 members: the shard elections annotation reads their
    // primaries, which the daemon watches only on replica-set shards.
    let _sim = spawn_sim(
        port,
        &["--sharded", "--shards", "2", "--shard-members", "3"],
    );
    let uri = format!("mongodb://127.0.0.1:{port}");
    let rt = tokio::runtime::Runtime::new().expect("a runtime");
    let client = rt.block_on(crate::common::driver_client(
        &uri,
        true,
        Duration::from_secs(10),
    ));
    rt.block_on(async {
        client
            .database("admin")
            .run_command(mongodb::bson::doc! {"shardCollection": "e2eshards.mixed", "key": {"_id": "hashed"}})
            .await
    })
    .expect("shardCollection");
    let addr = free_port().to_string();
    let config = logs.join("sharded.toml");
    std::fs::write(
        &config,
        format!(
            "[target]\nuri = \"{uri}\"\ndatabase = \"e2eshards\"\nshard_stats_interval = \"1s\"\n\
             [http]\nlisten = \"{addr}\"\n\
             [[workloads]]\nname = \"mix\"\nkind = \"mixed\"\nseed = 1\n\
             [workloads.mixed]\ndoc_size = 128\ninitial_docs = 3000\n\
             [[workloads.stages]]\nname = \"fixed\"\nrate = 50\nduration = \"1h\"\n"
        ),
    )
    .expect("write the config");
    spawn_run(&mut children, logs, &config, "warn");
    let mut prom = start_prometheus(&mut children, logs, &prometheus, &[("mongoload", &addr)]);
    wait_for(
        "documents on both shards in Prometheus",
        Duration::from_secs(90),
        || {
            // Two shards, each seen in three scrapes or more.
            prom.query(r#"count_over_time(mongoload_shard_documents{job="mongoload"}[1m]) >= 3"#)
                .is_ok_and(|r| r.len() == 2)
        },
        || children.assert_running(logs),
    );
    // The migrations' series at 0 in Prometheus before a chunk moves, so
    // the move is an increase.
    wait_for(
        "the migration series at 0 in Prometheus",
        Duration::from_secs(60),
        || {
            prom.query(
                r#"count_over_time(mongoload_shard_chunk_migrations_total{job="mongoload"}[1m]) >= 3"#,
            )
            .is_ok_and(|r| r.len() == 2)
        },
        || children.assert_running(logs),
    );
    // One chunk of the collection from its shard to the other and back,
    // as an operator's moveChunk would.
    let (moved_from, moved_to) = rt.block_on(async {
        use mongodb::bson::doc;
        let chunks = crate::common::shards::ShardView::over(client.clone())
            .chunks("e2eshards.mixed")
            .await;
        let chunk = chunks.first().expect("a chunk");
        let from = chunk.shard.clone();
        let to = if from == "shard0" { "shard1" } else { "shard0" };
        let bounds = [chunk.min.clone(), chunk.max.clone()];
        for shard in [to, from.as_str()] {
            client
                .database("admin")
                .run_command(
                    doc! {"moveChunk": "e2eshards.mixed", "bounds": bounds.to_vec(), "to": shard},
                )
                .await
                .expect("moveChunk");
        }
        (from, to.to_owned())
    });
    wait_for(
        "the migration in Prometheus",
        Duration::from_secs(60),
        || {
            prom.query(
                r#"increase(mongoload_shard_chunk_migrations_total{job="mongoload"}[1m]) > 0"#,
            )
            .is_ok_and(|r| r.len() == 2)
        },
        || children.assert_running(logs),
    );
    // The queries below read at one instant a second ago: past the one at
    // which both moves were seen.
    std::thread::sleep(Duration::from_secs(2));
    let now = unix_now();
    prom.at = Some(now - 1.0);
    let values = [
        ("datasource", "prometheus"),
        ("job", "mongoload"),
        ("run", ".+"),
        ("instance", addr.as_str()),
        ("workload", "mix"),
        ("__rate_interval", "15s"),
        ("__interval", "5s"),
        ("__range", "30s"),
    ];
    let value = |s: &Value| {
        s["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    let mut checked = 0;
    let mut per_shard = Vec::new();
    let mut imbalance = None;
    let mut annotated = false;
    let mut migrations_annotated = false;
    for d in dashboards() {
        for q in dashboard_queries(&d) {
            if !sharded_only(&q.expr) {
                continue;
            }
            let expr = fill_variables(&q.expr, &values).expect("variables filled");
            let r = prom
                .query(&expr)
                .unwrap_or_else(|e| panic!("{}: {e}", q.source));
            assert!(!r.is_empty(), "{}: no series for {expr}", q.source);
            checked += 1;
            if expr.contains("mongoload_shard_chunk_migrations_total") {
                // The chunk migrations annotation: the move and its way
                // back, one series per direction, for the workload.
                let mut pairs: Vec<(&str, &str, &str)> = r
                    .iter()
                    .map(|s| {
                        let l = |k: &str| s["metric"][k].as_str().unwrap_or("");
                        (l("workload"), l("from"), l("to"))
                    })
                    .collect();
                pairs.sort_unstable();
                let mut want = [
                    ("mix", moved_from.as_str(), moved_to.as_str()),
                    ("mix", moved_to.as_str(), moved_from.as_str()),
                ];
                want.sort_unstable();
                assert_eq!(pairs, want, "{}: {expr}", q.source);
                migrations_annotated = true;
            } else if expr.contains("mongoload_shard_primary_info") {
                // The shard elections annotation: one region per shard,
                // each with its primary.
                let mut shards: Vec<&str> = r
                    .iter()
                    .map(|s| {
                        assert!(
                            s["metric"]["primary"]
                                .as_str()
                                .is_some_and(|p| !p.is_empty()),
                            "{}: a series without its primary: {s}",
                            q.source
                        );
                        s["metric"]["shard"].as_str().unwrap_or("")
                    })
                    .collect();
                shards.sort_unstable();
                assert_eq!(shards, ["shard0", "shard1"], "{}: {expr}", q.source);
                annotated = true;
            } else if expr.contains(" / avg by") {
                imbalance = Some(value(&r[0]));
            } else {
                per_shard = r.iter().map(value).collect();
            }
        }
    }
    assert!(checked >= 3, "only {checked} Shards queries");
    assert!(annotated, "no shard elections annotation was checked");
    assert!(
        migrations_annotated,
        "no chunk migrations annotation was checked"
    );
    assert_eq!(per_shard.len(), 2, "{per_shard:?}");
    let total: f64 = per_shard.iter().sum();
    assert!(
        total >= 3000.0,
        "the initial documents at least: {per_shard:?}"
    );
    let max = per_shard.iter().cloned().fold(f64::MIN, f64::max);
    let want = max / (total / 2.0);
    let got = imbalance.expect("an imbalance query");
    // The gauges and the imbalance were read at the same instant.
    assert!(
        (got - want).abs() < 1e-9,
        "imbalance {got} != max/mean {want}"
    );
    assert!(
        (1.0..1.3).contains(&got),
        "a hashed _id spreads evenly: {got}"
    );
    let rules = prom.api("/api/v1/rules").expect("rules");
    let mut operands_checked = 0;
    for g in rules["groups"].as_array().expect("groups") {
        for r in g["rules"].as_array().expect("rules") {
            let expr = r["query"].as_str().unwrap_or("");
            if r["type"] != "alerting" || !sharded_only(expr) {
                continue;
            }
            for op in alert_operands(expr) {
                let res = prom.query(&op).unwrap_or_else(|e| panic!("{op}: {e}"));
                assert!(!res.is_empty(), "alert {}: no series for {op}", r["name"]);
                operands_checked += 1;
            }
        }
    }
    assert!(
        operands_checked >= 1,
        "no MongoloadShardImbalance operand checked"
    );
    drop(client);
}

/// `[http] web_config` with TLS and a password: a real Prometheus scrapes
/// the daemon over HTTPS with basic authentication, verifying its
/// certificate against the CA that signed it; a job with a wrong password
/// is refused (its target down, and `mongoload_http_unauthorized_total`
/// counts it); plain HTTP is refused; the password reaches no log; a
/// reload with a broken web configuration keeps the one in force.
#[test]
fn prometheus_scrapes_over_tls_with_a_password() {
    let Some(prometheus) = require_tool(PROMETHEUS) else {
        return;
    };
    const PASSWORD: &str = "Tr0ub4dor-3";
    let tmp = tempfile::tempdir().expect("temp dir");
    let logs = tmp.path();
    let write = |name: &str, text: &str| {
        let p = logs.join(name);
        std::fs::write(&p, text).expect("write a file");
        p
    };
    // A CA, and the daemon's certificate it signs (for 127.0.0.1).
    let certs = crate::common::certs::Certs::new("mongoload test CA");
    let hash = bcrypt::hash(PASSWORD, 6).unwrap();
    let web = format!(
        "tls_server_config:\n  cert_file: {}\n  key_file: {}\n\
         basic_auth_users:\n  prometheus: '{hash}'\n",
        certs.cert.display(),
        certs.key.display()
    );
    write("web.yml", &web);
    write("password", PASSWORD);
    write("wrong", "not-the-password");

    let mut children = Children(Vec::new());
    let sim_port = free_port().port();
    let _sim = spawn_sim(sim_port, &[]);
    let daemon_addr = free_port().to_string();
    let config = write(
        "mongoload.toml",
        &format!(
            "[target]\nuri = \"mongodb://127.0.0.1:{sim_port}\"\ndatabase = \"e2etls\"\n\
             [http]\nlisten = \"{daemon_addr}\"\nweb_config = \"web.yml\"\n\
             [[workloads]]\nname = \"w\"\nkind = \"mixed\"\nmax_inflight = 8\nseed = 1\n\
             [[workloads.stages]]\nname = \"soak\"\nrate = 50\nduration = \"1h\"\n"
        ),
    );
    let check = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["check-config", "--config"])
        .arg(&config)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    spawn_run(&mut children, logs, &config, "info");
    let job = |name: &str, password: &str| {
        format!(
            "  - job_name: {name}\n    scheme: https\n    tls_config:\n      ca_file: {}\n\
             \x20   basic_auth:\n      username: prometheus\n      password_file: {}\n\
             \x20   static_configs:\n      - targets: ['{daemon_addr}']\n",
            certs.ca.display(),
            logs.join(password).display()
        )
    };
    let plain =
        format!("  - job_name: plain\n    static_configs:\n      - targets: ['{daemon_addr}']\n");
    let scrapes = [
        job("mongoload", "password"),
        job("intruder", "wrong"),
        plain,
    ]
    .concat();
    let prom = launch_prometheus(&mut children, logs, &prometheus, "", &scrapes);
    let value = first_value;
    let up = |job: &str| value(prom.query(&format!("up{{job=\"{job}\"}}")));
    wait_for(
        "the TLS scrape with the password, and the refused ones",
        Duration::from_secs(60),
        || {
            up("mongoload") == 1.0
                && value(
                    prom.query(
                        r#"mongoload_http_unauthorized_total{job="mongoload",reason="wrong"}"#,
                    ),
                ) >= 2.0
                && value(prom.query(r#"count(up{job=~"intruder|plain"} == 0)"#)) == 2.0
                // The daemon's own figures over TLS (after its prepare).
                && value(prom.query(r#"sum(mongoload_operations_total{job="mongoload"})"#))
                    > 0.0
        },
        || children.assert_running(logs),
    );
    let targets = prom.api("/api/v1/targets").unwrap();
    let errors: Vec<String> = targets["activeTargets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| format!("{}: {}", t["labels"]["job"], t["lastError"]))
        .collect();
    let said = |job: &str, what: &str| {
        errors
            .iter()
            .any(|e| e.starts_with(&format!("\"{job}\"")) && e.contains(what))
    };
    assert!(said("intruder", "401"), "{errors:#?}");
    assert!(!said("mongoload", "401"), "{errors:#?}");

    // A broken web configuration at reload: refused, the one in force
    // goes on (the password still works, scrapes keep coming).
    write("web.yml", "basic_auth_users:\n  prometheus: plaintext\n");
    let pid = children.pid("mongoload");
    let hup = Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let count = || value(prom.query(r#"count_over_time(up{job="mongoload"}[1h])"#));
    let n = count();
    wait_for(
        "five more scrapes after the refused reload",
        Duration::from_secs(30),
        || count() >= n + 5.0 && up("mongoload") == 1.0,
        || children.assert_running(logs),
    );
    let stderr = std::fs::read_to_string(logs.join("mongoload.log")).unwrap_or_default();
    assert!(
        stderr.contains("reload refused") && stderr.contains("basic_auth_users.prometheus"),
        "{stderr}"
    );
    assert!(
        !stderr.contains(PASSWORD),
        "the password in the log:\n{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "metrics on https://{daemon_addr}/metrics (basic authentication)"
        )),
        "{stderr}"
    );
}

/// A capacity drop seen by a real Prometheus: the daemon (the real
/// binary) searches a simulator of capacity 300 ops/s with
/// `p99 < 100ms`, then, after the simulator's capacity is lowered to 100
/// through its fault handle, searches again (a soak follows), and the
/// shipped `MongoloadCapacityDropped` fires over that history, with the
/// overview's capacity panel reading the same figure. Neither result is
/// more than 5 % above the simulator's capacity (a search passing rates
/// the server cannot carry would be). A busy machine reads searches low
/// (the full suite beside it read one with `p99 < 30ms` 23 % low, and
/// another's first probe failed), so the threshold is long, the rates
/// low, the drop large, and accuracy is `cargo bench --bench capacity`'s,
/// on a quiet machine (BENCHMARKS.md).
#[test]
fn a_capacity_drop_fires_the_alert_in_a_real_prometheus() {
    let Some(prometheus) = require_tool(PROMETHEUS) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().expect("a runtime for the simulator");
    let sim = rt
        .block_on(mongoload::sim::start(mongoload::sim::SimConfig {
            faults: mongoload::sim::FaultConfig {
                capacity: Some(300.0),
                ..Default::default()
            },
            ..Default::default()
        }))
        .expect("the simulator starts");
    let tmp = tempfile::tempdir().expect("temp dir");
    let logs = tmp.path();
    let mut children = Children(Vec::new());
    let daemon_addr = free_port().to_string();
    let config = logs.join("mongoload.toml");
    std::fs::write(
        &config,
        format!(
            "[target]\nuri = \"{uri}\"\ndatabase = \"e2e\"\n\
             [http]\nlisten = \"{daemon_addr}\"\n\
             [[workloads]]\nname = \"cap\"\nkind = \"mixed\"\nmax_inflight = 256\nseed = 1\n\
             [workloads.mixed]\ninitial_docs = 200\n\
             [[workloads.stages]]\nname = \"quick\"\n\
             search = {{ from = 50, to = 2000, precision = \"10%\", probe = \"5s\", settle = \"2s\", min_operations = 200 }}\n\
             [[workloads.stages]]\nname = \"nightly\"\n\
             search = {{ from = 25, to = 2000, precision = \"10%\", probe = \"5s\", settle = \"2s\", min_operations = 100 }}\n\
             [[workloads.stages]]\nname = \"soak\"\nrate = 20\nduration = \"1h\"\n\
             [[workloads.thresholds]]\ncheck = \"p99 < 100ms\"\n",
            uri = sim.uri(),
        ),
    )
    .expect("write mongoload.toml");
    spawn_run(&mut children, logs, &config, "info");
    let prom = start_prometheus(
        &mut children,
        logs,
        &prometheus,
        &[("mongoload", &daemon_addr)],
    );
    let capacity = r#"mongoload_capacity_ops_per_second{job="mongoload",workload="cap"}"#;
    let ended =
        r#"mongoload_capacity_search_end_timestamp_seconds{job="mongoload",workload="cap"}"#;
    let value = |q: &str| {
        prom.query(q).ok().and_then(|r| {
            r.first()
                .and_then(|s| s["value"][1].as_str()?.parse::<f64>().ok())
        })
    };
    wait_for(
        "the first search's result in Prometheus",
        Duration::from_secs(100),
        || value(capacity).is_some() && value(ended).is_some(),
        || children.assert_running(logs),
    );
    sim.faults().set_capacity(Some(100.0));
    let first = value(capacity).unwrap();
    let first_end = value(ended).unwrap();
    let firing =
        r#"ALERTS{alertname="MongoloadCapacityDropped",alertstate="firing",workload="cap"}"#;
    wait_for(
        "MongoloadCapacityDropped firing after the second search",
        Duration::from_secs(150),
        || value(firing) == Some(1.0),
        || children.assert_running(logs),
    );
    let second = value(capacity).unwrap();
    assert!(value(ended).unwrap() > first_end, "a second search ended");
    // No search passes a rate the server cannot carry: a queue at its
    // capacity, empty when a 5 s probe begins, may still pass it (one at
    // 100 ops/s passed 87.5, the model's knee at 100 ms being 75), but
    // none 5 % over it, where the queue grows by a twentieth of the
    // capacity every second of the probe.
    assert!(first <= 1.05 * 300.0, "first capacity {first}");
    assert!(
        second <= 1.05 * 100.0 && second > 0.0,
        "second capacity {second} (first {first})"
    );
    // The overview's capacity panel reads the same figure.
    let overview = dashboards()
        .into_iter()
        .find(|d| d.file.contains("overview"))
        .expect("the overview dashboard");
    let panel = dashboard_queries(&overview)
        .into_iter()
        .find(|q| q.source.contains("Capacity over 7 days") && q.expr.contains("capacity_ops"))
        .expect("the capacity panel");
    let expr = fill_variables(
        &panel.expr,
        &[
            ("job", "mongoload"),
            ("instance", ".+"),
            ("workload", "cap"),
        ],
    )
    .unwrap();
    assert_eq!(value(&expr), Some(second), "{expr}");
    eprintln!(
        "capacity {first} then {second} ops/s (the simulator: 300, then 100); the alert fired"
    );
    drop(rt);
}
