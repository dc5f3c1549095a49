//! One replica-set member's answer to a command: `hello` as a member
//! (awaitable, for the driver's streaming monitor), writes only on the
//! primary (NotWritablePrimary 10107 elsewhere), reads on a secondary only
//! with a read preference other than primary (NotPrimaryNoSecondaryOk
//! 13435), write concerns (`w`, `wtimeout`; the default is `"majority"`),
//! retryable writes answered once per `(lsid, txnNumber)`, multi-document
//! transactions as far as their life across an election (see
//! [`super::txn`]), and the `replSetStepDown` and `replSetGetStatus`
//! commands. Everything else runs as on a standalone simulator.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, oid::ObjectId, Bson, DateTime, Document};

use super::oplog::{Catalog, Change, IndexSpec, OpTime};
use super::txn::{retry_key, transaction, Retry};
use super::{lock, Inner};
use crate::commands::{self, command_name, CmdError};
use crate::shared::Shared;
use crate::store::rlock;

/// The `setVersion` every member reports (it changes on reconfiguration,
/// which the simulator does not do, not on elections).
pub const SET_VERSION: i32 = 1;

/// What a command may do on which member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only on the primary.
    Write,
    /// On the primary, or on a secondary with a non-primary read preference.
    Read,
    /// Anywhere.
    Any,
}

/// How `name` (the command `body`) is treated.
pub fn access(name: &str, body: &Document) -> Access {
    match name {
        "insert" | "update" | "delete" | "findAndModify" | "findandmodify" | "create" | "drop"
        | "dropDatabase" | "createIndexes" | "dropIndexes" | "deleteIndexes" => Access::Write,
        "aggregate" if writes_out(body) => Access::Write,
        "find" | "aggregate" | "count" | "distinct" | "listCollections" | "listIndexes"
        | "listDatabases" => Access::Read,
        _ => Access::Any,
    }
}

/// Whether an aggregate pipeline ends in `$out` or `$merge`.
fn writes_out(body: &Document) -> bool {
    let Ok(stages) = body.get_array("pipeline") else {
        return false;
    };
    stages
        .last()
        .and_then(Bson::as_document)
        .is_some_and(|s| s.contains_key("$out") || s.contains_key("$merge"))
}

/// Whether a secondary may answer: the command carries a
/// `$readPreference` whose mode is not `primary` (drivers send none for
/// primary reads).
pub fn secondary_ok(body: &Document) -> bool {
    body.get_document("$readPreference")
        .ok()
        .and_then(|rp| rp.get_str("mode").ok())
        .is_some_and(|mode| mode != "primary")
}

/// A write concern's `w`.
#[derive(Debug, Clone, PartialEq)]
pub enum W {
    Nodes(i64),
    Majority,
}

/// A command's write concern.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteConcern {
    pub w: W,
    /// `wtimeout`; `None` waits as long as it takes.
    pub timeout: Option<Duration>,
}

pub(super) fn number(b: &Bson) -> Option<i64> {
    match *b {
        Bson::Int32(v) => Some(v.into()),
        Bson::Int64(v) => Some(v),
        Bson::Double(v) if v.is_finite() => Some(v as i64),
        _ => None,
    }
}

impl WriteConcern {
    /// The command's `writeConcern`; absent (or without `w`), the set's
    /// implicit default `w: "majority"`, as MongoDB 5.0+ has.
    pub fn parse(body: &Document) -> Result<WriteConcern, CmdError> {
        let mut wc = WriteConcern {
            w: W::Majority,
            timeout: None,
        };
        let spec = match body.get("writeConcern") {
            None | Some(Bson::Null) => return Ok(wc),
            Some(Bson::Document(d)) => d,
            Some(_) => {
                return Err(CmdError::new(
                    14,
                    "TypeMismatch",
                    "writeConcern must be an object",
                ))
            }
        };
        match spec.get("w") {
            None => {}
            Some(Bson::String(s)) if s == "majority" => {}
            Some(Bson::String(s)) => {
                return Err(CmdError::new(
                    79,
                    "UnknownReplWriteConcern",
                    format!("No write concern mode named '{s}' found in replica set configuration"),
                ))
            }
            Some(b) => match number(b) {
                Some(n) if n >= 0 => wc.w = W::Nodes(n),
                _ => {
                    return Err(CmdError::new(
                        9,
                        "FailedToParse",
                        "w has to be a non-negative number, a string or an object",
                    ))
                }
            },
        }
        if let Some(ms) = spec.get("wtimeout").and_then(number) {
            wc.timeout = (ms > 0).then(|| Duration::from_millis(ms as u64));
        }
        Ok(wc)
    }

