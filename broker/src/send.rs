//! Producing: `SEND_MESSAGE` (10), `SEND_MESSAGE_V2` (310) and `SEND_BATCH_MESSAGE` (320), as
//! Java's `SendMessageProcessor` answers them, with the checks in Java's order, Java's codes
//! and remarks (of the line emulated, [`RocketmqLine`]), and the stored message as a Java
//! broker of that line stores it.
//!
//! Where logship differs on purpose:
//! - client `sysFlag` bits the broker derives itself (the host families, 0x10 and 0x20) or that
//!   select an encoding logship does not write (inner batches, 0x40 and 0x80) are dropped
//!   instead of stored: Java stores them and can write records no reader parses;
//! - transactions and timer messages are refused (logship implements neither), with the
//!   answers a Java broker configured without them gives;
//! - a put always waits as the role and `flushDiskType` say, even when the message asks not
//!   to (`WAIT=false`): the same guarantee as every other put;
//! - a header field that is missing or not a number gets `SYSTEM_ERROR` naming the field, where
//!   Java answers with a `NullPointerException`'s text.

use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use logship_core::{PutResult, PutStatus};
use logship_remoting::header::{
    SendMessageRequestHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader,
};
use logship_remoting::{RemotingCommand, RequestCode, ResponseCode, version};
use logship_store::Message;
use logship_store::codec::{BatchEntry, sys_flag};

use crate::names::{self, perm};
use crate::properties::JavaProperties;
use crate::serve::{Processed, PutOutcome, Refusal, RequestContext};
use crate::settings::RocketmqLine;
use crate::topic::{TopicConfig, TopicCreation, TopicFilterType};

/// `MessageConst` property names the send path reads or writes.
pub mod property {
    /// The message's tags.
    pub const TAGS: &str = "TAGS";
    /// Its keys, space-separated.
    pub const KEYS: &str = "KEYS";
    /// The client's message id.
    pub const UNIQ_KEY: &str = "UNIQ_KEY";
    /// Whether the producer waits for the store (`true` when absent).
    pub const WAIT: &str = "WAIT";
    /// The delay level.
    pub const DELAY: &str = "DELAY";
    /// The cluster the broker stored it in.
    pub const CLUSTER: &str = "CLUSTER";
    /// The real topic of a delayed message.
    pub const REAL_TOPIC: &str = "REAL_TOPIC";
    /// The real queue of a delayed message.
    pub const REAL_QID: &str = "REAL_QID";
    /// A prepared transactional message.
    pub const TRAN_MSG: &str = "TRAN_MSG";
    /// The broker's region (5.x stores it).
    pub const MSG_REGION: &str = "MSG_REGION";
    /// Whether tracing is on (5.x stores it).
    pub const TRACE_ON: &str = "TRACE_ON";
    /// A pop consumer's checkpoint (reserved: 5.x deletes it from sends).
    pub const POP_CK: &str = "POP_CK";
    /// 5.x timer messages.
    pub const TIMER: [&str; 3] = ["TIMER_DELIVER_MS", "TIMER_DELAY_SEC", "TIMER_DELAY_MS"];
}

/// The `sysFlag` bits a client may set: compression and its type, and the transaction type.
const CLIENT_SYS_FLAGS: i32 = sys_flag::COMPRESSED | 0x700 | sys_flag::TRANSACTION_MASK;

/// Java's `[REJECTREQUEST]` remark.
pub const REJECT_REQUEST_REMARK: &str = "[REJECTREQUEST]system busy, start flow control for a while";

/// `FAQUrl.suggestTodo(url)` of the line (no client parses it; it ends up in exceptions).
fn faq(line: RocketmqLine) -> &'static str {
    match line {
        RocketmqLine::V4_9 => "\nSee http://rocketmq.apache.org/docs/faq/ for further details.",
        RocketmqLine::V5 => "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.",
    }
}

