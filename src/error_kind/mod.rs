//! The classes that operation errors are counted under: the `kind` label of
//! `mongoload_errors_total`, and the class of a driver error
//! ([`classify`], in `driver.rs`). Shared by the deployment layer, the
//! metrics, the reports and every feature that talks to the server.

mod driver;

use std::fmt;

pub use driver::{classify, classify_code, explain, is_unauthorized, permanent, Permanent};

/// One error class. The order of [`ErrorKind::ALL`] is the order metric
/// children are resolved in, so `kind as usize` indexes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    Timeout,
    Network,
    NotPrimary,
    WriteConflict,
    DuplicateKey,
    ServerSelection,
    Auth,
    Other,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 8] = [
        ErrorKind::Timeout,
        ErrorKind::Network,
        ErrorKind::NotPrimary,
        ErrorKind::WriteConflict,
        ErrorKind::DuplicateKey,
        ErrorKind::ServerSelection,
        ErrorKind::Auth,
        ErrorKind::Other,
    ];

    /// The label value, as the metrics contract spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "timeout",
            ErrorKind::Network => "network",
            ErrorKind::NotPrimary => "not_primary",
            ErrorKind::WriteConflict => "write_conflict",
            ErrorKind::DuplicateKey => "duplicate_key",
            ErrorKind::ServerSelection => "server_selection",
            ErrorKind::Auth => "auth",
            ErrorKind::Other => "other",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_is_in_discriminant_order() {
        for (i, kind) in ErrorKind::ALL.iter().enumerate() {
            assert_eq!(*kind as usize, i, "{kind}");
        }
    }
}
