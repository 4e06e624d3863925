//! The store's configuration, with RocketMQ's `MessageStoreConfig` names and defaults.

use std::net::SocketAddr;
use std::time::Duration;

use crate::error::StoreConfigError;
use crate::mmap::PAGE_SIZE;

/// Size of one consume-queue entry: physical offset `i64`, size `i32`, tag code `i64`.
pub const CQ_ENTRY_SIZE: u64 = 20;

/// When a put counts as done on disk (RocketMQ `FlushDiskType`): under `SyncFlush`,
/// [`CommitLog::put_and_flush`](crate::CommitLog::put_and_flush) returns once the message is on
/// disk (group commit), or `FlushDiskTimeout` after `sync_flush_timeout`; under `AsyncFlush` a
/// background flush runs every `flush_interval_commit_log`. The same type the runtime adapters
/// use.
pub use logship_core::FlushDiskType;

/// What recovery may do beyond RocketMQ's defaults. Not a RocketMQ setting.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryOptions {
    /// Cut the log at a corrupt record in its flushed part (and drop everything after it)
    /// instead of refusing to open with [`StoreError::Corrupt`](crate::StoreError::Corrupt).
    /// Operator's choice only: it discards data that had been durable.
    pub truncate_on_corruption: bool,
    /// Delete every consume queue and rebuild them from the commit log.
    pub rebuild_consume_queues: bool,
}