/// Java's `TopicConfig.toString()` of the line.
fn topic_config_text(c: &TopicConfig, line: RocketmqLine) -> String {
    let mut s = format!(
        "TopicConfig [topicName={}, readQueueNums={}, writeQueueNums={}, perm={}, topicFilterType={}, \
         topicSysFlag={}, order={}",
        c.topic_name,
        c.read_queue_nums,
        c.write_queue_nums,
        perm::to_string(c.perm),
        c.topic_filter_type.as_str(),
        c.topic_sys_flag,
        c.order
    );
    if line == RocketmqLine::V5 {
        let attrs: Vec<String> = c.attributes.iter().map(|(k, v)| format!("{k}={v}")).collect();
        s.push_str(&format!(", attributes={{{}}}", attrs.join(", ")));
    }
    s.push(']');
    s
}

/// A small generator for the queue a send with queue id -1 goes to, and the counters of
/// generated ids (no clock is read: seeded from the connection and the time passed in).
fn next_random(seed: u64) -> u64 {
    static STATE: AtomicU64 = AtomicU64::new(0x9E37_79B9_7F4A_7C15);
    let mut x = STATE.fetch_add(seed | 1, Ordering::Relaxed).wrapping_mul(0x2545_F491_4F6C_DD1D);
    x ^= x >> 29;
    x
}

/// The broker-made `UNIQ_KEY` of a 5.x send without one (`MessageClientIDSetter.createUniqID`):
/// upper-case hex of the broker's IP, a process number, a class-loader hash stand-in, the
/// milliseconds since the start of the month (UTC) and a counter, so that a client reading the
/// time out of it (`getNearlyTimeFromID`, for queries by id) finds the right window.
fn create_uniq_id(ctx: &RequestContext, now_ms: i64) -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut bytes = Vec::with_capacity(28);
    match ctx.broker.settings.broker_ip1 {
        std::net::IpAddr::V4(ip) => bytes.extend_from_slice(&ip.octets()),
        std::net::IpAddr::V6(ip) => bytes.extend_from_slice(&ip.octets()),
    }
    bytes.extend_from_slice(&(std::process::id() as u16).to_be_bytes());
    bytes.extend_from_slice(&0x4C4F_4753u32.to_be_bytes()); // "LOGS"
    let since_month = (now_ms - month_start_utc(now_ms)).clamp(0, i64::from(i32::MAX)) as i32;
    bytes.extend_from_slice(&since_month.to_be_bytes());
    bytes.extend_from_slice(&(COUNTER.fetch_add(1, Ordering::Relaxed) as u16).to_be_bytes());
    bytes.iter().map(|b| format!("{b:02X}")).collect()
}

/// The first millisecond of the UTC month of `ms`.
fn month_start_utc(ms: i64) -> i64 {
    let days = ms.div_euclid(86_400_000);
    // Civil from days (Howard Hinnant's algorithm), then back with day 1.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5; // 0-based day of month
    (days - day) * 86_400_000
}

/// What [`send_message`] checked and decided before building the message.
struct Checked {
    header: SendMessageRequestHeader,
    topic: TopicConfig,
    queue_id: i32,
}

/// The extFields every send answer carries, after the first checks (Java adds them before any).
fn region_fields(ctx: &RequestContext) -> [(String, String); 2] {
    let s = &ctx.broker.settings;
    [
        (property::MSG_REGION.to_string(), s.region_id.clone()),
        (property::TRACE_ON.to_string(), s.trace_on.to_string()),
    ]
}

/// A refusal carrying the region fields.
fn refuse(ctx: &RequestContext, code: ResponseCode, remark: impl Into<String>) -> Refusal {
    let mut r = Refusal::new(code, remark);
    r.ext_fields.extend(region_fields(ctx));
    r
}

