//! The put path every way in to the broker shares (the HTTP API and the remoting port), and the
//! refusals both check before it.

use std::time::Instant;

use logship_core::PutStatus;

use super::{Broker, ReplicationHandle, Role};

/// How a put through this broker's master service ended.
pub enum MasterPut {
    /// Not tried: this broker is not a master now (why, for the answer).
    NotMaster(&'static str),
    /// Stored, but the failover lease guard closed (or the role changed) under it: it must
    /// not be acknowledged. A put refused before it was stored because the lease was closed
    /// is `Done` with [`PutStatus::LeaseLost`].
    LeaseLost,
    /// The service's result, and the controller-mode role the put started under.
    Done {
        /// The put's result.
        result: logship_core::PutResult,
        /// The role before the put (controller mode), for the epoch the answer names.
        role_before: Option<Role>,
    },
}

/// The put path every way in to the broker shares (the HTTP API and the remoting port): the
/// current master service's put (append, then the flush and replication waits the role asks
/// for), fenced by the failover lease right before success is reported, and counted in the
/// metrics. The callers check their own refusals first (the lease guard, the role).
pub async fn put_through_master(broker: &Broker, message: logship_store::Message) -> MasterPut {
    // A role change may stop this service under the put: its shutdown answers the put (the
    // replication wait ends by its deadline, a put past the closed gate is refused). The role
    // is read before the node: a PUT_OK names the epoch only if the role is the same after.
    let role_before = broker.roles.as_ref().map(|r| r.current());
    let node = broker.node();
    let ReplicationHandle::Master(master) = &node else {
        return MasterPut::NotMaster(put_refusal(&node).unwrap_or_default());
    };
    let started = Instant::now();
    let result = master.put(message).await;
    broker.metrics.record_put(result.status, started.elapsed().as_secs_f64());
    // The master service fences puts by the lease itself: it refuses a put while the lease is
    // closed (`PutStatus::LeaseLost`, nothing stored: answered as the service's result) and
    // acknowledges none whose waits ended after it closed. A role change under the put is this
    // layer's to see.
    match result.status {
        PutStatus::LeaseLostAfterStore => return MasterPut::LeaseLost,
        PutStatus::PutOk
            if broker.coordination().is_some()
                && broker.roles.as_ref().map(|r| r.current()) != role_before =>
        {
            return MasterPut::LeaseLost;
        }
        _ => {}
    }
    MasterPut::Done { result, role_before }
}

/// Why a put must not start now on a broker with automatic failover: its lease guard is
/// closed (a master), or it is not the master (`None`: it may put).
pub fn failover_put_refusal(broker: &Broker) -> Option<String> {
    let c = broker.coordination()?;
    if matches!(broker.node(), ReplicationHandle::Master(_)) {
        if c.lease_open() {
            return None;
        }
        broker.metrics.record_lease_refusal();
        return Some("this broker's etcd lease guard is closed: it cannot acknowledge".into());
    }
    Some("this broker is not the master (automatic failover): send to the group's master".into())
}

/// Why a broker in this role refuses puts; `None` for a master.
pub fn put_refusal(node: &ReplicationHandle) -> Option<&'static str> {
    match node {
        ReplicationHandle::Master(_) => None,
        ReplicationHandle::Slave(_) => Some("this broker is a SLAVE: put to its master"),
        ReplicationHandle::Unassigned => Some(
            "controller mode: this broker has no HA role yet (or is changing roles): promote it with \
             POST /ha/changeToMaster, or put to its master",
        ),
    }
}
