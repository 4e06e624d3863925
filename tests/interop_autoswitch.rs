//! RocketMQ 5.x's AutoSwitch (controller-mode) HA protocol, Java on both sides: the harness's
//! `--mode autoswitch` proven on a failover with a divergent tail, and the golden wire fixtures in
//! `tests/data/autoswitch/` captured from Java through a recording relay and checked against the
//! layouts in `autoswitch-failover-nameserver.md` §1 with a small decoder written here (not
//! logship's codec). The Java tests skip like the other interop tests (see `support/interop.rs`);
//! the fixture layout test needs no Java.
//!
//! `LOGSHIP_REGENERATE_FIXTURES=1` makes `java_5_wire_matches_the_golden_fixtures` rewrite the
//! fixtures from a fresh capture instead of comparing against them.

#[path = "support/interop.rs"]
mod interop;
mod process;

use std::path::{Path, PathBuf};

use interop::*;
use serde_json::Value;

/// HAConnectionState ordinals.
const HANDSHAKE: i32 = 1;
const TRANSFER: i32 = 2;
/// Java's default haTransferBatchSize.
const BATCH: usize = 32 * 1024;
/// RocketMQ's message magic codes (v1 message, v2 message, BLANK).
const MESSAGE_MAGIC: [u32; 2] = [0xdaa3_20a7, 0xdaa3_20a8];

fn temp() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("logship-autoswitch-").tempdir().unwrap()
}

fn addr(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

fn u64_of(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("no {key} in {v}"))
}

// ---- an independent decoder for frames A-D ------------------------------------------------

/// A frame the slave sends.
#[derive(Clone, Debug, PartialEq, Eq)]
enum SlaveFrame {
    /// A: `i32 state=1 · i16 isSyncFromLastFile · i16 isAsyncLearner · i64 slaveBrokerId`.
    Handshake { sync_from_last_file: i16, async_learner: i16, broker_id: i64 },
    /// B: `i32 state=2 · i64 maxOffset`.
    Report { max_offset: i64 },
}

/// A frame the master sends.
#[derive(Clone, Debug, PartialEq, Eq)]
enum MasterFrame {
    /// C: `i32 state=1 · i32 bodySize · i64 masterMaxPhyOffset · i32 lastEpoch · N × (i32 · i64)`.
    Handshake { max_offset: i64, last_epoch: i32, epochs: Vec<(i32, i64)> },
    /// D: `i32 state=2 · i32 bodySize · i64 offset · i32 epoch · i64 epochStart · i64 confirm · body`.
    Transfer { offset: i64, epoch: i32, epoch_start: i64, confirm_offset: i64, body: Vec<u8> },
}

fn i16_at(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().unwrap())
}
fn i32_at(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn i64_at(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}

/// The whole frames at the start of a slave-to-master stream, each with its byte range; a
/// trailing partial frame is left out. An unknown state is an error.
fn slave_frames(b: &[u8]) -> Result<Vec<(std::ops::Range<usize>, SlaveFrame)>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while b.len() - at >= 4 {
        let (len, frame) = match i32_at(b, at) {
            HANDSHAKE if b.len() - at >= 16 => (
                16,
                SlaveFrame::Handshake {
                    sync_from_last_file: i16_at(b, at + 4),
                    async_learner: i16_at(b, at + 6),
                    broker_id: i64_at(b, at + 8),
                },
            ),
            TRANSFER if b.len() - at >= 12 => (12, SlaveFrame::Report { max_offset: i64_at(b, at + 4) }),
            HANDSHAKE | TRANSFER => break,
            state => return Err(format!("slave frame at byte {at} has state {state}")),
        };
        out.push((at..at + len, frame));
        at += len;
    }
    Ok(out)
}

/// The whole frames at the start of a master-to-slave stream (see [`slave_frames`]).
fn master_frames(b: &[u8]) -> Result<Vec<(std::ops::Range<usize>, MasterFrame)>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while b.len() - at >= 8 {
        let state = i32_at(b, at);
        let body = i32_at(b, at + 4);
        let body = usize::try_from(body).map_err(|_| format!("negative bodySize {body} at byte {at}"))?;
        let header = match state {
            HANDSHAKE => 20,
            TRANSFER => 36,
            state => return Err(format!("master frame at byte {at} has state {state}")),
        };
        if b.len() - at < header + body {
            break;
        }
        let frame = if state == HANDSHAKE {
            if body % 12 != 0 {
                return Err(format!("handshake body of {body} bytes is not N × 12"));
            }
            let epochs =
                (0..body / 12).map(|i| (i32_at(b, at + 20 + 12 * i), i64_at(b, at + 24 + 12 * i))).collect();
            MasterFrame::Handshake { max_offset: i64_at(b, at + 8), last_epoch: i32_at(b, at + 16), epochs }
        } else {
            MasterFrame::Transfer {
                offset: i64_at(b, at + 8),
                epoch: i32_at(b, at + 16),
                epoch_start: i64_at(b, at + 20),
                confirm_offset: i64_at(b, at + 28),
                body: b[at + 36..at + 36 + body].to_vec(),
            }
        };
        out.push((at..at + header + body, frame));
        at += header + body;
    }
    Ok(out)
}

/// Encoders for the doc's golden vectors (frames A, B, C).
fn encode_a(sync_from_last_file: i16, async_learner: i16, broker_id: i64) -> Vec<u8> {
    [
        &1i32.to_be_bytes()[..],
        &sync_from_last_file.to_be_bytes(),
        &async_learner.to_be_bytes(),
        &broker_id.to_be_bytes(),
    ]
    .concat()
}
fn encode_b(max_offset: i64) -> Vec<u8> {
    [&2i32.to_be_bytes()[..], &max_offset.to_be_bytes()].concat()
}
fn encode_c(max_offset: i64, epochs: &[(i32, i64)]) -> Vec<u8> {
    let mut v =
        [&1i32.to_be_bytes()[..], &(12 * epochs.len() as i32).to_be_bytes(), &max_offset.to_be_bytes()]
            .concat();
    v.extend_from_slice(&epochs.last().map_or(-1, |e| e.0).to_be_bytes());
    for (e, s) in epochs {
        v.extend_from_slice(&e.to_be_bytes());
        v.extend_from_slice(&s.to_be_bytes());
    }
    v
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

#[test]
fn the_test_decoder_agrees_with_the_golden_vectors_of_the_doc() {
    let a = hex("00000001 0000 0000 0000000000000002");
    assert_eq!(encode_a(0, 0, 2), a);
    assert_eq!(
        slave_frames(&a).unwrap()[0].1,
        SlaveFrame::Handshake { sync_from_last_file: 0, async_learner: 0, broker_id: 2 }
    );
    let b = hex("00000002 0000000000001000");
    assert_eq!(encode_b(0x1000), b);
    assert_eq!(slave_frames(&b).unwrap()[0].1, SlaveFrame::Report { max_offset: 0x1000 });
    let c = hex(
        "00000001 00000018 0000000000002000 00000002 00000001 0000000000000000 00000002 0000000000001000",
    );
    assert_eq!(encode_c(0x2000, &[(1, 0), (2, 0x1000)]), c);
    assert_eq!(
        master_frames(&c).unwrap()[0].1,
        MasterFrame::Handshake { max_offset: 0x2000, last_epoch: 2, epochs: vec![(1, 0), (2, 0x1000)] }
    );
    // Partial frames are left for later; an unknown state is refused.
    assert!(slave_frames(&a[..15]).unwrap().is_empty());
    assert!(master_frames(&c[..c.len() - 1]).unwrap().is_empty());
    assert!(slave_frames(&hex("00000003 0000000000000000")).is_err());
    assert!(master_frames(&hex("00000000 00000000")).is_err());
}

// ---- the fixtures ---------------------------------------------------------------------------

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/autoswitch")
}

