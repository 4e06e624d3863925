//! `CONSUMER_SEND_MSG_BACK` (36): a consumer hands back a message it could not consume (Java's
//! `SendMessageProcessor.consumerSendMsgBack`, 5.x `AbstractSendMessageProcessor`).
//!
//! # Steps, in Java's order, and their answers
//!
//! 1. 5.x: a slave rejects it (`SYSTEM_BUSY`, `[REJECTREQUEST]`);
//! 2. the group's config cannot be found or created: `SUBSCRIPTION_GROUP_NOT_EXIST`;
//! 3. the broker is not writable: `NO_PERMISSION`;
//! 4. the group has no retry queues: `SUCCESS`, nothing stored;
//! 5. `%RETRY%<group>` is created if missing (`retryQueueNums` queues, read and write); not
//!    writable: `NO_PERMISSION`;
//! 6. the record at the header's commit-log `offset` is read from this broker; none:
//!    `SYSTEM_ERROR` `look message by offset failed, <offset>`;
//! 7. the threshold is the group's `retryMaxTimes`, or the header's `maxReconsumeTimes` when the
//!    request's version is at least 121 (3.4.9) and it carries one;
//! 8. the record has been reconsumed at least that often, or the header's `delayLevel` is
//!    negative: it goes to `%DLQ%<group>` (created with 1 queue, read and write), queue 0,
//!    `DELAY=0`; otherwise to `%RETRY%<group>`, a queue picked round-robin, at delay level
//!    `delayLevel`, or `3 + reconsumeTimes` when that is 0, through the schedule topic;
//! 9. the new message has the record's body, flag, sysFlag, born time and host and
//!    properties, plus `RETRY_TOPIC` (the first real topic, kept across retries), `WAIT=false`,
//!    `DELAY` and `ORIGIN_MESSAGE_ID` (the record's own, or its offset message id), and
//!    `reconsumeTimes + 1`. It is put through the host's put path (replicated like any send);
//!    `PUT_OK` answers `SUCCESS`, any other status `SYSTEM_ERROR` naming it (the client then
//!    sends the retry itself).

use std::sync::atomic::{AtomicU32, Ordering};

use logship_core::PutStatus;
use logship_remoting::header::ConsumerSendMsgBackRequestHeader;
use logship_remoting::{RemotingCommand, ResponseCode};
use logship_store::{Message, StoredMessage};

use crate::names::{self, perm};
use crate::properties::JavaProperties;
use crate::send::REJECT_REQUEST_REMARK;
use crate::send::property;
use crate::serve::{Processed, PutOutcome, Refusal, RequestContext};
use crate::settings::RocketmqLine;
use crate::topic::TopicCreation;

/// `RETRY_TOPIC`: the topic a retried message was first consumed from.
pub const PROPERTY_RETRY_TOPIC: &str = "RETRY_TOPIC";
/// `ORIGIN_MESSAGE_ID`: the offset message id of the first delivery.
pub const PROPERTY_ORIGIN_MESSAGE_ID: &str = "ORIGIN_MESSAGE_ID";

/// The request version from which the header's `maxReconsumeTimes` is read (`V3_4_9`).
const VERSION_WITH_MAX_RECONSUME_TIMES: i32 = 121;

/// Picks retry queues round-robin (Java picks at random).
static NEXT_RETRY_QUEUE: AtomicU32 = AtomicU32::new(0);

fn created(ctx: &RequestContext, creation: &TopicCreation) {
    if matches!(creation, TopicCreation::Created(_)) {
        ctx.broker.host.topics_changed();
    }
}

