//! Model-based test: random puts, replicated appends, reads, reopens and crashes against a
//! `Vec<u8>` model of the log.
//!
//! A crash stops the store without flushing, then damages what was not durable: the segment files
//! are zeroed from a random byte at or after the flushed offset (later segments are zeroed or
//! deleted), random bits between the flushed offset and that cut are flipped, and consume-queue
//! entries beyond the checkpointed dispatch point are cut too. Recovery must then land exactly on
//! the first record an independent walk of the damaged bytes rejects.
//!
//! RocketMQ's format only protects the body with a CRC (plus the lengths, the magic, and the
//! physical offset and topic checks this store adds): a flip in, say, a timestamp or a property
//! is undetectable. When such a flip survives recovery, the case checks the bytes and ends, since
//! the model's view of that message is no longer the store's.

mod common;

use std::collections::HashMap;
use std::path::Path;

use bytes::Bytes;
use common::{Env, SEGMENT, T0, config, segment_path};
use logship_store::codec::{self, BLANK_MAGIC_CODE, StoreFields, sys_flag};
use logship_store::{
    CommitLog, LogSpan, Message, PutStatus, RecoveryKind, StoreConfig, StoreError, StoredMessage,
};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

#[derive(Clone, Debug)]
struct MsgSpec {
    topic: u8,
    queue: u8,
    body_len: u16,
    tags: Option<u8>,
    prepared: bool,
    seed: u8,
}

impl MsgSpec {
    fn message(&self) -> Message {
        let body: Vec<u8> = (0..self.body_len).map(|i| self.seed.wrapping_add(i as u8)).collect();
        let mut m = Message::new(format!("T{}", self.topic), i32::from(self.queue), body);
        if let Some(t) = self.tags {
            m = m.with_tags(format!("tag{t}"));
        }
        if self.prepared {
            m.sys_flag = sys_flag::TRANSACTION_PREPARED_TYPE;
        }
        m
    }
}

#[derive(Clone, Debug)]
enum Op {
    Put(MsgSpec),
    /// Replicate messages a remote master wrote at our end, in chunks; `stop_at` leaves the last
    /// message partial. On an empty log, `adopt` picks the first offset.
    Append {
        msgs: Vec<MsgSpec>,
        chunks: Vec<u16>,
        stop_at: Option<u16>,
        adopt: u16,
    },
    Read {
        at: u16,
        len: u16,
    },
    ReadMessage {
        pick: u16,
    },
    ReadQueue {
        topic: u8,
        queue: u8,
    },
    Flush,
    Checkpoint,
    Reopen,
    Crash {
        cut: u16,
        flips: Vec<(u16, u8)>,
        delete_later: bool,
        cq_cut: u16,
    },
}

fn msg_spec() -> impl Strategy<Value = MsgSpec> {
    (
        0..3u8,
        0..2u8,
        prop_oneof![0..40u16, 0..900u16],
        proptest::option::of(0..4u8),
        proptest::bool::weighted(0.05),
        any::<u8>(),
    )
        .prop_map(|(topic, queue, body_len, tags, prepared, seed)| MsgSpec {
            topic,
            queue,
            body_len,
            tags,
            prepared,
            seed,
        })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => msg_spec().prop_map(Op::Put),
        4 => (
            proptest::collection::vec(msg_spec(), 1..6),
            proptest::collection::vec(1..3000u16, 1..8),
            proptest::option::weighted(0.3, any::<u16>()),
            any::<u16>()
        )
            .prop_map(|(msgs, chunks, stop_at, adopt)| Op::Append { msgs, chunks, stop_at, adopt }),
        3 => (any::<u16>(), 1..2000u16).prop_map(|(at, len)| Op::Read { at, len }),
        2 => any::<u16>().prop_map(|pick| Op::ReadMessage { pick }),
        2 => (0..3u8, 0..2u8).prop_map(|(topic, queue)| Op::ReadQueue { topic, queue }),
        2 => Just(Op::Flush),
        1 => Just(Op::Checkpoint),
        1 => Just(Op::Reopen),
        2 => (any::<u16>(), proptest::collection::vec((any::<u16>(), 0..8u8), 0..3), any::<bool>(), any::<u16>())
            .prop_map(|(cut, flips, delete_later, cq_cut)| Op::Crash { cut, flips, delete_later, cq_cut }),
    ]
}

