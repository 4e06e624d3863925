//! The AutoSwitch master: every slave connection of a controller-mode master (handshake with
//! the epoch list, transfer clipped at epoch and segment boundaries), the sync-state-set
//! proposals, confirmOffset, and SYNC waits.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use crate::time::Instant;

use bytes::Bytes;
use tracing::{debug, info, trace, warn};

use super::error::{CloseReason, PeerError};
use super::frame::{HandshakeReply, HandshakeRequest, SlaveFrame, SlaveFrameDecoder, TransferHeader};
use super::sync_state::{self, BrokerId, DEFAULT_HA_MAX_TIME_SLAVE_NOT_CATCHUP, SyncPolicy, SyncStateSet};
use crate::ApiMisuse;
use crate::config::{
    CoreConfigError, DEFAULT_FIRST_REPORT_TIMEOUT, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_HOUSEKEEPING_INTERVAL,
    DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG, DEFAULT_MAX_INFLIGHT, DEFAULT_TRANSFER_BATCH_SIZE, MasterConfig,
};
use crate::error::WaitError;
use crate::log::{EpochCache, EpochEntry};
use crate::log::{LogBounds, LogSpan, Offset};
use crate::stream;
use crate::waiters::Waiters;
use crate::{ConnId, WaitId};

const IDLE_TIMEOUT: Duration = Duration::from_secs(3600);

/// Configuration of an [`AutoSwitchMaster`], with RocketMQ's names and defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoSwitchMasterConfig {
    /// This broker's id: always a member of the sync-state-set.
    pub broker_id: BrokerId,
    /// Largest body per frame (`haTransferBatchSize`).
    pub transfer_batch_size: u32,
    /// Send a heartbeat after this long without sending (`haSendHeartbeatInterval`).
    pub heartbeat_interval: Duration,
    /// Close after this long without a complete frame (`haHousekeepingInterval`).
    pub housekeeping_interval: Duration,
    /// Close a connection that sent no handshake within this long.
    pub handshake_timeout: Duration,
    /// Segment size; frames never cross a segment boundary (`mappedFileSizeCommitLog`).
    pub mapped_file_size_commit_log: u64,
    /// Most transmits per connection handed out without a matching `Sent`.
    pub max_inflight: u32,
    /// Propose removing a member behind for this long (`haMaxTimeSlaveNotCatchup`).
    pub ha_max_time_slave_not_catchup: Duration,
    /// How SYNC puts wait.
    pub sync: SyncPolicy,
    /// Hold a first report strictly inside the log until the driver confirms it is a message
    /// boundary ([`MasterEvent::VerifyReport`]): a slave without epochs (new to controller mode)
    /// gets no divergence check from the handshake. Off for bare cores; a service answers
    /// from its log.
    pub verify_first_reports: bool,
    /// Count only connections the driver identified ([`MasterInput::Identified`]): an
    /// unidentified one may stream, but never joins the sync-state-set, moves the
    /// confirmOffset or releases a SYNC wait. Off for bare cores (every handshake's broker id
    /// is taken at its word); a service identifies only connections its admission trusts.
    pub identified_only: bool,
}

impl Default for AutoSwitchMasterConfig {
    fn default() -> Self {
        Self {
            broker_id: 0,
            transfer_batch_size: DEFAULT_TRANSFER_BATCH_SIZE,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            housekeeping_interval: DEFAULT_HOUSEKEEPING_INTERVAL,
            handshake_timeout: DEFAULT_FIRST_REPORT_TIMEOUT,
            mapped_file_size_commit_log: DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG,
            max_inflight: DEFAULT_MAX_INFLIGHT,
            ha_max_time_slave_not_catchup: DEFAULT_HA_MAX_TIME_SLAVE_NOT_CATCHUP,
            sync: SyncPolicy::default(),
            verify_first_reports: false,
            identified_only: false,
        }
    }
}

impl AutoSwitchMasterConfig {
    /// Checks that every field can work, naming the first one that cannot.
    pub fn validate(&self) -> Result<(), CoreConfigError> {
        MasterConfig {
            transfer_batch_size: self.transfer_batch_size,
            heartbeat_interval: self.heartbeat_interval,
            housekeeping_interval: self.housekeeping_interval,
            first_report_timeout: self.handshake_timeout,
            mapped_file_size_commit_log: self.mapped_file_size_commit_log,
            max_inflight: self.max_inflight,
            ..Default::default()
        }
        .validate()?;
        if self.ha_max_time_slave_not_catchup.is_zero() {
            return Err(CoreConfigError::Invalid {
                field: "ha_max_time_slave_not_catchup",
                value: format!("{:?}", self.ha_max_time_slave_not_catchup),
                reason: "must be longer than zero",
            });
        }
        Ok(())
    }
}

