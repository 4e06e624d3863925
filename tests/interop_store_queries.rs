//! The store queries of `logship_store` (`get_message`, `search_offset_by_timestamp`,
//! `earliest_message_store_time`, `message_store_timestamp`, `select_one_message_by_offset`)
//! against Apache RocketMQ's own `DefaultMessageStore` on the same files: logship writes a store
//! (tags, bodies of many sizes, runs of equal store times, several consume-queue files and
//! segments), answers a grid of queries, and then Java opens the store and answers the same
//! grid. Every answer must match: status, `nextBeginOffset`, bounds, the messages found, the
//! suggest-pulling-from-slave hint, offsets found by time. Once with everything in memory
//! (`accessMessageInMemoryMaxRatio` 40) and once with nothing (0), so both transfer caps are
//! exercised. See `support/interop.rs` for when these tests skip.

#[path = "support/interop.rs"]
mod interop;
mod process;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use interop::*;
use logship_store::{
    Clock, CommitLog, GetMessageOptions, Message, PutStatus, QueryLine, StoreConfig, StoreEnv, TagFilter,
    TimeBoundary, memory_limit, total_physical_memory,
};
use serde_json::{Value, json};

const TOPIC: &str = "QueryTopic";
/// 64-entry consume-queue files, so pulls and searches cross file boundaries.
const CQ_FILE: u64 = 64 * 20;
const MESSAGES: usize = 420;
/// Store times start here (2100-01-01): later than any file's modification time, so 4.9's
/// search, which picks a consume-queue file by modification time, takes the last file on both
/// sides.
const BASE: i64 = 4_102_444_800_000;

#[derive(Debug)]
struct StepClock(AtomicI64);

impl Clock for StepClock {
    fn now_millis(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}

fn config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.mapped_file_size_commit_log = SEG;
    c.mapped_file_size_consume_queue = CQ_FILE;
    c.max_message_size = 256 * 1024;
    c.flush_interval_commit_log = Duration::from_secs(3600);
    c.flush_commit_log_thorough_interval = Duration::from_secs(3600);
    c.flush_interval_consume_queue = Duration::from_secs(3600);
    c.clean_resource_interval = Duration::from_secs(3600);
    c
}

/// Message `i`: queue `i % 2`, tag `Tag<i % 3>` (none every 13th), a body of 100 B to 12 KB,
/// stored at `BASE + (i / 6) * 10` (three messages of each queue share a store time).
fn put_all(log: &CommitLog, clock: &StepClock) -> Vec<(u64, u32)> {
    let mut spans = Vec::new();
    for i in 0..MESSAGES {
        clock.0.store(BASE + (i as i64 / 6) * 10, Ordering::SeqCst);
        let body = vec![b'a' + (i % 26) as u8; 100 + (i * 997) % 12_000];
        let mut m = Message::new(TOPIC, (i % 2) as i32, body);
        if i % 13 != 12 {
            m = m.with_tags(format!("Tag{}", i % 3));
        }
        let r = log.put(m);
        assert_eq!(r.status, PutStatus::PutOk);
        spans.push((r.offset, r.wrote_bytes));
    }
    spans
}

/// The queries, as harness command lines.
fn queries(spans: &[(u64, u32)]) -> Vec<String> {
    let mut q = Vec::new();
    for queue in [0, 1, 7] {
        for offset in [-1i64, 0, 1, 30, 63, 64, 65, 127, 128, 150, 208, 209, 210, 211, 215] {
            for max in [1, 4, 32] {
                for expr in ["*", "Tag1", "Tag0||Tag2", "Nope"] {
                    q.push(format!("getmsg {TOPIC} {queue} {offset} {max} {expr}"));
                }
            }
        }
    }
    q.push("getmsg NoSuchTopic 0 5 32 *".into());
    for queue in [0, 1, 7] {
        for t in [
            BASE - 5,
            BASE,
            BASE + 5,
            BASE + 10,
            BASE + 333,
            BASE + 340,
            BASE + 695,
            BASE + 700,
            BASE + 9_999,
        ] {
            for boundary in ["LOWER", "UPPER"] {
                q.push(format!("search {TOPIC} {queue} {t} {boundary}"));
            }
        }
        q.push(format!("earliest {TOPIC} {queue}"));
        for offset in [-1i64, 0, 63, 64, 209, 210, 211] {
            q.push(format!("storetime {TOPIC} {queue} {offset}"));
        }
    }
    for &(offset, _) in spans.iter().step_by(37) {
        q.push(format!("select {offset}"));
        // Inside a record: Java reads whatever size the bytes there say (a differ-on-purpose:
        // logship answers none); see `same_answers_as_java`.
        q.push(format!("select {}", offset + 1));
    }
    let end = spans.last().map_or(0, |&(o, n)| o + u64::from(n));
    q.push(format!("select {end}"));
    q.push(format!("select {}", end + 100));
    q
}

