//! Automatic failover of a broker group through an external coordinator (etcd in the logship
//! binary; RocketMQ's own controller could be another implementation).
//!
//! A broker group keeps one [`GroupRecord`] in the coordinator: `{masterEpoch, masterId,
//! master HA and HTTP addresses, syncStateSet, syncStateSetEpoch}`. It changes only by
//! compare-and-swap on its revision. Every broker holds a lease, renewed in the background, and
//! publishes its [`MemberState`] under it; a member whose lease is gone is not live.
//!
//! - **Election** ([`choose_master`], [`elected_record`]): when the master is not live, the
//!   live members of the sync-state-set compete; the highest (epoch, max offset) wins and
//!   writes masterEpoch + 1 and set = {itself}. No unclean election unless
//!   [`ElectionPolicy::unclean`].
//! - **Set changes** ([`apply_set_change`]): only the master of the current epoch, from the
//!   set epoch it read, and never without itself.
//! - **Fencing** ([`LeaseGuard`]): a master stops acknowledging `margin` before its lease
//!   could expire, so it has stopped before anyone can be elected in its place. The put path
//!   asks the broker's [`LeaseFence`] before it stores a put and before it acknowledges one.
//! - **Audit** ([`RecordAudit`]): what a read saw is checked against what these steps can
//!   write; a record no step explains is reported as a [`RecordAnomaly`] and not acted on.
//!
//! The record is stored as versioned text, readable with `etcdctl get`, and decoded strictly
//! (anything [`GroupRecord::encode`] would not write is a [`RecordError`]):
//!
//! ```text
//! logship-group-record 1
//! masterEpoch=3
//! masterId=1
//! masterHaAddress=127.0.0.1:10912
//! masterHttpAddress=127.0.0.1:8080
//! syncStateSet=1,2
//! syncStateSetEpoch=4
//! ```
//!
//! Everything here is pure and takes time as `now`; the [`Coordinator`] trait is what a
//! broker's services call, and an implementation does the I/O.

mod audit;
mod decide;
mod election;
mod lease;
mod record;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use audit::{Mastership, MastershipKey, RecordAnomaly, RecordAudit, Verdict};
pub use decide::{Action, LocalRole, Situation, decide};
pub use election::{
    CasConflict, Choice, ElectionError, ElectionPolicy, MemoryRecord, Revision, SetChange, SetChangeRefusal,
    apply_set_change, choose_master, elected_record,
};
pub use lease::{LeaseConfig, LeaseConfigError, LeaseFence, LeaseGuard, LeaseSnapshot};
pub use record::{GroupRecord, MAX_RECORD_LEN, MAX_SET_MEMBERS, MemberState, RECORD_VERSION, RecordError};

use crate::autoswitch::BrokerId;
use crate::service::future::ServiceFuture;

/// A value read from the coordinator with its revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Versioned<T> {
    /// The revision the value was written at (etcd's `mod_revision`).
    pub revision: Revision,
    /// The value.
    pub value: T,
}

/// The group as one consistent read saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupView {
    /// The record (`None` before the group's first election, or when it does not decode).
    pub record: Option<Versioned<GroupRecord>>,
    /// Why the stored record does not decode, and its revision (`record` is `None` then).
    pub record_error: Option<Versioned<RecordError>>,
    /// The revision of whatever the record's key holds (`None`: no key), decodable or not.
    pub record_revision: Option<Revision>,
    /// The record's master still holds its mastership: the mastership key names it and its
    /// epoch and is [live](Mastership::is_live).
    pub master_live: bool,
    /// The mastership key as read.
    pub mastership: MastershipKey,
    /// The live members' published states, by broker id.
    pub live: Vec<MemberState>,
    /// Member keys that do not decode, or name another broker (left out of `live`).
    pub unreadable_members: Vec<RecordAnomaly>,
}

/// How a campaign ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CampaignOutcome {
    /// This broker is master of the record's epoch.
    Elected(Versioned<GroupRecord>),
    /// The record's master is live.
    MasterAlive(BrokerId),
    /// Another live broker ranks higher and should win.
    Outranked(BrokerId),
    /// No live broker may become master (see [`Choice::NoCandidate`]).
    NoCandidate,
    /// The record or the membership changed between the read and the compare-and-swap.
    LostRace,
    /// The record read is not trusted ([`RecordAudit`]) and no record was trusted before, so
    /// there is nothing to elect from.
    Untrusted,
}

