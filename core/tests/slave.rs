//! Slave connection rules (protocol notes §2.3, §2.7).

mod common;

use bytes::Bytes;
use common::*;
use logship_core::classic::*;
use logship_core::*;

fn flushed_config() -> SlaveConfig {
    SlaveConfig { ack_on: AckOn::Flushed, ..SlaveConfig::default() }
}

#[test]
fn slave_connects_at_once_and_sends_its_first_report_on_connect() {
    let clock = Clock::new();
    let (s, out) = streaming_slave(SlaveConfig::default(), &clock, 4_096);
    assert_eq!(slave_outputs_reports(&out), [4_096], "no 5 s wait for the first report");
    assert_eq!(s.state(), SlaveState::Streaming);
    assert!(out.contains(&SlaveOutput::Event(SlaveEvent::FirstReport { offset: 4_096 })));
}

#[test]
fn empty_slave_adopts_the_masters_start_offset() {
    let clock = Clock::new();
    let (mut s, out) = streaming_slave(SlaveConfig::default(), &clock, 0);
    assert_eq!(slave_outputs_reports(&out), [0]);
    s.handle_input(clock.at(1), SlaveInput::Received(push(0x4000_0000, b"abc"))).unwrap();
    let out = drain_slave(&mut s).0;
    assert_eq!(slave_appends(&out), [(0x4000_0000, Bytes::from_static(b"abc"))]);
    // From then on the slave's end is binding.
    s.handle_input(clock.at(1), SlaveInput::Appended { end: 0x4000_0003 }).unwrap();
    let out = drain_slave(&mut s).0;
    assert_eq!(slave_outputs_reports(&out), [0x4000_0003]);
    s.handle_input(clock.at(2), SlaveInput::Received(push(0x4000_0004, b"x"))).unwrap();
    let out = drain_slave(&mut s).0;
    assert!(out.contains(&SlaveOutput::Close(CloseReason::Peer(PeerError::OffsetMismatch {
        expected: 0x4000_0003,
        got: 0x4000_0004
    }))));
}

#[test]
fn offset_mismatch_closes_appends_nothing_and_reconnects_reporting_its_end() {
    let clock = Clock::new();
    let (mut s, _) = streaming_slave(SlaveConfig::default(), &clock, 1_000);
    // Only the header is in: the check happens before the body arrives.
    let frame = push(1_032, &[7; 64]);
    s.handle_input(clock.at(1), SlaveInput::Received(frame.slice(..12))).unwrap();
    let out = drain_slave(&mut s).0;
    let error = PeerError::OffsetMismatch { expected: 1_000, got: 1_032 };
    assert_eq!(
        out,
        [
            SlaveOutput::Event(SlaveEvent::PeerError(error)),
            SlaveOutput::Close(CloseReason::Peer(error)),
            SlaveOutput::Event(SlaveEvent::Disconnected { reason: Some(CloseReason::Peer(error)) }),
        ]
    );
    // The rest of the frame is dropped, not appended.
    s.handle_input(clock.at(2), SlaveInput::Received(frame.slice(12..))).unwrap();
    assert!(slave_appends(&drain_slave(&mut s).0).is_empty());
    // Back-off, then reconnect and re-report the unchanged end.
    s.handle_timeout(clock.at(5_000));
    assert!(drain_slave(&mut s).0.is_empty());
    s.handle_timeout(clock.at(5_001));
    assert_eq!(drain_slave(&mut s).0, [SlaveOutput::Connect]);
    s.handle_input(clock.at(5_002), SlaveInput::Connected).unwrap();
    assert_eq!(slave_outputs_reports(&drain_slave(&mut s).0), [1_000]);
}

