//! The master service on async-io / async-net.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_channel::{Receiver, Sender, bounded};
use async_io::Timer;
use async_net::{TcpListener, TcpStream};
use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, FutureExt};
use logship_core::service::tls::{Link, LinkKind, MasterTls};
use logship_core::service::{
    ConnSink, MasterCommand, MasterDriver, MasterServiceConfig, MasterStatus, PendingPut, Reply, StartError,
    Transmit, WaitSink,
};
use logship_core::{ConnId, MessageLog, Offset, PutResult, WaitError};
use tracing::{Instrument, info, info_span, warn};

use crate::{Budget, Spawn, now, timer_at, write_frame};

/// Capacity of the channel into the core task.
const COMMAND_QUEUE: usize = 4096;
/// Read buffer of a connection; refilled when less than a quarter is left.
const READ_BUFFER: usize = 4096;

enum Command {
    Driver(MasterCommand<ConnHandle, WaitReply, StatusReply>),
    Shutdown { reply: Sender<()> },
}

impl Command {
    fn received(conn: ConnId, data: Bytes) -> Self {
        Self::Driver(MasterCommand::Received { conn, data })
    }
}

/// The core task's handle on one connection.
struct ConnHandle {
    frames: Sender<Transmit>,
    /// Dropping it ends the connection.
    close: Option<Sender<()>>,
}

impl ConnSink for ConnHandle {
    fn transmit(&mut self, transmit: Transmit) {
        // Capacity is max_inflight, which the core never exceeds; a full or closed channel means
        // the writer is gone and the teardown will report Closed.
        let _ = self.frames.try_send(transmit);
    }

    fn close(&mut self) {
        self.close = None;
    }
}

struct WaitReply(Sender<Result<Offset, WaitError>>);

impl WaitSink for WaitReply {
    fn complete(self, result: Result<Offset, WaitError>) {
        let _ = self.0.try_send(result);
    }
}

struct StatusReply(Sender<MasterStatus>);

impl Reply<MasterStatus> for StatusReply {
    fn send(self, status: MasterStatus) {
        let _ = self.0.try_send(status);
    }
}

struct Shared<L> {
    log: Arc<L>,
    config: MasterServiceConfig,
    commands: Sender<Command>,
    /// A one-slot wake-up: puts `try_send` into it, so wakes coalesce.
    appended: Sender<()>,
    stopping: AtomicBool,
    /// The driver refuses puts (see `logship_core::service::Fence`); published by the core task.
    fenced: AtomicBool,
    local_addr: SocketAddr,
    spawner: Arc<dyn Spawn>,
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

/// Binds `listen` and starts a master service for `log`, running its tasks on `spawner`.
pub async fn spawn_master<L: MessageLog>(
    config: MasterServiceConfig,
    log: Arc<L>,
    listen: SocketAddr,
    spawner: impl Spawn,
) -> Result<MasterHandle<L>, StartError> {
    config.validate_with(&*log)?;
    let listener =
        TcpListener::bind(listen).await.map_err(|source| StartError::Bind { addr: listen, source })?;
    let local_addr = listener.local_addr().map_err(|source| StartError::Bind { addr: listen, source })?;
    let driver = MasterDriver::for_service(&config, now(), log.clone())?;
    let (commands, commands_rx) = bounded(COMMAND_QUEUE);
    let (appended, appended_rx) = bounded(1);
    let (stop_accepting, stop_accepting_rx) = bounded::<()>(1);
    let shared = Arc::new(Shared {
        log,
        config,
        commands,
        appended,
        stopping: AtomicBool::new(false),
        fenced: AtomicBool::new(driver.fence().is_some()),
        local_addr,
        spawner: Arc::new(spawner),
    });
    shared.spawner.spawn(Box::pin(accept_loop(listener, shared.clone(), stop_accepting_rx)));
    let span = info_span!("ha_master", listen = %local_addr);
    let core = core_task(driver, commands_rx, appended_rx, shared.clone(), stop_accepting).instrument(span);
    shared.spawner.spawn(Box::pin(core));
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
            let durable = async { shared.log.durable(end).await.is_ok() };
            let timeout = async {
                Timer::after(shared.config.sync_flush_timeout).await;
                false
            };
            Some(durable.or(timeout).await)
        };
        let replicated = async {
            if !replicate {
                let _ = shared.appended.try_send(());
                return None;
            }
            let (reply, done) = bounded(1);
            let deadline = now() + shared.config.slave_timeout;
            let wait = MasterCommand::Wait { offset: end, deadline, reply: WaitReply(reply) };
            if shared.commands.send(Command::Driver(wait)).await.is_err() {
                return Some(Err(WaitError::Cancelled));
            }
            Some(done.recv().await.unwrap_or(Err(WaitError::Cancelled)))
        };
        let (flushed, replicated) = futures_lite::future::zip(flushed, replicated).await;
        pending.finish(flushed, replicated)
    }

    /// A status snapshot: offsets and every slave's ack, lag and sync state.
    pub async fn status(&self) -> Option<MasterStatus> {
        let (reply, rx) = bounded(1);
        let status = MasterCommand::Status { reply: StatusReply(reply) };
        self.shared.commands.send(Command::Driver(status)).await.ok()?;
        rx.recv().await.ok()
    }

    /// Stops accepting, lets pending replication waits finish (each ends by its deadline),
    /// flushes the log, and closes every connection. Later puts are refused.
    pub async fn shutdown(&self) {
        self.shared.stopping.store(true, Ordering::Release);
        let (reply, rx) = bounded(1);
        if self.shared.commands.send(Command::Shutdown { reply }).await.is_ok() {
            let _ = rx.recv().await;
        }
    }
}

