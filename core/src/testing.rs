//! A testing surface for embedders (feature `testing`): a master and a slave of the classic
//! protocol in memory, driven step by step under faults, and proptest strategies for frames,
//! reports and fault schedules. Unlike the `fuzzing` feature (the fuzz targets' bodies), this
//! module is a stable API: it follows the crate's semver. See `docs/testing.md`.
//!
//! ```
//! use logship_core::testing::{Pair, Step};
//! use std::time::Duration;
//!
//! let mut pair = Pair::new(Default::default(), Default::default())?;
//! pair.run(&[Step::Append(vec![1; 100]), Step::Disconnect, Step::Append(vec![2; 50])])?;
//! pair.converge(Duration::from_secs(60))?;
//! assert_eq!(pair.slave_log(), pair.master_log());
//! # Ok::<(), logship_core::testing::PairError>(())
//! ```

use std::time::Duration;

use bytes::Bytes;
use proptest::prelude::*;

use crate::classic::frame::{PushHeader, encode_report};
use crate::time::Instant;
use crate::{
    ApiMisuse, ConnId, CoreConfigError, LogBounds, MasterConfig, Offset, SlaveConfig,
    classic::{Master, MasterInput, MasterOutput, Slave, SlaveInput, SlaveOutput},
};

/// Why a [`Pair`] cannot run: a configuration the core refuses, or a state machine that
/// refused an input (a bug in the core or in this driver).
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PairError {
    /// A master or slave configuration the core refuses.
    #[error(transparent)]
    Config(#[from] CoreConfigError),
    /// A state machine refused an input.
    #[error(transparent)]
    Misuse(#[from] ApiMisuse),
}

/// One step of a [`Pair`]'s schedule: log growth or a fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// The master's log grows by these bytes (a put).
    Append(Vec<u8>),
    /// The connection breaks (both sides see it closed); the slave reconnects after its back-off.
    Disconnect,
    /// Time passes: heartbeats, timeouts and reconnects fire.
    Advance(Duration),
    /// The network refuses connections until the next `Heal` (a partition).
    Partition,
    /// Connections succeed again.
    Heal,
}

/// A master and a slave connected through an in-memory network, each with a `Vec<u8>` log.
///
/// Every method shuttles bytes between the two until neither has anything to send, and checks
/// the protocol's promise after every output: the slave's log is always a prefix of the
/// master's (it never stores a byte the master did not write, nor out of order).
#[derive(Debug)]
pub struct Pair {
    master: Master,
    slave: Slave,
    master_log: Vec<u8>,
    slave_log: Vec<u8>,
    now: Instant,
    conn: Option<ConnId>,
    next_conn: u64,
    partitioned: bool,
}

impl Pair {
    /// A pair with empty logs at [`Instant::ZERO`], started and settled (connected).
    pub fn new(master: MasterConfig, slave: SlaveConfig) -> Result<Self, PairError> {
        let now = Instant::ZERO;
        let mut pair = Self {
            master: Master::new(master, now, LogBounds { min: 0, max: 0 })?,
            slave: Slave::new(slave, now, 0, 0)?,
            master_log: Vec::new(),
            slave_log: Vec::new(),
            now,
            conn: None,
            next_conn: 1,
            partitioned: false,
        };
        pair.settle()?;
        Ok(pair)
    }

    /// The master's log.
    pub fn master_log(&self) -> &[u8] {
        &self.master_log
    }

    /// The slave's log.
    pub fn slave_log(&self) -> &[u8] {
        &self.slave_log
    }

    /// The current instant on the pair's timeline.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The master state machine, for its getters (`slaves()`, ...).
    pub fn master(&self) -> &Master {
        &self.master
    }

    /// Runs `steps` in order, settling after each.
    pub fn run(&mut self, steps: &[Step]) -> Result<(), PairError> {
        for step in steps {
            self.step(step)?;
        }
        Ok(())
    }

    /// Runs one step and settles.
    pub fn step(&mut self, step: &Step) -> Result<(), PairError> {
        match step {
            Step::Append(bytes) => {
                self.master_log.extend_from_slice(bytes);
                let end = self.master_log.len() as Offset;
                self.master.handle_input(self.now, MasterInput::Appended { end })?;
            }
            Step::Disconnect => self.disconnect()?,
            Step::Advance(by) => self.advance(*by)?,
            Step::Partition => {
                self.partitioned = true;
                self.disconnect()?;
            }
            Step::Heal => self.partitioned = false,
        }
        self.settle()
    }

    /// Heals any partition and lets time pass in steps of a second, up to `limit`, until the
    /// slave holds the master's whole log; returns whether it does.
    pub fn converge(&mut self, limit: Duration) -> Result<bool, PairError> {
        self.partitioned = false;
        let mut waited = Duration::ZERO;
        while self.slave_log.len() < self.master_log.len() && waited < limit {
            self.advance(Duration::from_secs(1))?;
            self.settle()?;
            waited += Duration::from_secs(1);
        }
        Ok(self.slave_log == self.master_log)
    }

    fn advance(&mut self, by: Duration) -> Result<(), PairError> {
        self.now += by;
        self.master.handle_timeout(self.now);
        self.slave.handle_timeout(self.now);
        Ok(())
    }

    fn disconnect(&mut self) -> Result<(), PairError> {
        if let Some(conn) = self.conn.take() {
            self.master.handle_input(self.now, MasterInput::Closed { conn })?;
            self.slave.handle_input(self.now, SlaveInput::Closed)?;
        }
        Ok(())
    }

    /// Shuttles outputs between the two until both are idle.
    fn settle(&mut self) -> Result<(), PairError> {
        loop {
            let mut progress = false;
            loop {
                match self.slave.poll_output() {
                    SlaveOutput::Connect if self.partitioned => {
                        self.slave.handle_input(self.now, SlaveInput::Closed)?;
                    }
                    SlaveOutput::Connect => {
                        let conn = ConnId(self.next_conn);
                        self.next_conn += 1;
                        self.conn = Some(conn);
                        self.slave.handle_input(self.now, SlaveInput::Connected)?;
                        self.master.handle_input(self.now, MasterInput::Accepted { conn })?;
                        progress = true;
                    }
                    SlaveOutput::Report(offset) => {
                        if let Some(conn) = self.conn {
                            let data = Bytes::copy_from_slice(&encode_report(offset));
                            self.master.handle_input(self.now, MasterInput::Received { conn, data })?;
                            progress = true;
                        }
                    }
                    SlaveOutput::Append { offset, data } => {
                        assert_eq!(offset as usize, self.slave_log.len(), "the slave appends contiguously");
                        self.slave_log.extend_from_slice(&data);
                        assert!(
                            self.master_log.starts_with(&self.slave_log),
                            "the slave stores only the master's bytes"
                        );
                        let end = self.slave_log.len() as Offset;
                        self.slave.handle_input(self.now, SlaveInput::Appended { end })?;
                    }
                    SlaveOutput::Flush => {
                        let end = self.slave_log.len() as Offset;
                        self.slave.handle_input(self.now, SlaveInput::Flushed { end })?;
                    }
                    SlaveOutput::Close(_) => {
                        if let Some(conn) = self.conn.take() {
                            self.master.handle_input(self.now, MasterInput::Closed { conn })?;
                        }
                    }
                    SlaveOutput::Timeout(_) => break,
                    _ => {}
                }
            }
            loop {
                match self.master.poll_output() {
                    // A transmit or close for a connection already closed is dropped, as a socket
                    // would (the `_` arm).
                    MasterOutput::Transmit { conn, header, body } if self.conn == Some(conn) => {
                        let mut wire = header.to_vec();
                        if let Some(span) = body {
                            wire.extend_from_slice(
                                &self.master_log[span.offset as usize..span.end() as usize],
                            );
                        }
                        self.slave.handle_input(self.now, SlaveInput::Received(Bytes::from(wire)))?;
                        self.master.handle_input(self.now, MasterInput::Sent { conn })?;
                        progress = true;
                    }
                    MasterOutput::Close { conn, .. } if self.conn == Some(conn) => {
                        self.master.handle_input(self.now, MasterInput::Closed { conn })?;
                        self.conn = None;
                        self.slave.handle_input(self.now, SlaveInput::Closed)?;
                        progress = true;
                    }
                    MasterOutput::Timeout(_) => break,
                    _ => {}
                }
            }
            if !progress {
                return Ok(());
            }
        }
    }
}

/// A well-formed push frame (header and body) at an offset below 2^40, with up to 256 body
/// bytes; a quarter are heartbeats.
pub fn frames() -> impl Strategy<Value = Vec<u8>> {
    (0u64..1 << 40, prop_oneof![1 => Just(Vec::new()), 3 => proptest::collection::vec(any::<u8>(), 1..256)])
        .prop_map(|(offset, body)| {
            let header = PushHeader { offset, body_len: body.len() as u32 };
            let mut wire = header.encode().to_vec();
            wire.extend_from_slice(&body);
            wire
        })
}

/// A slave report's 8 bytes, for any offset: including the TLS-looking ones above
/// [`PLAIN_REPORT_LIMIT`](crate::service::tls::PLAIN_REPORT_LIMIT) and those beyond Java's
/// `long`, which the decoder refuses with `FrameError::OffsetOutOfRange`.
pub fn reports() -> impl Strategy<Value = [u8; 8]> {
    any::<u64>().prop_map(encode_report)
}

/// One [`Step`]: mostly appends of 1 to 512 bytes, with disconnects, partitions and time.
pub fn steps() -> impl Strategy<Value = Step> {
    prop_oneof![
        6 => proptest::collection::vec(any::<u8>(), 1..512).prop_map(Step::Append),
        1 => Just(Step::Disconnect),
        1 => (1u64..30_000).prop_map(|ms| Step::Advance(Duration::from_millis(ms))),
        1 => Just(Step::Partition),
        1 => Just(Step::Heal),
    ]
}

/// A fault schedule of up to `max` [`steps`].
pub fn schedules(max: usize) -> impl Strategy<Value = Vec<Step>> {
    proptest::collection::vec(steps(), 0..max)
}
