//! [`RemotingCommand`]: one request or response of RocketMQ's remoting protocol.

use bytes::Bytes;

use crate::code::{LanguageCode, RequestCode, ResponseCode};
use crate::error::HeaderError;
use crate::header::{CommandHeader, ExtFields};

/// Bit 0 of [`RemotingCommand::flag`]: the command is a response (`RPC_TYPE` in Java).
pub const FLAG_RESPONSE: i32 = 1 << 0;
/// Bit 1 of [`RemotingCommand::flag`]: the request wants no response (`RPC_ONEWAY` in Java).
pub const FLAG_ONEWAY: i32 = 1 << 1;

/// How a command's header is encoded: the high byte of the frame's second word.
///
/// Java answers a request in the type the request came in (4.9.x's `NettyRemotingAbstract`
/// copies `serializeTypeCurrentRPC` to the response; 5.x answers in the server's configured type,
/// JSON unless `rocketmq.serialize.type` says otherwise). [`RemotingCommand::response_to`] follows
/// 4.9.x, which every client reads either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum SerializeType {
    /// A JSON object, as fastjson writes a `RemotingCommand` (code 0; Java's default).
    #[default]
    Json,
    /// RocketMQ's binary header, `RocketMQSerializable` (code 1).
    RocketMq,
}

impl SerializeType {
    /// The code on the wire.
    pub const fn code(self) -> u8 {
        match self {
            Self::Json => 0,
            Self::RocketMq => 1,
        }
    }

    /// The type with this wire code, if any.
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(Self::Json),
            1 => Some(Self::RocketMq),
            _ => None,
        }
    }

    /// Java's name: `JSON` or `ROCKETMQ` (the value of `serializeTypeCurrentRPC`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Json => "JSON",
            Self::RocketMq => "ROCKETMQ",
        }
    }
}

/// One remoting command, request or response, as Java's `RemotingCommand` carries it.
///
/// Build one with [`request`](Self::request), [`response`](Self::response) or
/// [`response_to`](Self::response_to) and the `with_*` methods; read and change the public
/// fields freely. New fields may be added (the struct is `#[non_exhaustive]`), so construct it
/// only through those functions.
///
/// ```
/// use logship_remoting::{RemotingCommand, RequestCode, ResponseCode, SerializeType};
/// use logship_remoting::header::GetMaxOffsetRequestHeader;
///
/// let request = RemotingCommand::request(RequestCode::GET_MAX_OFFSET)
///     .with_opaque(7)
///     .with_header(&GetMaxOffsetRequestHeader::new("TopicA", 3));
/// let header: GetMaxOffsetRequestHeader = request.decode_header()?;
/// assert_eq!(header.queue_id, 3);
///
/// let response = RemotingCommand::response_to(&request, ResponseCode::SUCCESS);
/// assert!(response.is_response());
/// assert_eq!(response.opaque, 7);
/// # Ok::<(), logship_remoting::HeaderError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemotingCommand {
    /// The request code of a request, the response code of a response.
    pub code: i32,
    /// The sender's language. Commands built here say `JAVA`, as every Java peer does; nothing
    /// in RocketMQ acts on it.
    pub language: LanguageCode,
    /// The sender's protocol version: `MQVersion.Version` ordinal ([`crate::version`]).
    pub version: i32,
    /// The request id; a response carries its request's.
    pub opaque: i32,
    /// [`FLAG_RESPONSE`] and [`FLAG_ONEWAY`]; other bits are carried unchanged.
    pub flag: i32,
    /// Free text: an error's reason on a response. The ROCKETMQ encoding cannot tell an empty
    /// remark from none (Java reads a zero-length remark as `null`).
    pub remark: Option<String>,
    /// The custom header, by Java field name ([`header`](crate::header) reads typed ones).
    pub ext_fields: ExtFields,
    /// The body: message bytes, or a JSON document ([`body`](crate::body)).
    pub body: Bytes,
    /// How the header is encoded on the wire.
    pub serialize_type: SerializeType,
}

impl RemotingCommand {
    fn new(code: i32, flag: i32) -> Self {
        Self {
            code,
            language: LanguageCode::JAVA,
            version: 0,
            opaque: 0,
            flag,
            remark: None,
            ext_fields: ExtFields::new(),
            body: Bytes::new(),
            serialize_type: SerializeType::Json,
        }
    }

    /// A request with `code`, opaque 0, version 0, JSON, no header and no body.
    pub fn request(code: RequestCode) -> Self {
        Self::new(code.0, 0)
    }

    /// A response with `code` and opaque 0; see [`response_to`](Self::response_to) for an
    /// answer to a request.
    pub fn response(code: ResponseCode) -> Self {
        Self::new(code.0, FLAG_RESPONSE)
    }

    /// The response to `request` with `code`: its opaque, in its serialize type.
    pub fn response_to(request: &Self, code: ResponseCode) -> Self {
        let mut response = Self::response(code);
        response.opaque = request.opaque;
        response.serialize_type = request.serialize_type;
        response
    }

