//! logship-store: a RocketMQ-compatible memory-mapped commit log, with consume queues, flushing,
//! crash recovery and retention. It implements `logship-core`'s log traits ([`LogRead`],
//! [`LogWrite`], [`MessageLog`]) so the replication drivers can use it, and it writes the bytes a
//! Java RocketMQ broker writes, so a real RocketMQ peer can read them.
//!
//! # Layout
//!
//! ```text
//! <root>/lock                                  exclusive lock of the store (one process, one handle)
//! <root>/abort                                 present while the store is open: a crash marker
//! <root>/checkpoint                            one 4 KiB page, RocketMQ's layout + a logship block
//! <root>/commitlog/<20-digit offset>           segments of mapped_file_size_commit_log bytes
//! <root>/consumequeue/<topic>/<queueId>/<20-digit byte offset>   20-byte index entries
//! <root>/epochFileCheckpoint (+ .bak)          controller mode's epoch list (EpochFile)
//! <root>/truncating                            present while a truncation is pending
//! ```
//!
//! Segments hold RocketMQ stored messages ([`codec`]) back to back. A message never spans two
//! segments: when one does not fit (with 8 bytes to spare), the segment is padded with a BLANK
//! record and the message starts the next segment. A physical offset is a byte position in the
//! concatenation of the segments, so a segment's name is the offset of its first byte. A slave's
//! log is byte-for-byte its master's.
//!
//! # Threads and locking
//!
//! A [`CommitLog`] is shared through an `Arc`; every method takes `&self`.
//!
//! - Writers ([`put`](CommitLog::put), [`append_at`](CommitLog::append_at)) serialize on one put
//!   lock (RocketMQ's `putMessageLock`). Validation, sizing and the body CRC happen before it is
//!   taken; the message is then encoded straight into the mapped segment.
//! - Readers ([`read`](CommitLog::read), [`read_message`](CommitLog::read_message)) take no lock
//!   but a brief read lock on the segment table. The end of the log is published with a
//!   `Release` store after the bytes are written and read with `Acquire`; a reader never forms a
//!   view of bytes being written (see the `mmap` module). A span is a zero-copy `Bytes` that
//!   keeps its segment mapped, even after retention deletes the file.
//! - Background threads: **flush** (group commit on request, interval flushes, consume-queue
//!   flushes, checkpoints), **reput** (indexes replicated bytes into the consume queues as they
//!   arrive, waiting on a partial trailing message), **prealloc** (creates and page-touches the
//!   next segment), **retention** (deletes old segments by age and disk usage), **scrub**
//!   (verifies every record's CRC in the background, rate-limited; findings in the status).
//!   On a master, [`put`](CommitLog::put) indexes its message itself. Each thread gets the
//!   published log (segments, bounds, progress offsets) and its own state, never the commit log
//!   itself; the flush and retention threads record checkpoints through a callback.
//!
//! # Durability
//!
//! - A put returns once its bytes are in the page cache. [`durable`](MessageLog::durable) (a
//!   runtime-agnostic future) or [`wait_durable`](CommitLog::wait_durable) completes once they are
//!   on disk; concurrent waiters share one msync of the page-aligned dirty range (group commit).
//!   [`put_and_flush`](CommitLog::put_and_flush) is RocketMQ's `putMessage`: under `SYNC_FLUSH` it
//!   waits up to `sync_flush_timeout` and returns `FlushDiskTimeout` if the flush is late. Under
//!   `ASYNC_FLUSH` the flush thread flushes every `flush_interval_commit_log`.
//! - After a clean [`shutdown`](CommitLog::shutdown) (or drop) the store reopens at once. After a
//!   crash it scans from the durable boundary recorded in the checkpoint, stops at the first
//!   invalid record and zeroes and fsyncs the torn tail, so it cannot resurface after another
//!   crash. An invalid record *before* the durable boundary, or one followed by valid messages,
//!   is corruption: opening fails with [`StoreError::Corrupt`] naming the segment and offset,
//!   unless the operator sets [`RecoveryOptions::truncate_on_corruption`]. Consume queues are
//!   trimmed and re-dispatched to match. See [`RecoveryReport`] for what recovery did.
//! - Segments, consume-queue files and the checkpoint are created under a temporary name, sized
//!   and renamed, so none ever appears with the wrong size; their directories are fsynced before
//!   anything relies on them (for consume-queue files, at the next queue flush, off the write
//!   path).
//!
//! # Truncation and epochs (controller mode)
//!
//! A slave that follows a new master cuts its divergent tail with
//! [`truncate_to`](CommitLog::truncate_to): the bytes leave the disk (not only the in-memory
//! positions, as in RocketMQ, #10666), with the consume-queue entries, epochs and checkpoint
//! fields past the cut, in an order that survives a crash at any step ([`TruncateStep`]). The
//! epoch list ([`epochs`](CommitLog::epochs), [`append_epoch`](CommitLog::append_epoch)) lives
//! in RocketMQ's `epochFileCheckpoint` format ([`EpochFile`]); recovery drops epochs that start
//! past the recovered end.
//!
//! # Replicated bytes and the disk
//!
//! - [`append_at`](CommitLog::append_at) checks every replicated record before it publishes it,
//!   as recovery would check it (magic, sizes, physical offset, topic, body CRC, and BLANK
//!   padding that ends exactly at this store's segment end). The log end moves to the last
//!   whole valid record; an incomplete trailing record waits unpublished for its rest. A bad
//!   record fails the append with [`StoreError::InvalidReplicatedRecord`] (or
//!   [`StoreError::SegmentSizeMismatch`], naming both sizes) and nothing from it on is kept, so
//!   a slave never acks bytes that are not records and its store always reopens.
//! - Every segment's blocks are reserved (`posix_fallocate`) before a byte is written into it,
//!   including the active segment at open, so a full disk is [`StoreError::DiskFull`] and a
//!   refused put (`ServiceNotAvailable`, [`write_refusal`](CommitLog::write_refusal) says why),
//!   never a SIGBUS. Writes resume once space returns.
//! - At open the files are cross-checked against the checkpoint: segments missing below the
//!   recorded minimum or before the durable end are [`StoreError::MissingSegments`]. A
//!   background scrub then verifies every record's CRC (see [`ScrubStatus`]).
//!
//! # Retention
//!
//! Segments older than `file_reserved_time` go at the `delete_when` hour, or at any hour above
//! 75 % disk usage; above 85 %, only with `clean_file_forcibly_enable` (off by default), the
//! oldest go even unexpired, never past the [retention floor](CommitLog::set_retention_floor);
//! above 90 % puts are refused with `ServiceNotAvailable`. The active segment is never deleted. The minimum offset moves forward
//! ([`bounds`](CommitLog::bounds), [`RetentionReport`]) so a master can tell a slave that it has
//! fallen behind retention. The clock and the disk-usage source are injectable ([`StoreEnv`]).
//!
//! # Compatibility notes
//!
//! - Messages are written with magic V1, which every RocketMQ version reads, so topics longer
//!   than 127 bytes (which would need V2) are refused; V2 records written by others are read.
//! - As in RocketMQ 4.9, consume queues index messages as soon as they are in the log, flushed
//!   or not.
//! - The checkpoint keeps RocketMQ's fields where Java reads them; the store's own recovery data
//!   sits in a CRC-protected block that RocketMQ ignores (see the `checkpoint` module).
//!
//! # Example
//!
//! ```
//! use logship_core::{LogRead, LogSpan, PutStatus};
//! use logship_store::{CommitLog, Message, StoreConfig};
//!
//! let dir = tempfile::tempdir()?;
//! let mut config = StoreConfig::default();
//! config.mapped_file_size_commit_log = 64 * 1024;
//! config.max_message_size = 4096;
//! let log = CommitLog::open(dir.path(), config)?;
//! let put = log.put(Message::new("TopicTest", 0, &b"hello"[..]).with_tags("TagA"));
//! assert_eq!(put.status, PutStatus::PutOk);
//! let bytes = log.read(LogSpan { offset: put.offset, len: put.wrote_bytes })?;
//! assert_eq!(log.read_message(put.offset)?.body, &b"hello"[..]);
//! assert_eq!(bytes.len() as u32, put.wrote_bytes);
//! log.shutdown()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod codec;

