//! The manual's links: every relative link and `#anchor` in README.md,
//! docs/*.md and BENCHMARKS.md leads to a file that exists and, with an
//! anchor, to a heading of that file (GitHub's anchor rule); every page of
//! docs/ is linked from README.md; and every `docs/<page>.md` that code
//! comments, packaging and config files name exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A page's headings as anchors (GitHub's rule: lower case, letters,
/// digits, `_`, `-` and spaces kept, spaces made `-`; a repeated anchor
/// gets `-1`, `-2`, …) and its links with the line each is on.
#[derive(Debug, Default)]
struct Page {
    anchors: BTreeSet<String>,
    links: Vec<(usize, String)>,
}

fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn parse(text: &str) -> Page {
    let mut page = Page::default();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut heading: Option<String> = None;
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    for (event, range) in Parser::new_ext(text, Options::ENABLE_TABLES).into_offset_iter() {
        match event {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let n = seen.entry(base.clone()).or_insert(0);
                let anchor = if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                };
                *n += 1;
                page.anchors.insert(anchor);
            }
            Event::Start(Tag::Link { dest_url, .. })
            | Event::Start(Tag::Image { dest_url, .. }) => {
                page.links
                    .push((line_of(range.start), dest_url.to_string()));
            }
            _ => {}
        }
    }
    page
}

/// `a/b/../c` → `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// Every broken link of `pages` (paths relative to `root`), as
/// `file:line: link: why`. Links with a scheme (https:, file:, …) are left
/// alone: only what the repository itself holds is checked.
fn broken_links(root: &Path, pages: &BTreeMap<PathBuf, Page>) -> Vec<String> {
    let mut broken = Vec::new();
    for (file, page) in pages {
        for (line, link) in &page.links {
            let at = format!("{}:{line}: {link}", file.display());
            if link.contains("://") || link.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = link.split_once('#').unwrap_or((link, ""));
            let target = if path.is_empty() {
                file.clone()
            } else {
                normalize(&file.parent().unwrap_or(Path::new("")).join(path))
            };
            if target.starts_with("..") || !root.join(&target).exists() {
                broken.push(format!("{at}: no file {}", target.display()));
                continue;
            }
            if anchor.is_empty() {
                continue;
            }
            let other;
            let anchors = match pages.get(&target) {
                Some(p) => &p.anchors,
                None if target.extension().is_some_and(|e| e == "md") => {
                    let text = std::fs::read_to_string(root.join(&target)).unwrap();
                    other = parse(&text).anchors;
                    &other
                }
                None => {
                    broken.push(format!("{at}: an anchor into a file that is not markdown"));
                    continue;
                }
            };
            if !anchors.contains(anchor) {
                broken.push(format!(
                    "{at}: no heading with the anchor #{anchor} in {}",
                    target.display()
                ));
            }
        }
    }
    broken
}

fn manual() -> BTreeMap<PathBuf, Page> {
    let root = root();
    let mut files = vec![PathBuf::from("README.md"), PathBuf::from("BENCHMARKS.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| PathBuf::from("docs").join(p.file_name().unwrap()))
        .collect();
    docs.sort();
    assert!(docs.len() >= 10, "docs/ has {} pages", docs.len());
    files.extend(docs);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(root.join(&f))
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            (f, parse(&text))
        })
        .collect()
}

#[test]
fn every_link_and_anchor_of_the_manual_resolves() {
    let pages = manual();
    let links: usize = pages.values().map(|p| p.links.len()).sum();
    assert!(
        links > 50,
        "only {links} links found: is the parser reading the pages?"
    );
    let broken = broken_links(&root(), &pages);
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_of_docs_is_linked_from_the_front_page() {
    let pages = manual();
    let readme = &pages[Path::new("README.md")];
    let linked: BTreeSet<PathBuf> = readme
        .links
        .iter()
        .map(|(_, l)| PathBuf::from(l.split('#').next().unwrap()))
        .collect();
    let orphans: Vec<_> = pages
        .keys()
        .filter(|p| p.starts_with("docs") && !linked.contains(*p))
        .collect();
    assert!(
        orphans.is_empty(),
        "pages README.md does not link: {orphans:?}"
    );
}

/// Code comments, packaging and config files point at pages of the manual
/// by path (`docs/reliability.md, "Known limit"`): each must exist.
#[test]
fn every_docs_page_named_in_the_tree_exists() {
    let root = root();
    let mut missing = Vec::new();
    let mut stack: Vec<PathBuf> = [
        "src",
        "crates",
        "tests",
        "benches",
        "etc",
        "packaging",
        "dashboards",
        ".ci",
        "Cargo.toml",
        "BENCHMARKS.md",
    ]
    .iter()
    .map(|p| root.join(p))
    .collect();
    let mut named = 0;
    while let Some(path) = stack.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                stack.push(entry.unwrap().path());
            }
            continue;
        }
        if path.ends_with(file!().rsplit('/').next().unwrap()) {
            continue; // this file's fixtures name pages of their own
        }
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue; // not text
        };
        for (at, _) in text.match_indices("docs/") {
            let name: String = text[at + 5..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
                .collect();
            if name.is_empty() || !text[at + 5 + name.len()..].starts_with(".md") {
                continue;
            }
            named += 1;
            if !root.join("docs").join(format!("{name}.md")).is_file() {
                let line = text[..at].matches('\n').count() + 1;
                let file = path.strip_prefix(&root).unwrap_or(&path);
                missing.push(format!("{}:{line}: docs/{name}.md", file.display()));
            }
        }
    }
    assert!(named > 5, "only {named} mentions of docs/*.md found");
    assert!(missing.is_empty(), "no such page:\n{}", missing.join("\n"));
}

/// The checker itself finds what it should: a missing file, a missing
/// anchor (in the page and in another), a link out of the repository; and
/// takes GitHub's anchors, repeated headings included.
#[test]
fn the_checker_finds_broken_links() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    let a = "# A page\n\n## Checking a deployment (`check-target`)\n\n## Notes\n\n## Notes\n\n\
             ```sh\n# not a heading\n```\n\n\
             [ok](#checking-a-deployment-check-target) [ok](#notes-1) [ok](b.md#b--the-other)\n\
             [bad](#not-a-heading) [bad](b.md#nope) [bad](c.md) [bad](../../outside.md)\n\
             [left alone](https://example.net/#x)\n";
    let b = "# `b` — the other\n\n[ok](../README.md) [ok](a.md#notes)\n";
    std::fs::write(dir.path().join("docs/a.md"), a).unwrap();
    std::fs::write(dir.path().join("docs/b.md"), b).unwrap();
    std::fs::write(dir.path().join("README.md"), "# r\n").unwrap();
    let pages: BTreeMap<PathBuf, Page> = [("docs/a.md", a), ("docs/b.md", b)]
        .into_iter()
        .map(|(f, t)| (PathBuf::from(f), parse(t)))
        .collect();
    let broken = broken_links(dir.path(), &pages);
    assert_eq!(broken.len(), 4, "{broken:#?}");
    for link in ["#not-a-heading", "b.md#nope", "c.md", "../../outside.md"] {
        assert!(
            broken.iter().any(|b| b.contains(&format!(": {link}: "))),
            "{link} not reported: {broken:#?}"
        );
    }
}
