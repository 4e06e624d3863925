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
//!
//! ## Tasks
//!
//! A master runs one **core task** that owns the [`MasterDriver`](logship_core::driver::MasterDriver)
//! (no lock around the state machine), one accept task, and one task per connection. A
//! connection task runs its read path and its write path together and ends both as soon as
//! either ends (EOF, an I/O error, or the core closing it), then reports `Closed` exactly once.
//! With TLS configured, a connection first peeks at its first byte and runs the handshake if
//! it starts one (`tokio-rustls`), then reports the outcome to the driver, which decides; the
//! decision logic is in [`logship_core::tls`] and the driver, not here.
//! The writer resolves every span from the log without copying and writes header and body with
//! one vectored write. Puts wake the core task at once, so a frame goes out as soon as the log
//! grows.
//!
//! A slave runs one task that owns its [`Slave`](logship_core::Slave) core, the socket and the
//! timers. Flushes (with `AckOn::Flushed`) run on tokio's blocking pool.
//!
//! Time is `tokio::time::Instant::now().into_std()`, so tests with a paused clock work.
#![forbid(unsafe_code)]

mod io;
mod master;
mod slave;

pub use master::{MasterHandle, spawn_master};
pub use slave::{SlaveHandle, spawn_slave};

pub use logship_core::driver::StartError;

/// The clock every task of this crate uses: tokio's, so paused-time tests work.
pub(crate) fn now() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}
