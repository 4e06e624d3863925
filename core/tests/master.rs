//! Master connection rules (protocol notes §2.4–2.6 and the protections beyond Java).

mod common;

use std::time::Duration;

use bytes::Bytes;
use common::*;
use logship_core::classic::frame::PushHeader;
use logship_core::classic::*;
use logship_core::*;

const C: ConnId = ConnId(1);

#[test]
fn master_sends_nothing_before_the_first_report() {
    let clock = Clock::new();
    let mut m = Master::new(master_config(), clock.at(0), LogBounds { min: 0, max: 5_000 }).unwrap();
    m.handle_input(clock.at(0), MasterInput::Accepted { conn: C }).unwrap();
    let (out, _) = drain_master(&mut m);
    assert!(out.is_empty(), "{out:?}");
    // Not even a heartbeat, however long it waits (housekeeping aside).
    m.handle_timeout(clock.at(19_000));
    let (out, _) = drain_master(&mut m);
    assert!(transmits(&out).is_empty(), "{out:?}");
}

#[test]
fn empty_slave_starts_at_min_offset_by_default() {
    let clock = Clock::new();
    let (_, out) = streaming_master(master_config(), &clock, LogBounds { min: SEG, max: 3 * SEG + 10 }, 0);
    assert_eq!(events(&out)[0], MasterEvent::SlaveStarted { conn: C, requested: 0, start: SEG });
    assert_eq!(transmits(&out)[0].1.offset, SEG);
}

#[test]
fn empty_slave_starts_at_last_file_with_last_file_policy() {
    // RocketMQ: max - max % mappedFileSizeCommitLog; protocol notes §2.2 worked example.
    let clock = Clock::new();
    let config = MasterConfig {
        new_slave_start: NewSlaveStart::LastFile,
        mapped_file_size_commit_log: 1 << 30,
        ..master_config()
    };
    let (_, out) = streaming_master(config, &clock, LogBounds { min: 0, max: 0x4000_1234 }, 0);
    assert_eq!(events(&out)[0], MasterEvent::SlaveStarted { conn: C, requested: 0, start: 0x4000_0000 });
}

#[test]
fn nonzero_first_report_starts_exactly_there() {
    let clock = Clock::new();
    let (_, out) = streaming_master(master_config(), &clock, LogBounds { min: 0, max: 10_000 }, 777);
    let t = transmits(&out);
    assert_eq!(t[0].2, Some(LogSpan { offset: 777, len: 9_223 }));
}

#[test]
fn batches_never_exceed_batch_size_appended_end_or_segment() {
    let clock = Clock::new();
    let config = MasterConfig { transfer_batch_size: 1_000, max_inflight: 1_000, ..master_config() };
    let start = SEG - 2_500;
    let (mut m, out) = streaming_master(config, &clock, LogBounds { min: 0, max: SEG + 1_200 }, start);
    let mut spans: Vec<_> = transmits(&out).into_iter().map(|(_, _, s)| s.unwrap()).collect();
    // The partial tail waits for the full frames to be written, then goes out.
    sent_all(&mut m, clock.at(1), &out);
    spans.extend(transmits(&drain_master(&mut m).0).into_iter().map(|(_, _, s)| s.unwrap()));
    let expected = [
        (SEG - 2_500, 1_000),
        (SEG - 1_500, 1_000),
        (SEG - 500, 500), // clipped at the segment boundary
        (SEG, 1_000),
        (SEG + 1_000, 200), // clipped at the appended end
    ];
    assert_eq!(
        spans.iter().map(|s| (s.offset, s.len)).collect::<Vec<_>>(),
        expected.map(|(o, l)| (o, l as u32))
    );
}

#[test]
fn appends_during_a_write_gather_into_one_frame() {
    let clock = Clock::new();
    let (mut m, out) = streaming_master(master_config(), &clock, LogBounds { min: 0, max: 100 }, 100);
    assert!(transmits(&out).is_empty());
    // Idle: the first put goes out at once, alone.
    m.handle_input(clock.at(1), MasterInput::Appended { end: 150 }).unwrap();
    let first = drain_master(&mut m).0;
    assert_eq!(transmits(&first)[0].2, Some(LogSpan { offset: 100, len: 50 }));
    // While it is being written, three more puts land: no frame per put...
    for end in [200, 250, 300] {
        m.handle_input(clock.at(2), MasterInput::Appended { end }).unwrap();
        assert!(transmits(&drain_master(&mut m).0).is_empty(), "a partial frame waits for the write");
    }
    // ...but one frame with all three as soon as the write completes.
    m.handle_input(clock.at(3), MasterInput::Sent { conn: C }).unwrap();
    assert_eq!(transmits(&drain_master(&mut m).0)[0].2, Some(LogSpan { offset: 150, len: 150 }));
}

