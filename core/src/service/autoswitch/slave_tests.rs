//! The AutoSwitch slave driver and task over a log in memory, against scripted master bytes.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bytes::Bytes;

use crate::autoswitch::frame::{
    HandshakeReply, HandshakeRequest, MasterFrame, TransferHeader, encode_report,
};
use crate::log::{EpochLog, LogBounds, LogRead, LogSpan, LogWrite, Offset};
use crate::memlog::{MemoryLog, MemoryLogError};
use crate::service::tests::origin;
use crate::service::{
    AutoSwitchSlaveDriver, SlaveAction, SlaveControllerConfig, SlaveDriver, SlaveIo, SlaveServiceConfig,
    SlaveTask, StartError,
};
use crate::time::Instant;
use crate::{EpochEntry, autoswitch::SlaveState as Phase};

fn e(epoch: i32, start_offset: Offset) -> EpochEntry {
    EpochEntry { epoch, start_offset }
}

/// A [`MemoryLog`] whose truncations can be made to fail, or that keeps no epochs at all.
#[derive(Default)]
struct TestLog {
    inner: MemoryLog,
    no_epochs: bool,
    fail_truncate: AtomicBool,
}

impl TestLog {
    /// A log holding `len` bytes from offset 0, with these epochs.
    fn with(len: u64, epochs: &[EpochEntry]) -> Self {
        let log = Self::default();
        if len > 0 {
            log.inner.append_at(0, &vec![7u8; len as usize]).unwrap();
        }
        for &entry in epochs {
            log.inner.append_epoch(entry).unwrap();
        }
        log
    }
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
        self.inner.is_record_boundary(offset)
    }
    fn segment_size(&self) -> u64 {
        self.inner.segment_size()
    }
    fn epoch_log(&self) -> Option<&dyn EpochLog<Error = MemoryLogError>> {
        if self.no_epochs { None } else { Some(self) }
    }
}

impl EpochLog for TestLog {
    type Error = MemoryLogError;
    fn epochs(&self) -> Vec<EpochEntry> {
        self.inner.epochs()
    }
    fn append_epoch(&self, entry: EpochEntry) -> Result<(), MemoryLogError> {
        self.inner.append_epoch(entry)
    }
    fn truncate_to(&self, offset: Offset) -> Result<(), MemoryLogError> {
        if self.fail_truncate.load(Ordering::Relaxed) {
            let bounds = self.inner.bounds();
            return Err(MemoryLogError::TruncateOutOfRange { offset, bounds });
        }
        self.inner.truncate_to(offset)
    }
    fn set_confirm_offset(&self, offset: Offset) -> Offset {
        self.inner.set_confirm_offset(offset)
    }
    fn confirm_offset(&self) -> Offset {
        self.inner.confirm_offset()
    }
    fn confirmed_offset(&self) -> Offset {
        self.inner.confirmed_offset()
    }
}

impl LogWrite for TestLog {
    fn append_at(&self, offset: Offset, data: &[u8]) -> Result<Offset, MemoryLogError> {
        self.inner.append_at(offset, data)
    }
    fn flush(&self) -> Result<Offset, MemoryLogError> {
        self.inner.flush()
    }
}

fn controller() -> SlaveControllerConfig {
    SlaveControllerConfig { broker_id: 2, master_broker_id: 1, master_epoch: 2, ..Default::default() }
}

fn config() -> SlaveServiceConfig {
    config_in(2)
}

/// Following a master elected in `epoch`.
fn config_in(epoch: i32) -> SlaveServiceConfig {
    let controller = SlaveControllerConfig { master_epoch: epoch, ..controller() };
    SlaveServiceConfig { controller: Some(controller), ..SlaveServiceConfig::new("127.0.0.1:1") }
}

fn reply(max_offset: Offset, entries: &[EpochEntry]) -> Bytes {
    let last_epoch = entries.last().map_or(-1, |e| e.epoch);
    Bytes::from(HandshakeReply { max_offset, last_epoch, entries: entries.to_vec() }.encode())
}

