//! A broker group's [`Coordinator`] on etcd.
//!
//! Keys, under a prefix (default `/logship`), per broker group:
//!
//! - `<prefix>/<brokerClusterName>/<brokerName>/record`: the [`GroupRecord`], written only by
//!   transactions that compare its `mod_revision` (or its absence) with what was read;
//! - `<prefix>/<brokerClusterName>/<brokerName>/members/<brokerId>`: each live broker's
//!   [`MemberState`], attached to that broker's lease, so it disappears when the lease expires;
//! - `<prefix>/<brokerClusterName>/<brokerName>/master`: the mastership, written with the record
//!   by the election under the winner's lease (value `<brokerId> <masterEpoch>`). While it is
//!   attached to a lease and the broker it names holds a live member key, and it names the
//!   record's master and epoch, the master is live; a master that restarts has a new lease and
//!   no mastership, and competes like any member. A key without a lease (written by hand) never
//!   expires, so it counts as no master.
//!
//! etcd is reached over TLS ([`EtcdTls`]: the CA etcd's certificate must chain to, and a client
//! certificate for etcd's `--client-cert-auth`) and with a user and password
//! ([`EtcdCredentials`], for etcd's authentication), or both: whoever can write the group's keys
//! decides who is master, so production groups should use them.
//!
//! Each [`EtcdCoordinator`] is one lease session: it grants a lease, keeps it alive in the
//! background and feeds every answer into a [`LeaseGuard`]. Once the lease is
//! lost the coordinator stays lost: a master steps down, and the broker connects a new
//! coordinator to take part again.
//!
//! An election writes the record and the mastership only while the record is as read, no
//! mastership exists and this broker's member key is held by this broker's lease, all in one
//! transaction. A set change writes only while the record is as read and this broker's lease
//! holds the mastership.

mod keepalive;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use etcd_client::{
    Certificate, Client, Compare, CompareOp, ConnectOptions, EventType, GetOptions, Identity, KeyValue,
    PutOptions, TlsOptions, Txn, TxnOp, TxnOpResponse, TxnResponse, WatchOptions, WatchStream,
};
use logship_core::autoswitch::BrokerId;
use logship_core::service::ServiceFuture;
use logship_core::service::coordinator::{
    CampaignOutcome, Choice, Coordinator, CoordinatorError, ElectionPolicy, GroupRecord, GroupView,
    LeaseConfig, LeaseConfigError, LeaseGuard, LeaseSnapshot, Mastership, MastershipKey, MemberState,
    RecordAnomaly, RecordAudit, RecordWatch, Revision, SetChange, SetChangeOutcome, SetChangeRefusal,
    Versioned, WatchEvent, WatchStart, apply_set_change, choose_master, elected_record,
};
use logship_core::time::{Instant, Origin};

/// How often a failed read is retried, and the pause before each retry.
const READ_RETRIES: u32 = 3;
const READ_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The core-time clock the coordinator stamps lease renewals with. It must be the clock of the
/// services that check the guard.
pub type Clock = Arc<dyn Fn() -> Instant + Send + Sync>;

/// A clock on tokio's time, counted from its first reading (what a broker uses when its
/// services have no clock of their own to share).
pub fn tokio_clock() -> Clock {
    let origin = Origin::new(tokio::time::Instant::now().into_std());
    Arc::new(move || origin.instant(tokio::time::Instant::now().into_std()))
}

/// TLS to etcd: the endpoints are `https://` URLs.
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdTls {
    /// PEM certificates of the CA(s) etcd's server certificate must chain to.
    pub ca_pem: Vec<u8>,
    /// A PEM client certificate chain and its PEM private key, presented to an etcd run with
    /// `--client-cert-auth` (`None`: no client certificate).
    pub identity: Option<(Vec<u8>, Vec<u8>)>,
    /// The name etcd's certificate must carry (`None`: the host of each endpoint).
    pub server_name: Option<String>,
}

impl std::fmt::Debug for EtcdTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdTls")
            .field("ca_pem", &format_args!("{} bytes", self.ca_pem.len()))
            .field("identity", &self.identity.as_ref().map(|_| "(client certificate)"))
            .field("server_name", &self.server_name)
            .finish()
    }
}

