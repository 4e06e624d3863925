//! Read-only admin requests (`AdminBrokerProcessor`): what `mqadmin` and slaves ask a broker.

use std::collections::{BTreeMap, BTreeSet};

use logship_remoting::body::{BrokerStatsData, BrokerStatsItem, DataVersion, JsonBody};
use logship_remoting::header::{
    GetBrokerConfigResponseHeader, GetConsumeStatsRequestHeader, GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader, QueryTopicConsumeByWhoRequestHeader, ViewBrokerStatsDataRequestHeader,
};
use logship_remoting::{RemotingCommand, ResponseCode};
use logship_store::DiskUsage;
use serde_json::{Value, json};

use crate::serve::{Processed, Refusal, RequestContext};
use crate::settings::RocketmqLine;
use crate::stats::{KeyedStat, StatsSnapshot};

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
/// exactly that, so it is written by hand. 5.x adds `topicPutTps`: the messages stored to the
/// topic per second over the last minute (Java's `tpsTopicPutNums`).
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
        let tps = crate::stats::java_double(ctx.broker.stats.topic_put_tps(&h.topic));
        body.push_str(&format!(",\"topicPutTps\":{tps}"));
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

/// Java's `MESSAGE_STORE_TIMESTAMP_POSITION + 8`: the bytes of a record up to its store time.
const STORE_TIMESTAMP_END: i32 = 56 + 8;

/// Java's `MixAll.humanReadableByteCount(bytes, false)`: `354 B`, `1.5 KiB`, ...
fn human_bytes(bytes: u64) -> String {
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let exp = ((bytes as f64).ln() / 1024f64.ln()) as i32;
    let unit = ["K", "M", "G", "T", "P", "E"][(exp as usize - 1).min(5)];
    format!("{:.1} {unit}iB", bytes as f64 / 1024f64.powi(exp))
}

/// The used fraction of the disk holding `path`, rounded as Java's
/// `getDiskPartitionSpaceUsedPercent` does; -1 when it cannot be read.
fn disk_ratio(path: &std::path::Path) -> String {
    match logship_store::OsDiskUsage.used_ratio(path) {
        Ok(r) => crate::stats::java_double((r * 100.0).round() / 100.0),
        Err(_) => "-1.0".into(),
    }
}

/// The runtime table of `GET_BROKER_RUNTIME_INFO`, keyed as the emulated line's broker keys it
/// (see [`get_broker_runtime_info`]).
pub(crate) fn runtime_info(ctx: &RequestContext) -> BTreeMap<String, String> {
    let b = &ctx.broker;
    let v5 = b.settings.line == RocketmqLine::V5;
    let now = ctx.now_ms();
    let mut t: BTreeMap<String, String> = b.stats.runtime_entries(now, v5).into_iter().collect();
    let mut put = |k: &str, v: String| {
        t.insert(k.to_string(), v);
    };
    let store = &b.store;
    let (min, max) = (store.min_offset(), store.max_offset());
    put("commitLogMinOffset", min.to_string());
    put("commitLogMaxOffset", max.to_string());
    let earliest = if max > min { store.pickup_store_timestamp(min as i64, STORE_TIMESTAMP_END) } else { -1 };
    put("earliestMessageTimeStamp", earliest.to_string());
    put("dispatchBehindBytes", max.saturating_sub(store.dispatched_offset()).to_string());
    put("remainHowManyDataToFlush", human_bytes(max.saturating_sub(store.flushed_offset())));
    let root = b.metadata.root();
    let commitlog = root.join("commitlog");
    let ratio = disk_ratio(&commitlog);
    put(&format!("commitLogDiskRatio_{}", commitlog.display()), ratio.clone());
    put("commitLogDiskRatio", ratio);
    put("consumeQueueDiskRatio", disk_ratio(&root.join("consumequeue")));
    put("startAcceptSendRequestTimeStamp", b.settings.start_accept_send_request_time_stamp.to_string());
    let version = b.settings.version();
    put("brokerVersionDesc", if v5 { "V5_5_0" } else { "V4_9_7" }.to_string());
    if v5 {
        // Java: whether the master-only services (schedule, transaction check) run.
        put("brokerActive", (!b.is_slave()).to_string());
        for k in ["timerReadBehind", "timerOffsetBehind", "timerCongestNum"] {
            put(k, "0".into());
        }
        put("timerEnqueueTps", "0.0".into());
        put("timerDequeueTps", "0.0".into());
    } else {
        put("brokerVersion", version.to_string());
    }
    // Requests run as they arrive (bounded per connection), not through Java's thread-pool
    // queues: those queues are always empty here.
    for pool in ["send", "pull", "query"] {
        put(&format!("{pool}ThreadPoolQueueSize"), "0".into());
        put(&format!("{pool}ThreadPoolQueueHeadWaitTimeMills"), "0".into());
    }
    put("pageCacheLockTimeMills", "0".into());
    // ScheduleMessageService.buildRunningStats: each level's delivered and stored offsets.
    for (level, delivered) in b.metadata.delays.table() {
        let queue = crate::delay::delay_level_to_queue_id(level);
        let (_, stored) = store.queue_bounds(crate::names::SCHEDULE_TOPIC, queue);
        put(&format!("scheduleMessageOffset_{level}"), format!("{delivered},{stored}"));
    }
    t
}

