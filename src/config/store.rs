//! The store's disk, retention and recovery keys.

use super::keys::{ALL, declare_keys};
use super::{BrokerConfigError, BrokerSettings, boolean, invalid, number};

/// The store keys about disk space, retention and recovery (one block, parsed by
/// [`StoreKeys::set`] and applied by [`StoreKeys::apply`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StoreKeys {
    /// `cleanFileForciblyEnable`: above `diskSpaceCleanForciblyRatio`, delete the oldest
    /// segments even before `fileReservedTime`. **Default false** (RocketMQ: true): logship
    /// refuses puts instead of deleting unexpired messages, unless asked.
    pub clean_file_forcibly_enable: bool,
    /// `diskSpaceCleanForciblyRatio` (as a fraction; written as a percent or a fraction):
    /// where forced deletion starts, if enabled.
    pub disk_space_clean_forcibly_ratio: f64,
    /// `diskSpaceWarningLevelRatio` (as a fraction; written as a percent or a fraction): above
    /// it, puts are refused.
    pub disk_space_warning_level_ratio: f64,
    /// `warmMapedFileEnable`: fault in the pages of the next segment ahead of the writer.
    pub warm_maped_file_enable: bool,
    /// logship `rebuildConsumeQueues`: at open, delete every consume queue and rebuild them
    /// from the commit log.
    pub rebuild_consume_queues: bool,
    /// logship `truncateOnCorruption`: at open, cut the commit log at a corrupt record instead
    /// of refusing to start (discards the data from there on), or accept missing segments.
    pub truncate_on_corruption: bool,
    /// logship `scrubBytesPerSecond`: rate of the background CRC scrub (0: off).
    pub scrub_bytes_per_second: u64,
}

impl Default for StoreKeys {
    fn default() -> Self {
        let store = logship_store::StoreConfig::default();
        Self {
            clean_file_forcibly_enable: store.clean_file_forcibly_enable,
            disk_space_clean_forcibly_ratio: store.disk_space_clean_forcibly_ratio,
            disk_space_warning_level_ratio: store.disk_space_warning_level_ratio,
            warm_maped_file_enable: store.warm_mapped_file_enable,
            rebuild_consume_queues: false,
            truncate_on_corruption: false,
            scrub_bytes_per_second: store.scrub_bytes_per_second,
        }
    }
}

impl StoreKeys {
    /// Parses `key` if it is one of these keys; `Ok(false)` if it is not.
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, BrokerConfigError> {
        set_store(self, key, v)
    }

    /// Writes these settings into a store configuration.
    pub fn apply(&self, c: &mut logship_store::StoreConfig) {
        c.clean_file_forcibly_enable = self.clean_file_forcibly_enable;
        c.disk_space_clean_forcibly_ratio = self.disk_space_clean_forcibly_ratio;
        c.disk_space_warning_level_ratio = self.disk_space_warning_level_ratio;
        c.warm_mapped_file_enable = self.warm_maped_file_enable;
        c.recovery.rebuild_consume_queues = self.rebuild_consume_queues;
        c.recovery.truncate_on_corruption = self.truncate_on_corruption;
        c.scrub_bytes_per_second = self.scrub_bytes_per_second;
    }
}

/// A used-space ratio as RocketMQ 5 writes it, an `int` percent (`90`), or as a fraction
/// with a decimal point (`0.90`, the form of 4.9's system properties and of earlier logship
/// configurations). Kept as a fraction.
fn used_ratio(key: &str, v: &str) -> Result<f64, BrokerConfigError> {
    let ratio = if v.contains('.') {
        v.parse::<f64>().ok().filter(|r| *r > 0.0 && *r <= 1.0)
    } else {
        v.parse::<u8>().ok().filter(|p| (1..=100).contains(p)).map(|p| f64::from(p) / 100.0)
    };
    ratio.ok_or_else(|| {
        invalid(
            key,
            v,
            "a percent from 1 to 100 as RocketMQ 5 writes it (e.g. 90), or a fraction (e.g. 0.90)",
        )
    })
}

