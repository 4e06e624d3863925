//! What both modes of the simulator use: virtual time, the event queue, the event trace and its
//! hash, and the sinks through which a production master driver hands the simulated network its
//! frames, closes and wait outcomes.

use std::collections::{BTreeMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::error::WaitError;
use crate::log::Offset;
use crate::service::{ConnSink, Transmit, WaitSink};

/// Virtual time: nanoseconds since the simulation's epoch.
pub(crate) type Nanos = u64;

/// One millisecond of virtual time.
pub(crate) const MS: Nanos = 1_000_000;
/// One second of virtual time.
pub(crate) const SEC: Nanos = 1_000_000_000;
/// Outputs of one drain, or actions of one driver in one go, before a node counts as spinning.
pub(crate) const DRAIN_LIMIT: usize = 100_000;
/// Events kept for a failure report.
pub(crate) const RECENT: usize = 200;

/// `d` in virtual nanoseconds (saturating).
pub(crate) fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// FNV-1a, 64 bits: a stable hash for the event trace.
#[derive(Debug)]
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xCBF2_9CE4_8422_2325)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01B3);
        }
    }
}

/// The event trace: every record hashed in order (two runs of one seed must agree), the last
/// [`RECENT`] kept for a failure report, and each printed when asked.
#[derive(Debug)]
pub(crate) struct Trace<T> {
    hash: Fnv,
    recent: VecDeque<T>,
    print: bool,
}

impl<T: Hash + std::fmt::Display> Trace<T> {
    /// An empty trace; `print`: every record goes to stderr too.
    pub(crate) fn new(print: bool) -> Self {
        Self { hash: Fnv::default(), recent: VecDeque::new(), print }
    }

    /// Records `r`.
    pub(crate) fn record(&mut self, r: T) {
        r.hash(&mut self.hash);
        if self.print {
            eprintln!("{r}");
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(r);
    }

    /// The hash of every record so far.
    pub(crate) fn hash(&self) -> u64 {
        self.hash.finish()
    }

    /// The last records, oldest first, as text.
    pub(crate) fn recent(&self) -> Vec<String> {
        self.recent.iter().map(ToString::to_string).collect()
    }
}

/// Events by the instant they happen, in the order they were scheduled within an instant.
#[derive(Debug)]
pub(crate) struct Queue<E> {
    events: BTreeMap<(Nanos, u64), E>,
    seq: u64,
}

impl<E> Default for Queue<E> {
    fn default() -> Self {
        Self { events: BTreeMap::new(), seq: 0 }
    }
}

impl<E> Queue<E> {
    /// Schedules `ev` at `at`, or at `now` if `at` has passed.
    pub(crate) fn schedule(&mut self, now: Nanos, at: Nanos, ev: E) {
        self.seq += 1;
        self.events.insert((at.max(now), self.seq), ev);
    }

    /// When the next event happens.
    pub(crate) fn next_at(&self) -> Option<Nanos> {
        self.events.keys().next().map(|&(t, _)| t)
    }

    /// Takes the next event.
    pub(crate) fn pop(&mut self) -> Option<E> {
        self.events.pop_first().map(|(_, ev)| ev)
    }
}

/// What a master driver handed the simulator during one call, in order.
#[derive(Debug)]
pub(crate) enum Out {
    Transmit { conn: u64, transmit: Transmit },
    Close { conn: u64 },
    WaitDone { id: u64, result: Result<Offset, WaitError> },
}

/// Where a master's sinks put what its driver hands them.
pub(crate) type Outbox = Arc<Mutex<VecDeque<Out>>>;

pub(crate) fn push(outbox: &Outbox, out: Out) {
    outbox.lock().unwrap_or_else(PoisonError::into_inner).push_back(out);
}

/// The first output waiting, if any.
pub(crate) fn pop(outbox: &Outbox) -> Option<Out> {
    outbox.lock().unwrap_or_else(PoisonError::into_inner).pop_front()
}

/// Every output waiting, in order.
pub(crate) fn take_all(outbox: &Outbox) -> Vec<Out> {
    outbox.lock().unwrap_or_else(PoisonError::into_inner).drain(..).collect()
}

/// A simulated connection's writer, as the master driver sees it.
#[derive(Debug)]
pub(crate) struct SimConn {
    pub(crate) conn: u64,
    pub(crate) outbox: Outbox,
}

impl ConnSink for SimConn {
    fn transmit(&mut self, transmit: Transmit) {
        push(&self.outbox, Out::Transmit { conn: self.conn, transmit });
    }

    fn close(&mut self) {
        push(&self.outbox, Out::Close { conn: self.conn });
    }
}

/// A simulated producer waiting for replication.
#[derive(Debug)]
pub(crate) struct SimWait {
    pub(crate) id: u64,
    pub(crate) outbox: Outbox,
}

impl WaitSink for SimWait {
    fn complete(self, result: Result<Offset, WaitError>) {
        push(&self.outbox, Out::WaitDone { id: self.id, result });
    }
}
