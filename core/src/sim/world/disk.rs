//! A node's simulated disk as the production drivers see it: the simulator's byte log behind
//! the core's log traits.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use super::*;
use crate::log::{LogBounds, LogRead, LogWrite};

/// Why the simulated disk refused a read or an append.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum DiskError {
    /// The span is not readable.
    #[error("cannot read {offset}+{len}: {why}")]
    Read { offset: Offset, len: u32, why: &'static str },
    /// An append not at the end.
    #[error("append at {offset}, but the log ends at {end}")]
    NotAtEnd { offset: Offset, end: Offset },
    /// An offset outside the log.
    #[error("offset {offset} is outside the log [{min}, {max}]")]
    Outside { offset: Offset, min: Offset, max: Offset },
    /// A simulated disk fault.
    #[error("simulated disk error")]
    Fault,
}

/// A node's log: the simulator changes it directly (appends, crashes, retention, flushes in
/// the background) and the drivers read it through [`LogRead`].
#[derive(Debug)]
pub(crate) struct Disk {
    log: Mutex<MemLog>,
    segment: u64,
}

impl Disk {
    pub(crate) fn new(log: MemLog, segment: u64) -> Arc<Self> {
        Arc::new(Self { log: Mutex::new(log), segment })
    }

    /// The bytes. The simulation is single-threaded: the lock is never contended, but a
    /// statement must not hold two guards of one disk.
    pub(crate) fn lock(&self) -> MutexGuard<'_, MemLog> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn end(&self) -> Offset {
        self.lock().end()
    }

    pub(crate) fn durable(&self) -> Offset {
        self.lock().durable()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    pub(crate) fn min(&self) -> Offset {
        self.lock().min()
    }
}

impl LogRead for Disk {
    type Error = DiskError;

    fn bounds(&self) -> LogBounds {
        self.lock().bounds()
    }

    fn flushed(&self) -> Offset {
        self.lock().durable()
    }

    fn read(&self, span: LogSpan) -> Result<Bytes, DiskError> {
        self.lock().read(span).map_err(|why| DiskError::Read { offset: span.offset, len: span.len, why })
    }

    /// The simulated logs hold no records: every offset inside the log is a boundary.
    fn is_record_boundary(&self, offset: Offset) -> Result<bool, DiskError> {
        let bounds = self.bounds();
        if offset < bounds.min || offset > bounds.max {
            return Err(DiskError::Outside { offset, min: bounds.min, max: bounds.max });
        }
        Ok(true)
    }

    fn segment_size(&self) -> u64 {
        self.segment
    }
}

impl LogWrite for Disk {
    fn append_at(&self, offset: Offset, data: &[u8]) -> Result<Offset, DiskError> {
        self.lock().append_at(offset, data).map_err(|end| DiskError::NotAtEnd { offset, end })
    }

    fn flush(&self) -> Result<Offset, DiskError> {
        Ok(self.lock().flush())
    }
}
