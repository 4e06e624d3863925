//! The AutoSwitch slave: connect, handshake (frame A), read the master's epochs (frame C),
//! have the driver truncate to the consistent point, then stream (frames D) and report (frame B).

use std::collections::VecDeque;
use std::ops::Range;
use std::time::Duration;

use crate::time::Instant;

use bytes::Bytes;
use tracing::{debug, info, trace, warn};

use super::epoch::find_consistent_point;
use super::error::{CloseReason, EpochRefusal, PeerError};
use super::frame::{
    EPOCH_ENTRY_LEN, HANDSHAKE_REPLY_HEADER_LEN, HandshakeRequest, MAX_HANDSHAKE_EPOCHS, MasterFrame,
    MasterFrameDecoder, SlaveFrame, TRANSFER_HEADER_LEN, TransferHeader,
};
use crate::ApiMisuse;
use crate::MAX_JAVA_FRAME_BODY;
use crate::config::{
    AckOn, CoreConfigError, DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_HOUSEKEEPING_INTERVAL,
    DEFAULT_MAX_FIRST_OFFSET, DEFAULT_MAX_UNSTORED, DEFAULT_RECONNECT_INTERVAL,
};
use crate::log::Offset;
use crate::log::{EpochCache, EpochEntry};
use crate::stream;

const IDLE_TIMEOUT: Duration = Duration::from_secs(3600);

/// Configuration of an [`AutoSwitchSlave`], with RocketMQ's names and defaults.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoSwitchSlaveConfig {
    /// This broker's id, sent in the handshake (the controller assigns it).
    pub broker_id: i64,
    /// `isAsyncLearner`: replicate without ever joining the sync-state-set.
    pub async_learner: bool,
    /// `isSyncFromLastFile`: an empty slave asks only for the master's last segment.
    pub sync_from_last_file: bool,
    /// Report at least this often (`haSendHeartbeatInterval`).
    pub heartbeat_interval: Duration,
    /// Close after this long without a complete frame (`haHousekeepingInterval`).
    pub housekeeping_interval: Duration,
    /// Wait this long after a connection ends before connecting again.
    pub reconnect_interval: Duration,
    /// Largest transfer body accepted.
    pub max_frame_body: u32,
    /// Stop reading while this many received bytes are not yet stored.
    pub max_unstored: u64,
    /// The largest first offset an empty slave adopts.
    pub max_first_offset: u64,
    /// When bytes count as acknowledged: once written (Java) or once flushed.
    pub ack_on: AckOn,
    /// The epoch the master was elected in, as the controller said (`changeToSlave`'s
    /// `newMasterEpoch`); `None`: not checked (a bare core). A master whose last epoch is below
    /// it, or below this log's last epoch, is refused before anything is truncated; an epoch
    /// above it is refused before anything is written.
    pub master_epoch: Option<i32>,
    /// The one range of confirmed bytes a truncation may drop: an operator's explicit override
    /// (`haSlaveDropConfirmed`) naming exactly `[point, confirmOffset)` of a refusal
    /// ([`PeerError::WouldTruncateConfirmed`]). `None`: never truncate below the confirmOffset.
    pub drop_confirmed: Option<Range<Offset>>,
}

impl Default for AutoSwitchSlaveConfig {
    fn default() -> Self {
        Self {
            broker_id: 0,
            async_learner: false,
            sync_from_last_file: false,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            housekeeping_interval: DEFAULT_HOUSEKEEPING_INTERVAL,
            reconnect_interval: DEFAULT_RECONNECT_INTERVAL,
            max_frame_body: MAX_JAVA_FRAME_BODY,
            max_unstored: DEFAULT_MAX_UNSTORED,
            max_first_offset: DEFAULT_MAX_FIRST_OFFSET,
            ack_on: AckOn::Written,
            master_epoch: None,
            drop_confirmed: None,
        }
    }
}

