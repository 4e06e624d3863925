//! The store's errors. Every variant carries the context an operator needs (paths, offsets, sizes).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::codec::RecordError;

/// An invalid [`StoreConfig`](crate::StoreConfig) field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("config field `{field}` = {value}: {reason}")]
#[non_exhaustive]
pub struct StoreConfigError {
    /// The field's name, as in [`StoreConfig`](crate::StoreConfig) (RocketMQ's name in snake case).
    pub field: &'static str,
    /// The rejected value, formatted.
    pub value: String,
    /// What a valid value looks like.
    pub reason: String,
}

impl StoreConfigError {
    pub(crate) fn new(field: &'static str, value: impl std::fmt::Debug, reason: impl Into<String>) -> Self {
        Self { field, value: format!("{value:?}"), reason: reason.into() }
    }
}

/// Everything that can go wrong in the store.
///
/// Bad input (a corrupt file, a garbage checkpoint, a wrong offset) always gets its own variant;
/// the store never panics on it and never discards data to get past it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] StoreConfigError),

    /// A file operation failed.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },

    /// Another process (or another handle in this process) has the store open.
    #[error("store {path} is locked by another process or handle")]
    Locked {
        /// The lock file.
        path: PathBuf,
    },

    /// A segment or consume-queue file does not have the configured size.
    #[error("{path} is {actual} bytes, but the configured file size ({field}) is {expected} bytes")]
    FileSizeMismatch {
        /// The file.
        path: PathBuf,
        /// The configuration field that sets the size.
        field: &'static str,
        /// The configured size.
        expected: u64,
        /// The file's size on disk.
        actual: u64,
    },

    /// A file's name is not a multiple of the file size.
    #[error("{path} starts at byte {start}, which is not a multiple of the file size {file_size}")]
    MisalignedFile {
        /// The file.
        path: PathBuf,
        /// The start offset its name gives.
        start: u64,
        /// The configured file size.
        file_size: u64,
    },

    /// Files are missing between two present ones.
    #[error("missing file for offset {expected} in {dir} (next present file: {found})")]
    FileGap {
        /// The directory.
        dir: PathBuf,
        /// The start offset of the missing file.
        expected: u64,
        /// The next file that is present.
        found: PathBuf,
    },

    /// A record in the flushed (or cleanly shut down) part of the log is invalid. This is data
    /// corruption, not a torn tail; open with
    /// [`RecoveryOptions::truncate_on_corruption`](crate::RecoveryOptions) to cut the log there.
    #[error("corrupt record in segment {segment} at offset {offset}: {reason}")]
    Corrupt {
        /// The segment file.
        segment: PathBuf,
        /// The record's physical offset.
        offset: u64,
        /// What is wrong with it.
        reason: RecordError,
    },

    /// Segments the checkpoint records as part of the log are missing (deleted by hand, or
    /// lost), and retention did not delete them. Opening with
    /// [`RecoveryOptions::truncate_on_corruption`](crate::RecoveryOptions) accepts the loss.
    #[error(
        "segments holding offsets [{from}, {to}) are missing from {dir}, but the checkpoint records them as part of the log (retention did not delete them)"
    )]
    MissingSegments {
        /// The commit-log directory.
        dir: PathBuf,
        /// The first missing offset.
        from: u64,
        /// One past the last missing offset.
        to: u64,
    },

    /// The checkpoint file is shorter or longer than one page.
    #[error("checkpoint {path} is {len} bytes, expected {expected} (truncated or not a checkpoint)")]
    CheckpointTruncated {
        /// The checkpoint file.
        path: PathBuf,
        /// Its length.
        len: u64,
        /// The expected length (one page).
        expected: u64,
    },

    /// The checkpoint file holds values no store writes.
    #[error("checkpoint {path} is corrupt: {reason}")]
    CheckpointCorrupt {
        /// The checkpoint file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A consume-queue file holds an entry no dispatch writes. Opening with
    /// [`RecoveryOptions::rebuild_consume_queues`](crate::RecoveryOptions) rebuilds the queues
    /// from the log.
    #[error("consume queue file {path} is corrupt at entry {index}: {reason}")]
    ConsumeQueueCorrupt {
        /// The consume-queue file.
        path: PathBuf,
        /// The entry's queue offset.
        index: u64,
        /// What is wrong with it.
        reason: String,
    },

    /// An index file's size does not match `maxHashSlotNum` and `maxIndexNum`: it was written
    /// with other settings.
    #[error(
        "index file {path} is {found} bytes, but maxHashSlotNum and maxIndexNum make {expected}: \
         set them as the broker that wrote it did, or remove the index directory to rebuild it"
    )]
    IndexFileSize {
        /// The index file.
        path: PathBuf,
        /// Its size.
        found: u64,
        /// The size the settings give.
        expected: u64,
    },

    /// An index file's header cannot be right.
    #[error("index file {path} is corrupt: {reason}; remove the index directory to rebuild it")]
    IndexFileCorrupt {
        /// The index file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// `append_at` was given an offset other than the end of the log: a gap or an overlap.
    #[error("append at offset {got}, but the log ends at {expected}")]
    OffsetMismatch {
        /// The current end of the log.
        expected: u64,
        /// The offset the caller gave.
        got: u64,
    },

    /// The bytes do not fit in the segment they start in (frames never span segments).
    #[error("{len} bytes at offset {offset} cross the segment end {segment_end}")]
    CrossesSegment {
        /// The first byte.
        offset: u64,
        /// The number of bytes.
        len: u64,
        /// The end of the segment holding `offset`.
        segment_end: u64,
    },

    /// A read outside the readable range `[min, max)`.
    #[error("bytes [{offset}, {end}) are outside the log [{min}, {max})")]
    OutOfRange {
        /// The first byte asked for.
        offset: u64,
        /// One past the last byte asked for.
        end: u64,
        /// The oldest offset held.
        min: u64,
        /// The end of the log.
        max: u64,
    },

    /// A message read hit the BLANK padding at the end of a segment.
    #[error("no message at offset {offset}: it is the end-of-segment padding")]
    NotAMessage {
        /// The offset asked for.
        offset: u64,
    },

    /// A consume-queue read asked for an offset the queue does not hold.
    #[error("queue offset {offset} of {topic}:{queue_id} is outside [{min}, {max})")]
    QueueOffsetOutOfRange {
        /// The topic.
        topic: String,
        /// The queue id.
        queue_id: i32,
        /// The queue offset asked for.
        offset: u64,
        /// The oldest queue offset held.
        min: u64,
        /// One past the newest queue offset.
        max: u64,
    },

    /// Writing the log back to disk failed. The store refuses further durability waits.
    #[error("flush of {path} failed: {source}")]
    FlushFailed {
        /// The file that failed.
        path: PathBuf,
        /// The OS error (shared by every waiter that sees it).
        #[source]
        source: Arc<io::Error>,
    },

    /// The file system has no room for a segment (or the rest of one): its blocks could not be
    /// reserved. Puts are refused (`ServiceNotAvailable`) until space returns; reads go on.
    #[error("disk full: cannot reserve {needed} bytes for {path} ({available} bytes available)")]
    DiskFull {
        /// The file that needs the space.
        path: PathBuf,
        /// The bytes the reservation asked for.
        needed: u64,
        /// The bytes the file system had available to the store (when it could be measured).
        available: u64,
    },

    /// The disk holding the store is fuller than `disk_space_warning_level_ratio`: writes are
    /// refused until retention or the operator frees space.
    #[error(
        "disk usage of {dir} is {used:.1} %, above the limit of {limit:.1} % (diskSpaceWarningLevelRatio): refusing writes"
    )]
    DiskUsageAboveLimit {
        /// The commit-log directory.
        dir: PathBuf,
        /// The used percentage measured.
        used: f64,
        /// The limit, in percent.
        limit: f64,
    },

    /// Replicated bytes are not valid records: the slave refused them and stored nothing from
    /// `offset` on (the end of its log).
    #[error("replicated bytes at offset {offset} are not a valid record: {reason}")]
    InvalidReplicatedRecord {
        /// The physical offset of the bad record, where the slave's log now ends.
        offset: u64,
        /// What is wrong with it.
        reason: RecordError,
    },

    /// The master's segments have a different size than this store's: its BLANK padding (or a
    /// frame) ends elsewhere than this store's segment end.
    #[error(
        "segment size mismatch at offset {offset}: this store's mapped_file_size_commit_log is \
         {local_segment_size} bytes, but the master's segment {}",
        match master_segment_size {
            Some(size) => format!("is {size} bytes (it ends at offset {master_segment_end})"),
            None => format!("ends at offset {master_segment_end}"),
        }
    )]
    SegmentSizeMismatch {
        /// Where the mismatch showed: the record that does not end at the local segment end.
        offset: u64,
        /// This store's segment size.
        local_segment_size: u64,
        /// Where the master's segment ends, as its bytes show (for a record crossing the local
        /// segment end: at least that far).
        master_segment_end: u64,
        /// The master's segment size, when the bytes seen so far determine it.
        master_segment_size: Option<u64>,
    },

    /// Neither the epoch file nor its `.bak` copy holds a valid epoch list.
    #[error(
        "epoch file {path} is invalid ({reason}) and so is its copy {backup} ({backup_reason}). Ways out: \
         restore either file from a backup of this broker; or refetch everything from the master (stop the \
         broker, move the store directory aside, start it again with an empty store: it replicates the \
         master's whole log)"
    )]
    EpochFileCorrupt {
        /// The main epoch file.
        path: PathBuf,
        /// What is wrong with it (or `missing`).
        reason: String,
        /// The `.bak` copy.
        backup: PathBuf,
        /// What is wrong with the copy (or `missing`).
        backup_reason: String,
    },

    /// Controller mode ([`StoreConfig::require_epoch_file`](crate::StoreConfig::require_epoch_file)):
    /// the store holds data but neither the epoch file nor its `.bak` copy exists, so its log
    /// cannot be checked against a master's. Nothing was changed.
    #[error(
        "the store holds data up to offset {end} but neither its epoch file {path} nor its copy {backup} \
         exists: controller mode cannot check this log against a master's. Ways out: restore either \
         file from a backup of this broker; or refetch everything from the master (stop the broker, \
         move the store directory aside, start it again with an empty store: it replicates the master's \
         whole log); or, for a store that ran in the classic mode and never had epochs, take the log as \
         it is once (adopt_log_without_epochs = {end}, the broker key adoptLogWithoutEpochs={end})"
    )]
    EpochFileMissing {
        /// The main epoch file.
        path: PathBuf,
        /// The `.bak` copy.
        backup: PathBuf,
        /// The log's end after recovery.
        end: u64,
    },

    /// An epoch list that an epoch file cannot hold (epochs not increasing, starts decreasing,
    /// or values beyond Java's ranges) was not written.
    #[error("refusing to write epoch file {path}: {reason}")]
    EpochListInvalid {
        /// The epoch file.
        path: PathBuf,
        /// What is wrong with the list.
        reason: String,
    },

    /// A truncation was asked for at an offset where no record starts.
    #[error("cannot truncate the log at offset {offset}: no record starts there")]
    NotARecordBoundary {
        /// The offset asked for.
        offset: u64,
    },

    /// An epoch that does not extend the epoch list was refused.
    #[error("epoch {epoch} at offset {start_offset} refused: {reason}")]
    EpochRefused {
        /// The epoch.
        epoch: i32,
        /// Its start offset.
        start_offset: u64,
        /// Why it does not extend the list.
        reason: String,
    },

    /// The record of a pending truncation (`<root>/truncating`) is unreadable. The store does
    /// not open: it cannot know where the log must end.
    #[error("truncation record {path} is corrupt: {reason}")]
    TruncationIntentCorrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// The store has been shut down.
    #[error("the store is shut down")]
    Closed,
}

impl StoreError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io { path: path.into(), source }
    }
}

/// Adds a path to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T, StoreError>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn at(self, path: impl AsRef<Path>) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::io(path.as_ref(), source))
    }
}