fn regenerate() -> bool {
    std::env::var("LOGSHIP_REGENERATE_FIXTURES").is_ok_and(|v| v == "1")
}

/// One capture: the bytes of one slave connection, both ways, cut at the last whole frame.
struct Capture {
    to_master: Vec<u8>,
    to_slave: Vec<u8>,
}

impl Capture {
    fn from_recording(r: &Recording) -> Self {
        let mut to_master = r.stream(Direction::ToMaster);
        let mut to_slave = r.stream(Direction::ToSlave);
        let end = slave_frames(&to_master).unwrap().last().map_or(0, |f| f.0.end);
        to_master.truncate(end);
        let end = master_frames(&to_slave).unwrap().last().map_or(0, |f| f.0.end);
        to_slave.truncate(end);
        Self { to_master, to_slave }
    }

    /// The stream fixtures whose names start with `prefix`.
    fn load(prefix: &str) -> Self {
        let read = |name: &str| {
            let name = format!("{prefix}{name}");
            std::fs::read(fixtures().join(&name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"))
        };
        Self { to_master: read("slave-to-master.bin"), to_slave: read("master-to-slave.bin") }
    }

    /// Writes the stream fixtures under `prefix`.
    fn store(&self, prefix: &str) {
        std::fs::create_dir_all(fixtures()).unwrap();
        std::fs::write(fixtures().join(format!("{prefix}slave-to-master.bin")), &self.to_master).unwrap();
        std::fs::write(fixtures().join(format!("{prefix}master-to-slave.bin")), &self.to_slave).unwrap();
    }

    fn slave(&self) -> Vec<(std::ops::Range<usize>, SlaveFrame)> {
        slave_frames(&self.to_master).unwrap()
    }

    fn master(&self) -> Vec<(std::ops::Range<usize>, MasterFrame)> {
        master_frames(&self.to_slave).unwrap()
    }

    /// The single frames the Rust codecs are checked against, by file name.
    fn frames(&self) -> Vec<(&'static str, Vec<u8>)> {
        let (slave, master) = (self.slave(), self.master());
        let s = |r: &std::ops::Range<usize>| self.to_master[r.clone()].to_vec();
        let m = |r: &std::ops::Range<usize>| self.to_slave[r.clone()].to_vec();
        let handshake = slave.iter().find(|f| matches!(f.1, SlaveFrame::Handshake { .. })).unwrap();
        let acks: Vec<_> = slave.iter().filter(|f| matches!(f.1, SlaveFrame::Report { .. })).collect();
        let reply = master.iter().find(|f| matches!(f.1, MasterFrame::Handshake { .. })).unwrap();
        let data: Vec<_> = master
            .iter()
            .filter(|f| matches!(&f.1, MasterFrame::Transfer { body, .. } if !body.is_empty()))
            .collect();
        let heartbeat = master
            .iter()
            .rev()
            .find(|f| matches!(&f.1, MasterFrame::Transfer { body, .. } if body.is_empty()))
            .expect("no heartbeat in the capture");
        vec![
            ("frame-a-handshake.bin", s(&handshake.0)),
            ("frame-b-first-ack.bin", s(&acks.first().expect("no ack").0)),
            ("frame-b-last-ack.bin", s(&acks.last().unwrap().0)),
            ("frame-c-handshake.bin", m(&reply.0)),
            ("frame-d-epoch-end.bin", m(&data.first().expect("no transfer").0)),
            ("frame-d-transfer.bin", m(&data.get(1).expect("one transfer only").0)),
            ("frame-d-heartbeat.bin", m(&heartbeat.0)),
        ]
    }

    /// What must be the same in every capture of the scenario: the handshakes, the headers and
    /// body sizes of the data frames, the last heartbeat, and the first and last acks. (Bodies
    /// hold timestamps; how many heartbeats and intermediate acks there are depends on timing.)
    fn shape(&self) -> Vec<String> {
        let mut shape = Vec::new();
        let slave = self.slave();
        shape.push(format!("{:?}", slave.first().unwrap().1));
        let acks: Vec<_> = slave.iter().filter(|f| matches!(f.1, SlaveFrame::Report { .. })).collect();
        shape.push(format!("first {:?}", acks.first().map(|f| &f.1)));
        shape.push(format!("last {:?}", acks.last().map(|f| &f.1)));
        let mut heartbeat = None;
        for (_, f) in self.master() {
            match &f {
                MasterFrame::Transfer { body, .. } if body.is_empty() => heartbeat = Some(f.clone()),
                MasterFrame::Transfer { offset, epoch, epoch_start, confirm_offset, body } => shape.push(format!(
                    "data offset={offset} epoch={epoch} start={epoch_start} confirm={confirm_offset} size={}",
                    body.len()
                )),
                f => shape.push(format!("{f:?}")),
            }
        }
        shape.push(format!("last heartbeat {heartbeat:?}"));
        shape
    }
}

/// Walks the RocketMQ messages in `log` (the commit log from offset 0): returns their starts.
fn message_starts(log: &[u8]) -> Vec<usize> {
    let mut starts = Vec::new();
    let mut at = 0;
    while at < log.len() {
        assert!(log.len() - at >= 8, "a torn message header at {at}");
        let size = i32_at(log, at);
        let magic = i32_at(log, at + 4) as u32;
        assert!(MESSAGE_MAGIC.contains(&magic), "no message magic at {at}: {magic:#x}");
        assert!(
            size > 0 && at + size as usize <= log.len(),
            "message at {at} of {size} bytes overruns the log"
        );
        starts.push(at);
        at += size as usize;
    }
    starts
}

/// What a capture's slave is: its broker id, and the offset its first ack asks for (0 for an
/// empty slave, the consistent point for one that truncated).
#[derive(Clone, Copy)]
struct Expect {
    broker_id: i64,
    first_ack: i64,
}

/// Checks a capture against the documented layouts (doc §1); every place the real bytes could
/// disagree with the doc is an assertion here. The master wrote everything before the slave
/// connected, so the capture holds the whole transfer from the first ack to the master's end.
fn check_layouts(c: &Capture, expect: Expect) {
    // Slave to master: one A first, then only B (Java may resend A while it waits for C).
    let slave = c.slave();
    assert_eq!(slave.iter().map(|f| f.0.len()).sum::<usize>(), c.to_master.len(), "a partial slave frame");
    let (first, rest) = slave.split_first().expect("the slave sent nothing");
    assert_eq!(first.0.len(), 16, "frame A is 16 bytes");
    assert_eq!(
        first.1,
        SlaveFrame::Handshake { sync_from_last_file: 0, async_learner: 0, broker_id: expect.broker_id },
        "frame A carries the slave's own broker id and no flags"
    );
    let acks: Vec<i64> = rest
        .iter()
        .filter_map(|f| match f.1 {
            SlaveFrame::Report { max_offset } => Some(max_offset),
            SlaveFrame::Handshake { .. } => None,
        })
        .collect();
    assert!(rest.iter().all(|f| f.0.len() == 16 || f.0.len() == 12));
    assert_eq!(acks.first(), Some(&expect.first_ack), "the slave's first ack");
    assert!(acks.windows(2).all(|w| w[0] <= w[1]), "acks go backwards: {acks:?}");

    // Master to slave: C first, then only D.
    let master = c.master();
    assert_eq!(master.iter().map(|f| f.0.len()).sum::<usize>(), c.to_slave.len(), "a partial master frame");
    let (first, rest) = master.split_first().expect("the master sent nothing");
    let MasterFrame::Handshake { max_offset, last_epoch, epochs } = &first.1 else {
        panic!("the master's first frame is not C: {:?}", first.1)
    };
    assert_eq!(first.0.len(), 20 + 12 * epochs.len(), "frame C is 20 + 12·N bytes");
    assert!(epochs.len() >= 2, "the scenario's master has two epochs: {epochs:?}");
    assert_eq!(Some(*last_epoch), epochs.last().map(|e| e.0), "lastEpoch is the last entry's epoch");
    assert!(
        epochs.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1),
        "epochs not increasing: {epochs:?}"
    );
    assert!(*max_offset > epochs.last().unwrap().1, "the last epoch holds data");
    // Each epoch's range: [start, next start), the last one up to the master's end.
    let end_of = |i: usize| epochs.get(i + 1).map_or(*max_offset, |e| e.1);
    let epoch_index = |epoch: i32| epochs.iter().position(|e| e.0 == epoch);

    let mut log = Vec::new();
    let mut next = expect.first_ack;
    let mut heartbeats = 0;
    let mut crossings = 0;
    for (range, f) in rest {
        let MasterFrame::Transfer { offset, epoch, epoch_start, confirm_offset, body } = f else {
            panic!("a second handshake from the master: {f:?}")
        };
        assert_eq!(range.len(), 36 + body.len(), "frame D is 36 + bodySize bytes");
        assert!(body.len() <= BATCH, "a batch beyond haTransferBatchSize: {}", body.len());
        assert_eq!(*offset, next, "frames are not contiguous");
        let i = epoch_index(*epoch).unwrap_or_else(|| panic!("frame epoch {epoch} is not in C's list"));
        assert_eq!(*epoch_start, epochs[i].1, "epochStartOffset of epoch {epoch}");
        assert_eq!(*confirm_offset, *max_offset, "a lone master's confirmOffset is its end");
        if body.is_empty() {
            heartbeats += 1;
            continue;
        }
        // The body lies in one epoch's range. Java labels a chunk clipped at an epoch's end
        // with the *next* epoch (doc §1, "Java behaviours"): check which one this is.
        let end = offset + body.len() as i64;
        let home = (0..epochs.len()).find(|&k| epochs[k].1 <= *offset && *offset < end_of(k)).unwrap();
        assert!(end <= end_of(home), "a body spans two epochs: {offset}..{end}");
        if home == i {
            assert!(
                end < end_of(home) || home + 1 == epochs.len(),
                "a chunk ending epoch {epoch} kept its epoch"
            );
        } else {
            assert_eq!(i, home + 1, "frame at {offset} carries epoch {epoch}, neither its own nor the next");
            assert_eq!(end, end_of(home), "only a chunk clipped at its epoch's end carries the next epoch");
            crossings += 1;
        }
        log.extend_from_slice(body);
        next = end;
    }
    assert_eq!(next, *max_offset, "the slave did not get the whole log");
    let boundaries = epochs.iter().filter(|e| e.1 > expect.first_ack).count();
    assert_eq!(crossings, boundaries, "each epoch's last chunk carries the next epoch");
    assert!(heartbeats >= 1, "no heartbeat in the capture");
    assert_eq!(acks.last(), Some(max_offset), "the slave's last ack is the master's end");
    // The bodies are whole RocketMQ messages end to end, and each epoch starts at a message.
    let starts = message_starts(&log);
    for (_, start) in epochs.iter().filter(|e| e.1 >= expect.first_ack) {
        let at = (start - expect.first_ack) as usize;
        assert!(starts.contains(&at), "epoch start {start} is not a message boundary");
    }
}

#[test]
fn autoswitch_fixtures_match_the_documented_layouts() {
    let c = Capture::load("");
    check_layouts(&c, FRESH);
    // The single-frame fixtures are the frames of the streams.
    for (name, bytes) in c.frames() {
        let stored = std::fs::read(fixtures().join(name)).unwrap_or_else(|e| panic!("fixture {name}: {e}"));
        assert_eq!(stored, bytes, "{name} is not the frame of the streams");
    }
}

#[test]
fn the_rejoin_fixture_shows_a_truncated_slave_asking_from_the_consistent_point() {
    let c = Capture::load("rejoin-");
    let MasterFrame::Handshake { epochs, .. } = &c.master()[0].1 else { panic!("no C first") };
    // The consistent point is where the new master's last epoch starts.
    let cut = epochs.last().unwrap().1;
    assert!(cut > 0);
    check_layouts(&c, Expect { broker_id: 1, first_ack: cut });
}

// ---- the Java scenarios ---------------------------------------------------------------------

/// The capture's master and slave broker ids.
const MASTER_ID: u64 = 1;
const SLAVE_ID: u64 = 3;
const FRESH: Expect = Expect { broker_id: SLAVE_ID as i64, first_ack: 0 };

/// [`capture_once`] until the Java slave keeps its first connection, at most three times: under
/// load, a Java AutoSwitch slave sometimes drops its first connection right after the handshake
/// and reconnects, and the fixtures are one connection's conversation.
fn capture(h: &Harness) -> Capture {
    for attempt in 1..=3 {
        match capture_once(h) {
            Ok(c) => return c,
            Err(seen) => {
                eprintln!("capture attempt {attempt}: the Java slave reconnected ({seen} connections); again")
            }
        }
    }
    panic!("the Java slave reconnected in each of three captures");
}

/// Master M at epoch 1 writes, takes epoch 2 and writes more; then an empty slave S joins through
/// the recording relay, catches up, and idles until a heartbeat and its last ack have passed.
/// `Err` with the number of connections if the slave connected more than once.
fn capture_once(h: &Harness) -> Result<Capture, usize> {
    let (mdir, sdir) = (temp(), temp());
    let mut m = JavaStore::start_autoswitch(h, mdir.path(), MASTER_ID, free_port(), &["--heartbeat", "1000"]);
    assert_eq!(m.change_to_master(1)["ok"], true);
    m.put(6, 200);
    let second = m.change_to_master(2);
    assert_eq!(epochs(&second), vec![(1, 0), (2, u64_of(&second, "maxPhyOffset"))]);
    m.put(6, 200);
    m.set_sync_state_set(&[MASTER_ID]);
    let end = m.max_offset();

    let relay = Relay::start(([127, 0, 0, 1], m.ha_port()).into());
    let mut s = JavaStore::start_autoswitch(h, sdir.path(), SLAVE_ID, free_port(), &["--heartbeat", "1000"]);
    assert_eq!(s.change_to_slave(&relay.address(), 2, MASTER_ID)["ok"], true);
    s.until("the slave caught up", |st| u64_of(st, "maxPhyOffset") == end);
    relay.until("a heartbeat and the last ack", |r| {
        let Some(c) = r.last().map(Capture::from_recording) else { return false };
        let hb = c.master().iter().any(|f| matches!(&f.1, MasterFrame::Transfer { body, offset, .. } if body.is_empty() && *offset == end as i64));
        let acked = c.slave().iter().any(|f| f.1 == SlaveFrame::Report { max_offset: end as i64 });
        hb && acked
    });
    let learned = epochs(&s.status());
    s.shutdown();
    m.shutdown();
    let recordings = relay.recordings();
    if recordings.len() > 1 {
        return Err(recordings.len());
    }
    let c = Capture::from_recording(&recordings[0]);
    // The Java slave records an epoch each time a frame's label changes, nothing more: the chunk
    // that ends epoch 1 is labelled epoch 2 (doc §1), so it has epoch 1 only if a heartbeat
    // labelled epoch 1 happened to come first (a race between the two heartbeat timers).
    let mut labels: Vec<(i64, u64)> = Vec::new();
    for (_, f) in c.master() {
        if let MasterFrame::Transfer { epoch, epoch_start, .. } = f {
            if labels.last().is_none_or(|l| l.0 != i64::from(epoch)) {
                labels.push((i64::from(epoch), epoch_start as u64));
            }
        }
    }
    assert_eq!(learned, labels, "the fresh Java slave's epochs are not the labels it received");
    eprintln!("capture: the fresh slave recorded {learned:?}; its master has {:?}", epochs(&second));
    Ok(c)
}

#[test]
fn java_5_wire_matches_the_golden_fixtures() {
    let Some(h) = harness(ROCKETMQ_5, "java_5_wire_matches_the_golden_fixtures") else { return };
    let live = capture(&h);
    check_layouts(&live, FRESH);
    if regenerate() {
        live.store("");
        for (name, bytes) in live.frames() {
            std::fs::write(fixtures().join(name), bytes).unwrap();
        }
        return;
    }
    let stored = Capture::load("");
    assert_eq!(live.shape(), stored.shape(), "Java's wire differs from the fixtures");
}

/// A (epoch 1) feeds B; B stops; A writes a tail B never sees; B comes back, becomes master at
/// epoch 2 and writes; A follows B (through a recording relay), truncates its divergent tail to
/// the consistent point, and ends with B's bytes and B's epoch list.
#[test]
fn a_java_master_that_lost_leadership_truncates_its_divergent_tail_and_follows_the_new_master() {
    let Some(h) = harness(ROCKETMQ_5, "a_java_master_that_lost_leadership_truncates") else { return };
    let (adir, bdir) = (temp(), temp());
    let (a_ha, b_ha) = (free_port(), free_port());
    let args = ["--heartbeat", "1000"];
    let mut a = JavaStore::start_autoswitch(&h, adir.path(), 1, a_ha, &args);
    let mut b = JavaStore::start_autoswitch(&h, bdir.path(), 2, b_ha, &args);

    assert_eq!(a.change_to_master(1)["ok"], true);
    a.set_sync_state_set(&[1]);
    let s = b.change_to_slave(&addr(a_ha), 1, 1);
    assert_eq!(s["ok"], true);
    assert_eq!(s["role"], "SLAVE");
    a.put(20, 500);
    let replicated = a.max_offset();
    b.until("B caught up with A", |s| u64_of(s, "maxPhyOffset") == replicated);
    let sb = b.until("B's confirmOffset reached A's end", |s| u64_of(s, "confirmOffset") == replicated);
    assert_eq!(epochs(&sb), vec![(1, 0)], "B learned epoch 1 from A's frames");

    // B goes away; A writes a tail nobody else has.
    b.shutdown();
    a.put(10, 300);
    let diverged = a.max_offset();
    assert!(diverged > replicated);

    // B comes back and is promoted at epoch 2; a lower epoch is refused.
    let mut b = JavaStore::start_autoswitch(&h, bdir.path(), 2, b_ha, &args);
    assert_eq!(epochs(&b.status()), vec![(1, 0)], "B's epoch file survived its restart");
    assert_eq!(b.change_to_master(0)["ok"], false, "changeToMaster below the last epoch");
    let promoted = b.change_to_master(2);
    assert_eq!(promoted["ok"], true);
    let start2 = u64_of(&promoted, "maxPhyOffset");
    assert_eq!(start2, replicated);
    assert_eq!(epochs(&promoted), vec![(1, 0), (2, replicated)]);
    b.set_sync_state_set(&[2]);
    b.put(15, 700);
    let end = b.max_offset();

    // A follows B through the relay.
    let relay = Relay::start(([127, 0, 0, 1], b_ha).into());
    assert_eq!(a.change_to_slave(&relay.address(), 2, 2)["ok"], true);
    let sa = a.until("A caught up with B", |s| {
        u64_of(s, "maxPhyOffset") == end && u64_of(s, "confirmOffset") == end && epochs(s).len() == 2
    });
    let sb = b.status();
    assert_eq!(epochs(&sa), vec![(1, 0), (2, replicated)], "A's epochs after the rejoin");
    assert_eq!(epochs(&sa), epochs(&sb));
    assert_eq!(sa["epochFile"], sb["epochFile"], "the epochFileCheckpoint files differ");
    assert_eq!(sa["role"], "SLAVE");
    assert_same_segments(adir.path(), bdir.path(), SEG, 0, u64_of(&sb, "confirmOffset"));

    // On the wire: B's handshake reply names both epochs, and A's first ack is the cut point.
    // Under load the Java slave sometimes drops its first connection right after the handshake
    // and its first ack, and reconnects: the end and the heartbeat then come on the last one.
    let rec = relay.until("A's ack of B's end and a heartbeat", |r| {
        r.last().map(Capture::from_recording).is_some_and(|c| {
            let acked = c.slave().iter().any(|f| f.1 == SlaveFrame::Report { max_offset: end as i64 });
            let heartbeat = c.master().iter().any(
                |f| matches!(&f.1, MasterFrame::Transfer { body, offset, .. } if body.is_empty() && *offset == end as i64),
            );
            acked && heartbeat
        })
    });
    let c = Capture::from_recording(&rec[0]);
    let slave = c.slave();
    assert_eq!(
        slave[0].1,
        SlaveFrame::Handshake { sync_from_last_file: 0, async_learner: 0, broker_id: 1 },
        "A's handshake"
    );
    let first_ack = slave.iter().find_map(|f| match f.1 {
        SlaveFrame::Report { max_offset } => Some(max_offset),
        SlaveFrame::Handshake { .. } => None,
    });
    assert_eq!(first_ack, Some(replicated as i64), "A's first ack after truncating is the consistent point");
    let master = c.master();
    assert_eq!(
        master[0].1,
        MasterFrame::Handshake {
            max_offset: end as i64,
            last_epoch: 2,
            epochs: vec![(1, 0), (2, replicated as i64)]
        }
    );
    if rec.len() > 1 {
        eprintln!(
            "rejoin: the Java slave reconnected ({} connections); its first connection's handshake and \
             first ack were checked, the whole conversation is compared with the fixtures only when it \
             keeps one connection",
            rec.len()
        );
        drop(relay);
        a.shutdown();
        b.shutdown();
        return;
    }
    observe("rejoin", &rec[0], diverged, replicated);
    check_layouts(&c, Expect { broker_id: 1, first_ack: replicated as i64 });
    if regenerate() {
        c.store("rejoin-");
    } else {
        assert_eq!(c.shape(), Capture::load("rejoin-").shape(), "Java's rejoin differs from the fixtures");
    }
    drop(relay);
    a.shutdown();
    b.shutdown();
}

/// Prints the timing of a relayed connection (for the report; nothing here is asserted).
fn observe(what: &str, r: &Recording, diverged: u64, cut: u64) {
    let Some(t0) = r.chunks.first().map(|c| c.at) else { return };
    let handshakes = slave_frames(&r.stream(Direction::ToMaster))
        .unwrap()
        .iter()
        .filter(|f| matches!(f.1, SlaveFrame::Handshake { .. }))
        .count();
    let reply = r.chunks.iter().find(|c| c.direction == Direction::ToSlave).map(|c| c.at - t0);
    // The first chunk after the reply that the slave sent: its first ack.
    let ack = r
        .chunks
        .iter()
        .filter(|c| c.direction == Direction::ToMaster)
        .find(|c| c.bytes.len() >= 4 && i32_at(&c.bytes, 0) == TRANSFER)
        .map(|c| c.at - t0);
    eprintln!(
        "{what}: {handshakes} handshake(s) from the slave; reply after {reply:?}; first ack after {ack:?}; \
         tail {diverged} cut to {cut}"
    );
}

#[test]
fn the_4_9_harness_refuses_autoswitch_mode_with_a_clear_error() {
    let Some(h) = harness(ROCKETMQ_4, "the_4_9_harness_refuses_autoswitch_mode") else { return };
    let dir = temp();
    let refused =
        std::panic::catch_unwind(|| JavaStore::start_autoswitch(&h, dir.path(), 1, free_port(), &[]));
    let why = refused.err().expect("the 4.9.x harness ran controller mode");
    let why = why.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(why.contains("--mode autoswitch needs RocketMQ 5.x"), "unclear refusal: {why}");
}

// ---- a logship master in controller mode, Java 5.5.1 slaves ---------------------------------

/// logship's AutoSwitch master service (controller mode, over the store's `CommitLog`) on each
/// adapter, serving Java 5.5.1 controller-mode slaves: a fresh slave gets every byte and both
/// of logship's epochs, and SYNC puts wait for its acks; a Java store that led an epoch of its
/// own meanwhile truncates its divergent tail against logship's epoch list and follows.
mod support;

mod logship_master {
    use std::collections::BTreeSet;
    use std::sync::Arc;
    use std::time::Duration;

