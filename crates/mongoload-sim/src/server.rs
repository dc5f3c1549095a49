//! The TCP side of the simulator: the accept loop (stoppable and
//! restartable on the same port), one task per connection reading frames,
//! applying faults, running commands and writing replies from a reused
//! buffer.

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{Bson, Document};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::auth::{self, Session};
use super::commands::{self, command_name};
use super::cursor::IDLE_TIMEOUT;
use super::profile::Client;
use super::shared::Shared;
use super::wire::{self, Request, WireError, HEADER_LEN};
use mongoload_loglimit::{LogLimiter, LOG_INTERVAL};

/// Longest a client may take to send the rest of a message once its first
/// byte arrived: a peer that stops half-way is dropped instead of holding
/// its connection open forever. (Between messages a connection may idle
/// without limit: drivers keep pooled connections open.)
pub const FRAME_TIMEOUT: Duration = Duration::from_secs(30);

/// Connections that end badly (malformed messages, resets, stalls) are
/// logged one line per [`LOG_INTERVAL`] with a count, so a peer sending
/// garbage on thousands of connections cannot flood the log.
fn bad_closes() -> &'static LogLimiter {
    static LIMITER: std::sync::OnceLock<LogLimiter> = std::sync::OnceLock::new();
    LIMITER.get_or_init(|| LogLimiter::new(2, LOG_INTERVAL))
}
const CLOSE_LOG: usize = 0;
const ACCEPT_LOG: usize = 1;

