//! A metadata table kept in memory and persisted to its config file: the shared machinery of
//! the managers (locking, change tracking, persist ordering).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use logship_remoting::BodyError;
use logship_remoting::body::JsonBody;
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

/// Decodes `v` as the body `T` (`null` fields are absent, as in fastjson), naming `what` in
/// the error.
pub(crate) fn from_value<T: JsonBody>(what: &'static str, v: Value) -> Result<T, BrokerError> {
    T::decode_value(v).map_err(|e| BrokerError::BadContent { what, reason: body_reason(e) })
}

/// A body error's reason without its class name (the broker's error names the table).
fn body_reason(e: BodyError) -> String {
    match e {
        BodyError::Json { reason, .. }
        | BodyError::Compressed { reason, .. }
        | BodyError::Unencodable { reason, .. } => reason,
        other => other.to_string(),
    }
}

/// Serializes `t` (which cannot fail for the crate's types: string keys, no floats).
pub(crate) fn to_value<T: serde::Serialize>(t: &T) -> Value {
    serde_json::to_value(t).unwrap_or(Value::Null)
}
