//! Coordination through one small collection in `target.database` (plain
//! CRUD, so `readWrite` is enough), with no coordinator process:
//!
//! - `member:<i>`: each member's heartbeat (`seen`), for people and alerts;
//! - `prepare:<workload>`: the prepare lease. One member holds it (until
//!   `expires`, renewed while it loads, with its progress for the others
//!   to show) and runs the workload's shared prepare steps; the others
//!   wait. A holder that dies stops renewing: once the lease has expired
//!   another member takes it and resumes (every prepare step is
//!   resumable). `done` with the plan's fingerprint ends it.
//! - `epoch:<workload>`: the shared run epoch, the wall-clock instant
//!   every member places the workload's stage boundaries on. Members keep
//!   it alive (`alive`); a member that starts or restarts while it is
//!   alive joins it where it is now; once no member has touched it for a
//!   lease, or the schedule ended, the next member to start begins a new
//!   one a little in the future so the others can join from its start.
//!   It also holds the cluster-wide runtime control (`ctl --all`), levels
//!   as totals, which every member polls and applies as its share.
//! - `probe:<workload>:<generation>:<search>:<n>`: probe `n` of a capacity
//!   search, each member's part of it and the verdict ([`super::search`]).
//!
//! Every write that decides something is a compare-and-set on what was
//! read (`update_one` filtered on the old values), so two members racing
//! agree on one winner; the clocks are the members' own (NTP is assumed
//! across hosts).

use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use mongodb::bson::{doc, Bson, Document};
use mongodb::{Collection, Database};

use super::metrics::ClusterMetrics;
use super::{ClusterConfig, Member};
use crate::control::{Command, ControlState};
use crate::schedule::Load;

/// How often waiting members look at a lease, and members refresh and
/// read their epoch.
pub(crate) const POLL: Duration = Duration::from_millis(500);

/// How far in the future a new epoch starts: room for the members waiting
/// on the same prepare to see it and start with it.
pub(crate) const START_DELAY: Duration = Duration::from_millis(1500);

type DbResult<T> = Result<T, mongodb::error::Error>;

/// A member's handle on the coordination collection.
pub struct Coordinator {
    member: Member,
    pub(super) coll: Collection<Document>,
    lease: Duration,
    /// The cluster families.
    pub metrics: ClusterMetrics,
}

/// Where a workload's prepare stands for this member.
#[derive(Debug, Clone, PartialEq)]
pub enum Lease {
    /// Prepared (with this plan) by some member: nothing to load.
    Done,
    /// This member holds the lease: it prepares.
    Mine,
    /// Another member prepares; its last reported progress.
    Held {
        holder: i64,
        progress: Option<SharedProgress>,
    },
}

/// The progress a lease holder publishes for the waiting members.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SharedProgress {
    pub steps_done: u64,
    pub steps: u64,
    pub documents_done: u64,
    pub documents_total: u64,
    pub rate: f64,
}

/// A shared run epoch as one member joined it.
#[derive(Debug, Clone, PartialEq)]
pub struct Epoch {
    /// Where the schedule's time 0 is.
    pub start: DateTime<Utc>,
    /// How much sooner the stages run than `start` says: count-based
    /// stages that ended before their cap moved the later ones up.
    pub skipped: Duration,
    /// Changes when the epoch is replaced (a compare-and-set token).
    pub generation: i64,
    /// Whether this member began it (rather than joined it).
    pub began: bool,
}

/// What a member reads from its epoch on each poll.
#[derive(Debug, Clone, PartialEq)]
pub struct EpochState {
    pub start: DateTime<Utc>,
    pub generation: i64,
    /// The cluster-wide control and its sequence number (0: none yet).
    pub control_seq: i64,
    pub control: ControlState,
}

pub(super) fn ms(t: DateTime<Utc>) -> mongodb::bson::DateTime {
    mongodb::bson::DateTime::from_millis(t.timestamp_millis())
}

