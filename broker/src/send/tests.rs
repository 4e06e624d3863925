use logship_core::{BrokerRole, PutResult, PutStatus};
use logship_remoting::header::{CommandHeader, SendMessageRequestHeader, SendMessageRequestHeaderV2};
use logship_remoting::{RemotingCommand, RequestCode};
use logship_store::StoredMessage;

use super::*;
use crate::BrokerSettings;
use crate::serve::testing::{TestHost, broker, call};

const PROPS: &str = "KEYS\u{1}k1\u{2}UNIQ_KEY\u{1}U1\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagA\u{2}p1\u{1}v1";

fn v2(topic: &str, queue_id: i32, properties: &str) -> SendMessageRequestHeaderV2 {
    SendMessageRequestHeaderV2 {
        a: "PG".into(),
        b: topic.into(),
        c: "TBW102".into(),
        d: 4,
        e: queue_id,
        f: 0,
        g: 1_700_000_000_123,
        h: 7,
        i: Some(properties.into()),
        j: Some(0),
        k: Some(false),
        m: Some(false),
        ..Default::default()
    }
}

fn send(ctx: &RequestContext, header: &SendMessageRequestHeaderV2, body: &[u8]) -> RemotingCommand {
    let code =
        if header.m == Some(true) { RequestCode::SEND_BATCH_MESSAGE } else { RequestCode::SEND_MESSAGE_V2 };
    let request = RemotingCommand::request(code)
        .with_opaque(77)
        .with_version(513)
        .with_header(header)
        .with_body(body.to_vec());
    call(ctx, request)
}

/// The message a response's offset id names.
fn stored(host: &TestHost, response: &RemotingCommand) -> StoredMessage {
    let id = &response.ext_fields["msgId"];
    host.store.read_message(u64::from_str_radix(&id[id.len() - 16..], 16).unwrap()).unwrap()
}

/// The topic a response's message landed in, from its offset id.
fn stored_topic(response: &RemotingCommand, host: &TestHost) -> String {
    let id = &response.ext_fields["msgId"];
    let offset = u64::from_str_radix(&id[id.len() - 16..], 16).unwrap();
    host.store.read_message(offset).unwrap().topic
}

fn raw_properties(host: &TestHost, response: &RemotingCommand) -> String {
    let id = &response.ext_fields["msgId"];
    let offset = u64::from_str_radix(&id[id.len() - 16..], 16).unwrap();
    let m = host.store.read_message(offset).unwrap();
    let record = host.store.read(logship_core::LogSpan { offset, len: m.total_size }).unwrap();
    String::from_utf8(record[record.len() - props_encoded_len(&m)..].to_vec()).unwrap()
}

/// The stored properties string's length, from the record's own length field.
fn props_encoded_len(m: &StoredMessage) -> usize {
    // total = fixed fields + body + topic + 2 + properties
    let born = if m.born_host.is_ipv6() { 20 } else { 8 };
    let store = if m.store_host.is_ipv6() { 20 } else { 8 };
    let fixed = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + born + 8 + store + 4 + 8 + 4 + 1 + 2;
    m.total_size as usize - fixed - m.body.len() - m.topic.len()
}

fn settings(line: RocketmqLine) -> BrokerSettings {
    BrokerSettings {
        line,
        broker_cluster_name: "c1".into(),
        broker_name: "b1".into(),
        listen_port: 20911,
        ..BrokerSettings::default()
    }
}

