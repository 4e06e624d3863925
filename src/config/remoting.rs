//! The remoting port's keys (what RocketMQ clients and NameServers see), the NameServer
//! registration keys, and where the HTTP port moved (`httpListenPort`).

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use logship_broker::RocketmqLine;

use super::keys::{ALL, declare_keys};
use super::{BrokerConfigError, BrokerSettings, boolean, invalid, millis, number, port};

/// The remoting port and registration, as the keys set them (docs/configuration.md's "Remoting port"
/// table).
#[derive(Clone, Debug, PartialEq)]
pub struct RemotingKeys {
    /// `listenAddress`: the IP the remoting port binds (and, by default, the HTTP and HA ports);
    /// unset, `brokerIP1`.
    pub listen_address: Option<IpAddr>,
    /// `fastListenPort`: a second remoting port, RocketMQ's VIP channel (`listenPort - 2` in
    /// Java), for clients up to 4.4.0 that send there; 0 (the default): none.
    pub fast_listen_port: u16,
    /// `httpListenPort`: the HTTP API, metrics and status page; unset, `listenPort + 2` (0 when
    /// `listenPort` is 0).
    pub http_listen_port: Option<u16>,
    /// `httpListenAddress`: the IP the HTTP port binds; unset, `listenAddress`'s.
    pub http_listen_address: Option<IpAddr>,
    /// `namesrvAddr`: NameServers, `host:port` separated by `;` (RocketMQ's format).
    pub namesrv_addr: Vec<String>,
    /// `registerNameServerPeriod` (30000 ms, at least 10000 ms as in Java).
    pub register_name_server_period: Duration,
    /// `registerBrokerTimeoutMills` (6000 ms): one registration's limit.
    pub register_broker_timeout: Duration,
    /// `brokerIP2`: the host of the HA address registered (`haServerAddr`); unset, `brokerIP1`.
    pub broker_ip2: Option<IpAddr>,
    /// `brokerId` outside controller mode: 0 for a master (Java forces it), 1 or more for a
    /// slave (required with `namesrvAddr`: the NameServer keys a group's brokers by id).
    pub broker_id: Option<i64>,
    /// `autoCreateTopicEnable` (true).
    pub auto_create_topic_enable: bool,
    /// `autoCreateSubscriptionGroup` (true).
    pub auto_create_subscription_group: bool,
    /// `rocketmqLine`: `5` (the default: answer as RocketMQ 5.5.0 does) or `4.9` (as 4.9.7).
    pub rocketmq_line: RocketmqLine,
    /// `regionId` (`DefaultRegion`) and `traceOn` (true): what every send answer carries.
    pub region_id: String,
    /// See `region_id`.
    pub trace_on: bool,
    /// `brokerPermission` (6): 4 read, 2 write.
    pub broker_permission: i32,
    /// `remotingMaxConnections` (1024): client connections in all; more are closed at accept.
    pub max_connections: usize,
    /// `remotingMaxConnectionsPerIp` (unset: an eighth of `remotingMaxConnections`; 0: none).
    pub max_connections_per_ip: usize,
    /// `remotingMaxInFlightPerConnection` (1024): requests one connection may have in flight
    /// (held pulls included); more are answered `SYSTEM_BUSY`.
    pub max_in_flight_per_connection: usize,
    /// `remotingMaxInFlight` (16384): requests in flight in all.
    pub max_in_flight: usize,
    /// `remotingMaxInFlightBytes` (256 MiB): request bytes in flight in all.
    pub max_in_flight_bytes: u64,
    /// `remotingFrameMaxLength` (16 MiB, Java's `com.rocketmq.remoting.frameMaxLength`).
    pub frame_max_length: usize,
    /// `serverChannelMaxIdleTimeSeconds` (120 s, Java's key): a connection without traffic and
    /// with nothing in flight this long is closed.
    pub idle_timeout: Duration,
    /// `remotingFrameTimeout` (30000 ms): a frame begun must arrive within this long.
    pub frame_timeout: Duration,
    /// `remotingWriteTimeout` (30000 ms): answers a client does not read for this long close
    /// its connection.
    pub write_timeout: Duration,
    /// `remotingMaxQueuedBytes` (64 MiB): answers waiting for a slow client beyond which its
    /// requests are no longer read.
    pub max_queued_bytes: usize,
    /// `messageIndexEnable` (true): keep RocketMQ's message index (`index/`) for `QUERY_MESSAGE`.
    pub message_index_enable: bool,
    /// `maxHashSlotNum` (5,000,000) and `maxIndexNum` (20,000,000): the index files' sizes, as
    /// RocketMQ's (a Java broker on the same store must use the same).
    pub max_hash_slot_num: u32,
    /// See `max_hash_slot_num`.
    pub max_index_num: u32,
    /// `aclEnable` (false, Java's key): check every remoting request against RocketMQ ACL 1.0.
    pub acl_enable: bool,
    /// `aclFile`: the `plain_acl.yml` read with `aclEnable` (Java's `-Drocketmq.acl.plain.file`,
    /// which is relative to `ROCKETMQ_HOME`); unset, `plain_acl.yml` in the broker's config
    /// directory (`storePathRootDir/config`).
    pub acl_file: Option<std::path::PathBuf>,
    /// `longPollingEnable` (true): a pull that finds nothing is held for the client's
    /// `suspendTimeoutMillis`; false, for `shortPollingTimeMills`.
    pub long_polling_enable: bool,
    /// `shortPollingTimeMills` (1000 ms).
    pub short_polling_time_mills: i64,
    /// `offsetCheckInSlave` (false): a slave corrects out-of-range pull offsets
    /// (`PULL_OFFSET_MOVED`) instead of answering `PULL_RETRY_IMMEDIATELY`.
    pub offset_check_in_slave: bool,
    /// `litePullMessageEnable` (true): serve `LITE_PULL_MESSAGE`.
    pub lite_pull_message_enable: bool,
    /// `notifyConsumerIdsChangedEnable` (true): tell a group's consumers when its members change.
    pub notify_consumer_ids_changed_enable: bool,
    /// `channelExpiredTimeout` (120000 ms): a client without a heartbeat this long is dropped
    /// and its connection closed (checked every 10 s).
    pub channel_expired_timeout: Duration,
    /// `slaveSyncInterval` (10000 ms, logship's key: Java fixes `SlaveSynchronize` at 10 s):
    /// how often a slave fetches its master's topics, offsets and subscription groups.
    pub slave_sync_interval: Duration,
    /// `slaveSyncMasterAddress` (logship's key): the master's remoting `host:port` a slave
    /// syncs metadata from; unset, the `masterAddr` of the NameServer's reply, as in Java.
    pub slave_sync_master_address: Option<String>,
}

