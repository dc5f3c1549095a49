//! The configuration file: its schema, loading (TOML through the `config`
//! crate plus `MONGOLOAD_` environment overrides), validation with errors
//! that name file, key and reason, and the plan description `check-config`
//! prints.
//!
//! # Shape
//!
//! ```toml
//! [target]
//! uri = "mongodb://localhost:27017"   # or uri_file = "/run/credentials/mongoload.service/uri"
//! database = "mongoload"              # default "mongoload"
//! app_name = "mongoload"              # default "mongoload"
//! pool_size = 0                       # 0 = sized to the plan (see Config::planned_connections)
//! connect_timeout = "5s"
//! server_selection_timeout = "5s"
//! operation_timeout = "10s"
//!
//! [http]
//! listen = "127.0.0.1:9480"
//!
//! [run]
//! shutdown_grace = "10s"
//! log = "/var/lib/mongoload/runs.jsonl"   # optional: a JSON line per finished stage
//!
//! [[workloads]]
//! name = "mixed"                      # required, unique: the `workload` label
//! kind = "mixed"                      # required
//! max_inflight = 256                  # open loop: bound on operations in flight
//! max_lag = "10s"                     # open loop: an op later than this is missed, not sent
//! seed = 1                            # optional: deterministic generators
//! repeat = false                      # play the stage list forever
//! [workloads.mixed]                   # parameters of the kind (all optional)
//! insert = 6.5
//! update = 3
//! delete = 3
//! find = 87.5
//! find_by_k = 0                       # find by the secondary key
//! update_by_k = 0                     # update by the secondary key
//! doc_size = "76KB"                   # or a number of bytes; KB = 1024
//! initial_docs = 10000
//! load_batch = 100
//! collection = "mixed"
//! [[workloads.stages]]
//! name = "warm"                       # optional, default "stage-N" (1-based)
//! rate = 500                          # ops/s, open loop — exactly one of rate / concurrency
//! duration = "30s"
//! warmup = "5s"                       # optional: run and exported, left out of the stage report
//! [[workloads.stages]]
//! concurrency = 16                    # closed-loop workers
//! duration = "1m"
//! [[workloads.stages]]
//! rate = { from = 100, to = 2000 }    # linear ramp over the duration
//! duration = "5m"
//! [[workloads.stages]]
//! concurrency = { steps = [3, 6, 15, 25, 50], each = "1m" }   # a sweep; no duration
//!
//! [[workloads]]                       # continuous soak: time-of-day windows instead of stages
//! name = "soak"
//! kind = "mixed"
//! timezone = "Europe/Berlin"          # IANA name; default "UTC"
//! windows = [                         # the first active window wins
//!   { when = "mon-fri 09:00-17:00", rate = 2000, name = "business" },   # name: default the `when`
//!   { when = "sat,sun 10:00-12:00", concurrency = 8 },
//! ]
//! default = { rate = 300 }            # outside every window; absent: idle
//!
//! [control]
//! socket = "/run/mongoload/control.sock"   # runtime control (mongoload ctl); absent: off
//! ```
//!
//! Environment variables `MONGOLOAD_<SECTION>__<KEY>` override the file
//! (`MONGOLOAD_TARGET__URI`, `MONGOLOAD_HTTP__LISTEN`); variables without
//! the `__` separator (`MONGOLOAD_CONFIG`, `MONGOLOAD_TEST_URI`, …) are not
//! keys and are ignored.

mod failover;
mod types;
mod uri;
mod workloads;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use chrono::{DateTime, Utc};

use crate::schedule::window::{WindowLevel, Windows};
use crate::schedule::{Mode, Schedule, Shape, Stage, WindowPlan};

pub use failover::{
    uri_w, ConcernSource, LagProbeConfig, ReadConcernSpec, WriteAck, WriteConcernSpec,
    DEFAULT_AUDIT_RATE,
};
pub use types::{ByteSize, LevelSpec};
pub use uri::{redact_uri, uri_hosts, uri_user, SecretUri, UriUser};
pub use workloads::{
    CustomConfig, CustomIndex, CustomOp, CustomOpKind, InsertBenchmarkConfig, LargeDocConfig,
    NameNumConfig, NameNumMode, SysbenchConfig, YcsbConfig, YcsbFieldType, YcsbLetter,
};

/// Where the daemon looks for its config when `--config` is not given.
pub const DEFAULT_PATH: &str = "/etc/mongoload/mongoload.toml";

/// The environment variable naming the config file.
pub const CONFIG_ENV: &str = "MONGOLOAD_CONFIG";

/// Prefix of environment overrides.
const ENV_PREFIX: &str = "MONGOLOAD_";

/// How far ahead `check-config` prints the timeline.
pub const TIMELINE_HORIZON: Duration = Duration::from_secs(24 * 3600);

/// At most this many timeline rows are printed (a repeating schedule of
/// short stages would otherwise print thousands).
const TIMELINE_MAX_ROWS: usize = 60;

/// Smallest `doc_size` accepted: room for `_id`, `k` and a little padding.
const MIN_DOC_SIZE: u64 = 64;

/// Largest `doc_size` accepted: MongoDB's 16 MiB document limit.
const MAX_DOC_SIZE: u64 = 16 << 20;

/// A config that cannot be used: names the file, the key and the reason.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read: {reason}", path.display())]
    Read { path: PathBuf, reason: String },
    /// The file is not valid TOML.
    #[error("{}: {reason}", path.display())]
    Syntax { path: PathBuf, reason: String },
    /// A key has a bad value, is unknown or is missing. `key` is a dotted
    /// path such as `workloads[0].stages[1].rate`.
    #[error("{}: {key}: {reason}", path.display())]
    Invalid {
        path: PathBuf,
        key: String,
        reason: String,
    },
    /// `uri_file` could not be read when resolving the connection string.
    #[error("{}: cannot read uri_file: {reason}", path.display())]
    UriFile { path: PathBuf, reason: String },
}

impl ConfigError {
    /// The dotted key at fault, when the error is about one key.
    pub fn key(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { key, .. } => Some(key),
            _ => None,
        }
    }
}

