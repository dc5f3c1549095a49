//! Classifies driver errors into the classes of `mongoload_errors_total`,
//! and [`explain`]s one in a short line for people.
//! The driver's `ErrorKind` is `#[non_exhaustive]`: match what we know and
//! fall through to `Other`, so a new driver variant is counted, not lost.

use std::error::Error as _;

use mongodb::error::{Error, ErrorKind as DriverKind, WriteFailure};

use super::ErrorKind;

/// Server codes that mean "this node cannot take writes or is going away"
/// (NotWritablePrimary, NotPrimaryNoSecondaryOk, NotPrimaryOrSecondary,
/// InterruptedAtShutdown, InterruptedDueToReplStateChange, PrimarySteppedDown,
/// ShutdownInProgress, LegacyNotPrimary).
const NOT_PRIMARY_CODES: &[i32] = &[10107, 13435, 13436, 11600, 11602, 189, 91, 10058];
/// MaxTimeMSExpired, ExceededTimeLimit, NetworkInterfaceExceededTimeLimit,
/// NetworkTimeout.
const TIMEOUT_CODES: &[i32] = &[50, 262, 202, 89];
/// HostUnreachable, HostNotFound, SocketException.
const NETWORK_CODES: &[i32] = &[6, 7, 9001];
/// DuplicateKey and its legacy forms.
const DUPLICATE_KEY_CODES: &[i32] = &[11000, 11001, 12582];
/// Unauthorized, AuthenticationFailed.
const UNAUTHORIZED: i32 = 13;
const AUTH_CODES: &[i32] = &[UNAUTHORIZED, 18];
const WRITE_CONFLICT: i32 = 112;
/// What a mongos returns when the shard an operation targets has no member
/// that its read preference allows (FailedToSatisfyReadPreference: a shard
/// without a primary for a write or a primary read): the router's own
/// server selection failed, as the driver's would against a replica set.
const ROUTER_SELECTION_CODES: &[i32] = &[133];
/// A router's or shard's view of the chunk table changed under the
/// operation (StaleShardVersion, StaleEpoch, StaleDbVersion, StaleConfig)
/// or a migration or other metadata change held the namespace
/// (ConflictingOperationInProgress, ObjectIsBusy): a mongos retries these
/// itself and returns one only when its retries ran out; like a write
/// conflict, the same operation succeeds when tried again.
const ROUTER_CONFLICT_CODES: &[i32] = &[63, 150, 249, 13388, 117, 314];
/// What a server answers for a command or an option it does not have:
/// IllegalOperation, CommandNotFound, InvalidOptions, CommandNotSupported,
/// NotImplemented. Asking again gets the same answer.
const UNSUPPORTED_CODES: &[i32] = &[20, 59, 72, 115, 238];

/// A permanent answer to a command outside the load path (prepare,
/// check-target): asking again cannot change it, so it ends what asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permanent {
    /// The server does not have the command or the option.
    Unsupported,
    /// The user lacks a privilege the command needs (13 Unauthorized).
    Refused,
}

/// Whether `err` is a permanent answer (see [`Permanent`]); `None`: it may
/// pass (the deployment down, an election, a timeout, a conflict).
pub fn permanent(err: &Error) -> Option<Permanent> {
    match server_code(err)? {
        UNAUTHORIZED => Some(Permanent::Refused),
        c if UNSUPPORTED_CODES.contains(&c) => Some(Permanent::Unsupported),
        _ => None,
    }
}

/// The class an error is counted under.
pub fn classify(err: &Error) -> ErrorKind {
    if let Some(code) = server_code(err) {
        return classify_code(code).unwrap_or(ErrorKind::Other);
    }
    match err.kind.as_ref() {
        DriverKind::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => ErrorKind::Timeout,
        // The driver keeps only the text of the failure that cleared the
        // pool; a refused login clears it too, and is not a network error.
        DriverKind::ConnectionPoolCleared { message, .. } if is_auth_failure(message) => {
            ErrorKind::Auth
        }
        DriverKind::Io(_)
        | DriverKind::ConnectionPoolCleared { .. }
        | DriverKind::DnsResolve { .. } => ErrorKind::Network,
        DriverKind::ServerSelection { .. } => ErrorKind::ServerSelection,
        DriverKind::Authentication { .. } => ErrorKind::Auth,
        _ => match err.source().and_then(|s| s.downcast_ref::<Error>()) {
            Some(inner) => classify(inner),
            None => ErrorKind::Other,
        },
    }
}

