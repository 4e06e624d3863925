//! Fuzz bodies for the AutoSwitch codecs and machines. Each `pub fn` is the whole body of one
//! `cargo fuzz` target in `fuzz/` and also runs under `cargo test` (core/tests/autoswitch_fuzz.rs).
//! Virtual time starts at `Instant::ZERO`: the bodies read no clock. Not a stable API.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::time::Instant;

use bytes::Bytes;

use super::frame::{
    FrameError, HandshakeReply, HandshakeRequest, MasterFrame, MasterFrameDecoder, MasterHeader, SlaveFrame,
    SlaveFrameDecoder, TransferHeader,
};
use super::master::{
    AutoSwitchMaster, AutoSwitchMasterConfig, MasterEvent, MasterInput, MasterOutput, MasterStart,
};
use super::slave::{AutoSwitchSlave, AutoSwitchSlaveConfig, SlaveInput, SlaveOutput};
use super::sync_state::SyncPolicy;
use crate::config::AckOn;
use crate::fuzzing::Unstructured;
use crate::log::{EpochCache, EpochEntry};
use crate::log::{LogBounds, Offset};
use crate::{ConnId, WaitId};

/// Chunk lengths covering `len`, drawn from `seed`.
fn chunks(seed: u64, len: usize) -> Vec<usize> {
    let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut out = Vec::new();
    let mut left = len;
    while left > 0 {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let n = ((state >> 33) as usize % 40 + 1).min(left);
        out.push(n);
        left -= n;
    }
    out
}

fn decode_slave_frames(stream: &[u8], cuts: &[usize]) -> (Vec<SlaveFrame>, Option<FrameError>, usize) {
    let mut dec = SlaveFrameDecoder::new();
    let mut out = Vec::new();
    let mut at = 0;
    for &n in cuts {
        let mut part = &stream[at..at + n];
        at += n;
        while let Some(r) = dec.decode(&mut part) {
            match r {
                Ok(f) => out.push(f),
                Err(e) => return (out, Some(e), 0),
            }
        }
    }
    (out, None, dec.pending())
}

