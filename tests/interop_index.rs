//! RocketMQ's message index (`<root>/index/`) between logship and Apache RocketMQ's own
//! `DefaultMessageStore` (4.9.8 and 5.5.1), both directions:
//!
//! - Java writes a store with keyed messages (two `KEYS` and a `UNIQ_KEY` each, across several
//!   index files); logship opens Java's index files and answers `QUERY_MESSAGE` by key and by
//!   unique id as Java did, and an index logship builds from Java's log is byte for byte the
//!   files Java wrote;
//! - logship writes and indexes a store; Java opens it and answers from logship's index files as
//!   logship does.
//!
//! See `support/interop.rs` for when these tests skip.

#[path = "support/interop.rs"]
mod interop;
mod process;

use std::path::{Path, PathBuf};
use std::time::Duration;

use interop::*;
use logship_store::{CommitLog, IndexConfig, Message, MessageIndex, PutStatus, StoreConfig};
use serde_json::{Value, json};

const TOPIC: &str = "KeyedTopic";
/// Small index files: 64 slots and 300 entries, so 450 keys need two files and slots collide.
const SLOTS: u32 = 64;
const ENTRIES: u32 = 300;
const MESSAGES: usize = 150;

fn index_config() -> IndexConfig {
    let mut c = IndexConfig::default();
    c.max_hash_slot_num = SLOTS;
    c.max_index_num = ENTRIES;
    c
}

fn config() -> StoreConfig {
    let mut c = StoreConfig::default();
    c.mapped_file_size_commit_log = SEG;
    c.max_message_size = 256 * 1024;
    c.flush_interval_commit_log = Duration::from_secs(3600);
    c.flush_commit_log_thorough_interval = Duration::from_secs(3600);
    c.flush_interval_consume_queue = Duration::from_secs(3600);
    c.clean_resource_interval = Duration::from_secs(3600);
    c
}

fn java_args(ha: &str) -> Vec<String> {
    ["--ha-port", ha, "--index-slots", &SLOTS.to_string(), "--index-num", &ENTRIES.to_string()]
        .iter()
        .map(|s| s.to_string())
        .collect()
}

/// The keys asked for: unique ids, single keys, keys shared by 30 messages, unknown keys, and
/// another topic.
fn queries() -> Vec<(String, String, u32)> {
    let mut q = Vec::new();
    for i in [0, 1, 77, 149] {
        q.push((TOPIC.to_string(), format!("U-{i}"), 32));
        q.push((TOPIC.to_string(), format!("k-{i}"), 32));
    }
    for s in 0..5 {
        q.push((TOPIC.to_string(), format!("shared-{s}"), 64));
        q.push((TOPIC.to_string(), format!("shared-{s}"), 7));
    }
    q.push((TOPIC.to_string(), "nope".to_string(), 32));
    q.push(("OtherTopic".to_string(), "k-1".to_string(), 32));
    q
}

fn java_answers(java: &mut JavaStore) -> Vec<Value> {
    queries()
        .iter()
        .map(|(t, k, max)| {
            let mut v = java.command(&format!("querymsg {t} {k} {max} 0 {}", i64::MAX)).pop().unwrap();
            let o = v.as_object_mut().unwrap();
            o.remove("event");
            o.remove("end");
            v
        })
        .collect()
}

fn logship_answers(log: &CommitLog, index: &MessageIndex) -> Vec<Value> {
    queries()
        .iter()
        .map(|(t, k, max)| {
            let r = index.query_message(log, t, k, *max, 0, i64::MAX).unwrap();
            let offsets: Vec<i64> =
                r.messages.iter().map(|b| i64::from_be_bytes(b[28..36].try_into().unwrap())).collect();
            json!({
                "physicalOffsets": offsets,
                "indexLastUpdateTimestamp": r.index_last_update_timestamp,
                "indexLastUpdatePhyoffset": r.index_last_update_phyoffset,
            })
        })
        .collect()
}

fn index_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

