//! The epoch cache: which leader epoch wrote which range of the commit log (RocketMQ's
//! `EpochFileCache`, in memory only; the store persists it as `epochFileCheckpoint`).
//!
//! Entry `i` covers `[start_i, start_{i+1})`; the last entry runs to the log's end, which the
//! caller passes in wherever an end matters.
//!
//! **Empty epochs.** Java's `appendEntry` silently drops an epoch whose start equals the
//! previous one's (the previous epoch wrote nothing), so a broker can become master at epoch 8
//! and still record epoch 7 as its last, and a slave then compares the wrong epochs. Here an
//! epoch with no data still counts: both entries are kept, the earlier one covering the empty
//! range `[s, s)`, and [`EpochAppended::PreviousEmpty`] says so. The later epoch wins the shared
//! start: it is the one that holds the bytes from `s` on, and the last epoch is always the one
//! appended last. Keeping the empty entry matters: a peer that wrote data in that epoch finds
//! it and truncates to `s`, where dropping it would leave no shared epoch at all.

use super::Offset;

/// One leader epoch and the offset where its data starts.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EpochEntry {
    /// The epoch (Java `int`, never negative).
    pub epoch: i32,
    /// The first commit-log offset written in this epoch.
    pub start_offset: Offset,
}

/// Why an epoch entry or list was refused.
#[derive(thiserror::Error, Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum EpochError {
    /// An epoch is not above the last one.
    #[error("epoch {epoch} does not increase past the last epoch {last}")]
    EpochNotIncreasing {
        /// The epoch offered.
        epoch: i32,
        /// The last epoch held.
        last: i32,
    },
    /// An epoch starts before the previous epoch's start.
    #[error("epoch {epoch} starts at {start}, before the previous epoch's start {previous_start}")]
    StartWentBackwards {
        /// The epoch offered.
        epoch: i32,
        /// Its start.
        start: Offset,
        /// The previous epoch's start.
        previous_start: Offset,
    },
    /// An epoch number is negative.
    #[error("epoch {epoch} is negative")]
    NegativeEpoch {
        /// The epoch offered.
        epoch: i32,
    },
}

/// What [`EpochCache::append`] did.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum EpochAppended {
    /// A new entry was added.
    Added,
    /// A new entry was added at the previous last epoch's start: that epoch holds no data.
    /// Both are kept; the new one holds the bytes from the shared start on.
    PreviousEmpty {
        /// The epoch left empty.
        previous: EpochEntry,
    },
}

/// The epoch entries of one log, oldest first: epochs strictly increase, starts never
/// decrease (an entry sharing its start with the next one holds no data).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct EpochCache {
    entries: Vec<EpochEntry>,
}

impl EpochCache {
    /// An empty cache (a store that has never been in controller mode).
    pub fn new() -> Self {
        Self::default()
    }

    /// A cache holding `entries`, which must be oldest first with strictly increasing epochs,
    /// non-decreasing starts and no negative epoch (what the store reads back from its epoch
    /// file, or a master sends in its handshake).
    pub fn from_entries(entries: impl IntoIterator<Item = EpochEntry>) -> Result<Self, EpochError> {
        let mut cache = Self::new();
        for e in entries {
            if e.epoch < 0 {
                return Err(EpochError::NegativeEpoch { epoch: e.epoch });
            }
            if let Some(last) = cache.last() {
                if e.epoch <= last.epoch {
                    return Err(EpochError::EpochNotIncreasing { epoch: e.epoch, last: last.epoch });
                }
                if e.start_offset < last.start_offset {
                    return Err(EpochError::StartWentBackwards {
                        epoch: e.epoch,
                        start: e.start_offset,
                        previous_start: last.start_offset,
                    });
                }
            }
            cache.entries.push(e);
        }
        Ok(cache)
    }