/// `INVALID_PARAMETER` in 5.x, `SYSTEM_ERROR` in 4.9 (where the code does not exist).
fn invalid_parameter(line: RocketmqLine) -> ResponseCode {
    match line {
        RocketmqLine::V4_9 => ResponseCode::SYSTEM_ERROR,
        RocketmqLine::V5 => ResponseCode::INVALID_PARAMETER,
    }
}

/// `SEND_MESSAGE` (10), `SEND_MESSAGE_V2` (310), `SEND_BATCH_MESSAGE` (320).
pub(crate) async fn send_message(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let line = ctx.broker.settings.line;
    // 5.x: a slave's send processor rejects the request before reading it.
    if line == RocketmqLine::V5 && ctx.broker.is_slave() {
        return Err(Refusal::new(ResponseCode::SYSTEM_BUSY, REJECT_REQUEST_REMARK));
    }
    let header: SendMessageRequestHeader = match request.request_code() {
        RequestCode::SEND_MESSAGE => request.decode_header()?,
        _ => request.decode_header::<SendMessageRequestHeaderV2>()?.into(),
    };
    if line == RocketmqLine::V5 && request.body.is_empty() {
        return Err(Refusal::system_error(
            "the request has no body: a message needs one (a 5.x broker refuses an empty body)",
        ));
    }
    let checked = check(ctx, header)?;
    if checked.header.batch.unwrap_or(false) {
        send_batch(ctx, request, checked).await
    } else {
        send_single(ctx, request, checked).await
    }
}

/// Java's `preSend` and `msgCheck`: the checks every send goes through, in Java's order.
fn check(ctx: &RequestContext, header: SendMessageRequestHeader) -> Result<Checked, Refusal> {
    let b = &ctx.broker;
    let s = &b.settings;
    let line = s.line;
    let now = ctx.now_ms();
    if now < s.start_accept_send_request_time_stamp {
        return Err(refuse(
            ctx,
            ResponseCode::SYSTEM_ERROR,
            format!(
                "broker unable to service, until {} (ms since the epoch)",
                s.start_accept_send_request_time_stamp
            ),
        ));
    }
    let topic = header.topic.as_str();
    if !perm::is_writeable(s.broker_permission) && b.metadata.topics.is_order_topic(topic) {
        return Err(refuse(
            ctx,
            ResponseCode::NO_PERMISSION,
            format!("the broker[{}] sending message is forbidden", s.broker_ip1),
        ));
    }
    validate_topic(ctx, topic)?;
    if names::is_not_allowed_send_topic(topic) {
        return Err(refuse(
            ctx,
            ResponseCode::NO_PERMISSION,
            format!("Sending message to topic[{topic}] is forbidden."),
        ));
    }
    let config = match b.metadata.topics.select(topic) {
        Some(c) => c,
        None => create_topic(ctx, &header, now)?,
    };
    let valid = config.write_queue_nums.max(config.read_queue_nums);
    if header.queue_id >= valid {
        return Err(refuse(
            ctx,
            invalid_parameter(line),
            format!(
                "request queueId[{}] is illegal, {} Producer: {}",
                header.queue_id,
                topic_config_text(&config, line),
                ctx.connection.peer
            ),
        ));
    }
    let queue_id = if header.queue_id < 0 {
        if config.write_queue_nums <= 0 {
            return Err(refuse(
                ctx,
                ResponseCode::SYSTEM_ERROR,
                format!("topic[{topic}] has no write queue (writeQueueNums={})", config.write_queue_nums),
            ));
        }
        (next_random(ctx.connection.id) % 99_999_999 % config.write_queue_nums as u64) as i32
    } else {
        header.queue_id
    };
    Ok(Checked { header, topic: config, queue_id })
}

