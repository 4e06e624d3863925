//! The AutoSwitch master service: an [`AutoSwitchMaster`] run over a log for one master epoch,
//! with the same admission and TLS as the classic driver.
//!
//! Becoming master at epoch `E` (RocketMQ `changeToMaster`) is starting a new master service
//! with [`MasterControllerConfig::epoch`] `= E` over the log. At start the driver:
//!
//! - refuses a log that keeps no epochs ([`LogRead::epoch_log`] is `None`), and an epoch below
//!   the log's last one (Java refuses it too);
//! - records `E` in the log's epoch list, starting at the log's end, before the service takes
//!   its first put. If the log's last epoch already is `E` (the same master restarted in its
//!   epoch), the entry is kept as it is: its bytes stay labelled `E` (Java would move the
//!   start of `E` to the end, relabelling them as the previous epoch's);
//! - keeps the whole local log. Java's `changeToMaster` keeps it too: it cuts only records
//!   that do not parse (`truncateInvalidMsg`), which logship's store already drops when it
//!   recovers at open. The tail above the old confirmOffset was written by the previous master
//!   and replicated here; keeping it loses nothing, and slaves that lack it get it;
//! - starts from the log's replication-confirmed offset (which local puts never raise; see
//!   [`EpochLog::confirmed_offset`](crate::EpochLog::confirmed_offset)), which the machine raises as the
//!   sync-state-set acknowledges; every change goes back to the log
//!   ([`EpochLog::set_confirm_offset`](crate::EpochLog::set_confirm_offset)).
//!
//! **Identity.** Broker ids are self-declared in the handshake, so a connection's acks count
//! (the sync-state-set, the confirmOffset, SYNC waits) only once the driver identified it
//! (the core's [`AutoSwitchMasterConfig::identified_only`]): its admission must trust it
//! ([`Trust`]), and the broker id it claims must match the identity that id is bound to in the
//! [`MemberDirectory`] (on etcd, the HA address the member published), if any. A claim that
//! contradicts its binding is refused; a stranger is identified only by a binding its address
//! matches, possibly later (a member's address may be published after it connected), and
//! until then streams but counts for nothing.
//!
//! The sync-state-set is an input: the master proposes changes
//! ([`MasterEvent::SyncStateSetChange`]) to a [`SyncStateSetAuthority`]. Until a coordinator
//! exists, [`LocalAuthority`] applies every proposal at once with the next epoch of the set;
//! [`AutoSwitchDriver::set_sync_state_set`] applies a set from outside (an operator, later a
//! coordinator's answer).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;

use tracing::{debug, error, info, warn};

use crate::config::CoreConfigError;
use crate::error::WaitError;
use crate::log::{LogBounds, LogRead, Offset};
use crate::service::admission::{MemberAddress, Slot, Trust};
use crate::service::conns::{Accepted, Conn, ConnTable, Progress, log_moved};
use crate::service::controller::{AuthorityFactory, MemberDirectory, SyncStateSetAuthority};
use crate::service::tls::Link;
use crate::service::{ConnSink, Fence, MasterServiceConfig, MasterStatus, StartError, WaitSink};
use crate::time::Instant;
use crate::{BrokerRole, ConnId};
use crate::{
    EpochCache, EpochEntry,
    autoswitch::{
        AutoSwitchMaster, AutoSwitchMasterConfig, BrokerId, CloseReason, MasterEvent, MasterInput,
        MasterOutput, MasterStart, PeerError, sync_state,
    },
};

/// The AutoSwitch part of a master's status ([`MasterStatus::autoswitch`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AutoSwitchMasterStatus {
    /// This broker's id.
    pub broker_id: BrokerId,
    /// The master epoch the service runs in.
    pub epoch: i32,
    /// The log's epoch list as the master sends it, oldest first.
    pub epochs: Vec<EpochEntry>,
    /// The confirmOffset: consumers read only below it.
    pub confirm_offset: Offset,
    /// The sync-state-set as applied.
    pub sync_state_set: BTreeSet<BrokerId>,
    /// The epoch of that set.
    pub sync_state_set_epoch: i32,
    /// A proposed set not yet applied.
    pub proposed_sync_state_set: Option<BTreeSet<BrokerId>>,
    /// The broker id each connected slave declared in its handshake, by connection.
    pub slaves: Vec<AutoSwitchSlaveInfo>,
}

