//! A broker's metadata tables as Java writes them: topic configs (`topics.json`,
//! `GET_ALL_TOPIC_CONFIG`, the heart of a registration), consumer offsets
//! (`consumerOffset.json`, `GET_ALL_CONSUMER_OFFSET`) and subscription groups
//! (`subscriptionGroup.json`, `GET_ALL_SUBSCRIPTIONGROUP_CONFIG`), each with its
//! [`DataVersion`]. The same JSON is a config file and a reply body, so one type serves both:
//! `logship-broker` keeps the files, slaves copy the replies.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Extra, JsonBody, lenient};
use crate::error::BodyError;

/// `DataVersion`: a metadata table's version: `{timestamp, counter}` in 4.9, plus
/// `stateVersion` in 5.x. Equality compares all three, as 5.x's `equals` does (a 4.9 version
/// reads with `stateVersion` 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataVersion {
    /// `counter`: changes so far.
    #[serde(default, deserialize_with = "lenient::number")]
    pub counter: i64,
    /// `stateVersion`: the state machine version (5.x; 0 for a classic broker).
    #[serde(default, deserialize_with = "lenient::number")]
    pub state_version: i64,
    /// `timestamp`: milliseconds since the epoch of the last change.
    #[serde(default, deserialize_with = "lenient::number")]
    pub timestamp: i64,
}

impl DataVersion {
    /// A new version at `now_ms`, counter 0 (Java's `new DataVersion()`).
    pub fn new(now_ms: i64) -> Self {
        Self { timestamp: now_ms, counter: 0, state_version: 0 }
    }

    /// The next version (Java's `nextVersion(stateVersion)`): `timestamp = now_ms`, the counter
    /// incremented.
    pub fn next_version(&mut self, now_ms: i64, state_version: i64) {
        self.timestamp = now_ms;
        self.state_version = state_version;
        self.counter = self.counter.wrapping_add(1);
    }

    /// Orders versions as 5.x's `DataVersion.compare`: state version, then counter, then
    /// timestamp.
    pub fn compare(&self, other: &Self) -> std::cmp::Ordering {
        (self.state_version, self.counter, self.timestamp).cmp(&(
            other.state_version,
            other.counter,
            other.timestamp,
        ))
    }
}

impl JsonBody for DataVersion {
    const JAVA_CLASS: &'static str = "DataVersion";
}

/// Permission bits of a topic or a broker (`PermName`).
pub mod perm {
    /// The broker's topic is in the route only for lookups of this broker (`PERM_PRIORITY`).
    pub const PRIORITY: i32 = 0x1 << 3;
    /// Consumers may read.
    pub const READ: i32 = 0x1 << 2;
    /// Producers may write.
    pub const WRITE: i32 = 0x1 << 1;
    /// New topics inherit this topic's config (only `TBW102` and the cluster/broker topics).
    pub const INHERIT: i32 = 0x1;

    /// Whether `perm` allows reading.
    pub fn is_readable(perm: i32) -> bool {
        perm & READ == READ
    }

    /// Whether `perm` allows writing.
    pub fn is_writeable(perm: i32) -> bool {
        perm & WRITE == WRITE
    }

    /// Whether `perm` lets new topics inherit.
    pub fn is_inherited(perm: i32) -> bool {
        perm & INHERIT == INHERIT
    }

    /// `perm` as `PermName.perm2String` shows it: `RWX` with `-` for each missing bit.
    pub fn to_string(perm: i32) -> String {
        let mut s = String::with_capacity(3);
        s.push(if is_readable(perm) { 'R' } else { '-' });
        s.push(if is_writeable(perm) { 'W' } else { '-' });
        s.push(if is_inherited(perm) { 'X' } else { '-' });
        s
    }
}

/// How a topic's messages are filtered (`TopicFilterType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum TopicFilterType {
    /// One tag per message (the default).
    #[default]
    #[serde(rename = "SINGLE_TAG")]
    SingleTag,
    /// Several tags per message.
    #[serde(rename = "MULTI_TAG")]
    MultiTag,
}

