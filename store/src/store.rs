//! [`CommitLog`]: the store's public handle, its shared state and the write and read paths.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::thread::{JoinHandle, Thread};
use std::time::Duration;

use bytes::Bytes;
use logship_core::{
    EpochLog, FlushSettings, LogBounds, LogRead, LogSpan, LogWrite, MessageLog, Offset, PutResult, PutStatus,
};

use crate::checkpoint::{CheckpointFile, LogshipState};
use crate::codec::{self, Message, PreparedMessage, StoredMessage};
use crate::config::{FlushDiskType, StoreConfig};
use crate::consume_queue::{ConsumeQueue, CqEntry, Dispatcher, QueueRegistry};
use crate::env::StoreEnv;
use crate::epoch_file::EpochEntry;
use crate::error::{IoContext, StoreError};
use crate::flush::{Durable, FlushShared};
use crate::prealloc::Prealloc;
use crate::recovery::{self, RecoveryReport};
use crate::retention::{RetentionReport, RetentionState};
use crate::segment::{self, ActiveSegment, LogView, Segment};
use crate::sync::{lock, read};
use crate::truncate::{self, EpochState, TruncateReport, TruncateStep};

/// State guarded by the put lock (RocketMQ's `putMessageLock`).
#[derive(Debug)]
pub(crate) struct WriterState {
    pub(crate) active: Option<ActiveSegment>,
    /// Where the next replicated bytes must start: the log end, plus the bytes of a trailing
    /// record received but not complete yet. Those wait, unpublished, in the active segment
    /// until the rest arrives and the whole record is validated.
    pub(crate) accepted: u64,
    /// An offset known to start a segment of the master's log, to name the master's segment
    /// size when a BLANK record shows that it differs.
    pub(crate) master_boundary: Option<u64>,
    /// A copy of the bytes of that incomplete trailing record, `[tail_at, accepted)`, kept so
    /// that the next append validates it without reading the mapping (whose fresh pages would
    /// fault). Used only while `tail_at` is the log end and the length matches; otherwise the
    /// bytes are read from the mapping.
    pub(crate) tail: Vec<u8>,
    /// Where [`tail`](Self::tail) starts.
    pub(crate) tail_at: u64,
}

/// Why writes are refused for lack of space (see [`StoreError::DiskFull`]).
#[derive(Clone, Debug)]
pub(crate) struct SpaceShortage {
    path: PathBuf,
    needed: u64,
    available: u64,
}

/// State shared by the handle, the background threads and durability futures.
pub(crate) struct Shared {
    pub(crate) root: PathBuf,
    pub(crate) commitlog_dir: PathBuf,
    pub(crate) config: StoreConfig,
    pub(crate) env: StoreEnv,
    /// The published log, shared with the worker threads.
    pub(crate) log: Arc<LogView>,
    pub(crate) writer: Mutex<WriterState>,
    pub(crate) dispatcher: Mutex<Dispatcher>,
    pub(crate) queues: Arc<QueueRegistry>,
    pub(crate) flush: Arc<FlushShared>,
    pub(crate) checkpoint: Mutex<CheckpointFile>,
    pub(crate) prealloc: Arc<Prealloc>,
    pub(crate) retention: Arc<RetentionState>,
    pub(crate) scrub: Arc<crate::scrub::ScrubState>,
    /// Set while the last write failed to reserve space; cleared by the next write that succeeds.
    pub(crate) space_short: AtomicBool,
    pub(crate) shortage: Mutex<Option<SpaceShortage>>,
    pub(crate) closed: AtomicBool,
    pub(crate) reput_thread: OnceLock<Thread>,
    /// The reput thread is in its long idle sleep and must be woken for new bytes; while it
    /// polls (every millisecond, like RocketMQ's ReputMessageService), appends do not wake it,
    /// which keeps a thread wake-up off the slave's path from receiving bytes to acking them.
    pub(crate) reput_idle: AtomicBool,
    /// Times an append or a confirm offset woke the reput thread from its idle sleep.
    pub(crate) reput_wakeups: AtomicU64,
    /// The exclusive lock on `<root>/lock`; every segment mapping holds it too.
    pub(crate) lock_file: Arc<File>,
    /// The epoch list of controller mode and its file.
    pub(crate) epochs: Mutex<EpochState>,
    /// The confirm offset (controller mode): with `dispatch_up_to_confirm`, replicated bytes are
    /// indexed only below it. Recorded as the checkpoint's `confirmPhyOffset`. A put raises it
    /// to its end (a master indexes its own messages at once).
    pub(crate) confirm: AtomicU64,
    /// The replication-confirmed offset: the confirm offsets the HA layer set
    /// ([`CommitLog::set_confirm_offset`]), never raised by a put. A slave never truncates
    /// below it. Recorded in the checkpoint's logship block.
    pub(crate) confirmed: AtomicU64,
}

impl Shared {
    pub(crate) fn abort_path(&self) -> PathBuf {
        self.root.join("abort")
    }

    /// Writes the commit log back up to its end (see [`FlushShared::flush_log`]).
    pub(crate) fn flush_log(&self) -> Result<u64, StoreError> {
        self.flush.flush_log(&self.log)
    }

    /// Blocks until `offset` is durable or `timeout` passes.
    pub(crate) fn wait_durable(&self, offset: Offset, timeout: Duration) -> Result<bool, StoreError> {
        self.flush.wait_durable(&self.log, offset, timeout)
    }

    /// Records the durable state in the checkpoint. `cq_durable` is the consume queues' durable
    /// offset, if just measured.
    pub(crate) fn write_checkpoint(&self, clean: bool, cq_durable: Option<u64>) -> Result<(), StoreError> {
        // Everything is read under the checkpoint lock (see `adopt`).
        let mut ckpt = lock(&self.checkpoint);
        let boundary = lock(&self.flush.run).boundary;
        let end = self.log.end.load(Ordering::Acquire);
        let last = lock(&self.dispatcher).last_message;
        let mut c = ckpt.current().clone();
        let old = c.logship.unwrap_or_default();
        let state = LogshipState {
            clean,
            flushed: boundary,
            clean_end: if clean { end } else { 0 },
            min_offset: self.log.min.load(Ordering::Acquire),
            dispatched: cq_durable.unwrap_or(old.dispatched),
            confirmed: Some(self.confirmed.load(Ordering::Acquire).min(i64::MAX as u64)),
        };
        c.confirm_phy_offset = self.confirm.load(Ordering::Acquire).min(i64::MAX as u64) as i64;
        if let Some((ts, msg_end)) = last {
            // Timestamps for a Java broker's recovery: only of messages known to be durable.
            if msg_end <= boundary {
                c.physic_msg_timestamp = c.physic_msg_timestamp.max(ts);
            }
            if cq_durable.is_some_and(|d| msg_end <= d) {
                c.logics_msg_timestamp = c.logics_msg_timestamp.max(ts);
                c.index_msg_timestamp = c.logics_msg_timestamp;
            }
        }
        if c.logship == Some(state) && ckpt.current() == &c {
            return Ok(());
        }
        c.logship = Some(state);
        ckpt.write(c)
    }

    /// Flushes the log and the consume queues and writes the checkpoint.
    pub(crate) fn checkpoint_now(&self, clean: bool) -> Result<(), StoreError> {
        self.flush_log()?;
        let cq = crate::flush::flush_consume_queues(&self.log, &self.queues)?;
        self.write_checkpoint(clean, Some(cq))
    }

    /// Where dispatch of replicated bytes stops: the end of the log, or with
    /// `dispatch_up_to_confirm` the confirm offset if it is lower.
    pub(crate) fn dispatch_end(&self) -> u64 {
        let end = self.log.end.load(Ordering::Acquire);
        if self.config.dispatch_up_to_confirm { end.min(self.confirm.load(Ordering::Acquire)) } else { end }
    }

    /// Catches the consume queues up with the log (up to [`dispatch_end`](Self::dispatch_end)).
    pub(crate) fn dispatch_pending(&self, d: &mut Dispatcher) -> Result<(), StoreError> {
        let end = self.dispatch_end();
        self.dispatch_upto(d, end)
    }

    /// Dispatches every complete record before `end`.
    fn dispatch_upto(&self, d: &mut Dispatcher, end: u64) -> Result<(), StoreError> {
        let min = self.log.min.load(Ordering::Acquire);
        let result = d.dispatch(&self.log.segments, self.log.segment_size, min, end);
        self.log.dispatched.store(d.dispatched, Ordering::Release);
        result
    }

    /// Wakes the reput thread if it sleeps long; a polling reput thread finds the bytes within a
    /// millisecond by itself.
    pub(crate) fn wake_reput(&self) {
        // Pairs with the fence in `reput_thread`: either it sees the new end, or this sees that it
        // went idle (the end was stored before this fence).
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.reput_idle.load(Ordering::Relaxed) {
            if let Some(t) = self.reput_thread.get() {
                self.reput_wakeups.fetch_add(1, Ordering::Relaxed);
                t.unpark();
            }
        }
    }

    /// Makes `base` the active segment (preallocated if possible) and asks for the next one.
    fn install_segment(&self, w: &mut WriterState, base: u64) -> Result<(), StoreError> {
        debug_assert_eq!(base % self.log.segment_size, 0);
        let (map, writer) = self.prealloc.take_segment(base)?;
        let seg = Arc::new(Segment { base, map });
        self.log.segments.write().unwrap_or_else(|e| e.into_inner()).push(seg);
        // Created segments are reserved whole (`segment::create_file`).
        w.active = Some(ActiveSegment { base, writer, reserved: true });
        self.prealloc.request_segment(base + self.log.segment_size);
        tracing::debug!(base, "new commit-log segment");
        Ok(())
    }

