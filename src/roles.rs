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
use std::sync::{Arc, Mutex};
use std::time::Duration;

use logship_core::autoswitch::BrokerId;
use logship_core::failover::{KnownEpochs, RoleChangeError, check_follow, check_promote};
use logship_core::service::coordinator::{Coordinator, GroupView, LeaseFence, LeaseSnapshot, LocalRole};
use logship_core::service::{AuthorityFactory, MemberAddress, MemberDirectory, StartError};
use logship_core::time::Instant;
use serde::Deserialize;
use serde_json::{Value, json};
use tracing::{info, warn};

use crate::http::{Broker, Node};

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

/// The role of a controller-mode broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Role {
    /// No role yet, or between two roles, or after a failed change.
    None,
    /// Master at `epoch`.
    Master {
        /// The master epoch.
        epoch: i32,
    },
    /// Following `master_broker_id` at `master_address` (its HA port), elected at `epoch`.
    Slave {
        /// The master's HA address.
        master_address: String,
        /// The master's broker id.
        master_broker_id: BrokerId,
        /// The master epoch.
        epoch: i32,
    },
}

impl Role {
    /// The role as the failover rules see it.
    pub fn local(&self) -> LocalRole {
        match self {
            Self::None => LocalRole::None,
            Self::Master { epoch } => LocalRole::Master { epoch: *epoch },
            Self::Slave { master_broker_id, epoch, .. } => {
                LocalRole::Slave { master: *master_broker_id, epoch: *epoch }
            }
        }
    }

    /// The role as `/status` shows it.
    pub fn json(&self) -> Value {
        match self {
            Self::None => json!({ "role": "NONE" }),
            Self::Master { epoch } => json!({ "role": "MASTER", "epoch": epoch }),
            Self::Slave { master_address, master_broker_id, epoch } => json!({
                "role": "SLAVE",
                "epoch": epoch,
                "masterAddress": master_address,
                "masterBrokerId": master_broker_id,
            }),
        }
    }
}

/// The role state of a controller-mode broker.
pub struct Roles {
    /// This broker's id (`brokerId`).
    pub broker_id: BrokerId,
    /// Serializes role changes; holds the highest epoch given since start.
    change: tokio::sync::Mutex<i32>,
    /// The role now, for status; its receivers learn of each change (the NameServer
    /// registrations, which register again at once as Java's `registerBrokerWhenRoleChange` does).
    current: tokio::sync::watch::Sender<Role>,
}

impl Roles {
    /// No role yet, for broker `broker_id`.
    pub fn new(broker_id: BrokerId) -> Self {
        Self {
            broker_id,
            change: tokio::sync::Mutex::new(-1),
            current: tokio::sync::watch::channel(Role::None).0,
        }
    }

    /// The role now.
    pub fn current(&self) -> Role {
        self.current.borrow().clone()
    }

    /// A receiver that sees every change of role from now on.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<Role> {
        self.current.subscribe()
    }

    fn set(&self, role: Role) {
        self.current.send_if_modified(|current| {
            let changed = *current != role;
            *current = role;
            changed
        });
    }

    /// Waits for any role change in progress, then holds changes off (broker shutdown).
    pub async fn freeze(&self) -> tokio::sync::MutexGuard<'_, i32> {
        self.change.lock().await
    }
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
    let Node::Slave(slave) = broker.node() else { return None };
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
    let mut given = roles.change.lock().await;
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
    tokio::spawn(crate::server::feed_retention_floor(master.clone(), broker.store.clone()));
    info!(epoch = request.epoch, set = ?set, ha = %master.local_addr(), "changeToMaster: this broker is the master");
    broker.set_node(Node::Master(master));
    let role = Role::Master { epoch: request.epoch };
    roles.set(role.clone());
    Ok(role)
}

/// Follows `request.master_broker_id` at `request.master_address` (see the module docs).
pub async fn follow(broker: &Broker, request: FollowRequest) -> Result<Role, RoleError> {
    let roles = broker.roles.as_ref().ok_or(RoleError::NotControllerMode)?;
    let mut given = roles.change.lock().await;
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
    broker.set_node(Node::Slave(slave));
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
    let _given = roles.change.lock().await;
    if roles.current() != Role::None {
        info!(role = ?roles.current(), "stepping down: this broker has no HA role now");
    }
    stop_current(broker, roles).await;
}

/// Automatic failover's state shared with the HTTP handlers and the master service: the current
/// lease session (whose guard the master service's put path asks before every put and every
/// `PUT_OK`, [`lease_fence`](Self::lease_fence)) and the group as last read.
pub struct Coordination {
    /// The clock the lease guard is stamped with.
    pub clock: Arc<dyn Fn() -> Instant + Send + Sync>,
    session: Mutex<Option<Arc<dyn Coordinator>>>,
    view: Mutex<Option<GroupView>>,
    /// An admin call with `overrideCoordinator` asked the coordinator loop to leave.
    detached: std::sync::atomic::AtomicBool,
    /// The loop has left (it sends `true` once).
    left: tokio::sync::watch::Sender<bool>,
    /// The audit of the group's keys, for `/status`.
    audit: Mutex<AuditReport>,
}

