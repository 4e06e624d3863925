//! What the consume-side request processors share: the connection a request came on, the
//! broker's role and settings, the context they read and change, the side effects they report,
//! and Java's answer texts.
//!
//! # How they are served
//!
//! [`dispatch`](crate::dispatch::dispatch) calls this module's `serve_*` functions with the
//! serving side's [`RequestContext`] and gets a [`Processed`] back, like every other family.
//! Inside, each processor is a sans-IO function over a borrowed view of the broker
//! (`ConsumeContext`, crate-private) that returns the response and the [`Effects`] the
//! serve function then carries out: notices go out on the group's other connections
//! ([`Connection::send`]), a created topic makes the host register with the NameServers at
//! once; the metadata timer persists what changed (offsets every 5 s, in
//! `config/consumerOffset.json`). The state the family keeps ([`ConsumeState`]: the client
//! registry, the queue locks, the held pulls) is a field of the [`Broker`].
//!
//! Long polling: a pull that finds nothing and asks to be suspended is held in
//! [`PullHoldTable`] and its serve function awaits a wake-up (the store's arrival listener,
//! installed by [`ConsumeState::install`], wakes it when a matching message is indexed) or the
//! host's timer at the pull's deadline, then re-runs it and answers. The table bounds the held
//! pulls in number, per connection and in bytes; a pull beyond a bound is answered
//! `SYSTEM_BUSY` at once.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use logship_remoting::{RemotingCommand, RequestCode, ResponseCode, version};
use logship_store::GetMessageOptions;

use crate::clients::{ClientLimits, ClientRegistry, GroupNotice};
use crate::lock::RebalanceLockManager;
use crate::names::perm;
use crate::pull::{Execution, PullOutcome};
use crate::pull_hold::{Hold, HoldLimits, PullHoldTable};
use crate::serve::{Broker, Connection, Processed, RequestContext};
use crate::settings::RocketmqLine;
use crate::{BrokerMetadata, BrokerSettings};

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

/// Which side of replication a broker serves from at the time of a request (it changes with
/// failover): whether it takes writes. Unlike the configured
/// [`logship_core::BrokerRole`], it does not say SYNC or ASYNC, and a broker with no role yet
/// serves as a slave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServingRole {
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
    /// The consume settings of a broker with `settings` (RocketMQ's defaults for the rest).
    pub fn from_broker(settings: &BrokerSettings) -> Self {
        Self {
            line: settings.line,
            broker_ip1: settings.broker_ip1.to_string(),
            broker_name: settings.broker_name.clone(),
            broker_permission: settings.broker_permission,
            slave_read_enable: settings.slave_read_enable,
            long_polling_enable: settings.long_polling_enable,
            short_polling_time_mills: settings.short_polling_time_mills,
            offset_check_in_slave: settings.offset_check_in_slave,
            lite_pull_message_enable: settings.lite_pull_message_enable,
            notify_consumer_ids_changed_enable: settings.notify_consumer_ids_changed_enable,
            channel_expired_timeout: settings.channel_expired_timeout,
            get_message: get_message_options(settings),
            ..Self::default()
        }
    }

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
            RocketmqLine::V5 => {
                "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
            }
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

/// The store's pull options: the in-memory caps of `settings`, the memory limit of its
/// `accessMessageInMemoryMaxRatio` (of the machine's memory, as Java's `StoreUtil` reads it),
/// RocketMQ's defaults for the rest.
fn get_message_options(settings: &BrokerSettings) -> GetMessageOptions {
    let mut options = GetMessageOptions::default();
    let total = logship_store::total_physical_memory().unwrap_or(8 << 30);
    options.memory_limit = logship_store::memory_limit(total, settings.access_message_in_memory_max_ratio);
    options.max_transfer_bytes_on_message_in_memory = settings.max_transfer_bytes_on_message_in_memory;
    options.max_transfer_count_on_message_in_memory = settings.max_transfer_count_on_message_in_memory;
    options
}

