//! The AutoSwitch slave against scripted master bytes: handshake, truncation, epochs,
//! confirmOffset, hostile masters, timers.

mod common;

use std::time::Duration;

use logship_core::time::Instant;

use bytes::Bytes;
use common::Clock;
use logship_core::ApiMisuse;
use logship_core::autoswitch::frame::*;
use logship_core::autoswitch::*;
use logship_core::{EpochCache, EpochEntry};

fn cache(entries: &[(i32, u64)]) -> EpochCache {
    EpochCache::from_entries(entries.iter().map(|&(epoch, start_offset)| EpochEntry { epoch, start_offset }))
        .unwrap()
}

fn config() -> AutoSwitchSlaveConfig {
    AutoSwitchSlaveConfig { broker_id: 2, ..Default::default() }
}

fn drain(s: &mut AutoSwitchSlave) -> (Vec<SlaveOutput>, Instant) {
    let mut out = Vec::new();
    loop {
        match s.poll_output() {
            SlaveOutput::Timeout(t) => return (out, t),
            o => out.push(o),
        }
    }
}

fn reply(max: u64, entries: &[(i32, u64)]) -> Bytes {
    let entries: Vec<_> =
        entries.iter().map(|&(epoch, start_offset)| EpochEntry { epoch, start_offset }).collect();
    let last_epoch = entries.last().map_or(-1, |e| e.epoch);
    Bytes::from(HandshakeReply { max_offset: max, last_epoch, entries }.encode())
}

fn transfer(offset: u64, epoch: i32, epoch_start: u64, confirm: u64, body: &[u8]) -> Bytes {
    let header = TransferHeader {
        body_len: body.len() as u32,
        offset: Some(offset),
        epoch,
        epoch_start,
        confirm_offset: Some(confirm),
    };
    Bytes::from(MasterFrame::Transfer { header, body: Bytes::copy_from_slice(body) }.encode())
}

fn acks(out: &[SlaveOutput]) -> Vec<u64> {
    out.iter()
        .filter_map(|o| match o {
            SlaveOutput::Transmit(SlaveFrame::Report(a)) => Some(*a),
            _ => None,
        })
        .collect()
}

fn peer_errors(out: &[SlaveOutput]) -> Vec<PeerError> {
    out.iter()
        .filter_map(|o| match o {
            SlaveOutput::Event(SlaveEvent::PeerError(e)) => Some(*e),
            _ => None,
        })
        .collect()
}

/// A slave connected and past its handshake send.
fn connected(clock: &Clock, end: u64, epochs: EpochCache) -> AutoSwitchSlave {
    let mut s = AutoSwitchSlave::new(config(), clock.at(0), end, end, epochs).unwrap();
    assert_eq!(s.poll_output(), SlaveOutput::Connect);
    s.handle_input(clock.at(0), SlaveInput::Connected).unwrap();
    let (out, _) = drain(&mut s);
    assert_eq!(
        out,
        [SlaveOutput::Transmit(SlaveFrame::Handshake(HandshakeRequest {
            sync_from_last_file: false,
            async_learner: false,
            broker_id: 2
        }))]
    );
    s
}

#[test]
fn handshake_goes_out_as_one_sixteen_byte_frame_on_connect() {
    let clock = Clock::new();
    let s = connected(&clock, 0, EpochCache::new());
    assert_eq!(s.state(), SlaveState::Handshake);
    assert_eq!(
        HandshakeRequest { sync_from_last_file: false, async_learner: false, broker_id: 2 }.encode().len(),
        16
    );
}

#[test]
fn store_without_epochs_is_not_truncated_and_acks_its_end_at_once() {
    let clock = Clock::new();
    let mut s = connected(&clock, 500, EpochCache::new());
    s.handle_input(clock.at(1), SlaveInput::Received(reply(100, &[(1, 0)]))).unwrap();
    let (out, _) = drain(&mut s);
    assert!(!out.iter().any(|o| matches!(o, SlaveOutput::Truncate { .. })), "{out:?}");
    assert_eq!(acks(&out), [500]);
    assert_eq!(s.state(), SlaveState::Transfer);
}