/// A key and reason before the file name is known.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyError {
    /// Dotted path of the key.
    pub key: String,
    /// What is wrong with it.
    pub reason: String,
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.reason)
    }
}

impl std::error::Error for KeyError {}

impl KeyError {
    fn new(key: impl Into<String>, reason: impl Into<String>) -> KeyError {
        KeyError {
            key: key.into(),
            reason: reason.into(),
        }
    }

    fn in_file(self, path: &Path) -> ConfigError {
        ConfigError::Invalid {
            path: path.to_path_buf(),
            key: self.key,
            reason: self.reason,
        }
    }
}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The MongoDB deployment under load.
    #[serde(default)]
    pub target: TargetConfig,
    /// The metrics and health endpoint.
    #[serde(default)]
    pub http: HttpConfig,
    /// Process lifecycle.
    #[serde(default)]
    pub run: RunConfig,
    /// The runtime control endpoint.
    #[serde(default)]
    pub control: ControlConfig,
    /// Several load hosts as one load (absent: this daemon alone).
    #[serde(default)]
    pub cluster: crate::cluster::ClusterConfig,
    /// The workloads, each with its own schedule; at least one.
    #[serde(default)]
    pub workloads: Vec<WorkloadConfig>,
    /// The replication-lag probe; absent: off.
    #[serde(default)]
    pub lag_probe: Option<LagProbeConfig>,
}

/// `[target]`: where and how to connect.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TargetConfig {
    /// The connection string; exactly one of `uri` and `uri_file`.
    pub uri: Option<SecretUri>,
    /// A file holding the connection string (systemd `LoadCredential=`).
    pub uri_file: Option<PathBuf>,
    /// The database the workloads create their collections in.
    pub database: String,
    /// The driver's `appName` (shows in the server's logs and `currentOp`).
    pub app_name: String,
    /// The driver's max pool size; 0 sizes it to the plan.
    pub pool_size: u32,
    /// Connect timeout of the driver.
    #[serde(with = "humantime_serde")]
    pub connect_timeout: Duration,
    /// Server selection timeout of the driver.
    #[serde(with = "humantime_serde")]
    pub server_selection_timeout: Duration,
    /// Per-operation timeout applied by the target layer.
    #[serde(with = "humantime_serde")]
    pub operation_timeout: Duration,
    /// The write concern of every workload's writes (unless it sets its
    /// own); absent: the connection string's, else the deployment's.
    pub write_concern: Option<WriteConcernSpec>,
    /// The read concern of every workload's reads (unless it sets its own).
    pub read_concern: Option<ReadConcernSpec>,
    /// Command monitoring: every write attempt's outcome (retried writes,
    /// write outages hidden by retries), at the cost of the driver copying
    /// each command and reply (BENCHMARKS.md).
    pub command_events: bool,
}

impl Default for TargetConfig {
    fn default() -> Self {
        TargetConfig {
            uri: None,
            uri_file: None,
            database: "mongoload".into(),
            app_name: "mongoload".into(),
            pool_size: 0,
            connect_timeout: Duration::from_secs(5),
            server_selection_timeout: Duration::from_secs(5),
            operation_timeout: Duration::from_secs(10),
            write_concern: None,
            read_concern: None,
            command_events: true,
        }
    }
}

impl TargetConfig {
    /// The connection string: `uri`, or the trimmed contents of `uri_file`.
    pub fn resolve_uri(&self) -> Result<SecretUri, ConfigError> {
        if let Some(uri) = &self.uri {
            return Ok(uri.clone());
        }
        let Some(path) = &self.uri_file else {
            return Err(ConfigError::UriFile {
                path: PathBuf::from("target.uri_file"),
                reason: "neither target.uri nor target.uri_file is set".into(),
            });
        };
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::UriFile {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let uri = text.trim();
        check_uri_scheme(uri).map_err(|reason| ConfigError::UriFile {
            path: path.clone(),
            reason,
        })?;
        Ok(SecretUri::new(uri))
    }

    /// What `describe` and the start-up log line show for the target.
    fn describe_uri(&self) -> String {
        match (&self.uri, &self.uri_file) {
            (Some(u), _) => u.redacted(),
            (None, Some(p)) => format!("(from uri_file {})", p.display()),
            (None, None) => "(none)".into(),
        }
    }
}

fn check_uri_scheme(uri: &str) -> Result<(), String> {
    if uri.starts_with("mongodb://") || uri.starts_with("mongodb+srv://") {
        Ok(())
    } else {
        Err(format!(
            "must start with mongodb:// or mongodb+srv://, got {:?}",
            redact_uri(uri)
        ))
    }
}

/// `[http]`: the metrics and health endpoint.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Address `/metrics`, `/healthz`, `/readyz` and `/status` listen on.
    pub listen: SocketAddr,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 9480)),
        }
    }
}

/// `[run]`: process lifecycle.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RunConfig {
    /// How long in-flight operations may finish after SIGTERM.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
    /// The run log: one JSON line per finished stage is appended here
    /// (schema: etc/runlog.schema.json). None: reports go to the journal only.
    pub log: Option<PathBuf>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            shutdown_grace: Duration::from_secs(10),
            log: None,
        }
    }
}

/// `[control]`: the runtime control endpoint (`mongoload ctl`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ControlConfig {
    /// A unix socket (created mode 0600, removed at exit) serving pause,
    /// resume, set-rate, set-concurrency, scale and reset; absent: no
    /// control endpoint.
    pub socket: Option<PathBuf>,
}

/// The built-in workload kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// Weighted insert / update / delete / find by `_id`.
    Mixed,
    /// The insert benchmark (iibench): batched inserts, three secondary indexes.
    InsertBenchmark,
    /// sysbench's OLTP transaction over `sbtest1..N`.
    Sysbench,
    /// `{Name, Num}` documents, index on `Num`.
    NameNum,
    /// 10 KB documents, inserts and `_id` finds side by side.
    LargeDoc,
    /// YCSB core workloads A–F.
    Ycsb,
    /// Operations declared in the config.
    Custom,
}

