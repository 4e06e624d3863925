//! One broker's part in its group's automatic failover, sans IO: [`Member`].
//!
//! A broker with a coordinator runs a loop: every poll it publishes its state (when it changed),
//! reads the group, and acts on what it read: campaign, become master in the record's epoch,
//! follow the record's master, step down, or start a new lease session. A master's
//! sync-state-set proposals go through the same loop to the record. The loop does the I/O (the
//! coordinator's requests, the role changes); a [`Member`] decides, from what the loop hands it:
//! the group as read ([`GroupView`]), the lease ([`LeaseSnapshot`]) and the broker's role and
//! state ([`Local`]). The binary's etcd loop and the simulator's brokers step the same type.
//!
//! A round, in the order the loop performs it:
//!
//! 1. Set changes first: while [`Member::next_change`] gives one, write it
//!    ([`Coordinator::change_sync_state_set`](crate::service::coordinator::Coordinator::change_sync_state_set))
//!    and hand the outcome to [`Member::changed`]; apply what it says to the master service
//!    ([`ChangeStep::Apply`]); after a refusal, read the group and hand it to
//!    [`Member::change_refused`].
//! 2. Publish the broker's state if [`Member::publish_due`], then [`Member::published`].
//! 3. Read the group and hand it to [`Member::read`]: report its [`Round::verdict`], repair the
//!    record when [`Round::restore`] asks (then [`Member::restored`]), keep [`Round::view`] for
//!    routing, and perform [`Round::action`]: a campaign's outcome goes to
//!    [`Member::campaigned`], a role change's to [`Member::acted`].
//! 4. Sleep one poll, or run again at once when [`Member::run_again`] says so or the master
//!    service proposed a set ([`Member::proposed`]).
//!
//! A request the coordinator failed ends the round (try again next poll); a lost lease, a
//! [`Action::NewSession`] or a failed promotion ends the session ([`Member::session_over`]): the
//! loop steps down, resigns the lease, opens a new session and calls [`Member::new_session`].
//! What the broker trusts of the group ([`RecordAudit`]) outlives its sessions.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::autoswitch::BrokerId;
use crate::service::coordinator::{
    Action, CampaignOutcome, ElectionPolicy, GroupRecord, GroupView, LeaseSnapshot, LocalRole, MemberState,
    RecordAudit, Revision, SetChange, SetChangeOutcome, SetChangeRefusal, Situation, Verdict, Versioned,
    decide,
};
use crate::time::Instant;

/// How long a role change that failed is not tried again.
pub const RETRY_PAUSE: Duration = Duration::from_millis(500);

/// Set changes written in one round at most: a record that keeps moving is tried again next
/// round, from the newest state.
pub const MAX_CHANGES_PER_ROUND: u32 = 8;

/// What a [`Member`] runs with.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MemberConfig {
    /// This broker's id.
    pub broker_id: BrokerId,
    /// How the group elects.
    pub policy: ElectionPolicy,
    /// The lease's time to live: an empty group's first election waits this long after a
    /// session starts, so that brokers started together are all published before it.
    pub lease_ttl: Duration,
    /// How often the lease is renewed: a changed offset is published at most this often (an
    /// epoch change at once).
    pub renew_interval: Duration,
}

/// What the broker is and holds, as its loop reads them before a round.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Local {
    /// Its HA role now.
    pub role: LocalRole,
    /// Its lease guard now.
    pub lease: LeaseSnapshot,
    /// The coordinator's id of its current lease (etcd's lease id; a mastership key names the
    /// lease it is attached to).
    pub lease_id: i64,
    /// The state it would publish now: its log's last epoch and end, its addresses.
    pub state: MemberState,
}

/// What one read of the group calls for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Round {
    /// The audit of the read: report its anomalies.
    pub verdict: Verdict,
    /// What the broker acts on, and routes clients by: the read with the record it trusts and
    /// that record's master's liveness.
    pub view: GroupView,
    /// Repair the record: this broker holds the mastership and the record read is not
    /// trusted; write back the last trusted record over the revision read, then hand the result
    /// to [`Member::restored`].
    pub restore: Option<Restore>,
    /// What to do. [`Action::Stay`] when nothing trusted can be acted on, or the same role
    /// change failed less than [`RETRY_PAUSE`] ago.
    pub action: Action,
}

