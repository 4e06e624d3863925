//! What a broker's coordinator loop does next, from what it knows: its role, the group record,
//! whether the record's master is live, and its own lease. Pure, so every case is tested
//! without etcd.

use std::net::SocketAddr;

use crate::autoswitch::BrokerId;

use super::record::GroupRecord;

/// The HA role a controller-mode broker runs now, as its coordinator loop and the failover
/// rules know it: it changes with failover, unlike the configured
/// [`BrokerRole`](crate::BrokerRole) (a classic broker's fixed `brokerRole`). It names the
/// master by broker id; the binary's role adds the master's HA address.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum LocalRole {
    /// No role (started, stepped down, or between two roles).
    None,
    /// Master in `epoch`.
    Master {
        /// The master epoch.
        epoch: i32,
    },
    /// Following `master` in `epoch`.
    Slave {
        /// The master's broker id.
        master: BrokerId,
        /// The master epoch.
        epoch: i32,
    },
}

/// What the loop knows at one instant.
#[derive(Clone, Debug)]
pub struct Situation<'a> {
    /// This broker's id.
    pub me: BrokerId,
    /// Its role now.
    pub role: LocalRole,
    /// The group record (`None`: no election yet, or deleted by an operator).
    pub record: Option<&'a GroupRecord>,
    /// The record's master holds its mastership.
    pub master_live: bool,
    /// The master epoch this broker's current lease session was elected in, if any. A record
    /// naming this broker from an earlier session (before a restart, or under a lost lease)
    /// does not make it master.
    pub elected_epoch: Option<i32>,
    /// The lease guard is open (acknowledging allowed).
    pub lease_open: bool,
    /// The lease is lost for good.
    pub lease_lost: bool,
    /// An empty group's bootstrap wait is over (see [`decide`]).
    pub bootstrap_done: bool,
    /// The record's master has published a state in the record's epoch: it runs as master, so
    /// a slave connecting now finds its HA port open.
    pub master_ready: bool,
}

/// The loop's next step.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing to change.
    Stay,
    /// Become master in the record's epoch with its sync-state-set.
    Promote {
        /// The master epoch.
        epoch: i32,
        /// The record's set.
        sync_state_set: std::collections::BTreeSet<BrokerId>,
        /// Its epoch.
        sync_state_set_epoch: i32,
    },
    /// Follow the record's master.
    Follow {
        /// Its broker id.
        master: BrokerId,
        /// Its HA address.
        ha_addr: SocketAddr,
        /// The master epoch.
        epoch: i32,
    },
    /// Stop acknowledging and drop the role (a master that is no longer the live master).
    StepDown,
    /// Try to become master ([`Coordinator::campaign`](super::Coordinator::campaign)).
    Campaign,
    /// The lease is lost: drop a master role at once, then take part again under a new lease.
    NewSession,
}