#[test]
fn full_frames_pipeline_while_a_write_is_under_way() {
    let clock = Clock::new();
    let config = MasterConfig { transfer_batch_size: 100, max_inflight: 4, ..master_config() };
    let (mut m, out) = streaming_master(config, &clock, LogBounds { min: 0, max: 0 }, 0);
    assert!(transmits(&out).is_empty());
    m.handle_input(clock.at(1), MasterInput::Appended { end: 50 }).unwrap();
    assert_eq!(transmits(&drain_master(&mut m).0).len(), 1, "idle: a partial frame goes at once");
    m.handle_input(clock.at(2), MasterInput::Appended { end: 370 }).unwrap();
    let spans: Vec<_> = transmits(&drain_master(&mut m).0).into_iter().map(|t| t.2.unwrap()).collect();
    assert_eq!(
        spans,
        [
            LogSpan { offset: 50, len: 100 },
            LogSpan { offset: 150, len: 100 },
            LogSpan { offset: 250, len: 100 }
        ],
        "full frames go out while writes are pending; the 20-byte tail waits"
    );
}

#[test]
fn master_sends_as_soon_as_appended() {
    let clock = Clock::new();
    let (mut m, out) = streaming_master(master_config(), &clock, LogBounds { min: 0, max: 100 }, 100);
    assert!(transmits(&out).is_empty());
    m.handle_input(clock.at(1), MasterInput::Appended { end: 150 }).unwrap();
    let (out, _) = drain_master(&mut m);
    assert_eq!(
        transmits(&out),
        [(C, PushHeader { offset: 100, body_len: 50 }, Some(LogSpan { offset: 100, len: 50 }))]
    );
}

#[test]
fn at_most_max_inflight_transmits_without_sent() {
    let clock = Clock::new();
    let config = MasterConfig { transfer_batch_size: 10, max_inflight: 3, ..master_config() };
    let (mut m, out) = streaming_master(config, &clock, LogBounds { min: 0, max: 1_000 }, 0);
    assert_eq!(transmits(&out).len(), 3);
    // No heartbeat slips past the limit either.
    m.handle_timeout(clock.at(6_000));
    assert!(transmits(&drain_master(&mut m).0).is_empty());
    m.handle_input(clock.at(6_000), MasterInput::Sent { conn: C }).unwrap();
    let t = transmits(&drain_master(&mut m).0);
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].2, Some(LogSpan { offset: 30, len: 10 }));
}

#[test]
fn sent_without_a_transmit_is_api_misuse() {
    let clock = Clock::new();
    let (mut m, _) = streaming_master(master_config(), &clock, LogBounds { min: 0, max: 0 }, 0);
    assert_eq!(
        m.handle_input(clock.at(0), MasterInput::Sent { conn: C }),
        Err(ApiMisuse::NothingInFlight(C))
    );
}

#[test]
fn master_heartbeats_after_the_idle_interval() {
    let clock = Clock::new();
    let (mut m, out) = streaming_master(master_config(), &clock, LogBounds { min: 0, max: 64 }, 0);
    sent_all(&mut m, clock.at(0), &out);
    let (out, timeout) = drain_master(&mut m);
    assert!(out.is_empty());
    assert_eq!(timeout, clock.at(5_000));
    m.handle_timeout(clock.at(4_999));
    assert!(transmits(&drain_master(&mut m).0).is_empty());
    m.handle_timeout(clock.at(5_000));
    let (out, _) = drain_master(&mut m);
    assert_eq!(transmits(&out), [(C, PushHeader::heartbeat(64), None)]);
}

