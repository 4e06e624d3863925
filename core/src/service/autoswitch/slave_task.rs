//! The driver a [`SlaveTask`](crate::service::SlaveTask) runs: the classic [`SlaveDriver`] or,
//! in controller mode ([`SlaveServiceConfig::controller`]), the [`AutoSwitchSlaveDriver`],
//! chosen by configuration as RocketMQ chooses it (`enableControllerMode`), so adapters run
//! either without knowing which.

use std::sync::Arc;

use bytes::Bytes;

use crate::log::{LogWrite, Offset};
use crate::service::{
    AutoSwitchSlaveDriver, SlaveAction, SlaveDriver, SlaveServiceConfig, SlaveStatus, StartError,
};
use crate::time::Instant;

/// Either slave driver, with the calls a slave task makes of it.
#[expect(
    clippy::large_enum_variant,
    reason = "one driver per slave service, owned by its task: its size does not matter"
)]
pub enum AnySlaveDriver<L> {
    /// The classic protocol.
    Classic(SlaveDriver<L>),
    /// The AutoSwitch protocol (controller mode).
    AutoSwitch(AutoSwitchSlaveDriver<L>),
}

impl<L: LogWrite> AnySlaveDriver<L> {
    /// The driver `config` asks for: AutoSwitch when `config.controller` is set.
    pub fn for_service(config: &SlaveServiceConfig, now: Instant, log: Arc<L>) -> Result<Self, StartError> {
        Ok(match config.controller {
            Some(_) => Self::AutoSwitch(AutoSwitchSlaveDriver::new(config, now, log)?),
            None => Self::Classic(SlaveDriver::new(config, now, log)?),
        })
    }

    /// Performs what needs no runtime and returns the next action.
    pub fn next_action(&mut self, now: Instant) -> SlaveAction {
        match self {
            Self::Classic(d) => d.next_action(now),
            Self::AutoSwitch(d) => d.next_action(now),
        }
    }

    /// Whether to read from the connection now.
    pub fn wants_read(&self) -> bool {
        match self {
            Self::Classic(d) => d.wants_read(),
            Self::AutoSwitch(d) => d.wants_read(),
        }
    }

    /// The connection asked for by `Connect` is up.
    pub fn connected(&mut self, now: Instant) {
        match self {
            Self::Classic(d) => d.connected(now),
            Self::AutoSwitch(d) => d.connected(now),
        }
    }

    /// Bytes from the master.
    pub fn received(&mut self, now: Instant, data: Bytes) {
        match self {
            Self::Classic(d) => d.received(now, data),
            Self::AutoSwitch(d) => d.received(now, data),
        }
    }

    /// The connection (or the attempt) failed or ended.
    pub fn closed(&mut self, now: Instant) {
        match self {
            Self::Classic(d) => d.closed(now),
            Self::AutoSwitch(d) => d.closed(now),
        }
    }

    /// A `Flush` finished.
    pub fn flushed<E: std::fmt::Display>(&mut self, now: Instant, result: Result<Offset, E>) {
        match self {
            Self::Classic(d) => d.flushed(now, result),
            Self::AutoSwitch(d) => d.flushed(now, result),
        }
    }

    /// The instant of the last `SleepUntil` has come.
    pub fn handle_timeout(&mut self, now: Instant) {
        match self {
            Self::Classic(d) => d.handle_timeout(now),
            Self::AutoSwitch(d) => d.handle_timeout(now),
        }
    }

    /// A status snapshot.
    pub fn status(&self, now: Instant) -> SlaveStatus {
        match self {
            Self::Classic(d) => d.status(now),
            Self::AutoSwitch(d) => d.status(now),
        }
    }
}
