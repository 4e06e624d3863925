//! Consuming: `PULL_MESSAGE`.

use super::{RpcFields, command_header};

command_header! {
    /// `PullMessageRequestHeader`: the header of `PULL_MESSAGE` (11).
    pub struct PullMessageRequestHeader {
        /// `consumerGroup`.
        pub consumer_group: String => required "consumerGroup",
        /// `topic`.
        pub topic: String => required "topic",
        /// `liteTopic` (5.5).
        pub lite_topic: Option<String> => optional "liteTopic",
        /// `queueId`.
        pub queue_id: i32 => required "queueId",
        /// `queueOffset`: the consume-queue offset to read from.
        pub queue_offset: i64 => required "queueOffset",
        /// `maxMsgNums`: at most this many messages.
        pub max_msg_nums: i32 => required "maxMsgNums",
        /// `sysFlag`: `PullSysFlag` bits (commit offset 1, suspend 2, subscription 4, class
        /// filter 8, lite pull 16).
        pub sys_flag: i32 => required "sysFlag",
        /// `commitOffset`: the consumer's offset to commit with this pull.
        pub commit_offset: i64 => required "commitOffset",
        /// `suspendTimeoutMillis`: how long the broker may hold the pull (long polling).
        pub suspend_timeout_millis: i64 => required "suspendTimeoutMillis",
        /// `subscription`: the subscription expression, with the subscription flag.
        pub subscription: Option<String> => optional "subscription",
        /// `subVersion`: the subscription's version.
        pub sub_version: i64 => required "subVersion",
        /// `expressionType`: `TAG` or `SQL92`.
        pub expression_type: Option<String> => optional "expressionType",
        /// `maxMsgBytes` (5.x).
        pub max_msg_bytes: Option<i32> => optional "maxMsgBytes",
        /// `requestSource`: a proxy's request source (5.x).
        pub request_source: Option<i32> => optional "requestSource",
        /// `proxyFrowardClientId` (sic): the client behind a proxy (5.x).
        pub proxy_forward_client_id: Option<String> => optional "proxyFrowardClientId",
        /// `lo`: a logical (static-topic) queue id (5.x).
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields.
        pub rpc: RpcFields => flatten,
    }
}

command_header! {
    /// `PullMessageResponseHeader`: the answer to `PULL_MESSAGE`, whatever its code.
    pub struct PullMessageResponseHeader {
        /// `suggestWhichBrokerId`: the broker id the consumer should pull from next (0 the
        /// master; a slave's id when the master suggests reading from it).
        pub suggest_which_broker_id: i64 => required "suggestWhichBrokerId",
        /// `nextBeginOffset`: where the next pull starts.
        pub next_begin_offset: i64 => required "nextBeginOffset",
        /// `minOffset`: the queue's min offset.
        pub min_offset: i64 => required "minOffset",
        /// `maxOffset`: the queue's max offset.
        pub max_offset: i64 => required "maxOffset",
        /// `offsetDelta` (5.x, static topics).
        pub offset_delta: Option<i64> => optional "offsetDelta",
        /// `topicSysFlag` (5.x).
        pub topic_sys_flag: Option<i32> => optional "topicSysFlag",
        /// `groupSysFlag` (5.x).
        pub group_sys_flag: Option<i32> => optional "groupSysFlag",
        /// `forbiddenType` (5.x).
        pub forbidden_type: Option<i32> => optional "forbiddenType",
    }
}

impl PullMessageResponseHeader {
    /// A response header with the required fields.
    pub fn new(
        suggest_which_broker_id: i64,
        next_begin_offset: i64,
        min_offset: i64,
        max_offset: i64,
    ) -> Self {
        Self { suggest_which_broker_id, next_begin_offset, min_offset, max_offset, ..Self::default() }
    }
}
