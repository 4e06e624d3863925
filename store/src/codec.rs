//! RocketMQ's stored message format (protocol notes §6.2): encoding, decoding and validation.
//!
//! A stored message is, big-endian:
//!
//! ```text
//! i32 totalSize | i32 magic | i32 bodyCRC | i32 queueId | i32 flag | i64 queueOffset
//! | i64 physicalOffset | i32 sysFlag | i64 bornTimestamp | bornHost (8 | 20)
//! | i64 storeTimestamp | storeHost (8 | 20) | i32 reconsumeTimes | i64 preparedTransactionOffset
//! | i32 bodyLength | body | topicLength (1 byte V1 | 2 bytes V2) | topic
//! | i16 propertiesLength | properties
//! ```
//!
//! A host is an IPv4 address (4 bytes) or, when its `sysFlag` bit is set, an IPv6 address
//! (16 bytes), followed by the port as an `i32`. The end of a segment is padded with an 8-byte
//! BLANK record `i32 remaining | i32 0xCBD43194`.
//!
//! The writer always uses magic V1 (`0xDAA320A7`), which every RocketMQ version reads; V1 and V2
//! (`0xDAA320AB`, 2-byte topic length) are both read.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::ops::Range;

use bytes::Bytes;
use logship_core::PutStatus;

/// Magic code of a V1 message (RocketMQ `MESSAGE_MAGIC_CODE`, -626843481).
pub const MESSAGE_MAGIC_CODE_V1: i32 = 0xDAA3_20A7_u32 as i32;
/// Magic code of a V2 message, which has a 2-byte topic length (RocketMQ `MESSAGE_MAGIC_CODE_V2`).
pub const MESSAGE_MAGIC_CODE_V2: i32 = 0xDAA3_20AB_u32 as i32;
/// Magic code of the BLANK record that pads a segment (RocketMQ `BLANK_MAGIC_CODE`, -875286124).
pub const BLANK_MAGIC_CODE: i32 = 0xCBD4_3194_u32 as i32;
/// Length of the BLANK record (RocketMQ `END_FILE_MIN_BLANK_LENGTH`): a message is written in a
/// segment only if this many bytes remain after it.
pub const BLANK_RECORD_LEN: usize = 8;
/// The longest encoded properties string (RocketMQ checks against `Short.MAX_VALUE`).
pub const MAX_PROPERTIES_LEN: usize = i16::MAX as usize;
/// The longest topic a V1 message can carry (1-byte length; RocketMQ's `TOPIC_MAX_LENGTH`).
pub const MAX_TOPIC_LEN: usize = i8::MAX as usize;
/// The longest retry or DLQ topic (`%RETRY%`, `%DLQ%`), which RocketMQ 5.x stores as V2
/// (RocketMQ's `RETRY_OR_DLQ_TOPIC_MAX_LENGTH`).
pub const MAX_RETRY_TOPIC_LEN: usize = 255;
/// The property that carries a message's tags (RocketMQ `MessageConst.PROPERTY_TAGS`).
pub const PROPERTY_TAGS: &str = "TAGS";
/// Separates a property's name from its value.
pub const NAME_VALUE_SEPARATOR: char = '\u{1}';
/// Ends each property.
pub const PROPERTY_SEPARATOR: char = '\u{2}';

/// Bits of a message's `sysFlag` (RocketMQ `MessageSysFlag`).
pub mod sys_flag {
    /// The body is compressed.
    pub const COMPRESSED: i32 = 0x1;
    /// The message carries several tags.
    pub const MULTI_TAGS: i32 = 0x1 << 1;
    /// Mask of the transaction type bits.
    pub const TRANSACTION_MASK: i32 = 0x3 << 2;
    /// Not a transactional message.
    pub const TRANSACTION_NOT_TYPE: i32 = 0;
    /// A prepared (half) transactional message: stored but not dispatched to a consume queue.
    pub const TRANSACTION_PREPARED_TYPE: i32 = 0x1 << 2;
    /// A committed transactional message.
    pub const TRANSACTION_COMMIT_TYPE: i32 = 0x2 << 2;
    /// A rolled-back transactional message: stored but not dispatched to a consume queue.
    pub const TRANSACTION_ROLLBACK_TYPE: i32 = 0x3 << 2;
    /// The born host is IPv6 (20 bytes instead of 8).
    pub const BORNHOST_V6: i32 = 0x1 << 4;
    /// The store host is IPv6 (20 bytes instead of 8).
    pub const STOREHOST_V6: i32 = 0x1 << 5;
}

/// The stored message format versions.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum MessageVersion {
    /// Magic `0xDAA320A7`, 1-byte topic length. The store writes this version.
    V1,
    /// Magic `0xDAA320AB`, 2-byte topic length. Read only.
    V2,
}

impl MessageVersion {
    /// The magic code of this version.
    pub fn magic_code(self) -> i32 {
        match self {
            Self::V1 => MESSAGE_MAGIC_CODE_V1,
            Self::V2 => MESSAGE_MAGIC_CODE_V2,
        }
    }

    /// The version with this magic code.
    pub fn from_magic_code(magic: i32) -> Option<Self> {
        match magic {
            MESSAGE_MAGIC_CODE_V1 => Some(Self::V1),
            MESSAGE_MAGIC_CODE_V2 => Some(Self::V2),
            _ => None,
        }
    }

    fn topic_len_size(self) -> usize {
        match self {
            Self::V1 => 1,
            Self::V2 => 2,
        }
    }
}

/// Why a record is not a valid stored message or BLANK record.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The record's first 8 bytes are zero: nothing was written here.
    #[error("no record here (zero bytes)")]
    Empty,
    /// A BLANK padding record where a message was expected.
    #[error("a BLANK padding record, not a message")]
    Blank,
    /// The magic code is neither a message version nor BLANK.
    #[error("unknown magic code 0x{magic:08X}")]
    BadMagic {
        /// The magic code found.
        magic: i32,
    },
    /// The total size cannot be right.
    #[error("total size {total} is impossible ({remaining} bytes left in the segment)")]
    BadTotalSize {
        /// The size field.
        total: i32,
        /// Bytes from the record to the segment end.
        remaining: usize,
    },
    /// A BLANK record that does not pad exactly to the segment end.
    #[error("BLANK record declares {declared} bytes but {remaining} bytes are left in the segment")]
    BadBlank {
        /// The size the BLANK record declares.
        declared: i32,
        /// Bytes from the record to the segment end.
        remaining: usize,
    },
    /// Fewer bytes than the record declares.
    #[error("record of {total} bytes but only {available} bytes are present")]
    Truncated {
        /// The size field.
        total: usize,
        /// Bytes present.
        available: usize,
    },
    /// A field holds an impossible value.
    #[error("field {field} has impossible value {value}")]
    BadField {
        /// The field's name.
        field: &'static str,
        /// Its value.
        value: i64,
    },
    /// The topic is empty, has characters no RocketMQ topic has (`[%|a-zA-Z0-9_-]`), or is a
    /// V1 record's topic longer than its signed 1-byte length allows (127).
    #[error("illegal topic bytes {topic:?}")]
    IllegalTopic {
        /// The topic bytes, lossily decoded.
        topic: String,
    },
    /// The size field disagrees with the lengths inside the record.
    #[error("total size {total} but the fields add up to {computed}")]
    LengthMismatch {
        /// The size field.
        total: usize,
        /// The size computed from the body, topic and properties lengths.
        computed: usize,
    },
    /// The record's physical offset field is not where the record lies.
    #[error("physical offset field {stored} but the record lies at {actual}")]
    PhysicalOffsetMismatch {
        /// The field's value.
        stored: i64,
        /// Where the record is.
        actual: u64,
    },
    /// The record ends in a zero byte inside its properties (which RocketMQ always ends with
    /// `\u0002`): in the unflushed part of the log after a crash, the mark of a torn write.
    #[error("the properties end in a zero byte: the tail of a torn write")]
    ZeroSuffix,
    /// The body does not match its CRC.
    #[error("body CRC {stored} but the body's CRC is {computed}")]
    BodyCrcMismatch {
        /// The CRC field.
        stored: i32,
        /// The CRC of the body as stored.
        computed: i32,
    },
}