async fn accept_loop<L: MessageLog>(listener: TcpListener, shared: Arc<Shared<L>>, stop: Receiver<()>) {
    let mut next = 0u64;
    loop {
        let accepted = async { Some(listener.accept().await) }.or(async {
            let _ = stop.recv().await;
            None
        });
        let (stream, peer) = match accepted.await {
            None => return,
            Some(Ok(accepted)) => accepted,
            Some(Err(e)) => {
                warn!(%e, "accept failed");
                Timer::after(std::time::Duration::from_millis(100)).await;
                continue;
            }
        };
        next += 1;
        let conn = ConnId(next);
        if let Err(e) = stream.set_nodelay(true) {
            warn!(%e, %peer, "cannot set TCP_NODELAY");
        }
        let (frames, frames_rx) = bounded(shared.config.core.max_inflight as usize);
        let (close, close_rx) = bounded(1);
        let sink = ConnHandle { frames, close: Some(close) };
        if shared.commands.send(Command::Driver(MasterCommand::Accepted { conn, peer, sink })).await.is_err()
        {
            return;
        }
        let span = info_span!("ha_conn", role = "master", conn = conn.0, peer = %peer);
        let task = connection(stream, conn, frames_rx, close_rx, shared.clone()).instrument(span);
        shared.spawner.spawn(Box::pin(task));
    }
}

