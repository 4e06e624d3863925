//! The message index (`<root>/index/`): keys and unique ids, file rolls, reopening without
//! duplicates, rebuilding after a truncation, bad files. The Java comparison is in
//! tests/interop_index.rs.

mod common;

use std::sync::atomic::Ordering;

use common::{Env, T0, config};
use logship_store::{CommitLog, IndexConfig, Message, MessageIndex, PutStatus, StoreError, codec::sys_flag};

fn small() -> IndexConfig {
    let mut c = IndexConfig::default();
    c.max_hash_slot_num = 16;
    c.max_index_num = 50;
    c
}

fn roomy() -> IndexConfig {
    let mut c = IndexConfig::default();
    c.max_hash_slot_num = 64;
    c.max_index_num = 1000;
    c
}

fn keyed(i: usize) -> Message {
    Message::new("T", 0, format!("m{i}").into_bytes())
        .with_property("KEYS", format!("k-{i}  even-{}", i % 2))
        .with_property("UNIQ_KEY", format!("U{i}"))
}

fn put(log: &CommitLog, m: Message) -> u64 {
    let r = log.put(m);
    assert_eq!(r.status, PutStatus::PutOk);
    r.offset
}

fn offsets(index: &MessageIndex, key: &str) -> Vec<i64> {
    let mut v = index.query_offsets("T", key, 64, 0, i64::MAX).unwrap().phy_offsets;
    v.sort_unstable();
    v
}

#[test]
fn keys_and_unique_ids_find_their_messages_across_index_files() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let index = MessageIndex::open(&log, small()).unwrap();
    let at: Vec<u64> = (0..40).map(|i| put(&log, keyed(i))).collect();
    index.catch_up(&log).unwrap();
    // 3 keys a message (the double space makes no empty key), 49 entries a file.
    assert_eq!(index.headers().len(), 3);
    assert_eq!(offsets(&index, "U7"), vec![at[7] as i64]);
    assert_eq!(offsets(&index, "k-39"), vec![at[39] as i64]);
    assert_eq!(offsets(&index, "even-1").len(), 20);
    assert!(offsets(&index, "nope").is_empty());
    assert!(index.query_offsets("Other", "U7", 64, 0, i64::MAX).unwrap().phy_offsets.is_empty());
    let r = index.query_message(&log, "T", "U7", 32, 0, i64::MAX).unwrap();
    assert_eq!(r.messages.len(), 1);
    assert_eq!(log.read_message(at[7]).unwrap().body, &b"m7"[..]);
    assert_eq!(r.index_last_update_phyoffset, at[39] as i64);
    let batch = index.query_offsets("T", "even-0", 5, 0, i64::MAX).unwrap();
    assert_eq!(batch.phy_offsets.len(), 5, "at most maxNum");
}

#[test]
fn store_times_bound_a_query() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    let index = MessageIndex::open(&log, roomy()).unwrap();
    for i in 0..6 {
        env.clock.millis.store(T0 + i * 10_000, Ordering::SeqCst);
        put(&log, Message::new("T", 0, &b"x"[..]).with_property("KEYS", "same"));
    }
    index.catch_up(&log).unwrap();
    assert_eq!(index.query_offsets("T", "same", 64, T0 + 15_000, T0 + 35_000).unwrap().phy_offsets.len(), 2);
    assert_eq!(index.query_offsets("T", "same", 64, 0, i64::MAX).unwrap().phy_offsets.len(), 6);
}

#[test]
fn rolled_back_transactions_are_not_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let index = MessageIndex::open(&log, small()).unwrap();
    let mut m = keyed(1);
    m.sys_flag = sys_flag::TRANSACTION_ROLLBACK_TYPE;
    put(&log, m);
    let mut p = keyed(2);
    p.sys_flag = sys_flag::TRANSACTION_PREPARED_TYPE;
    put(&log, p);
    index.catch_up(&log).unwrap();
    assert!(offsets(&index, "U1").is_empty());
    assert_eq!(offsets(&index, "U2").len(), 1, "prepared messages are, as in Java");
}

#[test]
fn reopening_resumes_after_the_last_indexed_message_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    {
        let log = env.open(dir.path(), config()).unwrap();
        let index = MessageIndex::open(&log, small()).unwrap();
        for i in 0..10 {
            put(&log, keyed(i));
        }
        index.catch_up(&log).unwrap();
        for i in 10..14 {
            put(&log, keyed(i));
        }
        log.shutdown().unwrap();
    }
    let log = env.open(dir.path(), config()).unwrap();
    let index = MessageIndex::open(&log, small()).unwrap();
    index.catch_up(&log).unwrap();
    assert_eq!(offsets(&index, "even-0").len(), 7);
    assert_eq!(offsets(&index, "U9").len(), 1);
    assert_eq!(offsets(&index, "U13").len(), 1);
    assert_eq!(index.indexed_to(), log.max_offset());
}

#[test]
fn a_truncated_log_drops_and_rebuilds_the_index_past_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let index = MessageIndex::open(&log, small()).unwrap();
    let at: Vec<u64> = (0..30).map(|i| put(&log, keyed(i))).collect();
    index.catch_up(&log).unwrap();
    log.truncate_to(at[20]).unwrap();
    index.truncate(&log).unwrap();
    index.catch_up(&log).unwrap();
    assert_eq!(offsets(&index, "U19"), vec![at[19] as i64]);
    assert!(offsets(&index, "U25").is_empty(), "gone with the cut");
    assert_eq!(offsets(&index, "even-0").len(), 10);
    // New messages after the cut are indexed once.
    let new = put(&log, Message::new("T", 0, &b"n"[..]).with_property("UNIQ_KEY", "NEW"));
    index.catch_up(&log).unwrap();
    assert_eq!(offsets(&index, "NEW"), vec![new as i64]);
}

#[test]
fn index_files_of_other_settings_are_refused_with_the_way_out() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let index = MessageIndex::open(&log, small()).unwrap();
    put(&log, keyed(0));
    index.catch_up(&log).unwrap();
    drop(index);
    let mut other = small();
    other.max_index_num = 51;
    let e = MessageIndex::open(&log, other).unwrap_err();
    assert!(matches!(e, StoreError::IndexFileSize { .. }), "{e}");
    assert!(e.to_string().contains("remove the index directory"), "{e}");
}

#[test]
fn expired_index_files_go_except_the_last() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let index = MessageIndex::open(&log, small()).unwrap();
    for i in 0..40 {
        put(&log, keyed(i));
    }
    index.catch_up(&log).unwrap();
    assert_eq!(index.headers().len(), 3);
    assert_eq!(index.delete_expired(u64::MAX).unwrap(), 2);
    assert_eq!(index.headers().len(), 1);
    assert_eq!(offsets(&index, "U39").len(), 1);
}
