//! The RocketMQ-semantics queries (`get_message`, `search_offset_by_timestamp`, lookups by
//! offset): the cases the Java comparison (tests/interop_store_queries.rs) does not reach, and
//! each rule on its own.

mod common;

use std::sync::atomic::Ordering;

use common::{Env, SEGMENT, T0, config, patch, segment_path};
use logship_store::{
    CommitLog, GetMessageOptions, GetMessageStatus, LogSpan, Message, PutStatus, QueryLine, TagFilter,
    TimeBoundary,
};

/// Everything counts as in memory (a limit far above the log), unless a test says otherwise.
fn options(line: QueryLine) -> GetMessageOptions {
    let mut o = GetMessageOptions::default();
    o.line = line;
    o.memory_limit = 1 << 40;
    o
}

/// `n` messages to `T` queue 0, `body` bytes each, tagged `tag<i % 3>`.
fn fill(log: &CommitLog, n: usize, body: usize) {
    for i in 0..n {
        let m = Message::new("T", 0, vec![b'x'; body]).with_tags(format!("tag{}", i % 3));
        assert_eq!(log.put(m).status, PutStatus::PutOk);
    }
}

fn open(env: &Env, dir: &std::path::Path) -> CommitLog {
    env.open(dir, config()).unwrap()
}

#[test]
fn an_unknown_queue_is_empty_as_java_creates_it() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&Env::default(), dir.path());
    for line in [QueryLine::V4_9, QueryLine::V5] {
        let r = log.get_message("Nope", 0, 5, 32, &TagFilter::All, &options(line)).unwrap();
        assert_eq!(
            (r.status, r.next_begin_offset, r.min_offset, r.max_offset),
            (GetMessageStatus::NoMessageInQueue, 0, 0, 0)
        );
        let mut slave = options(line);
        slave.correct_next_offset = false;
        let r = log.get_message("Nope", 0, 5, 32, &TagFilter::All, &slave).unwrap();
        assert_eq!(r.next_begin_offset, 5, "a slave without offsetCheckInSlave keeps the offset");
    }
}

#[test]
fn offsets_past_the_end_get_javas_status_and_next_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&Env::default(), dir.path());
    fill(&log, 10, 50);
    let o = options(QueryLine::V5);
    let r = log.get_message("T", 0, 10, 32, &TagFilter::All, &o).unwrap();
    assert_eq!((r.status, r.next_begin_offset), (GetMessageStatus::OffsetOverflowOne, 10));
    let r = log.get_message("T", 0, 15, 32, &TagFilter::All, &o).unwrap();
    assert_eq!((r.status, r.next_begin_offset), (GetMessageStatus::OffsetOverflowBadly, 10));
    let r = log.get_message("T", 0, -3, 32, &TagFilter::All, &o).unwrap();
    assert_eq!((r.status, r.next_begin_offset), (GetMessageStatus::OffsetTooSmall, 0));
    let mut slave = o.clone();
    slave.correct_next_offset = false;
    let r = log.get_message("T", 0, 15, 32, &TagFilter::All, &slave).unwrap();
    assert_eq!((r.status, r.next_begin_offset), (GetMessageStatus::OffsetOverflowBadly, 15));
    let r = log.get_message("T", 0, 3, 32, &TagFilter::All, &o).unwrap();
    assert_eq!(r.status, GetMessageStatus::Found);
    assert_eq!(r.messages.iter().map(|m| m.queue_offset).collect::<Vec<_>>(), (3..10).collect::<Vec<_>>());
    assert_eq!((r.next_begin_offset, r.min_offset, r.max_offset), (10, 0, 10));
    // The bytes are the stored messages, as a pull response carries them.
    for m in &r.messages {
        let stored = log.read_message(m.physical_offset).unwrap();
        assert_eq!(m.bytes.len() as u32, stored.total_size);
        assert_eq!(stored.queue_offset as u64, m.queue_offset);
    }
    assert_eq!(r.buffer_total_size, r.messages.iter().map(|m| m.bytes.len() as u64).sum::<u64>());
}

