//! The crate's errors: one enum per job.

use crate::code::ResponseCode;

/// Why bytes from a peer are not a remoting command.
///
/// Errors in the frame's length field break the stream ([`breaks_stream`](Self::breaks_stream)):
/// where the next frame starts is unknown, so a [`FrameDecoder`](crate::FrameDecoder) returns the
/// same error from then on. Any other error is confined to one whole frame, which the decoder has
/// consumed; the stream stays in step. Java's `NettyDecoder` closes the connection on either kind,
/// and a server should too unless it has a reason not to.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The frame's length field is negative.
    #[error("frame length {length} is negative")]
    NegativeFrameLength {
        /// The length field as sent.
        length: i32,
    },
    /// The frame's length field leaves no room for the header-length word.
    #[error("frame length {length} is under 4: no room for the serialize type and header length")]
    FrameTooShort {
        /// The length field as sent.
        length: i32,
    },
    /// The frame, with its 4-byte length field, is over the decoder's limit.
    #[error(
        "frame of {len} bytes (length field included) is over the limit of {max} bytes \
         (Java's com.rocketmq.remoting.frameMaxLength, 16 MiB by default)"
    )]
    FrameTooLarge {
        /// The frame's length, its length field included.
        len: u64,
        /// The limit.
        max: usize,
    },
    /// The header-length word announces more bytes than the frame holds.
    #[error("header length {header_len} is over the {available} bytes left in the frame")]
    HeaderLengthBeyondFrame {
        /// The header length as sent (the word's low 24 bits).
        header_len: u32,
        /// The frame's bytes after the header-length word.
        available: u32,
    },
    /// The serialize type (the header-length word's high byte) is neither JSON (0) nor ROCKETMQ (1).
    #[error("unknown serialize type {code}: 0 is JSON, 1 is ROCKETMQ")]
    UnknownSerializeType {
        /// The type as sent.
        code: u8,
    },
    /// A JSON header that is not a JSON object of the fields Java writes.
    #[error("JSON header: {reason}")]
    JsonHeader {
        /// What was wrong, and where.
        reason: String,
    },
    /// A ROCKETMQ header that ends inside a field.
    #[error("ROCKETMQ header: {field} needs {needed} bytes, {available} are left")]
    BinaryHeaderTruncated {
        /// The field being read.
        field: &'static str,
        /// Bytes the field needs.
        needed: u64,
        /// Bytes left in the header (or, for an extFields entry, in the extFields).
        available: usize,
    },
    /// A ROCKETMQ header whose remark, extFields, key or value length is negative.
    #[error("ROCKETMQ header: {field} length {length} is negative")]
    NegativeFieldLength {
        /// The field whose length is negative.
        field: &'static str,
        /// The length as sent.
        length: i32,
    },
    /// Bytes after the extFields of a ROCKETMQ header.
    #[error("ROCKETMQ header: {extra} bytes after the extFields, inside the header length")]
    BinaryHeaderTrailingBytes {
        /// How many.
        extra: usize,
    },
    /// A ROCKETMQ header's text field (remark, extFields key or value) that is not UTF-8.
    #[error("ROCKETMQ header: {field} is not UTF-8 (Java writes them as UTF-8)")]
    InvalidUtf8 {
        /// Which field: `remark`, `extFields key`, or the value's key.
        field: String,
    },
}

impl DecodeError {
    /// Whether the stream is lost: the frame's length field was bad, so where the next frame
    /// starts is unknown. Otherwise one bad frame was consumed and decoding can go on.
    pub fn breaks_stream(&self) -> bool {
        matches!(
            self,
            Self::NegativeFrameLength { .. } | Self::FrameTooShort { .. } | Self::FrameTooLarge { .. }
        )
    }
}

