//! The layers of `src/` and of the simulator crate's
//! `crates/mongoload-sim/src/` (docs/architecture.md, "Layering"): a
//! module imports only from the layers below its own, so the import graph
//! has no cycle across folders. Every `crate::…` path of a library's code,
//! and every `super::…` path that reaches the crate's root (use lines,
//! qualified names, macro bodies; not comments, strings or test code), is
//! read with `syn` and held against [`LAYERS`] and [`SIM_LAYERS`]; the few
//! imports that reach up are listed in [`REACHING_UP`] and
//! [`SIM_REACHING_UP`] with their reason, and an entry no code needs any
//! more fails too, so the lists stay true. A name that is no module of the
//! crate is an item of its root, module `lib`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// The top-level modules of `src/` from the top layer down; a module
/// imports only from the layers after its own. One line a layer.
const LAYERS: &[&[&str]] = &[
    &["main"],
    &["cli"],
    &["progress"],
    &["daemon"],
    &["engine"],
    &["audit", "capture", "check_target"],
    &["sharding"],
    &["report", "config"],
    &["threshold", "probe"],
    &["failover"],
    &["metrics"],
    &["mongo"],
    &["workload"],
    &["cluster"],
    &["control"],
    &["error_log"],
    &[
        "schedule",
        "config_values",
        "web",
        "error_kind",
        "family",
        "uri",
        "throttle",
        "exit",
        "lib",
        // The simulator crate, re-exported by lib.rs.
        "sim",
    ],
];

/// The imports that reach a higher layer: the importing file, the path
/// (after `crate::`) it may start with, and why.
const REACHING_UP: &[(&str, &str, &str)] = &[];

/// The top-level modules of the simulator crate (`crates/mongoload-sim/src/`)
/// from the top layer down, as [`LAYERS`] for the daemon's. The crate's
/// root (`lib.rs`: the handle, the start functions, `mongoload sim`'s
/// options) is on top, over `sharded` (a cluster assembled from nodes)
/// and `node` (one server, started alone or as a replica set).
/// `shared.rs` (what a server's connections share, and its role:
/// replica-set member or router) sits under every part that answers a
/// command, so the connection loop hands a command to a member or a
/// router without importing either.
const SIM_LAYERS: &[&[&str]] = &[
    &["lib"],
    &["sharded"],
    &["node"],
    &["replset"],
    &["server"],
    &["commands"],
    &["shared"],
    &["auth", "profile"],
    &["aggregate", "update"],
    &["error"],
    &["store"],
    &["query", "cursor", "faults", "tls", "wire"],
];

/// The simulator crate's imports that reach a higher layer, as
/// [`REACHING_UP`].
const SIM_REACHING_UP: &[(&str, &str, &str)] = &[];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The `crate::…` paths a file's code names (without `crate::`), and its
/// `super::…` paths that reach the crate's root (the file's module is
/// `depth` levels under it: 1 for `src/a.rs` and `src/a/mod.rs`, 2 for
/// `src/a/b.rs`), with the line of each; test code (`#[cfg(test)]`
/// items) left out.
fn crate_paths(source: &str, depth: usize) -> Result<Vec<(usize, String)>, syn::Error> {
    let file = syn::parse_file(source)?;
    let mut v = Paths {
        found: Vec::new(),
        depth,
    };
    v.visit_file(&file);
    Ok(v.found)
}

