//! The frame and its resumable decoder.
//!
//! A frame is `i32 length` (the bytes after it), a word whose high byte is the
//! [`SerializeType`] and whose low 24 bits are the header length, the header, and the body (the
//! rest). Java's `NettyDecoder` refuses a frame over `com.rocketmq.remoting.frameMaxLength`
//! bytes, 16 MiB by default, counting its length field: so the largest length field it takes is
//! 16 MiB − 4. [`FrameDecoder`] applies the same limit the same way.

use bytes::{BufMut, Bytes, BytesMut};

use crate::command::{MAX_HEADER_LEN, RemotingCommand, SerializeType};
use crate::error::{DecodeError, EncodeError};
use crate::{binary, json};

/// The default frame limit: Java's 16 MiB, the 4-byte length field included.
pub const DEFAULT_MAX_FRAME_LEN: usize = 16 << 20;

/// Resumable decoder of a stream of frames (the h11 / rustls deframer shape).
///
/// [`feed`](Self::feed) it received bytes in chunks of any size, then call
/// [`decode`](Self::decode) until it returns `Ok(None)`. It holds at most the bytes fed and not
/// yet returned; a frame's length is checked against the limit as soon as its 4 bytes are in,
/// so an oversized frame is refused before its body arrives, and nothing is allocated for a
/// frame ahead of its bytes. A driver that reads only while [`wants_read`](Self::wants_read) is
/// true keeps the buffer under one frame limit plus one read.
///
/// A body is a zero-copy slice of the buffered bytes.
///
/// ```
/// use logship_remoting::{FrameDecoder, RemotingCommand, RequestCode};
///
/// let wire = RemotingCommand::request(RequestCode::HEART_BEAT).with_opaque(9).to_bytes()?;
/// let mut decoder = FrameDecoder::new();
/// let (a, b) = wire.split_at(5);
/// decoder.feed(a);
/// assert_eq!(decoder.decode()?, None); // more bytes needed
/// decoder.feed(b);
/// let cmd = decoder.decode()?.expect("a whole frame");
/// assert_eq!(cmd.opaque, 9);
/// assert_eq!(decoder.buffered(), 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct FrameDecoder {
    /// Bytes fed and not yet returned; they start at a frame boundary.
    buf: BytesMut,
    max_frame_len: usize,
    /// Set once a length field breaks the stream; returned from then on.
    broken: Option<DecodeError>,
}

impl Default for FrameDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FrameDecoder {
    /// A decoder with Java's 16 MiB frame limit.
    pub fn new() -> Self {
        Self::with_max_frame_len(DEFAULT_MAX_FRAME_LEN)
    }

    /// A decoder that refuses frames over `max_frame_len` bytes, their 4-byte length field
    /// included (Java's `frameMaxLength`). Under 8, every frame is refused.
    pub fn with_max_frame_len(max_frame_len: usize) -> Self {
        Self { buf: BytesMut::new(), max_frame_len, broken: None }
    }

    /// The frame limit.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// Adds received bytes. Once the stream is broken they are dropped.
    pub fn feed(&mut self, data: &[u8]) {
        if self.broken.is_none() {
            self.buf.extend_from_slice(data);
        }
    }

    /// Bytes fed and not yet returned in a command.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Whether the decoder needs more bytes before [`decode`](Self::decode) can return
    /// anything: false once a whole frame (or a length field it will refuse) is buffered, and
    /// once the stream is broken.
    pub fn wants_read(&self) -> bool {
        self.broken.is_none()
            && match self.frame_len() {
                Ok(Some(len)) => self.buf.len() < len,
                Ok(None) => true,
                Err(_) => false,
            }
    }

    /// Whether a bad length field broke the stream; [`decode`](Self::decode) then returns that
    /// error forever.
    pub fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    /// Bytes the current frame still needs, when its length field is in; for a driver that
    /// wants to read exactly.
    pub fn missing(&self) -> Option<usize> {
        match self.frame_len() {
            Ok(Some(len)) => Some(len.saturating_sub(self.buf.len())),
            _ => None,
        }
    }