#[test]
fn a_5x_send_is_stored_as_a_5_5_broker_stores_it() {
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V5));
    let r = send(&ctx, &v2("TopicA", 1, PROPS), b"hello");
    assert_eq!((r.code, r.opaque, r.version), (0, 77, 513), "{:?}", r.remark);
    let h = SendMessageResponseHeader::from_ext_fields(&r.ext_fields).unwrap();
    assert_eq!((h.queue_id, h.queue_offset), (1, 0));
    assert_eq!(h.msg_id.len(), 32);
    assert!(h.msg_id.starts_with("7F000001000051AF"), "127.0.0.1:20911: {}", h.msg_id);
    assert_eq!(h.transaction_id.as_deref(), Some("U1"));
    assert_eq!(
        (r.ext_fields["MSG_REGION"].as_str(), r.ext_fields["TRACE_ON"].as_str()),
        ("DefaultRegion", "true")
    );
    let m = stored(&host, &r);
    assert_eq!(
        (m.flag, m.born_timestamp, m.reconsume_times, &m.body[..]),
        (7, 1_700_000_000_123, 0, &b"hello"[..])
    );
    assert_eq!(m.born_host, "10.0.0.9:40000".parse().unwrap(), "the peer, not a header");
    assert_eq!(m.store_host, "127.0.0.1:20911".parse().unwrap());
    // The order and layout the 5.5.0 jar stored for the same input (spec-clients 2.4.3).
    assert_eq!(
        raw_properties(&host, &r),
        "MSG_REGION\u{1}DefaultRegion\u{2}UNIQ_KEY\u{1}U1\u{2}CLUSTER\u{1}c1\u{2}TAGS\u{1}TagA\u{2}p1\u{1}v1\u{2}\
         KEYS\u{1}k1\u{2}WAIT\u{1}true\u{2}TRACE_ON\u{1}true\u{2}"
    );
    // The topic came from TBW102: min(4, 8) queues, read-write; the host heard of it.
    let t = ctx.broker.metadata.topics.select("TopicA").unwrap();
    assert_eq!((t.read_queue_nums, t.write_queue_nums, t.perm), (4, 4, 6));
    assert_eq!(host.topics_changed.load(std::sync::atomic::Ordering::Acquire), 1);
}

#[test]
fn a_4_9_send_is_stored_as_a_4_9_7_broker_stores_it() {
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V4_9));
    let r = send(&ctx, &v2("TopicA", 0, PROPS), b"hello");
    assert_eq!((r.code, r.version), (0, 407));
    let h = SendMessageResponseHeader::from_ext_fields(&r.ext_fields).unwrap();
    assert_eq!(h.transaction_id, None, "4.9.7 sets no transactionId");
    assert_eq!(
        raw_properties(&host, &r),
        "p1\u{1}v1\u{2}KEYS\u{1}k1\u{2}UNIQ_KEY\u{1}U1\u{2}CLUSTER\u{1}c1\u{2}TAGS\u{1}TagA"
    );
    // No UNIQ_KEY is made up for a message without one.
    let r = send(&ctx, &v2("TopicA", 0, "TAGS\u{1}x"), b"x");
    assert!(!raw_properties(&host, &r).contains("UNIQ_KEY"));
}

#[test]
fn a_5x_send_without_a_client_id_gets_one_the_client_can_read_the_time_from() {
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V5));
    let r = send(&ctx, &v2("TopicA", 0, "TAGS\u{1}x"), b"x");
    let id = SendMessageResponseHeader::from_ext_fields(&r.ext_fields).unwrap().transaction_id.unwrap();
    assert_eq!(id.len(), 32);
    assert!(raw_properties(&host, &r).contains(&format!("UNIQ_KEY\u{1}{id}")));
    // Bytes 10..14 are the milliseconds since the month began.
    let since = u32::from_str_radix(&id[20..28], 16).unwrap() as i64;
    let now = host.now_ms.load(std::sync::atomic::Ordering::Acquire);
    assert_eq!(month_start_utc(now) + since, now);
}

#[test]
fn month_starts_are_utc_calendar_months() {
    // 2024-02-29T13:00:00Z is in the month that began 2024-02-01T00:00:00Z.
    assert_eq!(month_start_utc(1_709_211_600_000), 1_706_745_600_000);
    assert_eq!(month_start_utc(1_706_745_600_000), 1_706_745_600_000);
    // 1969-12-31T23:59:59Z.
    assert_eq!(month_start_utc(-1_000), -2_678_400_000);
}