impl AutoSwitchSlaveConfig {
    /// Checks that every field can work, naming the first one that cannot.
    pub fn validate(&self) -> Result<(), CoreConfigError> {
        crate::config::SlaveConfig {
            heartbeat_interval: self.heartbeat_interval,
            housekeeping_interval: self.housekeeping_interval,
            reconnect_interval: self.reconnect_interval,
            max_frame_body: self.max_frame_body,
            max_unstored: u64::MAX,
            max_first_offset: self.max_first_offset,
            ..Default::default()
        }
        .validate()?;
        // A whole transfer frame, or the largest handshake reply, must fit in what is read.
        let frame = (u64::from(self.max_frame_body) + TRANSFER_HEADER_LEN as u64)
            .max((HANDSHAKE_REPLY_HEADER_LEN + EPOCH_ENTRY_LEN * MAX_HANDSHAKE_EPOCHS) as u64);
        if self.max_unstored < frame {
            return Err(CoreConfigError::Invalid {
                field: "max_unstored",
                value: format!("{:?}", self.max_unstored),
                reason: "must hold a whole frame (max_frame_body + 36, and at least 12020 for 1000 epochs)",
            });
        }
        Ok(())
    }
}

/// Something the slave driver tells the core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlaveInput {
    /// The connection asked for by `Connect` is up.
    Connected,
    /// Bytes arrived from the master, in any fragmentation.
    Received(Bytes),
    /// The connection failed or ended. Not for connections the core closed.
    Closed,
    /// The truncation asked for by `Truncate` is done: the log ends at `end` (the point). It
    /// may come after the connection closed: the slave does not reconnect before it does.
    Truncated {
        /// The log's end after truncating.
        end: Offset,
    },
    /// The log stored every byte before `end` (after an `Append`).
    Appended {
        /// The log's new end.
        end: Offset,
    },
    /// The log made every byte before `end` durable (after a `Flush`).
    Flushed {
        /// The durable end.
        end: Offset,
    },
    /// A `Truncate`, `Append`, `StoreEpochs` or `Flush` failed; the log ends at `end`. The connection
    /// is closed and re-opened after the back-off.
    StoreFailed {
        /// The log's end after the failure.
        end: Offset,
    },
}

/// Something the core asks the slave driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum SlaveOutput {
    /// Open a connection to the master; feed `Connected` or `Closed`.
    Connect,
    /// Write `frame.encode()` to the master in one write.
    Transmit(SlaveFrame),
    /// Cut the log to end at `offset` (a message boundary), persist `epochs` as the epoch file
    /// (the local entries starting before `offset`), and set confirmOffset to at most `offset`;
    /// then feed `Truncated { end: offset }` (or `StoreFailed`). Nothing streams until then.
    Truncate {
        /// The consistent point.
        offset: Offset,
        /// The epoch entries to keep.
        epochs: Vec<EpochEntry>,
    },
    /// Persist these entries as the epoch file before storing the `Append` that follows.
    /// Feed nothing on success, `StoreFailed` on failure.
    StoreEpochs(Vec<EpochEntry>),
    /// Store `data` at `offset`; feed `Appended` or `StoreFailed`.
    Append {
        /// Where the bytes go.
        offset: Offset,
        /// The raw log bytes.
        data: Bytes,
    },
    /// Make the log durable; feed `Flushed` or `StoreFailed`. Only with `AckOn::Flushed`.
    Flush,
    /// The confirmOffset changed: dispatch consume queues only up to this offset.
    ConfirmOffset(Offset),
    /// Drop the connection. Do not feed `Closed` for it.
    Close(CloseReason),
    /// Something the application may want to know.
    Event(SlaveEvent),
    /// Nothing more to do until this instant or the next input.
    Timeout(Instant),
}

