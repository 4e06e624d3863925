//! Orderly consumers' queue locks: `LOCK_BATCH_MQ` (41) and `UNLOCK_BATCH_MQ` (42) (Java's
//! `RebalanceLockManager`).
//!
//! A lock is per consumer group and queue (topic, broker name, queue id, as the client names
//! it; the broker checks neither that the queue exists nor that it is its own) and held by a
//! client id. Locking succeeds when the queue is free, held by the same client (which renews
//! it) or expired: not renewed for `lockMaxLiveTime` (60 s). Only the holder unlocks. Locks
//! survive the holder's connection (they only expire), and start empty on a new master: an
//! orderly client re-locks every 20 s and stops consuming 30 s after its last successful lock,
//! so two clients overlap on a queue for at most that long.
//!
//! The table is bounded ([`RebalanceLockManager::new`]): once full, expired locks are dropped
//! and a queue that would need a new entry beyond the bound is not locked (the client retries
//! at its next rebalance).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use logship_remoting::RemotingCommand;
use logship_remoting::body::{
    JsonBody, LockBatchRequestBody, LockBatchResponseBody, MessageQueue, UnlockBatchRequestBody,
};

use crate::consume::{ConsumeContext, Now, Reply, bad_body, success};

#[derive(Clone, Debug)]
struct LockEntry {
    client_id: String,
    last_update: Instant,
}

#[derive(Debug, Default)]
struct Locks {
    groups: BTreeMap<String, BTreeMap<MessageQueue, LockEntry>>,
    entries: usize,
}

/// The default bound on lock entries.
pub const DEFAULT_MAX_LOCKS: usize = 100_000;

/// The queue locks of orderly consumers. Every method takes `&self`.
#[derive(Debug)]
pub struct RebalanceLockManager {
    max_live: Duration,
    max_entries: usize,
    inner: Mutex<Locks>,
}

impl RebalanceLockManager {
    /// An empty table whose locks expire after `lock_max_live_time` and which holds at most
    /// `max_entries` locks.
    pub fn new(lock_max_live_time: Duration, max_entries: usize) -> Self {
        Self { max_live: lock_max_live_time, max_entries, inner: Mutex::default() }
    }

    fn locks(&self) -> std::sync::MutexGuard<'_, Locks> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn expired(&self, e: &LockEntry, now: Instant) -> bool {
        now.saturating_duration_since(e.last_update) > self.max_live
    }

    /// `tryLockBatch`: locks what of `queues` it can for `client_id` and returns every queue of
    /// `queues` the client now holds.
    pub fn try_lock_batch(
        &self,
        group: &str,
        queues: &[MessageQueue],
        client_id: &str,
        now: Instant,
    ) -> Vec<MessageQueue> {
        let mut t = self.locks();
        let mut locked = Vec::with_capacity(queues.len());
        for mq in queues {
            if locked.contains(mq) {
                continue;
            }
            let held = t.groups.get_mut(group).and_then(|g| g.get_mut(mq));
            match held {
                Some(e) if e.client_id == client_id || self.expired(e, now) => {
                    if e.client_id != client_id {
                        tracing::info!(group, old = %e.client_id, new = client_id, topic = %mq.topic, queue_id = mq.queue_id, "expired queue lock taken over");
                        e.client_id = client_id.to_string();
                    }
                    e.last_update = now;
                    locked.push(mq.clone());
                }
                Some(e) => {
                    tracing::debug!(group, holder = %e.client_id, client = client_id, topic = %mq.topic, queue_id = mq.queue_id, "queue locked by another client");
                }
                None => {
                    if t.entries >= self.max_entries {
                        self.prune(&mut t, now);
                    }
                    if t.entries >= self.max_entries {
                        tracing::warn!(group, max = self.max_entries, "queue lock table full; lock refused");
                        continue;
                    }
                    let entry = LockEntry { client_id: client_id.to_string(), last_update: now };
                    t.groups.entry(group.to_string()).or_default().insert(mq.clone(), entry);
                    t.entries += 1;
                    locked.push(mq.clone());
                }
            }
        }
        locked
    }

    /// `unlockBatch`: frees the queues of `queues` that `client_id` holds.
    pub fn unlock_batch(&self, group: &str, queues: &[MessageQueue], client_id: &str) {
        let mut t = self.locks();
        let Locks { groups, entries } = &mut *t;
        let Some(g) = groups.get_mut(group) else { return };
        for mq in queues {
            if g.get(mq).is_some_and(|e| e.client_id == client_id) {
                g.remove(mq);
                *entries -= 1;
            }
        }
        if g.is_empty() {
            groups.remove(group);
        }
    }

    /// Whether `client_id` holds an unexpired lock of `mq` in `group`.
    pub fn is_locked(&self, group: &str, mq: &MessageQueue, client_id: &str, now: Instant) -> bool {
        let t = self.locks();
        t.groups
            .get(group)
            .and_then(|g| g.get(mq))
            .is_some_and(|e| e.client_id == client_id && !self.expired(e, now))
    }

    /// `isLockAllExpired` (5.x): whether no lock of `group` is unexpired (5.x's send path sends
    /// an orderly group's retries straight to its dead-letter topic otherwise).
    pub fn is_lock_all_expired(&self, group: &str, now: Instant) -> bool {
        let t = self.locks();
        t.groups.get(group).is_none_or(|g| g.values().all(|e| self.expired(e, now)))
    }

    /// Locks held, expired ones included until they are pruned.
    pub fn len(&self) -> usize {
        self.locks().entries
    }

    /// Whether no lock is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every expired lock (also done when the table is full).
    pub fn prune_expired(&self, now: Instant) -> usize {
        let mut t = self.locks();
        self.prune(&mut t, now)
    }

    fn prune(&self, t: &mut Locks, now: Instant) -> usize {
        let before = t.entries;
        let mut left = 0;
        t.groups.retain(|_, g| {
            g.retain(|_, e| !self.expired(e, now));
            left += g.len();
            !g.is_empty()
        });
        t.entries = left;
        before - left
    }

    /// Drops every lock (a new master starts empty).
    pub fn clear(&self) {
        *self.locks() = Locks::default();
    }
}