    /// The command's write concern and how many of `members` must have
    /// applied the write (a write and a commit alike).
    pub fn parse_for(body: &Document, members: usize) -> Result<(WriteConcern, usize), CmdError> {
        let wc = WriteConcern::parse(body)?;
        let needed = wc.needed(members)?;
        Ok((wc, needed))
    }

    /// How many members must have applied the write, in a set of `members`.
    pub fn needed(&self, members: usize) -> Result<usize, CmdError> {
        match self.w {
            W::Majority => Ok(members / 2 + 1),
            W::Nodes(n) if n as u64 > members as u64 => Err(CmdError::new(
                100,
                "UnsatisfiableWriteConcern",
                "Not enough data-bearing nodes",
            )),
            W::Nodes(n) => Ok(n as usize),
        }
    }

    pub(super) fn to_doc(&self) -> Document {
        let mut d = match self.w {
            W::Majority => doc! { "w": "majority" },
            W::Nodes(n) => doc! { "w": n },
        };
        d.insert("wtimeout", self.timeout.map_or(0, |t| t.as_millis() as i64));
        d
    }
}

/// What one member's `hello` shows of the set.
#[derive(Debug, Clone, PartialEq)]
pub struct View {
    pub set_name: String,
    pub hosts: Vec<String>,
    pub me: usize,
    pub primary: Option<usize>,
    pub term: i64,
    pub version: i64,
    pub process_id: ObjectId,
    /// What this member applied last.
    pub last: OpTime,
    /// The majority commit point.
    pub majority: OpTime,
}

/// The replica-set fields of `hello` (`legacy`: `isMaster`'s `ismaster`).
pub fn hello_fields(v: &View, legacy: bool) -> Document {
    let is_primary = v.primary == Some(v.me);
    let mut d = doc! {
        "topologyVersion": { "processId": v.process_id, "counter": v.version },
        "hosts": v.hosts.clone(),
        "setName": v.set_name.clone(),
        "setVersion": SET_VERSION,
    };
    d.insert(
        if legacy {
            "ismaster"
        } else {
            "isWritablePrimary"
        },
        is_primary,
    );
    d.insert("secondary", !is_primary);
    if let Some(p) = v.primary {
        d.insert("primary", v.hosts[p].clone());
    }
    d.insert("me", v.hosts[v.me].clone());
    if is_primary {
        d.insert("electionId", election_id(v.term));
    }
    d.insert(
        "lastWrite",
        doc! {
            "opTime": v.last.to_doc(),
            "lastWriteDate": v.last.wall,
            "majorityOpTime": v.majority.to_doc(),
            "majorityWriteDate": v.majority.wall,
        },
    );
    d
}

/// MongoDB's protocol-version-1 electionId: `7fffffff` then the term.
pub fn election_id(term: i64) -> ObjectId {
    let mut bytes = [0u8; 12];
    bytes[..4].copy_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
    bytes[4..].copy_from_slice(&term.to_be_bytes());
    ObjectId::from_bytes(bytes)
}

/// `topologyVersion` and `maxAwaitTimeMS` of an awaitable `hello`.
fn awaitable(body: &Document) -> Option<(ObjectId, i64, Duration)> {
    let tv = body.get_document("topologyVersion").ok()?;
    let process = tv.get_object_id("processId").ok()?;
    let counter = tv.get("counter").and_then(number)?;
    let wait = body.get("maxAwaitTimeMS").and_then(number)?;
    Some((process, counter, Duration::from_millis(wait.max(0) as u64)))
}

