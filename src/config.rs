//! `broker.conf`: RocketMQ's `key=value` properties format, with RocketMQ's key names, plus
//! logship's own keys. Command-line settings override the file. Every value is checked before
//! anything starts: an unknown key is a warning that names it (and the key probably meant); a
//! bad value, or a combination that cannot work, is an error that names the key and the value.
//!
//! Each key is declared once, with its default, doc, roles and parser ([`keys`] explains the
//! form): [`broker_keys`] (the broker's, the HTTP port's, controller mode's and failover's),
//! [`store`], [`remoting`] and [`etcd`]. The file's syntax is in [`properties`]; the RocketMQ
//! keys logship knows but does not use in [`rocketmq_keys`]. This module builds the settings
//! from the declarations and checks the combinations.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use logship_core::autoswitch::{BrokerId, SyncPolicy};
use logship_core::service::tls::{MasterTls, SlaveTls, TlsError, TlsMode, TlsPem};
use logship_core::service::{Admission, IpNet};
use logship_core::service::{MasterControllerConfig, SlaveControllerConfig};
use logship_core::service::{MasterServiceConfig, SlaveServiceConfig};
use logship_core::{AckOn, AckPolicy, MasterConfig, NewSlaveStart, SlaveConfig};
use logship_core::{BrokerRole, FlushDiskType};

mod broker_keys;
mod etcd;
mod keys;
mod properties;
mod remoting;
mod rocketmq_keys;
mod store;
use etcd::{EtcdSecurityKeys, check_etcd, etcd_endpoints};
pub use properties::parse_properties;
pub use remoting::RemotingKeys;
pub use store::StoreKeys;

/// A configuration problem that stops the broker before it starts.
#[derive(thiserror::Error, Debug, PartialEq, Eq)]
pub enum BrokerConfigError {
    /// The file could not be read.
    #[error("cannot read {path}: {reason}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        reason: String,
    },
    /// A line is not `key=value`.
    #[error("{origin}, line {line}: {}, found {text:?}", reason.as_deref().unwrap_or("expected key=value"))]
    Syntax {
        /// The file or "command line".
        origin: String,
        /// 1-based line number.
        line: usize,
        /// The offending text.
        text: String,
        /// What is wrong, when more than "expected key=value".
        reason: Option<String>,
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
    /// A RocketMQ mode logship does not implement is switched on.
    #[error("{origin}: {key}={value}: {reason}")]
    Unsupported {
        /// Where it was set.
        origin: String,
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What logship does instead.
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
    /// `storePathCommitLog`, when it is not `<storePathRootDir>/commitlog`.
    pub store_path_commit_log: Option<PathBuf>,
    /// `storePathEpochFile`, when it is not `<storePathRootDir>/epochFileCheckpoint`.
    pub store_path_epoch_file: Option<PathBuf>,
    /// `brokerIP1`: the address stored in messages and message ids.
    pub broker_ip1: IpAddr,
    /// `listenPort`: the remoting port (RocketMQ's clients and NameServers).
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
    /// The HTTP port's exposure and resource limits.
    pub http: HttpSettings,
    /// The remoting port, NameServer registration and where the HTTP port listens.
    pub remoting: RemotingKeys,
    /// `brokerClusterName`: the `cluster` label on every metric.
    pub broker_cluster_name: String,
    /// `brokerName`: the `broker_name` label on every metric (default: the host name, as RocketMQ).
    pub broker_name: String,
    /// logship `replicaNames`: `NAME@IP` entries naming the slaves a master expects, so that a
    /// replica keeps its name (in `/status`, `/metrics`) across reconnects and while it is away.
    /// An IP may carry several names (slaves on one host): its connections take them in
    /// turn, oldest first.
    pub replica_names: Vec<(String, IpAddr)>,
    /// The store's integrity and disk keys (see [`StoreKeys`]).
    pub store: StoreKeys,
    /// Controller mode (`enableControllerMode=true` and its keys); `None`: classic HA.
    pub controller: Option<ControllerKeys>,
    // ---- HA port security (logship keys) ----
    /// logship `haListenAddress`: the HA port's bind address; unset, `brokerIP1` if loopback,
    /// else `0.0.0.0` (with a warning).
    pub ha_listen_address: Option<IpAddr>,
    /// logship `haReplicaAllowList`: replica addresses or networks; empty (without TLS):
    /// protected mode, only loopback peers are admitted and identified.
    pub ha_replica_allow_list: Vec<IpNet>,
    /// logship `haTrustAnyReplica` (false): admit any connection that would be a stranger and
    /// count its acknowledgements (RocketMQ's open admission), though it never fences; warned
    /// at start and in `/status`.
    pub ha_trust_any_replica: bool,
    /// logship `haMaxUntrustedConnections`: live HA connections not identified as replicas.
    pub ha_max_untrusted_connections: usize,
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
    /// the host of `haMasterAddress` (in controller mode: of each master followed).
    pub ha_tls_server_name: Option<String>,
    /// The master's TLS settings, built from the keys above (`None` with `haTlsMode=off`).
    pub master_tls: Option<MasterTls>,
    /// The slave's TLS settings (`None` unless `haTlsEnable=true`). In controller mode without
    /// `haTlsServerName`, [`controller_slave_config`](Self::controller_slave_config) replaces
    /// its server name with the host of the master followed.
    pub slave_tls: Option<SlaveTls>,
}

/// The keys of controller mode (RocketMQ 5's `enableControllerMode=true`, the AutoSwitch
/// protocol): who this broker is in its group and how a master counts the sync-state-set. The
/// role itself is not a key: it comes from the admin calls (`POST /ha/changeToMaster`,
/// `POST /ha/changeToSlave`), as it comes from the controller in RocketMQ.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerKeys {
    /// `brokerId`: this broker's id in its group (0 or more). Required: RocketMQ asks its
    /// controller for one, and logship has no controller.
    pub broker_id: BrokerId,
    /// `allAckInSyncStateSet` (false): a SYNC put waits for every member of the sync-state-set.
    pub all_ack_in_sync_state_set: bool,
    /// `inSyncReplicas` (1): otherwise, copies a put waits for, the master counting as one.
    pub in_sync_replicas: u32,
    /// `minInSyncReplicas` (1): a put to a smaller set is refused at once
    /// (`IN_SYNC_REPLICAS_NOT_ENOUGH`).
    pub min_in_sync_replicas: u32,
    /// `haMaxTimeSlaveNotCatchup` (15000 ms): a member behind for this long leaves the set.
    pub ha_max_time_slave_not_catchup: Duration,
    /// `asyncLearner` (false): as a slave, replicate without ever joining the sync-state-set.
    pub async_learner: bool,
    /// `syncFromLastFile` (false): as an empty slave, ask only for the master's last segment.
    pub sync_from_last_file: bool,
    /// `readUnCommitted` (false): index replicated messages into the consume queues at once
    /// instead of only below the confirmOffset.
    pub read_uncommitted: bool,
    /// logship `haSlaveDropConfirmed` (unset): `POINT-CONFIRM`, the one range of confirmed
    /// bytes a slave may drop to follow a master whose log agrees only up to `POINT`, exactly
    /// as the refusal named it. Unset: a slave never truncates below its confirmOffset.
    pub drop_confirmed: Option<std::ops::Range<u64>>,
    /// logship `adoptLogWithoutEpochs` (unset): the end offset of a log without an epoch file
    /// to take as it is once (a store from the classic mode); see
    /// [`logship_store::StoreConfig::adopt_log_without_epochs`].
    pub adopt_log_without_epochs: Option<u64>,
    /// Automatic failover on etcd (`etcdEndpoints` set); `None`: roles come from the admin calls.
    pub etcd: Option<EtcdKeys>,
}

