//! Automatic failover's state shared by the HTTP handlers, the master service's put path, the
//! metrics and the failover loop ([`Coordination`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use logship_core::service::coordinator::{Coordinator, GroupView, LeaseFence, LeaseSnapshot};
use logship_core::service::{MemberAddress, MemberDirectory};
use logship_core::time::Instant;

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
