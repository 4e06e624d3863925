//! Delay levels and their offsets: `messageDelayLevel` and `config/delayOffset.json`
//! (`ScheduleMessageService`, `DelayOffsetSerializeWrapper`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::BrokerError;
use crate::file::{ConfigFile, DELAY_OFFSET_FILE};
use crate::managed::{Managed, from_value, to_value};
#[cfg(test)]
use crate::settings::DEFAULT_DELAY_LEVELS;
use crate::settings::{BrokerSettings, RocketmqLine};
use logship_remoting::body::{DataVersion, JsonBody};

/// The delay of each level, in milliseconds (`ScheduleMessageService.parseDelayLevel`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DelayLevels {
    /// `millis[level - 1]` is the delay of `level`.
    millis: Vec<i64>,
}

impl DelayLevels {
    /// Parses a `messageDelayLevel` string: levels separated by single spaces, each a number
    /// followed by `s`, `m`, `h` or `d` (as Java: `split(" ")`, the last character is the unit).
    pub fn parse(levels: &str) -> Result<Self, BrokerError> {
        let bad = |reason: String| BrokerError::InvalidDelayLevels {
            levels: levels.chars().take(200).collect(),
            reason,
        };
        let mut millis = Vec::new();
        for (i, value) in levels.split(' ').enumerate() {
            let Some(unit) = value.chars().last() else {
                return Err(bad(format!("level {} is empty (two spaces?)", i + 1)));
            };
            let per: i64 = match unit {
                's' => 1000,
                'm' => 60_000,
                'h' => 3_600_000,
                'd' => 86_400_000,
                _ => return Err(bad(format!("level {} ({value:?}) has no unit s, m, h or d", i + 1))),
            };
            let num: i64 = value[..value.len() - 1]
                .parse()
                .map_err(|_| bad(format!("level {} ({value:?}) is not a whole number", i + 1)))?;
            let ms =
                num.checked_mul(per).ok_or_else(|| bad(format!("level {} ({value:?}) overflows", i + 1)))?;
            millis.push(ms);
        }
        Ok(Self { millis })
    }

    /// The highest level (`maxDelayLevel`).
    pub fn max_level(&self) -> i32 {
        self.millis.len() as i32
    }

    /// The delay of `level` (1-based) in milliseconds.
    pub fn millis(&self, level: i32) -> Option<i64> {
        usize::try_from(level).ok().and_then(|l| l.checked_sub(1)).and_then(|i| self.millis.get(i)).copied()
    }

    /// `(level, millis)` for every level.
    pub fn iter(&self) -> impl Iterator<Item = (i32, i64)> + '_ {
        self.millis.iter().enumerate().map(|(i, &ms)| (i as i32 + 1, ms))
    }

    /// When a message stored at `store_timestamp` with `level` is due
    /// (`computeDeliverTimestamp`; an unknown level is due a second later, as in Java).
    pub fn deliver_timestamp(&self, level: i32, store_timestamp: i64) -> i64 {
        match self.millis(level) {
            Some(ms) => store_timestamp.saturating_add(ms),
            None => store_timestamp.saturating_add(1000),
        }
    }
}

/// The queue of `SCHEDULE_TOPIC_XXXX` that holds `level` (`delayLevel2QueueId`).
pub fn delay_level_to_queue_id(level: i32) -> i32 {
    level - 1
}

/// The level a queue of `SCHEDULE_TOPIC_XXXX` holds (`queueId2DelayLevel`).
pub fn queue_id_to_delay_level(queue_id: i32) -> i32 {
    queue_id + 1
}

/// Delay offsets with their version (`DelayOffsetSerializeWrapper`): `delayOffset.json` and the
/// `GET_ALL_DELAY_OFFSET` reply.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DelayOffsetSerializeWrapper {
    /// The next queue offset to deliver, by level.
    #[serde(default)]
    pub offset_table: BTreeMap<i32, i64>,
    /// The version (5.x; absent in 4.9).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_version: Option<DataVersion>,
}

impl DelayOffsetSerializeWrapper {
    /// Reads a delay table (a file's parsed content).
    pub(crate) fn from_json(v: &Value) -> Result<Self, BrokerError> {
        if !v.is_object() {
            return Err(BrokerError::BadContent {
                what: "delay offsets",
                reason: "not a JSON object".into(),
            });
        }
        from_value("delay offsets", v.clone())
    }
}