/// One connected slave as an AutoSwitch master sees it.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct AutoSwitchSlaveInfo {
    /// The connection.
    pub conn: ConnId,
    /// The broker id from its handshake; `None` before it.
    pub broker_id: Option<BrokerId>,
    /// Whether it declared itself an async learner (never in the set).
    pub async_learner: bool,
    /// Whether its acks count for confirmOffset and SYNC waits.
    pub counted: bool,
}

/// Why a sync-state-set given from outside ([`AutoSwitchDriver::set_sync_state_set`], an
/// operator's `setSyncStateSet`, a coordinator's answer) was not applied.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncStateSetError {
    /// The master is classic (not in controller mode): it has no sync-state-set.
    #[error("this master is not in controller mode: it has no sync-state-set")]
    NotControllerMode,
    /// The set leaves out the master itself (RocketMQ's controller refuses that too).
    #[error("the sync-state-set {set:?} must hold the master, broker {master}")]
    MasterNotMember {
        /// The master's broker id.
        master: BrokerId,
        /// The set given.
        set: BTreeSet<BrokerId>,
    },
    /// A broker id below zero.
    #[error("broker id {id} in the sync-state-set is negative")]
    NegativeBrokerId {
        /// The id.
        id: BrokerId,
    },
    /// An epoch below zero.
    #[error("sync-state-set epoch {epoch} is negative")]
    NegativeEpoch {
        /// The epoch.
        epoch: i32,
    },
    /// An epoch below the set in force: a late or replayed decision.
    #[error("sync-state-set epoch {epoch} is stale: the set in force has epoch {current}")]
    StaleEpoch {
        /// The epoch given.
        epoch: i32,
        /// The epoch of the set in force.
        current: i32,
    },
    /// The epoch of the set in force with other members: each epoch names one set.
    #[error("sync-state-set epoch {epoch} is already in force with members {current:?}; use a higher epoch")]
    EpochInUse {
        /// The epoch given.
        epoch: i32,
        /// The members in force at that epoch.
        current: BTreeSet<BrokerId>,
    },
    /// The master service stopped before it answered.
    #[error("the master service stopped")]
    Stopped,
}

/// The checks on a sync-state-set given from outside that need no state: ids and epoch not
/// negative, and `master` a member.
pub fn check_sync_state_set(
    master: BrokerId,
    set: &BTreeSet<BrokerId>,
    epoch: i32,
) -> Result<(), SyncStateSetError> {
    if let Some(&id) = set.iter().find(|&&id| id < 0) {
        return Err(SyncStateSetError::NegativeBrokerId { id });
    }
    if epoch < 0 {
        return Err(SyncStateSetError::NegativeEpoch { epoch });
    }
    if !set.contains(&master) {
        return Err(SyncStateSetError::MasterNotMember { master, set: set.clone() });
    }
    Ok(())
}

/// The authority used until a coordinator exists: every proposal is applied at once, with
/// the next epoch of the set.
#[derive(Copy, Clone, Debug, Default)]
pub struct LocalAuthority;

impl SyncStateSetAuthority for LocalAuthority {
    fn propose(
        &mut self,
        proposed: &BTreeSet<BrokerId>,
        _applied: &BTreeSet<BrokerId>,
        epoch: i32,
    ) -> Option<(BTreeSet<BrokerId>, i32)> {
        Some((proposed.clone(), epoch.saturating_add(1)))
    }
}

