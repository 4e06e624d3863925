//! The slave side: one state machine for a RocketMQ HA slave's connection to its master.

use crate::time::Instant;
use std::collections::VecDeque;

use bytes::Bytes;
use tracing::{debug, info, trace, warn};

use super::error::{CloseReason, PeerError};
use super::frame::PushDecoder;
use super::master::IDLE_TIMEOUT;
use crate::config::{AckOn, CoreConfigError, SlaveConfig};
use crate::error::ApiMisuse;
use crate::log::Offset;
use crate::stream;

/// Something the slave driver tells the core.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlaveInput {
    /// The connection asked for by `Connect` is up.
    Connected,
    /// Bytes arrived from the master, in any fragmentation.
    Received(Bytes),
    /// The connection failed or ended (connect error, EOF, I/O error). Not for connections the
    /// core closed itself.
    Closed,
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
    /// An `Append` failed; the log's end is `end`. The connection is closed and re-opened after
    /// the back-off, reporting `end`, once every `Append` handed out before is answered (each
    /// one gets its own `Appended` or `AppendFailed`, in order, however late).
    AppendFailed {
        /// The log's end after the failure.
        end: Offset,
    },
    /// A `Flush` failed. The connection is closed and re-opened after the back-off.
    FlushFailed,
}

/// Something the core asks the slave driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum SlaveOutput {
    /// Open a connection to the master; feed `Connected` or `Closed`.
    Connect,
    /// Report this offset to the master (RocketMQ's 8-byte `maxOffset` report, encoded by
    /// [`encode_report`](crate::classic::frame::encode_report)): every byte before it is stored.
    Report(Offset),
    /// Store `data` at `offset` (`LogWrite::append_at`); feed `Appended` or `AppendFailed`.
    Append {
        /// Where the bytes go.
        offset: Offset,
        /// The raw log bytes.
        data: Bytes,
    },
    /// Make the log durable (`LogWrite::flush`); feed `Flushed` or `FlushFailed`.
    Flush,
    /// Drop the connection. Do not feed `Closed` for it.
    Close(CloseReason),
    /// Something happened that the application may want to know.
    Event(SlaveEvent),
    /// Nothing more to do until this instant or the next input: call `handle_timeout` then.
    Timeout(Instant),
}

/// What the slave reports to the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlaveEvent {
    /// The first report of a connection went out: the master will stream from `offset`.
    FirstReport {
        /// The offset reported.
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
    /// `Connect` went out; waiting for `Connected` or `Closed`.
    Connecting,
    /// Connected to the master.
    Streaming,
}

#[derive(Debug)]
struct Stream {
    decoder: PushDecoder,
    /// When the last complete frame arrived (the connect before the first). Partial frames are
    /// not progress: a master trickling a body cannot hold the slave.
    last_read: Instant,
    last_report: Instant,
    /// The latest report sent on this connection; `None` before the first.
    reported: Option<Offset>,
}

#[derive(Debug)]
enum State {
    Disconnected { retry_at: Instant },
    Connecting,
    Streaming(Box<Stream>),
}

/// The RocketMQ HA slave (sans-IO).
///
/// Drive it as the crate docs describe: after every `handle_input` or `handle_timeout`, drain
/// [`poll_output`](Self::poll_output) until it returns [`SlaveOutput::Timeout`].
#[derive(Debug)]
pub struct Slave {
    config: SlaveConfig,
    now: Instant,
    state: State,
    /// One past the last stored byte (the last `Appended`).
    end: Offset,
    /// One past the last durable byte (the last `Flushed`).
    flushed: Offset,
    /// One past the last byte handed out in an `Append`: where the next frame must start.
    append_end: Offset,
    /// The highest offset a master frame has shown (its next transfer offset).
    master_offset: Option<Offset>,
    flush_in_flight: bool,
    /// `Append`s handed out and not yet answered by `Appended` or `AppendFailed`.
    unanswered: u64,
    /// Of those, the ones handed out before an `AppendFailed`: each will fail too, and an
    /// asynchronous driver may answer them late. No new stream starts (no `Connect`, no first
    /// report) before they are all answered, and their late `AppendFailed`s close nothing.
    doomed: u64,
    queue: VecDeque<SlaveOutput>,
}

