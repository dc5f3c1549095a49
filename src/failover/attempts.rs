//! A write's attempts, seen through the driver's connection-pool (CMAP)
//! events, so a failure the driver's retryable writes hide still starts a
//! write outage and counts as a retry.
//!
//! The published driver checks a connection out for every attempt of an
//! operation and emits `ConnectionCheckoutStarted` before and
//! `ConnectionCheckedOut` (or `ConnectionCheckoutFailed`) after, in the
//! operation's own task, through a callback it calls inline. The engine
//! runs each request inside [`watch`], which sets a task-local book of
//! attempts; the pool handler ([`checkout_started`] and the two after it)
//! writes each checkout into the book of the task it runs in, and does
//! nothing (no allocation, one thread-local read) where none is set: the
//! driver's own tasks, the audit, the probes. When the request returns,
//! [`super::Failover::write_done`] reads the book: two checkouts or more
//! mean the driver sent the write again after the earlier attempts failed.
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

use std::cell::RefCell;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::time::{Duration, Instant};

use mongodb::options::ServerAddress;
use mongodb::ServerType;
use tokio::task::futures::TaskLocalFuture;

use crate::error_kind::ErrorKind;

tokio::task_local! {
    static ATTEMPTS: RefCell<Attempts>;
}

/// Checkouts kept per request (the newest): a retryable write is sent at
/// most twice, so one more than that is room to spare.
const KEEP: usize = 4;

/// The write commands (each attempt of a write is one).
pub fn is_write_command(name: &str) -> bool {
    matches!(
        name,
        "insert" | "update" | "delete" | "findAndModify" | "commitTransaction"
    )
}

/// A member, as the pool's and the topology's events name it: a hash of
/// its address, so a checkout records it without copying the host name.
pub(super) fn member_key(address: &ServerAddress) -> u64 {
    foldhash::fast::FixedState::default().hash_one(address)
}

/// One checkout of a connection for an attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Attempt {
    /// When the checkout began.
    pub(crate) started: Instant,
    /// When the connection was in hand (the command went out right
    /// after), or when the checkout failed.
    pub(crate) sent: Instant,
    /// The member, by [`member_key`].
    pub(crate) member: u64,
    /// No connection came: the attempt failed at its checkout.
    pub(crate) checkout_failed: bool,
}

/// The checkouts of one request, oldest first (the newest [`KEEP`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Attempts {
    /// Checkouts begun.
    count: u32,
    ring: [Option<Attempt>; KEEP],
}

impl Attempts {
    /// How many checkouts the request made.
    pub(crate) fn count(&self) -> u32 {
        self.count
    }

    /// Attempt `i` (0: the first), if still kept.
    pub(crate) fn get(&self, i: u32) -> Option<Attempt> {
        if i >= self.count || self.count - i > KEEP as u32 {
            return None;
        }
        self.ring[i as usize % KEEP]
    }

    /// The newest attempt.
    pub(crate) fn last(&self) -> Option<Attempt> {
        self.count.checked_sub(1).and_then(|i| self.get(i))
    }

    /// A checkout for member `member` began at `at`.
    pub(crate) fn started(&mut self, member: u64, at: Instant) {
        self.ring[self.count as usize % KEEP] = Some(Attempt {
            started: at,
            sent: at,
            member,
            checkout_failed: false,
        });
        self.count += 1;
    }

    /// The newest checkout ended `took` after it began: with a connection,
    /// or (`failed`) without.
    pub(crate) fn ended(&mut self, took: Duration, failed: bool) {
        if let Some(i) = self.count.checked_sub(1) {
            if let Some(a) = &mut self.ring[i as usize % KEEP] {
                a.sent = a.started + took;
                a.checkout_failed = failed;
            }
        }
    }
}

/// Runs `request` with a book of its attempts: the checkouts it makes
/// land in it ([`taken`] reads it back, finished or not).
pub(crate) fn watch<F: std::future::Future>(request: F) -> TaskLocalFuture<RefCell<Attempts>, F> {
    ATTEMPTS.scope(RefCell::new(Attempts::default()), request)
}

/// The attempts of a request run by [`watch`], even one dropped at its
/// deadline before it returned.
pub(crate) fn taken<F: std::future::Future>(
    request: Pin<&mut TaskLocalFuture<RefCell<Attempts>, F>>,
) -> Attempts {
    request
        .take_value()
        .map(RefCell::into_inner)
        .unwrap_or_default()
}

/// Forgets the attempts so far of the current request: the driver
/// refused to send it before any attempt (a deployment without sessions),
/// and it is sent again from the start.
pub(crate) fn forget() {
    let _ = ATTEMPTS.try_with(|a| *a.borrow_mut() = Attempts::default());
}

/// The pool began a checkout for `address` (`ConnectionCheckoutStarted`).
pub(crate) fn checkout_started(address: &ServerAddress) {
    let _ = ATTEMPTS.try_with(|a| a.borrow_mut().started(member_key(address), Instant::now()));
}

/// The checkout ended `took` after it began, with a connection or
/// (`failed`) without (`ConnectionCheckedOut`, `ConnectionCheckoutFailed`).
pub(crate) fn checkout_ended(took: Duration, failed: bool) {
    let _ = ATTEMPTS.try_with(|a| a.borrow_mut().ended(took, failed));
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

    fn addr(s: &str) -> ServerAddress {
        ServerAddress::parse(s).unwrap()
    }

    #[test]
    fn the_book_keeps_each_checkout_and_the_newest_four() {
        let t0 = Instant::now();
        let ms = Duration::from_millis(1);
        let mut a = Attempts::default();
        assert_eq!((a.count(), a.last()), (0, None));
        a.started(7, t0);
        a.ended(ms, false);
        a.started(8, t0 + 5 * ms);
        a.ended(2 * ms, true);
        assert_eq!(a.count(), 2);
        assert_eq!(
            a.get(0),
            Some(Attempt {
                started: t0,
                sent: t0 + ms,
                member: 7,
                checkout_failed: false
            })
        );
        let last = a.last().unwrap();
        assert_eq!((last.member, last.sent), (8, t0 + 7 * ms));
        assert!(last.checkout_failed);
        for i in 0..4 {
            a.started(10 + i, t0);
        }
        assert_eq!(a.count(), 6);
        assert_eq!(a.get(1), None, "the oldest are gone");
        assert_eq!(a.get(2).unwrap().member, 10);
        assert_eq!(a.last().unwrap().member, 13);
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
        let kind = crate::mongo::classify(&io);
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