/// Why a command cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The header is over the 24 bits of the header-length field.
    #[error("header of {len} bytes is over the {max} bytes the 24-bit header length can announce")]
    HeaderTooLarge {
        /// The header's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The frame is over Java's `int` length field.
    #[error("frame of {len} bytes is over the 2^31 - 1 bytes its length field can announce")]
    FrameTooLarge {
        /// The frame's length, its length field included.
        len: usize,
    },
    /// A code beyond the ROCKETMQ header's 16-bit code field (Java would truncate it silently;
    /// send it in a JSON header).
    #[error("code {code} does not fit the ROCKETMQ header's 16-bit code field; use JSON")]
    CodeOutOfRange {
        /// The code.
        code: i32,
    },
    /// A version beyond the ROCKETMQ header's 16-bit version field.
    #[error("version {version} does not fit the ROCKETMQ header's 16-bit version field; use JSON")]
    VersionOutOfRange {
        /// The version.
        version: i32,
    },
    /// An extFields key over the ROCKETMQ header's 16-bit key length (Java would write a
    /// negative length).
    #[error("extFields key of {len} bytes is over the ROCKETMQ header's 32767-byte key length")]
    KeyTooLong {
        /// The key's length in bytes.
        len: usize,
    },
}

/// Why a typed custom header cannot be read from a command's extFields.
///
/// A Java broker answers a request whose header it cannot use with [`SYSTEM_ERROR`] and the
/// exception's text as remark; [`response_code`](Self::response_code) and
/// [`java_remark`](Self::java_remark) give the same.
///
/// [`SYSTEM_ERROR`]: ResponseCode::SYSTEM_ERROR
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HeaderError {
    /// A required field is absent (Java's `@CFNotNull`).
    #[error("the custom field <{field}> is null")]
    MissingField {
        /// The field's Java name.
        field: &'static str,
    },
    /// A field's text is not a value of its Java type.
    #[error("the custom field <{field}> is not a valid {expected}: {value:?}")]
    InvalidField {
        /// The field's Java name.
        field: &'static str,
        /// Its Java type.
        expected: &'static str,
        /// The text as sent.
        value: String,
    },
}

impl HeaderError {
    /// The response code a Java broker answers with: `SYSTEM_ERROR`.
    pub fn response_code(&self) -> ResponseCode {
        ResponseCode::SYSTEM_ERROR
    }

    /// The remark a Java broker answers with: the `RemotingCommandException`'s text (Java adds
    /// the throwing stack frame, `, org.apache...(RemotingCommand.java:NNN)`, which names Java's
    /// source lines and is left out).
    pub fn java_remark(&self) -> String {
        format!("org.apache.rocketmq.remoting.exception.RemotingCommandException: {self}")
    }

    /// The field's Java name.
    pub fn field(&self) -> &'static str {
        match self {
            Self::MissingField { field } | Self::InvalidField { field, .. } => field,
        }
    }
}

/// Why a body is not the JSON document (or compressed form) a protocol type expects.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BodyError {
    /// Not JSON, or JSON of the wrong shape.
    #[error("{body} body: {reason}")]
    Json {
        /// The body's Java class.
        body: &'static str,
        /// What was wrong, and where.
        reason: String,
    },
    /// A compressed body that does not inflate, ends early or inflates beyond the limit.
    #[error("{body} body: {reason}")]
    Compressed {
        /// The body's Java class.
        body: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// A value the encoding cannot carry.
    #[error("{body} body: {reason}")]
    Unencodable {
        /// The body's Java class.
        body: &'static str,
        /// What cannot be encoded, and why.
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_errors_read_like_java_s_exception() {
        let e = HeaderError::MissingField { field: "topic" };
        assert_eq!(e.to_string(), "the custom field <topic> is null");
        assert_eq!(
            e.java_remark(),
            "org.apache.rocketmq.remoting.exception.RemotingCommandException: the custom field <topic> is null"
        );
        assert_eq!(e.response_code(), ResponseCode::SYSTEM_ERROR);
        assert_eq!(e.field(), "topic");
    }

    #[test]
    fn only_length_field_errors_break_the_stream() {
        assert!(DecodeError::NegativeFrameLength { length: -1 }.breaks_stream());
        assert!(DecodeError::FrameTooShort { length: 3 }.breaks_stream());
        assert!(DecodeError::FrameTooLarge { len: 1 << 30, max: 16 << 20 }.breaks_stream());
        assert!(!DecodeError::UnknownSerializeType { code: 2 }.breaks_stream());
        assert!(!DecodeError::JsonHeader { reason: "x".into() }.breaks_stream());
    }
}
