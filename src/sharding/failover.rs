//! Failovers per shard: through a mongos the driver sees only routers, so
//! a shard's primary stepping down shows to the load as writes failing
//! through the router. Here, when the target is a mongos, `listShards`
//! names each shard's replica set (`name/host:port,...`), and for each a
//! driver client that only monitors (its SDAM events: `hello` needs no
//! authentication; the target's TLS options and timeouts, no credentials,
//! no connection pool warmed, no operation ever run) feeds
//! [`crate::failover::Failover::on_shard_topology`]: each shard's primary
//! changes and periods without one become failovers naming the shard
//! (stage reports, run log, `/status`, the audits' `failover` trigger) and
//! the `mongoload_shard_*` failover series. The write failures the workers
//! see through the router are attributed to the shard whose period
//! without a primary they fall in ([`crate::failover::shards`]).
//!
//! `listShards` needs more than `readWrite` (`clusterMonitor`): refused,
//! the shards' failovers are unknown (one log line, no series, the task
//! ends); nothing in the load path depends on this task. A standalone
//! shard (a host without a set name) cannot fail over and is not watched.

use std::sync::Arc;
use std::time::Duration;

use mongodb::bson::{doc, Document};
use mongodb::options::{ClientOptions, ServerAddress};
use tokio_util::sync::CancellationToken;

use crate::failover::Failover;

/// How long between tries of `hello` and `listShards` while the target
/// does not answer.
const RETRY: Duration = Duration::from_secs(2);
/// How often the shards' ended periods without a primary are settled.
const SETTLE: Duration = Duration::from_secs(1);

/// One shard's replica set, from `listShards`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ShardSet {
    /// The shard's name (`_id`): the `shard` label.
    pub shard: String,
    /// Its replica set's name.
    pub set: String,
    /// Its members' `host:port`.
    pub hosts: Vec<String>,
}

/// The shards of a `listShards` reply that are replica sets (`host` is
/// `set/host:port,...`); standalone shards are left out.
pub(crate) fn shard_sets(reply: &Document) -> Vec<ShardSet> {
    let Ok(shards) = reply.get_array("shards") else {
        return Vec::new();
    };
    shards
        .iter()
        .filter_map(|s| {
            let s = s.as_document()?;
            let shard = s.get_str("_id").ok()?;
            let (set, hosts) = s.get_str("host").ok()?.split_once('/')?;
            let hosts: Vec<String> = hosts
                .split(',')
                .map(str::trim)
                .filter(|h| !h.is_empty())
                .map(str::to_owned)
                .collect();
            (!set.is_empty() && !hosts.is_empty()).then(|| ShardSet {
                shard: shard.to_owned(),
                set: set.to_owned(),
                hosts,
            })
        })
        .collect()
}

