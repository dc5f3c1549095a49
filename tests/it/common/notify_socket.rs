//! A stand-in for systemd's end of the notify protocol: a unix datagram
//! socket in a temp dir whose messages a thread timestamps on arrival.

use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// One datagram from the daemon: when it arrived and its text
/// (newline-separated `KEY=value` lines).
#[derive(Debug, Clone)]
pub struct Message {
    pub at: Instant,
    pub text: String,
}

impl Message {
    /// Whether one of the message's lines is exactly `line`.
    pub fn has(&self, line: &str) -> bool {
        self.text.lines().any(|l| l == line)
    }
}

pub struct NotifySocket {
    pub path: PathBuf,
    rx: mpsc::Receiver<Message>,
    /// Everything received so far, in order.
    pub seen: Vec<Message>,
    _dir: tempfile::TempDir,
}

impl NotifySocket {
    pub fn bind() -> NotifySocket {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let socket = UnixDatagram::bind(&path).unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 65536];
            while let Ok(n) = socket.recv(&mut buf) {
                let text = String::from_utf8_lossy(&buf[..n]).into_owned();
                if tx
                    .send(Message {
                        at: Instant::now(),
                        text,
                    })
                    .is_err()
                {
                    return;
                }
            }
        });
        NotifySocket {
            path,
            rx,
            seen: Vec::new(),
            _dir: dir,
        }
    }

    /// Waits up to `timeout` for a message with the line `line`, keeping
    /// everything received on the way in `seen`.
    pub fn wait_for(&mut self, line: &str, timeout: Duration) -> Message {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(m) => {
                    self.seen.push(m.clone());
                    if m.has(line) {
                        return m;
                    }
                }
                Err(_) => panic!(
                    "no {line:?} within {timeout:?}; got {:?}",
                    self.seen.iter().map(|m| &m.text).collect::<Vec<_>>()
                ),
            }
        }
    }

    /// Waits up to `timeout` for a message matching `pred`.
    pub fn wait_until(
        &mut self,
        what: &str,
        timeout: Duration,
        pred: impl Fn(&Message) -> bool,
    ) -> Message {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(m) => {
                    self.seen.push(m.clone());
                    if pred(&m) {
                        return m;
                    }
                }
                Err(_) => panic!(
                    "no {what} within {timeout:?}; got {:?}",
                    self.seen.iter().map(|m| &m.text).collect::<Vec<_>>()
                ),
            }
        }
    }

    /// Collects every message for `span`.
    pub fn collect_for(&mut self, span: Duration) -> Vec<Message> {
        let deadline = Instant::now() + span;
        let mut got = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            if let Ok(m) = self.rx.recv_timeout(left) {
                self.seen.push(m.clone());
                got.push(m);
            }
        }
        got
    }
}

/// Arrival times of the WATCHDOG=1 pings among `msgs`.
pub fn pings(msgs: &[Message]) -> Vec<Instant> {
    msgs.iter()
        .filter(|m| m.has("WATCHDOG=1"))
        .map(|m| m.at)
        .collect()
}

/// A small mixed workload against `uri`: a 2 s first stage so a stage
/// change (and its STATUS=) comes early, then an hour-long second one.
pub fn config_toml(uri: &str) -> String {
    format!(
        r#"
[target]
uri = "{uri}"
database = "notify_test"

[http]
listen = "127.0.0.1:0"

[run]
shutdown_grace = "2s"

[[workloads]]
name = "w"
kind = "mixed"
max_inflight = 8
seed = 1

[workloads.mixed]
doc_size = 256
initial_docs = 100
collection = "notify"

[[workloads.stages]]
name = "first"
rate = 20
duration = "2s"

[[workloads.stages]]
name = "second"
rate = 40
duration = "1h"
"#
    )
}
