//! Opening a store: lock, checkpoint, segment checks, commit-log recovery, consume-queue recovery.
//!
//! How the end of the log is found depends on how the last run ended (protocol notes §6.6):
//!
//! - **Clean** (no `abort` marker, the checkpoint says clean): the end recorded at shutdown is
//!   trusted after a cheap consistency check. No scan.
//! - **Crash** (`abort` marker present): the log is scanned from the start of the segment holding
//!   the checkpointed durable boundary, checking every record (CRC with `check_crc_on_recover`;
//!   past the boundary, also the zero suffix a write torn inside the properties leaves). At the
//!   first invalid record:
//!   - before the durable boundary, bytes that had been durable are damaged: **corruption**;
//!   - followed by nothing but zeros: the end of the log, nothing to do;
//!   - followed by a valid message anywhere later: damage inside the log, **corruption**;
//!   - otherwise a **torn tail**: the rest of its segment is zeroed and fsynced and later segments
//!     are deleted, so the torn bytes can never be recovered later (RocketMQ #10666).
//!
//!   Corruption is reported with the segment and offset, unless
//!   [`RecoveryOptions::truncate_on_corruption`](crate::RecoveryOptions) is set, in which case the
//!   log is cut there like a torn tail.
//! - **Foreign** stores (a checkpoint without the logship block, written by RocketMQ) are
//!   recovered as RocketMQ does: after a clean shutdown the last three segments are scanned and
//!   the log must end in zeros; after a crash the scan starts at the newest segment whose first
//!   message is older than the checkpoint timestamps, with the rules above minus the durable
//!   boundary.
//!
//! Consume queues are then trimmed to the durable dispatch point and re-dispatched from the log.

use std::cell::Cell;
use std::collections::HashMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use crate::checkpoint::{Checkpoint, CheckpointFile, LogshipState};
use crate::codec::{self, Checks, Record, RecordError};

const ALL: Checks = Checks { crc: true, zero_suffix: true };
use crate::config::StoreConfig;
use crate::consume_queue::{self, Dispatcher, QueueRegistry};
use crate::epoch_file::{EpochEntry, EpochFile};
use crate::error::{IoContext, StoreError};
use crate::mmap::{self, MapWriter, MappedFile};
use crate::segment::{self, ActiveSegment, Segment, SegmentTable};
use crate::truncate::{self, EpochState};

/// How the previous run of the store ended, as recovery judged it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RecoveryKind {
    /// No segments: a new (or emptied) store.
    New,
    /// A clean shutdown: reopened without scanning.
    Clean,
    /// A crash (the `abort` marker was present): scanned from the durable boundary.
    Crash,
    /// A clean RocketMQ store without logship's checkpoint block: the last segments were scanned.
    ForeignClean,
    /// A crashed RocketMQ store without logship's checkpoint block.
    ForeignCrash,
}

impl RecoveryKind {
    /// The kind as a log value: `new`, `clean`, `crash`, `foreign_clean`, `foreign_crash`.
    pub fn name(self) -> &'static str {
        match self {
            Self::New => "new",
            Self::Clean => "clean",
            Self::Crash => "crash",
            Self::ForeignClean => "foreign_clean",
            Self::ForeignCrash => "foreign_crash",
        }
    }
}

/// What recovery found and did.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// How the previous run ended.
    pub kind: RecoveryKind,
    /// Where the scan started, if the log was scanned.
    pub scanned_from: Option<u64>,
    /// The recovered end of the log.
    pub end: u64,
    /// The first invalid record, where the log was cut, and why it was invalid.
    pub truncated_at: Option<(u64, RecordError)>,
    /// Bytes zeroed after the end (a torn tail) and made durable.
    pub zeroed_bytes: u64,
    /// Segment files deleted: empty trailing segments and segments past a torn tail.
    pub removed_segments: Vec<PathBuf>,
    /// Where consume-queue dispatch restarted.
    pub dispatch_from: u64,
}

