//! The control endpoint: a unix socket (mode 0600, so only the daemon's
//! user and root reach it; never the public metrics port) speaking one
//! request line → one JSON line, e.g. `pause mixed` →
//! `{"ok":true,"workload":"mixed",…}`. Works with `mongoload ctl` and with
//! `socat - UNIX-CONNECT:/run/mongoload/control.sock`.

use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use super::Command;
use crate::error_log::{LogLimiter, LOG_INTERVAL};
use crate::throttle::Throttle;

/// Longest request line accepted (a command is a few words).
const MAX_LINE: usize = 4096;

/// Connections served at once; more wait for a slot.
pub(crate) const MAX_CONNECTIONS: usize = 16;

/// A connection idle this long is closed.
const IDLE_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections accepted plus requests answered per second, at most, over
/// all clients: a script looping on `mongoload ctl status` is slowed down
/// instead of taking CPU from the load.
pub(crate) const REQUEST_RATE: u32 = 100;
const REQUEST_BURST: u32 = 20;

/// Answers one command: `Ok(fields)` is merged into `{"ok":true,…}`,
/// `Err(reason)` becomes `{"ok":false,"error":reason}`.
pub(crate) type Handler = Arc<dyn Fn(Command) -> Result<serde_json::Value, String> + Send + Sync>;

/// A bound control socket; the file is removed when this is dropped. It
/// is registered with a runtime only by [`ControlSocket::serve`], so it
/// can be bound on one runtime and served on another.
pub(crate) struct ControlSocket {
    listener: Option<std::os::unix::net::UnixListener>,
    path: PathBuf,
}

