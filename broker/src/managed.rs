//! A metadata table kept in memory and persisted to its config file: the shared machinery of
//! the managers (locking, change tracking, persist ordering).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use serde_json::Value;

use crate::error::BrokerError;
use crate::file::ConfigFile;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// State `S` behind a lock, the file it persists to, and how far it has been persisted.
#[derive(Debug)]
pub(crate) struct Managed<S> {
    pub(crate) file: ConfigFile,
    state: Mutex<S>,
    /// Changes made so far (bumped under the state lock).
    changes: AtomicU64,
    /// The change count the file holds; its lock orders persists (a later snapshot is never
    /// overwritten by an earlier one).
    persisted: Mutex<u64>,
}

impl<S> Managed<S> {
    pub(crate) fn new(file: ConfigFile, state: S, dirty: bool) -> Self {
        Self {
            file,
            state: Mutex::new(state),
            changes: AtomicU64::new(u64::from(dirty)),
            persisted: Mutex::new(0),
        }
    }

    /// Reads the state.
    pub(crate) fn read<R>(&self, f: impl FnOnce(&S) -> R) -> R {
        f(&lock(&self.state))
    }

    /// Changes the state; `f` says whether it changed anything the file holds.
    pub(crate) fn update<R>(&self, f: impl FnOnce(&mut S) -> (R, bool)) -> R {
        let mut s = lock(&self.state);
        let (r, changed) = f(&mut s);
        if changed {
            self.changes.fetch_add(1, Ordering::AcqRel);
        }
        r
    }

    /// Whether changes were made since the last persist.
    pub(crate) fn is_dirty(&self) -> bool {
        self.changes.load(Ordering::Acquire) != *lock(&self.persisted)
    }

    /// Writes the state to the file (`encode` gives its JSON), whether or not it changed.
    pub(crate) fn persist(&self, encode: impl FnOnce(&S) -> Value) -> Result<(), BrokerError> {
        let mut persisted = lock(&self.persisted);
        let (value, changes) = {
            let s = lock(&self.state);
            (encode(&s), self.changes.load(Ordering::Acquire))
        };
        self.file.write_json(&value)?;
        *persisted = changes;
        Ok(())
    }

    /// Writes the state if it changed since the last persist; returns whether it wrote.
    pub(crate) fn persist_if_dirty(&self, encode: impl FnOnce(&S) -> Value) -> Result<bool, BrokerError> {
        let mut persisted = lock(&self.persisted);
        let (value, changes) = {
            let s = lock(&self.state);
            let changes = self.changes.load(Ordering::Acquire);
            if changes == *persisted {
                return Ok(false);
            }
            (encode(&s), changes)
        };
        self.file.write_json(&value)?;
        *persisted = changes;
        Ok(true)
    }
}

/// Drops `null` members of objects, recursively: fastjson treats a null field as absent.
pub(crate) fn strip_nulls(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(strip_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Decodes `v` (nulls stripped) as `T`, naming `what` in the error.
pub(crate) fn from_value<T: serde::de::DeserializeOwned>(
    what: &'static str,
    v: &Value,
) -> Result<T, BrokerError> {
    let mut v = v.clone();
    strip_nulls(&mut v);
    serde_json::from_value(v).map_err(|e| BrokerError::BadContent { what, reason: e.to_string() })
}

/// Serializes `t` (which cannot fail for the crate's types: string keys, no floats).
pub(crate) fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}
