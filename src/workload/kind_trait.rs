//! What every workload kind's parameters provide, [`Kind`]: validation,
//! the lines `check-config` prints, the build. Each kind's `params.rs`
//! implements it and the list of kinds (`kind_list.rs`, [`KindConfig`]) calls
//! it, so the kinds never import their list.
//!
//! [`KindConfig`]: super::kinds::KindConfig

use std::sync::Arc;

use super::Workload;
use crate::config_values::KeyError;

/// What every kind's parameters provide.
pub trait Kind {
    /// Checks what the types alone cannot; errors name the key within the
    /// kind's table (`doc_size`).
    fn validate(&self) -> Result<(), KeyError>;
    /// The lines `check-config` prints for the parameters (each indented
    /// two spaces and ended by a newline).
    fn describe(&self) -> String;
    /// Builds the workload (after validating the parameters); `seed` fixes
    /// its generators and its loaded documents.
    fn build(&self, seed: u64) -> Result<Arc<dyn Workload>, KeyError>;
    /// Whether the workload as configured inserts documents (the
    /// acknowledged-write audit has something to check).
    fn inserts(&self) -> bool;
    /// Whether the workload as configured writes at all (inserts,
    /// updates, deletes, or an aggregation that may write): command
    /// monitoring is on by default only then.
    fn writes(&self) -> bool;
    /// What the parameters say about the data the workload keeps (its
    /// steady-state size and growth, [`super::footprint`]); `None` when
    /// they say nothing useful.
    fn footprint(&self) -> Option<super::footprint::Footprint> {
        None
    }
    /// What `audit = true` asks of the parameters beyond inserting (a
    /// custom workload's deletes must name their `_id`s).
    fn check_audit(&self) -> Result<(), KeyError> {
        Ok(())
    }
    /// What the kind's key generator says of `field` of its documents
    /// (whether inserts only grow it, over which loaded range), for
    /// `shard_key` and `presplit` (docs/sharding.md).
    fn key_shape(&self, field: &str) -> super::shard::KeyShape {
        let _ = field;
        super::shard::KeyShape::Unknown
    }
}