/// `GET_BROKER_RUNTIME_INFO` (28): a `KVTable` of the broker's counters and state, what
/// `mqadmin brokerStatus` prints and `clusterList` reads (`putTps`, `getTransferredTps`,
/// `brokerVersionDesc`, `earliestMessageTimeStamp`, `commitLogDiskRatio`, ...): puts and pulls
/// counted since boot, their rates, commit-log offsets, disk use, delay-level progress, and the
/// line's version. Keys for Java machinery logship has no counterpart of (thread-pool queues,
/// page-cache locks, the timer wheel) are there with the values a Java broker shows when idle
/// or with the feature off.
pub(crate) fn get_broker_runtime_info(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let table = runtime_info(ctx);
    let body = serde_json::to_vec(&json!({ "table": table }))
        .map_err(|e| Refusal::system_error(format!("cannot encode the runtime table: {e}")))?;
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_body(body))
}

/// `VIEW_BROKER_STATS_DATA` (315): one `BrokerStatsManager` statistic of one key over the last
/// minute, hour and day (sum, per second, per increment), as a `BrokerStatsData`; what
/// `mqadmin statsAll` reads (`TOPIC_PUT_NUMS` of each topic, `GROUP_GET_NUMS` of
/// `topic@group`). Served: `TOPIC_PUT_NUMS`, `TOPIC_PUT_SIZE`, `GROUP_GET_NUMS` and
/// `GROUP_GET_SIZE`. Any other statistic, and a key never counted, gets Java's answer to a
/// statistic that does not exist: `SYSTEM_ERROR`, `The stats <name> <key> not exist`.
pub(crate) fn view_broker_stats_data(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let h: ViewBrokerStatsDataRequestHeader = request.decode_header()?;
    let views = KeyedStat::from_java_name(&h.stats_name)
        .and_then(|stat| ctx.broker.stats.keyed_views(stat, &h.stats_key));
    let Some(views) = views else {
        return Err(Refusal::new(
            ResponseCode::SYSTEM_ERROR,
            format!("The stats <{}> <{}> not exist", h.stats_name, h.stats_key),
        ));
    };
    let item = |s: StatsSnapshot| BrokerStatsItem::new(s.sum, s.tps, s.avgpt);
    let data = BrokerStatsData::new(item(views.minute), item(views.hour), item(views.day));
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_body(data.encode()))
}

