//! What a task asks of the driver it runs, for either HA protocol: [`MasterProtocol`] for a
//! master service's core task, [`SlaveProtocol`] for a slave service's task.
//!
//! The protocol is chosen by configuration at start ([`MasterServiceConfig::controller`],
//! [`SlaveServiceConfig::controller`]), as RocketMQ chooses it (`enableControllerMode`), so an
//! adapter runs either without knowing which: [`master_driver`] and [`slave_driver`] build the
//! driver the configuration asks for, and the tasks hold it as a trait object. A task calls its
//! driver a few times a turn, against socket I/O and a log append; one indirect call each is
//! nothing beside that, and the adapters' task code is compiled once instead of once per
//! protocol.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;

use crate::autoswitch::BrokerId;
use crate::log::{LogBounds, LogWrite, MessageLog, Offset};
use crate::service::tls::Link;
use crate::service::{
    AutoSwitchDriver, AutoSwitchSlaveDriver, ConnSink, Fence, MasterCommand, MasterDriver,
    MasterServiceConfig, MasterStatus, Reply, SlaveAction, SlaveDriver, SlaveServiceConfig, SlaveStatus,
    StartError, SyncStateSetError, WaitSink,
};
use crate::time::Instant;
use crate::{BrokerRole, ConnId};

/// A master driver as its task runs it: the classic [`MasterDriver`] or the
/// [`AutoSwitchDriver`]. Each method is the driver's own, documented there.
pub trait MasterProtocol<C, W>: Send {
    /// A new connection (see [`MasterDriver::accept`]).
    fn accept(&mut self, now: Instant, conn: ConnId, address: SocketAddr, sink: C);
    /// A connection's TLS negotiation ended (see [`MasterDriver::negotiated`]).
    fn negotiated(&mut self, now: Instant, conn: ConnId, link: Link);
    /// Bytes from a connection.
    fn received(&mut self, now: Instant, conn: ConnId, data: Bytes);
    /// A connection's writer finished one transmit.
    fn sent(&mut self, now: Instant, conn: ConnId);
    /// A connection's teardown finished.
    fn closed(&mut self, now: Instant, conn: ConnId);
    /// The log's bounds as read now.
    fn log_changed(&mut self, now: Instant, log: LogBounds);
    /// Waits until the protocol's replicas hold every byte before `offset`, or `deadline`.
    fn await_replication(&mut self, now: Instant, offset: Offset, deadline: Instant, sink: W);
    /// The instant of the last timeout has come (early calls are harmless).
    fn handle_timeout(&mut self, now: Instant);
    /// Performs every pending output; returns when to call
    /// [`handle_timeout`](Self::handle_timeout).
    fn drain(&mut self) -> Instant;
    /// Why puts are refused now, if they are.
    fn fence(&self) -> Option<&Fence>;
    /// A status snapshot; `role` and `flushed_offset` come from the adapter and the log.
    fn status(&self, now: Instant, role: BrokerRole, flushed_offset: Offset) -> MasterStatus;
    /// Whether the driver is sure to be woken soon without news of a put (see
    /// [`MasterDriver::wakes_without_puts`]).
    fn wakes_without_puts(&self) -> bool;
    /// Replication waits pending.
    fn pending_waits(&self) -> usize;
    /// Closes every connection and cancels every wait.
    fn shutdown(&mut self);
    /// Applies a sync-state-set decided outside (see
    /// [`AutoSwitchDriver::set_sync_state_set`]); a classic driver has none.
    fn set_sync_state_set(
        &mut self,
        now: Instant,
        set: BTreeSet<BrokerId>,
        epoch: i32,
    ) -> Result<(), SyncStateSetError>;
}

/// Applies one command to `driver`. `log` is read for its current bounds (every put wakes the
/// driver through a command or [`MasterProtocol::log_changed`]).
pub fn apply<L: MessageLog, C, W, S: Reply<MasterStatus>>(
    driver: &mut (impl MasterProtocol<C, W> + ?Sized),
    now: Instant,
    command: MasterCommand<C, W, S>,
    log: &L,
    role: BrokerRole,
) {
    match command {
        MasterCommand::Accepted { conn, peer, sink } => driver.accept(now, conn, peer, sink),
        MasterCommand::Negotiated { conn, link } => driver.negotiated(now, conn, link),
        MasterCommand::Received { conn, data } => driver.received(now, conn, data),
        MasterCommand::Sent { conn } => driver.sent(now, conn),
        MasterCommand::Closed { conn } => driver.closed(now, conn),
        MasterCommand::Wait { offset, deadline, reply } => {
            driver.log_changed(now, log.bounds());
            driver.await_replication(now, offset, deadline, reply);
        }
        MasterCommand::Status { reply } => {
            driver.log_changed(now, log.bounds());
            reply.send(driver.status(now, role, log.flushed()));
        }
    }
}

/// The master driver `config` asks for: the [`AutoSwitchDriver`] when `config.controller` is
/// set, else the classic [`MasterDriver`].
pub fn master_driver<L: MessageLog, C: ConnSink + Send + 'static, W: WaitSink + Send + 'static>(
    config: &MasterServiceConfig,
    now: Instant,
    log: Arc<L>,
) -> Result<Box<dyn MasterProtocol<C, W>>, StartError> {
    Ok(match config.controller {
        Some(_) => Box::new(AutoSwitchDriver::for_service(config, now, log)?),
        None => Box::new(MasterDriver::for_service(config, now, log)?),
    })
}

