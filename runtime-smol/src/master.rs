//! The master service on async-io / async-net.

use std::future::{pending, poll_fn};
use std::{io, net::SocketAddr, pin::Pin, sync::Arc};

use async_channel::{Receiver, Sender, bounded};
use async_io::Timer;
use async_net::{TcpListener, TcpStream};
use futures_lite::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, FutureExt};
#[cfg(feature = "tls")]
use futures_rustls::TlsAcceptor;
use logship_core::service::adapter::*;
#[cfg(feature = "tls")]
use logship_core::service::tls::{Link, MasterTls};
use logship_core::service::*;
use logship_core::{ConnId, MessageLog};
use tracing::{Instrument, info};

#[cfg(feature = "tls")]
use crate::Stream;
use crate::{Budget, Smol, Spawn, now, then, timer_at, unless};

/// Capacity of the channel into the core task.
const COMMAND_QUEUE: usize = 4096;
/// Read buffer of a connection.
const READ_BUFFER: usize = 4096;

type Command = MasterCommandOn<Smol>;

/// A running master: puts messages, reports status, shuts down. Cheap to clone.
pub type MasterHandle<L> = logship_core::service::MasterHandle<L, Smol>;

/// What the accept loop and the connection tasks share.
struct Shared<L> {
    log: Arc<L>,
    config: MasterServiceConfig,
    commands: Sender<Command>,
    spawner: Arc<dyn Spawn>,
}

/// Binds `listen` and starts a master service for `log`, running its tasks on `spawner`.
pub async fn spawn_master<L: MessageLog>(
    config: MasterServiceConfig,
    log: Arc<L>,
    listen: SocketAddr,
    spawner: impl Spawn,
) -> Result<MasterHandle<L>, StartError> {
    let task = MasterTaskOn::start(&config, now(), log.clone())?;
    let bind = |source| StartError::Bind { addr: listen, source };
    let listener = TcpListener::bind(listen).await.map_err(bind)?;
    let local_addr = listener.local_addr().map_err(bind)?;
    let (commands, commands_rx) = bounded(COMMAND_QUEUE);
    let (appended, appended_rx) = bounded(1);
    let handle = MasterHandle::new(&task, config.clone(), local_addr, commands.clone(), appended, Smol);
    let shared = Arc::new(Shared { log, config, commands, spawner: Arc::new(spawner) });
    let (accept, accept_rx) = bounded(1);
    shared.spawner.spawn(Box::pin(accept_loop(listener, shared.clone(), accept_rx)));
    let core = core_task(task, commands_rx, appended_rx, shared.clone(), accept);
    shared.spawner.spawn(Box::pin(core.instrument(master_span(local_addr))));
    Ok(handle)
}

