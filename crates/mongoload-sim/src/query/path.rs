//! Dotted paths through documents and arrays, as filters walk them.

use bson::{Bson, Document};

/// Whether a path component addresses an array element (all ASCII digits).
pub(super) fn array_index(part: &str) -> Option<usize> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    part.parse().ok()
}

/// The value at a dotted path (`a.b.c`), descending into embedded documents
/// (and array elements by numeric index). `None` when a part is missing.
pub fn get_path<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    let mut parts = path.split('.');
    let mut cur = doc.get(parts.next()?)?;
    for part in parts {
        cur = match cur {
            Bson::Document(d) => d.get(part)?,
            Bson::Array(a) => a.get(array_index(part)?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Every value a query on `path` considers, as MongoDB's `distinct` sees
/// them: through arrays of embedded documents, and with arrays at the end
/// of the path expanded into their elements.
pub fn values_at_path<'a>(doc: &'a Document, path: &str) -> Vec<&'a Bson> {
    let mut out = Vec::new();
    walk_doc(doc, path, Leaf::Elements, &mut |v| {
        // An empty array stands for undefined in sort keys; distinct skips it.
        if let Some(v) = v.filter(|v| !std::ptr::eq(*v, &UNDEFINED)) {
            out.push(v);
        }
        false
    });
    out
}

/// The values an index on `path` files `doc` under, as MongoDB's
/// (multikey) index keys: every value reached through arrays of embedded
/// documents, an array at the end of the path as its elements (an empty
/// one as undefined), and null where the document or one of the embedded
/// documents lacks the path, or where nothing is reached at all (`a.b`
/// over `a: [1, 2]`). The flag says whether an array lies on the path, so
/// the index is multikey.
pub fn index_values<'a>(doc: &'a Document, path: &str) -> (Vec<&'a Bson>, bool) {
    let mut out = Vec::new();
    walk_doc(doc, path, Leaf::Elements, &mut |v| {
        out.push(v.unwrap_or(&NULL));
        false
    });
    if out.is_empty() {
        out.push(&NULL);
    }
    (out, array_on_path(doc, path).is_some())
}

/// Whether `doc` has a value at `path` (through arrays of embedded
/// documents), as `$exists: true` sees it.
pub fn path_exists(doc: &Document, path: &str) -> bool {
    walk_doc(doc, path, Leaf::Whole, &mut |v| v.is_some())
}

/// The first prefix of `path` (`a` of `a.b.c`) at which `doc` holds an
/// array, the whole path included; `None` when no array lies on it.
pub fn array_on_path<'p>(doc: &Document, path: &'p str) -> Option<&'p str> {
    let mut cur = doc;
    let mut end = 0;
    for part in path.split('.') {
        end += part.len();
        match cur.get(part)? {
            Bson::Array(_) => return Some(&path[..end]),
            Bson::Document(d) => cur = d,
            _ => return None,
        }
        end += 1;
    }
    None
}

/// What a walk hands to its callback when the path ends on an array.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Leaf {
    /// The array itself only (`$size`, `$elemMatch`).
    Whole,
    /// Each element, then the array itself (equality, comparisons).
    ElementsAndWhole,
    /// Each element only (sort keys, distinct); an empty array gives undefined.
    Elements,
}

pub(super) static UNDEFINED: Bson = Bson::Undefined;
pub(super) static NULL: Bson = Bson::Null;

/// Splits a dotted path into its first component and the rest.
pub(super) fn split_first(path: &str) -> (&str, Option<&str>) {
    match path.split_once('.') {
        Some((head, tail)) => (head, Some(tail)),
        None => (path, None),
    }
}

/// Calls `f` on each value at the dotted `path` below `doc` as a query sees
/// them (`None` where the path is missing) until `f` says true; returns
/// whether it did. No allocation: this is the hot path of `matches`.
pub(super) fn walk_doc<'a, F: FnMut(Option<&'a Bson>) -> bool>(
    doc: &'a Document,
    path: &str,
    leaf: Leaf,
    f: &mut F,
) -> bool {
    let (head, tail) = split_first(path);
    match doc.get(head) {
        None => f(None),
        Some(v) => walk(v, tail, leaf, f),
    }
}

pub(super) fn walk<'a, F: FnMut(Option<&'a Bson>) -> bool>(
    v: &'a Bson,
    rest: Option<&str>,
    leaf: Leaf,
    f: &mut F,
) -> bool {
    let Some(rest) = rest else {
        if let Bson::Array(a) = v {
            match leaf {
                Leaf::Whole => {}
                Leaf::ElementsAndWhole => {
                    if a.iter().any(|e| f(Some(e))) {
                        return true;
                    }
                }
                Leaf::Elements => {
                    if a.is_empty() {
                        return f(Some(&UNDEFINED));
                    }
                    return a.iter().any(|e| f(Some(e)));
                }
            }
        }
        return f(Some(v));
    };
    match v {
        Bson::Document(d) => walk_doc(d, rest, leaf, f),
        Bson::Array(a) => {
            let (head, tail) = split_first(rest);
            if let Some(i) = array_index(head) {
                if let Some(e) = a.get(i) {
                    if walk(e, tail, leaf, f) {
                        return true;
                    }
                }
            }
            // Only embedded documents carry the path on (and count as
            // missing when they lack it): scalars and an empty array give
            // nothing, so `{"a.b": null}` does not match `a: [5]` or `a: []`.
            a.iter()
                .any(|e| matches!(e, Bson::Document(d) if walk_doc(d, rest, leaf, f)))
        }
        _ => f(None),
    }
}
