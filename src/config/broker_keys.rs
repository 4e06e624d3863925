//! The broker's keys, each declared once (see [`super::keys`]): name, default, the
//! subcommands that read it, a one-line doc and its parser.

use std::path::PathBuf;

use logship_core::{AckOn, BrokerRole, FlushDiskType, NewSlaveStart};

use super::keys::{ALL, BROKER, MASTER, SLAVE, declare_keys};
use super::*;

declare_keys! {
    pub(super) fn set_rocketmq(s: &mut BrokerSettings, c: &mut ControllerKeys, etcd: &mut EtcdKeys, f: &mut Flags, origin: &str; key, v);
    pub(super) const ROCKETMQ_KEYS = "RocketMQ broker and store keys";
    "brokerRole", MASTER | SLAVE, Value "ASYNC_MASTER",
        "`ASYNC_MASTER`, `SYNC_MASTER` or `SLAVE`"
        => {
                s.broker_role = match v {
                    "ASYNC_MASTER" => BrokerRole::AsyncMaster,
                    "SYNC_MASTER" => BrokerRole::SyncMaster,
                    "SLAVE" => BrokerRole::Slave,
                    _ => return Err(invalid(key, v, "ASYNC_MASTER, SYNC_MASTER or SLAVE")),
                }
            };
    "flushDiskType", ALL, Value "ASYNC_FLUSH",
        "`SYNC_FLUSH`: a put waits until its bytes are on disk (group commit)"
        => {
                s.flush_disk_type = match v {
                    "ASYNC_FLUSH" => FlushDiskType::AsyncFlush,
                    "SYNC_FLUSH" => FlushDiskType::SyncFlush,
                    _ => return Err(invalid(key, v, "ASYNC_FLUSH or SYNC_FLUSH")),
                }
            };
    "storePathRootDir", ALL, Note "`~/store`",
        "where the store lives (`commitlog/`, `consumequeue/`, `checkpoint`, `abort`, and `restartFence` while a restart fence is up)"
        => {
                if v.is_empty() {
                    return Err(invalid(key, v, "a directory"));
                }
                s.store_path_root_dir = PathBuf::from(v);
            };
    "brokerIP1", ALL, Value "127.0.0.1",
        "the address written into messages (`storeHost`, with `listenPort`) and message ids, registered with the NameServer, and the default bind address of every port (see [Security](security.md))"
        => s.broker_ip1 = v.parse().map_err(|_| invalid(key, v, "an IP address"))?;
    "listenPort", ALL, Value "10911",
        "the remoting port, as in RocketMQ: where RocketMQ clients connect and what the NameServer routes them to (bound on `listenAddress`, see [Remoting port](security.md#remoting-port))"
        => s.listen_port = port(key, v)?;
    "haListenPort", ALL, Note "`listenPort + 1`",
        "the HA port slaves connect to"
        => {
                s.ha_listen_port = port(key, v)?;
                f.ha_port_set = true;
            };
    "haMasterAddress", SLAVE, Note "—",
        "where a slave connects (`host:port`); unset with `namesrvAddr` set, a slave (`brokerId` ≥ 1) takes its master's `haServerAddr` from the NameServers' REGISTER_BROKER replies and follows it when a reply names another, as Java does; a static address wins"
        => {
                s.ha_master_address = if v.is_empty() { None } else { Some(master_address(key, v)?) };
            };
    "mappedFileSizeCommitLog" | "mapedFileSizeCommitLog", ALL, Value "1073741824",
        "segment size; must be equal on master and slaves"
        => s.mapped_file_size_commit_log = number(key, v, 4096, 1 << 31)?;
    "haSendHeartbeatInterval", ALL, Value "5000",
        "heartbeat (master) and report (slave) interval (milliseconds)"
        => s.ha_send_heartbeat_interval = millis(key, v)?;
    "haHousekeepingInterval", ALL, Value "20000",
        "a connection without a complete report (master side) or frame (slave side) this long is closed; trickled bytes are not progress (milliseconds)"
        => s.ha_housekeeping_interval = millis(key, v)?;
    "haTransferBatchSize", ALL, Value "32768",
        "largest frame body (at most 4 MiB − 12, what a RocketMQ slave can read)"
        => {
                s.ha_transfer_batch_size =
                    number(key, v, 1, u64::from(logship_core::MAX_JAVA_FRAME_BODY))? as u32
            };
    "haMaxGapNotInSync" | "haSlaveFallbehindMax", ALL, Value "268435456",
        "a slave further behind is not in sync"
        => {
                s.ha_max_gap_not_in_sync = number(key, v, 1, i64::MAX as u64)?
            };
    "slaveTimeout", MASTER | BROKER, Value "3000",
        "how long a SYNC_MASTER put waits for slaves (milliseconds)"
        => s.slave_timeout = millis(key, v)?;
    "syncFlushTimeout", ALL, Value "5000",
        "how long a SYNC_FLUSH put waits for the disk (milliseconds)"
        => s.sync_flush_timeout = millis(key, v)?;
    "flushIntervalCommitLog", ALL, Value "500",
        "as in RocketMQ: how often ASYNC_FLUSH flushes (milliseconds)"
        => s.flush_interval_commit_log = millis(key, v)?;
    "maxMessageSize", ALL, Value "4194304",
        "as in RocketMQ: the largest message, in bytes (4 MiB)"
        => s.max_message_size = number(key, v, 1, i32::MAX as u64)? as u32;
    "inSyncReplicas", ALL, Value "1",
        "quorum size, counting the master (RocketMQ 5.x; see `totalReplicas`). In controller mode, when `allAckInSyncStateSet=false`: copies a put waits for, the master counting as one (`1`: no wait)"
        => s.in_sync_replicas = number(key, v, 1, 64)? as u32;
    "brokerId", ALL, Note "`0` for a master",
        "controller mode: this broker's id in its group (0 or more), required: RocketMQ asks its controller for one (`-1`), logship has no controller. Outside controller mode: a slave's id, 1 or more and distinct in its group; required on a slave with `namesrvAddr` (the NameServer keys a group's brokers by id)"
        => f.broker_id = Some((v.to_string(), origin.to_string()));
    "enableDLegerCommitLog", ALL, Value "false",
        "`true` is an error: logship does not implement DLedger, and would not do what the file asks"
        => if boolean(key, v)? {
            return Err(BrokerConfigError::Unsupported {
                origin: origin.to_string(),
                key: key.to_string(),
                value: v.to_string(),
                reason: "logship does not implement DLedger (Raft) commit logs; use master/slave HA".into(),
            });
        };
    "totalReplicas", MASTER, Value "1",
        "quorum size, counting the master (RocketMQ 5.x); after a crash a master with `totalReplicas = N` takes no puts until `N - 1` distinct replicas it names exactly have reported (one may hold bytes the crash lost); the fence is recorded in the store (`restartFence`) until it lifts, so a master stopped cleanly while fenced is fenced again when it starts. `totalReplicas > 1` needs at least `N - 1` named replicas: loopback replicas in protected mode (each while connected), address entries of `haReplicaAllowList` (network entries do not count) or `haTlsReplicaNames`; otherwise the broker refuses to start, naming the network entry (see [Security](security.md))"
        => s.total_replicas = number(key, v, 1, 64)? as u32;
    "fileReservedTime", ALL, Value "72",
        "retention: how long a commit-log segment is kept after its last write (hours)"
        => s.file_reserved_time = number(key, v, 1, 24 * 365 * 10)? as u32;
    "deleteWhen", ALL, Value "04",
        "retention: the hours of day (`;`-separated) expired segments are deleted at"
        => {
                let ok = !v.is_empty() && v.split(';').all(|h| h.trim().parse::<u32>().is_ok_and(|h| h < 24));
                if !ok {
                    return Err(invalid(key, v, "hours of day separated by ';', e.g. 04"));
                }
                s.delete_when = v.to_string();
            };
    "diskMaxUsedSpaceRatio", ALL, Value "75",
        "retention: above this used share of the disk, expired segments are deleted at once (percent)"
        => s.disk_max_used_space_ratio = number(key, v, 10, 95)? as u32;
    "slaveReadEnable", SLAVE | BROKER, Value "false",
        "whether a slave serves reads"
        => s.slave_read_enable = boolean(key, v)?;
    "accessMessageInMemoryMaxRatio", ALL, Value "40",
        "as in RocketMQ: above this backlog (percent of memory), pulls answer suggestPullingFromSlave (percent)"
        => {
                s.access_message_in_memory_max_ratio = number(key, v, 0, 100)? as u32
            };
    "maxTransferBytesOnMessageInMemory", ALL, Value "262144",
        "the most message bytes and messages one pull returns (the first message always comes, however large, so a consumer progresses)"
        => s.http.max_transfer_bytes = number(key, v, 1, 1 << 30)?;
    "maxTransferCountOnMessageInMemory", ALL, Value "32",
        "the most message bytes and messages one pull returns (the first message always comes, however large, so a consumer progresses)"
        => {
                s.http.max_transfer_count = number(key, v, 1, MAX_PULL_COUNT as u64)? as usize
            };
    "defaultTopicQueueNums", ALL, Value "8",
        "queues per topic (1 to 1024): a put or pull naming a `queueId` at or beyond it is refused with 400, as RocketMQ refuses it"
        => s.http.default_topic_queue_nums = number(key, v, 1, 1024)? as u32;
    "storePathCommitLog", ALL, Note "`storePathRootDir/commitlog`",
        "the directory of the commit log's segments. Without `storePathRootDir`, a directory named `commitlog` makes its parent the root (RocketMQ's layout); elsewhere, the segments live there while the checkpoint and consume queues stay under `storePathRootDir`"
        => f.store_path_commit_log = (!v.is_empty()).then(|| v.to_string());
    "storePathEpochFile", ALL, Note "`storePathRootDir/epochFileCheckpoint`",
        "the epoch file of controller mode (RocketMQ's format: entry count, CRC, `epoch-startOffset` lines), with a `.bak` copy beside it; each is written whole (temporary file, fsync, rename, directory fsync), and an emptied list is written too"
        => s.store_path_epoch_file = (!v.is_empty()).then(|| PathBuf::from(v));
    "brokerClusterName", ALL, Value "DefaultCluster",
        "the `cluster` and `broker_name` labels on every metric"
        => s.broker_cluster_name = label_value(key, v)?;
    "brokerName", ALL, Note "the host name",
        "the `cluster` and `broker_name` labels on every metric"
        => s.broker_name = label_value(key, v)?;
    "enableControllerMode", ALL, Value "false",
        "`true`: controller mode, the AutoSwitch protocol (run `logship broker`, which sets it; see [Controller mode](controller.md#controller-mode)). `logship master` and `logship slave` refuse it"
        => f.controller_mode = boolean(key, v)?;
}

