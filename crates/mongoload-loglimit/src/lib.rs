//! Bounded logging: a [`LogLimiter`] lets one line per class through
//! every [`LOG_INTERVAL`] and counts the rest, so the line that does get
//! through can say how many were suppressed; it is shared by every task
//! that logs for the same thing (all the workers of a workload, all the
//! connections of the simulator, the accept loop of an endpoint), so an
//! outage logs a few lines however many operations were in flight.
//! Lock-free: one compare-and-swap per logged line. A leaf crate of the
//! workspace: the daemon (`mongoload`) and the simulator (`mongoload-sim`)
//! both use it and neither depends on the other for it. [`round`] makes
//! a figure readable in a log field.
#![forbid(unsafe_code)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A figure for a log field, rounded to `decimals` places: `2.494` seconds,
/// not `2.4937794699999998` (the metrics and the run log keep full
/// precision).
pub fn round(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    let r = (x * scale).round() / scale;
    if r.is_finite() {
        r
    } else {
        x
    }
}

/// At most one line per class in this interval.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Admits one line per class per interval.
#[derive(Debug)]
pub struct LogLimiter {
    origin: Instant,
    interval_ms: u64,
    classes: Box<[Class]>,
}

#[derive(Debug, Default)]
struct Class {
    /// Milliseconds since `origin` from which the next line may be logged.
    next_ms: AtomicU64,
    /// Lines not logged since the last one that was.
    suppressed: AtomicU64,
}

impl LogLimiter {
    /// A limiter for `classes` classes (indexes `0..classes`).
    pub fn new(classes: usize, interval: Duration) -> LogLimiter {
        LogLimiter {
            origin: Instant::now(),
            interval_ms: interval.as_millis().max(1) as u64,
            classes: (0..classes).map(|_| Class::default()).collect(),
        }
    }

    /// Whether a line of class `class` seen at `now` is logged: `Some(n)`
    /// with the number suppressed since the last logged line, or `None`
    /// (counted as suppressed). An unknown class is always logged.
    pub fn admit(&self, class: usize, now: Instant) -> Option<u64> {
        let Some(c) = self.classes.get(class) else {
            return Some(0);
        };
        let t = now.saturating_duration_since(self.origin).as_millis() as u64;
        let next = c.next_ms.load(Ordering::Acquire);
        if t >= next
            && c.next_ms
                .compare_exchange(
                    next,
                    t + self.interval_ms,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                )
                .is_ok()
        {
            return Some(c.suppressed.swap(0, Ordering::AcqRel));
        }
        c.suppressed.fetch_add(1, Ordering::AcqRel);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn one_line_per_class_per_interval_with_the_suppressed_count() {
        let l = LogLimiter::new(2, Duration::from_secs(10));
        let t0 = l.origin;
        assert_eq!(l.admit(0, t0), Some(0));
        // 511 more of class 0 in the same second: none logged.
        for i in 0..511 {
            assert_eq!(l.admit(0, t0 + ms(i)), None);
        }
        // Another class has its own budget.
        assert_eq!(l.admit(1, t0 + ms(5)), Some(0));
        assert_eq!(l.admit(0, t0 + ms(9_999)), None);
        // The next line says how many were left out.
        assert_eq!(l.admit(0, t0 + ms(10_000)), Some(512));
        assert_eq!(l.admit(0, t0 + ms(10_001)), None);
        assert_eq!(l.admit(0, t0 + ms(60_000)), Some(1));
        assert_eq!(l.admit(7, t0), Some(0), "unknown classes are never lost");
    }

    #[test]
    fn many_threads_log_one_line_per_interval_and_lose_no_count() {
        let l = std::sync::Arc::new(LogLimiter::new(1, Duration::from_secs(3600)));
        let logged = std::sync::Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let (l, logged) = (l.clone(), logged.clone());
                std::thread::spawn(move || {
                    for _ in 0..1000 {
                        if l.admit(0, Instant::now()).is_some() {
                            logged.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(logged.load(Ordering::Relaxed), 1);
        assert_eq!(l.classes[0].suppressed.load(Ordering::Relaxed), 7999);
    }
}

#[cfg(test)]
mod round_tests {
    #[test]
    fn log_fields_print_short() {
        assert_eq!(super::round(2.4937794699999998, 3).to_string(), "2.494");
        assert_eq!(super::round(0.1 + 0.2, 3).to_string(), "0.3");
        assert_eq!(super::round(12.0, 3).to_string(), "12");
        assert_eq!(super::round(1234.56789, 1).to_string(), "1234.6");
    }
}