#[test]
fn master_closes_a_connection_after_housekeeping_without_reads() {
    let clock = Clock::new();
    let (mut m, _) = streaming_master(master_config(), &clock, LogBounds { min: 0, max: 0 }, 0);
    m.handle_input(clock.at(10_000), MasterInput::Received { conn: C, data: report(0) }).unwrap();
    m.handle_timeout(clock.at(29_999));
    assert!(closes(&drain_master(&mut m).0).is_empty());
    m.handle_timeout(clock.at(30_000));
    assert_eq!(closes(&drain_master(&mut m).0), [(C, CloseReason::HousekeepingTimeout)]);
    assert_eq!(m.slaves().len(), 0);
}

#[test]
fn acks_in_any_fragmentation_newest_whole_word_wins() {
    let clock = Clock::new();
    let (mut m, out) = streaming_master(master_config(), &clock, LogBounds { min: 0, max: 300 }, 0);
    sent_all(&mut m, clock.at(0), &out);
    // Three acks in one read plus half of a fourth; then the rest dribbles in one byte at a time.
    let mut wire = Vec::new();
    for a in [100u64, 200, 250, 300] {
        wire.extend(a.to_be_bytes());
    }
    m.handle_input(clock.at(1), MasterInput::Received { conn: C, data: Bytes::copy_from_slice(&wire[..28]) })
        .unwrap();
    let ev = events(&drain_master(&mut m).0);
    assert_eq!(ev, [MasterEvent::SlaveAcked { conn: C, offset: 250 }]);
    for b in &wire[28..] {
        m.handle_input(clock.at(2), MasterInput::Received { conn: C, data: Bytes::copy_from_slice(&[*b]) })
            .unwrap();
    }
    assert_eq!(events(&drain_master(&mut m).0), [MasterEvent::SlaveAcked { conn: C, offset: 300 }]);
    assert_eq!(m.slaves().next().unwrap().ack, Some(300));
}

fn expect_peer_error(out: &[MasterOutput], error: PeerError) {
    assert!(events(out).contains(&MasterEvent::PeerError { conn: C, error }), "{out:?}");
    assert_eq!(closes(out), [(C, CloseReason::Peer(error))]);
}

#[test]
fn ack_beyond_the_masters_end_closes_the_connection() {
    let clock = Clock::new();
    let (mut m, out) = streaming_master(master_config(), &clock, LogBounds { min: 0, max: 100 }, 0);
    sent_all(&mut m, clock.at(0), &out);
    m.handle_input(clock.at(1), MasterInput::Received { conn: C, data: report(1 << 40) }).unwrap();
    expect_peer_error(&drain_master(&mut m).0, PeerError::AckBeyondEnd { ack: 1 << 40, end: 100 });
}

#[test]
fn ack_beyond_what_was_sent_closes_the_connection() {
    let clock = Clock::new();
    let config = MasterConfig { transfer_batch_size: 10, max_inflight: 1, ..master_config() };
    let (mut m, _) = streaming_master(config, &clock, LogBounds { min: 0, max: 100 }, 0);
    m.handle_input(clock.at(1), MasterInput::Received { conn: C, data: report(50) }).unwrap();
    expect_peer_error(&drain_master(&mut m).0, PeerError::AckBeyondSent { ack: 50, sent: 10 });
}

#[test]
fn ack_going_backwards_closes_the_connection() {
    let clock = Clock::new();
    let (mut m, out) = streaming_master(master_config(), &clock, LogBounds { min: 0, max: 100 }, 40);
    sent_all(&mut m, clock.at(0), &out);
    m.handle_input(clock.at(1), MasterInput::Received { conn: C, data: report(39) }).unwrap();
    expect_peer_error(&drain_master(&mut m).0, PeerError::AckWentBackwards { ack: 39, previous: 40 });
}

#[test]
fn garbage_report_above_i64_max_closes_the_connection() {
    let clock = Clock::new();
    let mut m = Master::new(master_config(), clock.at(0), LogBounds::default()).unwrap();
    m.handle_input(clock.at(0), MasterInput::Accepted { conn: C }).unwrap();
    m.handle_input(clock.at(0), MasterInput::Received { conn: C, data: Bytes::from_static(&[0xFF; 8]) })
        .unwrap();
    let error = PeerError::Frame(frame::FrameError::OffsetOutOfRange { offset: u64::MAX });
    expect_peer_error(&drain_master(&mut m).0, error);
}

