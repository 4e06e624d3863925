//! The AutoSwitch slave driver: an [`AutoSwitchSlave`] whose outputs are performed against a
//! log that keeps epochs ([`EpochLog`], reached through [`LogRead::epoch_log`]).
//!
//! Following master `M` at epoch `E` (RocketMQ's `changeToSlave`) is a new slave service with
//! [`SlaveServiceConfig::controller`] set; there is no role switch inside one service. The
//! driver:
//!
//! - refuses a log that keeps no epochs ([`StartError::NoEpochLog`]) and a log whose epoch list
//!   the core cannot hold ([`StartError::InvalidEpochList`]);
//! - writes every frame (handshake, ack) as one `Send`, so a Java master reads the 16-byte
//!   handshake whole;
//! - performs `Truncate` through [`EpochLog::truncate_to`](crate::EpochLog::truncate_to) (bytes, epochs at or after the point
//!   and a confirmOffset above it go, crash-safely), checks that the log's epochs are the ones
//!   the core keeps, then feeds `Truncated`; a failure feeds `StoreFailed`;
//! - persists `StoreEpochs` through [`EpochLog::append_epoch`](crate::EpochLog::append_epoch) before it performs the `Append`
//!   that follows (the core queues them in that order and the driver performs them in order).
//!   An epoch that starts past the log's end (a Java master tags the last chunk of an epoch
//!   with the next one) is recorded right after the append that reaches its start: a log
//!   refuses an epoch beyond its end, and no byte before the start belongs to it;
//! - sets the log's confirmOffset on every `ConfirmOffset`, so the slave's consume queues never
//!   index past it;
//! - stores appends inline through [`LogWrite::append_at`](crate::LogWrite::append_at); flushes (with `AckOn::Flushed`),
//!   reconnects, heartbeats and housekeeping as the machine asks.
//!
//! The configured master epoch and broker id are what the controller said; the handshake tells
//! what the master really holds. Before anything is truncated or written the core refuses a
//! master whose last epoch is below the epoch it was elected in or below this log's last epoch
//! (a stale master), and any epoch above the elected one (a rogue master); it also refuses a
//! truncation below the confirmOffset the store recorded, unless
//! [`SlaveControllerConfig::drop_confirmed`] names exactly those bytes. Each refusal closes
//! the connection; the slave tries again after the back-off, and the status says why
//! ([`FollowRefusals`]). A Java master re-elected after an epoch in which it wrote nothing does
//! not record its new epoch (RocketMQ's `appendEntry` refuses an entry at the previous one's
//! start), so its last epoch stays below the one it was elected in: a logship slave does not
//! follow it until the controller elects it again.

use std::sync::Arc;

use bytes::Bytes;
use tracing::{debug, error, info, warn};

use crate::autoswitch::frame::SlaveFrame;
use crate::classic::SlaveState;
use crate::config::CoreConfigError;
use crate::log::{LogWrite, Offset};
use crate::service::slave_link::{LinkProgress, SlaveLink};
use crate::service::{SlaveAction, SlaveControllerConfig, SlaveServiceConfig, SlaveStatus, StartError};
use crate::time::Instant;
use crate::{
    EpochCache, EpochEntry, EpochError,
    autoswitch::{
        AutoSwitchSlave, AutoSwitchSlaveConfig, BrokerId, PeerError, SlaveEvent, SlaveInput, SlaveOutput,
        SlaveState as AutoSwitchState,
    },
};

impl SlaveControllerConfig {
    /// The machine's configuration: this and the service's core settings.
    pub fn core_config(&self, service: &SlaveServiceConfig) -> AutoSwitchSlaveConfig {
        let core = &service.core;
        AutoSwitchSlaveConfig {
            broker_id: self.broker_id,
            async_learner: self.async_learner,
            sync_from_last_file: self.sync_from_last_file,
            heartbeat_interval: core.heartbeat_interval,
            housekeeping_interval: core.housekeeping_interval,
            reconnect_interval: core.reconnect_interval,
            max_frame_body: core.max_frame_body,
            max_unstored: core.max_unstored,
            max_first_offset: core.max_first_offset,
            ack_on: core.ack_on,
            master_epoch: Some(self.master_epoch),
            drop_confirmed: self.drop_confirmed.clone(),
        }
    }
}

