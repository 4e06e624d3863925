//! The errors both protocols share. The core has three error channels (h11 / rustls style):
//!
//! - the caller misused the API: `handle_input` returns [`ApiMisuse`] and changes nothing;
//! - the peer misbehaved: the core emits a `Close` for the connection plus a `PeerError` event
//!   carrying the protocol's own peer error ([`classic::PeerError`](crate::classic::PeerError),
//!   [`autoswitch::PeerError`](crate::autoswitch::PeerError)); nothing is returned as an `Err`
//!   and nothing panics;
//! - an internal invariant broke: that is a bug, and the core panics with the reason.

use crate::log::Offset;
use crate::{ConnId, WaitId};

/// Why a replication wait ended without success.
#[derive(thiserror::Error, Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WaitError {
    /// No slave is connected, or the best one is `ha_max_gap_not_in_sync` or more behind
    /// (RocketMQ `SLAVE_NOT_AVAILABLE`).
    #[error("no slave is available to replicate to")]
    SlaveNotAvailable,
    /// Fewer slaves are in sync than the quorum needs (RocketMQ `IN_SYNC_REPLICAS_NOT_ENOUGH`).
    #[error("too few slaves are in sync for the quorum")]
    InSyncReplicasNotEnough,
    /// The deadline passed first (RocketMQ `FLUSH_SLAVE_TIMEOUT`).
    #[error("slaves did not acknowledge before the deadline")]
    Timeout,
    /// The caller cancelled the wait.
    #[error("the wait was cancelled")]
    Cancelled,
}

/// The caller broke the API contract. The call changed nothing.
#[derive(thiserror::Error, Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ApiMisuse {
    /// `now` is earlier than a previous call's.
    #[error("time went backwards")]
    TimeWentBackwards,
    /// `Accepted` for a connection id already in use.
    #[error("connection {0:?} already exists")]
    DuplicateConn(ConnId),
    /// An input names a connection the core never saw.
    #[error("connection {0:?} is unknown")]
    UnknownConn(ConnId),
    /// `Sent` without an outstanding transmit.
    #[error("connection {0:?} reported Sent with nothing in flight")]
    NothingInFlight(ConnId),
    /// `AwaitReplication` with an id that is still waiting.
    #[error("wait {0:?} already exists")]
    DuplicateWait(WaitId),
    /// `AwaitReplication` for bytes the core has not been told are appended.
    #[error("wait for offset {offset} beyond the appended end {end}")]
    WaitBeyondEnd {
        /// The offset asked for.
        offset: Offset,
        /// The last `Appended` end.
        end: Offset,
    },
    /// `Appended` with an end below an earlier one.
    #[error("log end went backwards from {previous} to {end}")]
    LogWentBackwards {
        /// The new end.
        end: Offset,
        /// The earlier end.
        previous: Offset,
    },
    /// `Retained` with a min offset below an earlier one or beyond the end.
    #[error("min offset {min} is invalid (previous {previous}, end {end})")]
    InvalidRetention {
        /// The new min offset.
        min: Offset,
        /// The earlier min offset.
        previous: Offset,
        /// The current end.
        end: Offset,
    },
    /// `Connected` while the slave did not ask to connect.
    #[error("Connected without a pending Connect")]
    UnexpectedConnected,
    /// `Appended` or `AppendFailed` beyond the end of the bytes the slave handed out in
    /// `Append`s: the caller reports storing bytes it was never given.
    #[error("appended end {end} is beyond {append_end}, the end of the bytes handed out to append")]
    AppendedBeyondAppendEnd {
        /// The end reported.
        end: Offset,
        /// One past the last byte of the last `Append`.
        append_end: Offset,
    },
    /// `Appended` beyond the bytes requested or below the previous end (AutoSwitch slave).
    #[error("appended end {end} is outside [{previous}, {requested}]")]
    AppendedOutOfRange {
        /// The end reported.
        end: Offset,
        /// The previous end.
        previous: Offset,
        /// One past the last byte requested.
        requested: Offset,
    },
    /// `Truncated` or `TruncateFailed` without a pending `Truncate`, or at another offset
    /// (AutoSwitch slave).
    #[error("truncation answer at {end:?} does not match the pending truncation {pending:?}")]
    UnexpectedTruncated {
        /// The end reported.
        end: Option<Offset>,
        /// The pending truncation point, if any.
        pending: Option<Offset>,
    },
    /// The AutoSwitch master's epoch cache cannot take this epoch.
    #[error("epoch refused: {0}")]
    Epoch(#[from] crate::log::EpochError),
}