pub(super) fn utc(d: &mongodb::bson::DateTime) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(d.timestamp_millis())
        .single()
        .unwrap_or_default()
}

pub(super) fn int(d: &Document, key: &str) -> Option<i64> {
    match d.get(key)? {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(f) => Some(*f as i64),
        _ => None,
    }
}

pub(super) fn float(d: &Document, key: &str) -> f64 {
    match d.get(key) {
        Some(Bson::Double(f)) => *f,
        Some(Bson::Int32(i)) => f64::from(*i),
        Some(Bson::Int64(i)) => *i as f64,
        _ => 0.0,
    }
}

fn lease_ms(d: Duration) -> chrono::Duration {
    chrono::Duration::milliseconds(d.as_millis() as i64)
}

/// A control state as the epoch document stores it (levels as totals).
pub(crate) fn control_doc(c: &ControlState, seq: i64) -> Document {
    let (rate, concurrency) = match c.override_load {
        Some(Load::Rate(r)) => (Bson::Double(r), Bson::Null),
        Some(Load::Concurrency(n)) => (Bson::Null, Bson::Int64(i64::from(n))),
        None => (Bson::Null, Bson::Null),
    };
    doc! { "seq": seq, "paused": c.paused, "rate": rate, "concurrency": concurrency, "scale": c.scale }
}

/// The inverse of [`control_doc`]: the state and its sequence number.
pub(crate) fn parse_control(d: &Document) -> (ControlState, i64) {
    let override_load = match (d.get("rate"), int(d, "concurrency")) {
        (Some(Bson::Double(r)), _) => Some(Load::Rate(*r)),
        (_, Some(n)) => Some(Load::Concurrency(u32::try_from(n).unwrap_or(0))),
        _ => None,
    };
    let scale = match d.get("scale") {
        Some(_) => float(d, "scale"),
        None => 1.0,
    };
    (
        ControlState {
            paused: d.get_bool("paused").unwrap_or(false),
            override_load,
            scale,
        },
        int(d, "seq").unwrap_or(0),
    )
}

impl Coordinator {
    /// A handle for `member` on `config`'s collection in `db`.
    pub fn new(db: &Database, config: &ClusterConfig, metrics: ClusterMetrics) -> Coordinator {
        let member = config.member();
        metrics.size.set(i64::from(member.size));
        metrics.index.set(i64::from(member.index));
        Coordinator {
            member,
            coll: db.collection(&config.collection),
            lease: config.lease,
            metrics,
        }
    }

    /// This member.
    pub fn member(&self) -> Member {
        self.member
    }

    /// How long a lease lasts without renewal.
    pub fn lease(&self) -> Duration {
        self.lease
    }

    /// How often a holder renews its lease and members their heartbeat.
    pub fn renew_every(&self) -> Duration {
        (self.lease / 3).min(Duration::from_secs(1))
    }

    /// Counts a failed request of kind `request` and logs it (at most
    /// once per call site's retry loop is the callers' business).
    pub fn failed(&self, request: &str, e: &mongodb::error::Error) {
        self.metrics.errors.with_label_values(&[request]).inc();
        tracing::warn!(request, "cluster coordination failed, retrying: {e}");
    }

    /// Keeps `member:<i>` current until `stop`.
    pub async fn heartbeat(&self, stop: tokio_util::sync::CancellationToken) {
        let host = super::hostname(std::env::var("HOSTNAME").ok()).unwrap_or_default();
        let id = format!("member:{}", self.member.index);
        loop {
            let update = doc! { "$set": {
                "kind": "member",
                "index": i64::from(self.member.index),
                "size": i64::from(self.member.size),
                "host": &host,
                "pid": i64::from(std::process::id()),
                "seen": ms(Utc::now()),
            } };
            if let Err(e) = self
                .coll
                .update_one(doc! { "_id": &id }, update)
                .upsert(true)
                .await
            {
                self.failed("heartbeat", &e);
            }
            tokio::select! {
                _ = tokio::time::sleep(self.renew_every()) => {}
                _ = stop.cancelled() => return,
            }
        }
    }