    /// Closes the active segment at the log end: pads it with a BLANK record if a message of
    /// `len` bytes (plus the BLANK record that must fit after it) does not fit.
    fn make_room(&self, w: &mut WriterState, len: usize) -> Result<(), StoreError> {
        loop {
            if w.active.is_none() {
                let end = self.log.end.load(Ordering::Relaxed);
                self.install_segment(w, end)?;
            }
            let a = w.active.as_mut().expect("installed above");
            self.ensure_reserved(a)?;
            let remaining = a.writer.remaining();
            if len + codec::BLANK_RECORD_LEN <= remaining {
                return Ok(());
            }
            if remaining as u64 == self.log.segment_size {
                // Not even an empty segment holds it (config validation keeps this from happening).
                return Err(StoreError::CrossesSegment {
                    offset: a.base,
                    len: len as u64,
                    segment_end: a.base + self.log.segment_size,
                });
            }
            if remaining >= codec::BLANK_RECORD_LEN {
                a.writer
                    .append(&codec::blank_record(remaining))
                    .map_err(|e| StoreError::io(a.writer.file().path(), e))?;
            }
            let size = a.writer.file().len();
            a.writer.seek(size);
            a.writer.publish();
            self.log.end.store(a.base + self.log.segment_size, Ordering::Release);
            w.accepted = a.base + self.log.segment_size;
            w.active = None;
        }
    }

    /// Reserves the rest of the active segment if an earlier attempt (at open, on a full disk)
    /// failed.
    fn ensure_reserved(&self, a: &mut ActiveSegment) -> Result<(), StoreError> {
        if !a.reserved {
            let file = a.writer.file();
            file.reserve_from(a.writer.pos())
                .map_err(|e| crate::segment::reserve_error(file.path(), a.writer.remaining() as u64, e))?;
            a.reserved = true;
        }
        Ok(())
    }

    /// Records a write refused for lack of space (logged once per shortage).
    fn note_write_error(&self, e: &StoreError) {
        if let StoreError::DiskFull { path, needed, available } = e {
            let shortage = SpaceShortage { path: path.clone(), needed: *needed, available: *available };
            *lock(&self.shortage) = Some(shortage);
            if !self.space_short.swap(true, Ordering::AcqRel) {
                tracing::error!(error = %e, "disk full: refusing writes until space returns; reads go on");
            }
        }
    }

    /// A write succeeded: any space shortage is over.
    fn note_write_ok(&self) {
        if self.space_short.load(Ordering::Relaxed) && self.space_short.swap(false, Ordering::AcqRel) {
            *lock(&self.shortage) = None;
            tracing::info!("disk space is back: accepting writes");
        }
    }

    /// Drops the bytes of an incomplete replicated record (the master resends from the last
    /// record boundary after a reconnect); zeroes them so that no trace of them stays.
    pub(crate) fn drop_pending(&self, w: &mut WriterState) {
        let end = self.log.end.load(Ordering::Relaxed);
        if w.accepted > end {
            if let Some(a) = w.active.as_mut() {
                let (from, to) = ((end - a.base) as usize, (w.accepted - a.base) as usize);
                a.writer.seek(from);
                a.writer.zero(from..to);
            }
        }
        w.accepted = end;
        w.tail.clear();
    }

    /// Adopts `offset` as the first offset of an empty log.
    fn adopt(&self, w: &mut WriterState, offset: u64) -> Result<(), StoreError> {
        let base = offset - offset % self.log.segment_size;
        {
            // Under the checkpoint lock, so a concurrent checkpoint write sees all of the new start
            // or none of it; and recorded durably before any byte lands, so recovery finds it.
            let mut ckpt = lock(&self.checkpoint);
            self.log.min.store(offset, Ordering::Release);
            self.log.end.store(offset, Ordering::Release);
            w.accepted = offset;
            w.master_boundary = (offset == 0).then_some(0);
            self.log.flushed.store(offset, Ordering::Release);
            lock(&self.dispatcher).dispatched = offset;
            self.log.dispatched.store(offset, Ordering::Release);
            self.flush.reset_boundary(offset);
            let mut c = ckpt.current().clone();
            let mut state = c.logship.unwrap_or_default();
            state.min_offset = offset;
            state.flushed = offset;
            state.dispatched = offset;
            state.clean = false;
            c.logship = Some(state);
            ckpt.write(c)?;
        }
        self.install_segment(w, base)?;
        let a = w.active.as_mut().expect("installed above");
        a.writer.seek((offset - base) as usize);
        a.writer.publish();
        tracing::info!(offset, "empty log adopted its first offset");
        Ok(())
    }

