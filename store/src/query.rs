//! The store queries a RocketMQ broker's request processors need, with the semantics of Java's
//! `DefaultMessageStore` (4.9 and 5.x, where they differ): `getMessage` for `PULL_MESSAGE`,
//! `getOffsetInQueueByTime` for `SEARCH_OFFSET_BY_TIMESTAMP`, `getEarliestMessageTime`,
//! `getMessageStoreTimeStamp`, and `selectOneMessageByOffset` for `VIEW_MESSAGE_BY_ID`.
//!
//! Each walks the consume queue entry by entry as Java does (one consume-queue file per call,
//! blank padding included), so statuses, `nextBeginOffset` and the caps come out as a Java
//! broker computes them. Message bytes are zero-copy spans of the log.

use std::collections::HashSet;

use bytes::Bytes;
use logship_core::LogSpan;

use crate::codec::{self, sys_flag};
use crate::consume_queue::{ConsumeQueue, QueueFile, RawEntry};
use crate::error::StoreError;
use crate::store::CommitLog;

/// Which Java line's `getMessage` and time-search rules to follow where they differ.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum QueryLine {
    /// RocketMQ 4.9.x.
    V4_9,
    /// RocketMQ 5.x.
    #[default]
    V5,
}

/// `GetMessageStatus`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GetMessageStatus {
    /// Messages were found.
    Found,
    /// Entries were read but none matched the filter.
    NoMatchedMessage,
    /// The entries point at commit-log bytes retention has removed.
    MessageWasRemoving,
    /// The consume-queue file holding the offset is gone.
    OffsetFoundNull,
    /// The offset is past the queue's end by more than one.
    OffsetOverflowBadly,
    /// The offset is the queue's end: nothing new yet (a pull suspends on it).
    OffsetOverflowOne,
    /// The offset is below the queue's minimum.
    OffsetTooSmall,
    /// There is no such queue. Never returned by this store, as by Java's, whose
    /// `findConsumeQueue` creates a missing queue: an unknown queue is
    /// [`NoMessageInQueue`](Self::NoMessageInQueue). Kept for the processors' status mapping.
    NoMatchedLogicQueue,
    /// The queue is empty (its max offset is 0).
    NoMessageInQueue,
}

impl GetMessageStatus {
    /// Java's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Found => "FOUND",
            Self::NoMatchedMessage => "NO_MATCHED_MESSAGE",
            Self::MessageWasRemoving => "MESSAGE_WAS_REMOVING",
            Self::OffsetFoundNull => "OFFSET_FOUND_NULL",
            Self::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
            Self::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
            Self::OffsetTooSmall => "OFFSET_TOO_SMALL",
            Self::NoMatchedLogicQueue => "NO_MATCHED_LOGIC_QUEUE",
            Self::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        }
    }
}

/// A TAG subscription as the consume queue filters it (`SubscriptionData` of type TAG and
/// `ExpressionMessageFilter.isMatchedByConsumeQueue`): all messages, or those whose tag hash is
/// in the set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TagFilter {
    /// `*` (or an empty expression): every message.
    All,
    /// `a || b`: the Java `String.hashCode` of each tag.
    Codes(HashSet<i32>),
}

impl TagFilter {
    /// Parses a subscription expression as `FilterAPI.buildSubscriptionData`: empty or `*` is
    /// [`All`](Self::All); otherwise the `||`-separated tags, trimmed, empty ones dropped (so
    /// `" || "` matches nothing, as in Java).
    pub fn parse(expression: &str) -> Self {
        let e = expression.trim();
        if e.is_empty() || e == "*" {
            return Self::All;
        }
        Self::Codes(
            expression
                .split("||")
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(codec::java_string_hash)
                .collect(),
        )
    }

    /// Whether an entry with `tags_code` passes (Java compares the code's low 32 bits).
    pub fn matches(&self, tags_code: i64) -> bool {
        match self {
            Self::All => true,
            Self::Codes(codes) => codes.contains(&(tags_code as i32)),
        }
    }
}

