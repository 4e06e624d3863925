//! RocketMQ's reserved names, permission bits and name validation (`TopicValidator`,
//! `PermName`, `MixAll`).

use crate::error::BrokerError;

/// The topic whose config new topics inherit when `autoCreateTopicEnable` is on.
pub const AUTO_CREATE_TOPIC_KEY_TOPIC: &str = "TBW102";
/// The topic delayed messages wait in, one queue per delay level.
pub const SCHEDULE_TOPIC: &str = "SCHEDULE_TOPIC_XXXX";
/// The benchmark topic.
pub const BENCHMARK_TOPIC: &str = "BenchmarkTest";
/// Transaction half messages.
pub const TRANS_HALF_TOPIC: &str = "RMQ_SYS_TRANS_HALF_TOPIC";
/// Transaction op messages.
pub const TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_TRANS_OP_HALF_TOPIC";
/// Transaction check timeouts.
pub const TRANS_CHECK_MAX_TIME_TOPIC: &str = "TRANS_CHECK_MAX_TIME_TOPIC";
/// Message traces (with `traceTopicEnable`, unless `msgTraceTopicName` names another).
pub const TRACE_TOPIC: &str = "RMQ_SYS_TRACE_TOPIC";
/// The self-test topic.
pub const SELF_TEST_TOPIC: &str = "SELF_TEST_TOPIC";
/// Offset-moved events.
pub const OFFSET_MOVED_EVENT: &str = "OFFSET_MOVED_EVENT";
/// RocketMQ 5's RocksDB offset checkpoint topic (reserved only).
pub const ROCKSDB_OFFSET_TOPIC: &str = "CHECKPOINT_TOPIC";
/// RocketMQ 5.5's RocksDB transaction half topic.
pub const ROCKSDB_TRANS_HALF_TOPIC: &str = "RMQ_SYS_ROCKSDB_TRANS_HALF_TOPIC";
/// RocketMQ 5.5's RocksDB transaction op topic.
pub const ROCKSDB_TRANS_OP_HALF_TOPIC: &str = "RMQ_SYS_ROCKSDB_TRANS_OP_HALF_TOPIC";
/// RocketMQ 5's timer-wheel topic (with `timerWheelEnable`).
pub const TIMER_TOPIC: &str = "rmq_sys_wheel_timer";
/// The prefix of RocketMQ's system topics.
pub const SYSTEM_TOPIC_PREFIX: &str = "rmq_sys_";
/// The prefix of the topic a broker's group members sync through (5.x).
pub const SYNC_BROKER_MEMBER_GROUP_PREFIX: &str = "rmq_sys_SYNC_BROKER_MEMBER_";
/// The prefix of a cluster's POP revive topic (5.x).
pub const REVIVE_TOPIC_PREFIX: &str = "rmq_sys_REVIVE_LOG_";
/// The suffix of a cluster's request-reply topic (`<cluster>_REPLY_TOPIC`).
pub const REPLY_TOPIC_POSTFIX: &str = "REPLY_TOPIC";
/// The prefix of a group's retry topic.
pub const RETRY_GROUP_TOPIC_PREFIX: &str = "%RETRY%";
/// The prefix of a group's dead-letter topic.
pub const DLQ_GROUP_TOPIC_PREFIX: &str = "%DLQ%";
/// The prefix of system consumer groups, which are created even without
/// `autoCreateSubscriptionGroup`.
pub const CID_RMQ_SYS_PREFIX: &str = "CID_RMQ_SYS_";
/// The separator of a consumer-offset key, `topic@group`.
pub const TOPIC_GROUP_SEPARATOR: char = '@';
/// The longest topic name (`TopicValidator.TOPIC_MAX_LENGTH`).
pub const TOPIC_MAX_LENGTH: usize = 127;
/// The longest group name (`Validators.CHARACTER_MAX_LENGTH`).
pub const GROUP_MAX_LENGTH: usize = 255;
/// The broker id of a master.
pub const MASTER_ID: i64 = 0;

/// The retry topic of `group`: `%RETRY%group`.
pub fn retry_topic(group: &str) -> String {
    format!("{RETRY_GROUP_TOPIC_PREFIX}{group}")
}

/// The dead-letter topic of `group`: `%DLQ%group`.
pub fn dlq_topic(group: &str) -> String {
    format!("{DLQ_GROUP_TOPIC_PREFIX}{group}")
}

/// Whether `topic` is a retry topic.
pub fn is_retry_topic(topic: &str) -> bool {
    topic.starts_with(RETRY_GROUP_TOPIC_PREFIX)
}

/// Whether `topic` is a dead-letter topic.
pub fn is_dlq_topic(topic: &str) -> bool {
    topic.starts_with(DLQ_GROUP_TOPIC_PREFIX)
}

/// Whether `group` is a system consumer group (`MixAll.isSysConsumerGroup`).
pub fn is_sys_consumer_group(group: &str) -> bool {
    group.starts_with(CID_RMQ_SYS_PREFIX)
}

/// Topics producers may not send to (`TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET`).
pub const NOT_ALLOWED_SEND_TOPICS: [&str; 6] = [
    SCHEDULE_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
    SELF_TEST_TOPIC,
    OFFSET_MOVED_EVENT,
];

/// Whether producers may not send to `topic` (`TopicValidator.isNotAllowedSendTopic`).
pub fn is_not_allowed_send_topic(topic: &str) -> bool {
    NOT_ALLOWED_SEND_TOPICS.contains(&topic)
}

pub use logship_remoting::body::perm;

