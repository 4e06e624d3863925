//! Subscription groups: `config/subscriptionGroup.json` (`SubscriptionGroupManager`,
//! `SubscriptionGroupConfig`, `SubscriptionGroupWrapper`).

use std::collections::BTreeMap;
use std::path::Path;

use logship_remoting::body::DataVersion;
use serde_json::Value;

use crate::error::BrokerError;
use crate::file::{ConfigFile, SUBSCRIPTION_GROUP_FILE};
use crate::managed::{Managed, from_value, to_value};
use crate::names;
use crate::settings::{BrokerSettings, RocketmqLine};

pub use logship_remoting::body::{SubscriptionGroupConfig, SubscriptionGroupWrapper};

/// Reads a group table (a file's parsed content); `now_ms` stamps a missing data version.
pub(crate) fn wrapper_from_json(v: &Value, now_ms: i64) -> Result<SubscriptionGroupWrapper, BrokerError> {
    let mut v = v.clone();
    let Some(obj) = v.as_object_mut() else {
        return Err(BrokerError::BadContent {
            what: "subscription groups",
            reason: "not a JSON object".into(),
        });
    };
    if obj.get("dataVersion").is_none_or(Value::is_null) {
        obj.insert("dataVersion".into(), to_value(&DataVersion::new(now_ms)));
    }
    from_value("subscription groups", v)
}

#[derive(Debug)]
struct Groups {
    table: BTreeMap<String, SubscriptionGroupConfig>,
    forbidden: BTreeMap<String, BTreeMap<String, i32>>,
    data_version: DataVersion,
}

/// The groups a broker creates at start (`SubscriptionGroupManager.init`).
pub fn default_groups(line: RocketmqLine) -> Vec<SubscriptionGroupConfig> {
    let mut names = vec![
        "TOOLS_CONSUMER",
        "FILTERSRV_CONSUMER",
        "SELF_TEST_C_GROUP",
        "CID_ONS-HTTP-PROXY",
        "CID_ONSAPI_PULL",
        "CID_ONSAPI_PERMISSION",
        "CID_ONSAPI_OWNER",
    ];
    if line == RocketmqLine::V5 {
        names.push("CID_RMQ_SYS_TRANS");
    }
    names.into_iter().map(SubscriptionGroupConfig::new).collect()
}

/// The broker's subscription groups, persisted in `config/subscriptionGroup.json`
/// (`SubscriptionGroupManager`). Java persists after each change; callers call
/// [`persist`](Self::persist) after one.
#[derive(Debug)]
pub struct SubscriptionGroupManager {
    settings: BrokerSettings,
    inner: Managed<Groups>,
}

fn encode_groups(line: RocketmqLine) -> impl FnOnce(&Groups) -> Value {
    move |s| {
        to_value(&SubscriptionGroupWrapper {
            subscription_group_table: s.table.clone(),
            forbidden_table: (line == RocketmqLine::V5).then(|| s.forbidden.clone()),
            data_version: s.data_version,
            ..Default::default()
        })
    }
}

impl SubscriptionGroupManager {
    /// Opens the groups of the store at `root`: the defaults ([`default_groups`]), then what the
    /// file (or its `.bak`) holds over them, as Java's `init` then `load`.
    pub fn open(root: &Path, settings: BrokerSettings, now_ms: i64) -> Result<Self, BrokerError> {
        let file = ConfigFile::in_store(root, SUBSCRIPTION_GROUP_FILE, "subscription groups");
        let loaded = file.load(|v| wrapper_from_json(v, now_ms))?;
        let mut table: BTreeMap<String, SubscriptionGroupConfig> =
            default_groups(settings.line).into_iter().map(|g| (g.group_name.clone(), g)).collect();
        let mut forbidden = BTreeMap::new();
        let data_version = match loaded {
            Some(w) => {
                table.extend(w.subscription_group_table);
                forbidden.extend(w.forbidden_table.unwrap_or_default());
                w.data_version
            }
            None => DataVersion::new(now_ms),
        };
        tracing::info!(path = %file.path().display(), groups = table.len(), "subscription groups loaded");
        Ok(Self { settings, inner: Managed::new(file, Groups { table, forbidden, data_version }, false) })
    }

    /// The file it persists to.
    pub fn path(&self) -> &Path {
        self.inner.file.path()
    }

    /// A group's config, without creating it.
    pub fn get(&self, group: &str) -> Option<SubscriptionGroupConfig> {
        self.inner.read(|s| s.table.get(group).cloned())
    }

    /// `containsSubscriptionGroup`.
    pub fn contains(&self, group: &str) -> bool {
        !group.trim().is_empty() && self.inner.read(|s| s.table.contains_key(group))
    }

    /// Every group, by name.
    pub fn table(&self) -> BTreeMap<String, SubscriptionGroupConfig> {
        self.inner.read(|s| s.table.clone())
    }

    /// The table's data version.
    pub fn data_version(&self) -> DataVersion {
        self.inner.read(|s| s.data_version)
    }

