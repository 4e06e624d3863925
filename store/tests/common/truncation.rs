//! The truncation model shared by `truncation.rs` and `truncation_kill.rs`: a store to cut and
//! the invariants a reopened store must hold after a cut interrupted at any step.

use std::path::Path;

use logship_store::{CommitLog, EpochEntry, EpochFile, PutResult, PutStatus};

use super::{Env, SEGMENT, config, message};

/// An epoch entry.
pub fn entry(epoch: i32, start_offset: u64) -> EpochEntry {
    EpochEntry { epoch, start_offset }
}

pub fn put_all(log: &CommitLog, range: std::ops::Range<usize>) -> Vec<PutResult> {
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
pub fn build(dir: &Path, env: &Env) -> (Vec<PutResult>, u64) {
    let log = env.open(dir, config()).unwrap();
    log.append_epoch(entry(1, 0)).unwrap();
    let mut puts = put_all(&log, 0..100);
    let second = puts.iter().position(|p| p.offset > SEGMENT + 100).unwrap();
    let cut = puts[second + 2].offset;
    log.append_epoch(entry(2, puts[second].offset)).unwrap();
    puts.extend(put_all(&log, 100..150));
    let third = log.max_offset();
    assert!(third > cut);
    log.append_epoch(entry(3, third)).unwrap();
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
pub fn check_after_crash(dir: &Path, env: &Env, puts: &[PutResult], cut: u64) {
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
    let expected: Vec<_> = epochs_of(puts).into_iter().filter(|e| e.start_offset < cut).collect();
    assert_eq!(log.epochs(), expected);
    let file = EpochFile::in_root(dir);
    assert_eq!(file.read().unwrap(), log.epochs());
    assert!(!dir.join("truncating").exists(), "recovery finished the truncation");
    // Writing continues at the cut, and the queue offsets continue from the kept messages.
    let next = log.put(message(0));
    assert_eq!(next.status, PutStatus::PutOk);
    assert_eq!(next.offset, cut);
    assert_eq!(next.queue_offset, kept.get(&("T0".to_string(), 0)).copied().unwrap_or(0));
    assert_eq!(log.read_message(cut).unwrap().body, message(0).body);
    log.shutdown().unwrap();
    drop(log);
    // And once more: a clean reopen keeps it.
    let log = env.open(dir, config()).unwrap();
    assert_eq!(log.max_offset(), next.end());
    log.shutdown().unwrap();
}

/// The epochs [`build`] appended.
pub fn epochs_of(puts: &[PutResult]) -> Vec<EpochEntry> {
    let second = puts.iter().position(|p| p.offset > SEGMENT + 100).unwrap();
    vec![entry(1, 0), entry(2, puts[second].offset), entry(3, puts[149].end())]
}

/// Cut points that cover each case: inside the second segment (epoch 3 goes), exactly at a
/// segment's start (after BLANK padding), inside the first segment (epochs 2 and 3 go), and the
/// start of the log (everything goes).
pub fn cuts(puts: &[PutResult], cut: u64) -> Vec<u64> {
    let at_segment_start =
        puts.iter().map(|p| p.offset).find(|&o| o >= 2 * SEGMENT && o % SEGMENT == 0).unwrap();
    vec![cut, at_segment_start, puts[1].offset, 0]
}
