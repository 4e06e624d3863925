//! The group record and a member's published state, and their stored encoding.
//!
//! Both are small versioned text documents, one `key=value` line per field in a fixed order,
//! so that an operator can read them with `etcdctl get`:
//!
//! ```text
//! logship-group-record 1
//! masterEpoch=3
//! masterId=1
//! masterHaAddress=127.0.0.1:10912
//! masterHttpAddress=127.0.0.1:8080
//! syncStateSet=1,2
//! syncStateSetEpoch=4
//! ```
//!
//! The decoders are strict: a missing, extra, reordered or repeated field, a value out of
//! range, a set that is not strictly ascending, a master outside its own set, an unknown
//! version or trailing bytes is refused with a [`RecordError`] naming what was wrong. A
//! coordinator never acts on a record it cannot read.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::SocketAddr;

use crate::autoswitch::BrokerId;
use crate::log::Offset;

/// The largest encoded record or member state a decoder accepts.
pub const MAX_RECORD_LEN: usize = 16 * 1024;
/// The most members a sync-state-set may hold.
pub const MAX_SET_MEMBERS: usize = 256;
/// The encoding version this build writes and reads.
pub const RECORD_VERSION: u32 = 1;

const GROUP_HEADER: &str = "logship-group-record";
const MEMBER_HEADER: &str = "logship-group-member";
/// How much of an offending value an error quotes.
const QUOTE_MAX: usize = 64;

/// A stored record or member state could not be decoded.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RecordError {
    /// The value is longer than [`MAX_RECORD_LEN`].
    #[error("stored value is {len} bytes, over the limit of {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The value is not UTF-8.
    #[error("stored value is not UTF-8")]
    NotUtf8,
    /// The first line is not the expected header.
    #[error("stored value does not start with the `{expected} <version>` header")]
    BadHeader {
        /// The header expected.
        expected: &'static str,
    },
    /// The header names a version this build does not read.
    #[error("stored value has format version {found}; this build reads version {RECORD_VERSION}")]
    UnsupportedVersion {
        /// The version found.
        found: u32,
    },
    /// A line is not the field expected there.
    #[error("line {line}: expected field `{expected}`")]
    MissingField {
        /// The 1-based line number.
        line: usize,
        /// The field expected on it.
        expected: &'static str,
    },
    /// A field's value is malformed or out of range.
    #[error("field `{field}`: {reason} (value `{value}`)")]
    BadValue {
        /// The field.
        field: &'static str,
        /// The value, cut to 64 characters.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// Something follows the last field.
    #[error("stored value has content after its last field")]
    TrailingContent,
    /// The last line has no newline: the value was cut short.
    #[error("stored value does not end with a newline (cut short?)")]
    Unterminated,
    /// The master is not a member of its own sync-state-set.
    #[error("master {master} is not a member of its sync-state-set")]
    MasterNotInSet {
        /// The master's id.
        master: BrokerId,
    },
}

/// One broker group's coordination record: who is master in which epoch, and the
/// sync-state-set. It changes only by compare-and-swap on its revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupRecord {
    /// The master epoch (RocketMQ `masterEpoch`), at least 1; every election adds one.
    pub master_epoch: i32,
    /// The master's broker id.
    pub master_id: BrokerId,
    /// Where slaves reach the master's HA port.
    pub master_ha_addr: SocketAddr,
    /// Where clients reach the master's HTTP API.
    pub master_http_addr: SocketAddr,
    /// The sync-state-set; always holds the master.
    pub sync_state_set: BTreeSet<BrokerId>,
    /// The set's epoch (RocketMQ `syncStateSetEpoch`), at least 1; every change adds one.
    pub sync_state_set_epoch: i32,
}

/// What a live broker publishes about itself (under its lease), for elections and routing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberState {
    /// The broker's id.
    pub broker_id: BrokerId,
    /// The last epoch in its log (0 for a log without one).
    pub epoch: i32,
    /// Its log's end offset.
    pub max_offset: Offset,
    /// Its HA address.
    pub ha_addr: SocketAddr,
    /// Its HTTP address.
    pub http_addr: SocketAddr,
}