    /// What `GET_ALL_SUBSCRIPTIONGROUP_CONFIG` returns.
    pub fn serialize_wrapper(&self) -> SubscriptionGroupWrapper {
        let v5 = self.settings.line == RocketmqLine::V5;
        self.inner.read(|s| SubscriptionGroupWrapper {
            subscription_group_table: s.table.clone(),
            forbidden_table: v5.then(|| s.forbidden.clone()),
            data_version: s.data_version,
            ..Default::default()
        })
    }

    /// `findSubscriptionGroupConfig`: the group's config; a missing group is created with the
    /// defaults when `autoCreateSubscriptionGroup` is on, or for a system group
    /// (`CID_RMQ_SYS_*`; in 5.x only with `enableCreateSysGroup`). A name RocketMQ 5 refuses
    /// (too long, bad characters) is not created. Returns `(config, created)`; persist when
    /// created.
    pub fn find_subscription_group_config(
        &self,
        group: &str,
        now_ms: i64,
    ) -> Option<(SubscriptionGroupConfig, bool)> {
        if let Some(g) = self.get(group) {
            return Some((g, false));
        }
        let sys = names::is_sys_consumer_group(group)
            && (self.settings.line == RocketmqLine::V4_9 || self.settings.enable_create_sys_group);
        if !(self.settings.auto_create_subscription_group || sys) || names::validate_group(group).is_err() {
            return None;
        }
        Some(self.inner.update(|s| {
            if let Some(g) = s.table.get(group) {
                return ((g.clone(), false), false);
            }
            let g = SubscriptionGroupConfig::new(group);
            s.table.insert(group.to_string(), g.clone());
            s.data_version.next_version(now_ms, 0);
            tracing::info!(group, "subscription group created");
            ((g, true), true)
        }))
    }

    /// `updateSubscriptionGroupConfig`: puts the config (5.x's attributes are taken as given);
    /// returns the previous one.
    pub fn update_subscription_group_config(
        &self,
        config: SubscriptionGroupConfig,
        now_ms: i64,
    ) -> Result<Option<SubscriptionGroupConfig>, BrokerError> {
        names::validate_group(&config.group_name)?;
        Ok(self.inner.update(|s| {
            let old = s.table.insert(config.group_name.clone(), config);
            s.data_version.next_version(now_ms, 0);
            (old, true)
        }))
    }

    /// `disableConsume`: the group may no longer consume.
    pub fn disable_consume(&self, group: &str, now_ms: i64) -> bool {
        self.inner.update(|s| match s.table.get_mut(group) {
            Some(g) => {
                g.consume_enable = false;
                s.data_version.next_version(now_ms, 0);
                (true, true)
            }
            None => (false, false),
        })
    }

    /// `deleteSubscriptionGroupConfig`: removes the group and its forbidden bits; returns its
    /// config if it existed. A default group comes back at the next open, as in Java.
    pub fn delete_subscription_group_config(
        &self,
        group: &str,
        now_ms: i64,
    ) -> Option<SubscriptionGroupConfig> {
        self.inner.update(|s| {
            let f = s.forbidden.remove(group).is_some();
            match s.table.remove(group) {
                Some(old) => {
                    s.data_version.next_version(now_ms, 0);
                    (Some(old), true)
                }
                None => (None, f),
            }
        })
    }

    /// `getForbidden(group, topic)`: the forbidden bits (0 when none or negative).
    pub fn forbidden(&self, group: &str, topic: &str) -> i32 {
        self.inner.read(|s| s.forbidden.get(group).and_then(|t| t.get(topic)).copied().unwrap_or(0).max(0))
    }

    /// `updateForbidden`: sets or clears bit `index` of the group's forbidden bits in `topic`.
    /// As in Java, a value that drops to 0 removes the whole group's entry, and the shift
    /// wraps at 32 (`1 << index`).
    pub fn update_forbidden(&self, group: &str, topic: &str, index: u32, set: bool, now_ms: i64) {
        let bit = 1i32.wrapping_shl(index);
        let current = self.forbidden(group, topic);
        let value = if set { current | bit } else { current & !bit };
        self.inner.update(|s| {
            if value <= 0 {
                let removed = s.forbidden.remove(group).is_some();
                return ((), removed);
            }
            s.forbidden.entry(group.to_string()).or_default().insert(topic.to_string(), value);
            s.data_version.next_version(now_ms, 0);
            ((), true)
        });
    }

    /// The slave side of `SlaveSynchronize.syncSubscriptionGroupConfig`: if the master's data
    /// version differs, the table becomes the master's and takes its version (forbidden bits
    /// too, when the master sends them). Returns whether anything changed; persist after.
    pub fn replace_from_master(&self, master: &SubscriptionGroupWrapper) -> bool {
        self.inner.update(|s| {
            if s.data_version == master.data_version {
                return (false, false);
            }
            s.data_version = master.data_version;
            s.table = master.subscription_group_table.clone();
            if let Some(f) = &master.forbidden_table {
                s.forbidden = f.clone();
            }
            (true, true)
        })
    }

