//! Long polling: pulls that found nothing, held until a matching message arrives or their
//! time is up (Java's `PullRequestHoldService`).
//!
//! # Rules
//!
//! - A pull is held only on its first execution, when it found nothing (`PULL_NOT_FOUND`) and
//!   asked to be suspended ([`pull`](crate::pull) decides and hands over a [`HeldPull`]).
//! - **Wake on arrival** ([`PullHoldTable::on_arrival`]): when a message is indexed into the
//!   pull's queue past the pull's offset and its tag code passes the pull's filter, the pull is
//!   re-run now. A message that does not match leaves it held (it is answered at its deadline,
//!   and its re-run then skips the message).
//! - **Wake on time** ([`PullHoldTable::poll_expired`]): at its deadline (Java notices a
//!   deadline only at its next 5 s tick; logship at the deadline itself).
//! - A re-run goes through the whole pull again, answers whatever it finds (`PULL_NOT_FOUND`
//!   included), never holds and never commits the offset again; its response carries the
//!   request's opaque.
//! - A pull whose connection closed is dropped ([`PullHoldTable::remove_connection`]).
//!
//! # Bounds
//!
//! The table holds at most [`HoldLimits::max_held`] pulls, [`HoldLimits::max_per_connection`]
//! per connection and [`HoldLimits::max_bytes`] of request data; [`PullHoldTable::hold`]
//! refuses a pull beyond any bound with [`HoldRefused`], and the glue answers it at once (the
//! pull module's [`hold_refused`](crate::pull::hold_refused): `SYSTEM_BUSY`, after which Java
//! and Go consumers back off 1 s and 3 s, instead of spinning).
//!
//! # What the glue does
//!
//! 1. Install a [`logship_store::ArrivalListener`] on the store whose callback calls
//!    [`on_arrival`](PullHoldTable::on_arrival) with the arrival (`max_offset =
//!    queue_offset + 1`, `Some(tags_code)`) and hands the returned pulls to a task that re-runs
//!    them (`pull::process_pull` with
//!    [`Execution::Rerun`](crate::pull::Execution::Rerun)) and writes their answers. The
//!    callback runs under the store's dispatch lock: it must not re-run pulls itself. Hold the
//!    table and the store weakly in it, or remove it before dropping them.
//! 2. Keep a timer at [`next_deadline`](PullHoldTable::next_deadline) (re-read it after every
//!    [`hold`](PullHoldTable::hold) and every poll) and call
//!    [`poll_expired`](PullHoldTable::poll_expired) when it fires; re-run what it returns.
//! 3. Every 5 s, call [`recheck`](PullHoldTable::recheck) with the store's queue ends: a safety
//!    net for an arrival that was not reported (it wakes pulls whose queue moved on, whatever
//!    the tags, as Java's tick does).
//! 4. On a connection's close, [`remove_connection`](PullHoldTable::remove_connection).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use logship_remoting::RemotingCommand;
use logship_store::TagFilter;

use crate::consume::ConnectionId;

/// A pull waiting for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeldPull {
    /// The connection to answer on.
    pub connection: ConnectionId,
    /// The request, to re-run (its body, which a pull does not have, is dropped).
    pub request: RemotingCommand,
    /// The pulled topic.
    pub topic: String,
    /// The pulled queue.
    pub queue_id: i32,
    /// The queue offset the pull reads from: a message at or past it wakes the pull.
    pub offset: i64,
    /// The pull's tag filter.
    pub filter: TagFilter,
    /// When the pull is answered whatever happens.
    pub deadline: Instant,
}

impl HeldPull {
    /// The bytes it keeps: what the bounds count.
    pub fn footprint(&self) -> usize {
        let ext: usize = self.request.ext_fields.iter().map(|(k, v)| k.len() + v.len() + 48).sum();
        let codes = match &self.filter {
            TagFilter::All => 0,
            TagFilter::Codes(c) => c.len() * 8,
        };
        256 + ext + self.request.remark.as_ref().map_or(0, String::len) + self.topic.len() + codes
    }
}

/// The bounds of a [`PullHoldTable`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HoldLimits {
    /// Pulls held in all.
    pub max_held: usize,
    /// Pulls held for one connection (a client holds one per queue it consumes).
    pub max_per_connection: usize,
    /// Bytes of held requests ([`HeldPull::footprint`]).
    pub max_bytes: usize,
}

impl Default for HoldLimits {
    fn default() -> Self {
        Self { max_held: 100_000, max_per_connection: 4096, max_bytes: 128 << 20 }
    }
}

/// Why a pull was not held; it carries the pull back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct HoldRefused {
    /// The pull.
    pub pull: Box<HeldPull>,
    /// Which bound.
    pub reason: HoldLimit,
}

