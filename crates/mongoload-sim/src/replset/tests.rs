//! Tests of the replica set: elections, replication, rollback.

use super::*;

#[test]
fn election_times_parse() {
    assert_eq!(
        "2s".parse(),
        Ok(ElectionTime::fixed(Duration::from_secs(2)))
    );
    let r: ElectionTime = "2s..10s".parse().unwrap();
    assert_eq!(
        (r.min, r.max),
        (Duration::from_secs(2), Duration::from_secs(10))
    );
    let mut rng = SmallRng::seed_from_u64(3);
    for _ in 0..100 {
        let d = r.sample(&mut rng);
        assert!(d >= r.min && d <= r.max, "{d:?}");
    }
    assert!("10s..2s".parse::<ElectionTime>().is_err());
    assert!("soon".parse::<ElectionTime>().is_err());
    assert!("2s..".parse::<ElectionTime>().is_err());
}

#[test]
fn unspecified_addresses_are_advertised_as_loopback() {
    assert_eq!(
        advertised("0.0.0.0:27017".parse().unwrap()).to_string(),
        "127.0.0.1:27017"
    );
    assert_eq!(
        advertised("[::]:27018".parse().unwrap()).to_string(),
        "[::1]:27018"
    );
    assert_eq!(
        advertised("10.1.2.3:5".parse().unwrap()).to_string(),
        "10.1.2.3:5"
    );
}

#[derive(Debug, Default)]
struct Recorder(Mutex<Vec<(Option<i32>, Option<i32>)>>);

impl ChangeLog for Recorder {
    fn record(&self, ns: &str, _: &Key, before: Option<&Document>, after: Option<&Document>) {
        assert_eq!(ns, "d.c");
        let v = |d: Option<&Document>| d.map(|d| d.get_i32("v").unwrap());
        lock(&self.0).push((v(before), v(after)));
    }
}

#[test]
fn a_store_with_a_log_records_every_document_change() {
    let store = Store::default();
    let log = Arc::new(Recorder::default());
    store.set_log(log.clone());
    let (c, _) = store.collection_or_create("d", "c");
    let mut c = wlock(&c);
    c.insert(bson::doc! {"_id": 1, "v": 1}).unwrap();
    let id = Key(Bson::Int32(1));
    c.replace(&id, bson::doc! {"_id": 1, "v": 2}).unwrap();
    assert!(c.insert(bson::doc! {"_id": 1, "v": 3}).is_err());
    c.remove(&id);
    // Applying a change is not a change of this member's own.
    c.put(&id, Some(bson::doc! {"_id": 1, "v": 4}));
    assert_eq!(
        *lock(&log.0),
        [(None, Some(1)), (Some(1), Some(2)), (Some(2), None)]
    );
    assert_eq!(c.get(&id).unwrap().get_i32("v"), Ok(4));
}

#[test]
fn changes_apply_and_undo_on_a_store() {
    let store = Store::default();
    let id = Key(Bson::Int32(1));
    let ins = Change::Doc {
        ns: "d.c".into(),
        id: id.clone(),
        before: None,
        after: Some(bson::doc! {"_id": 1, "v": 1}),
    };
    let upd = Change::Doc {
        ns: "d.c".into(),
        id: id.clone(),
        before: Some(bson::doc! {"_id": 1, "v": 1}),
        after: Some(bson::doc! {"_id": 1, "v": 2}),
    };
    let index = Change::Catalog(Catalog::Collection {
        db: "d".into(),
        coll: "c".into(),
        indexes: vec![oplog::IndexSpec {
            name: "v_1".into(),
            key: vec![("v".into(), 1)],
            options: Default::default(),
            spec: bson::doc! {"v": 2, "key": {"v": 1}, "name": "v_1"},
        }],
    });
    apply(&store, &ins, true);
    apply(&store, &index, true);
    apply(&store, &upd, true);
    let c = store.collection("d", "c").unwrap();
    assert_eq!(rlock(&c).get(&id).unwrap().get_i32("v"), Ok(2));
    assert_eq!(rlock(&c).indexes.len(), 1);
    apply(&store, &upd, false);
    assert_eq!(rlock(&c).get(&id).unwrap().get_i32("v"), Ok(1));
    apply(&store, &ins, false);
    assert!(rlock(&c).is_empty());
    apply(
        &store,
        &Change::Catalog(Catalog::DropDatabase { db: "d".into() }),
        true,
    );
    assert!(store.collection("d", "c").is_none());
}

