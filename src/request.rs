//! The hand-written parsing of HTTP requests: a put's queue id, tags, keys and properties from
//! its query parameters and headers, and the bearer token of an `Authorization` header. The
//! percent-decoding of the query string and the HTTP framing are axum's and hyper's; everything
//! here is pure and is the body of the `http_request` fuzz target (which also runs under
//! `cargo test`).

use std::collections::BTreeMap;

use axum::http::HeaderMap;
use logship_store::Message;

/// What a put request says about its message, besides the topic and the body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PutParams {
    /// The queue within the topic (`queueId` or `x-queue-id`, default 0).
    pub queue_id: i32,
    /// RocketMQ properties in request order: `TAGS`, `KEYS`, then `x-property-<name>` headers,
    /// then the other query parameters.
    pub properties: Vec<(String, String)>,
}

impl PutParams {
    /// The message these parameters describe.
    pub fn into_message(self, topic: String, body: bytes::Bytes) -> Message {
        let mut m = Message::new(topic, self.queue_id, body);
        for (name, value) in self.properties {
            m = m.with_property(name, value);
        }
        m
    }
}

/// A request the broker refuses before touching the store.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RequestError {
    /// The queue id is not a non-negative integer.
    #[error("queueId {0:?} is not a queue number")]
    QueueIdNotANumber(String),
    /// The queue id is at or beyond the topic's queue count (RocketMQ refuses it the same way).
    #[error("queueId {queue_id} is illegal: topics have {queue_nums} queues (defaultTopicQueueNums), 0 to {last}", last = queue_nums - 1)]
    QueueIdBeyondCount {
        /// The queue id asked for.
        queue_id: i32,
        /// The topic's queue count.
        queue_nums: u32,
    },
    /// A header the broker reads holds bytes that are not visible ASCII.
    #[error("header {0} is not visible ASCII")]
    HeaderNotAscii(String),
    /// The topic name is not a RocketMQ topic name.
    #[error("topic {0:?} must be 1 to 127 characters of letters, digits, '%', '|', '-' or '_'")]
    BadTopic(String),
}

/// Checks a queue id against the topic's queue count.
pub fn check_queue_id(queue_id: i32, queue_nums: u32) -> Result<i32, RequestError> {
    if queue_id < 0 || queue_id as u32 >= queue_nums {
        return Err(RequestError::QueueIdBeyondCount { queue_id, queue_nums });
    }
    Ok(queue_id)
}

/// Reads a put's parameters: queue id, tags, keys and other properties come from query
/// parameters (`queueId`, `tags`, `keys`, any other name) or headers (`x-queue-id`, `x-tags`,
/// `x-keys`, `x-property-<name>`); a query parameter wins over its header.
pub fn parse_put(
    topic: &str,
    query: &BTreeMap<String, String>,
    headers: &HeaderMap,
    queue_nums: u32,
) -> Result<PutParams, RequestError> {
    let header = |name: &str| -> Result<Option<String>, RequestError> {
        headers
            .get(name)
            .map(|v| {
                v.to_str().map(str::to_string).map_err(|_| RequestError::HeaderNotAscii(name.to_string()))
            })
            .transpose()
    };
    let queue_id = match query.get("queueId").cloned().or(header("x-queue-id")?) {
        None => 0,
        Some(q) => {
            let id = q.parse::<i32>().ok().filter(|q| *q >= 0).ok_or(RequestError::QueueIdNotANumber(q))?;
            check_queue_id(id, queue_nums)?
        }
    };
    if !logship_store::codec::valid_topic(topic.as_bytes()) {
        return Err(RequestError::BadTopic(topic.to_string()));
    }
    let mut properties: Vec<(String, String)> = Vec::new();
    let mut set = |name: &str, value: String| match properties.iter_mut().find(|(n, _)| n == name) {
        Some(entry) => entry.1 = value,
        None => properties.push((name.to_string(), value)),
    };
    if let Some(tags) = query.get("tags").cloned().or(header("x-tags")?) {
        set(logship_store::codec::PROPERTY_TAGS, tags);
    }
    if let Some(keys) = query.get("keys").cloned().or(header("x-keys")?) {
        set("KEYS", keys);
    }
    for (name, value) in headers {
        if let Some(prop) = name.as_str().strip_prefix("x-property-") {
            let value = value.to_str().map_err(|_| RequestError::HeaderNotAscii(name.to_string()))?;
            set(prop, value.to_string());
        }
    }
    for (name, value) in query {
        if !matches!(name.as_str(), "queueId" | "tags" | "keys") {
            set(name, value.clone());
        }
    }
    Ok(PutParams { queue_id, properties })
}

/// The token of an `Authorization: Bearer <token>` header value (scheme case-insensitive, one or
/// more spaces after it), or `None` for any other shape.
pub fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    const SCHEME: &[u8] = b"bearer";
    if value.len() <= SCHEME.len() || !value[..SCHEME.len()].eq_ignore_ascii_case(SCHEME) {
        return None;
    }
    let rest = &value[SCHEME.len()..];
    let start = rest.iter().position(|&b| b != b' ')?;
    if start == 0 {
        return None;
    }
    let token = &rest[start..];
    let end = token.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    let token = &token[..end];
    (!token.is_empty() && token.iter().all(u8::is_ascii_graphic)).then_some(token)
}

