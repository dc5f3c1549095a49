//! Shared helpers of the integration tests: the one way to start a
//! simulator (in-process, or as a `mongoload sim` process), free loopback
//! ports, config files in temporary directories, the daemon started
//! in-process, the one HTTP GET (async, and blocking for the synchronous
//! tests), a parser of the Prometheus text exposition format, and polling
//! waits with deadlines.

#![allow(dead_code)] // not every helper is used yet

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use mongoload::config::Config;
use mongoload::daemon::Running;
use mongoload::sim::{SimConfig, SimHandle};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A simulator on a free loopback port.
pub async fn sim() -> SimHandle {
    sim_with(SimConfig::default()).await
}

/// A simulator on a given address (to bring up a deployment the daemon
/// already points at).
pub async fn sim_on(addr: SocketAddr) -> SimHandle {
    sim_with(SimConfig {
        listen: addr,
        ..Default::default()
    })
    .await
}

/// A simulator with the given options (faults, users, TLS).
/// A simulator that serves at most `capacity` commands a second (its
/// `--capacity`): the known knee of the capacity tests.
pub async fn sim_with_capacity(capacity: f64) -> SimHandle {
    sim_with(SimConfig {
        faults: mongoload::sim::FaultConfig {
            capacity: Some(capacity),
            ..Default::default()
        },
        ..SimConfig::default()
    })
    .await
}

pub async fn sim_with(config: SimConfig) -> SimHandle {
    let listen = config.listen;
    mongoload::sim::start(config)
        .await
        .unwrap_or_else(|e| panic!("the simulator starts on {listen}: {e}"))
}

/// The environment variable naming a real deployment for the tests that
/// need no fault injection (see docs/testing.md, "Against a real deployment").
pub const TEST_URI: &str = "MONGOLOAD_TEST_URI";

/// The deployment a test loads: the deployment `MONGOLOAD_TEST_URI` names,
/// or else a simulator of the test's own. Its databases carry a prefix
/// unique to the test, and on a real deployment they are dropped when
/// the value is (pass or fail).
pub struct TestDb {
    uri: String,
    prefix: String,
    sim: Option<SimHandle>,
}

/// The test's deployment (see [`TestDb`]).
pub async fn test_db() -> TestDb {
    match std::env::var(TEST_URI) {
        Ok(uri) if !uri.is_empty() => TestDb::real(uri),
        _ => TestDb::of_sim(sim().await),
    }
}

/// `mlt<pid>_<n>_`: unique to one test of one run.
fn unique_prefix() -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("mlt{}_{n}_", std::process::id())
}

impl TestDb {
    /// The connection string (it may hold a password: never print it).
    pub fn uri(&self) -> String {
        self.uri.clone()
    }

    /// The database this test calls `name`, with the test's prefix.
    pub fn database(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// The simulator, when the test runs against one.
    pub fn sim(&self) -> Option<&SimHandle> {
        self.sim.as_ref()
    }

    /// The real deployment `uri` names (see [`TEST_URI`]).
    pub fn real(uri: String) -> TestDb {
        TestDb {
            uri,
            prefix: unique_prefix(),
            sim: None,
        }
    }

    /// A simulator of the test's own (a test that injects faults), with
    /// the prefixed databases as any other.
    pub fn of_sim(sim: SimHandle) -> TestDb {
        TestDb {
            uri: sim.uri(),
            prefix: unique_prefix(),
            sim: Some(sim),
        }
    }

    /// Ends the test's use of the deployment: stops its simulator, or drops
    /// its databases.
    pub async fn shutdown(mut self) {
        let prefix = std::mem::take(&mut self.prefix);
        if let Some(sim) = self.sim.take() {
            return sim.shutdown().await;
        }
        let uri = self.uri.clone();
        if let Err(e) = drop_prefixed(&uri, &prefix).await {
            panic!("could not drop the test's databases {prefix}*: {e}");
        }
    }

    /// A driver client (3 s server selection).
    pub async fn client(&self) -> mongodb::Client {
        driver_client(&self.uri, true, Duration::from_secs(3)).await
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // Shut down already, or a simulator that goes with the value.
        if self.sim.is_some() || self.prefix.is_empty() {
            return;
        }
        let (uri, prefix) = (self.uri.clone(), self.prefix.clone());
        // A runtime of its own: the test's may be shutting down.
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?
                .block_on(drop_prefixed(&uri, &prefix))
                .map_err(|e| e.to_string())
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("could not drop the test's databases {}*: {e}", self.prefix);
        }
    }
}

