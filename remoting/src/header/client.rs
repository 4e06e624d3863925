//! Clients and groups: unregistering, consumer lists, rebalance notices and retries.

use super::{RpcFields, command_header};

command_header! {
    /// `UnregisterClientRequestHeader`: the header of `UNREGISTER_CLIENT` (35). Its response
    /// header has no fields.
    pub struct UnregisterClientRequestHeader {
        /// `clientID`.
        pub client_id: String => required "clientID",
        /// `producerGroup`.
        pub producer_group: Option<String> => optional "producerGroup",
        /// `consumerGroup`.
        pub consumer_group: Option<String> => optional "consumerGroup",
        /// The RPC fields (5.x).
        pub rpc: RpcFields => flatten,
    }
}

command_header! {
    /// `GetConsumerListByGroupRequestHeader`: the header of `GET_CONSUMER_LIST_BY_GROUP` (38);
    /// the answer is a [`GetConsumerListByGroupResponseBody`](crate::body::GetConsumerListByGroupResponseBody).
    pub struct GetConsumerListByGroupRequestHeader {
        /// `consumerGroup`.
        pub consumer_group: String => required "consumerGroup",
        /// The RPC fields (5.x).
        pub rpc: RpcFields => flatten,
    }
}

command_header! {
    /// `NotifyConsumerIdsChangedRequestHeader`: the header of `NOTIFY_CONSUMER_IDS_CHANGED`
    /// (40), which a broker sends one-way to a group's clients.
    pub struct NotifyConsumerIdsChangedRequestHeader {
        /// `consumerGroup`.
        pub consumer_group: String => required "consumerGroup",
        /// The RPC fields (5.x).
        pub rpc: RpcFields => flatten,
    }
}

impl NotifyConsumerIdsChangedRequestHeader {
    /// The notice for `consumer_group`.
    pub fn new(consumer_group: impl Into<String>) -> Self {
        Self { consumer_group: consumer_group.into(), ..Self::default() }
    }
}

command_header! {
    /// `ConsumerSendMsgBackRequestHeader`: the header of `CONSUMER_SEND_MSG_BACK` (36).
    pub struct ConsumerSendMsgBackRequestHeader {
        /// `offset`: the message's commit-log offset.
        pub offset: i64 => required "offset",
        /// `group`: the consumer group.
        pub group: String => required "group",
        /// `delayLevel`: the retry's delay level (0: the broker picks; negative: straight to
        /// the DLQ).
        pub delay_level: i32 => required "delayLevel",
        /// `originMsgId`: the message's client id.
        pub origin_msg_id: Option<String> => optional "originMsgId",
        /// `originTopic`: the message's topic.
        pub origin_topic: Option<String> => optional "originTopic",
        /// `unitMode` (a `boolean`, false when absent).
        pub unit_mode: bool => defaulted "unitMode",
        /// `maxReconsumeTimes` of the group.
        pub max_reconsume_times: Option<i32> => optional "maxReconsumeTimes",
        /// The RPC fields.
        pub rpc: RpcFields => flatten,
    }
}
