//! Fuzz bodies. Each `pub fn` here is the whole body of one `cargo fuzz` target in `fuzz/`, and
//! runs under `cargo test` on fixed inputs too, so a fuzz target can never rot unnoticed.
//!
//! Every body asserts the crate's promises: decoders never panic and are chunking-invariant;
//! state machines never panic on any input sequence, and every output keeps its invariants.
//! Not a stable API.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::time::Instant;

use bytes::Bytes;

use crate::classic::frame::{
    FrameError, PUSH_HEADER_LEN, Push, PushDecoder, PushHeader, ReportDecoder, encode_report,
};
use crate::config::{AckOn, AckPolicy, MasterConfig, NewSlaveStart, SlaveConfig};
use crate::log::{LogBounds, Offset};
use crate::{
    ConnId, WaitId,
    classic::{Master, MasterEvent, MasterInput, MasterOutput, Slave, SlaveInput, SlaveOutput},
};

/// Reads fuzzer bytes as numbers; yields zeros once exhausted.
#[derive(Debug)]
pub struct Unstructured<'a>(&'a [u8]);

impl<'a> Unstructured<'a> {
    /// Wraps fuzzer input.
    pub fn new(data: &'a [u8]) -> Self {
        Self(data)
    }

    /// Whether any bytes are left.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The next byte.
    pub fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }

    /// The next two bytes, big-endian.
    pub fn u16(&mut self) -> u16 {
        u16::from_be_bytes([self.u8(), self.u8()])
    }

    /// Up to `n` next bytes.
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        head
    }
}

