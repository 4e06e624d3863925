//! The checks a controller-mode broker makes before it changes role, RocketMQ's
//! `changeToMaster` and `changeToSlave`: written once, called by the binary's admin calls and
//! failover loop and by the simulator's brokers.
//!
//! - [`check_promote`]: becoming master at epoch `E` is refused unless `E` is above every
//!   epoch the local log holds, every epoch the broker was given since it started, and the last
//!   epoch its master announced (one master per epoch); and, unless forced, unless `E` is the
//!   next epoch (epochs advance one at a time).
//! - [`check_follow`]: following master `M` at epoch `E` is refused below the log's last epoch
//!   or the last epoch given, at the epoch the broker is master in or already follows another
//!   master in (one master per epoch), and for a master that is the broker itself.
//!
//! Neither takes epoch `i32::MAX`: no epoch could follow it, so failover would end for good.

use crate::autoswitch::BrokerId;
use crate::service::coordinator::LocalRole;

/// A role change the broker's state does not allow, or a request that cannot work.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum RoleChangeError {
    /// The epoch is not above what the broker's log or earlier changes hold.
    #[error(
        "cannot become master at epoch {epoch}: it must be above every epoch this broker holds (highest {highest})"
    )]
    PromoteEpochNotAbove {
        /// The epoch asked for.
        epoch: i32,
        /// The highest epoch held (the log's last, or one given since start).
        highest: i32,
    },
    /// A promotion skipping epochs, without `force`.
    #[error(
        "cannot become master at epoch {epoch}: epochs advance one at a time, and this broker holds epoch \
         {highest}, so the next is {next}; send \"force\": true to skip ahead (a controller that knows of \
         later epochs)"
    )]
    EpochSkips {
        /// The epoch asked for.
        epoch: i32,
        /// The highest epoch the broker knows.
        highest: i32,
        /// The one it may take without force.
        next: i32,
    },
    /// Another broker is master in that epoch (or a later one), as the broker's master said in
    /// its handshake: one master per epoch.
    #[error(
        "cannot become master at epoch {epoch}: broker {master}, the master this broker follows, announced \
         epoch {held} in its handshake; one master per epoch"
    )]
    EpochHeldByAnother {
        /// The epoch asked for.
        epoch: i32,
        /// The epoch the master announced.
        held: i32,
        /// That master's broker id.
        master: BrokerId,
    },
    /// A follow below an epoch the broker holds: a stale command.
    #[error("cannot follow a master at epoch {epoch}: this broker holds epoch {highest} already")]
    FollowEpochBehind {
        /// The epoch asked for.
        epoch: i32,
        /// The highest epoch held.
        highest: i32,
    },
    /// One master per epoch: the broker is the master of that epoch.
    #[error("cannot follow broker {master} at epoch {epoch}: this broker is the master of epoch {epoch}")]
    MasterOfEpoch {
        /// The epoch asked for.
        epoch: i32,
        /// The master asked for.
        master: BrokerId,
    },
    /// One master per epoch: the broker already follows another master in that epoch.
    #[error(
        "cannot follow broker {master} at epoch {epoch}: this broker follows broker {followed} in epoch {epoch}"
    )]
    FollowsAnotherInEpoch {
        /// The epoch asked for.
        epoch: i32,
        /// The master asked for.
        master: BrokerId,
        /// The master the broker follows in that epoch.
        followed: BrokerId,
    },
    /// `i32::MAX`: no epoch could follow it, so no later election could ever win.
    #[error(
        "epoch {epoch} is refused, forced or not: no epoch can follow it (2147483647 is the largest), \
         so failover would end for good"
    )]
    EpochExhausted {
        /// The epoch asked for.
        epoch: i32,
    },
    /// A negative broker id or epoch.
    #[error("masterBrokerId ({master}) and epoch ({epoch}) must not be negative")]
    Negative {
        /// The master asked for.
        master: BrokerId,
        /// The epoch asked for.
        epoch: i32,
    },
    /// The master named is the broker itself.
    #[error("masterBrokerId {master} is this broker's own brokerId: a broker cannot follow itself")]
    FollowsItself {
        /// The broker id given.
        master: BrokerId,
    },
}

