//! The HTTP API on `listenAddress:listenPort` (axum over hyper; the accept loop, timeouts and
//! connection limits are in `server`).
//!
//! | route | what |
//! |---|---|
//! | `POST /topics/{topic}/messages` | put one message (body = message body) |
//! | `GET /topics/{topic}/queues/{queueId}/messages?offset=&max=` | read from a consume queue |
//! | `GET /` | the status page (`status_page`) |
//! | `GET /status` | role, offsets, replication state |
//! | `GET /metrics` | Prometheus text |
//! | `POST /ha/changeToMaster` | controller mode: become master at an epoch (`roles`) |
//! | `POST /ha/changeToSlave` | controller mode: follow a master at an epoch (`roles`) |
//! | `POST /ha/setSyncStateSet` | controller mode, on a master: apply a sync-state-set at an epoch |
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
//! stored: a slave, a full disk, shutting down, or `httpMaxInFlightBytes` in use); 400 for a bad
//! request or `MESSAGE_ILLEGAL` / `PROPERTIES_SIZE_EXCEEDED` (not stored); 408 for a body not
//! complete within `httpBodyTimeout`; 413 for a body above `maxMessageSize`; 500 `UNKNOWN_ERROR`.
//! Every put response carries `status` and `stored`.
//!
//! Pull statuses (RocketMQ's `GetMessageStatus`): 200 `FOUND`, 200 `OFFSET_OVERFLOW_ONE` (the
//! offset is the queue's end: nothing new yet), 200 `NO_MESSAGE_IN_QUEUE` (an empty queue read
//! at 0); 416 `OFFSET_TOO_SMALL` (below the queue's minimum), `OFFSET_OVERFLOW_BADLY` (beyond its
//! end) and `NO_MESSAGE_IN_QUEUE` at another offset. Every pull answer carries `status`,
//! `nextOffset` (where to read next), `minOffset` and `maxOffset`.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine;
use bytes::Bytes;
use logship::request;
use logship_core::BrokerRole;
use logship_core::PutStatus;
use logship_core::SlaveState;
use logship_store::{CommitLog, StoreError, StoredMessage};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::config::{BrokerSettings, MAX_PULL_COUNT};
use crate::metrics::Metrics;

/// The replication side of a running broker: a handle handlers clone out of the broker.
#[derive(Clone)]
pub enum Node {
    /// A master.
    Master(logship_tokio::MasterHandle<CommitLog>),
    /// A slave.
    Slave(logship_tokio::SlaveHandle),
    /// Controller mode: no HA role yet, or between two roles.
    Unassigned,
}

/// What every handler shares.
pub struct Broker {
    /// Master, slave or (controller mode) no role; swapped by a role change.
    pub node: std::sync::Mutex<Node>,
    /// Controller mode's roles; `None`: the classic protocol, whose role never changes.
    pub roles: Option<crate::roles::Roles>,
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
    /// `httpMaxInFlightBytes`: one permit per body byte held in memory.
    pub in_flight: InFlight,
    /// Automatic failover on etcd (`etcdEndpoints`): the lease every `PUT_OK` is checked
    /// against, and the group as last read; `None`: roles come from the admin calls.
    pub coordination: Option<Arc<crate::roles::Coordination>>,
    /// The remoting port and the NameServer registrations, once started.
    pub remoting: std::sync::OnceLock<Arc<crate::remoting::RemotingState>>,
}

impl Broker {
    /// The replication side now (a clone of its handle).
    pub fn node(&self) -> Node {
        self.node.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Installs `node`; returns the one it replaces.
    pub fn set_node(&self, node: Node) -> Node {
        std::mem::replace(&mut *self.node.lock().unwrap_or_else(|e| e.into_inner()), node)
    }

    /// Automatic failover's state while it decides this broker's role: `None` without
    /// `etcdEndpoints`, and after an admin call with `overrideCoordinator` took the role over.
    pub fn coordination(&self) -> Option<&Arc<crate::roles::Coordination>> {
        self.coordination.as_ref().filter(|c| !c.is_detached())
    }
}

/// The budget of request and response body bytes held at once: `httpMaxInFlightBytes` in
/// all, and `httpMaxInFlightBytesPerIp` per client IP, so that one client's stalled bodies
/// cannot take the budget every other client needs.
pub struct InFlight {
    permits: Arc<Semaphore>,
    total: u64,
    /// The per-client budget (0: none).
    per_client: u64,
    clients: Arc<std::sync::Mutex<std::collections::HashMap<IpAddr, u64>>>,
}

/// Why a reservation was refused.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Busy {
    /// The broker's whole budget is in use.
    Broker,
    /// This client's share is in use.
    Client,
}

