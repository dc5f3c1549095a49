//! Structure of the Grafana dashboards in dashboards/: valid JSON for
//! Grafana 10/11, unique panel ids, grid positions inside the 24 columns and
//! not overlapping, every data source the `${datasource}` variable, every
//! variable defined and used, every panel with non-empty queries, and every
//! metric of the contract shown somewhere. Whether the queries return data
//! is tests/prometheus_e2e.rs's job.

use crate::common::prometheus_tools;

use std::collections::{BTreeSet, HashSet};

use prometheus_tools::{
    all_panels, dashboard_queries, dashboards, fill_variables, repo, variable_refs, variables,
    BUILTIN_VARIABLES,
};
use serde_json::Value;

/// A panel's grid rectangle: x, y, w, h in grid units.
type Rect = (i64, i64, i64, i64);

fn overlaps(a: Rect, b: Rect) -> bool {
    a.0 < b.0 + b.2 && b.0 < a.0 + a.2 && a.1 < b.1 + b.3 && b.1 < a.1 + a.3
}

fn rect(p: &Value) -> Rect {
    let g = &p["gridPos"];
    let n = |k: &str| {
        g[k].as_i64()
            .unwrap_or_else(|| panic!("panel {:?}: gridPos.{k} missing", p["title"]))
    };
    (n("x"), n("y"), n("w"), n("h"))
}

#[test]
fn dashboards_have_the_expected_top_level() {
    let ds = dashboards();
    assert!(ds.len() >= 2, "an overview and a database hosts dashboard");
    let mut uids = HashSet::new();
    for d in &ds {
        let j = &d.json;
        let uid = j["uid"]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no uid", d.file));
        assert!(
            uids.insert(uid.to_owned()),
            "{}: uid {uid} repeated",
            d.file
        );
        assert!(
            uid.len() <= 40,
            "{}: Grafana uids are at most 40 characters",
            d.file
        );
        assert!(
            !j["title"].as_str().unwrap_or("").is_empty(),
            "{}: no title",
            d.file
        );
        // 36 is Grafana 9's datasource-object form; 10/11 export 37..39.
        let schema = j["schemaVersion"].as_i64().unwrap_or(0);
        assert!(
            (36..=41).contains(&schema),
            "{}: schemaVersion {schema}",
            d.file
        );
        // an exported dashboard carries no install's numeric id
        assert!(j["id"].is_null(), "{}: id must be null", d.file);
        assert!(
            j["tags"]
                .as_array()
                .is_some_and(|t| t.iter().any(|t| t == "mongoload")),
            "{}: the dashboard links find each other by the tag mongoload",
            d.file
        );
    }
}

#[test]
fn panel_ids_are_unique() {
    for d in dashboards() {
        let mut ids = HashSet::new();
        for p in all_panels(&d.json) {
            let id = p["id"]
                .as_i64()
                .unwrap_or_else(|| panic!("{}: panel {:?} has no id", d.file, p["title"]));
            assert!(ids.insert(id), "{}: panel id {id} repeated", d.file);
        }
    }
}

#[test]
fn grid_positions_fit_and_do_not_overlap() {
    for d in dashboards() {
        // top-level panels share one grid; panels inside a collapsed row are
        // laid out only when it opens, so they are checked among themselves
        let top: Vec<&Value> = d.json["panels"]
            .as_array()
            .expect("panels")
            .iter()
            .collect();
        let mut groups = vec![top.clone()];
        for p in &top {
            if let Some(nested) = p["panels"].as_array().filter(|n| !n.is_empty()) {
                groups.push(nested.iter().collect());
            }
        }
        for group in groups {
            for (i, a) in group.iter().enumerate() {
                let ra = rect(a);
                assert!(
                    ra.2 > 0 && ra.3 > 0,
                    "{}: {:?} has an empty size",
                    d.file,
                    a["title"]
                );
                assert!(
                    ra.0 >= 0 && ra.1 >= 0 && ra.0 + ra.2 <= 24,
                    "{}: {:?} leaves the 24 columns",
                    d.file,
                    a["title"]
                );
                for b in &group[i + 1..] {
                    assert!(
                        !overlaps(ra, rect(b)),
                        "{}: {:?} {:?} overlaps {:?} {:?}",
                        d.file,
                        a["title"],
                        ra,
                        b["title"],
                        rect(b)
                    );
                }
            }
        }
    }
}