    use logship::core::service::{MasterControllerConfig, MasterServiceConfig};
    use logship::core::{BrokerRole, EpochLog, MasterConfig, PutStatus};
    use logship::core::{EpochEntry, autoswitch::SyncPolicy};
    use logship::store::{CommitLog, Message, StoreConfig};

    use super::*;

    use crate::support::{AnyMaster, Side, eventually, run};

    const LOGSHIP_ID: u64 = 1;
    const JAVA_ID: u64 = 2;

    fn open(dir: &Path) -> Arc<CommitLog> {
        let mut c = StoreConfig::default();
        c.mapped_file_size_commit_log = SEG;
        c.max_message_size = 256 * 1024;
        c.disk_space_warning_level_ratio = 1.0;
        Arc::new(CommitLog::open(dir, c).unwrap())
    }

    /// A SYNC_MASTER in controller mode at `epoch`: puts wait for every member of the
    /// sync-state-set, which starts as logship alone and takes a slave once it caught up.
    fn controller(epoch: i32) -> MasterServiceConfig {
        MasterServiceConfig {
            core: MasterConfig {
                mapped_file_size_commit_log: SEG,
                heartbeat_interval: Duration::from_millis(500),
                ..MasterConfig::default()
            },
            role: BrokerRole::SyncMaster,
            slave_timeout: Duration::from_secs(10),
            controller: Some(MasterControllerConfig {
                broker_id: LOGSHIP_ID as i64,
                epoch,
                sync_state_set: BTreeSet::from([LOGSHIP_ID as i64]),
                sync: SyncPolicy { all_ack_in_sync_state_set: true, ..SyncPolicy::default() },
                ..MasterControllerConfig::default()
            }),
            ..MasterServiceConfig::default()
        }
    }

