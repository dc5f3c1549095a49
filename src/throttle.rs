//! A request throttle for the side endpoints (HTTP, control socket): a
//! token bucket in reservation form (GCRA). Every caller gets the instant
//! it may proceed and sleeps until then, so a storm of clients is slowed
//! to the configured rate instead of taking CPU from the load; an honest
//! scraper (one request every few seconds) never waits. The pending
//! reservations are bounded by the callers, which the endpoints bound
//! (a connection holds at most one).

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use tokio::time::Instant;

/// At most `rate` admissions per second on average, `burst` at once.
#[derive(Debug)]
pub struct Throttle {
    /// Time between two admissions at the sustained rate.
    interval: Duration,
    /// How far ahead of the sustained schedule a burst may run.
    tolerance: Duration,
    /// The theoretical arrival time of the next admission.
    next: Mutex<Option<Instant>>,
}

impl Throttle {
    /// `rate` per second (at least 1), `burst` admitted back to back (at least 1).
    pub fn new(rate: u32, burst: u32) -> Throttle {
        let interval = Duration::from_secs(1) / rate.max(1);
        Throttle {
            interval,
            tolerance: interval * (burst.max(1) - 1),
            next: Mutex::new(None),
        }
    }

    /// Reserves one admission for a caller arriving at `now` and returns
    /// when it may proceed (`now` when it need not wait).
    pub fn reserve(&self, now: Instant) -> Instant {
        let mut next = self.next.lock().unwrap_or_else(PoisonError::into_inner);
        let tat = next.map_or(now, |t| t.max(now));
        *next = Some(tat + self.interval);
        tat.checked_sub(self.tolerance).map_or(now, |t| t.max(now))
    }

    /// Waits for an admission.
    pub async fn admit(&self) {
        let at = self.reserve(Instant::now());
        tokio::time::sleep_until(at).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let t = Throttle::new(100, 5);
        let t0 = Instant::now();
        for _ in 0..5 {
            assert_eq!(t.reserve(t0), t0);
        }
        // The sixth waits one interval, the seventh two: 100 per second.
        assert_eq!(t.reserve(t0), t0 + ms(10));
        assert_eq!(t.reserve(t0), t0 + ms(20));
        // 1,000 more callers at once are spread over 10 s.
        let last = (0..1000).map(|_| t.reserve(t0)).last().unwrap();
        assert_eq!(last, t0 + ms(10_020));
    }

    #[test]
    fn an_occasional_caller_never_waits() {
        let t = Throttle::new(10, 1);
        let t0 = Instant::now();
        for i in 0..50 {
            let now = t0 + ms(150 * i);
            assert_eq!(t.reserve(now), now);
        }
    }

    #[test]
    fn idle_time_refills_only_the_burst() {
        let t = Throttle::new(10, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            t.reserve(t0);
        }
        assert_eq!(t.reserve(t0), t0 + ms(100));
        // After a long pause, three pass at once again, not more.
        let later = t0 + Duration::from_secs(60);
        for _ in 0..3 {
            assert_eq!(t.reserve(later), later);
        }
        assert_eq!(t.reserve(later), later + ms(100));
    }

    #[tokio::test]
    async fn admit_sleeps_until_the_reservation() {
        let t = Throttle::new(10, 1);
        let t0 = Instant::now();
        t.admit().await;
        t.admit().await;
        t.admit().await;
        // A lower bound only: a sleep is never shorter than asked.
        assert!(Instant::now() - t0 >= ms(200));
    }
}
