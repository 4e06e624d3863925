//! Delay levels: the put-time diversion of delayed messages into `SCHEDULE_TOPIC_XXXX` and
//! the schedule service that puts them back into their topics when they are due (Java's
//! `CommitLog` delay handling, 5.x's `HookUtils.handleScheduleMessage`, and
//! `ScheduleMessageService`).
//!
//! # Diversion ([`schedule_if_delayed`])
//!
//! A message whose `DELAY` property is a level above 0 (and that is not a prepared or
//! rolled-back transaction) is stored in `SCHEDULE_TOPIC_XXXX`, queue `level - 1` (the level
//! clamped to the highest), with `REAL_TOPIC` and `REAL_QID` naming where it goes. The store
//! indexes it by its delivery time (`store timestamp + delay(level)`). Only the configured
//! `messageDelayLevel` levels exist: timer messages (5.x `TIMER_*`) are not served. The send
//! processor applies it to producers' messages, [`retry`](crate::retry) to retries.
//!
//! # Delivery ([`ScheduleService`])
//!
//! Runs on the master only. For each level it walks the level's queue from its offset
//! (`config/delayOffset.json`): an entry whose delivery time has come is read and rebuilt as
//! Java's `messageTimeup` does (body, flag, properties as stored, `DELAY` included; topic and
//! queue from `REAL_TOPIC`/`REAL_QID`; sysFlag, born time and host and reconsume times kept)
//! and put back; the first entry not due yet stops the walk. Levels are independent; inside a
//! level messages go back in queue order.
//!
//! The service is sans-IO and owned by one task of the glue:
//!
//! 1. at [`next_deadline`](ScheduleService::next_deadline) (a wall-clock time in ms) call
//!    [`poll`](ScheduleService::poll), which returns [`Delivery`] batches, at most one in
//!    flight per level;
//! 2. put each batch's messages **in order** through the same path as a producer's send (the
//!    master service handle: so redeliveries are replicated like any message), stopping at the
//!    first refusal, and report with [`delivered`](ScheduleService::delivered); the offsets move
//!    in the [`DelayOffsetManager`], which the glue persists every `flushDelayOffsetInterval`
//!    (10 s) with `persist_if_dirty`. A put refused for a passing reason (the broker is not
//!    writable, a slave, shutting down, a disk full) is retried 100 ms later; one refused for
//!    the message itself (illegal, properties too long) is skipped with an error, as Java skips
//!    a message it cannot rebuild, so that it does not stop its level for ever.
//!
//! Delivery is at least once: a crash or a role change repeats what was put after the last
//! persisted offset.
//!
//! **Never** send the rebuilt messages through [`schedule_if_delayed`]: they keep their
//! `DELAY` property (as Java's do) and would be diverted again.

use std::collections::BTreeMap;

use logship_core::PutStatus;
use logship_store::codec::{PROPERTY_DELAY_TIME_LEVEL, SCHEDULE_TOPIC, property, sys_flag};
use logship_store::{CommitLog, Message, StoredMessage};

use crate::delay::{DelayLevels, DelayOffsetManager, delay_level_to_queue_id, queue_id_to_delay_level};
use crate::names;

/// `REAL_TOPIC`: where a scheduled message goes when due.
pub const PROPERTY_REAL_TOPIC: &str = "REAL_TOPIC";
/// `REAL_QID`: the queue it goes to.
pub const PROPERTY_REAL_QUEUE_ID: &str = "REAL_QID";

/// How long a level waits before it looks again when nothing is due or a put failed
/// (`DELAY_FOR_A_WHILE`).
pub const DELAY_FOR_A_WHILE_MS: i64 = 100;
/// The first run after the service starts (`FIRST_DELAY_TIME`).
pub const FIRST_DELAY_MS: i64 = 1000;
/// Messages per delivery batch.
pub const DEFAULT_BATCH: usize = 32;

/// Why a message cannot be diverted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DelayError {
    /// The `DELAY` property is not a number (Java fails the send with a `NumberFormatException`).
    #[error("the DELAY property {value:?} is not a delay level (an integer from 1 to {max})")]
    NotALevel {
        /// The property.
        value: String,
        /// The highest level.
        max: i32,
    },
}

/// Sets a property, replacing an earlier one of the same name in place (Java's `putProperty`).
pub(crate) fn put_property(properties: &mut Vec<(String, String)>, name: &str, value: impl Into<String>) {
    let value = value.into();
    let mut found = false;
    properties.retain_mut(|(n, v)| {
        if n != name {
            return true;
        }
        if found {
            return false;
        }
        found = true;
        *v = value.clone();
        true
    });
    if !found {
        properties.push((name.to_string(), value));
    }
}