/// Chunk lengths that cover `len` bytes, drawn from `seed` (a deterministic LCG).
fn chunk_lengths(seed: u64, len: usize) -> Vec<usize> {
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

/// Decodes `stream` fed in `chunks`, returning every frame and the error it stopped at.
pub fn decode_pushes(
    stream: &[u8],
    max_body: u32,
    chunks: impl IntoIterator<Item = usize>,
) -> (Vec<Push>, Option<FrameError>) {
    let mut dec = PushDecoder::new(max_body);
    let mut frames = Vec::new();
    let mut at = 0;
    for n in chunks {
        dec.extend(Bytes::copy_from_slice(&stream[at..at + n]));
        at += n;
        loop {
            match dec.decode() {
                Ok(Some(f)) => frames.push(f),
                Ok(None) => break,
                Err(e) => return (frames, Some(e)),
            }
        }
    }
    (frames, None)
}

/// Fuzz body `push_decoder`: byte 0 picks the body limit and the chunking, the rest is the
/// stream. Chunked decoding must equal one-shot decoding, and re-encoding the frames must give
/// back exactly the bytes consumed.
pub fn push_decoder(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else { return };
    let max_body = 1u32 << (seed % 16);
    let whole = decode_pushes(stream, max_body, [stream.len()]);
    let split = decode_pushes(stream, max_body, chunk_lengths(u64::from(seed), stream.len()));
    assert_eq!(whole, split, "chunking changed the decoded frames");
    let mut encoded = Vec::new();
    for f in &whole.0 {
        assert!(f.body.len() <= max_body as usize);
        encoded.extend(PushHeader { offset: f.offset, body_len: f.body.len() as u32 }.encode());
        encoded.extend_from_slice(&f.body);
    }
    assert_eq!(&stream[..encoded.len()], &encoded[..], "frames do not re-encode to their bytes");
    if whole.1.is_some() {
        let mut raw = [0u8; PUSH_HEADER_LEN];
        raw.copy_from_slice(&stream[encoded.len()..encoded.len() + PUSH_HEADER_LEN]);
        assert_eq!(
            PushHeader::decode(&raw, max_body).err(),
            whole.1,
            "error does not come from the next header"
        );
    }
}

/// Fuzz body `report_decoder`: byte 0 picks the chunking. Chunked decoding equals one-shot
/// decoding and equals reading big-endian words.
pub fn report_decoder(data: &[u8]) {
    let Some((&seed, stream)) = data.split_first() else { return };
    let decode = |chunks: Vec<usize>| {
        let mut dec = ReportDecoder::new();
        let mut out = Vec::new();
        let mut at = 0;
        for n in chunks {
            let mut part = &stream[at..at + n];
            at += n;
            while let Some(r) = dec.decode(&mut part) {
                out.push(r);
            }
        }
        (out, dec.pending())
    };
    let whole = decode(vec![stream.len()]);
    assert_eq!(whole, decode(chunk_lengths(u64::from(seed), stream.len())));
    let words: Vec<_> = stream
        .chunks_exact(8)
        .map(|w| {
            let v = u64::from_be_bytes(w.try_into().expect("8 bytes"));
            if v > i64::MAX as u64 { Err(FrameError::OffsetOutOfRange { offset: v }) } else { Ok(v) }
        })
        .collect();
    assert_eq!(whole, (words, stream.len() % 8));
}

/// One step of a master session.
#[derive(Clone, Debug)]
pub enum MasterOp {
    /// `Accepted`.
    Accept(u8),
    /// `Received` with raw bytes.
    Receive(u8, Vec<u8>),
    /// `Received` with one well-formed report near what the connection was sent.
    Report(u8, i16),
    /// `Sent`.
    Sent(u8),
    /// `Closed`.
    Closed(u8),
    /// `Appended`, growing the log by this many bytes.
    Append(u16),
    /// `Retained`, moving the min offset forward by this many bytes.
    Retain(u16),
    /// `AwaitReplication` for this many bytes below the end, with this deadline in ms.
    Await(u8, u16, u8),
    /// `CancelWait`.
    Cancel(u8),
    /// Advance time by this many ms and call `handle_timeout`.
    Tick(u16),
}

impl MasterOp {
    /// Reads one op from fuzzer bytes.
    pub fn from_bytes(u: &mut Unstructured<'_>) -> Self {
        let conn = |u: &mut Unstructured<'_>| u.u8() % 4;
        match u.u8() % 10 {
            0 => Self::Accept(conn(u)),
            1 => {
                let c = conn(u);
                let n = usize::from(u.u8() % 24);
                Self::Receive(c, u.bytes(n).to_vec())
            }
            2 => Self::Report(conn(u), u.u16() as i16),
            3 => Self::Sent(conn(u)),
            4 => Self::Closed(conn(u)),
            5 => Self::Append(u.u16()),
            6 => Self::Retain(u.u16()),
            7 => Self::Await(u.u8(), u.u16(), u.u8()),
            8 => Self::Cancel(u.u8()),
            _ => Self::Tick(u.u16()),
        }
    }
}

/// A master configuration with small numbers, drawn from one byte.
pub fn small_master_config(b: u8) -> MasterConfig {
    MasterConfig {
        transfer_batch_size: 1 + u32::from(b % 7) * 97,
        heartbeat_interval: Duration::from_millis(50),
        housekeeping_interval: Duration::from_millis(200),
        first_report_timeout: Duration::from_millis(200),
        mapped_file_size_commit_log: 256 + u64::from(b % 5) * 300,
        new_slave_start: if b & 0x80 == 0 { NewSlaveStart::Earliest } else { NewSlaveStart::LastFile },
        ack_policy: match (b >> 3) % 3 {
            0 => AckPolicy::AnySlave,
            1 => AckPolicy::Quorum { in_sync_replicas: 2 + u32::from((b >> 5) % 2) },
            _ => AckPolicy::AllInSync,
        },
        ha_max_gap_not_in_sync: 2_000,
        max_inflight: 1 + u32::from((b >> 2) % 3),
        verify_first_reports: false,
        identified_only: false,
    }
}

/// Runs a master through `ops`, checking after every step that each transmit is a valid span
/// (non-empty, within the batch size, the appended end and one segment, contiguous per
/// connection), that no connection exceeds `max_inflight`, that every accepted wait ends in
/// exactly one `WaitDone`, and that no wait succeeds at or after its deadline.
pub fn run_master(config: MasterConfig, start: LogBounds, ops: &[MasterOp]) {
    let mut now = Instant::ZERO;
    let mut master = Master::new(config.clone(), now, start).expect("valid config");
    let mut log = start;
    let mut inflight: BTreeMap<ConnId, u32> = BTreeMap::new();
    let mut next: BTreeMap<ConnId, Offset> = BTreeMap::new();
    let mut pending: BTreeMap<WaitId, Instant> = BTreeMap::new();
    let mut closed_by_core: BTreeSet<ConnId> = BTreeSet::new();
    for op in ops {
        let input = match *op {
            MasterOp::Accept(c) => MasterInput::Accepted { conn: ConnId(c.into()) },
            MasterOp::Receive(c, ref data) => {
                MasterInput::Received { conn: ConnId(c.into()), data: Bytes::copy_from_slice(data) }
            }
            MasterOp::Report(c, delta) => {
                let base = next.get(&ConnId(c.into())).copied().unwrap_or(log.max);
                let offset = base.saturating_add_signed(i64::from(delta));
                MasterInput::Received {
                    conn: ConnId(c.into()),
                    data: Bytes::copy_from_slice(&encode_report(offset)),
                }
            }
            MasterOp::Sent(c) => MasterInput::Sent { conn: ConnId(c.into()) },
            MasterOp::Closed(c) => MasterInput::Closed { conn: ConnId(c.into()) },
            MasterOp::Append(n) => MasterInput::Appended { end: log.max + u64::from(n) },
            MasterOp::Retain(n) => MasterInput::Retained { min: (log.min + u64::from(n)).min(log.max) },
            MasterOp::Await(id, below, ms) => MasterInput::AwaitReplication {
                id: WaitId(id.into()),
                offset: log.max.saturating_sub(u64::from(below)),
                deadline: now + Duration::from_millis(u64::from(ms)),
            },
            MasterOp::Cancel(id) => MasterInput::CancelWait { id: WaitId(id.into()) },
            MasterOp::Tick(ms) => {
                now += Duration::from_millis(u64::from(ms));
                master.handle_timeout(now);
                drain_master(
                    &mut master,
                    &config,
                    now,
                    log,
                    &mut inflight,
                    &mut next,
                    &mut pending,
                    &mut closed_by_core,
                );
                continue;
            }
        };
        let accepted = master.handle_input(now, input.clone()).is_ok();
        if accepted {
            match input {
                MasterInput::Accepted { conn } => {
                    inflight.insert(conn, 0);
                }
                MasterInput::Sent { conn } if !closed_by_core.contains(&conn) => {
                    *inflight.get_mut(&conn).expect("Sent accepted for a live connection") -= 1;
                }
                MasterInput::Closed { conn } => {
                    inflight.remove(&conn);
                    next.remove(&conn);
                    closed_by_core.remove(&conn);
                }
                MasterInput::Appended { end } => log.max = end,
                MasterInput::Retained { min } => log.min = min,
                MasterInput::AwaitReplication { id, deadline, .. } => {
                    pending.insert(id, deadline);
                }
                _ => {}
            }
        }
        drain_master(
            &mut master,
            &config,
            now,
            log,
            &mut inflight,
            &mut next,
            &mut pending,
            &mut closed_by_core,
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn drain_master(
    master: &mut Master,
    config: &MasterConfig,
    now: Instant,
    log: LogBounds,
    inflight: &mut BTreeMap<ConnId, u32>,
    next: &mut BTreeMap<ConnId, Offset>,
    pending: &mut BTreeMap<WaitId, Instant>,
    closed_by_core: &mut BTreeSet<ConnId>,
) {
    for _ in 0..10_000 {
        match master.poll_output() {
            MasterOutput::Timeout(_) => return,
            MasterOutput::Transmit { conn, header, body } => {
                assert!(!closed_by_core.contains(&conn), "transmit on a closed connection");
                let n = inflight.get_mut(&conn).expect("transmit on a live connection");
                *n += 1;
                assert!(*n <= config.max_inflight, "more than max_inflight transmits");
                let h = PushHeader::decode(&header, u32::MAX >> 1).expect("valid header");
                match body {
                    None => assert_eq!(h.body_len, 0),
                    Some(span) => {
                        assert_eq!((h.offset, h.body_len), (span.offset, span.len));
                        assert!(span.len > 0 && span.len <= config.transfer_batch_size);
                        assert!(span.end() <= log.max, "span past the appended end");
                        assert!(span.offset >= log.min, "span before the min offset");
                        let seg = config.mapped_file_size_commit_log;
                        assert_eq!(span.offset / seg, (span.end() - 1) / seg, "span crosses a segment");
                        if let Some(&expected) = next.get(&conn) {
                            assert_eq!(span.offset, expected, "spans are not contiguous");
                        }
                        next.insert(conn, span.end());
                    }
                }
            }
            MasterOutput::Close { conn, .. } => {
                assert!(inflight.contains_key(&conn), "close of an unknown connection");
                assert!(closed_by_core.insert(conn), "closed twice");
            }
            MasterOutput::Event(MasterEvent::WaitDone { id, result }) => {
                let deadline = pending.remove(&id).expect("exactly one WaitDone per accepted wait");
                if result.is_ok() {
                    assert!(now < deadline, "Ok at or after the deadline");
                }
            }
            MasterOutput::Event(_) => {}
        }
    }
    panic!("poll_output never returned Timeout");
}

/// Fuzz body `master_session`: byte 0 picks the configuration, the rest are ops.
pub fn master_session(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let config = small_master_config(u.u8());
    let min = u64::from(u.u16());
    let start = LogBounds { min, max: min + u64::from(u.u16()) };
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < 2_000 {
        ops.push(MasterOp::from_bytes(&mut u));
    }
    run_master(config, start, &ops);
}

/// One step of a slave session.
#[derive(Clone, Debug)]
pub enum SlaveOp {
    /// `Connected` (only fed while connecting).
    Connect,
    /// `Received` with raw bytes.
    Receive(Vec<u8>),
    /// `Received` with a well-formed push at the expected offset plus a delta.
    Push(i8, u16),
    /// `Closed`.
    Closed,
    /// Store pending appends (`Appended`) and finish a pending flush (`Flushed`).
    Store,
    /// Fail the pending append or flush.
    Fail,
    /// Advance time by this many ms and call `handle_timeout`.
    Tick(u16),
}

impl SlaveOp {
    /// Reads one op from fuzzer bytes.
    pub fn from_bytes(u: &mut Unstructured<'_>) -> Self {
        match u.u8() % 7 {
            0 => Self::Connect,
            1 => {
                let n = usize::from(u.u8() % 32);
                Self::Receive(u.bytes(n).to_vec())
            }
            2 => Self::Push(u.u8() as i8, u.u16() % 600),
            3 => Self::Closed,
            4 => Self::Store,
            5 => Self::Fail,
            _ => Self::Tick(u.u16()),
        }
    }
}

/// Runs a slave through `ops` against a model log, checking that appends are contiguous from
/// the log's end, that reports never exceed what is stored (or durable, with `ack_on =
/// Flushed`), that the first report of a connection is the whole log, and that nothing is sent
/// or appended while disconnected.
pub fn run_slave(config: SlaveConfig, start: Offset, ops: &[SlaveOp]) {
    let mut now = Instant::ZERO;
    let mut slave = Slave::new(config.clone(), now, start, start).expect("valid config");
    let mut stored = start; // the model log's end
    let mut durable = start;
    // Appends requested, not yet answered: (offset, len, doomed). An append queued behind a
    // failed one is doomed: it fails too. Appends requested after the failure continue from the
    // log's end, behind the doomed ones.
    let mut queued: Vec<(Offset, usize, bool)> = Vec::new();
    // Where the next append must start: the end of the last live (not doomed) queued append, or
    // the log's end.
    let next_at = |queued: &[(Offset, usize, bool)], stored: Offset| {
        queued.iter().rev().find(|q| !q.2).map_or(stored, |&(o, n, _)| o + n as u64)
    };
    let mut flush_pending = false;
    let mut connecting = false;
    let mut connected = false;
    let mut first_report_due = false;
    for op in ops {
        let input = match *op {
            SlaveOp::Connect if connecting => {
                connecting = false;
                connected = true;
                first_report_due = true;
                Some(SlaveInput::Connected)
            }
            SlaveOp::Connect => None,
            SlaveOp::Receive(ref d) => Some(SlaveInput::Received(Bytes::copy_from_slice(d))),
            SlaveOp::Push(delta, len) => {
                let at = next_at(&queued, stored);
                let offset = at.saturating_add_signed(i64::from(delta) * i64::from(delta % 2 == 0));
                let mut wire = PushHeader { offset, body_len: u32::from(len) }.encode().to_vec();
                wire.resize(PUSH_HEADER_LEN + usize::from(len), 0xAB);
                Some(SlaveInput::Received(Bytes::from(wire)))
            }
            SlaveOp::Closed => {
                let was = connecting || connected;
                connecting = false;
                connected = false;
                was.then_some(SlaveInput::Closed)
            }
            SlaveOp::Store => {
                if queued.first().is_some_and(|q| q.2) {
                    // Appends queued behind a failed one fail too; each gets its own answer.
                    queued.remove(0);
                    Some(SlaveInput::AppendFailed { end: stored })
                } else if let Some((offset, n, _)) = queued.first().copied() {
                    queued.remove(0);
                    assert!(offset == stored || stored == 0, "append is not contiguous");
                    stored = offset + n as u64;
                    Some(SlaveInput::Appended { end: stored })
                } else if flush_pending {
                    flush_pending = false;
                    durable = stored;
                    Some(SlaveInput::Flushed { end: durable })
                } else {
                    None
                }
            }
            SlaveOp::Fail => {
                if !queued.is_empty() {
                    queued.remove(0);
                    for q in &mut queued {
                        q.2 = true;
                    }
                    Some(SlaveInput::AppendFailed { end: stored })
                } else if flush_pending {
                    flush_pending = false;
                    Some(SlaveInput::FlushFailed)
                } else {
                    None
                }
            }
            SlaveOp::Tick(ms) => {
                now += Duration::from_millis(u64::from(ms));
                slave.handle_timeout(now);
                None
            }
        };
        if let Some(input) = input {
            slave.handle_input(now, input).expect("the model only feeds valid inputs");
        }
        for _ in 0..10_000 {
            match slave.poll_output() {
                SlaveOutput::Timeout(_) => break,
                SlaveOutput::Connect => {
                    assert!(!connecting && !connected, "Connect while connected");
                    connecting = true;
                }
                SlaveOutput::Report(offset) => {
                    assert!(connected, "report while not connected");
                    let limit = if config.ack_on == AckOn::Flushed { durable } else { stored };
                    assert!(offset <= limit, "report {offset} beyond stored/durable {limit}");
                    if first_report_due {
                        let all = next_at(&queued, stored);
                        assert_eq!(offset, all, "first report is not the whole log");
                        first_report_due = false;
                    }
                }
                SlaveOutput::Append { offset, data } => {
                    assert!(connected, "append while not connected");
                    assert!(!data.is_empty());
                    if queued.iter().any(|q| !q.2) {
                        assert_eq!(offset, next_at(&queued, stored), "appends are not contiguous");
                    } else if stored != 0 {
                        assert_eq!(offset, stored, "append does not continue the log");
                    }
                    queued.push((offset, data.len(), false));
                }
                SlaveOutput::Flush => {
                    assert!(!flush_pending, "two flushes in flight");
                    flush_pending = true;
                }
                SlaveOutput::Close(_) => {
                    assert!(connected, "close while not connected");
                    connected = false;
                }
                SlaveOutput::Event(_) => {}
            }
        }
    }
}

/// Fuzz body `slave_session`: byte 0 picks the configuration and the start, the rest are ops.
pub fn slave_session(data: &[u8]) {
    let mut u = Unstructured::new(data);
    let b = u.u8();
    let config = SlaveConfig {
        heartbeat_interval: Duration::from_millis(50),
        housekeeping_interval: Duration::from_millis(200),
        reconnect_interval: Duration::from_millis(100),
        max_frame_body: 512,
        ack_on: if b & 1 == 0 { AckOn::Written } else { AckOn::Flushed },
        max_unstored: 2_048,
        max_first_offset: crate::config::DEFAULT_MAX_FIRST_OFFSET,
    };
    let start = if b & 2 == 0 { 0 } else { u64::from(u.u16()) };
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < 2_000 {
        ops.push(SlaveOp::from_bytes(&mut u));
    }
    run_slave(config, start, &ops);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fixed inputs for every fuzz body, including edge shapes found while writing them.
    fn corpus() -> Vec<Vec<u8>> {
        let mut push = vec![3u8];
        push.extend(PushHeader { offset: 5, body_len: 4 }.encode());
        push.extend(b"abcd");
        push.extend(PushHeader { offset: 9, body_len: 0 }.encode());
        let mut bad = vec![0u8];
        bad.extend(PushHeader { offset: 0, body_len: 0x8000_0000 }.encode());
        let mut counting: Vec<u8> = (0..=255u8).collect();
        counting.extend((0..=255u8).rev());
        vec![vec![], vec![0], push, bad, counting, vec![0xFF; 300], vec![7; 64]]
    }

    #[test]
    fn fuzz_bodies_hold_on_fixed_inputs() {
        for input in corpus() {
            push_decoder(&input);
            report_decoder(&input);
            master_session(&input);
            slave_session(&input);
        }
    }

    #[test]
    fn fuzz_bodies_hold_on_pseudo_random_inputs() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for len in 0..400usize {
            let input: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    (state >> 24) as u8
                })
                .collect();
            push_decoder(&input);
            report_decoder(&input);
            master_session(&input);
            slave_session(&input);
        }
    }
}
