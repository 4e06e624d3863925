//! Runtime truncation of a divergent tail (a slave in controller mode), crash-safe at every step
//! (RocketMQ #10666: Java only moves in-memory positions, so recovery can bring the tail back).

mod common;

use std::path::Path;

use common::{Env, SEGMENT, config, message, record_at};
use logship_store::{
    CommitLog, EpochEntry, EpochFile, LogSpan, Message, PutResult, PutStatus, StoreError, TruncateStep,
};

fn put_all(log: &CommitLog, range: std::ops::Range<usize>) -> Vec<PutResult> {
    range
        .map(|i| {
            let r = log.put(message(i));
            assert_eq!(r.status, PutStatus::PutOk);
            r
        })
        .collect()
}

/// A store spanning four segments, with three epochs and a durable checkpoint past the cut.
/// Returns the puts and the cut: the start of a message in the second segment.
fn build(dir: &Path, env: &Env) -> (Vec<PutResult>, u64) {
    let log = env.open(dir, config()).unwrap();
    log.append_epoch(EpochEntry::new(1, 0)).unwrap();
    let mut puts = put_all(&log, 0..100);
    let second = puts.iter().position(|p| p.offset > SEGMENT + 100).unwrap();
    let cut = puts[second + 2].offset;
    log.append_epoch(EpochEntry::new(2, puts[second].offset)).unwrap();
    puts.extend(put_all(&log, 100..150));
    let third = log.max_offset();
    assert!(third > cut);
    log.append_epoch(EpochEntry::new(3, third)).unwrap();
    puts.extend(put_all(&log, 150..300));
    assert!(log.max_offset() > 3 * SEGMENT, "the log spans four segments");
    // The checkpoint records durable offsets beyond the cut: recovery must not call the cut
    // bytes corruption.
    log.checkpoint().unwrap();
    log.shutdown().unwrap();
    (puts, cut)
}

/// Every invariant a reopened store must hold after a truncation to `cut` was interrupted at
/// any step (or completed).
fn check_after_crash(dir: &Path, env: &Env, puts: &[PutResult], cut: u64) {
    let log = env.open(dir, config()).unwrap();
    // The log ends at the cut, never past it (every byte before it was durable).
    assert_eq!(log.max_offset(), cut, "the log ends at the cut");
    // No stale byte of the old tail is on disk.
    for entry in std::fs::read_dir(dir.join("commitlog")).unwrap() {
        let path = entry.unwrap().path();
        let base: u64 = path.file_name().unwrap().to_str().unwrap().parse().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        let from = cut.saturating_sub(base).min(bytes.len() as u64) as usize;
        assert!(
            bytes[from..].iter().all(|&b| b == 0),
            "{} holds bytes of the truncated tail",
            path.display()
        );
    }
    // The consume queues point only at messages before the cut, and every one of them reads.
    let mut kept = std::collections::HashMap::new();
    for p in puts.iter().filter(|p| p.offset < cut) {
        let i = puts.iter().position(|q| q.offset == p.offset).unwrap();
        *kept.entry((format!("T{}", i % 3), (i % 2) as i32)).or_insert(0u64) += 1;
    }
    for t in 0..3 {
        for q in 0..2 {
            let topic = format!("T{t}");
            let (_, max) = log.queue_bounds(&topic, q);
            assert_eq!(max, kept.get(&(topic.clone(), q)).copied().unwrap_or(0), "queue {topic}:{q}");
            for e in log.read_queue(&topic, q, 0, 1000).unwrap() {
                assert!(e.physical_offset + u64::from(e.size) <= cut, "{topic}:{q} points past the cut");
                log.read_message(e.physical_offset).unwrap();
            }
        }
    }
    // No epoch starts at or after the cut, in memory and in the file (and its copy).
    assert!(log.epochs().iter().all(|e| e.start_offset < cut), "{:?}", log.epochs());
    assert_eq!(log.epochs(), vec![EpochEntry::new(1, 0), EpochEntry::new(2, puts_start_of_epoch_2(puts))]);
    let file = EpochFile::in_root(dir);
    assert_eq!(file.read().unwrap(), log.epochs());
    assert!(!dir.join("truncating").exists(), "recovery finished the truncation");
    // Writing continues at the cut, and the queue offsets continue from the kept messages.
    let next = log.put(message(0));
    assert_eq!(next.status, PutStatus::PutOk);
    assert_eq!(next.offset, cut);
    assert_eq!(next.queue_offset, kept[&("T0".to_string(), 0)]);
    assert_eq!(log.read_message(cut).unwrap().body, message(0).body);
    log.shutdown().unwrap();
    drop(log);
    // And once more: a clean reopen keeps it.
    let log = env.open(dir, config()).unwrap();
    assert_eq!(log.max_offset(), next.end());
    log.shutdown().unwrap();
}

