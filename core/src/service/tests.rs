use std::net::SocketAddr;
use std::time::Duration;

use crate::time::Instant;

use bytes::Bytes;

use super::*;
use crate::ConnId;
use crate::config::{CoreConfigError, MasterConfig};
use crate::error::WaitError;
use crate::log::{LogBounds, LogSpan, MessageLog, Offset, PutResult, PutStatus};
use crate::{BrokerRole, FlushDiskType};
use std::cell::RefCell;
use std::rc::Rc;

use crate::classic::frame::encode_report;

#[derive(Default)]
struct Sink {
    frames: Rc<RefCell<Vec<Transmit>>>,
    closed: Rc<RefCell<bool>>,
}
impl ConnSink for Sink {
    fn transmit(&mut self, t: Transmit) {
        self.frames.borrow_mut().push(t);
    }
    fn close(&mut self) {
        *self.closed.borrow_mut() = true;
    }
}
struct Reply(Rc<RefCell<Vec<Result<Offset, WaitError>>>>);
impl WaitSink for Reply {
    fn complete(self, r: Result<Offset, WaitError>) {
        self.0.borrow_mut().push(r);
    }
}

/// A log that appends 10-byte messages and counts them.
/// A log of 10-byte records that counts its puts, with the flush type it reports.
#[derive(Default)]
struct CountingLog(std::sync::atomic::AtomicU64, FlushDiskType);

impl crate::LogRead for CountingLog {
    type Error = std::io::Error;
    fn bounds(&self) -> LogBounds {
        LogBounds { min: 0, max: self.0.load(std::sync::atomic::Ordering::Relaxed) * 10 }
    }
    fn flushed(&self) -> Offset {
        0
    }
    fn read(&self, _: LogSpan) -> Result<Bytes, std::io::Error> {
        Ok(Bytes::new())
    }
    fn is_record_boundary(&self, offset: Offset) -> Result<bool, std::io::Error> {
        Ok(offset % 10 == 0)
    }
    fn segment_size(&self) -> u64 {
        crate::DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG
    }
}

impl MessageLog for CountingLog {
    type Message = bool;
    type Durable = std::future::Ready<Result<Offset, std::io::Error>>;
    fn put(&self, legal: bool) -> PutResult {
        if !legal {
            return PutResult::refused(PutStatus::MessageIllegal);
        }
        let n = self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        PutResult {
            status: PutStatus::PutOk,
            offset: n * 10,
            wrote_bytes: 10,
            queue_offset: n,
            msg_id: String::new(),
        }
    }
    fn durable(&self, offset: Offset) -> Self::Durable {
        std::future::ready(Ok(offset))
    }
    fn flush_settings(&self) -> crate::FlushSettings {
        crate::FlushSettings { flush_disk_type: self.1, ..Default::default() }
    }
}

#[test]
fn pending_put_appends_unless_refused_and_waits_as_the_role_says() {
    let log = CountingLog(Default::default(), FlushDiskType::SyncFlush);
    let sync = MasterServiceConfig { role: BrokerRole::SyncMaster, ..Default::default() };
    let refused = PendingPut::start(&sync, &log, true, true).unwrap_err();
    assert_eq!(
        (refused.status, crate::LogRead::bounds(&log).max),
        (PutStatus::ServiceNotAvailable, 0),
        "refused: not stored"
    );
    assert_eq!(PendingPut::start(&sync, &log, false, false).unwrap_err().status, PutStatus::MessageIllegal);
    let p = PendingPut::start(&sync, &log, true, false).unwrap();
    assert_eq!((p.end(), p.flush, p.replicate), (10, true, true));
    let r = p.finish(Some(true), Some(Err(WaitError::Timeout)));
    assert_eq!((r.status, r.offset, r.wrote_bytes), (PutStatus::FlushSlaveTimeout, 0, 10));
    let async_log = CountingLog::default();
    let p = PendingPut::start(&MasterServiceConfig::default(), &async_log, true, false).unwrap();
    assert_eq!((p.flush, p.replicate), (false, false), "ASYNC_MASTER with ASYNC_FLUSH waits for nothing");
    assert_eq!(p.finish(None, None).status, PutStatus::PutOk);
}

