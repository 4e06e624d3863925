//! Clean and crash recovery: the abort marker, the checkpoint, torn tails and corruption.

mod common;

use std::path::Path;

use common::{Env, SEGMENT, config, message, patch, record_at, segment_path, zero_from};
use logship_store::{LogSpan, PutResult, PutStatus, RecordError, RecoveryKind, StoreError};

fn put_all(log: &logship_store::CommitLog, range: std::ops::Range<usize>) -> Vec<PutResult> {
    range
        .map(|i| {
            let r = log.put(message(i));
            assert_eq!(r.status, PutStatus::PutOk);
            r
        })
        .collect()
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[test]
fn a_clean_shutdown_reopens_without_scanning() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    let puts = put_all(&log, 0..50);
    let bounds = log.bounds();
    log.shutdown().unwrap();
    assert!(!dir.path().join("abort").exists(), "a clean shutdown removes the abort marker");
    drop(log);
    // Damage a message: a reopen that scanned would refuse to open; this one does not look.
    let victim = &puts[10];
    // Byte 90 is in the body (88 bytes of header with IPv4 hosts), which the CRC covers.
    patch(&segment_path(dir.path(), 0), victim.offset + 90, &[0xFF]);
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.recovery_report().kind, RecoveryKind::Clean);
    assert_eq!(log.recovery_report().scanned_from, None);
    assert_eq!(log.bounds(), bounds);
    assert!(dir.path().join("abort").exists());
    assert!(matches!(
        log.read_message(victim.offset),
        Err(StoreError::Corrupt { offset, reason: RecordError::BodyCrcMismatch { .. }, .. }) if offset == victim.offset
    ));
    assert_eq!(log.read_message(puts[11].offset).unwrap().queue_offset, puts[11].queue_offset as i64);
}

/// A RocketMQ broker that opens a cleanly stopped logship store and appends leaves logship's
/// checkpoint block as it was: the recorded clean end is stale, and the messages after it stay.
#[test]
fn messages_appended_after_a_clean_shutdown_by_another_writer_are_kept() {
    let (dir, other) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    let end = put_all(&log, 0..20).last().unwrap().end();
    log.shutdown().unwrap();
    drop(log);
    // The same messages, and ten more, as another writer would have appended them.
    let more = env.open(other.path(), config()).unwrap();
    let appended = put_all(&more, 0..30);
    let max = more.bounds().max as usize;
    more.shutdown().unwrap();
    let tail = std::fs::read(segment_path(other.path(), 0)).unwrap()[end as usize..max].to_vec();
    patch(&segment_path(dir.path(), 0), end, &tail);
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.bounds().max, appended.last().unwrap().end());
    assert_eq!(log.read_message(appended[25].offset).unwrap().queue_offset, appended[25].queue_offset as i64);
}

#[test]
fn cutting_the_last_message_at_every_byte_recovers_the_previous_boundary_for_good() {
    let base = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(base.path(), config()).unwrap();
    put_all(&log, 0..5);
    log.checkpoint().unwrap(); // everything so far is durable and recorded
    let last = log.put(logship_store::Message::new("T0", 0, &b"the last one"[..]));
    let (start, end) = (last.offset, last.end());
    log.abandon(); // crash: the last message is not durable
    let seg0 = |dir: &Path| segment_path(dir, 0);
    let original = std::fs::read(seg0(base.path())).unwrap();
    for cut in start..=end {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(base.path(), dir.path());
        zero_from(&seg0(dir.path()), cut);
        // Zeroing bytes that were zero anyway (the empty properties' length) leaves the message whole.
        let whole = original[cut as usize..end as usize].iter().all(|&b| b == 0);
        let expect = if whole { end } else { start };

        let log = env.open(dir.path(), config()).unwrap();
        let report = log.recovery_report().clone();
        assert_eq!(report.kind, RecoveryKind::Crash, "cut at {cut}");
        assert_eq!(log.bounds().max, expect, "cut at {cut}");
        // A cut that leaves only zeros (the size field starts with zero bytes) is where writing
        // stopped: nothing torn to report.
        let torn = !whole && original[start as usize..cut as usize].iter().any(|&b| b != 0);
        let truncated = report.truncated_at.as_ref().map(|t| t.0);
        assert_eq!(truncated, torn.then_some(start), "cut at {cut}");
        let bytes = std::fs::read(seg0(dir.path())).unwrap();
        assert!(
            bytes[expect as usize..].iter().all(|&b| b == 0),
            "torn bytes are physically gone (cut at {cut})"
        );
        let in_queue = log.read_queue("T0", 0, 0, 100).unwrap().iter().any(|e| e.physical_offset == start);
        assert_eq!(in_queue, whole, "the consume queue matches the log (cut at {cut})");
        log.abandon(); // crash again, straight away

        let log = env.open(dir.path(), config()).unwrap();
        assert_eq!(log.bounds().max, expect, "nothing stale comes back (cut at {cut})");
        assert_eq!(log.recovery_report().truncated_at, None, "cut at {cut}");
        drop(log);
    }
}