/// A record of the model log.
#[derive(Clone, Debug)]
struct Rec {
    start: u64,
    len: u64,
    /// `(topic, queue, queue offset)` for a dispatched message; `None` for BLANK padding or an
    /// undispatched (prepared) message.
    queue: Option<(String, i32, u64)>,
    /// Whether the message has properties.
    props: bool,
}

#[derive(Default, Debug)]
struct Model {
    /// The first offset (0 unless an empty log adopted another).
    min: u64,
    /// The log bytes from `min`.
    bytes: Vec<u8>,
    /// Records in log order: those in `bytes`, then those of `pending` (a partial append leaves
    /// the last appended record incomplete).
    recs: Vec<Rec>,
    /// The rest of the remote stream, not yet appended.
    pending: Vec<u8>,
    next_queue: HashMap<(String, i32), u64>,
}

impl Model {
    fn end(&self) -> u64 {
        self.min + self.bytes.len() as u64
    }

    /// The end of the last whole record.
    fn boundary(&self) -> u64 {
        let end = self.end();
        self.recs.iter().map(|r| r.start + r.len).filter(|&e| e <= end).max().unwrap_or(self.min)
    }

    /// Whole records only.
    fn whole(&self) -> impl Iterator<Item = &Rec> {
        let end = self.end();
        self.recs.iter().filter(move |r| r.start + r.len <= end)
    }

    fn is_empty(&self) -> bool {
        self.bytes.is_empty() && self.pending.is_empty()
    }

    /// A restart loses the bytes of an incomplete trailing record (the store never published
    /// them): they go back to the stream still to be sent.
    fn unsend_partial(&mut self) {
        let keep = (self.boundary() - self.min) as usize;
        let mut stream = self.bytes.split_off(keep);
        stream.append(&mut self.pending);
        self.pending = stream;
    }

    /// Encodes `spec` as a master writing at `at` would, with BLANK padding if needed; returns the
    /// bytes and the records.
    fn encode_at(
        &mut self,
        mut at: u64,
        spec: &MsgSpec,
        store_host: std::net::SocketAddr,
    ) -> (Vec<u8>, Vec<Rec>) {
        let msg = spec.message();
        let key = (msg.topic.clone(), msg.queue_id);
        let qoff = if spec.prepared { 0 } else { *self.next_queue.get(&key).unwrap_or(&0) };
        let fields = |phys: u64| StoreFields {
            queue_offset: qoff as i64,
            physical_offset: phys as i64,
            store_timestamp: T0,
            store_host,
        };
        let len = codec::encode(&msg, &fields(0)).unwrap().len() as u64;
        let mut out = Vec::new();
        let mut recs = Vec::new();
        let remaining = SEGMENT - at % SEGMENT;
        if len + 8 > remaining {
            out.extend_from_slice(&codec::blank_record(remaining as usize));
            out.resize(remaining as usize, 0);
            recs.push(Rec { start: at, len: remaining, queue: None, props: false });
            at += remaining;
        }
        out.extend_from_slice(&codec::encode(&msg, &fields(at)).unwrap());
        let queue = (!spec.prepared).then(|| (msg.topic.clone(), msg.queue_id, qoff));
        recs.push(Rec { start: at, len, queue, props: !msg.properties.is_empty() });
        if !spec.prepared {
            self.next_queue.insert(key, qoff + 1);
        }
        (out, recs)
    }

    fn truncate(&mut self, end: u64) {
        self.bytes.truncate((end - self.min) as usize);
        self.recs.retain(|r| r.start + r.len <= end);
        self.pending.clear();
        self.next_queue.clear();
        for r in &self.recs {
            if let Some((t, q, o)) = &r.queue {
                self.next_queue.insert((t.clone(), *q), o + 1);
            }
        }
    }
}