impl TopicFilterType {
    /// The name Java gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::SingleTag => "SINGLE_TAG",
            Self::MultiTag => "MULTI_TAG",
        }
    }

    /// The type Java names `name`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "SINGLE_TAG" => Some(Self::SingleTag),
            "MULTI_TAG" => Some(Self::MultiTag),
            _ => None,
        }
    }
}

/// Queues of a topic whose config does not say (`TopicConfig.defaultReadQueueNums`).
pub const DEFAULT_QUEUE_NUMS: i32 = 16;

fn default_perm() -> i32 {
    perm::READ | perm::WRITE
}

fn default_queue_nums() -> i32 {
    DEFAULT_QUEUE_NUMS
}

/// `TopicConfig`: one topic's queues and permissions, as `topics.json`, `GET_ALL_TOPIC_CONFIG`
/// and registration carry it, with Java's defaults for what is missing.
///
/// Fields this crate does not model (5.x's derived `topicMessageType`, 5.5's
/// `liteTopicExpiration`, ...) are kept in [`extra`](Self::extra) and written back.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfig {
    /// `attributes` (5.x: `message.type`, `queue.type`, `cleanup.policy`, without the `+`);
    /// empty when there are none. Written as `{}` then, as 5.x writes it (4.9 ignores it).
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub attributes: BTreeMap<String, String>,
    /// `order`: an ordered topic.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub order: bool,
    /// `perm`: [`perm`] bits; Java's default 6 (read and write).
    #[serde(default = "default_perm", deserialize_with = "lenient::number")]
    pub perm: i32,
    /// `readQueueNums`: queues consumers read; Java's default 16.
    #[serde(default = "default_queue_nums", deserialize_with = "lenient::number")]
    pub read_queue_nums: i32,
    /// `topicFilterType`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub topic_filter_type: TopicFilterType,
    /// `topicName`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub topic_name: String,
    /// `topicSysFlag`: `TopicSysFlag` bits (unit flags).
    #[serde(default, deserialize_with = "lenient::number")]
    pub topic_sys_flag: i32,
    /// `writeQueueNums`: queues producers write; Java's default 16.
    #[serde(default = "default_queue_nums", deserialize_with = "lenient::number")]
    pub write_queue_nums: i32,
    /// Fields not modelled here, as they came.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Default for TopicConfig {
    /// Java's `new TopicConfig()`: 16 read and write queues, read and write permission.
    fn default() -> Self {
        Self {
            attributes: BTreeMap::new(),
            order: false,
            perm: default_perm(),
            read_queue_nums: DEFAULT_QUEUE_NUMS,
            topic_filter_type: TopicFilterType::SingleTag,
            topic_name: String::new(),
            topic_sys_flag: 0,
            write_queue_nums: DEFAULT_QUEUE_NUMS,
            extra: Extra::new(),
        }
    }
}

impl TopicConfig {
    /// Java's `new TopicConfig(name)`: 16 read and write queues, read and write permission.
    pub fn new(topic_name: impl Into<String>) -> Self {
        Self { topic_name: topic_name.into(), ..Self::default() }
    }

    /// [`new`](Self::new) with these queue counts and permission bits (Java's
    /// `new TopicConfig(name, read, write, perm)`).
    pub fn with_queues(topic_name: impl Into<String>, read: i32, write: i32, perm: i32) -> Self {
        Self { read_queue_nums: read, write_queue_nums: write, perm, ..Self::new(topic_name) }
    }

