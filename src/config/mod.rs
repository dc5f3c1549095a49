//! The configuration file: its schema (here), loading ([`load`]: TOML
//! through the `config` crate plus `MONGOLOAD_` environment overrides),
//! validation with errors that name file, key and reason (`validate.rs`),
//! and the plan description `check-config` prints (`describe.rs`). The
//! workload kinds' parameter tables live with their kinds
//! (`workload/<kind>/params.rs`) and are re-exported here.
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

mod build;
mod concerns;
mod describe;
mod load;
mod validate;
mod workers;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

pub use crate::config_values::{ByteSize, KeyError, LevelSpec};
pub use crate::probe::LagProbeConfig;
pub use crate::uri::{driver_reason, redact_uri, scrub, uri_hosts, uri_user, SecretUri, UriUser};
pub use crate::workload::custom::{CustomConfig, CustomIndex, CustomOp, CustomOpKind};
pub use crate::workload::insert_benchmark::InsertBenchmarkConfig;
pub use crate::workload::kind_list::KindConfig;
pub use crate::workload::large_doc::LargeDocConfig;
pub use crate::workload::mixed::MixedConfig;
pub use crate::workload::name_num::{NameNumConfig, NameNumMode};
pub use crate::workload::sysbench::SysbenchConfig;
pub use crate::workload::ycsb::{YcsbConfig, YcsbFieldType, YcsbLetter};
pub use build::BuildError;
pub use concerns::{uri_w, ConcernSource, ReadConcernSpec, WriteAck, WriteConcernSpec};
pub use describe::TIMELINE_HORIZON;
pub use load::{default_path, load, load_web, load_with_env, parse_with_env, ConfigArg};
pub use workers::{check_workers, MAX_WORKERS};

/// Default `workloads[].audit_rate`: acknowledged ids checked per second in
/// the background (a `find` of up to [`crate::audit::BATCH`] ids at a time).
pub const DEFAULT_AUDIT_RATE: f64 = 1000.0;

/// Where the daemon looks for its config when `--config` is not given.
pub const DEFAULT_PATH: &str = "/etc/mongoload/mongoload.toml";

/// The environment variable naming the config file.
pub const CONFIG_ENV: &str = "MONGOLOAD_CONFIG";

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

impl Config {
    /// A short hash of the config as loaded (environment overrides
    /// included; the URI's password, the run's name and its log file not,
    /// so two named runs of one plan share it): the first 12 hex digits
    /// of the SHA-256 of its debug form.
    pub fn hash(&self) -> String {
        use sha2::Digest as _;
        let mut plan = self.clone();
        plan.run.name = None;
        plan.run.log = None;
        let digest = sha2::Sha256::digest(format!("{plan:?}").as_bytes());
        digest.iter().take(6).map(|b| format!("{b:02x}")).collect()
    }
}

impl KeyError {
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
    /// What loading noticed and accepted (a deprecated variable): `run`
    /// logs each, `check-config` prints each; not a key.
    #[serde(skip)]
    pub warnings: Vec<String>,
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
    /// The deadline of one operation, all its requests together (the
    /// engine bounds each operation with one timer).
    #[serde(with = "humantime_serde")]
    pub operation_timeout: Duration,
    /// The write concern of every workload's writes (unless it sets its
    /// own); absent: the connection string's, else the deployment's.
    pub write_concern: Option<WriteConcernSpec>,
    /// The read concern of every workload's reads (unless it sets its own).
    pub read_concern: Option<ReadConcernSpec>,
    /// Command monitoring: every write attempt's outcome (retried writes,
    /// write outages hidden by retries), at the cost of the driver copying
    /// each command and reply (BENCHMARKS.md). Absent: on when a workload
    /// writes ([`Config::command_events`]).
    pub command_events: Option<bool>,
    /// Through a mongos: how often the documents per shard of each
    /// workload's collections are read (`$collStats`); 0: never.
    #[serde(with = "humantime_serde")]
    pub shard_stats_interval: Duration,
}

/// The default of `target.shard_stats_interval`.
pub const SHARD_STATS_INTERVAL: Duration = Duration::from_secs(30);

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
            command_events: None,
            shard_stats_interval: SHARD_STATS_INTERVAL,
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
}

