//! `DataVersion`: the version stamp each metadata table carries, which slaves compare with
//! their master's to decide whether to sync.

use serde::{Deserialize, Serialize};

/// RocketMQ's `DataVersion`: `{timestamp, counter}` in 4.9, plus `stateVersion` in 5.x. Equality
/// compares all three, as 5.x's `equals` does (4.9 has no `stateVersion`; it reads as 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DataVersion {
    /// Milliseconds since the epoch of the last change.
    #[serde(default)]
    pub timestamp: i64,
    /// Changes so far.
    #[serde(default)]
    pub counter: i64,
    /// The state machine version (5.x; 0 for a classic store).
    #[serde(default)]
    pub state_version: i64,
}

impl DataVersion {
    /// A new version at `now_ms`, counter 0 (Java's `new DataVersion()`).
    pub fn new(now_ms: i64) -> Self {
        Self { timestamp: now_ms, counter: 0, state_version: 0 }
    }

    /// The next version (Java's `nextVersion(stateVersion)`): `timestamp = now_ms`, the counter
    /// incremented.
    pub fn next_version(&mut self, now_ms: i64, state_version: i64) {
        self.timestamp = now_ms;
        self.state_version = state_version;
        self.counter = self.counter.wrapping_add(1);
    }

    /// Orders versions as 5.x's `DataVersion.compare`: state version, then counter, then
    /// timestamp.
    pub fn compare(&self, other: &Self) -> std::cmp::Ordering {
        (self.state_version, self.counter, self.timestamp).cmp(&(
            other.state_version,
            other.counter,
            other.timestamp,
        ))
    }
}
