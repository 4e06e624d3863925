//! `GET /topics/{topic}/queues/{queueId}/messages?offset=&max=&decompress=`: read from a consume
//! queue.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use bytes::Bytes;
use logship::request;
use logship_store::{StoreError, StoredMessage};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{busy, error};
use crate::broker::{Broker, Busy, Held, ReplicationHandle};
use crate::config::MAX_PULL_COUNT;

/// A pull's query: `offset` (default the queue's minimum), `max` (default 32) and `decompress`.
#[derive(Deserialize)]
pub struct PullParams {
    offset: Option<u64>,
    max: Option<usize>,
    /// Serve a compressed body (zlib) as the producer sent it.
    #[serde(default)]
    decompress: bool,
}

/// The compression a record's sysFlag declares (RocketMQ's `MessageSysFlag`: bit 0 says
/// compressed, bits 8-10 the type; 0 is zlib for producers older than the type bits); `None`
/// for a body stored as sent.
fn compression_of(sys_flag: i32) -> Option<&'static str> {
    if sys_flag & logship_store::codec::sys_flag::COMPRESSED == 0 {
        return None;
    }
    Some(match (sys_flag >> 8) & 0x7 {
        0 | 3 => "zlib",
        1 => "lz4",
        2 => "zstd",
        _ => "unknown",
    })
}

/// Inflates a zlib body, refusing to make more than `limit` bytes of it.
fn inflate(body: &[u8], limit: usize) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut out = Vec::new();
    let mut z = flate2::read::ZlibDecoder::new(body).take(limit as u64 + 1);
    z.read_to_end(&mut out).map_err(|e| format!("the body is not valid zlib: {e}"))?;
    if out.len() > limit {
        return Err(format!("the body inflates past {limit} bytes (4 × maxMessageSize): served as stored"));
    }
    Ok(out)
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
        Err(which) => return Ok(Err(which)),
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

pub async fn get_messages(
    State(broker): State<Arc<Broker>>,
    Path((topic, queue_id)): Path<(String, i32)>,
    Query(params): Query<PullParams>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
) -> Response {
    match broker.node() {
        ReplicationHandle::Slave(_) if !broker.settings.slave_read_enable => {
            return error(
                StatusCode::FORBIDDEN,
                "this broker is a SLAVE and slaveReadEnable is false: read from the master",
            );
        }
        ReplicationHandle::Unassigned if !broker.settings.slave_read_enable => {
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
            Ok(Ok(Err(which))) => return busy(which, "bodies"),
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
            let compression = compression_of(m.sys_flag);
            let limit = (broker.settings.max_message_size as usize).saturating_mul(4);
            let (inflated, decompress_error) = match compression {
                Some("zlib") if params.decompress => match inflate(&m.body, limit) {
                    Ok(body) => (Some(body), None),
                    Err(e) => (None, Some(e)),
                },
                Some(other) if params.decompress => {
                    (None, Some(format!("{other} bodies cannot be decompressed here: served as stored")))
                }
                _ => (None, None),
            };
            let raw: &[u8] = inflated.as_deref().unwrap_or(&m.body);
            let (body, encoding) = match std::str::from_utf8(raw) {
                Ok(text) => (text.to_string(), "utf8"),
                Err(_) => (base64::engine::general_purpose::STANDARD.encode(raw), "base64"),
            };
            let mut extra = serde_json::Map::new();
            if let Some(c) = compression {
                extra.insert("compressed".into(), json!(true));
                extra.insert("compression".into(), json!(c));
                extra.insert("decompressed".into(), json!(inflated.is_some()));
            }
            if let Some(e) = decompress_error {
                extra.insert("decompressError".into(), json!(e));
            }
            let mut doc = json!({
                "queueOffset": m.queue_offset,
                "physicalOffset": m.physical_offset,
                "msgId": m.msg_id(),
                "tags": m.tags(),
                "properties": m.properties.iter().cloned().collect::<BTreeMap<_, _>>(),
                "body": body,
                "bodyEncoding": encoding,
                "bornTimestamp": m.born_timestamp,
                "storeTimestamp": m.store_timestamp,
                "compressed": false,
            });
            if let Value::Object(map) = &mut doc {
                map.extend(extra);
            }
            doc
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
            Err(which) => return busy(which, "bodies"),
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
}
