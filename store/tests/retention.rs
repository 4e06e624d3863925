//! Retention: age and disk-usage thresholds, with an injected clock and disk-usage source.

mod common;

use std::sync::atomic::Ordering;

use common::{Env, SEGMENT, T0, config, message, segment_path};
use logship_store::{LogSpan, PutStatus, StoreError};

const HOUR: i64 = 3_600_000;

/// A store with four full segments and a fifth, active one.
fn five_segments(env: &Env, dir: &std::path::Path) -> logship_store::CommitLog {
    five_segments_with(env, dir, config())
}

/// [`five_segments`] with forced deletion (`cleanFileForciblyEnable`) enabled.
fn five_segments_forcible(env: &Env, dir: &std::path::Path) -> logship_store::CommitLog {
    let mut cfg = config();
    cfg.clean_file_forcibly_enable = true;
    five_segments_with(env, dir, cfg)
}

fn five_segments_with(
    env: &Env,
    dir: &std::path::Path,
    cfg: logship_store::StoreConfig,
) -> logship_store::CommitLog {
    let log = env.open(dir, cfg).unwrap();
    let mut i = 0;
    while log.bounds().max < 4 * SEGMENT + 100 {
        assert_eq!(log.put(message(i)).status, PutStatus::PutOk);
        i += 1;
    }
    log
}

fn set_now(env: &Env, millis: i64, hour: u32) {
    env.clock.millis.store(millis, Ordering::SeqCst);
    env.clock.hour.store(hour, Ordering::SeqCst);
}

#[test]
fn below_75_percent_expired_segments_go_only_at_the_delete_hour() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = five_segments(&env, dir.path());
    env.disk.set(0.50);
    let real_now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    set_now(&env, real_now + 73 * HOUR, 12); // expired, but not 04:00
    assert!(log.run_retention().unwrap().deleted_segments.is_empty());
    set_now(&env, real_now + 71 * HOUR, 4); // 04:00, but not expired (72 h)
    assert!(log.run_retention().unwrap().deleted_segments.is_empty());
    set_now(&env, real_now + 73 * HOUR, 4);
    let report = log.run_retention().unwrap();
    assert_eq!(report.deleted_segments.len(), 4, "all but the active segment");
    assert_eq!(report.min_offset, 4 * SEGMENT);
    assert_eq!(log.bounds().min, 4 * SEGMENT);
    assert!(segment_path(dir.path(), 4 * SEGMENT).exists());
}

#[test]
fn above_75_percent_expired_segments_go_at_any_hour() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = five_segments(&env, dir.path());
    let real_now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    env.disk.set(0.80);
    set_now(&env, real_now, 12);
    assert!(log.run_retention().unwrap().deleted_segments.is_empty(), "nothing has expired");
    set_now(&env, real_now + 73 * HOUR, 12);
    assert_eq!(log.run_retention().unwrap().deleted_segments.len(), 4);
}

#[test]
fn with_forced_deletion_above_85_percent_the_oldest_segments_go_even_unexpired_but_never_the_active_one() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = five_segments_forcible(&env, dir.path());
    env.disk.set(0.86);
    set_now(&env, T0, 12);
    let report = log.run_retention().unwrap();
    assert_eq!(
        report.deleted_segments,
        (0..4).map(|i| segment_path(dir.path(), i * SEGMENT)).collect::<Vec<_>>()
    );
    assert!(!report.disk_full);
    assert_eq!(log.run_retention().unwrap().deleted_segments.len(), 0, "the active segment stays");
    assert_eq!(log.status().segments, 1);
    // Reads below the new minimum are refused; queues forget the deleted messages.
    assert!(
        matches!(log.read(LogSpan { offset: 0, len: 1 }), Err(StoreError::OutOfRange { min, .. }) if min == 4 * SEGMENT)
    );
    for (topic, queue) in [("T0", 0), ("T1", 1), ("T2", 0)] {
        let (qmin, qmax) = log.queue_bounds(topic, queue);
        assert!(qmin > 0, "{topic}:{queue} forgot the deleted messages");
        let left = log.read_queue(topic, queue, qmin, 1000).unwrap();
        assert!(left.iter().all(|e| e.physical_offset >= 4 * SEGMENT));
        assert_eq!(left.len() as u64, qmax - qmin);
        assert!(log.read_queue(topic, queue, 0, 1).is_err());
    }
}