    /// Java's `TopicConfig.encode()`: the space-separated text of the compressed registration,
    /// `name read write perm filterType`, then the attributes' JSON when there are any. The text
    /// cannot carry `order` or `topicSysFlag` (neither can Java's). A 4.9.x NameServer reads
    /// exactly five words and fails the whole registration on a sixth, so a topic with
    /// attributes needs a 5.x NameServer or the uncompressed body.
    pub fn encode_text(&self) -> Result<String, BodyError> {
        if self.topic_name.is_empty() || self.topic_name.contains(' ') {
            return Err(BodyError::Unencodable {
                body: "TopicConfig",
                reason: format!(
                    "topic name {:?} is empty or has a space, which the compressed text cannot carry",
                    self.topic_name
                ),
            });
        }
        let mut out = format!(
            "{} {} {} {} {}",
            self.topic_name,
            self.read_queue_nums,
            self.write_queue_nums,
            self.perm,
            self.topic_filter_type.as_str()
        );
        if !self.attributes.is_empty() {
            out.push(' ');
            out.push_str(&serde_json::to_string(&self.attributes).expect("a string map serializes"));
        }
        Ok(out)
    }

    /// Java 5.x's `TopicConfig.decode(String)`: at least five space-separated words; the rest
    /// after the fifth space is the attributes' JSON, ignored when it does not parse (as Java
    /// ignores it). Empty attributes (`{}`, what 5.x writes for none) read as none.
    pub fn decode_text(text: &str) -> Result<Self, BodyError> {
        let bad = |reason: String| BodyError::Compressed { body: "TopicConfig", reason };
        // Java's split(" ") drops trailing empty words.
        let trimmed = text.trim_end_matches(' ');
        let mut words = trimmed.splitn(6, ' ');
        let mut next = |what: &str| {
            words.next().filter(|w| !w.is_empty()).ok_or_else(|| bad(format!("{text:?} has no {what}")))
        };
        let topic_name = next("topic name")?.to_owned();
        let mut int = |what: &str| -> Result<i32, BodyError> {
            let w = next(what)?;
            w.parse().map_err(|_| bad(format!("{what} {w:?} of {topic_name:?} is not an int")))
        };
        let read_queue_nums = int("readQueueNums")?;
        let write_queue_nums = int("writeQueueNums")?;
        let perm = int("perm")?;
        let filter = next("topicFilterType")?;
        let topic_filter_type = TopicFilterType::from_name(filter)
            .ok_or_else(|| bad(format!("topicFilterType {filter:?} is neither SINGLE_TAG nor MULTI_TAG")))?;
        let attributes = words
            .next()
            .and_then(|json| serde_json::from_str::<BTreeMap<String, String>>(json).ok())
            .unwrap_or_default();
        Ok(Self {
            attributes,
            perm,
            read_queue_nums,
            topic_filter_type,
            topic_name,
            write_queue_nums,
            ..Self::default()
        })
    }
}

/// `TopicConfigSerializeWrapper`: every topic config of a broker with their version; the
/// content of `topics.json`, the answer to `GET_ALL_TOPIC_CONFIG` and the heart of a
/// registration. A config without a `topicName` takes its key's.
///
/// 5.x's `TopicConfigAndMappingSerializeWrapper` adds `mappingDataVersion`,
/// `topicQueueMappingInfoMap` and `topicQueueMappingDetailMap` (static topics), which are kept
/// in [`extra`](Self::extra).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TopicConfigSerializeWrapper {
    /// `dataVersion`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub data_version: DataVersion,
    /// `topicConfigTable`: by topic name.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub topic_config_table: BTreeMap<String, TopicConfig>,
    /// Fields not modelled here, as they came.
    #[serde(flatten)]
    pub extra: Extra,
}

impl TopicConfigSerializeWrapper {
    /// A wrapper of `table` at `data_version`.
    pub fn new(topic_config_table: BTreeMap<String, TopicConfig>, data_version: DataVersion) -> Self {
        Self { data_version, topic_config_table, extra: Extra::new() }
    }
}

impl JsonBody for TopicConfigSerializeWrapper {
    const JAVA_CLASS: &'static str = "TopicConfigSerializeWrapper";

    fn decode_value(v: Value) -> Result<Self, BodyError> {
        let mut w: Self = super::from_value(Self::JAVA_CLASS, v)?;
        for (name, c) in &mut w.topic_config_table {
            if c.topic_name.is_empty() {
                c.topic_name.clone_from(name);
            }
        }
        Ok(w)
    }
}