/// The keys of automatic failover on etcd (controller mode with `etcdEndpoints`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdKeys {
    /// `etcdEndpoints`: comma-separated etcd client URLs (`http://host:port`).
    pub endpoints: Vec<String>,
    /// `etcdKeyPrefix` (`/logship`): where the group's keys live.
    pub key_prefix: String,
    /// `etcdLeaseTtlMs` (3000, whole seconds): this broker's lease.
    pub lease_ttl: Duration,
    /// `etcdLeaseMarginMs` (500): a master stops acknowledging this long before its lease could
    /// expire.
    pub lease_margin: Duration,
    /// `etcdLeaseRenewIntervalMs` (1000): how often the lease is renewed.
    pub lease_renew_interval: Duration,
    /// `etcdRequestTimeoutMs` (1000): one etcd request's limit.
    pub request_timeout: Duration,
    /// `enableElectUncleanMaster` (false, RocketMQ's name): elect a broker outside the
    /// sync-state-set when no member is live, losing what it lacks.
    pub elect_unclean_master: bool,
    /// `etcdTlsCaPath`, `etcdTlsCertPath`, `etcdTlsKeyPath`, `etcdTlsServerName`: TLS to etcd
    /// (`None`: plain `http://` endpoints), read and checked at load.
    pub tls: Option<EtcdTlsKeys>,
    /// `etcdUser` and `etcdPasswordFile`: etcd's authentication (`None`: off).
    pub credentials: Option<EtcdCredentialKeys>,
}

/// TLS to etcd, as the keys give it: the files' PEM contents.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdTlsKeys {
    /// `etcdTlsCaPath`: the CA(s) etcd's certificate must chain to.
    pub ca_pem: Vec<u8>,
    /// `etcdTlsCertPath` and `etcdTlsKeyPath`: a client certificate chain and its key, for an
    /// etcd run with `--client-cert-auth`.
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// `etcdTlsServerName`: the name etcd's certificate must carry (unset: each endpoint's host).
    pub server_name: Option<String>,
}

impl std::fmt::Debug for EtcdTlsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdTlsKeys")
            .field("client_certificate", &self.identity.is_some())
            .field("server_name", &self.server_name)
            .finish_non_exhaustive()
    }
}

/// `etcdUser` and the password read from `etcdPasswordFile`.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdCredentialKeys {
    /// `etcdUser`.
    pub user: String,
    /// The content of `etcdPasswordFile`, without its trailing line break.
    pub password: String,
}

impl std::fmt::Debug for EtcdCredentialKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdCredentialKeys").field("user", &self.user).field("password", &"(hidden)").finish()
    }
}

impl Default for EtcdKeys {
    fn default() -> Self {
        Self {
            endpoints: Vec::new(),
            key_prefix: "/logship".into(),
            lease_ttl: Duration::from_millis(3000),
            lease_margin: Duration::from_millis(500),
            lease_renew_interval: Duration::from_millis(1000),
            request_timeout: Duration::from_millis(1000),
            elect_unclean_master: false,
            tls: None,
            credentials: None,
        }
    }
}

impl ControllerKeys {
    /// The controller keys' defaults, before the file is read.
    fn unset() -> Self {
        Self {
            broker_id: 0,
            all_ack_in_sync_state_set: false,
            in_sync_replicas: 1,
            min_in_sync_replicas: 1,
            ha_max_time_slave_not_catchup: Duration::from_millis(15_000),
            async_learner: false,
            sync_from_last_file: false,
            read_uncommitted: false,
            drop_confirmed: None,
            adopt_log_without_epochs: None,
            etcd: None,
        }
    }

    /// The sync policy of a master in controller mode.
    pub fn sync_policy(&self) -> SyncPolicy {
        SyncPolicy {
            all_ack_in_sync_state_set: self.all_ack_in_sync_state_set,
            in_sync_replicas: self.in_sync_replicas,
            min_in_sync_replicas: self.min_in_sync_replicas,
        }
    }
}

/// The HTTP port's authentication, timeouts and limits, and the per-topic queue count (the
/// keys of docs/configuration.md's "HTTP port" table; its address is `httpListenAddress:httpListenPort`,
/// in [`RemotingKeys`]).
#[derive(Clone, Debug, PartialEq)]
pub struct HttpSettings {
    /// `httpAuthToken` / `httpAuthTokenFile`: the bearer token every request must carry.
    pub auth_token: Option<String>,
    /// `httpHeaderTimeout`: a request header must be complete within this long of the
    /// connection opening or of the previous response.
    pub header_timeout: Duration,
    /// `httpBodyTimeout`: a request body must be complete within this long of its header.
    pub body_timeout: Duration,
    /// `httpIdleTimeout`: a connection that moves no byte either way for this long is closed.
    pub idle_timeout: Duration,
    /// `httpMaxConnections`: open HTTP connections beyond this are answered 503 and closed.
    pub max_connections: usize,
    /// `httpMaxConnectionsPerIp`: the same, per client IP (0: no per-IP limit; unset, an
    /// eighth of `httpMaxConnections`, at least 1).
    pub max_connections_per_ip: usize,
    /// `httpMaxInFlightBytes`: request and response bodies held in memory at once.
    pub max_in_flight_bytes: u64,
    /// `httpMaxInFlightBytesPerIp`: the same, per client IP (0: no per-IP budget; unset, an
    /// eighth of `httpMaxInFlightBytes`, at least `maxMessageSize`).
    pub max_in_flight_bytes_per_ip: u64,
    /// `maxTransferBytesOnMessageInMemory`: the most message bytes one pull returns (at least
    /// one message is always returned).
    pub max_transfer_bytes: u64,
    /// `maxTransferCountOnMessageInMemory`: the most messages one pull returns.
    pub max_transfer_count: usize,
    /// `shutdownDrainTimeout`: how long SIGTERM waits for open requests before closing them.
    pub shutdown_drain_timeout: Duration,
    /// `defaultTopicQueueNums`: queues per topic; a put or pull naming a queueId at or beyond it
    /// is refused.
    pub default_topic_queue_nums: u32,
    /// `httpTlsCertFile`: the PEM certificate chain of HTTPS (unset: plain HTTP).
    pub tls_cert_file: Option<PathBuf>,
    /// `httpTlsKeyFile`: the PEM private key of `httpTlsCertFile`.
    pub tls_key_file: Option<PathBuf>,
    /// `httpTlsClientCaFile`: PEM CA certificates; when set, clients must present a certificate
    /// they signed (mTLS).
    pub tls_client_ca_file: Option<PathBuf>,
}

impl Default for HttpSettings {
    fn default() -> Self {
        Self {
            auth_token: None,
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            max_connections: 1024,
            max_connections_per_ip: 1024 / PER_CLIENT_SHARE,
            max_in_flight_bytes: 256 << 20,
            max_in_flight_bytes_per_ip: (256 << 20) / PER_CLIENT_SHARE as u64,
            max_transfer_bytes: 256 << 10,
            max_transfer_count: 32,
            shutdown_drain_timeout: Duration::from_secs(5),
            default_topic_queue_nums: 8,
            tls_cert_file: None,
            tls_key_file: None,
            tls_client_ca_file: None,
        }
    }
}

/// By default one client IP may hold this fraction (1/8) of the HTTP connections and of the
/// in-flight body budget, so that one client cannot lock the others out.
pub const PER_CLIENT_SHARE: usize = 8;