declare_keys! {
    pub(super) fn set_controller(s: &mut BrokerSettings, c: &mut ControllerKeys, etcd: &mut EtcdKeys, f: &mut Flags, origin: &str; key, v);
    pub(super) const CONTROLLER_KEYS = "Controller mode";
    "allAckInSyncStateSet", BROKER, Value "false",
        "controller mode: a put waits for every member of the sync-state-set"
        => c.all_ack_in_sync_state_set = boolean(key, v)?;
    "minInSyncReplicas", BROKER, Value "1",
        "controller mode: a put to a sync-state-set smaller than this is stored and answered `IN_SYNC_REPLICAS_NOT_ENOUGH` (1 to 64)"
        => c.min_in_sync_replicas = number(key, v, 1, 64)? as u32;
    "haMaxTimeSlaveNotCatchup", BROKER, Value "15000",
        "controller mode: a member behind the master for this long leaves the sync-state-set (milliseconds)"
        => c.ha_max_time_slave_not_catchup = millis(key, v)?;
    "asyncLearner", BROKER, Value "false",
        "controller mode, as a slave: replicate without ever joining the sync-state-set; as an empty slave, ask only for the master's last segment"
        => c.async_learner = boolean(key, v)?;
    "syncFromLastFile", BROKER, Value "false",
        "controller mode, as a slave: replicate without ever joining the sync-state-set; as an empty slave, ask only for the master's last segment"
        => c.sync_from_last_file = boolean(key, v)?;
    "readUnCommitted", BROKER, Value "false",
        "controller mode: index replicated messages into the consume queues at once, not only below the confirmOffset"
        => c.read_uncommitted = boolean(key, v)?;
}

