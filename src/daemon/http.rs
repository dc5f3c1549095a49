//! The HTTP endpoint: `/metrics` (Prometheus text), `/healthz` (alive),
//! `/readyz` (plan running and deployment reachable), `/status` (JSON).
//!
//! The accept loop is bounded by a semaphore, every connection has a
//! deadline, and accept errors such as EMFILE back off instead of spinning
//! (after ntpd-rs's metrics exporter): a scraper or a port scan can never
//! take the daemon's file descriptors. CPU is bounded too: connections and
//! requests pass a [`Throttle`] ([`REQUEST_RATE`] a second), and
//! `/metrics` is rendered at most once per [`RENDER_INTERVAL`] and served
//! from that page in between ([`MetricsPage`]). The daemon runs this
//! server on its own thread ([`crate::daemon::endpoint_thread`]), never on the load's.

use std::convert::Infallible;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{
    HeaderValue, ALLOW, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, WWW_AUTHENTICATE,
};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;

use crate::error_log::LogLimiter;
use crate::metrics::{Metrics, MetricsError, TEXT_CONTENT_TYPE};
use crate::throttle::Throttle;
use crate::web::{Verdict, WebConfig};

/// Connections served at once; further ones wait in the listen backlog.
pub const MAX_CONNECTIONS: u32 = 64;
/// Longest life of one connection (keep-alive included): a slow or idle
/// client gives its permit back after this.
pub const CONNECTION_TIMEOUT: Duration = Duration::from_secs(30);
/// Time a client has to send its request headers.
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// First and longest pause after a failed accept (EMFILE, ENOBUFS, …).
const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(50);
const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);
/// How long `serve` waits for open connections after cancellation.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(2);
/// Connections accepted plus requests answered per second, at most, over
/// all clients (a burst of [`REQUEST_BURST`] passes at once). A Prometheus
/// server scrapes every few seconds; a storm beyond this is slowed down,
/// not served at the load's expense.
pub const REQUEST_RATE: u32 = 100;
pub const REQUEST_BURST: u32 = 50;
/// Passwords checked with bcrypt per second, at most (a burst of as many
/// passes at once): a wrong password costs tens of milliseconds of CPU,
/// and a flood of them must not take a core from the load. Credentials
/// that passed before are not checked again.
pub const PASSWORD_CHECKS: u32 = 10;
/// Time a client has to finish the TLS handshake.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// The web configuration in force (`[http] web_config`): none is plain
/// HTTP without a password. A reload replaces it; each new connection
/// takes the one in force when it is accepted.
pub type WebSlot = Arc<RwLock<Option<WebConfig>>>;

/// `/metrics` is rendered at most this often; requests in between get the
/// last page, so it is never older than this (plus the time to render it).
pub const RENDER_INTERVAL: Duration = Duration::from_millis(250);

/// `/metrics` as served: the registry rendered at most once per
/// interval, the page shared by every request in between. Rendering holds
/// the lock, so concurrent requests wait for one render instead of each
/// doing its own.
pub struct MetricsPage {
    metrics: Arc<Metrics>,
    interval: Duration,
    last: Mutex<Option<(Instant, Bytes)>>,
}

impl MetricsPage {
    /// A page of `metrics`, rendered at most once per `interval`.
    pub fn new(metrics: Arc<Metrics>, interval: Duration) -> MetricsPage {
        MetricsPage {
            metrics,
            interval,
            last: Mutex::new(None),
        }
    }

    /// The page for a request at `now`: the last one if it was rendered
    /// less than the interval before `now`, else a new one.
    pub fn get(&self, now: Instant) -> Result<Bytes, MetricsError> {
        let mut last = self.last.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, page)) = last.as_ref() {
            if now.saturating_duration_since(*at) < self.interval {
                return Ok(page.clone());
            }
        }
        let page = Bytes::from(self.metrics.encode()?);
        *last = Some((now, page.clone()));
        Ok(page)
    }
}