/// The configuration `GET_BROKER_CONFIG` reports: the broker's settings under RocketMQ's key
/// names. Built from an allow-list of non-secret settings, never from the configuration file,
/// so nothing secret (ACL secret keys, TLS key material, tokens, file paths of either) can be
/// in it whatever the operator configured.
pub(crate) fn reported_config(ctx: &RequestContext) -> Vec<(&'static str, String)> {
    let s = &ctx.broker.settings;
    let c = &ctx.broker.consume.settings;
    let v5 = s.line == RocketmqLine::V5;
    let role = ctx.broker.host.role().map_or("SLAVE", |r| r.rocketmq_name());
    let mut out = vec![
        ("brokerClusterName", s.broker_cluster_name.clone()),
        ("brokerName", s.broker_name.clone()),
        ("brokerId", s.broker_id.to_string()),
        ("brokerIP1", s.broker_ip1.to_string()),
        ("listenPort", s.listen_port.to_string()),
        ("brokerRole", role.to_string()),
        ("brokerPermission", s.broker_permission.to_string()),
        ("autoCreateTopicEnable", s.auto_create_topic_enable.to_string()),
        ("autoCreateSubscriptionGroup", s.auto_create_subscription_group.to_string()),
        ("defaultTopicQueueNums", s.default_topic_queue_nums.to_string()),
        ("clusterTopicEnable", s.cluster_topic_enable.to_string()),
        ("brokerTopicEnable", s.broker_topic_enable.to_string()),
        ("traceTopicEnable", s.trace_topic_enable.to_string()),
        ("msgTraceTopicName", s.msg_trace_topic_name.clone()),
        ("messageDelayLevel", s.message_delay_level.clone()),
        ("regionId", s.region_id.clone()),
        ("traceOn", s.trace_on.to_string()),
        ("maxMessageSize", s.max_message_size.to_string()),
        ("startAcceptSendRequestTimeStamp", s.start_accept_send_request_time_stamp.to_string()),
        ("slaveReadEnable", s.slave_read_enable.to_string()),
        ("offsetCheckInSlave", c.offset_check_in_slave.to_string()),
        ("longPollingEnable", c.long_polling_enable.to_string()),
        ("shortPollingTimeMills", c.short_polling_time_mills.to_string()),
        ("notifyConsumerIdsChangedEnable", c.notify_consumer_ids_changed_enable.to_string()),
        ("channelExpiredTimeout", c.channel_expired_timeout.as_millis().to_string()),
        ("aclEnable", ctx.broker.authorizer.is_some().to_string()),
    ];
    if v5 {
        out.extend([
            ("enableCreateSysGroup", s.enable_create_sys_group.to_string()),
            ("reviveQueueNum", s.revive_queue_num.to_string()),
            ("timerWheelEnable", s.timer_wheel_enable.to_string()),
            ("litePullMessageEnable", c.lite_pull_message_enable.to_string()),
            ("consumerOffsetUpdateVersionStep", s.consumer_offset_update_version_step.to_string()),
            ("delayOffsetUpdateVersionStep", s.delay_offset_update_version_step.to_string()),
        ]);
    }
    out
}

/// `GET_BROKER_CONFIG` (26): the [reported configuration](reported_config) as Java's
/// properties text (`key=value` lines), with the configuration's data version in the header.
/// logship never changes its configuration over the network, so the version is the boot's.
pub(crate) fn get_broker_config(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let mut text = String::new();
    for (k, v) in reported_config(ctx) {
        text.push_str(k);
        text.push('=');
        text.push_str(&v);
        text.push('\n');
    }
    let version = serde_json::to_string(&DataVersion::new(ctx.broker.stats.boot_ms()))
        .map_err(|e| Refusal::system_error(format!("cannot encode the data version: {e}")))?;
    let header = GetBrokerConfigResponseHeader { version };
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_header(&header).with_body(text.into_bytes()))
}

