//! Consume queues: per-(topic, queue) indexes into the commit log, and the dispatcher that builds
//! them from the log.
//!
//! Files live under `<root>/consumequeue/<topic>/<queueId>/`, named by the 20-digit byte offset of
//! their first entry, each `mapped_file_size_consume_queue` bytes (300 000 entries by default). An
//! entry is 20 bytes, big-endian: `i64 physical offset | i32 size | i64 tag code`. Entry `n` is
//! the message with queue offset `n`. A queue that starts above 0 (a slave that joined mid-log)
//! has its first file padded with RocketMQ's blank entries `(0, i32::MAX, 0)`.

use std::collections::{HashMap, VecDeque};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use crate::codec::{self, Record, RecordError};
use crate::config::{CQ_ENTRY_SIZE, StoreConfig};
use crate::error::{IoContext, StoreError};
use crate::mmap::{MapWriter, MappedFile};
use crate::segment::{self, SegmentTable};

const ENTRY: usize = CQ_ENTRY_SIZE as usize;
const BLANK_ENTRY: [u8; ENTRY] = {
    let mut e = [0u8; ENTRY];
    let size = i32::MAX.to_be_bytes();
    e[8] = size[0];
    e[9] = size[1];
    e[10] = size[2];
    e[11] = size[3];
    e
};

/// One consume-queue entry.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct CqEntry {
    /// The message's offset in its queue.
    pub queue_offset: u64,
    /// Where the message starts in the commit log.
    pub physical_offset: u64,
    /// The message's size in the commit log.
    pub size: u32,
    /// Java `String.hashCode` of the message's tags (0 without tags).
    pub tags_code: i64,
}

fn encode_entry(physical_offset: u64, size: u32, tags_code: i64) -> [u8; ENTRY] {
    let mut e = [0; ENTRY];
    e[..8].copy_from_slice(&(physical_offset as i64).to_be_bytes());
    e[8..12].copy_from_slice(&(size as i32).to_be_bytes());
    e[12..].copy_from_slice(&tags_code.to_be_bytes());
    e
}

/// `(physical offset, size, tag code)` of raw entry bytes.
fn decode_entry(b: &[u8]) -> (i64, i32, i64) {
    let mut p = [0; 8];
    p.copy_from_slice(&b[..8]);
    let mut t = [0; 8];
    t.copy_from_slice(&b[12..20]);
    (i64::from_be_bytes(p), i32::from_be_bytes([b[8], b[9], b[10], b[11]]), i64::from_be_bytes(t))
}

fn is_blank(b: &[u8]) -> bool {
    b == BLANK_ENTRY
}

fn is_zero(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0)
}

/// A consume queue's files and bounds, readable concurrently with its writer.
#[derive(Debug)]
pub(crate) struct ConsumeQueue {
    pub(crate) topic: String,
    pub(crate) queue_id: i32,
    dir: PathBuf,
    entries_per_file: u64,
    /// `(first queue offset of the file, mapping)`, oldest first, contiguous.
    files: RwLock<VecDeque<(u64, Arc<MappedFile>)>>,
    /// The first queue offset that holds a message still in the log.
    min: AtomicU64,
    /// One past the last entry.
    max: AtomicU64,
    /// Entries below this are on disk.
    flushed: AtomicU64,
    /// A file was created since the directory was last fsynced (deferred to the next flush, off
    /// the write path).
    dir_dirty: AtomicBool,
    /// The queue's directories were created and their names are not yet durable.
    dirs_new: AtomicBool,
}

impl ConsumeQueue {
    /// `[min, max)` of the queue.
    pub(crate) fn bounds(&self) -> (u64, u64) {
        let max = self.max.load(Ordering::Acquire);
        (self.min.load(Ordering::Acquire).min(max), max)
    }

    fn raw_entry(&self, files: &VecDeque<(u64, Arc<MappedFile>)>, index: u64) -> Option<[u8; ENTRY]> {
        let first = files.front()?.0;
        let file = files.get(((index.checked_sub(first)?) / self.entries_per_file) as usize)?;
        let at = ((index - file.0) * CQ_ENTRY_SIZE) as usize;
        let bytes = file.1.read(at..at + ENTRY)?;
        let mut e = [0; ENTRY];
        e.copy_from_slice(bytes);
        Some(e)
    }