/// A record to write back over an untrusted one ([`Round::restore`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restore {
    /// The last record this broker trusted (its own latest write).
    pub trusted: GroupRecord,
    /// The revision of what the record's key held at the read.
    pub read_revision: Option<Revision>,
}

/// What to do after a set change's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChangeStep {
    /// Apply this committed set to the master service (the record holds it), then ask
    /// [`Member::next_change`] again.
    Apply {
        /// The members.
        set: BTreeSet<BrokerId>,
        /// The set's epoch.
        epoch: i32,
    },
    /// Refused: read the group and hand it to [`Member::change_refused`].
    ReadGroup,
    /// Nothing to apply: ask [`Member::next_change`] again.
    Next,
    /// The coordinator did not answer: the change is written again next round.
    Retry,
    /// The lease is lost: the session is over.
    SessionOver,
}

/// A sync-state-set the master service proposed.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Proposal {
    set: BTreeSet<BrokerId>,
    set_epoch: i32,
    /// Counts proposals: the newest has the highest.
    seq: u64,
}

/// The state of one lease session.
#[derive(Clone, Debug)]
struct Session {
    bootstrap_until: Instant,
    /// The master epoch this session won.
    elected_epoch: Option<i32>,
    /// The state last published, and when.
    published: Option<(MemberState, Instant)>,
    /// The last role change that failed, and when.
    failed: Option<(Action, Instant)>,
    /// Run the next round at once.
    again: bool,
    over: bool,
    /// The newest proposal not yet committed or answered, and the one being written.
    proposal: Option<Proposal>,
    writing: Option<Proposal>,
    /// Set changes written this round.
    changes_this_round: u32,
    /// The coordinator failed a set change: write it again next round.
    held: bool,
}

impl Session {
    fn new(now: Instant, lease_ttl: Duration) -> Self {
        Self {
            bootstrap_until: now + lease_ttl,
            elected_epoch: None,
            published: None,
            failed: None,
            again: false,
            over: false,
            proposal: None,
            writing: None,
            changes_this_round: 0,
            held: false,
        }
    }
}

/// One broker's part in its group's automatic failover (see [`failover`](crate::failover)).
#[derive(Clone, Debug)]
pub struct Member {
    config: MemberConfig,
    /// The judge of every read; outlives sessions.
    audit: RecordAudit,
    session: Session,
    next_seq: u64,
}

impl Member {
    /// A member whose first lease session starts at `now`.
    pub fn new(config: MemberConfig, now: Instant) -> Self {
        Self { config, audit: RecordAudit::new(), session: Session::new(now, config.lease_ttl), next_seq: 0 }
    }

    /// Its settings.
    pub fn config(&self) -> &MemberConfig {
        &self.config
    }

    /// What it trusts of the group (a campaign judges its read by it).
    pub fn audit(&self) -> &RecordAudit {
        &self.audit
    }

    /// A new lease session starts at `now`: what the old one won, published, tried and was
    /// proposed is forgotten (the master service it proposed for is gone); what the broker
    /// trusts of the group is kept.
    pub fn new_session(&mut self, now: Instant) {
        self.session = Session::new(now, self.config.lease_ttl);
    }

    /// Whether the session is over: its lease is lost, the rule asked for a new session, or a
    /// promotion failed (the mastership is given back with the lease, so the group elects again
    /// at once). The loop steps down, resigns the lease and starts a new session.
    pub fn session_over(&self) -> bool {
        self.session.over
    }

    /// Whether to run the next round at once (this broker just won an election); clears it.
    pub fn run_again(&mut self) -> bool {
        std::mem::take(&mut self.session.again)
    }

    /// Whether `state` should be published now: never published in this session, a new epoch
    /// (a new master's slaves wait for it), or another change once a renew interval has passed
    /// since the last publication.
    pub fn publish_due(&self, now: Instant, state: &MemberState) -> bool {
        match &self.session.published {
            None => true,
            Some((last, at)) => {
                last.epoch != state.epoch
                    || (last != state && now.saturating_duration_since(*at) >= self.config.renew_interval)
            }
        }
    }

