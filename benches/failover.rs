//! How long the official driver is without a writable primary when the
//! simulator's replica set steps down, compared with the injected election
//! time: one client inserts every 5 ms through the seed list; the primary
//! steps down; the outage is the time from the last acknowledged insert
//! before the step-down to the first one after it, and the detection delay
//! the time from the simulator's election to that insert (what the
//! driver's streaming monitor adds). Run: `cargo bench --bench failover`.

use std::time::{Duration, Instant, SystemTime};

use mongodb::bson::{doc, Document};
use mongodb::options::ClientOptions;
use mongodb::Client;
use mongoload::sim::{self, ElectionTime, ReplSetConfig, SimConfig};

async fn one(election: Duration, retry_writes: bool) {
    let mut cfg = ReplSetConfig::new("rs0", 3);
    cfg.election = ElectionTime::fixed(election);
    let sim = sim::start_replset(SimConfig::default(), cfg)
        .await
        .expect("the replica set starts");
    let set = sim.replset().unwrap().clone();
    let mut opts = ClientOptions::parse(sim.uri()).await.unwrap();
    opts.server_selection_timeout = Some(Duration::from_millis(300));
    opts.retry_writes = Some(retry_writes);
    let client = Client::with_options(opts).unwrap();
    let coll = client.database("bench").collection::<Document>("failover");
    for i in 0..100 {
        coll.insert_one(doc! {"_id": i}).await.unwrap();
    }
    let mut last_ok = Instant::now();
    let (mut stepped, mut first_ok_after) = (None, None);
    let mut failed = 0;
    let mut i = 100;
    let start = Instant::now();
    while first_ok_after.is_none() && start.elapsed() < election * 5 + Duration::from_secs(5) {
        if stepped.is_none() && start.elapsed() > Duration::from_millis(300) {
            set.step_down().unwrap();
            stepped = Some(Instant::now());
        }
        let ok = coll.insert_one(doc! {"_id": i}).await.is_ok();
        i += 1;
        // Once step_down() returned no write can succeed before the election.
        match (ok, stepped) {
            (true, None) => last_ok = Instant::now(),
            (true, Some(_)) => first_ok_after = Some(Instant::now()),
            (false, _) => failed += 1,
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let f = &set.failovers()[0];
    let elected = f.elected.expect("the election ended");
    let election_took = elected.duration_since(f.stepped_down).unwrap_or_default();
    let after = first_ok_after.expect("writes resumed");
    let outage = after - last_ok;
    let detection = SystemTime::now()
        .duration_since(elected)
        .unwrap_or_default()
        .saturating_sub(after.elapsed());
    println!(
        "election {:>6} ms  retryWrites {retry_writes:<5}  outage {:>7.1} ms ({:+.1} %)  new primary seen {:>5.1} ms after its election  failed inserts {failed}",
        election.as_millis(),
        outage.as_secs_f64() * 1e3,
        (outage.as_secs_f64() / election_took.as_secs_f64() - 1.0) * 100.0,
        detection.as_secs_f64() * 1e3,
    );
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("== failover: write outage seen by the driver vs the injected election time");
    rt.block_on(async {
        for election in [500, 2000, 5000] {
            for retry in [true, false] {
                one(Duration::from_millis(election), retry).await;
            }
        }
    });
}
