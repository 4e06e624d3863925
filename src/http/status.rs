//! `GET /status`: role, offsets, replication state, as the typed document
//! [`logship::status::Status`] (the status page and `logship status` read it).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use logship::status::{
    AbsentReplica, ControllerLink, Epoch, FollowRefusals, Group, GroupMember, GroupView, HaRefusals, HaTrust,
    Master, MasterController, MasterLink, ReplicaLink, Scrub, ScrubFinding, Slave, SlaveController, Status,
    StoreIntegrity, Unassigned, UnassignedController,
};
use logship_core::BrokerRole;
use logship_core::classic::SlaveState;

use super::error;
use crate::broker::{Broker, ReplicationHandle};
use crate::config::BrokerSettings;
use crate::coordination::Coordination;

pub async fn status(State(broker): State<Arc<Broker>>) -> Response {
    match status_of(&broker).await {
        Some(doc) => Json(doc.to_json()).into_response(),
        None => error(StatusCode::SERVICE_UNAVAILABLE, "the replication service has stopped"),
    }
}

/// The `/status` document (refreshing the replication gauges on the way); with automatic
/// failover, `group` too. `None` once the replication service has stopped.
pub async fn status_of(broker: &Broker) -> Option<Status> {
    let mut doc = node_status(broker).await?;
    doc.remoting = broker.remoting.get().map(|r| r.status());
    doc.group = match (broker.coordination(), &broker.coordination) {
        (Some(c), _) => {
            broker.metrics.observe_group(c);
            Some(Group::Member(group_view(c)))
        }
        (None, Some(_)) => Some(Group::Left {
            left: true,
            why: "an admin call with overrideCoordinator took this broker's role over: it left automatic \
                  failover until it restarts"
                .into(),
        }),
        (None, None) => None,
    };
    Some(doc)
}

/// `/status`'s `group`: the record, the live members with their lag behind the master's
/// published end, and this broker's lease guard.
pub fn group_view(c: &Coordination) -> GroupView {
    let view = c.view();
    let record = view.as_ref().and_then(|v| v.record.as_ref()).map(|r| &r.value);
    let master_end =
        view.as_ref().and_then(|v| v.live.iter().find(|m| Some(m.broker_id) == record.map(|r| r.master_id)));
    let members = view
        .as_ref()
        .map(|v| {
            v.live
                .iter()
                .map(|m| GroupMember {
                    broker_id: m.broker_id,
                    max_offset: m.max_offset,
                    epoch: m.epoch,
                    lag: master_end.map(|e| e.max_offset.saturating_sub(m.max_offset)),
                    ha_address: m.ha_addr.to_string(),
                    http_address: m.http_addr.to_string(),
                })
                .collect()
        })
        .unwrap_or_default();
    let lease = c.lease();
    let audit = c.audit();
    GroupView {
        master_epoch: record.map(|r| r.master_epoch),
        master_id: record.map(|r| r.master_id),
        master_live: view.as_ref().is_some_and(|v| v.master_live),
        master_http_address: record.map(|r| r.master_http_addr.to_string()),
        sync_state_set: record.map(|r| r.sync_state_set.iter().copied().collect()),
        sync_state_set_epoch: record.map(|r| r.sync_state_set_epoch),
        members,
        lease_open: c.lease_open(),
        lease_lost: lease.is_none_or(|l| l.lost),
        record_trusted: audit.trusted,
        record_anomalies: audit.anomalies,
        record_anomalies_total: audit.total,
    }
}