impl<'de> Deserialize<'de> for WorkloadKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<WorkloadKind, D::Error> {
        let s = String::deserialize(d)?;
        WorkloadKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = WorkloadKind::ALL.iter().map(|k| k.as_str()).collect();
                serde::de::Error::custom(format!(
                    "unknown workload kind {s:?}; known kinds: {}",
                    known.join(", ")
                ))
            })
    }
}

impl WorkloadKind {
    /// Every kind, for messages and docs.
    pub const ALL: [WorkloadKind; 7] = [
        WorkloadKind::Mixed,
        WorkloadKind::InsertBenchmark,
        WorkloadKind::Sysbench,
        WorkloadKind::NameNum,
        WorkloadKind::LargeDoc,
        WorkloadKind::Ycsb,
        WorkloadKind::Custom,
    ];

    /// The name as written in the config.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadKind::Mixed => "mixed",
            WorkloadKind::InsertBenchmark => "insert-benchmark",
            WorkloadKind::Sysbench => "sysbench",
            WorkloadKind::NameNum => "name-num",
            WorkloadKind::LargeDoc => "large-doc",
            WorkloadKind::Ycsb => "ycsb",
            WorkloadKind::Custom => "custom",
        }
    }

    /// The key of this kind's parameter table under `[[workloads]]`.
    pub fn table(self) -> &'static str {
        match self {
            WorkloadKind::Mixed => "mixed",
            WorkloadKind::InsertBenchmark => "insert_benchmark",
            WorkloadKind::Sysbench => "sysbench",
            WorkloadKind::NameNum => "name_num",
            WorkloadKind::LargeDoc => "large_doc",
            WorkloadKind::Ycsb => "ycsb",
            WorkloadKind::Custom => "custom",
        }
    }
}

/// `[[workloads]]`: one workload and its schedule.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadConfig {
    /// Unique name, the `workload` metric label.
    pub name: String,
    /// Which built-in workload.
    pub kind: WorkloadKind,
    /// Open loop: at most this many operations in flight.
    #[serde(default = "default_max_inflight")]
    pub max_inflight: u32,
    /// Open loop: an operation whose intended start is further behind than
    /// this is counted missed instead of sent.
    #[serde(default = "default_max_lag", with = "humantime_serde")]
    pub max_lag: Duration,
    /// Seed of the generators; random when absent.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Repeat the stage list forever.
    #[serde(default)]
    pub repeat: bool,
    /// Parameters of kind `mixed`.
    #[serde(default)]
    pub mixed: Option<MixedConfig>,
    /// Parameters of kind `insert-benchmark`.
    #[serde(default)]
    pub insert_benchmark: Option<InsertBenchmarkConfig>,
    /// Parameters of kind `sysbench`.
    #[serde(default)]
    pub sysbench: Option<SysbenchConfig>,
    /// Parameters of kind `name-num`.
    #[serde(default)]
    pub name_num: Option<NameNumConfig>,
    /// Parameters of kind `large-doc`.
    #[serde(default)]
    pub large_doc: Option<LargeDocConfig>,
    /// Parameters of kind `ycsb`.
    #[serde(default)]
    pub ycsb: Option<YcsbConfig>,
    /// Parameters of kind `custom`.
    #[serde(default)]
    pub custom: Option<CustomConfig>,
    /// The stages, in order.
    #[serde(default)]
    pub stages: Vec<StageConfig>,
    /// Time-of-day windows with a level each (instead of `stages`); the
    /// first active window wins. Repeats forever.
    #[serde(default)]
    pub windows: Vec<WindowConfig>,
    /// With `windows`: the level outside every window; absent, the
    /// workload idles there.
    #[serde(default)]
    pub default: Option<WindowConfig>,
    /// With `windows`: the IANA time zone they are in (default UTC).
    #[serde(default)]
    pub timezone: Option<String>,
    /// This workload's write concern, instead of `target.write_concern`.
    #[serde(default)]
    pub write_concern: Option<WriteConcernSpec>,
    /// This workload's read concern, instead of `target.read_concern`.
    #[serde(default)]
    pub read_concern: Option<ReadConcernSpec>,
    /// Keep a ledger of the acknowledged inserts and check them against
    /// the server (the acknowledged-write audit).
    #[serde(default)]
    pub audit: bool,
    /// Ledger ids checked per second in the background (0: only after a
    /// failover, at stage ends and on `ctl audit`).
    #[serde(default = "default_audit_rate")]
    pub audit_rate: f64,
}

/// One entry of `windows = [...]`, or `default = {...}`: when (windows
/// only), a level (exactly one of `rate` and `concurrency`, holds) and an
/// optional name (the `stage` label; default the `when` text, or
/// "default").
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowConfig {
    /// `"mon-fri 09:00-17:00"`, `"daily 22:00-06:00"`, `"09:00-17:00"`.
    #[serde(default)]
    pub when: Option<String>,
    /// The `stage` label while the window is active.
    #[serde(default)]
    pub name: Option<String>,
    /// Open loop: operations per second.
    #[serde(default)]
    pub rate: Option<f64>,
    /// Closed loop: workers.
    #[serde(default)]
    pub concurrency: Option<f64>,
}

impl WindowConfig {
    /// The level; `at` is the key prefix for errors (`windows[0]`).
    fn level(&self, at: &str, default_name: &str) -> Result<WindowLevel, KeyError> {
        let (mode, level) = match (self.rate, self.concurrency) {
            (Some(r), None) => (Mode::Rate, r),
            (None, Some(c)) => (Mode::Concurrency, c),
            (Some(_), Some(_)) => {
                return Err(KeyError::new(
                    at,
                    "give either rate (open loop) or concurrency (closed loop), not both",
                ))
            }
            (None, None) => {
                return Err(KeyError::new(
                    at,
                    "needs rate (open loop) or concurrency (closed loop)",
                ))
            }
        };
        let name = match &self.name {
            Some(n) if n.trim().is_empty() => {
                return Err(KeyError::new(format!("{at}.name"), "must not be empty"))
            }
            Some(n) => n.clone(),
            None => default_name.to_string(),
        };
        Ok(WindowLevel { name, mode, level })
    }

