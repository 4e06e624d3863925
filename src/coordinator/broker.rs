//! Automatic failover of a `logship broker` with `etcdEndpoints`: the coordinator loop (part of
//! the binary; [`decide`] is the rule, tested in core).
//!
//! One lease session at a time ([`EtcdCoordinator`]). Every [`POLL`] the loop publishes this
//! broker's [`MemberState`] when it changed (at most once per renew interval, and always before
//! campaigning), reads the group, and acts on [`decide`]: campaign, promote in the record's
//! epoch, follow the record's master, or step down. A lost lease drops a master's role at once
//! and starts a new session; the broker then follows whoever won.
//!
//! Every read is judged by a [`RecordAudit`], kept for the broker's life: a record no protocol
//! step explains is logged at ERROR, shown in `/status` and the metrics, and not acted on (the
//! loop acts on the last record it trusted), so a forged write neither steps a healthy master
//! down nor sends the slaves elsewhere.
//!
//! A master's sync-state-set proposals come here through an [`EtcdAuthority`]: each is written to
//! the record by compare-and-swap under the master's epoch and mastership, and only a committed
//! change is applied to the master service (which counts the union of the old and the new set
//! while one is pending). A refused one is answered with the record's set; one etcd did not
//! answer is retried.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use logship::coordinator::{EtcdConfig, EtcdCoordinator};
use logship_core::autoswitch::BrokerId;
use logship_core::service::coordinator::{
    Action, CampaignOutcome, Coordinator, CoordinatorError, ElectionPolicy, GroupView, LeaseConfig,
    MemberState, RecordAudit, SetChange, SetChangeOutcome, SetChangeRefusal, Situation, Verdict, decide,
};
use logship_core::service::{AuthorityFactory, SyncStateSetAuthority};
use logship_core::time::Instant;
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

use crate::config::EtcdKeys;
use crate::http::{Broker, Node};
use crate::roles::{self, Coordination, FollowRequest, PromoteRequest, Role};

/// How often the loop reads the group.
pub const POLL: Duration = Duration::from_millis(100);
/// How long a failed role change is not tried again.
const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// A sync-state-set change the master service proposed.
#[derive(Debug)]
struct Proposal {
    proposed: BTreeSet<BrokerId>,
    set_epoch: i32,
}

/// The master service's authority: every proposal goes to the loop; the answer comes later.
struct EtcdAuthority {
    proposals: mpsc::UnboundedSender<Proposal>,
}

impl SyncStateSetAuthority for EtcdAuthority {
    fn propose(
        &mut self,
        proposed: &BTreeSet<BrokerId>,
        _applied: &BTreeSet<BrokerId>,
        epoch: i32,
    ) -> Option<(BTreeSet<BrokerId>, i32)> {
        let _ = self.proposals.send(Proposal { proposed: proposed.clone(), set_epoch: epoch });
        None
    }
}

/// The etcd settings of this broker.
fn etcd_config(broker: &Broker, keys: &EtcdKeys, broker_id: BrokerId) -> EtcdConfig {
    let s = &broker.settings;
    let mut c = EtcdConfig::new(keys.endpoints.clone(), &s.broker_cluster_name, &s.broker_name, broker_id);
    c.key_prefix = keys.key_prefix.clone();
    c.lease = LeaseConfig {
        ttl: keys.lease_ttl,
        margin: keys.lease_margin,
        renew_interval: keys.lease_renew_interval,
    };
    c.request_timeout = keys.request_timeout;
    c.tls = keys.tls.as_ref().map(|t| logship::coordinator::EtcdTls {
        ca_pem: t.ca_pem.clone(),
        identity: t.identity.clone(),
        server_name: t.server_name.clone(),
    });
    c.credentials = keys.credentials.as_ref().map(|k| logship::coordinator::EtcdCredentials {
        user: k.user.clone(),
        password: k.password.clone(),
    });
    c
}

