//! Producing: `SEND_MESSAGE` (V1 header), `SEND_MESSAGE_V2` and `SEND_BATCH_MESSAGE` (V2
//! header), and the response header of all three.

use super::{RpcFields, command_header};

command_header! {
    /// `SendMessageRequestHeader`: the header of `SEND_MESSAGE` (10) and `SEND_REPLY_MESSAGE`.
    pub struct SendMessageRequestHeader {
        /// `producerGroup`.
        pub producer_group: String => required "producerGroup",
        /// `topic`.
        pub topic: String => required "topic",
        /// `defaultTopic`: the template topic for auto-creation (`TBW102`).
        pub default_topic: String => required "defaultTopic",
        /// `defaultTopicQueueNums`: queues of an auto-created topic.
        pub default_topic_queue_nums: i32 => required "defaultTopicQueueNums",
        /// `queueId`.
        pub queue_id: i32 => required "queueId",
        /// `sysFlag`: the message's `MessageSysFlag` bits.
        pub sys_flag: i32 => required "sysFlag",
        /// `bornTimestamp`: when the producer made the message, in ms.
        pub born_timestamp: i64 => required "bornTimestamp",
        /// `flag`: the message's user flag.
        pub flag: i32 => required "flag",
        /// `properties`: the message properties, as `MessageDecoder.messageProperties2String`
        /// writes them (name `\u{1}` value `\u{2}` ...).
        pub properties: Option<String> => optional "properties",
        /// `reconsumeTimes`: set on a retry.
        pub reconsume_times: Option<i32> => optional "reconsumeTimes",
        /// `unitMode` (a `boolean` 4.9.x always sends).
        pub unit_mode: Option<bool> => optional "unitMode",
        /// `batch`: the body is a batch (a `boolean` 4.9.x always sends).
        pub batch: Option<bool> => optional "batch",
        /// `maxReconsumeTimes`: of the consumer group, on a retry.
        pub max_reconsume_times: Option<i32> => optional "maxReconsumeTimes",
        /// `lo`: a logical (static-topic) queue id (5.x).
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields; `bname` is the V2 header's `n`.
        pub rpc: RpcFields => flatten,
    }
}