/// A user and password for etcd's authentication (`etcdctl auth enable`).
#[derive(Clone, PartialEq, Eq)]
pub struct EtcdCredentials {
    /// The etcd user.
    pub user: String,
    /// Its password.
    pub password: String,
}

impl std::fmt::Debug for EtcdCredentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdCredentials").field("user", &self.user).field("password", &"(hidden)").finish()
    }
}

/// Settings of an [`EtcdCoordinator`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EtcdConfig {
    /// etcd client URLs (`http://host:port`).
    pub endpoints: Vec<String>,
    /// The key prefix (default `/logship`).
    pub key_prefix: String,
    /// The group's `brokerClusterName`.
    pub cluster: String,
    /// The group's `brokerName`.
    pub broker_name: String,
    /// This broker's `brokerId`.
    pub broker_id: BrokerId,
    /// The lease settings.
    pub lease: LeaseConfig,
    /// How long one etcd request may take before it counts as failed.
    pub request_timeout: Duration,
    /// TLS (`None`: plain `http://` endpoints).
    pub tls: Option<EtcdTls>,
    /// A user and password (`None`: etcd's authentication is off).
    pub credentials: Option<EtcdCredentials>,
}

impl EtcdConfig {
    /// Settings with the default prefix, lease and a 1 s request timeout.
    pub fn new(endpoints: Vec<String>, cluster: &str, broker_name: &str, broker_id: BrokerId) -> Self {
        Self {
            endpoints,
            key_prefix: "/logship".to_owned(),
            cluster: cluster.to_owned(),
            broker_name: broker_name.to_owned(),
            broker_id,
            lease: LeaseConfig::default(),
            request_timeout: Duration::from_secs(1),
            tls: None,
            credentials: None,
        }
    }
}

/// Settings an [`EtcdCoordinator`] refuses.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EtcdConfigError {
    /// No endpoint.
    #[error("no etcd endpoint is configured")]
    NoEndpoints,
    /// A name that would break the key layout.
    #[error("{what} `{value}` must be non-empty printable ASCII without `/`")]
    BadName {
        /// Which name.
        what: &'static str,
        /// Its value.
        value: String,
    },
    /// A negative broker id.
    #[error("brokerId {0} is negative")]
    BadBrokerId(BrokerId),
    /// Zero request timeout.
    #[error("the etcd request timeout must be above zero")]
    ZeroTimeout,
    /// Lease settings that cannot fence.
    #[error(transparent)]
    Lease(#[from] LeaseConfigError),
    /// An `http://` endpoint with TLS settings, or an `https://` one without.
    #[error("etcd endpoint {endpoint}: {reason}")]
    Scheme {
        /// The endpoint.
        endpoint: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// An empty user or password.
    #[error("the etcd user and password must not be empty")]
    EmptyCredentials,
}

/// Connecting the coordinator failed.
#[derive(thiserror::Error, Debug)]
#[non_exhaustive]
pub enum ConnectError {
    /// The settings are refused.
    #[error(transparent)]
    Config(#[from] EtcdConfigError),
    /// etcd could not be reached or refused the lease.
    #[error(transparent)]
    Coordinator(#[from] CoordinatorError),
}

impl EtcdConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), EtcdConfigError> {
        if self.endpoints.is_empty() {
            return Err(EtcdConfigError::NoEndpoints);
        }
        let name_ok = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_graphic() && b != b'/');
        for (what, value) in [("brokerClusterName", &self.cluster), ("brokerName", &self.broker_name)] {
            if !name_ok(value) {
                return Err(EtcdConfigError::BadName { what, value: value.clone() });
            }
        }
        let prefix = self.key_prefix.strip_prefix('/').unwrap_or("");
        if !prefix.split('/').all(name_ok) {
            return Err(EtcdConfigError::BadName { what: "etcd key prefix", value: self.key_prefix.clone() });
        }
        if self.broker_id < 0 {
            return Err(EtcdConfigError::BadBrokerId(self.broker_id));
        }
        if self.request_timeout.is_zero() {
            return Err(EtcdConfigError::ZeroTimeout);
        }
        for endpoint in &self.endpoints {
            let https = endpoint.starts_with("https://");
            let reason = match (https, self.tls.is_some()) {
                (false, true) => "TLS is configured, so every endpoint must be an https:// URL",
                (true, false) => {
                    "an https:// endpoint needs TLS settings (the CA etcd's certificate chains to)"
                }
                _ => continue,
            };
            return Err(EtcdConfigError::Scheme { endpoint: endpoint.clone(), reason });
        }
        if self.credentials.as_ref().is_some_and(|c| c.user.is_empty() || c.password.is_empty()) {
            return Err(EtcdConfigError::EmptyCredentials);
        }
        self.lease.validate()?;
        Ok(())
    }
}

