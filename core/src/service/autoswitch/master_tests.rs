//! Tests of the AutoSwitch master service over a [`MemoryLog`], through the [`MasterTask`] an
//! adapter runs: the protocol choice, the epoch recorded at start, the handshake, streaming,
//! confirmOffset, SYNC waits, sync-state-set proposals, first-ack checks and admission.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;

use crate::autoswitch::frame::{HandshakeRequest, MasterFrame, MasterFrameDecoder, encode_report};
use crate::error::WaitError;
use crate::log::{EpochLog, LogBounds, LogRead, LogSpan, MessageLog, Offset, PutResult, PutStatus};
use crate::memlog::{MemoryLog, MemoryLogError};
use crate::service::*;
use crate::time::Instant;
use crate::{BrokerRole, ConnId, FlushSettings};
use crate::{
    EpochEntry,
    autoswitch::{BrokerId, SyncPolicy},
};

/// A reply channel that records what it got.
struct Got<T>(Arc<Mutex<Vec<T>>>);

impl<T> Reply<T> for Got<T> {
    fn send(self, value: T) {
        self.0.lock().unwrap().push(value);
    }
}

#[derive(Default)]
struct SinkState {
    transmits: Vec<Transmit>,
    closed: bool,
}

/// A connection sink that records its transmits and whether it was closed.
struct Rec(Arc<Mutex<SinkState>>);

impl ConnSink for Rec {
    fn transmit(&mut self, transmit: Transmit) {
        self.0.lock().unwrap().transmits.push(transmit);
    }
    fn close(&mut self) {
        self.0.lock().unwrap().closed = true;
    }
}

/// A [`MemoryLog`] that may hide its epochs and may say some offsets are no record boundary.
#[derive(Default)]
struct TestLog {
    inner: MemoryLog,
    no_epochs: bool,
    not_boundaries: Vec<Offset>,
    /// A segment size other than the memory log's.
    segment: Option<u64>,
}

impl LogRead for TestLog {
    type Error = MemoryLogError;
    fn bounds(&self) -> LogBounds {
        self.inner.bounds()
    }
    fn flushed(&self) -> Offset {
        self.inner.flushed()
    }
    fn read(&self, span: LogSpan) -> Result<Bytes, MemoryLogError> {
        self.inner.read(span)
    }
    fn is_record_boundary(&self, offset: Offset) -> Result<bool, MemoryLogError> {
        Ok(self.inner.is_record_boundary(offset)? && !self.not_boundaries.contains(&offset))
    }
    fn segment_size(&self) -> u64 {
        self.segment.unwrap_or_else(|| self.inner.segment_size())
    }
    fn epoch_log(&self) -> Option<&dyn EpochLog<Error = MemoryLogError>> {
        if self.no_epochs { None } else { self.inner.epoch_log() }
    }
}

impl MessageLog for TestLog {
    type Message = Vec<u8>;
    type Durable = <MemoryLog as MessageLog>::Durable;
    fn put(&self, message: Vec<u8>) -> PutResult {
        self.inner.put(message)
    }
    fn durable(&self, offset: Offset) -> Self::Durable {
        self.inner.durable(offset)
    }
    fn flush_settings(&self) -> FlushSettings {
        self.inner.flush_settings()
    }
}

type WaitReply = Got<Result<Offset, WaitError>>;
type Outcomes = Arc<Mutex<Vec<Result<Offset, WaitError>>>>;
type Command = TaskCommand<Rec, WaitReply, Got<MasterStatus>, Got<()>>;
type Task = MasterTask<TestLog, Rec, WaitReply, Got<MasterStatus>, Got<()>>;

const MASTER_ID: BrokerId = 1;

fn controller(epoch: i32, set: &[BrokerId]) -> MasterControllerConfig {
    MasterControllerConfig {
        broker_id: MASTER_ID,
        epoch,
        sync_state_set: set.iter().copied().collect(),
        ..MasterControllerConfig::default()
    }
}

fn config(controller: MasterControllerConfig) -> MasterServiceConfig {
    MasterServiceConfig {
        role: BrokerRole::SyncMaster,
        slave_timeout: Duration::from_secs(3),
        controller: Some(controller),
        ..MasterServiceConfig::default()
    }
}