    async fn put_all(master: &AnyMaster<CommitLog>, who: &[u8], from: u64, count: u64, size: usize) -> u64 {
        let mut end = 0;
        for i in from..from + count {
            let r = master.put(Message::new("AutoSwitchTopic", (i % 4) as i32, body(who, i, size))).await;
            assert_eq!(r.status, PutStatus::PutOk, "put {i}");
            end = r.end();
        }
        end
    }

    /// Waits until logship's sync-state-set holds the Java slave (it caught up).
    async fn until_member(master: &AnyMaster<CommitLog>, id: u64) {
        eventually(Duration::from_secs(30), "the Java slave in the sync-state-set", || async {
            let s = master.status().await;
            s.autoswitch.filter(|a| a.sync_state_set.contains(&(id as i64))).map(|_| ())
        })
        .await;
    }

    fn java_epochs(status: &Value) -> Vec<EpochEntry> {
        epochs(status)
            .into_iter()
            .map(|(epoch, start)| EpochEntry { epoch: epoch as i32, start_offset: start })
            .collect()
    }

    fn a_fresh_java_slave_gets_both_epochs_byte_identical_and_acks_sync_puts(side: Side, test: &str) {
        let Some(h) = harness(ROCKETMQ_5, test) else { return };
        run(async {
            let (ldir, jdir) = (temp(), temp());
            let store = open(ldir.path());
            let first = side.master(controller(1), store.clone()).await;
            let e1 = put_all(&first, b"logship", 0, 30, 400).await;
            first.shutdown().await;
            // Becoming master again at epoch 2 is a new service over the same log.
            let master = side.master(controller(2), store.clone()).await;
            let e2 = put_all(&master, b"logship", 30, 20, 700).await;
            let ours =
                vec![EpochEntry { epoch: 1, start_offset: 0 }, EpochEntry { epoch: 2, start_offset: e1 }];
            assert_eq!(store.epochs(), ours, "each service recorded its epoch before its first put");

            let mut java =
                JavaStore::start_autoswitch(&h, jdir.path(), JAVA_ID, free_port(), &["--heartbeat", "1000"]);
            let addr = master.addr().to_string();
            assert_eq!(java.change_to_slave(&addr, 2, LOGSHIP_ID)["ok"], true);
            java.until("the Java slave caught up", |s| u64_of(s, "maxPhyOffset") == e2);
            until_member(&master, JAVA_ID).await;
            // Now every SYNC put waits for the Java slave's ack.
            let end = put_all(&master, b"logship", 50, 10, 300).await;
            let js = java.until("the Java slave's confirmOffset reached the end", |s| {
                u64_of(s, "maxPhyOffset") == end && u64_of(s, "confirmOffset") == end
            });
            assert_eq!(java_epochs(&js), ours, "the Java slave's epoch list is logship's");
            assert_eq!(js["role"], "SLAVE");
            let status = master.status().await;
            let a = status.autoswitch.expect("controller mode");
            assert_eq!((a.epoch, a.confirm_offset), (2, end));
            assert_eq!(store.confirm_offset(), end, "the master's confirmOffset is in its log");
            assert_eq!(status.slaves.len(), 1);
            assert!(status.slaves[0].in_sync);
            assert_same_segments(ldir.path(), jdir.path(), SEG, 0, end);
            java.shutdown();
            master.shutdown().await;
            assert!(e1 < e2 && e2 < end);
        });
    }

