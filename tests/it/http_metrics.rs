//! The HTTP endpoint over real TCP on loopback: status codes, content
//! types and bodies of every route, `promtool check metrics` on the scraped
//! page, and shutdown on cancellation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::prometheus_tools;
use mongoload::daemon::http::{serve, HttpState};
use mongoload::error_kind::ErrorKind;
use mongoload::metrics::Metrics;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: String,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// One HTTP/1.1 request on a fresh connection, read until the server closes.
async fn request(addr: std::net::SocketAddr, method: &str, path: &str) -> Reply {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), stream.read_to_end(&mut raw))
        .await
        .expect("server answers within 10 s")
        .unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (head, body) = raw.split_once("\r\n\r\n").expect("a header block");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line.split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_owned(), v.trim().to_owned())
        })
        .collect();
    Reply {
        status,
        headers,
        body: body.to_owned(),
    }
}

struct Server {
    addr: std::net::SocketAddr,
    ready: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

async fn start() -> Server {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let metrics = Arc::new(Metrics::new().unwrap());
    let ready = Arc::new(AtomicBool::new(false));
    let ready_flag = Arc::clone(&ready);
    let state = HttpState::new(Arc::clone(&metrics))
        .with_ready(move || ready_flag.load(Ordering::SeqCst))
        .with_status(|| serde_json::json!({"stage": "hold", "rate": 2000}));
    let shutdown = CancellationToken::new();
    let task = tokio::spawn(serve(listener, state, shutdown.clone()));
    Server {
        addr,
        ready,
        metrics,
        shutdown,
        task,
    }
}

#[tokio::test]
async fn every_route_answers_as_documented() {
    let server = start().await;
    let w = server.metrics.workload(
        "mixed",
        &mongoload::workload::OpSpec::singles(&["find", "insert"]),
    );
    w.op("find")
        .unwrap()
        .record_ok(Duration::from_micros(800), 1);
    w.op("insert")
        .unwrap()
        .record_error(Duration::from_millis(3), ErrorKind::DuplicateKey);
    w.set_stage("hold");
    w.target_rate.set(2000.0);

    let r = request(server.addr, "GET", "/metrics").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/plain; version=0.0.4"));
    assert!(r
        .body
        .lines()
        .any(|l| l == r#"mongoload_operations_total{op="find",outcome="ok",workload="mixed"} 1"#));
    assert!(r
        .body
        .lines()
        .any(|l| l
            == r#"mongoload_errors_total{kind="duplicate_key",op="insert",workload="mixed"} 1"#));
    assert!(r
        .body
        .lines()
        .any(|l| l == r#"mongoload_phase_info{stage="hold",workload="mixed"} 1"#));
    prometheus_tools::check_metrics(&r.body);

    let r = request(server.addr, "GET", "/healthz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok\n"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));

    let r = request(server.addr, "GET", "/readyz").await;
    assert_eq!((r.status, r.body.as_str()), (503, "not ready\n"));
    server.ready.store(true, Ordering::SeqCst);
    let r = request(server.addr, "GET", "/readyz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ready\n"));

    let r = request(server.addr, "GET", "/status").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let status: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    assert_eq!(status, serde_json::json!({"stage": "hold", "rate": 2000}));

    let r = request(server.addr, "GET", "/nope").await;
    assert_eq!(r.status, 404);
    let r = request(server.addr, "GET", "/metrics?x=1").await;
    assert_eq!(r.status, 200, "query strings are ignored");
    let r = request(server.addr, "DELETE", "/metrics").await;
    assert_eq!(r.status, 405);
    assert_eq!(r.header("allow"), Some("GET, HEAD"));

    server.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), server.task)
        .await
        .expect("serve returns after cancel")
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn cancel_stops_serving_even_with_an_idle_connection_open() {
    let server = start().await;
    // A client that connects and never sends a request.
    let _idle = TcpStream::connect(server.addr).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    server.shutdown.cancel();
    tokio::time::timeout(Duration::from_secs(5), server.task)
        .await
        .expect("serve returns within its drain timeout")
        .unwrap()
        .unwrap();
    // The listener is gone with the task.
    assert!(TcpStream::connect(server.addr).await.is_err());
}

#[tokio::test]
async fn keep_alive_serves_several_requests_on_one_connection() {
    let server = start().await;
    let mut stream = TcpStream::connect(server.addr).await.unwrap();
    for _ in 0..3 {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = vec![0u8; 1024];
        let n = tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        let text = String::from_utf8_lossy(&buf[..n]);
        assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
        assert!(text.ends_with("\r\n\r\nok\n"), "{text}");
    }
    server.shutdown.cancel();
}

#[tokio::test]
async fn at_most_max_connections_are_served_at_once() {
    let server = start().await;
    // Fill every permit with clients that send nothing.
    let mut idle = Vec::new();
    for _ in 0..mongoload::daemon::http::MAX_CONNECTIONS {
        idle.push(TcpStream::connect(server.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(100)).await;

    // One more client: the kernel accepts it into the backlog, but it is
    // not served while all permits are taken.
    let extra = tokio::spawn(request(server.addr, "GET", "/healthz"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!extra.is_finished(), "served beyond the connection bound");

    // One idle client leaves: its permit goes to the waiting one.
    drop(idle.pop());
    let r = tokio::time::timeout(Duration::from_secs(5), extra)
        .await
        .expect("served once a permit is free")
        .unwrap();
    assert_eq!(r.status, 200);
    server.shutdown.cancel();
}
