//! The service layer: what every runtime adapter needs, written once and synchronously, above
//! the sans-IO protocol core.
//!
//! Unlike the state machines at the crate root, this layer **does** touch the log: a
//! [`MasterDriver`] appends puts through [`MessageLog::put`](crate::MessageLog::put) and asks
//! the log for its bounds and record boundaries; a [`SlaveDriver`] stores the bytes the slave
//! core hands it with [`LogWrite::append_at`](crate::LogWrite::append_at). It still reads no
//! socket and no clock, spawns nothing and takes no lock of its own: time comes in as `now`,
//! and the log's own locking is the log's. It logs through `tracing` into the span the adapter
//! opened for the service (`role`, `conn`, `peer` fields), and never installs a subscriber.
//!
//! An adapter supplies the asynchronous parts — sockets, channels, timers, tasks — by
//! implementing [`ConnSink`] and [`Reply`] over its own channels (every `Reply` of a wait
//! outcome is a [`WaitSink`]), and runs one task that owns a [`MasterTask`] (the
//! [`MasterDriver`], the log and the [`PutGate`]): wait for commands, an append or the timer,
//! hand it over ([`MasterTask::apply_batch`], [`MasterTask::appended`], [`MasterTask::timer`]),
//! then [`MasterTask::settle`] and sleep until the instant it returns. Its connection tasks
//! write each [`Transmit`] as a [`Frame`] ([`Transmit::resolve`], [`Frame::poll_write`]), read
//! into a [`ReadBuffer`], and report a TLS negotiation as a [`tls::Link`]. A slave adapter owns a
//! [`SlaveTask`] (a [`SlaveDriver`] and the connection), performs the [`SlaveIo`]s it returns
//! and hands every outcome back. Both adapters' handles implement [`MasterService`] and
//! [`SlaveService`], and run in the spans of [`master_span`], [`master_conn_span`] and
//! [`slave_span`], whose fields the drivers record into.
//!
//! A lower-level user (the simulator) drives a [`MasterDriver`] directly: feed it, call
//! [`MasterDriver::drain`], sleep until the instant it returns or the next command; and a
//! [`SlaveDriver`], performing the [`SlaveAction`]s it returns.
//!
//! By concern:
//!
//! - configuration and start errors: [`MasterServiceConfig`], [`SlaveServiceConfig`],
//!   [`StartError`];
//! - the put path: [`PutGate`], [`PendingPut`], [`put_status`];
//! - what adapters implement: [`ConnSink`], [`WaitSink`], [`Reply`], [`MasterCommand`];
//! - the adapters' tasks: [`MasterTask`], [`TaskCommand`], [`SlaveTask`], [`SlaveCommand`],
//!   [`SlaveIo`]; bytes on a connection: [`Frame`], [`ReadBuffer`]; waits: [`InSyncWait`];
//!   handles on any adapter: [`MasterService`], [`SlaveService`];
//! - status snapshots: [`MasterStatus`], [`SlaveStatus`], [`Fence`], [`Refusals`];
//! - admission of replicas by address: [`Admission`], [`IpNet`]; by certificate: [`tls`];
//! - the drivers: [`MasterDriver`], [`SlaveDriver`]; in controller mode (the AutoSwitch
//!   protocol, [`MasterServiceConfig::controller`]) [`AutoSwitchDriver`]; a master task runs
//!   whichever the configuration asks for ([`AnyMasterDriver`]); a slave's
//!   [`AutoSwitchSlaveDriver`] ([`SlaveServiceConfig::controller`]), chosen by a slave task
//!   ([`AnySlaveDriver`]).
//!
//! Settings a service shares with its log have one authority, the log: the master takes its
//! segment size from [`LogRead::segment_size`](crate::LogRead::segment_size), and a service
//! whose flush settings disagree with its log's is refused at start
//! ([`MasterServiceConfig::validate_with`]).

mod admission;
mod autoswitch;
mod config;
mod handle;
mod in_sync;
mod master;
mod put;
mod sink;
mod slave;
mod spans;
mod status;
mod task;
#[cfg(test)]
mod task_tests;
#[cfg(test)]
mod tests;
pub mod tls;
mod wire;

pub use admission::{
    Admission, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_PEER, IpNet, IpNetError, parse_allow_list,
};
pub use autoswitch::{
    AnyMasterDriver, AutoSwitchDriver, AutoSwitchMasterStatus, AutoSwitchSlaveInfo, LocalAuthority,
    MasterControllerConfig, SyncStateSetAuthority,
};
pub use autoswitch::{AnySlaveDriver, AutoSwitchSlaveDriver, AutoSwitchSlaveStatus, SlaveControllerConfig};
pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_SLAVE_TIMEOUT, DEFAULT_SYNC_FLUSH_TIMEOUT, MasterServiceConfig,
    SlaveServiceConfig, StartError,
};
pub use handle::{MasterService, ServiceFuture, SlaveService};
pub use in_sync::{InSyncError, InSyncWait, in_sync_slaves};
pub use master::MasterDriver;
pub use put::{PendingPut, PutGate, put_status};
pub use sink::{ConnSink, FrameHeader, MasterCommand, Reply, Transmit, WaitSink};
pub use slave::{SlaveAction, SlaveDriver};
pub use spans::{master_conn_span, master_span, slave_span};
pub use status::{ConnectedSlave, Fence, MasterStatus, Refusals, SlaveStatus};
pub use task::{ACCEPT_RETRY, MAX_BATCH, MasterTask, SlaveCommand, SlaveIo, SlaveTask, TaskCommand};
pub use wire::{Frame, ReadBuffer};