/// What the endpoints report. Cloning shares everything.
#[derive(Clone)]
pub struct HttpState {
    pub metrics: Arc<Metrics>,
    /// What `/metrics` serves: `metrics` rendered at most once per
    /// [`RENDER_INTERVAL`].
    pub page: Arc<MetricsPage>,
    /// `/readyz` answers 200 while this returns true, else 503.
    pub ready: Arc<dyn Fn() -> bool + Send + Sync>,
    /// `/readyz?preparing=ready`: as `ready`, a workload that prepares its
    /// data counting as ready. For an orchestrator whose readiness gates a
    /// rollout (Kubernetes): a first prepare of hours must not stall it.
    pub ready_while_preparing: Arc<dyn Fn() -> bool + Send + Sync>,
    /// The body of `/status`. Must not contain secrets.
    pub status: Arc<dyn Fn() -> serde_json::Value + Send + Sync>,
    /// TLS and basic authentication, when configured.
    pub web: WebSlot,
}

impl HttpState {
    /// State that is never ready and reports an empty status, to refine
    /// with [`HttpState::with_ready`] and [`HttpState::with_status`].
    pub fn new(metrics: Arc<Metrics>) -> Self {
        HttpState {
            page: Arc::new(MetricsPage::new(metrics.clone(), RENDER_INTERVAL)),
            metrics,
            ready: Arc::new(|| false),
            ready_while_preparing: Arc::new(|| false),
            status: Arc::new(|| serde_json::json!({})),
            web: WebSlot::default(),
        }
    }

    /// Sets the web configuration slot (shared with the reloads).
    pub fn with_web(mut self, web: WebSlot) -> Self {
        self.web = web;
        self
    }

    /// Sets the readiness check.
    pub fn with_ready(mut self, ready: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        self.ready = Arc::new(ready);
        self
    }

    /// Sets the readiness check of `/readyz?preparing=ready`.
    pub fn with_ready_while_preparing(
        mut self,
        ready: impl Fn() -> bool + Send + Sync + 'static,
    ) -> Self {
        self.ready_while_preparing = Arc::new(ready);
        self
    }

    /// Sets the `/status` document.
    pub fn with_status(
        mut self,
        status: impl Fn() -> serde_json::Value + Send + Sync + 'static,
    ) -> Self {
        self.status = Arc::new(status);
        self
    }
}

/// Serves the endpoints on `listener` until `shutdown` is cancelled, then
/// closes open connections gracefully (waiting at most 2 s) and returns.
/// The listener is registered with the runtime this runs on.
pub async fn serve(
    listener: std::net::TcpListener,
    state: HttpState,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let state = Arc::new(state);
    let limits = Arc::new(Limits {
        requests: Throttle::new(REQUEST_RATE, REQUEST_BURST),
        checks: Throttle::new(PASSWORD_CHECKS, PASSWORD_CHECKS),
    });
    let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS as usize));
    let accept_errors = LogLimiter::new(1, crate::error_log::LOG_INTERVAL);
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let permit = tokio::select! {
            _ = shutdown.cancelled() => break,
            permit = Arc::clone(&permits).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => break, // never closed; nothing left to serve if it were
            },
        };
        let accepted = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = async {
                limits.requests.admit().await;
                listener.accept().await
            } => accepted,
        };
        let stream = match accepted {
            Ok((stream, _peer)) => {
                backoff = ACCEPT_BACKOFF_MIN;
                stream
            }
            // The client gave up between SYN and accept: nothing to do.
            Err(e) if is_per_connection(&e) => continue,
            Err(e) => {
                // EMFILE/ENFILE/ENOMEM/ENOBUFS: retrying at once would spin.
                if let Some(suppressed) = accept_errors.admit(0, Instant::now()) {
                    tracing::warn!(error = %e, ?backoff, suppressed, "cannot accept an HTTP connection; backing off");
                }
                tokio::select! {
                    _ = shutdown.cancelled() => break,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                continue;
            }
        };
        let web = state
            .web
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let state = Arc::clone(&state);
        let limits = Arc::clone(&limits);
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            match web.as_ref().and_then(|w| w.tls.clone()) {
                None => serve_connection(stream, state, web, limits, shutdown).await,
                Some(tls) => {
                    let acceptor = tokio_rustls::TlsAcceptor::from(tls);
                    match tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                    {
                        Ok(Ok(stream)) => {
                            serve_connection(stream, state, web, limits, shutdown).await
                        }
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
            drop(permit);
        });
    }
    // Every connection holds a permit: getting all of them back means they
    // are all closed.
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, permits.acquire_many(MAX_CONNECTIONS)).await;
    Ok(())
}

fn is_per_connection(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionAborted | ConnectionReset | Interrupted | WouldBlock
    )
}

