//! Configuration of the master and slave state machines, with RocketMQ's names and defaults.

use std::time::Duration;

/// Length of the header in front of every body a RocketMQ slave reads (offset and body size):
/// the classic push header ([`classic::frame::PUSH_HEADER_LEN`](crate::classic::frame::PUSH_HEADER_LEN)).
pub(crate) const PUSH_HEADER_LEN: usize = 12;
/// The largest frame body a RocketMQ slave can ever read, in either protocol: its 4 MiB read
/// buffer minus a header.
pub const MAX_JAVA_FRAME_BODY: u32 = 4 * 1024 * 1024 - PUSH_HEADER_LEN as u32;

/// RocketMQ `haTransferBatchSize`: the largest body the master puts in one frame.
pub const DEFAULT_TRANSFER_BATCH_SIZE: u32 = 32 * 1024;
/// RocketMQ `haSendHeartbeatInterval`.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_secs(5);
/// RocketMQ `haHousekeepingInterval`.
pub const DEFAULT_HOUSEKEEPING_INTERVAL: Duration = Duration::from_secs(20);
/// RocketMQ's fixed slave back-off before reconnecting.
pub const DEFAULT_RECONNECT_INTERVAL: Duration = Duration::from_secs(5);
/// RocketMQ `mappedFileSizeCommitLog`: 1 GiB segments.
pub const DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG: u64 = 1024 * 1024 * 1024;
/// RocketMQ `haMaxGapNotInSync`: 256 MiB.
pub const DEFAULT_HA_MAX_GAP_NOT_IN_SYNC: u64 = 256 * 1024 * 1024;
/// logship's per-connection bound on transmits handed to the driver but not yet written.
pub const DEFAULT_MAX_INFLIGHT: u32 = 32;
/// logship's deadline for a new connection's first complete report.
pub const DEFAULT_FIRST_REPORT_TIMEOUT: Duration = Duration::from_secs(10);
/// logship's bound on the first offset an empty slave adopts: 2^60 bytes (1 EiB), more than
/// 30 years of writing at 1 GiB/s.
pub const DEFAULT_MAX_FIRST_OFFSET: u64 = 1 << 60;
/// logship's bound on bytes a slave has received but not yet stored before it stops reading.
pub const DEFAULT_MAX_UNSTORED: u64 = 16 * 1024 * 1024;

/// Where the master starts a slave whose first report is 0 (an empty slave).
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum NewSlaveStart {
    /// At the master's min offset: a new slave receives the whole log (logship's default).
    #[default]
    Earliest,
    /// At the start of the master's last segment, `max - max % segment_size`: RocketMQ's
    /// classic behaviour, which never replicates older history (RocketMQ #3661).
    LastFile,
}

/// How many slave acknowledgements a SYNC_MASTER wait needs.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum AckPolicy {
    /// Any one slave at or past the offset: RocketMQ 4.x SYNC_MASTER.
    #[default]
    AnySlave,
    /// `in_sync_replicas` copies including the master's own, as RocketMQ 5.x counts them:
    /// `in_sync_replicas - 1` slaves must acknowledge. Must be at least 2.
    Quorum {
        /// Copies needed, counting the master as one.
        in_sync_replicas: u32,
    },
    /// Every connected slave that is in sync (within `ha_max_gap_not_in_sync` of the end).
    AllInSync,
}

/// When a slave acknowledges bytes.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum AckOn {
    /// Once written to the log (page cache): RocketMQ's behaviour.
    #[default]
    Written,
    /// Only once flushed to disk: durable acks, still wire-compatible.
    Flushed,
}

/// A configuration value that cannot work.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CoreConfigError {
    /// A field holds a value outside what it can take.
    #[error("invalid {field} = {value}: {reason}")]
    Invalid {
        /// The field's name.
        field: &'static str,
        /// The value given, as text.
        value: String,
        /// Why it cannot work.
        reason: &'static str,
    },
}

