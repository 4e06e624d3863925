//! Flushing: SYNC_FLUSH group commit, durability futures, FlushDiskTimeout, ASYNC_FLUSH intervals.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::{Env, block_on, config, eventually, message};
use logship_store::{FlushDiskType, MessageLog, PutStatus, StoreError};

fn sync_config() -> logship_store::StoreConfig {
    let mut c = config();
    c.flush_disk_type = FlushDiskType::SyncFlush;
    c
}

#[test]
fn concurrent_durability_waits_share_one_flush() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), sync_config()).unwrap();
    let ends: Vec<_> = (0..20).map(|i| log.put(message(i)).end()).collect();
    assert_eq!(log.flushed_offset(), 0);
    let before = log.status().flush_count;
    // Twenty waiters for twenty different offsets, all written before any flush.
    let waits: Vec<_> = ends.iter().map(|&e| MessageLog::durable(&log, e)).collect();
    let done: Vec<_> = waits.into_iter().map(block_on).collect();
    for (d, e) in done.iter().zip(&ends) {
        assert!(*d.as_ref().unwrap() >= *e);
    }
    assert_eq!(log.status().flush_count - before, 1, "one msync served every waiter");
    assert_eq!(log.flushed_offset(), *ends.last().unwrap());
}

#[test]
fn sync_flush_puts_from_many_threads_all_return_put_ok_after_their_flush() {
    let dir = tempfile::tempdir().unwrap();
    let log = Arc::new(Env::default().open(dir.path(), sync_config()).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for i in 0..25 {
                    let r = log.put_and_flush(message(t * 100 + i));
                    assert_eq!(r.status, PutStatus::PutOk);
                    assert!(log.flushed_offset() >= r.end(), "PutOk only once the message is durable");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let status = log.status();
    assert!(status.flush_count >= 1 && status.flush_count <= 200, "{status:?}");
}

#[test]
fn a_late_flush_gives_flush_disk_timeout_but_the_message_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = sync_config();
    cfg.sync_flush_timeout = Duration::from_millis(20);
    let log = Env::default().open(dir.path(), cfg).unwrap();
    let hold = log.hold_flushes();
    let r = log.put_and_flush(message(0));
    assert_eq!(r.status, PutStatus::FlushDiskTimeout);
    assert!(r.status.is_stored());
    assert_eq!(log.read_message(r.offset).unwrap().queue_offset, 0);
    assert!(!log.wait_durable(r.end(), Duration::ZERO).unwrap());
    drop(hold);
    assert!(log.wait_durable(r.end(), Duration::from_secs(30)).unwrap());
}

#[test]
fn async_flush_writes_back_on_its_interval_without_being_asked() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config();
    cfg.flush_interval_commit_log = Duration::from_millis(5);
    cfg.flush_commit_log_least_pages = 0;
    let log = Env::default().open(dir.path(), cfg).unwrap();
    let r = log.put(message(0));
    assert_eq!(r.status, PutStatus::PutOk, "an async put returns at once");
    eventually("the interval flush", || log.flushed_offset() >= r.end());
}

#[test]
fn waits_after_shutdown_fail_with_closed() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let r = log.put(message(0));
    log.shutdown().unwrap();
    assert!(log.flushed_offset() >= r.end(), "shutdown flushes");
    assert!(matches!(block_on(MessageLog::durable(&log, r.end() + 1)), Err(StoreError::Closed)));
    assert_eq!(log.put(message(1)).status, PutStatus::ServiceNotAvailable);
    assert!(matches!(log.append_at(r.end(), b"x"), Err(StoreError::Closed)));
}