impl Inner {
    fn view(&self, me: usize) -> View {
        let (primary, term, version) = {
            let t = rlock(&self.topology);
            (t.primary, t.term, t.version)
        };
        let (last, majority) = {
            let o = self.core.oplog();
            (o.applied(me), o.commit_point())
        };
        View {
            set_name: self.name.clone(),
            hosts: self.members.iter().map(|m| m.name.clone()).collect(),
            me,
            primary,
            term,
            version,
            process_id: self.members[me].process_id,
            last,
            majority,
        }
    }

    /// `topologyVersion` for error replies.
    fn topology_version(&self, me: usize) -> Document {
        doc! {
            "processId": self.members[me].process_id,
            "counter": rlock(&self.topology).version,
        }
    }

    /// Waits for write concern `wc` (`needed` members) on the write `seq`;
    /// on its timeout, adds the `writeConcernError` MongoDB sends to
    /// `reply`.
    pub(super) async fn await_write_concern(
        &self,
        seq: u64,
        needed: usize,
        wc: &WriteConcern,
        reply: &mut Document,
    ) {
        if needed > 1 && !self.wait_for(seq, needed, wc.timeout).await {
            reply.insert(
                "writeConcernError",
                doc! {
                    "code": 64,
                    "codeName": "WriteConcernFailed",
                    "errmsg": "waiting for replication timed out",
                    "errInfo": { "wtimeout": true, "writeConcern": wc.to_doc() },
                },
            );
        }
    }

    /// Waits until `needed` members applied `seq` (at most `timeout`);
    /// false on timeout.
    pub(super) async fn wait_for(
        &self,
        seq: u64,
        needed: usize,
        timeout: Option<Duration>,
    ) -> bool {
        self.core.oplog().require(seq);
        self.core.wake.notify_one();
        let mut progress = self.core.progress.subscribe();
        let wait = async {
            loop {
                let done = self.core.oplog().count_applied(seq) >= needed;
                if done || progress.changed().await.is_err() {
                    return;
                }
            }
        };
        match timeout {
            Some(t) => tokio::time::timeout(t, wait).await.is_ok(),
            None => {
                wait.await;
                true
            }
        }
    }
}

/// A state-change error (`code` 10107 or 13435) as a member sends it.
pub(super) fn not_primary(set: &Inner, me: usize, code: i32, retryable_write: bool) -> Document {
    let mut d = if code == 13435 {
        CmdError::new(
            13435,
            "NotPrimaryNoSecondaryOk",
            "not primary and secondaryOk=false",
        )
        .to_doc()
    } else {
        commands::injected_error(code, retryable_write)
    };
    d.insert("topologyVersion", set.topology_version(me));
    d
}

/// Answers one command as member `me`.
pub(crate) async fn respond(
    set: &Arc<Inner>,
    me: usize,
    shared: &Shared,
    connection_id: i64,
    body: Document,
) -> Document {
    if let Some(seq) = after_cluster_time(&body) {
        if !wait_applied(set, me, seq, max_time(&body)).await {
            return stamped(
                set,
                me,
                CmdError::new(50, "MaxTimeMSExpired", "operation exceeded time limit").to_doc(),
            );
        }
    }
    let reply = answer(set, me, shared, connection_id, body).await;
    stamped(set, me, reply)
}

/// The cluster time a read must see (`readConcern.afterClusterTime`), as
/// this set's oplog position: the simulator's cluster time is its oplog's
/// last `Timestamp`, whose increment is the entry's sequence number.
fn after_cluster_time(body: &Document) -> Option<u64> {
    match body
        .get_document("readConcern")
        .ok()?
        .get("afterClusterTime")?
    {
        Bson::Timestamp(ts) => Some(u64::from(ts.increment)),
        _ => None,
    }
}

