//! The master side: one state machine for every slave connection of a RocketMQ HA master, plus
//! the SYNC_MASTER wait table.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

use crate::time::Instant;

use bytes::Bytes;
use tracing::{debug, info, trace, warn};

use super::error::{CloseReason, PeerError};
use super::frame::{PUSH_HEADER_LEN, PushHeader, ReportDecoder};
use crate::config::{CoreConfigError, MasterConfig, NewSlaveStart};
use crate::error::{ApiMisuse, WaitError};
use crate::log::{LogBounds, LogSpan, Offset};
use crate::policy;
use crate::stream;
use crate::waiters::Waiters;
use crate::{ConnId, WaitId};

/// How far ahead the core schedules its timeout when it has nothing to wait for.
pub(crate) const IDLE_TIMEOUT: Duration = Duration::from_secs(3600);

/// Something the master driver tells the core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MasterInput {
    /// A slave connected. The id is the driver's choice and must not be in use.
    Accepted {
        /// The new connection.
        conn: ConnId,
    },
    /// Bytes arrived from a slave, in any fragmentation.
    Received {
        /// The connection they arrived on.
        conn: ConnId,
        /// The bytes.
        data: Bytes,
    },
    /// One `Transmit` for this connection has been fully written.
    Sent {
        /// The connection written to.
        conn: ConnId,
    },
    /// The connection is gone: EOF, an I/O error, a failed span read, or the driver finished
    /// tearing down a connection the core closed. Frees the id.
    Closed {
        /// The connection.
        conn: ConnId,
    },
    /// The driver wants `conn` closed (for example because the same slave connected again):
    /// it stops counting at once, and the core emits `Close` with `reason`. Unknown or already
    /// closing connections are ignored.
    Evict {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: CloseReason,
    },
    /// The driver knows `conn` to be a connection of `replica` (by a TLS name, or by host:
    /// the classic protocol carries no identity). One replica is one copy: once a connection
    /// of a replica starts streaming, its older connections no longer count for replication
    /// waits (a slave that rebooted reconnects before its dead connection times out, and that
    /// one's ack may name bytes the reboot lost), until one of them acknowledges a byte sent
    /// to it after that, which proves it alive (two slaves behind one address). Connections
    /// never identified count each on their own, unless `identified_only` is set: then they
    /// do not count at all. Feed it before the connection's first report; unknown or closing
    /// connections are ignored.
    Replica {
        /// The connection.
        conn: ConnId,
        /// The replica it belongs to; the driver's choice, equal for equal replicas.
        replica: ReplicaId,
    },
    /// The local log is readable up to `end` (the store appended).
    Appended {
        /// The new end.
        end: Offset,
    },
    /// Retention removed the log before `min`.
    Retained {
        /// The new min offset.
        min: Offset,
    },
    /// SYNC_MASTER: finish with a `WaitDone` once slaves hold every byte before `offset`, as
    /// the ack policy requires, or at `deadline`.
    AwaitReplication {
        /// The driver's id for this wait; unique among pending waits.
        id: WaitId,
        /// The offset to reach: the put's `offset + wrote_bytes`.
        offset: Offset,
        /// When to give up with [`WaitError::Timeout`].
        deadline: Instant,
    },
    /// Give up a pending wait; it finishes with [`WaitError::Cancelled`]. Unknown ids are
    /// ignored (the wait may have just finished).
    CancelWait {
        /// The wait.
        id: WaitId,
    },
    /// The answer to a [`MasterEvent::VerifyReport`] (`verify_first_reports`): whether the
    /// reported offset is a record boundary of the local log. On `false` the connection is
    /// closed with [`PeerError::SlaveDiverged`]. Unknown or already closing connections are
    /// ignored.
    ReportVerified {
        /// The connection.
        conn: ConnId,
        /// Whether the offset is a record boundary.
        boundary: bool,
    },
}