/// What the consume-side processors read and change: a borrowed view of the [`Broker`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConsumeContext<'a> {
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
    pub role: ServingRole,
    /// The rate limit of a slave's out-of-range pull warnings.
    pub slave_offset_warnings: &'a crate::pull::SlaveOffsetWarnings,
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
pub(crate) struct Reply {
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
pub(crate) fn answer(
    request: &RemotingCommand,
    code: ResponseCode,
    remark: impl Into<String>,
) -> RemotingCommand {
    RemotingCommand::response_to(request, code).with_remark(remark)
}

/// A `SUCCESS` response to `request` without a remark.
pub(crate) fn success(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}

/// The answer to a header Java could not decode: `SYSTEM_ERROR` with the exception's text,
/// naming the field.
pub(crate) fn bad_header(
    request: &RemotingCommand,
    error: &logship_remoting::HeaderError,
) -> RemotingCommand {
    answer(request, error.response_code(), error.java_remark())
}

/// The answer to a body that is not the JSON Java expects: `SYSTEM_ERROR` naming the class.
pub(crate) fn bad_body(request: &RemotingCommand, error: &logship_remoting::BodyError) -> RemotingCommand {
    answer(request, ResponseCode::SYSTEM_ERROR, format!("com.alibaba.fastjson.JSONException: {error}"))
}

/// The consume side's state in a [`Broker`]: settings, registered clients, queue locks, held
/// pulls, and the connections the clients came on (to notify them).
pub struct ConsumeState {
    /// The settings.
    pub settings: ConsumeSettings,
    /// Registered producers and consumers.
    pub clients: ClientRegistry,
    /// Orderly consumers' queue locks.
    pub locks: RebalanceLockManager,
    /// Held pulls.
    pub holds: PullHoldTable,
    /// The rate limit of a slave's out-of-range pull warnings.
    pub slave_offset_warnings: crate::pull::SlaveOffsetWarnings,
    connections: Mutex<HashMap<ConnectionId, Weak<Connection>>>,
    waiters: Mutex<HashMap<(ConnectionId, i32), async_channel::Sender<()>>>,
}

impl std::fmt::Debug for ConsumeState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumeState")
            .field("registrations", &self.clients.registrations())
            .field("held", &self.holds.len())
            .finish_non_exhaustive()
    }
}

/// Queue locks kept at most (one per queue and group).
const MAX_LOCKS: usize = 1 << 20;

impl ConsumeState {
    /// The state of a broker with `settings`.
    pub fn new(settings: ConsumeSettings) -> Self {
        Self {
            clients: ClientRegistry::new(ClientLimits::default(), settings.channel_expired_timeout),
            locks: RebalanceLockManager::new(settings.lock_max_live_time, MAX_LOCKS),
            holds: PullHoldTable::new(HoldLimits::default()),
            slave_offset_warnings: crate::pull::SlaveOffsetWarnings::default(),
            settings,
            connections: Mutex::new(HashMap::new()),
            waiters: Mutex::new(HashMap::new()),
        }
    }

    /// Installs the arrival listener on `store` that wakes held pulls; it holds the state
    /// weakly.
    pub fn install(self: &Arc<Self>, store: &logship_store::CommitLog) {
        store.set_arrival_listener(Some(Arc::new(Arrivals(Arc::downgrade(self)))));
    }

    fn table<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn remember(&self, connection: &Arc<Connection>) {
        Self::table(&self.connections).entry(connection.id).or_insert_with(|| Arc::downgrade(connection));
    }

    fn wake(&self, pulls: impl IntoIterator<Item = crate::pull_hold::HeldPull>) {
        let waiters = Self::table(&self.waiters);
        for p in pulls {
            if let Some(tx) = waiters.get(&(p.connection, p.request.opaque)) {
                let _ = tx.try_send(());
            }
        }
    }

    /// A connection closed: its registrations and held pulls go, and the groups it was in
    /// are told (returns how many notices went out).
    pub fn connection_closed(&self, connection: &Connection) -> usize {
        let notices = self.clients.connection_closed(connection.id);
        let dropped = self.holds.remove_connection(connection.id);
        drop(dropped);
        Self::table(&self.waiters).retain(|(id, _), _| *id != connection.id);
        Self::table(&self.connections).remove(&connection.id);
        self.send_notices(&notices)
    }

