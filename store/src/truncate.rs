//! Crash-safe truncation of the commit log's tail at runtime (a slave cutting a divergent tail
//! in controller mode), and the epoch list that goes with it.
//!
//! See [`TruncateStep`] for the order of the steps and why it survives a crash at any point.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use logship_core::LogBounds;

use crate::epoch_file::{EpochEntry, EpochFile};
use crate::error::{IoContext, StoreError};
use crate::segment;
use crate::store::{ActiveSegment, Shared, lock};

/// The intent file's name under the store root.
pub(crate) const INTENT_FILE: &str = "truncating";
const INTENT_PREFIX: &str = "logship truncate-to ";

/// A step of [`CommitLog::truncate_to`](crate::CommitLog::truncate_to), in the order they run.
/// Named for fault-injection tests ([`CommitLog::truncate_to_crashing_after`](crate::CommitLog)).
///
/// RocketMQ's `truncateDirtyFiles` only moves in-memory positions; the stale bytes stay on disk,
/// and a crash recovery that scans past them brings the divergent tail back (RocketMQ #10666).
/// Here the cut is made on disk, in this order:
///
/// 1. **Intent.** `<root>/truncating` records the cut (written whole: temporary file, fsync,
///    rename, directory fsync). From here on, every later step is implied by a durable record.
/// 2. **Epochs.** Epochs starting at or after the cut leave the epoch file (and its `.bak`).
/// 3. **Log.** The segment holding the cut is replaced by a copy of its bytes before the cut
///    (zero after it; fsynced, renamed over the old file); later segments are deleted; the
///    directory is fsynced. The old file is never written: spans handed out earlier stay valid.
/// 4. **Consume queues.** Entries pointing at or past the cut go the same way.
/// 5. **Checkpoint.** The durable boundary and the dispatch point drop to at most the cut.
/// 6. **Done.** The intent file is removed and the root fsynced.
///
/// Why a kill -9 (or power cut) at any point cannot bring the tail back: before step 1 is
/// durable, nothing has changed. Once it is, recovery reads it *before anything else*: it caps
/// the checkpoint's durable boundary and dispatch point at the cut (so the zeros after the cut
/// are the end of the log, not corruption), zeroes the segment holding the cut from the cut on
/// and deletes later segments, drops epochs at or after the cut, and then recovers as after any
/// crash, which trims the consume queues to the capped dispatch point. Each of these is
/// idempotent, so a crash during recovery repeats them. Only when the new checkpoint is durable
/// does recovery (like step 6) remove the intent. Steps 2–5 may therefore be interrupted in any
/// state: every one of them is redone or already done.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TruncateStep {
    /// The cut is recorded in `<root>/truncating`.
    IntentRecorded,
    /// Epochs at or after the cut are out of the epoch file.
    EpochsTrimmed,
    /// The log's bytes from the cut on are gone from disk.
    LogCut,
    /// Consume-queue entries at or after the cut are gone from disk.
    QueuesCut,
    /// The checkpoint records nothing past the cut.
    CheckpointWritten,
    /// The intent file is removed: the truncation is complete.
    IntentCleared,
}

impl TruncateStep {
    /// Every step, in the order they run.
    pub const ALL: [Self; 6] = [
        Self::IntentRecorded,
        Self::EpochsTrimmed,
        Self::LogCut,
        Self::QueuesCut,
        Self::CheckpointWritten,
        Self::IntentCleared,
    ];
}

/// What a truncation did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct TruncateReport {
    /// The end of the log before.
    pub from: u64,
    /// The end of the log now: the cut.
    pub to: u64,
    /// Bytes of the segment holding the cut that were dropped (the old tail in that segment).
    pub zeroed_bytes: u64,
    /// Segment files deleted (wholly after the cut).
    pub removed_segments: Vec<PathBuf>,
    /// Epochs dropped (those starting at or after the cut).
    pub dropped_epochs: Vec<EpochEntry>,
    /// Consume-queue entries dropped.
    pub dropped_queue_entries: u64,
}

/// The epoch list and its file.
#[derive(Debug)]
pub(crate) struct EpochState {
    pub(crate) file: EpochFile,
    pub(crate) entries: Vec<EpochEntry>,
}

/// Records the intent to truncate to `offset` durably.
pub(crate) fn write_intent(root: &Path, offset: u64) -> Result<(), StoreError> {
    crate::epoch_file::write_atomic(&root.join(INTENT_FILE), format!("{INTENT_PREFIX}{offset}\n").as_bytes())
}

