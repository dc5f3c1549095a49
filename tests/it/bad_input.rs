//! Bad input and secrets: generated TOML fed to the config loader never
//! panics and every rejection names file, key and reason (exit 78 from the
//! CLI); a password given in the URI or in `uri_file` never appears in
//! logs, `/metrics`, `/status`, check-config output, error messages or the
//! `Debug` text a panic would print.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use mongoload::config::{self, ConfigError};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};

/// Values of every shape TOML has, including the edges: huge, negative,
/// NaN, empty, unicode, durations good and bad, nested tables.
fn value() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        prop::sample::select(vec![
            "0",
            "-1",
            "1",
            "100000000",
            "4294967296",
            "1e308",
            "-0.0",
            "nan",
            "inf",
            "-inf",
            "0.5",
            "true",
            "false",
            "1979-05-27T07:32:00Z",
            "07:32:00",
        ])
        .prop_map(str::to_owned),
        prop::sample::select(vec![
            "\"10s\"",
            "\"-1s\"",
            "\"0s\"",
            "\"1y\"",
            "\"\"",
            "\"ms\"",
            "\"mon-fri 09:00-17:00\"",
            "\"daily 25:00-26:00\"",
            "\"mongodb://u:p@h:1/\"",
            "\"http://x\"",
            "\"127.0.0.1:0\"",
            "\"[::1]:99999\"",
            "\"76KB\"",
            "\"-5MB\"",
            "\"Europe/Nowhere\"",
            "\"mixed\"",
            "\"custom\"",
            "\"ycsb\"",
            "\"sysbench\"",
            "\"A\"",
            "\"Z\"",
            "\"zipfian\"",
            "\"\\u0000\"",
            "\"é✓\"",
        ])
        .prop_map(str::to_owned),
        "[a-z0-9 ._$-]{0,12}".prop_map(|s| format!("{s:?}")),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(", "))),
            prop::collection::vec((key(), inner), 0..4).prop_map(|kv| {
                let fields: Vec<String> =
                    kv.into_iter().map(|(k, v)| format!("{k} = {v}")).collect();
                format!("{{ {} }}", fields.join(", "))
            }),
        ]
    })
}

/// Keys the schema has (so values reach deep validation) and some it has not.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => prop::sample::select(vec![
            "uri", "uri_file", "database", "app_name", "pool_size", "connect_timeout",
            "server_selection_timeout", "operation_timeout", "listen", "shutdown_grace", "log",
            "socket", "name", "kind", "max_inflight", "max_lag", "seed", "repeat", "rate",
            "concurrency", "duration", "warmup", "windows", "default", "timezone", "when", "from",
            "to", "steps", "each", "insert", "update", "delete", "find", "doc_size", "initial_docs",
            "load_batch", "collection", "workload", "record_count", "collections", "mode",
            "batch_size", "operations", "op", "weight", "filter", "document", "indexes", "keys",
            "$gen", "max", "min", "limit", "sort",
        ])
        .prop_map(str::to_owned),
        1 => "[a-z_]{1,8}",
    ]
}

fn section(header: &'static str, keys: usize) -> impl Strategy<Value = String> {
    prop::collection::vec((key(), value()), 0..keys).prop_map(move |kv| {
        let mut out = format!("{header}\n");
        for (k, v) in kv {
            out.push_str(&format!("{k} = {v}\n"));
        }
        out
    })
}

/// A whole document: a plausible skeleton with random keys and values, a
/// valid config cut at a random byte, or random text.
fn document() -> impl Strategy<Value = String> {
    let workload = (
        section("[[workloads]]", 6),
        prop::sample::select(vec![
            "mixed",
            "ycsb",
            "sysbench",
            "custom",
            "insert-benchmark",
            "name-num",
            "large-doc",
            "nope",
        ]),
        prop::sample::select(vec![
            "[workloads.mixed]",
            "[workloads.ycsb]",
            "[workloads.sysbench]",
            "[workloads.custom]",
            "[workloads.insert_benchmark]",
            "[workloads.name_num]",
            "[workloads.large_doc]",
        ]),
        section("", 5),
        prop::collection::vec(section("[[workloads.stages]]", 5), 0..3),
    )
        .prop_map(|(head, kind, table, params, stages)| {
            format!(
                "{head}kind = \"{kind}\"\n{table}\n{params}{}",
                stages.concat()
            )
        });
    let skeleton = (
        section("[target]\nuri = \"mongodb://127.0.0.1:1/\"", 4),
        section("[http]", 2),
        section("[run]", 2),
        prop::collection::vec(workload, 0..3),
    )
        .prop_map(|(t, h, r, w)| format!("{t}{h}{r}{}", w.concat()));
    let mutated = (
        prop::sample::select(EXAMPLES.to_vec()),
        any::<prop::sample::Index>(),
        value(),
        any::<bool>(),
    )
        .prop_map(|(example, at, v, keep)| mutate(example, at, &v, keep));
    prop_oneof![
        4 => mutated,
        4 => skeleton,
        2 => (0usize..400).prop_map(|cut| {
            let valid = include_str!("../../etc/examples/custom.toml");
            let mut end = cut.min(valid.len());
            while !valid.is_char_boundary(end) {
                end -= 1;
            }
            valid[..end].to_owned()
        }),
        1 => any::<String>(),
    ]
}

