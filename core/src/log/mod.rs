//! The log vocabulary shared by the core, the store and the drivers.
//!
//! The core never touches a log: it emits instructions ([`LogSpan`]s to send, bytes to append)
//! and the driver performs them against something that implements these traits. The store
//! (`logship-store`) implements them over an mmap commit log; tests and the simulator implement
//! them over memory.
//!
//! The log also owns its epoch list ([`EpochCache`], [`EpochEntry`]): controller mode
//! ([`EpochLog`]) stores it beside the bytes, and the AutoSwitch protocol reads and extends it.

use std::future::Future;
use std::time::Duration;

use bytes::Bytes;

use crate::roles::FlushDiskType;

mod epoch;

pub use epoch::{EpochAppended, EpochCache, EpochEntry, EpochError};

/// A physical commit-log offset: RocketMQ's `phyOffset`, a byte position in the commit log.
pub type Offset = u64;

/// A byte range of the local log that the master wants sent to a slave.
///
/// Every span the core emits is non-empty, at most the configured transfer batch size, ends at or
/// before the last appended end, and never crosses a segment boundary.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct LogSpan {
    /// First byte of the span.
    pub offset: Offset,
    /// Number of bytes.
    pub len: u32,
}

impl LogSpan {
    /// The offset one past the last byte.
    pub fn end(&self) -> Offset {
        self.offset + u64::from(self.len)
    }
}

/// The readable range of a log: `[min, max)`.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct LogBounds {
    /// The oldest offset still held (RocketMQ `getMinPhyOffset`); moves forward with retention.
    pub min: Offset,
    /// The end of the log (RocketMQ `getMaxPhyOffset`): one past the last written byte.
    pub max: Offset,
}

/// Read access to a log: what a master driver needs to resolve spans, and what every log
/// reports about itself.
pub trait LogRead: Send + Sync + 'static {
    /// The error a read (or, for the sub-traits, a write or flush) can fail with.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The current readable range; `max` is the end of the log (0 for an empty log).
    fn bounds(&self) -> LogBounds;

    /// One past the last durable byte.
    fn flushed(&self) -> Offset;

    /// The bytes of `span`, without copying where the log allows it.
    ///
    /// Fails if any part of the span is outside [`bounds`](Self::bounds) or crosses a segment.
    fn read(&self, span: LogSpan) -> Result<Bytes, Self::Error>;

    /// Whether a record of the log starts at `offset` (the min offset and the end count as
    /// boundaries). A master asks this of a slave's first report: a report off a record
    /// boundary means the two logs differ before it. May read the log; fails if `offset` is
    /// outside [`bounds`](Self::bounds) or the records before it cannot be read.
    fn is_record_boundary(&self, offset: Offset) -> Result<bool, Self::Error>;

    /// The size of the log's segments (RocketMQ `mappedFileSizeCommitLog`): a span never
    /// crosses a multiple of it. The one authority for this setting: a master service cuts its
    /// frames at these boundaries, whatever its core configuration says.
    fn segment_size(&self) -> u64;

    /// The log's epoch list, tail truncation and confirm offset, if it keeps them: what the
    /// AutoSwitch protocol (controller mode) needs besides reads and writes. `None` (the
    /// default) for a log that has none; a service configured for controller mode over such a
    /// log is refused at start.
    fn epoch_log(&self) -> Option<&dyn EpochLog<Error = Self::Error>> {
        None
    }
}

/// What controller mode (the AutoSwitch protocol) needs of a log beside [`LogRead`] and
/// [`LogWrite`]: RocketMQ's epoch list (`epochFileCheckpoint`), a crash-safe cut of a divergent
/// tail, and the confirm offset below which consumers may read. Reached through
/// [`LogRead::epoch_log`].
pub trait EpochLog: Send + Sync {
    /// The error an epoch write or a truncation can fail with.
    type Error: std::error::Error + Send + Sync + 'static;

    /// The epoch list, oldest first; empty for a log that never had an epoch.
    fn epochs(&self) -> Vec<EpochEntry>;

    /// Appends `entry` to the epoch list, durably, before returning: a driver calls it before
    /// the first byte of that epoch is appended (or, on a new master, put). The same entry as
    /// the last one is a no-op; an entry that is not above the last one, or starts before it
    /// or past the end of the log (unless the log is empty), is refused.
    fn append_epoch(&self, entry: EpochEntry) -> Result<(), Self::Error>;