/// `TopicValidator.validateTopic` with the line's code and remarks.
fn validate_topic(ctx: &RequestContext, topic: &str) -> Result<(), Refusal> {
    let line = ctx.broker.settings.line;
    let remark = if topic.trim().is_empty() {
        "The specified topic is blank.".to_string()
    } else if !topic.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-')) {
        match line {
            RocketmqLine::V4_9 => {
                "The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
                    .to_string()
            }
            RocketmqLine::V5 => format!(
                "The specified topic: {topic}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
            ),
        }
    } else if topic.len() > names::TOPIC_MAX_LENGTH {
        match line {
            RocketmqLine::V4_9 => "The specified topic is longer than topic max length.".to_string(),
            RocketmqLine::V5 => format!(
                "The specified topic: {topic}, is longer than topic max length: {}",
                names::TOPIC_MAX_LENGTH
            ),
        }
    } else {
        return Ok(());
    };
    Err(refuse(ctx, invalid_parameter(line), remark))
}

/// `createTopicInSendMessageMethod`, then the retry-topic fallback, else `TOPIC_NOT_EXIST`.
fn create_topic(
    ctx: &RequestContext,
    header: &SendMessageRequestHeader,
    now: i64,
) -> Result<TopicConfig, Refusal> {
    let b = &ctx.broker;
    let topic = header.topic.as_str();
    let retry = names::is_retry_topic(topic);
    let sys_flag = match header.unit_mode.unwrap_or(false) {
        false => 0,
        // TopicSysFlag.buildSysFlag(unit, hasUnitSub).
        true if retry => 0x2,
        true => 0x1,
    };
    let not_exist = || {
        refuse(
            ctx,
            ResponseCode::TOPIC_NOT_EXIST,
            format!("topic[{topic}] not exist, apply first please!{}", faq(b.settings.line)),
        )
    };
    let created = b
        .metadata
        .topics
        .create_in_send_message(topic, &header.default_topic, header.default_topic_queue_nums, sys_flag, now)
        .map_err(|_| not_exist())?;
    let created = match created {
        TopicCreation::Refused { reason } if retry => {
            tracing::debug!(topic, reason, "no default topic; creating the retry topic");
            b.metadata
                .topics
                .create_in_send_message_back(topic, 1, perm::READ | perm::WRITE, None, sys_flag, now)
                .map_err(|_| not_exist())?
        }
        other => other,
    };
    match created {
        TopicCreation::Created(c) => {
            tracing::info!(topic, producer = %ctx.connection.peer, queues = c.write_queue_nums, "topic created by a send");
            b.host.topics_changed();
            Ok(c)
        }
        TopicCreation::Existing(c) => Ok(c),
        TopicCreation::Refused { reason } => {
            tracing::debug!(topic, reason, "send to an unknown topic refused");
            Err(not_exist())
        }
    }
}

/// The properties a Java broker of the line starts from: the request's, then (5.x) the
/// region and trace fields the send context adds, without the reserved `POP_CK`.
fn request_properties(ctx: &RequestContext, header: &SendMessageRequestHeader) -> JavaProperties {
    let line = ctx.broker.settings.line;
    let raw = header.properties.as_deref().unwrap_or_default();
    match line {
        RocketmqLine::V4_9 => JavaProperties::parse(line, raw),
        RocketmqLine::V5 => {
            let mut first = JavaProperties::parse(line, raw);
            first.put(property::MSG_REGION, &ctx.broker.settings.region_id);
            first.put(property::TRACE_ON, if ctx.broker.settings.trace_on { "true" } else { "false" });
            // The header's properties become this map's string, then are parsed again: the
            // same map, without building the string.
            let mut props = first.reparsed(line);
            props.remove(property::POP_CK);
            props
        }
    }
}

/// The client's `sysFlag`, cut to the bits a client may set, plus `MULTI_TAGS` for a
/// multi-tag topic.
fn stored_sys_flag(header_flag: i32, topic: &TopicConfig) -> i32 {
    let mut flag = header_flag & CLIENT_SYS_FLAGS;
    if topic.topic_filter_type == TopicFilterType::MultiTag {
        flag |= sys_flag::MULTI_TAGS;
    }
    flag
}

