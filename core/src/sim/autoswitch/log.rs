//! A broker's simulated log in controller mode: the simulator's byte log with an epoch list
//! and a confirm offset behind the core's [`LogRead`], [`LogWrite`] and [`EpochLog`], and the
//! crashes the simulator inflicts on it.

use std::sync::{Mutex, MutexGuard, PoisonError};

use bytes::Bytes;

use crate::log::{EpochLog, LogBounds, LogRead, LogSpan, LogWrite, MessageLog, Offset, PutResult, PutStatus};
use crate::sim::memlog::MemLog;
use crate::{EpochCache, EpochEntry};

/// Why the simulated log refused an operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum EpochDiskError {
    /// The span is not readable.
    #[error("cannot read {offset}+{len}: {why}")]
    Read { offset: Offset, len: u32, why: &'static str },
    /// An append not at the end.
    #[error("append at {offset}, but the log ends at {end}")]
    NotAtEnd { offset: Offset, end: Offset },
    /// An offset outside the log.
    #[error("offset {offset} is outside the log [{min}, {max}]")]
    Outside { offset: Offset, min: Offset, max: Offset },
    /// An epoch the list refuses.
    #[error("epoch {entry:?} refused: {why}")]
    Epoch { entry: EpochEntry, why: String },
}

#[derive(Debug, Default)]
pub(crate) struct EpochState {
    pub(crate) log: MemLog,
    pub(crate) epochs: EpochCache,
    pub(crate) confirm: Offset,
    /// Truncations since the oracle last looked: where each cut, and the bytes it removed.
    pub(crate) cuts: Vec<(Offset, Vec<u8>)>,
}

/// One broker's log. The epoch list and the confirm offset are durable as soon as they are
/// written (the epoch file is written with fsync, the confirm offset with the checkpoint).
#[derive(Debug, Default)]
pub(crate) struct EpochDisk {
    state: Mutex<EpochState>,
}

impl EpochDisk {
    /// The state. The simulation is single-threaded: a statement must not hold two guards.
    pub(crate) fn lock(&self) -> MutexGuard<'_, EpochState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A put on a master: `len` bytes of `generation`'s content, flushed (SYNC_FLUSH).
    pub(crate) fn put(&self, generation: u64, len: u64) -> (Offset, Offset) {
        let mut s = self.lock();
        let start = s.log.end();
        let end = s.log.append_generated(generation, len);
        s.log.flush();
        (start, end)
    }

    /// A crash: keeps the durable bytes plus `keep_unflushed` more; recovery then drops epochs
    /// that start past the end and clamps the confirm offset to the end. Returns bytes lost.
    pub(crate) fn crash(&self, keep_unflushed: u64) -> u64 {
        let mut s = self.lock();
        let lost = s.log.crash(keep_unflushed);
        let end = s.log.end();
        s.epochs.truncate_from(end + 1);
        s.confirm = s.confirm.min(end);
        lost
    }
}

/// A producer's message in the simulation: `len` bytes of a generation's content.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) struct SimMessage {
    /// Whose content (the master and its epoch): divergent logs differ in their bytes.
    pub(crate) generation: u64,
    /// How many bytes.
    pub(crate) len: u64,
}

/// The log the shipped put path appends to ([`PutGate::start`](crate::service::PutGate::start)).
impl MessageLog for EpochDisk {
    type Message = SimMessage;
    type Durable = std::future::Ready<Result<Offset, EpochDiskError>>;

    fn put(&self, message: SimMessage) -> PutResult {
        let Ok(wrote_bytes) = u32::try_from(message.len) else {
            return PutResult::refused(PutStatus::MessageIllegal);
        };
        let (offset, _) = Self::put(self, message.generation, message.len);
        PutResult { status: PutStatus::PutOk, offset, wrote_bytes, queue_offset: 0, msg_id: String::new() }
    }

    /// Every put is flushed as it is appended.
    fn durable(&self, _offset: Offset) -> Self::Durable {
        std::future::ready(Ok(self.lock().log.durable()))
    }

    /// ASYNC_FLUSH: every put is durable as it is appended.
    fn flush_settings(&self) -> crate::FlushSettings {
        crate::FlushSettings::default()
    }
}

impl LogRead for EpochDisk {
    type Error = EpochDiskError;

    fn bounds(&self) -> LogBounds {
        self.lock().log.bounds()
    }

    fn flushed(&self) -> Offset {
        self.lock().log.durable()
    }

    fn read(&self, span: LogSpan) -> Result<Bytes, EpochDiskError> {
        self.lock().log.read(span).map_err(|why| EpochDiskError::Read {
            offset: span.offset,
            len: span.len,
            why,
        })
    }

    /// The simulated logs hold bytes, not records: every offset inside the log is a boundary.
    fn is_record_boundary(&self, offset: Offset) -> Result<bool, EpochDiskError> {
        let bounds = self.bounds();
        if offset < bounds.min || offset > bounds.max {
            return Err(EpochDiskError::Outside { offset, min: bounds.min, max: bounds.max });
        }
        Ok(true)
    }

    fn segment_size(&self) -> u64 {
        crate::DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG
    }

    fn epoch_log(&self) -> Option<&dyn EpochLog<Error = EpochDiskError>> {
        Some(self)
    }
}

impl EpochLog for EpochDisk {
    type Error = EpochDiskError;

    fn epochs(&self) -> Vec<EpochEntry> {
        self.lock().epochs.entries().collect()
    }

    fn append_epoch(&self, entry: EpochEntry) -> Result<(), EpochDiskError> {
        let mut s = self.lock();
        if s.epochs.last() == Some(entry) {
            return Ok(());
        }
        let end = s.log.bounds().max;
        if !s.log.is_empty() && entry.start_offset > end {
            return Err(EpochDiskError::Epoch { entry, why: format!("starts past the end {end}") });
        }
        s.epochs
            .append(entry.epoch, entry.start_offset)
            .map(drop)
            .map_err(|e| EpochDiskError::Epoch { entry, why: e.to_string() })
    }

    fn truncate_to(&self, offset: Offset) -> Result<(), EpochDiskError> {
        let mut s = self.lock();
        let bounds = s.log.bounds();
        if offset < bounds.min || offset > bounds.max {
            return Err(EpochDiskError::Outside { offset, min: bounds.min, max: bounds.max });
        }
        let removed =
            if offset < s.log.end() { s.log.slice(offset, s.log.end()).to_vec() } else { Vec::new() };
        s.log.truncate_to(offset);
        s.epochs.truncate_from(offset);
        s.confirm = s.confirm.min(offset);
        s.cuts.push((offset, removed));
        Ok(())
    }

    fn set_confirm_offset(&self, offset: Offset) -> Offset {
        let mut s = self.lock();
        s.confirm = s.confirm.max(offset);
        s.confirm
    }

    fn confirm_offset(&self) -> Offset {
        self.lock().confirm
    }

    fn confirmed_offset(&self) -> Offset {
        // Puts never raise this log's confirm offset.
        self.lock().confirm
    }
}

impl LogWrite for EpochDisk {
    fn append_at(&self, offset: Offset, data: &[u8]) -> Result<Offset, EpochDiskError> {
        self.lock().log.append_at(offset, data).map_err(|end| EpochDiskError::NotAtEnd { offset, end })
    }

    fn flush(&self) -> Result<Offset, EpochDiskError> {
        Ok(self.lock().log.flush())
    }
}