/// Everything `CommitLog::open` needs from recovery.
pub(crate) struct Recovered {
    pub(crate) commitlog_dir: PathBuf,
    pub(crate) segments: SegmentTable,
    pub(crate) active: Option<ActiveSegment>,
    pub(crate) min: u64,
    pub(crate) end: u64,
    pub(crate) dispatcher: Dispatcher,
    pub(crate) queues: Arc<QueueRegistry>,
    pub(crate) checkpoint: CheckpointFile,
    pub(crate) lock_file: Arc<File>,
    pub(crate) report: RecoveryReport,
    pub(crate) epochs: EpochState,
    pub(crate) confirm: u64,
    /// The replication-confirmed offset to start from.
    pub(crate) confirmed: u64,
}

struct Loaded {
    base: u64,
    map: Arc<MappedFile>,
    writer: MapWriter,
}

struct Invalid {
    offset: u64,
    seg: usize,
    error: RecordError,
}

struct Scan {
    end: u64,
    invalid: Option<Invalid>,
}

struct Ctx<'a> {
    config: &'a StoreConfig,
    size: u64,
    segs: Vec<Loaded>,
    min: u64,
    /// An offset from which [`Ctx::zero_after`] found every byte of the log to be zero, so that
    /// cutting the log there has nothing to zero and need not read those bytes again.
    zero_from: Cell<Option<u64>>,
}

