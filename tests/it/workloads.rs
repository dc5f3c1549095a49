//! The built-in workloads against the simulator, through the real driver:
//! what each prepare step leaves on the server, sysbench's per-step counts
//! and the values its sum and distinct steps return, delete + reinsert
//! keeping counts constant, bounded collections staying at their bound,
//! an interrupted prepare resuming to the right count, every example
//! config passing `check-config` and running briefly without errors, and
//! each composite kind (sysbench, YCSB F, every bounded insert) counted
//! once per scheduled operation, with the run log, the summary and
//! `/metrics` agreeing to the operation and to the request.

use crate::common::{self, sum, TestDb};

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document};
use mongodb::options::ClientOptions;
use mongodb::{Client, Database};
use mongoload::config::{
    self, Config, CustomConfig, InsertBenchmarkConfig, KindConfig, LargeDocConfig, NameNumConfig,
    NameNumMode, SecretUri, StageConfig, SysbenchConfig, WorkloadConfig, YcsbConfig, YcsbLetter,
};
use mongoload::daemon;
use mongoload::mongo::Deployment;
use mongoload::report::{self, StageReport};
use mongoload::schedule::Stage;
use mongoload::sim::{self, SimConfig};
use mongoload::workload::sysbench::{self, sum_pipeline};
use mongoload::workload::{self, Action, LastInsert, Workload};

async fn client(sim: &TestDb) -> Client {
    let mut opts = ClientOptions::parse(sim.uri()).await.unwrap();
    opts.server_selection_timeout = Some(Duration::from_secs(3));
    Client::with_options(opts).unwrap()
}

/// A config with one workload and no parameter table, pointed at the
/// simulator, the HTTP endpoint on a free port.
fn base_config(sim: &TestDb, database: &str, workloads: Vec<WorkloadConfig>) -> Config {
    let database = sim.database(database);
    let text = format!(
        "[target]\nuri = \"{}\"\ndatabase = \"{database}\"\n[http]\nlisten = \"127.0.0.1:0\"\n\
         [run]\nshutdown_grace = \"20s\"\n",
        sim.uri()
    );
    let mut cfg: Config = config::parse_with_env(
        &format!("{text}[[workloads]]\nname = \"x\"\nkind = \"mixed\"\n[[workloads.stages]]\nconcurrency = 1\nduration = \"1s\"\n"),
        Path::new("test.toml"),
        std::iter::empty(),
    )
    .unwrap();
    cfg.workloads = workloads;
    cfg.validate().expect("the test's config is valid");
    cfg
}

/// A workload of `kind` with one closed-loop stage, parsed as the config
/// loader parses it, then given `kind`'s parameters.
fn workload(name: &str, kind: KindConfig, concurrency: f64, secs: u64) -> WorkloadConfig {
    let mut w: WorkloadConfig = toml_table(&format!(
        "name = \"{name}\"\nkind = \"{}\"\nmax_inflight = 16\nseed = 7\n",
        kind.name()
    ));
    w.kind = kind;
    w.stages = vec![stage(concurrency, secs)];
    w
}

/// A closed-loop stage of `concurrency` workers for `secs` seconds.
fn stage(concurrency: f64, secs: u64) -> StageConfig {
    toml_table(&format!(
        "name = \"run\"\nconcurrency = {concurrency}\nduration = \"{secs}s\"\n"
    ))
}

/// Runs the daemon until its schedules end; returns the `/metrics` page.
async fn run_daemon(cfg: Config) -> (String, daemon::Summary) {
    let running = daemon::start(cfg).await.expect("daemon starts");
    let metrics = running.metrics.clone();
    let summary = tokio::time::timeout(Duration::from_secs(120), running.wait())
        .await
        .expect("the run ends");
    (metrics.encode().unwrap(), summary)
}

fn ops(page: &str, workload: &str, op: &str, outcome: &str) -> u64 {
    sum(
        page,
        "mongoload_operations_total",
        &[("workload", workload), ("op", op), ("outcome", outcome)],
    ) as u64
}

fn ops_total(page: &str, workload: &str, op: &str) -> u64 {
    ops(page, workload, op, "ok") + ops(page, workload, op, "error")
}

/// Runs a workload's prepare steps through the target layer.
async fn prepare(db: &Database, w: &dyn Workload) {
    let target = Deployment::new(db.clone(), w, Duration::from_secs(30));
    for step in w.prepare() {
        target
            .prepare(&step, |_, _| {})
            .await
            .expect("prepare step");
    }
}

async fn count(db: &Database, coll: &str) -> u64 {
    db.collection::<Document>(coll)
        .count_documents(doc! {})
        .await
        .unwrap()
}

async fn index_keys(db: &Database, coll: &str) -> Vec<Document> {
    db.collection::<Document>(coll)
        .list_indexes()
        .await
        .unwrap()
        .try_collect::<Vec<_>>()
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.keys)
        .collect()
}

