//! The crate's error type.

use std::path::PathBuf;
use std::sync::Arc;

use logship_remoting::body::fastjson::JsonError;

/// What went wrong with broker metadata: a file that cannot be read or written, content that is
/// not RocketMQ's, or a request that RocketMQ would refuse.
#[derive(Clone, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BrokerError {
    /// A config file could not be read, written, synced or renamed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done ("write", "rename", ...).
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A config file and its `.bak` are both unreadable: nothing is loaded rather than forgetting
    /// what they held.
    #[error(
        "{path} is unreadable ({reason}) and so is its backup {bak} ({bak_reason}); \
         restore {path} from a copy, or remove both files to start with no {what} \
         (for consumer offsets, consumers then start where their consumeFromWhere says)"
    )]
    Corrupt {
        /// The config file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
        /// Its backup.
        bak: PathBuf,
        /// What is wrong with the backup ("missing" if there is none).
        bak_reason: String,
        /// What the file holds ("topic configs", ...).
        what: &'static str,
    },
    /// A body or file is JSON, but not the shape RocketMQ gives it.
    #[error("{what}: {reason}")]
    BadContent {
        /// What was being decoded.
        what: &'static str,
        /// What was wrong.
        reason: String,
    },
    /// A body or file is not JSON that fastjson would read.
    #[error("{what}: {source}")]
    BadJson {
        /// What was being decoded.
        what: &'static str,
        /// Where and what.
        #[source]
        source: JsonError,
    },
    /// A topic name RocketMQ refuses (`TopicValidator.validateTopic`).
    #[error("invalid topic {topic:?}: {reason}")]
    InvalidTopic {
        /// The name (possibly cut, if it was long).
        topic: String,
        /// Why, in RocketMQ's words.
        reason: &'static str,
    },
    /// A consumer group name RocketMQ refuses.
    #[error("invalid consumer group {group:?}: {reason}")]
    InvalidGroup {
        /// The name (possibly cut, if it was long).
        group: String,
        /// Why.
        reason: &'static str,
    },
    /// The delay levels string (`messageDelayLevel`) does not parse.
    #[error(
        "invalid messageDelayLevel {levels:?}: {reason}; expected levels such as \"1s 5s 10s 30s 1m 2h 1d\""
    )]
    InvalidDelayLevels {
        /// The string.
        levels: String,
        /// What was wrong.
        reason: String,
    },
}

impl BrokerError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io { op, path: path.into(), source: Arc::new(source) }
    }
}