/// Compares a presented token with the expected one in time that depends only on their lengths.
pub fn token_matches(given: &[u8], expected: &[u8]) -> bool {
    if given.len() != expected.len() {
        return false;
    }
    given.iter().zip(expected).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

/// Whether an `Authorization` header value carries `expected` as its bearer token.
pub fn authorized(value: Option<&[u8]>, expected: &[u8]) -> bool {
    value.and_then(bearer_token).is_some_and(|t| token_matches(t, expected))
}

/// Fuzz body `http_request`: splits `data` into a topic, query parameters and headers, parses
/// them as a put and as an `Authorization` header, and checks the promises: no panic; an
/// accepted queue id lies inside the queue count; every accepted property came from the request;
/// and a message the store agrees to encode decodes back to the same properties.
pub fn fuzz_http_request(data: &[u8]) {
    let mut parts = data.split(|&b| b == b'\n');
    let queue_nums = u32::from(parts.next().and_then(|p| p.first().copied()).unwrap_or(8)).max(1);
    let topic = String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned();
    let mut query = BTreeMap::new();
    let mut headers = HeaderMap::new();
    let mut auth = None;
    for line in parts {
        if let Some(rest) = line.strip_prefix(b"?") {
            let text = String::from_utf8_lossy(rest);
            let (k, v) = text.split_once('=').unwrap_or((&text, ""));
            query.insert(k.to_string(), v.to_string());
        } else if let Some(i) = line.iter().position(|&b| b == b':') {
            let (name, value) = (&line[..i], &line[i + 1..]);
            if name.eq_ignore_ascii_case(b"authorization") {
                auth = Some(value.to_vec());
            }
            if let (Ok(n), Ok(v)) =
                (axum::http::HeaderName::from_bytes(name), axum::http::HeaderValue::from_bytes(value))
            {
                headers.append(n, v);
            }
        }
    }
    if let Some(value) = &auth {
        if let Some(token) = bearer_token(value) {
            assert!(!token.is_empty() && token.iter().all(u8::is_ascii_graphic));
            assert!(authorized(Some(value), token));
        }
        assert!(!authorized(Some(value), b""));
    }
    let Ok(params) = parse_put(&topic, &query, &headers, queue_nums) else {
        return;
    };
    assert!(params.queue_id >= 0 && (params.queue_id as u32) < queue_nums);
    for (name, value) in &params.properties {
        let from_query = query.get(name.as_str()) == Some(value)
            || (name == "TAGS" && query.get("tags") == Some(value))
            || (name == "KEYS" && query.get("keys") == Some(value));
        let from_header = headers.iter().any(|(n, v)| {
            v.as_bytes() == value.as_bytes() && {
                let n = n.as_str();
                n == format!("x-property-{name}")
                    || (name == "TAGS" && n == "x-tags")
                    || (name == "KEYS" && n == "x-keys")
            }
        });
        assert!(from_query || from_header, "property {name}={value} came from nowhere");
    }
    let expected = params.properties.clone();
    let message = params.into_message(topic, bytes::Bytes::from_static(b"body"));
    let fields = logship_store::StoreFields {
        queue_offset: 0,
        physical_offset: 0,
        store_timestamp: 0,
        store_host: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    if let Ok(record) = logship_store::codec::encode(&message, &fields) {
        let stored = logship_store::StoredMessage::decode(&bytes::Bytes::from(record))
            .expect("a record the store encodes decodes");
        assert_eq!(stored.properties, expected, "properties survive the log");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_parse_only_in_their_shape() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"bearer   abc  "), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Bearerabc"), None);
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"Bearer a b"), None);
        assert!(authorized(Some(b"Bearer 0123456789abcdef"), b"0123456789abcdef"));
        assert!(!authorized(Some(b"Bearer 0123456789abcdeF"), b"0123456789abcdef"));
        assert!(!authorized(None, b"0123456789abcdef"));
    }

    #[test]
    fn queue_ids_beyond_the_count_are_refused() {
        let q = |v: &str| BTreeMap::from([("queueId".to_string(), v.to_string())]);
        let h = HeaderMap::new();
        assert_eq!(parse_put("T", &q("7"), &h, 8).unwrap().queue_id, 7);
        assert_eq!(
            parse_put("T", &q("8"), &h, 8),
            Err(RequestError::QueueIdBeyondCount { queue_id: 8, queue_nums: 8 })
        );
        assert!(matches!(parse_put("T", &q("-1"), &h, 8), Err(RequestError::QueueIdNotANumber(_))));
    }

    /// Fixed and pseudo-random inputs for the fuzz body, so the target cannot rot.
    #[test]
    fn fuzz_body_holds_on_fixed_and_pseudo_random_inputs() {
        let fixed: &[&[u8]] = &[
            b"",
            b"\x08\nTopicA\n?queueId=3\n?tags=a\nx-property-color:blue\nauthorization:Bearer 0123456789abcdef",
            b"\x01\nT\n?queueId=1",
            b"\x08\nT\n?x=\x01y\nx-tags:\xff",
            b"\x00\nT\n?keys=k\nx-keys:j\nx-property-KEYS:z\n?TAGS=t",
            b"\x08\nT\n?a=b=c\nAuthorization:bearer  \t",
        ];
        for input in fixed {
            fuzz_http_request(input);
        }
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let alphabet = b"\n?=:-xqueId0189TAGSKEYSBearer \x01\x02\xff";
        for len in 0..300usize {
            let input: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    alphabet[(state >> 24) as usize % alphabet.len()]
                })
                .collect();
            fuzz_http_request(&input);
        }
    }
}