    /// Whether changes wait to be persisted.
    pub fn is_dirty(&self) -> bool {
        self.inner.is_dirty()
    }

    /// Writes `subscriptionGroup.json`.
    pub fn persist(&self) -> Result<(), BrokerError> {
        self.inner.persist(encode_groups(self.settings.line))
    }

    /// Writes `subscriptionGroup.json` if anything changed since the last write.
    pub fn persist_if_dirty(&self) -> Result<bool, BrokerError> {
        self.inner.persist_if_dirty(encode_groups(self.settings.line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use logship_remoting::body::JsonBody;
    use serde_json::json;

    fn open(d: &Path, s: BrokerSettings) -> SubscriptionGroupManager {
        SubscriptionGroupManager::open(d, s, 1).unwrap()
    }

    #[test]
    fn new_groups_get_rocketmqs_defaults() {
        let g = SubscriptionGroupConfig::new("g");
        assert_eq!((g.retry_max_times, g.retry_queue_nums, g.which_broker_when_consume_slowly), (16, 1, 1));
        assert!(g.consume_enable && g.consume_broadcast_enable && g.consume_from_min_enable);
        assert_eq!(g.consume_timeout_minute, 15);
        let v = to_value(&g);
        assert_eq!(v["groupRetryPolicy"], json!({"type": "CUSTOMIZED"}));
        assert!(v.get("subscriptionDataSet").is_none());
    }

    #[test]
    fn groups_are_auto_created_only_when_allowed() {
        let d = tempfile::tempdir().unwrap();
        let m = open(d.path(), BrokerSettings::default());
        let (g, created) = m.find_subscription_group_config("GroupA", 2).unwrap();
        assert!(created && g.group_name == "GroupA");
        assert!(!m.find_subscription_group_config("GroupA", 3).unwrap().1);
        assert!(m.find_subscription_group_config("bad group", 3).is_none());
        let d = tempfile::tempdir().unwrap();
        let off = BrokerSettings { auto_create_subscription_group: false, ..BrokerSettings::default() };
        let m = open(d.path(), off.clone());
        assert!(m.find_subscription_group_config("GroupA", 2).is_none());
        assert!(m.find_subscription_group_config("CID_RMQ_SYS_X", 2).is_some());
        let m = open(
            tempfile::tempdir().unwrap().path(),
            BrokerSettings { enable_create_sys_group: false, ..off },
        );
        assert!(m.find_subscription_group_config("CID_RMQ_SYS_X", 2).is_none());
    }

    #[test]
    fn forbidden_bits_set_and_clear_as_in_java() {
        let d = tempfile::tempdir().unwrap();
        let m = open(d.path(), BrokerSettings::default());
        m.update_forbidden("g", "t", 1, true, 2);
        m.update_forbidden("g", "u", 0, true, 2);
        assert_eq!((m.forbidden("g", "t"), m.forbidden("g", "u")), (2, 1));
        m.update_forbidden("g", "t", 1, false, 3);
        assert_eq!(m.forbidden("g", "u"), 0, "Java drops the group's whole entry when one value reaches 0");
        m.update_forbidden("g", "t", 40, true, 3);
        assert_eq!(m.forbidden("g", "t"), 1 << 8, "Java's int shift wraps at 32");
    }

    #[test]
    fn deleted_default_groups_come_back_and_changes_persist() {
        let d = tempfile::tempdir().unwrap();
        let m = open(d.path(), BrokerSettings::default());
        let mut b = SubscriptionGroupConfig::new("GroupB");
        b.retry_max_times = 3;
        m.update_subscription_group_config(b, 2).unwrap();
        m.delete_subscription_group_config("CID_ONSAPI_OWNER", 3).unwrap();
        m.update_forbidden("GroupB", "t", 2, true, 4);
        m.persist().unwrap();
        let again = open(d.path(), BrokerSettings::default());
        assert!(again.contains("CID_ONSAPI_OWNER"));
        assert_eq!(again.get("GroupB").unwrap().retry_max_times, 3);
        assert_eq!(again.forbidden("GroupB", "t"), 4);
        assert_eq!(again.data_version(), m.data_version());
        assert_eq!(m.data_version().counter, 3);
    }

    #[test]
    fn a_slave_takes_the_masters_groups_when_the_version_differs() {
        let d = tempfile::tempdir().unwrap();
        let m = open(d.path(), BrokerSettings::default());
        let w = SubscriptionGroupWrapper::decode(
            br#"{"subscriptionGroupTable":{"G":{"retryMaxTimes":2,"brandNew":true}},"dataVersion":{"counter":5,"timestamp":8}}"#,
        )
        .unwrap();
        assert!(m.replace_from_master(&w));
        assert_eq!(m.table().keys().collect::<Vec<_>>(), vec!["G"]);
        let g = m.get("G").unwrap();
        assert_eq!(
            (g.retry_max_times, g.group_name.as_str(), g.extra["brandNew"].clone()),
            (2, "G", json!(true))
        );
        assert!(!m.replace_from_master(&w));
    }
}
