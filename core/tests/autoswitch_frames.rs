//! AutoSwitch frames A–D: golden vectors, typed errors, and round trips under any split.

use bytes::Bytes;
use logship_core::autoswitch::frame::*;
use logship_core::{EpochEntry, autoswitch::FrameError};
use proptest::prelude::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn decode_slave(stream: &[u8], cuts: &[usize]) -> (Vec<SlaveFrame>, Option<FrameError>) {
    let mut dec = SlaveFrameDecoder::new();
    let mut out = Vec::new();
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&stream.len())) {
        let cut = cut.clamp(at, stream.len());
        let mut part = &stream[at..cut];
        at = cut;
        while let Some(r) = dec.decode(&mut part) {
            match r {
                Ok(f) => out.push(f),
                Err(e) => return (out, Some(e)),
            }
        }
    }
    (out, None)
}

fn decode_master(stream: &[u8], cuts: &[usize], max_body: u32) -> (Vec<MasterFrame>, Option<FrameError>) {
    let mut dec = MasterFrameDecoder::new(max_body);
    let mut out = Vec::new();
    let mut at = 0;
    for &cut in cuts.iter().chain(std::iter::once(&stream.len())) {
        let cut = cut.clamp(at, stream.len());
        dec.extend(Bytes::copy_from_slice(&stream[at..cut]));
        at = cut;
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

#[test]
fn handshake_request_matches_the_golden_vector() {
    let a = HandshakeRequest { sync_from_last_file: false, async_learner: false, broker_id: 2 };
    assert_eq!(a.encode().to_vec(), hex("00000001 0000 0000 0000000000000002"));
    assert_eq!(decode_slave(&a.encode(), &[]), (vec![SlaveFrame::Handshake(a)], None));
}

#[test]
fn ack_matches_the_golden_vector() {
    assert_eq!(encode_report(0x1000).to_vec(), hex("00000002 0000000000001000"));
    assert_eq!(decode_slave(&encode_report(0x1000), &[]), (vec![SlaveFrame::Report(0x1000)], None));
}

#[test]
fn handshake_reply_matches_the_golden_vector() {
    let c = HandshakeReply {
        max_offset: 0x2000,
        last_epoch: 2,
        entries: vec![
            EpochEntry { epoch: 1, start_offset: 0 },
            EpochEntry { epoch: 2, start_offset: 0x1000 },
        ],
    };
    let golden = hex(
        "00000001 00000018 0000000000002000 00000002 00000001 0000000000000000 00000002 0000000000001000",
    );
    assert_eq!(c.encode(), golden);
    assert_eq!(decode_master(&golden, &[], 1024), (vec![MasterFrame::Handshake(c)], None));
}

#[test]
fn transfer_header_is_state_size_offset_epoch_start_confirm() {
    let h = TransferHeader {
        body_len: 3,
        offset: Some(0x10),
        epoch: 7,
        epoch_start: 0x8,
        confirm_offset: Some(0x9),
    };
    assert_eq!(
        h.encode().to_vec(),
        hex("00000002 00000003 0000000000000010 00000007 0000000000000008 0000000000000009")
    );
}

#[test]
fn only_a_flag_of_one_is_true_as_in_java() {
    let mut raw = HandshakeRequest { sync_from_last_file: true, async_learner: true, broker_id: -5 }.encode();
    assert_eq!(&raw[4..8], &[0, 1, 0, 1]);
    raw[5] = 2;
    let (frames, err) = decode_slave(&raw, &[]);
    assert_eq!(err, None);
    assert_eq!(
        frames,
        [SlaveFrame::Handshake(HandshakeRequest {
            sync_from_last_file: false,
            async_learner: true,
            broker_id: -5
        })]
    );
}

#[test]
fn slave_stream_with_an_unknown_state_is_refused_and_stays_refused() {
    for state in [0i32, 3, 4, -1, 99] {
        let mut raw = state.to_be_bytes().to_vec();
        raw.extend([0; 12]);
        assert_eq!(decode_slave(&raw, &[1, 2]).1, Some(FrameError::UnknownState { state }));
    }
    let mut dec = SlaveFrameDecoder::new();
    let mut bad: &[u8] = &[0, 0, 0, 9];
    assert!(matches!(dec.decode(&mut bad), Some(Err(FrameError::UnknownState { state: 9 }))));
    let good = encode_report(1);
    assert!(matches!(dec.decode(&mut &good[..]), Some(Err(FrameError::UnknownState { state: 9 }))));
}

#[test]
fn negative_ack_is_refused() {
    let mut raw = encode_report(0);
    raw[4..].copy_from_slice(&(-1i64).to_be_bytes());
    assert_eq!(
        decode_slave(&raw, &[]).1,
        Some(FrameError::NegativeOffset { field: "report offset", value: -1 })
    );
}

fn reply_header(size: i32, max: i64, last_epoch: i32) -> Vec<u8> {
    let mut v = 1i32.to_be_bytes().to_vec();
    v.extend(size.to_be_bytes());
    v.extend(max.to_be_bytes());
    v.extend(last_epoch.to_be_bytes());
    v
}

#[test]
fn handshake_reply_body_not_a_multiple_of_twelve_is_refused() {
    assert_eq!(
        decode_master(&reply_header(13, 0, 1), &[], 64).1,
        Some(FrameError::EpochListNotMultiple { size: 13 })
    );
}

#[test]
fn handshake_reply_with_more_than_a_thousand_epochs_is_refused_before_its_body() {
    assert_eq!(
        decode_master(&reply_header(12 * 1001, 0, 1), &[], 64).1,
        Some(FrameError::TooManyEpochs { count: 1001 })
    );
    let mut ok = reply_header(12 * 1000, 0, 1000);
    for i in 0..1000i32 {
        ok.extend((i + 1).to_be_bytes());
        ok.extend(i64::from(i).to_be_bytes());
    }
    let (frames, err) = decode_master(&ok, &[7, 100], 64);
    assert_eq!(err, None);
    assert!(matches!(&frames[..], [MasterFrame::Handshake(h)] if h.entries.len() == 1000));
}

#[test]
fn negative_sizes_offsets_and_epochs_are_refused_by_name() {
    assert_eq!(
        decode_master(&reply_header(-12, 0, 1), &[], 64).1,
        Some(FrameError::NegativeSize { size: -12 })
    );
    assert_eq!(
        decode_master(&reply_header(0, -1, 1), &[], 64).1,
        Some(FrameError::NegativeOffset { field: "master max offset", value: -1 })
    );
    let mut entry = reply_header(12, 0, 1);
    entry.extend((-2i32).to_be_bytes());
    entry.extend(0i64.to_be_bytes());
    assert_eq!(
        decode_master(&entry, &[], 64).1,
        Some(FrameError::NegativeEpoch { field: "epoch entry", value: -2 })
    );
    let header = |size: i32, offset: i64, epoch: i32, start: i64, confirm: i64| {
        let mut v = 2i32.to_be_bytes().to_vec();
        v.extend(size.to_be_bytes());
        v.extend(offset.to_be_bytes());
        v.extend(epoch.to_be_bytes());
        v.extend(start.to_be_bytes());
        v.extend(confirm.to_be_bytes());
        v
    };
    let err = |raw: Vec<u8>| decode_master(&raw, &[], 64).1;
    assert_eq!(err(header(65, 0, 1, 0, 0)), Some(FrameError::BodyTooLarge { len: 65, max: 64 }));
    assert_eq!(err(header(-1, 0, 1, 0, 0)), Some(FrameError::NegativeSize { size: -1 }));
    assert_eq!(
        err(header(1, -1, 1, 0, 0)),
        Some(FrameError::NegativeOffset { field: "transfer offset", value: -1 })
    );
    assert_eq!(
        err(header(0, -2, 1, 0, 0)),
        Some(FrameError::NegativeOffset { field: "transfer offset", value: -2 })
    );
    assert_eq!(
        err(header(0, 0, -1, 0, 0)),
        Some(FrameError::NegativeEpoch { field: "transfer epoch", value: -1 })
    );
    assert_eq!(
        err(header(0, 0, 1, -1, 0)),
        Some(FrameError::NegativeOffset { field: "epoch start offset", value: -1 })
    );
    assert_eq!(
        err(header(0, 0, 1, 0, -2)),
        Some(FrameError::NegativeOffset { field: "confirm offset", value: -2 })
    );
    assert_eq!(
        err(header(8, i64::MAX - 3, 1, 0, 0)),
        Some(FrameError::EndOverflows { offset: i64::MAX as u64 - 3, len: 8 })
    );
    // Java's -1 sentinels: a heartbeat from a master with nothing yet, an unset confirmOffset.
    let (frames, e) = decode_master(&header(0, -1, 1, 0, -1), &[], 64);
    assert_eq!(e, None);
    assert!(matches!(
        &frames[..],
        [MasterFrame::Transfer { header: TransferHeader { offset: None, confirm_offset: None, .. }, .. }]
    ));
}

#[test]
fn transfer_header_is_visible_before_its_body() {
    let h = TransferHeader {
        body_len: 5,
        offset: Some(100),
        epoch: 3,
        epoch_start: 50,
        confirm_offset: Some(90),
    };
    let mut wire = h.encode().to_vec();
    wire.extend(b"hello");
    let mut dec = MasterFrameDecoder::new(64);
    dec.extend(Bytes::copy_from_slice(&wire[..35]));
    assert_eq!(dec.peek_header(), Ok(None));
    dec.extend(Bytes::copy_from_slice(&wire[35..38]));
    assert_eq!(dec.peek_header(), Ok(Some(MasterHeader::Transfer(h))));
    assert_eq!(dec.decode(), Ok(None));
    dec.extend(Bytes::copy_from_slice(&wire[38..]));
    assert_eq!(
        dec.decode(),
        Ok(Some(MasterFrame::Transfer { header: h, body: Bytes::from_static(b"hello") }))
    );
    assert_eq!(dec.buffered(), 0);
}

fn entry_list() -> impl Strategy<Value = Vec<EpochEntry>> {
    proptest::collection::vec((0..i32::MAX, 0..i64::MAX as u64), 0..20)
        .prop_map(|v| v.into_iter().map(|(epoch, start_offset)| EpochEntry { epoch, start_offset }).collect())
}

fn master_frame() -> impl Strategy<Value = MasterFrame> {
    let off = 0..(i64::MAX as u64 / 2);
    prop_oneof![
        (off.clone(), -1..i32::MAX, entry_list()).prop_map(|(max_offset, last_epoch, entries)| {
            MasterFrame::Handshake(HandshakeReply { max_offset, last_epoch, entries })
        }),
        (
            proptest::option::of(off.clone()),
            0..i32::MAX,
            off.clone(),
            proptest::option::of(off),
            proptest::collection::vec(any::<u8>(), 0..80)
        )
            .prop_map(|(offset, epoch, epoch_start, confirm_offset, body)| {
                let offset = if body.is_empty() { offset } else { Some(offset.unwrap_or(0)) };
                MasterFrame::Transfer {
                    header: TransferHeader {
                        body_len: body.len() as u32,
                        offset,
                        epoch,
                        epoch_start,
                        confirm_offset,
                    },
                    body: Bytes::from(body),
                }
            }),
    ]
}

fn slave_frame() -> impl Strategy<Value = SlaveFrame> {
    prop_oneof![
        (any::<bool>(), any::<bool>(), any::<i64>()).prop_map(|(s, l, id)| SlaveFrame::Handshake(
            HandshakeRequest { sync_from_last_file: s, async_learner: l, broker_id: id }
        )),
        (0..=i64::MAX as u64).prop_map(SlaveFrame::Report),
    ]
}

proptest! {
    #[test]
    fn master_frames_round_trip_under_any_split(frames in proptest::collection::vec(master_frame(), 0..8), cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6)) {
        let wire: Vec<u8> = frames.iter().flat_map(MasterFrame::encode).collect();
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(wire.len() + 1)).collect();
        cuts.sort_unstable();
        prop_assert_eq!(decode_master(&wire, &cuts, 80), (frames, None));
    }

    #[test]
    fn slave_frames_round_trip_under_any_split(frames in proptest::collection::vec(slave_frame(), 0..12), cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6)) {
        let wire: Vec<u8> = frames.iter().flat_map(SlaveFrame::encode).collect();
        let mut cuts: Vec<usize> = cuts.iter().map(|i| i.index(wire.len() + 1)).collect();
        cuts.sort_unstable();
        prop_assert_eq!(decode_slave(&wire, &cuts), (frames, None));
    }
}
