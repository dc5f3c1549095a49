//! The run log end to end: the daemon runs in-process against the
//! simulator, every line it writes must validate against
//! etc/runlog.schema.json and carry the figures of its stage; then
//! `mongoload report` renders and compares those lines, with the exit
//! codes a pipeline gates on.

use crate::common::{self, TestDb};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mongoload::config::{self, Config};
use mongoload::daemon;
use mongoload::report::{self, StageReport};
use serde_json::Value;

const SCHEMA: &str = include_str!("../../etc/runlog.schema.json");

fn config(db: &TestDb, log: &Path, stages: &str) -> Config {
    let (uri, database) = (db.uri(), db.database("runlog_test"));
    let text = format!(
        r#"
[target]
uri = "{uri}"
database = "{database}"
[http]
listen = "127.0.0.1:0"
[run]
shutdown_grace = "2s"
log = "{log}"
[[workloads]]
name = "rl"
kind = "mixed"
max_inflight = 32
seed = 7
[workloads.mixed]
doc_size = 200
initial_docs = 200
{stages}
"#,
        log = log.display()
    );
    config::parse_with_env(&text, Path::new("runlog-test.toml"), std::iter::empty())
        .expect("test config is valid")
}

/// Validates every line of the run log against the schema and parses it.
fn validated_lines(path: &Path) -> Vec<StageReport> {
    let schema: Value = serde_json::from_str(SCHEMA).expect("the schema is JSON");
    jsonschema::meta::validate(&schema).expect("the schema is a valid JSON Schema");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let text = std::fs::read_to_string(path).expect("the run log exists");
    for (n, line) in text.lines().enumerate() {
        let instance: Value = serde_json::from_str(line).expect("each line is JSON");
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "line {}: {errors:#?}\n{line}", n + 1);
    }
    report::read(path).expect("the run log parses")
}

/// Runs the daemon with `stages` until its schedule ends (a minute at most).
async fn run_to_the_end(sim: &TestDb, log: &Path, stages: &str) -> daemon::Summary {
    let running = daemon::start(config(sim, log, stages)).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), running.wait())
        .await
        .expect("the schedule ends")
}

