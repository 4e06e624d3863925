//! The put path: what a put waits for, and the status it ends with.

use crate::time::Instant;
use std::sync::atomic::{AtomicBool, Ordering};

use super::*;
use crate::error::WaitError;
use crate::log::{MessageLog, Offset, PutResult, PutStatus};
use crate::service::coordinator::LeaseFence;
use crate::{BrokerRole, FlushDiskType};

/// A put whose message is appended and which may still wait for the disk and for slaves: the
/// part of `MasterHandle::put` both adapters share. The adapter starts it, runs the waits it
/// asks for side by side (they do not depend on each other), and finishes it with their outcomes.
#[derive(Debug)]
#[must_use]
pub struct PendingPut {
    appended: PutResult,
    /// Asked again before the put is acknowledged.
    lease: Option<LeaseFence>,
    /// Wait until the message is durable, up to the log's `sync_flush_timeout` (its
    /// [`flush_settings`](MessageLog::flush_settings) say SYNC_FLUSH).
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
            lease: None,
            flush: log.flush_settings().flush_disk_type == FlushDiskType::SyncFlush,
            replicate: config.role == BrokerRole::SyncMaster,
        })
    }

    /// One past the message's last byte: what both waits wait for.
    pub fn end(&self) -> Offset {
        self.appended.end()
    }

    /// The put's result from the outcomes of the waits it asked for (`None` for a wait it did
    /// not ask for; `Some(true)` when the bytes became durable in time). A put that would be
    /// acknowledged is not when the service's lease has closed meanwhile
    /// ([`PutStatus::LeaseLostAfterStore`]).
    pub fn finish(self, flushed: Option<bool>, replicated: Option<Result<Offset, WaitError>>) -> PutResult {
        let mut status = put_status(self.appended.status, flushed, replicated);
        // Fencing: checked right before the acknowledgement leaves the service.
        if status == PutStatus::PutOk
            && self.lease.as_ref().is_some_and(|lease| !lease.is_open())
            && !crate::planted::planted(crate::planted::Plant::LeaseFenceRemoved)
        {
            status = PutStatus::LeaseLostAfterStore;
        }
        PutResult { status, ..self.appended }
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
/// it after every turn ([`MasterTask`]), and a shutdown closes it for good. With a lease
/// ([`MasterControllerConfig::lease`]) it also refuses puts while the lease is closed, and hands
/// the lease to each put, which asks it again before it is acknowledged.
#[derive(Debug, Default)]
pub struct PutGate {
    stopping: AtomicBool,
    fenced: AtomicBool,
    lease: Option<LeaseFence>,
}

impl PutGate {
    /// A gate for a service whose driver fences puts now or not.
    pub fn new(fenced: bool) -> Self {
        Self { stopping: AtomicBool::new(false), fenced: AtomicBool::new(fenced), lease: None }
    }

    /// The gate also fenced by `lease` (see [`PendingPut::finish`]).
    pub fn with_lease(self, lease: Option<LeaseFence>) -> Self {
        Self { lease, ..self }
    }

    /// Whether puts are refused now: the service is stopping, or the driver fences puts.
    pub fn refuses(&self) -> bool {
        self.stopping.load(Ordering::Acquire) || self.fenced.load(Ordering::Acquire)
    }

    /// Whether the service's lease is closed now (never, without a lease).
    pub fn lease_closed(&self) -> bool {
        self.lease.as_ref().is_some_and(|lease| !lease.is_open())
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

    /// Starts a put through the gate: refused (`LeaseLost`) while the lease is closed, refused
    /// (`ServiceNotAvailable`) when the gate is closed, else appended as [`PendingPut::start`]
    /// does, the put fenced by the lease until it is acknowledged.
    pub fn start<L: MessageLog>(
        &self,
        config: &MasterServiceConfig,
        log: &L,
        message: L::Message,
    ) -> Result<PendingPut, PutResult> {
        if self.lease_closed() && !crate::planted::planted(crate::planted::Plant::LeaseFenceRemoved) {
            return Err(PutResult::refused(PutStatus::LeaseLost));
        }
        let pending = PendingPut::start(config, log, message, self.refuses())?;
        Ok(PendingPut { lease: self.lease.clone(), ..pending })
    }
}

/// The replication waits of SYNC_MASTER puts on their way from the service's handles to its
/// master task, which takes them all at the start of each turn: one lock per put instead of
/// one channel message per put, and one wake-up of the task for many puts.
///
/// A put wakes the task only when the task asked for it at the end of its last turn, which it
/// does unless it is sure to wake soon anyway: it has waits pending (the first deadline is its
/// timer) and every streaming connection has a write under way (whose `Sent` wakes it), so the
/// waits of the puts meanwhile go out in the next frame, all at once. Deadlines are taken under
/// the lock, so the queue is in deadline order and the task's timer covers every wait in it.
#[derive(Debug)]
pub struct WaitQueue<W> {
    inner: std::sync::Mutex<Queued<W>>,
}

#[derive(Debug)]
struct Queued<W> {
    waits: Vec<QueuedWait<W>>,
    /// The next push wakes the task.
    wake: bool,
    /// The task stopped: pushes are refused.
    closed: bool,
}

/// A replication wait in a [`WaitQueue`].
#[derive(Debug)]
pub struct QueuedWait<W> {
    /// The put's end offset.
    pub offset: Offset,
    /// When to give up.
    pub deadline: Instant,
    /// Where the outcome goes.
    pub reply: W,
}

impl<W> Default for WaitQueue<W> {
    fn default() -> Self {
        Self { inner: std::sync::Mutex::new(Queued { waits: Vec::new(), wake: true, closed: false }) }
    }
}

impl<W> WaitQueue<W> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queued<W>> {
        // Nothing panics while holding the lock; a poisoned queue is still consistent.
        self.inner.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues the wait of a put ending at `offset`, until `deadline()` (read under the lock).
    /// `Ok(true)`: wake the task now. `Err(reply)`: the task stopped, the wait is cancelled.
    pub fn push(&self, offset: Offset, deadline: impl FnOnce() -> Instant, reply: W) -> Result<bool, W> {
        let mut queued = self.lock();
        if queued.closed {
            return Err(reply);
        }
        let deadline = deadline();
        queued.waits.push(QueuedWait { offset, deadline, reply });
        Ok(std::mem::replace(&mut queued.wake, false))
    }

    /// Takes every queued wait, in the order they were queued.
    pub fn take(&self) -> Vec<QueuedWait<W>> {
        std::mem::take(&mut self.lock().waits)
    }

    /// Ends a turn: whether the next push should wake the task. When it should and waits were
    /// queued since the last [`take`](Self::take) (without waking it), returns them instead.
    pub fn rearm(&self, wake: bool) -> Vec<QueuedWait<W>> {
        let mut queued = self.lock();
        if wake && !queued.waits.is_empty() {
            return std::mem::take(&mut queued.waits);
        }
        queued.wake = wake;
        Vec::new()
    }

    /// Refuses every later push and returns what is queued (the task stops).
    pub fn close(&self) -> Vec<QueuedWait<W>> {
        let mut queued = self.lock();
        queued.closed = true;
        std::mem::take(&mut queued.waits)
    }

    /// Waits queued now.
    pub fn len(&self) -> usize {
        self.lock().waits.len()
    }

    /// Whether no wait is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
