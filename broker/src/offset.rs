//! Consumer offsets: `config/consumerOffset.json` (`ConsumerOffsetManager`,
//! `ConsumerOffsetSerializeWrapper`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use logship_remoting::body::DataVersion;
use serde_json::{Map, Value};

use crate::error::BrokerError;
use crate::file::{CONSUMER_OFFSET_FILE, ConfigFile};
use crate::managed::{Managed, from_value, to_value};
use crate::names::TOPIC_GROUP_SEPARATOR;
use crate::settings::{BrokerSettings, RocketmqLine};

pub use logship_remoting::body::OffsetTable;

/// The key of `(topic, group)` in the offset table: `topic@group`.
pub fn offset_key(topic: &str, group: &str) -> String {
    format!("{topic}{TOPIC_GROUP_SEPARATOR}{group}")
}

/// `(topic, group)` of a key, if it splits into exactly two parts on `@` (as Java's
/// `split("@")` with `length == 2`).
pub fn split_offset_key(key: &str) -> Option<(&str, &str)> {
    let mut parts = key.split(TOPIC_GROUP_SEPARATOR);
    match (parts.next(), parts.next(), parts.next()) {
        (Some(t), Some(g), None) if !t.is_empty() => Some((t, g)),
        _ => None,
    }
}

pub use logship_remoting::body::ConsumerOffsetSerializeWrapper;

/// Reads an offset table (a file's parsed content).
pub(crate) fn wrapper_from_json(v: &Value) -> Result<ConsumerOffsetSerializeWrapper, BrokerError> {
    if !v.is_object() {
        return Err(BrokerError::BadContent { what: "consumer offsets", reason: "not a JSON object".into() });
    }
    from_value("consumer offsets", v.clone())
}

#[derive(Debug)]
struct Offsets {
    table: OffsetTable,
    data_version: DataVersion,
    /// Commits since the data version last moved (`versionChangeCounter`).
    commits: u64,
}

/// The broker's consumer offsets, persisted in `config/consumerOffset.json`
/// (`ConsumerOffsetManager`).
///
/// Java flushes them every `flushConsumerOffsetInterval` (5 s): the broker's timer calls
/// [`persist_if_dirty`](Self::persist_if_dirty). Every method takes `&self`.
#[derive(Debug)]
pub struct ConsumerOffsetManager {
    settings: BrokerSettings,
    inner: Managed<Offsets>,
}

fn encode_offsets(line: RocketmqLine) -> impl FnOnce(&Offsets) -> Value {
    move |s| {
        let mut v = to_value(&ConsumerOffsetSerializeWrapper {
            offset_table: s.table.clone(),
            data_version: (line == RocketmqLine::V5).then_some(s.data_version),
            ..Default::default()
        });
        if line == RocketmqLine::V5 {
            // 5.x writes its getters too: the group → topics map, and the (unpersisted, so
            // always empty on disk after a restart) pull offsets. Java ignores both on load.
            if let Some(obj) = v.as_object_mut() {
                obj.insert("groupTopicMap".into(), to_value(&group_topic_map(&s.table)));
                obj.insert("pullOffsetTable".into(), Value::Object(Map::new()));
            }
        }
        v
    }
}

fn group_topic_map(table: &OffsetTable) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for key in table.keys() {
        if let Some((topic, group)) = split_offset_key(key) {
            out.entry(group.to_string()).or_default().insert(topic.to_string());
        }
    }
    out
}

impl ConsumerOffsetManager {
    /// Opens the offsets of the store at `root` from `config/consumerOffset.json` (or its
    /// `.bak`). `now_ms` stamps the data version when the file has none (4.9, or a new store).
    pub fn open(root: &Path, settings: BrokerSettings, now_ms: i64) -> Result<Self, BrokerError> {
        let file = ConfigFile::in_store(root, CONSUMER_OFFSET_FILE, "consumer offsets");
        let loaded = file.load(wrapper_from_json)?;
        let (table, data_version) = match loaded {
            Some(w) => (w.offset_table, w.data_version.unwrap_or_else(|| DataVersion::new(now_ms))),
            None => (OffsetTable::new(), DataVersion::new(now_ms)),
        };
        tracing::info!(path = %file.path().display(), keys = table.len(), "consumer offsets loaded");
        Ok(Self { settings, inner: Managed::new(file, Offsets { table, data_version, commits: 0 }, false) })
    }

    /// The file it persists to.
    pub fn path(&self) -> &Path {
        self.inner.file.path()
    }

