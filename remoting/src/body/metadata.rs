//! The broker metadata a slave copies from its master (Java's `SlaveSynchronize`): consumer
//! offsets and subscription groups. The same JSON is the broker's `config/consumerOffset.json`
//! and `config/subscriptionGroup.json`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{DataVersion, Extra, JsonBody, lenient};

/// `ConsumerOffsetSerializeWrapper`: the answer to `GET_ALL_CONSUMER_OFFSET`, every committed
/// consumer offset.
///
/// fastjson writes the inner maps with bare integer keys (`{"TopicA@CG":{0:10,1:20}}`),
/// which [`decode`](JsonBody::decode) reads.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerOffsetSerializeWrapper {
    /// `dataVersion` (5.x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_version: Option<DataVersion>,
    /// `offsetTable`: by `topic@group`, the offset of each queue id.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub offset_table: BTreeMap<String, BTreeMap<i32, i64>>,
    /// Fields not modelled here, as they came.
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

/// `SubscriptionGroupWrapper`: the answer to `GET_ALL_SUBSCRIPTIONGROUP_CONFIG`, every
/// subscription group config. 5.x adds a `forbiddenTable`, kept in [`extra`](Self::extra).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupWrapper {
    /// `dataVersion`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub data_version: DataVersion,
    /// `subscriptionGroupTable`: by group name.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub subscription_group_table: BTreeMap<String, SubscriptionGroupConfig>,
    /// Fields not modelled here, as they came.
    #[serde(flatten)]
    pub extra: Extra,
}

impl JsonBody for SubscriptionGroupWrapper {
    const JAVA_CLASS: &'static str = "SubscriptionGroupWrapper";
}

/// `SubscriptionGroupConfig`: one consumer group's settings, with Java's defaults for what is
/// missing. The many fields 5.x adds (`consumeMessageOrderly`, `groupRetryPolicy`,
/// `attributes`, `consumeTimeoutMinute`, ...) are kept in [`extra`](Self::extra).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionGroupConfig {
    /// `brokerId`: the broker the group consumes from (0 the master).
    #[serde(default, deserialize_with = "lenient::number")]
    pub broker_id: i64,
    /// `consumeBroadcastEnable`.
    #[serde(default = "yes")]
    pub consume_broadcast_enable: bool,
    /// `consumeEnable`.
    #[serde(default = "yes")]
    pub consume_enable: bool,
    /// `consumeFromMinEnable`.
    #[serde(default = "yes")]
    pub consume_from_min_enable: bool,
    /// `groupName`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub group_name: String,
    /// `notifyConsumerIdsChangedEnable`.
    #[serde(default = "yes")]
    pub notify_consumer_ids_changed_enable: bool,
    /// `retryMaxTimes`: reconsumes before the DLQ; Java's default 16.
    #[serde(default = "default_retry_max_times", deserialize_with = "lenient::number")]
    pub retry_max_times: i32,
    /// `retryQueueNums`: queues of the group's retry topic; Java's default 1.
    #[serde(default = "default_retry_queue_nums", deserialize_with = "lenient::number")]
    pub retry_queue_nums: i32,
    /// `whichBrokerWhenConsumeSlowly`: the broker id to suggest to a slow consumer; Java's
    /// default 1.
    #[serde(default = "default_slow_broker", deserialize_with = "lenient::number")]
    pub which_broker_when_consume_slowly: i64,
    /// Fields not modelled here, as they came.
    #[serde(flatten)]
    pub extra: Extra,
}

fn yes() -> bool {
    true
}

fn default_retry_max_times() -> i32 {
    16
}

fn default_retry_queue_nums() -> i32 {
    1
}

fn default_slow_broker() -> i64 {
    1
}

impl Default for SubscriptionGroupConfig {
    /// Java's `new SubscriptionGroupConfig()`.
    fn default() -> Self {
        Self {
            broker_id: 0,
            consume_broadcast_enable: true,
            consume_enable: true,
            consume_from_min_enable: true,
            group_name: String::new(),
            notify_consumer_ids_changed_enable: true,
            retry_max_times: default_retry_max_times(),
            retry_queue_nums: default_retry_queue_nums(),
            which_broker_when_consume_slowly: default_slow_broker(),
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
    }
}