/// The topics `GET_CONSUME_STATS` reports for a group (Java's
/// `getTopicsForCollectingConsumeStats`): the `topicList` as given (5.x); else the one topic, or
/// every topic the group committed offsets of, less those its online members do not subscribe.
fn consume_stats_topics(ctx: &RequestContext, h: &GetConsumeStatsRequestHeader) -> BTreeSet<String> {
    let v5 = ctx.broker.settings.line == RocketmqLine::V5;
    if v5 {
        let list: BTreeSet<String> = h
            .topic_list
            .as_deref()
            .unwrap_or("")
            .split(';')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect();
        if !list.is_empty() {
            return list;
        }
    }
    let group = &h.consumer_group;
    let mut topics = match h.topic.as_deref().map(str::trim) {
        Some(t) if !t.is_empty() => BTreeSet::from([t.to_string()]),
        _ => ctx.broker.metadata.offsets.topics_of_group(group),
    };
    let clients = &ctx.broker.consume.clients;
    if clients.subscription_count(group) > 0 {
        topics.retain(|t| clients.subscribes(group, t));
    }
    topics
}

/// `GET_CONSUME_STATS` (208): per read queue of each [topic](consume_stats_topics), the
/// queue's max offset (`brokerOffset`), the group's committed offset (`consumerOffset`, 0 when
/// none) and the store time of the last consumed message, as a `ConsumeStats`; 5.x adds
/// `pullOffset` (the committed offset here: logship keeps no separate pull offsets, so
/// mqadmin's `#Inflight` is 0). `consumeTps` sums, over those topics, the messages the group
/// pulled per second over the last minute (Java's `tpsGroupGetNums`). Written by hand
/// for the same reason as [`get_topic_stats_info`].
pub(crate) fn get_consume_stats(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let h: GetConsumeStatsRequestHeader = request.decode_header()?;
    let b = &ctx.broker;
    let v5 = b.settings.line == RocketmqLine::V5;
    let mut entries = Vec::new();
    let mut consume_tps = 0.0;
    for topic in consume_stats_topics(ctx, &h) {
        let Some(config) = b.metadata.topics.select(&topic) else {
            tracing::warn!(topic, "consumeStats: no such topic");
            continue;
        };
        consume_tps += b.stats.group_get_tps(&h.consumer_group, &topic);
        for queue_id in 0..config.read_queue_nums.max(0) {
            let (_, max) = b.store.queue_bounds(&topic, queue_id);
            let consumer = b.metadata.offsets.query_offset(&h.consumer_group, &topic, queue_id).max(0);
            let last = match consumer {
                0 => 0,
                c => b.store.message_store_timestamp(&topic, queue_id, c - 1).max(0),
            };
            let key = json!({"brokerName": b.settings.broker_name, "queueId": queue_id, "topic": topic});
            let mut value = json!({"brokerOffset": max, "consumerOffset": consumer, "lastTimestamp": last});
            if v5 {
                value["pullOffset"] = json!(consumer);
            }
            entries.push(format!("{key}:{value}"));
        }
    }
    let tps = crate::stats::java_double(consume_tps);
    let body = format!("{{\"consumeTps\":{tps},\"offsetTable\":{{{}}}}}", entries.join(","));
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_body(body.into_bytes()))
}