fn max_time(body: &Document) -> Option<Duration> {
    let ms = body.get("maxTimeMS").and_then(number)?;
    (ms > 0).then(|| Duration::from_millis(ms as u64))
}

/// Waits until member `me` has applied oplog entry `seq` (at most
/// `limit`, else 60 s); false when it has not by then.
async fn wait_applied(set: &Inner, me: usize, seq: u64, limit: Option<Duration>) -> bool {
    let mut progress = set.core.progress.subscribe();
    let wait = async {
        loop {
            if seen(set, me).0.seq >= seq || progress.changed().await.is_err() {
                return;
            }
        }
    };
    tokio::time::timeout(limit.unwrap_or(Duration::from_secs(60)), wait)
        .await
        .is_ok()
}

/// What member `me` has seen (the primary: every write; a secondary:
/// what it applied) and the set's newest entry, under one oplog lock.
fn seen(set: &Inner, me: usize) -> (OpTime, OpTime) {
    let primary = set.primary() == Some(me);
    let o = set.core.oplog();
    let last = o.last();
    (if primary { last } else { o.applied(me) }, last)
}

/// `reply` with the member's `operationTime` (what it has applied: the
/// primary, everything written) and the set's `$clusterTime` (the newest
/// oplog entry), as a replica-set member adds them to every reply.
fn stamped(set: &Inner, me: usize, mut reply: Document) -> Document {
    let (operation, last) = seen(set, me);
    crate::shared::stamp_cluster_time(
        &mut reply,
        Bson::Timestamp(operation.ts()),
        Bson::Timestamp(last.ts()),
    );
    reply
}

/// The command's answer, before the cluster time is added.
async fn answer(
    set: &Arc<Inner>,
    me: usize,
    shared: &Shared,
    connection_id: i64,
    body: Document,
) -> Document {
    let name = command_name(&body).to_owned();
    match name.as_str() {
        "hello" | "isMaster" | "ismaster" => {
            return hello(set, me, shared, connection_id, body, name != "hello").await
        }
        "replSetStepDown" => return step_down(set, me, &body),
        "replSetGetStatus" => return status(set, me, &body),
        _ if body.contains_key("autocommit") => {
            return transaction(set, me, shared, connection_id, body).await
        }
        _ => {}
    }
    match access(&name, &body) {
        Access::Write => write(set, me, shared, connection_id, body).await,
        Access::Read if set.primary() != Some(me) && !secondary_ok(&body) => {
            not_primary(set, me, 13435, false)
        }
        Access::Read | Access::Any => commands::execute(shared, connection_id, body),
    }
}

async fn hello(
    set: &Inner,
    me: usize,
    shared: &Shared,
    connection_id: i64,
    body: Document,
    legacy: bool,
) -> Document {
    if let Some((process, counter, max_wait)) = awaitable(&body) {
        let mut changes = set.version.subscribe();
        let current = *changes.borrow_and_update();
        // Same process and nothing new since the client's view: wait for a
        // change, at most maxAwaitTimeMS (the driver's streaming monitor).
        if process == set.members[me].process_id && counter == current {
            let _ = tokio::time::timeout(max_wait, changes.changed()).await;
        }
    }
    let base = commands::execute(shared, connection_id, body);
    if base.get_f64("ok") != Ok(1.0) {
        return base;
    }
    let mut d = hello_fields(&set.view(me), legacy);
    for (k, v) in base {
        if k != "isWritablePrimary" && k != "ismaster" {
            d.insert(k, v);
        }
    }
    d
}

