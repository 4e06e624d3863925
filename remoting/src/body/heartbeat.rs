//! Clients' bodies: heartbeats, queue locks, consumer lists.

use serde::{Deserialize, Serialize};

use super::{JsonBody, lenient};

/// `MessageQueue`: one queue of a topic on one broker.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageQueue {
    /// `brokerName`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub broker_name: String,
    /// `queueId`.
    #[serde(deserialize_with = "lenient::number")]
    pub queue_id: i32,
    /// `topic`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub topic: String,
}

impl MessageQueue {
    /// The queue `queue_id` of `topic` on `broker_name`.
    pub fn new(topic: impl Into<String>, broker_name: impl Into<String>, queue_id: i32) -> Self {
        Self { broker_name: broker_name.into(), queue_id, topic: topic.into() }
    }
}

/// `HeartbeatData`: the body of `HEART_BEAT`, a client's producer and consumer groups.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HeartbeatData {
    /// `clientID`.
    #[serde(rename = "clientID", default, deserialize_with = "lenient::null_default")]
    pub client_id: String,
    /// `consumerDataSet`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub consumer_data_set: Vec<ConsumerData>,
    /// `heartbeatFingerprint` (5.x): a hash of the subscriptions, for heartbeats without them.
    #[serde(default, skip_serializing_if = "Option::is_none", deserialize_with = "lenient::option_number")]
    pub heartbeat_fingerprint: Option<i32>,
    /// `producerDataSet`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub producer_data_set: Vec<ProducerData>,
    /// `withoutSub` (5.x): the consumers' subscriptions are left out (unchanged since the
    /// fingerprint).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub without_sub: Option<bool>,
}

impl JsonBody for HeartbeatData {
    const JAVA_CLASS: &'static str = "HeartbeatData";
}

/// `ProducerData`: a producer group a client has.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProducerData {
    /// `groupName`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub group_name: String,
}

impl ProducerData {
    /// A producer of `group_name`.
    pub fn new(group_name: impl Into<String>) -> Self {
        Self { group_name: group_name.into() }
    }
}

/// `ConsumerData`: a consumer group a client has.
///
/// The enum fields carry Java's names as text: `consumeType` `CONSUME_ACTIVELY`,
/// `CONSUME_PASSIVELY` or `CONSUME_POP`; `messageModel` `CLUSTERING` or `BROADCASTING`;
/// `consumeFromWhere` `CONSUME_FROM_LAST_OFFSET`, `CONSUME_FROM_FIRST_OFFSET`,
/// `CONSUME_FROM_TIMESTAMP`, ... (fastjson reads a name it does not know as `null`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConsumerData {
    /// `consumeFromWhere`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consume_from_where: Option<String>,
    /// `consumeType`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consume_type: Option<String>,
    /// `groupName`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub group_name: String,
    /// `messageModel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_model: Option<String>,
    /// `subscriptionDataSet`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub subscription_data_set: Vec<SubscriptionData>,
    /// `unitMode`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub unit_mode: bool,
}

impl ConsumerData {
    /// `messageModel` of a group whose queues its consumers share.
    pub const CLUSTERING: &'static str = "CLUSTERING";
    /// `messageModel` of a group whose every consumer reads every queue.
    pub const BROADCASTING: &'static str = "BROADCASTING";
}

/// `SubscriptionData`: a consumer's subscription to one topic.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionData {
    /// `classFilterMode`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub class_filter_mode: bool,
    /// `codeSet`: the tags' hash codes (Java's `String.hashCode`), for the consume queue's tag
    /// filter.
    #[serde(default, deserialize_with = "lenient::int_set")]
    pub code_set: Vec<i32>,
    /// `expressionType`: `TAG` or `SQL92`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expression_type: Option<String>,
    /// `subString`: the expression (`*`, or tags joined by ` || `).
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub sub_string: String,
    /// `subVersion`.
    #[serde(default, deserialize_with = "lenient::number")]
    pub sub_version: i64,
    /// `tagsSet`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub tags_set: Vec<String>,
    /// `topic`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub topic: String,
}

/// `LockBatchRequestBody`: the body of `LOCK_BATCH_MQ`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockBatchRequestBody {
    /// `clientId`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub client_id: String,
    /// `consumerGroup`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub consumer_group: String,
    /// `mqSet`: the queues to lock.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub mq_set: Vec<MessageQueue>,
    /// `onlyThisBroker` (5.x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_this_broker: Option<bool>,
}

impl JsonBody for LockBatchRequestBody {
    const JAVA_CLASS: &'static str = "LockBatchRequestBody";
}

/// `LockBatchResponseBody`: the answer to `LOCK_BATCH_MQ`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockBatchResponseBody {
    /// `lockOKMQSet`: the queues now locked by the client.
    #[serde(rename = "lockOKMQSet", default, deserialize_with = "lenient::null_default")]
    pub lock_ok_mq_set: Vec<MessageQueue>,
}