#[test]
fn put_status_follows_rocketmq_precedence() {
    use PutStatus::*;
    assert_eq!(put_status(PutOk, None, None), PutOk);
    assert_eq!(put_status(PutOk, Some(true), Some(Ok(5))), PutOk);
    assert_eq!(put_status(PutOk, Some(false), Some(Ok(5))), FlushDiskTimeout);
    assert_eq!(put_status(PutOk, Some(false), Some(Err(WaitError::Timeout))), FlushSlaveTimeout);
    assert_eq!(put_status(PutOk, None, Some(Err(WaitError::SlaveNotAvailable))), SlaveNotAvailable);
    assert_eq!(
        put_status(PutOk, None, Some(Err(WaitError::InSyncReplicasNotEnough))),
        InSyncReplicasNotEnough
    );
    assert_eq!(put_status(MessageIllegal, Some(false), Some(Ok(1))), MessageIllegal);
}

#[test]
fn driver_routes_transmits_completes_waits_and_follows_the_log() {
    let now = Instant::ZERO;
    let mut d: MasterDriver<Sink, Reply> =
        MasterDriver::new(MasterConfig::default(), now, LogBounds { min: 0, max: 0 }).unwrap();
    let sink = Sink::default();
    let frames = sink.frames.clone();
    let addr: SocketAddr = "127.0.0.1:4000".parse().unwrap();
    d.accept(now, ConnId(3), addr, sink);
    d.received(now, ConnId(3), Bytes::copy_from_slice(&encode_report(0)));
    d.log_changed(now, LogBounds { min: 0, max: 100 });
    let results = Rc::new(RefCell::new(Vec::new()));
    d.await_replication(now, 100, now + Duration::from_secs(3), Reply(results.clone()));
    let _ = d.drain();
    assert_eq!(frames.borrow().len(), 1);
    assert_eq!(frames.borrow()[0].body, Some(LogSpan { offset: 0, len: 100 }));
    d.sent(now, ConnId(3));
    d.received(now, ConnId(3), Bytes::copy_from_slice(&encode_report(100)));
    let _ = d.drain();
    assert_eq!(*results.borrow(), [Ok(100)]);
    let status = d.status(now, BrokerRole::SyncMaster, 100);
    assert_eq!(status.slaves[0].address, addr);
    assert_eq!(status.slaves[0].ack, Some(100));
    assert_eq!(status.bytes_replicated, 100);
}

#[test]
fn shutdown_closes_connections_and_cancels_waits() {
    let now = Instant::ZERO;
    let mut d: MasterDriver<Sink, Reply> =
        MasterDriver::new(MasterConfig::default(), now, LogBounds { min: 0, max: 10 }).unwrap();
    let sink = Sink::default();
    let closed = sink.closed.clone();
    d.accept(now, ConnId(1), "127.0.0.1:1".parse().unwrap(), sink);
    d.received(now, ConnId(1), Bytes::copy_from_slice(&encode_report(0)));
    let results = Rc::new(RefCell::new(Vec::new()));
    d.await_replication(now, 10, now + Duration::from_secs(3), Reply(results.clone()));
    d.shutdown();
    assert!(*closed.borrow());
    assert_eq!(*results.borrow(), [Err(WaitError::Cancelled)]);
}

fn driver_at(end: Offset) -> (MasterDriver<Sink, Reply>, Instant) {
    let now = Instant::ZERO;
    (MasterDriver::new(MasterConfig::default(), now, LogBounds { min: 0, max: end }).unwrap(), now)
}

fn trusting(d: &mut MasterDriver<Sink, Reply>, net: &str) {
    d.set_admission(Admission::allow_list(crate::service::parse_allow_list(net).unwrap()));
}

