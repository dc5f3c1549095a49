//! Sharding's tasks beside the load, when the target is a mongos: the
//! documents of each workload per shard and the chunk migrations
//! ([`documents`]), and each shard's failovers seen through monitoring-only
//! clients ([`failover`]). Both are off the load path and degrade to
//! "unknown" where the server refuses what they read. A workload's
//! `shard_key` and `presplit` are workload values (`workload/shard.rs`);
//! the prepare step that applies them is the deployment's
//! (`mongo/shard.rs`); check-target's shard section is `check_target/sharding.rs`.

pub(crate) mod documents;
pub(crate) mod failover;
