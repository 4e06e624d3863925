//! An in-memory log: [`MemoryLog`] implements [`LogRead`], [`LogWrite`] and [`MessageLog`], for
//! tests and for embedders that keep the log elsewhere. The simulator's logs share its byte
//! keeping.
//!
//! ```
//! use logship_core::memlog::MemoryLog;
//! use logship_core::{LogRead, LogSpan, LogWrite, MessageLog, PutStatus};
//!
//! let master = MemoryLog::new();
//! let put = master.put(b"hello".to_vec());
//! assert_eq!((put.status, put.offset, put.end()), (PutStatus::PutOk, 0, 5));
//!
//! // A slave's log adopts the first offset it is given, then only appends at its end.
//! let slave = MemoryLog::new();
//! let bytes = master.read(LogSpan { offset: 0, len: 5 })?;
//! assert_eq!(slave.append_at(0, &bytes)?, 5);
//! assert!(slave.append_at(7, b"gap").is_err());
//! assert_eq!(slave.contents(), (0, b"hello".to_vec()));
//! # Ok::<(), logship_core::memlog::MemoryLogError>(())
//! ```
//!
//! It also keeps an epoch list and a confirm offset ([`EpochLog`]), so a controller-mode
//! (AutoSwitch) service can run over it.

use std::sync::{Mutex, MutexGuard, PoisonError};

use bytes::Bytes;

use crate::log::{EpochCache, EpochEntry, EpochError};
use crate::log::{EpochLog, LogBounds, LogRead, LogSpan, LogWrite, MessageLog, Offset, PutResult, PutStatus};

/// The bytes of one node's log: `[base, end)`, of which `[base, durable)` survive a crash and
/// `[min, end)` may be read (retention moves `min`; the bytes below it are kept so the
/// simulator can still compare logs).
#[derive(Clone, Debug, Default)]
pub(crate) struct MemLog {
    base: Offset,
    data: Vec<u8>,
    durable: Offset,
    min: Offset,
}

/// The byte a master of incarnation `generation` writes at `offset`: a pure function, so two
/// incarnations almost always disagree at an offset, and no randomness is spent on content.
#[cfg_attr(not(feature = "sim"), allow(dead_code))]
pub(crate) fn content(generation: u64, offset: Offset) -> u8 {
    let mut z = offset ^ generation.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 31)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 29)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 32)) as u8
}

// The simulator uses the rest; `MemoryLog` needs only part of it.
#[cfg_attr(not(feature = "sim"), allow(dead_code))]
impl MemLog {
    /// A log holding `[base, base + len)` written by `generation`, all durable.
    pub(crate) fn prefilled(generation: u64, base: Offset, len: u64) -> Self {
        let data = (base..base + len).map(|o| content(generation, o)).collect();
        Self { base, data, durable: base + len, min: base }
    }

    /// A copy of `[start, end)` of another log, all durable (a slave that was in sync earlier).
    pub(crate) fn copy_of(other: &Self, start: Offset, end: Offset) -> Self {
        if end <= start {
            return Self::default();
        }
        let data = other.slice(start, end).to_vec();
        Self { base: start, data, durable: end, min: start }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// One past the last written byte; 0 for an empty log (RocketMQ reports 0 then).
    pub(crate) fn end(&self) -> Offset {
        if self.data.is_empty() { 0 } else { self.base + self.data.len() as u64 }
    }

    pub(crate) fn durable(&self) -> Offset {
        if self.data.is_empty() { 0 } else { self.durable }
    }

    pub(crate) fn bounds(&self) -> LogBounds {
        if self.data.is_empty() {
            LogBounds { min: self.min, max: self.min }
        } else {
            LogBounds { min: self.min, max: self.end() }
        }
    }

    /// The bytes of `[start, end)`; the range must be held.
    pub(crate) fn slice(&self, start: Offset, end: Offset) -> &[u8] {
        &self.data[(start - self.base) as usize..(end - self.base) as usize]
    }

    /// Whether `[start, end)` is held.
    pub(crate) fn holds(&self, start: Offset, end: Offset) -> bool {
        !self.data.is_empty() && start >= self.base && end <= self.end() && start <= end
    }

    /// The bytes of a span the master asked to send, or why they cannot be read.
    pub(crate) fn read(&self, span: LogSpan) -> Result<Bytes, &'static str> {
        if span.offset < self.min {
            return Err("span starts below the min offset");
        }
        if !self.holds(span.offset, span.end()) {
            return Err("span is outside the log");
        }
        Ok(Bytes::copy_from_slice(self.slice(span.offset, span.end())))
    }

