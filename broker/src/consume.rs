//! What the consume-side request processors share: the connection a request came on, the
//! broker's role and settings, the context they read and change, the side effects they report,
//! and Java's answer texts.
//!
//! # The processors and their glue
//!
//! Each processor is a function from a request (and a [`ConsumeContext`]) to a [`Reply`]: the
//! response to send (none for a one-way request) and the [`Effects`] the glue must carry out.
//! Nothing here reads a socket or a clock: time comes in as [`Now`], connections are named by
//! the glue's [`ConnectionId`]s. What the glue owes the processors:
//!
//! - **Every request** of the codes in [`CONSUME_CODES`] goes to its processor with the
//!   [`ClientConnection`] it came on ([`pull`](crate::pull), [`clients`](crate::clients),
//!   [`consumer_manage`](crate::consumer_manage), [`retry`](crate::retry),
//!   [`lock`](crate::lock)).
//! - **Effects**: send each [`GroupNotice`] as a one-way request on each of its connections;
//!   after [`Effects::topics_created`] persist the topics and register with every NameServer
//!   at once (Java's `registerBrokerAll`), after [`Effects::groups_created`] persist the groups.
//! - **Connections**: on close call [`ClientRegistry::connection_closed`] (and send its notices)
//!   and [`PullHoldTable::remove_connection`](crate::pull_hold::PullHoldTable::remove_connection);
//!   every 10 s call [`ClientRegistry::scan_expired`] and close the connections it names.
//! - **Offsets**: every `flushConsumerOffsetInterval` (5 s) call
//!   [`ConsumerOffsetManager::persist_if_dirty`](crate::ConsumerOffsetManager::persist_if_dirty).
//! - **Long polling and delays**: see [`pull_hold`](crate::pull_hold) and
//!   [`schedule`](crate::schedule).

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use logship_remoting::{RemotingCommand, RequestCode, ResponseCode, version};
use logship_store::GetMessageOptions;

use crate::BrokerMetadata;
use crate::clients::{ClientRegistry, GroupNotice};
use crate::lock::RebalanceLockManager;
use crate::names::perm;
use crate::settings::RocketmqLine;

/// The request codes this side serves.
pub const CONSUME_CODES: [RequestCode; 13] = [
    RequestCode::PULL_MESSAGE,
    RequestCode::LITE_PULL_MESSAGE,
    RequestCode::QUERY_CONSUMER_OFFSET,
    RequestCode::UPDATE_CONSUMER_OFFSET,
    RequestCode::HEART_BEAT,
    RequestCode::UNREGISTER_CLIENT,
    RequestCode::CONSUMER_SEND_MSG_BACK,
    RequestCode::GET_CONSUMER_LIST_BY_GROUP,
    RequestCode::LOCK_BATCH_MQ,
    RequestCode::UNLOCK_BATCH_MQ,
    RequestCode::CHECK_CLIENT_CONFIG,
    RequestCode::GET_CONSUMER_CONNECTION_LIST,
    RequestCode::GET_PRODUCER_CONNECTION_LIST,
];

/// A client connection, named by the glue: unique among the connections open at once, and
/// never reused while anything may still refer to the old one (a counter is the simple way).
pub type ConnectionId = u64;

/// The connection a request came on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ClientConnection {
    /// Its id.
    pub id: ConnectionId,
    /// The client's address (Java's `channel.remoteAddress()`).
    pub remote_addr: SocketAddr,
}

impl ClientConnection {
    /// A connection.
    pub fn new(id: ConnectionId, remote_addr: SocketAddr) -> Self {
        Self { id, remote_addr }
    }

    /// The address as Java's `RemotingHelper.parseChannelRemoteAddr` writes it: `ip:port`.
    pub fn addr_text(&self) -> String {
        self.remote_addr.to_string()
    }

    /// The address as Java's `InetSocketAddress.toString()` writes it: `/ip:port`.
    pub fn java_remote_address(&self) -> String {
        format!("/{}", self.remote_addr)
    }
}

