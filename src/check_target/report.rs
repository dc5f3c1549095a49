//! The `check-target` report: what was found, as one serializable value
//! that renders as text for a person and as JSON for a script, and the
//! exit status it implies. Pure: built by the probes, tested on values.

use std::fmt::Write as _;

use serde::Serialize;

use super::plan::{human_bytes, WorkloadPlan};
use crate::exit::Exit;

/// Exit statuses (sysexits): ready, unreachable, refused, config.
pub(crate) const EXIT_READY: u8 = Exit::Ok.code();
pub(crate) const EXIT_UNREACHABLE: u8 = Exit::Unavailable.code();
pub(crate) const EXIT_REFUSED: u8 = Exit::Refused.code();
pub(crate) const EXIT_CONFIG: u8 = Exit::Config.code();
/// Anything else that failed (an unexpected server error).
pub(crate) const EXIT_FAILED: u8 = Exit::Failure.code();

/// The state of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Ok,
    /// Refused by the deployment (authentication, privileges).
    Refused,
    /// Not reached (network, TLS, timeouts).
    Unreachable,
    /// Another failure.
    Failed,
    /// Not run, because an earlier check failed.
    Skipped,
}

impl Status {
    fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Refused => "REFUSED",
            Status::Unreachable => "UNREACHABLE",
            Status::Failed => "FAILED",
            Status::Skipped => "skipped",
        }
    }
}

/// Where the load goes.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct TargetInfo {
    /// The connection string with the password replaced by `***`.
    pub uri: String,
    pub hosts: Vec<String>,
    pub database: String,
    pub tls: bool,
}

/// Whether the deployment answered.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Reachability {
    pub status: Status,
    /// The time the `hello` took, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub round_trip_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Whether the credentials were accepted.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Authentication {
    /// `ok`, `refused`, `skipped`; `none` when the URI has no user.
    pub status: AuthStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// As the URI names it, else `negotiated`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mechanism: Option<String>,
    /// The SCRAM mechanisms the server offers this user (`saslSupportedMechs`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub server_mechanisms: Vec<String>,
    /// `role@db` from `connectionStatus`; `None` when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub roles: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum AuthStatus {
    Ok,
    None,
    Refused,
    Skipped,
}

/// What `hello` says about the deployment's shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub(crate) struct Topology {
    /// `standalone`, `replica_set`, `sharded` (mongos) or `unknown`.
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_name: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,
    /// The member that answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub me: Option<String>,
}

/// The write concern the load's writes carry.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct WriteConcernInfo {
    /// `target.write_concern` when the config sets it, else `uri` when the
    /// connection string does, else `server_default`.
    pub source: String,
    /// e.g. `w=majority, j=true`; `unknown` for a server default, which
    /// only an admin command (getDefaultRWConcern) would tell; then the
    /// workloads that set their own (`; workloads' own: mix: w=1`).
    pub effective: String,
}

/// One step of the `readWrite` check on a scratch collection.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PrivilegeStep {
    pub step: String,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Whether `readWrite` on the database is enough for the workloads.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Privileges {
    pub status: Status,
    /// `database.collection` of the scratch collection.
    pub collection: String,
    pub steps: Vec<PrivilegeStep>,
}

/// Everything `check-target` found.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Report {
    pub ready: bool,
    pub exit_code: u8,
    /// One line: `ready`, or what stops the load.
    pub verdict: String,
    pub config: String,
    pub target: TargetInfo,
    pub reachable: Reachability,
    pub authentication: Authentication,
    /// The server's version (`buildInfo`), `None` when not reached.
    pub server_version: Option<String>,
    pub topology: Option<Topology>,
    pub write_concern: WriteConcernInfo,
    pub privileges: Option<Privileges>,
    pub prepare: Vec<WorkloadPlan>,
    /// On a mongos, or for a plan with a `shard_key`: shards, balancer,
    /// the collections' sharding and the privileges it needs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sharding: Option<crate::sharding::check_target::Sharding>,
}

impl Report {
    /// Fills in `ready`, `exit_code` and `verdict` from the checks: the
    /// first failure in the order of the checks decides.
    pub(crate) fn conclude(&mut self) {
        let (code, verdict) = if self.reachable.status != Status::Ok {
            let reason = self.reachable.error.as_deref().unwrap_or("no answer");
            (EXIT_UNREACHABLE, format!("unreachable: {reason}"))
        } else if self.authentication.status == AuthStatus::Refused {
            let who = self.authentication.user.as_deref().unwrap_or("(no user)");
            (
                EXIT_REFUSED,
                format!("authentication refused for user '{who}'"),
            )
        } else {
            match self.privileges.as_ref().map(|p| (p.status, p.steps.last())) {
                Some((Status::Ok, _)) | None => (EXIT_READY, "ready".to_owned()),
                Some((status, step)) => {
                    let step = step.map_or("", |s| s.step.as_str());
                    match status {
                        Status::Refused => (
                            EXIT_REFUSED,
                            format!(
                                "privilege refused: {step} (readWrite on the database is needed)"
                            ),
                        ),
                        Status::Unreachable => (
                            EXIT_UNREACHABLE,
                            format!("unreachable during the privilege check ({step})"),
                        ),
                        _ => (EXIT_FAILED, format!("privilege check failed at {step}")),
                    }
                }
            }
        };
        let (code, verdict) = match self.sharding.as_ref().and_then(|s| s.blocker()) {
            Some(blocker) if code == EXIT_READY => blocker,
            _ => (code, verdict),
        };
        self.exit_code = code;
        self.ready = code == EXIT_READY;
        self.verdict = verdict;
    }