    /// Drops the registrations silent since before `now` minus `channelExpiredTimeout`, closes
    /// their connections and tells the groups that lost members (see
    /// [`ClientRegistry::scan_expired`]). Returns the connections closed.
    pub fn sweep_expired(&self, now: Instant) -> usize {
        let swept = self.clients.scan_expired(now);
        let mut closed = 0;
        {
            let connections = Self::table(&self.connections);
            for id in &swept.close {
                if let Some(c) = connections.get(id).and_then(Weak::upgrade) {
                    c.close("no heartbeat for channelExpiredTimeout");
                    closed += 1;
                }
            }
        }
        self.send_notices(&swept.notices);
        closed
    }

    fn send_notices(&self, notices: &[GroupNotice]) -> usize {
        if !self.settings.notify_consumer_ids_changed_enable {
            return 0;
        }
        let version = self.settings.remoting_version();
        let connections = Self::table(&self.connections);
        let mut sent = 0;
        for notice in notices {
            for id in &notice.connections {
                if let Some(c) = connections.get(id).and_then(Weak::upgrade) {
                    sent += usize::from(c.send(notice.request(version)));
                }
            }
        }
        sent
    }
}

/// The store's arrival listener: wakes the held pulls a new message matches.
struct Arrivals(Weak<ConsumeState>);

impl logship_store::ArrivalListener for Arrivals {
    fn message_arrived(&self, arrival: &logship_store::Arrival<'_>) {
        let Some(state) = self.0.upgrade() else { return };
        let max = i64::try_from(arrival.queue_offset).unwrap_or(i64::MAX).saturating_add(1);
        let woken = state.holds.on_arrival(
            arrival.topic,
            arrival.queue_id,
            max,
            Some(arrival.tags_code),
            Instant::now(),
            || max,
        );
        state.wake(woken);
    }
}

impl ConsumeContext<'_> {
    fn of(broker: &Broker) -> ConsumeContext<'_> {
        ConsumeContext {
            metadata: &broker.metadata,
            store: &broker.store,
            clients: &broker.consume.clients,
            locks: &broker.consume.locks,
            settings: &broker.consume.settings,
            role: if broker.is_slave() { ServingRole::Slave } else { ServingRole::Master },
            slave_offset_warnings: &broker.consume.slave_offset_warnings,
        }
    }
}

fn now_of(ctx: &RequestContext) -> Now {
    Now::new(ctx.broker.host.now(), ctx.now_ms())
}

fn client_of(ctx: &RequestContext) -> ClientConnection {
    ctx.broker.consume.remember(&ctx.connection);
    ClientConnection::new(ctx.connection.id, ctx.connection.peer)
}

/// Carries out a reply's effects and makes it the answer.
fn finish(ctx: &RequestContext, request: &RemotingCommand, reply: Reply) -> Processed {
    let Reply { response, effects } = reply;
    carry_out(ctx, effects);
    let response = response.unwrap_or_else(|| success(request));
    Ok(response.with_version(ctx.broker.settings.version()))
}

fn carry_out(ctx: &RequestContext, effects: Effects) {
    if effects.topics_created {
        ctx.broker.host.topics_changed();
    }
    ctx.broker.consume.send_notices(&effects.notices);
}

/// `HEART_BEAT` (34).
pub fn serve_heart_beat(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let conn = client_of(ctx);
    let reply = crate::clients::heart_beat(&ConsumeContext::of(&ctx.broker), &conn, request, now_of(ctx));
    finish(ctx, request, reply)
}

/// `UNREGISTER_CLIENT` (35).
pub fn serve_unregister_client(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let conn = client_of(ctx);
    let reply =
        crate::clients::unregister_client(&ConsumeContext::of(&ctx.broker), &conn, request, now_of(ctx));
    finish(ctx, request, reply)
}

/// `CHECK_CLIENT_CONFIG` (46).
pub fn serve_check_client_config(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    finish(ctx, request, crate::clients::check_client_config(request))
}

/// `GET_CONSUMER_CONNECTION_LIST` (203).
pub fn serve_consumer_connection_list(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let reply = crate::clients::get_consumer_connection_list(&ConsumeContext::of(&ctx.broker), request);
    finish(ctx, request, reply)
}

/// `GET_PRODUCER_CONNECTION_LIST` (204).
pub fn serve_producer_connection_list(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let reply = crate::clients::get_producer_connection_list(&ConsumeContext::of(&ctx.broker), request);
    finish(ctx, request, reply)
}

/// `GET_CONSUMER_LIST_BY_GROUP` (38).
pub fn serve_consumer_list_by_group(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let reply = crate::consumer_manage::get_consumer_list_by_group(&ConsumeContext::of(&ctx.broker), request);
    finish(ctx, request, reply)
}

