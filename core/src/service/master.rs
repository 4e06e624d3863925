//! The master driver: a [`Master`] with the bookkeeping every adapter needs.

use crate::time::Instant;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use bytes::Bytes;
use tracing::{debug, error, info, warn};

use super::*;
use crate::BrokerRole;
use crate::config::{CoreConfigError, MasterConfig};
use crate::log::LogRead;
use crate::log::{LogBounds, Offset};
use crate::service::admission::{Slot, Trust};
use crate::service::conns::{Accepted, Conn, ConnTable, Progress, log_moved};
use crate::service::tls::Link;
use crate::service::{Admission, Refusals};
use crate::{
    ConnId,
    classic::{Master, MasterEvent, MasterInput, MasterOutput, ReplicaId},
};
use crate::{
    classic::PeerError,
    error::{ApiMisuse, WaitError},
};

/// A report this far past the master's end, or further, is no lost tail but stray bytes (an
/// HTTP request, a Redis `PING`, a TLS ClientHello to a plain port): every real offset a
/// master could have lost fits below 2^56 bytes (64 PiB), and text or a TLS record opens with
/// a byte of 0x09 or more. It never fences, even from an identified replica.
pub const IMPLAUSIBLE_AHEAD: Offset = 1 << 56;

/// What the classic driver keeps per connection: the replica it is a connection of, for
/// replication waits; `None` on loopback (and while TLS is negotiated), where each connection
/// counts on its own.
type ConnEntry<C> = Conn<C, Option<ReplicaKey>>;

/// A replica as replication waits and the restart fence count it: a TLS replica by the name its
/// certificate carries; a plain one by host, except on loopback, where one host runs several
/// slaves (tests, the demo) and each live connection is one replica.
///
/// Only connections whose acknowledgements count are keyed (identified, or admitted by
/// `haTrustAnyReplica`): the core counts no other ([`MasterConfig::identified_only`]).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum ReplicaKey {
    Identity(String),
    Host(IpAddr),
    Loopback(ConnId),
}

impl ReplicaKey {
    fn of(conn: ConnId, address: SocketAddr, identity: Option<&String>) -> Self {
        if let Some(name) = identity {
            return Self::Identity(name.clone());
        }
        let ip = address.ip().to_canonical();
        if ip.is_loopback() { Self::Loopback(conn) } else { Self::Host(ip) }
    }
}

/// The restart fence: how many distinct trusted replicas must report, and who has.
struct RestartFence {
    needed: usize,
    heard: BTreeSet<ReplicaKey>,
}

/// Answers whether an offset is a record boundary of the local log.
type BoundaryCheck = Box<dyn Fn(Offset) -> Result<bool, String> + Send>;

/// A [`Master`] with the bookkeeping every adapter needs: it routes transmits to connection
/// sinks, completes wait sinks, follows the log's bounds, and builds status snapshots.
pub struct MasterDriver<C, W> {
    master: Master,
    table: ConnTable<C, W, Option<ReplicaKey>>,
    fence: Option<Fence>,
    restart: Option<RestartFence>,
    boundary: Option<BoundaryCheck>,
    /// The ids the core knows each live replica by ([`MasterInput::Replica`]).
    replicas: BTreeMap<ReplicaKey, ReplicaId>,
    next_replica: u64,
}

impl<C: ConnSink, W: WaitSink> MasterDriver<C, W> {
    /// A bare driver for a log that currently spans `log`: the default admission (protected
    /// mode, see [`Admission`]), no restart fence,
    /// and first reports are not checked against the log. Services use
    /// [`for_service`](Self::for_service).
    ///
    /// The driver is the trust boundary: the core counts only the connections it identifies
    /// ([`MasterConfig::identified_only`] is set), those its admission trusts.
    pub fn new(config: MasterConfig, now: Instant, log: LogBounds) -> Result<Self, CoreConfigError> {
        let config = MasterConfig { identified_only: true, ..config };
        Ok(Self {
            master: Master::new(config, now, log)?,
            table: ConnTable::new(now, Admission::default()),
            fence: None,
            restart: None,
            boundary: None,
            replicas: BTreeMap::new(),
            next_replica: 0,
        })
    }

