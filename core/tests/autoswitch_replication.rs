//! An AutoSwitch master and slaves driven against each other in memory: a failover with a
//! divergent tail, epochs carried across, and an empty broker joining later.

mod common;

use logship_core::time::Instant;
use std::collections::BTreeSet;

use bytes::Bytes;
use common::Clock;
use logship_core::autoswitch::*;
use logship_core::{ConnId, LogBounds};
use logship_core::{EpochAppended, EpochCache, EpochEntry};
use proptest::prelude::*;

/// A broker's log in memory: bytes from offset 0.
#[derive(Default)]
struct Node {
    data: Vec<u8>,
    epochs: Vec<EpochEntry>,
    confirm: Option<u64>,
    truncations: Vec<u64>,
}

impl Node {
    fn write(&mut self, len: usize, seed: u8) {
        let at = self.data.len();
        self.data.extend((0..len).map(|i| seed.wrapping_add((at + i) as u8)));
    }
}

fn master(node: &Node, id: i64, members: &[i64], at: Instant) -> AutoSwitchMaster {
    let config = AutoSwitchMasterConfig { broker_id: id, transfer_batch_size: 64, ..Default::default() };
    let start = MasterStart {
        log: LogBounds { min: 0, max: node.data.len() as u64 },
        epochs: EpochCache::from_entries(node.epochs.iter().copied()).unwrap(),
        sync_state_set: members.iter().copied().collect::<BTreeSet<_>>(),
        sync_state_set_epoch: 1,
        confirm_offset: 0,
    };
    AutoSwitchMaster::new(config, at, start).unwrap()
}

fn slave(node: &Node, id: i64, at: Instant) -> AutoSwitchSlave {
    let config = AutoSwitchSlaveConfig { broker_id: id, ..Default::default() };
    let epochs = EpochCache::from_entries(node.epochs.iter().copied()).unwrap();
    AutoSwitchSlave::new(config, at, node.data.len() as u64, node.data.len() as u64, epochs).unwrap()
}

/// Shuttles outputs between `m` (over `mlog`) and each slave until all are idle.
fn run(
    at: Instant,
    m: &mut AutoSwitchMaster,
    mlog: &Node,
    slaves: &mut [(&mut AutoSwitchSlave, &mut Node, ConnId)],
) {
    loop {
        let mut progress = false;
        for (s, log, conn) in slaves.iter_mut() {
            loop {
                match s.poll_output() {
                    SlaveOutput::Timeout(_) => break,
                    SlaveOutput::Connect => {
                        s.handle_input(at, SlaveInput::Connected).unwrap();
                        m.handle_input(at, MasterInput::Accepted { conn: *conn }).unwrap();
                    }
                    SlaveOutput::Transmit(frame) => {
                        m.handle_input(
                            at,
                            MasterInput::Received { conn: *conn, data: Bytes::from(frame.encode()) },
                        )
                        .unwrap();
                        progress = true;
                    }
                    SlaveOutput::Truncate { offset, epochs } => {
                        log.data.truncate(offset as usize);
                        log.epochs = epochs;
                        log.truncations.push(offset);
                        s.handle_input(at, SlaveInput::Truncated { end: offset }).unwrap();
                    }
                    SlaveOutput::StoreEpochs(e) => log.epochs = e,
                    SlaveOutput::Append { offset, data } => {
                        assert_eq!(offset, log.data.len() as u64, "appends continue the log");
                        log.data.extend_from_slice(&data);
                        s.handle_input(at, SlaveInput::Appended { end: log.data.len() as u64 }).unwrap();
                    }
                    SlaveOutput::ConfirmOffset(c) => {
                        assert!(c <= log.data.len() as u64, "confirmOffset never exceeds the local end");
                        log.confirm = Some(c);
                    }
                    SlaveOutput::Close(reason) => panic!("slave closed: {reason:?}"),
                    SlaveOutput::Flush => {
                        s.handle_input(at, SlaveInput::Flushed { end: log.data.len() as u64 }).unwrap()
                    }
                    SlaveOutput::Event(_) => {}
                }
            }
        }
        loop {
            match m.poll_output() {
                MasterOutput::Timeout(_) => break,
                MasterOutput::Transmit { conn, header, body } => {
                    let mut wire = header.to_vec();
                    if let Some(span) = body {
                        wire.extend_from_slice(&mlog.data[span.offset as usize..span.end() as usize]);
                    }
                    let (s, _, _) = slaves.iter_mut().find(|x| x.2 == conn).expect("known conn");
                    s.handle_input(at, SlaveInput::Received(Bytes::from(wire))).unwrap();
                    m.handle_input(at, MasterInput::Sent { conn }).unwrap();
                    progress = true;
                }
                MasterOutput::Close { reason, .. } => panic!("master closed a slave: {reason:?}"),
                MasterOutput::Event(MasterEvent::SyncStateSetChange { proposed }) => {
                    // The coordinator accepts every proposal at once.
                    m.handle_input(at, MasterInput::SyncStateSetApplied { set: proposed, epoch: 2 }).unwrap();
                }
                _ => {}
            }
        }
        if !progress {
            break;
        }
    }
}