fn puts_start_of_epoch_2(puts: &[PutResult]) -> u64 {
    puts[puts.iter().position(|p| p.offset > SEGMENT + 100).unwrap()].offset
}

#[test]
fn a_truncation_killed_after_any_step_never_brings_the_tail_back() {
    for step in TruncateStep::ALL {
        let dir = tempfile::tempdir().unwrap();
        let env = Env::default();
        let (puts, cut) = build(dir.path(), &env);
        let log = env.open(dir.path(), config()).unwrap();
        log.truncate_to_crashing_after(cut, step).unwrap();
        // kill -9: no flush, no checkpoint, the abort marker stays.
        log.abandon();
        check_after_crash(dir.path(), &env, &puts, cut);
    }
}

#[test]
fn a_completed_truncation_survives_a_crash_right_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let (puts, cut) = build(dir.path(), &env);
    let log = env.open(dir.path(), config()).unwrap();
    let old_end = log.max_offset();
    let report = log.truncate_to(cut).unwrap();
    assert_eq!((report.from, report.to), (old_end, cut));
    assert_eq!(report.dropped_epochs, vec![EpochEntry::new(3, report.dropped_epochs[0].start_offset)]);
    assert!(!report.removed_segments.is_empty());
    log.abandon();
    check_after_crash(dir.path(), &env, &puts, cut);
}

#[test]
fn a_running_store_reads_writes_and_replicates_at_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let (puts, cut) = build(dir.path(), &env);
    let log = env.open(dir.path(), config()).unwrap();
    log.truncate_to(cut).unwrap();
    assert_eq!(log.max_offset(), cut);
    assert!(log.flushed_offset() <= cut);
    assert!(matches!(log.read(LogSpan { offset: cut, len: 1 }), Err(StoreError::OutOfRange { .. })));
    assert!(log.read_message(puts.last().unwrap().offset).is_err());
    for t in 0..3 {
        for q in 0..2 {
            for e in log.read_queue(&format!("T{t}"), q, 0, 1000).unwrap() {
                assert!(e.physical_offset < cut);
            }
        }
    }
    // A slave appends the new master's bytes at the cut.
    let bytes = record_at(cut, 7);
    assert_eq!(log.append_at(cut, &bytes).unwrap(), cut + bytes.len() as u64);
    assert_eq!(log.dispatch_pending().unwrap(), cut + bytes.len() as u64);
    assert_eq!(log.read_message(cut).unwrap().body, message(7).body);
    log.append_epoch(EpochEntry::new(4, cut)).unwrap();
    log.shutdown().unwrap();
    drop(log);
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.max_offset(), cut + bytes.len() as u64);
    assert_eq!(log.epochs().last(), Some(&EpochEntry::new(4, cut)));
}