/// The bundled examples: valid configs for every kind.
const EXAMPLES: &[&str] = &[
    include_str!("../../etc/examples/custom.toml"),
    include_str!("../../etc/examples/demo.toml"),
    include_str!("../../etc/examples/insert-benchmark.toml"),
    include_str!("../../etc/examples/large-doc.toml"),
    include_str!("../../etc/examples/mixed.toml"),
    include_str!("../../etc/examples/name-num.toml"),
    include_str!("../../etc/examples/sysbench.toml"),
    include_str!("../../etc/examples/ycsb.toml"),
];

/// A valid example with one `key = value` line changed: the value
/// replaced by `v`, or (`keep`) left as it is, so most mutants stay close
/// to valid and reach the deep checks.
fn mutate(example: &str, at: prop::sample::Index, v: &str, keep: bool) -> String {
    let lines: Vec<&str> = example.lines().collect();
    let assignments: Vec<usize> = (0..lines.len())
        .filter(|&i| {
            let l = lines[i].trim_start();
            !l.starts_with('#') && !l.starts_with('[') && l.contains('=')
        })
        .collect();
    if assignments.is_empty() || keep {
        return example.to_owned();
    }
    let i = assignments[at.index(assignments.len())];
    let (k, _) = lines[i].split_once('=').unwrap();
    let mut out: Vec<String> = lines.iter().map(|l| (*l).to_owned()).collect();
    out[i] = format!("{k}= {v}");
    out.join("\n")
}

fn env_override() -> impl Strategy<Value = Vec<(String, String)>> {
    prop::collection::vec(
        (
            prop::sample::select(vec![
                "MONGOLOAD_TARGET__POOL_SIZE",
                "MONGOLOAD_HTTP__LISTEN",
                "MONGOLOAD_RUN__SHUTDOWN_GRACE",
                "MONGOLOAD_TARGET__NOPE",
                "MONGOLOAD_WORKLOADS",
            ]),
            prop::sample::select(vec![
                "1",
                "-1",
                "x",
                "",
                "10s",
                "127.0.0.1:1",
                "99999999999",
            ]),
        )
            .prop_map(|(k, v)| (k.to_owned(), v.to_owned())),
        0..2,
    )
}

/// A rejection must name the file, and for a key error the key and a reason.
fn check_error(e: &ConfigError, path: &Path) -> Result<(), TestCaseError> {
    let text = e.to_string();
    let prefix = format!("{}: ", path.display());
    prop_assert!(text.starts_with(&prefix), "no file name: {text}");
    match e {
        ConfigError::Invalid { key, reason, .. } => {
            prop_assert!(!key.trim().is_empty(), "no key: {text}");
            prop_assert!(!reason.trim().is_empty(), "no reason: {text}");
        }
        ConfigError::Syntax { reason, .. } => {
            prop_assert!(!reason.trim().is_empty(), "no reason: {text}")
        }
        other => prop_assert!(false, "unexpected kind of error for text input: {other:?}"),
    }
    Ok(())
}

