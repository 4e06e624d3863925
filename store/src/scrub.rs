//! The background scrub: `scrub_start_delay` after the store opens, a low-priority thread reads
//! every segment and checks every record as recovery would (magic, sizes, physical offset,
//! topic, body CRC), at most `scrub_bytes_per_second`, then again every `scrub_interval`. A clean restart scans
//! nothing and a crash restart scans only from the durable boundary, so without it a flipped
//! byte in an older segment would surface only when a read hits it.
//!
//! Findings (segment, offset, error) and progress are in the store status. A damaged record
//! does not stop the pass: the scrub looks for the next valid message in the segment (a valid
//! message carries its own physical offset, so one is not found by chance) and goes on there.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::codec::{self, Checks, Record};
use crate::segment::LogView;
use crate::sync::{lock, read};

/// Findings kept in the status (the oldest are dropped beyond this; the count goes on).
const MAX_FINDINGS: usize = 100;

/// Bytes verified between two rate-limit checks.
const CHUNK: u64 = 1 << 20;

/// A damaged record the scrub found.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScrubFinding {
    /// The segment file.
    pub segment: PathBuf,
    /// The physical offset of the damaged record.
    pub offset: u64,
    /// What is wrong with it.
    pub error: String,
    /// Where the scrub found the next valid record (`None`: none in the rest of the segment).
    pub resumed_at: Option<u64>,
}

/// The scrub's progress and findings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ScrubStatus {
    /// Whether the scrub runs (`scrub_bytes_per_second > 0`).
    pub enabled: bool,
    /// Passes over the whole log completed since open.
    pub passes: u64,
    /// The offset the current pass has verified up to (`None` between passes).
    pub position: Option<u64>,
    /// The log end the current (or last) pass verifies up to.
    pub pass_end: u64,
    /// Bytes verified since open.
    pub bytes_verified: u64,
    /// Damaged records found since open.
    pub damaged_records: u64,
    /// The latest findings, oldest first (at most 100).
    pub findings: Vec<ScrubFinding>,
}

#[derive(Debug, Default)]
pub(crate) struct ScrubState {
    status: Mutex<ScrubStatus>,
    cv: Condvar,
    bytes: AtomicU64,
}

impl ScrubState {
    pub(crate) fn wake(&self) {
        let _g = lock(&self.status);
        self.cv.notify_all();
    }

    pub(crate) fn snapshot(&self, enabled: bool) -> ScrubStatus {
        let mut s = lock(&self.status).clone();
        s.enabled = enabled;
        s.bytes_verified = self.bytes.load(Ordering::Relaxed);
        s
    }