/// The keys of one broker group.
#[derive(Clone, Debug)]
struct Keys {
    record: String,
    master: String,
    members: String,
}

impl Keys {
    fn new(config: &EtcdConfig) -> Self {
        let group = format!("{}/{}/{}", config.key_prefix, config.cluster, config.broker_name);
        Self {
            record: format!("{group}/record"),
            master: format!("{group}/master"),
            members: format!("{group}/members/"),
        }
    }

    fn member(&self, id: BrokerId) -> String {
        format!("{}{id}", self.members)
    }
}

/// The lease session's state, shared with the keep-alive task.
#[derive(Debug)]
struct Session {
    guard: LeaseGuard,
}

/// A broker's coordinator on etcd: one lease session (see the [module docs](self)).
pub struct EtcdCoordinator {
    client: Client,
    keys: Keys,
    broker_id: BrokerId,
    lease_id: i64,
    timeout: Duration,
    session: Arc<Mutex<Session>>,
    keepalive: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for EtcdCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdCoordinator")
            .field("keys", &self.keys)
            .field("broker_id", &self.broker_id)
            .field("lease_id", &self.lease_id)
            .finish_non_exhaustive()
    }
}

fn unavailable(e: etcd_client::Error) -> CoordinatorError {
    let text = e.to_string();
    if text.contains("requested lease not found") || text.contains("lease not found") {
        CoordinatorError::LeaseLost
    } else {
        CoordinatorError::Unavailable(text)
    }
}

/// Runs `f` with the request timeout.
async fn timed<T>(
    timeout: Duration,
    f: impl Future<Output = Result<T, etcd_client::Error>>,
) -> Result<T, CoordinatorError> {
    match tokio::time::timeout(timeout, f).await {
        Ok(result) => result.map_err(unavailable),
        Err(_) => Err(CoordinatorError::Timeout(timeout)),
    }
}

impl EtcdCoordinator {
    /// Connects, grants this broker's lease and starts keeping it alive. The guard opens with
    /// the grant; `clock` must be the one the guard is checked against.
    pub async fn connect(config: EtcdConfig, clock: Clock) -> Result<Self, ConnectError> {
        config.validate()?;
        let timeout = config.request_timeout;
        let mut options = ConnectOptions::new()
            .with_connect_timeout(timeout)
            .with_timeout(timeout)
            .with_keep_alive(Duration::from_secs(1), timeout)
            .with_require_leader(true);
        if let Some(tls) = &config.tls {
            let mut t = TlsOptions::new().ca_certificate(Certificate::from_pem(&tls.ca_pem));
            if let Some((cert, key)) = &tls.identity {
                t = t.identity(Identity::from_pem(cert, key));
            }
            if let Some(name) = &tls.server_name {
                t = t.domain_name(name.clone());
            }
            options = options.with_tls(t);
        }
        if let Some(c) = &config.credentials {
            // A token etcd dropped (it restarted, or the token's TTL passed) is fetched again.
            options = options.with_user(c.user.clone(), c.password.clone()).with_auto_token_refresh(true);
        }
        let client = timed(timeout, Client::connect(&config.endpoints, Some(options))).await?;
        let ttl_secs = i64::try_from(config.lease.ttl.as_secs()).unwrap_or(i64::MAX);
        let sent_at = clock();
        let granted = timed(timeout, client.lease_client().grant(ttl_secs, None)).await?;
        // etcd may raise a TTL to its minimum, never lower it; the guard takes the smaller.
        let ttl = Duration::from_secs(granted.ttl().clamp(0, ttl_secs).unsigned_abs());
        let mut guard = LeaseGuard::new(config.lease.margin);
        guard.renewed(sent_at, ttl);
        let session = Arc::new(Mutex::new(Session { guard }));
        let keepalive = tokio::spawn(keepalive::run(keepalive::KeepAlive {
            client: client.clone(),
            lease_id: granted.id(),
            ttl,
            interval: config.lease.renew_interval,
            timeout,
            clock,
            session: Arc::clone(&session),
            sent: VecDeque::new(),
        }));
        tracing::info!(lease = granted.id(), ttl_secs = ttl.as_secs(), record = %Keys::new(&config).record, "etcd lease granted");
        Ok(Self {
            client,
            keys: Keys::new(&config),
            broker_id: config.broker_id,
            lease_id: granted.id(),
            timeout,
            session,
            keepalive,
        })
    }