/// Masters an AutoSwitch slave refused to follow since it started, by reason, and why the
/// latest handshake was refused ([`AutoSwitchSlaveStatus::refusals`]). Each refusal closed
/// the connection before anything was truncated or written; the slave tries again after the
/// back-off.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FollowRefusals {
    /// The master's last epoch was below the epoch it was elected in (a stale master).
    pub master_behind_elected_epoch: u64,
    /// The master's last epoch was below this log's last epoch (a stale master).
    pub master_behind_local_epoch: u64,
    /// The master announced an epoch above the one it was elected in (a rogue master).
    pub epoch_above_elected: u64,
    /// Following would have truncated below the recorded confirmOffset.
    pub would_truncate_confirmed: u64,
    /// No epoch of this log matches the master's (Java's `findConsistentPoint` gives -1).
    pub no_consistent_point: u64,
    /// Why the latest handshake was refused, in words (it names the override for a
    /// truncation below the confirmOffset); `None` once a handshake is accepted.
    pub current: Option<String>,
}

impl FollowRefusals {
    /// Every counter with its metric label (`reason`), for metrics.
    pub fn by_reason(&self) -> [(&'static str, u64); 5] {
        [
            ("master_behind_elected_epoch", self.master_behind_elected_epoch),
            ("master_behind_local_epoch", self.master_behind_local_epoch),
            ("epoch_above_elected", self.epoch_above_elected),
            ("would_truncate_confirmed", self.would_truncate_confirmed),
            ("no_consistent_point", self.no_consistent_point),
        ]
    }

    /// Counts `error` if it is a refusal to follow; returns whether it was.
    fn count(&mut self, error: &PeerError) -> bool {
        let counter = match error {
            PeerError::MasterBehindElectedEpoch { .. } => &mut self.master_behind_elected_epoch,
            PeerError::MasterBehindLocalEpoch { .. } => &mut self.master_behind_local_epoch,
            PeerError::EpochAboveElected { .. } => &mut self.epoch_above_elected,
            PeerError::WouldTruncateConfirmed { .. } => &mut self.would_truncate_confirmed,
            PeerError::NoConsistentPoint { .. } => &mut self.no_consistent_point,
            _ => return false,
        };
        *counter += 1;
        self.current = Some(error.to_string());
        true
    }
}

/// The AutoSwitch part of a slave's status ([`SlaveStatus::autoswitch`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoSwitchSlaveStatus {
    /// This broker's id.
    pub broker_id: BrokerId,
    /// The master's broker id, as configured.
    pub master_broker_id: BrokerId,
    /// The master epoch, as configured.
    pub master_epoch: i32,
    /// The master's last epoch, from its latest handshake reply; `None` before one.
    pub master_last_epoch: Option<i32>,
    /// Where the connection cycle is (handshake, truncating, transfer).
    pub phase: AutoSwitchState,
    /// The confirmOffset in force in the log: consumers read only below it.
    pub confirm_offset: Offset,
    /// The log's epoch list, oldest first.
    pub epochs: Vec<EpochEntry>,
    /// The consistent point of the latest handshake (`None`: not checked, the log had no epoch).
    pub consistent_point: Option<Offset>,
    /// Truncations of a divergent tail performed since start.
    pub truncations: u64,
    /// Bytes cut by those truncations.
    pub truncated_bytes: u64,
    /// Masters refused (stale, rogue, or a truncation below the confirmOffset), and why the
    /// latest handshake was.
    pub refusals: FollowRefusals,
}

