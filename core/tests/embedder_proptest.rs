//! An embedder's own property test, written only against `logship_core::testing` (the
//! example `docs/testing.md` walks through): under any schedule of puts, disconnects,
//! partitions and time, the slave converges on the master's log once the network heals; every
//! generated frame and report decodes to what was encoded.

use std::time::Duration;

use bytes::Bytes;
use logship_core::classic::frame::{FrameError, PUSH_HEADER_LEN, PushDecoder, ReportDecoder};
use logship_core::testing::{Pair, Step, frames, reports, schedules};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn the_slave_converges_on_the_masters_log_under_any_fault_schedule(schedule in schedules(40)) {
        let mut pair = Pair::new(Default::default(), Default::default()).unwrap();
        pair.run(&schedule).unwrap();
        // `Pair` checks after every output that the slave holds a prefix of the master's log.
        prop_assert!(pair.converge(Duration::from_secs(120)).unwrap(), "schedule {schedule:?}");
        prop_assert_eq!(pair.slave_log(), pair.master_log());
    }

    #[test]
    fn generated_frames_and_reports_decode_to_what_was_encoded(frame in frames(), report in reports()) {
        let mut decoder = PushDecoder::new(1 << 20);
        decoder.extend(Bytes::from(frame.clone()));
        let push = decoder.decode().unwrap().expect("a whole frame");
        prop_assert_eq!(push.offset.to_be_bytes(), <[u8; 8]>::try_from(&frame[..8]).unwrap());
        prop_assert_eq!(&push.body[..], &frame[PUSH_HEADER_LEN..]);
        let mut reports = ReportDecoder::new();
        let mut data = &report[..];
        let offset = u64::from_be_bytes(report);
        match reports.decode(&mut data).expect("8 bytes are a whole report") {
            Ok(decoded) => prop_assert_eq!(decoded, offset),
            Err(FrameError::OffsetOutOfRange { offset: refused }) => {
                prop_assert_eq!(refused, offset);
                prop_assert!(offset > i64::MAX as u64, "only offsets beyond Java's long are refused");
            }
            Err(other) => prop_assert!(false, "unexpected {}", other),
        }
    }
}

#[test]
fn a_partition_holds_the_slave_back_until_it_heals() {
    let mut pair = Pair::new(Default::default(), Default::default()).unwrap();
    pair.run(&[Step::Append(vec![1; 64]), Step::Partition, Step::Append(vec![2; 64])]).unwrap();
    pair.run(&[Step::Advance(Duration::from_secs(30))]).unwrap();
    assert_eq!(pair.slave_log().len(), 64, "no link, no bytes");
    assert!(pair.converge(Duration::from_secs(60)).unwrap());
    assert_eq!(pair.slave_log().len(), 128);
}
