//! Topic configs: `config/topics.json` (`TopicConfigManager`, `TopicConfig`,
//! `TopicConfigSerializeWrapper`).

use std::collections::BTreeMap;
use std::path::Path;

use logship_remoting::body::DataVersion;
use serde_json::Value;

use crate::error::BrokerError;
use crate::file::{ConfigFile, TOPICS_FILE};
use crate::managed::{Managed, from_value, to_value};
use crate::names::{self, perm};
use crate::settings::{BrokerSettings, RocketmqLine};

/// Queues of `SCHEDULE_TOPIC_XXXX`: one per default delay level.
pub const SCHEDULE_TOPIC_QUEUE_NUM: i32 = 18;

pub use logship_remoting::body::{
    DEFAULT_QUEUE_NUMS, TopicConfig, TopicConfigSerializeWrapper, TopicFilterType,
};

fn default_perm() -> i32 {
    perm::READ | perm::WRITE
}

/// Reads a topic table (a file's parsed content); `now_ms` stamps a missing data version.
pub(crate) fn wrapper_from_json(v: &Value, now_ms: i64) -> Result<TopicConfigSerializeWrapper, BrokerError> {
    let mut v = v.clone();
    let Some(obj) = v.as_object_mut() else {
        return Err(BrokerError::BadContent { what: "topic configs", reason: "not a JSON object".into() });
    };
    if obj.get("dataVersion").is_none_or(Value::is_null) {
        obj.insert("dataVersion".into(), to_value(&DataVersion::new(now_ms)));
    }
    from_value("topic configs", v)
}

/// What a create call found or made.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum TopicCreation {
    /// The topic existed; its config.
    Existing(TopicConfig),
    /// The topic was created with this config (persist, then register with the NameServer).
    Created(TopicConfig),
    /// The topic is unknown and may not be created: the default topic is missing or does not
    /// let topics inherit (Java returns null: `TOPIC_NOT_EXIST`).
    Refused {
        /// Why, for the log and the remark.
        reason: String,
    },
}

impl TopicCreation {
    /// The config, existing or created.
    pub fn config(&self) -> Option<&TopicConfig> {
        match self {
            Self::Existing(c) | Self::Created(c) => Some(c),
            Self::Refused { .. } => None,
        }
    }
}

#[derive(Debug)]
struct Topics {
    table: BTreeMap<String, TopicConfig>,
    data_version: DataVersion,
}

/// The broker's topic configs, persisted in `config/topics.json` (`TopicConfigManager`).
///
/// Mutations change memory and mark the table dirty; Java persists after each change, so
/// callers call [`persist`](Self::persist) (or [`persist_if_dirty`](Self::persist_if_dirty))
/// after one. Every method takes `&self`; the table has its own lock.
#[derive(Debug)]
pub struct TopicConfigManager {
    settings: BrokerSettings,
    inner: Managed<Topics>,
}

