//! Flushing: the flush thread (SYNC_FLUSH group commit and ASYNC_FLUSH intervals), durability
//! waits, and checkpoints.
//!
//! One flush at a time writes back the page-aligned dirty range `[flushed, end)` of the commit
//! log (msync), then wakes every waiter it satisfied: waiters that arrive while a flush runs are
//! served by the next one, so concurrent puts share flushes (group commit).

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use logship_core::Offset;

use crate::codec::{self, MessageVersion};
use crate::config::FlushDiskType;
use crate::config::StoreConfig;
use crate::consume_queue::QueueRegistry;
use crate::error::StoreError;
use crate::mmap::PAGE_SIZE;
use crate::segment::LogView;
use crate::sync::{lock, read};

/// The checkpoint is rewritten at most this often by the flush thread.
const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(100);

#[derive(Debug, Default)]
struct FlushState {
    /// The highest offset a waiter asked to be durable.
    requested: u64,
    waiters: HashMap<u64, (u64, Waker)>,
    next_id: u64,
    /// A failed flush: durability is unknown from then on (msync errors are not retryable).
    failed: Option<(PathBuf, Arc<std::io::Error>)>,
    stopped: bool,
}

#[derive(Debug)]
pub(crate) struct FlushProgress {
    /// A message boundary at or below `flushed`: everything before it is durable and whole.
    pub(crate) boundary: u64,
}

/// Flush coordination shared by the flush thread, waiters and the handle.
#[derive(Debug)]
pub(crate) struct FlushShared {
    state: Mutex<FlushState>,
    /// Wakes the flush thread.
    flusher: Condvar,
    /// Wakes blocking waiters.
    flushed_cv: Condvar,
    /// Serializes flushes.
    pub(crate) run: Mutex<FlushProgress>,
    /// Flushes of the commit log so far.
    pub(crate) count: AtomicU64,
}

impl FlushShared {
    pub(crate) fn new(boundary: u64) -> Self {
        Self {
            state: Mutex::new(FlushState::default()),
            flusher: Condvar::new(),
            flushed_cv: Condvar::new(),
            run: Mutex::new(FlushProgress { boundary }),
            count: AtomicU64::new(0),
        }
    }

    pub(crate) fn wake_flusher(&self) {
        let _g = lock(&self.state);
        self.flusher.notify_all();
    }

    pub(crate) fn reset_boundary(&self, boundary: u64) {
        lock(&self.run).boundary = boundary;
    }

    /// Stops accepting waits; wakes every waiter (they see `Closed`).
    pub(crate) fn stop(&self) {
        let mut st = lock(&self.state);
        st.stopped = true;
        for (_, (_, w)) in st.waiters.drain() {
            w.wake();
        }
        self.flusher.notify_all();
        self.flushed_cv.notify_all();
    }

    fn error(failed: &(PathBuf, Arc<std::io::Error>)) -> StoreError {
        StoreError::FlushFailed { path: failed.0.clone(), source: Arc::clone(&failed.1) }
    }
}

/// Holds off every flush while alive (see [`CommitLog::hold_flushes`](crate::CommitLog)).
#[doc(hidden)]
#[derive(Debug)]
pub struct FlushHold<'a> {
    _guard: std::sync::MutexGuard<'a, FlushProgress>,
}

