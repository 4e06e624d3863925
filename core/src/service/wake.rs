//! One wake-up of an adapter's task, and what the task makes of it: the adapter waits on its
//! channels, sockets and timer, names what woke it ([`MasterWake`], [`SlaveWake`]), and hands
//! that over; everything the outcome means (log lines, reconnects, when to stop) is decided
//! here. Also the small outcomes the adapters' socket code has: an accept, a master
//! connection's negotiation and its end, `TCP_NODELAY`, and a slave's TLS handshake.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use tracing::{info, warn};

use crate::ConnId;
use crate::log::{LogWrite, MessageLog, Offset};
use crate::service::tls::{Link, LinkKind};
use crate::service::{
    ACCEPT_RETRY, ConnSink, MasterStatus, MasterTask, Reply, Runtime, SlaveCommand, SlaveStatus, SlaveTask,
    TaskCommand, WaitSink,
};
use crate::time::Instant;

/// What woke a master service's core task; `C` is its command.
#[derive(Debug)]
pub enum MasterWake<C> {
    /// A put appended to the log without waiting for slaves, or queued a replication wait
    /// that asked to wake the task ([`WaitQueue`](crate::service::WaitQueue)).
    Appended,
    /// A command arrived; `None` once every sender is gone.
    Command(Option<C>),
    /// The instant the last turn returned has come.
    Timer,
}

impl<L: MessageLog, C: ConnSink, W: WaitSink, S: Reply<MasterStatus>, R: Reply<()>>
    MasterTask<L, C, W, S, R>
{
    /// Hands one wake-up to the task (a command with whatever `more` yields after it, as
    /// [`apply_batch`](Self::apply_batch) does) and ends the turn ([`settle`](Self::settle)):
    /// returns when to wake next, or `None` once the task should stop (a shutdown was asked
    /// and no replication wait is left, or every command sender is gone). The adapter stops
    /// accepting once [`is_stopping`](Self::is_stopping), and after `None` calls
    /// [`stop`](Self::stop).
    pub fn wake(
        &mut self,
        now: Instant,
        wake: MasterWake<TaskCommand<C, W, S, R>>,
        more: impl FnMut() -> Option<TaskCommand<C, W, S, R>>,
    ) -> Option<Instant> {
        self.take_waits(now);
        match wake {
            MasterWake::Appended => self.appended(now),
            MasterWake::Command(Some(first)) => self.apply_batch(now, first, more),
            MasterWake::Command(None) => return None,
            MasterWake::Timer => self.timer(now),
        }
        self.settle(now)
    }

    /// The end of the core task: makes the log durable up to
    /// [`flush_target`](Self::flush_target), giving up after `limit` (`sync_flush_timeout`) on
    /// `runtime`'s timer, and [`finish`](Self::finish)es.
    pub async fn stop<Rt: Runtime>(self, runtime: &Rt, limit: Duration) {
        let durable = self.log().durable(self.flush_target());
        let flushed = runtime.within(limit, durable).await;
        self.finish(flushed);
    }
}

impl<C, W, S, R> TaskCommand<C, W, S, R> {
    /// [`MasterCommand::Closed`](crate::service::MasterCommand::Closed) for a connection whose
    /// task `ended` (why, or the I/O error that ended it), which it logs.
    pub fn ended(conn: ConnId, ended: io::Result<&'static str>) -> Self {
        match ended {
            Ok(why) => info!(why, "slave connection ended"),
            Err(e) => warn!(%e, "slave connection failed"),
        }
        Self::closed(conn)
    }
}

/// Numbers a master's accepted connections, and says what to do after each accept.
#[derive(Debug, Default)]
pub struct Accepts {
    last: u64,
}

impl Accepts {
    /// The connection an accept made, numbered; or, after a failed accept (out of descriptors,
    /// say), which it logs, how long to pause before accepting again.
    pub fn accepted<S>(
        &mut self,
        result: io::Result<(S, SocketAddr)>,
    ) -> Result<(ConnId, S, SocketAddr), Duration> {
        match result {
            Ok((stream, peer)) => {
                self.last += 1;
                Ok((ConnId(self.last), stream, peer))
            }
            Err(e) => {
                warn!(%e, "accept failed");
                Err(ACCEPT_RETRY)
            }
        }
    }
}

