//! Failover per shard (through a mongos): each shard's primary as a
//! monitoring-only client sees it, its periods without one, and the write
//! failures the workers see through the router attributed to the shard
//! whose period without a primary they fall in (pure: tested with plain
//! instants; [`super::Failover`] feeds it and keeps the records).
//!
//! A router answers the writes routed to a shard without a primary with an
//! availability error while the writes to every other shard go on being
//! acknowledged, so the outage clock of [`super::clock`] (ended by any
//! acknowledged write) sees many short outages. A shard's **write outage**
//! instead runs from the first write failure attributed to it to the end
//! of the last one: a failure (a worker's write or one attempt of it,
//! with an availability error) is the shard's when it falls in that
//! shard's period without a primary, widened by [`ATTRIBUTION_SLACK`] on
//! each side (the router notices a step-down on its own clock); in no
//! period, or in two shards' at once, it is unattributed. The outage is
//! final, and observed, [`ATTRIBUTION_SLACK`] after the primary is back.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// How far before a shard's loss of its primary, and after its return, a
/// write failure still counts as the shard's.
pub(crate) const ATTRIBUTION_SLACK: Duration = Duration::from_secs(1);

/// A shard's period without a primary and the write failures in it.
#[derive(Debug, Clone, PartialEq)]
struct Period {
    lost: Instant,
    /// When a primary was known again (none while the period runs).
    back: Option<Instant>,
    /// The first failure's start and the last failure's end.
    failures: Option<(Instant, Instant)>,
}

impl Period {
    fn covers(&self, t: Instant) -> bool {
        let from = self
            .lost
            .checked_sub(ATTRIBUTION_SLACK)
            .unwrap_or(self.lost);
        t >= from && self.back.is_none_or(|b| t <= b + ATTRIBUTION_SLACK)
    }
}

#[derive(Debug, Default)]
struct ShardState {
    /// The primary now.
    current: Option<String>,
    /// The last primary known (what a failover is "from").
    last: Option<String>,
    /// The newest period without a primary, until it is settled.
    period: Option<Period>,
}

/// What a shard's new topology description changed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ShardChange {
    /// Nothing to tell.
    None,
    /// The first primary known: no failover.
    First { primary: String },
    /// It has no primary now (the one it had: `old`).
    Lost { old: String },
    /// A primary again after a gap: a new one (`failover`, from the last
    /// primary known, `from`), or the same one back.
    Back {
        primary: String,
        from: Option<String>,
        gap: Duration,
        failover: bool,
    },
    /// A new primary without a gap seen (a failover).
    Changed { from: Option<String>, to: String },
}

/// A shard's write outage, final.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ShardOutage {
    pub shard: String,
    /// When the shard's primary was known again (the failover record's `at`).
    pub back: Instant,
    pub length: Duration,
}

/// Every shard's primary and periods without one.
#[derive(Debug, Default)]
pub(crate) struct ShardPrimaries {
    shards: BTreeMap<String, ShardState>,
}

impl ShardPrimaries {
    /// Shard `shard`'s monitoring saw `primary` (none: no primary) at
    /// `now`; `changed`: a different member or a new election than the
    /// last primary known.
    pub(crate) fn topology(
        &mut self,
        shard: &str,
        primary: Option<&str>,
        changed: bool,
        now: Instant,
    ) -> ShardChange {
        let s = self.shards.entry(shard.to_owned()).or_default();
        match primary {
            None => match s.current.take() {
                Some(old) => {
                    s.period = Some(Period {
                        lost: now,
                        back: None,
                        failures: None,
                    });
                    ShardChange::Lost { old }
                }
                None => ShardChange::None,
            },
            Some(p) => {
                if s.current.as_deref() == Some(p) && !changed {
                    return ShardChange::None;
                }
                let gap = match &mut s.period {
                    Some(period) if period.back.is_none() => {
                        period.back = Some(now);
                        Some(now.saturating_duration_since(period.lost))
                    }
                    _ => None,
                };
                let from = s.last.replace(p.to_owned());
                s.current = Some(p.to_owned());
                match (gap, changed) {
                    (Some(gap), failover) => ShardChange::Back {
                        primary: p.to_owned(),
                        from,
                        gap,
                        failover,
                    },
                    (None, true) => ShardChange::Changed {
                        from,
                        to: p.to_owned(),
                    },
                    (None, false) => ShardChange::First {
                        primary: p.to_owned(),
                    },
                }
            }
        }
    }

    /// A write that failed with an availability error, the outage it
    /// shows beginning at `start` and its failure at `failed`: the shard it
    /// is attributed to, if one.
    pub(crate) fn failed(&mut self, start: Instant, failed: Instant) -> Option<&str> {
        let mut hit = self
            .shards
            .iter_mut()
            .filter_map(|(name, s)| s.period.as_mut().map(|p| (name, p)))
            .filter(|(_, p)| p.covers(failed));
        let (name, period) = hit.next()?;
        if hit.next().is_some() {
            return None;
        }
        period.failures = Some(match period.failures {
            None => (start, failed),
            Some((a, b)) => (a.min(start), b.max(failed)),
        });
        Some(name.as_str())
    }