    /// Up to `max_count` entries from `from`, skipping blank padding entries.
    pub(crate) fn read(&self, from: u64, max_count: usize) -> Result<Vec<CqEntry>, StoreError> {
        let (min, max) = self.bounds();
        if from < min || from > max {
            return Err(StoreError::QueueOffsetOutOfRange {
                topic: self.topic.clone(),
                queue_id: self.queue_id,
                offset: from,
                min,
                max,
            });
        }
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        // Read the end again under the files lock: a truncation lowers it while holding the lock.
        let max = self.max.load(Ordering::Acquire).max(from);
        let end = max.min(from.saturating_add(max_count as u64));
        let mut out = Vec::with_capacity((end - from) as usize);
        for index in from..end {
            let Some(raw) = self.raw_entry(&files, index) else {
                break;
            };
            if is_blank(&raw) {
                continue;
            }
            let (phys, size, tags_code) = decode_entry(&raw);
            out.push(CqEntry {
                queue_offset: index,
                physical_offset: phys as u64,
                size: size as u32,
                tags_code,
            });
        }
        Ok(out)
    }

    /// The directories whose new entries (files, or the queue's own directories) are not yet
    /// durable; clears the marks.
    fn take_dirty_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        if self.dir_dirty.swap(false, Ordering::AcqRel) {
            dirs.push(self.dir.clone());
        }
        if self.dirs_new.swap(false, Ordering::AcqRel) {
            // consumequeue/<topic>/<queueId>: the new names live in both parents.
            dirs.extend(self.dir.ancestors().skip(1).take(2).map(Path::to_path_buf));
        }
        dirs
    }

    /// Writes dirty entries back to disk (see [`flush_queues`] for the file names).
    fn flush_entries(&self) -> Result<(), StoreError> {
        let max = self.max.load(Ordering::Acquire);
        let from = self.flushed.load(Ordering::Acquire);
        if max <= from {
            return Ok(());
        }
        let files: Vec<_> = self.files.read().unwrap_or_else(|e| e.into_inner()).iter().cloned().collect();
        for (start, map) in files {
            let file_end = start + self.entries_per_file;
            if file_end <= from || start >= max {
                continue;
            }
            let lo = (from.max(start) - start) * CQ_ENTRY_SIZE;
            let hi = (max.min(file_end) - start) * CQ_ENTRY_SIZE;
            map.flush(lo as usize..hi as usize).map_err(|e| StoreError::FlushFailed {
                path: map.path().to_path_buf(),
                source: Arc::new(e),
            })?;
        }
        self.flushed.fetch_max(max, Ordering::AcqRel);
        Ok(())
    }

    /// After retention moved the log's minimum: deletes files whose entries all point below it
    /// (never the last file) and moves `min` to the first entry still in the log.
    pub(crate) fn forget_below(&self, log_min: u64) -> Result<Vec<PathBuf>, StoreError> {
        let mut removed = Vec::new();
        {
            let mut files = self.files.write().unwrap_or_else(|e| e.into_inner());
            while files.len() > 1 {
                let (start, map) = &files[0];
                let last = ((start + self.entries_per_file - 1 - start) * CQ_ENTRY_SIZE) as usize;
                let Some(raw) = map.read(last..last + ENTRY) else {
                    break;
                };
                let (phys, size, _) = decode_entry(raw);
                if is_blank(raw) || (phys as u64).saturating_add(size as u64) > log_min {
                    break;
                }
                let (_, map) = files.pop_front().expect("checked: more than one file");
                removed.push(map.path().to_path_buf());
            }
        }
        for path in &removed {
            fs::remove_file(path).at(path)?;
        }
        if !removed.is_empty() {
            segment::sync_dir(&self.dir)?;
        }
        // Binary search the first entry at or above log_min (blank entries count as below).
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        let (mut lo, mut hi) = (self.min.load(Ordering::Acquire), self.max.load(Ordering::Acquire));
        if let Some(first) = files.front() {
            lo = lo.max(first.0);
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let below = match self.raw_entry(&files, mid) {
                Some(raw) => is_blank(&raw) || (decode_entry(&raw).0 as u64) < log_min,
                None => false,
            };
            if below { lo = mid + 1 } else { hi = mid }
        }
        self.min.fetch_max(lo, Ordering::AcqRel);
        Ok(removed)
    }
}