/// `(long) (total_physical_memory * (ratio / 100.0))`: the bytes behind the log end that Java
/// counts as in memory (`accessMessageInMemoryMaxRatio`, 40 by default).
pub fn memory_limit(total_physical_memory: u64, access_message_in_memory_max_ratio: u32) -> u64 {
    (total_physical_memory as f64 * (f64::from(access_message_in_memory_max_ratio) / 100.0)) as u64
}

/// The machine's physical memory (`MemTotal` of `/proc/meminfo`), as Java's
/// `StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE`; `None` where it cannot be read.
pub fn total_physical_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The caps and settings of a [`CommitLog::get_message`] call, named as in
/// `MessageStoreConfig`. Defaults are RocketMQ's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GetMessageOptions {
    /// Whose rules to follow.
    pub line: QueryLine,
    /// `maxTransferBytesOnMessageInMemory` (256 KiB).
    pub max_transfer_bytes_on_message_in_memory: u64,
    /// `maxTransferCountOnMessageInMemory` (32).
    pub max_transfer_count_on_message_in_memory: u32,
    /// `maxTransferBytesOnMessageInDisk` (64 KiB).
    pub max_transfer_bytes_on_message_in_disk: u64,
    /// `maxTransferCountOnMessageInDisk` (8).
    pub max_transfer_count_on_message_in_disk: u32,
    /// `maxFilterMessageSize` (16000 bytes of entries scanned at most, or `maxMsgNums * 20`).
    pub max_filter_message_size: u64,
    /// `travelCqFileNumWhenGetMessage` (5.x, 1): consume-queue files walked while nothing is found.
    pub travel_cq_file_num: u32,
    /// 5.x's `maxTotalMsgSize` of the call (the request's `maxMsgBytes`; at least 100, at most
    /// 128 MiB, as Java clamps it). Ignored by 4.9.
    pub max_total_msg_size: u64,
    /// Bytes behind the log end that count as in memory ([`memory_limit`]).
    pub memory_limit: u64,
    /// Whether `nextBeginOffset` is corrected on an offset out of range: Java's
    /// `nextOffsetCorrection`, true unless the store is a slave without `offsetCheckInSlave`.
    pub correct_next_offset: bool,
}

impl Default for GetMessageOptions {
    fn default() -> Self {
        Self {
            line: QueryLine::default(),
            max_transfer_bytes_on_message_in_memory: 256 * 1024,
            max_transfer_count_on_message_in_memory: 32,
            max_transfer_bytes_on_message_in_disk: 64 * 1024,
            max_transfer_count_on_message_in_disk: 8,
            max_filter_message_size: 16000,
            travel_cq_file_num: 1,
            max_total_msg_size: MAX_PULL_MSG_SIZE,
            memory_limit: memory_limit(total_physical_memory().unwrap_or(8 << 30), 40),
            correct_next_offset: true,
        }
    }
}

/// 5.x's `MAX_PULL_MSG_SIZE`: 128 MiB.
pub const MAX_PULL_MSG_SIZE: u64 = 128 * 1024 * 1024;

/// One message a [`CommitLog::get_message`] found: its stored bytes, zero-copy.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundMessage {
    /// Its queue offset.
    pub queue_offset: u64,
    /// Where it starts in the commit log.
    pub physical_offset: u64,
    /// The stored message, as the pull response body carries it.
    pub bytes: Bytes,
}

/// What [`CommitLog::get_message`] returns (`GetMessageResult`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct GetMessageResult {
    /// The status.
    pub status: GetMessageStatus,
    /// Where the next pull starts.
    pub next_begin_offset: i64,
    /// The queue's minimum offset (0 for an empty or unknown queue).
    pub min_offset: i64,
    /// The queue's maximum offset, one past its last entry.
    pub max_offset: i64,
    /// The messages found, in queue order.
    pub messages: Vec<FoundMessage>,
    /// The bytes of [`messages`](Self::messages).
    pub buffer_total_size: u64,
    /// Whether the consumer reads so far behind that a slave should serve it
    /// (`accessMessageInMemoryMaxRatio`).
    pub suggest_pulling_from_slave: bool,
    /// Entries whose bytes in the log are not a message of the entry's size (logship checks the
    /// size and magic of each record it returns; Java returns whatever bytes are there): queue
    /// offset, physical offset and why. Skipped, as a filtered entry is.
    pub damaged: Vec<(u64, u64, String)>,
}

