//! Runtime truncation of a divergent tail (a slave in controller mode), crash-safe at every step
//! (RocketMQ #10666: Java only moves in-memory positions, so recovery can bring the tail back).

mod common;

use common::truncation::{build, check_after_crash, cuts, entry, put_all};
use common::{Env, config, message, record_at};
use logship_store::{EpochFile, LogRead, LogSpan, Message, PutStatus, StoreError, TruncateStep};

#[test]
fn a_truncation_killed_after_any_step_never_brings_the_tail_back() {
    let probe = tempfile::tempdir().unwrap();
    let (puts, cut) = build(probe.path(), &Env::default());
    for cut in cuts(&puts, cut) {
        for step in TruncateStep::ALL {
            let dir = tempfile::tempdir().unwrap();
            let env = Env::default();
            let (puts, _) = build(dir.path(), &env);
            let log = env.open(dir.path(), config()).unwrap();
            log.truncate_to_crashing_after(cut, step).unwrap();
            // kill -9: no flush, no checkpoint, the abort marker stays.
            log.abandon();
            check_after_crash(dir.path(), &env, &puts, cut);
        }
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
    assert_eq!(report.dropped_epochs, vec![entry(3, report.dropped_epochs[0].start_offset)]);
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
    log.append_epoch(entry(4, cut)).unwrap();
    log.shutdown().unwrap();
    drop(log);
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.max_offset(), cut + bytes.len() as u64);
    assert_eq!(log.epochs().last(), Some(&entry(4, cut)));
}

#[test]
fn the_commit_log_is_an_epoch_log_through_log_read() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let (puts, cut) = build(dir.path(), &env);
    let log = env.open(dir.path(), config()).unwrap();
    let epochs = log.epoch_log().expect("the store keeps epochs: controller mode can run over it");
    assert_eq!(epochs.epochs(), log.epochs());
    assert_eq!(epochs.epochs().len(), 3);
    // The confirm offset: raised, never lowered by a set, lowered by a cut.
    let end = log.max_offset();
    assert_eq!(epochs.set_confirm_offset(end), end);
    assert_eq!(epochs.set_confirm_offset(cut - 1), end);
    assert_eq!(epochs.confirm_offset(), end);
    epochs.truncate_to(cut).unwrap();
    assert_eq!(log.max_offset(), cut);
    assert_eq!(epochs.confirm_offset(), cut);
    assert_eq!(epochs.epochs(), common::truncation::epochs_of(&puts)[..2].to_vec());
    // Off a record boundary: refused, typed, nothing cut.
    assert!(matches!(epochs.truncate_to(cut - 1), Err(StoreError::NotARecordBoundary { .. })));
    assert_eq!(log.max_offset(), cut);
    epochs.append_epoch(entry(4, cut)).unwrap();
    assert!(matches!(epochs.append_epoch(entry(4, cut)), Ok(())), "the same entry again is a no-op");
    assert!(matches!(epochs.append_epoch(entry(3, cut)), Err(StoreError::EpochRefused { epoch: 3, .. })));
    log.shutdown().unwrap();
    drop(log);
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.epoch_log().unwrap().epochs().last(), Some(&entry(4, cut)));
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
    log.append_epoch(entry(2, 0)).unwrap();

    // The same entry again is a no-op (a slave sees its epoch in every frame).
    log.append_epoch(entry(2, 0)).unwrap();
    put_all(&log, 0..3);
    let end = log.max_offset();
    assert!(matches!(log.append_epoch(entry(1, end)), Err(StoreError::EpochRefused { .. })));
    assert!(matches!(log.append_epoch(entry(2, end)), Err(StoreError::EpochRefused { .. })));
    assert!(matches!(log.append_epoch(entry(3, end + 1)), Err(StoreError::EpochRefused { .. })));
    // An epoch with no data (it starts where the last one does) is kept, unlike Java's.
    log.append_epoch(entry(3, end)).unwrap();
    log.append_epoch(entry(4, end)).unwrap();
    assert_eq!(log.epochs().len(), 3);
    log.abandon();
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.epochs(), vec![entry(2, 0), entry(3, end), entry(4, end)]);
}

#[test]
fn recovery_drops_epochs_that_start_past_the_recovered_end() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    log.append_epoch(entry(1, 0)).unwrap();
    put_all(&log, 0..3);
    let end = log.max_offset();
    log.shutdown().unwrap();
    drop(log);
    // An epoch file that claims an epoch beyond the log (its bytes were lost in a crash).
    EpochFile::in_root(dir.path()).write(&[entry(1, 0), entry(2, end + 500)]).unwrap();
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.epochs(), vec![entry(1, 0)]);
    assert_eq!(EpochFile::in_root(dir.path()).read().unwrap(), vec![entry(1, 0)]);
}

#[test]
fn a_corrupt_epoch_file_and_copy_stop_the_open_with_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    log.append_epoch(entry(1, 0)).unwrap();
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

#[test]
fn a_new_slave_takes_its_first_epoch_before_its_first_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    // The master starts this empty slave at the start of its last segment, inside epoch 5.
    let start = 2 * common::SEGMENT;
    log.append_epoch(entry(5, start - 100)).unwrap();
    let bytes = record_at(start, 1);
    log.append_at(start, &bytes).unwrap();
    // Once the log holds bytes, an epoch must start within it.
    let end = start + bytes.len() as u64;
    assert!(matches!(log.append_epoch(entry(6, end + 1)), Err(StoreError::EpochRefused { .. })));
    log.append_epoch(entry(6, end)).unwrap();
    log.abandon();
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.epochs(), vec![entry(5, start - 100), entry(6, end)]);
}