/// Accepts until `stop` is sent to or closed.
async fn accept_loop<L: MessageLog>(listener: TcpListener, shared: Arc<Shared<L>>, stop: Receiver<()>) {
    let mut accepts = Accepts::default();
    loop {
        let Some(accepted) = unless(&stop, listener.accept()).await else { return };
        let (conn, stream, peer) = match accepts.accepted(accepted) {
            Ok(accepted) => accepted,
            Err(pause) => {
                Timer::after(pause).await;
                continue;
            }
        };
        let (frames, frames_rx) = bounded(shared.config.core.max_inflight as usize);
        let (close, close_rx) = bounded(1);
        let sink = ConnHandle::new(frames, close);
        if !Smol::send(&shared.commands, TaskCommand::accepted(conn, peer, sink)).await {
            return;
        }
        let task = Conn { id: conn, shared: shared.clone() }.run(stream, frames_rx, close_rx);
        shared.spawner.spawn(Box::pin(task.instrument(master_conn_span(conn, peer))));
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
    async fn run(self, stream: TcpStream, frames: Receiver<Transmit>, close: Receiver<()>) {
        info!("slave connected");
        nodelay_set(stream.set_nodelay(true));
        let ended = unless(&close, self.serve(stream, frames)).await.unwrap_or(Ok("closed by the master"));
        self.send(TaskCommand::ended(self.id, ended)).await;
    }

    async fn serve(&self, stream: TcpStream, frames: Receiver<Transmit>) -> io::Result<&'static str> {
        let stream = match &self.shared.config.admission.tls {
            None => Box::new(stream),
            #[cfg(feature = "tls")]
            Some(tls) => match self.negotiate(stream, tls).await? {
                Ok(stream) => stream,
                Err(why) => return Ok(why),
            },
            // Without this adapter's `tls` feature it cannot run a handshake (a `MasterTls`
            // exists only when another crate turned on `logship-core/tls`).
            #[cfg(not(feature = "tls"))]
            Some(_) => return Ok("TLS is configured but logship-smol was built without its `tls` feature"),
        };
        let (rd, wr) = futures_lite::io::split(stream);
        let read = async { self.read_path(rd).await.map(|()| "end of stream") };
        read.or(async { self.write_path(wr, frames).await.map(|()| "writer stopped") }).await
    }

    #[cfg(feature = "tls")]
    /// Peeks at the first byte, runs the TLS handshake if it starts one ([`negotiate`] decides),
    /// and tells the driver (which decides what the link may do) before any byte of it is
    /// forwarded. `Err` says why the connection ended during negotiation.
    async fn negotiate(
        &self,
        stream: TcpStream,
        tls: &MasterTls,
    ) -> io::Result<Result<Stream, &'static str>> {
        let mut first = [0u8; 1];
        let peeked = stream.peek(&mut first).await?;
        let handshake = |stream| async move {
            let stream = TlsAcceptor::from(tls.server_config()).accept(stream).await?;
            Ok((Link::tls(stream.get_ref().1), Box::new(stream) as Stream))
        };
        let (link, negotiated) = negotiate(&first[..peeked], Box::new(stream) as Stream, handshake).await;
        if let Some(link) = link {
            self.send(TaskCommand::negotiated(self.id, link)).await;
        }
        Ok(negotiated)
    }

    async fn read_path(&self, mut rd: impl AsyncRead + Unpin) -> io::Result<()> {
        let mut buf = ReadBuffer::new(READ_BUFFER);
        let mut budget = Budget::default();
        loop {
            budget.tick().await;
            let n = rd.read(buf.spare()).await?;
            if n == 0 || !self.send(TaskCommand::received(self.id, buf.take(n))).await {
                return Ok(());
            }
        }
    }

    async fn write_path(
        &self,
        mut wr: impl AsyncWrite + Unpin,
        frames: Receiver<Transmit>,
    ) -> io::Result<()> {
        let mut budget = Budget::default();
        while let Ok(transmit) = frames.recv().await {
            budget.tick().await;
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
        Smol::send(&self.shared.commands, command).await
    }
}

async fn core_task<L: MessageLog>(
    mut task: MasterTaskOn<L, Smol>,
    commands: Receiver<Command>,
    appended: Receiver<()>,
    shared: Arc<Shared<L>>,
    accept: Sender<()>,
) {
    let mut timer = Timer::at(timer_at(task.deadline()));
    let mut budget = Budget::default();
    loop {
        budget.tick().await;
        let woken = async {
            match appended.recv().await {
                Ok(()) => MasterWake::Appended,
                Err(_) => pending().await,
            }
        };
        let command = async { MasterWake::Command(commands.recv().await.ok()) };
        let timer_fired = then(&mut timer, MasterWake::Timer);
        let wake = woken.or(command).or(timer_fired).await;
        let next = task.wake(now(), wake, || commands.try_recv().ok());
        if task.is_stopping() {
            let _ = accept.try_send(());
        }
        let Some(deadline) = next.map(timer_at) else { break };
        timer.set_at(deadline);
    }
    // Refuse later commands, and drop queued ones so that their callers (a `status()` sent
    // during shutdown) see the service stopped instead of waiting forever: async-channel keeps
    // queued messages after the receiver goes.
    commands.close();
    while commands.try_recv().is_ok() {}
    task.stop(&Smol, shared.log.flush_settings().sync_flush_timeout).await;
}