/// The store's configuration. Field names are RocketMQ's (`MessageStoreConfig`, snake case) and
/// defaults are RocketMQ's unless a field says otherwise.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct StoreConfig {
    /// RocketMQ's `messageDelayLevel` in milliseconds, level 1 first: in `SCHEDULE_TOPIC_XXXX`
    /// a message's consume-queue tags code is its delivery time, its store timestamp plus its
    /// `DELAY` level's delay, as RocketMQ's (see [`cq_tags_code`](crate::codec::cq_tags_code));
    /// empty: tags codes as in any topic. RocketMQ's 18 default levels by default.
    pub schedule_delays_ms: Vec<i64>,
    /// Size of each commit-log segment (`mappedFileSizeCommitLog`, 1 GiB). Must be equal on a
    /// master and its slaves. A multiple of the 4 KiB page size.
    pub mapped_file_size_commit_log: u64,
    /// Size of each consume-queue file (`mappedFileSizeConsumeQueue`, 300 000 entries of 20 bytes).
    pub mapped_file_size_consume_queue: u64,
    /// Synchronous (group commit) or asynchronous flush (`flushDiskType`, ASYNC_FLUSH).
    pub flush_disk_type: FlushDiskType,
    /// Interval of the asynchronous flush (`flushIntervalCommitLog`, 500 ms).
    pub flush_interval_commit_log: Duration,
    /// The asynchronous flush waits for this many dirty pages (`flushCommitLogLeastPages`, 4)...
    pub flush_commit_log_least_pages: u32,
    /// ...unless this long has passed since the last full flush (`flushCommitLogThoroughInterval`, 10 s).
    pub flush_commit_log_thorough_interval: Duration,
    /// Interval of consume-queue flushes (`flushIntervalConsumeQueue`, 1 s).
    pub flush_interval_consume_queue: Duration,
    /// How long a SYNC_FLUSH put waits for its flush (`syncFlushTimeout`, 5 s).
    pub sync_flush_timeout: Duration,
    /// The largest stored message, in bytes (`maxMessageSize`, 4 MiB). A larger message is refused
    /// with `MessageIllegal`. Must leave room for the BLANK record in a segment.
    pub max_message_size: u32,
    /// Hours a segment is kept after its last write (`fileReservedTime`, 72).
    pub file_reserved_time: u32,
    /// The hours of day (local time) at which expired segments are deleted, `;`-separated
    /// (`deleteWhen`, "04").
    pub delete_when: String,
    /// Disk usage (percent) above which expired segments are deleted at any hour
    /// (`diskMaxUsedSpaceRatio`, 75).
    pub disk_max_used_space_ratio: u32,
    /// Disk usage (fraction) above which the oldest segments are deleted even if not expired
    /// (RocketMQ's `diskSpaceCleanForciblyRatio`, 0.85).
    pub disk_space_clean_forcibly_ratio: f64,
    /// Disk usage (fraction) above which puts are refused with `ServiceNotAvailable`
    /// (RocketMQ's `diskSpaceWarningLevelRatio`, 0.90).
    pub disk_space_warning_level_ratio: f64,
    /// Whether the forcible deletion above `disk_space_clean_forcibly_ratio` is enabled
    /// (`cleanFileForciblyEnable`). **Default false here** (RocketMQ: true): without it, a full
    /// disk refuses puts and deletes nothing unexpired. Even when enabled, forced deletion never
    /// goes past the [retention floor](crate::CommitLog::set_retention_floor).
    pub clean_file_forcibly_enable: bool,
    /// How often retention runs (`cleanResourceInterval`, 10 s).
    pub clean_resource_interval: Duration,
    /// At most this many segments are deleted per retention round (RocketMQ's
    /// `DELETE_FILES_BATCH_MAX`, 10).
    pub delete_files_batch_max: u32,
    /// Verify body CRCs while recovering after a crash (`checkCRCOnRecover`, true).
    pub check_crc_on_recover: bool,
    /// Touch every page of the next segment when preallocating it (`warmMapedFileEnable`).
    /// Default false, as in RocketMQ: measured with `logship bench` (ext4, fallocate-reserved
    /// segments), warming the next 1 GiB segment competed with a new slave's catch-up (129 MB
    /// backlog: 125 MB/s warmed, 372 MB/s not) and did not lower put latency at a roll.
    pub warm_mapped_file_enable: bool,
    /// Rate of the background scrub, which verifies every record of every segment after open
    /// and then every `scrub_interval` (logship's `scrubBytesPerSecond`, 32 MiB/s; 0 turns it
    /// off). Not a RocketMQ setting.
    pub scrub_bytes_per_second: u64,
    /// Pause between two scrub passes (24 h).
    pub scrub_interval: Duration,
    /// Wait this long after open before the first scrub pass (60 s), so that the scrub does
    /// not compete with a restart's catch-up.
    pub scrub_start_delay: Duration,
    /// The broker's address, stored in each message and in its message id (`brokerIP1` and the
    /// listen port; 127.0.0.1:10911).
    pub store_host: SocketAddr,
    /// What recovery may do beyond RocketMQ's defaults.
    pub recovery: RecoveryOptions,
    /// Where the commit log's segments live (RocketMQ's `storePathCommitLog`); `None`:
    /// `<root>/commitlog`. The checkpoint, lock and consume queues stay under the root.
    pub store_path_commit_log: Option<std::path::PathBuf>,
    /// Where the epoch file of controller mode lives (RocketMQ's `storePathEpochFile`); `None`:
    /// `<root>/epochFileCheckpoint`. Its `.bak` copy sits beside it.
    pub store_path_epoch_file: Option<std::path::PathBuf>,
    /// Index replicated messages into the consume queues only up to the confirm offset the
    /// slave sets ([`CommitLog::set_confirm_offset`](crate::CommitLog::set_confirm_offset)), so
    /// that consumers never read bytes a new master may still truncate (RocketMQ's controller
    /// mode with `readUnCommitted=false`). Default false: everything is indexed at once, as in
    /// the classic mode. A put indexes its own message (and what precedes it) at once and
    /// raises the confirm offset to its end.
    pub dispatch_up_to_confirm: bool,
    /// Controller mode (RocketMQ's `enableControllerMode=true`): a store holding data must
    /// have a readable epoch file (the main one or its `.bak`), or it refuses to open with
    /// [`StoreError::EpochFileMissing`](crate::StoreError::EpochFileMissing): without its
    /// epochs, its log cannot be checked against a master's, and a divergent tail would be kept
    /// and streamed on. A store without an epoch file gets an empty one at open, so that one
    /// deleted later is noticed. Default false (the classic mode has no epochs).
    pub require_epoch_file: bool,
    /// With [`require_epoch_file`](Self::require_epoch_file): take a log without an epoch file
    /// as it is, once, if its end is exactly this offset (a store that ran in the classic mode
    /// entering controller mode, whose bytes carry no epoch). Naming the end keeps the override
    /// from ever applying to another log: once the log grows, it no longer matches.
    pub adopt_log_without_epochs: Option<u64>,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            // 1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h.
            schedule_delays_ms: [
                1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
            ]
            .iter()
            .map(|s| s * 1000)
            .collect(),
            mapped_file_size_commit_log: 1024 * 1024 * 1024,
            mapped_file_size_consume_queue: 300_000 * CQ_ENTRY_SIZE,
            flush_disk_type: FlushDiskType::AsyncFlush,
            flush_interval_commit_log: Duration::from_millis(500),
            flush_commit_log_least_pages: 4,
            flush_commit_log_thorough_interval: Duration::from_secs(10),
            flush_interval_consume_queue: Duration::from_secs(1),
            sync_flush_timeout: Duration::from_secs(5),
            max_message_size: 4 * 1024 * 1024,
            file_reserved_time: 72,
            delete_when: "04".to_string(),
            disk_max_used_space_ratio: 75,
            disk_space_clean_forcibly_ratio: 0.85,
            disk_space_warning_level_ratio: 0.90,
            clean_file_forcibly_enable: false,
            clean_resource_interval: Duration::from_secs(10),
            delete_files_batch_max: 10,
            check_crc_on_recover: true,
            warm_mapped_file_enable: false,
            scrub_bytes_per_second: 32 << 20,
            scrub_interval: Duration::from_secs(24 * 3600),
            scrub_start_delay: Duration::from_secs(60),
            store_host: SocketAddr::from(([127, 0, 0, 1], 10911)),
            recovery: RecoveryOptions::default(),
            store_path_commit_log: None,
            store_path_epoch_file: None,
            dispatch_up_to_confirm: false,
            require_epoch_file: false,
            adopt_log_without_epochs: None,
        }
    }
}