    fn level_key(&self, at: &str) -> String {
        if self.rate.is_some() {
            format!("{at}.rate")
        } else {
            format!("{at}.concurrency")
        }
    }
}

fn default_max_inflight() -> u32 {
    256
}

fn default_max_lag() -> Duration {
    Duration::from_secs(10)
}

fn default_audit_rate() -> f64 {
    DEFAULT_AUDIT_RATE
}

impl WorkloadConfig {
    /// The parameters of kind `mixed` (defaults when the table is absent).
    pub fn mixed_params(&self) -> MixedConfig {
        self.mixed.clone().unwrap_or_default()
    }

    /// The parameters of kind `insert-benchmark` (defaults when absent).
    pub fn insert_benchmark_params(&self) -> InsertBenchmarkConfig {
        self.insert_benchmark.clone().unwrap_or_default()
    }

    /// The parameters of kind `sysbench` (defaults when absent).
    pub fn sysbench_params(&self) -> SysbenchConfig {
        self.sysbench.clone().unwrap_or_default()
    }

    /// The parameters of kind `name-num` (defaults when absent).
    pub fn name_num_params(&self) -> NameNumConfig {
        self.name_num.clone().unwrap_or_default()
    }

    /// The parameters of kind `large-doc` (defaults when absent).
    pub fn large_doc_params(&self) -> LargeDocConfig {
        self.large_doc.clone().unwrap_or_default()
    }

    /// The parameters of kind `ycsb` (defaults when absent).
    pub fn ycsb_params(&self) -> YcsbConfig {
        self.ycsb.clone().unwrap_or_default()
    }

    /// The parameters of kind `custom` (defaults when absent).
    pub fn custom_params(&self) -> CustomConfig {
        self.custom.clone().unwrap_or_default()
    }

    /// The parameter tables present, by table key: a table of another kind
    /// than `kind` is a mistake worth reporting.
    fn tables_present(&self) -> [(&'static str, bool); 7] {
        [
            ("mixed", self.mixed.is_some()),
            ("insert_benchmark", self.insert_benchmark.is_some()),
            ("sysbench", self.sysbench.is_some()),
            ("name_num", self.name_num.is_some()),
            ("large_doc", self.large_doc.is_some()),
            ("ycsb", self.ycsb.is_some()),
            ("custom", self.custom.is_some()),
        ]
    }

    /// Builds the schedule. Errors carry the key relative to this workload
    /// (`stages[1].rate`).
    pub fn schedule(&self) -> Result<Schedule, KeyError> {
        if !self.windows.is_empty() {
            return self.window_schedule();
        }
        for (key, set) in [
            ("default", self.default.is_some()),
            ("timezone", self.timezone.is_some()),
        ] {
            if set {
                return Err(KeyError::new(key, "only used with windows"));
            }
        }
        if self.stages.is_empty() {
            return Err(KeyError::new("stages", "at least one stage is required"));
        }
        let stages = self
            .stages
            .iter()
            .enumerate()
            .map(|(i, s)| s.build(i))
            .collect::<Result<Vec<_>, _>>()?;
        Schedule::new(stages, self.repeat).map_err(|e| KeyError::new("stages", e.to_string()))
    }

    /// The time-of-day schedule of `windows`, `default` and `timezone`.
    fn window_schedule(&self) -> Result<Schedule, KeyError> {
        if !self.stages.is_empty() {
            return Err(KeyError::new(
                "windows",
                "give either stages or windows, not both",
            ));
        }
        if self.repeat {
            return Err(KeyError::new(
                "repeat",
                "not used with windows: they repeat forever",
            ));
        }
        let tz = Windows::parse_tz(self.timezone.as_deref().unwrap_or("UTC"))
            .map_err(|r| KeyError::new("timezone", r))?;
        let mut windows = Vec::with_capacity(self.windows.len());
        for (i, w) in self.windows.iter().enumerate() {
            let at = format!("windows[{i}]");
            let Some(when) = &w.when else {
                return Err(KeyError::new(format!("{at}.when"), "is required"));
            };
            let window = when
                .parse()
                .map_err(|r: String| KeyError::new(format!("{at}.when"), r))?;
            windows.push((window, w.level(&at, when.trim())?));
        }
        let default = match &self.default {
            Some(d) if d.when.is_some() => {
                return Err(KeyError::new(
                    "default.when",
                    "the default applies outside every window; it has no when",
                ))
            }
            Some(d) => Some(d.level("default", "default")?),
            None => None,
        };
        let plan = WindowPlan::new(tz, windows, default).map_err(|(i, e)| {
            let key = match i {
                Some(i) => self.windows[i].level_key(&format!("windows[{i}]")),
                None => self
                    .default
                    .as_ref()
                    .map_or("default".into(), |d| d.level_key("default")),
            };
            KeyError::new(key, e.to_string())
        })?;
        Ok(Schedule::from_windows(plan))
    }

    /// The most workers or in-flight operations this workload's plan can
    /// use at once: `max_inflight` if any stage is open loop, and the largest
    /// concurrency level of its closed-loop stages.
    pub fn peak_concurrency(&self) -> u32 {
        let mut peak = 0u32;
        for s in &self.stages {
            match (&s.rate, &s.concurrency) {
                (Some(_), _) => peak = peak.max(self.max_inflight),
                (None, Some(c)) => {
                    let top = match c {
                        LevelSpec::Hold(v) => *v,
                        LevelSpec::Ramp { from, to } => from.max(*to),
                        LevelSpec::Steps { steps, .. } => steps.iter().copied().fold(0.0, f64::max),
                    };
                    peak = peak.max(top.clamp(0.0, u32::MAX as f64) as u32);
                }
                (None, None) => {}
            }
        }
        for w in self.windows.iter().chain(&self.default) {
            match (w.rate, w.concurrency) {
                (Some(_), _) => peak = peak.max(self.max_inflight),
                (None, Some(c)) => peak = peak.max(c.clamp(0.0, u32::MAX as f64) as u32),
                (None, None) => {}
            }
        }
        peak
    }

    fn validate(&self) -> Result<(), KeyError> {
        if self.name.trim().is_empty() {
            return Err(KeyError::new("name", "must not be empty"));
        }
        if self.max_inflight == 0 {
            return Err(KeyError::new("max_inflight", "must be at least 1, got 0"));
        }
        if self.max_lag.is_zero() {
            return Err(KeyError::new("max_lag", "must be greater than zero"));
        }
        crate::limits::check_workers(self)?;
        if let Some((table, _)) = self
            .tables_present()
            .into_iter()
            .find(|(t, present)| *present && *t != self.kind.table())
        {
            return Err(KeyError::new(
                table,
                format!(
                    "parameters of another kind than this workload's {:?}; its table is [workloads.{}]",
                    self.kind.as_str(),
                    self.kind.table()
                ),
            ));
        }
        let checked = match self.kind {
            WorkloadKind::Mixed => self.mixed_params().validate(),
            WorkloadKind::InsertBenchmark => self.insert_benchmark_params().validate(),
            WorkloadKind::Sysbench => self.sysbench_params().validate(),
            WorkloadKind::NameNum => self.name_num_params().validate(),
            WorkloadKind::LargeDoc => self.large_doc_params().validate(),
            WorkloadKind::Ycsb => self.ycsb_params().validate(),
            WorkloadKind::Custom => self.custom_params().validate(),
        };
        checked.map_err(|e| KeyError {
            key: format!("{}.{}", self.kind.table(), e.key),
            reason: e.reason,
        })?;
        self.schedule().map(|_| ())
    }
}

/// `[workloads.mixed]`: parameters of kind `mixed`. Weights are relative
/// (they need not sum to 100).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct MixedConfig {
    /// Weight of inserts of a new document.
    pub insert: f64,
    /// Weight of updates of one document by `_id`.
    pub update: f64,
    /// Weight of deletes of one document by `_id`.
    pub delete: f64,
    /// Weight of finds of one document by `_id`.
    pub find: f64,
    /// Weight of finds by the secondary key `k`.
    pub find_by_k: f64,
    /// Weight of updates of one document by the secondary key `k`.
    pub update_by_k: f64,
    /// Target BSON size of each document.
    pub doc_size: ByteSize,
    /// Documents loaded by the prepare step (`_id` 0..initial_docs).
    pub initial_docs: u64,
    /// Documents per insert call during the prepare step.
    pub load_batch: usize,
    /// The collection's name.
    pub collection: String,
}