impl Default for BrokerSettings {
    fn default() -> Self {
        let home = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("."));
        Self {
            broker_role: BrokerRole::AsyncMaster,
            flush_disk_type: FlushDiskType::AsyncFlush,
            store_path_root_dir: home.join("store"),
            store_path_commit_log: None,
            store_path_epoch_file: None,
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
            http: HttpSettings::default(),
            remoting: RemotingKeys::default(),
            broker_cluster_name: "DefaultCluster".into(),
            broker_name: host_name(),
            replica_names: Vec::new(),
            store: StoreKeys::default(),
            controller: None,
            ha_listen_address: None,
            ha_replica_allow_list: Vec::new(),
            ha_trust_any_replica: false,
            ha_max_untrusted_connections: logship_core::service::DEFAULT_MAX_UNTRUSTED_CONNECTIONS,
            ha_max_connections_per_peer: logship_core::service::DEFAULT_MAX_CONNECTIONS_PER_PEER,
            ha_max_connections: logship_core::service::DEFAULT_MAX_CONNECTIONS,
            ha_first_report_timeout: logship_core::DEFAULT_FIRST_REPORT_TIMEOUT,
            ha_slave_max_first_offset: logship_core::DEFAULT_MAX_FIRST_OFFSET,
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

/// The host name (RocketMQ's default `brokerName`).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

/// The failover keys other than `etcdEndpoints`: set without it, a warning.
fn etcd_keys() -> impl Iterator<Item = &'static str> {
    [broker_keys::FAILOVER_KEYS, etcd::ETCD_SECURITY_KEYS]
        .into_iter()
        .flat_map(|s| s.keys.iter())
        .map(|k| k.name)
        .filter(|&k| k != "etcdEndpoints")
}

/// Whether `key` is a boolean (its declared default is `true` or `false`), for the warning on
/// values Java reads as false by accident.
fn is_boolean_key(key: &str) -> bool {
    SECTIONS.iter().flat_map(|s| s.keys.iter()).any(|k| {
        k.name == key
            && matches!(k.default, keys::KeyDefault::Value("true") | keys::KeyDefault::Value("false"))
    })
}

/// The keys only controller mode reads (`logship broker` alone): set without
/// `enableControllerMode=true`, a warning.
fn controller_only_keys() -> impl Iterator<Item = &'static str> {
    SECTIONS.iter().flat_map(|s| s.keys.iter()).filter(|k| k.roles == keys::BROKER).map(|k| k.name)
}

/// `haSlaveDropConfirmed`: `FROM-TO`, a range of at least one byte; empty is unset.
fn offset_range(key: &str, v: &str) -> Result<Option<std::ops::Range<u64>>, BrokerConfigError> {
    if v.is_empty() {
        return Ok(None);
    }
    let rule = "FROM-TO, the offsets a refusal to truncate below the confirmOffset named (FROM below TO)";
    let (from, to) = v.split_once('-').ok_or_else(|| invalid(key, v, rule))?;
    let parse = |s: &str| s.trim().parse::<u64>().ok().filter(|&o| o <= i64::MAX as u64);
    match (parse(from), parse(to)) {
        (Some(from), Some(to)) if from < to => Ok(Some(from..to)),
        _ => Err(invalid(key, v, rule)),
    }
}

/// Where a setting came from, for messages.
#[derive(Clone, Debug)]
struct Setting {
    value: String,
    origin: String,
}

/// What the parsers of [`broker_keys`] note beyond the settings, for the checks after them.
#[derive(Default)]
struct Flags {
    ha_port_set: bool,
    untrusted_set: bool,
    token_file_set: bool,
    store_path_commit_log: Option<String>,
    controller_mode: bool,
    broker_id: Option<(String, String)>,
}

/// Every declared key section, in the configuration reference's order.
pub const SECTIONS: &[keys::Section] = &[
    broker_keys::ROCKETMQ_KEYS,
    store::STORE_KEYS,
    remoting::REMOTING_KEYS,
    broker_keys::HTTP_KEYS,
    broker_keys::LOGSHIP_KEYS,
    broker_keys::CONTROLLER_KEYS,
    broker_keys::FAILOVER_KEYS,
    etcd::ETCD_SECURITY_KEYS,
];

/// The configuration reference's key tables (`logship config-keys`).
pub fn reference_tables() -> String {
    keys::markdown(SECTIONS)
}

/// Every declared key and alias.
fn all_key_names() -> impl Iterator<Item = &'static str> + Clone {
    SECTIONS
        .iter()
        .flat_map(|s| s.keys.iter())
        .flat_map(|k| std::iter::once(k.name).chain(k.aliases.iter().copied()))
}

/// Parses `key` if it is one of the sections of [`broker_keys`] that set the settings.
#[allow(clippy::too_many_arguments)]
fn set_broker_key(
    s: &mut BrokerSettings,
    c: &mut ControllerKeys,
    etcd: &mut EtcdKeys,
    f: &mut Flags,
    origin: &str,
    key: &str,
    v: &str,
) -> Result<bool, BrokerConfigError> {
    Ok(broker_keys::set_rocketmq(s, c, etcd, f, origin, key, v)?
        || broker_keys::set_logship(s, c, etcd, f, origin, key, v)?
        || broker_keys::set_controller(s, c, etcd, f, origin, key, v)?
        || broker_keys::set_failover(s, c, etcd, f, origin, key, v)?
        || broker_keys::set_http(s, c, etcd, f, origin, key, v)?)
}

/// Parsed settings plus the warnings to print before starting.
#[derive(Clone, Debug)]
pub struct Loaded {
    /// The settings.
    pub settings: BrokerSettings,
    /// One line per ignored or unknown key.
    pub warnings: Vec<String>,
    /// Every declared key's value and where it came from, in the reference's order.
    pub effective: Vec<EffectiveKey>,
}

/// A key's value as the broker reads it, and its source (for `--print-config`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EffectiveKey {
    /// The key.
    pub key: &'static str,
    /// The value given, or the default (a derived default is described, not computed).
    pub value: String,
    /// `default`, `<file>:<line>` or `command line`.
    pub source: String,
}

/// The value a key left unset takes when its default is derived from other keys, for the keys
/// an operator most often needs to see (the ports, the paths, the per-client shares).
fn derived_default(key: &str, s: &BrokerSettings) -> Option<String> {
    Some(match key {
        "haListenPort" => s.ha_listen_port.to_string(),
        "httpListenPort" => s.http_addr().port().to_string(),
        "httpListenAddress" => s.http_addr().ip().to_string(),
        "haListenAddress" => s.ha_addr().ip().to_string(),
        "storePathRootDir" => s.store_path_root_dir.display().to_string(),
        "brokerName" => s.broker_name.clone(),
        "httpMaxConnectionsPerIp" => s.http.max_connections_per_ip.to_string(),
        "httpMaxInFlightBytesPerIp" => s.http.max_in_flight_bytes_per_ip.to_string(),
        "remotingMaxConnectionsPerIp" => s.remoting.max_connections_per_ip.to_string(),
        "haMaxUntrustedConnections" => s.ha_max_untrusted_connections.to_string(),
        _ => return None,
    })
}

/// Every declared key's value and source.
fn effective(raw: &BTreeMap<String, Setting>, settings: &BrokerSettings) -> Vec<EffectiveKey> {
    let mut out = Vec::new();
    for k in SECTIONS.iter().flat_map(|s| s.keys.iter()) {
        let given = std::iter::once(k.name).chain(k.aliases.iter().copied()).find_map(|n| raw.get(n));
        let (value, source) = match (given, k.default) {
            (Some(s), _) => (s.value.clone(), s.origin.clone()),
            (None, keys::KeyDefault::Value(v)) => (v.to_string(), "default".to_string()),
            (None, keys::KeyDefault::Note(n)) => (
                derived_default(k.name, settings).unwrap_or_default(),
                format!("default: {}", n.replace('`', "")),
            ),
        };
        out.push(EffectiveKey { key: k.name, value, source });
    }
    out
}