    /// The driver of a master service over `log`: `config`'s admission rules and restart
    /// fence, and every first report inside the log checked to be a record boundary
    /// ([`LogRead::is_record_boundary`]) before the connection streams or counts.
    pub fn for_service<L: LogRead>(
        config: &MasterServiceConfig,
        now: Instant,
        log: Arc<L>,
    ) -> Result<Self, CoreConfigError> {
        config.validate()?;
        // The log is the one authority for its segment size: frames are cut at its boundaries.
        let core = MasterConfig {
            verify_first_reports: true,
            mapped_file_size_commit_log: log.segment_size(),
            ..config.core.clone()
        };
        let mut driver = Self::new(core, now, log.bounds())?;
        driver.set_admission(config.admission.clone());
        driver.set_restart_fence(config.restart_fence);
        driver.boundary =
            Some(Box::new(move |offset| log.is_record_boundary(offset).map_err(|e| e.to_string())));
        Ok(driver)
    }

    /// Replaces the admission rules; they apply to connections accepted from now on.
    pub fn set_admission(&mut self, admission: Admission) {
        self.table.admission = admission;
    }

    /// The protocol core.
    pub fn master(&self) -> &Master {
        &self.master
    }

    /// Refuses puts until `slaves` slaves have reported (see
    /// [`MasterServiceConfig::restart_fence`]). 0 does nothing.
    ///
    /// Only replicas named exactly count, each once: a TLS replica by its listed name, a plain
    /// one by its host if an address entry of the allow-list names it (a host on a listed
    /// network is trusted but no replica), however often either reconnects; on loopback each
    /// live trusted plain connection counts while it is up.
    pub fn set_restart_fence(&mut self, slaves: usize) {
        if slaves > 0 && self.fence.is_none() {
            warn!(slaves, "restarted after a crash: refusing puts until the slaves report");
            if self.table.admission.is_protected() {
                warn!("no replica allow-list and no TLS: only loopback replicas can lift the restart fence");
            }
            self.fence = Some(Fence::Restart { waiting_for: slaves });
            self.restart = Some(RestartFence { needed: slaves, heard: BTreeSet::new() });
        }
    }

    /// Why puts are refused now, if they are. Adapters check it before every put.
    pub fn fence(&self) -> Option<&Fence> {
        self.fence.as_ref()
    }

    /// A new connection, with the id the adapter chose (unique among live connections).
    ///
    /// A connection the admission rules refuse (not in the allow-list, or over a connection
    /// limit; the per-address limit does not apply to loopback, where one host runs several
    /// slaves) is closed at once, before anything is read or sent; its bytes are dropped, and
    /// its teardown must still be reported through [`closed`](Self::closed).
    ///
    /// With TLS configured (`admission.tls`), the allow-list waits for
    /// [`negotiated`](Self::negotiated): it applies to plain links only.
    pub fn accept(&mut self, now: Instant, conn: ConnId, address: SocketAddr, sink: C) {
        let ip = address.ip().to_canonical();
        let trust = self.table.admission.tls.is_none().then(|| self.table.admission.plain_trust(ip));
        let slots = self.slots();
        let Accepted::Admitted { victim } =
            self.table.accept(now, conn, address, sink, trust, false, &slots, None)
        else {
            return;
        };
        if let Some(victim) = victim {
            self.displace(now, victim, address);
        }
        self.feed(now, MasterInput::Accepted { conn });
        if trust.is_some() {
            self.identify(now, conn);
        }
    }

    /// The live connections as [`Admission::allot`] weighs them.
    fn slots(&self) -> Vec<Slot> {
        // Only connections the core still holds: one it closed (displaced, evicted) holds no
        // slot, though its teardown may not have been reported yet.
        self.master.slaves().filter_map(|info| self.table.slot(info.conn, info.start.is_some())).collect()
    }