impl Ctx<'_> {
    fn index_of(&self, offset: u64) -> usize {
        let first = self.segs[0].base;
        (((offset.max(first) - first) / self.size) as usize).min(self.segs.len() - 1)
    }

    fn data_start(&self, i: usize) -> u64 {
        self.segs[i].base.max(self.min)
    }

    /// Walks records from `start` (a record boundary) until an invalid one or the end of the
    /// last segment. Records from `torn_from` on may be torn writes and get the zero-suffix check.
    fn scan(&self, start: u64, torn_from: u64) -> Scan {
        let mut pos = start;
        loop {
            let i = ((pos - self.segs[0].base) / self.size) as usize;
            let Some(seg) = self.segs.get(i) else {
                return Scan { end: pos, invalid: None };
            };
            let rel = (pos - seg.base) as usize;
            let remaining = self.size as usize - rel;
            if remaining < codec::BLANK_RECORD_LEN {
                pos = seg.base + self.size; // too small for a record: padding
                continue;
            }
            let bytes = &seg.writer.peek()[rel..];
            let checks = Checks { crc: self.config.check_crc_on_recover, zero_suffix: pos >= torn_from };
            match codec::parse_record(bytes, remaining, Some(pos), checks) {
                Record::Message(v) => pos += v.total as u64,
                Record::Blank { len } => pos += len as u64,
                Record::Incomplete => {
                    let error = RecordError::Truncated { total: remaining + 1, available: remaining };
                    return Scan { end: pos, invalid: Some(Invalid { offset: pos, seg: i, error }) };
                }
                Record::Invalid { error } => {
                    return Scan { end: pos, invalid: Some(Invalid { offset: pos, seg: i, error }) };
                }
            }
        }
    }

    /// Whether everything from `inv` to the end of the log is zero (a cleanly ended log).
    fn zero_after(&self, inv: &Invalid) -> bool {
        let seg = &self.segs[inv.seg];
        let rel = (inv.offset - seg.base) as usize;
        let zero = mmap::all_zero(&seg.writer.peek()[rel..])
            && self.segs[inv.seg + 1..].iter().all(|s| mmap::all_zero(s.writer.peek()));
        if zero {
            self.zero_from.set(Some(inv.offset));
        }
        zero
    }

    /// Whether a valid message starts anywhere after `inv`: later in its segment or in a later
    /// segment. (A valid message needs its magic, consistent lengths, its own physical offset in
    /// its offset field, a legal topic and a matching body CRC, so one is never found by chance.)
    fn valid_message_after(&self, inv: &Invalid) -> bool {
        let size = self.size as usize;
        let first = (inv.offset - self.segs[inv.seg].base) as usize + 1;
        let page = mmap::PAGE_SIZE;
        self.segs[inv.seg..].iter().enumerate().any(|(i, seg)| {
            let bytes = seg.writer.peek();
            let message_at = |p: usize| {
                // Cheap filter first: the magic codes share their first three bytes.
                bytes[p + 4] == 0xDA
                    && bytes[p + 5] == 0xA3
                    && bytes[p + 6] == 0x20
                    && codec::MessageVersion::from_magic_code(i32::from_be_bytes([
                        bytes[p + 4],
                        bytes[p + 5],
                        bytes[p + 6],
                        bytes[p + 7],
                    ]))
                    .is_some()
                    && matches!(
                        codec::parse_record(&bytes[p..], size - p, Some(seg.base + p as u64), ALL),
                        Record::Message(_)
                    )
            };
            let limit = size.saturating_sub(codec::BLANK_RECORD_LEN);
            let mut p = if i == 0 { first } else { 0 };
            while p < limit {
                // A message's magic code (4 bytes in) is not zero, so no message has its magic
                // code in a page of zeros: skip every start whose magic would fall in one.
                let magic = p + 4;
                if magic % page == 0 {
                    let page_end = (magic + page).min(bytes.len());
                    if mmap::all_zero(&bytes[magic..page_end]) {
                        p = page_end - 4;
                        continue;
                    }
                }
                if message_at(p) {
                    return true;
                }
                p += 1;
            }
            false
        })
    }

    fn corruption(&self, inv: Invalid, report: &mut RecoveryReport) -> Result<u64, StoreError> {
        let segment = self.segs[inv.seg].map.path().to_path_buf();
        if self.config.recovery.truncate_on_corruption {
            tracing::error!(segment = %segment.display(), offset = inv.offset, error = %inv.error,
                "corrupt record; truncating there as the recovery options ask");
            report.truncated_at = Some((inv.offset, inv.error));
            Ok(inv.offset)
        } else {
            Err(StoreError::Corrupt { segment, offset: inv.offset, reason: inv.error })
        }
    }

    fn torn(inv: Invalid, report: &mut RecoveryReport) -> u64 {
        tracing::warn!(offset = inv.offset, error = %inv.error, "torn tail after a crash; truncating");
        report.truncated_at = Some((inv.offset, inv.error));
        inv.offset
    }

    /// Crash recovery from a durable boundary `flushed`.
    fn crash_end(&self, flushed: u64, report: &mut RecoveryReport) -> Result<u64, StoreError> {
        let start = self.data_start(self.index_of(flushed));
        report.scanned_from = Some(start);
        let scan = self.scan(start, flushed);
        match scan.invalid {
            None => Ok(scan.end),
            // Durable bytes are damaged.
            Some(inv) if inv.offset < flushed => self.corruption(inv, report),
            // Zeros to the end: where writing stopped, nothing torn.
            Some(inv) if inv.error == RecordError::Empty && self.zero_after(&inv) => Ok(inv.offset),
            // Valid messages after an invalid one: damage inside the log, not a torn tail.
            Some(inv) if self.valid_message_after(&inv) => self.corruption(inv, report),
            Some(inv) => Ok(Self::torn(inv, report)),
        }
    }

    /// RocketMQ's normal recovery of a store without logship's checkpoint block.
    fn foreign_clean_end(&self, report: &mut RecoveryReport) -> Result<u64, StoreError> {
        let start = self.data_start(self.segs.len().saturating_sub(3));
        report.scanned_from = Some(start);
        let scan = self.scan(start, u64::MAX);
        match scan.invalid {
            None => Ok(scan.end),
            Some(inv) if self.zero_after(&inv) => Ok(inv.offset),
            Some(inv) => self.corruption(inv, report),
        }
    }

    /// RocketMQ's abnormal recovery of a store without logship's checkpoint block (no durable
    /// boundary is known).
    fn foreign_crash_end(
        &self,
        ckpt: Option<&Checkpoint>,
        report: &mut RecoveryReport,
    ) -> Result<u64, StoreError> {
        let safe_ts = ckpt.map_or(0, |c| c.physic_msg_timestamp.min(c.logics_msg_timestamp) - 3000).max(0);
        let first_ts = |i: usize| {
            let seg = &self.segs[i];
            let start = self.data_start(i);
            let rel = (start - seg.base) as usize;
            match codec::parse_record(
                &seg.writer.peek()[rel..],
                self.size as usize - rel,
                Some(start),
                Checks::default(),
            ) {
                Record::Message(v) => Some(v.store_timestamp),
                _ => None,
            }
        };
        let from = (0..self.segs.len())
            .rev()
            .find(|&i| first_ts(i).is_some_and(|ts| ts != 0 && ts <= safe_ts))
            .unwrap_or(0);
        let start = self.data_start(from);
        report.scanned_from = Some(start);
        let scan = self.scan(start, 0);
        match scan.invalid {
            None => Ok(scan.end),
            Some(inv) if inv.error == RecordError::Empty && self.zero_after(&inv) => Ok(inv.offset),
            Some(inv) if self.valid_message_after(&inv) => self.corruption(inv, report),
            Some(inv) => Ok(Self::torn(inv, report)),
        }
    }

    /// Whether the end recorded at a clean shutdown is consistent with the files.
    fn clean_end_consistent(&self, clean_end: u64) -> bool {
        let last_end = self.segs.last().map_or(0, |s| s.base + self.size);
        if clean_end < self.min || clean_end > last_end {
            return false;
        }
        // Segments past the end must be empty (a preallocated next segment), and so must the
        // bytes at the end: a RocketMQ broker that appended after a clean logship shutdown
        // leaves logship's checkpoint block, and its stale end, as they were.
        let zero_at = |i: usize, rel: usize| {
            let page = self.segs[i].writer.peek();
            mmap::all_zero(&page[rel..(rel + codec::BLANK_RECORD_LEN).min(page.len())])
        };
        let tail_is_zero = (0..self.segs.len())
            .find(|&i| clean_end >= self.segs[i].base && clean_end < self.segs[i].base + self.size)
            .is_none_or(|i| zero_at(i, (clean_end - self.segs[i].base) as usize));
        tail_is_zero
            && (0..self.segs.len())
                .filter(|&i| self.data_start(i) >= clean_end)
                .all(|i| zero_at(i, (self.data_start(i) - self.segs[i].base) as usize))
    }
}

