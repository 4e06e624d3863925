//! The slave driver: a [`Slave`] that stores appends through the log.

use crate::time::Instant;

use bytes::Bytes;
use tracing::{debug, error, info, warn};

use super::slave_link::{LinkProgress, SlaveLink};
use super::*;
use crate::classic::frame::encode_report;
use crate::classic::{Slave, SlaveEvent, SlaveInput, SlaveOutput};
use crate::config::CoreConfigError;
use crate::log::LogWrite;
use crate::log::Offset;

/// What a slave driver must do next that needs the runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SlaveAction {
    /// Start connecting to the master (with the configured timeout); report the outcome
    /// through [`SlaveDriver::connected`] or [`SlaveDriver::closed`].
    Connect,
    /// Write these bytes to the master in one write (a classic report, or an AutoSwitch
    /// handshake or ack frame); on failure call [`SlaveDriver::closed`].
    Send(Bytes),
    /// Run `LogWrite::flush` off the async threads; report through [`SlaveDriver::flushed`].
    Flush,
    /// Drop the connection (do not call `closed` for it).
    Disconnect,
    /// Nothing more until this instant, a read, a connect or a flush result.
    SleepUntil(Instant),
}

/// A [`Slave`] with the bookkeeping every adapter needs: it stores appends through the log,
/// counts connections and peer errors, and builds status snapshots. The adapter performs the
/// [`SlaveAction`]s that need sockets, timers or threads.
pub struct SlaveDriver<L> {
    core: Slave,
    log: std::sync::Arc<L>,
    /// Connections, peer errors, the append error, the span and the status rows.
    link: SlaveLink,
    /// Whether an append failed on this connection: the appends already handed out after it
    /// fail too, as a consequence, and are neither logged nor counted again.
    failed_on_conn: bool,
}