    /// The next whole command; `Ok(None)` means more bytes are needed.
    ///
    /// An error that [breaks the stream](DecodeError::breaks_stream) is returned again by every
    /// later call; any other consumed its frame, and the next call goes on with the next one.
    pub fn decode(&mut self) -> Result<Option<RemotingCommand>, DecodeError> {
        if let Some(e) = &self.broken {
            return Err(e.clone());
        }
        let len = match self.frame_len() {
            Ok(Some(len)) => len,
            Ok(None) => return Ok(None),
            Err(e) => {
                self.buf = BytesMut::new();
                self.broken = Some(e.clone());
                return Err(e);
            }
        };
        if self.buf.len() < len {
            return Ok(None);
        }
        let mut frame = self.buf.split_to(len).freeze();
        let _length_field = frame.split_to(4);
        parse_frame(frame).map(Some)
    }

    /// The whole length of the frame at the front, once its length field is in; an error if
    /// that field is bad.
    fn frame_len(&self) -> Result<Option<usize>, DecodeError> {
        let Some(field) = self.buf.get(..4) else {
            return Ok(None);
        };
        let length = i32::from_be_bytes(field.try_into().expect("4 bytes"));
        if length < 0 {
            return Err(DecodeError::NegativeFrameLength { length });
        }
        let len = u64::from(length.unsigned_abs()) + 4;
        if len > self.max_frame_len as u64 {
            return Err(DecodeError::FrameTooLarge { len, max: self.max_frame_len });
        }
        if length < 4 {
            return Err(DecodeError::FrameTooShort { length });
        }
        Ok(Some(len as usize))
    }
}

/// Parses one frame without its length field: the header-length word, header and body.
fn parse_frame(mut frame: Bytes) -> Result<RemotingCommand, DecodeError> {
    let word = u32::from_be_bytes(frame[..4].try_into().expect("the frame is at least 4 bytes"));
    let _ = frame.split_to(4);
    let header_len = word & 0xFF_FFFF;
    // Java checks the header length before the serialize type.
    if header_len as usize > frame.len() {
        return Err(DecodeError::HeaderLengthBeyondFrame { header_len, available: frame.len() as u32 });
    }
    let code = (word >> 24) as u8;
    let serialize_type = SerializeType::from_code(code).ok_or(DecodeError::UnknownSerializeType { code })?;
    let header = frame.split_to(header_len as usize);
    let mut cmd = match serialize_type {
        SerializeType::Json => json::decode_header(&header)?,
        SerializeType::RocketMq => binary::decode_header(&header)?,
    };
    cmd.serialize_type = serialize_type;
    cmd.body = frame;
    Ok(cmd)
}

/// Encoding: the frame's two words, then the header in its serialize type (JSON or RocketMQ's
/// binary), then the body.
impl RemotingCommand {
    /// The whole frame's length on the wire, its 4-byte length field included; fails as
    /// [`encode`](Self::encode) would.
    pub fn encoded_len(&self) -> Result<usize, EncodeError> {
        let mut header = BytesMut::new();
        self.write_header(&mut header)?;
        frame_len(header.len(), self.body.len())
    }

    /// Appends the whole frame to `dst`: length, serialize type and header length, header, body.
    ///
    /// On error nothing is appended.
    pub fn encode(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        self.encode_head(dst)?;
        dst.extend_from_slice(&self.body);
        Ok(())
    }

    /// Appends everything but the body to `dst`, counting the body in the frame length; write
    /// [`body`](Self::body) after it (for a body not to be copied, such as a pull response's
    /// messages).
    ///
    /// On error nothing is appended.
    pub fn encode_head(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        self.encode_head_for_body(dst, self.body.len())
    }