/// `QUERY_CONSUMER_OFFSET` (14).
pub fn serve_query_consumer_offset(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let reply =
        crate::consumer_manage::query_consumer_offset_request(&ConsumeContext::of(&ctx.broker), request);
    finish(ctx, request, reply)
}

/// `UPDATE_CONSUMER_OFFSET` (15).
pub fn serve_update_consumer_offset(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let reply = crate::consumer_manage::update_consumer_offset(
        &ConsumeContext::of(&ctx.broker),
        request,
        now_of(ctx),
    );
    finish(ctx, request, reply)
}

/// `LOCK_BATCH_MQ` (41).
pub fn serve_lock_batch_mq(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let reply = crate::lock::lock_batch_mq(&ConsumeContext::of(&ctx.broker), request, now_of(ctx));
    finish(ctx, request, reply)
}

/// `UNLOCK_BATCH_MQ` (42).
pub fn serve_unlock_batch_mq(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let reply = crate::lock::unlock_batch_mq(&ConsumeContext::of(&ctx.broker), request);
    finish(ctx, request, reply)
}

/// Counts a pull's answer in the broker's statistics: the messages it carries, or a miss
/// (`PULL_NOT_FOUND`, `PULL_RETRY_IMMEDIATELY`, `PULL_OFFSET_MOVED`). Refusals are not pulls.
fn count_pull(ctx: &RequestContext, request: &RemotingCommand, r: &crate::pull::PullResponse) {
    let code = ResponseCode(r.command.code);
    if code == ResponseCode::SUCCESS {
        let messages = r.messages.len() as u64;
        ctx.broker.stats.pulled(messages);
        // Java's incGroupGetNums and incGroupGetSize, keyed by the request's group and topic.
        let field = |k: &str| request.ext_fields.get(k).map(String::as_str);
        if let (Some(group), Some(topic)) = (field("consumerGroup"), field("topic")) {
            ctx.broker.stats.group_got(group, topic, messages, r.body_len() as u64);
        }
    } else if [
        ResponseCode::PULL_NOT_FOUND,
        ResponseCode::PULL_RETRY_IMMEDIATELY,
        ResponseCode::PULL_OFFSET_MOVED,
    ]
    .contains(&code)
    {
        ctx.broker.stats.pulled(0);
    }
}

