//! `broker.conf`: RocketMQ's `key=value` properties format, with RocketMQ's key names, plus
//! logship's own keys. Command-line settings override the file. Every value is checked before
//! anything starts: an unknown key is a warning that names it; a bad value, or a combination
//! that cannot work, is an error that names the key and the value.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use logship_core::driver::{BrokerRole, FlushDiskType, MasterServiceConfig, SlaveServiceConfig};
use logship_core::{AckOn, AckPolicy, MasterConfig, NewSlaveStart, SlaveConfig};

/// A configuration problem that stops the broker before it starts.
#[derive(thiserror::Error, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        reason: String,
    },
    /// A line is not `key=value`.
    #[error("{origin}, line {line}: expected key=value, found {text:?}")]
    Syntax {
        /// The file or "command line".
        origin: String,
        /// 1-based line number.
        line: usize,
        /// The offending text.
        text: String,
    },
    /// A value does not parse or is out of range.
    #[error("invalid value for {key}: {value:?}: {reason}")]
    Invalid {
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What it must be.
        reason: String,
    },
    /// Values that each parse but cannot work together.
    #[error("{keys}: {reason}")]
    Conflict {
        /// The keys involved, with their values.
        keys: String,
        /// Why they cannot work together.
        reason: String,
    },
}

/// How SYNC_MASTER puts count slave acks (logship's `ackPolicy` key).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum AckPolicyKey {
    /// `ANY_SLAVE`: one slave suffices (RocketMQ 4.x).
    AnySlave,
    /// `QUORUM`: `inSyncReplicas` copies, the master counting as one (RocketMQ 5.x).
    Quorum,
    /// `ALL_IN_SYNC`: every in-sync slave.
    AllInSync,
}

/// Every setting the broker uses, after defaults, the file and the command line.
#[derive(Clone, Debug, PartialEq)]
pub struct BrokerSettings {
    /// `brokerRole`.
    pub broker_role: BrokerRole,
    /// `flushDiskType`.
    pub flush_disk_type: FlushDiskType,
    /// `storePathRootDir`.
    pub store_path_root_dir: PathBuf,
    /// `brokerIP1`: the address stored in messages and message ids.
    pub broker_ip1: IpAddr,
    /// `listenPort`: the HTTP API.
    pub listen_port: u16,
    /// `haListenPort`: the HA port (default `listenPort + 1`).
    pub ha_listen_port: u16,
    /// `haMasterAddress`: where a slave connects.
    pub ha_master_address: Option<String>,
    /// `mappedFileSizeCommitLog`.
    pub mapped_file_size_commit_log: u64,
    /// `haSendHeartbeatInterval`.
    pub ha_send_heartbeat_interval: Duration,
    /// `haHousekeepingInterval`.
    pub ha_housekeeping_interval: Duration,
    /// `haTransferBatchSize`.
    pub ha_transfer_batch_size: u32,
    /// `haMaxGapNotInSync`.
    pub ha_max_gap_not_in_sync: u64,
    /// `slaveTimeout`.
    pub slave_timeout: Duration,
    /// `syncFlushTimeout`.
    pub sync_flush_timeout: Duration,
    /// `flushIntervalCommitLog`.
    pub flush_interval_commit_log: Duration,
    /// `maxMessageSize`.
    pub max_message_size: u32,
    /// `inSyncReplicas`.
    pub in_sync_replicas: u32,
    /// `totalReplicas`.
    pub total_replicas: u32,
    /// `fileReservedTime` (hours).
    pub file_reserved_time: u32,
    /// `deleteWhen`.
    pub delete_when: String,
    /// `diskMaxUsedSpaceRatio` (percent).
    pub disk_max_used_space_ratio: u32,
    /// `slaveReadEnable`.
    pub slave_read_enable: bool,
    /// `accessMessageInMemoryMaxRatio` (percent of RAM).
    pub access_message_in_memory_max_ratio: u32,
    /// logship `newSlaveStart`: `EARLIEST` or `LAST_FILE`.
    pub new_slave_start: NewSlaveStart,
    /// logship `slaveAckOn`: `WRITTEN` or `FLUSHED`.
    pub slave_ack_on: AckOn,
    /// logship `ackPolicy`; when unset, `QUORUM` if `inSyncReplicas >= 2`, else `ANY_SLAVE`.
    pub ack_policy: Option<AckPolicyKey>,
    /// The store's integrity and disk keys (see [`StoreKeys`]).
    pub store: StoreKeys,
}

