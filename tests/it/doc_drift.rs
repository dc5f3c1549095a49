//! The text that used to drift from the binary, checked against the
//! binary's own definitions: the subcommands and their flags (clap's
//! command tree), the exit statuses (`mongoload::exit::Exit`), the
//! environment variables (the clap tree and every variable the code
//! reads), and the config keys (the schema the loader enforces), each
//! against docs/commands.md or docs/configuration.md, `--help` and the
//! man pages. Nothing here lists a name itself: a renamed flag, variable
//! or key fails until the docs follow.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use clap::CommandFactory;
use mongoload::cli::manpage;
use mongoload::cli::Cli;
use mongoload::exit::Exit;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The rows of the first table after the heading `heading` in `markdown`,
/// cells trimmed (an escaped `\|` stays in its cell).
fn table(markdown: &str, heading: &str) -> Vec<Vec<String>> {
    let mut lines = markdown
        .lines()
        .skip_while(|l| l.trim() != heading)
        .skip(1)
        .skip_while(|l| !l.starts_with('|'))
        .skip(2);
    let mut rows = Vec::new();
    for line in lines.by_ref() {
        let Some(inner) = line.strip_prefix('|').and_then(|l| l.strip_suffix('|')) else {
            break;
        };
        let cells = inner
            .replace("\\|", "\u{1}")
            .split('|')
            .map(|c| c.trim().replace('\u{1}', "|"))
            .collect();
        rows.push(cells);
    }
    assert!(!rows.is_empty(), "no table under {heading:?}");
    rows
}

