//! A request throttle for the side endpoints (HTTP, control socket), on
//! `governor`'s GCRA: at most `rate` admissions a second, `burst` at once,
//! so a storm of clients is slowed to the configured rate instead of
//! taking CPU from the load; an honest scraper (one request every few
//! seconds) never waits. The waiting callers are bounded by the
//! endpoints (a connection holds at most one).

use std::num::NonZeroU32;
use std::time::Duration;

use governor::{DefaultDirectRateLimiter, Jitter, Quota, RateLimiter};

/// At most `rate` admissions per second on average, `burst` at once.
#[derive(Debug)]
pub(crate) struct Throttle {
    limiter: DefaultDirectRateLimiter,
    /// Time between two admissions at the sustained rate.
    interval: Duration,
}

impl Throttle {
    /// `rate` per second (at least 1), `burst` admitted back to back (at least 1).
    pub(crate) fn new(rate: u32, burst: u32) -> Throttle {
        Throttle {
            limiter: RateLimiter::direct(quota(rate, burst)),
            interval: Duration::from_secs(1) / rate.max(1),
        }
    }

    /// Waits for an admission. Callers refused at the same instant would
    /// all wake at the next free one, and all but one sleep again; a
    /// random delay of up to one interval spreads them.
    pub(crate) async fn admit(&self) {
        self.limiter
            .until_ready_with_jitter(Jitter::up_to(self.interval))
            .await;
    }
}

/// `rate` per second (at least 1), `burst` back to back (at least 1).
fn quota(rate: u32, burst: u32) -> Quota {
    let one = NonZeroU32::MIN;
    Quota::per_second(NonZeroU32::new(rate).unwrap_or(one))
        .allow_burst(NonZeroU32::new(burst).unwrap_or(one))
}

#[cfg(test)]
mod tests {
    use super::*;

    use governor::clock::{Clock, FakeRelativeClock};
    use governor::middleware::NoOpMiddleware;
    use governor::nanos::Nanos;
    use governor::state::{InMemoryState, NotKeyed};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    type Limiter = RateLimiter<NotKeyed, InMemoryState, FakeRelativeClock, NoOpMiddleware<Nanos>>;

    /// A throttle's limiter on a clock the test moves.
    fn limiter(rate: u32, burst: u32) -> (Limiter, FakeRelativeClock) {
        let clock = FakeRelativeClock::default();
        (
            RateLimiter::direct_with_clock(quota(rate, burst), clock.clone()),
            clock,
        )
    }

    /// How long a caller arriving now waits: zero when admitted at once,
    /// else the wait, the clock moved to the end of it and the admission
    /// taken then.
    fn wait(l: &Limiter, clock: &FakeRelativeClock) -> Duration {
        match l.check() {
            Ok(()) => Duration::ZERO,
            Err(not_until) => {
                let d = not_until.wait_time_from(clock.now());
                clock.advance(d);
                assert!(l.check().is_ok(), "admitted at the end of its wait");
                d
            }
        }
    }

    #[test]
    fn a_burst_passes_then_the_rate_holds() {
        let (t, clock) = limiter(100, 5);
        for _ in 0..5 {
            assert_eq!(wait(&t, &clock), Duration::ZERO);
        }
        // The sixth waits one interval, the seventh another: 100 per second.
        assert_eq!(wait(&t, &clock), ms(10));
        assert_eq!(wait(&t, &clock), ms(10));
        // 1,000 more callers, one after another, are spread over 10 s.
        let total: Duration = (0..1000).map(|_| wait(&t, &clock)).sum();
        assert_eq!(total, ms(10_000));
    }

    #[test]
    fn an_occasional_caller_never_waits() {
        let (t, clock) = limiter(10, 1);
        for _ in 0..50 {
            assert_eq!(wait(&t, &clock), Duration::ZERO);
            clock.advance(ms(150));
        }
    }

    #[test]
    fn idle_time_refills_only_the_burst() {
        let (t, clock) = limiter(10, 3);
        for _ in 0..3 {
            assert_eq!(wait(&t, &clock), Duration::ZERO);
        }
        assert_eq!(wait(&t, &clock), ms(100));
        // After a long pause, three pass at once again, not more.
        clock.advance(Duration::from_secs(60));
        for _ in 0..3 {
            assert_eq!(wait(&t, &clock), Duration::ZERO);
        }
        assert_eq!(wait(&t, &clock), ms(100));
    }

    #[test]
    fn rates_and_bursts_of_zero_are_one() {
        let (t, clock) = limiter(0, 0);
        assert_eq!(wait(&t, &clock), Duration::ZERO);
        assert_eq!(wait(&t, &clock), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn admit_sleeps_until_the_reservation() {
        let t = Throttle::new(10, 1);
        let t0 = std::time::Instant::now();
        t.admit().await;
        t.admit().await;
        t.admit().await;
        // A lower bound only: a sleep is never shorter than asked.
        assert!(t0.elapsed() >= ms(200));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn callers_at_once_are_admitted_at_the_rate() {
        // 20 callers at once through a throttle of 100 a second, 5 at
        // once: the last is admitted after 150 ms, not before.
        let t = std::sync::Arc::new(Throttle::new(100, 5));
        let t0 = std::time::Instant::now();
        let tasks: Vec<_> = (0..20)
            .map(|_| {
                let t = t.clone();
                tokio::spawn(async move { t.admit().await })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        assert!(t0.elapsed() >= ms(150), "{:?}", t0.elapsed());
    }
}
