//! `mongoload capture --log` as a user runs it: on a real mongod log
//! (tests/fixtures/mongod-log/hatchet-sample-slice.log: lines 12001–12250
//! of `logs/sample-mongod.log.gz` in https://github.com/simagix/hatchet,
//! Apache License 2.0, commit c109eedfbb6b466be2ea23850796cfc9c80d2234;
//! see PROVENANCE.md there), then `mongoload check-config` on its output.

use std::path::PathBuf;
use std::process::Command;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/mongod-log")
        .join(name)
}

#[test]
fn capture_writes_a_config_check_config_accepts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("captured.toml");
    let cap = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["capture", "--scale", "2", "--log"])
        .arg(fixture("hatchet-sample-slice.log"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&cap.stderr);
    assert!(cap.status.success(), "{stderr}");
    // The summary names what was skipped, with counts.
    assert!(
        stderr.contains("unsupported: command listIndexes"),
        "{stderr}"
    );
    assert!(stderr.contains("129 operations on testdb"), "{stderr}");
    let config = std::fs::read_to_string(&out).unwrap();
    for op in ["\"find\"", "\"update\"", "\"delete\"", "\"insert\""] {
        assert!(config.contains(&format!("op = {op}")), "{config}");
    }
    let check = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["check-config", "--config"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}\n{config}",
        String::from_utf8_lossy(&check.stderr)
    );
    let plan = String::from_utf8_lossy(&check.stdout);
    assert!(plan.contains("__examples"), "{plan}");

    // A file that is not a mongod log: an error naming it, exit 2.
    let bad = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["capture", "--log"])
        .arg(dir.path().join("missing.log"))
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("missing.log"));
}
