//! The election rule, set-change proposals, and an in-memory record with etcd's
//! compare-and-swap semantics.
//!
//! - [`choose_master`]: who, if anyone, should become master, given the record and the live
//!   members.
//! - [`elected_record`]: the record the winner writes (masterEpoch + 1, set = {winner}).
//! - [`apply_set_change`]: a master's proposal to shrink or expand the set, checked under its
//!   epoch.
//! - [`MemoryRecord`]: one revisioned cell changed only by compare-and-swap.

use std::collections::BTreeSet;

use crate::autoswitch::BrokerId;

use super::record::{GroupRecord, MAX_SET_MEMBERS, MemberState};

/// How a group elects.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ElectionPolicy {
    /// Allow an election from live brokers outside the sync-state-set when no member of it is
    /// live (RocketMQ `enableElectUncleanMaster`). Off by default: such a master may lack
    /// acknowledged messages, which are then lost.
    pub unclean: bool,
}

/// What [`choose_master`] decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// The record's master is live: no election.
    MasterAlive(BrokerId),
    /// This live broker should become master.
    Elect {
        /// The winner.
        winner: BrokerId,
        /// The winner is outside the sync-state-set (only with [`ElectionPolicy::unclean`]).
        unclean: bool,
    },
    /// No live broker may become master: the group stays without one until a member of the
    /// sync-state-set is live again.
    NoCandidate,
}

/// The election rule.
///
/// - While the record's master holds its mastership (`master_live`: in etcd, the master key
///   the election wrote under the master's lease still exists), there is no election. A master
///   that restarted is live as a member only, under a new lease, and competes like the others.
/// - Otherwise the live members of the sync-state-set compete (all live brokers when no record
///   exists yet, or, with [`ElectionPolicy::unclean`] only, when no set member is live).
/// - The highest (epoch, max offset) wins, both compared as 64-bit integers (RocketMQ's
///   `(int)(long - long)` comparison picked the lower offset past 2 GiB, #10578); a tie goes to
///   the lowest broker id, so every broker computes the same winner.
pub fn choose_master(
    record: Option<&GroupRecord>,
    master_live: bool,
    live: &[MemberState],
    policy: ElectionPolicy,
) -> Choice {
    if let Some(record) = record {
        if master_live {
            return Choice::MasterAlive(record.master_id);
        }
    }
    let in_set = |m: &&MemberState| record.is_none_or(|r| r.sync_state_set.contains(&m.broker_id));
    let best = |candidates: &mut dyn Iterator<Item = &MemberState>| {
        candidates
            .max_by_key(|m| (i64::from(m.epoch), m.max_offset, std::cmp::Reverse(m.broker_id)))
            .map(|m| m.broker_id)
    };
    if let Some(winner) = best(&mut live.iter().filter(in_set)) {
        return Choice::Elect { winner, unclean: false };
    }
    if policy.unclean {
        if let Some(winner) = best(&mut live.iter()) {
            return Choice::Elect { winner, unclean: true };
        }
    }
    Choice::NoCandidate
}

/// An election or set change cannot produce a record.
#[derive(thiserror::Error, Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElectionError {
    /// masterEpoch or syncStateSetEpoch is at `i32::MAX`.
    #[error("the group's epochs are exhausted (i32::MAX reached)")]
    EpochExhausted,
}

/// The record the winner of an election writes: masterEpoch one above both the record's and
/// the winner's own last epoch (so that the new epoch is above every epoch in the winner's log
/// even if the record was lost), the winner's addresses, and the set {winner} at the next set
/// epoch.
pub fn elected_record(
    current: Option<&GroupRecord>,
    winner: &MemberState,
) -> Result<GroupRecord, ElectionError> {
    let base = current.map_or(0, |r| r.master_epoch).max(winner.epoch);
    let master_epoch = base.checked_add(1).ok_or(ElectionError::EpochExhausted)?;
    let sync_state_set_epoch =
        current.map_or(0, |r| r.sync_state_set_epoch).checked_add(1).ok_or(ElectionError::EpochExhausted)?;
    Ok(GroupRecord {
        master_epoch,
        master_id: winner.broker_id,
        master_ha_addr: winner.ha_addr,
        master_http_addr: winner.http_addr,
        sync_state_set: BTreeSet::from([winner.broker_id]),
        sync_state_set_epoch,
    })
}

/// A master's proposal to change the sync-state-set, made under the epochs it knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetChange {
    /// The proposing broker (it must be the master).
    pub proposer: BrokerId,
    /// The master epoch the proposer is master in.
    pub master_epoch: i32,
    /// The set epoch the proposal changes.
    pub sync_state_set_epoch: i32,
    /// The proposed set.
    pub new_set: BTreeSet<BrokerId>,
}

