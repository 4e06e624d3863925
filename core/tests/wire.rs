//! Byte-level conformance: the worked example of protocol notes §2.2, codec round-trips, and
//! chunking invariance, plus property tests that drive whole sessions with arbitrary input.

mod common;

use bytes::Bytes;
use common::*;
use logship_core::classic::frame::*;
use logship_core::classic::*;
use logship_core::fuzzing::{MasterOp, SlaveOp, run_master, run_slave, small_master_config};
use logship_core::*;
use proptest::prelude::*;

/// Protocol notes §2.2: 1 GiB files, master max 0x4000_1234, empty slave.
#[test]
fn worked_example_of_protocol_notes_2_2_byte_for_byte() {
    let clock = Clock::new();
    let gib = 1u64 << 30;
    let config = MasterConfig {
        new_slave_start: NewSlaveStart::LastFile,
        mapped_file_size_commit_log: gib,
        transfer_batch_size: 8192, // large enough to send the whole tail in one frame
        ..MasterConfig::default()
    };
    let mut master = Master::new(config, clock.at(0), LogBounds { min: 0, max: 0x4000_1234 }).unwrap();
    let (mut slave, out) = streaming_slave(SlaveConfig::default(), &clock, 0);
    let conn = ConnId(1);
    master.handle_input(clock.at(0), MasterInput::Accepted { conn }).unwrap();

    // slave sends 00 00 00 00 00 00 00 00
    let SlaveOutput::Report(first) = out[0] else { panic!("{out:?}") };
    let first = encode_report(first);
    assert_eq!(first, [0, 0, 0, 0, 0, 0, 0, 0]);
    master
        .handle_input(clock.at(0), MasterInput::Received { conn, data: Bytes::copy_from_slice(&first) })
        .unwrap();

    // master starts at 0x4000_0000 and sends 00 00 00 00 40 00 00 00 | 00 00 12 34 | <4660 bytes>
    let (out, _) = drain_master(&mut master);
    let t = transmits(&out);
    assert_eq!(t.len(), 1);
    let MasterOutput::Transmit { header, body, .. } =
        out.iter().find(|o| matches!(o, MasterOutput::Transmit { .. })).unwrap().clone()
    else {
        unreachable!()
    };
    assert_eq!(header, [0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0x12, 0x34]);
    assert_eq!(body, Some(LogSpan { offset: 0x4000_0000, len: 4660 }));
    master.handle_input(clock.at(0), MasterInput::Sent { conn }).unwrap();

    // slave appends and acks 00 00 00 00 40 00 12 34
    let mut wire = header.to_vec();
    wire.extend(std::iter::repeat_n(0xA5u8, 4660));
    slave.handle_input(clock.at(1), SlaveInput::Received(Bytes::from(wire))).unwrap();
    let out = drain_slave(&mut slave).0;
    assert_eq!(slave_appends(&out)[0].0, 0x4000_0000);
    slave.handle_input(clock.at(1), SlaveInput::Appended { end: 0x4000_1234 }).unwrap();
    let out = drain_slave(&mut slave).0;
    assert_eq!(out, [SlaveOutput::Report(0x4000_1234)]);
    assert_eq!(encode_report(0x4000_1234), [0, 0, 0, 0, 0x40, 0, 0x12, 0x34]);
    master
        .handle_input(
            clock.at(1),
            MasterInput::Received { conn, data: Bytes::copy_from_slice(&[0, 0, 0, 0, 0x40, 0, 0x12, 0x34]) },
        )
        .unwrap();
    let _ = drain_master(&mut master);

    // an idle master later sends heartbeat 00 00 00 00 40 00 12 34 | 00 00 00 00
    master.handle_timeout(clock.at(5_000));
    let (out, _) = drain_master(&mut master);
    let MasterOutput::Transmit { header, body: None, .. } = out[0] else { panic!("{out:?}") };
    assert_eq!(header, [0, 0, 0, 0, 0x40, 0, 0x12, 0x34, 0, 0, 0, 0]);
}

fn any_push() -> impl Strategy<Value = (u64, Vec<u8>)> {
    (0..=MAX_WIRE_OFFSET, proptest::collection::vec(any::<u8>(), 0..300))
}