    /// This session's etcd lease id.
    pub fn lease_id(&self) -> i64 {
        self.lease_id
    }

    /// The key of the group record.
    pub fn record_key(&self) -> &str {
        &self.keys.record
    }

    /// Revokes the lease (a clean shutdown: the member key goes at once, so a new master can be
    /// elected without waiting for the TTL) and stops the keep-alive.
    pub async fn resign(&self) -> Result<(), CoordinatorError> {
        self.keepalive.abort();
        self.session.lock().unwrap_or_else(PoisonError::into_inner).guard.lost();
        timed(self.timeout, self.client.lease_client().revoke(self.lease_id)).await.map(drop)
    }

    fn record_of(&self, kv: &KeyValue) -> Result<Versioned<GroupRecord>, CoordinatorError> {
        let value = GroupRecord::decode(kv.value())
            .map_err(|source| CoordinatorError::Record { key: self.keys.record.clone(), source })?;
        Ok(Versioned { revision: kv.mod_revision(), value })
    }

    /// The live members' states, and the member keys that cannot be read (left out).
    fn members_of(&self, kvs: &[KeyValue]) -> (Vec<MemberState>, Vec<RecordAnomaly>) {
        let mut live = Vec::with_capacity(kvs.len());
        let mut unreadable = Vec::new();
        for kv in kvs {
            let key = String::from_utf8_lossy(kv.key()).into_owned();
            match MemberState::decode(kv.value()) {
                Ok(state) if key == self.keys.member(state.broker_id) => live.push(state),
                Ok(state) => unreadable.push(RecordAnomaly::MemberUnreadable {
                    error: CoordinatorError::MemberKeyMismatch {
                        key: key.clone(),
                        broker_id: state.broker_id,
                    }
                    .to_string(),
                    key,
                }),
                Err(source) => {
                    unreadable.push(RecordAnomaly::MemberUnreadable { key, error: source.to_string() })
                }
            }
        }
        live.sort_by_key(|m| m.broker_id);
        (live, unreadable)
    }

