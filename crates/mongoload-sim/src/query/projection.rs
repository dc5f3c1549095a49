//! Projections: inclusion, exclusion and computed fields.

use bson::{Bson, Document};

use super::*;

/// One node of a projection tree.
#[derive(Debug, Clone)]
pub(super) enum ProjNode {
    Include,
    Exclude,
    Computed(ValueExpr),
    Sub(Vec<(String, ProjNode)>),
}

/// A parsed projection (inclusion or exclusion, `_id` included unless excluded).
#[derive(Debug, Clone)]
pub struct Projection {
    inclusion: bool,
    tree: Vec<(String, ProjNode)>,
}

pub(super) fn find_node<'a>(tree: &'a [(String, ProjNode)], key: &str) -> Option<&'a ProjNode> {
    tree.iter().find(|(k, _)| k == key).map(|(_, n)| n)
}

pub(super) fn insert_node(
    tree: &mut Vec<(String, ProjNode)>,
    parts: &[String],
    node: ProjNode,
    full: &str,
) -> Result<(), QueryError> {
    let collision = || QueryError::new(31250, "Location31250", format!("Path collision at {full}"));
    let pos = tree.iter().position(|(k, _)| *k == parts[0]);
    if parts.len() == 1 {
        if pos.is_some() {
            return Err(collision());
        }
        tree.push((parts[0].clone(), node));
        return Ok(());
    }
    let idx = match pos {
        Some(i) => i,
        None => {
            tree.push((parts[0].clone(), ProjNode::Sub(Vec::new())));
            tree.len() - 1
        }
    };
    match &mut tree[idx].1 {
        ProjNode::Sub(sub) => insert_node(sub, &parts[1..], node, full),
        _ => Err(collision()),
    }
}

/// What a projection spec value asks for.
pub(super) enum Kind {
    Include,
    Exclude,
    Computed(ValueExpr),
    Nested(Document),
}

pub(super) fn classify(v: &Bson) -> Result<Kind, QueryError> {
    Ok(match v {
        Bson::Boolean(b) => {
            if *b {
                Kind::Include
            } else {
                Kind::Exclude
            }
        }
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            if truthy(v) {
                Kind::Include
            } else {
                Kind::Exclude
            }
        }
        Bson::Document(d) if is_operator_doc(v).is_none() && !d.is_empty() => {
            Kind::Nested(d.clone())
        }
        Bson::Document(d) if d.is_empty() => {
            return Err(QueryError::new(
                51270,
                "Location51270",
                "An empty sub-projection is not a valid value",
            ))
        }
        other => Kind::Computed(ValueExpr::parse(other)?),
    })
}

impl Projection {
    /// Parses a projection; mixing inclusion and exclusion (other than on
    /// `_id`) is an error (codes 31254 and 31253, as MongoDB), as is a path
    /// given twice or inside another (31250).
    pub fn parse(spec: &Document) -> Result<Projection, QueryError> {
        let mut flat: Vec<(String, Kind)> = Vec::new();
        flatten(spec, "", &mut flat)?;
        let mut mode: Option<bool> = None;
        let mut id_rule: Option<ProjNode> = None;
        let mut tree = Vec::new();
        for (path, kind) in flat {
            let node = match kind {
                Kind::Include => ProjNode::Include,
                Kind::Exclude => ProjNode::Exclude,
                Kind::Computed(e) => ProjNode::Computed(e),
                Kind::Nested(_) => continue,
            };
            if path == "_id" {
                id_rule = Some(node);
                continue;
            }
            let inclusive = !matches!(node, ProjNode::Exclude);
            match mode {
                None => mode = Some(inclusive),
                Some(true) if !inclusive => {
                    return Err(QueryError::new(
                        31254,
                        "Location31254",
                        format!("Cannot do exclusion on field {path} in inclusion projection"),
                    ))
                }
                Some(false) if inclusive => {
                    if matches!(node, ProjNode::Computed(_)) {
                        return Err(QueryError::new(
                            31252,
                            "Location31252",
                            "Cannot use expression other than $meta in exclusion projection",
                        ));
                    }
                    return Err(QueryError::new(
                        31253,
                        "Location31253",
                        format!("Cannot do inclusion on field {path} in exclusion projection"),
                    ));
                }
                _ => {}
            }
            insert_node(&mut tree, &split_path(&path), node, &path)?;
        }
        let inclusion = match (mode, &id_rule) {
            (Some(m), _) => m,
            // Only `_id` given: `{_id: 0}` excludes it, `{_id: 1}` or a
            // computed `_id` keeps only it.
            (None, Some(ProjNode::Exclude)) => false,
            (None, Some(_)) => true,
            (None, None) => false,
        };
        let id_node = match id_rule {
            Some(n) => n,
            None => ProjNode::Include,
        };
        // `_id` leads the tree so an inclusion keeps it first, as MongoDB does.
        match (inclusion, id_node) {
            (true, ProjNode::Exclude) => {}
            (true, n) => tree.insert(0, ("_id".to_owned(), n)),
            (false, ProjNode::Exclude) => tree.insert(0, ("_id".to_owned(), ProjNode::Exclude)),
            (false, _) => {}
        }
        Ok(Projection { inclusion, tree })
    }