async fn node_status(broker: &Broker) -> Option<Status> {
    let store = broker.store.status();
    broker.metrics.observe_store(&store);
    let gap = broker.settings.ha_max_gap_not_in_sync;
    let assigned = broker.roles.as_ref().map(|r| r.current().status());
    let (node, min_offset, max_offset, flushed_offset) = match broker.node() {
        ReplicationHandle::Unassigned => {
            broker.metrics.observe_unassigned(&store, broker.store.epochs().last().map(|e| e.epoch));
            let controller = UnassignedController {
                broker_id: broker.roles.as_ref().map(|r| r.broker_id),
                assigned,
                confirm_offset: store.confirm_offset,
                epochs: epochs(&broker.store.epochs()),
            };
            let node = logship::status::RoleStatus::Unassigned(Unassigned { controller });
            (node, store.min_offset, store.max_offset, store.flushed_offset)
        }
        ReplicationHandle::Master(master) => {
            let s = master.status().await?;
            let replicas = broker.metrics.observe_master(&s, store.disk_used_ratio);
            let slaves = s
                .slaves
                .iter()
                .zip(&replicas.names)
                .map(|(l, name)| ReplicaLink {
                    name: name.clone(),
                    bytes_sent: l.bytes_sent,
                    address: l.address.to_string(),
                    ack_offset: l.ack,
                    lag_bytes: l.lag_bytes,
                    lag_seconds: l.lag.as_secs_f64(),
                    in_sync: l.in_sync,
                    connected_seconds: l.connected_for.as_secs_f64(),
                    trusted: l.trusted,
                    counted: l.counted,
                    replica: l.identity.clone(),
                })
                .collect();
            let controller = s.autoswitch.as_ref().map(|a| MasterController {
                broker_id: a.broker_id,
                assigned: assigned.clone(),
                epoch: a.epoch,
                confirm_offset: a.confirm_offset,
                sync_state_set: a.sync_state_set.iter().copied().collect(),
                sync_state_set_epoch: a.sync_state_set_epoch,
                proposed_sync_state_set: a
                    .proposed_sync_state_set
                    .as_ref()
                    .map(|p| p.iter().copied().collect()),
                epochs: epochs(&a.epochs),
                slaves: a
                    .slaves
                    .iter()
                    .map(|l| ControllerLink {
                        conn: l.conn.0,
                        broker_id: l.broker_id,
                        async_learner: l.async_learner,
                        counted: l.counted,
                    })
                    .collect(),
            });
            let r = &s.refusals;
            let fields = Master {
                controller,
                replicated_offset: s.replicated_offset,
                pending_waits: s.pending_waits as u64,
                slaves,
                absent_replicas: replicas
                    .absent
                    .iter()
                    .map(|(name, ack, away)| AbsentReplica {
                        name: name.clone(),
                        ack_offset: *ack,
                        away_seconds: away.map(|d| d.as_secs_f64()),
                    })
                    .collect(),
                replicas_expected: replicas.expected,
                replicas_in_sync: replicas.in_sync,
                under_replicated: replicas.under_replicated(),
                bytes_replicated: s.bytes_replicated,
                fence: s.fence.as_ref().map(ToString::to_string),
                ha_trust: ha_trust(&broker.settings),
                ha_refusals: HaRefusals {
                    not_admitted: r.not_admitted,
                    over_limit: r.over_limit,
                    displaced: r.displaced,
                    identity_refused: r.identity_refused,
                    first_report_timeouts: r.first_report_timeouts,
                    untrusted_ahead: r.untrusted_ahead,
                    diverged: r.diverged,
                    implausible_reports: r.implausible_reports,
                    plain_refused: r.plain_refused,
                    tls_refused: r.tls_refused,
                    last: r.last.clone(),
                },
            };
            let node = match s.role {
                BrokerRole::SyncMaster => logship::status::RoleStatus::SyncMaster(fields),
                _ => logship::status::RoleStatus::AsyncMaster(fields),
            };
            (node, s.min_offset, s.max_offset, s.flushed_offset)
        }
        ReplicationHandle::Slave(slave) => {
            let s = slave.status().await?;
            let in_sync = s.state == SlaveState::Streaming && s.lag_bytes < gap && s.append_error.is_none();
            broker.metrics.observe_slave(
                &s,
                store.min_offset,
                broker.start_offset,
                in_sync,
                store.disk_used_ratio,
            );
            let state = match s.state {
                SlaveState::Disconnected { .. } => "DISCONNECTED",
                SlaveState::Connecting => "CONNECTING",
                SlaveState::Streaming => "STREAMING",
            };
            let controller = s.autoswitch.as_ref().map(|a| SlaveController {
                broker_id: a.broker_id,
                assigned: assigned.clone(),
                master_broker_id: a.master_broker_id,
                master_epoch: a.master_epoch,
                master_last_epoch: a.master_last_epoch,
                phase: format!("{:?}", a.phase),
                confirm_offset: a.confirm_offset,
                epochs: epochs(&a.epochs),
                consistent_point: a.consistent_point,
                truncations: a.truncations,
                truncated_bytes: a.truncated_bytes,
                refusals: FollowRefusals {
                    current: a.refusals.current.clone(),
                    master_behind_elected_epoch: a.refusals.master_behind_elected_epoch,
                    master_behind_local_epoch: a.refusals.master_behind_local_epoch,
                    epoch_above_elected: a.refusals.epoch_above_elected,
                    would_truncate_confirmed: a.refusals.would_truncate_confirmed,
                    no_consistent_point: a.refusals.no_consistent_point,
                },
            });
            let master = MasterLink {
                address: s.master_address.clone(),
                state: state.into(),
                ack_offset: s.ack_offset,
                master_offset: s.master_offset,
                lag_bytes: s.lag_bytes,
                lag_seconds: s.lag.as_secs_f64(),
                in_sync,
                seconds_since_last_read: s.since_last_read.map(|d| d.as_secs_f64()),
                append_error: s.append_error.clone(),
                append_failures: s.append_failures,
            };
            let node = logship::status::RoleStatus::Slave(Slave { controller, master });
            (node, store.min_offset, s.max_offset, s.flushed_offset)
        }
    };
    Some(Status {
        node,
        min_offset,
        max_offset,
        flushed_offset,
        disk_used_ratio: store.disk_used_ratio,
        write_refused: store.write_refused.clone(),
        store: store_integrity(&store),
        remoting: None,
        group: None,
    })
}

