//! Automatic failover of a controller-mode broker, sans IO: what a broker does about its role,
//! written once for every loop that runs one (the binary's etcd loop, the simulator's brokers).
//!
//! - [`role_change`]: the checks a broker makes before it becomes master or follows one
//!   (RocketMQ's `changeToMaster` and `changeToSlave`).
//!
//! The rules this layer applies are in [`service::coordinator`](crate::service::coordinator):
//! the group record, elections, the lease guard, the record audit and [`decide`].
//!
//! [`decide`]: crate::service::coordinator::decide

pub mod role_change;

pub use role_change::{KnownEpochs, RoleChangeError, check_follow, check_promote};
