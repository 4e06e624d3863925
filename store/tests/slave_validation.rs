//! A slave validates replicated bytes before it stores (and so acks) them: magic, sizes,
//! physical offset, body CRC, and BLANK padding that ends exactly at its own segment end.

mod common;

use common::{Env, SEGMENT, config, message, record_at};
use logship_store::{CommitLog, LogSpan, PutStatus, RecordError, StoreError};

fn master_with(env: &Env, dir: &std::path::Path, segment: u64, n: usize) -> CommitLog {
    let mut cfg = config();
    cfg.mapped_file_size_commit_log = segment;
    let master = env.open(dir, cfg).unwrap();
    for i in 0..n {
        assert_eq!(master.put(message(i)).status, PutStatus::PutOk);
    }
    master
}

/// Sends the master's log in frames of at most `batch` bytes, never across a master segment;
/// returns the first error.
fn replicate(master: &CommitLog, slave: &CommitLog, segment: u64, batch: u64) -> Result<u64, StoreError> {
    let max = master.bounds().max;
    let mut at = slave.max_offset();
    let mut end = at;
    while at < max {
        let len = batch.min((at / segment + 1) * segment - at).min(max - at);
        let bytes = master.read(LogSpan { offset: at, len: len as u32 }).unwrap();
        end = slave.append_at(at, &bytes)?;
        at += len;
    }
    Ok(end)
}

#[test]
fn a_slave_refuses_bytes_that_are_not_records_naming_the_offset_and_stays_openable() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let slave = env.open(dir.path(), config()).unwrap();
    let good = record_at(0, 1);
    let end = slave.append_at(0, &good).unwrap();
    // A well-formed frame with a random body: garbage where the next record should start.
    let garbage: Vec<u8> = (0..500u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let e = slave.append_at(end, &garbage).unwrap_err();
    assert!(matches!(e, StoreError::InvalidReplicatedRecord { offset, .. } if offset == end), "{e}");
    assert!(e.to_string().contains(&end.to_string()), "the error names the offset: {e}");
    assert_eq!(slave.max_offset(), end, "nothing past the last good record is stored");
    // The next stream starts at the last good record again.
    let e = slave.append_at(end, &garbage).unwrap_err();
    assert!(matches!(e, StoreError::InvalidReplicatedRecord { .. }));
    slave.abandon();
    let slave = env.open(dir.path(), config()).unwrap();
    assert_eq!(slave.max_offset(), end);
    assert_eq!(slave.read_message(0).unwrap().body, message(1).body);
    slave.shutdown().unwrap();
    drop(slave);
    let slave = env.open(dir.path(), config()).unwrap();
    assert_eq!(slave.max_offset(), end);
}

#[test]
fn a_slave_refuses_a_record_with_a_bad_body_crc_and_keeps_the_good_ones_before_it() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let master = master_with(&env, mdir.path(), SEGMENT, 5);
    let victim = master.read_message(0).unwrap().total_size as u64;
    let max = master.bounds().max;
    let mut bytes = master.read(LogSpan { offset: 0, len: max as u32 }).unwrap().to_vec();
    // Flip a byte in the body of the second message.
    let body = message(1).body;
    let at = bytes[victim as usize..].windows(body.len()).position(|w| w == &body[..]).unwrap();
    bytes[victim as usize + at + 3] ^= 0x40;
    let slave = env.open(sdir.path(), config()).unwrap();
    let e = slave.append_at(0, &bytes).unwrap_err();
    assert!(
        matches!(e, StoreError::InvalidReplicatedRecord { offset, reason: RecordError::BodyCrcMismatch { .. } } if offset == victim),
        "{e}"
    );
    assert_eq!(
        slave.max_offset(),
        victim,
        "the first record is kept, the bad one and those after it are not"
    );
    assert_eq!(slave.read_message(0).unwrap().body, message(0).body);
}

#[test]
fn a_segment_size_mismatch_is_its_own_error_naming_both_sizes() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let master_segment = SEGMENT / 2;
    let master = master_with(&env, mdir.path(), master_segment, 80);
    assert!(master.bounds().max > master_segment);
    let slave = env.open(sdir.path(), config()).unwrap();
    let e = replicate(&master, &slave, master_segment, 1000).unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::SegmentSizeMismatch {
                local_segment_size: SEGMENT,
                master_segment_size: Some(size),
                master_segment_end,
                ..
            } if size == master_segment && master_segment_end == master_segment
        ),
        "{e}"
    );
    let text = e.to_string();
    assert!(text.contains(&SEGMENT.to_string()) && text.contains(&master_segment.to_string()), "{text}");
    assert!(slave.max_offset() < master_segment, "the BLANK record is not stored");
    slave.abandon();
    let slave = env.open(sdir.path(), config()).unwrap();
    assert!(slave.max_offset() < master_segment);
}

#[test]
fn a_whole_log_in_odd_frames_replicates_with_validation_to_identical_bytes() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let master = master_with(&env, mdir.path(), SEGMENT, 300);
    let slave = env.open(sdir.path(), config()).unwrap();
    assert_eq!(replicate(&master, &slave, SEGMENT, 777).unwrap(), master.bounds().max);
    assert_eq!(slave.bounds(), master.bounds());
}

#[test]
fn a_pull_returns_the_good_messages_around_a_damaged_one_and_flags_it() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    // Messages 0, 2, 4, ... all go to queue T0:0.
    let puts: Vec<_> = (0..5).map(|k| log.put(message(k * 6))).collect();
    assert!(puts.iter().all(|p| p.status == PutStatus::PutOk));
    let victim = &puts[2];
    let body = message(12).body;
    let seg = common::segment_path(dir.path(), 0);
    let bytes = std::fs::read(&seg).unwrap();
    let from = victim.offset as usize;
    let at = from + bytes[from..].windows(body.len()).position(|w| w == &body[..]).unwrap();
    common::patch(&seg, at as u64, &[bytes[at] ^ 0x01]);
    assert!(log.read_queue_messages("T0", 0, 0, 10).is_err(), "the whole batch fails");
    let read = log.read_queue_messages_checked("T0", 0, 0, 10).unwrap();
    let got: Vec<_> = read.messages.iter().map(|m| m.queue_offset).collect();
    assert_eq!(got, [0, 1, 3, 4]);
    assert_eq!(read.bad.len(), 1);
    let bad = &read.bad[0];
    assert_eq!((bad.queue_offset, bad.physical_offset), (2, victim.offset));
    assert!(
        matches!(&bad.error, StoreError::Corrupt { offset, reason: RecordError::BodyCrcMismatch { .. }, .. } if *offset == victim.offset),
        "{}",
        bad.error
    );
}