#[test]
fn a_hole_before_valid_messages_is_corruption_even_in_the_unflushed_tail() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    put_all(&log, 0..3);
    log.checkpoint().unwrap();
    let tail = put_all(&log, 3..6);
    log.abandon();
    // Message 3 is gone (zeros) while 4 and 5 are whole: not a torn tail.
    patch(&segment_path(dir.path(), 0), tail[0].offset, &vec![0; tail[0].wrote_bytes as usize]);
    let e = env.open(dir.path(), config()).unwrap_err();
    assert!(
        matches!(e, StoreError::Corrupt { offset, reason: RecordError::Empty, .. } if offset == tail[0].offset),
        "{e}"
    );

    // The operator may cut the log there; the cut is durable and survives another crash.
    let mut cfg = config();
    cfg.recovery.truncate_on_corruption = true;
    let log = env.open(dir.path(), cfg).unwrap();
    assert_eq!(log.bounds().max, tail[0].offset);
    assert!(log.recovery_report().zeroed_bytes as u32 >= tail[1].wrote_bytes + tail[2].wrote_bytes);
    let bytes = std::fs::read(segment_path(dir.path(), 0)).unwrap();
    assert!(bytes[tail[0].offset as usize..].iter().all(|&b| b == 0), "messages 4 and 5 are zeroed on disk");
    log.abandon();
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.bounds().max, tail[0].offset, "messages 4 and 5 do not come back after another crash");
}

#[test]
fn a_flipped_byte_mid_log_is_corruption_even_when_nothing_was_flushed() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    let puts = put_all(&log, 0..20);
    log.abandon(); // no flush, no checkpoint: nothing was promised durable
    patch(&segment_path(dir.path(), 0), puts[9].offset + 90, &[0xA5]);
    let e = env.open(dir.path(), config()).unwrap_err();
    assert!(
        matches!(e, StoreError::Corrupt { offset, reason: RecordError::BodyCrcMismatch { .. }, .. } if offset == puts[9].offset),
        "{e}"
    );
}

#[test]
fn a_flipped_byte_mid_log_is_corruption_naming_the_segment_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    let puts = put_all(&log, 0..20);
    log.checkpoint().unwrap();
    log.abandon();
    let victim = &puts[7];
    patch(&segment_path(dir.path(), 0), victim.offset + 90, &[0x5A]); // a body byte
    let err = env.open(dir.path(), config()).unwrap_err();
    match &err {
        StoreError::Corrupt { segment, offset, .. } => {
            assert_eq!(*offset, victim.offset);
            assert_eq!(segment, &segment_path(dir.path(), 0));
        }
        other => panic!("expected corruption, got {other}"),
    }
    let text = err.to_string();
    assert!(text.contains(&victim.offset.to_string()) && text.contains("00000000000000000000"), "{text}");
    assert!(dir.path().join("commitlog/00000000000000000000").exists(), "nothing was deleted");

    // Only an explicit recovery option cuts the log there.
    let mut cfg = config();
    cfg.recovery.truncate_on_corruption = true;
    let log = env.open(dir.path(), cfg).unwrap();
    assert_eq!(log.bounds().max, victim.offset);
    assert_eq!(log.recovery_report().truncated_at.as_ref().map(|t| t.0), Some(victim.offset));
}

