//! Waiting for replicas: what the adapters' `MasterHandle::wait_in_sync` returns.

use std::time::Duration;

use crate::time::Instant;

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

/// A wait for in-sync slaves, as the adapters' `MasterHandle::wait_in_sync` asks the master
/// task for one ([`TaskCommand::InSync`](crate::service::TaskCommand::InSync)): the task looks
/// at its status after every turn, so the wait ends as soon as enough slaves are in sync,
/// without polling.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct InSyncWait {
    wanted: usize,
    deadline: Instant,
}

impl InSyncWait {
    /// A wait for `wanted` slaves that gives up `timeout` after `now`.
    pub fn new(now: Instant, wanted: usize, timeout: Duration) -> Self {
        Self { wanted, deadline: now + timeout }
    }

    /// When the wait gives up.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether the wait is over at `now` given `status`: enough slaves in sync, or time is up.
    pub fn is_over(&self, now: Instant, status: &MasterStatus) -> bool {
        in_sync_slaves(status) >= self.wanted || now >= self.deadline
    }

    /// The wait's result from the status it ended with.
    pub fn outcome(&self, status: MasterStatus) -> Result<MasterStatus, InSyncError> {
        let in_sync = in_sync_slaves(&status);
        if in_sync >= self.wanted {
            Ok(status)
        } else {
            Err(InSyncError::Timeout { wanted: self.wanted, in_sync })
        }
    }
}
