//! Several load hosts as one load: the `[cluster]` section (size, this
//! member's index, from the config, the environment or a StatefulSet
//! pod's hostname), each member's share of a stage ([`share`]), disjoint
//! insert keys ([`keys`]), and the coordination through a small collection
//! in the target database ([`coord`]: a prepare lease, a shared run epoch,
//! cluster-wide control, a capacity search's probes: [`search`]), with
//! metric families of their own ([`metrics`]). Without `[cluster]` a daemon is member 0 of 1 and none
//! of this changes what it does.

pub(crate) mod coord;
pub(crate) mod epoch;
pub(crate) mod keys;
mod member_share;
pub(crate) mod metrics;
pub(crate) mod search;

use std::time::Duration;

use serde::Deserialize;

pub(crate) use coord::Coordinator;
pub(crate) use epoch::{ClusterRun, Joined};
pub(crate) use keys::Keys;
pub(crate) use metrics::ClusterMetrics;

/// One member of a cluster of `size` load hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Member {
    /// 0-based.
    pub index: u32,
    /// How many members share the load (≥ 1).
    pub size: u32,
}

impl Member {
    /// A daemon on its own.
    pub const SOLE: Member = Member { index: 0, size: 1 };

    /// Whether this is a daemon on its own (a cluster of one).
    pub fn is_sole(self) -> bool {
        self.size <= 1
    }
}

impl std::fmt::Display for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "member {} of {}", self.index, self.size)
    }
}

/// Where the coordination documents live by default, in `target.database`.
pub(crate) const DEFAULT_COLLECTION: &str = "mongoload_cluster";

/// `[cluster]`: this daemon as one member of several that run one load.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClusterConfig {
    /// How many members run the load together.
    pub size: u32,
    /// This member (0-based); when absent and `size > 1`, the hostname's
    /// trailing `-<n>` (a StatefulSet pod `mongoload-2` is member 2).
    pub index: Option<u32>,
    /// The coordination collection in `target.database`.
    pub collection: String,
    /// How long a prepare lease and a member's liveness last without being
    /// renewed (renewed every third of it): a member dead this long loses
    /// its lease to another.
    #[serde(with = "humantime_serde")]
    pub lease: Duration,
    /// Where `index` came from, for check-config (set when resolved).
    #[serde(skip)]
    pub index_from: Option<String>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            size: 1,
            index: None,
            collection: DEFAULT_COLLECTION.into(),
            lease: Duration::from_secs(10),
            index_from: None,
        }
    }
}

/// A `[cluster]` key that cannot be used: the key and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterKeyError {
    pub key: &'static str,
    pub reason: String,
}

impl ClusterConfig {
    /// This member, once [`ClusterConfig::resolve`] has run (member 0 of 1
    /// without a cluster).
    pub fn member(&self) -> Member {
        if self.size <= 1 {
            return Member::SOLE;
        }
        Member {
            index: self.index.unwrap_or(0),
            size: self.size,
        }
    }

    /// Checks the keys and settles `index`: as given, else (with `size >
    /// 1`) from `hostname`'s trailing `-<n>`.
    pub fn resolve(&mut self, hostname: Option<&str>) -> Result<(), ClusterKeyError> {
        let err = |key, reason: String| Err(ClusterKeyError { key, reason });
        if self.size == 0 {
            return err("cluster.size", "must be at least 1, got 0".into());
        }
        if self.collection.is_empty()
            || self.collection.contains(['$', '\0'])
            || self.collection.starts_with("system.")
        {
            return err(
                "cluster.collection",
                format!("not a valid collection name: {:?}", self.collection),
            );
        }
        if self.lease < Duration::from_secs(1) {
            return err(
                "cluster.lease",
                format!(
                    "must be at least 1s, got {}",
                    humantime::format_duration(self.lease)
                ),
            );
        }
        let (index, from) = match (self.index, hostname) {
            (Some(i), _) => (i, None),
            (None, _) if self.size == 1 => (0, None),
            (None, Some(host)) => match ordinal(host) {
                Some(i) => (i, Some(host)),
                None => {
                    return err(
                        "cluster.index",
                        format!(
                            "not set, and the hostname {host:?} has no trailing -<n> to take it from; \
                             set cluster.index (or MONGOLOAD_CLUSTER__INDEX) to this member's number, 0 to {}",
                            self.size - 1
                        ),
                    )
                }
            },
            (None, None) => {
                return err(
                    "cluster.index",
                    "not set, and the hostname is unknown; set cluster.index (or MONGOLOAD_CLUSTER__INDEX)"
                        .into(),
                )
            }
        };
        if index >= self.size {
            let source = match from {
                Some(host) => format!(" (from the hostname {host:?})"),
                None => String::new(),
            };
            return err(
                "cluster.index",
                format!(
                    "{index}{source} is out of range for cluster.size = {}: members are 0 to {}",
                    self.size,
                    self.size - 1
                ),
            );
        }
        self.index = Some(index);
        self.index_from = from.map(|h| format!("hostname {h}"));
        Ok(())
    }
}