impl Slave {
    /// A slave whose log ends at `end` with every byte before `flushed` durable. It asks to
    /// connect at once.
    pub fn new(
        config: SlaveConfig,
        now: Instant,
        end: Offset,
        flushed: Offset,
    ) -> Result<Self, CoreConfigError> {
        config.validate()?;
        Ok(Self {
            config,
            now,
            state: State::Disconnected { retry_at: now },
            end,
            flushed: flushed.min(end),
            append_end: end,
            master_offset: None,
            flush_in_flight: false,
            unanswered: 0,
            doomed: 0,
            queue: VecDeque::new(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &SlaveConfig {
        &self.config
    }

    /// The connection state.
    pub fn state(&self) -> SlaveState {
        match &self.state {
            State::Disconnected { retry_at } => SlaveState::Disconnected { retry_at: *retry_at },
            State::Connecting => SlaveState::Connecting,
            State::Streaming(_) => SlaveState::Streaming,
        }
    }

    /// One past the last stored byte.
    pub fn end(&self) -> Offset {
        self.end
    }

    /// One past the last durable byte, as last reported by `Flushed`.
    pub fn flushed(&self) -> Offset {
        self.flushed
    }

    /// The latest report sent on the current connection.
    pub fn reported(&self) -> Option<Offset> {
        match &self.state {
            State::Streaming(s) => s.reported,
            _ => None,
        }
    }

    /// The furthest offset the master has shown in a frame: where its stream currently is.
    pub fn master_offset(&self) -> Option<Offset> {
        self.master_offset
    }

    /// When the last complete frame arrived from the master on the current connection.
    pub fn last_read(&self) -> Option<Instant> {
        match &self.state {
            State::Streaming(s) => Some(s.last_read),
            _ => None,
        }
    }

    /// Whether the driver should read from the connection: false when not connected, and while
    /// received bytes not yet stored reach `max_unstored` (backpressure).
    pub fn wants_read(&self) -> bool {
        match &self.state {
            State::Streaming(s) => {
                (self.append_end - self.end) + (s.decoder.buffered() as u64) < self.config.max_unstored
            }
            _ => false,
        }
    }

    /// Feeds one input. On `Err` the input was refused and nothing changed.
    pub fn handle_input(&mut self, now: Instant, input: SlaveInput) -> Result<(), ApiMisuse> {
        if now < self.now {
            return Err(ApiMisuse::TimeWentBackwards);
        }
        match input {
            SlaveInput::Connected if !matches!(self.state, State::Connecting) => {
                return Err(ApiMisuse::UnexpectedConnected);
            }
            SlaveInput::Appended { end } | SlaveInput::AppendFailed { end } if end > self.append_end => {
                return Err(ApiMisuse::AppendedBeyondAppendEnd { end, append_end: self.append_end });
            }
            SlaveInput::Appended { end } | SlaveInput::AppendFailed { end } if end < self.end => {
                return Err(ApiMisuse::LogWentBackwards { end, previous: self.end });
            }
            _ => {}
        }
        self.now = now;
        match input {
            SlaveInput::Connected => {
                debug!("connected to master");
                self.state = State::Streaming(Box::new(Stream {
                    decoder: PushDecoder::new(self.config.max_frame_body),
                    last_read: now,
                    last_report: now,
                    reported: None,
                }));
            }
            SlaveInput::Received(data) => self.on_received(data),
            SlaveInput::Closed => {
                if !matches!(self.state, State::Disconnected { .. }) {
                    debug!("connection to master ended");
                    self.disconnect(None);
                }
            }
            SlaveInput::Appended { end } => {
                self.end = end;
                // Every byte asked for is stored: nothing is outstanding, however the driver
                // grouped its answers.
                self.unanswered = if end == self.append_end { 0 } else { self.unanswered.saturating_sub(1) };
                self.doomed = self.doomed.min(self.unanswered);
            }
            SlaveInput::Flushed { end } => {
                self.flush_in_flight = false;
                self.flushed = self.flushed.max(end);
            }
            SlaveInput::AppendFailed { end } if self.doomed > 0 => {
                // A late answer for an append handed out before an earlier failure: it failed
                // for that reason, and the connection it belonged to is already gone.
                self.unanswered = self.unanswered.saturating_sub(1);
                self.doomed -= 1;
                self.end = end;
                // Appends handed out after the failure (a new stream continues from the log's
                // end, behind the doomed ones) are still due: what was asked stays asked.
                if self.unanswered == self.doomed {
                    self.append_end = end;
                }
            }
            SlaveInput::AppendFailed { end } => {
                self.unanswered = self.unanswered.saturating_sub(1);
                self.doomed = self.unanswered;
                debug!(end, "append failed");
                self.end = end;
                self.append_end = end;
                self.close(CloseReason::StoreFailed);
            }
            SlaveInput::FlushFailed => {
                warn!("flush failed");
                self.flush_in_flight = false;
                self.close(CloseReason::StoreFailed);
            }
        }
        Ok(())
    }

    /// Advances time: closes a connection idle past the housekeeping interval. Spurious or
    /// early calls are harmless; a `now` earlier than the last one is ignored.
    pub fn handle_timeout(&mut self, now: Instant) {
        if now < self.now {
            return;
        }
        self.now = now;
        if let State::Streaming(s) = &self.state {
            if now.saturating_duration_since(s.last_read) >= self.config.housekeeping_interval {
                self.close(CloseReason::HousekeepingTimeout);
            }
        }
    }

    /// The next thing to do. Drain until [`SlaveOutput::Timeout`] after every input.
    pub fn poll_output(&mut self) -> SlaveOutput {
        let out = self.do_poll_output();
        match &out {
            SlaveOutput::Append { offset, data } => trace!(offset, len = data.len(), "append"),
            SlaveOutput::Report(offset) => trace!(offset, "report"),
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
        let reportable = self.reportable();
        match &mut self.state {
            State::Disconnected { retry_at } if self.now >= *retry_at && self.doomed == 0 => {
                self.state = State::Connecting;
                debug!("connecting to master");
                return SlaveOutput::Connect;
            }
            State::Streaming(s) => {
                // The first report is where the master starts: it must be the whole log, with
                // every append answered. The log's end may stop short of the bytes handed out
                // (a log keeps an incomplete trailing record unpublished): the new stream
                // starts at the end, and sends that record again.
                let settled = self.unanswered == 0 && self.doomed == 0;
                let heartbeat = self.config.heartbeat_interval;
                let report = stream::next_report(
                    self.now,
                    s.reported,
                    s.last_report,
                    heartbeat,
                    reportable,
                    self.end,
                    settled,
                );
                if let Some(offset) = report {
                    if s.reported.is_none() {
                        self.append_end = self.end;
                        self.queue.push_back(SlaveOutput::Event(SlaveEvent::FirstReport { offset }));
                    }
                    s.reported = Some(offset);
                    s.last_report = self.now;
                    return SlaveOutput::Report(offset);
                }
            }
            _ => {}
        }
        SlaveOutput::Timeout(self.next_timeout())
    }

    fn reportable(&self) -> Offset {
        if crate::planted::planted(crate::planted::Plant::ReportBeforeStore) {
            return self.append_end.max(self.end);
        }
        match self.config.ack_on {
            AckOn::Written => self.end,
            AckOn::Flushed => self.flushed.min(self.end),
        }
    }

    fn next_timeout(&self) -> Instant {
        match &self.state {
            // Waiting for the answers to a failed stream's appends: the next input brings them.
            State::Disconnected { retry_at } => {
                stream::reconnect_deadline(*retry_at, self.doomed == 0, self.now + IDLE_TIMEOUT)
            }
            State::Connecting => self.now + IDLE_TIMEOUT,
            State::Streaming(s) => stream::streaming_deadline(
                s.last_read,
                self.config.housekeeping_interval,
                s.reported,
                s.last_report,
                self.config.heartbeat_interval,
            ),
        }
    }

    fn on_received(&mut self, data: Bytes) {
        let State::Streaming(s) = &mut self.state else {
            trace!(len = data.len(), "bytes after the connection closed dropped");
            return;
        };
        s.decoder.extend(data);
        let failure = loop {
            let header = match s.decoder.peek_header() {
                Ok(Some(h)) => h,
                Ok(None) => break None,
                Err(e) => break Some(PeerError::Frame(e)),
            };
            // RocketMQ checks the offset as soon as the header is visible; an empty slave
            // (end 0) adopts what the master starts with, up to a sanity bound.
            if self.append_end != 0 && header.offset != self.append_end {
                break Some(PeerError::OffsetMismatch { expected: self.append_end, got: header.offset });
            }
            if self.append_end == 0 && header.offset > self.config.max_first_offset {
                break Some(PeerError::FirstOffsetTooLarge {
                    offset: header.offset,
                    max: self.config.max_first_offset,
                });
            }
            let Some(push) = s.decoder.decode().expect("the header parsed above") else {
                break None;
            };
            s.last_read = self.now;
            let frame_end = push.offset + push.body.len() as u64;
            self.master_offset = Some(self.master_offset.map_or(frame_end, |m| m.max(frame_end)));
            if !push.body.is_empty() {
                self.append_end = frame_end;
                self.unanswered += 1;
                self.queue.push_back(SlaveOutput::Append { offset: push.offset, data: push.body });
            }
        };
        if let Some(error) = failure {
            self.close(CloseReason::Peer(error));
        }
    }

    fn close(&mut self, reason: CloseReason) {
        if !matches!(self.state, State::Streaming(_)) {
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