impl FlushShared {
    /// Writes the commit log back up to its current end and wakes the waiters it satisfies.
    pub(crate) fn flush_log(&self, log: &LogView) -> Result<u64, StoreError> {
        let mut progress = lock(&self.run);
        // A dispatched offset read before the end is a boundary at or below it: the boundary walk
        // starts there (on a master it is the end itself, or one message short).
        let dispatched = log.dispatched.load(Ordering::Acquire);
        let target = log.end.load(Ordering::Acquire);
        let from = log.flushed.load(Ordering::Acquire);
        if target > from {
            let segs: Vec<_> = read(&log.segments)
                .iter()
                .filter(|s| s.base < target && s.base + log.segment_size > from)
                .cloned()
                .collect();
            for seg in segs {
                let lo = from.max(seg.base) - seg.base;
                let hi = target.min(seg.base + log.segment_size) - seg.base;
                if let Err(e) = seg.map.flush(lo as usize..hi as usize) {
                    let failed = (seg.path().to_path_buf(), Arc::new(e));
                    let err = Self::error(&failed);
                    tracing::error!(error = %err, "commit-log flush failed");
                    let mut st = lock(&self.state);
                    st.failed = Some(failed);
                    for (_, (_, w)) in st.waiters.drain() {
                        w.wake();
                    }
                    self.flushed_cv.notify_all();
                    return Err(err);
                }
            }
            log.flushed.fetch_max(target, Ordering::AcqRel);
            self.count.fetch_add(1, Ordering::Relaxed);
            progress.boundary = Self::boundary_at_or_below(log, progress.boundary.max(dispatched), target);
        }
        drop(progress);
        let flushed = log.flushed.load(Ordering::Acquire);
        let mut st = lock(&self.state);
        st.waiters.retain(|_, (offset, waker)| {
            let done = *offset <= flushed;
            if done {
                waker.wake_by_ref();
            }
            !done
        });
        self.flushed_cv.notify_all();
        Ok(flushed)
    }

    /// The last message (or segment) boundary at or below `limit`, walking record headers
    /// forward from the known boundary `from` (at or below `limit`).
    fn boundary_at_or_below(log: &LogView, from: u64, limit: u64) -> u64 {
        let mut pos = from.max(log.min.load(Ordering::Acquire));
        let segs = read(&log.segments);
        while pos < limit {
            let Some(seg) = segs.find(pos) else { break };
            let seg_end = seg.base + log.segment_size;
            let remaining = seg_end - pos;
            let next = if remaining < codec::BLANK_RECORD_LEN as u64 {
                seg_end
            } else {
                let rel = (pos - seg.base) as usize;
                let Some(h) = seg.map.read(rel..rel + 8) else {
                    break;
                };
                let total = i32::from_be_bytes([h[0], h[1], h[2], h[3]]);
                let magic = i32::from_be_bytes([h[4], h[5], h[6], h[7]]);
                if magic == codec::BLANK_MAGIC_CODE {
                    seg_end
                } else if MessageVersion::from_magic_code(magic).is_some()
                    && total > 0
                    && total as u64 <= remaining
                {
                    pos + total as u64
                } else {
                    break;
                }
            };
            if next > limit {
                break;
            }
            pos = next;
        }
        pos
    }