/// The HA port's trust model in `/status` (see docs/trust.md): `mode` is `protected` (only
/// loopback peers are identified), `allowList`, `tls`, or `allowListAndTls`; `trustAnyReplica`
/// and its `warning` say that strangers count (haTrustAnyReplica=true).
fn ha_trust(settings: &BrokerSettings) -> HaTrust {
    let mode = match (!settings.ha_replica_allow_list.is_empty(), settings.master_tls.is_some()) {
        (false, false) => "protected",
        (true, false) => "allowList",
        (false, true) => "tls",
        (true, true) => "allowListAndTls",
    };
    let warning = settings.ha_trust_any_replica.then_some(
        "haTrustAnyReplica=true: any connection counts as a replica for SYNC waits, and none can fence this \
         master; name the replicas in haReplicaAllowList or admit them by TLS",
    );
    HaTrust {
        mode: mode.into(),
        trust_any_replica: settings.ha_trust_any_replica,
        warning: warning.map(Into::into),
    }
}

/// An epoch list in `/status`, oldest first.
fn epochs(epochs: &[logship_core::EpochEntry]) -> Vec<Epoch> {
    epochs.iter().map(|e| Epoch { epoch: e.epoch, start_offset: e.start_offset }).collect()
}

/// The store's integrity figures in `/status`: forced deletions, the retention floor, the scrub.
fn store_integrity(store: &logship_store::StoreStatus) -> StoreIntegrity {
    let scrub = &store.scrub;
    StoreIntegrity {
        forced_deleted_segments: store.forced_deleted_segments,
        forced_deleted_bytes: store.forced_deleted_bytes,
        retention_floor: store.retention_floor,
        scrub: Scrub {
            enabled: scrub.enabled,
            passes: scrub.passes,
            position: scrub.position,
            pass_end: scrub.pass_end,
            bytes_verified: scrub.bytes_verified,
            damaged_records: scrub.damaged_records,
            findings: scrub
                .findings
                .iter()
                .map(|f| ScrubFinding {
                    segment: f.segment.display().to_string(),
                    offset: f.offset,
                    error: f.error.clone(),
                    resumed_at: f.resumed_at,
                })
                .collect(),
        },
    }
}
