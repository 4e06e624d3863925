//! The server side of one remoting connection, sans IO: bytes in, requests out; responses in,
//! bytes out; and the limits that keep one client from hurting the others.
//!
//! [`ServerConnection`] is the state machine of one accepted connection (quinn-proto's shape):
//!
//! - **inputs**: [`handle_read`](ServerConnection::handle_read) (bytes the socket gave),
//!   [`handle_read_closed`](ServerConnection::handle_read_closed) (the peer's EOF),
//!   [`respond`](ServerConnection::respond) (a processor's answer, in any order),
//!   [`send`](ServerConnection::send) (a command the server sends on its own, such as
//!   `NOTIFY_CONSUMER_IDS_CHANGED`), [`handle_written`](ServerConnection::handle_written) (how
//!   much of the queued output the socket took) and
//!   [`handle_timeout`](ServerConnection::handle_timeout);
//! - **outputs**: [`poll_request`](ServerConnection::poll_request) (the next request to
//!   dispatch), [`transmit`](ServerConnection::transmit) (bytes to write; every queued chunk
//!   with [`transmit_chunks`](ServerConnection::transmit_chunks), for a vectored write),
//!   [`poll_timeout`](ServerConnection::poll_timeout) (when to call `handle_timeout`),
//!   [`wants_read`](ServerConnection::wants_read) (whether to read more) and
//!   [`close_reason`](ServerConnection::close_reason) /
//!   [`is_finished`](ServerConnection::is_finished) (why and when to close).
//!
//! The driver loop: after any input, drain `poll_request` (dispatching each request), write
//! `transmit` while there is some, read only while `wants_read`, wake at `poll_timeout`, and
//! close the socket once `is_finished`. Time comes in as `now`; nothing here reads a clock.
//!
//! # Rules
//!
//! - **Requests in flight are capped** ([`ServerConfig::max_in_flight`]): a request beyond the
//!   cap is answered at once with `SYSTEM_BUSY` and Java's `[OVERLOAD]` remark (a one-way one is
//!   dropped), as a Java broker answers when its executor queue is full. Clients retry sends on
//!   it (5.x) and back off pulls.
//! - **Responses go out in any order**, each with its request's opaque; the response to a
//!   one-way request is dropped. A response that cannot be encoded becomes a `SYSTEM_ERROR`
//!   saying why.
//! - **Bad bytes close the connection**, as Java's `NettyDecoder` closes it, but first the peer
//!   gets one response frame (opaque -1, `SYSTEM_ERROR`) whose remark is the typed error
//!   ([`CloseReason`]): a frame over the limit, a negative length, a header that is not JSON, ...
//!   A frame begun and not finished within [`ServerConfig::frame_timeout`] is the same (a
//!   trickling or truncated frame).
//! - **Slow readers are bounded**: once [`ServerConfig::max_queued_bytes`] of output wait,
//!   reading stops (the client's requests queue in its socket, not in the broker's memory); a
//!   connection whose output makes no progress for [`ServerConfig::write_timeout`] is closed.
//! - **Idle connections are closed** after [`ServerConfig::idle_timeout`] without a byte either
//!   way and nothing in flight (Java's `serverChannelMaxIdleTimeSeconds`, 120 s).
//!
//! [`ConnectionLimits`] caps connections per client address and in all at accept, and
//! [`InFlightBudget`] caps requests in flight across every connection.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::code::ResponseCode;
use crate::command::RemotingCommand;
use crate::error::DecodeError;
use crate::frame::{DEFAULT_MAX_FRAME_LEN, FrameDecoder};

/// Java's remark for a request refused because the broker's queues are full.
pub const OVERLOAD_REMARK: &str = "[OVERLOAD]system busy, start flow control for a while";

/// The opaque of the error frame a connection gets before it is closed for bad bytes: no
/// request's (the request that caused it could not be read).
pub const ERROR_FRAME_OPAQUE: i32 = -1;

/// A connection's limits and timeouts.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The largest frame, its length field included (Java's `frameMaxLength`, 16 MiB).
    pub max_frame_len: usize,
    /// Requests dispatched and not answered yet, held pulls included; more are answered
    /// `SYSTEM_BUSY` at once.
    pub max_in_flight: usize,
    /// Output bytes waiting to be written above which reading stops.
    pub max_queued_bytes: usize,
    /// Without a byte read or written and with nothing in flight for this long, the connection
    /// is closed.
    pub idle_timeout: Duration,
    /// A frame begun must be complete within this long.
    pub frame_timeout: Duration,
    /// Output waiting that makes no progress for this long closes the connection.
    pub write_timeout: Duration,
    /// The protocol version put on the commands the server builds itself (error frames, busy
    /// answers, [`send`](ServerConnection::send)): the version of the broker emulated.
    pub version: i32,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            max_in_flight: 1024,
            max_queued_bytes: 64 << 20,
            idle_timeout: Duration::from_secs(120),
            frame_timeout: Duration::from_secs(30),
            write_timeout: Duration::from_secs(30),
            version: crate::version::V5_5_0,
        }
    }
}