/// What recovery must do with a damaged log.
struct Oracle {
    /// Where the log ends.
    end: u64,
    /// A damaged record passed as valid (the format cannot see it).
    undetected: bool,
    /// Opening must fail with corruption at this offset (then, with the truncation option, the
    /// log ends there).
    corrupt: Option<u64>,
}

struct Harness {
    dir: tempfile::TempDir,
    env: Env,
    cfg: StoreConfig,
    log: Option<CommitLog>,
    model: Model,
}

impl Harness {
    fn log(&self) -> &CommitLog {
        self.log.as_ref().expect("open")
    }

    fn check_bytes(&self) -> Result<(), TestCaseError> {
        let log = self.log();
        let b = log.bounds();
        // The store publishes whole records only.
        prop_assert_eq!((b.min, b.max), (self.model.min, self.model.boundary()));
        let mut at = b.min;
        while at < b.max {
            let len = (SEGMENT - at % SEGMENT).min(b.max - at);
            let got = log.read(LogSpan { offset: at, len: len as u32 }).unwrap();
            let from = (at - self.model.min) as usize;
            prop_assert!(
                got[..] == self.model.bytes[from..from + len as usize],
                "bytes differ in [{}, {})",
                at,
                at + len
            );
            at += len;
        }
        Ok(())
    }

    fn check_queue(&self, topic: u8, queue: u8) -> Result<(), TestCaseError> {
        let log = self.log();
        log.dispatch_pending().unwrap();
        let topic = format!("T{topic}");
        let queue = i32::from(queue);
        let want: Vec<_> = self
            .model
            .whole()
            .filter_map(|r| match &r.queue {
                Some((t, q, o)) if *t == topic && *q == queue => Some((*o, r.start, r.len as u32)),
                _ => None,
            })
            .collect();
        let (qmin, qmax) = log.queue_bounds(&topic, queue);
        let got: Vec<_> = log
            .read_queue(&topic, queue, qmin, 100_000)
            .unwrap()
            .into_iter()
            .map(|e| (e.queue_offset, e.physical_offset, e.size))
            .collect();
        prop_assert_eq!(&got, &want, "queue {}:{}", topic, queue);
        if let Some(last) = want.last() {
            prop_assert_eq!(qmax, last.0 + 1);
        }
        Ok(())
    }

