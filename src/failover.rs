//! Automatic failover of a `logship broker` with `etcdEndpoints`: the coordinator loop, the
//! etcd I/O of core's sans-IO [`Member`] (which decides, and which the simulator's brokers step
//! too; [`decide`](logship_core::service::coordinator::decide) is its rule).
//!
//! One lease session at a time ([`EtcdCoordinator`]). Every [`POLL`] the loop writes the master
//! service's pending sync-state-set proposals, publishes this broker's [`MemberState`] when the
//! member says it is due, reads the group, and performs what the member makes of the read:
//! campaign, promote in the record's epoch, follow the record's master, or step down. A lost
//! lease drops a master's role at once and starts a new session; the broker then follows
//! whoever won.
//!
//! Every read is judged by the member's record audit, kept for the broker's life: a record no
//! protocol step explains is logged at ERROR, shown in `/status` and the metrics, and not acted
//! on (the loop acts on the last record it trusted), so a forged write neither steps a healthy
//! master down nor sends the slaves elsewhere; a master holding its mastership writes the
//! trusted record back.
//!
//! A master's sync-state-set proposals come here through an [`EtcdAuthority`]: each is written to
//! the record by compare-and-swap under the master's epoch and mastership, and only a committed
//! change is applied to the master service (which counts the union of the old and the new set
//! while one is pending). A refused one is answered with the record's set while it is still the
//! newest proposal; one etcd did not answer is retried.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use logship::coordinator::{EtcdConfig, EtcdCoordinator};
use logship_core::autoswitch::BrokerId;
use logship_core::failover::{ChangeStep, Local, Member, MemberConfig};
use logship_core::service::coordinator::{
    Action, CampaignOutcome, Coordinator, CoordinatorError, ElectionPolicy, GroupView, LeaseConfig,
    MemberState, SetChangeOutcome, Verdict,
};
use logship_core::service::{AuthorityFactory, SyncStateSetAuthority};
use logship_core::time::Instant;
use tokio::sync::{mpsc, watch};
use tracing::{error, info, warn};

use crate::broker::{Broker, ReplicationHandle};
use crate::config::EtcdKeys;
use crate::coordination::Coordination;
use crate::roles::{self, FollowRequest, PromoteRequest};