/// An [`AutoSwitchSlave`] with the bookkeeping every adapter needs: it performs the log's part
/// of every output (appends, truncation, epochs, confirmOffset), counts connections and peer
/// errors, and builds status snapshots. The adapter performs the [`SlaveAction`]s.
pub struct AutoSwitchSlaveDriver<L> {
    core: AutoSwitchSlave,
    log: Arc<L>,
    controller: SlaveControllerConfig,
    /// Connections, peer errors, the store error, the span and the shared status rows.
    link: SlaveLink,
    /// The latest ack sent on the current connection.
    acked: Option<Offset>,
    /// The furthest offset the master has shown: its end in the handshake, or a frame's end.
    master_offset: Option<Offset>,
    master_last_epoch: Option<i32>,
    consistent_point: Option<Offset>,
    /// When bytes last arrived on the current connection.
    last_read: Option<Instant>,
    truncations: u64,
    truncated_bytes: u64,
    /// Epochs to record once the log reaches their start, oldest first.
    pending_epochs: Vec<EpochEntry>,
    refusals: FollowRefusals,
}

impl<L: LogWrite> AutoSwitchSlaveDriver<L> {
    /// A driver for `log`, following `config.master_address` as `config.controller` says.
    ///
    /// # Errors
    /// [`StartError::Config`] for a configuration that cannot work (or none in controller
    /// mode), [`StartError::NoEpochLog`] for a log that keeps no epochs,
    /// [`StartError::InvalidEpochList`] for an epoch list the protocol cannot hold.
    pub fn new(config: &SlaveServiceConfig, now: Instant, log: Arc<L>) -> Result<Self, StartError> {
        config.validate()?;
        let Some(controller) = config.controller.clone() else {
            return Err(StartError::Config(CoreConfigError::Invalid {
                field: "controller",
                value: "None".into(),
                reason: "an AutoSwitch slave driver runs controller mode only",
            }));
        };
        let Some(epoch_log) = log.epoch_log() else { return Err(StartError::NoEpochLog) };
        let epochs = EpochCache::from_entries(epoch_log.epochs())
            .map_err(|e: EpochError| StartError::InvalidEpochList { reason: e.to_string() })?;
        let bounds = log.bounds();
        let core =
            AutoSwitchSlave::new(controller.core_config(config), now, bounds.max, log.flushed(), epochs)?
                .with_confirm_offset(epoch_log.confirmed_offset());
        info!(
            broker_id = controller.broker_id,
            master = %config.master_address,
            master_broker_id = controller.master_broker_id,
            master_epoch = controller.master_epoch,
            end = bounds.max,
            "AutoSwitch slave starting"
        );
        Ok(Self {
            core,
            log,
            controller,
            link: SlaveLink::new(config.master_address.clone(), now),
            acked: None,
            master_offset: None,
            master_last_epoch: None,
            consistent_point: None,
            last_read: None,
            truncations: 0,
            truncated_bytes: 0,
            pending_epochs: Vec::new(),
            refusals: FollowRefusals::default(),
        })
    }

    /// The protocol core.
    pub fn slave(&self) -> &AutoSwitchSlave {
        &self.core
    }

    /// Whether to read from the connection now.
    pub fn wants_read(&self) -> bool {
        self.core.wants_read()
    }

