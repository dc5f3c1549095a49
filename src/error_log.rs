//! Bounded error logging of failed operations: an [`ErrorLog`] is a
//! [`LogLimiter`] (the `mongoload-loglimit` crate, shared with the
//! simulator) with one class per [`ErrorKind`], so an outage logs a few
//! lines however many operations were in flight. Every error is still
//! counted in the metrics.

use std::time::Instant;

pub(crate) use mongoload_loglimit::{LogLimiter, LOG_INTERVAL};

use crate::error_kind::ErrorKind;

/// The operation error log of one workload: one line per error class per
/// [`LOG_INTERVAL`], shared by all its workers.
#[derive(Debug)]
pub(crate) struct ErrorLog(LogLimiter);

impl Default for ErrorLog {
    fn default() -> Self {
        ErrorLog(LogLimiter::new(ErrorKind::ALL.len(), LOG_INTERVAL))
    }
}

impl ErrorLog {
    /// Logs a failed operation unless a line of its class was logged less
    /// than [`LOG_INTERVAL`] ago.
    pub(crate) fn log(
        &self,
        workload: &str,
        op: &str,
        step: &str,
        kind: ErrorKind,
        err: &mongodb::error::Error,
    ) {
        if let Some(suppressed) = self.0.admit(kind as usize, Instant::now()) {
            let error = describe(err);
            if suppressed > 0 {
                tracing::warn!(workload, op, step, error_kind = %kind, suppressed, "operation failed: {error} ({suppressed} more {kind} errors in the last {}s not logged)", LOG_INTERVAL.as_secs());
            } else {
                tracing::warn!(workload, op, step, error_kind = %kind, suppressed, "operation failed: {error}");
            }
        }
    }
}

/// A driver error in one short line: the error's kind (for a server error
/// its code, name and message), without the raw reply the driver's own
/// `Display` appends.
pub(crate) fn describe(err: &mongodb::error::Error) -> String {
    let labels = err.labels();
    if labels.is_empty() {
        err.kind.to_string()
    } else {
        let mut labels: Vec<&str> = labels.iter().map(String::as_str).collect();
        labels.sort_unstable();
        format!("{} [{}]", err.kind, labels.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn describe_leaves_out_the_raw_reply() {
        use mongodb::bson::{doc, from_document};
        use mongodb::error::{CommandError, Error, ErrorKind as DriverKind};
        let c: CommandError = from_document(
            doc! {"code": 10107, "codeName": "NotWritablePrimary", "errmsg": "not primary"},
        )
        .unwrap();
        let text = describe(&Error::from(DriverKind::Command(c)));
        assert!(text.contains("10107"), "{text}");
        assert!(text.contains("NotWritablePrimary"), "{text}");
        assert!(!text.contains("RawDocumentBuf"), "{text}");
        let io = Error::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert!(describe(&io).contains("I/O error"), "{}", describe(&io));
    }
}