impl<L: LogWrite> SlaveDriver<L> {
    /// A driver for `log`, replicating from `config.master_address` with the classic protocol.
    /// A configuration for controller mode is refused: an
    /// [`AutoSwitchSlaveDriver`](super::AutoSwitchSlaveDriver) runs it.
    pub fn new(
        config: &SlaveServiceConfig,
        now: Instant,
        log: std::sync::Arc<L>,
    ) -> Result<Self, CoreConfigError> {
        config.validate()?;
        if config.controller.is_some() {
            return Err(CoreConfigError::Invalid {
                field: "controller",
                value: "Some(..)".into(),
                reason: "the classic slave driver does not run controller mode (an AutoSwitchSlaveDriver does)",
            });
        }
        let core = Slave::new(config.core.clone(), now, log.bounds().max, log.flushed())?;
        Ok(Self {
            core,
            log,
            link: SlaveLink::new(config.master_address.clone(), now),
            failed_on_conn: false,
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
    ///
    /// Appends are stored inline through [`LogWrite::append_at`]; a caller that stores them
    /// itself (late, on another thread) uses [`poll_action`](Self::poll_action).
    pub fn next_action(&mut self, now: Instant) -> SlaveAction {
        loop {
            match self.poll_action(now) {
                SlaveOutput::Timeout(at) => return SlaveAction::SleepUntil(at),
                SlaveOutput::Connect => return SlaveAction::Connect,
                SlaveOutput::Report(offset) => {
                    return SlaveAction::Send(Bytes::copy_from_slice(&encode_report(offset)));
                }
                SlaveOutput::Flush => return SlaveAction::Flush,
                SlaveOutput::Close(_) => return SlaveAction::Disconnect,
                SlaveOutput::Event(_) => {}
                SlaveOutput::Append { offset, data } => {
                    let _link = self.link.enter();
                    let result = self.log.append_at(offset, &data);
                    match &result {
                        Err(e) if !self.failed_on_conn => {
                            error!(error = %e, offset, len = data.len(), "append failed");
                        }
                        Err(e) => debug!(error = %e, offset, "a later append failed after it"),
                        Ok(_) => {}
                    }
                    self.appended(now, result);
                }
            }
        }
    }

    /// The lower-level form of [`next_action`](Self::next_action), for a caller that stores
    /// appends itself (late, on another thread): the core's next output, after the driver's
    /// bookkeeping (events are logged and peer errors counted already).
    ///
    /// Perform it as [`SlaveAction`] describes (`Report` is `Send` of the
    /// [encoded](crate::classic::frame::encode_report) report, `Close` is `Disconnect`,
    /// `Timeout` is `SleepUntil`), and store each [`SlaveOutput::Append`] at its offset
    /// ([`LogWrite::append_at`]), reporting the outcomes through [`appended`](Self::appended)
    /// in the order the appends came, now or late; keep polling meanwhile.
    pub fn poll_action(&mut self, now: Instant) -> SlaveOutput {
        let _link = self.link.enter();
        let output = self.core.poll_output();
        match &output {
            SlaveOutput::Report(offset) => {
                self.link.reported(now, *offset, self.core.master_offset());
            }
            SlaveOutput::Close(reason) => info!(%reason, "closing connection to master"),
            SlaveOutput::Event(event) => match event {
                SlaveEvent::FirstReport { offset } => info!(offset, "connected to master: replicating"),
                SlaveEvent::Disconnected { reason } => {
                    debug!(reason = reason.map(|r| r.to_string()), "disconnected from master");
                }
                SlaveEvent::PeerError(error) => {
                    self.link.peer_error();
                    warn!(%error, "master broke the protocol");
                }
            },
            SlaveOutput::Timeout(_)
            | SlaveOutput::Connect
            | SlaveOutput::Flush
            | SlaveOutput::Append { .. } => {}
        }
        output
    }

    /// An append returned by [`poll_action`](Self::poll_action) finished: `result` is the log's
    /// new end, or why the append failed (the log's end is then read from the log).
    pub fn appended<E: std::fmt::Display>(&mut self, now: Instant, result: Result<Offset, E>) {
        let _link = self.link.enter();
        match result {
            Ok(end) => {
                if end > self.core.end() {
                    self.link.stored();
                }
                self.feed(now, SlaveInput::Appended { end });
            }
            Err(e) => {
                // The first failure on a connection is the cause; the rest follow from it.
                if !self.failed_on_conn {
                    self.link.store_failed(e.to_string());
                    self.failed_on_conn = true;
                }
                let end = self.log.bounds().max;
                self.feed(now, SlaveInput::AppendFailed { end });
            }
        }
    }

    /// The connection asked for by `Connect` is up. Opens its span (`link{conn=N}`, 1 for the
    /// first), which the driver enters while it works for this connection.
    pub fn connected(&mut self, now: Instant) {
        self.link.connected();
        self.failed_on_conn = false;
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
        let _link = self.link.enter();
        match result {
            Ok(end) => self.feed(now, SlaveInput::Flushed { end }),
            Err(e) => {
                warn!(%e, "flush failed");
                self.feed(now, SlaveInput::FlushFailed);
            }
        }
    }

    /// The instant of the last `SleepUntil` has come (spurious calls are fine).
    pub fn handle_timeout(&mut self, now: Instant) {
        let _link = self.link.enter();
        self.core.handle_timeout(now);
    }

    /// A status snapshot.
    pub fn status(&self, now: Instant) -> SlaveStatus {
        let progress = LinkProgress {
            state: self.core.state(),
            ack_offset: self.core.reported(),
            master_offset: self.core.master_offset(),
            end: self.core.end(),
            last_read: self.core.last_read(),
        };
        self.link.status(now, &*self.log, progress)
    }

    fn feed(&mut self, now: Instant, input: SlaveInput) {
        let _link = self.link.enter();
        let result = self.core.handle_input(now, input);
        self.link.fed(result, "slave driver");
    }
}
