//! What the remoting send path asks of the store: batches stored as one append on consecutive
//! queue offsets, properties strings stored exactly as given, and the schedule topic's tags
//! codes as delivery times, on the put path and on a slave's replicated bytes alike.

mod common;

use bytes::Bytes;
use common::{Env, T0, config};
use logship_core::LogSpan;
use logship_store::codec::{BatchEntry, SCHEDULE_TOPIC};
use logship_store::{Message, PutStatus, StoredMessage};

fn entry(i: usize) -> BatchEntry {
    BatchEntry {
        flag: i as i32,
        body: Bytes::from(format!("body-{i}")),
        properties_string: format!("TAGS\u{1}T{i}\u{2}KEYS\u{1}k{i}"),
    }
}

fn batch(n: usize) -> Message {
    Message { batch: (0..n).map(entry).collect(), sys_flag: 0, ..Message::new("TopicB", 1, Bytes::new()) }
}

#[test]
fn a_batch_is_one_append_of_consecutive_queue_offsets_with_every_message_id() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.put(Message::new("TopicB", 1, &b"first"[..])).queue_offset, 0);
    let r = log.put(batch(3));
    assert_eq!(r.status, PutStatus::PutOk);
    assert_eq!(r.queue_offset, 1);
    let ids: Vec<&str> = r.msg_id.split(',').collect();
    assert_eq!(ids.len(), 3);
    let entries = log.read_queue("TopicB", 1, 1, 10).unwrap();
    assert_eq!(entries.iter().map(|e| e.queue_offset).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(entries[0].physical_offset, r.offset);
    assert_eq!(entries.iter().map(|e| u64::from(e.size)).sum::<u64>(), u64::from(r.wrote_bytes));
    for (i, e) in entries.iter().enumerate() {
        let m = log.read_message(e.physical_offset).unwrap();
        assert_eq!(
            (m.flag, m.queue_offset, &m.body[..]),
            (i as i32, 1 + i as i64, format!("body-{i}").as_bytes())
        );
        assert_eq!(m.msg_id(), ids[i]);
        assert_eq!(e.tags_code, logship_store::codec::tags_code(&format!("T{i}")));
        assert_eq!(m.born_timestamp, 0);
    }
    // Reopened, the consume queue rebuilt from the log holds the same entries.
    drop(log);
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.read_queue("TopicB", 1, 1, 10).unwrap(), entries);
}

#[test]
fn a_batch_never_spans_two_segments() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    let segment = config().mapped_file_size_commit_log;
    while log.max_offset() < segment - 600 {
        assert_eq!(log.put(Message::new("T", 0, vec![0u8; 200])).status, PutStatus::PutOk);
    }
    let r = log.put(batch(10));
    assert_eq!(r.status, PutStatus::PutOk);
    assert!(r.offset >= segment, "rolled to the next segment, at {}", r.offset);
    let too_big = Message {
        batch: (0..200).map(|i| BatchEntry { body: Bytes::from(vec![1u8; 100]), ..entry(i) }).collect(),
        ..Message::new("T", 0, Bytes::new())
    };
    assert_eq!(log.put(too_big).status, PutStatus::MessageIllegal, "over one segment");
}

#[test]
fn a_properties_string_is_stored_as_given() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    // 4.9's layout: no separator after the last property, the broker's order.
    let raw = "UNIQ_KEY\u{1}U1\u{2}TAGS\u{1}TagA\u{2}CLUSTER\u{1}c";
    let m = Message {
        properties_string: Some(raw.into()),
        ..Message::new("T", 0, &b"x"[..]).with_tags("ignored")
    };
    let r = log.put(m);
    let record = log.read(LogSpan { offset: r.offset, len: r.wrote_bytes }).unwrap();
    assert!(record.ends_with(raw.as_bytes()));
    let stored = StoredMessage::decode(&record).unwrap();
    assert_eq!(stored.tags(), Some("TagA"));
    assert_eq!(log.read_queue("T", 0, 0, 1).unwrap()[0].tags_code, logship_store::codec::tags_code("TagA"));
    let long = Message {
        properties_string: Some("a\u{1}".to_string() + &"b".repeat(40_000)),
        ..Message::new("T", 0, &b"x"[..])
    };
    let mut c = config();
    c.mapped_file_size_commit_log = 1 << 20;
    c.max_message_size = 100_000;
    drop(log);
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), c).unwrap();
    assert_eq!(log.put(long).status, PutStatus::PropertiesSizeExceeded);
}

#[test]
fn the_schedule_topic_s_tags_codes_are_delivery_times_on_masters_and_slaves() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let master = env.open(mdir.path(), config()).unwrap();
    let delayed = |level: &str| {
        Message::new(SCHEDULE_TOPIC, 2, &b"later"[..]).with_property("DELAY", level).with_tags("TagD")
    };
    let plain = master.put(delayed("3"));
    assert_eq!(master.put(delayed("99")).status, PutStatus::PutOk);
    assert_eq!(master.put(delayed("0")).status, PutStatus::PutOk);
    let entries = master.read_queue(SCHEDULE_TOPIC, 2, 0, 10).unwrap();
    let stored = master.read_message(plain.offset).unwrap().store_timestamp;
    assert_eq!(stored, T0);
    assert_eq!(entries[0].tags_code, T0 + 10_000, "level 3 is 10 s");
    assert_eq!(entries[1].tags_code, T0 + 7_200_000, "a level past the last is the last (2 h)");
    assert_eq!(entries[2].tags_code, logship_store::codec::tags_code("TagD"), "level 0 is not delayed");
    // A slave indexes the replicated bytes the same way.
    let slave = env.open(sdir.path(), config()).unwrap();
    let bytes = master.read(LogSpan { offset: 0, len: master.max_offset() as u32 }).unwrap();
    slave.append_at(0, &bytes).unwrap();
    slave.dispatch_pending().unwrap();
    assert_eq!(slave.read_queue(SCHEDULE_TOPIC, 2, 0, 10).unwrap(), entries);
}