/// Drops the databases whose names start with `prefix`; where
/// `dropDatabase` is refused (a user with `readWrite` only), their
/// collections.
async fn drop_prefixed(uri: &str, prefix: &str) -> Result<(), mongodb::error::Error> {
    let client = driver_client(uri, true, Duration::from_secs(5)).await;
    let names = client
        .list_database_names()
        .authorized_databases(true)
        .await?;
    for name in names.iter().filter(|n| n.starts_with(prefix)) {
        let db = client.database(name);
        if db.drop().await.is_err() {
            for coll in db.list_collection_names().await? {
                db.collection::<mongodb::bson::Document>(&coll)
                    .drop()
                    .await?;
            }
        }
    }
    Ok(())
}

/// A `mongoload sim` process (the real binary, for clients that are not
/// in this process); killed when dropped, pass or fail.
pub struct SimProcess(pub std::process::Child);

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts `mongoload sim --listen 127.0.0.1:PORT ARGS…` and waits for the
/// line saying it listens.
pub fn spawn_sim(port: u16, args: &[&str]) -> SimProcess {
    use std::io::{BufRead, BufReader};
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["sim", "--listen", &format!("127.0.0.1:{port}")])
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start mongoload sim");
    let mut sim = SimProcess(child);
    let stderr = sim.0.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.contains("listening") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("mongoload sim logs that it listens");
    sim
}

/// A driver client for `uri` with the given server selection timeout,
/// a 2 s connect timeout and retryable reads and writes on or off.
pub async fn driver_client(
    uri: &str,
    retry: bool,
    server_selection_timeout: Duration,
) -> mongodb::Client {
    let mut opts = mongodb::options::ClientOptions::parse(uri).await.unwrap();
    opts.server_selection_timeout = Some(server_selection_timeout);
    opts.connect_timeout = Some(Duration::from_secs(2));
    opts.retry_writes = Some(retry);
    opts.retry_reads = Some(retry);
    mongodb::Client::with_options(opts).unwrap()
}

/// The server error code inside a driver error, wherever the driver put it.
pub fn error_code(e: &mongodb::error::Error) -> Option<i32> {
    use mongodb::error::{ErrorKind, WriteFailure};
    match &*e.kind {
        ErrorKind::Command(c) => Some(c.code),
        ErrorKind::Write(WriteFailure::WriteError(w)) => Some(w.code),
        ErrorKind::InsertMany(m) => m.write_errors.as_ref()?.first().map(|w| w.code),
        _ => None,
    }
}

/// A loopback port no other test uses: free when picked, and claimed for
/// the rest of this process with an exclusive lock on a file named after
/// it (`$TMPDIR/mongoload-test-ports/PORT`), which every test process
/// honours: under nextest each test is a process of its own, eight at
/// once. Picked at random below the kernel's ephemeral range (32768–60999
/// by default), never in it: the outgoing connections of the tests'
/// drivers take their local ports from that range, and one of them took
/// a port between a test's pick and its daemon's bind ("Address already
/// in use"). The lock files stay; the locks go with the process.
pub fn free_port() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], free_ports(1)))
}

/// The first of `n` consecutive free loopback ports (a replica set's
/// members), each claimed as [`free_port`] claims one.
pub fn free_ports(n: u16) -> u16 {
    use rand::Rng;
    const LOW: u16 = 20_000;
    const HIGH: u16 = 32_768;
    let mut rng = rand::rng();
    for _ in 0..10_000 {
        let first = rng.random_range(LOW..HIGH - n);
        let claims: Option<Vec<std::fs::File>> = (first..first + n).map(claim_port).collect();
        if let Some(claims) = claims {
            CLAIMED_PORTS
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .extend(claims);
            return first;
        }
    }
    panic!("no {n} free consecutive loopback ports in {LOW}..{HIGH}");
}

