//! The slave service on async-io / async-net.

use std::future::{Future, pending};
use std::{io, pin::Pin, sync::Arc, time::Duration};

use logship_core::time::Instant;

use async_channel::{Receiver, Sender, bounded};
use async_io::Timer;
use async_net::TcpStream;
use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt, FutureExt};
use logship_core::service::tls::SlaveTls;
use logship_core::service::*;
use logship_core::{LogWrite, Offset};
use tracing::{Instrument, warn};

use crate::{Budget, Once, Spawn, Stream, ask, now, timer_at};

/// Read buffer; refilled when less than a quarter is left.
const READ_BUFFER: usize = 64 * 1024;

type Command = SlaveCommand<Once<SlaveStatus>, Once<()>>;
type Connecting = Pin<Box<dyn Future<Output = io::Result<Stream>> + Send>>;
type Flushing = blocking::Task<Result<Offset, String>>;

/// A running slave: reports status, shuts down. Cheap to clone.
#[derive(Clone)]
pub struct SlaveHandle {
    commands: Sender<Command>,
}

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
    Ok(SlaveHandle { commands })
}

impl SlaveHandle {
    /// A status snapshot of the slave's side of the master connection.
    pub async fn status(&self) -> Option<SlaveStatus> {
        ask(&self.commands, SlaveCommand::Status).await
    }

    /// Closes the connection, flushes the log and stops.
    pub async fn shutdown(&self) {
        ask(&self.commands, SlaveCommand::Shutdown).await;
    }
}

impl SlaveService for SlaveHandle {
    fn status(&self) -> ServiceFuture<'_, Option<SlaveStatus>> {
        Box::pin(Self::status(self))
    }

    fn shutdown(&self) -> ServiceFuture<'_, ()> {
        Box::pin(Self::shutdown(self))
    }
}

/// Connects to `address` and runs the TLS handshake if `tls` is set, within `limit`.
async fn connect(address: String, tls: Option<SlaveTls>, limit: Duration) -> io::Result<Stream> {
    let connect = async {
        let stream = TcpStream::connect(address.as_str()).await?;
        if let Err(e) = stream.set_nodelay(true) {
            warn!(%e, "cannot set TCP_NODELAY");
        }
        let Some(tls) = tls else { return Ok(Box::new(stream) as Stream) };
        let handshake =
            futures_rustls::TlsConnector::from(tls.client_config()).connect(tls.server_name(), stream);
        let stream = handshake.await.map_err(|e| io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
        Ok(Box::new(stream) as Stream)
    };
    let expire = async {
        Timer::after(limit).await;
        Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))
    };
    connect.or(expire).await
}

/// Runs `LogWrite::flush` on the `blocking` thread pool.
fn flush<L: LogWrite>(log: &Arc<L>) -> Flushing {
    let log = log.clone();
    blocking::unblock(move || log.flush().map_err(|e| e.to_string()))
}

struct Runner<L> {
    task: SlaveTask<L, Stream>,
    commands: Receiver<Command>,
    connecting: Option<Connecting>,
    flushing: Option<Flushing>,
}

/// What woke the slave task.
enum Wake {
    Command(Option<Command>),
    Read(io::Result<Bytes>),
    Connected(io::Result<Stream>),
    Flushed(Result<Offset, String>),
    Timer,
}

impl<L: LogWrite> Runner<L> {
    async fn run(mut self) {
        let mut buf = ReadBuffer::new(READ_BUFFER);
        let mut budget = Budget::default();
        let reply = loop {
            budget.tick().await;
            let deadline = self.perform().await;
            let reading = self.task.wants_read();
            let command = async { Wake::Command(self.commands.recv().await.ok()) };
            let read = async {
                match reading {
                    true => Wake::Read(read(self.task.stream(), &mut buf).await),
                    false => pending().await,
                }
            };
            let connected = async { Wake::Connected(poll(&mut self.connecting).await) };
            let flushed = async { Wake::Flushed(poll(&mut self.flushing).await) };
            let timer = async {
                Timer::at(timer_at(deadline)).await;
                Wake::Timer
            };
            match command.or(read).or(connected).or(flushed).or(timer).await {
                Wake::Command(command) => {
                    let Some(command) = command else { break None };
                    if let Some(reply) = self.task.command(now(), command) {
                        break Some(reply);
                    }
                }
                Wake::Read(read) => self.task.read_done(now(), read),
                Wake::Connected(connected) => {
                    self.connecting = None;
                    self.task.connect_done(now(), connected);
                }
                Wake::Flushed(flushed) => {
                    self.flushing = None;
                    self.task.flush_done(now(), flushed);
                }
                Wake::Timer => self.task.handle_timeout(now()),
            }
        };
        if let Some(flushing) = self.flushing.take() {
            let _ = flushing.await;
        }
        let flushed = flush(self.task.log()).await;
        self.task.stopped(flushed, reply);
    }

    /// Performs actions until the driver has nothing more before its next timeout.
    async fn perform(&mut self) -> Instant {
        let limit = self.task.send_timeout();
        loop {
            match self.task.next_action(now()) {
                SlaveIo::SleepUntil(at) => return at,
                SlaveIo::Connect => {
                    let config = self.task.config();
                    let connect =
                        connect(config.master_address.clone(), config.tls.clone(), config.connect_timeout);
                    self.connecting = Some(Box::pin(connect));
                }
                SlaveIo::Send(report, stream) => {
                    let write = async {
                        stream.write_all(&report).await?;
                        stream.flush().await
                    };
                    let expire = async {
                        Timer::after(limit).await;
                        None
                    };
                    let sent = async { Some(write.await) }.or(expire).await;
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

/// Waits for the future, if there is one.
async fn poll<F: Future + Unpin>(future: &mut Option<F>) -> F::Output {
    match future {
        Some(future) => future.await,
        None => pending().await,
    }
}
