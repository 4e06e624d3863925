//! The `/status` document, typed: what a broker's HTTP API serves, what `logship status`
//! reads, and what the status page (`GET /`) shows. Field names are the JSON's (camelCase);
//! the page's JavaScript reads the same names.
//!
//! The document's shape follows the role: [`RoleStatus`] is tagged by `role` (`NONE`, `SYNC_MASTER`,
//! `ASYNC_MASTER` or `SLAVE`) and carries that role's fields; the store's figures, the remoting
//! port and the failover group are the same for every role. Every field has a default, so a
//! partial document (an older broker's, a test's) reads too.
//!
//! ```
//! let doc: logship::status::Status = serde_json::from_str(
//!     r#"{"role": "SLAVE", "maxOffset": 42, "master": {"state": "STREAMING", "inSync": true}}"#,
//! ).unwrap();
//! assert_eq!(doc.node.role(), "SLAVE");
//! assert_eq!(doc.max_offset, 42);
//! ```

use std::collections::BTreeMap;

pub use logship_broker::register::RegistrationStatus;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A broker id (`brokerId`).
pub type BrokerId = i64;

/// `GET /status`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Status {
    /// The role and what only that role has.
    #[serde(flatten)]
    pub node: RoleStatus,
    /// The log's first offset.
    pub min_offset: u64,
    /// The log's end.
    pub max_offset: u64,
    /// Flushed to disk up to here.
    pub flushed_offset: u64,
    /// The store's disk, as a fraction used (`None`: unknown).
    pub disk_used_ratio: Option<f64>,
    /// Why the store refuses writes now (a full disk), if it does.
    pub write_refused: Option<String>,
    /// The store's integrity figures.
    pub store: StoreIntegrity,
    /// The remoting port and its NameServer registrations, once started.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remoting: Option<Remoting>,
    /// Automatic failover's group (brokers with `etcdEndpoints`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<Group>,
}

impl Status {
    /// A master's fields ([`RoleStatus::master`]).
    pub fn master(&self) -> Option<&Master> {
        self.node.master()
    }

    /// A slave's fields ([`RoleStatus::slave`]).
    pub fn slave(&self) -> Option<&Slave> {
        self.node.slave()
    }

    /// The document as JSON, its object keys sorted (as `/status` serves it).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).expect("the status document serializes")
    }
}

/// The document as `/status` serves it (JSON, keys sorted).
impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_json())
    }
}

/// `remoting`: the RocketMQ remoting port, its NameServer registrations and a slave's metadata
/// sync.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Remoting {
    /// The addresses bound (`listenPort`, and `fastListenPort` if set).
    pub addresses: Vec<String>,
    /// Client connections open now.
    pub connections: u64,
    /// Requests answered since start.
    pub requests: u64,
    /// Requests in flight now.
    pub in_flight: u64,
    /// The bytes of the requests in flight now.
    pub in_flight_bytes: u64,
    /// The port's counters.
    pub port: RemotingPort,
    /// Each NameServer's registration, by address (`None` without `namesrvAddr`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name_servers: Option<BTreeMap<String, RegistrationStatus>>,
    /// A slave's metadata sync from its master (`None` on a master outside controller mode).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slave_sync: Option<SlaveSync>,
}

/// `remoting.port`: the remoting port's counters since start.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct RemotingPort {
    /// Connections accepted.
    pub accepted: u64,
    /// Connections refused at accept (a cap).
    pub refused: u64,
    /// Connections closed for bad bytes (garbage, oversized or truncated frames).
    pub bad_frames: u64,
    /// Connections closed idle, stalled on reading, or with a frame that never finished.
    pub timed_out: u64,
    /// Requests answered `SYSTEM_BUSY` for an in-flight cap.
    pub busy: u64,
}

/// `remoting.slaveSync`: a slave's metadata sync (topics, offsets, groups) from its master.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SlaveSync {
    /// The master synced from (`None`: none known yet).
    pub master: Option<String>,
    /// Milliseconds since the last good round (`None`: none yet).
    pub age_ms: Option<u64>,
    /// The last round's error, while rounds fail.
    pub last_error: Option<String>,
    /// Failed rounds in a row.
    pub failures: u32,
    /// Rounds run since start.
    pub rounds: u64,
}

