//! The one writer of a terminal's stderr while progress is shown: log
//! records and progress lines are written as whole lines above a status
//! area (the prepare bars) that is redrawn in place below them, so the
//! two never cut into each other. Plain ANSI: erase line, cursor up.

use std::io::Write;
use std::sync::{Arc, Mutex, PoisonError};

use tracing_subscriber::fmt::MakeWriter;

/// Columns assumed when the terminal does not say.
const DEFAULT_WIDTH: usize = 80;

/// Stderr as a terminal with a status area; cloning shares it.
#[derive(Clone, Default)]
pub struct Terminal {
    /// The status lines drawn now (at the bottom, the cursor at the end
    /// of the last one). The lock also keeps writes whole.
    status: Arc<Mutex<Vec<String>>>,
}

impl Terminal {
    /// Writes `text` (whole lines) above the status area.
    pub fn print(&self, text: &str) {
        let status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        write_stderr(&compose(status.len(), text, &status));
    }

    /// Replaces the status area with `lines` (none: removes it).
    pub fn set_status(&self, lines: Vec<String>) {
        let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
        if *status == lines {
            return;
        }
        write_stderr(&compose(status.len(), "", &lines));
        *status = lines;
    }

    /// The terminal's width in columns (one less, so a full line never
    /// wraps), or 79 when it cannot be known.
    pub fn width(&self) -> usize {
        let cols = rustix::termios::tcgetwinsize(std::io::stderr())
            .map(|w| usize::from(w.ws_col))
            .unwrap_or(0);
        match cols {
            0 => DEFAULT_WIDTH - 1,
            n => n - 1,
        }
    }
}

fn write_stderr(bytes: &str) {
    if bytes.is_empty() {
        return;
    }
    let mut err = std::io::stderr().lock();
    // Nowhere to report a terminal that went away.
    let _ = err.write_all(bytes.as_bytes()).and_then(|()| err.flush());
}

/// The bytes that erase a status area of `drawn` lines (the cursor at the
/// end of its last line), write `text`, and draw `status` below it.
pub fn compose(drawn: usize, text: &str, status: &[String]) -> String {
    let mut out = String::new();
    if drawn > 0 {
        out.push_str("\r\x1b[2K");
        for _ in 1..drawn {
            out.push_str("\x1b[1A\x1b[2K");
        }
    }
    out.push_str(text);
    if !text.is_empty() && !text.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&status.join("\n"));
    out
}

/// One log record, written whole by [`Terminal::print`].
pub struct LogWriter<'a>(&'a Terminal);

impl Write for LogWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The fmt layer writes each record with one write_all of its
        // formatted text, so a call is a whole record.
        self.0.print(&String::from_utf8_lossy(buf));
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Terminal {
    type Writer = LogWriter<'a>;

    fn make_writer(&'a self) -> Self::Writer {
        LogWriter(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_go_above_a_status_area_redrawn_in_place() {
        let bars = ["a: preparing".to_owned(), "b: preparing".to_owned()];
        // Nothing drawn: the text, then the status without a newline.
        assert_eq!(
            compose(0, "log\n", &bars),
            "log\na: preparing\nb: preparing"
        );
        // Two status lines drawn: erased bottom up, text, redrawn.
        assert_eq!(
            compose(2, "log\n", &bars[..1]),
            "\r\x1b[2K\x1b[1A\x1b[2Klog\na: preparing"
        );
        // The status area removed.
        assert_eq!(compose(1, "", &[]), "\r\x1b[2K");
        // A text without its newline gets one: the status starts on a line of its own.
        assert_eq!(compose(0, "x", &bars[..1]), "x\na: preparing");
        assert_eq!(compose(0, "", &[]), "");
    }
}