/// What the audit of the group's keys last found (see `RecordAudit`).
#[derive(Clone, Debug, Default)]
pub struct AuditReport {
    /// The record last read was trusted.
    pub trusted: bool,
    /// The anomalies of the last read, in words.
    pub anomalies: Vec<String>,
    /// Anomalies found since start (each once per state of the keys).
    pub total: u64,
    /// The state of the keys the anomalies were last reported for.
    state: Option<(Option<i64>, String)>,
    /// The anomalies already reported for that state.
    reported: std::collections::BTreeSet<String>,
}

/// How long an `overrideCoordinator` call waits for the coordinator loop to leave: one round
/// takes at most a few etcd request timeouts.
const DETACH_PATIENCE: Duration = Duration::from_secs(15);

#[cfg_attr(not(feature = "etcd"), allow(dead_code))]
impl Coordination {
    /// No session yet: the guard is closed.
    pub fn new(clock: Arc<dyn Fn() -> Instant + Send + Sync>) -> Self {
        Self {
            clock,
            session: Mutex::new(None),
            view: Mutex::new(None),
            detached: std::sync::atomic::AtomicBool::new(false),
            left: tokio::sync::watch::channel(false).0,
            audit: Mutex::new(AuditReport { trusted: true, ..AuditReport::default() }),
        }
    }

    /// Records the audit of one read of the keys in `state` (the record's revision and the
    /// mastership key): whether its record was trusted and what it found. Returns the
    /// anomalies not yet reported for this state, to log.
    pub fn record_audit(
        &self,
        state: (Option<i64>, String),
        trusted: bool,
        anomalies: &[String],
    ) -> Vec<String> {
        let mut report = self.audit.lock().unwrap_or_else(|e| e.into_inner());
        if report.state.as_ref() != Some(&state) {
            report.state = Some(state);
            report.reported.clear();
        }
        let fresh: Vec<String> =
            anomalies.iter().filter(|a| !report.reported.contains(*a)).cloned().collect();
        report.reported.extend(fresh.iter().cloned());
        report.total += fresh.len() as u64;
        report.trusted = trusted;
        report.anomalies = anomalies.to_vec();
        fresh
    }

    /// What the audit last found.
    pub fn audit(&self) -> AuditReport {
        self.audit.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Whether the broker has left automatic failover (an `overrideCoordinator` call).
    pub fn is_detached(&self) -> bool {
        self.detached.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Asks the coordinator loop to leave (it stops deciding roles and resigns its lease) and
    /// waits until it has; `false` if it did not within [`DETACH_PATIENCE`].
    pub async fn detach(&self) -> bool {
        let mut left = self.left.subscribe();
        self.detached.store(true, std::sync::atomic::Ordering::SeqCst);
        tokio::time::timeout(DETACH_PATIENCE, left.wait_for(|l| *l)).await.is_ok_and(|r| r.is_ok())
    }

    /// The coordinator loop has left (or never ran): [`detach`](Self::detach) returns.
    pub fn mark_left(&self) {
        self.left.send_replace(true);
    }

    /// Installs (or, `None`, removes) the lease session.
    pub fn set_session(&self, session: Option<Arc<dyn Coordinator>>) {
        *self.session.lock().unwrap_or_else(|e| e.into_inner()) = session;
    }

    /// The lease guard's state now (`None`: no session).
    pub fn lease(&self) -> Option<LeaseSnapshot> {
        self.session.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|c| c.lease())
    }

    /// Whether acknowledging is allowed now: a session whose guard is open.
    pub fn lease_open(&self) -> bool {
        self.lease().is_some_and(|l| l.is_open((self.clock)()))
    }

    /// Records the group as read.
    pub fn set_view(&self, view: GroupView) {
        *self.view.lock().unwrap_or_else(|e| e.into_inner()) = Some(view);
    }

    /// The group as last read.
    pub fn view(&self) -> Option<GroupView> {
        self.view.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The fence a master service's put path asks ([`LeaseFence`]): open while the lease guard
    /// is, and always once the broker left automatic failover (an `overrideCoordinator` call:
    /// its roles are the operator's, and no lease is kept).
    pub fn lease_fence(self: &Arc<Self>) -> LeaseFence {
        let weak = Arc::downgrade(self);
        LeaseFence::new(move || weak.upgrade().is_some_and(|c| c.is_detached() || c.lease_open()))
    }

    /// The members' published HA addresses as a master service's [`MemberDirectory`]: a
    /// slave's claimed broker id is bound to the IP of the HA address that live member
    /// published, as last read from the group.
    pub fn member_directory(self: &Arc<Self>) -> MemberDirectory {
        let weak = Arc::downgrade(self);
        MemberDirectory::new(move |id| {
            let view = weak.upgrade()?.view()?;
            view.live.iter().find(|m| m.broker_id == id).map(|m| MemberAddress::Ip(m.ha_addr.ip()))
        })
    }
}

/// Takes the node away (new puts are refused) and stops the running service, which answers the
/// puts in flight.
async fn stop_current(broker: &Broker, roles: &Roles) {
    let old = broker.set_node(Node::Unassigned);
    roles.set(Role::None);
    match old {
        Node::Master(m) => m.shutdown().await,
        Node::Slave(s) => s.shutdown().await,
        Node::Unassigned => {}
    }
}