/// Opens and recovers the store at `root`, in phases: lock the store, load the checkpoint and
/// the segments and cross-check them, find the end of the log, cut the log there, install the
/// segments, recover the consume queues, and record the recovered state.
pub(crate) fn recover(root: &Path, config: &StoreConfig) -> Result<Recovered, StoreError> {
    let (commitlog_dir, lock_file) = lock_store(root, config)?;
    let (mut checkpoint, loaded) = CheckpointFile::open(&root.join("checkpoint"))?;
    let abort_path = root.join("abort");
    let abort = abort_path.exists();
    let size = config.mapped_file_size_commit_log;
    let mut block = loaded.as_ref().and_then(|c| c.logship);
    let mut segs = load_segments(&commitlog_dir, size, &lock_file)?;
    let epoch_file = EpochFile::new(
        config.store_path_epoch_file.clone().unwrap_or_else(|| root.join(EpochFile::FILE_NAME)),
    );
    let mut epochs = epoch_file.read()?;
    let epochs_before = epochs.clone();
    // A truncation interrupted by a crash is finished before anything else looks at the log.
    let intent = truncate::read_intent(root)?;
    if let Some(cut) = intent {
        finish_truncation(&commitlog_dir, &mut segs, &mut block, &mut epochs, cut, size)?;
    }
    let min = log_min(&segs, block, size);
    check_missing_segments(&commitlog_dir, config, &segs, block, size)?;
    let mut ctx = Ctx { config, size, segs, min, zero_from: Cell::new(None) };
    let mut report = RecoveryReport {
        kind: recovery_kind(ctx.segs.is_empty(), abort, block),
        scanned_from: None,
        end: 0,
        truncated_at: None,
        zeroed_bytes: 0,
        removed_segments: Vec::new(),
        dispatch_from: 0,
    };
    let end = find_end(&ctx, block, loaded.as_ref(), &mut report)?;
    let kept = cut_log(&mut ctx, &commitlog_dir, end, &mut report)?;
    let (min, end) = if kept.is_empty() { (0, 0) } else { (min, end) };
    report.end = end;
    let missing_epochs = config.require_epoch_file && !epoch_file.exists();
    if missing_epochs && end > 0 && config.adopt_log_without_epochs != Some(end) {
        return Err(StoreError::EpochFileMissing {
            path: epoch_file.path().to_path_buf(),
            backup: epoch_file.backup_path(),
            end,
        });
    }
    if missing_epochs && end > 0 {
        tracing::warn!(
            end,
            path = %epoch_file.path().display(),
            "taking a log without epochs as it is, as adopt_log_without_epochs says: its bytes cannot be \
             checked against a master's"
        );
    }
    let (segments, active) = install_segments(kept, size, end, &report)?;
    // The confirm offset (controller mode) never exceeds the recovered end; with
    // `dispatch_up_to_confirm` nothing past it is indexed.
    let confirm = loaded.as_ref().map_or(0, |c| c.confirm_phy_offset as u64).min(end);
    // A checkpoint from before the confirmed offset was kept (or from Java) takes its
    // confirmPhyOffset for it.
    let confirmed = loaded
        .as_ref()
        .map_or(0, |c| c.logship.and_then(|l| l.confirmed).unwrap_or(c.confirm_phy_offset as u64))
        .min(end);
    let confirmed = intent.map_or(confirmed, |cut| confirmed.min(cut));
    let dispatch_end = if config.dispatch_up_to_confirm { confirm.max(min) } else { end };
    let (dispatcher, queues, segments) = recover_consume_queues(
        root,
        config,
        &commitlog_dir,
        segments,
        block,
        min,
        dispatch_end,
        &mut report,
    )?;

    // Epochs that start past the recovered end lost their bytes in the crash.
    epochs.retain(|e| e.start_offset <= end);
    if epochs != epochs_before || (intent.is_some() && epoch_file.path().exists()) || missing_epochs {
        epoch_file.write(&epochs)?;
    }

    // Record the recovered state, then mark the store as running.
    let mut ckpt = loaded.unwrap_or_default();
    ckpt.confirm_phy_offset = confirm as i64;
    if let Some(cut) = intent {
        ckpt.confirm_phy_offset = ckpt.confirm_phy_offset.min(cut as i64);
        ckpt.master_flushed_offset = ckpt.master_flushed_offset.min(cut as i64);
    }
    ckpt.logship = Some(LogshipState {
        clean: false,
        flushed: dispatcher.dispatched,
        clean_end: 0,
        min_offset: min,
        dispatched: dispatcher.dispatched,
        confirmed: Some(confirmed),
    });
    checkpoint.write(ckpt)?;
    if intent.is_some() {
        // Everything the truncation implies is durable now.
        truncate::clear_intent(root)?;
    }
    File::create(&abort_path).at(&abort_path)?;
    segment::sync_dir(root)?;
    tracing::info!(
        kind = report.kind.name(),
        scanned_from = report.scanned_from,
        end = report.end,
        truncated_at = report.truncated_at.as_ref().map(|(at, _)| *at),
        truncated_because = report.truncated_at.as_ref().map(|(_, why)| tracing::field::display(why)),
        zeroed_bytes = report.zeroed_bytes,
        removed_segments = report.removed_segments.len(),
        dispatch_from = report.dispatch_from,
        "recovery finished"
    );
    Ok(Recovered {
        commitlog_dir,
        segments,
        active,
        min,
        end,
        dispatcher,
        queues,
        checkpoint,
        lock_file,
        report,
        epochs: EpochState { file: epoch_file, entries: epochs },
        confirm,
        confirmed,
    })
}

