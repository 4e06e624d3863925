//! The service layer: what every runtime adapter needs, written once (synchronously, but for
//! the handles over an adapter's [`Runtime`]), above the sans-IO protocol core.
//!
//! Unlike the state machines at the crate root, this layer **does** touch the log: a
//! [`MasterDriver`] appends puts through [`MessageLog::put`](crate::MessageLog::put) and asks
//! the log for its bounds and record boundaries; a [`SlaveDriver`] stores the bytes the slave
//! core hands it with [`LogWrite::append_at`](crate::LogWrite::append_at). It still reads no
//! socket and no clock, spawns nothing and takes one lock of its own, the [`WaitQueue`] that hands
//! puts' replication waits to the master task: time comes in as `now`,
//! and the log's own locking is the log's. It logs through `tracing` into the span the adapter
//! opened for the service (`role`, `conn`, `peer` fields), and never installs a subscriber.
//!
//! An adapter supplies the asynchronous parts — sockets, channels, timers, tasks. It implements
//! [`Runtime`] (its clock on the core's timeline, its bounded channels, a timeout), and the
//! service handles are written here once over it: [`MasterHandle`] and [`SlaveHandle`] (put,
//! status, shutdown, the in-sync wait; their only `async` code, which awaits what the runtime
//! hands them), and a connection's [`ConnHandle`]. It runs one task that owns a [`MasterTask`]
//! (the [`MasterDriver`], the log and the [`PutGate`]): wait for commands, an append or the
//! timer, and hand what woke it over ([`MasterWake`], [`MasterTask::wake`], which ends the turn
//! with [`MasterTask::settle`]); sleep until the instant it returns, and [`MasterTask::stop`]
//! after the last turn. Its accept loop numbers connections with [`Accepts`]; its connection
//! tasks [`negotiate`] when TLS is configured (reporting a [`tls::Link`]), write each
//! [`Transmit`] as a [`Frame`] ([`Transmit::resolve`], [`Frame::poll_write`]), read into a
//! [`ReadBuffer`], and end with [`TaskCommand::ended`]. A slave adapter owns a [`SlaveTask`] (a
//! [`SlaveDriver`] and the connection), performs the [`SlaveIo`]s it returns and hands every
//! wake-up back ([`SlaveWake`], [`SlaveTask::wake`]). Both adapters' handles implement
//! [`MasterService`] and [`SlaveService`], and run in the spans of [`master_span`],
//! [`master_conn_span`] and [`slave_span`], whose fields the drivers record into.
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
//! - what adapters implement: [`Runtime`]; what a lower-level user implements: [`ConnSink`],
//!   [`WaitSink`], [`Reply`], fed with [`MasterCommand`]s;
//! - the adapters' tasks: [`MasterTask`], [`TaskCommand`], [`MasterWake`], [`SlaveTask`],
//!   [`SlaveCommand`], [`SlaveIo`], [`SlaveWake`], [`Accepts`], [`negotiate`]; bytes on a
//!   connection: [`Frame`], [`ReadBuffer`]; waits: [`InSyncWait`];
//! - the handles, on any adapter: [`MasterHandle`], [`SlaveHandle`], over a [`Runtime`]
//!   ([`ConnHandle`], [`ReplySlot`], [`MasterTaskOn`]); as traits: [`MasterService`],
//!   [`SlaveService`];
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
pub mod coordinator;
mod handle;
mod in_sync;
mod master;
mod put;
mod runtime;
#[cfg(test)]
mod runtime_tests;
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
mod wake;
mod wire;

pub use admission::{
    Admission, Allotment, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_PEER,
    DEFAULT_MAX_UNTRUSTED_CONNECTIONS, IpNet, IpNetError, MemberAddress, Slot, Trust, parse_allow_list,
};
pub use autoswitch::{
    AnyMasterDriver, AuthorityFactory, AutoSwitchDriver, AutoSwitchMasterStatus, AutoSwitchSlaveInfo,
    LocalAuthority, MasterControllerConfig, MemberDirectory, SyncStateSetAuthority,
};
pub use autoswitch::{
    AnySlaveDriver, AutoSwitchSlaveDriver, AutoSwitchSlaveStatus, FollowRefusals, SlaveControllerConfig,
};
pub use autoswitch::{SyncStateSetError, check_sync_state_set};
pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_SLAVE_TIMEOUT, DEFAULT_SYNC_FLUSH_TIMEOUT, MasterServiceConfig,
    SlaveServiceConfig, StartError,
};
pub use handle::{MasterHandle, MasterService, ServiceFuture, SlaveHandle, SlaveService};
pub use in_sync::{InSyncError, InSyncWait, in_sync_slaves};
pub use master::{IMPLAUSIBLE_AHEAD, MasterDriver};
pub use put::{PendingPut, PutGate, QueuedWait, WaitQueue, put_status};
pub use runtime::{
    ConnHandle, MasterCommandOn, MasterTaskOn, ReplySlot, Runtime, SlaveCommandOn, join, settled,
};
pub use sink::{ConnSink, FrameHeader, MasterCommand, Reply, Transmit, WaitSink};
pub use slave::{SlaveAction, SlaveDriver};
pub use spans::{master_conn_span, master_span, slave_span};
pub use status::{ConnectedSlave, Fence, MasterStatus, Refusals, SlaveStatus};
pub use task::{ACCEPT_RETRY, MAX_BATCH, MasterTask, SlaveCommand, SlaveIo, SlaveTask, TaskCommand};
pub use wake::{Accepts, MasterWake, SlaveWake, handshake_failed, negotiate, nodelay_set};
pub use wire::{Frame, ReadBuffer};
