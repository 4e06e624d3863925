//! The store's view of the world outside the log: the clock and the disk usage. Both are
//! injectable, so retention and timestamps can be tested without waiting or filling a disk.

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Wall-clock time, as the store uses it: message store timestamps, segment ages and the
/// `delete_when` hour.
pub trait Clock: Send + Sync + 'static {
    /// Milliseconds since the Unix epoch.
    fn now_millis(&self) -> i64;

    /// The local hour of day (0..=23) at `millis`, for `delete_when`.
    fn hour_of_day(&self, millis: i64) -> u32 {
        crate::mmap::local_hour(millis).unwrap_or(0)
    }
}

/// The system clock and the local time zone.
#[derive(Copy, Clone, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_millis(&self) -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
    }
}

/// How full the disk holding the store is.
pub trait DiskUsage: Send + Sync + 'static {
    /// The used fraction (0.0 to 1.0) of the file system holding `path`.
    fn used_ratio(&self, path: &Path) -> io::Result<f64>;
}

/// Asks the operating system (`statvfs`), computing the ratio as RocketMQ does.
#[derive(Copy, Clone, Debug, Default)]
pub struct OsDiskUsage;

impl DiskUsage for OsDiskUsage {
    fn used_ratio(&self, path: &Path) -> io::Result<f64> {
        crate::mmap::disk_used_ratio(path)
    }
}

/// The clock and disk-usage source a store runs against.
#[derive(Clone)]
pub struct StoreEnv {
    /// The clock.
    pub clock: Arc<dyn Clock>,
    /// The disk-usage source.
    pub disk: Arc<dyn DiskUsage>,
}

impl Default for StoreEnv {
    fn default() -> Self {
        Self { clock: Arc::new(SystemClock), disk: Arc::new(OsDiskUsage) }
    }
}

impl fmt::Debug for StoreEnv {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StoreEnv").finish_non_exhaustive()
    }
}
