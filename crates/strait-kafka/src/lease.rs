//! A group member's right to write: granted by the coordinator's answers, lapsing by the clock.
//!
//! The coordinator removes a member that has been silent for its session timeout and hands what
//! it owned to another member. A member cannot learn of its removal while it cannot reach the
//! coordinator, or while its process is stopped (SIGSTOP, a long GC-like pause of the host): when
//! it goes on, its next write could land after its successor started. So a member writes only
//! under a lease: each answer of the coordinator that says it still belongs to the group renews
//! the lease to the moment the request was *sent* plus the session timeout, less a margin. The
//! coordinator counts the session from when it *received* that request, so the lease always
//! ends before the coordinator can remove the member. The producer checks the lease against the
//! monotonic clock just before each request it writes ([`crate::produce`]); a lapsed lease fails
//! the write with [`crate::Error::LeaseLapsed`], which is final for that writer (as fencing is).
//!
//! A lease that lapsed without being revoked may be renewed again: a member whose coordinator
//! holds its JoinGroup (a rebalance waits up to its timeout for a slow member) hears nothing
//! meanwhile, and its lease lapses; the coordinator keeps a member that waits in a join, and
//! the answer that ends the rebalance renews the lease. Writers wait for that
//! ([`Lease::held`]) rather than fail, so their work resumes where it stood.
//!
//! A stopped process's monotonic clock runs on, so a process resumed after its session timeout
//! finds its lease lapsed before it writes a byte. Requests already written to the socket before
//! the lease lapsed may still land: the margin is there for them.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The share of the session timeout a lease keeps in hand for requests already on their way.
const MARGIN_DIVISOR: u32 = 5;

/// A member's lease, shared by everything that writes for it. Clones share one lease.
#[derive(Clone)]
pub struct Lease {
    inner: Arc<Inner>,
}

struct Inner {
    /// The origin of `until`.
    origin: Instant,
    /// Nanoseconds after `origin` until which writes are allowed; 0: never granted;
    /// [`REVOKED`]: revoked for good.
    until: AtomicU64,
    /// Woken by every renewal and by the revocation.
    changed: tokio::sync::Notify,
}

/// `until` of a revoked lease.
const REVOKED: u64 = u64::MAX;

impl Lease {
    /// A lease not granted yet: nothing may be written under it until [`Lease::renew`].
    pub fn new() -> Self {
        Self {
            inner: Arc::new(Inner {
                origin: Instant::now(),
                until: AtomicU64::new(0),
                changed: tokio::sync::Notify::new(),
            }),
        }
    }

    /// The coordinator answered a request sent at `sent` that says this member belongs to the
    /// group: writes are allowed until `sent + session_timeout`, less a fifth of it. A renewal
    /// never shortens a lease that a later answer gave, and never revives a revoked one.
    pub fn renew(&self, sent: Instant, session_timeout: Duration) {
        let margin = session_timeout / MARGIN_DIVISOR;
        let until = sent + session_timeout.saturating_sub(margin);
        let nanos = until
            .saturating_duration_since(self.inner.origin)
            .as_nanos()
            .clamp(1, u128::from(REVOKED - 1)) as u64;
        let _ = self
            .inner
            .until
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |now| {
                (now != REVOKED && now < nanos).then_some(nanos)
            });
        self.inner.changed.notify_waiters();
    }

    /// The member lost its place (or stops): nothing more is ever written under this lease.
    /// A member that joins again writes under a new one, so that what still runs under this
    /// one cannot write again when the new one is granted.
    pub fn revoke(&self) {
        self.inner.until.store(REVOKED, Ordering::SeqCst);
        self.inner.changed.notify_waiters();
    }

    /// Waits until writes are allowed, or until the lease is revoked (then nothing will ever
    /// be written under it): at once when either holds already.
    pub async fn held(&self) {
        loop {
            let changed = self.inner.changed.notified();
            tokio::pin!(changed);
            // Registered before looking, so that a renewal in between is not missed.
            changed.as_mut().enable();
            if self.is_valid() || self.is_revoked() {
                return;
            }
            changed.await;
        }
    }

    /// Whether [`Lease::revoke`] was called.
    pub fn is_revoked(&self) -> bool {
        self.inner.until.load(Ordering::SeqCst) == REVOKED
    }

    /// How long writes are still allowed; `None` when the lease lapsed or was revoked.
    pub fn remaining(&self) -> Option<Duration> {
        let until = self.inner.until.load(Ordering::SeqCst);
        if until == 0 || until == REVOKED {
            return None;
        }
        let now = Instant::now()
            .saturating_duration_since(self.inner.origin)
            .as_nanos();
        let left = u128::from(until).checked_sub(now)?;
        (left > 0).then(|| Duration::from_nanos(left as u64))
    }

    /// Whether writes are allowed now.
    pub fn is_valid(&self) -> bool {
        self.remaining().is_some()
    }

    /// `Ok` while writes are allowed; else the error every write under this lease fails with.
    pub fn check(&self) -> crate::Result<()> {
        if self.is_valid() {
            Ok(())
        } else {
            Err(crate::Error::LeaseLapsed)
        }
    }
}

impl Default for Lease {
    fn default() -> Self {
        Self::new()
    }
}

/// Two handles are equal when they share one lease.
impl PartialEq for Lease {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl Eq for Lease {}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("remaining", &self.remaining())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_is_granted_by_an_answer_and_lapses_before_the_session_does() {
        let lease = Lease::new();
        assert!(!lease.is_valid(), "not granted yet");
        assert!(matches!(lease.check(), Err(crate::Error::LeaseLapsed)));

        let session = Duration::from_secs(10);
        lease.renew(Instant::now(), session);
        let left = lease.remaining().expect("granted");
        assert!(left <= session - session / 5, "{left:?}");
        assert!(left > Duration::from_secs(7), "{left:?}");

        // An answer to an older request does not shorten what a newer one gave.
        lease.renew(Instant::now() - Duration::from_secs(5), session);
        assert!(lease.remaining().unwrap() > Duration::from_secs(7));

        // An answer to a request sent longer ago than the session (less the margin) grants
        // nothing: the coordinator may have removed the member since.
        let stale = Lease::new();
        stale.renew(Instant::now() - Duration::from_secs(9), session);
        assert!(!stale.is_valid());

        let shared = lease.clone();
        assert_eq!(shared, lease);
        assert_ne!(Lease::new(), lease);
        lease.revoke();
        assert!(!shared.is_valid(), "clones share one lease");
        shared.renew(Instant::now(), session);
        assert!(!lease.is_valid(), "a revoked lease is never renewed");
        assert!(lease.is_revoked());
    }
}