/// Why a message cannot be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EncodeError {
    /// The topic is empty, too long for V1 (127 bytes), or has characters outside
    /// `[%|a-zA-Z0-9_-]` (RocketMQ's topic pattern; the topic names a directory).
    #[error("illegal topic {topic:?}")]
    IllegalTopic {
        /// The topic.
        topic: String,
    },
    /// The queue id is negative.
    #[error("illegal queue id {queue_id}")]
    IllegalQueueId {
        /// The queue id.
        queue_id: i32,
    },
    /// A property name or value is empty or contains a separator character.
    #[error("illegal property {name:?}")]
    IllegalProperty {
        /// The property's name.
        name: String,
    },
    /// The encoded properties are longer than 32 767 bytes.
    #[error("properties are {len} bytes, more than {MAX_PROPERTIES_LEN}")]
    PropertiesTooLong {
        /// The encoded length.
        len: usize,
    },
    /// The encoded message is larger than allowed.
    #[error("message is {len} bytes, more than {max}")]
    TooLarge {
        /// The encoded length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

impl EncodeError {
    /// The put status RocketMQ reports for this error.
    pub fn put_status(&self) -> PutStatus {
        match self {
            Self::PropertiesTooLong { .. } => PutStatus::PropertiesSizeExceeded,
            _ => PutStatus::MessageIllegal,
        }
    }
}

/// A message as a producer hands it in (RocketMQ `MessageExtBrokerInner` before storing).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The topic: 1 to 127 bytes of `[%|a-zA-Z0-9_-]`.
    pub topic: String,
    /// The queue within the topic.
    pub queue_id: i32,
    /// The application flag.
    pub flag: i32,
    /// The body.
    pub body: Bytes,
    /// The properties, in order (`TAGS`, `KEYS`, `UNIQ_KEY`, user properties, ...).
    pub properties: Vec<(String, String)>,
    /// The system flag. The store sets the two host-family bits itself.
    pub sys_flag: i32,
    /// When the producer created the message (ms since the Unix epoch).
    pub born_timestamp: i64,
    /// The producer's address.
    pub born_host: SocketAddr,
    /// How many times the message has been redelivered.
    pub reconsume_times: i32,
    /// For transactional messages: the offset of the prepared message.
    pub prepared_transaction_offset: i64,
    /// Java's `propertiesString`: when set, stored as the properties exactly as it is (a Java
    /// broker's layout and order, which [`properties`](Self::properties) cannot express);
    /// `properties` is then not stored. At most 32 767 bytes.
    pub properties_string: Option<String>,
    /// A batch (`SEND_BATCH_MESSAGE`, Java's `MessageExtBatch`): when not empty, these are
    /// stored instead of this message's own body, flag and properties, one record each, on
    /// consecutive queue offsets of this message's topic and queue, in one append (they are
    /// never split across segments), each with this message's `sysFlag`, born timestamp and
    /// host, and reconsume times.
    pub batch: Vec<BatchEntry>,
}

/// One message of a batch ([`Message::batch`]): what differs between the batch's messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BatchEntry {
    /// The application flag.
    pub flag: i32,
    /// The body.
    pub body: Bytes,
    /// The properties string, stored as it is (Java 5.5 stores each message's as the producer
    /// encoded it).
    pub properties_string: String,
}

impl Message {
    /// A message with no properties, flag 0, born at time 0 on `127.0.0.1:0`.
    pub fn new(topic: impl Into<String>, queue_id: i32, body: impl Into<Bytes>) -> Self {
        Self {
            topic: topic.into(),
            queue_id,
            flag: 0,
            body: body.into(),
            properties: Vec::new(),
            sys_flag: 0,
            born_timestamp: 0,
            born_host: SocketAddr::from(([127, 0, 0, 1], 0)),
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            properties_string: None,
            batch: Vec::new(),
        }
    }

    /// Sets the `TAGS` property.
    #[must_use]
    pub fn with_tags(self, tags: impl Into<String>) -> Self {
        self.with_property(PROPERTY_TAGS, tags)
    }

    /// Sets a property, replacing an earlier value of the same name.
    #[must_use]
    pub fn with_property(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        let value = value.into();
        match self.properties.iter_mut().find(|(n, _)| *n == name) {
            Some(entry) => entry.1 = value,
            None => self.properties.push((name, value)),
        }
        self
    }

    /// The value of the `TAGS` property (of [`properties`](Self::properties)).
    pub fn tags(&self) -> Option<&str> {
        property(&self.properties, PROPERTY_TAGS)
    }
}

/// RocketMQ's topic of delayed messages (`TopicValidator.RMQ_SYS_SCHEDULE_TOPIC`): its
/// consume-queue tags codes are delivery times.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// The property holding a message's delay level (`MessageConst.PROPERTY_DELAY_TIME_LEVEL`).
pub const PROPERTY_DELAY_TIME_LEVEL: &str = "DELAY";

/// The consume-queue tags code of a message stored at `store_timestamp` in `topic` with these
/// encoded properties (RocketMQ's `checkMessageAndReturnSize`): in [`SCHEDULE_TOPIC`], a
/// message with a `DELAY` level above 0 gets its delivery time, `store_timestamp` plus the
/// level's delay from `delays_ms` (level 1 first; a level beyond the last is the last); any
/// other message the Java hash of its `TAGS` (0 without).
pub fn cq_tags_code(topic: &[u8], properties: &[u8], store_timestamp: i64, delays_ms: &[i64]) -> i64 {
    match schedule_delay(topic, properties, delays_ms) {
        Some(delay) => store_timestamp.saturating_add(delay),
        None => tags_code_of_properties(properties),
    }
}

/// The delay of a message of the schedule topic with a `DELAY` level above 0 (see
/// [`cq_tags_code`]); `None` for any other.
fn schedule_delay(topic: &[u8], properties: &[u8], delays_ms: &[i64]) -> Option<i64> {
    if topic != SCHEDULE_TOPIC.as_bytes() || delays_ms.is_empty() {
        return None;
    }
    let level = property_entries(properties)
        .filter(|(name, _)| *name == PROPERTY_DELAY_TIME_LEVEL.as_bytes())
        .last()
        .and_then(|(_, v)| std::str::from_utf8(v).ok()?.parse::<i64>().ok())
        .filter(|&l| l > 0)?;
    let at = usize::try_from(level.min(delays_ms.len() as i64) - 1).ok()?;
    Some(delays_ms[at])
}

/// The fields the store fills in when it writes a message.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct StoreFields {
    /// The message's offset in its consume queue.
    pub queue_offset: i64,
    /// Where the message starts in the commit log.
    pub physical_offset: i64,
    /// When the store wrote it (ms since the Unix epoch).
    pub store_timestamp: i64,
    /// The broker's address.
    pub store_host: SocketAddr,
}

