//! A workload's config built into the workload it describes: the seed of
//! one start and the build, named by the workload. The config owns this
//! step (it names every kind); `workload/` never reads a config.

use std::sync::Arc;

use super::{KeyError, WorkloadConfig};
use crate::workload::Workload;

/// A workload config that cannot be built (normally caught by config
/// validation first): the workload, the key at fault and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("workload {workload:?}: {}: {}", .error.key, .error.reason)]
pub struct BuildError {
    /// The workload's name.
    pub workload: String,
    /// The key within the workload (`mixed.doc_size`) and the reason.
    pub error: KeyError,
}

impl WorkloadConfig {
    /// The seed of one start of the workload: `seed` when configured, else
    /// one drawn at random for this start. One rule for everything random
    /// in a workload: its documents ([`WorkloadConfig::build_with_seed`])
    /// and its workers' draws use the same seed (docs/configuration.md:
    /// `seed` defaults to random).
    pub fn run_seed(&self) -> u64 {
        self.seed.unwrap_or_else(rand::random)
    }

    /// Builds the workload this config describes, with its
    /// [`WorkloadConfig::run_seed`].
    pub fn build(&self) -> Result<Arc<dyn Workload>, BuildError> {
        self.build_with_seed(self.run_seed())
    }

    /// Builds the workload this config describes, its documents made with
    /// `seed` (the seed its workers get too).
    pub fn build_with_seed(&self, seed: u64) -> Result<Arc<dyn Workload>, BuildError> {
        let fail = |error| BuildError {
            workload: self.name.clone(),
            error,
        };
        let workload = self.kind.build(seed).map_err(fail)?;
        Ok(match self.shard_plan().map_err(fail)? {
            Some(plan) => crate::workload::shard::Sharded::wrap(workload, plan),
            None => workload,
        })
    }
}
