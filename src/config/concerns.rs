//! The write and read concerns (`target.` and per workload): their
//! types, where the effective one comes from, validation, and the lines
//! `check-config` prints. Whether write attempts are read
//! (`target.command_events`) follows from whether the plan writes.

use std::fmt;
use std::time::Duration;

use mongodb::options::{Acknowledgment, ReadConcern, WriteConcern};
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde::Deserialize;

use super::{Config, KeyError, TargetConfig, WorkloadConfig};

/// `w` of a write concern: a number of members, `"majority"`, or a tag set
/// name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteAck {
    Nodes(u32),
    Majority,
    Tag(String),
}

impl fmt::Display for WriteAck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteAck::Nodes(n) => write!(f, "{n}"),
            WriteAck::Majority => f.write_str("majority"),
            WriteAck::Tag(t) => f.write_str(t),
        }
    }
}

/// `write_concern`: `"majority"`, a number (`1`), a tag name, or a table
/// `{ w = "majority", j = true, wtimeout = "5s" }` (each key optional).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WriteConcernSpec {
    pub w: Option<WriteAck>,
    pub journal: Option<bool>,
    pub wtimeout: Option<Duration>,
}

impl WriteConcernSpec {
    /// The driver's write concern.
    pub fn to_driver(&self) -> WriteConcern {
        let mut wc = WriteConcern::default();
        wc.w = self.w.as_ref().map(|w| match w {
            WriteAck::Nodes(n) => Acknowledgment::Nodes(*n),
            WriteAck::Majority => Acknowledgment::Majority,
            WriteAck::Tag(t) => Acknowledgment::Custom(t.clone()),
        });
        wc.journal = self.journal;
        wc.w_timeout = self.wtimeout;
        wc
    }

    /// Whether the server acknowledges writes (`w` other than 0).
    pub fn acknowledged(&self) -> bool {
        self.w != Some(WriteAck::Nodes(0))
    }

    fn validate(&self, key: &str) -> Result<(), KeyError> {
        if !self.acknowledged() && self.journal == Some(true) {
            return Err(KeyError::new(
                key,
                "j = true needs an acknowledged write (w of 1 or more)",
            ));
        }
        if let Some(WriteAck::Tag(t)) = &self.w {
            if t.trim().is_empty() {
                return Err(KeyError::new(key, "w must not be empty"));
            }
        }
        if self.w.is_none() && self.journal.is_none() && self.wtimeout.is_none() {
            return Err(KeyError::new(key, "the table sets none of w, j, wtimeout"));
        }
        Ok(())
    }
}

impl fmt::Display for WriteConcernSpec {
    /// `w=majority, j=true, wtimeout=5s`, as check-config prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(w) = &self.w {
            parts.push(format!("w={w}"));
        }
        if let Some(j) = self.journal {
            parts.push(format!("j={j}"));
        }
        if let Some(t) = self.wtimeout {
            parts.push(format!("wtimeout={}", humantime::format_duration(t)));
        }
        f.write_str(&parts.join(", "))
    }
}

fn ack_from_str<E: de::Error>(s: &str) -> Result<WriteAck, E> {
    let t = s.trim();
    if t == "majority" {
        Ok(WriteAck::Majority)
    } else if let Ok(n) = t.parse::<u32>() {
        Ok(WriteAck::Nodes(n))
    } else if t.is_empty() || t.starts_with('-') && t[1..].parse::<u64>().is_ok() {
        Err(E::custom(format!(
            "w must be \"majority\", a number of members ≥ 0 or a tag name, got {s:?}"
        )))
    } else {
        Ok(WriteAck::Tag(t.to_owned()))
    }
}

fn ack_from_int<E: de::Error>(v: i64) -> Result<WriteAck, E> {
    u32::try_from(v).map(WriteAck::Nodes).map_err(|_| {
        E::custom(format!(
            "w must be \"majority\", a number of members ≥ 0 or a tag name, got {v}"
        ))
    })
}

/// `w` alone, as a string or an integer.
struct AckVisitor;