#[test]
fn divergent_tail_is_truncated_to_the_consistent_point_before_any_ack() {
    let clock = Clock::new();
    // Old master: epochs 1@0, 2@300, wrote to 700. New master: epoch 2 ended at 450, 3@450.
    let mut s = connected(&clock, 700, cache(&[(1, 0), (2, 300)]));
    s.handle_input(clock.at(1), SlaveInput::Received(reply(900, &[(1, 0), (2, 300), (3, 450)]))).unwrap();
    let (out, _) = drain(&mut s);
    assert!(out.contains(&SlaveOutput::Truncate {
        offset: 450,
        epochs: vec![EpochEntry { epoch: 1, start_offset: 0 }, EpochEntry { epoch: 2, start_offset: 300 }]
    }));
    assert!(acks(&out).is_empty(), "no ack before the truncation is done: {out:?}");
    assert_eq!(s.state(), SlaveState::Truncating { offset: 450 });
    assert!(!s.wants_read());
    // A wrong answer is refused and changes nothing.
    assert_eq!(
        s.handle_input(clock.at(2), SlaveInput::Truncated { end: 400 }),
        Err(ApiMisuse::UnexpectedTruncated { end: Some(400), pending: Some(450) })
    );
    s.handle_input(clock.at(2), SlaveInput::Truncated { end: 450 }).unwrap();
    let (out, _) = drain(&mut s);
    assert_eq!(acks(&out), [450], "acks at once after truncating, not after a heartbeat interval");
    assert_eq!(s.end(), 450);
    // The new epoch arrives with the stream and is stored before the bytes.
    s.handle_input(clock.at(3), SlaveInput::Received(transfer(450, 3, 450, 450, b"abc"))).unwrap();
    let (out, _) = drain(&mut s);
    let store = out.iter().position(|o| matches!(o, SlaveOutput::StoreEpochs(_))).expect("epochs stored");
    let append = out.iter().position(|o| matches!(o, SlaveOutput::Append { .. })).expect("append");
    assert!(store < append);
    assert_eq!(s.epochs(), &cache(&[(1, 0), (2, 300), (3, 450)]));
}

#[test]
fn no_consistent_point_closes_with_a_peer_error_and_reconnects_later() {
    let clock = Clock::new();
    let mut s = connected(&clock, 700, cache(&[(1, 100), (2, 300)]));
    s.handle_input(clock.at(1), SlaveInput::Received(reply(900, &[(1, 200), (2, 500)]))).unwrap();
    let (out, next) = drain(&mut s);
    assert_eq!(
        peer_errors(&out),
        [PeerError::NoConsistentPoint { local_last_epoch: 2, master_last_epoch: 2 }]
    );
    assert!(out.iter().any(|o| matches!(o, SlaveOutput::Close(_))));
    assert!(!out.iter().any(|o| matches!(o, SlaveOutput::Truncate { .. })));
    assert_eq!(next, clock.at(1) + config().reconnect_interval);
    s.handle_timeout(next);
    assert_eq!(s.poll_output(), SlaveOutput::Connect);
}

#[test]
fn transfer_before_the_handshake_reply_is_refused() {
    let clock = Clock::new();
    let mut s = connected(&clock, 0, EpochCache::new());
    s.handle_input(clock.at(1), SlaveInput::Received(transfer(0, 1, 0, 0, b"x"))).unwrap();
    assert_eq!(peer_errors(&drain(&mut s).0), [PeerError::TransferBeforeHandshake]);
}

fn transferring(
    clock: &Clock,
    end: u64,
    local: &[(i32, u64)],
    master: &[(i32, u64)],
    master_end: u64,
) -> AutoSwitchSlave {
    let mut s = connected(clock, end, cache(local));
    s.handle_input(clock.at(1), SlaveInput::Received(reply(master_end, master))).unwrap();
    let (out, _) = drain(&mut s);
    assert_eq!(acks(&out), [end], "{out:?}");
    s
}