/// What the slave reports to the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlaveEvent {
    /// The master answered the handshake.
    Handshake {
        /// The master's end.
        master_max_offset: Offset,
        /// The master's last epoch.
        master_last_epoch: i32,
        /// Where the logs agree up to (`None` when the local epoch cache is empty: no check).
        consistent_point: Option<Offset>,
    },
    /// A new epoch was recorded from the master's stream.
    EpochRecorded(EpochEntry),
    /// The first report of a connection went out: the master streams from `offset`.
    FirstReport {
        /// The offset acknowledged.
        offset: Offset,
    },
    /// The connection ended; `None` when the driver reported it.
    Disconnected {
        /// Why the core closed it, if it did.
        reason: Option<CloseReason>,
    },
    /// The master broke the protocol; the connection is being closed.
    PeerError(PeerError),
}

/// Where the slave is in its connection cycle.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SlaveState {
    /// Waiting out the back-off before the next `Connect`.
    Disconnected {
        /// When the next `Connect` goes out.
        retry_at: Instant,
    },
    /// `Connect` went out.
    Connecting,
    /// Handshake sent; waiting for the master's epochs.
    Handshake,
    /// Waiting for the driver to truncate to the point.
    Truncating {
        /// The consistent point.
        offset: Offset,
    },
    /// Streaming.
    Transfer,
}

#[derive(Debug)]
enum Phase {
    Handshake,
    Truncating { point: Offset, master: EpochCache },
    Transfer { master: EpochCache, reported: Option<Offset> },
}

#[derive(Debug)]
struct Conn {
    phase: Phase,
    decoder: MasterFrameDecoder,
    last_read: Instant,
    last_ack: Instant,
}

#[derive(Debug)]
enum State {
    Disconnected { retry_at: Instant },
    Connecting,
    Connected(Box<Conn>),
}

/// The AutoSwitch HA slave (sans-IO).
///
/// Drive it like every machine of the crate: after every `handle_input` or `handle_timeout`,
/// drain [`poll_output`](Self::poll_output) until it returns [`SlaveOutput::Timeout`].
#[derive(Debug)]
pub struct AutoSwitchSlave {
    config: AutoSwitchSlaveConfig,
    now: Instant,
    state: State,
    epochs: EpochCache,
    /// One past the last stored byte.
    end: Offset,
    /// One past the last byte handed out in an `Append`.
    requested: Offset,
    /// One past the last durable byte (the last `Flushed`).
    flushed: Offset,
    flush_in_flight: bool,
    /// `Append`s not yet answered.
    unanswered: u64,
    /// The point of a `Truncate` not yet answered; it outlives the connection that asked.
    truncation: Option<Offset>,
    /// The master's confirmOffset as last received.
    master_confirm: Option<Offset>,
    /// The confirmOffset last emitted.
    confirm: Option<Offset>,
    /// The confirmOffset the log held at start ([`with_confirm_offset`](Self::with_confirm_offset)):
    /// with `confirm`, the floor no truncation goes below.
    recorded_confirm: Offset,
    queue: VecDeque<SlaveOutput>,
}

impl AutoSwitchSlave {
    /// A slave whose log ends at `end`, durable up to `flushed`, with these epochs (read from
    /// the epoch file). It asks to connect at once.
    pub fn new(
        config: AutoSwitchSlaveConfig,
        now: Instant,
        end: Offset,
        flushed: Offset,
        epochs: EpochCache,
    ) -> Result<Self, CoreConfigError> {
        config.validate()?;
        Ok(Self {
            config,
            now,
            state: State::Disconnected { retry_at: now },
            epochs,
            end,
            requested: end,
            flushed: flushed.min(end),
            flush_in_flight: false,
            unanswered: 0,
            truncation: None,
            master_confirm: None,
            confirm: None,
            recorded_confirm: 0,
            queue: VecDeque::new(),
        })
    }