/// How a set change ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SetChangeOutcome {
    /// The change is committed: apply it.
    Applied(Versioned<GroupRecord>),
    /// The change is refused under the current record.
    Refused(SetChangeRefusal),
}

/// A change of the group record seen by a [`RecordWatch`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WatchEvent {
    /// The record was written.
    Changed(Versioned<GroupRecord>),
    /// The record was deleted (by an operator).
    Deleted {
        /// The revision of the deletion.
        revision: Revision,
    },
}

/// A coordinator's request failed. Nothing was changed unless the coordinator says otherwise.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CoordinatorError {
    /// The coordinator could not be reached or refused the request.
    #[error("coordinator unavailable: {0}")]
    Unavailable(String),
    /// The coordinator did not answer in time.
    #[error("coordinator did not answer within {0:?}")]
    Timeout(Duration),
    /// The stored group record is malformed.
    #[error("stored group record `{key}` is malformed: {source}")]
    Record {
        /// Its key.
        key: String,
        /// What is wrong with it.
        source: RecordError,
    },
    /// A stored member state is malformed.
    #[error("stored member state `{key}` is malformed: {source}")]
    Member {
        /// Its key.
        key: String,
        /// What is wrong with it.
        source: RecordError,
    },
    /// A member key names another broker than the state stored under it.
    #[error("member key `{key}` holds the state of broker {broker_id}")]
    MemberKeyMismatch {
        /// The key.
        key: String,
        /// The broker id in the state.
        broker_id: BrokerId,
    },
    /// This broker's lease is gone; the coordinator grants a new one, but a master of the old
    /// lease must step down.
    #[error("this broker's lease is lost")]
    LeaseLost,
    /// The watch ended (cancelled or compacted past): read the record again and watch anew.
    #[error("the record watch ended: {0}")]
    WatchEnded(String),
    /// The group's epochs are exhausted.
    #[error(transparent)]
    Election(#[from] ElectionError),
}

/// A stream of every change of the group record, in revision order, from the revision after
/// the read it started from.
pub trait RecordWatch: Send {
    /// The next change.
    fn next(&mut self) -> ServiceFuture<'_, Result<WatchEvent, CoordinatorError>>;
}

/// A broker's view of its group's coordinator.
pub trait Coordinator: Send + Sync {
    /// This broker's id.
    fn broker_id(&self) -> BrokerId;

    /// The current state of this broker's lease guard: a master acknowledges a put only while
    /// it [is open](LeaseSnapshot::is_open), and steps down once it is lost.
    fn lease(&self) -> LeaseSnapshot;

    /// Publishes this broker's state under its lease (for elections and routing).
    fn publish(&self, state: MemberState) -> ServiceFuture<'_, Result<(), CoordinatorError>>;

    /// The record and the live members, in one consistent read.
    fn group(&self) -> ServiceFuture<'_, Result<GroupView, CoordinatorError>>;

    /// Publishes `me`, then tries to become master: by [`choose_master`] over one consistent
    /// read, and if this broker wins, by a compare-and-swap writing [`elected_record`] (and
    /// this broker's mastership under its lease) that holds only while the record is as read,
    /// the mastership key is as read and holds no mastership, and this broker's lease holds its
    /// member state. The read is judged by `audit` (this broker's memory of the group): over a
    /// record it does not trust, the election starts from the last record it trusted.
    fn campaign(
        &self,
        me: MemberState,
        policy: ElectionPolicy,
        audit: RecordAudit,
    ) -> ServiceFuture<'_, Result<CampaignOutcome, CoordinatorError>>;

    /// Proposes a set change ([`apply_set_change`]) by compare-and-swap while this broker's
    /// lease holds.
    fn change_sync_state_set(
        &self,
        change: SetChange,
    ) -> ServiceFuture<'_, Result<SetChangeOutcome, CoordinatorError>>;

    /// The record now, and a watch of every change after it.
    fn watch(&self) -> ServiceFuture<'_, Result<WatchStart, CoordinatorError>>;
}

/// What [`Coordinator::watch`] returns.
pub struct WatchStart {
    /// The record as of the watch's start (`None`: no record yet).
    pub record: Option<Versioned<GroupRecord>>,
    /// Every change after it.
    pub watch: Box<dyn RecordWatch>,
}