fn java_index_files_read_in_logship(h: &Harness) {
    let d = tempfile::tempdir().unwrap();
    let ha = free_port().to_string();
    let args = java_args(&ha);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut java = JavaStore::start(h, "ASYNC_MASTER", d.path(), SEG, &args);
    java.command(&format!("putkeys {MESSAGES} {TOPIC}"));
    java.wait_dispatch();
    let theirs = java_answers(&mut java);
    assert!(theirs.iter().any(|a| a["physicalOffsets"].as_array().unwrap().len() == 30), "{theirs:?}");
    java.shutdown();
    let java_files = index_files(&d.path().join("index"));
    assert!(java_files.len() >= 2, "450 keys in 300-entry files: {java_files:?}");
    let java_bytes: Vec<Vec<u8>> = java_files.iter().map(|p| std::fs::read(p).unwrap()).collect();

    let log = CommitLog::open(d.path(), config()).unwrap();
    let index = MessageIndex::open(&log, index_config()).unwrap();
    assert_eq!(index.catch_up(&log).unwrap(), log.max_offset());
    assert_eq!(logship_answers(&log, &index), theirs, "logship reading Java's index files");

    // The same log, indexed by logship into a directory of its own: Java's bytes.
    let own = tempfile::tempdir().unwrap();
    let ours = MessageIndex::open_in(own.path().to_path_buf(), &log, index_config()).unwrap();
    ours.catch_up(&log).unwrap();
    ours.flush().unwrap();
    let our_files = index_files(own.path());
    assert_eq!(our_files.len(), java_files.len());
    for (i, (p, theirs)) in our_files.iter().zip(&java_bytes).enumerate() {
        let mine = std::fs::read(p).unwrap();
        assert_eq!(mine.len(), theirs.len());
        if &mine != theirs {
            let at = mine.iter().zip(theirs).position(|(a, b)| a != b).unwrap();
            panic!(
                "index file {i} differs from Java's at byte {at} (header is 40, slots {})",
                40 + SLOTS * 4
            );
        }
    }
    assert_eq!(logship_answers(&log, &ours), theirs);
    log.shutdown().unwrap();
}

fn logship_index_files_read_in_java(h: &Harness) {
    let d = tempfile::tempdir().unwrap();
    let log = CommitLog::open(d.path(), config()).unwrap();
    let index = MessageIndex::open(&log, index_config()).unwrap();
    for i in 0..MESSAGES {
        let m = Message::new(TOPIC, (i % 4) as i32, format!("keyed-{i}").into_bytes())
            .with_property("KEYS", format!("k-{i} shared-{}", i % 5))
            .with_property("UNIQ_KEY", format!("U-{i}"));
        assert_eq!(log.put(m).status, PutStatus::PutOk);
        if i % 40 == 0 {
            index.catch_up(&log).unwrap();
        }
    }
    index.catch_up(&log).unwrap();
    index.flush().unwrap();
    let ours = logship_answers(&log, &index);
    assert!(ours.iter().any(|a| a["physicalOffsets"].as_array().unwrap().len() == 30), "{ours:?}");
    log.shutdown().unwrap();
    drop(index);
    drop(log);

    let ha = free_port().to_string();
    let args = java_args(&ha);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut java = JavaStore::start(h, "ASYNC_MASTER", d.path(), SEG, &args);
    java.wait_dispatch();
    assert_eq!(java_answers(&mut java), ours, "Java reading logship's index files");
    java.shutdown();
}

fn run(rmq: Rocketmq, name: &str, scenario: fn(&Harness)) {
    if let Some(h) = harness(rmq, name) {
        scenario(&h);
    }
}

#[test]
fn java_index_files_read_in_logship_4_9_8() {
    run(ROCKETMQ_4, "java_index_files_read_in_logship_4_9_8", java_index_files_read_in_logship);
}

#[test]
fn java_index_files_read_in_logship_5_5_1() {
    run(ROCKETMQ_5, "java_index_files_read_in_logship_5_5_1", java_index_files_read_in_logship);
}

#[test]
fn logship_index_files_read_in_java_4_9_8() {
    run(ROCKETMQ_4, "logship_index_files_read_in_java_4_9_8", logship_index_files_read_in_java);
}

#[test]
fn logship_index_files_read_in_java_5_5_1() {
    run(ROCKETMQ_5, "logship_index_files_read_in_java_5_5_1", logship_index_files_read_in_java);
}
