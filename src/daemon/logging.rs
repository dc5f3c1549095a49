//! Logging setup: to journald with structured fields when stderr is the
//! journal (systemd's JOURNAL_STREAM check), else human-readable lines on
//! stderr, above the live progress's bars when it is shown. RUST_LOG
//! overrides the default level.
//!
//! In the journal, every field of an event and of its spans becomes a
//! journal field of the same name in upper case (`workload` → `WORKLOAD`,
//! `error_kind` → `ERROR_KIND`), so `journalctl -u mongoload WORKLOAD=mixed`
//! filters by workload. Span fields carry a `SPAN_` prefix for the span
//! metadata only; recorded values keep their plain names.

use std::os::unix::fs::MetadataExt;

use tracing_indicatif::filter::IndicatifFilter;
use tracing_indicatif::{IndicatifLayer, TickSettings};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::Layer;

/// Where [`init`] sends log records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogSink {
    /// The systemd journal, with structured fields.
    Journald,
    /// Formatted lines on stderr.
    Stderr,
    /// A subscriber was already installed (an earlier `init`, or a test
    /// harness); it stays.
    AlreadyInitialized,
}

/// As [`init`]; outside the journal and with `progress`, records are
/// written above the live progress's bars ([`progress_subscriber`]).
pub(crate) fn init_with(default_level: &str, progress: bool) -> LogSink {
    let filter = filter(std::env::var("RUST_LOG").ok().as_deref(), default_level);
    if stderr_is_journal() {
        match tracing_journald::layer() {
            Ok(journald) => {
                // No "F_" prefix: fields keep their own names in the journal.
                let journald = journald.with_field_prefix(None);
                return match tracing_subscriber::registry()
                    .with(filter)
                    .with(journald)
                    .try_init()
                {
                    Ok(()) => LogSink::Journald,
                    Err(_) => LogSink::AlreadyInitialized,
                };
            }
            Err(e) => eprintln!("mongoload: cannot log to journald ({e}); logging to stderr"),
        }
    }
    // Colours only on a terminal: a file or a pipe gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let installed = match progress {
        true => progress_subscriber(filter, ansi).try_init(),
        false => tracing_subscriber::registry()
            .with(filter)
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(ansi),
            )
            .try_init(),
    };
    match installed {
        Ok(()) => LogSink::Stderr,
        Err(_) => LogSink::AlreadyInitialized,
    }
}

/// Log lines on stderr under the live progress (`progress/`): the
/// records, filtered by `filter`, through `tracing-indicatif`'s writer,
/// which hides the bars while it writes; a bar for each span with an
/// `indicatif.pb_show` field, whatever `filter` says, and no other.
pub(crate) fn progress_subscriber(
    filter: EnvFilter,
    ansi: bool,
) -> impl tracing::Subscriber + Send + Sync {
    // No steady tick: the bars change once a second, when progress/ sets them.
    let ticks = TickSettings {
        default_tick_interval: None,
        ..Default::default()
    };
    let bars = IndicatifLayer::new().with_tick_settings(ticks);
    let lines = tracing_subscriber::fmt::layer()
        .with_writer(bars.get_stderr_writer())
        .with_ansi(ansi)
        .with_filter(filter);
    tracing_subscriber::registry()
        .with(lines)
        .with(bars.with_filter(IndicatifFilter::new(false)))
}

/// The filter from RUST_LOG (if set and valid), else `default_level`, else
/// `info`.
fn filter(rust_log: Option<&str>, default_level: &str) -> EnvFilter {
    if let Some(spec) = rust_log.filter(|s| !s.trim().is_empty()) {
        match EnvFilter::try_new(spec) {
            Ok(filter) => return filter,
            Err(e) => eprintln!("mongoload: ignoring RUST_LOG={spec:?}: {e}"),
        }
    }
    EnvFilter::try_new(default_level).unwrap_or_else(|e| {
        eprintln!("mongoload: invalid log level {default_level:?} ({e}); using info");
        EnvFilter::new("info")
    })
}

/// True when JOURNAL_STREAM names stderr's device and inode: systemd's
/// documented way to know stderr is connected to the journal (and not
/// redirected by whoever started us).
pub(crate) fn stderr_is_journal() -> bool {
    let Some(stream) = std::env::var_os("JOURNAL_STREAM") else {
        return false;
    };
    let Some(stream) = stream.to_str() else {
        return false;
    };
    match stderr_dev_ino() {
        Some((dev, ino)) => journal_stream_matches(stream, dev, ino),
        None => false,
    }
}

/// Device and inode of fd 2, through a duplicate of it (safe code only).
fn stderr_dev_ino() -> Option<(u64, u64)> {
    use std::os::fd::AsFd;
    let fd = std::io::stderr().as_fd().try_clone_to_owned().ok()?;
    let meta = std::fs::File::from(fd).metadata().ok()?;
    Some((meta.dev(), meta.ino()))
}

/// Whether a JOURNAL_STREAM value (`<device>:<inode>`, decimal) names this
/// device and inode.
pub(crate) fn journal_stream_matches(journal_stream: &str, dev: u64, ino: u64) -> bool {
    let Some((d, i)) = journal_stream.trim().split_once(':') else {
        return false;
    };
    matches!((d.parse::<u64>(), i.parse::<u64>()), (Ok(d), Ok(i)) if d == dev && i == ino)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_stream_parsing() {
        assert!(journal_stream_matches("8:12345", 8, 12345));
        assert!(!journal_stream_matches("8:12345", 8, 12346));
        assert!(!journal_stream_matches("9:12345", 8, 12345));
        assert!(!journal_stream_matches("812345", 8, 12345));
        assert!(!journal_stream_matches("a:b", 8, 12345));
        assert!(!journal_stream_matches("", 0, 0));
    }

    #[test]
    fn stderr_dev_ino_is_that_of_fd_2() {
        let (dev, ino) = stderr_dev_ino().expect("fd 2 is open in tests");
        // The same file seen through /proc: proves we stat fd 2, not
        // something else.
        let meta = std::fs::metadata("/proc/self/fd/2").unwrap();
        assert_eq!((dev, ino), (meta.dev(), meta.ino()));
        let stream = format!("{dev}:{ino}");
        assert!(journal_stream_matches(&stream, dev, ino));
    }

    #[test]
    fn filter_prefers_valid_rust_log() {
        assert_eq!(filter(Some("debug"), "info").to_string(), "debug");
        assert_eq!(
            filter(None, "mongoload=debug,warn").to_string(),
            "mongoload=debug,warn"
        );
        assert_eq!(filter(Some(""), "warn").to_string(), "warn");
        // Invalid directives fall back instead of panicking.
        assert_eq!(filter(Some("=[bad"), "warn").to_string(), "warn");
        assert_eq!(filter(None, "=[bad").to_string(), "info");
    }

    #[test]
    fn init_twice_is_harmless() {
        // Another test may have installed a subscriber first; either way
        // the second call must find one and change nothing.
        let _first = init_with("info", false);
        assert_eq!(init_with("debug", false), LogSink::AlreadyInitialized);
        tracing::info!(workload = "w", "still logging");
    }
}