    /// Cuts the log to end at `offset`, a record boundary, crash-safely: the bytes from
    /// `offset` on, the epochs that start at or after it, and a confirm offset above it go, and
    /// none of them comes back after a crash at any point of the cut.
    fn truncate_to(&self, offset: Offset) -> Result<(), Self::Error>;

    /// Raises the confirm offset (consumers read only below it) and returns the one in force.
    /// Monotonic: only [`truncate_to`](Self::truncate_to) lowers it.
    fn set_confirm_offset(&self, offset: Offset) -> Offset;

    /// The confirm offset in force.
    fn confirm_offset(&self) -> Offset;

    /// The replication-confirmed offset: the highest confirm offset
    /// [`set_confirm_offset`](Self::set_confirm_offset) was given (what a master's
    /// sync-state-set acknowledged), which local puts never raise, kept durably. A slave never
    /// truncates below it. A log whose puts do not raise its confirm offset returns that.
    fn confirmed_offset(&self) -> Offset;
}

/// Write access to a slave's log, used by a slave driver to store replicated bytes.
pub trait LogWrite: LogRead {
    /// Stores raw replicated bytes at `offset` and returns the new end.
    ///
    /// `offset` must equal the end (`bounds().max`), except that an empty log adopts the first
    /// offset it is given. Any other offset is an error: a log never has a silent gap.
    ///
    /// A log that validates records may publish only whole ones: then the new end stops at the
    /// last whole record and the bytes of an incomplete one wait, unpublished, for the rest,
    /// which comes at `offset + data.len()` (a new stream from the end drops them). An append
    /// that finds an invalid record fails, keeping the records before it.
    fn append_at(&self, offset: Offset, data: &[u8]) -> Result<Offset, Self::Error>;

    /// Makes every stored byte durable and returns the durable end. May block on the disk.
    fn flush(&self) -> Result<Offset, Self::Error>;
}

/// A master's log that accepts messages from producers (RocketMQ `putMessage`).
pub trait MessageLog: LogRead {
    /// What a producer hands in.
    type Message: Send + 'static;

    /// A future that completes once the log is durable up to an offset.
    type Durable: Future<Output = Result<Offset, Self::Error>> + Send + 'static;

    /// Appends one message at the end of the log. It does not wait for a flush or a slave; the
    /// result's status is [`PutStatus::PutOk`] or a refusal (illegal message, full disk, ...).
    fn put(&self, message: Self::Message) -> PutResult;

    /// Completes once every byte before `offset` is durable (SYNC_FLUSH group commit). Concurrent
    /// waits share one flush. The caller applies its own timeout.
    fn durable(&self, offset: Offset) -> Self::Durable;

    /// How puts to this log are made durable: the one source of these settings. A master
    /// service waits for [`durable`](Self::durable) after a put when this says SYNC_FLUSH,
    /// for at most its `sync_flush_timeout`; it has no flush setting of its own.
    fn flush_settings(&self) -> FlushSettings;
}

/// RocketMQ `syncFlushTimeout`: how long a SYNC_FLUSH put waits for the disk.
pub const DEFAULT_SYNC_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);

/// How a log flushes puts (RocketMQ `flushDiskType` and `syncFlushTimeout`). The default is
/// RocketMQ's: ASYNC_FLUSH, with a 5 s `syncFlushTimeout`.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct FlushSettings {
    /// Whether puts wait for the disk.
    pub flush_disk_type: FlushDiskType,
    /// How long a SYNC_FLUSH put waits for the disk.
    pub sync_flush_timeout: Duration,
}

impl Default for FlushSettings {
    fn default() -> Self {
        Self { flush_disk_type: FlushDiskType::AsyncFlush, sync_flush_timeout: DEFAULT_SYNC_FLUSH_TIMEOUT }
    }
}

