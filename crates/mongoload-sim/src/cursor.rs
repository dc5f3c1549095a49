//! Server-side cursors: the rest of a result set that `getMore` pages
//! through, `killCursors` frees, and that expire when idle.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bson::{Bson, Document};

/// How long an unused cursor lives (MongoDB's default is 10 minutes).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(600);

/// Default first batch size, as MongoDB.
pub const DEFAULT_FIRST_BATCH: usize = 101;

/// Replies stay under the BSON limit with room for the envelope.
const BATCH_BYTES: usize = 16 * 1024 * 1024 - 64 * 1024;

struct Cursor {
    ns: String,
    docs: VecDeque<Document>,
    last_used: Instant,
}

/// All open cursors of one simulator.
#[derive(Default)]
pub struct Cursors {
    open: Mutex<HashMap<i64, Cursor>>,
    next: std::sync::atomic::AtomicI64,
}

/// Outcome of a `getMore`.
pub enum GetMore {
    Batch {
        ns: String,
        docs: Vec<Document>,
        id: i64,
    },
    NotFound,
    /// The cursor belongs to another namespace.
    WrongNs(String),
}

impl Cursors {
    /// Splits `docs` into a first batch and, if anything remains and
    /// `single_batch` is false, a new cursor. Returns the batch and the
    /// cursor id (0 when exhausted).
    pub fn open(
        &self,
        ns: &str,
        docs: Vec<Document>,
        batch_size: Option<usize>,
        single_batch: bool,
    ) -> (Vec<Document>, i64) {
        let mut rest: VecDeque<Document> = docs.into();
        // batchSize 0 on the opening command means an empty first batch
        // (only a cursor id); on getMore it means "as many as fit".
        let first = match batch_size {
            Some(0) => Vec::new(),
            b => take_batch(&mut rest, Some(b.unwrap_or(DEFAULT_FIRST_BATCH))),
        };
        if rest.is_empty() || single_batch {
            return (first, 0);
        }
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1_000_001;
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        open.insert(
            id,
            Cursor {
                ns: ns.to_owned(),
                docs: rest,
                last_used: Instant::now(),
            },
        );
        (first, id)
    }

    /// The next batch of cursor `id` in namespace `ns`.
    pub fn get_more(&self, id: i64, ns: &str, batch_size: Option<usize>) -> GetMore {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let Some(c) = open.get_mut(&id) else {
            return GetMore::NotFound;
        };
        if c.ns != ns {
            return GetMore::WrongNs(c.ns.clone());
        }
        c.last_used = Instant::now();
        let docs = take_batch(&mut c.docs, batch_size);
        let ns = c.ns.clone();
        let id = if c.docs.is_empty() {
            open.remove(&id);
            0
        } else {
            id
        };
        GetMore::Batch { ns, docs, id }
    }

    /// Frees the cursor; false if it did not exist.
    pub fn kill(&self, id: i64) -> bool {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id)
            .is_some()
    }

    /// Frees cursors idle longer than `idle`; returns how many.
    pub fn expire(&self, idle: Duration) -> usize {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        let before = open.len();
        open.retain(|_, c| c.last_used.elapsed() < idle);
        before - open.len()
    }

    pub fn len(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn take_batch(rest: &mut VecDeque<Document>, batch_size: Option<usize>) -> Vec<Document> {
    let max = batch_size.filter(|&b| b > 0).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    let mut bytes = 0usize;
    while out.len() < max {
        let Some(front) = rest.front() else { break };
        let size = approx_size(front);
        if !out.is_empty() && bytes + size > BATCH_BYTES {
            break;
        }
        bytes += size;
        out.push(rest.pop_front().expect("front exists"));
    }
    out
}

/// A cheap upper-bound estimate of a document's encoded size.
pub fn approx_size(doc: &Document) -> usize {
    5 + doc
        .iter()
        .map(|(k, v)| 2 + k.len() + approx_value(v))
        .sum::<usize>()
}

fn approx_value(v: &Bson) -> usize {
    match v {
        Bson::Document(d) => approx_size(d),
        Bson::Array(a) => {
            5 + a
                .iter()
                .enumerate()
                .map(|(i, v)| 2 + i.to_string().len() + approx_value(v))
                .sum::<usize>()
        }
        Bson::String(s) => 5 + s.len(),
        Bson::Binary(b) => 5 + b.bytes.len(),
        Bson::JavaScriptCode(s) | Bson::Symbol(s) => 5 + s.len(),
        Bson::RegularExpression(r) => 2 + r.pattern.len() + r.options.len(),
        _ => 16,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn docs(n: i32) -> Vec<Document> {
        (0..n).map(|i| doc! {"_id": i}).collect()
    }

    #[test]
    fn pages_until_exhausted_then_frees() {
        let c = Cursors::default();
        let (first, id) = c.open("d.c", docs(7), Some(3), false);
        assert_eq!(first.len(), 3);
        assert_ne!(id, 0);
        let GetMore::Batch {
            docs: b, id: id2, ..
        } = c.get_more(id, "d.c", Some(3))
        else {
            panic!()
        };
        assert_eq!((b.len(), id2), (3, id));
        let GetMore::Batch {
            docs: b, id: id3, ..
        } = c.get_more(id, "d.c", Some(3))
        else {
            panic!()
        };
        assert_eq!(b[0], doc! {"_id": 6});
        assert_eq!(id3, 0);
        assert!(c.is_empty());
        assert!(matches!(c.get_more(id, "d.c", None), GetMore::NotFound));
    }

    #[test]
    fn batch_size_zero_opens_an_empty_first_batch() {
        let c = Cursors::default();
        let (first, id) = c.open("d.c", docs(3), Some(0), false);
        assert!(first.is_empty());
        let GetMore::Batch {
            docs: b, id: id2, ..
        } = c.get_more(id, "d.c", Some(0))
        else {
            panic!()
        };
        assert_eq!((b.len(), id2), (3, 0));
        assert_eq!(c.open("d.c", Vec::new(), Some(0), false).1, 0);
    }

    #[test]
    fn single_batch_and_small_results_open_no_cursor() {
        let c = Cursors::default();
        assert_eq!(c.open("d.c", docs(5), Some(2), true).1, 0);
        assert_eq!(c.open("d.c", docs(5), None, false).1, 0);
        assert!(c.is_empty());
    }

    #[test]
    fn kill_wrong_ns_and_expiry() {
        let c = Cursors::default();
        let (_, id) = c.open("d.c", docs(10), Some(1), false);
        assert!(matches!(
            c.get_more(id, "d.other", None),
            GetMore::WrongNs(_)
        ));
        assert!(c.kill(id));
        assert!(!c.kill(id));
        let (_, _id) = c.open("d.c", docs(10), Some(1), false);
        assert_eq!(c.expire(Duration::from_secs(60)), 0);
        assert_eq!(c.expire(Duration::ZERO), 1);
    }
}
