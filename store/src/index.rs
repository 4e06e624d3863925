//! RocketMQ's message index: `<root>/index/<yyyyMMddHHmmssSSS>` files that map a message's keys
//! and unique id (`topic#key`) to its physical offset, for `QUERY_MESSAGE` by key and by id
//! (`IndexService`, `IndexFile`, `IndexHeader`).
//!
//! # File format (Java's, byte for byte)
//!
//! ```text
//! header   40 bytes: beginTimestamp i64 | endTimestamp i64 | beginPhyOffset i64 |
//!                    endPhyOffset i64 | hashSlotCount i32 | indexCount i32 (starts at 1)
//! slots    maxHashSlotNum x i32: the newest entry of each hash slot (0: none)
//! entries  maxIndexNum x 20 bytes: keyHash i32 | phyOffset i64 |
//!                    timeDiff i32 (seconds after beginTimestamp) | previous entry of the slot i32
//! ```
//!
//! A key's hash is `abs(String.hashCode())` (0 for `Integer.MIN_VALUE`), its slot the hash
//! modulo the slot count; entries of a slot form a chain newest to oldest. A full file is
//! followed by a new one, named by the local time of its creation.
//!
//! # How logship builds it
//!
//! [`MessageIndex`] follows the commit log from outside it: [`catch_up`](MessageIndex::catch_up)
//! indexes every dispatched record since the last call (a master's puts and a slave's
//! replicated bytes alike), as Java's reput thread does after the consume queues. Keys are the
//! `UNIQ_KEY` property and each space-separated `KEYS` value; rolled-back transactional messages
//! are skipped, as in Java. Each batch writes its entries and slots, syncs them, then writes the
//! header, so a header on disk never counts entries that are not. Opening resumes after the last
//! indexed message, dropping index files that point past the log's end (a crash or a
//! truncation cut the log), so the index is rebuilt from the log on recovery.

use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use logship_core::LogSpan;

use crate::codec::{self, sys_flag};
use crate::env::Clock;
use crate::error::{IoContext, StoreError};
use crate::store::CommitLog;

/// The header's size.
pub const INDEX_HEADER_SIZE: u64 = 40;
const SLOT: u64 = 4;
const ENTRY: u64 = 20;
/// The `KEYS` property (`MessageConst.PROPERTY_KEYS`), space-separated keys.
pub const PROPERTY_KEYS: &str = "KEYS";
/// The `UNIQ_KEY` property (`PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX`): the client's message id.
pub const PROPERTY_UNIQ_KEY: &str = "UNIQ_KEY";

/// The index's sizes, as `MessageStoreConfig` names them. Both sides of a store directory (Java
/// and logship) must use the same, or neither reads the other's files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct IndexConfig {
    /// `maxHashSlotNum` (5,000,000).
    pub max_hash_slot_num: u32,
    /// `maxIndexNum` (20,000,000): entries per file.
    pub max_index_num: u32,
    /// `maxMsgsNumBatch` (64): the most offsets one query returns.
    pub max_msgs_num_batch: u32,
}

impl Default for IndexConfig {
    fn default() -> Self {
        Self { max_hash_slot_num: 5_000_000, max_index_num: 20_000_000, max_msgs_num_batch: 64 }
    }
}

impl IndexConfig {
    /// The size of one index file.
    pub fn file_size(&self) -> u64 {
        INDEX_HEADER_SIZE + u64::from(self.max_hash_slot_num) * SLOT + u64::from(self.max_index_num) * ENTRY
    }
}

/// An index file's header (`IndexHeader`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct IndexHeader {
    /// Store time of the first key.
    pub begin_timestamp: i64,
    /// Store time of the last key.
    pub end_timestamp: i64,
    /// Physical offset of the first key's message.
    pub begin_phy_offset: i64,
    /// Physical offset of the last key's message.
    pub end_phy_offset: i64,
    /// Slots in use.
    pub hash_slot_count: i32,
    /// One more than the entries written (entry 0 is never used).
    pub index_count: i32,
}

