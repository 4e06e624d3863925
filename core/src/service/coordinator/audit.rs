//! Checking what a read of the group saw against what the protocol can produce.
//!
//! Only two protocol steps write the group record: an **election** writes a record with a
//! higher master epoch (the winner alone in the set, the set epoch one up) together with the
//! **mastership key** (`<brokerId> <masterEpoch>`) under the winner's lease, in one transaction;
//! a **set change** by that master keeps its epoch and addresses and moves the set epoch one up.
//! So, at any consistent read:
//!
//! - a live mastership key names the record's master and epoch (they were written together, and
//!   only the master changes the record after that);
//! - between two reads the master epoch never goes back, one epoch has one master at one pair of
//!   addresses, and within an epoch the set epoch never goes back;
//! - a member of the set has published a member state (a broker joins the set only once it
//!   streams from the master, and publishes before that).
//!
//! A mastership key is live while it is attached to a lease and the broker it names holds a
//! live member key: an election writes both under the winner's lease, and they vanish together
//! when it expires. A key written without a lease, or under a lease of someone else, would
//! otherwise never expire and block every failover.
//!
//! [`RecordAudit::check`] remembers the last record it trusted and the brokers it has seen, and
//! turns each read into a [`Verdict`]: the record to act on, whether the record's master holds
//! its mastership, and the [`RecordAnomaly`]s found. A record that breaks the rules above is not
//! trusted: the broker keeps acting on the last record it trusted, so a forged write can neither
//! step a healthy master down nor send the slaves to a broker that holds no mastership.

use std::collections::BTreeSet;

use crate::autoswitch::BrokerId;

use super::record::{GroupRecord, RecordError};
use super::{GroupView, Revision, Versioned};

/// The mastership key as read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MastershipKey {
    /// No key: nobody holds the mastership.
    Absent,
    /// A key naming a broker and an epoch.
    Present(Mastership),
    /// A key whose value is not `<brokerId> <masterEpoch>`.
    Malformed {
        /// The value, cut to 64 characters.
        value: String,
        /// The key's revision.
        revision: Revision,
    },
}

/// A mastership key naming a broker and an epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mastership {
    /// The broker it names.
    pub broker_id: BrokerId,
    /// The master epoch it names.
    pub master_epoch: i32,
    /// The lease it is attached to (0: none).
    pub lease: i64,
    /// The broker it names holds a live member key.
    pub holder_live: bool,
    /// The key's revision.
    pub revision: Revision,
}

impl Mastership {
    /// Reads a key's value, `<brokerId> <masterEpoch>`.
    pub fn parse(value: &[u8]) -> Option<(BrokerId, i32)> {
        let text = std::str::from_utf8(value).ok()?;
        let (id, epoch) = text.split_once(' ')?;
        let canonical = |s: &str| {
            !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
        };
        if !canonical(id) || !canonical(epoch) {
            return None;
        }
        Some((id.parse().ok()?, epoch.parse().ok().filter(|e: &i32| *e >= 1)?))
    }

    /// Whether it holds a mastership: attached to a lease, which the broker it names holds.
    pub fn is_live(&self) -> bool {
        self.lease != 0 && self.holder_live
    }

    /// Whether it names `record`'s master and epoch.
    pub fn matches(&self, record: &GroupRecord) -> bool {
        self.broker_id == record.master_id && self.master_epoch == record.master_epoch
    }
}

impl MastershipKey {
    /// The live mastership, if any.
    pub fn live(&self) -> Option<&Mastership> {
        match self {
            Self::Present(m) if m.is_live() => Some(m),
            _ => None,
        }
    }

    /// Whether `record`'s master holds its mastership now.
    pub fn holds(&self, record: &GroupRecord) -> bool {
        self.live().is_some_and(|m| m.matches(record))
    }
}

