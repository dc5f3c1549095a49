//! `mongoload check-target`: before the unit is enabled, connects with the
//! config's URI (or `uri_file`) and reports whether the deployment answers,
//! accepts the credentials, what it is (version, topology from `hello`),
//! the write concern the load will use, whether `readWrite` on the
//! database is enough (a scratch collection and index created and dropped)
//! and what the prepare steps will write. Never needs an admin command:
//! what only one would tell says "unknown". Exit 0 ready, 69 unreachable,
//! 77 authentication or privilege refused, 78 config.

pub(crate) mod plan;
pub(crate) mod report;

use std::future::IntoFuture;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mongodb::bson::{doc, Bson, Document};
use mongodb::error::{Error, ErrorKind as DriverKind};
use mongodb::event::sdam::SdamEvent;
use mongodb::event::EventHandler;
use mongodb::options::{Acknowledgment, ClientOptions, Tls, WriteConcern};
use mongodb::{Client, IndexModel};
use rand::Rng;

use crate::config::scrub;
use crate::config::{self, uri_hosts, uri_user, Config, UriUser};
use crate::error_kind::ErrorKind;
use crate::error_kind::{classify, explain};
use crate::sharding::check_target::section as sharding_section;
use report::{
    AuthStatus, Authentication, PrivilegeStep, Privileges, Reachability, Report, Status,
    TargetInfo, Topology, WriteConcernInfo, EXIT_CONFIG,
};

/// `mongoload check-target` options.
#[derive(Debug, clap::Args)]
pub struct CheckTargetArgs {
    #[command(flatten)]
    pub config: crate::config::ConfigArg,
    /// Print the report as one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// Runs the checks and prints the report; the exit status says the verdict.
pub(crate) async fn run_cli(args: CheckTargetArgs) -> ExitCode {
    let path = args.config.path();
    let report = match config::load(&path) {
        Ok(config) => check(&config, &path).await,
        Err(e) => Err(e.to_string()),
    };
    match report {
        Ok(report) => {
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report).unwrap_or_default()
                );
            } else {
                print!("{}", report.render());
            }
            ExitCode::from(report.exit_code)
        }
        Err(reason) => {
            if args.json {
                let v = serde_json::json!({
                    "ready": false,
                    "exit_code": EXIT_CONFIG,
                    "verdict": format!("invalid config: {reason}"),
                    "config": path.display().to_string(),
                });
                println!("{v:#}");
            }
            eprintln!("mongoload check-target: invalid config: {reason}");
            ExitCode::from(EXIT_CONFIG)
        }
    }
}

/// Runs every check against the deployment of `config` (read from `path`).
/// `Err` is a config problem (exit 78), with the reason; every other
/// finding is in the report.
pub(crate) async fn check(config: &Config, path: &Path) -> Result<Report, String> {
    let uri = config.target.resolve_uri().map_err(|e| e.to_string())?;
    let prepare = plan::prepare_plan(config).map_err(|e| e.to_string())?;
    let user = uri_user(uri.expose());
    // A `mongodb+srv` name that does not resolve is a target that cannot
    // be reached (69), as `run` says too, not a config error.
    let (mut options, unresolved) = match ClientOptions::parse(uri.expose()).await {
        Ok(options) => (options, None),
        Err(e)
            if matches!(
                e.kind.as_ref(),
                DriverKind::DnsResolve { .. } | DriverKind::Io(_)
            ) =>
        {
            let mut options = ClientOptions::default();
            if uri.expose().starts_with("mongodb+srv://") {
                options.tls = Some(Tls::Enabled(Default::default()));
            }
            (options, Some(scrub(&explain(&e), uri.expose())))
        }
        Err(e) => return Err(format!("target.uri: {}", scrub(&explain(&e), uri.expose()))),
    };
    let last_server_error = Arc::new(Mutex::new(None::<Error>));
    options.app_name = Some(config.target.app_name.clone());
    options.max_pool_size = Some(2);
    options.min_pool_size = None;
    options.connect_timeout = Some(config.target.connect_timeout);
    options.server_selection_timeout = Some(config.target.server_selection_timeout);
    options.sdam_event_handler = Some(remember_server_errors(last_server_error.clone()));
    let mut report = Report {
        ready: false,
        exit_code: 0,
        verdict: String::new(),
        config: path.display().to_string(),
        target: TargetInfo {
            uri: uri.redacted(),
            hosts: uri_hosts(uri.expose()),
            database: config.target.database.clone(),
            tls: matches!(options.tls, Some(Tls::Enabled(_))),
        },
        reachable: Reachability {
            status: Status::Skipped,
            round_trip_ms: None,
            error: None,
        },
        authentication: Authentication {
            status: if user.is_some() {
                AuthStatus::Skipped
            } else {
                AuthStatus::None
            },
            user: user.as_ref().map(|u| u.user.clone()),
            source: user.as_ref().map(|u| u.source.clone()),
            mechanism: user.as_ref().and_then(|u| u.mechanism.clone()),
            server_mechanisms: Vec::new(),
            roles: None,
            error: None,
        },
        server_version: None,
        topology: None,
        write_concern: with_configured_concerns(
            describe_write_concern(options.write_concern.as_ref()),
            config,
        ),
        privileges: None,
        prepare,
        sharding: None,
    };
    if let Some(reason) = unresolved {
        report.reachable.status = Status::Unreachable;
        report.reachable.error = Some(reason);
        report.conclude();
        return Ok(report);
    }
    let client = Client::with_options(options).map_err(|e| scrub(&explain(&e), uri.expose()))?;
    let probe = Probe {
        client: &client,
        timeout: config.target.operation_timeout,
    };
    probe
        .run(&mut report, user.as_ref(), &last_server_error)
        .await;
    if let Some(topology) = &report.topology {
        let (mongos, database) = (topology.kind == "sharded", &report.target.database);
        let client = (probe.client, probe.timeout);
        report.sharding = sharding_section(client, config, mongos, database).await;
    }
    let _ = tokio::time::timeout(Duration::from_secs(2), client.shutdown().immediate(true)).await;
    // An error message may quote the connection string back.
    let secret = uri.expose();
    report.reachable.error = report.reachable.error.map(|e| scrub(&e, secret));
    report.authentication.error = report.authentication.error.map(|e| scrub(&e, secret));
    if let Some(p) = &mut report.privileges {
        for s in &mut p.steps {
            s.error = s.error.take().map(|e| scrub(&e, secret));
        }
    }
    report.conclude();
    Ok(report)
}

