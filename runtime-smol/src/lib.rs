//! # logship-smol
//!
//! Binds the sans-IO [`logship_core`] state machines to the smol ecosystem: `async-io` timers,
//! `async-net` sockets, `futures-lite` combinators, `async-channel` channels, and `blocking`
//! for disk flushes. It never spawns on a global executor: every task goes to the [`Spawn`]
//! the caller supplies, so it runs under smol's executors, under async-std's, or any other.
//! (async-std is discontinued upstream; its users should use this adapter.)
//!
//! The shape is the same as `logship-tokio`:
//!
//! - [`spawn_master`] binds the HA listen address, accepts slaves and streams the log to them;
//!   its [`MasterHandle`] puts messages (waiting for the disk and the slaves as the role says),
//!   reports status, and shuts down.
//! - [`spawn_slave`] connects to a master, stores what it streams, and acknowledges it; its
//!   [`SlaveHandle`] reports status and shuts down.
//! - [`MasterHandle::wait_in_sync`] waits until enough slaves are in sync.
//!
//! ## Example
//!
//! A SYNC_MASTER and a slave in one program on smol's executor, with
//! [`MemoryLog`](logship_core::memlog::MemoryLog)s (the `logship-store` crate's `CommitLog` is
//! the on-disk log). The repository's `examples/` directory has this program for smol,
//! async-std and tokio (`cargo run --example smol`).
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use logship_core::service::{MasterServiceConfig, SlaveServiceConfig};
//! use logship_core::BrokerRole;
//! use logship_core::memlog::MemoryLog;
//! use logship_core::PutStatus;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! smol::block_on(async {
//!     // Every task goes to the caller's executor.
//!     let spawn = |task: logship_smol::Task| smol::spawn(task).detach();
//!     let master_log = Arc::new(MemoryLog::new());
//!     let config = MasterServiceConfig { role: BrokerRole::SyncMaster, ..Default::default() };
//!     let master = logship_smol::spawn_master(config, master_log.clone(), "127.0.0.1:0".parse()?, spawn).await?;
//!
//!     let slave_log = Arc::new(MemoryLog::new());
//!     let slave_config = SlaveServiceConfig::new(master.local_addr().to_string());
//!     let slave = logship_smol::spawn_slave(slave_config, slave_log.clone(), spawn).await?;
//!
//!     master.wait_in_sync(1, Duration::from_secs(10)).await?;
//!     let put = master.put(b"hello".to_vec()).await;
//!     assert_eq!(put.status, PutStatus::PutOk); // the slave has acknowledged it
//!     assert_eq!(slave_log.contents(), master_log.contents());
//!
//!     slave.shutdown().await;
//!     master.shutdown().await;
//!     Ok(())
//! })
//! # }
//! ```
//!
//! This crate is glue: every decision is in [`logship_core::service`], and this crate keeps
//! only sockets, timers, channels and task spawning, in the same files, types and functions as
//! `logship-tokio`.
//!
//! A master runs one core task owning a [`MasterTask`](logship_core::service::adapter::MasterTask), one
//! accept task, and one task per connection whose read and write paths end together and report
//! `Closed` exactly once. A slave runs one task around a
//! [`SlaveTask`](logship_core::service::adapter::SlaveTask), which owns the
//! [`SlaveDriver`](logship_core::service::adapter::SlaveDriver) and the connection.
//!
//! With TLS configured, a master connection first peeks at its first byte and runs the
//! handshake if it starts one (`futures-rustls`), then reports the outcome to the driver, which
//! decides ([`logship_core::service::tls`]); a TLS slave runs the handshake after connecting.
//!
//! Each task names what woke it ([`MasterWake`](logship_core::service::adapter::MasterWake),
//! [`SlaveWake`](logship_core::service::adapter::SlaveWake)) and hands that to the service layer.
//!
//! The handles are the service layer's, written once for every adapter over its
//! [`Runtime`]: [`MasterHandle`] is
//! [`logship_core::service::MasterHandle`] on [`Smol`], [`SlaveHandle`] likewise. They also
//! implement [`MasterService`](logship_core::service::MasterService) and
//! [`SlaveService`](logship_core::service::SlaveService), for code that runs on either adapter.
#![forbid(unsafe_code)]

mod master;
mod slave;

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use async_channel::{Receiver, Sender, bounded};
use futures_lite::FutureExt;
use logship_core::service::adapter::{ReplySlot, Runtime};