/// The server's throttles: every connection and request, and the
/// password checks.
struct Limits {
    requests: Throttle,
    checks: Throttle,
}

async fn serve_connection(
    stream: impl AsyncRead + AsyncWrite + Unpin + Send + 'static,
    state: Arc<HttpState>,
    web: Option<WebConfig>,
    limits: Arc<Limits>,
    shutdown: CancellationToken,
) {
    let web = Arc::new(web);
    let service = service_fn(move |req: Request<Incoming>| {
        let (state, web, limits) = (Arc::clone(&state), Arc::clone(&web), Arc::clone(&limits));
        async move {
            limits.requests.admit().await;
            if let Some(web) = web.as_ref() {
                let header = req.headers().get(AUTHORIZATION).map(|v| v.as_bytes());
                let verdict = match web.judge_fast(header) {
                    Some(v) => v,
                    None => {
                        // Only bcrypt's path copies the header, to its thread.
                        let header = header.map(<[u8]>::to_vec);
                        limits.checks.admit().await;
                        let web = web.clone();
                        tokio::task::spawn_blocking(move || web.verify(header.as_deref()))
                            .await
                            .unwrap_or(Verdict::Wrong)
                    }
                };
                if let Some(reason) = refused(verdict) {
                    state.metrics.count_unauthorized(reason);
                    return Ok::<_, Infallible>(unauthorized());
                }
            }
            let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
            Ok::<_, Infallible>(respond(&state, req.method(), target))
        }
    });
    let mut conn = pin!(http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service));
    let deadline = tokio::time::sleep(CONNECTION_TIMEOUT);
    let mut deadline = pin!(deadline);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
            return;
        }
        _ = deadline.as_mut() => tracing::debug!("HTTP connection reached its deadline"),
        _ = shutdown.cancelled() => {}
    }
    // Finish the request in progress, then close.
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(DRAIN_TIMEOUT, conn).await;
}

/// The response to `method path`: the whole routing table, a plain function
/// of the state.
pub fn respond(state: &HttpState, method: &Method, target: &str) -> Response<Full<Bytes>> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    if method != Method::GET && method != Method::HEAD {
        let mut response = text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n");
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    match path {
        "/metrics" => match state.page.get(Instant::now()) {
            Ok(body) => with_type(StatusCode::OK, TEXT_CONTENT_TYPE, body),
            Err(e) => {
                tracing::error!(error = %e, "cannot encode metrics");
                text(StatusCode::INTERNAL_SERVER_ERROR, "cannot encode metrics\n")
            }
        },
        "/healthz" => text(StatusCode::OK, "ok\n"),
        "/readyz" => {
            let preparing_ok = query.split('&').any(|p| p == "preparing=ready");
            let ready = match preparing_ok {
                true => (state.ready_while_preparing)(),
                false => (state.ready)(),
            };
            if ready {
                text(StatusCode::OK, "ready\n")
            } else {
                text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n")
            }
        }
        "/status" => {
            let mut body = serde_json::to_string_pretty(&(state.status)())
                .unwrap_or_else(|e| format!("{{\"error\": \"cannot encode status: {e}\"}}"));
            body.push('\n');
            with_type(StatusCode::OK, "application/json", body)
        }
        "/" => with_type(StatusCode::OK, "text/html; charset=utf-8", INDEX_PAGE),
        _ => text(StatusCode::NOT_FOUND, "not found\n"),
    }
}

/// The `reason` label of `mongoload_http_unauthorized_total` for a
/// verdict that refuses the request.
fn refused(verdict: Verdict) -> Option<&'static str> {
    match verdict {
        Verdict::Allowed => None,
        Verdict::Missing => Some("missing"),
        Verdict::Wrong => Some("wrong"),
    }
}

/// 401 with the challenge that makes a browser ask for the password.
fn unauthorized() -> Response<Full<Bytes>> {
    let mut response = text(StatusCode::UNAUTHORIZED, "unauthorized\n");
    response.headers_mut().insert(
        WWW_AUTHENTICATE,
        HeaderValue::from_static("Basic realm=\"mongoload\", charset=\"UTF-8\""),
    );
    response
}