impl JsonBody for DelayOffsetSerializeWrapper {
    const JAVA_CLASS: &'static str = "DelayOffsetSerializeWrapper";
}

#[derive(Debug)]
struct Delays {
    table: BTreeMap<i32, i64>,
    data_version: DataVersion,
    updates: u64,
}

/// The delay-level offsets, persisted in `config/delayOffset.json` (the metadata half of
/// `ScheduleMessageService`; delivering delayed messages is not logship's).
#[derive(Debug)]
pub struct DelayOffsetManager {
    settings: BrokerSettings,
    levels: DelayLevels,
    inner: Managed<Delays>,
}

fn encode_delays(line: RocketmqLine) -> impl FnOnce(&Delays) -> Value {
    move |s| {
        to_value(&DelayOffsetSerializeWrapper {
            offset_table: s.table.clone(),
            data_version: (line == RocketmqLine::V5).then_some(s.data_version),
        })
    }
}

impl DelayOffsetManager {
    /// Opens the delay offsets of the store at `root` and parses `messageDelayLevel`.
    pub fn open(root: &Path, settings: BrokerSettings, now_ms: i64) -> Result<Self, BrokerError> {
        let levels = DelayLevels::parse(&settings.message_delay_level)?;
        let file = ConfigFile::in_store(root, DELAY_OFFSET_FILE, "delay offsets");
        let loaded = file.load(DelayOffsetSerializeWrapper::from_json)?;
        let (table, data_version) = match loaded {
            Some(w) => (w.offset_table, w.data_version.unwrap_or_else(|| DataVersion::new(now_ms))),
            None => (BTreeMap::new(), DataVersion::new(now_ms)),
        };
        Ok(Self {
            settings,
            levels,
            inner: Managed::new(file, Delays { table, data_version, updates: 0 }, false),
        })
    }

    /// The parsed delay levels.
    pub fn levels(&self) -> &DelayLevels {
        &self.levels
    }

    /// The file it persists to.
    pub fn path(&self) -> &Path {
        self.inner.file.path()
    }

    /// The offset of `level`, if recorded.
    pub fn offset(&self, level: i32) -> Option<i64> {
        self.inner.read(|s| s.table.get(&level).copied())
    }

    /// Every offset, by level.
    pub fn table(&self) -> BTreeMap<i32, i64> {
        self.inner.read(|s| s.table.clone())
    }

    /// The table's data version.
    pub fn data_version(&self) -> DataVersion {
        self.inner.read(|s| s.data_version)
    }

    /// What `GET_ALL_DELAY_OFFSET` returns (Java sends the file's text; this is its content).
    pub fn serialize_wrapper(&self) -> DelayOffsetSerializeWrapper {
        let v5 = self.settings.line == RocketmqLine::V5;
        self.inner.read(|s| DelayOffsetSerializeWrapper {
            offset_table: s.table.clone(),
            data_version: v5.then_some(s.data_version),
        })
    }

    /// `updateOffset`: records the next offset of `level`; in 5.x the version moves every
    /// `delayOffsetUpdateVersionStep` updates.
    pub fn update_offset(&self, level: i32, offset: i64, now_ms: i64) {
        let step = self.settings.delay_offset_update_version_step.max(1);
        let v5 = self.settings.line == RocketmqLine::V5;
        self.inner.update(|s| {
            s.table.insert(level, offset);
            s.updates += 1;
            if v5 && s.updates % step == 0 {
                s.data_version.next_version(now_ms, 0);
            }
            ((), true)
        });
    }

    /// `correctDelayOffset`: an offset outside its queue's `[min, max]` (`bounds(level)`) is
    /// moved to the nearest end. Returns the levels corrected.
    pub fn correct_against_queues(&self, bounds: impl Fn(i32) -> Option<(i64, i64)>) -> Vec<i32> {
        let levels: Vec<i32> = self.levels.iter().map(|(l, _)| l).collect();
        self.inner.update(|s| {
            let mut fixed = Vec::new();
            for level in levels {
                let (Some(&current), Some((min, max))) = (s.table.get(&level), bounds(level)) else {
                    continue;
                };
                let corrected = current.max(min).min(max.max(min));
                if corrected != current {
                    tracing::warn!(
                        level,
                        current,
                        corrected,
                        min,
                        max,
                        "delay offset outside its queue; corrected"
                    );
                    s.table.insert(level, corrected);
                    fixed.push(level);
                }
            }
            let changed = !fixed.is_empty();
            (fixed, changed)
        })
    }

