//! Slave synchronization, sans IO: the master's side (`AdminBrokerProcessor`'s
//! `GET_ALL_CONSUMER_OFFSET` 43, `GET_ALL_DELAY_OFFSET` 45, `GET_ALL_SUBSCRIPTIONGROUP_CONFIG`
//! 201; `GET_ALL_TOPIC_CONFIG` 21 is in `admin`) and the slave's (`SlaveSynchronize`: one
//! request per [`SyncTable`], each reply applied with the table's `replace_from_master`).
//!
//! Java answers each with its manager's JSON (`encode()`), `SUCCESS` and no remark; a manager
//! that encodes to nothing is answered `SYSTEM_ERROR` with "No ... in this broker", which a
//! logship table never does (it always encodes to an object).

use logship_remoting::body::{JsonBody, TopicConfigSerializeWrapper};
use logship_remoting::{RemotingCommand, RequestCode, ResponseCode};

use crate::error::BrokerError;
use crate::serve::{Processed, RequestContext};
use crate::{
    BrokerMetadata, ConsumerOffsetSerializeWrapper, DelayOffsetSerializeWrapper, SubscriptionGroupWrapper,
};

/// `GET_ALL_CONSUMER_OFFSET` (43): `ConsumerOffsetManager.encode()`, the table and in 5.x its
/// version.
pub(crate) fn get_all_consumer_offset(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let body = ctx.broker.metadata.offsets.serialize_wrapper().encode();
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_body(body))
}

/// `GET_ALL_DELAY_OFFSET` (45): `ScheduleMessageService.encode()`, the delay offsets by level
/// and in 5.x their version.
pub(crate) fn get_all_delay_offset(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let body = ctx.broker.metadata.delays.serialize_wrapper().encode();
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_body(body))
}

/// `GET_ALL_SUBSCRIPTIONGROUP_CONFIG` (201): `SubscriptionGroupManager.encode()`, every group
/// with the table's version and in 5.x the forbidden bits.
pub(crate) fn get_all_subscription_group(ctx: &RequestContext, request: &RemotingCommand) -> Processed {
    let body = ctx.broker.metadata.groups.serialize_wrapper().encode();
    Ok(ctx.response(request, ResponseCode::SUCCESS).with_body(body))
}

/// One table a slave fetches from its master, in `SlaveSynchronize.syncAll`'s order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SyncTable {
    /// `syncTopicConfig`: `GET_ALL_TOPIC_CONFIG`, into `topics.json`.
    Topics,
    /// `syncConsumerOffset`: `GET_ALL_CONSUMER_OFFSET`, into `consumerOffset.json`.
    ConsumerOffsets,
    /// `syncDelayOffset`: `GET_ALL_DELAY_OFFSET`, into `delayOffset.json`.
    DelayOffsets,
    /// `syncSubscriptionGroupConfig`: `GET_ALL_SUBSCRIPTIONGROUP_CONFIG`, into
    /// `subscriptionGroup.json`.
    SubscriptionGroups,
}

impl SyncTable {
    /// Every table, in Java's order.
    pub const ALL: [Self; 4] =
        [Self::Topics, Self::ConsumerOffsets, Self::DelayOffsets, Self::SubscriptionGroups];

    /// The request code that fetches the table.
    pub fn code(self) -> RequestCode {
        match self {
            Self::Topics => RequestCode::GET_ALL_TOPIC_CONFIG,
            Self::ConsumerOffsets => RequestCode::GET_ALL_CONSUMER_OFFSET,
            Self::DelayOffsets => RequestCode::GET_ALL_DELAY_OFFSET,
            Self::SubscriptionGroups => RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
        }
    }

