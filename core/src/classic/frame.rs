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
pub const PUSH_HEADER_LEN: usize = crate::config::PUSH_HEADER_LEN;
/// Length of a slave report.
pub const REPORT_LEN: usize = 8;
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
    /// The first bytes are not a push header but another protocol's answer: the slave was
    /// pointed at a port of the master other than its HA port.
    #[error(
        "the master address is {} (it answered {}), not an HA port: point the slave at the master's \
         haListenPort (default listenPort + 1)",
        port.what(), port.answer()
    )]
    WrongPort {
        /// What the port speaks.
        port: WrongPort,
    },
}

/// A port a slave may be pointed at by mistake, recognised by its answer.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WrongPort {
    /// An HTTP server (logship's httpListenPort): it answered `HTTP/`.
    Http,
    /// RocketMQ's remoting protocol (listenPort): it answered a remoting frame.
    Remoting,
}

impl WrongPort {
    fn what(self) -> &'static str {
        match self {
            Self::Http => "an HTTP port (httpListenPort?)",
            Self::Remoting => "a RocketMQ remoting port (listenPort?)",
        }
    }

    fn answer(self) -> &'static str {
        match self {
            Self::Http => "\"HTTP/\"",
            Self::Remoting => "a remoting frame",
        }
    }

    /// Recognises another protocol in the 12 bytes read as a push header that failed to
    /// parse: an HTTP status line, or a remoting frame (a 4-byte length, a serialize type of
    /// 0 (JSON) or 1 (ROCKETMQ) with a header length within the frame, and for JSON a `{`).
    /// Never called for a header that parses, so a master's frame is never mistaken.
    pub fn recognise(bytes: &[u8; PUSH_HEADER_LEN]) -> Option<Self> {
        if bytes.starts_with(b"HTTP/") {
            return Some(Self::Http);
        }
        let total = u32::from_be_bytes(bytes[..4].try_into().expect("4 of 12 bytes"));
        let header_len = u32::from_be_bytes([0, bytes[5], bytes[6], bytes[7]]);
        let framed = (4..=16 * 1024 * 1024).contains(&total) && header_len + 4 <= total;
        match bytes[4] {
            0 if framed && bytes[8] == b'{' => Some(Self::Remoting),
            1 if framed => Some(Self::Remoting),
            _ => None,
        }
    }
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
    /// `i64::MAX`; bytes that are another protocol's answer are refused as
    /// [`FrameError::WrongPort`].
    pub fn decode(bytes: &[u8; PUSH_HEADER_LEN], max_body: u32) -> Result<Self, FrameError> {
        Self::parse(bytes, max_body).map_err(|e| match WrongPort::recognise(bytes) {
            Some(port) => FrameError::WrongPort { port },
            None => e,
        })
    }

    fn parse(bytes: &[u8; PUSH_HEADER_LEN], max_body: u32) -> Result<Self, FrameError> {
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
    #[test]
    fn another_protocols_answer_is_recognised_as_a_wrong_port() {
        let http: [u8; PUSH_HEADER_LEN] = *b"HTTP/1.1 400";
        assert_eq!(
            PushHeader::decode(&http, MAX_JAVA_FRAME_BODY),
            Err(FrameError::WrongPort { port: WrongPort::Http })
        );
        let remoting: [u8; PUSH_HEADER_LEN] = [0, 0, 0, 0xbb, 0, 0, 0, 0xb7, b'{', b'"', b'c', b'o'];
        let e = PushHeader::decode(&remoting, MAX_JAVA_FRAME_BODY).unwrap_err();
        assert_eq!(e, FrameError::WrongPort { port: WrongPort::Remoting });
        assert!(e.to_string().contains("haListenPort") && e.to_string().contains("remoting port"), "{e}");
        // A push header that parses is never taken for another protocol.
        let ok = PushHeader { offset: 0x0000_00bb_0000_00b7, body_len: 16 }.encode();
        assert!(PushHeader::decode(&ok, MAX_JAVA_FRAME_BODY).is_ok());
        // Garbage that is neither stays what it was.
        let big: [u8; PUSH_HEADER_LEN] = [0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0, 0, 0];
        assert!(matches!(PushHeader::decode(&big, 16), Err(FrameError::BodyTooLarge { .. })));
    }

    use super::*;
    use crate::config::MAX_JAVA_FRAME_BODY;

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
