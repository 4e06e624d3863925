//! The master service on tokio.

use std::{future::poll_fn, io, net::SocketAddr, pin::Pin, sync::Arc, time::Duration};

use logship_core::service::tls::{Link, LinkKind, MasterTls};
use logship_core::service::*;
use logship_core::{ConnId, MessageLog, Offset, PutResult, WaitError};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::{net::TcpListener, net::TcpStream, sync::Notify, sync::mpsc, sync::oneshot, task::JoinHandle};
use tokio_rustls::TlsAcceptor;
use tracing::{Instrument, info, warn};

use crate::{Once, Stream, ask, now, timer_at, within};

/// Capacity of the channel into the core task.
const COMMAND_QUEUE: usize = 4096;
/// Read buffer of a connection.
const READ_BUFFER: usize = 4096;

type WaitReply = Once<Result<Offset, WaitError>>;
type Command = TaskCommand<ConnHandle, WaitReply, Once<MasterStatus>, Once<()>>;
type Task<L> = MasterTask<L, ConnHandle, WaitReply, Once<MasterStatus>, Once<()>>;

/// The core task's handle on one connection.
struct ConnHandle {
    frames: mpsc::Sender<Transmit>,
    /// Dropping it ends the connection.
    close: Option<oneshot::Sender<()>>,
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

struct Shared<L> {
    log: Arc<L>,
    config: MasterServiceConfig,
    commands: mpsc::Sender<Command>,
    appended: Notify,
    gate: Arc<PutGate>,
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
    let task = Task::start(&config, now(), log.clone())?;
    let bind = |source| StartError::Bind { addr: listen, source };
    let listener = TcpListener::bind(listen).await.map_err(bind)?;
    let local_addr = listener.local_addr().map_err(bind)?;
    let (commands, commands_rx) = mpsc::channel(COMMAND_QUEUE);
    let gate = task.gate().clone();
    let runtime = tokio::runtime::Handle::current();
    let shared =
        Arc::new(Shared { log, config, commands, appended: Notify::new(), gate, local_addr, runtime });
    let accept = tokio::spawn(accept_loop(listener, shared.clone()));
    tokio::spawn(core_task(task, commands_rx, shared.clone(), accept).instrument(master_span(local_addr)));
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
        let s = &*self.shared;
        let pending = match s.gate.start(&s.config, &*s.log, message) {
            Ok(pending) => pending,
            Err(done) => return done,
        };
        let flushed = async {
            let durable = pending.flush.then(|| s.log.durable(pending.end()));
            Some(within(&s.runtime, s.config.sync_flush_timeout, durable?).await)
        };
        let replicated = async {
            if !pending.replicate {
                s.appended.notify_one();
                return None;
            }
            let wait = |reply| TaskCommand::Driver(pending.wait_command(now(), &s.config, reply));
            Some(ask(&s.commands, wait).await.unwrap_or(Err(WaitError::Cancelled)))
        };
        let (flushed, replicated) = tokio::join!(flushed, replicated);
        pending.finish(flushed, replicated)
    }

    /// A status snapshot: offsets and every slave's ack, lag and sync state.
    pub async fn status(&self) -> Option<MasterStatus> {
        ask(&self.shared.commands, TaskCommand::status).await
    }

    /// Stops accepting, lets pending replication waits finish (each ends by its deadline),
    /// flushes the log, and closes every connection. Later puts are refused.
    pub async fn shutdown(&self) {
        self.shared.gate.stop();
        ask(&self.shared.commands, TaskCommand::Shutdown).await;
    }

    /// Waits until at least `slaves` slaves are in sync (connected, and within
    /// `ha_max_gap_not_in_sync` of the master's end), and returns the status that showed it.
    /// The core task answers as soon as they are; gives up after `timeout`.
    pub async fn wait_in_sync(&self, slaves: usize, timeout: Duration) -> Result<MasterStatus, InSyncError> {
        let wait = InSyncWait::new(now(), slaves, timeout);
        let status = ask(&self.shared.commands, |reply| TaskCommand::InSync { wait, reply }).await;
        wait.outcome(status.ok_or(InSyncError::Stopped)?)
    }
}

impl<L: MessageLog> MasterService<L> for MasterHandle<L> {
    fn local_addr(&self) -> SocketAddr {
        self.shared.local_addr
    }

    fn put(&self, message: L::Message) -> ServiceFuture<'_, PutResult> {
        Box::pin(Self::put(self, message))
    }

    fn status(&self) -> ServiceFuture<'_, Option<MasterStatus>> {
        Box::pin(Self::status(self))
    }

    fn shutdown(&self) -> ServiceFuture<'_, ()> {
        Box::pin(Self::shutdown(self))
    }
}

async fn accept_loop<L: MessageLog>(listener: TcpListener, shared: Arc<Shared<L>>) {
    for n in 1.. {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                warn!(%e, "accept failed");
                tokio::time::sleep(ACCEPT_RETRY).await;
                continue;
            }
        };
        let conn = ConnId(n);
        if let Err(e) = stream.set_nodelay(true) {
            warn!(%e, %peer, "cannot set TCP_NODELAY");
        }
        let (frames, frames_rx) = mpsc::channel(shared.config.core.max_inflight as usize);
        let (close, close_rx) = oneshot::channel();
        let sink = ConnHandle { frames, close: Some(close) };
        if shared.commands.send(TaskCommand::accepted(conn, peer, sink)).await.is_err() {
            return;
        }
        let task = Conn { id: conn, shared: shared.clone() }.run(stream, frames_rx, close_rx);
        tokio::spawn(task.instrument(master_conn_span(conn, peer)));
    }
}

