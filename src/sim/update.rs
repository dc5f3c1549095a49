//! Update documents of the simulator: replacement, and the operators
//! `$set`, `$inc`, `$unset`, `$setOnInsert`, applied to plain documents.

use mongodb::bson::Document;

use super::query::QueryError;

/// A parsed update: a replacement document or a list of operators.
#[derive(Debug, Clone)]
pub struct Update {}

impl Update {
    /// Parses an update document; mixing operators and plain fields, or an
    /// unknown operator, is an error as MongoDB reports it.
    pub fn parse(update: &Document) -> Result<Update, QueryError> {
        let _ = update;
        todo!()
    }

    /// Whether this update replaces the whole document.
    pub fn is_replacement(&self) -> bool {
        todo!()
    }

    /// Applies the update to `doc` in place and says whether it changed.
    /// `inserting` is true on the insert half of an upsert ($setOnInsert
    /// applies then only). A replacement keeps `doc`'s `_id`; changing
    /// `_id` is an error (code 66, ImmutableField).
    pub fn apply(&self, doc: &mut Document, inserting: bool) -> Result<bool, QueryError> {
        let _ = (doc, inserting);
        todo!()
    }
}

/// The document an upsert starts from: the equality conditions of the
/// filter (`{a: 1, "b.c": 2}` gives `{a: 1, b: {c: 2}}`), before the update
/// is applied with `inserting = true`.
pub fn upsert_seed(filter: &Document) -> Document {
    let _ = filter;
    todo!()
}