#[test]
fn after_retention_an_offset_below_the_queue_minimum_is_too_small() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = open(&env, dir.path());
    while log.bounds().max < 3 * SEGMENT + 100 {
        fill(&log, 1, 900);
    }
    env.disk.set(0.5);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    env.clock.millis.store(now + 73 * 3_600_000, Ordering::SeqCst);
    env.clock.hour.store(4, Ordering::SeqCst);
    assert!(!log.run_retention().unwrap().deleted_segments.is_empty());
    let (min, max) = log.queue_bounds("T", 0);
    assert!(min > 0 && min < max);
    let r = log.get_message("T", 0, 0, 32, &TagFilter::All, &options(QueryLine::V5)).unwrap();
    assert_eq!(
        (r.status, r.next_begin_offset, r.min_offset),
        (GetMessageStatus::OffsetTooSmall, min as i64, min as i64)
    );
    let r = log.get_message("T", 0, min as i64, 1, &TagFilter::All, &options(QueryLine::V5)).unwrap();
    assert_eq!((r.status, r.messages[0].queue_offset), (GetMessageStatus::Found, min));
    assert!(log.earliest_message_store_time("T", 0) > 0);
    assert_eq!(log.message_store_timestamp("T", 0, min as i64 - 1), -1);
}

#[test]
fn a_pull_stops_at_the_end_of_its_consume_queue_file() {
    // 64-entry consume-queue files (common::config).
    let dir = tempfile::tempdir().unwrap();
    let log = open(&Env::default(), dir.path());
    fill(&log, 100, 20);
    for line in [QueryLine::V4_9, QueryLine::V5] {
        let r = log.get_message("T", 0, 60, 32, &TagFilter::All, &options(line)).unwrap();
        assert_eq!(r.messages.len(), 4);
        assert_eq!(r.next_begin_offset, 64);
        let r = log.get_message("T", 0, 64, 32, &TagFilter::All, &options(line)).unwrap();
        assert_eq!((r.messages.len(), r.next_begin_offset), (32, 96));
    }
}

#[test]
fn transfer_caps_follow_whether_the_entry_is_in_memory() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&Env::default(), dir.path());
    fill(&log, 60, 100);
    let mut on_disk = options(QueryLine::V5);
    on_disk.memory_limit = 0;
    let r = log.get_message("T", 0, 0, 32, &TagFilter::All, &on_disk).unwrap();
    assert_eq!((r.messages.len(), r.next_begin_offset), (8, 8), "maxTransferCountOnMessageInDisk");
    assert!(r.suggest_pulling_from_slave, "the consumer is behind the in-memory window");
    let r = log.get_message("T", 0, 0, 60, &TagFilter::All, &options(QueryLine::V5)).unwrap();
    assert_eq!(r.messages.len(), 32, "maxTransferCountOnMessageInMemory");
    assert!(!r.suggest_pulling_from_slave);
    let mut bytes = options(QueryLine::V4_9);
    bytes.max_transfer_bytes_on_message_in_memory = 700;
    let size = log.read_queue("T", 0, 0, 1).unwrap()[0].size as u64;
    let r = log.get_message("T", 0, 0, 32, &TagFilter::All, &bytes).unwrap();
    assert_eq!(r.messages.len() as u64, 700 / size);
    bytes.max_transfer_bytes_on_message_in_memory = 1;
    let r = log.get_message("T", 0, 0, 32, &TagFilter::All, &bytes).unwrap();
    assert_eq!(r.messages.len(), 1, "the first message is always taken");
    let r = log.get_message("T", 0, 0, 0, &TagFilter::All, &options(QueryLine::V5)).unwrap();
    assert_eq!(r.messages.len(), 1, "even with maxMsgNums 0, as in Java");
}

#[test]
fn five_x_caps_the_bytes_of_a_call_and_4_9_does_not() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&Env::default(), dir.path());
    fill(&log, 40, 300);
    let mut v5 = options(QueryLine::V5);
    v5.max_total_msg_size = 1000;
    let size = log.read_queue("T", 0, 0, 1).unwrap()[0].size as u64;
    let r = log.get_message("T", 0, 0, 32, &TagFilter::All, &v5).unwrap();
    assert_eq!(r.messages.len() as u64, 1000 / size);
    let mut v4 = options(QueryLine::V4_9);
    v4.max_total_msg_size = 1000;
    assert_eq!(log.get_message("T", 0, 0, 32, &TagFilter::All, &v4).unwrap().messages.len(), 32);
}