    fn put(&self, message: Message) -> PutResult {
        let prepared = match PreparedMessage::with_delays(
            message,
            self.config.store_host,
            self.config.max_message_size as usize,
            &self.config.schedule_delays_ms,
        ) {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(error = %e, "message refused");
                return PutResult::refused(e.put_status());
            }
        };
        if self.closed.load(Ordering::Acquire) || self.retention.disk_full.load(Ordering::Acquire) {
            return PutResult::refused(PutStatus::ServiceNotAvailable);
        }
        let mut w = lock(&self.writer);
        if self.closed.load(Ordering::Acquire) {
            return PutResult::refused(PutStatus::ServiceNotAvailable);
        }
        let mut d = lock(&self.dispatcher);
        // Replicated bytes may precede this put (a slave turned master): index them first, so the
        // queue offsets continue from them. A put confirms them (this store is the master now).
        if let Err(e) = self.dispatch_upto(&mut d, self.log.end.load(Ordering::Acquire)) {
            if matches!(e, StoreError::DiskFull { .. }) {
                self.note_write_error(&e);
                return PutResult::refused(PutStatus::ServiceNotAvailable);
            }
            tracing::error!(error = %e, "consume-queue dispatch failed; refusing the put");
            return PutResult::refused(PutStatus::UnknownError);
        }
        let end = self.log.end.load(Ordering::Relaxed);
        if d.dispatched != end || d.error.is_some() {
            tracing::warn!(
                end,
                dispatched = d.dispatched,
                "the log ends inside an incomplete or invalid record; refusing puts"
            );
            return PutResult::refused(PutStatus::ServiceNotAvailable);
        }
        let (topic, queue_id) = (prepared.topic(), prepared.queue_id());
        let queue_offset = if prepared.is_dispatched() { d.next_queue_offset(topic, queue_id) } else { 0 };
        let len = prepared.len();
        if len as u64 + codec::BLANK_RECORD_LEN as u64 > self.log.segment_size {
            tracing::debug!(len, "a batch larger than a segment; refused");
            return PutResult::refused(PutStatus::MessageIllegal);
        }
        // A slave turned master may hold an incomplete replicated record: it never will be.
        self.drop_pending(&mut w);
        if let Err(e) = self.make_room(&mut w, len) {
            if matches!(e, StoreError::DiskFull { .. }) {
                self.note_write_error(&e);
                return PutResult::refused(PutStatus::ServiceNotAvailable);
            }
            tracing::error!(error = %e, "cannot open a commit-log segment; refusing the put");
            return PutResult::refused(PutStatus::UnknownError);
        }
        let a = w.active.as_mut().expect("make_room leaves an active segment");
        let offset = a.base + a.writer.pos() as u64;
        let store_timestamp = self.env.clock.now_millis();
        prepared.write(a.writer.stage(len), queue_offset as i64, offset as i64, store_timestamp);
        if let Err(e) = a.writer.append_staged(len) {
            let e = StoreError::io(a.writer.file().path(), e);
            tracing::error!(error = %e, "cannot write to the commit log; refusing the put");
            return PutResult::refused(PutStatus::UnknownError);
        }
        a.writer.publish();
        let new_end = offset + len as u64;
        self.log.end.store(new_end, Ordering::Release);
        w.accepted = new_end;
        drop(w);
        self.note_write_ok();
        // Index it directly (the dispatcher would parse exactly these fields back).
        d.dispatched = new_end;
        if prepared.is_dispatched() {
            let mut at = offset;
            for (i, record_len) in prepared.record_lens().enumerate() {
                let tags = prepared.tags_code(i, store_timestamp);
                let entry = crate::consume_queue::NewEntry {
                    physical_offset: at,
                    size: record_len as u32,
                    tags_code: tags,
                    store_timestamp,
                };
                if let Err(e) = d.put_entry(topic, queue_id, queue_offset + i as u64, entry) {
                    tracing::error!(error = %e, offset = at, "consume-queue write failed; will retry from the log");
                    d.dispatched = at;
                    break;
                }
                at += record_len as u64;
            }
        }
        d.last_message = Some((store_timestamp, new_end));
        if self.config.dispatch_up_to_confirm {
            self.confirm.fetch_max(new_end, Ordering::AcqRel);
        }
        self.log.dispatched.store(d.dispatched, Ordering::Release);
        drop(d);
        let msg_id = if prepared.count() == 1 {
            codec::offset_msg_id(self.config.store_host, offset)
        } else {
            // A batch: every message's id, comma-separated (Java's AppendMessageResult).
            let mut at = offset;
            let ids: Vec<String> = prepared
                .record_lens()
                .map(|l| {
                    let id = codec::offset_msg_id(self.config.store_host, at);
                    at += l as u64;
                    id
                })
                .collect();
            ids.join(",")
        };
        PutResult { status: PutStatus::PutOk, offset, wrote_bytes: len as u32, queue_offset, msg_id }
    }

    fn append_at(&self, offset: Offset, data: &[u8]) -> Result<Offset, StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        let mut w = lock(&self.writer);
        let empty = w.active.is_none() && read(&self.log.segments).len() == 0;
        if empty {
            self.adopt(&mut w, offset)?;
        } else {
            let end = self.log.end.load(Ordering::Relaxed);
            if offset == end && w.accepted > end {
                // A new stream from the last record boundary: the incomplete record goes.
                self.drop_pending(&mut w);
            } else if offset != w.accepted {
                return Err(StoreError::OffsetMismatch { expected: w.accepted, got: offset });
            }
        }
        if data.is_empty() {
            return Ok(self.log.end.load(Ordering::Relaxed));
        }
        if w.active.as_ref().is_none_or(|a| a.writer.remaining() == 0) {
            w.active = None;
            if let Err(e) = self.install_segment(&mut w, offset) {
                self.note_write_error(&e);
                return Err(e);
            }
        }
        let master_boundary = w.master_boundary;
        let (mut tail, tail_at) = (std::mem::take(&mut w.tail), w.tail_at);
        let a = w.active.as_mut().expect("installed above");
        let seg_end = a.base + self.log.segment_size;
        if data.len() > a.writer.remaining() {
            // A master's frame never spans two of its segments: its segments end elsewhere.
            let e = StoreError::SegmentSizeMismatch {
                offset,
                local_segment_size: self.log.segment_size,
                master_segment_end: offset + data.len() as u64,
                master_segment_size: None,
            };
            // Returned to the replication service, which logs it once.
            tracing::debug!(error = %e, "refusing replicated bytes");
            self.drop_pending(&mut w);
            return Err(e);
        }
        if let Err(e) = self.ensure_reserved(a) {
            self.note_write_error(&e);
            return Err(e);
        }
        if let Err(e) = a.writer.append(data) {
            let e = StoreError::io(a.writer.file().path(), e);
            // Returned to the replication service, which logs it once.
            tracing::debug!(error = %e, "cannot write replicated bytes to the commit log");
            return Err(e);
        }
        let written = offset + data.len() as u64;
        let end = self.log.end.load(Ordering::Relaxed);
        // Validated from `data` (and the unpublished bytes of a record begun by an earlier
        // append), not through the mapping: pages just written through the descriptor are not
        // mapped yet, and reading them there took a page fault per append on the ack path.
        let pending_len = (offset - end) as usize;
        let from_tail = tail_at == end && tail.len() == pending_len;
        if !from_tail {
            tail.clear();
            tail.extend_from_slice(&a.writer.peek()[(end - a.base) as usize..(offset - a.base) as usize]);
        }
        let (good, error) = validate_appended(
            &tail,
            end,
            data,
            SegmentSpan { base: a.base, size: self.log.segment_size },
            master_boundary,
            self.config.max_message_size,
        );
        // The next incomplete record's bytes: `[good, written)`.
        if error.is_some() {
            tail.clear();
        } else if good >= offset {
            tail.clear();
            tail.extend_from_slice(&data[(good - offset) as usize..]);
        } else {
            // No record ended in `data` (good is still the log end): all of it is pending.
            tail.extend_from_slice(data);
        }
        w.tail = tail;
        w.tail_at = good;
        let a = w.active.as_mut().expect("installed above");
        if error.is_some() {
            // Nothing from the bad record on is kept: zero it and write from there next.
            let (from, to) = ((good - a.base) as usize, (written - a.base) as usize);
            a.writer.zero(from..to);
            a.writer.publish_upto(from);
            a.writer.seek(from);
            w.accepted = good;
        } else {
            a.writer.publish_upto((good - a.base) as usize);
            w.accepted = written;
        }
        if good == seg_end {
            w.master_boundary = Some(seg_end);
        }
        if good > end {
            self.log.end.store(good, Ordering::Release);
        }
        drop(w);
        if good > end {
            self.wake_reput();
        }
        match error {
            Some(e) => {
                // Returned to the replication service, which logs it once.
                tracing::debug!(error = %e, "refusing replicated bytes that are not valid records");
                Err(e)
            }
            None => {
                self.note_write_ok();
                Ok(good)
            }
        }
    }

    pub(crate) fn bounds(&self) -> LogBounds {
        self.log.bounds()
    }

    fn read_span(&self, span: LogSpan) -> Result<Bytes, StoreError> {
        let LogBounds { min, max } = self.bounds();
        let end = span.end();
        if span.offset < min || end > max {
            return Err(StoreError::OutOfRange { offset: span.offset, end, min, max });
        }
        if span.len == 0 {
            return Ok(Bytes::new());
        }
        let seg = read(&self.log.segments).find(span.offset).cloned();
        let Some(seg) = seg else {
            return Err(StoreError::OutOfRange { offset: span.offset, end, min: self.bounds().min, max });
        };
        let seg_end = seg.base + self.log.segment_size;
        if end > seg_end {
            return Err(StoreError::CrossesSegment {
                offset: span.offset,
                len: u64::from(span.len),
                segment_end: seg_end,
            });
        }
        let range = (span.offset - seg.base) as usize..(end - seg.base) as usize;
        match seg.map.span(range) {
            Some(s) => Ok(Bytes::from_owner(s)),
            None => Err(StoreError::OutOfRange { offset: span.offset, end, min, max }),
        }
    }

    fn read_message(&self, offset: Offset) -> Result<StoredMessage, StoreError> {
        let (record, corrupt) = self.read_record(offset)?;
        codec::decode(&record, Some(offset), true).map_err(corrupt)
    }

    /// The bytes of the message record at `offset` (its total size checked against the log),
    /// and how to report it corrupt.
    pub(crate) fn read_record(
        &self,
        offset: Offset,
    ) -> Result<(Bytes, impl FnOnce(codec::RecordError) -> StoreError + use<>), StoreError> {
        let LogBounds { min, max } = self.bounds();
        let out_of_range = |end| StoreError::OutOfRange { offset, end, min, max };
        if offset < min || offset >= max {
            return Err(out_of_range(offset + 1));
        }
        let seg = read(&self.log.segments).find(offset).cloned().ok_or_else(|| out_of_range(offset + 1))?;
        let limit = max.min(seg.base + self.log.segment_size);
        let header = self.read_span(LogSpan { offset, len: (limit - offset).min(8) as u32 })?;
        if header.len() == 8
            && i32::from_be_bytes([header[4], header[5], header[6], header[7]]) == codec::BLANK_MAGIC_CODE
        {
            return Err(StoreError::NotAMessage { offset });
        }
        let total = if header.len() >= 4 {
            i32::from_be_bytes([header[0], header[1], header[2], header[3]])
        } else {
            0
        };
        let available = limit - offset;
        let bad_size = if total <= 0 || total as u64 > available {
            Some(if total > 0 && offset + total as u64 <= seg.base + self.log.segment_size {
                codec::RecordError::Truncated { total: total as usize, available: available as usize }
            } else {
                codec::RecordError::BadTotalSize { total, remaining: available as usize }
            })
        } else {
            None
        };
        // The segment's path is copied only for an error.
        let corrupt = move |reason| StoreError::Corrupt { segment: seg.path().to_path_buf(), offset, reason };
        if let Some(reason) = bad_size {
            return Err(corrupt(reason));
        }
        let record = self.read_span(LogSpan { offset, len: total as u32 })?;
        Ok((record, corrupt))
    }

    /// Whether a record starts at `offset`: walks the size fields of the records of its
    /// segment from the segment's start. The min offset and the end are boundaries.
    pub(crate) fn is_record_boundary(&self, offset: Offset) -> Result<bool, StoreError> {
        let LogBounds { min, max } = self.bounds();
        if offset < min || offset > max {
            return Err(StoreError::OutOfRange { offset, end: offset, min, max });
        }
        if offset == min || offset == max {
            return Ok(true);
        }
        let seg = read(&self.log.segments).find(offset).cloned();
        let Some(seg) = seg else { return Err(StoreError::OutOfRange { offset, end: offset, min, max }) };
        // Retention keeps whole segments, so the walk starts at a record even in the first one.
        let start = seg.base.max(min);
        if offset == start {
            return Ok(true);
        }
        let prefix = self.read_span(LogSpan { offset: start, len: (offset - start) as u32 })?;
        let seg_end = seg.base + self.log.segment_size;
        let mut at = 0usize;
        while at < prefix.len() {
            let Some(size) = prefix.get(at..at + 4) else { return Ok(false) };
            let total = i32::from_be_bytes([size[0], size[1], size[2], size[3]]);
            let remaining = (seg_end - start) as usize - at;
            if total <= 0 || total as usize > remaining {
                let reason = codec::RecordError::BadTotalSize { total, remaining };
                let offset = start + at as u64;
                return Err(StoreError::Corrupt { segment: seg.path().to_path_buf(), offset, reason });
            }
            at += total as usize;
        }
        Ok(at == prefix.len())
    }

    pub(crate) fn queue(&self, topic: &str, queue_id: i32) -> Option<Arc<ConsumeQueue>> {
        read(&self.queues).get(topic).and_then(|q| q.get(&queue_id)).cloned()
    }
}

/// Where a segment of the log lies: its first offset and its size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct SegmentSpan {
    pub(crate) base: u64,
    pub(crate) size: u64,
}

