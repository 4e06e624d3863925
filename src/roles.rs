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
use logship_core::service::coordinator::{Coordinator, GroupView, LeaseSnapshot};
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
    /// The epoch is not above what this broker's log or earlier calls hold.
    #[error(
        "cannot become master at epoch {epoch}: it must be above every epoch this broker holds (highest {highest})"
    )]
    PromoteEpochNotAbove {
        /// The epoch asked for.
        epoch: i32,
        /// The highest epoch held (the log's last, or one given since start).
        highest: i32,
    },
    /// A follow below an epoch this broker holds: a stale command.
    #[error("cannot follow a master at epoch {epoch}: this broker holds epoch {highest} already")]
    FollowEpochBehind {
        /// The epoch asked for.
        epoch: i32,
        /// The highest epoch held.
        highest: i32,
    },
    /// One master per epoch: this broker is master, or follows another master, in that epoch.
    #[error("cannot follow broker {master} at epoch {epoch}: {reason}")]
    EpochTaken {
        /// The epoch asked for.
        epoch: i32,
        /// The master asked for.
        master: BrokerId,
        /// Who holds the epoch.
        reason: String,
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
    /// A promotion skipping epochs, without `force`.
    #[error(
        "cannot become master at epoch {epoch}: epochs advance one at a time, and this broker holds epoch \
         {highest}, so the next is {next}; send \"force\": true to skip ahead (a controller that knows of \
         later epochs)"
    )]
    EpochSkips {
        /// The epoch asked for.
        epoch: i32,
        /// The highest epoch this broker knows.
        highest: i32,
        /// The one it may take without force.
        next: i32,
    },
    /// Another broker is master in that epoch (or a later one), as this broker's master said in
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
    /// A request that cannot work (a bad address, a negative id, following itself).
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
    /// The role now, for status.
    current: Mutex<Role>,
}

impl Roles {
    /// No role yet, for broker `broker_id`.
    pub fn new(broker_id: BrokerId) -> Self {
        Self { broker_id, change: tokio::sync::Mutex::new(-1), current: Mutex::new(Role::None) }
    }

    /// The role now.
    pub fn current(&self) -> Role {
        self.current.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    fn set(&self, role: Role) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = role;
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
    /// the broker restarts (see the README).
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
    /// the broker restarts (see the README).
    #[serde(default)]
    pub override_coordinator: bool,
}

/// The epochs a broker knows of when it is told to become master.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct KnownEpochs {
    /// The local log's last epoch.
    pub log_last: Option<i32>,
    /// The highest epoch given since start (-1 for none).
    pub given: i32,
    /// The last epoch the master this broker follows announced in its handshake, and that
    /// master's id.
    pub announced: Option<(i32, BrokerId)>,
}

/// Whether promotion at `epoch` may go ahead (see the module docs): never at `i32::MAX`; never
/// at or below an epoch this broker's master announced, the log's last, or one given since
/// start; and, unless `force`, only at the next epoch (epochs start at 1).
pub fn check_promote(epoch: i32, known: KnownEpochs, force: bool) -> Result<(), RoleError> {
    if epoch == i32::MAX {
        return Err(RoleError::EpochExhausted { epoch });
    }
    if let Some((held, master)) = known.announced {
        if held >= epoch {
            return Err(RoleError::EpochHeldByAnother { epoch, held, master });
        }
    }
    let highest = known.log_last.unwrap_or(0).max(known.given).max(known.announced.map_or(0, |a| a.0)).max(0);
    if epoch <= highest {
        return Err(RoleError::PromoteEpochNotAbove { epoch, highest });
    }
    let next = highest + 1;
    if epoch > next && !force {
        return Err(RoleError::EpochSkips { epoch, highest, next });
    }
    Ok(())
}

