//! The simulator as a replica set, driven by the official `mongodb` driver
//! (and raw OP_MSG where the driver hides what the server sends): discovery
//! from a seed list, streaming monitoring, step-downs and elections,
//! NotWritablePrimary and NotPrimaryNoSecondaryOk, rollback of w:1 writes
//! and never of w:"majority" ones, replication lag seen by a secondary
//! read, retryable writes, `replSetStepDown` and scheduled failovers
//! (`sim_pymongo.rs` runs pymongo against `mongoload sim --replset`); every
//! member behind SCRAM and TLS alike.

use crate::common;
use crate::common::certs;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::error_code as code;
use mongodb::bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::event::sdam::SdamEvent;
use mongodb::event::EventHandler;
use mongodb::options::{
    ClientOptions, CollectionOptions, ReadPreference, SelectionCriteria, ServerAddress,
    WriteConcern,
};
use mongodb::{Client, Collection, ServerType};
use mongoload::sim::wire::{self, Request, HEADER_LEN};
use mongoload::sim::{self, ReplSetConfig, SimConfig, SimHandle, WriteKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn replset(config: ReplSetConfig) -> SimHandle {
    sim::start_replset(SimConfig::default(), config)
        .await
        .expect("the replica set starts")
}

/// A client for `uri`, patient enough to wait through an election.
async fn client(uri: &str, retry: bool) -> Client {
    common::driver_client(uri, retry, Duration::from_secs(15)).await
}

fn coll_w(client: &Client, w: WriteConcern) -> Collection<Document> {
    client.database("rs").collection_with_options(
        "docs",
        CollectionOptions::builder().write_concern(w).build(),
    )
}

/// `_id`s of `coll` in order.
async fn ids(coll: &Collection<Document>) -> Vec<i32> {
    use futures::TryStreamExt;
    let docs: Vec<Document> = coll
        .find(doc! {})
        .sort(doc! {"_id": 1})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
}

/// A raw OP_MSG connection to one member.
struct Raw {
    stream: TcpStream,
    next_id: i32,
}

impl Raw {
    async fn connect(addr: std::net::SocketAddr) -> Raw {
        Raw {
            stream: TcpStream::connect(addr).await.unwrap(),
            next_id: 1,
        }
    }

    async fn run(&mut self, cmd: Document) -> Document {
        let mut out = Vec::new();
        self.next_id += 1;
        wire::encode_msg(&mut out, self.next_id, 0, &cmd);
        self.stream.write_all(&out).await.unwrap();
        let mut head = [0u8; HEADER_LEN];
        self.stream.read_exact(&mut head).await.unwrap();
        let len = wire::parse_header(&head).unwrap().length;
        let mut frame = head.to_vec();
        frame.resize(len, 0);
        self.stream
            .read_exact(&mut frame[HEADER_LEN..])
            .await
            .unwrap();
        match wire::parse_message(&frame).unwrap() {
            Request::Msg { body, .. } => body,
            other => panic!("not an OP_MSG reply: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_discovers_the_set_from_one_secondary_and_streams_hello() {
    let sim = replset(ReplSetConfig::new("rs0", 3)).await;
    let set = sim.replset().unwrap();
    assert_eq!(set.primary(), Some(0));
    assert_eq!(
        sim.uri(),
        format!("mongodb://{}/?replicaSet=rs0", set.hosts().join(","))
    );

    // Each member answers hello as a replica-set member.
    let mut raw = Raw::connect(set.addr(0)).await;
    let h = raw.run(doc! {"hello": 1, "$db": "admin"}).await;
    assert_eq!(h.get_bool("isWritablePrimary"), Ok(true));
    assert_eq!(h.get_bool("secondary"), Ok(false));
    assert_eq!(h.get_str("setName"), Ok("rs0"));
    assert_eq!(h.get_i32("setVersion"), Ok(1));
    let hosts: Vec<&str> = h
        .get_array("hosts")
        .unwrap()
        .iter()
        .filter_map(Bson::as_str)
        .collect();
    assert_eq!(hosts, set.hosts());
    assert_eq!(h.get_str("me"), Ok(set.hosts()[0].as_str()));
    assert_eq!(h.get_str("primary"), Ok(set.hosts()[0].as_str()));
    assert_eq!(
        h.get_object_id("electionId").unwrap().to_hex(),
        "7fffffff0000000000000001"
    );
    assert!(h.get_document("topologyVersion").is_ok());
    assert!(h
        .get_document("lastWrite")
        .unwrap()
        .get_datetime("lastWriteDate")
        .is_ok());
    assert_eq!(h.get_i32("maxWireVersion"), Ok(21));
    let mut raw2 = Raw::connect(set.addr(2)).await;
    let legacy = raw2.run(doc! {"isMaster": 1, "$db": "admin"}).await;
    assert_eq!(legacy.get_bool("ismaster"), Ok(false));
    assert_eq!(legacy.get_bool("secondary"), Ok(true));
    assert_eq!(legacy.get_str("me"), Ok(set.hosts()[2].as_str()));
    assert_eq!(legacy.get_str("primary"), Ok(set.hosts()[0].as_str()));
    assert!(!legacy.contains_key("electionId"));

    // A seed list of one secondary, without directConnection or replicaSet.
    let awaited = Arc::new(Mutex::new(0usize));
    let mut opts = ClientOptions::parse(format!("mongodb://{}/", set.hosts()[2]))
        .await
        .unwrap();
    opts.server_selection_timeout = Some(Duration::from_secs(10));
    // maxAwaitTimeMS is the heartbeat frequency: awaited replies come every 500 ms.
    opts.heartbeat_freq = Some(Duration::from_millis(500));
    let seen = awaited.clone();
    opts.sdam_event_handler = Some(EventHandler::callback(move |ev: SdamEvent| {
        if let SdamEvent::ServerHeartbeatSucceeded(h) = ev {
            if h.awaited {
                *seen.lock().unwrap() += 1;
            }
        }
    }));
    let c = Client::with_options(opts).unwrap();
    let coll = c.database("rs").collection::<Document>("docs");
    coll.insert_one(doc! {"_id": 1, "v": "x"}).await.unwrap();
    assert_eq!(ids(&coll).await, [1]);
    // The write went to member 0 and replicated to the others.
    let on_secondary = c
        .database("rs")
        .collection::<Document>("docs")
        .find_one(doc! {"_id": 1})
        .selection_criteria(SelectionCriteria::ReadPreference(
            ReadPreference::Secondary {
                options: Default::default(),
            },
        ))
        .await
        .unwrap();
    assert_eq!(on_secondary.unwrap().get_str("v"), Ok("x"));
    // The driver's monitors moved on to awaitable hello (streaming).
    let deadline = Instant::now() + Duration::from_secs(20);
    while *awaited.lock().unwrap() == 0 {
        assert!(
            Instant::now() < deadline,
            "no awaited heartbeat: the driver never streamed hello"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn awaitable_hello_answers_when_the_topology_changes() {
    let mut cfg = ReplSetConfig::new("rs0", 3);
    cfg.election = sim::ElectionTime::fixed(Duration::from_millis(200));
    let sim = replset(cfg).await;
    let set = sim.replset().unwrap().clone();
    let mut raw = Raw::connect(set.addr(1)).await;
    let first = raw.run(doc! {"hello": 1, "$db": "admin"}).await;
    let tv = first.get_document("topologyVersion").unwrap().clone();
    let counter = tv.get_i64("counter").unwrap();
    // Another process id: answered at once.
    let other = raw
        .run(doc! {"hello": 1, "$db": "admin", "maxAwaitTimeMS": 60_000,
        "topologyVersion": {"processId": mongodb::bson::oid::ObjectId::new(), "counter": counter}})
        .await;
    assert_eq!(other.get_document("topologyVersion").unwrap(), &tv);
    // Current version: held until the step-down, well before maxAwaitTimeMS.
    let stepper = tokio::spawn({
        let set = set.clone();
        async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            set.step_down().unwrap()
        }
    });
    let started = Instant::now();
    let changed = raw
        .run(doc! {"hello": 1, "$db": "admin", "maxAwaitTimeMS": 60_000, "topologyVersion": tv.clone()})
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(50),
        "{:?}",
        started.elapsed()
    );
    let step = stepper.await.unwrap();
    assert_eq!((step.old_primary, step.new_primary), (0, 1));
    let new_tv = changed.get_document("topologyVersion").unwrap();
    assert_eq!(
        new_tv.get_object_id("processId"),
        tv.get_object_id("processId")
    );
    assert!(new_tv.get_i64("counter").unwrap() > counter);
    assert!(
        !changed.contains_key("primary"),
        "no primary during the election: {changed}"
    );
    assert_eq!(changed.get_bool("isWritablePrimary"), Ok(false));
    // Then the election makes member 1 primary in term 2.
    let tv = new_tv.clone();
    let elected = raw
        .run(doc! {"hello": 1, "$db": "admin", "maxAwaitTimeMS": 60_000, "topologyVersion": tv})
        .await;
    assert_eq!(elected.get_bool("isWritablePrimary"), Ok(true));
    assert_eq!(
        elected.get_object_id("electionId").unwrap().to_hex(),
        "7fffffff0000000000000002"
    );
    assert_eq!(set.term(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_down_refuses_writes_then_another_member_takes_them() {
    let mut cfg = ReplSetConfig::new("rs0", 3);
    cfg.election = sim::ElectionTime::fixed(Duration::from_millis(500));
    let sim = replset(cfg).await;
    let set = sim.replset().unwrap().clone();
    let primary_seen = Arc::new(Mutex::new(Vec::<ServerAddress>::new()));
    let mut opts = ClientOptions::parse(sim.uri()).await.unwrap();
    opts.server_selection_timeout = Some(Duration::from_secs(15));
    let seen = primary_seen.clone();
    opts.sdam_event_handler = Some(EventHandler::callback(move |ev: SdamEvent| {
        if let SdamEvent::ServerDescriptionChanged(c) = ev {
            if c.new_description.server_type() == ServerType::RsPrimary {
                seen.lock().unwrap().push(c.address.clone());
            }
        }
    }));
    let c = Client::with_options(opts).unwrap();
    let coll = c.database("rs").collection::<Document>("docs");
    coll.insert_one(doc! {"_id": 0}).await.unwrap();
    let before = set.connections(0);
    assert!(before >= 1);

    let step = set.step_down().unwrap();
    assert_eq!((step.old_primary, step.new_primary), (0, 1));
    assert_eq!(step.election, Duration::from_millis(500));
    assert!(step.rolled_back.is_empty());
    assert_eq!(set.primary(), None);
    assert_eq!(set.step_down(), Err(sim::StepDownError::NoPrimary));

    // During the election the old primary refuses writes (10107) and
    // primary reads (13435), and answers secondary reads.
    let direct = client(&set.member_uri(0), false).await;
    let err = direct
        .database("rs")
        .collection::<Document>("docs")
        .insert_one(doc! {"_id": 99})
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(10107), "{err}");
    let mut raw = Raw::connect(set.addr(0)).await;
    let r = raw
        .run(doc! {"find": "docs", "filter": {}, "$db": "rs"})
        .await;
    assert_eq!(r.get_i32("code"), Ok(13435), "{r}");
    assert_eq!(r.get_str("codeName"), Ok("NotPrimaryNoSecondaryOk"));
    let r = raw
        .run(doc! {"find": "docs", "filter": {}, "$db": "rs", "$readPreference": {"mode": "secondaryPreferred"}})
        .await;
    assert_eq!(r.get_f64("ok"), Ok(1.0), "{r}");
    let r = raw
        .run(doc! {"insert": "docs", "documents": [{"_id": 98}], "$db": "rs", "lsid": {"id": 1}, "txnNumber": 1_i64})
        .await;
    assert_eq!(r.get_i32("code"), Ok(10107));
    assert_eq!(
        r.get_array("errorLabels").unwrap(),
        &vec![Bson::from("RetryableWriteError")]
    );

    // A write sent now waits for the new primary and lands there.
    let pending = tokio::spawn({
        let coll = coll.clone();
        async move { coll.insert_one(doc! {"_id": 1}).await }
    });
    assert_eq!(set.wait_for_primary(Duration::from_secs(20)).await, Some(1));
    pending
        .await
        .unwrap()
        .expect("the write lands on the new primary");
    let f = &set.failovers()[0];
    assert!(f.elected.is_some() && f.term == Some(2));
    assert_eq!(set.term(), 2);
    coll.insert_one(doc! {"_id": 2}).await.unwrap();
    assert_eq!(ids(&coll).await, [0, 1, 2]);
    assert!(
        primary_seen
            .lock()
            .unwrap()
            .iter()
            .any(|a| a.to_string() == set.hosts()[1]),
        "the driver saw member 1 become primary: {:?}",
        primary_seen.lock().unwrap()
    );
    // The old primary replicates from the new one.
    let d0 = direct.database("rs").collection::<Document>("docs");
    let deadline = Instant::now() + Duration::from_secs(10);
    while ids(&d0).await != [0, 1, 2] {
        assert!(Instant::now() < deadline, "member 0 never caught up");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_loses_exactly_the_w1_writes_asked_and_no_majority_write() {
    let mut cfg = ReplSetConfig::new("rs0", 3);
    cfg.election = sim::ElectionTime::fixed(Duration::from_millis(100));
    cfg.rollback_writes = 50;
    let sim = replset(cfg).await;
    let set = sim.replset().unwrap().clone();
    let c = client(&sim.uri(), true).await;
    let w1 = coll_w(&c, WriteConcern::nodes(1));
    let majority = coll_w(&c, WriteConcern::majority());
    let insert = |coll: &Collection<Document>, ids: std::ops::Range<i32>| {
        let coll = coll.clone();
        async move {
            for chunk in ids.collect::<Vec<_>>().chunks(10) {
                coll.insert_many(chunk.iter().map(|&i| doc! {"_id": i}))
                    .await
                    .unwrap();
            }
        }
    };
    insert(&w1, 0..300).await;
    insert(&majority, 300..310).await;
    insert(&w1, 310..400).await;

    // The newest 50 w:1 writes never reached a secondary: rolled back.
    let step = set.step_down().unwrap();
    let lost: Vec<Bson> = step.rolled_back.iter().map(|r| r.id.clone()).collect();
    assert_eq!(lost, (350..400).map(Bson::Int32).collect::<Vec<_>>());
    assert!(step
        .rolled_back
        .iter()
        .all(|r| r.kind == WriteKind::Insert && r.ns == "rs.docs"));
    assert_eq!(set.wait_for_primary(Duration::from_secs(20)).await, Some(1));
    let want: Vec<i32> = (0..350).collect();
    assert_eq!(ids(&w1).await, want);
    // The old primary rolled them back too.
    let old = client(&set.member_uri(0), false).await;
    assert_eq!(ids(&old.database("rs").collection("docs")).await, want);

    // Fewer w:1 writes than N since the last majority write: all of them.
    insert(&majority, 400..405).await;
    insert(&w1, 405..425).await;
    let step = set.step_down().unwrap();
    assert_eq!(step.rolled_back.len(), 20);
    assert_eq!(step.rolled_back[0].id, Bson::Int32(405));
    set.wait_for_primary(Duration::from_secs(20)).await.unwrap();

    // Only w:"majority" writes (the default write concern too): nothing lost.
    insert(&majority, 425..450).await;
    let default_wc = c.database("rs").collection::<Document>("docs");
    insert(&default_wc, 450..460).await;
    let step = set.step_down().unwrap();
    assert!(step.rolled_back.is_empty(), "{:?}", step.rolled_back);
    set.wait_for_primary(Duration::from_secs(20)).await.unwrap();
    let want: Vec<i32> = (0..350).chain(400..405).chain(425..460).collect();
    assert_eq!(ids(&w1).await, want);
    let counts: Vec<usize> = set
        .failovers()
        .iter()
        .map(|f| f.rolled_back.len())
        .collect();
    assert_eq!(counts, [50, 20, 0]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_pinned_to_a_secondary_sees_the_replication_lag() {
    // Long enough that the read right after the insert cannot be late for it.
    let lag = Duration::from_secs(3);
    let mut cfg = ReplSetConfig::new("rs0", 3);
    cfg.replication_lag = lag;
    let sim = replset(cfg).await;
    let set = sim.replset().unwrap().clone();
    let c = client(&sim.uri(), true).await;
    let w1 = coll_w(&c, WriteConcern::nodes(1));
    let secondary = client(&set.member_uri(1), false).await;
    let on_secondary = secondary.database("rs").collection::<Document>("docs");
    // Connected before the clock starts.
    assert!(on_secondary
        .find_one(doc! {"_id": 1})
        .await
        .unwrap()
        .is_none());
    w1.find_one(doc! {}).await.unwrap();

    let sent = Instant::now();
    w1.insert_one(doc! {"_id": 1}).await.unwrap();
    assert!(
        on_secondary
            .find_one(doc! {"_id": 1})
            .await
            .unwrap()
            .is_none(),
        "a secondary {lag:?} behind does not have it yet"
    );
    assert!(
        w1.find_one(doc! {"_id": 1}).await.unwrap().is_some(),
        "the primary has it"
    );
    while on_secondary
        .find_one(doc! {"_id": 1})
        .await
        .unwrap()
        .is_none()
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(sent.elapsed() < Duration::from_secs(30));
    }
    assert!(sent.elapsed() >= lag, "visible after {:?}", sent.elapsed());

    // A majority write waits for a secondary, so for the lag.
    let started = Instant::now();
    coll_w(&c, WriteConcern::majority())
        .insert_one(doc! {"_id": 2})
        .await
        .unwrap();
    assert!(
        started.elapsed() >= lag,
        "w:majority took {:?}",
        started.elapsed()
    );
    // And a wtimeout shorter than the lag reports a write concern error.
    let err = coll_w(
        &c,
        WriteConcern::builder()
            .w(mongodb::options::Acknowledgment::Majority)
            .w_timeout(Duration::from_millis(100))
            .build(),
    )
    .insert_one(doc! {"_id": 3})
    .await
    .unwrap_err();
    match &*err.kind {
        ErrorKind::Write(WriteFailure::WriteConcernError(e)) => assert_eq!(e.code, 64),
        other => panic!("expected a write concern error, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retryable_writes_are_applied_once() {
    let sim = replset(ReplSetConfig::new("rs0", 3)).await;
    let set = sim.replset().unwrap().clone();
    let mut raw = Raw::connect(set.addr(0)).await;
    let lsid = doc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![7; 16] }};
    let insert = doc! {"insert": "docs", "documents": [{"_id": 1}], "$db": "rs",
    "lsid": lsid.clone(), "txnNumber": 1_i64, "writeConcern": {"w": 1}};
    let first = raw.run(insert.clone()).await;
    assert_eq!((first.get_i32("n"), first.get_f64("ok")), (Ok(1), Ok(1.0)));
    // The same (lsid, txnNumber) again: the same answer, no duplicate key.
    let again = raw.run(insert).await;
    assert_eq!(again, first);
    let older = raw
        .run(
            doc! {"insert": "docs", "documents": [{"_id": 2}], "$db": "rs",
            "lsid": lsid.clone(), "txnNumber": 0_i64},
        )
        .await;
    assert_eq!(older.get_i32("code"), Ok(225));
    let count = raw.run(doc! {"count": "docs", "$db": "rs"}).await;
    assert_eq!(count.get_i64("n"), Ok(1));
    // Write concerns the set cannot satisfy are refused up front.
    let r = raw
        .run(doc! {"insert": "docs", "documents": [{"_id": 3}], "$db": "rs", "writeConcern": {"w": 5}})
        .await;
    assert_eq!(r.get_i32("code"), Ok(100));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repl_set_step_down_from_the_driver() {
    let mut cfg = ReplSetConfig::new("rs0", 3);
    cfg.election = sim::ElectionTime::fixed(Duration::from_millis(200));
    let sim = replset(cfg).await;
    let set = sim.replset().unwrap().clone();
    let c = client(&sim.uri(), true).await;
    let admin = c.database("admin");
    // Sent to a secondary, or outside admin: refused.
    let secondary = client(&set.member_uri(2), false).await;
    let err = secondary
        .database("admin")
        .run_command(doc! {"replSetStepDown": 60})
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(10107), "{err}");
    let err = c
        .database("rs")
        .run_command(doc! {"replSetStepDown": 60})
        .await
        .unwrap_err();
    assert_eq!(code(&err), Some(13), "{err}");
    let status = admin
        .run_command(doc! {"replSetGetStatus": 1})
        .await
        .unwrap();
    assert_eq!(status.get_i32("myState"), Ok(1));
    assert_eq!(status.get_array("members").unwrap().len(), 3);

    let reply = admin
        .run_command(doc! {"replSetStepDown": 60})
        .await
        .unwrap();
    assert_eq!(reply.get_f64("ok"), Ok(1.0));
    assert_eq!(set.wait_for_primary(Duration::from_secs(20)).await, Some(1));
    c.database("rs")
        .collection::<Document>("docs")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    let status = admin
        .run_command(doc! {"replSetGetStatus": 1})
        .await
        .unwrap();
    assert_eq!(status.get_i64("term"), Ok(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduled_failovers_rotate_the_primary_and_writes_keep_landing() {
    let mut cfg = ReplSetConfig::new("rs0", 3);
    cfg.election = sim::ElectionTime::fixed(Duration::from_millis(100));
    cfg.failover_every = Some(Duration::from_millis(400));
    let sim = replset(cfg).await;
    let set = sim.replset().unwrap().clone();
    let c = client(&sim.uri(), true).await;
    let coll = c.database("rs").collection::<Document>("docs");
    let mut i = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while set
        .failovers()
        .iter()
        .filter(|f| f.elected.is_some())
        .count()
        < 3
    {
        assert!(Instant::now() < deadline, "{:?}", set.failovers());
        coll.insert_one(doc! {"_id": i}).await.unwrap();
        i += 1;
    }
    let f = set.failovers();
    let moves: Vec<(usize, usize)> = f
        .iter()
        .take(3)
        .map(|f| (f.old_primary, f.new_primary))
        .collect();
    assert_eq!(moves, [(0, 1), (1, 2), (2, 0)]);
    assert_eq!(f[2].term, Some(4));
    assert_eq!(
        ids(&coll).await,
        (0..i).collect::<Vec<_>>(),
        "every acknowledged write is there"
    );
}

/// `--auth` and `--tls-*` apply to every member: the driver logs in over
/// TLS to the set found from a seed list, and again on the new primary
/// after a step-down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_member_authenticates_and_encrypts() {
    let certs = certs::Certs::new("mongoload replset CA");
    let mut cfg = ReplSetConfig::new("rs0", 3);
    cfg.election = sim::ElectionTime::fixed(Duration::from_millis(200));
    let sim = sim::start_replset(
        SimConfig {
            auth: Some(sim::AuthUser {
                user: "rsuser".into(),
                password: "rs:secret".into(),
            }),
            tls: Some(certs.tls_files()),
            ..Default::default()
        },
        cfg,
    )
    .await
    .expect("the replica set starts");
    let set = sim.replset().unwrap().clone();
    let seeds = sim.uri().trim_start_matches("mongodb://").to_owned();
    let (hosts, query) = seeds.split_once('?').unwrap();
    let uri = format!(
        "mongodb://rsuser:rs%3Asecret@{}?{query}&tls=true&tlsCAFile={}",
        hosts.trim_end_matches('/').to_owned() + "/",
        certs.ca.display()
    );
    let c = client(&uri, true).await;
    let coll = c.database("rs").collection::<Document>("docs");
    coll.insert_one(doc! {"_id": 1})
        .await
        .expect("written over TLS after login");
    set.step_down().expect("a primary to step down");
    coll.insert_one(doc! {"_id": 2})
        .await
        .expect("written on the new primary");
    assert_ne!(set.primary(), Some(0), "member 0 stepped down");
    assert_eq!(ids(&coll).await, [1, 2]);
    let wrong = uri.replace("rs%3Asecret", "wrong");
    let err = client(&wrong, true)
        .await
        .database("rs")
        .collection::<Document>("docs")
        .insert_one(doc! {"_id": 3})
        .await
        .expect_err("a wrong password is refused");
    assert!(
        matches!(*err.kind, ErrorKind::Authentication { .. }),
        "{err}"
    );
}
