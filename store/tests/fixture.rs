//! Interoperability: a store written by another RocketMQ implementation (rocketmq-rust 1.0.0,
//! master, ASYNC_FLUSH; see `tests/fixtures/README.md`) opens, recovers and reads as RocketMQ
//! wrote it.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use bytes::Bytes;
use common::Env;
use logship_store::codec::{self, StoreFields};
use logship_store::{LogSpan, Message, MessageVersion, PutStatus, RecoveryKind, StoreConfig};

const MESSAGES: u64 = 6000;
const STORED_LEN: u64 = 129;
const END: u64 = 774_000;
const TOPIC: &str = "HA_INTEROP_TOPIC";

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rocketmq-commitlog-6000msgs.tgz")
}

/// Unpacks the fixture into a fresh temporary directory (the fixture itself is never touched).
fn unpack() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let status = Command::new("tar").arg("xzf").arg(fixture()).arg("-C").arg(dir.path()).status().unwrap();
    assert!(status.success(), "tar failed on {}", fixture().display());
    dir
}

fn fixture_config() -> StoreConfig {
    let mut c = common::config();
    c.mapped_file_size_commit_log = 1024 * 1024; // the fixture's mappedFileSizeCommitLog
    c.mapped_file_size_consume_queue = 300_000 * 20; // RocketMQ's default, as in the fixture
    c.max_message_size = 512 * 1024;
    c
}

#[test]
fn the_rocketmq_rust_fixture_opens_recovers_and_reads_all_6000_messages() {
    let dir = unpack();
    let original_segment = std::fs::read(dir.path().join("commitlog/00000000000000000000")).unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), fixture_config()).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(report.kind, RecoveryKind::ForeignClean, "{report:?}");
    assert_eq!(report.end, END);
    assert_eq!(log.bounds().min, 0);
    assert_eq!(log.bounds().max, END);

    // Every message through the commit log, in order.
    let mut offset = 0;
    for i in 0..MESSAGES {
        let m = log.read_message(offset).unwrap();
        assert_eq!(m.version, MessageVersion::V1);
        assert_eq!(m.total_size as u64, STORED_LEN);
        assert_eq!((m.topic.as_str(), m.queue_id), (TOPIC, 0));
        assert_eq!((m.queue_offset as u64, m.physical_offset as u64), (i, offset));
        assert_eq!(m.body, Bytes::from(format!("interop-message-{i:06}")));
        assert_eq!(m.body_crc, codec::body_crc(&m.body));
        offset += u64::from(m.total_size);
    }
    assert_eq!(offset, END);

    // And through the consume queue.
    assert_eq!(log.queue_bounds(TOPIC, 0), (0, MESSAGES));
    let msgs = log.read_queue_messages(TOPIC, 0, 0, MESSAGES as usize).unwrap();
    assert_eq!(msgs.len() as u64, MESSAGES);
    for (i, m) in msgs.iter().enumerate() {
        assert_eq!(m.body, Bytes::from(format!("interop-message-{i:06}")));
        assert_eq!(m.physical_offset as u64, i as u64 * STORED_LEN);
    }
    let page = log.read_queue(TOPIC, 0, 5990, 100).unwrap();
    assert_eq!(page.len(), 10);
    assert_eq!((page[9].queue_offset, page[9].physical_offset, page[9].size), (5999, END - STORED_LEN, 129));

    // Opening did not change a byte of the log.
    assert_eq!(log.read(LogSpan { offset: 0, len: END as u32 }).unwrap(), &original_segment[..END as usize]);
}

/// Re-encoding message 0 with this crate's codec gives the fixture's bytes. Every field that is
/// not deterministic (timestamps, hosts) is taken from the decoded message; everything else
/// (sizes, magic, CRC, queue and physical offsets, sysFlag, the topic and properties encoding)
/// comes from the encoder.
#[test]
fn re_encoding_a_fixture_message_gives_the_same_bytes() {
    let dir = unpack();
    let segment = std::fs::read(dir.path().join("commitlog/00000000000000000000")).unwrap();
    for i in [0u64, 1, 2, 4999] {
        let stored =
            Bytes::copy_from_slice(&segment[(i * STORED_LEN) as usize..((i + 1) * STORED_LEN) as usize]);
        let m = logship_store::StoredMessage::decode(&stored).unwrap();
        let msg = Message {
            flag: m.flag,
            sys_flag: m.sys_flag,
            born_timestamp: m.born_timestamp,
            born_host: m.born_host,
            reconsume_times: m.reconsume_times,
            prepared_transaction_offset: m.prepared_transaction_offset,
            properties: m.properties.clone(),
            ..Message::new(m.topic.clone(), m.queue_id, m.body.clone())
        };
        let fields = StoreFields {
            queue_offset: i as i64,
            physical_offset: (i * STORED_LEN) as i64,
            store_timestamp: m.store_timestamp,
            store_host: m.store_host,
        };
        assert_eq!(codec::encode(&msg, &fields).unwrap(), stored.to_vec(), "message {i}");
        // The offset message id a RocketMQ client would get: 127.0.0.1:10911 and the offset.
        assert_eq!(m.msg_id(), format!("7F00000100002A9F{:016X}", i * STORED_LEN));
    }
}

#[test]
fn the_fixture_store_takes_new_messages_and_reopens_cleanly() {
    let dir = unpack();
    let env = Env::default();
    let log = env.open(dir.path(), fixture_config()).unwrap();
    let r = log.put(Message::new(TOPIC, 0, &b"interop-message-006000"[..]));
    assert_eq!((r.status, r.offset, r.queue_offset), (PutStatus::PutOk, END, MESSAGES));
    log.shutdown().unwrap();
    drop(log);
    let log = env.open(dir.path(), fixture_config()).unwrap();
    assert_eq!(log.recovery_report().kind, RecoveryKind::Clean);
    assert_eq!(log.queue_bounds(TOPIC, 0), (0, MESSAGES + 1));
    // The checkpoint keeps RocketMQ's fields where a Java broker reads them, and the bytes other
    // writers put elsewhere in the page.
    let page = std::fs::read(dir.path().join("checkpoint")).unwrap();
    assert_eq!(page.len(), 4096);
    assert_eq!(&page[40..48], &(END as i64).to_be_bytes(), "rocketmq-rust's field at byte 40 is preserved");
}
