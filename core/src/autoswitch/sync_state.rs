//! The sync-state-set and confirmOffset arithmetic of an AutoSwitch master: pure functions
//! and a small record the master keeps. The set itself is an input (a coordinator owns it):
//! the master only *proposes* changes and applies what it is told.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::error::WaitError;
use crate::log::Offset;

/// A broker id as RocketMQ's controller assigns it (Java `Long`).
pub type BrokerId = i64;

/// RocketMQ `haMaxTimeSlaveNotCatchup`: a member behind for this long is proposed for removal.
pub const DEFAULT_HA_MAX_TIME_SLAVE_NOT_CATCHUP: Duration = Duration::from_secs(15);

/// How a SYNC put waits in controller mode (RocketMQ `allAckInSyncStateSet`, `inSyncReplicas`,
/// `minInSyncReplicas`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub struct SyncPolicy {
    /// Wait for every member of the sync-state-set (`allAckInSyncStateSet`).
    pub all_ack_in_sync_state_set: bool,
    /// Otherwise, copies needed counting the master (`inSyncReplicas`); 1 or less = no wait.
    pub in_sync_replicas: u32,
    /// Refuse a put at once when the set is smaller than this (`minInSyncReplicas`).
    pub min_in_sync_replicas: u32,
}

impl Default for SyncPolicy {
    fn default() -> Self {
        Self { all_ack_in_sync_state_set: false, in_sync_replicas: 1, min_in_sync_replicas: 1 }
    }
}

/// The sync-state-set as last applied, and a proposed change not yet applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyncStateSet {
    /// The master's own id, always a member.
    pub local: BrokerId,
    /// The set the coordinator applied.
    pub applied: BTreeSet<BrokerId>,
    /// The coordinator's epoch of that set.
    pub epoch: i32,
    /// A proposed set, sent to the coordinator and not yet applied.
    pub pending: Option<BTreeSet<BrokerId>>,
}

impl SyncStateSet {
    /// A set holding what the coordinator applied; the local id is added if missing.
    pub fn new(local: BrokerId, mut applied: BTreeSet<BrokerId>, epoch: i32) -> Self {
        applied.insert(local);
        Self { local, applied, epoch, pending: None }
    }

    /// The members whose acks count: the applied set, united with a pending proposal while
    /// one is outstanding (so that neither the old nor the new set can lose an acknowledged
    /// write, RocketMQ #5663).
    pub fn counted(&self) -> BTreeSet<BrokerId> {
        let mut set = self.applied.clone();
        if let Some(p) = &self.pending {
            set.extend(p.iter().copied());
        }
        set
    }

    /// Java `inSyncReplicasNums`: the larger of the applied and the pending set.
    pub fn in_sync_replicas(&self) -> usize {
        self.applied.len().max(self.pending.as_ref().map_or(0, BTreeSet::len))
    }

    /// The set a new proposal starts from: the pending one if any, else the applied one.
    pub fn latest(&self) -> &BTreeSet<BrokerId> {
        self.pending.as_ref().unwrap_or(&self.applied)
    }
}

/// confirmOffset: `min(end, ack of every counted member)`, or `None` (keep the previous value:
/// frozen) while a counted member other than the master has no live ack. `ack_of` gives the
/// ack of a member's live connection.
pub fn confirm_offset(
    set: &SyncStateSet,
    end: Offset,
    ack_of: impl Fn(BrokerId) -> Option<Offset>,
) -> Option<Offset> {
    let mut confirm = end;
    for id in set.counted() {
        if id == set.local {
            continue;
        }
        confirm = confirm.min(ack_of(id)?);
    }
    Some(confirm)
}

/// Decides up front whether a SYNC put can wait at all (RocketMQ `IN_SYNC_REPLICAS_NOT_ENOUGH`).
pub fn check_available(policy: SyncPolicy, set: &SyncStateSet) -> Result<(), WaitError> {
    if (set.in_sync_replicas() as u64) < u64::from(policy.min_in_sync_replicas) {
        return Err(WaitError::InSyncReplicasNotEnough);
    }
    Ok(())
}

