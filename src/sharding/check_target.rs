//! `check-target`'s sharding section (docs/sharding.md): for a plan with a
//! `shard_key`, whether the target is a mongos, its shards (`listShards`),
//! the balancer (`balancerStatus`), how each workload's collection is or
//! would be sharded (`config.collections`), and whether the user holds the
//! privilege actions sharding needs (`connectionStatus` with
//! `showPrivileges`; "unknown" where the server does not say).

use std::time::Duration;

use mongodb::bson::{doc, Bson, Document};
use mongodb::Client;
use serde::Serialize;

use crate::config::Config;
use crate::mongo::within;
use crate::workload::shard::same_key;

/// The privilege actions sharding a workload's collections uses.
pub(crate) const ACTIONS: [&str; 4] = ["enableSharding", "splitChunk", "moveChunk", "listShards"];

/// Roles that hold every action of [`ACTIONS`].
const ROLES_WITH_ALL: [&str; 4] = ["root", "clusterManager", "clusterAdmin", "__system"];

/// The sharding section of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Sharding {
    /// Whether a workload has a `shard_key`.
    pub needed: bool,
    /// Whether the target answered as a mongos.
    pub mongos: bool,
    /// `listShards`' names; `None` where refused or not a mongos.
    pub shards: Option<Vec<String>>,
    /// `balancerStatus`' `mode` (`full`, `off`), or `unknown`.
    pub balancer: String,
    /// Each privilege action and whether the user has it (`None`: unknown).
    pub actions: Vec<(String, Option<bool>)>,
    /// The commands the server answered it does not have (CommandNotFound,
    /// CommandNotSupported, …), of those tried: `listShards`, and
    /// `enableSharding` where `connectionStatus` did not show its action.
    pub unsupported: Vec<String>,
    /// Whether a workload has a ranged `presplit`, the only user of
    /// `splitChunk`, `moveChunk` and `listShards`.
    pub ranged: bool,
    pub collections: Vec<CollectionSharding>,
}

/// One workload collection: its planned key and what the cluster has.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CollectionSharding {
    pub workload: String,
    pub namespace: String,
    /// The workload's `shard_key` (`None`: unsharded by the plan).
    pub planned: Option<String>,
    /// `config.collections`' key, `unsharded`, or `unknown`.
    pub current: String,
    /// Sharded on another key than planned: the run would exit 78.
    pub conflict: bool,
}

/// Each workload's collections with their planned key, in config order.
pub(crate) fn planned(
    config: &Config,
) -> Vec<(String, String, Option<crate::workload::shard::ShardKey>)> {
    let db = &config.target.database;
    config
        .workloads
        .iter()
        .flat_map(|w| {
            let names: Vec<String> = w
                .build_with_seed(0)
                .map(|b| b.collections().to_vec())
                .unwrap_or_default();
            names
                .into_iter()
                .map(move |c| (w.name.clone(), format!("{db}.{c}"), w.shard_key.clone()))
        })
        .collect()
}

/// Whether the user has each of [`ACTIONS`], from a `connectionStatus`
/// reply with `showPrivileges: true`: `authenticatedUserPrivileges` where
/// the server lists them, else a role that holds them all; `None` where
/// neither says (no user, or privileges not shown).
pub(crate) fn actions(status: Option<&Document>, database: &str) -> Vec<(String, Option<bool>)> {
    let auth = status.and_then(|s| s.get_document("authInfo").ok());
    let roles: Vec<&str> = auth
        .and_then(|a| a.get_array("authenticatedUserRoles").ok())
        .map(|r| {
            r.iter()
                .filter_map(|r| r.as_document()?.get_str("role").ok())
                .collect()
        })
        .unwrap_or_default();
    let privileges = auth.and_then(|a| a.get_array("authenticatedUserPrivileges").ok());
    ACTIONS
        .iter()
        .map(|action| {
            let granted =
                if roles.iter().any(|r| ROLES_WITH_ALL.contains(r)) {
                    Some(true)
                } else {
                    privileges.map(|p| {
                        p.iter().filter_map(Bson::as_document).any(|p| {
                    let applies = match p.get_document("resource") {
                        Ok(r) if r.get_bool("cluster") == Ok(true) => *action == "listShards",
                        Ok(r) => matches!(r.get_str("db"), Ok(d) if d.is_empty() || d == database),
                        Err(_) => false,
                    };
                    applies
                        && p.get_array("actions")
                            .is_ok_and(|a| a.iter().any(|x| x.as_str() == Some(action)))
                })
                    })
                };
            (action.to_string(), granted)
        })
        .collect()
}

