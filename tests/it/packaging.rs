//! What the packaged files tell a user to look at is what the package
//! installs: every `/usr/share/…` file the systemd units and the shipped
//! configs name is one of the Debian package's assets (Cargo.toml's
//! `[package.metadata.deb] assets`).

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The installed paths (without the leading `/`) of the package's assets,
/// globs expanded against the source tree.
fn installed() -> Vec<String> {
    let manifest = std::fs::read_to_string(repo().join("Cargo.toml")).unwrap();
    let mut out = Vec::new();
    for line in manifest.lines().map(str::trim) {
        let Some(inner) = line
            .strip_prefix("[\"")
            .and_then(|l| l.strip_suffix("\"],"))
        else {
            continue;
        };
        let parts: Vec<&str> = inner.split("\", \"").collect();
        let [src, dest, _mode] = parts[..] else {
            continue;
        };
        let sources: Vec<String> = match src.rsplit_once("/*") {
            Some((dir, suffix)) => match std::fs::read_dir(repo().join(dir)) {
                Ok(entries) => entries
                    .filter_map(|e| e.ok()?.file_name().into_string().ok())
                    .filter(|n| n.ends_with(suffix))
                    .collect(),
                // Built files (target/…) are not in the tree before a build.
                Err(_) => continue,
            },
            None => vec![Path::new(src)
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()],
        };
        for name in sources {
            out.push(match dest.strip_suffix('/') {
                Some(dir) => format!("{dir}/{name}"),
                None => dest.to_owned(),
            });
        }
    }
    out
}

/// The `/usr/share/…` files a text names: a full path, or `NAME in DIR/`
/// (across a comment's line break).
fn named_files(text: &str) -> Vec<String> {
    let joined = text.replace("\n# ", " ").replace("\n#", " ");
    let words: Vec<&str> = joined.split_whitespace().collect();
    let mut out = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let w = w.trim_end_matches(['.', ',', ')', ';', ':', '`', '"']);
        let w = w.trim_start_matches(['(', '`', '"']);
        if !w.starts_with("/usr/share/") {
            continue;
        }
        if w.ends_with('/') {
            if i >= 2 && words[i - 1] == "in" {
                out.push(format!("{w}{}", words[i - 2].trim_matches('`')));
            }
        } else if Path::new(w).extension().is_some() {
            out.push(w.to_owned());
        }
    }
    out
}

#[test]
fn every_file_the_units_and_configs_name_is_installed() {
    let installed = installed();
    assert!(
        installed.contains(&"usr/share/doc/mongoload/examples/credentials.conf".to_owned()),
        "{installed:?}"
    );
    let mut checked = 0;
    for dir in ["packaging/systemd", "etc", "etc/examples"] {
        for entry in std::fs::read_dir(repo().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if !path.is_file() {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for file in named_files(&text) {
                checked += 1;
                assert!(
                    installed.iter().any(|i| format!("/{i}") == file),
                    "{} names {file}, which the package does not install",
                    path.display()
                );
            }
        }
    }
    assert!(checked >= 2, "only {checked} named files found");
}

#[test]
fn named_files_are_found_across_a_comment_line_break() {
    assert_eq!(
        named_files("# see x.conf.example in\n# /usr/share/doc/mongoload/examples/ for"),
        vec!["/usr/share/doc/mongoload/examples/x.conf.example"]
    );
}