/// Claims `port` for this process: its lock file locked (no other test
/// process holds it), and nothing listening on it.
fn claim_port(port: u16) -> Option<std::fs::File> {
    use rustix::fs::{flock, FlockOperation};
    let dir = std::env::temp_dir().join("mongoload-test-ports");
    std::fs::create_dir_all(&dir).expect("create the ports' lock directory");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(port.to_string()))
        .expect("open a port's lock file");
    flock(&file, FlockOperation::NonBlockingLockExclusive).ok()?;
    std::net::TcpListener::bind(("127.0.0.1", port)).ok()?;
    Some(file)
}

/// The lock files of the ports this process claimed, held until it exits.
static CLAIMED_PORTS: std::sync::Mutex<Vec<std::fs::File>> = std::sync::Mutex::new(Vec::new());

/// A config file in its own temporary directory (removed on drop).
pub struct ConfigFile {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

/// Writes `text` as `mongoload.toml` in a fresh temporary directory.
pub fn write_config(text: &str) -> ConfigFile {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("mongoload.toml");
    std::fs::write(&path, text).expect("write the config");
    ConfigFile { dir, path }
}

impl ConfigFile {
    /// Loads and validates the file as the daemon does, without the
    /// process environment (tests must not depend on the developer's).
    pub fn load(&self) -> Config {
        mongoload::config::load_with_env(&self.path, std::iter::empty())
            .unwrap_or_else(|e| panic!("the test config is valid: {e}"))
    }
}

/// A config for one `mixed` workload named `w` (small documents, a small
/// initial key range, `max_inflight` 32, seed fixed) against `uri`, with
/// HTTP on a free port, short driver timeouts, and the given
/// `[[workloads.stages]]` tables.
pub fn config_toml(uri: &str, stages: &str) -> String {
    config_toml_in(uri, "mltest", stages)
}

/// [`config_toml`] with the database named.
pub fn config_toml_in(uri: &str, database: &str, stages: &str) -> String {
    format!(
        r#"[target]
uri = "{uri}"
database = "{database}"
app_name = "mongoload-test"
connect_timeout = "1s"
server_selection_timeout = "1s"
operation_timeout = "2s"

[http]
listen = "127.0.0.1:0"

[run]
shutdown_grace = "3s"

[[workloads]]
name = "w"
kind = "mixed"
max_inflight = 32
max_lag = "5s"
seed = 7

[workloads.mixed]
insert = 6.5
update = 3
delete = 3
find = 87.5
doc_size = 512
initial_docs = 200
load_batch = 100
collection = "m"

{stages}
"#
    )
}

/// Writes `toml`, loads it and starts the daemon in-process. The file is
/// returned so it outlives the run.
pub async fn start_daemon(toml: &str) -> (ConfigFile, Running) {
    let file = write_config(toml);
    let running = mongoload::daemon::start(file.load())
        .await
        .unwrap_or_else(|e| panic!("the daemon starts: {e}"));
    (file, running)
}

/// One HTTP response.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// A header's value, by case-insensitive name.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `GET path` on a fresh connection (HTTP/1.1, `Connection: close`), read
/// to the end; a chunked body is decoded.
pub async fn get(addr: SocketAddr, path: &str) -> Result<Reply, String> {
    let mut stream = tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
        .await
        .map_err(|_| format!("connect to {addr} timed out"))?
        .map_err(|e| format!("connect to {addr}: {e}"))?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream
        .write_all(req.as_bytes())
        .await
        .map_err(|e| format!("send to {addr}: {e}"))?;
    let mut raw = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), stream.read_to_end(&mut raw))
        .await
        .map_err(|_| format!("GET {path}: no complete answer within 20 s"))?
        .map_err(|e| format!("GET {path}: {e}"))?;
    parse_response(&raw)
}

/// [`get`] for synchronous tests (outside any runtime).
pub fn get_blocking(addr: SocketAddr, path: &str) -> Result<Reply, String> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?
        .block_on(get(addr, path))
}

