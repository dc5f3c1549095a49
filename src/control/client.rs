//! The client side of the control socket, used by `mongoload ctl`: send
//! one request line, read one JSON line, render it for a terminal.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use super::Command;

/// How long `ctl` waits for the daemon's answer.
const TIMEOUT: Duration = Duration::from_secs(10);

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Nothing listens on the socket, or it is not reachable.
    #[error("cannot connect to {}: {source} (is mongoload running with [control] socket set to this path?)", path.display())]
    Connect {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The connection broke or timed out.
    #[error("{}: {reason}", path.display())]
    Io { path: PathBuf, reason: String },
    /// The answer was not JSON.
    #[error("{}: the daemon's answer is not JSON: {reason}", path.display())]
    Reply { path: PathBuf, reason: String },
}

/// Sends `command` to the daemon on `socket` and returns its JSON answer
/// (`{"ok":true,…}` or `{"ok":false,"error":…}`).
pub async fn request(socket: &Path, command: &Command) -> Result<serde_json::Value, ClientError> {
    let io = |reason: String| ClientError::Io {
        path: socket.to_path_buf(),
        reason,
    };
    let stream = UnixStream::connect(socket)
        .await
        .map_err(|source| ClientError::Connect {
            path: socket.to_path_buf(),
            source,
        })?;
    let (read, mut write) = stream.into_split();
    let exchange = async {
        write
            .write_all(format!("{command}\n").as_bytes())
            .await
            .map_err(|e| io(e.to_string()))?;
        let mut line = String::new();
        BufReader::new(read)
            .read_line(&mut line)
            .await
            .map_err(|e| io(e.to_string()))?;
        Ok::<String, ClientError>(line)
    };
    let line = tokio::time::timeout(TIMEOUT, exchange)
        .await
        .map_err(|_| io(format!("no answer within {TIMEOUT:?}")))??;
    serde_json::from_str(line.trim()).map_err(|e| ClientError::Reply {
        path: socket.to_path_buf(),
        reason: e.to_string(),
    })
}

/// The answer as text for a terminal: a table for `status`, the daemon's
/// message otherwise. `Err` carries the daemon's refusal.
pub fn render(reply: &serde_json::Value) -> Result<String, String> {
    if reply["ok"] != true {
        return Err(reply["error"]
            .as_str()
            .unwrap_or("the daemon refused the request")
            .to_string());
    }
    if let Some(workloads) = reply["workloads"].as_array() {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<16} {:<10} {:<24} {:>12} {:>8}  control",
            "WORKLOAD", "STATE", "STAGE", "RATE", "WORKERS"
        );
        for w in workloads {
            let stage = &w["stage"];
            let _ = writeln!(
                out,
                "{:<16} {:<10} {:<24} {:>12} {:>8}  {}",
                w["name"].as_str().unwrap_or("?"),
                stage["state"].as_str().unwrap_or("?"),
                stage["name"].as_str().unwrap_or("-"),
                format!(
                    "{}/s",
                    super::fmt_rate(stage["rate"].as_f64().unwrap_or(0.0))
                ),
                stage["concurrency"].as_u64().unwrap_or(0),
                w["control"]["summary"].as_str().unwrap_or("")
            );
        }
        return Ok(out);
    }
    Ok(format!("{}\n", reply["message"].as_str().unwrap_or("ok")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_status_messages_and_refusals() {
        let status = json!({"ok": true, "workloads": [{
            "name": "mixed",
            "stage": {"state": "running", "name": "warm", "rate": 500.004_206, "concurrency": 0},
            "control": {"summary": "paused"},
        }]});
        let text = render(&status).unwrap();
        let row = text.lines().nth(1).unwrap();
        for part in ["mixed", "running", "warm", "500/s", "paused"] {
            assert!(row.contains(part), "{row}");
        }
        assert_eq!(
            render(&json!({"ok": true, "message": "workload mixed: paused"})),
            Ok("workload mixed: paused\n".into())
        );
        assert_eq!(
            render(&json!({"ok": false, "error": "no workload \"x\""})),
            Err("no workload \"x\"".into())
        );
    }
}
