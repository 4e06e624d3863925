//! The slave write path (`append_at`): exact offsets, segment rolls, adoption of the first offset,
//! and dispatch of replicated bytes.

mod common;

use common::{Env, SEGMENT, config, eventually, message, segment_path};
use logship_store::{CommitLog, LogBounds, LogSpan, PutStatus, RecoveryKind, StoreError};

/// Reads the master's log the way the HA master does (never across a segment) and returns the
/// frames it would send: `(offset, bytes)`, each at most `batch` bytes.
fn frames(master: &CommitLog, from: u64, batch: u64) -> Vec<(u64, Vec<u8>)> {
    let max = master.bounds().max;
    let mut out = Vec::new();
    let mut at = from;
    while at < max {
        let seg_end = (at / SEGMENT + 1) * SEGMENT;
        let len = batch.min(seg_end - at).min(max - at);
        out.push((at, master.read(LogSpan { offset: at, len: len as u32 }).unwrap().to_vec()));
        at += len;
    }
    out
}

fn fill_master(master: &CommitLog, n: usize) {
    for i in 0..n {
        assert_eq!(master.put(message(i)).status, PutStatus::PutOk);
    }
}

#[test]
fn an_append_at_stream_with_blank_padding_lands_at_the_same_offsets() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let master = env.open(mdir.path(), config()).unwrap();
    fill_master(&master, 300); // about 3 segments, so two BLANK-padded rolls
    assert!(master.bounds().max > 2 * SEGMENT);
    let slave = env.open(sdir.path(), config()).unwrap();
    // Odd-sized frames, so frame boundaries fall inside messages.
    let mut end = 0;
    for (offset, bytes) in frames(&master, 0, 1000) {
        // The end moves to the last whole record: a frame ending inside a message leaves it out.
        let new_end = slave.append_at(offset, &bytes).unwrap();
        assert!(new_end >= end && new_end <= offset + bytes.len() as u64);
        assert!(
            new_end == master.bounds().max || master.read_message(new_end).is_ok() || new_end % SEGMENT == 0
        );
        end = new_end;
    }
    assert_eq!(slave.bounds(), master.bounds());
    for seg in 0..=master.bounds().max / SEGMENT {
        let a = std::fs::read(segment_path(mdir.path(), seg * SEGMENT)).unwrap();
        let b = std::fs::read(segment_path(sdir.path(), seg * SEGMENT)).unwrap();
        assert!(a == b, "segment {seg} differs");
    }
    // Every message is readable on the slave at the master's offset, and indexed the same way.
    slave.dispatch_pending().unwrap();
    for topic in ["T0", "T1", "T2"] {
        for q in 0..2 {
            assert_eq!(
                slave.read_queue(topic, q, 0, 1000).unwrap(),
                master.read_queue(topic, q, 0, 1000).unwrap()
            );
        }
    }
}

#[test]
fn a_frame_starting_exactly_at_a_segment_end_goes_to_the_next_segment() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let master = env.open(mdir.path(), config()).unwrap();
    fill_master(&master, 200);
    let slave = env.open(sdir.path(), config()).unwrap();
    // Send exactly the first segment, then stop: the slave's end is the segment end.
    for (offset, bytes) in frames(&master, 0, 4096).into_iter().filter(|(o, _)| *o < SEGMENT) {
        slave.append_at(offset, &bytes).unwrap();
    }
    assert_eq!(slave.max_offset(), SEGMENT);
    assert!(
        !segment_path(sdir.path(), SEGMENT).exists()
            || std::fs::read(segment_path(sdir.path(), SEGMENT)).unwrap().iter().all(|&b| b == 0)
    );
    let len = master.read_message(SEGMENT).unwrap().total_size;
    let next = master.read(LogSpan { offset: SEGMENT, len }).unwrap();
    assert_eq!(slave.append_at(SEGMENT, &next).unwrap(), SEGMENT + u64::from(len));
    assert_eq!(slave.read(LogSpan { offset: SEGMENT, len }).unwrap(), next);
}

#[test]
fn append_at_refuses_a_gap_or_an_overlap_naming_both_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let record = common::record_at(0, 1);
    let end = log.append_at(0, &record).unwrap();
    let gap = log.append_at(32_868, &[1; 10]).unwrap_err();
    assert!(matches!(gap, StoreError::OffsetMismatch { expected, got: 32_868 } if expected == end), "{gap}");
    assert!(gap.to_string().contains(&end.to_string()) && gap.to_string().contains("32868"));
    let overlap = log.append_at(50, &[1; 10]).unwrap_err();
    assert!(matches!(overlap, StoreError::OffsetMismatch { expected, got: 50 } if expected == end));
    assert_eq!(log.max_offset(), end, "nothing was written");
}