/// [`validate_replicated`] of the bytes `pending ++ data`, which start at a record boundary:
/// `pending` are the bytes of an incomplete record that earlier appends left (possibly none),
/// `data` the bytes just appended after them. Only the record that spans both is copied (into
/// one buffer, to be parsed whole); every other record is read straight from `data`.
pub(crate) fn validate_appended(
    pending: &[u8],
    from: u64,
    data: &[u8],
    seg: SegmentSpan,
    master_boundary: Option<u64>,
    max_message_size: u32,
) -> (u64, Option<StoreError>) {
    let validate = |window: &[u8], window_start: u64, from: u64| {
        validate_replicated(window, window_start, seg, from, master_boundary, max_message_size)
    };
    let data_start = from + pending.len() as u64;
    if pending.is_empty() {
        return validate(data, data_start, from);
    }
    // The spanning record's size field, if all four bytes are here.
    let mut size = [0u8; 4];
    let mut have = 0;
    for (slot, byte) in size.iter_mut().zip(pending.iter().chain(data)) {
        *slot = *byte;
        have += 1;
    }
    let total = i32::from_be_bytes(size);
    let available = pending.len() + data.len();
    let head_len = if have < 4 || total <= 0 || total as usize <= pending.len() {
        // No plausible size (too few bytes, padding before the segment end): all of it, as
        // one window. Rare and short.
        available
    } else if total as usize > available || (total as usize) < codec::BLANK_RECORD_LEN {
        // Still incomplete, or too short for any record: its first bytes decide whether it is
        // invalid already (a window of `total` bytes would read as a record cut short).
        available.min(codec::BLANK_RECORD_LEN)
    } else {
        total as usize
    };
    let mut head = Vec::with_capacity(head_len);
    head.extend_from_slice(&pending[..head_len.min(pending.len())]);
    head.extend_from_slice(&data[..head_len.saturating_sub(pending.len())]);
    let head_end = from + head_len as u64;
    let (good, error) = validate(&head, from, from);
    if error.is_some() || good < head_end || head_len == available {
        return (good, error);
    }
    validate(&data[head_len - pending.len()..], head_end, head_end)
}

/// Walks the replicated records of one segment from `from` (a record boundary) to the end of
/// `window`, as recovery will (magic, sizes, physical offset, topic, body CRC, and a BLANK record
/// ending exactly at the segment end). `window` holds the bytes from offset `window_start` (at
/// most `from`) on, inside the segment `seg`. Returns the end of the last complete valid record
/// and the error of the first invalid one; a trailing incomplete record is no error (its rest
/// may still arrive).
pub(crate) fn validate_replicated(
    window: &[u8],
    window_start: u64,
    seg: SegmentSpan,
    from: u64,
    master_boundary: Option<u64>,
    max_message_size: u32,
) -> (u64, Option<StoreError>) {
    let SegmentSpan { base, size: segment_size } = seg;
    let seg_end = base + segment_size;
    let to = window_start + window.len() as u64;
    let checks = codec::Checks { crc: true, zero_suffix: false };
    let mut pos = from;
    while pos < to {
        let rel = (pos - window_start) as usize;
        let remaining = (seg_end - pos) as usize;
        if remaining < codec::BLANK_RECORD_LEN {
            // Too small for a record: padding, once all of it is here.
            if to < seg_end {
                break;
            }
            pos = seg_end;
            continue;
        }
        match codec::parse_record(&window[rel..], remaining, Some(pos), checks) {
            codec::Record::Message(v) => pos += v.total as u64,
            codec::Record::Blank { len } if pos + len as u64 <= to => pos += len as u64,
            codec::Record::Blank { .. } | codec::Record::Incomplete => break,
            codec::Record::Invalid { error } => {
                let e = match error {
                    codec::RecordError::BadBlank { declared, .. } if declared > 0 => {
                        let master_end = pos + declared as u64;
                        StoreError::SegmentSizeMismatch {
                            offset: pos,
                            local_segment_size: segment_size,
                            master_segment_end: master_end,
                            master_segment_size: master_boundary
                                .filter(|&b| b < master_end)
                                .map(|b| master_end - b),
                        }
                    }
                    // A message with a valid header that would cross this segment's end: the
                    // master's segment goes on past it.
                    codec::RecordError::BadTotalSize { total, remaining }
                        if total as u64 > remaining as u64 && total as u32 <= max_message_size =>
                    {
                        StoreError::SegmentSizeMismatch {
                            offset: pos,
                            local_segment_size: segment_size,
                            master_segment_end: pos + total as u64,
                            master_segment_size: None,
                        }
                    }
                    reason => StoreError::InvalidReplicatedRecord { offset: pos, reason },
                };
                return (pos, Some(e));
            }
        }
    }
    (pos.min(to), None)
}

/// What [`CommitLog::read_queue_messages_checked`] returns: the messages that passed their
/// checks, in queue order, and the ones that did not.
#[derive(Debug)]
#[non_exhaustive]
pub struct QueueRead {
    /// The good messages.
    pub messages: Vec<StoredMessage>,
    /// The damaged ones, in queue order.
    pub bad: Vec<BadMessage>,
}

/// A message a read found damaged.
#[derive(Debug)]
#[non_exhaustive]
pub struct BadMessage {
    /// Its consume-queue offset.
    pub queue_offset: u64,
    /// Its physical offset in the commit log.
    pub physical_offset: u64,
    /// What is wrong with it ([`StoreError::Corrupt`] names the segment and the reason).
    pub error: StoreError,
}

/// What [`CommitLog::status`] reports.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct StoreStatus {
    /// The oldest offset held (moves forward with retention).
    pub min_offset: Offset,
    /// The end of the log.
    pub max_offset: Offset,
    /// One past the last durable byte.
    pub flushed_offset: Offset,
    /// Every record before this offset is indexed in the consume queues.
    pub dispatched_offset: Offset,
    /// Number of segment files.
    pub segments: usize,
    /// The disk usage measured by the last retention round.
    pub disk_used_ratio: Option<f64>,
    /// Puts are refused because the disk is above `disk_space_warning_level_ratio`.
    pub disk_full: bool,
    /// Flushes of the commit log so far (each may serve many waiters).
    pub flush_count: u64,
    /// Times a write woke the consume-queue dispatch (reput) thread from its idle sleep; while
    /// bytes keep arriving it polls and writes need not wake it.
    pub reput_wakeups: u64,
    /// Where consume-queue dispatch stopped on an invalid record, and why.
    pub dispatch_error: Option<(Offset, String)>,
    /// The durable message boundary recorded in the checkpoint.
    pub checkpoint_flushed: Offset,
    /// The offset up to which the checkpoint records the consume queues as durable.
    pub checkpoint_dispatched: Offset,
    /// The background thread is creating (and warming) the next segment.
    pub preallocating: bool,
    /// Segments deleted before they expired (forced retention) since open.
    pub forced_deleted_segments: u64,
    /// Bytes of log deleted before they expired (forced retention) since open.
    pub forced_deleted_bytes: u64,
    /// The retention floor in force ([`CommitLog::set_retention_floor`]), if any.
    pub retention_floor: Option<Offset>,
    /// The background scrub's progress and findings.
    pub scrub: crate::scrub::ScrubStatus,
    /// Why writes are refused for lack of disk right now ([`CommitLog::write_refusal`]'s
    /// message: the file and the bytes it needs, or the usage above the limit), if they are.
    pub write_refused: Option<String>,
    /// The confirm offset ([`CommitLog::set_confirm_offset`]; the checkpoint's
    /// `confirmPhyOffset`). With `dispatch_up_to_confirm`, replicated bytes are indexed only
    /// below it.
    pub confirm_offset: Offset,
}

/// A RocketMQ-compatible commit log: the store of one broker. See the crate docs for the layout,
/// the threads and the durability guarantees.
///
/// All methods take `&self`; share a `CommitLog` through an `Arc`. Dropping it shuts it down
/// cleanly (as [`shutdown`](Self::shutdown) does, logging any error).
pub struct CommitLog {
    pub(crate) shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    report: RecoveryReport,
    /// Truncations since open (see [`truncations`](Self::truncations)).
    truncations: AtomicU64,
}

impl std::fmt::Debug for CommitLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitLog")
            .field("root", &self.shared.root)
            .field("bounds", &self.shared.bounds())
            .finish_non_exhaustive()
    }
}

impl CommitLog {
    /// Opens (creating if needed) the store under `root` with the system clock and disk.
    pub fn open(root: impl AsRef<Path>, config: StoreConfig) -> Result<Self, StoreError> {
        Self::open_with(root, config, StoreEnv::default())
    }