/// The bound a refused pull hit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HoldLimit {
    /// [`HoldLimits::max_held`].
    #[error("the broker holds {max} pulls, its limit")]
    Held {
        /// The limit.
        max: usize,
    },
    /// [`HoldLimits::max_per_connection`].
    #[error("this connection holds {max} pulls, its limit")]
    PerConnection {
        /// The limit.
        max: usize,
    },
    /// [`HoldLimits::max_bytes`].
    #[error("held pulls take {max} bytes, the limit")]
    Bytes {
        /// The limit.
        max: usize,
    },
}

/// What [`PullHoldTable::hold`] did.
#[derive(Debug, PartialEq, Eq)]
#[must_use]
pub enum Hold {
    /// The pull is held.
    Held,
    /// A message arrived while the pull was being held: re-run it now.
    WakeNow(Box<HeldPull>),
}

#[derive(Debug)]
struct Slot {
    id: u64,
    pull: HeldPull,
    bytes: usize,
}

#[derive(Debug, Default)]
struct Table {
    by_queue: BTreeMap<(String, i32), VecDeque<Slot>>,
    deadlines: BTreeSet<(Instant, u64)>,
    per_connection: BTreeMap<ConnectionId, usize>,
    bytes: usize,
    next_id: u64,
}

impl Table {
    fn forget(&mut self, slot: &Slot) {
        self.deadlines.remove(&(slot.pull.deadline, slot.id));
        self.bytes -= slot.bytes;
        if let Some(n) = self.per_connection.get_mut(&slot.pull.connection) {
            *n -= 1;
            if *n == 0 {
                self.per_connection.remove(&slot.pull.connection);
            }
        }
    }

    /// Takes the slots of `key` for which `wake` says yes.
    fn take_where(
        &mut self,
        key: &(String, i32),
        mut wake: impl FnMut(u64, &HeldPull) -> bool,
    ) -> Vec<HeldPull> {
        let Some(slots) = self.by_queue.get_mut(key) else { return Vec::new() };
        let mut woken = Vec::new();
        let mut kept = VecDeque::with_capacity(slots.len());
        for slot in std::mem::take(slots) {
            if wake(slot.id, &slot.pull) { woken.push(slot) } else { kept.push_back(slot) }
        }
        if kept.is_empty() {
            self.by_queue.remove(key);
        } else {
            *self.by_queue.get_mut(key).expect("present above") = kept;
        }
        woken
            .into_iter()
            .map(|s| {
                self.forget(&s);
                s.pull
            })
            .collect()
    }
}

/// The held pulls. Every method takes `&self`; the lock is held only inside a call.
#[derive(Debug)]
pub struct PullHoldTable {
    limits: HoldLimits,
    held: AtomicUsize,
    inner: Mutex<Table>,
}

impl PullHoldTable {
    /// An empty table with `limits`.
    pub fn new(limits: HoldLimits) -> Self {
        Self { limits, held: AtomicUsize::new(0), inner: Mutex::default() }
    }