#[test]
fn generated_configs_never_panic_and_rejections_name_file_key_and_reason() {
    let path = Path::new("/etc/mongoload/fuzz.toml");
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 3000,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let accepted = std::cell::Cell::new(0usize);
    let rejected = std::cell::Cell::new(0usize);
    runner
        .run(&(document(), env_override()), |(text, env)| {
            let result =
                std::panic::catch_unwind(|| config::parse_with_env(&text, path, env.clone()));
            let result = match result {
                Ok(r) => r,
                Err(_) => {
                    return Err(TestCaseError::fail(format!(
                        "panic on:\n{text}\nenv {env:?}"
                    )))
                }
            };
            match result {
                Ok(c) => {
                    accepted.set(accepted.get() + 1);
                    // What check-config and run do next must not panic either.
                    let described = std::panic::catch_unwind(|| {
                        (c.describe(), mongoload::daemon::limits::fd_budget(&c))
                    });
                    prop_assert!(described.is_ok(), "describe panicked on:\n{text}");
                }
                Err(e) => {
                    rejected.set(rejected.get() + 1);
                    check_error(&e, path)?;
                }
            }
            Ok(())
        })
        .unwrap();
    let (accepted, rejected) = (accepted.get(), rejected.get());
    eprintln!("accepted {accepted}, rejected {rejected}");
    assert!(rejected > 100, "the generator never reached a rejection");
    assert!(accepted > 100, "the generator never reached a valid config");
}

#[test]
fn the_cli_exits_78_naming_file_key_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let mut runner = TestRunner::new(ProptestConfig {
        cases: 12,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&document(), |text| {
            let path = dir.path().join("fuzz.toml");
            std::fs::write(&path, &text).unwrap();
            if config::load_with_env(&path, std::iter::empty()).is_ok() {
                return Ok(());
            }
            let out = Command::new(env!("CARGO_BIN_EXE_mongoload"))
                .args(["check-config", "--config"])
                .arg(&path)
                .env_clear()
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            prop_assert_eq!(out.status.code(), Some(78), "{}", stderr);
            let prefix = format!("mongoload: invalid config: {}: ", path.display());
            prop_assert!(stderr.starts_with(&prefix), "{}", stderr);
            prop_assert!(!stderr.contains("panicked"), "{}", stderr);
            Ok(())
        })
        .unwrap();
}

const PASSWORD: &str = "Hunter2-Sesame";

fn assert_secret_free(what: &str, text: &str) {
    assert!(
        !text.contains(PASSWORD),
        "{what} shows the password:\n{text}"
    );
    // Percent-decoding or a partial echo would still leak it.
    assert!(
        !text.contains("Sesame"),
        "{what} shows part of the password:\n{text}"
    );
}