    /// The report for a person.
    pub(crate) fn render(&self) -> String {
        let mut out = String::new();
        let mut line = |label: &str, text: &str| {
            let _ = writeln!(out, "  {label:<15}{text}");
        };
        line("config", &self.config);
        let t = &self.target;
        line(
            "target",
            &format!(
                "{} (database {}{})",
                t.uri,
                t.database,
                if t.tls { ", TLS" } else { "" }
            ),
        );
        let r = &self.reachable;
        line(
            "reachable",
            &match (r.status, r.round_trip_ms, &r.error) {
                (Status::Ok, Some(ms), _) => {
                    format!("yes ({ms:.1} ms to connect, log in and answer hello)")
                }
                (Status::Ok, None, _) => "yes".to_owned(),
                (_, _, Some(e)) => format!("NO: {e}"),
                _ => "NO".to_owned(),
            },
        );
        line("authentication", &render_auth(&self.authentication));
        line(
            "server",
            self.server_version.as_deref().unwrap_or("unknown"),
        );
        line(
            "topology",
            &self
                .topology
                .as_ref()
                .map_or("unknown".to_owned(), render_topology),
        );
        line(
            "write concern",
            &format!(
                "{} ({})",
                self.write_concern.effective,
                self.write_concern.source.replace('_', " ")
            ),
        );
        line(
            "readWrite",
            &self
                .privileges
                .as_ref()
                .map_or("skipped".to_owned(), render_privileges),
        );
        if let Some(s) = &self.sharding {
            s.render(&mut line);
        }
        if self.prepare.is_empty() {
            line("prepare", "no workloads");
        }
        for (i, w) in self.prepare.iter().enumerate() {
            line(
                if i == 0 { "prepare" } else { "" },
                &render_plan(w, &t.database),
            );
        }
        let _ = writeln!(out, "{} (exit {})", self.verdict, self.exit_code);
        out
    }
}

fn render_auth(a: &Authentication) -> String {
    let who = || {
        let mut s = format!(
            "user {} (authSource {}, {}",
            a.user.as_deref().unwrap_or("?"),
            a.source.as_deref().unwrap_or("?"),
            a.mechanism.as_deref().unwrap_or("negotiated"),
        );
        if !a.server_mechanisms.is_empty() {
            let _ = write!(s, "; server offers {}", a.server_mechanisms.join(", "));
        }
        s.push(')');
        s
    };
    match a.status {
        AuthStatus::None => "none (the URI has no user)".to_owned(),
        AuthStatus::Skipped => format!("not tried: {}", who()),
        AuthStatus::Refused => format!(
            "REFUSED: {}: {}",
            who(),
            a.error.as_deref().unwrap_or("authentication failed")
        ),
        AuthStatus::Ok => {
            let roles = match &a.roles {
                Some(r) if r.is_empty() => "; roles: none".to_owned(),
                Some(r) => format!("; roles: {}", r.join(", ")),
                None => "; roles: unknown".to_owned(),
            };
            format!("ok: {}{roles}", who())
        }
    }
}

fn render_topology(t: &Topology) -> String {
    match t.kind.as_str() {
        "replica_set" => format!(
            "replica set {} ({} members: {}; primary {}; answered by {})",
            t.set_name.as_deref().unwrap_or("?"),
            t.members.len(),
            t.members.join(", "),
            t.primary.as_deref().unwrap_or("none"),
            t.me.as_deref().unwrap_or("?"),
        ),
        "sharded" => "sharded cluster (through mongos)".to_owned(),
        other => other.to_owned(),
    }
}

fn render_privileges(p: &Privileges) -> String {
    let steps: Vec<&str> = p
        .steps
        .iter()
        .filter(|s| s.status == Status::Ok)
        .map(|s| s.step.as_str())
        .collect();
    match p.steps.iter().find(|s| s.status != Status::Ok) {
        None => format!("ok: {} in {}", steps.join(", "), p.collection),
        Some(bad) => format!(
            "{} at {} in {}: {}",
            bad.status.word(),
            bad.step,
            p.collection,
            bad.error.as_deref().unwrap_or("?")
        ),
    }
}

