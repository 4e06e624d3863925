//! The driver a [`MasterTask`](crate::service::MasterTask) runs: the classic
//! [`MasterDriver`] or, in controller mode ([`MasterServiceConfig::controller`]), the
//! [`AutoSwitchDriver`]. The protocol is chosen by configuration here, as RocketMQ chooses it
//! (`enableControllerMode`), so adapters run either without knowing which.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::BrokerRole;
use crate::autoswitch::BrokerId;
use crate::log::{LogBounds, MessageLog, Offset};
use crate::service::{
    AutoSwitchDriver, ConnSink, Fence, MasterCommand, MasterDriver, MasterServiceConfig, MasterStatus, Reply,
    StartError, SyncStateSetError, WaitSink,
};
use crate::time::Instant;

/// Either master driver, with the calls a master task makes of it.
pub enum AnyMasterDriver<L, C, W> {
    /// The classic protocol.
    Classic(MasterDriver<C, W>),
    /// The AutoSwitch protocol (controller mode).
    AutoSwitch(AutoSwitchDriver<L, C, W>),
}

impl<L: MessageLog, C: ConnSink, W: WaitSink> AnyMasterDriver<L, C, W> {
    /// The driver `config` asks for: AutoSwitch when `config.controller` is set.
    pub fn for_service(config: &MasterServiceConfig, now: Instant, log: Arc<L>) -> Result<Self, StartError> {
        Ok(match config.controller {
            Some(_) => Self::AutoSwitch(AutoSwitchDriver::for_service(config, now, log)?),
            None => Self::Classic(MasterDriver::for_service(config, now, log)?),
        })
    }

    /// Applies one command (see [`MasterDriver::apply`]).
    pub fn apply<S: Reply<MasterStatus>>(
        &mut self,
        now: Instant,
        command: MasterCommand<C, W, S>,
        log: &L,
        role: BrokerRole,
    ) {
        let d = match self {
            Self::Classic(d) => return d.apply(now, command, log, role),
            Self::AutoSwitch(d) => d,
        };
        match command {
            MasterCommand::Accepted { conn, peer, sink } => d.accept(now, conn, peer, sink),
            MasterCommand::Negotiated { conn, link } => d.negotiated(now, conn, link),
            MasterCommand::Received { conn, data } => d.received(now, conn, data),
            MasterCommand::Sent { conn } => d.sent(now, conn),
            MasterCommand::Closed { conn } => d.closed(now, conn),
            MasterCommand::Wait { offset, deadline, reply } => {
                d.log_changed(now, log.bounds());
                d.await_replication(now, offset, deadline, reply);
            }
            MasterCommand::Status { reply } => {
                d.log_changed(now, log.bounds());
                reply.send(d.status(now, role, log.flushed()));
            }
        }
    }

    /// Why puts are refused now, if they are.
    pub fn fence(&self) -> Option<&Fence> {
        match self {
            Self::Classic(d) => d.fence(),
            Self::AutoSwitch(d) => d.fence(),
        }
    }

    /// Performs every pending output; returns when to call [`handle_timeout`](Self::handle_timeout).
    pub fn drain(&mut self) -> Instant {
        match self {
            Self::Classic(d) => d.drain(),
            Self::AutoSwitch(d) => d.drain(),
        }
    }

    /// The log's bounds as read now.
    pub fn log_changed(&mut self, now: Instant, log: LogBounds) {
        match self {
            Self::Classic(d) => d.log_changed(now, log),
            Self::AutoSwitch(d) => d.log_changed(now, log),
        }
    }

    /// The instant of the last timeout has come.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self {
            Self::Classic(d) => d.handle_timeout(now),
            Self::AutoSwitch(d) => d.handle_timeout(now),
        }
    }

    /// A status snapshot.
    pub fn status(&self, now: Instant, role: BrokerRole, flushed_offset: Offset) -> MasterStatus {
        match self {
            Self::Classic(d) => d.status(now, role, flushed_offset),
            Self::AutoSwitch(d) => d.status(now, role, flushed_offset),
        }
    }

    /// Whether the driver is sure to be woken soon without news of a put: see
    /// [`MasterDriver::wakes_without_puts`]. Always `false` for the AutoSwitch driver, whose
    /// puts wake the task every time.
    pub fn wakes_without_puts(&self) -> bool {
        match self {
            Self::Classic(d) => d.wakes_without_puts(),
            Self::AutoSwitch(_) => false,
        }
    }

    /// Replication waits pending.
    pub fn pending_waits(&self) -> usize {
        match self {
            Self::Classic(d) => d.pending_waits(),
            Self::AutoSwitch(d) => d.pending_waits(),
        }
    }

    /// Closes every connection and cancels every wait.
    pub fn shutdown(&mut self) {
        match self {
            Self::Classic(d) => d.shutdown(),
            Self::AutoSwitch(d) => d.shutdown(),
        }
    }

    /// Applies a sync-state-set (controller mode; see [`AutoSwitchDriver::set_sync_state_set`]);
    /// a classic driver has none.
    pub fn set_sync_state_set(
        &mut self,
        now: Instant,
        set: BTreeSet<BrokerId>,
        epoch: i32,
    ) -> Result<(), SyncStateSetError> {
        match self {
            Self::Classic(_) => Err(SyncStateSetError::NotControllerMode),
            Self::AutoSwitch(d) => d.set_sync_state_set(now, set, epoch),
        }
    }
}
