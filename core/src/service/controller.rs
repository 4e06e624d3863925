//! Controller mode's settings for the master and slave services (RocketMQ
//! `enableControllerMode=true`): what [`MasterServiceConfig::controller`](crate::service::MasterServiceConfig::controller) and
//! [`SlaveServiceConfig::controller`](crate::service::SlaveServiceConfig::controller) hold, and the sync-state-set authority seam. Below both
//! the service configuration and the AutoSwitch drivers, which read them.

use std::collections::BTreeSet;
use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use crate::autoswitch::sync_state::DEFAULT_HA_MAX_TIME_SLAVE_NOT_CATCHUP;
use crate::autoswitch::{BrokerId, SyncPolicy};
use crate::config::CoreConfigError;
use crate::log::Offset;
use crate::service::admission::MemberAddress;
use crate::service::coordinator::LeaseFence;

/// Controller mode (RocketMQ `enableControllerMode=true`) for a master service: the
/// AutoSwitch protocol instead of the classic one, for one master epoch. Set
/// [`MasterServiceConfig::controller`](crate::service::MasterServiceConfig::controller) to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterControllerConfig {
    /// This broker's id (the controller's `brokerId`); always a member of the sync-state-set.
    pub broker_id: BrokerId,
    /// The master epoch this service runs in (`changeToMaster`'s `newMasterEpoch`).
    pub epoch: i32,
    /// The sync-state-set to start from (the master is added if missing).
    pub sync_state_set: BTreeSet<BrokerId>,
    /// The epoch of that set (`syncStateSetEpoch`).
    pub sync_state_set_epoch: i32,
    /// How SYNC puts wait: `allAckInSyncStateSet`, `inSyncReplicas`, `minInSyncReplicas`
    /// (too small a set: `IN_SYNC_REPLICAS_NOT_ENOUGH` at once).
    pub sync: SyncPolicy,
    /// Propose removing a member behind for this long (`haMaxTimeSlaveNotCatchup`).
    pub ha_max_time_slave_not_catchup: Duration,
    /// Who decides the sync-state-set of the service started with this config (`None`:
    /// [`LocalAuthority`](crate::service::LocalAuthority), every proposal applied at once).
    pub authority: Option<AuthorityFactory>,
    /// The identity each member's broker id is bound to (on etcd, the HA addresses the
    /// members published); `None`: no binding, so only connections the admission identifies
    /// count, with whatever id they claim.
    pub members: Option<MemberDirectory>,
    /// The broker's lease (automatic failover): while it is closed puts are refused
    /// ([`PutStatus::LeaseLost`](crate::PutStatus::LeaseLost)), and a put whose waits end after
    /// it closed is not acknowledged
    /// ([`PutStatus::LeaseLostAfterStore`](crate::PutStatus::LeaseLostAfterStore)). `None`: no
    /// lease (roles given by an operator).
    pub lease: Option<LeaseFence>,
}

/// Looks up the identity a broker id is bound to ([`MemberAddress`]): a handshake claiming the
/// id must come from it. Consulted at every handshake, and again for a connection not yet
/// identified, so it may change over time (members publishing their addresses). Compared by
/// identity.
#[derive(Clone)]
pub struct MemberDirectory(Arc<dyn Fn(BrokerId) -> Option<MemberAddress> + Send + Sync>);

impl MemberDirectory {
    /// A directory answering with `lookup`.
    pub fn new(lookup: impl Fn(BrokerId) -> Option<MemberAddress> + Send + Sync + 'static) -> Self {
        Self(Arc::new(lookup))
    }

    /// The identity `broker_id` is bound to, if any.
    pub fn lookup(&self, broker_id: BrokerId) -> Option<MemberAddress> {
        (self.0)(broker_id)
    }
}

impl std::fmt::Debug for MemberDirectory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MemberDirectory(..)")
    }
}

impl PartialEq for MemberDirectory {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for MemberDirectory {}

/// Makes the [`SyncStateSetAuthority`] of each master service started with a config (a
/// coordinator's, whose answers come later through the handle). Compared by identity.
#[derive(Clone)]
pub struct AuthorityFactory(Arc<dyn Fn() -> Box<dyn SyncStateSetAuthority> + Send + Sync>);

impl AuthorityFactory {
    /// A factory calling `make` once per master service.
    pub fn new(make: impl Fn() -> Box<dyn SyncStateSetAuthority> + Send + Sync + 'static) -> Self {
        Self(Arc::new(make))
    }

    /// A new authority.
    pub fn make(&self) -> Box<dyn SyncStateSetAuthority> {
        (self.0)()
    }
}

impl std::fmt::Debug for AuthorityFactory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthorityFactory(..)")
    }
}