/// What the AutoSwitch driver keeps per connection besides the shared table's entry.
#[derive(Default)]
struct Claim {
    /// What the admission made of it; `None` while TLS is negotiated. The entry's trust is
    /// this verdict until its handshake was weighed, then the identity of its claim.
    admitted: Option<Trust>,
    /// Fed to the core as identified: its acks count.
    vouched: bool,
    bytes_sent: u64,
    /// Where streaming started, once it did.
    start: Option<Offset>,
}

type ConnEntry<C> = Conn<C, Claim>;

/// An [`AutoSwitchMaster`] over a log, with the bookkeeping every adapter needs: it admits
/// connections as the classic driver does, routes transmits to connection sinks, completes
/// wait sinks, answers first-ack checks from the log, keeps the log's confirmOffset, applies
/// sync-state-set proposals through its [`SyncStateSetAuthority`], and builds status snapshots.
pub struct AutoSwitchDriver<L, C, W> {
    master: AutoSwitchMaster,
    log: Arc<L>,
    epoch: i32,
    table: ConnTable<C, W, Claim>,
    authority: Box<dyn SyncStateSetAuthority>,
    members: Option<MemberDirectory>,
}

impl<L: LogRead, C: ConnSink, W: WaitSink> AutoSwitchDriver<L, C, W> {
    /// The driver of a controller-mode master service over `log`, for `config.controller`'s
    /// epoch, applying sync-state-set proposals through the config's
    /// [`authority`](crate::service::MasterControllerConfig::authority) ([`LocalAuthority`] without one).
    /// Records the epoch in the log first (see the module docs).
    pub fn for_service(config: &MasterServiceConfig, now: Instant, log: Arc<L>) -> Result<Self, StartError> {
        let authority = config.controller.as_ref().and_then(|c| c.authority.as_ref()).map_or_else(
            || Box::new(LocalAuthority) as Box<dyn SyncStateSetAuthority>,
            AuthorityFactory::make,
        );
        Self::with_authority(config, now, log, authority)
    }

    /// [`for_service`](Self::for_service) with another sync-state-set authority.
    pub fn with_authority(
        config: &MasterServiceConfig,
        now: Instant,
        log: Arc<L>,
        authority: Box<dyn SyncStateSetAuthority>,
    ) -> Result<Self, StartError> {
        config.validate()?;
        let Some(controller) = config.controller.as_ref() else {
            return Err(StartError::Config(CoreConfigError::Invalid {
                field: "controller",
                value: "None".into(),
                reason: "an AutoSwitch driver needs controller mode",
            }));
        };
        let core = AutoSwitchMasterConfig {
            broker_id: controller.broker_id,
            transfer_batch_size: config.core.transfer_batch_size,
            heartbeat_interval: config.core.heartbeat_interval,
            housekeeping_interval: config.core.housekeeping_interval,
            handshake_timeout: config.core.first_report_timeout,
            // The log is the one authority for its segment size.
            mapped_file_size_commit_log: log.segment_size(),
            max_inflight: config.core.max_inflight,
            ha_max_time_slave_not_catchup: controller.ha_max_time_slave_not_catchup,
            sync: controller.sync,
            verify_first_reports: true,
            identified_only: true,
        };
        // Checked before the epoch is recorded: a refused start leaves the log as it was.
        core.validate()?;
        let epochs = record_epoch(&*log, controller.epoch)?;
        let confirm_offset = log.epoch_log().map_or(0, |e| e.confirmed_offset());
        let start = MasterStart {
            log: log.bounds(),
            epochs,
            sync_state_set: controller.sync_state_set.clone(),
            sync_state_set_epoch: controller.sync_state_set_epoch,
            confirm_offset,
        };
        let master = AutoSwitchMaster::new(core, now, start)?;
        info!(
            broker_id = controller.broker_id,
            epoch = controller.epoch,
            set = ?master.sync_state_set().applied,
            confirm_offset = master.confirm_offset(),
            "AutoSwitch master started"
        );
        Ok(Self {
            master,
            log,
            epoch: controller.epoch,
            table: ConnTable::new(now, config.admission.clone()),
            authority,
            members: controller.members.clone(),
        })
    }