/// The status document's role section: the role as `/status` shows it, with its fields, tagged
/// by `role`. A view, built from the broker's configured [`BrokerRole`](logship_core::BrokerRole)
/// and, in controller mode, its current
/// [`LocalRole`](logship_core::service::coordinator::LocalRole); unlike those, it carries the
/// numbers the page shows.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role")]
pub enum RoleStatus {
    /// Controller mode, no HA role (yet).
    #[serde(rename = "NONE")]
    Unassigned(Unassigned),
    /// A SYNC_MASTER.
    #[serde(rename = "SYNC_MASTER")]
    SyncMaster(Master),
    /// An ASYNC_MASTER.
    #[serde(rename = "ASYNC_MASTER")]
    AsyncMaster(Master),
    /// A SLAVE.
    #[serde(rename = "SLAVE")]
    Slave(Slave),
}

impl Default for RoleStatus {
    fn default() -> Self {
        Self::Unassigned(Unassigned::default())
    }
}

impl RoleStatus {
    /// The `role` string.
    pub fn role(&self) -> &'static str {
        match self {
            Self::Unassigned(_) => "NONE",
            Self::SyncMaster(_) => "SYNC_MASTER",
            Self::AsyncMaster(_) => "ASYNC_MASTER",
            Self::Slave(_) => "SLAVE",
        }
    }

    /// A master's fields.
    pub fn master(&self) -> Option<&Master> {
        match self {
            Self::SyncMaster(m) | Self::AsyncMaster(m) => Some(m),
            _ => None,
        }
    }

    /// A slave's fields.
    pub fn slave(&self) -> Option<&Slave> {
        match self {
            Self::Slave(s) => Some(s),
            _ => None,
        }
    }
}

/// A controller-mode broker without an HA role.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Unassigned {
    /// Its controller-mode state.
    pub controller: UnassignedController,
}

/// `controller` of a broker without an HA role.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct UnassignedController {
    /// `brokerId`.
    pub broker_id: Option<BrokerId>,
    /// The role last given (none).
    pub assigned: Option<AssignedRole>,
    /// The store's confirm offset.
    pub confirm_offset: u64,
    /// The log's epochs, oldest first.
    pub epochs: Vec<Epoch>,
}

/// A controller-mode role as given by an admin call or the failover loop.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AssignedRole {
    /// `NONE`, `MASTER` or `SLAVE`.
    pub role: String,
    /// The master epoch (a master or a slave).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<i32>,
    /// The master's HA address (a slave).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master_address: Option<String>,
    /// The master's broker id (a slave).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub master_broker_id: Option<BrokerId>,
}

/// One epoch of the log.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Epoch {
    /// The epoch.
    pub epoch: i32,
    /// Where it starts in the log.
    pub start_offset: u64,
}

/// A master's fields.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Master {
    /// Controller mode's state (`null` for the classic protocol).
    pub controller: Option<MasterController>,
    /// Replicated to the slaves up to here.
    pub replicated_offset: Option<u64>,
    /// Puts waiting for a flush or a replica.
    pub pending_waits: u64,
    /// The connected slaves.
    pub slaves: Vec<ReplicaLink>,
    /// Named replicas not connected now.
    pub absent_replicas: Vec<AbsentReplica>,
    /// Copies expected, the master included.
    pub replicas_expected: u64,
    /// Copies in sync, the master included.
    pub replicas_in_sync: u64,
    /// Fewer copies in sync than expected.
    pub under_replicated: bool,
    /// Bytes sent to slaves since start.
    pub bytes_replicated: u64,
    /// Why the master refuses puts, if it is fenced.
    pub fence: Option<String>,
    /// The HA port's trust model.
    pub ha_trust: HaTrust,
    /// HA connections refused, by reason.
    pub ha_refusals: HaRefusals,
}

/// One connected slave of a master.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ReplicaLink {
    /// Its replica name (its identity, or its address).
    pub name: String,
    /// Bytes sent to it on this connection.
    pub bytes_sent: u64,
    /// Its address.
    pub address: String,
    /// The offset it acknowledged.
    pub ack_offset: Option<u64>,
    /// How far behind the master's end it is.
    pub lag_bytes: u64,
    /// How long behind.
    pub lag_seconds: f64,
    /// Whether it is in sync (`haMaxGapNotInSync`).
    pub in_sync: bool,
    /// How long it has been connected.
    pub connected_seconds: f64,
    /// Whether its identity is trusted (docs/trust.md).
    pub trusted: bool,
    /// Whether it counts for SYNC waits.
    pub counted: bool,
    /// Its claimed identity.
    pub replica: Option<String>,
}