/// Keeps the latest error a server description carries (a failed
/// heartbeat, a refused handshake): an operation that then fails server
/// selection says only "no available servers".
fn remember_server_errors(slot: Arc<Mutex<Option<Error>>>) -> EventHandler<SdamEvent> {
    EventHandler::callback(move |event: SdamEvent| {
        let error = match event {
            SdamEvent::ServerHeartbeatFailed(e) => Some(e.failure),
            SdamEvent::ServerDescriptionChanged(c) => c.new_description.error().cloned(),
            _ => None,
        };
        if let Some(e) = error {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
        }
    })
}

struct Probe<'a> {
    client: &'a Client,
    timeout: Duration,
}

impl Probe<'_> {
    /// Runs `call` under the operation timeout.
    async fn bounded<T>(
        &self,
        call: impl IntoFuture<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        crate::mongo::within(self.timeout, call).await
    }

    async fn run(
        &self,
        report: &mut Report,
        user: Option<&UriUser>,
        last_server_error: &Mutex<Option<Error>>,
    ) {
        let admin = self.client.database("admin");
        let mut hello = doc! {"hello": 1};
        if let Some(u) = user {
            hello.insert("saslSupportedMechs", format!("{}.{}", u.source, u.user));
        }
        let started = Instant::now();
        // The first command on a pooled connection: it authenticates.
        let reply = match self.bounded(admin.run_command(hello)).await {
            Ok(reply) => reply,
            Err(e) => {
                let server = last_server_error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                let auth = |e: &Error| classify(e) == ErrorKind::Auth;
                if auth(&e) || server.as_ref().is_some_and(auth) {
                    report.reachable.status = Status::Ok;
                    report.authentication.status = AuthStatus::Refused;
                    report.authentication.error = Some(explain(&e));
                } else {
                    report.reachable.status = Status::Unreachable;
                    // The server's own failure (TLS, refused connection)
                    // says more than "server selection timed out".
                    report.reachable.error = Some(explain(server.as_ref().unwrap_or(&e)));
                }
                return;
            }
        };
        report.reachable.status = Status::Ok;
        report.reachable.round_trip_ms = Some(started.elapsed().as_secs_f64() * 1e3);
        if user.is_some() {
            report.authentication.status = AuthStatus::Ok;
        }
        if let Ok(mechs) = reply.get_array("saslSupportedMechs") {
            report.authentication.server_mechanisms = mechs
                .iter()
                .filter_map(|m| m.as_str().map(str::to_owned))
                .collect();
        }
        report.topology = Some(topology(&reply));
        report.server_version = self
            .bounded(admin.run_command(doc! {"buildInfo": 1}))
            .await
            .ok()
            .and_then(|b| b.get_str("version").ok().map(str::to_owned));
        report.authentication.roles = self
            .bounded(admin.run_command(doc! {"connectionStatus": 1}))
            .await
            .ok()
            .and_then(|s| roles(&s));
        let database = report.target.database.clone();
        let privileges = self.privileges(&database).await;
        let privileged = privileges.status == Status::Ok;
        report.privileges = Some(privileges);
        if privileged {
            let db = self.client.database(&database);
            for w in &mut report.prepare {
                for c in &mut w.collections {
                    let coll = db.collection::<Document>(&c.name);
                    c.present = self.bounded(coll.estimated_document_count()).await.ok();
                }
            }
        }
    }

    /// Creates a scratch collection in `database`, writes, reads, indexes
    /// and drops it: the commands the load and prepare steps use, which
    /// `readWrite` on the database grants.
    async fn privileges(&self, database: &str) -> Privileges {
        let db = self.client.database(database);
        let name = format!("mongoload_check_target_{:08x}", rand::rng().random::<u32>());
        let coll = db.collection::<Document>(&name);
        let mut steps: Vec<PrivilegeStep> = Vec::new();
        let index = IndexModel::builder()
            .keys(doc! {"n": 1})
            .options(
                mongodb::options::IndexOptions::builder()
                    .name("n_1".to_owned())
                    .build(),
            )
            .build();
        let ok = self
            .step(&mut steps, "create", db.create_collection(&name))
            .await
            && self
                .step(&mut steps, "insert", async {
                    coll.insert_one(doc! {"_id": 1, "n": 1}).await.map(drop)
                })
                .await
            && self
                .step(&mut steps, "find", async {
                    coll.find_one(doc! {"_id": 1}).await.map(drop)
                })
                .await
            && self
                .step(&mut steps, "update", async {
                    coll.update_one(doc! {"_id": 1}, doc! {"$set": {"n": 2}})
                        .await
                        .map(drop)
                })
                .await
            && self
                .step(&mut steps, "delete", async {
                    coll.delete_one(doc! {"_id": 1}).await.map(drop)
                })
                .await
            && self
                .step(&mut steps, "createIndexes", async {
                    coll.create_index(index).await.map(drop)
                })
                .await
            && self
                .step(&mut steps, "dropIndexes", coll.drop_index("n_1"))
                .await
            && self.step(&mut steps, "drop", coll.drop()).await;
        if !ok && steps.len() > 1 {
            // Do not leave the scratch collection behind.
            let _ = self.bounded(coll.drop()).await;
        }
        let status = steps.last().map_or(Status::Skipped, |s| s.status);
        Privileges {
            status,
            collection: format!("{database}.{name}"),
            steps,
        }
    }

    async fn step(
        &self,
        steps: &mut Vec<PrivilegeStep>,
        step: &str,
        call: impl IntoFuture<Output = Result<(), Error>>,
    ) -> bool {
        let (status, error) = match self.bounded(call).await {
            Ok(()) => (Status::Ok, None),
            Err(e) => {
                let status = match classify(&e) {
                    ErrorKind::Auth => Status::Refused,
                    ErrorKind::Timeout | ErrorKind::Network | ErrorKind::ServerSelection => {
                        Status::Unreachable
                    }
                    _ => Status::Failed,
                };
                (status, Some(explain(&e)))
            }
        };
        steps.push(PrivilegeStep {
            step: step.to_owned(),
            status,
            error,
        });
        status == Status::Ok
    }
}

