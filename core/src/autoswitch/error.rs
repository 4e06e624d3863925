//! The AutoSwitch machines' errors, in the crate's three channels: [`ApiMisuse`](crate::ApiMisuse) (the crate's) returned to a
//! caller that broke the contract, [`PeerError`] raised with a `Close` when the peer misbehaved,
//! and a panic only for a broken internal invariant.

use super::frame::FrameError;
use crate::log::EpochError;
use crate::log::Offset;

/// An AutoSwitch peer broke the protocol or cannot be served; the connection is closed.
#[derive(thiserror::Error, Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PeerError {
    /// The byte stream was malformed.
    #[error("malformed frame: {0}")]
    Frame(#[from] FrameError),
    /// The master's handshake lists its epochs out of order.
    #[error("master's epoch list is invalid: {0}")]
    InvalidEpochList(EpochError),
    /// No local epoch exists on the master with the same start: the logs share nothing
    /// provable (Java's `findConsistentPoint` returns -1). An operator must repair the store.
    #[error(
        "no epoch of the local log (last {local_last_epoch}) matches the master's (last {master_last_epoch})"
    )]
    NoConsistentPoint {
        /// The local last epoch.
        local_last_epoch: i32,
        /// The master's last epoch.
        master_last_epoch: i32,
    },
    /// The master streamed before answering the handshake.
    #[error("master sent a transfer frame before its handshake reply")]
    TransferBeforeHandshake,
    /// A transfer frame's epoch is below the highest the slave has seen.
    #[error("transfer frame of epoch {epoch}, below the highest epoch seen {highest}")]
    EpochWentBackwards {
        /// The frame's epoch.
        epoch: i32,
        /// The highest epoch seen.
        highest: i32,
    },
    /// A transfer frame's epoch cannot be recorded (its start goes backwards, or it names a
    /// start different from the one already recorded for that epoch).
    #[error("transfer frame's epoch {epoch} at {start} cannot be recorded: {reason}")]
    EpochRefused {
        /// The frame's epoch.
        epoch: i32,
        /// The frame's epoch start.
        start: Offset,
        /// Why.
        reason: EpochRefusal,
    },
    /// A transfer frame's offset is not where the slave's log continues.
    #[error("master sent offset {got}, but the slave's log continues at {expected}")]
    OffsetMismatch {
        /// The slave's end.
        expected: Offset,
        /// The frame's offset.
        got: Offset,
    },
    /// An empty slave was offered a first offset beyond its sanity bound.
    #[error("master starts the stream at offset {offset}, beyond the bound {max} an empty slave adopts")]
    FirstOffsetTooLarge {
        /// The frame's offset.
        offset: Offset,
        /// The configured bound.
        max: Offset,
    },
    /// A report arrived before the slave's handshake.
    #[error("slave reported before its handshake")]
    ReportBeforeHandshake,
    /// An ack past the master's end: forged or diverged (the check 5.x lost).
    #[error("slave acknowledges offset {ack}, beyond the master's end {end}")]
    AckBeyondEnd {
        /// The ack as sent.
        ack: Offset,
        /// The master's end.
        end: Offset,
    },
    /// An ack past what this connection has been sent: the slave cannot hold those bytes.
    #[error("slave acknowledges offset {ack}, beyond the {sent} bytes sent to it")]
    AckBeyondSent {
        /// The ack as sent.
        ack: Offset,
        /// One past the last byte sent on this connection.
        sent: Offset,
    },
    /// An ack below the previous one on the same connection.
    #[error("slave acknowledges offset {ack}, below its previous ack {previous}")]
    AckWentBackwards {
        /// The ack as sent.
        ack: Offset,
        /// The previous ack.
        previous: Offset,
    },
    /// A slave's position is below the master's min offset: retention deleted what it needs.
    #[error("slave needs offset {reported}, but the master's log starts at {min}")]
    SlaveBehindRetention {
        /// Where the slave needs to continue.
        reported: Offset,
        /// The master's min offset.
        min: Offset,
    },
    /// A slave's first report is not a message boundary of the master's log: the logs differ
    /// before it (a slave without epochs cannot be checked otherwise).
    #[error("slave acknowledges offset {reported}, which is not a message boundary of the master's log")]
    SlaveDiverged {
        /// The first report's offset.
        reported: Offset,
    },
    /// The master's last epoch is below the epoch the controller said it was elected in: a
    /// stale master (a former master that has not learned it was replaced). Refused before
    /// anything is truncated; the slave tries again after the back-off.
    #[error(
        "the master's last epoch {master_last_epoch} is below the epoch {elected} it was elected in: \
         a stale master; not following it"
    )]
    MasterBehindElectedEpoch {
        /// The master's last epoch (the lower of its handshake's last epoch and its list's).
        master_last_epoch: i32,
        /// The epoch the slave was told to follow.
        elected: i32,
    },
    /// The master's last epoch is below this log's last epoch: this log holds a newer epoch
    /// than the master, which is stale. Refused before anything is truncated.
    #[error(
        "the master's last epoch {master_last_epoch} is below this log's last epoch {local_last_epoch}: \
         a stale master; not following it"
    )]
    MasterBehindLocalEpoch {
        /// The master's last epoch.
        master_last_epoch: i32,
        /// This log's last epoch.
        local_last_epoch: i32,
    },
    /// The master announced (in its handshake or a transfer frame) an epoch above the one the
    /// controller said it was elected in: a rogue or misconfigured master. Refused before the
    /// epoch, or anything else, is written.
    #[error(
        "the master announces epoch {epoch}, above the epoch {elected} it was elected in; not recording it"
    )]
    EpochAboveElected {
        /// The epoch announced.
        epoch: i32,
        /// The epoch the slave was told to follow.
        elected: i32,
    },
    /// Following the master would truncate this log to `point`, below the confirmOffset the
    /// slave recorded: confirmed bytes would be lost. Refused, and nothing is truncated, unless
    /// the operator allowed dropping exactly `[point, confirm_offset)`
    /// ([`AutoSwitchSlaveConfig::drop_confirmed`](super::AutoSwitchSlaveConfig::drop_confirmed),
    /// the broker key `haSlaveDropConfirmed`).
    #[error(
        "following the master would truncate this log to {point}, below the confirmOffset {confirm_offset} \
         it recorded: {bytes} confirmed bytes [{point}, {confirm_offset}) would be dropped; to drop exactly \
         them, set haSlaveDropConfirmed={point}-{confirm_offset}",
        bytes = confirm_offset - point
    )]
    WouldTruncateConfirmed {
        /// The consistent point with the master's log.
        point: Offset,
        /// The confirmOffset this slave recorded.
        confirm_offset: Offset,
    },
    /// A second handshake on a connection that already shook hands with another identity.
    #[error("slave changed its identity from broker {previous} to {claimed} on one connection")]
    IdentityChanged {
        /// The id first declared.
        previous: i64,
        /// The id now claimed.
        claimed: i64,
    },
}