/// The scheme, then the driver's own parser ([`crate::uri::check_with_driver`]):
/// `check-config` refuses exactly the connection strings `run` would.
fn check_uri_scheme(uri: &str) -> Result<(), String> {
    if uri.starts_with("mongodb://") || uri.starts_with("mongodb+srv://") {
        crate::uri::check_with_driver(uri)
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
    /// TLS and basic authentication for the endpoints, in the Prometheus
    /// exporter-toolkit's web configuration format ([`crate::web`]); a
    /// relative path is from the config file's directory. Read at start and
    /// at each reload. None: plain HTTP, no password.
    pub web_config: Option<PathBuf>,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 9480)),
            web_config: None,
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
    /// The run's name (`baseline`, `candidate`): in the run log, the
    /// reports, `/status` and the `run` label of `mongoload_run_info`.
    /// None: the generated run id stands for it.
    pub name: Option<String>,
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            shutdown_grace: Duration::from_secs(10),
            log: None,
            name: None,
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

/// `[[workloads]]`: one workload and its schedule.
// `remote = "Self"`: the derived deserializer is an inherent function that
// the hand-written `Deserialize` below runs after reading the kind's
// table out of the map (see `workload::kind`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct WorkloadConfig {
    /// Unique name, the `workload` metric label.
    pub name: String,
    /// The kind and its parameters: `kind = "…"` and the table
    /// `[workloads.<table>]` (defaults when absent).
    #[serde(deserialize_with = "crate::workload::kind_list::kind_by_name")]
    pub kind: KindConfig,
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
    /// Conditions on the workload's figures, evaluated over a sliding
    /// window while it runs and over each stage at its end (k6's model).
    #[serde(default)]
    pub thresholds: Vec<crate::threshold::ThresholdConfig>,
    /// Shard the workload's collections on this key at prepare, through a
    /// mongos: `{ _id = "hashed" }`, `{ k = 1 }` (docs/sharding.md).
    #[serde(default)]
    pub shard_key: Option<crate::workload::shard::ShardKey>,
    /// With `shard_key`: hashed, the initial chunk count
    /// (`numInitialChunks`); ranged, the chunks the kind's known key range
    /// is split into, spread over the shards.
    #[serde(default)]
    pub presplit: Option<u32>,
    /// Parameter tables given beside `kind` for another kind, by key:
    /// refused by validation, which names them.
    #[serde(skip)]
    pub(crate) stray_tables: Vec<&'static str>,
}

impl<'de> Deserialize<'de> for WorkloadConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<WorkloadConfig, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = WorkloadConfig;

            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a [[workloads]] table")
            }

            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<WorkloadConfig, A::Error> {
                let mut tables = Vec::new();
                let split = crate::workload::kind_list::split_tables(map, &mut tables);
                let mut w = WorkloadConfig::deserialize(
                    serde::de::value::MapAccessDeserializer::new(split),
                )?;
                for t in tables {
                    if t.key == w.kind.table() {
                        w.kind = t.params;
                    } else {
                        w.stray_tables.push(t.key);
                    }
                }
                Ok(w)
            }
        }
        d.deserialize_map(Fields)
    }
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
    /// A capacity search, once each time the window opens.
    #[serde(default)]
    pub search: Option<SearchConfig>,
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
    /// Open loop: how operations are spaced, `uniform` (default) or
    /// `poisson` (exponential gaps with the same mean, drawn from the
    /// workload's `seed` and the stage's index).
    #[serde(default)]
    pub arrival: Option<ArrivalConfig>,
    /// A capacity search instead of `rate` or `concurrency`.
    #[serde(default)]
    pub search: Option<SearchConfig>,
}

/// `search = { from, to, ... }` of a stage: the rates a capacity search
/// probes and how long; see `schedule::search`. Unset keys take the
/// defaults there.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchConfig {
    pub from: f64,
    pub to: f64,
    #[serde(default)]
    pub factor: Option<f64>,
    /// A ratio: 0.05 or "5%".
    #[serde(default)]
    pub precision: Option<RatioSpec>,
    #[serde(default, with = "humantime_serde")]
    pub probe: Option<Duration>,
    #[serde(default, with = "humantime_serde")]
    pub settle: Option<Duration>,
    #[serde(default)]
    pub min_operations: Option<u64>,
    /// A ratio: 0.05 or "5%".
    #[serde(default)]
    pub stop_error_ratio: Option<RatioSpec>,
}

/// A ratio as a number (0.05) or a percentage ("5%").
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum RatioSpec {
    Number(f64),
    Text(String),
}

impl RatioSpec {
    /// The ratio, or why the text is not one.
    pub fn value(&self) -> Result<f64, String> {
        match self {
            RatioSpec::Number(v) => Ok(*v),
            RatioSpec::Text(t) => crate::config_values::parse_ratio(t)
                .ok_or_else(|| format!("expected a ratio such as 0.05 or \"5%\", got {t:?}")),
        }
    }
}

/// `arrival` of a stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrivalConfig {
    Uniform,
    Poisson,
}

#[cfg(test)]
mod search_tests;
#[cfg(test)]
pub(crate) mod tests;