#[test]
fn a_slave_crash_mid_message_recovers_to_the_last_whole_message() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let master = env.open(mdir.path(), config()).unwrap();
    let puts = put_all(&master, 0..10);
    let max = master.bounds().max;
    let all = master.read(LogSpan { offset: 0, len: max as u32 }).unwrap();
    let slave = env.open(sdir.path(), config()).unwrap();
    // Durable up to the middle of message 5, then more bytes that a crash tears at message 8.
    let mid5 = puts[5].offset + 20;
    slave.append_at(0, &all[..mid5 as usize]).unwrap();
    slave.checkpoint().unwrap();
    slave.append_at(mid5, &all[mid5 as usize..]).unwrap();
    slave.abandon();
    zero_from(&segment_path(sdir.path(), 0), puts[8].offset + 3);
    let slave = env.open(sdir.path(), config()).unwrap();
    assert_eq!(slave.bounds().max, puts[8].offset, "recovery lands on the last whole message");
    assert_eq!(slave.max_offset(), puts[8].offset);
    // The slave re-requests from there and gets the same bytes again.
    slave.append_at(puts[8].offset, &all[puts[8].offset as usize..]).unwrap();
    assert_eq!(slave.read(LogSpan { offset: 0, len: max as u32 }).unwrap(), all);
}

#[test]
fn an_empty_trailing_segment_is_deleted_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    put_all(&log, 0..3);
    log.shutdown().unwrap();
    drop(log);
    let trailing = segment_path(dir.path(), SEGMENT);
    std::fs::File::create(&trailing).unwrap().set_len(SEGMENT).unwrap();
    let log = env.open(dir.path(), config()).unwrap();
    // (The preallocation thread may create the next segment again right away, so look at what
    // recovery did rather than at the directory.)
    assert_eq!(log.recovery_report().removed_segments, vec![trailing]);
    assert_eq!(log.status().segments, 1);
    assert_eq!(log.put(message(3)).status, PutStatus::PutOk);
}

#[test]
fn a_full_last_segment_reopens_and_rolls_on_the_next_write() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let master = env.open(mdir.path(), config()).unwrap();
    while master.bounds().max < SEGMENT + 1000 {
        assert_eq!(master.put(message(1)).status, logship_store::PutStatus::PutOk);
    }
    // The slave gets exactly the first segment, which ends in BLANK padding.
    let slave = env.open(sdir.path(), config()).unwrap();
    for at in (0..SEGMENT).step_by(4096) {
        slave.append_at(at, &master.read(LogSpan { offset: at, len: 4096 }).unwrap()).unwrap();
    }
    assert_eq!(slave.max_offset(), SEGMENT);
    slave.shutdown().unwrap();
    drop(slave);
    let slave = env.open(sdir.path(), config()).unwrap();
    assert_eq!(slave.recovery_report().kind, RecoveryKind::Clean);
    assert_eq!(slave.max_offset(), SEGMENT);
    let next = master.read(LogSpan { offset: SEGMENT, len: 1000 }).unwrap();
    let published = slave.append_at(SEGMENT, &next).unwrap();
    assert!(published > SEGMENT && published < SEGMENT + 1000, "the partial message is not published");
    slave.abandon();
    // After a crash the partial message at the end is dropped: the slave is back at the last
    // whole message of the second segment.
    let mut boundary = SEGMENT;
    while let Ok(m) = master.read_message(boundary) {
        if boundary + u64::from(m.total_size) > SEGMENT + 1000 {
            break;
        }
        boundary += u64::from(m.total_size);
    }
    let slave = env.open(sdir.path(), config()).unwrap();
    assert_eq!(slave.max_offset(), boundary);
}

/// Crashes after a checkpoint with messages 5 to 7 in the unflushed tail; returns the puts.
fn crash_with_an_unflushed_tail(dir: &Path, env: &Env) -> Vec<PutResult> {
    let log = env.open(dir, config()).unwrap();
    let mut puts = put_all(&log, 0..5);
    log.checkpoint().unwrap();
    puts.extend(put_all(&log, 5..8));
    log.abandon();
    puts
}