/// A message read back from the log, with every stored field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredMessage {
    /// Bytes the message occupies.
    pub total_size: u32,
    /// The format version (magic code).
    pub version: MessageVersion,
    /// CRC32 of the body, masked to a non-negative `i32` as RocketMQ's `UtilAll.crc32` does.
    pub body_crc: i32,
    /// The queue within the topic.
    pub queue_id: i32,
    /// The application flag.
    pub flag: i32,
    /// The offset in the consume queue.
    pub queue_offset: i64,
    /// The offset in the commit log.
    pub physical_offset: i64,
    /// The system flag.
    pub sys_flag: i32,
    /// When the producer created the message.
    pub born_timestamp: i64,
    /// The producer's address.
    pub born_host: SocketAddr,
    /// When the store wrote the message.
    pub store_timestamp: i64,
    /// The broker's address.
    pub store_host: SocketAddr,
    /// How many times the message has been redelivered.
    pub reconsume_times: i32,
    /// For transactional messages: the offset of the prepared message.
    pub prepared_transaction_offset: i64,
    /// The body (a zero-copy slice of the log when read from the store).
    pub body: Bytes,
    /// The topic.
    pub topic: String,
    /// The properties, in stored order, parsed as RocketMQ parses them.
    pub properties: Vec<(String, String)>,
}

impl StoredMessage {
    /// Decodes one message from `record` (which may be longer), checking every length and the
    /// body CRC. The body is a zero-copy slice of `record`.
    pub fn decode(record: &Bytes) -> Result<Self, RecordError> {
        decode(record, None, true)
    }

    /// RocketMQ's offset message id of this message: store host and physical offset, upper-case hex.
    pub fn msg_id(&self) -> String {
        offset_msg_id(self.store_host, self.physical_offset as u64)
    }

    /// The value of the `TAGS` property.
    pub fn tags(&self) -> Option<&str> {
        property(&self.properties, PROPERTY_TAGS)
    }

    /// The consume-queue tag code: Java `String.hashCode` of the tags, 0 without tags.
    pub fn tags_code(&self) -> i64 {
        self.tags().map_or(0, tags_code)
    }
}

/// The value of the last property called `name` (RocketMQ keeps the last of duplicates).
pub fn property<'a>(properties: &'a [(String, String)], name: &str) -> Option<&'a str> {
    properties.iter().rev().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
}

/// Java's `String.hashCode` of `s`: `h = 31 * h + c` over its UTF-16 code units, wrapping.
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, unit| h.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// The consume-queue tag code of `tags` (RocketMQ `tagsString2tagsCode`): the Java hash code,
/// sign-extended to 64 bits; 0 for empty tags.
pub fn tags_code(tags: &str) -> i64 {
    if tags.is_empty() { 0 } else { i64::from(java_string_hash(tags)) }
}

