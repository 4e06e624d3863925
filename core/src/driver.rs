//! What every runtime adapter needs, written once and synchronously: service configuration,
//! the bookkeeping around a [`Master`] (connection sinks, wait replies, status), the put-status
//! rules, and the status snapshots the adapters return.
//!
//! An adapter supplies the asynchronous parts — sockets, channels, timers, tasks — by
//! implementing [`ConnSink`] and [`WaitSink`] over its own channels, and runs one task that owns
//! a [`MasterDriver`]: feed it, call [`MasterDriver::drain`], sleep until the instant it returns
//! or the next command.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use tracing::{debug, error, info, warn};

use crate::config::{ConfigError, MasterConfig, SlaveConfig};
use crate::error::{ApiMisuse, PeerError, WaitError};
use crate::frame::PUSH_HEADER_LEN;
use crate::frame::REPORT_LEN;
use crate::log::LogWrite;
use crate::log::{LogBounds, LogSpan, MessageLog, Offset, PutResult, PutStatus};
use crate::{
    ConnId, Master, MasterEvent, MasterInput, MasterOutput, Slave, SlaveEvent, SlaveInput, SlaveOutput,
    SlaveState, WaitId,
};

/// RocketMQ `slaveTimeout`: how long a SYNC_MASTER put waits for slaves.
pub const DEFAULT_SLAVE_TIMEOUT: Duration = Duration::from_secs(3);
/// RocketMQ `syncFlushTimeout`: how long a SYNC_FLUSH put waits for the disk.
pub const DEFAULT_SYNC_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);
/// RocketMQ's slave connect timeout.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// RocketMQ `brokerRole`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum BrokerRole {
    /// A master whose puts do not wait for slaves.
    #[default]
    AsyncMaster,
    /// A master whose puts wait for slave acknowledgements, per the ack policy.
    SyncMaster,
    /// A slave: replicates from a master and takes no puts.
    Slave,
}

impl BrokerRole {
    /// RocketMQ's spelling, e.g. `SYNC_MASTER`.
    pub fn rocketmq_name(self) -> &'static str {
        match self {
            Self::AsyncMaster => "ASYNC_MASTER",
            Self::SyncMaster => "SYNC_MASTER",
            Self::Slave => "SLAVE",
        }
    }
}

/// RocketMQ `flushDiskType`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum FlushDiskType {
    /// Flush in the background; puts do not wait for the disk.
    #[default]
    AsyncFlush,
    /// Group commit; puts wait until their bytes are durable.
    SyncFlush,
}

impl FlushDiskType {
    /// RocketMQ's spelling, e.g. `SYNC_FLUSH`.
    pub fn rocketmq_name(self) -> &'static str {
        match self {
            Self::AsyncFlush => "ASYNC_FLUSH",
            Self::SyncFlush => "SYNC_FLUSH",
        }
    }
}

/// Configuration of a master service (the protocol core plus the put path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterServiceConfig {
    /// The protocol core.
    pub core: MasterConfig,
    /// `AsyncMaster` or `SyncMaster`.
    pub role: BrokerRole,
    /// Whether puts wait for the disk.
    pub flush_disk_type: FlushDiskType,
    /// How long a SYNC_MASTER put waits for slaves (`slaveTimeout`).
    pub slave_timeout: Duration,
    /// How long a SYNC_FLUSH put waits for the disk (`syncFlushTimeout`).
    pub sync_flush_timeout: Duration,
    /// Refuse puts until this many slaves have reported (0: take puts at once). Set it to the
    /// number of slaves after a crash recovery: a slave may hold bytes the master lost, and the
    /// master must not append over that offset before it has heard from every slave.
    pub restart_fence: usize,
}

impl Default for MasterServiceConfig {
    fn default() -> Self {
        Self {
            core: MasterConfig::default(),
            role: BrokerRole::default(),
            flush_disk_type: FlushDiskType::default(),
            slave_timeout: DEFAULT_SLAVE_TIMEOUT,
            sync_flush_timeout: DEFAULT_SYNC_FLUSH_TIMEOUT,
            restart_fence: 0,
        }
    }
}

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
        }
    }
}

impl MasterServiceConfig {
    /// Checks every field, naming the first that cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.core.validate()?;
        if self.role == BrokerRole::Slave {
            return Err(ConfigError::Invalid {
                field: "role",
                value: "SLAVE".into(),
                reason: "a master service needs ASYNC_MASTER or SYNC_MASTER",
            });
        }
        for (field, value) in
            [("slave_timeout", self.slave_timeout), ("sync_flush_timeout", self.sync_flush_timeout)]
        {
            if value.is_zero() {
                return Err(ConfigError::Invalid {
                    field,
                    value: format!("{value:?}"),
                    reason: "must be longer than zero",
                });
            }
        }
        Ok(())
    }
}