    /// Every entry, oldest first.
    pub fn entries(&self) -> impl ExactSizeIterator<Item = EpochEntry> + '_ {
        self.entries.iter().copied()
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The newest entry.
    pub fn last(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// The newest epoch, or Java's `-1` for an empty cache.
    pub fn last_epoch(&self) -> i32 {
        self.last().map_or(-1, |e| e.epoch)
    }

    /// The entry for `epoch`.
    pub fn get(&self, epoch: i32) -> Option<EpochEntry> {
        self.entries.binary_search_by_key(&epoch, |e| e.epoch).ok().map(|i| self.entries[i])
    }

    /// The entry after `epoch`'s.
    pub fn next_after(&self, epoch: i32) -> Option<EpochEntry> {
        let i = self.entries.partition_point(|e| e.epoch <= epoch);
        self.entries.get(i).copied()
    }

    /// Where `epoch` ends: the next entry's start, or `log_end` for the last one.
    pub fn end_of(&self, epoch: i32, log_end: Offset) -> Option<Offset> {
        self.get(epoch)?;
        Some(self.next_after(epoch).map_or(log_end, |n| n.start_offset))
    }

    /// The entry whose range `[start, end)` holds `offset`, the last one running to `log_end`
    /// (Java `findEpochEntryByOffset`).
    pub fn find_by_offset(&self, offset: Offset, log_end: Offset) -> Option<EpochEntry> {
        let i = self.entries.partition_point(|e| e.start_offset <= offset);
        let entry = *self.entries.get(i.checked_sub(1)?)?;
        let end = self.entries.get(i).map_or(log_end, |n| n.start_offset);
        (offset < end).then_some(entry)
    }

    /// Records that `epoch` starts writing at `start`. The epoch must be above the last one and
    /// start at or after it; an equal start leaves the last epoch empty and keeps it.
    pub fn append(&mut self, epoch: i32, start: Offset) -> Result<EpochAppended, EpochError> {
        if epoch < 0 {
            return Err(EpochError::NegativeEpoch { epoch });
        }
        let entry = EpochEntry { epoch, start_offset: start };
        let Some(last) = self.last() else {
            self.entries.push(entry);
            return Ok(EpochAppended::Added);
        };
        if epoch <= last.epoch {
            return Err(EpochError::EpochNotIncreasing { epoch, last: last.epoch });
        }
        if start < last.start_offset {
            return Err(EpochError::StartWentBackwards { epoch, start, previous_start: last.start_offset });
        }
        self.entries.push(entry);
        if start == last.start_offset {
            return Ok(EpochAppended::PreviousEmpty { previous: last });
        }
        Ok(EpochAppended::Added)
    }

    /// Drops every entry that starts at or after `offset` (Java `truncateSuffixByOffset`);
    /// returns how many were dropped.
    pub fn truncate_from(&mut self, offset: Offset) -> usize {
        let keep = self.entries.partition_point(|e| e.start_offset < offset);
        let dropped = self.entries.len() - keep;
        self.entries.truncate(keep);
        dropped
    }

    /// Drops every entry that ends at or before `min` (Java `truncatePrefixByOffset`, after
    /// retention deleted old segments); the last entry is always kept.
    pub fn truncate_before(&mut self, min: Offset) -> usize {
        let ends_by = self.entries.windows(2).take_while(|w| w[1].start_offset <= min).count();
        self.entries.drain(..ends_by);
        ends_by
    }

    /// The newest `n` entries, oldest first (all of them when there are fewer).
    pub fn newest(&self, n: usize) -> &[EpochEntry] {
        &self.entries[self.entries.len().saturating_sub(n)..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache(entries: &[(i32, u64)]) -> EpochCache {
        EpochCache::from_entries(
            entries.iter().map(|&(epoch, start_offset)| EpochEntry { epoch, start_offset }),
        )
        .unwrap()
    }

    #[test]
    fn append_refuses_an_epoch_that_does_not_increase() {
        let mut c = cache(&[(3, 100)]);
        assert_eq!(c.append(3, 200), Err(EpochError::EpochNotIncreasing { epoch: 3, last: 3 }));
        assert_eq!(c.append(2, 200), Err(EpochError::EpochNotIncreasing { epoch: 2, last: 3 }));
        assert_eq!(
            c.append(4, 50),
            Err(EpochError::StartWentBackwards { epoch: 4, start: 50, previous_start: 100 })
        );
        assert_eq!(c.append(-1, 500), Err(EpochError::NegativeEpoch { epoch: -1 }));
        assert_eq!(c, cache(&[(3, 100)]));
    }

    #[test]
    fn an_empty_epoch_is_kept_and_the_next_one_recorded_not_dropped_silently() {
        // Java's appendEntry returns false for (8, 7000) after (7, 7000) and keeps 7 as last.
        let mut c = cache(&[(7, 7000)]);
        assert_eq!(
            c.append(8, 7000),
            Ok(EpochAppended::PreviousEmpty { previous: EpochEntry { epoch: 7, start_offset: 7000 } })
        );
        assert_eq!(c.last_epoch(), 8);
        assert_eq!(c, cache(&[(7, 7000), (8, 7000)]));
        assert_eq!(c.end_of(7, 9000), Some(7000), "the empty epoch covers nothing");
        assert_eq!(c.find_by_offset(7000, 9000).map(|e| e.epoch), Some(8), "the later epoch wins the start");
        assert_eq!(c.append(9, 9000), Ok(EpochAppended::Added));
        assert_eq!(c.last_epoch(), 9);
    }

    #[test]
    fn from_entries_refuses_unordered_lists_naming_the_fault() {
        let e = |epoch, start_offset| EpochEntry { epoch, start_offset };
        assert_eq!(
            EpochCache::from_entries([e(2, 0), e(1, 10)]),
            Err(EpochError::EpochNotIncreasing { epoch: 1, last: 2 })
        );
        assert!(EpochCache::from_entries([e(1, 10), e(2, 10)]).is_ok(), "an empty epoch is a valid entry");
        assert_eq!(
            EpochCache::from_entries([e(1, 10), e(2, 5)]),
            Err(EpochError::StartWentBackwards { epoch: 2, start: 5, previous_start: 10 })
        );
        assert_eq!(EpochCache::from_entries([e(-3, 0)]), Err(EpochError::NegativeEpoch { epoch: -3 }));
    }

    #[test]
    fn truncate_from_drops_entries_starting_at_or_after_the_cut() {
        let mut c = cache(&[(1, 0), (2, 100), (3, 200)]);
        assert_eq!(c.truncate_from(200), 1);
        assert_eq!(c, cache(&[(1, 0), (2, 100)]));
        assert_eq!(c.truncate_from(150), 0);
        assert_eq!(c.truncate_from(0), 2);
        assert!(c.is_empty());
        assert_eq!(c.last_epoch(), -1);
    }

    #[test]
    fn truncate_before_keeps_the_epoch_holding_the_min_offset() {
        let mut c = cache(&[(1, 0), (2, 100), (3, 200)]);
        assert_eq!(c.truncate_before(150), 1);
        assert_eq!(c, cache(&[(2, 100), (3, 200)]));
        assert_eq!(c.truncate_before(10_000), 1);
        assert_eq!(c, cache(&[(3, 200)]));
    }

    #[test]
    fn find_by_offset_uses_half_open_ranges() {
        let c = cache(&[(1, 100), (2, 300)]);
        assert_eq!(c.find_by_offset(99, 500), None);
        assert_eq!(c.find_by_offset(100, 500).map(|e| e.epoch), Some(1));
        assert_eq!(c.find_by_offset(299, 500).map(|e| e.epoch), Some(1));
        assert_eq!(c.find_by_offset(300, 500).map(|e| e.epoch), Some(2));
        assert_eq!(c.find_by_offset(500, 500), None);
        assert_eq!(c.end_of(1, 500), Some(300));
        assert_eq!(c.end_of(2, 500), Some(500));
        assert_eq!(c.next_after(1).map(|e| e.epoch), Some(2));
        assert_eq!(c.next_after(2), None);
    }
}