/// `key=value` lines with each source as a trailing comment, aligned; secrets (the HTTP
/// token) are shown as `<set>`.
pub fn print_effective(keys: &[EffectiveKey]) -> String {
    let lines: Vec<String> = keys
        .iter()
        .map(|k| {
            let value = if k.key == "httpAuthToken" && !k.value.is_empty() { "<set>" } else { &k.value };
            format!("{}={value}", k.key)
        })
        .collect();
    let width = lines.iter().map(String::len).max().unwrap_or(0).min(60);
    lines.iter().zip(keys).map(|(l, k)| format!("{l:width$}  # {}\n", k.source)).collect()
}

/// A configuration error, with the warnings found before it (print those first).
#[derive(thiserror::Error, Debug)]
#[error("{error}")]
pub struct LoadError {
    /// What stops the broker.
    pub error: BrokerConfigError,
    /// Warnings collected before the error.
    pub warnings: Vec<String>,
}

impl From<BrokerConfigError> for LoadError {
    fn from(error: BrokerConfigError) -> Self {
        Self { error, warnings: Vec::new() }
    }
}

/// The most bytes a configuration file (`--config`) may hold: a `broker.conf` is a few KiB, and
/// a path to something else (`/dev/zero`, a log file) must not be read without bound.
pub const MAX_CONFIG_FILE_BYTES: u64 = 1 << 20;

/// Builds the settings from `defaults` (the subcommand's), an optional `broker.conf`, and
/// command-line `key=value` overrides, each overriding the one before.
pub fn load(
    defaults: &[(&str, &str)],
    file: Option<&Path>,
    overrides: &[(String, String)],
) -> Result<Loaded, LoadError> {
    let mut raw: BTreeMap<String, Setting> = BTreeMap::new();
    for (key, value) in defaults {
        raw.insert(key.to_string(), Setting { value: value.to_string(), origin: "default".into() });
    }
    if let Some(path) = file {
        let text = read_capped(path, MAX_CONFIG_FILE_BYTES).map_err(|e| BrokerConfigError::Read {
            path: path.to_path_buf(),
            reason: match e {
                CappedReadError::TooLarge => format!(
                    "the file is larger than {} MiB, the most a configuration file may hold",
                    MAX_CONFIG_FILE_BYTES >> 20
                ),
                CappedReadError::Io(e) => e.to_string(),
            },
        })?;
        let origin = path.display().to_string();
        for (key, value, line) in parse_properties(&text, &origin)? {
            raw.insert(key, Setting { value, origin: format!("{origin}:{line}") });
        }
    }
    for (key, value) in overrides {
        raw.insert(key.clone(), Setting { value: value.clone(), origin: "command line".into() });
    }
    let mut warnings = Vec::new();
    match build(&raw, &mut warnings) {
        Ok(settings) => Ok(Loaded { effective: effective(&raw, &settings), settings, warnings }),
        Err(error) => Err(LoadError { error, warnings }),
    }
}

#[cfg(test)]
fn from_map(raw: BTreeMap<String, Setting>) -> Result<Loaded, BrokerConfigError> {
    let mut warnings = Vec::new();
    let settings = build(&raw, &mut warnings)?;
    Ok(Loaded { effective: effective(&raw, &settings), settings, warnings })
}

/// Where a setting's origin comes in the order the operator wrote the settings: defaults,
/// then a file's lines (`path:line`), then the command line.
fn origin_order(origin: &str) -> (u8, u64) {
    match origin {
        "default" => (0, 0),
        "command line" => (2, 0),
        _ => match origin.rsplit_once(':').and_then(|(_, line)| line.parse::<u64>().ok()) {
            Some(line) => (1, line),
            None => (3, 0),
        },
    }
}

/// The settings from `raw`; warnings go to `warnings` as they are found, so that those found
/// before an error can be shown with it.
fn build(
    raw: &BTreeMap<String, Setting>,
    warnings: &mut Vec<String>,
) -> Result<BrokerSettings, BrokerConfigError> {
    let mut s = BrokerSettings::default();
    let mut f = Flags::default();
    let mut c = ControllerKeys::unset();
    let mut etcd = EtcdKeys::default();
    let mut etcd_security = EtcdSecurityKeys::default();
    // In the order the operator wrote them: defaults, then each file by line, then the
    // command line, so that warnings (and the first error) follow the file.
    let mut entries: Vec<(&String, &Setting)> = raw.iter().collect();
    entries.sort_by_key(|(_, setting)| origin_order(&setting.origin));
    for (key, Setting { value, origin }) in entries {
        let v = value.trim();
        if is_boolean_key(key) {
            if let Some(w) = boolean_warning(key, v, origin) {
                warnings.push(w);
            }
        }
        let known = s.store.set(key, v)?
            || etcd_security.set(key, v)?
            || s.remoting.set(key, v)?
            || set_broker_key(&mut s, &mut c, &mut etcd, &mut f, origin, key, v)?;
        if known {
            continue;
        }
        if rocketmq_keys::is_rocketmq_key(key) {
            warnings.push(format!("{origin}: RocketMQ key {key} is not used by logship; ignored"));
        } else {
            let hint = keys::suggestion(key, all_key_names())
                .map(|k| format!(" (did you mean {k}?)"))
                .unwrap_or_default();
            warnings.push(format!("{origin}: unknown key {key}; ignored{hint}"));
        }
    }
    if !f.ha_port_set && s.listen_port == 0 {
        // Any remoting port: any HA port too.
        s.ha_listen_port = 0;
    } else if !f.ha_port_set {
        s.ha_listen_port = s.listen_port.checked_add(1).ok_or_else(|| {
            invalid("listenPort", &s.listen_port.to_string(), "leave room for haListenPort = listenPort + 1")
        })?;
    }
    per_client_defaults(&mut s, raw);
    check_aliases(raw)?;
    if f.token_file_set && raw.contains_key("httpAuthToken") {
        return Err(BrokerConfigError::Conflict {
            keys: "httpAuthToken httpAuthTokenFile".into(),
            reason: "set the token one way only".into(),
        });
    }
    if let Some(commit_log) = f.store_path_commit_log.take() {
        apply_store_path_commit_log(&mut s, raw.contains_key("storePathRootDir"), &commit_log);
    }
    let broker_id_origin = f.broker_id.as_ref().map(|(_, origin)| origin.clone());
    if f.controller_mode {
        c.in_sync_replicas = s.in_sync_replicas;
        c.broker_id = controller_broker_id(f.broker_id.take())?;
        check_controller_mode(&s, raw, warnings)?;
        if !etcd.endpoints.is_empty() {
            check_etcd(&etcd)?;
            etcd_security.build(&mut etcd, warnings)?;
            if etcd.elect_unclean_master {
                warnings.push(
                    "enableElectUncleanMaster=true: when no member of the sync-state-set is live, a broker \
                     outside it may become master, and acknowledged messages it lacks are LOST"
                        .to_string(),
                );
            }
            c.etcd = Some(etcd);
        } else if let Some(key) =
            etcd_keys().filter(|k| raw.contains_key(*k)).min_by_key(|k| origin_order(&raw[*k].origin))
        {
            warnings.push(format!("{}: {key} has no effect without etcdEndpoints", raw[key].origin));
        }
        s.controller = Some(c);
    } else {
        let mut set: Vec<&str> = controller_only_keys().filter(|k| raw.contains_key(*k)).collect();
        set.sort_by_key(|k| origin_order(&raw[*k].origin));
        for key in set {
            warnings.push(format!(
                "{}: {key} is a controller-mode key and has no effect without enableControllerMode=true",
                raw[key].origin
            ));
        }
        if let Some((v, _)) = &f.broker_id {
            match v.parse::<i64>() {
                Ok(id) if id >= 0 => s.remoting.broker_id = Some(id),
                _ => return Err(invalid("brokerId", v, "an integer, 0 for a master, 1 or more for a slave")),
            }
        }
    }
    build_tls(&mut s)?;
    let classic = s.controller.is_none();
    if classic && s.broker_role == BrokerRole::Slave && s.ha_tls_mode != TlsMode::Off {
        warnings.push("haTlsMode is a master key; a slave uses haTlsEnable: ignored".to_string());
    }
    if classic && s.broker_role != BrokerRole::Slave && s.ha_tls_enable {
        warnings.push("haTlsEnable is a slave key; a master uses haTlsMode: ignored".to_string());
    }
    if s.master_tls.is_some() && s.ha_tls_mode == TlsMode::Optional && s.ha_replica_allow_list.is_empty() {
        let counted = if s.ha_trust_any_replica {
            "and count for SYNC waits (haTrustAnyReplica=true)"
        } else {
            "as strangers: they may read the log, but never count for SYNC waits"
        };
        warnings.push(format!(
            "haTlsMode=optional without haReplicaAllowList: plain HA connections from any address \
             (loopback included) are admitted {counted}; list the plain slaves in haReplicaAllowList, or \
             set haTlsMode=required"
        ));
    }
    if !f.untrusted_set {
        // Unset: the default share, within a smaller table.
        s.ha_max_untrusted_connections =
            s.ha_max_untrusted_connections.min(s.ha_max_connections.saturating_sub(1));
    }
    if let Err(e) = s.master_service_config().admission.validate() {
        return Err(BrokerConfigError::Conflict {
            keys: format!(
                "haMaxConnections={} haMaxUntrustedConnections={}",
                s.ha_max_connections, s.ha_max_untrusted_connections
            ),
            reason: format!(
                "connections not identified as replicas may hold fewer slots than there are, so that a \
                 replica always finds one ({e})"
            ),
        });
    }
    check_protected_mode(&s, warnings)?;
    remoting::check(&s, warnings, broker_id_origin.as_deref())?;
    check_combinations(&s)?;
    Ok(s)
}