/// Configuration of a slave service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlaveServiceConfig {
    /// The protocol core.
    pub core: SlaveConfig,
    /// The master's HA address, `host:port` (`haMasterAddress`).
    pub master_address: String,
    /// How long one connection attempt may take.
    pub connect_timeout: Duration,
}

impl SlaveServiceConfig {
    /// A slave of the master at `master_address`, with defaults otherwise.
    pub fn new(master_address: impl Into<String>) -> Self {
        Self {
            core: SlaveConfig::default(),
            master_address: master_address.into(),
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
        }
    }

    /// Checks every field, naming the first that cannot work.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.core.validate()?;
        // RocketMQ ignores addresses shorter than 6 characters (HA_ADDRESS_MIN_LENGTH).
        if self.master_address.len() < 6 || !self.master_address.contains(':') {
            return Err(ConfigError::Invalid {
                field: "master_address",
                value: format!("{:?}", self.master_address),
                reason: "must be host:port",
            });
        }
        if self.connect_timeout.is_zero() {
            return Err(ConfigError::Invalid {
                field: "connect_timeout",
                value: format!("{:?}", self.connect_timeout),
                reason: "must be longer than zero",
            });
        }
        Ok(())
    }
}

/// A put whose message is appended and which may still wait for the disk and for slaves: the
/// part of `MasterHandle::put` both adapters share. The adapter starts it, runs the waits it
/// asks for side by side (they do not depend on each other), and finishes it with their outcomes.
#[derive(Debug)]
#[must_use]
pub struct PendingPut {
    appended: PutResult,
    /// Wait until the message is durable, up to `sync_flush_timeout` (SYNC_FLUSH).
    pub flush: bool,
    /// Wait for the slaves the ack policy needs, up to `slave_timeout` (SYNC_MASTER). When
    /// false, the adapter still wakes its master task, so the frame goes out at once.
    pub replicate: bool,
}

impl PendingPut {
    /// Appends `message` unless the service `refused` puts (stopping, or fenced). A put that
    /// ends here (refused, or the log did not store it) is returned as `Err` with its result.
    pub fn start<L: MessageLog>(
        config: &MasterServiceConfig,
        log: &L,
        message: L::Message,
        refused: bool,
    ) -> Result<Self, PutResult> {
        if refused {
            return Err(PutResult::refused(PutStatus::ServiceNotAvailable));
        }
        let appended = log.put(message);
        if appended.status != PutStatus::PutOk {
            return Err(appended);
        }
        Ok(Self {
            appended,
            flush: config.flush_disk_type == FlushDiskType::SyncFlush,
            replicate: config.role == BrokerRole::SyncMaster,
        })
    }

    /// One past the message's last byte: what both waits wait for.
    pub fn end(&self) -> Offset {
        self.appended.end()
    }

    /// The put's result from the outcomes of the waits it asked for (`None` for a wait it did
    /// not ask for; `Some(true)` when the bytes became durable in time).
    pub fn finish(self, flushed: Option<bool>, replicated: Option<Result<Offset, WaitError>>) -> PutResult {
        PutResult { status: put_status(self.appended.status, flushed, replicated), ..self.appended }
    }
}

/// The status a put ends with, from its stages, in RocketMQ's precedence: a refused append
/// stands; a flush failure overrides success; a replication failure overrides that.
///
/// `flushed` is `None` when the put did not wait for the disk, `Some(true)` when the bytes
/// became durable in time. `replicated` is `None` when it did not wait for slaves.
pub fn put_status(
    appended: PutStatus,
    flushed: Option<bool>,
    replicated: Option<Result<Offset, WaitError>>,
) -> PutStatus {
    if appended != PutStatus::PutOk {
        return appended;
    }
    let mut status = PutStatus::PutOk;
    if flushed == Some(false) {
        status = PutStatus::FlushDiskTimeout;
    }
    match replicated {
        None | Some(Ok(_)) => status,
        Some(Err(WaitError::SlaveNotAvailable)) => PutStatus::SlaveNotAvailable,
        Some(Err(WaitError::InSyncReplicasNotEnough)) => PutStatus::InSyncReplicasNotEnough,
        Some(Err(WaitError::Timeout)) => PutStatus::FlushSlaveTimeout,
        Some(Err(WaitError::Cancelled)) => PutStatus::ServiceNotAvailable,
    }
}

/// Why a service could not start.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum StartError {
    /// The configuration cannot work.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// The HA listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// An adapter's reply channel for one answer (a status, a wait outcome).
pub trait Reply<T> {
    /// Delivers the answer; a receiver that is gone is ignored.
    fn send(self, value: T);
}

