//! The connection table both master drivers keep, written once: admission at accept, the TLS
//! negotiation's verdict, the bytes and writes of connections not (or no longer) admitted,
//! teardown, shutdown, the replication waits, and the status rows. What a protocol keeps
//! besides per connection is its `X`.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tracing::{debug, info, warn};

use crate::error::WaitError;
use crate::log::{LogBounds, LogSpan, Offset};
use crate::service::admission::{Negotiation, Slot, Trust, decide_link, refuse_at_accept};
use crate::service::tls::Link;
use crate::service::{
    Admission, ConnSink, ConnectedSlave, FrameHeader, MasterStatus, Refusals, Transmit, WaitSink,
};
use crate::time::Instant;
use crate::{BrokerRole, ConnId, WaitId};

/// One admitted (or negotiating, or refused after accept) connection.
pub(crate) struct Conn<C, X> {
    pub(crate) sink: C,
    pub(crate) address: SocketAddr,
    pub(crate) since: Instant,
    /// What the connection may do; `None` while it is still to be decided (TLS negotiated, or
    /// a handshake to weigh).
    pub(crate) trust: Option<Trust>,
    /// The TLS replica name.
    pub(crate) identity: Option<String>,
    /// Waiting for `Negotiated` (TLS configured); its bytes are dropped until then.
    pub(crate) negotiating: bool,
    /// Refused after accept; closing, its bytes are dropped.
    pub(crate) refused: bool,
    /// What the protocol keeps of it besides.
    pub(crate) extra: X,
}

impl<C, X> Conn<C, X> {
    /// The peer's address as admission compares it.
    pub(crate) fn ip(&self) -> IpAddr {
        self.address.ip().to_canonical()
    }

    /// Whether this connection is of the replica a connection from `ip` with TLS name
    /// `identity` is: the same TLS name from any address, or for plain links the same host.
    pub(crate) fn same_replica(&self, ip: IpAddr, identity: Option<&String>) -> bool {
        match identity {
            Some(name) => self.identity.as_ref() == Some(name),
            None => self.identity.is_none() && self.ip() == ip,
        }
    }
}

/// How a connection stands in the protocol, for its status row.
pub(crate) struct Progress {
    pub(crate) start: Option<Offset>,
    pub(crate) ack: Option<Offset>,
    pub(crate) lag_bytes: u64,
    pub(crate) lag: Duration,
    pub(crate) in_sync: bool,
    pub(crate) bytes_sent: u64,
    pub(crate) counted: bool,
}

/// What [`ConnTable::accept`] made of a new connection.
pub(crate) enum Accepted {
    /// Closed at once, unread; its teardown is still to be reported.
    Refused,
    /// In the table; the caller displaces `victim` (a less trusted connection) to make room.
    Admitted { victim: Option<ConnId> },
}

/// The connection table of a master driver, with its counters and replication waits.
pub(crate) struct ConnTable<C, W, X> {
    /// The latest instant any input carried.
    pub(crate) now: Instant,
    pub(crate) conns: BTreeMap<ConnId, Conn<C, X>>,
    pub(crate) admission: Admission,
    pub(crate) refusals: Refusals,
    pub(crate) bytes_replicated: u64,
    pub(crate) connections_accepted: u64,
    pub(crate) peer_errors: u64,
    waits: BTreeMap<WaitId, W>,
    next_wait: u64,
    /// Connections refused at accept whose teardown the adapter has not yet reported.
    refused: BTreeSet<ConnId>,
}

impl<C: ConnSink, W: WaitSink, X> ConnTable<C, W, X> {
    pub(crate) fn new(now: Instant, admission: Admission) -> Self {
        Self {
            now,
            conns: BTreeMap::new(),
            admission,
            refusals: Refusals::default(),
            bytes_replicated: 0,
            connections_accepted: 0,
            peer_errors: 0,
            waits: BTreeMap::new(),
            next_wait: 0,
            refused: BTreeSet::new(),
        }
    }

    /// Time moves on to `now` (never back).
    pub(crate) fn tick(&mut self, now: Instant) {
        self.now = self.now.max(now);
    }

