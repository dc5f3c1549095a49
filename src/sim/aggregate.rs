//! Aggregation pipelines of the simulator: `$match`, `$group` (with `$sum`,
//! `$avg`, `$min`, `$max`, `$count`), `$sort`, `$skip`, `$limit`,
//! `$project`, `$count`, run over documents in memory.

use mongodb::bson::Document;

use super::query::{Filter, QueryError};

/// A parsed pipeline.
#[derive(Debug, Clone)]
pub struct Pipeline {}

impl Pipeline {
    /// Parses the stages; an unknown stage is an error (code 40324,
    /// "Unrecognized pipeline stage name: '$x'"), as MongoDB answers.
    pub fn parse(stages: &[Document]) -> Result<Pipeline, QueryError> {
        let _ = stages;
        todo!()
    }

    /// The filter of a leading `$match`, so the caller can use an index to
    /// choose the input; `run` still applies it.
    pub fn leading_match(&self) -> Option<&Filter> {
        todo!()
    }

    /// Runs the pipeline over `input` and returns the output documents.
    pub fn run(&self, input: impl Iterator<Item = Document>) -> Result<Vec<Document>, QueryError> {
        let _ = input;
        todo!()
    }
}
