//! Producer and consumer registrations: `HEART_BEAT` (34), `UNREGISTER_CLIENT` (35),
//! `CHECK_CLIENT_CONFIG` (46), the connection lists (203, 204) and the
//! `NOTIFY_CONSUMER_IDS_CHANGED` (40) notices a broker sends when a group's members change
//! (Java's `ConsumerManager`, `ProducerManager` and `ClientManageProcessor`).
//!
//! Registrations are kept per connection, as Java keeps them per channel. They end when the
//! connection closes ([`ClientRegistry::connection_closed`]), on `UNREGISTER_CLIENT`, or when
//! no heartbeat came for `channelExpiredTimeout` (120 s; [`ClientRegistry::scan_expired`],
//! which the glue runs every 10 s and whose connections it closes). Each consumer group keeps
//! one subscription table shared by its members, as in Java: a member's heartbeat adds the
//! topics it subscribes, replaces a subscription with a higher `subVersion`, and removes the
//! topics it does not mention.
//!
//! Everything from a client is bounded: registrations in all ([`ClientLimits`]) and the
//! subscriptions of a group. A heartbeat beyond a bound is refused with `SYSTEM_ERROR`, naming
//! the bound, instead of growing the tables.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use logship_remoting::body::{
    CheckClientRequestBody, Connection, ConsumerConnection, ConsumerData, HeartbeatData, JsonBody,
    ProducerConnection, SubscriptionData,
};
use logship_remoting::header::{NotifyConsumerIdsChangedRequestHeader, UnregisterClientRequestHeader};
use logship_remoting::{ExtFields, LanguageCode, RemotingCommand, RequestCode, ResponseCode};
use logship_store::TagFilter;
use logship_store::codec::java_string_hash;

use crate::consume::{
    ClientConnection, ConnectionId, ConsumeContext, Effects, Now, Reply, answer, bad_body, bad_header,
    success,
};
use crate::names::{self, perm};
use crate::settings::RocketmqLine;
use crate::topic::TopicCreation;

/// `TopicSysFlag.buildSysFlag(false, true)`: the flag of a unit-mode consumer's retry topic.
const TOPIC_SYS_FLAG_UNIT_SUB: i32 = 0x1 << 1;

/// `ExpressionType.TAG`.
pub const EXPRESSION_TYPE_TAG: &str = "TAG";

/// `SubscriptionData.SUB_ALL`.
pub const SUB_ALL: &str = "*";

/// Whether `expression_type` is a TAG expression (`ExpressionType.isTagType`: absent, empty or
/// `TAG`).
pub fn is_tag_type(expression_type: Option<&str>) -> bool {
    expression_type.is_none_or(|t| t.is_empty() || t == EXPRESSION_TYPE_TAG)
}

/// Bounds on what clients may register.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientLimits {
    /// Registrations (one per group and connection, producers and consumers together).
    pub max_registrations: usize,
    /// Subscriptions (topics) of one consumer group.
    pub max_subscriptions_per_group: usize,
}

impl Default for ClientLimits {
    fn default() -> Self {
        Self { max_registrations: 200_000, max_subscriptions_per_group: 10_000 }
    }
}

/// What a client said about itself on a connection (Java's `ClientChannelInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientChannel {
    /// The connection.
    pub connection: ClientConnection,
    /// The client's id (`clientID` of the heartbeat).
    pub client_id: String,
    /// The language the client's requests say.
    pub language: LanguageCode,
    /// The protocol version the client's requests carry.
    pub version: i32,
}

#[derive(Clone, Debug)]
struct ChannelEntry {
    info: ClientChannel,
    last_update: Instant,
}

/// A subscription as a group registered it: the heartbeat's data and the tag filter it means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegisteredSubscription {
    /// As the heartbeat sent it.
    pub data: SubscriptionData,
    /// The consume-queue filter (`ExpressionMessageFilter.isMatchedByConsumeQueue`).
    pub filter: TagFilter,
}