/// `GET path` that must succeed at the transport level.
pub async fn must_get(addr: SocketAddr, path: &str) -> Reply {
    get(addr, path).await.unwrap_or_else(|e| panic!("{e}"))
}

/// Scrapes `/metrics`, asserting status 200.
pub async fn scrape(addr: SocketAddr) -> String {
    let r = must_get(addr, "/metrics").await;
    assert_eq!(r.status, 200, "/metrics answered {}: {}", r.status, r.body);
    r.body
}

fn parse_response(raw: &[u8]) -> Result<Reply, String> {
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of the header block")?;
    let head = std::str::from_utf8(&raw[..split]).map_err(|e| e.to_string())?;
    let body = &raw[split + 4..];
    let mut lines = head.split("\r\n");
    let status_line = lines.next().ok_or("empty response")?;
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let chunked = headers.iter().any(|(n, v)| {
        n.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let body = if chunked {
        dechunk(body)?
    } else {
        body.to_vec()
    };
    Ok(Reply {
        status,
        headers,
        body: String::from_utf8(body).map_err(|e| format!("body is not UTF-8: {e}"))?,
    })
}

fn dechunk(mut body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    loop {
        let eol = body
            .windows(2)
            .position(|w| w == b"\r\n")
            .ok_or("truncated chunk size")?;
        let size_text = std::str::from_utf8(&body[..eol]).map_err(|e| e.to_string())?;
        let size_text = size_text.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|e| format!("bad chunk size {size_text:?}: {e}"))?;
        body = &body[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if body.len() < size + 2 {
            return Err("truncated chunk".into());
        }
        out.extend_from_slice(&body[..size]);
        body = &body[size + 2..];
    }
}

/// One sample line of the Prometheus text format.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub name: String,
    pub labels: Vec<(String, String)>,
    pub value: f64,
}

impl Sample {
    /// The value of a label, if present.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn matches(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        self.name == name && labels.iter().all(|(k, v)| self.label(k) == Some(*v))
    }
}

/// Parses a page of the Prometheus text exposition format (version
/// 0.0.4): comments and blank lines skipped, label values unescaped
/// (`\\`, `\"`, `\n`), `NaN` and `±Inf` values, optional timestamps.
pub fn parse_metrics(text: &str) -> Result<Vec<Sample>, String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|(n, l)| parse_line(l).map_err(|e| format!("line {}: {e}: {l:?}", n + 1)))
        .collect()
}

fn parse_line(line: &str) -> Result<Sample, String> {
    let line = line.trim();
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("bad metric name".into());
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(after) = rest.strip_prefix('{') {
        let mut chars = after.char_indices().peekable();
        loop {
            // Skip separators and whitespace; a '}' ends the set.
            while let Some((_, c)) = chars.peek() {
                if *c == ',' || c.is_whitespace() {
                    chars.next();
                } else {
                    break;
                }
            }
            match chars.next() {
                Some((i, '}')) => {
                    rest = &after[i + 1..];
                    break;
                }
                Some((start, _)) => {
                    let mut end = start + 1;
                    while let Some(&(i, c)) = chars.peek() {
                        if c.is_ascii_alphanumeric() || c == '_' {
                            chars.next();
                            end = i + 1;
                        } else {
                            break;
                        }
                    }
                    let key = &after[start..end];
                    if chars.next().map(|(_, c)| c) != Some('=') {
                        return Err(format!("label {key}: expected '='"));
                    }
                    if chars.next().map(|(_, c)| c) != Some('"') {
                        return Err(format!("label {key}: expected '\"'"));
                    }
                    let mut value = String::new();
                    loop {
                        match chars.next() {
                            Some((_, '"')) => break,
                            Some((_, '\\')) => match chars.next() {
                                Some((_, 'n')) => value.push('\n'),
                                Some((_, '\\')) => value.push('\\'),
                                Some((_, '"')) => value.push('"'),
                                other => return Err(format!("bad escape {other:?}")),
                            },
                            Some((_, c)) => value.push(c),
                            None => return Err(format!("label {key}: unterminated value")),
                        }
                    }
                    labels.push((key.to_owned(), value));
                }
                None => return Err("unterminated label set".into()),
            }
        }
    }
    let mut fields = rest.split_whitespace();
    let value_text = fields.next().ok_or("no value")?;
    let value = match value_text {
        "NaN" => f64::NAN,
        "+Inf" | "Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        v => v.parse().map_err(|e| format!("bad value {v:?}: {e}"))?,
    };
    if let Some(ts) = fields.next() {
        ts.parse::<i64>()
            .map_err(|e| format!("bad timestamp {ts:?}: {e}"))?;
    }
    if fields.next().is_some() {
        return Err("trailing fields".into());
    }
    Ok(Sample {
        name: name.to_owned(),
        labels,
        value,
    })
}