/// The body CRC RocketMQ stores: `java.util.zip.CRC32` of the body masked with `0x7FFFFFFF`
/// (`UtilAll.crc32`), so it is never negative.
pub fn body_crc(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// RocketMQ's offset message id (`MessageDecoder.createMessageId`): the store host's address
/// bytes, its port as an `i32` and the physical offset as an `i64`, in upper-case hex.
pub fn offset_msg_id(store_host: SocketAddr, physical_offset: u64) -> String {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let mut bytes = [0u8; 28];
    let n = match store_host.ip() {
        IpAddr::V4(ip) => {
            bytes[..4].copy_from_slice(&ip.octets());
            4
        }
        IpAddr::V6(ip) => {
            bytes[..16].copy_from_slice(&ip.octets());
            16
        }
    };
    bytes[n..n + 4].copy_from_slice(&i32::from(store_host.port()).to_be_bytes());
    bytes[n + 4..n + 12].copy_from_slice(&physical_offset.to_be_bytes());
    let mut id = String::with_capacity(2 * (n + 12));
    for b in &bytes[..n + 12] {
        id.push(char::from(HEX[usize::from(b >> 4)]));
        id.push(char::from(HEX[usize::from(b & 0xF)]));
    }
    id
}

/// The stored length of a message (RocketMQ `MessageExtEncoder.calMsgLength`).
pub fn stored_len(
    version: MessageVersion,
    sys_flag: i32,
    body_len: usize,
    topic_len: usize,
    properties_len: usize,
) -> usize {
    let born_host = if sys_flag & sys_flag::BORNHOST_V6 == 0 { 8 } else { 20 };
    let store_host = if sys_flag & sys_flag::STOREHOST_V6 == 0 { 8 } else { 20 };
    4 + 4
        + 4
        + 4
        + 4
        + 8
        + 8
        + 4
        + 8
        + born_host
        + 8
        + store_host
        + 4
        + 8
        + 4
        + body_len
        + version.topic_len_size()
        + topic_len
        + 2
        + properties_len
}

/// Encodes properties as RocketMQ does (`messageProperties2String`): `name \u0001 value \u0002`
/// for each property, in order.
pub fn encode_properties(properties: &[(String, String)]) -> Result<String, EncodeError> {
    let mut out = String::with_capacity(properties_len(properties)?);
    for (name, value) in properties {
        out.push_str(name);
        out.push(NAME_VALUE_SEPARATOR);
        out.push_str(value);
        out.push(PROPERTY_SEPARATOR);
    }
    Ok(out)
}

/// The encoded length of `properties`, after checking that no name or value is empty or holds a
/// separator.
fn properties_len(properties: &[(String, String)]) -> Result<usize, EncodeError> {
    let bad = |s: &str| {
        s.is_empty() || s.bytes().any(|b| b == NAME_VALUE_SEPARATOR as u8 || b == PROPERTY_SEPARATOR as u8)
    };
    properties.iter().try_fold(0, |len, (name, value)| {
        if bad(name) || bad(value) {
            return Err(EncodeError::IllegalProperty { name: name.clone() });
        }
        Ok(len + name.len() + value.len() + 2)
    })
}

/// Parses a properties string as RocketMQ does (`string2messageProperties`): entries are split at
/// `\u0002`, name and value at the first `\u0001`; entries with an empty name or value are skipped.
pub fn parse_properties(properties: &str) -> Vec<(String, String)> {
    property_entries(properties.as_bytes())
        .map(|(name, value)| {
            (String::from_utf8_lossy(name).into_owned(), String::from_utf8_lossy(value).into_owned())
        })
        .collect()
}

/// The raw `(name, value)` entries of an encoded properties string, with RocketMQ's rules. The
/// separators are ASCII, so splitting the UTF-8 bytes splits exactly where Java splits the chars.
pub(crate) fn property_entries(props: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    props.split(|&b| b == PROPERTY_SEPARATOR as u8).filter_map(|entry| {
        let sep = entry.iter().position(|&b| b == NAME_VALUE_SEPARATOR as u8)?;
        let (name, value) = (&entry[..sep], &entry[sep + 1..]);
        (!name.is_empty() && !value.is_empty()).then_some((name, value))
    })
}

/// The tag code of an encoded properties string (0 without a non-empty `TAGS` property).
pub(crate) fn tags_code_of_properties(props: &[u8]) -> i64 {
    let tags = property_entries(props).filter(|(name, _)| *name == PROPERTY_TAGS.as_bytes()).last();
    match tags {
        Some((_, value)) => tags_code(&String::from_utf8_lossy(value)),
        None => 0,
    }
}

/// Whether `topic` is a legal topic name (RocketMQ 5.x `TopicValidator`: 1 to 127 characters of
/// `[%|a-zA-Z0-9_-]`, up to 255 for retry and DLQ topics). The store uses the topic as a
/// directory name, so this also keeps paths safe.
pub fn valid_topic(topic: &[u8]) -> bool {
    let max = if topic.starts_with(b"%RETRY%") || topic.starts_with(b"%DLQ%") {
        MAX_RETRY_TOPIC_LEN
    } else {
        MAX_TOPIC_LEN
    };
    topic.len() <= max && valid_topic_chars(topic)
}

/// Whether `topic` is 1 or more characters of `[%|a-zA-Z0-9_-]`, whatever its length.
fn valid_topic_chars(topic: &[u8]) -> bool {
    !topic.is_empty()
        && topic.iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-'))
}

/// The properties of one record, as they will be written.
enum Props {
    Pairs(Vec<(String, String)>),
    Raw(String),
}

impl Props {
    fn write(&self, w: &mut SliceWriter<'_>) {
        match self {
            Self::Pairs(pairs) => {
                for (name, value) in pairs {
                    w.bytes(name.as_bytes());
                    w.bytes(&[NAME_VALUE_SEPARATOR as u8]);
                    w.bytes(value.as_bytes());
                    w.bytes(&[PROPERTY_SEPARATOR as u8]);
                }
            }
            Self::Raw(raw) => w.bytes(raw.as_bytes()),
        }
    }

    fn encoded(&self) -> Vec<u8> {
        let mut out = vec![0; self.len()];
        self.write(&mut SliceWriter { out: &mut out, at: 0 });
        out
    }

    fn len(&self) -> usize {
        match self {
            Self::Pairs(pairs) => pairs.iter().map(|(n, v)| n.len() + v.len() + 2).sum(),
            Self::Raw(raw) => raw.len(),
        }
    }
}

/// One record of a prepared put.
struct PreparedRecord {
    flag: i32,
    body: Bytes,
    props: Props,
    body_crc: i32,
    len: usize,
    /// The tags code, or the delay to add to the store timestamp (the schedule topic).
    tags: Tags,
}

#[derive(Clone, Copy)]
enum Tags {
    Code(i64),
    DeliverAfter(i64),
}

/// A message (or batch) validated and encoded as far as possible before the put lock is taken:
/// only the queue offsets, physical offsets and store timestamp remain to be filled in.
pub(crate) struct PreparedMessage {
    message: Message,
    records: Vec<PreparedRecord>,
    sys_flag: i32,
    store_host: SocketAddr,
    len: usize,
}

impl PreparedMessage {
    pub(crate) fn new(
        message: Message,
        store_host: SocketAddr,
        max_message_size: usize,
    ) -> Result<Self, EncodeError> {
        Self::with_delays(message, store_host, max_message_size, &[])
    }

    /// [`new`](Self::new), with the delay levels that give the schedule topic's tags codes
    /// ([`cq_tags_code`]).
    pub(crate) fn with_delays(
        mut message: Message,
        store_host: SocketAddr,
        max_message_size: usize,
        delays_ms: &[i64],
    ) -> Result<Self, EncodeError> {
        // The writer writes V1, whose topic length is one byte.
        if !valid_topic(message.topic.as_bytes()) || message.topic.len() > MAX_TOPIC_LEN {
            return Err(EncodeError::IllegalTopic { topic: message.topic });
        }
        if message.queue_id < 0 {
            return Err(EncodeError::IllegalQueueId { queue_id: message.queue_id });
        }
        let mut sys_flag = message.sys_flag & !(sys_flag::BORNHOST_V6 | sys_flag::STOREHOST_V6);
        if message.born_host.is_ipv6() {
            sys_flag |= sys_flag::BORNHOST_V6;
        }
        if store_host.is_ipv6() {
            sys_flag |= sys_flag::STOREHOST_V6;
        }
        let batch = std::mem::take(&mut message.batch);
        let mut parts: Vec<(i32, Bytes, Props)> = Vec::with_capacity(batch.len().max(1));
        if batch.is_empty() {
            let props = match message.properties_string.take() {
                Some(raw) => Props::Raw(raw),
                None => {
                    properties_len(&message.properties)?;
                    Props::Pairs(std::mem::take(&mut message.properties))
                }
            };
            parts.push((message.flag, message.body.clone(), props));
        } else {
            parts.extend(batch.into_iter().map(|e| (e.flag, e.body, Props::Raw(e.properties_string))));
        }
        let mut records = Vec::with_capacity(parts.len());
        let mut len = 0usize;
        let schedule = message.topic == SCHEDULE_TOPIC;
        for (flag, body, props) in parts {
            let properties_len = props.len();
            if properties_len > MAX_PROPERTIES_LEN {
                return Err(EncodeError::PropertiesTooLong { len: properties_len });
            }
            let record_len =
                stored_len(MessageVersion::V1, sys_flag, body.len(), message.topic.len(), properties_len);
            if record_len > max_message_size || record_len > i32::MAX as usize {
                return Err(EncodeError::TooLarge {
                    len: record_len,
                    max: max_message_size.min(i32::MAX as usize),
                });
            }
            let tags = if schedule {
                let encoded = props.encoded();
                match schedule_delay(message.topic.as_bytes(), &encoded, delays_ms) {
                    Some(delay) => Tags::DeliverAfter(delay),
                    None => Tags::Code(tags_code_of_properties(&encoded)),
                }
            } else {
                match &props {
                    Props::Pairs(pairs) => Tags::Code(property(pairs, PROPERTY_TAGS).map_or(0, tags_code)),
                    Props::Raw(raw) => Tags::Code(tags_code_of_properties(raw.as_bytes())),
                }
            };
            let body_crc = body_crc(&body);
            len += record_len;
            records.push(PreparedRecord { flag, body, props, body_crc, len: record_len, tags });
        }
        if len > i32::MAX as usize {
            return Err(EncodeError::TooLarge { len, max: i32::MAX as usize });
        }
        Ok(Self { message, records, sys_flag, store_host, len })
    }

    /// Bytes of every record together.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// How many records (1, or a batch's messages).
    pub(crate) fn count(&self) -> usize {
        self.records.len()
    }

    /// Each record's length.
    pub(crate) fn record_lens(&self) -> impl Iterator<Item = usize> + '_ {
        self.records.iter().map(|r| r.len)
    }

    pub(crate) fn topic(&self) -> &str {
        &self.message.topic
    }

    pub(crate) fn queue_id(&self) -> i32 {
        self.message.queue_id
    }

    /// Record `i`'s tags code, for a store timestamp.
    pub(crate) fn tags_code(&self, i: usize, store_timestamp: i64) -> i64 {
        match self.records[i].tags {
            Tags::Code(c) => c,
            Tags::DeliverAfter(d) => store_timestamp.saturating_add(d),
        }
    }

    /// Whether the message goes into a consume queue (prepared and rolled-back transactional
    /// messages do not, and get queue offset 0).
    pub(crate) fn is_dispatched(&self) -> bool {
        dispatched_sys_flag(self.sys_flag)
    }

    /// Writes every record into `out`, which must be exactly [`len`](Self::len) bytes: record
    /// `i` at queue offset `queue_offset + i` (or 0, undispatched), back to back from
    /// `physical_offset`.
    pub(crate) fn write(
        &self,
        out: &mut [u8],
        queue_offset: i64,
        physical_offset: i64,
        store_timestamp: i64,
    ) {
        debug_assert_eq!(out.len(), self.len);
        let m = &self.message;
        let mut w = SliceWriter { out, at: 0 };
        for (i, r) in self.records.iter().enumerate() {
            let start = w.at;
            let qo = if self.is_dispatched() { queue_offset + i as i64 } else { queue_offset };
            w.i32(r.len as i32);
            w.i32(MESSAGE_MAGIC_CODE_V1);
            w.i32(r.body_crc);
            w.i32(m.queue_id);
            w.i32(r.flag);
            w.i64(qo);
            w.i64(physical_offset + start as i64);
            w.i32(self.sys_flag);
            w.i64(m.born_timestamp);
            w.host(m.born_host);
            w.i64(store_timestamp);
            w.host(self.store_host);
            w.i32(m.reconsume_times);
            w.i64(m.prepared_transaction_offset);
            w.i32(r.body.len() as i32);
            w.bytes(&r.body);
            w.bytes(&[m.topic.len() as u8]);
            w.bytes(m.topic.as_bytes());
            w.bytes(&(r.props.len() as i16).to_be_bytes());
            r.props.write(&mut w);
            debug_assert_eq!(w.at - start, r.len);
        }
        debug_assert_eq!(w.at, self.len);
    }
}

