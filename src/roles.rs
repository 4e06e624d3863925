//! Controller mode's roles: a broker started with `enableControllerMode=true` (`logship
//! broker`) has its store and HTTP API up and no HA role until told, as a RocketMQ broker waits
//! for its controller. Two admin calls give it one, the equivalents of RocketMQ's
//! `changeToMaster` and `changeToSlave`:
//!
//! - [`promote`]: become master at epoch `E`, refused unless `E` is above every epoch the local
//!   log holds, every epoch this broker was given since it started, and the last epoch its
//!   master announced (one master per epoch); and, unless forced, unless `E` is the next epoch
//!   (epochs advance one at a time);
//! - [`follow`]: follow master `M` (its HA address and broker id) at epoch `E`, refused below the
//!   log's last epoch or the last epoch given, at the epoch this broker is master in or already
//!   follows another master in (one master per epoch), and at this broker's own HA port.
//!
//! No call takes epoch `i32::MAX`: no epoch could follow it, so failover would end for good.
//! The epoch and role checks are core's ([`logship_core::failover::role_change`]), the ones the
//! simulator's brokers make too; this module adds the broker's own (its HA port, its store).
//!
//! A role change takes the node away (new puts are refused), stops the running service, which
//! answers the puts in flight itself (a master service's shutdown closes its put gate and lets
//! every pending replication wait end by its deadline), and starts the new one over the same
//! store. Until the new service
//! runs the broker has no role, and puts are refused (503) saying so.

use std::collections::BTreeSet;
use std::time::Duration;

use logship_core::autoswitch::BrokerId;
use logship_core::failover::{KnownEpochs, RoleChangeError, check_follow, check_promote};
use logship_core::service::{AuthorityFactory, StartError};
use serde::Deserialize;
use tracing::{info, warn};

use crate::broker::{Broker, ReplicationHandle};
pub use crate::broker::{Role, Roles};

/// A role-changing call refused or failed.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum RoleError {
    /// The broker runs the classic protocol.
    #[error("this broker is not in controller mode (enableControllerMode=false): its role is brokerRole")]
    NotControllerMode,
    /// The broker's epochs or role do not allow the change, or the request cannot work
    /// ([`RoleChangeError::is_malformed`]): the checks of `logship_core::failover`.
    #[error(transparent)]
    Refused(#[from] RoleChangeError),
    /// Following this broker's own HA port.
    #[error(
        "masterAddress {address} is this broker's own HA port (haListenPort {port}): a broker cannot follow \
         itself"
    )]
    OwnHaPort {
        /// The address given.
        address: String,
        /// This broker's HA port.
        port: u16,
    },
    /// A request that cannot work (a bad address, a negative id in the set).
    #[error("{0}")]
    BadRequest(String),
    /// The new service did not start; the broker has no role now.
    #[error("the new role's service did not start; this broker has no HA role now: {0}")]
    Start(String),
}

/// `POST /ha/changeToMaster`.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PromoteRequest {
    /// The master epoch.
    pub epoch: i32,
    /// The sync-state-set to start from (this broker is added); default: this broker alone.
    #[serde(default)]
    pub sync_state_set: Option<BTreeSet<BrokerId>>,
    /// The epoch of that set; default 1.
    #[serde(default)]
    pub sync_state_set_epoch: Option<i32>,
    /// Skip ahead of the next epoch (a controller that knows of later epochs).
    #[serde(default)]
    pub force: bool,
    /// With automatic failover on etcd: take the role by hand, leaving automatic failover until
    /// the broker restarts (see docs/security.md).
    #[serde(default)]
    pub override_coordinator: bool,
}

/// `POST /ha/changeToSlave`.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FollowRequest {
    /// The master's HA address, `host:port`.
    pub master_address: String,
    /// The master's broker id.
    pub master_broker_id: BrokerId,
    /// The epoch the master was elected in.
    pub epoch: i32,
    /// With automatic failover on etcd: take the role by hand, leaving automatic failover until
    /// the broker restarts (see docs/security.md).
    #[serde(default)]
    pub override_coordinator: bool,
}

/// The log's last epoch.
fn log_last_epoch(broker: &Broker) -> Option<i32> {
    broker.store.epochs().last().map(|e| e.epoch)
}

/// How long a new master retries binding its HA port while the old listener closes.
const REBIND_PATIENCE: Duration = Duration::from_secs(5);

/// The last epoch the master this broker follows announced in its handshake, with that
/// master's id; `None` unless this broker is a slave that has handshaken.
async fn announced_epoch(broker: &Broker, roles: &Roles) -> Option<(i32, BrokerId)> {
    let Role::Slave { master_broker_id, .. } = roles.current() else { return None };
    let ReplicationHandle::Slave(slave) = broker.node() else { return None };
    let epoch = slave.status().await?.autoswitch?.master_last_epoch?;
    Some((epoch, master_broker_id))
}

/// Becomes master at `request.epoch` (see the module docs).
pub async fn promote(broker: &Broker, request: PromoteRequest) -> Result<Role, RoleError> {
    promote_with(broker, request, None).await
}

