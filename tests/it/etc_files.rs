//! Every config file the project ships (etc/mongoload.toml and
//! etc/examples/*.toml), as a user runs it by hand, outside systemd:
//! `check-config` and then `run` give the same verdict (both accept it, the
//! control socket's missing directory created by `run`), and
//! `check-config` prints each workload's data at steady state, bounded
//! for every plan that repeats.

use crate::common::{self, free_port, get, wait_for, ChildGuard};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn shipped_configs() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("etc/mongoload.toml")];
    let mut examples: Vec<PathBuf> = std::fs::read_dir(root.join("etc/examples"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    examples.sort();
    files.extend(examples);
    assert!(files.len() >= 8, "{files:?}");
    files
}

/// The binary on `file`, no inherited MONGOLOAD_* variable, the target,
/// the HTTP port and the control socket (in a directory that does not
/// exist yet) given as the overrides a user would set.
fn mongoload(args: &[&str], file: &Path, env: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mongoload"));
    cmd.args(args).arg("--config").arg(file);
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("MONGOLOAD_") {
            cmd.env_remove(k);
        }
    }
    cmd.env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("INVOCATION_ID");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_config_and_run_agree_on_every_shipped_file_and_its_data_is_bounded() {
    let sim = common::sim().await;
    for file in shipped_configs() {
        let name = file.display().to_string();
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("not-yet/control.sock");
        let http = free_port();
        let env = [
            ("MONGOLOAD_TARGET__URI", sim.uri()),
            ("MONGOLOAD_HTTP__LISTEN", http.to_string()),
            ("MONGOLOAD_CONTROL_SOCKET", socket.display().to_string()),
            (
                "MONGOLOAD_RUN__LOG",
                dir.path().join("runs.jsonl").display().to_string(),
            ),
            // A cluster example runs as its member 0.
            ("HOSTNAME", "mongoload-0".to_owned()),
        ];

        let check = mongoload(&["check-config"], &file, &env).output().unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&check.stdout).into_owned(),
            String::from_utf8_lossy(&check.stderr).into_owned(),
        );
        assert_eq!(check.status.code(), Some(0), "{name}: {stderr}");
        assert!(
            !socket.parent().unwrap().exists(),
            "check-config creates nothing"
        );
        // Each workload's data, never unbounded in a repeating plan (that
        // is warned about).
        let workloads = stdout.matches("\nworkload \"").count();
        let data: Vec<&str> = stdout
            .lines()
            .filter(|l| l.starts_with("  data: "))
            .collect();
        assert_eq!(
            data.len(),
            workloads,
            "{name}: a data line per workload:\n{stdout}"
        );
        assert!(!stderr.contains("no bound"), "{name}: {stderr}");
        // Every shipped plan holds its data at a steady size, repeating or
        // not: a year at its rates fills no disk.
        for line in &data {
            assert!(line.contains("at steady state"), "{name}: {line}");
        }

        // The same file runs by hand: it starts (HTTP answers, the control
        // socket's directory made), and stops cleanly on SIGTERM.
        let stderr_path = dir.path().join("stderr");
        let child = mongoload(&["run"], &file, &env)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&stderr_path).unwrap())
            .spawn()
            .unwrap();
        let mut child = ChildGuard::new(child);
        let read = || std::fs::read_to_string(&stderr_path).unwrap_or_default();
        let c = child.0.as_mut().unwrap();
        wait_for(
            &format!("{name}: run serves HTTP"),
            Duration::from_secs(30),
            || {
                let exited = c.try_wait().unwrap();
                assert!(
                    exited.is_none(),
                    "{name}: run exited {exited:?}: {}",
                    read()
                );
                async move { get(http, "/healthz").await.ok().filter(|r| r.status == 200) }
            },
        )
        .await;
        assert!(
            socket.exists(),
            "{name}: the control socket, its directory created"
        );
        let status = common::terminate(&mut child).await;
        assert_eq!(status.code(), Some(0), "{name}: {}", read());
    }
    sim.shutdown().await;
}