/// Finishes a truncation to `cut` that a crash interrupted (see the `truncate` module): caps
/// the checkpoint's durable boundary and dispatch point at the cut (so the zeros after it are
/// the end of the log, and the consume queues are trimmed to it), zeroes the segment holding
/// the cut from the cut on and deletes later segments, and drops epochs at or after the cut.
/// Idempotent; the intent is removed only once the recovered checkpoint is durable.
fn finish_truncation(
    commitlog_dir: &Path,
    segs: &mut Vec<Loaded>,
    block: &mut Option<LogshipState>,
    epochs: &mut Vec<EpochEntry>,
    cut: u64,
    size: u64,
) -> Result<(), StoreError> {
    tracing::warn!(cut, "finishing a truncation interrupted by a crash");
    if let Some(b) = block.as_mut() {
        b.clean = false;
        b.clean_end = 0;
        b.flushed = b.flushed.min(cut);
        b.dispatched = b.dispatched.min(cut);
    }
    let mut removed = false;
    while segs.last().is_some_and(|s| s.base >= cut) {
        let seg = segs.pop().expect("checked");
        let path = seg.map.path().to_path_buf();
        drop(seg);
        fs::remove_file(&path).at(&path)?;
        removed = true;
    }
    if removed {
        segment::sync_dir(commitlog_dir)?;
    }
    if let Some(seg) = segs.last_mut().filter(|s| cut >= s.base && cut < s.base + size) {
        let rel = (cut - seg.base) as usize;
        if seg.writer.zero(rel..size as usize) > 0 {
            seg.map.flush(rel..size as usize).at(seg.map.path())?;
        }
    }
    epochs.retain(|e| e.start_offset < cut);
    Ok(())
}

