//! The HTTP API on `listenPort` (axum).
//!
//! | route | what |
//! |---|---|
//! | `POST /topics/{topic}/messages` | put one message (body = message body) |
//! | `GET /topics/{topic}/queues/{queueId}/messages?offset=&max=` | read from a consume queue |
//! | `GET /status` | role, offsets, replication state |
//! | `GET /metrics` | Prometheus text |
//!
//! Put status codes: 200 `PUT_OK`; 504 `FLUSH_SLAVE_TIMEOUT` / `FLUSH_DISK_TIMEOUT` (stored on
//! the master, the wait timed out); 502 `SLAVE_NOT_AVAILABLE` / `IN_SYNC_REPLICAS_NOT_ENOUGH`
//! (stored on the master, no slave could take it in time); 503 `SERVICE_NOT_AVAILABLE` (not
//! stored: a slave, a full disk, or shutting down); 400 for a bad request or
//! `MESSAGE_ILLEGAL` / `PROPERTIES_SIZE_EXCEEDED` (not stored); 500 `UNKNOWN_ERROR`. Every put
//! response carries `status` and `stored`.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::extract::{ConnectInfo, DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use bytes::Bytes;
use logship_core::PutStatus;
use logship_core::driver::{BrokerRole, SlaveLinkState};
use logship_store::{CommitLog, Message};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::config::BrokerSettings;
use crate::metrics::Metrics;

/// The replication side of a running broker.
pub enum Node {
    /// A master.
    Master(logship_tokio::MasterHandle<CommitLog>),
    /// A slave.
    Slave(logship_tokio::SlaveHandle),
}

/// What every handler shares.
pub struct Broker {
    /// Master or slave.
    pub node: Node,
    /// The local store.
    pub store: Arc<CommitLog>,
    /// The settings it runs with.
    pub settings: BrokerSettings,
    /// Metrics.
    pub metrics: Metrics,
    /// The store's end when the broker started (a slave's replicated bytes count from here).
    pub start_offset: u64,
    /// Physical memory, for RocketMQ's suggest-pulling-from-slave hint.
    pub total_memory: u64,
}

/// The router over a shared broker.
pub fn router(broker: Arc<Broker>) -> Router {
    let body_limit = broker.settings.max_message_size as usize + 1;
    Router::new()
        .route("/topics/{topic}/messages", post(put_message))
        .route("/topics/{topic}/queues/{queue_id}/messages", get(get_messages))
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(body_limit))
        .with_state(broker)
}

fn error(code: StatusCode, message: impl Into<String>) -> Response {
    (code, Json(json!({ "error": message.into() }))).into_response()
}

