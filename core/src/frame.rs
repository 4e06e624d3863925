//! The classic RocketMQ HA wire format: push frames (master to slave) and reports (slave to
//! master). Every integer is big-endian, as Java's `ByteBuffer` writes it.
//!
//! ```text
//! push:   [u64 offset][i32 body size][body ...]      body size 0 = heartbeat
//! report: [u64 slave max offset]
//! ```
//!
//! Both decoders are resumable: they take the stream cut at any byte position, never panic, and
//! never buffer more than one frame body beyond what they were given.

use crate::chunks::Chunks;

use bytes::Bytes;

use crate::log::Offset;

/// Length of a push frame header: offset (8) and body size (4).
pub const PUSH_HEADER_LEN: usize = 12;
/// Length of a slave report.
pub const REPORT_LEN: usize = 8;
/// The largest body a RocketMQ slave can ever read: its 4 MiB read buffer minus a header.
pub const MAX_JAVA_FRAME_BODY: u32 = 4 * 1024 * 1024 - PUSH_HEADER_LEN as u32;
/// The largest offset the wire can carry: Java's `long` is signed.
pub const MAX_WIRE_OFFSET: Offset = i64::MAX as u64;

/// A malformed frame from the peer.
#[derive(thiserror::Error, Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FrameError {
    /// A push header declared a negative body size.
    #[error("push frame declares a negative body size ({size})")]
    NegativeSize {
        /// The size as sent.
        size: i32,
    },
    /// A push header declared a body larger than this side accepts.
    #[error("push frame body of {len} bytes exceeds the limit of {max} bytes")]
    BodyTooLarge {
        /// The size as sent.
        len: u32,
        /// The configured limit.
        max: u32,
    },
    /// An offset does not fit in Java's signed 64-bit `long`.
    #[error("offset {offset} is above i64::MAX")]
    OffsetOutOfRange {
        /// The offset as sent, read unsigned.
        offset: u64,
    },
}

/// The 12-byte header of a push frame.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct PushHeader {
    /// Commit-log offset of the first body byte; for a heartbeat, the master's next offset.
    pub offset: Offset,
    /// Body length; 0 for a heartbeat.
    pub body_len: u32,
}

impl PushHeader {
    /// A heartbeat carrying the master's next transfer offset.
    pub fn heartbeat(offset: Offset) -> Self {
        Self { offset, body_len: 0 }
    }

    /// Whether this frame carries no body.
    pub fn is_heartbeat(&self) -> bool {
        self.body_len == 0
    }

    /// The wire bytes.
    pub fn encode(&self) -> [u8; PUSH_HEADER_LEN] {
        let mut out = [0u8; PUSH_HEADER_LEN];
        out[..8].copy_from_slice(&self.offset.to_be_bytes());
        out[8..].copy_from_slice(&self.body_len.to_be_bytes());
        out
    }

    /// Parses wire bytes, refusing a negative size, a body over `max_body` and an offset above
    /// `i64::MAX`.
    pub fn decode(bytes: &[u8; PUSH_HEADER_LEN], max_body: u32) -> Result<Self, FrameError> {
        let offset = u64::from_be_bytes(bytes[..8].try_into().expect("8 of 12 bytes"));
        let size = i32::from_be_bytes(bytes[8..].try_into().expect("4 of 12 bytes"));
        if offset > MAX_WIRE_OFFSET {
            return Err(FrameError::OffsetOutOfRange { offset });
        }
        let body_len = u32::try_from(size).map_err(|_| FrameError::NegativeSize { size })?;
        if body_len > max_body {
            return Err(FrameError::BodyTooLarge { len: body_len, max: max_body });
        }
        Ok(Self { offset, body_len })
    }
}

/// The wire bytes of a slave report.
pub fn encode_report(offset: Offset) -> [u8; REPORT_LEN] {
    offset.to_be_bytes()
}

/// A complete push frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Push {
    /// Commit-log offset of the first body byte (or the heartbeat's offset).
    pub offset: Offset,
    /// The raw log bytes; empty for a heartbeat.
    pub body: Bytes,
}