/// Whether a message with this `sysFlag` is dispatched to a consume queue.
pub(crate) fn dispatched_sys_flag(sys_flag: i32) -> bool {
    matches!(
        sys_flag & sys_flag::TRANSACTION_MASK,
        sys_flag::TRANSACTION_NOT_TYPE | sys_flag::TRANSACTION_COMMIT_TYPE
    )
}

/// Encodes `message` as the store would write it with `fields` (magic V1). The `sysFlag` host
/// bits are set from the address families.
pub fn encode(message: &Message, fields: &StoreFields) -> Result<Vec<u8>, EncodeError> {
    let prepared = PreparedMessage::new(message.clone(), fields.store_host, usize::MAX)?;
    let mut out = vec![0; prepared.len()];
    prepared.write(&mut out, fields.queue_offset, fields.physical_offset, fields.store_timestamp);
    Ok(out)
}

/// The BLANK record that pads `remaining` bytes at the end of a segment.
pub fn blank_record(remaining: usize) -> [u8; BLANK_RECORD_LEN] {
    let mut out = [0; BLANK_RECORD_LEN];
    out[..4].copy_from_slice(&(remaining as i32).to_be_bytes());
    out[4..].copy_from_slice(&BLANK_MAGIC_CODE.to_be_bytes());
    out
}

struct SliceWriter<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl SliceWriter<'_> {
    fn bytes(&mut self, b: &[u8]) {
        self.out[self.at..self.at + b.len()].copy_from_slice(b);
        self.at += b.len();
    }
    fn i32(&mut self, v: i32) {
        self.bytes(&v.to_be_bytes());
    }
    fn i64(&mut self, v: i64) {
        self.bytes(&v.to_be_bytes());
    }
    fn host(&mut self, addr: SocketAddr) {
        match addr.ip() {
            IpAddr::V4(ip) => self.bytes(&ip.octets()),
            IpAddr::V6(ip) => self.bytes(&ip.octets()),
        }
        self.i32(i32::from(addr.port()));
    }
}

/// The fields of a valid message record, borrowed from the log.
#[derive(Debug)]
pub(crate) struct RecordView<'a> {
    pub(crate) total: usize,
    pub(crate) version: MessageVersion,
    pub(crate) body_crc: i32,
    pub(crate) queue_id: i32,
    pub(crate) flag: i32,
    pub(crate) queue_offset: i64,
    pub(crate) physical_offset: i64,
    pub(crate) sys_flag: i32,
    pub(crate) born_timestamp: i64,
    pub(crate) born_host: SocketAddr,
    pub(crate) store_timestamp: i64,
    pub(crate) store_host: SocketAddr,
    pub(crate) reconsume_times: i32,
    pub(crate) prepared_transaction_offset: i64,
    pub(crate) body: Range<usize>,
    pub(crate) topic: &'a [u8],
    pub(crate) properties: &'a [u8],
}

/// What a record in the log is.
#[derive(Debug)]
pub(crate) enum Record<'a> {
    /// A valid message.
    Message(RecordView<'a>),
    /// A valid BLANK record padding the rest of the segment.
    Blank { len: usize },
    /// More bytes are needed to judge (they may still arrive: replication is not message-aligned).
    Incomplete,
    /// Not a valid record.
    Invalid { error: RecordError },
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut x = [0; 8];
    x.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(x)
}

/// Optional checks of [`parse_record`].
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct Checks {
    /// Verify the body CRC.
    pub(crate) crc: bool,
    /// Reject a message whose non-empty properties end in a zero byte. RocketMQ's format protects
    /// only the body with a CRC; a write torn inside the properties leaves a zero suffix that
    /// would otherwise pass. Used where a torn write is possible (the unflushed tail after a crash).
    pub(crate) zero_suffix: bool,
}

/// Judges the record at the start of `buf`.
///
/// `buf` holds the bytes present from the record start (at most to the segment end);
/// `remaining` is the number of bytes from the record start to the segment end. If
/// `physical_offset` is given, the record's offset field must equal it.
pub(crate) fn parse_record(
    buf: &[u8],
    remaining: usize,
    physical_offset: Option<u64>,
    checks: Checks,
) -> Record<'_> {
    let header = |error| Record::Invalid { error };
    if buf.len() < BLANK_RECORD_LEN {
        return Record::Incomplete;
    }
    let total_field = be_i32(buf, 0);
    let magic = be_i32(buf, 4);
    if magic == BLANK_MAGIC_CODE {
        return if total_field >= 0 && total_field as usize == remaining {
            Record::Blank { len: remaining }
        } else {
            header(RecordError::BadBlank { declared: total_field, remaining })
        };
    }
    let Some(version) = MessageVersion::from_magic_code(magic) else {
        return header(if total_field == 0 && magic == 0 {
            RecordError::Empty
        } else {
            RecordError::BadMagic { magic }
        });
    };
    let min_len = stored_len(version, 0, 0, 0, 0);
    // A message must leave room for the BLANK record after it... except that other writers may
    // fill a segment exactly, which readers accept (they roll to the next segment at its end).
    if total_field < min_len as i32 || total_field as usize > remaining {
        return header(RecordError::BadTotalSize { total: total_field, remaining });
    }
    let total = total_field as usize;
    if buf.len() < total {
        return Record::Incomplete;
    }
    let rec = &buf[..total];
    let invalid = |error| Record::Invalid { error };

    let body_crc = be_i32(rec, 8);
    let queue_id = be_i32(rec, 12);
    let flag = be_i32(rec, 16);
    let queue_offset = be_i64(rec, 20);
    let stored_offset = be_i64(rec, 28);
    let sys_flag = be_i32(rec, 36);
    let born_timestamp = be_i64(rec, 40);
    let mut at = 48;
    let born_v6 = sys_flag & sys_flag::BORNHOST_V6 != 0;
    let store_v6 = sys_flag & sys_flag::STOREHOST_V6 != 0;
    // The fixed part is in bounds: total >= min_len; hosts may be longer, so check as we go.
    let fixed_with_hosts = stored_len(version, sys_flag, 0, 0, 0);
    if total < fixed_with_hosts {
        return invalid(RecordError::LengthMismatch { total, computed: fixed_with_hosts });
    }
    let born_host = read_host(rec, &mut at, born_v6);
    let store_timestamp = be_i64(rec, at);
    at += 8;
    let store_host = read_host(rec, &mut at, store_v6);
    let reconsume_times = be_i32(rec, at);
    let prepared_transaction_offset = be_i64(rec, at + 4);
    at += 12;
    let body_len = be_i32(rec, at);
    at += 4;
    if body_len < 0 || body_len as usize > total - fixed_with_hosts {
        return invalid(RecordError::BadField { field: "bodyLength", value: i64::from(body_len) });
    }
    let body = at..at + body_len as usize;
    at = body.end;
    let topic_len = match version {
        MessageVersion::V1 => usize::from(rec[at]),
        MessageVersion::V2 => u16::from_be_bytes([rec[at], rec[at + 1]]) as usize,
    };
    at += version.topic_len_size();
    // Everything up to and including the properties length must fit.
    if at + topic_len + 2 > total {
        return invalid(RecordError::BadField { field: "topicLength", value: topic_len as i64 });
    }
    let topic = &rec[at..at + topic_len];
    at += topic_len;
    let props_len = i16::from_be_bytes([rec[at], rec[at + 1]]);
    at += 2;
    if props_len < 0 {
        return invalid(RecordError::BadField { field: "propertiesLength", value: i64::from(props_len) });
    }
    let computed = stored_len(version, sys_flag, body_len as usize, topic_len, props_len as usize);
    if computed != total {
        return invalid(RecordError::LengthMismatch { total, computed });
    }
    let properties = &rec[at..at + props_len as usize];
    // The characters are checked here (a torn write leaves zeros); the length rule only where
    // it matters (writing, indexing): RocketMQ's store keeps a record whatever its topic's length.
    if !valid_topic_chars(topic) || (version == MessageVersion::V1 && topic_len > MAX_TOPIC_LEN) {
        return invalid(RecordError::IllegalTopic { topic: String::from_utf8_lossy(topic).into_owned() });
    }
    if let Some(actual) = physical_offset {
        if stored_offset < 0 || stored_offset as u64 != actual {
            return invalid(RecordError::PhysicalOffsetMismatch { stored: stored_offset, actual });
        }
    }
    if checks.zero_suffix && !properties.is_empty() && rec[total - 1] == 0 {
        return invalid(RecordError::ZeroSuffix);
    }
    if checks.crc {
        let computed = self::body_crc(&rec[body.clone()]);
        if computed != body_crc {
            return invalid(RecordError::BodyCrcMismatch { stored: body_crc, computed });
        }
    }
    Record::Message(RecordView {
        total,
        version,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset: stored_offset,
        sys_flag,
        born_timestamp,
        born_host,
        store_timestamp,
        store_host,
        reconsume_times,
        prepared_transaction_offset,
        body,
        topic,
        properties,
    })
}