    /// The table's name, for logs and `/status`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Topics => "topics",
            Self::ConsumerOffsets => "consumerOffsets",
            Self::DelayOffsets => "delayOffsets",
            Self::SubscriptionGroups => "subscriptionGroups",
        }
    }

    /// The request to send the master (no header, as `BrokerOuterAPI` sends it).
    pub fn request(self) -> RemotingCommand {
        RemotingCommand::request(self.code())
    }

    /// Applies the master's `reply` to `metadata` as `SlaveSynchronize` does and writes the
    /// table's file (atomically, see [`crate::file`]) if it changed; returns whether it did.
    /// A refusal or a body that is not the table leaves the slave's table as it was.
    pub fn apply(self, metadata: &BrokerMetadata, reply: &RemotingCommand) -> Result<bool, BrokerError> {
        let what = self.reply_name();
        if reply.code != ResponseCode::SUCCESS.0 {
            return Err(BrokerError::BadContent {
                what,
                reason: format!(
                    "the master answered code {} ({})",
                    reply.code,
                    reply.remark.as_deref().unwrap_or("no remark")
                ),
            });
        }
        let bad = |e: logship_remoting::BodyError| BrokerError::BadContent { what, reason: e.to_string() };
        let changed = match self {
            Self::Topics => metadata
                .topics
                .replace_from_master(&TopicConfigSerializeWrapper::decode(&reply.body).map_err(bad)?),
            Self::ConsumerOffsets => metadata
                .offsets
                .replace_from_master(&ConsumerOffsetSerializeWrapper::decode(&reply.body).map_err(bad)?),
            Self::DelayOffsets => metadata
                .delays
                .replace_from_master(&DelayOffsetSerializeWrapper::decode(&reply.body).map_err(bad)?),
            Self::SubscriptionGroups => metadata
                .groups
                .replace_from_master(&SubscriptionGroupWrapper::decode(&reply.body).map_err(bad)?),
        };
        if changed {
            match self {
                Self::Topics => metadata.topics.persist()?,
                Self::ConsumerOffsets => metadata.offsets.persist()?,
                Self::DelayOffsets => metadata.delays.persist()?,
                Self::SubscriptionGroups => metadata.groups.persist()?,
            }
        }
        Ok(changed)
    }

    fn reply_name(self) -> &'static str {
        match self {
            Self::Topics => "the master's GET_ALL_TOPIC_CONFIG reply",
            Self::ConsumerOffsets => "the master's GET_ALL_CONSUMER_OFFSET reply",
            Self::DelayOffsets => "the master's GET_ALL_DELAY_OFFSET reply",
            Self::SubscriptionGroups => "the master's GET_ALL_SUBSCRIPTIONGROUP_CONFIG reply",
        }
    }
}

#[cfg(test)]
mod tests {
    use logship_remoting::body::JsonBody;
    use logship_remoting::{RemotingCommand, ResponseCode};

    use super::*;
    use crate::BrokerSettings;
    use crate::serve::testing::{broker, call};
    use crate::settings::RocketmqLine;

    fn settings(line: RocketmqLine) -> BrokerSettings {
        BrokerSettings { line, ..BrokerSettings::default() }
    }

    #[test]
    fn the_master_answers_every_committed_offset_as_java_s_wrapper() {
        for line in [RocketmqLine::V4_9, RocketmqLine::V5] {
            let d = tempfile::tempdir().unwrap();
            let (ctx, _) = broker(d.path(), settings(line));
            ctx.broker.metadata.offsets.commit_offset("CG", "TopicA", 3, 42, 1);
            let r = call(&ctx, SyncTable::ConsumerOffsets.request());
            assert_eq!((r.code, r.remark.as_deref()), (0, None));
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(v["offsetTable"]["TopicA@CG"]["3"], 42, "{v}");
            assert_eq!(v.get("dataVersion").is_some(), line == RocketmqLine::V5, "{line:?}: {v}");
        }
    }