    /// The same slave, knowing that the log's replication-confirmed offset is `offset` (as the
    /// store's checkpoint keeps it, [`EpochLog::confirmed_offset`](crate::EpochLog::confirmed_offset)): no truncation goes below it, nor
    /// below any confirmOffset learned since, unless [`AutoSwitchSlaveConfig::drop_confirmed`]
    /// names exactly the bytes dropped.
    #[must_use]
    pub fn with_confirm_offset(mut self, offset: Offset) -> Self {
        self.recorded_confirm = offset.min(self.end);
        self
    }

    /// The confirmOffset no truncation may go below: the one recorded at start or the last
    /// one in force since, whichever is higher, within the log.
    pub fn confirm_floor(&self) -> Offset {
        self.recorded_confirm.max(self.confirm.unwrap_or(0)).min(self.end)
    }

    /// The configuration.
    pub fn config(&self) -> &AutoSwitchSlaveConfig {
        &self.config
    }

    /// The connection state.
    pub fn state(&self) -> SlaveState {
        match &self.state {
            State::Disconnected { retry_at } => SlaveState::Disconnected { retry_at: *retry_at },
            State::Connecting => SlaveState::Connecting,
            State::Connected(c) => match c.phase {
                Phase::Handshake => SlaveState::Handshake,
                Phase::Truncating { point, .. } => SlaveState::Truncating { offset: point },
                Phase::Transfer { .. } => SlaveState::Transfer,
            },
        }
    }

    /// The local epoch cache.
    pub fn epochs(&self) -> &EpochCache {
        &self.epochs
    }

    /// One past the last stored byte.
    pub fn end(&self) -> Offset {
        self.end
    }

    /// The point of a `Truncate` the driver has not answered yet.
    pub fn pending_truncation(&self) -> Option<Offset> {
        self.truncation
    }

    /// The confirmOffset: `min(master's confirmOffset, local end)`; `None` before a master
    /// has sent one.
    pub fn confirm_offset(&self) -> Option<Offset> {
        self.confirm
    }

    /// Whether the driver should read: false when not connected, while truncating, and while
    /// received bytes not yet stored reach `max_unstored`.
    pub fn wants_read(&self) -> bool {
        match &self.state {
            State::Connected(c) => {
                !matches!(c.phase, Phase::Truncating { .. })
                    && (self.requested - self.end) + (c.decoder.buffered() as u64) < self.config.max_unstored
            }
            _ => false,
        }
    }

    /// Feeds one input. On `Err` the input was refused and nothing changed.
    pub fn handle_input(&mut self, now: Instant, input: SlaveInput) -> Result<(), ApiMisuse> {
        if now < self.now {
            return Err(ApiMisuse::TimeWentBackwards);
        }
        self.check(&input)?;
        self.now = now;
        match input {
            SlaveInput::Connected => {
                debug!("connected to master");
                self.requested = self.end;
                self.state = State::Connected(Box::new(Conn {
                    phase: Phase::Handshake,
                    decoder: MasterFrameDecoder::new(self.config.max_frame_body),
                    last_read: now,
                    last_ack: now,
                }));
                self.queue.push_back(SlaveOutput::Transmit(SlaveFrame::Handshake(HandshakeRequest {
                    sync_from_last_file: self.config.sync_from_last_file,
                    async_learner: self.config.async_learner,
                    broker_id: self.config.broker_id,
                })));
            }
            SlaveInput::Received(data) => self.on_received(data),
            SlaveInput::Closed => {
                if !matches!(self.state, State::Disconnected { .. }) {
                    debug!("connection to master ended");
                    self.disconnect(None);
                }
            }
            SlaveInput::Truncated { end } => {
                self.truncation = None;
                self.end = end;
                self.flushed = self.flushed.min(end);
                self.requested = end;
                self.epochs.truncate_from(end);
                // The override named these bytes; they are gone, and so is their confirmation.
                self.recorded_confirm = self.recorded_confirm.min(end);
                self.confirm = self.confirm.map(|c| c.min(end));
                self.update_confirm();
                info!(end, "truncated to the consistent point");
                if let State::Connected(c) = &mut self.state {
                    if let Phase::Truncating { master, .. } =
                        std::mem::replace(&mut c.phase, Phase::Handshake)
                    {
                        c.phase = Phase::Transfer { master, reported: None };
                    }
                }
                if let Err(error) = self.drain_frames() {
                    self.close(CloseReason::Peer(error));
                }
            }
            SlaveInput::Appended { end } => {
                self.end = end;
                self.unanswered = if end == self.requested { 0 } else { self.unanswered.saturating_sub(1) };
                self.update_confirm();
            }
            SlaveInput::Flushed { end } => {
                self.flush_in_flight = false;
                self.flushed = self.flushed.max(end.min(self.end));
            }
            SlaveInput::StoreFailed { end } => {
                warn!(end, "store failed");
                self.flush_in_flight = false;
                self.flushed = self.flushed.min(end);
                if self.truncation.take().is_some() && end < self.end {
                    // A truncation stopped part way: epochs that lost every byte go; an empty
                    // epoch starting at the new end stays.
                    self.epochs.truncate_from(end + 1);
                }
                self.unanswered = 0;
                self.end = end;
                self.requested = end;
                self.update_confirm();
                self.close(CloseReason::StoreFailed);
            }
        }
        Ok(())
    }