    /// The protocol machine.
    pub fn master(&self) -> &AutoSwitchMaster {
        &self.master
    }

    /// The master epoch this driver runs in.
    pub fn epoch(&self) -> i32 {
        self.epoch
    }

    /// Why puts are refused: never for an AutoSwitch master (a divergent slave truncates
    /// itself; the controller, not the master, decides who may write).
    pub fn fence(&self) -> Option<&Fence> {
        None
    }

    /// A new connection; closed at once if the admission rules refuse it (as the classic
    /// driver does). Its teardown must still be reported through [`closed`](Self::closed).
    pub fn accept(&mut self, now: Instant, conn: ConnId, address: SocketAddr, sink: C) {
        let ip = address.ip().to_canonical();
        let admission = &self.table.admission;
        let admitted = admission.tls.is_none().then(|| admission.plain_trust(ip));
        // A stranger the member directory may identify by its handshake is undecided till then.
        let directory = self.members.is_some();
        let trust = admitted.filter(|&t| !(t == Trust::Stranger && directory));
        let slots = self.slots();
        let claim = Claim { admitted, ..Claim::default() };
        let accepted = self.table.accept(now, conn, address, sink, trust, directory, &slots, claim);
        let Accepted::Admitted { victim } = accepted else { return };
        if let Some(victim) = victim {
            warn!(conn = victim.0, %address, "HA slots full: displacing a less trusted connection");
            self.table.refusals.displaced += 1;
            self.feed(now, MasterInput::Evict { conn: victim });
        }
        self.feed(now, MasterInput::Accepted { conn });
    }

    /// A connection's negotiation ended (TLS configured): admitted or closed as the classic
    /// driver decides.
    pub fn negotiated(&mut self, now: Instant, conn: ConnId, link: Link) {
        let Some(trust) = self.table.negotiated(now, conn, link) else { return };
        let directory = self.members.is_some();
        if let Some(entry) = self.table.conns.get_mut(&conn) {
            entry.extra.admitted = Some(trust);
            entry.trust = Some(trust).filter(|&t| !(t == Trust::Stranger && directory));
        }
    }

    /// Bytes from a connection.
    pub fn received(&mut self, now: Instant, conn: ConnId, data: bytes::Bytes) {
        if self.table.drops_received(conn, data.len()) {
            return;
        }
        self.feed(now, MasterInput::Received { conn, data });
    }

    /// A connection's writer finished one transmit.
    pub fn sent(&mut self, now: Instant, conn: ConnId) {
        if !self.table.refused_at_accept(conn) {
            self.feed(now, MasterInput::Sent { conn });
        }
    }

    /// A connection's teardown finished (whoever started it).
    pub fn closed(&mut self, now: Instant, conn: ConnId) {
        if self.table.closed(conn).is_some() {
            self.feed(now, MasterInput::Closed { conn });
        }
    }

    /// The log's bounds as read from the log now; feeds `Appended` and `Retained` as needed.
    pub fn log_changed(&mut self, now: Instant, log: LogBounds) {
        let (appended, retained) = log_moved(self.master.log_bounds(), log);
        if let Some(end) = appended {
            self.feed(now, MasterInput::Appended { end });
        }
        if let Some(min) = retained {
            self.feed(now, MasterInput::Retained { min });
        }
    }

    /// Waits until the sync-state-set holds every byte before `offset` as the policy says, or
    /// `deadline`; `sink` gets the outcome (`InSyncReplicasNotEnough` at once when the set is
    /// smaller than `minInSyncReplicas`). Call [`log_changed`](Self::log_changed) first.
    pub fn await_replication(&mut self, now: Instant, offset: Offset, deadline: Instant, sink: W) {
        let id = self.table.add_wait(sink);
        self.table.tick(now);
        if let Err(e) = self.master.handle_input(now, MasterInput::AwaitReplication { id, offset, deadline })
        {
            error!(%e, offset, "replication wait refused");
            self.table.complete_wait(id, Err(WaitError::Cancelled));
        }
    }