#[test]
fn frames_cut_at_every_byte_position_store_the_same_bytes() {
    let mut wire = push(500, b"hello").to_vec();
    wire.extend_from_slice(&push(505, b""));
    wire.extend_from_slice(&push(505, b"world!"));
    for a in 0..wire.len() {
        for b in a..=wire.len() {
            let clock = Clock::new();
            let (mut s, _) = streaming_slave(SlaveConfig::default(), &clock, 500);
            let mut stored = Vec::new();
            for part in [&wire[..a], &wire[a..b], &wire[b..]] {
                s.handle_input(clock.at(1), SlaveInput::Received(Bytes::copy_from_slice(part))).unwrap();
                for (offset, data) in slave_appends(&drain_slave(&mut s).0) {
                    assert_eq!(offset, 500 + stored.len() as u64);
                    stored.extend_from_slice(&data);
                    s.handle_input(clock.at(1), SlaveInput::Appended { end: 500 + stored.len() as u64 })
                        .unwrap();
                }
            }
            assert_eq!(stored, b"helloworld!", "cuts at {a} and {b}");
        }
    }
}

#[test]
fn slave_tolerates_a_heartbeat_only_stream_indefinitely() {
    let clock = Clock::new();
    let (mut s, _) = streaming_slave(SlaveConfig::default(), &clock, 64);
    for i in 1..=100 {
        let at = clock.at(i * 5_000);
        s.handle_input(at, SlaveInput::Received(push(64, b""))).unwrap();
        s.handle_timeout(at);
        let out = drain_slave(&mut s).0;
        assert!(!out.iter().any(|o| matches!(o, SlaveOutput::Close(_))), "{out:?}");
    }
    assert_eq!(s.state(), SlaveState::Streaming);
}

#[test]
fn reports_follow_progress_and_heartbeat_every_interval() {
    let clock = Clock::new();
    let (mut s, _) = streaming_slave(SlaveConfig::default(), &clock, 0);
    s.handle_input(clock.at(10), SlaveInput::Received(push(0, &[1; 100]))).unwrap();
    let _ = drain_slave(&mut s);
    s.handle_input(clock.at(10), SlaveInput::Appended { end: 100 }).unwrap();
    let (out, timeout) = drain_slave(&mut s);
    assert_eq!(slave_outputs_reports(&out), [100]);
    assert_eq!(timeout, clock.at(5_010));
    s.handle_input(clock.at(4_000), SlaveInput::Received(push(100, b""))).unwrap();
    s.handle_timeout(clock.at(5_009));
    assert!(slave_outputs_reports(&drain_slave(&mut s).0).is_empty());
    s.handle_timeout(clock.at(5_010));
    assert_eq!(slave_outputs_reports(&drain_slave(&mut s).0), [100]);
}

#[test]
fn slave_closes_after_housekeeping_without_reads_and_reconnects() {
    let clock = Clock::new();
    let (mut s, _) = streaming_slave(SlaveConfig::default(), &clock, 0);
    s.handle_timeout(clock.at(19_999));
    assert!(!drain_slave(&mut s).0.iter().any(|o| matches!(o, SlaveOutput::Close(_))));
    s.handle_timeout(clock.at(20_000));
    let out = drain_slave(&mut s).0;
    assert!(out.contains(&SlaveOutput::Close(CloseReason::HousekeepingTimeout)));
    assert_eq!(s.state(), SlaveState::Disconnected { retry_at: clock.at(25_000) });
}

#[test]
fn failed_connect_is_retried_after_the_back_off() {
    let clock = Clock::new();
    let mut s = Slave::new(SlaveConfig::default(), clock.at(0), 0, 0).unwrap();
    assert_eq!(drain_slave(&mut s).0, [SlaveOutput::Connect]);
    s.handle_input(clock.at(5_000), SlaveInput::Closed).unwrap();
    let (out, timeout) = drain_slave(&mut s);
    assert_eq!(out, [SlaveOutput::Event(SlaveEvent::Disconnected { reason: None })]);
    assert_eq!(timeout, clock.at(10_000));
    s.handle_timeout(clock.at(10_000));
    assert_eq!(drain_slave(&mut s).0, [SlaveOutput::Connect]);
}

