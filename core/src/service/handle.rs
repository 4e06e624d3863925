//! The handles of a running service, written once for every adapter over its [`Runtime`]:
//! [`MasterHandle`] and [`SlaveHandle`] (each adapter names them for its runtime), and the
//! traits [`MasterService`] and [`SlaveService`] they implement, so that code that runs a
//! master or a slave on any adapter (an embedder's, or the tests that pair adapters) can hold
//! a `Box<dyn MasterService<L>>` or `Box<dyn SlaveService>`.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tracing::info;

use crate::autoswitch::BrokerId;
use crate::error::WaitError;
use crate::log::{MessageLog, PutResult};
use crate::service::future::ServiceFuture;
use crate::service::runtime::{MasterCommandOn, MasterTaskOn, SlaveCommandOn, WaitReply, join};
use crate::service::{
    AutoSwitchMasterStatus, InSyncError, InSyncWait, MasterCommand, MasterServiceConfig, MasterStatus,
    PutGate, Runtime, SlaveCommand, SlaveStatus, SyncStateSetError, TaskCommand, WaitQueue,
    check_sync_state_set,
};

/// A running master service, on whichever adapter.
pub trait MasterService<L: MessageLog>: Send + Sync {
    /// The address slaves connect to.
    fn local_addr(&self) -> SocketAddr;

    /// Appends `message`, then waits as the role requires (see [`MasterHandle::put`]).
    fn put(&self, message: L::Message) -> ServiceFuture<'_, PutResult>;

    /// A status snapshot; `None` once the service stopped.
    fn status(&self) -> ServiceFuture<'_, Option<MasterStatus>>;

    /// Stops the service (see [`MasterHandle::shutdown`]).
    fn shutdown(&self) -> ServiceFuture<'_, ()>;
}

/// A running slave service, on whichever adapter.
pub trait SlaveService: Send + Sync {
    /// A status snapshot; `None` once the service stopped.
    fn status(&self) -> ServiceFuture<'_, Option<SlaveStatus>>;

    /// Closes the connection, flushes the log and stops.
    fn shutdown(&self) -> ServiceFuture<'_, ()>;
}

struct MasterShared<L, R: Runtime> {
    log: Arc<L>,
    config: MasterServiceConfig,
    gate: Arc<PutGate>,
    waits: Arc<WaitQueue<WaitReply<R>>>,
    local_addr: SocketAddr,
    commands: R::Sender<MasterCommandOn<R>>,
    appended: R::Sender<()>,
    runtime: R,
}

/// A running master on runtime `R`: puts messages, reports status, shuts down. Cheap to clone.
pub struct MasterHandle<L, R: Runtime> {
    shared: Arc<MasterShared<L, R>>,
}

impl<L, R: Runtime> Clone for MasterHandle<L, R> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

impl<L: MessageLog, R: Runtime> MasterHandle<L, R> {
    /// The handle on the master service whose core task owns `task` and receives `commands`;
    /// `appended` is a one-slot channel that wakes the task after a put that waits for no slave,
    /// and after a put whose replication wait asks for it ([`WaitQueue`]).
    pub fn new(
        task: &MasterTaskOn<L, R>,
        config: MasterServiceConfig,
        local_addr: SocketAddr,
        commands: R::Sender<MasterCommandOn<R>>,
        appended: R::Sender<()>,
        runtime: R,
    ) -> Self {
        info!(listen = %local_addr, role = config.role.rocketmq_name(), "HA master listening");
        let (log, gate, waits) = (task.log().clone(), task.gate().clone(), task.wait_queue().clone());
        let shared = MasterShared { log, config, gate, waits, local_addr, commands, appended, runtime };
        Self { shared: Arc::new(shared) }
    }

    /// The address slaves connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// The log.
    pub fn log(&self) -> &Arc<L> {
        &self.shared.log
    }

    /// Appends `message`, then waits as the role and the log require: for the disk when the
    /// log's [`flush_settings`](MessageLog::flush_settings) say SYNC_FLUSH (up to their
    /// `sync_flush_timeout`) and, on a SYNC_MASTER, for the slaves the ack policy needs (up to
    /// `slave_timeout`). The two waits run side by side; neither depends on the other.
    pub async fn put(&self, message: L::Message) -> PutResult {
        let s = &*self.shared;
        let pending = match s.gate.start(&s.config, &*s.log, message) {
            Ok(pending) => pending,
            Err(done) => return done,
        };
        let flushed = async {
            let durable = pending.flush.then(|| s.log.durable(pending.end()))?;
            Some(s.runtime.within(s.log.flush_settings().sync_flush_timeout, durable).await)
        };
        let replicated = async {
            if !pending.replicate {
                R::try_send(&s.appended, ());
                return None;
            }
            let (reply, answer) = R::reply();
            let deadline = || s.runtime.now() + s.config.slave_timeout;
            match s.waits.push(pending.end(), deadline, reply) {
                Ok(wake) => {
                    if wake {
                        R::try_send(&s.appended, ());
                    }
                }
                Err(_stopped) => return Some(Err(WaitError::Cancelled)),
            }
            Some(answer.await.unwrap_or(Err(WaitError::Cancelled)))
        };
        let (flushed, replicated) = join(flushed, replicated).await;
        pending.finish(flushed, replicated)
    }