struct Paths {
    found: Vec<(usize, String)>,
    /// How many `super`s reach the crate's root from here.
    depth: usize,
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
        let supers = segments.iter().take_while(|s| *s == "super").count();
        let rest = if segments.first().map(String::as_str) == Some("crate") {
            &segments[1..]
        } else if supers > 0 && supers == self.depth {
            &segments[supers..]
        } else {
            return;
        };
        if !rest.is_empty() {
            self.found.push((line, rest.join("::")));
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
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.depth += 1;
        syn::visit::visit_item_mod(self, m);
        self.depth -= 1;
    }

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

/// How many `super`s reach the crate's root from a file of `src/`.
fn depth_of(src: &Path, file: &Path) -> usize {
    let rel = file.strip_prefix(src).expect("under src/");
    let parts = rel.components().count();
    if rel
        .file_name()
        .is_some_and(|n| n == "mod.rs" || n == "lib.rs" || n == "main.rs")
    {
        parts - 1
    } else {
        parts
    }
}

fn layer_of(layers: &[&[&str]], module: &str) -> Option<usize> {
    layers.iter().position(|l| l.contains(&module))
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

/// Every import of the library under `root`/`src` that breaks `layers`
/// and is not in `allowed`, as `file:line: crate::path (why)` (the file
/// from `root`), and the entries of `allowed` no import needs.
fn violations(
    root: &Path,
    src: &str,
    layers: &[&[&str]],
    allowed: &[(&str, &str, &str)],
) -> (Vec<String>, Vec<String>) {
    let src = root.join(src);
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
        let paths =
            crate_paths(&text, depth_of(&src, &file)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let from = module_of(&src, &file);
        let Some(from_layer) = layer_of(layers, &from) else {
            bad.push(format!("{name}: module {from} is in no layer of LAYERS"));
            continue;
        };
        for (line, path) in paths {
            let first = path.split("::").next().unwrap_or_default();
            let is_module = src.join(format!("{first}.rs")).is_file() || src.join(first).is_dir();
            // An item of the crate's root (defined or re-exported in lib.rs)
            // is module `lib`'s: `lib::` starts the path held against `allowed`.
            let (to, held) = if layer_of(layers, first).is_none() && !is_module {
                ("lib", format!("lib::{path}"))
            } else {
                (first, path.clone())
            };
            if to == from {
                continue;
            }
            let Some(to_layer) = layer_of(layers, to) else {
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
                .position(|(f, prefix, _)| *f == name && held.starts_with(prefix))
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
    let (bad, unused) = violations(&root(), "src", LAYERS, REACHING_UP);
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

#[test]
fn every_import_of_the_simulator_runs_down_its_layers() {
    let (bad, unused) = violations(
        &root(),
        "crates/mongoload-sim/src",
        SIM_LAYERS,
        SIM_REACHING_UP,
    );
    assert!(
        bad.is_empty(),
        "imports against the simulator's layers of docs/architecture.md (\"Layering\"): move \
         the shared part to a leaf both import, or pass a value instead of importing a type:\n{}",
        bad.join("\n")
    );
    assert!(
        unused.is_empty(),
        "SIM_REACHING_UP lists imports no code makes any more: take them out\n{}",
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
        "src",
        LAYERS,
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

/// The same check on a small tree laid out as the simulator's: `super::`
/// paths that reach the crate's root are read as `crate::` ones (from a
/// folder's `mod.rs` and from a file under it), a name of the root is
/// module `lib`, and a listed exception lets its import through.
#[test]
fn the_layer_check_reads_super_paths_and_the_crate_root() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    for folder in ["store", "query", "sharded"] {
        std::fs::create_dir_all(src.join(folder)).unwrap();
    }
    std::fs::write(src.join("lib.rs"), "pub fn start() {}\n").unwrap();
    std::fs::write(src.join("query/mod.rs"), "pub struct Filter;\n").unwrap();
    std::fs::write(
        src.join("store/mod.rs"),
        "mod index;\nuse super::query::Filter;\nuse super::server::Shared;\n\
         fn f() { crate::start() }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("store/index.rs"),
        "use super::super::replset::Link;\nuse super::Store;\n",
    )
    .unwrap();
    std::fs::write(
        src.join("sharded/mod.rs"),
        "use super::{start, SimHandle};\nuse crate::store::Store;\n",
    )
    .unwrap();
    let (bad, unused) = violations(
        dir.path(),
        "src",
        SIM_LAYERS,
        &[("src/sharded/mod.rs", "lib::", "a listed exception")],
    );
    let found: Vec<&str> = bad
        .iter()
        .map(|b| b.split(": ").nth(1).unwrap_or_default())
        .collect();
    assert_eq!(
        found,
        [
            "crate::replset::Link",
            "crate::server::Shared",
            "crate::start"
        ],
        "{bad:#?}"
    );
    assert!(bad[0].starts_with("src/store/index.rs:1: "), "{}", bad[0]);
    assert!(unused.is_empty(), "{unused:?}");
}