/// The store keys about disk space, retention and recovery (one block, parsed by
/// [`StoreKeys::set`] and applied by [`StoreKeys::apply`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StoreKeys {
    /// `cleanFileForciblyEnable`: above `diskSpaceCleanForciblyRatio`, delete the oldest
    /// segments even before `fileReservedTime`. **Default false** (RocketMQ: true): logship
    /// refuses puts instead of deleting unexpired messages, unless asked.
    pub clean_file_forcibly_enable: bool,
    /// `diskSpaceCleanForciblyRatio` (fraction): where forced deletion starts, if enabled.
    pub disk_space_clean_forcibly_ratio: f64,
    /// `diskSpaceWarningLevelRatio` (fraction): above it, puts are refused.
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
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, ConfigError> {
        match key {
            "cleanFileForciblyEnable" => self.clean_file_forcibly_enable = boolean(key, v)?,
            "diskSpaceCleanForciblyRatio" => self.disk_space_clean_forcibly_ratio = fraction(key, v)?,
            "diskSpaceWarningLevelRatio" => self.disk_space_warning_level_ratio = fraction(key, v)?,
            "warmMapedFileEnable" => self.warm_maped_file_enable = boolean(key, v)?,
            "rebuildConsumeQueues" => self.rebuild_consume_queues = boolean(key, v)?,
            "truncateOnCorruption" => self.truncate_on_corruption = boolean(key, v)?,
            "scrubBytesPerSecond" => self.scrub_bytes_per_second = number(key, v, 0, u64::MAX)?,
            _ => return Ok(false),
        }
        Ok(true)
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

fn fraction(key: &str, v: &str) -> Result<f64, ConfigError> {
    match v.parse::<f64>() {
        Ok(r) if r > 0.0 && r <= 1.0 => Ok(r),
        _ => Err(invalid(key, v, "a fraction above 0 and at most 1, e.g. 0.85")),
    }
}

impl Default for BrokerSettings {
    fn default() -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        Self {
            broker_role: BrokerRole::AsyncMaster,
            flush_disk_type: FlushDiskType::AsyncFlush,
            store_path_root_dir: home.join("store"),
            broker_ip1: IpAddr::V4(Ipv4Addr::LOCALHOST),
            listen_port: 10911,
            ha_listen_port: 10912,
            ha_master_address: None,
            mapped_file_size_commit_log: 1 << 30,
            ha_send_heartbeat_interval: Duration::from_millis(5000),
            ha_housekeeping_interval: Duration::from_millis(20000),
            ha_transfer_batch_size: 32768,
            ha_max_gap_not_in_sync: 256 << 20,
            slave_timeout: Duration::from_millis(3000),
            sync_flush_timeout: Duration::from_millis(5000),
            flush_interval_commit_log: Duration::from_millis(500),
            max_message_size: 4 << 20,
            in_sync_replicas: 1,
            total_replicas: 1,
            file_reserved_time: 72,
            delete_when: "04".into(),
            disk_max_used_space_ratio: 75,
            slave_read_enable: false,
            access_message_in_memory_max_ratio: 40,
            new_slave_start: NewSlaveStart::Earliest,
            slave_ack_on: AckOn::Written,
            ack_policy: None,
            store: StoreKeys::default(),
        }
    }
}

/// RocketMQ keys that exist in real `broker.conf` files but mean nothing to logship.
const IGNORED_ROCKETMQ_KEYS: &[&str] = &[
    "brokerClusterName",
    "brokerName",
    "brokerId",
    "namesrvAddr",
    "autoCreateTopicEnable",
    "autoCreateSubscriptionGroup",
    "defaultTopicQueueNums",
    "storePathCommitLog",
    "storePathConsumeQueue",
    "storePathIndex",
    "storeCheckpoint",
    "abortFile",
    "brokerIP2",
    "mapedFileSizeConsumeQueue",
    "mappedFileSizeConsumeQueue",
    "sendMessageThreadPoolNums",
    "pullMessageThreadPoolNums",
    "enableDLegerCommitLog",
];

/// Where a setting came from, for messages.
#[derive(Clone, Debug)]
struct Setting {
    value: String,
    origin: String,
}