/// `CONSUMER_SEND_MSG_BACK` (see the [module docs](self)).
pub async fn consumer_send_msg_back(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let b = &ctx.broker;
    let s = &b.settings;
    if s.line == RocketmqLine::V5 && b.is_slave() {
        return Err(Refusal::new(ResponseCode::SYSTEM_BUSY, REJECT_REQUEST_REMARK));
    }
    let header: ConsumerSendMsgBackRequestHeader = request.decode_header()?;
    let now_ms = ctx.now_ms();
    let group = header.group.as_str();
    let Some((group_config, _)) = b.metadata.groups.find_subscription_group_config(group, now_ms) else {
        return Err(Refusal::new(
            ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
            format!("subscription group not exist, {group} {}", b.consume.settings.faq_suffix()),
        ));
    };
    if s.broker_permission & perm::WRITE == 0 {
        return Err(Refusal::new(
            ResponseCode::NO_PERMISSION,
            format!("the broker[{}] sending message is forbidden", s.broker_ip1),
        ));
    }
    if group_config.retry_queue_nums <= 0 {
        return Ok(ctx.response(request, ResponseCode::SUCCESS));
    }
    let retry_topic = names::retry_topic(group);
    let sys_flag = if header.unit_mode { 1 } else { 0 };
    let creation = b
        .metadata
        .topics
        .create_in_send_message_back(
            &retry_topic,
            group_config.retry_queue_nums,
            perm::READ | perm::WRITE,
            None,
            sys_flag,
            now_ms,
        )
        .map_err(|_| Refusal::system_error(format!("topic[{retry_topic}] not exist")))?;
    created(ctx, &creation);
    let retry_config = creation
        .config()
        .cloned()
        .ok_or_else(|| Refusal::system_error(format!("topic[{retry_topic}] not exist")))?;
    if retry_config.perm & perm::WRITE == 0 {
        return Err(Refusal::new(
            ResponseCode::NO_PERMISSION,
            format!("the topic[{retry_topic}] sending message is forbidden"),
        ));
    }
    let record = b
        .store
        .select_one_message_by_offset(header.offset)
        .ok()
        .flatten()
        .and_then(|bytes| StoredMessage::decode(&bytes).ok())
        .ok_or_else(|| Refusal::system_error(format!("look message by offset failed, {}", header.offset)))?;

    let mut threshold = group_config.retry_max_times;
    if request.version >= VERSION_WITH_MAX_RECONSUME_TIMES {
        if let Some(max) = header.max_reconsume_times {
            threshold = max;
        }
    }
    let mut props = JavaProperties::new(s.line);
    for (name, value) in &record.properties {
        props.put(name, value);
    }
    if !props.contains(PROPERTY_RETRY_TOPIC) {
        props.put(PROPERTY_RETRY_TOPIC, &record.topic);
    }
    props.put(property::WAIT, "false");
    if !props.contains(PROPERTY_ORIGIN_MESSAGE_ID) {
        props.put(PROPERTY_ORIGIN_MESSAGE_ID, &record.msg_id());
    }
    let (topic, queue_id) = if record.reconsume_times >= threshold || header.delay_level < 0 {
        let dlq = names::dlq_topic(group);
        let creation = b
            .metadata
            .topics
            .create_in_send_message_back(&dlq, 1, perm::READ | perm::WRITE, None, 0, now_ms)
            .ok()
            .filter(|c| c.config().is_some())
            .ok_or_else(|| Refusal::system_error(format!("topic[{dlq}] not exist")))?;
        created(ctx, &creation);
        props.put(property::DELAY, "0");
        tracing::info!(
            group,
            offset = header.offset,
            reconsume_times = record.reconsume_times,
            "message to the DLQ"
        );
        (dlq, 0)
    } else {
        let queues = u32::try_from(group_config.retry_queue_nums).unwrap_or(1).max(1);
        let queue_id = (NEXT_RETRY_QUEUE.fetch_add(1, Ordering::Relaxed) % queues) as i32;
        let level = if header.delay_level == 0 { 3 + record.reconsume_times } else { header.delay_level };
        let max = b.metadata.delays.levels().max_level();
        let level = level.min(max);
        if level > 0 {
            props.put(property::DELAY, &level.to_string());
            props.put(property::REAL_TOPIC, &retry_topic);
            props.put(property::REAL_QID, &queue_id.to_string());
            (names::SCHEDULE_TOPIC.to_string(), crate::delay::delay_level_to_queue_id(level))
        } else {
            (retry_topic, queue_id)
        }
    };
    let message = Message {
        flag: record.flag,
        sys_flag: record.sys_flag,
        born_timestamp: record.born_timestamp,
        born_host: record.born_host,
        reconsume_times: record.reconsume_times.saturating_add(1),
        properties_string: Some(props.serialize(s.line)),
        ..Message::new(topic, queue_id, record.body.clone())
    };
    match b.host.put(message).await {
        PutOutcome::Put(r) => match r.status {
            PutStatus::PutOk => Ok(ctx.response(request, ResponseCode::SUCCESS)),
            status => Err(Refusal::system_error(status.to_string())),
        },
        PutOutcome::Refused { reason, .. } => Err(Refusal::system_error(reason)),
    }
}