fn addr(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

/// `config` with the replicas on 10.0.0.0/24 listed (admitted and identified).
fn on_network(config: MasterServiceConfig) -> MasterServiceConfig {
    MasterServiceConfig {
        admission: Admission::allow_list(parse_allow_list("10.0.0.0/24").unwrap()),
        ..config
    }
}

/// A master task and what its connections were handed.
struct Harness {
    task: Task,
    log: Arc<TestLog>,
    now: Instant,
    sinks: BTreeMap<ConnId, Arc<Mutex<SinkState>>>,
    decoders: BTreeMap<ConnId, MasterFrameDecoder>,
}

impl Harness {
    fn start(config: &MasterServiceConfig, log: TestLog) -> Result<Self, StartError> {
        let log = Arc::new(log);
        let now = Instant::ZERO;
        let task = Task::start(config, now, log.clone())?;
        Ok(Self { task, log, now, sinks: BTreeMap::new(), decoders: BTreeMap::new() })
    }

    fn apply(&mut self, command: Command) {
        self.task.apply_batch(self.now, command, || None);
        self.task.settle(self.now);
    }

    fn advance(&mut self, by: Duration) {
        self.now += by;
        self.task.timer(self.now);
        self.task.settle(self.now);
    }

    fn connect(&mut self, conn: u64, peer: &str) -> ConnId {
        let conn = ConnId(conn);
        let state = Arc::new(Mutex::new(SinkState::default()));
        self.sinks.insert(conn, state.clone());
        self.decoders.insert(conn, MasterFrameDecoder::new(u32::MAX >> 1));
        self.apply(Command::accepted(conn, addr(peer), Rec(state)));
        conn
    }

    fn send(&mut self, conn: ConnId, bytes: &[u8]) {
        self.apply(Command::received(conn, Bytes::copy_from_slice(bytes)));
    }

    fn handshake(&mut self, conn: ConnId, broker_id: BrokerId) {
        let request = HandshakeRequest { sync_from_last_file: false, async_learner: false, broker_id };
        self.send(conn, &request.encode());
    }

    fn closed(&self, conn: ConnId) -> bool {
        self.sinks[&conn].lock().unwrap().closed
    }

    /// Writes out every frame handed to `conn` (reading bodies from the log), reports each
    /// as sent, and returns the frames as a slave decodes them.
    fn deliver(&mut self, conn: ConnId) -> Vec<MasterFrame> {
        let mut frames = Vec::new();
        loop {
            let transmits = std::mem::take(&mut self.sinks[&conn].lock().unwrap().transmits);
            if transmits.is_empty() {
                return frames;
            }
            for t in transmits {
                let frame = t.resolve(&*self.log).expect("the span is in the log");
                let bytes: Vec<u8> = frame.unwritten().iter().flat_map(|s| s.to_vec()).collect();
                let decoder = self.decoders.get_mut(&conn).unwrap();
                decoder.extend(Bytes::from(bytes));
                while let Some(f) = decoder.decode().expect("the master's frames decode") {
                    frames.push(f);
                }
                self.apply(Command::sent(conn));
            }
        }
    }

    fn status(&mut self) -> MasterStatus {
        let got = Arc::new(Mutex::new(Vec::new()));
        self.apply(Command::status(Got(got.clone())));
        got.lock().unwrap().pop().unwrap()
    }

    fn autoswitch(&mut self) -> AutoSwitchMasterStatus {
        self.status().autoswitch.expect("a controller-mode master reports its AutoSwitch part")
    }

    /// A SYNC put through the gate and the task, as an adapter makes it; its wait's outcome.
    fn put(&mut self, config: &MasterServiceConfig, message: &[u8]) -> (PendingPut, Outcomes) {
        let pending = self.task.gate().start(config, &*self.log, message.to_vec()).unwrap();
        assert!(pending.replicate);
        let got = Arc::new(Mutex::new(Vec::new()));
        let command = TaskCommand::Driver(pending.wait_command(self.now, config, Got(got.clone())));
        self.apply(command);
        (pending, got)
    }
}

fn log_with(bytes: usize, epochs: &[(i32, Offset)]) -> TestLog {
    let log = TestLog::default();
    if bytes > 0 {
        assert_eq!(log.inner.put(vec![7; bytes]).status, crate::PutStatus::PutOk);
    }
    for &(epoch, start_offset) in epochs {
        log.inner.append_epoch(EpochEntry { epoch, start_offset }).unwrap();
    }
    log
}

fn entry(epoch: i32, start_offset: Offset) -> EpochEntry {
    EpochEntry { epoch, start_offset }
}

#[test]
fn controller_mode_over_a_log_without_epochs_is_refused_at_start() {
    let log = TestLog { no_epochs: true, ..TestLog::default() };
    let err = Harness::start(&config(controller(1, &[])), log).err().expect("refused");
    assert!(matches!(err, StartError::NoEpochLog), "{err}");
    // The same log serves the classic protocol.
    let classic = MasterServiceConfig { controller: None, ..config(controller(1, &[])) };
    let log = TestLog { no_epochs: true, ..TestLog::default() };
    let mut h = Harness::start(&classic, log).unwrap();
    assert_eq!(h.status().autoswitch, None);
}

#[test]
fn a_new_master_records_its_epoch_at_the_log_end_before_its_first_put() {
    let mut h = Harness::start(&config(controller(2, &[])), log_with(10, &[(1, 0)])).unwrap();
    assert!(h.status().autoswitch.is_some(), "the AutoSwitch driver");
    assert_eq!(h.log.inner.epochs(), vec![entry(1, 0), entry(2, 10)]);
    let put = h.task.gate().start(&config(controller(2, &[])), &*h.log, b"abc".to_vec()).unwrap();
    assert_eq!(put.end(), 13);
    let status = h.autoswitch();
    assert_eq!((status.epoch, status.epochs), (2, vec![entry(1, 0), entry(2, 10)]));
}

#[test]
fn an_epoch_below_the_logs_last_is_refused_and_the_log_is_left_alone() {
    let err = Harness::start(&config(controller(2, &[])), log_with(10, &[(3, 0)])).err().expect("refused");
    assert!(matches!(err, StartError::EpochBehind { epoch: 2, last: 3 }), "{err}");
}

#[test]
fn a_start_refused_for_the_logs_segment_size_records_no_epoch() {
    let log = Arc::new(TestLog { segment: Some(0), ..log_with(10, &[(1, 0)]) });
    let err = Task::start(&config(controller(2, &[])), Instant::ZERO, log.clone()).err().expect("refused");
    assert!(matches!(err, StartError::Config(_)), "{err}");
    assert_eq!(log.inner.epochs(), vec![entry(1, 0)], "the log is left as it was");
}

#[test]
fn a_master_restarted_in_its_epoch_keeps_the_epochs_start() {
    let h = Harness::start(&config(controller(3, &[])), log_with(10, &[(1, 0), (3, 4)])).unwrap();
    assert_eq!(h.log.inner.epochs(), vec![entry(1, 0), entry(3, 4)]);
}

#[test]
fn an_invalid_controller_config_is_refused_naming_the_field() {
    for (bad, field) in [
        (MasterControllerConfig { epoch: -1, ..controller(1, &[]) }, "controller.epoch"),
        (MasterControllerConfig { broker_id: -2, ..controller(1, &[]) }, "controller.broker_id"),
        (controller(1, &[2, -5]), "controller.sync_state_set"),
        (
            MasterControllerConfig { ha_max_time_slave_not_catchup: Duration::ZERO, ..controller(1, &[]) },
            "controller.ha_max_time_slave_not_catchup",
        ),
    ] {
        let err = config(bad).validate().unwrap_err();
        assert!(err.to_string().contains(field), "{err} should name {field}");
    }
    let fenced = MasterServiceConfig {
        restart_fence: 1,
        admission: Admission { allow: parse_allow_list("127.0.0.1").unwrap(), ..Admission::default() },
        ..config(controller(1, &[]))
    };
    assert!(fenced.validate().unwrap_err().to_string().contains("restart_fence"));
}

#[test]
fn the_handshake_reply_carries_the_logs_end_and_epochs() {
    let mut h = Harness::start(&config(controller(2, &[])), log_with(10, &[(1, 0)])).unwrap();
    let conn = h.connect(1, "127.0.0.1:5000");
    h.handshake(conn, 2);
    let frames = h.deliver(conn);
    let [MasterFrame::Handshake(reply)] = &frames[..] else { panic!("{frames:?}") };
    assert_eq!((reply.max_offset, reply.last_epoch), (10, 2));
    assert_eq!(reply.entries, vec![entry(1, 0), entry(2, 10)]);
}

#[test]
fn a_member_streams_and_its_acks_raise_the_logs_confirm_offset() {
    let cfg = config(controller(2, &[2]));
    let mut h = Harness::start(&cfg, log_with(10, &[(1, 0)])).unwrap();
    assert_eq!(h.log.inner.confirm_offset(), 0, "frozen while member 2 is away");
    let conn = h.connect(1, "127.0.0.1:5000");
    h.handshake(conn, 2);
    h.deliver(conn);
    h.send(conn, &encode_report(0));
    let frames = h.deliver(conn);
    let bodies: Vec<_> = frames
        .iter()
        .filter_map(|f| match f {
            MasterFrame::Transfer { header, body } if !body.is_empty() => {
                Some((header.offset, header.epoch, body.len()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(bodies, vec![(Some(0), 1, 10)], "epoch 1's bytes, labelled epoch 1");
    h.send(conn, &encode_report(10));
    assert_eq!(h.log.inner.confirm_offset(), 10);
    let status = h.autoswitch();
    assert_eq!(status.confirm_offset, 10);
    assert_eq!(status.slaves.len(), 1);
    assert_eq!((status.slaves[0].broker_id, status.slaves[0].counted), (Some(2), true));
    let classic = h.status();
    assert_eq!(
        (classic.slaves[0].ack, classic.slaves[0].start, classic.slaves[0].in_sync),
        (Some(10), Some(0), true)
    );
    assert_eq!(classic.slaves[0].bytes_sent, 10);
}

#[test]
fn a_sync_put_completes_when_the_set_acknowledges_it() {
    let sync = SyncPolicy { all_ack_in_sync_state_set: true, ..SyncPolicy::default() };
    let cfg = config(MasterControllerConfig { sync, ..controller(1, &[2]) });
    let mut h = Harness::start(&cfg, TestLog::default()).unwrap();
    let conn = h.connect(1, "127.0.0.1:5000");
    h.handshake(conn, 2);
    h.deliver(conn);
    h.send(conn, &encode_report(0));
    h.deliver(conn);
    let (pending, waits) = h.put(&cfg, b"hello");
    assert!(waits.lock().unwrap().is_empty(), "waits for member 2");
    h.task.appended(h.now);
    h.task.settle(h.now);
    h.deliver(conn);
    h.send(conn, &encode_report(5));
    let result = waits.lock().unwrap().pop().expect("answered");
    assert_eq!(pending.finish(None, Some(result)).status, PutStatus::PutOk);
}

#[test]
fn a_sync_put_the_set_does_not_acknowledge_in_time_is_flush_slave_timeout() {
    let sync = SyncPolicy { all_ack_in_sync_state_set: true, ..SyncPolicy::default() };
    let cfg = config(MasterControllerConfig { sync, ..controller(1, &[2]) });
    let mut h = Harness::start(&cfg, TestLog::default()).unwrap();
    let (pending, waits) = h.put(&cfg, b"hello");
    h.advance(cfg.slave_timeout);
    let result = waits.lock().unwrap().pop().expect("answered at the deadline");
    assert_eq!(result, Err(WaitError::Timeout));
    assert_eq!(pending.finish(None, Some(result)).status, PutStatus::FlushSlaveTimeout);
}

#[test]
fn a_set_smaller_than_min_in_sync_replicas_refuses_a_sync_put_at_once() {
    let sync = SyncPolicy { min_in_sync_replicas: 2, ..SyncPolicy::default() };
    let cfg = config(MasterControllerConfig { sync, ..controller(1, &[]) });
    let mut h = Harness::start(&cfg, TestLog::default()).unwrap();
    let (pending, waits) = h.put(&cfg, b"hello");
    let result = waits.lock().unwrap().pop().expect("answered at once");
    assert_eq!(result, Err(WaitError::InSyncReplicasNotEnough));
    let done = pending.finish(None, Some(result));
    assert_eq!(done.status.rocketmq_name(), "IN_SYNC_REPLICAS_NOT_ENOUGH");
    assert!(done.status.is_stored(), "stored, as Java stores it");
}

#[test]
fn a_caught_up_slave_is_added_to_the_set_at_once_by_the_local_authority() {
    let cfg = config(controller(1, &[]));
    let mut h = Harness::start(&cfg, log_with(8, &[])).unwrap();
    let before = h.autoswitch();
    assert_eq!(before.sync_state_set, BTreeSet::from([MASTER_ID]));
    let conn = h.connect(1, "127.0.0.1:5000");
    h.handshake(conn, 3);
    h.deliver(conn);
    h.send(conn, &encode_report(0));
    h.deliver(conn);
    h.send(conn, &encode_report(8));
    let after = h.autoswitch();
    assert_eq!(after.sync_state_set, BTreeSet::from([MASTER_ID, 3]));
    assert_eq!(after.sync_state_set_epoch, before.sync_state_set_epoch + 1);
    assert_eq!(after.proposed_sync_state_set, None, "applied, nothing pending");
}

#[test]
fn a_member_gone_too_long_is_removed_from_the_set_and_confirm_offset_moves_on() {
    let cfg = config(controller(1, &[2]));
    let mut h = Harness::start(&cfg, log_with(8, &[])).unwrap();
    assert_eq!(h.autoswitch().confirm_offset, 0, "member 2 never acked");
    h.advance(MasterControllerConfig::default().ha_max_time_slave_not_catchup);
    let status = h.autoswitch();
    assert_eq!(status.sync_state_set, BTreeSet::from([MASTER_ID]));
    assert_eq!((status.confirm_offset, h.log.inner.confirm_offset()), (8, 8));
}

#[test]
fn a_set_command_applies_a_sync_state_set_from_outside() {
    let mut h = Harness::start(&config(controller(1, &[])), log_with(8, &[])).unwrap();
    h.apply(TaskCommand::SetSyncStateSet { set: BTreeSet::from([1, 4]), epoch: 9 });
    let status = h.autoswitch();
    assert_eq!((status.sync_state_set, status.sync_state_set_epoch), (BTreeSet::from([1, 4]), 9));
    assert_eq!(status.confirm_offset, 8, "member 4 is away: confirmOffset stays where it was");
}

impl Harness {
    /// Sets a sync-state-set as the operator's call does; the AutoSwitch status right after.
    fn set_and_report(&mut self, set: &[BrokerId], epoch: i32) -> AutoSwitchMasterStatus {
        let got = Arc::new(Mutex::new(Vec::new()));
        let set = set.iter().copied().collect();
        self.apply(TaskCommand::SetSyncStateSetAndReport { set, epoch, reply: Got(got.clone()) });
        let status = got.lock().unwrap().pop().expect("answered");
        status.autoswitch.expect("controller mode")
    }
}

#[test]
fn a_stale_or_reused_sync_state_set_epoch_is_refused_and_changes_nothing() {
    let mut h = Harness::start(&config(controller(1, &[])), log_with(8, &[])).unwrap();
    let applied = h.set_and_report(&[1, 2], 3);
    assert_eq!((applied.sync_state_set, applied.sync_state_set_epoch), (BTreeSet::from([1, 2]), 3));
    let unchanged = |s: AutoSwitchMasterStatus| (s.sync_state_set, s.sync_state_set_epoch);
    let want = (BTreeSet::from([1, 2]), 3);
    assert_eq!(unchanged(h.set_and_report(&[1], 2)), want, "a stale epoch changes nothing");
    assert_eq!(unchanged(h.set_and_report(&[1, 4], 3)), want, "epoch 3 names {{1, 2}} already");
    assert_eq!(unchanged(h.set_and_report(&[1, 2], 3)), want, "the set in force again: accepted");
    assert_eq!(unchanged(h.set_and_report(&[2], 4)), want, "a set without the master is refused");
    let after = h.set_and_report(&[1], 4);
    assert_eq!((after.sync_state_set, after.sync_state_set_epoch), (BTreeSet::from([1]), 4));
    assert_eq!(after.confirm_offset, 8, "the master alone confirms its whole log");
}

#[test]
fn the_driver_names_why_a_sync_state_set_is_refused() {
    let log = Arc::new(log_with(8, &[]));
    let cfg = config(controller(1, &[2]));
    let mut d: AutoSwitchDriver<TestLog, Rec, WaitReply> =
        AutoSwitchDriver::for_service(&cfg, Instant::ZERO, log).unwrap();
    let set = |ids: &[BrokerId]| ids.iter().copied().collect::<BTreeSet<_>>();
    let now = Instant::ZERO;
    assert_eq!(
        d.set_sync_state_set(now, set(&[2, 3]), 5),
        Err(SyncStateSetError::MasterNotMember { master: 1, set: set(&[2, 3]) })
    );
    assert_eq!(
        d.set_sync_state_set(now, set(&[1, -3]), 5),
        Err(SyncStateSetError::NegativeBrokerId { id: -3 })
    );
    assert_eq!(d.set_sync_state_set(now, set(&[1]), -1), Err(SyncStateSetError::NegativeEpoch { epoch: -1 }));
    assert_eq!(
        d.set_sync_state_set(now, set(&[1]), 0),
        Err(SyncStateSetError::StaleEpoch { epoch: 0, current: 1 })
    );
    assert_eq!(
        d.set_sync_state_set(now, set(&[1]), 1),
        Err(SyncStateSetError::EpochInUse { epoch: 1, current: set(&[1, 2]) })
    );
    assert_eq!(d.set_sync_state_set(now, set(&[1, 2]), 1), Ok(()));
    assert_eq!(d.set_sync_state_set(now, set(&[1]), 2), Ok(()));
    assert_eq!(d.master().sync_state_set().applied, set(&[1]));
}

#[test]
fn a_first_ack_off_a_record_boundary_closes_the_slave() {
    let log = TestLog { not_boundaries: vec![5], ..log_with(10, &[]) };
    let mut h = Harness::start(&config(controller(1, &[])), log).unwrap();
    let conn = h.connect(1, "127.0.0.1:5000");
    h.handshake(conn, 2);
    h.deliver(conn);
    h.send(conn, &encode_report(5));
    assert!(h.closed(conn));
    let status = h.status();
    assert_eq!((status.peer_errors, status.refusals.diverged), (1, 1));
    assert!(h.deliver(conn).is_empty(), "nothing streamed");
}

#[test]
fn a_first_ack_on_a_record_boundary_streams_from_it() {
    let log = TestLog { not_boundaries: vec![5], ..log_with(10, &[]) };
    let mut h = Harness::start(&config(controller(1, &[])), log).unwrap();
    let conn = h.connect(1, "127.0.0.1:5000");
    h.handshake(conn, 2);
    h.deliver(conn);
    h.send(conn, &encode_report(4));
    let offsets: Vec<_> = h
        .deliver(conn)
        .into_iter()
        .filter_map(|f| match f {
            MasterFrame::Transfer { header, body } if !body.is_empty() => header.offset,
            _ => None,
        })
        .collect();
    assert_eq!(offsets, vec![4]);
    assert!(!h.closed(conn));
}

#[test]
fn a_connection_outside_the_allow_list_is_closed_unread() {
    let cfg = MasterServiceConfig {
        admission: Admission { allow: parse_allow_list("10.0.0.0/8").unwrap(), ..Admission::default() },
        ..config(controller(1, &[]))
    };
    let mut h = Harness::start(&cfg, log_with(10, &[])).unwrap();
    let stranger = h.connect(1, "192.168.1.1:5000");
    assert!(h.closed(stranger));
    h.handshake(stranger, 2);
    assert!(h.deliver(stranger).is_empty(), "nothing sent to a refused connection");
    let replica = h.connect(2, "10.1.2.3:5000");
    h.handshake(replica, 2);
    assert_eq!(h.deliver(replica).len(), 1);
    let status = h.status();
    assert_eq!(status.refusals.not_admitted, 1);
    assert_eq!(status.slaves.iter().map(|s| (s.conn, s.trusted)).collect::<Vec<_>>(), vec![(replica, true)]);
    h.apply(Command::closed(stranger));
    h.apply(Command::closed(replica));
    assert!(h.status().slaves.is_empty());
}

#[test]
fn a_second_connection_claiming_a_connected_broker_id_is_closed() {
    let mut h = Harness::start(&config(controller(1, &[])), log_with(10, &[])).unwrap();
    let first = h.connect(1, "127.0.0.1:5000");
    h.handshake(first, 2);
    let second = h.connect(2, "127.0.0.1:5001");
    h.handshake(second, 2);
    assert!(!h.closed(first) && h.closed(second));
    let own = h.connect(3, "127.0.0.1:5002");
    h.handshake(own, MASTER_ID);
    assert!(h.closed(own), "a slave claiming the master's own id");
}

#[test]
fn a_classic_master_ignores_a_sync_state_set() {
    let classic = MasterServiceConfig { controller: None, ..config(controller(1, &[])) };
    let mut h = Harness::start(&classic, TestLog::default()).unwrap();
    h.apply(TaskCommand::SetSyncStateSet { set: BTreeSet::from([1, 2]), epoch: 2 });
    assert_eq!(h.status().autoswitch, None);
}

#[test]
fn shutdown_closes_every_connection_and_cancels_waits() {
    let sync = SyncPolicy { all_ack_in_sync_state_set: true, ..SyncPolicy::default() };
    let cfg = config(MasterControllerConfig { sync, ..controller(1, &[2]) });
    let mut h = Harness::start(&cfg, TestLog::default()).unwrap();
    let conn = h.connect(1, "127.0.0.1:5000");
    let (_pending, waits) = h.put(&cfg, b"m");
    let done = Arc::new(Mutex::new(Vec::new()));
    h.task.apply_batch(h.now, Command::Shutdown(Got(done.clone())), || None);
    assert!(h.task.settle(h.now).is_some(), "a wait is pending");
    h.advance(cfg.slave_timeout);
    assert_eq!(waits.lock().unwrap().as_slice(), &[Err(WaitError::Timeout)]);
    assert_eq!(h.task.settle(h.now), None);
    let Harness { task, sinks, .. } = h;
    task.finish(true);
    assert!(sinks[&conn].lock().unwrap().closed);
    assert_eq!(done.lock().unwrap().len(), 1);
}

#[test]
fn a_restarted_slave_whose_old_connection_is_silent_gets_back_in_on_its_next_attempt() {
    let cfg = on_network(config(controller(1, &[])));
    let heartbeat = cfg.core.heartbeat_interval;
    let mut h = Harness::start(&cfg, log_with(10, &[])).unwrap();
    let old = h.connect(1, "10.0.0.2:5000");
    h.handshake(old, 2);
    h.deliver(old);
    h.send(old, &encode_report(10));
    // The slave's machine restarts: its old connection says nothing more.
    h.advance(heartbeat * 2);
    assert!(!h.closed(old), "still within the housekeeping interval");
    let first_try = h.connect(2, "10.0.0.2:5001");
    h.handshake(first_try, 2);
    assert!(h.closed(first_try), "the id is still taken");
    assert!(h.closed(old), "the silent holder of the id is evicted");
    h.apply(Command::closed(old));
    h.apply(Command::closed(first_try));
    let second_try = h.connect(3, "10.0.0.2:5002");
    h.handshake(second_try, 2);
    assert!(!h.closed(second_try));
    assert!(matches!(h.deliver(second_try)[..], [MasterFrame::Handshake(_)]));
}

#[test]
fn a_live_slave_keeps_its_id_against_a_second_claimant() {
    let cfg = on_network(config(controller(1, &[])));
    let heartbeat = cfg.core.heartbeat_interval;
    let mut h = Harness::start(&cfg, log_with(10, &[])).unwrap();
    let live = h.connect(1, "10.0.0.2:5000");
    h.handshake(live, 2);
    h.deliver(live);
    h.send(live, &encode_report(10));
    h.advance(heartbeat);
    h.send(live, &encode_report(10));
    h.advance(heartbeat);
    let claimant = h.connect(2, "10.0.0.3:5000");
    h.handshake(claimant, 2);
    assert!(h.closed(claimant));
    assert!(!h.closed(live), "a slave that acked within two heartbeats keeps its connection");
}

#[test]
fn another_host_claiming_a_silent_slaves_id_evicts_nothing() {
    let cfg = on_network(config(controller(1, &[])));
    let heartbeat = cfg.core.heartbeat_interval;
    let mut h = Harness::start(&cfg, log_with(10, &[])).unwrap();
    let old = h.connect(1, "10.0.0.2:5000");
    h.handshake(old, 2);
    h.deliver(old);
    h.send(old, &encode_report(10));
    h.advance(heartbeat * 2);
    let stranger = h.connect(2, "10.0.0.9:5000");
    h.handshake(stranger, 2);
    assert!(h.closed(stranger));
    assert!(!h.closed(old), "only the same replica replaces a silent connection");
}

// ---- Issue 22: a connection's claimed broker id counts only once its identity backs it ----

/// A master in epoch 1 with member 2 in the sync-state-set but away, whose puts need two
/// copies (`minInSyncReplicas=2`, every member acks).
fn two_copies(admission: Admission, members: Option<MemberDirectory>) -> MasterServiceConfig {
    let sync = SyncPolicy { all_ack_in_sync_state_set: true, in_sync_replicas: 2, min_in_sync_replicas: 2 };
    MasterServiceConfig {
        admission,
        ..config(MasterControllerConfig { sync, members, ..controller(1, &[2]) })
    }
}

/// `conn` handshakes as broker `id`, is sent the log and acks all `end` bytes of it.
fn stream_as(h: &mut Harness, conn: ConnId, id: BrokerId, end: Offset) {
    h.handshake(conn, id);
    h.deliver(conn);
    h.send(conn, &encode_report(0));
    h.deliver(conn);
    h.send(conn, &encode_report(end));
}

#[test]
fn in_protected_mode_a_stranger_claiming_an_away_members_id_is_closed_and_counts_for_nothing() {
    let cfg = two_copies(Admission::default(), None);
    let mut h = Harness::start(&cfg, log_with(10, &[])).unwrap();
    let stranger = h.connect(1, "203.0.113.9:5000");
    stream_as(&mut h, stranger, 2, 10);
    assert!(h.closed(stranger), "closed at accept, unread");
    let status = h.status();
    assert_eq!(status.refusals.not_admitted, 1);
    let auto = status.autoswitch.unwrap();
    assert_eq!(auto.sync_state_set, BTreeSet::from([1, 2]));
    assert_eq!(auto.confirm_offset, 0, "no stranger's ack moves the confirmOffset");
    assert_eq!(h.log.inner.confirm_offset(), 0);
}

#[test]
fn a_claim_the_member_directory_contradicts_is_refused_and_a_stranger_counts_only_once_published() {
    // Member 2 published 10.0.0.2; member 3 has published nothing yet.
    let published = Arc::new(std::sync::Mutex::new(BTreeMap::from([(2, addr("10.0.0.2:10912").ip())])));
    let directory = {
        let published = published.clone();
        MemberDirectory::new(move |id| published.lock().unwrap().get(&id).copied().map(MemberAddress::Ip))
    };
    let sync = SyncPolicy { all_ack_in_sync_state_set: true, in_sync_replicas: 2, min_in_sync_replicas: 1 };
    let cfg = config(MasterControllerConfig { sync, members: Some(directory), ..controller(1, &[]) });
    let mut h = Harness::start(&cfg, log_with(10, &[])).unwrap();
    // Another host claims broker 2: refused, counted.
    let impostor = h.connect(1, "10.0.0.9:5000");
    h.handshake(impostor, 2);
    assert!(h.closed(impostor), "its claim contradicts the address member 2 published");
    let status = h.status();
    assert_eq!(status.refusals.identity_refused, 1);
    assert!(status.refusals.last.clone().unwrap().contains("10.0.0.2"), "{:?}", status.refusals.last);
    // Broker 2 from its published address is identified and joins the set.
    let real = h.connect(2, "10.0.0.2:5000");
    stream_as(&mut h, real, 2, 10);
    assert!(!h.closed(real));
    let auto = h.autoswitch();
    assert_eq!(auto.sync_state_set, BTreeSet::from([1, 2]));
    assert_eq!(auto.confirm_offset, 10);
    assert!(h.status().slaves.iter().any(|s| s.conn == real && s.trusted && s.counted));
    // A stranger claiming broker 3, which published nothing: it streams, but counts for nothing.
    let early = h.connect(3, "10.0.0.3:5000");
    stream_as(&mut h, early, 3, 10);
    assert!(!h.closed(early));
    assert_eq!(h.autoswitch().sync_state_set, BTreeSet::from([1, 2]));
    assert!(h.status().slaves.iter().any(|s| s.conn == early && !s.trusted && !s.counted));
    // Member 3 publishes that address: the connection is identified on its next beat.
    published.lock().unwrap().insert(3, addr("10.0.0.3:10912").ip());
    h.advance(cfg.core.heartbeat_interval);
    h.send(early, &encode_report(10));
    assert_eq!(h.autoswitch().sync_state_set, BTreeSet::from([1, 2, 3]));
}

#[test]
fn an_identified_host_claiming_another_members_bound_id_is_refused() {
    let directory = MemberDirectory::new(|id| (id == 2).then(|| MemberAddress::Ip(addr("10.0.0.2:1").ip())));
    let admission = Admission::allow_list(parse_allow_list("10.0.0.0/24").unwrap());
    let cfg = two_copies(admission, Some(directory));
    let mut h = Harness::start(&cfg, log_with(10, &[])).unwrap();
    let listed = h.connect(1, "10.0.0.3:5000");
    stream_as(&mut h, listed, 2, 10);
    assert!(h.closed(listed));
    assert_eq!(h.status().refusals.identity_refused, 1);
    assert_eq!(h.autoswitch().confirm_offset, 0);
    // A put still needs its second copy.
    let (_pending, waits) = h.put(&cfg, b"m");
    h.advance(cfg.slave_timeout);
    assert_eq!(waits.lock().unwrap().as_slice(), &[Err(WaitError::Timeout)]);
}

#[test]
fn a_stranger_holding_a_members_id_first_does_not_lock_the_member_out() {
    let directory = MemberDirectory::new(|id| (id == 2).then(|| MemberAddress::Ip(addr("10.0.0.2:1").ip())));
    let admission = Admission { tls: None, ..Admission::default() };
    let cfg = two_copies(admission, Some(directory));
    let mut h = Harness::start(&cfg, log_with(10, &[])).unwrap();
    // A stranger whose address no member published claims the unbound id 5 and streams...
    let squatter = h.connect(1, "10.0.0.9:5000");
    stream_as(&mut h, squatter, 5, 10);
    assert!(!h.closed(squatter));
    // ...and a loopback process (identified in protected mode) claiming id 5 replaces it.
    let member = h.connect(2, "127.0.0.1:5000");
    stream_as(&mut h, member, 5, 10);
    assert!(!h.closed(member) && h.closed(squatter), "the unidentified holder of the id is closed");
}