fn invalid(field: &'static str, value: impl std::fmt::Debug, reason: &'static str) -> CoreConfigError {
    CoreConfigError::Invalid { field, value: format!("{value:?}"), reason }
}

/// Configuration of a [`Master`](crate::classic::Master).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterConfig {
    /// Largest body per frame (`haTransferBatchSize`).
    pub transfer_batch_size: u32,
    /// Send an empty frame after this long without sending (`haSendHeartbeatInterval`).
    pub heartbeat_interval: Duration,
    /// Close a connection after this long without a complete report (`haHousekeepingInterval`).
    /// Only whole reports count as progress, so a peer trickling bytes cannot hold a connection.
    pub housekeeping_interval: Duration,
    /// Close a new connection that has not sent a complete first report within this long.
    pub first_report_timeout: Duration,
    /// Segment size; frames never cross a segment boundary (`mappedFileSizeCommitLog`). A
    /// master service ignores this value and takes its log's
    /// ([`LogRead::segment_size`](crate::LogRead::segment_size)).
    pub mapped_file_size_commit_log: u64,
    /// Where an empty slave starts.
    pub new_slave_start: NewSlaveStart,
    /// How many slave acknowledgements a replication wait needs.
    pub ack_policy: AckPolicy,
    /// A slave further behind than this is not in sync (`haMaxGapNotInSync`).
    pub ha_max_gap_not_in_sync: u64,
    /// Most transmits per connection handed out without a matching `Sent`.
    pub max_inflight: u32,
    /// Hold a first report strictly inside the log until the driver confirms it is a record
    /// boundary ([`MasterEvent::VerifyReport`](crate::classic::MasterEvent::VerifyReport)). Off by
    /// default for bare cores; the service layer turns it on and answers from the log.
    pub verify_first_reports: bool,
    /// Count only connections the driver identified ([`MasterInput::Replica`](crate::classic::MasterInput::Replica)) for
    /// replication waits: an unidentified connection may stream, but its acks release no wait
    /// and make no slave available. Off by default for bare cores (every connection counts);
    /// the service layer turns it on and identifies only connections its admission trusts.
    pub identified_only: bool,
}

impl Default for MasterConfig {
    fn default() -> Self {
        Self {
            transfer_batch_size: DEFAULT_TRANSFER_BATCH_SIZE,
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            housekeeping_interval: DEFAULT_HOUSEKEEPING_INTERVAL,
            first_report_timeout: DEFAULT_FIRST_REPORT_TIMEOUT,
            mapped_file_size_commit_log: DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG,
            new_slave_start: NewSlaveStart::default(),
            ack_policy: AckPolicy::default(),
            ha_max_gap_not_in_sync: DEFAULT_HA_MAX_GAP_NOT_IN_SYNC,
            max_inflight: DEFAULT_MAX_INFLIGHT,
            verify_first_reports: false,
            identified_only: false,
        }
    }
}

impl MasterConfig {
    /// Checks that every field can work, naming the first one that cannot.
    pub fn validate(&self) -> Result<(), CoreConfigError> {
        if self.transfer_batch_size == 0 {
            return Err(invalid("transfer_batch_size", self.transfer_batch_size, "must be at least 1"));
        }
        if self.transfer_batch_size > MAX_JAVA_FRAME_BODY {
            return Err(invalid(
                "transfer_batch_size",
                self.transfer_batch_size,
                "must be at most 4 MiB - 12 (4194292): a RocketMQ slave cannot read a larger frame",
            ));
        }
        validate_timers(self.heartbeat_interval, self.housekeeping_interval)?;
        if self.first_report_timeout.is_zero() {
            return Err(invalid(
                "first_report_timeout",
                self.first_report_timeout,
                "must be longer than zero",
            ));
        }
        if self.mapped_file_size_commit_log == 0 {
            return Err(invalid(
                "mapped_file_size_commit_log",
                self.mapped_file_size_commit_log,
                "must be at least 1",
            ));
        }
        if self.ha_max_gap_not_in_sync == 0 {
            return Err(invalid("ha_max_gap_not_in_sync", self.ha_max_gap_not_in_sync, "must be at least 1"));
        }
        if self.max_inflight == 0 {
            return Err(invalid("max_inflight", self.max_inflight, "must be at least 1"));
        }
        if let AckPolicy::Quorum { in_sync_replicas } = self.ack_policy {
            if in_sync_replicas < 2 {
                return Err(invalid(
                    "ack_policy.in_sync_replicas",
                    in_sync_replicas,
                    "must be at least 2 (the master counts as one; 1 would mean no slave ever waits)",
                ));
            }
        }
        Ok(())
    }
}

