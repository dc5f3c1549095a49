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
