//! The lookups producers, consumers and `mqadmin` make of a queue or a message:
//! `GET_MAX_OFFSET` (30), `GET_MIN_OFFSET` (31), `GET_EARLIEST_MSG_STORETIME` (32),
//! `SEARCH_OFFSET_BY_TIMESTAMP` (29), `VIEW_MESSAGE_BY_ID` (33) and `QUERY_MESSAGE` (12), as
//! Java answers them: served by every node, master or slave; an unknown topic or queue is an
//! empty queue, not an error.

use bytes::{Bytes, BytesMut};
use logship_remoting::header::{
    BoundaryType, GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader, GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader, QueryMessageRequestHeader, QueryMessageResponseHeader,
    SearchOffsetRequestHeader, SearchOffsetResponseHeader, ViewMessageRequestHeader,
};
use logship_remoting::{RemotingCommand, ResponseCode};
use logship_store::{StoreError, TimeBoundary};

use crate::serve::{Processed, Refusal, RequestContext};
use crate::settings::RocketmqLine;

/// `maxNum` of a query by unique key (`_UNIQUE_KEY_QUERY=true`): Java's `defaultQueryMaxNum`.
pub(crate) const DEFAULT_QUERY_MAX_NUM: u32 = 32;

fn store_error(e: StoreError) -> Refusal {
    Refusal::system_error(format!("the store failed the lookup: {e}"))
}

/// `GET_MAX_OFFSET`: the queue's end (the next offset to be written), 0 when unknown.
pub(crate) fn get_max_offset(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let h: GetMaxOffsetRequestHeader = request.decode_header()?;
    let (_, max) = ctx.broker.store.queue_bounds(&h.topic, h.queue_id);
    let header = GetMaxOffsetResponseHeader { offset: max as i64 };
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_header(&header))
}

/// `GET_MIN_OFFSET`: the queue's first retained offset, 0 when unknown.
pub(crate) fn get_min_offset(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let h: GetMinOffsetRequestHeader = request.decode_header()?;
    let (min, _) = ctx.broker.store.queue_bounds(&h.topic, h.queue_id);
    let mut response = ctx
        .response(request, ResponseCode::SUCCESS)
        .with_header(&GetMinOffsetResponseHeader { offset: min as i64 });
    if ctx.broker.settings.line == RocketmqLine::V5 {
        // 5.5.0 answers through an RpcResponse, whose remark is empty rather than null.
        response.remark = Some(String::new());
    }
    Ok(response)
}

/// `GET_EARLIEST_MSG_STORETIME`: the store time of the queue's first message, -1 for none.
pub(crate) fn get_earliest_msg_storetime(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let h: GetEarliestMsgStoretimeRequestHeader = request.decode_header()?;
    let timestamp = ctx.broker.store.earliest_message_store_time(&h.topic, h.queue_id);
    let header = GetEarliestMsgStoretimeResponseHeader { timestamp };
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_header(&header))
}

/// `SEARCH_OFFSET_BY_TIMESTAMP`: 4.9's nearest message, or 5.x's lower (the default) or upper
/// boundary.
pub(crate) fn search_offset_by_timestamp(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let h: SearchOffsetRequestHeader = request.decode_header()?;
    let boundary = match (ctx.broker.settings.line, h.boundary_type) {
        (RocketmqLine::V4_9, _) => TimeBoundary::Nearest,
        (RocketmqLine::V5, Some(BoundaryType::Upper)) => TimeBoundary::Upper,
        (RocketmqLine::V5, _) => TimeBoundary::Lower,
    };
    let offset = ctx
        .broker
        .store
        .search_offset_by_timestamp(&h.topic, h.queue_id, h.timestamp, boundary)
        .map_err(store_error)?;
    let header = SearchOffsetResponseHeader { offset };
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_header(&header))
}

/// `VIEW_MESSAGE_BY_ID`: the stored record at a commit-log offset (an offset message id's),
/// as its bytes. An offset where no whole record starts is Java's `SYSTEM_ERROR`.
pub(crate) fn view_message_by_id(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let h: ViewMessageRequestHeader = request.decode_header()?;
    match ctx.broker.store.select_one_message_by_offset(h.offset).map_err(store_error)? {
        Some(record) => Ok(ctx.response(request, ResponseCode::SUCCESS).with_body(record)),
        None => Err(Refusal::system_error(format!("can not find message by the offset, {}", h.offset))),
    }
}

