//! Live progress on a terminal: `mongoload run` in a pseudo-terminal (the
//! `script` utility of util-linux) shows the prepare bar, a line per
//! workload, a line per failover of the simulator's replica set and the
//! run's stage table at exit; with stderr a file, or `--no-progress`, none
//! of it appears and the log lines stay as they are.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use crate::common::{config_toml, write_config, ConfigFile};
use mongoload::sim::{self, ElectionTime, FaultConfig, LatencyDist, ReplSetConfig, SimConfig};

/// What only progress writes.
const PROGRESS_MARKS: [&str; 5] = [
    "ops/s achieved",
    ": preparing [",
    "stage reports of this run",
    "failover: primary",
    "\x1b[2K",
];

/// A replica set of three whose primary steps down every 3 s (elections
/// of 0.3 to 0.6 s), every reply 5 ms late so that preparing 4000
/// documents in batches of 10 takes seconds; or a standalone without
/// faults.
async fn sim(failovers: bool) -> sim::SimHandle {
    if !failovers {
        return sim::start(SimConfig::default())
            .await
            .expect("start the simulator");
    }
    let mut set = ReplSetConfig::new("progress", 3);
    set.failover_every = Some(Duration::from_secs(3));
    set.election = ElectionTime {
        min: Duration::from_millis(300),
        max: Duration::from_millis(600),
    };
    let config = SimConfig {
        faults: FaultConfig {
            latency: Some(LatencyDist::Fixed(Duration::from_millis(5))),
            ..Default::default()
        },
        ..Default::default()
    };
    sim::start_replset(config, set)
        .await
        .expect("start the replica set")
}

/// The tests' `mixed` workload `w` with a prepare of 4000 documents in
/// batches of 10, then two stages of 4 s each, after which the run ends
/// by itself.
fn config(uri: &str) -> ConfigFile {
    let stages = r#"
[[workloads.stages]]
name = "first"
rate = 50
duration = "4s"

[[workloads.stages]]
name = "second"
rate = 80
duration = "4s"
"#;
    let toml = config_toml(uri, stages)
        .replace("initial_docs = 200", "initial_docs = 4000")
        .replace("load_batch = 100", "load_batch = 10");
    assert!(toml.contains("initial_docs = 4000") && toml.contains("load_batch = 10"));
    write_config(&toml)
}

fn mongoload(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_mongoload"));
    c.args(args)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("MONGOLOAD_CONFIG")
        .env("RUST_LOG", "info")
        .stdin(Stdio::null());
    c
}

/// Runs `mongoload ARGS` with stdin, stdout and stderr a pseudo-terminal
/// (`script -qefc`); returns its exit status and everything it wrote.
fn in_pty(args: &[&str]) -> (std::process::ExitStatus, String) {
    let command = std::iter::once(env!("CARGO_BIN_EXE_mongoload"))
        .chain(args.iter().copied())
        .map(|a| format!("'{a}'"))
        .collect::<Vec<_>>()
        .join(" ");
    let out: Output = Command::new("script")
        .args(["-qefc", &command, "/dev/null"])
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("MONGOLOAD_CONFIG")
        .env("RUST_LOG", "info")
        .env("TERM", "xterm")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run `script` (util-linux, package bsdutils) for a pseudo-terminal: {e}")
        });
    (
        out.status,
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn path(file: &ConfigFile) -> &str {
    file.path.to_str().expect("a UTF-8 temporary path")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminal_shows_the_prepare_bar_lines_failovers_and_the_stage_table() {
    let sim = sim(true).await;
    let file = config(&sim.uri());
    let p = path(&file).to_owned();
    let (status, out) = tokio::task::spawn_blocking(move || {
        in_pty(&["run", "--config", &p, "--progress-interval", "1s"])
    })
    .await
    .unwrap();
    assert!(status.success(), "exit {status}:\n{out}");

    // The bar, redrawn in place while the 4000 documents load.
    assert!(out.contains("w: preparing ["), "no prepare bar:\n{out}");
    assert!(out.contains("docs/s  ETA "), "no rate and ETA:\n{out}");
    // A line per interval: stage, target, achieved, latency, errors, missed.
    let lines: Vec<&str> = out
        .lines()
        .filter(|l| l.contains("ops/s achieved"))
        .collect();
    assert!(lines.len() >= 3, "too few progress lines:\n{out}");
    assert!(
        lines
            .iter()
            .any(|l| l.contains("w: stage 0 first, 50 ops/s · ")),
        "no line of the first stage:\n{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("w: stage 1 second, 80 ops/s · ")),
        "no line of the second stage:\n{out}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains(" · p50 ") && l.contains(" ms · ") && l.contains(" missed")),
        "no latency in the lines:\n{out}"
    );
    // The failovers, with their write outage (or its absence).
    assert!(
        out.lines()
            .any(|l| l.contains("failover: primary 127.0.0.1:")
                && (l.contains("write outage") || l.contains("no write outage"))),
        "no failover line:\n{out}"
    );
    // At exit, the table `mongoload report` prints, after every progress line.
    let table = out
        .rfind("stage reports of this run:")
        .unwrap_or_else(|| panic!("no stage table at exit:\n{out}"));
    let last_line = out.rfind("ops/s achieved").unwrap();
    assert!(table > last_line, "the table is not last:\n{out}");
    let rows: Vec<&str> = out[table..].lines().skip(1).collect();
    assert!(
        rows[0].starts_with("workload") && rows[0].contains("p99ms"),
        "{out}"
    );
    for stage in ["first", "second"] {
        assert!(
            rows.iter()
                .any(|r| r.split_whitespace().take(2).eq(["w", stage])),
            "no row for stage {stage}:\n{out}"
        );
    }
    // The logs are there too, as whole lines.
    assert!(out.contains("stage report: w first"), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_or_no_progress_gets_the_logs_only() {
    let sim = sim(false).await;
    let file = config(&sim.uri());
    let p = path(&file).to_owned();

    let stderr_path = file.dir.path().join("stderr");
    let run = {
        let (p, stderr_path) = (p.clone(), stderr_path.clone());
        tokio::task::spawn_blocking(move || {
            mongoload(&["run", "--config", &p, "--progress-interval", "1s"])
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(stderr_path).unwrap())
                .status()
                .unwrap()
        })
    };
    let status = run.await.unwrap();
    let stderr = std::fs::read_to_string(&stderr_path).unwrap();
    assert!(status.success(), "exit {status}:\n{stderr}");
    assert_logs_only(&stderr);

    let (status, out) =
        tokio::task::spawn_blocking(move || in_pty(&["run", "--config", &p, "--no-progress"]))
            .await
            .unwrap();
    assert!(status.success(), "exit {status}:\n{out}");
    assert_logs_only(&out);
}

fn assert_logs_only(out: &str) {
    assert!(out.contains("stage report: w second"), "no logs:\n{out}");
    for mark in PROGRESS_MARKS {
        assert!(!out.contains(mark), "{mark:?} without progress:\n{out}");
    }
}