mod arrival;

#[doc(hidden)]
pub mod bench;

mod checkpoint;
mod config;
mod consume_queue;
mod env;
mod epoch_file;
mod error;
mod flush;
#[doc(hidden)]
pub mod fuzzing;
mod index;
mod mmap;
mod prealloc;
mod query;
mod recovery;
mod retention;
mod scrub;
mod segment;
mod store;
mod sync;
mod truncate;

pub use arrival::{Arrival, ArrivalListener};
pub use codec::{Message, MessageVersion, RecordError, StoreFields, StoredMessage};
pub use config::{CQ_ENTRY_SIZE, FlushDiskType, RecoveryOptions, StoreConfig};
pub use consume_queue::CqEntry;
pub use env::{Clock, DiskUsage, OsDiskUsage, StoreEnv, SystemClock};
pub use epoch_file::{EpochEntry, EpochFile};
pub use error::{StoreConfigError, StoreError};
pub use flush::{Durable, FlushHold};
pub use index::{
    INDEX_HEADER_SIZE, IndexConfig, IndexHeader, MessageIndex, PROPERTY_KEYS, PROPERTY_UNIQ_KEY,
    QueryMessageResult, QueryOffsetResult, index_key_hash,
};
pub use logship_core::{
    EpochLog, LogBounds, LogRead, LogSpan, LogWrite, MessageLog, Offset, PutResult, PutStatus,
};
pub use query::{
    FoundMessage, GetMessageOptions, GetMessageResult, GetMessageStatus, MAX_PULL_MSG_SIZE, QueryLine,
    TagFilter, TimeBoundary, memory_limit, total_physical_memory,
};
pub use recovery::{RecoveryKind, RecoveryReport};
pub use retention::RetentionReport;
pub use scrub::{ScrubFinding, ScrubStatus};
pub use store::{BadMessage, CommitLog, QueueRead, StoreStatus};
pub use truncate::{TruncateReport, TruncateStep};