/// A key given under two of its spellings (`mappedFileSizeCommitLog` and RocketMQ's legacy
/// `mapedFileSizeCommitLog`) with different values: which one was meant is not known.
fn check_aliases(raw: &BTreeMap<String, Setting>) -> Result<(), BrokerConfigError> {
    for k in SECTIONS.iter().flat_map(|s| s.keys.iter()).filter(|k| !k.aliases.is_empty()) {
        let given: Vec<(&str, &Setting)> = std::iter::once(k.name)
            .chain(k.aliases.iter().copied())
            .filter_map(|n| raw.get(n).map(|s| (n, s)))
            .collect();
        if given.windows(2).any(|w| w[0].1.value.trim() != w[1].1.value.trim()) {
            let keys: Vec<String> = given.iter().map(|(n, s)| format!("{n}={}", s.value.trim())).collect();
            return Err(BrokerConfigError::Conflict {
                keys: keys.join(" "),
                reason: format!("two spellings of one key with different values; keep {} alone", k.name),
            });
        }
    }
    Ok(())
}

/// The per-client HTTP limits an operator left unset: an eighth of the broker's connections
/// and of its in-flight body budget (the budget's share at least one `maxMessageSize`, so a
/// client can always send one message).
fn per_client_defaults(s: &mut BrokerSettings, raw: &BTreeMap<String, Setting>) {
    if !raw.contains_key("httpMaxConnectionsPerIp") {
        s.http.max_connections_per_ip = (s.http.max_connections / PER_CLIENT_SHARE).max(1);
    }
    if !raw.contains_key("httpMaxInFlightBytesPerIp") {
        let share = s.http.max_in_flight_bytes / PER_CLIENT_SHARE as u64;
        s.http.max_in_flight_bytes_per_ip =
            share.max(u64::from(s.max_message_size)).min(s.http.max_in_flight_bytes);
    }
}

/// Protected mode (like Redis's): without an allow-list or TLS, a master trusts only loopback
/// peers. A broker whose HA port would take acknowledgements from off-loopback strangers (it
/// listens off loopback, names no replica, and no etcd member directory identifies them)
/// refuses to start, unless `haTrustAnyReplica=true` opts in to RocketMQ's open admission,
/// which is warned loudly.
fn check_protected_mode(s: &BrokerSettings, warnings: &mut Vec<String>) -> Result<(), BrokerConfigError> {
    let takes_acks = s.broker_role != BrokerRole::Slave || s.controller.is_some();
    let unnamed = s.ha_replica_allow_list.is_empty() && s.master_tls.is_none();
    let on_etcd = s.controller.as_ref().is_some_and(|c| c.etcd.is_some());
    let off_loopback = !s.ha_addr().ip().is_loopback();
    if s.ha_trust_any_replica {
        warnings.push(format!(
            "haTrustAnyReplica=true: any connection to the HA port {} counts as a replica for SYNC waits \
             (RocketMQ's open admission): a stranger can turn SLAVE_NOT_AVAILABLE into PUT_OK with a forged \
             acknowledgement, and none of them can fence this master when it lost data; name the replicas \
             in haReplicaAllowList or admit them by TLS instead",
            s.ha_addr()
        ));
        return Ok(());
    }
    if takes_acks && unnamed && off_loopback && !on_etcd {
        let every = if s.ha_addr().ip().is_unspecified() { " (every interface)" } else { "" };
        return Err(BrokerConfigError::Conflict {
            keys: format!("haListenAddress={}{every} haReplicaAllowList=(unset) haTlsMode=off", s.ha_addr().ip()),
            reason: "the HA port would take acknowledgements from strangers: without an allow-list or TLS a \
                     master trusts only loopback peers (protected mode). Name the replicas in \
                     haReplicaAllowList, admit them by TLS (haTlsMode), bind the HA port to loopback \
                     (haListenAddress=127.0.0.1), or accept any replica with haTrustAnyReplica=true (RocketMQ's \
                     open admission: strangers count for SYNC waits)"
                .into(),
        });
    }
    Ok(())
}

/// `brokerId` in controller mode: required, 0 or more. RocketMQ's `-1` (ask the controller for
/// an id) has no meaning without a controller.
fn controller_broker_id(given: Option<(String, String)>) -> Result<BrokerId, BrokerConfigError> {
    let Some((v, _)) = given else {
        return Err(BrokerConfigError::Conflict {
            keys: "enableControllerMode=true brokerId=(unset)".into(),
            reason: "controller mode needs this broker's id in its group: set brokerId (0 or more); \
                     logship has no controller to assign one"
                .into(),
        });
    };
    match v.parse::<i64>() {
        Ok(id) if id >= 0 => Ok(id),
        Ok(_) => Err(invalid(
            "brokerId",
            &v,
            "0 or more in controller mode: logship has no controller to assign an id (RocketMQ's -1)",
        )),
        Err(_) => Err(invalid("brokerId", &v, "an integer, 0 or more")),
    }
}

