//! Loading a config: the file, then `MONGOLOAD_<SECTION>__<KEY>`
//! environment overrides (through the `config` crate), deserialised with
//! the key of any error kept (`serde_path_to_error`), then validated.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::control::DEPRECATED_SOCKET_ENV;

use super::{Config, ConfigError, KeyError, CONFIG_ENV, DEFAULT_PATH};

/// Prefix of environment overrides.
const ENV_PREFIX: &str = "MONGOLOAD_";

/// `--config PATH`, for every subcommand that reads the config.
#[derive(Debug, clap::Args)]
pub struct ConfigArg {
    /// Config file [default: $MONGOLOAD_CONFIG, else /etc/mongoload/mongoload.toml].
    #[arg(long, short)]
    pub config: Option<PathBuf>,
}

impl ConfigArg {
    /// The config file: `--config`, else `$MONGOLOAD_CONFIG`, else the default.
    pub(crate) fn path(&self) -> PathBuf {
        self.config.clone().unwrap_or_else(default_path)
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
    let mut cfg = parse_with_env(&text, path, env)?;
    // The web configuration, from the file's directory, read and checked
    // as the HTTP server will use it (its certificates, key and hashes).
    if let Some(web) = cfg.http.web_config.take() {
        let dir = path.parent().unwrap_or(Path::new(""));
        cfg.http.web_config = Some(dir.join(web));
        load_web(&cfg)?;
    }
    Ok(cfg)
}

/// `[http] web_config` of a loaded config, read (none: plain HTTP); an
/// error names the web configuration file, its key and the reason.
pub fn load_web(cfg: &Config) -> Result<Option<crate::web::WebConfig>, ConfigError> {
    cfg.http
        .web_config
        .as_deref()
        .map(crate::web::WebConfig::load)
        .transpose()
        .map_err(|e| ConfigError::Invalid {
            path: e.file,
            key: e.key,
            reason: e.reason,
        })
}

/// Parses config text (`path` only names it in errors), applies the
/// overrides in `env` and validates.
pub fn parse_with_env(
    text: &str,
    path: &Path,
    env: impl IntoIterator<Item = (String, String)>,
) -> Result<Config, ConfigError> {
    let Overrides {
        overrides,
        hostname,
        warnings,
    } = env_overrides(env);
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
    let mut cfg = deserialize(built, path, &overrides)?;
    cfg.warnings = warnings;
    cfg.validate()
        .and_then(|()| {
            let host = crate::cluster::hostname(hostname);
            cfg.cluster
                .resolve(host.as_deref())
                .map_err(|e| KeyError::new(e.key, e.reason))
        })
        .map_err(|mut e| {
            e.reason.push_str(&env_hint(&overrides, &e.key));
            e.in_file(path)
        })?;
    Ok(cfg)
}

/// What the environment gives a config: the key overrides, `HOSTNAME`
/// (for the cluster section) and the warnings about deprecated names.
struct Overrides {
    overrides: HashMap<String, String>,
    hostname: Option<String>,
    warnings: Vec<String>,
}

/// The overrides in `env`.
fn env_overrides(env: impl IntoIterator<Item = (String, String)>) -> Overrides {
    // Only MONGOLOAD_<SECTION>__<KEY> are keys: MONGOLOAD_CONFIG,
    // MONGOLOAD_TEST_URI and friends must not reach deny_unknown_fields.
    let mut hostname = None;
    let mut socket = None;
    let mut overrides: HashMap<String, String> = env
        .into_iter()
        .filter(|(k, v)| {
            if k == "HOSTNAME" {
                hostname = Some(v.clone());
            }
            if k == crate::control::SOCKET_ENV {
                socket = Some(v.clone());
            }
            k.get(..ENV_PREFIX.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(ENV_PREFIX))
                && k[ENV_PREFIX.len()..].contains("__")
        })
        .collect();
    // One name for the control socket, the one `mongoload ctl` reads too:
    // MONGOLOAD_CONTROL_SOCKET. The generic override's spelling
    // (MONGOLOAD_CONTROL__SOCKET) still works, with a warning; the single
    // underscore wins when both are set.
    let mut warnings = Vec::new();
    let deprecated = overrides
        .keys()
        .find(|k| k.eq_ignore_ascii_case(DEPRECATED_SOCKET_ENV))
        .cloned();
    if let Some(old) = deprecated {
        warnings.push(format!(
            "{old} is deprecated: set {} instead (mongoload ctl reads that one too)",
            crate::control::SOCKET_ENV
        ));
        if socket.is_some() {
            overrides.remove(&old);
        }
    }
    if let Some(s) = socket.filter(|s| !s.is_empty()) {
        overrides.insert(DEPRECATED_SOCKET_ENV.to_owned(), s);
    }
    Overrides {
        overrides,
        hostname,
        warnings,
    }
}

/// Name the variable when an override is the culprit, or the user
/// searches the file for a value that is not there.
fn env_hint(overrides: &HashMap<String, String>, key: &str) -> String {
    let var = format!("{ENV_PREFIX}{}", key.replace('.', "__")).to_ascii_uppercase();
    if overrides.keys().any(|k| k.eq_ignore_ascii_case(&var)) {
        format!(" (set by {var})")
    } else {
        String::new()
    }
}

/// The config from the merged file and overrides, an error naming the
/// key (the missing field's own, not its parent's) and the override if
/// one set it.
fn deserialize(
    built: config::Config,
    path: &Path,
    overrides: &HashMap<String, String>,
) -> Result<Config, ConfigError> {
    serde_path_to_error::deserialize(built).map_err(|e| {
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
        let reason = format!("{reason}{}", env_hint(overrides, &key));
        ConfigError::Invalid {
            path: path.to_path_buf(),
            key,
            reason,
        }
    })
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