/// [`promote`], the master service proposing its sync-state-set changes to `authority`
/// (`None`: applied at once). The etcd coordinator's promotions come here with `force`: the
/// epoch is the one it won in the group record.
pub async fn promote_with(
    broker: &Broker,
    request: PromoteRequest,
    authority: Option<AuthorityFactory>,
) -> Result<Role, RoleError> {
    let roles = broker.roles.as_ref().ok_or(RoleError::NotControllerMode)?;
    let mut given = roles.freeze().await;
    let known = KnownEpochs {
        log_last: log_last_epoch(broker),
        given: *given,
        announced: announced_epoch(broker, roles).await,
    };
    check_promote(request.epoch, known, request.force)?;
    let mut set = request.sync_state_set.unwrap_or_default();
    if let Some(id) = set.iter().find(|id| **id < 0) {
        return Err(RoleError::BadRequest(format!("syncStateSet: broker id {id} is negative")));
    }
    set.insert(roles.broker_id);
    let set_epoch = request.sync_state_set_epoch.unwrap_or(1);
    let mut config = broker
        .settings
        .controller_master_config(request.epoch, set.clone(), set_epoch)
        .ok_or(RoleError::NotControllerMode)?;
    if let Some(controller) = config.controller.as_mut() {
        controller.authority = authority;
        // On etcd, a slave's claimed broker id must come from the HA address it published, and
        // the master service takes and acknowledges puts only while the lease guard is open.
        controller.members = broker.coordination.as_ref().map(|c| c.member_directory());
        controller.lease = broker.coordination.as_ref().map(|c| c.lease_fence());
    }
    config.validate().map_err(|e| RoleError::BadRequest(e.to_string()))?;
    *given = request.epoch;
    stop_current(broker, roles).await;
    let ha = broker.settings.ha_addr();
    let started = tokio::time::Instant::now();
    let master = loop {
        match logship_tokio::spawn_master(config.clone(), broker.store.clone(), ha).await {
            Ok(master) => break master,
            Err(StartError::Bind { .. }) if started.elapsed() < REBIND_PATIENCE => {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => {
                warn!(%e, epoch = request.epoch, "changeToMaster failed; no HA role");
                return Err(RoleError::Start(format!("HA service on {ha}: {e}")));
            }
        }
    };
    tokio::spawn(crate::broker::feed_retention_floor(master.clone(), broker.store.clone()));
    info!(epoch = request.epoch, set = ?set, ha = %master.local_addr(), "changeToMaster: this broker is the master");
    broker.set_node(ReplicationHandle::Master(master));
    let role = Role::Master { epoch: request.epoch };
    roles.set(role.clone());
    Ok(role)
}

/// Follows `request.master_broker_id` at `request.master_address` (see the module docs).
pub async fn follow(broker: &Broker, request: FollowRequest) -> Result<Role, RoleError> {
    let roles = broker.roles.as_ref().ok_or(RoleError::NotControllerMode)?;
    let mut given = roles.freeze().await;
    check_follow(
        roles.broker_id,
        request.master_broker_id,
        request.epoch,
        log_last_epoch(broker),
        *given,
        roles.current().local(),
    )?;
    let config = broker
        .settings
        .controller_slave_config(&request.master_address, request.master_broker_id, request.epoch)
        .ok_or(RoleError::NotControllerMode)?
        .map_err(|e| RoleError::BadRequest(format!("masterAddress: its host is no TLS server name: {e}")))?;
    config.validate().map_err(|e| RoleError::BadRequest(format!("masterAddress: {e}")))?;
    let port = broker.settings.ha_addr().port();
    if is_own_ha_port(&broker.settings, &request.master_address, port).await {
        return Err(RoleError::OwnHaPort { address: request.master_address, port });
    }
    *given = (*given).max(request.epoch);
    stop_current(broker, roles).await;
    let slave = logship_tokio::spawn_slave(config, broker.store.clone()).await.map_err(|e| {
        warn!(%e, epoch = request.epoch, "changeToSlave failed; no HA role");
        RoleError::Start(e.to_string())
    })?;
    info!(
        epoch = request.epoch,
        master = %request.master_address,
        master_broker_id = request.master_broker_id,
        "changeToSlave: following"
    );
    broker.set_node(ReplicationHandle::Slave(slave));
    let role = Role::Slave {
        master_address: request.master_address,
        master_broker_id: request.master_broker_id,
        epoch: request.epoch,
    };
    roles.set(role.clone());
    Ok(role)
}

/// Whether `address` (`host:port`) reaches this broker's own HA port `port`: the port matches
/// and the host resolves to an address of this host (loopback, the unspecified address, one of
/// the broker's configured addresses, or any address a socket can bind here).
async fn is_own_ha_port(settings: &crate::config::BrokerSettings, address: &str, port: u16) -> bool {
    let resolved = tokio::time::timeout(Duration::from_secs(2), tokio::net::lookup_host(address)).await;
    let Ok(Ok(addrs)) = resolved else { return false };
    let own = [settings.broker_ip1, settings.ha_addr().ip(), settings.http_addr().ip()];
    addrs.into_iter().any(|a| {
        let ip = a.ip().to_canonical();
        a.port() == port
            && (ip.is_loopback()
                || ip.is_unspecified()
                || own.contains(&ip)
                || std::net::UdpSocket::bind(std::net::SocketAddr::new(ip, 0)).is_ok())
    })
}

/// Drops the role (a master that lost its place, automatic failover): new puts are refused at
/// once, the running service stops.
#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
pub async fn step_down(broker: &Broker) {
    let Some(roles) = broker.roles.as_ref() else { return };
    let _given = roles.freeze().await;
    if roles.current() != Role::None {
        info!(role = ?roles.current(), "stepping down: this broker has no HA role now");
    }
    stop_current(broker, roles).await;
}

/// Takes the node away (new puts are refused) and stops the running service, which answers the
/// puts in flight.
async fn stop_current(broker: &Broker, roles: &Roles) {
    let old = broker.set_node(ReplicationHandle::Unassigned);
    roles.set(Role::None);
    match old {
        ReplicationHandle::Master(m) => m.shutdown().await,
        ReplicationHandle::Slave(s) => s.shutdown().await,
        ReplicationHandle::Unassigned => {}
    }
}