/// The HTTP status for a put outcome.
pub fn put_http_status(status: PutStatus) -> StatusCode {
    match status {
        PutStatus::PutOk => StatusCode::OK,
        PutStatus::FlushSlaveTimeout | PutStatus::FlushDiskTimeout => StatusCode::GATEWAY_TIMEOUT,
        PutStatus::SlaveNotAvailable | PutStatus::InSyncReplicasNotEnough => StatusCode::BAD_GATEWAY,
        PutStatus::ServiceNotAvailable => StatusCode::SERVICE_UNAVAILABLE,
        PutStatus::MessageIllegal | PutStatus::PropertiesSizeExceeded => StatusCode::BAD_REQUEST,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

/// Builds a message from the request: queue id, tags, keys and other properties come from query
/// parameters (`queueId`, `tags`, `keys`, any other name) or headers (`x-queue-id`, `x-tags`,
/// `x-keys`, `x-property-<name>`).
fn message_from_request(
    topic: String,
    query: &BTreeMap<String, String>,
    headers: &HeaderMap,
    peer: SocketAddr,
    body: Bytes,
) -> Result<Message, String> {
    let header = |name: &str| -> Result<Option<String>, String> {
        headers
            .get(name)
            .map(|v| {
                v.to_str().map(str::to_string).map_err(|_| format!("header {name} is not visible ASCII"))
            })
            .transpose()
    };
    let queue_id = match query.get("queueId").cloned().or(header("x-queue-id")?) {
        None => 0,
        Some(q) => q
            .parse::<i32>()
            .ok()
            .filter(|q| *q >= 0)
            .ok_or_else(|| format!("queueId {q:?} is not a queue number"))?,
    };
    if !logship_store::codec::valid_topic(topic.as_bytes()) {
        return Err(format!(
            "topic {topic:?} must be 1 to 127 characters of letters, digits, '%', '|', '-' or '_'"
        ));
    }
    let born = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    let mut message = Message::new(topic, queue_id, body);
    message.born_timestamp = born;
    message.born_host = peer;
    if let Some(tags) = query.get("tags").cloned().or(header("x-tags")?) {
        message = message.with_tags(tags);
    }
    if let Some(keys) = query.get("keys").cloned().or(header("x-keys")?) {
        message = message.with_property("KEYS", keys);
    }
    for (name, value) in headers {
        if let Some(prop) = name.as_str().strip_prefix("x-property-") {
            let value = value.to_str().map_err(|_| format!("header {name} is not visible ASCII"))?;
            message = message.with_property(prop, value);
        }
    }
    for (name, value) in query {
        if !matches!(name.as_str(), "queueId" | "tags" | "keys") {
            message = message.with_property(name.clone(), value.clone());
        }
    }
    Ok(message)
}

async fn put_message(
    State(broker): State<Arc<Broker>>,
    Path(topic): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Node::Master(master) = &broker.node else {
        let body = json!({ "status": "SERVICE_NOT_AVAILABLE", "stored": false, "error": "this broker is a SLAVE: put to its master" });
        return (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response();
    };
    let message = match message_from_request(topic, &query, &headers, peer, body) {
        Ok(m) => m,
        Err(e) => return error(StatusCode::BAD_REQUEST, e),
    };
    let queue_id = message.queue_id;
    let started = Instant::now();
    let result = master.put(message).await;
    broker.metrics.record_put(result.status, started.elapsed().as_secs_f64());
    let mut body = json!({
        "status": result.status.rocketmq_name(),
        "stored": result.status.is_stored(),
        "queueId": queue_id,
    });
    if result.status == PutStatus::ServiceNotAvailable {
        if let Some(e) = broker.store.write_refusal() {
            body["error"] = json!(e.to_string());
        }
    }
    if result.status.is_stored() {
        body["msgId"] = json!(result.msg_id);
        body["offset"] = json!(result.offset);
        body["queueOffset"] = json!(result.queue_offset);
    }
    (put_http_status(result.status), Json(body)).into_response()
}

#[derive(Deserialize)]
struct PullParams {
    offset: Option<u64>,
    max: Option<usize>,
}

/// The most messages one read returns.
const MAX_PULL: usize = 1000;

async fn get_messages(
    State(broker): State<Arc<Broker>>,
    Path((topic, queue_id)): Path<(String, i32)>,
    Query(params): Query<PullParams>,
) -> Response {
    if matches!(broker.node, Node::Slave(_)) && !broker.settings.slave_read_enable {
        return error(
            StatusCode::FORBIDDEN,
            "this broker is a SLAVE and slaveReadEnable is false: read from the master",
        );
    }
    let max = params.max.unwrap_or(32);
    if max == 0 || max > MAX_PULL {
        return error(StatusCode::BAD_REQUEST, format!("max must be between 1 and {MAX_PULL}"));
    }
    let (min_queue, max_queue) = broker.store.queue_bounds(&topic, queue_id);
    let offset = params.offset.unwrap_or(min_queue);
    let store = broker.store.clone();
    let read =
        tokio::task::spawn_blocking(move || store.read_queue_messages(&topic, queue_id, offset, max)).await;
    let messages = match read {
        Ok(Ok(m)) => m,
        Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, format!("reading the queue: {e}")),
        Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, format!("reading the queue: {e}")),
    };
    let pulled_end = messages.last().map(|m| m.physical_offset as u64 + u64::from(m.total_size));
    let backlog = pulled_end.map_or(0, |end| broker.store.max_offset().saturating_sub(end));
    let memory_limit =
        broker.total_memory / 100 * u64::from(broker.settings.access_message_in_memory_max_ratio);
    let next = messages.last().map_or(offset.max(min_queue), |m| m.queue_offset as u64 + 1);
    let list: Vec<Value> = messages
        .iter()
        .map(|m| {
            let (body, encoding) = match std::str::from_utf8(&m.body) {
                Ok(text) => (text.to_string(), "utf8"),
                Err(_) => (base64::engine::general_purpose::STANDARD.encode(&m.body), "base64"),
            };
            json!({
                "queueOffset": m.queue_offset,
                "physicalOffset": m.physical_offset,
                "msgId": m.msg_id(),
                "tags": m.tags(),
                "properties": m.properties.iter().cloned().collect::<BTreeMap<_, _>>(),
                "body": body,
                "bodyEncoding": encoding,
                "bornTimestamp": m.born_timestamp,
                "storeTimestamp": m.store_timestamp,
            })
        })
        .collect();
    Json(json!({
        "messages": list,
        "nextOffset": next,
        "minOffset": min_queue,
        "maxOffset": max_queue,
        "suggestPullingFromSlave": backlog > memory_limit,
    }))
    .into_response()
}

async fn status(State(broker): State<Arc<Broker>>) -> Response {
    match status_json(&broker).await {
        Some(v) => Json(v).into_response(),
        None => error(StatusCode::SERVICE_UNAVAILABLE, "the replication service has stopped"),
    }
}

/// The `/status` document.
pub async fn status_json(broker: &Broker) -> Option<Value> {
    let store = broker.store.status();
    let gap = broker.settings.ha_max_gap_not_in_sync;
    match &broker.node {
        Node::Master(master) => {
            let s = master.status().await?;
            broker.metrics.observe_master(&s, store.disk_used_ratio);
            let slaves: Vec<Value> = s
                .slaves
                .iter()
                .map(|l| {
                    json!({
                        "address": l.address.to_string(),
                        "ackOffset": l.ack,
                        "lagBytes": l.lag_bytes,
                        "lagSeconds": l.lag.as_secs_f64(),
                        "inSync": l.in_sync,
                        "connectedSeconds": l.connected_for.as_secs_f64(),
                    })
                })
                .collect();
            Some(json!({
                "role": s.role.rocketmq_name(),
                "minOffset": s.min_offset,
                "maxOffset": s.max_offset,
                "flushedOffset": s.flushed_offset,
                "replicatedOffset": s.replicated_offset,
                "slaves": slaves,
                "bytesReplicated": s.bytes_replicated,
                "fence": s.fence.as_ref().map(ToString::to_string),
                "diskUsedRatio": store.disk_used_ratio,
                "writeRefused": store.write_refused,
                "store": store_json(&store),
            }))
        }
        Node::Slave(slave) => {
            let s = slave.status().await?;
            let in_sync =
                s.state == SlaveLinkState::Streaming && s.lag_bytes < gap && s.append_error.is_none();
            broker.metrics.observe_slave(
                &s,
                store.min_offset,
                broker.start_offset,
                in_sync,
                store.disk_used_ratio,
            );
            let state = match s.state {
                SlaveLinkState::Disconnected => "DISCONNECTED",
                SlaveLinkState::Connecting => "CONNECTING",
                SlaveLinkState::Streaming => "STREAMING",
            };
            Some(json!({
                "role": BrokerRole::Slave.rocketmq_name(),
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

async fn metrics(State(broker): State<Arc<Broker>>) -> Response {
    // Refresh the replication gauges from the live status.
    let _ = status_json(&broker).await;
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        broker.metrics.render(),
    )
        .into_response()
}

/// Physical memory in bytes (Linux `/proc/meminfo`), or 8 GiB if it cannot be read.
pub fn total_memory() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kib * 1024)
        })
        .unwrap_or(8 << 30)
}
