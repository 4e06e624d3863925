//! Automatic failover of a controller-mode broker, sans IO: what a broker does about its role,
//! written once for every loop that runs one (the binary's etcd loop, the simulator's brokers).
//!
//! - [`Member`]: one broker's part in the failover of its group: what to publish, how to judge
//!   a read of the group, what to do about it, and how the master's sync-state-set proposals
//!   reach the record. Group view, lease and local role in; actions out.
//! - [`role_change`]: the checks a broker makes before it becomes master or follows one
//!   (RocketMQ's `changeToMaster` and `changeToSlave`).
//!
//! The rules this layer applies are in [`service::coordinator`](crate::service::coordinator):
//! the group record, elections, the lease guard, the record audit and [`decide`].
//!
//! [`decide`]: crate::service::coordinator::decide

mod member;
pub mod role_change;

pub use member::{
    ChangeStep, Local, MAX_CHANGES_PER_ROUND, Member, MemberConfig, RETRY_PAUSE, Restore, Round,
};
pub use role_change::{KnownEpochs, RoleChangeError, check_follow, check_promote};
