//! The classic protocol's peer errors and close reasons. The errors both protocols share
//! ([`ApiMisuse`](crate::ApiMisuse), [`WaitError`](crate::WaitError)) live at the crate root.

use super::frame::FrameError;
use crate::log::Offset;

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