impl Visitor<'_> for AckVisitor {
    type Value = WriteAck;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"majority\", a number of members or a tag name")
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<WriteAck, E> {
        ack_from_int(i64::try_from(v).unwrap_or(i64::MAX))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<WriteAck, E> {
        ack_from_int(v)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<WriteAck, E> {
        ack_from_str(v)
    }
}

impl<'de> Deserialize<'de> for WriteAck {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<WriteAck, D::Error> {
        d.deserialize_any(AckVisitor)
    }
}

impl<'de> Deserialize<'de> for WriteConcernSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<WriteConcernSpec, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = WriteConcernSpec;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a write concern: \"majority\", a number of members, a tag name, \
                     or a table { w = …, j = …, wtimeout = \"…\" }",
                )
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Self::Value, E> {
                AckVisitor.visit_u64(v).map(WriteConcernSpec::from)
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Self::Value, E> {
                AckVisitor.visit_i64(v).map(WriteConcernSpec::from)
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                AckVisitor.visit_str(v).map(WriteConcernSpec::from)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut spec = WriteConcernSpec::default();
                while let Some(key) = map.next_key::<String>()? {
                    match key.as_str() {
                        "w" => spec.w = Some(map.next_value()?),
                        "j" => spec.journal = Some(map.next_value()?),
                        "wtimeout" => {
                            let text: String = map.next_value()?;
                            let d = humantime::parse_duration(&text).map_err(|e| {
                                de::Error::custom(format!(
                                    "wtimeout: {e}: expected a duration such as \"5s\""
                                ))
                            })?;
                            spec.wtimeout = Some(d);
                        }
                        other => {
                            return Err(de::Error::unknown_field(other, &["w", "j", "wtimeout"]))
                        }
                    }
                }
                Ok(spec)
            }
        }
        d.deserialize_any(V)
    }
}

impl From<WriteAck> for WriteConcernSpec {
    fn from(w: WriteAck) -> Self {
        WriteConcernSpec {
            w: Some(w),
            journal: None,
            wtimeout: None,
        }
    }
}

/// `read_concern`: the level of reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadConcernSpec {
    Local,
    Available,
    Majority,
    Linearizable,
    Snapshot,
}

impl ReadConcernSpec {
    /// The level as MongoDB spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadConcernSpec::Local => "local",
            ReadConcernSpec::Available => "available",
            ReadConcernSpec::Majority => "majority",
            ReadConcernSpec::Linearizable => "linearizable",
            ReadConcernSpec::Snapshot => "snapshot",
        }
    }

    /// The driver's read concern.
    pub fn to_driver(self) -> ReadConcern {
        match self {
            ReadConcernSpec::Local => ReadConcern::local(),
            ReadConcernSpec::Available => ReadConcern::available(),
            ReadConcernSpec::Majority => ReadConcern::majority(),
            ReadConcernSpec::Linearizable => ReadConcern::linearizable(),
            ReadConcernSpec::Snapshot => ReadConcern::snapshot(),
        }
    }
}

/// Where an effective concern comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConcernSource {
    /// `workloads[].write_concern` / `read_concern`.
    Workload,
    /// `target.write_concern` / `read_concern`.
    Target,
    /// The connection string (`w=…`, `readConcernLevel=…`).
    Uri,
}

impl ConcernSource {
    /// How check-config and check-target name it.
    pub fn as_str(self) -> &'static str {
        match self {
            ConcernSource::Workload => "workload",
            ConcernSource::Target => "target.write_concern",
            ConcernSource::Uri => "uri",
        }
    }
}

/// The `w` a connection string sets (`w=…`), if any.
pub fn uri_w(uri: &str) -> Option<String> {
    uri_option(uri, "w")
}

/// A query option of a connection string, matched case-insensitively.
fn uri_option(uri: &str, name: &str) -> Option<String> {
    let query = uri.split_once('?')?.1;
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        k.eq_ignore_ascii_case(name).then(|| v.to_owned())
    })
}