/// Why a set change was refused.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SetChangeRefusal {
    /// The proposer is not the record's master.
    #[error("broker {proposer} is not the master (the master is {master})")]
    NotMaster {
        /// The proposer.
        proposer: BrokerId,
        /// The record's master.
        master: BrokerId,
    },
    /// The proposal was made in an older (or a future) master epoch.
    #[error("proposed in master epoch {proposed}; the group is in epoch {current}")]
    StaleMasterEpoch {
        /// The proposal's epoch.
        proposed: i32,
        /// The record's epoch.
        current: i32,
    },
    /// The proposal changes a set that has changed since.
    #[error("proposed against set epoch {proposed}; the set is at epoch {current}")]
    StaleSetEpoch {
        /// The proposal's set epoch.
        proposed: i32,
        /// The record's set epoch.
        current: i32,
    },
    /// The record names the proposer as master, but from an earlier lease (it restarted or
    /// lost its lease): it must be elected again before it changes anything.
    #[error("broker {0} is the record's master from an earlier lease and must be elected again")]
    MastershipLost(BrokerId),
    /// The proposed set lacks the master.
    #[error("the proposed set does not hold the master {master}")]
    MasterNotInSet {
        /// The master.
        master: BrokerId,
    },
    /// The proposed set holds a negative broker id.
    #[error("the proposed set holds the invalid broker id {0}")]
    InvalidMember(BrokerId),
    /// The proposed set is larger than [`MAX_SET_MEMBERS`].
    #[error("the proposed set has {0} members, over the limit of 256")]
    TooLarge(usize),
    /// The proposed set is the current one.
    #[error("the proposed set is the current one")]
    Unchanged,
    /// The set epoch cannot grow.
    #[error(transparent)]
    Election(#[from] ElectionError),
}

/// The record after `change`, or why it is refused. Only the master of the record's epoch may
/// change the set, only from the set epoch it read, and never to a set without itself: so an
/// old master that lost its place cannot shrink the set to acknowledge alone.
pub fn apply_set_change(current: &GroupRecord, change: &SetChange) -> Result<GroupRecord, SetChangeRefusal> {
    if change.proposer != current.master_id {
        return Err(SetChangeRefusal::NotMaster { proposer: change.proposer, master: current.master_id });
    }
    if change.master_epoch != current.master_epoch {
        return Err(SetChangeRefusal::StaleMasterEpoch {
            proposed: change.master_epoch,
            current: current.master_epoch,
        });
    }
    if change.sync_state_set_epoch != current.sync_state_set_epoch {
        return Err(SetChangeRefusal::StaleSetEpoch {
            proposed: change.sync_state_set_epoch,
            current: current.sync_state_set_epoch,
        });
    }
    if !change.new_set.contains(&current.master_id) {
        return Err(SetChangeRefusal::MasterNotInSet { master: current.master_id });
    }
    if let Some(&id) = change.new_set.iter().find(|&&id| id < 0) {
        return Err(SetChangeRefusal::InvalidMember(id));
    }
    if change.new_set.len() > MAX_SET_MEMBERS {
        return Err(SetChangeRefusal::TooLarge(change.new_set.len()));
    }
    if change.new_set == current.sync_state_set {
        return Err(SetChangeRefusal::Unchanged);
    }
    let sync_state_set_epoch =
        current.sync_state_set_epoch.checked_add(1).ok_or(ElectionError::EpochExhausted)?;
    Ok(GroupRecord { sync_state_set: change.new_set.clone(), sync_state_set_epoch, ..current.clone() })
}

/// A record's revision in its store: 0 while the record does not exist; every write gives a
/// higher one (etcd's `mod_revision`).
pub type Revision = i64;

/// A compare-and-swap found another revision than expected.
#[derive(thiserror::Error, Copy, Clone, Debug, PartialEq, Eq, Hash)]
#[error("compare-and-swap expected revision {expected}, found {found}")]
pub struct CasConflict {
    /// The revision the writer read.
    pub expected: Revision,
    /// The revision stored.
    pub found: Revision,
}

/// One group record in memory, changed only by compare-and-swap on its revision, as in etcd:
/// the model the property tests check the rules against, and a fake coordinator's store.
#[derive(Clone, Debug, Default)]
pub struct MemoryRecord {
    revision: Revision,
    record: Option<GroupRecord>,
}

impl MemoryRecord {
    /// An absent record (revision 0).
    pub fn new() -> Self {
        Self::default()
    }

    /// The record and its revision.
    pub fn read(&self) -> (Revision, Option<&GroupRecord>) {
        (self.revision, self.record.as_ref())
    }

    /// Stores `record` if the revision is still `expected`; returns the new revision.
    pub fn compare_and_swap(
        &mut self,
        expected: Revision,
        record: GroupRecord,
    ) -> Result<Revision, CasConflict> {
        if expected != self.revision {
            return Err(CasConflict { expected, found: self.revision });
        }
        self.revision += 1;
        self.record = Some(record);
        Ok(self.revision)
    }
}
