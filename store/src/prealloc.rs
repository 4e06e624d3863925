//! Segment preallocation (RocketMQ's `AllocateMappedFileService`): the next segment is created,
//! mapped and (with `warm_mapped_file_enable`) has its pages touched on a background thread, so
//! the write path rolls into a segment whose pages are already faulted in.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex};

use crate::error::StoreError;
use crate::mmap::{MapWriter, MappedFile};
use crate::segment;
use crate::segment::LogView;
use crate::sync::lock;

#[derive(Debug, Default)]
struct PreallocState {
    /// The segment to create next.
    requested: Option<u64>,
    /// The segment being created now.
    working: Option<u64>,
    /// A created segment, not yet in the log.
    ready: Option<(u64, Arc<MappedFile>, MapWriter)>,
}

/// The preallocation slot shared by the writer and the preallocation thread, with what the
/// thread needs to create segments.
#[derive(Debug)]
pub(crate) struct Prealloc {
    state: Mutex<PreallocState>,
    cv: Condvar,
    commitlog_dir: PathBuf,
    segment_size: u64,
    lock_file: Arc<File>,
    warm: bool,
}

impl Prealloc {
    /// Preallocation of `segment_size`-byte segments in `commitlog_dir`; every mapping holds
    /// `lock_file`; `warm` touches their pages (`warm_mapped_file_enable`).
    pub(crate) fn new(commitlog_dir: PathBuf, segment_size: u64, lock_file: Arc<File>, warm: bool) -> Self {
        Self {
            state: Mutex::new(PreallocState::default()),
            cv: Condvar::new(),
            commitlog_dir,
            segment_size,
            lock_file,
            warm,
        }
    }

    pub(crate) fn wake(&self) {
        let _g = lock(&self.state);
        self.cv.notify_all();
    }

    /// Whether a segment is requested or being created.
    pub(crate) fn preallocating(&self) -> bool {
        let st = lock(&self.state);
        st.requested.is_some() || st.working.is_some()
    }

    /// Asks the preallocation thread to create the segment at `base`.
    pub(crate) fn request_segment(&self, base: u64) {
        let mut st = lock(&self.state);
        if st.ready.as_ref().is_some_and(|r| r.0 == base) || st.working == Some(base) {
            return;
        }
        st.requested = Some(base);
        self.cv.notify_all();
    }

    /// The segment at `base`: the preallocated one if it is ready (or being made), else a new one.
    pub(crate) fn take_segment(&self, base: u64) -> Result<(Arc<MappedFile>, MapWriter), StoreError> {
        let mut st = lock(&self.state);
        loop {
            if let Some(ready) = st.ready.take() {
                if ready.0 == base {
                    return Ok((ready.1, ready.2));
                }
                Self::discard(ready.1);
            }
            if st.working == Some(base) {
                st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
                continue;
            }
            if st.requested == Some(base) {
                st.requested = None;
            }
            break;
        }
        drop(st);
        let path = self.commitlog_dir.join(segment::file_name(base));
        if path.exists() {
            // Only a segment beyond the log end can be here: one preallocated and then abandoned.
            tracing::warn!(path = %path.display(), "replacing a stale file beyond the log end");
            std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
        }
        segment::create_file(&self.commitlog_dir, base, self.segment_size, true, Some(&self.lock_file))
    }

    fn discard(map: Arc<MappedFile>) {
        let path = map.path().to_path_buf();
        drop(map);
        if let Err(e) = std::fs::remove_file(&path) {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove an unused preallocated segment");
        }
    }

    /// Cancels preallocation: drops a pending request, waits for a segment being created, and
    /// deletes a preallocated one (a truncation moves the log's end back, so the next segment
    /// changes).
    pub(crate) fn cancel_preallocation(&self) -> Result<(), StoreError> {
        let mut st = lock(&self.state);
        st.requested = None;
        while st.working.is_some() {
            st = self.cv.wait(st).unwrap_or_else(|e| e.into_inner());
        }
        let ready = st.ready.take();
        drop(st);
        if let Some((_, map, _)) = ready {
            let path = map.path().to_path_buf();
            drop(map);
            std::fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
            segment::sync_dir(&self.commitlog_dir)?;
        }
        Ok(())
    }

    /// Deletes a preallocated segment that was never used (at clean shutdown).
    pub(crate) fn discard_preallocated(&self) {
        let ready = lock(&self.state).ready.take();
        if let Some((_, map, _)) = ready {
            Self::discard(map);
            let _ = segment::sync_dir(&self.commitlog_dir);
        }
    }
}

/// The preallocation thread. It runs at the lowest priority: warming a segment is a second
/// or more of page zeroing, which must not take CPU from puts and replication.
pub(crate) fn prealloc_thread(prealloc: Arc<Prealloc>, log: Arc<LogView>) {
    if let Err(e) = crate::mmap::lower_current_thread_priority() {
        tracing::debug!(error = %e, "cannot lower the preallocation thread's priority");
    }
    loop {
        let base = {
            let mut st = lock(&prealloc.state);
            loop {
                if log.stop.load(Ordering::Acquire) {
                    return;
                }
                if let Some(b) = st.requested.take() {
                    st.working = Some(b);
                    break b;
                }
                st = prealloc.cv.wait(st).unwrap_or_else(|e| e.into_inner());
            }
        };
        // Preallocation is speculative: on a nearly full disk it would take the space puts
        // need (a reservation holds its blocks until it fails). The writer creates the segment
        // itself when it needs it, and a full disk is then its error.
        match crate::mmap::available_bytes(&prealloc.commitlog_dir) {
            Ok(avail) if avail < prealloc.segment_size.saturating_mul(2) => {
                tracing::debug!(base, avail, "not preallocating: too little disk space");
                let mut st = lock(&prealloc.state);
                st.working = None;
                prealloc.cv.notify_all();
                continue;
            }
            _ => {}
        }
        let created = segment::create_file(
            &prealloc.commitlog_dir,
            base,
            prealloc.segment_size,
            true,
            Some(&prealloc.lock_file),
        )
        .map(|(map, mut writer)| {
            if prealloc.warm {
                writer.touch_pages(&log.stop);
            }
            (map, writer)
        });
        let mut st = lock(&prealloc.state);
        st.working = None;
        match created {
            Ok((map, writer)) => {
                if let Some(old) = st.ready.replace((base, map, writer)) {
                    Prealloc::discard(old.1);
                }
                tracing::debug!(base, "preallocated the next segment");
            }
            Err(e) => {
                tracing::warn!(base, error = %e, "segment preallocation failed; the writer will create it")
            }
        }
        prealloc.cv.notify_all();
    }
}