/// Something a read of the group saw that no protocol step explains.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordAnomaly {
    /// The record does not decode.
    #[error("the group record at revision {revision} does not decode: {error}")]
    Undecodable {
        /// Its revision.
        revision: Revision,
        /// Why.
        error: RecordError,
    },
    /// A member key does not decode, or names another broker.
    #[error("member key {key} is unreadable: {error}")]
    MemberUnreadable {
        /// The key.
        key: String,
        /// Why.
        error: String,
    },
    /// The mastership key's value is not `<brokerId> <masterEpoch>`.
    #[error("the mastership key holds {value:?}, not `<brokerId> <masterEpoch>`: it counts as no master")]
    MastershipMalformed {
        /// The value, cut.
        value: String,
    },
    /// The mastership key is attached to no lease (an election always attaches it to the
    /// winner's): it would never expire.
    #[error(
        "the mastership key (broker {broker_id}, epoch {master_epoch}) has no lease, so it would never \
         expire: it counts as no master"
    )]
    MastershipWithoutLease {
        /// The broker it names.
        broker_id: BrokerId,
        /// The epoch it names.
        master_epoch: i32,
    },
    /// The mastership key is attached to a lease the broker it names does not hold.
    #[error(
        "the mastership key (broker {broker_id}, epoch {master_epoch}) is held by a lease broker \
         {broker_id} does not hold: it counts as no master"
    )]
    MastershipOfAStranger {
        /// The broker it names.
        broker_id: BrokerId,
        /// The epoch it names.
        master_epoch: i32,
    },
    /// The record names another master or epoch than the live mastership key.
    #[error(
        "the group record names broker {record_master} in epoch {record_epoch}, but broker {key_master} \
         holds the mastership of epoch {key_epoch}: no election wrote this record"
    )]
    MismatchesMastership {
        /// The record's master.
        record_master: BrokerId,
        /// The record's epoch.
        record_epoch: i32,
        /// The key's broker.
        key_master: BrokerId,
        /// The key's epoch.
        key_epoch: i32,
    },
    /// The record is gone while a broker holds the mastership.
    #[error("the group record is gone while broker {key_master} holds the mastership of epoch {key_epoch}")]
    MissingWithLiveMastership {
        /// The key's broker.
        key_master: BrokerId,
        /// The key's epoch.
        key_epoch: i32,
    },
    /// The master epoch went back.
    #[error("the group record's master epoch went back from {from} to {to}")]
    MasterEpochWentBack {
        /// The epoch trusted before.
        from: i32,
        /// The epoch read.
        to: i32,
    },
    /// A second master in one epoch.
    #[error("the group record names broker {second} as master of epoch {epoch}, which broker {first} holds")]
    SecondMasterInEpoch {
        /// The epoch.
        epoch: i32,
        /// Its master, as trusted before.
        first: BrokerId,
        /// The one read.
        second: BrokerId,
    },
    /// The master's addresses changed within its epoch (only an election writes them).
    #[error("the group record moved master {master}'s addresses within epoch {epoch}")]
    MasterMovedWithinEpoch {
        /// The epoch.
        epoch: i32,
        /// The master.
        master: BrokerId,
    },
    /// The set epoch went back within a master epoch.
    #[error(
        "the group record's sync-state-set epoch went back from {from} to {to} in master epoch {master_epoch}"
    )]
    SetEpochWentBack {
        /// The master epoch.
        master_epoch: i32,
        /// The set epoch trusted before.
        from: i32,
        /// The one read.
        to: i32,
    },
    /// The set names brokers that never published a member state.
    #[error(
        "the group record's sync-state-set names broker(s) {}, which never joined the group",
        .ids.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    UnknownMembers {
        /// The strangers.
        ids: Vec<BrokerId>,
    },
}

impl RecordAnomaly {
    /// Whether the record read cannot be acted on (the others are about the mastership key or
    /// a member key; the record itself may still be right).
    pub fn refuses_record(&self) -> bool {
        !matches!(
            self,
            Self::MemberUnreadable { .. }
                | Self::MastershipMalformed { .. }
                | Self::MastershipWithoutLease { .. }
                | Self::MastershipOfAStranger { .. }
        )
    }
}

/// What to act on after one read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    /// The record to act on: the one read if trusted, else the last one trusted.
    pub record: Option<Versioned<GroupRecord>>,
    /// That record's master holds its mastership.
    pub master_live: bool,
    /// The record read was trusted.
    pub trusted: bool,
    /// Whether the broker may act at all: `false` when the record read is not trusted and no
    /// record was trusted before (nothing to fall back on).
    pub act: bool,
    /// What the read saw that no protocol step explains.
    pub anomalies: Vec<RecordAnomaly>,
}

/// The memory [`check`](Self::check) judges each read by.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordAudit {
    trusted: Option<Versioned<GroupRecord>>,
    known: BTreeSet<BrokerId>,
}

impl RecordAudit {
    /// No record trusted yet, no broker seen.
    pub fn new() -> Self {
        Self::default()
    }

    /// The last record trusted.
    pub fn trusted(&self) -> Option<&Versioned<GroupRecord>> {
        self.trusted.as_ref()
    }