/// Parsed settings plus the warnings to print before starting.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The settings.
    pub settings: BrokerSettings,
    /// One line per ignored or unknown key.
    pub warnings: Vec<String>,
}

/// Java properties: `key=value`, `key:value` or `key value`; `#` and `!` comments; a trailing
/// backslash continues a line; `\t`, `\n`, `\r`, `\f`, `\\` and `\uXXXX` escapes.
pub fn parse_properties(text: &str, origin: &str) -> Result<Vec<(String, String, usize)>, ConfigError> {
    let mut out = Vec::new();
    let mut lines = text.lines().enumerate();
    while let Some((index, raw)) = lines.next() {
        let mut logical = raw.trim_start().to_string();
        if logical.is_empty() || logical.starts_with('#') || logical.starts_with('!') {
            continue;
        }
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            match lines.next() {
                Some((_, next)) => logical.push_str(next.trim_start()),
                None => break,
            }
        }
        let (key, value) = split_key_value(&logical);
        let key = unescape(key);
        if key.is_empty() {
            return Err(ConfigError::Syntax {
                origin: origin.to_string(),
                line: index + 1,
                text: raw.to_string(),
            });
        }
        out.push((key, unescape(value.trim_end()), index + 1));
    }
    Ok(out)
}

fn ends_with_odd_backslashes(s: &str) -> bool {
    s.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

fn split_key_value(line: &str) -> (&str, &str) {
    let mut escaped = false;
    for (i, c) in line.char_indices() {
        if escaped {
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            '=' | ':' => return (&line[..i], line[i + 1..].trim_start()),
            c if c.is_whitespace() => {
                let rest = line[i..].trim_start();
                let rest = rest.strip_prefix(['=', ':']).map_or(rest, str::trim_start);
                return (&line[..i], rest);
            }
            _ => {}
        }
    }
    (line, "")
}

fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) => out.push(ch),
                    None => out.push_str(&hex),
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// Builds the settings from `defaults` (the subcommand's), an optional `broker.conf`, and
/// command-line `key=value` overrides, each overriding the one before.
pub fn load(
    defaults: &[(&str, &str)],
    file: Option<&Path>,
    overrides: &[(String, String)],
) -> Result<Loaded, ConfigError> {
    let mut raw: BTreeMap<String, Setting> = BTreeMap::new();
    for (key, value) in defaults {
        raw.insert(key.to_string(), Setting { value: value.to_string(), origin: "default".into() });
    }
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::Read { path: path.to_path_buf(), reason: e.to_string() })?;
        let origin = path.display().to_string();
        for (key, value, line) in parse_properties(&text, &origin)? {
            raw.insert(key, Setting { value, origin: format!("{origin}:{line}") });
        }
    }
    for (key, value) in overrides {
        raw.insert(key.clone(), Setting { value: value.clone(), origin: "command line".into() });
    }
    from_map(raw)
}

