//! Query semantics of the simulator, as plain functions on BSON values:
//! MongoDB's comparison order, dotted paths, filters, sorts and projections.
//! No I/O and no storage here: the store and the command layer call in.
//!
//! One file per part: the comparison order (`order`), dotted paths
//! (`path`), the hashed index's hash (`hash`), index intervals (`bounds`), filters (`filter`), sorts
//! (`sort`), value expressions (`value`) and projections (`projection`).

mod bounds;
mod filter;
mod hash;
mod order;
mod path;
mod projection;
mod sort;
mod value;

pub use bounds::*;
pub use filter::*;
pub use hash::hash;
pub use order::*;
pub use path::*;
pub use projection::*;
pub use sort::*;
pub(crate) use value::*;

/// A failure MongoDB reports as a command error (`ok: 0`, `code`, `codeName`, `errmsg`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code_name} ({code}): {message}")]
pub struct QueryError {
    /// MongoDB's numeric error code (2 BadValue, 9 FailedToParse, ...).
    pub code: i32,
    /// MongoDB's `codeName` for `code`.
    pub code_name: &'static str,
    /// The `errmsg` text, worded as MongoDB words it where it matters.
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

    /// An error with any code; `code_name` is MongoDB's name for `code`.
    pub fn new(code: i32, code_name: &'static str, message: impl Into<String>) -> Self {
        QueryError {
            code,
            code_name,
            message: message.into(),
        }
    }

    /// Code 9, FailedToParse.
    pub fn failed_to_parse(message: impl Into<String>) -> Self {
        QueryError::new(9, "FailedToParse", message)
    }
}

#[cfg(test)]
mod tests;