    /// Closes `victim` to make room for a more trusted connection from `newcomer`.
    fn displace(&mut self, now: Instant, victim: ConnId, newcomer: SocketAddr) {
        let peer = self.table.peer(victim);
        warn!(conn = victim.0, peer = peer.map(tracing::field::display), %newcomer, "HA slots full: displacing a less trusted connection");
        self.table.refusals.displaced += 1;
        self.feed(now, MasterInput::Evict { conn: victim, reason: crate::classic::CloseReason::Displaced });
    }

    /// Tells the core which replica `conn` is, so that a quorum counts replicas, not
    /// connections (see [`MasterInput::Replica`]); loopback connections count each on their
    /// own. A connection whose acknowledgements do not count (a stranger) is never identified:
    /// the core counts it for nothing.
    fn identify(&mut self, now: Instant, conn: ConnId) {
        let Some(entry) = self.table.conns.get_mut(&conn) else { return };
        if !entry.trust.is_some_and(Trust::counts) {
            return;
        }
        let key = ReplicaKey::of(conn, entry.address, entry.identity.as_ref());
        entry.extra = Some(key.clone());
        let next = &mut self.next_replica;
        let replica = *self.replicas.entry(key).or_insert_with(|| {
            *next += 1;
            ReplicaId(*next)
        });
        self.feed(now, MasterInput::Replica { conn, replica });
    }

    /// A connection's negotiation ended (TLS configured). A plain link is closed if TLS is
    /// required, else it follows the allow-list (without one, it is a stranger, or counted
    /// under `trust_any`); a TLS link is admitted and identified if its certificate names a
    /// listed replica, else closed. Refusals are counted and
    /// logged at WARN; the connection's teardown must still be reported.
    pub fn negotiated(&mut self, now: Instant, conn: ConnId, link: Link) {
        if self.table.negotiated(now, conn, link).is_some() {
            self.identify(now, conn);
        }
    }

    /// Bytes from a connection.
    pub fn received(&mut self, now: Instant, conn: ConnId, data: Bytes) {
        if self.table.drops_received(conn, data.len()) {
            return;
        }
        // A replica that restarted reports on its new connection before its dead one times out.
        // The core stops counting the dead one as the new one starts streaming, in this input
        // (`MasterInput::Replica`); it is evicted on `SlaveStarted`. Evicting it before the
        // report is fed would briefly leave the replica with no connection at all, and an
        // all-in-sync wait could complete without it.
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
        let Some(entry) = self.table.closed(conn) else { return };
        if let Some(entry) = entry {
            if let Some(key) = &entry.extra {
                if !self.table.conns.values().any(|e| e.extra.as_ref() == Some(key)) {
                    self.replicas.remove(key);
                }
            }
            // A loopback replica counts for the restart fence only while it is connected: its
            // next connection cannot be told apart from another slave's.
            if let Some(restart) = &mut self.restart {
                if restart.heard.remove(&ReplicaKey::Loopback(conn)) {
                    debug!(conn = conn.0, peer = %entry.address, "a loopback replica left before the restart fence lifted");
                    self.update_restart_fence();
                }
            }
        }
        self.feed(now, MasterInput::Closed { conn });
    }

    /// The log's bounds as read from the log now; feeds `Appended` and `Retained` as needed.
    /// Safe to call with stale or repeated bounds.
    pub fn log_changed(&mut self, now: Instant, log: LogBounds) {
        let (appended, retained) = log_moved(self.master.log_bounds(), log);
        if let Some(end) = appended {
            self.feed(now, MasterInput::Appended { end });
        }
        if let Some(min) = retained {
            self.feed(now, MasterInput::Retained { min });
        }
    }