/// Resumable decoder of the master-to-slave stream.
///
/// Feed received chunks with [`extend`](Self::extend); read the next header as soon as its 12
/// bytes are in with [`peek_header`](Self::peek_header) (RocketMQ checks the offset before the
/// body is complete), and whole frames with [`decode`](Self::decode). A body contained in one
/// received chunk is returned without copying; a body split across chunks is copied once.
#[derive(Debug)]
pub struct PushDecoder {
    max_body: u32,
    chunks: Chunks,
    header: Option<PushHeader>,
    error: Option<FrameError>,
}

impl PushDecoder {
    /// A decoder that refuses bodies larger than `max_body`.
    pub fn new(max_body: u32) -> Self {
        Self { max_body, chunks: Chunks::default(), header: None, error: None }
    }

    /// Adds received bytes.
    pub fn extend(&mut self, data: Bytes) {
        self.chunks.push(data);
    }

    /// Bytes received but not yet returned in a frame (including a parsed header's body so far).
    pub fn buffered(&self) -> usize {
        self.chunks.len() + if self.header.is_some() { PUSH_HEADER_LEN } else { 0 }
    }

    /// The header of the next frame, once its 12 bytes are in; `Ok(None)` means more bytes are
    /// needed. Errors are sticky: after one, every call returns it again.
    pub fn peek_header(&mut self) -> Result<Option<PushHeader>, FrameError> {
        if let Some(err) = self.error {
            return Err(err);
        }
        if self.header.is_none() && self.chunks.len() >= PUSH_HEADER_LEN {
            let mut raw = [0u8; PUSH_HEADER_LEN];
            self.chunks.copy_out(&mut raw);
            match PushHeader::decode(&raw, self.max_body) {
                Ok(h) => self.header = Some(h),
                Err(e) => {
                    self.error = Some(e);
                    return Err(e);
                }
            }
        }
        Ok(self.header)
    }

    /// The next complete frame; `Ok(None)` means more bytes are needed.
    pub fn decode(&mut self) -> Result<Option<Push>, FrameError> {
        let Some(header) = self.peek_header()? else {
            return Ok(None);
        };
        let len = header.body_len as usize;
        if self.chunks.len() < len {
            return Ok(None);
        }
        self.header = None;
        Ok(Some(Push { offset: header.offset, body: self.chunks.take(len) }))
    }
}

/// Resumable decoder of the slave-to-master stream of 8-byte reports.
#[derive(Debug, Default, Clone)]
pub struct ReportDecoder {
    partial: [u8; REPORT_LEN],
    len: usize,
}

impl ReportDecoder {
    /// A decoder at a word boundary.
    pub fn new() -> Self {
        Self::default()
    }

    /// Decodes the next whole report, consuming bytes from the front of `data`. Returns `None`
    /// once `data` is used up; a trailing partial word is kept for the next call.
    pub fn decode(&mut self, data: &mut &[u8]) -> Option<Result<Offset, FrameError>> {
        let need = REPORT_LEN - self.len;
        if data.len() < need {
            self.partial[self.len..self.len + data.len()].copy_from_slice(data);
            self.len += data.len();
            *data = &[];
            return None;
        }
        self.partial[self.len..].copy_from_slice(&data[..need]);
        *data = &data[need..];
        self.len = 0;
        let offset = u64::from_be_bytes(self.partial);
        Some(if offset > MAX_WIRE_OFFSET { Err(FrameError::OffsetOutOfRange { offset }) } else { Ok(offset) })
    }