/// Configuration of a [`Slave`](crate::classic::Slave).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlaveConfig {
    /// Report at least this often (`haSendHeartbeatInterval`).
    pub heartbeat_interval: Duration,
    /// Close the connection after this long without a complete frame (`haHousekeepingInterval`).
    /// Only whole frames count as progress, so a master trickling a body cannot hold the slave.
    pub housekeeping_interval: Duration,
    /// Wait this long after a connection ends or fails before connecting again.
    pub reconnect_interval: Duration,
    /// Largest frame body accepted from the master (RocketMQ's slave buffer: 4 MiB - 12).
    pub max_frame_body: u32,
    /// When bytes count as acknowledged.
    pub ack_on: AckOn,
    /// Stop reading while more than this many received bytes are not yet stored.
    pub max_unstored: u64,
    /// The largest first offset an empty slave adopts from a master; a larger one is refused
    /// with [`PeerError::FirstOffsetTooLarge`](crate::classic::PeerError::FirstOffsetTooLarge).
    pub max_first_offset: u64,
}

impl Default for SlaveConfig {
    fn default() -> Self {
        Self {
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            housekeeping_interval: DEFAULT_HOUSEKEEPING_INTERVAL,
            reconnect_interval: DEFAULT_RECONNECT_INTERVAL,
            max_frame_body: MAX_JAVA_FRAME_BODY,
            ack_on: AckOn::default(),
            max_unstored: DEFAULT_MAX_UNSTORED,
            max_first_offset: DEFAULT_MAX_FIRST_OFFSET,
        }
    }
}

impl SlaveConfig {
    /// Checks that every field can work, naming the first one that cannot.
    pub fn validate(&self) -> Result<(), CoreConfigError> {
        validate_timers(self.heartbeat_interval, self.housekeeping_interval)?;
        if self.reconnect_interval.is_zero() {
            return Err(invalid("reconnect_interval", self.reconnect_interval, "must be longer than zero"));
        }
        if self.max_frame_body == 0 || self.max_frame_body > i32::MAX as u32 {
            return Err(invalid("max_frame_body", self.max_frame_body, "must be between 1 and i32::MAX"));
        }
        let frame = u64::from(self.max_frame_body) + PUSH_HEADER_LEN as u64;
        if self.max_unstored < frame {
            return Err(invalid(
                "max_unstored",
                self.max_unstored,
                "must be at least max_frame_body + 12, or a whole frame could never be read",
            ));
        }
        Ok(())
    }
}