impl LockBatchResponseBody {
    /// The answer that `queues` are locked.
    pub fn new(queues: Vec<MessageQueue>) -> Self {
        Self { lock_ok_mq_set: queues }
    }
}

impl JsonBody for LockBatchResponseBody {
    const JAVA_CLASS: &'static str = "LockBatchResponseBody";
}

/// `UnlockBatchRequestBody`: the body of `UNLOCK_BATCH_MQ`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UnlockBatchRequestBody {
    /// `clientId`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub client_id: String,
    /// `consumerGroup`.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub consumer_group: String,
    /// `mqSet`: the queues to unlock.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub mq_set: Vec<MessageQueue>,
    /// `onlyThisBroker` (5.x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub only_this_broker: Option<bool>,
}

impl JsonBody for UnlockBatchRequestBody {
    const JAVA_CLASS: &'static str = "UnlockBatchRequestBody";
}

/// `GetConsumerListByGroupResponseBody`: the answer to `GET_CONSUMER_LIST_BY_GROUP`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetConsumerListByGroupResponseBody {
    /// `consumerIdList`: the client ids of the group's consumers.
    #[serde(default, deserialize_with = "lenient::null_default")]
    pub consumer_id_list: Vec<String>,
}

impl GetConsumerListByGroupResponseBody {
    /// The answer listing `consumer_ids`.
    pub fn new(consumer_ids: Vec<String>) -> Self {
        Self { consumer_id_list: consumer_ids }
    }
}

impl JsonBody for GetConsumerListByGroupResponseBody {
    const JAVA_CLASS: &'static str = "GetConsumerListByGroupResponseBody";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_java_5_heartbeat() {
        let json = br#"{"clientID":"10.0.0.1@1234#567","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","groupName":"cg","messageModel":"CLUSTERING","subscriptionDataSet":[{"classFilterMode":false,"codeSet":[97,98],"expressionType":"TAG","subString":"a || b","subVersion":1700000000000,"tagsSet":["a","b"],"topic":"T"}],"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"pg"}],"withoutSub":false}"#;
        let hb = HeartbeatData::decode(json).unwrap();
        assert_eq!(hb.client_id, "10.0.0.1@1234#567");
        assert_eq!(hb.producer_data_set, [ProducerData::new("pg")]);
        let c = &hb.consumer_data_set[0];
        assert_eq!(c.message_model.as_deref(), Some(ConsumerData::CLUSTERING));
        assert_eq!(c.subscription_data_set[0].code_set, [97, 98]);
        assert_eq!(c.subscription_data_set[0].sub_version, 1_700_000_000_000);
        assert_eq!(hb.heartbeat_fingerprint, Some(0));
        assert_eq!(hb.without_sub, Some(false));
    }

    #[test]
    fn reads_a_go_heartbeat_with_string_hash_codes() {
        // rocketmq-client-go writes the code set as strings, in a sorted array.
        let json = br#"{"clientID":"c","producerDataSet":[],"consumerDataSet":[{"groupName":"g","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_FIRST_OFFSET","subscriptionDataSet":[{"classFilterMode":false,"topic":"T","subString":"a","tagsSet":["a"],"codeSet":["97"],"subVersion":1,"expressionType":"TAG"}],"unitMode":false}]}"#;
        let hb = HeartbeatData::decode(json).unwrap();
        assert_eq!(hb.consumer_data_set[0].subscription_data_set[0].code_set, [97]);
        assert_eq!(hb.heartbeat_fingerprint, None);
    }

    #[test]
    fn nulls_and_missing_collections_are_empty() {
        let hb = HeartbeatData::decode(br#"{"clientID":"c","producerDataSet":null}"#).unwrap();
        assert!(hb.producer_data_set.is_empty());
        assert!(hb.consumer_data_set.is_empty());
    }

    #[test]
    fn lock_bodies_round_trip() {
        let body = LockBatchRequestBody {
            client_id: "cid".into(),
            consumer_group: "cg".into(),
            mq_set: vec![MessageQueue::new("T", "b", 3)],
            only_this_broker: Some(true),
        };
        assert_eq!(
            String::from_utf8(body.encode()).unwrap(),
            r#"{"clientId":"cid","consumerGroup":"cg","mqSet":[{"brokerName":"b","queueId":3,"topic":"T"}],"onlyThisBroker":true}"#
        );
        assert_eq!(LockBatchRequestBody::decode(&body.encode()).unwrap(), body);
        let response = LockBatchResponseBody::new(vec![MessageQueue::new("T", "b", 3)]);
        assert_eq!(
            String::from_utf8(response.encode()).unwrap(),
            r#"{"lockOKMQSet":[{"brokerName":"b","queueId":3,"topic":"T"}]}"#
        );
    }
}
