//! Which connections the master service trusts (issues 14 and 22): strangers on the HA port can
//! neither fence the master, lift its restart fence, evict a real slave, count for a SYNC wait,
//! nor hold every connection slot.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use logship_core::time::Instant;

use bytes::Bytes;
use logship_core::classic::frame::encode_report;
use logship_core::service::{
    Admission, Fence, MasterServiceConfig,
    adapter::{ConnSink, MasterDriver, Transmit, WaitSink},
    tls,
};
use logship_core::*;

#[path = "../../tests/support/pki.rs"]
mod pki;

#[derive(Default, Clone)]
struct Sink {
    closed: Rc<RefCell<bool>>,
}

impl ConnSink for Sink {
    fn transmit(&mut self, _: Transmit) {}
    fn close(&mut self) {
        *self.closed.borrow_mut() = true;
    }
}

#[derive(Clone, Default)]
struct Reply(Rc<RefCell<Vec<Result<Offset, WaitError>>>>);

impl WaitSink for Reply {
    fn complete(self, r: Result<Offset, WaitError>) {
        self.0.borrow_mut().push(r);
    }
}

type Driver = MasterDriver<Sink, Reply>;

fn at(ms: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(ms)
}

fn driver(end: Offset) -> Driver {
    MasterDriver::new(MasterConfig::default(), at(0), LogBounds { min: 0, max: end }).unwrap()
}

fn trusting(d: &mut Driver, nets: &[&str]) {
    d.set_admission(Admission::allow_list(nets.iter().map(|n| n.parse().unwrap()).collect()));
}