impl Default for RemotingKeys {
    fn default() -> Self {
        Self {
            listen_address: None,
            fast_listen_port: 0,
            http_listen_port: None,
            http_listen_address: None,
            namesrv_addr: Vec::new(),
            register_name_server_period: Duration::from_secs(30),
            register_broker_timeout: Duration::from_secs(6),
            broker_ip2: None,
            broker_id: None,
            auto_create_topic_enable: true,
            auto_create_subscription_group: true,
            rocketmq_line: RocketmqLine::V5,
            region_id: "DefaultRegion".into(),
            trace_on: true,
            broker_permission: 6,
            max_connections: 1024,
            max_connections_per_ip: 1024 / super::PER_CLIENT_SHARE,
            max_in_flight_per_connection: 1024,
            max_in_flight: 16384,
            max_in_flight_bytes: 256 << 20,
            frame_max_length: logship_remoting::DEFAULT_MAX_FRAME_LEN,
            idle_timeout: Duration::from_secs(120),
            frame_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            max_queued_bytes: 64 << 20,
            message_index_enable: true,
            max_hash_slot_num: 5_000_000,
            max_index_num: 20_000_000,
            acl_enable: false,
            acl_file: None,
            long_polling_enable: true,
            short_polling_time_mills: 1000,
            offset_check_in_slave: false,
            lite_pull_message_enable: true,
            notify_consumer_ids_changed_enable: true,
            channel_expired_timeout: Duration::from_secs(120),
            slave_sync_interval: Duration::from_secs(10),
            slave_sync_master_address: None,
        }
    }
}

impl RemotingKeys {
    /// Parses `key` if it is one of these keys; `Ok(false)` if it is not.
    pub fn set(&mut self, key: &str, v: &str) -> Result<bool, BrokerConfigError> {
        set_remoting(self, key, v)
    }
}

