//! RocketMQ 5's AutoSwitch HA protocol (controller mode, `enableControllerMode=true`), sans IO.
//!
//! A second protocol beside the classic one, on the same port and incompatible with it. The
//! master sends its epoch list in the handshake; the slave finds the offset up to which both
//! logs agree, has its driver truncate the divergent tail, and only then streams.
//!
//! - [`frame`]: frames A–D and their resumable decoders.
//! - [`epoch`]: the epoch cache and `findConsistentPoint`.
//! - [`AutoSwitchSlave`]: a slave's connection cycle: handshake, truncation, transfer.
//!
//! The machines follow the crate's run-loop contract (`handle_input`, `handle_timeout`,
//! `poll_output` drained until `Timeout`), and the same three error channels.

pub mod epoch;
pub mod frame;

pub use epoch::{Appended, EpochCache, EpochEntry, EpochError, find_consistent_point};
pub use frame::FrameError;

mod error;
#[doc(hidden)]
pub mod fuzzing;
mod slave;

pub use error::{ApiMisuse, CloseReason, EpochRefusal, PeerError};
pub use slave::{AutoSwitchSlave, AutoSwitchSlaveConfig, SlaveEvent, SlaveInput, SlaveOutput, SlaveState};
mod master;
pub mod sync_state;

pub use master::{
    AutoSwitchMaster, AutoSwitchMasterConfig, MasterEvent, MasterInput, MasterOutput, MasterStart, SlaveInfo,
};
pub use sync_state::{BrokerId, SyncPolicy, SyncStateSet};
