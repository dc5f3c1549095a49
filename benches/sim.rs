//! Throughput of the simulator through the official driver: find-by-`_id`
//! and 100-document `insert_many`, from 16 concurrent tasks on the same
//! machine. Prints the median of several runs. `cargo bench --bench sim`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mongodb::bson::{doc, Document};
use mongodb::options::ClientOptions;
use mongodb::Client;
use mongoload::sim::{self, SimConfig};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const TASKS: usize = 16;
const RUNS: usize = 5;
const RUN_TIME: Duration = Duration::from_secs(3);
const PRELOAD: i64 = 100_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Runs TASKS tasks of `kind` for RUN_TIME; returns operations (or documents) per second.
async fn run_tasks(client: &Client, kind: &'static str) -> f64 {
    if kind == "insert" {
        // Each run starts from an empty collection, so ids never collide and memory stays flat.
        client
            .database("bench")
            .collection::<Document>("write")
            .drop()
            .await
            .unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let coll = client
            .database("bench")
            .collection::<Document>(if kind == "find" { "read" } else { "write" });
        let (stop, count) = (stop.clone(), count.clone());
        tasks.push(tokio::spawn(async move {
            let mut rng = SmallRng::seed_from_u64(t as u64);
            let mut next_id = (t as i64) << 40;
            while !stop.load(Ordering::Relaxed) {
                if kind == "find" {
                    let id = rng.random_range(0..PRELOAD);
                    let d = coll.find_one(doc! {"_id": id}).await.expect("find_one");
                    assert!(d.is_some());
                    count.fetch_add(1, Ordering::Relaxed);
                } else {
                    let docs: Vec<Document> = (0..100)
                        .map(|_| {
                            next_id += 1;
                            doc! {"_id": next_id, "k": rng.random_range(0..1_000_000i64), "c": "x".repeat(100)}
                        })
                        .collect();
                    coll.insert_many(docs).await.expect("insert_many");
                    count.fetch_add(100, Ordering::Relaxed);
                }
            }
        }));
    }
    let start = Instant::now();
    tokio::time::sleep(RUN_TIME).await;
    stop.store(true, Ordering::Relaxed);
    let n = count.load(Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    for t in tasks {
        t.await.unwrap();
    }
    n as f64 / secs
}

/// The same find-by-`_id` from TASKS raw connections that encode OP_MSG
/// themselves: what the simulator sustains when the client costs little.
async fn run_raw(addr: std::net::SocketAddr) -> f64 {
    use mongoload::sim::wire;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for t in 0..TASKS {
        let (stop, count) = (stop.clone(), count.clone());
        tasks.push(tokio::spawn(async move {
            let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
            s.set_nodelay(true).unwrap();
            let mut rng = SmallRng::seed_from_u64(100 + t as u64);
            let (mut out, mut buf) = (Vec::new(), vec![0u8; 64 * 1024]);
            while !stop.load(Ordering::Relaxed) {
                let id = rng.random_range(0..PRELOAD);
                let cmd = doc! {"find": "read", "filter": {"_id": id}, "limit": 1, "singleBatch": true, "$db": "bench"};
                out.clear();
                wire::encode_msg(&mut out, 1, 0, &cmd);
                s.write_all(&out).await.unwrap();
                s.read_exact(&mut buf[..4]).await.unwrap();
                let n = i32::from_le_bytes(buf[..4].try_into().unwrap()) as usize;
                s.read_exact(&mut buf[4..n]).await.unwrap();
                count.fetch_add(1, Ordering::Relaxed);
            }
        }));
    }
    let start = Instant::now();
    tokio::time::sleep(RUN_TIME).await;
    stop.store(true, Ordering::Relaxed);
    let n = count.load(Ordering::Relaxed);
    let secs = start.elapsed().as_secs_f64();
    for t in tasks {
        t.await.unwrap();
    }
    n as f64 / secs
}

/// CPU time (user + system, in clock ticks of 10 ms) used so far by this
/// process's threads whose name starts with `prefix`, from /proc.
fn cpu_ticks(prefix: &str) -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    let mut total = 0;
    for t in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
            continue;
        };
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        if !stat[open + 1..close].starts_with(prefix) {
            continue;
        }
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        // utime and stime are fields 14 and 15; the first after ')' is field 3.
        total += fields
            .get(11)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0);
        total += fields
            .get(12)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

/// One measurement: throughput, and CPU microseconds per operation spent
/// by the simulator's threads and by the client's threads.
struct Sample {
    rate: f64,
    sim_us: f64,
    client_us: f64,
}

async fn sample<F: std::future::Future<Output = f64>>(run: F) -> Sample {
    let (s0, c0) = (cpu_ticks("sim-worker"), cpu_ticks("client-worker"));
    let t = Instant::now();
    let rate = run.await;
    let ops = rate * t.elapsed().as_secs_f64();
    let (s1, c1) = (cpu_ticks("sim-worker"), cpu_ticks("client-worker"));
    let per_op = |ticks: u64| ticks as f64 * 10_000.0 / ops.max(1.0);
    Sample {
        rate,
        sim_us: per_op(s1 - s0),
        client_us: per_op(c1 - c0),
    }
}

fn report(name: &str, unit: &str, per: f64, samples: &[Sample]) {
    let rate = median(samples.iter().map(|s| s.rate).collect());
    let sim_us = median(samples.iter().map(|s| s.sim_us).collect()) * per;
    let client_us = median(samples.iter().map(|s| s.client_us).collect()) * per;
    let runs: Vec<f64> = samples.iter().map(|s| s.rate.round()).collect();
    println!(
        "{name:<34} median {rate:>9.0} {unit}/s over {RUNS} runs of {RUN_TIME:?}, {TASKS} tasks; \
         CPU per op: simulator {sim_us:.1} us, client {client_us:.1} us; \
         simulator alone on 2 cores: ~{:.0} ops/s (runs {runs:?})",
        2e6 / sim_us.max(0.001)
    );
}

fn main() {
    // The simulator and the client run on separate runtimes with named
    // threads, so the CPU each uses can be told apart on a busy machine.
    let sim_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("sim-worker")
        .enable_all()
        .build()
        .unwrap();
    let sim = sim_rt.block_on(sim::start(SimConfig::default())).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("client-worker")
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut opts = ClientOptions::parse(sim.uri()).await.unwrap();
        opts.max_pool_size = Some(TASKS as u32);
        opts.min_pool_size = Some(TASKS as u32);
        let client = Client::with_options(opts).unwrap();
        client.warm_connection_pool().await;
        let read = client.database("bench").collection::<Document>("read");
        for chunk in (0..PRELOAD).collect::<Vec<_>>().chunks(10_000) {
            read.insert_many(
                chunk
                    .iter()
                    .map(|&i| doc! {"_id": i, "k": i % 1000, "c": "y".repeat(100)}),
            )
            .await
            .unwrap();
        }
        let (mut finds, mut inserts, mut raws) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..RUNS {
            finds.push(sample(run_tasks(&client, "find")).await);
            inserts.push(sample(run_tasks(&client, "insert")).await);
            raws.push(sample(run_raw(sim.addr())).await);
        }
        report("find-by-_id (driver)", "ops", 1.0, &finds);
        report("insert_many 100 docs (driver)", "docs", 100.0, &inserts);
        report("find-by-_id (raw OP_MSG client)", "ops", 1.0, &raws);
        println!("(insert_many: CPU per op and the 2-core figure are per 100-document batch)");
    });
    drop(sim);
}