async fn send_single(ctx: &RequestContext, request: &RemotingCommand, checked: Checked) -> Processed {
    let b = &ctx.broker;
    let s = &b.settings;
    let line = s.line;
    let Checked { header, topic: mut topic_config, mut queue_id } = checked;
    let mut topic = header.topic.clone();
    let mut props = request_properties(ctx, &header);
    let reconsume_times = header.reconsume_times.unwrap_or(0);
    // handleRetryAndDLQ.
    if names::is_retry_topic(&topic) {
        let group = &topic[names::RETRY_GROUP_TOPIC_PREFIX.len()..];
        let now = ctx.now_ms();
        let Some((group_config, created)) = b.metadata.groups.find_subscription_group_config(group, now)
        else {
            return Err(refuse(
                ctx,
                ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
                format!("subscription group not exist, {group} {}", faq(line)),
            ));
        };
        if created {
            tracing::info!(group, "subscription group created by a send to its retry topic");
        }
        let mut max = group_config.retry_max_times;
        if request.version >= version::V3_4_9 {
            if let Some(m) = header.max_reconsume_times {
                max = m;
            }
        }
        let to_dlq = match line {
            RocketmqLine::V4_9 => reconsume_times >= max,
            RocketmqLine::V5 => reconsume_times > max,
        };
        if to_dlq {
            let dlq = names::dlq_topic(group);
            if line == RocketmqLine::V5 {
                props.put(property::DELAY, "-1");
            }
            match b.metadata.topics.create_in_send_message_back(
                &dlq,
                1,
                perm::READ | perm::WRITE,
                None,
                0,
                now,
            ) {
                Ok(TopicCreation::Created(c)) => {
                    b.host.topics_changed();
                    topic_config = c;
                }
                Ok(TopicCreation::Existing(c)) => topic_config = c,
                _ => return Err(refuse(ctx, ResponseCode::SYSTEM_ERROR, format!("topic[{dlq}] not exist"))),
            }
            tracing::info!(group, reconsume_times, max, "a retry message goes to the dead-letter topic");
            topic = dlq;
            queue_id = 0;
        }
    }
    let sys_flag = stored_sys_flag(header.sys_flag, &topic_config);
    // 5.x generates the client id a message lacks.
    let mut uniq_key = props.get(property::UNIQ_KEY).map(str::to_string);
    if line == RocketmqLine::V5 && uniq_key.as_deref().is_none_or(str::is_empty) {
        let id = create_uniq_id(ctx, ctx.now_ms());
        props.put(property::UNIQ_KEY, &id);
        uniq_key = Some(id);
    }
    if line == RocketmqLine::V5
        && topic_config.attributes.get("cleanup.policy").is_some_and(|p| p == "COMPACTION")
    {
        if props.get(property::KEYS).is_none_or(|k| k.trim().is_empty()) {
            return Err(refuse(ctx, ResponseCode::MESSAGE_ILLEGAL, "Required message key is missing"));
        }
    }
    props.put(property::CLUSTER, &s.broker_cluster_name);
    // 4.9 stores the string without WAIT, then puts WAIT back into the map (at its bucket's end).
    let mut properties_string = props.serialize(line);
    if line == RocketmqLine::V4_9 {
        if let Some(wait) = props.remove(property::WAIT) {
            properties_string = props.serialize(line);
            props.put(property::WAIT, &wait);
        }
    }
    let delay_level = props.get(property::DELAY).and_then(|d| d.parse::<i32>().ok()).unwrap_or(0);
    let transaction = props.get(property::TRAN_MSG).is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if transaction && !(reconsume_times > 0 && delay_level > 0) {
        return Err(refuse(
            ctx,
            ResponseCode::NO_PERMISSION,
            format!("the broker[{}] sending transaction message is forbidden", s.broker_ip1),
        ));
    }
    if line == RocketmqLine::V5 && property::TIMER.iter().any(|t| props.contains(t)) {
        return Err(refuse(
            ctx,
            ResponseCode::SYSTEM_ERROR,
            "accurate timer message is not enabled, timerWheelEnable is false",
        ));
    }
    // The store's (4.9) or the put hook's (5.x) delay: the message waits in the schedule topic.
    let transaction_type = header.sys_flag & sys_flag::TRANSACTION_MASK;
    let committable =
        matches!(transaction_type, sys_flag::TRANSACTION_NOT_TYPE | sys_flag::TRANSACTION_COMMIT_TYPE);
    // The answer names the queue asked for (or the DLQ's), not the schedule topic's.
    let answered_queue = queue_id;
    if delay_level > 0 && committable {
        let max = b.metadata.delays.levels().max_level();
        let level = delay_level.min(max);
        props.put(property::DELAY, &level.to_string());
        props.put(property::REAL_TOPIC, &topic);
        props.put(property::REAL_QID, &queue_id.to_string());
        properties_string = props.serialize(line);
        topic = names::SCHEDULE_TOPIC.to_string();
        queue_id = crate::delay::delay_level_to_queue_id(level);
    }
    // The topic the statistics count the put under: the stored one (a DLQ's, the schedule
    // topic), as Java counts `msg.getTopic()`; copied only when it is not the header's.
    let counted_topic = (topic != header.topic).then(|| topic.clone());
    let message = Message {
        flag: header.flag,
        sys_flag,
        born_timestamp: header.born_timestamp,
        born_host: ctx.connection.peer,
        reconsume_times,
        properties_string: Some(properties_string),
        ..Message::new(topic, queue_id, request.body.clone())
    };
    let started = ctx.now_ms();
    let outcome = b.host.put(message).await;
    count_put(ctx, &outcome, (counted_topic.as_deref().unwrap_or(&header.topic), 1), started);
    answer(ctx, request, outcome, answered_queue, (line == RocketmqLine::V5).then_some(uniq_key).flatten())
}