/// The classic-only keys that cannot work in controller mode are refused, naming them;
/// `brokerRole` is ignored (the role comes from the admin calls), with a warning.
fn check_controller_mode(
    s: &BrokerSettings,
    raw: &BTreeMap<String, Setting>,
    warnings: &mut Vec<String>,
) -> Result<(), BrokerConfigError> {
    let conflict = |keys: String, reason: &str| BrokerConfigError::Conflict {
        keys: format!("enableControllerMode=true {keys}"),
        reason: reason.to_string(),
    };
    if let Some(address) = &s.ha_master_address {
        return Err(conflict(
            format!("haMasterAddress={address}"),
            "in controller mode the master to follow comes from POST /ha/changeToSlave, not from the \
             configuration: remove haMasterAddress (and --master)",
        ));
    }
    if s.total_replicas > 1 {
        return Err(conflict(
            format!("totalReplicas={}", s.total_replicas),
            "the restart fence is the classic protocol's: in controller mode a slave truncates a divergent \
             tail itself; remove totalReplicas",
        ));
    }
    if let Some(Setting { value, .. }) = raw.get("ackPolicy") {
        return Err(conflict(
            format!("ackPolicy={}", value.trim()),
            "ackPolicy is the classic protocol's; controller mode counts the sync-state-set with \
             allAckInSyncStateSet, inSyncReplicas and minInSyncReplicas",
        ));
    }
    if let Some(Setting { value, .. }) = raw.get("newSlaveStart") {
        return Err(conflict(
            format!("newSlaveStart={}", value.trim()),
            "newSlaveStart is the classic protocol's; in controller mode an empty slave asks for the last \
             segment with syncFromLastFile=true",
        ));
    }
    // A broker here is master and slave in turn: haTlsMode is its HA port's while master,
    // haTlsEnable its link's while slave.
    if s.ha_tls_mode == TlsMode::Required && !s.ha_tls_enable {
        return Err(conflict(
            "haTlsMode=required haTlsEnable=false".into(),
            "a broker in controller mode is master and slave in turn: one that requires TLS of its slaves \
             would follow its masters in plain, which they refuse if they are configured like it; set \
             haTlsEnable=true",
        ));
    }
    if s.ha_tls_enable && s.ha_tls_mode == TlsMode::Off {
        warnings.push(
            "controller mode: haTlsEnable=true with haTlsMode=off: while master this broker serves its HA \
             port in plain, and slaves with haTlsEnable=true cannot follow it; set haTlsMode"
                .to_string(),
        );
    }
    if let Some(Setting { value, origin }) = raw.get("brokerRole").filter(|v| v.origin != "default") {
        warnings.push(format!(
            "{origin}: brokerRole={} is ignored in controller mode: the role comes from POST \
             /ha/changeToMaster and POST /ha/changeToSlave",
            value.trim()
        ));
    }
    if s.http.auth_token.is_none() {
        warnings.push(
            "controller mode without httpAuthToken: the role-changing admin calls (POST /ha/...) are \
             refused until a token is set"
                .to_string(),
        );
    }
    Ok(())
}

/// `storePathCommitLog`, as RocketMQ reads it: the commit log's directory. Without
/// `storePathRootDir`, a directory named `commitlog` makes its parent the root (RocketMQ's own
/// layout); any other directory holds the segments while the root keeps the checkpoint and the
/// consume queues.
fn apply_store_path_commit_log(s: &mut BrokerSettings, root_set: bool, commit_log: &str) {
    let path = Path::new(commit_log);
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty() && path.file_name().is_some_and(|n| n == "commitlog"));
    match parent {
        Some(root) if !root_set => s.store_path_root_dir = root.to_path_buf(),
        _ if path == s.store_path_root_dir.join("commitlog") => {}
        _ => s.store_path_commit_log = Some(path.to_path_buf()),
    }
}