#[test]
fn a_crash_that_tore_nothing_recovers_the_end_and_keeps_the_tail_zero() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let puts = crash_with_an_unflushed_tail(dir.path(), &env);
    let end = puts[7].end();
    let log = env.open(dir.path(), config()).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(
        (report.kind, report.end, report.truncated_at, report.zeroed_bytes),
        (RecoveryKind::Crash, end, None, 0)
    );
    assert_eq!(report.scanned_from, Some(0), "the scan starts at the segment holding the durable boundary");
    let queue: Vec<u64> =
        log.read_queue("T1", 1, 0, 100).unwrap().iter().map(|e| e.physical_offset).collect();
    assert_eq!(queue, vec![puts[1].offset, puts[7].offset], "message 7 of the tail is in its queue again");
    let bytes = std::fs::read(segment_path(dir.path(), 0)).unwrap();
    assert!(bytes[end as usize..].iter().all(|&b| b == 0));
}

#[test]
fn a_stray_byte_in_the_last_byte_of_the_segment_after_a_crash_is_cut_as_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let end = crash_with_an_unflushed_tail(dir.path(), &env)[7].end();
    let seg0 = segment_path(dir.path(), 0);
    patch(&seg0, SEGMENT - 1, &[0x5A]);
    let log = env.open(dir.path(), config()).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(report.end, end);
    assert_eq!(
        report.truncated_at,
        Some((end, RecordError::Empty)),
        "a non-zero byte after the end is a torn tail"
    );
    assert_eq!(report.zeroed_bytes, 4096, "the page holding the stray byte is rewritten");
    let bytes = std::fs::read(&seg0).unwrap();
    assert!(bytes[end as usize..].iter().all(|&b| b == 0), "the stray byte is zeroed on disk");
    log.abandon();
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.recovery_report().truncated_at, None, "the cut held across another crash");
    assert_eq!(log.bounds().max, end);
}

#[test]
fn a_stray_byte_in_a_segment_past_the_end_after_a_crash_removes_that_segment() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let end = crash_with_an_unflushed_tail(dir.path(), &env)[7].end();
    let next = segment_path(dir.path(), SEGMENT);
    std::fs::File::create(&next).unwrap().set_len(SEGMENT).unwrap();
    patch(&next, SEGMENT / 2 + 3, &[0x01]);
    let log = env.open(dir.path(), config()).unwrap();
    let report = log.recovery_report().clone();
    assert_eq!(report.end, end);
    assert_eq!(
        report.truncated_at,
        Some((end, RecordError::Empty)),
        "a non-zero byte past the end is a torn tail"
    );
    assert_eq!(report.removed_segments, vec![next]);
    assert_eq!(report.zeroed_bytes, 0, "segment 0 was zero after the end already");
}

#[test]
fn a_valid_message_after_a_torn_record_is_corruption_wherever_it_lies_in_the_pages() {
    let base = tempfile::tempdir().unwrap();
    let env = Env::default();
    let end = crash_with_an_unflushed_tail(base.path(), &env)[7].end();
    const PAGE: u64 = 4096;
    // Starts around page boundaries (the magic code is 4 bytes into a record, after a length
    // whose first bytes are zero), in segment 0 and in a segment past it.
    let starts = [
        PAGE - 4,
        2 * PAGE - 1,
        2 * PAGE,
        3 * PAGE - 2,
        3 * PAGE + 5,
        SEGMENT + PAGE - 3,
        SEGMENT + 2 * PAGE - 1,
        SEGMENT + 2 * PAGE + 1,
    ];
    for at in starts {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(base.path(), dir.path());
        let (seg_base, seg) = if at < SEGMENT {
            (0, segment_path(dir.path(), 0))
        } else {
            let next = segment_path(dir.path(), SEGMENT);
            std::fs::File::create(&next).unwrap().set_len(SEGMENT).unwrap();
            (SEGMENT, next)
        };
        // A write torn after 40 bytes at the end, and a whole message further on.
        patch(&segment_path(dir.path(), 0), end, &record_at(end, 8)[..40]);
        patch(&seg, at - seg_base, &record_at(at, 9));
        let e = env.open(dir.path(), config()).unwrap_err();
        assert!(matches!(e, StoreError::Corrupt { offset, .. } if offset == end), "message at {at}: {e}");
    }
}