    /// Applies a sync-state-set decided outside (an operator, a coordinator's answer to a
    /// proposal), after [`check_sync_state_set`]. Refused, and nothing changes, for an epoch
    /// below the set in force, or the epoch in force with other members (a late or replayed
    /// decision must not undo a newer one); the set in force given again is accepted as it is.
    pub fn set_sync_state_set(
        &mut self,
        now: Instant,
        set: BTreeSet<BrokerId>,
        epoch: i32,
    ) -> Result<(), SyncStateSetError> {
        let current = self.master.sync_state_set();
        check_sync_state_set(current.local, &set, epoch)?;
        if epoch < current.epoch {
            return Err(SyncStateSetError::StaleEpoch { epoch, current: current.epoch });
        }
        if epoch == current.epoch {
            if set != current.applied {
                return Err(SyncStateSetError::EpochInUse { epoch, current: current.applied.clone() });
            }
            if current.pending.is_none() {
                return Ok(());
            }
        }
        info!(?set, epoch, "sync-state-set applied from outside");
        self.feed(now, MasterInput::SyncStateSetApplied { set, epoch });
        Ok(())
    }

    /// The instant of the last `Timeout` output has come (early calls are harmless).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.table.tick(now);
        self.master.handle_timeout(now);
        if self.members.is_some() {
            // Strangers whose member may have published its address since their handshake.
            let strangers: Vec<ConnId> = self
                .table
                .conns
                .iter()
                .filter(|(_, e)| !e.extra.vouched && e.trust == Some(Trust::Stranger) && !e.refused)
                .map(|(&conn, _)| conn)
                .collect();
            for conn in strangers {
                self.weigh_claim(now, conn);
            }
        }
    }

    /// Performs every pending output and returns when to call
    /// [`handle_timeout`](Self::handle_timeout) next.
    pub fn drain(&mut self) -> Instant {
        loop {
            match self.master.poll_output() {
                MasterOutput::Timeout(at) => return at,
                MasterOutput::Transmit { conn, header, body } => {
                    if let Some(entry) = self.table.transmit(conn, header, body) {
                        entry.extra.bytes_sent += body.map_or(0, |span| u64::from(span.len));
                    }
                }
                MasterOutput::Close { conn, reason } => {
                    if reason == CloseReason::HandshakeTimeout {
                        self.table.refusals.first_report_timeouts += 1;
                    }
                    if let CloseReason::DuplicateBrokerId { broker_id } = reason {
                        self.evict_silent_holder(conn, broker_id);
                    }
                    if let Some(entry) = self.table.conns.get_mut(&conn) {
                        info!(conn = conn.0, peer = %entry.address, %reason, "closing slave connection");
                        if matches!(
                            reason,
                            CloseReason::HandshakeTimeout | CloseReason::DuplicateBrokerId { .. }
                        ) {
                            self.table.refusals.last = Some(format!("{}: {reason}", entry.address));
                        }
                        entry.sink.close();
                    }
                }
                MasterOutput::ConfirmOffset(offset) => self.confirm(offset),
                MasterOutput::Event(event) => self.on_event(event),
            }
        }
    }

    /// Closes every connection and cancels every wait (service shutdown).
    pub fn shutdown(&mut self) {
        for id in self.table.close_all() {
            let _ = self.master.handle_input(self.table.now, MasterInput::CancelWait { id });
        }
        let _ = self.drain();
    }

    /// Replication waits pending.
    pub fn pending_waits(&self) -> usize {
        self.table.pending_waits()
    }

    /// Always `false`: an AutoSwitch master's puts wake its task every time (see
    /// [`MasterDriver::wakes_without_puts`](crate::service::MasterDriver::wakes_without_puts)).
    pub fn wakes_without_puts(&self) -> bool {
        false
    }

    /// A status snapshot, with the AutoSwitch part filled in. A slave counts as in sync when
    /// it is a member of the applied sync-state-set.
    pub fn status(&self, now: Instant, role: BrokerRole, flushed_offset: Offset) -> MasterStatus {
        let log = self.master.log_bounds();
        let set = self.master.sync_state_set();
        let mut slaves = Vec::new();
        let mut infos = Vec::new();
        let mut acks = Vec::new();
        for progress in self.master.slaves() {
            let Some(entry) = self.table.listed(progress.conn) else { continue };
            let broker_id = progress.handshake.map(|h| h.broker_id);
            if let (Some(id), Some(ack), true) = (broker_id, progress.ack, progress.counted) {
                acks.push((id, ack));
            }
            infos.push(AutoSwitchSlaveInfo {
                conn: progress.conn,
                broker_id,
                async_learner: progress.handshake.is_some_and(|h| h.async_learner),
                counted: progress.counted,
            });
            let row = Progress {
                start: entry.extra.start,
                ack: progress.ack,
                lag_bytes: progress.lag_bytes,
                lag: progress.lag,
                in_sync: broker_id.is_some_and(|id| set.applied.contains(&id)),
                bytes_sent: entry.extra.bytes_sent,
                counted: progress.counted,
            };
            slaves.push(ConnTable::<C, W, _>::row(entry, progress.conn, now, row));
        }
        let replicated = sync_state::frontier(self.master.config().sync, set, &acks, log.max);
        let autoswitch = AutoSwitchMasterStatus {
            broker_id: set.local,
            epoch: self.epoch,
            epochs: self.master.epochs().entries().collect(),
            confirm_offset: self.master.confirm_offset(),
            sync_state_set: set.applied.clone(),
            sync_state_set_epoch: set.epoch,
            proposed_sync_state_set: set.pending.clone(),
            slaves: infos,
        };
        MasterStatus {
            replicated_offset: Some(replicated),
            autoswitch: Some(autoswitch),
            ..self.table.status(role, log, flushed_offset, slaves)
        }
    }

    fn feed(&mut self, now: Instant, input: MasterInput) {
        self.table.tick(now);
        if let Err(e) = self.master.handle_input(now, input) {
            // The driver forwards only what its connections and log report: a bug in the
            // adapter. Refusing the input leaves the machine consistent.
            error!(%e, "AutoSwitch driver fed an invalid input");
            debug_assert!(matches!(e, crate::ApiMisuse::TimeWentBackwards), "driver misuse: {e}");
        }
    }

    /// A slave that restarted reconnects before its dead connection times out, and its new
    /// handshake (on `claimant`) is refused: its broker id is taken. If the connection holding
    /// the id is the same replica (the same TLS name, or for plain links the same host) and has
    /// been silent for two heartbeat intervals (a live slave acks every heartbeat), it is
    /// evicted, so the slave's next attempt gets in instead of waiting out the housekeeping
    /// interval. A live holder, or another host claiming its id, evicts nothing.
    fn evict_silent_holder(&mut self, claimant: ConnId, broker_id: BrokerId) {
        let Some(new) = self.table.conns.get(&claimant) else { return };
        let (ip, identity) = (new.ip(), new.identity.clone());
        let same_replica = |e: &ConnEntry<C>| e.same_replica(ip, identity.as_ref());
        let stale_after = self.master.config().heartbeat_interval * 2;
        let holder = self.master.slaves().find(|p| {
            p.conn != claimant
                && p.handshake.is_some_and(|h| h.broker_id == broker_id)
                && p.silent_for >= stale_after
                && self.table.conns.get(&p.conn).is_some_and(same_replica)
        });
        if let Some(holder) = holder {
            warn!(conn = holder.conn.0, broker_id, silent_for = ?holder.silent_for, "broker id claimed again by the same replica and its connection is silent: evicting it");
            self.feed(self.table.now, MasterInput::Evict { conn: holder.conn });
        }
    }

    /// The live connections as [`Admission::allot`](crate::service::Admission::allot) weighs them.
    fn slots(&self) -> Vec<Slot> {
        // Only connections the core still holds: one it closed (displaced, evicted) holds no
        // slot, though its teardown may not have been reported yet.
        self.master.slaves().filter_map(|p| self.table.slot(p.conn, p.ack.is_some())).collect()
    }

    /// Weighs the broker id `conn` claimed in its handshake against its identity (see the
    /// module docs): identifies it to the core, refuses it (a claim its binding contradicts),
    /// or leaves it a stranger for now.
    fn weigh_claim(&mut self, now: Instant, conn: ConnId) {
        let Some(claimed) =
            self.master.slaves().find(|p| p.conn == conn).and_then(|p| p.handshake).map(|h| h.broker_id)
        else {
            return;
        };
        let Some(entry) =
            self.table.conns.get_mut(&conn).filter(|e| !e.refused && !e.negotiating && !e.extra.vouched)
        else {
            return;
        };
        let Some(admitted) = entry.extra.admitted else { return };
        let ip = entry.ip();
        let binding = self.members.as_ref().and_then(|m| m.lookup(claimed));
        let matches = |b: &MemberAddress| match b {
            MemberAddress::Ip(bound) => bound.to_canonical() == ip,
            MemberAddress::TlsName(name) => entry.identity.as_ref() == Some(name),
        };
        let verdict = match &binding {
            Some(b) if matches(b) => Ok(Trust::Identified),
            Some(b) if admitted == Trust::Counted => {
                warn!(conn = conn.0, peer = %entry.address, broker_id = claimed, bound = ?b, "broker id claimed from another identity than its member's; counted anyway (haTrustAnyReplica)");
                Ok(Trust::Counted)
            }
            Some(b) => Err(format!(
                "claims broker id {claimed}, which is bound to {}, not to this connection",
                match b {
                    MemberAddress::Ip(bound) => format!("the HA address its member published ({bound})"),
                    MemberAddress::TlsName(name) => format!("the TLS replica name {name}"),
                }
            )),
            None => Ok(admitted),
        };
        match verdict {
            Ok(Trust::Stranger) => {
                entry.trust = Some(Trust::Stranger);
                debug!(conn = conn.0, peer = %entry.address, broker_id = claimed, "a stranger's handshake: it streams but counts for nothing");
            }
            Ok(trust) => {
                entry.trust = Some(trust);
                entry.extra.vouched = true;
                info!(conn = conn.0, peer = %entry.address, broker_id = claimed, trust = trust.name(), "slave identified");
                self.feed(now, MasterInput::Identified { conn });
                // A stranger holding the same id counts for nothing and may be an impostor.
                let impostors: Vec<ConnId> = self
                    .master
                    .slaves()
                    .filter(|p| p.conn != conn && p.handshake.is_some_and(|h| h.broker_id == claimed))
                    .filter(|p| self.table.conns.get(&p.conn).is_some_and(|e| !e.extra.vouched))
                    .map(|p| p.conn)
                    .collect();
                for other in impostors {
                    warn!(
                        conn = other.0,
                        broker_id = claimed,
                        "an unidentified connection claimed an identified member's broker id: closing it"
                    );
                    self.feed(now, MasterInput::Evict { conn: other });
                }
            }
            Err(why) => {
                warn!(conn = conn.0, peer = %entry.address, broker_id = claimed, why, "HA handshake refused");
                self.table.refusals.identity_refused += 1;
                self.table.refusals.last = Some(format!("{}: {why}", entry.address));
                entry.trust = Some(Trust::Stranger);
                self.feed(now, MasterInput::Evict { conn });
            }
        }
    }

    fn confirm(&mut self, offset: Offset) {
        match self.log.epoch_log() {
            Some(epochs) => {
                let in_force = epochs.set_confirm_offset(offset);
                debug!(offset, in_force, "confirmOffset");
            }
            None => error!(offset, "the log no longer keeps epochs: confirmOffset not recorded"),
        }
    }

    fn on_event(&mut self, event: MasterEvent) {
        let now = self.table.now;
        match event {
            MasterEvent::WaitDone { id, result } => self.table.complete_wait(id, result),
            MasterEvent::PeerError { conn, error } => {
                self.table.peer_errors += 1;
                let peer = self.table.peer(conn);
                warn!(conn = conn.0, peer = peer.map(tracing::field::display), %error, "slave broke the protocol");
                if matches!(error, PeerError::SlaveDiverged { .. }) {
                    self.table.refusals.diverged += 1;
                }
                self.table.refusals.last = Some(format!("{}: {error}", self.table.shown(conn)));
            }
            MasterEvent::VerifyReport { conn, offset } => match self.log.is_record_boundary(offset) {
                Ok(boundary) => self.feed(now, MasterInput::ReportVerified { conn, boundary }),
                Err(e) => {
                    warn!(conn = conn.0, offset, %e, "cannot check the first ack against the log: closing");
                    self.table.refusals.last =
                        Some(format!("{conn:?}: cannot check its first ack {offset}: {e}"));
                    self.feed(now, MasterInput::Evict { conn });
                }
            },
            MasterEvent::SyncStateSetChange { proposed } => {
                let set = self.master.sync_state_set();
                let (applied, epoch) = (set.applied.clone(), set.epoch);
                info!(?proposed, ?applied, epoch, "sync-state-set change proposed");
                if let Some((set, epoch)) = self.authority.propose(&proposed, &applied, epoch) {
                    self.feed(now, MasterInput::SyncStateSetApplied { set, epoch });
                }
            }
            MasterEvent::SlaveHandshake { conn, request } => {
                debug!(
                    conn = conn.0,
                    broker_id = request.broker_id,
                    learner = request.async_learner,
                    "slave handshake"
                );
                self.weigh_claim(now, conn);
            }
            MasterEvent::SlaveStarted { conn, requested, start } => {
                info!(conn = conn.0, requested, start, "slave streaming");
                if let Some(entry) = self.table.conns.get_mut(&conn) {
                    entry.extra.start = Some(start);
                }
            }
            MasterEvent::SlaveAcked { conn, .. } => {
                // A stranger may be identified later: its member's address may be published
                // after it connected.
                if self.members.is_some() && self.table.conns.get(&conn).is_some_and(|e| !e.extra.vouched) {
                    self.weigh_claim(now, conn);
                }
            }
            MasterEvent::SlaveDisconnected { conn } => debug!(conn = conn.0, "slave disconnected"),
        }
    }
}

/// Records `epoch` in the log's epoch list at the log's end (see the module docs) and returns
/// the list the master starts from.
fn record_epoch<L: LogRead>(log: &L, epoch: i32) -> Result<EpochCache, StartError> {
    let Some(epochs) = log.epoch_log() else { return Err(StartError::NoEpochLog) };
    let last = epochs.epochs().last().copied();
    match last {
        Some(last) if last.epoch > epoch => {
            return Err(StartError::EpochBehind { epoch, last: last.epoch });
        }
        Some(last) if last.epoch == epoch => {
            info!(epoch, start = last.start_offset, "resuming the log's last epoch");
        }
        _ => {
            let entry = EpochEntry { epoch, start_offset: log.bounds().max };
            epochs.append_epoch(entry).map_err(|e| StartError::EpochLog { epoch, reason: e.to_string() })?;
            info!(epoch, start = entry.start_offset, "new master epoch recorded");
        }
    }
    EpochCache::from_entries(epochs.epochs())
        .map_err(|e| StartError::EpochLog { epoch, reason: format!("the log's epoch list is invalid: {e}") })
}
