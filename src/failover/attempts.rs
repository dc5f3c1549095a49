//! A write's attempts, seen through the driver's connection-pool (CMAP)
//! events, so a failure the driver's retryable writes hide still starts a
//! write outage and counts as a retry.
//!
//! The published driver checks a connection out for every attempt of an
//! operation and emits `ConnectionCheckoutStarted` before and
//! `ConnectionCheckedOut` (or `ConnectionCheckoutFailed`) after, in the
//! operation's own task, through a callback it calls inline. The engine
//! runs each request with a task-local book of its checkouts
//! ([`crate::mongo::attempts`], where the driver calls are); the pool
//! handler writes each checkout into the book of the task it runs in.
//! When the request returns, [`super::Failover::write_done`] reads the
//! book: two checkouts or more mean the driver sent the write again after
//! the earlier attempts failed. Here: what those attempts failed with.
//!
//! What a failed attempt failed with, the pool's events do not say. The
//! driver tells its topology monitoring (SDAM) instead: the error that made
//! it mark the member unknown, or the member no longer primary. [`Members`]
//! keeps each member's last such fault from the SDAM handler; an attempt
//! takes the fault of its member unless the member was writable again
//! between that fault and the attempt. Not exact: the driver delivers SDAM
//! events on a task of its own (one may arrive after the operation
//! returned), and it reports only the failure that changed its view of
//! the member, not the ones that follow it; an attempt whose member shows
//! no fault yet is `other` (docs/failover.md).

use std::time::Instant;

use mongodb::options::ServerAddress;
use mongodb::ServerType;

use crate::error_kind::ErrorKind;
use crate::mongo::attempts::{member_key, Attempt};

/// The write commands (each attempt of a write is one).
pub fn is_write_command(name: &str) -> bool {
    matches!(
        name,
        "insert" | "update" | "delete" | "findAndModify" | "commitTransaction"
    )
}

/// A member's last fault as the topology monitoring told it.
#[derive(Debug, Clone)]
struct Member {
    key: u64,
    address: String,
    /// The class of its last fault, and when the event came.
    fault: Option<(ErrorKind, Instant)>,
    /// When the events last showed it writable (a primary, a mongos, a
    /// standalone).
    writable: Option<Instant>,
}

/// The members' faults from the SDAM events, for the class of a failed
/// attempt (see the module's doc).
#[derive(Debug, Default)]
pub(super) struct Members {
    list: Vec<Member>,
}

/// What the class of a failed attempt was, as far as the topology events
/// tell: the class and when the driver learnt of it, and the member's
/// address.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Fault {
    pub(super) kind: ErrorKind,
    pub(super) at: Option<Instant>,
    pub(super) address: Option<String>,
}

impl Members {
    /// The SDAM handler saw `address` change from `previous` to `new`
    /// (`error`: the one its new description carries, classified) at `now`.
    pub(super) fn changed(
        &mut self,
        address: &ServerAddress,
        previous: ServerType,
        new: ServerType,
        error: Option<ErrorKind>,
        now: Instant,
    ) {
        let key = member_key(address);
        let i = match self.list.iter().position(|m| m.key == key) {
            Some(i) => i,
            None => {
                self.list.push(Member {
                    key,
                    address: address.to_string(),
                    fault: None,
                    writable: None,
                });
                self.list.len() - 1
            }
        };
        let m = &mut self.list[i];
        let writable = |t| {
            matches!(
                t,
                ServerType::RsPrimary
                    | ServerType::Standalone
                    | ServerType::Mongos
                    | ServerType::LoadBalancer
            )
        };
        if let Some(kind) = error {
            m.fault = Some((kind, now));
        } else if writable(new) {
            m.writable = Some(now);
        } else if previous == ServerType::RsPrimary && new != ServerType::Unknown {
            // It stepped down: a write it was sent is refused.
            m.fault = Some((ErrorKind::NotPrimary, now));
        }
    }

    /// The class of attempt `a`, which failed: its member's last fault,
    /// unless the member was writable again between that fault and the
    /// attempt's checkout; else `network` for an attempt that got no
    /// connection, `other` for one that did.
    pub(super) fn fault(&self, a: &Attempt) -> Fault {
        let m = self.list.iter().find(|m| m.key == a.member);
        let known = m.and_then(|m| {
            let (kind, at) = m.fault?;
            let healed = m.writable.is_some_and(|w| w > at && w <= a.started);
            (!healed).then_some((kind, at))
        });
        let address = m.map(|m| m.address.clone());
        match known {
            Some((kind, at)) => Fault {
                kind,
                at: Some(at),
                address,
            },
            None => Fault {
                kind: if a.checkout_failed {
                    ErrorKind::Network
                } else {
                    ErrorKind::Other
                },
                at: None,
                address,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn addr(s: &str) -> ServerAddress {
        ServerAddress::parse(s).unwrap()
    }

    #[test]
    fn a_failed_attempt_takes_its_members_last_fault_unless_it_healed_before() {
        let t0 = Instant::now();
        let s = Duration::from_secs(1);
        let mut m = Members::default();
        let (a, b) = (addr("a:1"), addr("b:1"));
        m.changed(&a, ServerType::Unknown, ServerType::RsPrimary, None, t0);
        m.changed(&b, ServerType::Unknown, ServerType::RsSecondary, None, t0);
        let attempt = |member: &ServerAddress, at: Instant, checkout_failed| Attempt {
            started: at,
            sent: at,
            member: member_key(member),
            checkout_failed,
        };
        // No fault known: other, or network without a connection.
        let f = m.fault(&attempt(&a, t0 + s, false));
        assert_eq!(
            (f.kind, f.at, f.address.as_deref()),
            (ErrorKind::Other, None, Some("a:1"))
        );
        assert_eq!(m.fault(&attempt(&a, t0 + s, true)).kind, ErrorKind::Network);
        // It steps down: a write sent to it before or after is refused.
        m.changed(
            &a,
            ServerType::RsPrimary,
            ServerType::RsSecondary,
            None,
            t0 + 2 * s,
        );
        let f = m.fault(&attempt(&a, t0 + s, false));
        assert_eq!((f.kind, f.at), (ErrorKind::NotPrimary, Some(t0 + 2 * s)));
        assert_eq!(
            m.fault(&attempt(&a, t0 + 3 * s, false)).kind,
            ErrorKind::NotPrimary
        );
        // A connection to it fails: the error the driver marked it with.
        let io =
            mongodb::error::Error::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
        let kind = crate::error_kind::classify(&io);
        m.changed(
            &a,
            ServerType::RsSecondary,
            ServerType::Unknown,
            Some(kind),
            t0 + 4 * s,
        );
        assert_eq!(
            m.fault(&attempt(&a, t0 + 3 * s, false)).kind,
            ErrorKind::Network
        );
        // Primary again: an attempt after that shows no fault; one before
        // still takes it.
        m.changed(
            &a,
            ServerType::Unknown,
            ServerType::RsPrimary,
            None,
            t0 + 5 * s,
        );
        assert_eq!(
            m.fault(&attempt(&a, t0 + 6 * s, false)).kind,
            ErrorKind::Other
        );
        assert_eq!(
            m.fault(&attempt(&a, t0 + 3 * s, false)).kind,
            ErrorKind::Network
        );
        // An unknown member.
        let f = m.fault(&attempt(&addr("c:1"), t0, false));
        assert_eq!((f.kind, f.address), (ErrorKind::Other, None));
    }

    #[test]
    fn writes_are_the_write_commands() {
        assert!(is_write_command("insert"));
        assert!(is_write_command("commitTransaction"));
        assert!(!is_write_command("find"));
    }
}