impl IndexHeader {
    fn encode(&self) -> [u8; 40] {
        let mut b = [0u8; 40];
        b[0..8].copy_from_slice(&self.begin_timestamp.to_be_bytes());
        b[8..16].copy_from_slice(&self.end_timestamp.to_be_bytes());
        b[16..24].copy_from_slice(&self.begin_phy_offset.to_be_bytes());
        b[24..32].copy_from_slice(&self.end_phy_offset.to_be_bytes());
        b[32..36].copy_from_slice(&self.hash_slot_count.to_be_bytes());
        b[36..40].copy_from_slice(&self.index_count.to_be_bytes());
        b
    }

    fn decode(b: &[u8; 40]) -> Self {
        let i64_at = |at: usize| i64::from_be_bytes(b[at..at + 8].try_into().expect("8 bytes"));
        let i32_at = |at: usize| i32::from_be_bytes(b[at..at + 4].try_into().expect("4 bytes"));
        Self {
            begin_timestamp: i64_at(0),
            end_timestamp: i64_at(8),
            begin_phy_offset: i64_at(16),
            end_phy_offset: i64_at(24),
            hash_slot_count: i32_at(32),
            index_count: i32_at(36),
        }
    }
}

/// `IndexFile.indexKeyHashMethod`: `abs(hashCode)`, 0 for `Integer.MIN_VALUE`.
pub fn index_key_hash(key: &str) -> i32 {
    codec::java_string_hash(key).checked_abs().unwrap_or(0)
}

/// One index file.
#[derive(Debug)]
struct IndexFile {
    path: PathBuf,
    file: File,
    config: IndexConfig,
    header: IndexHeader,
    /// Writes of [`put_key`](Self::put_key) not in the file yet (see [`Pending`]).
    pending: Pending,
}

/// The writes of one catch-up round, held until [`IndexFile::write_pending`]: the entries
/// appended (contiguous in the file, so one write), and the slots changed (each its own
/// write at the end, the last value only), instead of two writes per key. Reads of a slot
/// look here first; every path that reads the file or syncs it writes these out first.
#[derive(Debug, Default)]
struct Pending {
    /// Where `entries` begin in the file.
    entries_at: u64,
    entries: Vec<u8>,
    slots: std::collections::HashMap<u64, i32>,
}

impl IndexFile {
    fn create(path: PathBuf, config: IndexConfig, end_phy: i64, end_ts: i64) -> Result<Self, StoreError> {
        let file = OpenOptions::new().read(true).write(true).create_new(true).open(&path).at(&path)?;
        file.set_len(config.file_size()).at(&path)?;
        let mut header = IndexHeader { index_count: 1, ..IndexHeader::default() };
        if end_phy > 0 {
            header.begin_phy_offset = end_phy;
            header.end_phy_offset = end_phy;
        }
        if end_ts > 0 {
            header.begin_timestamp = end_ts;
            header.end_timestamp = end_ts;
        }
        let f = Self { path, file, config, header, pending: Pending::default() };
        f.write_header()?;
        Ok(f)
    }

    fn open(path: PathBuf, config: IndexConfig) -> Result<Self, StoreError> {
        let file = OpenOptions::new().read(true).write(true).open(&path).at(&path)?;
        let len = file.metadata().at(&path)?.len();
        if len != config.file_size() {
            return Err(StoreError::IndexFileSize { path, found: len, expected: config.file_size() });
        }
        let mut b = [0u8; 40];
        file.read_exact_at(&mut b, 0).at(&path)?;
        let header = IndexHeader::decode(&b);
        if header.index_count < 0 || header.index_count as i64 > i64::from(config.max_index_num) {
            return Err(StoreError::IndexFileCorrupt {
                path,
                reason: format!("indexCount {} outside 1..={}", header.index_count, config.max_index_num),
            });
        }
        Ok(Self { path, file, config, header, pending: Pending::default() })
    }

    /// Writes the held entries and slots into the file (not synced).
    fn write_pending(&mut self) -> Result<(), StoreError> {
        let p = &mut self.pending;
        if !p.entries.is_empty() {
            self.file.write_all_at(&p.entries, p.entries_at).at(&self.path)?;
            p.entries.clear();
        }
        let mut slots: Vec<(u64, i32)> = p.slots.drain().collect();
        slots.sort_unstable();
        for (at, value) in slots {
            self.file.write_all_at(&value.to_be_bytes(), at).at(&self.path)?;
        }
        Ok(())
    }