/// Something the core asks the master driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum MasterOutput {
    /// Write `header`, then the log bytes of `body` (resolved through `LogRead::read`), to
    /// `conn`, and feed `Sent` once written. `body` is `None` for a heartbeat.
    Transmit {
        /// Where to write.
        conn: ConnId,
        /// The 12-byte push header.
        header: [u8; PUSH_HEADER_LEN],
        /// The log bytes to follow the header.
        body: Option<LogSpan>,
    },
    /// Stop both directions of `conn`, then feed `Closed` for it.
    Close {
        /// The connection.
        conn: ConnId,
        /// Why.
        reason: CloseReason,
    },
    /// Something happened that the application may want to know.
    Event(MasterEvent),
    /// Nothing more to do until this instant or the next input: call `handle_timeout` then.
    Timeout(Instant),
}

/// What the master reports to the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MasterEvent {
    /// A slave's first report arrived and streaming starts at `start`.
    SlaveStarted {
        /// The connection.
        conn: ConnId,
        /// The slave's first report (0 for an empty slave).
        requested: Offset,
        /// Where streaming starts.
        start: Offset,
    },
    /// With `verify_first_reports`: a first report lies strictly inside the log. The connection
    /// neither streams nor counts until the driver answers with
    /// [`MasterInput::ReportVerified`] whether `offset` is a record boundary of the log.
    VerifyReport {
        /// The connection.
        conn: ConnId,
        /// The reported offset.
        offset: Offset,
    },
    /// A slave acknowledged every byte before `offset`.
    SlaveAcked {
        /// The connection.
        conn: ConnId,
        /// The new ack.
        offset: Offset,
    },
    /// The driver reported a live connection closed (EOF or I/O error).
    SlaveDisconnected {
        /// The connection.
        conn: ConnId,
    },
    /// A replication wait finished: `Ok(offset)` with the offset waited for, or why not.
    WaitDone {
        /// The wait.
        id: WaitId,
        /// The outcome.
        result: Result<Offset, WaitError>,
    },
    /// A slave broke the protocol or cannot be served; its connection is being closed.
    PeerError {
        /// The connection.
        conn: ConnId,
        /// What was wrong.
        error: PeerError,
    },
}

/// A replica as the driver tells them apart ([`MasterInput::Replica`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReplicaId(pub u64);

/// A snapshot of one slave connection, for status pages and metrics.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct SlaveProgress {
    /// The connection.
    pub conn: ConnId,
    /// Where streaming started; `None` until the first report.
    pub start: Option<Offset>,
    /// The latest ack; `None` until the first report.
    pub ack: Option<Offset>,
    /// One past the last byte handed out for sending.
    pub sent: Offset,
    /// Body bytes handed out for sending on this connection.
    pub bytes_sent: u64,
    /// Bytes the slave lacks: the master's end minus its ack (the whole log before a report).
    pub lag_bytes: u64,
    /// How long the slave has been behind the master's end; zero when caught up.
    pub lag: Duration,
    /// Whether the slave is within `ha_max_gap_not_in_sync` of the end.
    pub in_sync: bool,
    /// Transmits handed out and not yet `Sent`.
    pub inflight: u32,
    /// How long since the last complete report (or since the connection was accepted).
    pub silent_for: Duration,
    /// A newer connection of the same replica streams, and this one has acknowledged nothing
    /// sent since: its ack does not count for replication waits ([`MasterInput::Replica`]).
    pub superseded: bool,
}

#[derive(Debug)]
enum Phase {
    /// Nothing is sent before the first report.
    AwaitingReport,
    /// The first report is being checked against the log; nothing is sent or counted.
    Verifying {
        offset: Offset,
    },
    Streaming {
        start: Offset,
        next: Offset,
        ack: Offset,
    },
}

