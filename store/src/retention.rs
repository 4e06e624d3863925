//! Retention (RocketMQ's `CleanCommitLogService`): deletes old segments by age and by disk usage.
//!
//! Each round measures the disk usage of the commit-log directory, then:
//!
//! - above `disk_space_warning_level_ratio` (90 %), puts are refused with `ServiceNotAvailable`
//!   until a later round measures less;
//! - at a `delete_when` hour, or above `disk_max_used_space_ratio` (75 %), segments older than
//!   `file_reserved_time` (by last write) are deleted, oldest first;
//! - above `disk_space_clean_forcibly_ratio` (85 %), and only with `clean_file_forcibly_enable`
//!   (off by default, unlike RocketMQ), the oldest segments are deleted even if they have not
//!   expired, but never a segment with bytes at or past the retention floor (the slowest in-sync
//!   replica's ack, [`set_retention_floor`](crate::CommitLog::set_retention_floor)). Each forced
//!   deletion is logged at WARN with the offsets removed and counted in the store status.
//!
//! At most `delete_files_batch_max` segments go per round, deletion stops at the first segment
//! that is kept, and the active (last) segment is never deleted. The log's minimum offset moves
//! to the first remaining segment, and consume-queue files that only point below it go too.
//! A reader holding a span of a deleted segment keeps its mapping alive until it lets go.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use crate::config::StoreConfig;
use crate::config::parse_delete_when;
use crate::consume_queue::QueueRegistry;
use crate::env::StoreEnv;
use crate::error::{IoContext, StoreError};
use crate::segment;
use crate::segment::LogView;
use crate::sync::{lock, read};

/// The outcome of one retention round.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RetentionReport {
    /// The disk usage measured (`None` if it could not be measured).
    pub disk_used_ratio: Option<f64>,
    /// Whether puts are now refused for lack of disk.
    pub disk_full: bool,
    /// The segment files deleted, oldest first.
    pub deleted_segments: Vec<PathBuf>,
    /// The log's minimum offset after the round.
    pub min_offset: u64,
    /// The `[start, end)` offsets of the segments deleted before they expired (forced).
    pub forced: Vec<(u64, u64)>,
}

/// Retention: its wake-up, the last measurement, the floor and counters, and what a round
/// needs (the published log, the consume queues, the clock and disk, the settings).
pub(crate) struct RetentionState {
    last_ratio: Mutex<Option<f64>>,
    cv: Condvar,
    /// Serializes rounds.
    pub(crate) round: Mutex<()>,
    /// No forced deletion may remove bytes at or past this offset (`u64::MAX`: no floor).
    pub(crate) floor: AtomicU64,
    /// Segments and bytes deleted before they expired, since open.
    pub(crate) forced_segments: AtomicU64,
    pub(crate) forced_bytes: AtomicU64,
    /// Puts are refused: the disk is above `disk_space_warning_level_ratio`.
    pub(crate) disk_full: AtomicBool,
    config: StoreConfig,
    env: StoreEnv,
    commitlog_dir: PathBuf,
    log: Arc<LogView>,
    queues: Arc<QueueRegistry>,
}

impl std::fmt::Debug for RetentionState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RetentionState").field("floor", &self.floor).finish_non_exhaustive()
    }
}

impl RetentionState {
    /// Retention of the log `log` in `commitlog_dir` (its consume queues `queues`).
    pub(crate) fn new(
        config: StoreConfig,
        env: StoreEnv,
        commitlog_dir: PathBuf,
        log: Arc<LogView>,
        queues: Arc<QueueRegistry>,
    ) -> Self {
        Self {
            last_ratio: Mutex::default(),
            cv: Condvar::new(),
            round: Mutex::default(),
            floor: AtomicU64::new(u64::MAX),
            forced_segments: AtomicU64::new(0),
            forced_bytes: AtomicU64::new(0),
            disk_full: AtomicBool::new(false),
            config,
            env,
            commitlog_dir,
            log,
            queues,
        }
    }

    pub(crate) fn wake(&self) {
        let _g = lock(&self.last_ratio);
        self.cv.notify_all();
    }