/// Offsets by `topic@group`, then by queue id.
pub type OffsetTable = BTreeMap<String, BTreeMap<i32, i64>>;

/// `ConsumerOffsetSerializeWrapper`: every committed consumer offset; the answer to
/// `GET_ALL_CONSUMER_OFFSET` and (with 5.x's extras) the content of `consumerOffset.json`.
///
/// fastjson writes the inner maps with bare integer keys (`{"TopicA@CG":{0:10,1:20}}`),
/// which [`decode`](JsonBody::decode) reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerOffsetSerializeWrapper {
    /// `dataVersion` (5.x; absent in 4.9, which never versions it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_version: Option<DataVersion>,
    /// `offsetTable`: by `topic@group`, the offset of each queue id.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub offset_table: OffsetTable,
    /// Fields not modelled here (5.x's `groupTopicMap`, `pullOffsetTable`), as they came.
    #[serde(flatten)]
    pub extra: Extra,
}

impl ConsumerOffsetSerializeWrapper {
    /// The key of `group`'s offsets of `topic`: Java's `topic@group`.
    pub fn key(topic: &str, group: &str) -> String {
        format!("{topic}@{group}")
    }
}

impl JsonBody for ConsumerOffsetSerializeWrapper {
    const JAVA_CLASS: &'static str = "ConsumerOffsetSerializeWrapper";
}

/// `SubscriptionGroupWrapper`: every subscription group config with the table's version; the
/// content of `subscriptionGroup.json` and the answer to `GET_ALL_SUBSCRIPTIONGROUP_CONFIG`. A
/// group without a `groupName` takes its key's.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupWrapper {
    /// `dataVersion`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub data_version: DataVersion,
    /// `forbiddenTable` (5.x): forbidden bits by group, then topic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forbidden_table: Option<BTreeMap<String, BTreeMap<String, i32>>>,
    /// `subscriptionGroupTable`: by group name.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
    /// Fields not modelled here, as they came.
    #[serde(flatten)]
    pub extra: Extra,
}

impl JsonBody for SubscriptionGroupWrapper {
    const JAVA_CLASS: &'static str = "SubscriptionGroupWrapper";

    fn decode_value(v: Value) -> Result<Self, BodyError> {
        let mut w: Self = super::from_value(Self::JAVA_CLASS, v)?;
        for (name, g) in &mut w.subscription_group_table {
            if g.group_name.is_empty() {
                g.group_name.clone_from(name);
            }
        }
        Ok(w)
    }
}

fn yes() -> bool {
    true
}
fn one_i32() -> i32 {
    1
}
fn one_i64() -> i64 {
    1
}
fn sixteen() -> i32 {
    16
}
fn fifteen() -> i32 {
    15
}
fn customized() -> Value {
    json!({"type": "CUSTOMIZED"})
}

