//! Offsets: the consumer offset of a group, and a queue's bounds and timestamp search.

use super::{BoundaryType, RpcFields, command_header};

command_header! {
    /// `QueryConsumerOffsetRequestHeader`: the header of `QUERY_CONSUMER_OFFSET` (14).
    pub struct QueryConsumerOffsetRequestHeader {
        /// `consumerGroup`.
        pub consumer_group: String => required "consumerGroup",
        /// `topic`.
        pub topic: String => required "topic",
        /// `queueId`.
        pub queue_id: i32 => required "queueId",
        /// `setZeroIfNotFound` (5.x): answer 0 rather than `QUERY_NOT_FOUND`.
        pub set_zero_if_not_found: Option<bool> => optional "setZeroIfNotFound",
        /// `lo`: a logical (static-topic) queue id (5.x).
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields.
        pub rpc: RpcFields => flatten,
    }
}

command_header! {
    /// `QueryConsumerOffsetResponseHeader`.
    pub struct QueryConsumerOffsetResponseHeader {
        /// `offset`: the committed offset.
        pub offset: i64 => required "offset",
    }
}

command_header! {
    /// `UpdateConsumerOffsetRequestHeader`: the header of `UPDATE_CONSUMER_OFFSET` (15). Its
    /// response header has no fields.
    pub struct UpdateConsumerOffsetRequestHeader {
        /// `consumerGroup`.
        pub consumer_group: String => required "consumerGroup",
        /// `topic`.
        pub topic: String => required "topic",
        /// `queueId`.
        pub queue_id: i32 => required "queueId",
        /// `commitOffset`: the offset to commit.
        pub commit_offset: i64 => required "commitOffset",
        /// `lo`: a logical (static-topic) queue id (5.x).
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields.
        pub rpc: RpcFields => flatten,
    }
}

command_header! {
    /// `GetMaxOffsetRequestHeader`: the header of `GET_MAX_OFFSET` (30).
    pub struct GetMaxOffsetRequestHeader {
        /// `topic`.
        pub topic: String => required "topic",
        /// `queueId`.
        pub queue_id: i32 => required "queueId",
        /// `committed` (5.x, a `boolean` it always sends; absent means `true`,
        /// [`committed`](Self::committed)): the max of the committed (confirmed) log only.
        pub committed: Option<bool> => optional "committed",
        /// `lo`: a logical (static-topic) queue id (5.x).
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields.
        pub rpc: RpcFields => flatten,
    }
}

impl GetMaxOffsetRequestHeader {
    /// A request header for `topic` and `queue_id`.
    pub fn new(topic: impl Into<String>, queue_id: i32) -> Self {
        Self { topic: topic.into(), queue_id, ..Self::default() }
    }

    /// Whether the committed max is asked for: Java 5.x's default is `true`.
    pub fn committed(&self) -> bool {
        self.committed.unwrap_or(true)
    }
}

command_header! {
    /// `GetMaxOffsetResponseHeader`.
    pub struct GetMaxOffsetResponseHeader {
        /// `offset`: the queue's max offset.
        pub offset: i64 => required "offset",
    }
}

command_header! {
    /// `GetMinOffsetRequestHeader`: the header of `GET_MIN_OFFSET` (31).
    pub struct GetMinOffsetRequestHeader {
        /// `topic`.
        pub topic: String => required "topic",
        /// `queueId`.
        pub queue_id: i32 => required "queueId",
        /// `lo`: a logical (static-topic) queue id (5.x).
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields.
        pub rpc: RpcFields => flatten,
    }
}

command_header! {
    /// `GetMinOffsetResponseHeader`.
    pub struct GetMinOffsetResponseHeader {
        /// `offset`: the queue's min offset.
        pub offset: i64 => required "offset",
    }
}

command_header! {
    /// `GetEarliestMsgStoretimeRequestHeader`: the header of `GET_EARLIEST_MSG_STORETIME` (32).
    pub struct GetEarliestMsgStoretimeRequestHeader {
        /// `topic`.
        pub topic: String => required "topic",
        /// `queueId`.
        pub queue_id: i32 => required "queueId",
        /// `lo`: a logical (static-topic) queue id (5.x).
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields.
        pub rpc: RpcFields => flatten,
    }
}

command_header! {
    /// `GetEarliestMsgStoretimeResponseHeader`.
    pub struct GetEarliestMsgStoretimeResponseHeader {
        /// `timestamp`: the store time of the queue's oldest message, in ms.
        pub timestamp: i64 => required "timestamp",
    }
}

command_header! {
    /// `SearchOffsetRequestHeader`: the header of `SEARCH_OFFSET_BY_TIMESTAMP` (29).
    pub struct SearchOffsetRequestHeader {
        /// `topic`.
        pub topic: String => required "topic",
        /// `liteTopic` (5.5).
        pub lite_topic: Option<String> => optional "liteTopic",
        /// `queueId`.
        pub queue_id: i32 => required "queueId",
        /// `timestamp`: the store time to search, in ms.
        pub timestamp: i64 => required "timestamp",
        /// `boundaryType` (5.x): which of several matching offsets; absent is the lower.
        pub boundary_type: Option<BoundaryType> => optional "boundaryType",
        /// `lo`: a logical (static-topic) queue id (5.x).
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields.
        pub rpc: RpcFields => flatten,
    }
}

command_header! {
    /// `SearchOffsetResponseHeader`.
    pub struct SearchOffsetResponseHeader {
        /// `offset`: the offset found.
        pub offset: i64 => required "offset",
    }
}