fn validate_timers(heartbeat: Duration, housekeeping: Duration) -> Result<(), CoreConfigError> {
    if heartbeat.is_zero() {
        return Err(invalid("heartbeat_interval", heartbeat, "must be longer than zero"));
    }
    if housekeeping.is_zero() {
        return Err(invalid("housekeeping_interval", housekeeping, "must be longer than zero"));
    }
    if heartbeat >= housekeeping {
        return Err(invalid(
            "heartbeat_interval",
            heartbeat,
            "must be shorter than housekeeping_interval, or idle connections are dropped",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(err: CoreConfigError) -> &'static str {
        match err {
            CoreConfigError::Invalid { field, .. } => field,
        }
    }

    #[test]
    fn defaults_are_rocketmq_defaults_and_valid() {
        let m = MasterConfig::default();
        assert_eq!(m.transfer_batch_size, 32768);
        assert_eq!(m.heartbeat_interval, Duration::from_millis(5000));
        assert_eq!(m.housekeeping_interval, Duration::from_millis(20000));
        assert_eq!(m.mapped_file_size_commit_log, 1 << 30);
        assert_eq!(m.ha_max_gap_not_in_sync, 268_435_456);
        assert_eq!(m.new_slave_start, NewSlaveStart::Earliest);
        m.validate().unwrap();
        let s = SlaveConfig::default();
        assert_eq!(s.reconnect_interval, Duration::from_secs(5));
        assert_eq!(s.max_frame_body, 4 * 1024 * 1024 - 12);
        s.validate().unwrap();
    }

    #[test]
    fn zero_batch_size_is_rejected_naming_the_field_and_value() {
        let err = MasterConfig { transfer_batch_size: 0, ..Default::default() }.validate().unwrap_err();
        assert_eq!(err.to_string(), "invalid transfer_batch_size = 0: must be at least 1");
    }

    #[test]
    fn batch_size_a_java_slave_cannot_read_is_rejected() {
        let err = MasterConfig { transfer_batch_size: 4 << 20, ..Default::default() }.validate().unwrap_err();
        assert_eq!(field_of(err), "transfer_batch_size");
    }

    #[test]
    fn heartbeat_longer_than_housekeeping_is_rejected() {
        let cfg = MasterConfig { heartbeat_interval: Duration::from_secs(30), ..Default::default() };
        let err = cfg.validate().unwrap_err();
        assert!(err.to_string().contains("heartbeat_interval = 30s"), "{err}");
        let cfg = SlaveConfig { heartbeat_interval: Duration::from_secs(20), ..Default::default() };
        assert_eq!(field_of(cfg.validate().unwrap_err()), "heartbeat_interval");
    }

    #[test]
    fn zero_timers_and_limits_are_rejected() {
        let zero = Duration::ZERO;
        let bad_masters = [
            MasterConfig { housekeeping_interval: zero, ..Default::default() },
            MasterConfig { heartbeat_interval: zero, ..Default::default() },
            MasterConfig { mapped_file_size_commit_log: 0, ..Default::default() },
            MasterConfig { ha_max_gap_not_in_sync: 0, ..Default::default() },
            MasterConfig { max_inflight: 0, ..Default::default() },
        ];
        let fields: Vec<_> = bad_masters.iter().map(|c| field_of(c.validate().unwrap_err())).collect();
        assert_eq!(
            fields,
            [
                "housekeeping_interval",
                "heartbeat_interval",
                "mapped_file_size_commit_log",
                "ha_max_gap_not_in_sync",
                "max_inflight"
            ]
        );
        let bad_slaves = [
            SlaveConfig { reconnect_interval: zero, ..Default::default() },
            SlaveConfig { max_frame_body: 0, ..Default::default() },
            SlaveConfig { max_unstored: 1024, ..Default::default() },
        ];
        let fields: Vec<_> = bad_slaves.iter().map(|c| field_of(c.validate().unwrap_err())).collect();
        assert_eq!(fields, ["reconnect_interval", "max_frame_body", "max_unstored"]);
    }

    #[test]
    fn quorum_of_one_is_rejected_as_a_silent_async_trap() {
        let cfg =
            MasterConfig { ack_policy: AckPolicy::Quorum { in_sync_replicas: 1 }, ..Default::default() };
        let err = cfg.validate().unwrap_err();
        assert_eq!(field_of(err), "ack_policy.in_sync_replicas");
        let ok = MasterConfig { ack_policy: AckPolicy::Quorum { in_sync_replicas: 2 }, ..Default::default() };
        ok.validate().unwrap();
    }
}