async fn send_batch(ctx: &RequestContext, request: &RemotingCommand, checked: Checked) -> Processed {
    let b = &ctx.broker;
    let s = &b.settings;
    let line = s.line;
    let Checked { header, topic: topic_config, queue_id } = checked;
    let topic = header.topic.clone();
    if line == RocketmqLine::V5 && names::is_retry_topic(&topic) {
        return Err(refuse(
            ctx,
            ResponseCode::MESSAGE_ILLEGAL,
            format!("batch request does not support retry group {topic}"),
        ));
    }
    if topic.len() > names::TOPIC_MAX_LENGTH {
        return Err(refuse(
            ctx,
            ResponseCode::MESSAGE_ILLEGAL,
            format!("message topic length too long {}", topic.len()),
        ));
    }
    let illegal = || {
        refuse(
            ctx,
            ResponseCode::MESSAGE_ILLEGAL,
            format!(
                "the message is illegal, maybe msg body or properties length not matched. msg body length limit {}B, msg properties length limit 32KB.",
                s.max_message_size
            ),
        )
    };
    if request.body.len() > s.max_message_size as usize {
        return Err(illegal());
    }
    let header_props = JavaProperties::parse(line, header.properties.as_deref().unwrap_or_default());
    let delayed = header_props.get(property::DELAY).and_then(|d| d.parse::<i32>().ok()).unwrap_or(0) > 0;
    if header.sys_flag & sys_flag::TRANSACTION_MASK != 0 || delayed {
        return Err(illegal());
    }
    let mut entries =
        decode_batch(&request.body).map_err(|why| refuse(ctx, ResponseCode::SYSTEM_ERROR, why))?;
    if entries.is_empty() {
        return Err(refuse(ctx, ResponseCode::MESSAGE_ILLEGAL, "the batch holds no message"));
    }
    if line == RocketmqLine::V4_9 {
        // 4.9 appends the batch's own properties (the header's, and CLUSTER) to every message.
        let mut batch_props = header_props.clone();
        batch_props.put(property::CLUSTER, &s.broker_cluster_name);
        let suffix = batch_props.serialize(line);
        for e in &mut entries {
            if !e.properties_string.is_empty() && !e.properties_string.ends_with('\u{2}') {
                e.properties_string.push('\u{2}');
            }
            e.properties_string.push_str(&suffix);
        }
    }
    let messages = entries.len() as u64;
    let message = Message {
        sys_flag: stored_sys_flag(header.sys_flag, &topic_config),
        born_timestamp: header.born_timestamp,
        born_host: ctx.connection.peer,
        reconsume_times: header.reconsume_times.unwrap_or(0),
        batch: entries,
        ..Message::new(topic, queue_id, Bytes::new())
    };
    let started = ctx.now_ms();
    let outcome = b.host.put(message).await;
    count_put(ctx, &outcome, (&header.topic, messages), started);
    let batch_uniq = (line == RocketmqLine::V5)
        .then(|| header_props.get(property::UNIQ_KEY).map(str::to_string))
        .flatten();
    answer(ctx, request, outcome, queue_id, batch_uniq)
}