    /// Blocks until `offset` is durable or `timeout` passes.
    pub(crate) fn wait_durable(
        &self,
        log: &LogView,
        offset: Offset,
        timeout: Duration,
    ) -> Result<bool, StoreError> {
        let deadline = Instant::now() + timeout;
        let mut st = lock(&self.state);
        loop {
            if log.flushed.load(Ordering::Acquire) >= offset {
                return Ok(true);
            }
            if let Some(f) = &st.failed {
                return Err(Self::error(f));
            }
            if st.stopped {
                return Err(StoreError::Closed);
            }
            if st.requested < offset {
                st.requested = offset;
                self.flusher.notify_all();
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(false);
            }
            st = self.flushed_cv.wait_timeout(st, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }

    /// Blocks every flush until the returned guard drops.
    pub(crate) fn hold_flushes(&self) -> FlushHold<'_> {
        FlushHold { _guard: lock(&self.run) }
    }
}

/// Flushes every consume queue; returns the commit-log offset they are durable up to.
pub(crate) fn flush_consume_queues(log: &LogView, queues: &QueueRegistry) -> Result<u64, StoreError> {
    let dispatched = log.dispatched.load(Ordering::Acquire);
    let queues: Vec<_> = read(queues).values().flat_map(|q| q.values().cloned()).collect();
    crate::consume_queue::flush_queues(&queues)?;
    Ok(dispatched)
}

/// The flush thread: group commits on request, interval flushes, consume-queue flushes and
/// checkpoints.
///
/// `checkpoint` records the durable state in the checkpoint, given the consume queues' durable
/// offset if just measured.
pub(crate) fn flush_thread(
    flush: Arc<FlushShared>,
    log: Arc<LogView>,
    queues: Arc<QueueRegistry>,
    cfg: StoreConfig,
    checkpoint: impl Fn(Option<u64>) -> Result<(), StoreError>,
) {
    let mut last_thorough = Instant::now();
    let mut last_cq = Instant::now();
    let mut last_ckpt = Instant::now();
    loop {
        let deadline = Instant::now() + cfg.flush_interval_commit_log;
        let requested = {
            let mut st = lock(&flush.state);
            loop {
                if log.stop.load(Ordering::Acquire) || st.stopped {
                    return;
                }
                let flushed = log.flushed.load(Ordering::Acquire);
                if st.requested > flushed && log.end.load(Ordering::Acquire) > flushed {
                    break true;
                }
                let now = Instant::now();
                if now >= deadline {
                    break false;
                }
                st = flush.flusher.wait_timeout(st, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
            }
        };
        let flushed = log.flushed.load(Ordering::Acquire);
        let end = log.end.load(Ordering::Acquire);
        let thorough = last_thorough.elapsed() >= cfg.flush_commit_log_thorough_interval;
        let due = end > flushed
            && (requested
                || match cfg.flush_disk_type {
                    FlushDiskType::SyncFlush => true,
                    FlushDiskType::AsyncFlush => {
                        let dirty_pages = end / PAGE_SIZE as u64 - flushed / PAGE_SIZE as u64;
                        thorough || dirty_pages >= u64::from(cfg.flush_commit_log_least_pages)
                    }
                });
        if due {
            match flush.flush_log(&log) {
                Ok(_) if thorough => last_thorough = Instant::now(),
                Ok(_) => {}
                Err(e) => tracing::error!(error = %e, "flush failed"),
            }
        }
        let mut cq_durable = None;
        if last_cq.elapsed() >= cfg.flush_interval_consume_queue {
            last_cq = Instant::now();
            match flush_consume_queues(&log, &queues) {
                Ok(d) => cq_durable = Some(d),
                Err(e) => tracing::error!(error = %e, "consume-queue flush failed"),
            }
        }
        if last_ckpt.elapsed() >= CHECKPOINT_INTERVAL {
            last_ckpt = Instant::now();
            if let Err(e) = checkpoint(cq_durable) {
                tracing::error!(error = %e, "checkpoint write failed");
            }
        }
    }
}

/// Completes once every byte before an offset is durable: the [`MessageLog::durable`]
/// future. Runtime-agnostic (a waker list behind a std mutex); concurrent waits share flushes.
///
/// [`MessageLog::durable`]: logship_core::MessageLog::durable
#[must_use = "futures do nothing unless polled"]
pub struct Durable {
    flush: Arc<FlushShared>,
    log: Arc<LogView>,
    offset: Offset,
    id: Option<u64>,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable").field("offset", &self.offset).finish_non_exhaustive()
    }
}

impl Durable {
    pub(crate) fn new(flush: Arc<FlushShared>, log: Arc<LogView>, offset: Offset) -> Self {
        Self { flush, log, offset, id: None }
    }
}

impl Future for Durable {
    type Output = Result<Offset, StoreError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let flushed = this.log.flushed.load(Ordering::Acquire);
        if flushed >= this.offset {
            return Poll::Ready(Ok(flushed));
        }
        let mut st = lock(&this.flush.state);
        let flushed = this.log.flushed.load(Ordering::Acquire);
        if flushed >= this.offset {
            return Poll::Ready(Ok(flushed));
        }
        if let Some(f) = &st.failed {
            return Poll::Ready(Err(FlushShared::error(f)));
        }
        if st.stopped {
            return Poll::Ready(Err(StoreError::Closed));
        }
        let id = match this.id {
            Some(id) => id,
            None => {
                st.next_id += 1;
                this.id = Some(st.next_id);
                st.next_id
            }
        };
        st.waiters.insert(id, (this.offset, cx.waker().clone()));
        if st.requested < this.offset {
            st.requested = this.offset;
        }
        this.flush.flusher.notify_all();
        Poll::Pending
    }
}

impl Drop for Durable {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            lock(&self.flush.state).waiters.remove(&id);
        }
    }
}