/// The options of a monitoring-only client of `shard`: its members as
/// seeds, its set's name, `target`'s TLS, timeouts and server API; no
/// credentials, no pool kept warm.
pub(crate) fn monitor_options(
    target: &ClientOptions,
    shard: &ShardSet,
) -> Result<ClientOptions, String> {
    let hosts = shard
        .hosts
        .iter()
        .map(|h| {
            ServerAddress::parse(h).map_err(|e| format!("shard {}: host {h:?}: {e}", shard.shard))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut options = ClientOptions::builder()
        .hosts(hosts)
        .repl_set_name(shard.set.clone())
        .app_name(format!("mongoload shard monitor {}", shard.shard))
        .connect_timeout(target.connect_timeout)
        .server_selection_timeout(target.server_selection_timeout)
        .tls(target.tls.clone())
        .server_api(target.server_api.clone())
        .min_pool_size(0)
        .build();
    options.heartbeat_freq = target.heartbeat_freq;
    Ok(options)
}

/// Whether a failed command is a refusal (13 Unauthorized): the user may
/// not list the shards.
/// The shards' replica sets through the mongos at `admin`; none when the
/// target is not a mongos or may not list them (logged once). Asked again
/// while the target does not answer.
async fn shards(admin: &mongodb::Database, stop: &CancellationToken) -> Option<Vec<ShardSet>> {
    let mut logged = false;
    loop {
        let reply = async {
            let hello = admin.run_command(doc! {"hello": 1}).await?;
            if !crate::sharding::documents::is_mongos(&hello) {
                return Ok(None);
            }
            admin.run_command(doc! {"listShards": 1}).await.map(Some)
        };
        let result = tokio::select! {
            () = stop.cancelled() => return None,
            r = reply => r,
        };
        match result {
            Ok(None) => return None,
            Ok(Some(reply)) => return Some(shard_sets(&reply)),
            Err(e) if crate::error_kind::is_unauthorized(&e) => {
                tracing::warn!(
                    "shard failovers unknown: listShards refused ({}); the user needs clusterMonitor for them, the load is not affected",
                    crate::error_kind::explain(&e)
                );
                return None;
            }
            Err(e) => {
                if !logged {
                    tracing::info!(
                        "shard failovers: the target does not answer yet ({}); asking again every {RETRY:?}",
                        crate::error_kind::explain(&e)
                    );
                    logged = true;
                }
                tokio::select! {
                    () = stop.cancelled() => return None,
                    () = tokio::time::sleep(RETRY) => {}
                }
            }
        }
    }
}

/// Runs until `stop`: spawn it as a task. `uri`: the target's connection
/// string (its TLS options and timeouts go to the shards' monitors);
/// `admin`: the daemon's client's `admin` database.
pub(crate) async fn run(
    uri: String,
    admin: mongodb::Database,
    failover: Arc<Failover>,
    timeouts: crate::mongo::Timeouts,
    stop: CancellationToken,
) {
    let Some(sets) = shards(&admin, &stop).await else {
        return;
    };
    if sets.is_empty() {
        tracing::info!("shard failovers: no shard is a replica set, none to watch");
        return;
    }
    let mut target = match ClientOptions::parse(&uri).await {
        Ok(o) => o,
        Err(e) => {
            tracing::warn!(
                "shard failovers unknown: {}",
                crate::uri::scrub(&e.to_string(), &uri)
            );
            return;
        }
    };
    target.connect_timeout = Some(timeouts.connect);
    target.server_selection_timeout = Some(timeouts.server_selection);
    let mut clients = Vec::new();
    for s in &sets {
        let built = monitor_options(&target, s).and_then(|mut o| {
            o.sdam_event_handler = Some(crate::failover::driver_events::shard_sdam_handler(
                &failover,
                s.shard.clone(),
            ));
            mongodb::Client::with_options(o).map_err(|e| e.to_string())
        });
        match built {
            Ok(c) => clients.push(c),
            Err(e) => tracing::warn!(shard = %s.shard, "shard {} failovers unknown: {e}", s.shard),
        }
    }
    let names: Vec<&str> = sets.iter().map(|s| s.shard.as_str()).collect();
    tracing::info!(
        shards = %names.join(","),
        "shard failovers: watching each shard's replica set ({})",
        names.join(", ")
    );
    let mut settle = tokio::time::interval(SETTLE);
    settle.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop.cancelled() => break,
            _ = settle.tick() => failover.settle_shards(),
        }
    }
    failover.settle_shards();
    // The monitors hold no session and no pool: dropping them is enough.
    drop(clients);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_set_shards_are_read_from_list_shards() {
        let reply = doc! {"shards": [
            {"_id": "shard0", "host": "shard0/a:1,b:2", "state": 1},
            {"_id": "shard1", "host": "c:3"},
            {"_id": "shard2", "host": "rs2/d:4"},
        ], "ok": 1};
        let sets = shard_sets(&reply);
        assert_eq!(
            sets,
            vec![
                ShardSet {
                    shard: "shard0".into(),
                    set: "shard0".into(),
                    hosts: vec!["a:1".into(), "b:2".into()]
                },
                ShardSet {
                    shard: "shard2".into(),
                    set: "rs2".into(),
                    hosts: vec!["d:4".into()]
                },
            ]
        );
        assert!(shard_sets(&doc! {"ok": 1}).is_empty());
    }

    #[test]
    fn a_monitor_has_the_targets_tls_and_no_credentials() {
        let target = ClientOptions::builder()
            .credential(
                mongodb::options::Credential::builder()
                    .username("u".to_owned())
                    .password("p".to_owned())
                    .build(),
            )
            .tls(mongodb::options::Tls::Enabled(Default::default()))
            .connect_timeout(Duration::from_secs(3))
            .build();
        let set = ShardSet {
            shard: "s".into(),
            set: "rs".into(),
            hosts: vec!["h:27018".into()],
        };
        let o = monitor_options(&target, &set).unwrap();
        assert!(o.credential.is_none());
        assert_eq!(o.tls, target.tls);
        assert_eq!(o.repl_set_name.as_deref(), Some("rs"));
        assert_eq!(o.connect_timeout, Some(Duration::from_secs(3)));
        assert_eq!(o.min_pool_size, Some(0));
        assert_eq!(o.hosts.len(), 1);
        let bad = ShardSet {
            hosts: vec!["h:notaport".into()],
            ..set
        };
        assert!(monitor_options(&target, &bad)
            .unwrap_err()
            .contains("h:notaport"));
    }
}
