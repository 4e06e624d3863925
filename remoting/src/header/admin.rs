//! Admin reads (`mqadmin`): a topic's statistics and its config.

use super::command_header;

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