    /// Appends `data` at `offset`, which must be the end (an empty log adopts any offset).
    pub(crate) fn append_at(&mut self, offset: Offset, data: &[u8]) -> Result<Offset, Offset> {
        if self.data.is_empty() {
            self.base = offset;
            self.durable = offset;
            self.min = offset;
        } else if offset != self.end() {
            return Err(self.end());
        }
        self.data.extend_from_slice(data);
        Ok(self.end())
    }

    /// Appends what a master of `generation` writes next: `len` bytes at the end.
    pub(crate) fn append_generated(&mut self, generation: u64, len: u64) -> Offset {
        let start = if self.data.is_empty() { self.min } else { self.end() };
        if self.data.is_empty() {
            self.base = start;
            self.durable = start;
        }
        self.data.extend((start..start + len).map(|o| content(generation, o)));
        self.end()
    }

    /// Makes every written byte durable.
    pub(crate) fn flush(&mut self) -> Offset {
        self.durable = self.end().max(self.base);
        self.durable()
    }

    /// Makes `[.., upto)` durable (a flush that started when the log ended at `upto`).
    pub(crate) fn flush_upto(&mut self, upto: Offset) {
        self.durable = self.durable.max(upto.min(self.end()));
    }

    /// A crash: keeps the durable bytes plus the first `keep_unflushed` unflushed ones (a torn
    /// tail), and everything left becomes durable (recovery wrote it back). Returns the bytes
    /// lost. A log left with no bytes is empty again, as a wiped store directory would be.
    pub(crate) fn crash(&mut self, keep_unflushed: u64) -> u64 {
        if self.data.is_empty() {
            return 0;
        }
        let end = self.end();
        let keep_end = (self.durable + keep_unflushed).min(end);
        self.data.truncate((keep_end - self.base) as usize);
        self.durable = keep_end;
        if self.data.is_empty() {
            let min = self.min;
            *self = Self { min, ..Self::default() };
        }
        end - keep_end
    }

    /// Cuts the log to end at `offset`; `offset` must lie in [`bounds`](Self::bounds). A log
    /// cut to its min offset is empty again, keeping that min (it resumes there).
    pub(crate) fn truncate_to(&mut self, offset: Offset) {
        let bounds = self.bounds();
        debug_assert!(bounds.min <= offset && offset <= bounds.max, "caller checks the range");
        if self.data.is_empty() {
            return;
        }
        self.data.truncate((offset - self.base) as usize);
        self.durable = self.durable.min(offset);
        if self.data.is_empty() {
            let min = self.min;
            *self = Self { min, base: min, durable: min, ..Self::default() };
        }
    }

    /// Retention: bytes below `min` can no longer be read.
    pub(crate) fn retain(&mut self, min: Offset) {
        self.min = self.min.max(min);
    }

    pub(crate) fn min(&self) -> Offset {
        self.min
    }
}

/// Why a [`MemoryLog`] refused a read or an append.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemoryLogError {
    /// The span is not (or no longer) held.
    #[error("cannot read {span:?}: {reason}; the log holds [{}, {})", bounds.min, bounds.max)]
    OutOfRange {
        /// What was asked for.
        span: LogSpan,
        /// What the log holds.
        bounds: LogBounds,
        /// Why it cannot be read.
        reason: &'static str,
    },
    /// An append not at the end: the log never has a gap.
    #[error("append at {offset}, but the log ends at {end}")]
    NotAtEnd {
        /// Where the append was asked for.
        offset: Offset,
        /// The log's end.
        end: Offset,
    },
    /// A truncation outside the log.
    #[error("cannot truncate to {offset}: the log holds [{}, {})", bounds.min, bounds.max)]
    TruncateOutOfRange {
        /// Where the cut was asked for.
        offset: Offset,
        /// What the log holds.
        bounds: LogBounds,
    },
    /// An epoch the list cannot take (not above the last one, or starting before it).
    #[error("epoch {entry:?} refused: {error}")]
    EpochRefused {
        /// The entry offered.
        entry: EpochEntry,
        /// Why.
        #[source]
        error: EpochError,
    },
    /// An epoch that starts past the end of a non-empty log: its bytes would leave a gap.
    #[error("epoch {entry:?} starts past the log's end {end}")]
    EpochBeyondEnd {
        /// The entry offered.
        entry: EpochEntry,
        /// The log's end.
        end: Offset,
    },
    /// A message too large for a `u32` size.
    #[error("a {len}-byte message does not fit a u32 size")]
    TooLarge {
        /// The message's length.
        len: usize,
    },
}

