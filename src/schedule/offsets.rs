//! Open loop's operation clock: when each operation of a stage is due
//! (its intended start, absolute from the stage's start), how many are
//! due by a time, and the ticket to start from. Exact and consistent both
//! ways: `ops_due(intended_offset(i)) > i`.

use std::time::Duration;

use super::{Mode, Shape, Stage, NANOS_PER_SEC};

impl Stage {
    /// Open loop: the intended start of operation `i` (0-based) relative to
    /// the stage's start, or `None` when it would fall at or past the end of
    /// the stage (or the mode is concurrency).
    pub fn intended_offset(&self, i: u64) -> Option<Duration> {
        if self.mode != Mode::Rate {
            return None;
        }
        let nanos = self.offset_nanos(i)?;
        if nanos >= self.duration.as_nanos() {
            return None;
        }
        Some(Duration::from_nanos(nanos as u64))
    }

    /// Unbounded offset of op `i` in ns, `None` when the rate never reaches
    /// it (a ramp down that integrates to less than `i`).
    fn offset_nanos(&self, i: u64) -> Option<u128> {
        if let Some(p) = &self.poisson {
            let t = self.time_of_mass(p.position(i)?)?;
            return Some((t * NANOS_PER_SEC).round() as u128);
        }
        match &self.shape {
            Shape::Hold(r) => Some(hold_offset_nanos(i, *r)),
            Shape::Ramp { from, to } => {
                let (a, b) = (*from, *to);
                let d = self.duration.as_secs_f64();
                let n = i as f64;
                let t = if a == b {
                    n / a
                } else {
                    // Integral N(t) = a·t + k·t², k = (b − a) / 2D. Solve
                    // N(t) = i with the cancellation-free root 2i / (a + √…).
                    let k = (b - a) / (2.0 * d);
                    let disc = a * a + 4.0 * k * n;
                    if disc < 0.0 {
                        return None;
                    }
                    let denom = a + disc.sqrt();
                    if denom <= 0.0 {
                        // i = 0 with a ramp from 0.
                        0.0
                    } else {
                        2.0 * n / denom
                    }
                };
                if !t.is_finite() {
                    return None;
                }
                Some((t * NANOS_PER_SEC).round() as u128)
            }
            Shape::Steps { levels, each } => {
                // The step holding op i: the last base ≤ i.
                let j = self.step_bases.partition_point(|&b| b <= i) - 1;
                if j >= levels.len() {
                    return Some(u128::MAX);
                }
                let within = hold_offset_nanos(i - self.step_bases[j], levels[j]);
                Some(each.as_nanos() * j as u128 + within)
            }
        }
    }

    /// Open loop: how many operations have an intended start ≤ `elapsed`
    /// (capped at the stage's total). The engine compares it with what it
    /// issued to count missed operations. Consistent with
    /// [`Stage::intended_offset`]: `ops_due(intended_offset(i)) > i`.
    pub fn ops_due(&self, elapsed: Duration) -> u64 {
        if self.mode != Mode::Rate {
            return 0;
        }
        let limit = elapsed
            .as_nanos()
            .min(self.duration.as_nanos().saturating_sub(1));
        if elapsed >= self.duration {
            return self.total_ops();
        }
        self.count_upto(limit)
    }

    /// Open loop: the first operation whose intended start is at or after
    /// `elapsed` (the ticket a worker should claim when the stage is
    /// (re)published mid-way: earlier ones belong to a paused or overridden
    /// stretch and are neither sent nor missed).
    pub fn first_ticket_at(&self, elapsed: Duration) -> u64 {
        match elapsed.checked_sub(Duration::from_nanos(1)) {
            Some(before) => self.ops_due(before),
            None => 0,
        }
    }

    /// Open loop: the number of operations in the whole stage.
    pub fn total_ops(&self) -> u64 {
        if self.mode != Mode::Rate {
            return 0;
        }
        self.count_upto(self.duration.as_nanos() - 1)
    }

    /// Number of i with offset_nanos(i) ≤ t: a float estimate from the
    /// integral, corrected against the exact offset function so that both
    /// always agree.
    fn count_upto(&self, t: u128) -> u64 {
        let secs = t as f64 / NANOS_PER_SEC;
        let estimate = match (&self.poisson, &self.shape) {
            // The count is exact up to the rounding to whole nanoseconds,
            // which the loops below settle.
            (Some(p), _) => p.count_upto(self.mass_at(secs)) as f64 - 1.0,
            (None, shape) => self.uniform_estimate(shape, t, secs),
        };
        let mut n = if estimate.is_finite() && estimate > 0.0 {
            estimate.floor() as u64 + 1
        } else {
            1
        };
        let le = |i: u64| matches!(self.offset_nanos(i), Some(o) if o <= t);
        while n > 0 && !le(n - 1) {
            n -= 1;
        }
        while le(n) {
            n += 1;
        }
        n
    }