declare_keys! {
    fn set_store(st: &mut StoreKeys; key, v);
    pub(super) const STORE_KEYS = "Disk, retention and recovery";
    "cleanFileForciblyEnable", ALL, Value "false",
        "(RocketMQ's default: `true`) above `diskSpaceCleanForciblyRatio`, delete the oldest segments before `fileReservedTime`. Off, a full disk refuses puts and deletes nothing unexpired. On, it still never deletes a segment holding bytes the slowest in-sync slave has not acknowledged, logs each removed offset range at WARN and counts it (`forced_deleted_segments` in the store status)"
        => st.clean_file_forcibly_enable = boolean(key, v)?;
    "diskSpaceCleanForciblyRatio", ALL, Value "85",
        "forced deletion starts / puts are refused (503) above these percents of the disk used (RocketMQ 5's `int` percent; a fraction such as `0.85` is read too)"
        => st.disk_space_clean_forcibly_ratio = used_ratio(key, v)?;
    "diskSpaceWarningLevelRatio", ALL, Value "90",
        "forced deletion starts / puts are refused (503) above these percents of the disk used (RocketMQ 5's `int` percent; a fraction such as `0.90` is read too)"
        => st.disk_space_warning_level_ratio = used_ratio(key, v)?;
    "warmMapedFileEnable", ALL, Value "false",
        "fault in the next segment's pages ahead of the writer (measured: it competes with a new slave's catch-up and does not shorten rolls)"
        => st.warm_maped_file_enable = boolean(key, v)?;
    "rebuildConsumeQueues", ALL, Value "false",
        "at start, delete every consume queue and rebuild them from the commit log (the way past a corrupt consume queue; the open error says so)"
        => st.rebuild_consume_queues = boolean(key, v)?;
    "truncateOnCorruption", ALL, Value "false",
        "at start, cut the commit log at a corrupt record in its flushed part (or accept segments missing though the checkpoint records them) instead of refusing to start; **discards** everything from the damage on"
        => st.truncate_on_corruption = boolean(key, v)?;
    "scrubBytesPerSecond", ALL, Value "33554432",
        "rate of the background scrub that verifies every record's CRC, from a minute after start and every 24 h (`0`: off); progress and findings under `store.scrub` in `/status`"
        => st.scrub_bytes_per_second = number(key, v, 0, u64::MAX)?;

}

impl BrokerSettings {
    /// The store configuration for these settings.
    pub fn store_config(&self) -> logship_store::StoreConfig {
        let mut c = logship_store::StoreConfig::default();
        c.mapped_file_size_commit_log = self.mapped_file_size_commit_log;
        c.flush_disk_type = self.flush_disk_type;
        c.flush_interval_commit_log = self.flush_interval_commit_log;
        c.sync_flush_timeout = self.sync_flush_timeout;
        c.max_message_size = self.max_message_size;
        c.file_reserved_time = self.file_reserved_time;
        c.delete_when = self.delete_when.clone();
        c.disk_max_used_space_ratio = self.disk_max_used_space_ratio;
        c.store_host = std::net::SocketAddr::new(self.broker_ip1, self.listen_port);
        c.store_path_commit_log = self.store_path_commit_log.clone();
        c.store_path_epoch_file = self.store_path_epoch_file.clone();
        // Controller mode: consumers read replicated messages only below the confirmOffset, unless
        // readUnCommitted=true (RocketMQ's default is false).
        c.dispatch_up_to_confirm = self.controller.as_ref().is_some_and(|k| !k.read_uncommitted);
        // Controller mode: a store holding data without its epoch file refuses to open (its log
        // cannot be checked against a master's), unless the operator adopts it at its end.
        c.require_epoch_file = self.controller.is_some();
        c.adopt_log_without_epochs = self.controller.as_ref().and_then(|k| k.adopt_log_without_epochs);
        self.store.apply(&mut c);
        c
    }
}