impl GroupRecord {
    /// The stored form: the header `logship-group-record 1`, then one `key=value` line per
    /// field (`masterEpoch`, `masterId`, `masterHaAddress`, `masterHttpAddress`,
    /// `syncStateSet` as ascending comma-separated ids, `syncStateSetEpoch`), each ending in `\n`.
    pub fn encode(&self) -> Vec<u8> {
        let mut s = format!("{GROUP_HEADER} {RECORD_VERSION}\n");
        let set = self.sync_state_set.iter().map(i64::to_string).collect::<Vec<_>>().join(",");
        let _ = write!(
            s,
            "masterEpoch={}\nmasterId={}\nmasterHaAddress={}\nmasterHttpAddress={}\nsyncStateSet={}\nsyncStateSetEpoch={}\n",
            self.master_epoch,
            self.master_id,
            self.master_ha_addr,
            self.master_http_addr,
            set,
            self.sync_state_set_epoch
        );
        s.into_bytes()
    }

    /// Reads a stored record, refusing anything [`encode`](Self::encode) would not write.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordError> {
        let mut lines = Lines::new(bytes, GROUP_HEADER)?;
        let master_epoch = positive_epoch("masterEpoch", lines.field("masterEpoch")?)?;
        let master_id = broker_id("masterId", lines.field("masterId")?)?;
        let master_ha_addr = addr("masterHaAddress", lines.field("masterHaAddress")?)?;
        let master_http_addr = addr("masterHttpAddress", lines.field("masterHttpAddress")?)?;
        let sync_state_set = set("syncStateSet", lines.field("syncStateSet")?)?;
        let sync_state_set_epoch = positive_epoch("syncStateSetEpoch", lines.field("syncStateSetEpoch")?)?;
        lines.end()?;
        if !sync_state_set.contains(&master_id) {
            return Err(RecordError::MasterNotInSet { master: master_id });
        }
        Ok(Self {
            master_epoch,
            master_id,
            master_ha_addr,
            master_http_addr,
            sync_state_set,
            sync_state_set_epoch,
        })
    }
}

impl MemberState {
    /// The stored form: like the group record's, with header `logship-group-member 1` and
    /// fields `brokerId`, `epoch`, `maxOffset`, `haAddress`, `httpAddress`.
    pub fn encode(&self) -> Vec<u8> {
        format!(
            "{MEMBER_HEADER} {RECORD_VERSION}\nbrokerId={}\nepoch={}\nmaxOffset={}\nhaAddress={}\nhttpAddress={}\n",
            self.broker_id, self.epoch, self.max_offset, self.ha_addr, self.http_addr
        )
        .into_bytes()
    }

    /// Reads a stored member state, refusing anything [`encode`](Self::encode) would not write.
    pub fn decode(bytes: &[u8]) -> Result<Self, RecordError> {
        let mut lines = Lines::new(bytes, MEMBER_HEADER)?;
        let broker_id = broker_id("brokerId", lines.field("brokerId")?)?;
        let epoch = number::<i32>("epoch", lines.field("epoch")?)?;
        if epoch < 0 {
            return Err(bad("epoch", &epoch.to_string(), "must not be negative"));
        }
        let max_offset = number::<u64>("maxOffset", lines.field("maxOffset")?)?;
        if i64::try_from(max_offset).is_err() {
            return Err(bad("maxOffset", &max_offset.to_string(), "exceeds RocketMQ's 63-bit offsets"));
        }
        let ha_addr = addr("haAddress", lines.field("haAddress")?)?;
        let http_addr = addr("httpAddress", lines.field("httpAddress")?)?;
        lines.end()?;
        Ok(Self { broker_id, epoch, max_offset, ha_addr, http_addr })
    }
}

/// The lines of a stored value after its header.
struct Lines<'a> {
    rest: &'a str,
    line: usize,
}