proptest! {
    #[test]
    fn push_header_round_trips(offset in 0..=MAX_WIRE_OFFSET, body_len in 0u32..=MAX_JAVA_FRAME_BODY) {
        let h = PushHeader { offset, body_len };
        prop_assert_eq!(PushHeader::decode(&h.encode(), MAX_JAVA_FRAME_BODY), Ok(h));
    }

    #[test]
    fn report_round_trips(offset in 0..=MAX_WIRE_OFFSET) {
        let bytes = encode_report(offset);
        prop_assert_eq!(ReportDecoder::new().decode(&mut &bytes[..]), Some(Ok(offset)));
    }

    /// Any split of a stream of pushes decodes to the same frames.
    #[test]
    fn push_stream_decodes_the_same_under_any_chunking(
        frames in proptest::collection::vec(any_push(), 0..12),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..20),
    ) {
        let mut stream = Vec::new();
        for (offset, body) in &frames {
            stream.extend(PushHeader { offset: *offset, body_len: body.len() as u32 }.encode());
            stream.extend(body);
        }
        let mut points: Vec<usize> = cuts.iter().map(|i| i.index(stream.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for p in points.into_iter().chain([stream.len()]) {
            chunks.push(p - last);
            last = p;
        }
        let (decoded, error) = logship_core::fuzzing::decode_pushes(&stream, 300, chunks);
        prop_assert_eq!(error, None);
        let got: Vec<_> = decoded.into_iter().map(|p| (p.offset, p.body.to_vec())).collect();
        prop_assert_eq!(got, frames);
    }

    /// Any split of a stream of reports decodes to the same offsets.
    #[test]
    fn report_stream_decodes_the_same_under_any_chunking(
        offsets in proptest::collection::vec(0..=MAX_WIRE_OFFSET, 0..20),
        seed in any::<u8>(),
    ) {
        let stream: Vec<u8> = offsets.iter().flat_map(|o| encode_report(*o)).collect();
        let mut input = vec![seed];
        input.extend(&stream);
        logship_core::fuzzing::report_decoder(&input);
    }
}

fn master_op() -> impl Strategy<Value = MasterOp> {
    let conn = 0u8..4;
    prop_oneof![
        1 => conn.clone().prop_map(MasterOp::Accept),
        1 => (conn.clone(), proptest::collection::vec(any::<u8>(), 0..20)).prop_map(|(c, d)| MasterOp::Receive(c, d)),
        3 => (conn.clone(), -300i16..50).prop_map(|(c, d)| MasterOp::Report(c, d)),
        3 => conn.clone().prop_map(MasterOp::Sent),
        1 => conn.prop_map(MasterOp::Closed),
        2 => any::<u16>().prop_map(MasterOp::Append),
        1 => (0u16..2_000).prop_map(MasterOp::Retain),
        1 => (any::<u8>(), 0u16..3_000, any::<u8>()).prop_map(|(i, b, d)| MasterOp::Await(i % 8, b, d)),
        1 => any::<u8>().prop_map(|i| MasterOp::Cancel(i % 8)),
        1 => (0u16..400).prop_map(MasterOp::Tick),
    ]
}

fn slave_op() -> impl Strategy<Value = SlaveOp> {
    prop_oneof![
        2 => Just(SlaveOp::Connect),
        1 => proptest::collection::vec(any::<u8>(), 0..30).prop_map(SlaveOp::Receive),
        4 => (any::<i8>(), 0u16..600).prop_map(|(d, n)| SlaveOp::Push(d, n)),
        1 => Just(SlaveOp::Closed),
        4 => Just(SlaveOp::Store),
        1 => Just(SlaveOp::Fail),
        1 => (0u16..400).prop_map(SlaveOp::Tick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// A master fed arbitrary input sequences never panics and never breaks a span, flow
    /// control or wait invariant (checked by `run_master` after every step).
    #[test]
    fn master_keeps_its_invariants_under_arbitrary_inputs(
        config in any::<u8>(),
        min in 0u64..3_000,
        len in 0u64..3_000,
        ops in proptest::collection::vec(master_op(), 0..150),
    ) {
        run_master(small_master_config(config), LogBounds { min, max: min + len }, &ops);
    }

    /// A slave fed arbitrary input sequences never panics, appends contiguously, and never
    /// reports bytes it has not stored (or made durable).
    #[test]
    fn slave_keeps_its_invariants_under_arbitrary_inputs(
        flushed in any::<bool>(),
        start in prop_oneof![Just(0u64), 1u64..5_000],
        ops in proptest::collection::vec(slave_op(), 0..150),
    ) {
        let config = SlaveConfig {
            heartbeat_interval: std::time::Duration::from_millis(50),
            housekeeping_interval: std::time::Duration::from_millis(200),
            reconnect_interval: std::time::Duration::from_millis(100),
            max_frame_body: 512,
            ack_on: if flushed { AckOn::Flushed } else { AckOn::Written },
            max_unstored: 2_048,
            max_first_offset: logship_core::DEFAULT_MAX_FIRST_OFFSET,
        };
        run_slave(config, start, &ops);
    }
}