impl RegisteredSubscription {
    /// The subscription `data` means: every message for a class filter or `*`; otherwise the
    /// tags whose hash codes the heartbeat sent, and also the Java hash codes of its tags
    /// (which differ from the Go client's UTF-8 hashes for non-ASCII tags; consumers filter
    /// again by tag text, so matching more is harmless where matching less loses messages).
    pub fn new(data: SubscriptionData) -> Self {
        let filter = if data.class_filter_mode || data.sub_string == SUB_ALL {
            TagFilter::All
        } else {
            let mut codes: std::collections::HashSet<i32> = data.code_set.iter().copied().collect();
            codes.extend(data.tags_set.iter().map(|t| java_string_hash(t)));
            TagFilter::Codes(codes)
        };
        Self { data, filter }
    }

    /// Whether the subscription is a TAG expression.
    pub fn is_tag_type(&self) -> bool {
        is_tag_type(self.data.expression_type.as_deref())
    }
}

#[derive(Clone, Debug)]
struct ConsumerGroup {
    consume_type: Option<String>,
    message_model: Option<String>,
    consume_from_where: Option<String>,
    channels: BTreeMap<ConnectionId, ChannelEntry>,
    subscriptions: BTreeMap<String, RegisteredSubscription>,
}

impl ConsumerGroup {
    fn connections(&self) -> Vec<ConnectionId> {
        self.channels.keys().copied().collect()
    }
}

/// What a consumer group's registration says for a pull without the subscription flag.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PullRegistration {
    /// No member of the group is registered.
    NoGroup,
    /// The group is registered.
    Group {
        /// Whether it consumes by broadcast.
        broadcasting: bool,
        /// Its subscription to the pulled topic, if any.
        subscription: Option<RegisteredSubscription>,
    },
}

/// `NOTIFY_CONSUMER_IDS_CHANGED` (40) for the connections of a group whose members changed:
/// the glue sends [`request`](Self::request) one-way on each connection (Java waits 10 ms for
/// the write and gives up; a notice that cannot be written is dropped, clients rebalance every
/// 20 s anyway).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupNotice {
    /// The group.
    pub group: String,
    /// The connections to tell.
    pub connections: Vec<ConnectionId>,
}

impl GroupNotice {
    /// The request to send (the glue sets its opaque): code 40, one-way, header
    /// `consumerGroup`, no body, with the broker's protocol `version`.
    pub fn request(&self, version: i32) -> RemotingCommand {
        RemotingCommand::request(RequestCode::NOTIFY_CONSUMER_IDS_CHANGED)
            .with_version(version)
            .with_header(&NotifyConsumerIdsChangedRequestHeader::new(self.group.clone()))
            .oneway()
    }
}

#[derive(Debug, Default)]
struct Tables {
    consumers: BTreeMap<String, ConsumerGroup>,
    producers: BTreeMap<String, BTreeMap<ConnectionId, ChannelEntry>>,
    registrations: usize,
}

/// Why a registration was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RegistrationRefused {
    /// The registry holds `max` registrations.
    #[error("the broker holds {max} client registrations, its limit; retry later or raise the limit")]
    TooManyRegistrations {
        /// The limit.
        max: usize,
    },
    /// The group would have more subscriptions than allowed.
    #[error("consumer group {group} would subscribe {count} topics, more than the limit of {max}")]
    TooManySubscriptions {
        /// The group.
        group: String,
        /// How many.
        count: usize,
        /// The limit.
        max: usize,
    },
}

/// What [`ClientRegistry::scan_expired`] dropped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Swept {
    /// The connections whose registrations expired: close them.
    pub close: Vec<ConnectionId>,
    /// The consumer groups that lost members, with the members left to tell.
    pub notices: Vec<GroupNotice>,
}

/// The broker's producer and consumer registrations. Every method takes `&self`.
#[derive(Debug)]
pub struct ClientRegistry {
    limits: ClientLimits,
    expiry: Duration,
    inner: Mutex<Tables>,
}

/// What registering a consumer changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registered {
    /// Whether the members or the subscriptions changed (Java's `registerConsumer` result).
    pub changed: bool,
    /// The notice to send, if the change is to be told.
    pub notice: Option<GroupNotice>,
}

impl ClientRegistry {
    /// An empty registry with `limits`; registrations expire after `channel_expired_timeout`
    /// without a heartbeat.
    pub fn new(limits: ClientLimits, channel_expired_timeout: Duration) -> Self {
        Self { limits, expiry: channel_expired_timeout, inner: Mutex::default() }
    }