impl Default for MixedConfig {
    fn default() -> Self {
        MixedConfig {
            insert: 6.5,
            update: 3.0,
            delete: 3.0,
            find: 87.5,
            find_by_k: 0.0,
            update_by_k: 0.0,
            doc_size: ByteSize(76 * 1024),
            initial_docs: 10_000,
            load_batch: 100,
            collection: "mixed".into(),
        }
    }
}

impl MixedConfig {
    /// The weights in the order of the mixed workload's op names.
    pub fn weights(&self) -> [(&'static str, f64); 6] {
        [
            ("insert", self.insert),
            ("update", self.update),
            ("delete", self.delete),
            ("find", self.find),
            ("find_by_k", self.find_by_k),
            ("update_by_k", self.update_by_k),
        ]
    }

    fn validate(&self) -> Result<(), KeyError> {
        let mut sum = 0.0;
        for (k, w) in self.weights() {
            if !(w.is_finite() && w >= 0.0) {
                return Err(KeyError::new(
                    k,
                    format!("weight must be a number ≥ 0, got {w}"),
                ));
            }
            sum += w;
        }
        if sum <= 0.0 {
            return Err(KeyError::new(
                "insert",
                "the weights insert, update, delete, find, find_by_k, update_by_k sum to zero; \
                 give at least one a positive weight",
            ));
        }
        let size = self.doc_size.bytes();
        if !(MIN_DOC_SIZE..=MAX_DOC_SIZE).contains(&size) {
            return Err(KeyError::new(
                "doc_size",
                format!("must be between {MIN_DOC_SIZE} bytes and 16MiB, got {size} bytes"),
            ));
        }
        if self.load_batch == 0 {
            return Err(KeyError::new("load_batch", "must be at least 1, got 0"));
        }
        if self.collection.is_empty() || self.collection.contains(['$', '\0']) {
            return Err(KeyError::new(
                "collection",
                format!("not a valid collection name: {:?}", self.collection),
            ));
        }
        Ok(())
    }
}

/// `[[workloads.stages]]`: one stage. Exactly one of `rate` and
/// `concurrency`; `duration` for holds and ramps, none for steps (a steps
/// stage lasts `steps × each`); or, for a hold, `operations` (the stage
/// ends after that many operations, `per_worker` each in closed loop;
/// `duration` is then an optional cap).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StageConfig {
    /// The `stage` label; default `stage-N` (1-based).
    #[serde(default)]
    pub name: Option<String>,
    /// Open loop: operations per second.
    #[serde(default)]
    pub rate: Option<LevelSpec>,
    /// Closed loop: workers.
    #[serde(default)]
    pub concurrency: Option<LevelSpec>,
    /// How long the stage lasts (not with `steps`).
    #[serde(default, with = "humantime_serde")]
    pub duration: Option<Duration>,
    /// The start of the stage that runs and is exported live but is left
    /// out of the stage's report; shorter than the stage.
    #[serde(default, with = "humantime_serde")]
    pub warmup: Option<Duration>,
    /// Count-based: the stage ends after this many operations.
    #[serde(default)]
    pub operations: Option<u64>,
    /// With `operations`: that many per worker (closed loop) instead of in all.
    #[serde(default)]
    pub per_worker: bool,
}

impl StageConfig {
    /// The stage's name: the configured one or `stage-N`.
    pub fn display_name(&self, index: usize) -> String {
        self.name
            .clone()
            .unwrap_or_else(|| format!("stage-{}", index + 1))
    }

