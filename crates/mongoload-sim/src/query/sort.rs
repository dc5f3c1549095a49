//! Sort specifications and the order they put documents in.

use std::cmp::Ordering;

use bson::{Bson, Document};

use super::*;

#[derive(Debug, Clone)]
pub struct SortSpec {
    fields: Vec<(String, i32)>,
}

/// The value a document sorts by on `path`: the smallest element of an
/// array ascending, the largest descending; null when missing.
pub(super) fn sort_key<'a>(doc: &'a Document, path: &str, dir: i32) -> &'a Bson {
    let mut best: Option<&'a Bson> = None;
    walk_doc(doc, path, Leaf::Elements, &mut |x| {
        let x = x.unwrap_or(&NULL);
        let better = match best {
            None => true,
            Some(b) => {
                let o = compare(x, b);
                if dir >= 0 {
                    o == Ordering::Less
                } else {
                    o == Ordering::Greater
                }
            }
        };
        if better {
            best = Some(x);
        }
        false
    });
    best.unwrap_or(&NULL)
}

impl SortSpec {
    /// Parses `{field: 1 | -1, ...}`; other directions are an error (code
    /// 15975). An empty spec sorts nothing.
    pub fn parse(spec: &Document) -> Result<SortSpec, QueryError> {
        let mut fields = Vec::with_capacity(spec.len());
        for (k, v) in spec {
            let dir = match number_as_f64(v) {
                Some(1.0) => 1,
                Some(-1.0) => -1,
                _ => {
                    return Err(QueryError::new(
                        15975,
                        "Location15975",
                        "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                    ))
                }
            };
            if k.is_empty() {
                return Err(QueryError::new(
                    40352,
                    "Location40352",
                    "FieldPath cannot be constructed with empty string",
                ));
            }
            fields.push((k.clone(), dir));
        }
        Ok(SortSpec { fields })
    }

    /// The sort keys in order, with direction 1 or -1.
    pub fn fields(&self) -> &[(String, i32)] {
        &self.fields
    }

    /// Orders two documents by this spec (missing fields sort as null).
    /// Use a stable sort so that ties keep their input order.
    pub fn compare(&self, a: &Document, b: &Document) -> Ordering {
        for (path, dir) in &self.fields {
            let o = compare(sort_key(a, path, *dir), sort_key(b, path, *dir));
            let o = if *dir < 0 { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// Sorts `docs` in place by this spec, stably.
    pub fn sort(&self, docs: &mut [Document]) {
        if !self.fields.is_empty() {
            docs.sort_by(|a, b| self.compare(a, b));
        }
    }
}
