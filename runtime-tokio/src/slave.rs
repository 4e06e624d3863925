//! The slave service on tokio.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use bytes::BytesMut;
use logship_core::service::tls::SlaveTls;
use logship_core::service::{SlaveAction, SlaveDriver, SlaveServiceConfig, SlaveStatus, StartError};
use logship_core::{LogWrite, Offset};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tracing::{Instrument, info, info_span, warn};

use crate::{now, timer_at};

/// Read buffer; refilled when less than a quarter is left.
const READ_BUFFER: usize = 64 * 1024;

enum Command {
    Status { reply: oneshot::Sender<SlaveStatus> },
    Shutdown { reply: oneshot::Sender<()> },
}

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
    let driver = SlaveDriver::new(&config, now(), log.clone())?;
    let (commands, rx) = mpsc::channel(16);
    // One span for the slave's connection cycle; `conn` numbers the current connection.
    let span =
        info_span!("ha_conn", role = "slave", peer = %config.master_address, conn = tracing::field::Empty);
    let task =
        SlaveTask { driver, config, log, commands: rx, stream: None, connecting: None, flushing: None };
    tokio::spawn(task.run().instrument(span));
    Ok(SlaveHandle { commands })
}

impl SlaveHandle {
    /// A status snapshot of the slave's side of the master connection.
    pub async fn status(&self) -> Option<SlaveStatus> {
        let (reply, rx) = oneshot::channel();
        self.commands.send(Command::Status { reply }).await.ok()?;
        rx.await.ok()
    }

    /// Closes the connection, flushes the log and stops.
    pub async fn shutdown(&self) {
        let (reply, rx) = oneshot::channel();
        if self.commands.send(Command::Shutdown { reply }).await.is_ok() {
            let _ = rx.await;
        }
    }
}

/// The link to the master: plain TCP or TLS over it.
trait Link: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Link for T {}

type Stream = Box<dyn Link>;
type Connecting = Pin<Box<dyn Future<Output = io::Result<Stream>> + Send>>;

/// Connects to `address`, then runs the TLS handshake if `tls` is set.
async fn connect(address: String, tls: Option<SlaveTls>) -> io::Result<Stream> {
    let stream = TcpStream::connect(address.as_str()).await?;
    if let Err(e) = stream.set_nodelay(true) {
        warn!(%e, "cannot set TCP_NODELAY");
    }
    match tls {
        None => Ok(Box::new(stream)),
        Some(tls) => {
            let connector = tokio_rustls::TlsConnector::from(tls.client_config());
            let stream = connector
                .connect(tls.server_name(), stream)
                .await
                .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake: {e}")))?;
            Ok(Box::new(stream))
        }
    }
}

struct SlaveTask<L: LogWrite> {
    driver: SlaveDriver<L>,
    config: SlaveServiceConfig,
    log: Arc<L>,
    commands: mpsc::Receiver<Command>,
    stream: Option<Stream>,
    connecting: Option<Connecting>,
    flushing: Option<JoinHandle<Result<Offset, L::Error>>>,
}

impl<L: LogWrite> SlaveTask<L> {
    async fn run(mut self) {
        let mut buf = BytesMut::with_capacity(READ_BUFFER);
        loop {
            let deadline = self.perform().await;
            let wants_read = self.stream.is_some() && self.driver.wants_read();
            if wants_read && buf.capacity() - buf.len() < READ_BUFFER / 4 {
                buf.reserve(READ_BUFFER);
            }
            tokio::select! {
                command = self.commands.recv() => match command {
                    Some(Command::Status { reply }) => {
                        let _ = reply.send(self.driver.status(now()));
                    }
                    Some(Command::Shutdown { reply }) => return self.stop(Some(reply)).await,
                    None => return self.stop(None).await,
                },
                read = read_opt(&mut self.stream, &mut buf), if wants_read => match read {
                    Ok(n) if n > 0 => self.driver.received(now(), buf.split().freeze()),
                    Ok(_) => self.closed("the master closed the connection"),
                    Err(e) => self.closed(&e.to_string()),
                },
                connected = poll_opt(&mut self.connecting), if self.connecting.is_some() => {
                    self.connecting = None;
                    match connected {
                        Ok(stream) => {
                            info!(tls = self.config.tls.is_some(), "connected to master");
                            self.stream = Some(stream);
                            self.driver.connected(now());
                        }
                        Err(e) => {
                            warn!(%e, "cannot connect to master");
                            self.driver.closed(now());
                        }
                    }
                }
                flushed = join_opt(&mut self.flushing), if self.flushing.is_some() => {
                    self.flushing = None;
                    match flushed {
                        Ok(result) => self.driver.flushed(now(), result),
                        Err(e) => self.driver.flushed(now(), Err(e)),
                    }
                }
                () = tokio::time::sleep_until(timer_at(deadline)) => self.driver.handle_timeout(now()),
            }
        }
    }

    /// Performs actions until the driver has nothing more before its next timeout.
    async fn perform(&mut self) -> logship_core::time::Instant {
        loop {
            match self.driver.next_action(now()) {
                SlaveAction::SleepUntil(at) => return at,
                SlaveAction::Connect => {
                    let address = self.config.master_address.clone();
                    let timeout = self.config.connect_timeout;
                    let tls = self.config.tls.clone();
                    self.connecting = Some(Box::pin(async move {
                        match tokio::time::timeout(timeout, connect(address, tls)).await {
                            Ok(r) => r,
                            Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
                        }
                    }));
                }
                SlaveAction::Send(report) => {
                    let Some(stream) = self.stream.as_mut() else { continue };
                    let limit = self.config.core.housekeeping_interval;
                    let write = async {
                        stream.write_all(&report).await?;
                        stream.flush().await
                    };
                    match tokio::time::timeout(limit, write).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => self.closed(&format!("report failed: {e}")),
                        Err(_) => self.closed("report timed out"),
                    }
                }
                SlaveAction::Flush => {
                    let log = self.log.clone();
                    self.flushing = Some(tokio::task::spawn_blocking(move || log.flush()));
                }
                SlaveAction::Disconnect => self.stream = None,
            }
        }
    }

    fn closed(&mut self, why: &str) {
        info!(why, "connection to master ended");
        self.stream = None;
        self.driver.closed(now());
    }

    async fn stop(mut self, reply: Option<oneshot::Sender<()>>) {
        self.stream = None;
        if let Some(flushing) = self.flushing.take() {
            let _ = flushing.await;
        }
        let log = self.log.clone();
        match tokio::task::spawn_blocking(move || log.flush()).await {
            Ok(Ok(end)) => info!(end, "slave stopped"),
            Ok(Err(e)) => warn!(%e, "flush at shutdown failed"),
            Err(e) => warn!(%e, "flush at shutdown failed"),
        }
        if let Some(reply) = reply {
            let _ = reply.send(());
        }
    }
}

async fn read_opt(stream: &mut Option<Stream>, buf: &mut BytesMut) -> io::Result<usize> {
    match stream {
        Some(s) => s.read_buf(buf).await,
        None => std::future::pending().await,
    }
}

async fn poll_opt(connecting: &mut Option<Connecting>) -> io::Result<Stream> {
    match connecting {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

async fn join_opt<T>(task: &mut Option<JoinHandle<T>>) -> Result<T, tokio::task::JoinError> {
    match task {
        Some(t) => t.await,
        None => std::future::pending().await,
    }
}