    /// Opens the store with an injected clock and disk-usage source.
    ///
    /// Opening takes an exclusive lock on `<root>/lock`, recovers the log (at once after a clean
    /// shutdown; after a crash, by scanning from the last checkpointed boundary and truncating
    /// a torn tail durably), rebuilds or trims the consume queues, creates the `abort` marker and
    /// starts the background threads.
    pub fn open_with(root: impl AsRef<Path>, config: StoreConfig, env: StoreEnv) -> Result<Self, StoreError> {
        config.validate()?;
        let recovered = recovery::recover(root.as_ref(), &config)?;
        // Recovery dispatched everything complete: the dispatched offset is the last boundary.
        let boundary = recovered.dispatcher.dispatched;
        let view = Arc::new(LogView {
            segment_size: config.mapped_file_size_commit_log,
            segments: RwLock::new(recovered.segments),
            end: AtomicU64::new(recovered.end),
            min: AtomicU64::new(recovered.min),
            flushed: AtomicU64::new(recovered.end),
            dispatched: AtomicU64::new(boundary),
            stop: AtomicBool::new(false),
        });
        let retention = Arc::new(RetentionState::new(
            config.clone(),
            env.clone(),
            recovered.commitlog_dir.clone(),
            Arc::clone(&view),
            Arc::clone(&recovered.queues),
        ));
        let shared = Arc::new(Shared {
            root: root.as_ref().to_path_buf(),
            commitlog_dir: recovered.commitlog_dir.clone(),
            log: Arc::clone(&view),
            writer: Mutex::new(WriterState {
                active: recovered.active,
                accepted: recovered.end,
                tail: Vec::new(),
                tail_at: recovered.end,
                // Segments agreed with the master's so far: the one holding the end starts one.
                master_boundary: Some(recovered.end - recovered.end % config.mapped_file_size_commit_log),
            }),
            dispatcher: Mutex::new(recovered.dispatcher),
            queues: recovered.queues,
            flush: Arc::new(FlushShared::new(boundary)),
            checkpoint: Mutex::new(recovered.checkpoint),
            prealloc: Arc::new(Prealloc::new(
                recovered.commitlog_dir.clone(),
                config.mapped_file_size_commit_log,
                Arc::clone(&recovered.lock_file),
                config.warm_mapped_file_enable,
            )),
            retention,
            scrub: Arc::default(),
            space_short: AtomicBool::new(false),
            shortage: Mutex::new(None),
            closed: AtomicBool::new(false),
            reput_thread: OnceLock::new(),
            // The reput thread starts polling; it marks itself idle when it stops.
            reput_idle: AtomicBool::new(false),
            reput_wakeups: AtomicU64::new(0),
            lock_file: recovered.lock_file,
            epochs: Mutex::new(recovered.epochs),
            confirm: AtomicU64::new(recovered.confirm),
            confirmed: AtomicU64::new(recovered.confirmed),
            config,
            env,
        });
        let log = Self {
            shared,
            threads: Mutex::new(Vec::new()),
            report: recovered.report,
            truncations: AtomicU64::new(0),
        };
        // Each worker thread gets the narrow state it needs, never the commit log itself.
        let sh = &log.shared;
        type Service = (&'static str, Box<dyn FnOnce() + Send>);
        let services: [Service; 5] = [
            ("logship-flush", {
                let (f, view, queues, s) =
                    (Arc::clone(&sh.flush), Arc::clone(&sh.log), Arc::clone(&sh.queues), Arc::clone(sh));
                let cfg = sh.config.clone();
                Box::new(move || {
                    crate::flush::flush_thread(f, view, queues, cfg, move |cq| s.write_checkpoint(false, cq))
                })
            }),
            ("logship-reput", {
                let s = Arc::clone(sh);
                Box::new(move || reput_thread(s))
            }),
            ("logship-prealloc", {
                let (p, view) = (Arc::clone(&sh.prealloc), Arc::clone(&sh.log));
                Box::new(move || crate::prealloc::prealloc_thread(p, view))
            }),
            ("logship-retention", {
                let (r, s) = (Arc::clone(&sh.retention), Arc::clone(sh));
                Box::new(move || {
                    crate::retention::retention_thread(r, move || s.write_checkpoint(false, None))
                })
            }),
            ("logship-scrub", {
                let (view, scrub) = (Arc::clone(&sh.log), Arc::clone(&sh.scrub));
                let cfg = crate::scrub::ScrubConfig {
                    rate: sh.config.scrub_bytes_per_second,
                    start_delay: sh.config.scrub_start_delay,
                    interval: sh.config.scrub_interval,
                };
                Box::new(move || crate::scrub::scrub_thread(view, scrub, cfg))
            }),
        ];
        for (name, body) in services {
            // On failure, dropping `log` stops the threads already started and shuts down.
            let handle =
                std::thread::Builder::new().name(name.to_string()).spawn(body).at(&log.shared.root)?;
            if name == "logship-reput" {
                let _ = log.shared.reput_thread.set(handle.thread().clone());
            }
            lock(&log.threads).push(handle);
        }
        let shared = &log.shared;
        shared.retention.measure_disk();
        {
            let w = lock(&shared.writer);
            match &w.active {
                Some(a) => shared.prealloc.request_segment(a.base + shared.log.segment_size),
                // The log ends at a segment end: the next write starts the next segment.
                None if read(&shared.log.segments).len() > 0 => {
                    shared.prealloc.request_segment(shared.log.end.load(Ordering::Acquire))
                }
                None => {}
            }
        }
        tracing::info!(root = %shared.root.display(), min = recovered.min, end = recovered.end, kind = log.report.kind.name(), "store open");
        Ok(log)
    }

    /// What recovery found and did when the store was opened.
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.report
    }

    /// The configuration the store runs with.
    pub fn config(&self) -> &StoreConfig {
        &self.shared.config
    }

    /// The readable range `[min, max)`.
    pub fn bounds(&self) -> LogBounds {
        self.shared.bounds()
    }

    /// The oldest offset held (RocketMQ `getMinPhyOffset`).
    pub fn min_offset(&self) -> Offset {
        self.bounds().min
    }

    /// The end of the log (RocketMQ `getMaxPhyOffset`).
    pub fn max_offset(&self) -> Offset {
        self.shared.log.end.load(Ordering::Acquire)
    }

    /// One past the last durable byte.
    pub fn flushed_offset(&self) -> Offset {
        self.shared.log.flushed.load(Ordering::Acquire)
    }

    /// Appends a message (master path) without waiting for a flush; see [`MessageLog::put`].
    pub fn put(&self, message: Message) -> PutResult {
        self.shared.put(message)
    }

    /// RocketMQ's `putMessage`: appends a message and, under `SYNC_FLUSH`, waits up to
    /// `sync_flush_timeout` for it to be durable (`PutOk`) or returns `FlushDiskTimeout` (the
    /// message is stored either way). Under `ASYNC_FLUSH` it returns at once. Blocks the thread;
    /// async callers use [`put`](Self::put) and [`durable`](MessageLog::durable) instead.
    pub fn put_and_flush(&self, message: Message) -> PutResult {
        let mut result = self.put(message);
        if result.status == PutStatus::PutOk && self.shared.config.flush_disk_type == FlushDiskType::SyncFlush
        {
            match self.wait_durable(result.end(), self.shared.config.sync_flush_timeout) {
                Ok(true) => {}
                Ok(false) => result.status = PutStatus::FlushDiskTimeout,
                Err(e) => {
                    tracing::error!(error = %e, "flush failed");
                    result.status = PutStatus::FlushDiskTimeout;
                }
            }
        }
        result
    }

    /// Blocks until every byte before `offset` is durable (`Ok(true)`), or `timeout` passes
    /// (`Ok(false)`). Requests a flush at once; concurrent waiters share it.
    pub fn wait_durable(&self, offset: Offset, timeout: Duration) -> Result<bool, StoreError> {
        self.shared.wait_durable(offset, timeout)
    }

    /// Stores replicated bytes at `offset` (slave path); see [`LogWrite::append_at`].
    pub fn append_at(&self, offset: Offset, data: &[u8]) -> Result<Offset, StoreError> {
        self.shared.append_at(offset, data)
    }

    /// The bytes of `span`, zero-copy; see [`LogRead::read`].
    ///
    /// The returned `Bytes` keeps its segment mapped (even if retention deletes the file) and
    /// the store's directory locked: the store cannot be reopened while it is alive.
    pub fn read(&self, span: LogSpan) -> Result<Bytes, StoreError> {
        self.shared.read_span(span)
    }

    /// Decodes the message at `offset`, checking its lengths, physical offset and body CRC.
    /// The body is a zero-copy span (see [`read`](Self::read)).
    pub fn read_message(&self, offset: Offset) -> Result<StoredMessage, StoreError> {
        self.shared.read_message(offset)
    }

    /// Whether a record starts at `offset`; see [`LogRead::is_record_boundary`].
    pub fn is_record_boundary(&self, offset: Offset) -> Result<bool, StoreError> {
        self.shared.is_record_boundary(offset)
    }

    /// `[min, max)` queue offsets of a consume queue (`(0, 0)` for a queue that does not exist).
    pub fn queue_bounds(&self, topic: &str, queue_id: i32) -> (u64, u64) {
        self.shared.queue(topic, queue_id).map_or((0, 0), |q| q.bounds())
    }

    /// Up to `max_count` consume-queue entries of `(topic, queue_id)` from `queue_offset`
    /// (RocketMQ `getMessage`'s index walk). Blank padding entries are skipped.
    pub fn read_queue(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: u64,
        max_count: usize,
    ) -> Result<Vec<CqEntry>, StoreError> {
        match self.shared.queue(topic, queue_id) {
            Some(q) => q.read(queue_offset, max_count),
            None if queue_offset == 0 => Ok(Vec::new()),
            None => Err(StoreError::QueueOffsetOutOfRange {
                topic: topic.to_string(),
                queue_id,
                offset: queue_offset,
                min: 0,
                max: 0,
            }),
        }
    }

    /// Up to `max_count` messages of `(topic, queue_id)` from `queue_offset`, read through the
    /// consume queue and decoded from the log.
    pub fn read_queue_messages(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: u64,
        max_count: usize,
    ) -> Result<Vec<StoredMessage>, StoreError> {
        self.read_queue(topic, queue_id, queue_offset, max_count)?
            .into_iter()
            .map(|e| self.read_message(e.physical_offset))
            .collect()
    }