/// `/`: a page linking the endpoints, as node_exporter and most exporters
/// serve, so a browser pointed at the port finds its way.
const INDEX_PAGE: &str = concat!(
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>mongoload</title></head>\n",
    "<body><h1>mongoload ",
    env!("CARGO_PKG_VERSION"),
    "</h1>\n<p>Constant or scheduled synthetic load for MongoDB.</p>\n<ul>\n",
    "<li><a href=\"metrics\">/metrics</a>: Prometheus metrics</li>\n",
    "<li><a href=\"status\">/status</a>: the plan, each workload's stage and levels (JSON)</li>\n",
    "<li><a href=\"healthz\">/healthz</a>: liveness</li>\n",
    "<li><a href=\"readyz\">/readyz</a>: readiness (the plan runs)</li>\n",
    "</ul>\n</body></html>\n"
);

fn text(status: StatusCode, body: &'static str) -> Response<Full<Bytes>> {
    with_type(status, "text/plain; charset=utf-8", body)
}

fn with_type(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(ready: bool) -> HttpState {
        HttpState::new(Arc::new(Metrics::new().unwrap()))
            .with_ready(move || ready)
            .with_status(|| serde_json::json!({"stage": "hold"}))
    }

    fn content_type(r: &Response<Full<Bytes>>) -> &str {
        r.headers()[CONTENT_TYPE].to_str().unwrap()
    }

    #[test]
    fn routes() {
        let s = state(false);
        let r = respond(&s, &Method::GET, "/metrics");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(content_type(&r), "text/plain; version=0.0.4");
        assert_eq!(
            respond(&s, &Method::GET, "/healthz").status(),
            StatusCode::OK
        );
        assert_eq!(
            respond(&s, &Method::GET, "/readyz").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            respond(&state(true), &Method::GET, "/readyz").status(),
            StatusCode::OK
        );
        let r = respond(&s, &Method::GET, "/status");
        assert_eq!(content_type(&r), "application/json");
        let preparing = HttpState::new(Arc::new(Metrics::new().unwrap()))
            .with_ready(|| false)
            .with_ready_while_preparing(|| true);
        assert_eq!(
            respond(&preparing, &Method::GET, "/readyz").status(),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            respond(&preparing, &Method::GET, "/readyz?preparing=ready").status(),
            StatusCode::OK
        );
        assert_eq!(
            respond(&s, &Method::GET, "/metrics?x=1").status(),
            StatusCode::OK
        );
        let r = respond(&s, &Method::GET, "/");
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(content_type(&r), "text/html; charset=utf-8");
        for link in [
            "href=\"metrics\"",
            "href=\"status\"",
            "href=\"healthz\"",
            "href=\"readyz\"",
        ] {
            assert!(INDEX_PAGE.contains(link), "{link}");
        }
        assert_eq!(
            respond(&s, &Method::GET, "/index.html").status(),
            StatusCode::NOT_FOUND
        );
        assert_eq!(
            respond(&s, &Method::GET, "/metrics/").status(),
            StatusCode::NOT_FOUND
        );
        let r = respond(&s, &Method::POST, "/metrics");
        assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert_eq!(r.headers()[ALLOW], "GET, HEAD");
    }

    #[test]
    fn the_page_is_rendered_at_most_once_per_interval() {
        let metrics = Arc::new(Metrics::new().unwrap());
        let gauge = prometheus::IntGauge::new("test_value", "a value that changes").unwrap();
        metrics
            .registry()
            .register(Box::new(gauge.clone()))
            .unwrap();
        let page = MetricsPage::new(metrics, Duration::from_millis(250));
        let has = |p: &Bytes, v: i64| {
            std::str::from_utf8(p)
                .unwrap()
                .contains(&format!("\ntest_value {v}\n"))
        };
        let t0 = Instant::now();
        gauge.set(1);
        assert!(has(&page.get(t0).unwrap(), 1));
        gauge.set(2);
        // Within the interval: the same page, not a new render.
        assert!(has(&page.get(t0 + Duration::from_millis(249)).unwrap(), 1));
        // Then a fresh one, which the next interval serves.
        let t1 = t0 + Duration::from_millis(250);
        assert!(has(&page.get(t1).unwrap(), 2));
        gauge.set(3);
        assert!(has(&page.get(t1 + Duration::from_millis(100)).unwrap(), 2));
        assert!(has(&page.get(t1 + Duration::from_secs(5)).unwrap(), 3));
    }
}