/// One raw consume-queue entry, blank padding included (for the RocketMQ-semantics queries of
/// the `query` module, which walk entries as Java does).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct RawEntry {
    pub(crate) index: u64,
    pub(crate) physical_offset: i64,
    pub(crate) size: i32,
    pub(crate) tags_code: i64,
}

/// One file of a consume queue as the queries see it.
#[derive(Clone, Debug)]
pub(crate) struct QueueFile {
    /// The queue offset of its first entry.
    pub(crate) start: u64,
    /// One past its last written entry.
    pub(crate) end: u64,
    pub(crate) path: PathBuf,
}

impl ConsumeQueue {
    /// Entries per file (`mappedFileSizeConsumeQueue / 20`).
    pub(crate) fn entries_per_file(&self) -> u64 {
        self.entries_per_file
    }

    /// The queue's files, oldest first, each with its written entries.
    pub(crate) fn files(&self) -> Vec<QueueFile> {
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        let max = self.max.load(Ordering::Acquire);
        files
            .iter()
            .map(|(start, map)| QueueFile {
                start: *start,
                end: (start + self.entries_per_file).min(max).max(*start),
                path: map.path().to_path_buf(),
            })
            .collect()
    }

    /// The written entries of `[from, to)` that exist (blank ones included), in order.
    pub(crate) fn raw_range(&self, from: u64, to: u64) -> Vec<RawEntry> {
        let files = self.files.read().unwrap_or_else(|e| e.into_inner());
        let to = to.min(self.max.load(Ordering::Acquire));
        let mut out = Vec::with_capacity(to.saturating_sub(from).min(4096) as usize);
        for index in from..to {
            let Some(raw) = self.raw_entry(&files, index) else {
                if out.is_empty() {
                    continue;
                }
                break;
            };
            let (physical_offset, size, tags_code) = decode_entry(&raw);
            out.push(RawEntry { index, physical_offset, size, tags_code });
        }
        out
    }

    /// The written entry at `index`, if it exists.
    pub(crate) fn raw_at(&self, index: u64) -> Option<RawEntry> {
        self.raw_range(index, index.checked_add(1)?).into_iter().next().filter(|e| e.index == index)
    }
}

/// The writer half of a consume queue (owned by the [`Dispatcher`]).
#[derive(Debug)]
pub(crate) struct CqWriter {
    cq: Arc<ConsumeQueue>,
    /// The writer of the last file, positioned at entry `max`.
    writer: Option<MapWriter>,
}

/// Makes every queue durable: first the names of new files and directories (each directory
/// fsynced once), then the dirty entries.
pub(crate) fn flush_queues(queues: &[Arc<ConsumeQueue>]) -> Result<(), StoreError> {
    let mut dirs = std::collections::BTreeSet::new();
    let mut marked = Vec::new();
    for q in queues {
        let d = q.take_dirty_dirs();
        if !d.is_empty() {
            marked.push(Arc::clone(q));
            dirs.extend(d);
        }
    }
    for dir in &dirs {
        if let Err(e) = segment::sync_dir(dir) {
            for q in &marked {
                q.dir_dirty.store(true, Ordering::Release);
                q.dirs_new.store(true, Ordering::Release);
            }
            return Err(e);
        }
    }
    for q in queues {
        q.flush_entries()?;
    }
    Ok(())
}

/// What [`Dispatcher::put_entry`] indexes about a message besides its queue and offset.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NewEntry {
    /// Where the message starts in the commit log.
    pub(crate) physical_offset: u64,
    /// Its size in the log.
    pub(crate) size: u32,
    /// Its tag code (or delivery time).
    pub(crate) tags_code: i64,
    /// Its store timestamp, for the arrival notice.
    pub(crate) store_timestamp: i64,
}

/// All consume queues, by topic and queue id, for readers.
pub(crate) type QueueRegistry = RwLock<HashMap<String, HashMap<i32, Arc<ConsumeQueue>>>>;