#[test]
fn frame_from_an_epoch_below_the_highest_seen_is_refused() {
    let clock = Clock::new();
    let mut s = transferring(&clock, 100, &[(1, 0), (3, 50)], &[(1, 0), (3, 50)], 200);
    s.handle_input(clock.at(2), SlaveInput::Received(transfer(100, 2, 100, 0, b"x"))).unwrap();
    assert_eq!(peer_errors(&drain(&mut s).0), [PeerError::EpochWentBackwards { epoch: 2, highest: 3 }]);
}

#[test]
fn frame_naming_another_start_for_a_known_epoch_is_refused() {
    let clock = Clock::new();
    let mut s = transferring(&clock, 100, &[(1, 0)], &[(1, 0)], 200);
    s.handle_input(clock.at(2), SlaveInput::Received(transfer(100, 1, 40, 0, b"x"))).unwrap();
    assert_eq!(
        peer_errors(&drain(&mut s).0),
        [PeerError::EpochRefused { epoch: 1, start: 40, reason: EpochRefusal::StartDiffers { recorded: 0 } }]
    );
}

#[test]
fn frame_not_at_the_log_end_closes() {
    let clock = Clock::new();
    let mut s = transferring(&clock, 100, &[(1, 0)], &[(1, 0)], 200);
    s.handle_input(clock.at(2), SlaveInput::Received(transfer(90, 1, 0, 0, b"x"))).unwrap();
    assert_eq!(peer_errors(&drain(&mut s).0), [PeerError::OffsetMismatch { expected: 100, got: 90 }]);
}

#[test]
fn fresh_slave_records_the_epoch_of_a_chunk_tagged_with_the_next_epoch() {
    // A Java master clips the last chunk of epoch 1 at 1000 but tags it (2, 1000).
    let clock = Clock::new();
    let mut s = transferring(&clock, 0, &[], &[(1, 0), (2, 1000)], 1500);
    let body = vec![7u8; 1000];
    s.handle_input(clock.at(2), SlaveInput::Received(transfer(0, 2, 1000, 0, &body))).unwrap();
    let (out, _) = drain(&mut s);
    assert!(out.contains(&SlaveOutput::StoreEpochs(vec![
        EpochEntry { epoch: 1, start_offset: 0 },
        EpochEntry { epoch: 2, start_offset: 1000 }
    ])));
    assert_eq!(s.epochs(), &cache(&[(1, 0), (2, 1000)]));
}

#[test]
fn zero_length_chunk_and_duplicate_handshake_reply_are_tolerated() {
    let clock = Clock::new();
    let mut s = transferring(&clock, 1000, &[(1, 0)], &[(1, 0), (2, 1000)], 1000);
    s.handle_input(clock.at(2), SlaveInput::Received(transfer(1000, 2, 1000, 1000, b""))).unwrap();
    s.handle_input(clock.at(2), SlaveInput::Received(reply(1000, &[(1, 0), (2, 1000)]))).unwrap();
    let (out, _) = drain(&mut s);
    assert!(peer_errors(&out).is_empty(), "{out:?}");
    assert_eq!(s.state(), SlaveState::Transfer);
}

#[test]
fn java_heartbeat_from_an_empty_master_is_tolerated() {
    let clock = Clock::new();
    let mut s = transferring(&clock, 0, &[], &[(1, 0)], 0);
    let hb = TransferHeader { body_len: 0, offset: None, epoch: 1, epoch_start: 0, confirm_offset: None };
    s.handle_input(clock.at(2), SlaveInput::Received(Bytes::copy_from_slice(&hb.encode()))).unwrap();
    assert!(peer_errors(&drain(&mut s).0).is_empty());
}

#[test]
fn confirm_offset_is_the_lesser_of_the_masters_and_the_local_end() {
    let clock = Clock::new();
    let mut s = transferring(&clock, 100, &[(1, 0)], &[(1, 0)], 200);
    s.handle_input(clock.at(2), SlaveInput::Received(transfer(100, 1, 0, 150, &[1; 100]))).unwrap();
    let (out, _) = drain(&mut s);
    assert!(out.contains(&SlaveOutput::ConfirmOffset(100)), "{out:?}");
    s.handle_input(clock.at(3), SlaveInput::Appended { end: 200 }).unwrap();
    let (out, _) = drain(&mut s);
    assert!(out.contains(&SlaveOutput::ConfirmOffset(150)), "{out:?}");
    assert_eq!(acks(&out), [200]);
    assert_eq!(s.confirm_offset(), Some(150));
}

