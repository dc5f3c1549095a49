//! The write-outage clock: the state machine that says when a write
//! outage begins and ends, on nanoseconds since an origin (pure: tested
//! with plain numbers). The model is in [`super`].

use std::sync::atomic::{AtomicU64, Ordering};

/// The write-outage state machine on nanoseconds since an origin (pure:
/// tested with plain numbers). Lock-free: workers feed it on every write.
/// An outage begun by the loss of the primary is *unconfirmed* until a
/// write fails: one that no write confirmed is dropped a while after the
/// primary is back (a read-only load has no write outage).
#[derive(Debug, Default)]
pub(crate) struct OutageClock {
    /// 0 when writes go through; else `(start + 1) << 1 | confirmed`.
    state: AtomicU64,
    /// When the last outage ended.
    last_end: AtomicU64,
}

fn encode(start: u64, confirmed: bool) -> u64 {
    ((start + 1) << 1) | u64::from(confirmed)
}

fn start_of(state: u64) -> u64 {
    (state >> 1) - 1
}

impl OutageClock {
    /// A write sent at `sent` failed with an availability error that shows
    /// the server gone since `now` (see [`super::outage_start`]). Returns
    /// whether this started an outage.
    pub(crate) fn failed(&self, sent: u64, now: u64) -> bool {
        if sent < self.last_end.load(Ordering::Acquire) {
            return false;
        }
        let mut cur = self.state.load(Ordering::Acquire);
        loop {
            let next = match cur {
                0 => encode(now, true),
                c if c & 1 == 1 => return false,
                c => c | 1,
            };
            match self
                .state
                .compare_exchange(cur, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return cur == 0,
                Err(actual) => cur = actual,
            }
        }
    }

    /// The driver lost the primary at `now`: an (unconfirmed) outage
    /// begins unless one runs.
    pub(crate) fn lost_primary(&self, now: u64) -> bool {
        self.state
            .compare_exchange(0, encode(now, false), Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
    }

    /// Drops the current outage if no write failure confirmed it.
    pub(crate) fn discard_unconfirmed(&self) -> bool {
        let cur = self.state.load(Ordering::Acquire);
        cur != 0
            && cur & 1 == 0
            && self
                .state
                .compare_exchange(cur, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
    }

    /// A write sent at `sent` was acknowledged at `now`. Returns the
    /// outage it ended: (start, duration in ns).
    pub(crate) fn acknowledged(&self, sent: u64, now: u64) -> Option<(u64, u64)> {
        let cur = self.state.load(Ordering::Acquire);
        if cur == 0 {
            return None;
        }
        let start = start_of(cur);
        if sent < start
            || self
                .state
                .compare_exchange(cur, 0, Ordering::AcqRel, Ordering::Relaxed)
                .is_err()
        {
            return None;
        }
        self.last_end.fetch_max(now, Ordering::AcqRel);
        Some((start, now.saturating_sub(start)))
    }

    /// How long the current outage has lasted at `now`, if one runs.
    pub(crate) fn ongoing(&self, now: u64) -> Option<u64> {
        match self.state.load(Ordering::Acquire) {
            0 => None,
            s => Some(now.saturating_sub(start_of(s))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_that_waited_unanswered_dates_the_outage_from_its_sending() {
        use super::super::outage_start;
        use crate::error_kind::ErrorKind;
        // Frozen at 1_000 for 3_000 with a 1_000 timeout: the first write
        // sent into the freeze fails at 2_010, the first sent after it is
        // acknowledged at 4_005.
        let c = OutageClock::default();
        let start = outage_start(ErrorKind::Timeout, 1_010, 2_010);
        assert_eq!(start, 1_010);
        assert!(c.failed(1_010, start));
        assert_eq!(c.acknowledged(1_020, 4_005), Some((1_010, 2_995)));
        assert_eq!(outage_start(ErrorKind::ServerSelection, 10, 30), 10);
        // A refusal or a dropped socket shows the fault when it happens.
        assert_eq!(outage_start(ErrorKind::Network, 10, 30), 30);
        assert_eq!(outage_start(ErrorKind::NotPrimary, 10, 30), 30);
    }

    #[test]
    fn an_outage_runs_from_the_first_failure_to_the_first_later_ack() {
        let c = OutageClock::default();
        assert_eq!(c.acknowledged(5, 10), None, "no outage");
        assert!(c.failed(90, 100), "the first failure starts it");
        assert!(!c.failed(95, 120), "later failures do not restart it");
        assert_eq!(c.ongoing(150), Some(50));
        // A write sent before the outage, acknowledged late: not the end.
        assert_eq!(c.acknowledged(99, 160), None);
        assert_eq!(c.acknowledged(100, 2_100), Some((100, 2_000)));
        assert_eq!(c.ongoing(2_200), None);
        // A straggler sent during the outage fails after it: no new one.
        assert!(!c.failed(1_000, 2_300));
        assert_eq!(c.ongoing(2_400), None);
        // A failure of a write sent after the end starts the next.
        assert!(c.failed(2_500, 2_600));
        assert_eq!(c.acknowledged(2_600, 2_700), Some((2_600, 100)));
        // The primary lost: an unconfirmed outage, dropped if nothing
        // confirms it, kept once a write fails.
        assert!(c.lost_primary(3_000));
        assert!(!c.lost_primary(3_100), "one runs");
        assert!(c.discard_unconfirmed());
        assert_eq!(c.ongoing(3_200), None);
        assert!(c.lost_primary(4_000));
        assert!(!c.failed(4_050, 4_100), "confirms, does not restart");
        assert!(!c.discard_unconfirmed());
        assert_eq!(c.acknowledged(4_500, 6_000), Some((4_000, 2_000)));
    }
}