    fn check(&self, input: &SlaveInput) -> Result<(), ApiMisuse> {
        let pending = self.truncation;
        match *input {
            SlaveInput::Connected if !matches!(self.state, State::Connecting) => {
                Err(ApiMisuse::UnexpectedConnected)
            }
            SlaveInput::Truncated { end } if pending != Some(end) => {
                Err(ApiMisuse::UnexpectedTruncated { end: Some(end), pending })
            }
            SlaveInput::Appended { end } if end < self.end || end > self.requested => {
                Err(ApiMisuse::AppendedOutOfRange { end, previous: self.end, requested: self.requested })
            }
            SlaveInput::StoreFailed { end } if end > self.requested.max(self.end) => {
                Err(ApiMisuse::AppendedOutOfRange { end, previous: self.end, requested: self.requested })
            }
            _ => Ok(()),
        }
    }

    /// Advances time: closes a connection silent past the housekeeping interval. Spurious or
    /// early calls are harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        if now < self.now {
            return;
        }
        self.now = now;
        if let State::Connected(c) = &self.state {
            // A truncation in progress is the driver's work, not the master's silence.
            if !matches!(c.phase, Phase::Truncating { .. })
                && now.saturating_duration_since(c.last_read) >= self.config.housekeeping_interval
            {
                self.close(CloseReason::HousekeepingTimeout);
            }
        }
    }

    /// The next thing to do. Drain until [`SlaveOutput::Timeout`] after every input.
    pub fn poll_output(&mut self) -> SlaveOutput {
        let out = self.do_poll_output();
        match &out {
            SlaveOutput::Append { offset, data } => trace!(offset, len = data.len(), "append"),
            SlaveOutput::Transmit(f) => trace!(?f, "transmit"),
            SlaveOutput::Timeout(_) => {}
            other => debug!(?other, "output"),
        }
        out
    }

    fn do_poll_output(&mut self) -> SlaveOutput {
        if let Some(out) = self.queue.pop_front() {
            return out;
        }
        if stream::flush_due(self.config.ack_on, self.flushed, self.end, &mut self.flush_in_flight) {
            return SlaveOutput::Flush;
        }
        let end = self.end;
        // What may be acknowledged: written bytes, or with `AckOn::Flushed` durable ones.
        let ackable = match self.config.ack_on {
            AckOn::Written => end,
            AckOn::Flushed if crate::planted::planted(crate::planted::Plant::AckBeforeFlush) => end,
            AckOn::Flushed => self.flushed.min(end),
        };
        let settled = self.unanswered == 0 && self.truncation.is_none();
        let heartbeat = self.config.heartbeat_interval;
        let now = self.now;
        match &mut self.state {
            State::Disconnected { retry_at } if now >= *retry_at && settled => {
                self.state = State::Connecting;
                debug!("connecting to master");
                return SlaveOutput::Connect;
            }
            State::Connected(c) => {
                if let Phase::Transfer { reported, .. } = &mut c.phase {
                    // Ack at once after the handshake or truncation (Java waits up to one
                    // heartbeat interval), whenever the end advances, and as a heartbeat.
                    // The first report is where the master starts: it must be the whole log.
                    let ack =
                        stream::next_report(now, *reported, c.last_ack, heartbeat, ackable, end, settled);
                    if let Some(offset) = ack {
                        if reported.is_none() {
                            self.queue.push_back(SlaveOutput::Event(SlaveEvent::FirstReport { offset }));
                        }
                        *reported = Some(offset);
                        c.last_ack = now;
                        return SlaveOutput::Transmit(SlaveFrame::Report(offset));
                    }
                }
            }
            _ => {}
        }
        SlaveOutput::Timeout(self.next_timeout())
    }

    fn next_timeout(&self) -> Instant {
        match &self.state {
            State::Disconnected { retry_at } => {
                let settled = self.unanswered == 0 && self.truncation.is_none();
                stream::reconnect_deadline(*retry_at, settled, self.now + IDLE_TIMEOUT)
            }
            State::Connecting => self.now + IDLE_TIMEOUT,
            State::Connected(c) => match c.phase {
                Phase::Truncating { .. } => self.now + IDLE_TIMEOUT,
                Phase::Handshake => c.last_read + self.config.housekeeping_interval,
                Phase::Transfer { reported, .. } => stream::streaming_deadline(
                    c.last_read,
                    self.config.housekeeping_interval,
                    reported,
                    c.last_ack,
                    self.config.heartbeat_interval,
                ),
            },
        }
    }

    fn on_received(&mut self, data: Bytes) {
        let State::Connected(c) = &mut self.state else {
            trace!(len = data.len(), "bytes after the connection closed dropped");
            return;
        };
        if matches!(c.phase, Phase::Truncating { .. }) {
            // The driver should not read while truncating; buffer what comes anyway.
            c.decoder.extend(data);
            return;
        }
        c.decoder.extend(data);
        if let Err(error) = self.drain_frames() {
            self.close(CloseReason::Peer(error));
        }
    }

    fn drain_frames(&mut self) -> Result<(), PeerError> {
        loop {
            let State::Connected(c) = &mut self.state else { return Ok(()) };
            if matches!(c.phase, Phase::Truncating { .. }) {
                return Ok(());
            }
            let Some(frame) = c.decoder.decode()? else { return Ok(()) };
            c.last_read = self.now;
            match frame {
                MasterFrame::Handshake(reply) => {
                    if matches!(c.phase, Phase::Transfer { .. }) {
                        // A Java master answers every handshake it reads; a late duplicate
                        // reply changes nothing here.
                        debug!("duplicate handshake reply ignored");
                        continue;
                    }
                    let master =
                        EpochCache::from_entries(reply.entries).map_err(PeerError::InvalidEpochList)?;
                    self.on_handshake(master, reply.max_offset, reply.last_epoch)?;
                }
                MasterFrame::Transfer { header, body } => self.on_transfer(header, body)?,
            }
        }
    }

    /// Refuses a master whose epochs this slave must not follow, before anything is truncated
    /// or written: one announcing an epoch above the one it was elected in, one whose last
    /// epoch is below that, and one whose last epoch is below this log's (a stale master).
    /// The handshake's last epoch and its list's last entry are both taken at their worst.
    fn check_master_epochs(&self, master: &EpochCache, master_last: i32) -> Result<(), PeerError> {
        let listed = master.last_epoch();
        let (low, high) = (master_last.min(listed), master_last.max(listed));
        if let Some(elected) = self.config.master_epoch {
            if high > elected {
                return Err(PeerError::EpochAboveElected { epoch: high, elected });
            }
            if low < elected {
                return Err(PeerError::MasterBehindElectedEpoch { master_last_epoch: low, elected });
            }
        }
        let local = self.epochs.last_epoch();
        if !self.epochs.is_empty() && low < local {
            return Err(PeerError::MasterBehindLocalEpoch {
                master_last_epoch: low,
                local_last_epoch: local,
            });
        }
        Ok(())
    }

    fn on_handshake(
        &mut self,
        master: EpochCache,
        master_max: Offset,
        master_last: i32,
    ) -> Result<(), PeerError> {
        self.check_master_epochs(&master, master_last)?;
        let first_start = self.epochs.entries().next().map(|e| e.start_offset);
        let point = if self.epochs.is_empty() {
            // Java: a store without epochs (new, or upgraded from classic mode) is not checked.
            None
        } else if first_start.is_some_and(|s| self.end <= s)
            && find_consistent_point(&self.epochs, self.end, &master, master_max).is_none()
        {
            // Every local epoch is empty (a broker that became master and wrote nothing): no
            // byte of the log carries an epoch, so nothing can have diverged. Java would find
            // no consistent point and retry forever; drop the empty epochs instead.
            info!(end = self.end, "local epochs hold no data; dropping them");
            self.epochs.truncate_from(self.end);
            self.queue.push_back(SlaveOutput::StoreEpochs(self.epochs.entries().collect()));
            None
        } else {
            Some(find_consistent_point(&self.epochs, self.end, &master, master_max).ok_or(
                PeerError::NoConsistentPoint {
                    local_last_epoch: self.epochs.last_epoch(),
                    master_last_epoch: master_last,
                },
            )?)
        };
        if let Some(p) = point.filter(|&p| p < self.end) {
            let floor = self.confirm_floor();
            if p < floor && self.config.drop_confirmed != Some(p..floor) {
                return Err(PeerError::WouldTruncateConfirmed { point: p, confirm_offset: floor });
            }
            if p < floor {
                warn!(
                    point = p,
                    confirm_offset = floor,
                    bytes = floor - p,
                    "truncating below the confirmOffset, as the operator allowed for exactly these bytes"
                );
            }
        }
        info!(master_max, master_last, ?point, "handshake reply");
        self.queue.push_back(SlaveOutput::Event(SlaveEvent::Handshake {
            master_max_offset: master_max,
            master_last_epoch: master_last,
            consistent_point: point,
        }));
        let State::Connected(c) = &mut self.state else { unreachable!("called while connected") };
        match point {
            Some(p) if p < self.end => {
                let mut kept = self.epochs.clone();
                kept.truncate_from(p);
                c.phase = Phase::Truncating { point: p, master };
                self.truncation = Some(p);
                self.queue.push_back(SlaveOutput::Truncate { offset: p, epochs: kept.entries().collect() });
            }
            _ => c.phase = Phase::Transfer { master, reported: None },
        }
        Ok(())
    }

    fn on_transfer(&mut self, header: TransferHeader, body: Bytes) -> Result<(), PeerError> {
        let State::Connected(c) = &mut self.state else { return Ok(()) };
        let Phase::Transfer { master, .. } = &mut c.phase else {
            return Err(PeerError::TransferBeforeHandshake);
        };
        if let Some(elected) = self.config.master_epoch.filter(|&e| header.epoch > e) {
            return Err(PeerError::EpochAboveElected { epoch: header.epoch, elected });
        }
        if let Some(confirm) = header.confirm_offset {
            self.master_confirm = Some(confirm);
        }
        let Some(offset) = header.offset else {
            // Java's heartbeat from a master with nothing to stream yet.
            self.update_confirm();
            return Ok(());
        };
        if self.requested != 0 && offset != self.requested {
            return Err(PeerError::OffsetMismatch { expected: self.requested, got: offset });
        }
        if self.requested == 0 && offset > self.config.max_first_offset {
            return Err(PeerError::FirstOffsetTooLarge { offset, max: self.config.max_first_offset });
        }
        if body.is_empty() {
            // Heartbeats (and Java's zero-length chunk carrying the next epoch) record no epoch:
            // an epoch matters from its first byte on, and the next data frame carries it.
            self.update_confirm();
            return Ok(());
        }
        // Every data frame's epoch is recorded below, so the local last epoch is the highest seen.
        let highest = self.epochs.last_epoch();
        if header.epoch < highest {
            return Err(PeerError::EpochWentBackwards { epoch: header.epoch, highest });
        }
        let refused =
            |reason| PeerError::EpochRefused { epoch: header.epoch, start: header.epoch_start, reason };
        // The master's view: its handshake list plus the epochs its frames carried.
        match master.get(header.epoch) {
            Some(e) if e.start_offset != header.epoch_start => {
                return Err(refused(EpochRefusal::StartDiffers { recorded: e.start_offset }));
            }
            Some(_) => {}
            None => {
                master
                    .append(header.epoch, header.epoch_start)
                    .map_err(|e| refused(EpochRefusal::Cache(e)))?;
            }
        }
        // Mirror, oldest first, the master's epochs up to this frame's that start by its end
        // and are newer than the local last. A Java master tags the last chunk of an epoch
        // with the next epoch, so a fresh slave must take the epoch those bytes belong to from
        // the handshake list; empty epochs are mirrored too.
        let frame_end = offset + body.len() as u64;
        let mut changed = Vec::new();
        for e in master.entries() {
            if e.epoch > header.epoch || e.start_offset > frame_end || e.epoch <= self.epochs.last_epoch() {
                continue;
            }
            self.epochs.append(e.epoch, e.start_offset).map_err(|err| refused(EpochRefusal::Cache(err)))?;
            changed.push(e);
        }
        if let Some(recorded) = self.epochs.get(header.epoch) {
            if recorded.start_offset != header.epoch_start {
                return Err(refused(EpochRefusal::StartDiffers { recorded: recorded.start_offset }));
            }
        }
        if !changed.is_empty() {
            self.queue.push_back(SlaveOutput::StoreEpochs(self.epochs.entries().collect()));
            for e in changed {
                info!(epoch = e.epoch, start = e.start_offset, "epoch recorded");
                self.queue.push_back(SlaveOutput::Event(SlaveEvent::EpochRecorded(e)));
            }
        }
        self.requested = frame_end;
        self.unanswered += 1;
        self.queue.push_back(SlaveOutput::Append { offset, data: body });
        self.update_confirm();
        Ok(())
    }

    fn update_confirm(&mut self) {
        let Some(master) = self.master_confirm else { return };
        let confirm = master.min(self.end);
        if self.confirm != Some(confirm) {
            self.confirm = Some(confirm);
            self.queue.push_back(SlaveOutput::ConfirmOffset(confirm));
        }
    }

    fn close(&mut self, reason: CloseReason) {
        if !matches!(self.state, State::Connected(_)) {
            return;
        }
        if let CloseReason::Peer(error) = reason {
            warn!(%error, "closing connection to master");
            self.queue.push_back(SlaveOutput::Event(SlaveEvent::PeerError(error)));
        } else {
            info!(%reason, "closing connection to master");
        }
        self.queue.push_back(SlaveOutput::Close(reason));
        self.disconnect(Some(reason));
    }

    fn disconnect(&mut self, reason: Option<CloseReason>) {
        self.state = State::Disconnected { retry_at: self.now + self.config.reconnect_interval };
        self.queue.push_back(SlaveOutput::Event(SlaveEvent::Disconnected { reason }));
    }
}