#[test]
fn the_checks_answer_in_java_s_order_with_java_s_codes_and_remarks() {
    for line in [RocketmqLine::V5, RocketmqLine::V4_9] {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), settings(line));
        let invalid = if line == RocketmqLine::V5 { 29 } else { 1 };
        let r = send(&ctx, &v2("bad topic", 0, ""), b"x");
        assert_eq!(r.code, invalid);
        assert!(r.remark.as_deref().unwrap().contains("contains illegal characters"), "{:?}", r.remark);
        assert_eq!(r.ext_fields["MSG_REGION"], "DefaultRegion", "refusals after the first checks carry it");
        let r = send(&ctx, &v2(&"t".repeat(128), 0, ""), b"x");
        assert!(r.remark.unwrap().contains("longer than topic max length"));
        let r = send(&ctx, &v2("SCHEDULE_TOPIC_XXXX", 0, ""), b"x");
        assert_eq!(
            (r.code, r.remark.as_deref()),
            (16, Some("Sending message to topic[SCHEDULE_TOPIC_XXXX] is forbidden."))
        );
        let r = send(&ctx, &v2("TopicA", 9, ""), b"x");
        assert_eq!(r.code, invalid);
        let remark = r.remark.unwrap();
        assert!(remark.starts_with("request queueId[9] is illegal, TopicConfig [topicName=TopicA, readQueueNums=4, writeQueueNums=4, perm=RW-"), "{remark}");
        assert!(remark.ends_with("Producer: 10.0.0.9:40000"), "{remark}");
        assert_eq!(remark.contains("attributes={}"), line == RocketmqLine::V5);
        let mut no_born = v2("TopicA", 0, "");
        no_born.g = 0;
        let mut request =
            RemotingCommand::request(RequestCode::SEND_MESSAGE_V2).with_header(&no_born).with_body(&b"x"[..]);
        request.ext_fields.remove("g");
        let r = call(&ctx, request);
        assert_eq!(r.code, 1);
        assert!(r.remark.unwrap().contains("<g>"), "a missing field is named");
        let mut garbled = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)
            .with_header(&v2("TopicA", 0, ""))
            .with_body(&b"x"[..]);
        garbled.ext_fields.insert("e".into(), "zz".into());
        let r = call(&ctx, garbled);
        assert_eq!(r.code, 1);
        assert!(r.remark.unwrap().contains("\"zz\""));
    }
}

#[test]
fn without_auto_create_an_unknown_topic_is_topic_not_exist() {
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) =
        broker(d.path(), BrokerSettings { auto_create_topic_enable: false, ..settings(RocketmqLine::V5) });
    let r = send(&ctx, &v2("TopicA", 0, ""), b"x");
    assert_eq!(r.code, 17);
    assert_eq!(
        r.remark.as_deref(),
        Some(
            "topic[TopicA] not exist, apply first please!\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."
        )
    );
    assert!(!ctx.broker.metadata.topics.contains("TopicA"));
    assert_eq!(host.store.max_offset(), 0);
    // A retry topic is still created (Java's fallback), with one queue.
    let r = send(&ctx, &v2("%RETRY%G1", 0, ""), b"x");
    assert_eq!(r.code, 0, "{:?}", r.remark);
    assert_eq!(ctx.broker.metadata.topics.select("%RETRY%G1").unwrap().write_queue_nums, 1);
}

#[test]
fn a_slave_refuses_sends_as_its_line_does() {
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V5));
    *host.role.lock().unwrap() = Some(BrokerRole::Slave);
    let r = send(&ctx, &v2("TopicA", 0, ""), b"x");
    assert_eq!((r.code, r.remark.as_deref()), (2, Some(REJECT_REQUEST_REMARK)));
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V4_9));
    *host.role.lock().unwrap() = Some(BrokerRole::Slave);
    *host.refuse.lock().unwrap() =
        Some(PutOutcome::Refused { stored: false, reason: "this broker is a SLAVE".into() });
    let r = send(&ctx, &v2("TopicA", 0, ""), b"x");
    assert_eq!(r.code, 14, "4.9.7's store answers SERVICE_NOT_AVAILABLE, which clients retry elsewhere");
    // Java's words, the disk's use in Java's `diskUtil` form, nothing after them.
    let remark = r.remark.unwrap();
    let (head, rest) = remark.split_once('[').expect("a bracket");
    let (util, tail) = rest.split_once(']').expect("a closing bracket");
    assert_eq!(
        head,
        "service not available now. It may be caused by one of the following reasons: the broker's disk is full "
    );
    assert_eq!(tail, ", messages are put to the slave, message store has been shut down, etc.");
    let ratio: f64 = ctx.broker.store.status().disk_used_ratio.unwrap_or(-1.0);
    assert_eq!(util, format!("CL: {ratio:5.2} CQ: {ratio:5.2} INDEX: {ratio:5.2}"));
}