/// The put-time diversion (see the [module docs](self)): returns the message as it is to be
/// stored, diverted into `SCHEDULE_TOPIC_XXXX` if it is delayed.
pub fn schedule_if_delayed(mut message: Message, levels: &DelayLevels) -> Result<Message, DelayError> {
    let Some(value) = property(&message.properties, PROPERTY_DELAY_TIME_LEVEL) else { return Ok(message) };
    let max = levels.max_level();
    let level: i32 =
        value.parse().map_err(|_| DelayError::NotALevel { value: value.chars().take(64).collect(), max })?;
    let tran = message.sys_flag & sys_flag::TRANSACTION_MASK;
    let transactional =
        tran == sys_flag::TRANSACTION_PREPARED_TYPE || tran == sys_flag::TRANSACTION_ROLLBACK_TYPE;
    if level <= 0 || max <= 0 || transactional {
        return Ok(message);
    }
    let level = if level > max {
        put_property(&mut message.properties, PROPERTY_DELAY_TIME_LEVEL, max.to_string());
        max
    } else {
        level
    };
    let topic = std::mem::replace(&mut message.topic, SCHEDULE_TOPIC.to_string());
    put_property(&mut message.properties, PROPERTY_REAL_TOPIC, topic);
    put_property(&mut message.properties, PROPERTY_REAL_QUEUE_ID, message.queue_id.to_string());
    message.queue_id = delay_level_to_queue_id(level);
    Ok(message)
}

/// Java's `messageTimeup`: the message a due scheduled message becomes, or why it cannot be
/// rebuilt.
pub fn message_time_up(stored: &StoredMessage) -> Result<Message, String> {
    let topic = property(&stored.properties, PROPERTY_REAL_TOPIC)
        .ok_or_else(|| "no REAL_TOPIC property".to_string())?
        .to_string();
    let queue = property(&stored.properties, PROPERTY_REAL_QUEUE_ID).ok_or("no REAL_QID property")?;
    let queue_id: i32 = queue.parse().map_err(|_| format!("REAL_QID {queue:?} is not a queue id"))?;
    if topic == names::TRANS_HALF_TOPIC {
        return Err(format!("the real topic is {topic}; discarded"));
    }
    Ok(Message {
        topic,
        queue_id,
        flag: stored.flag,
        body: stored.body.clone(),
        properties: stored.properties.clone(),
        sys_flag: stored.sys_flag,
        born_timestamp: stored.born_timestamp,
        born_host: stored.born_host,
        reconsume_times: stored.reconsume_times,
        prepared_transaction_offset: stored.prepared_transaction_offset,
        properties_string: None,
        batch: Vec::new(),
    })
}

/// A due message of a [`Delivery`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DueMessage {
    /// Its offset in the level's queue.
    pub queue_offset: i64,
    /// The message to put.
    pub message: Message,
}

/// Due messages of one level, to put in order.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct Delivery {
    /// The level.
    pub level: i32,
    /// The messages.
    pub messages: Vec<DueMessage>,
    /// The level's offset once every message is put (entries skipped after the last one
    /// included).
    pub end_offset: i64,
}

/// How the glue's puts of a [`Delivery`] went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryOutcome {
    /// Every message was stored.
    All,
    /// The first `stored` messages were stored; the next was refused with `status`.
    Stopped {
        /// Messages stored.
        stored: usize,
        /// The refusal.
        status: PutStatus,
    },
}

#[derive(Clone, Debug)]
struct Level {
    offset: i64,
    next_run_ms: i64,
    in_flight: bool,
}

/// The schedule service of a master (see the [module docs](self)).
#[derive(Debug)]
pub struct ScheduleService {
    levels: DelayLevels,
    state: BTreeMap<i32, Level>,
    batch: usize,
}

/// Java's `correctDeliverTimestamp`: a delivery time more than one delay in the future (the
/// clock moved back) is now.
pub fn correct_deliver_timestamp(now_ms: i64, deliver_ms: i64, delay_ms: i64) -> i64 {
    if deliver_ms > now_ms.saturating_add(delay_ms) { now_ms } else { deliver_ms }
}

impl ScheduleService {
    /// Starts the service of a (new) master: each level resumes at its offset in `offsets`
    /// (moved into its queue's bounds if it lies outside, as 5.x's `correctDelayOffset`),
    /// and first runs [`FIRST_DELAY_MS`] after `now_ms`.
    pub fn start(offsets: &DelayOffsetManager, store: &CommitLog, now_ms: i64) -> Self {
        let levels = offsets.levels().clone();
        offsets.correct_against_queues(|level| {
            let (min, max) = store.queue_bounds(SCHEDULE_TOPIC, delay_level_to_queue_id(level));
            Some((min as i64, max as i64))
        });
        let state = levels
            .iter()
            .map(|(level, _)| {
                let offset = offsets.offset(level).unwrap_or(0);
                (
                    level,
                    Level { offset, next_run_ms: now_ms.saturating_add(FIRST_DELAY_MS), in_flight: false },
                )
            })
            .collect();
        Self { levels, state, batch: DEFAULT_BATCH }
    }

    /// Sets the largest batch [`poll`](Self::poll) returns per level.
    pub fn set_batch(&mut self, batch: usize) {
        self.batch = batch.max(1);
    }