fn cut(s: &str) -> String {
    s.chars().take(300).collect()
}

fn has_illegal_char(s: &str) -> bool {
    !s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'%' | b'|' | b'_' | b'-'))
}

/// Checks a topic name as `TopicValidator.validateTopic` does: not blank, only
/// `[%|a-zA-Z0-9_-]`, at most [`TOPIC_MAX_LENGTH`] characters. Reserved names are checked apart
/// ([`check_topic_not_reserved`]), since the broker itself creates topics with them.
pub fn validate_topic(topic: &str) -> Result<(), BrokerError> {
    let bad = |reason| Err(BrokerError::InvalidTopic { topic: cut(topic), reason });
    if topic.trim().is_empty() {
        return bad("The specified topic is blank.");
    }
    if has_illegal_char(topic) {
        return bad("The specified topic contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$");
    }
    if topic.len() > TOPIC_MAX_LENGTH {
        return bad("The specified topic is longer than topic max length.");
    }
    Ok(())
}

/// Refuses names a client may not create or send to: the topics producers may not send to
/// (`TopicValidator.isNotAllowedSendTopic`) and `TBW102` itself.
pub fn check_topic_not_reserved(topic: &str) -> Result<(), BrokerError> {
    if is_not_allowed_send_topic(topic) {
        return Err(BrokerError::InvalidTopic {
            topic: cut(topic),
            reason: "Sending message to topic is forbidden.",
        });
    }
    if topic == AUTO_CREATE_TOPIC_KEY_TOPIC {
        return Err(BrokerError::InvalidTopic {
            topic: cut(topic),
            reason: "The specified topic is conflict with AUTO_CREATE_TOPIC_KEY_TOPIC.",
        });
    }
    Ok(())
}

/// Whether `topic` is a system topic (`TopicValidator.isSystemTopic` with the broker's own
/// system topics: the cluster and broker names and those the broker created).
pub fn is_system_topic(topic: &str) -> bool {
    topic.starts_with(SYSTEM_TOPIC_PREFIX)
        || [
            AUTO_CREATE_TOPIC_KEY_TOPIC,
            SCHEDULE_TOPIC,
            BENCHMARK_TOPIC,
            TRANS_HALF_TOPIC,
            TRACE_TOPIC,
            TRANS_OP_HALF_TOPIC,
            TRANS_CHECK_MAX_TIME_TOPIC,
            SELF_TEST_TOPIC,
            OFFSET_MOVED_EVENT,
            ROCKSDB_OFFSET_TOPIC,
        ]
        .contains(&topic)
}

/// Checks a consumer group name as the broker does before creating it
/// (`SubscriptionGroupManager.findSubscriptionGroupConfig`): at most [`GROUP_MAX_LENGTH`]
/// characters of `[%|a-zA-Z0-9_-]`, not blank.
pub fn validate_group(group: &str) -> Result<(), BrokerError> {
    let bad = |reason| Err(BrokerError::InvalidGroup { group: cut(group), reason });
    if group.trim().is_empty() {
        return bad("the group is blank");
    }
    if group.len() > GROUP_MAX_LENGTH {
        return bad("the group is longer than 255 characters");
    }
    if has_illegal_char(group) {
        return bad("the group contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_names_are_checked_as_rocketmq_checks_them() {
        assert!(validate_topic("TopicA").is_ok());
        assert!(validate_topic("%RETRY%Group-1|x_y").is_ok());
        assert!(validate_topic(&"a".repeat(127)).is_ok());
        for bad in ["", "   ", "a b", "topic.a", "topic/a", "tópico", "a@b"] {
            assert!(matches!(validate_topic(bad), Err(BrokerError::InvalidTopic { .. })), "{bad:?}");
        }
        let long = validate_topic(&"a".repeat(128)).unwrap_err().to_string();
        assert!(long.contains("longer than topic max length"), "{long}");
    }

    #[test]
    fn reserved_topics_are_refused_to_clients() {
        for t in NOT_ALLOWED_SEND_TOPICS.iter().chain([&AUTO_CREATE_TOPIC_KEY_TOPIC]) {
            assert!(check_topic_not_reserved(t).is_err(), "{t}");
        }
        assert!(check_topic_not_reserved("TopicA").is_ok());
        assert!(check_topic_not_reserved("%RETRY%g").is_ok());
    }

    #[test]
    fn group_names_are_checked() {
        assert!(validate_group("GroupA").is_ok());
        assert!(validate_group(&"g".repeat(255)).is_ok());
        assert!(validate_group(&"g".repeat(256)).is_err());
        assert!(validate_group("a b").is_err());
        assert!(validate_group("").is_err());
    }

    #[test]
    fn permission_bits_are_rocketmqs() {
        assert_eq!((perm::READ, perm::WRITE, perm::INHERIT), (4, 2, 1));
        assert_eq!(perm::to_string(7), "RWX");
        assert_eq!(perm::to_string(6), "RW-");
        assert_eq!(perm::to_string(1), "--X");
        assert!(perm::is_inherited(7) && !perm::is_inherited(6));
    }

    #[test]
    fn retry_and_dlq_topics_are_named_as_in_rocketmq() {
        assert_eq!(retry_topic("g"), "%RETRY%g");
        assert_eq!(dlq_topic("g"), "%DLQ%g");
        assert!(is_retry_topic("%RETRY%g") && is_dlq_topic("%DLQ%g"));
        assert!(is_sys_consumer_group("CID_RMQ_SYS_TRANS"));
    }
}