/// How often the loop reads the group.
pub const POLL: Duration = Duration::from_millis(100);
/// How long the loop waits before it opens a new lease session after etcd refused one.
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
    // The member's decisions, and what it trusts of the group, outlive the lease sessions.
    let member_config = MemberConfig {
        broker_id: me,
        policy,
        lease_ttl: keys.lease_ttl,
        renew_interval: keys.lease_renew_interval,
    };
    let mut member = Member::new(member_config, (coordination.clock)());
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
        member.new_session((coordination.clock)());
        let mut s = SessionLoop {
            broker: &broker,
            coordination: &coordination,
            session: &session,
            me,
            ha_addr,
            http_addr,
            member: &mut member,
            proposals: None,
            warned: None,
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
    /// The decisions (core's [`Member`]); this loop does their I/O.
    member: &'a mut Member,
    /// The current master service's proposals.
    proposals: Option<mpsc::UnboundedReceiver<Proposal>>,
    /// When a failed request was last logged.
    warned: Option<Instant>,
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

    /// What the member decides from: the role, the lease and the state now.
    fn local(&self) -> Local {
        let roles = self.broker.roles.as_ref().expect("controller mode");
        Local {
            role: roles.current().local(),
            lease: self.session.lease(),
            lease_id: self.session.lease_id(),
            state: self.member_state(),
        }
    }

    /// Hands every proposal the master service made to the member.
    fn take_proposals(&mut self) {
        if let Some(rx) = self.proposals.as_mut() {
            while let Ok(p) = rx.try_recv() {
                self.member.proposed(p.proposed, p.set_epoch);
            }
        }
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
                Ok(()) if self.member.session_over() => return Ended::Lost,
                Ok(()) => {}
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
            if self.member.session_over() {
                return Ended::Lost;
            }
            if self.member.run_again() {
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
                } => self.member.proposed(p.proposed, p.set_epoch),
            }
        }
    }

    /// One round (see [`Member`]): set changes, publish, read, act.
    async fn step(&mut self) -> Result<(), CoordinatorError> {
        self.change_sets().await?;
        if self.session.lease().lost {
            return Err(CoordinatorError::LeaseLost);
        }
        let state = self.member_state();
        let now = self.now();
        if self.member.publish_due(now, &state) {
            self.session.publish(state.clone()).await?;
            self.member.published(now, state);
        }
        let read = self.session.group().await?;
        let local = self.local();
        let round = self.member.read(self.now(), &read, &local);
        self.report(&read, &round.verdict);
        if let Some(restore) = &round.restore {
            let restored = self.session.restore_record(&restore.trusted, restore.read_revision).await?;
            if let Some(r) = &restored {
                error!(
                    set = ?r.value.sync_state_set,
                    set_epoch = r.value.sync_state_set_epoch,
                    revision = r.revision,
                    "restored the group record this master holds from its last trusted version"
                );
            }
            self.member.restored(restored);
        }
        self.coordination.set_view(round.view.clone());
        let action = round.action;
        match &action {
            Action::Stay | Action::NewSession => {}
            Action::StepDown => {
                self.proposals = None;
                roles::step_down(self.broker).await;
                self.member.acted(self.now(), &action, true);
            }
            Action::Campaign => {
                let me = self.member_state();
                let audit = self.member.audit().clone();
                let outcome = self.session.campaign(me.clone(), self.member.config().policy, audit).await?;
                if let CampaignOutcome::Elected(record) = &outcome {
                    info!(epoch = record.value.master_epoch, "won the election");
                    // Promote at once rather than one poll later.
                    let mut elected = round.view.clone();
                    elected.record = Some(record.clone());
                    elected.master_live = true;
                    self.coordination.set_view(elected);
                }
                self.member.campaigned(self.now(), me, &outcome);
            }
            Action::Promote { epoch, sync_state_set, sync_state_set_epoch } => {
                let (tx, rx) = mpsc::unbounded_channel();
                let factory =
                    AuthorityFactory::new(move || Box::new(EtcdAuthority { proposals: tx.clone() }));
                // The epoch is the one this broker won in the record: the coordinator's
                // decision, which may skip epochs this broker never saw.
                let request = PromoteRequest {
                    epoch: *epoch,
                    sync_state_set: Some(sync_state_set.clone()),
                    sync_state_set_epoch: Some(*sync_state_set_epoch),
                    force: true,
                    override_coordinator: false,
                };
                let result = roles::promote_with(self.broker, request, Some(factory)).await;
                if let Err(e) = &result {
                    // The member gives the mastership back (the lease goes with it) so the group
                    // elects again at once, in a new epoch.
                    warn!(%e, epoch, "cannot become master in the epoch this broker won; resigning");
                } else {
                    self.proposals = Some(rx);
                }
                self.member.acted(self.now(), &action, result.is_ok());
            }
            Action::Follow { master, ha_addr, epoch } => {
                self.proposals = None;
                let request = FollowRequest {
                    master_address: ha_addr.to_string(),
                    master_broker_id: *master,
                    epoch: *epoch,
                    override_coordinator: false,
                };
                let result = roles::follow(self.broker, request).await;
                if let Err(e) = &result {
                    warn!(%e, master, epoch, "cannot follow the group's master");
                }
                self.member.acted(self.now(), &action, result.is_ok());
            }
        }
        Ok(())
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

    /// Writes the master service's proposals to the record, and applies to the master service
    /// only what etcd committed (or, for a refused proposal, the set in force), as the member
    /// says ([`Member::next_change`]).
    async fn change_sets(&mut self) -> Result<(), CoordinatorError> {
        self.take_proposals();
        loop {
            let local = self.local();
            let Some(change) = self.member.next_change(&local) else { return Ok(()) };
            let outcome = self.session.change_sync_state_set(change.clone()).await;
            match &outcome {
                Ok(SetChangeOutcome::Applied(record)) => info!(
                    set = ?record.value.sync_state_set,
                    set_epoch = record.value.sync_state_set_epoch,
                    "sync-state-set change committed"
                ),
                Ok(SetChangeOutcome::Refused(refusal)) => {
                    info!(%refusal, proposed = ?change.new_set, "sync-state-set change refused")
                }
                Err(e) => warn!(%e, "sync-state-set change not answered by etcd; trying again"),
            }
            self.take_proposals();
            let mut step = self.member.changed(outcome.as_ref());
            if step == ChangeStep::ReadGroup {
                let Ok(SetChangeOutcome::Refused(refusal)) = &outcome else {
                    unreachable!("read after a refusal")
                };
                let read = self.session.group().await?;
                self.take_proposals();
                step = self.member.change_refused(refusal, &read, &self.local());
            }
            match step {
                ChangeStep::Apply { set, epoch } => self.apply_set(set, epoch).await,
                ChangeStep::Next | ChangeStep::ReadGroup => {}
                ChangeStep::Retry => return Ok(()),
                ChangeStep::SessionOver => return Err(CoordinatorError::LeaseLost),
            }
        }
    }

    /// Applies a set the record holds to the master service.
    async fn apply_set(&self, set: BTreeSet<BrokerId>, epoch: i32) {
        let ReplicationHandle::Master(master) = self.broker.node() else { return };
        if let Err(e) = master.set_sync_state_set(set, epoch).await {
            warn!(%e, set_epoch = epoch, "the master did not apply the sync-state-set the record holds");
        }
    }
}