fn parsed(text: &str) -> Vec<Sample> {
    parse_metrics(text).unwrap_or_else(|e| panic!("the metrics page parses: {e}"))
}

/// The value of the one sample named `name` whose labels include
/// `labels`; `None` when there is none. Panics when several match: the
/// caller meant [`sum`].
pub fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    let found: Vec<Sample> = parsed(text)
        .into_iter()
        .filter(|s| s.matches(name, labels))
        .collect();
    match found.as_slice() {
        [] => None,
        [one] => Some(one.value),
        many => panic!("{name}{labels:?} matches {} samples: {many:?}", many.len()),
    }
}

/// The sum of every sample named `name` whose labels include `labels`
/// (0 when none).
pub fn sum(text: &str, name: &str, labels: &[(&str, &str)]) -> f64 {
    parsed(text)
        .iter()
        .filter(|s| s.matches(name, labels))
        .map(|s| s.value)
        .sum()
}

/// Every sample named `name` whose labels include `labels`.
pub fn samples(text: &str, name: &str, labels: &[(&str, &str)]) -> Vec<Sample> {
    parsed(text)
        .into_iter()
        .filter(|s| s.matches(name, labels))
        .collect()
}

/// Polls `check` every 50 ms until it returns `Some`, or panics after
/// `timeout` naming `what`.
pub async fn wait_for<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The HTTP status of `path`, or `None` when the request failed.
pub async fn status_of(addr: SocketAddr, path: &str) -> Option<u16> {
    get(addr, path).await.ok().map(|r| r.status)
}

/// Waits until `path` answers `want`.
pub async fn wait_status(addr: SocketAddr, path: &str, want: u16, timeout: Duration) {
    wait_for(&format!("{path} to answer {want}"), timeout, || async {
        (status_of(addr, path).await == Some(want)).then_some(())
    })
    .await
}