/// `SubscriptionGroupConfig`: one consumer group's settings, with Java's defaults for what is
/// missing. Fields RocketMQ adds later are kept as read ([`extra`](Self::extra)).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupConfig {
    /// `attributes` (5.x).
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub attributes: BTreeMap<String, String>,
    /// `brokerId`: the broker the group consumes from (0, the master).
    #[serde(default, deserialize_with = "lenient::number")]
    pub broker_id: i64,
    /// `consumeBroadcastEnable` (default true).
    #[serde(default = "yes")]
    pub consume_broadcast_enable: bool,
    /// `consumeEnable`: whether the group may consume (default true).
    #[serde(default = "yes")]
    pub consume_enable: bool,
    /// `consumeFromMinEnable`: whether a new group starts from the queue's minimum (default
    /// true).
    #[serde(default = "yes")]
    pub consume_from_min_enable: bool,
    /// `consumeMessageOrderly` (5.x, default false).
    #[serde(default)]
    pub consume_message_orderly: bool,
    /// `consumeTimeoutMinute`: push consumers' consume timeout (5.x, default 15).
    #[serde(default = "fifteen", deserialize_with = "lenient::number")]
    pub consume_timeout_minute: i32,
    /// `groupName`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub group_name: String,
    /// `groupRetryPolicy` (5.x `GroupRetryPolicy`, kept as JSON; default
    /// `{"type":"CUSTOMIZED"}`).
    #[serde(default = "customized")]
    pub group_retry_policy: Value,
    /// `groupSysFlag` (5.x).
    #[serde(default, deserialize_with = "lenient::number")]
    pub group_sys_flag: i32,
    /// `notifyConsumerIdsChangedEnable` (default true).
    #[serde(default = "yes")]
    pub notify_consumer_ids_changed_enable: bool,
    /// `retryMaxTimes`: reconsumes before the dead-letter topic (default 16).
    #[serde(default = "sixteen", deserialize_with = "lenient::number")]
    pub retry_max_times: i32,
    /// `retryQueueNums`: queues of the group's retry topic (default 1).
    #[serde(default = "one_i32", deserialize_with = "lenient::number")]
    pub retry_queue_nums: i32,
    /// `subscriptionDataSet` (5.x), kept as JSON when present.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscription_data_set: Option<Value>,
    /// `whichBrokerWhenConsumeSlowly`: the broker id to suggest to a slow consumer (default 1).
    #[serde(default = "one_i64", deserialize_with = "lenient::number")]
    pub which_broker_when_consume_slowly: i64,
    /// Fields not modelled here, as they came.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Default for SubscriptionGroupConfig {
    /// Java's `new SubscriptionGroupConfig()`.
    fn default() -> Self {
        Self {
            attributes: BTreeMap::new(),
            broker_id: 0,
            consume_broadcast_enable: true,
            consume_enable: true,
            consume_from_min_enable: true,
            consume_message_orderly: false,
            consume_timeout_minute: fifteen(),
            group_name: String::new(),
            group_retry_policy: customized(),
            group_sys_flag: 0,
            notify_consumer_ids_changed_enable: true,
            retry_max_times: sixteen(),
            retry_queue_nums: one_i32(),
            subscription_data_set: None,
            which_broker_when_consume_slowly: one_i64(),
            extra: Extra::new(),
        }
    }
}