    fn build(&self, index: usize) -> Result<Stage, KeyError> {
        let at = |k: &str| format!("stages[{index}].{k}");
        let (mode, field, spec) = match (&self.rate, &self.concurrency) {
            (Some(r), None) => (Mode::Rate, "rate", r),
            (None, Some(c)) => (Mode::Concurrency, "concurrency", c),
            (Some(_), Some(_)) => {
                return Err(KeyError::new(
                    format!("stages[{index}]"),
                    "give either rate (open loop) or concurrency (closed loop), not both",
                ))
            }
            (None, None) => {
                return Err(KeyError::new(
                    format!("stages[{index}]"),
                    "needs rate (open loop) or concurrency (closed loop)",
                ))
            }
        };
        if let Some(n) = &self.name {
            if n.trim().is_empty() {
                return Err(KeyError::new(at("name"), "must not be empty"));
            }
        }
        let (shape, duration) = match spec {
            LevelSpec::Hold(v) => (Shape::Hold(*v), self.duration),
            LevelSpec::Ramp { from, to } => (
                Shape::Ramp {
                    from: *from,
                    to: *to,
                },
                self.duration,
            ),
            LevelSpec::Steps { steps, each } => {
                if self.duration.is_some() {
                    return Err(KeyError::new(
                        at("duration"),
                        "not used with steps: the stage lasts steps × each",
                    ));
                }
                (
                    Shape::Steps {
                        levels: steps.clone(),
                        each: *each,
                    },
                    Some(each.saturating_mul(steps.len() as u32)),
                )
            }
        };
        if self.per_worker && self.operations.is_none() {
            return Err(KeyError::new(
                at("per_worker"),
                "needs operations (how many per worker)",
            ));
        }
        let duration = match (duration, self.operations) {
            (Some(d), _) => d,
            // A count-based stage runs until its count, at most this long.
            (None, Some(_)) => crate::schedule::COUNT_STAGE_CAP,
            (None, None) => {
                return Err(KeyError::new(
                    at("duration"),
                    "is required (or operations, for a count-based stage)",
                ))
            }
        };
        let stage = Stage::new(self.display_name(index), mode, shape, duration).map_err(|e| {
            use crate::schedule::StageError as E;
            let key = match e {
                E::ZeroDuration => match spec {
                    LevelSpec::Steps { .. } => at(&format!("{field}.each")),
                    _ => at("duration"),
                },
                E::NoSteps => at(&format!("{field}.steps")),
                _ => at(field),
            };
            KeyError::new(key, e.to_string())
        })?;
        let stage = match self.warmup {
            Some(w) => stage
                .with_warmup(w)
                .map_err(|e| KeyError::new(at("warmup"), e.to_string()))?,
            None => stage,
        };
        match self.operations {
            Some(n) => {
                let limit = if self.per_worker {
                    crate::schedule::Limit::PerWorker(n)
                } else {
                    crate::schedule::Limit::Total(n)
                };
                stage
                    .with_limit(limit)
                    .map_err(|e| KeyError::new(at("operations"), e.to_string()))
            }
            None => Ok(stage),
        }
    }
}

/// The config file's path: `$MONGOLOAD_CONFIG`, else [`DEFAULT_PATH`].
pub fn default_path() -> PathBuf {
    std::env::var_os(CONFIG_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_PATH))
}

/// Loads, overrides from the process environment, and validates a config.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    // vars() would panic on a non-Unicode variable; such ones are not keys.
    let env = std::env::vars_os()
        .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
    load_with_env(path, env)
}

/// As [`load`], with the environment given explicitly (tests pass their own
/// instead of mutating the process's).
pub fn load_with_env(
    path: &Path,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    parse_with_env(&text, path, env)
}