/// Whether a pool-cleared message names an authentication failure as its
/// cause ("… cleared because another operation failed with: Kind: SCRAM
/// failure: Authentication failed.").
fn is_auth_failure(message: &str) -> bool {
    message
        .split_once("failed with:")
        .is_some_and(|(_, cause)| {
            [
                "SCRAM failure",
                "Authentication failed",
                "AuthenticationFailed",
            ]
            .iter()
            .any(|m| cause.contains(m))
        })
}

/// Whether the server refused the command to this user (13 Unauthorized:
/// a privilege it lacks, as a user with only `readWrite` lacks the
/// cluster's and the `config` database's). Not an error to retry.
pub fn is_unauthorized(err: &Error) -> bool {
    server_code(err) == Some(UNAUTHORIZED)
}

/// The class of a server error code, if the code is one we name.
pub fn classify_code(code: i32) -> Option<ErrorKind> {
    if DUPLICATE_KEY_CODES.contains(&code) {
        Some(ErrorKind::DuplicateKey)
    } else if code == WRITE_CONFLICT || ROUTER_CONFLICT_CODES.contains(&code) {
        Some(ErrorKind::WriteConflict)
    } else if NOT_PRIMARY_CODES.contains(&code) {
        Some(ErrorKind::NotPrimary)
    } else if TIMEOUT_CODES.contains(&code) {
        Some(ErrorKind::Timeout)
    } else if NETWORK_CODES.contains(&code) {
        Some(ErrorKind::Network)
    } else if AUTH_CODES.contains(&code) {
        Some(ErrorKind::Auth)
    } else if ROUTER_SELECTION_CODES.contains(&code) {
        Some(ErrorKind::ServerSelection)
    } else {
        None
    }
}

/// The server's error code, from a command error, a write error, a write
/// concern error or the first write error of a batch.
fn server_code(err: &Error) -> Option<i32> {
    match err.kind.as_ref() {
        DriverKind::Command(c) => Some(c.code),
        DriverKind::Write(WriteFailure::WriteError(w)) => Some(w.code),
        DriverKind::Write(WriteFailure::WriteConcernError(w)) => Some(w.code),
        DriverKind::InsertMany(m) => m
            .write_errors
            .as_ref()
            .and_then(|e| e.first().map(|e| e.code))
            .or_else(|| m.write_concern_error.as_ref().map(|w| w.code)),
        _ => None,
    }
}

/// A short, plain reason for a driver error: TLS and connection problems
/// by name, server errors by code name.
pub fn explain(e: &Error) -> String {
    match e.kind.as_ref() {
        DriverKind::Io(io) => explain_io(io),
        DriverKind::Authentication { message, .. } => message.clone(),
        DriverKind::Command(c) => format!("{} ({}): {}", c.code_name, c.code, c.message),
        DriverKind::DnsResolve { message, .. } => format!("DNS: {message}"),
        DriverKind::InvalidArgument { message, .. } => message.clone(),
        DriverKind::ServerSelection { message, .. } => message.clone(),
        DriverKind::ConnectionPoolCleared { message, .. } => message.clone(),
        _ => e.to_string(),
    }
}

fn explain_io(io: &std::io::Error) -> String {
    use std::io::ErrorKind as Io;
    if let Some(tls) = io
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>())
    {
        return explain_tls(tls);
    }
    match io.kind() {
        Io::ConnectionRefused => "connection refused (is mongod/mongos listening on that port?)".into(),
        Io::TimedOut => "timed out".into(),
        Io::UnexpectedEof | Io::ConnectionReset | Io::BrokenPipe => {
            "the server closed the connection during the handshake (does it require TLS? then add tls=true)".into()
        }
        _ => io.to_string(),
    }
}

fn explain_tls(e: &rustls::Error) -> String {
    use rustls::{CertificateError as Cert, Error as Tls};
    let hint = match e {
        Tls::InvalidCertificate(Cert::UnknownIssuer) => {
            "; the server's certificate is not signed by a CA this host trusts: set tlsCAFile to the CA that signed it"
        }
        Tls::InvalidCertificate(Cert::NotValidForName | Cert::NotValidForNameContext { .. }) => {
            "; the server's certificate does not name the host in the URI"
        }
        Tls::InvalidCertificate(Cert::Expired | Cert::ExpiredContext { .. }) => {
            "; the server's certificate has expired"
        }
        Tls::InvalidMessage(_) => "; the server does not answer in TLS (is TLS enabled on it?)",
        _ => "",
    };
    format!("TLS handshake failed: {e}{hint}")
}

