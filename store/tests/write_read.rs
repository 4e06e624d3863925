//! The master write path (`put`) and the read paths.

mod common;

use std::sync::Arc;

use common::{Env, SEGMENT, T0, config, message, segment_path};
use logship_store::codec::{self, BLANK_MAGIC_CODE, StoreFields};
use logship_store::{LogRead, LogSpan, Message, MessageLog, PutStatus, StoreError};

#[test]
fn put_assigns_physical_and_per_queue_offsets_and_the_offset_msg_id() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let a = log.put(Message::new("A", 0, &b"one"[..]));
    let b = log.put(Message::new("A", 1, &b"two"[..]));
    let c = log.put(Message::new("A", 0, &b"three"[..]));
    let d = log.put(Message::new("B", 0, &b"four"[..]));
    for r in [&a, &b, &c, &d] {
        assert_eq!(r.status, PutStatus::PutOk);
    }
    assert_eq!((a.offset, b.offset, c.offset, d.offset), (0, a.end(), b.end(), c.end()));
    assert_eq!((a.queue_offset, b.queue_offset, c.queue_offset, d.queue_offset), (0, 0, 1, 0));
    assert_eq!(c.msg_id, codec::offset_msg_id("127.0.0.1:10911".parse().unwrap(), c.offset));
    assert_eq!(log.bounds().max, d.end());

    let m = log.read_message(c.offset).unwrap();
    assert_eq!((m.topic.as_str(), m.queue_id, m.queue_offset, &m.body[..]), ("A", 0, 1, &b"three"[..]));
    assert_eq!((m.physical_offset as u64, m.store_timestamp), (c.offset, T0));
    assert_eq!(m.msg_id(), c.msg_id);
}

#[test]
fn stored_bytes_are_the_codec_encoding() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let msg = message(7);
    let r = log.put(msg.clone());
    let want = codec::encode(
        &msg,
        &StoreFields {
            queue_offset: 0,
            physical_offset: 0,
            store_timestamp: T0,
            store_host: log.config().store_host,
        },
    )
    .unwrap();
    assert_eq!(log.read(LogSpan { offset: r.offset, len: r.wrote_bytes }).unwrap(), want);
}

#[test]
fn refusals_are_not_stored() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let big = log.put(Message::new("A", 0, vec![0; 5000]));
    assert_eq!(big.status, PutStatus::MessageIllegal);
    let props = log.put(Message::new("A", 0, &b""[..]).with_property("k", "v".repeat(33_000)));
    assert_eq!(props.status, PutStatus::PropertiesSizeExceeded);
    let topic = log.put(Message::new("a/b", 0, &b""[..]));
    assert_eq!(topic.status, PutStatus::MessageIllegal);
    assert_eq!(log.bounds().max, 0, "nothing was written");
}

#[test]
fn a_message_that_does_not_fit_pads_the_segment_with_blank_and_starts_the_next() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    let mut results = Vec::new();
    while log.bounds().max < SEGMENT + 100 {
        let r = log.put(Message::new("A", 0, vec![7; 1000]));
        assert_eq!(r.status, PutStatus::PutOk);
        results.push(r);
    }
    let first_next = results.iter().position(|r| r.offset >= SEGMENT).unwrap();
    let last_in_first = &results[first_next - 1];
    assert_eq!(results[first_next].offset, SEGMENT, "the message starts the next segment");
    // The BLANK record sits right after the last message of the first segment.
    let blank_at = last_in_first.end();
    let blank = log.read(LogSpan { offset: blank_at, len: 8 }).unwrap();
    assert_eq!(&blank[..4], &((SEGMENT - blank_at) as i32).to_be_bytes());
    assert_eq!(&blank[4..], &BLANK_MAGIC_CODE.to_be_bytes());
    assert!(SEGMENT - blank_at >= 8 && SEGMENT - blank_at < 1000 + 108 + 8);
    assert!(matches!(log.read_message(blank_at), Err(StoreError::NotAMessage { .. })));
    // Queue offsets continue across segments.
    assert_eq!(results[first_next].queue_offset, first_next as u64);
    assert!(segment_path(dir.path(), SEGMENT).exists());
}

#[test]
fn reads_are_zero_copy_spans_within_one_segment() {
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    while log.bounds().max < SEGMENT + 10 {
        assert_eq!(log.put(Message::new("A", 0, vec![1; 500])).status, PutStatus::PutOk);
    }
    let max = log.bounds().max;
    let a = log.read(LogSpan { offset: 100, len: 50 }).unwrap();
    let b = log.read(LogSpan { offset: 100, len: 50 }).unwrap();
    assert_eq!(a.as_ptr(), b.as_ptr(), "both spans point into the same mapping");
    assert_eq!(log.read(LogSpan { offset: SEGMENT - 4, len: 4 }).unwrap().len(), 4);
    assert!(matches!(
        log.read(LogSpan { offset: SEGMENT - 4, len: 8 }),
        Err(StoreError::CrossesSegment { segment_end, .. }) if segment_end == SEGMENT
    ));
    assert!(matches!(log.read(LogSpan { offset: max - 1, len: 2 }), Err(StoreError::OutOfRange { .. })));
    assert!(matches!(log.read_message(max), Err(StoreError::OutOfRange { .. })));
}

