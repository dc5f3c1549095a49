//! The book of a driver call's attempts: each connection checkout the
//! driver's pool makes for it. The published driver checks a connection
//! out for every attempt of an operation and emits
//! `ConnectionCheckoutStarted` before and `ConnectionCheckedOut` (or
//! `ConnectionCheckoutFailed`) after, in the operation's own task, through
//! a callback it calls inline. A call run inside [`watch`] has a
//! task-local book; the pool handler ([`checkout_started`],
//! [`checkout_ended`]) writes into the book of the task it runs in, and
//! does nothing (no allocation, one thread-local read) where none is set:
//! the driver's own tasks, the audit, the probes. What the attempts mean
//! for the write outage is [`crate::failover::attempts`]'s business.

use std::cell::RefCell;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::time::{Duration, Instant};

use mongodb::options::ServerAddress;
use tokio::task::futures::TaskLocalFuture;

tokio::task_local! {
    /// The book of the current call; `None`: its attempts are not read.
    static ATTEMPTS: RefCell<Option<Attempts>>;
}

/// Checkouts kept per request (the newest): a retryable write is sent at
/// most twice, so one more than that is room to spare.
const KEEP: usize = 4;

/// A member, as the pool's and the topology's events name it: a hash of
/// its address, so a checkout records it without copying the host name.
pub(crate) fn member_key(address: &ServerAddress) -> u64 {
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

/// Runs `request` with a book of its attempts when `on` (a write): the
/// checkouts it makes land in it ([`taken`] reads it back, finished or
/// not). Off, a checkout costs no clock read and no hash.
pub(crate) fn watch<F: std::future::Future>(
    request: F,
    on: bool,
) -> TaskLocalFuture<RefCell<Option<Attempts>>, F> {
    ATTEMPTS.scope(RefCell::new(on.then(Attempts::default)), request)
}

/// The attempts of a request run by [`watch`], even one dropped at its
/// deadline before it returned.
pub(crate) fn taken<F: std::future::Future>(
    request: Pin<&mut TaskLocalFuture<RefCell<Option<Attempts>>, F>>,
) -> Attempts {
    request
        .take_value()
        .and_then(RefCell::into_inner)
        .unwrap_or_default()
}

/// Forgets the attempts so far of the current call: the driver
/// refused to send it before any attempt (a deployment without sessions),
/// and it is sent again from the start.
pub(crate) fn forget() {
    let _ = ATTEMPTS.try_with(|a| {
        if let Some(a) = a.borrow_mut().as_mut() {
            *a = Attempts::default();
        }
    });
}

/// The pool began a checkout for `address` (`ConnectionCheckoutStarted`).
pub(crate) fn checkout_started(address: &ServerAddress) {
    let _ = ATTEMPTS.try_with(|a| {
        if let Some(a) = a.borrow_mut().as_mut() {
            a.started(member_key(address), Instant::now());
        }
    });
}

/// The checkout ended `took` after it began, with a connection or
/// (`failed`) without (`ConnectionCheckedOut`, `ConnectionCheckoutFailed`).
pub(crate) fn checkout_ended(took: Duration, failed: bool) {
    let _ = ATTEMPTS.try_with(|a| {
        if let Some(a) = a.borrow_mut().as_mut() {
            a.ended(took, failed);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