#[test]
fn a_trusted_slave_ahead_of_the_master_fences_puts() {
    let (mut d, now) = driver_at(100);
    trusting(&mut d, "10.0.0.0/24");
    let addr: SocketAddr = "10.0.0.7:4000".parse().unwrap();
    d.accept(now, ConnId(1), addr, Sink::default());
    d.received(now, ConnId(1), Bytes::copy_from_slice(&encode_report(150)));
    let _ = d.drain();
    assert_eq!(d.fence(), Some(&Fence::Diverged { slave: addr, reported: 150, end: 100 }));
    assert!(d.status(now, BrokerRole::SyncMaster, 0).fence.is_some());
}

#[test]
fn an_unidentified_connection_ahead_of_the_master_is_refused_loudly_without_fencing() {
    // Admitted by haTrustAnyReplica: it counts, but is not identified, so it cannot fence.
    let (mut d, now) = driver_at(100);
    d.set_admission(Admission { trust_any: true, ..Admission::default() });
    let sink = Sink::default();
    let closed = sink.closed.clone();
    d.accept(now, ConnId(1), "10.0.0.7:4000".parse().unwrap(), sink);
    d.received(now, ConnId(1), Bytes::copy_from_slice(&encode_report(150)));
    let _ = d.drain();
    assert_eq!(d.fence(), None);
    assert!(*closed.borrow());
    let status = d.status(now, BrokerRole::SyncMaster, 0);
    assert_eq!(status.refusals.untrusted_ahead, 1);
    let last = status.refusals.last.clone().unwrap_or_default();
    assert!(last.contains("10.0.0.7:4000") && last.contains("haReplicaAllowList"), "names the key: {last}");
}

#[test]
fn in_protected_mode_an_off_loopback_connection_is_closed_unread_and_a_loopback_replica_ahead_fences() {
    let (mut d, now) = driver_at(100);
    let sink = Sink::default();
    let closed = sink.closed.clone();
    d.accept(now, ConnId(1), "10.0.0.7:4000".parse().unwrap(), sink);
    d.received(now, ConnId(1), Bytes::copy_from_slice(&encode_report(150)));
    let _ = d.drain();
    assert!(*closed.borrow(), "closed at accept");
    let status = d.status(now, BrokerRole::SyncMaster, 0);
    assert_eq!((status.refusals.not_admitted, status.refusals.untrusted_ahead), (1, 0));
    assert!(status.refusals.last.is_some_and(|l| l.contains("protected mode")));
    assert_eq!(d.fence(), None);
    // A loopback replica holding bytes this master lost (old #16) fences it.
    let slave: SocketAddr = "127.0.0.1:4001".parse().unwrap();
    d.accept(now, ConnId(2), slave, Sink::default());
    d.received(now, ConnId(2), Bytes::copy_from_slice(&encode_report(150)));
    let _ = d.drain();
    assert_eq!(d.fence(), Some(&Fence::Diverged { slave, reported: 150, end: 100 }));
}

#[test]
fn the_restart_fence_lifts_once_every_slave_reported() {
    let (mut d, now) = driver_at(100);
    trusting(&mut d, "127.0.0.1");
    d.set_restart_fence(2);
    for (i, port) in [(1, 4001), (2, 4002)] {
        assert!(matches!(d.fence(), Some(Fence::Restart { .. })));
        d.accept(now, ConnId(i), SocketAddr::from(([127, 0, 0, 1], port)), Sink::default());
        d.received(now, ConnId(i), Bytes::copy_from_slice(&encode_report(100)));
        let _ = d.drain();
    }
    assert_eq!(d.fence(), None);
}