    /// A status snapshot: offsets and every slave's ack, lag and sync state; `None` once the
    /// service stopped.
    pub async fn status(&self) -> Option<MasterStatus> {
        R::ask(&self.shared.commands, |reply| TaskCommand::Driver(MasterCommand::Status { reply })).await
    }

    /// Stops accepting, lets pending replication waits finish (each ends by its deadline),
    /// flushes the log, and closes every connection. Later puts are refused.
    pub async fn shutdown(&self) {
        self.shared.gate.stop();
        R::ask(&self.shared.commands, TaskCommand::Shutdown).await;
    }

    /// Waits until at least `slaves` slaves are in sync (connected, and within
    /// `ha_max_gap_not_in_sync` of the master's end), and returns the status that showed it.
    /// The core task answers as soon as they are; gives up after `timeout`.
    pub async fn wait_in_sync(&self, slaves: usize, timeout: Duration) -> Result<MasterStatus, InSyncError> {
        let wait = InSyncWait::new(self.shared.runtime.now(), slaves, timeout);
        let status = R::ask(&self.shared.commands, |reply| TaskCommand::InSync { wait, reply }).await;
        wait.outcome(status.ok_or(InSyncError::Stopped)?)
    }

    /// Controller mode: applies the sync-state-set `set` at `epoch`, decided outside (an
    /// operator standing in for RocketMQ's controller, whose `setSyncStateSet` this is). Refused
    /// unless the master is a member, no id or epoch is negative, and the epoch is above the set
    /// in force (or is that set, given again). Returns the AutoSwitch status right after.
    pub async fn set_sync_state_set(
        &self,
        set: std::collections::BTreeSet<BrokerId>,
        epoch: i32,
    ) -> Result<AutoSwitchMasterStatus, SyncStateSetError> {
        let Some(controller) = &self.shared.config.controller else {
            return Err(SyncStateSetError::NotControllerMode);
        };
        check_sync_state_set(controller.broker_id, &set, epoch)?;
        let asked = set.clone();
        let status = R::ask(&self.shared.commands, |reply| TaskCommand::SetSyncStateSetAndReport {
            set: asked,
            epoch,
            reply,
        })
        .await
        .ok_or(SyncStateSetError::Stopped)?;
        let now = status.autoswitch.ok_or(SyncStateSetError::NotControllerMode)?;
        // The status is taken right after the command: it shows the set iff it was applied.
        if now.sync_state_set == set && now.sync_state_set_epoch == epoch {
            Ok(now)
        } else if now.sync_state_set_epoch == epoch {
            Err(SyncStateSetError::EpochInUse { epoch, current: now.sync_state_set })
        } else {
            Err(SyncStateSetError::StaleEpoch { epoch, current: now.sync_state_set_epoch })
        }
    }
}

impl<L: MessageLog, R: Runtime> MasterService<L> for MasterHandle<L, R> {
    fn local_addr(&self) -> SocketAddr {
        Self::local_addr(self)
    }

    fn put(&self, message: L::Message) -> ServiceFuture<'_, PutResult> {
        Box::pin(Self::put(self, message))
    }

    fn status(&self) -> ServiceFuture<'_, Option<MasterStatus>> {
        Box::pin(Self::status(self))
    }

    fn shutdown(&self) -> ServiceFuture<'_, ()> {
        Box::pin(Self::shutdown(self))
    }
}

/// A running slave on runtime `R`: reports status, shuts down. Cheap to clone.
pub struct SlaveHandle<R: Runtime> {
    commands: R::Sender<SlaveCommandOn<R>>,
}

impl<R: Runtime> Clone for SlaveHandle<R> {
    fn clone(&self) -> Self {
        Self { commands: self.commands.clone() }
    }
}

impl<R: Runtime> SlaveHandle<R> {
    /// The handle on the slave service whose task receives `commands`.
    pub fn new(commands: R::Sender<SlaveCommandOn<R>>) -> Self {
        Self { commands }
    }

    /// A status snapshot of the slave's side of the master connection; `None` once the
    /// service stopped.
    pub async fn status(&self) -> Option<SlaveStatus> {
        R::ask(&self.commands, SlaveCommand::Status).await
    }

    /// Closes the connection, flushes the log and stops.
    pub async fn shutdown(&self) {
        R::ask(&self.commands, SlaveCommand::Shutdown).await;
    }
}

impl<R: Runtime> SlaveService for SlaveHandle<R> {
    fn status(&self) -> ServiceFuture<'_, Option<SlaveStatus>> {
        Box::pin(Self::status(self))
    }

    fn shutdown(&self) -> ServiceFuture<'_, ()> {
        Box::pin(Self::shutdown(self))
    }
}
