//! The layers of `src/` (docs/architecture.md, "Layering"): a module
//! imports only from the layers below its own, so the import graph has no
//! cycle across folders. Every `crate::…` path of the library's code (use
//! lines, qualified names, macro bodies; not comments, strings or test
//! code) is read with `syn` and held against [`LAYERS`]; the few imports
//! that reach up are listed in [`REACHING_UP`] with their reason, and an
//! entry no code needs any more fails too, so the list stays true.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// The top-level modules of `src/` from the top layer down; a module
/// imports only from the layers after its own. One line a layer.
const LAYERS: &[&[&str]] = &[
    &["main"],
    &["cli"],
    &["manpage"],
    &["progress"],
    &["daemon"],
    &["engine"],
    &["audit", "capture", "check_target"],
    &["report", "config"],
    &["threshold"],
    &["metrics"],
    &["failover"],
    &["mongo"],
    &["workload"],
    &["cluster"],
    &["control"],
    &["error_log"],
    &[
        "schedule",
        "values",
        "error_kind",
        "throttle",
        "exit",
        "lib",
        // The simulator crate, re-exported by lib.rs.
        "sim",
    ],
];

/// The imports that reach a higher layer: the importing file, the path
/// (after `crate::`) it may start with, and why.
const REACHING_UP: &[(&str, &str, &str)] = &[
    (
        "src/manpage.rs",
        "cli::",
        "the man pages are made from the command line's definition",
    ),
    (
        "src/cluster/metrics.rs",
        "metrics::family::",
        "the families! macro, a leaf of metrics/",
    ),
    (
        "src/control/mod.rs",
        "metrics::family::",
        "the families! macro, a leaf of metrics/",
    ),
    (
        "src/failover/mod.rs",
        "metrics::failover::",
        "failover's families, a leaf of metrics/ beside the others",
    ),
    (
        "src/cluster/coord.rs",
        "mongo::classify",
        "the class of a driver error, mongo/errors.rs (a leaf)",
    ),
    (
        "src/control/answer.rs",
        "daemon::",
        "a control command is answered against the daemon's workload slots",
    ),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `crate::…` paths a file's code names (without `crate::`), with the
/// line of each; test code (`#[cfg(test)]` items) left out.
fn crate_paths(source: &str) -> Result<Vec<(usize, String)>, syn::Error> {
    let file = syn::parse_file(source)?;
    let mut v = Paths::default();
    v.visit_file(&file);
    Ok(v.found)
}

#[derive(Default)]
struct Paths {
    found: Vec<(usize, String)>,
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Meta>()
                .is_ok_and(|m| m.path().is_ident("test"))
    })
}

impl Paths {
    fn push(&mut self, line: usize, segments: Vec<String>) {
        if segments.first().map(String::as_str) == Some("crate") && segments.len() > 1 {
            self.found.push((line, segments[1..].join("::")));
        }
    }

    /// `crate :: a :: b` inside a macro's tokens (`select!`, `json!`, …).
    fn scan(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        for (i, t) in tokens.iter().enumerate() {
            match t {
                TokenTree::Group(g) => self.scan(g.stream()),
                TokenTree::Ident(id) if id == "crate" => {
                    let preceded_by_dollar = i > 0
                        && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '$');
                    if preceded_by_dollar {
                        continue;
                    }
                    let mut segments = vec!["crate".to_owned()];
                    let mut j = i + 1;
                    while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(next)) =
                        (tokens.get(j), tokens.get(j + 1), tokens.get(j + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        let TokenTree::Ident(name) = next else { break };
                        segments.push(name.to_string());
                        j += 3;
                    }
                    self.push(id.span().start().line, segments);
                }
                _ => {}
            }
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                let mut s = prefix.clone();
                s.push(n.ident.to_string());
                self.push(n.ident.span().start().line, s);
            }
            syn::UseTree::Rename(r) => {
                let mut s = prefix.clone();
                s.push(r.ident.to_string());
                self.push(r.ident.span().start().line, s);
            }
            syn::UseTree::Glob(g) => {
                self.push(g.star_token.span.start().line, prefix.clone());
            }
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Mod(m) => &m.attrs,
            syn::Item::Fn(f) => &f.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Use(u) => &u.attrs,
            syn::Item::Const(c) => &c.attrs,
            syn::Item::Static(s) => &s.attrs,
            syn::Item::Struct(s) => &s.attrs,
            syn::Item::Enum(e) => &e.attrs,
            syn::Item::Macro(m) => &m.attrs,
            _ => &[],
        };
        if !is_test(attrs) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments = path.segments.iter().map(|s| s.ident.to_string()).collect();
        let line = path
            .segments
            .first()
            .map_or(0, |s| s.ident.span().start().line);
        self.push(line, segments);
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.scan(m.tokens.clone());
    }
}