#[test]
fn an_unreadable_truncation_record_stops_the_open_with_a_typed_error() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    build(dir.path(), &env);
    std::fs::write(dir.path().join("truncating"), "logship truncate-to 12x\n").unwrap();
    match env.open(dir.path(), config()) {
        Err(StoreError::TruncationIntentCorrupt { path, reason }) => {
            assert_eq!(path, dir.path().join("truncating"));
            assert!(reason.contains("12x"), "{reason}");
        }
        other => panic!("expected TruncationIntentCorrupt, got {other:?}"),
    }
}

#[test]
fn a_truncation_drops_an_incomplete_replicated_record_past_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    let first = record_at(0, 1);
    log.append_at(0, &first).unwrap();
    let end = first.len() as u64;
    let second = record_at(end, 2);
    // Half of the next record: accepted, not published.
    assert_eq!(log.append_at(end, &second[..10]).unwrap(), end);
    log.truncate_to(end).unwrap();
    let segment = std::fs::read(common::segment_path(dir.path(), 0)).unwrap();
    assert!(segment[end as usize..].iter().all(|&b| b == 0), "the half record is gone from disk");
    // The master resends from the boundary, not from after the half record.
    assert_eq!(log.append_at(end, &second).unwrap(), end + second.len() as u64);
    assert_eq!(log.read_message(end).unwrap().body, message(2).body);
}

#[test]
fn a_cut_at_the_end_drops_only_the_epochs_that_hold_no_data() {
    // What an AutoSwitch slave does with epochs its new master never had and that wrote nothing.
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    let epochs = log.epoch_log().unwrap();
    epochs.append_epoch(entry(1, 0)).unwrap();
    epochs.truncate_to(0).unwrap();
    assert_eq!(epochs.epochs(), vec![], "an empty store cut at 0 loses its empty epoch");
    put_all(&log, 0..5);
    let end = log.max_offset();
    epochs.append_epoch(entry(2, 0)).unwrap();
    epochs.append_epoch(entry(3, end)).unwrap();
    epochs.truncate_to(end).unwrap();
    assert_eq!((log.max_offset(), epochs.epochs()), (end, vec![entry(2, 0)]));
    log.shutdown().unwrap();
    drop(log);
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!((log.max_offset(), log.epochs()), (end, vec![entry(2, 0)]));
}

/// A controller-mode store configuration.
fn controller_mode() -> logship_store::StoreConfig {
    let mut c = config();
    c.require_epoch_file = true;
    c
}

#[test]
fn a_controller_mode_store_holding_data_without_its_epoch_files_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), controller_mode()).unwrap();
    log.append_epoch(entry(1, 0)).unwrap();
    put_all(&log, 0..3);
    let end = log.max_offset();
    log.shutdown().unwrap();
    drop(log);
    let file = EpochFile::in_root(dir.path());
    std::fs::remove_file(file.path()).unwrap();
    std::fs::remove_file(file.backup_path()).unwrap();
    for _ in 0..2 {
        match env.open(dir.path(), controller_mode()) {
            Err(e @ StoreError::EpochFileMissing { .. }) => {
                let text = e.to_string();
                let main = file.path().display().to_string();
                let backup = file.backup_path().display().to_string();
                assert!(text.contains(&main) && text.contains(&backup), "names both files: {text}");
                assert!(text.contains("refetch everything from the master"), "{text}");
                assert!(text.contains(&format!("adoptLogWithoutEpochs={end}")), "{text}");
            }
            other => panic!("expected EpochFileMissing, got {other:?}"),
        }
        assert!(!file.exists(), "a refused open writes no epoch file");
    }
    // The classic mode has no epochs to lose.
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.epochs(), vec![]);
}

#[test]
fn a_log_without_epochs_is_adopted_only_at_the_end_the_operator_names() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    put_all(&log, 0..3);
    let end = log.max_offset();
    log.shutdown().unwrap();
    drop(log);
    let mut wrong = controller_mode();
    wrong.adopt_log_without_epochs = Some(end - 1);
    assert!(matches!(env.open(dir.path(), wrong), Err(StoreError::EpochFileMissing { .. })));
    let mut adopt = controller_mode();
    adopt.adopt_log_without_epochs = Some(end);
    let log = env.open(dir.path(), adopt.clone()).unwrap();
    assert_eq!(log.epochs(), vec![]);
    assert!(EpochFile::in_root(dir.path()).exists(), "the empty list is written at once");
    log.shutdown().unwrap();
    drop(log);
    // From now on the file is there; deleting it again is noticed, whatever the key says.
    let log = env.open(dir.path(), controller_mode()).unwrap();
    put_all(&log, 3..5);
    log.shutdown().unwrap();
    drop(log);
    let file = EpochFile::in_root(dir.path());
    std::fs::remove_file(file.path()).unwrap();
    std::fs::remove_file(file.backup_path()).unwrap();
    assert!(matches!(env.open(dir.path(), adopt), Err(StoreError::EpochFileMissing { .. })));
}

#[test]
fn an_empty_controller_mode_store_opens_and_writes_an_empty_epoch_file() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), controller_mode()).unwrap();
    assert_eq!(log.max_offset(), 0);
    assert_eq!(EpochFile::in_root(dir.path()).read().unwrap(), vec![]);
    assert!(EpochFile::in_root(dir.path()).exists());
}
