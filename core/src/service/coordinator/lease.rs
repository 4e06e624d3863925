//! The lease guard: a master stops acknowledging before its lease can expire.
//!
//! A broker's liveness is a lease in the coordinator, renewed in the background. A renewal
//! request sent at `sent_at` and answered with a TTL means the lease was refreshed some time
//! **after** `sent_at`, so it cannot expire before `sent_at + ttl` on the coordinator's clock.
//! The guard stays open until `sent_at + ttl - margin`: the margin absorbs the difference
//! between the two clocks' rates and the time between checking the guard and a put's
//! acknowledgement leaving the broker. A new master is only elected once the old master's lease
//! has expired, so the old one has stopped acknowledging by then.

use std::sync::Arc;
use std::time::Duration;

use crate::time::Instant;

/// The lease settings of a broker.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseConfig {
    /// The lease's time to live (etcd grants whole seconds; the guard uses what it granted).
    pub ttl: Duration,
    /// How long before the lease could expire the guard closes.
    pub margin: Duration,
    /// How often the lease is renewed.
    pub renew_interval: Duration,
}

impl Default for LeaseConfig {
    /// A 3 s lease, renewed every second, the guard closing 500 ms before it could expire.
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(3),
            margin: Duration::from_millis(500),
            renew_interval: Duration::from_secs(1),
        }
    }
}

/// Lease settings that cannot keep a master's guard open, or cannot close it in time.
#[derive(thiserror::Error, Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaseConfigError {
    /// The TTL is zero or not whole seconds.
    #[error("lease TTL {0:?} is not a positive whole number of seconds")]
    Ttl(Duration),
    /// The margin is zero: the guard would close only as the lease expires.
    #[error("lease margin must be above zero")]
    ZeroMargin,
    /// The margin is not below the TTL: the guard would never open.
    #[error("lease margin {margin:?} is not below the lease TTL {ttl:?}")]
    MarginTooLarge {
        /// The margin.
        margin: Duration,
        /// The TTL.
        ttl: Duration,
    },
    /// Renewals are not frequent enough to keep the guard open between them.
    #[error("lease renew interval {interval:?} is not below TTL minus margin ({open:?})")]
    RenewTooSlow {
        /// The renew interval.
        interval: Duration,
        /// How long one renewal keeps the guard open.
        open: Duration,
    },
}

impl LeaseConfig {
    /// Checks the settings against each other.
    pub fn validate(&self) -> Result<(), LeaseConfigError> {
        if self.ttl.is_zero() || self.ttl.subsec_nanos() != 0 {
            return Err(LeaseConfigError::Ttl(self.ttl));
        }
        if self.margin.is_zero() {
            return Err(LeaseConfigError::ZeroMargin);
        }
        if self.margin >= self.ttl {
            return Err(LeaseConfigError::MarginTooLarge { margin: self.margin, ttl: self.ttl });
        }
        let open = self.ttl - self.margin;
        if self.renew_interval.is_zero() || self.renew_interval >= open {
            return Err(LeaseConfigError::RenewTooSlow { interval: self.renew_interval, open });
        }
        Ok(())
    }
}

/// Whether a broker may acknowledge puts, from its lease's renewals. Closed until the first
/// renewal; closed for good once the lease is reported lost.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseGuard {
    margin: Duration,
    open_until: Option<Instant>,
    lost: bool,
}

/// A copy of a guard's state, for a caller that checks it without holding it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseSnapshot {
    /// The instant the guard closes (`None`: never opened).
    pub open_until: Option<Instant>,
    /// The lease is gone.
    pub lost: bool,
}

impl LeaseSnapshot {
    /// Whether acknowledging at `now` is allowed.
    pub fn is_open(&self, now: Instant) -> bool {
        !self.lost && self.open_until.is_some_and(|until| now < until)
    }
}

impl LeaseGuard {
    /// A closed guard that will close `margin` before the lease could expire.
    pub fn new(margin: Duration) -> Self {
        Self { margin, open_until: None, lost: false }
    }

    /// A renewal sent at `sent_at` was answered: the lease lives at least until
    /// `sent_at + ttl`. A zero TTL (etcd's answer for a lease it no longer has) marks the lease
    /// lost. An answer to an older request never moves the closing instant back.
    pub fn renewed(&mut self, sent_at: Instant, ttl: Duration) {
        if ttl.is_zero() {
            self.lost();
            return;
        }
        if self.lost {
            return;
        }
        let until = sent_at + ttl.saturating_sub(self.margin);
        if ttl > self.margin && self.open_until.is_none_or(|old| until > old) {
            self.open_until = Some(until);
        }
    }

    /// The lease is gone (revoked, expired, or refused by the coordinator): closed for good.
    pub fn lost(&mut self) {
        self.lost = true;
        self.open_until = None;
    }

    /// Whether acknowledging at `now` is allowed.
    pub fn is_open(&self, now: Instant) -> bool {
        self.snapshot().is_open(now)
    }

    /// The instant the guard closes unless renewed (`None`: closed, or never opened).
    pub fn open_until(&self) -> Option<Instant> {
        self.open_until
    }

    /// Whether the lease was reported lost.
    pub fn is_lost(&self) -> bool {
        self.lost
    }

    /// A copy of the state.
    pub fn snapshot(&self) -> LeaseSnapshot {
        LeaseSnapshot { open_until: self.open_until, lost: self.lost }
    }
}

/// Whether a master may take and acknowledge puts now, as its broker's lease says: the put path
/// asks it before a put is stored and again right before the put is acknowledged
/// ([`MasterControllerConfig::lease`](crate::service::MasterControllerConfig::lease)), so
/// every user of the service layer gets the fence, whatever answers its clients (the binary's
/// HTTP API, a RocketMQ remoting server, an embedder, the simulator).
///
/// It answers on the clock the lease's renewals are stamped with (a [`LeaseGuard`] is judged
/// against instants of that clock), which need not be the service's own: whoever keeps the
/// lease reads that clock, the service layer never does. Compared by identity.
#[derive(Clone)]
pub struct LeaseFence(Arc<dyn Fn() -> bool + Send + Sync>);

impl LeaseFence {
    /// A fence that is open while `open` says so.
    pub fn new(open: impl Fn() -> bool + Send + Sync + 'static) -> Self {
        Self(Arc::new(open))
    }

    /// Whether puts may be taken and acknowledged now.
    pub fn is_open(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for LeaseFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LeaseFence(..)")
    }
}

impl PartialEq for LeaseFence {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for LeaseFence {}