/// What an adapter's connection tasks and handles send to the task that owns the
/// [`MasterDriver`]. `C` is the adapter's [`ConnSink`], `W` its wait reply, `S` its status reply.
pub enum MasterCommand<C, W, S> {
    /// A slave connected; the adapter chose `conn`.
    Accepted {
        /// The connection.
        conn: ConnId,
        /// The slave's address.
        peer: SocketAddr,
        /// The connection's writer.
        sink: C,
    },
    /// Bytes from a slave.
    Received {
        /// The connection.
        conn: ConnId,
        /// The bytes.
        data: Bytes,
    },
    /// A connection's writer finished one transmit.
    Sent {
        /// The connection.
        conn: ConnId,
    },
    /// A connection's teardown finished.
    Closed {
        /// The connection.
        conn: ConnId,
    },
    /// A SYNC_MASTER put waits for `offset` until `deadline`.
    Wait {
        /// The put's end offset.
        offset: Offset,
        /// When to give up.
        deadline: Instant,
        /// Where the outcome goes.
        reply: W,
    },
    /// A status snapshot is wanted.
    Status {
        /// Where it goes.
        reply: S,
    },
}

/// One frame for a connection's writer: write `header`, then the log bytes of `body`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The 12-byte push header.
    pub header: [u8; PUSH_HEADER_LEN],
    /// The log bytes to follow; `None` for a heartbeat.
    pub body: Option<LogSpan>,
}

/// An adapter's handle on one connection's writer.
pub trait ConnSink {
    /// Queues a frame for the writer. The core never has more than `max_inflight` frames out
    /// per connection, so a channel of that capacity never overflows. A writer that is gone can
    /// be ignored: its connection's teardown will report `closed`.
    fn transmit(&mut self, transmit: Transmit);

    /// Stops both directions of the connection. The connection's teardown must still call
    /// [`MasterDriver::closed`] exactly once.
    fn close(&mut self);
}

/// An adapter's reply channel for one replication wait.
pub trait WaitSink {
    /// Delivers the outcome. Called exactly once.
    fn complete(self, result: Result<Offset, WaitError>);
}

/// One slave connection as a master's status shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlaveLink {
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
    pub slaves: Vec<SlaveLink>,
    /// Log bytes sent to slaves since start.
    pub bytes_replicated: u64,
    /// Connections accepted since start.
    pub connections_accepted: u64,
    /// Connections closed for a peer error since start.
    pub peer_errors: u64,
    /// Why puts are refused, if they are.
    pub fence: Option<Fence>,
}

/// A slave's status: its side of the master connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlaveStatus {
    /// Where the connection cycle is.
    pub state: SlaveLinkState,
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
    /// Appends that failed since start.
    pub append_failures: u64,
}

/// A slave's connection state, without instants.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SlaveLinkState {
    /// Waiting out the reconnect back-off.
    Disconnected,
    /// A connection attempt is under way.
    Connecting,
    /// Connected and replicating.
    Streaming,
}

impl From<SlaveState> for SlaveLinkState {
    fn from(s: SlaveState) -> Self {
        match s {
            SlaveState::Disconnected { .. } => Self::Disconnected,
            SlaveState::Connecting => Self::Connecting,
            SlaveState::Streaming => Self::Streaming,
        }
    }
}

struct ConnEntry<C> {
    sink: C,
    address: SocketAddr,
    since: Instant,
}

/// A [`Master`] with the bookkeeping every adapter needs: it routes transmits to connection
/// sinks, completes wait sinks, follows the log's bounds, and builds status snapshots.
pub struct MasterDriver<C, W> {
    master: Master,
    now: Instant,
    conns: BTreeMap<ConnId, ConnEntry<C>>,
    waits: BTreeMap<WaitId, W>,
    next_wait: u64,
    bytes_replicated: u64,
    connections_accepted: u64,
    peer_errors: u64,
    fence: Option<Fence>,
}

impl<C: ConnSink, W: WaitSink> MasterDriver<C, W> {
    /// Applies one command. `log` is read for its current bounds (every put wakes the driver
    /// through a command or [`log_changed`](Self::log_changed)).
    pub fn apply<S: Reply<MasterStatus>, L: MessageLog>(
        &mut self,
        now: Instant,
        command: MasterCommand<C, W, S>,
        log: &L,
        role: BrokerRole,
    ) {
        match command {
            MasterCommand::Accepted { conn, peer, sink } => self.accept(now, conn, peer, sink),
            MasterCommand::Received { conn, data } => self.received(now, conn, data),
            MasterCommand::Sent { conn } => self.sent(now, conn),
            MasterCommand::Closed { conn } => self.closed(now, conn),
            MasterCommand::Wait { offset, deadline, reply } => {
                self.log_changed(now, log.bounds());
                self.await_replication(now, offset, deadline, reply);
            }
            MasterCommand::Status { reply } => {
                self.log_changed(now, log.bounds());
                reply.send(self.status(now, role, log.flushed()));
            }
        }
    }

