//! Status snapshots: what a master or slave service reports to status pages and metrics.

use std::net::SocketAddr;
use std::time::Duration;

use crate::BrokerRole;
use crate::log::Offset;
use crate::{ConnId, classic::SlaveState};

/// Why a master refuses puts for now (they get `SERVICE_NOT_AVAILABLE`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Fence {
    /// The master restarted after a crash and waits to hear from its slaves before appending:
    /// one of them may hold bytes it lost.
    Restart {
        /// Slaves still to report.
        waiting_for: usize,
    },
    /// A slave holds bytes past this master's end: the master lost data the slave has (a crash
    /// lost its unflushed tail). Appending would make the logs differ at the same offsets, so
    /// the master takes no puts until an operator resolves it (promote the slave, or rebuild
    /// it) and restarts the master.
    Diverged {
        /// The slave.
        slave: SocketAddr,
        /// Where the slave's log ends.
        reported: Offset,
        /// Where the master's log ended.
        end: Offset,
    },
    /// A trusted slave reported an offset inside this master's log that is not a record
    /// boundary of it: the two logs differ before that offset (the master lost its tail and
    /// took other records since). Streaming would splice two logs; an operator decides which
    /// copy is right.
    NotOnRecordBoundary {
        /// The slave.
        slave: SocketAddr,
        /// Its report.
        reported: Offset,
    },
}

impl std::fmt::Display for Fence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Restart { waiting_for } => {
                write!(f, "restarted after a crash: waiting for {waiting_for} slave(s) to report")
            }
            Self::Diverged { slave, reported, end } => write!(
                f,
                "slave {slave} holds bytes up to {reported}, past this master's end {end}: \
                 the master lost data the slave has; promote or rebuild the slave, then restart"
            ),
            Self::NotOnRecordBoundary { slave, reported } => write!(
                f,
                "slave {slave} reports offset {reported}, which is not a record boundary of this \
                 master's log: the logs differ; rebuild the slave or promote it, then restart"
            ),
        }
    }
}

/// One slave connection as a master's status shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectedSlave {
    /// The connection id.
    pub conn: ConnId,
    /// The slave's address.
    pub address: SocketAddr,
    /// Where streaming started; `None` before the first report.
    pub start: Option<Offset>,
    /// The latest ack; `None` before the first report.
    pub ack: Option<Offset>,
    /// Bytes the slave lacks.
    pub lag_bytes: u64,
    /// How long the slave has been behind.
    pub lag: Duration,
    /// Whether it is within `ha_max_gap_not_in_sync`.
    pub in_sync: bool,
    /// How long the connection has been up.
    pub connected_for: Duration,
    /// Log bytes sent on this connection.
    pub bytes_sent: u64,
    /// Whether the connection is identified as a replica (a loopback peer in protected mode,
    /// an allow-list entry, a TLS name, or in controller mode its broker id's published
    /// address): only such a connection fences the master.
    pub trusted: bool,
    /// Whether its acknowledgements count for SYNC waits (identified, or admitted by
    /// `haTrustAnyReplica`); a stranger's never do.
    pub counted: bool,
    /// The replica name its TLS client certificate carries; `None` for a plain link.
    pub identity: Option<String>,
}

/// Connections and reports the master refused since start, for status pages and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Refusals {
    /// Connections closed at accept: their address is not in the allow-list (or, in protected
    /// mode, not loopback).
    pub not_admitted: u64,
    /// Connections closed at accept: over the per-address or total connection limit.
    pub over_limit: u64,
    /// Connections closed without a complete first report in time.
    pub first_report_timeouts: u64,
    /// Connections closed to make room for a more trusted one (the slots were full).
    pub displaced: u64,
    /// Unidentified connections that reported past the master's end (`SlaveAhead`): refused,
    /// logged at ERROR naming the key that would let a replica fence, never fencing.
    pub untrusted_ahead: u64,
    /// Connections whose first report was not a record boundary (`SlaveDiverged`).
    pub diverged: u64,
    /// Identified connections whose report was [`IMPLAUSIBLE_AHEAD`](super::IMPLAUSIBLE_AHEAD)
    /// or more past the master's end (stray bytes or a TLS ClientHello, never a real offset):
    /// refused, never fencing.
    pub implausible_reports: u64,
    /// Plain connections closed unread because TLS is required (`haTlsMode=required`).
    pub plain_refused: u64,
    /// TLS connections refused: a failed handshake (no client certificate, another CA) or a
    /// certificate naming no listed replica.
    pub tls_refused: u64,
    /// Controller mode: handshakes refused because the broker id claimed is bound to another
    /// identity (the HA address its member published, or the configuration's).
    pub identity_refused: u64,
    /// The latest refusal, in words (address and reason).
    pub last: Option<String>,
}

/// A master's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterStatus {
    /// `AsyncMaster` or `SyncMaster`.
    pub role: BrokerRole,
    /// The log's min offset.
    pub min_offset: Offset,
    /// The log's end.
    pub max_offset: Offset,
    /// One past the last durable byte.
    pub flushed_offset: Offset,
    /// The offset replicated per the ack policy, if any.
    pub replicated_offset: Option<Offset>,
    /// Replication waits pending.
    pub pending_waits: usize,
    /// Every live slave connection.
    pub slaves: Vec<ConnectedSlave>,
    /// Log bytes sent to slaves since start.
    pub bytes_replicated: u64,
    /// Connections accepted since start.
    pub connections_accepted: u64,
    /// Connections closed for a peer error since start.
    pub peer_errors: u64,
    /// Why puts are refused, if they are.
    pub fence: Option<Fence>,
    /// Connections and reports refused since start.
    pub refusals: Refusals,
    /// Controller mode: epoch, confirmOffset, sync-state-set; `None` for the classic protocol.
    pub autoswitch: Option<super::AutoSwitchMasterStatus>,
}

/// A slave's status: its side of the master connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlaveStatus {
    /// Where the connection cycle is.
    pub state: SlaveState,
    /// The master's HA address.
    pub master_address: String,
    /// One past the last stored byte.
    pub max_offset: Offset,
    /// One past the last durable byte.
    pub flushed_offset: Offset,
    /// The latest report sent to the master (the slave's ack).
    pub ack_offset: Option<Offset>,
    /// The furthest offset the master has shown.
    pub master_offset: Option<Offset>,
    /// Bytes the master has shown that the slave has not acknowledged.
    pub lag_bytes: u64,
    /// How long the slave has been behind what the master has shown; zero when caught up.
    pub lag: Duration,
    /// How long since the master was last heard from; `None` when not connected.
    pub since_last_read: Option<Duration>,
    /// Connections made since start.
    pub connections: u64,
    /// Peer errors since start.
    pub peer_errors: u64,
    /// Why the last append failed (the log's error, e.g. bytes that are not valid records at
    /// an offset), until an append succeeds again.
    pub append_error: Option<String>,
    /// Connections on which an append failed, since start (the appends already handed out
    /// after the first failure fail with it and are not counted).
    pub append_failures: u64,
    /// Controller mode: master epoch, confirmOffset, epochs; `None` for the classic protocol.
    pub autoswitch: Option<super::AutoSwitchSlaveStatus>,
}