#[test]
fn old_master_rejoins_truncates_its_divergent_tail_and_ends_identical() {
    let clock = Clock::new();
    let t = clock.at(0);
    // A is master at epoch 1 and writes 200 bytes, which B replicates.
    let mut a = Node { epochs: vec![EpochEntry { epoch: 1, start_offset: 0 }], ..Default::default() };
    a.write(200, 1);
    let mut b = Node::default();
    let mut ma = master(&a, 1, &[1], t);
    let mut sb = slave(&b, 2, t);
    run(t, &mut ma, &a, &mut [(&mut sb, &mut b, ConnId(1))]);
    assert_eq!(b.data, a.data);
    assert_eq!(b.epochs, a.epochs);
    // A writes 100 more that B never gets, then fails.
    a.write(100, 1);
    // B becomes master at epoch 2 and writes other bytes.
    b.epochs.push(EpochEntry { epoch: 2, start_offset: 200 });
    b.write(150, 9);
    let mut mb = master(&b, 2, &[2], t);
    // A rejoins as a slave.
    let mut sa = slave(&a, 1, t);
    run(t, &mut mb, &b, &mut [(&mut sa, &mut a, ConnId(7))]);
    assert_eq!(a.truncations, [200], "cut at the end of the last shared epoch");
    assert_eq!(a.data, b.data, "byte-identical with the new master");
    assert_eq!(a.epochs, b.epochs, "both epochs carried across");
    assert_eq!(a.confirm, Some(350));
    assert_eq!(mb.confirm_offset(), 350);
    assert!(mb.sync_state_set().applied.contains(&1), "the rejoined broker is back in the set");

    // A third broker joins empty and gets the whole log with both epochs.
    let mut c = Node::default();
    let mut sc = slave(&c, 3, t);
    run(t, &mut mb, &b, &mut [(&mut sa, &mut a, ConnId(7)), (&mut sc, &mut c, ConnId(8))]);
    assert!(c.truncations.is_empty());
    assert_eq!(c.data, b.data);
    assert_eq!(c.epochs, b.epochs);
}

#[test]
fn slave_already_on_the_consistent_point_is_not_truncated() {
    let clock = Clock::new();
    let t = clock.at(0);
    let mut m = Node {
        epochs: vec![EpochEntry { epoch: 1, start_offset: 0 }, EpochEntry { epoch: 3, start_offset: 100 }],
        ..Default::default()
    };
    m.write(300, 4);
    let mut s = Node {
        data: m.data[..100].to_vec(),
        epochs: vec![EpochEntry { epoch: 1, start_offset: 0 }],
        ..Default::default()
    };
    let mut mm = master(&m, 1, &[1], t);
    let mut ss = slave(&s, 2, t);
    run(t, &mut mm, &m, &mut [(&mut ss, &mut s, ConnId(1))]);
    assert!(s.truncations.is_empty());
    assert_eq!(s.data, m.data);
    assert_eq!(s.epochs, m.epochs);
}

