//! Every kind of bad input gets its own error: never a panic, never lost data.

mod common;

use common::{Env, SEGMENT, config, message, patch, segment_path};
use logship_store::{CommitLog, Message, PutStatus, StoreError};

fn store_with_data(env: &Env) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let log = env.open(dir.path(), config()).unwrap();
    for i in 0..10 {
        assert_eq!(log.put(message(i)).status, PutStatus::PutOk);
    }
    log.shutdown().unwrap();
    dir
}

#[test]
fn an_oversize_message_is_message_illegal() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let r = log.put(Message::new("T", 0, vec![0; config().max_message_size as usize]));
    assert_eq!(r.status, PutStatus::MessageIllegal);
    assert_eq!(log.bounds().max, 0);
}

#[test]
fn the_default_limit_is_four_mib() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config();
    cfg.mapped_file_size_commit_log = 8 << 20;
    cfg.max_message_size = 4 << 20;
    let log = Env::default().open(dir.path(), cfg).unwrap();
    assert_eq!(log.put(Message::new("T", 0, vec![0; (4 << 20) - 200])).status, PutStatus::PutOk);
    assert_eq!(log.put(Message::new("T", 0, vec![0; 4 << 20])).status, PutStatus::MessageIllegal);
}

#[test]
fn a_wrong_append_offset_is_offset_mismatch() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let record = common::record_at(4096, 1);
    let end = log.append_at(4096, &record).unwrap();
    assert_eq!(end, 4096 + record.len() as u64);
    let e = log.append_at(4000, &common::record_at(4000, 2)).unwrap_err();
    assert!(matches!(e, StoreError::OffsetMismatch { expected, got: 4000 } if expected == end), "{e}");
}

#[test]
fn a_segment_of_the_wrong_size_is_refused_naming_the_file_and_both_sizes() {
    let env = Env::default();
    let dir = store_with_data(&env);
    let path = segment_path(dir.path(), 0);
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(SEGMENT - 1).unwrap();
    let e = env.open(dir.path(), config()).unwrap_err();
    assert!(
        matches!(&e, StoreError::FileSizeMismatch { path: p, expected, actual, .. } if *p == path && *expected == SEGMENT && *actual == SEGMENT - 1),
        "{e}"
    );
    let text = e.to_string();
    assert!(
        text.contains("00000000000000000000") && text.contains("16384") && text.contains("16383"),
        "{text}"
    );
    // Opening with another configured size is the same error, the other way round.
    std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(SEGMENT).unwrap();
    let mut other = config();
    other.mapped_file_size_commit_log = 2 * SEGMENT;
    assert!(
        matches!(env.open(dir.path(), other), Err(StoreError::FileSizeMismatch { expected, actual, .. }) if expected == 2 * SEGMENT && actual == SEGMENT)
    );
}

#[test]
fn a_truncated_checkpoint_is_its_own_error() {
    let env = Env::default();
    let dir = store_with_data(&env);
    let ckpt = dir.path().join("checkpoint");
    std::fs::OpenOptions::new().write(true).open(&ckpt).unwrap().set_len(100).unwrap();
    let e = env.open(dir.path(), config()).unwrap_err();
    assert!(
        matches!(&e, StoreError::CheckpointTruncated { len: 100, expected: 4096, path } if *path == ckpt),
        "{e}"
    );
}

#[test]
fn a_garbage_checkpoint_is_its_own_error() {
    let env = Env::default();
    let dir = store_with_data(&env);
    let ckpt = dir.path().join("checkpoint");
    let garbage: Vec<u8> = (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&ckpt, garbage).unwrap();
    let e = env.open(dir.path(), config()).unwrap_err();
    assert!(matches!(&e, StoreError::CheckpointCorrupt { path, .. } if *path == ckpt), "{e}");
    // A single flipped bit in the logship block is caught by its CRC.
    let dir = store_with_data(&env);
    let ckpt = dir.path().join("checkpoint");
    let mut page = std::fs::read(&ckpt).unwrap();
    page[256 + 20] ^= 0x10;
    std::fs::write(&ckpt, page).unwrap();
    assert!(matches!(env.open(dir.path(), config()), Err(StoreError::CheckpointCorrupt { .. })));
}

#[test]
fn a_second_open_of_the_same_store_is_locked() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let _log = env.open(dir.path(), config()).unwrap();
    assert!(matches!(env.open(dir.path(), config()), Err(StoreError::Locked { .. })));
}

#[test]
fn misnamed_missing_and_stray_files_are_their_own_errors() {
    let env = Env::default();
    let dir = store_with_data(&env);
    // A file that is not at a multiple of the segment size.
    let odd = dir.path().join("commitlog/00000000000000000100");
    std::fs::File::create(&odd).unwrap().set_len(SEGMENT).unwrap();
    assert!(matches!(env.open(dir.path(), config()), Err(StoreError::MisalignedFile { start: 100, .. })));
    std::fs::remove_file(&odd).unwrap();
    // A missing segment between two present ones.
    let far = segment_path(dir.path(), 2 * SEGMENT);
    std::fs::File::create(&far).unwrap().set_len(SEGMENT).unwrap();
    assert!(
        matches!(env.open(dir.path(), config()), Err(StoreError::FileGap { expected, .. }) if expected == SEGMENT)
    );
    std::fs::remove_file(&far).unwrap();
    // A consume-queue file of the wrong size.
    let cq = dir.path().join("consumequeue/T0/0/00000000000000000000");
    std::fs::OpenOptions::new().write(true).open(&cq).unwrap().set_len(7).unwrap();
    assert!(matches!(
        env.open(dir.path(), config()),
        Err(StoreError::FileSizeMismatch { field: "mapped_file_size_consume_queue", actual: 7, .. })
    ));
}

#[test]
fn a_garbage_consume_queue_entry_is_its_own_error() {
    let env = Env::default();
    let dir = store_with_data(&env);
    // Entry 0 of T0:0 with a negative physical offset.
    patch(&dir.path().join("consumequeue/T0/0/00000000000000000000"), 0, &(-5i64).to_be_bytes());
    let e = env.open(dir.path(), config()).unwrap_err();
    assert!(matches!(e, StoreError::ConsumeQueueCorrupt { index: 0, .. }), "{e}");
}

#[test]
fn an_invalid_config_names_the_field_and_value() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config();
    cfg.mapped_file_size_commit_log = 12_345;
    match CommitLog::open(dir.path(), cfg) {
        Err(StoreError::Config(e)) => {
            assert_eq!(e.field, "mapped_file_size_commit_log");
            assert_eq!(e.value, "12345");
        }
        other => panic!("expected a config error, got {other:?}"),
    }
    assert!(!dir.path().join("commitlog").exists(), "nothing was created");
}