    fn a_java_store_that_led_an_epoch_meanwhile_cuts_its_tail_and_takes_logships_bytes(
        side: Side,
        test: &str,
    ) {
        let Some(h) = harness(ROCKETMQ_5, test) else { return };
        run(async {
            let (ldir, jdir) = (temp(), temp());
            let store = open(ldir.path());
            // logship leads epoch 1; the Java store follows and catches up.
            let first = side.master(controller(1), store.clone()).await;
            let mut java =
                JavaStore::start_autoswitch(&h, jdir.path(), JAVA_ID, free_port(), &["--heartbeat", "1000"]);
            assert_eq!(java.change_to_slave(&first.addr().to_string(), 1, LOGSHIP_ID)["ok"], true);
            let shared = put_all(&first, b"logship", 0, 20, 500).await;
            java.until("the Java slave caught up", |s| u64_of(s, "maxPhyOffset") == shared);
            first.shutdown().await;

            // The Java store leads epoch 2 and writes a tail logship never sees.
            assert_eq!(java.change_to_master(2)["ok"], true);
            java.set_sync_state_set(&[JAVA_ID]);
            java.put(10, 300);
            let diverged = java.max_offset();
            assert!(diverged > shared);

            // logship is elected at epoch 3 from its shorter log and writes on.
            let master = side.master(controller(3), store.clone()).await;
            let end = put_all(&master, b"logship", 20, 15, 700).await;
            let ours =
                vec![EpochEntry { epoch: 1, start_offset: 0 }, EpochEntry { epoch: 3, start_offset: shared }];
            assert_eq!(store.epochs(), ours);

            // The Java store follows logship: it cuts its epoch-2 tail and takes logship's bytes.
            let relay = Relay::start(master.addr());
            assert_eq!(java.change_to_slave(&relay.address(), 3, LOGSHIP_ID)["ok"], true);
            let js = java.until("the Java store truncated and caught up", caught_up_to(end));
            assert_same_segments(ldir.path(), jdir.path(), SEG, 0, end);
            assert_eq!(js["role"], "SLAVE");
            let (reply, first_ack) = first_exchange(&relay);
            assert_eq!(
                reply,
                MasterFrame::Handshake {
                    max_offset: end as i64,
                    last_epoch: 3,
                    epochs: vec![(1, 0), (3, shared as i64)]
                }
            );
            assert_eq!(first_ack, shared, "the Java store's first ack is the consistent point");
            // Java 5.5.1 keeps its own epoch 2 at the cut: its doTruncate cuts the epoch list only
            // if the cut lies below the max offset it reads *after* truncating the files, which it
            // never does; and it then refuses logship's epoch 3, which starts at the same offset.
            // Its bytes are logship's all the same.
            let stale =
                vec![EpochEntry { epoch: 1, start_offset: 0 }, EpochEntry { epoch: 2, start_offset: shared }];
            assert_eq!(java_epochs(&js), stale);
            until_member(&master, JAVA_ID).await;
            assert_eq!(master.status().await.autoswitch.unwrap().confirm_offset, end);

            // So on every reconnect it finds epoch 1 as the last one it shares with logship, cuts to
            // its end again and takes the rest anew; logship serves it the same bytes again.
            let again = Relay::start(master.addr());
            assert_eq!(java.change_to_slave(&again.address(), 3, LOGSHIP_ID)["ok"], true);
            let (_, first_ack) = first_exchange(&again);
            assert_eq!(first_ack, shared, "the Java store cut its log to the end of epoch 1 again");
            let end = put_all(&master, b"logship", 35, 5, 700).await;
            java.until("the Java store caught up again", caught_up_to(end));
            assert_same_segments(ldir.path(), jdir.path(), SEG, 0, end);
            drop((relay, again));
            java.shutdown();
            master.shutdown().await;
            assert_eq!(store.bounds().max, end);
        });
    }

