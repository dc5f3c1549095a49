//! The command line as a user meets it: `mongoload check-config` on valid
//! and invalid files (exit 78 and a message naming file and key),
//! environment overrides, `--help`, and `mongoload demo` serving metrics.

use crate::common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::*;

/// A valid config with a password in the URI.
const VALID: &str = r#"[target]
uri = "mongodb://app:hunter2@127.0.0.1:27017/"

[[workloads]]
name = "w"
kind = "mixed"

[[workloads.stages]]
name = "steady"
rate = 10
duration = "5s"
"#;

/// The binary with no `MONGOLOAD_*` variable inherited from the caller's
/// environment, plus `env`.
fn mongoload(args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mongoload"));
    cmd.args(args);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("MONGOLOAD_") {
            cmd.env_remove(k);
        }
    }
    cmd.env_remove("JOURNAL_STREAM");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn run(args: &[&str], env: &[(&str, &str)]) -> Output {
    mongoload(args, env).output().expect("run mongoload")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn check_config(path: &Path, env: &[(&str, &str)]) -> Output {
    run(&["check-config", "--config", path.to_str().unwrap()], env)
}

/// `VALID` with `from` replaced by `to` (which must be there).
fn edit(from: &str, to: &str) -> String {
    assert!(VALID.contains(from), "{from:?} is not in the base config");
    VALID.replacen(from, to, 1)
}

#[test]
fn each_invalid_value_exits_78_naming_file_and_key() {
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "unknown key",
            edit("kind = \"mixed\"", "kind = \"mixed\"\ncolour = \"blue\""),
            "workloads[0].colour",
        ),
        (
            "wrong type",
            edit("rate = 10", "rate = \"fast\""),
            "workloads[0].stages[0].rate",
        ),
        (
            "negative rate",
            edit("rate = 10", "rate = -5"),
            "workloads[0].stages[0].rate",
        ),
        (
            "weights that sum to zero",
            // The table belongs to the workload: before its stages.
            edit(
                "[[workloads.stages]]",
                "[workloads.mixed]\ninsert = 0\nupdate = 0\ndelete = 0\nfind = 0\n\n[[workloads.stages]]",
            ),
            "workloads[0].mixed.insert",
        ),
        (
            "missing uri",
            edit("uri = \"mongodb://app:hunter2@127.0.0.1:27017/\"\n", ""),
            "target.uri",
        ),
        (
            "both uri and uri_file",
            edit("[target]\n", "[target]\nuri_file = \"/run/credentials/uri\"\n"),
            "target.uri_file",
        ),
        (
            "bad duration",
            edit("duration = \"5s\"", "duration = \"5 parsecs\""),
            "workloads[0].stages[0].duration",
        ),
        (
            "zero max_inflight",
            edit("kind = \"mixed\"", "kind = \"mixed\"\nmax_inflight = 0"),
            "workloads[0].max_inflight",
        ),
    ];
    for (what, toml, key) in cases {
        let file = write_config(&toml);
        let out = check_config(&file.path, &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{what}: stderr {stderr}");
        assert!(
            stderr.contains(&format!("{}: {key}: ", file.path.display())),
            "{what}: stderr does not name file and key {key}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{what}: nothing on stdout");
        assert!(!stderr.contains("hunter2"), "{what}: {stderr}");
    }
}

#[test]
fn invalid_messages_are_exact() {
    let file = write_config(&edit("rate = 10", "rate = -5"));
    let out = check_config(&file.path, &[]);
    assert_eq!(out.status.code(), Some(78));
    assert_eq!(
        text(&out.stderr),
        format!(
            "mongoload: invalid config: {}: workloads[0].stages[0].rate: must be a positive number, got -5\n",
            file.path.display()
        )
    );

    let file = write_config(&edit("[target]\n", "[target]\nuri_file = \"/x\"\n"));
    let out = check_config(&file.path, &[]);
    assert_eq!(
        text(&out.stderr),
        format!(
            "mongoload: invalid config: {}: target.uri_file: give either target.uri or target.uri_file, not both\n",
            file.path.display()
        )
    );
}