#[test]
fn tag_filtering_skips_entries_by_their_tag_hash() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&Env::default(), dir.path());
    fill(&log, 30, 20);
    let o = options(QueryLine::V5);
    let r = log.get_message("T", 0, 0, 4, &TagFilter::parse("tag1"), &o).unwrap();
    assert_eq!(r.messages.iter().map(|m| m.queue_offset).collect::<Vec<_>>(), vec![1, 4, 7, 10]);
    assert_eq!(r.next_begin_offset, 11, "the entries walked, filtered ones included");
    let r = log.get_message("T", 0, 0, 32, &TagFilter::parse(" tag0 || tag2 "), &o).unwrap();
    assert_eq!(r.messages.len(), 20);
    let r = log.get_message("T", 0, 0, 32, &TagFilter::parse("nope"), &o).unwrap();
    assert_eq!((r.status, r.next_begin_offset), (GetMessageStatus::NoMatchedMessage, 30));
    assert_eq!(TagFilter::parse("*"), TagFilter::All);
    assert_eq!(TagFilter::parse(""), TagFilter::All);
    assert_eq!(TagFilter::parse(" || "), TagFilter::Codes(Default::default()), "matches nothing, as in Java");
}

#[test]
fn a_scan_stops_after_16000_bytes_of_entries_and_5x_travels_further_files() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config();
    cfg.mapped_file_size_consume_queue = 1000 * 20;
    cfg.mapped_file_size_commit_log = 1 << 20;
    let log = Env::default().open(dir.path(), cfg).unwrap();
    for i in 0..1500 {
        let tag = if i == 1200 { "rare" } else { "common" };
        assert_eq!(log.put(Message::new("T", 0, &b"x"[..]).with_tags(tag)).status, PutStatus::PutOk);
    }
    let rare = TagFilter::parse("rare");
    let r = log.get_message("T", 0, 0, 32, &rare, &options(QueryLine::V5)).unwrap();
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetMessageStatus::NoMatchedMessage, 800),
        "16000 bytes of entries"
    );
    let r = log.get_message("T", 0, 0, 1000, &rare, &options(QueryLine::V5)).unwrap();
    assert_eq!(r.next_begin_offset, 1000, "max(16000, maxMsgNums * 20), then the file's end");
    let mut travel = options(QueryLine::V5);
    travel.travel_cq_file_num = 2;
    travel.max_filter_message_size = 1 << 20;
    let r = log.get_message("T", 0, 900, 32, &rare, &travel).unwrap();
    assert_eq!((r.status, r.messages[0].queue_offset), (GetMessageStatus::Found, 1200), "the second file");
    let mut v4 = travel.clone();
    v4.line = QueryLine::V4_9;
    let r = log.get_message("T", 0, 900, 32, &rare, &v4).unwrap();
    assert_eq!(
        (r.status, r.next_begin_offset),
        (GetMessageStatus::NoMatchedMessage, 1000),
        "4.9 walks one file"
    );
}

#[test]
fn a_damaged_record_is_skipped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&Env::default(), dir.path());
    fill(&log, 5, 40);
    let e = log.read_queue("T", 0, 2, 1).unwrap()[0];
    // A wrong total size in the record the entry points at.
    patch(&segment_path(dir.path(), 0), e.physical_offset, &7i32.to_be_bytes());
    let r = log.get_message("T", 0, 0, 32, &TagFilter::All, &options(QueryLine::V5)).unwrap();
    assert_eq!(r.messages.iter().map(|m| m.queue_offset).collect::<Vec<_>>(), vec![0, 1, 3, 4]);
    assert_eq!(r.damaged.len(), 1);
    assert_eq!((r.damaged[0].0, r.damaged[0].1), (2, e.physical_offset));
    assert_eq!(r.next_begin_offset, 5);
    assert_eq!(
        log.select_one_message_by_offset(e.physical_offset as i64).unwrap(),
        None,
        "not a whole message"
    );
}