    /// A driver for a log that currently spans `log`.
    pub fn new(config: MasterConfig, now: Instant, log: LogBounds) -> Result<Self, ConfigError> {
        Ok(Self {
            master: Master::new(config, now, log)?,
            now,
            conns: BTreeMap::new(),
            waits: BTreeMap::new(),
            next_wait: 0,
            bytes_replicated: 0,
            connections_accepted: 0,
            peer_errors: 0,
            fence: None,
        })
    }

    /// The protocol core.
    pub fn master(&self) -> &Master {
        &self.master
    }

    /// Refuses puts until `slaves` slaves have reported (see
    /// [`MasterServiceConfig::restart_fence`]). 0 does nothing.
    pub fn set_restart_fence(&mut self, slaves: usize) {
        if slaves > 0 && self.fence.is_none() {
            warn!(slaves, "restarted after a crash: refusing puts until the slaves report");
            self.fence = Some(Fence::Restart { waiting_for: slaves });
        }
    }

    /// Why puts are refused now, if they are. Adapters check it before every put.
    pub fn fence(&self) -> Option<&Fence> {
        self.fence.as_ref()
    }

    /// A new connection, with the id the adapter chose (unique among live connections).
    ///
    /// An older connection from the same host (not loopback) is closed first: the classic
    /// protocol carries no slave identity, and a slave whose machine restarted can reconnect
    /// before its dead connection times out; counting both would count one slave twice.
    pub fn accept(&mut self, now: Instant, conn: ConnId, address: SocketAddr, sink: C) {
        if !address.ip().is_loopback() {
            let stale: Vec<ConnId> =
                self.conns.iter().filter(|(_, e)| e.address.ip() == address.ip()).map(|(&c, _)| c).collect();
            for old in stale {
                warn!(conn = ?old, peer = %address.ip(), "the same slave host connected again: closing its older connection");
                self.feed(now, MasterInput::Evict { conn: old, reason: crate::CloseReason::Superseded });
            }
        }
        self.feed(now, MasterInput::Accepted { conn });
        self.connections_accepted += 1;
        self.conns.insert(conn, ConnEntry { sink, address, since: now });
    }

    /// Bytes from a connection.
    pub fn received(&mut self, now: Instant, conn: ConnId, data: Bytes) {
        self.feed(now, MasterInput::Received { conn, data });
    }

    /// A connection's writer finished one transmit.
    pub fn sent(&mut self, now: Instant, conn: ConnId) {
        self.feed(now, MasterInput::Sent { conn });
    }

    /// A connection's teardown finished (whoever started it).
    pub fn closed(&mut self, now: Instant, conn: ConnId) {
        self.conns.remove(&conn);
        self.feed(now, MasterInput::Closed { conn });
    }

    /// The log's bounds as read from the log now; feeds `Appended` and `Retained` as needed.
    /// Safe to call with stale or repeated bounds.
    pub fn log_changed(&mut self, now: Instant, log: LogBounds) {
        let known = self.master.log_bounds();
        if log.max > known.max {
            self.feed(now, MasterInput::Appended { end: log.max });
        }
        let end = log.max.max(known.max);
        if log.min > known.min && log.min <= end {
            self.feed(now, MasterInput::Retained { min: log.min });
        }
    }

    /// Waits until slaves hold every byte before `offset`, or `deadline`; `sink` gets the
    /// outcome. Call [`log_changed`](Self::log_changed) with bounds covering `offset` first.
    pub fn await_replication(&mut self, now: Instant, offset: Offset, deadline: Instant, sink: W) {
        let id = WaitId(self.next_wait);
        self.next_wait += 1;
        self.waits.insert(id, sink);
        if let Err(e) = self.master.handle_input(now, MasterInput::AwaitReplication { id, offset, deadline })
        {
            error!(%e, offset, "replication wait refused");
            if let Some(sink) = self.waits.remove(&id) {
                sink.complete(Err(WaitError::Cancelled));
            }
        }
        self.now = self.now.max(now);
    }

