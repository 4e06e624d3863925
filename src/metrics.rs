//! Prometheus metrics (`GET /metrics`), with the `prometheus-client` crate. Replication gauges
//! are refreshed from the live status at each scrape; put latencies are recorded as puts finish.
//!
//! Every series carries `cluster` (`brokerClusterName`) and `broker_name` (`brokerName`)
//! labels, rocketmq-exporter's dimensions; `broker_name` is snake_case because Prometheus'
//! naming rules (`promtool check metrics`) reject camelCase label names.
//!
//! Replicas are labelled `replica`: the name its TLS client certificate carries, else the name
//! `replicaNames` gives its IP, else the IP itself. Several slaves on one IP (one host, NAT)
//! take that IP's names in turn, oldest connection first, and then `IP#2`, `IP#3`…: a plain HA
//! link carries no identity, so the master counts them rather than telling them apart. A
//! replica seen since start that goes away keeps its series, with `logship_slave_in_sync` 0 and
//! its lag growing, and stays expected (`logship_replicas_expected`, `logship_under_replicated`)
//! until an operator forgets it (`POST /ha/forgetReplica`, `logship status --forget NAME`) or
//! the broker restarts.
//!
//! The response is OpenMetrics 1.0 when the scraper's `Accept` prefers it (Prometheus does),
//! and the classic text format 0.0.4 otherwise.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::AtomicU64;
use std::time::{Duration, Instant};