    fn tables(&self) -> std::sync::MutexGuard<'_, Tables> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `registerConsumer`: registers `channel` as a member of `group` with its consume type,
    /// model and start rule (the last heartbeat's win), and the group's subscriptions from
    /// `subscriptions` (`None`: leave them, as a heartbeat without subscriptions does). A
    /// change is told to every member, the newcomer included, when `notify` is on.
    #[allow(clippy::too_many_arguments)]
    pub fn register_consumer(
        &self,
        group: &str,
        channel: ClientChannel,
        consume_type: Option<String>,
        message_model: Option<String>,
        consume_from_where: Option<String>,
        subscriptions: Option<&[SubscriptionData]>,
        notify: bool,
        now: Instant,
    ) -> Result<Registered, RegistrationRefused> {
        let mut t = self.tables();
        let exists = t.consumers.get(group).is_some_and(|g| g.channels.contains_key(&channel.connection.id));
        if !exists && t.registrations >= self.limits.max_registrations {
            return Err(RegistrationRefused::TooManyRegistrations { max: self.limits.max_registrations });
        }
        if let Some(subs) = subscriptions {
            let topics: BTreeSet<&str> = subs.iter().map(|s| s.topic.as_str()).collect();
            if topics.len() > self.limits.max_subscriptions_per_group {
                return Err(RegistrationRefused::TooManySubscriptions {
                    group: group.to_string(),
                    count: topics.len(),
                    max: self.limits.max_subscriptions_per_group,
                });
            }
        }
        let Tables { consumers, registrations, .. } = &mut *t;
        let g = consumers.entry(group.to_string()).or_insert_with(|| ConsumerGroup {
            consume_type: consume_type.clone(),
            message_model: message_model.clone(),
            consume_from_where: consume_from_where.clone(),
            channels: BTreeMap::new(),
            subscriptions: BTreeMap::new(),
        });
        g.consume_type = consume_type;
        g.message_model = message_model;
        g.consume_from_where = consume_from_where;
        let mut changed = false;
        match g.channels.get_mut(&channel.connection.id) {
            None => {
                tracing::info!(group, client = %channel.client_id, addr = %channel.connection.remote_addr, "new consumer connected");
                g.channels.insert(channel.connection.id, ChannelEntry { info: channel, last_update: now });
                *registrations += 1;
                changed = true;
            }
            Some(entry) => {
                if entry.info.client_id != channel.client_id {
                    tracing::warn!(group, old = %entry.info.client_id, new = %channel.client_id, "a connection's client id changed");
                    entry.info = channel;
                }
                entry.last_update = now;
            }
        }
        if let Some(subs) = subscriptions {
            changed |= update_subscriptions(group, &mut g.subscriptions, subs);
        }
        let notice = (changed && notify)
            .then(|| GroupNotice { group: group.to_string(), connections: g.connections() });
        Ok(Registered { changed, notice })
    }

    /// `unregisterConsumer`: removes `connection` from `group` (a group left without members
    /// goes); the remaining members are told when `notify` is on.
    pub fn unregister_consumer(
        &self,
        group: &str,
        connection: ConnectionId,
        notify: bool,
    ) -> Option<GroupNotice> {
        let mut t = self.tables();
        let Tables { consumers, registrations, .. } = &mut *t;
        let g = consumers.get_mut(group)?;
        if g.channels.remove(&connection).is_some() {
            *registrations -= 1;
            tracing::info!(group, connection, "consumer unregistered");
        }
        let remaining = g.connections();
        if remaining.is_empty() {
            consumers.remove(group);
        }
        (notify && !remaining.is_empty())
            .then(|| GroupNotice { group: group.to_string(), connections: remaining })
    }

    /// `registerProducer`: registers `channel` as a producer of `group`, or refreshes it.
    pub fn register_producer(
        &self,
        group: &str,
        channel: ClientChannel,
        now: Instant,
    ) -> Result<(), RegistrationRefused> {
        let mut t = self.tables();
        let exists = t.producers.get(group).is_some_and(|g| g.contains_key(&channel.connection.id));
        if !exists && t.registrations >= self.limits.max_registrations {
            return Err(RegistrationRefused::TooManyRegistrations { max: self.limits.max_registrations });
        }
        let Tables { producers, registrations, .. } = &mut *t;
        let g = producers.entry(group.to_string()).or_default();
        match g.get_mut(&channel.connection.id) {
            Some(entry) => {
                entry.info.client_id.clone_from(&channel.client_id);
                entry.last_update = now;
            }
            None => {
                g.insert(channel.connection.id, ChannelEntry { info: channel, last_update: now });
                *registrations += 1;
            }
        }
        Ok(())
    }