impl SubscriptionGroupConfig {
    /// Java's defaults for `group_name`.
    pub fn new(group_name: impl Into<String>) -> Self {
        Self { group_name: group_name.into(), ..Self::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_offsets_with_bare_queue_ids() {
        let w = ConsumerOffsetSerializeWrapper::decode(
            br#"{"offsetTable":{"%RETRY%CG@CG":{0:0},"TopicA@CG":{0:10,1:20}}}"#,
        )
        .unwrap();
        assert_eq!(w.offset_table[&ConsumerOffsetSerializeWrapper::key("TopicA", "CG")][&1], 20);
        assert_eq!(w.data_version, None);
        assert_eq!(
            String::from_utf8(w.encode()).unwrap(),
            r#"{"offsetTable":{"%RETRY%CG@CG":{"0":0},"TopicA@CG":{"0":10,"1":20}}}"#
        );
    }

    #[test]
    fn a_group_missing_fields_takes_java_s_defaults() {
        let w = SubscriptionGroupWrapper::decode(br#"{"subscriptionGroupTable":{"CG":{"groupName":"CG"}}}"#)
            .unwrap();
        assert_eq!(w.subscription_group_table["CG"], SubscriptionGroupConfig::new("CG"));
        let w =
            SubscriptionGroupWrapper::decode(br#"{"subscriptionGroupTable":{"CG":{"retryMaxTimes":null}}}"#)
                .unwrap();
        assert_eq!(w.subscription_group_table["CG"], SubscriptionGroupConfig::new("CG"), "null is absent");
    }

    #[test]
    fn topic_config_text_is_java_s() {
        let four = |name: &str| TopicConfig::with_queues(name, 4, 4, 6);
        assert_eq!(four("TopicA").encode_text().unwrap(), "TopicA 4 4 6 SINGLE_TAG");
        let t = TopicConfig::decode_text("TopicA 4 4 6 SINGLE_TAG ").unwrap();
        assert_eq!(t, four("TopicA"));
        let t = TopicConfig::decode_text(r#"T 1 2 4 MULTI_TAG {"a":"b c"}"#).unwrap();
        assert_eq!((t.read_queue_nums, t.write_queue_nums, t.perm), (1, 2, 4));
        assert_eq!(t.topic_filter_type, TopicFilterType::MultiTag);
        assert_eq!(t.attributes["a"], "b c");
        let t = TopicConfig::decode_text("TopicA 4 4 6 SINGLE_TAG {}").unwrap();
        assert_eq!(t, four("TopicA"), "Java 5's empty attributes are none");
        let t = TopicConfig::decode_text("T 1 2 4 SINGLE_TAG not-json").unwrap();
        assert!(t.attributes.is_empty(), "Java ignores attributes it cannot parse");
        for bad in ["", "T 1 2 4", "T x 2 4 SINGLE_TAG", "T 1 2 4 OTHER", "T  1 2 4 SINGLE_TAG"] {
            assert!(TopicConfig::decode_text(bad).is_err(), "{bad:?}");
        }
        let mut spaced = TopicConfig::new("a b");
        assert!(spaced.encode_text().is_err());
        spaced.topic_name = String::new();
        assert!(spaced.encode_text().is_err());
    }

    #[test]
    fn unknown_topic_config_fields_survive_a_read_and_a_write() {
        let json = br#"{"attributes":{},"liteTopicExpiration":-1,"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicMessageType":"NORMAL","topicName":"T","topicSysFlag":0,"writeQueueNums":4}"#;
        let t: TopicConfig = serde_json::from_slice(json).unwrap();
        assert_eq!(t.extra["liteTopicExpiration"], -1);
        let back: Value = serde_json::from_slice(&serde_json::to_vec(&t).unwrap()).unwrap();
        assert_eq!(back, serde_json::from_slice::<Value>(json).unwrap());
    }

    #[test]
    fn missing_topic_config_fields_take_java_s_defaults() {
        let t: TopicConfig = serde_json::from_slice(br#"{"topicName":"T"}"#).unwrap();
        assert_eq!(t, TopicConfig::new("T"));
        assert_eq!((t.read_queue_nums, t.perm), (16, 6));
    }

    #[test]
    fn a_topic_without_a_name_takes_its_key_s() {
        let w = TopicConfigSerializeWrapper::decode(
            br#"{"dataVersion":{"counter":2,"timestamp":5},"topicConfigTable":{"T":{"perm":6,"topicFilterType":"MULTI_TAG","future":[1]}},"mappingDataVersion":{"counter":0}}"#,
        )
        .unwrap();
        let t = &w.topic_config_table["T"];
        assert_eq!((t.topic_name.as_str(), t.topic_filter_type), ("T", TopicFilterType::MultiTag));
        assert_eq!(t.extra["future"], json!([1]));
        assert!(w.extra.contains_key("mappingDataVersion"));
        assert_eq!(w.data_version, DataVersion { counter: 2, state_version: 0, timestamp: 5 });
        assert!(TopicConfigSerializeWrapper::decode(br#"{"topicConfigTable":{"T":{"perm":"x"}}}"#).is_err());
    }

    #[test]
    fn data_versions_order_by_state_then_counter_then_time() {
        let mut a = DataVersion::new(10);
        let b = a;
        a.next_version(5, 0);
        assert_eq!((a.counter, a.timestamp), (1, 5));
        assert_eq!(a.compare(&b), std::cmp::Ordering::Greater, "the counter beats the time");
        let numbers_as_text = DataVersion::decode(
            br#"{"counter":"5","timestamp":"1700000000000","stateVersion":"9007199254740993"}"#,
        )
        .unwrap();
        assert_eq!(numbers_as_text.state_version, 9_007_199_254_740_993);
    }
}