impl TargetConfig {
    /// The write concern a workload's writes carry and where it is set:
    /// the workload's, else the target's; `None` leaves it to the
    /// connection string or the deployment's default.
    pub fn write_concern_for<'a>(
        &'a self,
        w: &'a WorkloadConfig,
    ) -> Option<(&'a WriteConcernSpec, ConcernSource)> {
        match (&w.write_concern, &self.write_concern) {
            (Some(wc), _) => Some((wc, ConcernSource::Workload)),
            (None, Some(wc)) => Some((wc, ConcernSource::Target)),
            (None, None) => None,
        }
    }

    /// The read concern of a workload's reads: the workload's, else the
    /// target's.
    pub fn read_concern_for(&self, w: &WorkloadConfig) -> Option<(ReadConcernSpec, ConcernSource)> {
        match (w.read_concern, self.read_concern) {
            (Some(rc), _) => Some((rc, ConcernSource::Workload)),
            (None, Some(rc)) => Some((rc, ConcernSource::Target)),
            (None, None) => None,
        }
    }

    /// `db` as the workload's requests use it: with its effective write and
    /// read concerns (none set: `db` itself, the connection string's).
    pub fn database_for(&self, db: &mongodb::Database, w: &WorkloadConfig) -> mongodb::Database {
        let wc = self.write_concern_for(w).map(|(wc, _)| wc.to_driver());
        let rc = self.read_concern_for(w).map(|(rc, _)| rc.to_driver());
        if wc.is_none() && rc.is_none() {
            return db.clone();
        }
        let options = mongodb::options::DatabaseOptions::builder()
            .write_concern(wc)
            .read_concern(rc)
            .build();
        db.client().database_with_options(db.name(), options)
    }

    /// check-config's lines for the target's concerns.
    pub(super) fn describe_concerns(&self, uri: Option<&str>, events: bool) -> String {
        let wc = match (&self.write_concern, uri.and_then(uri_w)) {
            (Some(wc), _) => format!("{wc} (target.write_concern)"),
            (None, Some(w)) => format!("w={w} (uri)"),
            (None, None) => "the deployment's default (w=majority on MongoDB 5.0+)".into(),
        };
        let rc = match (
            self.read_concern,
            uri.and_then(|u| uri_option(u, "readConcernLevel")),
        ) {
            (Some(rc), _) => format!("{} (target.read_concern)", rc.as_str()),
            (None, Some(l)) => format!("{l} (uri)"),
            (None, None) => "the deployment's default (local)".into(),
        };
        let events = match (events, self.command_events) {
            (true, Some(_)) => "on (retried writes and the outages retries hide are counted)",
            (true, None) => {
                "on, as a workload writes (retried writes and the outages retries hide are counted)"
            }
            (false, Some(_)) => "off",
            (false, None) => "off, as no workload writes",
        };
        format!("  write concern: {wc}\n  read concern: {rc}\n  command events: {events}\n")
    }

    pub(super) fn validate_concerns(&self) -> Result<(), KeyError> {
        if let Some(wc) = &self.write_concern {
            wc.validate("target.write_concern")?;
        }
        Ok(())
    }
}

impl Config {
    /// Whether each write's attempts are read (from the driver's pool
    /// events, [`crate::mongo::attempts`]): `target.command_events`,
    /// else on when a workload writes (a read-only plan has no write
    /// attempts to watch). The name is from when it meant the driver's
    /// command monitoring.
    pub fn command_events(&self) -> bool {
        self.target
            .command_events
            .unwrap_or_else(|| self.workloads.iter().any(|w| w.kind.params().writes()))
    }
}

impl WorkloadConfig {
    /// The workload's own concern keys (relative to the workload).
    pub(super) fn validate_concerns(&self) -> Result<(), KeyError> {
        if let Some(wc) = &self.write_concern {
            wc.validate("write_concern")?;
        }
        Ok(())
    }

