//! The deployment (the MongoDB side; `[target]` in the config): building
//! the driver client from the config, running a workload's prepare steps,
//! executing requests (single driver calls, optionally in a session's
//! transaction), and classifying errors.
//! Everything here goes through the official driver and needs only
//! `readWrite` on the configured database. Operations of several requests
//! are the engine's business: this layer never sees one.

pub(crate) mod attempts;
pub(crate) mod shard;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mongodb::bson::{doc, Bson, Document, RawDocumentBuf};
use mongodb::options::{ClientOptions, IndexOptions};
use mongodb::{Client, ClientSession, Collection, Database, IndexModel};

use crate::workload::{Action, PrepareStep, Workload};

use crate::error_kind::classify;

/// A workload's view of the deployment: its database and collection handles,
/// resolved once so the hot path does no name lookups.
#[derive(Clone)]
pub struct Deployment {
    db: Database,
    collections: Arc<[Collection<Document>]>,
    /// The same collections for reads that only count what comes back:
    /// a reply document is kept as its bytes, never decoded.
    raw: Arc<[Collection<RawDocumentBuf>]>,
    operation_timeout: Duration,
    /// Whether requests in a session work here: not known yet, used
    /// (one succeeded) or refused (the deployment has no sessions).
    sessions: Arc<AtomicU8>,
}

const SESSIONS_UNKNOWN: u8 = 0;
const SESSIONS_USED: u8 = 1;
const SESSIONS_REFUSED: u8 = 2;

/// What a request returned: documents written or returned.
pub type Outcome = Result<u64, mongodb::error::Error>;

impl Deployment {
    pub fn new(db: Database, workload: &dyn Workload, operation_timeout: Duration) -> Self {
        let names = workload.collections();
        Deployment {
            collections: names.iter().map(|n| db.collection(n)).collect(),
            raw: names.iter().map(|n| db.collection(n)).collect(),
            db,
            operation_timeout,
            sessions: Arc::new(AtomicU8::new(SESSIONS_UNKNOWN)),
        }
    }

    pub fn database(&self) -> &Database {
        &self.db
    }

    /// How long one operation (all its requests) may take: the engine
    /// bounds each operation with one timer.
    pub fn operation_timeout(&self) -> Duration {
        self.operation_timeout
    }

    /// Executes one request outside a transaction, in `session` if given
    /// (a worker's, from [`Deployment::plain_session`]). Not bounded here:
    /// the engine runs every request of an operation under the
    /// operation's deadline. Takes the action by value: its documents move
    /// into the driver call instead of being cloned on every request.
    ///
    /// Until a request in a session has succeeded, the action is copied
    /// first: a deployment without sessions (a MongoDB-compatible server
    /// may have none) refuses it before anything is sent, and it is then
    /// sent without one, as every later request is.
    pub async fn execute(&self, action: Action, session: Option<&mut ClientSession>) -> Outcome {
        let Some(session) = session else {
            return self.execute_unbounded(action, None).await;
        };
        if self.sessions.load(Ordering::Relaxed) == SESSIONS_USED {
            return self.execute_unbounded(action, Some(session)).await;
        }
        let spare = action.clone();
        match self.execute_unbounded(action, Some(session)).await {
            Err(e) if matches!(*e.kind, mongodb::error::ErrorKind::SessionsNotSupported) => {
                self.sessions.store(SESSIONS_REFUSED, Ordering::Relaxed);
                // Refused before it was sent: its checkout was no attempt.
                attempts::forget();
                self.execute_unbounded(spare, None).await
            }
            outcome => {
                if outcome.is_ok() {
                    self.sessions.store(SESSIONS_USED, Ordering::Relaxed);
                }
                outcome
            }
        }
    }

    /// A session for a worker's requests outside transactions (no causal
    /// consistency: each request stands alone, as with the driver's
    /// implicit sessions), or none where the deployment has no sessions.
    pub async fn plain_session(&self) -> Option<ClientSession> {
        if self.sessions.load(Ordering::Relaxed) == SESSIONS_REFUSED {
            return None;
        }
        self.db
            .client()
            .start_session()
            .causal_consistency(false)
            .await
            .ok()
    }

    /// Executes one request inside `session`'s transaction (not bounded
    /// here either).
    pub async fn execute_in(&self, action: Action, session: &mut ClientSession) -> Outcome {
        self.execute_unbounded(action, Some(session)).await
    }

