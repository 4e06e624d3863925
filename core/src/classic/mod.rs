//! Apache RocketMQ's classic master/slave HA protocol (`HAService`, RocketMQ 4.x and 5.x without
//! controller mode), sans IO.
//!
//! - [`frame`]: the wire format (12-byte push header + body; 8-byte report) and resumable
//!   decoders.
//! - [`Master`]: every slave connection of a master, plus SYNC_MASTER waits
//!   ([`AckPolicy`](crate::AckPolicy)).
//! - [`Slave`]: a slave's connection to its master, with reconnect back-off.
//! - [`PeerError`], [`CloseReason`]: why this protocol closes a connection.
//!
//! The machines follow the crate's run-loop contract (`handle_input`, `handle_timeout`,
//! `poll_output` drained until `Timeout`) and its three error channels
//! ([`ApiMisuse`](crate::ApiMisuse), [`PeerError`] with a close, panics only for broken
//! invariants). Their configuration ([`MasterConfig`](crate::MasterConfig),
//! [`SlaveConfig`](crate::SlaveConfig)) lives at the crate root, because the service layer
//! configures both protocols through it.

mod error;
pub mod frame;
mod master;
mod slave;

pub use error::{CloseReason, PeerError};
pub use frame::FrameError;
pub use master::{Master, MasterEvent, MasterInput, MasterOutput, ReplicaId, SlaveProgress};
pub use slave::{Slave, SlaveEvent, SlaveInput, SlaveOutput, SlaveState};
