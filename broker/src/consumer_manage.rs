//! `QUERY_CONSUMER_OFFSET` (14), `UPDATE_CONSUMER_OFFSET` (15) and
//! `GET_CONSUMER_LIST_BY_GROUP` (38): Java's `ConsumerManageProcessor`. All three are served
//! by masters and slaves alike.

use logship_remoting::body::{GetConsumerListByGroupResponseBody, JsonBody};
use logship_remoting::header::{
    GetConsumerListByGroupRequestHeader, QueryConsumerOffsetRequestHeader, QueryConsumerOffsetResponseHeader,
};
use logship_remoting::{HeaderError, RemotingCommand, ResponseCode};

use crate::consume::{ConsumeContext, Now, Reply, answer, bad_header, success};
use crate::offset::{FirstMessage, QueryOffsetAnswer, query_consumer_offset};
use crate::settings::RocketmqLine;

/// Where the first message of a queue is, for the "new group" rule of
/// `QUERY_CONSUMER_OFFSET`: absent unless the queue still holds offset 0; "in memory" when it
/// lies within `memory_limit` bytes of the commit log's end (the reach Java counts as in
/// memory, `accessMessageInMemoryMaxRatio` of the RAM: 4.9's own rule, and what logship takes
/// for 5.x's page-cache residency test, which its store cannot ask), on disk otherwise.
pub fn first_message(
    store: &logship_store::CommitLog,
    topic: &str,
    queue_id: i32,
    memory_limit: u64,
) -> FirstMessage {
    let (min, max) = store.queue_bounds(topic, queue_id);
    if min > 0 || max == 0 {
        return FirstMessage::Absent;
    }
    match store.read_queue(topic, queue_id, 0, 1) {
        Ok(entries) => match entries.first() {
            Some(e) if e.queue_offset == 0 => {
                if store.max_offset().saturating_sub(e.physical_offset) <= memory_limit {
                    FirstMessage::InMemory
                } else {
                    FirstMessage::OnDisk
                }
            }
            _ => FirstMessage::Absent,
        },
        Err(_) => FirstMessage::Absent,
    }
}

/// `QUERY_CONSUMER_OFFSET` (14): the group's committed offset (a negative one counts as none);
/// without one, 0 if the queue starts at 0 and its first message is recent (see
/// [`first_message`]; 4.9 also answers 0 for an empty queue), else `QUERY_NOT_FOUND` (22),
/// after which the client starts where its `consumeFromWhere` says. 5.x's
/// `setZeroIfNotFound=false` always gets 22.
pub(crate) fn query_consumer_offset_request(ctx: &ConsumeContext<'_>, request: &RemotingCommand) -> Reply {
    let header: QueryConsumerOffsetRequestHeader = match request.decode_header() {
        Ok(h) => h,
        Err(e) => return Reply::to(request, bad_header(request, &e)),
    };
    let (group, topic, queue_id) = (&header.consumer_group, &header.topic, header.queue_id);
    let committed = ctx.metadata.offsets.query_offset(group, topic, queue_id);
    let (min, _) = ctx.store.queue_bounds(topic, queue_id);
    let first = if committed >= 0 {
        FirstMessage::Absent
    } else {
        first_message(ctx.store, topic, queue_id, ctx.settings.get_message.memory_limit)
    };
    let set_zero = match ctx.settings.line {
        RocketmqLine::V4_9 => None,
        _ => header.set_zero_if_not_found,
    };
    let response = match query_consumer_offset(ctx.settings.line, committed, min as i64, first, set_zero) {
        QueryOffsetAnswer::Offset(offset) => {
            success(request).with_header(&QueryConsumerOffsetResponseHeader { offset })
        }
        _ if set_zero == Some(false) => answer(
            request,
            ResponseCode::QUERY_NOT_FOUND,
            "Not found, do not set to zero, maybe this group boot first",
        ),
        _ => answer(
            request,
            ResponseCode::QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        ),
    };
    Reply::to(request, response)
}