    /// `commitOffset`: records `offset` as the group's offset in `(topic, queue_id)`. Java takes
    /// any value, lower ones included (it only logs them); so does this. In 5.x the data version
    /// moves every `consumerOffsetUpdateVersionStep` commits.
    pub fn commit_offset(&self, group: &str, topic: &str, queue_id: i32, offset: i64, now_ms: i64) {
        let key = offset_key(topic, group);
        let step = self.settings.consumer_offset_update_version_step.max(1);
        let versioned = self.settings.line == RocketmqLine::V5;
        self.inner.update(|s| {
            let old = s.table.entry(key).or_default().insert(queue_id, offset);
            if old.is_some_and(|old| offset < old) {
                tracing::debug!(group, topic, queue_id, offset, old, "consumer offset moved back");
            }
            s.commits += 1;
            if versioned && s.commits % step == 0 {
                s.data_version.next_version(now_ms, 0);
            }
            ((), true)
        });
    }

    /// `queryOffset`: the group's committed offset in `(topic, queue_id)`, or -1 if none. An
    /// offset below the queue's minimum is returned as it is: Java corrects it at the pull
    /// (`OFFSET_TOO_SMALL`), not here.
    pub fn query_offset(&self, group: &str, topic: &str, queue_id: i32) -> i64 {
        let key = offset_key(topic, group);
        self.inner.read(|s| s.table.get(&key).and_then(|q| q.get(&queue_id)).copied().unwrap_or(-1))
    }

    /// Every committed offset of the group in `topic`.
    pub fn query_offsets(&self, group: &str, topic: &str) -> Option<BTreeMap<i32, i64>> {
        let key = offset_key(topic, group);
        self.inner.read(|s| s.table.get(&key).cloned())
    }

    /// The whole table.
    pub fn table(&self) -> OffsetTable {
        self.inner.read(|s| s.table.clone())
    }

    /// The table's data version.
    pub fn data_version(&self) -> DataVersion {
        self.inner.read(|s| s.data_version)
    }

    /// What `GET_ALL_CONSUMER_OFFSET` returns: the table, and in 5.x its version.
    pub fn serialize_wrapper(&self) -> ConsumerOffsetSerializeWrapper {
        let versioned = self.settings.line == RocketmqLine::V5;
        self.inner.read(|s| ConsumerOffsetSerializeWrapper {
            offset_table: s.table.clone(),
            data_version: versioned.then_some(s.data_version),
            ..Default::default()
        })
    }

    /// The topics the group has offsets in (`whichTopicByConsumer`).
    pub fn topics_of_group(&self, group: &str) -> BTreeSet<String> {
        self.inner.read(|s| {
            s.table
                .keys()
                .filter_map(|k| split_offset_key(k))
                .filter(|(_, g)| *g == group)
                .map(|(t, _)| t.to_string())
                .collect()
        })
    }

    /// The groups with offsets in the topic (`whichGroupByTopic`).
    pub fn groups_of_topic(&self, topic: &str) -> BTreeSet<String> {
        self.inner.read(|s| {
            s.table
                .keys()
                .filter_map(|k| split_offset_key(k))
                .filter(|(t, _)| *t == topic)
                .map(|(_, g)| g.to_string())
                .collect()
        })
    }

    /// `removeOffset` / `cleanOffset`: drops every offset of the group; returns the keys removed.
    pub fn remove_group(&self, group: &str) -> Vec<String> {
        self.remove_where(|_, g| g == group)
    }

    /// `cleanOffsetByTopic`: drops every offset in the topic; returns the keys removed.
    pub fn remove_topic(&self, topic: &str) -> Vec<String> {
        self.remove_where(|t, _| t == topic)
    }

    fn remove_where(&self, f: impl Fn(&str, &str) -> bool) -> Vec<String> {
        self.inner.update(|s| {
            let gone: Vec<String> = s
                .table
                .keys()
                .filter(|k| split_offset_key(k).is_some_and(|(t, g)| f(t, g)))
                .cloned()
                .collect();
            for k in &gone {
                s.table.remove(k);
            }
            let changed = !gone.is_empty();
            (gone, changed)
        })
    }

    /// `cloneOffset`: the destination group gets a copy of the source group's offsets in `topic`.
    pub fn clone_offset(&self, src_group: &str, dest_group: &str, topic: &str) {
        let (src, dest) = (offset_key(topic, src_group), offset_key(topic, dest_group));
        self.inner.update(|s| match s.table.get(&src).cloned() {
            Some(q) => {
                s.table.insert(dest, q);
                ((), true)
            }
            None => ((), false),
        });
    }