/// A request taken from a connection, to dispatch; answer it with
/// [`ServerConnection::respond`] and its [`id`](Self::id).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Request {
    /// What to answer it with.
    pub id: RequestId,
    /// The request.
    pub command: RemotingCommand,
}

/// Names one request of one connection until it is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId {
    seq: u64,
    /// The request's opaque, which its response carries.
    pub opaque: i32,
    /// Whether the request is one-way (its response is dropped).
    pub oneway: bool,
}

/// Why a connection closes (or closed).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CloseReason {
    /// The peer closed its side.
    #[error("the peer closed the connection")]
    PeerClosed,
    /// The peer closed its side in the middle of a frame.
    #[error("the peer closed the connection {buffered} bytes into a frame (a truncated frame)")]
    TruncatedFrame {
        /// Bytes of the frame received.
        buffered: usize,
    },
    /// Bytes that are not a remoting command.
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// A frame was begun and not finished in time.
    #[error(
        "a frame begun {waited_ms} ms ago is still incomplete ({buffered} bytes received{missing}); \
         a frame must arrive within {limit_ms} ms"
    )]
    FrameTimeout {
        /// Bytes of the frame received.
        buffered: usize,
        /// `, N missing` when the frame's length was known.
        missing: String,
        /// How long it waited.
        waited_ms: u128,
        /// The limit.
        limit_ms: u128,
    },
    /// Nothing moved for the idle timeout.
    #[error("idle for {limit_ms} ms with no request in flight")]
    Idle {
        /// The limit.
        limit_ms: u128,
    },
    /// Responses waited and the peer read none of them.
    #[error("{queued} bytes of responses waited {limit_ms} ms and the peer read none of them")]
    WriteStalled {
        /// The bytes waiting.
        queued: usize,
        /// The limit.
        limit_ms: u128,
    },
    /// The server closed it (shutting down, or the driver gave up on the socket).
    #[error("closed by the server: {0}")]
    Server(String),
}

impl CloseReason {
    /// Whether the peer gets an error frame naming the reason before the close.
    fn tells_peer(&self) -> bool {
        matches!(self, Self::Decode(_) | Self::FrameTimeout { .. })
    }

    /// A short stable name for logs and metrics (`decode`, `idle`, ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::PeerClosed => "peer_closed",
            Self::TruncatedFrame { .. } => "truncated_frame",
            Self::Decode(_) => "bad_frame",
            Self::FrameTimeout { .. } => "frame_timeout",
            Self::Idle { .. } => "idle",
            Self::WriteStalled { .. } => "write_stalled",
            Self::Server(_) => "server",
        }
    }
}

/// A call the connection refuses: the driver's bug, not the peer's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectionMisuse {
    /// A response for a request that is not in flight (answered twice, or never taken).
    #[error("request {0:?} is not in flight on this connection")]
    UnknownRequest(RequestId),
    /// More written than the connection had queued.
    #[error("{written} bytes reported written, {offered} were offered")]
    WroteTooMuch {
        /// Reported.
        written: usize,
        /// Offered.
        offered: usize,
    },
}

/// Counters of one connection, for logs and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// Requests taken.
    pub requests: u64,
    /// Requests answered `SYSTEM_BUSY` for the in-flight cap.
    pub busy: u64,
    /// Responses written to the output.
    pub responses: u64,
    /// Responses dropped (to one-way requests, or after the close began).
    pub dropped_responses: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Bytes written.
    pub bytes_written: u64,
}

/// One accepted remoting connection's state (see the [module docs](self)).
#[derive(Debug)]
pub struct ServerConnection {
    config: ServerConfig,
    decoder: FrameDecoder,
    /// Requests decoded and admitted, not yet taken.
    ready: VecDeque<Request>,
    /// Requests taken and not answered: seq → id.
    in_flight: HashMap<u64, RequestId>,
    next_seq: u64,
    /// The next opaque of a command the server sends on its own.
    next_server_opaque: i32,
    /// Encoded output, front first; `written` bytes of the front chunk are gone.
    out: VecDeque<Bytes>,
    written: usize,
    queued_bytes: usize,
    /// When the output last made progress (or became non-empty).
    write_progress: Instant,
    /// When a byte last moved either way.
    last_activity: Instant,
    /// When the frame now buffered began.
    frame_started: Option<Instant>,
    closing: Option<CloseReason>,
    stats: ConnectionStats,
}