fn mongoload(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(args)
        .output()
        .expect("the binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stage_reports_match_the_schema_and_the_report_command_reads_them() {
    let sim = common::test_db().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let stages = r#"
[[workloads.stages]]
name = "open"
rate = 200
duration = "3s"
warmup = "1s"
[[workloads.stages]]
name = "closed"
concurrency = 4
duration = "2s"
"#;
    let summary = run_to_the_end(&sim, &log, stages).await;
    sim.shutdown().await;

    let lines = validated_lines(&log);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    let (open, closed) = (&lines[0], &lines[1]);
    assert_eq!(open.run_id, closed.run_id);
    // The run's config, once: on its first line, as check-config prints it.
    let config = open
        .config
        .as_deref()
        .expect("the config on the first line");
    assert!(
        config.contains("stages (") && config.contains("open: rate 200/s"),
        "{config}"
    );
    assert_eq!(closed.config, None);
    assert_eq!((open.stage.as_str(), open.stage_index), ("open", 0));
    assert_eq!((closed.stage.as_str(), closed.stage_index), ("closed", 1));
    assert_eq!(open.mode, "rate");
    assert_eq!(closed.mode, "concurrency");
    assert!(!open.partial && !closed.partial);
    // The warm-up second is left out: 2 measured seconds at 200 ops/s.
    assert_eq!(open.warmup_seconds, 1.0);
    assert!((open.duration_seconds - 2.0).abs() < 1e-6, "{open:?}");
    let done = open.operations.ok + open.operations.error;
    assert!((360..=440).contains(&done), "{open:?}");
    assert_eq!(open.operations.error, 0, "{open:?}");
    assert!((180.0..=220.0).contains(&open.ops_per_sec), "{open:?}");
    assert_eq!(open.whole_seconds, 2);
    assert!(open.ips_99 > 100 && open.ips_75 <= 220, "{open:?}");
    assert!(open.latency_ns.count == done && open.latency_ns.p50 > 0);
    assert!(
        open.latency_ns.p50 <= open.latency_ns.p99 && open.latency_ns.p99 <= open.latency_ns.max
    );
    let by_op: u64 = open.ops.iter().map(|o| o.operations.ok).sum();
    assert_eq!(by_op, open.operations.ok);
    assert!(open
        .ops
        .iter()
        .any(|o| o.op == "find" && o.operations.ok > 0));
    assert!(closed.operations.ok > 0 && closed.ops_per_sec > 0.0);
    // The whole run counted more than the reports: the warm-up is only
    // left out of the report.
    let total: u64 = summary.workloads.iter().map(|w| w.ok).sum();
    assert!(total > open.operations.ok + closed.operations.ok);

    // mongoload report: one row per stage under the header.
    let (code, out, err) = mongoload(&["report", s(&log)]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<&str> = out.lines().collect();
    assert_eq!(rows.len(), 4, "{out}");
    assert_eq!(rows[3], mongoload::report::table::STAGE_LEGEND, "{out}");
    assert!(
        rows[0].starts_with("workload") && rows[0].contains("ips.99"),
        "{out}"
    );
    assert!(
        rows[1].starts_with("rl") && rows[1].contains("open"),
        "{out}"
    );

    // Every op of the mixed workload makes one call, a step named like it
    // with as many requests as operations; the insert (bounded by default)
    // also has its `evict` step, which runs only past the bound.
    for o in &open.ops {
        assert_eq!(o.steps[0].step, o.op);
        assert_eq!(o.steps[0].requests, o.operations);
        if o.op == "insert" {
            assert_eq!(o.steps.len(), 2, "{o:?}");
            assert_eq!(o.steps[1].step, "evict");
            assert!(o.steps[1].requests.ok <= o.operations.ok, "{o:?}");
        } else {
            assert_eq!(o.steps.len(), 1, "{o:?}");
        }
    }

    // --steps: a row per op (step "-") and per step under the stage table,
    // but for an op of one step named like it: its op row alone.
    let (code, out, err) = mongoload(&["report", "--steps", s(&log)]);
    assert_eq!(code, 0, "{err}");
    let (stages_part, steps_part) = out.split_once("\n\n").expect("two tables");
    assert_eq!(stages_part.lines().count(), 4, "{out}");
    let rows = |op: &str| -> Vec<Vec<&str>> {
        steps_part
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .filter(|c| c[1] == "open" && c[2] == op)
            .collect()
    };
    let find = open.ops.iter().find(|o| o.op == "find").unwrap();
    let find_rows = rows("find");
    assert_eq!(find_rows.len(), 1, "{out}");
    assert_eq!(find_rows[0][3], "-");
    assert_eq!(find_rows[0][4], find.operations.ok.to_string());
    let insert = open.ops.iter().find(|o| o.op == "insert").unwrap();
    let insert_rows = rows("insert");
    let steps: Vec<&str> = insert_rows.iter().map(|c| c[3]).collect();
    assert_eq!(steps, ["-", "insert", "evict"], "{out}");
    assert_eq!(insert_rows[1][4], insert.steps[0].requests.ok.to_string());

    // A run log line of mongoload 0.1 (no steps) still reads.
    let old = dir.path().join("old.jsonl");
    let mut v: serde_json::Value = serde_json::to_value(open).unwrap();
    for o in v["ops"].as_array_mut().unwrap() {
        o.as_object_mut().unwrap().remove("steps");
    }
    std::fs::write(&old, format!("{v}\n")).unwrap();
    let (code, out, err) = mongoload(&["report", "--steps", s(&old)]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("find") && out.contains(" - "), "{out}");

    // A run compared with itself passes, steps too.
    let (code, out, err) = mongoload(&["report", "--steps", "--compare", s(&log), s(&log)]);
    assert!(
        out.contains("Δ/s")
            && out
                .lines()
                .any(|l| l.contains("find") && l.contains("+0.0%")),
        "{out}"
    );
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("+0.0%"), "{out}");

    // The same run with half the throughput in the open stage fails the gate.
    let slower = dir.path().join("slower.jsonl");
    let mut text = String::new();
    for r in &lines {
        let mut r = r.clone();
        if r.stage == "open" {
            r.operations.ok /= 2;
            // Its samples too (too few, 2 s, for statistics: the gate is
            // then the stage's throughput).
            if let Some(s) = &mut r.samples {
                s.all.ok.iter_mut().for_each(|ok| *ok /= 2);
            }
        }
        text.push_str(&serde_json::to_string(&r).unwrap());
        text.push('\n');
    }
    std::fs::write(&slower, text).unwrap();
    let (code, out, _) = mongoload(&["report", "--compare", s(&log), s(&slower)]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("REGRESSION") && out.contains("-50.0%"),
        "{out}"
    );
    let (code, out, _) = mongoload(&[
        "report",
        "--compare",
        s(&log),
        s(&slower),
        "--max-drop",
        "60%",
    ]);
    assert_eq!(code, 0, "{out}");

    // Unreadable input: exit 2 with the file named.
    let missing: PathBuf = dir.path().join("missing.jsonl");
    let (code, _, err) = mongoload(&["report", s(&missing)]);
    assert_eq!(code, 2);
    assert!(err.contains("missing.jsonl"), "{err}");
    let (code, _, err) = mongoload(&["report", "--compare", s(&log)]);
    assert_eq!(code, 2, "clap rejects one file: {err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stage_cut_short_at_shutdown_is_reported_as_partial() {
    let sim = common::test_db().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let stages = r#"
[[workloads.stages]]
name = "long"
rate = 100
duration = "1h"
"#;
    let running = daemon::start(config(&sim, &log, stages)).await.unwrap();
    // Wait until the stage runs, then stop.
    let metrics = running.metrics.clone();
    for _ in 0..100 {
        if metrics
            .encode()
            .unwrap()
            .contains("mongoload_phase_info{stage=\"long\"")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(2500)).await;
    running.stop();
    tokio::time::timeout(Duration::from_secs(30), running.wait())
        .await
        .expect("the daemon stops");
    sim.shutdown().await;

    let lines = validated_lines(&log);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let r = &lines[0];
    assert!(r.partial);
    assert_eq!(r.stage, "long");
    assert!(
        (2.0..10.0).contains(&r.duration_seconds),
        "{}",
        r.duration_seconds
    );
    assert!(r.operations.ok >= 150, "{r:?}");
    assert!((80.0..=120.0).contains(&r.ops_per_sec), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_based_stages_end_after_their_operations_and_report_each_worker() {
    let sim = common::test_db().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    // Without the counts these stages would last 30 days each.
    let stages = r#"
[[workloads.stages]]
name = "per-connection"
concurrency = 3
operations = 40
per_worker = true
[[workloads.stages]]
name = "total"
rate = 50
operations = 30
[[workloads.stages]]
name = "timed"
concurrency = 2
duration = "1s"
"#;
    // Without the counts the run would not end within the minute.
    let summary = run_to_the_end(&sim, &log, stages).await;
    sim.shutdown().await;

    let lines = validated_lines(&log);
    assert_eq!(lines.len(), 3, "{lines:#?}");
    let (per, total, timed) = (&lines[0], &lines[1], &lines[2]);
    // 3 workers × 40 operations, each worker's batch reported.
    assert_eq!(per.operations.ok + per.operations.error, 120, "{per:?}");
    let c = per.count.as_ref().expect("a count-based stage");
    assert_eq!((c.operations, c.per_worker), (40, true));
    let batches: Vec<(u32, u64)> = c.workers.iter().map(|w| (w.worker, w.operations)).collect();
    assert_eq!(batches, [(0, 40), (1, 40), (2, 40)]);
    assert!(c
        .workers
        .iter()
        .all(|w| w.seconds > 0.0 && w.seconds <= per.duration_seconds + 1e-3));
    assert!(!per.partial && per.duration_seconds < 60.0, "{per:?}");
    // 30 operations in all at 50/s: done or missed, nothing more.
    assert_eq!(
        total.operations.ok + total.operations.error + total.missed,
        30,
        "{total:?}"
    );
    let c = total.count.as_ref().expect("a count-based stage");
    assert_eq!((c.operations, c.per_worker), (30, false));
    let by_workers: u64 = c.workers.iter().map(|w| w.operations).sum();
    assert_eq!(by_workers, total.operations.ok + total.operations.error);
    // The timed stage follows at once: the schedule moved up.
    assert!(timed.count.is_none());
    assert!(
        timed.start >= total.end && timed.start >= per.end,
        "{lines:#?}"
    );
    assert!((timed.duration_seconds - 1.0).abs() < 1e-3, "{timed:?}");
    let s = &summary.workloads[0];
    assert_eq!(
        s.ok + s.errors,
        120 + total.operations.ok
            + total.operations.error
            + timed.operations.ok
            + timed.operations.error
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poisson_stage_runs_every_drawn_operation_and_accounts_for_each() {
    // Open loop with Poisson arrivals: the daemon sends the operations the
    // stage drew (ok + errors + missed = the draw, which differs from
    // rate × duration by a Poisson amount), latency from the intended start.
    let sim = common::test_db().await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("runs.jsonl");
    let stages = r#"
[[workloads.stages]]
name = "bursty"
rate = 150
duration = "4s"
arrival = "poisson"
"#;
    let cfg = config(&sim, &log, stages);
    let drawn = cfg.workloads[0].schedule().unwrap().stages()[0].total_ops();
    assert!(
        (600.0 - drawn as f64).abs() < 4.0 * 600f64.sqrt(),
        "{drawn} drawn for 600 expected"
    );
    let running = daemon::start(cfg).await.unwrap();
    tokio::time::timeout(Duration::from_secs(60), running.wait())
        .await
        .expect("the schedule ends");
    sim.shutdown().await;
    let lines = validated_lines(&log);
    assert_eq!(lines.len(), 1, "{lines:#?}");
    let r = &lines[0];
    assert_eq!(
        r.operations.ok + r.operations.error + r.missed,
        drawn,
        "{r:?}"
    );
    assert!(r.operations.ok > drawn * 9 / 10, "{r:?}");
}

/// One run of `stages` against a fresh simulator whose every command
/// takes `latency`; returns its run log.
async fn run_with_latency(dir: &Path, name: &str, latency: Duration, stages: &str) -> PathBuf {
    let db = TestDb::of_sim(common::sim().await);
    db.sim()
        .expect("a simulator")
        .faults()
        .set_latency(Some(mongoload::sim::LatencyDist::Fixed(latency)));
    let log = dir.join(name);
    run_to_the_end(&db, &log, stages).await;
    db.shutdown().await;
    validated_lines(&log);
    log
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_tells_noise_from_a_regression_with_statistics() {
    let dir = tempfile::tempdir().unwrap();
    // Server latency dominates: an open-loop stage (throughput fixed by
    // the schedule) and a closed-loop one (throughput follows latency).
    let stages = r#"
[[workloads.stages]]
name = "open"
rate = 50
duration = "16s"
warmup = "1s"
[[workloads.stages]]
name = "closed"
concurrency = 4
duration = "16s"
warmup = "1s"
"#;
    // 100 ms a command: a busy test machine's scheduling noise (tens of
    // ms) stays small beside the 10 ms the slower run adds.
    let ms = Duration::from_millis;
    // The three runs at once, each against a simulator of its own (a run
    // at 50 ops/s of 100 ms commands uses a few percent of a core).
    let (base, same, slower) = tokio::join!(
        run_with_latency(dir.path(), "base.jsonl", ms(100), stages),
        run_with_latency(dir.path(), "same.jsonl", ms(100), stages),
        run_with_latency(dir.path(), "slower.jsonl", ms(110), stages),
    );
    let reports = report::read(&base).unwrap();
    let samples = reports[0].samples.as_ref().expect("samples in the run log");
    assert_eq!(samples.interval_seconds, 1.0);
    assert_eq!(samples.all.len(), 15, "{samples:?}");

    // The same plan twice: no regression of the median or the throughput.
    // (The tail, p99 of 50 operations a second, moves with a busy test
    // machine's scheduling: it is checked with a wide gate here.)
    let (code, out, err) = mongoload(&[
        "report",
        "--compare",
        s(&base),
        s(&same),
        "--max-latency-rise",
        "50%",
    ]);
    assert_eq!(code, 0, "{out}{err}");
    // Which runs: id, version and config hash of each.
    let id = &reports[0].run_id;
    let first = out.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("base: run {id}, mongoload ")) && first.contains(", config "),
        "{out}"
    );
    // (Each run has a database of its own here, so their config hashes
    // differ; config::tests checks the hash leaves the run's name out.)
    assert!(
        out.lines().nth(1).unwrap().starts_with("new:  run "),
        "{out}"
    );
    assert!(!out.contains("REGRESSION"), "{out}");
    let p50 = |text: &str, stage: &str| {
        text.lines()
            .find(|l| {
                let c: Vec<&str> = l.split_whitespace().collect();
                c.get(1) == Some(&stage) && l.contains("p50 ms")
            })
            .unwrap_or_else(|| panic!("no p50 row for {stage}:\n{text}"))
            .to_owned()
    };
    // A busy machine may make two runs differ a little, even
    // significantly: never beyond the gate.
    let open = p50(&out, "open");
    assert!(open.ends_with("ok"), "{out}");
    assert!(
        out.lines()
            .last()
            .unwrap()
            .starts_with("no significant regression (confidence 99%"),
        "{out}"
    );

    // 10 % more server latency: open loop keeps its throughput but its
    // latency regresses, significantly; closed loop loses throughput.
    let (code, out, err) = mongoload(&["report", "--compare", s(&base), s(&slower)]);
    assert_eq!(code, 1, "{out}{err}");
    let open = p50(&out, "open");
    assert!(
        open.contains("(medians), significant") && open.ends_with("REGRESSION"),
        "{out}"
    );
    let rise: f64 = open
        .split('+')
        .nth(1)
        .and_then(|t| t.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a rise in {open}"));
    // 10 % more server latency; on a busy machine the client's own delay
    // dilutes it, but never below the gate.
    assert!((5.0..20.0).contains(&rise), "{open}");
    let row = |stage: &str, figure: &str| {
        out.lines()
            .find(|l| l.split_whitespace().nth(1) == Some(stage) && l.contains(figure))
            .unwrap_or_else(|| panic!("no {figure} row for {stage}:\n{out}"))
    };
    assert!(row("open", "ops/s").ends_with("ok"), "{out}");
    let closed = row("closed", "ops/s");
    assert!(
        closed.contains('−') && closed.contains("significant") && closed.ends_with("REGRESSION"),
        "{out}"
    );
    // A wide enough gate lets the same runs pass.
    let (code, out, _) = mongoload(&[
        "report",
        "--compare",
        s(&base),
        s(&slower),
        "--max-latency-rise",
        "20%",
        "--max-drop",
        "20%",
    ]);
    assert_eq!(code, 0, "{out}");
}