/// Implements [`MasterProtocol`] by the driver's inherent methods of the same names.
macro_rules! master_protocol_by_inherent_methods {
    ($driver:ty, $($bounds:tt)*) => {
        impl<$($bounds)*> MasterProtocol<C, W> for $driver {
            fn accept(&mut self, now: Instant, conn: ConnId, address: SocketAddr, sink: C) {
                Self::accept(self, now, conn, address, sink);
            }
            fn negotiated(&mut self, now: Instant, conn: ConnId, link: Link) {
                Self::negotiated(self, now, conn, link);
            }
            fn received(&mut self, now: Instant, conn: ConnId, data: Bytes) {
                Self::received(self, now, conn, data);
            }
            fn sent(&mut self, now: Instant, conn: ConnId) {
                Self::sent(self, now, conn);
            }
            fn closed(&mut self, now: Instant, conn: ConnId) {
                Self::closed(self, now, conn);
            }
            fn log_changed(&mut self, now: Instant, log: LogBounds) {
                Self::log_changed(self, now, log);
            }
            fn await_replication(&mut self, now: Instant, offset: Offset, deadline: Instant, sink: W) {
                Self::await_replication(self, now, offset, deadline, sink);
            }
            fn handle_timeout(&mut self, now: Instant) {
                Self::handle_timeout(self, now);
            }
            fn drain(&mut self) -> Instant {
                Self::drain(self)
            }
            fn fence(&self) -> Option<&Fence> {
                Self::fence(self)
            }
            fn status(&self, now: Instant, role: BrokerRole, flushed_offset: Offset) -> MasterStatus {
                Self::status(self, now, role, flushed_offset)
            }
            fn wakes_without_puts(&self) -> bool {
                Self::wakes_without_puts(self)
            }
            fn pending_waits(&self) -> usize {
                Self::pending_waits(self)
            }
            fn shutdown(&mut self) {
                Self::shutdown(self);
            }
            fn set_sync_state_set(
                &mut self,
                now: Instant,
                set: BTreeSet<BrokerId>,
                epoch: i32,
            ) -> Result<(), SyncStateSetError> {
                Self::set_sync_state_set(self, now, set, epoch)
            }
        }
    };
}

master_protocol_by_inherent_methods!(MasterDriver<C, W>, C: ConnSink + Send, W: WaitSink + Send);
master_protocol_by_inherent_methods!(AutoSwitchDriver<L, C, W>, L: crate::LogRead, C: ConnSink + Send, W: WaitSink + Send);

/// A slave driver as its task runs it: the classic [`SlaveDriver`] or the
/// [`AutoSwitchSlaveDriver`]. Each method is the driver's own, documented there.
pub trait SlaveProtocol: Send {
    /// Performs what needs no runtime and returns the next action.
    fn next_action(&mut self, now: Instant) -> SlaveAction;
    /// Whether to read from the connection now.
    fn wants_read(&self) -> bool;
    /// The connection asked for by `Connect` is up.
    fn connected(&mut self, now: Instant);
    /// Bytes from the master.
    fn received(&mut self, now: Instant, data: Bytes);
    /// The connection (or the attempt) failed or ended.
    fn closed(&mut self, now: Instant);
    /// A `Flush` finished; the error as its text.
    fn flushed(&mut self, now: Instant, result: Result<Offset, String>);
    /// The instant of the last `SleepUntil` has come.
    fn handle_timeout(&mut self, now: Instant);
    /// A status snapshot.
    fn status(&self, now: Instant) -> SlaveStatus;
}

/// The slave driver `config` asks for: the [`AutoSwitchSlaveDriver`] when `config.controller`
/// is set, else the classic [`SlaveDriver`].
pub fn slave_driver<L: LogWrite>(
    config: &SlaveServiceConfig,
    now: Instant,
    log: Arc<L>,
) -> Result<Box<dyn SlaveProtocol>, StartError> {
    Ok(match config.controller {
        Some(_) => Box::new(AutoSwitchSlaveDriver::new(config, now, log)?),
        None => Box::new(SlaveDriver::new(config, now, log)?),
    })
}

/// Implements [`SlaveProtocol`] by the driver's inherent methods of the same names.
macro_rules! slave_protocol_by_inherent_methods {
    ($driver:ident) => {
        impl<L: LogWrite> SlaveProtocol for $driver<L> {
            fn next_action(&mut self, now: Instant) -> SlaveAction {
                Self::next_action(self, now)
            }
            fn wants_read(&self) -> bool {
                Self::wants_read(self)
            }
            fn connected(&mut self, now: Instant) {
                Self::connected(self, now);
            }
            fn received(&mut self, now: Instant, data: Bytes) {
                Self::received(self, now, data);
            }
            fn closed(&mut self, now: Instant) {
                Self::closed(self, now);
            }
            fn flushed(&mut self, now: Instant, result: Result<Offset, String>) {
                Self::flushed(self, now, result);
            }
            fn handle_timeout(&mut self, now: Instant) {
                Self::handle_timeout(self, now);
            }
            fn status(&self, now: Instant) -> SlaveStatus {
                Self::status(self, now)
            }
        }
    };
}

slave_protocol_by_inherent_methods!(SlaveDriver);
slave_protocol_by_inherent_methods!(AutoSwitchSlaveDriver);