impl ClusterConfig {
    /// The `cluster:` lines of check-config's plan; nothing without one.
    pub fn describe(&self) -> String {
        let m = self.member();
        if m.is_sole() {
            return String::new();
        }
        let from = self
            .index_from
            .as_deref()
            .map_or(String::new(), |f| format!(" (from the {f})"));
        format!(
            "cluster:\n  member: {} of {}{from}; stage levels below are the cluster's totals, this member runs its share\n  \
             coordination: collection {} (lease {})\n",
            m.index,
            m.size,
            self.collection,
            humantime::format_duration(self.lease)
        )
    }
}

/// The number a hostname ends in after a `-` (`mongoload-2` → 2; a
/// StatefulSet's pods are `<name>-<ordinal>`), ignoring a domain.
pub(crate) fn ordinal(hostname: &str) -> Option<u32> {
    let short = hostname.split('.').next()?;
    let (_, n) = short.rsplit_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// This machine's hostname: `$HOSTNAME` in `env` (containers set it to the
/// pod name), else the kernel's.
pub(crate) fn hostname(env: Option<String>) -> Option<String> {
    env.filter(|h| !h.trim().is_empty())
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
}

/// `ctl --all`: hands the command to every member through the database
/// (written in the background: the control socket answers at once) and
/// says so; refused without a cluster.
pub(crate) fn control_all(
    cluster: Option<&std::sync::Arc<Coordinator>>,
    command: crate::control::Command,
    load: &tokio::runtime::Handle,
) -> Result<serde_json::Value, String> {
    let Some(c) = cluster else {
        return Err(
            "--all needs a [cluster]: this daemon runs the whole load; leave out --all".into(),
        );
    };
    if command.workload().is_none() {
        return Err("status is per member: ask each member's control socket".into());
    }
    let (member, line) = (c.member(), command.to_string());
    let c = c.clone();
    load.spawn(async move {
        match c.control(&command).await {
            Ok(state) => tracing::info!(
                "control (sent to every member): {command}: the cluster's totals are now {state}"
            ),
            Err(e) => tracing::error!("control (for every member): {command}: not applied: {e}"),
        }
    });
    Ok(serde_json::json!({
        "message": format!(
            "{line}: sent to every member of the cluster through the database; each applies its share within a second ({} of {} here)",
            member.index,
            member.size
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(size: u32, index: Option<u32>) -> ClusterConfig {
        ClusterConfig {
            size,
            index,
            ..ClusterConfig::default()
        }
    }

    #[test]
    fn the_ordinal_is_the_hostnames_trailing_number() {
        assert_eq!(ordinal("mongoload-2"), Some(2));
        assert_eq!(ordinal("load-gen-13.mongoload.default.svc"), Some(13));
        assert_eq!(ordinal("mongoload"), None);
        assert_eq!(ordinal("mongoload-"), None);
        assert_eq!(ordinal("mongoload-x1"), None);
        assert_eq!(ordinal("host-1a"), None);
    }

    #[test]
    fn the_index_comes_from_the_key_or_the_hostname() {
        let mut c = cluster(3, Some(1));
        c.resolve(Some("mongoload-2")).unwrap();
        assert_eq!(c.member(), Member { index: 1, size: 3 });
        let mut c = cluster(3, None);
        c.resolve(Some("mongoload-2")).unwrap();
        assert_eq!(c.member(), Member { index: 2, size: 3 });
        assert_eq!(c.index_from.as_deref(), Some("hostname mongoload-2"));
        // Without a cluster nothing is needed.
        let mut c = ClusterConfig::default();
        c.resolve(None).unwrap();
        assert_eq!(c.member(), Member::SOLE);
        assert!(c.member().is_sole());
    }

    #[test]
    fn a_missing_or_out_of_range_index_names_the_key() {
        let e = cluster(3, None).resolve(Some("loadhost")).unwrap_err();
        assert_eq!(e.key, "cluster.index");
        assert!(
            e.reason.contains("\"loadhost\" has no trailing -<n>"),
            "{}",
            e.reason
        );
        let e = cluster(3, None).resolve(Some("mongoload-3")).unwrap_err();
        assert_eq!(e.key, "cluster.index");
        assert!(
            e.reason.contains(
                "3 (from the hostname \"mongoload-3\") is out of range for cluster.size = 3"
            ),
            "{}",
            e.reason
        );
        let e = cluster(2, Some(5)).resolve(None).unwrap_err();
        assert!(e.reason.starts_with("5 is out of range"), "{}", e.reason);
        let e = cluster(0, None).resolve(None).unwrap_err();
        assert_eq!(e.key, "cluster.size");
        let e = cluster(3, None).resolve(None).unwrap_err();
        assert!(e.reason.contains("hostname is unknown"), "{}", e.reason);
        let mut c = cluster(2, Some(0));
        c.collection = "a$b".into();
        assert_eq!(c.resolve(None).unwrap_err().key, "cluster.collection");
    }

    #[test]
    fn size_and_index_come_from_the_environment_and_need_a_restart() {
        let text = "[target]\nuri = \"mongodb://127.0.0.1:1\"\n[[workloads]]\nname = \"w\"\nkind = \"mixed\"\n\
                    [[workloads.stages]]\nrate = 1\nduration = \"1s\"\n";
        let env = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let path = std::path::Path::new("m.toml");
        let alone = crate::config::parse_with_env(text, path, env(&[])).unwrap();
        assert_eq!(alone.cluster.member(), Member::SOLE);
        let two = crate::config::parse_with_env(
            text,
            path,
            env(&[
                ("MONGOLOAD_CLUSTER__SIZE", "3"),
                ("MONGOLOAD_CLUSTER__INDEX", "2"),
            ]),
        )
        .unwrap();
        assert_eq!(two.cluster.member(), Member { index: 2, size: 3 });
        let pod = crate::config::parse_with_env(
            text,
            path,
            env(&[
                ("MONGOLOAD_CLUSTER__SIZE", "3"),
                ("HOSTNAME", "mongoload-1"),
            ]),
        )
        .unwrap();
        assert_eq!(pod.cluster.member(), Member { index: 1, size: 3 });
        assert_eq!(
            crate::daemon::supervisor::restart_only_change(&two, &pod),
            Some("cluster")
        );
        let e = crate::config::parse_with_env(
            text,
            path,
            env(&[
                ("MONGOLOAD_CLUSTER__SIZE", "3"),
                ("MONGOLOAD_CLUSTER__INDEX", "3"),
            ]),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("m.toml: cluster.index: 3 is out of range"),
            "{e}"
        );
        assert!(e.ends_with("(set by MONGOLOAD_CLUSTER__INDEX)"), "{e}");
    }

    #[test]
    fn the_hostname_prefers_the_environment() {
        assert_eq!(
            hostname(Some("mongoload-1\n".into())).as_deref(),
            Some("mongoload-1")
        );
        assert!(hostname(None).is_some_and(|h| !h.is_empty()));
    }
}