impl RoleChangeError {
    /// Whether the request cannot work whatever the broker's state (a negative id or epoch,
    /// following itself); the others conflict with what the broker holds.
    pub fn is_malformed(&self) -> bool {
        matches!(self, Self::Negative { .. } | Self::FollowsItself { .. })
    }
}

/// The epochs a broker knows of when it is told to become master.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct KnownEpochs {
    /// The local log's last epoch.
    pub log_last: Option<i32>,
    /// The highest epoch given since start (-1 for none).
    pub given: i32,
    /// The last epoch the master the broker follows announced in its handshake, and that
    /// master's id.
    pub announced: Option<(i32, BrokerId)>,
}

/// Whether becoming master at `epoch` may go ahead (see the [module docs](self)): never at
/// `i32::MAX`; never at or below an epoch the broker's master announced, the log's last, or one
/// given since start; and, unless `force`, only at the next epoch (epochs start at 1).
pub fn check_promote(epoch: i32, known: KnownEpochs, force: bool) -> Result<(), RoleChangeError> {
    if epoch == i32::MAX {
        return Err(RoleChangeError::EpochExhausted { epoch });
    }
    if let Some((held, master)) = known.announced {
        if held >= epoch {
            return Err(RoleChangeError::EpochHeldByAnother { epoch, held, master });
        }
    }
    let highest = known.log_last.unwrap_or(0).max(known.given).max(known.announced.map_or(0, |a| a.0)).max(0);
    if epoch <= highest {
        return Err(RoleChangeError::PromoteEpochNotAbove { epoch, highest });
    }
    let next = highest + 1;
    if epoch > next && !force {
        return Err(RoleChangeError::EpochSkips { epoch, highest, next });
    }
    Ok(())
}