impl ServerConnection {
    /// The state of a connection accepted at `now`.
    pub fn new(config: ServerConfig, now: Instant) -> Self {
        let decoder = FrameDecoder::with_max_frame_len(config.max_frame_len);
        Self {
            config,
            decoder,
            ready: VecDeque::new(),
            in_flight: HashMap::new(),
            next_seq: 0,
            next_server_opaque: 1,
            out: VecDeque::new(),
            written: 0,
            queued_bytes: 0,
            write_progress: now,
            last_activity: now,
            frame_started: None,
            closing: None,
            stats: ConnectionStats::default(),
        }
    }

    /// The limits it runs with.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// Bytes read from the socket. Decodes every whole frame: requests are admitted (or
    /// answered busy) in order; a decode error begins the close.
    pub fn handle_read(&mut self, now: Instant, data: &[u8]) {
        if self.closing.is_some() || data.is_empty() {
            return;
        }
        self.last_activity = now;
        self.stats.bytes_read += data.len() as u64;
        self.decoder.feed(data);
        loop {
            match self.decoder.decode() {
                Ok(Some(command)) => self.admit(now, command),
                Ok(None) => break,
                Err(e) => {
                    self.begin_close(now, CloseReason::Decode(e));
                    return;
                }
            }
        }
        self.frame_started = match (self.decoder.buffered(), self.frame_started) {
            (0, _) => None,
            (_, Some(t)) => Some(t),
            (_, None) => Some(now),
        };
    }

    /// The peer closed its side (EOF): the connection closes, mid-frame or not.
    pub fn handle_read_closed(&mut self, now: Instant) {
        let buffered = self.decoder.buffered();
        let reason =
            if buffered > 0 { CloseReason::TruncatedFrame { buffered } } else { CloseReason::PeerClosed };
        self.begin_close(now, reason);
    }

    /// The server closes the connection (shutdown): what is queued is dropped.
    pub fn close(&mut self, now: Instant, why: impl Into<String>) {
        self.begin_close(now, CloseReason::Server(why.into()));
    }

    fn admit(&mut self, now: Instant, command: RemotingCommand) {
        if command.is_response() {
            // A client's answer to a command the server sent (none waits for one): dropped.
            return;
        }
        self.stats.requests += 1;
        let id = RequestId { seq: self.next_seq, opaque: command.opaque, oneway: command.is_oneway() };
        self.next_seq += 1;
        if self.in_flight.len() + self.ready.len() >= self.config.max_in_flight {
            self.stats.busy += 1;
            if !id.oneway {
                let busy = RemotingCommand::response_to(&command, ResponseCode::SYSTEM_BUSY)
                    .with_version(self.config.version)
                    .with_remark(OVERLOAD_REMARK);
                self.queue(now, &busy);
            }
            return;
        }
        self.ready.push_back(Request { id, command });
    }

    /// The next request to dispatch; it is in flight from now until
    /// [`respond`](Self::respond). Nothing comes out once the connection is closing.
    pub fn poll_request(&mut self) -> Option<Request> {
        if self.closing.is_some() {
            self.ready.clear();
            return None;
        }
        let request = self.ready.pop_front()?;
        self.in_flight.insert(request.id.seq, request.id);
        Some(request)
    }

    /// Answers a request in flight: `response` goes out with the request's opaque and as a
    /// response (its flag set), unless the request was one-way or `response` is `None` (then
    /// nothing goes out). A response that cannot be encoded is replaced by a `SYSTEM_ERROR`
    /// naming why.
    pub fn respond(
        &mut self,
        now: Instant,
        id: RequestId,
        response: Option<RemotingCommand>,
    ) -> Result<(), ConnectionMisuse> {
        if self.in_flight.remove(&id.seq).is_none() {
            return Err(ConnectionMisuse::UnknownRequest(id));
        }
        match response {
            Some(mut response) if !id.oneway && self.closing.is_none() => {
                response.opaque = id.opaque;
                response.flag |= crate::FLAG_RESPONSE;
                self.queue(now, &response);
                self.stats.responses += 1;
            }
            Some(_) => self.stats.dropped_responses += 1,
            None => {}
        }
        Ok(())
    }

    /// Queues a command the server sends on its own (a one-way notification, say), giving it
    /// the connection's next server opaque; returns that opaque, or `None` once the connection
    /// is closing.
    pub fn send(&mut self, now: Instant, mut command: RemotingCommand) -> Option<i32> {
        if self.closing.is_some() {
            return None;
        }
        let opaque = self.next_server_opaque;
        self.next_server_opaque = self.next_server_opaque.checked_add(1).unwrap_or(1);
        command.opaque = opaque;
        self.queue(now, &command);
        Some(opaque)
    }