    fn write_header(&self) -> Result<(), StoreError> {
        self.file.write_all_at(&self.header.encode(), 0).at(&self.path)
    }

    fn is_write_full(&self) -> bool {
        self.header.index_count as i64 >= i64::from(self.config.max_index_num)
    }

    fn read_i32(&self, at: u64) -> Result<i32, StoreError> {
        let mut b = [0u8; 4];
        self.file.read_exact_at(&mut b, at).at(&self.path)?;
        Ok(i32::from_be_bytes(b))
    }

    fn slot_at(&self, hash: i32) -> u64 {
        INDEX_HEADER_SIZE + (hash as u64 % u64::from(self.config.max_hash_slot_num)) * SLOT
    }

    fn entry_at(&self, index: i32) -> u64 {
        INDEX_HEADER_SIZE + u64::from(self.config.max_hash_slot_num) * SLOT + index as u64 * ENTRY
    }

    /// `IndexFile.putKey`; false when the file is full.
    fn put_key(&mut self, key: &str, phy_offset: i64, store_timestamp: i64) -> Result<bool, StoreError> {
        if self.is_write_full() {
            return Ok(false);
        }
        let h = &mut self.header;
        let key_hash = index_key_hash(key);
        let slot_pos =
            INDEX_HEADER_SIZE + (key_hash as u64 % u64::from(self.config.max_hash_slot_num)) * SLOT;
        let mut slot_value = match self.pending.slots.get(&slot_pos) {
            Some(&v) => v,
            None => {
                let mut b = [0u8; 4];
                self.file.read_exact_at(&mut b, slot_pos).at(&self.path)?;
                i32::from_be_bytes(b)
            }
        };
        if slot_value <= 0 || slot_value > h.index_count {
            slot_value = 0;
        }
        let mut time_diff = (store_timestamp - h.begin_timestamp) / 1000;
        if h.begin_timestamp <= 0 {
            time_diff = 0;
        } else if time_diff > i64::from(i32::MAX) {
            time_diff = i64::from(i32::MAX);
        } else if time_diff < 0 {
            time_diff = 0;
        }
        let mut e = [0u8; 20];
        e[0..4].copy_from_slice(&key_hash.to_be_bytes());
        e[4..12].copy_from_slice(&phy_offset.to_be_bytes());
        e[12..16].copy_from_slice(&(time_diff as i32).to_be_bytes());
        e[16..20].copy_from_slice(&slot_value.to_be_bytes());
        let at = INDEX_HEADER_SIZE
            + u64::from(self.config.max_hash_slot_num) * SLOT
            + h.index_count as u64 * ENTRY;
        let p = &mut self.pending;
        if p.entries.is_empty() {
            p.entries_at = at;
        }
        debug_assert_eq!(p.entries_at + p.entries.len() as u64, at, "entries are appended in order");
        p.entries.extend_from_slice(&e);
        p.slots.insert(slot_pos, h.index_count);
        if h.index_count <= 1 {
            h.begin_phy_offset = phy_offset;
            h.begin_timestamp = store_timestamp;
        }
        if slot_value == 0 {
            h.hash_slot_count += 1;
        }
        h.index_count += 1;
        h.end_phy_offset = phy_offset;
        h.end_timestamp = store_timestamp;
        Ok(true)
    }

    /// `IndexFile.isTimeMatched`.
    fn is_time_matched(&self, begin: i64, end: i64) -> bool {
        let (b, e) = (self.header.begin_timestamp, self.header.end_timestamp);
        (begin < b && end > e) || (begin >= b && begin <= e) || (end >= b && end <= e)
    }

