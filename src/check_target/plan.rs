//! What the plan's prepare steps will write, from each workload's own
//! `prepare()` steps: documents and an estimate of their bytes per
//! collection (sample documents built and measured), and indexes. Pure:
//! nothing here talks to MongoDB.

use serde::Serialize;

use crate::config::{BuildError, Config};
use crate::workload::{bson_len, PrepareStep};

/// What one collection receives from a workload's prepare steps.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct CollectionPlan {
    pub name: String,
    /// Documents the load step inserts (0: none).
    pub documents: u64,
    /// Estimated BSON bytes of those documents.
    pub bytes: u64,
    /// Indexes created (besides `_id`).
    pub indexes: u32,
    /// Documents already there, when the deployment was asked (a load
    /// resumes and writes only what is missing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub present: Option<u64>,
}

/// What one workload's prepare steps write.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct WorkloadPlan {
    pub workload: String,
    pub kind: String,
    pub documents: u64,
    pub bytes: u64,
    pub indexes: u32,
    pub collections: Vec<CollectionPlan>,
}

/// Documents measured per load step to estimate its bytes.
const SAMPLES: u64 = 5;

/// The prepare plan of every workload of `config`, in config order. A
/// workload that cannot be built (normally caught by validation) is an error.
pub(crate) fn prepare_plan(config: &Config) -> Result<Vec<WorkloadPlan>, BuildError> {
    config
        .workloads
        .iter()
        .map(|w| {
            let built = w.build()?;
            let names = built.collections();
            let mut collections: Vec<CollectionPlan> = Vec::new();
            for step in built.prepare() {
                match step {
                    PrepareStep::CreateIndex { collection, .. } => {
                        entry(&mut collections, &names[collection]).indexes += 1;
                    }
                    PrepareStep::Load {
                        collection,
                        count,
                        make,
                        ..
                    } => {
                        let c = entry(&mut collections, &names[collection]);
                        c.documents += count;
                        c.bytes += estimate_bytes(count, |i| bson_len(&make(i)));
                    }
                    PrepareStep::SeekKeys { .. }
                    | PrepareStep::CountKeys { .. }
                    | PrepareStep::Shard { .. } => {}
                }
            }
            Ok(WorkloadPlan {
                workload: w.name.clone(),
                kind: w.kind.name().to_owned(),
                documents: collections.iter().map(|c| c.documents).sum(),
                bytes: collections.iter().map(|c| c.bytes).sum(),
                indexes: collections.iter().map(|c| c.indexes).sum(),
                collections,
            })
        })
        .collect()
}

/// The plan of collection `name`, added at the end on first use.
fn entry<'a>(collections: &'a mut Vec<CollectionPlan>, name: &str) -> &'a mut CollectionPlan {
    let i = match collections.iter().position(|c| c.name == name) {
        Some(i) => i,
        None => {
            collections.push(CollectionPlan {
                name: name.to_owned(),
                documents: 0,
                bytes: 0,
                indexes: 0,
                present: None,
            });
            collections.len() - 1
        }
    };
    &mut collections[i]
}

/// `count` documents' bytes from the mean size of up to [`SAMPLES`] of
/// them spread over the range (sizes can grow with the key).
fn estimate_bytes(count: u64, size_of: impl Fn(u64) -> usize) -> u64 {
    if count == 0 {
        return 0;
    }
    let n = count.min(SAMPLES);
    let total: u64 = (0..n)
        .map(|k| size_of(k * (count - 1) / (n - 1).max(1)) as u64)
        .sum();
    total * count / n
}

/// `1.5 MiB`-style sizes for the human report.
pub(crate) fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(workloads: &str) -> Config {
        let text = format!(
            "[target]\nuri = \"mongodb://h/\"\ndatabase = \"d\"\n{workloads}\n[[workloads.stages]]\nrate = 1\nduration = \"1s\"\n"
        );
        crate::config::parse_with_env(&text, std::path::Path::new("t.toml"), std::iter::empty())
            .unwrap()
    }

    #[test]
    fn counts_documents_bytes_and_indexes_per_collection() {
        let c = config(
            "[[workloads]]\nname = \"m\"\nkind = \"mixed\"\n[workloads.mixed]\ndoc_size = \"1KB\"\ninitial_docs = 300\ncollection = \"mx\"\n",
        );
        let plan = prepare_plan(&c).unwrap();
        assert_eq!(plan.len(), 1);
        let p = &plan[0];
        assert_eq!((p.workload.as_str(), p.kind.as_str()), ("m", "mixed"));
        assert_eq!(p.collections.len(), 1);
        let coll = &p.collections[0];
        assert_eq!(
            (coll.name.as_str(), coll.documents, coll.indexes),
            ("mx", 300, 1)
        );
        // doc_size is the BSON size of each document.
        assert_eq!(coll.bytes, 300 * 1024);
        assert_eq!((p.documents, p.bytes, p.indexes), (300, 300 * 1024, 1));
    }

    #[test]
    fn sysbench_spreads_over_its_collections() {
        let c = config(
            "[[workloads]]\nname = \"sb\"\nkind = \"sysbench\"\n[workloads.sysbench]\ncollections = 3\ndocs_per_collection = 50\n",
        );
        let p = &prepare_plan(&c).unwrap()[0];
        let names: Vec<&str> = p.collections.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["sbtest1", "sbtest2", "sbtest3"]);
        assert_eq!((p.documents, p.indexes), (150, 3));
        assert!(p.bytes > 150 * 180, "{}", p.bytes);
    }

    #[test]
    fn estimates_from_spread_samples() {
        assert_eq!(estimate_bytes(0, |_| 10), 0);
        assert_eq!(estimate_bytes(1, |_| 10), 10);
        // Sizes 0..=99 growing with the key: samples 0, 24, 49, 74, 99.
        assert_eq!(
            estimate_bytes(100, |i| i as usize),
            (24 + 49 + 74 + 99) * 100 / 5
        );
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(1536), "1.5 KiB");
        assert_eq!(human_bytes(760 * 1024 * 1024), "760.0 MiB");
    }
}