    /// A session with a transaction started (the first request sends
    /// `startTransaction`); not bounded here.
    pub async fn start_transaction(&self) -> Result<ClientSession, mongodb::error::Error> {
        let mut session = self.db.client().start_session().await?;
        session.start_transaction().await?;
        Ok(session)
    }

    /// Commits `session`'s transaction; not bounded here.
    pub async fn commit(&self, session: &mut ClientSession) -> Result<(), mongodb::error::Error> {
        session.commit_transaction().await
    }

    /// Aborts `session`'s transaction; not bounded here (the caller bounds
    /// it by the operation's deadline).
    pub async fn abort(&self, session: &mut ClientSession) -> Result<(), mongodb::error::Error> {
        session.abort_transaction().await
    }

    /// Runs one call of the prepare steps under the
    /// operation timeout; running out of time is an I/O `TimedOut` error
    /// (classified `timeout`). The driver can wait forever on a connection
    /// checkout (seen with a pool whose every handshake fails
    /// authentication), so no call goes unbounded.
    async fn bounded<T>(
        &self,
        call: impl std::future::Future<Output = Result<T, mongodb::error::Error>>,
    ) -> Result<T, mongodb::error::Error> {
        within(self.operation_timeout, call).await
    }

    async fn execute_unbounded(
        &self,
        action: Action,
        mut session: Option<&mut ClientSession>,
    ) -> Outcome {
        use mongodb::action::Action as _;
        let c = &self.collections;
        // Each call joins the session's transaction when there is one.
        macro_rules! in_session {
            ($call:expr) => {
                $call
                    .optional(session.as_deref_mut(), |a, s| a.session(s))
                    .await
            };
        }
        match action {
            Action::InsertOne { collection, doc } => {
                in_session!(c[collection].insert_one(doc))?;
                Ok(1)
            }
            Action::InsertMany { collection, docs } => {
                let r = in_session!(c[collection].insert_many(docs))?;
                Ok(r.inserted_ids.len() as u64)
            }
            Action::FindOne { collection, filter } => {
                let raw = &self.raw[collection];
                Ok(in_session!(raw.find_one(filter))?.map_or(0, |_| 1))
            }
            Action::Find {
                collection,
                filter,
                sort,
                limit,
                projection,
            } => {
                let find = c[collection]
                    .find(filter)
                    .limit(limit)
                    .optional(sort, |f, s| f.sort(s))
                    .optional(projection, |f, p| f.projection(p));
                // Boxed, as the aggregation below: a cursor's state would
                // otherwise size every request, finds by `_id` included.
                Box::pin(async move {
                    match session {
                        None => count(find.await?).await,
                        Some(s) => count_in(find.session(&mut *s).await?, s).await,
                    }
                })
                .await
            }
            Action::UpdateOne {
                collection,
                filter,
                update,
            } => {
                let r = in_session!(c[collection].update_one(filter, update))?;
                Ok(r.modified_count + u64::from(r.upserted_id.is_some()))
            }
            Action::UpdateMany {
                collection,
                filter,
                update,
            } => {
                let r = in_session!(c[collection].update_many(filter, update))?;
                Ok(r.modified_count + u64::from(r.upserted_id.is_some()))
            }
            Action::DeleteOne { collection, filter } => {
                Ok(in_session!(c[collection].delete_one(filter))?.deleted_count)
            }
            Action::DeleteMany { collection, filter } => {
                Ok(in_session!(c[collection].delete_many(filter))?.deleted_count)
            }
            Action::Aggregate {
                collection,
                pipeline,
            } => {
                let agg = c[collection].aggregate(pipeline);
                Box::pin(async move {
                    match session {
                        None => count(agg.await?).await,
                        Some(s) => count_in(agg.session(&mut *s).await?, s).await,
                    }
                })
                .await
            }
            Action::Count { collection, filter } => {
                in_session!(c[collection].count_documents(filter))?;
                Ok(1)
            }
            Action::Distinct {
                collection,
                field,
                filter,
            } => Ok(in_session!(c[collection].distinct(field, filter))?.len() as u64),
        }
    }

