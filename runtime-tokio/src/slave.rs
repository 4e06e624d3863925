//! The slave service on tokio.

use std::future::{Future, pending};
use std::{io, pin::Pin, sync::Arc, time::Duration};

use logship_core::time::Instant;

use bytes::Bytes;
use logship_core::service::tls::SlaveTls;
use logship_core::service::*;
use logship_core::{LogWrite, Offset};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::{net::TcpStream, sync::mpsc, task::JoinHandle};
use tracing::{Instrument, warn};

use crate::{Once, Stream, ask, now, timer_at};

/// Read buffer; refilled when less than a quarter is left.
const READ_BUFFER: usize = 64 * 1024;

type Command = SlaveCommand<Once<SlaveStatus>, Once<()>>;
type Connecting = Pin<Box<dyn Future<Output = io::Result<Stream>> + Send>>;
type Flushing = JoinHandle<Result<Offset, String>>;

/// A running slave: reports status, shuts down. Cheap to clone.
#[derive(Clone)]
pub struct SlaveHandle {
    commands: mpsc::Sender<Command>,
}

/// Starts a slave service that replicates from `config.master_address` into `log`, on the
/// current tokio runtime.
pub async fn spawn_slave<L: LogWrite>(
    config: SlaveServiceConfig,
    log: Arc<L>,
) -> Result<SlaveHandle, StartError> {
    let span = slave_span(&config.master_address);
    let task = SlaveTask::start(config, now(), log)?;
    let (commands, commands_rx) = mpsc::channel(16);
    tokio::spawn(
        Runner { task, commands: commands_rx, connecting: None, flushing: None }.run().instrument(span),
    );
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
            tokio_rustls::TlsConnector::from(tls.client_config()).connect(tls.server_name(), stream);
        let stream = handshake.await.map_err(|e| io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
        Ok(Box::new(stream) as Stream)
    };
    let timed_out = |_| Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"));
    tokio::time::timeout(limit, connect).await.unwrap_or_else(timed_out)
}

/// Runs `LogWrite::flush` on tokio's blocking pool.
fn flush<L: LogWrite>(log: &Arc<L>) -> Flushing {
    let log = log.clone();
    tokio::task::spawn_blocking(move || log.flush().map_err(|e| e.to_string()))
}

struct Runner<L> {
    task: SlaveTask<L, Stream>,
    commands: mpsc::Receiver<Command>,
    connecting: Option<Connecting>,
    flushing: Option<Flushing>,
}

impl<L: LogWrite> Runner<L> {
    async fn run(mut self) {
        let mut buf = ReadBuffer::new(READ_BUFFER);
        let reply = loop {
            let deadline = self.perform().await;
            let reading = self.task.wants_read();
            tokio::select! {
                command = self.commands.recv() => {
                    let Some(command) = command else { break None };
                    if let Some(reply) = self.task.command(now(), command) {
                        break Some(reply);
                    }
                }
                read = read(self.task.stream(), &mut buf), if reading => self.task.read_done(now(), read),
                connected = poll(&mut self.connecting), if self.connecting.is_some() => {
                    self.connecting = None;
                    self.task.connect_done(now(), connected);
                }
                flushed = poll(&mut self.flushing), if self.flushing.is_some() => {
                    self.flushing = None;
                    self.task.flush_done(now(), flushed.unwrap_or_else(|e| Err(e.to_string())));
                }
                () = tokio::time::sleep_until(timer_at(deadline)) => self.task.handle_timeout(now()),
            }
        };
        if let Some(flushing) = self.flushing.take() {
            let _ = flushing.await;
        }
        let flushed = flush(self.task.log()).await.unwrap_or_else(|e| Err(e.to_string()));
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
                    let sent = tokio::time::timeout(limit, write).await.ok();
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
