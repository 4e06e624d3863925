//! Read-only admin requests (`AdminBrokerProcessor`): what `mqadmin` and slaves ask a broker.

use logship_remoting::body::{DataVersion, JsonBody};
use logship_remoting::header::{GetTopicConfigRequestHeader, GetTopicStatsInfoRequestHeader};
use logship_remoting::{RemotingCommand, ResponseCode};
use serde_json::{Value, json};

use crate::serve::{Processed, Refusal, RequestContext};
use crate::settings::RocketmqLine;

/// `GET_ALL_TOPIC_CONFIG` (21): every topic config with the table's version. A 5.x broker sends
/// a `TopicConfigAndMappingSerializeWrapper`: the same, plus the static-topic mappings (none
/// here) and their version, which a Java 5.x slave syncing from this broker reads.
pub(crate) fn get_all_topic_config(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let mut wrapper = ctx.broker.metadata.topics.serialize_wrapper();
    if ctx.broker.settings.line == RocketmqLine::V5 {
        let none = || Value::Object(serde_json::Map::new());
        wrapper.extra.insert("mappingDataVersion".into(), json!(DataVersion::default()));
        wrapper.extra.insert("topicQueueMappingInfoMap".into(), none());
        wrapper.extra.insert("topicQueueMappingDetailMap".into(), none());
    }
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_body(wrapper.encode()))
}

/// `GET_TOPIC_STATS_INFO` (202): every write queue's min and max offset and the store time of
/// its last message, as a `TopicStatsTable`. fastjson writes the map keyed by a
/// `MessageQueue` object with the key as a JSON object, which is not JSON; Java's clients read
/// exactly that, so it is written by hand. 5.x adds `topicPutTps` (not measured here: 0.0).
pub(crate) fn get_topic_stats_info(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let h: GetTopicStatsInfoRequestHeader = request.decode_header()?;
    let Some(config) = ctx.broker.metadata.topics.select(&h.topic) else {
        return Err(Refusal::new(ResponseCode::TOPIC_NOT_EXIST, format!("topic[{}] not exist", h.topic)));
    };
    let store = &ctx.broker.store;
    let mut entries = Vec::new();
    for queue_id in 0..config.write_queue_nums.max(0) {
        let (min, max) = store.queue_bounds(&h.topic, queue_id);
        let last = match max {
            0 => 0,
            max => store.message_store_timestamp(&h.topic, queue_id, max as i64 - 1).max(0),
        };
        let key =
            json!({"brokerName": ctx.broker.settings.broker_name, "queueId": queue_id, "topic": h.topic});
        let value = json!({"lastUpdateTimestamp": last, "maxOffset": max, "minOffset": min});
        entries.push(format!("{key}:{value}"));
    }
    let mut body = format!("{{\"offsetTable\":{{{}}}", entries.join(","));
    if ctx.broker.settings.line == RocketmqLine::V5 {
        body.push_str(",\"topicPutTps\":0.0");
    }
    body.push('}');
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_body(body.into_bytes()))
}

/// `GET_TOPIC_CONFIG` (351, 5.x; a 4.9 broker does not know it): the topic's config, or
/// `TOPIC_NOT_EXIST` with Java's remark. 5.x `mqadmin topicStatus` and `consumerProgress`
/// fail without it.
pub(crate) fn get_topic_config(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let h: GetTopicConfigRequestHeader = request.decode_header()?;
    match ctx.broker.metadata.topics.select(&h.topic) {
        Some(config) => {
            let body = serde_json::to_vec(&config)
                .map_err(|e| Refusal::system_error(format!("cannot encode the topic config: {e}")))?;
            Ok(ctx.response(request, ResponseCode::SUCCESS).with_body(body))
        }
        None => Err(Refusal::new(
            ResponseCode::TOPIC_NOT_EXIST,
            format!("No topic in this broker. topic: {}", h.topic),
        )),
    }
}