    /// Whether the projection changes nothing (`{}`).
    pub fn is_identity(&self) -> bool {
        !self.inclusion && self.tree.is_empty()
    }

    /// The projected copy of `doc`.
    pub fn apply(&self, doc: &Document) -> Document {
        if self.inclusion {
            let mut out = include(doc, &self.tree);
            add_computed(&mut out, &self.tree, doc);
            // A computed `_id` still leads the output, as in MongoDB.
            if let Some(ProjNode::Computed(_)) = find_node(&self.tree, "_id") {
                if let Some(id) = out.remove("_id") {
                    let mut first = Document::new();
                    first.insert("_id", id);
                    first.extend(out);
                    return first;
                }
            }
            out
        } else {
            exclude(doc, &self.tree)
        }
    }
}

pub(super) fn flatten(
    spec: &Document,
    prefix: &str,
    out: &mut Vec<(String, Kind)>,
) -> Result<(), QueryError> {
    for (k, v) in spec {
        if k.split('.').any(|part| part.starts_with('$')) {
            // Covers the positional `a.$` projection, which the simulator lacks.
            return Err(QueryError::new(
                16410,
                "Location16410",
                "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
            ));
        }
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match classify(v)? {
            Kind::Nested(d) => flatten(&d, &path, out)?,
            kind => out.push((path, kind)),
        }
    }
    Ok(())
}

pub(super) fn include(doc: &Document, tree: &[(String, ProjNode)]) -> Document {
    let mut out = Document::new();
    // `_id` first when kept, whatever its place in the stored document.
    if let Some(ProjNode::Include) = find_node(tree, "_id") {
        if let Some(id) = doc.get("_id") {
            out.insert("_id", id.clone());
        }
    }
    for (k, v) in doc {
        if k == "_id" {
            continue;
        }
        match find_node(tree, k) {
            Some(ProjNode::Include) => {
                out.insert(k.clone(), v.clone());
            }
            Some(ProjNode::Sub(sub)) => match v {
                Bson::Document(d) => {
                    out.insert(k.clone(), include(d, sub));
                }
                Bson::Array(a) => {
                    out.insert(k.clone(), include_array(a, sub));
                }
                _ => {}
            },
            _ => {}
        }
    }
    out
}

pub(super) fn include_array(a: &[Bson], tree: &[(String, ProjNode)]) -> Bson {
    Bson::Array(
        a.iter()
            .filter_map(|e| match e {
                Bson::Document(d) => Some(Bson::Document(include(d, tree))),
                Bson::Array(inner) => Some(include_array(inner, tree)),
                _ => None,
            })
            .collect(),
    )
}

/// Adds the computed fields of an inclusion, in spec order, after the
/// included ones; paths are evaluated against the whole document.
pub(super) fn add_computed(out: &mut Document, tree: &[(String, ProjNode)], root: &Document) {
    for (k, node) in tree {
        match node {
            ProjNode::Computed(e) => {
                if let Some(v) = e.eval(root) {
                    out.insert(k.clone(), v);
                }
            }
            ProjNode::Sub(sub) if has_computed(sub) => {
                if !matches!(out.get(k), Some(Bson::Document(_))) {
                    if out.contains_key(k) {
                        continue;
                    }
                    out.insert(k.clone(), Document::new());
                }
                if let Some(Bson::Document(d)) = out.get_mut(k) {
                    add_computed(d, sub, root);
                }
            }
            _ => {}
        }
    }
}

pub(super) fn has_computed(tree: &[(String, ProjNode)]) -> bool {
    tree.iter().any(|(_, n)| match n {
        ProjNode::Computed(_) => true,
        ProjNode::Sub(s) => has_computed(s),
        _ => false,
    })
}

pub(super) fn exclude(doc: &Document, tree: &[(String, ProjNode)]) -> Document {
    let mut out = Document::new();
    for (k, v) in doc {
        match find_node(tree, k) {
            None | Some(ProjNode::Include) | Some(ProjNode::Computed(_)) => {
                out.insert(k.clone(), v.clone());
            }
            Some(ProjNode::Exclude) => {}
            Some(ProjNode::Sub(sub)) => {
                out.insert(k.clone(), exclude_value(v, sub));
            }
        }
    }
    out
}

pub(super) fn exclude_value(v: &Bson, tree: &[(String, ProjNode)]) -> Bson {
    match v {
        Bson::Document(d) => Bson::Document(exclude(d, tree)),
        Bson::Array(a) => Bson::Array(a.iter().map(|e| exclude_value(e, tree)).collect()),
        other => other.clone(),
    }
}
