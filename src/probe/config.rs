//! The replication-lag probe's keys (`[lag_probe]`): its settings and
//! their validation.

use std::time::Duration;

use serde::Deserialize;

use crate::config_values::KeyError;

/// `[lag_probe]`: the replication-lag probe. Present: on.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LagProbeConfig {
    /// How often a heartbeat is written on the primary.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
    /// The heartbeat collection (in `target.database`).
    pub collection: String,
}

impl Default for LagProbeConfig {
    fn default() -> Self {
        LagProbeConfig {
            interval: Duration::from_secs(1),
            collection: "mongoload_lag_probe".into(),
        }
    }
}

impl LagProbeConfig {
    /// How often each secondary is read: a twentieth of the interval, from
    /// 10 ms to 250 ms. A heartbeat's lag is measured to this resolution.
    pub fn poll(&self) -> Duration {
        (self.interval / 20).clamp(Duration::from_millis(10), Duration::from_millis(250))
    }

    pub(crate) fn validate(&self) -> Result<(), KeyError> {
        if self.interval < Duration::from_millis(100) {
            return Err(KeyError::new(
                "lag_probe.interval",
                format!(
                    "must be at least 100ms, got {}",
                    humantime::format_duration(self.interval)
                ),
            ));
        }
        if self.collection.is_empty()
            || self.collection.contains(['$', '\0'])
            || self.collection.starts_with("system.")
        {
            return Err(KeyError::new(
                "lag_probe.collection",
                format!("not a valid collection name: {:?}", self.collection),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_polls_a_twentieth_of_its_interval() {
        let mut p = LagProbeConfig::default();
        assert_eq!(p.poll(), Duration::from_millis(50));
        p.interval = Duration::from_secs(60);
        assert_eq!(p.poll(), Duration::from_millis(250));
        p.interval = Duration::from_millis(100);
        assert_eq!(p.poll(), Duration::from_millis(10));
        assert!(p.validate().is_ok());
        p.interval = Duration::from_millis(50);
        assert!(p.validate().is_err());
    }
}
