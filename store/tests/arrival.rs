//! Arrival notices (the long-polling hook) and the delivery-time tag codes of
//! `SCHEDULE_TOPIC_XXXX`, on the put path and on the dispatch of replicated bytes.

mod common;

use std::sync::{Arc, Mutex};

use common::{Env, T0, config, eventually};
use logship_store::codec::{PROPERTY_DELAY_TIME_LEVEL, SCHEDULE_TOPIC, tags_code};
use logship_store::{Arrival, ArrivalListener, CommitLog, LogSpan, Message, PutStatus};

type Seen = Arc<Mutex<Vec<(String, i32, u64, i64, i64, (u64, u64))>>>;

/// A listener that records every arrival and the queue bounds it could read at that moment.
fn recorder(log: &Arc<CommitLog>) -> (Seen, Arc<dyn ArrivalListener>) {
    let seen: Seen = Arc::default();
    let (s, weak) = (seen.clone(), Arc::downgrade(log));
    let listener = move |a: &Arrival<'_>| {
        let bounds = weak.upgrade().map_or((0, 0), |l| l.queue_bounds(a.topic, a.queue_id));
        s.lock().unwrap().push((
            a.topic.to_string(),
            a.queue_id,
            a.queue_offset,
            a.tags_code,
            a.store_timestamp,
            bounds,
        ));
    };
    (seen, Arc::new(listener))
}

#[test]
fn a_put_reports_its_entry_after_the_queue_shows_it() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = Arc::new(env.open(dir.path(), config()).unwrap());
    assert_eq!(log.put(Message::new("T", 0, &b"before"[..])).status, PutStatus::PutOk);
    let (seen, listener) = recorder(&log);
    log.set_arrival_listener(Some(listener));
    for i in 0..3 {
        let m = Message::new("T", 1, vec![i as u8; 10]).with_tags("TagA");
        assert_eq!(log.put(m).status, PutStatus::PutOk);
    }
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 3, "only puts after the listener was set: {seen:?}");
    for (i, (topic, q, off, tags, ts, bounds)) in seen.into_iter().enumerate() {
        assert_eq!((topic.as_str(), q, off, tags, ts), ("T", 1, i as u64, tags_code("TagA"), T0));
        assert_eq!(bounds, (0, i as u64 + 1), "the entry is readable when the listener runs");
    }
    log.set_arrival_listener(None);
    assert_eq!(log.put(Message::new("T", 1, &b"after"[..])).status, PutStatus::PutOk);
}

#[test]
fn replicated_messages_are_reported_when_the_slave_indexes_them() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let master = env.open(mdir.path(), config()).unwrap();
    for i in 0..5 {
        let m = Message::new("R", i % 2, vec![7; 30]).with_tags(format!("t{i}"));
        assert_eq!(master.put(m).status, PutStatus::PutOk);
    }
    let slave = Arc::new(env.open(sdir.path(), config()).unwrap());
    let (seen, listener) = recorder(&slave);
    slave.set_arrival_listener(Some(listener));
    let max = master.bounds().max;
    let bytes = master.read(LogSpan { offset: 0, len: max as u32 }).unwrap();
    slave.append_at(0, &bytes).unwrap();
    eventually("the reput thread indexes the replicated bytes", || seen.lock().unwrap().len() == 5);
    let seen = seen.lock().unwrap().clone();
    let q0: Vec<u64> = seen.iter().filter(|s| s.1 == 0).map(|s| s.2).collect();
    let q1: Vec<u64> = seen.iter().filter(|s| s.1 == 1).map(|s| s.2).collect();
    assert_eq!((q0, q1), (vec![0, 1, 2], vec![0, 1]));
    assert_eq!(seen[3].3, tags_code("t3"));
}

#[test]
fn schedule_topic_entries_are_indexed_by_delivery_time_on_master_and_slave() {
    let (mdir, sdir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let env = Env::default();
    let mut cfg = config();
    cfg.schedule_delays_ms = vec![1_000, 5_000, 10_000];
    let master = env.open(mdir.path(), cfg.clone()).unwrap();
    let delayed = |level: &str| {
        Message::new(SCHEDULE_TOPIC, 2, &b"x"[..])
            .with_tags("TagA")
            .with_property(PROPERTY_DELAY_TIME_LEVEL, level)
    };
    // level 3 → +10 s; 99 is clamped to the highest (3); 0 and a non-number keep the tag hash.
    for level in ["3", "99", "0", "x"] {
        assert_eq!(master.put(delayed(level)).status, PutStatus::PutOk);
    }
    // Outside the schedule topic a DELAY property changes nothing.
    let other =
        Message::new("T", 0, &b"y"[..]).with_tags("TagA").with_property(PROPERTY_DELAY_TIME_LEVEL, "3");
    assert_eq!(master.put(other).status, PutStatus::PutOk);
    let expected = [T0 + 10_000, T0 + 10_000, tags_code("TagA"), tags_code("TagA")];
    let codes = |log: &CommitLog| -> Vec<i64> {
        log.read_queue(SCHEDULE_TOPIC, 2, 0, 10).unwrap().iter().map(|e| e.tags_code).collect()
    };
    assert_eq!(codes(&master), expected);
    assert_eq!(master.read_queue("T", 0, 0, 1).unwrap()[0].tags_code, tags_code("TagA"));

    let slave = env.open(sdir.path(), cfg).unwrap();
    let max = master.bounds().max;
    slave.append_at(0, &master.read(LogSpan { offset: 0, len: max as u32 }).unwrap()).unwrap();
    slave.dispatch_pending().unwrap();
    assert_eq!(codes(&slave), expected, "the slave indexes as the master did");
    drop(master);
    // A rebuild from the log (recovery) gives the same codes.
    let mut rebuild = config();
    rebuild.schedule_delays_ms = vec![1_000, 5_000, 10_000];
    rebuild.recovery.rebuild_consume_queues = true;
    let reopened = env.open(mdir.path(), rebuild).unwrap();
    assert_eq!(codes(&reopened), expected);
}