/// The topics a broker creates at start (`TopicConfigManager.init`), for `settings`.
pub fn default_topics(settings: &BrokerSettings) -> Vec<TopicConfig> {
    let mut out = Vec::new();
    let one = |name: &str| TopicConfig::with_queues(name, 1, 1, default_perm());
    out.push(one(names::SELF_TEST_TOPIC));
    if settings.auto_create_topic_enable {
        let n = settings.default_topic_queue_nums;
        out.push(TopicConfig::with_queues(
            names::AUTO_CREATE_TOPIC_KEY_TOPIC,
            n,
            n,
            perm::INHERIT | perm::READ | perm::WRITE,
        ));
    }
    out.push(TopicConfig::with_queues(names::BENCHMARK_TOPIC, 1024, 1024, default_perm()));
    let rw = |on: bool| if on { perm::INHERIT | perm::READ | perm::WRITE } else { perm::INHERIT };
    let cluster = &settings.broker_cluster_name;
    out.push(TopicConfig { perm: rw(settings.cluster_topic_enable), ..TopicConfig::new(cluster.clone()) });
    out.push(TopicConfig::with_queues(settings.broker_name.clone(), 1, 1, rw(settings.broker_topic_enable)));
    out.push(one(names::OFFSET_MOVED_EVENT));
    out.push(TopicConfig::with_queues(
        names::SCHEDULE_TOPIC,
        SCHEDULE_TOPIC_QUEUE_NUM,
        SCHEDULE_TOPIC_QUEUE_NUM,
        default_perm(),
    ));
    if settings.trace_topic_enable {
        out.push(one(&settings.msg_trace_topic_name));
    }
    out.push(one(&format!("{cluster}_{}", names::REPLY_TOPIC_POSTFIX)));
    if settings.line == RocketmqLine::V5 {
        let n = settings.revive_queue_num;
        out.push(TopicConfig::with_queues(
            format!("{}{cluster}", names::REVIVE_TOPIC_PREFIX),
            n,
            n,
            default_perm(),
        ));
        out.push(TopicConfig::with_queues(
            format!("{}{}", names::SYNC_BROKER_MEMBER_GROUP_PREFIX, settings.broker_name),
            1,
            1,
            perm::INHERIT,
        ));
        out.push(one(names::TRANS_HALF_TOPIC));
        out.push(one(names::TRANS_OP_HALF_TOPIC));
        out.push(one(names::ROCKSDB_TRANS_HALF_TOPIC));
        out.push(one(names::ROCKSDB_TRANS_OP_HALF_TOPIC));
        if settings.timer_wheel_enable {
            out.push(one(names::TIMER_TOPIC));
        }
    }
    out
}

fn encode_topics(s: &Topics) -> Value {
    to_value(&TopicConfigSerializeWrapper::new(s.table.clone(), s.data_version))
}

/// The attributes RocketMQ 5 knows (`TopicAttributes.ALL`): name, whether it may change after
/// creation, and the values allowed.
const TOPIC_ATTRIBUTES: [(&str, bool, &[&str]); 3] = [
    ("queue.type", false, &["BatchCQ", "SimpleCQ"]),
    ("cleanup.policy", false, &["DELETE", "COMPACTION"]),
    ("message.type", true, &["UNSPECIFIED", "NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"]),
];