    /// The mastership key as read; `members` are the raw member keys of the same read.
    fn mastership_of(&self, kv: Option<&KeyValue>, members: &[KeyValue]) -> MastershipKey {
        let Some(kv) = kv else { return MastershipKey::Absent };
        let Some((broker_id, master_epoch)) = Mastership::parse(kv.value()) else {
            let value = String::from_utf8_lossy(kv.value()).chars().take(64).collect();
            return MastershipKey::Malformed { value, revision: kv.mod_revision() };
        };
        let member = self.keys.member(broker_id);
        let holder_live = members.iter().any(|m| m.key() == member.as_bytes());
        MastershipKey::Present(Mastership {
            broker_id,
            master_epoch,
            lease: kv.lease(),
            holder_live,
            revision: kv.mod_revision(),
        })
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse, CoordinatorError> {
        timed(self.timeout, self.client.kv_client().txn(txn)).await
    }

    /// The record and members at one revision. A read is retried on a failed connection: the
    /// client's channel may still hand a request to an endpoint that was down, right after
    /// etcd came back.
    async fn read_group(&self) -> Result<(GroupView, Option<i64>), CoordinatorError> {
        let mut attempt = 0;
        loop {
            match self.read_group_once().await {
                Err(CoordinatorError::Unavailable(e)) if attempt < READ_RETRIES => {
                    attempt += 1;
                    tracing::debug!(error = %e, attempt, "etcd read failed; retrying");
                    tokio::time::sleep(READ_RETRY_PAUSE).await;
                }
                other => return other,
            }
        }
    }

    /// The view, and the lease holding the mastership.
    async fn read_group_once(&self) -> Result<(GroupView, Option<i64>), CoordinatorError> {
        let txn = Txn::new().and_then([
            TxnOp::get(self.keys.record.as_str(), None),
            TxnOp::get(self.keys.master.as_str(), None),
            TxnOp::get(self.keys.members.as_str(), Some(GetOptions::new().with_prefix())),
        ]);
        let resp = self.txn(txn).await?;
        let ops = resp.op_responses();
        let (
            Some(TxnOpResponse::Get(record)),
            Some(TxnOpResponse::Get(master)),
            Some(TxnOpResponse::Get(members)),
        ) = (ops.first(), ops.get(1), ops.get(2))
        else {
            return Err(CoordinatorError::Unavailable(
                "etcd answered a read transaction without its reads".into(),
            ));
        };
        let stored = record.kvs().first();
        let (record, record_error) =
            match stored.map(|kv| (kv.mod_revision(), GroupRecord::decode(kv.value()))) {
                None => (None, None),
                Some((revision, Ok(value))) => (Some(Versioned { revision, value }), None),
                Some((revision, Err(error))) => (None, Some(Versioned { revision, value: error })),
            };
        let master_lease = master.kvs().first().map(KeyValue::lease);
        let mastership = self.mastership_of(master.kvs().first(), members.kvs());
        let (live, unreadable_members) = self.members_of(members.kvs());
        let master_live = record.as_ref().is_some_and(|r| mastership.holds(&r.value));
        let view = GroupView {
            record,
            record_error,
            record_revision: stored.map(KeyValue::mod_revision),
            master_live,
            mastership,
            live,
            unreadable_members,
        };
        Ok((view, master_lease))
    }

    /// The compare that this broker's member key is held by this session's lease.
    fn holds_member_key(&self) -> Compare {
        Compare::lease(self.keys.member(self.broker_id), CompareOp::Equal, self.lease_id)
    }

    /// The compare that the record's key is still as read (`None`: absent).
    fn record_unchanged(&self, revision: Option<Revision>) -> Compare {
        match revision {
            Some(r) => Compare::mod_revision(self.keys.record.as_str(), CompareOp::Equal, r),
            None => Compare::version(self.keys.record.as_str(), CompareOp::Equal, 0),
        }
    }

    /// The compare that the mastership key is still as read: absent, or (a key that holds no
    /// mastership, which the election replaces) at the revision read.
    fn mastership_unchanged(&self, key: &MastershipKey) -> Compare {
        let master = self.keys.master.as_str();
        match key {
            MastershipKey::Absent => Compare::version(master, CompareOp::Equal, 0),
            MastershipKey::Present(Mastership { revision, .. })
            | MastershipKey::Malformed { revision, .. } => {
                Compare::mod_revision(master, CompareOp::Equal, *revision)
            }
        }
    }

    fn check_lease(&self) -> Result<(), CoordinatorError> {
        if self.lease().lost { Err(CoordinatorError::LeaseLost) } else { Ok(()) }
    }

    async fn do_publish(&self, state: &MemberState) -> Result<(), CoordinatorError> {
        self.check_lease()?;
        if state.broker_id != self.broker_id {
            return Err(CoordinatorError::Unavailable(format!(
                "broker {} cannot publish the state of broker {}",
                self.broker_id, state.broker_id
            )));
        }
        let options = PutOptions::new().with_lease(self.lease_id);
        timed(
            self.timeout,
            self.client.kv_client().put(self.keys.member(self.broker_id), state.encode(), Some(options)),
        )
        .await
        .map(drop)
    }

    async fn do_campaign(
        &self,
        me: MemberState,
        policy: ElectionPolicy,
        mut audit: RecordAudit,
    ) -> Result<CampaignOutcome, CoordinatorError> {
        self.do_publish(&me).await?;
        let (view, _) = self.read_group().await?;
        // A live mastership blocks every election, whatever the record says.
        if let Some(m) = view.mastership.live() {
            return Ok(CampaignOutcome::MasterAlive(m.broker_id));
        }
        // Over a record this broker does not trust, elect from the last one it trusted (the
        // compare-and-swap below still compares what the keys hold now).
        let verdict = audit.check(&view);
        if !verdict.act {
            return Ok(CampaignOutcome::Untrusted);
        }
        let current = verdict.record.as_ref();
        match choose_master(current.map(|r| &r.value), verdict.master_live, &view.live, policy) {
            Choice::MasterAlive(id) => return Ok(CampaignOutcome::MasterAlive(id)),
            Choice::NoCandidate => return Ok(CampaignOutcome::NoCandidate),
            Choice::Elect { winner, .. } if winner != self.broker_id => {
                return Ok(CampaignOutcome::Outranked(winner));
            }
            Choice::Elect { unclean, .. } => {
                if unclean {
                    tracing::warn!(
                        broker = self.broker_id,
                        set = ?current.map(|r| &r.value.sync_state_set),
                        "UNCLEAN ELECTION: no member of the sync-state-set is live; this broker, outside the set, \
                         becomes master and acknowledged messages it lacks are LOST"
                    );
                }
            }
        }
        // The winner's published state, as read (the one the rule ranked).
        let Some(winner) = view.live.iter().find(|m| m.broker_id == self.broker_id) else {
            return Ok(CampaignOutcome::LostRace);
        };
        let next = elected_record(current.map(|r| &r.value), winner)?;
        let compares = [
            self.record_unchanged(view.record_revision),
            self.mastership_unchanged(&view.mastership),
            self.holds_member_key(),
        ];
        let mastership = format!("{} {}", self.broker_id, next.master_epoch);
        let txn = Txn::new().when(compares).and_then([
            TxnOp::put(self.keys.record.as_str(), next.encode(), None),
            TxnOp::put(
                self.keys.master.as_str(),
                mastership,
                Some(PutOptions::new().with_lease(self.lease_id)),
            ),
        ]);
        let resp = self.txn(txn).await?;
        if !resp.succeeded() {
            return Ok(CampaignOutcome::LostRace);
        }
        let revision = resp.header().map_or(0, |h| h.revision());
        tracing::info!(
            broker = self.broker_id,
            master_epoch = next.master_epoch,
            revision,
            "elected master of the broker group"
        );
        Ok(CampaignOutcome::Elected(Versioned { revision, value: next }))
    }

    async fn do_change(&self, change: SetChange) -> Result<SetChangeOutcome, CoordinatorError> {
        self.check_lease()?;
        // A conflict is only a concurrent write; re-evaluate against what is there now.
        for _ in 0..3 {
            let (view, master_lease) = self.read_group().await?;
            let Some(current) = view.record else {
                return Err(CoordinatorError::Unavailable("the group has no record to change".into()));
            };
            let next = match apply_set_change(&current.value, &change) {
                Ok(next) => next,
                Err(refusal) => return Ok(SetChangeOutcome::Refused(refusal)),
            };
            if current.value.master_id == self.broker_id && master_lease != Some(self.lease_id) {
                return Ok(SetChangeOutcome::Refused(SetChangeRefusal::MastershipLost(self.broker_id)));
            }
            let holds_mastership = Compare::lease(self.keys.master.as_str(), CompareOp::Equal, self.lease_id);
            let txn = Txn::new()
                .when([self.record_unchanged(Some(current.revision)), holds_mastership])
                .and_then([TxnOp::put(self.keys.record.as_str(), next.encode(), None)]);
            let resp = self.txn(txn).await?;
            if resp.succeeded() {
                let revision = resp.header().map_or(0, |h| h.revision());
                return Ok(SetChangeOutcome::Applied(Versioned { revision, value: next }));
            }
        }
        Err(CoordinatorError::Unavailable("the record kept changing during a set change".into()))
    }

    /// Writes `trusted` back, its set epoch one up, over whatever the record's key holds at
    /// `read_revision`, while this session's lease holds the mastership: a master repairing a
    /// record nobody in the group wrote. `None` if the keys changed since the read.
    pub async fn restore_record(
        &self,
        trusted: &GroupRecord,
        read_revision: Option<Revision>,
    ) -> Result<Option<Versioned<GroupRecord>>, CoordinatorError> {
        self.check_lease()?;
        let sync_state_set_epoch = trusted
            .sync_state_set_epoch
            .checked_add(1)
            .ok_or(logship_core::service::coordinator::ElectionError::EpochExhausted)?;
        let restored = GroupRecord { sync_state_set_epoch, ..trusted.clone() };
        let holds_mastership = Compare::lease(self.keys.master.as_str(), CompareOp::Equal, self.lease_id);
        let txn = Txn::new()
            .when([self.record_unchanged(read_revision), holds_mastership])
            .and_then([TxnOp::put(self.keys.record.as_str(), restored.encode(), None)]);
        let resp = self.txn(txn).await?;
        if !resp.succeeded() {
            return Ok(None);
        }
        let revision = resp.header().map_or(0, |h| h.revision());
        Ok(Some(Versioned { revision, value: restored }))
    }

    async fn do_watch(&self) -> Result<WatchStart, CoordinatorError> {
        let resp = timed(self.timeout, self.client.kv_client().get(self.keys.record.as_str(), None)).await?;
        let record = resp.kvs().first().map(|kv| self.record_of(kv)).transpose()?;
        let start = resp.header().map_or(0, |h| h.revision()) + 1;
        let options = WatchOptions::new().with_start_revision(start);
        let stream =
            timed(self.timeout, self.client.watch_client().watch(self.keys.record.as_str(), Some(options)))
                .await?;
        let watch = EtcdRecordWatch { stream, key: self.keys.record.clone(), queued: VecDeque::new() };
        Ok(WatchStart { record, watch: Box::new(watch) })
    }
}

impl Drop for EtcdCoordinator {
    fn drop(&mut self) {
        self.keepalive.abort();
    }
}

impl Coordinator for EtcdCoordinator {
    fn broker_id(&self) -> BrokerId {
        self.broker_id
    }

