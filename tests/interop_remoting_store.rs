//! What producers send over logship's remoting port is stored as Java stores it: a logship
//! broker (answering as RocketMQ 4.9 or 5) takes single, Go-style, compressed, delayed, retry
//! and batch sends with tags, keys and properties; then Apache RocketMQ's own
//! `DefaultMessageStore` (4.9.8 and 5.5.1) opens the logship store and reads every message
//! through its consume queues identically, field by field (properties, tags, keys, hosts,
//! sysFlag, ids, offsets, body), and finds them by key in logship's index.
//!
//! See `support/interop.rs` for when these tests skip.

#[path = "support/interop.rs"]
mod interop;
mod process;
mod remoting_support;

use std::collections::BTreeMap;

use base64::Engine;
use interop::*;
use logship_remoting::header::SendMessageRequestHeader;
use logship_remoting::{RemotingCommand, RequestCode};
use logship_store::{CommitLog, StoreConfig, StoredMessage};
use remoting_support::{Client, send_request, sent, v2};
use serde_json::{Value, json};

const SLOTS: u32 = 64;
const ENTRIES: u32 = 1000;

/// A Java client's batch body (`MessageDecoder.encodeMessages`).
fn batch_body(messages: &[(&[u8], &str)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, (body, props)) in messages.iter().enumerate() {
        let total = 20 + body.len() + 2 + props.len();
        for v in [total as i32, 0, 0, i as i32, body.len() as i32] {
            out.extend_from_slice(&v.to_be_bytes());
        }
        out.extend_from_slice(body);
        out.extend_from_slice(&(props.len() as i16).to_be_bytes());
        out.extend_from_slice(props.as_bytes());
    }
    out
}

/// Every kind of send a Java or Go producer makes; the (topic, queue) each landed in.
fn produce(client: &mut Client) -> Vec<(String, i32)> {
    let mut landed = Vec::new();
    let mut ok = |r: RemotingCommand, topic: &str| {
        assert!(r.code == 0, "code {} {:?}", r.code, r.remark);
        landed.push((topic.to_string(), sent(&r).queue_id));
    };
    for i in 0..6 {
        let props = format!(
            "KEYS\u{1}order-{i} shared\u{2}UNIQ_KEY\u{1}7F0000011234{i:04}\u{2}WAIT\u{1}true\u{2}TAGS\u{1}Tag{}\u{2}color\u{1}blue",
            i % 2
        );
        ok(
            client.call(send_request("InteropT", i % 2, &props, format!("body {i} é").as_bytes())),
            "InteropT",
        );
    }
    // A compressed body (sysFlag COMPRESSED | ZLIB type), as Java sends bodies over 4 KiB.
    let mut h = v2("InteropT", 0, "TAGS\u{1}Big");
    h.f = 0x301;
    ok(
        client.call(
            RemotingCommand::request(RequestCode::SEND_MESSAGE_V2).with_header(&h).with_body(vec![7u8; 5000]),
        ),
        "InteropT",
    );
    // The Go client: SEND_MESSAGE with long names, queue chosen by the client, no WAIT.
    let go = SendMessageRequestHeader {
        producer_group: "GoPG".into(),
        topic: "InteropT".into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 1,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_999,
        flag: 3,
        properties: Some("TAGS\u{1}GoTag\u{2}KEYS\u{1}go-1\u{2}".into()),
        reconsume_times: Some(0),
        max_reconsume_times: Some(0),
        ..Default::default()
    };
    ok(
        client.call(
            RemotingCommand::request(RequestCode::SEND_MESSAGE)
                .with_version(317)
                .with_header(&go)
                .with_body(&b"from go"[..]),
        ),
        "InteropT",
    );
    // A delayed message waits in the schedule topic.
    let r = client.call(send_request("InteropT", 0, "DELAY\u{1}2\u{2}TAGS\u{1}Later", b"later"));
    assert_eq!(r.code, 0);
    // A consumer's retry, past its budget: the dead-letter topic.
    let mut retry = v2("%RETRY%CG", 0, "TAGS\u{1}Again\u{2}RETRY_TOPIC\u{1}InteropT");
    retry.j = Some(20);
    let r = client.call(
        RemotingCommand::request(RequestCode::SEND_MESSAGE_V2)
            .with_version(513)
            .with_header(&retry)
            .with_body(&b"dead"[..]),
    );
    assert_eq!(r.code, 0, "{:?}", r.remark);
    // A batch.
    let mut b = v2("InteropB", 0, "UNIQ_KEY\u{1}BATCH1\u{2}WAIT\u{1}true");
    b.m = Some(true);
    let body = batch_body(&[
        (b"b0", "KEYS\u{1}batch-0\u{2}UNIQ_KEY\u{1}U-B0\u{2}WAIT\u{1}true\u{2}TAGS\u{1}TagB"),
        (b"b1", "TAGS\u{1}TagB\u{2}"),
        // (An empty properties string reads as a null map in Java 5, which the harness cannot print.)
        (b"b2", "TAGS\u{1}TagB"),
    ]);
    ok(
        client.call(
            RemotingCommand::request(RequestCode::SEND_BATCH_MESSAGE)
                .with_version(513)
                .with_header(&b)
                .with_body(body),
        ),
        "InteropB",
    );
    // The delayed message waits in level 2's queue; the dead letter in the DLQ's one queue (in
    // 4.9, whose retry keeps the client's DELAY, it waits for its delay level there too).
    landed.push(("SCHEDULE_TOPIC_XXXX".to_string(), 1));
    landed.push(("%DLQ%CG".to_string(), 0));
    landed.sort();
    landed.dedup();
    landed
}