impl GetMessageResult {
    fn empty(status: GetMessageStatus, next: i64, min: i64, max: i64) -> Self {
        Self {
            status,
            next_begin_offset: next,
            min_offset: min,
            max_offset: max,
            messages: Vec::new(),
            buffer_total_size: 0,
            suggest_pulling_from_slave: false,
            damaged: Vec::new(),
        }
    }
}

/// Which way [`CommitLog::search_offset_by_timestamp`] rounds when no message has the exact
/// store time.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum TimeBoundary {
    /// 4.9: the offset of the message nearest in time (a match, or the closer neighbour).
    Nearest,
    /// 5.x `BoundaryType.LOWER` (the default): the first message stored at or after the time.
    #[default]
    Lower,
    /// 5.x `BoundaryType.UPPER`: the last message stored at or before the time.
    Upper,
}

const UNIT: i64 = crate::config::CQ_ENTRY_SIZE as i64;

impl CommitLog {
    /// Java's `DefaultMessageStore.getMessage(group, topic, queueId, offset, maxMsgNums,
    /// messageFilter)`: up to `max_msg_nums` messages of `(topic, queue_id)` from queue `offset`
    /// that pass `filter`, with the status, `nextBeginOffset`, bounds and the
    /// suggest-pulling-from-slave hint Java computes:
    ///
    /// - empty queue: `NO_MESSAGE_IN_QUEUE`, next 0; below the minimum: `OFFSET_TOO_SMALL`, next
    ///   the minimum; at the end: `OFFSET_OVERFLOW_ONE`, next the offset; past it:
    ///   `OFFSET_OVERFLOW_BADLY`, next the end (each correction only with
    ///   [`correct_next_offset`](GetMessageOptions::correct_next_offset));
    /// - otherwise the entries of the offset's consume-queue file are walked: filtered ones are
    ///   skipped (`NO_MATCHED_MESSAGE` if nothing was found), entries whose log bytes retention
    ///   removed make `MESSAGE_WAS_REMOVING` and skip to the next log segment, and the walk stops
    ///   at the first entry that would overfill the batch (count, or bytes, with the in-memory
    ///   or on-disk caps depending on how far behind the log end the entry is; the first message
    ///   is always taken) or after `max(16000, maxMsgNums * 20)` bytes of entries. Next is the
    ///   offset after the last entry walked. A missing file is `OFFSET_FOUND_NULL`, next the
    ///   start of the following file.
    pub fn get_message(
        &self,
        topic: &str,
        queue_id: i32,
        offset: i64,
        max_msg_nums: u32,
        filter: &TagFilter,
        options: &GetMessageOptions,
    ) -> Result<GetMessageResult, StoreError> {
        let correct = |old: i64, new: i64| if options.correct_next_offset { new } else { old };
        let max_offset_py = self.max_offset() as i64;
        let Some(cq) = self.shared.queue(topic, queue_id) else {
            // Java creates the missing queue and finds it empty.
            return Ok(GetMessageResult::empty(GetMessageStatus::NoMessageInQueue, correct(offset, 0), 0, 0));
        };
        let (min, max) = cq.bounds();
        let (min, max) = (min as i64, max as i64);
        let status = if max == 0 {
            Some((GetMessageStatus::NoMessageInQueue, correct(offset, 0)))
        } else if offset < min {
            Some((GetMessageStatus::OffsetTooSmall, correct(offset, min)))
        } else if offset == max {
            Some((GetMessageStatus::OffsetOverflowOne, correct(offset, offset)))
        } else if offset > max {
            Some((GetMessageStatus::OffsetOverflowBadly, correct(offset, max)))
        } else {
            None
        };
        if let Some((status, next)) = status {
            return Ok(GetMessageResult::empty(status, next, min, max));
        }
        let mut r = GetMessageResult::empty(GetMessageStatus::NoMatchedMessage, offset, min, max);
        let max_filter = options.max_filter_message_size.max(u64::from(max_msg_nums) * UNIT as u64);
        let max_pull_size = options.max_total_msg_size.clamp(100, MAX_PULL_MSG_SIZE);
        let per_file = cq.entries_per_file() as i64;
        let seg_size = self.shared.log.segment_size as i64;
        let mut max_phy_offset_pulling = 0i64;
        let mut next = offset;
        let travel = match options.line {
            QueryLine::V4_9 => 1,
            QueryLine::V5 => options.travel_cq_file_num.max(1),
        };
        let mut files_walked = 0;
        while r.buffer_total_size == 0 && next < max && files_walked < travel {
            files_walked += 1;
            // The entries of the file holding `next`, from `next` to the file's written end
            // (Java's getIndexBuffer).
            let file_end = (next / per_file + 1) * per_file;
            let entries = cq.raw_range(next as u64, file_end.min(max) as u64);
            if entries.first().is_none_or(|e| e.index != next as u64) {
                r.status = GetMessageStatus::OffsetFoundNull;
                next = correct(next, next + per_file - next % per_file);
                tracing::warn!(
                    topic,
                    queue_id,
                    offset,
                    min,
                    max,
                    next,
                    "consume-queue file missing for a pull"
                );
                break;
            }
            let mut next_phy_file_start = i64::MIN;
            for e in entries {
                let (offset_py, size_py) = (e.physical_offset, e.size);
                if (e.index as i64 - offset) * UNIT >= max_filter as i64 {
                    break;
                }
                let in_memory = max_offset_py - offset_py <= options.memory_limit as i64;
                let skipped = next_phy_file_start != i64::MIN && offset_py < next_phy_file_start;
                match options.line {
                    // 4.9: the entry counts as pulled, and skipping comes before the batch check.
                    QueryLine::V4_9 => {
                        max_phy_offset_pulling = offset_py;
                        if skipped {
                            next = e.index as i64 + 1;
                            continue;
                        }
                        if batch_full(options, size_py, max_msg_nums, max_pull_size, &r, in_memory) {
                            break;
                        }
                    }
                    QueryLine::V5 => {
                        if batch_full(options, size_py, max_msg_nums, max_pull_size, &r, in_memory)
                            || r.buffer_total_size >= max_pull_size
                        {
                            break;
                        }
                        max_phy_offset_pulling = offset_py;
                    }
                }
                next = e.index as i64 + 1;
                if skipped {
                    continue;
                }
                if !filter.matches(e.tags_code) {
                    continue;
                }
                match self.entry_bytes(&e) {
                    Ok(Some(bytes)) => {
                        r.buffer_total_size += bytes.len() as u64;
                        r.messages.push(FoundMessage {
                            queue_offset: e.index,
                            physical_offset: offset_py as u64,
                            bytes,
                        });
                        r.status = GetMessageStatus::Found;
                        next_phy_file_start = i64::MIN;
                    }
                    Ok(None) => {
                        // Java's commitLog.getMessage returned null: the bytes are gone.
                        if r.buffer_total_size == 0 {
                            r.status = GetMessageStatus::MessageWasRemoving;
                        }
                        next_phy_file_start = offset_py.max(0) / seg_size * seg_size + seg_size;
                    }
                    Err(reason) => {
                        tracing::error!(topic, queue_id, queue_offset = e.index, offset_py, %reason, "a pull skips a damaged message");
                        r.damaged.push((e.index, offset_py as u64, reason));
                    }
                }
            }
        }
        r.next_begin_offset = next;
        r.suggest_pulling_from_slave = max_offset_py - max_phy_offset_pulling > options.memory_limit as i64;
        Ok(r)
    }

