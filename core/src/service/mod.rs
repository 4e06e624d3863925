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
//! What an embedder uses sits at this module's root:
//!
//! - configuration and start errors: [`MasterServiceConfig`], [`SlaveServiceConfig`],
//!   [`StartError`]; in controller mode [`MasterControllerConfig`], [`SlaveControllerConfig`],
//!   fenced by the broker's lease ([`coordinator::LeaseFence`],
//!   [`MasterControllerConfig::lease`]);
//! - the handles, on any adapter: [`MasterHandle`], [`SlaveHandle`]; as traits:
//!   [`MasterService`], [`SlaveService`]; waits: [`InSyncWait`], [`InSyncError`];
//! - status snapshots: [`MasterStatus`], [`SlaveStatus`], [`Fence`], [`Refusals`],
//!   [`ConnectedSlave`];
//! - admission of replicas by address: [`Admission`], [`IpNet`]; by certificate: [`tls`].
//!
//! What an adapter author (or the simulator) builds on is in [`adapter`]: [`Runtime`], the
//! tasks, their wake-ups and commands, the frames, the drivers and the put path. Those are not
//! at this module's root, so the embedder's page stays short:
//!
//! ```
//! use logship_core::service::adapter::{MasterTaskOn, ReplySlot, Runtime};
//! ```
//!
//! ```compile_fail
//! use logship_core::service::MasterTaskOn; // an adapter internal: in `service::adapter`
//! ```
//!
//! ```compile_fail
//! use logship_core::service::ReplySlot; // an adapter internal: in `service::adapter`
//! ```
//!
//! Settings a service shares with its log have one source, the log: the master follows its
//! [`flush_settings`](crate::MessageLog::flush_settings) (the service has no flush setting of
//! its own) and cuts frames at its [`segment_size`](crate::LogRead::segment_size); a
//! different segment size in the service's configuration is refused at start
//! ([`MasterServiceConfig::validate_with`]).

mod admission;
mod autoswitch;
mod config;
mod conns;
mod controller;
pub mod coordinator;
mod future;
mod handle;
mod in_sync;
mod master;
mod protocol;
mod put;
mod runtime;
#[cfg(test)]
mod runtime_tests;
mod sink;
mod slave;
mod slave_link;
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

// The embedder's surface: configure, start (through an adapter), put, watch, stop.
pub use admission::{
    Admission, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_PEER, DEFAULT_MAX_UNTRUSTED_CONNECTIONS,
    IpNet, IpNetError, MemberAddress, Trust, parse_allow_list,
};
pub use autoswitch::{
    AutoSwitchMasterStatus, AutoSwitchSlaveInfo, AutoSwitchSlaveStatus, FollowRefusals, LocalAuthority,
    SyncStateSetError, check_sync_state_set,
};
pub use config::{
    DEFAULT_CONNECT_TIMEOUT, DEFAULT_SLAVE_TIMEOUT, DEFAULT_SYNC_FLUSH_TIMEOUT, MasterServiceConfig,
    SlaveServiceConfig, StartError,
};
pub use controller::{
    AuthorityFactory, MasterControllerConfig, MemberDirectory, SlaveControllerConfig, SyncStateSetAuthority,
};
pub use future::ServiceFuture;
pub use handle::{MasterHandle, MasterService, SlaveHandle, SlaveService};
pub use in_sync::{InSyncError, InSyncWait};
pub use status::{ConnectedSlave, Fence, MasterStatus, Refusals, SlaveStatus};

/// The adapter author's surface: what a runtime adapter (or a lower-level driver such as the
/// simulator) builds on. An embedder who starts services through `logship-runtime-tokio` or
/// `logship-runtime-smol` needs none of it.
///
/// - what an adapter implements: [`Runtime`]; the tasks it runs: [`MasterTask`] (woken with
///   [`MasterWake`], fed [`TaskCommand`]s), [`SlaveTask`] ([`SlaveWake`], [`SlaveCommand`],
///   performing [`SlaveIo`]s); its accept loop's [`Accepts`] and TLS [`negotiate`];
/// - bytes on a connection: [`Transmit`], [`Frame`], [`ReadBuffer`]; the spans
///   [`master_span`], [`master_conn_span`], [`slave_span`];
/// - the handles' plumbing over a [`Runtime`]: [`ConnHandle`], [`ReplySlot`], [`MasterTaskOn`];
/// - the drivers under the tasks, for a lower-level user: [`MasterDriver`] and [`SlaveDriver`]
///   (classic), [`AutoSwitchDriver`] and [`AutoSwitchSlaveDriver`], run by the tasks through
///   [`MasterProtocol`] and [`SlaveProtocol`] (built by [`master_driver`] and [`slave_driver`]
///   as the configuration asks), fed [`MasterCommand`]s ([`apply`]) and answering through
///   [`ConnSink`], [`WaitSink`] and [`Reply`];
/// - the put path: [`PutGate`], [`WaitQueue`], [`PendingPut`], [`put_status`];
/// - admission's slots: [`Slot`], [`Allotment`].
pub mod adapter {
    pub use super::admission::{Allotment, Slot};
    pub use super::autoswitch::{AutoSwitchDriver, AutoSwitchSlaveDriver};
    pub use super::in_sync::in_sync_slaves;
    pub use super::master::{IMPLAUSIBLE_AHEAD, MasterDriver};
    pub use super::protocol::{MasterProtocol, SlaveProtocol, apply, master_driver, slave_driver};
    pub use super::put::{PendingPut, PutGate, QueuedWait, WaitQueue, put_status};
    pub use super::runtime::{
        ConnHandle, MasterCommandOn, MasterTaskOn, ReplySlot, Runtime, SlaveCommandOn, join, settled,
    };
    pub use super::sink::{ConnSink, FrameHeader, MasterCommand, Reply, Transmit, WaitSink};
    pub use super::slave::{SlaveAction, SlaveDriver};
    pub use super::spans::{master_conn_span, master_span, slave_span};
    pub use super::task::{
        ACCEPT_RETRY, MAX_BATCH, MasterTask, SlaveCommand, SlaveIo, SlaveTask, TaskCommand,
    };
    pub use super::wake::{Accepts, MasterWake, SlaveWake, handshake_failed, negotiate, nodelay_set};
    pub use super::wire::{Frame, ReadBuffer};
}
pub(crate) use adapter::*;