#[cfg(test)]
mod tests {
    use mongodb::bson::{doc, from_document};
    use mongodb::error::CommandError;

    use super::*;

    fn command_error(code: i32) -> Error {
        let c: CommandError =
            from_document(doc! {"code": code, "codeName": "X", "errmsg": "x"}).unwrap();
        Error::from(DriverKind::Command(c))
    }

    #[test]
    fn a_pool_cleared_by_a_refused_login_is_an_auth_failure() {
        let seen = "Connection pool for 127.0.0.1:43443 cleared because another operation \
                    failed with: Kind: SCRAM failure: Authentication failed., labels: {}";
        assert!(is_auth_failure(seen));
        let reset = "Connection pool for 127.0.0.1:43443 cleared because another operation \
                     failed with: Kind: I/O error: Connection reset by peer, labels: {}";
        assert!(!is_auth_failure(reset));
    }

    #[test]
    fn only_a_missing_command_or_privilege_is_permanent() {
        for code in [59, 115, 238, 20, 72] {
            assert_eq!(
                permanent(&command_error(code)),
                Some(Permanent::Unsupported),
                "{code}"
            );
        }
        assert_eq!(permanent(&command_error(13)), Some(Permanent::Refused));
        // An election, a timeout, a conflict, a network error: they pass.
        for code in [10107, 91, 50, 112, 11000, 133] {
            assert_eq!(permanent(&command_error(code)), None, "{code}");
        }
        let io = Error::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(permanent(&io), None);
    }

    #[test]
    fn server_codes_map_to_classes() {
        let cases = [
            (11000, ErrorKind::DuplicateKey),
            (112, ErrorKind::WriteConflict),
            (10107, ErrorKind::NotPrimary),
            (91, ErrorKind::NotPrimary),
            (50, ErrorKind::Timeout),
            (9001, ErrorKind::Network),
            (18, ErrorKind::Auth),
            (2, ErrorKind::Other),
            (59, ErrorKind::Other),
        ];
        for (code, want) in cases {
            assert_eq!(classify(&command_error(code)), want, "code {code}");
        }
    }

    /// The codes a mongos returns for the cluster's state (not for a bad
    /// request): each lands in the class a user expects, none in `other`.
    #[test]
    fn router_codes_map_to_classes() {
        let cases = [
            // A shard without a primary (the simulator's router returns it).
            (133, ErrorKind::ServerSelection),
            // A shard's member unreachable from the router.
            (6, ErrorKind::Network),
            // Routing table changed by a migration, retries exhausted.
            (13388, ErrorKind::WriteConflict),
            (63, ErrorKind::WriteConflict),
            (150, ErrorKind::WriteConflict),
            (249, ErrorKind::WriteConflict),
            (117, ErrorKind::WriteConflict),
            (314, ErrorKind::WriteConflict),
            // A shard's primary stepping down, seen through the router.
            (189, ErrorKind::NotPrimary),
            (11602, ErrorKind::NotPrimary),
            // The router's wait for a shard timed out.
            (202, ErrorKind::Timeout),
        ];
        for (code, want) in cases {
            assert_eq!(classify(&command_error(code)), want, "code {code}");
            assert_ne!(classify_code(code), None, "code {code}");
        }
        // A request the router refuses as malformed (an insert without its
        // shard key) is the user's error, as against a replica set: other.
        assert_eq!(classify(&command_error(61)), ErrorKind::Other);
    }

    #[test]
    fn io_errors_are_network_or_timeout() {
        let timed_out = Error::from(std::io::Error::from(std::io::ErrorKind::TimedOut));
        assert_eq!(classify(&timed_out), ErrorKind::Timeout);
        let reset = Error::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        assert_eq!(classify(&reset), ErrorKind::Network);
    }

    #[test]
    fn unknown_errors_are_other() {
        assert_eq!(classify(&Error::custom(5u8)), ErrorKind::Other);
    }

    #[test]
    fn tls_failures_are_named() {
        let io = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer),
        );
        let text = explain(&Error::from(io));
        assert!(
            text.starts_with("TLS handshake failed: invalid peer certificate: UnknownIssuer; "),
            "{text}"
        );
        assert!(text.contains("tlsCAFile"), "{text}");
        let refused = Error::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert!(explain(&refused).starts_with("connection refused"));
    }
}