declare_keys! {
    pub(super) fn set_failover(s: &mut BrokerSettings, c: &mut ControllerKeys, etcd: &mut EtcdKeys, f: &mut Flags, origin: &str; key, v);
    pub(super) const FAILOVER_KEYS = "Failover on etcd";
    "etcdEndpoints", BROKER, Note "—",
        "controller mode: comma-separated etcd client URLs (`http://host:port`); set, the broker fails over automatically (see [Automatic failover on etcd](controller.md#automatic-failover-on-etcd)). Needs a build with `--features etcd`, else a config error saying so"
        => etcd.endpoints = etcd_endpoints(key, v)?;
    "etcdKeyPrefix", BROKER, Value "/logship",
        "failover: where the group's keys live (`<prefix>/<brokerClusterName>/<brokerName>/...`)"
        => etcd.key_prefix = v.to_string();
    "etcdLeaseTtlMs", BROKER, Value "3000",
        "failover: this broker's etcd lease (whole seconds); a dead master is replaced once it expires (milliseconds)"
        => etcd.lease_ttl = millis(key, v)?;
    "etcdLeaseMarginMs", BROKER, Value "500",
        "failover: a master stops acknowledging this long before its lease could expire (milliseconds)"
        => etcd.lease_margin = millis(key, v)?;
    "etcdLeaseRenewIntervalMs", BROKER, Value "1000",
        "failover: how often the lease is renewed (below TTL minus margin) (milliseconds)"
        => etcd.lease_renew_interval = millis(key, v)?;
    "etcdRequestTimeoutMs", BROKER, Value "1000",
        "failover: how long one etcd request may take (milliseconds)"
        => etcd.request_timeout = millis(key, v)?;
    "enableElectUncleanMaster", BROKER, Value "false",
        "failover (RocketMQ's name): when no member of the sync-state-set is live, elect another broker anyway, losing the acknowledged messages it lacks (a loud warning at start and at the election)"
        => etcd.elect_unclean_master = boolean(key, v)?;
}