/// A named replica not connected now.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AbsentReplica {
    /// Its name.
    pub name: String,
    /// Its last acknowledged offset (`None`: never seen since start).
    pub ack_offset: Option<u64>,
    /// How long it has been away (`None`: never seen since start).
    pub away_seconds: Option<f64>,
}

/// The HA port's trust model (docs/trust.md).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HaTrust {
    /// `protected`, `allowList`, `tls` or `allowListAndTls`.
    pub mode: String,
    /// `haTrustAnyReplica`.
    pub trust_any_replica: bool,
    /// What `haTrustAnyReplica=true` gives away.
    pub warning: Option<String>,
}

/// HA connections a master refused, by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HaRefusals {
    /// Not admitted (`haReplicaAllowList`).
    pub not_admitted: u64,
    /// Over `haMaxReplicaConnections`.
    pub over_limit: u64,
    /// Replaced by a newer connection of the same replica.
    pub displaced: u64,
    /// Claiming an identity they could not hold.
    pub identity_refused: u64,
    /// No first report in time.
    pub first_report_timeouts: u64,
    /// Untrusted, and ahead of the master.
    pub untrusted_ahead: u64,
    /// Their log diverged from the master's.
    pub diverged: u64,
    /// Reports no slave could make.
    pub implausible_reports: u64,
    /// Plain connections on a TLS-only port.
    pub plain_refused: u64,
    /// TLS handshakes that failed.
    pub tls_refused: u64,
    /// The last refusal, in words.
    pub last: Option<String>,
}

/// `controller` of a controller-mode master.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MasterController {
    /// `brokerId`.
    pub broker_id: BrokerId,
    /// The role as given.
    pub assigned: Option<AssignedRole>,
    /// The master epoch.
    pub epoch: i32,
    /// The confirm offset.
    pub confirm_offset: u64,
    /// The sync-state-set in force.
    pub sync_state_set: Vec<BrokerId>,
    /// Its epoch.
    pub sync_state_set_epoch: i32,
    /// A set proposed and not yet committed.
    pub proposed_sync_state_set: Option<Vec<BrokerId>>,
    /// The log's epochs, oldest first.
    pub epochs: Vec<Epoch>,
    /// The connected slaves, as the sync-state-set sees them.
    pub slaves: Vec<ControllerLink>,
}

/// A connected slave as a controller-mode master's sync-state-set sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ControllerLink {
    /// The connection.
    pub conn: u64,
    /// Its broker id, once claimed.
    pub broker_id: Option<BrokerId>,
    /// An asynchronous learner (never a member).
    pub async_learner: bool,
    /// Whether it counts for the set.
    pub counted: bool,
}

/// A slave's fields.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Slave {
    /// Controller mode's state (`null` for the classic protocol).
    pub controller: Option<SlaveController>,
    /// The link to the master.
    pub master: MasterLink,
}

/// A slave's link to its master.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct MasterLink {
    /// The master's HA address.
    pub address: String,
    /// `DISCONNECTED`, `CONNECTING` or `STREAMING`.
    pub state: String,
    /// The offset this slave acknowledged.
    pub ack_offset: Option<u64>,
    /// The master's end as last heard.
    pub master_offset: Option<u64>,
    /// How far behind the master.
    pub lag_bytes: u64,
    /// How long behind.
    pub lag_seconds: f64,
    /// Streaming, within `haMaxGapNotInSync`, and storing what it gets.
    pub in_sync: bool,
    /// Since the last read from the master.
    pub seconds_since_last_read: Option<f64>,
    /// Why the slave cannot store what the master sends, if it cannot.
    pub append_error: Option<String>,
    /// Appends that failed since start.
    pub append_failures: u64,
}

