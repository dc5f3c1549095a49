//! The paths the daemon writes (`run.log`, `control.socket`), checked
//! against what this process can actually write, by trying: a sandboxed
//! unit (`ProtectSystem=strict`) or a missing directory then fails at start
//! with the key named (exit 78), instead of losing every stage report
//! later with a log line.

use std::fs::OpenOptions;
use std::io;
use std::path::{Path, PathBuf};

use crate::config::{Config, ConfigError};

/// The directories the packaged units create at start and let the service
/// write (`StateDirectory=`, `RuntimeDirectory=`), instances below them.
pub const UNIT_DIRS: [&str; 2] = ["/var/lib/mongoload", "/run/mongoload"];

/// A path the daemon must write and cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwritable {
    /// The config key, e.g. `run.log`.
    pub key: &'static str,
    /// The path the key names.
    pub path: PathBuf,
    /// The directory a drop-in would have to open up.
    pub dir: PathBuf,
    /// What went wrong, as the system said it.
    pub reason: String,
    /// The directory is missing and is one the packaged units create at
    /// start ([`UNIT_DIRS`]): only a problem outside those units.
    pub unit_creates_it: bool,
}

impl Unwritable {
    /// The error `mongoload run` exits 78 with: the key, the path, the
    /// reason, and what to do under the packaged units.
    pub fn to_config_error(&self, file: &Path) -> ConfigError {
        ConfigError::Invalid {
            path: file.to_path_buf(),
            key: self.key.to_string(),
            reason: self.to_string(),
        }
    }
}

impl std::fmt::Display for Unwritable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} cannot be written by this process: {}. The packaged units let the service \
             write only under {} and {}: use a path there, or open the directory up in a \
             drop-in (`systemctl edit mongoload`, or mongoload@NAME): [Service] \
             ReadWritePaths={} (and make it writable by the mongoload user)",
            self.path.display(),
            self.reason,
            UNIT_DIRS[0],
            UNIT_DIRS[1],
            self.dir.display()
        )
    }
}

/// Every path of `config` the daemon would write and cannot, found by
/// trying: the run log is opened for appending (never truncated) or, when
/// it does not exist yet, a probe file is created and removed beside it;
/// the control socket's directory gets the same probe.
pub fn check(config: &Config) -> Vec<Unwritable> {
    let mut out = Vec::new();
    if let Some(log) = &config.run.log {
        if let Err(e) = probe_file(log) {
            out.push(problem("run.log", log, e));
        }
    }
    if let Some(socket) = &config.control.socket {
        if let Err(e) = probe_dir(parent(socket)) {
            out.push(problem("control.socket", socket, e));
        }
    }
    out
}

fn problem(key: &'static str, path: &Path, e: io::Error) -> Unwritable {
    let dir = parent(path).to_path_buf();
    let unit_creates_it =
        e.kind() == io::ErrorKind::NotFound && UNIT_DIRS.iter().any(|d| dir.starts_with(d));
    Unwritable {
        key,
        path: path.to_path_buf(),
        reason: if e.kind() == io::ErrorKind::NotFound {
            format!("the directory {} does not exist", dir.display())
        } else {
            e.to_string()
        },
        dir,
        unit_creates_it,
    }
}

/// The directory a file is created in ("." for a bare file name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Whether `path` can be appended to, or created when it does not exist.
fn probe_file(path: &Path) -> io::Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => Err(io::Error::other("it is a directory")),
        Ok(_) => OpenOptions::new().append(true).open(path).map(drop),
        Err(e) if e.kind() == io::ErrorKind::NotFound => probe_dir(parent(path)),
        Err(e) => Err(e),
    }
}

/// Whether a file can be created in `dir`: creates a probe file there and
/// removes it.
fn probe_dir(dir: &Path) -> io::Result<()> {
    if !dir.is_dir() {
        return Err(match dir.exists() {
            true => io::Error::other(format!("{} is not a directory", dir.display())),
            false => io::Error::from(io::ErrorKind::NotFound),
        });
    }
    let probe = dir.join(format!(".mongoload-write-check.{}", std::process::id()));
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)?;
    std::fs::remove_file(&probe)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(log: Option<&Path>, socket: Option<&Path>) -> Config {
        let mut text = String::from("[target]\nuri = \"mongodb://127.0.0.1:1\"\n");
        if let Some(log) = log {
            text += &format!("[run]\nlog = {:?}\n", log.display().to_string());
        }
        if let Some(socket) = socket {
            text += &format!("[control]\nsocket = {:?}\n", socket.display().to_string());
        }
        text += "[[workloads]]\nname = \"w\"\nkind = \"mixed\"\n[[workloads.stages]]\nrate = 1\nduration = \"1s\"\n";
        crate::config::parse_with_env(&text, Path::new("t.toml"), Vec::new()).unwrap()
    }

    #[test]
    fn writable_paths_pass_and_leave_nothing_behind() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("runs.jsonl");
        let sock = dir.path().join("c.sock");
        assert_eq!(check(&config(Some(&log), Some(&sock))), vec![]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        // An existing log is opened for appending, never truncated.
        std::fs::write(&log, "{}\n").unwrap();
        assert_eq!(check(&config(Some(&log), None)), vec![]);
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "{}\n");
        assert_eq!(check(&config(None, None)), vec![]);
    }

    #[test]
    fn missing_directories_and_directories_in_the_way_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("nope/runs.jsonl");
        let sock = dir.path().join("gone/c.sock");
        let found = check(&config(Some(&log), Some(&sock)));
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].key, "run.log");
        assert_eq!(found[0].dir, dir.path().join("nope"));
        assert!(found[0].reason.contains("does not exist"), "{found:?}");
        assert!(!found[0].unit_creates_it);
        assert_eq!(found[1].key, "control.socket");
        let e = found[1].to_config_error(Path::new("/etc/mongoload/x.toml"));
        let text = e.to_string();
        assert!(
            text.starts_with("/etc/mongoload/x.toml: control.socket: "),
            "{text}"
        );
        assert!(text.contains("ReadWritePaths="), "{text}");
        assert_eq!(e.key(), Some("control.socket"));

        let found = check(&config(Some(dir.path()), None));
        assert_eq!(found[0].reason, "it is a directory");
    }

    #[test]
    fn directories_the_units_create_are_marked() {
        let found = check(&config(
            Some(Path::new(
                "/var/lib/mongoload/no-such-instance-dir/runs.jsonl",
            )),
            Some(Path::new(
                "/run/mongoload/no-such-instance-dir/control.sock",
            )),
        ));
        assert_eq!(found.len(), 2);
        assert!(found.iter().all(|u| u.unit_creates_it), "{found:?}");
    }
}