    #[test]
    fn the_master_answers_delay_offsets_by_level() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), settings(RocketmqLine::V4_9));
        ctx.broker.metadata.delays.update_offset(3, 17, 1);
        let r = call(&ctx, SyncTable::DelayOffsets.request());
        assert_eq!(r.code, 0);
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(v["offsetTable"]["3"], 17, "{v}");
    }

    #[test]
    fn the_master_answers_every_subscription_group_with_its_version() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), settings(RocketmqLine::V5));
        let r = call(&ctx, SyncTable::SubscriptionGroups.request());
        assert_eq!(r.code, 0);
        let w = SubscriptionGroupWrapper::decode(&r.body).unwrap();
        assert_eq!(w.data_version, ctx.broker.metadata.groups.data_version());
        assert_eq!(w.subscription_group_table, ctx.broker.metadata.groups.table());
        assert!(w.forbidden_table.is_some(), "5.x sends forbiddenTable");
    }

    /// Java 4.9's `ConsumerOffsetManager.encode()` writes queue ids as bare numbers.
    const JAVA_OFFSETS: &[u8] = br#"{"offsetTable":{"TopicA@CG":{0:10,1:20},"%RETRY%CG@CG":{0:0}}}"#;

    #[test]
    fn a_slave_takes_the_master_s_offsets_and_writes_consumer_offset_json() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), settings(RocketmqLine::V4_9));
        let md = &ctx.broker.metadata;
        md.offsets.commit_offset("Other", "TopicB", 0, 5, 1);
        let reply =
            RemotingCommand::response_to(&SyncTable::ConsumerOffsets.request(), ResponseCode::SUCCESS)
                .with_body(JAVA_OFFSETS);
        assert!(SyncTable::ConsumerOffsets.apply(md, &reply).unwrap());
        assert_eq!(md.offsets.query_offset("CG", "TopicA", 1), 20);
        assert_eq!(md.offsets.query_offset("Other", "TopicB", 0), 5, "putAll keeps the slave's own keys");
        let file = std::fs::read_to_string(md.offsets.path()).unwrap();
        let v = logship_remoting::body::ConsumerOffsetSerializeWrapper::decode(file.as_bytes()).unwrap();
        assert_eq!(v.offset_table["TopicA@CG"][&0], 10, "{file}");
        assert!(!SyncTable::ConsumerOffsets.apply(md, &reply).unwrap(), "the same offsets change nothing");
    }

    #[test]
    fn a_slave_takes_the_master_s_topics_groups_and_delays_from_a_logship_master() {
        let m = tempfile::tempdir().unwrap();
        let s = tempfile::tempdir().unwrap();
        let (master, _) = broker(m.path(), settings(RocketmqLine::V5));
        let (slave, _) = broker(s.path(), settings(RocketmqLine::V5));
        master.broker.metadata.delays.update_offset(2, 9, 1);
        master.broker.metadata.offsets.commit_offset("CG", "T", 0, 7, 1);
        let mut topic = master.broker.metadata.topics.select("TBW102").unwrap();
        topic.topic_name = "OnlyOnMaster".into();
        master.broker.metadata.topics.create_if_absent(topic, 2).unwrap();
        for table in SyncTable::ALL {
            let reply = call(&master, table.request());
            table.apply(&slave.broker.metadata, &reply).unwrap();
        }
        let sm = &slave.broker.metadata;
        assert!(sm.topics.contains("OnlyOnMaster"));
        assert_eq!(sm.topics.data_version(), master.broker.metadata.topics.data_version());
        assert_eq!(sm.offsets.query_offset("CG", "T", 0), 7);
        assert_eq!(sm.delays.offset(2), Some(9));
        assert_eq!(sm.groups.table(), master.broker.metadata.groups.table());
        for path in [sm.topics.path(), sm.offsets.path(), sm.delays.path()] {
            assert!(path.exists(), "{} written", path.display());
        }
    }

    #[test]
    fn a_refusal_or_garbage_from_the_master_leaves_the_slave_s_table_as_it_was() {
        let d = tempfile::tempdir().unwrap();
        let (ctx, _) = broker(d.path(), settings(RocketmqLine::V4_9));
        let md = &ctx.broker.metadata;
        md.offsets.commit_offset("CG", "TopicA", 0, 99, 1);
        let request = SyncTable::ConsumerOffsets.request();
        let refused = RemotingCommand::response_to(&request, ResponseCode::SYSTEM_ERROR)
            .with_remark("No consumer offset in this broker");
        let e = SyncTable::ConsumerOffsets.apply(md, &refused).unwrap_err().to_string();
        assert!(e.contains("GET_ALL_CONSUMER_OFFSET") && e.contains("No consumer offset"), "{e}");
        for body in [&b"not json"[..], br#"{"offsetTable":[1,2]}"#, br#"{"offsetTable":{"T@CG":{"x":1}}}"#] {
            let garbage = RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_body(body);
            assert!(
                SyncTable::ConsumerOffsets.apply(md, &garbage).is_err(),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert_eq!(md.offsets.query_offset("CG", "TopicA", 0), 99);
        let topics = md.topics.serialize_wrapper();
        let garbage = RemotingCommand::response_to(&request, ResponseCode::SUCCESS)
            .with_body(&b"{\"topicConfigTable\":7}"[..]);
        assert!(SyncTable::Topics.apply(md, &garbage).is_err());
        assert_eq!(md.topics.serialize_wrapper(), topics);
    }
}
