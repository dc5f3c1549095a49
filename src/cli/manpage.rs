//! Man pages generated from the command-line definition (clap_mangen), so
//! they never drift from `--help`: `mongoload man` prints mongoload(1);
//! `mongoload man --dir DIR` writes it and one page per subcommand
//! (mongoload-run(1), …), which the Debian package ships.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use super::Cli;
use crate::exit::Exit;

/// The variables the binary reads, as (names, meaning): `--help`, the
/// man page's ENVIRONMENT and the table in docs/commands.md list these; a
/// test checks that every variable the code reads is here.
pub const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "MONGOLOAD_CONFIG",
        "run, check-config, check-target: the config file when --config is not given \
         (default /etc/mongoload/mongoload.toml).",
    ),
    (
        "MONGOLOAD_<SECTION>__<KEY>",
        "Overrides a config key, e.g. MONGOLOAD_TARGET__URI, MONGOLOAD_HTTP__LISTEN, \
         or MONGOLOAD_CLUSTER__INDEX.",
    ),
    (
        "MONGOLOAD_CONTROL_SOCKET, MONGOLOAD_CONTROL__SOCKET",
        "run: the control socket, over [control] socket (mongoload@NAME sets it); ctl: the socket \
         when --socket is not given (default /run/mongoload/control.sock). The second spelling is \
         deprecated and warned about.",
    ),
    (
        "MONGOLOAD_SIM_AUTH",
        "sim: USER:PASSWORD when --auth is not given, keeping the password off the command line.",
    ),
    (
        "MONGOLOAD_URI",
        "capture --profile: the deployment when --uri and --config are not given, keeping the \
         password off the command line.",
    ),
    (
        "HOSTNAME",
        "cluster.index when neither the key nor its variable sets it: the hostname's trailing -N \
         (else /proc/sys/kernel/hostname's); a member's heartbeat records it.",
    ),
    (
        "RUST_LOG",
        "Log filter (default info; warn while live progress is shown).",
    ),
    (
        "TERM",
        "Live progress is off when it is dumb (and when stderr is not a terminal).",
    ),
    (
        "NOTIFY_SOCKET, WATCHDOG_USEC, WATCHDOG_PID",
        "Set by systemd: READY=1 once /metrics listens and the plan runs, STATUS= with each workload's \
         stage, level and runtime control, WATCHDOG=1 while every load loop ticks, RELOADING=1/READY=1 \
         around SIGHUP, STOPPING=1 once.",
    ),
    (
        "INVOCATION_ID",
        "Set by systemd: run's and check-config's advice for a path they cannot write names \
         ReadWritePaths= only under systemd.",
    ),
    (
        "JOURNAL_STREAM",
        "Set by systemd: logs go to the journal with fields WORKLOAD, STAGE, OP, ERROR_KIND, \
         and live progress is off.",
    ),
];

/// The names an [`ENVIRONMENT`] entry lists (`A, B` lists two).
pub fn environment_names() -> Vec<&'static str> {
    ENVIRONMENT
        .iter()
        .flat_map(|(names, _)| names.split(", "))
        .collect()
}

const FILES: &[(&str, &str)] = &[
    (
        "/etc/mongoload/mongoload.toml",
        "The default config, every key commented (mongoload.toml(5)); `mongoload check-config` validates it.",
    ),
    (
        "/etc/mongoload/NAME.toml",
        "The config of the instance unit mongoload@NAME.service.",
    ),
    (
        "/var/lib/mongoload/",
        "State directory of the systemd unit (run logs); /var/lib/mongoload/NAME for mongoload@NAME.",
    ),
    (
        "/run/mongoload/control.sock",
        "Control socket of the shipped config (mongoload ctl's default); \
         /run/mongoload/NAME/control.sock for mongoload@NAME.",
    ),
    (
        "/usr/share/mongoload/",
        "Grafana dashboards and Prometheus recording and alert rules.",
    ),
    (
        "/usr/share/doc/mongoload/",
        "The manual (README.md and docs/) and example configs.",
    ),
];