    fn caught_up_to(end: u64) -> impl FnMut(&Value) -> bool {
        move |s| u64_of(s, "maxPhyOffset") == end && u64_of(s, "confirmOffset") == end
    }

    /// The handshake reply and the slave's first ack on the first connection through `relay`.
    fn first_exchange(relay: &Relay) -> (MasterFrame, u64) {
        let recordings = relay.until("a handshake reply and a first ack", |r| {
            r.first().is_some_and(|r| {
                let acked = slave_frames(&r.stream(Direction::ToMaster))
                    .unwrap()
                    .iter()
                    .any(|f| matches!(f.1, SlaveFrame::Report { .. }));
                acked && !master_frames(&r.stream(Direction::ToSlave)).unwrap().is_empty()
            })
        });
        let r = &recordings[0];
        let reply = master_frames(&r.stream(Direction::ToSlave)).unwrap().remove(0).1;
        let ack = slave_frames(&r.stream(Direction::ToMaster))
            .unwrap()
            .into_iter()
            .find_map(|f| match f.1 {
                SlaveFrame::Report { max_offset } => Some(max_offset as u64),
                SlaveFrame::Handshake { .. } => None,
            })
            .unwrap();
        (reply, ack)
    }

    #[test]
    fn tokio_a_fresh_java_slave_gets_both_epochs_byte_identical_and_acks_sync_puts() {
        a_fresh_java_slave_gets_both_epochs_byte_identical_and_acks_sync_puts(
            Side::tokio(),
            "tokio_a_fresh_java_slave",
        );
    }