/// Collects every value under a "datasource" key, anywhere in the JSON.
fn datasources<'a>(v: &'a Value, path: String, out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                if k == "datasource" {
                    out.push((path.clone(), x));
                }
                datasources(x, format!("{path}.{k}"), out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                datasources(x, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

#[test]
fn every_datasource_is_the_datasource_variable() {
    for d in dashboards() {
        let vars = variables(&d.json);
        assert!(
            vars.iter()
                .any(|(n, t, q)| n == "datasource" && t == "datasource" && q == "prometheus"),
            "{}: needs a variable `datasource` of type datasource listing prometheus sources",
            d.file
        );
        let mut found = Vec::new();
        datasources(&d.json, String::new(), &mut found);
        assert!(
            found.len() > 10,
            "{}: only {} datasource references",
            d.file,
            found.len()
        );
        for (path, ds) in found {
            assert_eq!(
                ds,
                &serde_json::json!({"type": "prometheus", "uid": "${datasource}"}),
                "{}: {path} is not the datasource variable",
                d.file
            );
        }
        // every panel with queries, and every target, names its data source
        for p in all_panels(&d.json)
            .into_iter()
            .filter(|p| p["type"] != "row")
        {
            assert!(
                p["datasource"].is_object(),
                "{}: {:?} has no datasource",
                d.file,
                p["title"]
            );
            for t in p["targets"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                assert!(
                    t["datasource"].is_object(),
                    "{}: a target of {:?} has no datasource",
                    d.file,
                    p["title"]
                );
            }
        }
    }
}

#[test]
fn every_variable_is_defined_and_used() {
    for d in dashboards() {
        let vars = variables(&d.json);
        let names: BTreeSet<&str> = vars.iter().map(|(n, _, _)| n.as_str()).collect();
        for required in ["datasource", "job", "instance", "workload"] {
            assert!(
                names.contains(required),
                "{}: no variable {required}",
                d.file
            );
        }
        // uses: anywhere outside the variable's own definition
        let mut uses: Vec<String> = Vec::new();
        let panels = serde_json::to_string(&d.json["panels"]).unwrap();
        let annotations = serde_json::to_string(&d.json["annotations"]).unwrap();
        uses.extend(variable_refs(&panels));
        uses.extend(variable_refs(&annotations));
        for (name, _, query) in &vars {
            for r in variable_refs(query) {
                assert_ne!(&r, name, "{}: variable {name} refers to itself", d.file);
                uses.push(r);
            }
        }
        for name in &names {
            assert!(
                uses.iter().any(|u| u == name),
                "{}: variable {name} is never used",
                d.file
            );
        }
        for u in &uses {
            assert!(
                names.contains(u.as_str()) || BUILTIN_VARIABLES.contains(&u.as_str()),
                "{}: ${u} is used but not defined",
                d.file
            );
        }
    }
    let hosts = dashboards()
        .into_iter()
        .find(|d| {
            variables(&d.json)
                .iter()
                .any(|(n, _, q)| n == "db_host" && q.contains("node_"))
        })
        .expect("a dashboard with a db_host variable over node_exporter series");
    assert!(dashboard_queries(&hosts)
        .iter()
        .any(|q| q.expr.contains("$db_host")));
}

#[test]
fn every_panel_has_non_empty_queries() {
    for d in dashboards() {
        for p in all_panels(&d.json) {
            if p["type"] == "row" {
                assert!(
                    p.get("targets").is_none(),
                    "{}: row {:?} has targets",
                    d.file,
                    p["title"]
                );
                continue;
            }
            assert!(
                !p["title"].as_str().unwrap_or("").is_empty(),
                "{}: a panel has no title",
                d.file
            );
            let targets = p["targets"]
                .as_array()
                .filter(|t| !t.is_empty())
                .unwrap_or_else(|| panic!("{}: {:?} has no targets", d.file, p["title"]));
            let mut refs = HashSet::new();
            for t in targets {
                let expr = t["expr"].as_str().unwrap_or("");
                assert!(
                    !expr.trim().is_empty(),
                    "{}: {:?} has an empty query",
                    d.file,
                    p["title"]
                );
                let r = t["refId"].as_str().unwrap_or("");
                assert!(
                    !r.is_empty() && refs.insert(r),
                    "{}: {:?} refId {r:?} missing or repeated",
                    d.file,
                    p["title"]
                );
            }
        }
    }
}

#[test]
fn the_issue_panels_are_there() {
    let ds = dashboards();
    let exprs: Vec<String> = ds
        .iter()
        .flat_map(dashboard_queries)
        .map(|q| q.expr)
        .collect();
    // every metric of the contract (docs/metrics.md) and the pool/topology ones
    for metric in [
        "mongoload_operations_total",
        "mongoload_documents_total",
        "mongoload_errors_total",
        "mongoload_latency_seconds_bucket",
        "mongoload_service_time_seconds_bucket",
        "mongoload_latency_window_seconds",
        "mongoload_target_rate",
        "mongoload_target_concurrency",
        "mongoload_inflight_operations",
        "mongoload_schedule_lag_seconds",
        "mongoload_missed_operations_total",
        "mongoload_phase_info",
        "mongoload_target_up",
        "mongoload_pool_checkout_wait_seconds_bucket",
        "mongoload_pool_connections",
        "mongoload_topology_servers",
        "mongoload_primary_changes_total",
        "mongoload_primary_info",
        "mongoload_write_outage_ongoing_seconds",
        "mongoload_write_outage_last_seconds",
        "mongoload_write_outage_seconds_count",
        "mongoload_no_primary_seconds_sum",
        "mongoload_retried_writes_total",
        "mongoload_audit_ledger_ids",
        "mongoload_audit_missing_total",
        "mongoload_audit_checked_total",
        "mongoload_audit_acknowledged_total",
        "mongoload_audit_forgotten_total",
        "mongoload_audit_passes_total",
        "mongoload_audit_errors_total",
        "mongoload_audit_ledger_bytes",
        "mongoload_replication_lag_seconds",
        "mongoload_replication_lag_probe_seconds_bucket",
        "mongoload_requests_total",
        "mongoload_request_duration_seconds_bucket",
        "mongoload_request_errors_total",
        "mongoload_request_documents_total",
        "mongoload_shard_documents",
        "mongoload_shard_chunk_migrations_total",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
        "node_cpu_seconds_total",
        "node_disk_reads_completed_total",
        "node_disk_writes_completed_total",
        "node_disk_read_bytes_total",
        "node_disk_written_bytes_total",
        "node_disk_io_time_seconds_total",
        "node_disk_read_time_seconds_total",
        "node_memory_MemAvailable_bytes",
        "node_network_receive_bytes_total",
        "node_network_transmit_bytes_total",
    ] {
        assert!(
            exprs.iter().any(|e| e.contains(metric)),
            "no dashboard query uses {metric}"
        );
    }
    for q in ["0.5", "0.9", "0.99", "0.999"] {
        assert!(
            exprs
                .iter()
                .any(|e| e.starts_with(&format!("histogram_quantile({q}, "))),
            "no p{q} from the latency histogram"
        );
    }
    let panels: Vec<&Value> = ds.iter().flat_map(|d| all_panels(&d.json)).collect();
    // Throughput, error ratio and latency headline panels are over
    // scheduled operations, never requests (a transaction counts once).
    for title in [
        "Achieved ops/s",
        "Achieved vs target rate",
        "Error ratio",
        "p99 latency",
    ] {
        let p = panels
            .iter()
            .find(|p| p["title"] == title)
            .unwrap_or_else(|| panic!("no panel {title:?}"));
        let e = p["targets"][0]["expr"].as_str().unwrap();
        assert!(
            (e.contains("mongoload_operations_total") || e.contains("mongoload_latency_seconds"))
                && !e.contains("mongoload_request"),
            "{title}: {e}"
        );
    }
    // A quantile of one load host's window cannot be merged across hosts:
    // no panel aggregates them (only the maximum, quantile 1, merges).
    for e in exprs
        .iter()
        .filter(|e| e.contains("mongoload_latency_window_seconds{"))
    {
        let aggregated = ["max", "min", "avg", "sum", "quantile("]
            .iter()
            .any(|f| e.contains(&format!("{f} by")) || e.contains(&format!("{f}(")));
        assert!(
            !aggregated || e.contains("quantile=\"1\""),
            "per-host quantiles aggregated across hosts: {e}"
        );
    }
    // Achieved = successful operations; failed ones beside them, apart.
    for title in [
        "Achieved ops/s",
        "Achieved vs target rate",
        "Achieved ops/s by member",
    ] {
        let p = panels
            .iter()
            .find(|p| p["title"] == title)
            .unwrap_or_else(|| panic!("no panel {title:?}"));
        let exprs: Vec<&str> = p["targets"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["expr"].as_str())
            .collect();
        for e in exprs
            .iter()
            .filter(|e| e.contains("mongoload_operations_total"))
        {
            assert!(
                e.contains("outcome=\"ok\"") ^ e.contains("outcome=\"error\""),
                "{title}: ok and errors must be separate series: {e}"
            );
        }
        assert!(exprs[0].contains("outcome=\"ok\""), "{title}: {}", exprs[0]);
        assert!(
            exprs.iter().any(|e| e.contains("outcome=\"error\"")),
            "{title}: no errors/s beside the achieved rate"
        );
    }
    let heatmap = panels
        .iter()
        .find(|p| p["type"] == "heatmap")
        .expect("a latency heatmap");
    let t = &heatmap["targets"][0];
    assert_eq!(
        t["format"], "heatmap",
        "bucket series must be read as a heatmap"
    );
    assert!(t["expr"].as_str().unwrap().contains("by (le)"));
    assert!(panels.iter().any(|p| p["type"] == "state-timeline"
        && p["targets"][0]["expr"]
            .as_str()
            .unwrap()
            .contains("mongoload_phase_info")));
    // host cost per op: node rates divided by mongoload's op rate; the two
    // sides come from different jobs, so the match must be on no labels
    let cost: Vec<&String> = exprs
        .iter()
        .filter(|e| e.contains("node_") && e.contains("mongoload_operations_total"))
        .collect();
    assert!(cost.len() >= 4, "per-op host cost panels: {cost:?}");
    for e in cost {
        assert!(e.contains("/ on () group_left ()"), "{e}");
        assert!(
            e.contains("workload=~\"$workload\"") && e.contains("instance=~\"$db_host\""),
            "{e}"
        );
    }
}

#[test]
fn provisioning_files_load_the_dashboards_and_a_prometheus_source() {
    let dir = repo().join("dashboards/provisioning");
    let dash =
        std::fs::read_to_string(dir.join("dashboards/mongoload.yml")).expect("dashboard provider");
    assert!(
        dash.contains("apiVersion: 1") && dash.contains("type: file") && dash.contains("path: ")
    );
    let ds = std::fs::read_to_string(dir.join("datasources/prometheus.yml"))
        .expect("datasource example");
    assert!(ds.contains("apiVersion: 1") && ds.contains("type: prometheus"));
}

#[test]
fn variable_references_are_found_and_filled() {
    assert_eq!(
        variable_refs(
            r#"rate(x{a=~"$job", b="${instance:regex}", c="[[db_host]]"}[$__rate_interval])"#
        ),
        vec!["job", "instance", "db_host", "__rate_interval"]
    );
    let vals = [("in", "X"), ("instance", "h:1"), ("__rate_interval", "15s")];
    assert_eq!(
        fill_variables(r#"r(x{i="$instance", j="${in}"}[$__rate_interval])"#, &vals).unwrap(),
        r#"r(x{i="h:1", j="X"}[15s])"#
    );
    let err = fill_variables(r#"x{w=~"$worklaod"}"#, &vals).unwrap_err();
    assert!(err.contains("$worklaod"), "{err}");
}

#[test]
fn overlap_is_detected_on_plain_rectangles() {
    assert!(overlaps((0, 0, 12, 8), (6, 4, 12, 8)));
    assert!(!overlaps((0, 0, 12, 8), (12, 0, 12, 8)), "side by side");
    assert!(
        !overlaps((0, 0, 24, 1), (0, 1, 8, 8)),
        "a row above a panel"
    );
}