#[test]
fn acks_every_heartbeat_interval_and_closes_after_housekeeping_silence() {
    let clock = Clock::new();
    let mut s = transferring(&clock, 100, &[(1, 0)], &[(1, 0)], 100);
    let (_, next) = drain(&mut s);
    assert_eq!(next, clock.at(1) + Duration::from_secs(5));
    s.handle_timeout(next);
    assert_eq!(acks(&drain(&mut s).0), [100]);
    s.handle_timeout(clock.at(1) + Duration::from_secs(20));
    let (out, _) = drain(&mut s);
    assert!(out.contains(&SlaveOutput::Close(CloseReason::HousekeepingTimeout)), "{out:?}");
}

#[test]
fn store_failure_closes_and_reconnects_from_the_stored_end() {
    let clock = Clock::new();
    let mut s = transferring(&clock, 100, &[(1, 0)], &[(1, 0)], 200);
    s.handle_input(clock.at(2), SlaveInput::Received(transfer(100, 1, 0, 0, &[1; 50]))).unwrap();
    let _ = drain(&mut s);
    s.handle_input(clock.at(3), SlaveInput::StoreFailed { end: 100 }).unwrap();
    let (out, next) = drain(&mut s);
    assert!(out.contains(&SlaveOutput::Close(CloseReason::StoreFailed)));
    s.handle_timeout(next);
    assert_eq!(s.poll_output(), SlaveOutput::Connect);
    s.handle_input(next, SlaveInput::Connected).unwrap();
    let _ = drain(&mut s);
    s.handle_input(next, SlaveInput::Received(reply(200, &[(1, 0)]))).unwrap();
    assert_eq!(acks(&drain(&mut s).0), [100]);
}

#[test]
fn truncation_answered_after_the_connection_closed_still_counts_and_gates_reconnect() {
    let clock = Clock::new();
    let mut s = connected(&clock, 700, cache(&[(1, 0), (2, 300)]));
    s.handle_input(clock.at(1), SlaveInput::Received(reply(900, &[(1, 0), (2, 300), (3, 450)]))).unwrap();
    let _ = drain(&mut s);
    s.handle_input(clock.at(2), SlaveInput::Closed).unwrap();
    let (out, _) = drain(&mut s);
    assert!(!out.contains(&SlaveOutput::Connect));
    s.handle_timeout(clock.at(60_000));
    assert!(!drain(&mut s).0.contains(&SlaveOutput::Connect), "no new stream while the truncation is out");
    s.handle_input(clock.at(60_001), SlaveInput::Truncated { end: 450 }).unwrap();
    assert_eq!(s.end(), 450);
    assert_eq!(s.epochs(), &cache(&[(1, 0), (2, 300)]));
    assert!(drain(&mut s).0.contains(&SlaveOutput::Connect));
}

#[test]
fn local_epochs_without_data_do_not_brick_the_slave() {
    // A broker became master at epoch 5 at offset 300, wrote nothing, and was demoted; the
    // new master never heard of epoch 5.
    let clock = Clock::new();
    let mut s = connected(&clock, 300, cache(&[(5, 300)]));
    s.handle_input(clock.at(1), SlaveInput::Received(reply(900, &[(1, 0), (6, 300)]))).unwrap();
    let (out, _) = drain(&mut s);
    assert!(peer_errors(&out).is_empty(), "{out:?}");
    assert!(out.contains(&SlaveOutput::StoreEpochs(vec![])));
    assert_eq!(acks(&out), [300]);
}

#[test]
fn max_unstored_must_hold_a_whole_transfer_frame_or_handshake_reply() {
    let clock = Clock::new();
    let small = AutoSwitchSlaveConfig { max_frame_body: 1000, max_unstored: 1020, ..config() };
    assert!(AutoSwitchSlave::new(small, clock.at(0), 0, 0, EpochCache::new()).is_err());
    let ok = AutoSwitchSlaveConfig { max_frame_body: 1000, max_unstored: 12_020, ..config() };
    assert!(AutoSwitchSlave::new(ok, clock.at(0), 0, 0, EpochCache::new()).is_ok());
    let short = AutoSwitchSlaveConfig { max_frame_body: 100, max_unstored: 12_019, ..config() };
    assert!(AutoSwitchSlave::new(short, clock.at(0), 0, 0, EpochCache::new()).is_err());
}