    #[test]
    fn smol_a_fresh_java_slave_gets_both_epochs_byte_identical_and_acks_sync_puts() {
        a_fresh_java_slave_gets_both_epochs_byte_identical_and_acks_sync_puts(
            Side::smol(),
            "smol_a_fresh_java_slave",
        );
    }

    #[test]
    fn tokio_a_java_store_that_led_an_epoch_meanwhile_cuts_its_tail_and_takes_logships_bytes() {
        a_java_store_that_led_an_epoch_meanwhile_cuts_its_tail_and_takes_logships_bytes(
            Side::tokio(),
            "tokio_a_java_store_truncates",
        );
    }

    #[test]
    fn smol_a_java_store_that_led_an_epoch_meanwhile_cuts_its_tail_and_takes_logships_bytes() {
        a_java_store_that_led_an_epoch_meanwhile_cuts_its_tail_and_takes_logships_bytes(
            Side::smol(),
            "smol_a_java_store_truncates",
        );
    }
}

// ---- a logship slave of Java masters --------------------------------------------------------

/// A logship slave (its own store, on tokio and on smol) in controller mode, following RocketMQ
/// 5.5.1 masters through a failover: it must truncate a tail of epoch 1 the new master never had.
mod logship_slave {

    use std::sync::Arc;
    use std::time::Duration;

    use super::support::{Side, eventually, run};
    use logship::store::{CommitLog, StoreConfig};
    use logship_core::LogRead;
    use logship_core::service::{SlaveControllerConfig, SlaveServiceConfig, SlaveStatus};

    use super::*;

    /// The Java harness's topic and queue count.
    const TOPIC: &str = "JavaTopic";
    const QUEUES: i32 = 4;
    const SLAVE_ID: i64 = 3;

    fn open(dir: &Path) -> Arc<CommitLog> {
        let mut c = StoreConfig::default();
        c.mapped_file_size_commit_log = SEG;
        c.max_message_size = 256 * 1024;
        // A slave in controller mode indexes replicated messages only below confirmOffset.
        c.dispatch_up_to_confirm = true;
        Arc::new(CommitLog::open(dir, c).unwrap())
    }

    fn follow(master_ha: u16, master_epoch: i32, master_broker_id: i64) -> SlaveServiceConfig {
        let mut c = SlaveServiceConfig::new(addr(master_ha));
        c.core.heartbeat_interval = Duration::from_secs(1);
        c.core.reconnect_interval = Duration::from_millis(200);
        c.controller = Some(SlaveControllerConfig {
            broker_id: SLAVE_ID,
            master_broker_id,
            master_epoch,
            ..SlaveControllerConfig::default()
        });
        c
    }

    fn confirm(s: &SlaveStatus) -> u64 {
        s.autoswitch.as_ref().expect("controller mode").confirm_offset
    }

    /// The store's epochs as the harness prints Java's.
    fn epochs_of(store: &CommitLog) -> Vec<(i64, u64)> {
        store.epoch_log().unwrap().epochs().iter().map(|e| (i64::from(e.epoch), e.start_offset)).collect()
    }

