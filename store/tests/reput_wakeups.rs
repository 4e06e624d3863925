//! The reput thread polls while replicated bytes keep arriving, so a slave's appends do not pay
//! a thread wake-up each (one futex call per append on the path from receiving bytes to acking).

mod common;

use common::{Env, T0, config, message};
use logship_store::{CommitLog, StoreFields};

fn replicate(log: &CommitLog, i: usize) {
    let offset = log.max_offset();
    let fields = StoreFields {
        queue_offset: i as i64,
        physical_offset: offset as i64,
        store_timestamp: T0,
        store_host: config().store_host,
    };
    let bytes = logship_store::codec::encode(&message(0), &fields).unwrap();
    log.append_at(offset, &bytes).unwrap();
}

#[test]
fn appends_to_a_freshly_opened_store_do_not_wake_the_polling_reput_thread_each_time() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    for i in 0..50 {
        replicate(&log, i);
    }
    // At most one: the thread may have gone idle once (a second without bytes) on a slow machine.
    let wakeups = log.status().reput_wakeups;
    assert!(wakeups <= 1, "{wakeups} wake-ups of the reput thread for 50 appends in a row");
}