/// Whether broker `own`, in role `current`, may follow `master` at `epoch`, given its log's last
/// epoch and the highest epoch given since start (-1 for none).
pub fn check_follow(
    own: BrokerId,
    master: BrokerId,
    epoch: i32,
    log_last: Option<i32>,
    given: i32,
    current: LocalRole,
) -> Result<(), RoleChangeError> {
    if master < 0 || epoch < 0 {
        return Err(RoleChangeError::Negative { master, epoch });
    }
    if master == own {
        return Err(RoleChangeError::FollowsItself { master });
    }
    if epoch == i32::MAX {
        return Err(RoleChangeError::EpochExhausted { epoch });
    }
    let highest = log_last.unwrap_or(-1).max(given);
    if epoch < highest {
        return Err(RoleChangeError::FollowEpochBehind { epoch, highest });
    }
    match current {
        LocalRole::Master { epoch: e } if e == epoch => Err(RoleChangeError::MasterOfEpoch { epoch, master }),
        LocalRole::Slave { master: followed, epoch: e } if e == epoch && followed != master => {
            Err(RoleChangeError::FollowsAnotherInEpoch { epoch, master, followed })
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(log_last: Option<i32>, given: i32) -> KnownEpochs {
        KnownEpochs { log_last, given, announced: None }
    }

    #[test]
    fn promotion_needs_an_epoch_above_the_log_and_every_epoch_given() {
        assert!(check_promote(1, known(None, -1), false).is_ok(), "an empty log starts at epoch 1");
        assert!(check_promote(3, known(Some(2), -1), false).is_ok());
        for (epoch, log, given) in
            [(2, Some(2), -1), (1, Some(2), -1), (3, Some(1), 3), (-1, None, -1), (0, None, -1)]
        {
            let err = check_promote(epoch, known(log, given), true).unwrap_err();
            assert!(
                matches!(err, RoleChangeError::PromoteEpochNotAbove { .. }),
                "{epoch} {log:?} {given}: {err}"
            );
            assert!(err.to_string().contains(&format!("epoch {epoch}")), "{err}");
            assert!(!err.is_malformed());
        }
    }

    #[test]
    fn promotion_advances_one_epoch_at_a_time_unless_forced_and_never_to_the_last() {
        let err = check_promote(3, known(None, -1), false).unwrap_err();
        assert!(matches!(err, RoleChangeError::EpochSkips { epoch: 3, highest: 0, next: 1 }), "{err}");
        assert!(err.to_string().contains("force"), "{err}");
        assert!(check_promote(3, known(None, -1), true).is_ok(), "forced");
        let err = check_promote(9, known(Some(2), 4), false).unwrap_err();
        assert!(matches!(err, RoleChangeError::EpochSkips { next: 5, .. }), "{err}");
        for force in [false, true] {
            let err = check_promote(i32::MAX, known(Some(i32::MAX - 1), -1), force).unwrap_err();
            assert!(matches!(err, RoleChangeError::EpochExhausted { .. }), "{err}");
            assert!(err.to_string().contains("2147483647"), "{err}");
        }
    }

    #[test]
    fn promotion_at_an_epoch_the_followed_master_announced_is_refused() {
        let announced = KnownEpochs { log_last: Some(1), given: 1, announced: Some((2, 1)) };
        let err = check_promote(2, announced, true).unwrap_err();
        assert!(matches!(err, RoleChangeError::EpochHeldByAnother { epoch: 2, held: 2, master: 1 }), "{err}");
        assert!(err.to_string().contains("broker 1"), "{err}");
        assert!(check_promote(3, announced, false).is_ok(), "the next epoch after the announced one");
    }

    #[test]
    fn following_refuses_stale_epochs_itself_and_a_second_master_in_one_epoch() {
        let none = LocalRole::None;
        assert!(check_follow(2, 1, 2, Some(1), -1, none).is_ok(), "a newer master");
        assert!(check_follow(2, 1, 2, Some(2), -1, none).is_ok(), "again in the log's epoch (a restart)");
        assert!(check_follow(3, 2, 2, None, -1, none).is_ok(), "an empty log");
        let err = check_follow(2, 1, 1, Some(2), -1, none).unwrap_err();
        assert!(matches!(err, RoleChangeError::FollowEpochBehind { epoch: 1, highest: 2 }), "{err}");
        let err = check_follow(2, 1, 2, None, 3, none).unwrap_err();
        assert!(matches!(err, RoleChangeError::FollowEpochBehind { epoch: 2, highest: 3 }), "{err}");
        let err = check_follow(2, 2, 3, None, -1, none).unwrap_err();
        assert!(err.is_malformed() && err.to_string().contains("itself"), "{err}");
        let err = check_follow(2, -1, 3, None, -1, none).unwrap_err();
        assert!(err.is_malformed() && matches!(err, RoleChangeError::Negative { .. }), "{err}");
        let master = LocalRole::Master { epoch: 3 };
        let err = check_follow(2, 1, 3, Some(3), 3, master).unwrap_err();
        assert!(
            matches!(err, RoleChangeError::MasterOfEpoch { .. })
                && err.to_string().contains("master of epoch 3")
        );
        let slave = LocalRole::Slave { master: 1, epoch: 3 };
        assert!(check_follow(2, 1, 3, Some(3), 3, slave).is_ok(), "the same master again");
        let err = check_follow(2, 4, 3, Some(3), 3, slave).unwrap_err();
        assert!(err.to_string().contains("follows broker 1 in epoch 3"), "{err}");
        assert!(check_follow(2, 4, 4, Some(3), 3, slave).is_ok(), "a newer epoch");
        let err = check_follow(2, 1, i32::MAX, None, -1, none).unwrap_err();
        assert!(matches!(err, RoleChangeError::EpochExhausted { .. }), "{err}");
    }
}