    fn queue(&mut self, now: Instant, command: &RemotingCommand) {
        // Room for the whole head at once: the fixed fields, and the text of the variable ones
        // with room for quoting (growing the buffer as it is written copied it several times).
        let text: usize = command.ext_fields.iter().map(|(k, v)| k.len() + v.len() + 8).sum::<usize>()
            + command.remark.as_ref().map_or(0, |r| r.len() + 16);
        let mut head = BytesMut::with_capacity(192 + text);
        if let Err(e) = command.encode_head(&mut head) {
            let error = RemotingCommand::response(ResponseCode::SYSTEM_ERROR)
                .with_opaque(command.opaque)
                .with_version(self.config.version)
                .with_serialize_type(command.serialize_type)
                .with_remark(format!("the response could not be encoded: {e}"));
            head.clear();
            error.encode_head(&mut head).expect("a short error response encodes");
            self.push_out(now, head.freeze());
            return;
        }
        self.push_out(now, head.freeze());
        if !command.body.is_empty() {
            self.push_out(now, command.body.clone());
        }
    }

    fn push_out(&mut self, now: Instant, chunk: Bytes) {
        if self.out.is_empty() {
            self.write_progress = now;
        }
        self.queued_bytes += chunk.len();
        self.out.push_back(chunk);
    }

    fn begin_close(&mut self, now: Instant, reason: CloseReason) {
        if self.closing.is_some() {
            return;
        }
        self.ready.clear();
        if reason.tells_peer() {
            // What is queued still goes, then the error frame.
            let frame = RemotingCommand::response(ResponseCode::SYSTEM_ERROR)
                .with_opaque(ERROR_FRAME_OPAQUE)
                .with_version(self.config.version)
                .with_remark(reason.to_string());
            self.queue(now, &frame);
        } else {
            self.out.clear();
            self.queued_bytes = 0;
            self.written = 0;
        }
        self.closing = Some(reason);
    }

    /// The bytes to write next (a part of one encoded command), if any.
    pub fn transmit(&self) -> Option<&[u8]> {
        self.out.front().map(|chunk| &chunk[self.written..])
    }

    /// [`transmit`](Self::transmit) as a zero-copy `Bytes`, for a driver that writes it while
    /// it handles other inputs.
    pub fn transmit_bytes(&self) -> Option<Bytes> {
        self.out.front().map(|chunk| chunk.slice(self.written..))
    }

    /// Every queued chunk of output in order, [`transmit`](Self::transmit) first: for a driver
    /// that writes many at once (a vectored write), then reports the total to
    /// [`handle_written`](Self::handle_written).
    pub fn transmit_chunks(&self) -> impl Iterator<Item = &[u8]> {
        self.out.iter().enumerate().map(|(i, chunk)| if i == 0 { &chunk[self.written..] } else { &chunk[..] })
    }

    /// Bytes of output queued and not written yet.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// The socket took the first `n` bytes of the queued output: of
    /// [`transmit`](Self::transmit), and on into the chunks after it
    /// ([`transmit_chunks`](Self::transmit_chunks)).
    pub fn handle_written(&mut self, now: Instant, n: usize) -> Result<(), ConnectionMisuse> {
        let offered = self.queued_bytes;
        if n > offered {
            return Err(ConnectionMisuse::WroteTooMuch { written: n, offered });
        }
        if n == 0 {
            return Ok(());
        }
        self.queued_bytes -= n;
        self.stats.bytes_written += n as u64;
        self.write_progress = now;
        self.last_activity = now;
        let mut left = n;
        while let Some(front) = self.out.front() {
            let rest = front.len() - self.written;
            if left < rest {
                self.written += left;
                break;
            }
            left -= rest;
            self.out.pop_front();
            self.written = 0;
        }
        Ok(())
    }

    /// Whether to read from the socket now: not while closing, nor while too much output
    /// waits, nor while the decoder holds a whole frame (it never does after `handle_read`).
    pub fn wants_read(&self) -> bool {
        self.closing.is_none()
            && self.queued_bytes < self.config.max_queued_bytes
            && self.decoder.wants_read()
    }