#[test]
fn with_ack_on_flushed_only_durable_bytes_are_acknowledged() {
    let clock = Clock::new();
    let cfg = AutoSwitchSlaveConfig { ack_on: logship_core::AckOn::Flushed, ..config() };
    // 100 bytes stored, 60 durable: the first ack waits for a flush.
    let mut s = AutoSwitchSlave::new(cfg, clock.at(0), 100, 60, cache(&[(1, 0)])).unwrap();
    assert_eq!(s.poll_output(), SlaveOutput::Flush);
    assert_eq!(s.poll_output(), SlaveOutput::Connect);
    s.handle_input(clock.at(0), SlaveInput::Connected).unwrap();
    let _ = drain(&mut s);
    s.handle_input(clock.at(1), SlaveInput::Received(reply(300, &[(1, 0)]))).unwrap();
    assert!(acks(&drain(&mut s).0).is_empty(), "no first ack before the log is durable");
    s.handle_input(clock.at(2), SlaveInput::Flushed { end: 100 }).unwrap();
    assert_eq!(acks(&drain(&mut s).0), [100]);
    s.handle_input(clock.at(3), SlaveInput::Received(transfer(100, 1, 0, 0, &[5; 50]))).unwrap();
    let _ = drain(&mut s);
    s.handle_input(clock.at(3), SlaveInput::Appended { end: 150 }).unwrap();
    let (out, _) = drain(&mut s);
    assert!(acks(&out).is_empty(), "written but not durable: {out:?}");
    assert!(out.contains(&SlaveOutput::Flush));
    s.handle_input(clock.at(4), SlaveInput::Flushed { end: 150 }).unwrap();
    assert_eq!(acks(&drain(&mut s).0), [150]);
}

// ---- Issue 22: epochs from the master are trusted only as far as the controller said ----

/// A slave told to follow a master elected in `elected`, connected and past its handshake
/// send, whose log recorded `confirmed` as its confirmOffset.
fn following(
    clock: &Clock,
    elected: i32,
    end: u64,
    local: &[(i32, u64)],
    confirmed: u64,
    drop_confirmed: Option<std::ops::Range<u64>>,
) -> AutoSwitchSlave {
    let cfg = AutoSwitchSlaveConfig { master_epoch: Some(elected), drop_confirmed, ..config() };
    let mut s = AutoSwitchSlave::new(cfg, clock.at(0), end, end, cache(local))
        .unwrap()
        .with_confirm_offset(confirmed);
    assert_eq!(s.poll_output(), SlaveOutput::Connect);
    s.handle_input(clock.at(0), SlaveInput::Connected).unwrap();
    let _ = drain(&mut s);
    s
}

fn writes(out: &[SlaveOutput]) -> Vec<&SlaveOutput> {
    out.iter()
        .filter(|o| {
            matches!(
                o,
                SlaveOutput::Truncate { .. } | SlaveOutput::StoreEpochs(_) | SlaveOutput::Append { .. }
            )
        })
        .collect()
}

#[test]
fn a_master_whose_last_epoch_is_below_the_elected_epoch_is_refused_before_anything_is_truncated() {
    // The case: epochs {1,2,3} up to 774000, told to follow epoch 4, and the master at
    // that address answers with last epoch 2 and ends at 516000.
    let clock = Clock::new();
    let mut s = following(&clock, 4, 774_000, &[(1, 0), (2, 258_000), (3, 516_000)], 0, None);
    s.handle_input(clock.at(1), SlaveInput::Received(reply(516_000, &[(1, 0), (2, 258_000)]))).unwrap();
    let (out, next) = drain(&mut s);
    assert_eq!(peer_errors(&out), [PeerError::MasterBehindElectedEpoch { master_last_epoch: 2, elected: 4 }]);
    assert!(writes(&out).is_empty(), "nothing truncated or written: {out:?}");
    assert!(acks(&out).is_empty());
    assert_eq!(s.end(), 774_000);
    assert_eq!(s.epochs(), &cache(&[(1, 0), (2, 258_000), (3, 516_000)]));
    // It tries again after the back-off.
    s.handle_timeout(next);
    assert_eq!(s.poll_output(), SlaveOutput::Connect);
}