    /// Like [`read_queue_messages`](Self::read_queue_messages), but a message that fails its
    /// checks (a flipped byte, a bad CRC) does not fail the batch: the good messages around it
    /// are returned and the bad one is flagged with its offsets and error. For pulls, so that
    /// one damaged message does not hide every message near it.
    pub fn read_queue_messages_checked(
        &self,
        topic: &str,
        queue_id: i32,
        queue_offset: u64,
        max_count: usize,
    ) -> Result<QueueRead, StoreError> {
        let mut out = QueueRead { messages: Vec::new(), bad: Vec::new() };
        for e in self.read_queue(topic, queue_id, queue_offset, max_count)? {
            match self.read_message(e.physical_offset) {
                Ok(m) => out.messages.push(m),
                Err(error @ (StoreError::Corrupt { .. } | StoreError::NotAMessage { .. })) => {
                    tracing::error!(%error, queue_offset = e.queue_offset, "skipping a damaged message in a pull");
                    out.bad.push(BadMessage {
                        queue_offset: e.queue_offset,
                        physical_offset: e.physical_offset,
                        error,
                    });
                }
                Err(other) => return Err(other),
            }
        }
        Ok(out)
    }

    /// Raises the confirm offset (a slave in controller mode: `min(the master's confirm
    /// offset, the local end)`, or any value; the store never indexes past its end). With
    /// [`dispatch_up_to_confirm`](StoreConfig::dispatch_up_to_confirm), replicated messages
    /// are indexed into the consume queues only below it. Monotonic: a lower value changes
    /// nothing; only [`truncate_to`](Self::truncate_to) lowers it (to the cut). Recorded in the
    /// checkpoint (`confirmPhyOffset`) at the next checkpoint; after a crash, dispatch resumes
    /// below the recorded value until a new one is set. Returns the confirm offset in force.
    ///
    /// It also raises the replication-confirmed offset ([`confirmed_offset`](Self::confirmed_offset)),
    /// which puts never raise.
    pub fn set_confirm_offset(&self, offset: Offset) -> Offset {
        let s = &self.shared;
        s.confirmed.fetch_max(offset.min(s.log.end.load(Ordering::Acquire)), Ordering::AcqRel);
        let old = s.confirm.fetch_max(offset, Ordering::AcqRel);
        if offset > old {
            s.wake_reput();
        }
        old.max(offset)
    }

    /// The replication-confirmed offset of controller mode: the highest confirm offset the HA
    /// layer set ([`set_confirm_offset`](Self::set_confirm_offset)) within the log, which local
    /// puts never raise, kept in the checkpoint. Lowered only by a truncation.
    pub fn confirmed_offset(&self) -> Offset {
        self.shared.confirmed.load(Ordering::Acquire)
    }

    /// The epoch list of controller mode (`epochFileCheckpoint`), oldest first: which leader
    /// epoch wrote which part of the log. Empty for a store that never had an epoch.
    pub fn epochs(&self) -> Vec<EpochEntry> {
        self.shared.epochs()
    }

    /// Appends an epoch to the list and writes the epoch file (see [`EpochFile`](crate::EpochFile))
    /// before returning. The same entry as the last one is a no-op. An epoch that starts where
    /// the last one does (it wrote no data) is kept, unlike Java's `appendEntry`.
    ///
    /// # Errors
    /// [`StoreError::EpochRefused`] unless the epoch is above the last one, starts at or after
    /// it, and starts at or before the end of the log (any start on an empty log: a new slave
    /// learns its first epoch before its first bytes; otherwise append the bytes first); I/O
    /// errors of the write.
    pub fn append_epoch(&self, entry: EpochEntry) -> Result<(), StoreError> {
        self.shared.append_epoch(entry)
    }

    /// Truncates the log to `offset` (a slave cutting a divergent tail before it follows a new
    /// master): the bytes from `offset` on leave the disk, and so do the consume-queue entries
    /// and epochs at or after it, and the checkpoint records nothing past it. Crash-safe at
    /// every step: a pending cut is recorded first and recovery finishes it before anything
    /// else, so the old tail never comes back (see [`TruncateStep`] and the order documented
    /// there). Bytes of the old tail read before the call stay readable through their spans.
    ///
    /// The segment holding the cut is rewritten as a copy of its bytes before the cut (an
    /// in-kernel copy of at most one segment); later segments are deleted.
    ///
    /// # Errors
    /// [`StoreError::OutOfRange`] outside `[min, max]`, [`StoreError::NotARecordBoundary`] where
    /// no record starts; I/O errors. A truncation that fails after it started closes the store:
    /// reopening it finishes the cut.
    pub fn truncate_to(&self, offset: Offset) -> Result<TruncateReport, StoreError> {
        self.truncate_inner(offset, None)
    }

    /// [`truncate_to`](Self::truncate_to), stopping right after `step` as a kill -9 there would;
    /// follow it with [`abandon`](Self::abandon) and a reopen. For fault-injection tests.
    #[doc(hidden)]
    pub fn truncate_to_crashing_after(
        &self,
        offset: Offset,
        step: TruncateStep,
    ) -> Result<TruncateReport, StoreError> {
        self.truncate_inner(offset, Some(step))
    }

    fn truncate_inner(
        &self,
        offset: Offset,
        crash_after: Option<TruncateStep>,
    ) -> Result<TruncateReport, StoreError> {
        let result = self.shared.truncate_to(offset, crash_after);
        self.truncations.fetch_add(1, Ordering::AcqRel);
        if let Err(e) = &result {
            if !matches!(
                e,
                StoreError::OutOfRange { .. } | StoreError::NotARecordBoundary { .. } | StoreError::Closed
            ) {
                // The cut may be half done: refuse everything until a reopen finishes it.
                tracing::error!(error = %e, offset, "truncation failed; closing the store (reopening finishes the truncation)");
                self.shared.closed.store(true, Ordering::Release);
                drop(lock(&self.shared.writer));
                self.stop_threads();
                self.shared.flush.stop();
            }
        }
        result
    }

    /// Sets (or with `None` removes) the [`ArrivalListener`](crate::ArrivalListener) told of
    /// every message indexed into a consume queue from now on: the hook of a broker's long
    /// polling. It is called under the dispatch lock; see the trait for what it may do.
    pub fn set_arrival_listener(&self, listener: Option<std::sync::Arc<dyn crate::ArrivalListener>>) {
        lock(&self.shared.dispatcher).listener = crate::arrival::ListenerSlot(listener);
    }

    /// One past the last record indexed into the consume queues (what readers of the queues,
    /// and the message index, may see).
    pub fn dispatched_offset(&self) -> Offset {
        self.shared.log.dispatched.load(Ordering::Acquire)
    }

    /// How many truncations ([`truncate_to`](Self::truncate_to)) started since the store was
    /// opened: what follows the log from outside (the message index) re-reads it when this
    /// moves.
    pub fn truncations(&self) -> u64 {
        self.truncations.load(Ordering::Acquire)
    }

    /// Indexes every complete record appended so far into the consume queues, now, on this
    /// thread (the reput thread does the same in the background after each `append_at`).
    /// Returns the dispatched offset.
    pub fn dispatch_pending(&self) -> Result<Offset, StoreError> {
        let mut d = lock(&self.shared.dispatcher);
        self.shared.dispatch_pending(&mut d)?;
        Ok(d.dispatched)
    }

    /// Makes every stored byte durable and returns the durable end; see [`LogWrite::flush`].
    pub fn flush(&self) -> Result<Offset, StoreError> {
        self.shared.flush_log()
    }