fn acl_file(key: &str, v: &str) -> Result<std::path::PathBuf, BrokerConfigError> {
    match v.trim() {
        "" => Err(invalid(key, v, "the path of a plain_acl.yml")),
        path => Ok(path.into()),
    }
}

fn ip(key: &str, v: &str) -> Result<IpAddr, BrokerConfigError> {
    v.parse::<IpAddr>().map_err(|_| invalid(key, v, "an IP address"))
}

declare_keys! {
    fn set_remoting(r: &mut RemotingKeys; key, v);
    pub(super) const REMOTING_KEYS = "Remoting port and NameServer registration";
    "listenAddress", ALL, Note "`brokerIP1`",
        "the IP the remoting port binds (and, unless told otherwise, the HTTP and HA ports)"
        => r.listen_address = Some(ip(key, v)?);
    "fastListenPort", ALL, Note "`0` (none)",
        "a second remoting port with the same service: Java's VIP channel (`listenPort - 2` in Java), which Java clients up to 4.4.0 use by default (`vipChannelEnabled`); later clients do not"
        => r.fast_listen_port = port(key, v)?;
    "namesrvAddr", ALL, Note "unset",
        "NameServers, `host:port;host:port`: every broker (master and slaves) registers with each"
        => r.namesrv_addr = namesrv_addr(key, v)?;
    "registerNameServerPeriod", ALL, Value "30000",
        "how often (10 s to 60 s, as Java clamps it) (milliseconds)"
        => {
                r.register_name_server_period =
                    millis(key, v)?.clamp(Duration::from_secs(10), Duration::from_secs(60))
            };
    "registerBrokerTimeoutMills", ALL, Value "6000",
        "one registration's limit (milliseconds)"
        => r.register_broker_timeout = millis(key, v)?;
    "brokerIP2", ALL, Note "`brokerIP1`",
        "the host of the `haServerAddr` registered (`brokerIP2:haListenPort`)"
        => r.broker_ip2 = Some(ip(key, v)?);
    "autoCreateTopicEnable", ALL, Value "true",
        "as in RocketMQ: `TBW102` exists and a send to an unknown topic creates it; off, `TOPIC_NOT_EXIST`"
        => r.auto_create_topic_enable = boolean(key, v)?;
    "autoCreateSubscriptionGroup", ALL, Value "true",
        "as in RocketMQ: `TBW102` exists and a send to an unknown topic creates it; off, `TOPIC_NOT_EXIST`"
        => r.auto_create_subscription_group = boolean(key, v)?;
    "rocketmqLine", ALL, Value "5",
        "which Java broker to answer as: `5` (5.5.0, response version 513) or `4.9` (4.9.7, version 407): remarks, codes and stored properties that differ between the lines follow it"
        => {
                r.rocketmq_line = match v {
                    "5" | "5.x" | "5.5" | "5.5.0" => RocketmqLine::V5,
                    "4" | "4.9" | "4.9.7" => RocketmqLine::V4_9,
                    _ => return Err(invalid(key, v, "5 (answer as RocketMQ 5.5.0) or 4.9 (as 4.9.7)")),
                }
            };
    "regionId", ALL, Value "DefaultRegion",
        "what every send answer carries (`MSG_REGION`, `TRACE_ON`)"
        => r.region_id = v.to_string();
    "traceOn", ALL, Value "true",
        "what every send answer carries (`MSG_REGION`, `TRACE_ON`)"
        => r.trace_on = boolean(key, v)?;
    "brokerPermission", ALL, Value "6",
        "as in RocketMQ (4 read, 2 write): registered topics are cut to it"
        => r.broker_permission = number(key, v, 0, 7)? as i32;
    "remotingMaxConnections", ALL, Value "1024",
        "connections in all, from one address (`0`: no per-address cap)"
        => r.max_connections = number(key, v, 1, 1 << 20)? as usize;
    "remotingMaxConnectionsPerIp", ALL, Note "an eighth of it",
        "connections in all, from one address (`0`: no per-address cap)"
        => {
                r.max_connections_per_ip = number(key, v, 0, 1 << 20)? as usize
            };
    "remotingMaxInFlightPerConnection", ALL, Value "1024",
        "requests in flight per connection, in all, and their bytes"
        => {
                r.max_in_flight_per_connection = number(key, v, 1, 1 << 20)? as usize
            };
    "remotingMaxInFlight", ALL, Value "16384",
        "requests in flight per connection, in all, and their bytes"
        => r.max_in_flight = number(key, v, 1, 1 << 24)? as usize;
    "remotingMaxInFlightBytes", ALL, Value "268435456",
        "requests in flight per connection, in all, and their bytes"
        => r.max_in_flight_bytes = number(key, v, 1 << 20, 1 << 40)?;
    "remotingFrameMaxLength", ALL, Value "16777216",
        "the largest frame, its length field included (Java's `com.rocketmq.remoting.frameMaxLength`)"
        => {
                r.frame_max_length = number(key, v, 1024, i32::MAX as u64)? as usize
            };
    "serverChannelMaxIdleTimeSeconds", ALL, Value "120",
        "Java's key: an idle connection with nothing in flight closes"
        => {
                r.idle_timeout = Duration::from_secs(number(key, v, 1, 86_400)?)
            };
    "remotingFrameTimeout", ALL, Value "30000",
        "a frame begun must arrive within; answers unread for this long close the connection (milliseconds)"
        => r.frame_timeout = millis(key, v)?;
    "remotingWriteTimeout", ALL, Value "30000",
        "a frame begun must arrive within; answers unread for this long close the connection (milliseconds)"
        => r.write_timeout = millis(key, v)?;
    "remotingMaxQueuedBytes", ALL, Value "67108864",
        "answers waiting for one slow client beyond which its requests are not read"
        => r.max_queued_bytes = number(key, v, 1 << 16, 1 << 40)? as usize;
    "messageIndexEnable", ALL, Value "true",
        "RocketMQ's message index (`index/`, for `QUERY_MESSAGE` by key and by id), with Java's file sizes"
        => r.message_index_enable = boolean(key, v)?;
    "maxHashSlotNum", ALL, Value "5000000",
        "RocketMQ's message index (`index/`, for `QUERY_MESSAGE` by key and by id), with Java's file sizes"
        => r.max_hash_slot_num = number(key, v, 1, 50_000_000)? as u32;
    "maxIndexNum", ALL, Value "20000000",
        "RocketMQ's message index (`index/`, for `QUERY_MESSAGE` by key and by id), with Java's file sizes"
        => r.max_index_num = number(key, v, 1, 100_000_000)? as u32;
    "aclEnable", ALL, Value "false",
        "Java's key: check every remoting request against RocketMQ ACL 1.0"
        => r.acl_enable = boolean(key, v)?;
    "aclFile", ALL, Note "`storePathRootDir/config/plain_acl.yml`",
        "the ACL file (Java's `-Drocketmq.acl.plain.file`, relative to `ROCKETMQ_HOME`, default `conf/plain_acl.yml`)"
        => r.acl_file = Some(acl_file(key, v)?);
    "httpListenPort", ALL, Note "`listenPort + 2` (`10913`; `0` when `listenPort` is `0`)",
        "the HTTP API, metrics and status page (bound on `httpListenAddress`, see [HTTP port](security.md#http-port)). Chosen so that RocketMQ's ports (`10909` VIP, `10911` remoting, `10912` HA) stay free"
        => r.http_listen_port = Some(port(key, v)?);
    "httpListenAddress", ALL, Note "`listenAddress`, else `brokerIP1`",
        "the IP the HTTP port binds (`0.0.0.0` for every interface)"
        => r.http_listen_address = Some(ip(key, v)?);
    "longPollingEnable", ALL, Value "true",
        "a pull that finds nothing is held for the client's `suspendTimeoutMillis`; `false`: for `shortPollingTimeMills`"
        => r.long_polling_enable = boolean(key, v)?;
    "shortPollingTimeMills", ALL, Value "1000",
        "how long a pull is held with `longPollingEnable=false` (milliseconds)"
        => r.short_polling_time_mills = number(key, v, 1, 60_000)? as i64;
    "offsetCheckInSlave", ALL, Value "false",
        "a slave corrects out-of-range pull offsets (`PULL_OFFSET_MOVED`) instead of answering `PULL_RETRY_IMMEDIATELY`"
        => r.offset_check_in_slave = boolean(key, v)?;
    "litePullMessageEnable", ALL, Value "true",
        "serve `LITE_PULL_MESSAGE`"
        => r.lite_pull_message_enable = boolean(key, v)?;
    "notifyConsumerIdsChangedEnable", ALL, Value "true",
        "tell a group's consumers when its members change"
        => r.notify_consumer_ids_changed_enable = boolean(key, v)?;
    "channelExpiredTimeout", ALL, Value "120000",
        "a client without a heartbeat this long is dropped, checked every 10 s (milliseconds)"
        => r.channel_expired_timeout = Duration::from_millis(number(key, v, 1000, 86_400_000)?);
    "slaveSyncInterval", ALL, Value "10000",
        "how often a slave fetches its master's topics, offsets and subscription groups (milliseconds, 1 s to 600 s; logship's key: Java fixes `SlaveSynchronize` at 10 s)"
        => r.slave_sync_interval = millis(key, v)?.clamp(Duration::from_secs(1), Duration::from_secs(600));
    "slaveSyncMasterAddress", ALL, Note "the `masterAddr` of the NameServer's reply",
        "the master's remoting `host:port` a slave syncs metadata from (logship's key)"
        => {
                let mut one = namesrv_addr(key, v)?;
                if one.len() != 1 {
                    return Err(invalid(key, v, "one host:port, the master's remoting address"));
                }
                r.slave_sync_master_address = one.pop();
            };
}