/// The `current` text and conflict of a collection from its
/// `config.collections` document (`None`: not there).
pub(crate) fn current(
    found: Option<&Document>,
    planned: Option<&crate::workload::shard::ShardKey>,
) -> (String, bool) {
    match found.and_then(|d| d.get_document("key").ok()) {
        None => ("unsharded".to_owned(), false),
        Some(key) => (key.to_string(), planned.is_some_and(|p| !same_key(key, p))),
    }
}

impl Sharding {
    /// What stops a sharded plan here: the exit status and the verdict.
    pub(crate) fn blocker(&self) -> Option<(u8, String)> {
        if !self.needed {
            return None;
        }
        if !self.mongos {
            return Some((
                crate::exit::Exit::Config.code(),
                "a workload has shard_key, but the target is not a mongos".to_owned(),
            ));
        }
        if let Some(c) = self.collections.iter().find(|c| c.conflict) {
            return Some((
                crate::exit::Exit::Config.code(),
                format!(
                    "{} is sharded on {}, but workload {:?} has shard_key {}",
                    c.namespace,
                    c.current,
                    c.workload,
                    c.planned.as_deref().unwrap_or("")
                ),
            ));
        }
        if let Some(c) = self
            .unsupported
            .iter()
            .find(|c| self.ranged && *c == "listShards")
        {
            return Some((
                crate::exit::Exit::Unsupported.code(),
                format!("not supported by this server: {c} (a ranged presplit needs it)"),
            ));
        }
        self.actions
            .iter()
            .find(|(a, g)| *g == Some(false) && self.needs(a))
            .map(|(a, _)| {
                (
                    crate::exit::Exit::Refused.code(),
                    format!("privilege refused: {a} (sharding the plan's collections needs it)"),
                )
            })
    }

    /// Whether the user has privilege action `action`, as known so far.
    pub(crate) fn granted(&self, action: &str) -> Option<bool> {
        self.actions
            .iter()
            .find(|(a, _)| a == action)
            .and_then(|(_, g)| *g)
    }

    /// What command `command` (of the privilege action of the same name)
    /// answered: done (the action granted), refused (not granted), not
    /// supported by the server; another failure leaves what was known.
    pub(crate) fn answered(&mut self, command: &str, error: Option<&mongodb::error::Error>) {
        use crate::error_kind::{permanent, Permanent};
        let granted = match error.map(permanent) {
            None => Some(true),
            Some(Some(Permanent::Refused)) => Some(false),
            Some(Some(Permanent::Unsupported)) => {
                self.unsupported.push(command.to_owned());
                return;
            }
            Some(None) => return,
        };
        if let Some((_, g)) = self.actions.iter_mut().find(|(a, _)| a == command) {
            *g = granted;
        }
    }

    /// Whether the plan needs privilege action `action`: `enableSharding`
    /// (`shardCollection` asks for it) unless the server has no such
    /// command, the others for a ranged presplit only.
    fn needs(&self, action: &str) -> bool {
        !self.unsupported.iter().any(|c| c == action) && (action == "enableSharding" || self.ranged)
    }