/// Why an epoch from a transfer frame was refused.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EpochRefusal {
    /// The epoch cache refused it.
    Cache(EpochError),
    /// The slave already holds this epoch with another start.
    StartDiffers {
        /// The start recorded locally.
        recorded: Offset,
    },
}

impl std::fmt::Display for EpochRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cache(e) => write!(f, "{e}"),
            Self::StartDiffers { recorded } => write!(f, "the epoch is recorded as starting at {recorded}"),
        }
    }
}

/// Why an AutoSwitch machine closed a connection.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CloseReason {
    /// The peer broke the protocol or cannot be served.
    Peer(PeerError),
    /// Nothing complete was read for `housekeeping_interval`.
    HousekeepingTimeout,
    /// No complete handshake arrived within `handshake_timeout` (master).
    HandshakeTimeout,
    /// The local store failed to append, truncate or persist epochs (slave).
    StoreFailed,
    /// Another live connection already holds this broker id (master).
    DuplicateBrokerId {
        /// The id claimed twice.
        broker_id: i64,
    },
    /// The driver asked for it.
    Evicted,
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Peer(e) => write!(f, "{e}"),
            Self::HousekeepingTimeout => f.write_str("nothing read within the housekeeping interval"),
            Self::HandshakeTimeout => f.write_str("no handshake within the handshake timeout"),
            Self::StoreFailed => f.write_str("the local store failed"),
            Self::DuplicateBrokerId { broker_id } => {
                write!(f, "broker id {broker_id} is already connected")
            }
            Self::Evicted => f.write_str("evicted by the driver"),
        }
    }
}