/// What the master starts from (after `changeToMaster`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterStart {
    /// The local log's range.
    pub log: LogBounds,
    /// The local epochs, the new master epoch last.
    pub epochs: EpochCache,
    /// The sync-state-set the coordinator holds, and its epoch.
    pub sync_state_set: BTreeSet<BrokerId>,
    /// The coordinator's epoch of that set.
    pub sync_state_set_epoch: i32,
    /// The persisted confirmOffset (kept while a member is away); clipped to the log's end.
    pub confirm_offset: Offset,
}

/// Something the master driver tells the core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MasterInput {
    /// A slave connected; the id must not be in use.
    Accepted {
        /// The new connection.
        conn: ConnId,
    },
    /// Bytes arrived from a slave, in any fragmentation.
    Received {
        /// The connection.
        conn: ConnId,
        /// The bytes.
        data: Bytes,
    },
    /// One `Transmit` for this connection has been fully written.
    Sent {
        /// The connection.
        conn: ConnId,
    },
    /// The connection is gone (EOF, I/O error, or the end of a core-requested close).
    Closed {
        /// The connection.
        conn: ConnId,
    },
    /// The driver wants `conn` closed. Unknown or closing connections are ignored.
    Evict {
        /// The connection.
        conn: ConnId,
    },
    /// The local log is readable up to `end`.
    Appended {
        /// The new end.
        end: Offset,
    },
    /// Retention removed the log before `min`.
    Retained {
        /// The new min offset.
        min: Offset,
    },
    /// A SYNC put: finish with `WaitDone` once replicated as the policy requires, or at
    /// `deadline`.
    AwaitReplication {
        /// Unique among pending waits.
        id: WaitId,
        /// The put's end offset.
        offset: Offset,
        /// When to give up with [`WaitError::Timeout`].
        deadline: Instant,
    },
    /// Give up a pending wait; unknown ids are ignored.
    CancelWait {
        /// The wait.
        id: WaitId,
    },
    /// The answer to a [`MasterEvent::VerifyReport`]: whether the offset is a message boundary of
    /// the local log. On `false` the connection closes with [`PeerError::SlaveDiverged`].
    /// Unknown or closing connections are ignored.
    ReportVerified {
        /// The connection.
        conn: ConnId,
        /// Whether the offset is a message boundary.
        boundary: bool,
    },
    /// With `identified_only`: the driver established that `conn` is who its handshake's
    /// broker id says (its identity matches that id), so its acks count from now on. Refused
    /// with [`CloseReason::DuplicateBrokerId`] if another counted connection holds the id.
    /// Before the handshake, and for unknown or closing connections, ignored.
    Identified {
        /// The connection.
        conn: ConnId,
    },
    /// The coordinator applied this sync-state-set (Java `setSyncStateSet`). Clears a pending
    /// proposal.
    SyncStateSetApplied {
        /// The members, the master included.
        set: BTreeSet<BrokerId>,
        /// The coordinator's epoch of the set.
        epoch: i32,
    },
}

/// Something the core asks the master driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum MasterOutput {
    /// Write `header`, then the log bytes of `body` if any, to `conn`; feed `Sent` when done.
    Transmit {
        /// Where to write.
        conn: ConnId,
        /// A handshake reply (frame C, with its epochs) or a transfer header (frame D).
        header: Bytes,
        /// The log bytes after a transfer header.
        body: Option<LogSpan>,
    },
    /// Stop both directions of `conn`, then feed `Closed` for it.
    Close {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: CloseReason,
    },
    /// The master's confirmOffset changed: persist it and dispatch only up to it.
    ConfirmOffset(Offset),
    /// Something the application may want to know.
    Event(MasterEvent),
    /// Nothing more to do until this instant or the next input.
    Timeout(Instant),
}

/// What the master reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MasterEvent {
    /// A slave's handshake arrived and was answered.
    SlaveHandshake {
        /// The connection.
        conn: ConnId,
        /// The handshake.
        request: HandshakeRequest,
    },
    /// A slave's first report arrived; streaming starts at `start`.
    SlaveStarted {
        /// The connection.
        conn: ConnId,
        /// The offset of the slave's first report.
        requested: Offset,
        /// Where streaming starts.
        start: Offset,
    },
    /// With `verify_first_reports`: a first report lies strictly inside the log. The connection
    /// neither streams nor counts until [`MasterInput::ReportVerified`] answers.
    VerifyReport {
        /// The connection.
        conn: ConnId,
        /// The acked offset.
        offset: Offset,
    },
    /// A slave acknowledged every byte before `offset`.
    SlaveAcked {
        /// The connection.
        conn: ConnId,
        /// The new ack.
        offset: Offset,
    },
    /// The driver reported a live connection closed.
    SlaveDisconnected {
        /// The connection.
        conn: ConnId,
    },
    /// Send this sync-state-set to the coordinator (Java `AlterSyncStateSet`); apply it only
    /// when accepted, with [`MasterInput::SyncStateSetApplied`]. One proposal is outstanding
    /// at a time: the master proposes nothing else until an answer is applied, so the
    /// coordinator must answer every proposal, a refused one with the set in force.
    SyncStateSetChange {
        /// The proposed members, the master included.
        proposed: BTreeSet<BrokerId>,
    },
    /// A wait finished.
    WaitDone {
        /// The wait.
        id: WaitId,
        /// The offset waited for, or why not.
        result: Result<Offset, WaitError>,
    },
    /// A slave broke the protocol; its connection is being closed.
    PeerError {
        /// The connection.
        conn: ConnId,
        /// What was wrong.
        error: PeerError,
    },
}