declare_keys! {
    pub(super) fn set_logship(s: &mut BrokerSettings, c: &mut ControllerKeys, etcd: &mut EtcdKeys, f: &mut Flags, origin: &str; key, v);
    pub(super) const LOGSHIP_KEYS = "logship's own keys";
    "newSlaveStart", SLAVE, Value "EARLIEST",
        "where an empty slave starts: `EARLIEST` (the master's min offset: the whole log) or `LAST_FILE` (RocketMQ: the start of the master's last segment)"
        => {
                s.new_slave_start = match v {
                    "EARLIEST" => NewSlaveStart::Earliest,
                    "LAST_FILE" => NewSlaveStart::LastFile,
                    _ => return Err(invalid(key, v, "EARLIEST or LAST_FILE")),
                }
            };
    "slaveAckOn", SLAVE | BROKER, Value "WRITTEN",
        "when a slave acknowledges: `WRITTEN` (in its page cache, RocketMQ) or `FLUSHED` (on its disk; durable acks, same wire format)"
        => {
                s.slave_ack_on = match v {
                    "WRITTEN" => AckOn::Written,
                    "FLUSHED" => AckOn::Flushed,
                    _ => return Err(invalid(key, v, "WRITTEN or FLUSHED")),
                }
            };
    "ackPolicy", MASTER, Note "`QUORUM` when `inSyncReplicas >= 2`, else `ANY_SLAVE`",
        "how a SYNC_MASTER put counts slaves: `ANY_SLAVE` (one slave, RocketMQ 4.x), `QUORUM` (`inSyncReplicas` copies counting the master, RocketMQ 5.x; needs `inSyncReplicas >= 2`), `ALL_IN_SYNC` (every in-sync slave). Unset: `QUORUM` when `inSyncReplicas >= 2`, else `ANY_SLAVE`"
        => {
                s.ack_policy = Some(match v {
                    "ANY_SLAVE" => AckPolicyKey::AnySlave,
                    "QUORUM" => AckPolicyKey::Quorum,
                    "ALL_IN_SYNC" => AckPolicyKey::AllInSync,
                    _ => return Err(invalid(key, v, "ANY_SLAVE, QUORUM or ALL_IN_SYNC")),
                })
            };
    "replicaNames", MASTER | BROKER, Note "—",
        "on a master, `NAME@IP` entries (comma-separated) naming the slaves it expects, e.g. `broker-a-s1@10.0.0.2,broker-a-s2@10.0.0.3`. An IP may carry several names (slaves on one host, e.g. `s1@127.0.0.1,s2@127.0.0.1`): its connections take them in turn, oldest first, since a plain HA link carries no identity. `/status`, `/metrics` and `logship status` show each slave by name (else by IP; a second slave on one IP as `IP#2`), keep showing every slave seen since start while it is away (in sync 0), and count it as expected until `logship status --forget NAME` (`POST /ha/forgetReplica`)"
        => s.replica_names = replica_names(key, v)?;
    "haSlaveDropConfirmed", BROKER, Note "unset",
        "controller mode, slave: `POINT-CONFIRM`, the one range of confirmed bytes a truncation may drop, exactly as a refusal names it (see [Epochs](controller.md#epochs-in-controller-mode)). Unset: a slave never truncates below its confirmOffset"
        => c.drop_confirmed = offset_range(key, v)?;
    "adoptLogWithoutEpochs", BROKER, Note "unset",
        "controller mode: the end offset of a store without an epoch file (one from the classic mode) to take as it is, once; only that exact end matches"
        => {
                c.adopt_log_without_epochs =
                    if v.is_empty() { None } else { Some(number(key, v, 1, i64::MAX as u64)?) }
            };
    "haListenAddress", ALL, Note "`listenAddress`",
        "the HA port's bind address. Unset: the remoting port's (`listenAddress`, else `brokerIP1`). A master listening off loopback without `haReplicaAllowList`, `haTlsMode` or etcd refuses to start (protected mode), unless `haTrustAnyReplica=true`"
        => {
                s.ha_listen_address = if v.is_empty() {
                    None
                } else {
                    Some(v.parse().map_err(|_| invalid(key, v, "an IP address to bind the HA port to"))?)
                }
            };
    "haReplicaAllowList", ALL, Note "empty",
        "comma-separated replica addresses or CIDR networks (`10.0.0.7, 10.1.0.0/16`). Set: only these may connect to the HA port, and they are identified (count, and fence). Empty, without TLS: protected mode, only loopback peers connect and are identified. Only an address entry (no prefix, `/32` or `/128`) names a replica for the restart fence; a network admits and trusts any host on it (see [trust.md](trust.md))"
        => {
                s.ha_replica_allow_list = logship_core::service::parse_allow_list(v).map_err(|e| {
                    invalid(key, v, &format!("comma-separated IP addresses or CIDR networks ({e})"))
                })?
            };
    "haMaxConnectionsPerPeer", ALL, Value "8",
        "live HA connections per source address (identified loopback peers exempt) and in all"
        => s.ha_max_connections_per_peer = number(key, v, 1, 65_535)? as usize;
    "haMaxConnections", ALL, Value "64",
        "live HA connections per source address (identified loopback peers exempt) and in all"
        => s.ha_max_connections = number(key, v, 1, 65_535)? as usize;
    "haMaxUntrustedConnections", ALL, Note "`16` (below `haMaxConnections`)",
        "live HA connections not identified as replicas (strangers, and those still negotiating TLS or to be identified by their handshake), in all; must be below `haMaxConnections`, so replicas always find a slot. A newcomer over a limit displaces the least trusted connection within it"
        => {
                s.ha_max_untrusted_connections = number(key, v, 1, 65_535)? as usize;
                f.untrusted_set = true;
            };
    "haTrustAnyReplica", ALL, Value "false",
        "`true`: RocketMQ's open admission: any connection that would be a stranger is admitted and counts for SYNC waits (a stranger can turn `SLAVE_NOT_AVAILABLE` into `PUT_OK`), though none can fence or lift the restart fence. Warned at start and in `/status`"
        => s.ha_trust_any_replica = boolean(key, v)?;
    "haFirstReportTimeout", ALL, Value "10000",
        "a new HA connection without a complete first report this long is closed (milliseconds)"
        => s.ha_first_report_timeout = millis(key, v)?;
    "haSlaveMaxFirstOffset", ALL, Note "`1152921504606846976` (2^60)",
        "the largest first offset an empty slave adopts from its master; a larger one is refused (`FirstOffsetTooLarge`)"
        => s.ha_slave_max_first_offset = number(key, v, 1, i64::MAX as u64)?;
    "haTlsMode", MASTER | BROKER, Value "off",
        "master (in controller mode: while master): TLS on the HA port (see [HA links over TLS](security.md#ha-links-over-tls)). `off`: plain links only (RocketMQ's protocol). `optional`: TLS and plain links; a TLS slave is trusted by its certificate, a plain one follows `haReplicaAllowList`. `required`: TLS only; plain connections are closed unread"
        => {
                s.ha_tls_mode = v.parse().map_err(|_| invalid(key, v, "off, optional or required"))?
            };
    "haTlsEnable", SLAVE | BROKER, Value "false",
        "slave (in controller mode: while slave): connect to the master over TLS"
        => s.ha_tls_enable = boolean(key, v)?;
    "haTlsCertPath", ALL, Note "—",
        "with TLS, either side: PEM files of this broker's certificate chain, its private key (PKCS#8, PKCS#1 or SEC1), and the CA the other side's certificate must chain to. Read and checked at start"
        => s.ha_tls_cert_path = path_or_none(v);
    "haTlsKeyPath", ALL, Note "—",
        "with TLS, either side: PEM files of this broker's certificate chain, its private key (PKCS#8, PKCS#1 or SEC1), and the CA the other side's certificate must chain to. Read and checked at start"
        => s.ha_tls_key_path = path_or_none(v);
    "haTlsCaPath", ALL, Note "—",
        "with TLS, either side: PEM files of this broker's certificate chain, its private key (PKCS#8, PKCS#1 or SEC1), and the CA the other side's certificate must chain to. Read and checked at start"
        => s.ha_tls_ca_path = path_or_none(v);
    "haTlsReplicaNames", MASTER | BROKER, Note "—",
        "master, with TLS: comma-separated replica names (`replica-a, replica-b`, DNS names or IP addresses); a client certificate must carry one as a subject alternative name. Required with `haTlsMode` other than `off`"
        => {
                s.ha_tls_replica_names =
                    v.split(',').map(str::trim).filter(|n| !n.is_empty()).map(String::from).collect()
            };
    "haTlsServerName", SLAVE | BROKER, Note "the host of `haMasterAddress`; in controller mode, of the address each master is followed at",
        "slave, with TLS: the name (DNS or IP) the master's certificate must carry. In controller mode set it to a name every broker's certificate carries (the group's), or leave it unset and give each certificate the host it is followed at (see [TLS in controller mode](security.md#tls-in-controller-mode))"
        => s.ha_tls_server_name = (!v.is_empty()).then(|| v.to_string());
}