fn check_combinations(s: &BrokerSettings) -> Result<(), BrokerConfigError> {
    let conflict =
        |keys: String, reason: &str| BrokerConfigError::Conflict { keys, reason: reason.to_string() };
    if s.listen_port != 0 && s.listen_port == s.ha_listen_port {
        return Err(conflict(
            format!("listenPort={} haListenPort={}", s.listen_port, s.ha_listen_port),
            "the remoting port and the HA port must differ",
        ));
    }
    if s.broker_role == BrokerRole::Slave
        && s.ha_master_address.is_none()
        && s.controller.is_none()
        && s.remoting.namesrv_addr.is_empty()
    {
        return Err(conflict(
            "brokerRole=SLAVE haMasterAddress=(unset) namesrvAddr=(unset)".into(),
            "a slave needs haMasterAddress (set it in broker.conf or pass --master HOST:PORT), or \
             namesrvAddr to learn its master from the NameServer",
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
        && !s.ha_addr().ip().is_loopback()
    {
        return Err(conflict(
            format!("totalReplicas={} haReplicaAllowList=(unset) haTlsMode=off", s.total_replicas),
            "after a crash the master waits for totalReplicas - 1 named replicas, and off loopback only \
             replicas listed in haReplicaAllowList or admitted by TLS certificate are named: list the \
             slaves' addresses, or set haTlsMode",
        ));
    }
    if s.total_replicas > 1 && s.broker_role != BrokerRole::Slave {
        // Checked at load, not only after a crash: a fence that no named replica can lift would
        // otherwise stop the first start after a crash.
        let fence = s.total_replicas as usize - 1;
        if let Err(e) = s.master_service_config().admission.check_restart_fence(fence) {
            let list: Vec<String> = s.ha_replica_allow_list.iter().map(ToString::to_string).collect();
            return Err(conflict(
                format!(
                    "totalReplicas={} haReplicaAllowList={} haTlsReplicaNames={}",
                    s.total_replicas,
                    list.join(","),
                    s.ha_tls_replica_names.join(",")
                ),
                &format!(
                    "after a crash the master waits for totalReplicas - 1 replicas it names exactly: {e}"
                ),
            ));
        }
    }
    if s.ack_policy == Some(AckPolicyKey::Quorum) && s.in_sync_replicas < 2 {
        return Err(conflict(
            format!("ackPolicy=QUORUM inSyncReplicas={}", s.in_sync_replicas),
            "a quorum needs inSyncReplicas >= 2 (the master counts as one)",
        ));
    }
    let shown = |p: &Option<PathBuf>| p.as_ref().map_or("(unset)".to_string(), |p| p.display().to_string());
    if s.http.tls_cert_file.is_some() != s.http.tls_key_file.is_some()
        || (s.http.tls_client_ca_file.is_some() && s.http.tls_cert_file.is_none())
    {
        return Err(conflict(
            format!(
                "httpTlsCertFile={} httpTlsKeyFile={} httpTlsClientCaFile={}",
                shown(&s.http.tls_cert_file),
                shown(&s.http.tls_key_file),
                shown(&s.http.tls_client_ca_file)
            ),
            "HTTPS needs both a certificate and its key; client certificates need HTTPS",
        ));
    }
    if s.http.idle_timeout <= s.slave_timeout.max(s.sync_flush_timeout) {
        return Err(conflict(
            format!(
                "httpIdleTimeout={} slaveTimeout={} syncFlushTimeout={}",
                s.http.idle_timeout.as_millis(),
                s.slave_timeout.as_millis(),
                s.sync_flush_timeout.as_millis()
            ),
            "a put waiting for its slaves or its flush would be cut off: the idle timeout must be longer",
        ));
    }
    if u64::from(s.max_message_size) >= s.http.max_in_flight_bytes {
        return Err(conflict(
            format!(
                "maxMessageSize={} httpMaxInFlightBytes={}",
                s.max_message_size, s.http.max_in_flight_bytes
            ),
            "the in-flight budget must hold at least one message body",
        ));
    }
    let per_client = s.http.max_in_flight_bytes_per_ip;
    if per_client != 0 && per_client < u64::from(s.max_message_size) {
        return Err(conflict(
            format!("maxMessageSize={} httpMaxInFlightBytesPerIp={per_client}", s.max_message_size),
            "a client's in-flight budget must hold at least one message body (or be 0: no per-client budget)",
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

/// The most messages one pull may ask for (`max`), and so the largest
/// `maxTransferCountOnMessageInMemory`.
pub const MAX_PULL_COUNT: usize = 1000;

const TOKEN_RULE: &str = "expected 16 to 4096 visible ASCII characters without spaces";

/// The most bytes a secret file (`httpAuthTokenFile`, `etcdPasswordFile`) may hold.
pub const MAX_SECRET_FILE_BYTES: u64 = 64 << 10;

/// An HTTP bearer token. Empty is an error, not "no token": a key set to nothing is a mistake
/// (a template left unfilled, a variable that expanded to nothing), and reading it as "no
/// authentication" would open the port without a word.
fn auth_token(key: &str, v: &str) -> Result<String, BrokerConfigError> {
    if v.is_empty() {
        return Err(BrokerConfigError::Invalid {
            key: key.to_string(),
            value: String::new(),
            reason: "the token is empty: set a token of 16 to 4096 visible ASCII characters, or remove \
                     the key to run without authentication"
                .into(),
        });
    }
    if (16..=4096).contains(&v.len()) && v.bytes().all(|b| b.is_ascii_graphic()) {
        Ok(v.to_string())
    } else {
        // Never echo a rejected secret.
        Err(BrokerConfigError::Invalid {
            key: key.to_string(),
            value: "(hidden)".into(),
            reason: TOKEN_RULE.into(),
        })
    }
}

/// The token in `httpAuthTokenFile`: the file's text without surrounding whitespace, read up
/// to [`MAX_SECRET_FILE_BYTES`]. A file holding only whitespace is an error naming the file.
fn auth_token_file(key: &str, path: &str) -> Result<String, BrokerConfigError> {
    let invalid =
        |reason: String| BrokerConfigError::Invalid { key: key.to_string(), value: path.to_string(), reason };
    let text = read_secret_file(Path::new(path)).map_err(invalid)?;
    if text.trim().is_empty() {
        return Err(invalid(
            "the token file is empty (or holds only whitespace): write the token into it, or remove the \
             key to run without authentication"
                .into(),
        ));
    }
    auth_token(key, text.trim()).map_err(|_| invalid(TOKEN_RULE.into()))
}

/// Reads a small file holding a secret (a token, a password), at most
/// [`MAX_SECRET_FILE_BYTES`]: a larger one (or one that never ends, such as `/dev/zero`) is
/// refused with the cap named. The error never quotes the content.
pub fn read_secret_file(path: &Path) -> Result<String, String> {
    let bytes = read_capped(path, MAX_SECRET_FILE_BYTES).map_err(|e| match e {
        CappedReadError::TooLarge => {
            format!(
                "the file is larger than {} KiB, the most a secret file may hold",
                MAX_SECRET_FILE_BYTES >> 10
            )
        }
        CappedReadError::Io(e) => format!("cannot read the file: {e}"),
    })?;
    String::from_utf8(bytes).map_err(|_| "the file is not UTF-8 text".to_string())
}

/// Why [`read_capped`] failed.
#[derive(Debug)]
pub enum CappedReadError {
    /// The file holds more than the cap.
    TooLarge,
    /// The file could not be read.
    Io(std::io::Error),
}

/// The bytes of `path`, refusing a file larger than `cap` bytes without reading more than
/// `cap + 1` of them (a device that never ends, a file that grows while read).
pub fn read_capped(path: &Path, cap: u64) -> Result<Vec<u8>, CappedReadError> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(CappedReadError::Io)?;
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes).map_err(CappedReadError::Io)?;
    if bytes.len() as u64 > cap {
        return Err(CappedReadError::TooLarge);
    }
    Ok(bytes)
}

fn path_or_none(v: &str) -> Option<PathBuf> {
    (!v.is_empty()).then(|| PathBuf::from(v))
}

/// The host of a `host:port` address, without an IPv6 address's brackets.
fn address_host(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Reads the TLS files and builds the side's TLS settings: the master's with `haTlsMode` other
/// than `off`, the slave's with `haTlsEnable=true`. A classic broker has the side of its
/// `brokerRole`; a controller-mode broker, master and slave in turn, both.
fn build_tls(s: &mut BrokerSettings) -> Result<(), BrokerConfigError> {
    let controller = s.controller.is_some();
    let slave = s.ha_tls_enable && (controller || s.broker_role == BrokerRole::Slave);
    let master = s.ha_tls_mode != TlsMode::Off && (controller || s.broker_role != BrokerRole::Slave);
    let why = match (master, slave) {
        (false, false) => return Ok(()),
        (true, _) => "haTlsMode",
        (false, true) => "haTlsEnable=true",
    };
    for (key, path) in [
        ("haTlsCertPath", &s.ha_tls_cert_path),
        ("haTlsKeyPath", &s.ha_tls_key_path),
        ("haTlsCaPath", &s.ha_tls_ca_path),
    ] {
        if path.is_none() {
            return Err(BrokerConfigError::Conflict {
                keys: format!("{why} {key}=(unset)"),
                reason: "TLS needs haTlsCertPath, haTlsKeyPath and haTlsCaPath".into(),
            });
        }
    }
    let read = |key: &str, path: &Option<PathBuf>| -> Result<Vec<u8>, BrokerConfigError> {
        let path = path.clone().unwrap_or_default();
        std::fs::read(&path).map_err(|e| BrokerConfigError::Invalid {
            key: key.to_string(),
            value: path.display().to_string(),
            reason: format!("cannot read the file: {e}"),
        })
    };
    let cert = read("haTlsCertPath", &s.ha_tls_cert_path)?;
    let key = read("haTlsKeyPath", &s.ha_tls_key_path)?;
    let ca = read("haTlsCaPath", &s.ha_tls_ca_path)?;
    let pem = TlsPem { cert_chain: &cert, key: &key, ca: &ca };
    let failed = |e: logship_core::service::tls::TlsError| BrokerConfigError::Conflict {
        keys: "haTlsCertPath haTlsKeyPath haTlsCaPath haTlsReplicaNames haTlsServerName".into(),
        reason: e.to_string(),
    };
    if slave {
        let server_name = match (&s.ha_tls_server_name, controller) {
            (Some(name), _) => name.clone(),
            // Replaced by the host of each master followed (`controller_slave_config`).
            (None, true) => "localhost".to_string(),
            (None, false) => match &s.ha_master_address {
                Some(address) => address_host(address).to_string(),
                // Replaced by the host of the master each NameServer reply names.
                None => "localhost".to_string(),
            },
        };
        s.slave_tls = Some(SlaveTls::new(pem, &server_name).map_err(failed)?);
    }
    if master {
        if s.ha_tls_replica_names.is_empty() {
            return Err(BrokerConfigError::Conflict {
                keys: format!("haTlsMode={} haTlsReplicaNames=(unset)", s.ha_tls_mode),
                reason: "a TLS master trusts only certificates naming a listed replica: list them".into(),
            });
        }
        s.master_tls = Some(MasterTls::new(s.ha_tls_mode, pem, &s.ha_tls_replica_names).map_err(failed)?);
    }
    Ok(())
}

fn invalid(key: &str, value: &str, reason: &str) -> BrokerConfigError {
    BrokerConfigError::Invalid {
        key: key.to_string(),
        value: value.to_string(),
        reason: format!("expected {reason}"),
    }
}

fn number(key: &str, v: &str, min: u64, max: u64) -> Result<u64, BrokerConfigError> {
    match v.parse::<u64>() {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        _ => Err(invalid(key, v, &format!("an integer from {min} to {max}"))),
    }
}

fn millis(key: &str, v: &str) -> Result<Duration, BrokerConfigError> {
    number(key, v, 1, 24 * 3600 * 1000)
        .map(Duration::from_millis)
        .map_err(|_| invalid(key, v, "milliseconds, at least 1"))
}

fn port(key: &str, v: &str) -> Result<u16, BrokerConfigError> {
    v.parse::<u16>().map_err(|_| invalid(key, v, "a port number from 0 to 65535"))
}

/// A boolean as RocketMQ reads it (Java's `Boolean.parseBoolean`): `true` in any case is true,
/// anything else false. Never an error; `boolean_warning` flags values that are neither.
fn boolean(_key: &str, v: &str) -> Result<bool, BrokerConfigError> {
    Ok(v.eq_ignore_ascii_case("true"))
}

/// A warning when `v` is neither `true` nor `false` (in any case): Java reads it as false.
fn boolean_warning(key: &str, v: &str, origin: &str) -> Option<String> {
    (!v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false")).then(|| {
        format!(
            "{origin}: {key}={v:?} reads as false, as Java's Boolean.parseBoolean does; write true or false"
        )
    })
}

fn label_value(key: &str, v: &str) -> Result<String, BrokerConfigError> {
    if v.is_empty() || v.chars().any(|c| c.is_control()) {
        return Err(invalid(key, v, "a non-empty name without control characters"));
    }
    Ok(v.to_string())
}

fn replica_names(key: &str, v: &str) -> Result<Vec<(String, IpAddr)>, BrokerConfigError> {
    let mut out: Vec<(String, IpAddr)> = Vec::new();
    for entry in v.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let parsed = entry.split_once('@').and_then(|(name, ip)| {
            let name = name.trim();
            let ok = !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
            Some((name.to_string(), ip.trim().parse::<IpAddr>().ok()?)).filter(|_| ok)
        });
        let Some((name, ip)) = parsed else {
            return Err(invalid(key, v, "NAME@IP entries separated by ',', e.g. broker-a-s1@10.0.0.2"));
        };
        // Several names may share an IP: slaves on one host, told apart by count.
        if out.iter().any(|(n, _)| *n == name) {
            return Err(invalid(key, v, "each name at most once"));
        }
        out.push((name, ip));
    }
    Ok(out)
}

fn master_address(key: &str, v: &str) -> Result<String, BrokerConfigError> {
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

    /// The HTTP API address: `httpListenAddress`, else the remoting port's IP
    /// (`listenAddress`, else `brokerIP1`), and `httpListenPort` (default `listenPort + 2`).
    pub fn http_addr(&self) -> SocketAddr {
        SocketAddr::new(
            self.remoting.http_listen_address.unwrap_or_else(|| self.listen_ip()),
            self.http_listen_port(),
        )
    }

    /// The HA listen address: `haListenAddress`, else the remoting port's IP (`listenAddress`,
    /// else `brokerIP1`), so the ports bind the same address unless told otherwise.
    pub fn ha_addr(&self) -> SocketAddr {
        SocketAddr::new(self.ha_listen_address.unwrap_or_else(|| self.listen_ip()), self.ha_listen_port)
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
            slave_timeout: self.slave_timeout,
            restart_fence: 0,
            admission: Admission {
                allow: self.ha_replica_allow_list.clone(),
                max_connections_per_peer: self.ha_max_connections_per_peer,
                max_connections: self.ha_max_connections,
                max_untrusted_connections: self.ha_max_untrusted_connections,
                tls: self.master_tls.clone(),
                trust_any: self.ha_trust_any_replica,
            },
            controller: None,
        }
    }

    /// The master service configuration of controller mode at `epoch` with this starting
    /// sync-state-set (this broker is added); `None` outside controller mode.
    pub fn controller_master_config(
        &self,
        epoch: i32,
        sync_state_set: std::collections::BTreeSet<BrokerId>,
        sync_state_set_epoch: i32,
    ) -> Option<MasterServiceConfig> {
        let keys = self.controller.as_ref()?;
        let mut config = self.master_service_config();
        // RocketMQ's changeToMaster makes the broker a SYNC_MASTER; the sync policy decides
        // what a put waits for (inSyncReplicas=1: nothing).
        config.role = BrokerRole::SyncMaster;
        config.controller = Some(MasterControllerConfig {
            broker_id: keys.broker_id,
            epoch,
            sync_state_set,
            sync_state_set_epoch,
            sync: keys.sync_policy(),
            ha_max_time_slave_not_catchup: keys.ha_max_time_slave_not_catchup,
            authority: None,
            members: None,
            lease: None,
        });
        Some(config)
    }

    /// The slave service configuration of controller mode: follow the master at
    /// `master_address` (its HA port), broker id `master_broker_id`, elected at `master_epoch`;
    /// `None` outside controller mode. With `haTlsEnable=true` the master's certificate must
    /// carry `haTlsServerName`, or unset, the host of `master_address`; an error when that host
    /// is no DNS name or IP address.
    pub fn controller_slave_config(
        &self,
        master_address: &str,
        master_broker_id: BrokerId,
        master_epoch: i32,
    ) -> Option<Result<SlaveServiceConfig, TlsError>> {
        let keys = self.controller.as_ref()?;
        let mut config = self.slave_service_config();
        config.master_address = master_address.to_string();
        config.tls = match (&self.slave_tls, &self.ha_tls_server_name) {
            (Some(tls), None) => match tls.with_server_name(address_host(master_address)) {
                Ok(tls) => Some(tls),
                Err(e) => return Some(Err(e)),
            },
            (tls, _) => tls.clone(),
        };
        config.controller = Some(SlaveControllerConfig {
            broker_id: keys.broker_id,
            master_broker_id,
            master_epoch,
            async_learner: keys.async_learner,
            sync_from_last_file: keys.sync_from_last_file,
            drop_confirmed: keys.drop_confirmed.clone(),
        });
        Some(Ok(config))
    }

    /// Whether this is a classic slave that learns its master's HA address from the
    /// NameServers' REGISTER_BROKER replies (`namesrvAddr` set, `haMasterAddress` not), as
    /// Java's `updateMasterHAServerAddrPeriodically`; a static `haMasterAddress` wins.
    pub fn learns_master_from_name_server(&self) -> bool {
        self.broker_role == BrokerRole::Slave
            && self.controller.is_none()
            && self.ha_master_address.is_none()
            && !self.remoting.namesrv_addr.is_empty()
    }

    /// The slave service configuration following the master at `master_address` (its HA port),
    /// as a NameServer named it. With `haTlsEnable=true` the master's certificate must carry
    /// `haTlsServerName`, or unset, the host of `master_address`.
    pub fn named_master_slave_config(&self, master_address: &str) -> Result<SlaveServiceConfig, TlsError> {
        let mut config = self.slave_service_config();
        config.master_address = master_address.to_string();
        config.tls = match (&self.slave_tls, &self.ha_tls_server_name) {
            (Some(tls), None) => Some(tls.with_server_name(address_host(master_address))?),
            (tls, _) => tls.clone(),
        };
        Ok(config)
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
mod tests;