/// Builds consume queues from the commit log: one at a time, under the store's dispatch lock.
#[derive(Debug)]
pub(crate) struct Dispatcher {
    root: PathBuf,
    entries_per_file: u64,
    file_size: u64,
    writers: HashMap<String, HashMap<i32, CqWriter>>,
    registry: Arc<QueueRegistry>,
    /// Every complete record before this commit-log offset is dispatched.
    pub(crate) dispatched: u64,
    /// The invalid record dispatch stopped at, if any.
    pub(crate) error: Option<(u64, RecordError)>,
    /// Store timestamp and end offset of the last dispatched message.
    pub(crate) last_message: Option<(i64, u64)>,
    /// The delay levels (ms) that make the schedule topic's tags codes.
    schedule_delays_ms: Vec<i64>,
    /// Told of every new entry.
    pub(crate) listener: crate::arrival::ListenerSlot,
}

impl Dispatcher {
    pub(crate) fn new(cq_root: PathBuf, config: &StoreConfig, registry: Arc<QueueRegistry>) -> Self {
        Self {
            root: cq_root,
            entries_per_file: config.cq_entries_per_file(),
            file_size: config.mapped_file_size_consume_queue,
            writers: HashMap::new(),
            registry,
            dispatched: 0,
            error: None,
            last_message: None,
            schedule_delays_ms: config.schedule_delays_ms.clone(),
            listener: crate::arrival::ListenerSlot::default(),
        }
    }

    /// The queue offset the next message of `(topic, queue_id)` gets.
    pub(crate) fn next_queue_offset(&self, topic: &str, queue_id: i32) -> u64 {
        self.writers.get(topic).and_then(|q| q.get(&queue_id)).map_or(0, |w| w.cq.max.load(Ordering::Relaxed))
    }

    /// Every queue.
    pub(crate) fn queues(&self) -> impl Iterator<Item = &Arc<ConsumeQueue>> {
        self.writers.values().flat_map(|q| q.values().map(|w| &w.cq))
    }

    fn register(&mut self, cq: Arc<ConsumeQueue>, writer: Option<MapWriter>) {
        let mut reg = self.registry.write().unwrap_or_else(|e| e.into_inner());
        reg.entry(cq.topic.clone()).or_default().insert(cq.queue_id, Arc::clone(&cq));
        self.writers.entry(cq.topic.clone()).or_default().insert(cq.queue_id, CqWriter { cq, writer });
    }

    fn queue_dir(&self, topic: &str, queue_id: i32) -> PathBuf {
        self.root.join(topic).join(queue_id.to_string())
    }