    /// The slave side of `SlaveSynchronize.syncDelayOffset`: the master's levels overwrite the
    /// slave's (`putAll`, as 5.x reloads the file it just wrote; a level only the slave has is
    /// kept) and its version, if sent, is taken. Returns whether anything changed.
    pub fn replace_from_master(&self, master: &DelayOffsetSerializeWrapper) -> bool {
        self.inner.update(|s| {
            let mut changed = false;
            for (&level, &offset) in &master.offset_table {
                changed |= s.table.insert(level, offset) != Some(offset);
            }
            if let Some(v) = master.data_version {
                changed |= s.data_version != v;
                s.data_version = v;
            }
            (changed, changed)
        })
    }

    /// Whether updates wait to be persisted.
    pub fn is_dirty(&self) -> bool {
        self.inner.is_dirty()
    }

    /// Writes `delayOffset.json`.
    pub fn persist(&self) -> Result<(), BrokerError> {
        self.inner.persist(encode_delays(self.settings.line))
    }

    /// Writes `delayOffset.json` if anything changed since the last write.
    pub fn persist_if_dirty(&self) -> Result<bool, BrokerError> {
        self.inner.persist_if_dirty(encode_delays(self.settings.line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_levels_are_rocketmqs() {
        let l = DelayLevels::parse(DEFAULT_DELAY_LEVELS).unwrap();
        assert_eq!(l.max_level(), 18);
        assert_eq!(l.millis(1), Some(1000));
        assert_eq!(l.millis(5), Some(60_000));
        assert_eq!(l.millis(18), Some(7_200_000));
        assert_eq!((l.millis(0), l.millis(19), l.millis(-1)), (None, None, None));
        assert_eq!(l.deliver_timestamp(3, 100), 10_100);
        assert_eq!(l.deliver_timestamp(99, 100), 1_100);
        assert_eq!(DelayLevels::parse("1d 2h").unwrap().millis(1), Some(86_400_000));
        assert_eq!((delay_level_to_queue_id(1), queue_id_to_delay_level(17)), (0, 18));
    }

    #[test]
    fn bad_level_strings_are_refused_with_the_level() {
        for bad in ["1s  5s", "1x", "s", "1.5s", "", "99999999999999999d"] {
            let e = DelayLevels::parse(bad).unwrap_err();
            assert!(matches!(e, BrokerError::InvalidDelayLevels { .. }), "{bad:?}: {e}");
        }
    }

    #[test]
    fn offsets_persist_and_offsets_outside_their_queue_are_corrected() {
        let d = tempfile::tempdir().unwrap();
        let m = DelayOffsetManager::open(d.path(), BrokerSettings::default(), 1).unwrap();
        m.update_offset(1, 10, 2);
        m.update_offset(3, 7, 2);
        m.update_offset(18, 0, 2);
        m.persist().unwrap();
        let again = DelayOffsetManager::open(d.path(), BrokerSettings::default(), 3).unwrap();
        assert_eq!(again.table(), m.table());
        let fixed = again.correct_against_queues(|l| match l {
            1 => Some((0, 4)),
            18 => Some((5, 9)),
            _ => Some((0, 100)),
        });
        assert_eq!(fixed, vec![1, 18]);
        assert_eq!((again.offset(1), again.offset(18), again.offset(3)), (Some(4), Some(5), Some(7)));
    }

    #[test]
    fn a_slave_takes_the_masters_levels() {
        let d = tempfile::tempdir().unwrap();
        let m = DelayOffsetManager::open(d.path(), BrokerSettings::default(), 1).unwrap();
        m.update_offset(2, 5, 1);
        let w = DelayOffsetSerializeWrapper::decode(b"{\n\t\"offsetTable\":{1:10,3:8,18:0\n\t}\n}").unwrap();
        assert!(m.replace_from_master(&w));
        assert_eq!(m.table(), [(1, 10), (2, 5), (3, 8), (18, 0)].into());
        assert!(!m.replace_from_master(&w));
    }
}
