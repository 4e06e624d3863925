//! The slave service on async-io / async-net.

use std::future::{Future, pending};
use std::{io, ops::ControlFlow, pin::Pin, sync::Arc};

use async_channel::{Receiver, bounded};
use async_io::Timer;
use async_net::TcpStream;
use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt, FutureExt};
use logship_core::service::adapter::*;
use logship_core::service::tls::SlaveTls;
use logship_core::service::*;
use logship_core::time::Instant;
use logship_core::{LogWrite, Offset};
use tracing::Instrument;

use crate::{Budget, Smol, Spawn, Stream, now, then, timer_at};

/// Read buffer; refilled when less than a quarter is left. A catching-up slave reads as much
/// as the socket holds (up to 1 MiB, 32 frames of 32 KiB): each read is one append, one
/// report and one wake of the dispatch thread.
const READ_BUFFER: usize = 1024 * 1024;

type Command = SlaveCommandOn<Smol>;
type Connecting = Pin<Box<dyn Future<Output = Option<io::Result<Stream>>> + Send>>;
type Flushing = Pin<Box<dyn Future<Output = Result<Offset, String>> + Send>>;

/// A running slave: reports status, shuts down. Cheap to clone.
pub type SlaveHandle = logship_core::service::SlaveHandle<Smol>;

/// Starts a slave service that replicates from `config.master_address` into `log`, running
/// its task on `spawner`.
pub async fn spawn_slave<L: LogWrite>(
    config: SlaveServiceConfig,
    log: Arc<L>,
    spawner: impl Spawn,
) -> Result<SlaveHandle, StartError> {
    let span = slave_span(&config.master_address);
    let task = SlaveTask::start(config, now(), log)?;
    let (commands, commands_rx) = bounded(16);
    let runner = Runner { task, commands: commands_rx, connecting: None, flushing: None };
    spawner.spawn(Box::pin(runner.run().instrument(span)));
    Ok(SlaveHandle::new(commands))
}

/// Connects to the master and runs the TLS handshake if configured; `None` when that does not
/// end within the connect timeout.
async fn connect(config: SlaveServiceConfig) -> Option<io::Result<Stream>> {
    let connect = async {
        let stream = TcpStream::connect(config.master_address.as_str()).await?;
        nodelay_set(stream.set_nodelay(true));
        let Some(tls) = config.tls else { return Ok(Box::new(stream) as Stream) };
        tls_connect(tls, stream).await
    };
    Smol.timeout(config.connect_timeout, connect).await
}

/// Runs the TLS handshake to the master over `stream`.
#[cfg(feature = "tls")]
async fn tls_connect(tls: SlaveTls, stream: TcpStream) -> io::Result<Stream> {
    let handshake =
        futures_rustls::TlsConnector::from(tls.client_config()).connect(tls.server_name(), stream);
    Ok(Box::new(handshake.await.map_err(handshake_failed)?) as Stream)
}

/// Without this adapter's `tls` feature it cannot run a handshake (a `SlaveTls` exists only
/// when another crate turned on `logship-core/tls`).
#[cfg(not(feature = "tls"))]
async fn tls_connect(_tls: SlaveTls, _stream: TcpStream) -> io::Result<Stream> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "TLS is configured but logship-smol was built without its `tls` feature; enable it",
    ))
}

/// Writes `bytes` (of any length) on the connection and flushes it.
async fn send(stream: &mut Stream, bytes: &[u8]) -> io::Result<()> {
    stream.write_all(bytes).await?;
    stream.flush().await
}

/// Runs `LogWrite::flush` on the `blocking` thread pool.
fn flush<L: LogWrite>(log: &Arc<L>) -> Flushing {
    let log = log.clone();
    Box::pin(blocking::unblock(move || log.flush().map_err(|e| e.to_string())))
}

struct Runner<L> {
    task: SlaveTask<L, Stream>,
    commands: Receiver<Command>,
    connecting: Option<Connecting>,
    flushing: Option<Flushing>,
}

impl<L: LogWrite> Runner<L> {
    async fn run(mut self) {
        let mut buf = ReadBuffer::new(READ_BUFFER);
        let mut budget = Budget::default();
        let reply = loop {
            budget.tick().await;
            let deadline = self.perform().await;
            let command = async { SlaveWake::Command(self.commands.recv().await.ok()) };
            let read = async { SlaveWake::Read(read(self.task.readable(), &mut buf).await) };
            let connected = async { SlaveWake::Connected(settled(&mut self.connecting).await) };
            let flushed = async { SlaveWake::Flushed(settled(&mut self.flushing).await) };
            let timer = then(Timer::at(timer_at(deadline)), SlaveWake::Timer);
            let wake = command.or(read).or(connected).or(flushed).or(timer).await;
            if let ControlFlow::Break(reply) = self.task.wake(now(), wake) {
                break reply;
            }
        };
        // Refuse later commands, and drop queued ones so that their callers (a `status()` sent
        // during shutdown) see the service stopped instead of waiting forever: async-channel
        // keeps queued messages after the receiver goes.
        self.commands.close();
        while self.commands.try_recv().is_ok() {}
        self.task.stop(self.flushing.take(), flush, reply).await;
    }

    /// Performs actions until the driver has nothing more before its next timeout.
    async fn perform(&mut self) -> Instant {
        let limit = self.task.send_timeout();
        loop {
            match self.task.next_action(now()) {
                SlaveIo::SleepUntil(at) => return at,
                SlaveIo::Connect => self.connecting = Some(Box::pin(connect(self.task.config().clone()))),
                SlaveIo::Send(bytes, stream) => {
                    let sent = Smol.timeout(limit, send(stream, bytes.as_ref())).await;
                    self.task.send_done(now(), sent);
                }
                SlaveIo::Flush => self.flushing = Some(flush(self.task.log())),
            }
        }
    }
}

/// Reads from the stream, if there is one.
async fn read(stream: Option<&mut Stream>, buf: &mut ReadBuffer) -> io::Result<Bytes> {
    let Some(stream) = stream else { return pending().await };
    let n = stream.read(buf.spare()).await?;
    Ok(buf.take(n))
}
