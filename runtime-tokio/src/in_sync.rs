//! `MasterHandle::wait_in_sync`.

use std::time::Duration;

use logship_core::MessageLog;
use logship_core::service::InSyncError;
use logship_core::service::MasterStatus;
use logship_core::service::in_sync_slaves;

use crate::MasterHandle;

/// How often a wait looks at the master's status.
const CHECK_EVERY: Duration = Duration::from_millis(5);

impl<L: MessageLog> MasterHandle<L> {
    /// Waits until at least `slaves` slaves are in sync (connected, and within
    /// `ha_max_gap_not_in_sync` of the master's end), and returns the status that showed it.
    /// Looks every few milliseconds; gives up after `timeout`.
    pub async fn wait_in_sync(&self, slaves: usize, timeout: Duration) -> Result<MasterStatus, InSyncError> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let status = self.status().await.ok_or(InSyncError::Stopped)?;
            let in_sync = in_sync_slaves(&status);
            if in_sync >= slaves {
                return Ok(status);
            }
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(InSyncError::Timeout { wanted: slaves, in_sync });
            }
            tokio::time::sleep(CHECK_EVERY.min(deadline - now)).await;
        }
    }
}
