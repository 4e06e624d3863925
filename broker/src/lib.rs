//! logship-broker: a RocketMQ broker's request processors and its metadata.
//!
//! - **Processors** ([`serve`], [`dispatch`]): the broker side of RocketMQ's remoting protocol,
//!   one `async fn` per request code, over the store, the metadata and a [`Host`] that supplies
//!   the put path, the role and the clocks. No async runtime here: the binary's socket glue
//!   decodes frames ([`logship_remoting::server`]), dispatches each request and writes the
//!   answer.
//! - **Metadata** (topic configs, consumer offsets, subscription groups, delay offsets), kept in
//!   RocketMQ's own files so a Java broker opened on the same store directory sees the same
//!   content, and the other way round.
//!
//! # Layout
//!
//! ```text
//! <storePathRootDir>/config/topics.json              TopicConfigManager
//! <storePathRootDir>/config/consumerOffset.json      ConsumerOffsetManager
//! <storePathRootDir>/config/subscriptionGroup.json   SubscriptionGroupManager
//! <storePathRootDir>/config/delayOffset.json         DelayOffsetManager
//! each with <name>.bak (the previous content) as Java keeps it
//! ```
//!
//! # Contract
//!
//! - **One owner.** Open the metadata of a store root only while holding that root's
//!   `CommitLog` (which locks `<root>/lock`, as a Java broker does): nothing else may write
//!   the files meanwhile.
//! - **One set of types.** The tables' types (`TopicConfig`, the serialize wrappers,
//!   [`DataVersion`], ...) are `logship-remoting`'s protocol bodies, re-exported here: a file
//!   and a reply carry the same JSON.
//! - **Sans-IO but for the files.** The managers hold their tables in memory behind a lock
//!   (every method takes `&self`); only `open`, `persist` and `persist_if_dirty` touch the
//!   disk. No clock is read: every change that moves a data version takes `now_ms`.
//! - **Java's semantics.** Creation rules (`createTopicInSendMessageMethod`, retry and DLQ
//!   topics, group auto-creation), defaults, data-version bumps and the slave's merge
//!   (`replace_from_master`, as `SlaveSynchronize`) follow the Java broker of the configured
//!   [`RocketmqLine`]; each method says where the lines differ and where logship does.
//! - **Persistence.** Java persists topics and groups on every change and consumer offsets
//!   every `flushConsumerOffsetInterval` (5 s); here mutations mark a table dirty and the owner
//!   calls [`persist`](TopicConfigManager::persist) after a change, or
//!   [`BrokerMetadata::persist_if_dirty`] from its timer. Each write is atomic and durable and
//!   keeps `.bak` ([`mod@file`]); a load falls back to `.bak` as Java does, and fails with
//!   [`BrokerError::Corrupt`] rather than forgetting offsets when both are unreadable.
//! - **fastjson both ways.** Java writes JSON with bare integer keys (`{0:12}`);
//!   [`logship_remoting::body::fastjson`] reads it. logship writes standard JSON in fastjson's layout, which Java reads
//!   (`broker/tests/java_config_files.rs` checks both directions against the real managers).
//!   Members a newer RocketMQ adds to a topic or group are kept and written back.
#![forbid(unsafe_code)]

pub mod acl;
mod admin;
pub mod clients;
pub mod consume;
pub mod consumer_manage;
pub mod delay;
pub mod dispatch;
pub mod error;
pub mod file;
#[doc(hidden)]
pub mod fuzzing;
pub mod lock;
mod lookup;
mod managed;
pub mod names;
pub mod offset;
pub mod properties;
pub mod pull;
pub mod pull_hold;
pub mod register;
pub mod retry;
pub mod schedule;
pub mod send;
pub mod serve;
pub mod settings;
pub mod slave_sync;
pub mod stats;
pub mod subscription;
pub mod topic;
mod topic_admin;

use std::path::{Path, PathBuf};

pub use delay::{DelayLevels, DelayOffsetManager, DelayOffsetSerializeWrapper};
pub use error::BrokerError;
pub use logship_remoting::body::DataVersion;
pub use offset::{ConsumerOffsetManager, ConsumerOffsetSerializeWrapper, FirstMessage, QueryOffsetAnswer};
pub use serve::{
    Authorizer, Broker, Connection, Host, HostFuture, Outbound, Processed, PutOutcome, Refusal,
    RequestContext,
};
pub use settings::{BrokerSettings, RocketmqLine};
pub use subscription::{SubscriptionGroupConfig, SubscriptionGroupManager, SubscriptionGroupWrapper};
pub use topic::{
    TopicConfig, TopicConfigManager, TopicConfigSerializeWrapper, TopicCreation, TopicFilterType,
};