    /// Requests taken and not answered.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// When [`handle_timeout`](Self::handle_timeout) must next be called.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.is_finished() {
            return None;
        }
        let mut next: Option<Instant> = None;
        let mut at = |t: Instant| next = Some(next.map_or(t, |n| n.min(t)));
        if !self.out.is_empty() {
            at(self.write_progress + self.config.write_timeout);
        }
        if self.closing.is_none() {
            if let Some(started) = self.frame_started {
                at(started + self.config.frame_timeout);
            }
            if self.in_flight.is_empty() && self.out.is_empty() {
                at(self.last_activity + self.config.idle_timeout);
            }
        }
        next
    }

    /// Applies the timeouts due at `now`; spurious calls do nothing.
    pub fn handle_timeout(&mut self, now: Instant) {
        if !self.out.is_empty() && now >= self.write_progress + self.config.write_timeout {
            let queued = self.queued_bytes;
            let limit_ms = self.config.write_timeout.as_millis();
            self.closing = None; // a stall ends even a close that was flushing
            self.begin_close(now, CloseReason::WriteStalled { queued, limit_ms });
            return;
        }
        if self.closing.is_some() {
            return;
        }
        if let Some(started) = self.frame_started {
            if now >= started + self.config.frame_timeout {
                let buffered = self.decoder.buffered();
                let missing = self.decoder.missing().map_or(String::new(), |m| format!(", {m} missing"));
                let reason = CloseReason::FrameTimeout {
                    buffered,
                    missing,
                    waited_ms: (now - started).as_millis(),
                    limit_ms: self.config.frame_timeout.as_millis(),
                };
                self.begin_close(now, reason);
                return;
            }
        }
        if self.in_flight.is_empty()
            && self.out.is_empty()
            && now >= self.last_activity + self.config.idle_timeout
        {
            self.begin_close(now, CloseReason::Idle { limit_ms: self.config.idle_timeout.as_millis() });
        }
    }

    /// Why the connection is closing, once it is.
    pub fn close_reason(&self) -> Option<&CloseReason> {
        self.closing.as_ref()
    }

    /// Whether the driver should close the socket now: the connection is closing and its last
    /// bytes (an error frame) are written.
    pub fn is_finished(&self) -> bool {
        self.closing.is_some() && self.out.is_empty()
    }

    /// Its counters.
    pub fn stats(&self) -> ConnectionStats {
        self.stats
    }
}

/// Caps on connections at accept: in all, and per client address (loopback included: a local
/// client is as able to exhaust the broker as any other).
#[derive(Debug)]
pub struct ConnectionLimits {
    max_total: usize,
    max_per_client: usize,
    open: Mutex<(usize, BTreeMap<IpAddr, usize>)>,
}

/// Why an accepted connection is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refused {
    /// The broker's connection cap is reached.
    #[error("the broker holds its maximum of {max} client connections")]
    TooManyConnections {
        /// The cap.
        max: usize,
    },
    /// This client's connection cap is reached.
    #[error("{client} holds its maximum of {max} connections")]
    TooManyFromClient {
        /// The client's address.
        client: IpAddr,
        /// The cap.
        max: usize,
    },
}

/// A connection counted by [`ConnectionLimits`]; dropping it uncounts it.
#[derive(Debug)]
pub struct ConnectionPermit {
    limits: Arc<ConnectionLimits>,
    client: IpAddr,
}

impl ConnectionLimits {
    /// Limits of `max_total` connections, `max_per_client` from one address (0: no per-client
    /// cap).
    pub fn new(max_total: usize, max_per_client: usize) -> Arc<Self> {
        Arc::new(Self { max_total, max_per_client, open: Mutex::new((0, BTreeMap::new())) })
    }

    /// Counts a new connection from `client`, or refuses it.
    pub fn try_accept(self: &Arc<Self>, client: IpAddr) -> Result<ConnectionPermit, Refused> {
        let mut open = self.open.lock().unwrap_or_else(|e| e.into_inner());
        if open.0 >= self.max_total {
            return Err(Refused::TooManyConnections { max: self.max_total });
        }
        let mine = open.1.get(&client).copied().unwrap_or(0);
        if self.max_per_client > 0 && mine >= self.max_per_client {
            return Err(Refused::TooManyFromClient { client, max: self.max_per_client });
        }
        open.0 += 1;
        open.1.insert(client, mine + 1);
        Ok(ConnectionPermit { limits: self.clone(), client })
    }

    /// Connections open now.
    pub fn open(&self) -> usize {
        self.open.lock().unwrap_or_else(|e| e.into_inner()).0
    }
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        let mut open = self.limits.open.lock().unwrap_or_else(|e| e.into_inner());
        open.0 -= 1;
        if let Some(n) = open.1.get_mut(&self.client) {
            *n -= 1;
            if *n == 0 {
                open.1.remove(&self.client);
            }
        }
    }
}

/// A cap on requests in flight across every connection, in number and in bytes (each
/// request's frame): a request that gets no [`InFlightPermit`] is answered `SYSTEM_BUSY`
/// ([`busy_response`]).
#[derive(Debug)]
pub struct InFlightBudget {
    max: usize,
    max_bytes: usize,
    used: Mutex<(usize, usize)>,
}

/// One request's place in an [`InFlightBudget`]; dropping it frees the place.
#[derive(Debug)]
pub struct InFlightPermit {
    budget: Arc<InFlightBudget>,
    bytes: usize,
}

impl InFlightBudget {
    /// A budget of `max` requests holding at most `max_bytes` between them.
    pub fn new(max: usize, max_bytes: usize) -> Arc<Self> {
        Arc::new(Self { max, max_bytes, used: Mutex::new((0, 0)) })
    }