#[test]
fn a_host_that_connects_again_replaces_its_older_silent_connection() {
    let (mut d, now) = driver_at(100);
    trusting(&mut d, "10.0.0.0/24, 127.0.0.1");
    let old = Sink::default();
    let closed = old.closed.clone();
    d.accept(now, ConnId(1), "10.0.0.9:5000".parse().unwrap(), old);
    d.received(now, ConnId(1), Bytes::copy_from_slice(&encode_report(100)));
    // The old connection has said nothing for two heartbeat intervals (its host rebooted).
    let later = now + Duration::from_secs(11);
    d.accept(later, ConnId(2), "10.0.0.9:5001".parse().unwrap(), Sink::default());
    let _ = d.drain();
    assert!(!*closed.borrow(), "a connection alone is no reason to evict");
    d.received(later, ConnId(2), Bytes::copy_from_slice(&encode_report(100)));
    let _ = d.drain();
    assert!(*closed.borrow(), "the stale connection is closed");
    let slaves: Vec<_> = d.status(now, BrokerRole::SyncMaster, 0).slaves.iter().map(|s| s.conn).collect();
    assert_eq!(slaves, [ConnId(2)], "and no longer counted");
    // Slaves on one host over loopback (tests, the demo) are distinct.
    d.accept(later, ConnId(3), "127.0.0.1:6000".parse().unwrap(), Sink::default());
    d.accept(later, ConnId(4), "127.0.0.1:6001".parse().unwrap(), Sink::default());
    assert_eq!(d.status(later, BrokerRole::SyncMaster, 0).slaves.len(), 3);
}

#[test]
fn service_configs_are_validated() {
    let bad = MasterServiceConfig { role: BrokerRole::Slave, ..Default::default() };
    assert!(bad.validate().unwrap_err().to_string().contains("role"));
    let bad = MasterServiceConfig { slave_timeout: Duration::ZERO, ..Default::default() };
    assert!(bad.validate().unwrap_err().to_string().contains("slave_timeout"));
    assert!(SlaveServiceConfig::new("").validate().unwrap_err().to_string().contains("master_address"));
    SlaveServiceConfig::new("127.0.0.1:10912").validate().unwrap();
}

/// An instant for other test modules of the service layer to start from.
pub(super) fn origin() -> Instant {
    driver_at(0).1
}

/// A driver over a log of `end` bytes whose SYNC waits need two slaves (a quorum of three).
/// Replicas on 10.0.0.0/24 and loopback are listed.
fn quorum_driver(end: Offset) -> (MasterDriver<Sink, Reply>, Instant) {
    let now = Instant::ZERO;
    let config =
        MasterConfig { ack_policy: crate::AckPolicy::Quorum { in_sync_replicas: 3 }, ..Default::default() };
    let mut d = MasterDriver::new(config, now, LogBounds { min: 0, max: end }).unwrap();
    trusting(&mut d, "10.0.0.0/24, 127.0.0.1");
    (d, now)
}

/// Connects `conn` from `addr`, reports 0, is sent the log up to its end and acks `ack`.
fn streaming_slave(d: &mut MasterDriver<Sink, Reply>, now: Instant, conn: u64, addr: &str, ack: Offset) {
    let sink = Sink::default();
    let frames = sink.frames.clone();
    d.accept(now, ConnId(conn), addr.parse().unwrap(), sink);
    d.received(now, ConnId(conn), Bytes::copy_from_slice(&encode_report(0)));
    let _ = d.drain();
    for _ in 0..frames.borrow().len() {
        d.sent(now, ConnId(conn));
    }
    if ack > 0 {
        d.received(now, ConnId(conn), Bytes::copy_from_slice(&encode_report(ack)));
    }
    let _ = d.drain();
}

fn wait_for(
    d: &mut MasterDriver<Sink, Reply>,
    now: Instant,
    offset: Offset,
) -> Rc<RefCell<Vec<Result<Offset, WaitError>>>> {
    let results = Rc::new(RefCell::new(Vec::new()));
    d.await_replication(now, offset, now + Duration::from_secs(3), Reply(results.clone()));
    let _ = d.drain();
    results
}

