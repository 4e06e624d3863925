//! `broker.conf`: RocketMQ's `key=value` properties format, with RocketMQ's key names, plus
//! logship's own keys. Command-line settings override the file. Every value is checked before
//! anything starts: an unknown key is a warning that names it; a bad value, or a combination
//! that cannot work, is an error that names the key and the value.

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
mod keys;
mod remoting;
mod rocketmq_keys;
pub use remoting::RemotingKeys;

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
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, BrokerConfigError> {
        broker_keys::set_store(self, key, v)
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

fn fraction(key: &str, v: &str) -> Result<f64, BrokerConfigError> {
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
    [broker_keys::FAILOVER_KEYS, broker_keys::ETCD_SECURITY_KEYS]
        .into_iter()
        .flat_map(|s| s.keys.iter())
        .map(|k| k.name)
        .filter(|&k| k != "etcdEndpoints")
}

/// The most bytes a PEM file of the etcd TLS keys may hold.
const MAX_PEM_FILE_BYTES: u64 = 1 << 20;

/// The etcd TLS and authentication keys, as given (paths and names), before their files are
/// read.
#[derive(Default)]
struct EtcdSecurityKeys {
    ca: Option<String>,
    cert: Option<String>,
    key: Option<String>,
    server_name: Option<String>,
    user: Option<String>,
    password_file: Option<String>,
}

impl EtcdSecurityKeys {
    /// Parses `key` if it is one of these; `false` if it is not.
    fn set(&mut self, key: &str, v: &str) -> Result<bool, BrokerConfigError> {
        broker_keys::set_etcd_security(self, key, v)
    }

    /// Reads and checks the files: the TLS settings (which need `https://` endpoints, and the
    /// reverse), and the credentials (a user needs a password file, and the reverse). Warnings
    /// say when etcd is reached without credentials, or with a password in clear.
    fn build(self, etcd: &mut EtcdKeys, warnings: &mut Vec<String>) -> Result<(), BrokerConfigError> {
        let conflict =
            |keys: String, reason: &str| BrokerConfigError::Conflict { keys, reason: reason.into() };
        let https = etcd.endpoints.iter().filter(|e| e.starts_with("https://")).count();
        let tls_keys =
            self.ca.is_some() || self.cert.is_some() || self.key.is_some() || self.server_name.is_some();
        if tls_keys && https != etcd.endpoints.len() {
            return Err(conflict(
                format!("etcdEndpoints={}", etcd.endpoints.join(",")),
                "the etcdTls* keys are set: every etcd endpoint must be an https:// URL",
            ));
        }
        if https > 0 && self.ca.is_none() {
            return Err(conflict(
                format!("etcdEndpoints={} etcdTlsCaPath=(unset)", etcd.endpoints.join(",")),
                "https:// endpoints need etcdTlsCaPath: the PEM file of the CA that signed etcd's certificate",
            ));
        }
        if self.cert.is_some() != self.key.is_some() {
            return Err(conflict(
                format!(
                    "etcdTlsCertPath={} etcdTlsKeyPath={}",
                    self.cert.as_deref().unwrap_or("(unset)"),
                    self.key.as_deref().unwrap_or("(unset)")
                ),
                "a client certificate needs both its certificate chain and its private key",
            ));
        }
        if let Some(ca) = &self.ca {
            let ca_pem = pem_file("etcdTlsCaPath", ca, PemKind::Certificates)?;
            let identity = match (&self.cert, &self.key) {
                (Some(cert), Some(key)) => Some((
                    pem_file("etcdTlsCertPath", cert, PemKind::Certificates)?,
                    pem_file("etcdTlsKeyPath", key, PemKind::PrivateKey)?,
                )),
                _ => None,
            };
            etcd.tls = Some(EtcdTlsKeys { ca_pem, identity, server_name: self.server_name });
        }
        match (self.user, self.password_file) {
            (None, None) => {}
            (Some(user), Some(file)) => {
                let text = read_secret_file(Path::new(&file)).map_err(|reason| {
                    BrokerConfigError::Invalid { key: "etcdPasswordFile".into(), value: file.clone(), reason }
                })?;
                let password =
                    text.strip_suffix('\n').map(|p| p.strip_suffix('\r').unwrap_or(p)).unwrap_or(&text);
                if password.is_empty() {
                    return Err(BrokerConfigError::Invalid {
                        key: "etcdPasswordFile".into(),
                        value: file,
                        reason: "the password file is empty: write etcdUser's password into it".into(),
                    });
                }
                etcd.credentials = Some(EtcdCredentialKeys { user, password: password.to_string() });
            }
            (user, file) => {
                return Err(conflict(
                    format!(
                        "etcdUser={} etcdPasswordFile={}",
                        user.as_deref().unwrap_or("(unset)"),
                        file.as_deref().unwrap_or("(unset)")
                    ),
                    "etcd's authentication needs both a user and the file holding its password",
                ));
            }
        }
        let client_certificate = etcd.tls.as_ref().is_some_and(|t| t.identity.is_some());
        if etcd.credentials.is_none() && !client_certificate {
            warnings.push(
                "etcd is reached without credentials (no etcdUser, no etcdTlsCertPath): anybody who reaches \
                 etcd can rewrite the group record and decide who is master; enable etcd's authentication \
                 or client certificates and set them here"
                    .to_string(),
            );
        }
        if etcd.credentials.is_some() && etcd.tls.is_none() {
            warnings.push(
                "etcdUser over http:// endpoints: the password and the token travel in clear; use https:// \
                 endpoints with etcdTlsCaPath"
                    .to_string(),
            );
        }
        Ok(())
    }
}

/// What a PEM file of the etcd TLS keys must hold.
#[derive(Copy, Clone)]
enum PemKind {
    Certificates,
    PrivateKey,
}

/// Reads a PEM file (at most 1 MiB) and checks it holds what `kind` says.
fn pem_file(key: &str, path: &str, kind: PemKind) -> Result<Vec<u8>, BrokerConfigError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let invalid =
        |reason: String| BrokerConfigError::Invalid { key: key.to_string(), value: path.to_string(), reason };
    let bytes = read_capped(Path::new(path), MAX_PEM_FILE_BYTES).map_err(|e| match e {
        CappedReadError::TooLarge => invalid("the file is larger than 1 MiB".into()),
        CappedReadError::Io(e) => invalid(format!("cannot read the file: {e}")),
    })?;
    match kind {
        PemKind::Certificates => {
            let certs = CertificateDer::pem_slice_iter(&bytes).collect::<Result<Vec<_>, _>>();
            if !certs.is_ok_and(|c| !c.is_empty()) {
                return Err(invalid("expected PEM certificates (-----BEGIN CERTIFICATE-----)".into()));
            }
        }
        PemKind::PrivateKey => {
            if PrivateKeyDer::from_pem_slice(&bytes).is_err() {
                return Err(invalid("expected a PEM private key (PKCS#8, PKCS#1 or SEC1)".into()));
            }
        }
    }
    Ok(bytes)
}

/// `etcdEndpoints`: comma-separated `http://host:port` URLs.
fn etcd_endpoints(key: &str, v: &str) -> Result<Vec<String>, BrokerConfigError> {
    let endpoints: Vec<String> =
        v.split(',').map(str::trim).filter(|e| !e.is_empty()).map(String::from).collect();
    for e in &endpoints {
        let rest = e.strip_prefix("http://").or_else(|| e.strip_prefix("https://"));
        if rest.is_none_or(|r| r.is_empty() || r.contains('/')) {
            return Err(invalid(key, v, "comma-separated etcd client URLs such as http://127.0.0.1:2379"));
        }
    }
    Ok(endpoints)
}

/// The failover keys against each other and the build: etcd support is the crate feature
/// `etcd`, and the lease settings must be able to fence.
fn check_etcd(etcd: &EtcdKeys) -> Result<(), BrokerConfigError> {
    if !cfg!(feature = "etcd") {
        return Err(BrokerConfigError::Unsupported {
            origin: "config".into(),
            key: "etcdEndpoints".into(),
            value: etcd.endpoints.join(","),
            reason: "this logship was built without the `etcd` feature: rebuild with \
                     `cargo build --release --features etcd` (needs protoc) for automatic failover"
                .into(),
        });
    }
    let prefix_ok = etcd.key_prefix.strip_prefix('/').is_some_and(|p| {
        p.split('/').all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_graphic()))
    });
    if !prefix_ok {
        return Err(invalid(
            "etcdKeyPrefix",
            &etcd.key_prefix,
            "a key path such as /logship: starts with `/`, printable ASCII, no empty part",
        ));
    }
    let lease = logship_core::service::coordinator::LeaseConfig {
        ttl: etcd.lease_ttl,
        margin: etcd.lease_margin,
        renew_interval: etcd.lease_renew_interval,
    };
    lease.validate().map_err(|e| BrokerConfigError::Conflict {
        keys: format!(
            "etcdLeaseTtlMs={} etcdLeaseMarginMs={} etcdLeaseRenewIntervalMs={}",
            etcd.lease_ttl.as_millis(),
            etcd.lease_margin.as_millis(),
            etcd.lease_renew_interval.as_millis()
        ),
        reason: e.to_string(),
    })
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
    broker_keys::STORE_KEYS,
    remoting::REMOTING_KEYS,
    broker_keys::HTTP_KEYS,
    broker_keys::LOGSHIP_KEYS,
    broker_keys::CONTROLLER_KEYS,
    broker_keys::FAILOVER_KEYS,
    broker_keys::ETCD_SECURITY_KEYS,
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