    fn lease(&self) -> LeaseSnapshot {
        self.session.lock().unwrap_or_else(PoisonError::into_inner).guard.snapshot()
    }

    fn publish(&self, state: MemberState) -> ServiceFuture<'_, Result<(), CoordinatorError>> {
        Box::pin(async move { self.do_publish(&state).await })
    }

    fn group(&self) -> ServiceFuture<'_, Result<GroupView, CoordinatorError>> {
        Box::pin(async move { Ok(self.read_group().await?.0) })
    }

    fn campaign(
        &self,
        me: MemberState,
        policy: ElectionPolicy,
        audit: RecordAudit,
    ) -> ServiceFuture<'_, Result<CampaignOutcome, CoordinatorError>> {
        Box::pin(self.do_campaign(me, policy, audit))
    }

    fn change_sync_state_set(
        &self,
        change: SetChange,
    ) -> ServiceFuture<'_, Result<SetChangeOutcome, CoordinatorError>> {
        Box::pin(self.do_change(change))
    }

    fn watch(&self) -> ServiceFuture<'_, Result<WatchStart, CoordinatorError>> {
        Box::pin(self.do_watch())
    }
}

/// A watch of the group record.
struct EtcdRecordWatch {
    stream: WatchStream,
    key: String,
    queued: VecDeque<WatchEvent>,
}

