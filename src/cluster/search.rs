//! A capacity search run by the whole cluster: the members meet at the
//! search's start (probe 0, no report), then each runs its share of a
//! probe's rate and reports its part of the probe (its report) to the
//! probe's document in the coordination collection; the first member
//! to see every part judges the probe for all of them from the parts
//! together and writes the verdict with the instant the next probe
//! starts. Every member follows that one verdict, so their searches take
//! the same steps. A member whose part does not come within the wait
//! leaves the probe unjudged, and the search ends without a result: its
//! share was missing from the cluster's load.

use std::time::Duration;

use chrono::Utc;
use mongodb::bson::{doc, Bson, Document};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::coord::{float, int, ms, utc};
use super::epoch::{instant, wall, ClusterRun, Joined};

/// How often a member waiting for the others' parts reads the probe.
const POLL: Duration = Duration::from_millis(100);

/// How long after its verdict the next probe starts: time for every
/// member to read the verdict first.
const NEXT_DELAY: Duration = Duration::from_millis(500);

/// What the judging member decides from the parts together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Verdict {
    pub passed: bool,
    pub error_ratio: f64,
    /// The probe's p99 over every member's operations, for the log.
    pub p99: Duration,
}

/// How a probe ended for the cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum ProbeEnd {
    /// Judged: the verdict, and when the next probe starts.
    Judged {
        verdict: Verdict,
        next: Instant,
    },
    /// Not judged: why (members whose parts did not come).
    Unjudged(String),
    Cancelled,
}

/// One probe of one search occurrence, as the cluster shares it.
pub struct Probe<'a> {
    pub workload: &'a str,
    pub joined: &'a Joined,
    /// The search occurrence, the same on every member.
    pub search: &'a str,
    /// 1-based; 0 is the search's start, which every member reaches
    /// before the first probe.
    pub number: u32,
}

impl Probe<'_> {
    fn id(&self, number: u32) -> String {
        format!(
            "probe:{}:{}:{}:{number}",
            self.workload,
            self.joined.generation(),
            self.search
        )
    }
}