/// Seed 46 of the simulator: a slave whose machine rebooted within two heartbeats (so its dead
/// connection is not yet silent and is not evicted) reconnects with less than it had acked.
/// Its two connections are one replica: the dead one's ack no longer counts once the new one
/// streams, under open admission too.
#[test]
fn a_slave_that_rebooted_within_two_heartbeats_counts_once_for_a_quorum() {
    let (mut d, now) = quorum_driver(100);
    streaming_slave(&mut d, now, 1, "10.0.0.7:4000", 100);
    streaming_slave(&mut d, now, 2, "10.0.0.8:4000", 100);
    // 10.0.0.7 rebooted and lost what it held; its old connection acked 100 a moment ago.
    let later = now + Duration::from_millis(100);
    streaming_slave(&mut d, later, 3, "10.0.0.7:4001", 0);
    let results = wait_for(&mut d, later, 100);
    assert_eq!(*results.borrow(), [], "one copy on 10.0.0.8 is not a quorum of two slaves");
    assert_eq!(d.master().replicated(), Some(0));
    // Once the rebooted slave holds the bytes again, the wait completes.
    let frames_sent = d.master().slaves().find(|s| s.conn == ConnId(3)).unwrap().inflight;
    for _ in 0..frames_sent {
        d.sent(later, ConnId(3));
    }
    d.received(later, ConnId(3), Bytes::copy_from_slice(&encode_report(100)));
    let _ = d.drain();
    assert_eq!(*results.borrow(), [Ok(100)]);
}

/// The classic protocol carries no identity: two slaves behind one address (NAT) cannot be
/// told from one slave that reconnected, so they count as one copy (the newer connection's)
/// until the older acknowledges bytes sent after the newer started, which a dead connection
/// cannot; on loopback, where tests and the demo run several slaves, each connection counts.
#[test]
fn slaves_sharing_an_address_count_as_one_copy_until_both_acknowledge_new_bytes() {
    let (mut d, now) = quorum_driver(100);
    streaming_slave(&mut d, now, 1, "10.0.0.7:4000", 100);
    streaming_slave(&mut d, now, 2, "10.0.0.7:4001", 100);
    let results = wait_for(&mut d, now, 100);
    assert_eq!(*results.borrow(), [Err(WaitError::InSyncReplicasNotEnough)], "one address, one copy");
    // Both are alive: each acknowledges bytes sent after the second one started.
    d.log_changed(now, LogBounds { min: 0, max: 200 });
    for conn in [2, 1] {
        let still_one = wait_for(&mut d, now, 200);
        assert_eq!(
            *still_one.borrow(),
            [Err(WaitError::InSyncReplicasNotEnough)],
            "before conn {conn}'s ack"
        );
        let _ = d.drain();
        d.sent(now, ConnId(conn));
        d.received(now, ConnId(conn), Bytes::copy_from_slice(&encode_report(200)));
        let _ = d.drain();
    }
    assert_eq!(*wait_for(&mut d, now, 200).borrow(), [Ok(200)]);
    let (mut d, now) = quorum_driver(100);
    streaming_slave(&mut d, now, 1, "127.0.0.1:4000", 100);
    streaming_slave(&mut d, now, 2, "127.0.0.1:4001", 100);
    assert_eq!(*wait_for(&mut d, now, 100).borrow(), [Ok(100)]);
}

/// Seed 0xf45ab of the simulator: with an allow-list that holds a network, any host on it is
/// admitted and trusted (it fences the master if it reports past the end), but only a replica
/// named exactly (an address entry, or a TLS name) lifts the restart fence.
#[test]
fn a_stranger_on_an_allow_listed_network_does_not_lift_the_restart_fence() {
    let (mut d, now) = driver_at(100);
    d.set_admission(Admission::allow_list(
        crate::service::parse_allow_list("10.0.0.7, 10.0.0.0/24").unwrap(),
    ));
    d.set_restart_fence(1);
    d.accept(now, ConnId(1), "10.0.0.99:4000".parse().unwrap(), Sink::default());
    d.received(now, ConnId(1), Bytes::copy_from_slice(&encode_report(100)));
    let _ = d.drain();
    assert_eq!(d.fence(), Some(&Fence::Restart { waiting_for: 1 }), "a stranger is no replica");
    assert!(d.status(now, BrokerRole::SyncMaster, 0).slaves[0].trusted, "but it is trusted to fence");
    d.accept(now, ConnId(2), "10.0.0.7:4000".parse().unwrap(), Sink::default());
    d.received(now, ConnId(2), Bytes::copy_from_slice(&encode_report(100)));
    let _ = d.drain();
    assert_eq!(d.fence(), None);
}

