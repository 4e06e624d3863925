//! The broker settings the metadata and the request processors depend on, named as in
//! RocketMQ's `BrokerConfig` and `MessageStoreConfig`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

/// RocketMQ's default `messageDelayLevel`: levels 1 to 18.
pub const DEFAULT_DELAY_LEVELS: &str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h";

/// Which RocketMQ line's defaults the broker creates (the default topics and groups differ).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum RocketmqLine {
    /// RocketMQ 4.9.x.
    V4_9,
    /// RocketMQ 5.x (as 5.5.0 does it).
    #[default]
    V5,
}

/// The settings the metadata managers and the processors use. Defaults are RocketMQ's.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct BrokerSettings {
    /// Whose defaults to create.
    pub line: RocketmqLine,
    /// `brokerClusterName` (default `DefaultCluster`): also a topic.
    pub broker_cluster_name: String,
    /// `brokerName`: also a topic.
    pub broker_name: String,
    /// `autoCreateTopicEnable` (default true): whether `TBW102` exists and topics are created
    /// on a send to an unknown topic.
    pub auto_create_topic_enable: bool,
    /// `defaultTopicQueueNums` (default 8): `TBW102`'s queue count.
    pub default_topic_queue_nums: i32,
    /// `clusterTopicEnable` (default true): the cluster topic is readable and writable.
    pub cluster_topic_enable: bool,
    /// `brokerTopicEnable` (default true): the broker topic is readable and writable.
    pub broker_topic_enable: bool,
    /// `traceTopicEnable` (default false): create the trace topic.
    pub trace_topic_enable: bool,
    /// `msgTraceTopicName` (default `RMQ_SYS_TRACE_TOPIC`).
    pub msg_trace_topic_name: String,
    /// `reviveQueueNum` (default 8, 5.x): queues of the revive topic.
    pub revive_queue_num: i32,
    /// `timerWheelEnable` (default true, 5.x): create the timer topic.
    pub timer_wheel_enable: bool,
    /// `autoCreateSubscriptionGroup` (default true).
    pub auto_create_subscription_group: bool,
    /// `enableCreateSysGroup` (default true, 5.x): create `CID_RMQ_SYS_*` groups even without
    /// `autoCreateSubscriptionGroup` (4.9 always does).
    pub enable_create_sys_group: bool,
    /// `consumerOffsetUpdateVersionStep` (default 500, 5.x): commits between data-version bumps.
    pub consumer_offset_update_version_step: u64,
    /// `delayOffsetUpdateVersionStep` (default 200, 5.x).
    pub delay_offset_update_version_step: u64,
    /// `messageDelayLevel` (default `1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h`).
    pub message_delay_level: String,
    // ---- what the processors need ----
    /// `brokerId`: 0 for a master, 1 or more for a slave (in controller mode, the id the group
    /// gave this broker).
    pub broker_id: i64,
    /// `brokerIP1`: the address clients reach this broker at, written into every stored message
    /// (`storeHost`, with `listenPort`) and into offset message ids.
    pub broker_ip1: IpAddr,
    /// `listenPort`: the remoting port.
    pub listen_port: u16,
    /// `brokerPermission` (default 6, read and write): a broker without write permission
    /// refuses sends to ordered topics.
    pub broker_permission: i32,
    /// `regionId` (default `DefaultRegion`): the `MSG_REGION` every send response carries.
    pub region_id: String,
    /// `traceOn` (default true): the `TRACE_ON` every send response carries.
    pub trace_on: bool,
    /// `maxMessageSize` (default 4 MiB): the largest body, or the largest batch.
    pub max_message_size: u32,
    /// `startAcceptSendRequestTimeStamp` (default 0): sends before this time (ms) are refused.
    pub start_accept_send_request_time_stamp: i64,
    /// `slaveReadEnable` (default false).
    pub slave_read_enable: bool,
    /// `accessMessageInMemoryMaxRatio` (default 40, percent of the machine's memory): a pull
    /// reading further behind the commit log's end than this is out of memory (the on-disk
    /// batch caps apply, and with `slaveReadEnable` the answer suggests the slave). 0: every
    /// message behind the end.
    pub access_message_in_memory_max_ratio: u32,
    /// `maxTransferBytesOnMessageInMemory` (default 256 KiB): the bytes one pull of in-memory
    /// messages returns at most (the first message always comes).
    pub max_transfer_bytes_on_message_in_memory: u64,
    /// `maxTransferCountOnMessageInMemory` (default 32): the messages one such pull returns at
    /// most.
    pub max_transfer_count_on_message_in_memory: u32,
    /// `longPollingEnable` (default true): hold a pull that finds nothing for the client's
    /// `suspendTimeoutMillis`, else for `shortPollingTimeMills`.
    pub long_polling_enable: bool,
    /// `shortPollingTimeMills` (default 1000).
    pub short_polling_time_mills: i64,
    /// `offsetCheckInSlave` (default false).
    pub offset_check_in_slave: bool,
    /// `litePullMessageEnable` (default true, 5.x).
    pub lite_pull_message_enable: bool,
    /// `notifyConsumerIdsChangedEnable` (default true).
    pub notify_consumer_ids_changed_enable: bool,
    /// `channelExpiredTimeout` (default 120 s).
    pub channel_expired_timeout: std::time::Duration,
}

impl BrokerSettings {
    /// The address written as every stored message's `storeHost`: `brokerIP1:listenPort`.
    pub fn store_host(&self) -> SocketAddr {
        SocketAddr::new(self.broker_ip1, self.listen_port)
    }

    /// The protocol version responses carry: the `CURRENT_VERSION` of the line emulated (407
    /// for 4.9.7, 513 for 5.5.0). Clients record it from the heartbeat answer as the broker's.
    pub fn version(&self) -> i32 {
        match self.line {
            RocketmqLine::V4_9 => logship_remoting::version::V4_9_7,
            RocketmqLine::V5 => logship_remoting::version::V5_5_0,
        }
    }
}

impl Default for BrokerSettings {
    fn default() -> Self {
        Self {
            line: RocketmqLine::default(),
            broker_cluster_name: "DefaultCluster".to_string(),
            broker_name: "broker-a".to_string(),
            auto_create_topic_enable: true,
            default_topic_queue_nums: 8,
            cluster_topic_enable: true,
            broker_topic_enable: true,
            trace_topic_enable: false,
            msg_trace_topic_name: crate::names::TRACE_TOPIC.to_string(),
            revive_queue_num: 8,
            timer_wheel_enable: true,
            auto_create_subscription_group: true,
            enable_create_sys_group: true,
            consumer_offset_update_version_step: 500,
            delay_offset_update_version_step: 200,
            message_delay_level: DEFAULT_DELAY_LEVELS.to_string(),
            broker_id: 0,
            broker_ip1: IpAddr::V4(Ipv4Addr::LOCALHOST),
            listen_port: 10911,
            broker_permission: crate::names::perm::READ | crate::names::perm::WRITE,
            region_id: "DefaultRegion".to_string(),
            trace_on: true,
            max_message_size: 4 << 20,
            start_accept_send_request_time_stamp: 0,
            slave_read_enable: false,
            access_message_in_memory_max_ratio: 40,
            max_transfer_bytes_on_message_in_memory: 256 * 1024,
            max_transfer_count_on_message_in_memory: 32,
            long_polling_enable: true,
            short_polling_time_mills: 1000,
            offset_check_in_slave: false,
            lite_pull_message_enable: true,
            notify_consumer_ids_changed_enable: true,
            channel_expired_timeout: std::time::Duration::from_secs(120),
        }
    }
}
