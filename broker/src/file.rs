//! RocketMQ's config files on disk: `<storePathRootDir>/config/<name>.json` and its `.bak`.
//!
//! # What Java does
//!
//! `ConfigManager.persist` writes the file through `MixAll.string2File`: in 4.9 the new text goes
//! to `<name>.tmp`, the old text is copied to `<name>.bak`, and the tmp file is renamed over the
//! file; in 5.x the old text is copied to `.bak` and the file is overwritten in place, and the
//! newest lines move the file to `.bak` and write a new one, with fsyncs. None of them fsyncs the
//! copies everywhere, so a crash can leave either file torn. `ConfigManager.load` reads the file
//! and, if it is missing, empty or does not decode, the `.bak`; if that is missing too, it starts
//! empty (and 5.x's newest lines delete the unreadable file first).
//!
//! # What logship does
//!
//! [`ConfigFile::write`] keeps Java's convention (the `.bak` holds the previous content, so a Java
//! broker opened on the directory finds what it expects) but makes each step atomic: the previous
//! content goes to `<name>.bak.tmp`, is fsynced and renamed to `<name>.bak`; the new content goes
//! to `<name>.tmp`, is fsynced and renamed to `<name>`; then the directory is fsynced. At every
//! instant `<name>` holds a whole version, and `.bak` the one before it (or an older one).
//!
//! [`ConfigFile::read`] falls back to `.bak` as Java does, but when the file exists and neither it
//! nor its backup is readable it fails with [`BrokerError::Corrupt`], naming both and the way out,
//! instead of starting empty: an empty start would silently forget consumer offsets.

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::BrokerError;
use logship_remoting::body::fastjson as json;

/// The directory under the store root that holds the config files.
pub const CONFIG_DIR: &str = "config";
/// `topics.json`: the topic configs (`TopicConfigManager`).
pub const TOPICS_FILE: &str = "topics.json";
/// `consumerOffset.json`: the consumer offsets (`ConsumerOffsetManager`).
pub const CONSUMER_OFFSET_FILE: &str = "consumerOffset.json";
/// `subscriptionGroup.json`: the subscription groups (`SubscriptionGroupManager`).
pub const SUBSCRIPTION_GROUP_FILE: &str = "subscriptionGroup.json";
/// `delayOffset.json`: the delay-level offsets (`ScheduleMessageService`).
pub const DELAY_OFFSET_FILE: &str = "delayOffset.json";

/// One config file and its backup.
#[derive(Clone, Debug)]
pub struct ConfigFile {
    path: PathBuf,
    what: &'static str,
}

/// What [`ConfigFile::read`] found.
#[derive(Clone, Debug, PartialEq)]
pub enum Loaded {
    /// Neither the file nor its backup exists: a new broker.
    Absent,
    /// The file's content.
    File(Value),
    /// The file was missing or unreadable (the reason is given), the backup's content.
    Backup {
        /// The backup's content.
        value: Value,
        /// Why the file itself was not used.
        reason: String,
    },
}

impl ConfigFile {
    /// The file `<root>/config/<name>`, holding `what` (for messages: "topic configs").
    pub fn in_store(root: &Path, name: &str, what: &'static str) -> Self {
        Self { path: root.join(CONFIG_DIR).join(name), what }
    }