#[test]
fn old_master_whose_epoch_the_new_master_holds_empty_cuts_everything() {
    // A wrote 0..120 in epoch 1 and nobody got it; B, empty, becomes master at epoch 2 from 0.
    let clock = Clock::new();
    let t = clock.at(0);
    let mut a = Node { epochs: vec![EpochEntry { epoch: 1, start_offset: 0 }], ..Default::default() };
    a.write(120, 1);
    let mut epochs = EpochCache::from_entries([EpochEntry { epoch: 1, start_offset: 0 }]).unwrap();
    assert_eq!(
        epochs.append(2, 0),
        Ok(EpochAppended::PreviousEmpty { previous: EpochEntry { epoch: 1, start_offset: 0 } })
    );
    let mut b = Node { epochs: epochs.entries().collect(), ..Default::default() };
    b.write(80, 9);
    let mut mb = master(&b, 2, &[2], t);
    let mut sa = slave(&a, 1, t);
    run(t, &mut mb, &b, &mut [(&mut sa, &mut a, ConnId(1))]);
    assert_eq!(a.truncations, [0]);
    assert_eq!(a.data, b.data);
    assert_eq!(a.epochs, b.epochs);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any shared prefix, divergent tail and new-master writes: the old master truncates to
    /// the end of the shared epoch, ends identical, and holds the new master's epochs.
    #[test]
    fn failover_with_any_divergence_converges(shared in 0usize..400, lost in 0usize..300, new in 0usize..300) {
        let clock = Clock::new();
        let t = clock.at(0);
        let mut a = Node { epochs: vec![EpochEntry { epoch: 1, start_offset: 0 }], ..Default::default() };
        a.write(shared, 1);
        let mut b = Node { data: a.data.clone(), epochs: a.epochs.clone(), ..Default::default() };
        a.write(lost, 1);
        // changeToMaster: epoch 2 starts at B's end (epoch 1 stays, empty, if B holds nothing).
        let mut epochs = EpochCache::from_entries(b.epochs.iter().copied()).unwrap();
        epochs.append(2, shared as u64).unwrap();
        b.epochs = epochs.entries().collect();
        b.write(new, 9);
        let mut mb = master(&b, 2, &[2], t);
        let mut sa = slave(&a, 1, t);
        run(t, &mut mb, &b, &mut [(&mut sa, &mut a, ConnId(1))]);
        // With nothing shared, B's epoch 1 is empty but kept, so A still finds it and cuts
        // everything (Java drops the empty epoch and would keep A's bytes as if shared).
        let expected: Vec<u64> = if lost > 0 { vec![shared as u64] } else { vec![] };
        prop_assert_eq!(&a.truncations, &expected);
        prop_assert_eq!(&a.data, &b.data);
        if new > 0 {
            prop_assert_eq!(&a.epochs, &b.epochs);
        }
    }
}

