//! Waiting for replicas: what the adapters' `MasterHandle::wait_in_sync` returns.

use std::ops::ControlFlow;
use std::time::{Duration, Instant};

use crate::service::MasterStatus;

/// Why a wait for in-sync slaves ended without them.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InSyncError {
    /// Fewer slaves than wanted were in sync when the time ran out.
    #[error("{in_sync} of the {wanted} slave(s) waited for were in sync when the wait timed out")]
    Timeout {
        /// Slaves waited for.
        wanted: usize,
        /// Slaves in sync at the end.
        in_sync: usize,
    },
    /// The master service stopped.
    #[error("the master service stopped")]
    Stopped,
}

/// Slaves of `status` that are in sync (connected and within `ha_max_gap_not_in_sync`).
pub fn in_sync_slaves(status: &MasterStatus) -> usize {
    status.slaves.iter().filter(|s| s.in_sync).count()
}

/// A wait for in-sync slaves, as the adapters' `MasterHandle::wait_in_sync` runs it: it looks
/// at a status, then sleeps for as long as [`check`](Self::check) says, until enough slaves are
/// in sync or the time is up.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct InSyncWait {
    wanted: usize,
    deadline: Instant,
}

impl InSyncWait {
    /// How often a wait looks at the master's status.
    pub const CHECK_EVERY: Duration = Duration::from_millis(5);

    /// A wait for `wanted` slaves that gives up `timeout` after `now`.
    pub fn new(now: Instant, wanted: usize, timeout: Duration) -> Self {
        Self { wanted, deadline: now + timeout }
    }

    /// Judges `status` taken at `now`: `Break` with it when enough slaves are in sync,
    /// `Continue` with how long to sleep before the next look, or the timeout.
    pub fn check(
        &self,
        now: Instant,
        status: MasterStatus,
    ) -> Result<ControlFlow<MasterStatus, Duration>, InSyncError> {
        let in_sync = in_sync_slaves(&status);
        if in_sync >= self.wanted {
            return Ok(ControlFlow::Break(status));
        }
        if now >= self.deadline {
            return Err(InSyncError::Timeout { wanted: self.wanted, in_sync });
        }
        Ok(ControlFlow::Continue(Self::CHECK_EVERY.min(self.deadline - now)))
    }
}
