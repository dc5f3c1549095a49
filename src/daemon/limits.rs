//! What a plan may ask of the process: the file descriptors its
//! connections need against `RLIMIT_NOFILE` (the cap on workers per
//! workload is a config check: [`crate::config::MAX_WORKERS`]). `run`
//! raises the soft limit as far as the hard one when the plan needs it, and
//! refuses to start (exit 78) when even the hard limit is too low;
//! `check-config` prints the budget and warns.

use std::path::Path;

use crate::config::{Config, ConfigError};

/// Descriptors the process uses besides the driver's connections: stdio,
/// the runtime's epoll and event fds, the journal socket, the run log,
/// DNS lookups, with room to spare.
pub const BASE_FDS: u64 = 64;

/// Connections the driver keeps per server besides its pool: the
/// monitoring connection and the round-trip-time monitor.
const MONITOR_CONNECTIONS: u64 = 2;

/// Servers assumed behind a `mongodb+srv://` URI, whose hosts are only
/// known from DNS at start: a three-member replica set.
const SRV_SERVERS: u64 = 3;

/// The file descriptors a plan needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FdBudget {
    /// Driver connections: (pool + monitors) per server.
    pub connections: u64,
    /// Servers counted (the URI's seed list; 3 for `mongodb+srv://`).
    pub servers: u64,
    /// Everything: connections, the HTTP and control endpoints' bounds and
    /// [`BASE_FDS`].
    pub needed: u64,
    /// The key that sizes the pool, for messages.
    pub key: String,
}

/// The budget of `config` (the driver keeps its pool per server, and
/// mongoload warms it to full size on every server it knows).
pub fn fd_budget(config: &Config) -> FdBudget {
    let servers = match (&config.target.uri, &config.target.uri_file) {
        (Some(uri), _) if uri.expose().starts_with("mongodb+srv://") => SRV_SERVERS,
        (Some(uri), _) => crate::config::uri_hosts(uri.expose()).len().max(1) as u64,
        // Unread until start; most deployments are replica sets.
        _ => SRV_SERVERS,
    };
    let per_server = u64::from(config.effective_pool_size()) + MONITOR_CONNECTIONS;
    let connections = servers * per_server;
    let needed = connections
        + u64::from(crate::daemon::http::MAX_CONNECTIONS)
        + crate::control::server::MAX_CONNECTIONS as u64
        + BASE_FDS;
    FdBudget {
        connections,
        servers,
        needed,
        key: pool_key(config),
    }
}

/// `target.pool_size` when set, else the workers of the workload that
/// asks for the most.
fn pool_key(config: &Config) -> String {
    if config.target.pool_size > 0 {
        return "target.pool_size".into();
    }
    let Some((i, w)) = config
        .workloads
        .iter()
        .enumerate()
        .max_by_key(|(_, w)| w.peak_concurrency())
    else {
        return "target.pool_size".into();
    };
    let open_loop = w.stages.iter().any(|s| s.rate.is_some())
        || w.windows.iter().chain(&w.default).any(|x| x.rate.is_some());
    if open_loop && w.peak_concurrency() == w.max_inflight {
        format!("workloads[{i}].max_inflight")
    } else if w.windows.is_empty() {
        format!("workloads[{i}].stages")
    } else {
        format!("workloads[{i}].windows")
    }
}

/// A warning when `target.pool_size` is set below the workers the plan
/// runs: operations beyond the pool then wait in the driver's queue, and
/// after a stall longer than `operation_timeout` that queue can hold
/// abandoned requests as fast as it serves live ones, so the load does not
/// recover (docs/reliability.md, "Known limit").
pub fn pool_warning(config: &Config) -> Option<String> {
    let pool = config.target.pool_size;
    let planned = config.planned_connections();
    (pool > 0 && pool < planned).then(|| {
        format!(
            "target.pool_size {pool} is below the {planned} operations the plan can have in flight: \
             the rest wait in the driver's queue, and after a stall longer than operation_timeout \
             the load may not recover; leave pool_size at 0 (sized to the plan)"
        )
    })
}

/// `RLIMIT_NOFILE` (`None` = unlimited).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoFile {
    pub soft: Option<u64>,
    pub hard: Option<u64>,
}

/// This process's `RLIMIT_NOFILE`.
pub fn nofile() -> NoFile {
    let l = rustix::process::getrlimit(rustix::process::Resource::Nofile);
    NoFile {
        soft: l.current,
        hard: l.maximum,
    }
}

/// What the limit means for a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The soft limit is enough.
    Fits,
    /// The soft limit must be raised to this (the hard limit allows it).
    Raise(u64),
    /// Not even the hard limit is enough.
    TooFew { hard: u64 },
}

/// Whether `needed` descriptors fit `limit`.
pub fn verdict(needed: u64, limit: NoFile) -> Verdict {
    match (limit.soft, limit.hard) {
        (None, _) => Verdict::Fits,
        (Some(soft), _) if needed <= soft => Verdict::Fits,
        (Some(_), None) => Verdict::Raise(needed),
        (Some(_), Some(hard)) if needed <= hard => Verdict::Raise(needed),
        (Some(_), Some(hard)) => Verdict::TooFew { hard },
    }
}