#[derive(Debug)]
struct SlaveConn {
    phase: Phase,
    reports: ReportDecoder,
    /// When the connection was accepted: the first report is due `first_report_timeout` later.
    accepted_at: Instant,
    /// When the last complete report arrived (the accept before the first). Partial reports
    /// are not progress: a peer trickling bytes cannot hold a connection open.
    last_report: Instant,
    last_send: Instant,
    /// When the slave's ack last covered the master's end (or when it connected).
    caught_up_at: Instant,
    inflight: u32,
    bytes_sent: u64,
    /// The replica the driver identified it as ([`MasterInput::Replica`]).
    replica: Option<ReplicaId>,
    /// A newer connection of its replica streams: its ack no longer counts, unless it
    /// acknowledges a byte at or past this offset (what it had been sent then), which a dead
    /// connection cannot.
    superseded: Option<Offset>,
}

impl SlaveConn {
    fn ack(&self) -> Option<Offset> {
        match self.phase {
            Phase::Streaming { ack, .. } => Some(ack),
            Phase::AwaitingReport | Phase::Verifying { .. } => None,
        }
    }
}

/// The RocketMQ HA master for all slave connections (sans-IO).
///
/// Drive it as the crate docs describe: after every `handle_input` or `handle_timeout`, drain
/// [`poll_output`](Self::poll_output) until it returns [`MasterOutput::Timeout`].
#[derive(Debug)]
pub struct Master {
    config: MasterConfig,
    now: Instant,
    log: LogBounds,
    conns: BTreeMap<ConnId, SlaveConn>,
    /// Connections the core closed and the driver has not yet reported `Closed` for.
    closing: BTreeSet<ConnId>,
    waiters: Waiters,
    queue: VecDeque<MasterOutput>,
    /// The connection that sent last, for round-robin fairness.
    cursor: Option<ConnId>,
}