    /// Waits until slaves hold every byte before `offset`, or `deadline`; `sink` gets the
    /// outcome. Call [`log_changed`](Self::log_changed) with bounds covering `offset` first.
    pub fn await_replication(&mut self, now: Instant, offset: Offset, deadline: Instant, sink: W) {
        let id = self.table.add_wait(sink);
        if let Err(e) = self.master.handle_input(now, MasterInput::AwaitReplication { id, offset, deadline })
        {
            error!(%e, offset, "replication wait refused");
            self.table.complete_wait(id, Err(WaitError::Cancelled));
        }
        self.table.tick(now);
    }

    /// The instant of the last `Timeout` output has come (or any time: spurious calls are fine).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.table.tick(now);
        self.master.handle_timeout(now);
    }

    /// Performs every pending output and returns when to call `handle_timeout` next.
    pub fn drain(&mut self) -> Instant {
        loop {
            match self.master.poll_output() {
                MasterOutput::Timeout(at) => return at,
                MasterOutput::Transmit { conn, header, body } => {
                    self.table.transmit(conn, header, body);
                }
                MasterOutput::Close { conn, reason } => {
                    if reason == crate::classic::CloseReason::FirstReportTimeout {
                        self.table.refusals.first_report_timeouts += 1;
                        let peer = self.table.peer(conn);
                        warn!(
                            conn = conn.0,
                            peer = peer.map(tracing::field::display),
                            "no complete first report in time: closing"
                        );
                        if let Some(peer) = peer {
                            self.table.refusals.last = Some(format!("{peer}: {reason}"));
                        }
                    }
                    if let Some(entry) = self.table.conns.get_mut(&conn) {
                        info!(conn = conn.0, peer = %entry.address, %reason, "closing slave connection");
                        entry.sink.close();
                    }
                }
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

    /// A classic master has no sync-state-set: refuses every one given from outside.
    pub fn set_sync_state_set(
        &mut self,
        _now: Instant,
        _set: BTreeSet<crate::autoswitch::BrokerId>,
        _epoch: i32,
    ) -> Result<(), SyncStateSetError> {
        Err(SyncStateSetError::NotControllerMode)
    }

    /// Whether the driver is sure to be woken soon without news of a put, so a put's wait may
    /// wait for that wake-up ([`WaitQueue`]): waits are pending (the first deadline is a
    /// timer) and every streaming connection has a write under way (its `sent` or `closed`
    /// will come, and the frame after it carries whatever was appended meanwhile).
    pub fn wakes_without_puts(&self) -> bool {
        if self.table.pending_waits() == 0 {
            return false;
        }
        let mut streaming = self.master.slaves().filter(|s| s.start.is_some()).peekable();
        streaming.peek().is_some() && streaming.all(|s| s.inflight > 0)
    }

    /// A status snapshot; `role` and `flushed_offset` come from the adapter and the log. Lists
    /// admitted connections only: not those refused, nor those still negotiating TLS.
    pub fn status(&self, now: Instant, role: BrokerRole, flushed_offset: Offset) -> MasterStatus {
        let slaves = self
            .master
            .slaves()
            .filter_map(|info| {
                // A connection still negotiating TLS, or refused, is no slave (yet).
                let entry = self.table.listed(info.conn)?;
                let counted = entry.trust.is_some_and(Trust::counts);
                let progress = Progress {
                    start: info.start,
                    ack: info.ack,
                    lag_bytes: info.lag_bytes,
                    lag: info.lag,
                    in_sync: info.in_sync && counted,
                    bytes_sent: info.bytes_sent,
                    counted,
                };
                Some(ConnTable::<C, W, _>::row(entry, info.conn, now, progress))
            })
            .collect();
        MasterStatus {
            replicated_offset: self.master.replicated(),
            fence: self.fence.clone(),
            ..self.table.status(role, self.master.log_bounds(), flushed_offset, slaves)
        }
    }

    fn feed(&mut self, now: Instant, input: MasterInput) {
        self.table.tick(now);
        if let Err(e) = self.master.handle_input(now, input) {
            // The driver only forwards what its connections and log report, so this is a bug in
            // the adapter; refusing the input leaves the core consistent.
            error!(%e, "master driver fed an invalid input");
            debug_assert!(matches!(e, ApiMisuse::TimeWentBackwards), "driver misuse: {e}");
        }
    }

    /// A connection reported a position consistent with this log (a record boundary at or
    /// below the end, or behind retention): if trusted, one more replica heard from.
    fn count_report(&mut self, conn: ConnId) {
        let Some(entry) = self.table.conns.get(&conn) else { return };
        if entry.trust != Some(Trust::Identified) {
            return;
        }
        let key = ReplicaKey::of(conn, entry.address, entry.identity.as_ref());
        if let ReplicaKey::Host(ip) = key {
            if self.restart.is_some() && !self.table.admission.names(ip) {
                debug!(conn = conn.0, peer = %entry.address, "a host on an allow-listed network reported: no named replica, the restart fence does not count it");
                return;
            }
        }
        if let Some(restart) = &mut self.restart {
            if restart.heard.insert(key) {
                self.update_restart_fence();
            }
        }
    }

    fn update_restart_fence(&mut self) {
        let Some(restart) = &self.restart else { return };
        let waiting_for = restart.needed.saturating_sub(restart.heard.len());
        if waiting_for == 0 {
            self.restart = None;
            if matches!(self.fence, Some(Fence::Restart { .. })) {
                info!("every slave reported after the restart: taking puts");
                self.fence = None;
            }
        } else if let Some(Fence::Restart { waiting_for: w }) = &mut self.fence {
            *w = waiting_for;
        }
    }

    /// Closes older connections of the same replica that have gone silent for two heartbeat
    /// intervals: a replica whose machine restarted reconnects before its dead connection times
    /// out, and counting both would count one replica twice. A TLS replica is the same replica
    /// as an older TLS connection with its name, from any address; a plain one (the classic
    /// protocol carries no identity) as an older plain connection from its host (not loopback).
    /// A live connection (it reports every heartbeat) is never evicted, so two slaves on one
    /// host, or a stranger from a slave's address, evict nothing.
    fn evict_stale_from_host(&mut self, now: Instant, conn: ConnId) {
        let Some(entry) = self.table.conns.get(&conn) else { return };
        let (ip, identity) = (entry.ip(), entry.identity.clone());
        if identity.is_none() && ip.is_loopback() {
            return;
        }
        let same_replica = |e: &ConnEntry<C>| e.same_replica(ip, identity.as_ref());
        let stale_after = self.master.config().heartbeat_interval * 2;
        let stale: Vec<ConnId> = self
            .master
            .slaves()
            .filter(|info| info.conn != conn && info.silent_for >= stale_after)
            .filter(|info| self.table.conns.get(&info.conn).is_some_and(same_replica))
            .map(|info| info.conn)
            .collect();
        for old in stale {
            warn!(conn = old.0, peer = %ip, replica = identity.as_deref(), "the same replica connected again and its older connection is silent: closing it");
            self.feed(now, MasterInput::Evict { conn: old, reason: crate::classic::CloseReason::Superseded });
        }
    }

    fn refuse_report(&mut self, conn: ConnId, peer: Option<SocketAddr>, error: PeerError) {
        let trust = self.table.conns.get(&conn).and_then(|e| e.trust);
        let trusted = trust == Some(Trust::Identified);
        if let PeerError::SlaveAhead { reported, end } = error {
            if trusted && reported.saturating_sub(end) >= IMPLAUSIBLE_AHEAD {
                // Stray bytes (a ClientHello to a plain port) from a trusted address: no log is
                // that long, so this is not a divergence.
                self.table.refusals.implausible_reports += 1;
                let shown = peer.map_or_else(|| format!("{conn:?}"), |p| p.to_string());
                warn!(conn = conn.0, peer = peer.map(tracing::field::display), %error, "report is no real offset (stray bytes or TLS to a plain port); not fencing");
                self.table.refusals.last = Some(format!("{shown}: {error} (no real offset, not fencing)"));
                return;
            }
        }
        let fence = match (error, peer) {
            (PeerError::SlaveAhead { reported, end }, Some(slave)) if trusted => {
                Some(Fence::Diverged { slave, reported, end })
            }
            (PeerError::SlaveDiverged { reported }, Some(slave)) if trusted => {
                Some(Fence::NotOnRecordBoundary { slave, reported })
            }
            _ => None,
        };
        if matches!(error, PeerError::SlaveDiverged { .. }) {
            self.table.refusals.diverged += 1;
        }
        let shown = peer.map_or_else(|| format!("{conn:?}"), |p| p.to_string());
        if let Some(fence) = fence {
            error!(%fence, "a trusted replica diverged: refusing puts");
            self.table.refusals.last = Some(format!("{shown}: {error}"));
            self.fence = Some(fence);
            self.restart = None;
        } else if let PeerError::SlaveAhead { reported, end } = error {
            // Either a stranger, or a replica holding bytes this master lost: it cannot be
            // told which, so it never fences; fail loudly and name what would let it.
            self.table.refusals.untrusted_ahead += 1;
            let kind = trust.map_or("undecided", Trust::name);
            error!(
                conn = conn.0,
                peer = peer.map(tracing::field::display),
                reported,
                end,
                trust = kind,
                "a connection reports bytes past this master's end: if it is a replica, this master lost \
                 acknowledged messages it holds; it is not identified, so it does not fence the master: name \
                 the replicas in haReplicaAllowList (or admit them by TLS) so that one does"
            );
            self.table.refusals.last = Some(format!(
                "{shown}: {error} ({kind}, not fencing: name the replicas in haReplicaAllowList or haTlsReplicaNames \
                 so that a replica ahead of the master fences it)"
            ));
        } else {
            warn!(conn = conn.0, peer = peer.map(tracing::field::display), %error, "unidentified connection refused; not fencing (only identified replicas fence)");
            self.table.refusals.last = Some(format!("{shown}: {error} (not identified, not fencing)"));
        }
    }

    fn on_event(&mut self, event: MasterEvent) {
        match event {
            MasterEvent::WaitDone { id, result } => self.table.complete_wait(id, result),
            MasterEvent::PeerError { conn, error } => {
                self.table.peer_errors += 1;
                let peer = self.table.peer(conn);
                warn!(conn = conn.0, peer = peer.map(tracing::field::display), %error, "slave broke the protocol");
                match error {
                    PeerError::SlaveAhead { .. } | PeerError::SlaveDiverged { .. } => {
                        self.refuse_report(conn, peer, error);
                    }
                    PeerError::SlaveBehindRetention { .. } => self.count_report(conn),
                    _ => {}
                }
            }
            MasterEvent::VerifyReport { conn, offset } => {
                let now = self.table.now;
                let answer = match &self.boundary {
                    Some(check) => check(offset),
                    None => Err("no log to check against".to_string()),
                };
                match answer {
                    Ok(boundary) => self.feed(now, MasterInput::ReportVerified { conn, boundary }),
                    Err(e) => {
                        warn!(conn = conn.0, offset, %e, "cannot check the first report against the log: closing");
                        self.feed(
                            now,
                            MasterInput::Evict { conn, reason: crate::classic::CloseReason::StoreFailed },
                        );
                    }
                }
            }
            MasterEvent::SlaveStarted { conn, requested, start } => {
                info!(conn = conn.0, requested, start, "slave streaming");
                let now = self.table.now;
                self.evict_stale_from_host(now, conn);
                self.count_report(conn);
            }
            MasterEvent::SlaveAcked { .. } => {}
            MasterEvent::SlaveDisconnected { conn } => debug!(conn = conn.0, "slave disconnected"),
        }
    }
}

// Accessors for the simulator.
impl<S, W> MasterDriver<S, W> {
    /// Protocol errors raised by connected slaves since the driver started.
    pub fn peer_errors(&self) -> u64 {
        self.table.peer_errors
    }

    /// Connections refused or not trusted, as counted for the status page.
    pub fn refusals(&self) -> &Refusals {
        &self.table.refusals
    }
}