fn transfer(offset: Offset, epoch: i32, epoch_start: Offset, confirm: Offset, body: &[u8]) -> Bytes {
    let header = TransferHeader {
        body_len: body.len() as u32,
        offset: Some(offset),
        epoch,
        epoch_start,
        confirm_offset: Some(confirm),
    };
    Bytes::from(MasterFrame::Transfer { header, body: Bytes::copy_from_slice(body) }.encode())
}

/// The actions up to the next sleep.
fn actions(d: &mut AutoSwitchSlaveDriver<TestLog>, now: Instant) -> Vec<SlaveAction> {
    let mut out = Vec::new();
    loop {
        match d.next_action(now) {
            SlaveAction::SleepUntil(_) => return out,
            a => out.push(a),
        }
    }
}

fn sends(out: &[SlaveAction]) -> Vec<Bytes> {
    out.iter().filter_map(|a| if let SlaveAction::Send(b) = a { Some(b.clone()) } else { None }).collect()
}

fn ack(offset: Offset) -> Bytes {
    Bytes::copy_from_slice(&encode_report(offset))
}

/// A driver over `log`, following a master elected in epoch 2, connected, its handshake sent.
fn connected(log: &Arc<TestLog>) -> AutoSwitchSlaveDriver<TestLog> {
    connected_with(log, &config())
}

/// A driver over `log` with `config`, connected, its handshake sent.
fn connected_with(log: &Arc<TestLog>, config: &SlaveServiceConfig) -> AutoSwitchSlaveDriver<TestLog> {
    let mut d = AutoSwitchSlaveDriver::new(config, origin(), log.clone()).unwrap();
    assert_eq!(actions(&mut d, origin()), [SlaveAction::Connect]);
    d.connected(origin());
    let handshake = HandshakeRequest { sync_from_last_file: false, async_learner: false, broker_id: 2 };
    assert_eq!(actions(&mut d, origin()), [SlaveAction::Send(Bytes::copy_from_slice(&handshake.encode()))]);
    d
}

#[test]
fn controller_mode_over_a_log_without_epochs_is_refused_at_start() {
    let log = Arc::new(TestLog { no_epochs: true, ..TestLog::default() });
    let err = SlaveTask::<_, u8>::start(config(), origin(), log).err().expect("refused");
    assert!(matches!(err, StartError::NoEpochLog), "{err}");
}

#[test]
fn the_classic_driver_refuses_a_controller_configuration() {
    let err = SlaveDriver::new(&config(), origin(), Arc::new(MemoryLog::new())).err().expect("refused");
    assert!(err.to_string().contains("controller"), "{err}");
}

#[test]
fn a_controller_configuration_that_follows_itself_is_refused() {
    let mut c = config();
    c.controller.as_mut().unwrap().master_broker_id = 2;
    let err = SlaveTask::<_, u8>::start(c, origin(), Arc::new(MemoryLog::new())).err().expect("refused");
    assert!(err.to_string().contains("master_broker_id"), "{err}");
}

#[test]
fn a_slave_task_in_controller_mode_writes_the_handshake_in_one_send() {
    let mut task = SlaveTask::<_, u8>::start(config(), origin(), Arc::new(MemoryLog::new())).unwrap();
    assert!(task.driver().status(origin()).autoswitch.is_some(), "the AutoSwitch driver");
    assert_eq!(task.next_action(origin()), SlaveIo::Connect);
    task.connect_done(origin(), Ok(5));
    let handshake = HandshakeRequest { sync_from_last_file: false, async_learner: false, broker_id: 2 };
    match task.next_action(origin()) {
        SlaveIo::Send(bytes, stream) => {
            assert_eq!(bytes[..], handshake.encode(), "all 16 bytes in one write");
            assert_eq!(*stream, 5);
        }
        other => panic!("expected the handshake, got {other:?}"),
    }
    let status = task.driver().status(origin());
    let auto = status.autoswitch.expect("controller mode reports its AutoSwitch view");
    assert_eq!((auto.broker_id, auto.master_broker_id, auto.master_epoch), (2, 1, 2));
    assert_eq!(auto.phase, Phase::Handshake);
}