#[test]
fn a_master_whose_last_epoch_is_below_this_logs_last_epoch_is_refused() {
    // Told epoch 2 (a stale order) by a master whose last epoch is 2, while this log holds 3.
    let clock = Clock::new();
    let mut s = following(&clock, 2, 774_000, &[(1, 0), (2, 258_000), (3, 516_000)], 0, None);
    s.handle_input(clock.at(1), SlaveInput::Received(reply(516_000, &[(1, 0), (2, 258_000)]))).unwrap();
    let (out, _) = drain(&mut s);
    assert_eq!(
        peer_errors(&out),
        [PeerError::MasterBehindLocalEpoch { master_last_epoch: 2, local_last_epoch: 3 }]
    );
    assert!(writes(&out).is_empty(), "{out:?}");
    // The handshake's last-epoch field cannot hide a list that ends lower.
    let mut s = following(&clock, 3, 774_000, &[(1, 0), (2, 258_000), (3, 516_000)], 0, None);
    let entries =
        vec![EpochEntry { epoch: 1, start_offset: 0 }, EpochEntry { epoch: 2, start_offset: 258_000 }];
    let lying = HandshakeReply { max_offset: 516_000, last_epoch: 3, entries }.encode();
    s.handle_input(clock.at(1), SlaveInput::Received(Bytes::from(lying))).unwrap();
    let (out, _) = drain(&mut s);
    assert_eq!(peer_errors(&out), [PeerError::MasterBehindElectedEpoch { master_last_epoch: 2, elected: 3 }]);
    assert!(writes(&out).is_empty(), "{out:?}");
}

#[test]
fn an_epoch_above_the_elected_one_is_refused_before_it_is_recorded() {
    let clock = Clock::new();
    // In the handshake: a fake master announcing epoch 2147483647.
    let mut s = following(&clock, 4, 1000, &[(1, 0)], 0, None);
    s.handle_input(clock.at(1), SlaveInput::Received(reply(2000, &[(1, 0), (i32::MAX, 1000)]))).unwrap();
    let (out, _) = drain(&mut s);
    assert_eq!(peer_errors(&out), [PeerError::EpochAboveElected { epoch: i32::MAX, elected: 4 }]);
    assert!(writes(&out).is_empty(), "{out:?}");
    assert_eq!(s.epochs(), &cache(&[(1, 0)]));
    // In a transfer frame, after an honest handshake.
    let mut s = following(&clock, 4, 1000, &[(1, 0)], 0, None);
    s.handle_input(clock.at(1), SlaveInput::Received(reply(1000, &[(1, 0), (4, 1000)]))).unwrap();
    assert_eq!(acks(&drain(&mut s).0), [1000]);
    s.handle_input(clock.at(2), SlaveInput::Received(transfer(1000, i32::MAX, 1000, 1500, &[9; 500])))
        .unwrap();
    let (out, _) = drain(&mut s);
    assert_eq!(peer_errors(&out), [PeerError::EpochAboveElected { epoch: i32::MAX, elected: 4 }]);
    assert!(writes(&out).is_empty(), "{out:?}");
    assert!(!out.iter().any(|o| matches!(o, SlaveOutput::ConfirmOffset(_))), "{out:?}");
    assert_eq!(s.epochs(), &cache(&[(1, 0)]));
    // The elected epoch itself is recorded as usual.
    let mut s = following(&clock, 4, 1000, &[(1, 0)], 0, None);
    s.handle_input(clock.at(1), SlaveInput::Received(reply(1000, &[(1, 0), (4, 1000)]))).unwrap();
    let _ = drain(&mut s);
    s.handle_input(clock.at(2), SlaveInput::Received(transfer(1000, 4, 1000, 1000, &[9; 500]))).unwrap();
    let (out, _) = drain(&mut s);
    assert!(peer_errors(&out).is_empty(), "{out:?}");
    assert_eq!(s.epochs(), &cache(&[(1, 0), (4, 1000)]));
}