impl EtcdRecordWatch {
    async fn next_event(&mut self) -> Result<WatchEvent, CoordinatorError> {
        loop {
            if let Some(event) = self.queued.pop_front() {
                return Ok(event);
            }
            let Some(resp) = self.stream.message().await.map_err(unavailable)? else {
                return Err(CoordinatorError::WatchEnded("etcd closed the watch stream".into()));
            };
            if resp.canceled() {
                return Err(CoordinatorError::WatchEnded(format!(
                    "cancelled ({}; compacted to revision {})",
                    resp.cancel_reason(),
                    resp.compact_revision()
                )));
            }
            for event in resp.events() {
                let Some(kv) = event.kv() else { continue };
                self.queued.push_back(match event.event_type() {
                    EventType::Put => {
                        let value = GroupRecord::decode(kv.value())
                            .map_err(|source| CoordinatorError::Record { key: self.key.clone(), source })?;
                        WatchEvent::Changed(Versioned { revision: kv.mod_revision(), value })
                    }
                    EventType::Delete => WatchEvent::Deleted { revision: kv.mod_revision() },
                });
            }
        }
    }
}

impl RecordWatch for EtcdRecordWatch {
    fn next(&mut self) -> ServiceFuture<'_, Result<WatchEvent, CoordinatorError>> {
        Box::pin(self.next_event())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> EtcdConfig {
        EtcdConfig::new(vec!["http://127.0.0.1:2379".into()], "DefaultCluster", "broker-a", 1)
    }