/// `namesrvAddr`: `host:port` entries separated by `;` (empty entries skipped).
fn namesrv_addr(key: &str, v: &str) -> Result<Vec<String>, BrokerConfigError> {
    let mut out = Vec::new();
    for entry in v.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let ok = entry
            .rsplit_once(':')
            .is_some_and(|(host, port)| !host.is_empty() && port.parse::<u16>().is_ok_and(|p| p > 0));
        if !ok {
            return Err(invalid(
                key,
                v,
                &format!("host:port entries separated by ';' ({entry:?} is not host:port)"),
            ));
        }
        out.push(entry.to_string());
    }
    Ok(out)
}

impl BrokerSettings {
    /// The IP the remoting port binds: `listenAddress`, else `brokerIP1`.
    pub fn listen_ip(&self) -> IpAddr {
        self.remoting.listen_address.unwrap_or(self.broker_ip1)
    }

    /// The remoting address: `listenAddress` (else `brokerIP1`) and `listenPort`.
    pub fn remoting_addr(&self) -> SocketAddr {
        SocketAddr::new(self.listen_ip(), self.listen_port)
    }

    /// The VIP channel's address (`fastListenPort`), when there is one.
    pub fn fast_remoting_addr(&self) -> Option<SocketAddr> {
        (self.remoting.fast_listen_port != 0)
            .then(|| SocketAddr::new(self.listen_ip(), self.remoting.fast_listen_port))
    }