    /// `IndexFile.selectPhyOffset`.
    fn select_phy_offsets(
        &self,
        out: &mut Vec<i64>,
        key: &str,
        max_num: usize,
        begin: i64,
        end: i64,
    ) -> Result<(), StoreError> {
        let key_hash = index_key_hash(key);
        let count = self.header.index_count;
        let slot_value = self.read_i32(self.slot_at(key_hash))?;
        if slot_value <= 0 || slot_value > count || count <= 1 {
            return Ok(());
        }
        let mut next = slot_value;
        // The chain is at most `count` long; a corrupt file must not loop.
        for _ in 0..count {
            if out.len() >= max_num {
                break;
            }
            let mut e = [0u8; 20];
            self.file.read_exact_at(&mut e, self.entry_at(next)).at(&self.path)?;
            let hash = i32::from_be_bytes(e[0..4].try_into().expect("4 bytes"));
            let phy = i64::from_be_bytes(e[4..12].try_into().expect("8 bytes"));
            let diff = i64::from(i32::from_be_bytes(e[12..16].try_into().expect("4 bytes")));
            let prev = i32::from_be_bytes(e[16..20].try_into().expect("4 bytes"));
            if diff < 0 {
                break;
            }
            let time = self.header.begin_timestamp + diff * 1000;
            if hash == key_hash && time >= begin && time <= end {
                out.push(phy);
            }
            if prev <= 0 || prev > count || prev == next || time < begin {
                break;
            }
            next = prev;
        }
        Ok(())
    }

    fn sync(&self) -> Result<(), StoreError> {
        self.file
            .sync_data()
            .map_err(|e| StoreError::FlushFailed { path: self.path.clone(), source: Arc::new(e) })
    }
}

/// What [`MessageIndex::query_offsets`] found (`QueryOffsetResult`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryOffsetResult {
    /// Physical offsets of messages with the key, newest file first.
    pub phy_offsets: Vec<i64>,
    /// The newest file's last store time (`indexLastUpdateTimestamp`).
    pub index_last_update_timestamp: i64,
    /// The newest file's last physical offset (`indexLastUpdatePhyoffset`).
    pub index_last_update_phyoffset: i64,
}

/// What [`MessageIndex::query_message`] found (`QueryMessageResult`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QueryMessageResult {
    /// The stored messages, in physical order, zero-copy.
    pub messages: Vec<Bytes>,
    /// As in [`QueryOffsetResult`].
    pub index_last_update_timestamp: i64,
    /// As in [`QueryOffsetResult`].
    pub index_last_update_phyoffset: i64,
}

#[derive(Debug)]
struct IndexState {
    files: Vec<IndexFile>,
    /// Every record before this commit-log offset is indexed.
    indexed_to: u64,
    /// A message whose keys may be partly indexed already: each is checked before it is added.
    partial: Option<u64>,
}

/// The message index of a store (Java's `IndexService`), in `<root>/index/`.
pub struct MessageIndex {
    dir: PathBuf,
    config: IndexConfig,
    clock: Arc<dyn Clock>,
    state: Mutex<IndexState>,
}

impl std::fmt::Debug for MessageIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MessageIndex")
            .field("dir", &self.dir)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// Drops the newest files while they index a message at or past `end`.
fn drop_past(dir: &Path, files: &mut Vec<IndexFile>, end: u64) -> Result<(), StoreError> {
    let mut dropped = false;
    while files.last().is_some_and(|f| {
        f.header.end_phy_offset as u64 >= end && (f.header.index_count > 1 || f.header.end_phy_offset > 0)
    }) {
        let f = files.pop().expect("checked");
        tracing::warn!(path = %f.path.display(), end_phy = f.header.end_phy_offset, log_end = end, "index file reaches past the log's end; its messages are indexed again");
        drop(f.file);
        fs::remove_file(&f.path).at(&f.path)?;
        dropped = true;
    }
    if dropped {
        crate::segment::sync_dir(dir)?;
    }
    Ok(())
}

/// Where indexing resumes: at the last indexed message, whose keys may have been cut off by a
/// full file or a drop (Java re-indexes it too, duplicating the keys it already has; logship
/// adds only the missing ones), or the log's start.
fn resume_point(files: &[IndexFile], log: &CommitLog) -> (u64, Option<u64>) {
    match files.iter().rev().find(|f| f.header.end_phy_offset > 0 || f.header.index_count > 1) {
        Some(f) if f.header.end_phy_offset as u64 >= log.min_offset() => {
            let at = f.header.end_phy_offset as u64;
            (at, Some(at))
        }
        _ => (log.min_offset(), None),
    }
}