/// The offset every byte before which is replicated as `policy` requires. `acks` holds, per
/// distinct live non-learner slave, its id and ack; `end` is the master's end.
pub fn frontier(policy: SyncPolicy, set: &SyncStateSet, acks: &[(BrokerId, Offset)], end: Offset) -> Offset {
    if policy.all_ack_in_sync_state_set {
        let mut f = end;
        for id in set.counted() {
            if id != set.local {
                f = f.min(acks.iter().find(|a| a.0 == id).map_or(0, |a| a.1));
            }
        }
        return f;
    }
    let needed = policy.in_sync_replicas.saturating_sub(1) as usize;
    if needed == 0 {
        return end;
    }
    let mut sorted: Vec<Offset> = acks.iter().map(|a| a.1).collect();
    sorted.sort_unstable_by(|a, b| b.cmp(a));
    sorted.get(needed - 1).copied().unwrap_or(0).min(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[i64]) -> BTreeSet<i64> {
        ids.iter().copied().collect()
    }

    #[test]
    fn confirm_is_the_lowest_member_ack_and_frozen_while_a_member_is_away() {
        let s = SyncStateSet::new(1, set(&[1, 2, 3]), 1);
        let acks = |id| match id {
            2 => Some(500),
            3 => Some(300),
            _ => None,
        };
        assert_eq!(confirm_offset(&s, 800, acks), Some(300));
        assert_eq!(confirm_offset(&s, 200, acks), Some(200));
        let away = |id| if id == 2 { Some(500) } else { None };
        assert_eq!(confirm_offset(&s, 800, away), None);
        assert_eq!(confirm_offset(&SyncStateSet::new(1, set(&[]), 1), 800, away), Some(800));
    }

    #[test]
    fn pending_change_counts_the_union_of_old_and_new_sets() {
        let mut s = SyncStateSet::new(1, set(&[1, 2]), 1);
        s.pending = Some(set(&[1, 3]));
        assert_eq!(s.counted(), set(&[1, 2, 3]));
        assert_eq!(s.in_sync_replicas(), 2);
        let acks = |id| match id {
            2 => Some(500),
            3 => Some(100),
            _ => None,
        };
        assert_eq!(confirm_offset(&s, 800, acks), Some(100));
    }

    #[test]
    fn all_ack_waits_for_every_member_and_a_missing_one_holds_it_at_zero() {
        let p = SyncPolicy { all_ack_in_sync_state_set: true, ..Default::default() };
        let s = SyncStateSet::new(1, set(&[1, 2, 3]), 1);
        assert_eq!(frontier(p, &s, &[(2, 500), (3, 400), (9, 900)], 800), 400);
        assert_eq!(frontier(p, &s, &[(2, 500)], 800), 0);
        assert_eq!(frontier(p, &SyncStateSet::new(1, set(&[1]), 1), &[], 800), 800);
    }

    #[test]
    fn count_mode_needs_in_sync_replicas_minus_one_slaves() {
        let s = SyncStateSet::new(1, set(&[1]), 1);
        let p = |n| SyncPolicy { in_sync_replicas: n, ..Default::default() };
        let acks = [(2, 300), (3, 500), (4, 100)];
        assert_eq!(frontier(p(1), &s, &acks, 800), 800);
        assert_eq!(frontier(p(2), &s, &acks, 800), 500);
        assert_eq!(frontier(p(3), &s, &acks, 800), 300);
        assert_eq!(frontier(p(5), &s, &acks, 800), 0);
    }

    #[test]
    fn set_smaller_than_min_in_sync_replicas_is_in_sync_replicas_not_enough() {
        let p = SyncPolicy { min_in_sync_replicas: 2, ..Default::default() };
        assert_eq!(
            check_available(p, &SyncStateSet::new(1, set(&[1]), 1)),
            Err(WaitError::InSyncReplicasNotEnough)
        );
        assert_eq!(check_available(p, &SyncStateSet::new(1, set(&[1, 2]), 1)), Ok(()));
        let mut s = SyncStateSet::new(1, set(&[1]), 1);
        s.pending = Some(set(&[1, 2]));
        assert_eq!(check_available(p, &s), Ok(()));
    }
}