    /// `httpListenPort`, or its default `listenPort + 2` (0 when `listenPort` is 0).
    pub fn http_listen_port(&self) -> u16 {
        match (self.remoting.http_listen_port, self.listen_port) {
            (Some(p), _) => p,
            (None, 0) => 0,
            (None, l) => l.saturating_add(2),
        }
    }

    /// The HA address registered with the NameServers (`haServerAddr`): `brokerIP2` (else
    /// `brokerIP1`) and `haListenPort`.
    pub fn ha_server_addr(&self) -> SocketAddr {
        SocketAddr::new(self.remoting.broker_ip2.unwrap_or(self.broker_ip1), self.ha_listen_port)
    }

    /// The broker id registered: controller mode's `brokerId`, else 0 for a master and
    /// `brokerId` for a slave.
    pub fn registered_broker_id(&self) -> i64 {
        if let Some(c) = &self.controller {
            return c.broker_id;
        }
        match self.broker_role {
            logship_core::BrokerRole::Slave => self.remoting.broker_id.unwrap_or(1),
            _ => 0,
        }
    }

    /// The settings of `logship-broker`'s processors and metadata.
    pub fn broker_crate_settings(&self) -> logship_broker::BrokerSettings {
        let mut b = logship_broker::BrokerSettings::default();
        b.line = self.remoting.rocketmq_line;
        b.broker_cluster_name = self.broker_cluster_name.clone();
        b.broker_name = self.broker_name.clone();
        b.auto_create_topic_enable = self.remoting.auto_create_topic_enable;
        b.auto_create_subscription_group = self.remoting.auto_create_subscription_group;
        b.broker_id = self.registered_broker_id();
        b.broker_ip1 = self.broker_ip1;
        b.listen_port = self.listen_port;
        b.broker_permission = self.remoting.broker_permission;
        b.region_id = self.remoting.region_id.clone();
        b.trace_on = self.remoting.trace_on;
        b.max_message_size = self.max_message_size;
        b.default_topic_queue_nums = self.http.default_topic_queue_nums as i32;
        b.slave_read_enable = self.slave_read_enable;
        b.access_message_in_memory_max_ratio = self.access_message_in_memory_max_ratio;
        b.max_transfer_bytes_on_message_in_memory = self.http.max_transfer_bytes;
        b.max_transfer_count_on_message_in_memory =
            u32::try_from(self.http.max_transfer_count).unwrap_or(u32::MAX);
        let r = &self.remoting;
        b.long_polling_enable = r.long_polling_enable;
        b.short_polling_time_mills = r.short_polling_time_mills;
        b.offset_check_in_slave = r.offset_check_in_slave;
        b.lite_pull_message_enable = r.lite_pull_message_enable;
        b.notify_consumer_ids_changed_enable = r.notify_consumer_ids_changed_enable;
        b.channel_expired_timeout = r.channel_expired_timeout;
        b
    }