/// Creates the store's directories and takes the exclusive lock on `<root>/lock`. Returns the
/// commit-log directory and the lock.
fn lock_store(root: &Path, config: &StoreConfig) -> Result<(PathBuf, Arc<File>), StoreError> {
    fs::create_dir_all(root).at(root)?;
    let commitlog_dir = config.store_path_commit_log.clone().unwrap_or_else(|| root.join("commitlog"));
    fs::create_dir_all(&commitlog_dir).at(&commitlog_dir)?;
    let lock_path = root.join("lock");
    let lock_file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&lock_path)
        .at(&lock_path)?;
    if !mmap::try_lock_exclusive(&lock_file).at(&lock_path)? {
        // The holder wrote its PID when it took the lock; a RocketMQ broker writes "lock".
        let holder = fs::read_to_string(&lock_path).ok().and_then(|t| t.trim().parse::<u32>().ok());
        return Err(StoreError::Locked { path: lock_path, holder });
    }
    record_holder(&lock_file).at(&lock_path)?;
    Ok((commitlog_dir, Arc::new(lock_file)))
}

/// Writes this process's PID into the lock file it holds, for a second opener's error.
fn record_holder(mut lock_file: &File) -> std::io::Result<()> {
    use std::io::{Seek, Write};
    lock_file.set_len(0)?;
    lock_file.seek(std::io::SeekFrom::Start(0))?;
    writeln!(lock_file, "{}", std::process::id())
}

/// Maps every segment in the commit-log directory, oldest first.
fn load_segments(commitlog_dir: &Path, size: u64, lock_file: &Arc<File>) -> Result<Vec<Loaded>, StoreError> {
    let listed = segment::list_files(commitlog_dir, size, "mapped_file_size_commit_log")?;
    let mut segs = Vec::with_capacity(listed.len());
    for (base, path) in listed {
        let (map, writer) = segment::open_file(&path, Some(lock_file))?;
        segs.push(Loaded { base, map, writer });
    }
    Ok(segs)
}

/// The first offset of the log: the first segment's base, or the start a log adopted inside it.
fn log_min(segs: &[Loaded], block: Option<LogshipState>, size: u64) -> u64 {
    let mut min = segs.first().map_or(0, |s| s.base);
    if let (Some(b), Some(first)) = (block, segs.first()) {
        if b.min_offset > first.base && b.min_offset < first.base + size {
            min = b.min_offset;
        }
    }
    min
}