#[test]
fn replication_and_flush_outcomes_map_to_java_s_codes_with_the_header() {
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V5));
    for (status, code) in [
        (PutStatus::FlushSlaveTimeout, 12),
        (PutStatus::SlaveNotAvailable, 11),
        (PutStatus::FlushDiskTimeout, 10),
        (PutStatus::InSyncReplicasNotEnough, 1),
        (PutStatus::MessageIllegal, 13),
        (PutStatus::ServiceNotAvailable, 14),
    ] {
        let result =
            PutResult { status, offset: 0x40, wrote_bytes: 100, queue_offset: 3, msg_id: "ID".into() };
        *host.refuse.lock().unwrap() = Some(PutOutcome::Put(result));
        let r = send(&ctx, &v2("TopicA", 2, ""), b"x");
        assert_eq!(r.code, code, "{status:?}: {:?}", r.remark);
        let header = SendMessageResponseHeader::from_ext_fields(&r.ext_fields);
        if (10..=12).contains(&code) {
            let h = header.unwrap();
            assert_eq!(
                (h.msg_id.as_str(), h.queue_id, h.queue_offset),
                ("ID", 2, 3),
                "stored: clients read the header"
            );
        } else {
            assert!(header.is_err(), "{status:?} is not stored");
        }
    }
}

#[test]
fn a_retry_message_past_its_reconsume_budget_goes_to_the_dead_letter_topic() {
    for (line, dlq_at) in [(RocketmqLine::V5, 17), (RocketmqLine::V4_9, 16)] {
        let d = tempfile::tempdir().unwrap();
        let (ctx, host) = broker(d.path(), settings(line));
        let retry = |times: i32| {
            let mut h = v2("%RETRY%G1", 0, "DELAY\u{1}3\u{2}TAGS\u{1}t");
            h.j = Some(times);
            send(&ctx, &h, b"again")
        };
        let r = retry(dlq_at - 1);
        assert_eq!(stored_topic(&r, &host), "SCHEDULE_TOPIC_XXXX", "{line:?}: still retried (delayed first)");
        let r = retry(dlq_at);
        assert_eq!(r.code, 0, "{:?}", r.remark);
        let h = SendMessageResponseHeader::from_ext_fields(&r.ext_fields).unwrap();
        assert_eq!(h.queue_id, 0);
        let topic = stored_topic(&r, &host);
        match line {
            // 5.x writes DELAY=-1: straight to the DLQ.
            RocketmqLine::V5 => {
                assert_eq!(topic, "%DLQ%G1");
                assert!(raw_properties(&host, &r).contains("DELAY\u{1}-1"));
            }
            // 4.9.7's quirk: the client's DELAY survives and the DLQ message is scheduled.
            RocketmqLine::V4_9 => {
                assert_eq!(topic, "SCHEDULE_TOPIC_XXXX");
                assert!(raw_properties(&host, &r).contains("REAL_TOPIC\u{1}%DLQ%G1"));
            }
        }
        let dlq = ctx.broker.metadata.topics.select("%DLQ%G1").unwrap();
        assert_eq!((dlq.write_queue_nums, dlq.perm), (1, 6));
        assert!(ctx.broker.metadata.groups.contains("G1"), "the group is created with its retry topic");
    }
    // The request's own threshold counts only from clients of version 121 on.
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V5));
    let mut h = v2("%RETRY%G2", 0, "");
    h.j = Some(2);
    h.l = Some(1);
    assert_eq!(stored_topic(&send(&ctx, &h, b"x"), &host), "%DLQ%G2");
    let old = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)
        .with_version(0)
        .with_header(&h)
        .with_body(&b"x"[..]);
    assert_eq!(stored_topic(&call(&ctx, old), &host), "%RETRY%G2", "version 0: the group's 16");
}