/// The `code` spans of a markdown cell.
fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`')
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, s)| s.to_owned())
        .collect()
}

fn long_help() -> String {
    Cli::command().render_long_help().to_string()
}

fn man_page() -> String {
    let mut page = Vec::new();
    manpage::render(&mut page).unwrap();
    // roff escapes dashes and backslashes; compare the text as shown.
    String::from_utf8(page)
        .unwrap()
        .replace("\\-", "-")
        .replace("\\e", "\\")
}

fn config_page() -> String {
    let mut page = Vec::new();
    manpage::render_config_page(&mut page).unwrap();
    String::from_utf8(page)
        .unwrap()
        .replace("\\-", "-")
        .replace("\\fB", "")
        .replace("\\fR", "")
}

/// Every long flag of `cmd` (not clap's own --help and --version).
fn long_flags(cmd: &clap::Command) -> BTreeSet<String> {
    cmd.get_arguments()
        .filter(|a| !matches!(a.get_id().as_str(), "help" | "version"))
        .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect()
}

/// The `--flags` written in `text`.
fn flags_in(text: &str) -> BTreeSet<String> {
    text.match_indices("--")
        .map(|(at, _)| {
            let name: String = text[at + 2..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
                .collect();
            format!("--{name}")
        })
        .filter(|f| f.len() > 2)
        .collect()
}

#[test]
fn the_subcommand_table_has_every_subcommand_and_flag_of_the_cli() {
    let cli = Cli::command();
    let docs = read("docs/commands.md");
    let rows = table(&docs, "# Subcommands");
    let mut by_name: BTreeMap<String, String> = BTreeMap::new();
    for row in &rows {
        let usage = code_spans(&row[0]).join(" ");
        let name = usage
            .strip_prefix("mongoload ")
            .and_then(|u| u.split_whitespace().next())
            .unwrap_or_else(|| panic!("row {row:?} names no `mongoload COMMAND`"));
        by_name
            .entry(name.to_owned())
            .or_default()
            .push_str(&format!("{usage} {}\n", row[1]));
    }
    let visible: BTreeSet<String> = cli
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(|s| s.get_name().to_owned())
        .collect();
    let documented: BTreeSet<String> = by_name.keys().cloned().collect();
    assert_eq!(
        documented, visible,
        "docs/commands.md's table against the CLI's subcommands"
    );

    let simulator = read("docs/simulator.md");
    let mut problems = Vec::new();
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        let row = &by_name[name];
        // The simulator's many flags are documented on its page.
        let text = if name == "sim" { &simulator } else { row };
        for flag in long_flags(sub) {
            if !flags_in(text).contains(&flag) {
                problems.push(format!("mongoload {name} {flag} is not documented"));
            }
        }
        for nested in sub.get_subcommands() {
            if !row.contains(nested.get_name()) {
                problems.push(format!(
                    "mongoload {name} {} is not documented",
                    nested.get_name()
                ));
            }
        }
        let usage = code_spans(row).join(" ");
        for flag in flags_in(&usage) {
            if !long_flags(sub).contains(&flag) {
                problems.push(format!("mongoload {name} has no {flag} (docs/commands.md)"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn exit_statuses_are_the_same_in_the_enum_help_man_page_and_docs() {
    let codes: BTreeSet<String> = Exit::ALL.iter().map(|e| e.code().to_string()).collect();
    let docs: BTreeSet<String> = table(&read("docs/commands.md"), "## Exit status")
        .iter()
        .map(|row| row[0].clone())
        .collect();
    assert_eq!(docs, codes, "docs/commands.md's exit statuses");

    let help = long_help();
    let exit_section = help
        .split("EXIT STATUS:")
        .nth(1)
        .expect("--help has EXIT STATUS");
    let man = man_page();
    let man_section = man
        .split(".SH EXIT STATUS")
        .nth(1)
        .expect("man EXIT STATUS");
    for e in Exit::ALL {
        let code = e.code();
        assert!(
            exit_section.contains(&format!("  {code}\n      {}", e.meaning())),
            "--help lists exit {code}"
        );
        assert!(
            man_section.contains(&format!(".TP\n\\fB{code}\\fR\n")),
            "mongoload(1) lists exit {code}"
        );
    }
    // Nothing but the enum's: as many entries as statuses.
    assert_eq!(
        man_section
            .split(".SH")
            .next()
            .unwrap()
            .matches(".TP")
            .count(),
        Exit::ALL.len()
    );
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The variables the code reads: `env::var("X")` / `var_os("X")`, or
/// with a constant `const NAME: &str = "X";` defined in the sources, in
/// the binary's crates (src/ and crates/*/src/).
fn variables_the_code_reads() -> BTreeMap<String, String> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    rust_files(&root().join("crates"), &mut files);
    assert!(files.len() > 50, "found {} source files", files.len());
    let sources: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(&f).unwrap();
            (f, text)
        })
        .collect();
    let mut consts = BTreeMap::new();
    for (_, text) in &sources {
        for line in text.lines() {
            let line = line.trim_start().trim_start_matches("pub ");
            let line = line.trim_start_matches("pub(crate) ");
            if let Some(rest) = line.strip_prefix("const ") {
                if let Some((name, value)) = rest.split_once(": &str = \"") {
                    if let Some(value) = value.strip_suffix("\";") {
                        consts.insert(name.to_owned(), value.to_owned());
                    }
                }
            }
        }
    }
    let mut read = BTreeMap::new();
    for (file, text) in &sources {
        for call in ["env::var(", "env::var_os("] {
            for (at, _) in text.match_indices(call) {
                let arg: String = text[at + call.len()..]
                    .chars()
                    .take_while(|c| *c != ')')
                    .collect();
                let name = match arg.strip_prefix('"') {
                    Some(lit) => lit.trim_end_matches('"').to_owned(),
                    None => consts
                        .get(arg.rsplit("::").next().unwrap())
                        .unwrap_or_else(|| {
                            panic!("{}: {call}{arg}): no &str const {arg}", file.display())
                        })
                        .clone(),
                };
                let rel = file.strip_prefix(root()).unwrap_or(file);
                read.insert(name, rel.display().to_string());
            }
        }
    }
    read
}

#[test]
fn every_variable_the_binary_reads_is_documented_in_help_man_page_and_docs() {
    let listed: BTreeSet<&str> = manpage::environment_names().into_iter().collect();

    let mut read = variables_the_code_reads();
    // clap's `env = "…"` fallbacks, over the whole command tree.
    let mut stack = vec![Cli::command()];
    while let Some(cmd) = stack.pop() {
        for arg in cmd.get_arguments() {
            if let Some(var) = arg.get_env() {
                read.insert(
                    var.to_string_lossy().into_owned(),
                    format!("mongoload {} --{}", cmd.get_name(), arg.get_id()),
                );
            }
        }
        stack.extend(cmd.get_subcommands().cloned());
    }
    for name in ["MONGOLOAD_CONFIG", "RUST_LOG", "MONGOLOAD_SIM_AUTH"] {
        assert!(read.contains_key(name), "the scan finds {name}: {read:?}");
    }
    let missing: Vec<String> = read
        .iter()
        .filter(|(name, _)| !listed.contains(name.as_str()))
        .map(|(name, at)| format!("{name} (read in {at})"))
        .collect();
    assert!(
        missing.is_empty(),
        "read but not in manpage::ENVIRONMENT: {missing:?}"
    );

    let docs: BTreeSet<String> = table(&read_docs_commands(), "## Environment")
        .iter()
        .flat_map(|row| code_spans(&row[0]))
        .collect();
    let listed_owned: BTreeSet<String> = listed.iter().map(|s| s.to_string()).collect();
    assert_eq!(docs, listed_owned, "docs/commands.md's environment table");

    let help = long_help();
    let man = man_page();
    let help_env = help
        .split("ENVIRONMENT:")
        .nth(1)
        .expect("--help ENVIRONMENT");
    let man_env = man
        .split(".SH ENVIRONMENT")
        .nth(1)
        .expect("man ENVIRONMENT");
    for name in &listed {
        assert!(help_env.contains(name), "--help lists {name}");
        assert!(man_env.contains(name), "mongoload(1) lists {name}");
    }
}

fn read_docs_commands() -> String {
    read("docs/commands.md")
}

#[test]
fn sighup_is_documented_as_a_reload() {
    let help = long_help();
    let man = man_page();
    for (text, term) in [(&help, "\n  SIGHUP\n"), (&man, "\\fBSIGHUP\\fR")] {
        let sighup = text.split(term).nth(1).expect("SIGHUP documented");
        let sighup = &sighup[..sighup.find("EXIT STATUS").unwrap_or(sighup.len())];
        assert!(sighup.contains("reload"), "{sighup}");
        assert!(
            !sighup.contains("validate the config file again"),
            "{sighup}"
        );
    }
}

/// A minimal valid config with `extra` inserted into the table `at`
/// (`""` for the top level).
fn config_with(at: &str, extra: &str) -> String {
    let mut tables: BTreeMap<&str, String> = BTreeMap::new();
    for t in ["target", "http", "run", "control", "cluster", "lag_probe"] {
        tables.insert(t, String::new());
    }
    let mut top = String::new();
    let mut workload = String::new();
    let mut stage = "rate = 1\nduration = \"1s\"\n".to_owned();
    let mut schedule_by_windows = false;
    let mut window = "when = \"daily 00:00-01:00\", rate = 1".to_owned();
    let mut default = String::new();
    let mut threshold = String::new();
    match at {
        "" => top.push_str(extra),
        "workloads[]" => workload.push_str(extra),
        "workloads[].stages[]" => stage.push_str(extra),
        "workloads[].thresholds[]" => {
            threshold = format!("[[workloads.thresholds]]\ncheck = \"p99 < 1s\"\n{extra}");
        }
        "workloads[].windows[]" => {
            schedule_by_windows = true;
            if !extra.is_empty() {
                window.push_str(&format!(", {}", extra.trim()));
            }
        }
        "workloads[].default" => {
            schedule_by_windows = true;
            default = match extra.trim() {
                "" => "default = { rate = 1 }\n".to_owned(),
                e => format!("default = {{ rate = 1, {e} }}\n"),
            };
        }
        t => tables.get_mut(t).expect("a table").push_str(extra),
    }
    let mut text = top;
    for (name, body) in tables {
        text.push_str(&format!("[{name}]\n{body}"));
        if name == "target" {
            text.push_str("uri = \"mongodb://127.0.0.1:27017\"\n");
        }
    }
    text.push_str(&format!(
        "[[workloads]]\nname = \"w\"\nkind = \"mixed\"\n{workload}"
    ));
    if schedule_by_windows {
        text.push_str(&format!("windows = [{{ {window} }}]\n{default}"));
    } else {
        text.push_str(&format!("[[workloads.stages]]\n{stage}"));
    }
    text.push_str(&threshold);
    text
}

/// The keys the schema accepts in table `at`: the loader refuses an
/// unknown key and names the keys it expected (serde's field list).
fn schema_keys(at: &str) -> BTreeSet<String> {
    let plain = config_with(at, "");
    mongoload::config::parse_with_env(&plain, Path::new("probe.toml"), Vec::new())
        .unwrap_or_else(|e| panic!("the probe config for {at:?} is valid: {e}\n{plain}"));
    let text = config_with(at, "zzz_not_a_key = 1\n");
    let err = mongoload::config::parse_with_env(&text, Path::new("probe.toml"), Vec::new())
        .expect_err("an unknown key is refused")
        .to_string();
    let expected = err
        .split("expected one of ")
        .nth(1)
        .or_else(|| err.split("expected ").nth(1))
        .unwrap_or_else(|| panic!("{at:?}: no key list in {err:?}"));
    code_spans(expected).into_iter().collect()
}

/// Whether a code span of `meaning` names `key` as a word
/// (`{ when = "…", rate = N }` names `when` and `rate`).
fn mentions(meaning: &str, key: &str) -> bool {
    code_spans(meaning).iter().any(|span| {
        span.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|word| word == key)
    })
}

/// The configuration table's key cells as full paths: `target.uri` /
/// `target.uri_file`, `target.connect_timeout`, `server_selection_timeout`
/// and `workloads[].seed`, `.repeat` each name every key in full.
fn documented_paths(key_cell: &str) -> Vec<String> {
    let mut prefix = String::new();
    let mut paths = Vec::new();
    for span in code_spans(key_cell) {
        let full = if let Some(leaf) = span.strip_prefix('.') {
            format!("{prefix}{leaf}")
        } else if span.contains('.') {
            span.clone()
        } else {
            format!("{prefix}{span}")
        };
        prefix = match full.rfind('.') {
            Some(i) => full[..=i].to_owned(),
            None => String::new(),
        };
        paths.push(full);
    }
    paths
}

#[test]
fn the_configuration_table_and_mongoload_toml_5_have_every_key_of_the_schema() {
    let rows = manpage::config_table();
    let docs = read("docs/configuration.md");
    assert_eq!(
        rows.len(),
        table(&docs, "# Configuration").len(),
        "mongoload.toml(5) shows every row of docs/configuration.md's table"
    );
    // path → the meaning of its row
    let mut documented: BTreeMap<String, String> = BTreeMap::new();
    for [key, _, meaning] in &rows {
        for path in documented_paths(key) {
            documented.insert(path, meaning.clone());
        }
    }
    let tables = [
        "",
        "target",
        "http",
        "run",
        "control",
        "cluster",
        "lag_probe",
        "workloads[]",
        "workloads[].stages[]",
        "workloads[].thresholds[]",
        "workloads[].windows[]",
        "workloads[].default",
    ];
    // The default level shares the windows' struct, whose `when` its
    // validation refuses: not a key of the default (checked here, so the
    // exception goes when the refusal does).
    let refused = config_with("workloads[].default", "when = \"daily 02:00-03:00\"");
    let err = mongoload::config::parse_with_env(&refused, Path::new("probe.toml"), Vec::new())
        .expect_err("default.when is refused")
        .to_string();
    assert!(err.contains("workloads[0].default.when"), "{err}");
    let not_keys = ["workloads[].default.when"];

    let mut problems = Vec::new();
    let mut schema = BTreeSet::new();
    for table in tables {
        let prefix = match table {
            "" => String::new(),
            t => format!("{t}."),
        };
        for key in schema_keys(table) {
            let path = format!("{prefix}{key}");
            if not_keys.contains(&path.as_str()) {
                continue;
            }
            schema.insert(path.clone());
            let named = documented.contains_key(&path)
                // a table documented through its own keys
                || documented
                    .keys()
                    .any(|d| d.starts_with(&format!("{path}.")) || d.starts_with(&format!("{path}[]")))
                // a key of a sub-table its row describes
                || documented
                    .get(table)
                    .is_some_and(|meaning| mentions(meaning, &key));
            if !named {
                problems.push(format!("{path} is not in docs/configuration.md's table"));
            }
        }
    }
    for path in documented.keys() {
        let is_table = tables.contains(&path.as_str());
        // `workloads[].mixed.*`: a kind's parameter table (docs/workloads.md).
        let kind_table = path.starts_with("workloads[].") && path.ends_with(".*");
        if !schema.contains(path) && !is_table && !kind_table {
            problems.push(format!(
                "{path} (docs/configuration.md) is not a key of the schema"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));

    let page = config_page();
    for [key, _, _] in &rows {
        for span in code_spans(key) {
            assert!(page.contains(&span), "mongoload.toml(5) shows {span}");
        }
    }
}

/// The keys of kind `kind`'s parameter table, as the loader's refusal of
/// an unknown one names them.
fn kind_keys(kind: &str) -> BTreeSet<String> {
    let table = kind.replace('-', "_");
    let text = format!(
        "[target]\nuri = \"mongodb://127.0.0.1:27017\"\n[[workloads]]\nname = \"w\"\n\
         kind = \"{kind}\"\n[workloads.{table}]\nzzz_not_a_key = 1\n\
         [[workloads.stages]]\nrate = 1\nduration = \"1s\"\n"
    );
    let err = mongoload::config::parse_with_env(&text, Path::new("probe.toml"), Vec::new())
        .expect_err("an unknown key is refused")
        .to_string();
    assert!(
        err.contains(&format!("workloads[0].{table}.zzz_not_a_key")),
        "{kind}: {err}"
    );
    let expected = err
        .split("expected one of ")
        .nth(1)
        .unwrap_or_else(|| panic!("{kind}: no key list in {err:?}"));
    code_spans(expected).into_iter().collect()
}

#[test]
fn every_workload_kind_and_its_keys_are_in_docs_workloads() {
    let docs = read("docs/workloads.md");
    // "## `mixed` — weighted CRUD" → its section's text
    let mut sections: BTreeMap<String, String> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in docs.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            current = code_spans(h).first().cloned();
        } else if line.starts_with("# ") {
            current = None;
        } else if let Some(kind) = &current {
            let text = sections.entry(kind.clone()).or_default();
            text.push_str(line);
            text.push('\n');
        }
    }
    let kinds: BTreeSet<String> = mongoload::config::KindConfig::NAMES
        .iter()
        .map(|k| k.to_string())
        .collect();
    let documented_kinds: BTreeSet<String> = sections.keys().cloned().collect();
    assert_eq!(documented_kinds, kinds, "docs/workloads.md's kinds");

    let mut problems = Vec::new();
    for (kind, text) in &sections {
        let schema = kind_keys(kind);
        let has_table = text.lines().any(|l| l.starts_with("| key |"));
        // The first column of the section's `| key | default | meaning |` table.
        let documented: BTreeSet<String> = text
            .lines()
            .skip_while(|l| !l.starts_with("| key |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .flat_map(|l| code_spans(l.split(" | ").next().unwrap_or("")))
            .collect();
        for key in &schema {
            let named = documented.contains(key) || (!has_table && mentions(text, key));
            if !named {
                problems.push(format!(
                    "[workloads.{kind}] {key} is not in docs/workloads.md"
                ));
            }
        }
        for key in &documented {
            if !schema.contains(key) {
                problems.push(format!(
                    "[workloads.{kind}] {key} (docs/workloads.md) is not a key of the schema"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