#[test]
fn append_at_refuses_a_frame_crossing_the_segment_end_as_a_segment_size_mismatch() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let mut big = config();
    big.mapped_file_size_commit_log = 2 * SEGMENT;
    let master = env.open(mdir.path(), big).unwrap();
    fill_master(&master, 200);
    let slave = env.open(sdir.path(), config()).unwrap();
    let mut last = Ok(0);
    for (offset, bytes) in frames(&master, 0, 4096) {
        last = slave.append_at(offset, &bytes);
        if last.is_err() {
            break;
        }
    }
    let e = last.unwrap_err();
    assert!(
        matches!(e, StoreError::SegmentSizeMismatch { local_segment_size: SEGMENT, master_segment_end, .. } if master_segment_end > SEGMENT),
        "{e}"
    );
    assert!(slave.max_offset() <= SEGMENT);
    assert!(e.to_string().contains(&SEGMENT.to_string()), "{e}");
}

#[test]
fn an_empty_store_adopts_an_unaligned_first_offset_and_finds_it_again_after_reopen() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let master = env.open(mdir.path(), config()).unwrap();
    fill_master(&master, 200);
    // Start the slave at a message boundary inside the second segment.
    let start = (0..)
        .scan(SEGMENT, |at, _| {
            let m = master.read_message(*at).ok()?;
            *at += u64::from(m.total_size);
            Some(*at)
        })
        .nth(3)
        .unwrap();
    assert!(start % SEGMENT != 0);
    let slave = env.open(sdir.path(), config()).unwrap();
    for (offset, bytes) in frames(&master, start, 700).into_iter().take(10) {
        slave.append_at(offset, &bytes).unwrap();
    }
    let bounds = slave.bounds();
    assert_eq!(bounds.min, start);
    let mut msg_at_start = slave.read_message(start).unwrap();
    // A copy: a zero-copy body would keep the store locked (and mapped) across the reopen.
    msg_at_start.body = bytes::Bytes::copy_from_slice(&msg_at_start.body);
    assert!(matches!(slave.read(LogSpan { offset: start - 1, len: 1 }), Err(StoreError::OutOfRange { .. })));
    slave.flush().unwrap();
    slave.shutdown().unwrap();
    drop(slave);

    let slave = env.open(sdir.path(), config()).unwrap();
    assert_eq!(slave.recovery_report().kind, RecoveryKind::Clean);
    assert_eq!(slave.bounds(), bounds);
    assert_eq!(slave.read_message(start).unwrap(), msg_at_start);
    slave.abandon();

    // After a crash too: recovery scans from the adopted start, not from the segment start.
    let slave = env.open(sdir.path(), config()).unwrap();
    assert_eq!(slave.recovery_report().kind, RecoveryKind::Crash);
    assert_eq!(slave.bounds().min, start);
    assert!(slave.bounds().max <= bounds.max && slave.bounds().max > start);
    // The queues of a slave that joined mid-log start at the joined queue offsets.
    slave.dispatch_pending().unwrap();
    let (qmin, _) = slave.queue_bounds(&msg_at_start.topic, msg_at_start.queue_id);
    assert_eq!(qmin, msg_at_start.queue_offset as u64);
}

#[test]
fn a_slave_indexes_a_message_only_once_all_its_bytes_arrived() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let master = env.open(mdir.path(), config()).unwrap();
    let r = master.put(message(1));
    let bytes = master.read(LogSpan { offset: 0, len: r.wrote_bytes }).unwrap();
    let slave = env.open(sdir.path(), config()).unwrap();
    slave.append_at(0, &bytes[..50]).unwrap();
    slave.dispatch_pending().unwrap();
    assert_eq!(slave.queue_bounds("T1", 1), (0, 0), "half a message is not indexed");
    assert_eq!(slave.status().dispatch_error, None);
    slave.append_at(50, &bytes[50..]).unwrap();
    // The reput thread picks it up on its own.
    eventually("the reput thread to index the message", || slave.queue_bounds("T1", 1) == (0, 1));
    assert_eq!(slave.read_queue("T1", 1, 0, 10).unwrap()[0].physical_offset, 0);
}

#[test]
fn a_record_split_across_appends_is_published_once_whole() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let master = env.open(mdir.path(), config()).unwrap();
    let r = master.put(message(0));
    let bytes = master.read(LogSpan { offset: 0, len: r.wrote_bytes }).unwrap();
    let log = env.open(sdir.path(), config()).unwrap();
    assert_eq!(log.append_at(0, &bytes[..30]).unwrap(), 0, "half a record is not published");
    assert_eq!(log.max_offset(), 0);
    assert_eq!(log.append_at(30, &bytes[30..]).unwrap(), r.end());
    // A slave promoted to master continues the queue offsets of the replicated messages.
    let next = log.put(message(6)); // same topic and queue as message 0
    assert_eq!((next.status, next.offset, next.queue_offset), (PutStatus::PutOk, r.end(), 1));
}

#[test]
fn bounds_of_an_empty_store_are_zero() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    assert_eq!(log.bounds(), LogBounds { min: 0, max: 0 });
    assert_eq!((log.max_offset(), log.flushed_offset()), (0, 0));
    assert_eq!(log.append_at(0, &[]).unwrap(), 0);
}