/// A message as the harness prints it, from logship's own read of the record.
fn as_java_prints(m: &StoredMessage) -> Value {
    let props: BTreeMap<&str, &str> = m.properties.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let get = |k: &str| props.get(k).map(|v| json!(v)).unwrap_or(Value::Null);
    json!({
        "topic": m.topic,
        "queueId": m.queue_id,
        "queueOffset": m.queue_offset,
        "commitLogOffset": m.physical_offset,
        "storeSize": m.total_size,
        "msgId": m.msg_id(),
        "bodyCRC": m.body_crc,
        "flag": m.flag,
        "bornHost": format!("/{}", m.born_host),
        "storeHost": format!("/{}", m.store_host),
        "sysFlag": m.sys_flag,
        "bornTimestamp": m.born_timestamp,
        "storeTimestamp": m.store_timestamp,
        "tags": get("TAGS"),
        "keys": get("KEYS"),
        "properties": props,
        "body": base64::engine::general_purpose::STANDARD.encode(&m.body),
    })
}

fn compare(java: &Value, ours: &Value) {
    for (field, expected) in ours.as_object().unwrap() {
        assert_eq!(&java[field], expected, "field {field} of {ours}\njava: {java}");
    }
}

fn java_reads_what_producers_sent_to_logship(h: &Harness) {
    let line = if h.rocketmq.version.starts_with('4') { "4.9" } else { "5" };
    let dir = tempfile::tempdir().unwrap();
    let slots = format!("maxHashSlotNum={SLOTS}");
    let entries = format!("maxIndexNum={ENTRIES}");
    let rocketmq_line = format!("rocketmqLine={line}");
    let mut broker = process::Broker::start(
        "master",
        dir.path(),
        free_port_pair(),
        &["--set", &slots, "--set", &entries, "--set", &rocketmq_line],
    );
    let mut client = Client::connect(broker.remoting_addr());
    let queues = produce(&mut client);
    assert!(broker.terminate().is_some_and(|s| s.success()));

    // What logship stored, read by logship.
    let mut config = StoreConfig::default();
    config.mapped_file_size_commit_log = SEG;
    config.max_message_size = 262_144;
    let log = CommitLog::open(dir.path(), config).unwrap();
    let mut ours = Vec::new();
    for (topic, q) in &queues {
        let (min, max) = log.queue_bounds(topic, *q);
        assert!(max > min, "{topic} {q} holds messages");
        for e in log.read_queue(topic, *q, min, (max - min) as usize).unwrap() {
            ours.push(as_java_prints(&log.read_message(e.physical_offset).unwrap()));
        }
    }
    drop(log);
    assert_eq!(ours.len(), 13);

    // Java on the same store.
    let ha = free_port().to_string();
    let args = ["--ha-port", &ha, "--index-slots", &SLOTS.to_string(), "--index-num", &ENTRIES.to_string()];
    let mut java = JavaStore::start(h, "ASYNC_MASTER", dir.path(), SEG, &args);
    let mut theirs = Vec::new();
    for (topic, q) in &queues {
        theirs.extend(java.queue_of(topic, *q).into_iter().filter(|m| m["event"] == "message"));
    }
    assert_eq!(theirs.len(), ours.len(), "java read {theirs:?}");
    for (j, o) in theirs.iter().zip(&ours) {
        assert_eq!(j["found"], true, "{j}");
        compare(j, o);
    }
    // The stored properties follow the line (4.9 strips WAIT and stores no MSG_REGION).
    let first = &theirs.iter().find(|m| m["topic"] == "InteropT").unwrap()["properties"];
    assert_eq!(first["CLUSTER"], "DefaultCluster");
    assert_eq!(first.get("WAIT").is_some(), line == "5", "{first}");
    assert_eq!(first.get("MSG_REGION").is_some(), line == "5", "{first}");
    // Java finds the messages by key in logship's index.
    let found = java.command("querymsg InteropT shared 32 0 9223372036854775807");
    let offsets = found.last().unwrap()["physicalOffsets"].as_array().map_or(0, Vec::len);
    assert_eq!(offsets, 6, "{found:?}");
    java.shutdown();
}

#[test]
fn java_4_9_reads_what_producers_sent_to_logship() {
    if let Some(h) = harness(ROCKETMQ_4, "java_4_9_reads_what_producers_sent_to_logship") {
        java_reads_what_producers_sent_to_logship(&h);
    }
}

#[test]
fn java_5_reads_what_producers_sent_to_logship() {
    if let Some(h) = harness(ROCKETMQ_5, "java_5_reads_what_producers_sent_to_logship") {
        java_reads_what_producers_sent_to_logship(&h);
    }
}