fn from_map(raw: BTreeMap<String, Setting>) -> Result<Loaded, ConfigError> {
    let mut s = BrokerSettings::default();
    let mut warnings = Vec::new();
    let mut ha_port_set = false;
    for (key, Setting { value, origin }) in &raw {
        let v = value.trim();
        if s.store.set(key, v)? {
            continue;
        }
        match key.as_str() {
            "brokerRole" => {
                s.broker_role = match v {
                    "ASYNC_MASTER" => BrokerRole::AsyncMaster,
                    "SYNC_MASTER" => BrokerRole::SyncMaster,
                    "SLAVE" => BrokerRole::Slave,
                    _ => return Err(invalid(key, v, "ASYNC_MASTER, SYNC_MASTER or SLAVE")),
                }
            }
            "flushDiskType" => {
                s.flush_disk_type = match v {
                    "ASYNC_FLUSH" => FlushDiskType::AsyncFlush,
                    "SYNC_FLUSH" => FlushDiskType::SyncFlush,
                    _ => return Err(invalid(key, v, "ASYNC_FLUSH or SYNC_FLUSH")),
                }
            }
            "storePathRootDir" => {
                if v.is_empty() {
                    return Err(invalid(key, v, "a directory"));
                }
                s.store_path_root_dir = PathBuf::from(v);
            }
            "brokerIP1" => s.broker_ip1 = v.parse().map_err(|_| invalid(key, v, "an IP address"))?,
            "listenPort" => s.listen_port = port(key, v)?,
            "haListenPort" => {
                s.ha_listen_port = port(key, v)?;
                ha_port_set = true;
            }
            "haMasterAddress" => {
                s.ha_master_address = if v.is_empty() { None } else { Some(master_address(key, v)?) };
            }
            "mappedFileSizeCommitLog" => s.mapped_file_size_commit_log = number(key, v, 4096, 1 << 31)?,
            "haSendHeartbeatInterval" => s.ha_send_heartbeat_interval = millis(key, v)?,
            "haHousekeepingInterval" => s.ha_housekeeping_interval = millis(key, v)?,
            "haTransferBatchSize" => {
                s.ha_transfer_batch_size =
                    number(key, v, 1, u64::from(logship_core::frame::MAX_JAVA_FRAME_BODY))? as u32
            }
            "haMaxGapNotInSync" | "haSlaveFallbehindMax" => {
                s.ha_max_gap_not_in_sync = number(key, v, 1, i64::MAX as u64)?
            }
            "slaveTimeout" => s.slave_timeout = millis(key, v)?,
            "syncFlushTimeout" => s.sync_flush_timeout = millis(key, v)?,
            "flushIntervalCommitLog" => s.flush_interval_commit_log = millis(key, v)?,
            "maxMessageSize" => s.max_message_size = number(key, v, 1, i32::MAX as u64)? as u32,
            "inSyncReplicas" => s.in_sync_replicas = number(key, v, 1, 64)? as u32,
            "totalReplicas" => s.total_replicas = number(key, v, 1, 64)? as u32,
            "fileReservedTime" => s.file_reserved_time = number(key, v, 1, 24 * 365 * 10)? as u32,
            "deleteWhen" => {
                let ok = !v.is_empty() && v.split(';').all(|h| h.trim().parse::<u32>().is_ok_and(|h| h < 24));
                if !ok {
                    return Err(invalid(key, v, "hours of day separated by ';', e.g. 04"));
                }
                s.delete_when = v.to_string();
            }
            "diskMaxUsedSpaceRatio" => s.disk_max_used_space_ratio = number(key, v, 10, 95)? as u32,
            "slaveReadEnable" => s.slave_read_enable = boolean(key, v)?,
            "accessMessageInMemoryMaxRatio" => {
                s.access_message_in_memory_max_ratio = number(key, v, 1, 100)? as u32
            }
            "newSlaveStart" => {
                s.new_slave_start = match v {
                    "EARLIEST" => NewSlaveStart::Earliest,
                    "LAST_FILE" => NewSlaveStart::LastFile,
                    _ => return Err(invalid(key, v, "EARLIEST or LAST_FILE")),
                }
            }
            "slaveAckOn" => {
                s.slave_ack_on = match v {
                    "WRITTEN" => AckOn::Written,
                    "FLUSHED" => AckOn::Flushed,
                    _ => return Err(invalid(key, v, "WRITTEN or FLUSHED")),
                }
            }
            "ackPolicy" => {
                s.ack_policy = Some(match v {
                    "ANY_SLAVE" => AckPolicyKey::AnySlave,
                    "QUORUM" => AckPolicyKey::Quorum,
                    "ALL_IN_SYNC" => AckPolicyKey::AllInSync,
                    _ => return Err(invalid(key, v, "ANY_SLAVE, QUORUM or ALL_IN_SYNC")),
                })
            }
            k if IGNORED_ROCKETMQ_KEYS.contains(&k) => {
                warnings.push(format!("{origin}: RocketMQ key {k} is not used by logship; ignored"));
            }
            other => warnings.push(format!("{origin}: unknown key {other}; ignored")),
        }
    }
    if !ha_port_set {
        s.ha_listen_port = s.listen_port.checked_add(1).ok_or_else(|| {
            invalid("listenPort", &s.listen_port.to_string(), "leave room for haListenPort = listenPort + 1")
        })?;
    }
    check_combinations(&s)?;
    Ok(Loaded { settings: s, warnings })
}