    /// `state` was published at `now`.
    pub fn published(&mut self, now: Instant, state: MemberState) {
        self.session.published = Some((state, now));
    }

    /// One read of the group: judges it, and decides what to do.
    pub fn read(&mut self, now: Instant, read: &GroupView, local: &Local) -> Round {
        self.session.changes_this_round = 0;
        self.session.held = false;
        let verdict = self.audit.check(read);
        let restore = (!verdict.trusted).then(|| self.restore(read, &verdict, local)).flatten();
        let view =
            GroupView { record: verdict.record.clone(), master_live: verdict.master_live, ..read.clone() };
        if !verdict.act {
            // Nothing trusted to act on (this broker started after the forgery): stay as is.
            return Round { verdict, view, restore, action: Action::Stay };
        }
        let situation = Situation {
            me: self.config.broker_id,
            role: local.role,
            record: view.record.as_ref().map(|r| &r.value),
            master_live: view.master_live,
            elected_epoch: self.session.elected_epoch,
            lease_open: local.lease.is_open(now),
            lease_lost: local.lease.lost,
            bootstrap_done: now >= self.session.bootstrap_until,
            master_ready: view.record.as_ref().is_some_and(|r| {
                view.live.iter().any(|m| m.broker_id == r.value.master_id && m.epoch == r.value.master_epoch)
            }),
        };
        let mut action = decide(&situation);
        if let Some((failed, at)) = &self.session.failed {
            if *failed == action && now.saturating_duration_since(*at) < RETRY_PAUSE {
                action = Action::Stay;
            }
        }
        match action {
            Action::NewSession => self.session.over = true,
            // A master service is stopped by these, and its proposals with it.
            Action::StepDown | Action::Follow { .. } => self.forget_proposals(),
            _ => {}
        }
        Round { verdict, view, restore, action }
    }

    /// A master that holds its mastership rewrites a record it does not trust from the last one
    /// it trusted (its own latest write): only this master writes the record while it holds
    /// the mastership, so anything else there was written by nobody in the group.
    fn restore(&self, read: &GroupView, verdict: &Verdict, local: &Local) -> Option<Restore> {
        let (LocalRole::Master { epoch }, Some(trusted), Some(key)) =
            (local.role, verdict.record.as_ref(), read.mastership.live())
        else {
            return None;
        };
        let me = self.config.broker_id;
        let mine = key.broker_id == me && key.master_epoch == epoch && key.lease == local.lease_id;
        if !mine || trusted.value.master_id != me || trusted.value.master_epoch != epoch {
            return None;
        }
        Some(Restore { trusted: trusted.value.clone(), read_revision: read.record_revision })
    }

    /// The record was restored (`Some`), or the keys had changed since the read (`None`).
    pub fn restored(&mut self, restored: Option<Versioned<GroupRecord>>) {
        if let Some(record) = restored {
            self.audit.trust_own(record);
        }
    }

    /// A campaign ended with `outcome`; `me` is the state it published. Winning makes the
    /// session master of the record's epoch, and the next round runs at once (to promote).
    pub fn campaigned(&mut self, now: Instant, me: MemberState, outcome: &CampaignOutcome) {
        if let CampaignOutcome::Elected(record) = outcome {
            self.audit.trust_own(record.clone());
            self.session.elected_epoch = Some(record.value.master_epoch);
            self.session.published = Some((me, now));
            self.session.again = true;
        }
    }

    /// The role change `action` (promote, follow, step down) ended: `ok`, or it failed. A failed
    /// promotion ends the session (the group elects again at once, in a new epoch); a failed
    /// follow is not tried again for [`RETRY_PAUSE`].
    pub fn acted(&mut self, now: Instant, action: &Action, ok: bool) {
        match action {
            Action::Promote { .. } if ok => {
                // A new master service: proposals of an earlier one are gone with it.
                self.forget_proposals();
                self.session.failed = None;
            }
            Action::Promote { .. } => self.session.over = true,
            Action::Follow { .. } if ok => self.session.failed = None,
            Action::Follow { .. } => self.session.failed = Some((action.clone(), now)),
            _ => {}
        }
    }