    /// Trusts a record this broker wrote itself (it won an election, a set change of its
    /// committed, it restored the record): later reads are judged against it. An older one
    /// than the record trusted is ignored.
    pub fn trust_own(&mut self, record: Versioned<GroupRecord>) {
        if self.trusted.as_ref().is_none_or(|t| t.revision < record.revision) {
            self.known.extend(record.value.sync_state_set.iter().copied());
            self.trusted = Some(record);
        }
    }

    /// Judges one read of the group; a trusted record becomes the one later reads are judged
    /// against.
    pub fn check(&mut self, view: &GroupView) -> Verdict {
        self.known.extend(view.live.iter().map(|m| m.broker_id));
        let mut anomalies = view.unreadable_members.clone();
        match &view.mastership {
            MastershipKey::Malformed { value, .. } => {
                anomalies.push(RecordAnomaly::MastershipMalformed { value: value.clone() })
            }
            MastershipKey::Present(m) if m.lease == 0 => {
                anomalies.push(RecordAnomaly::MastershipWithoutLease {
                    broker_id: m.broker_id,
                    master_epoch: m.master_epoch,
                })
            }
            MastershipKey::Present(m) if !m.holder_live => {
                anomalies.push(RecordAnomaly::MastershipOfAStranger {
                    broker_id: m.broker_id,
                    master_epoch: m.master_epoch,
                })
            }
            _ => {}
        }
        if let Some(error) = &view.record_error {
            anomalies
                .push(RecordAnomaly::Undecodable { revision: error.revision, error: error.value.clone() });
        }
        let live = view.mastership.live();
        match (&view.record, live) {
            (None, Some(m)) if view.record_error.is_none() => {
                anomalies.push(RecordAnomaly::MissingWithLiveMastership {
                    key_master: m.broker_id,
                    key_epoch: m.master_epoch,
                });
            }
            (Some(r), Some(m)) if !m.matches(&r.value) => {
                anomalies.push(RecordAnomaly::MismatchesMastership {
                    record_master: r.value.master_id,
                    record_epoch: r.value.master_epoch,
                    key_master: m.broker_id,
                    key_epoch: m.master_epoch,
                });
            }
            _ => {}
        }
        if let (Some(r), Some(before)) = (&view.record, &self.trusted) {
            if r.revision != before.revision {
                anomalies.extend(self.history(&before.value, &r.value));
            }
        }
        let trusted = !anomalies.iter().any(RecordAnomaly::refuses_record);
        if trusted {
            self.trusted = view.record.clone();
            if let Some(r) = &self.trusted {
                self.known.extend(r.value.sync_state_set.iter().copied());
            }
            let master_live = view.record.as_ref().is_some_and(|r| view.mastership.holds(&r.value));
            return Verdict { record: view.record.clone(), master_live, trusted, act: true, anomalies };
        }
        let record = self.trusted.clone();
        let master_live = record.as_ref().is_some_and(|r| view.mastership.holds(&r.value));
        Verdict { act: record.is_some(), record, master_live, trusted, anomalies }
    }

    /// What moving from the trusted record `before` to `after` breaks.
    fn history(&self, before: &GroupRecord, after: &GroupRecord) -> Vec<RecordAnomaly> {
        let mut found = Vec::new();
        if after.master_epoch < before.master_epoch {
            found.push(RecordAnomaly::MasterEpochWentBack {
                from: before.master_epoch,
                to: after.master_epoch,
            });
        } else if after.master_epoch == before.master_epoch {
            if after.master_id != before.master_id {
                found.push(RecordAnomaly::SecondMasterInEpoch {
                    epoch: after.master_epoch,
                    first: before.master_id,
                    second: after.master_id,
                });
            } else if after.master_ha_addr != before.master_ha_addr
                || after.master_http_addr != before.master_http_addr
            {
                found.push(RecordAnomaly::MasterMovedWithinEpoch {
                    epoch: after.master_epoch,
                    master: after.master_id,
                });
            }
            if after.sync_state_set_epoch < before.sync_state_set_epoch {
                found.push(RecordAnomaly::SetEpochWentBack {
                    master_epoch: after.master_epoch,
                    from: before.sync_state_set_epoch,
                    to: after.sync_state_set_epoch,
                });
            }
        }
        let strangers: Vec<BrokerId> = after
            .sync_state_set
            .iter()
            .copied()
            .filter(|id| !self.known.contains(id) && !before.sync_state_set.contains(id))
            .collect();
        if !strangers.is_empty() {
            found.push(RecordAnomaly::UnknownMembers { ids: strangers });
        }
        found
    }
}