    /// Sleeps up to `d`; false if the store is stopping.
    fn sleep(&self, log: &LogView, d: Duration) -> bool {
        let deadline = Instant::now() + d;
        let mut g = lock(&self.status);
        loop {
            if log.stop.load(Ordering::Acquire) {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            g = self.cv.wait_timeout(g, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

/// The scrub thread's settings (`scrubBytesPerSecond`, the start delay and the pause between
/// passes).
#[derive(Copy, Clone, Debug)]
pub(crate) struct ScrubConfig {
    pub(crate) rate: u64,
    pub(crate) start_delay: Duration,
    pub(crate) interval: Duration,
}

/// The scrub thread: verifies the log through `log`, reports into `scrub`.
pub(crate) fn scrub_thread(log: Arc<LogView>, scrub: Arc<ScrubState>, cfg: ScrubConfig) {
    let rate = cfg.rate;
    if rate == 0 {
        return;
    }
    if let Err(e) = crate::mmap::lower_current_thread_priority() {
        tracing::debug!(error = %e, "cannot lower the scrub thread's priority");
    }
    if !scrub.sleep(&log, cfg.start_delay) {
        return;
    }
    loop {
        if !scrub_pass(&log, &scrub, rate) {
            return;
        }
        if !scrub.sleep(&log, cfg.interval) {
            return;
        }
    }
}

/// One pass over the log as it is now; false if the store is stopping.
fn scrub_pass(log: &LogView, scrub: &ScrubState, rate: u64) -> bool {
    let end = log.end.load(Ordering::Acquire);
    let started = Instant::now();
    let mut verified_this_pass = 0u64;
    {
        let mut st = lock(&scrub.status);
        st.pass_end = end;
        st.position = Some(log.min.load(Ordering::Acquire));
    }
    let size = log.segment_size;
    let mut pos = log.min.load(Ordering::Acquire);
    let mut found = 0u64;
    while pos < end {
        let Some(seg) = read(&log.segments).find(pos).cloned() else {
            // Retention deleted it meanwhile: go on from the new minimum.
            let min = log.min.load(Ordering::Acquire);
            if min > pos {
                pos = min;
                continue;
            }
            break;
        };
        let seg_end = seg.base + size;
        let limit = end.min(seg_end);
        let Some(bytes) = seg.map.read(0..(limit - seg.base) as usize) else { break };
        let checks = Checks { crc: true, zero_suffix: false };
        let mut chunk_start = pos;
        while pos < limit {
            let rel = (pos - seg.base) as usize;
            let remaining = (seg_end - pos) as usize;
            if remaining < codec::BLANK_RECORD_LEN {
                pos = limit;
                break;
            }
            match codec::parse_record(&bytes[rel..], remaining, Some(pos), checks) {
                Record::Message(v) => pos += v.total as u64,
                Record::Blank { .. } => pos = limit,
                Record::Incomplete => pos = limit,
                Record::Invalid { error } => {
                    let resumed = next_valid(bytes, seg.base, size, rel + 1);
                    let finding = ScrubFinding {
                        segment: seg.path().to_path_buf(),
                        offset: pos,
                        error: error.to_string(),
                        resumed_at: resumed,
                    };
                    tracing::error!(segment = %finding.segment.display(), offset = pos, %error, resumed_at = ?resumed, "scrub found a damaged record");
                    found += 1;
                    let mut st = lock(&scrub.status);
                    st.damaged_records += 1;
                    if st.findings.len() >= MAX_FINDINGS {
                        st.findings.remove(0);
                    }
                    st.findings.push(finding);
                    drop(st);
                    pos = resumed.unwrap_or(limit);
                }
            }
            if pos - chunk_start >= CHUNK || pos >= limit {
                let n = pos - chunk_start;
                chunk_start = pos;
                verified_this_pass += n;
                scrub.bytes.fetch_add(n, Ordering::Relaxed);
                lock(&scrub.status).position = Some(pos);
                // Rate limit: the pass may not be ahead of `rate` bytes per second.
                let due = Duration::from_secs_f64(verified_this_pass as f64 / rate as f64);
                let elapsed = started.elapsed();
                if due > elapsed && !scrub.sleep(log, due - elapsed) {
                    return false;
                }
                if log.stop.load(Ordering::Acquire) {
                    return false;
                }
            }
        }
        pos = pos.max(limit);
    }
    let mut st = lock(&scrub.status);
    st.passes += 1;
    st.position = None;
    drop(st);
    tracing::info!(
        end,
        damaged = found,
        seconds = format!("{:.3}", started.elapsed().as_secs_f64()),
        "scrub pass finished"
    );
    true
}

/// The first offset after `from` (relative to the segment) where a valid message starts.
fn next_valid(bytes: &[u8], base: u64, size: u64, from: usize) -> Option<u64> {
    let checks = Checks { crc: true, zero_suffix: false };
    (from..bytes.len().saturating_sub(codec::BLANK_RECORD_LEN)).find_map(|p| {
        let magic = i32::from_be_bytes([bytes[p + 4], bytes[p + 5], bytes[p + 6], bytes[p + 7]]);
        codec::MessageVersion::from_magic_code(magic)?;
        let at = base + p as u64;
        matches!(codec::parse_record(&bytes[p..], (size as usize) - p, Some(at), checks), Record::Message(_))
            .then_some(at)
    })
}