impl Busy {
    /// The 503 answer saying which budget is full.
    fn response(self, what: &str) -> Response {
        let message = match self {
            Self::Broker => {
                format!("the broker is busy: httpMaxInFlightBytes of {what} are in flight; retry later")
            }
            Self::Client => format!(
                "this client holds httpMaxInFlightBytesPerIp of {what} in flight: finish or close those \
                 requests, or retry later"
            ),
        };
        let mut r = refused(StatusCode::SERVICE_UNAVAILABLE, message);
        r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
        r
    }
}

/// Bytes held against the budget, given back on drop: the broker's permits and the client's
/// share.
pub struct Held {
    _share: Option<ClientShare>,
    _permit: OwnedSemaphorePermit,
}

/// A client's bytes in the per-client ledger, given back on drop.
struct ClientShare {
    ip: IpAddr,
    bytes: u64,
    clients: Arc<std::sync::Mutex<std::collections::HashMap<IpAddr, u64>>>,
}

impl Drop for ClientShare {
    fn drop(&mut self) {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(held) = clients.get_mut(&self.ip) {
            *held = held.saturating_sub(self.bytes);
            if *held == 0 {
                clients.remove(&self.ip);
            }
        }
    }
}

impl InFlight {
    /// A budget of `total` bytes, at most `per_client` of them (0: no limit) per client IP.
    pub fn new(total: u64, per_client: u64) -> Self {
        let total = total.min(Semaphore::MAX_PERMITS as u64);
        Self {
            permits: Arc::new(Semaphore::new(total as usize)),
            total,
            per_client: per_client.min(total),
            clients: Arc::default(),
        }
    }

    /// Reserves `bytes` for `client` now, or says which budget is full. A reservation takes at
    /// most the whole budget and the client's whole share, so that one request larger than
    /// either still runs, alone.
    fn try_reserve(&self, client: IpAddr, bytes: u64) -> Result<Held, Busy> {
        let mut bytes = bytes.min(self.total);
        let share = if self.per_client > 0 {
            bytes = bytes.min(self.per_client);
            let ip = client.to_canonical();
            let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
            let held = clients.entry(ip).or_default();
            if *held + bytes > self.per_client {
                if *held == 0 {
                    clients.remove(&ip);
                }
                return Err(Busy::Client);
            }
            *held += bytes;
            Some(ClientShare { ip, bytes, clients: Arc::clone(&self.clients) })
        } else {
            None
        };
        let n = u32::try_from(bytes).unwrap_or(u32::MAX);
        // On failure the share is dropped, and so given back.
        let permit = Arc::clone(&self.permits).try_acquire_many_owned(n).map_err(|_| Busy::Broker)?;
        Ok(Held { _share: share, _permit: permit })
    }
}