/// Waits until a sample of the scraped page satisfies `pred`; returns the
/// page. On timeout the panic shows the last answer, to see what was there.
pub async fn wait_metric(
    addr: SocketAddr,
    what: &str,
    timeout: Duration,
    pred: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + timeout;
    loop {
        let last = match get(addr, "/metrics").await {
            Ok(page) if page.status == 200 && pred(&page.body) => return page.body,
            Ok(page) => format!("status {}:\n{}", page.status, page.body),
            Err(e) => e,
        };
        if Instant::now() >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}; last answer: {last}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What `/status` said at one moment: operations ok and failed.
#[derive(Debug, Clone, Copy)]
pub struct StatusPoint {
    pub at: Instant,
    pub ok: f64,
    pub error: f64,
}

/// One `/status` answer: the daemon's `uptime_seconds` and counts, and
/// when the request was sent and answered (seconds since the sampler
/// began).
#[derive(Debug, Clone, Copy)]
pub struct StatusAnswer {
    pub uptime: f64,
    pub sent: f64,
    pub received: f64,
    pub ok: f64,
    pub error: f64,
}

/// The answers dated on the test's clock by the daemon's own: each
/// snapshot was taken between its request's send and answer, so the
/// offset between the two clocks lies in the narrowest of those windows
/// (the fastest request's), whatever the slow ones took. A request slowed
/// by a busy machine then blurs no date.
pub fn date_answers(began: Instant, answers: &[StatusAnswer]) -> Vec<StatusPoint> {
    let lo = answers
        .iter()
        .map(|a| a.uptime - a.received)
        .fold(f64::NEG_INFINITY, f64::max);
    let hi = answers
        .iter()
        .map(|a| a.uptime - a.sent)
        .fold(f64::INFINITY, f64::min);
    let offset = if lo <= hi { (lo + hi) / 2.0 } else { lo };
    answers
        .iter()
        .map(|a| StatusPoint {
            at: began + Duration::from_secs_f64((a.uptime - offset).max(0.0)),
            ok: a.ok,
            error: a.error,
        })
        .collect()
}

/// Reads `/status` (a snapshot per request, where a `/metrics` page may
/// be 250 ms old) every 100 ms until stopped; returns the points dated by
/// [`date_answers`].
pub fn sample_status(
    http: std::net::SocketAddr,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Vec<StatusPoint>>,
) {
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let began = Instant::now();
        let mut answers = Vec::new();
        loop {
            let sent = began.elapsed().as_secs_f64();
            if let Ok(r) = get(http, "/status").await {
                let received = began.elapsed().as_secs_f64();
                let v: serde_json::Value = serde_json::from_str(&r.body)
                    .unwrap_or_else(|e| panic!("/status is JSON: {e}: {}", r.body));
                let w = &v["workloads"][0];
                let n = |x: &serde_json::Value, key: &str| {
                    x[key]
                        .as_f64()
                        .unwrap_or_else(|| panic!("no {key} in /status: {v}"))
                };
                answers.push(StatusAnswer {
                    uptime: n(&v, "uptime_seconds"),
                    sent,
                    received,
                    ok: n(w, "operations_ok"),
                    error: n(w, "operations_error"),
                });
            }
            tokio::select! {
                _ = &mut stopped => return date_answers(began, &answers),
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
        }
    });
    (stop, task)
}

/// `(seconds since `from`, ok)` of the points from `from` on.
pub fn oks_since(points: &[StatusPoint], from: Instant) -> Vec<(f64, f64)> {
    points
        .iter()
        .filter(|p| p.at >= from)
        .map(|p| ((p.at - from).as_secs_f64(), p.ok))
        .collect()
}

/// When the load was back at `rate`: the first `(seconds, ok)` sample
/// from which the next one at least 0.5 s later shows 85 % of `rate` in
/// between (infinite if none does).
pub fn back_at_rate(seen: &[(f64, f64)], rate: f64) -> f64 {
    seen.iter()
        .find(|&&(t, ok)| {
            seen.iter()
                .find(|&&(u, _)| u >= t + 0.5)
                .is_some_and(|&(u, ok2)| (ok2 - ok) / (u - t) >= 0.85 * rate)
        })
        .map(|&(t, _)| t)
        .unwrap_or(f64::INFINITY)
}

/// When a daemon's log (`stderr`, tracing's default format: each line
/// starts with its RFC 3339 time) first has a line containing `what`
/// logged at or after `after`.
pub fn log_time(
    stderr: &str,
    what: &str,
    after: std::time::SystemTime,
) -> Option<std::time::SystemTime> {
    stderr
        .lines()
        .filter(|l| l.contains(what))
        .filter_map(|l| {
            let stamp = l.split_whitespace().next()?;
            let t = chrono::DateTime::parse_from_rfc3339(stamp).ok()?;
            Some(std::time::SystemTime::from(t))
        })
        .find(|&t| t >= after)
}

/// Binomial tolerance: how far a count of an outcome with probability `p`
/// among `n` trials may be from `n·p` — 5 standard deviations, plus one
/// for rounding. A false failure is then rarer than one in a million.
pub fn binomial_tolerance(n: f64, p: f64) -> f64 {
    5.0 * (n * p * (1.0 - p)).sqrt() + 1.0
}

/// A child process killed (SIGKILL) and reaped on drop, so a failing test
/// never leaves a daemon behind.
pub struct ChildGuard(pub Option<std::process::Child>);

impl ChildGuard {
    pub fn new(child: std::process::Child) -> Self {
        ChildGuard(Some(child))
    }