const SIGNALS: &[(&str, &str)] = &[
    (
        "SIGTERM, SIGINT",
        "run: stop dispatch, let in-flight operations finish for run.shutdown_grace, exit 0.",
    ),
    (
        "SIGHUP",
        "run: reload the config file (systemctl reload mongoload): the plan is applied live, \
         workloads matched by name, without a restart or a counter reset; an invalid file, or a \
         change to a key bound at start (target.*, lag_probe, http.listen, control.socket, run.log), \
         is refused and the running plan goes on.",
    ),
];

/// What `--help` says after the options and the man page has as its own
/// sections: (heading, [(term, meaning)]).
fn sections() -> Vec<(&'static str, Vec<(String, String)>)> {
    let own = |items: &[(&str, &str)]| -> Vec<(String, String)> {
        items
            .iter()
            .map(|(t, m)| ((*t).to_owned(), (*m).to_owned()))
            .collect()
    };
    vec![
        ("FILES", own(FILES)),
        ("ENVIRONMENT", own(ENVIRONMENT)),
        ("SIGNALS", own(SIGNALS)),
        (
            "EXIT STATUS",
            Exit::ALL
                .iter()
                .map(|e| (e.code().to_string(), e.meaning().to_owned()))
                .collect(),
        ),
    ]
}

/// The `--help` text after the options: FILES, ENVIRONMENT, SIGNALS and
/// EXIT STATUS as plain text.
pub fn after_help() -> String {
    let mut out = String::new();
    for (heading, items) in sections() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(heading);
        out.push_str(":\n");
        for (term, meaning) in items {
            out.push_str(&format!("  {term}\n      {meaning}\n"));
        }
    }
    out
}

/// Writes mongoload(1), the top-level page, to `w`.
pub fn render(w: &mut dyn Write) -> io::Result<()> {
    let mut cmd = command();
    cmd.build();
    let man = clap_mangen::Man::new(cmd);
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    man.render_subcommands_section(w)?;
    for (heading, items) in sections() {
        writeln!(w, ".SH {}", roff_escape(heading))?;
        for (term, meaning) in items {
            writeln!(
                w,
                ".TP\n\\fB{}\\fR\n{}",
                roff_escape(&term),
                roff_escape(&meaning)
            )?;
        }
    }
    writeln!(w, ".SH SEE ALSO")?;
    writeln!(
        w,
        "mongoload.toml(5), systemctl(1), journalctl(1), systemd.service(5)"
    )?;
    man.render_version_section(w)
}

/// Writes mongoload.1 and a page per visible subcommand into `dir`
/// (created if missing); returns the files written, sorted.
pub fn generate_to(dir: &Path) -> io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut cmd = command();
    cmd.build();
    let mut pages = Vec::new();
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        pages.push(clap_mangen::Man::new(sub.clone()).generate_to(dir)?);
    }
    let top = dir.join("mongoload.1");
    let mut file = std::fs::File::create(&top)?;
    render(&mut file)?;
    file.flush()?;
    pages.push(top);
    let config = dir.join("mongoload.toml.5");
    let mut file = std::fs::File::create(&config)?;
    render_config_page(&mut file)?;
    file.flush()?;
    pages.push(config);
    pages.sort();
    Ok(pages)
}

/// docs/configuration.md, whose first table is the config reference:
/// mongoload.toml(5) shows it, and a test checks its keys against the
/// schema the loader enforces, so the page, the docs and the binary agree.
const CONFIGURATION_MD: &str = include_str!("../../docs/configuration.md");

/// The rows of the configuration table (key, default, meaning), in
/// markdown as docs/configuration.md has them.
pub fn config_table() -> Vec<[String; 3]> {
    let mut lines = CONFIGURATION_MD
        .lines()
        .skip_while(|l| !l.starts_with("| key |"))
        .skip(2);
    let mut rows = Vec::new();
    for line in lines.by_ref() {
        let Some(inner) = line.strip_prefix('|').and_then(|l| l.strip_suffix('|')) else {
            break;
        };
        let cells = split_cells(inner);
        if let [key, default, meaning] = cells.as_slice() {
            rows.push([key.clone(), default.clone(), meaning.clone()]);
        }
    }
    rows
}