command_header! {
    /// `SendMessageRequestHeaderV2`: the one-letter header of `SEND_MESSAGE_V2` (310) and
    /// `SEND_BATCH_MESSAGE` (320), which Java clients send by default. Convert it to and from
    /// [`SendMessageRequestHeader`] with `From`, as Java's `createSendMessageRequestHeaderV1/V2`
    /// do.
    pub struct SendMessageRequestHeaderV2 {
        /// `a`: producerGroup.
        pub a: String => required "a",
        /// `b`: topic.
        pub b: String => required "b",
        /// `c`: defaultTopic.
        pub c: String => required "c",
        /// `d`: defaultTopicQueueNums.
        pub d: i32 => required "d",
        /// `e`: queueId.
        pub e: i32 => required "e",
        /// `f`: sysFlag.
        pub f: i32 => required "f",
        /// `g`: bornTimestamp.
        pub g: i64 => required "g",
        /// `h`: flag.
        pub h: i32 => required "h",
        /// `i`: properties.
        pub i: Option<String> => optional "i",
        /// `j`: reconsumeTimes.
        pub j: Option<i32> => optional "j",
        /// `k`: unitMode (a `boolean` 4.9.x always sends).
        pub k: Option<bool> => optional "k",
        /// `l`: maxReconsumeTimes (Java's comment calls it consumeRetryTimes).
        pub l: Option<i32> => optional "l",
        /// `m`: batch (a `boolean` 4.9.x always sends).
        pub m: Option<bool> => optional "m",
        /// `n`: the broker name.
        pub n: Option<String> => optional "n",
        /// `lo`: a logical (static-topic) queue id (5.x).
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields (5.x; Java's V1 conversion ignores them).
        pub rpc: RpcFields => flatten,
    }
}

impl From<SendMessageRequestHeaderV2> for SendMessageRequestHeader {
    /// Java's `createSendMessageRequestHeaderV1`: every letter to its field, `n` to `bname`;
    /// the V2 header's own `lo` and RPC fields are dropped, as Java drops them.
    fn from(v2: SendMessageRequestHeaderV2) -> Self {
        Self {
            producer_group: v2.a,
            topic: v2.b,
            default_topic: v2.c,
            default_topic_queue_nums: v2.d,
            queue_id: v2.e,
            sys_flag: v2.f,
            born_timestamp: v2.g,
            flag: v2.h,
            properties: v2.i,
            reconsume_times: v2.j,
            unit_mode: v2.k,
            batch: v2.m,
            max_reconsume_times: v2.l,
            logical: None,
            rpc: RpcFields { broker_name: v2.n, ..RpcFields::default() },
        }
    }
}

impl From<SendMessageRequestHeader> for SendMessageRequestHeaderV2 {
    /// Java's `createSendMessageRequestHeaderV2`: every field to its letter, `bname` to `n`.
    /// Java's `isUnitMode()`/`isBatch()` turn an absent flag into `false`; so does this.
    fn from(v1: SendMessageRequestHeader) -> Self {
        Self {
            a: v1.producer_group,
            b: v1.topic,
            c: v1.default_topic,
            d: v1.default_topic_queue_nums,
            e: v1.queue_id,
            f: v1.sys_flag,
            g: v1.born_timestamp,
            h: v1.flag,
            i: v1.properties,
            j: v1.reconsume_times,
            k: Some(v1.unit_mode.unwrap_or(false)),
            l: v1.max_reconsume_times,
            m: Some(v1.batch.unwrap_or(false)),
            n: v1.rpc.broker_name,
            logical: None,
            rpc: RpcFields::default(),
        }
    }
}

command_header! {
    /// `SendMessageResponseHeader`: the answer to every send.
    pub struct SendMessageResponseHeader {
        /// `msgId`: the offset message id (store host, port and commit-log offset, in hex).
        pub msg_id: String => required "msgId",
        /// `queueId`.
        pub queue_id: i32 => required "queueId",
        /// `queueOffset`: the message's consume-queue offset.
        pub queue_offset: i64 => required "queueOffset",
        /// `transactionId`.
        pub transaction_id: Option<String> => optional "transactionId",
        /// `batchUniqId`: the batch's client ids (5.x).
        pub batch_uniq_id: Option<String> => optional "batchUniqId",
        /// `recallHandle`: a handle to recall a delayed message (5.5).
        pub recall_handle: Option<String> => optional "recallHandle",
    }
}

impl SendMessageResponseHeader {
    /// A response header with the required fields.
    pub fn new(msg_id: impl Into<String>, queue_id: i32, queue_offset: i64) -> Self {
        Self { msg_id: msg_id.into(), queue_id, queue_offset, ..Self::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ExtFields;
    use crate::header::CommandHeader;

    fn v2() -> SendMessageRequestHeaderV2 {
        SendMessageRequestHeaderV2 {
            a: "pg".into(),
            b: "TopicA".into(),
            c: "TBW102".into(),
            d: 4,
            e: 2,
            f: 0,
            g: 1_700_000_000_123,
            h: 0,
            i: Some("KEYS\u{1}k1\u{2}".into()),
            j: Some(1),
            k: Some(false),
            l: Some(16),
            m: Some(true),
            n: Some("broker-a".into()),
            logical: None,
            rpc: RpcFields::default(),
        }
    }

    #[test]
    fn v2_converts_to_v1_letter_by_letter_and_back() {
        let v1 = SendMessageRequestHeader::from(v2());
        assert_eq!(v1.producer_group, "pg");
        assert_eq!(v1.topic, "TopicA");
        assert_eq!(v1.default_topic, "TBW102");
        assert_eq!(v1.default_topic_queue_nums, 4);
        assert_eq!(v1.queue_id, 2);
        assert_eq!(v1.born_timestamp, 1_700_000_000_123);
        assert_eq!(v1.properties.as_deref(), Some("KEYS\u{1}k1\u{2}"));
        assert_eq!(v1.reconsume_times, Some(1));
        assert_eq!(v1.max_reconsume_times, Some(16));
        assert_eq!(v1.batch, Some(true));
        assert_eq!(v1.rpc.broker_name.as_deref(), Some("broker-a"));
        assert_eq!(SendMessageRequestHeaderV2::from(v1), v2());
    }

    #[test]
    fn v2_reads_the_letters_a_java_client_sends() {
        let ext: ExtFields = [
            ("a", "pg"),
            ("b", "TopicA"),
            ("c", "TBW102"),
            ("d", "4"),
            ("e", "2"),
            ("f", "0"),
            ("g", "1700000000123"),
            ("h", "0"),
            ("i", "KEYS\u{1}k1\u{2}"),
            ("j", "1"),
            ("k", "false"),
            ("l", "16"),
            ("m", "true"),
            ("n", "broker-a"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(SendMessageRequestHeaderV2::from_ext_fields(&ext), Ok(v2()));
        let mut back = ExtFields::new();
        v2().write_ext_fields(&mut back);
        assert_eq!(back, ext);
    }
}