/// Whether some file already maps `key` to `phy`.
fn has_entry(s: &IndexState, key: &str, phy: i64) -> Result<bool, StoreError> {
    for f in s.files.iter().rev() {
        let mut found = Vec::new();
        f.select_phy_offsets(&mut found, key, usize::MAX, i64::MIN, i64::MAX)?;
        if found.contains(&phy) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `UtilAll.timeMillisToHumanString`: `yyyyMMddHHmmssSSS` in local time.
fn human_time(millis: i64) -> String {
    let (y, mo, d, h, mi, s) = crate::mmap::local_time(millis).unwrap_or((1970, 1, 1, 0, 0, 0));
    format!("{y:04}{mo:02}{d:02}{h:02}{mi:02}{s:02}{:03}", millis.rem_euclid(1000))
}

impl MessageIndex {
    /// Opens the index of the store `log` (its `<root>/index/`), with the store's clock for new
    /// files' names. Files are loaded in name order; files that point at or past the log's end
    /// are dropped (their messages are indexed again from the log by
    /// [`catch_up`](Self::catch_up)). A file of the wrong size is
    /// [`StoreError::IndexFileSize`].
    pub fn open(log: &CommitLog, config: IndexConfig) -> Result<Self, StoreError> {
        Self::open_in(log.shared.root.join("index"), log, config)
    }

    /// [`open`](Self::open) with the index in `dir`.
    pub fn open_in(dir: PathBuf, log: &CommitLog, config: IndexConfig) -> Result<Self, StoreError> {
        fs::create_dir_all(&dir).at(&dir)?;
        let mut names: Vec<PathBuf> = fs::read_dir(&dir)
            .at(&dir)?
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| {
                p.is_file()
                    && p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
            })
            .collect();
        names.sort();
        let mut files = Vec::with_capacity(names.len());
        for path in names {
            let f = IndexFile::open(path, config)?;
            if f.header == IndexHeader::default() {
                // Created and never flushed (Java writes the header only on flush): it counts
                // nothing, so nothing is lost by indexing its messages again.
                tracing::warn!(path = %f.path.display(), "index file with an empty header; dropped");
                drop(f.file);
                fs::remove_file(&f.path).at(&f.path)?;
                continue;
            }
            files.push(f);
        }
        drop_past(&dir, &mut files, log.max_offset())?;
        let (indexed_to, partial) = resume_point(&files, log);
        let clock = Arc::clone(&log.shared.env.clock);
        Ok(Self { dir, config, clock, state: Mutex::new(IndexState { files, indexed_to, partial }) })
    }

    /// Every record before this offset is indexed.
    pub fn indexed_to(&self) -> u64 {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).indexed_to
    }

    /// The headers of the index files, oldest first.
    pub fn headers(&self) -> Vec<(PathBuf, IndexHeader)> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.files.iter().map(|f| (f.path.clone(), f.header)).collect()
    }

    fn new_file(&self, s: &mut IndexState) -> Result<(), StoreError> {
        let (end_phy, end_ts) =
            s.files.last().map_or((0, 0), |f| (f.header.end_phy_offset, f.header.end_timestamp));
        let mut now = self.clock.now_millis();
        let path = loop {
            let p = self.dir.join(human_time(now));
            if !p.exists() {
                break p;
            }
            now += 1;
        };
        tracing::info!(path = %path.display(), "new index file");
        s.files.push(IndexFile::create(path, self.config, end_phy, end_ts)?);
        crate::segment::sync_dir(&self.dir)
    }

    fn put_key(&self, s: &mut IndexState, key: &str, phy: i64, ts: i64) -> Result<(), StoreError> {
        if s.files.is_empty() {
            self.new_file(s)?;
        }
        let last = s.files.last_mut().expect("one file at least");
        if !last.put_key(key, phy, ts)? {
            last.write_pending()?;
            last.write_header()?;
            last.sync()?;
            self.new_file(s)?;
            let last = s.files.last_mut().expect("just created");
            last.put_key(key, phy, ts)?;
        }
        Ok(())
    }

    /// Indexes every record dispatched to the consume queues since the last call, then syncs
    /// the entries and writes the headers. Returns the offset indexed to.
    pub fn catch_up(&self, log: &CommitLog) -> Result<u64, StoreError> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let end = log.shared.log.dispatched.load(Ordering::Acquire).min(log.max_offset());
        let seg = log.shared.log.segment_size;
        let mut at = s.indexed_to.max(log.min_offset());
        let start = at;
        let mut result = self.index_records(&mut s, log, &mut at, end, seg);
        // What the round held goes into the file before anyone reads it (under this lock).
        if let Some(last) = s.files.last_mut()
            && let Err(e) = last.write_pending()
        {
            result = result.and(Err(e));
        }
        if at != start {
            // Entries before the header that counts them.
            if let Some(last) = s.files.last() {
                last.sync()?;
                last.write_header()?;
            }
        }
        result.map(|()| at)
    }

    fn index_records(
        &self,
        s: &mut IndexState,
        log: &CommitLog,
        at: &mut u64,
        end: u64,
        seg: u64,
    ) -> Result<(), StoreError> {
        let mut key_buf = String::new();
        while *at < end {
            let head = log.read(LogSpan { offset: *at, len: (end - *at).min(8) as u32 })?;
            if head.len() < 8 {
                break;
            }
            let total = i32::from_be_bytes([head[0], head[1], head[2], head[3]]);
            let magic = i32::from_be_bytes([head[4], head[5], head[6], head[7]]);
            if magic == codec::BLANK_MAGIC_CODE {
                *at = (*at / seg + 1) * seg;
                s.indexed_to = *at;
                continue;
            }
            if total <= 0 {
                return Err(StoreError::NotAMessage { offset: *at });
            }
            // The record read in place (checked as a full read checks it), without copying
            // out its topic and every property.
            let (record, corrupt) = log.shared.read_record(*at)?;
            let checks = codec::Checks { crc: true, zero_suffix: false };
            let m = match codec::parse_record(&record, record.len(), Some(*at), checks) {
                codec::Record::Message(m) => m,
                codec::Record::Blank { .. } => return Err(corrupt(codec::RecordError::Blank)),
                codec::Record::Incomplete => {
                    let available = record.len();
                    return Err(corrupt(codec::RecordError::Truncated { total: total as usize, available }));
                }
                codec::Record::Invalid { error } => return Err(corrupt(error)),
            };
            let skip = m.sys_flag & sys_flag::TRANSACTION_MASK == sys_flag::TRANSACTION_ROLLBACK_TYPE;
            if !skip {
                let (topic, phy) = (String::from_utf8_lossy(m.topic), *at as i64);
                let partial = s.partial.take() == Some(*at);
                // The last of each name, as a full read keeps it.
                let last = |name: &str| {
                    codec::property_entries(m.properties)
                        .filter(|(n, _)| *n == name.as_bytes())
                        .last()
                        .map(|(_, v)| String::from_utf8_lossy(v))
                };
                let (uniq, keys) = (last(PROPERTY_UNIQ_KEY), last(PROPERTY_KEYS));
                let keys = keys.as_deref().into_iter().flat_map(|k| k.split(' '));
                for key in uniq.as_deref().into_iter().chain(keys.filter(|k| !k.is_empty())) {
                    key_buf.clear();
                    key_buf.push_str(&topic);
                    key_buf.push('#');
                    key_buf.push_str(key);
                    let key = key_buf.as_str();
                    if partial {
                        // The lookup reads the file: the round's writes go in first.
                        if let Some(last) = s.files.last_mut() {
                            last.write_pending()?;
                        }
                    }
                    if partial && has_entry(s, key, phy)? {
                        continue;
                    }
                    self.put_key(s, key, phy, m.store_timestamp)?;
                }
            }
            *at += total as u64;
            s.indexed_to = *at;
        }
        Ok(())
    }

    /// Makes the headers durable (Java flushes index files on shutdown and when full).
    pub fn flush(&self) -> Result<(), StoreError> {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for f in &s.files {
            f.write_header()?;
            f.sync()?;
        }
        Ok(())
    }

    /// After [`CommitLog::truncate_to`] cut `log`: drops the files that index messages at or
    /// past its new end, so they are indexed again from the log.
    pub fn truncate(&self, log: &CommitLog) -> Result<(), StoreError> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        drop_past(&self.dir, &mut s.files, log.max_offset())?;
        (s.indexed_to, s.partial) = resume_point(&s.files, log);
        Ok(())
    }

    /// `IndexService.deleteExpiredFile`: after retention moved the log's minimum to `min`,
    /// deletes the files (never the last) whose messages are all below it.
    pub fn delete_expired(&self, min: u64) -> Result<usize, StoreError> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut n = 0;
        while s.files.len() > 1 && (s.files[0].header.end_phy_offset as u64) < min {
            let f = s.files.remove(0);
            drop(f.file);
            fs::remove_file(&f.path).at(&f.path)?;
            n += 1;
        }
        if n > 0 {
            crate::segment::sync_dir(&self.dir)?;
        }
        Ok(n)
    }

    /// `IndexService.queryOffset`: physical offsets of messages of `topic` with `key` (a key or
    /// a unique id) stored in `[begin, end]`, newest file first, at most `min(max_num,
    /// maxMsgsNumBatch)`.
    pub fn query_offsets(
        &self,
        topic: &str,
        key: &str,
        max_num: u32,
        begin: i64,
        end: i64,
    ) -> Result<QueryOffsetResult, StoreError> {
        let max_num = max_num.min(self.config.max_msgs_num_batch) as usize;
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let mut out = QueryOffsetResult {
            phy_offsets: Vec::new(),
            index_last_update_timestamp: 0,
            index_last_update_phyoffset: 0,
        };
        let key = format!("{topic}#{key}");
        for (i, f) in s.files.iter().enumerate().rev() {
            if i + 1 == s.files.len() {
                out.index_last_update_timestamp = f.header.end_timestamp;
                out.index_last_update_phyoffset = f.header.end_phy_offset;
            }
            if f.is_time_matched(begin, end) {
                f.select_phy_offsets(&mut out.phy_offsets, &key, max_num, begin, end)?;
            }
            if f.header.begin_timestamp < begin || out.phy_offsets.len() >= max_num {
                break;
            }
        }
        Ok(out)
    }

    /// `DefaultMessageStore.queryMessage` (`QUERY_MESSAGE`): the stored messages for
    /// [`query_offsets`](Self::query_offsets), in physical order; up to three rounds, each
    /// ending at the store time of the previous round's first message, while none is found.
    /// Offsets whose message is gone (retention) are skipped.
    pub fn query_message(
        &self,
        log: &CommitLog,
        topic: &str,
        key: &str,
        max_num: u32,
        begin: i64,
        end: i64,
    ) -> Result<QueryMessageResult, StoreError> {
        let mut r = QueryMessageResult {
            messages: Vec::new(),
            index_last_update_timestamp: 0,
            index_last_update_phyoffset: 0,
        };
        let mut last_query_time = end;
        for _ in 0..3 {
            let mut q = self.query_offsets(topic, key, max_num, begin, last_query_time)?;
            if q.phy_offsets.is_empty() {
                break;
            }
            q.phy_offsets.sort_unstable();
            r.index_last_update_phyoffset = q.index_last_update_phyoffset;
            r.index_last_update_timestamp = q.index_last_update_timestamp;
            for (m, &offset) in q.phy_offsets.iter().enumerate() {
                match log.read_message(offset.max(0) as u64) {
                    Ok(msg) => {
                        if m == 0 {
                            last_query_time = msg.store_timestamp;
                        }
                        let bytes = log.read(LogSpan { offset: offset as u64, len: msg.total_size })?;
                        r.messages.push(bytes);
                    }
                    Err(e) => tracing::debug!(offset, error = %e, "an indexed message is gone"),
                }
            }
            if !r.messages.is_empty() || last_query_time < begin {
                break;
            }
        }
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_hashes_are_javas_abs_hash_code() {
        assert_eq!(index_key_hash("TopicA#key-1"), codec::java_string_hash("TopicA#key-1").abs());
        // "polygenelubricants".hashCode() == Integer.MIN_VALUE
        assert_eq!(codec::java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(index_key_hash("polygenelubricants"), 0);
    }

    #[test]
    fn file_names_are_local_time_with_milliseconds() {
        let n = human_time(1_767_268_800_123);
        assert_eq!(n.len(), 17);
        assert!(n.ends_with("123") && n.bytes().all(|b| b.is_ascii_digit()), "{n}");
    }

    #[test]
    fn headers_round_trip() {
        let h = IndexHeader {
            begin_timestamp: 1,
            end_timestamp: 2,
            begin_phy_offset: 3,
            end_phy_offset: 4,
            hash_slot_count: 5,
            index_count: 6,
        };
        assert_eq!(IndexHeader::decode(&h.encode()), h);
    }
}