#[test]
fn ack_on_flushed_reports_only_flushed_bytes() {
    let clock = Clock::new();
    let (mut s, out) = streaming_slave(flushed_config(), &clock, 0);
    assert_eq!(slave_outputs_reports(&out), [0]);
    s.handle_input(clock.at(1), SlaveInput::Received(push(0, &[1; 10]))).unwrap();
    let _ = drain_slave(&mut s);
    s.handle_input(clock.at(1), SlaveInput::Appended { end: 10 }).unwrap();
    let out = drain_slave(&mut s).0;
    assert_eq!(out, [SlaveOutput::Flush], "stored but not durable: no report");
    // More bytes land while the flush runs; the flush covers only the first ten.
    s.handle_input(clock.at(2), SlaveInput::Received(push(10, &[2; 5]))).unwrap();
    let _ = drain_slave(&mut s);
    s.handle_input(clock.at(2), SlaveInput::Appended { end: 15 }).unwrap();
    assert!(drain_slave(&mut s).0.is_empty(), "one flush at a time");
    s.handle_input(clock.at(3), SlaveInput::Flushed { end: 10 }).unwrap();
    let out = drain_slave(&mut s).0;
    assert_eq!(out, [SlaveOutput::Flush, SlaveOutput::Report(10)]);
    s.handle_input(clock.at(4), SlaveInput::Flushed { end: 15 }).unwrap();
    assert_eq!(slave_outputs_reports(&drain_slave(&mut s).0), [15]);
}

#[test]
fn first_report_with_ack_on_flushed_waits_for_the_flush() {
    // Reporting only the durable end first would make the master start below the slave's end.
    let clock = Clock::new();
    let mut s = Slave::new(flushed_config(), clock.at(0), 300, 200).unwrap();
    assert_eq!(drain_slave(&mut s).0, [SlaveOutput::Flush, SlaveOutput::Connect]);
    s.handle_input(clock.at(1), SlaveInput::Connected).unwrap();
    assert!(slave_outputs_reports(&drain_slave(&mut s).0).is_empty());
    s.handle_input(clock.at(2), SlaveInput::Flushed { end: 300 }).unwrap();
    assert_eq!(slave_outputs_reports(&drain_slave(&mut s).0), [300]);
}

#[test]
fn wants_read_is_false_while_unstored_bytes_reach_the_bound() {
    let clock = Clock::new();
    let config = SlaveConfig { max_frame_body: 100, max_unstored: 250, ..SlaveConfig::default() };
    let (mut s, _) = streaming_slave(config, &clock, 0);
    assert!(s.wants_read());
    s.handle_input(clock.at(1), SlaveInput::Received(push(0, &[0; 100]))).unwrap();
    s.handle_input(clock.at(1), SlaveInput::Received(push(100, &[0; 100]))).unwrap();
    assert!(s.wants_read(), "200 unstored < 250");
    s.handle_input(clock.at(1), SlaveInput::Received(push(200, &[0; 50]))).unwrap();
    assert!(!s.wants_read(), "250 unstored");
    let _ = drain_slave(&mut s);
    s.handle_input(clock.at(2), SlaveInput::Appended { end: 100 }).unwrap();
    assert!(s.wants_read());
}

#[test]
fn append_failure_closes_and_reconnects_reporting_the_stored_end() {
    let clock = Clock::new();
    let (mut s, _) = streaming_slave(SlaveConfig::default(), &clock, 0);
    s.handle_input(clock.at(1), SlaveInput::Received(push(0, &[1; 10]))).unwrap();
    s.handle_input(clock.at(1), SlaveInput::Received(push(10, &[1; 10]))).unwrap();
    let _ = drain_slave(&mut s);
    s.handle_input(clock.at(1), SlaveInput::Appended { end: 10 }).unwrap();
    s.handle_input(clock.at(1), SlaveInput::AppendFailed { end: 10 }).unwrap();
    let out = drain_slave(&mut s).0;
    assert!(out.contains(&SlaveOutput::Close(CloseReason::StoreFailed)), "{out:?}");
    s.handle_timeout(clock.at(5_001));
    let _ = drain_slave(&mut s);
    s.handle_input(clock.at(5_001), SlaveInput::Connected).unwrap();
    assert_eq!(slave_outputs_reports(&drain_slave(&mut s).0), [10]);
}