    /// The slave side of `SlaveSynchronize.syncConsumerOffset`, as both 4.9 and 5.x do it: each
    /// `topic@group` of the master replaces the slave's (`putAll`), keys only the slave has are
    /// kept, and in 5.x the master's data version is taken. Unlike topics, this runs on every
    /// sync, whatever the versions say. Returns whether anything changed; persist after.
    pub fn replace_from_master(&self, master: &ConsumerOffsetSerializeWrapper) -> bool {
        self.inner.update(|s| {
            let mut changed = false;
            for (k, q) in &master.offset_table {
                if s.table.get(k) != Some(q) {
                    s.table.insert(k.clone(), q.clone());
                    changed = true;
                }
            }
            if let Some(v) = master.data_version {
                changed |= s.data_version != v;
                s.data_version = v;
            }
            (changed, changed)
        })
    }

    /// Whether commits wait to be persisted.
    pub fn is_dirty(&self) -> bool {
        self.inner.is_dirty()
    }

    /// Writes `consumerOffset.json`.
    pub fn persist(&self) -> Result<(), BrokerError> {
        self.inner.persist(encode_offsets(self.settings.line))
    }

    /// Writes `consumerOffset.json` if anything changed since the last write (the 5-second
    /// flush of Java's `flushConsumerOffsetInterval`); returns whether it wrote.
    pub fn persist_if_dirty(&self) -> Result<bool, BrokerError> {
        self.inner.persist_if_dirty(encode_offsets(self.settings.line))
    }
}

/// Where the first message of a queue is, for [`query_consumer_offset`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum FirstMessage {
    /// The queue holds no message at offset 0.
    Absent,
    /// Offset 0's message is in memory (not swapped out: recent enough to read cheaply).
    InMemory,
    /// Offset 0's message is only on disk.
    OnDisk,
}

/// What `QUERY_CONSUMER_OFFSET` answers.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QueryOffsetAnswer {
    /// `SUCCESS` with this offset.
    Offset(i64),
    /// `QUERY_NOT_FOUND` (22).
    NotFound,
}

/// `ConsumerManageProcessor.queryConsumerOffset`: a committed offset (`>= 0`) is the answer. A
/// group without one starts at 0 if the queue's minimum is 0 and its first message is cheap to
/// read; otherwise the client decides (`QUERY_NOT_FOUND`). `set_zero_if_not_found ==
/// Some(false)` (5.x's header field) always means `QUERY_NOT_FOUND`.
///
/// The lines differ on an empty queue: 4.9 asks "is message 0 not on disk?" (true for a queue
/// with no message, so 0), 5.x asks "is message 0 in memory?" (false, so `QUERY_NOT_FOUND`).
pub fn query_consumer_offset(
    line: RocketmqLine,
    committed: i64,
    min_offset: i64,
    first: FirstMessage,
    set_zero_if_not_found: Option<bool>,
) -> QueryOffsetAnswer {
    if committed >= 0 {
        return QueryOffsetAnswer::Offset(committed);
    }
    let zero = match line {
        RocketmqLine::V4_9 => min_offset <= 0 && first != FirstMessage::OnDisk,
        RocketmqLine::V5 => {
            set_zero_if_not_found != Some(false) && min_offset <= 0 && first == FirstMessage::InMemory
        }
    };
    if zero { QueryOffsetAnswer::Offset(0) } else { QueryOffsetAnswer::NotFound }
}

#[cfg(test)]
mod tests {
    use super::*;
    use logship_remoting::body::JsonBody;
    use proptest::prelude::*;

    fn open(d: &Path, line: RocketmqLine) -> ConsumerOffsetManager {
        ConsumerOffsetManager::open(d, BrokerSettings { line, ..BrokerSettings::default() }, 1).unwrap()
    }

    #[test]
    fn an_unknown_offset_is_minus_one_and_a_commit_is_read_back() {
        let d = tempfile::tempdir().unwrap();
        let m = open(d.path(), RocketmqLine::V5);
        assert_eq!(m.query_offset("g", "t", 0), -1);
        m.commit_offset("g", "t", 0, 12, 2);
        m.commit_offset("g", "t", 0, 3, 3);
        assert_eq!(m.query_offset("g", "t", 0), 3, "a lower commit is taken, as in Java");
        assert_eq!(m.query_offset("g", "t", 1), -1);
        assert_eq!(m.query_offset("other", "t", 0), -1);
    }

    #[test]
    fn offsets_survive_a_reopen_in_both_lines() {
        for line in [RocketmqLine::V4_9, RocketmqLine::V5] {
            let d = tempfile::tempdir().unwrap();
            let m = open(d.path(), line);
            m.commit_offset("g", "t", 0, 12, 2);
            m.commit_offset("g", "t", 3, 1_234_567_890_123, 2);
            assert!(m.persist_if_dirty().unwrap());
            assert!(!m.persist_if_dirty().unwrap(), "nothing new");
            let again = open(d.path(), line);
            assert_eq!(again.table(), m.table());
            let text = std::fs::read_to_string(again.path()).unwrap();
            assert_eq!(text.contains("dataVersion"), line == RocketmqLine::V5, "{text}");
        }
    }