impl ClusterRun {
    /// Reports this member's `part` of `probe` (`landed`: every operation
    /// of it had landed) and waits for the verdict: the first member to
    /// see all parts decides it with `judge` (the parts in member order,
    /// and whether all had landed). Gives up on the missing parts `wait`
    /// after its own.
    pub async fn probe_end<T: Serialize + DeserializeOwned>(
        &self,
        probe: &Probe<'_>,
        part: &T,
        landed: bool,
        judge: impl Fn(Vec<T>, bool) -> Verdict,
        wait: Duration,
        cancel: &CancellationToken,
    ) -> ProbeEnd {
        let coord = &self.coord;
        let me = coord.member();
        let id = probe.id(probe.number);
        let text = match serde_json::to_string(part) {
            Ok(t) => t,
            Err(e) => return ProbeEnd::Unjudged(format!("its part could not be written: {e}")),
        };
        let field = format!("parts.m{}", me.index);
        let posted =
            doc! { "$set": { &field: { "part": text, "landed": landed, "at": ms(Utc::now()) } } };
        let deadline = Instant::now() + wait;
        let mut reported = false;
        loop {
            if !reported {
                match coord
                    .coll
                    .update_one(doc! { "_id": &id }, posted.clone())
                    .upsert(true)
                    .await
                {
                    Ok(_) => reported = true,
                    Err(e) => coord.failed("search", &e),
                }
            }
            if reported {
                match coord.coll.find_one(doc! { "_id": &id }).await {
                    Ok(Some(d)) => {
                        if let Some(end) = read_outcome(&d) {
                            return end;
                        }
                        match self
                            .decide(probe, &d, &judge, Instant::now() >= deadline)
                            .await
                        {
                            // Written (or lost to another member's): read it.
                            Ok(true) => continue,
                            Ok(false) => {}
                            Err(e) => coord.failed("search", &e),
                        }
                    }
                    Ok(None) => reported = false,
                    Err(e) => coord.failed("search", &e),
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(POLL) => {}
                _ = cancel.cancelled() => return ProbeEnd::Cancelled,
            }
        }
    }

    /// Writes the probe's verdict once every part is in, or its failure
    /// when `late` and some are not; false (nothing written) while parts
    /// are missing and there is time. The write is a compare-and-set: one
    /// verdict wins.
    async fn decide<T: DeserializeOwned>(
        &self,
        probe: &Probe<'_>,
        d: &Document,
        judge: impl Fn(Vec<T>, bool) -> Verdict,
        late: bool,
    ) -> Result<bool, mongodb::error::Error> {
        let size = self.coord.member().size;
        let parts = d.get_document("parts").ok();
        let mut all = Vec::new();
        let mut missing = Vec::new();
        let mut landed = true;
        for m in 0..size {
            let part = parts.and_then(|p| p.get_document(format!("m{m}")).ok());
            match part.and_then(|p| Some((p.get_str("part").ok()?, p.get_bool("landed").ok()?))) {
                Some((text, l)) => match serde_json::from_str(text) {
                    Ok(t) => {
                        all.push(t);
                        landed &= l;
                    }
                    Err(_) => missing.push(m),
                },
                None => missing.push(m),
            }
        }
        let next = ms(wall(Instant::now() + NEXT_DELAY));
        let outcome = if missing.is_empty() {
            let v = judge(all, landed);
            doc! {
                "passed": v.passed,
                "error_ratio": v.error_ratio,
                "p99_ns": i64::try_from(v.p99.as_nanos()).unwrap_or(i64::MAX),
                "next": next,
            }
        } else if late {
            let missing: Vec<Bson> = missing.iter().map(|m| Bson::Int64(i64::from(*m))).collect();
            doc! { "missing": missing }
        } else {
            return Ok(false);
        };
        let id = probe.id(probe.number);
        let won = self
            .coord
            .coll
            .update_one(
                doc! { "_id": &id, "outcome": { "$exists": false } },
                doc! { "$set": { "outcome": outcome }, "$unset": { "parts": "" } },
            )
            .await?
            .modified_count
            == 1;
        // Every member has read the previous probe's verdict (it reported
        // this one): that document is no longer needed.
        if won && missing.is_empty() && probe.number > 0 {
            self.coord
                .coll
                .delete_one(doc! { "_id": probe.id(probe.number - 1) })
                .await?;
        }
        Ok(true)
    }

    /// Records that the search occurrence ended at `end`, before the end of
    /// its stage `cap`: the epoch's later stages move up (for members that
    /// join later; this member moves its own).
    pub async fn search_ended(
        &self,
        workload: &str,
        joined: &Joined,
        search: &str,
        end: Instant,
        cap: Instant,
    ) {
        let key = format!("search_{search}");
        if let Err(e) = self
            .coord
            .end_early(workload, joined.generation(), &key, wall(end), wall(cap))
            .await
        {
            self.coord.failed("search", &e);
        }
    }
}

/// The verdict a probe's document holds, if it has one.
fn read_outcome(d: &Document) -> Option<ProbeEnd> {
    let o = d.get_document("outcome").ok()?;
    if let Ok(missing) = o.get_array("missing") {
        let members: Vec<String> = missing
            .iter()
            .filter_map(|m| match m {
                Bson::Int64(i) => Some(i.to_string()),
                Bson::Int32(i) => Some(i.to_string()),
                _ => None,
            })
            .collect();
        return Some(ProbeEnd::Unjudged(format!(
            "no report from member {} in time",
            members.join(", ")
        )));
    }
    let p99 = int(o, "p99_ns").unwrap_or(0);
    Some(ProbeEnd::Judged {
        verdict: Verdict {
            passed: o.get_bool("passed").unwrap_or(false),
            error_ratio: float(o, "error_ratio"),
            p99: Duration::from_nanos(p99.max(0) as u64),
        },
        next: instant(
            o.get_datetime("next")
                .map(utc)
                .unwrap_or_else(|_| Utc::now()),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_document_reads_as_its_verdict_or_the_members_missing() {
        assert_eq!(read_outcome(&doc! { "parts": {} }), None);
        let next = Utc::now() + chrono::Duration::seconds(2);
        let judged = doc! { "outcome": {
            "passed": false, "error_ratio": 0.25, "p99_ns": 30_000_000i64, "next": ms(next),
        } };
        let Some(ProbeEnd::Judged { verdict, next: at }) = read_outcome(&judged) else {
            panic!("judged");
        };
        assert_eq!(
            verdict,
            Verdict {
                passed: false,
                error_ratio: 0.25,
                p99: Duration::from_millis(30)
            }
        );
        let ahead = at.saturating_duration_since(Instant::now());
        assert!(ahead > Duration::from_millis(1500) && ahead <= Duration::from_secs(2));
        let missing = doc! { "outcome": { "missing": [1i64, 3i64] } };
        assert_eq!(
            read_outcome(&missing),
            Some(ProbeEnd::Unjudged(
                "no report from member 1, 3 in time".into()
            ))
        );
    }
}