impl Master {
    /// A master whose local log currently spans `log`.
    pub fn new(config: MasterConfig, now: Instant, log: LogBounds) -> Result<Self, CoreConfigError> {
        config.validate()?;
        Ok(Self {
            config,
            now,
            log,
            conns: BTreeMap::new(),
            closing: BTreeSet::new(),
            waiters: Waiters::default(),
            queue: VecDeque::new(),
            cursor: None,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &MasterConfig {
        &self.config
    }

    /// The local log's range as last reported through `Appended` and `Retained`.
    pub fn log_bounds(&self) -> LogBounds {
        self.log
    }

    /// The offset replicated as the ack policy requires, if any.
    pub fn replicated(&self) -> Option<Offset> {
        self.with_acks(|acks| {
            policy::frontier(self.config.ack_policy, acks, self.log.max, self.config.ha_max_gap_not_in_sync)
        })
    }

    /// Replication waits still pending.
    pub fn pending_waits(&self) -> usize {
        self.waiters.len()
    }

    /// A snapshot of every live slave connection, in connection-id order.
    pub fn slaves(&self) -> impl ExactSizeIterator<Item = SlaveProgress> + '_ {
        self.conns.iter().map(|(&conn, c)| {
            let (start, ack, sent) = match c.phase {
                Phase::AwaitingReport | Phase::Verifying { .. } => (None, None, 0),
                Phase::Streaming { start, next, ack } => (Some(start), Some(ack), next),
            };
            let covered = ack.unwrap_or(0);
            let caught_up = ack.is_some() && covered >= self.log.max;
            SlaveProgress {
                conn,
                start,
                ack,
                sent,
                bytes_sent: c.bytes_sent,
                lag_bytes: self.log.max.saturating_sub(covered),
                lag: stream::lag(caught_up, self.now, c.caught_up_at),
                in_sync: ack
                    .is_some_and(|a| policy::in_sync(a, self.log.max, self.config.ha_max_gap_not_in_sync)),
                inflight: c.inflight,
                silent_for: self.now.saturating_duration_since(c.last_report),
                superseded: c.superseded.is_some(),
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
                    SlaveConn {
                        phase: Phase::AwaitingReport,
                        reports: ReportDecoder::new(),
                        accepted_at: now,
                        last_report: now,
                        last_send: now,
                        caught_up_at: now,
                        inflight: 0,
                        bytes_sent: 0,
                        replica: None,
                        superseded: None,
                    },
                );
            }
            MasterInput::Received { conn, data } => self.on_received(conn, &data),
            MasterInput::Sent { conn } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.inflight -= 1;
                }
            }
            MasterInput::Closed { conn } => {
                if self.conns.remove(&conn).is_some() {
                    info!(?conn, "slave disconnected");
                    self.queue.push_back(MasterOutput::Event(MasterEvent::SlaveDisconnected { conn }));
                    self.complete_waits();
                } else {
                    self.closing.remove(&conn);
                }
            }
            MasterInput::Evict { conn, reason } => self.close(conn, reason),
            MasterInput::Replica { conn, replica } => {
                if let Some(c) = self.conns.get_mut(&conn) {
                    c.replica = Some(replica);
                    if matches!(c.phase, Phase::Streaming { .. }) {
                        self.supersede_older(conn);
                        self.complete_waits();
                    }
                }
            }
            MasterInput::ReportVerified { conn, boundary } => self.on_verified(conn, boundary),
            MasterInput::Appended { end } => {
                let previous = self.log.max;
                for c in self.conns.values_mut() {
                    if c.ack().is_some_and(|a| a >= previous) {
                        c.caught_up_at = now;
                    }
                }
                self.log.max = end;
                self.complete_waits();
            }
            MasterInput::Retained { min } => {
                self.log.min = min;
                let behind: Vec<_> = self
                    .conns
                    .iter()
                    .filter_map(|(&id, c)| match c.phase {
                        Phase::Streaming { next, .. } if next < min => Some((id, next)),
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
        }
        Ok(())
    }

    /// Advances time: expires waits, closes connections without a complete report for the
    /// housekeeping interval, and new connections without a first report by its deadline.
    /// Spurious or early calls are harmless; a `now` earlier than the last one is ignored.
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
                if matches!(c.phase, Phase::AwaitingReport)
                    && now.saturating_duration_since(c.accepted_at) >= config.first_report_timeout
                {
                    Some((id, CloseReason::FirstReportTimeout))
                } else if now.saturating_duration_since(c.last_report) >= config.housekeeping_interval {
                    Some((id, CloseReason::HousekeepingTimeout))
                } else {
                    None
                }
            })
            .collect();
        for (conn, reason) in expired {
            self.close(conn, reason);
        }
    }

    /// The next thing to do. Drain until [`MasterOutput::Timeout`] after every input.
    pub fn poll_output(&mut self) -> MasterOutput {
        let out = self.do_poll_output();
        match &out {
            MasterOutput::Transmit { conn, body, .. } => trace!(?conn, ?body, "transmit"),
            MasterOutput::Timeout(_) => {}
            other => debug!(?other, "output"),
        }
        out
    }

