//! The master service on tokio.

use std::{future::poll_fn, io, net::SocketAddr, pin::Pin, sync::Arc};

use logship_core::service::adapter::*;
#[cfg(feature = "tls")]
use logship_core::service::tls::{Link, MasterTls};
use logship_core::service::*;
use logship_core::{ConnId, MessageLog};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::{net::TcpListener, net::TcpStream, sync::mpsc, task::JoinHandle};
#[cfg(feature = "tls")]
use tokio_rustls::TlsAcceptor;
use tracing::{Instrument, info};

#[cfg(feature = "tls")]
use crate::Stream;
use crate::{Tokio, now, timer_at};

/// Capacity of the channel into the core task.
const COMMAND_QUEUE: usize = 4096;
/// Read buffer of a connection.
const READ_BUFFER: usize = 4096;

type Command = MasterCommandOn<Tokio>;

/// A running master: puts messages, reports status, shuts down. Cheap to clone.
pub type MasterHandle<L> = logship_core::service::MasterHandle<L, Tokio>;

/// What the accept loop and the connection tasks share.
struct Shared<L> {
    log: Arc<L>,
    config: MasterServiceConfig,
    commands: mpsc::Sender<Command>,
}

/// Binds `listen` and starts a master service for `log` on the current tokio runtime.
pub async fn spawn_master<L: MessageLog>(
    config: MasterServiceConfig,
    log: Arc<L>,
    listen: SocketAddr,
) -> Result<MasterHandle<L>, StartError> {
    let task = MasterTaskOn::start(&config, now(), log.clone())?;
    let bind = |source| StartError::Bind { addr: listen, source };
    let listener = TcpListener::bind(listen).await.map_err(bind)?;
    let local_addr = listener.local_addr().map_err(bind)?;
    let (commands, commands_rx) = mpsc::channel(COMMAND_QUEUE);
    let (appended, appended_rx) = mpsc::channel(1);
    let handle =
        MasterHandle::new(&task, config.clone(), local_addr, commands.clone(), appended, Tokio::current());
    let shared = Arc::new(Shared { log, config, commands });
    let accept = tokio::spawn(accept_loop(listener, shared.clone()));
    let core = core_task(task, commands_rx, appended_rx, shared, accept);
    tokio::spawn(core.instrument(master_span(local_addr)));
    Ok(handle)
}

async fn accept_loop<L: MessageLog>(listener: TcpListener, shared: Arc<Shared<L>>) {
    let mut accepts = Accepts::default();
    loop {
        let (conn, stream, peer) = match accepts.accepted(listener.accept().await) {
            Ok(accepted) => accepted,
            Err(pause) => {
                tokio::time::sleep(pause).await;
                continue;
            }
        };
        let (frames, frames_rx) = mpsc::channel(shared.config.core.max_inflight as usize);
        let (close, close_rx) = mpsc::channel(1);
        let sink = ConnHandle::new(frames, close);
        if !Tokio::send(&shared.commands, TaskCommand::accepted(conn, peer, sink)).await {
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
    async fn run(self, stream: TcpStream, frames: mpsc::Receiver<Transmit>, mut close: mpsc::Receiver<()>) {
        info!("slave connected");
        nodelay_set(stream.set_nodelay(true));
        let ended = tokio::select! {
            ended = self.serve(stream, frames) => ended,
            _ = close.recv() => Ok("closed by the master"),
        };
        self.send(TaskCommand::ended(self.id, ended)).await;
    }

    async fn serve(&self, stream: TcpStream, frames: mpsc::Receiver<Transmit>) -> io::Result<&'static str> {
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
            Some(_) => return Ok("TLS is configured but logship-tokio was built without its `tls` feature"),
        };
        let (rd, wr) = tokio::io::split(stream);
        tokio::select! {
            r = self.read_path(rd) => r.map(|()| "end of stream"),
            r = self.write_path(wr, frames) => r.map(|()| "writer stopped"),
        }
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
        Tokio::send(&self.shared.commands, command).await
    }
}

async fn core_task<L: MessageLog>(
    mut task: MasterTaskOn<L, Tokio>,
    mut commands: mpsc::Receiver<Command>,
    mut appended: mpsc::Receiver<()>,
    shared: Arc<Shared<L>>,
    accept: JoinHandle<()>,
) {
    let sleep = tokio::time::sleep_until(timer_at(task.deadline()));
    tokio::pin!(sleep);
    loop {
        let wake = tokio::select! {
            biased;
            Some(()) = appended.recv() => MasterWake::Appended,
            command = commands.recv() => MasterWake::Command(command),
            () = &mut sleep => MasterWake::Timer,
        };
        let next = task.wake(now(), wake, || commands.try_recv().ok());
        if task.is_stopping() {
            accept.abort();
        }
        let Some(deadline) = next.map(timer_at) else { break };
        if sleep.deadline() != deadline {
            sleep.as_mut().reset(deadline);
        }
    }
    crate::refuse_later(&mut commands).await;
    task.stop(&Tokio::current(), shared.log.flush_settings().sync_flush_timeout).await;
}