    #[test]
    fn etcd_config_refuses_settings_that_break_the_key_layout_or_the_fencing() {
        assert_eq!(config().validate(), Ok(()));
        let with = |f: fn(&mut EtcdConfig)| {
            let mut c = config();
            f(&mut c);
            c.validate()
        };
        assert_eq!(with(|c| c.endpoints.clear()), Err(EtcdConfigError::NoEndpoints));
        assert_eq!(
            with(|c| c.broker_name = "a/b".into()),
            Err(EtcdConfigError::BadName { what: "brokerName", value: "a/b".into() })
        );
        assert_eq!(
            with(|c| c.cluster = String::new()),
            Err(EtcdConfigError::BadName { what: "brokerClusterName", value: String::new() })
        );
        assert_eq!(
            with(|c| c.key_prefix = "logship".into()),
            Err(EtcdConfigError::BadName { what: "etcd key prefix", value: "logship".into() })
        );
        assert_eq!(
            with(|c| c.key_prefix = "/a//b".into()),
            Err(EtcdConfigError::BadName { what: "etcd key prefix", value: "/a//b".into() })
        );
        assert_eq!(with(|c| c.broker_id = -1), Err(EtcdConfigError::BadBrokerId(-1)));
        assert_eq!(with(|c| c.request_timeout = Duration::ZERO), Err(EtcdConfigError::ZeroTimeout));
        assert_eq!(
            with(|c| c.lease.margin = c.lease.ttl),
            Err(EtcdConfigError::Lease(LeaseConfigError::MarginTooLarge {
                margin: Duration::from_secs(3),
                ttl: Duration::from_secs(3)
            }))
        );
    }

    #[test]
    fn etcd_config_refuses_tls_without_https_https_without_tls_and_empty_credentials() {
        let tls = EtcdTls { ca_pem: b"pem".to_vec(), identity: None, server_name: None };
        let mut c = config();
        c.tls = Some(tls.clone());
        assert!(matches!(c.validate(), Err(EtcdConfigError::Scheme { .. })), "TLS on an http:// endpoint");
        c.endpoints = vec!["https://127.0.0.1:2379".into()];
        assert_eq!(c.validate(), Ok(()));
        c.tls = None;
        let err = c.validate().unwrap_err();
        assert!(err.to_string().contains("needs TLS settings"), "{err}");
        let mut c = config();
        c.credentials = Some(EtcdCredentials { user: "logship".into(), password: String::new() });
        assert_eq!(c.validate(), Err(EtcdConfigError::EmptyCredentials));
        let shown = format!("{:?}", EtcdCredentials { user: "u".into(), password: "hunter2".into() });
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn keys_of_a_group_are_under_the_prefix_cluster_and_broker_name() {
        let keys = Keys::new(&config());
        assert_eq!(keys.record, "/logship/DefaultCluster/broker-a/record");
        assert_eq!(keys.master, "/logship/DefaultCluster/broker-a/master");
        assert_eq!(keys.member(10), "/logship/DefaultCluster/broker-a/members/10");
    }
}
