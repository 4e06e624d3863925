//! The three error channels of the core (h11 / rustls style):
//!
//! - the caller misused the API: `handle_input` returns [`ApiMisuse`] and changes nothing;
//! - the peer misbehaved: the core emits a `Close` for the connection plus a `PeerError` event
//!   carrying a [`PeerError`]; nothing is returned as an `Err` and nothing panics;
//! - an internal invariant broke: that is a bug, and the core panics with the reason.

use crate::frame::FrameError;
use crate::log::Offset;
use crate::{ConnId, WaitId};

/// A peer broke the protocol or cannot be served. The connection is closed.
#[derive(thiserror::Error, Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PeerError {
    /// The byte stream was malformed.
    #[error("malformed frame: {0}")]
    Frame(#[from] FrameError),
    /// A slave's first report is past the master's end: the slave holds bytes the master does
    /// not (the master lost its unflushed tail, or the slave belongs to another master).
    /// RocketMQ 5.x would later stream mismatched bytes into it (#2706, #3349).
    #[error("slave reports offset {reported}, beyond the master's end {end}: the logs have diverged")]
    SlaveAhead {
        /// The slave's first report.
        reported: Offset,
        /// The master's end.
        end: Offset,
    },
    /// A slave's position is below the master's min offset: retention deleted the bytes it
    /// needs. RocketMQ would heartbeat it forever (#3388).
    #[error("slave needs offset {reported}, but the master's log starts at {min}: retention removed it")]
    SlaveBehindRetention {
        /// Where the slave needs to continue.
        reported: Offset,
        /// The master's min offset.
        min: Offset,
    },
    /// An ack past the master's end: forged or diverged (RocketMQ #3015, #1155).
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
    /// A slave's first report does not fall on a record boundary of the master's log: the logs
    /// differ before that offset (the master lost its tail and appended other records since,
    /// or the slave belongs to another master). Streaming from mid-record would splice two logs.
    #[error(
        "slave reports offset {reported}, which is not a record boundary of the master's log: the logs have diverged"
    )]
    SlaveDiverged {
        /// The slave's first report.
        reported: Offset,
    },
    /// An empty slave was offered a first offset beyond its sanity bound
    /// (`SlaveConfig::max_first_offset`): no real log is that long.
    #[error("master starts the stream at offset {offset}, beyond the bound {max} an empty slave adopts")]
    FirstOffsetTooLarge {
        /// The frame's offset.
        offset: Offset,
        /// The configured bound.
        max: Offset,
    },
    /// A push frame's offset is not where the slave's log continues.
    #[error("master pushed offset {got}, but the slave's log continues at {expected}")]
    OffsetMismatch {
        /// The slave's end.
        expected: Offset,
        /// The frame's offset.
        got: Offset,
    },
}

/// Why the core closed a connection.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CloseReason {
    /// The peer broke the protocol or cannot be served.
    Peer(PeerError),
    /// Nothing was read for `housekeeping_interval`.
    HousekeepingTimeout,
    /// The local log failed to store or flush replicated bytes (slave).
    StoreFailed,
    /// The same slave host connected again; this older connection is stale (master).
    Superseded,
    /// The connection sent no complete first report within `first_report_timeout` (master).
    FirstReportTimeout,
    /// Closed to make room for a more trusted connection: the connection table or a limit
    /// of it was full (master).
    Displaced,
}

impl std::fmt::Display for CloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Peer(e) => write!(f, "{e}"),
            Self::HousekeepingTimeout => f.write_str("nothing read within the housekeeping interval"),
            Self::StoreFailed => f.write_str("the local log failed"),
            Self::Superseded => f.write_str("the same slave host connected again"),
            Self::FirstReportTimeout => {
                f.write_str("no complete first report within the first-report timeout")
            }
            Self::Displaced => f.write_str("displaced by a more trusted connection: the slots were full"),
        }
    }
}

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
    Epoch(#[from] crate::autoswitch::EpochError),
}