/// Negotiates a master connection (TLS configured). `peeked` is what a peek at its first byte
/// returned (nothing: the stream ended first). A TLS handshake runs `handshake` on `stream`,
/// which returns the link it made and the stream to go on with; any other first byte goes on
/// with `stream` as it is. Returns the link to report before any byte is forwarded
/// ([`TaskCommand::negotiated`]; none when the stream ended first), and the stream, or why the
/// connection ends.
pub async fn negotiate<S, F>(
    peeked: &[u8],
    stream: S,
    handshake: impl FnOnce(S) -> F,
) -> (Option<Link>, Result<S, &'static str>)
where
    F: Future<Output = io::Result<(Link, S)>>,
{
    match LinkKind::from_peek(peeked) {
        None => (None, Err("end of stream before the first byte")),
        Some(LinkKind::Plain) => (Some(Link::Plain), Ok(stream)),
        Some(LinkKind::Tls) => match handshake(stream).await {
            Ok((link, stream)) => (Some(link), Ok(stream)),
            Err(e) => (Some(Link::failed(&e)), Err("TLS handshake failed")),
        },
    }
}

/// Logs a failure to set `TCP_NODELAY` on a new connection, which goes on without it.
pub fn nodelay_set(result: io::Result<()>) {
    if let Err(e) = result {
        warn!(%e, "cannot set TCP_NODELAY");
    }
}

/// The error a slave's failed TLS handshake ends its connect with: the kind kept, the text
/// saying it was the handshake.
pub fn handshake_failed(e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("TLS handshake: {e}"))
}

/// What woke a slave service's task; `S` is its stream, `C` its command.
#[derive(Debug)]
pub enum SlaveWake<S, C> {
    /// A command arrived; `None` once every sender is gone.
    Command(Option<C>),
    /// A read of [`SlaveTask::readable`] ended: bytes (empty at the end of the stream) or an
    /// error.
    Read(io::Result<Bytes>),
    /// A connect ended: connected (with TLS, handshake done), failed, or, `None`, not within
    /// `connect_timeout`.
    Connected(Option<io::Result<S>>),
    /// A flush ended: the offset now durable, or why not.
    Flushed(Result<Offset, String>),
    /// The instant of the last `SleepUntil` has come.
    Timer,
}

impl<L: LogWrite, S> SlaveTask<L, S> {
    /// The connection to read from now: the stream, while [`wants_read`](Self::wants_read).
    pub fn readable(&mut self) -> Option<&mut S> {
        if self.wants_read() { self.stream() } else { None }
    }

    /// Hands one wake-up to the task. `Break` once the task should stop, with the shutdown's
    /// reply when a shutdown stopped it (`None` when every sender is gone), which goes to
    /// [`stopped`](Self::stopped) after the last flush.
    pub fn wake<T: Reply<SlaveStatus>, R>(
        &mut self,
        now: Instant,
        wake: SlaveWake<S, SlaveCommand<T, R>>,
    ) -> ControlFlow<Option<R>> {
        match wake {
            SlaveWake::Command(None) => return ControlFlow::Break(None),
            SlaveWake::Command(Some(command)) => {
                if let Some(reply) = self.command(now, command) {
                    return ControlFlow::Break(Some(reply));
                }
            }
            SlaveWake::Read(read) => self.read_done(now, read),
            SlaveWake::Connected(connected) => {
                let timed_out = || Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"));
                self.connect_done(now, connected.unwrap_or_else(timed_out));
            }
            SlaveWake::Flushed(flushed) => self.flush_done(now, flushed),
            SlaveWake::Timer => self.handle_timeout(now),
        }
        ControlFlow::Continue(())
    }
}

impl<L: LogWrite, S> SlaveTask<L, S> {
    /// The end of the slave's task, after [`wake`](Self::wake) said stop with `reply`: waits
    /// for a flush still `running`, makes the log durable once more with `flush` (the adapter's
    /// `LogWrite::flush` off its async threads), and answers as [`stopped`](Self::stopped) does.
    pub async fn stop<R: Reply<()>, F: Future<Output = Result<Offset, String>>>(
        self,
        running: Option<impl Future>,
        flush: impl FnOnce(&Arc<L>) -> F,
        reply: Option<R>,
    ) {
        if let Some(running) = running {
            running.await;
        }
        let flushed = flush(self.log()).await;
        self.stopped(flushed, reply);
    }
}
