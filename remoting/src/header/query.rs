//! Looking messages up: by offset message id, and by key.

use super::{RpcFields, command_header};

command_header! {
    /// `ViewMessageRequestHeader`: the header of `VIEW_MESSAGE_BY_ID` (33). Its response
    /// header has no fields; the body is the stored message.
    pub struct ViewMessageRequestHeader {
        /// `topic` (5.x).
        pub topic: Option<String> => optional "topic",
        /// `offset`: the message's commit-log offset (from its offset message id).
        pub offset: i64 => required "offset",
    }
}

command_header! {
    /// `QueryMessageRequestHeader`: the header of `QUERY_MESSAGE` (12), by key from the index.
    pub struct QueryMessageRequestHeader {
        /// `topic`.
        pub topic: String => required "topic",
        /// `key`: a message key or unique id.
        pub key: String => required "key",
        /// `maxNum`: at most this many messages.
        pub max_num: i32 => required "maxNum",
        /// `beginTimestamp`, in ms.
        pub begin_timestamp: i64 => required "beginTimestamp",
        /// `endTimestamp`, in ms.
        pub end_timestamp: i64 => required "endTimestamp",
        /// `indexType` (5.x).
        pub index_type: Option<String> => optional "indexType",
        /// `lastKey` (5.x).
        pub last_key: Option<String> => optional "lastKey",
        /// `lo`: a logical (static-topic) queue id (5.x).
        pub logical: Option<bool> => optional "lo",
        /// The RPC fields (5.x).
        pub rpc: RpcFields => flatten,
    }
}

command_header! {
    /// `QueryMessageResponseHeader`.
    pub struct QueryMessageResponseHeader {
        /// `indexLastUpdateTimestamp`, in ms.
        pub index_last_update_timestamp: i64 => required "indexLastUpdateTimestamp",
        /// `indexLastUpdatePhyoffset`: the commit-log offset the index covers.
        pub index_last_update_phyoffset: i64 => required "indexLastUpdatePhyoffset",
    }
}