/// `controller` of a controller-mode slave.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SlaveController {
    /// `brokerId`.
    pub broker_id: BrokerId,
    /// The role as given.
    pub assigned: Option<AssignedRole>,
    /// The master's broker id.
    pub master_broker_id: BrokerId,
    /// The epoch the master was elected in.
    pub master_epoch: i32,
    /// The last epoch the master announced.
    pub master_last_epoch: Option<i32>,
    /// The AutoSwitch handshake's phase.
    pub phase: String,
    /// The confirm offset.
    pub confirm_offset: u64,
    /// The log's epochs, oldest first.
    pub epochs: Vec<Epoch>,
    /// Where this log and the master's agree.
    pub consistent_point: Option<u64>,
    /// Truncations since start.
    pub truncations: u64,
    /// Bytes truncated since start.
    pub truncated_bytes: u64,
    /// Masters refused, by reason.
    pub refusals: FollowRefusals,
}

/// Masters a controller-mode slave refused to follow, by reason.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct FollowRefusals {
    /// The refusal in force, in words.
    pub current: Option<String>,
    /// The master's log is behind the epoch it was elected in.
    pub master_behind_elected_epoch: u64,
    /// The master's log is behind this slave's last epoch.
    pub master_behind_local_epoch: u64,
    /// This log holds an epoch above the master's election.
    pub epoch_above_elected: u64,
    /// Following would truncate confirmed messages.
    pub would_truncate_confirmed: u64,
    /// No point where the logs agree.
    pub no_consistent_point: u64,
}

/// The store's integrity figures: forced deletions, the retention floor, the scrub.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct StoreIntegrity {
    /// Segments deleted before their time (`cleanFileForciblyEnable`).
    pub forced_deleted_segments: u64,
    /// Their bytes.
    pub forced_deleted_bytes: u64,
    /// Forced deletion stops below here (the slowest in-sync slave's ack).
    pub retention_floor: Option<u64>,
    /// The background CRC scrub.
    pub scrub: Scrub,
}

/// The background CRC scrub (`scrubBytesPerSecond`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Scrub {
    /// Whether it runs.
    pub enabled: bool,
    /// Passes completed.
    pub passes: u64,
    /// Where it is now.
    pub position: Option<u64>,
    /// Where this pass ends.
    pub pass_end: u64,
    /// Bytes verified since start.
    pub bytes_verified: u64,
    /// Damaged records found since start.
    pub damaged_records: u64,
    /// What it found.
    pub findings: Vec<ScrubFinding>,
}

/// A damaged record the scrub found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScrubFinding {
    /// The segment file.
    pub segment: String,
    /// The record's offset.
    pub offset: u64,
    /// What is wrong.
    pub error: String,
    /// Where the scrub went on.
    pub resumed_at: Option<u64>,
}

/// `group`: automatic failover's group as last read, or that this broker left it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Group {
    /// An admin call with `overrideCoordinator` took the role over until restart.
    Left {
        /// Always `true`.
        left: bool,
        /// Why, in words.
        why: String,
    },
    /// A member of the group.
    Member(GroupView),
}

/// The failover group as this broker last read it, and its lease guard.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupView {
    /// The record's master epoch.
    pub master_epoch: Option<i32>,
    /// The record's master.
    pub master_id: Option<BrokerId>,
    /// Whether that master holds a live member key.
    pub master_live: bool,
    /// The master's HTTP address.
    pub master_http_address: Option<String>,
    /// The record's sync-state-set.
    pub sync_state_set: Option<Vec<BrokerId>>,
    /// Its epoch.
    pub sync_state_set_epoch: Option<i32>,
    /// The live members.
    pub members: Vec<GroupMember>,
    /// Whether this broker's lease guard is open.
    pub lease_open: bool,
    /// Whether its lease was lost (or there is none).
    pub lease_lost: bool,
    /// Whether the record last read was trusted.
    pub record_trusted: bool,
    /// What the audit of the last read found.
    pub record_anomalies: Vec<String>,
    /// Anomalies found since start.
    pub record_anomalies_total: u64,
}

/// A live member of the failover group.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GroupMember {
    /// Its broker id.
    pub broker_id: BrokerId,
    /// Its log's end, as published.
    pub max_offset: u64,
    /// Its epoch.
    pub epoch: i32,
    /// How far behind the master's published end (`None`: no live master).
    pub lag: Option<u64>,
    /// Its HA address.
    pub ha_address: String,
    /// Its HTTP address.
    pub http_address: String,
}
