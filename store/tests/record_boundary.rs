//! `is_record_boundary`: what a master checks a slave's first report against (issue 15 item 4).

mod common;

use common::*;
use logship_store::CommitLog;

#[test]
fn record_starts_are_boundaries_and_offsets_inside_records_are_not() {
    let dir = tempfile::tempdir().unwrap();
    let log = CommitLog::open(dir.path(), config()).unwrap();
    let mut starts = Vec::new();
    // Enough messages to roll into a second segment (BLANK padding at the end of the first).
    for i in 0..120 {
        let r = log.put(message(i));
        starts.push((r.offset, r.wrote_bytes));
    }
    assert!(log.max_offset() > SEGMENT, "crossed a segment");
    for &(offset, len) in &starts {
        assert!(log.is_record_boundary(offset).unwrap(), "record start {offset}");
        for inside in [offset + 1, offset + 4, offset + u64::from(len) - 1] {
            assert!(!log.is_record_boundary(inside).unwrap(), "inside the record at {offset}: {inside}");
        }
    }
    assert!(log.is_record_boundary(SEGMENT).unwrap(), "a segment start");
    assert!(log.is_record_boundary(log.max_offset()).unwrap(), "the end");
    assert!(log.is_record_boundary(log.max_offset() + 1).is_err(), "beyond the end is an error");
}