/// The password in the URI and in `uri_file`: check-config, config errors,
/// start errors, `Debug` (what a panic prints), and a live daemon's log,
/// `/metrics` and `/status`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_never_leaks_from_uri_or_uri_file() {
    let sim = sim().await;
    let uri = format!("mongodb://loader:{PASSWORD}@{}/?appName=x", sim.addr());
    let dir = tempfile::tempdir().unwrap();
    let uri_file = dir.path().join("uri");
    std::fs::write(&uri_file, format!("{uri}\n")).unwrap();
    let http = free_port();
    let base = config_toml(&uri, "[[workloads.stages]]\nrate = 50\nduration = \"1m\"\n")
        .replace("listen = \"127.0.0.1:0\"", &format!("listen = \"{http}\""));
    let with_file = base.replace(
        &format!("uri = \"{uri}\""),
        &format!("uri_file = \"{}\"", uri_file.display()),
    );
    assert!(with_file.contains("uri_file"));

    let check = |text: &str| {
        let f = write_config(text);
        let out = Command::new(env!("CARGO_BIN_EXE_mongoload"))
            .args(["check-config", "--config"])
            .arg(&f.path)
            .env_clear()
            .output()
            .unwrap();
        (
            out.status.code(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        )
    };
    for (name, text) in [("uri", &base), ("uri_file", &with_file)] {
        let (code, out) = check(text);
        assert_eq!(code, Some(0), "{out}");
        assert_secret_free(&format!("check-config with {name}"), &out);
        let c = config::parse_with_env(text, Path::new("c.toml"), Vec::new()).unwrap();
        assert_secret_free(
            &format!("Debug of a config with {name}"),
            &format!("{c:?} {c:#?}"),
        );
    }
    // Errors that are about the URI itself.
    for bad in [
        base.replace("mongodb://", "http://"),
        base.replace("?appName=x", "?appName=x&nosuchoption=1&replicaSet="),
        base.replace("max_lag = \"5s\"", "max_lag = \"0s\""),
    ] {
        let (_, out) = check(&bad);
        assert_secret_free("a config error", &out);
        if let Err(e) = config::parse_with_env(&bad, Path::new("c.toml"), Vec::new()) {
            assert_secret_free("a config error's Debug", &format!("{e:?}"));
        }
    }
    let bad_file = dir.path().join("bad-uri");
    std::fs::write(&bad_file, format!("postgres://loader:{PASSWORD}@h/")).unwrap();
    let (code, out) = check(&with_file.replace(
        &uri_file.display().to_string(),
        &bad_file.display().to_string(),
    ));
    assert_secret_free("a uri_file error", &out);
    let c = config::parse_with_env(
        &with_file.replace(
            &uri_file.display().to_string(),
            &bad_file.display().to_string(),
        ),
        Path::new("c.toml"),
        Vec::new(),
    )
    .unwrap();
    let e = c.target.resolve_uri().unwrap_err();
    assert_secret_free("a uri_file error", &format!("{e} {e:?} {code:?}"));
    // A start error about the URI (an option the driver refuses).
    let start_err = mongoload::daemon::start(
        config::parse_with_env(
            &base.replace("?appName=x", "?appName=x&maxPoolSize=nope"),
            Path::new("c.toml"),
            Vec::new(),
        )
        .unwrap(),
    )
    .await
    .err()
    .expect("the driver refuses the option");
    assert_secret_free("a start error", &format!("{start_err} {start_err:?}"));

    // A live daemon reading the password from uri_file.
    let file = write_config(&with_file);
    let (mut child, stderr_path) = spawn_run(&file, "info");
    wait_metric(
        http,
        "operations or failures",
        Duration::from_secs(30),
        |p| {
            // Prepare failures (the simulator has no user) have their own family.
            sum(p, "mongoload_errors_total", &[])
                + sum(p, "mongoload_prepare_errors_total", &[])
                + sum(p, "mongoload_operations_total", &[])
                >= 2.0
        },
    )
    .await;
    let page = must_get(http, "/metrics").await;
    assert_secret_free("/metrics", &page.body);
    let status = must_get(http, "/status").await;
    assert_secret_free("/status", &status.body);
    assert!(
        status.body.contains(&sim.addr().to_string()),
        "{}",
        status.body
    );
    sigterm(child.id());
    let exit = wait_exit(&mut child, Duration::from_secs(20)).await;
    let log = std::fs::read_to_string(&stderr_path).unwrap();
    assert_eq!(exit.code(), Some(0), "{log}");
    assert_secret_free("the daemon's log", &log);
}

/// A plan needing more descriptors than the hard RLIMIT_NOFILE: check-config
/// warns naming the key, run refuses with exit 78 naming the key; within
/// the hard limit, run raises the soft limit itself.
#[test]
fn a_plan_beyond_the_fd_limit_is_refused_by_run_and_warned_by_check_config() {
    let toml = config_toml(
        "mongodb://127.0.0.1:1/",
        "[[workloads.stages]]\nrate = 10\nduration = \"2s\"\n",
    )
    .replace("max_inflight = 32", "max_inflight = 2000");
    let file = write_config(&toml);
    let under = |limits: &str, cmd: &str| {
        Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit {limits} && exec \"$0\" {cmd} --config \"$1\""
            ))
            .arg(env!("CARGO_BIN_EXE_mongoload"))
            .arg(&file.path)
            .env_remove("MONGOLOAD_CONFIG")
            .env("RUST_LOG", "info")
            .output()
            .unwrap()
    };
    let key = "workloads[0].max_inflight";
    let out = under("-n 1024", "check-config");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning") && stderr.contains(key),
        "{stderr}"
    );
    assert!(stderr.contains("hard limit 1024"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("file descriptors: the plan needs about 2146"),
        "{stdout}"
    );

    let out = under("-n 1024", "run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "{}: {key}: the plan needs about 2146 file descriptors",
            file.path.display()
        )),
        "{stderr}"
    );

    // Soft 1024, hard above the need: run raises the soft limit and starts
    // (against a deployment that is not there: it keeps running).
    let log = file.dir.path().join("run.log");
    let child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -S -n 1024 && ulimit -H -n 4096 && exec \"$0\" run --config \"$1\"")
        .arg(env!("CARGO_BIN_EXE_mongoload"))
        .arg(&file.path)
        .env_remove("MONGOLOAD_CONFIG")
        .env("RUST_LOG", "info")
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let _child = ChildGuard::new(child);
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("raised the soft RLIMIT_NOFILE to 2146")
            && text.contains("starting against")
        {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{text}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