/// The time of a call: a monotonic instant for timers (holds, expiry) and the wall clock in
/// milliseconds for what RocketMQ stores (data versions, delivery times).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Now {
    /// Monotonic time.
    pub instant: Instant,
    /// Milliseconds since the Unix epoch.
    pub wall_ms: i64,
}

impl Now {
    /// A time.
    pub fn new(instant: Instant, wall_ms: i64) -> Self {
        Self { instant, wall_ms }
    }
}

/// The broker's role at the time of a request (it changes with failover).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerRole {
    /// A master (ASYNC_MASTER or SYNC_MASTER): takes writes.
    Master,
    /// A slave: serves reads of replicated data.
    Slave,
}

/// The settings of the consume side, named as in RocketMQ's `BrokerConfig`. Defaults are
/// RocketMQ's unless a field says otherwise.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConsumeSettings {
    /// Whose rules to follow where 4.9 and 5.x differ.
    pub line: RocketmqLine,
    /// `brokerIP1`: named in some remarks.
    pub broker_ip1: String,
    /// `brokerName`.
    pub broker_name: String,
    /// `brokerPermission` (default 6, read and write).
    pub broker_permission: i32,
    /// `slaveReadEnable` (default false): whether pull answers suggest reading from a slave
    /// (`whichBrokerWhenConsumeSlowly`) when a consumer reads far behind.
    pub slave_read_enable: bool,
    /// `offsetCheckInSlave` (default false): whether a slave corrects out-of-range pull
    /// offsets (`PULL_OFFSET_MOVED`) instead of answering `PULL_RETRY_IMMEDIATELY`.
    pub offset_check_in_slave: bool,
    /// `longPollingEnable` (default true): hold a pull that finds nothing for the client's
    /// `suspendTimeoutMillis`, else for `shortPollingTimeMills`.
    pub long_polling_enable: bool,
    /// `shortPollingTimeMills` (default 1000).
    pub short_polling_time_mills: i64,
    /// The longest a pull is held whatever the client asks (logship's; default 25 s, under the
    /// 30 s every known client waits).
    pub max_pull_hold: Duration,
    /// `litePullMessageEnable` (default true, 5.x): serve `LITE_PULL_MESSAGE`.
    pub lite_pull_message_enable: bool,
    /// `notifyConsumerIdsChangedEnable` (default true): tell a group's consumers when its
    /// members change.
    pub notify_consumer_ids_changed_enable: bool,
    /// `channelExpiredTimeout` (default 120 s): a client registration without a heartbeat for
    /// this long is dropped and its connection closed.
    pub channel_expired_timeout: Duration,
    /// `rocketmq.broker.rebalance.lockMaxLiveTime` (default 60 s): a queue lock not renewed for
    /// this long is free.
    pub lock_max_live_time: Duration,
    /// The store's caps for pulls (`maxTransferCountOnMessageInMemory`, ...).
    pub get_message: GetMessageOptions,
}

impl Default for ConsumeSettings {
    fn default() -> Self {
        Self {
            line: RocketmqLine::default(),
            broker_ip1: "127.0.0.1".to_string(),
            broker_name: "broker-a".to_string(),
            broker_permission: perm::READ | perm::WRITE,
            slave_read_enable: false,
            offset_check_in_slave: false,
            long_polling_enable: true,
            short_polling_time_mills: 1000,
            max_pull_hold: Duration::from_secs(25),
            lite_pull_message_enable: true,
            notify_consumer_ids_changed_enable: true,
            channel_expired_timeout: Duration::from_secs(120),
            lock_max_live_time: Duration::from_secs(60),
            get_message: GetMessageOptions::default(),
        }
    }
}

impl ConsumeSettings {
    /// The protocol version this broker answers with and sends its requests with: the
    /// `CURRENT_VERSION` of the line it emulates (407 for 4.9.7, 513 for 5.5.0).
    pub fn remoting_version(&self) -> i32 {
        match self.line {
            RocketmqLine::V4_9 => version::V4_9_7,
            RocketmqLine::V5 => version::V5_5_0,
        }
    }