#[test]
fn a_restart_fence_no_named_replica_can_lift_is_refused_at_start() {
    let allow = |text| Admission::allow_list(crate::service::parse_allow_list(text).unwrap());
    let fenced =
        |text, n| MasterServiceConfig { restart_fence: n, admission: allow(text), ..Default::default() };
    let err = fenced("10.0.0.0/24", 2).validate().unwrap_err();
    let CoreConfigError::Invalid { field, value, .. } = &err;
    assert_eq!(*field, "restart_fence");
    assert!(value.contains("10.0.0.0/24"), "names the entry: {err}");
    let err = fenced("10.0.0.6, 10.0.0.0/24", 2).validate().unwrap_err();
    assert!(err.to_string().contains("10.0.0.0/24"), "{err}");
    let err = fenced("10.0.0.6", 2).validate().unwrap_err();
    assert!(err.to_string().contains("name 1"), "{err}");
    fenced("10.0.0.6, 10.0.0.7/32, 10.0.0.0/24", 2).validate().unwrap();
    fenced("::ffff:10.0.0.6, 10.0.0.7", 2).validate().unwrap();
    // On loopback each live connection is a replica (tests, the demo).
    fenced("127.0.0.1", 2).validate().unwrap();
    fenced("10.0.0.0/24", 0).validate().unwrap();
}

/// Soak seed 0xf42b5 (and 0xf449d, 0xf44d0, 0xf4798): under `AllInSync`, a slave that rebooted
/// reconnects with less than a pending wait needs. Evicting its silent old connection before
/// the new one's first report was fed left it with no connection for a moment, and the wait
/// completed on the other slave alone, although the rebooted slave was in sync and below it.
#[test]
fn a_rebooted_slave_stays_in_an_all_in_sync_wait_while_its_old_connection_is_evicted() {
    let now = Instant::ZERO;
    let config = MasterConfig { ack_policy: crate::AckPolicy::AllInSync, ..Default::default() };
    let mut d: MasterDriver<Sink, Reply> =
        MasterDriver::new(config, now, LogBounds { min: 0, max: 100 }).unwrap();
    trusting(&mut d, "10.0.0.0/24");
    streaming_slave(&mut d, now, 1, "10.0.0.7:4000", 50);
    streaming_slave(&mut d, now, 2, "10.0.0.8:4000", 100);
    let results = Rc::new(RefCell::new(Vec::new()));
    d.await_replication(now, 100, now + Duration::from_secs(60), Reply(results.clone()));
    let _ = d.drain();
    assert_eq!(*results.borrow(), [], "10.0.0.7 is in sync and holds 50");
    // 10.0.0.7 rebooted: its old connection has been silent for two heartbeats, and its new
    // one reports the 50 bytes it kept.
    let later = now + Duration::from_secs(11);
    d.handle_timeout(later);
    let _ = d.drain();
    let new = Sink::default();
    let new_closed = new.closed.clone();
    d.accept(later, ConnId(3), "10.0.0.7:4001".parse().unwrap(), new);
    d.received(later, ConnId(3), Bytes::copy_from_slice(&encode_report(50)));
    let _ = d.drain();
    assert!(!*new_closed.borrow());
    let live: Vec<_> = d.master().slaves().map(|s| s.conn).collect();
    assert_eq!(live, [ConnId(2), ConnId(3)], "the silent connection is evicted");
    assert_eq!(*results.borrow(), [], "the rebooted slave is in sync and still lacks 50..100");
    d.sent(later, ConnId(3));
    d.received(later, ConnId(3), Bytes::copy_from_slice(&encode_report(100)));
    let _ = d.drain();
    assert_eq!(*results.borrow(), [Ok(100)]);
}
