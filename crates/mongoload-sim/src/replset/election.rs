//! How long an election takes (`--election 2s` or `2s..10s`).

use std::str::FromStr;
use std::time::Duration;

/// How long an election takes: fixed, or drawn uniformly from a range.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ElectionTime {
    pub min: Duration,
    pub max: Duration,
}

impl Default for ElectionTime {
    fn default() -> Self {
        ElectionTime::fixed(Duration::from_secs(2))
    }
}

impl ElectionTime {
    pub fn fixed(d: Duration) -> ElectionTime {
        ElectionTime { min: d, max: d }
    }

    /// Draws one election time.
    pub fn sample(&self, rng: &mut impl rand::Rng) -> Duration {
        if self.max <= self.min {
            self.min
        } else {
            self.min + (self.max - self.min).mul_f64(rng.random::<f64>())
        }
    }
}

/// A malformed `--election` value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid election time {value:?}: {reason} (expected e.g. 2s or 2s..10s)")]
pub struct ElectionParseError {
    value: String,
    reason: String,
}

impl ElectionParseError {
    fn new(value: &str, reason: impl Into<String>) -> ElectionParseError {
        ElectionParseError {
            value: value.to_owned(),
            reason: reason.into(),
        }
    }
}

impl FromStr for ElectionTime {
    type Err = ElectionParseError;

    /// `2s` or `2s..10s`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let parse = |v: &str| {
            humantime::parse_duration(v.trim())
                .map_err(|e| ElectionParseError::new(s, e.to_string()))
        };
        let t = match s.split_once("..") {
            None => ElectionTime::fixed(parse(s)?),
            Some((lo, hi)) => ElectionTime {
                min: parse(lo)?,
                max: parse(hi)?,
            },
        };
        if t.min > t.max {
            return Err(ElectionParseError::new(
                s,
                "the minimum is above the maximum",
            ));
        }
        Ok(t)
    }
}