/// RocketMQ's open admission, by the loudly warned opt-in (`haTrustAnyReplica`).
fn trusting_anyone(d: &mut Driver) {
    d.set_admission(Admission { trust_any: true, ..Admission::default() });
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn connect(d: &mut Driver, now: Instant, conn: u64, peer: &str) -> Sink {
    let sink = Sink::default();
    d.accept(now, ConnId(conn), addr(peer), sink.clone());
    let _ = d.drain();
    sink
}

fn send(d: &mut Driver, now: Instant, conn: u64, bytes: &[u8]) {
    d.received(now, ConnId(conn), Bytes::copy_from_slice(bytes));
    let _ = d.drain();
}

fn close(d: &mut Driver, now: Instant, conn: u64) {
    d.closed(now, ConnId(conn));
    let _ = d.drain();
}

fn live(d: &Driver) -> Vec<u64> {
    d.status(at(0), logship_core::BrokerRole::SyncMaster, 0).slaves.iter().map(|s| s.conn.0).collect()
}

#[test]
fn stray_bytes_on_the_ha_port_do_not_fence_the_master() {
    // Loopback is identified in protected mode: even its stray bytes are no real offset.
    let probes = [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc",
        b"PING\r\n\r\n",
        b"\r\n\r\n\r\n\r\n",
        b"\t\t\t\t\t\t\t\t",
    ];
    for probe in probes {
        let mut d = driver(495);
        let sink = connect(&mut d, at(0), 1, "127.0.0.1:53494");
        send(&mut d, at(0), 1, probe);
        assert_eq!(d.fence(), None, "{:?} fenced the master", String::from_utf8_lossy(probe));
        assert!(*sink.closed.borrow(), "the prober is closed");
    }
}

#[test]
fn eight_zero_bytes_from_a_stranger_do_not_lift_the_restart_fence() {
    // Open admission (haTrustAnyReplica): it counts, but is no named replica.
    let mut d = driver(100);
    trusting_anyone(&mut d);
    d.set_restart_fence(1);
    connect(&mut d, at(0), 1, "10.0.0.9:40000");
    send(&mut d, at(0), 1, &[0; 8]);
    assert!(matches!(d.fence(), Some(Fence::Restart { .. })), "{:?}", d.fence());
    // With an allow-list, a stranger outside it is refused unread.
    let mut d = driver(100);
    trusting(&mut d, &["127.0.0.1"]);
    d.set_restart_fence(1);
    let sink = connect(&mut d, at(0), 1, "127.0.0.5:40000");
    send(&mut d, at(0), 1, &[0; 8]);
    assert!(*sink.closed.borrow());
    assert!(matches!(d.fence(), Some(Fence::Restart { waiting_for: 1 })), "{:?}", d.fence());
    // The listed replica lifts it.
    connect(&mut d, at(1), 2, "127.0.0.1:40001");
    send(&mut d, at(1), 2, &[0; 8]);
    assert_eq!(d.fence(), None);
}

#[test]
fn one_slave_that_reports_reconnects_and_reports_again_does_not_lift_a_fence_of_two() {
    let mut d = driver(100);
    trusting(&mut d, &["127.0.0.1"]);
    d.set_restart_fence(2);
    connect(&mut d, at(0), 1, "127.0.0.1:4001");
    send(&mut d, at(0), 1, &encode_report(100));
    close(&mut d, at(1), 1);
    connect(&mut d, at(2), 2, "127.0.0.1:4002");
    send(&mut d, at(2), 2, &encode_report(100));
    assert_eq!(d.fence(), Some(&Fence::Restart { waiting_for: 1 }));
    // A second slave, live at the same time, does.
    connect(&mut d, at(3), 3, "127.0.0.1:4003");
    send(&mut d, at(3), 3, &encode_report(100));
    assert_eq!(d.fence(), None);
}

#[test]
fn a_remote_host_counts_once_for_the_restart_fence_however_often_it_reconnects() {
    let mut d = driver(100);
    trusting(&mut d, &["10.0.0.9", "10.0.0.10"]);
    d.set_restart_fence(2);
    for (conn, port) in [(1, 5000), (2, 5001), (3, 5002)] {
        connect(&mut d, at(conn), conn, &format!("10.0.0.9:{port}"));
        send(&mut d, at(conn), conn, &encode_report(100));
        close(&mut d, at(conn), conn);
    }
    assert_eq!(d.fence(), Some(&Fence::Restart { waiting_for: 1 }));
    // Another host, even one that reported and left, lifts it: it was heard from.
    connect(&mut d, at(10), 4, "10.0.0.10:5000");
    send(&mut d, at(10), 4, &encode_report(0));
    close(&mut d, at(10), 4);
    assert_eq!(d.fence(), None);
}

#[test]
fn only_admitted_connections_read_the_log_or_count_for_sync_waits() {
    #[derive(Clone, Default)]
    struct Frames(Rc<RefCell<u32>>, Rc<RefCell<bool>>);
    impl ConnSink for Frames {
        fn transmit(&mut self, _: Transmit) {
            *self.0.borrow_mut() += 1;
        }
        fn close(&mut self) {
            *self.1.borrow_mut() = true;
        }
    }
    let mut d: MasterDriver<Frames, Reply> =
        MasterDriver::new(MasterConfig::default(), at(0), LogBounds { min: 0, max: 100 }).unwrap();
    d.set_admission(Admission::allow_list(vec!["10.0.0.0/24".parse().unwrap()]));
    let stranger = Frames::default();
    d.accept(at(0), ConnId(1), addr("192.0.2.1:5000"), stranger.clone());
    d.received(at(0), ConnId(1), Bytes::copy_from_slice(&encode_report(0)));
    let _ = d.drain();
    assert_eq!((*stranger.0.borrow(), *stranger.1.borrow()), (0, true), "refused unread, sent nothing");
    // A forged ack from the stranger completes nothing.
    d.received(at(1), ConnId(1), Bytes::copy_from_slice(&encode_report(100)));
    let replies = Reply::default();
    d.await_replication(at(1), 100, at(3_000), replies.clone());
    let _ = d.drain();
    assert_eq!(*replies.0.borrow(), [Err(WaitError::SlaveNotAvailable)]);
    d.closed(at(2), ConnId(1));
    let _ = d.drain();
    let status = d.status(at(2), logship_core::BrokerRole::SyncMaster, 0);
    assert_eq!((status.refusals.not_admitted, status.connections_accepted), (1, 0));
    assert!(status.slaves.is_empty());
}

#[test]
fn connections_beyond_the_per_peer_and_total_limits_are_refused() {
    let mut d = driver(100);
    d.set_admission(Admission {
        max_connections_per_peer: 2,
        max_connections: 3,
        max_untrusted_connections: 2,
        ..Admission::allow_list(vec!["10.0.0.0/24".parse().unwrap()])
    });
    // Replicas that reported are never displaced: past a limit, a newcomer is refused.
    let sinks: Vec<Sink> = (1..=3)
        .map(|i| {
            let sink = connect(&mut d, at(0), i, &format!("10.0.0.9:{}", 5000 + i));
            send(&mut d, at(0), i, &encode_report(0));
            sink
        })
        .collect();
    assert_eq!(sinks.iter().map(|s| *s.closed.borrow()).collect::<Vec<_>>(), [false, false, true]);
    let other = connect(&mut d, at(0), 4, "10.0.0.10:5000");
    send(&mut d, at(0), 4, &encode_report(0));
    assert!(!*other.closed.borrow());
    let fifth = connect(&mut d, at(0), 5, "10.0.0.11:5000");
    assert!(*fifth.closed.borrow(), "over the total limit");
    assert_eq!(live(&d), [1, 2, 4]);
    assert_eq!(d.status(at(0), logship_core::BrokerRole::SyncMaster, 0).refusals.over_limit, 2);
    // A refused connection's teardown is reported like any other and frees nothing else.
    close(&mut d, at(1), 3);
    close(&mut d, at(1), 1);
    assert!(!*connect(&mut d, at(2), 6, "10.0.0.9:5006").closed.borrow(), "room again");
}

/// A log of 10-byte records.
struct TenByteRecords(u64);

impl LogRead for TenByteRecords {
    type Error = std::io::Error;
    fn bounds(&self) -> LogBounds {
        LogBounds { min: 0, max: self.0 }
    }
    fn flushed(&self) -> Offset {
        self.0
    }
    fn read(&self, _: LogSpan) -> Result<Bytes, std::io::Error> {
        Ok(Bytes::new())
    }
    fn is_record_boundary(&self, offset: Offset) -> Result<bool, std::io::Error> {
        Ok(offset % 10 == 0)
    }
    fn segment_size(&self) -> u64 {
        logship_core::DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG
    }
}

fn service_driver(allow: &[&str]) -> Driver {
    let config = MasterServiceConfig {
        admission: Admission::allow_list(allow.iter().map(|n| n.parse().unwrap()).collect()),
        ..MasterServiceConfig::default()
    };
    MasterDriver::for_service(&config, at(0), std::sync::Arc::new(TenByteRecords(100))).unwrap()
}

#[test]
fn a_report_off_a_record_boundary_is_refused_before_it_counts() {
    // Not identified (open admission by haTrustAnyReplica): refused, counted, no fence; its
    // ack completes no wait.
    let mut d = service_driver(&[]);
    trusting_anyone(&mut d);
    connect(&mut d, at(0), 2, "10.0.0.8:5001");
    send(&mut d, at(0), 2, &encode_report(0));
    let replies = Reply::default();
    d.await_replication(at(0), 40, at(3_000), replies.clone());
    let sink = connect(&mut d, at(0), 1, "10.0.0.9:5000");
    send(&mut d, at(0), 1, &encode_report(55));
    assert!(*sink.closed.borrow());
    assert_eq!(d.fence(), None);
    assert!(
        replies.0.borrow().is_empty(),
        "a diverged slave report satisfied a wait: {:?}",
        replies.0.borrow()
    );
    let status = d.status(at(0), logship_core::BrokerRole::SyncMaster, 0);
    assert_eq!(status.refusals.diverged, 1);
    assert!(
        status.refusals.last.as_deref().is_some_and(|l| l.contains("not a record boundary")),
        "{status:?}"
    );
    // A report on a boundary streams and counts.
    d.sent(at(1), ConnId(2));
    send(&mut d, at(1), 2, &encode_report(50));
    assert_eq!(*replies.0.borrow(), [Ok(40)]);
    // Trusted: the master fences, with the slave and its report in the status.
    let mut d = service_driver(&["10.0.0.0/24"]);
    connect(&mut d, at(0), 1, "10.0.0.9:5000");
    send(&mut d, at(0), 1, &encode_report(55));
    assert_eq!(d.fence(), Some(&Fence::NotOnRecordBoundary { slave: addr("10.0.0.9:5000"), reported: 55 }));
}

#[test]
fn a_trusted_replica_ahead_still_fences_and_an_untrusted_one_is_counted() {
    let mut d = service_driver(&["10.0.0.7"]);
    connect(&mut d, at(0), 1, "10.0.0.7:4000");
    send(&mut d, at(0), 1, &encode_report(150));
    assert_eq!(d.fence(), Some(&Fence::Diverged { slave: addr("10.0.0.7:4000"), reported: 150, end: 100 }));
    let mut d = service_driver(&[]);
    trusting_anyone(&mut d);
    connect(&mut d, at(0), 1, "10.0.0.7:4000");
    send(&mut d, at(0), 1, &encode_report(150));
    assert_eq!(d.fence(), None);
    assert_eq!(d.status(at(0), logship_core::BrokerRole::SyncMaster, 0).refusals.untrusted_ahead, 1);
}

#[test]
fn a_service_with_a_restart_fence_needs_named_replicas() {
    // Protected mode names the loopback replicas (each while it is connected).
    MasterServiceConfig { restart_fence: 2, ..MasterServiceConfig::default() }.validate().unwrap();
    let listed = MasterServiceConfig {
        restart_fence: 2,
        admission: Admission::allow_list(vec!["10.0.0.6".parse().unwrap()]),
        ..MasterServiceConfig::default()
    };
    let err = listed.validate().unwrap_err();
    assert!(err.to_string().contains("name 1"), "{err}");
}

#[test]
fn two_slaves_on_one_host_do_not_evict_each_other() {
    let mut d = driver(100);
    trusting(&mut d, &["10.0.0.9"]);
    let mut now = 0;
    connect(&mut d, at(now), 1, "10.0.0.9:5000");
    send(&mut d, at(now), 1, &encode_report(100));
    connect(&mut d, at(now), 2, "10.0.0.9:5001");
    send(&mut d, at(now), 2, &encode_report(100));
    for _ in 0..5 {
        now += 1_000;
        send(&mut d, at(now), 1, &encode_report(100));
        send(&mut d, at(now), 2, &encode_report(100));
    }
    assert_eq!(live(&d), [1, 2]);
}

#[test]
fn a_stranger_from_a_slaves_host_does_not_break_sync_puts() {
    let mut d = driver(0);
    trusting(&mut d, &["10.0.0.9"]);
    connect(&mut d, at(0), 1, "10.0.0.9:5000");
    send(&mut d, at(0), 1, &encode_report(0));
    // The stranger connects from the slave's address and says nothing, or reports 0.
    connect(&mut d, at(10), 2, "10.0.0.9:6000");
    connect(&mut d, at(10), 3, "10.0.0.9:6001");
    send(&mut d, at(10), 3, &encode_report(0));
    d.log_changed(at(20), LogBounds { min: 0, max: 100 });
    let replies = Reply::default();
    d.await_replication(at(20), 100, at(3_000), replies.clone());
    let _ = d.drain();
    d.sent(at(21), ConnId(1));
    send(&mut d, at(21), 1, &encode_report(100));
    assert_eq!(*replies.0.borrow(), [Ok(100)], "the real slave's ack completed the put");
    assert!(live(&d).contains(&1));
}

#[test]
fn a_connection_silent_past_the_first_report_deadline_is_closed_and_counted() {
    let mut d = driver(100);
    let sink = connect(&mut d, at(0), 1, "127.0.0.1:40000");
    d.handle_timeout(at(10_000));
    let _ = d.drain();
    assert!(*sink.closed.borrow());
    let refusals = d.status(at(10_000), logship_core::BrokerRole::SyncMaster, 0).refusals;
    assert_eq!(refusals.first_report_timeouts, 1);
    assert!(refusals.last.is_some_and(|l| l.contains("127.0.0.1:40000")));
}

#[test]
fn loopback_slaves_share_only_the_total_limit() {
    let mut d = driver(100);
    d.set_admission(Admission {
        max_connections_per_peer: 1,
        max_connections: 3,
        max_untrusted_connections: 1,
        ..Admission::default()
    });
    let sinks: Vec<Sink> = (1..=4)
        .map(|i| {
            let sink = connect(&mut d, at(0), i, &format!("127.0.0.1:{}", 5000 + i));
            send(&mut d, at(0), i, &encode_report(0));
            sink
        })
        .collect();
    assert_eq!(sinks.iter().map(|s| *s.closed.borrow()).collect::<Vec<_>>(), [false, false, false, true]);
}

#[test]
fn a_client_hello_from_an_allow_listed_address_is_refused_without_fencing() {
    // A TLS-enabled slave pointed at a plain (haTlsMode=off) master: its ClientHello reads as
    // an offset of at least 0x16 << 56, which no log reaches. Refused and counted, no fence.
    let mut d = service_driver(&["10.0.0.7"]);
    let sink = connect(&mut d, at(0), 1, "10.0.0.7:4000");
    send(&mut d, at(0), 1, b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc");
    assert_eq!(d.fence(), None, "a ClientHello fenced the master");
    assert!(*sink.closed.borrow(), "closed");
    let refusals = d.status(at(0), logship_core::BrokerRole::SyncMaster, 0).refusals;
    assert_eq!(refusals.implausible_reports, 1);
    // Just below the limit is a plausible (if huge) offset, and a trusted replica still fences.
    let mut d = service_driver(&["10.0.0.7"]);
    connect(&mut d, at(0), 1, "10.0.0.7:4000");
    send(&mut d, at(0), 1, &encode_report(100 + logship_core::service::adapter::IMPLAUSIBLE_AHEAD - 1));
    assert!(matches!(d.fence(), Some(Fence::Diverged { .. })));
    const { assert!(tls::PLAIN_REPORT_LIMIT > logship_core::service::adapter::IMPLAUSIBLE_AHEAD) };
}

// ---- Issue 22: strangers count for nothing, and never hold every slot ----

/// A service driver over 100 bytes of 10-byte records with `policy` and `admission`.
fn policy_driver(policy: AckPolicy, admission: Admission) -> Driver {
    let config = MasterServiceConfig {
        core: MasterConfig { ack_policy: policy, ..MasterConfig::default() },
        admission,
        ..MasterServiceConfig::default()
    };
    MasterDriver::for_service(&config, at(0), std::sync::Arc::new(TenByteRecords(100))).unwrap()
}

/// A fake acker: reports 0, then acknowledges the whole log it was sent.
fn fake_acker(d: &mut Driver, now: Instant, conn: u64, peer: &str) -> Sink {
    let sink = connect(d, now, conn, peer);
    send(d, now, conn, &encode_report(0));
    d.sent(now, ConnId(conn));
    send(d, now, conn, &encode_report(100));
    sink
}

fn wait(d: &mut Driver, now: Instant, offset: Offset) -> Reply {
    let replies = Reply::default();
    d.await_replication(now, offset, now + Duration::from_secs(3), replies.clone());
    let _ = d.drain();
    replies
}

/// TLS `optional` without an allow-list, trusting the certificate name `replica-a` from `ca`.
fn tls_optional(ca: &pki::Ca) -> Admission {
    Admission {
        tls: Some(pki::master_tls(ca, tls::TlsMode::Optional, &["replica-a"])),
        ..Admission::default()
    }
}

/// A TLS link presenting a certificate for `name` from `ca`.
fn tls_link(ca: &pki::Ca, name: &str) -> tls::Link {
    use logship_core::service::tls::rustls::pki_types::CertificateDer;
    use logship_core::service::tls::rustls::pki_types::pem::PemObject;
    let id = ca.issue(&[name]);
    tls::Link::Tls { peer_certificates: vec![CertificateDer::from_pem_slice(id.cert.as_bytes()).unwrap()] }
}

/// Connects `conn` from `peer` and reports its negotiation as `link`.
fn negotiated(d: &mut Driver, now: Instant, conn: u64, peer: &str, link: tls::Link) -> Sink {
    let sink = connect(d, now, conn, peer);
    d.negotiated(now, ConnId(conn), link);
    let _ = d.drain();
    sink
}

#[test]
fn a_fake_acker_never_turns_slave_not_available_into_put_ok() {
    for policy in [AckPolicy::AnySlave, AckPolicy::Quorum { in_sync_replicas: 2 }] {
        // Default configuration (protected mode): a stranger off loopback is closed unread.
        let mut d = policy_driver(policy, Admission::default());
        let sink = fake_acker(&mut d, at(0), 1, "203.0.113.9:40000");
        assert!(*sink.closed.borrow(), "{policy:?}: closed at accept");
        assert_eq!(*wait(&mut d, at(1), 100).0.borrow(), [Err(WaitError::SlaveNotAvailable)], "{policy:?}");
        // With TLS optional and no allow-list a plain link is admitted, but a stranger: it may
        // read the log, its acks count for nothing (loopback included: it is no longer
        // blanket-trusted once TLS is configured).
        let ca = pki::Ca::new("trust test CA");
        for peer in ["203.0.113.9:40000", "127.0.0.1:40000"] {
            let mut d = policy_driver(policy, tls_optional(&ca));
            let sink = negotiated(&mut d, at(0), 1, peer, tls::Link::Plain);
            send(&mut d, at(0), 1, &encode_report(0));
            d.sent(at(0), ConnId(1));
            send(&mut d, at(0), 1, &encode_report(100));
            assert!(!*sink.closed.borrow(), "{policy:?} {peer}: admitted");
            assert_eq!(
                *wait(&mut d, at(1), 100).0.borrow(),
                [Err(WaitError::SlaveNotAvailable)],
                "{policy:?} {peer}"
            );
            let status = d.status(at(1), logship_core::BrokerRole::SyncMaster, 0);
            assert!(status.slaves.iter().all(|s| !s.trusted && !s.counted && !s.in_sync), "{status:?}");
        }
    }
}

#[test]
fn a_stalled_stranger_does_not_time_out_all_in_sync_puts() {
    let ca = pki::Ca::new("trust test CA");
    // The default configuration (protected mode: the stranger is closed at accept), and TLS
    // optional (the stranger is admitted over a plain link, as a stranger).
    for admission in [Admission::default(), tls_optional(&ca)] {
        let tls = admission.tls.is_some();
        let mut d = policy_driver(AckPolicy::AllInSync, admission);
        // The stranger reports the end and then never acknowledges again.
        if tls {
            negotiated(&mut d, at(0), 1, "203.0.113.9:40000", tls::Link::Plain);
        } else {
            connect(&mut d, at(0), 1, "203.0.113.9:40000");
        }
        send(&mut d, at(0), 1, &encode_report(100));
        // The replica (loopback, or over TLS) streams.
        if tls {
            negotiated(&mut d, at(0), 2, "198.51.100.7:40000", tls_link(&ca, "replica-a"));
        } else {
            connect(&mut d, at(0), 2, "127.0.0.1:40000");
        }
        send(&mut d, at(0), 2, &encode_report(100));
        d.log_changed(at(1), LogBounds { min: 0, max: 200 });
        let replies = wait(&mut d, at(1), 200);
        d.sent(at(1), ConnId(2));
        send(&mut d, at(1), 2, &encode_report(200));
        assert_eq!(*replies.0.borrow(), [Ok(200)], "tls={tls}: the replica's ack completes the put");
    }
}

#[test]
fn a_loopback_replica_ahead_of_the_master_fences_it_in_the_default_configuration() {
    // Old #16: the master lost its unflushed tail; the slave that returns holds 5 PUT_OK
    // messages (50 bytes) the master no longer has.
    let mut d = policy_driver(AckPolicy::AnySlave, Admission::default());
    connect(&mut d, at(0), 1, "127.0.0.1:40000");
    send(&mut d, at(0), 1, &encode_report(150));
    assert_eq!(d.fence(), Some(&Fence::Diverged { slave: addr("127.0.0.1:40000"), reported: 150, end: 100 }));
    // Not identified (open admission): it cannot fence, and the refusal names the key.
    let mut d = policy_driver(AckPolicy::AnySlave, Admission { trust_any: true, ..Admission::default() });
    connect(&mut d, at(0), 1, "10.0.0.9:40000");
    send(&mut d, at(0), 1, &encode_report(150));
    assert_eq!(d.fence(), None);
    let last = d.status(at(0), logship_core::BrokerRole::SyncMaster, 0).refusals.last.unwrap();
    assert!(last.contains("haReplicaAllowList"), "{last}");
}

#[test]
fn connections_from_many_addresses_never_lock_a_named_replica_out() {
    let ca = pki::Ca::new("trust test CA");
    let mut d = policy_driver(AckPolicy::AnySlave, tls_optional(&ca));
    let untrusted = Admission::default().max_untrusted_connections;
    // 8 addresses x 8 connections: as many as haMaxConnections=64, none of them reporting.
    let flood = |d: &mut Driver, first: u64| {
        for i in 0..64 {
            connect(d, at(0), first + i, &format!("203.0.113.{}:{}", 1 + i / 8, 40000 + i % 8));
        }
    };
    flood(&mut d, 100);
    assert!(d.master().slaves().count() <= untrusted, "strangers hold at most their share of slots");
    // The TLS replica gets in (displacing the oldest undecided connection), is named, and counts.
    let replica = negotiated(&mut d, at(1), 1, "198.51.100.7:40000", tls_link(&ca, "replica-a"));
    assert!(!*replica.closed.borrow());
    send(&mut d, at(1), 1, &encode_report(100));
    let replies = wait(&mut d, at(1), 100);
    assert_eq!(*replies.0.borrow(), [Ok(100)]);
    // Another flood displaces strangers among themselves, never the replica.
    flood(&mut d, 200);
    assert!(!*replica.closed.borrow(), "a named replica that reported keeps its slot");
    let status = d.status(at(1), logship_core::BrokerRole::SyncMaster, 0);
    assert!(status.refusals.displaced > 0, "{:?}", status.refusals);
    assert!(status.slaves.iter().any(|s| s.conn == ConnId(1) && s.trusted && s.counted));
}

#[test]
fn sixty_four_idle_loopback_connections_do_not_lock_the_real_slave_out() {
    // Protected mode: loopback is exempt from the per-address limit, and identified, so the
    // idle connections fill all 64 slots.
    let mut d = policy_driver(AckPolicy::AnySlave, Admission::default());
    for i in 0..64 {
        let sink = connect(&mut d, at(0), 100 + i, &format!("127.0.0.1:{}", 40000 + i));
        assert!(!*sink.closed.borrow());
    }
    // The real slave displaces the oldest connection that has not reported.
    let slave = connect(&mut d, at(1), 1, "127.0.0.1:50000");
    assert!(!*slave.closed.borrow());
    send(&mut d, at(1), 1, &encode_report(100));
    assert_eq!(*wait(&mut d, at(1), 100).0.borrow(), [Ok(100)]);
    // More idle connections displace each other, never the slave that reported.
    for i in 0..64 {
        connect(&mut d, at(2), 300 + i, &format!("127.0.0.1:{}", 41000 + i));
    }
    assert!(!*slave.closed.borrow());
    assert_eq!(d.master().slaves().count(), 64);
}