impl<'a> Lines<'a> {
    fn new(bytes: &'a [u8], header: &'static str) -> Result<Self, RecordError> {
        if bytes.len() > MAX_RECORD_LEN {
            return Err(RecordError::TooLong { len: bytes.len(), max: MAX_RECORD_LEN });
        }
        let text = std::str::from_utf8(bytes).map_err(|_| RecordError::NotUtf8)?;
        let mut lines = Self { rest: text, line: 0 };
        let first = lines.next_line().ok_or(RecordError::BadHeader { expected: header })??;
        let version = first
            .strip_prefix(header)
            .and_then(|v| v.strip_prefix(' '))
            .ok_or(RecordError::BadHeader { expected: header })?;
        if version.is_empty() || !version.bytes().all(|b| b.is_ascii_digit()) {
            return Err(RecordError::BadHeader { expected: header });
        }
        let found = version.parse::<u32>().map_err(|_| RecordError::BadHeader { expected: header })?;
        if found != RECORD_VERSION {
            return Err(RecordError::UnsupportedVersion { found });
        }
        Ok(lines)
    }

    /// The next line without its newline; `Err` when the text ends without one.
    fn next_line(&mut self) -> Option<Result<&'a str, RecordError>> {
        if self.rest.is_empty() {
            return None;
        }
        self.line += 1;
        Some(match self.rest.split_once('\n') {
            Some((line, rest)) => {
                self.rest = rest;
                Ok(line)
            }
            None => Err(RecordError::Unterminated),
        })
    }

    /// The value of the next line, which must be `name=value`.
    fn field(&mut self, name: &'static str) -> Result<&'a str, RecordError> {
        let missing = |line| RecordError::MissingField { line, expected: name };
        let line = self.next_line().ok_or(missing(self.line + 1))??;
        line.strip_prefix(name).and_then(|v| v.strip_prefix('=')).ok_or(missing(self.line))
    }

    fn end(&self) -> Result<(), RecordError> {
        if self.rest.is_empty() { Ok(()) } else { Err(RecordError::TrailingContent) }
    }
}

fn bad(field: &'static str, value: &str, reason: &'static str) -> RecordError {
    RecordError::BadValue { field, value: value.chars().take(QUOTE_MAX).collect(), reason }
}

/// A decimal number as `encode` writes it: optional `-`, digits, no leading zeros, no `+`.
fn number<T: std::str::FromStr>(field: &'static str, value: &str) -> Result<T, RecordError> {
    let digits = value.strip_prefix('-').unwrap_or(value);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad(field, value, "not a decimal integer"));
    }
    if digits.len() > 1 && digits.starts_with('0') || value == "-0" {
        return Err(bad(field, value, "not in canonical form"));
    }
    value.parse::<T>().map_err(|_| bad(field, value, "out of range"))
}

fn positive_epoch(field: &'static str, value: &str) -> Result<i32, RecordError> {
    let epoch = number::<i32>(field, value)?;
    if epoch < 1 {
        return Err(bad(field, value, "must be at least 1"));
    }
    Ok(epoch)
}

fn broker_id(field: &'static str, value: &str) -> Result<BrokerId, RecordError> {
    let id = number::<BrokerId>(field, value)?;
    if id < 0 {
        return Err(bad(field, value, "must not be negative"));
    }
    Ok(id)
}

fn addr(field: &'static str, value: &str) -> Result<SocketAddr, RecordError> {
    let parsed =
        value.parse::<SocketAddr>().map_err(|_| bad(field, value, "not an IP:port socket address"))?;
    if parsed.to_string() != value {
        return Err(bad(field, value, "not in canonical form"));
    }
    if parsed.port() == 0 || parsed.ip().is_unspecified() {
        return Err(bad(field, value, "not a reachable address (port 0 or unspecified IP)"));
    }
    Ok(parsed)
}

fn set(field: &'static str, value: &str) -> Result<BTreeSet<BrokerId>, RecordError> {
    if value.is_empty() {
        return Err(bad(field, value, "must hold at least the master"));
    }
    let mut members = BTreeSet::new();
    let mut last = None;
    for (i, item) in value.split(',').enumerate() {
        if i >= MAX_SET_MEMBERS {
            return Err(bad(field, value, "has more than 256 members"));
        }
        let id = broker_id(field, item)?;
        if last.is_some_and(|last| id <= last) {
            return Err(bad(field, value, "members are not strictly ascending"));
        }
        last = Some(id);
        members.insert(id);
    }
    Ok(members)
}
