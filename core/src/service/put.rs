//! The put path: what a put waits for, and the status it ends with.

use crate::time::Instant;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;
use crate::error::WaitError;
use crate::log::{MessageLog, Offset, PutResult, PutStatus};
use crate::{BrokerRole, FlushDiskType};

/// A put whose message is appended and which may still wait for the disk and for slaves: the
/// part of `MasterHandle::put` both adapters share. The adapter starts it, runs the waits it
/// asks for side by side (they do not depend on each other), and finishes it with their outcomes.
#[derive(Debug)]
#[must_use]
pub struct PendingPut {
    appended: PutResult,
    /// Wait until the message is durable, up to `sync_flush_timeout` (SYNC_FLUSH).
    pub flush: bool,
    /// Wait for the slaves the ack policy needs, up to `slave_timeout` (SYNC_MASTER). When
    /// false, the adapter still wakes its master task, so the frame goes out at once.
    pub replicate: bool,
}

impl PendingPut {
    /// Appends `message` unless the service `refused` puts (stopping, or fenced). A put that
    /// ends here (refused, or the log did not store it) is returned as `Err` with its result.
    pub fn start<L: MessageLog>(
        config: &MasterServiceConfig,
        log: &L,
        message: L::Message,
        refused: bool,
    ) -> Result<Self, PutResult> {
        if refused {
            return Err(PutResult::refused(PutStatus::ServiceNotAvailable));
        }
        let appended = log.put(message);
        if appended.status != PutStatus::PutOk {
            return Err(appended);
        }
        Ok(Self {
            appended,
            flush: config.flush_disk_type == FlushDiskType::SyncFlush,
            replicate: config.role == BrokerRole::SyncMaster,
        })
    }

    /// One past the message's last byte: what both waits wait for.
    pub fn end(&self) -> Offset {
        self.appended.end()
    }

    /// The put's result from the outcomes of the waits it asked for (`None` for a wait it did
    /// not ask for; `Some(true)` when the bytes became durable in time).
    pub fn finish(self, flushed: Option<bool>, replicated: Option<Result<Offset, WaitError>>) -> PutResult {
        PutResult { status: put_status(self.appended.status, flushed, replicated), ..self.appended }
    }
}

/// The status a put ends with, from its stages, in RocketMQ's precedence: a refused append
/// stands; a flush failure overrides success; a replication failure overrides that.
///
/// `flushed` is `None` when the put did not wait for the disk, `Some(true)` when the bytes
/// became durable in time. `replicated` is `None` when it did not wait for slaves.
pub fn put_status(
    appended: PutStatus,
    flushed: Option<bool>,
    replicated: Option<Result<Offset, WaitError>>,
) -> PutStatus {
    if appended != PutStatus::PutOk {
        return appended;
    }
    let mut status = PutStatus::PutOk;
    if flushed == Some(false) {
        status = PutStatus::FlushDiskTimeout;
    }
    match replicated {
        None | Some(Ok(_)) => status,
        Some(Err(WaitError::SlaveNotAvailable)) => PutStatus::SlaveNotAvailable,
        Some(Err(WaitError::InSyncReplicasNotEnough)) => PutStatus::InSyncReplicasNotEnough,
        Some(Err(WaitError::Timeout)) => PutStatus::FlushSlaveTimeout,
        Some(Err(WaitError::Cancelled)) => PutStatus::ServiceNotAvailable,
    }
}

impl PendingPut {
    /// The command that makes the master task wait for this put's slaves, until `now` plus
    /// `config.slave_timeout`; `reply` gets the outcome, which goes to [`finish`](Self::finish).
    pub fn wait_command<C, W, S>(
        &self,
        now: Instant,
        config: &MasterServiceConfig,
        reply: W,
    ) -> MasterCommand<C, W, S> {
        MasterCommand::Wait { offset: self.end(), deadline: now + config.slave_timeout, reply }
    }
}

/// Whether a master service takes puts: the one gate a service's handles and its master task
/// share. A handle asks it before every put; the master task publishes the driver's fence into
/// it after every turn ([`MasterTask`]), and a shutdown closes it for good.
#[derive(Debug, Default)]
pub struct PutGate {
    stopping: AtomicBool,
    fenced: AtomicBool,
}

impl PutGate {
    /// A gate for a service whose driver fences puts now or not.
    pub fn new(fenced: bool) -> Self {
        Self { stopping: AtomicBool::new(false), fenced: AtomicBool::new(fenced) }
    }

    /// Whether puts are refused now: the service is stopping, or the driver fences puts.
    pub fn refuses(&self) -> bool {
        self.stopping.load(Ordering::Acquire) || self.fenced.load(Ordering::Acquire)
    }

    /// Whether [`stop`](Self::stop) was called.
    pub fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::Acquire)
    }

    /// Refuses every later put (service shutdown).
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Release);
    }

    /// Publishes the driver's fence: puts are refused while there is one.
    pub fn publish(&self, fence: Option<&Fence>) {
        self.fenced.store(fence.is_some(), Ordering::Release);
    }

    /// Starts a put through the gate: refused (`ServiceNotAvailable`) when the gate is closed,
    /// else appended as [`PendingPut::start`] does.
    pub fn start<L: MessageLog>(
        &self,
        config: &MasterServiceConfig,
        log: &L,
        message: L::Message,
    ) -> Result<PendingPut, PutResult> {
        PendingPut::start(config, log, message, self.refuses())
    }
}