fn check_combinations(s: &BrokerSettings) -> Result<(), ConfigError> {
    let conflict = |keys: String, reason: &str| ConfigError::Conflict { keys, reason: reason.to_string() };
    if s.listen_port != 0 && s.listen_port == s.ha_listen_port {
        return Err(conflict(
            format!("listenPort={} haListenPort={}", s.listen_port, s.ha_listen_port),
            "the HTTP port and the HA port must differ",
        ));
    }
    if s.broker_role == BrokerRole::Slave && s.ha_master_address.is_none() {
        return Err(conflict(
            "brokerRole=SLAVE haMasterAddress=(unset)".into(),
            "a slave needs haMasterAddress",
        ));
    }
    if s.ha_send_heartbeat_interval >= s.ha_housekeeping_interval {
        return Err(conflict(
            format!(
                "haSendHeartbeatInterval={} haHousekeepingInterval={}",
                s.ha_send_heartbeat_interval.as_millis(),
                s.ha_housekeeping_interval.as_millis()
            ),
            "the heartbeat interval must be shorter than the housekeeping interval, or idle connections drop",
        ));
    }
    if s.in_sync_replicas > s.total_replicas && s.total_replicas > 1 {
        return Err(conflict(
            format!("inSyncReplicas={} totalReplicas={}", s.in_sync_replicas, s.total_replicas),
            "inSyncReplicas cannot exceed totalReplicas",
        ));
    }
    if s.ack_policy == Some(AckPolicyKey::Quorum) && s.in_sync_replicas < 2 {
        return Err(conflict(
            format!("ackPolicy=QUORUM inSyncReplicas={}", s.in_sync_replicas),
            "a quorum needs inSyncReplicas >= 2 (the master counts as one)",
        ));
    }
    if u64::from(s.max_message_size) + 8 > s.mapped_file_size_commit_log {
        return Err(conflict(
            format!(
                "maxMessageSize={} mappedFileSizeCommitLog={}",
                s.max_message_size, s.mapped_file_size_commit_log
            ),
            "a message must fit in a segment with room for the 8-byte BLANK record",
        ));
    }
    Ok(())
}

fn invalid(key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_string(),
        value: value.to_string(),
        reason: format!("expected {reason}"),
    }
}

fn number(key: &str, v: &str, min: u64, max: u64) -> Result<u64, ConfigError> {
    match v.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(invalid(key, v, &format!("an integer from {min} to {max}"))),
    }
}

fn millis(key: &str, v: &str) -> Result<Duration, ConfigError> {
    number(key, v, 1, 24 * 3600 * 1000)
        .map(Duration::from_millis)
        .map_err(|_| invalid(key, v, "milliseconds, at least 1"))
}

fn port(key: &str, v: &str) -> Result<u16, ConfigError> {
    v.parse::<u16>().map_err(|_| invalid(key, v, "a port number from 0 to 65535"))
}

fn boolean(key: &str, v: &str) -> Result<bool, ConfigError> {
    match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, v, "true or false")),
    }
}

fn master_address(key: &str, v: &str) -> Result<String, ConfigError> {
    let ok = v
        .rsplit_once(':')
        .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
    if ok { Ok(v.to_string()) } else { Err(invalid(key, v, "host:port")) }
}

impl BrokerSettings {
    /// The ack policy in force: the `ackPolicy` key, or RocketMQ's reading of `inSyncReplicas`.
    pub fn effective_ack_policy(&self) -> AckPolicy {
        match self.ack_policy {
            Some(AckPolicyKey::AnySlave) => AckPolicy::AnySlave,
            Some(AckPolicyKey::AllInSync) => AckPolicy::AllInSync,
            Some(AckPolicyKey::Quorum) => AckPolicy::Quorum { in_sync_replicas: self.in_sync_replicas },
            None if self.in_sync_replicas >= 2 => {
                AckPolicy::Quorum { in_sync_replicas: self.in_sync_replicas }
            }
            None => AckPolicy::AnySlave,
        }
    }

    /// The HTTP API address.
    pub fn http_addr(&self) -> SocketAddr {
        SocketAddr::new(self.broker_ip_for_bind(), self.listen_port)
    }

    /// The HA listen address.
    pub fn ha_addr(&self) -> SocketAddr {
        SocketAddr::new(self.broker_ip_for_bind(), self.ha_listen_port)
    }

    fn broker_ip_for_bind(&self) -> IpAddr {
        if self.broker_ip1.is_loopback() { self.broker_ip1 } else { IpAddr::V4(Ipv4Addr::UNSPECIFIED) }
    }