    /// Flushes the log and the consume queues and records both in the checkpoint, so that a
    /// crash from now on recovers from here. (The flush thread does this periodically.)
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.shared.checkpoint_now(false)
    }

    /// Sets the retention floor: forced deletion (`clean_file_forcibly_enable`) never removes a
    /// segment holding bytes at or past `offset`. A master feeds it the slowest in-sync
    /// replica's ack, so a full disk never deletes what a replica still needs. Expired segments
    /// (`file_reserved_time`) go regardless, as in RocketMQ.
    pub fn set_retention_floor(&self, offset: Offset) {
        self.shared.retention.floor.store(offset, Ordering::Release);
    }

    /// Removes the retention floor (no replica to wait for).
    pub fn clear_retention_floor(&self) {
        self.shared.retention.floor.store(u64::MAX, Ordering::Release);
    }

    /// Runs one retention round now (the retention thread runs one every
    /// `clean_resource_interval`).
    pub fn run_retention(&self) -> Result<RetentionReport, StoreError> {
        let s = &self.shared;
        s.retention.round(&|| s.write_checkpoint(false, None))
    }

    /// Holds off every flush while the returned guard lives: a way for tests to observe
    /// `FlushDiskTimeout` deterministically. Not for production use.
    #[doc(hidden)]
    pub fn hold_flushes(&self) -> crate::flush::FlushHold<'_> {
        self.shared.flush.hold_flushes()
    }

    /// Why writes are refused for lack of disk (puts get `ServiceNotAvailable`), if they are:
    /// [`StoreError::DiskUsageAboveLimit`] above `disk_space_warning_level_ratio`, or the
    /// [`StoreError::DiskFull`] of the last write, which could not reserve its space.
    pub fn write_refusal(&self) -> Option<StoreError> {
        let s = &self.shared;
        if s.retention.disk_full.load(Ordering::Acquire) {
            return Some(StoreError::DiskUsageAboveLimit {
                dir: s.commitlog_dir.clone(),
                used: s.retention.last_ratio().unwrap_or(1.0) * 100.0,
                limit: s.config.disk_space_warning_level_ratio * 100.0,
            });
        }
        if !self.shared.space_short.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.shared.shortage).as_ref().map(|s| StoreError::DiskFull {
            path: s.path.clone(),
            needed: s.needed,
            available: s.available,
        })
    }

    /// A snapshot of the store's offsets and health.
    pub fn status(&self) -> StoreStatus {
        let s = &self.shared;
        let bounds = s.bounds();
        let dispatch_error = lock(&s.dispatcher).error.as_ref().map(|(o, e)| (*o, e.to_string()));
        let ckpt = lock(&s.checkpoint).current().logship.unwrap_or_default();
        StoreStatus {
            min_offset: bounds.min,
            max_offset: bounds.max,
            flushed_offset: s.log.flushed.load(Ordering::Acquire),
            dispatched_offset: s.log.dispatched.load(Ordering::Acquire),
            segments: read(&s.log.segments).len(),
            disk_used_ratio: s.retention.last_ratio(),
            disk_full: s.retention.disk_full.load(Ordering::Acquire),
            flush_count: s.flush.count.load(Ordering::Relaxed),
            reput_wakeups: s.reput_wakeups.load(Ordering::Relaxed),
            dispatch_error,
            checkpoint_flushed: ckpt.flushed,
            checkpoint_dispatched: ckpt.dispatched,
            preallocating: s.prealloc.preallocating(),
            write_refused: self.write_refusal().map(|e| e.to_string()),
            forced_deleted_segments: s.retention.forced_segments.load(Ordering::Relaxed),
            forced_deleted_bytes: s.retention.forced_bytes.load(Ordering::Relaxed),
            retention_floor: Some(s.retention.floor.load(Ordering::Acquire)).filter(|&f| f != u64::MAX),
            scrub: s.scrub.snapshot(s.config.scrub_bytes_per_second > 0),
            confirm_offset: s.confirm.load(Ordering::Acquire),
        }
    }

    /// Shuts the store down cleanly: stops the threads, flushes the log and the consume queues,
    /// records a clean checkpoint and removes the `abort` marker, so the next open needs no scan.
    /// Later calls do nothing; later writes fail with `Closed` / `ServiceNotAvailable`.
    pub fn shutdown(&self) -> Result<(), StoreError> {
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        // Serialize with in-flight writes: after this no write starts. An incomplete replicated
        // record goes (the master resends it from the last boundary), so that nothing but
        // zeros follows the clean end.
        self.shared.drop_pending(&mut lock(&self.shared.writer));
        self.stop_threads();
        let s = &self.shared;
        let result = (|| {
            s.checkpoint_now(true)?;
            s.prealloc.discard_preallocated();
            std::fs::remove_file(s.abort_path()).at(s.abort_path())?;
            crate::segment::sync_dir(&s.root)
        })();
        // Whatever happened, no durability wait may hang.
        s.flush.stop();
        result?;
        tracing::info!(root = %s.root.display(), end = s.log.end.load(Ordering::Acquire), "store shut down cleanly");
        Ok(())
    }

    /// Stops the store as if the process had died: the threads stop, but nothing is flushed,
    /// no checkpoint is written and the `abort` marker stays, so the next open runs crash
    /// recovery. (Bytes already written stay in the OS page cache, so to simulate lost writes,
    /// damage the files after this returns.) For fault-injection tests.
    pub fn abandon(self) {
        self.shared.closed.store(true, Ordering::Release);
        drop(lock(&self.shared.writer));
        self.stop_threads();
        self.shared.flush.stop();
        // Drop runs next: `shutdown` sees `closed` already set and does nothing.
    }

    fn stop_threads(&self) {
        let s = &self.shared;
        s.log.stop.store(true, Ordering::Release);
        s.flush.wake_flusher();
        s.prealloc.wake();
        s.retention.wake();
        s.scrub.wake();
        s.wake_reput();
        for t in lock(&self.threads).drain(..) {
            if t.join().is_err() {
                tracing::error!("a store thread panicked");
            }
        }
    }
}

impl Drop for CommitLog {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::error!(error = %e, root = %self.shared.root.display(), "clean shutdown failed; the next open will run crash recovery");
        }
    }
}

/// The reput thread: dispatches replicated bytes into the consume queues as they arrive. While
/// bytes keep arriving it polls every millisecond (RocketMQ's ReputMessageService sleeps 1 ms per
/// round), so appends need not wake it; after a second without bytes it sleeps until woken.
fn reput_thread(shared: Arc<Shared>) {
    const POLL: Duration = Duration::from_millis(1);
    const GO_IDLE_AFTER: Duration = Duration::from_secs(1);
    let mut last_bytes = std::time::Instant::now();
    while !shared.log.stop.load(Ordering::Acquire) {
        let behind = shared.log.dispatched.load(Ordering::Acquire) < shared.dispatch_end();
        if behind {
            last_bytes = std::time::Instant::now();
            let mut d = lock(&shared.dispatcher);
            if let Err(e) = shared.dispatch_pending(&mut d) {
                tracing::error!(error = %e, "consume-queue dispatch failed; retrying");
                drop(d);
                std::thread::park_timeout(Duration::from_millis(100));
                continue;
            }
            let stuck = d.dispatched < shared.dispatch_end();
            drop(d);
            if !stuck {
                continue;
            }
        }
        if last_bytes.elapsed() < GO_IDLE_AFTER {
            std::thread::park_timeout(POLL);
            continue;
        }
        shared.reput_idle.store(true, Ordering::Relaxed);
        std::sync::atomic::fence(Ordering::SeqCst);
        if shared.log.dispatched.load(Ordering::Acquire) >= shared.dispatch_end() {
            // Woken by the next append (or confirm offset); the timeout is a safety net.
            std::thread::park_timeout(Duration::from_millis(100));
        }
        shared.reput_idle.store(false, Ordering::Relaxed);
    }
}

impl Shared {
    /// The epoch list.
    pub(crate) fn epochs(&self) -> Vec<EpochEntry> {
        lock(&self.epochs).entries.clone()
    }

    /// Appends an epoch (see [`CommitLog::append_epoch`](crate::CommitLog::append_epoch)).
    pub(crate) fn append_epoch(&self, entry: EpochEntry) -> Result<(), StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        // Under the put lock: the end cannot move back (a truncation) meanwhile.
        let w = lock(&self.writer);
        let end = self.log.end.load(Ordering::Acquire);
        let mut state = lock(&self.epochs);
        let refuse = |reason: String| StoreError::EpochRefused {
            epoch: entry.epoch,
            start_offset: entry.start_offset,
            reason,
        };
        if let Some(last) = state.entries.last() {
            if *last == entry {
                return Ok(());
            }
            if entry.epoch <= last.epoch {
                return Err(refuse(format!("the last epoch is {} (at {})", last.epoch, last.start_offset)));
            }
            if entry.start_offset < last.start_offset {
                return Err(refuse(format!(
                    "it starts before the last epoch {} (at {})",
                    last.epoch, last.start_offset
                )));
            }
        }
        // An empty log takes any start: a new slave learns its first epoch before the first
        // bytes (from wherever the master starts it) arrive.
        let empty = w.active.is_none() && read(&self.log.segments).len() == 0;
        if entry.start_offset > end && !empty {
            return Err(refuse(format!("it starts beyond the end of the log ({end})")));
        }
        let mut next = state.entries.clone();
        next.push(entry);
        state.file.write(&next)?;
        state.entries = next;
        tracing::info!(epoch = entry.epoch, start_offset = entry.start_offset, "epoch appended");
        Ok(())
    }

    /// Truncates the log to `offset`; with `crash_after`, stops right after that step, as a
    /// kill -9 there would (for fault-injection tests).
    pub(crate) fn truncate_to(
        &self,
        offset: u64,
        crash_after: Option<TruncateStep>,
    ) -> Result<TruncateReport, StoreError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(StoreError::Closed);
        }
        // Lock order: retention round, put lock, checkpoint, flush progress, dispatcher, epochs
        // (the same order every other path takes them in).
        let _round = lock(&self.retention.round);
        let mut w = lock(&self.writer);
        let LogBounds { min, max } = self.bounds();
        if offset < min || offset > max {
            return Err(StoreError::OutOfRange { offset, end: offset, min, max });
        }
        if !self.is_record_boundary(offset)? {
            return Err(StoreError::NotARecordBoundary { offset });
        }
        // An incomplete replicated record past the end goes too (its bytes are not published).
        self.drop_pending(&mut w);
        let mut ckpt = lock(&self.checkpoint);
        let mut progress = lock(&self.flush.run);
        let mut d = lock(&self.dispatcher);
        let mut epochs = lock(&self.epochs);
        let mut report = TruncateReport { from: max, to: offset, ..TruncateReport::default() };
        let stop = |step| crash_after == Some(step);

        truncate::write_intent(&self.root, offset)?;
        if stop(TruncateStep::IntentRecorded) {
            return Ok(report);
        }

        let (kept, dropped): (Vec<_>, Vec<_>) = epochs.entries.iter().partition(|e| e.start_offset < offset);
        if !dropped.is_empty() {
            epochs.file.write(&kept)?;
        }
        epochs.entries = kept;
        report.dropped_epochs = dropped;
        if stop(TruncateStep::EpochsTrimmed) {
            return Ok(report);
        }

        if offset < max {
            self.cut_segments(&mut w, offset, &mut report)?;
        }
        if stop(TruncateStep::LogCut) {
            return Ok(report);
        }

        report.dropped_queue_entries = d.truncate(offset)?;
        self.log.dispatched.store(d.dispatched, Ordering::Release);
        if stop(TruncateStep::QueuesCut) {
            return Ok(report);
        }

        self.log.flushed.fetch_min(offset, Ordering::AcqRel);
        progress.boundary = progress.boundary.min(offset);
        let mut c = ckpt.current().clone();
        let mut state = c.logship.unwrap_or_default();
        state.clean = false;
        state.clean_end = 0;
        state.flushed = state.flushed.min(offset);
        state.dispatched = state.dispatched.min(offset);
        state.min_offset = min;
        state.confirmed = Some(state.confirmed.unwrap_or(c.confirm_phy_offset as u64).min(offset));
        c.logship = Some(state);
        self.confirm.fetch_min(offset, Ordering::AcqRel);
        self.confirmed.fetch_min(offset, Ordering::AcqRel);
        c.confirm_phy_offset = c.confirm_phy_offset.min(offset as i64);
        c.master_flushed_offset = c.master_flushed_offset.min(offset as i64);
        ckpt.write(c)?;
        if stop(TruncateStep::CheckpointWritten) {
            return Ok(report);
        }

        truncate::clear_intent(&self.root)?;
        drop((epochs, d, progress, ckpt));
        let next = match &w.active {
            Some(a) => a.base + self.log.segment_size,
            None => offset,
        };
        drop(w);
        self.prealloc.request_segment(next);
        tracing::warn!(from = report.from, to = offset, dropped_epochs = ?report.dropped_epochs, "commit log truncated");
        Ok(report)
    }

    /// Step 3: the log's bytes from `offset` (a record boundary below the end) on leave the disk
    /// and the segment table; the write position moves to `offset`.
    fn cut_segments(
        &self,
        w: &mut WriterState,
        offset: u64,
        report: &mut TruncateReport,
    ) -> Result<(), StoreError> {
        // Readers see the new end first; then the files change under no new view.
        self.log.end.store(offset, Ordering::Release);
        w.accepted = offset;
        if w.master_boundary.is_some_and(|b| b > offset) {
            w.master_boundary = Some(offset - offset % self.log.segment_size);
        }
        w.active = None;
        self.prealloc.cancel_preallocation()?;
        let mut table = self.log.segments.write().unwrap_or_else(|e| e.into_inner());
        while table.last().is_some_and(|s| s.base >= offset) {
            let seg = table.pop_last().expect("checked");
            let path = seg.path().to_path_buf();
            drop(seg);
            std::fs::remove_file(&path).at(&path)?;
            report.removed_segments.push(path);
        }
        if !report.removed_segments.is_empty() {
            segment::sync_dir(&self.commitlog_dir)?;
        }
        let Some(holding) = table.last().cloned() else {
            return Ok(());
        };
        let seg_end = holding.base + self.log.segment_size;
        if offset >= seg_end {
            return Ok(());
        }
        let keep = offset - holding.base;
        report.zeroed_bytes = report.from.min(seg_end) - offset;
        let (map, writer) = segment::replace_with_prefix(
            &self.commitlog_dir,
            holding.base,
            keep,
            self.log.segment_size,
            true,
            Some(&self.lock_file),
        )?;
        table.pop_last();
        table.push(Arc::new(Segment { base: holding.base, map }));
        w.active = Some(ActiveSegment { base: holding.base, writer, reserved: true });
        Ok(())
    }
}