/// A snapshot of one slave connection.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SlaveProgress {
    /// The connection.
    pub conn: ConnId,
    /// The handshake, once in.
    pub handshake: Option<HandshakeRequest>,
    /// The latest ack.
    pub ack: Option<Offset>,
    /// One past the last byte handed out for sending.
    pub sent: Offset,
    /// Whether its acks count (past the handshake, not a learner, not a duplicate id, and
    /// with `identified_only` identified by the driver).
    pub counted: bool,
    /// Bytes it lacks: the master's end minus its ack (the whole log before an ack).
    pub lag_bytes: u64,
    /// How long since its ack last covered the master's end (zero when caught up).
    pub lag: Duration,
    /// How long since the last complete frame from it.
    pub silent_for: Duration,
}

#[derive(Debug)]
enum Phase {
    AwaitingHandshake,
    Handshaken { request: HandshakeRequest },
    Verifying { request: HandshakeRequest, offset: Offset },
    Transfer { request: HandshakeRequest, next: Offset, ack: Offset },
}

#[derive(Debug)]
struct Conn {
    phase: Phase,
    decoder: SlaveFrameDecoder,
    accepted_at: Instant,
    last_read: Instant,
    last_send: Instant,
    inflight: u32,
    /// Whether its acks may count: identified by the driver, or `identified_only` is off.
    vouched: bool,
}

impl Conn {
    fn request(&self) -> Option<HandshakeRequest> {
        match self.phase {
            Phase::AwaitingHandshake => None,
            Phase::Handshaken { request }
            | Phase::Verifying { request, .. }
            | Phase::Transfer { request, .. } => Some(request),
        }
    }

    /// The ack of a counted connection: vouched for, past its first ack and not a learner.
    fn member_ack(&self) -> Option<(BrokerId, Offset)> {
        match self.phase {
            Phase::Transfer { request, ack, .. } if self.vouched && !request.async_learner => {
                Some((request.broker_id, ack))
            }
            _ => None,
        }
    }
}

/// The AutoSwitch HA master (sans-IO).
///
/// Drive it like every machine of the crate: after every `handle_input` or `handle_timeout`,
/// drain [`poll_output`](Self::poll_output) until it returns [`MasterOutput::Timeout`].
#[derive(Debug)]
pub struct AutoSwitchMaster {
    config: AutoSwitchMasterConfig,
    now: Instant,
    log: LogBounds,
    epochs: EpochCache,
    sync: SyncStateSet,
    confirm: Offset,
    /// When each slave id's ack last covered the master's end.
    caught_up: BTreeMap<BrokerId, Instant>,
    /// Members whose counted connection closed and that have not caught up since: no grace.
    gone: BTreeSet<BrokerId>,
    conns: BTreeMap<ConnId, Conn>,
    closing: BTreeSet<ConnId>,
    waiters: Waiters,
    queue: VecDeque<MasterOutput>,
    cursor: Option<ConnId>,
}

impl AutoSwitchMaster {
    /// A master starting from `start`.
    pub fn new(
        config: AutoSwitchMasterConfig,
        now: Instant,
        start: MasterStart,
    ) -> Result<Self, CoreConfigError> {
        config.validate()?;
        let sync = SyncStateSet::new(config.broker_id, start.sync_state_set, start.sync_state_set_epoch);
        let caught_up = sync.applied.iter().map(|&id| (id, now)).collect();
        let mut m = Self {
            now,
            log: start.log,
            epochs: start.epochs,
            sync,
            confirm: start.confirm_offset.min(start.log.max),
            caught_up,
            gone: BTreeSet::new(),
            conns: BTreeMap::new(),
            closing: BTreeSet::new(),
            waiters: Waiters::default(),
            queue: VecDeque::new(),
            cursor: None,
            config,
        };
        m.update_confirm();
        Ok(m)
    }

    /// The configuration.
    pub fn config(&self) -> &AutoSwitchMasterConfig {
        &self.config
    }

    /// The master's confirmOffset.
    pub fn confirm_offset(&self) -> Offset {
        self.confirm
    }

    /// The sync-state-set as applied, with any pending proposal.
    pub fn sync_state_set(&self) -> &SyncStateSet {
        &self.sync
    }

    /// The master's epochs.
    pub fn epochs(&self) -> &EpochCache {
        &self.epochs
    }

    /// The local log's range as last reported.
    pub fn log_bounds(&self) -> LogBounds {
        self.log
    }