    pub fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, |c| c.id())
    }

    /// Takes the child out: the caller waits for it.
    pub fn take(&mut self) -> std::process::Child {
        self.0.take().expect("the child is still owned")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Spawns `mongoload run --config FILE` at log level `rust_log` (no
/// systemd variables), stderr to a file beside the config (not the
/// journal); returns the guard and the stderr path.
pub fn spawn_run(file: &ConfigFile, rust_log: &str) -> (ChildGuard, PathBuf) {
    let stderr_path = file.dir.path().join("stderr");
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
        .args(["run", "--config"])
        .arg(&file.path)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .env_remove("MONGOLOAD_CONFIG")
        .env("RUST_LOG", rust_log)
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(&stderr_path).expect("create the stderr file"))
        .spawn()
        .expect("spawn mongoload run");
    (ChildGuard::new(child), stderr_path)
}

/// Sends SIGTERM and waits (bounded) for the exit status.
pub async fn terminate(child: &mut ChildGuard) -> std::process::ExitStatus {
    sigterm(child.id());
    wait_exit(child, Duration::from_secs(15)).await
}

/// Waits (bounded) for the child to exit on its own.
pub async fn wait_exit(child: &mut ChildGuard, timeout: Duration) -> std::process::ExitStatus {
    let c = child.0.as_mut().expect("the child is still owned");
    wait_for("the process to exit", timeout, || {
        let s = c.try_wait().expect("try_wait");
        async move { s }
    })
    .await
}

/// Sends SIGTERM to `pid` with kill(1) (no signal crate needed).
pub fn sigterm(pid: u32) {
    let st = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .expect("run kill");
    assert!(st.success(), "kill -TERM {pid} failed: {st}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_labels_escapes_and_special_values() {
        let page = "# HELP x y\n# TYPE a counter\n\
            a_total{op=\"find\",outcome=\"ok\"} 12\n\
            b{v=\"q\\\"x\\\\y\\nz\",w=\"\"} +Inf\n\
            c 1.5e3 1700000000000\n\
            d{le=\"0.1\",} NaN\n";
        let s = parse_metrics(page).unwrap();
        assert_eq!(s.len(), 4);
        assert_eq!(sample(page, "a_total", &[("op", "find")]), Some(12.0));
        assert_eq!(s[1].label("v"), Some("q\"x\\y\nz"));
        assert_eq!(s[1].label("w"), Some(""));
        assert_eq!(s[1].value, f64::INFINITY);
        assert_eq!(sample(page, "c", &[]), Some(1500.0));
        assert!(s[3].value.is_nan());
        assert_eq!(sample(page, "a_total", &[("op", "insert")]), None);
        assert!(parse_metrics("x{a=\"1} 2").is_err());
        assert!(parse_metrics("x 1 2 3").is_err());
        assert!(parse_metrics("x{a=1} 2").is_err());
    }
}

mod control;
#[allow(unused_imports)] // only the control, reload and windows tests use these
pub use control::*;

pub mod certs;
pub mod notify_socket;
pub mod prometheus_tools;
pub mod shards;

/// The stage reports of a run log, every line first validated against
/// etc/runlog.schema.json.
pub fn read_run_log(path: &std::path::Path) -> Vec<mongoload::report::StageReport> {
    let schema: serde_json::Value =
        serde_json::from_str(include_str!("../../../etc/runlog.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).unwrap();
        let errors: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{errors:?} in {line}");
    }
    mongoload::report::read(path).unwrap()
}

/// The rate at which a single server of `capacity` ops/s with exponential
/// service times, fed evenly spaced arrivals (a D/M/1 queue: mongoload's
/// uniform open loop), has a 99th percentile response time of `p99`. Its
/// response time is exponential with rate μ(1 − σ), σ the root in (0, 1)
/// of σ = exp(−μ(1 − σ)/λ); so μ(1 − σ) = ln 100 / p99 and
/// λ = −μ(1 − σ) / ln σ.
pub fn model_knee(capacity: f64, p99: Duration) -> f64 {
    let decay = 100f64.ln() / p99.as_secs_f64();
    let sigma = 1.0 - decay / capacity;
    -decay / sigma.ln()
}