/// `LOCK_BATCH_MQ` (41): the body names the group, the client and the queues; the answer's
/// `lockOKMQSet` is the queues the client holds now. Always `SUCCESS` (a body that is not the
/// JSON Java sends is `SYSTEM_ERROR`).
pub(crate) fn lock_batch_mq(ctx: &ConsumeContext<'_>, request: &RemotingCommand, now: Now) -> Reply {
    let body = match LockBatchRequestBody::decode(&request.body) {
        Ok(b) => b,
        Err(e) => return Reply::to(request, bad_body(request, &e)),
    };
    let locked = ctx.locks.try_lock_batch(&body.consumer_group, &body.mq_set, &body.client_id, now.instant);
    Reply::to(request, success(request).with_body(LockBatchResponseBody::new(locked).encode()))
}

/// `UNLOCK_BATCH_MQ` (42): frees the named queues the client holds. Always `SUCCESS`, no body.
pub(crate) fn unlock_batch_mq(ctx: &ConsumeContext<'_>, request: &RemotingCommand) -> Reply {
    let body = match UnlockBatchRequestBody::decode(&request.body) {
        Ok(b) => b,
        Err(e) => return Reply::to(request, bad_body(request, &e)),
    };
    ctx.locks.unlock_batch(&body.consumer_group, &body.mq_set, &body.client_id);
    Reply::to(request, success(request))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn mq(q: i32) -> MessageQueue {
        MessageQueue::new("T", "b", q)
    }

    #[test]
    fn a_lock_is_the_holders_until_it_expires_after_sixty_seconds() {
        let m = RebalanceLockManager::new(Duration::from_secs(60), 10);
        let t0 = Instant::now();
        assert_eq!(m.try_lock_batch("g", &[mq(0), mq(1)], "c1", t0), vec![mq(0), mq(1)]);
        assert!(m.try_lock_batch("g", &[mq(0)], "c2", t0 + Duration::from_secs(59)).is_empty());
        assert!(m.try_lock_batch("g", &[mq(1)], "c2", t0 + Duration::from_secs(60)).is_empty());
        assert!(!m.is_lock_all_expired("g", t0 + Duration::from_secs(60)));
        let later = t0 + Duration::from_millis(60_001);
        assert!(m.is_lock_all_expired("g", later));
        assert_eq!(m.try_lock_batch("g", &[mq(0), mq(2)], "c2", later), vec![mq(0), mq(2)]);
        assert!(m.is_locked("g", &mq(0), "c2", later));
        assert!(!m.is_locked("g", &mq(0), "c1", later));
        // Another group is another table.
        assert_eq!(m.try_lock_batch("h", &[mq(0)], "c1", later), vec![mq(0)]);
    }

    #[test]
    fn the_holder_renews_its_lock() {
        let m = RebalanceLockManager::new(Duration::from_secs(60), 10);
        let t0 = Instant::now();
        m.try_lock_batch("g", &[mq(0)], "c1", t0);
        assert_eq!(m.try_lock_batch("g", &[mq(0)], "c1", t0 + Duration::from_secs(50)), vec![mq(0)]);
        let t = t0 + Duration::from_secs(100);
        assert!(m.try_lock_batch("g", &[mq(0)], "c2", t).is_empty(), "renewed at 50 s, valid to 110 s");
    }

    #[test]
    fn only_the_holder_unlocks() {
        let m = RebalanceLockManager::new(Duration::from_secs(60), 10);
        let t0 = Instant::now();
        m.try_lock_batch("g", &[mq(0), mq(1)], "c1", t0);
        m.unlock_batch("g", &[mq(0), mq(1)], "c2");
        assert_eq!(m.len(), 2);
        m.unlock_batch("g", &[mq(0)], "c1");
        assert_eq!(m.len(), 1);
        assert_eq!(m.try_lock_batch("g", &[mq(0)], "c2", t0), vec![mq(0)]);
    }

    #[test]
    fn a_full_table_drops_expired_locks_then_refuses_new_ones() {
        let m = RebalanceLockManager::new(Duration::from_secs(60), 2);
        let t0 = Instant::now();
        assert_eq!(m.try_lock_batch("g", &[mq(0), mq(1), mq(2)], "c1", t0), vec![mq(0), mq(1)]);
        let later = t0 + Duration::from_secs(61);
        assert_eq!(m.try_lock_batch("g", &[mq(1)], "c1", later), vec![mq(1)], "renewing needs no room");
        assert_eq!(
            m.try_lock_batch("g", &[mq(2)], "c1", later),
            vec![mq(2)],
            "queue 0 expired and was dropped"
        );
        assert_eq!(m.len(), 2);
        assert!(m.try_lock_batch("g", &[mq(3)], "c1", later).is_empty());
    }

    #[test]
    fn a_request_naming_a_queue_twice_gets_it_once() {
        let m = RebalanceLockManager::new(Duration::from_secs(60), 10);
        assert_eq!(m.try_lock_batch("g", &[mq(0), mq(0)], "c1", Instant::now()), vec![mq(0)]);
        assert_eq!(m.len(), 1);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Lock { client: u8, queue: u8 },
        Unlock { client: u8, queue: u8 },
        Wait { secs: u8 },
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u8..3, 0u8..4).prop_map(|(client, queue)| Op::Lock { client, queue }),
            (0u8..3, 0u8..4).prop_map(|(client, queue)| Op::Unlock { client, queue }),
            (0u8..90).prop_map(|secs| Op::Wait { secs }),
        ]
    }

    proptest! {
        /// Against a model: at any time at most one client holds a queue, and a lock is granted
        /// exactly when the queue is free, expired or already the client's.
        #[test]
        fn locks_match_a_model(ops in proptest::collection::vec(op(), 1..60)) {
            let m = RebalanceLockManager::new(Duration::from_secs(60), 1000);
            let mut now = Instant::now();
            let mut model: BTreeMap<u8, (u8, Instant)> = BTreeMap::new();
            for op in ops {
                match op {
                    Op::Wait { secs } => now += Duration::from_secs(u64::from(secs)),
                    Op::Lock { client, queue } => {
                        let free = match model.get(&queue) {
                            None => true,
                            Some(&(c, at)) => c == client || now.duration_since(at) > Duration::from_secs(60),
                        };
                        let got = m.try_lock_batch("g", &[mq(queue.into())], &client.to_string(), now);
                        prop_assert_eq!(got.len() == 1, free);
                        if free {
                            model.insert(queue, (client, now));
                        }
                    }
                    Op::Unlock { client, queue } => {
                        m.unlock_batch("g", &[mq(queue.into())], &client.to_string());
                        if model.get(&queue).is_some_and(|&(c, _)| c == client) {
                            model.remove(&queue);
                        }
                    }
                }
                for q in 0u8..4 {
                    for c in 0u8..3 {
                        let held = model.get(&q).is_some_and(|&(h, at)| {
                            h == c && now.duration_since(at) <= Duration::from_secs(60)
                        });
                        prop_assert_eq!(m.is_locked("g", &mq(q.into()), &c.to_string(), now), held);
                    }
                }
            }
        }
    }
}