    /// Looks at the prepare lease of `workload` and takes it if it is
    /// free, expired, already this member's, or done with another `plan`.
    pub async fn try_lease(&self, workload: &str, plan: &str) -> DbResult<Lease> {
        let id = format!("prepare:{workload}");
        let me = i64::from(self.member.index);
        let now = Utc::now();
        let expires = ms(now + lease_ms(self.lease));
        let Some(d) = self.coll.find_one(doc! { "_id": &id }).await? else {
            let fresh = doc! {
                "_id": &id, "kind": "prepare", "workload": workload, "plan": plan,
                "holder": me, "expires": expires, "done": false,
            };
            return match self.coll.insert_one(fresh).await {
                Ok(_) => Ok(Lease::Mine),
                // Another member inserted it first: it holds the lease.
                Err(e)
                    if crate::error_kind::classify(&e)
                        == crate::error_kind::ErrorKind::DuplicateKey =>
                {
                    Ok(Lease::Held {
                        holder: -1,
                        progress: None,
                    })
                }
                Err(e) => Err(e),
            };
        };
        let same_plan = d.get_str("plan").ok() == Some(plan);
        let done = d.get_bool("done").unwrap_or(false);
        if done && same_plan {
            return Ok(Lease::Done);
        }
        let holder = int(&d, "holder").unwrap_or(-1);
        let old_expiry = d.get_datetime("expires").ok().copied();
        let expired = old_expiry.is_none_or(|e| utc(&e) <= now);
        if holder == me || expired || done {
            let mut filter = doc! { "_id": &id, "holder": holder, "done": done };
            if let Some(e) = old_expiry {
                filter.insert("expires", e);
            }
            let take = doc! { "$set": {
                "holder": me, "expires": expires, "plan": plan, "done": false,
            } };
            if self.coll.update_one(filter, take).await?.modified_count == 1 {
                return Ok(Lease::Mine);
            }
        }
        let progress = d.get_document("progress").ok().map(|p| SharedProgress {
            steps_done: int(p, "steps_done").unwrap_or(0) as u64,
            steps: int(p, "steps").unwrap_or(0) as u64,
            documents_done: int(p, "documents_done").unwrap_or(0) as u64,
            documents_total: int(p, "documents_total").unwrap_or(0) as u64,
            rate: float(p, "rate"),
        });
        Ok(Lease::Held { holder, progress })
    }

    /// Renews this member's lease on `workload` with its progress; false
    /// when another member has taken it meanwhile.
    pub async fn renew(&self, workload: &str, progress: SharedProgress) -> DbResult<bool> {
        let update = doc! { "$set": {
            "expires": ms(Utc::now() + lease_ms(self.lease)),
            "progress": {
                "steps_done": progress.steps_done as i64,
                "steps": progress.steps as i64,
                "documents_done": progress.documents_done as i64,
                "documents_total": progress.documents_total as i64,
                "rate": progress.rate,
            },
        } };
        let filter = doc! {
            "_id": format!("prepare:{workload}"),
            "holder": i64::from(self.member.index),
            "done": false,
        };
        Ok(self.coll.update_one(filter, update).await?.matched_count == 1)
    }

    /// Marks `workload` prepared with `plan`; false when the lease was lost.
    pub async fn finish_lease(&self, workload: &str, plan: &str) -> DbResult<bool> {
        let filter = doc! {
            "_id": format!("prepare:{workload}"),
            "holder": i64::from(self.member.index),
        };
        let update = doc! { "$set": { "done": true, "plan": plan, "expires": ms(Utc::now()) } };
        Ok(self.coll.update_one(filter, update).await?.matched_count == 1)
    }