#[test]
fn slave_ahead_of_the_master_is_refused() {
    // The master lost its unflushed tail; the slave still has it (RocketMQ #2706, #3349).
    let clock = Clock::new();
    let (_, out) = streaming_master(master_config(), &clock, LogBounds { min: 0, max: 1_000 }, 1_200);
    expect_peer_error(&out, PeerError::SlaveAhead { reported: 1_200, end: 1_000 });
    assert!(transmits(&out).is_empty());
}

#[test]
fn slave_below_the_min_offset_is_refused() {
    // Retention removed what the slave needs (RocketMQ #3388).
    let clock = Clock::new();
    let (_, out) = streaming_master(master_config(), &clock, LogBounds { min: SEG, max: 2 * SEG }, 10);
    expect_peer_error(&out, PeerError::SlaveBehindRetention { reported: 10, min: SEG });
}

#[test]
fn retention_past_a_streaming_slave_closes_it() {
    let clock = Clock::new();
    let config = MasterConfig { max_inflight: 1, transfer_batch_size: 100, ..master_config() };
    let (mut m, _) = streaming_master(config, &clock, LogBounds { min: 0, max: 3 * SEG }, 0);
    m.handle_input(clock.at(1), MasterInput::Retained { min: SEG }).unwrap();
    expect_peer_error(&drain_master(&mut m).0, PeerError::SlaveBehindRetention { reported: 100, min: SEG });
}

#[test]
fn inputs_for_a_closed_connection_are_ignored_until_closed_frees_the_id() {
    let clock = Clock::new();
    let (mut m, _) = streaming_master(master_config(), &clock, LogBounds { min: 0, max: 10 }, 50);
    // Closed by the core (slave ahead): stale reads and Sent are harmless.
    m.handle_input(clock.at(1), MasterInput::Received { conn: C, data: report(60) }).unwrap();
    m.handle_input(clock.at(1), MasterInput::Sent { conn: C }).unwrap();
    assert!(drain_master(&mut m).0.is_empty());
    assert_eq!(
        m.handle_input(clock.at(1), MasterInput::Accepted { conn: C }),
        Err(ApiMisuse::DuplicateConn(C))
    );
    m.handle_input(clock.at(2), MasterInput::Closed { conn: C }).unwrap();
    assert_eq!(m.handle_input(clock.at(2), MasterInput::Sent { conn: C }), Err(ApiMisuse::UnknownConn(C)));
    m.handle_input(clock.at(2), MasterInput::Accepted { conn: C }).unwrap();
}

#[test]
fn time_going_backwards_is_refused() {
    let clock = Clock::new();
    let mut m = Master::new(master_config(), clock.at(10), LogBounds::default()).unwrap();
    assert_eq!(
        m.handle_input(clock.at(9), MasterInput::Accepted { conn: C }),
        Err(ApiMisuse::TimeWentBackwards)
    );
    m.handle_timeout(clock.at(5)); // ignored, not a panic
}

#[test]
fn log_end_going_backwards_is_refused() {
    let clock = Clock::new();
    let mut m = Master::new(master_config(), clock.at(0), LogBounds { min: 0, max: 100 }).unwrap();
    assert_eq!(
        m.handle_input(clock.at(0), MasterInput::Appended { end: 99 }),
        Err(ApiMisuse::LogWentBackwards { end: 99, previous: 100 })
    );
}

#[test]
fn slaves_report_lag_in_bytes_and_time() {
    let clock = Clock::new();
    let config = MasterConfig { transfer_batch_size: 10, ..master_config() };
    let (mut m, out) = streaming_master(config, &clock, LogBounds { min: 0, max: 100 }, 100);
    assert!(transmits(&out).is_empty());
    let info = m.slaves().next().unwrap();
    assert_eq!((info.lag_bytes, info.lag, info.in_sync), (0, Duration::ZERO, true));
    m.handle_input(clock.at(1_000), MasterInput::Appended { end: 130 }).unwrap();
    let out = drain_master(&mut m).0;
    sent_all(&mut m, clock.at(1_000), &out);
    m.handle_input(clock.at(3_000), MasterInput::Received { conn: C, data: report(110) }).unwrap();
    let info = m.slaves().next().unwrap();
    assert_eq!((info.ack, info.lag_bytes, info.lag), (Some(110), 20, Duration::from_secs(2)));
}