    fn apply(&mut self, op: Op) -> Result<bool, TestCaseError> {
        let store_host = self.cfg.store_host;
        match op {
            Op::Put(spec) => {
                let r = self.log().put(spec.message());
                // A replicated stream is abandoned at its last whole record (an incomplete one
                // goes): this log now writes its own messages there.
                let end = self.model.boundary();
                self.model.truncate(end);
                prop_assert_eq!(r.status, PutStatus::PutOk);
                let at = self.model.end();
                let (bytes, recs) = self.model.encode_at(at, &spec, store_host);
                let last = recs.last().unwrap();
                prop_assert_eq!((r.offset, u64::from(r.wrote_bytes)), (last.start, last.len));
                prop_assert_eq!(r.queue_offset, last.queue.as_ref().map_or(0, |q| q.2));
                self.model.bytes.extend_from_slice(&bytes);
                self.model.recs.extend(recs);
            }
            Op::Append { msgs, chunks, stop_at, adopt } => {
                if self.model.is_empty() {
                    self.model.min = u64::from(adopt % 4) * SEGMENT / 2 + u64::from(adopt / 4 % 64) * 8;
                }
                // The remote stream: what is still pending from a partial append, then new messages.
                let mut stream = std::mem::take(&mut self.model.pending);
                let mut at = self.model.end() + stream.len() as u64;
                for spec in &msgs {
                    let (bytes, recs) = self.model.encode_at(at, spec, store_host);
                    at += bytes.len() as u64;
                    stream.extend_from_slice(&bytes);
                    self.model.recs.extend(recs);
                }
                let total = stream.len();
                let send = match stop_at {
                    Some(s) => (total - 1 - usize::from(s) % total.min(200)).max(1),
                    None => total,
                };
                let mut sent = 0;
                let mut i = 0;
                while sent < send {
                    let offset = self.model.end();
                    let seg_room = (SEGMENT - offset % SEGMENT) as usize;
                    let n = usize::from(chunks[i % chunks.len()]).min(seg_room).min(send - sent);
                    i += 1;
                    let end = self.log().append_at(offset, &stream[sent..sent + n]).unwrap();
                    self.model.bytes.extend_from_slice(&stream[sent..sent + n]);
                    // The new end is the end of the last whole record.
                    prop_assert_eq!(end, self.model.boundary());
                    sent += n;
                }
                self.model.pending = stream[send..].to_vec();
            }
            Op::Read { at, len } => {
                let (min, end) = (self.model.min, self.model.boundary());
                if end > min {
                    let offset = min + u64::from(at) % (end - min);
                    let len = u64::from(len).min(end - offset).min(SEGMENT - offset % SEGMENT);
                    let got = self.log().read(LogSpan { offset, len: len as u32 }).unwrap();
                    let from = (offset - min) as usize;
                    prop_assert!(got[..] == self.model.bytes[from..from + len as usize]);
                }
            }
            Op::ReadMessage { pick } => {
                let msgs: Vec<_> = self.model.whole().filter(|r| self.is_message(r)).cloned().collect();
                if !msgs.is_empty() {
                    let r = &msgs[usize::from(pick) % msgs.len()];
                    let m = self.log().read_message(r.start).unwrap();
                    prop_assert_eq!(u64::from(m.total_size), r.len);
                    prop_assert_eq!(m.physical_offset as u64, r.start);
                    if let Some((t, q, o)) = &r.queue {
                        prop_assert_eq!((&m.topic, m.queue_id, m.queue_offset as u64), (t, *q, *o));
                    }
                }
            }
            Op::ReadQueue { topic, queue } => self.check_queue(topic, queue)?,
            Op::Flush => {
                let flushed = self.log().flush().unwrap();
                prop_assert_eq!(flushed, self.model.boundary());
            }
            Op::Checkpoint => self.log().checkpoint().unwrap(),
            Op::Reopen => {
                let log = self.log.take().unwrap();
                log.shutdown().unwrap();
                drop(log);
                let log = self.env.open(self.dir.path(), self.cfg.clone()).unwrap();
                let kind = if self.model.bytes.is_empty() { RecoveryKind::New } else { RecoveryKind::Clean };
                prop_assert_eq!(log.recovery_report().kind, kind);
                self.model.unsend_partial();
                if self.model.bytes.is_empty() && log.bounds().max == 0 {
                    // Not one whole record: the store is empty again, and the stream is gone.
                    self.model = Model::default();
                }
                self.log = Some(log);
                self.check_bytes()?;
            }
            Op::Crash { cut, flips, delete_later, cq_cut } => {
                return self.crash(cut, flips, delete_later, cq_cut);
            }
        }
        Ok(true)
    }

    fn is_message(&self, r: &Rec) -> bool {
        let at = (r.start - self.model.min) as usize;
        self.model.bytes[at + 4..at + 8] != BLANK_MAGIC_CODE.to_be_bytes()
    }