    pub(crate) fn last_ratio(&self) -> Option<f64> {
        *lock(&self.last_ratio)
    }
    /// Measures the disk usage and refuses or re-accepts puts accordingly.
    pub(crate) fn measure_disk(&self) -> Option<f64> {
        let cfg = &self.config;
        let ratio = match self.env.disk.used_ratio(&self.commitlog_dir) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::warn!(error = %e, dir = %self.commitlog_dir.display(), "cannot measure disk usage");
                None
            }
        };
        *lock(&self.last_ratio) = ratio;
        let r = ratio.unwrap_or(0.0);
        let disk_full = r > cfg.disk_space_warning_level_ratio;
        if self.disk_full.swap(disk_full, Ordering::AcqRel) != disk_full {
            if disk_full {
                tracing::error!(
                    ratio = r,
                    limit = cfg.disk_space_warning_level_ratio,
                    "disk full: refusing puts"
                );
            } else {
                tracing::info!(ratio = r, "disk usage back to normal: accepting puts");
            }
        }
        ratio
    }

    /// Runs one retention round.
    /// One round. `record_min` records the log's new minimum durably (the checkpoint); it runs
    /// before each segment file is deleted.
    pub(crate) fn round(
        &self,
        record_min: &dyn Fn() -> Result<(), StoreError>,
    ) -> Result<RetentionReport, StoreError> {
        let _round = lock(&self.round);
        let cfg = &self.config;
        let ratio = self.measure_disk();
        let r = ratio.unwrap_or(0.0);
        let disk_full = self.disk_full.load(Ordering::Acquire);
        let space_to_delete = r > f64::from(cfg.disk_max_used_space_ratio) / 100.0;
        let clean_immediately = cfg.clean_file_forcibly_enable && r > cfg.disk_space_clean_forcibly_ratio;
        let now = self.env.clock.now_millis();
        let hours = parse_delete_when(&cfg.delete_when).map_err(StoreError::Config)?;
        let time_to_delete = hours.contains(&self.env.clock.hour_of_day(now));
        let mut deleted = Vec::new();
        let mut forced = Vec::new();
        if time_to_delete || space_to_delete || clean_immediately {
            let reserved_ms = i64::from(cfg.file_reserved_time) * 3_600_000;
            loop {
                if deleted.len() >= cfg.delete_files_batch_max as usize {
                    break;
                }
                let candidate = {
                    let segs = read(&self.log.segments);
                    if segs.len() <= 1 {
                        break; // never the active segment
                    }
                    Arc::clone(segs.first().expect("more than one segment"))
                };
                let path = candidate.path().to_path_buf();
                let modified = std::fs::metadata(&path).and_then(|m| m.modified()).at(&path)?;
                let modified_ms =
                    modified.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_millis() as i64;
                let expired = now >= modified_ms.saturating_add(reserved_ms);
                let seg_end = candidate.base + self.log.segment_size;
                let floor = self.floor.load(Ordering::Acquire);
                if !(expired || clean_immediately && seg_end <= floor) {
                    if !expired && clean_immediately {
                        tracing::warn!(
                            segment = %path.display(),
                            floor,
                            "disk above diskSpaceCleanForciblyRatio, but the oldest segment holds bytes an in-sync replica has not acknowledged: keeping it"
                        );
                    }
                    break; // never delete past a kept segment
                }
                {
                    let mut segs = self.log.segments.write().unwrap_or_else(|e| e.into_inner());
                    match segs.first() {
                        Some(first) if Arc::ptr_eq(first, &candidate) && segs.len() > 1 => {}
                        _ => break,
                    }
                    segs.pop_first();
                    let new_min = segs.first().expect("more than one segment").base;
                    self.log.min.fetch_max(new_min, Ordering::AcqRel);
                }
                // Record the new minimum before the file goes, so that a missing head segment
                // at the next open is either recorded here or damage.
                record_min()?;
                std::fs::remove_file(&path).at(&path)?;
                if expired {
                    tracing::info!(path = %path.display(), "deleted an expired commit-log segment");
                } else {
                    tracing::warn!(
                        path = %path.display(),
                        from = candidate.base,
                        to = seg_end,
                        ratio = r,
                        "forced deletion (cleanFileForciblyEnable): removed unexpired messages at offsets [from, to)"
                    );
                    self.forced_segments.fetch_add(1, Ordering::Relaxed);
                    self.forced_bytes.fetch_add(self.log.segment_size, Ordering::Relaxed);
                    forced.push((candidate.base, seg_end));
                }
                deleted.push(path);
            }
            if !deleted.is_empty() {
                segment::sync_dir(&self.commitlog_dir)?;
                self.forget_queue_entries_below_min()?;
            }
        }
        Ok(RetentionReport {
            disk_used_ratio: ratio,
            disk_full,
            deleted_segments: deleted,
            min_offset: self.log.min.load(Ordering::Acquire),
            forced,
        })
    }

    fn forget_queue_entries_below_min(&self) -> Result<(), StoreError> {
        let min = self.log.min.load(Ordering::Acquire);
        let queues: Vec<_> = read(&self.queues).values().flat_map(|q| q.values().cloned()).collect();
        for q in queues {
            for path in q.forget_below(min)? {
                tracing::debug!(path = %path.display(), "deleted a consume-queue file");
            }
        }
        Ok(())
    }
}

/// The retention thread: one round every `clean_resource_interval` (see
/// [`RetentionState::round`] for `record_min`).
pub(crate) fn retention_thread(
    retention: Arc<RetentionState>,
    record_min: impl Fn() -> Result<(), StoreError>,
) {
    loop {
        {
            let mut g = lock(&retention.last_ratio);
            let deadline = std::time::Instant::now() + retention.config.clean_resource_interval;
            loop {
                if retention.log.stop.load(Ordering::Acquire) {
                    return;
                }
                let now = std::time::Instant::now();
                if now >= deadline {
                    break;
                }
                g = retention.cv.wait_timeout(g, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
            }
        }
        if let Err(e) = retention.round(&record_min) {
            tracing::error!(error = %e, "retention round failed");
        }
    }
}