    /// Appends everything but a body of `body_len` bytes that is kept elsewhere (in several
    /// pieces, such as the stored messages of a pull response, written after it without a
    /// copy); [`body`](Self::body) is not counted and not written.
    ///
    /// On error nothing is appended.
    pub fn encode_head_for_body(&self, dst: &mut BytesMut, body_len: usize) -> Result<(), EncodeError> {
        let start = dst.len();
        dst.put_u64(0); // the two words, filled in below
        if let Err(e) = self.write_header(dst) {
            dst.truncate(start);
            return Err(e);
        }
        let header_len = dst.len() - start - 8;
        let total = match frame_len(header_len, body_len) {
            Ok(total) => total,
            Err(e) => {
                dst.truncate(start);
                return Err(e);
            }
        };
        // Both fit: frame_len checked the frame against i32 and the header against 24 bits.
        let length = (total - 4) as u32;
        let word = (u32::from(self.serialize_type.code()) << 24) | header_len as u32;
        dst[start..start + 4].copy_from_slice(&length.to_be_bytes());
        dst[start + 4..start + 8].copy_from_slice(&word.to_be_bytes());
        Ok(())
    }

    /// Encodes the whole frame into a new buffer.
    pub fn to_bytes(&self) -> Result<Bytes, EncodeError> {
        let mut dst = BytesMut::new();
        self.encode(&mut dst)?;
        Ok(dst.freeze())
    }

    fn write_header(&self, dst: &mut BytesMut) -> Result<(), EncodeError> {
        match self.serialize_type {
            SerializeType::Json => {
                json::encode_header(self, dst);
                Ok(())
            }
            SerializeType::RocketMq => binary::encode_header(self, dst),
        }
    }
}

