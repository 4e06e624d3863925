//! Waiting for replicas: what the adapters' `MasterHandle::wait_in_sync` returns.

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
