//! What an adapter implements over its own channels: connection sinks, wait and status
//! replies, and the commands its tasks send to the task that owns a [`MasterDriver`].

use crate::time::Instant;
use std::net::SocketAddr;

use bytes::Bytes;

use crate::ConnId;
use crate::classic::frame::PUSH_HEADER_LEN;
use crate::error::WaitError;
use crate::log::{LogSpan, Offset};
use crate::service::tls::Link;

/// An adapter's reply channel for one answer (a status, a wait outcome).
pub trait Reply<T> {
    /// Delivers the answer; a receiver that is gone is ignored.
    fn send(self, value: T);
}

/// What an adapter's connection tasks and handles send to the task that owns the
/// [`MasterDriver`](super::MasterDriver). `C` is the adapter's [`ConnSink`], `W` its wait reply, `S` its status reply.
pub enum MasterCommand<C, W, S> {
    /// A slave connected; the adapter chose `conn`.
    Accepted {
        /// The connection.
        conn: ConnId,
        /// The slave's address.
        peer: SocketAddr,
        /// The connection's writer.
        sink: C,
    },
    /// A connection's negotiation ended (only with TLS configured, `admission.tls`): the adapter
    /// peeked at its first byte and, for TLS, ran the handshake. Send it before any `Received`
    /// for the connection; bytes before it are dropped.
    Negotiated {
        /// The connection.
        conn: ConnId,
        /// What it turned out to be.
        link: Link,
    },
    /// Bytes from a slave.
    Received {
        /// The connection.
        conn: ConnId,
        /// The bytes.
        data: Bytes,
    },
    /// A connection's writer finished one transmit.
    Sent {
        /// The connection.
        conn: ConnId,
    },
    /// A connection's teardown finished.
    Closed {
        /// The connection.
        conn: ConnId,
    },
    /// A SYNC_MASTER put waits for `offset` until `deadline`.
    Wait {
        /// The put's end offset.
        offset: Offset,
        /// When to give up.
        deadline: Instant,
        /// Where the outcome goes.
        reply: W,
    },
    /// A status snapshot is wanted.
    Status {
        /// Where it goes.
        reply: S,
    },
}

/// One frame for a connection's writer: write `header`, then the log bytes of `body`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// The classic 12-byte push header, or an AutoSwitch header.
    pub header: FrameHeader,
    /// The log bytes to follow; `None` for a heartbeat.
    pub body: Option<LogSpan>,
}

/// The bytes a frame starts with: the classic protocol's 12-byte push header (kept inline, no
/// allocation), or an AutoSwitch header of any length (a handshake reply with its epochs, a
/// 36-byte transfer header).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameHeader(HeaderBytes);

#[derive(Clone, Debug, PartialEq, Eq)]
enum HeaderBytes {
    Push([u8; PUSH_HEADER_LEN]),
    Shared(Bytes),
}

impl From<[u8; PUSH_HEADER_LEN]> for FrameHeader {
    fn from(header: [u8; PUSH_HEADER_LEN]) -> Self {
        Self(HeaderBytes::Push(header))
    }
}

impl From<Bytes> for FrameHeader {
    fn from(header: Bytes) -> Self {
        Self(HeaderBytes::Shared(header))
    }
}

impl std::ops::Deref for FrameHeader {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match &self.0 {
            HeaderBytes::Push(header) => header,
            HeaderBytes::Shared(header) => header,
        }
    }
}

/// An adapter's handle on one connection's writer.
pub trait ConnSink {
    /// Queues a frame for the writer. The core never has more than `max_inflight` frames out
    /// per connection, so a channel of that capacity never overflows. A writer that is gone can
    /// be ignored: its connection's teardown will report `closed`.
    fn transmit(&mut self, transmit: Transmit);

    /// Stops both directions of the connection. The connection's teardown must still call
    /// [`MasterDriver::closed`](super::MasterDriver::closed) exactly once.
    fn close(&mut self);
}

/// An adapter's reply channel for one replication wait.
pub trait WaitSink {
    /// Delivers the outcome. Called exactly once.
    fn complete(self, result: Result<Offset, WaitError>);
}

/// Every reply channel for a wait outcome is a wait sink, so an adapter needs one reply type
/// for statuses, waits and shutdowns alike.
impl<R: Reply<Result<Offset, WaitError>>> WaitSink for R {
    fn complete(self, result: Result<Offset, WaitError>) {
        self.send(result);
    }
}
