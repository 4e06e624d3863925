//! Crash-safe truncation of the commit log's tail at runtime (a slave cutting a divergent tail
//! in controller mode), and the epoch list that goes with it.
//!
//! See [`TruncateStep`] for the order of the steps and why it survives a crash at any point.

use std::fs;
use std::path::{Path, PathBuf};

use crate::epoch_file::{EpochEntry, EpochFile};
use crate::error::StoreError;
use crate::segment;

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