    /// Records the message of `queue_offset` in its queue. Re-dispatching an entry that is
    /// already there is a no-op; a gap (which only a broken log produces) is padded with blank
    /// entries if it is shorter than one file, and the entry is skipped otherwise.
    pub(crate) fn put_entry(
        &mut self,
        topic: &str,
        queue_id: i32,
        queue_offset: u64,
        entry: NewEntry,
    ) -> Result<(), StoreError> {
        let NewEntry { physical_offset, size, tags_code, store_timestamp } = entry;
        // Queue offsets come from log bytes; one that cannot name a file is not indexed.
        if queue_offset > i64::MAX as u64 / CQ_ENTRY_SIZE {
            tracing::warn!(
                topic,
                queue_id,
                queue_offset,
                physical_offset,
                "impossible queue offset; not indexed"
            );
            return Ok(());
        }
        if !self.writers.get(topic).is_some_and(|q| q.contains_key(&queue_id)) {
            let dir = self.queue_dir(topic, queue_id);
            fs::create_dir_all(&dir).at(&dir)?;
            let cq = Arc::new(ConsumeQueue {
                topic: topic.to_string(),
                queue_id,
                dir,
                entries_per_file: self.entries_per_file,
                files: RwLock::new(VecDeque::new()),
                min: AtomicU64::new(queue_offset),
                max: AtomicU64::new(queue_offset),
                flushed: AtomicU64::new(0),
                dir_dirty: AtomicBool::new(true),
                dirs_new: AtomicBool::new(true),
            });
            self.register(cq, None);
        }
        let (entries_per_file, file_size) = (self.entries_per_file, self.file_size);
        let w = self.writers.get_mut(topic).and_then(|q| q.get_mut(&queue_id)).expect("registered above");
        let cq = Arc::clone(&w.cq);
        let max = cq.max.load(Ordering::Relaxed);
        let empty = cq.files.read().unwrap_or_else(|e| e.into_inner()).is_empty();
        if empty {
            // A new (or fully trimmed) queue starts at this entry; its first file is padded.
            let start = queue_offset / entries_per_file * entries_per_file;
            let (map, mut writer) =
                segment::create_sparse_file(&cq.dir, start * CQ_ENTRY_SIZE, file_size, false, None)?;
            cq.dir_dirty.store(true, Ordering::Release);
            segment::reserve_ahead(&mut writer, (queue_offset - start) as usize * ENTRY)?;
            for _ in start..queue_offset {
                writer.write(&BLANK_ENTRY);
            }
            cq.files.write().unwrap_or_else(|e| e.into_inner()).push_back((start, map));
            w.writer = Some(writer);
            cq.min.store(queue_offset, Ordering::Release);
            cq.max.store(queue_offset, Ordering::Release);
        } else if queue_offset < max {
            let files = cq.files.read().unwrap_or_else(|e| e.into_inner());
            let same = cq.raw_entry(&files, queue_offset).map(|raw| decode_entry(&raw).0 as u64)
                == Some(physical_offset);
            if !same {
                tracing::warn!(
                    topic,
                    queue_id,
                    queue_offset,
                    physical_offset,
                    max,
                    "message repeats a queue offset; not indexed"
                );
            }
            return Ok(());
        } else if queue_offset > max {
            let gap = queue_offset - max;
            if gap > entries_per_file {
                tracing::warn!(
                    topic,
                    queue_id,
                    queue_offset,
                    max,
                    "message leaves a gap in its queue; not indexed"
                );
                return Ok(());
            }
            tracing::warn!(
                topic,
                queue_id,
                queue_offset,
                max,
                "gap in queue offsets; padding with blank entries"
            );
            for _ in 0..gap {
                Self::append(&cq, w, &BLANK_ENTRY, file_size)?;
            }
        }
        Self::append(&cq, w, &encode_entry(physical_offset, size, tags_code), file_size)?;
        if let Some(writer) = w.writer.as_mut() {
            writer.publish();
        }
        cq.max.store(queue_offset + 1, Ordering::Release);
        if let Some(listener) = &self.listener.0 {
            listener.message_arrived(&crate::arrival::Arrival {
                topic,
                queue_id,
                queue_offset,
                tags_code,
                store_timestamp,
            });
        }
        Ok(())
    }

    fn append(
        cq: &ConsumeQueue,
        w: &mut CqWriter,
        entry: &[u8; ENTRY],
        file_size: u64,
    ) -> Result<(), StoreError> {
        let full = w.writer.as_ref().is_none_or(|wr| wr.remaining() < ENTRY);
        if full {
            if let Some(old) = w.writer.as_mut() {
                old.publish();
            }
            let start = {
                let files = cq.files.read().unwrap_or_else(|e| e.into_inner());
                files.back().map_or(0, |(s, _)| s + cq.entries_per_file)
            };
            let (map, writer) =
                segment::create_sparse_file(&cq.dir, start * CQ_ENTRY_SIZE, file_size, false, None)?;
            cq.dir_dirty.store(true, Ordering::Release);
            cq.files.write().unwrap_or_else(|e| e.into_inner()).push_back((start, map));
            w.writer = Some(writer);
        }
        let writer = w.writer.as_mut().expect("set above");
        segment::reserve_ahead(writer, ENTRY)?;
        writer.write(entry);
        Ok(())
    }

