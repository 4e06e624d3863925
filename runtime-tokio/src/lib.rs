//! # logship-tokio
//!
//! Binds the sans-IO [`logship_core`] state machines to tokio: real sockets, real timers, one task
//! per core.
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
//! A SYNC_MASTER and a slave in one program, with
//! [`MemoryLog`](logship_core::memlog::MemoryLog)s (the `logship-store` crate's `CommitLog` is
//! the on-disk log). This crate's `examples/` has this program (`cargo run -p logship-tokio
//! --example tokio`) and one on two on-disk stores (`--example store`); `logship-smol`'s has it
//! for smol and async-std. Everything the example names is re-exported here.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use logship_tokio::{BrokerRole, MasterServiceConfig, PutStatus, SlaveServiceConfig};
//! use logship_tokio::logship_core::memlog::MemoryLog;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! rt.block_on(async {
//!     let master_log = Arc::new(MemoryLog::new());
//!     let config = MasterServiceConfig { role: BrokerRole::SyncMaster, ..Default::default() };
//!     let master = logship_tokio::spawn_master(config, master_log.clone(), "127.0.0.1:0".parse()?).await?;
//!
//!     let slave_log = Arc::new(MemoryLog::new());
//!     let slave_config = SlaveServiceConfig::new(master.local_addr().to_string());
//!     let slave = logship_tokio::spawn_slave(slave_config, slave_log.clone()).await?;
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
//! A put's result is `#[must_use]`: dropping it, and with it a SYNC wait that failed, is a
//! warning (here denied).
//!
//! ```compile_fail
//! #![deny(unused_must_use)]
//! # use logship_tokio::logship_core::memlog::MemoryLog;
//! async fn fire_and_forget(master: &logship_tokio::MasterHandle<MemoryLog>) {
//!     master.put(b"m".to_vec()).await; // error: unused `PutResult` that must be used
//! }
//! ```
//!
//! ```
//! #![deny(unused_must_use)]
//! # use logship_tokio::logship_core::memlog::MemoryLog;
//! async fn checked(master: &logship_tokio::MasterHandle<MemoryLog>) -> bool {
//!     master.put(b"m".to_vec()).await.status.is_stored()
//! }
//! ```
//!
//! ## Tasks
//!
//! This crate is glue: every decision is in [`logship_core::service`], and this crate keeps
//! only sockets, timers, channels and task spawning. `logship-smol` has the same files, types
//! and functions in the same order.
//!
//! A master runs one **core task** that owns a
//! [`MasterTask`](logship_core::service::adapter::MasterTask) (no lock around the state machine): it
//! waits for commands, an append or the timer, and hands each to the task, which batches the
//! commands, publishes the fence into the put gate the handles check, and says when to wake
//! next and when to stop. Beside it run one accept task and one task per connection. A
//! connection task runs its read path and its write path together and ends both as soon as
//! either ends (EOF, an I/O error, or the core closing it), then reports `Closed` exactly once.
//! With TLS configured, a connection first peeks at its first byte and runs the handshake if
//! it starts one (`tokio-rustls`), then reports the outcome to the driver, which decides
//! ([`logship_core::service::tls`]). The writer resolves every span from the log without
//! copying and writes header and body with vectored writes
//! ([`Frame`](logship_core::service::adapter::Frame)). Puts wake the core task at once, so a frame goes
//! out as soon as the log grows.
//!
//! A slave runs one task around a [`SlaveTask`](logship_core::service::adapter::SlaveTask), which owns
//! the [`SlaveDriver`](logship_core::service::adapter::SlaveDriver) and the connection and decides what
//! each connect, read, report and flush outcome means. Flushes (with `AckOn::Flushed`) run on
//! tokio's blocking pool. Each task names what woke it
//! ([`MasterWake`](logship_core::service::adapter::MasterWake),
//! [`SlaveWake`](logship_core::service::adapter::SlaveWake)) and hands that to the service layer.
//!
//! The handles are the service layer's, written once for every adapter over its
//! [`Runtime`]: [`MasterHandle`] is
//! [`logship_core::service::MasterHandle`] on [`Tokio`], [`SlaveHandle`] likewise. They also
//! implement [`MasterService`](logship_core::service::MasterService) and
//! [`SlaveService`](logship_core::service::SlaveService), for code that runs on either adapter.
//!
//! Time is tokio's clock (`tokio::time::Instant`), so tests with a paused clock work, mapped onto
//! the core's timeline by one process-wide [`Origin`](logship_core::time::Origin).
#![forbid(unsafe_code)]