#[test]
fn concurrent_puts_and_reads_see_consistent_messages() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config();
    cfg.mapped_file_size_commit_log = 64 * 1024;
    let log = Arc::new(Env::default().open(dir.path(), cfg).unwrap());
    let writers: Vec<_> = (0..4)
        .map(|t| {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                (0..200)
                    .map(|i| {
                        let r = log.put(Message::new("C", t, format!("{t}-{i}").into_bytes()));
                        assert_eq!(r.status, PutStatus::PutOk);
                        r
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let reader = {
        let log = Arc::clone(&log);
        std::thread::spawn(move || {
            let mut offset = 0;
            let mut seen = 0;
            while seen < 800 {
                if offset >= log.bounds().max {
                    std::thread::yield_now();
                    continue;
                }
                match log.read_message(offset) {
                    Ok(m) => {
                        offset += u64::from(m.total_size);
                        seen += 1;
                    }
                    Err(StoreError::NotAMessage { .. }) => offset = (offset / (64 * 1024) + 1) * 64 * 1024,
                    Err(e) => panic!("reader saw {e}"),
                }
            }
        })
    };
    let results: Vec<_> = writers.into_iter().flat_map(|w| w.join().unwrap()).collect();
    reader.join().unwrap();
    for t in 0..4 {
        let mut q: Vec<_> =
            results.iter().filter(|r| log.read_message(r.offset).unwrap().queue_id == t).collect();
        q.sort_by_key(|r| r.queue_offset);
        assert_eq!(q.iter().map(|r| r.queue_offset).collect::<Vec<_>>(), (0..200).collect::<Vec<_>>());
        assert!(q.windows(2).all(|w| w[0].offset < w[1].offset), "queue order follows log order");
    }
    let entries = log.read_queue("C", 2, 0, 1000).unwrap();
    assert_eq!(entries.len(), 200);
}

#[test]
fn the_store_implements_the_core_traits_and_is_send_sync() {
    fn assert_traits<L: LogRead + logship_store::LogWrite + MessageLog + Send + Sync>() {}
    assert_traits::<logship_store::CommitLog>();
    fn assert_send<T: Send + 'static>(_: &T) {}
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    assert_send(&MessageLog::durable(&log, 0));
}

#[test]
fn the_next_segment_is_preallocated_in_the_background_and_then_used() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let log = Env::default().open(dir.path(), config()).unwrap();
    assert_eq!(log.put(message(0)).status, PutStatus::PutOk);
    let next = segment_path(dir.path(), SEGMENT);
    common::eventually("the preallocated segment", || next.exists());
    assert_eq!(log.status().segments, 1, "preallocated, not yet part of the log");
    assert_eq!(std::fs::metadata(&next).unwrap().len(), SEGMENT);
    let inode = std::fs::metadata(&next).unwrap().ino();
    while log.bounds().max < SEGMENT {
        assert_eq!(log.put(message(1)).status, PutStatus::PutOk);
    }
    assert_eq!(log.status().segments, 2);
    assert_eq!(std::fs::metadata(&next).unwrap().ino(), inode, "the roll took the preallocated file");
    common::eventually("the following segment", || segment_path(dir.path(), 2 * SEGMENT).exists());
    // A clean shutdown removes the unused one.
    log.shutdown().unwrap();
    assert!(!segment_path(dir.path(), 2 * SEGMENT).exists());
}

#[test]
fn a_live_span_keeps_the_store_locked_until_it_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::default();
    let log = env.open(dir.path(), config()).unwrap();
    let r = log.put(message(0));
    let span = log.read(LogSpan { offset: r.offset, len: r.wrote_bytes }).unwrap();
    log.abandon();
    // Reopening would recover (and might rewrite) bytes the span still shows.
    assert!(matches!(env.open(dir.path(), config()), Err(StoreError::Locked { .. })));
    let copy = span.to_vec();
    drop(span);
    let log = env.open(dir.path(), config()).unwrap();
    assert_eq!(log.read(LogSpan { offset: r.offset, len: r.wrote_bytes }).unwrap(), copy);
}

#[test]
fn a_commit_log_outside_the_root_is_written_there_and_reopened() {
    let (root, elsewhere) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let segments = elsewhere.path().join("ssd-commitlog");
    let mut c = config();
    c.store_path_commit_log = Some(segments.clone());
    let log = Env::default().open(root.path(), c.clone()).unwrap();
    let put = log.put(message(1));
    assert_eq!(put.status, PutStatus::PutOk);
    log.shutdown().unwrap();
    drop(log);
    assert!(segments.join(format!("{:020}", 0)).is_file(), "the segment lives in storePathCommitLog");
    assert!(!root.path().join("commitlog").join(format!("{:020}", 0)).exists());
    let log = Env::default().open(root.path(), c).unwrap();
    assert_eq!(log.bounds().max, put.end());
    assert_eq!(&log.read_message(put.offset).unwrap().body[..], &message(1).body[..]);
}