async fn set_with_timeout(timeout: Duration) -> crate::SimHandle {
    let mut config = ReplSetConfig::new("rs", 3);
    config.election_timeout = timeout;
    let sim = crate::SimConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        ..crate::SimConfig::default()
    };
    crate::start_replset(sim, config).await.unwrap()
}

#[tokio::test]
async fn a_primary_silent_past_the_election_timeout_is_replaced_and_steps_down_after() {
    let sim = set_with_timeout(Duration::from_millis(500)).await;
    let set = sim.replset().unwrap().clone();
    // A freeze shorter than the timeout changes nothing.
    assert!(set.faults(0).freeze());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(set.faults(0).thaw());
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert_eq!((set.primary(), set.term()), (Some(0), 1));
    assert_eq!(set.faults(0).records()[0].election, None);
    // One longer: member 1 is elected once the timeout passes, in term 2,
    // and member 0 is not primary when it thaws.
    assert!(set.faults(0).freeze());
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(set.primary(), Some(0), "replaced before the timeout");
    let p = set.wait_for_primary(Duration::ZERO).await;
    assert_eq!(p, Some(0));
    let deadline = Instant::now() + Duration::from_secs(5);
    while set.primary() != Some(1) {
        assert!(Instant::now() < deadline, "never replaced");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(set.term(), 2);
    let r = set.faults(0).records()[1].clone();
    let after = r
        .election
        .expect("the record says when")
        .duration_since(r.start);
    assert!(
        after >= Duration::from_millis(500) && after < Duration::from_secs(2),
        "{after:?}"
    );
    assert!(set.faults(0).thaw());
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!((set.primary(), set.term()), (Some(1), 2));
    let f = set.failovers();
    assert_eq!((f.len(), f[0].old_primary, f[0].new_primary), (1, 0, 1));
    // A blackholed primary likewise; a silent member is not elected.
    assert!(set.faults(2).blackhole());
    assert!(set.faults(1).blackhole());
    let deadline = Instant::now() + Duration::from_secs(5);
    while set.primary() != Some(0) {
        assert!(Instant::now() < deadline, "never replaced");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let r = set.faults(1).records()[0].clone();
    assert_eq!(r.kind, "blackhole");
    assert!(r.election.is_some());
    // A silent secondary is never "replaced".
    assert_eq!(set.faults(2).records()[0].election, None);
    sim.shutdown().await;
}

#[tokio::test]
async fn a_silent_primarys_held_back_writes_are_rolled_back_at_the_election() {
    let sim = set_with_timeout(Duration::from_millis(200)).await;
    let set = sim.replset().unwrap().clone();
    set.set_rollback_writes(2);
    let (c, _) = set.0.members[0].shared.store.collection_or_create("d", "c");
    for i in 0..3 {
        wlock(&c).insert(bson::doc! {"_id": i}).unwrap();
    }
    let on = |m: usize| {
        let (c, _) = set.0.members[m].shared.store.collection_or_create("d", "c");
        let n = (0..3)
            .filter(|&i| rlock(&c).get(&Key(Bson::Int32(i))).is_some())
            .count();
        n
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!((on(0), on(1)), (3, 1), "two writes held back");
    assert!(set.faults(0).freeze());
    let deadline = Instant::now() + Duration::from_secs(5);
    while set.primary() != Some(1) {
        assert!(Instant::now() < deadline, "never replaced");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let f = &set.failovers()[0];
    assert_eq!(f.rolled_back.len(), 2, "{f:?}");
    assert_eq!((on(0), on(1), on(2)), (1, 1, 1));
    assert!(set.faults(0).thaw());
    sim.shutdown().await;
}