    /// The master service proposed `set` at set epoch `set_epoch` (its proposals are whole
    /// sets: the newest replaces any older one not yet written).
    pub fn proposed(&mut self, set: BTreeSet<BrokerId>, set_epoch: i32) {
        self.next_seq += 1;
        self.session.proposal = Some(Proposal { set, set_epoch, seq: self.next_seq });
    }

    fn forget_proposals(&mut self) {
        self.session.proposal = None;
        self.session.writing = None;
    }

    /// The set change to write now, if any: the newest proposal, while the broker is master
    /// (`local.role`), at most [`MAX_CHANGES_PER_ROUND`] per round.
    pub fn next_change(&mut self, local: &Local) -> Option<SetChange> {
        let LocalRole::Master { epoch } = local.role else {
            self.forget_proposals();
            return None;
        };
        // The loop asks only once the last change's outcome is handled: a change still being
        // written here lost its answer (the round ended on a failed read after a refusal), and
        // is written again unless a newer proposal replaced it.
        if let Some(unanswered) = self.session.writing.take() {
            self.session.proposal.get_or_insert(unanswered);
        }
        if self.session.held || self.session.changes_this_round >= MAX_CHANGES_PER_ROUND {
            return None;
        }
        let p = self.session.proposal.take()?;
        self.session.changes_this_round += 1;
        let change = SetChange {
            proposer: self.config.broker_id,
            master_epoch: epoch,
            sync_state_set_epoch: p.set_epoch,
            new_set: p.set.clone(),
        };
        self.session.writing = Some(p);
        Some(change)
    }

    /// The set change [`next_change`](Self::next_change) gave ended with `outcome` (`Err`: the
    /// coordinator failed the request).
    pub fn changed(
        &mut self,
        outcome: Result<&SetChangeOutcome, &crate::service::coordinator::CoordinatorError>,
    ) -> ChangeStep {
        use crate::service::coordinator::CoordinatorError;
        let Some(written) = self.session.writing.clone() else { return ChangeStep::Next };
        match outcome {
            Ok(SetChangeOutcome::Applied(record)) => {
                self.audit.trust_own(record.clone());
                self.session.writing = None;
                // A proposal queued meanwhile is written on top of what was committed.
                if let Some(newer) = self.session.proposal.as_mut() {
                    newer.set_epoch = record.value.sync_state_set_epoch;
                }
                ChangeStep::Apply {
                    set: record.value.sync_state_set.clone(),
                    epoch: record.value.sync_state_set_epoch,
                }
            }
            Ok(SetChangeOutcome::Refused(_)) => ChangeStep::ReadGroup,
            Err(CoordinatorError::LeaseLost) => {
                self.session.over = true;
                ChangeStep::SessionOver
            }
            Err(_) => {
                // Written again next round, unless a newer proposal replaced it.
                self.session.writing = None;
                self.session.held = true;
                if self.session.proposal.is_none() {
                    self.session.proposal = Some(written);
                }
                ChangeStep::Retry
            }
        }
    }