#[test]
fn truncation_is_refused_off_a_message_boundary_and_outside_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let (_, cut) = build(dir.path(), &env);
    let log = env.open(dir.path(), config()).unwrap();
    let end = log.max_offset();
    match log.truncate_to(cut + 1) {
        Err(StoreError::NotARecordBoundary { offset }) => assert_eq!(offset, cut + 1),
        other => panic!("expected NotARecordBoundary, got {other:?}"),
    }
    assert!(matches!(log.truncate_to(end + 1), Err(StoreError::OutOfRange { .. })));
    assert_eq!(log.max_offset(), end, "a refused truncation changes nothing");
    assert_eq!(log.epochs().len(), 3);
    // Truncating to the end changes no byte (and drops no epoch that starts before it).
    let report = log.truncate_to(end).unwrap();
    assert_eq!((report.from, report.to, report.zeroed_bytes), (end, end, 0));
    assert_eq!(log.epochs().len(), 3);
}

#[test]
fn truncating_to_the_start_empties_the_log_and_the_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    build(dir.path(), &env);
    let log = env.open(dir.path(), config()).unwrap();
    log.truncate_to(0).unwrap();
    assert_eq!(log.max_offset(), 0);
    assert_eq!(log.epochs(), vec![]);
    log.abandon();
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.max_offset(), 0);
    assert_eq!(log.epochs(), vec![], "the emptied epoch list is durable");
    assert_eq!(EpochFile::in_root(dir.path()).read().unwrap(), vec![]);
    let r = log.put(Message::new("T0", 0, &b"again"[..]));
    assert_eq!((r.status, r.offset, r.queue_offset), (PutStatus::PutOk, 0, 0));
}

#[test]
fn epochs_must_increase_and_start_within_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    log.append_epoch(EpochEntry::new(2, 0)).unwrap();
    // The same entry again is a no-op (a slave sees its epoch in every frame).
    log.append_epoch(EpochEntry::new(2, 0)).unwrap();
    put_all(&log, 0..3);
    let end = log.max_offset();
    assert!(matches!(log.append_epoch(EpochEntry::new(1, end)), Err(StoreError::EpochRefused { .. })));
    assert!(matches!(log.append_epoch(EpochEntry::new(2, end)), Err(StoreError::EpochRefused { .. })));
    assert!(matches!(log.append_epoch(EpochEntry::new(3, end + 1)), Err(StoreError::EpochRefused { .. })));
    // An epoch with no data (it starts where the last one does) is kept, unlike Java's.
    log.append_epoch(EpochEntry::new(3, end)).unwrap();
    log.append_epoch(EpochEntry::new(4, end)).unwrap();
    assert_eq!(log.epochs().len(), 3);
    log.abandon();
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.epochs(), vec![EpochEntry::new(2, 0), EpochEntry::new(3, end), EpochEntry::new(4, end)]);
}

#[test]
fn recovery_drops_epochs_that_start_past_the_recovered_end() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    log.append_epoch(EpochEntry::new(1, 0)).unwrap();
    put_all(&log, 0..3);
    let end = log.max_offset();
    log.shutdown().unwrap();
    drop(log);
    // An epoch file that claims an epoch beyond the log (its bytes were lost in a crash).
    EpochFile::in_root(dir.path()).write(&[EpochEntry::new(1, 0), EpochEntry::new(2, end + 500)]).unwrap();
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.epochs(), vec![EpochEntry::new(1, 0)]);
    assert_eq!(EpochFile::in_root(dir.path()).read().unwrap(), vec![EpochEntry::new(1, 0)]);
}

#[test]
fn a_corrupt_epoch_file_and_copy_stop_the_open_with_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    log.append_epoch(EpochEntry::new(1, 0)).unwrap();
    log.shutdown().unwrap();
    drop(log);
    let file = EpochFile::in_root(dir.path());
    std::fs::write(file.path(), "garbage").unwrap();
    std::fs::write(file.backup_path(), "1\n0\n1-0\n").unwrap();
    match env.open(dir.path(), config()) {
        Err(StoreError::EpochFileCorrupt { path, .. }) => assert_eq!(path, file.path()),
        other => panic!("expected EpochFileCorrupt, got {other:?}"),
    }
}