/// One accepted connection, as its task sees it.
struct Conn<L> {
    id: ConnId,
    shared: Arc<Shared<L>>,
}

impl<L: MessageLog> Conn<L> {
    /// Negotiates first when TLS is configured (the core's first-report deadline covers it);
    /// then runs the read path and the write path together. Whichever ends first, or the core
    /// closing the connection, ends all, and `Closed` is reported exactly once.
    async fn run(self, stream: TcpStream, frames: mpsc::Receiver<Transmit>, close: oneshot::Receiver<()>) {
        info!("slave connected");
        let ended = tokio::select! {
            ended = self.serve(stream, frames) => ended,
            _ = close => Ok("closed by the master"),
        };
        match ended {
            Ok(why) => info!(why, "slave connection ended"),
            Err(e) => warn!(%e, "slave connection failed"),
        }
        self.send(TaskCommand::closed(self.id)).await;
    }

    async fn serve(&self, stream: TcpStream, frames: mpsc::Receiver<Transmit>) -> io::Result<&'static str> {
        let stream = match &self.shared.config.admission.tls {
            None => Box::new(stream),
            Some(tls) => match self.negotiate(stream, tls).await? {
                Ok(stream) => stream,
                Err(why) => return Ok(why),
            },
        };
        let (rd, wr) = tokio::io::split(stream);
        tokio::select! {
            r = self.read_path(rd) => r.map(|()| "end of stream"),
            r = self.write_path(wr, frames) => r.map(|()| "writer stopped"),
        }
    }

    /// Peeks at the first byte, runs the TLS handshake if it starts one, and tells the driver
    /// (which decides what the link may do) before any byte of it is forwarded. `Err` says why
    /// the connection ended during negotiation.
    async fn negotiate(
        &self,
        stream: TcpStream,
        tls: &MasterTls,
    ) -> io::Result<Result<Stream, &'static str>> {
        let mut first = [0u8; 1];
        let peeked = stream.peek(&mut first).await?;
        let (link, negotiated) = match LinkKind::from_peek(&first[..peeked]) {
            None => return Ok(Err("end of stream before the first byte")),
            Some(LinkKind::Plain) => (Link::Plain, Ok(Box::new(stream) as Stream)),
            Some(LinkKind::Tls) => match TlsAcceptor::from(tls.server_config()).accept(stream).await {
                Ok(stream) => (Link::tls(stream.get_ref().1), Ok(Box::new(stream) as Stream)),
                Err(e) => (Link::failed(&e), Err("TLS handshake failed")),
            },
        };
        self.send(TaskCommand::negotiated(self.id, link)).await;
        Ok(negotiated)
    }

    async fn read_path(&self, mut rd: impl AsyncRead + Unpin) -> io::Result<()> {
        let mut buf = ReadBuffer::new(READ_BUFFER);
        loop {
            let n = rd.read(buf.spare()).await?;
            if n == 0 || !self.send(TaskCommand::received(self.id, buf.take(n))).await {
                return Ok(());
            }
        }
    }

    async fn write_path(
        &self,
        mut wr: impl AsyncWrite + Unpin,
        mut frames: mpsc::Receiver<Transmit>,
    ) -> io::Result<()> {
        while let Some(transmit) = frames.recv().await {
            let mut frame = transmit.resolve(&*self.shared.log)?;
            poll_fn(|cx| frame.poll_write(cx, |cx, bufs| Pin::new(&mut wr).poll_write_vectored(cx, bufs)))
                .await?;
            wr.flush().await?;
            if !self.send(TaskCommand::sent(self.id)).await {
                break;
            }
        }
        Ok(())
    }

    /// Sends `command` to the core task; `false` once it is gone.
    async fn send(&self, command: Command) -> bool {
        self.shared.commands.send(command).await.is_ok()
    }
}

async fn core_task<L: MessageLog>(
    mut task: Task<L>,
    mut commands: mpsc::Receiver<Command>,
    shared: Arc<Shared<L>>,
    accept: JoinHandle<()>,
) {
    let sleep = tokio::time::sleep_until(timer_at(task.deadline()));
    tokio::pin!(sleep);
    loop {
        tokio::select! {
            biased;
            () = shared.appended.notified() => task.appended(now()),
            command = commands.recv() => match command {
                Some(first) => task.apply_batch(now(), first, || commands.try_recv().ok()),
                None => break,
            },
            () = &mut sleep => task.timer(now()),
        }
        if task.is_stopping() {
            accept.abort();
        }
        let Some(deadline) = task.settle(now()) else { break };
        let deadline = timer_at(deadline);
        if sleep.deadline() != deadline {
            sleep.as_mut().reset(deadline);
        }
    }
    let durable = shared.log.durable(task.flush_target());
    task.finish(within(&shared.runtime, shared.config.sync_flush_timeout, durable).await);
}
