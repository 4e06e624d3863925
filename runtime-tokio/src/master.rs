//! The master service on tokio.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::{Bytes, BytesMut};
use logship_core::service::tls::{Link, LinkKind, MasterTls};
use logship_core::service::{
    ConnSink, MasterCommand, MasterDriver, MasterServiceConfig, MasterStatus, PendingPut, Reply, StartError,
    Transmit, WaitSink,
};
use logship_core::{ConnId, MessageLog, Offset, PutResult, WaitError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{Instrument, info, info_span, warn};

use crate::{io::write_frame, now, timer_at};

/// Capacity of the channel into the core task.
const COMMAND_QUEUE: usize = 4096;
/// Initial read buffer of a connection.
const READ_BUFFER: usize = 4096;

enum Command {
    Driver(MasterCommand<ConnHandle, WaitReply, StatusReply>),
    Shutdown { reply: oneshot::Sender<()> },
}

impl Command {
    fn received(conn: ConnId, data: Bytes) -> Self {
        Self::Driver(MasterCommand::Received { conn, data })
    }
}

/// The core task's handle on one connection.
struct ConnHandle {
    frames: mpsc::Sender<Transmit>,
    close: Option<oneshot::Sender<()>>,
}

impl ConnSink for ConnHandle {
    fn transmit(&mut self, transmit: Transmit) {
        // Capacity is max_inflight, which the core never exceeds; a full or closed channel means
        // the writer is gone and the teardown will report Closed.
        let _ = self.frames.try_send(transmit);
    }

    fn close(&mut self) {
        if let Some(close) = self.close.take() {
            let _ = close.send(());
        }
    }
}

struct WaitReply(oneshot::Sender<Result<Offset, WaitError>>);

impl WaitSink for WaitReply {
    fn complete(self, result: Result<Offset, WaitError>) {
        let _ = self.0.send(result);
    }
}

struct StatusReply(oneshot::Sender<MasterStatus>);

impl Reply<MasterStatus> for StatusReply {
    fn send(self, status: MasterStatus) {
        let _ = self.0.send(status);
    }
}

struct Shared<L> {
    log: Arc<L>,
    config: MasterServiceConfig,
    commands: mpsc::Sender<Command>,
    appended: Notify,
    stopping: AtomicBool,
    /// The driver refuses puts (see `logship_core::service::Fence`); published by the core task.
    fenced: AtomicBool,
    local_addr: SocketAddr,
    runtime: tokio::runtime::Handle,
}

/// A running master: puts messages, reports status, shuts down. Cheap to clone.
pub struct MasterHandle<L> {
    shared: Arc<Shared<L>>,
}

impl<L> Clone for MasterHandle<L> {
    fn clone(&self) -> Self {
        Self { shared: self.shared.clone() }
    }
}

/// Binds `listen` and starts a master service for `log` on the current tokio runtime.
pub async fn spawn_master<L: MessageLog>(
    config: MasterServiceConfig,
    log: Arc<L>,
    listen: SocketAddr,
) -> Result<MasterHandle<L>, StartError> {
    config.validate_with(&*log)?;
    let listener =
        TcpListener::bind(listen).await.map_err(|source| StartError::Bind { addr: listen, source })?;
    let local_addr = listener.local_addr().map_err(|source| StartError::Bind { addr: listen, source })?;
    let driver = MasterDriver::for_service(&config, now(), log.clone())?;
    let (commands, rx) = mpsc::channel(COMMAND_QUEUE);
    let shared = Arc::new(Shared {
        log,
        config,
        commands,
        appended: Notify::new(),
        stopping: AtomicBool::new(false),
        fenced: AtomicBool::new(driver.fence().is_some()),
        local_addr,
        runtime: tokio::runtime::Handle::current(),
    });
    let accept = tokio::spawn(accept_loop(listener, shared.clone()));
    let span = info_span!("ha_master", listen = %local_addr);
    tokio::spawn(core_task(driver, rx, shared.clone(), accept).instrument(span));
    info!(listen = %local_addr, role = shared.config.role.rocketmq_name(), "HA master listening");
    Ok(MasterHandle { shared })
}

impl<L: MessageLog> MasterHandle<L> {
    /// The address slaves connect to.
    pub fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    /// The log.
    pub fn log(&self) -> &Arc<L> {
        &self.shared.log
    }

    /// Appends `message`, then waits as the role requires: for the disk under SYNC_FLUSH (up to
    /// `sync_flush_timeout`) and, on a SYNC_MASTER, for the slaves the ack policy needs (up to
    /// `slave_timeout`). The two waits run side by side; neither depends on the other.
    pub async fn put(&self, message: L::Message) -> PutResult {
        let shared = &self.shared;
        let refused = shared.stopping.load(Ordering::Acquire) || shared.fenced.load(Ordering::Acquire);
        let pending = match PendingPut::start(&shared.config, &*shared.log, message, refused) {
            Ok(pending) => pending,
            Err(done) => return done,
        };
        let (end, flush, replicate) = (pending.end(), pending.flush, pending.replicate);
        let flushed = async {
            if !flush {
                return None;
            }
            let durable = {
                let _context = shared.runtime.enter();
                tokio::time::timeout(shared.config.sync_flush_timeout, shared.log.durable(end))
            };
            Some(matches!(durable.await, Ok(Ok(_))))
        };
        let replicated = async {
            if !replicate {
                shared.appended.notify_one();
                return None;
            }
            let (reply, done) = oneshot::channel();
            let deadline = now() + shared.config.slave_timeout;
            let wait = MasterCommand::Wait { offset: end, deadline, reply: WaitReply(reply) };
            if shared.commands.send(Command::Driver(wait)).await.is_err() {
                return Some(Err(WaitError::Cancelled));
            }
            Some(done.await.unwrap_or(Err(WaitError::Cancelled)))
        };
        let (flushed, replicated) = tokio::join!(flushed, replicated);
        pending.finish(flushed, replicated)
    }

    /// A status snapshot: offsets and every slave's ack, lag and sync state.
    pub async fn status(&self) -> Option<MasterStatus> {
        let (reply, rx) = oneshot::channel();
        let status = MasterCommand::Status { reply: StatusReply(reply) };
        self.shared.commands.send(Command::Driver(status)).await.ok()?;
        rx.await.ok()
    }

    /// Stops accepting, lets pending replication waits finish (each ends by its deadline),
    /// flushes the log, and closes every connection. Later puts are refused.
    pub async fn shutdown(&self) {
        self.shared.stopping.store(true, Ordering::Release);
        let (reply, rx) = oneshot::channel();
        if self.shared.commands.send(Command::Shutdown { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }
}

async fn accept_loop<L: MessageLog>(listener: TcpListener, shared: Arc<Shared<L>>) {
    let mut next = 0u64;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                warn!(%e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        next += 1;
        let conn = ConnId(next);
        if let Err(e) = stream.set_nodelay(true) {
            warn!(%e, %peer, "cannot set TCP_NODELAY");
        }
        let (frames, frames_rx) = mpsc::channel(shared.config.core.max_inflight as usize);
        let (close, close_rx) = oneshot::channel();
        let sink = ConnHandle { frames, close: Some(close) };
        if shared.commands.send(Command::Driver(MasterCommand::Accepted { conn, peer, sink })).await.is_err()
        {
            return;
        }
        let span = info_span!("ha_conn", role = "master", conn = conn.0, peer = %peer);
        tokio::spawn(connection(stream, conn, frames_rx, close_rx, shared.clone()).instrument(span));
    }
}

/// A negotiated TLS link.
type TlsStream = tokio_rustls::server::TlsStream<TcpStream>;

/// What a connection turned out to be once negotiated.
enum Negotiated {
    Plain(TcpStream),
    Tls(Box<TlsStream>),
    /// Ended before or during negotiation; the driver has been told what it needs.
    Ended(&'static str),
}

/// One connection: negotiated first when TLS is configured (the core's first-report deadline
/// covers it); then its read path and write path run together; whichever ends first ends both,
/// and `Closed` is reported exactly once.
async fn connection<L: MessageLog>(
    stream: TcpStream,
    conn: ConnId,
    frames: mpsc::Receiver<Transmit>,
    mut close: oneshot::Receiver<()>,
    shared: Arc<Shared<L>>,
) {
    info!("slave connected");
    let negotiated = match &shared.config.admission.tls {
        None => Ok(Negotiated::Plain(stream)),
        Some(tls) => tokio::select! {
            n = negotiate(stream, tls, conn, &shared.commands) => n,
            _ = &mut close => Ok(Negotiated::Ended("closed by the master while negotiating")),
        },
    };
    let ended = match negotiated {
        Ok(Negotiated::Plain(stream)) => {
            let (rd, wr) = stream.into_split();
            serve(rd, wr, conn, frames, close, &shared).await
        }
        Ok(Negotiated::Tls(stream)) => {
            let (rd, wr) = tokio::io::split(*stream);
            serve(rd, wr, conn, frames, close, &shared).await
        }
        Ok(Negotiated::Ended(why)) => Ok(why),
        Err(e) => Err(e),
    };
    match ended {
        Ok(why) => info!(why, "slave connection ended"),
        Err(e) => warn!(%e, "slave connection failed"),
    }
    let _ = shared.commands.send(Command::Driver(MasterCommand::Closed { conn })).await;
}

/// Peeks at the first byte, runs the TLS handshake if it starts one, and tells the driver
/// (which decides what the link may do) before any byte of it is forwarded.
async fn negotiate(
    stream: TcpStream,
    tls: &MasterTls,
    conn: ConnId,
    commands: &mpsc::Sender<Command>,
) -> io::Result<Negotiated> {
    let mut first = [0u8; 1];
    if stream.peek(&mut first).await? == 0 {
        return Ok(Negotiated::Ended("end of stream before the first byte"));
    }
    let (link, negotiated) = match LinkKind::classify(first[0]) {
        LinkKind::Plain => (Link::Plain, Negotiated::Plain(stream)),
        LinkKind::Tls => match tokio_rustls::TlsAcceptor::from(tls.server_config()).accept(stream).await {
            Ok(stream) => {
                let peer_certificates = stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .map(|certs| certs.iter().map(|c| c.clone().into_owned()).collect())
                    .unwrap_or_default();
                (Link::Tls { peer_certificates }, Negotiated::Tls(Box::new(stream)))
            }
            Err(e) => (Link::TlsFailed { error: e.to_string() }, Negotiated::Ended("TLS handshake failed")),
        },
    };
    let _ = commands.send(Command::Driver(MasterCommand::Negotiated { conn, link })).await;
    Ok(negotiated)
}

async fn serve<L: MessageLog, R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    rd: R,
    wr: W,
    conn: ConnId,
    frames: mpsc::Receiver<Transmit>,
    close: oneshot::Receiver<()>,
    shared: &Shared<L>,
) -> io::Result<&'static str> {
    tokio::select! {
        r = read_path(rd, conn, &shared.commands) => r.map(|()| "end of stream"),
        r = write_path(wr, conn, frames, shared) => r.map(|()| "writer stopped"),
        _ = close => Ok("closed by the master"),
    }
}

async fn read_path<R: AsyncRead + Unpin>(
    mut rd: R,
    conn: ConnId,
    commands: &mpsc::Sender<Command>,
) -> io::Result<()> {
    let mut buf = BytesMut::with_capacity(READ_BUFFER);
    loop {
        buf.reserve(64);
        if rd.read_buf(&mut buf).await? == 0 {
            return Ok(());
        }
        let data = buf.split().freeze();
        if commands.send(Command::received(conn, data)).await.is_err() {
            return Ok(());
        }
    }
}

async fn write_path<L: MessageLog, W: AsyncWrite + Unpin>(
    mut wr: W,
    conn: ConnId,
    mut frames: mpsc::Receiver<Transmit>,
    shared: &Shared<L>,
) -> io::Result<()> {
    while let Some(t) = frames.recv().await {
        let body = match t.body {
            Some(span) => {
                shared.log.read(span).map_err(|e| io::Error::other(format!("reading {span:?}: {e}")))?
            }
            None => Bytes::new(),
        };
        write_frame(&mut wr, &t.header, &body).await?;
        if shared.commands.send(Command::Driver(MasterCommand::Sent { conn })).await.is_err() {
            break;
        }
    }
    Ok(())
}

async fn core_task<L: MessageLog>(
    mut driver: MasterDriver<ConnHandle, WaitReply>,
    mut commands: mpsc::Receiver<Command>,
    shared: Arc<Shared<L>>,
    accept: JoinHandle<()>,
) {
    let mut stopping: Option<oneshot::Sender<()>> = None;
    let sleep = tokio::time::sleep_until(timer_at(driver.drain()));
    tokio::pin!(sleep);
    loop {
        tokio::select! {
            biased;
            () = shared.appended.notified() => driver.log_changed(now(), shared.log.bounds()),
            command = commands.recv() => {
                let Some(command) = command else { break };
                let mut next = Some(command);
                while let Some(command) = next {
                    match command {
                        Command::Shutdown { reply } => {
                            accept.abort();
                            stopping = Some(reply);
                        }
                        Command::Driver(c) => driver.apply(now(), c, &*shared.log, shared.config.role),
                    }
                    next = commands.try_recv().ok();
                }
            }
            () = &mut sleep => {
                let at = now();
                driver.log_changed(at, shared.log.bounds());
                driver.handle_timeout(at);
            }
        }
        if stopping.is_some() && driver.pending_waits() == 0 {
            break;
        }
        let deadline = timer_at(driver.drain());
        shared.fenced.store(driver.fence().is_some(), Ordering::Release);
        if sleep.deadline() != deadline {
            sleep.as_mut().reset(deadline);
        }
    }
    let end = shared.log.bounds().max;
    if tokio::time::timeout(shared.config.sync_flush_timeout, shared.log.durable(end)).await.is_err() {
        warn!(end, "flush at shutdown timed out");
    }
    driver.shutdown();
    info!("HA master stopped");
    if let Some(reply) = stopping {
        let _ = reply.send(());
    }
}