    /// The lines of the text report.
    pub(crate) fn render(&self, line: &mut dyn FnMut(&str, &str)) {
        if !self.mongos {
            if self.needed {
                line(
                    "sharding",
                    "needed by the plan, but the target is not a mongos",
                );
            }
            return;
        }
        line(
            "shards",
            &self.shards.as_ref().map_or("unknown".to_owned(), |s| {
                format!("{} ({})", s.len(), s.join(", "))
            }),
        );
        line("balancer", &self.balancer);
        for (i, c) in self.collections.iter().enumerate() {
            line(
                if i == 0 { "sharding" } else { "" },
                &format!(
                    "{}: now {}{}",
                    c.namespace,
                    c.current,
                    match &c.planned {
                        Some(k) if c.conflict => format!(", planned {k}: CONFLICT"),
                        Some(k) => format!(", planned {k}"),
                        None => String::new(),
                    }
                ),
            );
        }
        if self.needed {
            let text: Vec<String> = self
                .actions
                .iter()
                .map(|(a, g)| {
                    let answer = match g {
                        _ if self.unsupported.contains(a) => "not supported by this server",
                        Some(true) => "yes",
                        Some(false) if self.needs(a) => "NO",
                        Some(false) => "no (not needed)",
                        None => "unknown",
                    };
                    format!("{a} {answer}")
                })
                .collect();
            line("shard privs", &text.join(", "));
        }
    }
}

/// `balancerStatus`' mode from its reply.
pub(crate) fn balancer_mode(reply: Option<&Document>) -> String {
    reply
        .and_then(|r| r.get_str("mode").ok())
        .map_or("unknown".to_owned(), |m| {
            let rounds = reply
                .and_then(|r| r.get("numBalancerRounds").cloned())
                .map(|n| format!(", {n} rounds"))
                .unwrap_or_default();
            format!("{m}{rounds}")
        })
}

/// A `connectionStatus` command that lists the privileges.
pub(crate) fn connection_status() -> Document {
    doc! { "connectionStatus": 1, "showPrivileges": true }
}

