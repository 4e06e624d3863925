//! The AutoSwitch fuzz bodies under `cargo test`: fixed seeds and proptest inputs, so the fuzz
//! targets can never rot unnoticed.

use logship_core::EpochEntry;
use logship_core::autoswitch::frame::{
    HandshakeReply, HandshakeRequest, MasterFrame, SlaveFrame, TransferHeader,
};
use logship_core::autoswitch::fuzzing::*;
use proptest::prelude::*;

fn seeds() -> Vec<Vec<u8>> {
    let mut slave = vec![3u8];
    slave.extend(HandshakeRequest { sync_from_last_file: true, async_learner: false, broker_id: 2 }.encode());
    slave.extend(SlaveFrame::Report(0x1000).encode());
    let mut master = vec![9u8];
    master.extend(
        HandshakeReply {
            max_offset: 0x2000,
            last_epoch: 2,
            entries: vec![
                EpochEntry { epoch: 1, start_offset: 0 },
                EpochEntry { epoch: 2, start_offset: 0x1000 },
            ],
        }
        .encode(),
    );
    master.extend(
        MasterFrame::Transfer {
            header: TransferHeader {
                body_len: 3,
                offset: Some(0x2000),
                epoch: 2,
                epoch_start: 0x1000,
                confirm_offset: None,
            },
            body: bytes::Bytes::from_static(b"abc"),
        }
        .encode(),
    );
    let mut bad = vec![0u8, 0, 0, 0, 7];
    bad.extend([0xFF; 40]);
    let counting: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
    vec![vec![], vec![0], slave, master, bad, counting, vec![0xFF; 300], vec![2; 64], vec![0x55; 500]]
}

#[test]
fn autoswitch_fuzz_bodies_hold_on_fixed_seeds() {
    for input in seeds() {
        slave_frames(&input);
        master_frames(&input);
        master_session(&input);
        slave_session(&input);
    }
}

#[test]
fn autoswitch_fuzz_bodies_hold_on_pseudo_random_inputs() {
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    for len in 0..300usize {
        let input: Vec<u8> = (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 24) as u8
            })
            .collect();
        slave_frames(&input);
        master_frames(&input);
        master_session(&input);
        slave_session(&input);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn autoswitch_decoder_bodies_hold_on_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        slave_frames(&data);
        master_frames(&data);
    }

    #[test]
    fn autoswitch_session_bodies_hold_on_any_bytes(data in proptest::collection::vec(any::<u8>(), 0..1500)) {
        master_session(&data);
        slave_session(&data);
    }
}