    /// A file at `path`.
    pub fn at(path: impl Into<PathBuf>, what: &'static str) -> Self {
        Self { path: path.into(), what }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The backup's path: the file's with `.bak` appended, as Java names it.
    pub fn bak_path(&self) -> PathBuf {
        suffixed(&self.path, ".bak")
    }

    /// Reads the file, or its backup as Java would (see the module docs); `decode` turns the
    /// JSON into content and says why it is not valid. Returns what was read.
    pub fn read(&self) -> Result<Loaded, BrokerError> {
        let bak = self.bak_path();
        let main = read_json(&self.path);
        let reason = match main {
            Ok(Some(v)) => return Ok(Loaded::File(v)),
            Ok(None) => None,
            Err(reason) => Some(reason),
        };
        match read_json(&bak) {
            Ok(Some(value)) => {
                let reason = reason.unwrap_or_else(|| "missing".to_string());
                tracing::warn!(path = %self.path.display(), bak = %bak.display(), %reason, "config file unusable; loaded its backup");
                Ok(Loaded::Backup { value, reason })
            }
            Ok(None) => match reason {
                None => Ok(Loaded::Absent),
                Some(reason) => Err(self.corrupt(reason, "missing".to_string())),
            },
            Err(bak_reason) => Err(self.corrupt(reason.unwrap_or_else(|| "missing".to_string()), bak_reason)),
        }
    }

    /// [`read`](Self::read), then `decode` on the JSON found; content that does not decode counts
    /// as unreadable, so a file that parses but is not the right shape falls back to `.bak` too.
    pub fn load<T>(
        &self,
        decode: impl Fn(&Value) -> Result<T, BrokerError>,
    ) -> Result<Option<T>, BrokerError> {
        let bak = self.bak_path();
        let main =
            read_json(&self.path).and_then(|v| v.map(|v| decode(&v).map_err(|e| e.to_string())).transpose());
        let reason = match main {
            Ok(Some(t)) => return Ok(Some(t)),
            Ok(None) => None,
            Err(reason) => Some(reason),
        };
        let backup =
            read_json(&bak).and_then(|v| v.map(|v| decode(&v).map_err(|e| e.to_string())).transpose());
        match backup {
            Ok(Some(t)) => {
                let reason = reason.unwrap_or_else(|| "missing".to_string());
                tracing::warn!(path = %self.path.display(), bak = %bak.display(), %reason, "config file unusable; loaded its backup");
                Ok(Some(t))
            }
            Ok(None) => match reason {
                None => Ok(None),
                Some(reason) => Err(self.corrupt(reason, "missing".to_string())),
            },
            Err(bak_reason) => Err(self.corrupt(reason.unwrap_or_else(|| "missing".to_string()), bak_reason)),
        }
    }

    fn corrupt(&self, reason: String, bak_reason: String) -> BrokerError {
        BrokerError::Corrupt {
            path: self.path.clone(),
            reason,
            bak: self.bak_path(),
            bak_reason,
            what: self.what,
        }
    }

    /// Writes `text` as the file's new content, keeping the previous content in `.bak`, each
    /// step atomic and durable (see the module docs). Creates the directory if needed.
    pub fn write(&self, text: &str) -> Result<(), BrokerError> {
        let dir = self.path.parent().map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        if !dir.is_dir() {
            fs::create_dir_all(&dir).map_err(|e| BrokerError::io("create directory", &dir, e))?;
            if let Some(parent) = dir.parent() {
                sync_dir(parent)?;
            }
        }
        match fs::read(&self.path) {
            // Only content that reads back becomes the backup: a torn file (the one a load just
            // fell back from) must not replace the good backup.
            Ok(previous) if json::parse(&previous).is_ok() => {
                write_atomically(&self.bak_path(), &previous)?;
            }
            Ok(_) => {
                tracing::warn!(path = %self.path.display(), "replacing an unreadable config file; its backup is kept as it is");
            }
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(BrokerError::io("read", &self.path, e)),
        }
        write_atomically(&self.path, text.as_bytes())?;
        sync_dir(&dir)
    }

    /// Writes `value` in fastjson's pretty layout (see [`json::to_pretty`]).
    pub fn write_json(&self, value: &Value) -> Result<(), BrokerError> {
        self.write(&json::to_pretty(value))
    }
}

fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_owned();
    s.push(suffix);
    PathBuf::from(s)
}

/// `Ok(None)`: missing or empty (as Java's `file2String` returning null or ""); `Err`: why the
/// file is unreadable.
fn read_json(path: &Path) -> Result<Option<Value>, String> {
    let bytes = match fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    if bytes.is_empty() {
        return Err("empty".to_string());
    }
    let text = std::str::from_utf8(&bytes).map_err(|e| format!("not UTF-8: {e}"))?;
    if text.trim().is_empty() {
        return Err("blank".to_string());
    }
    json::parse(text.as_bytes()).map(Some).map_err(|e| format!("not JSON: {e}"))
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), BrokerError> {
    let tmp = suffixed(path, ".tmp");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| BrokerError::io("create", &tmp, e))?;
    f.write_all(bytes).map_err(|e| BrokerError::io("write", &tmp, e))?;
    f.sync_all().map_err(|e| BrokerError::io("fsync", &tmp, e))?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| BrokerError::io("rename", &tmp, e))
}