#[test]
fn a_classic_slave_task_has_no_autoswitch_status() {
    let task = SlaveTask::<_, u8>::start(
        SlaveServiceConfig::new("127.0.0.1:1"),
        origin(),
        Arc::new(MemoryLog::new()),
    )
    .unwrap();
    assert_eq!(task.driver().status(origin()).autoswitch, None);
}

#[test]
fn a_divergent_tail_is_truncated_through_the_log_before_anything_streams() {
    // Epoch 1 wrote [0, 100), epoch 2 (a master the new one never followed) [100, 150).
    let log = Arc::new(TestLog::with(150, &[e(1, 0), e(2, 100)]));
    log.set_confirm_offset(150);
    // All of [100, 150) was confirmed: the operator allowed dropping exactly those bytes.
    let mut config = config_in(3);
    config.controller.as_mut().unwrap().drop_confirmed = Some(100..150);
    let mut d = connected_with(&log, &config);
    let now = origin() + Duration::from_millis(1);
    // The new master at epoch 3 holds epoch 1 up to 100, then its own.
    d.received(now, reply(200, &[e(1, 0), e(3, 100)]));
    let out = actions(&mut d, now);
    assert_eq!(log.bounds().max, 100, "the tail of epoch 2 is cut");
    assert_eq!(log.epochs(), [e(1, 0)]);
    assert_eq!(log.confirm_offset(), 100, "a confirmOffset above the cut is lowered");
    assert_eq!(sends(&out), [ack(100)], "the first ack, after the truncation, is the cut");
    // The stream continues at the cut, in epoch 3; the epoch is recorded before its bytes.
    d.received(now, transfer(100, 3, 100, 130, &[9; 50]));
    let out = actions(&mut d, now);
    assert_eq!(log.epochs(), [e(1, 0), e(3, 100)]);
    assert_eq!(log.bounds().max, 150);
    assert_eq!(log.confirm_offset(), 130, "the master's confirmOffset is set on the log");
    assert_eq!(sends(&out), [ack(150)]);
    let status = d.status(now);
    let auto = status.autoswitch.unwrap();
    assert_eq!((auto.truncations, auto.truncated_bytes), (1, 50));
    assert_eq!(
        (auto.confirm_offset, auto.consistent_point, auto.master_last_epoch),
        (130, Some(100), Some(3))
    );
    assert_eq!(auto.epochs, [e(1, 0), e(3, 100)]);
    assert_eq!(auto.phase, Phase::Transfer);
    assert_eq!((status.ack_offset, status.max_offset, status.append_error), (Some(150), 150, None));
}

#[test]
fn a_failed_truncation_streams_nothing_and_is_retried_on_the_next_connection() {
    let log = Arc::new(TestLog::with(150, &[e(1, 0), e(2, 100)]));
    log.fail_truncate.store(true, Ordering::Relaxed);
    let mut d = connected_with(&log, &config_in(3));
    d.received(origin(), reply(200, &[e(1, 0), e(3, 100)]));
    let out = actions(&mut d, origin());
    assert_eq!(out, [SlaveAction::Disconnect], "no ack: the log still holds the divergent tail");
    assert_eq!((log.bounds().max, log.epochs()), (150, vec![e(1, 0), e(2, 100)]));
    let status = d.status(origin());
    assert!(status.append_error.as_deref().is_some_and(|e| e.contains("truncation to 100")), "{status:?}");
    assert_eq!(status.append_failures, 1);
    // After the back-off the slave connects again, and truncates once the log lets it.
    log.fail_truncate.store(false, Ordering::Relaxed);
    let later = origin() + Duration::from_secs(10);
    d.handle_timeout(later);
    assert_eq!(actions(&mut d, later), [SlaveAction::Connect]);
    d.connected(later);
    assert_eq!(sends(&actions(&mut d, later)).len(), 1, "the handshake");
    d.received(later, reply(200, &[e(1, 0), e(3, 100)]));
    assert_eq!(sends(&actions(&mut d, later)), [ack(100)]);
    assert_eq!(log.bounds().max, 100);
}