    /// A new connection from `address`: refused (counted, logged, closed at once) if the
    /// admission rules say so, else entered with `trust` (`None`: still to be decided) and
    /// `extra`. `slots` are the live connections as [`Admission::allot`] weighs them;
    /// `directory`: a member directory may identify an off-loopback stranger later.
    #[expect(clippy::too_many_arguments, reason = "one call site per protocol, each naming every part")]
    pub(crate) fn accept(
        &mut self,
        now: Instant,
        conn: ConnId,
        address: SocketAddr,
        mut sink: C,
        trust: Option<Trust>,
        directory: bool,
        slots: &[Slot],
        extra: X,
    ) -> Accepted {
        self.tick(now);
        let ip = address.ip().to_canonical();
        let victim = match refuse_at_accept(&self.admission, ip, trust, slots, directory, &mut self.refusals)
        {
            Ok(victim) => victim,
            Err(why) => {
                warn!(conn = conn.0, peer = %address, why, "HA connection refused");
                self.refusals.last = Some(format!("{address}: {why}"));
                self.refused.insert(conn);
                sink.close();
                return Accepted::Refused;
            }
        };
        self.connections_accepted += 1;
        let negotiating = self.admission.tls.is_some();
        let entry =
            Conn { sink, address, since: now, trust, identity: None, negotiating, refused: false, extra };
        self.conns.insert(conn, entry);
        Accepted::Admitted { victim }
    }

    /// A connection's negotiation ended (TLS configured): admitted, with its trust and TLS name
    /// recorded, and the trust returned; or refused (counted, logged, closed). `None` as well
    /// for a connection not negotiating, or TLS not configured.
    pub(crate) fn negotiated(&mut self, now: Instant, conn: ConnId, link: Link) -> Option<Trust> {
        self.tick(now);
        let entry = self.conns.get_mut(&conn).filter(|e| e.negotiating)?;
        let Some(decision) = decide_link(&self.admission, entry.ip(), link, &mut self.refusals) else {
            debug!(conn = conn.0, "negotiation reported without TLS configured: ignored");
            return None;
        };
        entry.negotiating = false;
        match decision {
            Negotiation::Admitted { trust, identity } => {
                if let Some(name) = &identity {
                    info!(conn = conn.0, peer = %entry.address, replica = %name, "TLS replica admitted");
                }
                entry.trust = Some(trust);
                entry.identity = identity;
                Some(trust)
            }
            Negotiation::Refused(why) => {
                warn!(conn = conn.0, peer = %entry.address, why, "HA connection refused");
                self.refusals.last = Some(format!("{}: {why}", entry.address));
                entry.refused = true;
                entry.sink.close();
                None
            }
        }
    }

    /// Whether bytes from `conn` are dropped: it was refused, or is not admitted yet.
    pub(crate) fn drops_received(&self, conn: ConnId, len: usize) -> bool {
        if self.refused.contains(&conn) {
            return true;
        }
        let drop = self.conns.get(&conn).is_some_and(|e| e.negotiating || e.refused);
        if drop {
            debug!(conn = conn.0, len, "bytes before admission: dropped");
        }
        drop
    }

    /// Whether `conn` was refused at accept, so its writes and teardown are none of the core's.
    pub(crate) fn refused_at_accept(&self, conn: ConnId) -> bool {
        self.refused.contains(&conn)
    }

    /// `conn`'s teardown finished: `None` if it was refused at accept (the core never knew
    /// it), else its entry, if it had one.
    pub(crate) fn closed(&mut self, conn: ConnId) -> Option<Option<Conn<C, X>>> {
        if self.refused.remove(&conn) {
            return None;
        }
        Some(self.conns.remove(&conn))
    }

    /// Hands a transmit to `conn`'s writer, counting its body as replicated. Returns the entry
    /// it went to, if the connection is in the table.
    pub(crate) fn transmit(
        &mut self,
        conn: ConnId,
        header: impl Into<FrameHeader>,
        body: Option<LogSpan>,
    ) -> Option<&mut Conn<C, X>> {
        let entry = self.conns.get_mut(&conn)?;
        if let Some(span) = body {
            self.bytes_replicated += u64::from(span.len);
        }
        entry.sink.transmit(Transmit { header: header.into(), body });
        Some(entry)
    }