fn build(kind: KindConfig) -> Arc<dyn Workload> {
    workload("w", kind, 1.0, 1).build().expect("builds")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepare_of_every_kind_loads_its_documents_and_indexes() {
    let sim = common::test_db().await;
    let client = client(&sim).await;
    let db = client.database(&sim.database("prep"));

    let w = build(KindConfig::Sysbench(SysbenchConfig {
        collections: 3,
        docs_per_collection: 250,
        load_batch: 100,
        ..Default::default()
    }));
    prepare(&db, &*w).await;
    for name in ["sbtest1", "sbtest2", "sbtest3"] {
        assert_eq!(count(&db, name).await, 250, "{name}");
        assert!(index_keys(&db, name).await.contains(&doc! {"k": 1}));
    }
    // Idempotent: a second prepare changes nothing.
    prepare(&db, &*w).await;
    assert_eq!(count(&db, "sbtest2").await, 250);

    let w = build(KindConfig::InsertBenchmark(InsertBenchmarkConfig {
        initial_docs: 300,
        ..Default::default()
    }));
    prepare(&db, &*w).await;
    assert_eq!(count(&db, "purchases_index").await, 300);
    let keys = index_keys(&db, "purchases_index").await;
    for k in workload::insert_benchmark::index_keys() {
        assert!(keys.contains(&k), "{k} in {keys:?}");
    }

    let w = build(KindConfig::NameNum(NameNumConfig {
        initial_docs: 400,
        ..Default::default()
    }));
    prepare(&db, &*w).await;
    assert_eq!(count(&db, "namenum").await, 400);
    assert!(index_keys(&db, "namenum").await.contains(&doc! {"Num": 1}));
    let d = db
        .collection::<Document>("namenum")
        .find_one(doc! {"_id": 5i64})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(d.get_str("Name"), Ok("Edison"));

    let w = build(KindConfig::LargeDoc(LargeDocConfig {
        initial_docs: 60,
        ..Default::default()
    }));
    prepare(&db, &*w).await;
    assert_eq!(count(&db, "largedoc").await, 60);

    // A YCSB workload built with fewer records than are present (another
    // run's inserts) takes its insert keys above them.
    let ycsb = |records| YcsbConfig {
        workload: YcsbLetter::D,
        record_count: records,
        ..Default::default()
    };
    prepare(&db, &workload::ycsb::build(&ycsb(500), 1)).await;
    assert_eq!(count(&db, "usertable").await, 500);
    let w = workload::ycsb::build(&ycsb(300), 1);
    prepare(&db, &w).await;
    assert_eq!(count(&db, "usertable").await, 500);
    assert_eq!(w.next_key().bound(), 500);
    let key = workload::ycsb::key_name(17);
    let rec = db
        .collection::<Document>("usertable")
        .find_one(doc! {"_id": &key})
        .await
        .unwrap()
        .expect("record 17 by its YCSB key");
    assert_eq!(rec.len(), 11);

    let custom: CustomConfig = toml_table(
        r#"
        initial_docs = 120
        document = { customer = { "$gen" = "uniform", max = 10 }, when = { "$gen" = "date" } }
        [[indexes]]
        keys = { customer = 1, when = -1 }
        [[operations]]
        op = "find"
        filter = { customer = 3 }
        "#,
    );
    let w = build(KindConfig::Custom(custom));
    prepare(&db, &*w).await;
    assert_eq!(count(&db, "custom").await, 120);
    // Key order of the index spec is kept from the config.
    assert!(index_keys(&db, "custom")
        .await
        .contains(&doc! {"customer": 1i64, "when": -1i64}));
    sim.shutdown().await;
}

/// A parameter table parsed as the config loader parses it.
fn toml_table<T: serde::de::DeserializeOwned>(text: &str) -> T {
    let built = ::config::Config::builder()
        .add_source(::config::File::from_str(text, ::config::FileFormat::Toml))
        .build()
        .unwrap();
    built.try_deserialize().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sysbench_sum_and_distinct_return_what_the_data_implies() {
    let sim = common::test_db().await;
    let client = client(&sim).await;
    let db = client.database(&sim.database("sbvalues"));
    let cfg = SysbenchConfig {
        collections: 2,
        docs_per_collection: 600,
        ..Default::default()
    };
    let w = sysbench::build(&cfg, 11);
    prepare(&db, &w).await;

    let mut src = w.worker(0, 3);
    let mut checked = 0;
    while checked < 10 {
        let op = src.next_op();
        for step in op.requests().iter().cloned() {
            match step.action {
                Action::Aggregate {
                    collection,
                    pipeline,
                } => {
                    let range = pipeline[0].get_document("$match").unwrap().clone();
                    assert_eq!(pipeline, sum_pipeline(range.clone()));
                    let (lo, hi) = bounds(&range);
                    let expect: i64 = (lo..hi.min(600))
                        .map(|i| w.loaded_document(collection, i).get_i64("k").unwrap())
                        .sum();
                    let got: Vec<Document> = db
                        .collection::<Document>(&w.collections()[collection])
                        .aggregate(pipeline)
                        .await
                        .unwrap()
                        .try_collect()
                        .await
                        .unwrap();
                    assert_eq!(got.len(), 1);
                    let total = match got[0].get("total") {
                        Some(Bson::Int64(v)) => *v,
                        Some(Bson::Int32(v)) => *v as i64,
                        other => panic!("total {other:?}"),
                    };
                    assert_eq!(total, expect, "sum of k over {range}");
                    checked += 1;
                }
                Action::Distinct {
                    collection,
                    field,
                    filter,
                } => {
                    let (lo, hi) = bounds(&filter);
                    let expect: BTreeSet<String> = (lo..hi.min(600))
                        .map(|i| {
                            w.loaded_document(collection, i)
                                .get_str("c")
                                .unwrap()
                                .to_string()
                        })
                        .collect();
                    let got: BTreeSet<String> = db
                        .collection::<Document>(&w.collections()[collection])
                        .distinct(&field, filter.clone())
                        .await
                        .unwrap()
                        .into_iter()
                        .map(|b| b.as_str().unwrap().to_string())
                        .collect();
                    assert_eq!(got, expect, "distinct c over {filter}");
                    checked += 1;
                }
                _ => {}
            }
        }
    }
    sim.shutdown().await;
}

fn bounds(filter: &Document) -> (u64, u64) {
    let r = filter.get_document("_id").unwrap();
    (
        r.get_i64("$gte").unwrap() as u64,
        r.get_i64("$lt").unwrap() as u64,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sysbench_counts_each_step_as_a_request_and_keeps_the_data_set() {
    let sim = common::test_db().await;
    let mut w = workload("sb", KindConfig::Sysbench(Default::default()), 3.0, 3);
    w.kind = KindConfig::Sysbench(SysbenchConfig {
        collections: 2,
        docs_per_collection: 400,
        ..Default::default()
    });
    let mut ro = workload("sbro", KindConfig::Sysbench(Default::default()), 1.0, 3);
    ro.kind = KindConfig::Sysbench(SysbenchConfig {
        collections: 2,
        docs_per_collection: 400,
        read_only: true,
        ..Default::default()
    });
    let cfg = base_config(&sim, "sb", vec![w, ro]);
    let (page, summary) = run_daemon(cfg).await;

    let tx = ops_total(&page, "sb", "transaction");
    assert!(tx > 20, "only {tx} transactions in 3 s:\n{page}");
    let step = |w: &str, step: &str| {
        let (ok, error) = requests(&page, w, "transaction", step);
        ok + error
    };
    assert_eq!(step("sb", "point_select"), 10 * tx);
    for s in [
        "simple_range",
        "sum_range",
        "order_range",
        "distinct_range",
        "update_index",
        "update_non_index",
        "delete",
        "insert",
    ] {
        assert_eq!(step("sb", s), tx, "{s}");
    }
    // Three workers deleting and reinserting at once never collide.
    assert_eq!(ops(&page, "sb", "transaction", "error"), 0, "{page}");
    // Only the transaction is an operation.
    assert_eq!(
        op_labels(&page, "sb"),
        BTreeSet::from(["transaction".to_owned()])
    );
    // The read-only variant runs only reads.
    let ro_tx = ops_total(&page, "sbro", "transaction");
    assert!(ro_tx > 5);
    assert_eq!(step("sbro", "point_select"), 10 * ro_tx);
    assert_eq!(step("sbro", "update_index"), 0);
    assert!(!page.contains(r#"step="update_index",workload="sbro""#));
    assert_eq!(ops(&page, "sbro", "transaction", "error"), 0);
    // Each transaction returned documents: the range steps' 100 each.
    let range_docs = sum(
        &page,
        "mongoload_request_documents_total",
        &[("workload", "sb"), ("step", "simple_range")],
    );
    assert!(range_docs > 50.0 * tx as f64, "{range_docs} for {tx}");
    let tx_docs = sum(
        &page,
        "mongoload_documents_total",
        &[("workload", "sb"), ("op", "transaction")],
    );
    assert!(
        tx_docs >= range_docs,
        "a transaction's documents are its requests'"
    );
    assert!(summary.workloads.iter().all(|w| w.ok > 0));

    // Delete + reinsert keeps every collection at its size, and _id 0..400.
    let client = client(&sim).await;
    let db = client.database(&sim.database("sb"));
    for name in ["sbtest1", "sbtest2"] {
        assert_eq!(count(&db, name).await, 400, "{name}");
        let ids: HashSet<i64> = db
            .collection::<Document>(name)
            .distinct("_id", doc! {})
            .await
            .unwrap()
            .into_iter()
            .map(|b| b.as_i64().unwrap())
            .collect();
        assert_eq!(ids, (0..400).collect());
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_benchmark_counts_documents_and_holds_its_bound() {
    let sim = common::test_db().await;
    let mut w = workload(
        "ii",
        KindConfig::InsertBenchmark(Default::default()),
        3.0,
        2,
    );
    let params = InsertBenchmarkConfig {
        batch_size: 50,
        initial_docs: 400,
        max_docs: 1000,
        query_workers: 1,
        query_rate: 50.0,
        ..Default::default()
    };
    w.kind = KindConfig::InsertBenchmark(params.clone());
    let cfg = base_config(&sim, "ii", vec![w]);
    let (page, summary) = run_daemon(cfg).await;
    assert_eq!(summary.workloads[0].errors, 0, "{page}");
    let inserts = ops(&page, "ii", "insert", "ok");
    let docs = sum(
        &page,
        "mongoload_documents_total",
        &[("workload", "ii"), ("op", "insert")],
    ) as u64;
    assert_eq!(docs, 50 * inserts, "documents/s come from the batches");
    assert!(docs > 1000, "the bound is reached: {docs} inserted");
    let queries = ops(&page, "ii", "query", "ok");
    // The cap bounds the queries from above; from below only that the
    // query worker ran (a starved machine runs fewer: this binary runs
    // other tests beside it).
    assert!(
        (1..=110).contains(&queries),
        "one query worker capped at 50/s for 2 s: {queries}"
    );
    let client = client(&sim).await;
    let db = client.database(&sim.database("ii"));
    assert_eq!(count(&db, "purchases_index").await, 1000);
    // The newest documents are the ones kept.
    let oldest = db
        .collection::<Document>("purchases_index")
        .find_one(doc! {})
        .sort(doc! {"_id": 1})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(oldest.get_i64("_id").unwrap() as u64, 400 + docs - 1000);
    // A restart's prepare does not bring back the evicted loaded documents.
    let again = workload::insert_benchmark::build(&params, 7);
    prepare(&db, &again).await;
    assert_eq!(count(&db, "purchases_index").await, 1000);
    assert_eq!(again.next_id().bound(), 400 + docs);
    sim.shutdown().await;
}

/// Sends one operation's requests as plain driver calls (the inserts and
/// evictions of a bounded insert).
async fn send(db: &Database, coll: &str, op: &workload::Op) {
    let c = db.collection::<Document>(coll);
    let actions = op.action().into_iter();
    for action in actions.chain(op.requests().iter().map(|r| &r.action)) {
        match action {
            Action::InsertMany { docs, .. } => {
                c.insert_many(docs.clone()).await.unwrap();
            }
            Action::DeleteMany { filter, .. } => {
                c.delete_many(filter.clone()).await.unwrap();
            }
            other => panic!("not a bounded insert's request: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_lands_after_its_eviction_is_removed_by_its_worker_s_next() {
    // The order a stalled worker makes: its batch is taken, another worker
    // inserts past the bound (evicting the stalled batch's keys before
    // they exist), then the batch lands. The stalled worker's next
    // eviction reaches back over it, so the collection is back at its
    // bound after that worker's next insert.
    let sim = common::test_db().await;
    let client = client(&sim).await;
    let db = client.database(&sim.database("stall"));
    let b = workload::BoundedInserts::new(0, 0, 100);
    let (mut stalled, mut other) = (LastInsert::default(), LastInsert::default());
    let batch = |last: &mut LastInsert| b.insert_many(0, 10, last, |id| doc! {"_id": id as i64});
    let late = batch(&mut stalled);
    for _ in 0..10 {
        send(&db, "c", &batch(&mut other)).await;
    }
    // Keys 10..110 went in; the eviction of the keys below 10 found none.
    assert_eq!(count(&db, "c").await, 100);
    send(&db, "c", &late).await;
    assert_eq!(count(&db, "c").await, 110, "the stalled batch landed");
    // The other worker's next eviction is the plain range: keys 10..20.
    send(&db, "c", &batch(&mut other)).await;
    assert_eq!(count(&db, "c").await, 110);
    send(&db, "c", &batch(&mut stalled)).await;
    assert_eq!(
        count(&db, "c").await,
        100,
        "the stalled worker's next insert evicts it"
    );
    let oldest = db
        .collection::<Document>("c")
        .find_one(doc! {})
        .sort(doc! {"_id": 1})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(oldest.get_i64("_id").unwrap(), 30);
    // In order, nothing reaches back: the next eviction is one batch.
    let op = batch(&mut stalled);
    let Action::DeleteMany { filter, .. } = &op.requests()[1].action else {
        panic!("{op:?}")
    };
    assert_eq!(filter, &doc! {"_id": {"$gte": 30i64, "$lt": 40i64}});
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupted_prepare_resumes_to_the_right_count() {
    let sim = common::test_db().await;
    let client = client(&sim).await;
    for (kind, coll, total) in [
        (
            KindConfig::NameNum(NameNumConfig {
                mode: NameNumMode::Query,
                initial_docs: 30_000,
                load_batch: 200,
                ..Default::default()
            }),
            "namenum",
            30_000u64,
        ),
        (
            KindConfig::Ycsb(YcsbConfig {
                workload: YcsbLetter::C,
                record_count: 8_000,
                load_batch: 100,
                ..Default::default()
            }),
            "usertable",
            8_000,
        ),
    ] {
        let database = format!("resume_{}", kind.table());
        let mk = || {
            let w = workload("r", kind.clone(), 1.0, 1);
            base_config(&sim, &database, vec![w])
        };
        let db = client.database(&sim.database(&database));
        let running = daemon::start(mk()).await.unwrap();
        // Stop once part of the load is in; /status shows the progress.
        let mut seen = 0;
        let mut status_ratio = 0.0;
        for _ in 0..400 {
            seen = count(&db, coll).await;
            let status = status(running.http_addr).await;
            let p = &status["workloads"][0]["prepare"];
            assert_eq!(p["documents_total"], total, "{status}");
            status_ratio = p["ratio"].as_f64().unwrap();
            if seen >= total / 5 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(status_ratio > 0.0 && status_ratio < 1.0, "{status_ratio}");
        let metrics = running.metrics.clone();
        running.stop();
        running.wait().await;
        let partial = count(&db, coll).await;
        assert!(
            partial >= seen && partial < total,
            "{kind:?}: interrupted at {partial} of {total}"
        );
        let page = metrics.encode().unwrap();
        let ratio = sum(
            &page,
            "mongoload_prepare_progress_ratio",
            &[("workload", "r")],
        );
        assert!(ratio > 0.0 && ratio < 1.0, "progress gauge {ratio}");

        let (page, summary) = run_daemon(mk()).await;
        assert_eq!(count(&db, coll).await, total, "{kind:?} after resuming");
        assert_eq!(
            sum(
                &page,
                "mongoload_prepare_progress_ratio",
                &[("workload", "r")]
            ),
            1.0
        );
        assert_eq!(summary.workloads[0].errors, 0, "{page}");
        assert!(
            summary.workloads[0].ok > 0,
            "the run went on after the load"
        );
    }
    sim.shutdown().await;
}

/// `GET /status` of a running daemon, as JSON.
async fn status(addr: std::net::SocketAddr) -> serde_json::Value {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /status HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).await.unwrap();
    let raw = String::from_utf8(raw).unwrap();
    let (_, body) = raw.split_once("\r\n\r\n").unwrap();
    serde_json::from_str(body).unwrap()
}

fn examples() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("etc/examples");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_example_passes_check_config() {
    let examples = examples();
    let kinds: HashSet<String> = examples
        .iter()
        .filter_map(|p| Some(p.file_stem()?.to_str()?.to_string()))
        .collect();
    for k in KindConfig::NAMES {
        assert!(kinds.contains(*k), "no etc/examples/{k}.toml");
    }
    for path in examples {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_mongoload"))
            .arg("check-config")
            .arg("--config")
            .arg(&path)
            .env_remove("MONGOLOAD_CONFIG")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}: {}{}",
            path.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains(": ok"), "{stdout}");
    }
}

/// Shrinks an example's data sizes and schedule so it runs in seconds.
fn scale_down(cfg: &mut Config, sim: &TestDb, database: &str) {
    cfg.target.uri = Some(SecretUri::new(sim.uri()));
    cfg.target.uri_file = None;
    cfg.target.database = sim.database(database);
    cfg.http.listen = "127.0.0.1:0".parse().unwrap();
    cfg.run.shutdown_grace = Duration::from_secs(20);
    for w in &mut cfg.workloads {
        w.repeat = false;
        w.max_inflight = w.max_inflight.min(8);
        w.stages = vec![stage(2.0, 2)];
        // A time-of-day example runs the same short stage list instead.
        w.windows.clear();
        w.default = None;
        w.timezone = None;
        if let KindConfig::Mixed(m) = &mut w.kind {
            m.initial_docs = 200;
            m.doc_size = config::ByteSize(1024);
        }
        if let KindConfig::InsertBenchmark(m) = &mut w.kind {
            m.initial_docs = 100;
            m.max_docs = 1000;
        }
        if let KindConfig::Sysbench(m) = &mut w.kind {
            m.collections = 2;
            m.docs_per_collection = 200;
        }
        if let KindConfig::NameNum(m) = &mut w.kind {
            m.initial_docs = 200;
            m.max_docs = 300;
        }
        if let KindConfig::LargeDoc(m) = &mut w.kind {
            m.initial_docs = 50;
        }
        if let KindConfig::Ycsb(m) = &mut w.kind {
            m.record_count = 200;
        }
        if let KindConfig::Custom(m) = &mut w.kind {
            m.initial_docs = 100;
            m.max_docs = 200;
        }
    }
    cfg.validate().expect("the scaled copy is valid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_runs_briefly_against_the_simulator() {
    let sim = common::test_db().await;
    for (i, path) in examples().into_iter().enumerate() {
        let mut cfg = config::load_with_env(&path, std::iter::empty()).unwrap();
        scale_down(&mut cfg, &sim, &format!("example{i}"));
        let (page, summary) = run_daemon(cfg).await;
        for w in &summary.workloads {
            assert!(w.ok > 0, "{}: {w:?}", path.display());
            assert_eq!(w.errors, 0, "{}: {w:?}\n{page}", path.display());
        }
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_doc_inserts_and_queries_side_by_side() {
    let sim = common::test_db().await;
    let mut w = workload("ld", KindConfig::LargeDoc(Default::default()), 4.0, 2);
    w.kind = KindConfig::LargeDoc(LargeDocConfig {
        initial_docs: 100,
        ..Default::default()
    });
    let cfg = base_config(&sim, "ld", vec![w]);
    let (page, summary) = run_daemon(cfg).await;
    assert_eq!(summary.workloads[0].errors, 0, "{page}");
    let inserts = ops(&page, "ld", "insert", "ok");
    let queries = ops(&page, "ld", "query", "ok");
    // 2 insert and 2 query workers of similar speed.
    assert!(inserts > 20 && queries > 20, "{inserts} / {queries}");
    let ratio = inserts as f64 / queries as f64;
    assert!((0.33..3.0).contains(&ratio), "{inserts} / {queries}");
    // Every query found its document: _ids are only taken once inserted…
    // or about to be, so allow the few in flight.
    let found = sum(
        &page,
        "mongoload_documents_total",
        &[("workload", "ld"), ("op", "query")],
    ) as u64;
    assert!(found + 10 >= queries, "{found} of {queries} found");
    let client = client(&sim).await;
    assert_eq!(
        count(&client.database(&sim.database("ld")), "largedoc").await,
        100 + inserts
    );
    sim.shutdown().await;
}

/// Runs workload `w` alone for one open-loop stage of `rate` ops/s over
/// `secs` seconds, with a run log; returns the `/metrics` page, the final
/// summary and the stage report.
async fn open_loop(
    sim: &TestDb,
    mut w: WorkloadConfig,
    rate: u32,
    secs: u64,
) -> (String, daemon::Summary, StageReport) {
    w.stages = vec![toml_table(&format!(
        "name = \"run\"\nrate = {rate}\nduration = \"{secs}s\"\n"
    ))];
    let name = w.name.clone();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = base_config(sim, &name, vec![w]);
    cfg.run.log = Some(dir.path().join("runs.jsonl"));
    let (page, summary) = run_daemon(cfg).await;
    let mut reports = report::read(&dir.path().join("runs.jsonl")).unwrap();
    assert_eq!(reports.len(), 1, "one stage, one report");
    (page, summary, reports.remove(0))
}

fn requests(page: &str, workload: &str, op: &str, step: &str) -> (u64, u64) {
    let n = |outcome| {
        sum(
            page,
            "mongoload_requests_total",
            &[
                ("workload", workload),
                ("op", op),
                ("step", step),
                ("outcome", outcome),
            ],
        ) as u64
    };
    (n("ok"), n("error"))
}

/// The `op` labels `/metrics` has operations of for `workload`.
fn op_labels(page: &str, workload: &str) -> BTreeSet<String> {
    page.lines()
        .filter(|l| l.starts_with("mongoload_operations_total{"))
        .filter(|l| l.contains(&format!("workload=\"{workload}\"")))
        .filter_map(|l| {
            let (_, rest) = l.split_once("op=\"")?;
            Some(rest.split_once('"')?.0.to_owned())
        })
        .collect()
}

/// What every composite kind must satisfy: each scheduled operation is
/// counted once, and the run log, the summary and `/metrics` agree to the
/// operation and to the request; mongoload caused no error.
fn assert_counted_once(
    page: &str,
    summary: &daemon::Summary,
    r: &StageReport,
    rate: u32,
    secs: u64,
) {
    let w = r.workload.as_str();
    let scheduled = Stage::rate("run", f64::from(rate), Duration::from_secs(secs))
        .unwrap()
        .total_ops();
    let done = r.operations.ok + r.operations.error;
    assert_eq!(
        done + r.missed,
        scheduled,
        "{w}: every scheduled operation is accounted for"
    );
    let metric_ops: u64 = r.ops.iter().map(|o| ops_total(page, w, &o.op)).sum();
    let all_ops = sum(page, "mongoload_operations_total", &[("workload", w)]) as u64;
    assert_eq!(
        all_ops, done,
        "{w}: the sum over op is the scheduled operations done\n{page}"
    );
    assert_eq!(metric_ops, done);
    assert_eq!(
        op_labels(page, w),
        r.ops.iter().map(|o| o.op.clone()).collect(),
        "{w}: only the declared op labels"
    );
    for o in &r.ops {
        assert_eq!(ops(page, w, &o.op, "ok"), o.operations.ok, "{w} {}", o.op);
        assert_eq!(
            ops(page, w, &o.op, "error"),
            o.operations.error,
            "{w} {}",
            o.op
        );
        for s in &o.steps {
            let (ok, error) = requests(page, w, &o.op, &s.step);
            assert_eq!(
                (ok, error),
                (s.requests.ok, s.requests.error),
                "{w} {} {}",
                o.op,
                s.step
            );
            // The steps of an operation of several steps have samples of
            // their own for `report --compare` (whole intervals only: at
            // most the step's requests); a single call's step is its op.
            match (&s.samples, o.steps.len()) {
                (None, 1) => {}
                (Some(samples), n) if n > 1 => {
                    let stage = r.samples.as_ref().expect("the stage's samples");
                    assert_eq!(samples.len(), stage.all.len(), "{w} {} {}", o.op, s.step);
                    let sampled: u64 = samples.ok.iter().sum();
                    assert!(sampled <= s.requests.ok, "{w} {} {}", o.op, s.step);
                    assert!(
                        sampled > 0 || s.requests.ok < 10,
                        "{w} {} {}: {samples:?}",
                        o.op,
                        s.step
                    );
                }
                (samples, n) => panic!("{w} {} {}: {n} steps, samples {samples:?}", o.op, s.step),
            }
        }
    }
    let s = summary.workloads.iter().find(|s| s.name == w).unwrap();
    assert_eq!(
        (s.ok, s.errors, s.missed),
        (r.operations.ok, r.operations.error, r.missed)
    );
    assert_eq!(
        r.operations.error, 0,
        "{w}: mongoload caused errors\n{page}"
    );
    assert!(r.operations.ok > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sysbench_transaction_is_one_operation_of_eighteen_requests() {
    let sim = common::test_db().await;
    let mut w = workload("sbonce", KindConfig::Sysbench(Default::default()), 1.0, 1);
    // Few documents in one collection and many workers: concurrent
    // transactions would meet on the same _id if ids were not claimed.
    w.kind = KindConfig::Sysbench(SysbenchConfig {
        collections: 1,
        docs_per_collection: 60,
        ..Default::default()
    });
    let (page, summary, r) = open_loop(&sim, w, 40, 3).await;
    assert_counted_once(&page, &summary, &r, 40, 3);
    assert_eq!(r.ops.len(), 1);
    let tx = &r.ops[0];
    assert_eq!(tx.op, "transaction");
    let n = tx.operations.ok;
    let steps: Vec<(&str, u64)> = tx
        .steps
        .iter()
        .map(|s| (s.step.as_str(), s.requests.ok))
        .collect();
    assert_eq!(
        steps,
        [
            ("point_select", 10 * n),
            ("simple_range", n),
            ("sum_range", n),
            ("order_range", n),
            ("distinct_range", n),
            ("update_index", n),
            ("update_non_index", n),
            ("delete", n),
            ("insert", n),
        ]
    );
    assert_eq!(
        requests(&page, "sbonce", "transaction", "point_select").0,
        10 * n
    );
    // A transaction takes at least as long as its slowest request.
    assert!(tx.latency_ns.max >= tx.steps.iter().map(|s| s.latency_ns.max).max().unwrap());
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ycsb_f_read_modify_write_is_one_operation() {
    let sim = common::test_db().await;
    let mut w = workload("ycsbf", KindConfig::Ycsb(Default::default()), 1.0, 1);
    w.kind = KindConfig::Ycsb(YcsbConfig {
        workload: YcsbLetter::F,
        record_count: 200,
        ..Default::default()
    });
    let (page, summary, r) = open_loop(&sim, w, 60, 3).await;
    assert_counted_once(&page, &summary, &r, 60, 3);
    let rmw = r.ops.iter().find(|o| o.op == "read_modify_write").unwrap();
    let steps: Vec<(&str, u64)> = rmw
        .steps
        .iter()
        .map(|s| (s.step.as_str(), s.requests.ok))
        .collect();
    let n = rmw.operations.ok;
    assert!(n > 0);
    assert_eq!(steps, [("read", n), ("update", n)]);
    let read = r.ops.iter().find(|o| o.op == "read").unwrap();
    assert_eq!(read.steps[0].requests.ok, read.operations.ok);
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ycsb_e_inserts_wrap_into_max_docs_slots_and_the_audit_follows() {
    let sim = common::test_db().await;
    let mut w = workload("ycsbe", KindConfig::Ycsb(Default::default()), 1.0, 1);
    w.kind = KindConfig::Ycsb(YcsbConfig {
        workload: YcsbLetter::E,
        record_count: 10,
        max_docs: Some(15),
        max_scan_length: 5,
        ..Default::default()
    });
    w.audit = true;
    // 5 % inserts of 600 operations: about 30, so the bound is passed.
    let (page, summary, r) = open_loop(&sim, w, 200, 3).await;
    assert_counted_once(&page, &summary, &r, 200, 3);
    let insert = r.ops.iter().find(|o| o.op == "insert").unwrap();
    let steps: Vec<&str> = insert.steps.iter().map(|s| s.step.as_str()).collect();
    assert_eq!(steps, ["evict", "insert"]);
    let (evicted, inserted) = (&insert.steps[0].requests, &insert.steps[1].requests);
    assert_eq!(inserted.ok, insert.operations.ok, "every insert inserted");
    // The first 5 inserts fill free slots; each one after evicts first.
    assert_eq!(
        evicted.ok,
        insert.operations.ok.saturating_sub(5),
        "{insert:?}"
    );
    assert!(evicted.ok > 5, "the bound was passed: {insert:?}");
    // Documents of the insert are the inserted ones.
    assert_eq!(
        sum(
            &page,
            "mongoload_documents_total",
            &[("workload", "ycsbe"), ("op", "insert")]
        ),
        inserted.ok as f64
    );
    let client = client(&sim).await;
    let db = client.database(&sim.database("ycsbe"));
    assert_eq!(
        count(&db, "usertable").await,
        15,
        "max_docs records, no more"
    );
    // Every slot holds its key: the records are those of slots 0..15.
    for slot in 0..15 {
        let key = workload::ycsb::key_name(slot);
        let found = db
            .collection::<Document>("usertable")
            .find_one(doc! {"_id": &key})
            .await
            .unwrap();
        assert!(found.is_some(), "slot {slot} ({key})");
    }
    // The audit saw the evictions as deletes on purpose, not as losses.
    let audit = r.audit.as_ref().expect("an audited stage");
    assert_eq!((audit.missing, audit.missing_total), (0, 0), "{audit:?}");
    // The ledger holds each slot the run inserted once, whatever it evicted.
    assert_eq!(audit.acknowledged, inserted.ok.min(15), "{audit:?}");
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_insert_keeps_its_label_when_it_starts_evicting() {
    let sim = common::test_db().await;
    let mut ii = workload(
        "iibound",
        KindConfig::InsertBenchmark(Default::default()),
        1.0,
        1,
    );
    ii.kind = KindConfig::InsertBenchmark(InsertBenchmarkConfig {
        batch_size: 10,
        initial_docs: 100,
        max_docs: 300,
        ..Default::default()
    });
    let mut nn = workload("nnbound", KindConfig::NameNum(Default::default()), 1.0, 1);
    nn.kind = KindConfig::NameNum(NameNumConfig {
        mode: NameNumMode::Insert,
        initial_docs: 100,
        max_docs: 150,
        ..Default::default()
    });
    let mut ld = workload("ldbound", KindConfig::LargeDoc(Default::default()), 1.0, 1);
    ld.kind = KindConfig::LargeDoc(LargeDocConfig {
        initial_docs: 20,
        max_docs: 50,
        doc_size: config::ByteSize(512),
        insert_workers: 1,
        query_workers: 0,
        ..Default::default()
    });
    let mut cu = workload("cubound", KindConfig::Custom(Default::default()), 1.0, 1);
    cu.kind = KindConfig::Custom(toml_table(
        "initial_docs = 20\nmax_docs = 50\ndocument = { x = 1 }\n\
         [[operations]]\nop = \"insert\"\nname = \"put\"\n",
    ));
    for (w, coll, bound) in [
        (ii, "purchases_index", 300),
        (nn, "namenum", 150),
        (ld, "largedoc", 50),
        (cu, "custom", 50),
    ] {
        let name = w.name.clone();
        let (page, summary, r) = open_loop(&sim, w, 50, 2).await;
        assert_counted_once(&page, &summary, &r, 50, 2);
        let insert = &r.ops[0];
        let evicted = insert.steps.iter().find(|s| s.step == "evict").unwrap();
        assert!(evicted.requests.ok > 0, "{name}: the bound was reached");
        assert!(
            evicted.requests.ok < insert.operations.ok,
            "{name}: evicts only once full"
        );
        assert_eq!(insert.steps[0].requests.ok, insert.operations.ok);
        assert_eq!(insert.steps[0].step, insert.op);
        // Documents/s of the insert are the inserted ones, not the evicted.
        let inserted = sum(
            &page,
            "mongoload_request_documents_total",
            &[
                ("workload", &name),
                ("op", &insert.op),
                ("step", &insert.op),
            ],
        );
        let op_docs = sum(
            &page,
            "mongoload_documents_total",
            &[("workload", &name), ("op", &insert.op)],
        );
        assert_eq!(op_docs, inserted, "{name}");
        let client = client(&sim).await;
        assert_eq!(
            count(&client.database(&sim.database(&name)), coll).await,
            bound,
            "{name}"
        );
    }
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sysbench_in_transactions_meets_the_standalone_refusal() {
    // The simulator's standalone, whatever MONGOLOAD_TEST_URI names.
    let sim = common::TestDb::of_sim(common::sim().await);
    let mut w = workload("sbtxn", KindConfig::Sysbench(Default::default()), 1.0, 1);
    w.kind = KindConfig::Sysbench(SysbenchConfig {
        collections: 1,
        docs_per_collection: 50,
        transactions: true,
        ..Default::default()
    });
    let (page, summary, r) = open_loop(&sim, w, 10, 1).await;
    // The simulator is a standalone: every transaction fails on its first
    // request with IllegalOperation (code 20, class other), counted once.
    let tx = &r.ops[0];
    assert_eq!(tx.operations.ok, 0);
    assert_eq!(tx.operations.error + r.missed, 10);
    assert_eq!(r.errors["other"], tx.operations.error);
    assert_eq!(tx.steps[0].requests.error, tx.operations.error);
    assert!(tx.steps[1..]
        .iter()
        .all(|s| s.requests.ok + s.requests.error == 0));
    assert_eq!(summary.workloads[0].errors, tx.operations.error);
    assert_eq!(
        ops(&page, "sbtxn", "transaction", "error"),
        tx.operations.error
    );
    sim.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_step_is_one_error_of_its_operation_with_the_step_s_kind() {
    let sim = common::sim_with(SimConfig {
        faults: sim::FaultConfig {
            error: Some(sim::ErrorFault {
                rate: 0.3,
                code: 112,
                commands: vec!["delete".into()],
            }),
            ..Default::default()
        },
        ..SimConfig::default()
    })
    .await;
    let sim = common::TestDb::of_sim(sim);
    let mut w = workload("sbfail", KindConfig::Sysbench(Default::default()), 1.0, 1);
    w.kind = KindConfig::Sysbench(SysbenchConfig {
        collections: 1,
        docs_per_collection: 100,
        ..Default::default()
    });
    let (page, summary, r) = open_loop(&sim, w, 40, 2).await;
    let tx = &r.ops[0];
    let step = |name: &str| tx.steps.iter().find(|s| s.step == name).unwrap().requests;
    let failed = step("delete").error;
    assert!(failed > 0 && tx.operations.ok > 0, "{tx:?}");
    // The failing delete ends its transaction: one operation error, of the
    // delete's class, and no insert after it.
    assert_eq!(tx.operations.error, failed);
    assert_eq!(r.errors["write_conflict"], failed);
    assert_eq!(r.errors_total(), failed);
    assert_eq!(step("insert").ok + step("insert").error, step("delete").ok);
    assert_eq!(step("point_select").ok, 10 * (tx.operations.ok + failed));
    let of_op = sum(
        &page,
        "mongoload_errors_total",
        &[
            ("workload", "sbfail"),
            ("op", "transaction"),
            ("kind", "write_conflict"),
        ],
    );
    let of_step = sum(
        &page,
        "mongoload_request_errors_total",
        &[
            ("workload", "sbfail"),
            ("step", "delete"),
            ("kind", "write_conflict"),
        ],
    );
    assert_eq!((of_op as u64, of_step as u64), (failed, failed));
    assert_eq!(summary.workloads[0].errors, failed);
    sim.shutdown().await;
}

/// Workers run their requests in a session of their own; a deployment
/// without sessions (the simulator's `--no-sessions`, as some
/// MongoDB-compatible servers) refuses one before anything is sent, and
/// every request then goes without: the schedule is met with no error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_without_sessions_runs_every_request_without_one() {
    let sim = common::TestDb::of_sim(
        common::sim_with(SimConfig {
            sessions: false,
            ..SimConfig::default()
        })
        .await,
    );
    // The simulator announces no sessions: the driver refuses an explicit one.
    let client = client(&sim).await;
    let mut session = client.start_session().await.unwrap();
    let refused = client
        .database("nosess")
        .collection::<Document>("c")
        .find_one(doc! {})
        .session(&mut session)
        .await
        .expect_err("no sessions on this deployment");
    assert!(
        matches!(
            *refused.kind,
            mongodb::error::ErrorKind::SessionsNotSupported
        ),
        "{refused}"
    );
    let mut w = workload(
        "nosess",
        KindConfig::Mixed(config::MixedConfig {
            initial_docs: 200,
            doc_size: config::ByteSize(256),
            ..Default::default()
        }),
        1.0,
        2,
    );
    w.max_inflight = 8;
    let (page, summary, r) = open_loop(&sim, w, 150, 2).await;
    assert_eq!(r.errors_total(), 0, "{:?}", r.errors);
    assert_eq!(summary.workloads[0].errors, 0);
    let scheduled: u64 = ["insert", "update", "delete", "find"]
        .iter()
        .map(|op| ops_total(&page, "nosess", op))
        .sum();
    assert_eq!(scheduled, 300, "{page}");
    assert!(ops(&page, "nosess", "insert", "ok") > 0);
    sim.shutdown().await;
}