/// Whether following `master` at `epoch` may go ahead, for broker `own` in role `current`.
pub fn check_follow(
    own: BrokerId,
    master: BrokerId,
    epoch: i32,
    log_last: Option<i32>,
    given: i32,
    current: &Role,
) -> Result<(), RoleError> {
    if master < 0 || epoch < 0 {
        return Err(RoleError::BadRequest(format!(
            "masterBrokerId ({master}) and epoch ({epoch}) must not be negative"
        )));
    }
    if master == own {
        return Err(RoleError::BadRequest(format!(
            "masterBrokerId {master} is this broker's own brokerId: a broker cannot follow itself"
        )));
    }
    if epoch == i32::MAX {
        return Err(RoleError::EpochExhausted { epoch });
    }
    let highest = log_last.unwrap_or(-1).max(given);
    if epoch < highest {
        return Err(RoleError::FollowEpochBehind { epoch, highest });
    }
    match current {
        Role::Master { epoch: e } if *e == epoch => Err(RoleError::EpochTaken {
            epoch,
            master,
            reason: format!("this broker is the master of epoch {epoch}"),
        }),
        Role::Slave { master_broker_id, epoch: e, .. } if *e == epoch && *master_broker_id != master => {
            Err(RoleError::EpochTaken {
                epoch,
                master,
                reason: format!("this broker follows broker {master_broker_id} in epoch {epoch}"),
            })
        }
        _ => Ok(()),
    }
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
        // On etcd, a slave's claimed broker id must come from the HA address it published.
        controller.members = broker.coordination.as_ref().map(|c| c.member_directory());
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
        &roles.current(),
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

/// Automatic failover's state shared with the HTTP handlers: the current lease session (whose
/// guard every `PUT_OK` is checked against) and the group as last read.
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
            assert!(matches!(err, RoleError::PromoteEpochNotAbove { .. }), "{epoch} {log:?} {given}: {err}");
            assert!(err.to_string().contains(&format!("epoch {epoch}")), "{err}");
        }
    }

    #[test]
    fn promotion_advances_one_epoch_at_a_time_unless_forced_and_never_to_the_last() {
        let err = check_promote(3, known(None, -1), false).unwrap_err();
        assert!(matches!(err, RoleError::EpochSkips { epoch: 3, highest: 0, next: 1 }), "{err}");
        assert!(err.to_string().contains("force"), "{err}");
        assert!(check_promote(3, known(None, -1), true).is_ok(), "forced");
        let err = check_promote(9, known(Some(2), 4), false).unwrap_err();
        assert!(matches!(err, RoleError::EpochSkips { next: 5, .. }), "{err}");
        for force in [false, true] {
            let err = check_promote(i32::MAX, known(Some(i32::MAX - 1), -1), force).unwrap_err();
            assert!(matches!(err, RoleError::EpochExhausted { .. }), "{err}");
            assert!(err.to_string().contains("2147483647"), "{err}");
        }
    }

    #[test]
    fn promotion_at_an_epoch_the_followed_master_announced_is_refused() {
        let announced = KnownEpochs { log_last: Some(1), given: 1, announced: Some((2, 1)) };
        let err = check_promote(2, announced, true).unwrap_err();
        assert!(matches!(err, RoleError::EpochHeldByAnother { epoch: 2, held: 2, master: 1 }), "{err}");
        assert!(err.to_string().contains("broker 1"), "{err}");
        assert!(check_promote(3, announced, false).is_ok(), "the next epoch after the announced one");
    }

    #[test]
    fn following_refuses_stale_epochs_itself_and_a_second_master_in_one_epoch() {
        let none = Role::None;
        assert!(check_follow(2, 1, 2, Some(1), -1, &none).is_ok(), "a newer master");
        assert!(check_follow(2, 1, 2, Some(2), -1, &none).is_ok(), "again in the log's epoch (a restart)");
        assert!(check_follow(3, 2, 2, None, -1, &none).is_ok(), "an empty log");
        let err = check_follow(2, 1, 1, Some(2), -1, &none).unwrap_err();
        assert!(matches!(err, RoleError::FollowEpochBehind { epoch: 1, highest: 2 }), "{err}");
        let err = check_follow(2, 1, 2, None, 3, &none).unwrap_err();
        assert!(matches!(err, RoleError::FollowEpochBehind { epoch: 2, highest: 3 }), "{err}");
        let err = check_follow(2, 2, 3, None, -1, &none).unwrap_err();
        assert!(matches!(err, RoleError::BadRequest(_)) && err.to_string().contains("itself"), "{err}");
        assert!(matches!(check_follow(2, -1, 3, None, -1, &none), Err(RoleError::BadRequest(_))));
        let master = Role::Master { epoch: 3 };
        let err = check_follow(2, 1, 3, Some(3), 3, &master).unwrap_err();
        assert!(matches!(err, RoleError::EpochTaken { .. }) && err.to_string().contains("master of epoch 3"));
        let slave = Role::Slave { master_address: "127.0.0.1:1".into(), master_broker_id: 1, epoch: 3 };
        assert!(check_follow(2, 1, 3, Some(3), 3, &slave).is_ok(), "the same master again");
        let err = check_follow(2, 4, 3, Some(3), 3, &slave).unwrap_err();
        assert!(err.to_string().contains("follows broker 1 in epoch 3"), "{err}");
        assert!(check_follow(2, 4, 4, Some(3), 3, &slave).is_ok(), "a newer epoch");
        let err = check_follow(2, 1, i32::MAX, None, -1, &none).unwrap_err();
        assert!(matches!(err, RoleError::EpochExhausted { .. }), "{err}");
    }
}