#[test]
fn a_delayed_message_waits_in_the_schedule_topic_for_its_level() {
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V5));
    let r = send(&ctx, &v2("TopicA", 2, "DELAY\u{1}99\u{2}TAGS\u{1}t"), b"x");
    let h = SendMessageResponseHeader::from_ext_fields(&r.ext_fields).unwrap();
    assert_eq!((h.queue_id, h.queue_offset), (2, 0), "the queue asked for; the offset in the schedule queue");
    let m = stored(&host, &r);
    assert_eq!((m.topic.as_str(), m.queue_id), ("SCHEDULE_TOPIC_XXXX", 17), "level 99 is clamped to 18");
    let props = raw_properties(&host, &r);
    for p in ["DELAY\u{1}18\u{2}", "REAL_TOPIC\u{1}TopicA\u{2}", "REAL_QID\u{1}2\u{2}"] {
        assert!(props.contains(p), "{p:?} in {props:?}");
    }
}

#[test]
fn transactions_and_timers_are_refused_as_a_broker_without_them_refuses_them() {
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V5));
    let r = send(&ctx, &v2("TopicA", 0, "TRAN_MSG\u{1}true"), b"x");
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (16, Some("the broker[127.0.0.1] sending transaction message is forbidden"))
    );
    let r = send(&ctx, &v2("TopicA", 0, "TIMER_DELAY_SEC\u{1}10"), b"x");
    assert_eq!(
        (r.code, r.remark.as_deref()),
        (1, Some("accurate timer message is not enabled, timerWheelEnable is false"))
    );
    assert_eq!(host.store.max_offset(), 0);
}

#[test]
fn client_sys_flag_bits_the_broker_owns_are_not_stored() {
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V5));
    let mut h = v2("TopicA", 0, "");
    h.f = 0x301 | 0x10 | 0x20 | 0x40 | 0x80;
    let m = stored(&host, &send(&ctx, &h, b"compressed"));
    assert_eq!(m.sys_flag, 0x301, "compression kept; host families and inner-batch bits dropped");
}

#[test]
fn an_empty_body_is_stored_by_4_9_and_refused_by_5x() {
    let d = tempfile::tempdir().unwrap();
    let (ctx, _) = broker(d.path(), settings(RocketmqLine::V5));
    assert_eq!(send(&ctx, &v2("TopicA", 0, ""), b"").code, 1);
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V4_9));
    let r = send(&ctx, &v2("TopicA", 0, ""), b"");
    assert_eq!(r.code, 0);
    assert!(stored(&host, &r).body.is_empty());
}

#[test]
fn a_go_client_s_send_message_with_long_names_is_served() {
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V5));
    let header = SendMessageRequestHeader {
        producer_group: "PG".into(),
        topic: "TopicG".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: -1,
        sys_flag: 0,
        born_timestamp: 5,
        flag: 0,
        properties: Some("TAGS\u{1}TagG\u{2}".into()),
        reconsume_times: Some(0),
        max_reconsume_times: Some(0),
        ..Default::default()
    };
    let request = RemotingCommand::request(RequestCode::SEND_MESSAGE)
        .with_version(317)
        .with_header(&header)
        .with_body(&b"go"[..]);
    let r = call(&ctx, request);
    assert_eq!(r.code, 0, "{:?}", r.remark);
    let h = SendMessageResponseHeader::from_ext_fields(&r.ext_fields).unwrap();
    assert!((0..4).contains(&h.queue_id), "queue -1: the broker picks one of the 4");
    assert_eq!(stored(&host, &r).tags(), Some("TagG"));
}

