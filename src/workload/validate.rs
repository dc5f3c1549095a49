//! Checks the kinds' parameter tables share (collection names, counts,
//! weights, bounds, document sizes), with the errors naming the key, and
//! how a bound reads in `check-config`.

use crate::config_values::{ByteSize, KeyError};

/// Smallest document size accepted: room for `_id`, `k` and a little padding.
pub(crate) const MIN_DOC_SIZE: u64 = 64;

/// Largest document size accepted: MongoDB's 16 MiB document limit.
pub(crate) const MAX_DOC_SIZE: u64 = 16 << 20;

/// A collection name MongoDB accepts for user data.
pub(crate) fn check_collection(key: &str, name: &str) -> Result<(), KeyError> {
    if name.is_empty() || name.contains(['$', '\0']) || name.starts_with("system.") {
        return Err(KeyError::new(
            key,
            format!("not a valid collection name: {name:?}"),
        ));
    }
    Ok(())
}

/// A count that must be positive.
pub(crate) fn at_least_one(key: &str, v: u64) -> Result<(), KeyError> {
    if v == 0 {
        return Err(KeyError::new(key, "must be at least 1, got 0"));
    }
    Ok(())
}

/// A relative weight: finite and not negative.
pub(crate) fn check_weight(key: &str, w: f64) -> Result<(), KeyError> {
    if !(w.is_finite() && w >= 0.0) {
        return Err(KeyError::new(
            key,
            format!("weight must be a number ≥ 0, got {w}"),
        ));
    }
    Ok(())
}

/// A document size between [`MIN_DOC_SIZE`] and [`MAX_DOC_SIZE`].
pub(crate) fn check_doc_size(key: &str, size: ByteSize) -> Result<(), KeyError> {
    let size = size.bytes();
    if !(MIN_DOC_SIZE..=MAX_DOC_SIZE).contains(&size) {
        return Err(KeyError::new(
            key,
            format!("must be between {MIN_DOC_SIZE} bytes and 16MiB, got {size} bytes"),
        ));
    }
    Ok(())
}

/// A `max_docs` bound must leave room for the loaded data, or the first
/// inserts would delete documents the run expects to find.
pub(crate) fn check_bound(max_docs: u64, initial_docs: u64) -> Result<(), KeyError> {
    check_bound_of(max_docs, initial_docs, "initial_docs")
}

/// [`check_bound`] for a kind whose loaded documents are counted by the
/// key `initial_key` (YCSB's `record_count`).
pub(crate) fn check_bound_of(
    max_docs: u64,
    initial: u64,
    initial_key: &str,
) -> Result<(), KeyError> {
    if max_docs > 0 && max_docs < initial {
        return Err(KeyError::new(
            "max_docs",
            format!("{max_docs} is below {initial_key} {initial}; use 0 (unbounded) or a bound ≥ {initial_key}"),
        ));
    }
    Ok(())
}

/// A `max_docs` bound as `check-config` prints it.
pub(crate) fn bound(max_docs: u64) -> String {
    if max_docs == 0 {
        "unbounded".into()
    } else {
        max_docs.to_string()
    }
}