/// The budget in one line, for check-config and the log.
pub fn describe(budget: &FdBudget, limit: NoFile) -> String {
    let show = |l: Option<u64>| l.map_or("unlimited".to_owned(), |n| n.to_string());
    format!(
        "file descriptors: the plan needs about {} ({} driver connections to {} server(s), the endpoints, {} spare); RLIMIT_NOFILE here: soft {}, hard {}",
        budget.needed,
        budget.connections,
        budget.servers,
        BASE_FDS,
        show(limit.soft),
        show(limit.hard)
    )
}

/// The error for a plan that needs more descriptors than the hard limit.
pub fn too_few(path: &Path, budget: &FdBudget, hard: u64) -> ConfigError {
    ConfigError::Invalid {
        path: path.to_path_buf(),
        key: budget.key.clone(),
        reason: format!(
            "the plan needs about {} file descriptors ({} driver connections to {} server(s) plus the endpoints), \
             more than this process may open (RLIMIT_NOFILE hard limit {hard}); lower it, or raise the limit \
             (LimitNOFILE= in the systemd unit, ulimit -n in a shell)",
            budget.needed, budget.connections, budget.servers
        ),
    }
}

/// Before `run`: raises the soft `RLIMIT_NOFILE` to what `config` needs
/// when the hard limit allows (returns the new soft limit), or refuses the
/// plan when it does not.
pub fn ensure_fds(config: &Config, path: &Path) -> Result<Option<u64>, ConfigError> {
    let budget = fd_budget(config);
    let limit = nofile();
    match verdict(budget.needed, limit) {
        Verdict::Fits => Ok(None),
        Verdict::TooFew { hard } => Err(too_few(path, &budget, hard)),
        Verdict::Raise(n) => {
            let new = rustix::process::Rlimit {
                current: Some(n),
                maximum: limit.hard,
            };
            rustix::process::setrlimit(rustix::process::Resource::Nofile, new).map_err(|e| {
                ConfigError::Invalid {
                    path: path.to_path_buf(),
                    key: budget.key.clone(),
                    reason: format!(
                        "the plan needs about {} file descriptors and the soft RLIMIT_NOFILE is {}; raising it failed: {e}",
                        budget.needed,
                        limit.soft.unwrap_or(0)
                    ),
                }
            })?;
            Ok(Some(n))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Result<Config, ConfigError> {
        crate::config::parse_with_env(text, Path::new("t.toml"), Vec::new())
    }

    const BASE: &str = "[target]\nuri = \"mongodb://a:1,b:2,c:3/\"\n[[workloads]]\nname = \"w\"\nkind = \"mixed\"\n";

    #[test]
    fn the_budget_counts_the_pool_on_every_server() {
        let c = config(&format!(
            "{BASE}max_inflight = 1000\n[[workloads.stages]]\nrate = 5\nduration = \"1m\"\n"
        ))
        .unwrap();
        let b = fd_budget(&c);
        assert_eq!((b.servers, b.connections), (3, 3 * 1002));
        assert_eq!(b.needed, 3006 + 64 + 16 + BASE_FDS);
        assert_eq!(b.key, "workloads[0].max_inflight");
        let c = config(&format!(
            "{}[[workloads.stages]]\nconcurrency = 10\nduration = \"1m\"\n[target.x]\n",
            BASE.replace("c:3/\"", "c:3/\"\npool_size = 7")
        ));
        assert!(c.is_err(), "unknown keys are still refused");
        let c = config(&format!(
            "{}[[workloads.stages]]\nconcurrency = 10\nduration = \"1m\"\n",
            BASE.replace("c:3/\"", "c:3/\"\npool_size = 7")
        ))
        .unwrap();
        assert_eq!(fd_budget(&c).connections, 27);
        assert_eq!(fd_budget(&c).key, "target.pool_size");
    }

    #[test]
    fn a_pool_below_the_workers_is_warned_about() {
        let stages = "[[workloads.stages]]\nrate = 5\nduration = \"1m\"\n";
        let c = config(&format!("{BASE}max_inflight = 512\n{stages}")).unwrap();
        assert_eq!(pool_warning(&c), None, "sized to the plan");
        let c = config(&format!(
            "{}max_inflight = 512\n{stages}",
            BASE.replace("c:3/\"", "c:3/\"\npool_size = 64")
        ))
        .unwrap();
        let w = pool_warning(&c).unwrap();
        assert!(w.starts_with("target.pool_size 64 is below the 512"), "{w}");
    }

    #[test]
    fn verdicts() {
        let l = |soft, hard| NoFile { soft, hard };
        assert_eq!(verdict(100, l(Some(1024), Some(4096))), Verdict::Fits);
        assert_eq!(
            verdict(2000, l(Some(1024), Some(4096))),
            Verdict::Raise(2000)
        );
        assert_eq!(
            verdict(5000, l(Some(1024), Some(4096))),
            Verdict::TooFew { hard: 4096 }
        );
        assert_eq!(verdict(5000, l(None, None)), Verdict::Fits);
        assert_eq!(verdict(5000, l(Some(1024), None)), Verdict::Raise(5000));
        let e = too_few(
            Path::new("/etc/m.toml"),
            &FdBudget {
                connections: 3006,
                servers: 3,
                needed: 3150,
                key: "workloads[0].max_inflight".into(),
            },
            1024,
        );
        let text = e.to_string();
        assert!(
            text.starts_with("/etc/m.toml: workloads[0].max_inflight: the plan needs about 3150"),
            "{text}"
        );
        assert!(text.contains("hard limit 1024"), "{text}");
    }
}