/// A batch body as the Java client encodes it (`MessageDecoder.encodeMessages`).
fn batch_body(messages: &[(&[u8], &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (body, props)) in messages.iter().enumerate() {
        let total = 4 + 4 + 4 + 4 + 4 + body.len() + 2 + props.len();
        out.extend_from_slice(&(total as i32).to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&0i32.to_be_bytes());
        out.extend_from_slice(&(i as i32).to_be_bytes());
        out.extend_from_slice(&(body.len() as i32).to_be_bytes());
        out.extend_from_slice(body);
        out.extend_from_slice(&(props.len() as i16).to_be_bytes());
        out.extend_from_slice(props.as_bytes());
    }
    out
}

#[test]
fn a_batch_is_stored_in_one_queue_with_every_message_s_id() {
    let body = batch_body(&[
        (b"b0", "KEYS\u{1}B0\u{2}UNIQ_KEY\u{1}U0\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagC"),
        (b"b1", "TAGS\u{1}TagC\u{2}"),
    ]);
    for line in [RocketmqLine::V5, RocketmqLine::V4_9] {
        let d = tempfile::tempdir().unwrap();
        let (ctx, host) = broker(d.path(), settings(line));
        let mut h = v2("TopicB", 1, "UNIQ_KEY\u{1}BATCH\u{2}WAIT\u{1}true");
        h.m = Some(true);
        let r = send(&ctx, &h, &body);
        assert_eq!(r.code, 0, "{line:?}: {:?}", r.remark);
        let header = SendMessageResponseHeader::from_ext_fields(&r.ext_fields).unwrap();
        let ids: Vec<&str> = header.msg_id.split(',').collect();
        assert_eq!((ids.len(), header.queue_id, header.queue_offset), (2, 1, 0));
        let entries = host.store.read_queue("TopicB", 1, 0, 10).unwrap();
        let first = host.store.read_message(entries[0].physical_offset).unwrap();
        let second = host.store.read_message(entries[1].physical_offset).unwrap();
        assert_eq!((first.flag, second.flag, &second.body[..]), (0, 1, &b"b1"[..]));
        assert_eq!(first.msg_id(), ids[0]);
        match line {
            RocketmqLine::V5 => {
                // 5.5.0 keeps each message's own properties, and answers the batch's id.
                assert_eq!(first.properties.len(), 4);
                assert_eq!(header.transaction_id.as_deref(), Some("BATCH"));
            }
            RocketmqLine::V4_9 => {
                // 4.9.7 appends the batch's properties and CLUSTER to every message.
                let mut p: Vec<&str> = second.properties.iter().map(|(n, _)| n.as_str()).collect();
                p.sort_unstable();
                assert_eq!(p, ["CLUSTER", "TAGS", "UNIQ_KEY", "WAIT"]);
            }
        }
    }
}

#[test]
fn bad_batches_are_refused_with_what_is_wrong() {
    let d = tempfile::tempdir().unwrap();
    let (ctx, host) = broker(d.path(), settings(RocketmqLine::V5));
    let mut h = v2("TopicB", 0, "");
    h.m = Some(true);
    let mut garbage = batch_body(&[(b"b0", "TAGS\u{1}x")]);
    garbage[3] ^= 0x40;
    let r = send(&ctx, &h, &garbage);
    assert_eq!(r.code, 1);
    assert!(r.remark.unwrap().contains("totalSize"));
    let truncated = &batch_body(&[(b"b0", "TAGS\u{1}x")])[..10];
    assert!(send(&ctx, &h, truncated).remark.unwrap().contains("ends early"));
    let mut retry = h.clone();
    retry.b = "%RETRY%G".into();
    assert_eq!(send(&ctx, &retry, &batch_body(&[(b"x", "")])).code, 13);
    let mut delayed = h.clone();
    delayed.i = Some("DELAY\u{1}2".into());
    assert_eq!(send(&ctx, &delayed, &batch_body(&[(b"x", "")])).code, 13);
    assert_eq!(host.store.max_offset(), 0, "nothing stored");
}

#[test]
fn batch_bodies_decode_as_the_java_client_encodes_them_and_never_panic() {
    let body = Bytes::from(batch_body(&[(b"abc", "TAGS\u{1}t"), (b"", "")]));
    let entries = decode_batch(&body).unwrap();
    assert_eq!(entries.len(), 2);
    assert_eq!((&entries[0].body[..], entries[0].properties_string.as_str()), (&b"abc"[..], "TAGS\u{1}t"));
    let mut state = 1u64;
    for len in 0..200 {
        let mut b = body.to_vec();
        for _ in 0..3 {
            state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
            let at = (state >> 33) as usize % b.len();
            b[at] = (state >> 20) as u8;
        }
        b.truncate(len % (b.len() + 1));
        let _ = decode_batch(&Bytes::from(b));
    }
}