fn sync_dir(dir: &Path) -> Result<(), BrokerError> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| BrokerError::io("fsync directory", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn file(dir: &Path) -> ConfigFile {
        ConfigFile::in_store(dir, TOPICS_FILE, "topic configs")
    }

    #[test]
    fn a_new_store_has_neither_file() {
        let d = tempfile::tempdir().unwrap();
        assert_eq!(file(d.path()).read().unwrap(), Loaded::Absent);
    }

    #[test]
    fn each_write_keeps_the_previous_content_in_bak_and_leaves_no_temporary_file() {
        let d = tempfile::tempdir().unwrap();
        let f = file(d.path());
        f.write("{\"a\":1}").unwrap();
        assert!(!f.bak_path().exists(), "no previous content, no backup");
        f.write("{\"a\":2}").unwrap();
        f.write("{\"a\":3}").unwrap();
        assert_eq!(fs::read_to_string(f.path()).unwrap(), "{\"a\":3}");
        assert_eq!(fs::read_to_string(f.bak_path()).unwrap(), "{\"a\":2}");
        let names: Vec<_> = fs::read_dir(d.path().join(CONFIG_DIR))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert!(names.iter().all(|n| !n.ends_with(".tmp")), "{names:?}");
    }

    #[test]
    fn a_torn_file_falls_back_to_its_backup() {
        let d = tempfile::tempdir().unwrap();
        let f = file(d.path());
        f.write("{\"a\":1}").unwrap();
        f.write("{\"a\":2}").unwrap();
        fs::write(f.path(), "{\"a\":").unwrap();
        match f.read().unwrap() {
            Loaded::Backup { value, reason } => {
                assert_eq!(value, json!({"a": 1}));
                assert!(reason.starts_with("not JSON"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_missing_file_with_a_backup_loads_the_backup() {
        // The window of Java 5's newest persist: the file moved to .bak, the new one not written.
        let d = tempfile::tempdir().unwrap();
        let f = file(d.path());
        f.write("{\"a\":1}").unwrap();
        f.write("{\"a\":2}").unwrap();
        fs::remove_file(f.path()).unwrap();
        assert!(matches!(f.read().unwrap(), Loaded::Backup { value, .. } if value == json!({"a": 1})));
    }

    #[test]
    fn an_unreadable_file_without_a_readable_backup_is_an_error_naming_both_and_the_way_out() {
        let d = tempfile::tempdir().unwrap();
        let f = file(d.path());
        fs::create_dir_all(d.path().join(CONFIG_DIR)).unwrap();
        fs::write(f.path(), "").unwrap();
        let e = f.read().unwrap_err();
        assert!(matches!(&e, BrokerError::Corrupt { bak_reason, .. } if bak_reason == "missing"), "{e}");
        fs::write(f.path(), "garbage").unwrap();
        fs::write(f.bak_path(), "{\"x\"").unwrap();
        let e = f.read().unwrap_err().to_string();
        assert!(e.contains("topics.json is unreadable") && e.contains("topics.json.bak"), "{e}");
        assert!(e.contains("remove both files"), "{e}");
    }

    #[test]
    fn writing_over_a_torn_file_keeps_the_good_backup() {
        let d = tempfile::tempdir().unwrap();
        let f = file(d.path());
        f.write("{\"a\":1}").unwrap();
        f.write("{\"a\":2}").unwrap();
        fs::write(f.path(), "{\"a\":").unwrap();
        f.write("{\"a\":3}").unwrap();
        assert_eq!(fs::read_to_string(f.bak_path()).unwrap(), "{\"a\":1}");
    }

    #[test]
    fn content_that_parses_but_does_not_decode_falls_back_too() {
        let d = tempfile::tempdir().unwrap();
        let f = file(d.path());
        f.write("{\"a\":1}").unwrap();
        f.write("[1]").unwrap();
        let decode = |v: &Value| {
            v.get("a")
                .and_then(Value::as_i64)
                .ok_or(BrokerError::BadContent { what: "t", reason: "no a".into() })
        };
        assert_eq!(f.load(decode).unwrap(), Some(1));
        fs::write(f.bak_path(), "[2]").unwrap();
        assert!(matches!(f.load(decode), Err(BrokerError::Corrupt { .. })));
    }
}