/// logship's answer to one query line, in the harness's JSON shape.
fn answer(log: &CommitLog, line: &str, options: &GetMessageOptions) -> Value {
    let w: Vec<&str> = line.split(' ').collect();
    let int = |i: usize| w[i].parse::<i64>().unwrap();
    match w[0] {
        "getmsg" => {
            let r = log
                .get_message(w[1], int(2) as i32, int(3), int(4) as u32, &TagFilter::parse(w[5]), options)
                .unwrap();
            assert!(r.damaged.is_empty(), "{line}: {:?}", r.damaged);
            json!({
                "status": r.status.as_str(),
                "nextBeginOffset": r.next_begin_offset,
                "minOffset": r.min_offset,
                "maxOffset": r.max_offset,
                "bufferTotalSize": r.buffer_total_size,
                "suggestPullingFromSlave": r.suggest_pulling_from_slave,
                "queueOffsets": r.messages.iter().map(|m| m.queue_offset).collect::<Vec<_>>(),
                "physicalOffsets": r.messages.iter().map(|m| m.physical_offset).collect::<Vec<_>>(),
            })
        }
        "search" => {
            let boundary = match (options.line, w[4]) {
                (QueryLine::V4_9, _) => TimeBoundary::Nearest,
                (_, "UPPER") => TimeBoundary::Upper,
                _ => TimeBoundary::Lower,
            };
            json!({"offset": log.search_offset_by_timestamp(w[1], int(2) as i32, int(3), boundary).unwrap()})
        }
        "earliest" => json!({"time": log.earliest_message_store_time(w[1], int(2) as i32)}),
        "storetime" => json!({"time": log.message_store_timestamp(w[1], int(2) as i32, int(3))}),
        "select" => {
            let size = log.select_one_message_by_offset(int(1)).unwrap().map_or(-1, |b| b.len() as i64);
            json!({"size": size})
        }
        other => panic!("unknown query {other}"),
    }
}

/// The Java answer without the harness's own members.
fn strip(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("event");
        o.remove("end");
    }
    v
}

fn same_answers_as_java(h: &Harness, name: &str) {
    let line = if h.rocketmq.version.starts_with('4') { QueryLine::V4_9 } else { QueryLine::V5 };
    for ratio in [40u32, 0] {
        let d = tempfile::tempdir().unwrap();
        let clock = Arc::new(StepClock(AtomicI64::new(BASE)));
        let env = StoreEnv { clock: clock.clone(), ..StoreEnv::default() };
        let log = CommitLog::open_with(d.path(), config(), env).unwrap();
        let spans = put_all(&log, &clock);
        let mut options = GetMessageOptions::default();
        options.line = line;
        options.memory_limit = memory_limit(total_physical_memory().unwrap_or(8 << 30), ratio);
        let lines = queries(&spans);
        let ours: Vec<Value> = lines.iter().map(|l| answer(&log, l, &options)).collect();
        log.shutdown().unwrap();
        drop(log);

        let ha = free_port().to_string();
        let (cq, r) = (CQ_FILE.to_string(), ratio.to_string());
        let args = ["--ha-port", ha.as_str(), "--cq-file-size", cq.as_str(), "--access-ratio", r.as_str()];
        let mut java = JavaStore::start(h, "ASYNC_MASTER", d.path(), SEG, &args);
        java.wait_dispatch();
        let record_starts: std::collections::HashSet<u64> = spans.iter().map(|&(o, _)| o).collect();
        let mut mismatches = Vec::new();
        for (l, ours) in lines.iter().zip(&ours) {
            let theirs = strip(java.command(l).pop().expect("an answer"));
            let inside_a_record = l
                .strip_prefix("select ")
                .and_then(|o| o.parse::<u64>().ok())
                .is_some_and(|o| o < spans.last().unwrap().0 && !record_starts.contains(&o));
            if inside_a_record {
                // Java reads the bytes there as a size and returns that many bytes of garbage
                // (or none, when the size does not fit); logship checks that a message starts
                // there and answers none.
                assert_eq!(ours, &json!({"size": -1}), "{l} (Java: {theirs})");
                continue;
            }
            if &theirs != ours {
                mismatches.push(format!("{l}\n  java:    {theirs}\n  logship: {ours}"));
            }
        }
        java.shutdown();
        assert!(
            mismatches.is_empty(),
            "{name} (accessMessageInMemoryMaxRatio {ratio}): {} of {} answers differ from RocketMQ {}:\n{}",
            mismatches.len(),
            lines.len(),
            h.rocketmq.version,
            mismatches.iter().take(20).cloned().collect::<Vec<_>>().join("\n")
        );
        assert!(ours.iter().any(|a| a["status"] == "FOUND"));
        assert!(ours.iter().any(|a| a["status"] == "NO_MATCHED_MESSAGE"));
        assert!(ours.iter().any(|a| a["status"] == "OFFSET_OVERFLOW_BADLY"));
    }
}

fn run(rmq: Rocketmq, name: &str) {
    if let Some(h) = harness(rmq, name) {
        same_answers_as_java(&h, name);
    }
}

#[test]
fn store_queries_answer_as_rocketmq_4_9_8() {
    run(ROCKETMQ_4, "store_queries_answer_as_rocketmq_4_9_8");
}

#[test]
fn store_queries_answer_as_rocketmq_5_5_1() {
    run(ROCKETMQ_5, "store_queries_answer_as_rocketmq_5_5_1");
}