    /// Joins the live epoch of `workload`, or begins a new one
    /// [`START_DELAY`] from now when there is none, it has ended, or no
    /// member has touched it for a lease.
    pub async fn join_epoch(&self, workload: &str) -> DbResult<Epoch> {
        let id = format!("epoch:{workload}");
        loop {
            let now = Utc::now();
            let start = now + chrono::Duration::milliseconds(START_DELAY.as_millis() as i64);
            let fresh = |generation: i64| {
                doc! {
                    "kind": "epoch", "workload": workload, "start": ms(start), "alive": ms(now),
                    "generation": generation, "ended": false, "size": i64::from(self.member.size),
                    "began_by": i64::from(self.member.index),
                    "control": control_doc(&ControlState::default(), 0),
                }
            };
            let began = Epoch {
                start: utc(&ms(start)),
                skipped: Duration::ZERO,
                generation: 0,
                began: true,
            };
            match self.coll.find_one(doc! { "_id": &id }).await? {
                None => {
                    let mut d = fresh(1);
                    d.insert("_id", &id);
                    match self.coll.insert_one(d).await {
                        Ok(_) => {
                            return Ok(Epoch {
                                generation: 1,
                                ..began
                            })
                        }
                        Err(e)
                            if crate::error_kind::classify(&e)
                                == crate::error_kind::ErrorKind::DuplicateKey => {}
                        Err(e) => return Err(e),
                    }
                }
                Some(d) => {
                    let generation = int(&d, "generation").unwrap_or(0);
                    let alive = d.get_datetime("alive").map(utc).unwrap_or_default();
                    let ended = d.get_bool("ended").unwrap_or(false);
                    let start = d.get_datetime("start").map(utc).unwrap_or_default();
                    if !ended && alive + lease_ms(self.lease) > now {
                        return Ok(Epoch {
                            start,
                            skipped: Duration::from_millis(
                                int(&d, "skipped_ms").unwrap_or(0).max(0) as u64,
                            ),
                            generation,
                            began: false,
                        });
                    }
                    let replaced = self
                        .coll
                        .update_one(
                            doc! { "_id": &id, "generation": generation },
                            doc! { "$set": fresh(generation + 1) },
                        )
                        .await?;
                    if replaced.modified_count == 1 {
                        return Ok(Epoch {
                            generation: generation + 1,
                            ..began
                        });
                    }
                }
            }
        }
    }

    /// Keeps the epoch alive and reads it back: `None` once it has been
    /// replaced by another generation (this member then keeps its own).
    pub async fn touch_epoch(
        &self,
        workload: &str,
        generation: i64,
    ) -> DbResult<Option<EpochState>> {
        let id = format!("epoch:{workload}");
        let d = self
            .coll
            .find_one_and_update(
                doc! { "_id": &id, "generation": generation },
                doc! { "$set": { "alive": ms(Utc::now()) } },
            )
            .return_document(mongodb::options::ReturnDocument::After)
            .await?;
        Ok(d.map(|d| {
            let (control, control_seq) = d
                .get_document("control")
                .map(parse_control)
                .unwrap_or((ControlState::default(), 0));
            EpochState {
                start: d.get_datetime("start").map(utc).unwrap_or_default(),
                generation,
                control_seq,
                control,
            }
        }))
    }

    /// Records that this member has run its share of the count-based stage
    /// occurrence `key`, at `at`.
    pub async fn count_done(
        &self,
        workload: &str,
        generation: i64,
        key: &str,
        at: DateTime<Utc>,
    ) -> DbResult<()> {
        let field = format!("counts.{key}.m{}", self.member.index);
        self.coll
            .update_one(
                doc! { "_id": format!("epoch:{workload}"), "generation": generation },
                doc! { "$set": { field: ms(at) } },
            )
            .await?;
        Ok(())
    }

