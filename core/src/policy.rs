//! SYNC_MASTER arithmetic: which offset the slaves have replicated, and whether a wait can be
//! served at all. Pure functions over the per-connection acks; the master feeds them.

use crate::config::AckPolicy;
use crate::error::WaitError;
use crate::log::Offset;

/// The offset every byte before which is replicated as `policy` requires, given the current ack
/// of each connected slave that has reported, the master's `end`, and `max_gap`
/// (`ha_max_gap_not_in_sync`). `None` when no offset is.
///
/// - `AnySlave`: the highest ack (RocketMQ 4.x `push2SlaveMaxOffset`, but per live connection).
/// - `Quorum { n }`: the `(n - 1)`-th highest ack: `n - 1` slaves plus the master hold it.
/// - `AllInSync`: the lowest ack among slaves within `max_gap` of `end`.
pub fn frontier(policy: AckPolicy, acks: &[Offset], end: Offset, max_gap: u64) -> Option<Offset> {
    match policy {
        AckPolicy::AnySlave => acks.iter().copied().max(),
        AckPolicy::Quorum { in_sync_replicas } => {
            let needed = slaves_needed(in_sync_replicas);
            if needed == 0 {
                return Some(end);
            }
            if acks.len() < needed {
                return None;
            }
            let mut sorted = acks.to_vec();
            sorted.sort_unstable_by(|a, b| b.cmp(a));
            Some(sorted[needed - 1])
        }
        AckPolicy::AllInSync => acks.iter().copied().filter(|&a| in_sync(a, end, max_gap)).min(),
    }
}

/// Decides up front whether a wait for `offset` can be served (RocketMQ's `isSlaveOK` and
/// `IN_SYNC_REPLICAS_NOT_ENOUGH` checks), given the same acks as [`frontier`].
pub fn check_available(
    policy: AckPolicy,
    acks: &[Offset],
    offset: Offset,
    max_gap: u64,
) -> Result<(), WaitError> {
    if acks.is_empty() {
        return Err(WaitError::SlaveNotAvailable);
    }
    let in_sync_count = acks.iter().filter(|&&a| in_sync(a, offset, max_gap)).count();
    match policy {
        AckPolicy::AnySlave | AckPolicy::AllInSync if in_sync_count == 0 => Err(WaitError::SlaveNotAvailable),
        AckPolicy::Quorum { in_sync_replicas } if in_sync_count < slaves_needed(in_sync_replicas) => {
            Err(WaitError::InSyncReplicasNotEnough)
        }
        _ => Ok(()),
    }
}

/// Whether a slave at `ack` is within `max_gap` of `end`.
pub fn in_sync(ack: Offset, end: Offset, max_gap: u64) -> bool {
    end.saturating_sub(ack) < max_gap
}

fn slaves_needed(in_sync_replicas: u32) -> usize {
    in_sync_replicas.saturating_sub(1) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    const GAP: u64 = 256 << 20;

    #[test]
    fn any_slave_frontier_is_the_best_live_ack() {
        assert_eq!(frontier(AckPolicy::AnySlave, &[123, 124, 123, 125], 200, GAP), Some(125));
        assert_eq!(frontier(AckPolicy::AnySlave, &[], 200, GAP), None);
    }

    #[test]
    fn quorum_frontier_counts_the_master_as_one_replica() {
        // RocketMQ HAServerTest inSyncReplicasNums vectors: slaves at 123/124/123/125.
        let acks = [123, 124, 123, 125];
        let q = |n| frontier(AckPolicy::Quorum { in_sync_replicas: n }, &acks, 200, GAP);
        assert_eq!(q(2), Some(125));
        assert_eq!(q(3), Some(124));
        assert_eq!(q(4), Some(123));
        assert_eq!(q(5), Some(123));
        assert_eq!(q(6), None);
    }

    #[test]
    fn all_in_sync_frontier_ignores_slaves_beyond_the_gap() {
        let acks = [1_000, 10, 900];
        assert_eq!(frontier(AckPolicy::AllInSync, &acks, 1_000, 500), Some(900));
        assert_eq!(frontier(AckPolicy::AllInSync, &acks, 1_000, 2_000), Some(10));
        assert_eq!(frontier(AckPolicy::AllInSync, &[10], 1_000, 500), None);
    }

    #[test]
    fn no_slave_is_slave_not_available_for_every_policy() {
        for p in [AckPolicy::AnySlave, AckPolicy::AllInSync, AckPolicy::Quorum { in_sync_replicas: 2 }] {
            assert_eq!(check_available(p, &[], 10, GAP), Err(WaitError::SlaveNotAvailable), "{p:?}");
        }
    }

    #[test]
    fn gap_at_the_limit_is_slave_not_available() {
        // RocketMQ isSlaveOK: masterPutWhere - push2SlaveMaxOffset < haMaxGapNotInSync.
        assert_eq!(check_available(AckPolicy::AnySlave, &[0], GAP, GAP), Err(WaitError::SlaveNotAvailable));
        assert_eq!(check_available(AckPolicy::AnySlave, &[1], GAP, GAP), Ok(()));
        assert_eq!(check_available(AckPolicy::AnySlave, &[0, 5], GAP + 4, GAP), Ok(()));
    }

    #[test]
    fn quorum_that_cannot_be_met_is_in_sync_replicas_not_enough() {
        let q3 = AckPolicy::Quorum { in_sync_replicas: 3 };
        assert_eq!(check_available(q3, &[100], 100, GAP), Err(WaitError::InSyncReplicasNotEnough));
        assert_eq!(check_available(q3, &[100, 0], GAP + 1, GAP), Err(WaitError::InSyncReplicasNotEnough));
        assert_eq!(check_available(q3, &[100, 50], 100, GAP), Ok(()));
    }
}