#[test]
fn a_missing_file_and_bad_toml_exit_78() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.toml");
    let out = check_config(&missing, &[]);
    assert_eq!(out.status.code(), Some(78));
    assert!(text(&out.stderr).contains(&format!("{}: cannot read", missing.display())));

    let file = write_config("[target\nuri = ");
    let out = check_config(&file.path, &[]);
    assert_eq!(out.status.code(), Some(78));
    assert!(text(&out.stderr).contains(&file.path.display().to_string()));
}

#[test]
fn a_valid_config_prints_the_plan_with_the_password_redacted() {
    let file = write_config(VALID);
    let out = check_config(&file.path, &[]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "stderr: {}", text(&out.stderr));
    assert!(stdout.starts_with(&format!("{}: ok\n", file.path.display())));
    assert!(
        stdout.contains("mongodb://app:***@127.0.0.1:27017/"),
        "{stdout}"
    );
    assert!(!stdout.contains("hunter2"), "{stdout}");
    assert!(stdout.contains("steady: rate 10/s for 5s"), "{stdout}");
    assert!(stdout.contains("timeline"), "{stdout}");
}

#[test]
fn environment_names_the_file_and_overrides_keys() {
    let file = write_config(VALID);
    let path = file.path.to_str().unwrap();
    // MONGOLOAD_CONFIG stands in for --config.
    let out = run(&["check-config"], &[("MONGOLOAD_CONFIG", path)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with(&format!("{path}: ok")));

    // MONGOLOAD_TARGET__URI replaces the file's uri (and is redacted too).
    let out = check_config(
        &file.path,
        &[(
            "MONGOLOAD_TARGET__URI",
            "mongodb://ops:s3cret@db1.example:27018/",
        )],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("mongodb://ops:***@db1.example:27018/"),
        "{stdout}"
    );
    assert!(stdout.contains("hosts: db1.example:27018"), "{stdout}");
    assert!(!stdout.contains("s3cret") && !stdout.contains("hunter2"));

    // A bad override is blamed on the variable, not the file's contents.
    let out = check_config(&file.path, &[("MONGOLOAD_HTTP__LISTEN", "not-an-address")]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("http.listen"), "{stderr}");
    assert!(stderr.contains("MONGOLOAD_HTTP__LISTEN"), "{stderr}");
}

#[test]
fn help_lists_the_subcommands() {
    let out = run(&["--help"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let stdout = text(&out.stdout);
    let commands: Vec<&str> = stdout
        .lines()
        .skip_while(|l| !l.starts_with("Commands:"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    for want in ["run", "check-config", "check-target", "sim", "demo"] {
        assert!(
            commands.contains(&want),
            "{want} not in {commands:?}:\n{stdout}"
        );
    }
    // No subcommand is a usage error, not a crash.
    let out = run(&[], &[]);
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_serves_metrics_with_operations_increasing() {
    let http = free_port();
    let dir = tempfile::tempdir().unwrap();
    let stdout_path = dir.path().join("stdout");
    let run_log = dir.path().join("demo.jsonl");
    let mut child = ChildGuard::new(
        mongoload(
            &[
                "demo",
                "--http-listen",
                &http.to_string(),
                "--run-log",
                run_log.to_str().unwrap(),
            ],
            &[],
        )
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn mongoload demo"),
    );
    let first = wait_metric(http, "demo operations", Duration::from_secs(30), |p| {
        sum(p, "mongoload_operations_total", &[("workload", "demo")]) > 0.0
    })
    .await;
    let n1 = sum(
        &first,
        "mongoload_operations_total",
        &[("workload", "demo")],
    );
    let second = wait_metric(http, "more demo operations", Duration::from_secs(10), |p| {
        sum(p, "mongoload_operations_total", &[("workload", "demo")]) > n1
    })
    .await;
    assert_eq!(
        sample(&second, "mongoload_target_up", &[]),
        Some(1.0),
        "the demo's simulator answers"
    );
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    assert!(
        stdout.contains(&format!("http://{http}/metrics")),
        "the demo prints where /metrics is: {stdout}"
    );
    assert!(stdout.contains("not a database"), "{stdout}");

    // Ctrl-C stops both: SIGINT is handled like SIGTERM.
    let pid = child.id();
    let st = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let mut c = child.take();
    let status = wait_for("the demo to exit", Duration::from_secs(15), || {
        let s = c.try_wait().expect("try_wait");
        async move { s }
    })
    .await;
    assert_eq!(status.code(), Some(0));
    // The run log, named at start and at exit with the command that makes
    // it a page; the stage cut short by Ctrl-C is in it.
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    let log = run_log.display().to_string();
    assert!(
        stdout.contains(&format!("run log (a line per finished stage) at {log}\n"))
            && stdout.contains(&format!(
                "as a page: mongoload report --html mongoload-demo.html {log}\n"
            )),
        "{stdout}"
    );
    let html = dir.path().join("demo.html");
    let out = run(&["report", "--html", html.to_str().unwrap(), &log], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stages = mongoload::report::read(&run_log).unwrap();
    assert!(stages.iter().any(|r| r.stage == "warm"), "{stages:?}");
}

/// A pipe whose reader has gone, as stdout is for `mongoload … | head`
/// once `head` has exited: every write fails with EPIPE.
fn closed_pipe() -> std::io::PipeWriter {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    writer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_the_output_quietly() {
    let file = write_config(VALID);
    let config = file.path.to_str().unwrap();
    // ctl needs a daemon that answers on its control socket.
    let sim = sim().await;
    let socket = file.dir.path().join("control.sock");
    let (_daemon_file, running) = start_daemon(&format!(
        "{}\n[control]\nsocket = {:?}\n",
        config_toml(
            &sim.uri(),
            "[[workloads.stages]]\nrate = 5\nduration = \"1h\"\n"
        ),
        socket.display().to_string()
    ))
    .await;
    let socket = socket.to_str().unwrap();
    // An empty run log still prints the table's header.
    let runlog = file.dir.path().join("runs.jsonl");
    std::fs::write(&runlog, "").unwrap();
    let runlog = runlog.to_str().unwrap();
    for args in [
        &["check-config", "--config", config][..],
        &["report", runlog],
        &["report", "--compare", runlog, runlog],
        &["man"],
        &["ctl", "--socket", socket, "status"],
        &["ctl", "--socket", socket, "--json", "status"],
        &["--help"],
    ] {
        let out = mongoload(args, &[])
            .stdout(closed_pipe())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(
            (out.status.code(), text(&out.stderr)),
            (Some(0), String::new()),
            "mongoload {args:?} with stdout closed"
        );
    }
    running.stop();
    running.wait().await;
    sim.shutdown().await;
}

#[test]
fn paths_the_daemon_cannot_write_exit_78_in_run_and_check_config_alike() {
    let dir = tempfile::tempdir().unwrap();
    // A regular file where a directory would have to be: nobody can
    // create the directory, run or check.
    let blocker = dir.path().join("blocker");
    std::fs::write(&blocker, "").unwrap();
    let missing = blocker.join("missing");
    for (key, table) in [
        (
            "run.log",
            format!("[run]\nlog = {:?}", missing.join("runs.jsonl")),
        ),
        (
            "control.socket",
            format!("[control]\nsocket = {:?}", missing.join("c.sock")),
        ),
    ] {
        let file = write_config(&format!("{VALID}\n{table}\n"));
        let path = file.path.to_str().unwrap();
        let out = run(&["run", "--config", path], &[]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(78), "{key}: {stderr}");
        assert!(
            stderr.contains(&format!("{path}: {key}: {}", missing.display())),
            "{key}: {stderr}"
        );
        assert!(stderr.contains("cannot be created"), "{stderr}");
        // Outside systemd, no advice about its units' sandbox.
        assert!(!stderr.contains("ReadWritePaths="), "{stderr}");
        assert_eq!(stderr.lines().count(), 1, "said once: {stderr}");

        let check = check_config(&file.path, &[]);
        assert_eq!(check.status.code(), Some(78), "{}", text(&check.stderr));
        assert_eq!(text(&check.stderr), stderr, "the same line");
    }

    // A missing directory this user can create: check-config is content,
    // run creates it.
    let sock = dir.path().join("run/mongoload/c.sock");
    let file = write_config(&format!(
        "{VALID}\n[control]\nsocket = {:?}\n",
        sock.display().to_string()
    ));
    let check = check_config(&file.path, &[]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    assert!(
        !text(&check.stderr).contains("control.socket"),
        "{}",
        text(&check.stderr)
    );
    assert!(!sock.parent().unwrap().exists());
}

#[test]
fn a_start_failure_is_logged_once() {
    // The HTTP port is taken, so the daemon cannot start.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let file = write_config(&format!(
        "{VALID}\n[http]\nlisten = \"{}\"\n",
        taken.local_addr().unwrap()
    ));
    let out = run(&["run", "--config", file.path.to_str().unwrap()], &[]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.matches("cannot listen for HTTP").count(),
        1,
        "{stderr}"
    );
}

/// A connection string the driver refuses: `check-config` (through the
/// driver's own parser) and `run` refuse it alike, exit 78 with one line
/// naming the key; compression is accepted by both.
#[test]
fn check_config_and_run_refuse_the_same_connection_strings() {
    for (query, says) in [
        ("compresors=zstd", "compresors"),
        ("compressors=lz4", "lz4"),
        ("socketTimeoutMS=1000", "socketTimeoutMS"),
    ] {
        let file = write_config(&edit(
            "127.0.0.1:27017/\"",
            &format!("127.0.0.1:27017/?{query}\""),
        ));
        let path = file.path.to_str().unwrap();
        let check = check_config(&file.path, &[]);
        let run_out = run(&["run", "--config", path], &[]);
        for (what, out) in [("check-config", &check), ("run", &run_out)] {
            let stderr = text(&out.stderr);
            assert_eq!(out.status.code(), Some(78), "{what} {query}: {stderr}");
            assert!(
                stderr.contains(&format!("{path}: target.uri: ")) && stderr.contains(says),
                "{what} {query}: {stderr}"
            );
            assert_eq!(
                stderr.lines().count(),
                1,
                "{what} {query}: one line: {stderr}"
            );
            assert!(!stderr.contains("hunter2"), "{stderr}");
            assert!(!stderr.contains("labels"), "no driver dump: {stderr}");
        }
        assert_eq!(text(&check.stderr), text(&run_out.stderr), "{query}");
    }
    for c in ["zstd", "snappy", "zlib", "zstd,snappy,zlib"] {
        let file = write_config(&edit(
            "127.0.0.1:27017/\"",
            &format!("127.0.0.1:27017/?compressors={c}\""),
        ));
        let out = check_config(&file.path, &[]);
        assert_eq!(out.status.code(), Some(0), "{c}: {}", text(&out.stderr));
    }
}

/// The deprecated spelling of the control socket's variable still works,
/// with a warning naming the one to use; the one name needs none.
#[test]
fn the_control_socket_has_one_variable_and_the_old_one_warns() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("c.sock").display().to_string();
    let file = write_config(VALID);
    let out = check_config(&file.path, &[("MONGOLOAD_CONTROL__SOCKET", &sock)]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("MONGOLOAD_CONTROL__SOCKET is deprecated: set MONGOLOAD_CONTROL_SOCKET"),
        "{stderr}"
    );
    assert!(text(&out.stdout).contains(&format!("socket: {sock}")));
    let out = check_config(&file.path, &[("MONGOLOAD_CONTROL_SOCKET", &sock)]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        !text(&out.stderr).contains("deprecated"),
        "{}",
        text(&out.stderr)
    );
    assert!(text(&out.stdout).contains(&format!("socket: {sock}")));
}

/// A `mongodb+srv` name that does not resolve is a deployment that cannot
/// be found (69, which systemd restarts), in `run` and `check-target`
/// alike, not a config error (78); `check-config` accepts the string.
#[test]
fn an_srv_name_that_does_not_resolve_is_unreachable_not_a_config_error() {
    let file = write_config(&edit(
        "mongodb://app:hunter2@127.0.0.1:27017/",
        "mongodb+srv://app:hunter2@no-such-cluster.invalid/",
    ));
    let path = file.path.to_str().unwrap();
    let check = check_config(&file.path, &[]);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stderr));
    for args in [
        &["run", "--config", path][..],
        &["check-target", "--config", path],
    ] {
        let out = run(args, &[]);
        let all = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(69), "{args:?}: {all}");
        assert!(!all.contains("hunter2"), "{all}");
        assert!(!all.contains("labels"), "no driver dump: {all}");
    }
}