/// The rule of the loop.
///
/// - A lost lease: [`Action::NewSession`] (a master drops its role first).
/// - The record names this broker, in the epoch this session was elected in: be master there.
///   Naming it from an earlier session: wait while that mastership is live (it expires with the
///   old lease), then campaign like any member.
/// - The record names another, live master: follow it once it runs as master (a master of an
///   older epoch steps down at once, then follows). Not live: a master steps down; the others
///   campaign.
/// - No record: a master steps down (an operator deleted it); the others campaign once the
///   bootstrap wait is over, so that brokers started together are all published before the
///   first election of an empty group and the one with the most data wins.
/// - Nobody campaigns with a closed guard: etcd would refuse an expired lease anyway, and a
///   broker that cannot renew must not become master.
pub fn decide(s: &Situation<'_>) -> Action {
    if s.lease_lost {
        return Action::NewSession;
    }
    let is_master = matches!(s.role, LocalRole::Master { .. });
    let campaign = |ready: bool| {
        if is_master {
            Action::StepDown
        } else if ready && s.lease_open {
            Action::Campaign
        } else {
            Action::Stay
        }
    };
    let Some(record) = s.record else {
        return campaign(s.bootstrap_done);
    };
    if record.master_id == s.me {
        if s.elected_epoch == Some(record.master_epoch) && s.master_live {
            if s.role == (LocalRole::Master { epoch: record.master_epoch }) {
                return Action::Stay;
            }
            return Action::Promote {
                epoch: record.master_epoch,
                sync_state_set: record.sync_state_set.clone(),
                sync_state_set_epoch: record.sync_state_set_epoch,
            };
        }
        if s.master_live && s.elected_epoch != Some(record.master_epoch) {
            // An earlier session's mastership: not this session's to use.
            return if is_master { Action::StepDown } else { Action::Stay };
        }
        return campaign(true);
    }
    if s.master_live {
        if s.role == (LocalRole::Slave { master: record.master_id, epoch: record.master_epoch }) {
            return Action::Stay;
        }
        if !s.master_ready {
            return if is_master { Action::StepDown } else { Action::Stay };
        }
        return Action::Follow {
            master: record.master_id,
            ha_addr: record.master_ha_addr,
            epoch: record.master_epoch,
        };
    }
    campaign(true)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    fn record(master: BrokerId, epoch: i32, set: &[BrokerId]) -> GroupRecord {
        GroupRecord {
            master_epoch: epoch,
            master_id: master,
            master_ha_addr: SocketAddr::from(([127, 0, 0, 1], 10_000 + master as u16)),
            master_http_addr: SocketAddr::from(([127, 0, 0, 1], 8_000 + master as u16)),
            sync_state_set: set.iter().copied().collect(),
            sync_state_set_epoch: 7,
        }
    }

    fn at<'a>(role: LocalRole, record: Option<&'a GroupRecord>, master_live: bool) -> Situation<'a> {
        Situation {
            me: 2,
            role,
            record,
            master_live,
            elected_epoch: None,
            lease_open: true,
            lease_lost: false,
            bootstrap_done: true,
            master_ready: true,
        }
    }

    #[test]
    fn a_lost_lease_always_asks_for_a_new_session() {
        let r = record(2, 3, &[2]);
        for role in
            [LocalRole::None, LocalRole::Master { epoch: 3 }, LocalRole::Slave { master: 1, epoch: 2 }]
        {
            let s = Situation { lease_lost: true, elected_epoch: Some(3), ..at(role, Some(&r), true) };
            assert_eq!(decide(&s), Action::NewSession, "{role:?}");
        }
    }

    #[test]
    fn the_winner_promotes_in_the_records_epoch_with_its_set_then_stays() {
        let r = record(2, 4, &[2]);
        let s = Situation { elected_epoch: Some(4), ..at(LocalRole::None, Some(&r), true) };
        assert_eq!(
            decide(&s),
            Action::Promote { epoch: 4, sync_state_set: BTreeSet::from([2]), sync_state_set_epoch: 7 }
        );
        let s = Situation { elected_epoch: Some(4), ..at(LocalRole::Master { epoch: 4 }, Some(&r), true) };
        assert_eq!(decide(&s), Action::Stay);
        let s = Situation {
            elected_epoch: Some(4),
            ..at(LocalRole::Slave { master: 1, epoch: 3 }, Some(&r), true)
        };
        assert!(matches!(decide(&s), Action::Promote { epoch: 4, .. }), "a slave that won promotes");
    }

    #[test]
    fn a_record_naming_this_broker_from_an_earlier_session_is_not_obeyed_while_that_mastership_lives() {
        let r = record(2, 4, &[1, 2]);
        assert_eq!(decide(&at(LocalRole::None, Some(&r), true)), Action::Stay);
        let s = Situation { elected_epoch: Some(3), ..at(LocalRole::None, Some(&r), true) };
        assert_eq!(decide(&s), Action::Stay, "elected in another epoch");
        assert_eq!(decide(&at(LocalRole::None, Some(&r), false)), Action::Campaign, "expired: compete");
    }

    #[test]
    fn a_master_whose_mastership_is_gone_steps_down() {
        let r = record(2, 4, &[1, 2]);
        let s = Situation { elected_epoch: Some(4), ..at(LocalRole::Master { epoch: 4 }, Some(&r), false) };
        assert_eq!(decide(&s), Action::StepDown);
        let dead_other = record(1, 5, &[1, 2]);
        let s = at(LocalRole::Master { epoch: 4 }, Some(&dead_other), false);
        assert_eq!(decide(&s), Action::StepDown);
        assert_eq!(
            decide(&at(LocalRole::Master { epoch: 4 }, None, false)),
            Action::StepDown,
            "record deleted"
        );
    }

    #[test]
    fn a_live_other_master_is_followed_once_and_a_stale_master_follows_it() {
        let r = record(1, 5, &[1, 2]);
        let follow = Action::Follow { master: 1, ha_addr: r.master_ha_addr, epoch: 5 };
        assert_eq!(decide(&at(LocalRole::None, Some(&r), true)), follow);
        assert_eq!(decide(&at(LocalRole::Master { epoch: 4 }, Some(&r), true)), follow);
        assert_eq!(decide(&at(LocalRole::Slave { master: 3, epoch: 4 }, Some(&r), true)), follow);
        assert_eq!(
            decide(&at(LocalRole::Slave { master: 1, epoch: 4 }, Some(&r), true)),
            follow,
            "new epoch"
        );
        assert_eq!(decide(&at(LocalRole::Slave { master: 1, epoch: 5 }, Some(&r), true)), Action::Stay);
    }

    #[test]
    fn a_new_master_is_followed_only_once_it_runs_as_master() {
        let r = record(1, 5, &[1, 2]);
        let s =
            Situation { master_ready: false, ..at(LocalRole::Slave { master: 1, epoch: 4 }, Some(&r), true) };
        assert_eq!(decide(&s), Action::Stay);
        let s = Situation { master_ready: false, ..at(LocalRole::Master { epoch: 4 }, Some(&r), true) };
        assert_eq!(decide(&s), Action::StepDown, "a stale master stops at once");
    }

    #[test]
    fn a_dead_master_is_competed_for_only_with_an_open_guard() {
        let r = record(1, 5, &[1, 2]);
        assert_eq!(decide(&at(LocalRole::Slave { master: 1, epoch: 5 }, Some(&r), false)), Action::Campaign);
        assert_eq!(decide(&at(LocalRole::None, Some(&r), false)), Action::Campaign);
        let s = Situation { lease_open: false, ..at(LocalRole::None, Some(&r), false) };
        assert_eq!(decide(&s), Action::Stay);
    }

    #[test]
    fn an_empty_group_campaigns_only_after_the_bootstrap_wait() {
        let s = Situation { bootstrap_done: false, ..at(LocalRole::None, None, false) };
        assert_eq!(decide(&s), Action::Stay);
        assert_eq!(decide(&at(LocalRole::None, None, false)), Action::Campaign);
    }
}
