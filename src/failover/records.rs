//! The failovers the driver saw (the primary before and after, the gap
//! without one, the write outage around it), kept for the stage reports,
//! the audits and `/status`, and the topology state they are made from.

use std::collections::VecDeque;
use std::time::{Duration, Instant, SystemTime};

/// Failovers kept for the stage reports (the newest).
pub(super) const KEEP_FAILOVERS: usize = 256;

/// One failover as the driver saw it, for the stage reports.
#[derive(Debug, Clone, PartialEq)]
pub struct FailoverRecord {
    /// When the driver learnt of the new primary.
    pub at: Instant,
    pub wall: SystemTime,
    /// The primary before (none if it was never known).
    pub from: Option<String>,
    pub to: String,
    /// How long the driver knew no primary before this one (none when the
    /// primary changed without a gap).
    pub no_primary: Option<Duration>,
    /// The write outage around it, once it ended.
    pub write_outage: Option<Duration>,
    /// Through a mongos: the shard whose replica set failed over (its
    /// name in `listShards`); none: the target's own primary.
    pub shard: Option<String>,
}

/// What the topology events left behind.
#[derive(Debug, Default)]
pub(super) struct PrimaryState {
    pub(super) current: Option<String>,
    /// When the driver learnt of `current`.
    pub(super) current_since: Option<Instant>,
    /// The primary before the current gap, and when the gap began.
    pub(super) lost: Option<(Option<String>, Instant)>,
    /// The last primary known (what a failover is "from").
    pub(super) last: Option<String>,
    /// How the primary of the current gap was lost.
    pub(super) loss: Option<super::PrimaryLoss>,
    /// The length of a write outage that ended during the current
    /// gap as the events tell it: a write was acknowledged, so the driver
    /// knew a primary again, but its event naming it had not reached us
    /// (the driver delivers events on a task of its own, which lags under
    /// load). The primary learnt of next decides: a failover takes it.
    pub(super) pending_outage: Option<Duration>,
    pub(super) records: VecDeque<FailoverRecord>,
}

impl PrimaryState {
    /// Whether a write sent at `sent` to `server` went to a member the
    /// driver had already replaced as primary: a route picked from the
    /// topology before (its connection checked out only after the new
    /// primary was known), not a deployment without primary.
    pub(super) fn sent_to_replaced_primary(&self, server: &str, sent: Instant) -> bool {
        match (&self.current, self.current_since) {
            (Some(p), Some(since)) => p != server && sent >= since,
            _ => false,
        }
    }

    /// Keeps a new failover, dropping the oldest beyond [`KEEP_FAILOVERS`].
    pub(super) fn push(&mut self, record: FailoverRecord) {
        if self.records.len() == KEEP_FAILOVERS {
            self.records.pop_front();
        }
        self.records.push_back(record);
    }

    /// Attaches a write outage that began at `start` and lasted `length`
    /// to the newest failover after its start still without one; the new
    /// primary of that failover, if any.
    /// A shard's failovers are left alone: their outages are attributed by
    /// [`super::shards`].
    pub(super) fn attach_outage(&mut self, start: Instant, length: Duration) -> Option<String> {
        self.records
            .iter_mut()
            .rev()
            .find(|r| r.shard.is_none() && r.write_outage.is_none() && r.at >= start)
            .map(|r| {
                r.write_outage = Some(length);
                r.to.clone()
            })
    }

    /// Sets the write outage of shard `shard`'s failover learnt of at `at`.
    pub(super) fn attach_shard_outage(&mut self, shard: &str, at: Instant, length: Duration) {
        if let Some(r) = self
            .records
            .iter_mut()
            .rev()
            .find(|r| r.at == at && r.shard.as_deref() == Some(shard))
        {
            r.write_outage = Some(length);
        }
    }

    /// The failovers whose new primary the driver learnt of in
    /// `[from, to]`, oldest first.
    pub(super) fn between(&self, from: Instant, to: Instant) -> Vec<FailoverRecord> {
        self.records
            .iter()
            .filter(|r| r.at >= from && r.at <= to)
            .cloned()
            .collect()
    }

    /// The newest failovers (at most `n`), oldest first.
    pub(super) fn recent(&self, n: usize) -> Vec<FailoverRecord> {
        let skip = self.records.len().saturating_sub(n);
        self.records.iter().skip(skip).cloned().collect()
    }
}
