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
pub(crate) const UNIT_DIRS: [&str; 2] = ["/var/lib/mongoload", "/run/mongoload"];

/// A path the daemon must write and cannot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unwritable {
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
    pub(crate) fn to_config_error(&self, file: &Path) -> ConfigError {
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
            "{} cannot be written by this process: {}. ",
            self.path.display(),
            self.reason,
        )?;
        if under_systemd() {
            write!(
                f,
                "The packaged units let the service write only under {} and {}: use a path \
                 there, or open the directory up in a drop-in (`systemctl edit mongoload`, or \
                 mongoload@NAME): [Service] ReadWritePaths={} (and make it writable by the \
                 mongoload user)",
                UNIT_DIRS[0],
                UNIT_DIRS[1],
                self.dir.display()
            )
        } else if self.unit_creates_it {
            write!(
                f,
                "The packaged units create {} at start; run by hand, use a user that may \
                 create it (root), or set the key to a path this user can write",
                self.dir.display()
            )
        } else {
            write!(
                f,
                "Make {} writable by this user, or set the key to a path it can write",
                self.dir.display()
            )
        }
    }
}

/// Whether this process is a systemd service (systemd sets
/// `INVOCATION_ID` for every unit it starts): then a path outside the
/// unit's writable directories needs `ReadWritePaths=`.
fn under_systemd() -> bool {
    std::env::var_os("INVOCATION_ID").is_some_and(|v| !v.is_empty())
}

/// The paths of `config` the daemon writes, with their keys.
fn paths(config: &Config) -> Vec<(&'static str, &Path)> {
    let mut out = Vec::new();
    if let Some(log) = &config.run.log {
        out.push(("run.log", log.as_path()));
    }
    if let Some(socket) = &config.control.socket {
        out.push(("control.socket", socket.as_path()));
    }
    out
}

/// Creates the missing directory of each path the daemon writes, as
/// `mongoload run` does before [`check`]: a run by hand of the shipped
/// config gets its `/run/mongoload` when this user may create it. What
/// cannot be created is left for [`check`] to report.
pub(crate) fn create_dirs(config: &Config) {
    use std::os::unix::fs::DirBuilderExt;
    for (_, path) in paths(config) {
        let dir = parent(path);
        if !dir.exists() {
            let _ = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir);
        }
    }
}

/// Every path of `config` the daemon would write and cannot, found by
/// trying: the run log is opened for appending (never truncated) or, when
/// it does not exist yet, a probe file is created and removed beside it;
/// the control socket's directory gets the same probe. A missing directory
/// is no problem when this process can create it (`mongoload run` does,
/// [`create_dirs`]): then its nearest existing ancestor gets the probe. So
/// `check-config` and `run` give the same verdict, with the same words.
pub(crate) fn check(config: &Config) -> Vec<Unwritable> {
    let mut out = Vec::new();
    for (key, path) in paths(config) {
        let probed = if key == "run.log" {
            probe_file(path)
        } else {
            probe_dir(parent(path))
        };
        if let Err(e) = probed {
            out.push(problem(key, path, e));
        }
    }
    out
}

fn problem(key: &'static str, path: &Path, e: io::Error) -> Unwritable {
    let dir = parent(path).to_path_buf();
    let unit_creates_it = !dir.exists() && UNIT_DIRS.iter().any(|d| dir.starts_with(d));
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
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            probe_dir(parent(path))
        }
        Err(e) => Err(e),
    }
}

/// Whether a file can be created in `dir`: creates a probe file there and
/// removes it.
fn probe_dir(dir: &Path) -> io::Result<()> {
    if !dir.is_dir() {
        if dir.exists() {
            return Err(io::Error::other(format!(
                "{} is not a directory",
                dir.display()
            )));
        }
        // Missing: creatable when its nearest existing ancestor is a
        // directory this process can create entries in.
        let ancestor = dir
            .ancestors()
            .skip(1)
            .find(|a| !a.as_os_str().is_empty() && a.exists())
            .unwrap_or(Path::new("."));
        return match probe_dir(ancestor) {
            Ok(()) => Ok(()),
            Err(e)
                if e.kind() == io::ErrorKind::PermissionDenied
                    || e.kind() == io::ErrorKind::ReadOnlyFilesystem =>
            {
                Err(io::Error::new(
                    e.kind(),
                    format!(
                    "the directory {} does not exist and this user cannot create it in {} ({e})",
                    dir.display(),
                    ancestor.display()
                ),
                ))
            }
            Err(e) => Err(io::Error::new(
                e.kind(),
                format!(
                    "the directory {} does not exist and cannot be created: {e}",
                    dir.display()
                ),
            )),
        };
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
    fn missing_directories_are_fine_when_they_can_be_created_and_run_creates_them() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("a/b/runs.jsonl");
        let sock = dir.path().join("run/mongoload/c.sock");
        let c = config(Some(&log), Some(&sock));
        assert_eq!(check(&c), vec![]);
        assert!(!log.parent().unwrap().exists(), "check creates nothing");
        create_dirs(&c);
        assert!(log.parent().unwrap().is_dir());
        assert!(sock.parent().unwrap().is_dir());
        assert_eq!(check(&c), vec![]);
    }

    #[test]
    fn directories_that_cannot_be_created_name_the_key() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("blocker");
        std::fs::write(&blocker, "").unwrap();
        let log = blocker.join("nope/runs.jsonl");
        let sock = blocker.join("gone/c.sock");
        let c = config(Some(&log), Some(&sock));
        create_dirs(&c);
        let found = check(&c);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(found[0].key, "run.log");
        assert_eq!(found[0].dir, blocker.join("nope"));
        assert!(
            found[0]
                .reason
                .contains("does not exist and cannot be created"),
            "{found:?}"
        );
        assert!(!found[0].unit_creates_it);
        assert_eq!(found[1].key, "control.socket");
        let e = found[1].to_config_error(Path::new("/etc/mongoload/x.toml"));
        let text = e.to_string();
        assert!(
            text.starts_with("/etc/mongoload/x.toml: control.socket: "),
            "{text}"
        );
        assert_eq!(e.key(), Some("control.socket"));

        let found = check(&config(Some(dir.path()), None));
        assert_eq!(found[0].reason, "it is a directory");
    }

    #[test]
    fn the_advice_fits_where_the_daemon_runs() {
        let u = Unwritable {
            key: "control.socket",
            path: PathBuf::from("/run/mongoload/control.sock"),
            dir: PathBuf::from("/run/mongoload"),
            reason: "the directory /run/mongoload does not exist and this user cannot create it"
                .into(),
            unit_creates_it: true,
        };
        let text = u.to_string();
        if under_systemd() {
            assert!(text.contains("ReadWritePaths=/run/mongoload"), "{text}");
        } else {
            assert!(!text.contains("ReadWritePaths"), "{text}");
            assert!(
                text.contains("The packaged units create /run/mongoload"),
                "{text}"
            );
        }
    }
}