    /// A place for one request of `bytes`, if there is one. A request larger than the whole
    /// byte budget gets a place only when nothing else holds one, so it is never refused
    /// forever.
    pub fn try_acquire(self: &Arc<Self>, bytes: usize) -> Option<InFlightPermit> {
        let mut used = self.used.lock().unwrap_or_else(|e| e.into_inner());
        let fits = used.1.saturating_add(bytes) <= self.max_bytes || used.0 == 0;
        if used.0 >= self.max || !fits {
            return None;
        }
        used.0 += 1;
        used.1 += bytes;
        Some(InFlightPermit { budget: self.clone(), bytes })
    }

    /// Requests in flight now, and the bytes they hold.
    pub fn used(&self) -> (usize, usize) {
        *self.used.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for InFlightPermit {
    fn drop(&mut self) {
        let mut used = self.budget.used.lock().unwrap_or_else(|e| e.into_inner());
        used.0 -= 1;
        used.1 -= self.bytes;
    }
}

/// The `SYSTEM_BUSY` answer to `request` (Java's `[OVERLOAD]` remark), at `version`.
pub fn busy_response(request: &RemotingCommand, version: i32) -> RemotingCommand {
    RemotingCommand::response_to(request, ResponseCode::SYSTEM_BUSY)
        .with_version(version)
        .with_remark(OVERLOAD_REMARK)
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "opaque {}{}", self.opaque, if self.oneway { " (one-way)" } else { "" })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{FrameDecoder, RequestCode};

    fn t0() -> Instant {
        Instant::now()
    }

    fn cfg() -> ServerConfig {
        ServerConfig { max_in_flight: 2, ..ServerConfig::default() }
    }

    fn request(code: RequestCode, opaque: i32) -> Bytes {
        RemotingCommand::request(code).with_opaque(opaque).to_bytes().unwrap()
    }

    /// Everything the connection wants written, decoded.
    fn drain(c: &mut ServerConnection, now: Instant) -> Vec<RemotingCommand> {
        let mut wire = Vec::new();
        while let Some(b) = c.transmit() {
            let b = b.to_vec();
            c.handle_written(now, b.len()).unwrap();
            wire.extend_from_slice(&b);
        }
        let mut d = FrameDecoder::new();
        d.feed(&wire);
        std::iter::from_fn(|| d.decode().unwrap()).collect()
    }

    #[test]
    fn responses_go_out_in_any_order_with_their_request_s_opaque() {
        let now = t0();
        let mut c = ServerConnection::new(cfg(), now);
        let mut wire = request(RequestCode::GET_MAX_OFFSET, 7).to_vec();
        wire.extend_from_slice(&request(RequestCode::GET_MIN_OFFSET, 8));
        c.handle_read(now, &wire);
        let a = c.poll_request().unwrap();
        let b = c.poll_request().unwrap();
        assert_eq!((a.id.opaque, b.id.opaque, c.in_flight()), (7, 8, 2));
        c.respond(now, b.id, Some(RemotingCommand::response(ResponseCode::SUCCESS).with_remark("b")))
            .unwrap();
        c.respond(now, a.id, Some(RemotingCommand::response(ResponseCode::SUCCESS).with_remark("a")))
            .unwrap();
        let out = drain(&mut c, now);
        assert_eq!(
            out.iter().map(|r| (r.opaque, r.remark.clone().unwrap())).collect::<Vec<_>>(),
            [(8, "b".to_string()), (7, "a".to_string())]
        );
        assert!(out.iter().all(RemotingCommand::is_response));
        assert_eq!(c.respond(now, a.id, None), Err(ConnectionMisuse::UnknownRequest(a.id)), "answered twice");
    }

    #[test]
    fn a_request_beyond_the_in_flight_cap_is_answered_busy_at_once() {
        let now = t0();
        let mut c = ServerConnection::new(cfg(), now);
        for opaque in 1..=3 {
            c.handle_read(now, &request(RequestCode::PULL_MESSAGE, opaque));
        }
        let oneway = RemotingCommand::request(RequestCode::UPDATE_CONSUMER_OFFSET).with_opaque(4).oneway();
        c.handle_read(now, &oneway.to_bytes().unwrap());
        let out = drain(&mut c, now);
        assert_eq!(out.len(), 1, "the one-way request over the cap gets nothing");
        assert_eq!((out[0].opaque, out[0].code), (3, ResponseCode::SYSTEM_BUSY.0));
        assert_eq!(out[0].remark.as_deref(), Some(OVERLOAD_REMARK));
        assert_eq!(c.stats().busy, 2);
        assert!(c.poll_request().is_some() && c.poll_request().is_some() && c.poll_request().is_none());
    }

    #[test]
    fn the_response_to_a_oneway_request_is_dropped() {
        let now = t0();
        let mut c = ServerConnection::new(cfg(), now);
        let oneway = RemotingCommand::request(RequestCode::UPDATE_CONSUMER_OFFSET).with_opaque(4).oneway();
        c.handle_read(now, &oneway.to_bytes().unwrap());
        let r = c.poll_request().unwrap();
        c.respond(now, r.id, Some(RemotingCommand::response(ResponseCode::SUCCESS))).unwrap();
        assert!(c.transmit().is_none());
        assert_eq!(c.in_flight(), 0);
    }

    #[test]
    fn a_frame_over_the_limit_gets_a_typed_error_frame_then_the_close() {
        let now = t0();
        let mut c = ServerConnection::new(ServerConfig { max_frame_len: 64, ..cfg() }, now);
        c.handle_read(now, &1000i32.to_be_bytes());
        assert!(!c.wants_read());
        assert!(matches!(c.close_reason(), Some(CloseReason::Decode(DecodeError::FrameTooLarge { .. }))));
        assert!(!c.is_finished(), "the error frame goes first");
        let out = drain(&mut c, now);
        assert_eq!((out[0].opaque, out[0].code), (ERROR_FRAME_OPAQUE, ResponseCode::SYSTEM_ERROR.0));
        assert!(
            out[0].remark.as_deref().unwrap().contains("over the limit of 64 bytes"),
            "{:?}",
            out[0].remark
        );
        assert!(c.is_finished());
    }

    #[test]
    fn garbage_closes_with_the_decode_error() {
        let now = t0();
        let mut c = ServerConnection::new(cfg(), now);
        let mut garbage = 8i32.to_be_bytes().to_vec();
        garbage.extend_from_slice(&0x0000_0004u32.to_be_bytes());
        garbage.extend_from_slice(b"{{{{");
        c.handle_read(now, &garbage);
        let out = drain(&mut c, now);
        assert!(out[0].remark.as_deref().unwrap().starts_with("JSON header"), "{:?}", out[0].remark);
        assert!(c.poll_request().is_none() && c.is_finished());
    }

    #[test]
    fn a_frame_that_does_not_finish_in_time_is_closed_naming_what_is_missing() {
        let now = t0();
        let mut c = ServerConnection::new(cfg(), now);
        let wire = request(RequestCode::HEART_BEAT, 1);
        c.handle_read(now, &wire[..6]);
        let due = c.poll_timeout().unwrap();
        assert_eq!(due, now + Duration::from_secs(30));
        c.handle_timeout(due - Duration::from_millis(1));
        assert!(c.close_reason().is_none(), "not before the deadline");
        c.handle_timeout(due);
        let out = drain(&mut c, due);
        let remark = out[0].remark.clone().unwrap();
        assert!(remark.contains("6 bytes received") && remark.contains("missing"), "{remark}");
        assert!(c.is_finished());
    }

    #[test]
    fn eof_inside_a_frame_is_a_truncated_frame() {
        let now = t0();
        let mut c = ServerConnection::new(cfg(), now);
        c.handle_read(now, &request(RequestCode::HEART_BEAT, 1)[..9]);
        c.handle_read_closed(now);
        assert_eq!(c.close_reason(), Some(&CloseReason::TruncatedFrame { buffered: 9 }));
        assert!(c.is_finished());
    }

    #[test]
    fn an_idle_connection_closes_but_not_while_a_request_is_in_flight() {
        let now = t0();
        let mut c = ServerConnection::new(cfg(), now);
        c.handle_read(now, &request(RequestCode::PULL_MESSAGE, 1));
        let r = c.poll_request().unwrap();
        assert_eq!(c.poll_timeout(), None, "a held pull keeps the connection");
        let later = now + Duration::from_secs(500);
        c.handle_timeout(later);
        assert!(c.close_reason().is_none());
        c.respond(later, r.id, None).unwrap();
        assert_eq!(c.poll_timeout(), Some(now + Duration::from_secs(120)));
        c.handle_timeout(later);
        assert!(matches!(c.close_reason(), Some(CloseReason::Idle { .. })) && c.is_finished());
    }

    #[test]
    fn a_peer_that_reads_nothing_stops_reads_then_is_closed() {
        let now = t0();
        let mut c = ServerConnection::new(ServerConfig { max_queued_bytes: 100, ..cfg() }, now);
        c.handle_read(now, &request(RequestCode::QUERY_MESSAGE, 1));
        let r = c.poll_request().unwrap();
        c.respond(
            now,
            r.id,
            Some(RemotingCommand::response(ResponseCode::SUCCESS).with_body(vec![0u8; 500])),
        )
        .unwrap();
        assert!(!c.wants_read(), "500 bytes wait, over the 100-byte bound");
        c.handle_written(now + Duration::from_secs(20), 10).unwrap();
        c.handle_timeout(now + Duration::from_secs(40));
        assert!(c.close_reason().is_none(), "progress 20 s ago");
        c.handle_timeout(now + Duration::from_secs(50));
        assert!(matches!(c.close_reason(), Some(CloseReason::WriteStalled { .. })));
        assert!(c.is_finished(), "a stalled peer gets nothing more");
    }

    #[test]
    fn bodies_are_queued_without_a_copy() {
        let now = t0();
        let mut c = ServerConnection::new(cfg(), now);
        c.handle_read(now, &request(RequestCode::VIEW_MESSAGE_BY_ID, 1));
        let r = c.poll_request().unwrap();
        let body = Bytes::from(vec![7u8; 64]);
        c.respond(now, r.id, Some(RemotingCommand::response(ResponseCode::SUCCESS).with_body(body.clone())))
            .unwrap();
        let head = c.transmit().unwrap().len();
        c.handle_written(now, head).unwrap();
        assert_eq!(c.transmit().unwrap().as_ptr(), body.as_ptr());
        assert!(matches!(c.handle_written(now, 65), Err(ConnectionMisuse::WroteTooMuch { .. })));
    }

    #[test]
    fn a_write_may_take_several_chunks_and_end_inside_one() {
        let now = t0();
        let mut c = ServerConnection::new(cfg(), now);
        let mut wire = request(RequestCode::GET_MAX_OFFSET, 7).to_vec();
        wire.extend_from_slice(&request(RequestCode::GET_MIN_OFFSET, 8));
        c.handle_read(now, &wire);
        for (r, body) in [(c.poll_request().unwrap(), b"first"), (c.poll_request().unwrap(), b"other")] {
            let answer = RemotingCommand::response(ResponseCode::SUCCESS).with_body(body.to_vec());
            c.respond(now, r.id, Some(answer)).unwrap();
        }
        let all: Vec<u8> = c.transmit_chunks().flatten().copied().collect();
        assert_eq!(all.len(), c.queued_bytes());
        assert_eq!(c.transmit_chunks().count(), 4, "two heads and two bodies");
        // Past the first response and 3 bytes into the second's head.
        let first = all.len() / 2 + 3;
        c.handle_written(now, first).unwrap();
        let rest: Vec<u8> = c.transmit_chunks().flatten().copied().collect();
        assert_eq!(rest, all[first..]);
        assert!(matches!(c.handle_written(now, rest.len() + 1), Err(ConnectionMisuse::WroteTooMuch { .. })));
        c.handle_written(now, rest.len()).unwrap();
        assert!(c.transmit().is_none() && c.queued_bytes() == 0);
        let mut d = FrameDecoder::new();
        d.feed(&all);
        let opaques: Vec<i32> = std::iter::from_fn(|| d.decode().unwrap()).map(|r| r.opaque).collect();
        assert_eq!(opaques, [7, 8]);
    }

    #[test]
    fn server_commands_get_their_own_opaques() {
        let now = t0();
        let mut c = ServerConnection::new(cfg(), now);
        let notify = RemotingCommand::request(RequestCode::NOTIFY_CONSUMER_IDS_CHANGED).oneway();
        assert_eq!(c.send(now, notify.clone()), Some(1));
        assert_eq!(c.send(now, notify), Some(2));
        let out = drain(&mut c, now);
        assert!(out.iter().all(|c| c.is_oneway() && !c.is_response()));
    }

    #[test]
    fn connection_limits_cap_each_client_and_all_and_free_on_drop() {
        let limits = ConnectionLimits::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let p1 = limits.try_accept(a).unwrap();
        let _p2 = limits.try_accept(a).unwrap();
        assert_eq!(limits.try_accept(a).unwrap_err(), Refused::TooManyFromClient { client: a, max: 2 });
        let _p3 = limits.try_accept(b).unwrap();
        assert_eq!(limits.try_accept(b).unwrap_err(), Refused::TooManyConnections { max: 3 });
        drop(p1);
        assert_eq!(limits.open(), 2);
        assert!(limits.try_accept(a).is_ok());
    }

    #[test]
    fn the_in_flight_budget_caps_requests_and_bytes_and_frees_on_drop() {
        let budget = InFlightBudget::new(2, 100);
        let p = budget.try_acquire(60).unwrap();
        assert!(budget.try_acquire(60).is_none(), "120 bytes over 100");
        let q = budget.try_acquire(40).unwrap();
        assert!(budget.try_acquire(0).is_none(), "two requests at most");
        drop((p, q));
        assert_eq!(budget.used(), (0, 0));
        let big = budget.try_acquire(500).expect("alone, a request over the budget still passes");
        assert!(budget.try_acquire(1).is_none());
        drop(big);
    }
}
