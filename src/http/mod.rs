//! The HTTP API on `listenAddress:listenPort` (axum over hyper; the accept loop, timeouts and
//! connection limits are in `server`), one file a route: `put`, `pull`, `status`, `metrics` and
//! `admin` (`/ha/*`).
//!
//! | route | what |
//! |---|---|
//! | `POST /topics/{topic}/messages` | put one message (body = message body) |
//! | `GET /topics/{topic}/queues/{queueId}/messages?offset=&max=&decompress=` | read from a consume queue |
//! | `GET /` | the status page (`status_page`) |
//! | `GET /status` | role, offsets, replication state |
//! | `GET /metrics` | Prometheus text |
//! | `POST /ha/changeToMaster` | controller mode: become master at an epoch (`roles`) |
//! | `POST /ha/changeToSlave` | controller mode: follow a master at an epoch (`roles`) |
//! | `POST /ha/setSyncStateSet` | controller mode, on a master: apply a sync-state-set at an epoch |
//! | `POST /ha/forgetReplica` | on a master: stop expecting a replica that is away (`{"replica": NAME}`) |
//!
//! The admin calls (`/ha/*`) need `httpAuthToken` configured (403 without one: anybody who
//! reaches the port could otherwise demote a master) and answer 409 for an epoch that cannot
//! work, 400 for a bad body.
//!
//! With `httpAuthToken` set, every route answers 401 unless the request carries
//! `Authorization: Bearer <token>`. HTTPS and client certificates (`httpTls*`) are set up in
//! `server`, below the router.
//!
//! Put status codes: 200 `PUT_OK`; 504 `FLUSH_SLAVE_TIMEOUT` / `FLUSH_DISK_TIMEOUT` (stored on
//! the master, the wait timed out); 502 `SLAVE_NOT_AVAILABLE` / `IN_SYNC_REPLICAS_NOT_ENOUGH`
//! (stored on the master, no slave could take it in time); 503 `SERVICE_NOT_AVAILABLE` (not
//! stored: a slave, a full disk, a fenced master, shutting down, or `httpMaxInFlightBytes` in
//! use; `error` gives the disk's or the fence's reason); 400 for a bad
//! request or `MESSAGE_ILLEGAL` / `PROPERTIES_SIZE_EXCEEDED` (not stored); 408 for a body not
//! complete within `httpBodyTimeout`; 413 for a body above `maxMessageSize`; 500 `UNKNOWN_ERROR`.
//! Every put response carries `status` and `stored`.
//!
//! Pull statuses (RocketMQ's `GetMessageStatus`): 200 `FOUND`, 200 `OFFSET_OVERFLOW_ONE` (the
//! offset is the queue's end: nothing new yet), 200 `NO_MESSAGE_IN_QUEUE` (an empty queue read
//! at 0); 416 `OFFSET_TOO_SMALL` (below the queue's minimum), `OFFSET_OVERFLOW_BADLY` (beyond its
//! end) and `NO_MESSAGE_IN_QUEUE` at another offset. Every pull answer carries `status`,
//! `nextOffset` (where to read next), `minOffset` and `maxOffset`.
//!
//! Each pulled message says `compressed` (its sysFlag's bit 0: a Java producer compresses
//! bodies above 4 KiB) and then `compression` (`zlib`, `lz4` or `zstd`); its body is served as
//! stored. With `decompress=true` a zlib body is served as the producer sent it
//! (`decompressed: true`), up to 4 × `maxMessageSize`; one that cannot be is served as stored,
//! with `decompressError` saying why.

mod admin;
mod metrics;
mod pull;
mod put;
mod status;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use logship::request;
use serde_json::json;

use crate::broker::Busy;
// For the remoting port, which takes the shared state and the put path from here: they are
// `crate::broker`'s.
pub use crate::broker::{Broker, MasterPut, ReplicationHandle, failover_put_refusal, put_through_master};

/// The router over a shared broker.
pub fn router(broker: Arc<Broker>) -> Router {
    Router::new()
        .route("/topics/{topic}/messages", post(put::put_message))
        .route("/topics/{topic}/queues/{queue_id}/messages", get(pull::get_messages))
        .route("/status", get(status::status))
        .route("/metrics", get(metrics::metrics))
        .route("/ha/changeToMaster", post(admin::change_to_master))
        .route("/ha/changeToSlave", post(admin::change_to_slave))
        .route("/ha/setSyncStateSet", post(admin::set_sync_state_set))
        .route("/ha/forgetReplica", post(admin::forget_replica))
        .layer(axum::middleware::from_fn_with_state(broker.clone(), authenticate))
        // The status page is static and holds no data: it asks `/status`, with the token.
        .route("/", get(crate::status_page::page))
        .with_state(broker)
}

/// With `httpAuthToken` set, answers 401 to a request without that bearer token (every route
/// but the static status page at `/`).
async fn authenticate(State(broker): State<Arc<Broker>>, request: Request, next: Next) -> Response {
    let Some(token) = &broker.settings.http.auth_token else {
        return next.run(request).await;
    };
    let given = request.headers().get(header::AUTHORIZATION).map(HeaderValue::as_bytes);
    if request::authorized(given, token.as_bytes()) {
        return next.run(request).await;
    }
    let reason = if given.is_some() {
        "the bearer token is wrong"
    } else {
        "send Authorization: Bearer <httpAuthToken>"
    };
    let mut response = error(StatusCode::UNAUTHORIZED, reason);
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer realm=\"logship\""));
    response
}

/// An error answer: `{"error": message}`.
pub fn error(code: StatusCode, message: impl Into<String>) -> Response {
    (code, Json(json!({ "error": message.into() }))).into_response()
}

/// A put refused before it reached the store.
pub fn refused(code: StatusCode, message: impl Into<String>) -> Response {
    let body = json!({ "status": "SERVICE_NOT_AVAILABLE", "stored": false, "error": message.into() });
    (code, Json(body)).into_response()
}

/// The 503 answer saying which budget is full.
pub fn busy(which: Busy, what: &str) -> Response {
    let message = match which {
        Busy::Broker => {
            format!("the broker is busy: httpMaxInFlightBytes of {what} are in flight; retry later")
        }
        Busy::Client => format!(
            "this client holds httpMaxInFlightBytesPerIp of {what} in flight: finish or close those \
             requests, or retry later"
        ),
    };
    let mut r = refused(StatusCode::SERVICE_UNAVAILABLE, message);
    r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}