    /// The set change was refused with `refusal`; `read` is the group read right after. A
    /// change written against an older set epoch is written again on top of the record's; else
    /// the master service learns the set in force, which ends its pending change. That answer
    /// is given only while the refused proposal is still the newest the service made: a newer
    /// one is pending in the service now, and the coordinator may still commit it, so ending it
    /// with the old set would leave the service counting fewer members than the record names
    /// (simulator seed 0x72).
    pub fn change_refused(
        &mut self,
        refusal: &SetChangeRefusal,
        read: &GroupView,
        local: &Local,
    ) -> ChangeStep {
        let Some(written) = self.session.writing.take() else { return ChangeStep::Next };
        let LocalRole::Master { epoch } = local.role else {
            self.forget_proposals();
            return ChangeStep::Next;
        };
        let Some(record) = read
            .record
            .as_ref()
            .filter(|r| r.value.master_id == self.config.broker_id && r.value.master_epoch == epoch)
        else {
            // No longer this epoch's master: nothing to write or apply.
            self.forget_proposals();
            return ChangeStep::Next;
        };
        if let Some(newer) = self.session.proposal.as_mut() {
            // Superseded: the newer proposal is written next, on top of the record's set.
            newer.set_epoch = record.value.sync_state_set_epoch;
            return ChangeStep::Next;
        }
        if record.value.sync_state_set != written.set
            && matches!(refusal, SetChangeRefusal::StaleSetEpoch { .. })
        {
            self.session.proposal =
                Some(Proposal { set_epoch: record.value.sync_state_set_epoch, ..written });
            return ChangeStep::Next;
        }
        ChangeStep::Apply {
            set: record.value.sync_state_set.clone(),
            epoch: record.value.sync_state_set_epoch,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;
    use crate::service::coordinator::{CoordinatorError, Mastership, MastershipKey};

    const ME: BrokerId = 2;
    const TTL: Duration = Duration::from_secs(3);
    const RENEW: Duration = Duration::from_secs(1);

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn state(id: BrokerId, epoch: i32, max_offset: u64) -> MemberState {
        MemberState {
            broker_id: id,
            epoch,
            max_offset,
            ha_addr: addr(10_000 + id as u16),
            http_addr: addr(20_000 + id as u16),
        }
    }

    fn record(epoch: i32, master: BrokerId, set: &[BrokerId], set_epoch: i32) -> GroupRecord {
        GroupRecord {
            master_epoch: epoch,
            master_id: master,
            master_ha_addr: addr(10_000 + master as u16),
            master_http_addr: addr(20_000 + master as u16),
            sync_state_set: set.iter().copied().collect(),
            sync_state_set_epoch: set_epoch,
        }
    }

    fn member() -> Member {
        let config = MemberConfig {
            broker_id: ME,
            policy: ElectionPolicy::default(),
            lease_ttl: TTL,
            renew_interval: RENEW,
        };
        Member::new(config, at(0))
    }

    /// A read: `record` at `revision`, its master live under `lease` or not, these members live.
    fn view(
        record: Option<(&GroupRecord, Revision)>,
        master_lease: Option<i64>,
        live: &[MemberState],
    ) -> GroupView {
        let mastership = match (record, master_lease) {
            (Some((r, revision)), Some(lease)) => MastershipKey::Present(Mastership {
                broker_id: r.master_id,
                master_epoch: r.master_epoch,
                lease,
                holder_live: live.iter().any(|m| m.broker_id == r.master_id),
                revision,
            }),
            _ => MastershipKey::Absent,
        };
        let record = record.map(|(r, revision)| Versioned { revision, value: r.clone() });
        GroupView {
            master_live: record.as_ref().is_some_and(|r| mastership.holds(&r.value)),
            record_revision: record.as_ref().map(|r| r.revision),
            record,
            record_error: None,
            mastership,
            live: live.to_vec(),
            unreadable_members: Vec::new(),
        }
    }

    fn open_lease(until_ms: u64) -> LeaseSnapshot {
        LeaseSnapshot { open_until: Some(at(until_ms)), lost: false }
    }

    fn local(role: LocalRole, lease_id: i64) -> Local {
        Local { role, lease: open_lease(60_000), lease_id, state: state(ME, 1, 100) }
    }

    #[test]
    fn a_state_is_published_first_then_at_once_for_a_new_epoch_and_at_most_once_a_renew_interval_else() {
        let mut m = member();
        let s = state(ME, 1, 100);
        assert!(m.publish_due(at(0), &s), "never published in this session");
        m.published(at(0), s.clone());
        assert!(!m.publish_due(at(10), &s), "unchanged");
        assert!(!m.publish_due(at(10), &state(ME, 1, 200)), "a new offset waits a renew interval");
        assert!(m.publish_due(at(1_000), &state(ME, 1, 200)));
        assert!(m.publish_due(at(10), &state(ME, 2, 100)), "a new epoch goes out at once");
        m.new_session(at(2_000));
        assert!(m.publish_due(at(2_000), &s), "a new session publishes again");
    }

    #[test]
    fn an_empty_group_is_campaigned_for_after_the_bootstrap_wait_and_the_winner_promotes_at_once() {
        let mut m = member();
        let me = state(ME, 1, 100);
        let empty = view(None, None, std::slice::from_ref(&me));
        assert_eq!(m.read(at(100), &empty, &local(LocalRole::None, 7)).action, Action::Stay, "bootstrap");
        assert_eq!(m.read(at(3_000), &empty, &local(LocalRole::None, 7)).action, Action::Campaign);
        let won = record(1, ME, &[ME], 1);
        m.campaigned(
            at(3_010),
            me.clone(),
            &CampaignOutcome::Elected(Versioned { revision: 5, value: won.clone() }),
        );
        assert!(m.run_again(), "promote without waiting a poll");
        assert!(!m.run_again());
        assert!(!m.publish_due(at(3_020), &me), "the campaign published the state");
        let read = view(Some((&won, 5)), Some(7), std::slice::from_ref(&me));
        let round = m.read(at(3_020), &read, &local(LocalRole::None, 7));
        assert_eq!(
            round.action,
            Action::Promote { epoch: 1, sync_state_set: [ME].into(), sync_state_set_epoch: 1 }
        );
        assert!(round.restore.is_none() && round.verdict.trusted);
        let round = m.read(at(3_120), &read, &local(LocalRole::Master { epoch: 1 }, 7));
        assert_eq!(round.action, Action::Stay, "master in its epoch");
    }

    #[test]
    fn a_record_naming_this_broker_from_an_earlier_session_is_not_obeyed() {
        let mut m = member();
        let mine = record(1, ME, &[1, ME], 1);
        m.campaigned(
            at(10),
            state(ME, 1, 0),
            &CampaignOutcome::Elected(Versioned { revision: 5, value: mine.clone() }),
        );
        m.new_session(at(20));
        let read = view(Some((&mine, 5)), Some(7), &[state(1, 1, 0), state(ME, 1, 0)]);
        assert_eq!(
            m.read(at(30), &read, &local(LocalRole::None, 8)).action,
            Action::Stay,
            "the old lease still holds it"
        );
    }

    #[test]
    fn a_failed_follow_waits_before_it_is_tried_again_and_a_failed_promotion_ends_the_session() {
        let mut m = member();
        let theirs = record(3, 1, &[1, ME], 4);
        let read = view(Some((&theirs, 9)), Some(4), &[state(1, 3, 100), state(ME, 2, 50)]);
        let follow = m.read(at(0), &read, &local(LocalRole::None, 7)).action;
        assert_eq!(follow, Action::Follow { master: 1, ha_addr: theirs.master_ha_addr, epoch: 3 });
        m.acted(at(0), &follow, false);
        assert_eq!(m.read(at(100), &read, &local(LocalRole::None, 7)).action, Action::Stay, "paused");
        assert_eq!(m.read(at(500), &read, &local(LocalRole::None, 7)).action, follow, "tried again");
        m.acted(at(500), &follow, true);
        assert_eq!(
            m.read(at(510), &read, &local(LocalRole::None, 7)).action,
            follow,
            "no pause after success"
        );

        let promote = Action::Promote { epoch: 4, sync_state_set: [ME].into(), sync_state_set_epoch: 5 };
        assert!(!m.session_over());
        m.acted(at(600), &promote, false);
        assert!(m.session_over(), "the mastership is given back with the lease");
        m.new_session(at(700));
        assert!(!m.session_over());
    }

    #[test]
    fn a_lost_lease_ends_the_session() {
        let mut m = member();
        let theirs = record(3, 1, &[1, ME], 4);
        let read = view(Some((&theirs, 9)), Some(4), &[state(1, 3, 100)]);
        let lost = Local {
            lease: LeaseSnapshot { open_until: None, lost: true },
            ..local(LocalRole::Master { epoch: 2 }, 7)
        };
        assert_eq!(m.read(at(0), &read, &lost).action, Action::NewSession);
        assert!(m.session_over());
    }

    #[test]
    fn an_untrusted_record_is_not_acted_on_and_its_holder_writes_the_trusted_one_back() {
        let mut m = member();
        let mine = record(2, ME, &[1, ME], 3);
        let live = [state(1, 2, 10), state(ME, 2, 10)];
        m.campaigned(
            at(0),
            state(ME, 2, 10),
            &CampaignOutcome::Elected(Versioned { revision: 10, value: mine.clone() }),
        );
        m.read(at(0), &view(Some((&mine, 10)), Some(7), &live), &local(LocalRole::Master { epoch: 2 }, 7));
        // A forged write: the same epoch, another master.
        let forged = record(2, 1, &[1, ME], 4);
        let read = view(Some((&forged, 11)), None, &live);
        let mut read = read;
        read.mastership = MastershipKey::Present(Mastership {
            broker_id: ME,
            master_epoch: 2,
            lease: 7,
            holder_live: true,
            revision: 10,
        });
        let round = m.read(at(100), &read, &local(LocalRole::Master { epoch: 2 }, 7));
        assert!(!round.verdict.trusted);
        assert_eq!(
            round.view.record.as_ref().map(|r| r.value.master_id),
            Some(ME),
            "acts on the trusted one"
        );
        assert!(round.view.master_live);
        assert_eq!(round.action, Action::Stay);
        assert_eq!(round.restore, Some(Restore { trusted: mine.clone(), read_revision: Some(11) }));
        let restored = GroupRecord { sync_state_set_epoch: 4, ..mine.clone() };
        m.restored(Some(Versioned { revision: 12, value: restored.clone() }));
        assert_eq!(m.audit().trusted().map(|r| r.revision), Some(12));
        // Under another lease (not this session's mastership), nothing is written back.
        let round = m.read(at(200), &read, &local(LocalRole::Master { epoch: 2 }, 8));
        assert_eq!(round.restore, None);
    }

    fn applied(r: &GroupRecord, revision: Revision) -> SetChangeOutcome {
        SetChangeOutcome::Applied(Versioned { revision, value: r.clone() })
    }

    #[test]
    fn a_committed_set_change_is_applied_and_a_proposal_made_meanwhile_is_written_on_top_of_it() {
        let mut m = member();
        let master = local(LocalRole::Master { epoch: 2 }, 7);
        assert_eq!(m.next_change(&master), None, "nothing proposed");
        m.proposed([1, ME].into(), 3);
        let change = m.next_change(&master).expect("the proposal");
        assert_eq!(
            change,
            SetChange { proposer: ME, master_epoch: 2, sync_state_set_epoch: 3, new_set: [1, ME].into() }
        );
        m.proposed([1, ME, 3].into(), 3);
        let committed = record(2, ME, &[1, ME], 4);
        assert_eq!(
            m.changed(Ok(&applied(&committed, 20))),
            ChangeStep::Apply { set: [1, ME].into(), epoch: 4 }
        );
        assert_eq!(m.audit().trusted().map(|r| r.revision), Some(20), "its own write is trusted");
        let next = m.next_change(&master).expect("the newer proposal");
        assert_eq!((next.sync_state_set_epoch, next.new_set), (4, [1, ME, 3].into()), "on top of the commit");
    }

    #[test]
    fn a_refused_set_change_answers_the_set_in_force_only_while_it_is_the_newest_proposal() {
        let master = local(LocalRole::Master { epoch: 2 }, 7);
        let in_force = record(2, ME, &[ME], 5);
        let read = view(Some((&in_force, 30)), Some(7), &[state(ME, 2, 0)]);
        let refusal = SetChangeRefusal::Unchanged;

        let mut m = member();
        m.proposed([ME].into(), 5);
        m.next_change(&master).expect("the proposal");
        assert_eq!(m.changed(Ok(&SetChangeOutcome::Refused(refusal.clone()))), ChangeStep::ReadGroup);
        assert_eq!(
            m.change_refused(&refusal, &read, &master),
            ChangeStep::Apply { set: [ME].into(), epoch: 5 }
        );

        // Simulator seed 0x72: a newer proposal came while the refused one was on its way; the
        // set in force would end it inside the master service, which the coordinator may still
        // commit. It is written next instead.
        let mut m = member();
        m.proposed([ME, 3].into(), 4);
        m.next_change(&master).expect("the proposal");
        m.proposed([ME, 1].into(), 4);
        assert_eq!(m.changed(Ok(&SetChangeOutcome::Refused(refusal.clone()))), ChangeStep::ReadGroup);
        assert_eq!(m.change_refused(&refusal, &read, &master), ChangeStep::Next);
        let next = m.next_change(&master).expect("the newer proposal");
        assert_eq!((next.sync_state_set_epoch, next.new_set), (5, [ME, 1].into()));
    }

    #[test]
    fn a_set_change_against_an_old_set_epoch_is_written_again_on_top_of_the_records() {
        let master = local(LocalRole::Master { epoch: 2 }, 7);
        let mut m = member();
        m.proposed([1, ME].into(), 3);
        m.next_change(&master).expect("the proposal");
        let stale = SetChangeRefusal::StaleSetEpoch { proposed: 3, current: 5 };
        assert_eq!(m.changed(Ok(&SetChangeOutcome::Refused(stale.clone()))), ChangeStep::ReadGroup);
        let read = view(Some((&record(2, ME, &[ME], 5), 30)), Some(7), &[]);
        assert_eq!(m.change_refused(&stale, &read, &master), ChangeStep::Next);
        let again = m.next_change(&master).expect("written again");
        assert_eq!((again.sync_state_set_epoch, again.new_set), (5, [1, ME].into()));

        // Refused because this broker is no longer the epoch's master: nothing is written or applied.
        let theirs = view(Some((&record(3, 1, &[1], 1), 31)), Some(4), &[]);
        assert_eq!(m.changed(Ok(&SetChangeOutcome::Refused(stale.clone()))), ChangeStep::ReadGroup);
        assert_eq!(m.change_refused(&stale, &theirs, &master), ChangeStep::Next);
        assert_eq!(m.next_change(&master), None);
    }

    #[test]
    fn an_unanswered_set_change_is_written_again_next_round_and_a_lost_lease_ends_the_session() {
        let master = local(LocalRole::Master { epoch: 2 }, 7);
        let mut m = member();
        m.proposed([1, ME].into(), 3);
        m.next_change(&master).expect("the proposal");
        let timeout = CoordinatorError::Timeout(Duration::from_secs(1));
        assert_eq!(m.changed(Err(&timeout)), ChangeStep::Retry);
        assert_eq!(m.next_change(&master), None, "not again this round");
        let mine = record(2, ME, &[ME], 3);
        m.campaigned(
            at(0),
            state(ME, 2, 0),
            &CampaignOutcome::Elected(Versioned { revision: 30, value: mine.clone() }),
        );
        let read = view(Some((&mine, 30)), Some(7), &[state(ME, 2, 0)]);
        m.read(at(100), &read, &master);
        let again = m.next_change(&master).expect("written again next round");
        assert_eq!(again.new_set, [1, ME].into());
        assert_eq!(m.changed(Err(&CoordinatorError::LeaseLost)), ChangeStep::SessionOver);
        assert!(m.session_over());
    }

    #[test]
    fn proposals_end_with_the_master_service_that_made_them() {
        let mut m = member();
        m.proposed([1, ME].into(), 3);
        assert_eq!(m.next_change(&local(LocalRole::Slave { master: 1, epoch: 3 }, 7)), None);
        assert_eq!(m.next_change(&local(LocalRole::Master { epoch: 4 }, 7)), None, "dropped, not kept");
        m.proposed([1, ME].into(), 3);
        let promote = Action::Promote { epoch: 4, sync_state_set: [ME].into(), sync_state_set_epoch: 1 };
        m.acted(at(0), &promote, true);
        assert_eq!(m.next_change(&local(LocalRole::Master { epoch: 4 }, 7)), None, "an earlier service's");
    }
}