/// The protocol core, for what the re-exports above do not cover (an in-memory log,
/// [`memlog::MemoryLog`](logship_core::memlog::MemoryLog); the adapter-author surface).
pub use logship_core;
pub use logship_core::service::tls::{MasterTls, SlaveTls, TlsMode, TlsPem};
/// What [`spawn_master`] and [`spawn_slave`] take and what their handles return, so that an
/// embedder needs this crate (and a log, such as `logship-store`'s `CommitLog`) and nothing else.
pub use logship_core::service::{
    Admission, MasterServiceConfig, MasterStatus, SlaveServiceConfig, SlaveStatus,
};
pub use logship_core::service::{InSyncError, StartError};
pub use logship_core::{
    AckPolicy, BrokerRole, FlushDiskType, FlushSettings, LogRead, LogWrite, MasterConfig, MessageLog,
    PutResult, PutStatus, SlaveConfig,
};
pub use master::{MasterHandle, spawn_master};
pub use slave::{SlaveHandle, spawn_slave};

/// The clock every task of this crate uses, on the core's timeline, counted from the first
/// reading in the process.
pub(crate) fn now() -> logship_core::time::Instant {
    let at = std::time::Instant::now();
    origin(at).instant(at)
}

/// The std instant of a core instant, for timers.
pub(crate) fn timer_at(at: logship_core::time::Instant) -> std::time::Instant {
    origin(std::time::Instant::now()).to_std(at)
}

/// The process's origin of core time: the first clock reading any task made.
fn origin(at: std::time::Instant) -> logship_core::time::Origin {
    static ORIGIN: std::sync::OnceLock<logship_core::time::Origin> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(|| logship_core::time::Origin::new(at))
}

/// A connection: plain TCP, or TLS over it.
pub(crate) trait Link: futures_lite::AsyncRead + futures_lite::AsyncWrite + Send + Unpin {}
impl<T: futures_lite::AsyncRead + futures_lite::AsyncWrite + Send + Unpin> Link for T {}
pub(crate) type Stream = Box<dyn Link>;

/// The smol ecosystem as the services' [`Runtime`]: the std clock, `async-channel` channels
/// and `async-io` timers, which run on any executor.
#[derive(Clone, Copy, Debug, Default)]
pub struct Smol;

impl Runtime for Smol {
    type Sender<T: Send + 'static> = Sender<T>;
    type ReplySender<T: Send + 'static> = Sender<T>;

    fn now(&self) -> logship_core::time::Instant {
        now()
    }

    async fn send<T: Send + 'static>(to: &Sender<T>, value: T) -> bool {
        to.send(value).await.is_ok()
    }

    fn try_send<T: Send + 'static>(to: &Sender<T>, value: T) -> bool {
        to.try_send(value).is_ok()
    }

    fn answer<T: Send + 'static>(to: Sender<T>, value: T) {
        let _ = to.try_send(value);
    }

    fn reply<T: Send + 'static>() -> (ReplySlot<Self, T>, impl Future<Output = Option<T>> + Send) {
        let (reply, answer) = bounded(1);
        (ReplySlot::new(reply), async move { answer.recv().await.ok() })
    }

    async fn timeout<F: Future + Send>(&self, limit: Duration, work: F) -> Option<F::Output> {
        let expire = async {
            async_io::Timer::after(limit).await;
            None
        };
        async { Some(work.await) }.or(expire).await
    }
}

/// A boxed task, as handed to a [`Spawn`].
pub type Task = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Runs tasks: the caller's executor. Implemented for every `Fn(Task)`, so
/// `|task| smol::spawn(task).detach()` or `|task| { async_std::task::spawn(task); }` will do.
pub trait Spawn: Send + Sync + 'static {
    /// Starts `task` in the background; it must be polled to completion.
    fn spawn(&self, task: Task);
}

impl<F: Fn(Task) + Send + Sync + 'static> Spawn for F {
    fn spawn(&self, task: Task) {
        self(task)
    }
}

/// Lets other tasks run every so often. async-io has no cooperative budget (unlike tokio), so
/// a loop whose awaits are always ready (a busy socket) would otherwise hold its executor
/// thread, starving other tasks and delaying cancellation.
#[derive(Debug, Default)]
pub(crate) struct Budget(u32);

impl Budget {
    /// Counts one turn of a loop; yields once every 32 turns.
    pub(crate) async fn tick(&mut self) {
        self.0 = (self.0 + 1) % 32;
        if self.0 == 0 {
            futures_lite::future::yield_now().await;
        }
    }
}

/// `out`, once `work` is done.
pub(crate) async fn then<T>(work: impl Future, out: T) -> T {
    work.await;
    out
}

/// `work`'s output, or `None` once `stop` receives a value or every sender of it is gone.
pub(crate) async fn unless<T>(stop: &Receiver<()>, work: impl Future<Output = T>) -> Option<T> {
    let stopped = async {
        let _ = stop.recv().await;
        None
    };
    async { Some(work.await) }.or(stopped).await
}
