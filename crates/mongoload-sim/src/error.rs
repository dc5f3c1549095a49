//! A command's failure and its reply (`CmdError`, the injected errors)
//! and a command's name: the leaf that every part answering a command
//! imports (the commands, the profiler, authentication, `$queryStats`, a
//! replica-set member, the router), so none of them imports another for it.

use bson::{doc, Document};

use crate::query::QueryError;
use crate::store::WriteError;

/// A command failure: `ok: 0` with `code`, `codeName` and `errmsg`.
#[derive(Debug, Clone, PartialEq)]
pub struct CmdError {
    pub code: i32,
    pub code_name: &'static str,
    pub message: String,
    /// Extra top-level fields (e.g. keyPattern/keyValue on a duplicate key).
    pub extra: Option<Box<Document>>,
}

impl CmdError {
    pub fn new(code: i32, code_name: &'static str, message: impl Into<String>) -> CmdError {
        CmdError {
            code,
            code_name,
            message: message.into(),
            extra: None,
        }
    }

    pub(crate) fn bad_value(message: impl Into<String>) -> CmdError {
        CmdError::new(2, "BadValue", message)
    }

    pub(crate) fn type_mismatch(message: impl Into<String>) -> CmdError {
        CmdError::new(14, "TypeMismatch", message)
    }

    /// The reply document.
    pub fn to_doc(&self) -> Document {
        let mut d = doc! { "ok": 0.0, "errmsg": &self.message, "code": self.code, "codeName": self.code_name };
        if let Some(extra) = &self.extra {
            d.extend(extra.as_ref().clone());
        }
        d
    }
}

impl From<QueryError> for CmdError {
    fn from(e: QueryError) -> Self {
        CmdError::new(e.code, e.code_name, e.message)
    }
}

impl From<WriteError> for CmdError {
    fn from(e: WriteError) -> Self {
        let mut c = CmdError::new(e.code, e.code_name, e.errmsg);
        if let Some(k) = e.key {
            let (pattern, value) = *k;
            c.extra = Some(Box::new(doc! { "keyPattern": pattern, "keyValue": value }));
        }
        c
    }
}

/// The codeName MongoDB uses for `code` (for injected errors).
pub fn code_name(code: i32) -> &'static str {
    match code {
        1 => "InternalError",
        2 => "BadValue",
        6 => "HostUnreachable",
        7 => "HostNotFound",
        11 => "UserNotFound",
        13 => "Unauthorized",
        18 => "AuthenticationFailed",
        20 => "IllegalOperation",
        26 => "NamespaceNotFound",
        43 => "CursorNotFound",
        50 => "MaxTimeMSExpired",
        59 => "CommandNotFound",
        72 => "InvalidOptions",
        89 => "NetworkTimeout",
        91 => "ShutdownInProgress",
        112 => "WriteConflict",
        115 => "CommandNotSupported",
        189 => "PrimarySteppedDown",
        238 => "NotImplemented",
        262 => "ExceededTimeLimit",
        9001 => "SocketException",
        10107 => "NotWritablePrimary",
        11000 => "DuplicateKey",
        11600 => "InterruptedAtShutdown",
        11602 => "InterruptedDueToReplStateChange",
        13435 => "NotPrimaryNoSecondaryOk",
        13436 => "NotPrimaryOrSecondary",
        _ => "UnknownError",
    }
}

/// The reply MongoDB sends for an error with `code`, as an injected fault.
/// `retryable_write` says the command carried a `txnNumber`: then the
/// codes MongoDB retries get the `RetryableWriteError` label, as a 4.4+
/// server adds it (the driver relies on the server for that label).
pub fn injected_error(code: i32, retryable_write: bool) -> Document {
    let message = match code {
        10107 => "not primary".to_owned(),
        91 => "The server is in quiesce mode and will shut down".to_owned(),
        112 => "WriteConflict error: this operation conflicted with another operation. Please retry your operation or multi-document transaction.".to_owned(),
        50 => "operation exceeded time limit".to_owned(),
        c => format!("simulated error (code {c}) injected by mongoload sim"),
    };
    let mut d = CmdError::new(code, code_name(code), message).to_doc();
    let mut labels = Vec::new();
    if code == 112 {
        labels.push("TransientTransactionError");
    }
    const RETRYABLE: [i32; 13] = [
        6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436, 134,
    ];
    if retryable_write && RETRYABLE.contains(&code) {
        labels.push("RetryableWriteError");
    }
    if !labels.is_empty() {
        d.insert("errorLabels", labels);
    }
    d
}

/// The command name: the first key of the document.
pub fn command_name(cmd: &Document) -> &str {
    cmd.keys().next().map(String::as_str).unwrap_or("")
}