/// The catalog change a successful DDL command makes, read from `shared`'s
/// store after it ran.
fn catalog_change(shared: &Shared, name: &str, db: &str, coll: Option<&str>) -> Option<Catalog> {
    let (db, coll) = (db.to_owned(), coll.map(str::to_owned));
    match name {
        "dropDatabase" => Some(Catalog::DropDatabase { db }),
        "drop" => Some(Catalog::DropCollection { db, coll: coll? }),
        "create" | "createIndexes" | "dropIndexes" | "deleteIndexes" => {
            let coll = coll?;
            let c = shared.store.collection(&db, &coll)?;
            let indexes = rlock(&c)
                .indexes
                .iter()
                .map(|ix| IndexSpec {
                    name: ix.name.clone(),
                    key: ix.key.clone(),
                    options: ix.options.clone(),
                    spec: ix.spec.clone(),
                })
                .collect();
            Some(Catalog::Collection { db, coll, indexes })
        }
        _ => None,
    }
}

pub(super) async fn write(
    set: &Inner,
    me: usize,
    shared: &Shared,
    connection_id: i64,
    body: Document,
) -> Document {
    let (wc, needed) = match WriteConcern::parse_for(&body, set.members.len()) {
        Ok(parsed) => parsed,
        Err(e) => return e.to_doc(),
    };
    let retry = retry_key(&body);
    let name = command_name(&body).to_owned();
    let db = body.get_str("$db").unwrap_or("test").to_owned();
    let coll = body.get_str(&name).ok().map(str::to_owned);
    let (mut reply, seq) = {
        // Held while the write runs: a step-down waits for it.
        let topology = rlock(&set.topology);
        if topology.primary != Some(me) {
            drop(topology);
            return not_primary(set, me, 10107, retry.is_some());
        }
        let replay = match &retry {
            Some((lsid, txn)) => lock(&set.txns).check(lsid, *txn),
            None => Retry::New,
        };
        match replay {
            Retry::Replay(reply, seq) => (reply, seq),
            Retry::TooOld(newest) => {
                return CmdError::new(
                    225,
                    "TransactionTooOld",
                    format!(
                        "Retryable write with txnNumber {} is prohibited on this session because a newer retryable write with txnNumber {newest} has already started on this session.",
                        retry.map_or(0, |r| r.1)
                    ),
                )
                .to_doc()
            }
            Retry::New => {
                let reply = commands::execute(shared, connection_id, body);
                let ok = reply.get_f64("ok") == Ok(1.0);
                let mut seq = set.core.oplog().last().seq;
                if let Some(change) = ok
                    .then(|| catalog_change(shared, &name, &db, coll.as_deref()))
                    .flatten()
                {
                    seq = set.core.oplog().push(
                        Change::Catalog(change),
                        Instant::now(),
                        DateTime::now(),
                    );
                    set.core.wake.notify_one();
                }
                if let Some((lsid, txn)) = retry {
                    lock(&set.txns).record(lsid, txn, reply.clone(), seq);
                }
                (reply, seq)
            }
        }
    };
    set.await_write_concern(seq, needed, &wc, &mut reply).await;
    reply
}

fn admin_only(body: &Document, name: &str) -> Option<Document> {
    (body.get_str("$db") != Ok("admin")).then(|| {
        CmdError::new(
            13,
            "Unauthorized",
            format!("{name} may only be run against the admin database."),
        )
        .to_doc()
    })
}

/// `replSetStepDown: secs` on the primary: steps down (and closes this
/// member's connections once the reply is sent).
fn step_down(set: &Arc<Inner>, me: usize, body: &Document) -> Document {
    if let Some(e) = admin_only(body, "replSetStepDown") {
        return e;
    }
    if body.get("replSetStepDown").and_then(number).is_none() {
        return CmdError::new(
            14,
            "TypeMismatch",
            "replSetStepDown takes the number of seconds to step down for",
        )
        .to_doc();
    }
    if set.primary() != Some(me) {
        return CmdError::new(
            10107,
            "NotWritablePrimary",
            "not primary so can't step down",
        )
        .to_doc();
    }
    match set.step_down(None) {
        Ok(_) => doc! { "ok": 1.0 },
        Err(e @ super::StepDownError::NoElectable) => {
            CmdError::new(262, "ExceededTimeLimit", e.to_string()).to_doc()
        }
        Err(e) => CmdError::new(10107, "NotWritablePrimary", e.to_string()).to_doc(),
    }
}