    /// The instant of the last `Timeout` output has come (or any time: spurious calls are fine).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = self.now.max(now);
        self.master.handle_timeout(now);
    }

    /// Performs every pending output and returns when to call `handle_timeout` next.
    pub fn drain(&mut self) -> Instant {
        loop {
            match self.master.poll_output() {
                MasterOutput::Timeout(at) => return at,
                MasterOutput::Transmit { conn, header, body } => {
                    if let Some(entry) = self.conns.get_mut(&conn) {
                        if let Some(span) = body {
                            self.bytes_replicated += u64::from(span.len);
                        }
                        entry.sink.transmit(Transmit { header, body });
                    }
                }
                MasterOutput::Close { conn, reason } => {
                    if let Some(entry) = self.conns.get_mut(&conn) {
                        info!(?conn, peer = %entry.address, %reason, "closing slave connection");
                        entry.sink.close();
                    }
                }
                MasterOutput::Event(event) => self.on_event(event),
            }
        }
    }

    /// Closes every connection and cancels every wait (service shutdown).
    pub fn shutdown(&mut self) {
        for entry in self.conns.values_mut() {
            entry.sink.close();
        }
        let ids: Vec<WaitId> = self.waits.keys().copied().collect();
        for id in ids {
            let _ = self.master.handle_input(self.now, MasterInput::CancelWait { id });
        }
        let _ = self.drain();
    }

    /// Replication waits pending.
    pub fn pending_waits(&self) -> usize {
        self.waits.len()
    }

    /// A status snapshot; `role` and `flushed_offset` come from the adapter and the log.
    pub fn status(&self, now: Instant, role: BrokerRole, flushed_offset: Offset) -> MasterStatus {
        let log = self.master.log_bounds();
        let slaves = self
            .master
            .slaves()
            .filter_map(|info| {
                let entry = self.conns.get(&info.conn)?;
                Some(SlaveLink {
                    conn: info.conn,
                    address: entry.address,
                    start: info.start,
                    ack: info.ack,
                    lag_bytes: info.lag_bytes,
                    lag: info.lag,
                    in_sync: info.in_sync,
                    connected_for: now.saturating_duration_since(entry.since),
                    bytes_sent: info.bytes_sent,
                })
            })
            .collect();
        MasterStatus {
            role,
            min_offset: log.min,
            max_offset: log.max,
            flushed_offset,
            replicated_offset: self.master.replicated(),
            pending_waits: self.waits.len(),
            slaves,
            bytes_replicated: self.bytes_replicated,
            connections_accepted: self.connections_accepted,
            peer_errors: self.peer_errors,
            fence: self.fence.clone(),
        }
    }

    fn feed(&mut self, now: Instant, input: MasterInput) {
        self.now = self.now.max(now);
        if let Err(e) = self.master.handle_input(now, input) {
            // The driver only forwards what its connections and log report, so this is a bug in
            // the adapter; refusing the input leaves the core consistent.
            error!(%e, "master driver fed an invalid input");
            debug_assert!(matches!(e, ApiMisuse::TimeWentBackwards), "driver misuse: {e}");
        }
    }

    /// A slave reported (and was not ahead): one fewer to wait for after a restart.
    fn count_report(&mut self) {
        if let Some(Fence::Restart { waiting_for }) = &mut self.fence {
            *waiting_for = waiting_for.saturating_sub(1);
            if *waiting_for == 0 {
                info!("every slave reported after the restart: taking puts");
                self.fence = None;
            }
        }
    }

    fn on_event(&mut self, event: MasterEvent) {
        match event {
            MasterEvent::WaitDone { id, result } => {
                if let Some(sink) = self.waits.remove(&id) {
                    sink.complete(result);
                }
            }
            MasterEvent::PeerError { conn, error } => {
                self.peer_errors += 1;
                let peer = self.conns.get(&conn).map(|e| e.address);
                warn!(?conn, ?peer, %error, "slave broke the protocol");
                if let (PeerError::SlaveAhead { reported, end }, Some(slave)) = (error, peer) {
                    let fence = Fence::Diverged { slave, reported, end };
                    error!(%fence, "refusing puts");
                    self.fence = Some(fence);
                } else if let PeerError::SlaveBehindRetention { .. } = error {
                    self.count_report();
                }
            }
            MasterEvent::SlaveStarted { conn, requested, start } => {
                info!(?conn, requested, start, "slave streaming");
                self.count_report();
            }
            MasterEvent::SlaveAcked { .. } => {}
            MasterEvent::SlaveDisconnected { conn } => debug!(?conn, "slave disconnected"),
        }
    }
}

/// What a slave driver must do next that needs the runtime.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SlaveAction {
    /// Start connecting to the master (with the configured timeout); report the outcome
    /// through [`SlaveDriver::connected`] or [`SlaveDriver::closed`].
    Connect,
    /// Write this report to the master; on failure call [`SlaveDriver::closed`].
    Send([u8; REPORT_LEN]),
    /// Run `LogWrite::flush` off the async threads; report through [`SlaveDriver::flushed`].
    Flush,
    /// Drop the connection (do not call `closed` for it).
    Disconnect,
    /// Nothing more until this instant, a read, a connect or a flush result.
    Wait(Instant),
}

/// A [`Slave`] with the bookkeeping every adapter needs: it stores appends through the log,
/// counts connections and peer errors, and builds status snapshots. The adapter performs the
/// [`SlaveAction`]s that need sockets, timers or threads.
pub struct SlaveDriver<L> {
    core: Slave,
    log: std::sync::Arc<L>,
    master_address: String,
    connections: u64,
    peer_errors: u64,
    /// When the reports last covered everything the master had shown.
    caught_up_at: Instant,
    append_error: Option<String>,
    append_failures: u64,
}