fn decode_master_frames(
    stream: &[u8],
    cuts: &[usize],
    max_body: u32,
) -> (Vec<MasterFrame>, Option<FrameError>) {
    let mut dec = MasterFrameDecoder::new(max_body);
    let mut out = Vec::new();
    let mut at = 0;
    for &n in cuts {
        dec.extend(Bytes::copy_from_slice(&stream[at..at + n]));
        at += n;
        loop {
            match dec.decode() {
                Ok(Some(f)) => out.push(f),
                Ok(None) => break,
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

/// Fuzz body `autoswitch_slave_frames`: byte 0 picks the chunking. Chunked decoding equals
/// one-shot decoding, and the frames re-encode to a stream that decodes to them again.
pub fn slave_frames(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else { return };
    let whole = decode_slave_frames(stream, &[stream.len()]);
    assert_eq!(whole, decode_slave_frames(stream, &chunks(u64::from(seed), stream.len())));
    let encoded: Vec<u8> = whole.0.iter().flat_map(SlaveFrame::encode).collect();
    assert_eq!(decode_slave_frames(&encoded, &[encoded.len()]).0, whole.0);
}

/// Fuzz body `autoswitch_master_frames`: byte 0 picks the body limit and the chunking.
/// Chunked decoding equals one-shot decoding; frames re-encode to exactly the bytes consumed.
pub fn master_frames(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else { return };
    let max_body = 1u32 << (seed % 12);
    let whole = decode_master_frames(stream, &[stream.len()], max_body);
    assert_eq!(whole, decode_master_frames(stream, &chunks(u64::from(seed), stream.len()), max_body));
    let encoded: Vec<u8> = whole.0.iter().flat_map(MasterFrame::encode).collect();
    assert_eq!(&stream[..encoded.len()], &encoded[..], "frames do not re-encode to their bytes");
    for f in &whole.0 {
        if let MasterFrame::Transfer { header, body } = f {
            assert_eq!(header.body_len as usize, body.len());
            assert!(header.body_len <= max_body);
        }
    }
}

fn small_epochs(u: &mut Unstructured<'_>, end: Offset) -> EpochCache {
    let mut cache = EpochCache::new();
    let mut epoch = i32::from(u.u8() % 3);
    let mut start = 0;
    for _ in 0..1 + u.u8() % 4 {
        let _ = cache.append(epoch, start.min(end));
        epoch += 1 + i32::from(u.u8() % 2);
        start += u64::from(u.u8());
    }
    cache
}

/// Fuzz body `autoswitch_master_session`: a master under arbitrary slave bytes, well-formed
/// frames, log growth, waits and set changes. Checks after every step that each span is
/// non-empty, within the batch size, the appended end, one segment and one epoch, and
/// contiguous per connection; that in-flight transmits stay bounded; that every wait ends
/// exactly once; and that confirmOffset never passes the end.
pub fn master_session(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let b = u.u8();
    let config = AutoSwitchMasterConfig {
        broker_id: 1,
        transfer_batch_size: 1 + u32::from(b % 7) * 37,
        heartbeat_interval: Duration::from_millis(50),
        housekeeping_interval: Duration::from_millis(200),
        handshake_timeout: Duration::from_millis(150),
        mapped_file_size_commit_log: 128 + u64::from(b % 5) * 100,
        max_inflight: 1 + u32::from((b >> 3) % 3),
        ha_max_time_slave_not_catchup: Duration::from_millis(120),
        sync: SyncPolicy {
            all_ack_in_sync_state_set: b & 0x40 != 0,
            in_sync_replicas: u32::from((b >> 5) % 3),
            min_in_sync_replicas: u32::from(b >> 7) + 1,
        },
        verify_first_reports: b & 0x04 != 0,
        identified_only: false,
    };
    let max = u64::from(u.u16() % 2000);
    let epochs = small_epochs(&mut u, max);
    let start = MasterStart {
        log: LogBounds { min: 0, max },
        epochs: epochs.clone(),
        sync_state_set: [1, 2].into_iter().collect(),
        sync_state_set_epoch: 1,
        confirm_offset: u64::from(u.u16()),
    };
    let mut now = Instant::ZERO;
    let mut m = AutoSwitchMaster::new(config.clone(), now, start).expect("valid config");
    let mut end = max;
    let mut min = 0;
    let mut next: BTreeMap<ConnId, Offset> = BTreeMap::new();
    let mut inflight: BTreeMap<ConnId, u32> = BTreeMap::new();
    let mut pending: BTreeSet<WaitId> = BTreeSet::new();
    while !u.is_empty() {
        let conn = ConnId(u64::from(u.u8() % 4));
        let input = match u.u8() % 12 {
            0 => MasterInput::Accepted { conn },
            1 => {
                let n = usize::from(u.u8() % 20);
                MasterInput::Received { conn, data: Bytes::copy_from_slice(u.bytes(n)) }
            }
            2 => {
                let id = i64::from(u.u8() % 4);
                let hs = HandshakeRequest {
                    sync_from_last_file: id == 3,
                    async_learner: u.u8() % 4 == 0,
                    broker_id: id,
                };
                MasterInput::Received { conn, data: Bytes::copy_from_slice(&hs.encode()) }
            }
            3 => {
                let base = next.get(&conn).copied().unwrap_or(0);
                let ack = base.saturating_add_signed(i64::from(u.u8() as i8));
                MasterInput::Received { conn, data: Bytes::from(SlaveFrame::Report(ack).encode()) }
            }
            4 => MasterInput::Sent { conn },
            5 => MasterInput::Closed { conn },
            6 => MasterInput::Appended { end: end + u64::from(u.u16() % 500) },
            7 => MasterInput::Retained { min: min + u64::from(u.u8()) },
            8 => MasterInput::AwaitReplication {
                id: WaitId(u64::from(u.u8() % 8)),
                offset: end.saturating_sub(u64::from(u.u8())),
                deadline: now + Duration::from_millis(u64::from(u.u8())),
            },
            9 => MasterInput::CancelWait { id: WaitId(u64::from(u.u8() % 8)) },
            10 => {
                let bits = u.u8();
                let set = (1..5).filter(|i| bits & (1 << i) != 0).collect();
                MasterInput::SyncStateSetApplied { set, epoch: i32::from(bits) }
            }
            _ => {
                now += Duration::from_millis(u64::from(u.u8()));
                m.handle_timeout(now);
                drain_master(&mut m, now, &config, &epochs, end, &mut next, &mut inflight, &mut pending);
                continue;
            }
        };
        let accepted_wait = match &input {
            MasterInput::AwaitReplication { id, .. } => Some(*id),
            _ => None,
        };
        let closed = match &input {
            MasterInput::Closed { conn } => Some(*conn),
            _ => None,
        };
        let sent = match &input {
            MasterInput::Sent { conn } => Some(*conn),
            _ => None,
        };
        if let MasterInput::Appended { end: e } = input {
            if m.handle_input(now, input.clone()).is_ok() {
                end = e;
            }
        } else if let MasterInput::Retained { min: n } = input {
            if m.handle_input(now, input.clone()).is_ok() {
                min = n;
            }
        } else if m.handle_input(now, input).is_ok() {
            if let Some(id) = accepted_wait {
                pending.insert(id);
            }
            if let Some(c) = closed {
                next.remove(&c);
                inflight.remove(&c);
            }
            if let Some(c) = sent {
                if let Some(n) = inflight.get_mut(&c) {
                    *n = n.saturating_sub(1);
                }
            }
        }
        drain_master(&mut m, now, &config, &epochs, end, &mut next, &mut inflight, &mut pending);
    }
}

#[allow(clippy::too_many_arguments)]
fn drain_master(
    m: &mut AutoSwitchMaster,
    now: Instant,
    config: &AutoSwitchMasterConfig,
    epochs: &EpochCache,
    end: Offset,
    next: &mut BTreeMap<ConnId, Offset>,
    inflight: &mut BTreeMap<ConnId, u32>,
    pending: &mut BTreeSet<WaitId>,
) {
    loop {
        let out = m.poll_output();
        match out {
            MasterOutput::Timeout(_) => break,
            MasterOutput::Transmit { conn, header, body } => {
                let n = inflight.entry(conn).or_default();
                *n += 1;
                assert!(*n <= config.max_inflight, "too many transmits in flight");
                if let Some(span) = body {
                    assert!(span.len > 0 && span.len <= config.transfer_batch_size);
                    assert!(span.end() <= end, "span past the appended end");
                    let seg = config.mapped_file_size_commit_log;
                    assert_eq!(span.offset / seg, (span.end() - 1) / seg, "span crosses a segment");
                    let crosses =
                        epochs.entries().any(|e| e.start_offset > span.offset && e.start_offset < span.end());
                    assert!(!crosses, "span crosses an epoch boundary");
                    if let Some(&n) = next.get(&conn) {
                        assert_eq!(span.offset, n, "spans are contiguous per connection");
                    }
                    next.insert(conn, span.end());
                    let mut dec = MasterFrameDecoder::new(u32::MAX >> 1);
                    dec.extend(header);
                    let Ok(Some(MasterHeader::Transfer(h))) = dec.peek_header() else {
                        panic!("a span follows a transfer header")
                    };
                    assert_eq!(h.offset, Some(span.offset));
                    assert!(h.confirm_offset.is_some_and(|c| c <= end));
                }
            }
            MasterOutput::Close { conn, .. } => {
                next.remove(&conn);
                inflight.remove(&conn);
                m.handle_input(now, MasterInput::Closed { conn }).expect("closing conn is known");
            }
            MasterOutput::ConfirmOffset(c) => assert!(c <= end, "confirmOffset past the end"),
            MasterOutput::Event(MasterEvent::VerifyReport { conn, offset }) => {
                m.handle_input(now, MasterInput::ReportVerified { conn, boundary: offset % 3 != 0 })
                    .expect("answering a verification is always allowed");
            }
            MasterOutput::Event(MasterEvent::WaitDone { id, .. }) => {
                assert!(pending.remove(&id), "a wait finished twice or was never accepted");
            }
            MasterOutput::Event(_) => {}
        }
    }
    assert!(m.confirm_offset() <= end);
}

/// Fuzz body `autoswitch_slave_session`: a slave under arbitrary master bytes and well-formed
/// C and D frames, with a driver that answers as a store would. Checks that appends continue
/// the log, truncations only cut and never below the confirmOffset, confirmOffset never
/// passes the end, and, told the epoch its master was elected in, no epoch above it is stored.
pub fn slave_session(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let b = u.u8();
    let config = AutoSwitchSlaveConfig {
        broker_id: 2,
        heartbeat_interval: Duration::from_millis(50),
        housekeeping_interval: Duration::from_millis(200),
        reconnect_interval: Duration::from_millis(100),
        max_frame_body: 256,
        max_unstored: 16_384,
        ack_on: if b & 8 == 0 { AckOn::Written } else { AckOn::Flushed },
        master_epoch: (b & 16 != 0).then(|| i32::from(u.u8() % 4) + 1),
        ..Default::default()
    };
    let elected = config.master_epoch;
    let mut end = if b & 1 == 0 { 0 } else { u64::from(u.u16() % 1000) };
    let local = if b & 2 == 0 { EpochCache::new() } else { small_epochs(&mut u, end) };
    let confirmed = if b & 32 == 0 { 0 } else { u64::from(u.u16()) % (end + 1) };
    let mut now = Instant::ZERO;
    let mut s = AutoSwitchSlave::new(config, now, end, end, local)
        .expect("valid config")
        .with_confirm_offset(confirmed);
    let mut requested = end;
    let mut connect_pending = false;
    let mut truncate_pending = None;
    let mut flush_pending = false;
    let mut epoch = 1;
    while !u.is_empty() {
        let op = if connect_pending && b & 4 != 0 { 0 } else { u.u8() % 9 };
        let input = match op {
            0 if connect_pending => {
                connect_pending = false;
                SlaveInput::Connected
            }
            1 => {
                let n = usize::from(u.u8() % 40);
                SlaveInput::Received(Bytes::copy_from_slice(u.bytes(n)))
            }
            2 => {
                let entries = small_epochs(&mut u, end).entries().collect::<Vec<EpochEntry>>();
                let reply = HandshakeReply {
                    max_offset: end + u64::from(u.u8()),
                    last_epoch: entries.last().map_or(-1, |e| e.epoch),
                    entries,
                };
                SlaveInput::Received(Bytes::from(reply.encode()))
            }
            3 => {
                let len = usize::from(u.u8() % 100);
                epoch += i32::from(u.u8() % 3 == 0);
                let header = TransferHeader {
                    body_len: len as u32,
                    offset: Some(requested),
                    epoch,
                    epoch_start: requested.saturating_sub(u64::from(u.u8())),
                    confirm_offset: Some(u64::from(u.u16())),
                };
                SlaveInput::Received(Bytes::from(
                    MasterFrame::Transfer { header, body: Bytes::from(vec![0; len]) }.encode(),
                ))
            }
            4 => SlaveInput::Closed,
            5 => match truncate_pending.take() {
                Some(offset) => SlaveInput::Truncated { end: offset },
                None => continue,
            },
            6 if requested > end => SlaveInput::Appended { end: requested },
            6 if flush_pending => {
                flush_pending = false;
                SlaveInput::Flushed { end }
            }
            7 => SlaveInput::StoreFailed { end },
            _ => {
                now += Duration::from_millis(u64::from(u.u8()));
                s.handle_timeout(now);
                drain_slave(
                    &mut s,
                    &mut end,
                    &mut requested,
                    &mut connect_pending,
                    &mut truncate_pending,
                    &mut flush_pending,
                    elected,
                );
                continue;
            }
        };
        let (is_closed, appended, truncated, failed) = match &input {
            SlaveInput::Closed => (true, None, None, false),
            SlaveInput::Appended { end } => (false, Some(*end), None, false),
            SlaveInput::Truncated { end } => (false, None, Some(*end), false),
            SlaveInput::StoreFailed { .. } => (false, None, None, true),
            _ => (false, None, None, false),
        };
        let result = s.handle_input(now, input);
        if result.is_ok() {
            if let Some(e) = appended {
                end = e;
            }
            if let Some(e) = truncated {
                end = e;
                requested = e;
            }
            if failed {
                requested = end;
            }
            if is_closed {
                connect_pending = false;
            }
        }
        drain_slave(
            &mut s,
            &mut end,
            &mut requested,
            &mut connect_pending,
            &mut truncate_pending,
            &mut flush_pending,
            elected,
        );
        assert!(s.confirm_offset().is_none_or(|c| c <= s.end()));
        assert_eq!(s.end(), end);
    }
}

fn drain_slave(
    s: &mut AutoSwitchSlave,
    end: &mut Offset,
    requested: &mut Offset,
    connect_pending: &mut bool,
    truncate_pending: &mut Option<Offset>,
    flush_pending: &mut bool,
    elected: Option<i32>,
) {
    loop {
        let floor = s.confirm_floor();
        match s.poll_output() {
            SlaveOutput::Timeout(_) => break,
            SlaveOutput::Connect => {
                *connect_pending = true;
                *requested = *end;
            }
            SlaveOutput::Truncate { offset, .. } => {
                assert!(offset < *end, "a truncation only cuts");
                assert!(offset >= floor, "no truncation below the confirmOffset {floor}: {offset}");
                *truncate_pending = Some(offset);
            }
            SlaveOutput::Append { offset, data } => {
                if *end != 0 || *requested != 0 {
                    assert_eq!(offset, *requested, "appends continue the log");
                }
                *requested = offset + data.len() as u64;
            }
            SlaveOutput::ConfirmOffset(c) => assert!(c <= *end),
            SlaveOutput::Close(_) => {
                *truncate_pending = None;
            }
            SlaveOutput::Flush => *flush_pending = true,
            SlaveOutput::StoreEpochs(entries) => {
                if let Some(elected) = elected {
                    assert!(entries.iter().all(|e| e.epoch <= elected), "{entries:?} above epoch {elected}");
                }
            }
            SlaveOutput::Transmit(_) | SlaveOutput::Event(_) => {}
        }
    }
}