    /// Performs every output that needs no runtime (the log's work, events) and returns the
    /// next action.
    pub fn next_action(&mut self, now: Instant) -> SlaveAction {
        let _link = self.link.enter();
        loop {
            match self.core.poll_output() {
                SlaveOutput::Timeout(at) => return SlaveAction::SleepUntil(at),
                SlaveOutput::Connect => return SlaveAction::Connect,
                SlaveOutput::Transmit(frame) => {
                    if let SlaveFrame::Report(offset) = frame {
                        self.acked = Some(offset);
                        self.link.reported(now, offset, self.master_offset);
                    }
                    return SlaveAction::Send(Bytes::from(frame.encode()));
                }
                SlaveOutput::Flush => return SlaveAction::Flush,
                SlaveOutput::Close(reason) => {
                    info!(%reason, "closing connection to master");
                    self.acked = None;
                    self.last_read = None;
                    return SlaveAction::Disconnect;
                }
                SlaveOutput::Event(event) => self.on_event(event),
                SlaveOutput::Truncate { offset, epochs } => self.truncate(now, offset, &epochs),
                SlaveOutput::StoreEpochs(entries) => {
                    if let Err(reason) = self.store_epochs(&entries) {
                        self.store_failed(now, reason);
                    }
                }
                SlaveOutput::Append { offset, data } => {
                    let end = offset + data.len() as u64;
                    self.master_offset = Some(self.master_offset.map_or(end, |m| m.max(end)));
                    match self.log.append_at(offset, &data) {
                        Ok(end) => {
                            self.link.stored();
                            self.feed(now, SlaveInput::Appended { end });
                            if let Err(reason) = self.record_pending_epochs() {
                                self.store_failed(now, reason);
                            }
                        }
                        Err(e) => {
                            error!(%e, offset, len = data.len(), "append failed");
                            self.store_failed(now, e.to_string());
                        }
                    }
                }
                SlaveOutput::ConfirmOffset(offset) => match self.log.epoch_log() {
                    Some(epochs) => {
                        epochs.set_confirm_offset(offset);
                    }
                    None => self.store_failed(now, "the log no longer keeps epochs".into()),
                },
            }
        }
    }

    fn on_event(&mut self, event: SlaveEvent) {
        match event {
            SlaveEvent::Handshake { master_max_offset, master_last_epoch, consistent_point } => {
                self.master_offset = Some(master_max_offset);
                self.master_last_epoch = Some(master_last_epoch);
                self.consistent_point = consistent_point;
                self.refusals.current = None;
            }
            SlaveEvent::EpochRecorded(entry) => {
                info!(epoch = entry.epoch, start = entry.start_offset, "epoch recorded")
            }
            SlaveEvent::FirstReport { offset } => info!(offset, "replicating from master"),
            SlaveEvent::Disconnected { reason } => {
                self.acked = None;
                self.last_read = None;
                debug!(reason = reason.map(|r| r.to_string()), "disconnected from master");
            }
            SlaveEvent::PeerError(error) => {
                self.link.peer_error();
                if self.refusals.count(&error) {
                    error!(
                        %error,
                        master = %self.link.master_address(),
                        elected_epoch = self.controller.master_epoch,
                        "refusing to follow this master; nothing was truncated or written, trying again later"
                    );
                } else {
                    warn!(%error, "master broke the protocol");
                }
            }
        }
    }

    /// Cuts the log to `offset`, then checks that it keeps exactly `epochs`.
    fn truncate(&mut self, now: Instant, offset: Offset, epochs: &[EpochEntry]) {
        let Some(epoch_log) = self.log.epoch_log() else {
            return self.store_failed(now, "the log no longer keeps epochs".into());
        };
        let from = self.log.bounds().max;
        warn!(from, to = offset, "truncating a divergent tail to the consistent point");
        if let Err(e) = epoch_log.truncate_to(offset) {
            error!(%e, offset, "truncation failed");
            return self.store_failed(now, format!("truncation to {offset} failed: {e}"));
        }
        let kept = epoch_log.epochs();
        if kept != epochs {
            let reason =
                format!("after truncating to {offset} the log keeps epochs {kept:?}, not {epochs:?}");
            error!(%reason, "truncation left other epochs");
            return self.store_failed(now, reason);
        }
        self.pending_epochs.retain(|e| e.start_offset < offset);
        self.truncations += 1;
        self.truncated_bytes += from.saturating_sub(offset);
        self.feed(now, SlaveInput::Truncated { end: offset });
    }

    /// Makes the log's epoch list `entries`: appends what is new (what starts past the log's
    /// end waits for the append that reaches it); drops empty trailing epochs the core dropped
    /// (they start at or after the log's end, so no byte goes with them).
    fn store_epochs(&mut self, entries: &[EpochEntry]) -> Result<(), String> {
        let epoch_log = self.log.epoch_log().ok_or("the log no longer keeps epochs")?;
        let have = epoch_log.epochs();
        let common = have.iter().zip(entries).take_while(|(a, b)| a == b).count();
        if common < have.len() {
            let end = self.log.bounds().max;
            if have[common..].iter().any(|e| e.start_offset < end) {
                return Err(format!(
                    "the epochs {:?} hold data and cannot be replaced by {entries:?}",
                    &have[common..]
                ));
            }
            epoch_log.truncate_to(end).map_err(|e| format!("dropping empty epochs failed: {e}"))?;
        }
        self.pending_epochs = entries[common..].to_vec();
        self.record_pending_epochs()
    }

