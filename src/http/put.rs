//! `POST /topics/{topic}/messages`: put one message (the body is the message body).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use logship::request;
use logship_core::PutStatus;
use serde_json::json;

use super::{busy, error, refused};
use crate::broker::{Broker, Held, MasterPut, ReplicationHandle, put_refusal, put_through_master};
use crate::coordination::Coordination;

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

/// Reads a request body of at most `limit` bytes within `httpBodyTimeout`, holding its bytes
/// against `httpMaxInFlightBytes` and the client's `httpMaxInFlightBytesPerIp` (the hold is
/// returned with the body).
async fn read_body(
    broker: &Broker,
    client: IpAddr,
    headers: &HeaderMap,
    body: Body,
    limit: u64,
) -> Result<(Bytes, Held), Response> {
    let declared =
        headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit) {
        return Err(refused(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body exceeds maxMessageSize={limit}"),
        ));
    }
    let permit = match broker.in_flight.try_reserve(client, declared.unwrap_or(limit)) {
        Ok(permit) => permit,
        Err(which) => {
            // Read (and drop) what the client is sending, briefly, so that the 503 is not lost
            // to a reset when the connection closes with its body unread.
            drain(body, broker.settings.http.body_timeout.min(REFUSED_BODY_DRAIN_TIME), limit).await;
            return Err(busy(which, "request bodies"));
        }
    };
    let timeout = broker.settings.http.body_timeout;
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit as usize)).await {
        Ok(Ok(bytes)) => Ok((bytes, permit)),
        Ok(Err(e)) if is_length_limit(&e) => {
            Err(refused(StatusCode::PAYLOAD_TOO_LARGE, format!("the body exceeds maxMessageSize={limit}")))
        }
        Ok(Err(e)) => Err(refused(StatusCode::BAD_REQUEST, format!("reading the body: {e}"))),
        Err(_) => {
            let mut r = refused(
                StatusCode::REQUEST_TIMEOUT,
                format!("the body was not complete within httpBodyTimeout={}ms", timeout.as_millis()),
            );
            r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
            Err(r)
        }
    }
}

/// How long a refused request's body is read and dropped before the refusal is answered.
const REFUSED_BODY_DRAIN_TIME: std::time::Duration = std::time::Duration::from_millis(500);

/// Reads and drops `body` (at most `limit` bytes) for at most `time`: memory is not held, and
/// the client's pending bytes are consumed before the connection closes.
async fn drain(body: Body, time: std::time::Duration, limit: u64) {
    use http_body_util::BodyExt;
    let mut body = body;
    let mut read = 0u64;
    let _ = tokio::time::timeout(time, async {
        while read <= limit {
            match body.frame().await {
                Some(Ok(frame)) => read += frame.data_ref().map_or(0, |d| d.len() as u64),
                _ => return,
            }
        }
    })
    .await;
}

fn is_length_limit(e: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(s) = source {
        if s.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = s.source();
    }
    false
}

pub async fn put_message(
    State(broker): State<Arc<Broker>>,
    Path(topic): Path<String>,
    Query(query): Query<BTreeMap<String, String>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    if let Some(c) = broker.coordination() {
        if let Some(r) = failover_refusal(&broker, c, &broker.node()) {
            return r;
        }
    }
    if let Some(refusal) = put_refusal(&broker.node()) {
        return refused(StatusCode::SERVICE_UNAVAILABLE, refusal);
    }
    let params =
        match request::parse_put(&topic, &query, &headers, broker.settings.http.default_topic_queue_nums) {
            Ok(p) => p,
            Err(e) => return error(StatusCode::BAD_REQUEST, e.to_string()),
        };
    let (body, _held) = match read_body(
        &broker,
        peer.ip(),
        &headers,
        body,
        u64::from(broker.settings.max_message_size),
    )
    .await
    {
        Ok(b) => b,
        Err(r) => return r,
    };
    let queue_id = params.queue_id;
    let mut message = params.into_message(topic, body);
    message.born_timestamp = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
    message.born_host = peer;
    let (result, role_before) = match put_through_master(&broker, message).await {
        MasterPut::NotMaster(refusal) => return refused(StatusCode::SERVICE_UNAVAILABLE, refusal),
        MasterPut::LeaseLost => {
            return lease_lost(true, "stored locally but not acknowledged: this broker's lease guard closed");
        }
        MasterPut::Done { result, .. } if result.status == PutStatus::LeaseLost => {
            broker.metrics.record_lease_refusal();
            return lease_lost(false, "this broker's etcd lease guard is closed: it cannot acknowledge");
        }
        MasterPut::Done { result, role_before } => (result, role_before),
    };
    let mut body = json!({
        "status": result.status.rocketmq_name(),
        "stored": result.status.is_stored(),
        "queueId": queue_id,
    });
    if result.status == PutStatus::ServiceNotAvailable {
        if let Some(e) = broker.store.write_refusal() {
            body["error"] = json!(e.to_string());
        } else if let Some(fence) = master_fence(&broker).await {
            body["error"] = json!(format!("the master is fenced and refuses puts: {fence}"));
        }
    }
    if let Some(crate::roles::Role::Master { epoch }) = role_before {
        body["epoch"] = json!(epoch);
        body["brokerId"] = json!(broker.roles.as_ref().map(|r| r.broker_id));
    }
    if result.status.is_stored() {
        body["msgId"] = json!(result.msg_id);
        body["offset"] = json!(result.offset);
        body["queueOffset"] = json!(result.queue_offset);
    }
    (put_http_status(result.status), Json(body)).into_response()
}

/// A master whose lease guard is closed ([`PutStatus::LeaseLost`], or
/// [`PutStatus::LeaseLostAfterStore`] with `stored`): 503 `LEASE_LOST`, never `PUT_OK`.
fn lease_lost(stored: bool, why: &str) -> Response {
    let body = json!({ "status": "LEASE_LOST", "stored": stored, "error": why });
    (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
}

/// Automatic failover: a put to a broker that is not master answers 503 `NOT_MASTER` naming
/// the live master (or `null`). (A master whose lease is closed refuses the put itself:
/// [`PutStatus::LeaseLost`], answered 503 `LEASE_LOST`.)
fn failover_refusal(broker: &Broker, c: &Coordination, node: &ReplicationHandle) -> Option<Response> {
    if matches!(node, ReplicationHandle::Master(_)) {
        return None;
    }
    let view = c.view();
    let master = view.as_ref().and_then(|v| {
        let r = v.record.as_ref()?;
        (v.master_live && r.value.master_id != broker.roles.as_ref().map_or(-1, |r| r.broker_id)).then(|| {
            json!({
                "brokerId": r.value.master_id,
                "httpAddress": r.value.master_http_addr.to_string(),
                "epoch": r.value.master_epoch,
            })
        })
    });
    let error = match &master {
        Some(m) => {
            format!("this broker is not the master: put to broker {} at {}", m["brokerId"], m["httpAddress"])
        }
        None => {
            "this broker is not the master, and the group has no live master now (election pending)".into()
        }
    };
    let body = json!({ "status": "NOT_MASTER", "stored": false, "master": master, "error": error });
    Some((StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response())
}

/// The fence a master refuses puts behind, if it is a master and fenced.
async fn master_fence(broker: &Broker) -> Option<String> {
    let ReplicationHandle::Master(master) = broker.node() else { return None };
    master.status().await?.fence.as_ref().map(ToString::to_string)
}
