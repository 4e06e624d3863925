//! One remoting connection on tokio: the driver loop of its [`ServerConnection`].
//!
//! The connection's requests are processed in its own task, not each in a task of its own:
//! a request that needs nothing it must wait for (a lookup, a heartbeat, most pulls) is
//! answered in the same pass that read it, and one that waits (a put for its slave's ack, a
//! held pull) stays in the connection's set of requests in flight and wakes the connection
//! when it can go on. Its answer then goes out with every other one ready, in one write.

use std::future::{Future, poll_fn};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Instant;

use futures_util::stream::{FuturesUnordered, StreamExt};
use logship_broker::{Connection, Outbound, RequestContext};
use logship_remoting::RemotingCommand;
use logship_remoting::server::{CloseReason, RequestId, ServerConnection, busy_response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use super::Shared;

/// A request being processed: its answer, with the id to answer it under, once done.
type Processing = Pin<Box<dyn Future<Output = (RequestId, Option<RemotingCommand>)> + Send>>;

/// What the broker hands the connection's driver from elsewhere.
enum Event {
    /// A command the broker starts.
    Send(RemotingCommand),
    /// The broker closes the connection.
    Close(String),
}

/// The broker-started commands of one connection, into its driver.
struct ChannelOutbound(mpsc::UnboundedSender<Event>);

impl Outbound for ChannelOutbound {
    fn send(&self, command: RemotingCommand) -> bool {
        self.0.send(Event::Send(command)).is_ok()
    }

    fn close(&self, reason: &str) {
        let _ = self.0.send(Event::Close(reason.to_string()));
    }
}

fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Runs one connection until it closes (the peer, a limit, or the broker's shutdown).
pub async fn run(
    stream: TcpStream,
    peer: SocketAddr,
    id: u64,
    shared: Arc<Shared>,
    mut stopped: watch::Receiver<bool>,
) {
    let local = stream.local_addr().unwrap_or(peer);
    let (mut rd, mut wr) = stream.into_split();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let connection = Arc::new(Connection::new(id, peer, local, Arc::new(ChannelOutbound(tx))));
    let broker = shared.broker.clone();
    broker.connection_opened(&connection);
    let mut conn = ServerConnection::new(shared.config.clone(), now());
    let mut buf = vec![0u8; 64 << 10];
    let mut processing: FuturesUnordered<Processing> = FuturesUnordered::new();
    let mut draining: Option<tokio::time::Instant> = None;
    let version = shared.config.version;
    // One timer for the connection's deadlines, re-armed only when a deadline comes earlier
    // than the one armed: deadlines mostly move later (each byte pushes them), and a timer that
    // fires early only makes a spurious `handle_timeout`, after which it is armed anew.
    let timer = tokio::time::sleep(std::time::Duration::ZERO);
    tokio::pin!(timer);
    let mut armed: Option<Instant> = None;
    loop {
        while let Some(request) = conn.poll_request() {
            let bytes = request.command.body.len() + 256;
            let Some(permit) = shared.budget.try_acquire(bytes) else {
                shared.stats.busy.fetch_add(1, Ordering::Relaxed);
                let busy = (!request.id.oneway).then(|| busy_response(&request.command, version));
                let _ = conn.respond(now(), request.id, busy);
                continue;
            };
            let ctx = RequestContext::new(broker.clone(), connection.clone());
            let id = request.id;
            processing.push(Box::pin(async move {
                let answer = logship_broker::dispatch::dispatch(ctx, request.command).await;
                drop(permit);
                (id, answer)
            }));
        }
        // Every request that can go on does, now; what finishes is answered at once.
        if !processing.is_empty() {
            poll_fn(|cx| {
                while let Poll::Ready(Some((id, answer))) = processing.poll_next_unpin(cx) {
                    answer_request(&mut conn, id, answer);
                }
                Poll::Ready(())
            })
            .await;
        }
        if conn.is_finished() {
            break;
        }
        if let Some(deadline) = draining {
            if conn.in_flight() == 0 && conn.transmit().is_none() {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                conn.close(now(), "the broker is shutting down");
                break;
            }
        }
        // Everything queued goes out now, as many responses as are ready in one write; the
        // socket's readiness is awaited only when it takes no more.
        let blocked = match flush(&mut conn, &wr) {
            Ok(blocked) => blocked,
            Err(Misuse(e)) => {
                warn!(%e, "remoting write accounting");
                break;
            }
        };
        if conn.is_finished() {
            break;
        }
        if let Some(due) = conn.poll_timeout()
            && armed.is_none_or(|a| due < a)
        {
            timer.as_mut().reset(tokio::time::Instant::from_std(due));
            armed = Some(due);
        }
        let reading = conn.wants_read() && draining.is_none();
        tokio::select! {
            read = rd.read(&mut buf), if reading => match read {
                Ok(0) => conn.handle_read_closed(now()),
                Ok(n) => conn.handle_read(now(), &buf[..n]),
                Err(e) => {
                    debug!(%e, "remoting read failed");
                    conn.handle_read_closed(now());
                }
            },
            ready = wr.writable(), if blocked => {
                if let Err(e) = ready {
                    debug!(%e, "remoting write failed");
                    conn.close(now(), format!("write failed: {e}"));
                }
            },
            Some((id, answer)) = processing.next(), if !processing.is_empty() => {
                answer_request(&mut conn, id, answer);
            },
            Some(event) = rx.recv() => {
                let mut next = Some(event);
                while let Some(event) = next {
                    handle_event(&mut conn, event);
                    next = rx.try_recv().ok();
                }
            },
            () = &mut timer, if armed.is_some() => {
                armed = None;
                conn.handle_timeout(now());
            },
            () = super::until_stopped(&mut stopped), if draining.is_none() => {
                draining = Some(tokio::time::Instant::now() + shared.drain_timeout);
            }
            () = sleep_until(draining), if draining.is_some() => {}
        }
    }
    let _ = wr.shutdown().await;
    // Every request read is carried out even though its answer has nowhere to go, as a Java
    // broker does: a client sends its last one-way messages and hangs up at once, and aborting
    // here lost them (or cut a put short). Each still holds its share of the in-flight budget
    // until it ends; a SYNC_MASTER send ends within slaveTimeout.
    for request in processing {
        tokio::spawn(request);
    }
    note_close(&shared, &conn);
    broker.connection_closed(&connection);
}

/// Queues a processor's answer.
fn answer_request(conn: &mut ServerConnection, id: RequestId, answer: Option<RemotingCommand>) {
    if let Err(e) = conn.respond(now(), id, answer) {
        warn!(%e, "remoting answer");
    }
}

/// Applies one event from elsewhere in the broker.
fn handle_event(conn: &mut ServerConnection, event: Event) {
    match event {
        Event::Send(command) => {
            let _ = conn.send(now(), command);
        }
        Event::Close(reason) => {
            info!(reason, "the broker closes the connection");
            conn.close(now(), reason);
        }
    }
}

/// The driver's own bug in reporting what was written.
struct Misuse(logship_remoting::server::ConnectionMisuse);

/// The most chunks one vectored write takes (Linux's `IOV_MAX` is 1024).
const MAX_WRITE_CHUNKS: usize = 256;

/// Writes what `conn` has queued until it is all written or the socket takes no more;
/// `Ok(true)` when output still waits for the socket. A failed write closes the connection.
fn flush(conn: &mut ServerConnection, wr: &tokio::net::tcp::OwnedWriteHalf) -> Result<bool, Misuse> {
    loop {
        let written = {
            let chunks: Vec<std::io::IoSlice<'_>> =
                conn.transmit_chunks().take(MAX_WRITE_CHUNKS).map(std::io::IoSlice::new).collect();
            if chunks.is_empty() {
                return Ok(false);
            }
            wr.try_write_vectored(&chunks)
        };
        match written {
            // A socket that takes nothing is waited for, as one that would block.
            Ok(0) => return Ok(true),
            Ok(n) => conn.handle_written(now(), n).map_err(Misuse)?,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                debug!(%e, "remoting write failed");
                conn.close(now(), format!("write failed: {e}"));
                return Ok(false);
            }
        }
    }
}

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Logs why the connection closed, and counts it.
fn note_close(shared: &Shared, conn: &ServerConnection) {
    let stats = conn.stats();
    shared.stats.busy.fetch_add(stats.busy, Ordering::Relaxed);
    match conn.close_reason() {
        Some(reason @ (CloseReason::Decode(_) | CloseReason::TruncatedFrame { .. })) => {
            shared.stats.bad_frames.fetch_add(1, Ordering::Relaxed);
            info!(reason = reason.kind(), error = %reason, requests = stats.requests, "remoting connection closed");
        }
        Some(
            reason @ (CloseReason::Idle { .. }
            | CloseReason::FrameTimeout { .. }
            | CloseReason::WriteStalled { .. }),
        ) => {
            shared.stats.timed_out.fetch_add(1, Ordering::Relaxed);
            info!(reason = reason.kind(), error = %reason, requests = stats.requests, "remoting connection closed");
        }
        Some(reason) => {
            debug!(reason = reason.kind(), requests = stats.requests, "remoting connection closed")
        }
        None => debug!(requests = stats.requests, "remoting connection closed"),
    }
}