fn render_plan(w: &WorkloadPlan, database: &str) -> String {
    let colls: Vec<String> = w
        .collections
        .iter()
        .map(|c| match c.present {
            Some(n) => format!("{database}.{} ({n} already there)", c.name),
            None => format!("{database}.{}", c.name),
        })
        .collect();
    format!(
        "{} ({}): {} documents, ≈ {}, {} index{} in {}",
        w.workload,
        w.kind,
        w.documents,
        human_bytes(w.bytes),
        w.indexes,
        if w.indexes == 1 { "" } else { "es" },
        colls.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check_target::plan::CollectionPlan;

    fn report() -> Report {
        Report {
            ready: false,
            exit_code: 255,
            verdict: String::new(),
            config: "/etc/mongoload/mongoload.toml".into(),
            target: TargetInfo {
                uri: "mongodb://app:***@db1:27017/".into(),
                hosts: vec!["db1:27017".into()],
                database: "load".into(),
                tls: true,
            },
            reachable: Reachability {
                status: Status::Ok,
                round_trip_ms: Some(1.25),
                error: None,
            },
            authentication: Authentication {
                status: AuthStatus::Ok,
                user: Some("app".into()),
                source: Some("admin".into()),
                mechanism: None,
                server_mechanisms: vec!["SCRAM-SHA-1".into(), "SCRAM-SHA-256".into()],
                roles: Some(vec!["readWrite@load".into()]),
                error: None,
            },
            server_version: Some("7.0.2".into()),
            topology: Some(Topology {
                kind: "replica_set".into(),
                set_name: Some("rs0".into()),
                members: vec!["db1:27017".into(), "db2:27017".into()],
                primary: Some("db1:27017".into()),
                me: Some("db1:27017".into()),
            }),
            write_concern: WriteConcernInfo {
                source: "uri".into(),
                effective: "w=majority".into(),
            },
            privileges: Some(Privileges {
                status: Status::Ok,
                collection: "load.scratch".into(),
                steps: vec![PrivilegeStep {
                    step: "create".into(),
                    status: Status::Ok,
                    error: None,
                }],
            }),
            prepare: vec![WorkloadPlan {
                workload: "w".into(),
                kind: "mixed".into(),
                documents: 10,
                bytes: 2048,
                indexes: 1,
                collections: vec![CollectionPlan {
                    name: "m".into(),
                    documents: 10,
                    bytes: 2048,
                    indexes: 1,
                    present: Some(4),
                }],
            }],
            sharding: None,
        }
    }

    #[test]
    fn a_clean_report_is_ready() {
        let mut r = report();
        r.conclude();
        assert_eq!(
            (r.ready, r.exit_code, r.verdict.as_str()),
            (true, 0, "ready")
        );
        let text = r.render();
        for want in [
            "  target         mongodb://app:***@db1:27017/ (database load, TLS)\n",
            "  reachable      yes (1.2 ms to connect, log in and answer hello)\n",
            "  authentication ok: user app (authSource admin, negotiated; server offers SCRAM-SHA-1, SCRAM-SHA-256); roles: readWrite@load\n",
            "  topology       replica set rs0 (2 members: db1:27017, db2:27017; primary db1:27017; answered by db1:27017)\n",
            "  write concern  w=majority (uri)\n",
            "  readWrite      ok: create in load.scratch\n",
            "  prepare        w (mixed): 10 documents, ≈ 2.0 KiB, 1 index in load.m (4 already there)\n",
            "ready (exit 0)\n",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
    }

    #[test]
    fn the_first_failure_decides_the_exit_code() {
        let mut r = report();
        r.privileges.as_mut().unwrap().status = Status::Refused;
        r.privileges.as_mut().unwrap().steps[0].status = Status::Refused;
        r.conclude();
        assert_eq!(r.exit_code, EXIT_REFUSED);
        assert!(
            r.verdict.starts_with("privilege refused: create"),
            "{}",
            r.verdict
        );

        r.authentication.status = AuthStatus::Refused;
        r.conclude();
        assert_eq!(
            (r.exit_code, r.verdict.as_str()),
            (EXIT_REFUSED, "authentication refused for user 'app'")
        );

        r.reachable.status = Status::Unreachable;
        r.reachable.error = Some("TLS: bad certificate".into());
        r.conclude();
        assert_eq!(
            (r.exit_code, r.verdict.as_str(), r.ready),
            (EXIT_UNREACHABLE, "unreachable: TLS: bad certificate", false)
        );
    }

    #[test]
    fn json_names_every_part() {
        let mut r = report();
        r.conclude();
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["ready"], true);
        assert_eq!(v["authentication"]["status"], "ok");
        assert_eq!(v["topology"]["kind"], "replica_set");
        assert_eq!(v["prepare"][0]["collections"][0]["present"], 4);
        assert_eq!(v["privileges"]["steps"][0]["status"], "ok");
    }
}