impl StoreConfig {
    /// Checks every field; the error names the first bad field and its value.
    pub fn validate(&self) -> Result<(), StoreConfigError> {
        let page = PAGE_SIZE as u64;
        let seg = self.mapped_file_size_commit_log;
        if seg == 0 || seg % page != 0 || seg > i32::MAX as u64 + 1 {
            return Err(StoreConfigError::new(
                "mapped_file_size_commit_log",
                seg,
                "must be a positive multiple of 4096, at most 2 GiB (RocketMQ maps segments with int positions)",
            ));
        }
        let cq = self.mapped_file_size_consume_queue;
        if cq == 0 || cq % CQ_ENTRY_SIZE != 0 || cq > i32::MAX as u64 {
            return Err(StoreConfigError::new(
                "mapped_file_size_consume_queue",
                cq,
                "must be a positive multiple of 20 bytes, below 2 GiB",
            ));
        }
        if self.max_message_size == 0
            || u64::from(self.max_message_size) + crate::codec::BLANK_RECORD_LEN as u64 > seg
        {
            return Err(StoreConfigError::new(
                "max_message_size",
                self.max_message_size,
                format!("must be positive and leave 8 bytes for the BLANK record in a {seg}-byte segment"),
            ));
        }
        for (field, d) in [
            ("flush_interval_commit_log", self.flush_interval_commit_log),
            ("flush_commit_log_thorough_interval", self.flush_commit_log_thorough_interval),
            ("flush_interval_consume_queue", self.flush_interval_consume_queue),
            ("sync_flush_timeout", self.sync_flush_timeout),
            ("clean_resource_interval", self.clean_resource_interval),
            ("scrub_interval", self.scrub_interval),
        ] {
            if d.is_zero() {
                return Err(StoreConfigError::new(field, d, "must be positive"));
            }
        }
        parse_delete_when(&self.delete_when)?;
        if !(10..=95).contains(&self.disk_max_used_space_ratio) {
            return Err(StoreConfigError::new(
                "disk_max_used_space_ratio",
                self.disk_max_used_space_ratio,
                "must be a percentage between 10 and 95 (RocketMQ's bounds)",
            ));
        }
        for (field, r) in [
            ("disk_space_clean_forcibly_ratio", self.disk_space_clean_forcibly_ratio),
            ("disk_space_warning_level_ratio", self.disk_space_warning_level_ratio),
        ] {
            if !(r > 0.0 && r <= 1.0) {
                return Err(StoreConfigError::new(field, r, "must be a fraction in (0, 1]"));
            }
        }
        if self.delete_files_batch_max == 0 {
            return Err(StoreConfigError::new(
                "delete_files_batch_max",
                self.delete_files_batch_max,
                "must be positive",
            ));
        }
        Ok(())
    }