impl LogRead for CommitLog {
    type Error = StoreError;

    fn bounds(&self) -> LogBounds {
        self.shared.bounds()
    }

    fn flushed(&self) -> Offset {
        self.flushed_offset()
    }

    fn read(&self, span: LogSpan) -> Result<Bytes, StoreError> {
        self.shared.read_span(span)
    }

    fn is_record_boundary(&self, offset: Offset) -> Result<bool, StoreError> {
        self.shared.is_record_boundary(offset)
    }

    fn segment_size(&self) -> u64 {
        self.shared.config.mapped_file_size_commit_log
    }

    fn epoch_log(&self) -> Option<&dyn EpochLog<Error = StoreError>> {
        Some(self)
    }
}

/// Controller mode's log capability, over the store's epoch file, crash-safe truncation and
/// confirm offset (the inherent methods of the same names).
impl EpochLog for CommitLog {
    type Error = StoreError;

    fn epochs(&self) -> Vec<EpochEntry> {
        Self::epochs(self)
    }

    fn append_epoch(&self, entry: EpochEntry) -> Result<(), StoreError> {
        Self::append_epoch(self, entry)
    }

    fn truncate_to(&self, offset: Offset) -> Result<(), StoreError> {
        Self::truncate_to(self, offset).map(|report| {
            tracing::info!(
                from = report.from,
                to = report.to,
                dropped_epochs = report.dropped_epochs.len(),
                "log truncated"
            );
        })
    }

    fn set_confirm_offset(&self, offset: Offset) -> Offset {
        Self::set_confirm_offset(self, offset)
    }

    fn confirm_offset(&self) -> Offset {
        self.shared.confirm.load(Ordering::Acquire)
    }

    fn confirmed_offset(&self) -> Offset {
        Self::confirmed_offset(self)
    }
}

impl LogWrite for CommitLog {
    fn append_at(&self, offset: Offset, data: &[u8]) -> Result<Offset, StoreError> {
        self.shared.append_at(offset, data)
    }

    fn flush(&self) -> Result<Offset, StoreError> {
        self.shared.flush_log()
    }
}

impl MessageLog for CommitLog {
    type Message = Message;
    type Durable = Durable;

    fn put(&self, message: Message) -> PutResult {
        self.shared.put(message)
    }

    fn durable(&self, offset: Offset) -> Durable {
        Durable::new(Arc::clone(&self.shared.flush), Arc::clone(&self.shared.log), offset)
    }

    fn flush_settings(&self) -> FlushSettings {
        let config = &self.shared.config;
        FlushSettings {
            flush_disk_type: config.flush_disk_type,
            sync_flush_timeout: config.sync_flush_timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log of messages of assorted sizes (and so records of assorted lengths), as bytes.
    fn records(n: usize) -> Vec<u8> {
        static RECORDS: OnceLock<Vec<u8>> = OnceLock::new();
        RECORDS.get_or_init(|| records_of(n)).clone()
    }

    fn records_of(n: usize) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let log = CommitLog::open(dir.path(), StoreConfig::default()).unwrap();
        for i in 0..n {
            let body = vec![i as u8; 1 + (i * 37) % 300];
            assert_eq!(log.put(Message::new("TopicTest", (i % 4) as i32, body)).status, PutStatus::PutOk);
        }
        let end = log.max_offset();
        log.read(LogSpan { offset: 0, len: end as u32 }).unwrap().to_vec()
    }

    const SEG: SegmentSpan = SegmentSpan { base: 0, size: 1 << 30 };

    fn whole(bytes: &[u8], from: u64, to: u64) -> (u64, Option<String>) {
        let (good, e) = validate_replicated(&bytes[..to as usize], 0, SEG, from, None, 4 << 20);
        (good, e.map(|e| e.to_string()))
    }

    fn split(bytes: &[u8], from: u64, at: u64, to: u64) -> (u64, Option<String>) {
        let (pending, data) = (&bytes[from as usize..at as usize], &bytes[at as usize..to as usize]);
        let (good, e) = validate_appended(pending, from, data, SEG, None, 4 << 20);
        (good, e.map(|e| e.to_string()))
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
        /// Validating the pending bytes and the new ones apart judges them as one window does,
        /// wherever the append boundary falls, damaged bytes included.
        #[test]
        fn validating_an_append_after_pending_bytes_matches_validating_them_whole(
            cut in 0.0f64..1.0,
            len in 0.0f64..1.0,
            damage in proptest::option::of((0.0f64..1.0, 1u8..=255, proptest::bool::ANY)),
        ) {
            let mut bytes = records(40);
            let total = bytes.len() as u64;
            // `from`: a record boundary, the start of some record.
            let mut boundaries = vec![0u64];
            while let Some(&b) = boundaries.last() {
                let size = i32::from_be_bytes(bytes[b as usize..b as usize + 4].try_into().unwrap()) as u64;
                if b + size >= total { break; }
                boundaries.push(b + size);
            }
            let from = boundaries[(cut * boundaries.len() as f64) as usize % boundaries.len()];
            let to = from + ((total - from).min(3000) as f64 * len) as u64;
            if let Some((at, xor, in_last_header)) = damage {
                // Anywhere in the window, or in the first bytes (size, magic) of the record
                // that `to` cuts, which decide whether an incomplete record is invalid already.
                let last = boundaries.iter().copied().filter(|&b| b >= from && b < to).max();
                let i = match last {
                    Some(b) if in_last_header => b + (at * 8.0) as u64,
                    _ => from + (at * (to - from) as f64) as u64,
                };
                if let Some(byte) = bytes.get_mut(i as usize) {
                    *byte ^= xor;
                }
            }
            let expected = whole(&bytes, from, to);
            for at in from..=to {
                proptest::prop_assert_eq!(split(&bytes, from, at, to), expected.clone(), "append at {}", at);
            }
        }
    }

    #[test]
    fn a_record_size_too_small_for_any_record_is_refused_when_the_append_splits_its_size_field() {
        let mut bytes = records(3);
        let second = u64::from(u32::from_be_bytes(bytes[..4].try_into().unwrap()));
        // The second record claims 7 bytes: less than even a BLANK record.
        bytes[second as usize..second as usize + 4].copy_from_slice(&7i32.to_be_bytes());
        let to = bytes.len() as u64;
        let (good, error) = whole(&bytes, 0, to);
        assert_eq!(good, second);
        assert!(error.as_deref().is_some_and(|e| e.contains("total size 7 is impossible")), "{error:?}");
        for at in second + 1..second + 4 {
            assert_eq!(split(&bytes, second, at, to), (second, error.clone()), "append at {at}");
        }
    }
}
