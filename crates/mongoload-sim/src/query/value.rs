//! Aggregation value expressions of the few forms the simulator
//! evaluates (paths, `$$ROOT`, literals, documents of expressions).

use bson::{Bson, Document};

use super::*;

/// A computed value of a projection or `$group`: an aggregation expression
/// of the few forms the simulator evaluates.
#[derive(Debug, Clone)]
pub(crate) enum ValueExpr {
    /// `"$a.b"`: the value at a path, through arrays as aggregation does.
    Path(Vec<String>),
    /// `"$$ROOT"` / `"$$CURRENT"`.
    Root,
    /// A constant (or `{$literal: v}`).
    Literal(Bson),
    /// `{k: expr, ...}`: a document of expressions.
    Object(Vec<(String, ValueExpr)>),
}

impl ValueExpr {
    /// Parses an expression; unsupported operators are an error (code 168).
    pub(crate) fn parse(v: &Bson) -> Result<ValueExpr, QueryError> {
        match v {
            Bson::String(s) if s.starts_with("$$") => match s.as_str() {
                "$$ROOT" | "$$CURRENT" => Ok(ValueExpr::Root),
                _ => Err(QueryError::new(
                    17276,
                    "Location17276",
                    format!("Use of undefined variable: {}", &s[2..]),
                )),
            },
            Bson::String(s) if s.starts_with('$') => {
                if s.len() == 1 {
                    return Err(QueryError::new(
                        16872,
                        "Location16872",
                        "'$' by itself is not a valid FieldPath",
                    ));
                }
                Ok(ValueExpr::Path(split_path(&s[1..])))
            }
            Bson::Document(d) => {
                if let Some((k, arg)) = d.iter().next() {
                    if k.starts_with('$') {
                        if k == "$literal" && d.len() == 1 {
                            return Ok(ValueExpr::Literal(arg.clone()));
                        }
                        return Err(QueryError::new(
                            168,
                            "InvalidPipelineOperator",
                            format!("Unrecognized expression '{k}'"),
                        ));
                    }
                }
                let mut fields = Vec::with_capacity(d.len());
                for (k, v) in d {
                    fields.push((k.clone(), ValueExpr::parse(v)?));
                }
                Ok(ValueExpr::Object(fields))
            }
            other => Ok(ValueExpr::Literal(other.clone())),
        }
    }

    /// Evaluates against `root`; `None` when the value is missing.
    pub(crate) fn eval(&self, root: &Document) -> Option<Bson> {
        match self {
            ValueExpr::Path(parts) => {
                let first = root.get(&parts[0])?;
                agg_path(first, &parts[1..])
            }
            ValueExpr::Root => Some(Bson::Document(root.clone())),
            ValueExpr::Literal(v) => Some(v.clone()),
            ValueExpr::Object(fields) => {
                let mut out = Document::new();
                for (k, e) in fields {
                    if let Some(v) = e.eval(root) {
                        out.insert(k.clone(), v);
                    }
                }
                Some(Bson::Document(out))
            }
        }
    }
}

/// Aggregation path semantics: through arrays, the path maps over the
/// elements (`"$a.b"` on `a: [{b: 1}, {b: 2}]` is `[1, 2]`).
pub(super) fn agg_path(v: &Bson, rest: &[String]) -> Option<Bson> {
    if rest.is_empty() {
        return Some(v.clone());
    }
    match v {
        Bson::Document(d) => agg_path(d.get(&rest[0])?, &rest[1..]),
        Bson::Array(a) => Some(Bson::Array(
            a.iter()
                .filter(|e| matches!(e, Bson::Document(_) | Bson::Array(_)))
                .filter_map(|e| agg_path(e, rest))
                .collect(),
        )),
        _ => None,
    }
}