#[test]
fn an_epoch_starting_past_the_end_is_recorded_after_the_append_that_reaches_it() {
    // A Java master tags the last chunk of epoch 1 with epoch 2 (which starts at its end): the
    // log refuses an epoch beyond its end, so it is recorded once the chunk is stored.
    let log = Arc::new(TestLog::with(100, &[e(1, 0)]));
    let mut d = connected(&log);
    d.received(origin(), reply(150, &[e(1, 0), e(2, 150)]));
    assert_eq!(sends(&actions(&mut d, origin())), [ack(100)]);
    d.received(origin(), transfer(100, 2, 150, 100, &[3; 50]));
    let out = actions(&mut d, origin());
    assert_eq!(sends(&out), [ack(150)], "{out:?}");
    assert_eq!(log.bounds().max, 150);
    assert_eq!(log.epochs(), [e(1, 0), e(2, 150)]);
    assert_eq!(d.status(origin()).append_error, None);
}

#[test]
fn an_empty_slave_learns_its_epochs_and_follows_the_confirm_offset() {
    let log = Arc::new(TestLog::default());
    let mut d = connected(&log);
    d.received(origin(), reply(80, &[e(1, 0), e(2, 40)]));
    assert_eq!(sends(&actions(&mut d, origin())), [ack(0)]);
    d.received(origin(), transfer(0, 1, 0, 0, &[1; 40]));
    d.received(origin(), transfer(40, 2, 40, 40, &[2; 40]));
    let out = actions(&mut d, origin());
    assert_eq!(sends(&out).last(), Some(&ack(80)));
    assert_eq!(log.epochs(), [e(1, 0), e(2, 40)]);
    assert_eq!(log.confirm_offset(), 40, "min(the master's confirmOffset, the local end)");
    assert_eq!(log.inner.contents().1, [[1u8; 40], [2u8; 40]].concat());
}

#[test]
fn a_store_failure_on_append_closes_and_reconnects_from_the_log_end() {
    let log = Arc::new(TestLog::with(100, &[e(1, 0)]));
    let mut d = connected_with(&log, &config_in(1));
    d.received(origin(), reply(200, &[e(1, 0)]));
    assert_eq!(sends(&actions(&mut d, origin())), [ack(100)]);
    // Someone else appended meanwhile: the log refuses the master's bytes at 100.
    log.inner.append_at(100, &[0; 10]).unwrap();
    d.received(origin(), transfer(100, 1, 0, 0, &[1; 20]));
    assert_eq!(actions(&mut d, origin()), [SlaveAction::Disconnect]);
    let status = d.status(origin());
    assert_eq!(status.append_failures, 1);
    assert!(status.append_error.as_deref().is_some_and(|e| e.contains("append at 100")), "{status:?}");
}

#[test]
fn the_slave_heartbeats_closes_a_silent_master_and_reconnects_after_the_back_off() {
    let log = Arc::new(TestLog::with(100, &[e(1, 0)]));
    let mut d = connected_with(&log, &config_in(1));
    d.received(origin(), reply(100, &[e(1, 0)]));
    assert_eq!(sends(&actions(&mut d, origin())), [ack(100)]);
    let core = SlaveServiceConfig::new("127.0.0.1:1").core;
    // A heartbeat ack once the interval has passed, with nothing new stored.
    let beat = origin() + core.heartbeat_interval;
    d.handle_timeout(beat);
    assert_eq!(sends(&actions(&mut d, beat)), [ack(100)]);
    // A master silent for the housekeeping interval is dropped; the slave connects again later.
    let silent = origin() + core.housekeeping_interval;
    d.handle_timeout(silent);
    assert_eq!(actions(&mut d, silent), [SlaveAction::Disconnect]);
    assert!(matches!(d.status(silent).autoswitch.unwrap().phase, Phase::Disconnected { .. }));
    let retry = silent + core.reconnect_interval;
    d.handle_timeout(retry);
    assert_eq!(actions(&mut d, retry), [SlaveAction::Connect]);
}