    fn table(&self) -> std::sync::MutexGuard<'_, Table> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn publish(&self, t: &Table) {
        self.held.store(t.deadlines.len(), Ordering::Release);
    }

    /// Holds `pull`, unless a bound is reached. `current_max` is the pull's queue's max offset,
    /// read after the pull is in the table: if it is past the pull's offset, a message arrived
    /// between the pull's read and now (its arrival found nothing to wake), and the pull is
    /// handed back to be re-run now.
    pub fn hold(&self, mut pull: HeldPull, current_max: impl FnOnce() -> i64) -> Result<Hold, HoldRefused> {
        pull.request.body = bytes::Bytes::new();
        let bytes = pull.footprint();
        let (id, offset, key) = {
            let mut t = self.table();
            let per_conn = t.per_connection.get(&pull.connection).copied().unwrap_or(0);
            let reason = if t.deadlines.len() >= self.limits.max_held {
                Some(HoldLimit::Held { max: self.limits.max_held })
            } else if per_conn >= self.limits.max_per_connection {
                Some(HoldLimit::PerConnection { max: self.limits.max_per_connection })
            } else if t.bytes + bytes > self.limits.max_bytes {
                Some(HoldLimit::Bytes { max: self.limits.max_bytes })
            } else {
                None
            };
            if let Some(reason) = reason {
                return Err(HoldRefused { pull: Box::new(pull), reason });
            }
            let id = t.next_id;
            t.next_id += 1;
            t.deadlines.insert((pull.deadline, id));
            *t.per_connection.entry(pull.connection).or_default() += 1;
            t.bytes += bytes;
            let key = (pull.topic.clone(), pull.queue_id);
            let offset = pull.offset;
            t.by_queue.entry(key.clone()).or_default().push_back(Slot { id, pull, bytes });
            self.publish(&t);
            (id, offset, key)
        };
        if current_max() <= offset {
            return Ok(Hold::Held);
        }
        // Take back exactly the pull just added, unless an arrival took it meanwhile.
        let mut t = self.table();
        let woken = t.take_where(&key, |slot, _| slot == id);
        self.publish(&t);
        Ok(woken.into_iter().next().map_or(Hold::Held, |p| Hold::WakeNow(Box::new(p))))
    }

    /// `notifyMessageArriving`: a message was indexed into `(topic, queue_id)`, whose max
    /// offset is now `max_offset`, with `tags_code` (`None`: unknown, matches every filter).
    /// Returns the pulls to re-run: those whose offset is now below the queue's max (re-read
    /// with `current_max` when `max_offset` is not past a pull's offset) and whose filter
    /// passes the tag code, and those past their deadline at `now`.
    pub fn on_arrival(
        &self,
        topic: &str,
        queue_id: i32,
        max_offset: i64,
        tags_code: Option<i64>,
        now: Instant,
        current_max: impl Fn() -> i64,
    ) -> Vec<HeldPull> {
        if self.held.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let key = (topic.to_string(), queue_id);
        let mut t = self.table();
        if !t.by_queue.contains_key(&key) {
            return Vec::new();
        }
        let mut reread: Option<i64> = None;
        let woken = t.take_where(&key, |_, p| {
            let mut newest = max_offset;
            if newest <= p.offset {
                newest = *reread.get_or_insert_with(&current_max);
            }
            let arrived = newest > p.offset && tags_code.is_none_or(|code| p.filter.matches(code));
            arrived || now >= p.deadline
        });
        self.publish(&t);
        woken
    }

    /// The pulls whose deadline is at or before `now`, taken out of the table.
    pub fn poll_expired(&self, now: Instant) -> Vec<HeldPull> {
        if self.held.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let mut t = self.table();
        let due: Vec<u64> = t.deadlines.iter().take_while(|(d, _)| *d <= now).map(|&(_, id)| id).collect();
        if due.is_empty() {
            return Vec::new();
        }
        let due: BTreeSet<u64> = due.into_iter().collect();
        let keys: Vec<(String, i32)> = t.by_queue.keys().cloned().collect();
        let mut out = Vec::new();
        for key in keys {
            if t.by_queue[&key].iter().any(|s| due.contains(&s.id)) {
                out.extend(t.take_where(&key, |id, _| due.contains(&id)));
            }
        }
        out.sort_by_key(|p| p.deadline);
        self.publish(&t);
        out
    }

    /// The earliest deadline of a held pull.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.table().deadlines.first().map(|&(d, _)| d)
    }

    /// Java's 5 s tick: re-runs every pull whose queue's max offset (`max_of(topic, queue)`)
    /// is past its offset, whatever the tags, and every pull past its deadline.
    pub fn recheck(&self, now: Instant, max_of: impl Fn(&str, i32) -> i64) -> Vec<HeldPull> {
        if self.held.load(Ordering::Acquire) == 0 {
            return Vec::new();
        }
        let mut t = self.table();
        let keys: Vec<(String, i32)> = t.by_queue.keys().cloned().collect();
        let mut out = Vec::new();
        for key in keys {
            let max = max_of(&key.0, key.1);
            out.extend(t.take_where(&key, |_, p| max > p.offset || now >= p.deadline));
        }
        self.publish(&t);
        out
    }

    /// Drops every pull held for `connection` (it closed) and returns them.
    pub fn remove_connection(&self, connection: ConnectionId) -> Vec<HeldPull> {
        let mut t = self.table();
        if !t.per_connection.contains_key(&connection) {
            return Vec::new();
        }
        let keys: Vec<(String, i32)> = t.by_queue.keys().cloned().collect();
        let mut out = Vec::new();
        for key in keys {
            out.extend(t.take_where(&key, |_, p| p.connection == connection));
        }
        self.publish(&t);
        out
    }

    /// Takes every held pull (a shutdown: answer them or drop them).
    pub fn drain(&self) -> Vec<HeldPull> {
        let mut t = self.table();
        let keys: Vec<(String, i32)> = t.by_queue.keys().cloned().collect();
        let mut out = Vec::new();
        for key in keys {
            out.extend(t.take_where(&key, |_, _| true));
        }
        self.publish(&t);
        out
    }

    /// Pulls held.
    pub fn len(&self) -> usize {
        self.held.load(Ordering::Acquire)
    }

    /// Whether no pull is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes of held requests.
    pub fn bytes(&self) -> usize {
        self.table().bytes
    }

    /// Pulls held for `connection`.
    pub fn held_for(&self, connection: ConnectionId) -> usize {
        self.table().per_connection.get(&connection).copied().unwrap_or(0)
    }
}
