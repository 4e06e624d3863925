//! Consume queues: reads by queue offset, file rolls, rebuild and trimming on recovery.

mod common;

use common::{Env, config, message, zero_from};
use logship_store::{CQ_ENTRY_SIZE, CqEntry, PutStatus, StoreError, codec};

fn fill(log: &logship_store::CommitLog, n: usize) -> Vec<logship_store::PutResult> {
    fill_range(log, 0..n)
}

fn fill_range(
    log: &logship_store::CommitLog,
    range: std::ops::Range<usize>,
) -> Vec<logship_store::PutResult> {
    range
        .map(|i| {
            let r = log.put(message(i));
            assert_eq!(r.status, PutStatus::PutOk);
            r
        })
        .collect()
}

fn all_entries(log: &logship_store::CommitLog) -> Vec<Vec<CqEntry>> {
    let mut out = Vec::new();
    for t in 0..3 {
        for q in 0..2 {
            out.push(log.read_queue(&format!("T{t}"), q, 0, 10_000).unwrap());
        }
    }
    out
}

#[test]
fn entries_are_read_by_queue_offset_and_point_at_their_messages() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let puts = fill(&log, 400); // T0..T2 x queues 0..1; 64-entry files roll several times
    let (min, max) = log.queue_bounds("T1", 1);
    assert_eq!((min, max), (0, 67));
    let page = log.read_queue("T1", 1, 10, 5).unwrap();
    assert_eq!(page.iter().map(|e| e.queue_offset).collect::<Vec<_>>(), vec![10, 11, 12, 13, 14]);
    for e in &page {
        let m = log.read_message(e.physical_offset).unwrap();
        assert_eq!((m.topic.as_str(), m.queue_id, m.queue_offset as u64), ("T1", 1, e.queue_offset));
        assert_eq!(e.size, m.total_size);
        assert_eq!(e.tags_code, codec::tags_code(m.tags().unwrap()));
        assert!(puts.iter().any(|p| p.offset == e.physical_offset));
    }
    let msgs = log.read_queue_messages("T1", 1, 60, 100).unwrap();
    assert_eq!(msgs.len(), 7);
    assert!(log.read_queue("T1", 1, 67, 10).unwrap().is_empty());
    assert!(matches!(
        log.read_queue("T1", 1, 68, 10),
        Err(StoreError::QueueOffsetOutOfRange { max: 67, .. })
    ));
    assert!(log.read_queue("nope", 0, 0, 10).unwrap().is_empty());
    // On disk: 20-byte entries in 64-entry files under consumequeue/<topic>/<queueId>/.
    let qdir = dir.path().join("consumequeue/T1/1");
    let mut files: Vec<_> = std::fs::read_dir(&qdir).unwrap().map(|e| e.unwrap().file_name()).collect();
    files.sort();
    assert_eq!(files[1].to_str().unwrap(), format!("{:020}", 64 * CQ_ENTRY_SIZE));
    let first = std::fs::read(qdir.join(&files[0])).unwrap();
    let e1 = log.read_queue("T1", 1, 1, 1).unwrap()[0];
    assert_eq!(&first[20..28], &(e1.physical_offset as i64).to_be_bytes());
    assert_eq!(&first[28..32], &(e1.size as i32).to_be_bytes());
    assert_eq!(&first[32..40], &e1.tags_code.to_be_bytes());
}

#[test]
fn queues_are_rebuilt_from_the_log_after_their_directory_is_deleted() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    fill(&log, 300);
    let before = all_entries(&log);
    log.shutdown().unwrap();
    drop(log);
    std::fs::remove_dir_all(dir.path().join("consumequeue")).unwrap();
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.recovery_report().dispatch_from, 0);
    assert_eq!(all_entries(&log), before);
    // And the rebuilt queues continue where the log is.
    let r = log.put(message(300));
    assert_eq!(r.queue_offset, before[0].len() as u64);
}

#[test]
fn the_rebuild_option_replaces_damaged_queues() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    fill(&log, 100);
    let before = all_entries(&log);
    log.shutdown().unwrap();
    drop(log);
    std::fs::remove_dir_all(dir.path().join("consumequeue/T2")).unwrap();
    let mut cfg = config();
    cfg.recovery.rebuild_consume_queues = true;
    let log = env.open(dir.path(), cfg).unwrap();
    assert_eq!(all_entries(&log), before);
}

#[test]
fn queues_are_trimmed_to_the_log_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    fill(&log, 30);
    log.checkpoint().unwrap();
    let more = fill_range(&log, 30..60);
    let before = all_entries(&log); // the queue files hold entries for all 60 messages
    log.abandon();
    zero_from(&common::segment_path(dir.path(), 0), more[0].offset + 1);
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.bounds().max, more[0].offset);
    let after = all_entries(&log);
    for (a, b) in after.iter().zip(&before) {
        let kept: Vec<_> = b.iter().copied().filter(|e| e.physical_offset < more[0].offset).collect();
        assert_eq!(a, &kept);
    }
    // Queue offsets continue from the trimmed queues.
    let r = log.put(message(30)); // topic T0, queue 0
    assert_eq!(r.queue_offset, after[0].len() as u64);
}