    /// Drops every entry that points at or past the commit-log offset `cut` (a truncation of
    /// the log's tail), and durably: the file holding the new end of a queue is replaced by a
    /// copy of its kept entries ([`segment::replace_with_prefix`]), later files are deleted and
    /// the directory fsynced. Entries are in log order, so the dropped ones are a suffix of
    /// each queue (blank padding between dropped entries goes with them). Returns the number of
    /// entries dropped.
    pub(crate) fn truncate(&mut self, cut: u64) -> Result<u64, StoreError> {
        let mut dropped = 0;
        let file_size = self.file_size;
        for w in self.writers.values_mut().flat_map(|q| q.values_mut()) {
            let cq = Arc::clone(&w.cq);
            let mut files = cq.files.write().unwrap_or_else(|e| e.into_inner());
            let Some(first) = files.front().map(|f| f.0) else {
                continue;
            };
            let max = cq.max.load(Ordering::Acquire);
            // The lowest dropped entry: walk back over entries at or past the cut (and the blank
            // padding between them).
            let (mut new_max, mut i) = (max, max);
            while i > first {
                let Some(raw) = cq.raw_entry(&files, i - 1) else { break };
                i -= 1;
                if is_blank(&raw) {
                    continue;
                }
                if (decode_entry(&raw).0 as u64) < cut {
                    break;
                }
                new_max = i;
            }
            if new_max == max {
                continue;
            }
            let per_file = cq.entries_per_file;
            let file_start = first + (new_max - first) / per_file * per_file;
            let mut removed = Vec::new();
            while files.back().is_some_and(|f| f.0 > file_start) {
                removed.push(files.pop_back().expect("checked").1.path().to_path_buf());
            }
            for path in &removed {
                fs::remove_file(path).at(path)?;
            }
            let keep = (new_max - file_start) * CQ_ENTRY_SIZE;
            let (map, writer) = segment::replace_with_prefix(
                &cq.dir,
                file_start * CQ_ENTRY_SIZE,
                keep,
                file_size,
                false,
                None,
            )?;
            if let Some(back) = files.back_mut() {
                *back = (file_start, map);
            }
            w.writer = Some(writer);
            cq.max.store(new_max, Ordering::Release);
            cq.flushed.fetch_min(new_max, Ordering::AcqRel);
            cq.min.fetch_min(new_max, Ordering::AcqRel);
            dropped += max - new_max;
            tracing::info!(topic = %cq.topic, queue_id = cq.queue_id, from = max, to = new_max, "consume queue truncated");
        }
        self.dispatched = self.dispatched.min(cut);
        if self.error.as_ref().is_some_and(|(offset, _)| *offset >= cut) {
            self.error = None;
        }
        if self.last_message.is_some_and(|(_, end)| end > cut) {
            self.last_message = None;
        }
        Ok(dropped)
    }

    /// Dispatches every complete record in `[self.dispatched, end)`. A partial record at the end
    /// (replicated bytes arrive in arbitrary chunks) waits for more bytes. An invalid record stops
    /// dispatch and is remembered in `self.error`.
    pub(crate) fn dispatch(
        &mut self,
        segments: &RwLock<SegmentTable>,
        segment_size: u64,
        min: u64,
        end: u64,
    ) -> Result<(), StoreError> {
        if self.error.is_some() {
            return Ok(());
        }
        if self.dispatched < min {
            tracing::warn!(
                dispatched = self.dispatched,
                min,
                "retention overtook dispatch; skipping to the log's start"
            );
            self.dispatched = min;
        }
        while self.dispatched < end {
            let pos = self.dispatched;
            let Some(seg) = segments.read().unwrap_or_else(|e| e.into_inner()).find(pos).cloned() else {
                break;
            };
            let seg_end = seg.base + segment_size;
            let avail_end = end.min(seg_end);
            let Some(buf) = seg.map.read((pos - seg.base) as usize..(avail_end - seg.base) as usize) else {
                break;
            };
            let mut at = 0usize;
            let mut stalled = false;
            while at < buf.len() {
                let phys = pos + at as u64;
                let remaining = (seg_end - phys) as usize;
                if remaining < codec::BLANK_RECORD_LEN {
                    // Too little room for any record: only zero padding can be here.
                    if buf.len() - at < remaining {
                        stalled = true;
                        break;
                    }
                    at += remaining;
                    continue;
                }
                match codec::parse_record(&buf[at..], remaining, Some(phys), codec::Checks::default()) {
                    Record::Message(v) => {
                        if codec::dispatched_sys_flag(v.sys_flag) {
                            if codec::valid_topic(v.topic) && v.queue_id >= 0 && v.queue_offset >= 0 {
                                let topic = std::str::from_utf8(v.topic).expect("valid topics are ASCII");
                                let tags = codec::cq_tags_code(
                                    v.topic,
                                    v.properties,
                                    v.store_timestamp,
                                    &self.schedule_delays_ms,
                                );
                                if let Err(e) = self.put_entry(
                                    topic,
                                    v.queue_id,
                                    v.queue_offset as u64,
                                    NewEntry {
                                        physical_offset: phys,
                                        size: v.total as u32,
                                        tags_code: tags,
                                        store_timestamp: v.store_timestamp,
                                    },
                                ) {
                                    self.dispatched = phys;
                                    return Err(e);
                                }
                            } else {
                                tracing::warn!(
                                    offset = phys,
                                    queue_id = v.queue_id,
                                    "message with an illegal topic or queue; not indexed"
                                );
                            }
                        }
                        self.last_message = Some((v.store_timestamp, phys + v.total as u64));
                        at += v.total;
                    }
                    Record::Blank { len } => at += len,
                    Record::Incomplete => {
                        stalled = true;
                        break;
                    }
                    Record::Invalid { error } => {
                        tracing::error!(offset = phys, %error, "invalid record in the commit log; dispatch stopped");
                        self.dispatched = phys;
                        self.error = Some((phys, error));
                        return Ok(());
                    }
                }
            }
            self.dispatched = pos + at as u64;
            if stalled || at == 0 {
                break;
            }
        }
        Ok(())
    }
}