    /// Crash and damage the unflushed bytes; returns whether the case can go on.
    fn crash(
        &mut self,
        cut: u16,
        flips: Vec<(u16, u8)>,
        delete_later: bool,
        cq_cut: u16,
    ) -> Result<bool, TestCaseError> {
        let log = self.log.take().unwrap();
        let flushed = log.flushed_offset();
        let status = log.status();
        let (cq_durable, torn_from) = (status.checkpoint_dispatched, status.checkpoint_flushed);
        let end = self.model.end();
        log.abandon();
        let root = self.dir.path();
        let min = self.model.min;
        // The damaged image, mirrored in memory: the log, then the zeros after it in its segment.
        let mut image = self.zero_extended();
        let damage_from = flushed.max(min);
        let cut_at =
            if end > damage_from { damage_from + u64::from(cut) % (end - damage_from + 1) } else { end };
        if cut_at < end || delete_later {
            let seg = cut_at / SEGMENT * SEGMENT;
            if segment_path(root, seg).exists() {
                common::zero_from(&segment_path(root, seg), cut_at - seg);
            }
            for later in std::fs::read_dir(root.join("commitlog")).unwrap() {
                let p = later.unwrap().path();
                let base: u64 = p.file_name().unwrap().to_str().unwrap().parse().unwrap_or(0);
                if base > seg {
                    if delete_later { std::fs::remove_file(&p).unwrap() } else { common::zero_from(&p, 0) }
                }
            }
            image[(cut_at - min) as usize..].fill(0);
        }
        let mut flipped = Vec::new();
        for (pos, bit) in flips {
            if cut_at > damage_from {
                let at = damage_from + u64::from(pos) % (cut_at - damage_from);
                let i = (at - min) as usize;
                image[i] ^= 1 << bit;
                flipped.push(at);
                let seg = at / SEGMENT * SEGMENT;
                common::patch(&segment_path(root, seg), at - seg, &[image[i]]);
            }
        }
        cut_consume_queues(root, cq_durable, cq_cut);

        let oracle = self.oracle(&image, torn_from);
        let log = match self.env.open(root, self.cfg.clone()) {
            Ok(log) => {
                prop_assert_eq!(
                    oracle.corrupt,
                    None,
                    "expected corruption; cut at {}, flips at {:?}",
                    cut_at,
                    flipped
                );
                log
            }
            Err(StoreError::Corrupt { offset, .. }) => {
                prop_assert_eq!(Some(offset), oracle.corrupt, "cut at {}, flips at {:?}", cut_at, flipped);
                let mut cfg = self.cfg.clone();
                cfg.recovery.truncate_on_corruption = true;
                self.env.open(root, cfg).unwrap()
            }
            Err(e) => return Err(TestCaseError::fail(format!("recovery failed: {e}"))),
        };
        let recovered = log.bounds();
        let (expect, undetected) = (oracle.corrupt.unwrap_or(oracle.end), oracle.undetected);
        if expect == min && recovered.max == 0 {
            // Nothing whole survived: the store is empty again.
            prop_assert_eq!(recovered.min, 0);
            self.model = Model::default();
            self.log = Some(log);
            return Ok(true);
        }
        prop_assert_eq!(
            recovered.max,
            expect,
            "cut at {}, flips at {:?}, flushed {}",
            cut_at,
            flipped,
            flushed
        );
        // Nothing durable is lost.
        prop_assert!(recovered.max >= self.last_boundary_at_or_below(flushed));
        self.model.bytes = image;
        self.model.truncate(expect);
        self.log = Some(log);
        self.check_bytes()?;
        if undetected {
            return Ok(false); // the model no longer knows what the damaged message says
        }
        for t in 0..3 {
            for q in 0..2 {
                self.check_queue(t, q)?;
            }
        }
        Ok(true)
    }

    /// The log bytes followed by the zeros after them in the last segment: what the files hold.
    fn zero_extended(&self) -> Vec<u8> {
        let mut image = self.model.bytes.clone();
        let end = self.model.end();
        if end % SEGMENT != 0 {
            image.resize(image.len() + (SEGMENT - end % SEGMENT) as usize, 0);
        }
        image
    }