    /// `unregisterProducer`: removes `connection` from `group`.
    pub fn unregister_producer(&self, group: &str, connection: ConnectionId) {
        let mut t = self.tables();
        let Tables { producers, registrations, .. } = &mut *t;
        if let Some(g) = producers.get_mut(group) {
            if g.remove(&connection).is_some() {
                *registrations -= 1;
            }
            if g.is_empty() {
                producers.remove(group);
            }
        }
    }

    /// `doChannelCloseEvent`: a connection closed; its registrations go. Returns the notices for
    /// the consumer groups it was in that still have members (Java tells them whatever the
    /// group's own setting; the glue drops them when the broker-wide
    /// `notifyConsumerIdsChangedEnable` is off).
    pub fn connection_closed(&self, connection: ConnectionId) -> Vec<GroupNotice> {
        let mut t = self.tables();
        let Tables { consumers, producers, registrations } = &mut *t;
        let mut notices = Vec::new();
        consumers.retain(|group, g| {
            if g.channels.remove(&connection).is_some() {
                *registrations -= 1;
                tracing::info!(group, connection, "consumer connection closed");
                if !g.channels.is_empty() {
                    notices.push(GroupNotice { group: group.clone(), connections: g.connections() });
                }
            }
            !g.channels.is_empty()
        });
        producers.retain(|_, g| {
            if g.remove(&connection).is_some() {
                *registrations -= 1;
            }
            !g.is_empty()
        });
        notices
    }

    /// `scanNotActiveChannel`: drops every registration without a heartbeat for
    /// `channelExpiredTimeout` at `now`. Returns the connections to close and, for each
    /// consumer group that lost a member and still has others, the notice to tell them (Java
    /// closes the channel and its close event usually finds the registration already gone, so
    /// there the others learn at their next rebalance; logship tells them at once, as it does
    /// for a closed connection).
    pub fn scan_expired(&self, now: Instant) -> Swept {
        let expiry = self.expiry;
        let expired = |e: &ChannelEntry| now.saturating_duration_since(e.last_update) > expiry;
        let mut t = self.tables();
        let Tables { consumers, producers, registrations } = &mut *t;
        let mut close = BTreeSet::new();
        let mut notices = Vec::new();
        for (group, g) in consumers.iter_mut() {
            let before = g.channels.len();
            g.channels.retain(|&id, e| {
                let keep = !expired(e);
                if !keep {
                    tracing::warn!(group, connection = id, client = %e.info.client_id, addr = %e.info.connection.remote_addr, "consumer registration expired: no heartbeat");
                    close.insert(id);
                    *registrations -= 1;
                }
                keep
            });
            if g.channels.len() < before && !g.channels.is_empty() {
                notices.push(GroupNotice { group: group.clone(), connections: g.connections() });
            }
        }
        consumers.retain(|_, g| !g.channels.is_empty());
        for (group, g) in producers.iter_mut() {
            g.retain(|&id, e| {
                let keep = !expired(e);
                if !keep {
                    tracing::warn!(group, connection = id, client = %e.info.client_id, addr = %e.info.connection.remote_addr, "producer registration expired: no heartbeat");
                    close.insert(id);
                    *registrations -= 1;
                }
                keep
            });
        }
        producers.retain(|_, g| !g.is_empty());
        Swept { close: close.into_iter().collect(), notices }
    }

    /// The client ids of `group`'s members (`getAllClientId`), `None` for an unknown group.
    pub fn consumer_ids(&self, group: &str) -> Option<Vec<String>> {
        let t = self.tables();
        let g = t.consumers.get(group)?;
        Some(g.channels.values().map(|e| e.info.client_id.clone()).collect())
    }