/// `UPDATE_CONSUMER_OFFSET` (15): commits the offset as given (lower ones and -1 included; the
/// broker never judges it). 5.x first requires the group's config and the topic to exist
/// (`SUBSCRIPTION_GROUP_NOT_EXIST`, `TOPIC_NOT_EXIST`) and answers a missing queue id or offset
/// with `INVALID_PARAMETER`; 4.9 stores whatever it gets. Answered unless the request is
/// one-way (Java clients send it one-way, the Go client two-way and drops the answer).
pub(crate) fn update_consumer_offset(ctx: &ConsumeContext<'_>, request: &RemotingCommand, now: Now) -> Reply {
    let ext = &request.ext_fields;
    let text = |name: &'static str| ext.get(name).map(String::as_str);
    let number = |name: &'static str, java: &'static str| -> Result<Option<i64>, HeaderError> {
        text(name)
            .map(|t| {
                t.parse::<i64>().ok().filter(|v| java != "Integer" || i32::try_from(*v).is_ok()).ok_or_else(
                    || HeaderError::InvalidField { field: name, expected: java, value: t.to_string() },
                )
            })
            .transpose()
    };
    let (Some(group), Some(topic)) = (text("consumerGroup"), text("topic")) else {
        let field = if text("consumerGroup").is_none() { "consumerGroup" } else { "topic" };
        return Reply::to(request, bad_header(request, &HeaderError::MissingField { field }));
    };
    let (queue_id, offset) = match (number("queueId", "Integer"), number("commitOffset", "Long")) {
        (Ok(q), Ok(o)) => (q, o),
        (Err(e), _) | (_, Err(e)) => return Reply::to(request, bad_header(request, &e)),
    };
    if ctx.settings.line == RocketmqLine::V5 {
        if !ctx.metadata.groups.contains(group) {
            return Reply::to(
                request,
                answer(
                    request,
                    ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
                    format!("Group {group} not exist!"),
                ),
            );
        }
        if !ctx.metadata.topics.contains(topic) {
            return Reply::to(
                request,
                answer(request, ResponseCode::TOPIC_NOT_EXIST, format!("Topic {topic} not exist!")),
            );
        }
        if queue_id.is_none() {
            return Reply::to(
                request,
                answer(
                    request,
                    ResponseCode::INVALID_PARAMETER,
                    format!("QueueId is null, topic is {topic}"),
                ),
            );
        }
        if offset.is_none() {
            return Reply::to(
                request,
                answer(request, ResponseCode::INVALID_PARAMETER, format!("Offset is null, topic is {topic}")),
            );
        }
    }
    let (Some(queue_id), Some(offset)) = (queue_id, offset) else {
        let field = if queue_id.is_none() { "queueId" } else { "commitOffset" };
        return Reply::to(request, bad_header(request, &HeaderError::MissingField { field }));
    };
    // Checked to fit an i32 above.
    ctx.metadata.offsets.commit_offset(group, topic, queue_id as i32, offset, now.wall_ms);
    Reply::to(request, success(request))
}

/// `GET_CONSUMER_LIST_BY_GROUP` (38): the client ids of the group's members, or
/// `SYSTEM_ERROR` `no consumer for this group, <group>` (the client then skips this rebalance).
pub(crate) fn get_consumer_list_by_group(ctx: &ConsumeContext<'_>, request: &RemotingCommand) -> Reply {
    let header: GetConsumerListByGroupRequestHeader = match request.decode_header() {
        Ok(h) => h,
        Err(e) => return Reply::to(request, bad_header(request, &e)),
    };
    match ctx.clients.consumer_ids(&header.consumer_group) {
        Some(ids) if !ids.is_empty() => Reply::to(
            request,
            success(request).with_body(GetConsumerListByGroupResponseBody::new(ids).encode()),
        ),
        _ => Reply::to(
            request,
            answer(
                request,
                ResponseCode::SYSTEM_ERROR,
                format!("no consumer for this group, {}", header.consumer_group),
            ),
        ),
    }
}