/// A table row's cells: split on `|`, except an escaped `\|`.
fn split_cells(row: &str) -> Vec<String> {
    let mut cells = vec![String::new()];
    let mut chars = row.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                cells.last_mut().unwrap().push('|');
            }
            '|' => cells.push(String::new()),
            c => cells.last_mut().unwrap().push(c),
        }
    }
    cells.iter().map(|c| c.trim().to_owned()).collect()
}

/// Markdown of a table cell as roff: links become their text, `code`
/// bold, `**` dropped, everything else literal.
fn md_to_roff(md: &str) -> String {
    let mut plain = String::new();
    let mut rest = md;
    // [text](target) → text
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](").map(|i| open + i) else {
            break;
        };
        let Some(close) = rest[mid..].find(')').map(|i| mid + i) else {
            break;
        };
        plain.push_str(&rest[..open]);
        plain.push_str(&rest[open + 1..mid]);
        rest = &rest[close + 1..];
    }
    plain.push_str(rest);
    let plain = plain.replace("**", "");
    let mut out = String::new();
    for (i, part) in plain.split('`').enumerate() {
        if i % 2 == 1 {
            out.push_str(&format!("\\fB{}\\fR", roff_escape(part)));
        } else {
            out.push_str(&roff_escape(part));
        }
    }
    out
}

/// Writes mongoload.toml(5): the keys of the config file, from the table
/// of docs/configuration.md.
pub fn render_config_page(w: &mut dyn Write) -> io::Result<()> {
    let version = env!("CARGO_PKG_VERSION");
    writeln!(w, ".TH mongoload.toml 5 \"\" \"mongoload {version}\"")?;
    writeln!(
        w,
        ".SH NAME\nmongoload.toml \\- configuration file of mongoload(1)"
    )?;
    writeln!(
        w,
        ".SH SYNOPSIS\n/etc/mongoload/mongoload.toml, /etc/mongoload/NAME.toml (for mongoload@NAME)"
    )?;
    writeln!(
        w,
        ".SH DESCRIPTION\nA TOML file: the deployment ([target]), the endpoints ([http], [control]), \
         the run ([run]), several load hosts ([cluster]), the replication-lag probe ([lag_probe]) \
         and one [[workloads]] table per workload, each with its stages or time-of-day windows. \
         Every key has a default but the target's URI and each workload's name, kind and schedule. \
         The shipped /etc/mongoload/mongoload.toml has every key, commented, with its default; \
         \\fBmongoload check-config\\fR validates a file and prints the resolved plan (exit 78 \
         naming file, key and reason)."
    )?;
    writeln!(w, ".SH KEYS")?;
    for [key, default, meaning] in config_table() {
        writeln!(
            w,
            ".TP\n{} (default: {})\n{}",
            md_to_roff(&key),
            md_to_roff(&default),
            md_to_roff(&meaning)
        )?;
    }
    writeln!(
        w,
        ".SH WORKLOAD KINDS\nEach workload's parameters are in a table named after its kind \
         ([workloads.mixed], [workloads.sysbench], ...); every parameter has a default. The kinds \
         and their keys: /usr/share/doc/mongoload/docs/workloads.md; one example per kind in \
         /usr/share/doc/mongoload/examples/."
    )?;
    writeln!(
        w,
        ".SH ENVIRONMENT\nAny key can be overridden as \\fBMONGOLOAD_<SECTION>__<KEY>\\fR, \
         e.g. MONGOLOAD_TARGET__URI or MONGOLOAD_CLUSTER__INDEX."
    )?;
    writeln!(
        w,
        ".SH SEE ALSO\nmongoload(1), mongoload\\-check\\-config(1), \
         /usr/share/doc/mongoload/docs/configuration.md"
    )
}

/// The command definition as the pages show it (no `help` subcommand: the
/// pages are the help).
fn command() -> clap::Command {
    Cli::command().disable_help_subcommand(true)
}