/// The pending truncation recorded in `root`, if any.
pub(crate) fn read_intent(root: &Path) -> Result<Option<u64>, StoreError> {
    let path = root.join(INTENT_FILE);
    let text = match fs::read(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io(&path, e)),
    };
    let parsed = std::str::from_utf8(&text)
        .ok()
        .and_then(|t| t.strip_prefix(INTENT_PREFIX))
        .and_then(|t| t.strip_suffix('\n'))
        .filter(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|&o| o <= i64::MAX as u64);
    match parsed {
        Some(offset) => Ok(Some(offset)),
        None => Err(StoreError::TruncationIntentCorrupt {
            path,
            reason: format!(
                "expected \"{INTENT_PREFIX}<offset>\\n\", found {:?}",
                String::from_utf8_lossy(&text)
            ),
        }),
    }
}

/// Removes the intent file, durably.
pub(crate) fn clear_intent(root: &Path) -> Result<(), StoreError> {
    let path = root.join(INTENT_FILE);
    match fs::remove_file(&path) {
        Ok(()) => segment::sync_dir(root),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StoreError::io(&path, e)),
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
        let _w = lock(&self.writer);
        let end = self.end.load(Ordering::Acquire);
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
        if entry.start_offset > end {
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

        write_intent(&self.root, offset)?;
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
        self.dispatched.store(d.dispatched, Ordering::Release);
        if stop(TruncateStep::QueuesCut) {
            return Ok(report);
        }

        self.flushed.fetch_min(offset, Ordering::AcqRel);
        progress.boundary = progress.boundary.min(offset);
        let mut c = ckpt.current().clone();
        let mut state = c.logship.unwrap_or_default();
        state.clean = false;
        state.clean_end = 0;
        state.flushed = state.flushed.min(offset);
        state.dispatched = state.dispatched.min(offset);
        state.min_offset = min;
        c.logship = Some(state);
        self.confirm.fetch_min(offset, Ordering::AcqRel);
        c.confirm_phy_offset = c.confirm_phy_offset.min(offset as i64);
        c.master_flushed_offset = c.master_flushed_offset.min(offset as i64);
        ckpt.write(c)?;
        if stop(TruncateStep::CheckpointWritten) {
            return Ok(report);
        }

        clear_intent(&self.root)?;
        drop((epochs, d, progress, ckpt));
        let next = match &w.active {
            Some(a) => a.base + self.segment_size,
            None => offset,
        };
        drop(w);
        self.request_segment(next);
        tracing::warn!(from = report.from, to = offset, dropped_epochs = ?report.dropped_epochs, "commit log truncated");
        Ok(report)
    }

    /// Step 3: the log's bytes from `offset` (a record boundary below the end) on leave the disk
    /// and the segment table; the write position moves to `offset`.
    fn cut_segments(
        &self,
        w: &mut crate::store::WriterState,
        offset: u64,
        report: &mut TruncateReport,
    ) -> Result<(), StoreError> {
        // Readers see the new end first; then the files change under no new view.
        self.end.store(offset, Ordering::Release);
        w.accepted = offset;
        if w.master_boundary.is_some_and(|b| b > offset) {
            w.master_boundary = Some(offset - offset % self.segment_size);
        }
        w.active = None;
        self.cancel_preallocation()?;
        let mut table = self.segments.write().unwrap_or_else(|e| e.into_inner());
        while table.last().is_some_and(|s| s.base >= offset) {
            let seg = table.pop_last().expect("checked");
            let path = seg.path().to_path_buf();
            drop(seg);
            fs::remove_file(&path).at(&path)?;
            report.removed_segments.push(path);
        }
        if !report.removed_segments.is_empty() {
            segment::sync_dir(&self.commitlog_dir)?;
        }
        let Some(holding) = table.last().cloned() else {
            return Ok(());
        };
        let seg_end = holding.base + self.segment_size;
        if offset >= seg_end {
            return Ok(());
        }
        let keep = offset - holding.base;
        report.zeroed_bytes = report.from.min(seg_end) - offset;
        let (map, writer) = segment::replace_with_prefix(
            &self.commitlog_dir,
            holding.base,
            keep,
            self.segment_size,
            true,
            Some(&self.lock_file),
        )?;
        table.pop_last();
        table.push(Arc::new(segment::Segment { base: holding.base, map }));
        w.active = Some(ActiveSegment { base: holding.base, writer, reserved: true });
        Ok(())
    }
}