/// A frame's whole length (length field included) for a header and a body, or why it cannot be
/// sent.
fn frame_len(header_len: usize, body_len: usize) -> Result<usize, EncodeError> {
    if header_len > MAX_HEADER_LEN {
        return Err(EncodeError::HeaderTooLarge { len: header_len, max: MAX_HEADER_LEN });
    }
    let total = 8usize.saturating_add(header_len).saturating_add(body_len);
    // The length field is a Java int and excludes itself.
    if total - 4 > i32::MAX as usize {
        return Err(EncodeError::FrameTooLarge { len: total });
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RequestCode, ResponseCode};

    fn frame(length: i32, word: u32, rest: &[u8]) -> Vec<u8> {
        let mut v = length.to_be_bytes().to_vec();
        v.extend_from_slice(&word.to_be_bytes());
        v.extend_from_slice(rest);
        v
    }

    fn decode_all(bytes: &[u8]) -> Result<Option<RemotingCommand>, DecodeError> {
        let mut d = FrameDecoder::new();
        d.feed(bytes);
        d.decode()
    }

    #[test]
    fn a_frame_at_java_s_limit_decodes_and_one_byte_more_is_refused() {
        let header = br#"{"code":10}"#;
        let body_len = DEFAULT_MAX_FRAME_LEN - 8 - header.len();
        let at_limit = frame(
            (DEFAULT_MAX_FRAME_LEN - 4) as i32,
            header.len() as u32,
            &[&header[..], &vec![7u8; body_len]].concat(),
        );
        let cmd = decode_all(&at_limit).unwrap().unwrap();
        assert_eq!(cmd.body.len(), body_len);

        let mut d = FrameDecoder::new();
        d.feed(&((DEFAULT_MAX_FRAME_LEN - 3) as i32).to_be_bytes());
        assert!(!d.wants_read(), "the length alone decides");
        assert_eq!(
            d.decode(),
            Err(DecodeError::FrameTooLarge {
                len: DEFAULT_MAX_FRAME_LEN as u64 + 1,
                max: DEFAULT_MAX_FRAME_LEN
            })
        );
    }

    #[test]
    fn an_oversized_frame_is_refused_before_its_body_is_buffered() {
        let mut d = FrameDecoder::with_max_frame_len(64);
        d.feed(&i32::MAX.to_be_bytes());
        assert_eq!(d.decode(), Err(DecodeError::FrameTooLarge { len: i32::MAX as u64 + 4, max: 64 }));
        assert_eq!(d.buffered(), 0, "nothing kept once broken");
        d.feed(&[0; 1000]);
        assert_eq!(d.buffered(), 0, "nothing buffered once broken");
        assert!(d.is_broken());
        assert_eq!(
            d.decode(),
            Err(DecodeError::FrameTooLarge { len: i32::MAX as u64 + 4, max: 64 }),
            "sticky"
        );
    }

    #[test]
    fn negative_and_short_lengths_break_the_stream() {
        assert_eq!(decode_all(&(-1i32).to_be_bytes()), Err(DecodeError::NegativeFrameLength { length: -1 }));
        assert_eq!(
            decode_all(&i32::MIN.to_be_bytes()),
            Err(DecodeError::NegativeFrameLength { length: i32::MIN })
        );
        for length in 0..4i32 {
            assert_eq!(decode_all(&length.to_be_bytes()), Err(DecodeError::FrameTooShort { length }));
        }
    }

    #[test]
    fn a_header_length_beyond_the_frame_is_an_error() {
        let bytes = frame(8, 5, b"{}  ");
        assert_eq!(
            decode_all(&bytes),
            Err(DecodeError::HeaderLengthBeyondFrame { header_len: 5, available: 4 })
        );
        // The serialize type byte is not part of the length.
        let bytes = frame(4, 0x01FF_FFFF, b"");
        assert_eq!(
            decode_all(&bytes),
            Err(DecodeError::HeaderLengthBeyondFrame { header_len: 0xFF_FFFF, available: 0 })
        );
    }

    #[test]
    fn unknown_serialize_types_are_errors() {
        for code in [2u8, 0x7f, 0xff] {
            let bytes = frame(6, (u32::from(code) << 24) | 2, b"{}");
            assert_eq!(decode_all(&bytes), Err(DecodeError::UnknownSerializeType { code }));
        }
    }

    #[test]
    fn an_empty_header_is_an_error_in_both_encodings() {
        assert!(matches!(decode_all(&frame(4, 0, b"")), Err(DecodeError::JsonHeader { .. })));
        assert!(matches!(
            decode_all(&frame(4, 1 << 24, b"")),
            Err(DecodeError::BinaryHeaderTruncated { field: "code", .. })
        ));
    }

    #[test]
    fn a_bad_header_consumes_its_frame_and_the_next_one_decodes() {
        let good = RemotingCommand::request(RequestCode::HEART_BEAT).with_opaque(2).to_bytes().unwrap();
        let mut d = FrameDecoder::new();
        d.feed(&frame(7, 3, b"{x}"));
        d.feed(&good);
        assert!(matches!(d.decode(), Err(DecodeError::JsonHeader { .. })));
        assert!(!d.is_broken());
        assert_eq!(d.decode().unwrap().unwrap().opaque, 2);
        assert_eq!(d.decode(), Ok(None));
    }

    #[test]
    fn wants_read_is_false_while_a_whole_frame_waits() {
        let wire =
            RemotingCommand::response(ResponseCode::SUCCESS).with_body(&b"abc"[..]).to_bytes().unwrap();
        let mut d = FrameDecoder::new();
        assert!(d.wants_read());
        assert_eq!(d.missing(), None);
        d.feed(&wire[..6]);
        assert!(d.wants_read());
        assert_eq!(d.missing(), Some(wire.len() - 6));
        d.feed(&wire[6..]);
        d.feed(&wire[..2]);
        assert!(!d.wants_read());
        assert_eq!(d.missing(), Some(0));
        assert_eq!(d.decode().unwrap().unwrap().body, &b"abc"[..]);
        assert!(d.wants_read());
        assert_eq!(d.buffered(), 2);
    }

    #[test]
    fn bytes_fed_one_at_a_time_decode_the_same_frames() {
        let frames: Vec<RemotingCommand> = (0..5)
            .map(|i| {
                RemotingCommand::request(RequestCode::SEND_MESSAGE)
                    .with_opaque(i)
                    .with_ext_field("topic", "T")
                    .with_body(vec![i as u8; i as usize * 3])
                    .with_serialize_type(if i % 2 == 0 {
                        SerializeType::Json
                    } else {
                        SerializeType::RocketMq
                    })
            })
            .collect();
        let wire: Vec<u8> = frames.iter().flat_map(|f| f.to_bytes().unwrap().to_vec()).collect();
        let mut d = FrameDecoder::new();
        let mut out = Vec::new();
        for b in wire {
            d.feed(&[b]);
            while let Some(cmd) = d.decode().unwrap() {
                out.push(cmd);
            }
        }
        assert_eq!(out, frames);
    }
}