use logship_core::PutStatus;
use logship_core::service::{ConnectedSlave, MasterStatus, SlaveStatus};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::config::BrokerSettings;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReplicaLabels {
    replica: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct MemberLabels {
    broker_id: String,
}

/// The gauges of automatic failover on etcd (registered only with `etcdEndpoints`).
#[derive(Default)]
struct GroupMetrics {
    lease_open: Gauge,
    master_epoch: Gauge,
    master_id: Gauge,
    master_live: Gauge,
    sync_state_set_size: Gauge,
    live_members: Gauge,
    member_lag_bytes: Family<MemberLabels, Gauge>,
    lease_refused_puts: Counter,
    record_anomalies: Counter,
    record_trusted: Gauge,
}

impl GroupMetrics {
    fn register(&self, registry: &mut Registry) {
        registry.register(
            "group_lease_open",
            "1 while this broker's etcd lease guard is open: as master it may acknowledge puts (automatic failover)",
            self.lease_open.clone(),
        );
        registry.register(
            "group_master_epoch",
            "The master epoch in the group record (automatic failover)",
            self.master_epoch.clone(),
        );
        registry.register(
            "group_master_id",
            "The broker id of the group record's master, -1 before the first election (automatic failover)",
            self.master_id.clone(),
        );
        registry.register(
            "group_master_live",
            "1 while the group record's master holds its mastership (automatic failover)",
            self.master_live.clone(),
        );
        registry.register(
            "group_sync_state_set_size",
            "Members of the sync-state-set in the group record (automatic failover)",
            self.sync_state_set_size.clone(),
        );
        registry.register(
            "group_live_members",
            "Brokers of the group holding a live etcd lease (automatic failover)",
            self.live_members.clone(),
        );
        registry.register(
            "group_member_lag_bytes",
            "Bytes each live member's published end is behind the master's (automatic failover)",
            self.member_lag_bytes.clone(),
        );
        registry.register(
            "group_record_anomalies",
            "What the group's keys in etcd held that no broker's protocol step explains (a forged or hand-edited record, a mastership key without a lease), each counted once (automatic failover)",
            self.record_anomalies.clone(),
        );
        registry.register(
            "group_record_trusted",
            "1 while the group record last read is trusted; 0 while it is refused and the last trusted one is acted on (automatic failover)",
            self.record_trusted.clone(),
        );
        registry.register(
            "group_lease_refused_puts",
            "Puts answered 503 LEASE_LOST because the lease guard was closed (automatic failover)",
            self.lease_refused_puts.clone(),
        );
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: String,
}

fn latency_histogram() -> Histogram {
    // 50 µs to ~26 s.
    Histogram::new(exponential_buckets(0.000_05, 2.0, 20))
}

/// What a master remembers of a replica with a stable name, to report it while it is away.
#[derive(Clone, Debug)]
struct Remembered {
    ack: Option<u64>,
    lag: Duration,
    at: Instant,
}

/// What a master's status showed of its replicas, as the metrics count them.
#[derive(Clone, Debug)]
pub struct Replicas {
    /// The replica name of each connected slave, in the status' order.
    pub names: Vec<String>,
    /// The replicas away: name, last ack, and for how long (`None`: never seen).
    pub absent: Vec<(String, Option<u64>, Option<Duration>)>,
    /// Copies expected, the master included ([`Metrics::replicas_expected`]).
    pub expected: u64,
    /// Copies in sync, the master included.
    pub in_sync: u64,
}

impl Replicas {
    /// Whether fewer copies are in sync than expected.
    pub fn under_replicated(&self) -> bool {
        self.in_sync < self.expected
    }
}

/// Why an operator's call to forget a replica was refused.
#[derive(Debug, thiserror::Error)]
pub enum ForgetRefused {
    /// No replica of that name is remembered.
    #[error("no replica named {0} is remembered (see absentReplicas in /status)")]
    Unknown(String),
    /// It is connected now.
    #[error("replica {0} is connected: stop it first, then forget it")]
    Connected(String),
    /// `replicaNames` gives it.
    #[error("replica {0} is named in replicaNames: remove it there and restart to stop expecting it")]
    Configured(String),
}

/// At most this many replicas are remembered while away (named ones always are).
const MAX_REMEMBERED: usize = 64;

/// The content type of the classic text format.
pub const TEXT_0_0_4: &str = "text/plain; version=0.0.4; charset=utf-8";
/// The content type of OpenMetrics text.
pub const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The broker's metrics.
pub struct Metrics {
    registry: Registry,
    slave_lag_bytes: Family<ReplicaLabels, Gauge>,
    slave_lag_seconds: Family<ReplicaLabels, Gauge<f64, AtomicU64>>,
    slave_in_sync: Family<ReplicaLabels, Gauge>,
    replicas_expected: Gauge,
    replicas_in_sync: Gauge,
    under_replicated: Gauge,
    messages_in: Counter,
    replicated_bytes: Counter,
    replicated_seen: Mutex<u64>,
    put_latency: Family<StatusLabels, Histogram, fn() -> Histogram>,
    connections: Gauge,
    disk_used_ratio: Gauge<f64, AtomicU64>,
    max_offset: Gauge,
    min_offset: Gauge,
    flushed_offset: Gauge,
    ha_refusals: Family<ReasonLabels, Counter>,
    fenced: Gauge,
    write_refused: Gauge,
    forced_deleted_bytes: Counter,
    scrub_damaged_records: Gauge,
    append_failures: Counter,
    master_epoch: Gauge,
    confirm_offset: Gauge,
    epoch_entries: Gauge,
    sync_state_set_size: Gauge,
    sync_state_set_epoch: Gauge,
    sync_state_set_member: Family<MemberLabels, Gauge>,
    has_role: Gauge,
    truncations: Counter,
    truncated_bytes: Counter,
    follow_refusals: Family<ReasonLabels, Counter>,
    follow_refused: Gauge,
    group: GroupMetrics,
    /// The totals last seen in a status, per counter, so each counter grows by the difference.
    totals_seen: Mutex<BTreeMap<String, u64>>,
    names: Vec<(String, IpAddr)>,
    total_replicas: u32,
    remembered: Mutex<BTreeMap<String, Remembered>>,
}

impl Metrics {
    /// Registers every metric, labelled with the broker's cluster and name.
    pub fn for_broker(settings: &BrokerSettings) -> Self {
        let labels = [
            ("cluster".into(), settings.broker_cluster_name.clone().into()),
            ("broker_name".into(), settings.broker_name.clone().into()),
        ];
        let mut registry = Registry::with_prefix_and_labels("logship", labels.into_iter());
        let slave_lag_bytes = Family::<ReplicaLabels, Gauge>::default();
        let slave_lag_seconds = Family::<ReplicaLabels, Gauge<f64, AtomicU64>>::default();
        let slave_in_sync = Family::<ReplicaLabels, Gauge>::default();
        let replicated_bytes = Counter::default();
        let messages_in = Counter::default();
        let put_latency =
            Family::<StatusLabels, Histogram, fn() -> Histogram>::new_with_constructor(latency_histogram);
        let (connections, replicas_expected, replicas_in_sync, under_replicated) =
            (Gauge::default(), Gauge::default(), Gauge::default(), Gauge::default());
        let disk_used_ratio = Gauge::<f64, AtomicU64>::default();
        let (max_offset, min_offset, flushed_offset) = (Gauge::default(), Gauge::default(), Gauge::default());
        registry.register(
            "slave_lag_bytes",
            "Bytes a replica lacks behind the master",
            slave_lag_bytes.clone(),
        );
        registry.register(
            "slave_lag_seconds",
            "How long a replica has been behind",
            slave_lag_seconds.clone(),
        );
        registry.register(
            "slave_in_sync",
            "1 if the replica is connected and within haMaxGapNotInSync, else 0",
            slave_in_sync.clone(),
        );
        registry.register(
            "replicas_expected",
            "Copies the master expects, itself included: max(totalReplicas, 1 + replicaNames) (master)",
            replicas_expected.clone(),
        );
        registry.register(
            "replicas_in_sync",
            "Copies in sync, the master included (master)",
            replicas_in_sync.clone(),
        );
        registry.register(
            "under_replicated",
            "1 if fewer copies are in sync than expected (master)",
            under_replicated.clone(),
        );
        registry.register("messages_in", "Messages stored by puts (master)", messages_in.clone());
        registry.register(
            "replicated_bytes",
            "Log bytes sent to slaves (master) or stored from the master (slave)",
            replicated_bytes.clone(),
        );
        registry.register("put_latency_seconds", "Put latency by RocketMQ status", put_latency.clone());
        registry.register(
            "connections",
            "Live HA connections (slaves on a master; 1 when a slave streams)",
            connections.clone(),
        );
        registry.register(
            "disk_used_ratio",
            "Disk usage of the store's file system",
            disk_used_ratio.clone(),
        );
        registry.register("commitlog_max_offset", "End of the commit log", max_offset.clone());
        registry.register("commitlog_min_offset", "Oldest offset of the commit log", min_offset.clone());
        registry.register(
            "commitlog_flushed_offset",
            "Durable end of the commit log",
            flushed_offset.clone(),
        );
        let ha_refusals = Family::<ReasonLabels, Counter>::default();
        let (fenced, write_refused, scrub_damaged_records) =
            (Gauge::default(), Gauge::default(), Gauge::default());
        let (forced_deleted_bytes, append_failures) = (Counter::default(), Counter::default());
        registry.register(
            "ha_refusals",
            "HA connections and reports the master refused, by reason (master)",
            ha_refusals.clone(),
        );
        registry.register(
            "fenced",
            "1 while the master refuses puts because of a fence (master)",
            fenced.clone(),
        );
        registry.register(
            "write_refused",
            "1 while the store refuses writes (disk full or over its limit)",
            write_refused.clone(),
        );
        registry.register(
            "forced_deleted_bytes",
            "Unexpired commit-log bytes deleted by forced retention (cleanFileForciblyEnable)",
            forced_deleted_bytes.clone(),
        );
        registry.register(
            "scrub_damaged_records",
            "Damaged records the background scrub has found since start",
            scrub_damaged_records.clone(),
        );
        registry.register(
            "append_failures",
            "Connections on which the slave refused to store replicated bytes (slave)",
            append_failures.clone(),
        );
        let (master_epoch, confirm_offset, epoch_entries) =
            (Gauge::default(), Gauge::default(), Gauge::default());
        let (sync_state_set_size, sync_state_set_epoch, has_role) =
            (Gauge::default(), Gauge::default(), Gauge::default());
        let sync_state_set_member = Family::<MemberLabels, Gauge>::default();
        let (truncations, truncated_bytes) = (Counter::default(), Counter::default());
        registry.register(
            "controller_has_role",
            "1 while the broker has an HA role, 0 before its first role change and between two (controller mode)",
            has_role.clone(),
        );
        registry.register(
            "master_epoch",
            "The master epoch: this broker's as master, its master's as slave (controller mode)",
            master_epoch.clone(),
        );
        registry.register(
            "confirm_offset",
            "The confirmOffset: consumers read replicated messages only below it (controller mode)",
            confirm_offset.clone(),
        );
        registry.register(
            "epoch_entries",
            "Entries in the log's epoch list (epochFileCheckpoint) (controller mode)",
            epoch_entries.clone(),
        );
        registry.register(
            "sync_state_set_size",
            "Members of the sync-state-set, the master included (controller mode, master)",
            sync_state_set_size.clone(),
        );
        registry.register(
            "sync_state_set_epoch",
            "The epoch of the sync-state-set (controller mode, master)",
            sync_state_set_epoch.clone(),
        );
        registry.register(
            "sync_state_set_member",
            "1 for each broker id in the sync-state-set (controller mode, master)",
            sync_state_set_member.clone(),
        );
        registry.register(
            "truncations",
            "Divergent tails this slave cut before following a new master (controller mode, slave)",
            truncations.clone(),
        );
        registry.register(
            "truncated_bytes",
            "Bytes cut by those truncations (controller mode, slave)",
            truncated_bytes.clone(),
        );
        let (follow_refusals, follow_refused) =
            (Family::<ReasonLabels, Counter>::default(), Gauge::default());
        registry.register(
            "follow_refusals",
            "Masters this slave refused to follow before truncating or writing anything, by reason: a stale \
             master's epoch, an epoch above the elected one, a truncation below the confirmOffset (controller \
             mode, slave)",
            follow_refusals.clone(),
        );
        registry.register(
            "follow_refused",
            "1 while the latest handshake with the master was refused (see /status) (controller mode, slave)",
            follow_refused.clone(),
        );
        let group = GroupMetrics::default();
        if settings.controller.as_ref().is_some_and(|c| c.etcd.is_some()) {
            group.register(&mut registry);
        }
        Self {
            registry,
            group,
            master_epoch,
            confirm_offset,
            epoch_entries,
            sync_state_set_size,
            sync_state_set_epoch,
            sync_state_set_member,
            has_role,
            truncations,
            truncated_bytes,
            follow_refusals,
            follow_refused,
            ha_refusals,
            fenced,
            write_refused,
            forced_deleted_bytes,
            scrub_damaged_records,
            append_failures,
            totals_seen: Mutex::new(BTreeMap::new()),
            slave_lag_bytes,
            slave_lag_seconds,
            slave_in_sync,
            replicas_expected,
            replicas_in_sync,
            under_replicated,
            messages_in,
            replicated_bytes,
            replicated_seen: Mutex::new(0),
            put_latency,
            connections,
            disk_used_ratio,
            max_offset,
            min_offset,
            flushed_offset,
            names: settings.replica_names.clone(),
            total_replicas: settings.total_replicas,
            remembered: Mutex::new(BTreeMap::new()),
        }
    }

    /// Records one put.
    pub fn record_put(&self, status: PutStatus, seconds: f64) {
        if status.is_stored() {
            self.messages_in.inc();
        }
        self.put_latency
            .get_or_create(&StatusLabels { status: status.rocketmq_name().to_string() })
            .observe(seconds);
    }

    fn set_replicated(&self, total: u64) {
        let mut seen = self.replicated_seen.lock().unwrap_or_else(|e| e.into_inner());
        if total > *seen {
            self.replicated_bytes.inc_by(total - *seen);
            *seen = total;
        }
    }

    /// The replica name of each of `slaves`, in order: the name its TLS client certificate
    /// carries; else, among the connections from its IP (oldest first), the k-th takes the
    /// k-th `replicaNames` name given to that IP, or when none is left the IP itself (k = 1)
    /// or `IP#k`. A plain HA link carries no identity, so slaves on one host are told apart by
    /// count only: which of them went away the master cannot know, only how many did.
    pub fn replica_names(&self, slaves: &[ConnectedSlave]) -> Vec<String> {
        let mut out = vec![String::new(); slaves.len()];
        let mut by_ip: BTreeMap<IpAddr, Vec<usize>> = BTreeMap::new();
        for (i, s) in slaves.iter().enumerate() {
            match &s.identity {
                Some(name) => out[i] = name.clone(),
                None => by_ip.entry(s.address.ip().to_canonical()).or_default().push(i),
            }
        }
        for (ip, mut group) in by_ip {
            group.sort_by_key(|&i| (std::cmp::Reverse(slaves[i].connected_for), slaves[i].address.port()));
            let mut configured = self.names.iter().filter(|(_, n)| n.to_canonical() == ip).map(|(n, _)| n);
            for (k, i) in group.into_iter().enumerate() {
                out[i] = match configured.next() {
                    Some(name) => name.clone(),
                    None if k == 0 => ip.to_string(),
                    None => format!("{ip}#{}", k + 1),
                };
            }
        }
        out
    }

    /// Replicas not connected now (`live`: the names of those that are): each one seen since
    /// start (or since it was last forgotten) and each one `replicaNames` gives, with its last
    /// ack and for how long it has been away (`None` for a named replica never seen).
    pub fn absent_replicas(&self, live: &[String]) -> Vec<(String, Option<u64>, Option<Duration>)> {
        let remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<(String, Option<u64>, Option<Duration>)> = remembered
            .iter()
            .filter(|(name, _)| !live.contains(name))
            .map(|(name, r)| (name.clone(), r.ack, Some(r.at.elapsed())))
            .collect();
        for (name, _) in &self.names {
            if !live.contains(name) && !remembered.contains_key(name) {
                out.push((name.clone(), None, None));
            }
        }
        out
    }

    /// Forgets a replica that is away, so that it is no longer expected (an operator's call:
    /// the slave was retired). Refused for a connected replica and for one `replicaNames`
    /// gives (remove it there).
    pub fn forget(&self, name: &str, live: &[String]) -> Result<(), ForgetRefused> {
        if live.iter().any(|n| n == name) {
            return Err(ForgetRefused::Connected(name.to_string()));
        }
        if self.names.iter().any(|(n, _)| n == name) {
            return Err(ForgetRefused::Configured(name.to_string()));
        }
        let mut remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        match remembered.remove(name) {
            Some(_) => Ok(()),
            None => Err(ForgetRefused::Unknown(name.to_string())),
        }
    }

    /// Forgets the longest-absent unnamed replicas beyond `keep`, so that peers from many
    /// addresses cannot grow the series without bound; named replicas are always kept.
    fn forget_beyond(&self, keep: usize) {
        let mut remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        while remembered.len() > keep {
            let oldest = remembered
                .iter()
                .filter(|(name, _)| !self.names.iter().any(|(n, _)| n == *name))
                .min_by_key(|(_, r)| r.at)
                .map(|(name, _)| name.clone());
            match oldest {
                Some(name) => remembered.remove(&name),
                None => break,
            };
        }
    }

    /// Copies a master expects, itself included: `max(totalReplicas, 1 + replicas)`, where
    /// the replicas are those `replicaNames` gives and those seen since start and not
    /// forgotten.
    pub fn replicas_expected(&self) -> u64 {
        let remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
        let unnamed = remembered.keys().filter(|k| !self.names.iter().any(|(n, _)| n == *k)).count();
        u64::from(self.total_replicas).max(1 + (self.names.len() + unnamed) as u64)
    }

    /// Grows `counter` to `total`, a running total read from a status under `key`.
    fn grow_to(&self, key: &str, counter: &Counter, total: u64) {
        let mut seen = self.totals_seen.lock().unwrap_or_else(|e| e.into_inner());
        let last = seen.entry(key.to_string()).or_default();
        if total > *last {
            counter.inc_by(total - *last);
            *last = total;
        }
    }

    /// Refreshes the store's integrity figures.
    pub fn observe_store(&self, store: &logship_store::StoreStatus) {
        self.write_refused.set(i64::from(store.write_refused.is_some()));
        self.grow_to("forced_deleted_bytes", &self.forced_deleted_bytes, store.forced_deleted_bytes);
        self.scrub_damaged_records.set(store.scrub.damaged_records as i64);
    }

    /// Refreshes the replication gauges from a master's status; what it found of the replicas.
    pub fn observe_master(&self, status: &MasterStatus, disk_used_ratio: Option<f64>) -> Replicas {
        let r = &status.refusals;
        for (reason, total) in [
            ("not_admitted", r.not_admitted),
            ("over_limit", r.over_limit),
            ("first_report_timeout", r.first_report_timeouts),
            ("displaced", r.displaced),
            ("untrusted_ahead", r.untrusted_ahead),
            ("diverged", r.diverged),
            ("implausible_report", r.implausible_reports),
            ("plain_refused", r.plain_refused),
            ("tls_refused", r.tls_refused),
            ("identity_refused", r.identity_refused),
        ] {
            let counter =
                self.ha_refusals.get_or_create(&ReasonLabels { reason: reason.to_string() }).clone();
            self.grow_to(&format!("ha_refusals/{reason}"), &counter, total);
        }
        self.fenced.set(i64::from(status.fence.is_some()));
        self.follow_refused.set(0);
        self.slave_lag_bytes.clear();
        self.slave_lag_seconds.clear();
        self.slave_in_sync.clear();
        let names = self.replica_names(&status.slaves);
        let now = Instant::now();
        let mut in_sync = 1;
        for (s, name) in status.slaves.iter().zip(&names) {
            let labels = ReplicaLabels { replica: name.clone() };
            self.slave_lag_bytes.get_or_create(&labels).set(s.lag_bytes as i64);
            self.slave_lag_seconds.get_or_create(&labels).set(s.lag.as_secs_f64());
            self.slave_in_sync.get_or_create(&labels).set(i64::from(s.in_sync));
            // A stranger's connection (not counted for SYNC waits) is shown, but neither
            // counts as a copy nor is expected back.
            if s.counted {
                in_sync += i64::from(s.in_sync);
                let mut remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner());
                remembered.insert(name.clone(), Remembered { ack: s.ack, lag: s.lag, at: now });
            }
        }
        self.forget_beyond(MAX_REMEMBERED);
        let remembered = self.remembered.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let absent = self.absent_replicas(&names);
        for (name, ack, away) in &absent {
            let labels = ReplicaLabels { replica: name.clone() };
            let lag_bytes = status.max_offset.saturating_sub(ack.unwrap_or(status.min_offset));
            self.slave_lag_bytes.get_or_create(&labels).set(lag_bytes as i64);
            self.slave_in_sync.get_or_create(&labels).set(0);
            if let (Some(r), Some(away)) = (remembered.get(name), away) {
                let lag = if lag_bytes == 0 { Duration::ZERO } else { r.lag + *away };
                self.slave_lag_seconds.get_or_create(&labels).set(lag.as_secs_f64());
            }
        }
        let expected = self.replicas_expected();
        self.replicas_expected.set(expected as i64);
        self.replicas_in_sync.set(in_sync);
        self.under_replicated.set(i64::from((in_sync as u64) < expected));
        self.set_replicated(status.bytes_replicated);
        self.connections.set(status.slaves.len() as i64);
        self.sync_state_set_member.clear();
        if let Some(a) = &status.autoswitch {
            self.has_role.set(1);
            self.master_epoch.set(i64::from(a.epoch));
            self.confirm_offset.set(a.confirm_offset as i64);
            self.epoch_entries.set(a.epochs.len() as i64);
            self.sync_state_set_size.set(a.sync_state_set.len() as i64);
            self.sync_state_set_epoch.set(i64::from(a.sync_state_set_epoch));
            for id in &a.sync_state_set {
                self.sync_state_set_member.get_or_create(&MemberLabels { broker_id: id.to_string() }).set(1);
            }
        }
        self.set_log(status.min_offset, status.max_offset, status.flushed_offset, disk_used_ratio);
        Replicas { names, absent, expected, in_sync: in_sync as u64 }
    }

    /// Refreshes the replication gauges from a slave's status (its own link to the master).
    pub fn observe_slave(
        &self,
        status: &SlaveStatus,
        min_offset: u64,
        start_offset: u64,
        in_sync: bool,
        disk: Option<f64>,
    ) {
        self.slave_lag_bytes.clear();
        self.slave_lag_seconds.clear();
        self.slave_in_sync.clear();
        let labels = ReplicaLabels { replica: "self".to_string() };
        self.slave_lag_bytes.get_or_create(&labels).set(status.lag_bytes as i64);
        self.slave_lag_seconds.get_or_create(&labels).set(status.lag.as_secs_f64());
        self.slave_in_sync.get_or_create(&labels).set(i64::from(in_sync));
        self.set_replicated(status.max_offset.saturating_sub(start_offset));
        self.grow_to("append_failures", &self.append_failures, status.append_failures);
        let streaming = status.state == logship_core::classic::SlaveState::Streaming;
        self.connections.set(i64::from(streaming));
        self.sync_state_set_member.clear();
        if let Some(a) = &status.autoswitch {
            self.has_role.set(1);
            self.master_epoch.set(i64::from(a.master_epoch));
            self.confirm_offset.set(a.confirm_offset as i64);
            self.epoch_entries.set(a.epochs.len() as i64);
            self.sync_state_set_size.set(0);
            self.grow_to("truncations", &self.truncations, a.truncations);
            self.grow_to("truncated_bytes", &self.truncated_bytes, a.truncated_bytes);
            for (reason, total) in a.refusals.by_reason() {
                let counter =
                    self.follow_refusals.get_or_create(&ReasonLabels { reason: reason.to_string() }).clone();
                self.grow_to(&format!("follow_refusals/{reason}"), &counter, total);
            }
            self.follow_refused.set(i64::from(a.refusals.current.is_some()));
        } else {
            self.follow_refused.set(0);
        }
        self.set_log(min_offset, status.max_offset, status.flushed_offset, disk);
    }

    /// Refreshes the gauges of a controller-mode broker without an HA role: its store's end,
    /// confirmOffset and epochs (`last_epoch`: the log's last).
    pub fn observe_unassigned(&self, store: &logship_store::StoreStatus, last_epoch: Option<i32>) {
        let log = (store.min_offset, store.max_offset, store.flushed_offset);
        self.observe_no_role(log, store.confirm_offset, store.disk_used_ratio, last_epoch);
    }

    /// [`observe_unassigned`](Self::observe_unassigned) from the figures: the log's min, max
    /// and flushed offsets, its confirmOffset, disk usage and last epoch.
    fn observe_no_role(
        &self,
        log: (u64, u64, u64),
        confirm: u64,
        disk: Option<f64>,
        last_epoch: Option<i32>,
    ) {
        self.has_role.set(0);
        self.follow_refused.set(0);
        self.master_epoch.set(i64::from(last_epoch.unwrap_or(0)));
        self.confirm_offset.set(confirm as i64);
        self.slave_lag_bytes.clear();
        self.slave_lag_seconds.clear();
        self.slave_in_sync.clear();
        self.sync_state_set_member.clear();
        self.sync_state_set_size.set(0);
        self.connections.set(0);
        self.set_log(log.0, log.1, log.2, disk);
    }

    fn set_log(&self, min: u64, max: u64, flushed: u64, disk: Option<f64>) {
        self.min_offset.set(min as i64);
        self.max_offset.set(max as i64);
        self.flushed_offset.set(flushed as i64);
        if let Some(r) = disk {
            self.disk_used_ratio.set(r);
        }
    }

    /// Refreshes the group gauges of automatic failover from the group as last read.
    pub fn observe_group(&self, c: &crate::coordination::Coordination) {
        let g = &self.group;
        g.lease_open.set(i64::from(c.lease_open()));
        g.record_trusted.set(i64::from(c.audit().trusted));
        let view = c.view();
        let record = view.as_ref().and_then(|v| v.record.as_ref()).map(|r| &r.value);
        g.master_epoch.set(record.map_or(0, |r| i64::from(r.master_epoch)));
        g.master_id.set(record.map_or(-1, |r| r.master_id));
        g.master_live.set(i64::from(view.as_ref().is_some_and(|v| v.master_live)));
        g.sync_state_set_size.set(record.map_or(0, |r| r.sync_state_set.len() as i64));
        let live = view.as_ref().map_or(&[][..], |v| &v.live[..]);
        g.live_members.set(live.len() as i64);
        let master_end =
            live.iter().find(|m| Some(m.broker_id) == record.map(|r| r.master_id)).map(|m| m.max_offset);
        g.member_lag_bytes.clear();
        if let Some(end) = master_end {
            for m in live {
                let labels = MemberLabels { broker_id: m.broker_id.to_string() };
                g.member_lag_bytes.get_or_create(&labels).set(end.saturating_sub(m.max_offset) as i64);
            }
        }
    }

    /// One anomaly of the group's keys found (automatic failover).
    #[cfg_attr(not(feature = "etcd"), allow(dead_code))]
    pub fn record_group_anomaly(&self) {
        self.group.record_anomalies.inc();
    }

    /// A put answered 503 `LEASE_LOST` (automatic failover).
    pub fn record_lease_refusal(&self) {
        self.group.lease_refused_puts.inc();
    }

    /// The OpenMetrics text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
    }

    /// The content type and body for a scrape with this `Accept` header.
    pub fn respond(&self, accept: Option<&str>) -> (&'static str, String) {
        if prefers_openmetrics(accept.unwrap_or("")) {
            (OPENMETRICS, self.render())
        } else {
            (TEXT_0_0_4, openmetrics_to_text_0_0_4(&self.render()))
        }
    }
}