    /// The message index's sizes.
    pub fn index_config(&self) -> logship_store::IndexConfig {
        let mut c = logship_store::IndexConfig::default();
        c.max_hash_slot_num = self.remoting.max_hash_slot_num;
        c.max_index_num = self.remoting.max_index_num;
        c
    }

    /// The remoting connections' limits.
    pub fn remoting_server_config(&self) -> logship_remoting::server::ServerConfig {
        let r = &self.remoting;
        let mut c = logship_remoting::server::ServerConfig::default();
        c.max_frame_len = r.frame_max_length;
        c.max_in_flight = r.max_in_flight_per_connection;
        c.max_queued_bytes = r.max_queued_bytes;
        c.idle_timeout = r.idle_timeout;
        c.frame_timeout = r.frame_timeout;
        c.write_timeout = r.write_timeout;
        c.version = self.broker_crate_settings().version();
        c
    }
}

/// Checks the remoting keys against the rest, after everything is read.
pub(super) fn check(
    s: &BrokerSettings,
    warnings: &mut Vec<String>,
    broker_id_set: Option<&str>,
) -> Result<(), BrokerConfigError> {
    let conflict =
        |keys: String, reason: &str| BrokerConfigError::Conflict { keys, reason: reason.to_string() };
    if s.remoting.http_listen_port.is_none() && s.listen_port > u16::MAX - 2 {
        return Err(invalid(
            "listenPort",
            &s.listen_port.to_string(),
            "leave room for httpListenPort = listenPort + 2, or set httpListenPort",
        ));
    }
    let ports = [
        ("listenPort", s.listen_port),
        ("haListenPort", s.ha_listen_port),
        ("httpListenPort", s.http_listen_port()),
        ("fastListenPort", s.remoting.fast_listen_port),
    ];
    for (i, (a, pa)) in ports.iter().enumerate() {
        for (b, pb) in &ports[i + 1..] {
            if *pa != 0 && pa == pb {
                return Err(conflict(format!("{a}={pa} {b}={pb}"), "each port needs its own number"));
            }
        }
    }
    if s.controller.is_none() {
        if let Some(origin) = broker_id_set {
            let id = s.remoting.broker_id.unwrap_or(0);
            if s.broker_role != logship_core::BrokerRole::Slave && id != 0 {
                warnings.push(format!(
                    "{origin}: brokerId={id} on a master: a master registers as brokerId 0 (RocketMQ forces it)"
                ));
            }
        }
        if s.broker_role == logship_core::BrokerRole::Slave
            && !s.remoting.namesrv_addr.is_empty()
            && s.remoting.broker_id.is_none_or(|id| id <= 0)
        {
            return Err(conflict(
                format!(
                    "brokerRole=SLAVE namesrvAddr={} brokerId={}",
                    s.remoting.namesrv_addr.join(";"),
                    s.remoting.broker_id.map_or("(unset)".to_string(), |id| id.to_string())
                ),
                "a slave registering with NameServers needs brokerId 1 or more, distinct within its group \
                 (the NameServer keys a group's brokers by id)",
            ));
        }
    }
    if !s.listen_ip().is_loopback() {
        let every = if s.listen_ip().is_unspecified() { " (every interface)" } else { "" };
        warnings.push(format!(
            "the remoting port listens on {}{every}: RocketMQ clients are not authenticated (no ACL yet), so \
             anyone who reaches it can produce and read; keep it behind a firewall",
            s.remoting_addr()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod consume_keys_tests {
    use std::time::Duration;

    fn consume_settings(overrides: &[(&str, &str)]) -> logship_broker::consume::ConsumeSettings {
        let overrides: Vec<(String, String)> =
            overrides.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let loaded = super::super::load(&[], None, &overrides).expect("loads");
        logship_broker::consume::ConsumeSettings::from_broker(&loaded.settings.broker_crate_settings())
    }

    #[test]
    fn access_message_in_memory_max_ratio_sets_the_pulls_memory_limit() {
        let total = logship_store::total_physical_memory().unwrap_or(8 << 30);
        let d = consume_settings(&[]);
        assert_eq!(d.get_message.memory_limit, logship_store::memory_limit(total, 40));
        let s = consume_settings(&[("accessMessageInMemoryMaxRatio", "20")]);
        assert_eq!(s.get_message.memory_limit, logship_store::memory_limit(total, 20));
        // Java takes 0 too: every message behind the log's end is out of memory.
        assert_eq!(consume_settings(&[("accessMessageInMemoryMaxRatio", "0")]).get_message.memory_limit, 0);
    }

    #[test]
    fn the_in_memory_transfer_caps_reach_the_pulls() {
        let d = consume_settings(&[]);
        let caps = |s: &logship_broker::consume::ConsumeSettings| {
            (
                s.get_message.max_transfer_bytes_on_message_in_memory,
                s.get_message.max_transfer_count_on_message_in_memory,
            )
        };
        assert_eq!(caps(&d), (256 << 10, 32));
        let s = consume_settings(&[
            ("maxTransferBytesOnMessageInMemory", "4096"),
            ("maxTransferCountOnMessageInMemory", "5"),
        ]);
        assert_eq!(caps(&s), (4096, 5));
    }

    #[test]
    fn consume_keys_default_to_java_s_values_and_reach_the_processors() {
        let d = consume_settings(&[]);
        assert!(d.long_polling_enable && d.lite_pull_message_enable && d.notify_consumer_ids_changed_enable);
        assert!(!d.offset_check_in_slave);
        assert_eq!((d.short_polling_time_mills, d.channel_expired_timeout), (1000, Duration::from_secs(120)));
        let s = consume_settings(&[
            ("longPollingEnable", "false"),
            ("shortPollingTimeMills", "250"),
            ("offsetCheckInSlave", "true"),
            ("litePullMessageEnable", "false"),
            ("notifyConsumerIdsChangedEnable", "false"),
            ("channelExpiredTimeout", "30000"),
        ]);
        assert!(
            !s.long_polling_enable && !s.lite_pull_message_enable && !s.notify_consumer_ids_changed_enable
        );
        assert!(s.offset_check_in_slave);
        assert_eq!((s.short_polling_time_mills, s.channel_expired_timeout), (250, Duration::from_secs(30)));
    }

    #[test]
    fn bad_consume_values_are_refused_naming_the_key() {
        for (k, v) in
            [("shortPollingTimeMills", "abc"), ("shortPollingTimeMills", "0"), ("channelExpiredTimeout", "5")]
        {
            let e = super::super::load(&[], None, &[(k.to_string(), v.to_string())]).unwrap_err();
            assert!(e.error.to_string().contains(k), "{k}={v}: {}", e.error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slave_sync_keys_take_an_interval_and_one_master_address() {
        let mut k = RemotingKeys::default();
        assert_eq!(k.slave_sync_interval, Duration::from_secs(10), "Java's SlaveSynchronize period");
        assert!(k.set("slaveSyncInterval", "2500").unwrap());
        assert_eq!(k.slave_sync_interval, Duration::from_millis(2500));
        assert!(k.set("slaveSyncMasterAddress", "10.0.0.2:10911").unwrap());
        assert_eq!(k.slave_sync_master_address.as_deref(), Some("10.0.0.2:10911"));
        for bad in ["10.0.0.2", "a:1;b:2", ""] {
            let e = k.set("slaveSyncMasterAddress", bad).unwrap_err().to_string();
            assert!(e.contains("slaveSyncMasterAddress"), "{bad:?}: {e}");
        }
    }
}
