//! Typed config values parsed once at load: stage levels. Byte sizes and
//! the key error every layer reports are in the leaf `crate::values`,
//! which the workload kinds import too.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

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