/// The top-level module a file of `src/` belongs to (`src/a/b.rs` → `a`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src/");
    let first = rel.components().next().expect("a file");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_owned()
}

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("reads the folder") {
        let path = entry.expect("an entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every import of the library under `root`/src that breaks the layers
/// and is not in `allowed`, as `file:line: crate::path (why)`, and the
/// entries of `allowed` no import needs.
fn violations(root: &Path, allowed: &[(&str, &str, &str)]) -> (Vec<String>, Vec<String>) {
    let src = root.join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut bad = Vec::new();
    let mut used = BTreeSet::new();
    for file in files {
        // The files of test modules (`#[cfg(test)] mod tests;`).
        if file.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let name = file
            .strip_prefix(root)
            .expect("under root")
            .display()
            .to_string();
        let text = std::fs::read_to_string(&file).expect("reads the file");
        let paths = crate_paths(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let from = module_of(&src, &file);
        let Some(from_layer) = layer_of(&from) else {
            bad.push(format!("{name}: module {from} is in no layer of LAYERS"));
            continue;
        };
        for (line, path) in paths {
            let to = path.split("::").next().unwrap_or_default();
            if to == from {
                continue;
            }
            let Some(to_layer) = layer_of(to) else {
                bad.push(format!(
                    "{name}:{line}: crate::{path}: module {to} is in no layer"
                ));
                continue;
            };
            if to_layer > from_layer {
                continue;
            }
            match allowed
                .iter()
                .position(|(f, prefix, _)| *f == name && path.starts_with(prefix))
            {
                Some(i) => {
                    used.insert(i);
                }
                None => bad.push(format!(
                    "{name}:{line}: crate::{path}: {from} (layer {from_layer}) imports {to} (layer {to_layer}), which is not below it"
                )),
            }
        }
    }
    let unused = allowed
        .iter()
        .enumerate()
        .filter(|(i, _)| !used.contains(i))
        .map(|(_, (f, p, _))| format!("{f} -> crate::{p}"))
        .collect();
    (bad, unused)
}

#[test]
fn every_import_of_src_runs_down_the_layers() {
    let (bad, unused) = violations(&root(), REACHING_UP);
    assert!(
        bad.is_empty(),
        "imports against the layers of docs/architecture.md (\"Layering\"): move the shared \
         part to a leaf both import, the function to the layer that owns its data, or pass a \
         value instead of importing a type:\n{}",
        bad.join("\n")
    );
    assert!(
        unused.is_empty(),
        "REACHING_UP lists imports no code makes any more: take them out\n{}",
        unused.join("\n")
    );
}

/// The check itself: on a small tree, an import that reaches up is found
/// (in a use line, a qualified name and a macro body), one in a comment,
/// a string or test code is not, and a stale exception is reported.
#[test]
fn the_layer_check_finds_an_import_that_reaches_up() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("workload")).unwrap();
    std::fs::write(
        src.join("workload/mod.rs"),
        "use crate::config::WorkloadConfig;\n\
         // crate::daemon::Running is a comment\n\
         fn f() -> u64 { let _ = \"crate::daemon\"; crate::audit::x() }\n\
         fn g() { tokio::select! { _ = crate::engine::tick() => {} } }\n\
         use crate::schedule::Stage;\n\
         #[cfg(test)]\nmod tests { use crate::daemon::Running; }\n",
    )
    .unwrap();
    std::fs::write(src.join("exit.rs"), "pub fn f() {}\n").unwrap();
    let (bad, unused) = violations(
        dir.path(),
        &[("src/exit.rs", "workload::", "a stale entry")],
    );
    let found: Vec<&str> = bad
        .iter()
        .map(|b| b.split(": ").nth(1).unwrap_or_default())
        .collect();
    assert_eq!(
        found,
        [
            "crate::config::WorkloadConfig",
            "crate::audit::x",
            "crate::engine::tick"
        ],
        "{bad:#?}"
    );
    assert!(bad[0].starts_with("src/workload/mod.rs:1: "), "{}", bad[0]);
    assert_eq!(unused, ["src/exit.rs -> crate::workload::"]);
}