/// The records of a `SEND_BATCH_MESSAGE` body (`MessageDecoder.decodeMessages` of the client's
/// `encodeMessages`): `i32 totalSize | i32 magic | i32 bodyCRC | i32 flag | i32 bodyLength |
/// body | i16 propertiesLength | properties`, big-endian, back to back.
pub fn decode_batch(body: &Bytes) -> Result<Vec<BatchEntry>, String> {
    let mut out = Vec::new();
    let mut at = 0usize;
    while at < body.len() {
        let start = at;
        let bad = |what: &str| format!("the batch body is not a batch of messages: {what} at byte {start}");
        let rest = &body[at..];
        let int = |off: usize| -> Option<i32> {
            rest.get(off..off + 4).map(|b| i32::from_be_bytes(b.try_into().expect("4 bytes")))
        };
        let (Some(total), Some(flag), Some(body_len)) = (int(0), int(12), int(16)) else {
            return Err(bad("a message header that ends early"));
        };
        let (Ok(total), Ok(body_len)) = (usize::try_from(total), usize::try_from(body_len)) else {
            return Err(bad("a negative length"));
        };
        let props_at = 20usize.checked_add(body_len).ok_or_else(|| bad("a body length too large"))?;
        let Some(pl) = rest.get(props_at..props_at + 2) else {
            return Err(bad("a body that runs past the end"));
        };
        let props_len = i16::from_be_bytes([pl[0], pl[1]]);
        let Ok(props_len) = usize::try_from(props_len) else {
            return Err(bad("a negative properties length"));
        };
        let end = props_at + 2 + props_len;
        if end > rest.len() {
            return Err(bad("properties that run past the end"));
        }
        if total != end {
            return Err(bad(&format!("a totalSize of {total} where the fields take {end}")));
        }
        let Ok(properties) = std::str::from_utf8(&rest[props_at + 2..end]) else {
            return Err(bad("properties that are not UTF-8"));
        };
        out.push(BatchEntry {
            flag,
            body: body.slice(at + 20..at + 20 + body_len),
            properties_string: properties.to_string(),
        });
        at += end;
    }
    Ok(out)
}

/// Counts a put of `messages` messages that started at `started_ms` in the broker's
/// statistics: stored (whatever the replication or flush wait said), or refused by the store.
/// A put the host refused before the store saw it is not counted.
fn count_put(ctx: &RequestContext, outcome: &PutOutcome, (topic, messages): (&str, u64), started_ms: i64) {
    let PutOutcome::Put(result) = outcome else { return };
    let stats = &ctx.broker.stats;
    match result.status {
        PutStatus::PutOk
        | PutStatus::FlushDiskTimeout
        | PutStatus::FlushSlaveTimeout
        | PutStatus::SlaveNotAvailable => {
            let took = u64::try_from(ctx.now_ms().saturating_sub(started_ms)).unwrap_or(0);
            stats.put_stored(topic, messages, u64::from(result.wrote_bytes), took);
        }
        _ => stats.put_failed(),
    }
}

