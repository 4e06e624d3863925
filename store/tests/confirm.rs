//! confirmOffset on a slave in controller mode: consume queues index replicated messages only
//! up to the confirm offset, so consumers never read what a new master may still truncate.

mod common;

use common::{Env, T0, config, eventually, message};
use logship_store::{CommitLog, Message, PutStatus, StoreConfig, StoreFields};

fn slave_config() -> StoreConfig {
    let mut c = config();
    c.dispatch_up_to_confirm = true;
    c
}

/// Appends message `i` (queue offset 0 of its own queue: topics T0, T1, T2) as replicated bytes;
/// returns its end.
fn replicate(log: &CommitLog, i: usize) -> u64 {
    let offset = log.max_offset();
    let fields = StoreFields {
        queue_offset: 0,
        physical_offset: offset as i64,
        store_timestamp: T0,
        store_host: config().store_host,
    };
    let bytes = logship_store::codec::encode(&message(i), &fields).unwrap();
    log.append_at(offset, &bytes).unwrap()
}

fn indexed(log: &CommitLog) -> [u64; 3] {
    [log.queue_bounds("T0", 0).1, log.queue_bounds("T1", 1).1, log.queue_bounds("T2", 0).1]
}

#[test]
fn a_slave_indexes_replicated_messages_only_up_to_its_confirm_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), slave_config()).unwrap();
    let ends = [replicate(&log, 0), replicate(&log, 1), replicate(&log, 2)];
    assert_eq!(log.dispatch_pending().unwrap(), 0);
    assert_eq!(indexed(&log), [0, 0, 0], "nothing is confirmed yet");
    assert_eq!(log.set_confirm_offset(ends[0]), ends[0]);
    assert_eq!(log.dispatch_pending().unwrap(), ends[0]);
    assert_eq!(indexed(&log), [1, 0, 0]);
    // Monotonic: a lower confirm offset changes nothing.
    assert_eq!(log.set_confirm_offset(1), ends[0]);
    assert_eq!(log.status().confirm_offset, ends[0]);
    // The reput thread follows the confirm offset by itself, never past the end of the log.
    log.set_confirm_offset(ends[2] + 10_000);
    eventually("the reput thread indexes up to the end", || indexed(&log) == [1, 1, 1]);
    assert_eq!(log.status().dispatched_offset, ends[2]);
}

#[test]
fn the_confirm_offset_is_persisted_in_the_checkpoint_and_bounds_dispatch_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), slave_config()).unwrap();
    let ends = [replicate(&log, 0), replicate(&log, 1), replicate(&log, 2)];
    log.set_confirm_offset(ends[1]);
    eventually("indexed up to the confirm offset", || indexed(&log) == [1, 1, 0]);
    log.checkpoint().unwrap();
    log.abandon();
    // Java's field: confirmPhyOffset, big-endian at byte 32 of the checkpoint.
    let page = std::fs::read(dir.path().join("checkpoint")).unwrap();
    assert_eq!(i64::from_be_bytes(page[32..40].try_into().unwrap()), ends[1] as i64);
    let log = env.open(dir.path(), slave_config()).unwrap();
    assert_eq!(log.max_offset(), ends[2]);
    assert_eq!(log.status().confirm_offset, ends[1]);
    assert_eq!(indexed(&log), [1, 1, 0], "recovery does not index past the confirm offset");
    log.set_confirm_offset(ends[2]);
    eventually("indexed to the end", || indexed(&log) == [1, 1, 1]);
}

#[test]
fn classic_mode_indexes_everything_without_a_confirm_offset() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let end = [replicate(&log, 0), replicate(&log, 1), replicate(&log, 2)][2];
    assert_eq!(log.dispatch_pending().unwrap(), end);
    assert_eq!(indexed(&log), [1, 1, 1]);
}

#[test]
fn a_truncation_lowers_the_confirm_offset_to_the_cut() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), slave_config()).unwrap();
    let ends = [replicate(&log, 0), replicate(&log, 1), replicate(&log, 2)];
    log.set_confirm_offset(ends[2]);
    eventually("indexed", || indexed(&log) == [1, 1, 1]);
    log.truncate_to(ends[0]).unwrap();
    assert_eq!(log.status().confirm_offset, ends[0]);
    assert_eq!(indexed(&log), [1, 0, 0]);
    // The new master's bytes at the cut wait for its confirm offset.
    let end = replicate(&log, 1);
    assert_eq!(log.dispatch_pending().unwrap(), ends[0]);
    log.set_confirm_offset(end);
    assert_eq!(log.dispatch_pending().unwrap(), end);
    assert_eq!(indexed(&log), [1, 1, 0]);
}

#[test]
fn a_put_on_a_confirm_bounded_store_is_its_own_confirmation() {
    // A slave promoted to master: its own puts are indexed at once, and the replicated bytes
    // before them with them.
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), slave_config()).unwrap();
    let end = replicate(&log, 0);
    let r = log.put(Message::new("T1", 1, &b"own"[..]));
    assert_eq!(r.status, PutStatus::PutOk);
    assert_eq!(r.offset, end);
    assert_eq!(indexed(&log), [1, 1, 0]);
    assert_eq!(log.status().confirm_offset, r.end());
}

#[test]
fn a_put_never_raises_the_replication_confirmed_offset_and_it_survives_a_crash_and_a_cut() {
    // A master's own puts are indexed (the confirm offset covers them), but only the HA layer
    // says what is confirmed: a slave never truncates below that, and a master's unacknowledged
    // tail must stay cuttable.
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), slave_config()).unwrap();
    let first = replicate(&log, 0);
    log.set_confirm_offset(first);
    let own = log.put(Message::new("T1", 1, &b"own, never acknowledged"[..]));
    assert_eq!(own.status, PutStatus::PutOk);
    assert_eq!(log.status().confirm_offset, own.end(), "its own put is indexed");
    assert_eq!(log.confirmed_offset(), first, "but not confirmed");
    log.checkpoint().unwrap();
    log.abandon();
    let log = env.open(dir.path(), slave_config()).unwrap();
    assert_eq!(log.confirmed_offset(), first, "kept by the checkpoint");
    let third = replicate(&log, 2);
    log.set_confirm_offset(third);
    assert_eq!(log.confirmed_offset(), third);
    log.truncate_to(first).unwrap();
    assert_eq!(log.confirmed_offset(), first, "a truncation lowers it to the cut");
    // A value past the end is never recorded as confirmed.
    log.set_confirm_offset(first + 1_000_000);
    assert_eq!(log.confirmed_offset(), first);
}