impl PartialEq for AuthorityFactory {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for AuthorityFactory {}

impl Default for MasterControllerConfig {
    fn default() -> Self {
        Self {
            broker_id: 1,
            epoch: 1,
            sync_state_set: BTreeSet::new(),
            sync_state_set_epoch: 1,
            sync: SyncPolicy::default(),
            ha_max_time_slave_not_catchup: DEFAULT_HA_MAX_TIME_SLAVE_NOT_CATCHUP,
            authority: None,
            members: None,
            lease: None,
        }
    }
}

impl MasterControllerConfig {
    /// Checks every field, naming the first that cannot work.
    pub fn validate(&self) -> Result<(), CoreConfigError> {
        let invalid = |field, value: String, reason| Err(CoreConfigError::Invalid { field, value, reason });
        if self.broker_id < 0 {
            return invalid("controller.broker_id", self.broker_id.to_string(), "must not be negative");
        }
        if self.epoch < 0 {
            return invalid("controller.epoch", self.epoch.to_string(), "must not be negative");
        }
        if let Some(id) = self.sync_state_set.iter().find(|&&id| id < 0) {
            return invalid("controller.sync_state_set", id.to_string(), "broker ids must not be negative");
        }
        if self.ha_max_time_slave_not_catchup.is_zero() {
            return invalid(
                "controller.ha_max_time_slave_not_catchup",
                format!("{:?}", self.ha_max_time_slave_not_catchup),
                "must be longer than zero",
            );
        }
        Ok(())
    }
}

/// Who decides the sync-state-set: the master proposes, the authority answers. The seam a
/// coordinator (RocketMQ's controller, `AlterSyncStateSet`) takes over.
pub trait SyncStateSetAuthority: Send {
    /// The master proposes `proposed` while `applied` (with its `epoch`) is in force. Returns
    /// the set and epoch to apply now, or `None` if the answer comes later (through
    /// [`AutoSwitchDriver::set_sync_state_set`](crate::service::adapter::AutoSwitchDriver::set_sync_state_set)).
    fn propose(
        &mut self,
        proposed: &BTreeSet<BrokerId>,
        applied: &BTreeSet<BrokerId>,
        epoch: i32,
    ) -> Option<(BTreeSet<BrokerId>, i32)>;
}

/// Controller mode for a slave service ([`SlaveServiceConfig::controller`](crate::service::SlaveServiceConfig::controller)): what the
/// controller's `changeToSlave` says, plus this broker's AutoSwitch settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlaveControllerConfig {
    /// This broker's id, sent in the handshake (the controller's `brokerId`).
    pub broker_id: BrokerId,
    /// The broker id of the master to follow (`changeToSlave`'s `masterBrokerId`).
    pub master_broker_id: BrokerId,
    /// The epoch the master was elected in (`changeToSlave`'s `newMasterEpoch`).
    pub master_epoch: i32,
    /// `isAsyncLearner`: replicate without ever joining the sync-state-set.
    pub async_learner: bool,
    /// `isSyncFromLastFile`: an empty slave asks only for the master's last segment.
    pub sync_from_last_file: bool,
    /// The operator's explicit override (`haSlaveDropConfirmed`): the one range of confirmed
    /// bytes `[point, confirmOffset)` a truncation may drop, exactly as a
    /// [`PeerError::WouldTruncateConfirmed`](crate::autoswitch::PeerError::WouldTruncateConfirmed) refusal named it. `None`: never below the
    /// confirmOffset.
    pub drop_confirmed: Option<Range<Offset>>,
}

impl Default for SlaveControllerConfig {
    fn default() -> Self {
        Self {
            broker_id: 2,
            master_broker_id: 1,
            master_epoch: 1,
            async_learner: false,
            sync_from_last_file: false,
            drop_confirmed: None,
        }
    }
}

impl SlaveControllerConfig {
    /// Checks every field, naming the first that cannot work.
    pub fn validate(&self) -> Result<(), CoreConfigError> {
        let invalid = |field, value: String, reason| Err(CoreConfigError::Invalid { field, value, reason });
        if self.broker_id < 0 {
            return invalid("controller.broker_id", self.broker_id.to_string(), "must not be negative");
        }
        if self.master_broker_id < 0 {
            return invalid(
                "controller.master_broker_id",
                self.master_broker_id.to_string(),
                "must not be negative",
            );
        }
        if self.master_broker_id == self.broker_id {
            return invalid(
                "controller.master_broker_id",
                self.master_broker_id.to_string(),
                "is this broker's own id: a broker cannot follow itself",
            );
        }
        if self.master_epoch < 0 {
            return invalid("controller.master_epoch", self.master_epoch.to_string(), "must not be negative");
        }
        if let Some(range) = self.drop_confirmed.as_ref().filter(|r| r.start >= r.end) {
            return invalid(
                "controller.drop_confirmed",
                format!("{}-{}", range.start, range.end),
                "must name a range of at least one byte, start below end",
            );
        }
        Ok(())
    }
}