    /// The protocol core's master configuration.
    pub fn master_config(&self) -> MasterConfig {
        MasterConfig {
            transfer_batch_size: self.ha_transfer_batch_size,
            heartbeat_interval: self.ha_send_heartbeat_interval,
            housekeeping_interval: self.ha_housekeeping_interval,
            mapped_file_size_commit_log: self.mapped_file_size_commit_log,
            new_slave_start: self.new_slave_start,
            ack_policy: self.effective_ack_policy(),
            ha_max_gap_not_in_sync: self.ha_max_gap_not_in_sync,
            ..MasterConfig::default()
        }
    }

    /// The master service configuration.
    pub fn master_service_config(&self) -> MasterServiceConfig {
        MasterServiceConfig {
            core: self.master_config(),
            role: self.broker_role,
            flush_disk_type: self.flush_disk_type,
            slave_timeout: self.slave_timeout,
            sync_flush_timeout: self.sync_flush_timeout,
            restart_fence: 0,
        }
    }

    /// The slave service configuration (for `brokerRole=SLAVE`).
    pub fn slave_service_config(&self) -> SlaveServiceConfig {
        let mut c = SlaveServiceConfig::new(self.ha_master_address.clone().unwrap_or_default());
        c.core = SlaveConfig {
            heartbeat_interval: self.ha_send_heartbeat_interval,
            housekeeping_interval: self.ha_housekeeping_interval,
            ack_on: self.slave_ack_on,
            ..SlaveConfig::default()
        };
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_text(text: &str) -> Result<Loaded, ConfigError> {
        let mut raw = BTreeMap::new();
        for (k, v, line) in parse_properties(text, "broker.conf")? {
            raw.insert(k, Setting { value: v, origin: format!("broker.conf:{line}") });
        }
        from_map(raw)
    }

    #[test]
    fn properties_format_handles_comments_separators_escapes_and_continuations() {
        let text = "# comment\n! also\n\nbrokerRole = SYNC_MASTER\nlistenPort:20911\nstorePathRootDir /data/\\\n  store\nx=a\\u0041\\tb\n";
        let got = parse_properties(text, "f").unwrap();
        let pairs: Vec<_> = got.iter().map(|(k, v, _)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            pairs,
            [
                ("brokerRole", "SYNC_MASTER"),
                ("listenPort", "20911"),
                ("storePathRootDir", "/data/store"),
                ("x", "aA\tb")
            ]
        );
    }

    #[test]
    fn rocketmq_broker_conf_loads_with_rocketmq_defaults_elsewhere() {
        let loaded = load_text(
            "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=0\nbrokerRole=SYNC_MASTER\n\
             flushDiskType=ASYNC_FLUSH\nlistenPort=30911\n",
        )
        .unwrap();
        let s = loaded.settings;
        assert_eq!(s.broker_role, BrokerRole::SyncMaster);
        assert_eq!(s.ha_listen_port, 30912, "haListenPort defaults to listenPort + 1");
        assert_eq!(s.ha_transfer_batch_size, 32768);
        assert_eq!(s.effective_ack_policy(), AckPolicy::AnySlave);
        assert_eq!(loaded.warnings.len(), 3, "{:?}", loaded.warnings);
        assert!(loaded.warnings[0].contains("brokerClusterName"));
    }

    #[test]
    fn store_recovery_and_disk_keys_reach_the_store_config() {
        let loaded = load_text(
            "rebuildConsumeQueues=true\ntruncateOnCorruption=true\ncleanFileForciblyEnable=true\n\
             diskSpaceCleanForciblyRatio=0.8\ndiskSpaceWarningLevelRatio=0.95\nwarmMapedFileEnable=false\n",
        )
        .unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let mut c = logship_store::StoreConfig::default();
        loaded.settings.store.apply(&mut c);
        assert!(c.recovery.rebuild_consume_queues && c.recovery.truncate_on_corruption);
        assert!(c.clean_file_forcibly_enable && !c.warm_mapped_file_enable);
        assert_eq!((c.disk_space_clean_forcibly_ratio, c.disk_space_warning_level_ratio), (0.8, 0.95));
        let defaults = load_text("").unwrap().settings.store;
        assert!(!defaults.clean_file_forcibly_enable, "no forced deletion unless asked");
        assert!(!defaults.rebuild_consume_queues && !defaults.truncate_on_corruption);
        let err = load_text("diskSpaceWarningLevelRatio=90\n").unwrap_err();
        assert!(err.to_string().contains("diskSpaceWarningLevelRatio: \"90\""), "{err}");
    }

    #[test]
    fn unknown_key_is_a_warning_naming_it() {
        let loaded = load_text("brokerRole=ASYNC_MASTER\nhaTransferBatchSzie=65536\n").unwrap();
        assert_eq!(loaded.warnings, ["broker.conf:2: unknown key haTransferBatchSzie; ignored"]);
    }

    #[test]
    fn invalid_value_is_an_error_naming_key_and_value() {
        let err = load_text("brokerRole=MASTER\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value for brokerRole: \"MASTER\": expected ASYNC_MASTER, SYNC_MASTER or SLAVE"
        );
        let err = load_text("haTransferBatchSize=0\n").unwrap_err();
        assert!(err.to_string().starts_with("invalid value for haTransferBatchSize: \"0\""), "{err}");
        let err = load_text("listenPort=99999\n").unwrap_err();
        assert!(err.to_string().contains("listenPort: \"99999\""), "{err}");
        let err = load_text("slaveReadEnable=yes\n").unwrap_err();
        assert!(err.to_string().contains("slaveReadEnable: \"yes\""), "{err}");
    }

    #[test]
    fn slave_without_master_address_is_refused() {
        let err = load_text("brokerRole=SLAVE\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "brokerRole=SLAVE haMasterAddress=(unset): a slave needs haMasterAddress"
        );
        load_text("brokerRole=SLAVE\nhaMasterAddress=10.0.0.1:10912\n").unwrap();
        let err = load_text("brokerRole=SLAVE\nhaMasterAddress=10.0.0.1\n").unwrap_err();
        assert!(err.to_string().contains("haMasterAddress"), "{err}");
    }

    #[test]
    fn port_clash_is_refused() {
        let err = load_text("listenPort=10911\nhaListenPort=10911\n").unwrap_err();
        assert!(err.to_string().starts_with("listenPort=10911 haListenPort=10911"), "{err}");
    }

    #[test]
    fn quorum_needs_two_in_sync_replicas() {
        let err = load_text("ackPolicy=QUORUM\n").unwrap_err();
        assert!(matches!(err, ConfigError::Conflict { .. }), "{err}");
        let s = load_text("brokerRole=SYNC_MASTER\ninSyncReplicas=2\ntotalReplicas=3\n").unwrap().settings;
        assert_eq!(s.effective_ack_policy(), AckPolicy::Quorum { in_sync_replicas: 2 });
        let err = load_text("inSyncReplicas=3\ntotalReplicas=2\n").unwrap_err();
        assert!(err.to_string().contains("cannot exceed"), "{err}");
    }

    #[test]
    fn command_line_overrides_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.conf");
        std::fs::write(&path, "listenPort=20911\nbrokerRole=SYNC_MASTER\n").unwrap();
        let loaded =
            load(&[("brokerRole", "SLAVE")], Some(&path), &[("listenPort".into(), "40911".into())]).unwrap();
        assert_eq!(loaded.settings.listen_port, 40911);
        assert_eq!(loaded.settings.ha_listen_port, 40912);
        assert_eq!(loaded.settings.broker_role, BrokerRole::SyncMaster);
    }

    #[test]
    fn missing_file_is_an_error_naming_it() {
        let err = load(&[], Some(Path::new("/nonexistent/broker.conf")), &[]).unwrap_err();
        assert!(err.to_string().starts_with("cannot read /nonexistent/broker.conf"), "{err}");
    }

    #[test]
    fn logship_keys_parse() {
        let s = load_text("newSlaveStart=LAST_FILE\nslaveAckOn=FLUSHED\nackPolicy=ALL_IN_SYNC\n")
            .unwrap()
            .settings;
        assert_eq!(s.new_slave_start, NewSlaveStart::LastFile);
        assert_eq!(s.slave_ack_on, AckOn::Flushed);
        assert_eq!(s.effective_ack_policy(), AckPolicy::AllInSync);
        assert!(load_text("slaveAckOn=DISK\n").unwrap_err().to_string().contains("slaveAckOn"));
    }
}
