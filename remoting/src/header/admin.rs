//! Admin reads (`mqadmin`): a topic's statistics and its config.

use super::{RpcFields, command_header};

command_header! {
    /// `GetTopicStatsInfoRequestHeader`: the header of `GET_TOPIC_STATS_INFO` (202).
    pub struct GetTopicStatsInfoRequestHeader {
        /// `topic`.
        pub topic: String => required "topic",
    }
}

command_header! {
    /// `GetTopicConfigRequestHeader`: the header of `GET_TOPIC_CONFIG` (351, 5.x).
    pub struct GetTopicConfigRequestHeader {
        /// `topic`.
        pub topic: String => required "topic",
        /// `lo`: include the static-topic mapping.
        pub logical: Option<bool> => optional "lo",
    }
}

command_header! {
    /// `GetConsumeStatsRequestHeader`: the header of `GET_CONSUME_STATS` (208).
    pub struct GetConsumeStatsRequestHeader {
        /// `consumerGroup`.
        pub consumer_group: String => required "consumerGroup",
        /// `topic`: one topic; absent or blank for every topic the group committed offsets of.
        pub topic: Option<String> => optional "topic",
        /// `topicList` (5.x): topics separated by `;`, collected without the subscription check.
        pub topic_list: Option<String> => optional "topicList",
        /// `lo` (5.x): static-topic logical queues.
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields (5.x).
        pub rpc: RpcFields => flatten,
    }
}

command_header! {
    /// `QueryTopicConsumeByWhoRequestHeader`: the header of `QUERY_TOPIC_CONSUME_BY_WHO` (300).
    pub struct QueryTopicConsumeByWhoRequestHeader {
        /// `topic`.
        pub topic: String => required "topic",
        /// `lo` (5.x): static-topic logical queues.
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields (5.x).
        pub rpc: RpcFields => flatten,
    }
}

command_header! {
    /// `ViewBrokerStatsDataRequestHeader`: the header of `VIEW_BROKER_STATS_DATA` (315), both
    /// lines (5.x adds no RPC fields to it).
    pub struct ViewBrokerStatsDataRequestHeader {
        /// `statsName`: a `BrokerStatsManager` statistic (`TOPIC_PUT_NUMS`, ...).
        pub stats_name: String => required "statsName",
        /// `statsKey`: its key (a topic, `topic@group`, ...).
        pub stats_key: String => required "statsKey",
    }
}

command_header! {
    /// `GetBrokerConfigResponseHeader`: the header of `GET_BROKER_CONFIG`'s (26) answer.
    pub struct GetBrokerConfigResponseHeader {
        /// `version`: the configuration's data version, as JSON.
        pub version: String => required "version",
    }
}
