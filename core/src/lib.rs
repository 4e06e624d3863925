//! # logship-core
//!
//! Apache RocketMQ's master/slave HA replication protocols, sans IO, and the service layer the
//! runtime adapters share.
//!
//! ## Layers
//!
//! Each layer imports only the layers listed before it; none imports a later one.
//!
//! 1. **Shared ground** (the crate root): what both protocols use. [`MasterConfig`],
//!    [`SlaveConfig`], [`AckPolicy`] and the RocketMQ defaults; [`ApiMisuse`] and
//!    [`WaitError`]; the ids [`ConnId`] and [`WaitId`]; [`BrokerRole`] and [`FlushDiskType`];
//!    [`time`]; and the log: the traits [`LogRead`], [`LogWrite`], [`MessageLog`] and
//!    [`EpochLog`] a log implements for the layers above, with the epoch list they carry
//!    ([`EpochEntry`], [`EpochCache`]). [`memlog`] is a log in memory.
//! 2. **The protocols**, pure state machines. Nothing here reads a socket, a file or a clock,
//!    spawns a thread, takes a lock or touches the log. Bytes, time and log progress come in as
//!    inputs; frames to send, bytes to store and events come out as outputs. A whole run is a
//!    replayable list of `(Instant, input)` pairs, which is what makes the property tests, the
//!    fuzzers and the deterministic simulator possible.
//!    - [`classic`]: RocketMQ's classic protocol: its wire format ([`classic::frame`]), the
//!      [`classic::Master`] with SYNC_MASTER waits, and the [`classic::Slave`] with reconnect
//!      back-off.
//!    - [`autoswitch`]: RocketMQ 5's controller-mode protocol, a second protocol beside the
//!      classic one with the same run-loop contract: frames A–D, `findConsistentPoint`, and
//!      master and slave machines that carry epochs, ask the driver to truncate a divergent
//!      tail before streaming, and track confirmOffset and the sync-state-set.
//!
//!    Each protocol module names its own machines, inputs, outputs, events and errors
//!    (`classic::MasterInput`, `autoswitch::MasterInput`, ...); the root names none of them.
//! 3. **The service layer** ([`service`]): what every runtime adapter needs, written once and
//!    synchronously around the state machines — service configuration, admission and TLS links,
//!    the put path, the sinks an adapter implements, status snapshots, the master and slave
//!    drivers, and the synchronous halves of the adapters' tasks (`MasterTask`, `SlaveTask`:
//!    command batching, the put gate, shutdown, connection outcomes; the frame writer and read
//!    buffer). The service handles (`MasterHandle`, `SlaveHandle`) are its one `async` part,
//!    written once over the [`service::Runtime`] each adapter implements. It **does** call the
//!    log (`put`, `append_at`, bounds, record boundaries) and logs through `tracing` into the
//!    span its adapter opened; it still reads no socket or clock and spawns nothing. The
//!    adapters (`logship-runtime-tokio`, `logship-runtime-smol`) supply only sockets, timers,
//!    channels and tasks.
//! 4. **Failover** ([`failover`]): the per-broker failover rules over a coordinator's view.
//! 5. **The simulator** (`sim`, feature `sim`): a deterministic simulator of a master and its
//!    slaves under seeded faults, checking the protocol's invariants after every step.
//!
//! Beside the layers, `testing` (feature `testing`) and the fuzz targets' bodies (feature
//! `fuzzing`) drive the classic machines in memory: they import the protocols, and nothing in
//! the crate imports them. `tests/module_cycles.rs` fails if two sibling modules import each
//! other.
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
//! **Time** is the caller's: `now` is a [`time::Instant`], a point on a timeline whose origin
//! the caller chose. An adapter maps its clock onto it with a [`time::Origin`]; the simulator and
//! tests count from [`time::Instant::ZERO`]. An input with a `now` earlier than a previous one is refused with
//! [`ApiMisuse::TimeWentBackwards`]; `handle_timeout` may be called early or spuriously.
//!
//! **Errors** come in three kinds: a misused API returns `Err(ApiMisuse)` and changes nothing; a
//! misbehaving peer closes its connection and raises a `PeerError` event (each protocol has its
//! own `PeerError`), never an `Err` and never a panic; a broken internal invariant is a bug and
//! panics.
//!
//! **The protocol core never touches the log.** A master emits `Transmit { header, body: Some(span) }`
//! and the driver (in logship, [`service::MasterDriver`]) writes the header and then `LogRead::read(span)`; a slave emits
//! `Append { offset, data }` and the driver stores it and answers `Appended { end }`.
//!
//! ## Example: a master and a slave in memory
//!
//! ```
//! use logship_core::time::Instant;
//! use bytes::Bytes;
//! use logship_core::classic::*;
//! use logship_core::*;
//!
//! let now = Instant::ZERO;
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
//!             SlaveOutput::Report(offset) => {
//!                 let report = frame::encode_report(offset);
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

pub mod autoswitch;
mod chunks;
pub mod classic;
mod config;
mod error;
pub mod failover;
#[cfg(feature = "fuzzing")]
#[cfg_attr(docsrs, doc(cfg(feature = "fuzzing")))]
#[doc(hidden)]
pub mod fuzzing;
mod ids;
mod log;
pub mod memlog;
#[cfg(all(feature = "planted-bugs", debug_assertions))]
#[cfg_attr(docsrs, doc(cfg(feature = "planted-bugs")))]
pub mod planted;
#[cfg(not(all(feature = "planted-bugs", debug_assertions)))]
#[allow(unreachable_pub)]
mod planted;
pub mod policy;
mod roles;
pub mod service;
#[cfg(feature = "sim")]
#[cfg_attr(docsrs, doc(cfg(feature = "sim")))]
pub mod sim;
mod stream;
#[cfg(feature = "testing")]
#[cfg_attr(docsrs, doc(cfg(feature = "testing")))]
pub mod testing;
pub mod time;
mod waiters;

pub use config::{
    AckOn, AckPolicy, CoreConfigError, DEFAULT_FIRST_REPORT_TIMEOUT, DEFAULT_HA_MAX_GAP_NOT_IN_SYNC,
    DEFAULT_HEARTBEAT_INTERVAL, DEFAULT_HOUSEKEEPING_INTERVAL, DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG,
    DEFAULT_MAX_FIRST_OFFSET, DEFAULT_MAX_INFLIGHT, DEFAULT_MAX_UNSTORED, DEFAULT_RECONNECT_INTERVAL,
    DEFAULT_TRANSFER_BATCH_SIZE, MAX_JAVA_FRAME_BODY, MasterConfig, NewSlaveStart, SlaveConfig,
};
pub use error::{ApiMisuse, WaitError};
pub use ids::{ConnId, WaitId};
pub use log::{
    EpochAppended, EpochCache, EpochEntry, EpochError, EpochLog, FlushSettings, LogBounds, LogRead, LogSpan,
    LogWrite, MessageLog, Offset, PutResult, PutStatus,
};
pub use roles::{BrokerRole, FlushDiskType};