/// Cross-checks the files against the checkpoint: retention records the new minimum before it
/// deletes a segment, so a head segment missing below the recorded minimum is damage, as is a
/// log that ends before its durable boundary.
fn check_missing_segments(
    commitlog_dir: &Path,
    config: &StoreConfig,
    segs: &[Loaded],
    block: Option<LogshipState>,
    size: u64,
) -> Result<(), StoreError> {
    let Some(b) = block else {
        return Ok(());
    };
    let first = segs.first().map(|s| s.base);
    let last_end = segs.last().map_or(0, |s| s.base + size);
    let missing = match first {
        Some(f) if f > b.min_offset => Some((b.min_offset, f)),
        None if b.flushed > b.min_offset => Some((b.min_offset, b.flushed)),
        Some(_) if last_end < b.flushed => Some((last_end, b.flushed)),
        _ => None,
    };
    if let Some((from, to)) = missing {
        let e = StoreError::MissingSegments { dir: commitlog_dir.to_path_buf(), from, to };
        if !config.recovery.truncate_on_corruption {
            return Err(e);
        }
        tracing::error!(error = %e, "accepting the loss as the recovery options ask");
    }
    Ok(())
}

/// How the previous run ended, from the files.
fn recovery_kind(empty: bool, abort: bool, block: Option<LogshipState>) -> RecoveryKind {
    match (empty, abort, block) {
        (true, _, _) => RecoveryKind::New,
        (false, false, Some(b)) if b.clean => RecoveryKind::Clean,
        (false, _, Some(_)) => RecoveryKind::Crash,
        (false, false, None) => RecoveryKind::ForeignClean,
        (false, true, None) => RecoveryKind::ForeignCrash,
    }
}

/// Finds the end of the log as `report.kind` says (a clean end that does not match the files
/// turns the recovery into a crash recovery).
fn find_end(
    ctx: &Ctx<'_>,
    block: Option<LogshipState>,
    loaded: Option<&Checkpoint>,
    report: &mut RecoveryReport,
) -> Result<u64, StoreError> {
    match report.kind {
        RecoveryKind::New => Ok(0),
        RecoveryKind::Clean => {
            let b = block.expect("clean implies a logship block");
            if ctx.clean_end_consistent(b.clean_end) {
                Ok(b.clean_end)
            } else {
                tracing::warn!(
                    clean_end = b.clean_end,
                    "the clean-shutdown end does not match the files; scanning"
                );
                report.kind = RecoveryKind::Crash;
                ctx.crash_end(b.flushed, report)
            }
        }
        RecoveryKind::Crash => ctx.crash_end(block.map_or(0, |b| b.flushed), report),
        RecoveryKind::ForeignClean => ctx.foreign_clean_end(report),
        RecoveryKind::ForeignCrash => ctx.foreign_crash_end(loaded, report),
    }
}

/// Cuts the log at `end`: zeroes the rest of its segment (only what is not zero already), makes
/// that durable, and deletes the segments past it. Returns the segments kept.
fn cut_log(
    ctx: &mut Ctx<'_>,
    commitlog_dir: &Path,
    end: u64,
    report: &mut RecoveryReport,
) -> Result<Vec<Loaded>, StoreError> {
    let (size, min) = (ctx.size, ctx.min);
    // Bytes recovery already found to be zero need no zeroing (a crash that tore nothing).
    let zero_tail = report.scanned_from.is_some() && ctx.zero_from.get() != Some(end);
    let mut kept = Vec::new();
    let mut removed_any = false;
    for mut seg in std::mem::take(&mut ctx.segs) {
        let data_start = seg.base.max(min);
        if data_start >= end {
            let path = seg.map.path().to_path_buf();
            drop(seg);
            fs::remove_file(&path).at(&path)?;
            report.removed_segments.push(path);
            removed_any = true;
            continue;
        }
        let seg_end = seg.base + size;
        if zero_tail && end < seg_end {
            let rel = (end - seg.base) as usize;
            let zeroed = seg.writer.zero(rel..size as usize);
            if zeroed > 0 {
                seg.map.flush(rel..size as usize).at(seg.map.path())?;
                report.zeroed_bytes += zeroed as u64;
            }
        }
        kept.push(seg);
    }
    if removed_any {
        segment::sync_dir(commitlog_dir)?;
    }
    Ok(kept)
}

