//! Reading mongod's structured JSON log (logv2, MongoDB 4.4+): one JSON
//! document per line; the entries `capture` uses are the "Slow query"
//! ones (id 51803), which with `slowms = 0` record every operation.

use serde_json::Value;

/// The log id of mongod's "Slow query" entries.
pub const SLOW_QUERY_ID: i64 = 51803;

/// One "Slow query" entry: the fields `capture` reads.
#[derive(Debug, Clone, PartialEq)]
pub struct SlowQuery {
    /// When it was logged (ms since the epoch), if the line says.
    pub t_ms: Option<i64>,
    /// `attr.ns`: `db.collection` (or `db.$cmd` for a write command's envelope).
    pub ns: String,
    /// `attr.appName`, the client's.
    pub app_name: Option<String>,
    /// `attr.type`: `command`, or for one statement of a write command
    /// (servers before 8.0) `update` or `remove`.
    pub kind: String,
    /// `attr.command`: the command or, for `update`/`remove`, the statement.
    pub command: Value,
    /// `attr.durationMillis`.
    pub duration_ms: f64,
    /// `attr.nreturned`.
    pub nreturned: Option<u64>,
    /// `attr.planSummary`.
    pub plan_summary: Option<String>,
}

/// What one line of the log is.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A "Slow query" entry.
    Slow(Box<SlowQuery>),
    /// Another entry (startup, connections, …).
    Other,
    /// Not a logv2 entry: the reason.
    Bad(String),
}

/// Parses one line of a mongod log.
pub fn parse_line(line: &str) -> Line {
    let line = line.trim();
    if line.is_empty() {
        return Line::Other;
    }
    let v: Value = match serde_json::from_str(line) {
        Ok(v) => v,
        Err(e) => return Line::Bad(format!("not JSON: {e}")),
    };
    let Some(id) = v.get("id").and_then(Value::as_i64) else {
        return Line::Bad("no numeric \"id\": not mongod's structured log (4.4+)".into());
    };
    if id != SLOW_QUERY_ID {
        return Line::Other;
    }
    let Some(attr) = v.get("attr") else {
        return Line::Bad("a \"Slow query\" entry without \"attr\"".into());
    };
    let Some(ns) = attr.get("ns").and_then(Value::as_str) else {
        return Line::Bad("a \"Slow query\" entry without \"attr.ns\"".into());
    };
    let Some(command) = attr.get("command").filter(|c| c.is_object()) else {
        return Line::Bad("a \"Slow query\" entry without \"attr.command\"".into());
    };
    Line::Slow(Box::new(SlowQuery {
        t_ms: v.get("t").and_then(date_ms),
        ns: ns.to_owned(),
        app_name: attr
            .get("appName")
            .and_then(Value::as_str)
            .map(str::to_owned),
        kind: attr
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("command")
            .to_owned(),
        command: command.clone(),
        duration_ms: attr.get("durationMillis").and_then(number).unwrap_or(0.0),
        nreturned: attr.get("nreturned").and_then(number).map(|n| n as u64),
        plan_summary: attr
            .get("planSummary")
            .and_then(Value::as_str)
            .map(str::to_owned),
    }))
}

/// A number, plain or extended JSON (`{"$numberLong": "…"}`).
pub fn number(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::Object(o) if o.len() == 1 => {
            let (k, v) = o.iter().next()?;
            match k.as_str() {
                "$numberLong" | "$numberInt" | "$numberDouble" | "$numberDecimal" => {
                    v.as_str()?.parse().ok()
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// An extended-JSON date `{"$date": …}` (an ISO-8601 string or
/// `{"$numberLong": "ms"}`) in ms since the epoch.
pub fn date_ms(v: &Value) -> Option<i64> {
    let d = v.as_object().filter(|o| o.len() == 1)?.get("$date")?;
    match d {
        Value::String(s) => chrono::DateTime::parse_from_rfc3339(s)
            .ok()
            .map(|t| t.timestamp_millis()),
        other => number(other).map(|n| n as i64),
    }
}