    /// The bytes an entry points at: `Ok(None)` when they are not in the log (below its minimum,
    /// as Java's `getMessage` returns null), `Err` when they are not a message of that size.
    fn entry_bytes(&self, e: &RawEntry) -> Result<Option<Bytes>, String> {
        if e.physical_offset < 0 || e.size <= 0 {
            return Err(format!("entry ({}, {}) is not a message position", e.physical_offset, e.size));
        }
        let span = LogSpan { offset: e.physical_offset as u64, len: e.size as u32 };
        let bytes = match self.read(span) {
            Ok(b) => b,
            Err(StoreError::OutOfRange { offset, min, .. }) if offset < min => return Ok(None),
            Err(other) => return Err(other.to_string()),
        };
        let total = i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let magic = bytes.get(4..8).map(|m| i32::from_be_bytes([m[0], m[1], m[2], m[3]]));
        if total != e.size || magic.and_then(codec::MessageVersion::from_magic_code).is_none() {
            return Err(format!("the record at {} is not a message of {} bytes", e.physical_offset, e.size));
        }
        Ok(Some(bytes))
    }

    /// Java's `CommitLog.pickupStoreTimestamp(offset, size)`: the store timestamp of the message
    /// at `offset`, or -1 if `size` is not positive or the bytes are not in the log.
    /// As in Java, the `size` bytes must lie in the log and in one segment.
    pub fn pickup_store_timestamp(&self, offset: i64, size: i32) -> i64 {
        if offset < 0 || offset < self.min_offset() as i64 || size <= 0 {
            return -1;
        }
        let (offset, size) = (offset as u64, size as u64);
        let seg = self.shared.log.segment_size;
        let end = offset + size;
        if end > self.max_offset() || offset / seg != (end - 1) / seg {
            return -1;
        }
        let Ok(head) = self.read(LogSpan { offset, len: size.min(80) as u32 }) else {
            return -1;
        };
        store_timestamp_of(&head).unwrap_or(-1)
    }

