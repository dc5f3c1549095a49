//! Query semantics of the simulator, as plain functions on BSON values:
//! MongoDB's comparison order, dotted paths, filters, sorts and projections.
//! No I/O and no storage here: the store and the command layer call in.

use std::cmp::Ordering;

use mongodb::bson::{Bson, Document};

/// A failure MongoDB reports as a command error (`ok: 0`, `code`, `codeName`, `errmsg`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code_name} ({code}): {message}")]
pub struct QueryError {
    pub code: i32,
    pub code_name: &'static str,
    pub message: String,
}

impl QueryError {
    /// Code 2, BadValue: the usual answer to a malformed filter, update or stage.
    pub fn bad_value(message: impl Into<String>) -> Self {
        QueryError {
            code: 2,
            code_name: "BadValue",
            message: message.into(),
        }
    }
}

/// Compares two values in MongoDB's BSON comparison order: MinKey < null <
/// numbers (int32, int64, double, decimal compared by value) < string <
/// object < array < binary < ObjectId < bool < date < timestamp < regex < MaxKey.
pub fn compare(a: &Bson, b: &Bson) -> Ordering {
    let _ = (a, b);
    todo!()
}

/// The value at a dotted path (`a.b.c`), descending into embedded documents
/// (and array elements by numeric index). `None` when a part is missing.
pub fn get_path<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    let _ = (doc, path);
    todo!()
}

/// One end of an interval on an indexed field.
#[derive(Debug, Clone, PartialEq)]
pub enum Bound {
    Unbounded,
    Included(Bson),
    Excluded(Bson),
}

/// A range of values of one field, for index planning.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    pub lower: Bound,
    pub upper: Bound,
}

/// A parsed query filter.
#[derive(Debug, Clone)]
pub struct Filter {}

impl Filter {
    /// Parses a filter document; an unknown operator is an error (code 2).
    pub fn parse(filter: &Document) -> Result<Filter, QueryError> {
        let _ = filter;
        todo!()
    }

    /// Whether `doc` matches.
    pub fn matches(&self, doc: &Document) -> bool {
        let _ = doc;
        todo!()
    }

    /// The intervals that any matching document's value at `path` must lie
    /// in, from conditions on that path at the top level of the filter
    /// (implicitly or explicitly `$and`ed): equality gives a point, `$in`
    /// several points, `$gt`/`$gte`/`$lt`/`$lte` a range. `None` when the
    /// filter does not constrain `path` that way (the caller then scans).
    /// The result is a superset: callers still run `matches` on candidates.
    pub fn intervals(&self, path: &str) -> Option<Vec<Interval>> {
        let _ = path;
        todo!()
    }
}

/// A parsed sort specification (`{a: 1, b: -1}`).
#[derive(Debug, Clone)]
pub struct SortSpec {}

impl SortSpec {
    pub fn parse(spec: &Document) -> Result<SortSpec, QueryError> {
        let _ = spec;
        todo!()
    }

    /// The sort keys in order, with direction 1 or -1.
    pub fn fields(&self) -> &[(String, i32)] {
        todo!()
    }

    /// Orders two documents by this spec (missing fields sort as null).
    pub fn compare(&self, a: &Document, b: &Document) -> Ordering {
        let _ = (a, b);
        todo!()
    }
}

/// A parsed projection (inclusion or exclusion, `_id` included unless excluded).
#[derive(Debug, Clone)]
pub struct Projection {}

impl Projection {
    pub fn parse(spec: &Document) -> Result<Projection, QueryError> {
        let _ = spec;
        todo!()
    }

    pub fn apply(&self, doc: &Document) -> Document {
        let _ = doc;
        todo!()
    }
}
