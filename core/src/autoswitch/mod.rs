//! RocketMQ 5's AutoSwitch HA protocol (controller mode, `enableControllerMode=true`), sans IO.
//!
//! A second protocol beside the classic one, on the same port and incompatible with it. The
//! master sends its epoch list in the handshake; the slave finds the offset up to which both
//! logs agree, has its driver truncate the divergent tail, and only then streams.
//!
//! - [`frame`]: frames A–D and their resumable decoders.
//! - [`epoch`]: [`find_consistent_point`] over the log's epoch list
//!   ([`EpochCache`](crate::EpochCache), which the log owns).
//! - [`AutoSwitchSlave`]: a slave's connection cycle: handshake, truncation, transfer.
//! - [`AutoSwitchMaster`]: every slave connection of a master, confirmOffset, sync-state-set
//!   proposals and SYNC waits; [`sync_state`] holds the arithmetic.
//!
//! The machines follow the crate's run-loop contract (`handle_input`, `handle_timeout`,
//! `poll_output` drained until `Timeout`) and its three error channels ([`ApiMisuse`](crate::ApiMisuse),
//! [`PeerError`] with a close, panics only for broken invariants).
//!
//! ## What a driver does with the outputs
//!
//! Slave ([`SlaveOutput`]):
//! - `Transmit(frame)`: write `frame.encode()` in **one** write (a Java master decides on a
//!   handshake after 12 of its 16 bytes).
//! - `Truncate { offset, epochs }`: cut the commit log to `offset` (a message boundary),
//!   persist `epochs` as the epoch file, clamp confirmOffset, crash-safely; then feed
//!   `Truncated { end: offset }` or `StoreFailed`. Nothing streams and no reconnect happens
//!   until then, even if the connection drops meanwhile.
//! - `StoreEpochs(entries)`: persist the epoch file before performing the `Append` after it.
//! - `Append { offset, data }`: store; feed `Appended` or `StoreFailed`.
//! - `Flush` (with `AckOn::Flushed` only): make the log durable; feed `Flushed` or `StoreFailed`.
//! - `ConfirmOffset(o)`: dispatch consume queues only up to `o` and persist it.
//!
//! Master ([`MasterOutput`]):
//! - `Transmit { header, body }`: write `header`, then `LogRead::read(body)`; feed `Sent`.
//! - `ConfirmOffset(o)`: persist it and bound the master's own dispatch.
//! - `Event(VerifyReport { offset })` (with `verify_first_reports`): answer `ReportVerified` with
//!   whether `offset` is a message boundary of the log (`LogRead::is_record_boundary`).
//! - `Event(SyncStateSetChange { proposed })`: send to the coordinator (AlterSyncStateSet);
//!   when it accepts, feed [`MasterInput::SyncStateSetApplied`]. Until then acks count over
//!   the union of the old and proposed sets.
//! - A new master epoch (`changeToMaster`) is a new [`AutoSwitchMaster`], built from the
//!   epochs with the new one appended.
//!
//! ## Where logship differs from Java on purpose
//!
//! - An empty epoch is kept, not silently dropped ([`epoch`] explains why).
//! - The slave reports at once after the handshake or truncation, not after up to 5 s.
//! - The slave refuses a data frame whose epoch is below the highest it has seen, or that
//!   names another start for a known epoch, and takes the epoch of bytes a Java master tags
//!   with the next epoch from the handshake list.
//! - The master refuses an ack beyond its end or beyond what it sent, a report before the
//!   handshake, a second live connection claiming a connected broker id (or its own), and a
//!   changed identity; a learner is never proposed nor counted.
//! - The master answers one handshake per connection (a second reply closes a Java slave).
//! - confirmOffset always follows the set (Java uses the max offset when the set has one
//!   member or `allAckInSyncStateSet` is off), and counts a connected member's ack even at 0.
//! - `isSyncFromLastFile` starts at the last segment, clamped to the min offset.

pub mod epoch;
pub mod frame;
#[cfg(feature = "fuzzing")]
#[cfg_attr(docsrs, doc(cfg(feature = "fuzzing")))]
#[doc(hidden)]
pub mod fuzzing;
pub mod sync_state;

mod error;
mod master;
mod slave;

pub use epoch::find_consistent_point;
pub use error::{CloseReason, EpochRefusal, PeerError};
pub use frame::FrameError;
pub use master::{
    AutoSwitchMaster, AutoSwitchMasterConfig, MasterEvent, MasterInput, MasterOutput, MasterStart,
    SlaveProgress,
};
pub use slave::{AutoSwitchSlave, AutoSwitchSlaveConfig, SlaveEvent, SlaveInput, SlaveOutput, SlaveState};
pub use sync_state::{BrokerId, SyncPolicy, SyncStateSet};