/// `QUERY_TOPIC_CONSUME_BY_WHO` (300): the groups consuming `topic`, as a `GroupList`: those
/// with an online member subscribing it and those with committed offsets of it (what
/// `mqadmin queryMsgById` and `topicStatus` callers ask).
pub(crate) fn query_topic_consume_by_who(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let h: QueryTopicConsumeByWhoRequestHeader = request.decode_header()?;
    let mut groups = ctx.broker.consume.clients.groups_subscribing(&h.topic);
    groups.extend(ctx.broker.metadata.offsets.groups_of_topic(&h.topic));
    let body = serde_json::to_vec(&json!({ "groupList": groups }))
        .map_err(|e| Refusal::system_error(format!("cannot encode the group list: {e}")))?;
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_body(body))
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

    fn table(ctx: &RequestContext) -> serde_json::Map<String, Value> {
        let r = call(ctx, RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO));
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        v["table"].as_object().unwrap().clone()
    }

    #[test]
    fn runtime_info_counts_puts_and_pulls_and_names_the_commit_log_offsets() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, host) = broker(d.path(), BrokerSettings::default());
        let t = table(&ctx);
        assert_eq!(t["msgPutTotalTodayNow"], "0");
        assert_eq!(t["commitLogMaxOffset"], "0");
        assert_eq!(t["earliestMessageTimeStamp"], "-1");
        put(&ctx, 0);
        put(&ctx, 1);
        put(&ctx, 1);
        let pull = RemotingCommand::request(RequestCode::PULL_MESSAGE)
            .with_ext_field("consumerGroup", "cg")
            .with_ext_field("topic", "TopicA")
            .with_ext_field("queueId", "1")
            .with_ext_field("queueOffset", "0")
            .with_ext_field("maxMsgNums", "32")
            .with_ext_field("sysFlag", "4")
            .with_ext_field("commitOffset", "0")
            .with_ext_field("suspendTimeoutMillis", "0")
            .with_ext_field("subscription", "*")
            .with_ext_field("subVersion", "1")
            .with_ext_field("expressionType", "TAG");
        assert_eq!(call(&ctx, pull).code, 0);
        host.now_ms.fetch_add(11_000, std::sync::atomic::Ordering::AcqRel);
        let t = table(&ctx);
        assert_eq!(t["msgPutTotalTodayNow"], "3");
        assert_eq!(t["msgGetTotalTodayNow"], "2", "the pull carried queue 1's two messages");
        assert_eq!(t["commitLogMaxOffset"], ctx.broker.store.max_offset().to_string());
        assert!(ctx.broker.store.max_offset() > 0);
        assert_eq!(t["commitLogMinOffset"], "0");
        let first = ctx.broker.store.message_store_timestamp("TopicA", 0, 0);
        assert_eq!(t["earliestMessageTimeStamp"], first.to_string());
        assert_eq!(t["brokerVersionDesc"], "V5_5_0");
        assert_eq!(t["brokerActive"], "true", "a master runs the master-only services");
        // Three puts in the 11 s since the first sample; the 60 s and 600 s windows are empty.
        let put_tps = t["putTps"].as_str().unwrap();
        let ten: f64 = put_tps.split(' ').next().unwrap().parse().unwrap();
        assert!((ten - 3.0 / 11.0).abs() < 1e-9, "{put_tps}");
        assert_eq!(put_tps.split(' ').count(), 2, "5.5.0 reports 10 s and 60 s");
        assert!(t.contains_key("getTransferredTps") && !t.contains_key("getTransferedTps"));
        let ratio: f64 = t["commitLogDiskRatio"].as_str().unwrap().parse().unwrap();
        assert!((0.0..=1.0).contains(&ratio), "{ratio}");

        let d4 = tempfile::tempdir().unwrap();
        let (ctx4, _) =
            broker(d4.path(), BrokerSettings { line: RocketmqLine::V4_9, ..BrokerSettings::default() });
        let t4 = table(&ctx4);
        assert_eq!(
            (t4["brokerVersionDesc"].as_str(), t4["brokerVersion"].as_str()),
            (Some("V4_9_7"), Some("407"))
        );
        assert!(t4.contains_key("getTransferedTps"), "4.9.7's spelling");
        assert!(!t4.contains_key("brokerActive"));
    }

    #[test]
    fn a_slave_reports_itself_inactive() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, host) = broker(d.path(), BrokerSettings::default());
        *host.role.lock().unwrap() = Some(logship_core::BrokerRole::Slave);
        assert_eq!(table(&ctx)["brokerActive"], "false");
    }

    #[test]
    fn broker_config_is_properties_text_of_allow_listed_settings_only() {
        let d = tempfile::tempdir().unwrap();
        let settings = BrokerSettings { broker_name: "b1".into(), ..BrokerSettings::default() };
        let (ctx, _) = broker(d.path(), settings);
        let r = call(&ctx, RemotingCommand::request(RequestCode::GET_BROKER_CONFIG));
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let version: Value = serde_json::from_str(&r.ext_fields["version"]).unwrap();
        assert!(version["timestamp"].as_i64().is_some() && version["counter"].as_i64().is_some());
        let text = String::from_utf8(r.body.to_vec()).unwrap();
        let props: BTreeMap<&str, &str> = text.lines().map(|l| l.split_once('=').unwrap()).collect();
        assert_eq!(props["brokerName"], "b1");
        assert_eq!(props["brokerRole"], "ASYNC_MASTER");
        assert_eq!(props["aclEnable"], "false");
        for k in props.keys() {
            let k = k.to_lowercase();
            assert!(
                !["secret", "password", "token", "tls", "key", "cert"].iter().any(|w| k.contains(w)),
                "no secret-bearing key: {k}"
            );
        }
    }

    fn view_stats(ctx: &RequestContext, name: &str, key: &str) -> RemotingCommand {
        let h = ViewBrokerStatsDataRequestHeader { stats_name: name.into(), stats_key: key.into() };
        ask(ctx, RequestCode::VIEW_BROKER_STATS_DATA, &h)
    }

    #[test]
    fn broker_stats_data_shows_a_topic_s_puts_and_a_group_s_pulls_per_view() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, host) = broker(d.path(), BrokerSettings::default());
        let now = || host.now_ms.load(std::sync::atomic::Ordering::Acquire);
        ctx.broker.stats.sample(now());
        put(&ctx, 0);
        put(&ctx, 1);
        ctx.broker.stats.group_got("cg", "TopicA", 2, 300);
        // Counted, not sampled yet: every view is zero, as Java's is until its next sample.
        let r = view_stats(&ctx, "TOPIC_PUT_NUMS", "TopicA");
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let v: Value = serde_json::from_slice(&r.body).unwrap();
        let zero = json!({"avgpt": 0.0, "sum": 0, "tps": 0.0});
        assert_eq!(v, json!({"statsDay": zero, "statsHour": zero, "statsMinute": zero}));
        host.now_ms.fetch_add(10_000, std::sync::atomic::Ordering::AcqRel);
        ctx.broker.stats.sample(now());
        let view = |name: &str, key: &str| {
            let r = view_stats(&ctx, name, key);
            assert_eq!(r.code, 0, "{name} {key}: {:?}", r.remark);
            BrokerStatsData::decode(&r.body).unwrap()
        };
        // Two puts of one message each over the 10 s since the key's first sample.
        let puts = view("TOPIC_PUT_NUMS", "TopicA");
        assert_eq!(puts.stats_minute, BrokerStatsItem::new(2, 0.2, 1.0));
        assert_eq!(puts.stats_hour, BrokerStatsItem::default(), "sampled every 10 minutes");
        let size = view("TOPIC_PUT_SIZE", "TopicA").stats_minute;
        assert!(size.sum > 2 && size.avgpt == size.sum as f64 / 2.0, "{size:?}");
        let gets = view("GROUP_GET_NUMS", "TopicA@cg");
        assert_eq!(gets.stats_minute, BrokerStatsItem::new(2, 0.2, 2.0));
        assert_eq!(view("GROUP_GET_SIZE", "TopicA@cg").stats_minute.sum, 300);
        // Java's answer to a statistic or key that does not exist.
        for (name, key) in
            [("TOPIC_PUT_NUMS", "Nope"), ("GROUP_GET_NUMS", "TopicA"), ("NO_SUCH_STAT", "TopicA")]
        {
            let r = view_stats(&ctx, name, key);
            assert_eq!(r.code, ResponseCode::SYSTEM_ERROR.0, "{name} {key}");
            assert_eq!(r.remark.unwrap(), format!("The stats <{name}> <{key}> not exist"));
        }
        let r = call(
            &ctx,
            RemotingCommand::request(RequestCode::VIEW_BROKER_STATS_DATA).with_ext_field("statsName", "X"),
        );
        assert_eq!(r.code, ResponseCode::SYSTEM_ERROR.0);
        assert!(r.remark.unwrap().contains("statsKey"), "the missing field is named");
    }

    fn stats(ctx: &RequestContext, group: &str, topic: Option<&str>) -> String {
        let h = GetConsumeStatsRequestHeader {
            consumer_group: group.into(),
            topic: topic.map(str::to_string),
            ..Default::default()
        };
        let r = ask(ctx, RequestCode::GET_CONSUME_STATS, &h);
        assert_eq!(r.code, 0, "{:?}", r.remark);
        String::from_utf8(r.body.to_vec()).unwrap()
    }

    #[test]
    fn consume_stats_show_each_queue_s_broker_and_consumer_offsets() {
        let d = tempfile::tempdir().unwrap();
        let settings = BrokerSettings { broker_name: "b1".into(), ..BrokerSettings::default() };
        let (ctx, _) = broker(d.path(), settings);
        put(&ctx, 0);
        put(&ctx, 0);
        put(&ctx, 0);
        put(&ctx, 2);
        ctx.broker.metadata.offsets.commit_offset("cg", "TopicA", 0, 2, 5);
        let t = ctx.broker.store.message_store_timestamp("TopicA", 0, 1);
        let q = |id: i32, max: u64, consumer: i64, last: i64| {
            format!(
                "{{\"brokerName\":\"b1\",\"queueId\":{id},\"topic\":\"TopicA\"}}:\
                 {{\"brokerOffset\":{max},\"consumerOffset\":{consumer},\"lastTimestamp\":{last},\"pullOffset\":{consumer}}}"
            )
        };
        let want = format!(
            "{{\"consumeTps\":0.0,\"offsetTable\":{{{},{},{},{}}}}}",
            q(0, 3, 2, t),
            q(1, 0, 0, 0),
            q(2, 1, 0, 0),
            q(3, 0, 0, 0)
        );
        // Every topic the group committed, and the one topic asked for, say the same.
        assert_eq!(stats(&ctx, "cg", None), want);
        assert_eq!(stats(&ctx, "cg", Some("TopicA")), want);
        assert_eq!(stats(&ctx, "cg", Some("Nope")), "{\"consumeTps\":0.0,\"offsetTable\":{}}");
        assert_eq!(stats(&ctx, "other", None), "{\"consumeTps\":0.0,\"offsetTable\":{}}");

        let d4 = tempfile::tempdir().unwrap();
        let (ctx4, _) =
            broker(d4.path(), BrokerSettings { line: RocketmqLine::V4_9, ..BrokerSettings::default() });
        put(&ctx4, 0);
        ctx4.broker.metadata.offsets.commit_offset("cg", "TopicA", 0, 1, 5);
        let body = stats(&ctx4, "cg", None);
        assert!(
            body.contains("\"brokerOffset\":1,\"consumerOffset\":1,\"lastTimestamp\":")
                && !body.contains("pullOffset"),
            "{body}"
        );
    }

    #[test]
    fn consume_stats_need_a_group_and_topic_consumers_are_listed() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), BrokerSettings::default());
        let r =
            call(&ctx, RemotingCommand::request(RequestCode::GET_CONSUME_STATS).with_ext_field("topic", "T"));
        assert_eq!(r.code, ResponseCode::SYSTEM_ERROR.0);
        assert!(r.remark.unwrap().contains("consumerGroup"));
        put(&ctx, 0);
        ctx.broker.metadata.offsets.commit_offset("g1", "TopicA", 0, 1, 5);
        let r = ask(
            &ctx,
            RequestCode::QUERY_TOPIC_CONSUME_BY_WHO,
            &QueryTopicConsumeByWhoRequestHeader { topic: "TopicA".into(), ..Default::default() },
        );
        assert_eq!(r.code, 0, "{:?}", r.remark);
        assert_eq!(String::from_utf8_lossy(&r.body), "{\"groupList\":[\"g1\"]}");
    }
}