    /// Sets the opaque (request id).
    #[must_use]
    pub fn with_opaque(mut self, opaque: i32) -> Self {
        self.opaque = opaque;
        self
    }

    /// Sets the version.
    #[must_use]
    pub fn with_version(mut self, version: i32) -> Self {
        self.version = version;
        self
    }

    /// Sets the language.
    #[must_use]
    pub fn with_language(mut self, language: LanguageCode) -> Self {
        self.language = language;
        self
    }

    /// Sets the remark.
    #[must_use]
    pub fn with_remark(mut self, remark: impl Into<String>) -> Self {
        self.remark = Some(remark.into());
        self
    }

    /// Sets the body.
    #[must_use]
    pub fn with_body(mut self, body: impl Into<Bytes>) -> Self {
        self.body = body.into();
        self
    }

    /// Sets the serialize type.
    #[must_use]
    pub fn with_serialize_type(mut self, serialize_type: SerializeType) -> Self {
        self.serialize_type = serialize_type;
        self
    }

    /// Marks the request one-way: the peer sends no response.
    #[must_use]
    pub fn oneway(mut self) -> Self {
        self.flag |= FLAG_ONEWAY;
        self
    }

    /// Writes `header`'s fields into the extFields (over fields of the same name).
    #[must_use]
    pub fn with_header<H: CommandHeader>(mut self, header: &H) -> Self {
        header.write_ext_fields(&mut self.ext_fields);
        self
    }

    /// Adds one extFields entry.
    #[must_use]
    pub fn with_ext_field(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.ext_fields.insert(key.into(), value.into());
        self
    }

    /// Reads a typed custom header from the extFields, checking its required fields.
    pub fn decode_header<H: CommandHeader>(&self) -> Result<H, HeaderError> {
        H::from_ext_fields(&self.ext_fields)
    }

    /// Whether this is a response.
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// Whether this is a one-way request (no response is sent).
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// The code as a request code.
    pub fn request_code(&self) -> RequestCode {
        RequestCode(self.code)
    }

    /// The code as a response code.
    pub fn response_code(&self) -> ResponseCode {
        ResponseCode(self.code)
    }
}

/// The largest header the 24-bit header-length field can announce.
pub const MAX_HEADER_LEN: usize = 0xFF_FFFF;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::EncodeError;
    use bytes::BytesMut;

    #[test]
    fn response_to_copies_the_opaque_and_the_serialize_type_of_the_request() {
        let request = RemotingCommand::request(RequestCode::HEART_BEAT)
            .with_opaque(42)
            .with_serialize_type(SerializeType::RocketMq)
            .oneway();
        let response = RemotingCommand::response_to(&request, ResponseCode::SUCCESS);
        assert_eq!(response.opaque, 42);
        assert_eq!(response.serialize_type, SerializeType::RocketMq);
        assert!(response.is_response());
        assert!(!response.is_oneway());
        assert!(request.is_oneway());
        assert!(!request.is_response());
    }

    #[test]
    fn serialize_type_codes_are_java_s() {
        assert_eq!(SerializeType::from_code(0), Some(SerializeType::Json));
        assert_eq!(SerializeType::from_code(1), Some(SerializeType::RocketMq));
        assert_eq!(SerializeType::from_code(2), None);
        assert_eq!(SerializeType::RocketMq.code(), 1);
        assert_eq!(SerializeType::RocketMq.name(), "ROCKETMQ");
    }

    #[test]
    fn a_header_over_24_bits_is_refused_and_nothing_is_written() {
        let cmd = RemotingCommand::request(RequestCode::SEND_MESSAGE)
            .with_remark("x".repeat(MAX_HEADER_LEN))
            .with_serialize_type(SerializeType::RocketMq);
        let mut dst = BytesMut::from(&b"keep"[..]);
        assert!(matches!(cmd.encode(&mut dst), Err(EncodeError::HeaderTooLarge { max: MAX_HEADER_LEN, .. })));
        assert_eq!(&dst[..], b"keep");
    }

    #[test]
    fn encode_head_counts_the_body_it_leaves_out() {
        let cmd = RemotingCommand::request(RequestCode::SEND_MESSAGE).with_body(&b"hello"[..]);
        let mut head = BytesMut::new();
        cmd.encode_head(&mut head).unwrap();
        let whole = cmd.to_bytes().unwrap();
        assert_eq!(&whole[..head.len()], &head[..]);
        assert_eq!(&whole[head.len()..], b"hello");
        assert_eq!(u32::from_be_bytes(head[..4].try_into().unwrap()) as usize, whole.len() - 4);
        assert_eq!(cmd.encoded_len().unwrap(), whole.len());
        let mut split = BytesMut::new();
        cmd.clone().with_body(Bytes::new()).encode_head_for_body(&mut split, 5).unwrap();
        assert_eq!(split, head, "a body kept elsewhere is counted as given");
    }
}