#[cfg(test)]
mod tests {
    use logship_core::MessageLog;
    use logship_remoting::{RemotingCommand, RequestCode, ResponseCode};
    use logship_store::{Message, StoredMessage};

    use crate::BrokerSettings;
    use crate::serve::RequestContext;
    use crate::serve::testing::{broker, call};

    fn send_back(offset: u64, delay_level: i32, max_reconsume_times: i32) -> RemotingCommand {
        RemotingCommand::request(RequestCode::CONSUMER_SEND_MSG_BACK)
            .with_version(logship_remoting::version::V5_5_0)
            .with_ext_field("offset", offset.to_string())
            .with_ext_field("group", "cg")
            .with_ext_field("delayLevel", delay_level.to_string())
            .with_ext_field("originTopic", "T")
            .with_ext_field("maxReconsumeTimes", max_reconsume_times.to_string())
    }

    fn only_entry(ctx: &RequestContext, topic: &str, queue_id: i32) -> (u64, StoredMessage) {
        let entries = ctx.broker.store.read_queue(topic, queue_id, 0, 10).unwrap();
        assert_eq!(entries.len(), 1, "{topic}-{queue_id}");
        let offset = entries[0].physical_offset;
        let bytes = ctx.broker.store.select_one_message_by_offset(offset as i64).unwrap().unwrap();
        (offset, StoredMessage::decode(&bytes).unwrap())
    }

    fn property<'a>(m: &'a StoredMessage, name: &str) -> Option<&'a str> {
        m.properties.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    #[test]
    fn a_message_sent_back_waits_in_the_schedule_topic_then_reaches_the_dlq_after_max_reconsume_times() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), BrokerSettings::default());
        let put = MessageLog::put(&*ctx.broker.store, Message::new("T", 0, &b"body"[..]).with_tags("a"));

        // First failure: level 3 + 0, through the schedule topic, towards %RETRY%cg.
        let r = call(&ctx, send_back(put.offset, 0, 1));
        assert_eq!(r.code, ResponseCode::SUCCESS.0, "{:?}", r.remark);
        let (scheduled_at, scheduled) = only_entry(&ctx, "SCHEDULE_TOPIC_XXXX", 2);
        assert_eq!(scheduled.reconsume_times, 1);
        assert_eq!(&scheduled.body[..], b"body");
        assert_eq!(property(&scheduled, "REAL_TOPIC"), Some("%RETRY%cg"));
        assert_eq!(property(&scheduled, "RETRY_TOPIC"), Some("T"));
        assert_eq!(property(&scheduled, "DELAY"), Some("3"));
        assert_eq!(property(&scheduled, "ORIGIN_MESSAGE_ID"), Some(put.msg_id.as_str()));
        assert!(ctx.broker.metadata.topics.contains("%RETRY%cg"));

        // Consumed once again and failed again: reconsumed 1 >= max 1, to the DLQ.
        let r = call(&ctx, send_back(scheduled_at, 0, 1));
        assert_eq!(r.code, ResponseCode::SUCCESS.0, "{:?}", r.remark);
        let (_, dead) = only_entry(&ctx, "%DLQ%cg", 0);
        assert_eq!(dead.reconsume_times, 2);
        assert_eq!(property(&dead, "DELAY"), Some("0"));
        assert_eq!(property(&dead, "RETRY_TOPIC"), Some("T"), "the first real topic is kept");
        assert_eq!(ctx.broker.metadata.topics.select("%DLQ%cg").unwrap().perm, 6);
    }

    #[test]
    fn a_negative_delay_level_goes_straight_to_the_dlq() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), BrokerSettings::default());
        let put = MessageLog::put(&*ctx.broker.store, Message::new("T", 0, &b"x"[..]));
        assert_eq!(call(&ctx, send_back(put.offset, -1, 16)).code, 0);
        let (_, dead) = only_entry(&ctx, "%DLQ%cg", 0);
        assert_eq!(dead.reconsume_times, 1);
    }

    #[test]
    fn an_offset_without_a_message_is_refused_naming_it() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), BrokerSettings::default());
        let r = call(&ctx, send_back(1 << 40, 0, 16));
        assert_eq!(r.code, ResponseCode::SYSTEM_ERROR.0);
        assert_eq!(r.remark.as_deref(), Some("look message by offset failed, 1099511627776"));
    }
}