    /// The end of the count-based stage occurrence `key` once every member
    /// has run its share (the last one's finish), or `None` while some
    /// have not. The first member to see them all records the end and
    /// moves the epoch's later stages up (`skipped_ms`, for members that
    /// join later), once.
    pub async fn count_end(
        &self,
        workload: &str,
        generation: i64,
        key: &str,
        cap_end: DateTime<Utc>,
    ) -> DbResult<Option<DateTime<Utc>>> {
        let id = format!("epoch:{workload}");
        let Some(d) = self.coll.find_one(doc! { "_id": &id }).await? else {
            return Ok(None);
        };
        if let Ok(end) = d.get_document("barriers").and_then(|b| b.get_datetime(key)) {
            return Ok(Some(utc(end)));
        }
        let Ok(done) = d.get_document("counts").and_then(|c| c.get_document(key)) else {
            return Ok(None);
        };
        if done.len() < self.member.size as usize {
            return Ok(None);
        }
        let end = done
            .values()
            .filter_map(|v| v.as_datetime().map(utc))
            .max()
            .unwrap_or_else(Utc::now);
        self.end_early(workload, generation, key, end, cap_end)
            .await?;
        Ok(Some(end))
    }

    /// Records that the stage occurrence `key` ended at `end`, before its
    /// scheduled end `cap_end`: the epoch's later stages move up by the
    /// difference (`skipped_ms`, for members that join later), once.
    pub async fn end_early(
        &self,
        workload: &str,
        generation: i64,
        key: &str,
        end: DateTime<Utc>,
        cap_end: DateTime<Utc>,
    ) -> DbResult<()> {
        let skipped = (cap_end - end).num_milliseconds().max(0);
        let barrier = format!("barriers.{key}");
        self.coll
            .update_one(
                doc! { "_id": format!("epoch:{workload}"), "generation": generation, &barrier: { "$exists": false } },
                doc! { "$set": { &barrier: ms(end) }, "$inc": { "skipped_ms": skipped } },
            )
            .await?;
        Ok(())
    }

    /// Marks the epoch ended (the schedule is over): the next start begins
    /// a new one instead of joining a finished run.
    pub async fn end_epoch(&self, workload: &str, generation: i64) -> DbResult<()> {
        self.coll
            .update_one(
                doc! { "_id": format!("epoch:{workload}"), "generation": generation },
                doc! { "$set": { "ended": true } },
            )
            .await?;
        Ok(())
    }

    /// Applies `command` to the cluster-wide control of its workload
    /// (levels as totals), for every member to pick up; returns the new
    /// cluster state. Fails when the workload has no live epoch yet.
    pub async fn control(&self, command: &Command) -> Result<ControlState, String> {
        let Some(workload) = command.workload() else {
            return Err("status is per member; ask each member".into());
        };
        let id = format!("epoch:{workload}");
        for _ in 0..10 {
            let d = self
                .coll
                .find_one(doc! { "_id": &id })
                .await
                .map_err(|e| e.to_string())?
                .ok_or_else(|| {
                    format!("workload {workload} has no cluster epoch yet (still preparing?)")
                })?;
            let (mut state, seq) = d
                .get_document("control")
                .map(parse_control)
                .unwrap_or((ControlState::default(), 0));
            command.apply(&mut state);
            let filter = doc! { "_id": &id, "control.seq": seq };
            let set = doc! { "$set": { "control": control_doc(&state, seq + 1) } };
            let r = self
                .coll
                .update_one(filter, set)
                .await
                .map_err(|e| e.to_string())?;
            if r.modified_count == 1 {
                return Ok(state);
            }
        }
        Err("the cluster control kept changing under this request; try again".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_states_round_trip_through_the_document() {
        for state in [
            ControlState::default(),
            ControlState {
                paused: true,
                override_load: Some(Load::Rate(1500.0)),
                scale: 2.5,
            },
            ControlState {
                paused: false,
                override_load: Some(Load::Concurrency(12)),
                scale: 1.0,
            },
        ] {
            assert_eq!(parse_control(&control_doc(&state, 7)), (state, 7));
        }
    }
}