/// The outcome of storing a message, with RocketMQ's `PutMessageStatus` names.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[must_use = "a put can fail or time out: check the status"]
#[non_exhaustive]
pub enum PutStatus {
    /// Stored, and flushed and replicated as far as the role requires.
    PutOk,
    /// Stored, but not durable within `sync_flush_timeout` (SYNC_FLUSH).
    FlushDiskTimeout,
    /// Stored, but not acknowledged by enough slaves within `slave_timeout` (SYNC_MASTER).
    FlushSlaveTimeout,
    /// Stored, but no slave was connected or close enough to wait for (SYNC_MASTER).
    SlaveNotAvailable,
    /// Stored, but too few slaves are in sync to meet the quorum (SYNC_MASTER, quorum policy).
    InSyncReplicasNotEnough,
    /// Not stored: the broker cannot take writes (a slave, shutting down, or the disk is full).
    ServiceNotAvailable,
    /// Not stored: the message is malformed or larger than `max_message_size`.
    MessageIllegal,
    /// Not stored: the encoded properties exceed RocketMQ's 32 767-byte limit.
    PropertiesSizeExceeded,
    /// Not stored: the log could not be written (for example a segment could not be created).
    UnknownError,
    /// Not stored: the broker's lease is closed (automatic failover), so it may no longer be
    /// its group's master and takes no writes: RocketMQ's fenced store, which answers
    /// `SERVICE_NOT_AVAILABLE` ([`rocketmq_name`](Self::rocketmq_name)).
    LeaseLost,
    /// Stored locally, but not acknowledged: the broker's lease closed before the put's waits
    /// ended, so it may no longer be the group's master, and a failover may cut the message
    /// from its log. Answered `SERVICE_NOT_AVAILABLE` to a RocketMQ client, which sends again
    /// (to the new master).
    LeaseLostAfterStore,
}

impl PutStatus {
    /// RocketMQ's constant name, e.g. `FLUSH_SLAVE_TIMEOUT`: for a logship status RocketMQ does
    /// not have, the one a RocketMQ broker in that state answers (`SERVICE_NOT_AVAILABLE` for
    /// both lease statuses).
    pub fn rocketmq_name(self) -> &'static str {
        match self {
            Self::PutOk => "PUT_OK",
            Self::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            Self::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
            Self::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
            Self::InSyncReplicasNotEnough => "IN_SYNC_REPLICAS_NOT_ENOUGH",
            Self::ServiceNotAvailable => "SERVICE_NOT_AVAILABLE",
            Self::MessageIllegal => "MESSAGE_ILLEGAL",
            Self::PropertiesSizeExceeded => "PROPERTIES_SIZE_EXCEEDED",
            Self::UnknownError => "UNKNOWN_ERROR",
            Self::LeaseLost | Self::LeaseLostAfterStore => "SERVICE_NOT_AVAILABLE",
        }
    }

    /// Whether the message is in the master's log (true for every status but the refusals).
    pub fn is_stored(self) -> bool {
        matches!(
            self,
            Self::PutOk
                | Self::FlushDiskTimeout
                | Self::FlushSlaveTimeout
                | Self::SlaveNotAvailable
                | Self::InSyncReplicasNotEnough
                | Self::LeaseLostAfterStore
        )
    }
}

impl std::fmt::Display for PutStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.rocketmq_name())
    }
}

/// What a put returns (RocketMQ `AppendMessageResult` plus status).
///
/// `#[must_use]`: a dropped result hides a failed put or a SYNC wait that timed out.
///
/// ```compile_fail
/// #![deny(unused_must_use)]
/// use logship_core::MessageLog;
/// fn store(log: &logship_core::memlog::MemoryLog) {
///     log.put(b"m".to_vec()); // error: unused `PutResult` that must be used
/// }
/// ```
///
/// ```
/// #![deny(unused_must_use)]
/// use logship_core::MessageLog;
/// fn store(log: &logship_core::memlog::MemoryLog) {
///     let _ = log.put(b"m".to_vec());
/// }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use = "a put can fail or time out waiting for the disk or the slaves: check its status"]
pub struct PutResult {
    /// The outcome.
    pub status: PutStatus,
    /// Physical offset of the stored message (`wroteOffset`); meaningful when stored.
    pub offset: Offset,
    /// Bytes the message occupies in the log (`wroteBytes`).
    pub wrote_bytes: u32,
    /// The message's offset in its consume queue.
    pub queue_offset: u64,
    /// RocketMQ's offset message id: store host and physical offset, as upper-case hex.
    pub msg_id: String,
}

impl PutResult {
    /// One past the message's last byte: what a replication or flush wait waits for.
    pub fn end(&self) -> Offset {
        self.offset + u64::from(self.wrote_bytes)
    }

    /// A result for a message that was not stored.
    pub fn refused(status: PutStatus) -> Self {
        Self { status, offset: 0, wrote_bytes: 0, queue_offset: 0, msg_id: String::new() }
    }
}