/// The router over a shared broker.
pub fn router(broker: Arc<Broker>) -> Router {
    Router::new()
        .route("/topics/{topic}/messages", post(put_message))
        .route("/topics/{topic}/queues/{queue_id}/messages", get(get_messages))
        .route("/status", get(status))
        .route("/metrics", get(metrics))
        .route("/ha/changeToMaster", post(change_to_master))
        .route("/ha/changeToSlave", post(change_to_slave))
        .route("/ha/setSyncStateSet", post(set_sync_state_set))
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

fn error(code: StatusCode, message: impl Into<String>) -> Response {
    (code, Json(json!({ "error": message.into() }))).into_response()
}

/// A put refused before it reached the store.
fn refused(code: StatusCode, message: impl Into<String>) -> Response {
    let body = json!({ "status": "SERVICE_NOT_AVAILABLE", "stored": false, "error": message.into() });
    (code, Json(body)).into_response()
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
        Err(busy) => {
            // Read (and drop) what the client is sending, briefly, so that the 503 is not lost
            // to a reset when the connection closes with its body unread.
            drain(body, broker.settings.http.body_timeout.min(REFUSED_BODY_DRAIN_TIME), limit).await;
            return Err(busy.response("request bodies"));
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

async fn put_message(
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

/// How a put through this broker's master service ended.
pub enum MasterPut {
    /// Not tried: this broker is not a master now (why, for the answer).
    NotMaster(&'static str),
    /// Stored, but the failover lease guard closed (or the role changed) under it: it must
    /// not be acknowledged.
    LeaseLost,
    /// The service's result, and the controller-mode role the put started under.
    Done {
        /// The put's result.
        result: logship_core::PutResult,
        /// The role before the put (controller mode), for the epoch the answer names.
        role_before: Option<crate::roles::Role>,
    },
}

/// The put path every way in to the broker shares (the HTTP API and the remoting port): the
/// current master service's put (append, then the flush and replication waits the role asks
/// for), fenced by the failover lease right before success is reported, and counted in the
/// metrics. The callers check their own refusals first (the lease guard, the role).
pub async fn put_through_master(broker: &Broker, message: logship_store::Message) -> MasterPut {
    // A role change may stop this service under the put: its shutdown answers the put (the
    // replication wait ends by its deadline, a put past the closed gate is refused). The role
    // is read before the node: a PUT_OK names the epoch only if the role is the same after.
    let role_before = broker.roles.as_ref().map(|r| r.current());
    let node = broker.node();
    let Node::Master(master) = &node else {
        return MasterPut::NotMaster(put_refusal(&node).unwrap_or_default());
    };
    let started = Instant::now();
    let result = master.put(message).await;
    broker.metrics.record_put(result.status, started.elapsed().as_secs_f64());
    if result.status == PutStatus::PutOk {
        // Fencing: checked right before PUT_OK is answered.
        let role_after = broker.roles.as_ref().map(|r| r.current());
        if let Some(c) = broker.coordination() {
            if !c.lease_open() || role_after != role_before {
                return MasterPut::LeaseLost;
            }
        }
    }
    MasterPut::Done { result, role_before }
}

/// Why a put must not start now on a broker with automatic failover: its lease guard is
/// closed (a master), or it is not the master (`None`: it may put).
pub fn failover_put_refusal(broker: &Broker) -> Option<String> {
    let c = broker.coordination()?;
    if matches!(broker.node(), Node::Master(_)) {
        if c.lease_open() {
            return None;
        }
        broker.metrics.record_lease_refusal();
        return Some("this broker's etcd lease guard is closed: it cannot acknowledge".into());
    }
    Some("this broker is not the master (automatic failover): send to the group's master".into())
}

/// A master whose lease guard is closed: 503 `LEASE_LOST`, never `PUT_OK`.
fn lease_lost(stored: bool, why: &str) -> Response {
    let body = json!({ "status": "LEASE_LOST", "stored": stored, "error": why });
    (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
}

/// Automatic failover: a put to a broker that is not master answers 503 `NOT_MASTER` naming
/// the live master (or `null`); a master with a closed guard answers 503 `LEASE_LOST`.
fn failover_refusal(broker: &Broker, c: &crate::roles::Coordination, node: &Node) -> Option<Response> {
    if matches!(node, Node::Master(_)) {
        if c.lease_open() {
            return None;
        }
        broker.metrics.record_lease_refusal();
        return Some(lease_lost(false, "this broker's etcd lease guard is closed: it cannot acknowledge"));
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

/// Why a broker in this role refuses puts; `None` for a master.
pub fn put_refusal(node: &Node) -> Option<&'static str> {
    match node {
        Node::Master(_) => None,
        Node::Slave(_) => Some("this broker is a SLAVE: put to its master"),
        Node::Unassigned => Some(
            "controller mode: this broker has no HA role yet (or is changing roles): promote it with \
             POST /ha/changeToMaster, or put to its master",
        ),
    }
}

#[derive(Deserialize)]
struct PullParams {
    offset: Option<u64>,
    max: Option<usize>,
}

/// RocketMQ's `GetMessageStatus` for a pull at `offset` of a queue holding `[min, max)`, the
/// offset to read next, and whether the offset was legal (RocketMQ answers an illegal one
/// `PULL_OFFSET_MOVED`).
fn pull_status(offset: u64, min: u64, max: u64) -> (&'static str, u64, bool) {
    if max == 0 {
        ("NO_MESSAGE_IN_QUEUE", 0, offset == 0)
    } else if offset < min {
        ("OFFSET_TOO_SMALL", min, false)
    } else if offset == max {
        ("OFFSET_OVERFLOW_ONE", offset, true)
    } else if offset > max {
        ("OFFSET_OVERFLOW_BADLY", max, false)
    } else {
        ("FOUND", offset, true)
    }
}

/// Memory one pull may use per message byte it returns: the message read from the log, its
/// body as a JSON string (base64 is 4/3 of it) and the serialized response.
const PULL_MEMORY_PER_BYTE: u64 = 4;

/// What one pull read: its messages, and the reservation of `httpMaxInFlightBytes` that covers
/// building and sending them.
struct Pulled {
    messages: Vec<StoredMessage>,
    /// Messages that failed their checks (a flipped byte, a bad CRC): queue offset, physical
    /// offset and why. The good messages around them are still served.
    bad: Vec<(u64, u64, String)>,
    permit: Held,
}

/// The messages of one pull: at most `count` entries from `offset`, stopping before the one that
/// would take the bytes past `max_bytes` (the first message is always taken, as RocketMQ does).
/// Their memory is reserved (for `client`) before they are read; `Ok(Err(busy))` if the budget
/// has no room now.
fn read_capped(
    broker: &Broker,
    client: IpAddr,
    topic: &str,
    queue_id: i32,
    offset: u64,
    count: usize,
    max_bytes: u64,
) -> Result<Result<Pulled, Busy>, StoreError> {
    let entries = broker.store.read_queue(topic, queue_id, offset, count)?;
    let mut bytes = 0u64;
    let mut taken = Vec::new();
    for e in entries {
        if !taken.is_empty() && bytes + u64::from(e.size) > max_bytes {
            break;
        }
        bytes += u64::from(e.size);
        taken.push(e);
    }
    let permit = match broker.in_flight.try_reserve(client, bytes * PULL_MEMORY_PER_BYTE + (64 << 10)) {
        Ok(permit) => permit,
        Err(busy) => return Ok(Err(busy)),
    };
    let (mut messages, mut bad) = (Vec::with_capacity(taken.len()), Vec::new());
    for e in &taken {
        match broker.store.read_message(e.physical_offset) {
            Ok(m) => messages.push(m),
            Err(error @ (StoreError::Corrupt { .. } | StoreError::NotAMessage { .. })) => {
                tracing::error!(%error, topic, queue_id, queue_offset = e.queue_offset, "a pull skips a damaged message");
                bad.push((e.queue_offset, e.physical_offset, error.to_string()));
            }
            Err(other) => return Err(other),
        }
    }
    Ok(Ok(Pulled { messages, bad, permit }))
}

async fn get_messages(
    State(broker): State<Arc<Broker>>,
    Path((topic, queue_id)): Path<(String, i32)>,
    Query(params): Query<PullParams>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    match broker.node() {
        Node::Slave(_) if !broker.settings.slave_read_enable => {
            return error(
                StatusCode::FORBIDDEN,
                "this broker is a SLAVE and slaveReadEnable is false: read from the master",
            );
        }
        Node::Unassigned if !broker.settings.slave_read_enable => {
            return error(
                StatusCode::FORBIDDEN,
                "controller mode: this broker has no HA role yet and slaveReadEnable is false: read from \
                 the master",
            );
        }
        _ => {}
    }
    let http = &broker.settings.http;
    if let Err(e) = request::check_queue_id(queue_id, http.default_topic_queue_nums) {
        return error(StatusCode::BAD_REQUEST, e.to_string());
    }
    let max = params.max.unwrap_or(32);
    if max == 0 || max > MAX_PULL_COUNT {
        return error(StatusCode::BAD_REQUEST, format!("max must be between 1 and {MAX_PULL_COUNT}"));
    }
    let (min_queue, max_queue) = broker.store.queue_bounds(&topic, queue_id);
    let offset = params.offset.unwrap_or(min_queue);
    let (mut status, mut next, mut legal) = pull_status(offset, min_queue, max_queue);
    let mut messages = Vec::new();
    let mut bad = Vec::new();
    let mut permit = None;
    if status == "FOUND" {
        let (count, max_bytes) = (max.min(http.max_transfer_count), http.max_transfer_bytes);
        let (reader, topic) = (broker.clone(), topic.clone());
        let read = tokio::task::spawn_blocking(move || {
            read_capped(&reader, peer.ip(), &topic, queue_id, offset, count, max_bytes)
        })
        .await;
        match read {
            Ok(Ok(Ok(pulled))) => {
                messages = pulled.messages;
                bad = pulled.bad;
                permit = Some(pulled.permit);
            }
            Ok(Ok(Err(busy))) => return busy.response("bodies"),
            Ok(Err(StoreError::QueueOffsetOutOfRange { min, max, .. })) => {
                // Retention moved the queue between the bounds and the read.
                (status, next, legal) = pull_status(offset, min, max);
            }
            Ok(Err(e)) => return error(StatusCode::INTERNAL_SERVER_ERROR, format!("reading the queue: {e}")),
            Err(e) => return error(StatusCode::INTERNAL_SERVER_ERROR, format!("reading the queue: {e}")),
        }
        let last_good = messages.last().map(|m| m.queue_offset as u64);
        let last_bad = bad.last().map(|(queue_offset, _, _)| *queue_offset);
        if let Some(last) = last_good.max(last_bad) {
            next = last + 1;
        }
    }
    let pulled_end = messages.last().map(|m| m.physical_offset as u64 + u64::from(m.total_size));
    let backlog = pulled_end.map_or(0, |end| broker.store.max_offset().saturating_sub(end));
    let memory_limit =
        broker.total_memory / 100 * u64::from(broker.settings.access_message_in_memory_max_ratio);
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
    drop(messages);
    let doc = json!({
        "status": status,
        "messages": list,
        "nextOffset": next,
        "badMessages": bad
            .iter()
            .map(|(queue_offset, physical_offset, error)| json!({
                "queueOffset": queue_offset,
                "physicalOffset": physical_offset,
                "error": error,
            }))
            .collect::<Vec<_>>(),
        "minOffset": min_queue,
        "maxOffset": max_queue,
        "suggestPullingFromSlave": backlog > memory_limit,
    });
    drop(list);
    let bytes = Bytes::from(serde_json::to_vec(&doc).expect("JSON values serialize"));
    drop(doc);
    // A pull without messages reserves its (small) answer now.
    let permit = match permit {
        Some(permit) => permit,
        None => match broker.in_flight.try_reserve(peer.ip(), bytes.len() as u64) {
            Ok(permit) => permit,
            Err(busy) => return busy.response("bodies"),
        },
    };
    let code = if legal { StatusCode::OK } else { StatusCode::RANGE_NOT_SATISFIABLE };
    let body = Body::new(HeldBody { bytes: Some(bytes), _permit: permit });
    (code, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A response body that holds its bytes against `httpMaxInFlightBytes` until hyper has taken
/// them and asks for more (or drops the body).
struct HeldBody {
    bytes: Option<Bytes>,
    _permit: Held,
}

impl http_body::Body for HeldBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        std::task::Poll::Ready(self.bytes.take().map(|b| Ok(http_body::Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.bytes.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.bytes.as_ref().map_or(0, |b| b.len() as u64))
    }
}

async fn status(State(broker): State<Arc<Broker>>) -> Response {
    match status_json(&broker).await {
        Some(v) => Json(v).into_response(),
        None => error(StatusCode::SERVICE_UNAVAILABLE, "the replication service has stopped"),
    }
}

/// The `/status` document; with automatic failover, `group` too.
pub async fn status_json(broker: &Broker) -> Option<Value> {
    let mut v = node_status_json(broker).await?;
    if let Some(remoting) = broker.remoting.get() {
        v["remoting"] = remoting.json();
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
pub fn group_json(c: &crate::roles::Coordination) -> Value {
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
            broker.metrics.observe_master(&s, store.disk_used_ratio);
            let live: Vec<SocketAddr> = s.slaves.iter().map(|l| l.address).collect();
            let slaves: Vec<Value> = s
                .slaves
                .iter()
                .map(|l| {
                    json!({
                        "name": broker.metrics.replica_name(l.address, &live).0,
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
                "absentReplicas": crate::status_cmd::absent_json(&broker.metrics.absent_replicas(&live)),
                "replicasExpected": broker.metrics.replicas_expected(),
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
fn ha_trust_json(settings: &crate::config::BrokerSettings) -> Value {
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

/// The most bytes an admin call's body may hold.
const ADMIN_BODY_LIMIT: usize = 4096;

/// Reads an admin call's JSON body as `T`; a typed 400 answer when it is not one.
async fn admin_request<T: serde::de::DeserializeOwned>(broker: &Broker, body: Body) -> Result<T, Response> {
    if broker.settings.http.auth_token.is_none() {
        return Err(error(
            StatusCode::FORBIDDEN,
            "role-changing calls need httpAuthToken (or httpAuthTokenFile): without one anybody who reaches \
             the HTTP port could change this broker's role",
        ));
    }
    if broker.roles.is_none() {
        return Err(error(StatusCode::CONFLICT, crate::roles::RoleError::NotControllerMode.to_string()));
    }
    let read =
        tokio::time::timeout(broker.settings.http.body_timeout, axum::body::to_bytes(body, ADMIN_BODY_LIMIT));
    let bytes = match read.await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            return Err(error(
                StatusCode::BAD_REQUEST,
                format!("reading the body (at most {ADMIN_BODY_LIMIT} bytes): {e}"),
            ));
        }
        Err(_) => {
            return Err(error(
                StatusCode::REQUEST_TIMEOUT,
                "the body was not complete within httpBodyTimeout",
            ));
        }
    };
    serde_json::from_slice(&bytes)
        .map_err(|e| error(StatusCode::BAD_REQUEST, format!("the body is not the expected JSON: {e}")))
}

/// With automatic failover on, an admin call is refused (409) unless it says
/// `"overrideCoordinator": true`; then the broker leaves automatic failover (its coordinator
/// loop stops and resigns its lease, and puts are no longer checked against a lease) until it
/// restarts, and the call goes ahead.
async fn coordinator_gate(broker: &Broker, override_coordinator: bool) -> Result<(), Response> {
    let Some(c) = broker.coordination() else { return Ok(()) };
    if !override_coordinator {
        return Err(error(
            StatusCode::CONFLICT,
            "automatic failover is on (etcdEndpoints): the etcd coordinator owns this broker's role. To take \
             it over by hand (etcd lost for good), send \"overrideCoordinator\": true: the broker then \
             leaves automatic failover until it restarts",
        ));
    }
    tracing::warn!(
        "overrideCoordinator: an admin call takes this broker's role over; it leaves automatic failover \
         (no lease, no election) until it restarts"
    );
    if !c.detach().await {
        return Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the etcd coordinator did not stop in time; retry the call",
        ));
    }
    Ok(())
}

/// The answer to a role change.
fn role_answer(result: Result<crate::roles::Role, crate::roles::RoleError>) -> Response {
    use crate::roles::RoleError;
    match result {
        Ok(role) => Json(role.json()).into_response(),
        Err(e) => {
            let code = match &e {
                RoleError::NotControllerMode
                | RoleError::PromoteEpochNotAbove { .. }
                | RoleError::FollowEpochBehind { .. }
                | RoleError::EpochTaken { .. }
                | RoleError::EpochExhausted { .. }
                | RoleError::EpochSkips { .. }
                | RoleError::EpochHeldByAnother { .. } => StatusCode::CONFLICT,
                RoleError::BadRequest(_) | RoleError::OwnHaPort { .. } => StatusCode::BAD_REQUEST,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            error(code, e.to_string())
        }
    }
}

/// `POST /ha/changeToMaster` `{"epoch": E, "syncStateSet": [ids], "syncStateSetEpoch": N}`.
async fn change_to_master(State(broker): State<Arc<Broker>>, body: Body) -> Response {
    let request: crate::roles::PromoteRequest = match admin_request(&broker, body).await {
        Ok(request) => request,
        Err(r) => return r,
    };
    if let Err(r) = coordinator_gate(&broker, request.override_coordinator).await {
        return r;
    }
    role_answer(crate::roles::promote(&broker, request).await)
}

/// `POST /ha/changeToSlave` `{"masterAddress": "host:port", "masterBrokerId": M, "epoch": E}`.
async fn change_to_slave(State(broker): State<Arc<Broker>>, body: Body) -> Response {
    let request: crate::roles::FollowRequest = match admin_request(&broker, body).await {
        Ok(request) => request,
        Err(r) => return r,
    };
    if let Err(r) = coordinator_gate(&broker, request.override_coordinator).await {
        return r;
    }
    role_answer(crate::roles::follow(&broker, request).await)
}

/// `POST /ha/setSyncStateSet`.
#[derive(Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SetSyncStateSetRequest {
    /// The members; the master must be one.
    sync_state_set: std::collections::BTreeSet<logship_core::autoswitch::BrokerId>,
    /// The epoch of the set: the one in force plus one (the set in force given again is
    /// accepted at its own epoch).
    sync_state_set_epoch: i32,
    /// Skip ahead of the next set epoch.
    #[serde(default)]
    force: bool,
    /// With automatic failover on etcd: see [`coordinator_gate`].
    #[serde(default)]
    override_coordinator: bool,
}

/// `POST /ha/setSyncStateSet` `{"syncStateSet": [ids], "syncStateSetEpoch": N}`: a master
/// applies a sync-state-set decided outside, as RocketMQ's controller (or its test harness's
/// `setSyncStateSet`) tells it. 400 for a set without this master, a negative id or epoch, or
/// a broker added that is not connected to this master (as RocketMQ's controller refuses a
/// broker it does not see alive); 409 for a stale epoch, an epoch skipping ahead without
/// `force`, `i32::MAX`, or a broker that is not a controller-mode master.
async fn set_sync_state_set(State(broker): State<Arc<Broker>>, body: Body) -> Response {
    use logship_core::service::SyncStateSetError as E;
    let request: SetSyncStateSetRequest = match admin_request(&broker, body).await {
        Ok(request) => request,
        Err(r) => return r,
    };
    if let Err(r) = coordinator_gate(&broker, request.override_coordinator).await {
        return r;
    }
    let Node::Master(master) = broker.node() else {
        return error(
            StatusCode::CONFLICT,
            "this broker is not a master: only a master has a sync-state-set",
        );
    };
    if let Err(r) = check_set_request(&master, &request).await {
        return r;
    }
    match master.set_sync_state_set(request.sync_state_set, request.sync_state_set_epoch).await {
        Ok(s) => Json(json!({
            "syncStateSet": s.sync_state_set,
            "syncStateSetEpoch": s.sync_state_set_epoch,
            "confirmOffset": s.confirm_offset,
        }))
        .into_response(),
        Err(e) => {
            let code = match &e {
                E::MasterNotMember { .. } | E::NegativeBrokerId { .. } | E::NegativeEpoch { .. } => {
                    StatusCode::BAD_REQUEST
                }
                E::StaleEpoch { .. } | E::EpochInUse { .. } | E::NotControllerMode => StatusCode::CONFLICT,
                E::Stopped => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::INTERNAL_SERVER_ERROR,
            };
            error(code, e.to_string())
        }
    }
}

/// What a controller refuses of a set change, checked against the master's state now: an epoch
/// that is `i32::MAX` or, unless forced, skips ahead of the next one; and members added that are
/// not connected to this master (a learner never is a member). Members already in the set may
/// stay while away: removing them is a decision of its own.
async fn check_set_request(
    master: &logship_tokio::MasterHandle<CommitLog>,
    request: &SetSyncStateSetRequest,
) -> Result<(), Response> {
    let epoch = request.sync_state_set_epoch;
    let malformed = epoch < 0 || request.sync_state_set.iter().any(|id| *id < 0);
    if malformed {
        // The master service refuses these with their own typed errors.
        return Ok(());
    }
    if epoch == i32::MAX {
        return Err(error(
            StatusCode::CONFLICT,
            "syncStateSetEpoch 2147483647 is refused, forced or not: no set epoch can follow it, so the \
             set could never change again",
        ));
    }
    let Some(status) = master.status().await else {
        return Err(error(StatusCode::SERVICE_UNAVAILABLE, "the master service has stopped"));
    };
    let Some(auto) = status.autoswitch else {
        return Err(error(StatusCode::CONFLICT, "this master is not in controller mode"));
    };
    let next = auto.sync_state_set_epoch.saturating_add(1);
    if epoch > next && !request.force {
        return Err(error(
            StatusCode::CONFLICT,
            format!(
                "syncStateSetEpoch {epoch}: set epochs advance one at a time, and the set in force is at \
                 epoch {}, so the next is {next}; send \"force\": true to skip ahead",
                auto.sync_state_set_epoch
            ),
        ));
    }
    if !request.sync_state_set.contains(&auto.broker_id) {
        return Ok(()); // refused by the master service: the set must hold the master
    }
    let connected: std::collections::BTreeSet<_> =
        auto.slaves.iter().filter(|l| !l.async_learner).filter_map(|l| l.broker_id).collect();
    let strangers: Vec<String> = request
        .sync_state_set
        .iter()
        .filter(|id| **id != auto.broker_id && !auto.sync_state_set.contains(id) && !connected.contains(id))
        .map(ToString::to_string)
        .collect();
    if !strangers.is_empty() {
        return Err(error(
            StatusCode::BAD_REQUEST,
            format!(
                "syncStateSet: broker(s) {} not connected to this master: only a connected replica can join \
                 the sync-state-set",
                strangers.join(", ")
            ),
        ));
    }
    Ok(())
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

async fn metrics(State(broker): State<Arc<Broker>>, headers: HeaderMap) -> Response {
    // Refresh the replication gauges from the live status.
    let _ = status_json(&broker).await;
    let (content_type, body) =
        broker.metrics.respond(headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()));
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pull_statuses_follow_rocketmq() {
        // (offset, min, max) -> (status, next offset, legal)
        assert_eq!(pull_status(0, 0, 0), ("NO_MESSAGE_IN_QUEUE", 0, true));
        assert_eq!(pull_status(4, 0, 0), ("NO_MESSAGE_IN_QUEUE", 0, false));
        assert_eq!(pull_status(2, 5, 9), ("OFFSET_TOO_SMALL", 5, false));
        assert_eq!(pull_status(5, 5, 9), ("FOUND", 5, true));
        assert_eq!(pull_status(9, 5, 9), ("OFFSET_OVERFLOW_ONE", 9, true));
        assert_eq!(pull_status(u64::MAX, 5, 9), ("OFFSET_OVERFLOW_BADLY", 9, false));
    }

    #[test]
    fn the_in_flight_budget_refuses_what_it_cannot_hold_and_caps_one_reservation() {
        let ip = IpAddr::from([127, 0, 0, 1]);
        let budget = InFlight::new(100, 0);
        let a = budget.try_reserve(ip, 60).expect("fits");
        assert_eq!(budget.try_reserve(ip, 60).err(), Some(Busy::Broker));
        drop(a);
        let whole = budget.try_reserve(ip, 1 << 40).expect("a reservation above the budget takes all of it");
        assert!(budget.try_reserve(ip, 1).is_err());
        drop(whole);
        assert!(budget.try_reserve(ip, 100).is_ok());
    }

    #[test]
    fn one_client_holds_at_most_its_share_of_the_in_flight_budget() {
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let budget = InFlight::new(100, 30);
        let first = budget.try_reserve(a, 20).expect("fits the share");
        assert_eq!(budget.try_reserve(a, 20).err(), Some(Busy::Client), "beyond a's share");
        let other = budget.try_reserve(b, 25).expect("b has its own share");
        drop((other, first));
        let whole = budget.try_reserve(a, 1 << 40).expect("one request larger than the share runs alone");
        assert_eq!(budget.try_reserve(a, 1).err(), Some(Busy::Client));
        assert!(budget.try_reserve(b, 30).is_ok(), "b is not held back by a");
        drop(whole);
        assert!(budget.clients.lock().unwrap().is_empty(), "every share was given back");
        // The same client over IPv4 and IPv4-mapped IPv6 is one client.
        let mapped = IpAddr::from(std::net::Ipv4Addr::new(10, 0, 0, 1).to_ipv6_mapped());
        let _held = budget.try_reserve(a, 30).unwrap();
        assert_eq!(budget.try_reserve(mapped, 1).err(), Some(Busy::Client));
    }
}