/// `AttributeUtil.alterCurrentAttributes` for topics: `requested` keys are `+name` (set) or
/// `-name` (delete); on creation only `+`. Unknown names, bad values, changing an unchangeable
/// attribute and deleting a missing one are refused.
pub fn alter_attributes(
    create: bool,
    current: &BTreeMap<String, String>,
    requested: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, BrokerError> {
    let bad = |reason: String| Err(BrokerError::BadContent { what: "topic attributes", reason });
    let mut out = current.clone();
    for (key, value) in requested {
        let Some((op @ ("+" | "-"), name)) = key.split_at_checked(1) else {
            return bad(format!("wrong format key: {key}"));
        };
        if name.is_empty() || name.contains(['+', '-']) {
            return bad("kv string format wrong.".into());
        }
        if name == "reserve.time" {
            return bad("Update topic reserveTime not supported".into());
        }
        let Some((_, changeable, values)) = TOPIC_ATTRIBUTES.iter().find(|(n, _, _)| *n == name) else {
            return bad(format!("unsupported key: {name}"));
        };
        if create && op == "-" {
            return bad(format!("only add attribute is supported while creating topic. key: {name}"));
        }
        if !create && !changeable {
            return bad(format!("attempt to update an unchangeable attribute. key: {name}"));
        }
        if op == "+" {
            if !values.contains(&value.as_str()) {
                return bad(format!("value is not in set: {values:?}"));
            }
            out.insert(name.to_string(), value.clone());
        } else if out.remove(name).is_none() {
            return bad(format!("attempt to delete a nonexistent key: {name}"));
        }
    }
    Ok(out)
}

impl TopicConfigManager {
    /// Opens the topic configs of the store at `root`: the defaults for `settings`
    /// ([`default_topics`]), then what `config/topics.json` (or its `.bak`) holds over them, as
    /// Java's `init` then `load` do (so a deleted default topic comes back at each start, as
    /// in Java). `now_ms` stamps the data version of a new table.
    pub fn open(root: &Path, settings: BrokerSettings, now_ms: i64) -> Result<Self, BrokerError> {
        let file = ConfigFile::in_store(root, TOPICS_FILE, "topic configs");
        let loaded = file.load(|v| wrapper_from_json(v, now_ms))?;
        let mut table: BTreeMap<String, TopicConfig> =
            default_topics(&settings).into_iter().map(|c| (c.topic_name.clone(), c)).collect();
        let data_version = match loaded {
            Some(w) => {
                table.extend(w.topic_config_table);
                w.data_version
            }
            None => DataVersion::new(now_ms),
        };
        tracing::info!(path = %file.path().display(), topics = table.len(), "topic configs loaded");
        Ok(Self { settings, inner: Managed::new(file, Topics { table, data_version }, false) })
    }

    /// The settings it runs with.
    pub fn settings(&self) -> &BrokerSettings {
        &self.settings
    }

    /// The file it persists to.
    pub fn path(&self) -> &Path {
        self.inner.file.path()
    }

    /// A topic's config (`selectTopicConfig`).
    pub fn select(&self, topic: &str) -> Option<TopicConfig> {
        self.inner.read(|s| s.table.get(topic).cloned())
    }

    /// Whether the topic exists.
    pub fn contains(&self, topic: &str) -> bool {
        self.inner.read(|s| s.table.contains_key(topic))
    }

    /// Whether `topic` is a system topic (`TopicValidator.isSystemTopic`): RocketMQ's reserved
    /// names and `rmq_sys_*`, and the topics this broker creates at start (its cluster and
    /// broker names among them, which Java adds to its system set at `init`).
    pub fn is_system_topic(&self, topic: &str) -> bool {
        names::is_system_topic(topic) || default_topics(&self.settings).iter().any(|t| t.topic_name == topic)
    }

    /// Whether the topic exists and is ordered (`isOrderTopic`).
    pub fn is_order_topic(&self, topic: &str) -> bool {
        self.inner.read(|s| s.table.get(topic).is_some_and(|c| c.order))
    }

    /// Every topic, by name.
    pub fn table(&self) -> BTreeMap<String, TopicConfig> {
        self.inner.read(|s| s.table.clone())
    }

    /// The table's data version.
    pub fn data_version(&self) -> DataVersion {
        self.inner.read(|s| s.data_version)
    }

    /// The table and its version, as `GET_ALL_TOPIC_CONFIG` and `REGISTER_BROKER` send it
    /// (`buildTopicConfigSerializeWrapper`).
    pub fn serialize_wrapper(&self) -> TopicConfigSerializeWrapper {
        self.inner.read(|s| TopicConfigSerializeWrapper::new(s.table.clone(), s.data_version))
    }

    /// `createTopicInSendMessageMethod`: a send to an unknown `topic` creates it from
    /// `default_topic` (normally `TBW102`) if that topic exists and lets topics inherit: as many
    /// queues as `min(client_default_topic_queue_nums, default's writeQueueNums)` (at least 0),
    /// the default's perm without the inherit bit, `topic_sys_flag`, the default's filter type.
    ///
    /// Without `autoCreateTopicEnable`, `TBW102` (if a file still holds it) loses its inherit bit
    /// first, as in Java, so nothing is created from it. The name is validated
    /// ([`names::validate_topic`]); Java's send path validates it before.
    pub fn create_in_send_message(
        &self,
        topic: &str,
        default_topic: &str,
        client_default_topic_queue_nums: i32,
        topic_sys_flag: i32,
        now_ms: i64,
    ) -> Result<TopicCreation, BrokerError> {
        let auto_create = self.settings.auto_create_topic_enable;
        if let Some(c) = self.select(topic) {
            return Ok(TopicCreation::Existing(c));
        }
        names::validate_topic(topic)?;
        Ok(self.inner.update(|s| {
            if let Some(c) = s.table.get(topic) {
                return (TopicCreation::Existing(c.clone()), false);
            }
            let mut changed = false;
            let Some(default) = s.table.get_mut(default_topic) else {
                let reason = format!("the default topic {default_topic} does not exist");
                return (TopicCreation::Refused { reason }, false);
            };
            if default_topic == names::AUTO_CREATE_TOPIC_KEY_TOPIC && !auto_create {
                let p = perm::READ | perm::WRITE;
                changed = default.perm != p;
                default.perm = p;
            }
            if !perm::is_inherited(default.perm) {
                let reason =
                    format!("the default topic {default_topic} has no inherit permission ({})", default.perm);
                return (TopicCreation::Refused { reason }, changed);
            }
            let queues = client_default_topic_queue_nums.min(default.write_queue_nums).max(0);
            let config = TopicConfig {
                read_queue_nums: queues,
                write_queue_nums: queues,
                perm: default.perm & !perm::INHERIT,
                topic_sys_flag,
                topic_filter_type: default.topic_filter_type,
                ..TopicConfig::new(topic)
            };
            tracing::info!(topic, default_topic, queues, "topic created by a send");
            s.table.insert(topic.to_string(), config.clone());
            s.data_version.next_version(now_ms, 0);
            (TopicCreation::Created(config), true)
        }))
    }

    /// `createTopicInSendMessageBackMethod`: the retry or dead-letter topic of a consumer group,
    /// created with `client_default_topic_queue_nums` queues, `perm` and `topic_sys_flag` if
    /// missing. With `is_order` (5.x), an existing topic whose order flag differs gets it
    /// changed (and its version bumped), as 5.x does; `None` leaves it (4.9).
    pub fn create_in_send_message_back(
        &self,
        topic: &str,
        client_default_topic_queue_nums: i32,
        perm: i32,
        is_order: Option<bool>,
        topic_sys_flag: i32,
        now_ms: i64,
    ) -> Result<TopicCreation, BrokerError> {
        names::validate_topic(topic)?;
        Ok(self.inner.update(|s| {
            if let Some(c) = s.table.get_mut(topic) {
                if let Some(order) = is_order.filter(|&o| o != c.order) {
                    c.order = order;
                    let c = c.clone();
                    s.data_version.next_version(now_ms, 0);
                    return (TopicCreation::Existing(c), true);
                }
                return (TopicCreation::Existing(c.clone()), false);
            }
            let config = TopicConfig {
                read_queue_nums: client_default_topic_queue_nums,
                write_queue_nums: client_default_topic_queue_nums,
                perm,
                topic_sys_flag,
                order: is_order.unwrap_or(false),
                ..TopicConfig::new(topic)
            };
            tracing::info!(topic, "retry or dead-letter topic created");
            s.table.insert(topic.to_string(), config.clone());
            s.data_version.next_version(now_ms, 0);
            (TopicCreation::Created(config), true)
        }))
    }

    /// `createTopicIfAbsent`: adds `config` unless its topic exists; returns the topic's config.
    pub fn create_if_absent(&self, config: TopicConfig, now_ms: i64) -> Result<TopicCreation, BrokerError> {
        names::validate_topic(&config.topic_name)?;
        Ok(self.inner.update(|s| {
            if let Some(c) = s.table.get(&config.topic_name) {
                return (TopicCreation::Existing(c.clone()), false);
            }
            s.table.insert(config.topic_name.clone(), config.clone());
            s.data_version.next_version(now_ms, 0);
            (TopicCreation::Created(config), true)
        }))
    }

    /// `updateTopicConfig` (UPDATE_AND_CREATE_TOPIC): puts `config`, its attributes altered
    /// from the current ones by [`alter_attributes`] (keys `+name` / `-name`); returns the
    /// previous config.
    pub fn update_topic_config(
        &self,
        mut config: TopicConfig,
        now_ms: i64,
    ) -> Result<Option<TopicConfig>, BrokerError> {
        names::validate_topic(&config.topic_name)?;
        self.inner.update(|s| {
            let current = s.table.get(&config.topic_name);
            let empty = BTreeMap::new();
            match alter_attributes(
                current.is_none(),
                current.map_or(&empty, |c| &c.attributes),
                &config.attributes,
            ) {
                Ok(attributes) => config.attributes = attributes,
                Err(e) => return (Err(e), false),
            }
            let old = s.table.insert(config.topic_name.clone(), config);
            s.data_version.next_version(now_ms, 0);
            (Ok(old), true)
        })
    }

    /// `deleteTopicConfig`: removes the topic; returns its config if it existed.
    pub fn delete_topic_config(&self, topic: &str, now_ms: i64) -> Option<TopicConfig> {
        self.inner.update(|s| match s.table.remove(topic) {
            Some(old) => {
                s.data_version.next_version(now_ms, 0);
                (Some(old), true)
            }
            None => (None, false),
        })
    }

    /// The slave side of `SlaveSynchronize.syncTopicConfig`: if the master's data version
    /// differs from this table's, the table becomes the master's (topics the master lacks are
    /// removed) and takes its version. Returns whether anything changed; persist after.
    ///
    /// This is 4.9's clear-and-put. 5.x deletes and re-adds each topic through its attribute
    /// checks, which throws on a master's topic with attributes (their keys carry no `+`) and
    /// leaves the slave's table part-deleted; logship takes the master's attributes as they are.
    pub fn replace_from_master(&self, master: &TopicConfigSerializeWrapper) -> bool {
        self.inner.update(|s| {
            if s.data_version == master.data_version {
                return (false, false);
            }
            s.data_version = master.data_version;
            s.table = master.topic_config_table.clone();
            (true, true)
        })
    }

    /// Whether changes wait to be persisted.
    pub fn is_dirty(&self) -> bool {
        self.inner.is_dirty()
    }

    /// Writes `topics.json` (see [`ConfigFile::write`]).
    pub fn persist(&self) -> Result<(), BrokerError> {
        self.inner.persist(encode_topics)
    }

    /// Writes `topics.json` if anything changed since the last write; returns whether it wrote.
    pub fn persist_if_dirty(&self) -> Result<bool, BrokerError> {
        self.inner.persist_if_dirty(encode_topics)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> BrokerSettings {
        BrokerSettings {
            broker_cluster_name: "LogshipCluster".into(),
            broker_name: "broker-a".into(),
            ..BrokerSettings::default()
        }
    }

    #[test]
    fn default_topics_carry_javas_queue_counts_and_perms() {
        let d = tempfile::tempdir().unwrap();
        let m = TopicConfigManager::open(d.path(), settings(), 1).unwrap();
        let t = |n: &str| m.select(n).unwrap();
        assert_eq!((t("TBW102").read_queue_nums, t("TBW102").perm), (8, 7));
        assert_eq!((t("LogshipCluster").read_queue_nums, t("LogshipCluster").perm), (16, 7));
        assert_eq!((t("broker-a").read_queue_nums, t("broker-a").perm), (1, 7));
        assert_eq!(t("SCHEDULE_TOPIC_XXXX").write_queue_nums, 18);
        assert_eq!(t("BenchmarkTest").write_queue_nums, 1024);
        assert_eq!(t("rmq_sys_SYNC_BROKER_MEMBER_broker-a").perm, 1);
        assert_eq!(t("rmq_sys_REVIVE_LOG_LogshipCluster").read_queue_nums, 8);
        assert!(!m.contains("RMQ_SYS_TRACE_TOPIC"));
        let v4 = TopicConfigManager::open(
            tempfile::tempdir().unwrap().path(),
            BrokerSettings { line: RocketmqLine::V4_9, auto_create_topic_enable: false, ..settings() },
            1,
        )
        .unwrap();
        assert!(
            !v4.contains("TBW102")
                && !v4.contains("rmq_sys_wheel_timer")
                && !v4.contains("RMQ_SYS_TRANS_HALF_TOPIC")
        );
        assert!(v4.contains("LogshipCluster_REPLY_TOPIC"));
        assert!(
            m.is_system_topic("LogshipCluster")
                && m.is_system_topic("broker-a")
                && m.is_system_topic("TBW102")
        );
        assert!(m.is_system_topic("rmq_sys_anything") && !m.is_system_topic("TopicA"));
    }

    #[test]
    fn a_send_creates_a_topic_from_tbw102_with_at_most_its_queues_and_without_inherit() {
        let d = tempfile::tempdir().unwrap();
        let m = TopicConfigManager::open(d.path(), settings(), 1).unwrap();
        let before = m.data_version();
        let TopicCreation::Created(a) = m.create_in_send_message("TopicA", "TBW102", 4, 0, 5).unwrap() else {
            panic!()
        };
        assert_eq!((a.read_queue_nums, a.write_queue_nums, a.perm), (4, 4, 6));
        let TopicCreation::Created(big) = m.create_in_send_message("TopicBig", "TBW102", 16, 0, 6).unwrap()
        else {
            panic!()
        };
        assert_eq!(big.write_queue_nums, 8);
        assert_eq!(m.data_version().counter, before.counter + 2);
        assert_eq!(m.data_version().timestamp, 6);
        assert!(matches!(
            m.create_in_send_message("TopicA", "TBW102", 4, 0, 7).unwrap(),
            TopicCreation::Existing(_)
        ));
        assert!(matches!(
            m.create_in_send_message("TopicB", "Nope", 4, 0, 7).unwrap(),
            TopicCreation::Refused { .. }
        ));
        assert!(matches!(
            m.create_in_send_message("a b", "TBW102", 4, 0, 7),
            Err(BrokerError::InvalidTopic { .. })
        ));
        let TopicCreation::Created(zero) = m.create_in_send_message("TopicZ", "TBW102", -3, 0, 8).unwrap()
        else {
            panic!()
        };
        assert_eq!(zero.write_queue_nums, 0, "Java clamps at 0 and still creates");
    }

    #[test]
    fn without_auto_create_a_kept_tbw102_loses_inherit_and_creates_nothing() {
        let d = tempfile::tempdir().unwrap();
        let m = TopicConfigManager::open(d.path(), settings(), 1).unwrap();
        m.persist().unwrap();
        let off = BrokerSettings { auto_create_topic_enable: false, ..settings() };
        let m = TopicConfigManager::open(d.path(), off, 2).unwrap();
        assert_eq!(m.select("TBW102").unwrap().perm, 7, "the file still holds it");
        assert!(matches!(
            m.create_in_send_message("TopicA", "TBW102", 4, 0, 3).unwrap(),
            TopicCreation::Refused { .. }
        ));
        assert_eq!(m.select("TBW102").unwrap().perm, 6);
        assert!(!m.contains("TopicA"));
    }

    #[test]
    fn retry_topics_are_created_once_and_order_follows_in_5x() {
        let d = tempfile::tempdir().unwrap();
        let m = TopicConfigManager::open(d.path(), settings(), 1).unwrap();
        let rw = perm::READ | perm::WRITE;
        let c = m.create_in_send_message_back("%RETRY%g", 1, rw, Some(false), 0, 2).unwrap();
        assert!(matches!(c, TopicCreation::Created(ref t) if t.write_queue_nums == 1 && t.perm == 6));
        let v = m.data_version();
        assert!(matches!(
            m.create_in_send_message_back("%RETRY%g", 1, rw, None, 0, 3).unwrap(),
            TopicCreation::Existing(_)
        ));
        assert_eq!(m.data_version(), v);
        m.create_in_send_message_back("%RETRY%g", 1, rw, Some(true), 0, 4).unwrap();
        assert!(m.is_order_topic("%RETRY%g"));
        assert_eq!(m.data_version().counter, v.counter + 1);
    }

    #[test]
    fn deleted_default_topics_come_back_at_the_next_open_as_in_java() {
        let d = tempfile::tempdir().unwrap();
        let m = TopicConfigManager::open(d.path(), settings(), 1).unwrap();
        m.create_in_send_message("TopicA", "TBW102", 4, 0, 2).unwrap();
        assert!(m.delete_topic_config("SELF_TEST_TOPIC", 3).is_some());
        assert!(m.delete_topic_config("Missing", 4).is_none());
        m.persist().unwrap();
        let again = TopicConfigManager::open(d.path(), settings(), 9).unwrap();
        assert!(again.contains("SELF_TEST_TOPIC") && again.contains("TopicA"));
        assert_eq!(again.data_version(), m.data_version());
    }

    #[test]
    fn attributes_are_altered_as_rocketmq_5_alters_them() {
        let d = tempfile::tempdir().unwrap();
        let m = TopicConfigManager::open(d.path(), settings(), 1).unwrap();
        let mut c = TopicConfig::with_queues("OrderTopic", 2, 2, 6);
        c.attributes.insert("+message.type".into(), "FIFO".into());
        assert!(m.update_topic_config(c.clone(), 2).unwrap().is_none());
        assert_eq!(
            m.select("OrderTopic").unwrap().attributes.get("message.type").map(String::as_str),
            Some("FIFO")
        );
        let mut bad = c.clone();
        bad.attributes = [("+queue.type".to_string(), "BatchCQ".to_string())].into();
        assert!(m.update_topic_config(bad, 3).is_err(), "queue.type cannot change after creation");
        let mut del = c.clone();
        del.attributes = [("-message.type".to_string(), String::new())].into();
        m.update_topic_config(del, 4).unwrap();
        assert!(m.select("OrderTopic").unwrap().attributes.is_empty());
        let mut unknown = TopicConfig::new("T2");
        unknown.attributes = [("+nope".to_string(), "1".to_string())].into();
        assert!(m.update_topic_config(unknown, 5).is_err());
        let mut bare = TopicConfig::new("T3");
        bare.attributes = [("message.type".to_string(), "FIFO".to_string())].into();
        assert!(m.update_topic_config(bare, 6).is_err());
    }

    #[test]
    fn a_slave_takes_the_masters_table_only_when_its_version_differs() {
        let d = tempfile::tempdir().unwrap();
        let m = TopicConfigManager::open(d.path(), settings(), 1).unwrap();
        m.create_in_send_message("SlaveOnly", "TBW102", 4, 0, 2).unwrap();
        let mut master = BTreeMap::new();
        master.insert("TopicA".to_string(), TopicConfig::with_queues("TopicA", 4, 4, 6));
        let w = TopicConfigSerializeWrapper::new(
            master,
            DataVersion { timestamp: 77, counter: 9, state_version: 0 },
        );
        assert!(m.replace_from_master(&w));
        assert_eq!(m.table().keys().collect::<Vec<_>>(), vec!["TopicA"]);
        assert_eq!(m.data_version(), w.data_version);
        assert!(!m.replace_from_master(&w));
    }

    #[test]
    fn decodes_a_wrapper_with_unknown_members_and_keeps_them() {
        let text = r#"{"dataVersion":{"counter":2,"timestamp":5},"topicConfigTable":{"T":{"perm":6,"readQueueNums":2,"writeQueueNums":2,"topicFilterType":"MULTI_TAG","future":[1]}},"mappingDataVersion":{"counter":0}}"#;
        let w =
            wrapper_from_json(&logship_remoting::body::fastjson::parse(text.as_bytes()).unwrap(), 0).unwrap();
        let t = &w.topic_config_table["T"];
        assert_eq!(
            (t.topic_name.as_str(), t.topic_filter_type, t.extra["future"].clone()),
            ("T", TopicFilterType::MultiTag, serde_json::json!([1]))
        );
        assert!(w.extra.contains_key("mappingDataVersion"));
        let bad =
            logship_remoting::body::fastjson::parse(br#"{"topicConfigTable":{"T":{"perm":"x"}}}"#).unwrap();
        assert!(wrapper_from_json(&bad, 0).is_err());
    }
}
