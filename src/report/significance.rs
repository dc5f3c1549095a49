//! The statistics behind `report --compare`: a figure's mean over a
//! stage's per-interval samples with its confidence interval (Student's
//! t), and Welch's t-test between two runs, as latte compares runs. The
//! samples of consecutive intervals are correlated (a slow second is
//! followed by another), which makes a plain t-test see differences that
//! are not there; as latte does, the sample count is reduced to its
//! effective size `n (1 − r₁) / (1 + r₁)` from the lag-1 autocorrelation
//! `r₁` (when positive). Pure; the t distribution is `statrs`'.

use statrs::distribution::{ContinuousCDF, Normal, StudentsT};

/// A mean and how sure it is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Estimate {
    pub mean: f64,
    /// Half-width of the confidence interval of the mean.
    pub error: f64,
    /// Samples.
    pub n: usize,
    /// Effective samples (after the autocorrelation correction).
    pub n_eff: f64,
    /// Variance of one sample.
    pub variance: f64,
}

/// The two-sided Student's t quantile for `confidence` with `df` degrees
/// of freedom (∞ when it cannot be computed: no confidence at all).
fn t_quantile(confidence: f64, df: f64) -> f64 {
    if !(df.is_finite() && df > 0.0) {
        return f64::INFINITY;
    }
    StudentsT::new(0.0, 1.0, df).map_or(f64::INFINITY, |t| {
        t.inverse_cdf(1.0 - (1.0 - confidence) / 2.0)
    })
}

/// Lag-1 autocorrelation of `xs` (0 when undefined).
fn autocorrelation(xs: &[f64], mean: f64) -> f64 {
    let var: f64 = xs.iter().map(|x| (x - mean).powi(2)).sum();
    if xs.len() < 3 || var == 0.0 {
        return 0.0;
    }
    let cov: f64 = xs.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum();
    cov / var
}

/// The mean of `xs` with its confidence interval at `confidence` (e.g.
/// 0.99); `None` with fewer than two samples.
pub(crate) fn estimate(xs: &[f64], confidence: f64) -> Option<Estimate> {
    let n = xs.len();
    if n < 2 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / n as f64;
    let variance = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let r = autocorrelation(xs, mean).clamp(0.0, 0.99);
    let n_eff = (n as f64 * (1.0 - r) / (1.0 + r)).clamp(2.0, n as f64);
    let error = t_quantile(confidence, n_eff - 1.0) * (variance / n_eff).sqrt();
    Some(Estimate {
        mean,
        error,
        n,
        n_eff,
        variance,
    })
}

/// Welch's t-test of `new` against `base`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Difference {
    /// new − base.
    pub diff: f64,
    /// Half-width of the confidence interval of the difference.
    pub error: f64,
    /// Two-sided p-value (0 when both sides have no variance and differ).
    pub p_value: f64,
    /// The difference is significant at the confidence level.
    pub significant: bool,
}

impl Difference {
    /// The difference relative to the base mean, in per cent, with its
    /// error; `None` when the base mean is 0.
    pub(crate) fn percent(&self, base: &Estimate) -> Option<(f64, f64)> {
        (base.mean != 0.0).then(|| {
            (
                self.diff / base.mean.abs() * 100.0,
                self.error / base.mean.abs() * 100.0,
            )
        })
    }
}

/// Welch's t-test at `confidence` (unequal variances, Welch–Satterthwaite
/// degrees of freedom, on the effective sample sizes).
pub(crate) fn welch(base: &Estimate, new: &Estimate, confidence: f64) -> Difference {
    let diff = new.mean - base.mean;
    let (vb, vn) = (base.variance / base.n_eff, new.variance / new.n_eff);
    let se2 = vb + vn;
    if se2 == 0.0 {
        // Both constant: any difference is certain.
        return Difference {
            diff,
            error: 0.0,
            p_value: if diff == 0.0 { 1.0 } else { 0.0 },
            significant: diff != 0.0,
        };
    }
    let df = se2.powi(2)
        / (vb.powi(2) / (base.n_eff - 1.0).max(1.0) + vn.powi(2) / (new.n_eff - 1.0).max(1.0));
    let se = se2.sqrt();
    let t = diff / se;
    let p_value = StudentsT::new(0.0, 1.0, df).map_or(1.0, |d| 2.0 * (1.0 - d.cdf(t.abs())));
    Difference {
        diff,
        error: t_quantile(confidence, df) * se,
        p_value,
        significant: p_value < 1.0 - confidence,
    }
}