    /// A snapshot of every live connection.
    pub fn slaves(&self) -> impl Iterator<Item = SlaveProgress> + '_ {
        self.conns.iter().map(|(&conn, c)| {
            let (ack, sent) = match c.phase {
                Phase::Transfer { ack, next, .. } => (Some(ack), next),
                _ => (None, 0),
            };
            let caught_up = ack.is_some_and(|a| a >= self.log.max);
            let since =
                c.request().and_then(|r| self.caught_up.get(&r.broker_id)).copied().unwrap_or(c.accepted_at);
            SlaveProgress {
                conn,
                handshake: c.request(),
                ack,
                sent,
                counted: c.member_ack().is_some(),
                lag_bytes: self.log.max.saturating_sub(ack.unwrap_or(0)),
                lag: stream::lag(caught_up, self.now, since),
                silent_for: self.now.saturating_duration_since(c.last_read),
            }
        })
    }

    /// Feeds one input. On `Err` the input was refused and nothing changed.
    pub fn handle_input(&mut self, now: Instant, input: MasterInput) -> Result<(), ApiMisuse> {
        if now < self.now {
            return Err(ApiMisuse::TimeWentBackwards);
        }
        self.check(&input)?;
        self.now = now;
        self.expire_waits();
        match input {
            MasterInput::Accepted { conn } => {
                info!(?conn, "slave connected");
                self.conns.insert(
                    conn,
                    Conn {
                        phase: Phase::AwaitingHandshake,
                        decoder: SlaveFrameDecoder::new(),
                        accepted_at: now,
                        last_read: now,
                        last_send: now,
                        inflight: 0,
                        vouched: !self.config.identified_only,
                    },
                );
            }
            MasterInput::Received { conn, data } => self.on_received(conn, &data),
            MasterInput::Identified { conn } => self.on_identified(conn),
            MasterInput::Sent { conn } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.inflight -= 1;
                }
            }
            MasterInput::Closed { conn } => {
                if let Some(c) = self.conns.remove(&conn) {
                    info!(?conn, "slave disconnected");
                    self.queue.push_back(MasterOutput::Event(MasterEvent::SlaveDisconnected { conn }));
                    self.after_conn_gone(&c);
                } else {
                    self.closing.remove(&conn);
                }
            }
            MasterInput::Evict { conn } => self.close(conn, CloseReason::Evicted),
            MasterInput::Appended { end } => {
                let previous = self.log.max;
                let ids: Vec<BrokerId> = self
                    .conns
                    .values()
                    .filter_map(Conn::member_ack)
                    .filter(|&(_, ack)| ack >= previous)
                    .map(|(id, _)| id)
                    .collect();
                for id in ids {
                    self.caught_up.insert(id, now);
                }
                self.log.max = end;
                self.update_confirm();
                self.complete_waits();
            }
            MasterInput::Retained { min } => {
                self.log.min = min;
                self.epochs.truncate_before(min);
                let behind: Vec<_> = self
                    .conns
                    .iter()
                    .filter_map(|(&id, c)| match c.phase {
                        Phase::Transfer { next, .. } if next < min => Some((id, next)),
                        _ => None,
                    })
                    .collect();
                for (conn, next) in behind {
                    self.close(
                        conn,
                        CloseReason::Peer(PeerError::SlaveBehindRetention { reported: next, min }),
                    );
                }
            }
            MasterInput::AwaitReplication { id, offset, deadline } => self.on_await(id, offset, deadline),
            MasterInput::CancelWait { id } => {
                if self.waiters.remove(id).is_some() {
                    self.wait_done(id, Err(WaitError::Cancelled));
                }
            }
            MasterInput::ReportVerified { conn, boundary } => self.on_verified(conn, boundary),
            MasterInput::SyncStateSetApplied { set, epoch } => {
                info!(?set, epoch, "sync-state-set applied");
                let previous =
                    std::mem::replace(&mut self.sync, SyncStateSet::new(self.config.broker_id, set, epoch));
                let connected: BTreeSet<BrokerId> =
                    self.member_acks().into_iter().map(|(id, _)| id).collect();
                for &id in &self.sync.applied {
                    if !previous.applied.contains(&id) && connected.contains(&id) {
                        // A connected member just added gets the full grace from now: its
                        // caught-up time may be from before it was proposed out, and it would
                        // be proposed out again at once (a set flapping with every ack).
                        self.caught_up.insert(id, now);
                    } else if !self.gone.contains(&id) {
                        self.caught_up.entry(id).or_insert(now);
                    }
                }
                self.update_confirm();
                self.complete_waits();
                self.maybe_shrink(None);
                // Expansions skipped while the proposal was outstanding: a caught-up slave of
                // an idle group only repeats its ack, which would never propose it again.
                let conns: Vec<ConnId> = self.conns.keys().copied().collect();
                for conn in conns {
                    self.maybe_expand(conn);
                }
            }
        }
        Ok(())
    }

    fn check(&self, input: &MasterInput) -> Result<(), ApiMisuse> {
        let known = |conn: ConnId| {
            if self.conns.contains_key(&conn) || self.closing.contains(&conn) {
                Ok(())
            } else {
                Err(ApiMisuse::UnknownConn(conn))
            }
        };
        match *input {
            MasterInput::Accepted { conn }
                if self.conns.contains_key(&conn) || self.closing.contains(&conn) =>
            {
                return Err(ApiMisuse::DuplicateConn(conn));
            }
            MasterInput::Received { conn, .. } | MasterInput::Closed { conn } => known(conn)?,
            MasterInput::Sent { conn } => {
                known(conn)?;
                if self.conns.get(&conn).is_some_and(|c| c.inflight == 0) {
                    return Err(ApiMisuse::NothingInFlight(conn));
                }
            }
            MasterInput::Appended { end } if end < self.log.max => {
                return Err(ApiMisuse::LogWentBackwards { end, previous: self.log.max });
            }
            MasterInput::Retained { min } if min < self.log.min || min > self.log.max => {
                return Err(ApiMisuse::InvalidRetention { min, previous: self.log.min, end: self.log.max });
            }
            MasterInput::AwaitReplication { id, offset, .. } => {
                if self.waiters.contains(id) {
                    return Err(ApiMisuse::DuplicateWait(id));
                }
                if offset > self.log.max {
                    return Err(ApiMisuse::WaitBeyondEnd { offset, end: self.log.max });
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Advances time: expires waits, closes silent connections, proposes shrinking the
    /// sync-state-set. Spurious or early calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        if now < self.now {
            return;
        }
        self.now = now;
        self.expire_waits();
        let config = &self.config;
        let expired: Vec<(ConnId, CloseReason)> = self
            .conns
            .iter()
            .filter_map(|(&id, c)| {
                if matches!(c.phase, Phase::AwaitingHandshake)
                    && now.saturating_duration_since(c.accepted_at) >= config.handshake_timeout
                {
                    Some((id, CloseReason::HandshakeTimeout))
                } else if now.saturating_duration_since(c.last_read) >= config.housekeeping_interval {
                    Some((id, CloseReason::HousekeepingTimeout))
                } else {
                    None
                }
            })
            .collect();
        for (conn, reason) in expired {
            self.close(conn, reason);
        }
        self.maybe_shrink(None);
    }

    /// The next thing to do. Drain until [`MasterOutput::Timeout`] after every input.
    pub fn poll_output(&mut self) -> MasterOutput {
        let out = if let Some(out) = self.queue.pop_front() {
            out
        } else if let Some(out) = self.next_transmit() {
            out
        } else {
            MasterOutput::Timeout(self.next_timeout())
        };
        match &out {
            MasterOutput::Transmit { conn, body, .. } => trace!(?conn, ?body, "transmit"),
            MasterOutput::Timeout(_) => {}
            other => debug!(?other, "output"),
        }
        out
    }

    fn on_received(&mut self, conn: ConnId, data: &[u8]) {
        let mut data = data;
        let mut failure = None;
        loop {
            let Some(c) = self.conns.get_mut(&conn) else { return };
            let frame = match c.decoder.decode(&mut data) {
                None => break,
                Some(Ok(f)) => f,
                Some(Err(e)) => {
                    failure = Some(CloseReason::Peer(PeerError::Frame(e)));
                    break;
                }
            };
            c.last_read = self.now;
            let result = match frame {
                SlaveFrame::Handshake(request) => self.on_handshake(conn, request),
                SlaveFrame::Report(offset) => self.on_report(conn, offset),
            };
            if let Err(reason) = result {
                failure = Some(reason);
                break;
            }
        }
        if let Some(reason) = failure {
            self.close(conn, reason);
        }
    }

    fn on_handshake(&mut self, conn: ConnId, request: HandshakeRequest) -> Result<(), CloseReason> {
        let c = self.conns.get(&conn).expect("caller holds the connection");
        if let Some(previous) = c.request() {
            if previous != request {
                return Err(CloseReason::Peer(PeerError::IdentityChanged {
                    previous: previous.broker_id,
                    claimed: request.broker_id,
                }));
            }
            // A Java slave re-sends its handshake until the reply is in; one reply is enough
            // (a second would close a Java slave that already moved to TRANSFER).
            debug!(?conn, "duplicate handshake ignored");
            return Ok(());
        }
        // Broker ids are self-declared: a second live connection claiming one a counted
        // connection holds is refused, so it can neither count twice nor stand in for a
        // member. (With `identified_only`, an unidentified holder blocks nothing: it counts for
        // nothing, and a stranger claiming a member's id first must not lock the member out.)
        let taken = self.conns.iter().any(|(&other, oc)| {
            other != conn && oc.vouched && oc.request().is_some_and(|r| r.broker_id == request.broker_id)
        });
        if taken || request.broker_id == self.config.broker_id {
            return Err(CloseReason::DuplicateBrokerId { broker_id: request.broker_id });
        }
        let entries: Vec<EpochEntry> = super::epoch::handshake_entries(&self.epochs).to_vec();
        let reply =
            HandshakeReply { max_offset: self.log.max, last_epoch: self.epochs.last_epoch(), entries };
        let c = self.conns.get_mut(&conn).expect("caller holds the connection");
        c.phase = Phase::Handshaken { request };
        c.inflight += 1;
        c.last_send = self.now;
        info!(?conn, broker_id = request.broker_id, learner = request.async_learner, "slave handshake");
        self.queue.push_back(MasterOutput::Event(MasterEvent::SlaveHandshake { conn, request }));
        self.queue.push_back(MasterOutput::Transmit {
            conn,
            header: Bytes::from(reply.encode()),
            body: None,
        });
        Ok(())
    }

    fn on_report(&mut self, conn: ConnId, offset: Offset) -> Result<(), CloseReason> {
        let log = self.log;
        let segment = self.config.mapped_file_size_commit_log;
        let c = self.conns.get_mut(&conn).expect("caller holds the connection");
        let peer = |e| Err(CloseReason::Peer(e));
        if offset > log.max {
            return peer(PeerError::AckBeyondEnd { ack: offset, end: log.max });
        }
        match &mut c.phase {
            Phase::AwaitingHandshake => return peer(PeerError::ReportBeforeHandshake),
            Phase::Handshaken { request } => {
                let request = *request;
                let start = if offset == 0 {
                    if request.sync_from_last_file {
                        (log.max - log.max % segment).max(log.min)
                    } else {
                        log.min
                    }
                } else {
                    offset
                };
                if start < log.min {
                    return peer(PeerError::SlaveBehindRetention { reported: offset, min: log.min });
                }
                if self.config.verify_first_reports && offset > log.min && offset < log.max {
                    c.phase = Phase::Verifying { request, offset };
                    debug!(?conn, offset, "first ack to verify");
                    self.queue.push_back(MasterOutput::Event(MasterEvent::VerifyReport { conn, offset }));
                    return Ok(());
                }
                c.phase = Phase::Transfer { request, next: start, ack: offset };
                debug!(?conn, offset, start, "slave starts streaming");
                self.queue.push_back(MasterOutput::Event(MasterEvent::SlaveStarted {
                    conn,
                    requested: offset,
                    start,
                }));
            }
            Phase::Verifying { offset: first, .. } => {
                // A heartbeat repeating the first report while it is checked.
                if offset > *first {
                    return peer(PeerError::AckBeyondSent { ack: offset, sent: *first });
                }
                if offset < *first {
                    return peer(PeerError::AckWentBackwards { ack: offset, previous: *first });
                }
                return Ok(());
            }
            Phase::Transfer { next, ack, .. } => {
                if offset > *next {
                    return peer(PeerError::AckBeyondSent { ack: offset, sent: *next });
                }
                if offset < *ack {
                    return peer(PeerError::AckWentBackwards { ack: offset, previous: *ack });
                }
                if offset == *ack {
                    if offset >= log.max {
                        self.mark_caught_up(conn);
                    }
                    self.maybe_expand(conn);
                    return Ok(());
                }
                *ack = offset;
                trace!(?conn, offset, "slave ack");
                self.queue.push_back(MasterOutput::Event(MasterEvent::SlaveAcked { conn, offset }));
            }
        }
        if offset >= log.max {
            self.mark_caught_up(conn);
        }
        self.maybe_expand(conn);
        self.update_confirm();
        self.complete_waits();
        Ok(())
    }

    fn on_identified(&mut self, conn: ConnId) {
        let Some(c) = self.conns.get(&conn) else { return };
        let Some(request) = c.request() else { return };
        if c.vouched {
            return;
        }
        let taken = self.conns.iter().any(|(&other, oc)| {
            other != conn && oc.vouched && oc.request().is_some_and(|r| r.broker_id == request.broker_id)
        });
        if taken || request.broker_id == self.config.broker_id {
            self.close(conn, CloseReason::DuplicateBrokerId { broker_id: request.broker_id });
            return;
        }
        let c = self.conns.get_mut(&conn).expect("checked above");
        c.vouched = true;
        let ack = c.member_ack().map(|(_, ack)| ack);
        info!(?conn, broker_id = request.broker_id, "slave identified: its acks count");
        if let Some(ack) = ack {
            if ack >= self.log.max {
                self.mark_caught_up(conn);
            }
            self.maybe_expand(conn);
            self.update_confirm();
            self.complete_waits();
        }
    }

    fn on_verified(&mut self, conn: ConnId, boundary: bool) {
        let Some(c) = self.conns.get_mut(&conn) else { return };
        let Phase::Verifying { request, offset } = c.phase else { return };
        if !boundary {
            self.close(conn, CloseReason::Peer(PeerError::SlaveDiverged { reported: offset }));
            return;
        }
        if offset < self.log.min {
            // Retention moved past it while it was checked.
            let min = self.log.min;
            self.close(conn, CloseReason::Peer(PeerError::SlaveBehindRetention { reported: offset, min }));
            return;
        }
        c.phase = Phase::Transfer { request, next: offset, ack: offset };
        debug!(?conn, offset, "slave starts streaming");
        self.queue.push_back(MasterOutput::Event(MasterEvent::SlaveStarted {
            conn,
            requested: offset,
            start: offset,
        }));
        self.maybe_expand(conn);
        self.update_confirm();
        self.complete_waits();
    }

    fn mark_caught_up(&mut self, conn: ConnId) {
        if let Some((id, _)) = self.conns.get(&conn).and_then(Conn::member_ack) {
            self.gone.remove(&id);
            self.caught_up.insert(id, self.now);
        }
    }

    /// Java `maybeExpandInSyncStateSet`: a non-learner whose ack reached confirmOffset and the
    /// current epoch's start is proposed as a member.
    fn maybe_expand(&mut self, conn: ConnId) {
        let Some((id, ack)) = self.conns.get(&conn).and_then(Conn::member_ack) else { return };
        if self.sync.latest().contains(&id) {
            return;
        }
        let epoch_start = self.epochs.last().map_or(0, |e| e.start_offset);
        if ack >= self.confirm && ack >= epoch_start {
            let mut proposed = self.sync.latest().clone();
            proposed.insert(id);
            self.propose(proposed);
        }
    }

    /// Proposes removing members that have not caught up for `ha_max_time_slave_not_catchup`,
    /// and `gone`, a member whose counted connection just closed. A member that has not
    /// connected since this master started gets the same grace as a lagging one.
    fn maybe_shrink(&mut self, gone: Option<BrokerId>) {
        let limit = self.config.ha_max_time_slave_not_catchup;
        let now = self.now;
        let latest = self.sync.latest().clone();
        let proposed: BTreeSet<BrokerId> = latest
            .iter()
            .copied()
            .filter(|&id| {
                id == self.sync.local
                    || (Some(id) != gone
                        && self.caught_up.get(&id).is_some_and(|&t| now.saturating_duration_since(t) < limit))
            })
            .collect();
        if proposed != latest {
            self.propose(proposed);
        }
    }

    /// Proposes `proposed`, unless a proposal is outstanding: one at a time, because the
    /// coordinator may commit the outstanding one still, and acks must count over it until it
    /// answers (replacing it would stop counting its members: a put acknowledged without a
    /// member the record had just added). The answer re-runs the shrink check; the next ack
    /// re-runs the expand check.
    fn propose(&mut self, proposed: BTreeSet<BrokerId>) {
        if self.sync.pending.is_some() || self.sync.applied == proposed {
            return;
        }
        info!(?proposed, "sync-state-set change proposed");
        self.sync.pending = Some(proposed.clone());
        self.queue.push_back(MasterOutput::Event(MasterEvent::SyncStateSetChange { proposed }));
        self.update_confirm();
    }

    fn member_acks(&self) -> Vec<(BrokerId, Offset)> {
        self.conns.values().filter_map(Conn::member_ack).collect()
    }

    fn update_confirm(&mut self) {
        let acks = self.member_acks();
        let ack_of = |id| acks.iter().find(|a| a.0 == id).map(|a| a.1);
        if let Some(confirm) = sync_state::confirm_offset(&self.sync, self.log.max, ack_of) {
            if confirm != self.confirm {
                self.confirm = confirm;
                self.queue.push_back(MasterOutput::ConfirmOffset(confirm));
            }
        }
    }

    fn after_conn_gone(&mut self, c: &Conn) {
        if let Some((id, _)) = c.member_ack() {
            // Until it reconnects and catches up, it is proposed out at every chance, also
            // once an outstanding proposal is answered.
            self.caught_up.remove(&id);
            self.gone.insert(id);
            self.maybe_shrink(Some(id));
        }
        self.update_confirm();
        self.complete_waits();
    }

    fn on_await(&mut self, id: WaitId, offset: Offset, deadline: Instant) {
        if let Err(e) = sync_state::check_available(self.config.sync, &self.sync) {
            self.wait_done(id, Err(e));
            return;
        }
        if self.frontier() >= offset {
            self.wait_done(id, Ok(offset));
        } else if deadline <= self.now {
            self.wait_done(id, Err(WaitError::Timeout));
        } else {
            self.waiters.insert(id, offset, deadline);
        }
    }

    fn frontier(&self) -> Offset {
        sync_state::frontier(self.config.sync, &self.sync, &self.member_acks(), self.log.max)
    }

    fn complete_waits(&mut self) {
        if self.waiters.len() == 0 {
            return;
        }
        for (id, offset) in self.waiters.pop_satisfied(self.frontier()) {
            self.wait_done(id, Ok(offset));
        }
    }

    fn expire_waits(&mut self) {
        for id in self.waiters.pop_expired(self.now) {
            self.wait_done(id, Err(WaitError::Timeout));
        }
    }

    fn wait_done(&mut self, id: WaitId, result: Result<Offset, WaitError>) {
        self.queue.push_back(MasterOutput::Event(MasterEvent::WaitDone { id, result }));
    }

    fn close(&mut self, conn: ConnId, reason: CloseReason) {
        let Some(c) = self.conns.remove(&conn) else { return };
        self.closing.insert(conn);
        match reason {
            CloseReason::Peer(error) => {
                warn!(?conn, %error, "closing slave connection");
                self.queue.push_back(MasterOutput::Event(MasterEvent::PeerError { conn, error }));
            }
            _ => info!(?conn, %reason, "closing slave connection"),
        }
        self.queue.push_back(MasterOutput::Close { conn, reason });
        self.after_conn_gone(&c);
    }

    /// The epoch entry a byte at `offset` belongs to, and where that epoch ends.
    fn epoch_at(&self, offset: Offset) -> (EpochEntry, Option<Offset>) {
        let entry = self
            .epochs
            .entries()
            .take_while(|e| e.start_offset <= offset)
            .last()
            .or_else(|| self.epochs.entries().next())
            .unwrap_or(EpochEntry { epoch: 0, start_offset: 0 });
        // Bytes before the first epoch (a store upgraded from classic mode) stop at its start.
        let end = if offset < entry.start_offset {
            Some(entry.start_offset)
        } else {
            self.epochs.next_after(entry.epoch).map(|n| n.start_offset)
        };
        (entry, end)
    }

    /// Bytes one frame from `next` may carry: up to the batch size, the segment end, the
    /// current epoch's end, and the appended end.
    fn sendable(&self, next: Offset) -> (u64, u64) {
        let (_, epoch_end) = self.epoch_at(next);
        let limit = stream::frame_limit(
            next,
            self.config.mapped_file_size_commit_log,
            self.config.transfer_batch_size,
        )
        .min(epoch_end.map_or(u64::MAX, |e| e - next));
        (limit.min(self.log.max.saturating_sub(next)), limit)
    }

    /// Whether `c` has a frame to send now ([`stream::wants_frame`]).
    fn wants_transmit(&self, c: &Conn) -> bool {
        let Phase::Transfer { next, .. } = c.phase else { return false };
        stream::wants_frame(self.now, next, self.log.max, self.pacing(c), || {
            let (now, limit) = self.sendable(next);
            now == limit
        })
    }

    fn pacing(&self, c: &Conn) -> stream::Pacing {
        stream::Pacing {
            inflight: c.inflight,
            max_inflight: self.config.max_inflight,
            last_send: c.last_send,
            heartbeat: self.config.heartbeat_interval,
        }
    }

    fn next_transmit(&mut self) -> Option<MasterOutput> {
        let conn = stream::next_in_turn(&self.conns, self.cursor, |c| self.wants_transmit(c))?;
        self.cursor = Some(conn);
        let Phase::Transfer { next, .. } = self.conns[&conn].phase else {
            unreachable!("wants_transmit checked the phase")
        };
        let (len, _) = self.sendable(next);
        let (entry, _) = self.epoch_at(next);
        let header = TransferHeader {
            body_len: u32::try_from(len).expect("len <= transfer_batch_size"),
            offset: Some(next),
            epoch: entry.epoch,
            epoch_start: entry.start_offset,
            confirm_offset: Some(self.confirm),
        };
        let now = self.now;
        let c = self.conns.get_mut(&conn).expect("found above");
        let Phase::Transfer { next: n, .. } = &mut c.phase else { unreachable!("checked above") };
        *n += len;
        c.inflight += 1;
        c.last_send = now;
        let body = (len > 0).then_some(LogSpan { offset: next, len: header.body_len });
        Some(MasterOutput::Transmit { conn, header: Bytes::copy_from_slice(&header.encode()), body })
    }

    fn next_timeout(&self) -> Instant {
        let mut at = self.waiters.next_deadline().unwrap_or(self.now + IDLE_TIMEOUT);
        for c in self.conns.values() {
            at = at.min(c.last_read + self.config.housekeeping_interval);
            if matches!(c.phase, Phase::AwaitingHandshake) {
                at = at.min(c.accepted_at + self.config.handshake_timeout);
            }
            if let Phase::Transfer { next, .. } = c.phase {
                if let Some(due) = stream::heartbeat_due(next, self.log.max, self.pacing(c)) {
                    at = at.min(due);
                }
            }
        }
        // Shrink checks: when each member's caught-up time runs out.
        for id in self.sync.latest() {
            if *id != self.sync.local {
                if let Some(&t) = self.caught_up.get(id) {
                    let due = t + self.config.ha_max_time_slave_not_catchup;
                    if due > self.now {
                        at = at.min(due);
                    }
                }
            }
        }
        at
    }
}