    /// What a pull of `topic` without the subscription flag finds for `group`.
    pub fn pull_registration(&self, group: &str, topic: &str) -> PullRegistration {
        let t = self.tables();
        match t.consumers.get(group) {
            None => PullRegistration::NoGroup,
            Some(g) => PullRegistration::Group {
                broadcasting: g.message_model.as_deref() == Some(ConsumerData::BROADCASTING),
                subscription: g.subscriptions.get(topic).cloned(),
            },
        }
    }

    /// The connection of a client of `group` by its client id (`findChannel`).
    pub fn find_consumer_channel(&self, group: &str, client_id: &str) -> Option<ClientChannel> {
        let t = self.tables();
        t.consumers
            .get(group)?
            .channels
            .values()
            .find(|e| e.info.client_id == client_id)
            .map(|e| e.info.clone())
    }

    /// Every consumer group registered, with its member count.
    pub fn consumer_groups(&self) -> BTreeMap<String, usize> {
        self.tables().consumers.iter().map(|(k, g)| (k.clone(), g.channels.len())).collect()
    }

    /// `findSubscriptionDataCount`: how many topics `group`'s members subscribe (0 for a group
    /// without members).
    pub fn subscription_count(&self, group: &str) -> usize {
        self.tables().consumers.get(group).map_or(0, |g| g.subscriptions.len())
    }

    /// Whether `group`'s members subscribe `topic` (`findSubscriptionData` is not null).
    pub fn subscribes(&self, group: &str, topic: &str) -> bool {
        self.tables().consumers.get(group).is_some_and(|g| g.subscriptions.contains_key(topic))
    }