    /// Bytes of an incomplete report held back.
    pub fn pending(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push_bytes(offset: Offset, body: &[u8]) -> Vec<u8> {
        let mut v = PushHeader { offset, body_len: body.len() as u32 }.encode().to_vec();
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn push_header_is_offset_then_size_big_endian() {
        let h = PushHeader { offset: 0x4000_0000, body_len: 0x1234 };
        assert_eq!(h.encode(), [0, 0, 0, 0, 0x40, 0, 0, 0, 0, 0, 0x12, 0x34]);
        assert_eq!(PushHeader::decode(&h.encode(), 32768), Ok(h));
    }

    #[test]
    fn report_is_eight_bytes_big_endian() {
        assert_eq!(encode_report(0x4000_1234), [0, 0, 0, 0, 0x40, 0, 0x12, 0x34]);
    }

    #[test]
    fn negative_body_size_is_a_frame_error() {
        let mut raw = [0u8; 12];
        raw[8..].copy_from_slice(&(-1i32).to_be_bytes());
        assert_eq!(PushHeader::decode(&raw, 100), Err(FrameError::NegativeSize { size: -1 }));
    }

    #[test]
    fn offset_above_i64_max_is_a_frame_error() {
        let raw = PushHeader { offset: 1 << 63, body_len: 0 }.encode();
        assert_eq!(PushHeader::decode(&raw, 100), Err(FrameError::OffsetOutOfRange { offset: 1 << 63 }));
        let mut dec = ReportDecoder::new();
        let bytes = encode_report(u64::MAX);
        assert_eq!(dec.decode(&mut &bytes[..]), Some(Err(FrameError::OffsetOutOfRange { offset: u64::MAX })));
    }

    #[test]
    fn oversize_body_is_refused_before_buffering_it() {
        let mut dec = PushDecoder::new(16);
        dec.extend(Bytes::from(PushHeader { offset: 0, body_len: 17 }.encode().to_vec()));
        assert_eq!(dec.peek_header(), Err(FrameError::BodyTooLarge { len: 17, max: 16 }));
        // Sticky: later bytes do not revive it.
        dec.extend(Bytes::from_static(&[0; 17]));
        assert_eq!(dec.decode(), Err(FrameError::BodyTooLarge { len: 17, max: 16 }));
    }

    #[test]
    fn header_is_visible_before_the_body_arrives() {
        let wire = push_bytes(100, b"hello");
        let mut dec = PushDecoder::new(1024);
        dec.extend(Bytes::copy_from_slice(&wire[..11]));
        assert_eq!(dec.peek_header(), Ok(None));
        dec.extend(Bytes::copy_from_slice(&wire[11..13]));
        assert_eq!(dec.peek_header(), Ok(Some(PushHeader { offset: 100, body_len: 5 })));
        assert_eq!(dec.decode(), Ok(None));
        dec.extend(Bytes::copy_from_slice(&wire[13..]));
        assert_eq!(dec.decode(), Ok(Some(Push { offset: 100, body: Bytes::from_static(b"hello") })));
        assert_eq!(dec.buffered(), 0);
    }

    #[test]
    fn push_split_at_every_byte_position_decodes_the_same() {
        let mut wire = push_bytes(7, b"abcdefgh");
        wire.extend(push_bytes(15, b""));
        wire.extend(push_bytes(15, b"xyz"));
        for cut in 0..=wire.len() {
            let mut dec = PushDecoder::new(64);
            let mut frames = Vec::new();
            for part in [&wire[..cut], &wire[cut..]] {
                dec.extend(Bytes::copy_from_slice(part));
                while let Some(f) = dec.decode().unwrap() {
                    frames.push(f);
                }
            }
            let offsets: Vec<_> = frames.iter().map(|f| (f.offset, f.body.clone())).collect();
            assert_eq!(
                offsets,
                [(7, Bytes::from_static(b"abcdefgh")), (15, Bytes::new()), (15, Bytes::from_static(b"xyz"))],
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn body_inside_one_chunk_is_not_copied() {
        let wire = Bytes::from(push_bytes(0, &[9; 100]));
        let mut dec = PushDecoder::new(1000);
        dec.extend(wire.clone());
        let frame = dec.decode().unwrap().unwrap();
        assert_eq!(frame.body.as_ptr(), wire[12..].as_ptr());
    }

    #[test]
    fn reports_in_one_byte_dribbles_decode() {
        let mut wire = encode_report(1).to_vec();
        wire.extend(encode_report(2));
        let mut dec = ReportDecoder::new();
        let mut got = Vec::new();
        for b in &wire {
            let mut chunk = std::slice::from_ref(b);
            while let Some(r) = dec.decode(&mut chunk) {
                got.push(r.unwrap());
            }
        }
        assert_eq!(got, [1, 2]);
        assert_eq!(dec.pending(), 0);
    }
}
