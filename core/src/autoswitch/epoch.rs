//! `findConsistentPoint`: where two logs' epoch lists ([`EpochCache`]) stop agreeing. The
//! epoch list itself belongs to the log ([`crate::EpochCache`]); this module holds what the
//! AutoSwitch protocol does with it.

use super::frame::MAX_HANDSHAKE_EPOCHS;
use crate::log::{EpochCache, EpochEntry, Offset};

/// The newest [`MAX_HANDSHAKE_EPOCHS`] entries of `epochs`: what fits in a handshake reply.
pub(crate) fn handshake_entries(epochs: &EpochCache) -> &[EpochEntry] {
    epochs.newest(MAX_HANDSHAKE_EPOCHS)
}

/// The offset up to which two logs agree (Java `findConsistentPoint`): walking the local
/// epochs newest first, the first one the master has with the same start gives
/// `min(local end of it, master end of it)`. `None` when no epoch matches (Java's `-1`): the
/// logs share nothing provable and need an operator.
pub fn find_consistent_point(
    local: &EpochCache,
    local_end: Offset,
    master: &EpochCache,
    master_end: Offset,
) -> Option<Offset> {
    local.newest(usize::MAX).iter().rev().find_map(|l| {
        let m = master.get(l.epoch).filter(|m| m.start_offset == l.start_offset)?;
        let local_until = local.end_of(l.epoch, local_end)?;
        let master_until = master.end_of(m.epoch, master_end)?;
        Some(local_until.min(master_until))
    })
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

    const UNBOUNDED: u64 = i64::MAX as u64;

    #[test]
    fn consistent_point_is_the_shorter_end_of_the_newest_shared_epoch() {
        // EpochFileCacheTest sample 1: the master's epoch 3 starts elsewhere; epoch 2 matches.
        let local = cache(&[(1, 100), (2, 300), (3, 500)]);
        let master = cache(&[(1, 100), (2, 300), (3, 450)]);
        assert_eq!(find_consistent_point(&local, UNBOUNDED, &master, UNBOUNDED), Some(450));
    }

    #[test]
    fn consistent_point_with_the_same_epochs_is_the_shorter_log() {
        // Sample 2: same epochs, local end 700, master end 600.
        let local = cache(&[(1, 100), (2, 300), (3, 500)]);
        let master = cache(&[(1, 100), (2, 300), (3, 500)]);
        assert_eq!(find_consistent_point(&local, 700, &master, 600), Some(600));
    }

    #[test]
    fn no_shared_epoch_start_is_no_consistent_point() {
        // Sample 3: Java returns -1.
        let local = cache(&[(1, 100), (2, 300), (3, 500)]);
        let master = cache(&[(1, 200), (2, 500)]);
        assert_eq!(find_consistent_point(&local, 700, &master, UNBOUNDED), None);
    }

    #[test]
    fn consistent_point_against_a_master_with_a_newer_epoch() {
        // Sample 4, the reverse comparison: the local side has epoch 4 at 800.
        let local = cache(&[(1, 100), (2, 300), (3, 500), (4, 800)]);
        let other = cache(&[(1, 100), (2, 300), (3, 500)]);
        assert_eq!(find_consistent_point(&local, UNBOUNDED, &other, 700), Some(700));
    }

    #[test]
    fn empty_epoch_kept_lets_a_peer_that_wrote_in_it_truncate_to_its_start() {
        // A wrote 0..300 in epoch 1; B held nothing of it and became master at epoch 2 from 0.
        let local = cache(&[(1, 0)]);
        let master = cache(&[(1, 0), (2, 0)]);
        assert_eq!(find_consistent_point(&local, 300, &master, 500), Some(0));
    }
}