    /// Closes every connection (service shutdown) and returns the waits to cancel.
    pub(crate) fn close_all(&mut self) -> Vec<WaitId> {
        for entry in self.conns.values_mut() {
            entry.sink.close();
        }
        self.waits.keys().copied().collect()
    }

    /// Registers a replication wait; its id.
    pub(crate) fn add_wait(&mut self, sink: W) -> WaitId {
        let id = WaitId(self.next_wait);
        self.next_wait += 1;
        self.waits.insert(id, sink);
        id
    }

    /// Completes a replication wait, if it is still pending.
    pub(crate) fn complete_wait(&mut self, id: WaitId, result: Result<Offset, WaitError>) {
        if let Some(sink) = self.waits.remove(&id) {
            sink.complete(result);
        }
    }

    /// Replication waits pending.
    pub(crate) fn pending_waits(&self) -> usize {
        self.waits.len()
    }

    /// The peer of `conn`, if it is in the table.
    pub(crate) fn peer(&self, conn: ConnId) -> Option<SocketAddr> {
        self.conns.get(&conn).map(|e| e.address)
    }

    /// `conn` as a refusal names it: its peer, or the id.
    pub(crate) fn shown(&self, conn: ConnId) -> String {
        self.peer(conn).map_or_else(|| format!("{conn:?}"), |p| p.to_string())
    }

    /// `conn` as [`Admission::allot`] weighs it, if it is in the table and not refused.
    pub(crate) fn slot(&self, conn: ConnId, reported: bool) -> Option<Slot> {
        let e = self.conns.get(&conn).filter(|e| !e.refused)?;
        Some(Slot { conn, ip: e.ip(), trust: e.trust, reported, since: e.since })
    }

    /// `conn` if the status lists it: admitted (not refused, not negotiating).
    pub(crate) fn listed(&self, conn: ConnId) -> Option<&Conn<C, X>> {
        self.conns.get(&conn).filter(|e| !e.refused && !e.negotiating)
    }

    /// The status row of a listed connection.
    pub(crate) fn row(entry: &Conn<C, X>, conn: ConnId, now: Instant, progress: Progress) -> ConnectedSlave {
        ConnectedSlave {
            conn,
            address: entry.address,
            start: progress.start,
            ack: progress.ack,
            lag_bytes: progress.lag_bytes,
            lag: progress.lag,
            in_sync: progress.in_sync,
            connected_for: now.saturating_duration_since(entry.since),
            bytes_sent: progress.bytes_sent,
            trusted: entry.trust == Some(Trust::Identified),
            counted: progress.counted,
            identity: entry.identity.clone(),
        }
    }

    /// The status snapshot's common part: no replicated offset, fence or protocol part yet
    /// (the driver fills in its own).
    pub(crate) fn status(
        &self,
        role: BrokerRole,
        log: LogBounds,
        flushed_offset: Offset,
        slaves: Vec<ConnectedSlave>,
    ) -> MasterStatus {
        MasterStatus {
            role,
            min_offset: log.min,
            max_offset: log.max,
            flushed_offset,
            replicated_offset: None,
            pending_waits: self.waits.len(),
            slaves,
            bytes_replicated: self.bytes_replicated,
            connections_accepted: self.connections_accepted,
            peer_errors: self.peer_errors,
            fence: None,
            refusals: self.refusals.clone(),
            autoswitch: None,
        }
    }
}

/// What to tell a core that knows the log as `known` when the log reads `now`: the new end,
/// if it grew, and the new start, if retention moved it (never past the end).
pub(crate) fn log_moved(known: LogBounds, now: LogBounds) -> (Option<Offset>, Option<Offset>) {
    let appended = (now.max > known.max).then_some(now.max);
    let end = now.max.max(known.max);
    let retained = (now.min > known.min && now.min <= end).then_some(now.min);
    (appended, retained)
}