#[test]
fn epochs_that_hold_no_data_are_dropped_from_the_log_when_the_master_does_not_know_them() {
    // This broker became master at epoch 1 and wrote nothing; the new master never had epoch 1.
    let log = Arc::new(TestLog::with(0, &[e(1, 0)]));
    let mut d = connected(&log);
    d.received(origin(), reply(50, &[e(2, 0)]));
    assert_eq!(sends(&actions(&mut d, origin())), [ack(0)]);
    assert_eq!(log.epochs(), [], "the empty epoch is gone from the log too");
    d.received(origin(), transfer(0, 2, 0, 50, &[4; 50]));
    assert_eq!(sends(&actions(&mut d, origin())), [ack(50)]);
    assert_eq!(log.epochs(), [e(2, 0)]);
    assert_eq!(d.status(origin()).append_error, None);
}

#[test]
fn a_stale_or_rogue_master_is_refused_and_the_status_says_why_until_a_good_one_answers() {
    // Epochs {1, 2} up to 150, all confirmed; told to follow a master elected in epoch 3.
    let log = Arc::new(TestLog::with(150, &[e(1, 0), e(2, 100)]));
    log.set_confirm_offset(150);
    let mut d = connected_with(&log, &config_in(3));
    // The master at that address answers with last epoch 1: stale.
    d.received(origin(), reply(100, &[e(1, 0)]));
    assert_eq!(actions(&mut d, origin()), [SlaveAction::Disconnect]);
    assert_eq!((log.bounds().max, log.epochs(), log.confirm_offset()), (150, vec![e(1, 0), e(2, 100)], 150));
    let auto = d.status(origin()).autoswitch.unwrap();
    assert_eq!(auto.refusals.master_behind_elected_epoch, 1);
    let why = auto.refusals.current.clone().expect("the refusal is shown");
    assert!(why.contains("stale master"), "{why}");
    assert_eq!(auto.truncations, 0);
    // Next, a rogue master announcing 2147483647.
    let later = origin() + Duration::from_secs(10);
    d.handle_timeout(later);
    assert_eq!(actions(&mut d, later), [SlaveAction::Connect]);
    d.connected(later);
    let _ = actions(&mut d, later);
    d.received(later, reply(150, &[e(1, 0), e(2, 100), e(i32::MAX, 150)]));
    assert_eq!(actions(&mut d, later), [SlaveAction::Disconnect]);
    assert_eq!(log.epochs(), [e(1, 0), e(2, 100)], "nothing recorded");
    let auto = d.status(later).autoswitch.unwrap();
    assert_eq!(auto.refusals.epoch_above_elected, 1);
    // Then one whose log agrees only below the confirmOffset: refused, naming the override.
    let later = later + Duration::from_secs(10);
    d.handle_timeout(later);
    assert_eq!(actions(&mut d, later), [SlaveAction::Connect]);
    d.connected(later);
    let _ = actions(&mut d, later);
    d.received(later, reply(300, &[e(1, 0), e(3, 120)]));
    assert_eq!(actions(&mut d, later), [SlaveAction::Disconnect]);
    assert_eq!(log.bounds().max, 150, "nothing truncated");
    let auto = d.status(later).autoswitch.unwrap();
    assert_eq!(auto.refusals.would_truncate_confirmed, 1);
    let why = auto.refusals.current.clone().unwrap();
    assert!(why.contains("haSlaveDropConfirmed=100-150") && why.contains("50 confirmed bytes"), "{why}");
    // The real master of epoch 3 answers: followed, and the refusal is no longer current.
    let later = later + Duration::from_secs(10);
    d.handle_timeout(later);
    assert_eq!(actions(&mut d, later), [SlaveAction::Connect]);
    d.connected(later);
    let _ = actions(&mut d, later);
    d.received(later, reply(300, &[e(1, 0), e(2, 100), e(3, 150)]));
    assert_eq!(sends(&actions(&mut d, later)), [ack(150)]);
    let auto = d.status(later).autoswitch.unwrap();
    assert_eq!(auto.refusals.current, None);
    let counted: Vec<u64> = auto.refusals.by_reason().iter().map(|r| r.1).collect();
    assert_eq!(counted, [1, 0, 1, 1, 0]);
}