    /// Every consume-queue entry of the harness's topic: each ends at or below `confirm`.
    fn indexed(store: &CommitLog, confirm: u64) -> usize {
        let mut n = 0;
        for q in 0..QUEUES {
            for e in store.read_queue(TOPIC, q, 0, 100_000).unwrap() {
                assert!(
                    e.physical_offset + u64::from(e.size) <= confirm,
                    "queue {q} indexes the message at {} past confirmOffset {confirm}",
                    e.physical_offset
                );
                n += 1;
            }
        }
        n
    }

    /// A (Java, epoch 1) feeds the logship slave S and Java B; B stops; A writes a tail only S
    /// gets; A goes away and B becomes master at epoch 2 and writes; S, now following B,
    /// refuses to cut the tail (A confirmed it) until the operator allows exactly those bytes,
    /// then cuts it and ends byte-identical to B up to confirmOffset, with B's epoch list, its
    /// consume queues never past confirmOffset.
    fn a_logship_slave_truncates_the_old_masters_tail_and_follows_the_new_java_master(side: Side) {
        let Some(h) = harness(ROCKETMQ_5, "a_logship_slave_truncates_the_old_masters_tail") else { return };
        let (adir, bdir, sdir) = (temp(), temp(), temp());
        let (a_ha, b_ha) = (free_port(), free_port());
        let args = ["--heartbeat", "1000"];
        let mut a = JavaStore::start_autoswitch(&h, adir.path(), 1, a_ha, &args);
        let mut b = JavaStore::start_autoswitch(&h, bdir.path(), 2, b_ha, &args);
        assert_eq!(a.change_to_master(1)["ok"], true);
        a.set_sync_state_set(&[1]);
        assert_eq!(b.change_to_slave(&addr(a_ha), 1, 1)["ok"], true);
        a.put(20, 500);
        let replicated = a.max_offset();
        b.until("B caught up with A", |s| u64_of(s, "maxPhyOffset") == replicated);

        let store = open(sdir.path());
        run(async {
            let slave = side.slave(follow(a_ha, 1, 1), store.clone()).await;
            eventually(Duration::from_secs(30), "S to catch up with A", || async {
                let s = slave.status().await;
                (s.max_offset == replicated && confirm(&s) == replicated).then_some(())
            })
            .await;
            assert_eq!(epochs_of(&store), vec![(1, 0)], "S learned epoch 1 from A's frames");

            // B goes away; A writes a tail that only S receives.
            b.shutdown();
            a.put(10, 300);
            let diverged = a.max_offset();
            let s = eventually(Duration::from_secs(30), "S to receive A's tail", || async {
                let s = slave.status().await;
                (s.max_offset == diverged && confirm(&s) == diverged).then_some(s)
            })
            .await;
            assert_eq!(s.autoswitch.as_ref().unwrap().master_last_epoch, Some(1));
            let java_indexed: usize = (0..QUEUES).map(|q| a.queue(q).len()).sum();
            eventually(Duration::from_secs(10), "S to index what A indexed", || async {
                (indexed(&store, confirm(&slave.status().await)) == java_indexed).then_some(())
            })
            .await;
            slave.shutdown().await;
        });
        a.shutdown();

        // B comes back as master at epoch 2 from the end it had, and writes.
        let mut b = JavaStore::start_autoswitch(&h, bdir.path(), 2, b_ha, &args);
        let promoted = b.change_to_master(2);
        assert_eq!(promoted["ok"], true);
        assert_eq!(epochs(&promoted), vec![(1, 0), (2, replicated)]);
        b.set_sync_state_set(&[2]);
        b.put(15, 700);
        let end = b.max_offset();
        b.wait_dispatch();
        let java_indexed: usize = (0..QUEUES).map(|q| b.queue(q).len()).sum();
        let diverged = store.max_offset();
        assert!(diverged > replicated && end != diverged);

        // changeToSlave: a new slave service over the same store follows B at epoch 2. A's
        // tail was confirmed (A alone in its set), so S refuses to cut it, names the exact
        // bytes, and cuts them only once the operator allows exactly that range.
        run(async {
            let refusing = side.slave(follow(b_ha, 2, 2), store.clone()).await;
            let why =
                eventually(Duration::from_secs(30), "S to refuse cutting its confirmed tail", || async {
                    let refusals = refusing.status().await.autoswitch?.refusals;
                    (refusals.would_truncate_confirmed > 0).then_some(refusals.current?)
                })
                .await;
            assert!(why.contains(&format!("haSlaveDropConfirmed={replicated}-{diverged}")), "{why}");
            assert_eq!(store.max_offset(), diverged, "nothing was cut");
            refusing.shutdown().await;
            let mut allowed = follow(b_ha, 2, 2);
            allowed.controller.as_mut().unwrap().drop_confirmed = Some(replicated..diverged);
            let slave = side.slave(allowed, store.clone()).await;
            let s = eventually(Duration::from_secs(30), "S to follow B", || async {
                let s = slave.status().await;
                (s.max_offset == end && confirm(&s) == end).then_some(s)
            })
            .await;
            let auto = s.autoswitch.as_ref().unwrap();
            assert_eq!((auto.truncations, auto.truncated_bytes), (1, diverged - replicated), "{auto:?}");
            assert_eq!(auto.consistent_point, Some(replicated));
            assert_eq!((auto.master_last_epoch, auto.master_epoch, auto.master_broker_id), (Some(2), 2, 2));
            eventually(Duration::from_secs(10), "S to index what B indexed", || async {
                (indexed(&store, confirm(&slave.status().await)) == java_indexed).then_some(())
            })
            .await;
            slave.shutdown().await;
        });
        let sb = b.status();
        assert_eq!(epochs_of(&store), epochs(&sb), "S's epochs are B's");
        let confirmed = u64_of(&sb, "confirmOffset");
        assert_eq!(confirmed, end);
        store.flush().unwrap();
        assert_same_segments(bdir.path(), sdir.path(), SEG, 0, confirmed);
        let file = std::fs::read_to_string(sdir.path().join("epochFileCheckpoint")).unwrap();
        assert_eq!(Some(file.as_str()), sb["epochFile"].as_str(), "the epochFileCheckpoint files differ");
        b.shutdown();
    }

    #[test]
    fn tokio_slave_truncates_the_old_masters_tail_and_follows_the_new_java_master() {
        a_logship_slave_truncates_the_old_masters_tail_and_follows_the_new_java_master(Side::tokio());
    }

    #[test]
    fn smol_slave_truncates_the_old_masters_tail_and_follows_the_new_java_master() {
        a_logship_slave_truncates_the_old_masters_tail_and_follows_the_new_java_master(Side::smol());
    }
}