/// The four metadata tables of one broker, opened together from a store root.
#[derive(Debug)]
pub struct BrokerMetadata {
    root: PathBuf,
    /// Topic configs.
    pub topics: TopicConfigManager,
    /// Consumer offsets.
    pub offsets: ConsumerOffsetManager,
    /// Subscription groups.
    pub groups: SubscriptionGroupManager,
    /// Delay offsets.
    pub delays: DelayOffsetManager,
}

/// Which tables [`BrokerMetadata::persist_if_dirty`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Persisted {
    /// `topics.json`.
    pub topics: bool,
    /// `consumerOffset.json`.
    pub offsets: bool,
    /// `subscriptionGroup.json`.
    pub groups: bool,
    /// `delayOffset.json`.
    pub delays: bool,
}

impl BrokerMetadata {
    /// Opens every table of the store at `root` (see each manager's `open`). Fails on the first
    /// table that cannot be loaded, naming its file.
    pub fn open(root: impl AsRef<Path>, settings: BrokerSettings, now_ms: i64) -> Result<Self, BrokerError> {
        let root = root.as_ref();
        Ok(Self {
            root: root.to_path_buf(),
            topics: TopicConfigManager::open(root, settings.clone(), now_ms)?,
            offsets: ConsumerOffsetManager::open(root, settings.clone(), now_ms)?,
            groups: SubscriptionGroupManager::open(root, settings.clone(), now_ms)?,
            delays: DelayOffsetManager::open(root, settings, now_ms)?,
        })
    }

    /// The store root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes every table that changed since its last write. Each table is tried even if an
    /// earlier one fails; the first error is returned.
    pub fn persist_if_dirty(&self) -> Result<Persisted, BrokerError> {
        let mut first = None;
        let mut out = Persisted::default();
        let mut note = |r: Result<bool, BrokerError>| match r {
            Ok(wrote) => wrote,
            Err(e) => {
                tracing::error!(error = %e, "persisting broker metadata failed");
                first.get_or_insert(e);
                false
            }
        };
        out.topics = note(self.topics.persist_if_dirty());
        out.offsets = note(self.offsets.persist_if_dirty());
        out.groups = note(self.groups.persist_if_dirty());
        out.delays = note(self.delays.persist_if_dirty());
        match first {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }

    /// Writes every table (a clean shutdown: Java persists each manager on stop).
    pub fn persist_all(&self) -> Result<(), BrokerError> {
        self.topics.persist()?;
        self.offsets.persist()?;
        self.groups.persist()?;
        self.delays.persist()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_changed_tables_are_written() {
        let d = tempfile::tempdir().unwrap();
        let m = BrokerMetadata::open(d.path(), BrokerSettings::default(), 1).unwrap();
        assert_eq!(m.persist_if_dirty().unwrap(), Persisted::default());
        m.offsets.commit_offset("g", "t", 0, 5, 2);
        let p = m.persist_if_dirty().unwrap();
        assert!(p.offsets && !p.topics && !p.groups && !p.delays);
        assert!(!d.path().join("config/topics.json").exists());
        m.persist_all().unwrap();
        for f in ["topics.json", "consumerOffset.json", "subscriptionGroup.json", "delayOffset.json"] {
            assert!(d.path().join("config").join(f).exists(), "{f}");
        }
    }

    #[test]
    fn a_corrupt_offsets_file_stops_the_open_instead_of_forgetting_offsets() {
        let d = tempfile::tempdir().unwrap();
        let m = BrokerMetadata::open(d.path(), BrokerSettings::default(), 1).unwrap();
        m.offsets.commit_offset("g", "t", 0, 5, 2);
        m.persist_all().unwrap();
        std::fs::write(d.path().join("config/consumerOffset.json"), "{\"offsetTable\":{\"t@g\":{0:").unwrap();
        let e = BrokerMetadata::open(d.path(), BrokerSettings::default(), 3).unwrap_err();
        assert!(matches!(e, BrokerError::Corrupt { what: "consumer offsets", .. }), "{e}");
    }
}