#[test]
fn first_report_after_reconnect_waits_for_appends_still_in_flight() {
    let clock = Clock::new();
    let (mut s, _) = streaming_slave(SlaveConfig::default(), &clock, 0);
    s.handle_input(clock.at(1), SlaveInput::Received(push(0, &[1; 10]))).unwrap();
    let _ = drain_slave(&mut s);
    s.handle_input(clock.at(2), SlaveInput::Closed).unwrap();
    s.handle_timeout(clock.at(5_002));
    let _ = drain_slave(&mut s);
    s.handle_input(clock.at(5_002), SlaveInput::Connected).unwrap();
    assert!(slave_outputs_reports(&drain_slave(&mut s).0).is_empty(), "the append has not landed");
    s.handle_input(clock.at(5_003), SlaveInput::Appended { end: 10 }).unwrap();
    assert_eq!(slave_outputs_reports(&drain_slave(&mut s).0), [10]);
}

#[test]
fn oversize_frame_from_the_master_is_a_peer_error() {
    let clock = Clock::new();
    let (mut s, _) = streaming_slave(SlaveConfig::default(), &clock, 0);
    let mut header = frame::PushHeader { offset: 0, body_len: 4 << 20 }.encode().to_vec();
    header.truncate(12);
    s.handle_input(clock.at(1), SlaveInput::Received(Bytes::from(header))).unwrap();
    let error = PeerError::Frame(frame::FrameError::BodyTooLarge { len: 4 << 20, max: (4 << 20) - 12 });
    assert!(drain_slave(&mut s).0.contains(&SlaveOutput::Close(CloseReason::Peer(error))));
}

#[test]
fn connected_without_connect_is_api_misuse() {
    let clock = Clock::new();
    let (mut s, _) = streaming_slave(SlaveConfig::default(), &clock, 0);
    assert_eq!(s.handle_input(clock.at(1), SlaveInput::Connected), Err(ApiMisuse::UnexpectedConnected));
    assert_eq!(
        s.handle_input(clock.at(1), SlaveInput::Appended { end: 5 }),
        Err(ApiMisuse::AppendedBeyondAppendEnd { end: 5, append_end: 0 })
    );
}

#[test]
fn a_log_that_keeps_an_incomplete_record_back_is_reported_at_its_end_after_a_reconnect() {
    let clock = Clock::new();
    let (mut s, _) = streaming_slave(SlaveConfig::default(), &clock, 1_000);
    s.handle_input(clock.at(1), SlaveInput::Received(push(1_000, &[7; 64]))).unwrap();
    assert_eq!(slave_appends(&drain_slave(&mut s).0).len(), 1);
    // The log published the first 40 bytes (one whole record) and holds the rest back.
    s.handle_input(clock.at(1), SlaveInput::Appended { end: 1_040 }).unwrap();
    assert_eq!(slave_outputs_reports(&drain_slave(&mut s).0), [1_040]);
    s.handle_input(clock.at(2), SlaveInput::Closed).unwrap();
    let _ = drain_slave(&mut s);
    s.handle_timeout(clock.at(5_002));
    assert_eq!(drain_slave(&mut s).0, [SlaveOutput::Connect]);
    s.handle_input(clock.at(5_003), SlaveInput::Connected).unwrap();
    // The new stream starts at the log's end, and the master resends the held-back bytes.
    assert_eq!(slave_outputs_reports(&drain_slave(&mut s).0), [1_040]);
    s.handle_input(clock.at(5_004), SlaveInput::Received(push(1_040, &[7; 24]))).unwrap();
    assert_eq!(slave_appends(&drain_slave(&mut s).0), [(1_040, Bytes::from(vec![7; 24]))]);
}
