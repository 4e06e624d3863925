//! The AutoSwitch (controller mode) service layer: the drivers that run the
//! [`crate::autoswitch`] machines over a log, chosen by configuration inside the service
//! layer so that adapters run either protocol unchanged.

mod master;
#[cfg(test)]
mod master_tests;
mod slave;
#[cfg(test)]
mod slave_tests;

pub use master::{
    AutoSwitchDriver, AutoSwitchMasterStatus, AutoSwitchSlaveInfo, LocalAuthority, SyncStateSetError,
    check_sync_state_set,
};
pub use slave::{AutoSwitchSlaveDriver, AutoSwitchSlaveStatus, FollowRefusals};