declare_keys! {
    pub(super) fn set_http(s: &mut BrokerSettings, c: &mut ControllerKeys, etcd: &mut EtcdKeys, f: &mut Flags, origin: &str; key, v);
    pub(super) const HTTP_KEYS = "HTTP port";
    "httpAuthToken", ALL, Note "unset (no authentication)",
        "the bearer token every HTTP request must carry: 16 to 4096 visible ASCII characters; never echoed in errors. Set but empty is a configuration error, not \"no authentication\" (remove the key for that)"
        => s.http.auth_token = Some(auth_token(key, v)?);
    "httpAuthTokenFile", ALL, Note "unset",
        "a file holding the token (surrounding whitespace trimmed, at most 64 KiB); a file holding nothing but whitespace is a configuration error naming it; set one of the two"
        => {
                s.http.auth_token = Some(auth_token_file(key, v)?);
                f.token_file_set = true;
            };
    "httpHeaderTimeout", ALL, Value "10000",
        "a request header must be complete this long after the connection opens or the previous response ends (idle keep-alive connections close then too) (milliseconds)"
        => s.http.header_timeout = millis(key, v)?;
    "httpBodyTimeout", ALL, Value "30000",
        "a request body must be complete this long after its header (else 408, connection closed) (milliseconds)"
        => s.http.body_timeout = millis(key, v)?;
    "httpIdleTimeout", ALL, Value "60000",
        "a connection that moves no byte either way for this long is closed, even mid-request (must exceed `syncFlushTimeout` and `slaveTimeout`) (milliseconds)"
        => s.http.idle_timeout = millis(key, v)?;
    "httpMaxConnections", ALL, Value "1024",
        "open HTTP connections; one beyond is answered 503 and closed"
        => s.http.max_connections = number(key, v, 1, 1 << 20)? as usize;
    "httpMaxConnectionsPerIp", ALL, Note "an eighth of `httpMaxConnections` (`128`), at least 1",
        "the same, per client IP, so one stranger cannot take every connection (`0`: no per-client limit; behind a proxy, whose clients share its IP, set it 0 or high)"
        => s.http.max_connections_per_ip = number(key, v, 0, 1 << 20)? as usize;
    "shutdownDrainTimeout", ALL, Value "5000",
        "how long SIGTERM waits for open requests before closing them (milliseconds)"
        => s.http.shutdown_drain_timeout = millis(key, v)?;
    "httpTlsCertFile", ALL, Note "unset (plain HTTP)",
        "PEM certificate chain and private key: the port speaks HTTPS only"
        => s.http.tls_cert_file = (!v.is_empty()).then(|| PathBuf::from(v));
    "httpTlsKeyFile", ALL, Note "unset (plain HTTP)",
        "PEM certificate chain and private key: the port speaks HTTPS only"
        => s.http.tls_key_file = (!v.is_empty()).then(|| PathBuf::from(v));
    "httpTlsClientCaFile", ALL, Note "unset (no client certificates)",
        "PEM CA certificates: clients must present a certificate one of them signed (needs `httpTlsCertFile`)"
        => s.http.tls_client_ca_file = (!v.is_empty()).then(|| PathBuf::from(v));
    "httpMaxInFlightBytes", ALL, Value "268435456",
        "request and response body bytes held at once; must exceed `maxMessageSize`"
        => s.http.max_in_flight_bytes = number(key, v, 1, 1 << 40)?;
    "httpMaxInFlightBytesPerIp", ALL, Note "an eighth of `httpMaxInFlightBytes` (`33554432`), at least `maxMessageSize`",
        "the same, per client IP: one client's stalled bodies and pulls hold at most this (`0`: no per-client budget; else at least `maxMessageSize`)"
        => s.http.max_in_flight_bytes_per_ip = number(key, v, 0, 1 << 40)?;

}
