//! `GET /status`: role, offsets, replication state (the status page and `logship status` read
//! it).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use logship_core::BrokerRole;
use logship_core::SlaveState;
use serde_json::{Value, json};

use super::error;
use crate::broker::{Broker, Node};
use crate::config::BrokerSettings;
use crate::coordination::Coordination;

pub async fn status(State(broker): State<Arc<Broker>>) -> Response {
    match status_json(&broker).await {
        Some(v) => Json(v).into_response(),
        None => error(StatusCode::SERVICE_UNAVAILABLE, "the replication service has stopped"),
    }
}

/// The `/status` document; with automatic failover, `group` too.
pub async fn status_json(broker: &Broker) -> Option<Value> {
    let mut v = node_status_json(broker).await?;
    if let Some(remoting) = broker.remoting.get() {
        v["remoting"] = remoting.status_json();
    }
    match (broker.coordination(), &broker.coordination) {
        (Some(c), _) => {
            broker.metrics.observe_group(c);
            v["group"] = group_json(c);
        }
        (None, Some(_)) => {
            v["group"] = json!({
                "left": true,
                "why": "an admin call with overrideCoordinator took this broker's role over: it left \
                        automatic failover until it restarts",
            });
        }
        (None, None) => {}
    }
    Some(v)
}

/// `/status`'s `group`: the record, the live members with their lag behind the master's
/// published end, and this broker's lease guard.
pub fn group_json(c: &Coordination) -> Value {
    let view = c.view();
    let record = view.as_ref().and_then(|v| v.record.as_ref()).map(|r| &r.value);
    let master_end =
        view.as_ref().and_then(|v| v.live.iter().find(|m| Some(m.broker_id) == record.map(|r| r.master_id)));
    let members: Vec<Value> = view
        .as_ref()
        .map(|v| {
            v.live
                .iter()
                .map(|m| {
                    json!({
                        "brokerId": m.broker_id,
                        "maxOffset": m.max_offset,
                        "epoch": m.epoch,
                        "lag": master_end.map(|e| e.max_offset.saturating_sub(m.max_offset)),
                        "haAddress": m.ha_addr.to_string(),
                        "httpAddress": m.http_addr.to_string(),
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let lease = c.lease();
    let audit = c.audit();
    json!({
        "masterEpoch": record.map(|r| r.master_epoch),
        "masterId": record.map(|r| r.master_id),
        "masterLive": view.as_ref().is_some_and(|v| v.master_live),
        "masterHttpAddress": record.map(|r| r.master_http_addr.to_string()),
        "syncStateSet": record.map(|r| &r.sync_state_set),
        "syncStateSetEpoch": record.map(|r| r.sync_state_set_epoch),
        "members": members,
        "leaseOpen": c.lease_open(),
        "leaseLost": lease.is_none_or(|l| l.lost),
        "recordTrusted": audit.trusted,
        "recordAnomalies": audit.anomalies,
        "recordAnomaliesTotal": audit.total,
    })
}

async fn node_status_json(broker: &Broker) -> Option<Value> {
    let store = broker.store.status();
    broker.metrics.observe_store(&store);
    let gap = broker.settings.ha_max_gap_not_in_sync;
    let role = broker.roles.as_ref().map(|r| r.current().json());
    match broker.node() {
        Node::Unassigned => {
            broker.metrics.observe_unassigned(&store, broker.store.epochs().last().map(|e| e.epoch));
            Some(json!({
                "role": "NONE",
                "minOffset": store.min_offset,
                "maxOffset": store.max_offset,
                "flushedOffset": store.flushed_offset,
                "controller": {
                    "brokerId": broker.roles.as_ref().map(|r| r.broker_id),
                    "assigned": role,
                    "confirmOffset": store.confirm_offset,
                    "epochs": epochs_json(&broker.store.epochs()),
                },
                "diskUsedRatio": store.disk_used_ratio,
                "writeRefused": store.write_refused,
                "store": store_json(&store),
            }))
        }
        Node::Master(master) => {
            let s = master.status().await?;
            let replicas = broker.metrics.observe_master(&s, store.disk_used_ratio);
            let slaves: Vec<Value> = s
                .slaves
                .iter()
                .zip(&replicas.names)
                .map(|(l, name)| {
                    json!({
                        "name": name,
                        "bytesSent": l.bytes_sent,
                        "address": l.address.to_string(),
                        "ackOffset": l.ack,
                        "lagBytes": l.lag_bytes,
                        "lagSeconds": l.lag.as_secs_f64(),
                        "inSync": l.in_sync,
                        "connectedSeconds": l.connected_for.as_secs_f64(),
                        "trusted": l.trusted,
                        "counted": l.counted,
                        "replica": l.identity,
                    })
                })
                .collect();
            let controller = s.autoswitch.as_ref().map(|a| {
                json!({
                    "brokerId": a.broker_id,
                    "assigned": role,
                    "epoch": a.epoch,
                    "confirmOffset": a.confirm_offset,
                    "syncStateSet": a.sync_state_set,
                    "syncStateSetEpoch": a.sync_state_set_epoch,
                    "proposedSyncStateSet": a.proposed_sync_state_set,
                    "epochs": epochs_json(&a.epochs),
                    "slaves": a.slaves.iter().map(|l| json!({
                        "conn": l.conn.0,
                        "brokerId": l.broker_id,
                        "asyncLearner": l.async_learner,
                        "counted": l.counted,
                    })).collect::<Vec<_>>(),
                })
            });
            Some(json!({
                "role": s.role.rocketmq_name(),
                "controller": controller,
                "minOffset": s.min_offset,
                "maxOffset": s.max_offset,
                "flushedOffset": s.flushed_offset,
                "replicatedOffset": s.replicated_offset,
                "pendingWaits": s.pending_waits,
                "slaves": slaves,
                "absentReplicas": crate::status_cmd::absent_json(&replicas.absent),
                "replicasExpected": replicas.expected,
                "replicasInSync": replicas.in_sync,
                "underReplicated": replicas.under_replicated(),
                "bytesReplicated": s.bytes_replicated,
                "fence": s.fence.as_ref().map(ToString::to_string),
                "haTrust": ha_trust_json(&broker.settings),
                "haRefusals": {
                    "notAdmitted": s.refusals.not_admitted,
                    "overLimit": s.refusals.over_limit,
                    "displaced": s.refusals.displaced,
                    "identityRefused": s.refusals.identity_refused,
                    "firstReportTimeouts": s.refusals.first_report_timeouts,
                    "untrustedAhead": s.refusals.untrusted_ahead,
                    "diverged": s.refusals.diverged,
                    "implausibleReports": s.refusals.implausible_reports,
                    "plainRefused": s.refusals.plain_refused,
                    "tlsRefused": s.refusals.tls_refused,
                    "last": s.refusals.last,
                },
                "diskUsedRatio": store.disk_used_ratio,
                "writeRefused": store.write_refused,
                "store": store_json(&store),
            }))
        }
        Node::Slave(slave) => {
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
            let controller = s.autoswitch.as_ref().map(|a| {
                json!({
                    "brokerId": a.broker_id,
                    "assigned": role,
                    "masterBrokerId": a.master_broker_id,
                    "masterEpoch": a.master_epoch,
                    "masterLastEpoch": a.master_last_epoch,
                    "phase": format!("{:?}", a.phase),
                    "confirmOffset": a.confirm_offset,
                    "epochs": epochs_json(&a.epochs),
                    "consistentPoint": a.consistent_point,
                    "truncations": a.truncations,
                    "truncatedBytes": a.truncated_bytes,
                    "refusals": {
                        "current": a.refusals.current,
                        "masterBehindElectedEpoch": a.refusals.master_behind_elected_epoch,
                        "masterBehindLocalEpoch": a.refusals.master_behind_local_epoch,
                        "epochAboveElected": a.refusals.epoch_above_elected,
                        "wouldTruncateConfirmed": a.refusals.would_truncate_confirmed,
                        "noConsistentPoint": a.refusals.no_consistent_point,
                    },
                })
            });
            Some(json!({
                "role": BrokerRole::Slave.rocketmq_name(),
                "controller": controller,
                "minOffset": store.min_offset,
                "maxOffset": s.max_offset,
                "flushedOffset": s.flushed_offset,
                "master": {
                    "address": s.master_address,
                    "state": state,
                    "ackOffset": s.ack_offset,
                    "masterOffset": s.master_offset,
                    "lagBytes": s.lag_bytes,
                    "lagSeconds": s.lag.as_secs_f64(),
                    "inSync": in_sync,
                    "secondsSinceLastRead": s.since_last_read.map(|d| d.as_secs_f64()),
                    "appendError": s.append_error,
                    "appendFailures": s.append_failures,
                },
                "diskUsedRatio": store.disk_used_ratio,
                "writeRefused": store.write_refused,
                "store": store_json(&store),
            }))
        }
    }
}

/// The HA port's trust model in `/status` (see docs/trust.md): `mode` is `protected` (only
/// loopback peers are identified), `allowList`, `tls`, or `allowListAndTls`; `trustAnyReplica`
/// and its `warning` say that strangers count (haTrustAnyReplica=true).
fn ha_trust_json(settings: &BrokerSettings) -> Value {
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
    json!({ "mode": mode, "trustAnyReplica": settings.ha_trust_any_replica, "warning": warning })
}

/// An epoch list in `/status`: `[{"epoch", "startOffset"}]`, oldest first.
fn epochs_json(epochs: &[logship_core::autoswitch::EpochEntry]) -> Value {
    epochs.iter().map(|e| json!({ "epoch": e.epoch, "startOffset": e.start_offset })).collect()
}

/// The store's integrity figures in `/status`: forced deletions, the retention floor, the scrub.
fn store_json(store: &logship_store::StoreStatus) -> Value {
    let scrub = &store.scrub;
    json!({
        "forcedDeletedSegments": store.forced_deleted_segments,
        "forcedDeletedBytes": store.forced_deleted_bytes,
        "retentionFloor": store.retention_floor,
        "scrub": {
            "enabled": scrub.enabled,
            "passes": scrub.passes,
            "position": scrub.position,
            "passEnd": scrub.pass_end,
            "bytesVerified": scrub.bytes_verified,
            "damagedRecords": scrub.damaged_records,
            "findings": scrub.findings.iter().map(|f| json!({
                "segment": f.segment.display().to_string(),
                "offset": f.offset,
                "error": f.error,
                "resumedAt": f.resumed_at,
            })).collect::<Vec<_>>(),
        },
    })
}
