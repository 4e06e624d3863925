//! # logship-remoting
//!
//! Apache RocketMQ's remoting protocol (the one every RocketMQ client, broker and NameServer
//! speaks on `listenPort` and port 9876), sans IO: bytes in, commands out, and back. Nothing
//! here reads a socket, a clock or a file, spawns a task or logs.
//!
//! The crate has four layers, each usable alone:
//!
//! - **Frames** ([`FrameDecoder`], [`RemotingCommand::encode`]): `i32` length, a word with the
//!   [`SerializeType`] in its high byte and the header length in its low 24 bits, the header,
//!   the body; with Java's 16 MiB frame limit ([`DEFAULT_MAX_FRAME_LEN`]). The decoder is
//!   resumable and bounded: feed it any chunks, take whole commands out.
//! - **Commands** ([`RemotingCommand`]): code, language, version, opaque, flag (response and
//!   one-way bits), remark, extFields and body, with both header encodings: the JSON header as
//!   fastjson writes and reads it, and the binary ROCKETMQ header (`RocketMQSerializable`). A
//!   response goes out in its request's encoding ([`RemotingCommand::response_to`]).
//! - **Codes** ([`RequestCode`], [`ResponseCode`], [`LanguageCode`], [`version`]): every
//!   number of Java's classes in rocketmq-client 4.9.7 and 5.5.0, checked against the jars.
//! - **Typed headers and bodies** ([`header`], [`body`]): Java's `CommandCustomHeader` classes
//!   over extFields, with required-field checks and errors a broker can answer with Java's code
//!   and remark, and the JSON bodies simple enough to be protocol types.
//! - **The server's connection** ([`server`]): one accepted connection's state machine
//!   (requests out, responses in any order, one-way handling, the in-flight cap, idle, slow and
//!   bad-frame closes), and the caps on connections and requests across connections.
//!
//! ## Errors
//!
//! Nothing panics on input from a peer. Each job has its `#[non_exhaustive]` error:
//! [`DecodeError`] (bytes that are not a command: [`DecodeError::breaks_stream`] tells a bad
//! length field, after which the stream is lost, from one bad frame), [`EncodeError`] (a
//! command its encoding cannot carry), [`HeaderError`] (a custom header missing or mangling a
//! field) and [`BodyError`] (a body of the wrong shape).
//!
//! ## Example: a request, over the wire, and its response
//!
//! ```
//! use bytes::BytesMut;
//! use logship_remoting::header::{GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader};
//! use logship_remoting::{FrameDecoder, RemotingCommand, RequestCode, ResponseCode, SerializeType};
//!
//! // A client asks for a queue's max offset, in the binary header encoding.
//! let request = RemotingCommand::request(RequestCode::GET_MAX_OFFSET)
//!     .with_opaque(41)
//!     .with_serialize_type(SerializeType::RocketMq)
//!     .with_header(&GetMaxOffsetRequestHeader::new("TopicA", 0));
//! let mut wire = BytesMut::new();
//! request.encode(&mut wire)?;
//!
//! // The broker decodes whatever chunks arrive...
//! let mut decoder = FrameDecoder::new();
//! decoder.feed(&wire);
//! let received = decoder.decode()?.expect("one whole frame");
//! let header: GetMaxOffsetRequestHeader = received.decode_header()?;
//! assert_eq!(header.topic, "TopicA");
//!
//! // ... and answers in the request's encoding, with its opaque.
//! let response = RemotingCommand::response_to(&received, ResponseCode::SUCCESS)
//!     .with_header(&GetMaxOffsetResponseHeader { offset: 1234, ..Default::default() });
//! assert_eq!(response.opaque, 41);
//! assert_eq!(response.serialize_type, SerializeType::RocketMq);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![doc(html_root_url = "https://docs.rs/logship-remoting/0.1.0")]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod binary;
pub mod body;
mod code;
mod command;
mod error;
mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod header;
mod json;
pub mod server;

pub use code::{LanguageCode, RequestCode, ResponseCode};
pub use command::{FLAG_ONEWAY, FLAG_RESPONSE, MAX_HEADER_LEN, RemotingCommand, SerializeType};
pub use error::{BodyError, DecodeError, EncodeError, HeaderError};
pub use frame::{DEFAULT_MAX_FRAME_LEN, FrameDecoder};
pub use header::ExtFields;

/// Protocol versions: `MQVersion.Version` ordinals, which a command's
/// [`version`](RemotingCommand::version) carries and some Java peers branch on (checked against
/// both jars).
pub mod version {
    /// `V3_0_11`: a NameServer reads `REGISTER_BROKER` bodies as `RegisterBrokerBody` (with
    /// filter servers) from this version on.
    pub const V3_0_11: i32 = 37;
    /// `V3_4_9`: a broker honours a retry send's `maxReconsumeTimes` from this version on.
    pub const V3_4_9: i32 = 121;
    /// `V4_9_4`: a NameServer sends routes as standard JSON (quoted keys) from this version on.
    pub const V4_9_4: i32 = 401;
    /// `V4_9_7`: rocketmq-client 4.9.7's `CURRENT_VERSION`.
    pub const V4_9_7: i32 = 407;
    /// `V5_0_0`: a NameServer reads the compressed registration's static-topic mappings from
    /// this version on.
    pub const V5_0_0: i32 = 413;
    /// `V5_3_1`: a 5.x server shutting down answers `GO_AWAY` to peers newer than this.
    pub const V5_3_1: i32 = 475;
    /// `V5_5_0`: rocketmq-client 5.5.0's `CURRENT_VERSION`.
    pub const V5_5_0: i32 = 513;
}