/// Whether an `Accept` header ranks OpenMetrics text at least as high as the classic text
/// format (and above zero). No header, or `*/*`, gets the classic format.
pub fn prefers_openmetrics(accept: &str) -> bool {
    let mut openmetrics = 0.0_f64;
    let mut text = 0.0_f64;
    for range in accept.split(',') {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("").to_ascii_lowercase();
        let q = parts.filter_map(|p| p.strip_prefix("q=")).find_map(|q| q.parse::<f64>().ok()).unwrap_or(1.0);
        match media.as_str() {
            "application/openmetrics-text" => openmetrics = openmetrics.max(q),
            "text/plain" => text = text.max(q),
            _ => {}
        }
    }
    openmetrics > 0.0 && openmetrics >= text
}

/// Rewrites OpenMetrics text as the classic text format 0.0.4: counters' `HELP` and `TYPE`
/// name the `_total` series, and `# UNIT`, `_created` and `# EOF` lines go.
pub fn openmetrics_to_text_0_0_4(openmetrics: &str) -> String {
    let counters: Vec<&str> =
        openmetrics.lines().filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter")).collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "].iter().find_map(|p| line.strip_prefix(p).map(|rest| (*p, rest)));
        if let Some((prefix, rest)) = meta {
            let name = rest.split(' ').next().unwrap_or("");
            if counters.contains(&name) && !name.ends_with("_total") {
                out.push_str(prefix);
                out.push_str(name);
                out.push_str("_total");
                out.push_str(&rest[name.len()..]);
                out.push('\n');
                continue;
            }
        } else if counters.iter().any(|c| {
            line.strip_prefix(c)
                .and_then(|r| r.strip_prefix("_created"))
                .is_some_and(|r| r.starts_with(['{', ' ']))
        }) {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(address: &str, in_sync: bool, ack: u64) -> logship_core::service::ConnectedSlave {
        logship_core::service::ConnectedSlave {
            conn: logship_core::ConnId(0),
            address: address.parse().unwrap(),
            start: Some(0),
            ack: Some(ack),
            lag_bytes: 0,
            lag: Duration::ZERO,
            in_sync,
            connected_for: Duration::from_secs(1),
            bytes_sent: ack,
            trusted: true,
            counted: true,
            identity: None,
        }
    }

    fn master_status(slaves: Vec<logship_core::service::ConnectedSlave>) -> MasterStatus {
        MasterStatus {
            role: logship_core::BrokerRole::SyncMaster,
            min_offset: 0,
            max_offset: 100,
            flushed_offset: 100,
            replicated_offset: Some(100),
            pending_waits: 0,
            slaves,
            bytes_replicated: 100,
            connections_accepted: 1,
            peer_errors: 0,
            fence: None,
            refusals: Default::default(),
            autoswitch: None,
        }
    }

    #[test]
    fn replicas_are_named_by_config_then_ip_and_remembered_within_a_bound() {
        let settings = BrokerSettings {
            replica_names: vec![("s1".into(), "10.0.0.1".parse().unwrap())],
            ..BrokerSettings::default()
        };
        let m = Metrics::for_broker(&settings);
        let names = |links: Vec<logship_core::service::ConnectedSlave>| m.replica_names(&links);
        assert_eq!(
            names(vec![link("10.0.0.1:40000", true, 1), link("10.0.0.2:40001", true, 1)]),
            ["s1", "10.0.0.2"]
        );
        // Two behind one IP: the older connection takes the IP, the younger IP#2.
        let (mut c, d) = (link("127.0.0.1:5", true, 1), link("127.0.0.1:6", true, 1));
        c.connected_for = Duration::from_secs(9);
        assert_eq!(names(vec![d.clone(), c.clone()]), ["127.0.0.1#2", "127.0.0.1"]);
        let mut tls = link("127.0.0.1:7", true, 1);
        tls.identity = Some("replica-a".into());
        assert_eq!(names(vec![tls]), ["replica-a"], "a TLS name wins");
        // 100 strangers come and go: the named replica and at most MAX_REMEMBERED are kept.
        for i in 0..100u32 {
            let addr = format!("10.1.{}.{}:1000", i / 250, i % 250);
            m.observe_master(&master_status(vec![link(&addr, true, 50)]), None);
        }
        m.observe_master(&master_status(vec![]), None);
        let absent = m.absent_replicas(&[]);
        assert!(absent.len() <= MAX_REMEMBERED + 1, "{}", absent.len());
        assert_eq!(m.replicas_expected(), 1 + absent.len() as u64, "every replica away is expected");
        let forgotten = absent.iter().find(|(n, _, _)| n != "s1").unwrap().0.clone();
        m.forget(&forgotten, &[]).unwrap();
        assert!(matches!(m.forget(&forgotten, &[]), Err(ForgetRefused::Unknown(_))));
        assert!(matches!(m.forget("s1", &[]), Err(ForgetRefused::Configured(_))));
        assert_eq!(m.replicas_expected(), absent.len() as u64);
        assert!(absent.iter().any(|(n, ack, away)| n == "s1" && ack.is_none() && away.is_none()));
        let text = m.render();
        assert!(text.contains("logship_slave_in_sync{cluster=\"DefaultCluster\""), "{text}");
    }

    #[test]
    fn accept_header_negotiation() {
        assert!(!prefers_openmetrics(""));
        assert!(!prefers_openmetrics("*/*"));
        assert!(!prefers_openmetrics("text/plain;version=0.0.4"));
        assert!(prefers_openmetrics("application/openmetrics-text;version=1.0.0"));
        assert!(prefers_openmetrics(
            "application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2,*/*;q=0.1"
        ));
        assert!(!prefers_openmetrics("application/openmetrics-text;q=0.1,text/plain;q=0.9"));
        assert!(!prefers_openmetrics("application/openmetrics-text;q=0"));
    }

    #[test]
    fn counters_are_renamed_for_the_classic_format() {
        let om = "# HELP x_bytes Bytes.\n# TYPE x_bytes counter\nx_bytes_total{a=\"b\"} 5\nx_bytes_created 1.0\n\
                  # HELP g Gauge.\n# TYPE g gauge\ng 1\n# EOF\n";
        assert_eq!(
            openmetrics_to_text_0_0_4(om),
            "# HELP x_bytes_total Bytes.\n# TYPE x_bytes_total counter\nx_bytes_total{a=\"b\"} 5\n\
             # HELP g Gauge.\n# TYPE g gauge\ng 1\n"
        );
    }
    #[test]
    fn controller_mode_gauges_follow_the_autoswitch_status_and_leave_with_the_role() {
        use logship_core::EpochEntry;
        use logship_core::service::AutoSwitchMasterStatus;
        let m = Metrics::for_broker(&BrokerSettings::default());
        let mut status = master_status(vec![]);
        status.autoswitch = Some(AutoSwitchMasterStatus {
            broker_id: 1,
            epoch: 3,
            epochs: vec![EpochEntry { epoch: 1, start_offset: 0 }, EpochEntry { epoch: 3, start_offset: 40 }],
            confirm_offset: 90,
            sync_state_set: [1, 2].into(),
            sync_state_set_epoch: 4,
            proposed_sync_state_set: None,
            slaves: vec![],
        });
        m.observe_master(&status, None);
        let text = m.render();
        let value = |series: &str| {
            text.lines()
                .find(|l| l.starts_with(series))
                .and_then(|l| l.rsplit(' ').next())
                .map(str::to_string)
        };
        assert_eq!(value("logship_master_epoch{").as_deref(), Some("3"), "{text}");
        assert_eq!(value("logship_confirm_offset{").as_deref(), Some("90"), "{text}");
        assert_eq!(value("logship_epoch_entries{").as_deref(), Some("2"), "{text}");
        assert_eq!(value("logship_sync_state_set_size{").as_deref(), Some("2"), "{text}");
        assert_eq!(value("logship_sync_state_set_epoch{").as_deref(), Some("4"), "{text}");
        assert_eq!(value("logship_controller_has_role{").as_deref(), Some("1"), "{text}");
        assert!(text.contains("broker_id=\"2\""), "{text}");
        // The role goes: no member is left behind, and the role gauge says so.
        m.observe_no_role((0, 100, 100), 90, None, Some(3));
        let text = m.render();
        assert!(!text.contains("broker_id=\"2\""), "{text}");
        assert!(
            text.lines().any(|l| l.starts_with("logship_controller_has_role{") && l.ends_with(" 0")),
            "{text}"
        );
    }
}