impl ControlSocket {
    /// Binds `path` with mode 0600. A stale socket file (nothing listening)
    /// is replaced; a live one (another daemon) is an error, as is any other
    /// kind of file at that path.
    pub(crate) fn bind(path: &Path) -> io::Result<ControlSocket> {
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    "a file that is not a socket is in the way",
                ));
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    "another process is listening on it",
                ));
            }
            std::fs::remove_file(path)?;
        }
        let listener = std::os::unix::net::UnixListener::bind(path)?;
        listener.set_nonblocking(true)?;
        // Between bind and chmod the socket has the umask's mode; the
        // systemd unit's UMask=0077 closes that window too.
        if let Err(e) = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)) {
            let _ = std::fs::remove_file(path);
            return Err(e);
        }
        Ok(ControlSocket {
            listener: Some(listener),
            path: path.to_path_buf(),
        })
    }

    /// The socket's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Serves requests until `stop` fires, then removes the socket file.
    pub(crate) async fn serve(mut self, handler: Handler, stop: CancellationToken) {
        let listener = match self.listener.take().map(UnixListener::from_std) {
            Some(Ok(l)) => l,
            Some(Err(e)) => {
                tracing::error!("control socket {}: {e}", self.path.display());
                return;
            }
            None => return,
        };
        let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        let throttle = Arc::new(Throttle::new(REQUEST_RATE, REQUEST_BURST));
        let accept_errors = LogLimiter::new(1, LOG_INTERVAL);
        loop {
            let permit = tokio::select! {
                p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
                _ = stop.cancelled() => break,
            };
            let accepted = tokio::select! {
                a = async {
                    throttle.admit().await;
                    listener.accept().await
                } => a,
                _ = stop.cancelled() => break,
            };
            match accepted {
                Ok((stream, _)) => {
                    let (handler, stop, throttle) =
                        (handler.clone(), stop.clone(), throttle.clone());
                    tokio::spawn(async move {
                        let _permit = permit;
                        tokio::select! {
                            _ = connection(stream, &handler, &throttle) => {}
                            _ = stop.cancelled() => {}
                        }
                    });
                }
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    if let Some(suppressed) = accept_errors.admit(0, std::time::Instant::now()) {
                        tracing::warn!(suppressed, "control socket: accept failed: {e}");
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// One connection: request lines in, one JSON line out for each.
async fn connection(stream: UnixStream, handler: &Handler, throttle: &Throttle) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read.take_limited());
    loop {
        let mut line = String::new();
        let n = match tokio::time::timeout(IDLE_TIMEOUT, lines.read_line(&mut line)).await {
            Ok(Ok(n)) => n,
            Ok(Err(_)) | Err(_) => return,
        };
        if n == 0 {
            return;
        }
        throttle.admit().await;
        let too_long = n > MAX_LINE;
        let reply = if too_long {
            json!({"ok": false, "error": format!("request longer than {MAX_LINE} bytes")})
        } else {
            answer(line.trim(), handler)
        };
        let mut out = reply.to_string();
        out.push('\n');
        if write.write_all(out.as_bytes()).await.is_err() {
            return;
        }
        if too_long {
            return;
        }
    }
}

/// The reply to one request line.
pub(crate) fn answer(line: &str, handler: &Handler) -> serde_json::Value {
    let result = line
        .parse::<Command>()
        .map_err(|e| e.to_string())
        .and_then(|c| handler(c));
    match result {
        Ok(serde_json::Value::Object(mut fields)) => {
            fields.insert("ok".into(), true.into());
            serde_json::Value::Object(fields)
        }
        Ok(other) => json!({"ok": true, "result": other}),
        Err(reason) => json!({"ok": false, "error": reason}),
    }
}

/// Caps how much one connection may send without a newline.
trait TakeLimited: Sized {
    fn take_limited(self) -> tokio::io::Take<Self>;
}

impl<R: tokio::io::AsyncRead> TakeLimited for R {
    fn take_limited(self) -> tokio::io::Take<Self> {
        use tokio::io::AsyncReadExt;
        // Generous for a session of commands, small enough that a client
        // streaming garbage cannot make the daemon buffer without bound.
        self.take(1 << 20)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn echo_handler() -> Handler {
        Arc::new(|c: Command| match c.workload() {
            Some("nosuch") => Err("no workload \"nosuch\"".into()),
            _ => Ok(json!({"message": c.to_string()})),
        })
    }

    #[test]
    fn answers_wrap_ok_and_errors() {
        let h = echo_handler();
        assert_eq!(
            answer("pause w", &h),
            json!({"ok": true, "message": "pause w"})
        );
        assert_eq!(
            answer("pause nosuch", &h),
            json!({"ok": false, "error": "no workload \"nosuch\""})
        );
        let bad = answer("fly w", &h);
        assert_eq!(bad["ok"], false);
        assert!(bad["error"].as_str().unwrap().contains("unknown command"));
    }

    #[tokio::test]
    async fn bind_replaces_stale_sockets_and_refuses_live_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        // A stale socket file: bound, then its listener dropped.
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let live = ControlSocket::bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let e = ControlSocket::bind(&path).err().expect("in use");
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        drop(live);
        assert!(!path.exists(), "removed on drop");

        let file = dir.path().join("plain");
        std::fs::write(&file, "x").unwrap();
        let e = ControlSocket::bind(&file).err().expect("not a socket");
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert!(file.exists(), "a regular file is never removed");
    }

    #[tokio::test]
    async fn serves_several_lines_per_connection_and_stops() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.sock");
        let socket = ControlSocket::bind(&path).unwrap();
        let stop = CancellationToken::new();
        let task = tokio::spawn(socket.serve(echo_handler(), stop.clone()));

        let mut s = UnixStream::connect(&path).await.unwrap();
        s.write_all(b"status\nreset w\n").await.unwrap();
        s.shutdown().await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        let lines: Vec<serde_json::Value> = out
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2, "{out}");
        assert_eq!(lines[1]["message"], "reset w");

        // An endless line is refused and the connection closed.
        let mut s = UnixStream::connect(&path).await.unwrap();
        s.write_all(&vec![b'a'; MAX_LINE + 10]).await.unwrap();
        s.write_all(b"\n").await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.contains("request longer than"), "{out}");

        stop.cancel();
        task.await.unwrap();
        assert!(!path.exists(), "removed when the server stops");
    }
}
