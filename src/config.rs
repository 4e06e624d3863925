//! `broker.conf`: RocketMQ's `key=value` properties format, with RocketMQ's key names, plus
//! logship's own keys. Command-line settings override the file. Every value is checked before
//! anything starts: an unknown key is a warning that names it; a bad value, or a combination
//! that cannot work, is an error that names the key and the value.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use logship_core::driver::{BrokerRole, FlushDiskType, MasterServiceConfig, SlaveServiceConfig};
use logship_core::tls::{MasterTls, SlaveTls, TlsMode, TlsPem};
use logship_core::{AckOn, AckPolicy, Admission, IpNet, MasterConfig, NewSlaveStart, SlaveConfig};

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
    // ---- HA port security (logship keys) ----
    /// logship `haListenAddress`: the HA port's bind address; unset, `brokerIP1` if loopback,
    /// else `0.0.0.0` (with a warning).
    pub ha_listen_address: Option<IpAddr>,
    /// logship `haReplicaAllowList`: replica addresses or networks; empty admits everyone
    /// and trusts no one.
    pub ha_replica_allow_list: Vec<IpNet>,
    /// logship `haMaxConnectionsPerPeer`.
    pub ha_max_connections_per_peer: usize,
    /// logship `haMaxConnections`.
    pub ha_max_connections: usize,
    /// logship `haFirstReportTimeout`.
    pub ha_first_report_timeout: Duration,
    /// logship `haSlaveMaxFirstOffset`: the largest first offset an empty slave adopts.
    pub ha_slave_max_first_offset: u64,
    /// logship `haTlsMode` (master): `off`, `optional` or `required`.
    pub ha_tls_mode: TlsMode,
    /// logship `haTlsEnable` (slave): connect to the master over TLS.
    pub ha_tls_enable: bool,
    /// logship `haTlsCertPath`, `haTlsKeyPath`, `haTlsCaPath`: this side's certificate chain
    /// and key, and the CA the other side's certificate must chain to (PEM files).
    pub ha_tls_cert_path: Option<PathBuf>,
    /// See `ha_tls_cert_path`.
    pub ha_tls_key_path: Option<PathBuf>,
    /// See `ha_tls_cert_path`.
    pub ha_tls_ca_path: Option<PathBuf>,
    /// logship `haTlsReplicaNames` (master): the replica names a client certificate must carry.
    pub ha_tls_replica_names: Vec<String>,
    /// logship `haTlsServerName` (slave): the name the master's certificate must carry; unset,
    /// the host of `haMasterAddress`.
    pub ha_tls_server_name: Option<String>,
    /// The master's TLS settings, built from the keys above (`None` with `haTlsMode=off`).
    pub master_tls: Option<MasterTls>,
    /// The slave's TLS settings (`None` unless `haTlsEnable=true`).
    pub slave_tls: Option<SlaveTls>,
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
            ha_listen_address: None,
            ha_replica_allow_list: Vec::new(),
            ha_max_connections_per_peer: logship_core::admission::DEFAULT_MAX_CONNECTIONS_PER_PEER,
            ha_max_connections: logship_core::admission::DEFAULT_MAX_CONNECTIONS,
            ha_first_report_timeout: logship_core::config::DEFAULT_FIRST_REPORT_TIMEOUT,
            ha_slave_max_first_offset: logship_core::config::DEFAULT_MAX_FIRST_OFFSET,
            ha_tls_mode: TlsMode::Off,
            ha_tls_enable: false,
            ha_tls_cert_path: None,
            ha_tls_key_path: None,
            ha_tls_ca_path: None,
            ha_tls_replica_names: Vec::new(),
            ha_tls_server_name: None,
            master_tls: None,
            slave_tls: None,
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
            // ---- HA port security (logship keys) ----
            "haListenAddress" => {
                s.ha_listen_address = if v.is_empty() {
                    None
                } else {
                    Some(v.parse().map_err(|_| invalid(key, v, "an IP address to bind the HA port to"))?)
                }
            }
            "haReplicaAllowList" => {
                s.ha_replica_allow_list = logship_core::admission::parse_allow_list(v).map_err(|e| {
                    invalid(key, v, &format!("comma-separated IP addresses or CIDR networks ({e})"))
                })?
            }
            "haMaxConnectionsPerPeer" => s.ha_max_connections_per_peer = number(key, v, 1, 65_535)? as usize,
            "haMaxConnections" => s.ha_max_connections = number(key, v, 1, 65_535)? as usize,
            "haFirstReportTimeout" => s.ha_first_report_timeout = millis(key, v)?,
            "haSlaveMaxFirstOffset" => s.ha_slave_max_first_offset = number(key, v, 1, i64::MAX as u64)?,
            "haTlsMode" => {
                s.ha_tls_mode = v.parse().map_err(|_| invalid(key, v, "off, optional or required"))?
            }
            "haTlsEnable" => s.ha_tls_enable = boolean(key, v)?,
            "haTlsCertPath" => s.ha_tls_cert_path = path_or_none(v),
            "haTlsKeyPath" => s.ha_tls_key_path = path_or_none(v),
            "haTlsCaPath" => s.ha_tls_ca_path = path_or_none(v),
            "haTlsReplicaNames" => {
                s.ha_tls_replica_names =
                    v.split(',').map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect()
            }
            "haTlsServerName" => s.ha_tls_server_name = (!v.is_empty()).then(|| v.to_string()),
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
    build_tls(&mut s)?;
    if s.broker_role == BrokerRole::Slave && s.ha_tls_mode != TlsMode::Off {
        warnings.push("haTlsMode is a master key; a slave uses haTlsEnable: ignored".to_string());
    }
    if s.broker_role != BrokerRole::Slave && s.ha_tls_enable {
        warnings.push("haTlsEnable is a slave key; a master uses haTlsMode: ignored".to_string());
    }
    if s.master_tls.is_some() && s.ha_tls_mode == TlsMode::Optional && s.ha_replica_allow_list.is_empty() {
        warnings.push(
            "haTlsMode=optional without haReplicaAllowList: plain HA connections from any address are \
             admitted (untrusted) and count for SYNC waits; list the plain slaves in haReplicaAllowList, \
             or set haTlsMode=required"
                .to_string(),
        );
    }
    if s.ha_listen_address.is_none() && !s.broker_ip1.is_loopback() && s.broker_role != BrokerRole::Slave {
        warnings.push(format!(
            "haListenAddress is unset and brokerIP1={} is not loopback: the HA port listens on 0.0.0.0 \
             (every interface){}; set haListenAddress (and haReplicaAllowList) to restrict it",
            s.broker_ip1,
            if s.ha_replica_allow_list.is_empty() { " and admits any replica" } else { "" }
        ));
    }
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
    if s.total_replicas > 1
        && s.broker_role != BrokerRole::Slave
        && s.ha_replica_allow_list.is_empty()
        && s.ha_tls_mode == TlsMode::Off
    {
        return Err(conflict(
            format!("totalReplicas={} haReplicaAllowList=(unset) haTlsMode=off", s.total_replicas),
            "after a crash the master waits for totalReplicas - 1 trusted replicas, and only replicas \
             listed in haReplicaAllowList or admitted by TLS certificate are trusted: list the slaves' \
             addresses, or set haTlsMode",
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

fn path_or_none(v: &str) -> Option<PathBuf> {
    (!v.is_empty()).then(|| PathBuf::from(v))
}

/// Reads the TLS files and builds the side's TLS settings: the master's with `haTlsMode` other
/// than `off`, the slave's with `haTlsEnable=true`.
fn build_tls(s: &mut BrokerSettings) -> Result<(), ConfigError> {
    let wants = if s.broker_role == BrokerRole::Slave {
        s.ha_tls_enable.then_some("haTlsEnable=true")
    } else {
        (s.ha_tls_mode != TlsMode::Off).then_some("haTlsMode")
    };
    let Some(why) = wants else { return Ok(()) };
    for (key, path) in [
        ("haTlsCertPath", &s.ha_tls_cert_path),
        ("haTlsKeyPath", &s.ha_tls_key_path),
        ("haTlsCaPath", &s.ha_tls_ca_path),
    ] {
        if path.is_none() {
            return Err(ConfigError::Conflict {
                keys: format!("{why} {key}=(unset)"),
                reason: "TLS needs haTlsCertPath, haTlsKeyPath and haTlsCaPath".into(),
            });
        }
    }
    let read = |path: &Option<PathBuf>| -> Result<Vec<u8>, ConfigError> {
        let path = path.clone().unwrap_or_default();
        std::fs::read(&path).map_err(|e| ConfigError::Read { path, reason: e.to_string() })
    };
    let cert = read(&s.ha_tls_cert_path)?;
    let key = read(&s.ha_tls_key_path)?;
    let ca = read(&s.ha_tls_ca_path)?;
    let pem = TlsPem { cert_chain: &cert, key: &key, ca: &ca };
    let failed = |e: logship_core::tls::TlsError| ConfigError::Conflict {
        keys: "haTlsCertPath haTlsKeyPath haTlsCaPath haTlsReplicaNames haTlsServerName".into(),
        reason: e.to_string(),
    };
    if s.broker_role == BrokerRole::Slave {
        let server_name = match &s.ha_tls_server_name {
            Some(name) => name.clone(),
            None => {
                let address = s.ha_master_address.clone().unwrap_or_default();
                let host = address.rsplit_once(':').map_or(address.as_str(), |(h, _)| h);
                host.trim_start_matches('[').trim_end_matches(']').to_string()
            }
        };
        s.slave_tls = Some(SlaveTls::new(pem, &server_name).map_err(failed)?);
    } else {
        if s.ha_tls_replica_names.is_empty() {
            return Err(ConfigError::Conflict {
                keys: format!("haTlsMode={} haTlsReplicaNames=(unset)", s.ha_tls_mode),
                reason: "a TLS master trusts only certificates naming a listed replica: list them".into(),
            });
        }
        s.master_tls = Some(MasterTls::new(s.ha_tls_mode, pem, &s.ha_tls_replica_names).map_err(failed)?);
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

    /// The HA listen address: `haListenAddress`, else `brokerIP1` if loopback, else `0.0.0.0`.
    pub fn ha_addr(&self) -> SocketAddr {
        SocketAddr::new(
            self.ha_listen_address.unwrap_or_else(|| self.broker_ip_for_bind()),
            self.ha_listen_port,
        )
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
            first_report_timeout: self.ha_first_report_timeout,
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
            admission: Admission {
                allow: self.ha_replica_allow_list.clone(),
                max_connections_per_peer: self.ha_max_connections_per_peer,
                max_connections: self.ha_max_connections,
                tls: self.master_tls.clone(),
            },
        }
    }

    /// The slave service configuration (for `brokerRole=SLAVE`).
    pub fn slave_service_config(&self) -> SlaveServiceConfig {
        let mut c = SlaveServiceConfig::new(self.ha_master_address.clone().unwrap_or_default());
        c.core = SlaveConfig {
            heartbeat_interval: self.ha_send_heartbeat_interval,
            housekeeping_interval: self.ha_housekeeping_interval,
            ack_on: self.slave_ack_on,
            max_first_offset: self.ha_slave_max_first_offset,
            ..SlaveConfig::default()
        };
        c.tls = self.slave_tls.clone();
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
        let s = load_text(
            "brokerRole=SYNC_MASTER\ninSyncReplicas=2\ntotalReplicas=3\nhaReplicaAllowList=10.0.0.0/24\n",
        )
        .unwrap()
        .settings;
        assert_eq!(s.effective_ack_policy(), AckPolicy::Quorum { in_sync_replicas: 2 });
        let err = load_text("inSyncReplicas=3\ntotalReplicas=2\nhaReplicaAllowList=10.0.0.1\n").unwrap_err();
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

    #[test]
    fn ha_security_keys_parse_and_reach_the_services() {
        let text = "haListenAddress=10.0.0.5\nhaReplicaAllowList=10.0.0.7, 10.1.0.0/16\n\
                    haMaxConnectionsPerPeer=2\nhaMaxConnections=10\nhaFirstReportTimeout=3000\n\
                    haSlaveMaxFirstOffset=4096\ntotalReplicas=2\n";
        let s = load_text(text).unwrap().settings;
        assert_eq!(s.ha_addr(), "10.0.0.5:10912".parse().unwrap());
        let m = s.master_service_config();
        assert_eq!(m.admission.allow.len(), 2);
        assert!(m.admission.trusts("10.1.2.3".parse().unwrap()));
        assert_eq!((m.admission.max_connections_per_peer, m.admission.max_connections), (2, 10));
        assert_eq!(m.core.first_report_timeout, Duration::from_secs(3));
        assert_eq!(s.slave_service_config().core.max_first_offset, 4096);
        let err = load_text("haReplicaAllowList=10.0.0.0/40\n").unwrap_err();
        assert!(err.to_string().contains("haReplicaAllowList"), "{err}");
        let err = load_text("haListenAddress=example.org\n").unwrap_err();
        assert!(err.to_string().contains("haListenAddress"), "{err}");
    }

    #[test]
    fn total_replicas_needs_an_allow_list() {
        let err = load_text("brokerRole=SYNC_MASTER\ntotalReplicas=2\n").unwrap_err();
        assert!(err.to_string().contains("haReplicaAllowList"), "{err}");
    }

    #[test]
    fn a_non_loopback_broker_ip_says_the_ha_port_binds_every_interface() {
        let loaded = load_text("brokerIP1=10.0.0.5\n").unwrap();
        assert_eq!(loaded.settings.ha_addr().ip(), IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert!(
            loaded.warnings.iter().any(|w| w.contains("haListenAddress") && w.contains("0.0.0.0")),
            "{:?}",
            loaded.warnings
        );
        let loaded = load_text("brokerIP1=10.0.0.5\nhaListenAddress=10.0.0.5\n").unwrap();
        assert!(!loaded.warnings.iter().any(|w| w.contains("haListenAddress")));
        assert_eq!(load_text("").unwrap().settings.ha_addr().ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
    }

    /// Writes a CA and a certificate it signs (for `replica-a`) as PEM files; returns the
    /// `haTls*Path` lines.
    fn tls_files(dir: &Path) -> String {
        use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec!["replica-a".to_string()]).unwrap();
        let cert = cert.signed_by(&key, &ca, &ca_key).unwrap();
        let mut lines = String::new();
        for (k, file, pem) in [
            ("haTlsCertPath", "cert.pem", cert.pem()),
            ("haTlsKeyPath", "key.pem", key.serialize_pem()),
            ("haTlsCaPath", "ca.pem", ca.pem()),
        ] {
            std::fs::write(dir.join(file), pem).unwrap();
            lines.push_str(&format!("{k}={}\n", dir.join(file).display()));
        }
        lines
    }

    #[test]
    fn tls_keys_build_each_sides_settings_and_name_what_is_missing() {
        let dir = tempfile::tempdir().unwrap();
        let files = tls_files(dir.path());
        let text = format!(
            "brokerRole=SYNC_MASTER\nhaTlsMode=required\nhaTlsReplicaNames=replica-a, replica-b\ntotalReplicas=2\n{files}"
        );
        let m = load_text(&text).unwrap().settings.master_service_config();
        let tls = m.admission.tls.as_ref().expect("TLS configured");
        assert_eq!(tls.mode(), TlsMode::Required);
        assert_eq!(tls.replica_names(), ["replica-a", "replica-b"]);
        assert!(m.validate().is_ok(), "TLS replicas can lift the restart fence");
        // A slave checks the master's certificate for the host of haMasterAddress by default.
        let slave =
            format!("brokerRole=SLAVE\nhaMasterAddress=master.example:10912\nhaTlsEnable=true\n{files}");
        let s = load_text(&slave).unwrap().settings.slave_service_config();
        assert_eq!(s.tls.expect("TLS configured").server_name().to_str(), "master.example");
        let named = format!("{slave}haTlsServerName=10.0.0.5\n");
        let s = load_text(&named).unwrap().settings.slave_service_config();
        assert_eq!(s.tls.unwrap().server_name().to_str(), "10.0.0.5");
        let master_with_slave_key = load_text("haTlsEnable=true\n").unwrap();
        assert!(master_with_slave_key.settings.slave_tls.is_none(), "ignored on a master");
        assert!(master_with_slave_key.warnings.iter().any(|w| w.contains("haTlsEnable is a slave key")));
        // What is wrong is named.
        let optional = format!("haTlsMode=optional\nhaTlsReplicaNames=replica-a\n{files}");
        let warnings = load_text(&optional).unwrap().warnings;
        assert!(
            warnings.iter().any(|w| w.contains("haTlsMode=optional without haReplicaAllowList")),
            "{warnings:?}"
        );
        let listed = format!("{optional}haReplicaAllowList=10.0.0.6\n");
        assert!(!load_text(&listed).unwrap().warnings.iter().any(|w| w.contains("haTlsMode")));
        let no_names = format!("haTlsMode=optional\n{files}");
        assert!(load_text(&no_names).unwrap_err().to_string().contains("haTlsReplicaNames"));
        let no_key = "haTlsMode=optional\nhaTlsReplicaNames=a\nhaTlsCertPath=/x\nhaTlsCaPath=/y\n";
        assert!(load_text(no_key).unwrap_err().to_string().contains("haTlsKeyPath"));
        let missing =
            format!("haTlsMode=optional\nhaTlsReplicaNames=a\n{files}haTlsCaPath=/nonexistent/ca.pem\n");
        assert!(matches!(load_text(&missing).unwrap_err(), ConfigError::Read { .. }));
        let swapped = text.replace("cert.pem", "ca.pem.tmp").replace("key.pem", "cert.pem");
        std::fs::copy(dir.path().join("ca.pem"), dir.path().join("ca.pem.tmp")).unwrap();
        assert!(load_text(&swapped).unwrap_err().to_string().contains("key"), "a certificate is no key");
        assert!(load_text("haTlsMode=on\n").unwrap_err().to_string().contains("haTlsMode"));
        let err = load_text("totalReplicas=2\n").unwrap_err().to_string();
        assert!(err.contains("haReplicaAllowList") && err.contains("haTlsMode"), "{err}");
    }
}