/// A negotiated TLS link.
type TlsStream = futures_rustls::server::TlsStream<TcpStream>;

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
    frames: Receiver<Transmit>,
    close: Receiver<()>,
    shared: Arc<Shared<L>>,
) {
    info!("slave connected");
    let negotiated = match &shared.config.admission.tls {
        None => Ok(Negotiated::Plain(stream)),
        Some(tls) => {
            let closed = async {
                let _ = close.recv().await;
                Ok(Negotiated::Ended("closed by the master while negotiating"))
            };
            negotiate(stream, tls, conn, &shared.commands).or(closed).await
        }
    };
    let ended = match negotiated {
        Ok(Negotiated::Plain(stream)) => serve(stream.clone(), stream, conn, frames, &close, &shared).await,
        Ok(Negotiated::Tls(stream)) => {
            let (rd, wr) = futures_lite::io::split(*stream);
            serve(rd, wr, conn, frames, &close, &shared).await
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
    commands: &Sender<Command>,
) -> io::Result<Negotiated> {
    let mut first = [0u8; 1];
    if stream.peek(&mut first).await? == 0 {
        return Ok(Negotiated::Ended("end of stream before the first byte"));
    }
    let (link, negotiated) = match LinkKind::classify(first[0]) {
        LinkKind::Plain => (Link::Plain, Negotiated::Plain(stream)),
        LinkKind::Tls => match futures_rustls::TlsAcceptor::from(tls.server_config()).accept(stream).await {
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
    frames: Receiver<Transmit>,
    close: &Receiver<()>,
    shared: &Shared<L>,
) -> io::Result<&'static str> {
    let read = read_path(rd, conn, &shared.commands);
    let write = write_path(wr, conn, frames, shared);
    let closed = async {
        let _ = close.recv().await;
        Ok("closed by the master")
    };
    async { read.await.map(|()| "end of stream") }
        .or(async { write.await.map(|()| "writer stopped") })
        .or(closed)
        .await
}

async fn read_path<R: AsyncRead + Unpin>(
    mut stream: R,
    conn: ConnId,
    commands: &Sender<Command>,
) -> io::Result<()> {
    let mut buf = BytesMut::new();
    let mut budget = Budget::default();
    loop {
        budget.tick().await;
        if buf.len() < READ_BUFFER / 4 {
            buf.resize(READ_BUFFER, 0);
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        let data = buf.split_to(n).freeze();
        if commands.send(Command::received(conn, data)).await.is_err() {
            return Ok(());
        }
    }
}

async fn write_path<L: MessageLog, W: AsyncWrite + Unpin>(
    mut stream: W,
    conn: ConnId,
    frames: Receiver<Transmit>,
    shared: &Shared<L>,
) -> io::Result<()> {
    let mut budget = Budget::default();
    while let Ok(t) = frames.recv().await {
        budget.tick().await;
        let body = match t.body {
            Some(span) => {
                shared.log.read(span).map_err(|e| io::Error::other(format!("reading {span:?}: {e}")))?
            }
            None => Bytes::new(),
        };
        write_frame(&mut stream, &t.header, &body).await?;
        if shared.commands.send(Command::Driver(MasterCommand::Sent { conn })).await.is_err() {
            break;
        }
    }
    Ok(())
}

enum Wake {
    Appended,
    Command(Option<Command>),
    Timer,
}

async fn core_task<L: MessageLog>(
    mut driver: MasterDriver<ConnHandle, WaitReply>,
    commands: Receiver<Command>,
    appended: Receiver<()>,
    shared: Arc<Shared<L>>,
    stop_accepting: Sender<()>,
) {
    let mut stopping: Option<Sender<()>> = None;
    let mut timer = Timer::at(timer_at(driver.drain()));
    let mut budget = Budget::default();
    loop {
        budget.tick().await;
        let wake = async {
            let _ = appended.recv().await;
            Wake::Appended
        }
        .or(async { Wake::Command(commands.recv().await.ok()) })
        .or(async {
            (&mut timer).await;
            Wake::Timer
        })
        .await;
        match wake {
            Wake::Appended => driver.log_changed(now(), shared.log.bounds()),
            Wake::Command(None) => break,
            Wake::Command(Some(command)) => {
                let mut next = Some(command);
                while let Some(command) = next {
                    match command {
                        Command::Shutdown { reply } => {
                            let _ = stop_accepting.try_send(());
                            stopping = Some(reply);
                        }
                        Command::Driver(c) => driver.apply(now(), c, &*shared.log, shared.config.role),
                    }
                    next = commands.try_recv().ok();
                }
            }
            Wake::Timer => {
                let at = now();
                driver.log_changed(at, shared.log.bounds());
                driver.handle_timeout(at);
            }
        }
        if stopping.is_some() && driver.pending_waits() == 0 {
            break;
        }
        timer.set_at(timer_at(driver.drain()));
        shared.fenced.store(driver.fence().is_some(), Ordering::Release);
    }
    let end = shared.log.bounds().max;
    let durable = async { shared.log.durable(end).await.is_ok() };
    let timeout = async {
        Timer::after(shared.config.sync_flush_timeout).await;
        false
    };
    if !durable.or(timeout).await {
        warn!(end, "flush at shutdown did not finish");
    }
    driver.shutdown();
    // Refuse later commands, and drop queued ones so that their callers (a `status()` sent
    // during shutdown) see the service stopped instead of waiting forever: async-channel keeps
    // queued messages after the receiver goes.
    commands.close();
    while commands.try_recv().is_ok() {}
    info!("HA master stopped");
    if let Some(reply) = stopping {
        let _ = reply.try_send(());
    }
}