/// `QUERY_MESSAGE`: the messages of a topic with a key or unique id, from the message index.
pub(crate) fn query_message(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let h: QueryMessageRequestHeader = request.decode_header()?;
    let unique = request.ext_fields.get("_UNIQUE_KEY_QUERY").is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let max_num = if unique { DEFAULT_QUERY_MAX_NUM } else { h.max_num.max(0) as u32 };
    let not_found = |ts: i64, phy: i64| {
        let header =
            QueryMessageResponseHeader { index_last_update_timestamp: ts, index_last_update_phyoffset: phy };
        ctx.response(request, ResponseCode::QUERY_NOT_FOUND)
            .with_header(&header)
            .with_remark("can not find message, maybe time range not correct")
    };
    // 5.5's tag index (indexType T) is not kept.
    let by_tag = h.index_type.as_deref() == Some("T");
    let Some(index) = ctx.broker.index.as_ref().filter(|_| !by_tag) else {
        return Ok(not_found(0, 0));
    };
    let found = index
        .query_message(&ctx.broker.store, &h.topic, &h.key, max_num, h.begin_timestamp, h.end_timestamp)
        .map_err(store_error)?;
    if found.messages.is_empty() {
        return Ok(not_found(found.index_last_update_timestamp, found.index_last_update_phyoffset));
    }
    let mut body = BytesMut::with_capacity(found.messages.iter().map(Bytes::len).sum());
    for m in &found.messages {
        body.extend_from_slice(m);
    }
    let header = QueryMessageResponseHeader {
        index_last_update_timestamp: found.index_last_update_timestamp,
        index_last_update_phyoffset: found.index_last_update_phyoffset,
    };
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_header(&header).with_body(body.freeze()))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use logship_remoting::header::{CommandHeader, SendMessageRequestHeaderV2, SendMessageResponseHeader};
    use logship_remoting::{RemotingCommand, RequestCode};
    use logship_store::{IndexConfig, MessageIndex, StoredMessage};

    use super::*;
    use crate::BrokerSettings;
    use crate::serve::testing::{broker, call};

    fn put(ctx: &RequestContext, props: &str) -> SendMessageResponseHeader {
        let h = SendMessageRequestHeaderV2 {
            a: "PG".into(),
            b: "TopicL".into(),
            c: "TBW102".into(),
            d: 4,
            e: 0,
            g: 1,
            i: Some(props.into()),
            ..Default::default()
        };
        let r = call(
            ctx,
            RemotingCommand::request(RequestCode::SEND_MESSAGE_V2).with_header(&h).with_body(&b"m"[..]),
        );
        assert_eq!(r.code, 0, "{:?}", r.remark);
        SendMessageResponseHeader::from_ext_fields(&r.ext_fields).unwrap()
    }

    fn ask<H: CommandHeader>(ctx: &RequestContext, code: RequestCode, header: &H) -> RemotingCommand {
        call(ctx, RemotingCommand::request(code).with_header(header))
    }

    #[test]
    fn queue_bounds_and_times_answer_as_java_does_for_known_and_unknown_queues() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, host) = broker(d.path(), BrokerSettings::default());
        for _ in 0..3 {
            put(&ctx, "TAGS\u{1}t");
        }
        let max = |topic: &str| {
            let r = ask(&ctx, RequestCode::GET_MAX_OFFSET, &GetMaxOffsetRequestHeader::new(topic, 0));
            GetMaxOffsetResponseHeader::from_ext_fields(&r.ext_fields).unwrap().offset
        };
        assert_eq!((max("TopicL"), max("Nope")), (3, 0));
        let min = ask(
            &ctx,
            RequestCode::GET_MIN_OFFSET,
            &GetMinOffsetRequestHeader { topic: "TopicL".into(), queue_id: 0, ..Default::default() },
        );
        assert_eq!((min.ext_fields["offset"].as_str(), min.remark.as_deref()), ("0", Some("")));
        let earliest = |topic: &str| {
            let h = GetEarliestMsgStoretimeRequestHeader {
                topic: topic.into(),
                queue_id: 0,
                ..Default::default()
            };
            ask(&ctx, RequestCode::GET_EARLIEST_MSG_STORETIME, &h).ext_fields["timestamp"]
                .parse::<i64>()
                .unwrap()
        };
        let first = host.store.read_message(0).unwrap().store_timestamp;
        assert_eq!((earliest("TopicL"), earliest("Nope")), (first, -1));
        let search = |ts: i64| {
            let h = SearchOffsetRequestHeader {
                topic: "TopicL".into(),
                queue_id: 0,
                timestamp: ts,
                ..Default::default()
            };
            ask(&ctx, RequestCode::SEARCH_OFFSET_BY_TIMESTAMP, &h).ext_fields["offset"]
                .parse::<i64>()
                .unwrap()
        };
        assert_eq!(search(i64::MAX), 3, "5.x LOWER past every message: the end");
        assert_eq!(search(0), 0);
        let missing =
            call(&ctx, RemotingCommand::request(RequestCode::GET_MAX_OFFSET).with_ext_field("topic", "T"));
        assert_eq!(missing.code, 1);
        assert!(missing.remark.unwrap().contains("<queueId>"));
    }

    #[test]
    fn view_message_by_id_serves_the_record_and_refuses_what_is_not_one() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), BrokerSettings::default());
        put(&ctx, "TAGS\u{1}a");
        let id = put(&ctx, "TAGS\u{1}b").msg_id;
        let offset = i64::from_str_radix(&id[16..], 16).unwrap();
        let r = ask(&ctx, RequestCode::VIEW_MESSAGE_BY_ID, &ViewMessageRequestHeader { offset, topic: None });
        assert_eq!(r.code, 0);
        let m = StoredMessage::decode(&r.body).unwrap();
        assert_eq!((m.tags(), m.msg_id()), (Some("b"), id));
        for bad in [offset + 1, -1, 1 << 40] {
            let r = ask(
                &ctx,
                RequestCode::VIEW_MESSAGE_BY_ID,
                &ViewMessageRequestHeader { offset: bad, topic: None },
            );
            assert_eq!((r.code, r.remark), (1, Some(format!("can not find message by the offset, {bad}"))));
        }
    }

    #[test]
    fn query_message_finds_keys_and_unique_ids_from_the_index() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, host) = broker(d.path(), BrokerSettings::default());
        let mut config = IndexConfig::default();
        config.max_hash_slot_num = 64;
        config.max_index_num = 256;
        let index = Arc::new(MessageIndex::open(&host.store, config).unwrap());
        let mut b = Arc::try_unwrap(ctx.broker).unwrap();
        b.index = Some(index.clone());
        let ctx = RequestContext::new(Arc::new(b), ctx.connection);
        put(&ctx, "KEYS\u{1}order-1 order-2\u{2}UNIQ_KEY\u{1}U1");
        put(&ctx, "KEYS\u{1}order-2\u{2}UNIQ_KEY\u{1}U2");
        index.catch_up(&host.store).unwrap();
        let query = |key: &str, unique: bool| {
            let h = QueryMessageRequestHeader {
                topic: "TopicL".into(),
                key: key.into(),
                max_num: 16,
                begin_timestamp: 0,
                end_timestamp: i64::MAX,
                ..Default::default()
            };
            let mut r = RemotingCommand::request(RequestCode::QUERY_MESSAGE).with_header(&h);
            r = r.with_ext_field("_UNIQUE_KEY_QUERY", unique.to_string());
            call(&ctx, r)
        };
        let count = |r: &RemotingCommand| {
            let mut at = 0;
            let mut n = 0;
            while at < r.body.len() {
                at += StoredMessage::decode(&r.body.slice(at..)).unwrap().total_size as usize;
                n += 1;
            }
            n
        };
        let r = query("order-2", false);
        assert_eq!((r.code, count(&r)), (0, 2));
        assert!(r.ext_fields["indexLastUpdatePhyoffset"].parse::<i64>().unwrap() > 0);
        let r = query("U1", true);
        assert_eq!((r.code, count(&r)), (0, 1));
        let r = query("nope", false);
        assert_eq!(
            (r.code, r.remark.as_deref()),
            (22, Some("can not find message, maybe time range not correct"))
        );
        assert!(r.ext_fields.contains_key("indexLastUpdateTimestamp"));
    }
}