/// Loads the consume queues under `cq_root`, dropping every entry that is not below `limit`
/// (entries beyond it are re-dispatched from the log) and returns the dispatcher.
///
/// Entries are kept while they are non-zero and point below `limit`; in a queue this predicate is
/// true for a prefix (entries are written in log order, and entries past the durable point may be
/// torn into zeros), so a binary search finds the cut. Everything from the cut on is zeroed.
pub(crate) fn load(
    cq_root: &Path,
    config: &StoreConfig,
    registry: Arc<QueueRegistry>,
    limit: u64,
    log_min: u64,
) -> Result<Dispatcher, StoreError> {
    let mut dispatcher = Dispatcher::new(cq_root.to_path_buf(), config, registry);
    let topics = match fs::read_dir(cq_root) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(dispatcher),
        Err(e) => return Err(StoreError::io(cq_root, e)),
    };
    let mut dirs = Vec::new();
    for topic in topics {
        let topic = topic.at(cq_root)?;
        let name = topic.file_name().to_string_lossy().into_owned();
        if !topic.file_type().at(topic.path())?.is_dir() || !codec::valid_topic(name.as_bytes()) {
            tracing::debug!(path = %topic.path().display(), "ignoring an entry that is not a topic directory");
            continue;
        }
        for queue in fs::read_dir(topic.path()).at(topic.path())? {
            let queue = queue.at(topic.path())?;
            match queue.file_name().to_string_lossy().parse::<i32>() {
                Ok(id) if id >= 0 && queue.file_type().at(queue.path())?.is_dir() => {
                    dirs.push((name.clone(), id, queue.path()))
                }
                _ => {
                    tracing::debug!(path = %queue.path().display(), "ignoring an entry that is not a queue directory")
                }
            }
        }
    }
    dirs.sort();
    for (topic, queue_id, dir) in dirs {
        load_queue(&mut dispatcher, config, topic, queue_id, dir, limit, log_min)?;
    }
    Ok(dispatcher)
}