/// The loop: runs until `stop` turns true, then resigns the lease (so the group need not wait
/// for it to expire) after stepping down.
pub async fn run(
    broker: Arc<Broker>,
    coordination: Arc<Coordination>,
    http_addr: SocketAddr,
    mut stop: watch::Receiver<bool>,
) {
    let (Some(roles), Some(keys)) =
        (broker.roles.as_ref(), broker.settings.controller.as_ref().and_then(|c| c.etcd.clone()))
    else {
        return;
    };
    let me = roles.broker_id;
    let config = etcd_config(&broker, &keys, me);
    let advertised = broker.settings.broker_ip1;
    let ha_addr = SocketAddr::new(advertised, broker.settings.ha_addr().port());
    let http_addr = SocketAddr::new(advertised, http_addr.port());
    let policy = ElectionPolicy { unclean: keys.elect_unclean_master };
    // What this broker trusts of the group outlives its lease sessions.
    let mut audit = RecordAudit::new();
    loop {
        if *stop.borrow() {
            return;
        }
        if coordination.is_detached() {
            info!("overrideCoordinator: this broker has left automatic failover until it restarts");
            coordination.mark_left();
            return;
        }
        let clock = Arc::clone(&coordination.clock);
        let session = match EtcdCoordinator::connect(config.clone(), clock).await {
            Ok(c) => Arc::new(c),
            Err(e) => {
                warn!(%e, "cannot open an etcd lease session; retrying");
                tokio::select! {
                    () = tokio::time::sleep(RETRY_PAUSE) => {}
                    _ = stop.changed() => {}
                }
                continue;
            }
        };
        coordination.set_session(Some(session.clone() as Arc<dyn Coordinator>));
        let mut s = SessionLoop {
            broker: &broker,
            coordination: &coordination,
            session: &session,
            me,
            ha_addr,
            http_addr,
            policy,
            renew: keys.lease_renew_interval,
            bootstrap_until: (coordination.clock)() + keys.lease_ttl,
            elected_epoch: None,
            published: None,
            proposals: None,
            retry: None,
            failed: None,
            warned: None,
            again: false,
            audit: &mut audit,
        };
        let ended = s.run(&mut stop).await;
        if ended == Ended::Detached {
            // The admin call that asked for this takes the role over: the role stays as it is.
            coordination.set_session(None);
            match session.resign().await {
                Ok(()) => {
                    info!("overrideCoordinator: etcd lease revoked; this broker left automatic failover")
                }
                Err(e) => {
                    warn!(%e, "overrideCoordinator: cannot revoke the etcd lease; it expires by itself")
                }
            }
            coordination.mark_left();
            return;
        }
        let stopped = ended == Ended::Stopped;
        roles::step_down(&broker).await;
        coordination.set_session(None);
        if stopped {
            match session.resign().await {
                Ok(()) => info!("etcd lease revoked: the group elects without waiting for it to expire"),
                Err(e) => warn!(%e, "cannot revoke the etcd lease at shutdown; it expires by itself"),
            }
            return;
        }
        let _ = session.resign().await;
        info!("etcd lease lost; taking part again under a new lease");
    }
}

/// Why a session's loop ended.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Ended {
    /// The broker is shutting down.
    Stopped,
    /// The lease is lost: take part again under a new one.
    Lost,
    /// An admin call with `overrideCoordinator` took the role over.
    Detached,
}

struct SessionLoop<'a> {
    broker: &'a Broker,
    coordination: &'a Coordination,
    session: &'a Arc<EtcdCoordinator>,
    me: BrokerId,
    ha_addr: SocketAddr,
    http_addr: SocketAddr,
    policy: ElectionPolicy,
    renew: Duration,
    bootstrap_until: Instant,
    /// The master epoch this session won.
    elected_epoch: Option<i32>,
    /// The state last published, and when.
    published: Option<(MemberState, Instant)>,
    /// The current master service's proposals.
    proposals: Option<mpsc::UnboundedReceiver<Proposal>>,
    /// A proposal etcd did not answer, to send again.
    retry: Option<Proposal>,
    /// The last role change that failed, and when.
    failed: Option<(Action, Instant)>,
    /// When a failed request was last logged.
    warned: Option<Instant>,
    /// Run the next round at once (this broker just won an election).
    again: bool,
    /// The judge of every read.
    audit: &'a mut RecordAudit,
}