/// Accepts connections until `stop` is cancelled (the listener is then dropped).
pub async fn accept_loop(
    listener: TcpListener,
    shared: Arc<Shared>,
    stop: CancellationToken,
    root: CancellationToken,
) {
    loop {
        // A frozen or blackholed server accepts nothing: new connections
        // wait in the kernel's backlog, as with a stopped process.
        tokio::select! {
            _ = stop.cancelled() => return,
            () = shared.faults.while_silent() => {}
        }
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((stream, peer)) => {
                if shared.faults.resetting() {
                    // Closed with SO_LINGER 0: an RST, not a FIN.
                    let _ = stream.set_zero_linger();
                    drop(stream);
                    continue;
                }
                if shared.faults.refusing() {
                    tracing::debug!(%peer, "refusing connection (fault injection)");
                    drop(stream);
                    continue;
                }
                let shared = shared.clone();
                let root = root.clone();
                tokio::spawn(async move {
                    shared.stats.conns_current.fetch_add(1, Ordering::Relaxed);
                    shared.stats.conns_total.fetch_add(1, Ordering::Relaxed);
                    let id = shared.next_connection.fetch_add(1, Ordering::Relaxed);
                    match serve_tcp(stream, &shared, id, &root).await {
                        // Expected ends: the client left, or we closed it
                        // (shutdown, fault injection): no line at INFO.
                        Ok(()) => tracing::debug!(%peer, connection = id, "connection closed"),
                        Err(
                            reason @ (Closed::Shutdown
                            | Closed::Killed
                            | Closed::Dropped
                            | Closed::ReplyLost
                            | Closed::Reset),
                        ) => {
                            tracing::debug!(%peer, connection = id, %reason, "connection closed")
                        }
                        Err(reason) => {
                            if let Some(suppressed) = bad_closes().admit(CLOSE_LOG, Instant::now())
                            {
                                tracing::info!(%peer, connection = id, %reason, suppressed, "connection closed")
                            }
                        }
                    }
                    shared.stats.conns_current.fetch_sub(1, Ordering::Relaxed);
                });
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                if let Some(suppressed) = bad_closes().admit(ACCEPT_LOG, Instant::now()) {
                    tracing::warn!(error = %e, suppressed, "accept failed");
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Why a connection ended.
#[derive(Debug, thiserror::Error)]
enum Closed {
    #[error("malformed message: {0}")]
    Wire(#[from] WireError),
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
    #[error("dropped by fault injection")]
    Dropped,
    #[error("reply lost by fault injection")]
    ReplyLost,
    #[error("all connections dropped by request")]
    Killed,
    #[error("reset by fault injection")]
    Reset,
    #[error("simulator shut down")]
    Shutdown,
    #[error("TLS handshake failed: {0}")]
    Tls(std::io::Error),
    #[error("message not completed within {FRAME_TIMEOUT:?}")]
    Stalled,
}

/// Reads one whole message into `buf`; false at a clean end of stream.
/// Waits without limit for the first byte, then [`FRAME_TIMEOUT`] for the
/// rest. The buffer grows with the bytes that arrive, never by the length
/// a header claims, so a peer announcing 48 MB and sending nothing costs
/// nothing.
async fn read_frame(
    reader: &mut BufReader<impl AsyncRead + Unpin>,
    buf: &mut Vec<u8>,
) -> Result<bool, Closed> {
    if buf.capacity() > 1024 * 1024 {
        // Do not keep a huge buffer per idle connection after one big message.
        *buf = Vec::with_capacity(16 * 1024);
    }
    if reader.fill_buf().await?.is_empty() {
        return Ok(false);
    }
    tokio::time::timeout(FRAME_TIMEOUT, read_message(reader, buf))
        .await
        .map_err(|_| Closed::Stalled)??;
    Ok(true)
}

async fn read_message(
    reader: &mut BufReader<impl AsyncRead + Unpin>,
    buf: &mut Vec<u8>,
) -> Result<(), Closed> {
    let mut head = [0u8; HEADER_LEN];
    reader.read_exact(&mut head).await?;
    let header = wire::parse_header(&head)?;
    buf.clear();
    buf.extend_from_slice(&head);
    let body = (header.length - HEADER_LEN) as u64;
    let got = (&mut *reader).take(body).read_to_end(buf).await?;
    if got as u64 != body {
        return Err(Closed::Wire(WireError::Truncated("message")));
    }
    Ok(())
}

/// Serves an accepted connection, after the TLS handshake when TLS is on.
async fn serve_tcp(
    stream: TcpStream,
    shared: &Shared,
    connection_id: i64,
    root: &CancellationToken,
) -> Result<(), Closed> {
    stream.set_nodelay(true)?;
    let client = Client::new(
        stream
            .peer_addr()
            .map_or_else(|_| String::new(), |a| a.to_string()),
    );
    match &shared.tls {
        Some(acceptor) => {
            let stream = super::tls::accept(acceptor, stream)
                .await
                .map_err(Closed::Tls)?;
            let (rd, wr) = tokio::io::split(stream);
            serve(rd, wr, shared, connection_id, root, client).await
        }
        // Plain TCP keeps the lock-free owned halves; a connection closed
        // by a reset fault is closed with an RST (TLS ones with a FIN).
        None => {
            let (mut rd, mut wr) = stream.into_split();
            let r = serve(&mut rd, &mut wr, shared, connection_id, root, client).await;
            if matches!(r, Err(Closed::Reset)) {
                let _ = rd.as_ref().set_zero_linger();
            }
            r
        }
    }
}

async fn serve(
    rd: impl AsyncRead + Unpin,
    mut wr: impl AsyncWrite + Unpin,
    shared: &Shared,
    connection_id: i64,
    root: &CancellationToken,
    mut client: Client,
) -> Result<(), Closed> {
    let mut session = Session::default();
    let mut reader = BufReader::with_capacity(64 * 1024, rd);
    let mut frame = Vec::with_capacity(16 * 1024);
    let mut out = Vec::with_capacity(16 * 1024);
    let mut rng = SmallRng::from_os_rng();
    let token = shared.faults.connection_token();
    let closed = token.cancelled();
    tokio::pin!(closed);
    let reason = || {
        if root.is_cancelled() {
            Closed::Shutdown
        } else if shared.faults.resetting() {
            Closed::Reset
        } else {
            Closed::Killed
        }
    };
    loop {
        let got = tokio::select! {
            // A connection told to close reads no further request, even
            // one already waiting in the socket.
            biased;
            _ = &mut closed => return Err(reason()),
            r = async {
                // A frozen or blackholed server reads nothing (the messages wait in the
                // socket) and answers nothing.
                shared.faults.while_silent().await;
                read_frame(&mut reader, &mut frame).await
            } => r?,
        };
        if !got {
            return Ok(());
        }
        let (body, envelope) = open_request(shared, &mut frame)?;
        let reply = tokio::select! {
            // A reply already computed is sent even if the connection is
            // being closed (a replSetStepDown answers, then closes).
            biased;
            r = respond(shared, connection_id, body, &mut rng, &mut session, &mut client) => r?,
            _ = &mut closed => return Err(reason()),
        };
        if envelope.no_reply {
            continue;
        }
        // A reply computed as the freeze began goes out after it; one
        // computed while the connection is being closed still goes out
        // (a replSetStepDown answers, then closes), so the freeze comes
        // first in this biased select: it is ready at once when not frozen.
        tokio::select! {
            biased;
            () = shared.faults.while_silent() => {}
            _ = &mut closed => return Err(reason()),
        }
        let id = shared.next_request.fetch_add(1, Ordering::Relaxed) as i32;
        encode_reply(&mut out, id, &envelope, &reply);
        wr.write_all(&out).await?;
        if out.capacity() > 1024 * 1024 {
            // Do not keep a huge buffer per idle connection after one big reply.
            out = Vec::with_capacity(16 * 1024);
        }
    }
}

/// How a request came, which its reply follows.
struct Envelope {
    request_id: i32,
    /// A legacy `OP_QUERY`: answered with an `OP_REPLY`.
    legacy: bool,
    /// `moreToCome`: the client wants no reply.
    no_reply: bool,
    /// The request was compressed with this compressor: so is its reply.
    compressor: Option<u8>,
}

/// The command in `frame` (decompressed in place if compressed), and how
/// it came.
fn open_request(shared: &Shared, frame: &mut Vec<u8>) -> Result<(Document, Envelope), Closed> {
    // A compressed request is unwrapped here and answered compressed
    // with the same compressor, as mongod does.
    let mut compressor = None;
    if frame.get(12..16) == Some(&wire::OP_COMPRESSED.to_le_bytes()[..]) {
        let (plain, id) = crate::wire::compress::decompress(frame).map_err(WireError::from)?;
        shared.stats.compressed[usize::from(id)].fetch_add(1, Ordering::Relaxed);
        *frame = plain;
        compressor = Some(id);
    }
    let (request_id, body, legacy, no_reply) = match wire::parse_message(frame)? {
        Request::Msg {
            request_id,
            more_to_come,
            body,
            ..
        } => (request_id, body, false, more_to_come),
        Request::Query {
            request_id,
            collection,
            query,
        } => {
            if !collection.ends_with(".$cmd") {
                return Err(WireError::UnknownOpcode(wire::OP_QUERY).into());
            }
            let mut q = query;
            if !q.contains_key("$db") {
                let db = collection.trim_end_matches(".$cmd").to_owned();
                q.insert("$db", db);
            }
            (request_id, q, true, false)
        }
    };
    let envelope = Envelope {
        request_id,
        legacy,
        no_reply,
        compressor,
    };
    Ok((body, envelope))
}

/// Encodes `reply` (message `id`) into `out`, replacing what it held, as
/// the request's `envelope` asks.
fn encode_reply(out: &mut Vec<u8>, id: i32, envelope: &Envelope, reply: &Document) {
    out.clear();
    if envelope.legacy {
        wire::encode_reply(out, id, envelope.request_id, reply);
    } else {
        wire::encode_msg(out, id, envelope.request_id, reply);
    }
    if let Some(c) = envelope.compressor {
        *out = crate::wire::compress::compress(out, c);
    }
}

/// Applies faults, then runs the command.
async fn respond(
    shared: &Shared,
    connection_id: i64,
    body: Document,
    rng: &mut SmallRng,
    session: &mut Session,
    client: &mut Client,
) -> Result<Document, Closed> {
    let started = Instant::now();
    let name = command_name(&body).to_owned();
    if matches!(name.as_str(), "hello" | "isMaster" | "ismaster") {
        client.observe(&body);
    }
    let decision = shared.faults.decide(&name, rng);
    if decision.drop {
        return Err(Closed::Dropped);
    }
    if !decision.delay.is_zero() {
        let max_time = body.get("maxTimeMS").and_then(|v| match *v {
            Bson::Int32(n) => Some(n as i64),
            Bson::Int64(n) => Some(n),
            Bson::Double(n) => Some(n as i64),
            _ => None,
        });
        if let Some(ms) = max_time.filter(|&ms| ms > 0) {
            let limit = Duration::from_millis(ms as u64);
            if decision.delay > limit {
                tokio::time::sleep(limit).await;
                return Ok(commands::injected_error(50, false));
            }
        }
        tokio::time::sleep(decision.delay).await;
    }
    if let Some(code) = decision.error {
        let retryable = body.contains_key("txnNumber");
        return Ok(match shared.role.get() {
            Some(role) => role.injected_error(code, retryable),
            None => commands::injected_error(code, retryable),
        });
    }
    let fields = match auth::gate(shared.auth.as_ref(), session, &body) {
        auth::Verdict::Reply(reply) => return Ok(reply),
        auth::Verdict::Run { fields } => fields,
    };
    // mongod's profiler and slow-query log see the command as run.
    let db = body.get_str("$db").unwrap_or("test");
    let kept = shared.profiler.wants(db, &name).then(|| body.clone());
    let reply = match shared.role.get() {
        Some(role) => role.respond(shared, connection_id, body).await,
        None => commands::execute(shared, connection_id, body),
    };
    if let Some(cmd) = kept {
        let took = started.elapsed();
        shared
            .profiler
            .record(&shared.store, &cmd, &reply, took, connection_id, client);
    }
    if decision.lose_reply {
        return Err(Closed::ReplyLost);
    }
    Ok(auth::finish(reply, fields))
}

/// Binds `addr` and starts accepting in a task.
pub async fn listen(
    addr: SocketAddr,
    shared: Arc<Shared>,
    root: &CancellationToken,
) -> std::io::Result<(SocketAddr, CancellationToken, tokio::task::JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let stop = root.child_token();
    let task = tokio::spawn(accept_loop(listener, shared, stop.clone(), root.clone()));
    Ok((local, stop, task))
}

/// Frees idle cursors every so often until `root` is cancelled.
pub async fn reap_cursors(shared: Arc<Shared>, root: CancellationToken) {
    let mut tick = tokio::time::interval(Duration::from_secs(30));
    loop {
        tokio::select! {
            _ = root.cancelled() => return,
            _ = tick.tick() => {
                let n = shared.cursors.expire(IDLE_TIMEOUT);
                if n > 0 {
                    tracing::debug!(expired = n, "idle cursors freed");
                }
            }
        }
    }
}