    /// check-config's lines for this workload's own concerns.
    pub(super) fn describe_concerns(&self) -> String {
        let mut s = String::new();
        if let Some(wc) = &self.write_concern {
            s.push_str(&format!("  write concern: {wc} (workload)\n"));
        }
        if let Some(rc) = self.read_concern {
            s.push_str(&format!("  read concern: {} (workload)\n", rc.as_str()));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::tests::load_one as load;

    fn wc(toml: &str) -> Result<WriteConcernSpec, String> {
        #[derive(Deserialize)]
        struct T {
            write_concern: WriteConcernSpec,
        }
        let v: T = config::Config::builder()
            .add_source(config::File::from_str(toml, config::FileFormat::Toml))
            .build()
            .map_err(|e| e.to_string())?
            .try_deserialize()
            .map_err(|e| e.to_string())?;
        Ok(v.write_concern)
    }

    #[test]
    fn write_concerns_parse_in_every_form() {
        assert_eq!(
            wc(r#"write_concern = "majority""#).unwrap(),
            WriteAck::Majority.into()
        );
        assert_eq!(wc("write_concern = 1").unwrap(), WriteAck::Nodes(1).into());
        assert_eq!(
            wc(r#"write_concern = "dc2""#).unwrap(),
            WriteAck::Tag("dc2".into()).into()
        );
        let t = wc(r#"write_concern = { w = 2, j = true, wtimeout = "5s" }"#).unwrap();
        assert_eq!(t.to_string(), "w=2, j=true, wtimeout=5s");
        let d = t.to_driver();
        assert_eq!(d.w, Some(Acknowledgment::Nodes(2)));
        assert_eq!(
            (d.journal, d.w_timeout),
            (Some(true), Some(Duration::from_secs(5)))
        );
        for (bad, why) in [
            ("write_concern = -1", "w must be"),
            (r#"write_concern = { w = 1, x = 2 }"#, "unknown field"),
            (r#"write_concern = { wtimeout = "soon" }"#, "wtimeout"),
        ] {
            let e = wc(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn write_concern_rules() {
        let w0 = WriteConcernSpec {
            journal: Some(true),
            ..WriteAck::Nodes(0).into()
        };
        assert!(!w0.acknowledged());
        assert!(w0.validate("k").unwrap_err().reason.contains("j = true"));
        assert!(WriteConcernSpec::default().validate("k").is_err());
        assert!(WriteConcernSpec::from(WriteAck::Majority)
            .validate("k")
            .is_ok());
    }

    #[test]
    fn uri_options_are_found() {
        let u = "mongodb://a:b@h1,h2/db?replicaSet=rs0&W=majority&readConcernLevel=local";
        assert_eq!(uri_w(u).as_deref(), Some("majority"));
        assert_eq!(uri_option(u, "readconcernlevel").as_deref(), Some("local"));
        assert_eq!(uri_w("mongodb://h1/"), None);
    }

    #[test]
    fn concerns_resolve_and_are_described() {
        let c = load(
            "write_concern = \"majority\"\nread_concern = \"majority\"",
            "kind = \"mixed\"\nwrite_concern = { w = 1, j = true }",
        )
        .unwrap();
        let w = &c.workloads[0];
        let (wc, src) = c.target.write_concern_for(w).unwrap();
        assert_eq!(
            (wc.to_string().as_str(), src),
            ("w=1, j=true", ConcernSource::Workload)
        );
        assert_eq!(
            c.target.read_concern_for(w),
            Some((ReadConcernSpec::Majority, ConcernSource::Target))
        );
        let d = c.describe();
        assert!(
            d.contains("  write concern: w=majority (target.write_concern)\n"),
            "{d}"
        );
        assert!(
            d.contains("  read concern: majority (target.read_concern)\n"),
            "{d}"
        );
        assert!(
            d.contains("  write concern: w=1, j=true (workload)\n"),
            "{d}"
        );
        let plain = load("", "kind = \"mixed\"").unwrap().describe();
        assert!(
            plain.contains("write concern: the deployment's default"),
            "{plain}"
        );
    }
}
