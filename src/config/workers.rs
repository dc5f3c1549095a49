//! The cap on workers per workload (each is a task, and with the pool
//! sized to the plan a connection): a config check, so `check-config`,
//! `run` and a reload refuse the same plans.

use super::{KeyError, LevelSpec, WorkloadConfig};

/// Most workers (open-loop `max_inflight`, closed-loop concurrency) one
/// workload may ask for. Far above what one load host drives (one
/// MongoDB connection per operation in flight, about 28,000 ephemeral
/// ports per server address), far below what would exhaust memory.
pub const MAX_WORKERS: u32 = 100_000;

/// Checks a workload's worker counts against [`MAX_WORKERS`]: the key of
/// the first level above it, or nothing.
pub fn check_workers(w: &WorkloadConfig) -> Result<(), KeyError> {
    let too_many = |key: String, n: f64| KeyError {
        key,
        reason: format!(
            "{n} workers is more than the {MAX_WORKERS} one workload may run (each is a task and, \
             with the pool sized to the plan, a connection); split the load over workloads or hosts"
        ),
    };
    if w.max_inflight > MAX_WORKERS {
        return Err(too_many("max_inflight".into(), f64::from(w.max_inflight)));
    }
    for (i, s) in w.stages.iter().enumerate() {
        if let Some(c) = &s.concurrency {
            let top = level_top(c);
            if top > f64::from(MAX_WORKERS) {
                return Err(too_many(format!("stages[{i}].concurrency"), top));
            }
        }
    }
    let windows = w
        .windows
        .iter()
        .enumerate()
        .map(|(i, x)| (format!("windows[{i}]"), x));
    for (at, x) in windows.chain(w.default.iter().map(|x| ("default".to_owned(), x))) {
        if let Some(c) = x.concurrency.filter(|c| *c > f64::from(MAX_WORKERS)) {
            return Err(too_many(format!("{at}.concurrency"), c));
        }
    }
    Ok(())
}

fn level_top(level: &LevelSpec) -> f64 {
    match level {
        LevelSpec::Hold(v) => *v,
        LevelSpec::Ramp { from, to } => from.max(*to),
        LevelSpec::Steps { steps, .. } => steps.iter().copied().fold(0.0, f64::max),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use crate::config::{Config, ConfigError};

    fn config(text: &str) -> Result<Config, ConfigError> {
        crate::config::parse_with_env(text, Path::new("t.toml"), Vec::new())
    }

    const BASE: &str = "[target]\nuri = \"mongodb://a:1,b:2,c:3/\"\n[[workloads]]\nname = \"w\"\nkind = \"mixed\"\n";

    #[test]
    fn absurd_worker_counts_are_config_errors_naming_the_key() {
        for (stages, key) in [
            (
                "[[workloads.stages]]\nconcurrency = 100000000\nduration = \"1m\"\n",
                "workloads[0].stages[0].concurrency",
            ),
            (
                "[[workloads.stages]]\nconcurrency = { from = 1, to = 200000 }\nduration = \"1m\"\n",
                "workloads[0].stages[0].concurrency",
            ),
            (
                "max_inflight = 4000000000\n[[workloads.stages]]\nrate = 5\nduration = \"1m\"\n",
                "workloads[0].max_inflight",
            ),
        ] {
            let e = config(&format!("{BASE}{stages}")).unwrap_err();
            assert_eq!(e.key(), Some(key), "{e}");
            assert!(e.to_string().starts_with("t.toml: "), "{e}");
            assert!(e.to_string().contains("more than the 100000"), "{e}");
        }
        let ok = format!("{BASE}[[workloads.stages]]\nconcurrency = 100000\nduration = \"1m\"\n");
        assert!(config(&ok).is_ok());
        let windows =
            format!("{BASE}windows = [{{ when = \"daily 09:00-10:00\", concurrency = 1e9 }}]\n");
        assert_eq!(
            config(&windows).unwrap_err().key(),
            Some("workloads[0].windows[0].concurrency")
        );
    }
}