/// Publishes the kept segments up to `end` and makes the last one, if it has room, the active
/// segment (its rest reserved first).
fn install_segments(
    kept: Vec<Loaded>,
    size: u64,
    end: u64,
    report: &RecoveryReport,
) -> Result<(SegmentTable, Option<ActiveSegment>), StoreError> {
    let mut segments = SegmentTable::new(size);
    let mut active = None;
    let n = kept.len();
    for (i, mut seg) in kept.into_iter().enumerate() {
        let seg_end = seg.base + size;
        let pos = if i + 1 == n { end.min(seg_end) - seg.base } else { size };
        if let Some(scanned_from) = report.scanned_from {
            // The scanned bytes came from the page cache; make them durable before trusting them.
            let lo = scanned_from.max(seg.base).min(seg.base + pos) - seg.base;
            seg.map.flush(lo as usize..pos as usize).at(seg.map.path())?;
        }
        seg.writer.seek(pos as usize);
        seg.writer.publish();
        segments.push(Arc::new(Segment { base: seg.base, map: Arc::clone(&seg.map) }));
        if i + 1 == n && pos < size {
            // Writes continue here: reserve the rest of the segment first. On a full disk the
            // store still opens (reads go on) and puts are refused until a retry succeeds.
            let reserved = match seg.map.reserve_from(pos as usize) {
                Ok(()) => {
                    seg.writer.mark_reserved();
                    true
                }
                Err(e) => {
                    let e = segment::reserve_error(seg.map.path(), size - pos, e);
                    tracing::error!(error = %e, "cannot reserve the active segment; refusing writes until space returns");
                    false
                }
            };
            active = Some(ActiveSegment { base: seg.base, writer: seg.writer, reserved });
        }
    }
    Ok((segments, active))
}

/// Loads the consume queues, trims them to the durable dispatch point (or rebuilds them), and
/// re-dispatches the log from there to `end` (the end of the log, or a lower confirm offset).
#[allow(clippy::too_many_arguments)]
fn recover_consume_queues(
    root: &Path,
    config: &StoreConfig,
    commitlog_dir: &Path,
    segments: SegmentTable,
    block: Option<LogshipState>,
    min: u64,
    end: u64,
    report: &mut RecoveryReport,
) -> Result<(Dispatcher, Arc<QueueRegistry>, SegmentTable), StoreError> {
    let size = config.mapped_file_size_commit_log;
    let cq_root = root.join("consumequeue");
    if config.recovery.rebuild_consume_queues && cq_root.exists() {
        tracing::warn!(dir = %cq_root.display(), "rebuilding every consume queue as the recovery options ask");
        fs::remove_dir_all(&cq_root).at(&cq_root)?;
    }
    let cq_existed = cq_root.exists();
    fs::create_dir_all(&cq_root).at(&cq_root)?;
    let queues: Arc<QueueRegistry> = Arc::new(RwLock::new(HashMap::new()));
    let durable_dispatch = block.map(|b| b.dispatched.min(end));
    let limit = if cq_existed { durable_dispatch.unwrap_or(end) } else { 0 };
    let mut dispatcher = consume_queue::load(&cq_root, config, Arc::clone(&queues), limit, min)?;
    let from = if !cq_existed {
        tracing::info!(dir = %cq_root.display(), "no consume queues: rebuilding them from the log");
        min
    } else {
        durable_dispatch.or_else(|| consume_queue::max_indexed_end(&dispatcher)).unwrap_or(min)
    }
    .clamp(min, end);
    report.dispatch_from = from;
    dispatcher.dispatched = from;
    let segments = RwLock::new(segments);
    dispatcher.dispatch(&segments, size, min, end)?;
    if let Some((offset, reason)) = dispatcher.error.take() {
        let table = segments.read().unwrap_or_else(|e| e.into_inner());
        let segment =
            table.find(offset).map(|s| s.path().to_path_buf()).unwrap_or_else(|| commitlog_dir.to_path_buf());
        return Err(StoreError::Corrupt { segment, offset, reason });
    }
    consume_queue::flush_queues(&dispatcher.queues().cloned().collect::<Vec<_>>())?;
    Ok((dispatcher, queues, segments.into_inner().unwrap_or_else(|e| e.into_inner())))
}