    /// `queryTopicConsumeByWho`: the groups with a member subscribing `topic`.
    pub fn groups_subscribing(&self, topic: &str) -> BTreeSet<String> {
        let t = self.tables();
        t.consumers
            .iter()
            .filter(|(_, g)| g.subscriptions.contains_key(topic))
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// Registrations held (producers and consumers).
    pub fn registrations(&self) -> usize {
        self.tables().registrations
    }

    /// The body of `GET_CONSUMER_CONNECTION_LIST` for `group`, `None` if it has no member.
    pub fn consumer_connection(&self, group: &str) -> Option<ConsumerConnection> {
        let t = self.tables();
        let g = t.consumers.get(group)?;
        Some(ConsumerConnection {
            connection_set: g.channels.values().map(connection_of).collect(),
            consume_from_where: g.consume_from_where.clone(),
            consume_type: g.consume_type.clone(),
            message_model: g.message_model.clone(),
            subscription_table: g.subscriptions.iter().map(|(k, s)| (k.clone(), s.data.clone())).collect(),
        })
    }

    /// The body of `GET_PRODUCER_CONNECTION_LIST` for `group`, `None` if it has no member.
    pub fn producer_connection(&self, group: &str) -> Option<ProducerConnection> {
        let t = self.tables();
        let g = t.producers.get(group)?;
        Some(ProducerConnection { connection_set: g.values().map(connection_of).collect() })
    }
}

fn connection_of(e: &ChannelEntry) -> Connection {
    Connection {
        client_addr: e.info.connection.addr_text(),
        client_id: e.info.client_id.clone(),
        language: e.info.language.name().map(str::to_string),
        version: e.info.version,
    }
}

/// `ConsumerGroupInfo.updateSubscription`: returns whether a topic was added or removed.
fn update_subscriptions(
    group: &str,
    table: &mut BTreeMap<String, RegisteredSubscription>,
    subs: &[SubscriptionData],
) -> bool {
    let mut changed = false;
    for sub in subs {
        match table.get(&sub.topic) {
            None => {
                tracing::info!(group, topic = %sub.topic, expression = %sub.sub_string, "subscription added");
                table.insert(sub.topic.clone(), RegisteredSubscription::new(sub.clone()));
                changed = true;
            }
            Some(old) if sub.sub_version > old.data.sub_version => {
                tracing::info!(group, topic = %sub.topic, expression = %sub.sub_string, "subscription changed");
                table.insert(sub.topic.clone(), RegisteredSubscription::new(sub.clone()));
            }
            Some(_) => {}
        }
    }
    let wanted: BTreeSet<&str> = subs.iter().map(|s| s.topic.as_str()).collect();
    table.retain(|topic, _| {
        let keep = wanted.contains(topic.as_str());
        if !keep {
            tracing::warn!(group, topic, "subscription removed");
            changed = true;
        }
        keep
    });
    changed
}

fn channel_of(conn: &ClientConnection, client_id: &str, request: &RemotingCommand) -> ClientChannel {
    ClientChannel {
        connection: *conn,
        client_id: client_id.to_string(),
        language: request.language,
        version: request.version,
    }
}

/// `HEART_BEAT` (34): registers the client's producer and consumer groups on `conn`, creating
/// each consumer group's subscription-group config (with `autoCreateSubscriptionGroup`) and
/// retry topic. A group whose config cannot be created is skipped in 5.x and registered
/// without a retry topic in 4.9, as each line does; a group without a name is skipped.
///
/// The answer is `SUCCESS` without ext fields: logship does not offer 5.x's heartbeat V2, so
/// clients keep sending whole heartbeats (and a `withoutSub` heartbeat leaves the group's
/// subscriptions as they are).
pub(crate) fn heart_beat(
    ctx: &ConsumeContext<'_>,
    conn: &ClientConnection,
    request: &RemotingCommand,
    now: Now,
) -> Reply {
    let hb = match HeartbeatData::decode(&request.body) {
        Ok(hb) => hb,
        Err(e) => return Reply::to(request, bad_body(request, &e)),
    };
    let settings = ctx.settings;
    let v5 = settings.line == RocketmqLine::V5;
    let mut effects = Effects::default();
    let keep_subs = hb.without_sub != Some(true);
    for data in &hb.consumer_data_set {
        let group = data.group_name.as_str();
        if group.trim().is_empty() {
            tracing::warn!(addr = %conn.remote_addr, "heartbeat with a nameless consumer group; skipped");
            continue;
        }
        let has_order_topic_sub =
            data.subscription_data_set.iter().any(|s| ctx.metadata.topics.is_order_topic(&s.topic));
        let config = ctx.metadata.groups.find_subscription_group_config(group, now.wall_ms);
        let mut notify = true;
        match config {
            None if v5 => {
                tracing::warn!(group, "heartbeat for a group that cannot be created; skipped");
                continue;
            }
            None => {}
            Some((config, created)) => {
                effects.groups_created |= created;
                notify = config.notify_consumer_ids_changed_enable;
                let sys_flag = if data.unit_mode { TOPIC_SYS_FLAG_UNIT_SUB } else { 0 };
                let retry = names::retry_topic(group);
                match ctx.metadata.topics.create_in_send_message_back(
                    &retry,
                    config.retry_queue_nums,
                    perm::READ | perm::WRITE,
                    v5.then_some(has_order_topic_sub),
                    sys_flag,
                    now.wall_ms,
                ) {
                    Ok(TopicCreation::Created(_)) => effects.topics_created = true,
                    Ok(_) => {}
                    Err(e) => tracing::warn!(group, error = %e, "cannot create the retry topic"),
                }
            }
        }
        let subs = keep_subs.then_some(data.subscription_data_set.as_slice());
        match ctx.clients.register_consumer(
            group,
            channel_of(conn, &hb.client_id, request),
            data.consume_type.clone(),
            data.message_model.clone(),
            data.consume_from_where.clone(),
            subs,
            notify && settings.notify_consumer_ids_changed_enable,
            now.instant,
        ) {
            Ok(r) => effects.notices.extend(r.notice),
            Err(e) => {
                tracing::warn!(group, addr = %conn.remote_addr, error = %e, "heartbeat refused");
                return Reply::to(request, answer(request, ResponseCode::SYSTEM_ERROR, e.to_string()))
                    .with_effects(effects);
            }
        }
    }
    for data in &hb.producer_data_set {
        if data.group_name.trim().is_empty() {
            continue;
        }
        if let Err(e) = ctx.clients.register_producer(
            &data.group_name,
            channel_of(conn, &hb.client_id, request),
            now.instant,
        ) {
            tracing::warn!(group = %data.group_name, addr = %conn.remote_addr, error = %e, "heartbeat refused");
            return Reply::to(request, answer(request, ResponseCode::SYSTEM_ERROR, e.to_string()))
                .with_effects(effects);
        }
    }
    Reply::to(request, success(request)).with_effects(effects)
}

/// `UNREGISTER_CLIENT` (35): removes `conn` from the named producer group and/or consumer
/// group; the consumer group's remaining members are told (with the group's
/// `notifyConsumerIdsChangedEnable`). Always `SUCCESS`.
pub(crate) fn unregister_client(
    ctx: &ConsumeContext<'_>,
    conn: &ClientConnection,
    request: &RemotingCommand,
    now: Now,
) -> Reply {
    let header: UnregisterClientRequestHeader = match request.decode_header() {
        Ok(h) => h,
        Err(e) => return Reply::to(request, bad_header(request, &e)),
    };
    let mut effects = Effects::default();
    if let Some(group) = &header.producer_group {
        ctx.clients.unregister_producer(group, conn.id);
    }
    if let Some(group) = &header.consumer_group {
        let mut notify = true;
        if let Some((config, created)) =
            ctx.metadata.groups.find_subscription_group_config(group, now.wall_ms)
        {
            effects.groups_created |= created;
            notify = config.notify_consumer_ids_changed_enable;
        }
        let notify = notify && ctx.settings.notify_consumer_ids_changed_enable;
        effects.notices.extend(ctx.clients.unregister_consumer(group, conn.id, notify));
    }
    Reply::to(request, success(request)).with_effects(effects)
}

/// `CHECK_CLIENT_CONFIG` (46): a TAG subscription is fine; any other expression type is
/// refused as a Java broker without `enablePropertyFilter` refuses it (logship has no SQL92
/// filter), so such consumers fail at start rather than lose messages.
pub(crate) fn check_client_config(request: &RemotingCommand) -> Reply {
    let body = match CheckClientRequestBody::decode(&request.body) {
        Ok(b) => b,
        Err(e) => return Reply::to(request, bad_body(request, &e)),
    };
    let kind = body.subscription_data.as_ref().and_then(|s| s.expression_type.clone());
    if is_tag_type(kind.as_deref()) {
        return Reply::to(request, success(request));
    }
    let kind = kind.unwrap_or_default();
    Reply::to(
        request,
        answer(
            request,
            ResponseCode::SYSTEM_ERROR,
            format!("The broker does not support consumer to filter message by {kind}"),
        ),
    )
}

/// `GET_CONSUMER_CONNECTION_LIST` (203): the group's connections and subscriptions, or
/// `CONSUMER_NOT_ONLINE` (206).
pub(crate) fn get_consumer_connection_list(ctx: &ConsumeContext<'_>, request: &RemotingCommand) -> Reply {
    let group = match required_text(&request.ext_fields, "consumerGroup") {
        Ok(g) => g,
        Err(e) => return Reply::to(request, bad_header(request, &e)),
    };
    match ctx.clients.consumer_connection(&group) {
        Some(body) => Reply::to(request, success(request).with_body(body.encode())),
        None => Reply::to(
            request,
            answer(
                request,
                ResponseCode::CONSUMER_NOT_ONLINE,
                format!("the consumer group[{group}] not online"),
            ),
        ),
    }
}

/// `GET_PRODUCER_CONNECTION_LIST` (204): the group's connections, or `SYSTEM_ERROR` as Java
/// answers an unknown group.
pub(crate) fn get_producer_connection_list(ctx: &ConsumeContext<'_>, request: &RemotingCommand) -> Reply {
    let group = match required_text(&request.ext_fields, "producerGroup") {
        Ok(g) => g,
        Err(e) => return Reply::to(request, bad_header(request, &e)),
    };
    match ctx.clients.producer_connection(&group) {
        Some(body) => Reply::to(request, success(request).with_body(body.encode())),
        None => Reply::to(
            request,
            answer(request, ResponseCode::SYSTEM_ERROR, format!("the producer group[{group}] not exist")),
        ),
    }
}

/// A header of one required text field (`GetConsumerConnectionListRequestHeader`,
/// `GetProducerConnectionListRequestHeader`).
fn required_text(fields: &ExtFields, name: &'static str) -> Result<String, logship_remoting::HeaderError> {
    fields.get(name).cloned().ok_or(logship_remoting::HeaderError::MissingField { field: name })
}