    /// Records the pending epochs that start at or before the log's end (any, on an empty log).
    fn record_pending_epochs(&mut self) -> Result<(), String> {
        if self.pending_epochs.is_empty() {
            return Ok(());
        }
        let epoch_log = self.log.epoch_log().ok_or("the log no longer keeps epochs")?;
        let bounds = self.log.bounds();
        let empty = bounds.max <= bounds.min;
        let due = self.pending_epochs.iter().take_while(|e| empty || e.start_offset <= bounds.max).count();
        for entry in self.pending_epochs.drain(..due) {
            epoch_log.append_epoch(entry).map_err(|e| format!("recording epoch {}: {e}", entry.epoch))?;
        }
        Ok(())
    }

    fn store_failed(&mut self, now: Instant, reason: String) {
        self.link.store_failed(reason);
        let end = self.log.bounds().max;
        self.feed(now, SlaveInput::StoreFailed { end });
    }

    /// The connection asked for by `Connect` is up; opens its span (`link{conn=N}`).
    pub fn connected(&mut self, now: Instant) {
        self.link.connected();
        self.last_read = Some(now);
        self.feed(now, SlaveInput::Connected);
    }

    /// Bytes from the master.
    pub fn received(&mut self, now: Instant, data: Bytes) {
        self.last_read = Some(now);
        self.feed(now, SlaveInput::Received(data));
    }

    /// The connection (or the attempt) failed or ended.
    pub fn closed(&mut self, now: Instant) {
        self.acked = None;
        self.last_read = None;
        self.feed(now, SlaveInput::Closed);
    }

    /// A `Flush` finished.
    pub fn flushed<E: std::fmt::Display>(&mut self, now: Instant, result: Result<Offset, E>) {
        let _link = self.link.enter();
        match result {
            Ok(end) => self.feed(now, SlaveInput::Flushed { end }),
            Err(e) => {
                warn!(%e, "flush failed");
                self.store_failed(now, format!("flush failed: {e}"));
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
        let phase = self.core.state();
        let state = match phase {
            AutoSwitchState::Disconnected { retry_at } => SlaveState::Disconnected { retry_at },
            AutoSwitchState::Connecting => SlaveState::Connecting,
            AutoSwitchState::Handshake | AutoSwitchState::Truncating { .. } | AutoSwitchState::Transfer => {
                SlaveState::Streaming
            }
        };
        let progress = LinkProgress {
            state,
            ack_offset: self.acked,
            master_offset: self.master_offset,
            end: self.core.end(),
            last_read: self.last_read,
        };
        let epoch_log = self.log.epoch_log();
        SlaveStatus {
            autoswitch: Some(AutoSwitchSlaveStatus {
                broker_id: self.controller.broker_id,
                master_broker_id: self.controller.master_broker_id,
                master_epoch: self.controller.master_epoch,
                master_last_epoch: self.master_last_epoch,
                phase,
                confirm_offset: epoch_log.map_or(0, |e| e.confirm_offset()),
                epochs: epoch_log.map_or_else(Vec::new, |e| e.epochs()),
                consistent_point: self.consistent_point,
                truncations: self.truncations,
                truncated_bytes: self.truncated_bytes,
                refusals: self.refusals.clone(),
            }),
            ..self.link.status(now, &*self.log, progress)
        }
    }

    fn feed(&mut self, now: Instant, input: SlaveInput) {
        let _link = self.link.enter();
        let result = self.core.handle_input(now, input);
        self.link.fed(result, "AutoSwitch slave driver");
    }
}