    /// Java's `getMessageStoreTimeStamp(topic, queueId, consumeQueueOffset)`: the store time of
    /// the message at that queue offset, -1 if there is none.
    pub fn message_store_timestamp(&self, topic: &str, queue_id: i32, queue_offset: i64) -> i64 {
        let Some(cq) = self.shared.queue(topic, queue_id) else { return -1 };
        let (min, _) = cq.bounds();
        if queue_offset < min as i64 {
            return -1;
        }
        match cq.raw_at(queue_offset as u64) {
            Some(e) => self.pickup_store_timestamp(e.physical_offset, e.size),
            None => -1,
        }
    }

    /// Java's `getEarliestMessageTime(topic, queueId)`: the store time of the queue's first
    /// message, -1 if there is none.
    pub fn earliest_message_store_time(&self, topic: &str, queue_id: i32) -> i64 {
        let Some(cq) = self.shared.queue(topic, queue_id) else { return -1 };
        let (min, _) = cq.bounds();
        self.message_store_timestamp(topic, queue_id, min as i64)
    }

    /// Java's `selectOneMessageByOffset(commitLogOffset)` for `VIEW_MESSAGE_BY_ID`: the stored
    /// message at a physical offset, zero-copy, or `None` if no whole message starts there (out
    /// of the log, a BLANK record, inside a record, or lengths that do not check out; Java reads
    /// whatever size the bytes there name).
    pub fn select_one_message_by_offset(&self, offset: i64) -> Result<Option<Bytes>, StoreError> {
        let bounds = self.bounds();
        if offset < 0 || (offset as u64) < bounds.min || offset as u64 >= bounds.max {
            return Ok(None);
        }
        let offset = offset as u64;
        let Ok(head) = self.read(LogSpan { offset, len: (bounds.max - offset).min(8) as u32 }) else {
            return Ok(None);
        };
        if head.len() < 8 {
            return Ok(None);
        }
        let total = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
        let magic = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
        if total <= 0 || codec::MessageVersion::from_magic_code(magic).is_none() {
            return Ok(None);
        }
        let record = match self.read(LogSpan { offset, len: total as u32 }) {
            Ok(b) => b,
            Err(StoreError::OutOfRange { .. } | StoreError::CrossesSegment { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        // Every length and the physical offset must check out (not the body CRC: Java serves
        // the bytes as they are).
        match codec::decode(&record, Some(offset), false) {
            Ok(_) => Ok(Some(record)),
            Err(error) => {
                tracing::debug!(offset, %error, "no message at this offset");
                Ok(None)
            }
        }
    }

    /// Java's `getOffsetInQueueByTime(topic, queueId, timestamp[, boundaryType])` for
    /// `SEARCH_OFFSET_BY_TIMESTAMP`: a queue offset for a store time, found by binary search over
    /// the store times of one consume-queue file's messages, as Java picks the file and rounds
    /// ([`TimeBoundary`]). 0 for an empty or unknown queue.
    ///
    /// [`Nearest`](TimeBoundary::Nearest) is 4.9's: the file is the first whose modification
    /// time is at or after the timestamp (else the last), the answer the matching message or the
    /// nearer neighbour (an earlier message than all gives the first, a later than all the
    /// last). [`Lower`](TimeBoundary::Lower) and [`Upper`](TimeBoundary::Upper) are 5.x's: the
    /// file is picked by its first and last store times; past every message, Lower gives the
    /// end (one past the last) and Upper the last; before every message, Lower gives the start
    /// of the file (which may lie below the queue's minimum) and Upper 0; among equal times Lower
    /// gives the first and Upper the last.
    pub fn search_offset_by_timestamp(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp: i64,
        boundary: TimeBoundary,
    ) -> Result<i64, StoreError> {
        let Some(cq) = self.shared.queue(topic, queue_id) else { return Ok(0) };
        let files = cq.files();
        let file = match boundary {
            TimeBoundary::Nearest => pick_file_by_mtime(&files, timestamp),
            TimeBoundary::Lower | TimeBoundary::Upper => {
                self.pick_file_by_store_time(&cq, &files, timestamp, boundary)
            }
        };
        let Some(file) = file else { return Ok(0) };
        Ok(self.search_in_file(&cq, &file, timestamp, boundary))
    }

    fn entry_time(&self, cq: &ConsumeQueue, index: u64) -> (Option<RawEntry>, i64) {
        match cq.raw_at(index) {
            Some(e) => (Some(e), self.pickup_store_timestamp(e.physical_offset, e.size)),
            None => (None, -1),
        }
    }

    /// 5.x's `getConsumeQueueMappedFileByTime`.
    fn pick_file_by_store_time(
        &self,
        cq: &ConsumeQueue,
        files: &[QueueFile],
        timestamp: i64,
        boundary: TimeBoundary,
    ) -> Option<QueueFile> {
        let n = files.len();
        match boundary {
            TimeBoundary::Upper => files
                .iter()
                .rev()
                .find(|f| {
                    let start = self.entry_time(cq, f.start).1;
                    let start = if start > 0 { start } else { -1 };
                    start <= timestamp
                })
                .cloned(),
            _ => {
                for (i, f) in files.iter().enumerate() {
                    if i + 1 < n {
                        let stop = self.entry_time(cq, f.start + cq.entries_per_file() - 1).1;
                        let stop = if stop > 0 { stop } else { -1 };
                        if stop >= timestamp {
                            return Some(f.clone());
                        }
                    } else {
                        return Some(f.clone());
                    }
                }
                None
            }
        }
    }

    /// The binary search of one file (`binarySearchInQueueByTime`, 4.9's
    /// `getOffsetInQueueByTime`), in Java's byte positions within the file.
    fn search_in_file(
        &self,
        cq: &ConsumeQueue,
        file: &QueueFile,
        timestamp: i64,
        boundary: TimeBoundary,
    ) -> i64 {
        let from = (file.start as i64) * UNIT;
        let (min, _) = cq.bounds();
        let min_logic = min as i64 * UNIT;
        let limit = (file.end - file.start) as i64 * UNIT;
        if limit <= 0 {
            return 0;
        }
        let min_physic = self.min_offset() as i64;
        // Positions outside the file read as nothing (Java's buffer would refuse them).
        let at = |pos: i64| -> (Option<RawEntry>, i64) {
            if !(0..limit).contains(&pos) {
                return (None, -1);
            }
            self.entry_time(cq, ((from + pos) / UNIT) as u64)
        };
        let mut low = if min_logic > from { min_logic - from } else { 0 };
        let ceiling = limit - UNIT;
        let floor = low;
        let mut high = ceiling;
        if boundary != TimeBoundary::Nearest {
            if at(ceiling).1 < timestamp {
                return match boundary {
                    TimeBoundary::Lower => (from + ceiling + UNIT) / UNIT,
                    _ => (from + ceiling) / UNIT,
                };
            }
            if at(floor).1 > timestamp {
                return match boundary {
                    TimeBoundary::Lower => from / UNIT,
                    _ => 0,
                };
            }
        }
        let (mut target, mut left, mut right) = (-1i64, -1i64, -1i64);
        let (mut left_value, mut right_value) = (-1i64, -1i64);
        while high >= low {
            let mid = (low + high) / (2 * UNIT) * UNIT;
            let (e, time) = at(mid);
            if e.is_some_and(|e| e.physical_offset < min_physic) {
                low = mid + UNIT;
                left = mid;
                continue;
            }
            if time < 0 {
                return 0;
            } else if time == timestamp {
                target = mid;
                break;
            } else if time > timestamp {
                high = mid - UNIT;
                right = mid;
                right_value = time;
            } else {
                low = mid + UNIT;
                left = mid;
                left_value = time;
            }
        }
        let offset = if target != -1 {
            match boundary {
                TimeBoundary::Nearest => target,
                TimeBoundary::Lower => {
                    let mut t = target;
                    while t - UNIT >= floor && at(t - UNIT).1 == timestamp {
                        t -= UNIT;
                    }
                    t
                }
                TimeBoundary::Upper => {
                    let mut t = target;
                    while t + UNIT <= ceiling && at(t + UNIT).1 == timestamp {
                        t += UNIT;
                    }
                    t
                }
            }
        } else {
            match boundary {
                TimeBoundary::Lower => right,
                TimeBoundary::Upper => left,
                TimeBoundary::Nearest => {
                    if left_value == -1 {
                        right
                    } else if right_value == -1 {
                        left
                    } else if (timestamp - left_value).abs() > (timestamp - right_value).abs() {
                        right
                    } else {
                        left
                    }
                }
            }
        };
        (from + offset) / UNIT
    }
}

/// 4.9's `getMappedFileByTime`: the first file modified at or after `timestamp`, else the last.
fn pick_file_by_mtime(files: &[QueueFile], timestamp: i64) -> Option<QueueFile> {
    let mtime = |f: &QueueFile| {
        std::fs::metadata(&f.path)
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as i64)
    };
    files.iter().find(|f| mtime(f) >= timestamp).or(files.last()).cloned()
}

/// Java's `isTheBatchFull` (4.9's count rule `maxMsgNums <= messageTotal`; 5.x adds the
/// call's byte cap).
fn batch_full(
    o: &GetMessageOptions,
    size_py: i32,
    max_msg_nums: u32,
    max_pull_size: u64,
    r: &GetMessageResult,
    in_memory: bool,
) -> bool {
    let (total, count) = (r.buffer_total_size, r.messages.len() as u64);
    if total == 0 || count == 0 {
        return false;
    }
    if u64::from(max_msg_nums) <= count {
        return true;
    }
    let next = total + size_py.max(0) as u64;
    if o.line == QueryLine::V5 && next > max_pull_size {
        return true;
    }
    let (bytes, msgs) = if in_memory {
        (o.max_transfer_bytes_on_message_in_memory, o.max_transfer_count_on_message_in_memory)
    } else {
        (o.max_transfer_bytes_on_message_in_disk, o.max_transfer_count_on_message_in_disk)
    };
    next > bytes || count > u64::from(msgs).saturating_sub(1)
}

/// The store timestamp field of a stored message's leading bytes.
fn store_timestamp_of(head: &[u8]) -> Option<i64> {
    let flag = i32::from_be_bytes(head.get(36..40)?.try_into().ok()?);
    let born_host = if flag & sys_flag::BORNHOST_V6 == 0 { 8 } else { 20 };
    let at = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born_host;
    Some(i64::from_be_bytes(head.get(at..at + 8)?.try_into().ok()?))
}
