//! The running broker's shared state: what the HTTP handlers, the remoting port, the role
//! changes and the failover loop all hold ([`Broker`]), the replication side it swaps on a role
//! change ([`ReplicationHandle`]), the in-flight body budget and the put path every way in shares.

mod in_flight;
mod put;
mod role;

use std::sync::Arc;

use logship_store::CommitLog;

pub use in_flight::{Busy, Held, InFlight};
pub use put::{MasterPut, failover_put_refusal, put_refusal, put_through_master};
pub use role::{Role, Roles};

use crate::config::BrokerSettings;
use crate::coordination::Coordination;
use crate::metrics::Metrics;

/// The replication side of a running broker: the handle of its HA master or slave service,
/// which handlers clone out of the broker. Not a role: which handle runs follows the configured
/// [`BrokerRole`](logship_core::BrokerRole) (classic) or the current
/// [`LocalRole`](logship_core::service::coordinator::LocalRole) (controller mode).
#[derive(Clone)]
pub enum ReplicationHandle {
    /// A master.
    Master(logship_tokio::MasterHandle<CommitLog>),
    /// A slave.
    Slave(logship_tokio::SlaveHandle),
    /// Controller mode: no HA role yet, or between two roles.
    Unassigned,
}

/// What every handler shares.
pub struct Broker {
    /// Master, slave or (controller mode) no role; swapped by a role change.
    pub node: std::sync::Mutex<ReplicationHandle>,
    /// Controller mode's roles; `None`: the classic protocol, whose role never changes.
    pub roles: Option<Roles>,
    /// The local store.
    pub store: Arc<CommitLog>,
    /// The settings it runs with.
    pub settings: BrokerSettings,
    /// Metrics.
    pub metrics: Metrics,
    /// The store's end when the broker started (a slave's replicated bytes count from here).
    pub start_offset: u64,
    /// Physical memory, for RocketMQ's suggest-pulling-from-slave hint.
    pub total_memory: u64,
    /// `httpMaxInFlightBytes`: one permit per body byte held in memory.
    pub in_flight: InFlight,
    /// Automatic failover on etcd (`etcdEndpoints`): the lease every `PUT_OK` is checked
    /// against, and the group as last read; `None`: roles come from the admin calls.
    pub coordination: Option<Arc<Coordination>>,
    /// The remoting port and the NameServer registrations, once started (for `/status`).
    pub remoting: std::sync::OnceLock<Arc<dyn RemotingStatus>>,
}

impl Broker {
    /// The replication side now (a clone of its handle).
    pub fn node(&self) -> ReplicationHandle {
        self.node.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Installs `node`; returns the one it replaces.
    pub fn set_node(&self, node: ReplicationHandle) -> ReplicationHandle {
        std::mem::replace(&mut *self.node.lock().unwrap_or_else(|e| e.into_inner()), node)
    }

    /// Automatic failover's state while it decides this broker's role: `None` without
    /// `etcdEndpoints`, and after an admin call with `overrideCoordinator` took the role over.
    pub fn coordination(&self) -> Option<&Arc<Coordination>> {
        self.coordination.as_ref().filter(|c| !c.is_detached())
    }
}

/// What `/status` shows of the remoting port and its NameServer registrations (its `remoting`
/// object); the remoting side implements it, so that this state does not depend on it.
pub trait RemotingStatus: Send + Sync {
    /// The `remoting` part of `/status`.
    fn status(&self) -> logship::status::Remoting;
}

/// Physical memory in bytes (Linux `/proc/meminfo`), or 8 GiB if it cannot be read.
pub fn total_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(8 << 30)
}

/// Keeps the store's retention floor at the slowest in-sync slave's ack, so that forced
/// deletion (`cleanFileForciblyEnable`) never removes what a replica still needs. While no slave
/// is in sync the last floor stays (a slave that dropped out comes back for those bytes).
pub async fn feed_retention_floor(master: logship_tokio::MasterHandle<CommitLog>, store: Arc<CommitLog>) {
    let mut tick = tokio::time::interval(std::time::Duration::from_secs(1));
    loop {
        tick.tick().await;
        let Some(status) = master.status().await else { return };
        let slowest = status.slaves.iter().filter(|l| l.in_sync).filter_map(|l| l.ack).min();
        if let Some(ack) = slowest {
            store.set_retention_floor(ack);
        }
    }
}