/// One step of the fragmented-network run.
#[derive(Clone, Debug)]
enum Step {
    /// The master's log grows by this many bytes.
    Write(u16),
    /// Deliver up to this many bytes master → slave.
    ToSlave(u16),
    /// Deliver up to this many bytes slave → master.
    ToMaster(u8),
    /// Advance virtual time by this many ms.
    Tick(u16),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1u16..400).prop_map(Step::Write),
        (1u16..200).prop_map(Step::ToSlave),
        (1u8..40).prop_map(Step::ToMaster),
        (0u16..3000).prop_map(Step::Tick),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Master and slave over byte pipes cut anywhere, with writes, heartbeats and a divergent
    /// slave tail: the slave never confirms bytes it does not hold or the master has not
    /// confirmed, and once the pipes drain both logs and epochs are identical.
    #[test]
    fn fragmented_pipes_converge_and_confirm_stays_safe(
        diverged in 0usize..200,
        steps in proptest::collection::vec(step(), 0..120),
    ) {
        let clock = Clock::new();
        let mut now = clock.at(0);
        let mut m = Node { epochs: vec![EpochEntry { epoch: 1, start_offset: 0 }, EpochEntry { epoch: 2, start_offset: 100 }], ..Default::default() };
        m.write(150, 3);
        let mut s = Node { data: m.data[..100].to_vec(), epochs: vec![EpochEntry { epoch: 1, start_offset: 0 }], ..Default::default() };
        s.write(diverged, 77);
        let mut mm = master(&m, 1, &[1], now);
        let mut ss = slave(&s, 2, now);
        let conn = ConnId(1);
        let mut to_slave: Vec<u8> = Vec::new();
        let mut to_master: Vec<u8> = Vec::new();
        let mut master_confirm = 0u64;

        let pump = |mm: &mut AutoSwitchMaster, ss: &mut AutoSwitchSlave, m: &Node, s: &mut Node,
                    to_slave: &mut Vec<u8>, to_master: &mut Vec<u8>, master_confirm: &mut u64, now: Instant| {
            loop {
                match ss.poll_output() {
                    SlaveOutput::Timeout(_) => break,
                    SlaveOutput::Connect => {
                        ss.handle_input(now, SlaveInput::Connected).unwrap();
                        mm.handle_input(now, MasterInput::Accepted { conn }).unwrap();
                    }
                    SlaveOutput::Transmit(f) => to_master.extend(f.encode()),
                    SlaveOutput::Truncate { offset, epochs } => {
                        s.data.truncate(offset as usize);
                        s.epochs = epochs;
                        ss.handle_input(now, SlaveInput::Truncated { end: offset }).unwrap();
                    }
                    SlaveOutput::StoreEpochs(e) => s.epochs = e,
                    SlaveOutput::Append { offset, data } => {
                        assert_eq!(offset, s.data.len() as u64);
                        s.data.extend_from_slice(&data);
                        ss.handle_input(now, SlaveInput::Appended { end: s.data.len() as u64 }).unwrap();
                    }
                    SlaveOutput::ConfirmOffset(c) => {
                        assert!(c <= s.data.len() as u64, "slave confirms bytes it does not hold");
                        assert!(c <= *master_confirm, "slave confirms past the master's confirmOffset");
                        s.confirm = Some(c);
                    }
                    SlaveOutput::Close(r) => panic!("slave closed: {r:?}"),
                    SlaveOutput::Flush => ss.handle_input(now, SlaveInput::Flushed { end: s.data.len() as u64 }).unwrap(),
                    SlaveOutput::Event(_) => {}
                }
            }
            loop {
                match mm.poll_output() {
                    MasterOutput::Timeout(_) => break,
                    MasterOutput::Transmit { header, body, .. } => {
                        to_slave.extend_from_slice(&header);
                        if let Some(span) = body {
                            to_slave.extend_from_slice(&m.data[span.offset as usize..span.end() as usize]);
                        }
                        mm.handle_input(now, MasterInput::Sent { conn }).unwrap();
                    }
                    MasterOutput::ConfirmOffset(c) => *master_confirm = c,
                    MasterOutput::Event(MasterEvent::SyncStateSetChange { proposed }) => {
                        mm.handle_input(now, MasterInput::SyncStateSetApplied { set: proposed, epoch: 2 }).unwrap();
                    }
                    MasterOutput::Close { reason, .. } => panic!("master closed: {reason:?}"),
                    MasterOutput::Event(_) => {}
                }
            }
        };

        for st in steps {
            match st {
                Step::Write(n) => {
                    m.write(usize::from(n), 3);
                    mm.handle_input(now, MasterInput::Appended { end: m.data.len() as u64 }).unwrap();
                }
                Step::ToSlave(n) => {
                    let n = usize::from(n).min(to_slave.len());
                    let chunk: Vec<u8> = to_slave.drain(..n).collect();
                    if !chunk.is_empty() {
                        ss.handle_input(now, SlaveInput::Received(Bytes::from(chunk))).unwrap();
                    }
                }
                Step::ToMaster(n) => {
                    let n = usize::from(n).min(to_master.len());
                    let chunk: Vec<u8> = to_master.drain(..n).collect();
                    if !chunk.is_empty() {
                        mm.handle_input(now, MasterInput::Received { conn, data: Bytes::from(chunk) }).unwrap();
                    }
                }
                Step::Tick(ms) => {
                    // Time passes only over a working network: deliver everything first, so
                    // no peer goes silent for the housekeeping interval.
                    for _ in 0..1000 {
                        if to_slave.is_empty() && to_master.is_empty() {
                            break;
                        }
                        if !to_slave.is_empty() {
                            let chunk: Vec<u8> = std::mem::take(&mut to_slave);
                            ss.handle_input(now, SlaveInput::Received(Bytes::from(chunk))).unwrap();
                        }
                        if !to_master.is_empty() {
                            let chunk: Vec<u8> = std::mem::take(&mut to_master);
                            mm.handle_input(now, MasterInput::Received { conn, data: Bytes::from(chunk) }).unwrap();
                        }
                        pump(&mut mm, &mut ss, &m, &mut s, &mut to_slave, &mut to_master, &mut master_confirm, now);
                    }
                    now += std::time::Duration::from_millis(u64::from(ms) % 4000);
                    mm.handle_timeout(now);
                    ss.handle_timeout(now);
                }
            }
            pump(&mut mm, &mut ss, &m, &mut s, &mut to_slave, &mut to_master, &mut master_confirm, now);
        }
        // Drain the pipes completely.
        for _ in 0..10_000 {
            pump(&mut mm, &mut ss, &m, &mut s, &mut to_slave, &mut to_master, &mut master_confirm, now);
            if to_slave.is_empty() && to_master.is_empty() {
                break;
            }
            if !to_slave.is_empty() {
                let chunk: Vec<u8> = std::mem::take(&mut to_slave);
                ss.handle_input(now, SlaveInput::Received(Bytes::from(chunk))).unwrap();
            }
            if !to_master.is_empty() {
                let chunk: Vec<u8> = std::mem::take(&mut to_master);
                mm.handle_input(now, MasterInput::Received { conn, data: Bytes::from(chunk) }).unwrap();
            }
            pump(&mut mm, &mut ss, &m, &mut s, &mut to_slave, &mut to_master, &mut master_confirm, now);
        }
        prop_assert_eq!(&s.data, &m.data);
        prop_assert_eq!(&s.epochs, &m.epochs);
        prop_assert_eq!(master_confirm, m.data.len() as u64);
        prop_assert_eq!(s.confirm.unwrap_or(0) <= m.data.len() as u64, true);
    }
}