/// The Mann–Whitney U test of `new` against `base` (two-sided, normal
/// approximation with the tie correction), for figures whose intervals
/// have outliers (latency percentiles: one stalled second). Returns the
/// p-value, or `None` with fewer than two samples on a side.
pub(crate) fn mann_whitney(base: &[f64], new: &[f64]) -> Option<f64> {
    let (n1, n2) = (base.len(), new.len());
    if n1 < 2 || n2 < 2 {
        return None;
    }
    let mut all: Vec<(f64, bool)> = base
        .iter()
        .map(|&x| (x, false))
        .chain(new.iter().map(|&x| (x, true)))
        .collect();
    all.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Mid-ranks for ties; the tie term Σ(t³ − t).
    let (mut rank_new, mut ties) = (0.0, 0.0);
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        let mid = (i + j) as f64 / 2.0 + 1.0;
        rank_new += all[i..=j].iter().filter(|x| x.1).count() as f64 * mid;
        ties += t * t * t - t;
        i = j + 1;
    }
    let (n1, n2) = (n1 as f64, n2 as f64);
    let n = n1 + n2;
    let u = rank_new - n2 * (n2 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let var = n1 * n2 / 12.0 * ((n + 1.0) - ties / (n * (n - 1.0)));
    if var <= 0.0 {
        // Every value equal.
        return Some(1.0);
    }
    let z = (u - mean).abs() / var.sqrt();
    let normal = Normal::new(0.0, 1.0).ok()?;
    Some((2.0 * (1.0 - normal.cdf(z))).min(1.0))
}

/// The median of `xs` (`None` when empty).
pub(crate) fn median(xs: &[f64]) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len().is_multiple_of(2) {
        (v[m - 1] + v[m]) / 2.0
    } else {
        v[m]
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic noise: an LCG's values in [-1, 1).
    fn noise(seed: u64, n: usize) -> Vec<f64> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                ((x >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn the_interval_of_a_mean_is_students() {
        // 1..=10: mean 5.5, sample sd 3.03; t(0.975, 9) = 2.262 for 95 %.
        // Autocorrelation of a ramp is positive: compare with it removed.
        let xs: Vec<f64> = [3., 9., 1., 7., 5., 10., 2., 8., 4., 6.].to_vec();
        let e = estimate(&xs, 0.95).unwrap();
        assert_eq!(e.mean, 5.5);
        assert!((e.variance - 9.1667).abs() < 1e-3);
        assert_eq!(e.n_eff, 10.0, "negative autocorrelation is not used");
        assert!(
            (e.error - 2.262 * (9.1667f64 / 10.0).sqrt()).abs() < 1e-2,
            "{e:?}"
        );
        assert!(estimate(&[1.0], 0.99).is_none());
    }

    #[test]
    fn mann_whitney_shrugs_off_an_outlier() {
        let base: Vec<f64> = noise(1, 11).iter().map(|x| 50.0 + x).collect();
        let mut slower: Vec<f64> = noise(2, 11).iter().map(|x| 55.0 + x).collect();
        // One stalled second in the new run.
        slower[4] = 900.0;
        let p = mann_whitney(&base, &slower).unwrap();
        assert!(p < 0.001, "{p}");
        // Welch's t sees only noise: the outlier's variance hides the shift.
        let (b, n) = (
            estimate(&base, 0.99).unwrap(),
            estimate(&slower, 0.99).unwrap(),
        );
        assert!(!welch(&b, &n, 0.99).significant);
        // The same distribution: no difference; identical values: p = 1.
        let same: Vec<f64> = noise(3, 11).iter().map(|x| 50.0 + x).collect();
        assert!(mann_whitney(&base, &same).unwrap() > 0.01);
        assert_eq!(mann_whitney(&[1.0, 1.0], &[1.0, 1.0]), Some(1.0));
        // Exact value for a small case: U = 0 of 3×3 → z = 1.964, p = 0.0495.
        let p = mann_whitney(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!((p - 0.0495).abs() < 1e-3, "{p}");
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
    }

    #[test]
    fn correlated_samples_count_for_less() {
        // A slow drift: each sample like the one before.
        let xs: Vec<f64> = (0..100).map(|i| (i as f64 / 10.0).sin()).collect();
        let e = estimate(&xs, 0.99).unwrap();
        assert!(e.n_eff < 10.0, "{e:?}");
    }

    #[test]
    fn welch_sees_a_shift_and_not_noise() {
        let base: Vec<f64> = noise(1, 120).iter().map(|x| 10.0 + x).collect();
        let same: Vec<f64> = noise(2, 120).iter().map(|x| 10.0 + x).collect();
        let up: Vec<f64> = noise(3, 120).iter().map(|x| 11.0 + x).collect();
        let (b, s, u) = (
            estimate(&base, 0.99).unwrap(),
            estimate(&same, 0.99).unwrap(),
            estimate(&up, 0.99).unwrap(),
        );
        let d = welch(&b, &s, 0.99);
        assert!(!d.significant, "{d:?}");
        assert!(d.diff.abs() < d.error, "{d:?}");
        let d = welch(&b, &u, 0.99);
        assert!(d.significant && d.p_value < 1e-6, "{d:?}");
        let (pct, err) = d.percent(&b).unwrap();
        assert!((pct - 10.0).abs() < 2.0 && err < 3.0, "{pct} ± {err}");
        // Constant samples: certain either way.
        let c = estimate(&[5.0, 5.0, 5.0], 0.99).unwrap();
        assert!(!welch(&c, &c, 0.99).significant);
        let c6 = estimate(&[6.0, 6.0, 6.0], 0.99).unwrap();
        assert!(welch(&c, &c6, 0.99).significant);
    }
}