    /// Entries per consume-queue file.
    pub(crate) fn cq_entries_per_file(&self) -> u64 {
        self.mapped_file_size_consume_queue / CQ_ENTRY_SIZE
    }
}

/// Parses `delete_when` ("04", "04;16") into hours of day.
pub(crate) fn parse_delete_when(s: &str) -> Result<Vec<u32>, StoreConfigError> {
    let bad = || {
        StoreConfigError::new("delete_when", s, "must be hours of day 0..=23 separated by ';', e.g. \"04\"")
    };
    let hours: Result<Vec<u32>, _> = s.split(';').map(|h| h.trim().parse::<u32>()).collect();
    match hours {
        Ok(h) if !h.is_empty() && h.iter().all(|&x| x < 24) => Ok(h),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_rocketmqs_and_valid() {
        let c = StoreConfig::default();
        assert_eq!(c.mapped_file_size_commit_log, 1 << 30);
        assert_eq!(c.mapped_file_size_consume_queue, 6_000_000);
        assert_eq!(c.flush_interval_commit_log, Duration::from_millis(500));
        assert_eq!(c.max_message_size, 4 << 20);
        assert_eq!(c.file_reserved_time, 72);
        assert_eq!(c.delete_when, "04");
        assert_eq!(c.disk_max_used_space_ratio, 75);
        assert_eq!(c.flush_disk_type, FlushDiskType::AsyncFlush);
        assert!(c.check_crc_on_recover);
        // RocketMQ's default; warming the next segment slowed a new slave's catch-up about 3x.
        assert!(!c.warm_mapped_file_enable, "warmMapedFileEnable defaults to false");
        c.validate().unwrap();
    }

    #[test]
    fn validation_errors_name_the_field_and_value() {
        let mut c = StoreConfig { mapped_file_size_commit_log: 1000, ..StoreConfig::default() };
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, "mapped_file_size_commit_log");
        assert_eq!(e.value, "1000");
        assert!(e.to_string().contains("mapped_file_size_commit_log") && e.to_string().contains("1000"));

        c = StoreConfig { mapped_file_size_commit_log: 4096, ..StoreConfig::default() };
        assert_eq!(c.validate().unwrap_err().field, "max_message_size");

        c = StoreConfig { delete_when: "25".into(), ..StoreConfig::default() };
        let e = c.validate().unwrap_err();
        assert_eq!((e.field, e.value.as_str()), ("delete_when", "\"25\""));

        c = StoreConfig { disk_max_used_space_ratio: 99, ..StoreConfig::default() };
        assert_eq!(c.validate().unwrap_err().field, "disk_max_used_space_ratio");

        c = StoreConfig { sync_flush_timeout: Duration::ZERO, ..StoreConfig::default() };
        assert_eq!(c.validate().unwrap_err().field, "sync_flush_timeout");

        c = StoreConfig { mapped_file_size_consume_queue: 30, ..StoreConfig::default() };
        assert_eq!(c.validate().unwrap_err().field, "mapped_file_size_consume_queue");
        assert_eq!(parse_delete_when("04;16").unwrap(), vec![4, 16]);
    }
}