    /// Runs one prepare step. Loads are idempotent and resumable: documents
    /// are keyed by their sequence number, so a load counts what is there and
    /// inserts from the first missing key on; `progress` is told how many of
    /// `count` are in place after each batch.
    pub async fn prepare(
        &self,
        step: &PrepareStep,
        mut progress: impl FnMut(u64, u64),
    ) -> Result<(), mongodb::error::Error> {
        match step {
            PrepareStep::CreateIndex {
                collection,
                keys,
                unique,
                name,
            } => {
                let options = IndexOptions::builder()
                    .unique(*unique)
                    .name(name.clone())
                    .build();
                let model = IndexModel::builder()
                    .keys(keys.clone())
                    .options(options)
                    .build();
                self.bounded(async { self.collections[*collection].create_index(model).await })
                    .await?;
                Ok(())
            }
            PrepareStep::Load {
                collection,
                count,
                batch,
                make,
            } => {
                let coll = &self.collections[*collection];
                let batch = (*batch).max(1) as u64;
                let found = self.bounded(resume_point(coll, *count, make)).await?;
                let mut next = load_restart(found, *count, batch);
                progress(next, *count);
                while next < *count {
                    let end = (next + batch).min(*count);
                    let docs: Vec<Document> = (next..end).map(|i| make(i)).collect();
                    match self
                        .bounded(async { coll.insert_many(docs).ordered(false).await })
                        .await
                    {
                        Ok(_) => {}
                        // A resumed load may overlap documents already there.
                        Err(e) if classify(&e) == crate::error_kind::ErrorKind::DuplicateKey => {}
                        Err(e) => return Err(e),
                    }
                    next = end;
                    progress(next, *count);
                }
                Ok(())
            }
            // Its errors may be final (not a mongos, another key): the
            // engine runs it with `Deployment::shard` instead.
            PrepareStep::Shard { plan } => match self.shard("", plan).await {
                Ok(()) => Ok(()),
                Err(shard::ShardError::Retry(e)) => Err(e),
                Err(shard::ShardError::Fatal { message, .. }) => {
                    Err(mongodb::error::Error::custom(message))
                }
            },
            PrepareStep::CountKeys {
                collection,
                counter,
            } => {
                let n = self
                    .bounded(async { self.collections[*collection].count_documents(doc! {}).await })
                    .await?;
                counter.raise_to_count(n);
                Ok(())
            }
            PrepareStep::SeekKeys {
                collection,
                counter,
            } => {
                // Inserts take keys above the highest existing `_id`, so a
                // restarted daemon does not collide with its own documents.
                let top = self
                    .bounded(async {
                        self.collections[*collection]
                            .find_one(doc! {})
                            .sort(doc! {"_id": -1})
                            .projection(doc! {"_id": 1})
                            .await
                    })
                    .await?;
                if let Some(id) = top.and_then(|d| d.get("_id").and_then(bson_to_u64)) {
                    counter.raise_past(id);
                }
                Ok(())
            }
        }
    }
}

/// Where an interrupted load of `count` documents goes on, given the
/// resume point `found`: from the start of the batch (of `batch` from 0)
/// that `found` falls in, since through a mongos an unordered batch that
/// failed on one shard is written on the others, so the last batch has
/// holes anywhere in it, not only at its end. A complete load (`found` is
/// `count`) stays complete: a bound may have evicted its documents since,
/// and they must not come back.
fn load_restart(found: u64, count: u64, batch: u64) -> u64 {
    if found >= count {
        return found;
    }
    found - found % batch.max(1)
}

fn bson_to_u64(v: &mongodb::bson::Bson) -> Option<u64> {
    use mongodb::bson::Bson;
    match v {
        Bson::Int32(i) => u64::try_from(*i).ok(),
        Bson::Int64(i) => u64::try_from(*i).ok(),
        Bson::Double(d) if *d >= 0.0 => Some(*d as u64),
        _ => None,
    }
}

