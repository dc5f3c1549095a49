//! Typed config values parsed once at load (byte sizes, stage levels) and
//! the key error every layer reports: a leaf module, which the config and
//! the workload kinds' parameter tables both import (the config
//! re-exports them).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

/// A key and reason before the file name is known.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyError {
    /// Dotted path of the key.
    pub key: String,
    /// What is wrong with it.
    pub reason: String,
}

impl std::fmt::Display for KeyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.key, self.reason)
    }
}

impl std::error::Error for KeyError {}

/// A ratio written as a number (`0.05`) or a percentage (`"5%"`): its
/// value, `None` when it is not a finite number. The range is the
/// caller's to check.
pub(crate) fn parse_ratio(text: &str) -> Option<f64> {
    let text = text.trim();
    let (num, scale) = match text.strip_suffix('%') {
        Some(n) => (n.trim(), 100.0),
        None => (text, 1.0),
    };
    num.parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v / scale)
}

impl KeyError {
    pub(crate) fn new(key: impl Into<String>, reason: impl Into<String>) -> KeyError {
        KeyError {
            key: key.into(),
            reason: reason.into(),
        }
    }

    /// The same error with its key under `prefix` (`mixed` + `doc_size`
    /// = `mixed.doc_size`).
    pub(crate) fn under(self, prefix: &str) -> KeyError {
        KeyError {
            key: format!("{prefix}.{}", self.key),
            reason: self.reason,
        }
    }
}

/// A size in bytes, written as an integer or a string with a unit: `512`,
/// `"76KB"`, `"1MiB"`, `"2 MB"`. KB/KiB/K mean 1024 bytes and MB/MiB/M
/// 1024², as MongoDB documents sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    /// The number of bytes.
    pub fn bytes(self) -> u64 {
        self.0
    }
}

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<ByteSize, String> {
        let t = s.trim();
        let split = t
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let bad = || format!("not a byte size: {s:?} (e.g. 512, \"76KB\", \"1MiB\")");
        let n: f64 = num.parse().map_err(|_| bad())?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1 << 10,
            "m" | "mb" | "mib" => 1 << 20,
            "g" | "gb" | "gib" => 1 << 30,
            _ => return Err(bad()),
        };
        let bytes = n * mult as f64;
        if !bytes.is_finite() || bytes > u64::MAX as f64 {
            return Err(bad());
        }
        Ok(ByteSize(bytes.round() as u64))
    }
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b >= 1 << 20 && b.is_multiple_of(1 << 20) {
            write!(f, "{}MiB", b >> 20)
        } else if b >= 1 << 10 && b.is_multiple_of(1 << 10) {
            write!(f, "{}KiB", b >> 10)
        } else {
            write!(f, "{b}B")
        }
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ByteSize, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ByteSize;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a byte size: an integer or a string such as \"76KB\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ByteSize, E> {
                Ok(ByteSize(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ByteSize, E> {
                u64::try_from(v)
                    .map(ByteSize)
                    .map_err(|_| E::custom(format!("must not be negative, got {v}")))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ByteSize, E> {
                v.parse().map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

/// A stage level as written in the config: a number (hold), a table
/// `{ from, to }` (ramp) or a table `{ steps = […], each = "1m" }` (steps).
#[derive(Debug, Clone, PartialEq)]
pub enum LevelSpec {
    /// One level for the stage.
    Hold(f64),
    /// Linear from → to over the stage's duration.
    Ramp { from: f64, to: f64 },
    /// Each level in turn for `each`.
    Steps { steps: Vec<f64>, each: Duration },
}

/// The table forms of [`LevelSpec`], with unknown keys rejected.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LevelTable {
    from: Option<f64>,
    to: Option<f64>,
    steps: Option<Vec<f64>>,
    #[serde(default, with = "humantime_serde")]
    each: Option<Duration>,
}

impl<'de> Deserialize<'de> for LevelSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<LevelSpec, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = LevelSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a number, { from, to } (ramp) or { steps, each } (steps)")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LevelSpec, E> {
                Ok(LevelSpec::Hold(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LevelSpec, E> {
                Ok(LevelSpec::Hold(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LevelSpec, E> {
                Ok(LevelSpec::Hold(v as f64))
            }
            // Environment overrides arrive as strings.
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LevelSpec, E> {
                v.trim()
                    .parse::<f64>()
                    .map(LevelSpec::Hold)
                    .map_err(|_| E::invalid_value(de::Unexpected::Str(v), &self))
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<LevelSpec, A::Error> {
                let t = LevelTable::deserialize(de::value::MapAccessDeserializer::new(map))?;
                match t {
                    LevelTable {
                        from: Some(from),
                        to: Some(to),
                        steps: None,
                        each: None,
                    } => Ok(LevelSpec::Ramp { from, to }),
                    LevelTable {
                        from: None,
                        to: None,
                        steps: Some(steps),
                        each: Some(each),
                    } => Ok(LevelSpec::Steps { steps, each }),
                    _ => Err(de::Error::custom(
                        "a table level is either { from, to } (ramp) or { steps, each } (steps)",
                    )),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl fmt::Display for LevelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LevelSpec::Hold(v) => write!(f, "{v}"),
            LevelSpec::Ramp { from, to } => write!(f, "{{ from = {from}, to = {to} }}"),
            LevelSpec::Steps { steps, each } => write!(
                f,
                "{{ steps = {steps:?}, each = \"{}\" }}",
                humantime::format_duration(*each)
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_sizes_parse() {
        assert_eq!("512".parse::<ByteSize>(), Ok(ByteSize(512)));
        assert_eq!("76KB".parse::<ByteSize>(), Ok(ByteSize(76 * 1024)));
        assert_eq!("1MiB".parse::<ByteSize>(), Ok(ByteSize(1 << 20)));
        assert_eq!("2 mb".parse::<ByteSize>(), Ok(ByteSize(2 << 20)));
        assert_eq!("1.5k".parse::<ByteSize>(), Ok(ByteSize(1536)));
        assert!("12 parsecs".parse::<ByteSize>().is_err());
        assert!("KB".parse::<ByteSize>().is_err());
        assert!("".parse::<ByteSize>().is_err());
        assert_eq!(ByteSize(76 * 1024).to_string(), "76KiB");
        assert_eq!(ByteSize(1000).to_string(), "1000B");
    }
}