/// The deployment's shape from a `hello` reply: a mongos says
/// `msg: "isdbgrid"`, a replica set member has `setName`.
pub(crate) fn topology(hello: &Document) -> Topology {
    let text = |k: &str| hello.get_str(k).ok().map(str::to_owned);
    let list = |k: &str| -> Vec<String> {
        hello
            .get_array(k)
            .map(|a| {
                a.iter()
                    .filter_map(Bson::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    if hello.get_str("msg") == Ok("isdbgrid") {
        return Topology {
            kind: "sharded".into(),
            me: text("me"),
            ..Default::default()
        };
    }
    match text("setName") {
        Some(set) => {
            let mut members = list("hosts");
            members.extend(list("passives"));
            members.extend(list("arbiters"));
            Topology {
                kind: "replica_set".into(),
                set_name: Some(set),
                members,
                primary: text("primary"),
                me: text("me"),
            }
        }
        None => Topology {
            kind: "standalone".into(),
            ..Default::default()
        },
    }
}

/// `role@db` for each role of `connectionStatus`.
fn roles(status: &Document) -> Option<Vec<String>> {
    let roles = status
        .get_document("authInfo")
        .ok()?
        .get_array("authenticatedUserRoles")
        .ok()?;
    Some(
        roles
            .iter()
            .filter_map(Bson::as_document)
            .map(|r| {
                format!(
                    "{}@{}",
                    r.get_str("role").unwrap_or("?"),
                    r.get_str("db").unwrap_or("?")
                )
            })
            .collect(),
    )
}

/// The write concern from the URI; without one, the deployment's default
/// applies, which only `getDefaultRWConcern` (an admin command) reports.
fn describe_write_concern(wc: Option<&WriteConcern>) -> WriteConcernInfo {
    let mut parts = Vec::new();
    if let Some(wc) = wc {
        match &wc.w {
            Some(Acknowledgment::Nodes(n)) => parts.push(format!("w={n}")),
            Some(Acknowledgment::Majority) => parts.push("w=majority".to_owned()),
            Some(Acknowledgment::Custom(tag)) => parts.push(format!("w={tag}")),
            _ => {}
        }
        if let Some(j) = wc.journal {
            parts.push(format!("j={j}"));
        }
        if let Some(t) = wc.w_timeout {
            parts.push(format!("wtimeoutMS={}", t.as_millis()));
        }
    }
    if parts.is_empty() {
        WriteConcernInfo {
            source: "server_default".into(),
            effective: "not set: the deployment's default applies (w=majority on MongoDB 5.0 \
                 and later unless setDefaultRWConcern changed it)"
                .into(),
        }
    } else {
        WriteConcernInfo {
            source: "uri".into(),
            effective: parts.join(", "),
        }
    }
}

/// The write concern the config sets (`target.write_concern`, and the
/// workloads' own) over the connection string's: what the load's writes
/// will carry.
fn with_configured_concerns(uri: WriteConcernInfo, config: &Config) -> WriteConcernInfo {
    let mut info = match &config.target.write_concern {
        Some(wc) => WriteConcernInfo {
            source: "target.write_concern".into(),
            effective: wc.to_string(),
        },
        None => uri,
    };
    let own: Vec<String> = config
        .workloads
        .iter()
        .filter_map(|w| Some(format!("{}: {}", w.name, w.write_concern.as_ref()?)))
        .collect();
    if !own.is_empty() {
        info.effective = format!("{}; workloads' own: {}", info.effective, own.join(", "));
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topology_from_hello() {
        let rs = doc! {
            "setName": "rs0", "hosts": ["a:1", "b:1"], "passives": ["c:1"],
            "primary": "a:1", "me": "b:1", "secondary": true,
        };
        assert_eq!(
            topology(&rs),
            Topology {
                kind: "replica_set".into(),
                set_name: Some("rs0".into()),
                members: vec!["a:1".into(), "b:1".into(), "c:1".into()],
                primary: Some("a:1".into()),
                me: Some("b:1".into()),
            }
        );
        assert_eq!(topology(&doc! {"msg": "isdbgrid"}).kind, "sharded");
        assert_eq!(
            topology(&doc! {"isWritablePrimary": true}).kind,
            "standalone"
        );
    }

    #[test]
    fn write_concern_from_the_uri_or_unknown() {
        let wc = WriteConcern::builder()
            .w(Acknowledgment::Majority)
            .journal(true)
            .build();
        assert_eq!(
            describe_write_concern(Some(&wc)).effective,
            "w=majority, j=true"
        );
        let d = describe_write_concern(None);
        assert_eq!(d.source, "server_default");
        assert!(d.effective.starts_with("not set"), "{}", d.effective);
        assert!(!d.effective.contains("unknown"), "{}", d.effective);
    }

    #[test]
    fn the_configured_write_concern_wins_over_the_uri() {
        let text = |target: &str, own: &str| {
            format!(
                "[target]\nuri = \"mongodb://h/?w=1\"\n{target}\n[[workloads]]\nname = \"a\"\nkind = \"mixed\"\n{own}\n\
                 [[workloads.stages]]\nrate = 1\nduration = \"1s\"\n"
            )
        };
        let cfg =
            |t: &str| config::parse_with_env(t, Path::new("t.toml"), std::iter::empty()).unwrap();
        let uri = || WriteConcernInfo {
            source: "uri".into(),
            effective: "w=1".into(),
        };
        let plain = with_configured_concerns(uri(), &cfg(&text("", "")));
        assert_eq!(
            (plain.source.as_str(), plain.effective.as_str()),
            ("uri", "w=1")
        );
        let set = with_configured_concerns(
            uri(),
            &cfg(&text("write_concern = \"majority\"", "write_concern = 1")),
        );
        assert_eq!(set.source, "target.write_concern");
        assert_eq!(set.effective, "w=majority; workloads' own: a: w=1");
    }

    #[test]
    fn roles_and_scrub() {
        let s = doc! {"authInfo": {"authenticatedUsers": [], "authenticatedUserRoles": [{"role": "readWrite", "db": "load"}]}};
        assert_eq!(roles(&s), Some(vec!["readWrite@load".to_owned()]));
        assert_eq!(roles(&doc! {}), None);
        let uri = "mongodb://u:pa55@h/";
        assert_eq!(
            scrub("bad pa55 at mongodb://u:pa55@h/", uri),
            "bad *** at mongodb://u:***@h/"
        );
    }
}
