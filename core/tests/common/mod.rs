//! Helpers shared by the core's integration tests.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use logship_core::time::Instant;

use bytes::Bytes;
use logship_core::classic::frame::{PushHeader, encode_report};
use logship_core::classic::*;
use logship_core::*;

pub const SEG: u64 = 1 << 20;

pub struct Clock(pub Instant);

impl Clock {
    pub fn new() -> Self {
        Self(Instant::ZERO)
    }
    pub fn at(&self, ms: u64) -> Instant {
        self.0 + Duration::from_millis(ms)
    }
}

pub fn master_config() -> MasterConfig {
    MasterConfig { mapped_file_size_commit_log: SEG, ..MasterConfig::default() }
}

/// Every output up to the terminal timeout, and that timeout.
pub fn drain_master(m: &mut Master) -> (Vec<MasterOutput>, Instant) {
    let mut out = Vec::new();
    loop {
        match m.poll_output() {
            MasterOutput::Timeout(t) => return (out, t),
            o => out.push(o),
        }
    }
}

pub fn drain_slave(s: &mut Slave) -> (Vec<SlaveOutput>, Instant) {
    let mut out = Vec::new();
    loop {
        match s.poll_output() {
            SlaveOutput::Timeout(t) => return (out, t),
            o => out.push(o),
        }
    }
}

pub fn report(offset: Offset) -> Bytes {
    Bytes::copy_from_slice(&encode_report(offset))
}

pub fn push(offset: Offset, body: &[u8]) -> Bytes {
    let mut v = PushHeader { offset, body_len: body.len() as u32 }.encode().to_vec();
    v.extend_from_slice(body);
    Bytes::from(v)
}

/// The transmits in `out` as (conn, header, span).
pub fn transmits(out: &[MasterOutput]) -> Vec<(ConnId, PushHeader, Option<LogSpan>)> {
    out.iter()
        .filter_map(|o| match o {
            MasterOutput::Transmit { conn, header, body } => {
                Some((*conn, PushHeader::decode(header, u32::MAX >> 1).unwrap(), *body))
            }
            _ => None,
        })
        .collect()
}

pub fn events(out: &[MasterOutput]) -> Vec<MasterEvent> {
    out.iter()
        .filter_map(|o| match o {
            MasterOutput::Event(e) => Some(e.clone()),
            _ => None,
        })
        .collect()
}

pub fn closes(out: &[MasterOutput]) -> Vec<(ConnId, CloseReason)> {
    out.iter()
        .filter_map(|o| match o {
            MasterOutput::Close { conn, reason } => Some((*conn, *reason)),
            _ => None,
        })
        .collect()
}

pub fn wait_results(out: &[MasterOutput]) -> Vec<(WaitId, Result<Offset, WaitError>)> {
    out.iter()
        .filter_map(|o| match o {
            MasterOutput::Event(MasterEvent::WaitDone { id, result }) => Some((*id, *result)),
            _ => None,
        })
        .collect()
}

/// A master with one connection that has sent its first report `first`; outputs drained.
pub fn streaming_master(
    config: MasterConfig,
    clock: &Clock,
    log: LogBounds,
    first: Offset,
) -> (Master, Vec<MasterOutput>) {
    let mut m = Master::new(config, clock.at(0), log).unwrap();
    m.handle_input(clock.at(0), MasterInput::Accepted { conn: ConnId(1) }).unwrap();
    m.handle_input(clock.at(0), MasterInput::Received { conn: ConnId(1), data: report(first) }).unwrap();
    let (out, _) = drain_master(&mut m);
    (m, out)
}

/// Acknowledges every transmit in `out` as written.
pub fn sent_all(m: &mut Master, at: Instant, out: &[MasterOutput]) {
    for (conn, _, _) in transmits(out) {
        m.handle_input(at, MasterInput::Sent { conn }).unwrap();
    }
}

pub fn slave_outputs_reports(out: &[SlaveOutput]) -> Vec<Offset> {
    out.iter()
        .filter_map(|o| match o {
            SlaveOutput::Report(offset) => Some(*offset),
            _ => None,
        })
        .collect()
}

pub fn slave_appends(out: &[SlaveOutput]) -> Vec<(Offset, Bytes)> {
    out.iter()
        .filter_map(|o| match o {
            SlaveOutput::Append { offset, data } => Some((*offset, data.clone())),
            _ => None,
        })
        .collect()
}

/// A slave that has connected and sent its first report; outputs drained.
pub fn streaming_slave(config: SlaveConfig, clock: &Clock, end: Offset) -> (Slave, Vec<SlaveOutput>) {
    let mut s = Slave::new(config, clock.at(0), end, end).unwrap();
    let (out, _) = drain_slave(&mut s);
    assert_eq!(out, [SlaveOutput::Connect]);
    s.handle_input(clock.at(0), SlaveInput::Connected).unwrap();
    let (out, _) = drain_slave(&mut s);
    (s, out)
}