    /// The rate's integral from the stage's start to `secs` (clamped to
    /// the stage): the expected number of operations by then.
    pub(super) fn mass_at(&self, secs: f64) -> f64 {
        let d = self.duration.as_secs_f64();
        let secs = secs.clamp(0.0, d);
        match &self.shape {
            Shape::Hold(r) => secs * r,
            Shape::Ramp { from, to } => from * secs + (to - from) * secs * secs / (2.0 * d),
            Shape::Steps { levels, each } => {
                let e = each.as_secs_f64();
                let j = ((secs / e) as usize).min(levels.len() - 1);
                levels[..j].iter().sum::<f64>() * e + (secs - e * j as f64) * levels[j]
            }
        }
    }

    /// The expected operations of the whole stage (the Poisson mean).
    pub(super) fn mass(&self) -> f64 {
        if self.mode != Mode::Rate {
            return 0.0;
        }
        self.mass_at(self.duration.as_secs_f64())
    }

    /// The time (seconds into the stage) at which the rate's integral
    /// reaches `x`: the inverse of [`Stage::mass_at`].
    fn time_of_mass(&self, x: f64) -> Option<f64> {
        let t = match &self.shape {
            Shape::Hold(r) => x / r,
            Shape::Ramp { from, to } => {
                let (a, b) = (*from, *to);
                let d = self.duration.as_secs_f64();
                if a == b {
                    x / a
                } else {
                    let k = (b - a) / (2.0 * d);
                    let disc = a * a + 4.0 * k * x;
                    let denom = a + disc.max(0.0).sqrt();
                    if denom <= 0.0 {
                        0.0
                    } else {
                        2.0 * x / denom
                    }
                }
            }
            Shape::Steps { levels, each } => {
                let e = each.as_secs_f64();
                let mut before = 0.0;
                let mut found = None;
                for (j, l) in levels.iter().enumerate() {
                    let m = l * e;
                    if x < before + m || j == levels.len() - 1 {
                        found = Some(e * j as f64 + (x - before) / l);
                        break;
                    }
                    before += m;
                }
                found?
            }
        };
        t.is_finite().then_some(t)
    }

    /// The uniform clock's first guess of how many offsets are ≤ `t`.
    fn uniform_estimate(&self, shape: &Shape, t: u128, secs: f64) -> f64 {
        match shape {
            Shape::Hold(r) => secs * r,
            Shape::Ramp { from, to } => {
                let d = self.duration.as_secs_f64();
                from * secs + (to - from) * secs * secs / (2.0 * d)
            }
            Shape::Steps { levels, each } => {
                let j = ((t / each.as_nanos()) as usize).min(levels.len() - 1);
                let within = t as f64 / NANOS_PER_SEC - each.as_secs_f64() * j as f64;
                self.step_bases[j] as f64 + within * levels[j]
            }
        }
    }
}

/// For `Steps` in rate mode: the index of the first operation of each
/// step, plus the total at the end. Empty otherwise.
pub(super) fn step_bases(mode: Mode, shape: &Shape) -> Vec<u64> {
    let (Mode::Rate, Shape::Steps { levels, each }) = (mode, shape) else {
        return Vec::new();
    };
    let mut total = 0u64;
    std::iter::once(0)
        .chain(levels.iter().map(|&l| {
            total += hold_count(l, *each);
            total
        }))
        .collect()
}

/// Offset of op `i` at a constant rate, in ns. Integral rates use exact
/// integer arithmetic (1000/s gives exactly 1 ms apart).
fn hold_offset_nanos(i: u64, rate: f64) -> u128 {
    if rate.fract() == 0.0 && rate <= u64::MAX as f64 {
        (i as u128 * 1_000_000_000) / rate as u128
    } else {
        (i as f64 * NANOS_PER_SEC / rate).round() as u128
    }
}

/// Number of ops of a hold of `rate` that start before `d`.
fn hold_count(rate: f64, d: Duration) -> u64 {
    let t = d.as_nanos() - 1;
    let mut n = (t as f64 / NANOS_PER_SEC * rate).floor() as u64 + 1;
    while n > 0 && hold_offset_nanos(n - 1, rate) > t {
        n -= 1;
    }
    while hold_offset_nanos(n, rate) <= t {
        n += 1;
    }
    n
}
