//! How much data a workload keeps and how fast it grows: the figures
//! `check-config` prints for each workload ("about 760 MiB, bounded by
//! max_docs" / "grows about 22 GiB a day: no bound"), from the kind's
//! parameters ([`Footprint`]) and the plan's mean rate. Pure arithmetic on
//! plain values; estimates (document sizes are the configured ones, index
//! and storage overhead left out).

use std::time::Duration;

/// What a kind's parameters say about the data it keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Footprint {
    /// Bytes of one document (the configured size, or an estimate).
    pub doc_bytes: f64,
    /// Documents the prepare step loads.
    pub initial_docs: u64,
    /// Documents added per scheduled operation, net of the deletes that
    /// take existing documents (an upper bound: a delete of a key already
    /// gone removes nothing); 0 for a kind whose deletes and inserts keep
    /// the count.
    pub net_docs_per_op: f64,
    /// `max_docs`: the most documents the collection keeps; `None`:
    /// unbounded.
    pub bound: Option<u64>,
}

/// What `check-config` says of one workload's data.
#[derive(Debug, Clone, PartialEq)]
pub enum Growth {
    /// Never more than `bytes` (the bound, or what prepare loads when
    /// nothing is added).
    Bounded { bytes: f64, why: &'static str },
    /// Grows `per_day` bytes a day at the plan's mean rate, without bound.
    Unbounded { per_day: f64 },
    /// Grows without bound at a rate the plan does not fix (closed-loop
    /// stages: the achieved rate decides).
    UnboundedClosedLoop,
}

impl Growth {
    /// Whether the data grows without bound.
    pub fn unbounded(&self) -> bool {
        !matches!(self, Growth::Bounded { .. })
    }
}

impl std::fmt::Display for Growth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Growth::Bounded { bytes, why } => {
                write!(f, "about {} at steady state, {why}", bytes_text(*bytes))
            }
            Growth::Unbounded { per_day } => write!(
                f,
                "grows about {} a day at the plan's mean rate: no bound (set max_docs)",
                bytes_text(*per_day)
            ),
            Growth::UnboundedClosedLoop => write!(
                f,
                "grows with every insert at the achieved rate (closed loop): no bound (set max_docs)"
            ),
        }
    }
}

/// The data of a workload with footprint `fp` whose plan runs at
/// `mean_rate` operations per second on average (`None`: closed loop).
pub(crate) fn growth(fp: &Footprint, mean_rate: Option<f64>) -> Growth {
    if let Some(max) = fp.bound {
        return Growth::Bounded {
            bytes: max.max(fp.initial_docs) as f64 * fp.doc_bytes,
            why: "bounded by max_docs",
        };
    }
    if fp.net_docs_per_op <= 0.0 {
        return Growth::Bounded {
            bytes: fp.initial_docs as f64 * fp.doc_bytes,
            why: "no net inserts (deletes keep pace)",
        };
    }
    match mean_rate {
        Some(rate) if rate <= 0.0 => Growth::Bounded {
            bytes: fp.initial_docs as f64 * fp.doc_bytes,
            why: "the plan runs no operations",
        },
        Some(rate) => Growth::Unbounded {
            per_day: rate * fp.net_docs_per_op * fp.doc_bytes * 86_400.0,
        },
        None => Growth::UnboundedClosedLoop,
    }
}

/// The mean rate of stages given as (rate at a fraction of the stage,
/// duration): each stage sampled at 64 points; `None` when a stage is
/// closed loop (`rate_at` returns `None`).
pub(crate) fn mean_rate<S>(
    stages: &[S],
    duration: impl Fn(&S) -> Duration,
    rate_at: impl Fn(&S, Duration) -> Option<f64>,
) -> Option<f64> {
    const SAMPLES: u32 = 64;
    let (mut ops, mut secs) = (0.0, 0.0);
    for s in stages {
        let d = duration(s);
        let mut sum = 0.0;
        for i in 0..SAMPLES {
            sum += rate_at(s, d.mul_f64((f64::from(i) + 0.5) / f64::from(SAMPLES)))?;
        }
        ops += sum / f64::from(SAMPLES) * d.as_secs_f64();
        secs += d.as_secs_f64();
    }
    Some(if secs > 0.0 { ops / secs } else { 0.0 })
}

/// Bytes for people: "760 MiB", "22 GiB", "1.5 TiB" (binary units, three
/// significant digits at most).
pub(crate) fn bytes_text(bytes: f64) -> String {
    const UNITS: [&str; 6] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = bytes.max(0.0);
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    let text = if v >= 100.0 || unit == 0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    let text = if text.contains('.') {
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        text
    };
    format!("{text} {}", UNITS[unit])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The figure: `mixed` at its defaults (6.5 inserts, 3 deletes
    /// per 100 operations of 76 KiB) at 100 ops/s grows about 22 GiB a day.
    #[test]
    fn the_shipped_soak_without_a_bound_grows_about_22_gib_a_day() {
        let fp = Footprint {
            doc_bytes: 76.0 * 1024.0,
            initial_docs: 10_000,
            net_docs_per_op: (6.5 - 3.0) / 100.0,
            bound: None,
        };
        let g = growth(&fp, Some(100.0));
        assert!(g.unbounded());
        assert_eq!(
            g.to_string(),
            "grows about 21.9 GiB a day at the plan's mean rate: no bound (set max_docs)"
        );
        assert_eq!(growth(&fp, None), Growth::UnboundedClosedLoop);
        let bounded = Footprint {
            bound: Some(10_000),
            ..fp
        };
        let g = growth(&bounded, Some(100.0));
        assert!(!g.unbounded());
        assert_eq!(
            g.to_string(),
            "about 742 MiB at steady state, bounded by max_docs"
        );
        let balanced = Footprint {
            net_docs_per_op: 0.0,
            ..fp
        };
        assert!(!growth(&balanced, Some(1e6)).unbounded());
    }

    #[test]
    fn the_mean_rate_weighs_stages_by_duration_and_ramps_by_time() {
        let s = [
            (Duration::from_secs(30), 100.0, 100.0),
            (Duration::from_secs(90), 0.0, 200.0),
        ];
        let rate = mean_rate(
            &s,
            |s| s.0,
            |s, at| Some(s.1 + (s.2 - s.1) * at.as_secs_f64() / s.0.as_secs_f64()),
        )
        .unwrap();
        // 30 s at 100 and a 90 s ramp 0→200 (mean 100): 100.
        assert!((rate - 100.0).abs() < 1e-9, "{rate}");
        assert_eq!(mean_rate(&s, |s| s.0, |_, _| None), None);
    }

    #[test]
    fn bytes_read_short() {
        assert_eq!(bytes_text(0.0), "0 bytes");
        assert_eq!(bytes_text(1536.0), "1.5 KiB");
        assert_eq!(bytes_text(760.0 * 1024.0 * 1024.0), "760 MiB");
        assert_eq!(bytes_text(22.0 * 1024f64.powi(3)), "22 GiB");
    }
}