/// Every declared key's value and source.
fn effective(raw: &BTreeMap<String, Setting>) -> Vec<EffectiveKey> {
    let mut out = Vec::new();
    for k in SECTIONS.iter().flat_map(|s| s.keys.iter()) {
        let given = std::iter::once(k.name).chain(k.aliases.iter().copied()).find_map(|n| raw.get(n));
        let (value, source) = match (given, k.default) {
            (Some(s), _) => (s.value.clone(), s.origin.clone()),
            (None, keys::KeyDefault::Value(v)) => (v.to_string(), "default".to_string()),
            (None, keys::KeyDefault::Note(n)) => (String::new(), format!("default: {}", n.replace('`', ""))),
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

/// Java properties, read as `java.util.Properties.load(InputStream)` reads them (RocketMQ
/// loads `broker.conf` that way): bytes are ISO-8859-1; lines end at `\n`, `\r` or `\r\n`;
/// `#` and `!` start comment lines; a key ends at the first unescaped `=`, `:`, space, tab or
/// form feed; a trailing odd backslash continues a line; `\t`, `\n`, `\r`, `\f`, `\uXXXX` and
/// `\<any>` escapes. Values keep trailing whitespace, as Java's do. Two differences, both on
/// input Java mishandles: a leading UTF-8 byte order mark is dropped (Java would make it part
/// of the first key), and an empty key is an error (Java stores it under `""`).
pub fn parse_properties(
    bytes: &[u8],
    origin: &str,
) -> Result<Vec<(String, String, usize)>, BrokerConfigError> {
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let text: String = bytes.iter().map(|&b| char::from(b)).collect();
    let natural = natural_lines(&text);
    let syntax = |line: usize, text: &str| BrokerConfigError::Syntax {
        origin: origin.to_string(),
        line,
        text: text.to_string(),
        reason: None,
    };
    let mut out = Vec::new();
    let mut next = 0;
    while next < natural.len() {
        let (line, raw) = (next + 1, natural[next]);
        next += 1;
        let first = raw.trim_start_matches(is_java_space);
        if first.is_empty() || first.starts_with(['#', '!']) {
            continue;
        }
        let mut logical = first.to_string();
        while ends_with_odd_backslashes(&logical) {
            logical.pop();
            let Some(more) = natural.get(next) else { break };
            next += 1;
            logical.push_str(more.trim_start_matches(is_java_space));
        }
        let (key, value) = split_key_value(&logical);
        let bad_escape = |_| BrokerConfigError::Syntax {
            origin: origin.to_string(),
            line,
            text: raw.to_string(),
            reason: Some("malformed \\uXXXX escape: \\u needs four hex digits".into()),
        };
        let key = unescape(key).map_err(bad_escape)?;
        if key.is_empty() {
            return Err(syntax(line, raw));
        }
        out.push((key, unescape(value).map_err(bad_escape)?, line));
    }
    Ok(out)
}

/// Java's whitespace in properties files: space, tab, form feed.
fn is_java_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{c}')
}

/// Splits at `\r\n`, `\r` or `\n`, as Java's `LineReader` does.
fn natural_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        match rest.find(['\r', '\n']) {
            Some(i) => {
                lines.push(&rest[..i]);
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
            }
            None => {
                lines.push(rest);
                rest = "";
            }
        }
    }
    lines
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
            '=' | ':' => return (&line[..i], line[i + 1..].trim_start_matches(is_java_space)),
            c if is_java_space(c) => {
                let rest = line[i..].trim_start_matches(is_java_space);
                let rest =
                    rest.strip_prefix(['=', ':']).map_or(rest, |r| r.trim_start_matches(is_java_space));
                return (&line[..i], rest);
            }
            _ => {}
        }
    }
    (line, "")
}

/// Java's `loadConvert`; `Err` for a `\u` without four hex digits.
fn unescape(s: &str) -> Result<String, ()> {
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
                if hex.len() != 4 || !hex.chars().all(|h| h.is_ascii_hexdigit()) {
                    return Err(());
                }
                // Four hex digits are a UTF-16 unit; a lone surrogate becomes U+FFFD.
                let unit = u32::from_str_radix(&hex, 16).map_err(|_| ())?;
                out.push(char::from_u32(unit).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
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
        Ok(settings) => Ok(Loaded { settings, warnings, effective: effective(&raw) }),
        Err(error) => Err(LoadError { error, warnings }),
    }
}