mod master;
mod slave;

use std::future::Future;
use std::time::Duration;

use logship_core::service::adapter::{ReplySlot, Runtime};
use tokio::sync::{mpsc, oneshot};

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

/// The clock every task of this crate uses, on the core's timeline: tokio's clock (so
/// paused-time tests work), counted from the first reading in the process.
pub(crate) fn now() -> logship_core::time::Instant {
    let at = tokio::time::Instant::now().into_std();
    origin(at).instant(at)
}

/// Closes a stopping task's command queue and drops what is queued, so that a caller (a
/// `status()` or `wait_in_sync()` sent during or after shutdown) sees the service stopped
/// instead of waiting forever. Receives until the queue says it is done: a send that had
/// reserved its slot before the close still lands, and a handle keeps the channel alive, so a
/// command landing after a mere drop of the receiver would stay queued, unanswered, for good.
pub(crate) async fn refuse_later<T>(commands: &mut mpsc::Receiver<T>) {
    commands.close();
    while commands.recv().await.is_some() {}
}

/// The tokio instant of a core instant, for timers.
pub(crate) fn timer_at(at: logship_core::time::Instant) -> tokio::time::Instant {
    tokio::time::Instant::from_std(origin(tokio::time::Instant::now().into_std()).to_std(at))
}

/// The process's origin of core time: the first clock reading any task made.
fn origin(at: std::time::Instant) -> logship_core::time::Origin {
    static ORIGIN: std::sync::OnceLock<logship_core::time::Origin> = std::sync::OnceLock::new();
    *ORIGIN.get_or_init(|| logship_core::time::Origin::new(at))
}

/// A connection: plain TCP, or TLS over it.
pub(crate) trait Link: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin> Link for T {}
pub(crate) type Stream = Box<dyn Link>;

/// Tokio as the services' [`Runtime`]: its clock, `mpsc` channels, `oneshot` replies, and the timers
/// of the runtime a service was spawned on (so a handle may be awaited on another executor).
#[derive(Clone, Debug)]
pub struct Tokio(tokio::runtime::Handle);

impl Tokio {
    /// The runtime the caller runs on.
    pub(crate) fn current() -> Self {
        Self(tokio::runtime::Handle::current())
    }
}

impl Runtime for Tokio {
    type Sender<T: Send + 'static> = mpsc::Sender<T>;
    type ReplySender<T: Send + 'static> = oneshot::Sender<T>;

    fn now(&self) -> logship_core::time::Instant {
        now()
    }

    async fn send<T: Send + 'static>(to: &mpsc::Sender<T>, value: T) -> bool {
        to.send(value).await.is_ok()
    }

    fn try_send<T: Send + 'static>(to: &mpsc::Sender<T>, value: T) -> bool {
        to.try_send(value).is_ok()
    }

    fn answer<T: Send + 'static>(to: oneshot::Sender<T>, value: T) {
        let _ = to.send(value);
    }

    fn reply<T: Send + 'static>() -> (ReplySlot<Self, T>, impl Future<Output = Option<T>> + Send) {
        let (reply, answer) = oneshot::channel();
        (ReplySlot::new(reply), async move { answer.await.ok() })
    }

    fn timeout<F: Future + Send>(
        &self,
        limit: Duration,
        work: F,
    ) -> impl Future<Output = Option<F::Output>> + Send {
        let timeout = {
            let _context = self.0.enter();
            tokio::time::timeout(limit, work)
        };
        async move { timeout.await.ok() }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{now, timer_at};

    #[tokio::test(start_paused = true)]
    async fn core_time_follows_the_paused_tokio_clock_and_maps_back_to_it() {
        let t0 = now();
        let tokio_t0 = tokio::time::Instant::now();
        tokio::time::sleep(Duration::from_secs(7)).await;
        assert_eq!(now().saturating_duration_since(t0), Duration::from_secs(7));
        assert_eq!(timer_at(t0 + Duration::from_secs(1)), tokio_t0 + Duration::from_secs(1));
    }
}