#[test]
fn a_truncation_below_the_recorded_confirm_offset_is_refused_unless_exactly_those_bytes_are_allowed() {
    let clock = Clock::new();
    // Old master: epochs 1@0, 2@300, wrote to 700, all of it confirmed. New master (epoch 3)
    // ended epoch 2 at 450.
    let local = [(1, 0), (2, 300)];
    let master = [(1, 0), (2, 300), (3, 450)];
    let mut s = following(&clock, 3, 700, &local, 700, None);
    s.handle_input(clock.at(1), SlaveInput::Received(reply(900, &master))).unwrap();
    let (out, _) = drain(&mut s);
    let errors = peer_errors(&out);
    assert_eq!(errors, [PeerError::WouldTruncateConfirmed { point: 450, confirm_offset: 700 }]);
    let text = errors[0].to_string();
    assert!(text.contains("haSlaveDropConfirmed=450-700") && text.contains("250 confirmed bytes"), "{text}");
    assert!(writes(&out).is_empty(), "{out:?}");
    assert_eq!(s.end(), 700);
    // An override naming other bytes changes nothing.
    let mut s = following(&clock, 3, 700, &local, 700, Some(450..699));
    s.handle_input(clock.at(1), SlaveInput::Received(reply(900, &master))).unwrap();
    let (out, _) = drain(&mut s);
    assert_eq!(peer_errors(&out), [PeerError::WouldTruncateConfirmed { point: 450, confirm_offset: 700 }]);
    assert!(writes(&out).is_empty(), "{out:?}");
    // The override naming exactly them lets the truncation go ahead.
    let mut s = following(&clock, 3, 700, &local, 700, Some(450..700));
    s.handle_input(clock.at(1), SlaveInput::Received(reply(900, &master))).unwrap();
    let (out, _) = drain(&mut s);
    assert!(peer_errors(&out).is_empty(), "{out:?}");
    assert!(out.contains(&SlaveOutput::Truncate {
        offset: 450,
        epochs: vec![EpochEntry { epoch: 1, start_offset: 0 }, EpochEntry { epoch: 2, start_offset: 300 }]
    }));
    // Above the confirmOffset, a divergent tail is truncated as before.
    let mut s = following(&clock, 3, 700, &local, 400, None);
    s.handle_input(clock.at(1), SlaveInput::Received(reply(900, &master))).unwrap();
    assert!(drain(&mut s).0.iter().any(|o| matches!(o, SlaveOutput::Truncate { offset: 450, .. })));
}

#[test]
fn a_confirm_offset_learned_while_streaming_also_bounds_the_next_truncation() {
    let clock = Clock::new();
    let mut s = following(&clock, 2, 300, &[(1, 0), (2, 300)], 0, None);
    s.handle_input(clock.at(1), SlaveInput::Received(reply(300, &[(1, 0), (2, 300)]))).unwrap();
    let _ = drain(&mut s);
    s.handle_input(clock.at(2), SlaveInput::Received(transfer(300, 2, 300, 700, &[1; 400]))).unwrap();
    let _ = drain(&mut s);
    s.handle_input(clock.at(2), SlaveInput::Appended { end: 700 }).unwrap();
    let _ = drain(&mut s);
    assert_eq!(s.confirm_floor(), 700);
    // The connection drops; whoever answers next has only up to 450 of epoch 2.
    s.handle_input(clock.at(3), SlaveInput::Closed).unwrap();
    let (_, next) = drain(&mut s);
    s.handle_timeout(next);
    assert_eq!(s.poll_output(), SlaveOutput::Connect);
    s.handle_input(next, SlaveInput::Connected).unwrap();
    let _ = drain(&mut s);
    s.handle_input(next, SlaveInput::Received(reply(450, &[(1, 0), (2, 300)]))).unwrap();
    let (out, _) = drain(&mut s);
    assert!(writes(&out).is_empty(), "{out:?}");
    assert!(acks(&out).is_empty());
}