    /// What recovery must do with `image`: walk the records the model intended while `image`
    /// holds them valid by the store's rules (a valid message where it should be; from
    /// `torn_from` on, properties may not end in a zero byte, the mark of a torn write). Where the
    /// walk stops, the log ends, unless a valid message follows somewhere later: then that record
    /// is corruption.
    fn oracle(&self, image: &[u8], torn_from: u64) -> Oracle {
        let min = self.model.min;
        let mut intended = self.model.bytes.clone();
        intended.extend_from_slice(&self.model.pending);
        let valid = |r: &Rec, torn_check: bool| {
            let (from, to) = ((r.start - min) as usize, (r.start - min + r.len) as usize);
            if to > image.len() {
                return false;
            }
            if image[from..to] == intended[from..to] {
                return true;
            }
            if intended[from + 4..from + 8] == BLANK_MAGIC_CODE.to_be_bytes() {
                return image[from..from + 8] == codec::blank_record(r.len as usize);
            }
            StoredMessage::decode(&Bytes::copy_from_slice(&image[from..to]))
                .is_ok_and(|m| m.physical_offset as u64 == r.start && u64::from(m.total_size) == r.len)
                && !(torn_check && r.props && image[to - 1] == 0)
        };
        let mut out = Oracle { end: min, undetected: false, corrupt: None };
        for (i, r) in self.model.recs.iter().enumerate() {
            let (from, to) = ((r.start - min) as usize, (r.start - min + r.len) as usize);
            if to > image.len() {
                break; // beyond the files
            }
            if !valid(r, r.start >= torn_from) {
                let message_after = self.model.recs[i + 1..].iter().any(|later| {
                    intended[(later.start - min) as usize + 4..][..4] != BLANK_MAGIC_CODE.to_be_bytes()
                        && valid(later, true)
                });
                if message_after {
                    out.corrupt = Some(r.start);
                }
                break;
            }
            out.undetected |= image[from..to] != intended[from..to];
            out.end = r.start + r.len;
        }
        out
    }

    fn last_boundary_at_or_below(&self, offset: u64) -> u64 {
        self.model.whole().map(|r| r.start + r.len).filter(|&e| e <= offset).max().unwrap_or(self.model.min)
    }
}

/// Zeroes consume-queue entries from a random one among those beyond the durable dispatch point.
fn cut_consume_queues(root: &Path, durable: u64, pick: u16) {
    let Ok(topics) = std::fs::read_dir(root.join("consumequeue")) else { return };
    for topic in topics {
        for queue in std::fs::read_dir(topic.unwrap().path()).unwrap() {
            for file in std::fs::read_dir(queue.unwrap().path()).unwrap() {
                let path = file.unwrap().path();
                let bytes = std::fs::read(&path).unwrap();
                let beyond: Vec<usize> = bytes
                    .chunks(20)
                    .enumerate()
                    .filter(|(_, e)| {
                        let phys = i64::from_be_bytes(e[..8].try_into().unwrap());
                        let size = i32::from_be_bytes(e[8..12].try_into().unwrap());
                        size != i32::MAX && size > 0 && phys as u64 >= durable
                    })
                    .map(|(i, _)| i)
                    .collect();
                if !beyond.is_empty() {
                    let from = beyond[usize::from(pick) % beyond.len()];
                    common::zero_from(&path, (from * 20) as u64);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        // Deeper runs: PROPTEST_CASES=2000 cargo test -p logship-store --test model
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64),
        max_shrink_iters: 2000,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("proptest-regressions/model.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_store_matches_a_byte_model_through_puts_appends_reopens_and_crashes(ops in proptest::collection::vec(op(), 1..40)) {
        let env = Env::default();
        let cfg = config();
        let dir = tempfile::tempdir().unwrap();
        let log = env.open(dir.path(), cfg.clone()).unwrap();
        let mut h = Harness { dir, env, cfg, log: Some(log), model: Model::default() };
        for op in ops {
            if !h.apply(op)? {
                return Ok(());
            }
        }
        h.check_bytes()?;
        for t in 0..3 {
            for q in 0..2 {
                h.check_queue(t, q)?;
            }
        }
        // Whatever happened, a final crash that loses nothing recovers every whole record (a
        // partial replicated record is dropped, to be fetched again).
        h.log().flush().unwrap();
        let torn_from = h.log().status().checkpoint_flushed;
        h.log.take().unwrap().abandon();
        let log = h.env.open(h.dir.path(), h.cfg.clone()).unwrap();
        let expect = h.oracle(&h.zero_extended(), torn_from).end;
        prop_assert_eq!(log.max_offset(), if expect == h.model.min { 0 } else { expect });
    }
}