#[test]
fn lookups_by_physical_offset_return_whole_messages_only() {
    let dir = tempfile::tempdir().unwrap();
    let log = open(&Env::default(), dir.path());
    // Fill past the first segment so it ends in a BLANK record.
    while log.bounds().max < SEGMENT + 10 {
        fill(&log, 1, 1000);
    }
    let e = log.read_queue("T", 0, 3, 1).unwrap()[0];
    let bytes = log.select_one_message_by_offset(e.physical_offset as i64).unwrap().unwrap();
    assert_eq!(bytes, log.read(LogSpan { offset: e.physical_offset, len: e.size }).unwrap());
    assert_eq!(log.select_one_message_by_offset(e.physical_offset as i64 + 1).unwrap(), None);
    assert_eq!(log.select_one_message_by_offset(-1).unwrap(), None);
    assert_eq!(log.select_one_message_by_offset(log.max_offset() as i64).unwrap(), None);
    let last = log
        .read_queue("T", 0, 0, 10_000)
        .unwrap()
        .into_iter()
        .rfind(|e| e.physical_offset < SEGMENT)
        .unwrap();
    let blank = last.physical_offset + u64::from(last.size);
    assert!(blank < SEGMENT);
    assert_eq!(log.select_one_message_by_offset(blank as i64).unwrap(), None, "a BLANK record is no message");
    assert_eq!(log.pickup_store_timestamp(e.physical_offset as i64, e.size as i32), T0);
    assert_eq!(
        log.pickup_store_timestamp(e.physical_offset as i64, i32::MAX),
        -1,
        "the size must fit, as in Java"
    );
    assert_eq!(log.pickup_store_timestamp(e.physical_offset as i64, 0), -1);
}

#[test]
fn an_ipv6_born_host_moves_the_store_timestamp_and_is_read_right() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = open(&env, dir.path());
    let mut m = Message::new("T", 0, &b"v6"[..]);
    m.born_host = "[::1]:9".parse().unwrap();
    env.clock.millis.store(T0 + 77, Ordering::SeqCst);
    assert_eq!(log.put(m).status, PutStatus::PutOk);
    assert_eq!(log.message_store_timestamp("T", 0, 0), T0 + 77);
    assert_eq!(log.earliest_message_store_time("T", 0), T0 + 77);
    assert_eq!((log.message_store_timestamp("T", 0, 1), log.message_store_timestamp("T", 9, 0)), (-1, -1));
    assert_eq!(log.earliest_message_store_time("Nope", 0), -1);
}

/// Queue 0 of `T` with store times `times`, one message each.
fn timed(env: &Env, dir: &std::path::Path, times: &[i64]) -> CommitLog {
    let log = open(env, dir);
    for &t in times {
        env.clock.millis.store(t, Ordering::SeqCst);
        assert_eq!(log.put(Message::new("T", 0, &b"t"[..])).status, PutStatus::PutOk);
    }
    log
}

#[test]
fn searches_by_time_round_as_each_line_does() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let t = |d: i64| T0 + d;
    // Offsets:        0      1      2      3      4      5
    let log = timed(&env, dir.path(), &[t(10), t(20), t(20), t(20), t(30), t(50)]);
    let s = |ts, b| log.search_offset_by_timestamp("T", 0, ts, b).unwrap();
    use TimeBoundary::*;
    // Lower: the first message at or after; Upper: the last at or before.
    assert_eq!((s(t(20), Lower), s(t(20), Upper)), (1, 3));
    assert_eq!((s(t(25), Lower), s(t(25), Upper)), (4, 3));
    assert_eq!((s(t(5), Lower), s(t(5), Upper)), (0, 0), "before all: the file's start, and 0");
    assert_eq!((s(t(99), Lower), s(t(99), Upper)), (6, 5), "after all: the end, and the last");
    // 4.9: a matching message (any of the run), or the nearer neighbour.
    assert!((1..=3).contains(&s(t(20), Nearest)));
    assert_eq!((s(t(24), Nearest), s(t(26), Nearest)), (3, 4));
    assert_eq!((s(t(41), Nearest), s(t(5), Nearest), s(t(99), Nearest)), (5, 0, 5));
    assert_eq!(log.search_offset_by_timestamp("Nope", 0, t(20), Lower).unwrap(), 0);
}

#[test]
fn lower_searches_pick_the_consume_queue_file_by_its_last_store_time() {
    // 64-entry files: offsets 0..63 at T0+i, 64..127 at T0+1000+i, then 128..149.
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let times: Vec<i64> = (0..150).map(|i| T0 + i + (i / 64) * 1000).collect();
    let log = timed(&env, dir.path(), &times);
    let s = |ts, b| log.search_offset_by_timestamp("T", 0, ts, b).unwrap();
    assert_eq!(s(T0 + 10, TimeBoundary::Lower), 10);
    assert_eq!(s(T0 + 500, TimeBoundary::Lower), 64, "between files: the first of the next");
    assert_eq!(s(T0 + 500, TimeBoundary::Upper), 63);
    assert_eq!(s(T0 + 1070, TimeBoundary::Lower), 70);
    assert_eq!(s(T0 + 2140, TimeBoundary::Upper), 140);
    assert_eq!(s(T0 + 9999, TimeBoundary::Lower), 150);
}
