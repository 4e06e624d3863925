//! The slave service on async-io / async-net.

use logship_core::time::Instant;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;

use async_channel::{Receiver, Sender, bounded};
use async_io::Timer;
use async_net::TcpStream;
use bytes::{Bytes, BytesMut};
use futures_lite::{AsyncReadExt, AsyncWriteExt, FutureExt};
use logship_core::service::tls::SlaveTls;
use logship_core::service::{SlaveAction, SlaveDriver, SlaveServiceConfig, SlaveStatus, StartError};
use logship_core::{LogWrite, Offset};
use tracing::{Instrument, info, info_span, warn};

use crate::{Budget, Spawn, now, timer_at};

/// Read buffer; refilled when less than a quarter is left.
const READ_BUFFER: usize = 64 * 1024;

enum Command {
    Status { reply: Sender<SlaveStatus> },
    Shutdown { reply: Sender<()> },
}

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
    let driver = SlaveDriver::new(&config, now(), log.clone())?;
    let (commands, rx) = bounded(16);
    // One span for the slave's connection cycle; `conn` numbers the current connection.
    let span =
        info_span!("ha_conn", role = "slave", peer = %config.master_address, conn = tracing::field::Empty);
    let task =
        SlaveTask { driver, config, log, commands: rx, stream: None, connecting: None, flushing: None };
    spawner.spawn(Box::pin(task.run().instrument(span)));
    Ok(SlaveHandle { commands })
}

impl SlaveHandle {
    /// A status snapshot of the slave's side of the master connection.
    pub async fn status(&self) -> Option<SlaveStatus> {
        let (reply, rx) = bounded(1);
        self.commands.send(Command::Status { reply }).await.ok()?;
        rx.recv().await.ok()
    }

    /// Closes the connection, flushes the log and stops.
    pub async fn shutdown(&self) {
        let (reply, rx) = bounded(1);
        if self.commands.send(Command::Shutdown { reply }).await.is_ok() {
            let _ = rx.recv().await;
        }
    }
}

/// The link to the master: plain TCP or TLS over it.
trait Link: futures_lite::AsyncRead + futures_lite::AsyncWrite + Send + Unpin {}
impl<T: futures_lite::AsyncRead + futures_lite::AsyncWrite + Send + Unpin> Link for T {}

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
            let connector = futures_rustls::TlsConnector::from(tls.client_config());
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
    commands: Receiver<Command>,
    stream: Option<Stream>,
    connecting: Option<Connecting>,
    flushing: Option<blocking::Task<Result<Offset, L::Error>>>,
}

enum Wake<E> {
    Command(Option<Command>),
    Read(io::Result<Bytes>),
    Connected(io::Result<Stream>),
    Flushed(Result<Offset, E>),
    Timer,
}

impl<L: LogWrite> SlaveTask<L> {
    async fn run(mut self) {
        let mut buf = BytesMut::new();
        let mut budget = Budget::default();
        loop {
            budget.tick().await;
            let deadline = self.perform().await;
            let wants_read = self.stream.is_some() && self.driver.wants_read();
            if wants_read && buf.len() < READ_BUFFER / 4 {
                buf.resize(READ_BUFFER, 0);
            }
            let wake = {
                let commands = async { Wake::Command(self.commands.recv().await.ok()) };
                let read = async {
                    match (&mut self.stream, wants_read) {
                        (Some(stream), true) => Wake::Read(match stream.read(&mut buf).await {
                            Ok(n) => Ok(buf.split_to(n).freeze()),
                            Err(e) => Err(e),
                        }),
                        _ => std::future::pending().await,
                    }
                };
                let connected = async {
                    match &mut self.connecting {
                        Some(f) => Wake::Connected(f.await),
                        None => std::future::pending().await,
                    }
                };
                let flushed = async {
                    match &mut self.flushing {
                        Some(t) => Wake::Flushed(t.await),
                        None => std::future::pending().await,
                    }
                };
                let timer = async {
                    Timer::at(timer_at(deadline)).await;
                    Wake::Timer
                };
                commands.or(read).or(connected).or(flushed).or(timer).await
            };
            match wake {
                Wake::Command(Some(Command::Status { reply })) => {
                    let _ = reply.try_send(self.driver.status(now()));
                }
                Wake::Command(Some(Command::Shutdown { reply })) => return self.stop(Some(reply)).await,
                Wake::Command(None) => return self.stop(None).await,
                Wake::Read(Ok(data)) if !data.is_empty() => self.driver.received(now(), data),
                Wake::Read(Ok(_)) => self.closed("the master closed the connection"),
                Wake::Read(Err(e)) => self.closed(&e.to_string()),
                Wake::Connected(result) => {
                    self.connecting = None;
                    match result {
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
                Wake::Flushed(result) => {
                    self.flushing = None;
                    self.driver.flushed(now(), result);
                }
                Wake::Timer => self.driver.handle_timeout(now()),
            }
        }
    }

    /// Performs actions until the driver has nothing more before its next timeout.
    async fn perform(&mut self) -> Instant {
        loop {
            match self.driver.next_action(now()) {
                SlaveAction::SleepUntil(at) => return at,
                SlaveAction::Connect => {
                    let address = self.config.master_address.clone();
                    let timeout = self.config.connect_timeout;
                    let tls = self.config.tls.clone();
                    self.connecting = Some(Box::pin(async move {
                        let connect = connect(address, tls);
                        let expire = async {
                            Timer::after(timeout).await;
                            Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out"))
                        };
                        connect.or(expire).await
                    }));
                }
                SlaveAction::Send(report) => {
                    let Some(stream) = self.stream.as_mut() else { continue };
                    let limit = self.config.core.housekeeping_interval;
                    let write = async {
                        let written = stream.write_all(&report).await;
                        Some(match written {
                            Ok(()) => stream.flush().await,
                            Err(e) => Err(e),
                        })
                    };
                    let expire = async {
                        Timer::after(limit).await;
                        None
                    };
                    match write.or(expire).await {
                        Some(Ok(())) => {}
                        Some(Err(e)) => self.closed(&format!("report failed: {e}")),
                        None => self.closed("report timed out"),
                    }
                }
                SlaveAction::Flush => {
                    let log = self.log.clone();
                    self.flushing = Some(blocking::unblock(move || log.flush()));
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

    async fn stop(mut self, reply: Option<Sender<()>>) {
        self.stream = None;
        if let Some(flushing) = self.flushing.take() {
            let _ = flushing.await;
        }
        let log = self.log.clone();
        match blocking::unblock(move || log.flush()).await {
            Ok(end) => info!(end, "slave stopped"),
            Err(e) => warn!(%e, "flush at shutdown failed"),
        }
        if let Some(reply) = reply {
            let _ = reply.try_send(());
        }
    }
}