fn read_host(rec: &[u8], at: &mut usize, v6: bool) -> SocketAddr {
    let ip = if v6 {
        let mut o = [0; 16];
        o.copy_from_slice(&rec[*at..*at + 16]);
        *at += 16;
        IpAddr::V6(Ipv6Addr::from(o))
    } else {
        let ip = Ipv4Addr::new(rec[*at], rec[*at + 1], rec[*at + 2], rec[*at + 3]);
        *at += 4;
        IpAddr::V4(ip)
    };
    // Java stores the port as an int; only the low 16 bits can be a port.
    let port = be_i32(rec, *at) as u16;
    *at += 4;
    SocketAddr::new(ip, port)
}

/// Decodes the message at the start of `record`.
pub(crate) fn decode(
    record: &Bytes,
    physical_offset: Option<u64>,
    check_crc: bool,
) -> Result<StoredMessage, RecordError> {
    match parse_record(record, record.len(), physical_offset, Checks { crc: check_crc, zero_suffix: false }) {
        Record::Message(v) => Ok(StoredMessage {
            total_size: v.total as u32,
            version: v.version,
            body_crc: v.body_crc,
            queue_id: v.queue_id,
            flag: v.flag,
            queue_offset: v.queue_offset,
            physical_offset: v.physical_offset,
            sys_flag: v.sys_flag,
            born_timestamp: v.born_timestamp,
            born_host: v.born_host,
            store_timestamp: v.store_timestamp,
            store_host: v.store_host,
            reconsume_times: v.reconsume_times,
            prepared_transaction_offset: v.prepared_transaction_offset,
            body: record.slice(v.body.clone()),
            topic: String::from_utf8_lossy(v.topic).into_owned(),
            properties: parse_properties(&String::from_utf8_lossy(v.properties)),
        }),
        Record::Blank { .. } => Err(RecordError::Blank),
        Record::Incomplete => {
            let total = if record.len() >= 4 { be_i32(record, 0).max(0) as usize } else { BLANK_RECORD_LEN };
            Err(RecordError::Truncated { total, available: record.len() })
        }
        Record::Invalid { error } => Err(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Java `String.hashCode` vectors. "hello" and "polygenelubricants" (which hashes to
    /// `Integer.MIN_VALUE`) are well-known Java values; the others were computed with the
    /// `String.hashCode` formula over UTF-16 code units in Python:
    /// `h = (31*h + unit) mod 2^32` over `s.encode('utf-16-be')`, read as signed.
    #[test]
    fn java_string_hash_matches_java_over_utf16_code_units() {
        assert_eq!(java_string_hash(""), 0);
        assert_eq!(java_string_hash("hello"), 99_162_322);
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash("é"), 233, "one BMP code unit, not two UTF-8 bytes");
        assert_eq!(java_string_hash("标签"), 857_175);
        assert_eq!(java_string_hash("\u{1F600}"), 1_772_899, "a surrogate pair counts as two units");
        assert_eq!(tags_code("polygenelubricants"), -2_147_483_648, "sign-extended to i64");
        assert_eq!(tags_code(""), 0);
    }

    /// CRC32 vectors: "123456789" is the standard CRC-32 check value 0xCBF43926; RocketMQ masks
    /// it with 0x7FFFFFFF (`UtilAll.crc32`). "interop-message-000002" is the body of message 2 in
    /// the rocketmq-rust fixture store, whose bodyCRC field reads 0x3809A4C1 while the raw CRC
    /// (Python `zlib.crc32`) is 0xB809A4C1: the fixture confirms the mask.
    #[test]
    fn body_crc_is_crc32_masked_to_a_positive_int() {
        assert_eq!(body_crc(b"123456789"), 0x4BF4_3926);
        assert_eq!(body_crc(b"interop-message-000002"), 0x3809_A4C1);
        assert_eq!(body_crc(b"interop-message-000000"), 0x5607_C5ED);
        assert_eq!(body_crc(b""), 0);
    }

    #[test]
    fn properties_encode_as_name_soh_value_stx_and_parse_like_java() {
        let props = vec![("TAGS".to_string(), "a".to_string()), ("KEYS".to_string(), "k1 k2".to_string())];
        let s = encode_properties(&props).unwrap();
        assert_eq!(s, "TAGS\u{1}a\u{2}KEYS\u{1}k1 k2\u{2}");
        assert_eq!(parse_properties(&s), props);
        // Java skips entries without a name or value, and accepts a missing final separator.
        assert_eq!(
            parse_properties("\u{1}x\u{2}y\u{1}\u{2}noval\u{2}a\u{1}b"),
            vec![("a".to_string(), "b".to_string())]
        );
        assert!(encode_properties(&[("a\u{1}".into(), "b".into())]).is_err());
        assert!(encode_properties(&[("a".into(), String::new())]).is_err());
        assert_eq!(tags_code_of_properties(s.as_bytes()), tags_code("a"));
    }

    /// The byte-exact vector is written out field by field from the layout in the protocol
    /// notes §6.2 (independently of the encoder): IPv4 born host 10.0.0.1:5000, IPv6 store host
    /// [::1]:10911 (so sysFlag gets STOREHOST_V6 = 0x20), body "hi", topic "T", TAGS=x.
    #[test]
    fn encode_writes_the_documented_layout_byte_for_byte() {
        let msg = Message {
            flag: 7,
            sys_flag: 0,
            born_timestamp: 0x0102_0304_0506_0708,
            born_host: "10.0.0.1:5000".parse().unwrap(),
            reconsume_times: 3,
            prepared_transaction_offset: 9,
            ..Message::new("T", 2, &b"hi"[..]).with_tags("x")
        };
        let fields = StoreFields {
            queue_offset: 5,
            physical_offset: 4096,
            store_timestamp: 0x1112_1314_1516_1718,
            store_host: "[::1]:10911".parse().unwrap(),
        };
        let mut want = Vec::new();
        let props = b"TAGS\x01x\x02";
        let total =
            4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + 8 + 8 + 20 + 4 + 8 + (4 + 2) + (1 + 1) + (2 + props.len());
        want.extend_from_slice(&(total as i32).to_be_bytes()); // totalSize
        want.extend_from_slice(&[0xDA, 0xA3, 0x20, 0xA7]); // magic V1
        want.extend_from_slice(&body_crc(b"hi").to_be_bytes()); // bodyCRC
        want.extend_from_slice(&2i32.to_be_bytes()); // queueId
        want.extend_from_slice(&7i32.to_be_bytes()); // flag
        want.extend_from_slice(&5i64.to_be_bytes()); // queueOffset
        want.extend_from_slice(&4096i64.to_be_bytes()); // physicalOffset
        want.extend_from_slice(&0x20i32.to_be_bytes()); // sysFlag: STOREHOST_V6
        want.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]); // bornTimestamp
        want.extend_from_slice(&[10, 0, 0, 1, 0, 0, 0x13, 0x88]); // bornHost 10.0.0.1 : 5000
        want.extend_from_slice(&[0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]); // storeTimestamp
        want.extend_from_slice(&[0; 15]); // storeHost ::1 ...
        want.extend_from_slice(&[1, 0, 0, 0x2A, 0x9F]); // ... and port 10911
        want.extend_from_slice(&3i32.to_be_bytes()); // reconsumeTimes
        want.extend_from_slice(&9i64.to_be_bytes()); // preparedTransactionOffset
        want.extend_from_slice(&[0, 0, 0, 2, b'h', b'i']); // body
        want.extend_from_slice(&[1, b'T']); // topic (1-byte length, V1)
        want.extend_from_slice(&(props.len() as i16).to_be_bytes()); // propertiesLength
        want.extend_from_slice(props);
        assert_eq!(want.len(), total);

        let got = encode(&msg, &fields).unwrap();
        assert_eq!(got, want);

        let decoded = StoredMessage::decode(&Bytes::from(got)).unwrap();
        assert_eq!(decoded.topic, "T");
        assert_eq!(decoded.queue_offset, 5);
        assert_eq!(decoded.store_host, fields.store_host);
        assert_eq!(decoded.born_host, msg.born_host);
        assert_eq!(decoded.sys_flag, sys_flag::STOREHOST_V6);
        assert_eq!(decoded.tags(), Some("x"));
        assert_eq!(&decoded.body[..], b"hi");
        // [::1] is 15 zero bytes and a 1, then port 10911 = 0x2A9F as an i32, then offset 4096.
        assert_eq!(
            decoded.msg_id(),
            "00000000000000000000000000000001".to_string() + "00002A9F" + "0000000000001000"
        );
    }

    /// A V2 record is the V1 bytes with magic 0xDAA320AB and a 2-byte topic length (one byte
    /// longer): built here by splicing a V1 encoding.
    #[test]
    fn decode_reads_v2_records_with_two_byte_topic_length() {
        let fields = StoreFields {
            queue_offset: 1,
            physical_offset: 0,
            store_timestamp: 2,
            store_host: "1.2.3.4:5".parse().unwrap(),
        };
        let v1 = encode(&Message::new("TopicV2", 0, &b"body"[..]), &fields).unwrap();
        let topic_at = v1.len() - 2 - "TopicV2".len() - 1;
        let mut v2 = Vec::new();
        v2.extend_from_slice(&((v1.len() + 1) as i32).to_be_bytes());
        v2.extend_from_slice(&MESSAGE_MAGIC_CODE_V2.to_be_bytes());
        v2.extend_from_slice(&v1[8..topic_at]);
        v2.extend_from_slice(&(7u16).to_be_bytes());
        v2.extend_from_slice(&v1[topic_at + 1..]);
        let m = StoredMessage::decode(&Bytes::from(v2)).unwrap();
        assert_eq!(m.version, MessageVersion::V2);
        assert_eq!(m.topic, "TopicV2");
        assert_eq!(&m.body[..], b"body");
    }

    /// RocketMQ 5.x allows retry and DLQ topics of up to 255 bytes and stores them as V2.
    #[test]
    fn decode_reads_rocketmq_5_topics_longer_than_127_bytes_as_v2() {
        let fields = StoreFields {
            queue_offset: 1,
            physical_offset: 0,
            store_timestamp: 2,
            store_host: "1.2.3.4:5".parse().unwrap(),
        };
        let v1 = encode(&Message::new("T", 0, &b"body"[..]), &fields).unwrap();
        let topic_at = v1.len() - 2 - 1 - 1;
        let v2_with = |topic: &str| {
            let mut v2 = Vec::new();
            v2.extend_from_slice(&((v1.len() + topic.len()) as i32).to_be_bytes());
            v2.extend_from_slice(&MESSAGE_MAGIC_CODE_V2.to_be_bytes());
            v2.extend_from_slice(&v1[8..topic_at]);
            v2.extend_from_slice(&(topic.len() as u16).to_be_bytes());
            v2.extend_from_slice(topic.as_bytes());
            v2.extend_from_slice(&v1[topic_at + 2..]);
            StoredMessage::decode(&Bytes::from(v2))
        };
        let retry = format!("%RETRY%{}_{}", "G".repeat(120), "T".repeat(100));
        assert_eq!(v2_with(&retry).unwrap().topic, retry);
        let dlq = format!("%DLQ%{}", "G".repeat(250));
        assert_eq!(v2_with(&dlq).unwrap().topic, dlq);
        // A plain topic this long is not a legal name, but the record is well formed: RocketMQ's
        // store keeps and indexes it, logship keeps it (the consume queues skip it).
        let plain = "T".repeat(128);
        assert_eq!(v2_with(&plain).unwrap().topic, plain);
        assert!(!valid_topic(plain.as_bytes()) && valid_topic(retry.as_bytes()));
        assert!(!valid_topic(format!("%RETRY%{}", "G".repeat(249)).as_bytes()));
        // V1's topic length is a signed byte: RocketMQ cannot read one over 127.
        let mut long_v1 = Vec::new();
        long_v1.extend_from_slice(&((v1.len() + 199) as i32).to_be_bytes());
        long_v1.extend_from_slice(&v1[4..topic_at]);
        long_v1.push(200);
        long_v1.extend_from_slice("T".repeat(200).as_bytes());
        long_v1.extend_from_slice(&v1[topic_at + 2..]);
        assert!(matches!(
            StoredMessage::decode(&Bytes::from(long_v1)),
            Err(RecordError::IllegalTopic { .. })
        ));
        // The writer writes V1 only, whose 1-byte topic length stops at 127.
        assert!(matches!(
            encode(&Message::new(retry.clone(), 0, &b"body"[..]), &fields),
            Err(EncodeError::IllegalTopic { .. })
        ));
    }

    fn host() -> impl proptest::strategy::Strategy<Value = SocketAddr> {
        use proptest::prelude::*;
        prop_oneof![
            (any::<[u8; 4]>(), any::<u16>()).prop_map(|(ip, port)| SocketAddr::from((ip, port))),
            (any::<[u8; 16]>(), any::<u16>())
                .prop_map(|(ip, port)| SocketAddr::from((Ipv6Addr::from(ip), port))),
        ]
    }

    proptest::proptest! {
        #[test]
        fn decode_inverts_encode(
            topic in "[%|a-zA-Z0-9_-]{1,127}",
            queue_id in 0..i32::MAX,
            flag: i32,
            body in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..300),
            props in proptest::collection::vec(("[a-zA-Z]{1,8}", "[^\\x01\\x02]{1,20}"), 0..4),
            sys_flag in 0..0x0F_i32,
            born_timestamp: i64,
            born_host in host(),
            reconsume_times: i32,
            prepared_transaction_offset: i64,
            queue_offset in 0..i64::MAX,
            physical_offset in 0..i64::MAX,
            store_timestamp: i64,
            store_host in host(),
        ) {
            let mut properties: Vec<(String, String)> = Vec::new();
            for (k, v) in props {
                if !properties.iter().any(|(n, _)| *n == k) {
                    properties.push((k, v));
                }
            }
            let msg = Message {
                topic, queue_id, flag, body: Bytes::from(body), properties, sys_flag, born_timestamp, born_host,
                reconsume_times, prepared_transaction_offset, properties_string: None, batch: Vec::new(),
            };
            let fields = StoreFields { queue_offset, physical_offset, store_timestamp, store_host };
            let bytes = Bytes::from(encode(&msg, &fields).unwrap());
            let m = decode(&bytes, Some(physical_offset as u64), true).unwrap();
            proptest::prop_assert_eq!(m.total_size as usize, bytes.len());
            proptest::prop_assert_eq!(m.version, MessageVersion::V1);
            proptest::prop_assert_eq!((&m.topic, m.queue_id, m.flag, &m.body), (&msg.topic, msg.queue_id, msg.flag, &msg.body));
            proptest::prop_assert_eq!(&m.properties, &msg.properties);
            proptest::prop_assert_eq!((m.born_timestamp, m.born_host, m.store_timestamp, m.store_host), (born_timestamp, born_host, store_timestamp, store_host));
            proptest::prop_assert_eq!((m.queue_offset, m.physical_offset, m.reconsume_times, m.prepared_transaction_offset), (queue_offset, physical_offset, reconsume_times, prepared_transaction_offset));
            proptest::prop_assert_eq!(m.sys_flag & 0x0F, sys_flag);
            proptest::prop_assert_eq!(m.sys_flag & sys_flag::BORNHOST_V6 != 0, born_host.is_ipv6());
            proptest::prop_assert_eq!(m.sys_flag & sys_flag::STOREHOST_V6 != 0, store_host.is_ipv6());
            proptest::prop_assert_eq!(m.body_crc, body_crc(&msg.body));
        }

        #[test]
        fn parse_record_never_panics_on_garbage(buf in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400), remaining in 0usize..1000) {
            let remaining = remaining.max(buf.len());
            let _ = parse_record(&buf, remaining, Some(0), ALL);
            let _ = decode(&Bytes::from(buf), None, true);
        }
    }

    #[test]
    fn msg_id_is_store_host_port_and_offset_in_upper_hex() {
        assert_eq!(
            offset_msg_id("127.0.0.1:10911".parse().unwrap(), 0x81),
            "7F00000100002A9F0000000000000081"
        );
    }

    const ALL: Checks = Checks { crc: true, zero_suffix: true };

    #[test]
    fn parse_record_rejects_each_kind_of_damage() {
        let fields = StoreFields {
            queue_offset: 0,
            physical_offset: 100,
            store_timestamp: 0,
            store_host: "1.2.3.4:5".parse().unwrap(),
        };
        let good = encode(&Message::new("T", 0, &b"abc"[..]), &fields).unwrap();
        let n = good.len();
        assert!(matches!(parse_record(&good, 1000, Some(100), ALL), Record::Message(_)));
        assert!(matches!(parse_record(&good[..n - 1], 1000, Some(100), ALL), Record::Incomplete));
        let err = |buf: &[u8]| match parse_record(buf, 1000, Some(100), ALL) {
            Record::Invalid { error } => error,
            other => panic!("expected invalid, got {other:?}"),
        };
        assert_eq!(err(&[0; 200]), RecordError::Empty);
        let mut bad = good.clone();
        bad[5] ^= 1;
        assert!(matches!(err(&bad), RecordError::BadMagic { .. }));
        let mut bad = good.clone();
        bad[n - 6] ^= 1; // body byte ("abc", then topic length, topic, properties length)
        assert!(matches!(err(&bad), RecordError::BodyCrcMismatch { .. }));
        let mut bad = good.clone();
        bad[35] ^= 1; // physical offset
        assert!(matches!(err(&bad), RecordError::PhysicalOffsetMismatch { .. }));
        let mut bad = good.clone();
        bad[3] = bad[3].wrapping_sub(1); // total size one short: the topic no longer fits
        assert!(matches!(err(&bad), RecordError::BadField { field: "topicLength", .. }));
        let mut bad = good.clone();
        bad[n - 1] = 1; // properties length 1 instead of 0
        assert!(matches!(err(&bad), RecordError::LengthMismatch { .. }));
        // A torn write that zeroed the end of the properties: only the zero-suffix check sees it.
        let tagged = encode(&Message::new("T", 0, &b"abc"[..]).with_tags("x"), &fields).unwrap();
        let mut torn = tagged.clone();
        *torn.last_mut().unwrap() = 0;
        assert!(matches!(
            parse_record(&torn, 1000, Some(100), Checks { crc: true, zero_suffix: false }),
            Record::Message(_)
        ));
        assert_eq!(err(&torn), RecordError::ZeroSuffix);
        assert!(matches!(parse_record(&tagged, 1000, Some(100), ALL), Record::Message(_)));
        assert!(matches!(parse_record(&blank_record(40), 40, None, ALL), Record::Blank { len: 40 }));
        assert!(matches!(err(&blank_record(40)), RecordError::BadBlank { .. }));
    }

    #[test]
    fn prepare_refuses_illegal_messages_with_their_status() {
        let host: SocketAddr = "1.2.3.4:5".parse().unwrap();
        let status = |m: Message, max| PreparedMessage::new(m, host, max).err().map(|e| e.put_status());
        assert_eq!(status(Message::new("", 0, &b""[..]), 1 << 20), Some(PutStatus::MessageIllegal));
        assert_eq!(status(Message::new("../etc", 0, &b""[..]), 1 << 20), Some(PutStatus::MessageIllegal));
        assert_eq!(
            status(Message::new("T".repeat(128), 0, &b""[..]), 1 << 20),
            Some(PutStatus::MessageIllegal)
        );
        assert_eq!(status(Message::new("T", -1, &b""[..]), 1 << 20), Some(PutStatus::MessageIllegal));
        assert_eq!(status(Message::new("T", 0, vec![0; 200]), 200), Some(PutStatus::MessageIllegal));
        let big = Message::new("T", 0, &b""[..]).with_property("p", "v".repeat(40_000));
        assert_eq!(status(big, 1 << 20), Some(PutStatus::PropertiesSizeExceeded));
        assert!(status(Message::new("T", 0, vec![0; 100]), 200).is_none());
    }
}