impl<L: LogWrite> SlaveDriver<L> {
    /// A driver for `log`, replicating from `config.master_address`.
    pub fn new(
        config: &SlaveServiceConfig,
        now: Instant,
        log: std::sync::Arc<L>,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let core = Slave::new(config.core.clone(), now, log.bounds().max, log.flushed())?;
        Ok(Self {
            core,
            log,
            master_address: config.master_address.clone(),
            connections: 0,
            peer_errors: 0,
            caught_up_at: now,
            append_error: None,
            append_failures: 0,
        })
    }

    /// The protocol core.
    pub fn slave(&self) -> &Slave {
        &self.core
    }

    /// Whether to read from the connection now (connected, and below the unstored-bytes bound).
    pub fn wants_read(&self) -> bool {
        self.core.wants_read()
    }

    /// Performs outputs that need no runtime (appends, events) and returns the next action.
    pub fn next_action(&mut self, now: Instant) -> SlaveAction {
        loop {
            match self.core.poll_output() {
                SlaveOutput::Timeout(at) => return SlaveAction::Wait(at),
                SlaveOutput::Connect => return SlaveAction::Connect,
                SlaveOutput::Transmit(report) => {
                    if u64::from_be_bytes(report) >= self.core.master_offset().unwrap_or(0) {
                        self.caught_up_at = now;
                    }
                    return SlaveAction::Send(report);
                }
                SlaveOutput::Flush => return SlaveAction::Flush,
                SlaveOutput::Close(reason) => {
                    info!(%reason, "closing connection to master");
                    return SlaveAction::Disconnect;
                }
                SlaveOutput::Append { offset, data } => match self.log.append_at(offset, &data) {
                    Ok(end) => {
                        if end > self.core.end() {
                            self.append_error = None;
                        }
                        self.feed(now, SlaveInput::Appended { end });
                    }
                    Err(e) => {
                        error!(%e, offset, len = data.len(), "append failed");
                        self.append_error = Some(e.to_string());
                        self.append_failures += 1;
                        let end = self.log.bounds().max;
                        self.feed(now, SlaveInput::AppendFailed { end });
                    }
                },
                SlaveOutput::Event(event) => match event {
                    SlaveEvent::FirstReport { offset } => info!(offset, "replicating from master"),
                    SlaveEvent::Disconnected { reason } => info!(?reason, "disconnected from master"),
                    SlaveEvent::PeerError(error) => {
                        self.peer_errors += 1;
                        warn!(%error, "master broke the protocol");
                    }
                },
            }
        }
    }

    /// The connection asked for by `Connect` is up. Records its number (1 for the first) as
    /// the `conn` field of the current tracing span, when the span declares one.
    pub fn connected(&mut self, now: Instant) {
        self.connections += 1;
        tracing::Span::current().record("conn", self.connections);
        self.feed(now, SlaveInput::Connected);
    }

    /// Bytes from the master.
    pub fn received(&mut self, now: Instant, data: Bytes) {
        self.feed(now, SlaveInput::Received(data));
    }

    /// The connection (or the attempt) failed or ended.
    pub fn closed(&mut self, now: Instant) {
        self.feed(now, SlaveInput::Closed);
    }

    /// A `Flush` finished.
    pub fn flushed<E: std::fmt::Display>(&mut self, now: Instant, result: Result<Offset, E>) {
        match result {
            Ok(end) => self.feed(now, SlaveInput::Flushed { end }),
            Err(e) => {
                warn!(%e, "flush failed");
                self.feed(now, SlaveInput::FlushFailed);
            }
        }
    }