    /// The earliest time a level wants to run, if any is not waiting for its puts.
    pub fn next_deadline(&self) -> Option<i64> {
        self.state.values().filter(|l| !l.in_flight).map(|l| l.next_run_ms).min()
    }

    /// The level's next offset to deliver.
    pub fn offset(&self, level: i32) -> Option<i64> {
        self.state.get(&level).map(|l| l.offset)
    }

    /// Runs every level whose time has come: returns the due messages to put. Offsets move
    /// (in `offsets`) past entries that are skipped (unreadable or not reschedulable).
    pub fn poll(&mut self, now_ms: i64, store: &CommitLog, offsets: &DelayOffsetManager) -> Vec<Delivery> {
        let mut out = Vec::new();
        let levels: Vec<(i32, i64)> = self.levels.iter().collect();
        for (level, delay) in levels {
            let batch = self.batch;
            let Some(st) = self.state.get_mut(&level) else { continue };
            if st.in_flight || st.next_run_ms > now_ms {
                continue;
            }
            let queue_id = delay_level_to_queue_id(level);
            let (min, max) = store.queue_bounds(SCHEDULE_TOPIC, queue_id);
            let (min, max) = (min as i64, max as i64);
            if st.offset < min || st.offset > max {
                tracing::error!(
                    level,
                    offset = st.offset,
                    min,
                    max,
                    "schedule offset outside its queue; corrected"
                );
                st.offset = st.offset.clamp(min, max.max(min));
                offsets.update_offset(level, st.offset, now_ms);
            }
            let entries = match store.read_queue(SCHEDULE_TOPIC, queue_id, st.offset as u64, batch) {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(level, error = %e, "cannot read the schedule queue");
                    st.next_run_ms = now_ms + DELAY_FOR_A_WHILE_MS;
                    continue;
                }
            };
            let mut messages = Vec::new();
            let mut next = st.offset;
            let mut waiting = false;
            for e in entries {
                let deliver = correct_deliver_timestamp(now_ms, e.tags_code, delay);
                if deliver > now_ms {
                    waiting = true;
                    st.next_run_ms = deliver.min(now_ms + DELAY_FOR_A_WHILE_MS.max(deliver - now_ms));
                    break;
                }
                let queue_offset = e.queue_offset as i64;
                next = queue_offset + 1;
                let stored = match store.read_message(e.physical_offset) {
                    Ok(m) => m,
                    Err(err) => {
                        tracing::error!(level, queue_offset, error = %err, "scheduled message unreadable; skipped");
                        continue;
                    }
                };
                match message_time_up(&stored) {
                    Ok(message) => messages.push(DueMessage { queue_offset, message }),
                    Err(why) => {
                        tracing::error!(level, queue_offset, %why, "scheduled message cannot be delivered; skipped");
                    }
                }
            }
            if !waiting {
                st.next_run_ms = now_ms + DELAY_FOR_A_WHILE_MS;
            }
            if messages.is_empty() {
                if next != st.offset {
                    st.offset = next;
                    offsets.update_offset(level, next, now_ms);
                }
                continue;
            }
            st.in_flight = true;
            out.push(Delivery { level, messages, end_offset: next });
        }
        out
    }

    /// Reports how the puts of `delivery` went; the level's offset moves past what was stored
    /// (and past a message refused for itself, which is skipped).
    pub fn delivered(
        &mut self,
        delivery: &Delivery,
        outcome: DeliveryOutcome,
        now_ms: i64,
        offsets: &DelayOffsetManager,
    ) {
        let Some(st) = self.state.get_mut(&delivery.level) else { return };
        st.in_flight = false;
        let offset = match outcome {
            DeliveryOutcome::All => delivery.end_offset,
            DeliveryOutcome::Stopped { stored, status } => {
                let Some(failed) = delivery.messages.get(stored) else {
                    st.offset = delivery.end_offset;
                    offsets.update_offset(delivery.level, st.offset, now_ms);
                    return;
                };
                st.next_run_ms = now_ms + DELAY_FOR_A_WHILE_MS;
                if matches!(status, PutStatus::MessageIllegal | PutStatus::PropertiesSizeExceeded) {
                    tracing::error!(
                        level = delivery.level,
                        queue_offset = failed.queue_offset,
                        topic = %failed.message.topic,
                        status = status.rocketmq_name(),
                        "a due scheduled message was refused; skipped"
                    );
                    failed.queue_offset + 1
                } else {
                    tracing::warn!(
                        level = delivery.level,
                        queue_offset = failed.queue_offset,
                        status = status.rocketmq_name(),
                        "a due scheduled message was not stored; retrying"
                    );
                    failed.queue_offset
                }
            }
        };
        if offset != st.offset {
            st.offset = offset;
            offsets.update_offset(delivery.level, offset, now_ms);
        }
    }

    /// The level of a queue of `SCHEDULE_TOPIC_XXXX`, if it is one of the configured levels.
    pub fn level_of_queue(&self, queue_id: i32) -> Option<i32> {
        let level = queue_id_to_delay_level(queue_id);
        self.levels.millis(level).map(|_| level)
    }
}