/// A thread-safe in-memory log for tests and embedding: a master's log (`put` appends a
/// message's bytes as they are, with no RocketMQ framing) or a slave's (`append_at` stores
/// replicated bytes). `flush` marks every byte durable; nothing survives the process. Its
/// epoch list and confirm offset ([`EpochLog`]) live in the same lock as the bytes, so a
/// truncation cuts all three at once.
#[derive(Debug, Default)]
pub struct MemoryLog {
    inner: Mutex<State>,
    flush: crate::FlushSettings,
}

#[derive(Debug, Default)]
struct State {
    log: MemLog,
    epochs: EpochCache,
    confirm: Offset,
}

impl std::ops::Deref for State {
    type Target = MemLog;
    fn deref(&self) -> &MemLog {
        &self.log
    }
}

impl std::ops::DerefMut for State {
    fn deref_mut(&mut self) -> &mut MemLog {
        &mut self.log
    }
}

impl MemoryLog {
    /// An empty log. As a slave's, it adopts the first offset a master sends.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty log that reports `flush` as its [`flush_settings`](MessageLog::flush_settings)
    /// (ASYNC_FLUSH by default). Its [`durable`](MessageLog::durable) completes at once either
    /// way: this selects what a master service waits for, as a store's setting would.
    pub fn with_flush_settings(flush: crate::FlushSettings) -> Self {
        Self { flush, ..Self::default() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The readable bytes: where they start, and a copy of them.
    pub fn contents(&self) -> (Offset, Vec<u8>) {
        let log = self.lock();
        let bounds = log.bounds();
        if bounds.max <= bounds.min {
            return (bounds.min, Vec::new());
        }
        (bounds.min, log.slice(bounds.min, bounds.max).to_vec())
    }
}

impl LogRead for MemoryLog {
    type Error = MemoryLogError;

    fn bounds(&self) -> LogBounds {
        self.lock().bounds()
    }

    fn flushed(&self) -> Offset {
        self.lock().durable()
    }

    fn read(&self, span: LogSpan) -> Result<Bytes, MemoryLogError> {
        let log = self.lock();
        log.read(span).map_err(|reason| MemoryLogError::OutOfRange { span, bounds: log.bounds(), reason })
    }

    /// A memory log keeps bytes, not records, so every offset it holds counts as a boundary: it
    /// cannot tell a diverged slave from one that is merely behind.
    fn is_record_boundary(&self, offset: Offset) -> Result<bool, MemoryLogError> {
        let bounds = self.lock().bounds();
        if offset < bounds.min || offset > bounds.max {
            let span = LogSpan { offset, len: 0 };
            return Err(MemoryLogError::OutOfRange { span, bounds, reason: "outside the log" });
        }
        Ok(true)
    }

    /// A memory log has no segments: it reports RocketMQ's default, so a master over it cuts
    /// frames where one over a default store would.
    fn segment_size(&self) -> u64 {
        crate::DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG
    }

    fn epoch_log(&self) -> Option<&dyn EpochLog<Error = MemoryLogError>> {
        Some(self)
    }
}

impl EpochLog for MemoryLog {
    type Error = MemoryLogError;

    fn epochs(&self) -> Vec<EpochEntry> {
        self.lock().epochs.entries().collect()
    }

    fn append_epoch(&self, entry: EpochEntry) -> Result<(), MemoryLogError> {
        let mut state = self.lock();
        if state.epochs.last() == Some(entry) {
            return Ok(());
        }
        let end = state.log.bounds().max;
        if !state.log.is_empty() && entry.start_offset > end {
            return Err(MemoryLogError::EpochBeyondEnd { entry, end });
        }
        state
            .epochs
            .append(entry.epoch, entry.start_offset)
            .map(drop)
            .map_err(|error| MemoryLogError::EpochRefused { entry, error })
    }

    /// Every offset of a memory log is a record boundary (it keeps bytes, not records).
    fn truncate_to(&self, offset: Offset) -> Result<(), MemoryLogError> {
        let mut state = self.lock();
        let bounds = state.log.bounds();
        if offset < bounds.min || offset > bounds.max {
            return Err(MemoryLogError::TruncateOutOfRange { offset, bounds });
        }
        state.log.truncate_to(offset);
        state.epochs.truncate_from(offset);
        state.confirm = state.confirm.min(offset);
        Ok(())
    }

    fn set_confirm_offset(&self, offset: Offset) -> Offset {
        let mut state = self.lock();
        state.confirm = state.confirm.max(offset);
        state.confirm
    }

    fn confirm_offset(&self) -> Offset {
        self.lock().confirm
    }

    fn confirmed_offset(&self) -> Offset {
        // Puts never raise this log's confirm offset.
        self.lock().confirm
    }
}

impl LogWrite for MemoryLog {
    fn append_at(&self, offset: Offset, data: &[u8]) -> Result<Offset, MemoryLogError> {
        self.lock().append_at(offset, data).map_err(|end| MemoryLogError::NotAtEnd { offset, end })
    }

    fn flush(&self) -> Result<Offset, MemoryLogError> {
        Ok(self.lock().flush())
    }
}

impl MessageLog for MemoryLog {
    type Message = Vec<u8>;
    type Durable = std::future::Ready<Result<Offset, MemoryLogError>>;

    fn put(&self, message: Vec<u8>) -> PutResult {
        let Ok(wrote_bytes) = u32::try_from(message.len()) else {
            return PutResult::refused(PutStatus::MessageIllegal);
        };
        let mut log = self.lock();
        // An empty log (new, or cut to its min offset) resumes at its min offset.
        let offset = log.bounds().max;
        match log.append_at(offset, &message) {
            Ok(_) => PutResult {
                status: PutStatus::PutOk,
                offset,
                wrote_bytes,
                queue_offset: 0,
                msg_id: String::new(),
            },
            Err(_) => PutResult::refused(PutStatus::UnknownError),
        }
    }

    /// Flushes (marks every byte durable) and completes at once.
    fn durable(&self, _offset: Offset) -> Self::Durable {
        std::future::ready(Ok(self.lock().flush()))
    }

    /// ASYNC_FLUSH unless built [`with_flush_settings`](MemoryLog::with_flush_settings).
    fn flush_settings(&self) -> crate::FlushSettings {
        self.flush
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn append_is_contiguous_and_an_empty_log_adopts() {
        let mut log = MemLog::default();
        assert_eq!(log.end(), 0);
        assert_eq!(log.append_at(4096, b"abc"), Ok(4099));
        assert_eq!(log.base, 4096);
        assert_eq!(log.append_at(4098, b"x"), Err(4099));
        assert_eq!(log.append_at(4099, b"d"), Ok(4100));
        assert_eq!(log.slice(4097, 4100), b"bcd");
    }

    #[test]
    fn crash_keeps_durable_bytes_plus_a_torn_part() {
        let mut log = MemLog::prefilled(1, 0, 10);
        log.append_generated(1, 10);
        assert_eq!(log.durable(), 10);
        assert_eq!(log.crash(4), 6);
        assert_eq!((log.end(), log.durable()), (14, 14));
        let mut fresh = MemLog::default();
        fresh.append_at(100, b"xyz").unwrap();
        assert_eq!(fresh.crash(0), 3);
        assert!(fresh.is_empty());
        assert_eq!(fresh.end(), 0);
    }

    #[test]
    fn reads_refuse_retained_and_missing_bytes() {
        let mut log = MemLog::prefilled(1, 0, 100);
        log.retain(50);
        assert!(log.read(LogSpan { offset: 40, len: 20 }).is_err());
        assert!(log.read(LogSpan { offset: 90, len: 20 }).is_err());
        assert_eq!(log.read(LogSpan { offset: 50, len: 2 }).unwrap().len(), 2);
    }

    #[test]
    fn memory_log_serves_as_master_and_slave_log() {
        let master = MemoryLog::new();
        assert_eq!(master.bounds(), LogBounds { min: 0, max: 0 });
        let first = master.put(b"abc".to_vec());
        let second = master.put(b"de".to_vec());
        assert_eq!((first.offset, first.end(), second.offset, second.end()), (0, 3, 3, 5));
        assert_eq!(master.durable(5).into_inner(), Ok(5));
        assert_eq!(master.flushed(), 5);
        let err = master.read(LogSpan { offset: 4, len: 2 }).unwrap_err();
        assert!(matches!(err, MemoryLogError::OutOfRange { .. }), "{err}");

        let slave = MemoryLog::new();
        assert_eq!(slave.append_at(3, b"de"), Ok(5));
        assert_eq!(slave.append_at(4, b"x"), Err(MemoryLogError::NotAtEnd { offset: 4, end: 5 }));
        assert_eq!(slave.flushed(), 3, "appended bytes are not durable until a flush");
        assert_eq!(slave.flush(), Ok(5));
        assert_eq!(slave.contents(), (3, b"de".to_vec()));
        assert_eq!(slave.read(LogSpan { offset: 3, len: 2 }).unwrap(), Bytes::from_static(b"de"));
    }

    fn entry(epoch: i32, start_offset: Offset) -> EpochEntry {
        EpochEntry { epoch, start_offset }
    }

    #[test]
    fn memory_log_is_an_epoch_log() {
        let log = MemoryLog::new();
        let epochs = log.epoch_log().expect("a memory log keeps epochs");
        assert!(epochs.epochs().is_empty());
        assert_eq!(epochs.confirm_offset(), 0);
    }

    #[test]
    fn epochs_append_in_order_and_refuse_going_back_or_past_the_end() {
        let log = MemoryLog::new();
        log.append_epoch(entry(1, 0)).unwrap();
        log.append_epoch(entry(1, 0)).unwrap(); // the same entry again: a no-op
        assert_eq!(log.put(b"abcd".to_vec()).status, crate::PutStatus::PutOk);
        log.append_epoch(entry(2, 4)).unwrap();
        log.append_epoch(entry(3, 4)).unwrap(); // epoch 2 wrote nothing: kept, empty
        for stale in [entry(2, 4), entry(1, 4)] {
            let err = log.append_epoch(stale).unwrap_err();
            assert!(matches!(
                err,
                MemoryLogError::EpochRefused { error: EpochError::EpochNotIncreasing { .. }, .. }
            ));
        }
        let err = log.append_epoch(entry(4, 2)).unwrap_err();
        assert!(matches!(
            err,
            MemoryLogError::EpochRefused { error: EpochError::StartWentBackwards { .. }, .. }
        ));
        let err = log.append_epoch(entry(4, 5)).unwrap_err();
        assert_eq!(err, MemoryLogError::EpochBeyondEnd { entry: entry(4, 5), end: 4 });
        assert_eq!(log.epochs(), vec![entry(1, 0), entry(2, 4), entry(3, 4)]);
    }

    #[test]
    fn an_empty_log_takes_an_epoch_at_any_start() {
        let log = MemoryLog::new();
        log.append_epoch(entry(5, 4096)).unwrap();
        assert_eq!(log.epochs(), vec![entry(5, 4096)]);
    }

    #[test]
    fn confirm_offset_only_rises_until_a_truncation() {
        let log = MemoryLog::new();
        assert_eq!(log.put(vec![7; 10]).status, crate::PutStatus::PutOk);
        assert_eq!(log.set_confirm_offset(8), 8);
        assert_eq!(log.set_confirm_offset(3), 8);
        assert_eq!(log.confirm_offset(), 8);
        log.truncate_to(5).unwrap();
        assert_eq!(log.confirm_offset(), 5);
        log.truncate_to(5).unwrap();
        assert_eq!(log.set_confirm_offset(2), 5);
    }

    #[test]
    fn truncation_cuts_bytes_epochs_and_confirm_offset_together() {
        let log = MemoryLog::new();
        log.append_epoch(entry(1, 0)).unwrap();
        assert_eq!(log.put(b"0123".to_vec()).status, crate::PutStatus::PutOk);
        log.append_epoch(entry(2, 4)).unwrap();
        assert_eq!(log.put(b"4567".to_vec()).status, crate::PutStatus::PutOk);
        log.append_epoch(entry(3, 8)).unwrap();
        log.set_confirm_offset(8);
        log.flush().unwrap();
        log.truncate_to(4).unwrap();
        assert_eq!(log.contents(), (0, b"0123".to_vec()));
        assert_eq!(log.epochs(), vec![entry(1, 0)], "epochs starting at or after the cut go");
        assert_eq!((log.confirm_offset(), log.flushed()), (4, 4));
        // The log resumes at the cut.
        assert_eq!(log.put(b"x".to_vec()).offset, 4);
        assert_eq!(log.append_at(5, b"y"), Ok(6));
    }

    #[test]
    fn truncation_outside_the_log_is_refused_and_changes_nothing() {
        let log = MemoryLog::new();
        log.append_at(100, b"abc").unwrap();
        log.append_epoch(entry(1, 100)).unwrap();
        for offset in [99, 104] {
            let err = log.truncate_to(offset).unwrap_err();
            assert_eq!(
                err,
                MemoryLogError::TruncateOutOfRange { offset, bounds: LogBounds { min: 100, max: 103 } }
            );
        }
        assert_eq!(log.contents(), (100, b"abc".to_vec()));
        assert_eq!(log.epochs(), vec![entry(1, 100)]);
    }

    #[test]
    fn a_log_cut_to_its_start_resumes_there() {
        let log = MemoryLog::new();
        log.append_at(100, b"abc").unwrap();
        log.truncate_to(100).unwrap();
        assert_eq!(log.bounds(), LogBounds { min: 100, max: 100 });
        assert_eq!(log.contents(), (100, Vec::new()));
        let put = log.put(b"z".to_vec());
        assert_eq!((put.offset, put.end()), (100, 101));
    }
}
