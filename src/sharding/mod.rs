//! Sharding, when the target is a mongos: the tasks beside the load, the
//! documents of each workload per shard and the chunk migrations
//! ([`documents`]) and each shard's failovers seen through monitoring-only
//! clients ([`failover`]), both off the load path and "unknown" where the
//! server refuses what they read; and check-target's sharding section
//! ([`check_target`]). A workload's `shard_key` and `presplit` are
//! workload values (`workload/shard.rs`); the prepare step that applies
//! them is the deployment's (`mongo/shard.rs`): both sit below the
//! folders that use them.

pub(crate) mod check_target;
pub(crate) mod documents;
pub(crate) mod failover;