/// Parses config text (`path` only names it in errors), applies the
/// overrides in `env` and validates.
pub fn parse_with_env(
    text: &str,
    path: &Path,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Config, ConfigError> {
    // Only MONGOLOAD_<SECTION>__<KEY> are keys: MONGOLOAD_CONFIG,
    // MONGOLOAD_TEST_URI and friends must not reach deny_unknown_fields.
    let mut hostname = None;
    let overrides: HashMap<String, String> = env
        .into_iter()
        .filter(|(k, v)| {
            if k == "HOSTNAME" {
                hostname = Some(v.clone());
            }
            k.get(..ENV_PREFIX.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(ENV_PREFIX))
                && k[ENV_PREFIX.len()..].contains("__")
        })
        .collect();
    let built = config::Config::builder()
        .add_source(config::File::from_str(text, config::FileFormat::Toml))
        .add_source(
            config::Environment::with_prefix("MONGOLOAD")
                .prefix_separator("_")
                .separator("__")
                .try_parsing(true)
                .source(Some(overrides.clone().into_iter().collect())),
        )
        .build()
        .map_err(|e| ConfigError::Syntax {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    // Name the variable when an override is the culprit, or the user
    // searches the file for a value that is not there.
    let env_hint = |key: &str| -> String {
        let var = format!("{ENV_PREFIX}{}", key.replace('.', "__")).to_ascii_uppercase();
        if overrides.keys().any(|k| k.eq_ignore_ascii_case(&var)) {
            format!(" (set by {var})")
        } else {
            String::new()
        }
    };
    let cfg: Config = serde_path_to_error::deserialize(built).map_err(|e| {
        let mut key = e.path().to_string();
        let reason = match e.inner() {
            // A missing required field: the path stops at its parent.
            config::ConfigError::NotFound(k) => {
                let field = k.rsplit(['.', ']']).next().unwrap_or(k);
                key = if key == "." {
                    field.to_string()
                } else {
                    format!("{key}.{field}")
                };
                "is required".to_string()
            }
            other => describe_de_error(other),
        };
        if key == "." {
            key = "(top level)".into();
        }
        let reason = format!("{reason}{}", env_hint(&key));
        ConfigError::Invalid {
            path: path.to_path_buf(),
            key,
            reason,
        }
    })?;
    let mut cfg = cfg;
    cfg.validate()
        .and_then(|()| {
            let host = crate::cluster::hostname(hostname);
            cfg.cluster
                .resolve(host.as_deref())
                .map_err(|e| KeyError::new(e.key, e.reason))
        })
        .map_err(|mut e| {
            e.reason.push_str(&env_hint(&e.key));
            e.in_file(path)
        })?;
    Ok(cfg)
}

/// A deserialisation error's reason without the config crate's own key and
/// origin decorations (we print the key ourselves).
fn describe_de_error(e: &config::ConfigError) -> String {
    match e {
        config::ConfigError::Type {
            unexpected,
            expected,
            ..
        } => format!("expected {expected}, got {unexpected}"),
        config::ConfigError::Message(m) if m.ends_with("expected a duration") => {
            format!("{m} such as \"500ms\", \"30s\" or \"1h 30m\"")
        }
        config::ConfigError::Message(m) => m.clone(),
        // The crate wraps errors with its own (unpunctuated) key; we print ours.
        config::ConfigError::At { error, .. } => describe_de_error(error),
        other => other.to_string(),
    }
}

impl Config {
    /// Checks what the types alone cannot: one of uri / uri_file, weights,
    /// stages, unique names. Errors carry the full dotted key.
    pub fn validate(&self) -> Result<(), KeyError> {
        match (&self.target.uri, &self.target.uri_file) {
            (None, None) => {
                return Err(KeyError::new(
                    "target.uri",
                    "missing: set target.uri or target.uri_file",
                ))
            }
            (Some(_), Some(_)) => {
                return Err(KeyError::new(
                    "target.uri_file",
                    "give either target.uri or target.uri_file, not both",
                ))
            }
            (Some(u), None) => {
                check_uri_scheme(u.expose()).map_err(|r| KeyError::new("target.uri", r))?
            }
            (None, Some(p)) if p.as_os_str().is_empty() => {
                return Err(KeyError::new("target.uri_file", "must not be empty"))
            }
            (None, Some(_)) => {}
        }
        if let Some(log) = &self.run.log {
            if log.as_os_str().is_empty() || log.to_string_lossy().ends_with('/') {
                return Err(KeyError::new(
                    "run.log",
                    format!("must be a file path, got {:?}", log.display().to_string()),
                ));
            }
        }
        if self.target.database.is_empty()
            || self
                .target
                .database
                .contains(['/', '\\', '.', ' ', '"', '$', '\0'])
        {
            return Err(KeyError::new(
                "target.database",
                format!("not a valid database name: {:?}", self.target.database),
            ));
        }
        self.target.validate_concerns()?;
        if let Some(p) = &self.lag_probe {
            p.validate()?;
        }
        for (key, d) in [
            ("target.connect_timeout", self.target.connect_timeout),
            (
                "target.server_selection_timeout",
                self.target.server_selection_timeout,
            ),
            ("target.operation_timeout", self.target.operation_timeout),
        ] {
            if d.is_zero() {
                return Err(KeyError::new(key, "must be greater than zero"));
            }
        }
        if self.workloads.is_empty() {
            return Err(KeyError::new(
                "workloads",
                "at least one [[workloads]] is required",
            ));
        }
        let mut seen: HashMap<&str, usize> = HashMap::new();
        for (i, w) in self.workloads.iter().enumerate() {
            let uri = self.target.uri.as_ref().map(SecretUri::expose);
            w.validate()
                .and_then(|()| w.validate_failover(&self.target, uri))
                .map_err(|e| KeyError {
                    key: format!("workloads[{i}].{}", e.key),
                    reason: e.reason,
                })?;
            if let Some(first) = seen.insert(w.name.as_str(), i) {
                return Err(KeyError::new(
                    format!("workloads[{i}].name"),
                    format!(
                        "duplicate workload name {:?} (also workloads[{first}])",
                        w.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// The connections the plan can use at once: the sum over workloads of
    /// their peak concurrency. The driver's pool is sized to this when
    /// `target.pool_size` is 0.
    pub fn planned_connections(&self) -> u32 {
        self.workloads
            .iter()
            .map(WorkloadConfig::peak_concurrency)
            .fold(0u32, u32::saturating_add)
    }

    /// The pool size to give the driver: `target.pool_size`, or the planned
    /// connections when that is 0 (at least 1).
    pub fn effective_pool_size(&self) -> u32 {
        if self.target.pool_size > 0 {
            self.target.pool_size
        } else {
            self.planned_connections().max(1)
        }
    }

    /// The resolved plan, as `check-config` prints it: target (redacted),
    /// http, each workload with kind, parameters and stages, and the
    /// timeline of the next 24 hours.
    pub fn describe(&self) -> String {
        self.describe_at(Utc::now())
    }

    /// As [`Config::describe`], with the timeline starting at `now` (stage
    /// lists start when the daemon does; windows follow the clock).
    pub fn describe_at(&self, now: DateTime<Utc>) -> String {
        let mut out = String::new();
        let t = &self.target;
        let hosts = t
            .uri
            .as_ref()
            .map(|u| uri_hosts(u.expose()))
            .unwrap_or_default();
        let _ = writeln!(out, "target:");
        let _ = writeln!(out, "  uri: {}", t.describe_uri());
        if !hosts.is_empty() {
            let _ = writeln!(out, "  hosts: {}", hosts.join(", "));
        }
        let _ = writeln!(out, "  database: {}", t.database);
        let _ = writeln!(out, "  app_name: {}", t.app_name);
        let pool = if t.pool_size == 0 {
            format!("{} (sized to the plan)", self.effective_pool_size())
        } else {
            t.pool_size.to_string()
        };
        let _ = writeln!(out, "  pool_size: {pool}");
        let _ = writeln!(
            out,
            "  timeouts: connect {}, server selection {}, operation {}",
            humantime::format_duration(t.connect_timeout),
            humantime::format_duration(t.server_selection_timeout),
            humantime::format_duration(t.operation_timeout)
        );
        out.push_str(&t.describe_concerns(t.uri.as_ref().map(SecretUri::expose)));
        let _ = writeln!(out, "http:\n  listen: {}", self.http.listen);
        let _ = writeln!(
            out,
            "run:\n  shutdown_grace: {}",
            humantime::format_duration(self.run.shutdown_grace)
        );
        if let Some(log) = &self.run.log {
            let _ = writeln!(out, "  log: {}", log.display());
        }
        let _ = writeln!(
            out,
            "control:\n  socket: {}",
            self.control
                .socket
                .as_ref()
                .map_or("(off)".into(), |p| p.display().to_string())
        );
        out.push_str(&self.cluster.describe());
        if let Some(p) = &self.lag_probe {
            let _ = writeln!(
                out,
                "lag_probe:\n  interval: {}, collection: {}, secondaries read every {}",
                humantime::format_duration(p.interval),
                p.collection,
                humantime::format_duration(p.poll())
            );
        }
        for w in &self.workloads {
            let _ = writeln!(out, "workload {:?}:", w.name);
            let _ = writeln!(out, "  kind: {}", w.kind.as_str());
            let _ = writeln!(
                out,
                "  max_inflight: {}, max_lag: {}, seed: {}, repeat: {}",
                w.max_inflight,
                humantime::format_duration(w.max_lag),
                w.seed.map_or("random".to_string(), |s| s.to_string()),
                if w.windows.is_empty() {
                    w.repeat.to_string()
                } else {
                    "forever (windows)".to_string()
                }
            );
            match w.kind {
                WorkloadKind::Mixed => {
                    let m = w.mixed_params();
                    let weights: Vec<String> = m
                        .weights()
                        .iter()
                        .filter(|(_, v)| *v > 0.0)
                        .map(|(k, v)| format!("{k} {v}"))
                        .collect();
                    let _ = writeln!(out, "  weights: {}", weights.join(", "));
                    let _ = writeln!(
                        out,
                        "  collection: {}, doc_size: {} ({} bytes), initial_docs: {}, load_batch: {}",
                        m.collection,
                        m.doc_size,
                        m.doc_size.bytes(),
                        m.initial_docs,
                        m.load_batch
                    );
                }
                WorkloadKind::InsertBenchmark => {
                    out.push_str(&w.insert_benchmark_params().describe())
                }
                WorkloadKind::Sysbench => out.push_str(&w.sysbench_params().describe()),
                WorkloadKind::NameNum => out.push_str(&w.name_num_params().describe()),
                WorkloadKind::LargeDoc => out.push_str(&w.large_doc_params().describe()),
                WorkloadKind::Ycsb => out.push_str(&w.ycsb_params().describe()),
                WorkloadKind::Custom => out.push_str(&w.custom_params().describe()),
            }
            out.push_str(&w.describe_failover());
            let Ok(schedule) = w.schedule() else {
                let _ = writeln!(out, "  (invalid schedule)");
                continue;
            };
            if let Some(plan) = schedule.windows() {
                describe_windows(&mut out, plan, now);
                continue;
            }
            let _ = writeln!(
                out,
                "  stages ({} per pass{}):",
                humantime::format_duration(schedule.total_duration()),
                if schedule.repeats() { ", repeated" } else { "" }
            );
            for (i, s) in schedule.stages().iter().enumerate() {
                let _ = writeln!(out, "    {}. {s}", i + 1);
            }
            // A repeating schedule shows two passes, then a summary.
            let max_rows = if schedule.repeats() {
                (2 * schedule.stages().len()).min(TIMELINE_MAX_ROWS)
            } else {
                TIMELINE_MAX_ROWS
            };
            let rows = schedule.timeline(TIMELINE_HORIZON, max_rows);
            let _ = writeln!(out, "  timeline (next 24h):");
            for r in &rows {
                let s = &schedule.stages()[r.stage];
                let _ = writeln!(
                    out,
                    "    +{:<12} .. +{:<12} {}",
                    humantime::format_duration(r.start).to_string(),
                    humantime::format_duration(r.end).to_string(),
                    s
                );
            }
            let last_end = rows.last().map_or(Duration::ZERO, |r| r.end);
            if last_end < TIMELINE_HORIZON {
                if schedule.repeats() {
                    let pass = schedule.total_duration();
                    let passes = TIMELINE_HORIZON.as_nanos().div_ceil(pass.as_nanos());
                    let _ = writeln!(
                        out,
                        "    … repeats every {} ({passes} passes in 24h)",
                        humantime::format_duration(pass)
                    );
                } else {
                    let _ = writeln!(
                        out,
                        "    +{} end: the workload stops",
                        humantime::format_duration(last_end)
                    );
                }
            }
        }
        out
    }
}

/// The windows of a workload and the next 24 hours in their zone, as
/// `check-config` prints them.
fn describe_windows(out: &mut String, plan: &WindowPlan, now: DateTime<Utc>) {
    let tz = plan.windows().tz();
    let stages = plan.stages();
    let _ = writeln!(
        out,
        "  windows ({tz}, repeating forever; the first active wins):"
    );
    for (i, (w, s)) in plan.windows().windows().iter().zip(&stages).enumerate() {
        let _ = writeln!(out, "    {}. {w}  {s:#}", i + 1);
    }
    match stages.get(plan.windows().windows().len()) {
        Some(d) => {
            let _ = writeln!(out, "    outside: {d:#}");
        }
        None => {
            let _ = writeln!(out, "    outside: idle");
        }
    }
    let _ = writeln!(out, "  timeline (next 24h, {tz}):");
    let fmt = |t: DateTime<Utc>| {
        t.with_timezone(&tz)
            .format("%a %Y-%m-%d %H:%M %Z")
            .to_string()
    };
    for span in plan
        .timeline(now, TIMELINE_HORIZON)
        .iter()
        .take(TIMELINE_MAX_ROWS)
    {
        let what = span
            .window
            .map_or("idle".to_string(), |i| format!("{:#}", stages[i]));
        let _ = writeln!(out, "    {} .. {}  {what}", fmt(span.from), fmt(span.to));
    }
}

#[cfg(test)]
mod tests;