    fn do_poll_output(&mut self) -> MasterOutput {
        if let Some(out) = self.queue.pop_front() {
            return out;
        }
        if let Some(out) = self.next_transmit() {
            return out;
        }
        MasterOutput::Timeout(self.next_timeout())
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
            MasterInput::Accepted { conn } => {
                if self.conns.contains_key(&conn) || self.closing.contains(&conn) {
                    return Err(ApiMisuse::DuplicateConn(conn));
                }
            }
            MasterInput::Received { conn, .. } | MasterInput::Closed { conn } => known(conn)?,
            MasterInput::Sent { conn } => {
                known(conn)?;
                if self.conns.get(&conn).is_some_and(|c| c.inflight == 0) {
                    return Err(ApiMisuse::NothingInFlight(conn));
                }
            }
            MasterInput::Appended { end } => {
                if end < self.log.max {
                    return Err(ApiMisuse::LogWentBackwards { end, previous: self.log.max });
                }
            }
            MasterInput::Retained { min } => {
                if min < self.log.min || min > self.log.max {
                    return Err(ApiMisuse::InvalidRetention {
                        min,
                        previous: self.log.min,
                        end: self.log.max,
                    });
                }
            }
            MasterInput::AwaitReplication { id, offset, .. } => {
                if self.waiters.contains(id) {
                    return Err(ApiMisuse::DuplicateWait(id));
                }
                if offset > self.log.max {
                    return Err(ApiMisuse::WaitBeyondEnd { offset, end: self.log.max });
                }
            }
            MasterInput::CancelWait { .. }
            | MasterInput::Evict { .. }
            | MasterInput::Replica { .. }
            | MasterInput::ReportVerified { .. } => {}
        }
        Ok(())
    }

    fn on_received(&mut self, conn: ConnId, data: &[u8]) {
        let log = self.log;
        let config = &self.config;
        let Some(c) = self.conns.get_mut(&conn) else {
            trace!(?conn, len = data.len(), "bytes for a closing connection dropped");
            return;
        };
        let mut data = data;
        let mut acked = None;
        let mut revived = None;
        let mut started = None;
        let mut verify = None;
        let mut failure = None;
        while let Some(report) = c.reports.decode(&mut data) {
            let offset = match report {
                Ok(offset) => {
                    c.last_report = self.now;
                    offset
                }
                Err(e) => {
                    failure = Some(PeerError::Frame(e));
                    break;
                }
            };
            match &mut c.phase {
                Phase::AwaitingReport => match first_report_start(config, log, offset) {
                    Ok(start) if config.verify_first_reports && offset > log.min && offset < log.max => {
                        debug_assert_eq!(start, offset);
                        c.phase = Phase::Verifying { offset };
                        verify = Some(offset);
                    }
                    Ok(start) => {
                        c.phase = Phase::Streaming { start, next: start, ack: offset };
                        if offset >= log.max {
                            c.caught_up_at = self.now;
                        }
                        started = Some((offset, start));
                    }
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                },
                Phase::Verifying { offset: first } => {
                    // A heartbeat repeating the first report while it is checked.
                    if offset > *first {
                        failure = Some(PeerError::AckBeyondSent { ack: offset, sent: *first });
                        break;
                    }
                    if offset < *first {
                        failure = Some(PeerError::AckWentBackwards { ack: offset, previous: *first });
                        break;
                    }
                }
                Phase::Streaming { next, ack, .. } => {
                    if offset > log.max {
                        failure = Some(PeerError::AckBeyondEnd { ack: offset, end: log.max });
                        break;
                    }
                    if offset > *next {
                        failure = Some(PeerError::AckBeyondSent { ack: offset, sent: *next });
                        break;
                    }
                    if offset < *ack {
                        failure = Some(PeerError::AckWentBackwards { ack: offset, previous: *ack });
                        break;
                    }
                    if offset > *ack {
                        *ack = offset;
                        acked = Some(offset);
                        if c.superseded.is_some_and(|sent_then| offset > sent_then) {
                            c.superseded = None;
                            revived = Some(offset);
                        }
                    }
                    if offset >= log.max {
                        c.caught_up_at = self.now;
                    }
                }
            }
        }
        if let Some(offset) = verify {
            debug!(?conn, offset, "first report to verify");
            self.queue.push_back(MasterOutput::Event(MasterEvent::VerifyReport { conn, offset }));
        }
        if let Some((requested, start)) = started {
            debug!(?conn, requested, start, "slave starts streaming");
            self.supersede_older(conn);
            self.queue.push_back(MasterOutput::Event(MasterEvent::SlaveStarted { conn, requested, start }));
        }
        if let Some(offset) = revived {
            info!(
                ?conn,
                offset,
                "an older connection of a replica acknowledged bytes sent after a newer one started: it is alive and counts again"
            );
        }
        if let Some(offset) = acked {
            trace!(?conn, offset, "slave ack");
            self.queue.push_back(MasterOutput::Event(MasterEvent::SlaveAcked { conn, offset }));
        }
        if let Some(error) = failure {
            self.close(conn, CloseReason::Peer(error));
        } else if acked.is_some() || started.is_some() {
            self.complete_waits();
        }
    }

    fn on_verified(&mut self, conn: ConnId, boundary: bool) {
        let Some(c) = self.conns.get_mut(&conn) else { return };
        let Phase::Verifying { offset } = c.phase else { return };
        if !boundary {
            self.close(conn, CloseReason::Peer(PeerError::SlaveDiverged { reported: offset }));
            return;
        }
        c.phase = Phase::Streaming { start: offset, next: offset, ack: offset };
        debug!(?conn, offset, "slave starts streaming");
        self.supersede_older(conn);
        self.queue.push_back(MasterOutput::Event(MasterEvent::SlaveStarted {
            conn,
            requested: offset,
            start: offset,
        }));
        self.complete_waits();
    }

    fn on_await(&mut self, id: WaitId, offset: Offset, deadline: Instant) {
        let (policy, gap, end, now) =
            (self.config.ack_policy, self.config.ha_max_gap_not_in_sync, self.log.max, self.now);
        let decided = self.with_acks(|acks| {
            policy::check_available(policy, acks, offset, gap)
                .and_then(|()| if deadline <= now { Err(WaitError::Timeout) } else { Ok(()) })
                .map(|()| policy::frontier(policy, acks, end, gap).is_some_and(|f| f >= offset))
        });
        match decided {
            Err(e) => self.wait_done(id, Err(e)),
            Ok(true) => self.wait_done(id, Ok(offset)),
            Ok(false) => self.waiters.insert(id, offset, deadline),
        }
    }

    /// Runs `f` over the acks that count for replication waits: one per streaming connection,
    /// except those a newer connection of their replica superseded and, with
    /// `identified_only`, those the driver did not identify. Without allocating for
    /// the few connections a master has: it runs for every put a SYNC_MASTER waits on.
    fn with_acks<T>(&self, f: impl FnOnce(&[Offset]) -> T) -> T {
        const INLINE: usize = 8;
        let mut inline = [0; INLINE];
        let mut len = 0;
        let mut spilled = Vec::new();
        let identified_only = self.config.identified_only;
        let counted = |c: &&SlaveConn| c.superseded.is_none() && (!identified_only || c.replica.is_some());
        for ack in self.conns.values().filter(counted).filter_map(SlaveConn::ack) {
            if len < INLINE {
                inline[len] = ack;
                len += 1;
            } else {
                if spilled.is_empty() {
                    spilled.extend_from_slice(&inline);
                }
                spilled.push(ack);
            }
        }
        if spilled.is_empty() { f(&inline[..len]) } else { f(&spilled) }
    }

    /// `conn` of an identified replica started streaming: every other connection of that
    /// replica is older (a replica streams on one connection) and stops counting, until it
    /// acknowledges a byte past what it has been sent by now.
    fn supersede_older(&mut self, conn: ConnId) {
        let Some(replica) = self.conns.get(&conn).and_then(|c| c.replica) else { return };
        for (&id, c) in &mut self.conns {
            if id == conn || c.replica != Some(replica) {
                continue;
            }
            let sent = match c.phase {
                Phase::Streaming { next, .. } => next,
                Phase::AwaitingReport | Phase::Verifying { .. } => continue,
            };
            info!(conn = ?id, newer = ?conn, ?replica, sent, "a newer connection of the same replica streams: the older one counts no more unless it acknowledges bytes sent from now on");
            c.superseded = Some(sent);
        }
    }

    fn complete_waits(&mut self) {
        if self.waiters.len() == 0 {
            return;
        }
        if let Some(frontier) = self.replicated() {
            for (id, offset) in self.waiters.pop_satisfied(frontier) {
                self.wait_done(id, Ok(offset));
            }
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
        if self.conns.remove(&conn).is_none() {
            return;
        }
        self.closing.insert(conn);
        match reason {
            CloseReason::Peer(error) => {
                warn!(?conn, %error, "closing slave connection");
                self.queue.push_back(MasterOutput::Event(MasterEvent::PeerError { conn, error }));
            }
            _ => info!(?conn, %reason, "closing slave connection"),
        }
        self.queue.push_back(MasterOutput::Close { conn, reason });
        self.complete_waits();
    }

    /// Whether `c` has a frame to send now ([`stream::wants_frame`]; a full frame is a whole
    /// batch, or the rest of a segment): an idle master still sends within one event.
    fn wants_transmit(&self, c: &SlaveConn) -> bool {
        let Phase::Streaming { next, .. } = c.phase else { return false };
        stream::wants_frame(self.now, next, self.log.max, self.pacing(c), || {
            self.sendable(next) == self.batch_limit(next)
        })
    }

    fn pacing(&self, c: &SlaveConn) -> stream::Pacing {
        stream::Pacing {
            inflight: c.inflight,
            max_inflight: self.config.max_inflight,
            last_send: c.last_send,
            heartbeat: self.config.heartbeat_interval,
        }
    }

    /// Bytes that can go in one frame from `next`: up to the batch size, the segment end and
    /// the appended end.
    fn sendable(&self, next: Offset) -> u64 {
        self.batch_limit(next).min(self.log.max - next)
    }

    /// The most one frame from `next` can ever carry: the batch size or the rest of the segment.
    fn batch_limit(&self, next: Offset) -> u64 {
        stream::frame_limit(next, self.config.mapped_file_size_commit_log, self.config.transfer_batch_size)
    }

    fn next_transmit(&mut self) -> Option<MasterOutput> {
        let conn = stream::next_in_turn(&self.conns, self.cursor, |c| self.wants_transmit(c))?;
        self.cursor = Some(conn);
        let (segment, batch) = (self.config.mapped_file_size_commit_log, self.config.transfer_batch_size);
        let end = self.log.max;
        let now = self.now;
        let c = self.conns.get_mut(&conn).expect("found above");
        let Phase::Streaming { next, .. } = &mut c.phase else {
            unreachable!("wants_transmit checked the phase")
        };
        c.inflight += 1;
        c.last_send = now;
        let (header, body) = if *next < end {
            let len = stream::frame_limit(*next, segment, batch).min(end - *next);
            let span =
                LogSpan { offset: *next, len: u32::try_from(len).expect("len <= transfer_batch_size") };
            *next += len;
            c.bytes_sent += len;
            (PushHeader { offset: span.offset, body_len: span.len }, Some(span))
        } else {
            (PushHeader::heartbeat(*next), None)
        };
        Some(MasterOutput::Transmit { conn, header: header.encode(), body })
    }

    fn next_timeout(&self) -> Instant {
        let mut at = self.waiters.next_deadline().unwrap_or(self.now + IDLE_TIMEOUT);
        for c in self.conns.values() {
            at = at.min(c.last_report + self.config.housekeeping_interval);
            if matches!(c.phase, Phase::AwaitingReport) {
                at = at.min(c.accepted_at + self.config.first_report_timeout);
            }
            if let Phase::Streaming { next, .. } = c.phase {
                if let Some(due) = stream::heartbeat_due(next, self.log.max, self.pacing(c)) {
                    at = at.min(due);
                }
            }
        }
        at
    }
}

/// Where streaming starts for a first report, or why the slave cannot be served.
fn first_report_start(config: &MasterConfig, log: LogBounds, reported: Offset) -> Result<Offset, PeerError> {
    if reported == 0 {
        return Ok(match config.new_slave_start {
            NewSlaveStart::Earliest => log.min,
            NewSlaveStart::LastFile => (log.max - log.max % config.mapped_file_size_commit_log).max(log.min),
        });
    }
    if reported > log.max {
        return Err(PeerError::SlaveAhead { reported, end: log.max });
    }
    if reported < log.min {
        return Err(PeerError::SlaveBehindRetention { reported, min: log.min });
    }
    Ok(reported)
}