#[cfg(test)]
fn from_map(raw: BTreeMap<String, Setting>) -> Result<Loaded, BrokerConfigError> {
    let mut warnings = Vec::new();
    let settings = build(&raw, &mut warnings)?;
    Ok(Loaded { settings, warnings, effective: effective(&raw) })
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
            flush_disk_type: self.flush_disk_type,
            slave_timeout: self.slave_timeout,
            sync_flush_timeout: self.sync_flush_timeout,
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
mod tests {
    use super::*;

    fn load_text(text: &str) -> Result<Loaded, BrokerConfigError> {
        let mut raw = BTreeMap::new();
        for (k, v, line) in parse_properties(text.as_bytes(), "broker.conf")? {
            raw.insert(k, Setting { value: v, origin: format!("broker.conf:{line}") });
        }
        from_map(raw)
    }

    #[test]
    fn properties_format_handles_comments_separators_escapes_and_continuations() {
        let text = "# comment\n! also\n\nbrokerRole = SYNC_MASTER\nlistenPort:20911\nstorePathRootDir /data/\\\n  store\nx=a\\u0041\\tb\n";
        let got = parse_properties(text.as_bytes(), "f").unwrap();
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
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        assert_eq!(s.registered_broker_id(), 0);
        assert_eq!((s.listen_port, s.http_listen_port()), (30911, 30913), "the remoting port, HTTP at + 2");
        assert_eq!((s.broker_cluster_name.as_str(), s.broker_name.as_str()), ("DefaultCluster", "broker-a"));
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
        let loaded = load_text("brokerRole=ASYNC_MASTER\nzzzUnheardOf=65536\n").unwrap();
        assert_eq!(loaded.warnings, ["broker.conf:2: unknown key zzzUnheardOf; ignored"]);
    }

    #[test]
    fn an_unknown_key_names_the_key_meant() {
        let loaded =
            load_text("brokerrole=ASYNC_MASTER\nhaTransferBatchSzie=65536\nhaMasterAdress=h:1\n").unwrap();
        assert_eq!(
            loaded.warnings,
            [
                "broker.conf:1: unknown key brokerrole; ignored (did you mean brokerRole?)",
                "broker.conf:2: unknown key haTransferBatchSzie; ignored (did you mean haTransferBatchSize?)",
                "broker.conf:3: unknown key haMasterAdress; ignored (did you mean haMasterAddress?)",
            ]
        );
    }

    #[test]
    fn the_legacy_spelling_maped_file_size_commit_log_sets_the_segment_size() {
        let loaded = load_text("mapedFileSizeCommitLog=16777216\n").unwrap();
        assert_eq!(loaded.settings.mapped_file_size_commit_log, 16 << 20);
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    }

    #[test]
    fn rocketmq_keys_logship_does_not_use_are_named_as_such() {
        let loaded =
            load_text("useReentrantLockWhenPutMessage=true\nwaitTimeMillsInSendQueue=200\n").unwrap();
        assert_eq!(
            loaded.warnings,
            [
                "broker.conf:1: RocketMQ key useReentrantLockWhenPutMessage is not used by logship; ignored",
                "broker.conf:2: RocketMQ key waitTimeMillsInSendQueue is not used by logship; ignored",
            ]
        );
    }

    /// The setters (`set<Key>`) of the classes a Java broker loads `broker.conf` into, read with
    /// `javap` from the jars in the local Maven repository.
    fn java_setters(jar: &Path, class: &str) -> Vec<String> {
        let out =
            std::process::Command::new("javap").arg("-cp").arg(jar).arg(class).output().expect("javap runs");
        assert!(out.status.success(), "javap {class}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(" void set")?.1.split_once('(').map(|(name, _)| name.to_string()))
            .map(|name| name[..1].to_ascii_lowercase() + &name[1..])
            .collect()
    }

    #[test]
    fn every_java_broker_and_store_key_of_4_9_and_5_is_known() {
        let required = std::env::var("LOGSHIP_REQUIRE_JAVA").is_ok_and(|v| !v.is_empty() && v != "0");
        let m2 = PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
            .join(".m2/repository/org/apache/rocketmq");
        let classes = [
            ("rocketmq-common", "org.apache.rocketmq.common.BrokerConfig"),
            ("rocketmq-common", "org.apache.rocketmq.common.BrokerIdentity"),
            ("rocketmq-store", "org.apache.rocketmq.store.config.MessageStoreConfig"),
            ("rocketmq-remoting", "org.apache.rocketmq.remoting.netty.NettyServerConfig"),
            ("rocketmq-remoting", "org.apache.rocketmq.remoting.netty.NettyClientConfig"),
        ];
        let mut missing = Vec::new();
        let mut read = 0;
        for version in ["4.9.7", "5.5.0"] {
            for (artifact, class) in classes {
                let jar = m2.join(format!("{artifact}/{version}/{artifact}-{version}.jar"));
                if !jar.exists() {
                    assert!(!required, "{} is missing (LOGSHIP_REQUIRE_JAVA is set)", jar.display());
                    continue;
                }
                if version == "4.9.7" && class.ends_with("BrokerIdentity") {
                    continue;
                }
                for key in java_setters(&jar, class) {
                    read += 1;
                    let declared = all_key_names().any(|k| k == key);
                    if !declared && !rocketmq_keys::is_rocketmq_key(&key) {
                        missing.push(format!("{key} ({class} {version})"));
                    }
                }
            }
        }
        if read == 0 {
            assert!(!required, "no RocketMQ jar read");
            eprintln!("skipped: no RocketMQ jars in {}", m2.display());
        }
        assert!(missing.is_empty(), "RocketMQ keys unknown to logship: {missing:?}");
    }

    #[test]
    fn every_declared_default_value_is_what_the_broker_uses() {
        let base = BrokerSettings::default();
        for k in SECTIONS.iter().flat_map(|s| s.keys.iter()) {
            let keys::KeyDefault::Value(v) = k.default else { continue };
            let raw =
                BTreeMap::from([(k.name.to_string(), Setting { value: v.into(), origin: "test".into() })]);
            let loaded = from_map(raw).unwrap_or_else(|e| panic!("{}={v}: {e}", k.name));
            let mut s = loaded.settings;
            if k.roles == keys::BROKER {
                continue;
            }
            s.controller = None;
            assert_eq!(s, base, "{}: the declared default {v:?} is not the default", k.name);
        }
        let mut c = ControllerKeys::unset();
        let mut etcd = EtcdKeys::default();
        for k in SECTIONS.iter().flat_map(|s| s.keys.iter()).filter(|k| k.roles == keys::BROKER) {
            let keys::KeyDefault::Value(v) = k.default else { continue };
            let (mut s, mut f) = (BrokerSettings::default(), Flags::default());
            assert!(
                set_broker_key(&mut s, &mut c, &mut etcd, &mut f, "test", k.name, v).unwrap(),
                "{}",
                k.name
            );
            assert_eq!((&c, &etcd), (&ControllerKeys::unset(), &EtcdKeys::default()), "{}={v}", k.name);
        }
    }

    #[test]
    fn the_configuration_reference_lists_the_declared_keys() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/configuration.md");
        let doc = std::fs::read_to_string(&path).unwrap_or_default();
        let tables = keys::markdown(SECTIONS);
        let (begin, end) =
            ("<!-- keys: generated by `logship config-keys`; do not edit -->\n", "<!-- end of keys -->");
        let inside = doc.split_once(begin).and_then(|(_, rest)| rest.split_once(end)).map(|(t, _)| t);
        assert!(
            inside == Some(tables.as_str()),
            "docs/configuration.md's key tables differ from the declarations in src/config/: run \
             `cargo run -- config-keys` and paste its output between the markers"
        );
    }

    #[test]
    fn every_boolean_key_warns_on_a_value_java_reads_as_false() {
        let loaded = load_text("autoCreateTopicEnable=yes\nhaTlsEnable=1\n").unwrap();
        assert_eq!(
            loaded.warnings,
            [
                "broker.conf:1: autoCreateTopicEnable=\"yes\" reads as false, as Java's Boolean.parseBoolean does; write true or false",
                "broker.conf:2: haTlsEnable=\"1\" reads as false, as Java's Boolean.parseBoolean does; write true or false",
            ]
        );
    }

    #[test]
    fn an_etcd_key_without_endpoints_is_named_as_the_file_first_sets_it() {
        let text = "enableControllerMode=true\nbrokerId=1\netcdLeaseTtlMs=3000\netcdKeyPrefix=/x\n";
        let loaded = load_text(text).unwrap();
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w == "broker.conf:3: etcdLeaseTtlMs has no effect without etcdEndpoints"),
            "{:?}",
            loaded.warnings
        );
    }

    #[test]
    fn controller_key_warnings_come_in_line_order() {
        let loaded = load_text("readUnCommitted=true\nallAckInSyncStateSet=true\n").unwrap();
        assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
        assert!(loaded.warnings[0].starts_with("broker.conf:1: readUnCommitted"), "{:?}", loaded.warnings);
        assert!(
            loaded.warnings[1].starts_with("broker.conf:2: allAckInSyncStateSet"),
            "{:?}",
            loaded.warnings
        );
    }

    #[test]
    fn print_config_names_each_values_source() {
        let loaded = load_text("brokerRole=SYNC_MASTER\n").unwrap();
        let text = print_effective(&loaded.effective);
        let line = |key: &str| {
            text.lines().find(|l| l.starts_with(&format!("{key}="))).unwrap_or_default().to_string()
        };
        assert!(
            line("brokerRole").starts_with("brokerRole=SYNC_MASTER")
                && line("brokerRole").ends_with("# broker.conf:1"),
            "{text}"
        );
        assert!(line("haTransferBatchSize").ends_with("# default"), "{text}");
        assert!(line("haListenPort").ends_with("# default: listenPort + 1"), "{text}");
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
    }

    #[test]
    fn slave_without_master_address_is_refused() {
        let err = load_text("brokerRole=SLAVE\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "brokerRole=SLAVE haMasterAddress=(unset) namesrvAddr=(unset): a slave needs haMasterAddress \
             (set it in broker.conf or pass --master HOST:PORT), or namesrvAddr to learn its master from the \
             NameServer"
        );
        load_text("brokerRole=SLAVE\nhaMasterAddress=10.0.0.1:10912\n").unwrap();
        let named = load_text("brokerRole=SLAVE\nnamesrvAddr=10.0.0.1:9876\nbrokerId=1\n").unwrap().settings;
        assert!(named.learns_master_from_name_server());
        assert_eq!(
            named.named_master_slave_config("10.0.0.3:10912").unwrap().master_address,
            "10.0.0.3:10912"
        );
        let fixed =
            "brokerRole=SLAVE\nnamesrvAddr=10.0.0.1:9876\nbrokerId=1\nhaMasterAddress=10.0.0.2:10912\n";
        assert!(
            !load_text(fixed).unwrap().settings.learns_master_from_name_server(),
            "a static address wins"
        );
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
        assert!(matches!(err, BrokerConfigError::Conflict { .. }), "{err}");
        let s = load_text(
            "brokerRole=SYNC_MASTER\ninSyncReplicas=2\ntotalReplicas=3\nhaReplicaAllowList=10.0.0.6, 10.0.0.7\n",
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
    fn a_configuration_file_above_the_cap_is_refused_naming_it() {
        let err = load(&[], Some(Path::new("/dev/zero")), &[]).unwrap_err().to_string();
        assert!(err.contains("/dev/zero") && err.contains("larger than 1 MiB"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let at_cap = dir.path().join("at-cap.conf");
        let mut text = "#".repeat(MAX_CONFIG_FILE_BYTES as usize - 1);
        text.push('\n');
        std::fs::write(&at_cap, &text).unwrap();
        assert!(load(&[], Some(&at_cap), &[]).is_ok(), "a file of exactly the cap is read");
        text.push('\n');
        std::fs::write(&at_cap, &text).unwrap();
        let err = load(&[], Some(&at_cap), &[]).unwrap_err().to_string();
        assert!(err.contains("at-cap.conf") && err.contains("1 MiB"), "{err}");
    }

    #[test]
    fn a_token_file_holding_no_token_or_too_much_is_refused_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        let with = |content: &[u8]| {
            std::fs::write(&file, content).unwrap();
            load_text(&format!("httpAuthTokenFile={}\n", file.display()))
        };
        let token = with(b"  0123456789abcdef\n").unwrap().settings.http.auth_token;
        assert_eq!(token.as_deref(), Some("0123456789abcdef"), "surrounding whitespace is trimmed");
        for blank in [&b""[..], b"\n", b" \t\r\n"] {
            let err = with(blank).unwrap_err().to_string();
            assert!(err.contains("httpAuthTokenFile") && err.contains("empty"), "{err}");
            assert!(err.contains(&file.display().to_string()), "{err}");
        }
        let err = with(&vec![b'a'; MAX_SECRET_FILE_BYTES as usize + 1]).unwrap_err().to_string();
        assert!(err.contains("64 KiB"), "{err}");
        let err = load_text("httpAuthTokenFile=/dev/zero\n").unwrap_err().to_string();
        assert!(err.contains("64 KiB") && !err.contains("\0"), "{err}");
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
    fn http_keys_parse_and_check_their_ranges() {
        let s = load_text(
            "listenAddress=0.0.0.0\nhaListenAddress=127.0.0.1\nhttpAuthToken=0123456789abcdef\nhttpHeaderTimeout=1500\n\
             httpBodyTimeout=2500\nhttpIdleTimeout=6500\nhttpMaxConnections=7\n\
             httpMaxInFlightBytes=8388608\nmaxTransferBytesOnMessageInMemory=1000\n\
             maxTransferCountOnMessageInMemory=3\nshutdownDrainTimeout=250\ndefaultTopicQueueNums=4\n",
        )
        .unwrap()
        .settings;
        let h = &s.http;
        assert_eq!(s.http_addr(), "0.0.0.0:10913".parse().unwrap());
        assert_eq!(h.auth_token.as_deref(), Some("0123456789abcdef"));
        assert_eq!(
            (h.header_timeout, h.body_timeout, h.idle_timeout, h.shutdown_drain_timeout),
            (
                Duration::from_millis(1500),
                Duration::from_millis(2500),
                Duration::from_millis(6500),
                Duration::from_millis(250)
            )
        );
        assert_eq!((h.max_connections, h.max_in_flight_bytes), (7, 8 << 20));
        assert_eq!((h.max_transfer_bytes, h.max_transfer_count, h.default_topic_queue_nums), (1000, 3, 4));
        // Defaults: bind brokerIP1, no token, RocketMQ's 8 queues, 256 KiB / 32 messages a pull.
        let d = load_text("brokerIP1=10.1.2.3\nhaListenAddress=127.0.0.1\n").unwrap().settings;
        assert_eq!(d.http_addr(), "10.1.2.3:10913".parse().unwrap());
        assert_eq!(d.remoting_addr(), "10.1.2.3:10911".parse().unwrap());
        assert_eq!((d.http.auth_token.clone(), d.http.default_topic_queue_nums), (None, 8));
        assert_eq!((d.http.max_transfer_bytes, d.http.max_transfer_count), (256 << 10, 32));
        // One client gets an eighth of the connections and of the in-flight budget by default.
        assert_eq!((d.http.max_connections_per_ip, d.http.max_in_flight_bytes_per_ip), (128, 32 << 20));
        assert_eq!(
            (h.max_connections_per_ip, h.max_in_flight_bytes_per_ip),
            (1, 4 << 20),
            "derived from httpMaxConnections=7 and httpMaxInFlightBytes=8 MiB: at least one message"
        );
        let set = load_text("httpMaxConnectionsPerIp=0\nhttpMaxInFlightBytesPerIp=0\n").unwrap().settings;
        assert_eq!((set.http.max_connections_per_ip, set.http.max_in_flight_bytes_per_ip), (0, 0), "0: off");
        let err = load_text("httpMaxInFlightBytesPerIp=1000\n").unwrap_err();
        assert!(
            matches!(err, BrokerConfigError::Conflict { .. }) && err.to_string().contains("maxMessageSize"),
            "{err}"
        );
        for bad in [
            "listenAddress=localhost",
            "httpMaxConnections=0",
            "defaultTopicQueueNums=0",
            "maxTransferCountOnMessageInMemory=1001",
            "httpHeaderTimeout=0",
        ] {
            let key = bad.split('=').next().unwrap();
            assert!(load_text(bad).unwrap_err().to_string().contains(key), "{bad}");
        }
        let err = load_text("httpAuthToken=hunter2\n").unwrap_err().to_string();
        assert!(err.contains("httpAuthToken") && !err.contains("hunter2"), "{err}");
        let err = load_text("httpAuthToken=\n").unwrap_err().to_string();
        assert!(err.contains("httpAuthToken") && err.contains("empty"), "{err}");
        let err = load_text("maxMessageSize=4194304\nhttpMaxInFlightBytes=4194304\n").unwrap_err();
        assert!(matches!(err, BrokerConfigError::Conflict { .. }), "{err}");
        for half in ["httpTlsCertFile=/c.pem\n", "httpTlsKeyFile=/k.pem\n", "httpTlsClientCaFile=/ca.pem\n"] {
            let err = load_text(half).unwrap_err();
            assert!(
                matches!(err, BrokerConfigError::Conflict { .. })
                    && err.to_string().contains("httpTlsCertFile"),
                "{err}"
            );
        }
        let err = load_text("httpIdleTimeout=3000\n").unwrap_err();
        assert!(
            matches!(err, BrokerConfigError::Conflict { .. }) && err.to_string().contains("syncFlushTimeout"),
            "{err}"
        );
        let tls = load_text("httpTlsCertFile=/c.pem\nhttpTlsKeyFile=/k.pem\n").unwrap().settings.http;
        assert_eq!((tls.tls_cert_file, tls.tls_client_ca_file), (Some(PathBuf::from("/c.pem")), None));
    }

    /// Parses `bytes` as Java's `Properties.load(InputStream)` would, as sorted pairs.
    fn java_pairs(bytes: &[u8]) -> Vec<(String, String)> {
        let mut map = BTreeMap::new();
        for (k, v, _) in parse_properties(bytes, "f").unwrap() {
            map.insert(k, v);
        }
        map.into_iter().collect()
    }

    fn pairs(expected: &[(&str, &str)]) -> Vec<(String, String)> {
        expected.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// Vectors produced by `java.util.Properties.load(InputStream)` (OpenJDK 17): each input's
    /// bytes, then the key/value pairs Java read from them.
    #[test]
    fn properties_parse_as_java_properties_load_does() {
        type Vector<'a> = (&'a [u8], &'a [(&'a str, &'a str)]);
        let vectors: &[Vector<'_>] = &[
            (b"k=v", &[("k", "v")]),
            (b"  k = v  \n", &[("k", "v  ")]),
            (b"k:v\nk2 v2\nk3\t=\t v3", &[("k", "v"), ("k2", "v2"), ("k3", "v3")]),
            (b"# c\n! c\n  # c2\nk=v", &[("k", "v")]),
            (b"k=a\\\n   b\\\n c", &[("k", "abc")]),
            (b"k=a\\\\\nk2=b", &[("k", "a\\"), ("k2", "b")]),
            (b"a\\=b=c", &[("a=b", "c")]),
            (b"a\\ b=c d", &[("a b", "c d")]),
            (b"k=\\u0041\\u00e9\\t\\n\\r\\f\\x\\\\", &[("k", "A\u{e9}\t\n\r\u{c}x\\")]),
            (b"k=caf\xe9", &[("k", "caf\u{e9}")]),
            (b"k", &[("k", "")]),
            (b"k=", &[("k", "")]),
            (b"k==v", &[("k", "=v")]),
            (b"k = = v", &[("k", "= v")]),
            (b"line1=a\r\nline2=b\rline3=c", &[("line1", "a"), ("line2", "b"), ("line3", "c")]),
            (b"#comment\\\nk=v", &[("k", "v")]),
            (b"k=v\\", &[("k", "v")]),
            (b"  \\ k=v", &[(" k", "v")]),
            (b"k:=v", &[("k", "=v")]),
            (b"k=v # not a comment", &[("k", "v # not a comment")]),
            (b"k=a\\\n#notcomment", &[("k", "a#notcomment")]),
            // Bytes are ISO-8859-1: UTF-8's two bytes for 'é' are two characters to Java.
            (b"k=caf\xc3\xa9", &[("k", "caf\u{c3}\u{a9}")]),
            // 0xA0 (no-break space) is not a separator to Java.
            (b"k\xa0x=v", &[("k\u{a0}x", "v")]),
        ];
        for (input, expected) in vectors {
            assert_eq!(java_pairs(input), pairs(expected), "input {:?}", String::from_utf8_lossy(input));
        }
    }

    #[test]
    fn properties_tolerate_a_utf8_byte_order_mark() {
        // Java would read the BOM into the first key; logship drops it so the key is found.
        assert_eq!(java_pairs(b"\xef\xbb\xbfbrokerRole=SLAVE\n"), pairs(&[("brokerRole", "SLAVE")]));
    }

    #[test]
    fn malformed_unicode_escape_is_an_error_naming_the_line() {
        // Java: IllegalArgumentException "Malformed \uxxxx encoding."
        for text in [&b"a=1\nk=\\u00zz\n"[..], b"a=1\nk=\\u00"] {
            let err = parse_properties(text, "broker.conf").unwrap_err();
            assert!(matches!(err, BrokerConfigError::Syntax { line: 2, .. }), "{err}");
            assert!(err.to_string().contains("\\uXXXX"), "{err}");
        }
    }

    #[test]
    fn booleans_parse_as_java_boolean_parse_boolean() {
        // Java's Boolean.parseBoolean: true only for "true" in any case.
        for (text, expected) in
            [("true", true), ("TRUE", true), ("True", true), ("false", false), ("FALSE", false)]
        {
            let loaded = load_text(&format!("slaveReadEnable={text}\n")).unwrap();
            assert_eq!(loaded.settings.slave_read_enable, expected, "{text}");
            assert!(loaded.warnings.is_empty(), "{text}: {:?}", loaded.warnings);
        }
        // Java reads anything else as false; logship does too, and says so.
        let loaded = load_text("slaveReadEnable=yes\n").unwrap();
        assert!(!loaded.settings.slave_read_enable);
        assert_eq!(loaded.warnings.len(), 1, "{:?}", loaded.warnings);
        assert!(
            loaded.warnings[0].contains("slaveReadEnable=\"yes\" reads as false"),
            "{:?}",
            loaded.warnings
        );
    }

    #[test]
    fn rocketmq_modes_logship_lacks_are_errors() {
        let key = "enableDLegerCommitLog";
        let err = load_text(&format!("brokerRole=ASYNC_MASTER\n{key}=true\n")).unwrap_err();
        assert!(matches!(err, BrokerConfigError::Unsupported { .. }), "{key}: {err}");
        assert!(err.to_string().contains(key), "{err}");
        let loaded = load_text(&format!("{key}=false\n")).unwrap();
        assert!(loaded.warnings.is_empty(), "{key}=false is RocketMQ's default: {:?}", loaded.warnings);
    }

    #[test]
    fn warnings_collected_before_an_error_are_returned_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("broker.conf");
        // A typo'd key, then the error it causes.
        std::fs::write(&path, "brokerRole=SLAVE\nhaMasterAdress=10.0.0.1:10912\n").unwrap();
        let err = load(&[], Some(&path), &[]).unwrap_err();
        assert!(err.error.to_string().contains("haMasterAddress"), "{err}");
        assert_eq!(err.warnings.len(), 1, "{:?}", err.warnings);
        assert!(err.warnings[0].contains("unknown key haMasterAdress"), "{:?}", err.warnings);
        // A warning on a key read before a bad value.
        std::fs::write(&path, "haTransferBatchSzie=65536\nlistenPort=x\n").unwrap();
        let err = load(&[], Some(&path), &[]).unwrap_err();
        assert!(err.error.to_string().contains("listenPort"), "{err}");
        assert_eq!(err.warnings.len(), 1, "{:?}", err.warnings);
        assert!(err.warnings[0].contains("haTransferBatchSzie"), "{:?}", err.warnings);
    }

    #[test]
    fn stock_slave_properties_without_ha_master_address_name_the_key_and_the_flag() {
        // RocketMQ's conf/2m-2s-async/broker-a-s.properties.
        let text = "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=1\ndeleteWhen=04\n\
                    fileReservedTime=48\nbrokerRole=SLAVE\nflushDiskType=ASYNC_FLUSH\n";
        let err = load_text(text).unwrap_err();
        let shown = err.to_string();
        assert!(shown.contains("haMasterAddress") && shown.contains("--master"), "{shown}");
    }

    #[test]
    fn config_warnings_come_in_line_order() {
        let loaded =
            load_text("zzUnknownKey=1\nuseReentrantLockWhenPutMessage=true\naaUnknownKey=2\n").unwrap();
        let lines: Vec<&str> =
            loaded.warnings.iter().map(|w| w.split(':').nth(1).unwrap_or("").trim_start()).collect();
        assert_eq!(lines[0..3], ["1", "2", "3"], "{:?}", loaded.warnings);
    }

    #[test]
    fn replica_names_parse_and_bad_ones_are_refused() {
        let s = load_text("replicaNames=broker-a-s1@10.0.0.2, broker-a-s2@10.0.0.3\n").unwrap().settings;
        assert_eq!(
            s.replica_names,
            [
                ("broker-a-s1".to_string(), "10.0.0.2".parse().unwrap()),
                ("broker-a-s2".into(), "10.0.0.3".parse().unwrap())
            ]
        );
        let s = load_text("replicaNames=s1@127.0.0.1, s2@127.0.0.1\n").unwrap().settings;
        assert_eq!(s.replica_names.len(), 2, "two slaves on one host");
        for bad in ["s1", "s1@nohost", "@10.0.0.2", "a@10.0.0.2,a@10.0.0.3", "a b@10.0.0.2"] {
            let err = load_text(&format!("replicaNames={bad}\n")).unwrap_err();
            assert!(err.to_string().contains("replicaNames"), "{bad}: {err}");
        }
    }

    #[test]
    fn store_path_commit_log_is_honoured_under_the_root_and_elsewhere() {
        let s = load_text("storePathCommitLog=/data/rmq/commitlog\n").unwrap().settings;
        assert_eq!(s.store_path_root_dir, PathBuf::from("/data/rmq"));
        let s = load_text("storePathRootDir=/data/rmq\nstorePathCommitLog=/data/rmq/commitlog\n")
            .unwrap()
            .settings;
        assert_eq!((s.store_path_root_dir, s.store_path_commit_log), (PathBuf::from("/data/rmq"), None));
        let s =
            load_text("storePathRootDir=/data/rmq\nstorePathCommitLog=/ssd/commitlog\n").unwrap().settings;
        assert_eq!(s.store_path_root_dir, PathBuf::from("/data/rmq"));
        assert_eq!(s.store_path_commit_log, Some(PathBuf::from("/ssd/commitlog")));
        assert_eq!(
            crate::server::store_config(&s).store_path_commit_log,
            Some(PathBuf::from("/ssd/commitlog"))
        );
    }

    #[test]
    fn store_path_epoch_file_reaches_the_store() {
        let s = load_text("storePathRootDir=/data/rmq\n").unwrap().settings;
        assert_eq!(crate::server::store_config(&s).store_path_epoch_file, None);
        let s = load_text("storePathEpochFile=/ssd/epochs\n").unwrap().settings;
        assert_eq!(crate::server::store_config(&s).store_path_epoch_file, Some(PathBuf::from("/ssd/epochs")));
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
    fn total_replicas_over_a_network_allow_list_is_refused_naming_the_entry() {
        let err =
            load_text("brokerRole=SYNC_MASTER\ntotalReplicas=3\nhaReplicaAllowList=10.0.0.6, 10.0.0.0/24\n")
                .unwrap_err();
        assert!(matches!(err, BrokerConfigError::Conflict { .. }), "{err}");
        assert!(err.to_string().contains("allow-list entry 10.0.0.0/24"), "{err}");
        let err =
            load_text("brokerRole=SYNC_MASTER\ntotalReplicas=3\nhaReplicaAllowList=10.0.0.6\n").unwrap_err();
        assert!(err.to_string().contains("name 1"), "{err}");
        load_text(
            "brokerRole=SYNC_MASTER\ntotalReplicas=3\nhaReplicaAllowList=10.0.0.6, 10.0.0.7, 10.0.0.0/24\n",
        )
        .unwrap();
        load_text("brokerRole=SYNC_MASTER\ntotalReplicas=3\nhaReplicaAllowList=127.0.0.1\n").unwrap();
    }

    #[test]
    fn total_replicas_needs_named_replicas() {
        // On loopback (protected mode) each loopback replica is named while it is connected.
        load_text("brokerRole=SYNC_MASTER\ntotalReplicas=2\n").unwrap();
        let opt_in =
            "brokerRole=SYNC_MASTER\ntotalReplicas=2\nhaListenAddress=10.0.0.5\nhaTrustAnyReplica=true\n";
        let err = load_text(opt_in).unwrap_err();
        assert!(err.to_string().contains("haReplicaAllowList"), "{err}");
    }

    #[test]
    fn listen_port_is_the_remoting_port_and_http_moves_to_its_own_key() {
        let s = load_text("listenPort=20911\n").unwrap().settings;
        assert_eq!(
            (s.remoting_addr().port(), s.ha_listen_port, s.http_addr().port(), s.fast_remoting_addr()),
            (20911, 20912, 20913, None)
        );
        let s = load_text(
            "listenPort=20911\nhttpListenPort=8088\nfastListenPort=20909\nhttpListenAddress=0.0.0.0\n",
        )
        .unwrap()
        .settings;
        assert_eq!(s.http_addr(), "0.0.0.0:8088".parse().unwrap());
        assert_eq!(s.fast_remoting_addr(), Some("127.0.0.1:20909".parse().unwrap()));
        assert_eq!(
            s.remoting_addr(),
            "127.0.0.1:20911".parse().unwrap(),
            "listenAddress, not httpListenAddress"
        );
        let any = load_text("listenPort=0\n").unwrap().settings;
        assert_eq!((any.ha_listen_port, any.http_listen_port()), (0, 0), "any port: each on any port");
        for (text, keys) in [
            ("listenPort=20911\nhttpListenPort=20912\n", "haListenPort=20912 httpListenPort=20912"),
            ("listenPort=20911\nhttpListenPort=20911\n", "listenPort=20911 httpListenPort=20911"),
            ("listenPort=20911\nfastListenPort=20913\n", "httpListenPort=20913 fastListenPort=20913"),
        ] {
            let err = load_text(text).unwrap_err().to_string();
            assert!(err.starts_with(keys), "{text:?}: {err}");
        }
        assert!(load_text("listenPort=65534\n").unwrap_err().to_string().contains("httpListenPort"));
    }

    #[test]
    fn registration_keys_parse_and_a_registering_slave_needs_its_broker_id() {
        let s = load_text(
            "namesrvAddr=10.0.0.1:9876; 10.0.0.2:9876;\nregisterNameServerPeriod=5000\nbrokerIP2=10.0.0.9\n\
             brokerRole=SLAVE\nhaMasterAddress=10.0.0.3:10912\nbrokerId=2\n",
        )
        .unwrap()
        .settings;
        assert_eq!(s.remoting.namesrv_addr, ["10.0.0.1:9876", "10.0.0.2:9876"]);
        assert_eq!(
            s.remoting.register_name_server_period,
            Duration::from_secs(10),
            "clamped as Java clamps it"
        );
        assert_eq!(s.ha_server_addr(), "10.0.0.9:10912".parse().unwrap());
        assert_eq!(s.registered_broker_id(), 2);
        let err = load_text("namesrvAddr=10.0.0.1:9876\nbrokerRole=SLAVE\nhaMasterAddress=10.0.0.3:10912\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("brokerId=(unset)") && err.contains("1 or more"), "{err}");
        for bad in
            ["namesrvAddr=10.0.0.1", "namesrvAddr=:9876", "namesrvAddr=a:b", "brokerId=-1", "brokerId=x"]
        {
            assert!(load_text(&format!("{bad}\n")).is_err(), "{bad}");
        }
        let m = load_text("brokerId=3\n").unwrap();
        assert_eq!(m.settings.registered_broker_id(), 0, "a master registers as 0");
        assert!(m.warnings.iter().any(|w| w.contains("brokerId=3 on a master")), "{:?}", m.warnings);
        let b = m.settings.broker_crate_settings();
        assert_eq!((b.broker_id, b.listen_port, b.version()), (0, 10911, 513));
        let v4 = load_text("rocketmqLine=4.9\nautoCreateTopicEnable=false\n")
            .unwrap()
            .settings
            .broker_crate_settings();
        assert_eq!((v4.version(), v4.auto_create_topic_enable), (407, false));
    }

    #[test]
    fn acl_is_off_by_default_and_its_file_key_takes_a_path() {
        let d = load_text("").unwrap().settings;
        assert_eq!((d.remoting.acl_enable, d.remoting.acl_file.clone()), (false, None));
        let on = load_text("aclEnable=true\naclFile=/etc/logship/plain_acl.yml\n").unwrap().settings;
        assert!(on.remoting.acl_enable);
        let file = on.remoting.acl_file.as_deref();
        assert_eq!(file, Some(std::path::Path::new("/etc/logship/plain_acl.yml")));
        let e = load_text("aclFile= \n").unwrap_err().to_string();
        assert!(e.contains("aclFile") && e.contains("plain_acl.yml"), "{e}");
        let maybe = load_text("aclEnable=maybe\n").unwrap().settings;
        assert!(!maybe.remoting.acl_enable, "Java's Boolean.parseBoolean: off");
    }

    #[test]
    fn a_master_whose_ha_port_would_count_strangers_refuses_to_start_unless_told_otherwise() {
        for text in ["brokerIP1=10.0.0.5\n", "brokerIP1=10.0.0.5\nlistenAddress=0.0.0.0\n"] {
            let err = load_text(text).unwrap_err();
            let shown = err.to_string();
            for key in ["haListenAddress", "haReplicaAllowList", "haTlsMode", "haTrustAnyReplica=true"] {
                assert!(shown.contains(key), "{text:?}: names {key}: {shown}");
            }
        }
        // The opt-in starts it, warned loudly.
        let loaded = load_text("brokerIP1=10.0.0.5\nhaTrustAnyReplica=true\n").unwrap();
        assert_eq!(loaded.settings.ha_addr(), "10.0.0.5:10912".parse().unwrap());
        assert!(loaded.settings.master_service_config().admission.trust_any);
        assert!(
            loaded
                .warnings
                .iter()
                .any(|w| w.contains("haTrustAnyReplica=true") && w.contains("10.0.0.5:10912")),
            "{:?}",
            loaded.warnings
        );
        // A slave takes no acknowledgements.
        load_text("brokerIP1=10.0.0.5\nbrokerRole=SLAVE\nhaMasterAddress=10.0.0.6:10912\n").unwrap();
        // The strangers' share of slots must leave room for replicas.
        let err = load_text("haMaxConnections=8\nhaMaxUntrustedConnections=8\n").unwrap_err();
        assert!(err.to_string().contains("haMaxUntrustedConnections"), "{err}");
        let small = load_text("haMaxConnections=8\n").unwrap().settings;
        assert_eq!(small.master_service_config().admission.max_untrusted_connections, 7);
        let loaded = load_text("listenAddress=0.0.0.0\nhaListenAddress=127.0.0.1\n").unwrap();
        assert_eq!(loaded.settings.ha_addr().ip(), IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert!(
            loaded.warnings.iter().all(|w| w.starts_with("the remoting port listens on 0.0.0.0:10911")),
            "only the open remoting port is warned about: {:?}",
            loaded.warnings
        );
        let loaded = load_text("haListenAddress=0.0.0.0\nhaReplicaAllowList=10.0.0.7\n").unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
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
        let err = load_text(&missing).unwrap_err();
        assert!(matches!(err, BrokerConfigError::Invalid { ref key, .. } if key == "haTlsCaPath"), "{err}");
        assert!(err.to_string().contains("/nonexistent/ca.pem"), "{err}");
        let swapped = text.replace("cert.pem", "ca.pem.tmp").replace("key.pem", "cert.pem");
        std::fs::copy(dir.path().join("ca.pem"), dir.path().join("ca.pem.tmp")).unwrap();
        assert!(load_text(&swapped).unwrap_err().to_string().contains("key"), "a certificate is no key");
        assert!(load_text("haTlsMode=on\n").unwrap_err().to_string().contains("haTlsMode"));
        let err = load_text("totalReplicas=2\nhaListenAddress=10.0.0.5\nhaTrustAnyReplica=true\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("haReplicaAllowList") && err.contains("haTlsMode"), "{err}");
    }
    const ETCD_BASE: &str = "enableControllerMode=true\nbrokerId=2\nhttpAuthToken=0123456789abcdef\n";

    #[cfg(feature = "etcd")]
    #[test]
    fn failover_keys_read_with_their_defaults_and_the_unclean_election_warns() {
        let loaded =
            load_text(&format!("{ETCD_BASE}etcdEndpoints=http://127.0.0.1:2379, http://127.0.0.1:2479\n"))
                .unwrap();
        let etcd = loaded.settings.controller.unwrap().etcd.expect("failover on");
        assert_eq!(etcd.endpoints, ["http://127.0.0.1:2379", "http://127.0.0.1:2479"]);
        assert_eq!(
            etcd,
            EtcdKeys { endpoints: etcd.endpoints.clone(), ..EtcdKeys::default() },
            "prefix /logship, 3 s lease, 500 ms margin, 1 s renewals, 1 s requests, no unclean election"
        );
        let text = format!(
            "{ETCD_BASE}etcdEndpoints=http://e:2379\netcdKeyPrefix=/a/b\netcdLeaseTtlMs=5000\n\
             etcdLeaseMarginMs=1000\netcdLeaseRenewIntervalMs=1500\netcdRequestTimeoutMs=700\n\
             enableElectUncleanMaster=true\n"
        );
        let loaded = load_text(&text).unwrap();
        let etcd = loaded.settings.controller.unwrap().etcd.unwrap();
        assert_eq!(
            (etcd.key_prefix.as_str(), etcd.lease_ttl, etcd.lease_margin, etcd.lease_renew_interval),
            ("/a/b", Duration::from_secs(5), Duration::from_secs(1), Duration::from_millis(1500))
        );
        assert_eq!((etcd.request_timeout, etcd.elect_unclean_master), (Duration::from_millis(700), true));
        assert!(loaded.warnings.iter().any(|w| w.contains("LOST")), "{:?}", loaded.warnings);
    }

    #[cfg(feature = "etcd")]
    #[test]
    fn failover_keys_that_cannot_fence_or_address_etcd_are_refused_naming_them() {
        let err =
            |more: &str| load_text(&format!("{ETCD_BASE}etcdEndpoints=http://e:2379\n{more}")).unwrap_err();
        for (more, names) in [
            ("etcdLeaseTtlMs=2500\n", "etcdLeaseTtlMs=2500"),
            ("etcdLeaseMarginMs=3000\n", "etcdLeaseMarginMs=3000"),
            ("etcdLeaseRenewIntervalMs=2500\n", "etcdLeaseRenewIntervalMs=2500"),
            ("etcdKeyPrefix=logship\n", "etcdKeyPrefix"),
            ("etcdKeyPrefix=/a//b\n", "etcdKeyPrefix"),
        ] {
            let e = err(more);
            assert!(e.to_string().contains(names), "{more}: {e}");
        }
        let e = load_text(&format!("{ETCD_BASE}etcdEndpoints=127.0.0.1:2379\n")).unwrap_err();
        assert!(matches!(&e, BrokerConfigError::Invalid { key, .. } if key == "etcdEndpoints"), "{e}");
    }

    /// A CA certificate, and a client certificate and key it signed, as PEM files in `dir`.
    #[cfg(feature = "etcd")]
    fn etcd_pem_files(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["broker-1".to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        let files = (dir.join("ca.pem"), dir.join("client.pem"), dir.join("client.key"));
        std::fs::write(&files.0, ca.pem()).unwrap();
        std::fs::write(&files.1, cert.pem()).unwrap();
        std::fs::write(&files.2, key.serialize_pem()).unwrap();
        files
    }

    #[cfg(feature = "etcd")]
    #[test]
    fn etcd_tls_and_authentication_keys_read_their_files_and_refuse_what_cannot_work() {
        let dir = tempfile::tempdir().unwrap();
        let (ca, cert, key) = etcd_pem_files(dir.path());
        let password = dir.path().join("etcd.password");
        std::fs::write(&password, "s3cret pass\n").unwrap();
        let tls = format!(
            "etcdTlsCaPath={}\netcdTlsCertPath={}\netcdTlsKeyPath={}\n",
            ca.display(),
            cert.display(),
            key.display()
        );
        let auth = format!("etcdUser=logship\netcdPasswordFile={}\n", password.display());
        let https = "etcdEndpoints=https://127.0.0.1:2379\n";
        let loaded = load_text(&format!("{ETCD_BASE}{https}{tls}{auth}etcdTlsServerName=etcd-1\n")).unwrap();
        let etcd = loaded.settings.controller.unwrap().etcd.unwrap();
        let t = etcd.tls.as_ref().expect("TLS");
        assert_eq!(t.ca_pem, std::fs::read(&ca).unwrap());
        assert_eq!(t.identity.as_ref().map(|(c, _)| c.clone()), Some(std::fs::read(&cert).unwrap()));
        assert_eq!(t.server_name.as_deref(), Some("etcd-1"));
        let c = etcd.credentials.as_ref().expect("credentials");
        assert_eq!((c.user.as_str(), c.password.as_str()), ("logship", "s3cret pass"), "the line break goes");
        assert!(!format!("{c:?}").contains("s3cret"), "the password is never shown");
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        // No credentials at all, or a password in clear: warned about.
        let plain = load_text(&format!("{ETCD_BASE}etcdEndpoints=http://e:2379\n")).unwrap();
        assert!(plain.warnings.iter().any(|w| w.contains("without credentials")), "{:?}", plain.warnings);
        let clear = load_text(&format!("{ETCD_BASE}etcdEndpoints=http://e:2379\n{auth}")).unwrap();
        assert!(clear.warnings.iter().any(|w| w.contains("in clear")), "{:?}", clear.warnings);
        // Refused, naming the keys.
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n").unwrap();
        let cases = [
            (format!("etcdEndpoints=http://e:2379\n{tls}"), "https://"),
            (https.to_string(), "etcdTlsCaPath"),
            (
                format!("{https}etcdTlsCaPath={}\netcdTlsCertPath={}\n", ca.display(), cert.display()),
                "etcdTlsKeyPath",
            ),
            (format!("{https}etcdTlsCaPath={}\n", key.display()), "etcdTlsCaPath"),
            (
                format!(
                    "{https}etcdTlsCaPath={}\netcdTlsCertPath={}\netcdTlsKeyPath={}\n",
                    ca.display(),
                    cert.display(),
                    cert.display()
                ),
                "etcdTlsKeyPath",
            ),
            (format!("{https}etcdTlsCaPath=/nonexistent/ca.pem\n"), "etcdTlsCaPath"),
            ("etcdEndpoints=http://e:2379\netcdUser=logship\n".to_string(), "etcdPasswordFile"),
            (format!("etcdEndpoints=http://e:2379\netcdPasswordFile={}\n", password.display()), "etcdUser"),
            (
                format!("etcdEndpoints=http://e:2379\netcdUser=u\netcdPasswordFile={}\n", empty.display()),
                "empty",
            ),
            ("etcdEndpoints=http://e:2379\netcdUser=u\netcdPasswordFile=/dev/zero\n".to_string(), "64 KiB"),
        ];
        for (more, names) in cases {
            let e = load_text(&format!("{ETCD_BASE}{more}")).unwrap_err().to_string();
            assert!(e.contains(names), "{more}: {e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
    }

    #[cfg(not(feature = "etcd"))]
    #[test]
    fn failover_without_the_etcd_feature_is_a_config_error_naming_the_feature() {
        let e = load_text(&format!("{ETCD_BASE}etcdEndpoints=http://127.0.0.1:2379\n")).unwrap_err();
        assert!(matches!(&e, BrokerConfigError::Unsupported { key, .. } if key == "etcdEndpoints"), "{e}");
        assert!(e.to_string().contains("--features etcd"), "{e}");
    }

    #[test]
    fn failover_keys_without_their_mode_warn() {
        let loaded = load_text("etcdEndpoints=http://127.0.0.1:2379\n").unwrap();
        assert!(loaded.warnings.iter().any(|w| w.contains("etcdEndpoints") && w.contains("controller-mode")));
        let loaded = load_text(&format!("{ETCD_BASE}etcdLeaseTtlMs=5000\n")).unwrap();
        assert!(loaded.settings.controller.unwrap().etcd.is_none());
        assert!(
            loaded.warnings.iter().any(|w| w.contains("etcdLeaseTtlMs has no effect without etcdEndpoints"))
        );
    }

    #[test]
    fn controller_mode_reads_its_keys_with_javas_defaults() {
        let s = load_text("enableControllerMode=true\nbrokerId=2\nhttpAuthToken=0123456789abcdef\n")
            .unwrap()
            .settings;
        let c = s.controller.clone().expect("controller mode");
        assert_eq!(c.broker_id, 2);
        assert_eq!(
            c.sync_policy(),
            SyncPolicy { all_ack_in_sync_state_set: false, in_sync_replicas: 1, min_in_sync_replicas: 1 }
        );
        assert_eq!(c.ha_max_time_slave_not_catchup, Duration::from_millis(15_000));
        assert!(!c.async_learner && !c.sync_from_last_file && !c.read_uncommitted);
        assert!(crate::server::store_config(&s).dispatch_up_to_confirm, "consumers read below confirmOffset");
        let text = "enableControllerMode=true\nbrokerId=3\nallAckInSyncStateSet=true\ninSyncReplicas=2\n\
                    minInSyncReplicas=2\nhaMaxTimeSlaveNotCatchup=4000\nasyncLearner=true\n\
                    syncFromLastFile=true\nreadUnCommitted=true\nstorePathEpochFile=/ssd/epochs\n";
        let s = load_text(text).unwrap().settings;
        let c = s.controller.clone().unwrap();
        assert_eq!(
            c.sync_policy(),
            SyncPolicy { all_ack_in_sync_state_set: true, in_sync_replicas: 2, min_in_sync_replicas: 2 }
        );
        assert_eq!(c.ha_max_time_slave_not_catchup, Duration::from_secs(4));
        assert!(c.async_learner && c.sync_from_last_file && c.read_uncommitted);
        let store = crate::server::store_config(&s);
        assert!(!store.dispatch_up_to_confirm);
        assert_eq!(store.store_path_epoch_file, Some(PathBuf::from("/ssd/epochs")));
        let m = s.controller_master_config(3, [1].into(), 1).unwrap();
        let mc = m.controller.clone().unwrap();
        assert_eq!(
            (m.role, mc.broker_id, mc.epoch, mc.sync),
            (BrokerRole::SyncMaster, 3, 3, c.sync_policy())
        );
        assert_eq!(mc.ha_max_time_slave_not_catchup, Duration::from_secs(4));
        assert!(m.validate().is_ok(), "{:?}", m.validate());
        let sl = s.controller_slave_config("127.0.0.1:10912", 1, 3).unwrap().unwrap();
        let sc = sl.controller.clone().unwrap();
        assert_eq!((sc.broker_id, sc.master_broker_id, sc.master_epoch), (3, 1, 3));
        assert!(sc.async_learner && sc.sync_from_last_file);
        assert_eq!(sl.master_address, "127.0.0.1:10912");
        // Classic mode has none of it.
        let classic = load_text("").unwrap().settings;
        assert!(classic.controller.is_none() && classic.controller_master_config(1, [].into(), 1).is_none());
        assert!(!crate::server::store_config(&classic).dispatch_up_to_confirm);
    }

    #[test]
    fn the_truncation_override_and_the_adoption_key_reach_the_slave_and_the_store() {
        let base = "enableControllerMode=true\nbrokerId=2\nhttpAuthToken=0123456789abcdef\n";
        let s = load_text(base).unwrap().settings;
        let store = crate::server::store_config(&s);
        assert!(store.require_epoch_file, "controller mode needs the epoch file");
        assert_eq!(store.adopt_log_without_epochs, None);
        let sl = s.controller_slave_config("127.0.0.1:10912", 1, 3).unwrap().unwrap();
        assert_eq!(sl.controller.unwrap().drop_confirmed, None, "never below the confirmOffset by default");
        let text = format!("{base}haSlaveDropConfirmed=516000-774000\nadoptLogWithoutEpochs=1828\n");
        let s = load_text(&text).unwrap().settings;
        let sl = s.controller_slave_config("127.0.0.1:10912", 1, 3).unwrap().unwrap();
        assert_eq!(sl.controller.unwrap().drop_confirmed, Some(516_000..774_000));
        assert_eq!(crate::server::store_config(&s).adopt_log_without_epochs, Some(1828));
        for bad in
            ["haSlaveDropConfirmed=774000-516000", "haSlaveDropConfirmed=5-5", "haSlaveDropConfirmed=516000"]
        {
            let e = load_text(&format!("{base}{bad}\n")).unwrap_err();
            assert!(e.to_string().contains("haSlaveDropConfirmed"), "{bad}: {e}");
        }
        let classic = load_text("haSlaveDropConfirmed=1-2\n").unwrap();
        assert!(!crate::server::store_config(&classic.settings).require_epoch_file);
        assert!(
            classic.warnings.iter().any(|w| w.contains("haSlaveDropConfirmed")),
            "{:?}",
            classic.warnings
        );
    }

    #[test]
    fn controller_mode_keys_are_range_checked() {
        for bad in [
            "minInSyncReplicas=0",
            "minInSyncReplicas=65",
            "haMaxTimeSlaveNotCatchup=0",
            "haMaxTimeSlaveNotCatchup=soon",
            "brokerId=x",
            "brokerId=-1",
        ] {
            let key = bad.split('=').next().unwrap();
            let err = load_text(&format!("enableControllerMode=true\nbrokerId=1\n{bad}\n")).unwrap_err();
            assert!(matches!(err, BrokerConfigError::Invalid { .. }), "{bad}: {err}");
            assert!(err.to_string().contains(key), "{bad}: {err}");
        }
        let err = load_text("enableControllerMode=true\nbrokerId=-1\n").unwrap_err();
        assert!(err.to_string().contains("no controller"), "RocketMQ's -1 is explained: {err}");
    }

    #[test]
    fn controller_mode_needs_a_broker_id() {
        let err = load_text("enableControllerMode=true\n").unwrap_err();
        assert!(matches!(err, BrokerConfigError::Conflict { .. }), "{err}");
        assert!(err.to_string().contains("brokerId=(unset)"), "{err}");
    }

    #[test]
    fn controller_mode_refuses_classic_keys_naming_them() {
        for (line, key) in [
            ("haMasterAddress=10.0.0.1:10912", "haMasterAddress"),
            ("totalReplicas=2\nhaReplicaAllowList=10.0.0.1", "totalReplicas"),
            ("ackPolicy=ANY_SLAVE", "ackPolicy"),
            ("newSlaveStart=LAST_FILE", "newSlaveStart"),
        ] {
            let err = load_text(&format!("enableControllerMode=true\nbrokerId=1\n{line}\n")).unwrap_err();
            assert!(matches!(err, BrokerConfigError::Conflict { .. }), "{line}: {err}");
            let shown = err.to_string();
            assert!(shown.contains("enableControllerMode=true") && shown.contains(key), "{line}: {shown}");
        }
    }

    /// A controller-mode broker is master and slave in turn: one set of `haTls*` keys gives
    /// it both sides, whatever `brokerRole` says.
    #[test]
    fn controller_mode_takes_tls_keys_for_both_roles() {
        let dir = tempfile::tempdir().unwrap();
        let files = tls_files(dir.path());
        let base = "enableControllerMode=true\nbrokerId=1\nbrokerRole=SLAVE\nhaTlsReplicaNames=replica-a, replica-b\n";
        let text = format!("{base}haTlsMode=required\nhaTlsEnable=true\n{files}");
        let loaded = load_text(&text).unwrap();
        let tls_warnings: Vec<_> = loaded.warnings.iter().filter(|w| w.contains("haTls")).collect();
        assert!(tls_warnings.is_empty(), "{tls_warnings:?}");
        let s = loaded.settings;
        let m = s.controller_master_config(2, [1].into(), 1).unwrap();
        let tls = m.admission.tls.as_ref().expect("master TLS in controller mode");
        assert_eq!(
            (tls.mode(), tls.replica_names()),
            (TlsMode::Required, vec!["replica-a".into(), "replica-b".into()])
        );
        // Without haTlsServerName the master's certificate must carry the host it is followed at.
        for (address, host) in
            [("10.0.0.5:10912", "10.0.0.5"), ("[::1]:10912", "::1"), ("b.example:10912", "b.example")]
        {
            let sl = s.controller_slave_config(address, 2, 2).unwrap().unwrap();
            assert_eq!(
                sl.tls.expect("slave TLS in controller mode").server_name().to_str(),
                host,
                "{address}"
            );
        }
        // With it, every master followed must carry that one name (the group's).
        let named = load_text(&format!("{text}haTlsServerName=ha.group-a.test\n")).unwrap().settings;
        for address in ["10.0.0.5:10912", "b.example:10912"] {
            let sl = named.controller_slave_config(address, 2, 2).unwrap().unwrap();
            assert_eq!(sl.tls.unwrap().server_name().to_str(), "ha.group-a.test", "{address}");
        }
        // Missing or unreadable files are refused at start, naming the key.
        let no_cert: String =
            files.lines().filter(|l| !l.starts_with("haTlsCertPath")).map(|l| format!("{l}\n")).collect();
        for missing in [
            format!("{base}haTlsMode=required\nhaTlsEnable=true\n{no_cert}"),
            format!("{base}haTlsMode=optional\n{no_cert}"),
            format!("{base}haTlsMode=off\nhaTlsEnable=true\n{no_cert}"),
            format!(
                "{base}haTlsMode=required\nhaTlsEnable=true\n{no_cert}haTlsCertPath=/nonexistent/cert.pem\n"
            ),
        ] {
            let err = load_text(&missing).unwrap_err().to_string();
            assert!(err.contains("haTlsCertPath"), "{missing}: {err}");
        }
        // A master that requires TLS and a slave that would connect in plain cannot be one broker.
        let err = load_text(&format!("{base}haTlsMode=required\n{files}")).unwrap_err().to_string();
        assert!(err.contains("haTlsMode=required") && err.contains("haTlsEnable"), "{err}");
        let half = load_text(&format!("{base}haTlsEnable=true\n{files}")).unwrap();
        assert!(half.settings.controller_master_config(2, [1].into(), 1).unwrap().admission.tls.is_none());
        assert!(
            half.warnings.iter().any(|w| w.contains("haTlsEnable=true with haTlsMode=off")),
            "{:?}",
            half.warnings
        );
        let migrating =
            load_text(&format!("{base}haTlsMode=optional\nhaReplicaAllowList=10.0.0.7\n{files}")).unwrap();
        assert!(
            migrating
                .settings
                .controller_slave_config("10.0.0.5:10912", 2, 2)
                .unwrap()
                .unwrap()
                .tls
                .is_none()
        );
    }

    #[test]
    fn a_stock_rocketmq_controller_conf_loads_and_warns_about_what_it_ignores() {
        // Shaped like RocketMQ's conf/controller broker files (brokerRole=SLAVE and all).
        let text = "brokerClusterName=DefaultCluster\nbrokerName=broker-a\nbrokerId=1\nbrokerRole=SLAVE\n\
                    deleteWhen=04\nfileReservedTime=48\nenableControllerMode=true\nallAckInSyncStateSet=true\n\
                    listenPort=30911\n";
        let loaded = load_text(text).unwrap();
        assert!(loaded.settings.controller.as_ref().is_some_and(|c| c.all_ack_in_sync_state_set));
        let warnings = loaded.warnings.join("\n");
        assert!(warnings.contains("brokerRole=SLAVE is ignored in controller mode"), "{warnings}");
        assert!(warnings.contains("httpAuthToken"), "admin calls need a token: {warnings}");
    }

    #[test]
    fn controller_keys_without_controller_mode_are_warnings() {
        let loaded = load_text("allAckInSyncStateSet=true\nminInSyncReplicas=2\nbrokerId=1\n").unwrap();
        assert!(loaded.settings.controller.is_none());
        let warnings = loaded.warnings.join("\n");
        for key in ["allAckInSyncStateSet", "minInSyncReplicas", "brokerId"] {
            assert!(warnings.contains(key), "{key}: {warnings}");
        }
        assert!(load_text("enableControllerMode=false\n").unwrap().warnings.is_empty());
    }
}