/// The answer to a put (Java's `handlePutMessageResult`).
fn answer(
    ctx: &RequestContext,
    request: &RemotingCommand,
    outcome: PutOutcome,
    queue_id: i32,
    transaction_id: Option<String>,
) -> Processed {
    let result: PutResult = match outcome {
        PutOutcome::Put(r) => r,
        PutOutcome::Refused { reason, stored } => {
            tracing::debug!(reason, stored, "the host refused a send");
            return Err(refuse(
                ctx,
                ResponseCode::SERVICE_NOT_AVAILABLE,
                service_not_available(ctx, &reason),
            ));
        }
    };
    let code = match result.status {
        PutStatus::PutOk => ResponseCode::SUCCESS,
        PutStatus::FlushDiskTimeout => ResponseCode::FLUSH_DISK_TIMEOUT,
        PutStatus::FlushSlaveTimeout => ResponseCode::FLUSH_SLAVE_TIMEOUT,
        PutStatus::SlaveNotAvailable => ResponseCode::SLAVE_NOT_AVAILABLE,
        PutStatus::InSyncReplicasNotEnough => {
            return Err(refuse(ctx, ResponseCode::SYSTEM_ERROR, "in-sync replicas not enough"));
        }
        PutStatus::ServiceNotAvailable => {
            let why = ctx.broker.store.write_refusal().map(|e| e.to_string()).unwrap_or_default();
            return Err(refuse(ctx, ResponseCode::SERVICE_NOT_AVAILABLE, service_not_available(ctx, &why)));
        }
        PutStatus::MessageIllegal | PutStatus::PropertiesSizeExceeded => {
            return Err(refuse(
                ctx,
                ResponseCode::MESSAGE_ILLEGAL,
                format!(
                    "the message is illegal, maybe msg body or properties length not matched. msg body length limit {}B, msg properties length limit 32KB.",
                    ctx.broker.settings.max_message_size
                ),
            ));
        }
        PutStatus::UnknownError => {
            return Err(refuse(
                ctx,
                ResponseCode::SYSTEM_ERROR,
                "create mapped file failed, server is busy or broken.",
            ));
        }
        _ => return Err(refuse(ctx, ResponseCode::SYSTEM_ERROR, "UNKNOWN_ERROR")),
    };
    let header = SendMessageResponseHeader {
        transaction_id,
        ..SendMessageResponseHeader::new(result.msg_id, queue_id, result.queue_offset as i64)
    };
    let mut response = ctx.response(request, code).with_header(&header);
    response.ext_fields.extend(region_fields(ctx));
    Ok(response)
}

/// Java's `SERVICE_NOT_AVAILABLE` remark: the used share of the commit log's disk in Java's
/// `diskUtil` form (`CL`, `CQ` and `INDEX`, all on the store's disk here; -1 before the first
/// measurement, as Java's failed reading). Logship's reason is logged, not added.
fn service_not_available(ctx: &RequestContext, why: &str) -> String {
    let ratio = ctx.broker.store.status().disk_used_ratio.unwrap_or(-1.0);
    tracing::debug!(why, "a send is refused SERVICE_NOT_AVAILABLE");
    format!(
        "service not available now. It may be caused by one of the following reasons: the broker's \
         disk is full [CL: {ratio:5.2} CQ: {ratio:5.2} INDEX: {ratio:5.2}], messages are put to the slave, \
         message store has been shut down, etc."
    )
}

#[cfg(test)]
mod tests;