/// Where an interrupted load resumes: the first sequence number whose
/// document is missing, found by binary search on the presence of
/// `make(i)`'s `_id`. Loads
/// insert in ascending `_id` order in batches, so what is there is a prefix
/// (up to the last, partially written, batch, whose duplicates are ignored).
async fn resume_point(
    coll: &Collection<Document>,
    count: u64,
    make: &crate::workload::DocMaker,
) -> Result<u64, mongodb::error::Error> {
    let present = coll.estimated_document_count().await?;
    if present == 0 || count == 0 {
        return Ok(0);
    }
    // Run-time inserts take integer keys above the loaded ones and start
    // only after a complete prepare, so one such key means the load
    // finished in an earlier run — even if a bound (delete-per-insert) has
    // since evicted the loaded documents, which must not come back.
    if let Some(last @ (Bson::Int64(_) | Bson::Int32(_))) = make(count - 1).get("_id").cloned() {
        let later = coll
            .find_one(doc! {"_id": {"$gt": last}})
            .projection(doc! {"_id": 1})
            .await?;
        if later.is_some() {
            return Ok(count);
        }
    }
    let (mut lo, mut hi) = (0u64, count);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let id = make(mid)
            .get("_id")
            .cloned()
            .unwrap_or(Bson::Int64(mid as i64));
        let found = coll
            .find_one(doc! {"_id": id})
            .projection(doc! {"_id": 1})
            .await?
            .is_some();
        if found {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// Builds the driver client. The pool is sized to `pool_size` and kept warm
/// at that size (min = max), because a cold pool queues operations behind
/// connection establishment and that would be measured as server latency.
pub async fn connect(
    uri: &str,
    app_name: &str,
    pool_size: u32,
    timeouts: Timeouts,
    handlers: Handlers,
) -> Result<Client, mongodb::error::Error> {
    let mut options = ClientOptions::parse(uri).await?;
    if options.app_name.is_none() {
        options.app_name = Some(app_name.to_owned());
    }
    options.max_pool_size = Some(pool_size.max(1));
    options.min_pool_size = Some(pool_size.max(1));
    // The driver opens 2 connections at a time by default: after an outage
    // that closed the pool, refilling 256 connections took a minute.
    options.max_connecting = Some(MAX_CONNECTING);
    options.connect_timeout = Some(timeouts.connect);
    options.server_selection_timeout = Some(timeouts.server_selection);
    options.cmap_event_handler = handlers.cmap;
    options.sdam_event_handler = handlers.sdam;
    Client::with_options(options)
}

/// The documents of a cursor, counted as they come, never decoded.
async fn count(mut cursor: mongodb::Cursor<Document>) -> Outcome {
    let mut n = 0;
    while cursor.advance().await? {
        n += 1;
    }
    Ok(n)
}

/// [`count`] for a cursor of `session`.
async fn count_in(
    mut cursor: mongodb::SessionCursor<Document>,
    session: &mut ClientSession,
) -> Outcome {
    let mut n = 0;
    while cursor.advance(session).await? {
        n += 1;
    }
    Ok(n)
}

/// Connections the driver may be opening at once (its default is 2).
pub const MAX_CONNECTING: u32 = 16;

/// Driver timeouts from the config.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    pub connect: Duration,
    pub server_selection: Duration,
}

/// `call` given at most `timeout`: running out of time is an I/O
/// `TimedOut` error (classified `timeout`), so a call the driver would
/// wait on forever still ends.
pub(crate) async fn within<T>(
    timeout: Duration,
    call: impl std::future::IntoFuture<Output = Result<T, mongodb::error::Error>>,
) -> Result<T, mongodb::error::Error> {
    match tokio::time::timeout(timeout, call).await {
        Ok(outcome) => outcome,
        Err(_) => Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into()),
    }
}

/// The driver's event handlers a client is built with
/// (`failover/driver_events.rs`).
#[derive(Default)]
pub struct Handlers {
    pub cmap: Option<mongodb::event::EventHandler<mongodb::event::cmap::CmapEvent>>,
    pub sdam: Option<mongodb::event::EventHandler<mongodb::event::sdam::SdamEvent>>,
}

#[cfg(test)]
mod load_tests {
    #[test]
    fn a_load_resumes_at_the_start_of_its_last_batch() {
        use super::load_restart;
        assert_eq!(load_restart(0, 1000, 100), 0);
        assert_eq!(load_restart(257, 1000, 100), 200);
        assert_eq!(load_restart(300, 1000, 100), 300);
        assert_eq!(load_restart(7, 1000, 0), 7);
        // A complete load is not begun again, whatever the batch: its
        // documents may have been evicted by a bound since.
        assert_eq!(load_restart(400, 400, 1000), 400);
        assert_eq!(load_restart(400, 400, 150), 400);
    }
}