/// A small `replSetGetStatus`: each member's state and position.
fn status(set: &Inner, me: usize, body: &Document) -> Document {
    if let Some(e) = admin_only(body, "replSetGetStatus") {
        return e;
    }
    let view = set.view(me);
    let members: Vec<Bson> = (0..set.members.len())
        .map(|m| {
            let applied = set.core.oplog().applied(m);
            let state = if view.primary == Some(m) { 1 } else { 2 };
            let mut d = doc! {
                "_id": m as i32,
                "name": view.hosts[m].clone(),
                "health": 1.0,
                "state": state,
                "stateStr": if state == 1 { "PRIMARY" } else { "SECONDARY" },
                "optime": applied.to_doc(),
                "optimeDate": applied.wall,
            };
            if m == me {
                d.insert("self", true);
            }
            Bson::Document(d)
        })
        .collect();
    doc! {
        "set": view.set_name.clone(),
        "date": DateTime::now(),
        "myState": if view.primary == Some(me) { 1 } else { 2 },
        "term": view.term,
        "members": members,
        "ok": 1.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{wlock, Store};

    #[test]
    fn a_member_builds_an_index_with_its_primarys_options() {
        let primary = Shared::new(crate::faults::Faults::new(Default::default()));
        let reply = commands::execute(
            &primary,
            1,
            doc! { "createIndexes": "c", "indexes": [
                { "key": { "a": 1 }, "name": "a_1", "unique": true, "sparse": true },
                { "key": { "e": 1 }, "name": "e_1", "unique": true,
                  "partialFilterExpression": { "live": true } },
            ], "$db": "d" },
        );
        assert_eq!(reply.get_f64("ok"), Ok(1.0), "{reply}");
        let change = catalog_change(&primary, "createIndexes", "d", Some("c")).unwrap();
        let member = Store::default();
        super::super::apply(&member, &Change::Catalog(change), true);
        let c = member.collection("d", "c").unwrap();
        let mut c = wlock(&c);
        let (want, got): (Vec<_>, Vec<_>) = {
            let p = primary.store.collection("d", "c").unwrap();
            let p = rlock(&p);
            (
                p.indexes
                    .iter()
                    .map(|ix| (ix.options.clone(), ix.spec.clone()))
                    .collect(),
                c.indexes
                    .iter()
                    .map(|ix| (ix.options.clone(), ix.spec.clone()))
                    .collect(),
            )
        };
        assert_eq!(got, want);
        assert!(got[0].0.sparse && got[1].0.partial.is_some());
        // So the member leaves out what its primary leaves out.
        c.insert(doc! { "_id": 1, "e": 1 }).unwrap();
        c.insert(doc! { "_id": 2, "e": 1 }).unwrap();
        c.insert(doc! { "_id": 3, "e": 1, "live": true }).unwrap();
        assert!(c.insert(doc! { "_id": 4, "e": 1, "live": true }).is_err());
    }

    #[test]
    fn commands_are_classified() {
        assert_eq!(access("insert", &doc! {}), Access::Write);
        assert_eq!(access("createIndexes", &doc! {}), Access::Write);
        assert_eq!(access("find", &doc! {}), Access::Read);
        assert_eq!(
            access("aggregate", &doc! {"pipeline": [{"$match": {}}]}),
            Access::Read
        );
        assert_eq!(
            access(
                "aggregate",
                &doc! {"pipeline": [{"$match": {}}, {"$out": "x"}]}
            ),
            Access::Write
        );
        assert_eq!(access("ping", &doc! {}), Access::Any);
        assert_eq!(access("getMore", &doc! {}), Access::Any);
        assert!(!secondary_ok(&doc! {"find": "c"}));
        assert!(!secondary_ok(
            &doc! {"$readPreference": {"mode": "primary"}}
        ));
        assert!(secondary_ok(
            &doc! {"$readPreference": {"mode": "secondaryPreferred"}}
        ));
    }

    #[test]
    fn write_concerns_parse_with_majority_by_default() {
        let p = |d: Document| WriteConcern::parse(&d);
        assert_eq!(
            p(doc! {}).unwrap(),
            WriteConcern {
                w: W::Majority,
                timeout: None
            }
        );
        assert_eq!(p(doc! {"writeConcern": {"w": 1}}).unwrap().w, W::Nodes(1));
        let wc = p(doc! {"writeConcern": {"w": "majority", "wtimeout": 250}}).unwrap();
        assert_eq!(wc.timeout, Some(Duration::from_millis(250)));
        assert_eq!(wc.needed(3).unwrap(), 2);
        assert_eq!(wc.needed(5).unwrap(), 3);
        assert_eq!(
            p(doc! {"writeConcern": {"w": 0}})
                .unwrap()
                .needed(3)
                .unwrap(),
            0
        );
        assert_eq!(
            p(doc! {"writeConcern": {"w": 4}})
                .unwrap()
                .needed(3)
                .unwrap_err()
                .code,
            100
        );
        assert_eq!(p(doc! {"writeConcern": {"w": "dc1"}}).unwrap_err().code, 79);
        assert_eq!(p(doc! {"writeConcern": {"w": -1}}).unwrap_err().code, 9);
        assert_eq!(
            p(doc! {"writeConcern": {"wtimeout": 0}}).unwrap().timeout,
            None
        );
    }

    #[test]
    fn hello_shows_the_member_and_the_set() {
        let wall = DateTime::from_millis(1_700_000_000_000);
        let v = View {
            set_name: "rs0".into(),
            hosts: vec!["h:1".into(), "h:2".into(), "h:3".into()],
            me: 1,
            primary: Some(1),
            term: 3,
            version: 4,
            process_id: ObjectId::from_bytes([1; 12]),
            last: OpTime {
                seq: 9,
                term: 3,
                wall,
            },
            majority: OpTime {
                seq: 8,
                term: 3,
                wall,
            },
        };
        let d = hello_fields(&v, false);
        assert_eq!(d.get_bool("isWritablePrimary"), Ok(true));
        assert_eq!(d.get_bool("secondary"), Ok(false));
        assert_eq!(
            (d.get_str("me"), d.get_str("primary")),
            (Ok("h:2"), Ok("h:2"))
        );
        assert_eq!(d.get_str("setName"), Ok("rs0"));
        assert_eq!(d.get_i32("setVersion"), Ok(1));
        assert_eq!(d.get_array("hosts").unwrap().len(), 3);
        assert_eq!(
            d.get_object_id("electionId").unwrap().to_hex(),
            "7fffffff0000000000000003"
        );
        let tv = d.get_document("topologyVersion").unwrap();
        assert_eq!(tv.get_i64("counter"), Ok(4));
        let lw = d.get_document("lastWrite").unwrap();
        assert_eq!(lw.get_document("opTime").unwrap().get_i64("t"), Ok(3));
        assert_eq!(lw.get_datetime("lastWriteDate"), Ok(&wall));
        // A secondary during an election: no primary, no electionId.
        let d = hello_fields(
            &View {
                primary: None,
                ..v.clone()
            },
            true,
        );
        assert_eq!(d.get_bool("ismaster"), Ok(false));
        assert_eq!(d.get_bool("secondary"), Ok(true));
        assert!(!d.contains_key("primary") && !d.contains_key("electionId"));
        assert!(election_id(2) < election_id(3));
    }

    #[test]
    fn awaitable_hello_needs_version_and_wait() {
        let p = ObjectId::new();
        assert_eq!(
            awaitable(
                &doc! {"hello": 1, "topologyVersion": {"processId": p, "counter": 2_i64}, "maxAwaitTimeMS": 500}
            ),
            Some((p, 2, Duration::from_millis(500)))
        );
        assert_eq!(awaitable(&doc! {"hello": 1, "maxAwaitTimeMS": 500}), None);
    }
}
