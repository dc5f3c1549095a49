//! Man pages generated from the command-line definition (clap_mangen), so
//! they never drift from `--help`: `mongoload man` prints mongoload(1);
//! `mongoload man --dir DIR` writes it and one page per subcommand
//! (mongoload-run(1), …), which the Debian package ships.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use clap::CommandFactory;

use crate::cli::Cli;

/// What `--help` says after the options and the man page has as its own
/// sections: (heading, [(term, meaning)]).
const SECTIONS: &[(&str, &[(&str, &str)])] = &[
    (
        "FILES",
        &[
            (
                "/etc/mongoload/mongoload.toml",
                "The default config, every key commented; `mongoload check-config` validates it.",
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
        ],
    ),
    (
        "ENVIRONMENT",
        &[
            ("MONGOLOAD_CONFIG", "Config file when --config is not given."),
            (
                "MONGOLOAD_<SECTION>__<KEY>",
                "Overrides a config key, e.g. MONGOLOAD_TARGET__URI or MONGOLOAD_HTTP__LISTEN.",
            ),
            ("RUST_LOG", "Log filter (default info)."),
            (
                "NOTIFY_SOCKET, WATCHDOG_USEC",
                "Set by systemd: READY=1 once /metrics listens and the plan runs, STATUS= with each workload's \
                 stage, level and runtime control, WATCHDOG=1 while every load loop ticks, RELOADING=1/READY=1 \
                 around SIGHUP, STOPPING=1 once.",
            ),
            (
                "JOURNAL_STREAM",
                "Set by systemd: logs go to the journal with fields WORKLOAD, STAGE, OP, ERROR_KIND.",
            ),
        ],
    ),
    (
        "SIGNALS",
        &[
            (
                "SIGTERM, SIGINT",
                "run: stop dispatch, let in-flight operations finish for run.shutdown_grace, exit 0.",
            ),
            (
                "SIGHUP",
                "run: validate the config file again (systemctl reload mongoload).",
            ),
        ],
    ),
    (
        "EXIT STATUS",
        &[
            ("0", "Success."),
            ("1", "Runtime failure (cannot listen, cannot start)."),
            (
                "78",
                "Invalid config, or a run.log or control.socket path the daemon cannot write (EX_CONFIG); \
                 the systemd units do not restart on it.",
            ),
        ],
    ),
];

/// The `--help` text after the options: [`SECTIONS`] as plain text.
pub fn after_help() -> String {
    let mut out = String::new();
    for (heading, items) in SECTIONS {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(heading);
        out.push_str(":\n");
        for (term, meaning) in *items {
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
    for (heading, items) in SECTIONS {
        writeln!(w, ".SH {}", roff_escape(heading))?;
        for (term, meaning) in *items {
            writeln!(
                w,
                ".TP\n\\fB{}\\fR\n{}",
                roff_escape(term),
                roff_escape(meaning)
            )?;
        }
    }
    writeln!(w, ".SH SEE ALSO")?;
    writeln!(w, "systemctl(1), journalctl(1), systemd.service(5)")?;
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
    pages.sort();
    Ok(pages)
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