fn load_queue(
    dispatcher: &mut Dispatcher,
    config: &StoreConfig,
    topic: String,
    queue_id: i32,
    dir: PathBuf,
    limit: u64,
    log_min: u64,
) -> Result<(), StoreError> {
    let per_file = config.cq_entries_per_file();
    let listed =
        segment::list_files(&dir, config.mapped_file_size_consume_queue, "mapped_file_size_consume_queue")?;
    let mut files = Vec::with_capacity(listed.len());
    for (start_byte, path) in listed {
        let (map, writer) = segment::open_file(&path, None)?;
        files.push((start_byte / CQ_ENTRY_SIZE, map, writer));
    }
    let entry = |files: &[(u64, Arc<MappedFile>, MapWriter)], index: u64| -> [u8; ENTRY] {
        let f = &files[((index - files[0].0) / per_file) as usize];
        let at = ((index - f.0) * CQ_ENTRY_SIZE) as usize;
        let mut e = [0; ENTRY];
        e.copy_from_slice(&f.2.peek()[at..at + ENTRY]);
        e
    };
    let (first, last) = match (files.first(), files.last()) {
        (Some(f), Some(l)) => (f.0, l.0 + per_file),
        _ => (0, 0),
    };
    // The cut: the first entry that is zero or points at or beyond `limit`.
    let (mut lo, mut hi) = (first, last);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let raw = entry(&files, mid);
        // A negative offset is garbage: keep it, so that validation below reports it.
        let keep = !is_zero(&raw) && (is_blank(&raw) || decode_entry(&raw).0 < limit as i64);
        if keep { lo = mid + 1 } else { hi = mid }
    }
    let cut = lo;
    // Validate the kept entries of the last file (RocketMQ checks its last files the same way):
    // each is blank padding or a message position, in log order.
    if cut > first {
        let file_start = first + (cut - 1 - first) / per_file * per_file;
        let mut prev_end = 0u64;
        for index in file_start..cut {
            let raw = entry(&files, index);
            if is_blank(&raw) {
                continue;
            }
            let (phys, size, _) = decode_entry(&raw);
            if phys < 0 || size <= 0 || (phys as u64) < prev_end {
                let f = &files[((index - first) / per_file) as usize];
                return Err(StoreError::ConsumeQueueCorrupt {
                    path: f.1.path().to_path_buf(),
                    index,
                    reason: format!("entry ({phys}, {size}) is not a message position after {prev_end}"),
                });
            }
            prev_end = phys as u64 + size as u64;
        }
    }
    // Drop files wholly past the cut (keep the one holding it), zero the rest of that file.
    let keep_files = if cut == first { 0 } else { ((cut - 1 - first) / per_file + 1) as usize };
    let mut removed = false;
    for (_, map, _) in files.drain(keep_files..) {
        fs::remove_file(map.path()).at(map.path())?;
        removed = true;
    }
    if removed {
        segment::sync_dir(&dir)?;
    }
    let cq = Arc::new(ConsumeQueue {
        topic,
        queue_id,
        dir,
        entries_per_file: per_file,
        files: RwLock::new(VecDeque::new()),
        min: AtomicU64::new(cut),
        max: AtomicU64::new(cut),
        flushed: AtomicU64::new(cut),
        dir_dirty: AtomicBool::new(false),
        dirs_new: AtomicBool::new(false),
    });
    let n = files.len();
    let mut last_writer = None;
    for (i, (start, map, mut writer)) in files.into_iter().enumerate() {
        if i + 1 == n {
            let pos = ((cut - start) * CQ_ENTRY_SIZE) as usize;
            writer.seek(pos);
            let zeroed = writer.zero(pos..map.len());
            if zeroed > 0 {
                map.flush(pos..map.len()).at(map.path())?;
            }
            writer.publish();
            last_writer = Some(writer);
        } else {
            writer.seek(map.len());
            writer.publish();
        }
        cq.files.write().unwrap_or_else(|e| e.into_inner()).push_back((start, map));
    }
    // The queue's minimum: the first non-blank entry still in the log.
    {
        let files = cq.files.read().unwrap_or_else(|e| e.into_inner());
        let (mut lo, mut hi) = (first.min(cut), cut);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            let below = cq
                .raw_entry(&files, mid)
                .is_some_and(|raw| is_blank(&raw) || (decode_entry(&raw).0 as u64) < log_min);
            if below { lo = mid + 1 } else { hi = mid }
        }
        cq.min.store(lo, Ordering::Release);
    }
    dispatcher.register(cq, last_writer);
    Ok(())
}

/// The end (in the commit log) of the newest entry of any queue.
pub(crate) fn max_indexed_end(dispatcher: &Dispatcher) -> Option<u64> {
    dispatcher
        .queues()
        .filter_map(|cq| {
            let (_, max) = cq.bounds();
            let files = cq.files.read().unwrap_or_else(|e| e.into_inner());
            let raw = cq.raw_entry(&files, max.checked_sub(1)?)?;
            if is_blank(&raw) {
                return None;
            }
            let (phys, size, _) = decode_entry(&raw);
            Some(phys as u64 + size as u64)
        })
        .max()
}