/// `PULL_MESSAGE` (11) and `LITE_PULL_MESSAGE` (361), with long polling (see the
/// [module docs](self)).
pub async fn serve_pull(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let conn = client_of(ctx);
    let state = &ctx.broker.consume;
    let reply = crate::pull::process_pull(
        &ConsumeContext::of(&ctx.broker),
        &conn,
        request,
        Execution::First,
        now_of(ctx),
    );
    carry_out(ctx, reply.effects);
    let held = match reply.outcome {
        PullOutcome::Respond(r) => {
            count_pull(ctx, request, &r);
            return Ok(r.into_command().with_version(ctx.broker.settings.version()));
        }
        PullOutcome::Hold(held) => held,
    };
    let deadline = held.deadline;
    let key = (held.connection, held.request.opaque);
    let (tx, rx) = async_channel::bounded(1);
    ConsumeState::table(&state.waiters).insert(key, tx);
    let store = &ctx.broker.store;
    let topic = held.topic.clone();
    let queue_id = held.queue_id;
    let current_max = || store.queue_bounds(&topic, queue_id).1 as i64;
    let woken_now = match state.holds.hold(*held, current_max) {
        Ok(Hold::Held) => false,
        Ok(Hold::WakeNow(_)) => true,
        Err(refused) => {
            ConsumeState::table(&state.waiters).remove(&key);
            let answer = crate::pull::hold_refused(&refused).into_command();
            return Ok(answer.with_version(ctx.broker.settings.version()));
        }
    };
    if !woken_now {
        let wait = deadline.saturating_duration_since(ctx.broker.host.now());
        let timer = ctx.broker.host.sleep(wait);
        futures_lite::future::or(async { rx.recv().await.ok().unwrap_or(()) }, timer).await;
        // Out of the table whether woken or timed out (a no-op if it was taken).
        let expired = state.holds.poll_expired(ctx.broker.host.now());
        state.wake(expired);
    }
    ConsumeState::table(&state.waiters).remove(&key);
    let rerun = crate::pull::process_pull(
        &ConsumeContext::of(&ctx.broker),
        &conn,
        request,
        Execution::Rerun,
        now_of(ctx),
    );
    carry_out(ctx, rerun.effects);
    let answer = match rerun.outcome {
        PullOutcome::Respond(r) => {
            count_pull(ctx, request, &r);
            r.into_command()
        }
        PullOutcome::Hold(h) => {
            ctx.broker.stats.pulled(0);
            answer(&h.request, ResponseCode::PULL_NOT_FOUND, "OFFSET_OVERFLOW_ONE")
        }
    };
    Ok(answer.with_version(ctx.broker.settings.version()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use logship_core::{MessageLog, PutStatus};
    use logship_remoting::body::{
        ConsumerData, GetConsumerListByGroupResponseBody, HeartbeatData, JsonBody, LockBatchRequestBody,
        LockBatchResponseBody, MessageQueue, SubscriptionData, TopicConfig,
    };
    use logship_remoting::{RemotingCommand, RequestCode, ResponseCode};
    use logship_store::Message;

    use crate::BrokerSettings;
    use crate::serve::testing::{Sent, broker, call};
    use crate::serve::{Connection, RequestContext};

    const GROUP: &str = "cg";
    const TOPIC: &str = "T";

    fn with_topic(dir: &std::path::Path) -> RequestContext {
        let (ctx, _) = broker(dir, BrokerSettings::default());
        ctx.broker.metadata.topics.create_if_absent(TopicConfig::with_queues(TOPIC, 4, 4, 6), 1).unwrap();
        ctx
    }

    fn on_connection(ctx: &RequestContext, id: u64, port: u16) -> (RequestContext, Arc<Sent>) {
        let sent = Arc::new(Sent::default());
        let c = Connection::new(
            id,
            format!("10.0.0.{id}:{port}").parse().unwrap(),
            "127.0.0.1:10911".parse().unwrap(),
            sent.clone(),
        );
        (RequestContext::new(ctx.broker.clone(), Arc::new(c)), sent)
    }

    fn heartbeat(client_id: &str) -> RemotingCommand {
        let sub = SubscriptionData {
            topic: TOPIC.into(),
            sub_string: "*".into(),
            expression_type: Some("TAG".into()),
            ..SubscriptionData::default()
        };
        let consumer = ConsumerData {
            group_name: GROUP.into(),
            consume_type: Some("CONSUME_PASSIVELY".into()),
            message_model: Some("CLUSTERING".into()),
            consume_from_where: Some("CONSUME_FROM_LAST_OFFSET".into()),
            subscription_data_set: vec![sub],
            ..ConsumerData::default()
        };
        let hb = HeartbeatData {
            client_id: client_id.into(),
            consumer_data_set: vec![consumer],
            ..HeartbeatData::default()
        };
        RemotingCommand::request(RequestCode::HEART_BEAT).with_body(hb.encode())
    }

    fn pull(queue_offset: i64, suspend_ms: i64, sys_flag: i32) -> RemotingCommand {
        RemotingCommand::request(RequestCode::PULL_MESSAGE)
            .with_opaque(77)
            .with_ext_field("consumerGroup", GROUP)
            .with_ext_field("topic", TOPIC)
            .with_ext_field("queueId", "1")
            .with_ext_field("queueOffset", queue_offset.to_string())
            .with_ext_field("maxMsgNums", "32")
            .with_ext_field("sysFlag", sys_flag.to_string())
            .with_ext_field("commitOffset", "0")
            .with_ext_field("suspendTimeoutMillis", suspend_ms.to_string())
            .with_ext_field("subscription", "*")
            .with_ext_field("subVersion", "1")
            .with_ext_field("expressionType", "TAG")
    }

    /// Suspend and subscription flags: the pull carries its filter and may be held.
    const SUSPEND_WITH_SUB: i32 = crate::pull::sys_flag::SUSPEND | crate::pull::sys_flag::SUBSCRIPTION;

    fn put(ctx: &RequestContext, body: &'static [u8]) {
        let r = MessageLog::put(&*ctx.broker.store, Message::new(TOPIC, 1, body).with_tags("a"));
        assert_eq!(r.status, PutStatus::PutOk);
    }

    fn wait_until_held(ctx: &RequestContext) {
        for _ in 0..2000 {
            if !ctx.broker.consume.holds.is_empty() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        panic!("the pull was never held");
    }

    #[test]
    fn a_second_consumer_of_a_group_is_listed_and_the_first_is_told() {
        let d = tempfile::tempdir().unwrap();
        let ctx = with_topic(d.path());
        let (first, first_sent) = on_connection(&ctx, 2, 40002);
        let (second, second_sent) = on_connection(&ctx, 3, 40003);
        assert_eq!(call(&first, heartbeat("c1")).code, 0);
        assert_eq!(call(&second, heartbeat("c2")).code, 0);
        let list = RemotingCommand::request(RequestCode::GET_CONSUMER_LIST_BY_GROUP)
            .with_ext_field("consumerGroup", GROUP);
        let r = call(&first, list.clone());
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let mut ids = GetConsumerListByGroupResponseBody::decode(&r.body).unwrap().consumer_id_list;
        ids.sort();
        assert_eq!(ids, ["c1", "c2"]);
        let notices = first_sent.0.lock().unwrap().clone();
        assert!(
            notices.iter().any(|n| n.code == RequestCode::NOTIFY_CONSUMER_IDS_CHANGED.0 && n.is_oneway()),
            "the first consumer is told its group changed: {notices:?}"
        );
        // The second leaves by closing its connection: the first is told again, and only it is listed.
        let before = first_sent.0.lock().unwrap().len();
        ctx.broker.connection_closed(&second.connection);
        assert!(first_sent.0.lock().unwrap().len() > before);
        let r = call(&first, list);
        assert_eq!(GetConsumerListByGroupResponseBody::decode(&r.body).unwrap().consumer_id_list, ["c1"]);
        drop(second_sent);
    }

    #[test]
    fn a_committed_offset_is_answered_and_written_to_consumer_offset_json() {
        let d = tempfile::tempdir().unwrap();
        let ctx = with_topic(d.path());
        assert_eq!(call(&ctx, heartbeat("c1")).code, 0);
        for _ in 0..5 {
            put(&ctx, b"m");
        }
        let update = RemotingCommand::request(RequestCode::UPDATE_CONSUMER_OFFSET)
            .with_ext_field("consumerGroup", GROUP)
            .with_ext_field("topic", TOPIC)
            .with_ext_field("queueId", "1")
            .with_ext_field("commitOffset", "3");
        let r = call(&ctx, update);
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let query = RemotingCommand::request(RequestCode::QUERY_CONSUMER_OFFSET)
            .with_ext_field("consumerGroup", GROUP)
            .with_ext_field("topic", TOPIC)
            .with_ext_field("queueId", "1");
        let r = call(&ctx, query);
        assert_eq!(
            (r.code, r.ext_fields.get("offset").map(String::as_str)),
            (0, Some("3")),
            "{:?}",
            r.remark
        );
        ctx.broker.metadata.persist_if_dirty().unwrap();
        let file = std::fs::read_to_string(d.path().join("config/consumerOffset.json")).unwrap();
        assert!(file.contains("T@cg"), "{file}");
    }

    #[test]
    fn a_locked_queue_is_refused_to_another_client_until_unlocked() {
        let d = tempfile::tempdir().unwrap();
        let ctx = with_topic(d.path());
        let lock = |client: &str, code: RequestCode| {
            let body = LockBatchRequestBody {
                client_id: client.into(),
                consumer_group: GROUP.into(),
                mq_set: vec![MessageQueue::new(TOPIC, "broker-a", 1)],
                only_this_broker: None,
            };
            call(&ctx, RemotingCommand::request(code).with_body(body.encode()))
        };
        let locked =
            |r: RemotingCommand| LockBatchResponseBody::decode(&r.body).unwrap().lock_ok_mq_set.len();
        assert_eq!(locked(lock("c1", RequestCode::LOCK_BATCH_MQ)), 1);
        assert_eq!(locked(lock("c2", RequestCode::LOCK_BATCH_MQ)), 0);
        assert_eq!(lock("c1", RequestCode::UNLOCK_BATCH_MQ).code, 0);
        assert_eq!(locked(lock("c2", RequestCode::LOCK_BATCH_MQ)), 1);
    }

    #[test]
    fn a_pull_returns_the_stored_messages() {
        let d = tempfile::tempdir().unwrap();
        let ctx = with_topic(d.path());
        put(&ctx, b"one");
        put(&ctx, b"two");
        let r = call(&ctx, pull(0, 1000, SUSPEND_WITH_SUB));
        assert_eq!(r.code, ResponseCode::SUCCESS.0, "{:?}", r.remark);
        assert_eq!(r.ext_fields.get("nextBeginOffset").map(String::as_str), Some("2"));
        let mut bodies = Vec::new();
        let mut at = 0;
        while at < r.body.len() {
            let m = logship_store::StoredMessage::decode(&r.body.slice(at..)).unwrap();
            at += i32::from_be_bytes(r.body[at..at + 4].try_into().unwrap()) as usize;
            bodies.push(m.body);
        }
        assert_eq!(bodies, [&b"one"[..], b"two"]);
    }

    #[test]
    fn a_held_pull_is_answered_not_found_when_its_suspend_timeout_passes() {
        let d = tempfile::tempdir().unwrap();
        let ctx = with_topic(d.path());
        let r = call(&ctx, pull(0, 50, SUSPEND_WITH_SUB));
        assert_eq!((r.code, r.opaque), (ResponseCode::PULL_NOT_FOUND.0, 77), "{:?}", r.remark);
        assert_eq!(ctx.broker.consume.holds.len(), 0, "nothing stays held");
    }

    #[test]
    fn a_held_pull_is_answered_when_a_message_arrives() {
        let d = tempfile::tempdir().unwrap();
        let ctx = with_topic(d.path());
        let (tx, rx) = std::sync::mpsc::channel();
        let puller = ctx.clone();
        // Held for up to 20 s: only the arrival can answer it within the 10 s waited below.
        std::thread::spawn(move || tx.send(call(&puller, pull(0, 20_000, SUSPEND_WITH_SUB))).unwrap());
        wait_until_held(&ctx);
        put(&ctx, b"late");
        let r = rx.recv_timeout(Duration::from_secs(10)).expect("the arrival wakes the pull");
        assert_eq!((r.code, r.opaque), (ResponseCode::SUCCESS.0, 77), "{:?}", r.remark);
        assert!(ctx.broker.consume.holds.is_empty());
    }

    #[test]
    fn held_pulls_of_a_closed_connection_are_dropped() {
        let d = tempfile::tempdir().unwrap();
        let ctx = with_topic(d.path());
        let (conn, _) = on_connection(&ctx, 5, 40005);
        let puller = conn.clone();
        std::thread::spawn(move || {
            let _ = call(&puller, pull(0, 20_000, SUSPEND_WITH_SUB));
        });
        wait_until_held(&ctx);
        ctx.broker.connection_closed(&conn.connection);
        assert_eq!(ctx.broker.consume.holds.len(), 0);
        assert_eq!(ctx.broker.consume.holds.bytes(), 0);
    }

    #[test]
    fn a_client_silent_for_the_expiry_is_swept_its_connection_closed_and_its_group_told() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, host) = crate::serve::testing::broker(d.path(), BrokerSettings::default());
        ctx.broker.metadata.topics.create_if_absent(TopicConfig::with_queues(TOPIC, 4, 4, 6), 1).unwrap();
        let (quiet, quiet_sent) = on_connection(&ctx, 2, 40002);
        let (chatty, chatty_sent) = on_connection(&ctx, 3, 40003);
        assert_eq!(call(&quiet, heartbeat("c1")).code, 0);
        assert_eq!(call(&chatty, heartbeat("c2")).code, 0);
        let advance = |s: u64| host.advanced_ms.fetch_add(s * 1000, std::sync::atomic::Ordering::AcqRel);
        // 60 s on, only the chatty one beats again; at 119 s nobody has been silent past 120 s.
        advance(60);
        assert_eq!(call(&chatty, heartbeat("c2")).code, 0);
        advance(59);
        assert_eq!(ctx.broker.sweep_clients(), 0, "119 s is not past the expiry");
        let told_before = chatty_sent.0.lock().unwrap().len();
        advance(2);
        assert_eq!(ctx.broker.sweep_clients(), 1);
        assert!(quiet_sent.1.lock().unwrap().as_deref().is_some_and(|r| r.contains("heartbeat")));
        assert!(chatty_sent.1.lock().unwrap().is_none());
        let ids = |c: &RequestContext| {
            let r = call(
                c,
                RemotingCommand::request(RequestCode::GET_CONSUMER_LIST_BY_GROUP)
                    .with_ext_field("consumerGroup", GROUP),
            );
            GetConsumerListByGroupResponseBody::decode(&r.body).unwrap().consumer_id_list
        };
        assert_eq!(ids(&chatty), ["c2"]);
        let told: Vec<_> = chatty_sent.0.lock().unwrap()[told_before..].to_vec();
        assert!(
            told.iter().any(|n| n.code == RequestCode::NOTIFY_CONSUMER_IDS_CHANGED.0),
            "the member left is told: {told:?}"
        );
        // The rest expires too once silent, and its group goes.
        advance(121);
        assert_eq!(ctx.broker.sweep_clients(), 1);
        assert_eq!(ctx.broker.consume.clients.registrations(), 0);
    }

    /// Everything a `tracing` subscriber writes, kept for a test to read.
    #[derive(Clone, Default)]
    struct Captured(Arc<std::sync::Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Self;
        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    impl Captured {
        fn lines_with(&self, text: &str) -> Vec<String> {
            let all = String::from_utf8(self.0.lock().unwrap().clone()).unwrap();
            all.lines().filter(|l| l.contains(text)).map(str::to_string).collect()
        }
    }

    #[test]
    fn a_slave_logs_out_of_range_pulls_of_a_queue_a_bounded_number_of_times() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, host) = broker(d.path(), BrokerSettings::default());
        ctx.broker.metadata.topics.create_if_absent(TopicConfig::with_queues(TOPIC, 4, 4, 6), 1).unwrap();
        put(&ctx, b"one");
        *host.role.lock().unwrap() = Some(logship_core::BrokerRole::Slave);
        let logs = Captured::default();
        let subscriber = tracing_subscriber::fmt().with_writer(logs.clone()).with_ansi(false).finish();
        let started = std::time::Instant::now();
        let pulls = 1000;
        tracing::subscriber::with_default(subscriber, || {
            for _ in 0..pulls {
                let r = call(&ctx, pull(100, 0, crate::pull::sys_flag::SUBSCRIPTION));
                assert_eq!(r.code, ResponseCode::PULL_RETRY_IMMEDIATELY.0, "{:?}", r.remark);
            }
        });
        let lines = logs.lines_with("offset out of range on a slave");
        // One line when the first pull comes, then at most one per 10 s window that passed.
        let windows = started.elapsed().as_secs() / 10 + 1;
        assert!(!lines.is_empty(), "the first out-of-range pull is logged");
        assert!(
            lines.len() as u64 <= windows,
            "{pulls} pulls in {windows} windows logged {} lines",
            lines.len()
        );
        assert!(
            lines[0].contains("topic=\"T\"")
                && lines[0].contains("queue_id=1")
                && lines[0].contains("offset=100"),
            "the line keeps the values: {}",
            lines[0]
        );
        // After the window, the next one is logged with the count of those left out.
        host.advanced_ms.fetch_add(11_000, std::sync::atomic::Ordering::AcqRel);
        let logs_after = Captured::default();
        let subscriber = tracing_subscriber::fmt().with_writer(logs_after.clone()).with_ansi(false).finish();
        tracing::subscriber::with_default(subscriber, || {
            call(&ctx, pull(100, 0, crate::pull::sys_flag::SUBSCRIPTION));
        });
        let after = logs_after.lines_with("offset out of range on a slave");
        assert_eq!(after.len(), 1, "{after:?}");
        let left_out = pulls - lines.len();
        assert!(after[0].contains(&format!("suppressed={left_out}")), "{}", after[0]);
        // Another queue is logged on its own.
        let logs_other = Captured::default();
        let subscriber = tracing_subscriber::fmt().with_writer(logs_other.clone()).with_ansi(false).finish();
        let other = pull(100, 0, crate::pull::sys_flag::SUBSCRIPTION).with_ext_field("queueId", "2");
        tracing::subscriber::with_default(subscriber, || {
            call(&ctx, other);
        });
        assert_eq!(logs_other.lines_with("offset out of range on a slave").len(), 1);
    }
}