#[test]
fn the_batch_limit_bounds_deletions_per_round() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let mut cfg = config();
    cfg.delete_files_batch_max = 3;
    cfg.clean_file_forcibly_enable = true;
    let log = env.open(dir.path(), cfg).unwrap();
    let mut i = 0;
    while log.bounds().max < 4 * SEGMENT + 100 {
        assert_eq!(log.put(message(i)).status, logship_store::PutStatus::PutOk);
        i += 1;
    }
    env.disk.set(0.86);
    assert_eq!(log.run_retention().unwrap().deleted_segments.len(), 3);
    assert_eq!(log.run_retention().unwrap().deleted_segments.len(), 1);
}

#[test]
fn above_90_percent_puts_are_refused_until_the_disk_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.put(message(0)).status, PutStatus::PutOk);
    env.disk.set(0.95);
    let report = log.run_retention().unwrap();
    assert!(report.disk_full && log.status().disk_full);
    assert_eq!(log.put(message(1)).status, PutStatus::ServiceNotAvailable);
    env.disk.set(0.50);
    log.run_retention().unwrap();
    assert_eq!(log.put(message(2)).status, PutStatus::PutOk);
}

#[test]
fn a_span_outlives_the_deletion_of_its_segment() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = five_segments_forcible(&env, dir.path());
    let span = log.read(LogSpan { offset: 0, len: 200 }).unwrap();
    let copy = span.to_vec();
    env.disk.set(0.86);
    log.run_retention().unwrap();
    assert!(!segment_path(dir.path(), 0).exists());
    assert_eq!(span.to_vec(), copy, "the mapping stays alive while the span does");
    drop(span);
}

#[test]
fn a_full_disk_is_seen_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    env.disk.set(0.99);
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.put(message(0)).status, PutStatus::ServiceNotAvailable);
}

#[test]
fn by_default_a_full_disk_deletes_nothing_unexpired_and_refuses_puts() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = five_segments(&env, dir.path());
    env.disk.set(0.95);
    set_now(&env, T0, 12);
    let report = log.run_retention().unwrap();
    assert!(report.deleted_segments.is_empty(), "{report:?}");
    assert!(report.disk_full);
    assert_eq!(log.bounds().min, 0, "every acknowledged message is still there");
    assert_eq!(log.put(message(0)).status, PutStatus::ServiceNotAvailable);
    let refusal = log.write_refusal().unwrap();
    assert!(matches!(refusal, StoreError::DiskUsageAboveLimit { .. }), "{refusal}");
    assert!(log.status().write_refused.unwrap().contains("95.0"));
    assert_eq!(log.status().forced_deleted_segments, 0);
}

#[test]
fn forced_deletion_never_passes_the_retention_floor_and_is_counted() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = five_segments_forcible(&env, dir.path());
    // The slowest in-sync replica has acknowledged up to inside the third segment.
    log.set_retention_floor(2 * SEGMENT + 10);
    env.disk.set(0.86);
    set_now(&env, T0, 12);
    let report = log.run_retention().unwrap();
    assert_eq!(report.forced, [(0, SEGMENT), (SEGMENT, 2 * SEGMENT)]);
    assert_eq!(log.bounds().min, 2 * SEGMENT);
    assert!(log.run_retention().unwrap().deleted_segments.is_empty(), "the floor holds");
    let status = log.status();
    assert_eq!((status.forced_deleted_segments, status.forced_deleted_bytes), (2, 2 * SEGMENT));
    assert_eq!(status.retention_floor, Some(2 * SEGMENT + 10));
    log.set_retention_floor(4 * SEGMENT);
    assert_eq!(log.run_retention().unwrap().forced, [(2 * SEGMENT, 3 * SEGMENT), (3 * SEGMENT, 4 * SEGMENT)]);
    assert_eq!(log.status().forced_deleted_segments, 4);
}