    #[test]
    fn the_5x_data_version_moves_every_step_commits() {
        let d = tempfile::tempdir().unwrap();
        let s = BrokerSettings { consumer_offset_update_version_step: 3, ..BrokerSettings::default() };
        let m = ConsumerOffsetManager::open(d.path(), s, 1).unwrap();
        for i in 0..7 {
            m.commit_offset("g", "t", 0, i, 100 + i);
        }
        assert_eq!(m.data_version().counter, 2);
        assert_eq!(m.data_version().timestamp, 105);
    }

    #[test]
    fn removing_a_group_keeps_groups_whose_name_only_contains_it() {
        let d = tempfile::tempdir().unwrap();
        let m = open(d.path(), RocketmqLine::V5);
        m.commit_offset("g", "t", 0, 1, 1);
        m.commit_offset("gg", "t", 0, 1, 1);
        m.commit_offset("g", "%RETRY%g", 0, 1, 1);
        assert_eq!(m.remove_group("g").len(), 2);
        assert_eq!(m.table().keys().collect::<Vec<_>>(), vec!["t@gg"]);
        assert_eq!(m.topics_of_group("gg").into_iter().collect::<Vec<_>>(), vec!["t"]);
    }

    #[test]
    fn a_slave_takes_each_masters_key_and_keeps_its_own() {
        let d = tempfile::tempdir().unwrap();
        let m = open(d.path(), RocketmqLine::V5);
        m.commit_offset("g", "t", 0, 5, 1);
        m.commit_offset("g", "t", 1, 9, 1);
        m.commit_offset("slave", "t", 0, 4, 1);
        let master = ConsumerOffsetSerializeWrapper::decode(
            br#"{"offsetTable":{"t@g":{0:7}},"dataVersion":{"counter":3,"timestamp":9}}"#,
        )
        .unwrap();
        assert!(m.replace_from_master(&master));
        assert_eq!(m.query_offset("g", "t", 0), 7);
        assert_eq!(
            m.query_offset("g", "t", 1),
            -1,
            "the master's map for t@g replaces the slave's whole map"
        );
        assert_eq!(m.query_offset("slave", "t", 0), 4);
        assert_eq!(m.data_version().counter, 3);
        assert!(!m.replace_from_master(&master));
    }

    #[test]
    fn query_answers_follow_each_line() {
        use FirstMessage::*;
        use QueryOffsetAnswer::*;
        let (v4, v5) = (RocketmqLine::V4_9, RocketmqLine::V5);
        assert_eq!(query_consumer_offset(v5, 7, 100, OnDisk, None), Offset(7));
        assert_eq!(query_consumer_offset(v5, -1, 0, InMemory, None), Offset(0));
        assert_eq!(query_consumer_offset(v5, -1, 0, InMemory, Some(false)), NotFound);
        assert_eq!(query_consumer_offset(v5, -1, 0, OnDisk, None), NotFound);
        assert_eq!(query_consumer_offset(v5, -1, 0, Absent, None), NotFound);
        assert_eq!(query_consumer_offset(v4, -1, 0, Absent, None), Offset(0));
        assert_eq!(query_consumer_offset(v4, -1, 0, OnDisk, None), NotFound);
        assert_eq!(query_consumer_offset(v4, -1, 5, InMemory, None), NotFound);
    }

    #[test]
    fn offset_keys_split_as_java_splits_them() {
        assert_eq!(split_offset_key("t@g"), Some(("t", "g")));
        assert_eq!(split_offset_key("t@g@x"), None);
        assert_eq!(split_offset_key("t"), None);
    }

    proptest! {
        #[test]
        fn any_table_round_trips_through_the_file(
            table in proptest::collection::btree_map(
                "[A-Za-z0-9%_-]{1,8}@[A-Za-z0-9_-]{1,8}",
                proptest::collection::btree_map(0i32..1024, any::<i64>(), 1..5),
                0..6,
            )
        ) {
            let d = tempfile::tempdir().unwrap();
            let m = open(d.path(), RocketmqLine::V5);
            for (k, q) in &table {
                let (t, g) = split_offset_key(k).unwrap();
                for (&id, &off) in q {
                    m.commit_offset(g, t, id, off, 1);
                }
            }
            m.persist().unwrap();
            prop_assert_eq!(open(d.path(), RocketmqLine::V5).table(), table);
        }
    }
}