/// Text as roff shows it literally: backslashes and dashes escaped, no
/// line taken for a request.
fn roff_escape(text: &str) -> String {
    let out = text.replace('\\', "\\e").replace('-', "\\-");
    if out.starts_with('.') || out.starts_with('\'') {
        format!("\\&{out}")
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `--help` is complete: every subcommand has a summary and every
    /// argument (bar clap's own --help/--version) a help line.
    #[test]
    fn every_subcommand_and_argument_is_documented() {
        let cmd = command();
        cmd.clone().debug_assert();
        let mut missing = Vec::new();
        for sub in cmd.get_subcommands() {
            if sub.get_about().is_none() {
                missing.push(sub.get_name().to_owned());
            }
            for arg in sub.get_arguments() {
                let id = arg.get_id().as_str();
                if id != "help" && id != "version" && arg.get_help().is_none() {
                    missing.push(format!("{} {id}", sub.get_name()));
                }
            }
        }
        assert!(missing.is_empty(), "undocumented: {missing:?}");
        let help = cmd.clone().render_long_help().to_string();
        for needle in [
            "MONGOLOAD_CONFIG",
            "SIGHUP",
            "78",
            "/etc/mongoload/mongoload.toml",
        ] {
            assert!(help.contains(needle), "--help mentions {needle}");
        }
    }

    /// mongoload.toml(5) has a row per key of docs/configuration.md's
    /// table, markdown made roff (links their text, code bold).
    #[test]
    fn the_config_page_shows_the_configuration_table() {
        let rows = config_table();
        assert!(rows.len() > 20, "{} rows", rows.len());
        assert!(rows
            .iter()
            .any(|[k, d, _]| k == "`http.listen`" && d == "`127.0.0.1:9480`"));
        let mut page = Vec::new();
        render_config_page(&mut page).unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(page.starts_with(".TH mongoload.toml 5 "), "{page}");
        assert_eq!(page.matches("\n.TP\n").count(), rows.len());
        assert!(page.contains("\\fBhttp.listen\\fR (default: \\fB127.0.0.1:9480\\fR)"));
        assert!(!page.contains("](#"), "no markdown link left");
        assert_eq!(
            md_to_roff("the [audit](#the-audit), `a-b` and **c**"),
            "the audit, \\fBa\\-b\\fR and c"
        );
        assert_eq!(split_cells(" a \\| b | c "), ["a | b", "c"]);
    }

    #[test]
    fn roff_escape_keeps_text_literal() {
        assert_eq!(roff_escape("--config"), "\\-\\-config");
        assert_eq!(roff_escape(".hidden"), "\\&.hidden");
        assert_eq!(roff_escape("a\\b"), "a\\eb");
    }

    /// Every visible subcommand and every documented long flag is in the
    /// pages: they come from the same definition as `--help`.
    #[test]
    fn pages_cover_every_subcommand_and_flag() {
        let mut top = Vec::new();
        render(&mut top).unwrap();
        let top = String::from_utf8(top).unwrap();
        assert!(top.contains(".TH mongoload 1"), "{top}");
        assert!(
            top.contains("MONGOLOAD_CONFIG"),
            "the files/environment text"
        );

        let dir = tempfile::tempdir().unwrap();
        let pages = generate_to(dir.path()).unwrap();
        let cmd = command();
        for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
            assert!(
                top.contains(&format!(
                    "mongoload\\-{}(1)",
                    sub.get_name().replace('-', "\\-")
                )),
                "mongoload(1) lists {}",
                sub.get_name()
            );
            let file = dir.path().join(format!("mongoload-{}.1", sub.get_name()));
            assert!(pages.contains(&file), "{file:?} in {pages:?}");
            let page = std::fs::read_to_string(&file).unwrap();
            for arg in sub.get_arguments() {
                if let Some(long) = arg.get_long() {
                    // roff escapes the dashes: \-\-config
                    let escaped = format!("\\-\\-{}", long.replace('-', "\\-"));
                    assert!(page.contains(&escaped), "{file:?} documents --{long}");
                }
            }
        }
        assert!(
            !pages.iter().any(|p| p.ends_with("mongoload-man.1")),
            "the hidden man subcommand has no page"
        );
    }
}