    /// The instant of the last `Wait` has come (spurious calls are fine).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.core.handle_timeout(now);
    }

    /// A status snapshot.
    pub fn status(&self, now: Instant) -> SlaveStatus {
        let ack_offset = self.core.reported();
        let master_offset = self.core.master_offset();
        let lag_bytes = master_offset.unwrap_or(0).saturating_sub(ack_offset.unwrap_or(self.core.end()));
        SlaveStatus {
            state: self.core.state().into(),
            master_address: self.master_address.clone(),
            max_offset: self.log.bounds().max,
            flushed_offset: self.log.flushed(),
            ack_offset,
            master_offset,
            lag_bytes,
            lag: if lag_bytes == 0 {
                Duration::ZERO
            } else {
                now.saturating_duration_since(self.caught_up_at)
            },
            since_last_read: self.core.last_read().map(|t| now.saturating_duration_since(t)),
            connections: self.connections,
            peer_errors: self.peer_errors,
            append_error: self.append_error.clone(),
            append_failures: self.append_failures,
        }
    }

    fn feed(&mut self, now: Instant, input: SlaveInput) {
        if let Err(e) = self.core.handle_input(now, input) {
            error!(%e, "slave driver fed an invalid input");
            debug_assert!(matches!(e, ApiMisuse::TimeWentBackwards), "driver misuse: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;
    use std::rc::Rc;

    use super::*;
    use crate::frame::encode_report;

    #[derive(Default)]
    struct Sink {
        frames: Rc<RefCell<Vec<Transmit>>>,
        closed: Rc<RefCell<bool>>,
    }
    impl ConnSink for Sink {
        fn transmit(&mut self, t: Transmit) {
            self.frames.borrow_mut().push(t);
        }
        fn close(&mut self) {
            *self.closed.borrow_mut() = true;
        }
    }
    struct Reply(Rc<RefCell<Vec<Result<Offset, WaitError>>>>);
    impl WaitSink for Reply {
        fn complete(self, r: Result<Offset, WaitError>) {
            self.0.borrow_mut().push(r);
        }
    }

    /// A log that appends 10-byte messages and counts them.
    #[derive(Default)]
    struct CountingLog(std::sync::atomic::AtomicU64);

    impl crate::LogRead for CountingLog {
        type Error = std::io::Error;
        fn bounds(&self) -> LogBounds {
            LogBounds { min: 0, max: self.0.load(std::sync::atomic::Ordering::Relaxed) * 10 }
        }
        fn flushed(&self) -> Offset {
            0
        }
        fn read(&self, _: LogSpan) -> Result<Bytes, std::io::Error> {
            Ok(Bytes::new())
        }
    }

    impl MessageLog for CountingLog {
        type Message = bool;
        type Durable = std::future::Ready<Result<Offset, std::io::Error>>;
        fn put(&self, legal: bool) -> PutResult {
            if !legal {
                return PutResult::refused(PutStatus::MessageIllegal);
            }
            let n = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            PutResult {
                status: PutStatus::PutOk,
                offset: n * 10,
                wrote_bytes: 10,
                queue_offset: n,
                msg_id: String::new(),
            }
        }
        fn durable(&self, offset: Offset) -> Self::Durable {
            std::future::ready(Ok(offset))
        }
    }

    #[test]
    fn pending_put_appends_unless_refused_and_waits_as_the_role_says() {
        let log = CountingLog::default();
        let sync = MasterServiceConfig {
            role: BrokerRole::SyncMaster,
            flush_disk_type: FlushDiskType::SyncFlush,
            ..Default::default()
        };
        let refused = PendingPut::start(&sync, &log, true, true).unwrap_err();
        assert_eq!(
            (refused.status, crate::LogRead::bounds(&log).max),
            (PutStatus::ServiceNotAvailable, 0),
            "refused: not stored"
        );
        assert_eq!(
            PendingPut::start(&sync, &log, false, false).unwrap_err().status,
            PutStatus::MessageIllegal
        );
        let p = PendingPut::start(&sync, &log, true, false).unwrap();
        assert_eq!((p.end(), p.flush, p.replicate), (10, true, true));
        let r = p.finish(Some(true), Some(Err(WaitError::Timeout)));
        assert_eq!((r.status, r.offset, r.wrote_bytes), (PutStatus::FlushSlaveTimeout, 0, 10));
        let p = PendingPut::start(&MasterServiceConfig::default(), &log, true, false).unwrap();
        assert_eq!((p.flush, p.replicate), (false, false), "ASYNC_MASTER with ASYNC_FLUSH waits for nothing");
        assert_eq!(p.finish(None, None).status, PutStatus::PutOk);
    }

    #[test]
    fn put_status_follows_rocketmq_precedence() {
        use PutStatus::*;
        assert_eq!(put_status(PutOk, None, None), PutOk);
        assert_eq!(put_status(PutOk, Some(true), Some(Ok(5))), PutOk);
        assert_eq!(put_status(PutOk, Some(false), Some(Ok(5))), FlushDiskTimeout);
        assert_eq!(put_status(PutOk, Some(false), Some(Err(WaitError::Timeout))), FlushSlaveTimeout);
        assert_eq!(put_status(PutOk, None, Some(Err(WaitError::SlaveNotAvailable))), SlaveNotAvailable);
        assert_eq!(
            put_status(PutOk, None, Some(Err(WaitError::InSyncReplicasNotEnough))),
            InSyncReplicasNotEnough
        );
        assert_eq!(put_status(MessageIllegal, Some(false), Some(Ok(1))), MessageIllegal);
    }

    #[test]
    fn driver_routes_transmits_completes_waits_and_follows_the_log() {
        let now = crate::fuzzing::epoch();
        let mut d: MasterDriver<Sink, Reply> =
            MasterDriver::new(MasterConfig::default(), now, LogBounds { min: 0, max: 0 }).unwrap();
        let sink = Sink::default();
        let frames = sink.frames.clone();
        let addr: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        d.accept(now, ConnId(3), addr, sink);
        d.received(now, ConnId(3), Bytes::copy_from_slice(&encode_report(0)));
        d.log_changed(now, LogBounds { min: 0, max: 100 });
        let results = Rc::new(RefCell::new(Vec::new()));
        d.await_replication(now, 100, now + Duration::from_secs(3), Reply(results.clone()));
        let _ = d.drain();
        assert_eq!(frames.borrow().len(), 1);
        assert_eq!(frames.borrow()[0].body, Some(LogSpan { offset: 0, len: 100 }));
        d.sent(now, ConnId(3));
        d.received(now, ConnId(3), Bytes::copy_from_slice(&encode_report(100)));
        let _ = d.drain();
        assert_eq!(*results.borrow(), [Ok(100)]);
        let status = d.status(now, BrokerRole::SyncMaster, 100);
        assert_eq!(status.slaves[0].address, addr);
        assert_eq!(status.slaves[0].ack, Some(100));
        assert_eq!(status.bytes_replicated, 100);
    }

    #[test]
    fn shutdown_closes_connections_and_cancels_waits() {
        let now = crate::fuzzing::epoch();
        let mut d: MasterDriver<Sink, Reply> =
            MasterDriver::new(MasterConfig::default(), now, LogBounds { min: 0, max: 10 }).unwrap();
        let sink = Sink::default();
        let closed = sink.closed.clone();
        d.accept(now, ConnId(1), "127.0.0.1:1".parse().unwrap(), sink);
        d.received(now, ConnId(1), Bytes::copy_from_slice(&encode_report(0)));
        let results = Rc::new(RefCell::new(Vec::new()));
        d.await_replication(now, 10, now + Duration::from_secs(3), Reply(results.clone()));
        d.shutdown();
        assert!(*closed.borrow());
        assert_eq!(*results.borrow(), [Err(WaitError::Cancelled)]);
    }

    fn driver_at(end: Offset) -> (MasterDriver<Sink, Reply>, Instant) {
        let now = crate::fuzzing::epoch();
        (MasterDriver::new(MasterConfig::default(), now, LogBounds { min: 0, max: end }).unwrap(), now)
    }

    #[test]
    fn a_slave_ahead_of_the_master_fences_puts() {
        let (mut d, now) = driver_at(100);
        let addr: SocketAddr = "10.0.0.7:4000".parse().unwrap();
        d.accept(now, ConnId(1), addr, Sink::default());
        d.received(now, ConnId(1), Bytes::copy_from_slice(&encode_report(150)));
        let _ = d.drain();
        assert_eq!(d.fence(), Some(&Fence::Diverged { slave: addr, reported: 150, end: 100 }));
        assert!(d.status(now, BrokerRole::SyncMaster, 0).fence.is_some());
    }

    #[test]
    fn the_restart_fence_lifts_once_every_slave_reported() {
        let (mut d, now) = driver_at(100);
        d.set_restart_fence(2);
        for (i, port) in [(1, 4001), (2, 4002)] {
            assert!(matches!(d.fence(), Some(Fence::Restart { .. })));
            d.accept(now, ConnId(i), SocketAddr::from(([127, 0, 0, 1], port)), Sink::default());
            d.received(now, ConnId(i), Bytes::copy_from_slice(&encode_report(100)));
            let _ = d.drain();
        }
        assert_eq!(d.fence(), None);
    }

    #[test]
    fn a_host_that_connects_again_replaces_its_older_connection() {
        let (mut d, now) = driver_at(100);
        let old = Sink::default();
        let closed = old.closed.clone();
        d.accept(now, ConnId(1), "10.0.0.9:5000".parse().unwrap(), old);
        d.received(now, ConnId(1), Bytes::copy_from_slice(&encode_report(100)));
        d.accept(now, ConnId(2), "10.0.0.9:5001".parse().unwrap(), Sink::default());
        let _ = d.drain();
        assert!(*closed.borrow(), "the stale connection is closed");
        let slaves: Vec<_> = d.status(now, BrokerRole::SyncMaster, 0).slaves.iter().map(|s| s.conn).collect();
        assert_eq!(slaves, [ConnId(2)], "and no longer counted");
        // Slaves on one host over loopback (tests, the demo) are distinct.
        d.accept(now, ConnId(3), "127.0.0.1:6000".parse().unwrap(), Sink::default());
        d.accept(now, ConnId(4), "127.0.0.1:6001".parse().unwrap(), Sink::default());
        assert_eq!(d.status(now, BrokerRole::SyncMaster, 0).slaves.len(), 3);
    }

    #[test]
    fn service_configs_are_validated() {
        let bad = MasterServiceConfig { role: BrokerRole::Slave, ..Default::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("role"));
        let bad = MasterServiceConfig { slave_timeout: Duration::ZERO, ..Default::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("slave_timeout"));
        assert!(SlaveServiceConfig::new("").validate().unwrap_err().to_string().contains("master_address"));
        SlaveServiceConfig::new("127.0.0.1:10912").validate().unwrap();
    }
}