    /// Ends the periods whose primary came back more than
    /// [`ATTRIBUTION_SLACK`] before `now`: the write outages they had.
    pub(crate) fn settle(&mut self, now: Instant) -> Vec<ShardOutage> {
        let mut out = Vec::new();
        for (name, s) in &mut self.shards {
            let Some(back) = s.period.as_ref().and_then(|p| p.back) else {
                continue;
            };
            if now < back + ATTRIBUTION_SLACK {
                continue;
            }
            if let Some(Period {
                failures: Some((a, b)),
                ..
            }) = s.period.take()
            {
                out.push(ShardOutage {
                    shard: name.clone(),
                    back,
                    length: b.saturating_duration_since(a),
                });
            }
        }
        out
    }

    /// Shards without a primary now.
    #[cfg(test)]
    pub(crate) fn without_primary(&self) -> Vec<String> {
        self.shards
            .iter()
            .filter(|(_, s)| s.period.as_ref().is_some_and(|p| p.back.is_none()))
            .map(|(n, _)| n.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t0: Instant, n: u64) -> Instant {
        t0 + Duration::from_millis(n)
    }

    #[test]
    fn a_step_down_is_a_failover_after_a_gap_with_the_failures_in_it() {
        let t0 = Instant::now() + Duration::from_secs(5);
        let mut p = ShardPrimaries::default();
        assert_eq!(
            p.topology("shard0", Some("a:1"), false, t0),
            ShardChange::First {
                primary: "a:1".into()
            }
        );
        p.topology("shard1", Some("x:1"), false, t0);
        assert_eq!(
            p.failed(ms(t0, 100), ms(t0, 100)),
            None,
            "no period: unattributed"
        );
        assert_eq!(
            p.topology("shard0", None, false, ms(t0, 1_000)),
            ShardChange::Lost { old: "a:1".into() }
        );
        assert_eq!(p.without_primary(), vec!["shard0".to_owned()]);
        // A failure just before the monitor noticed counts (the slack).
        assert_eq!(p.failed(ms(t0, 900), ms(t0, 950)), Some("shard0"));
        assert_eq!(p.failed(ms(t0, 1_500), ms(t0, 1_600)), Some("shard0"));
        assert_eq!(
            p.topology("shard0", Some("b:1"), true, ms(t0, 3_000)),
            ShardChange::Back {
                primary: "b:1".into(),
                from: Some("a:1".into()),
                gap: Duration::from_millis(2_000),
                failover: true,
            }
        );
        // After the return, within the slack: still the shard's.
        assert_eq!(p.failed(ms(t0, 3_100), ms(t0, 3_200)), Some("shard0"));
        assert!(p.settle(ms(t0, 3_500)).is_empty(), "within the slack");
        assert_eq!(
            p.settle(ms(t0, 4_100)),
            vec![ShardOutage {
                shard: "shard0".into(),
                back: ms(t0, 3_000),
                length: Duration::from_millis(2_300)
            }]
        );
        assert!(p.settle(ms(t0, 5_000)).is_empty(), "settled once");
        assert_eq!(p.failed(ms(t0, 5_000), ms(t0, 5_000)), None);
    }

    #[test]
    fn failures_in_two_shards_periods_at_once_are_unattributed() {
        let t0 = Instant::now() + Duration::from_secs(5);
        let mut p = ShardPrimaries::default();
        p.topology("shard0", Some("a:1"), false, t0);
        p.topology("shard1", Some("x:1"), false, t0);
        p.topology("shard0", None, false, ms(t0, 100));
        p.topology("shard1", None, false, ms(t0, 200));
        assert_eq!(p.failed(ms(t0, 300), ms(t0, 300)), None);
        // The same primary back: no failover, and no outage without failures.
        assert_eq!(
            p.topology("shard1", Some("x:1"), false, ms(t0, 400)),
            ShardChange::Back {
                primary: "x:1".into(),
                from: Some("x:1".into()),
                gap: Duration::from_millis(200),
                failover: false,
            }
        );
        assert_eq!(p.failed(ms(t0, 2_000), ms(t0, 2_000)), Some("shard0"));
        assert!(p.settle(ms(t0, 9_000)).is_empty(), "shard0 not back yet");
        p.topology("shard0", Some("b:1"), true, ms(t0, 10_000));
        let out = p.settle(ms(t0, 12_000));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].length, Duration::ZERO, "one failure, no span");
    }

    #[test]
    fn a_new_election_of_the_same_member_is_a_change() {
        let t0 = Instant::now();
        let mut p = ShardPrimaries::default();
        p.topology("s", Some("a:1"), false, t0);
        assert_eq!(p.topology("s", Some("a:1"), false, t0), ShardChange::None);
        assert_eq!(
            p.topology("s", Some("a:1"), true, t0),
            ShardChange::Changed {
                from: Some("a:1".into()),
                to: "a:1".into()
            }
        );
    }
}
