//! # logship-core
//!
//! The sans-IO heart of logship: Apache RocketMQ's classic master/slave HA replication protocol
//! as pure state machines. Nothing here reads a socket, a file or a clock, spawns a thread or
//! takes a lock. Bytes, time and log progress come in as inputs; frames to send, bytes to store
//! and events come out as outputs. A whole run is a replayable list of `(Instant, input)` pairs,
//! which is what makes the property tests, the fuzzers and the deterministic simulator possible.
//!
//! - [`frame`]: the wire format (12-byte push header + body; 8-byte report) and resumable
//!   decoders.
//! - [`Master`]: every slave connection of a master, plus SYNC_MASTER waits ([`AckPolicy`]).
//! - [`Slave`]: a slave's connection to its master, with reconnect back-off.
//! - [`admission`]: which HA connections a master admits as replicas, and which it trusts.
//! - [`tls`]: mutual TLS between logship peers on the classic HA port (rustls): negotiation by
//!   the first byte, server and client settings, replica identity from a client certificate.
//! - [`log`]: the traits a driver's log implements ([`LogRead`], [`LogWrite`], [`MessageLog`]).
//! - `sim` (feature `sim`): a deterministic simulator of a master and its slaves under seeded
//!   faults, checking the protocol's invariants after every step.
//!
//! ## The run-loop contract
//!
//! Both state machines have the same four methods:
//!
//! | method | category | when |
//! |---|---|---|
//! | `handle_input(now, input)` | feed | something happened (bytes, a connection, log progress, a wait) |
//! | `handle_timeout(now)` | feed | the instant of the last `Timeout` output has come |
//! | `poll_output()` | drain | after **every** feed, until it returns `Timeout` |
//! | getters (`slaves()`, `state()`, ...) | read | any time |
//!
//! 1. Feed one input or a timeout.
//! 2. Drain `poll_output()` and perform each output, until `Timeout(at)`. Feeding new inputs
//!    while draining (for example `Appended` right after performing an `Append`) is allowed.
//! 3. Wait for the next input or for `at`, whichever comes first, and go to 1.
//!
//! **Time** is the caller's: pass a monotonic `Instant` (in tests, any `Instant` plus virtual
//! durations). An input with a `now` earlier than a previous one is refused with
//! [`ApiMisuse::TimeWentBackwards`]; `handle_timeout` may be called early or spuriously.
//!
//! **Errors** come in three kinds: a misused API returns `Err(ApiMisuse)` and changes nothing; a
//! misbehaving peer closes its connection and raises a `PeerError` event, never an `Err` and
//! never a panic; a broken internal invariant is a bug and panics.
//!
//! **The core never touches the log.** A master emits `Transmit { header, body: Some(span) }`
//! and the driver writes the header and then `LogRead::read(span)`; a slave emits
//! `Append { offset, data }` and the driver stores it and answers `Appended { end }`.
//!
//! ## Example: a master and a slave in memory
//!
//! ```
//! use std::time::Instant;
//! use bytes::Bytes;
//! use logship_core::*;
//!
//! let now = Instant::now();
//! let master_log: Vec<u8> = (0..100u8).collect();
//! let mut master = Master::new(MasterConfig::default(), now, LogBounds { min: 0, max: 100 })?;
//! let mut slave = Slave::new(SlaveConfig::default(), now, 0, 0)?;
//! let mut slave_log: Vec<u8> = Vec::new();
//! let conn = ConnId(1);
//!
//! // The slave asks to connect; the "network" accepts at once.
//! assert_eq!(slave.poll_output(), SlaveOutput::Connect);
//! slave.handle_input(now, SlaveInput::Connected)?;
//! master.handle_input(now, MasterInput::Accepted { conn })?;
//!
//! // Shuttle outputs between the two until both are idle.
//! loop {
//!     let mut progress = false;
//!     loop {
//!         match slave.poll_output() {
//!             SlaveOutput::Transmit(report) => {
//!                 master.handle_input(now, MasterInput::Received { conn, data: Bytes::copy_from_slice(&report) })?;
//!                 progress = true;
//!             }
//!             SlaveOutput::Append { offset, data } => {
//!                 assert_eq!(offset as usize, slave_log.len());
//!                 slave_log.extend_from_slice(&data);
//!                 slave.handle_input(now, SlaveInput::Appended { end: slave_log.len() as u64 })?;
//!             }
//!             SlaveOutput::Timeout(_) => break,
//!             _ => {}
//!         }
//!     }
//!     loop {
//!         match master.poll_output() {
//!             MasterOutput::Transmit { conn, header, body } => {
//!                 let mut wire = header.to_vec();
//!                 if let Some(span) = body {
//!                     wire.extend_from_slice(&master_log[span.offset as usize..span.end() as usize]);
//!                 }
//!                 slave.handle_input(now, SlaveInput::Received(Bytes::from(wire)))?;
//!                 master.handle_input(now, MasterInput::Sent { conn })?;
//!                 progress = true;
//!             }
//!             MasterOutput::Timeout(_) => break,
//!             _ => {}
//!         }
//!     }
//!     if !progress {
//!         break;
//!     }
//! }
//! assert_eq!(slave_log, master_log);
//! assert_eq!(master.slaves().next().unwrap().ack, Some(100));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![doc(html_root_url = "https://docs.rs/logship-core/0.1.0")]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod admission;
pub mod config;
pub mod driver;
pub mod error;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod in_sync;
pub mod log;
mod master;
pub mod memlog;
pub mod policy;
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub mod sim;
mod slave;
pub mod tls;
mod waiters;

pub use admission::{Admission, IpNet};
pub use config::{AckOn, AckPolicy, ConfigError, MasterConfig, NewSlaveStart, SlaveConfig};
pub use error::{ApiMisuse, CloseReason, PeerError, WaitError};
pub use in_sync::InSyncError;
pub use log::{LogBounds, LogRead, LogSpan, LogWrite, MessageLog, Offset, PutResult, PutStatus};
pub use master::{Master, MasterEvent, MasterInput, MasterOutput, SlaveInfo};
pub use slave::{Slave, SlaveEvent, SlaveInput, SlaveOutput, SlaveState};

/// A connection id, chosen by the master driver (a counter or a slab key).
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

/// A replication-wait id, chosen by the master driver.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WaitId(pub u64);
