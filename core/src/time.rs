//! Time as the core sees it.
//!
//! The core never reads a clock. Every state machine takes `now` as an [`Instant`]: a point on a
//! monotonic timeline whose origin the caller chose. A runtime maps its clock onto that timeline
//! with an [`Origin`] (one clock read, in the adapter); a simulator or a test simply counts from
//! [`Instant::ZERO`]. Only differences between instants mean anything.
//!
//! This module is the one place in the core that names `std::time::Instant` (core's
//! `clippy.toml` refuses it everywhere else), and it never reads it.
#![allow(clippy::disallowed_types)]

use std::fmt;
use std::ops::{Add, AddAssign, Sub};
use std::time::Duration;

/// A point in time: the time elapsed since the caller's origin.
///
/// Ordered and saturating like `std::time::Instant`: adding never panics (it saturates at the
/// far future) and subtracting a later instant gives zero.
#[derive(Copy, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant(Duration);

impl Instant {
    /// The origin of the timeline.
    pub const ZERO: Self = Self(Duration::ZERO);
    /// The farthest representable instant.
    pub const MAX: Self = Self(Duration::MAX);

    /// The instant `elapsed` after the origin.
    pub const fn from_origin(elapsed: Duration) -> Self {
        Self(elapsed)
    }

    /// The instant `ms` milliseconds after the origin.
    pub const fn from_millis(ms: u64) -> Self {
        Self(Duration::from_millis(ms))
    }

    /// The instant `ns` nanoseconds after the origin.
    pub const fn from_nanos(ns: u64) -> Self {
        Self(Duration::from_nanos(ns))
    }

    /// The time elapsed from the origin to this instant.
    pub const fn since_origin(self) -> Duration {
        self.0
    }

    /// The time from `earlier` to this instant, or zero if `earlier` is later.
    pub fn saturating_duration_since(self, earlier: Self) -> Duration {
        self.0.saturating_sub(earlier.0)
    }

    /// The time from `earlier` to this instant, or `None` if `earlier` is later.
    pub fn checked_duration_since(self, earlier: Self) -> Option<Duration> {
        self.0.checked_sub(earlier.0)
    }

    /// This instant plus `d`, or `None` past the farthest representable instant.
    pub fn checked_add(self, d: Duration) -> Option<Self> {
        self.0.checked_add(d).map(Self)
    }

    /// This instant minus `d`, or `None` before the origin.
    pub fn checked_sub(self, d: Duration) -> Option<Self> {
        self.0.checked_sub(d).map(Self)
    }
}

impl Add<Duration> for Instant {
    type Output = Self;

    /// Saturates at [`Instant::MAX`].
    fn add(self, d: Duration) -> Self {
        Self(self.0.saturating_add(d))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Self;

    /// Saturates at [`Instant::ZERO`].
    fn sub(self, d: Duration) -> Self {
        Self(self.0.saturating_sub(d))
    }
}

impl Sub for Instant {
    type Output = Duration;

    /// Saturates at zero, like [`Instant::saturating_duration_since`].
    fn sub(self, earlier: Self) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{:?}", self.0)
    }
}

/// Maps a runtime's `std::time::Instant`s onto the core's timeline.
///
/// The adapter reads its clock once to make the origin, then converts every reading; the core
/// itself never reads a clock. Readings before the origin map to [`Instant::ZERO`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Origin(std::time::Instant);

impl Origin {
    /// A timeline whose [`Instant::ZERO`] is `at`.
    pub const fn new(at: std::time::Instant) -> Self {
        Self(at)
    }

    /// The core instant for the runtime's `at`.
    pub fn instant(&self, at: std::time::Instant) -> Instant {
        Instant(at.saturating_duration_since(self.0))
    }

    /// The runtime's instant for the core's `at` (for setting timers).
    pub fn to_std(&self, at: Instant) -> std::time::Instant {
        self.0.checked_add(at.0).unwrap_or_else(|| far_future(self.0))
    }
}

/// An instant a century after `from` (or as far as the platform allows): a timer that never fires.
fn far_future(from: std::time::Instant) -> std::time::Instant {
    let mut d = Duration::from_secs(100 * 365 * 24 * 3600);
    loop {
        if let Some(t) = from.checked_add(d) {
            return t;
        }
        d /= 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_panicking() {
        let t = Instant::from_millis(5);
        assert_eq!(t - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(t.checked_sub(Duration::from_millis(6)), None);
        assert_eq!(t.checked_duration_since(Instant::from_millis(6)), None);
        assert_eq!(t + Duration::from_millis(1), Instant::from_millis(6));
        assert!(Instant::from_nanos(1) > Instant::ZERO);
    }
}