    /// Java's `FAQUrl.suggestTodo`: the line's FAQ link as a remark suffix.
    pub fn faq_suffix(&self) -> &'static str {
        match self.line {
            RocketmqLine::V4_9 => "\nSee http://rocketmq.apache.org/docs/faq/ for further details.",
            RocketmqLine::V5 => "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.",
        }
    }

    /// The code Java answers a bad queue id with: `SYSTEM_ERROR` in 4.9, `INVALID_PARAMETER` in 5.x.
    pub(crate) fn invalid_parameter_code(&self) -> ResponseCode {
        match self.line {
            RocketmqLine::V4_9 => ResponseCode::SYSTEM_ERROR,
            RocketmqLine::V5 => ResponseCode::INVALID_PARAMETER,
        }
    }
}

/// What the consume-side processors read and change.
#[derive(Clone, Copy, Debug)]
pub struct ConsumeContext<'a> {
    /// Topics, groups, offsets and delay offsets.
    pub metadata: &'a BrokerMetadata,
    /// The message store.
    pub store: &'a logship_store::CommitLog,
    /// Registered producers and consumers.
    pub clients: &'a ClientRegistry,
    /// Orderly consumers' queue locks.
    pub locks: &'a RebalanceLockManager,
    /// The settings.
    pub settings: &'a ConsumeSettings,
    /// The broker's role now.
    pub role: BrokerRole,
}

/// Side effects of a request the glue must carry out (see the [module docs](self)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[must_use]
#[non_exhaustive]
pub struct Effects {
    /// `NOTIFY_CONSUMER_IDS_CHANGED` to send.
    pub notices: Vec<GroupNotice>,
    /// A topic was created (a retry or dead-letter topic): persist the topics and register with
    /// the NameServers now.
    pub topics_created: bool,
    /// A subscription group was created: persist the groups.
    pub groups_created: bool,
}

impl Effects {
    /// Adds `other`'s effects to these.
    pub fn merge(&mut self, other: Self) {
        self.notices.extend(other.notices);
        self.topics_created |= other.topics_created;
        self.groups_created |= other.groups_created;
    }

    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.notices.is_empty() && !self.topics_created && !self.groups_created
    }
}

/// A processor's answer: the response (none for a one-way request) and the side effects.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct Reply {
    /// The response to send on the request's connection.
    pub response: Option<RemotingCommand>,
    /// What else to do.
    pub effects: Effects,
}

impl Reply {
    /// The answer `response` to `request`, unless the request is one-way.
    pub(crate) fn to(request: &RemotingCommand, response: RemotingCommand) -> Self {
        Self { response: (!request.is_oneway()).then_some(response), effects: Effects::default() }
    }

    /// With effects.
    pub(crate) fn with_effects(mut self, effects: Effects) -> Self {
        self.effects = effects;
        self
    }
}

/// A response to `request` with `code` and `remark`, in the request's serialize type.
pub(crate) fn answer(request: &RemotingCommand, code: ResponseCode, remark: impl Into<String>) -> RemotingCommand {
    RemotingCommand::response_to(request, code).with_remark(remark)
}

/// A `SUCCESS` response to `request` without a remark.
pub(crate) fn success(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}

/// The answer to a header Java could not decode: `SYSTEM_ERROR` with the exception's text,
/// naming the field.
pub(crate) fn bad_header(request: &RemotingCommand, error: &logship_remoting::HeaderError) -> RemotingCommand {
    answer(request, error.response_code(), error.java_remark())
}

/// The answer to a body that is not the JSON Java expects: `SYSTEM_ERROR` naming the class.
pub(crate) fn bad_body(request: &RemotingCommand, error: &logship_remoting::BodyError) -> RemotingCommand {
    answer(request, ResponseCode::SYSTEM_ERROR, format!("com.alibaba.fastjson.JSONException: {error}"))
}
