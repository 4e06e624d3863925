//! Peers that trickle, stall or lie about where they are (issue 14): the core's own deadlines.

mod common;

use bytes::Bytes;
use common::*;
use logship_core::classic::*;
use logship_core::*;

const C: ConnId = ConnId(1);

fn closed_for(out: &[MasterOutput], reason: CloseReason) -> bool {
    closes(out).iter().any(|&(c, r)| c == C && r == reason)
}

#[test]
fn a_report_trickled_a_byte_at_a_time_does_not_outlive_housekeeping() {
    // Housekeeping is 20 s; one byte every 10 s never completes a report in time.
    let clock = Clock::new();
    let (mut m, _) = streaming_master(master_config(), &clock, LogBounds { min: 0, max: 0 }, 0);
    let mut closed = false;
    for (i, byte) in report(0).iter().enumerate() {
        let at = clock.at(10_000 * (i as u64 + 1));
        m.handle_timeout(at);
        if closed_for(&drain_master(&mut m).0, CloseReason::HousekeepingTimeout) {
            closed = true;
            break;
        }
        m.handle_input(at, MasterInput::Received { conn: C, data: Bytes::copy_from_slice(&[*byte]) })
            .unwrap();
        let _ = drain_master(&mut m);
    }
    assert!(closed, "a slowloris report kept the connection open past housekeeping");
}

#[test]
fn a_first_report_trickled_a_byte_at_a_time_is_closed() {
    let clock = Clock::new();
    let mut m = Master::new(master_config(), clock.at(0), LogBounds { min: 0, max: 100 }).unwrap();
    m.handle_input(clock.at(0), MasterInput::Accepted { conn: C }).unwrap();
    let mut closed = false;
    for (i, byte) in report(0).iter().enumerate() {
        let at = clock.at(5_000 * (i as u64 + 1));
        m.handle_timeout(at);
        if !closes(&drain_master(&mut m).0).is_empty() {
            closed = true;
            break;
        }
        m.handle_input(at, MasterInput::Received { conn: C, data: Bytes::copy_from_slice(&[*byte]) })
            .unwrap();
        let _ = drain_master(&mut m);
    }
    assert!(closed, "a connection that never completed its first report was kept");
    assert!(m.slaves().next().is_none());
}

#[test]
fn a_master_trickling_a_frame_body_cannot_hold_the_slave() {
    let clock = Clock::new();
    let (mut s, _) = streaming_slave(SlaveConfig::default(), &clock, 1_000);
    let frame = push(1_000, &[7u8; 100]);
    let mut closed = false;
    for (i, byte) in frame.iter().enumerate() {
        let at = clock.at(10_000 * (i as u64 + 1));
        s.handle_timeout(at);
        if drain_slave(&mut s).0.contains(&SlaveOutput::Close(CloseReason::HousekeepingTimeout)) {
            closed = true;
            break;
        }
        s.handle_input(at, SlaveInput::Received(Bytes::copy_from_slice(&[*byte]))).unwrap();
        let _ = drain_slave(&mut s);
    }
    assert!(closed, "a trickled frame body kept the slave connected past housekeeping");
}

#[test]
fn an_empty_slave_refuses_an_absurd_first_offset() {
    let clock = Clock::new();
    let (mut s, _) = streaming_slave(SlaveConfig::default(), &clock, 0);
    s.handle_input(clock.at(1), SlaveInput::Received(push((1 << 62) + 12_345, b"abc"))).unwrap();
    let out = drain_slave(&mut s).0;
    assert!(slave_appends(&out).is_empty(), "adopted: {out:?}");
    let refused = PeerError::FirstOffsetTooLarge { offset: (1 << 62) + 12_345, max: 1 << 60 };
    assert!(out.contains(&SlaveOutput::Close(CloseReason::Peer(refused))), "{out:?}");
    // The bound is configurable for those who need it.
    let config = SlaveConfig { max_first_offset: u64::MAX, ..SlaveConfig::default() };
    let (mut s, _) = streaming_slave(config, &clock, 0);
    s.handle_input(clock.at(1), SlaveInput::Received(push((1 << 62) + 12_345, b"abc"))).unwrap();
    assert_eq!(slave_appends(&drain_slave(&mut s).0).len(), 1);
}

#[test]
fn a_silent_new_connection_is_closed_at_the_first_report_deadline() {
    let clock = Clock::new();
    let config = MasterConfig { first_report_timeout: std::time::Duration::from_secs(3), ..master_config() };
    let mut m = Master::new(config.clone(), clock.at(0), LogBounds { min: 0, max: 100 }).unwrap();
    m.handle_input(clock.at(0), MasterInput::Accepted { conn: C }).unwrap();
    let (_, next) = drain_master(&mut m);
    assert_eq!(next, clock.at(3_000), "the deadline is the next timeout");
    m.handle_timeout(clock.at(2_999));
    assert!(closes(&drain_master(&mut m).0).is_empty());
    m.handle_timeout(clock.at(3_000));
    assert_eq!(closes(&drain_master(&mut m).0), [(C, CloseReason::FirstReportTimeout)]);
    // A connection that reported in time is judged by housekeeping only.
    let (mut m, _) = streaming_master(config, &clock, LogBounds { min: 0, max: 0 }, 0);
    m.handle_timeout(clock.at(19_999));
    assert!(closes(&drain_master(&mut m).0).is_empty());
}

#[test]
fn a_first_report_inside_the_log_waits_for_verification_before_streaming_or_counting() {
    let clock = Clock::new();
    let config = MasterConfig { verify_first_reports: true, ..master_config() };
    let mut m = Master::new(config.clone(), clock.at(0), LogBounds { min: 0, max: 100 }).unwrap();
    m.handle_input(clock.at(0), MasterInput::Accepted { conn: C }).unwrap();
    m.handle_input(clock.at(0), MasterInput::Received { conn: C, data: report(55) }).unwrap();
    let out = drain_master(&mut m).0;
    assert_eq!(events(&out), [MasterEvent::VerifyReport { conn: C, offset: 55 }]);
    assert!(transmits(&out).is_empty());
    assert_eq!(m.replicated(), None, "not counted while unverified");
    m.handle_input(clock.at(1), MasterInput::ReportVerified { conn: C, boundary: false }).unwrap();
    let out = drain_master(&mut m).0;
    assert_eq!(closes(&out), [(C, CloseReason::Peer(PeerError::SlaveDiverged { reported: 55 }))]);
    // The end and 0 need no check; a boundary streams from there.
    let (_, out) = streaming_master(config.clone(), &clock, LogBounds { min: 0, max: 100 }, 100);
    assert!(matches!(events(&out)[0], MasterEvent::SlaveStarted { .. }));
    let mut m = Master::new(config.clone(), clock.at(0), LogBounds { min: 0, max: 100 }).unwrap();
    m.handle_input(clock.at(0), MasterInput::Accepted { conn: C }).unwrap();
    m.handle_input(clock.at(0), MasterInput::Received { conn: C, data: report(50) }).unwrap();
    let _ = drain_master(&mut m);
    m.handle_input(clock.at(1), MasterInput::ReportVerified { conn: C, boundary: true }).unwrap();
    let out = drain_master(&mut m).0;
    assert_eq!(events(&out)[0], MasterEvent::SlaveStarted { conn: C, requested: 50, start: 50 });
    assert_eq!(transmits(&out)[0].2, Some(LogSpan { offset: 50, len: 50 }));
}
