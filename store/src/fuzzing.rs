//! Fuzz bodies of the store. Each `pub fn` here is the whole body of one `cargo fuzz` target in
//! `fuzz/`, and runs under `cargo test` on fixed inputs too. Not a stable API.

use crate::{EpochEntry, EpochFile};

/// The most entries the body builds from its input (every prefix of their encoding is decoded).
const MAX_ENTRIES: usize = 64;

/// Whether `entries` is a list the epoch file may hold, checked here independently of the
/// decoder: epochs strictly increasing and not negative, start offsets non-decreasing and
/// within Java's `long`.
fn holdable(entries: &[EpochEntry]) -> bool {
    entries.iter().all(|e| e.epoch >= 0 && e.start_offset <= i64::MAX as u64)
        && entries.windows(2).all(|w| w[0].epoch < w[1].epoch && w[0].start_offset <= w[1].start_offset)
}

/// An epoch list drawn from fuzzer bytes: byte 0 picks the first epoch's range, then each
/// 3 bytes are an epoch step (0 breaks the order) and a start-offset step.
fn entries_from(data: &[u8]) -> (Vec<EpochEntry>, &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return (Vec::new(), data) };
    let mut epoch: u64 = if mode & 0x80 != 0 { i32::MAX as u64 - 4 } else { 0 };
    let mut start: u64 = if mode & 0x40 != 0 { i64::MAX as u64 - 0x1_0000 } else { 0 };
    let mut entries = Vec::new();
    let mut chunks = rest.chunks_exact(3);
    for c in chunks.by_ref().take(MAX_ENTRIES) {
        epoch += u64::from(c[0]);
        start += u64::from(u16::from_be_bytes([c[1], c[2]]));
        // An epoch past Java's `int` becomes a negative one: unholdable either way.
        let epoch = i32::try_from(epoch).unwrap_or(-1);
        entries.push(EpochEntry { epoch, start_offset: start });
    }
    let used = 1 + 3 * entries.len();
    (entries, &data[used.min(data.len())..])
}

/// Fuzz body `epoch_file`: the store's epoch file decoder ([`EpochFile::decode`]).
///
/// - Any bytes: it never panics, and a list it accepts is holdable and survives a round trip
///   through [`EpochFile::encode`].
/// - The bytes read as an epoch list: it encodes exactly when it is holdable; its encoding
///   decodes back to it; no strict prefix of the encoding (a torn write) decodes; and no
///   single flipped bit of it (the one the remaining bytes pick) decodes.
pub fn epoch_file(data: &[u8]) {
    if let Ok(entries) = EpochFile::decode(data) {
        assert!(holdable(&entries), "decoded a list the file may not hold: {entries:?}");
        let text = EpochFile::encode(&entries).expect("a decoded list encodes");
        assert_eq!(EpochFile::decode(text.as_bytes()), Ok(entries), "the round trip changed the list");
    }
    let (entries, rest) = entries_from(data);
    let encoded = EpochFile::encode(&entries);
    assert_eq!(encoded.is_ok(), holdable(&entries), "encode disagrees about {entries:?}: {encoded:?}");
    let Ok(text) = encoded else { return };
    let bytes = text.as_bytes();
    assert_eq!(EpochFile::decode(bytes).as_ref(), Ok(&entries), "{text:?} does not decode back");
    for cut in 0..bytes.len() {
        assert!(EpochFile::decode(&bytes[..cut]).is_err(), "a torn write of {cut} bytes decoded: {text:?}");
    }
    if let [hi, lo, bit, ..] = *rest {
        let at = usize::from(u16::from_be_bytes([hi, lo])) % bytes.len();
        let mut flipped = bytes.to_vec();
        flipped[at] ^= 1 << (bit % 8);
        assert!(
            EpochFile::decode(&flipped).is_err(),
            "a flipped bit {} at byte {at} decoded: {:?}",
            bit % 8,
            String::from_utf8_lossy(&flipped)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_epoch_file_body_holds_on_fixed_inputs() {
        let java = b"2\n773307083\n7-7000\n8-8000\n";
        let fixed: [&[u8]; 9] = [
            b"",
            b"\n",
            b"0\n0\n",
            java,
            b"2\n773307083\n7-7000\n8-8000",
            b"1\n0\n-1-0\n",
            b"\x00\x07\x1b\x58\x01\x03\xe8\x00\x05\x01",
            b"\xc0\x01\xff\xff\x01\xff\xff\x01\xff\xff\x00\x00\x00",
            &[0xff; 64],
        ];
        for input in fixed {
            epoch_file(input);
        }
        assert_eq!(
            EpochFile::decode(java).unwrap(),
            [EpochEntry { epoch: 7, start_offset: 7000 }, EpochEntry { epoch: 8, start_offset: 8000 }]
        );
    }

    #[test]
    fn the_epoch_file_body_holds_on_pseudo_random_inputs() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for len in 0..300usize {
            let input: Vec<u8> = (0..len)
                .map(|_| {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    (state >> 56) as u8
                })
                .collect();
            epoch_file(&input);
        }
    }

    #[test]
    fn no_single_flipped_bit_of_an_epoch_file_decodes() {
        let entries = [
            EpochEntry { epoch: 1, start_offset: 0 },
            EpochEntry { epoch: 7, start_offset: 7000 },
            EpochEntry { epoch: 2_000_000_000, start_offset: 1 << 40 },
        ];
        let text = EpochFile::encode(&entries).unwrap();
        for at in 0..text.len() {
            for bit in 0..8 {
                let mut flipped = text.as_bytes().to_vec();
                flipped[at] ^= 1 << bit;
                assert!(EpochFile::decode(&flipped).is_err(), "bit {bit} of byte {at}");
            }
        }
    }
}