/// The sharding section: for a plan with a `shard_key`, or on a mongos
/// (`mongos`: the target is one). Each command gets at most `timeout`.
pub(crate) async fn section(
    (client, timeout): (&Client, Duration),
    config: &Config,
    mongos: bool,
    database: &str,
) -> Option<Sharding> {
    let planned = planned(config);
    let needed = planned.iter().any(|(_, _, k)| k.is_some());
    if !needed && !mongos {
        return None;
    }
    let admin = client.database("admin");
    let status = within(timeout, admin.run_command(connection_status()))
        .await
        .ok();
    let ranged = config.workloads.iter().any(|w| {
        matches!(
            w.shard_plan(),
            Ok(Some(p)) if matches!(p.presplit, crate::workload::shard::Presplit::Ranged(_))
        )
    });
    let mut s = Sharding {
        needed,
        mongos,
        shards: None,
        balancer: "unknown".to_owned(),
        actions: actions(status.as_ref(), database),
        unsupported: Vec::new(),
        ranged,
        collections: Vec::new(),
    };
    if !mongos {
        return Some(s);
    }
    // What the server answers tells a refusal from a command it does
    // not have, where connectionStatus cannot (a server without
    // enableSharding lists no such action): listShards, read-only, and
    // enableSharding on the target database where its action is not
    // shown granted (what a run before MongoDB 6.0 does at prepare).
    let list = within(timeout, admin.run_command(doc! {"listShards": 1})).await;
    s.answered("listShards", list.as_ref().err());
    s.shards = list.ok().map(|r| crate::workload::shard::shard_names(&r));
    if needed && s.granted("enableSharding") != Some(true) {
        let enable = within(
            timeout,
            admin.run_command(doc! {"enableSharding": database}),
        )
        .await;
        s.answered("enableSharding", enable.as_ref().err());
    }
    let balancer = within(timeout, admin.run_command(doc! {"balancerStatus": 1}))
        .await
        .ok();
    s.balancer = balancer_mode(balancer.as_ref());
    let colls = client
        .database("config")
        .collection::<Document>("collections");
    for (workload, ns, key) in planned {
        let (current, conflict) = match within(timeout, colls.find_one(doc! {"_id": &ns})).await {
            Ok(found) => current(found.as_ref(), key.as_ref()),
            Err(_) => ("unknown".to_owned(), false),
        };
        s.collections.push(CollectionSharding {
            workload,
            namespace: ns,
            planned: key.map(|k| k.to_string()),
            current,
            conflict,
        });
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::shard::{KeyDir, ShardKey};

    #[test]
    fn actions_come_from_privileges_or_a_role_that_has_them_all() {
        let root = doc! {"authInfo": {"authenticatedUserRoles": [{"role": "root", "db": "admin"}]}};
        assert!(actions(Some(&root), "db")
            .iter()
            .all(|(_, g)| *g == Some(true)));
        let rw = doc! {"authInfo": {
            "authenticatedUserRoles": [{"role": "readWrite", "db": "db"}],
            "authenticatedUserPrivileges": [
                {"resource": {"db": "db", "collection": ""}, "actions": ["find", "insert", "enableSharding"]},
                {"resource": {"cluster": true}, "actions": ["listShards"]},
            ],
        }};
        let a = actions(Some(&rw), "db");
        assert_eq!(
            a,
            vec![
                ("enableSharding".to_owned(), Some(true)),
                ("splitChunk".to_owned(), Some(false)),
                ("moveChunk".to_owned(), Some(false)),
                ("listShards".to_owned(), Some(true)),
            ]
        );
        // Another database's grant does not count.
        assert_eq!(actions(Some(&rw), "other")[0].1, Some(false));
        // No privileges shown, no role that says: unknown.
        let plain =
            doc! {"authInfo": {"authenticatedUserRoles": [{"role": "readWrite", "db": "db"}]}};
        assert!(actions(Some(&plain), "db").iter().all(|(_, g)| g.is_none()));
        assert!(actions(None, "db").iter().all(|(_, g)| g.is_none()));
    }

    #[test]
    fn the_blocker_is_the_topology_then_a_conflict_then_a_privilege() {
        let key = ShardKey::of(&[("_id", KeyDir::Hashed)]);
        let (now, conflict) = current(Some(&doc! {"_id": "d.m", "key": {"k": 1}}), Some(&key));
        assert!(conflict, "{now}");
        assert_eq!(current(None, Some(&key)), ("unsharded".to_owned(), false));
        let mut s = Sharding {
            needed: true,
            mongos: false,
            shards: None,
            balancer: "unknown".into(),
            actions: vec![("moveChunk".into(), Some(false))],
            unsupported: vec![],
            ranged: true,
            collections: vec![CollectionSharding {
                workload: "w".into(),
                namespace: "d.m".into(),
                planned: Some(key.to_string()),
                current: now,
                conflict,
            }],
        };
        assert_eq!(s.blocker().unwrap().0, 78);
        s.mongos = true;
        let (code, why) = s.blocker().unwrap();
        assert_eq!(code, 78);
        assert!(
            why.contains("sharded on {") && why.contains("{ _id: \"hashed\" }"),
            "{why}"
        );
        s.collections[0].conflict = false;
        assert_eq!(
            s.blocker().unwrap(),
            (
                77,
                "privilege refused: moveChunk (sharding the plan's collections needs it)"
                    .to_owned()
            )
        );
        // Without a ranged presplit moveChunk is not needed.
        s.ranged = false;
        assert_eq!(s.blocker(), None);
        // A command the server does not have is no refusal: a blocker only
        // where the plan needs it.
        s.actions = vec![
            ("enableSharding".into(), Some(false)),
            ("listShards".into(), Some(false)),
        ];
        s.unsupported = vec!["enableSharding".into(), "listShards".into()];
        assert_eq!(s.blocker(), None);
        let mut lines = Vec::new();
        s.render(&mut |k, v| lines.push(format!("{k} {v}")));
        assert!(
            lines.contains(&"shard privs enableSharding not supported by this server, listShards not supported by this server".to_owned()),
            "{lines:?}"
        );
        s.ranged = true;
        assert_eq!(
            s.blocker(),
            Some((
                76,
                "not supported by this server: listShards (a ranged presplit needs it)".to_owned()
            ))
        );
        s.needed = false;
        assert_eq!(s.blocker(), None);
    }
}