#[cfg(test)]
mod tests {
    use logship_remoting::header::{CommandHeader, SendMessageRequestHeaderV2};
    use logship_remoting::{RemotingCommand, RequestCode, ResponseCode};

    use super::*;
    use crate::BrokerSettings;
    use crate::serve::testing::{broker, call};

    fn put(ctx: &RequestContext, queue: i32) {
        let h = SendMessageRequestHeaderV2 {
            a: "PG".into(),
            b: "TopicA".into(),
            c: "TBW102".into(),
            d: 4,
            e: queue,
            ..Default::default()
        };
        let r = call(
            ctx,
            RemotingCommand::request(RequestCode::SEND_MESSAGE_V2).with_header(&h).with_body(&b"m"[..]),
        );
        assert_eq!(r.code, 0, "{:?}", r.remark);
    }

    fn ask<H: CommandHeader>(ctx: &RequestContext, code: RequestCode, header: &H) -> RemotingCommand {
        call(ctx, RemotingCommand::request(code).with_header(header))
    }

    #[test]
    fn topic_stats_are_written_as_fastjson_writes_a_map_keyed_by_message_queue() {
        let d = tempfile::tempdir().unwrap();
        let settings = BrokerSettings { broker_name: "b1".into(), ..BrokerSettings::default() };
        let (ctx, _) = broker(d.path(), settings);
        put(&ctx, 0);
        put(&ctx, 0);
        put(&ctx, 3);
        let stats = |topic: &str| {
            ask(
                &ctx,
                RequestCode::GET_TOPIC_STATS_INFO,
                &GetTopicStatsInfoRequestHeader { topic: topic.into() },
            )
        };
        let r = stats("TopicA");
        assert_eq!(r.code, 0, "{:?}", r.remark);
        // The store stamps each message itself.
        let t = ctx.broker.store.message_store_timestamp("TopicA", 0, 1);
        let t3 = ctx.broker.store.message_store_timestamp("TopicA", 3, 0);
        assert!(t > 0 && t3 >= t);
        let q = |id: i32, max: u64, last: i64| {
            format!(
                "{{\"brokerName\":\"b1\",\"queueId\":{id},\"topic\":\"TopicA\"}}:\
                 {{\"lastUpdateTimestamp\":{last},\"maxOffset\":{max},\"minOffset\":0}}"
            )
        };
        let want = format!(
            "{{\"offsetTable\":{{{},{},{},{}}},\"topicPutTps\":0.0}}",
            q(0, 2, t),
            q(1, 0, 0),
            q(2, 0, 0),
            q(3, 1, t3)
        );
        assert_eq!(String::from_utf8_lossy(&r.body), want);
        let r = stats("Nope");
        assert_eq!((r.code, r.remark.as_deref()), (17, Some("topic[Nope] not exist")));
    }

    #[test]
    fn topic_config_is_served_on_5_x_only_and_unknown_topics_get_java_s_remark() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), BrokerSettings::default());
        let ask_config = |ctx: &RequestContext, topic: &str| {
            ask(
                ctx,
                RequestCode::GET_TOPIC_CONFIG,
                &GetTopicConfigRequestHeader { topic: topic.into(), logical: Some(true) },
            )
        };
        let r = ask_config(&ctx, "TBW102");
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(
            (v["topicName"].as_str(), v["perm"].as_i64(), v["writeQueueNums"].as_i64()),
            (Some("TBW102"), Some(7), Some(8))
        );
        let r = ask_config(&ctx, "Nope");
        assert_eq!((r.code, r.remark.as_deref()), (17, Some("No topic in this broker. topic: Nope")));
        let d4 = tempfile::tempdir().unwrap();
        let (ctx4, _) =
            broker(d4.path(), BrokerSettings { line: RocketmqLine::V4_9, ..BrokerSettings::default() });
        assert_eq!(
            ask_config(&ctx4, "TBW102").code,
            ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0,
            "4.9.7 has no 351"
        );
    }
}