impl SessionLoop<'_> {
    fn now(&self) -> Instant {
        (self.coordination.clock)()
    }

    fn member_state(&self) -> MemberState {
        MemberState {
            broker_id: self.me,
            epoch: self.broker.store.epochs().last().map_or(0, |e| e.epoch),
            max_offset: self.broker.store.max_offset(),
            ha_addr: self.ha_addr,
            http_addr: self.http_addr,
        }
    }

    /// Publishes the state when it changed (at most once per renew interval).
    async fn publish(&mut self) -> Result<(), CoordinatorError> {
        let state = self.member_state();
        let now = self.now();
        // An epoch change goes out at once (a new master's slaves wait for it); offsets at
        // most once per renew interval.
        let due = match &self.published {
            None => true,
            Some((last, at)) => {
                last.epoch != state.epoch
                    || (*last != state && now.saturating_duration_since(*at) >= self.renew)
            }
        };
        if due {
            self.session.publish(state.clone()).await?;
            self.published = Some((state, now));
        }
        Ok(())
    }

    /// Runs until the lease is lost, `stop` turns true, or an admin call takes the role over.
    async fn run(&mut self, stop: &mut watch::Receiver<bool>) -> Ended {
        loop {
            if *stop.borrow() {
                return Ended::Stopped;
            }
            if self.coordination.is_detached() {
                return Ended::Detached;
            }
            match self.step().await {
                Ok(true) => {}
                Ok(false) => return Ended::Lost,
                Err(CoordinatorError::LeaseLost) => return Ended::Lost,
                Err(e) => {
                    // At most one line a second while etcd is away.
                    let now = self.now();
                    if self
                        .warned
                        .is_none_or(|at| now.saturating_duration_since(at) >= Duration::from_secs(1))
                    {
                        warn!(%e, "etcd coordinator request failed");
                        self.warned = Some(now);
                    }
                }
            }
            if std::mem::take(&mut self.again) {
                continue;
            }
            let proposals = self.proposals.as_mut();
            tokio::select! {
                () = tokio::time::sleep(POLL) => {}
                _ = stop.changed() => {}
                Some(p) = async move {
                    match proposals {
                        Some(rx) => rx.recv().await,
                        None => std::future::pending().await,
                    }
                } => self.retry = Some(p),
            }
        }
    }

    /// One round; `Ok(false)`: the session is over.
    async fn step(&mut self) -> Result<bool, CoordinatorError> {
        if let Some(p) = self.retry.take() {
            self.change_set(p).await?;
        }
        if self.session.lease().lost {
            return Ok(false);
        }
        self.publish().await?;
        let read = self.session.group().await?;
        let verdict = self.audit.check(&read);
        self.report(&read, &verdict);
        if !verdict.trusted {
            self.restore_record(&read, &verdict).await?;
        }
        // What the loop acts on: the record it trusts, with the liveness of that record's master.
        let view = GroupView { record: verdict.record.clone(), master_live: verdict.master_live, ..read };
        self.coordination.set_view(view.clone());
        if !verdict.act {
            // Nothing trusted to act on (this broker started after the forgery): stay as is.
            return Ok(true);
        }
        let roles = self.broker.roles.as_ref().expect("controller mode");
        let role = roles.current().local();
        let now = self.now();
        let lease = self.session.lease();
        let situation = Situation {
            me: self.me,
            role,
            record: view.record.as_ref().map(|r| &r.value),
            master_live: view.master_live,
            elected_epoch: self.elected_epoch,
            lease_open: lease.is_open(now),
            lease_lost: lease.lost,
            bootstrap_done: now >= self.bootstrap_until,
            master_ready: view.record.as_ref().is_some_and(|r| {
                view.live.iter().any(|m| m.broker_id == r.value.master_id && m.epoch == r.value.master_epoch)
            }),
        };
        let action = decide(&situation);
        if let Some((failed, at)) = &self.failed {
            if *failed == action && now.saturating_duration_since(*at) < RETRY_PAUSE {
                return Ok(true);
            }
        }
        match action {
            Action::Stay => {}
            Action::NewSession => return Ok(false),
            Action::StepDown => {
                self.proposals = None;
                roles::step_down(self.broker).await;
            }
            Action::Campaign => self.campaign(&view).await?,
            Action::Promote { epoch, ref sync_state_set, sync_state_set_epoch } => {
                let (tx, rx) = mpsc::unbounded_channel();
                let factory =
                    AuthorityFactory::new(move || Box::new(EtcdAuthority { proposals: tx.clone() }));
                // The epoch is the one this broker won in the record: the coordinator's
                // decision, which may skip epochs this broker never saw.
                let request = PromoteRequest {
                    epoch,
                    sync_state_set: Some(sync_state_set.clone()),
                    sync_state_set_epoch: Some(sync_state_set_epoch),
                    force: true,
                    override_coordinator: false,
                };
                match roles::promote_with(self.broker, request, Some(factory)).await {
                    Ok(_) => {
                        self.proposals = Some(rx);
                        self.failed = None;
                    }
                    Err(e) => {
                        // Give the mastership back (the lease goes with it) so the group elects
                        // again at once, in a new epoch.
                        warn!(%e, epoch, "cannot become master in the epoch this broker won; resigning");
                        return Ok(false);
                    }
                }
            }
            Action::Follow { master, ha_addr, epoch } => {
                self.proposals = None;
                let request = FollowRequest {
                    master_address: ha_addr.to_string(),
                    master_broker_id: master,
                    epoch,
                    override_coordinator: false,
                };
                match roles::follow(self.broker, request).await {
                    Ok(_) => self.failed = None,
                    Err(e) => {
                        warn!(%e, master, epoch, "cannot follow the group's master");
                        self.failed = Some((action.clone(), now));
                    }
                }
            }
        }
        Ok(true)
    }

    /// Logs each anomaly of `read` at ERROR once per state of the keys (not every round), and
    /// records the verdict for `/status` and the metrics.
    fn report(&self, read: &GroupView, verdict: &Verdict) {
        let state = (read.record_revision, format!("{:?}", read.mastership));
        let texts: Vec<String> = verdict.anomalies.iter().map(ToString::to_string).collect();
        let fresh = self.coordination.record_audit(state, verdict.trusted, &texts);
        for text in fresh {
            self.broker.metrics.record_group_anomaly();
            if verdict.trusted {
                error!(anomaly = %text, "the group's keys hold what no broker wrote");
            } else {
                error!(
                    anomaly = %text,
                    trusted_epoch = verdict.record.as_ref().map(|r| r.value.master_epoch),
                    "the group record is refused: no protocol step explains it; acting on the last record \
                     trusted (repair the record in etcd)"
                );
            }
        }
    }

    /// A master that holds its mastership rewrites a record it does not trust from the last
    /// one it trusted (its own latest write), the set epoch one up: only this master writes the
    /// record while it holds the mastership, so anything else there was written by nobody in the
    /// group. The others then trust the record again at once, and an election after this
    /// master's death starts from the right sync-state-set.
    async fn restore_record(&mut self, read: &GroupView, verdict: &Verdict) -> Result<(), CoordinatorError> {
        let roles = self.broker.roles.as_ref().expect("controller mode");
        let (Role::Master { epoch }, Some(trusted), Some(key)) =
            (roles.current(), verdict.record.as_ref(), read.mastership.live())
        else {
            return Ok(());
        };
        let mine =
            key.broker_id == self.me && key.master_epoch == epoch && key.lease == self.session.lease_id();
        if !mine || trusted.value.master_id != self.me || trusted.value.master_epoch != epoch {
            return Ok(());
        }
        if let Some(restored) = self.session.restore_record(&trusted.value, read.record_revision).await? {
            self.audit.trust_own(restored.clone());
            error!(
                set = ?restored.value.sync_state_set,
                set_epoch = restored.value.sync_state_set_epoch,
                revision = restored.revision,
                "restored the group record this master holds from its last trusted version"
            );
        }
        Ok(())
    }

    async fn campaign(&mut self, view: &GroupView) -> Result<(), CoordinatorError> {
        let me = self.member_state();
        match self.session.campaign(me.clone(), self.policy, self.audit.clone()).await? {
            CampaignOutcome::Elected(record) => {
                info!(epoch = record.value.master_epoch, "won the election");
                self.audit.trust_own(record.clone());
                self.elected_epoch = Some(record.value.master_epoch);
                self.published = Some((me, self.now()));
                // Promote at once rather than one poll later.
                let mut elected = view.clone();
                elected.record = Some(record);
                elected.master_live = true;
                self.coordination.set_view(elected);
                self.again = true;
            }
            CampaignOutcome::MasterAlive(_)
            | CampaignOutcome::Outranked(_)
            | CampaignOutcome::NoCandidate
            | CampaignOutcome::LostRace
            | CampaignOutcome::Untrusted => {}
        }
        Ok(())
    }

    /// The newest proposal the master service has made since `p` (its proposals are
    /// cumulative: each is the whole set it wants).
    fn newest(&mut self, mut p: Proposal) -> Proposal {
        if let Some(rx) = self.proposals.as_mut() {
            while let Ok(newer) = rx.try_recv() {
                p = newer;
            }
        }
        p
    }

    /// Writes the master's proposed set to the record, and applies to the master service only
    /// what etcd committed. The master proposes one change at a time and counts the union of the
    /// set in force and its proposal until the answer is applied, so it never counts fewer
    /// members than the record names; should a newer proposal be queued all the same, the
    /// committed set is applied first and the newer one is written on top of it.
    async fn change_set(&mut self, p: Proposal) -> Result<(), CoordinatorError> {
        let roles = self.broker.roles.as_ref().expect("controller mode");
        let (Role::Master { epoch }, Node::Master(master)) = (roles.current(), self.broker.node()) else {
            return Ok(());
        };
        let mut p = self.newest(p);
        for _ in 0..8 {
            let change = SetChange {
                proposer: self.me,
                master_epoch: epoch,
                sync_state_set_epoch: p.set_epoch,
                new_set: p.proposed.clone(),
            };
            let committed = match self.session.change_sync_state_set(change).await {
                Ok(SetChangeOutcome::Applied(record)) => {
                    self.audit.trust_own(record.clone());
                    info!(
                        set = ?record.value.sync_state_set,
                        set_epoch = record.value.sync_state_set_epoch,
                        "sync-state-set change committed"
                    );
                    record
                }
                Ok(SetChangeOutcome::Refused(refusal)) => {
                    let view = self.session.group().await?;
                    let Some(record) =
                        view.record.filter(|r| r.value.master_id == self.me && r.value.master_epoch == epoch)
                    else {
                        warn!(%refusal, "sync-state-set change refused: no longer this epoch's master");
                        return Ok(());
                    };
                    if record.value.sync_state_set != p.proposed
                        && matches!(refusal, SetChangeRefusal::StaleSetEpoch { .. })
                    {
                        // Written against an older set epoch: write it on top of the current.
                        p.set_epoch = record.value.sync_state_set_epoch;
                        p = self.newest(p);
                        continue;
                    }
                    if record.value.sync_state_set != p.proposed {
                        warn!(%refusal, proposed = ?p.proposed, "sync-state-set change refused");
                    }
                    record
                }
                Err(CoordinatorError::LeaseLost) => return Err(CoordinatorError::LeaseLost),
                Err(e) => {
                    warn!(%e, "sync-state-set change not answered by etcd; trying again");
                    self.retry = Some(p);
                    return Ok(());
                }
            };
            // What etcd committed is the set an election reads: the master applies it at once,
            // even when a newer proposal waits, so that it never counts fewer members than the
            // record names (a member added, then proposed out, stays counted until that commits).
            let set_epoch = committed.value.sync_state_set_epoch;
            if let Err(e) = master.set_sync_state_set(committed.value.sync_state_set, set_epoch).await {
                warn!(%e, set_epoch, "the master did not apply the committed sync-state-set");
            }
            let newer = self.newest(Proposal { proposed: p.proposed.clone(), set_epoch: -1 });
            if newer.set_epoch != -1 {
                p = Proposal { set_epoch, ..newer };
                continue;
            }
            return Ok(());
        }
        // The record kept moving: try again next round from the newest state.
        self.retry = Some(p);
        Ok(())
    }
}
