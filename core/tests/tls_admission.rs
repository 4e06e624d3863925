//! How the master driver admits connections once TLS is configured (issue 14): the adapter
//! reports each connection's negotiation, and the driver decides what the link may do.

#[path = "../../tests/support/pki.rs"]
mod pki;

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use logship_core::time::Instant;

use bytes::Bytes;
use logship_core::classic::frame::encode_report;
use logship_core::service::tls::rustls::pki_types::CertificateDer;
use logship_core::service::tls::rustls::pki_types::pem::PemObject;
use logship_core::service::tls::{Link, TlsMode};
use logship_core::service::{
    self, Admission, Fence, MasterServiceConfig,
    adapter::{ConnSink, MasterDriver, Transmit, WaitSink},
};
use logship_core::*;
use pki::{Ca, master_tls};

#[derive(Default, Clone)]
struct Sink {
    closed: Rc<RefCell<bool>>,
    frames: Rc<RefCell<usize>>,
}

impl ConnSink for Sink {
    fn transmit(&mut self, _: Transmit) {
        *self.frames.borrow_mut() += 1;
    }
    fn close(&mut self) {
        *self.closed.borrow_mut() = true;
    }
}

struct Reply;

impl WaitSink for Reply {
    fn complete(self, _: Result<Offset, WaitError>) {}
}

type Driver = MasterDriver<Sink, Reply>;

fn at(ms: u64) -> Instant {
    Instant::ZERO + Duration::from_millis(ms)
}

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

fn driver(ca: &Ca, mode: TlsMode, allow: &[&str], restart_fence: usize) -> Driver {
    let admission = Admission {
        allow: allow.iter().map(|n| n.parse().unwrap()).collect(),
        tls: Some(master_tls(ca, mode, &["replica-a", "replica-b"])),
        ..Admission::default()
    };
    let config = MasterServiceConfig { admission, ..MasterServiceConfig::default() };
    let mut d = MasterDriver::new(MasterConfig::default(), at(0), LogBounds { min: 0, max: 100 }).unwrap();
    d.set_admission(config.admission.clone());
    d.set_restart_fence(restart_fence);
    d
}

fn accept(d: &mut Driver, conn: u64, peer: &str) -> Sink {
    let sink = Sink::default();
    d.accept(at(0), ConnId(conn), addr(peer), sink.clone());
    let _ = d.drain();
    sink
}

fn negotiate(d: &mut Driver, conn: u64, link: Link) {
    d.negotiated(at(0), ConnId(conn), link);
    let _ = d.drain();
}

fn report(d: &mut Driver, conn: u64, offset: Offset) {
    d.received(at(0), ConnId(conn), Bytes::copy_from_slice(&encode_report(offset)));
    let _ = d.drain();
}

fn tls_link(ca: &Ca, name: &str) -> Link {
    let id = ca.issue(&[name]);
    Link::Tls { peer_certificates: vec![CertificateDer::from_pem_slice(id.cert.as_bytes()).unwrap()] }
}

fn status(d: &Driver) -> service::MasterStatus {
    d.status(at(0), logship_core::BrokerRole::SyncMaster, 0)
}

#[test]
fn a_tls_replica_counts_once_by_name_for_the_restart_fence() {
    let ca = Ca::new("ca");
    let mut d = driver(&ca, TlsMode::Required, &[], 2);
    // replica-a reports, leaves, comes back (from another address): one replica.
    for (conn, peer) in [(1, "10.0.0.7:4000"), (2, "10.0.0.9:4001")] {
        accept(&mut d, conn, peer);
        negotiate(&mut d, conn, tls_link(&ca, "replica-a"));
        report(&mut d, conn, 100);
        assert_eq!(d.fence(), Some(&Fence::Restart { waiting_for: 1 }));
        d.closed(at(0), ConnId(conn));
    }
    // Two TLS replicas on one loopback host are two, by name.
    accept(&mut d, 3, "127.0.0.1:5000");
    negotiate(&mut d, 3, tls_link(&ca, "replica-b"));
    report(&mut d, 3, 100);
    assert_eq!(d.fence(), None);
}

#[test]
fn bytes_before_negotiation_stream_nothing_and_a_plain_link_is_refused_when_tls_is_required() {
    let ca = Ca::new("ca");
    let mut d = driver(&ca, TlsMode::Required, &[], 0);
    let sink = accept(&mut d, 1, "10.0.0.7:4000");
    report(&mut d, 1, 0);
    assert_eq!(*sink.frames.borrow(), 0, "streamed before negotiation");
    assert!(status(&d).slaves.iter().all(|s| s.ack.is_none()));
    negotiate(&mut d, 1, Link::Plain);
    assert!(*sink.closed.borrow());
    report(&mut d, 1, 0);
    assert_eq!(*sink.frames.borrow(), 0, "a refused link streamed");
    let refusals = status(&d).refusals;
    assert_eq!(refusals.plain_refused, 1);
    assert!(refusals.last.unwrap().contains("TLS is required"));
}

#[test]
fn in_optional_mode_plain_links_follow_the_allow_list_and_tls_links_their_certificate() {
    let ca = Ca::new("ca");
    let mut d = driver(&ca, TlsMode::Optional, &["10.0.0.7"], 0);
    let outside = accept(&mut d, 1, "10.0.0.8:4000");
    negotiate(&mut d, 1, Link::Plain);
    assert!(*outside.closed.borrow(), "a plain link outside the allow-list");
    let listed = accept(&mut d, 2, "10.0.0.7:4000");
    negotiate(&mut d, 2, Link::Plain);
    report(&mut d, 2, 0);
    assert!(!*listed.closed.borrow());
    // A TLS replica from an address outside the list is admitted by its certificate.
    let tls = accept(&mut d, 3, "10.0.0.8:4001");
    negotiate(&mut d, 3, tls_link(&ca, "replica-b"));
    report(&mut d, 3, 0);
    assert!(!*tls.closed.borrow());
    let s = status(&d);
    let mut links: Vec<_> = s.slaves.iter().map(|l| (l.conn.0, l.trusted, l.identity.clone())).collect();
    links.sort();
    assert_eq!(links, [(2, true, None), (3, true, Some("replica-b".into()))]);
    assert_eq!(s.refusals.not_admitted, 1);
}

#[test]
fn failed_handshakes_foreign_and_unlisted_certificates_are_refused_and_counted() {
    let ca = Ca::new("ca");
    let mut d = driver(&ca, TlsMode::Optional, &[], 1);
    let failed = accept(&mut d, 1, "10.0.0.7:4000");
    negotiate(&mut d, 1, Link::TlsFailed { error: "peer sent no certificates".into() });
    let unlisted = accept(&mut d, 2, "10.0.0.7:4001");
    negotiate(&mut d, 2, tls_link(&ca, "replica-z"));
    let empty = accept(&mut d, 3, "10.0.0.7:4002");
    negotiate(&mut d, 3, Link::Tls { peer_certificates: Vec::new() });
    for (i, sink) in [failed, unlisted, empty].iter().enumerate() {
        assert!(*sink.closed.borrow(), "connection {} stayed open", i + 1);
        report(&mut d, i as u64 + 1, 100);
        assert_eq!(*sink.frames.borrow(), 0);
    }
    assert_eq!(status(&d).refusals.tls_refused, 3);
    assert_eq!(d.fence(), Some(&Fence::Restart { waiting_for: 1 }), "a refused link lifted the fence");
}

#[test]
fn a_restart_fence_is_valid_with_tls_alone() {
    let ca = Ca::new("ca");
    let admission =
        Admission { tls: Some(master_tls(&ca, TlsMode::Required, &["replica-a"])), ..Admission::default() };
    let config = MasterServiceConfig { restart_fence: 1, admission, ..MasterServiceConfig::default() };
    assert!(config.validate().is_ok());
}

fn accept_at(d: &mut Driver, now: u64, conn: u64, peer: &str) -> Sink {
    let sink = Sink::default();
    d.accept(at(now), ConnId(conn), addr(peer), sink.clone());
    let _ = d.drain();
    sink
}

fn report_at(d: &mut Driver, now: u64, conn: u64, offset: Offset) {
    d.received(at(now), ConnId(conn), Bytes::copy_from_slice(&encode_report(offset)));
    let _ = d.drain();
}

#[test]
fn a_tls_replica_reconnecting_from_another_address_supersedes_its_silent_connection() {
    let ca = Ca::new("ca");
    let mut d = driver(&ca, TlsMode::Optional, &[], 0);
    let old = accept_at(&mut d, 0, 1, "10.0.0.7:4000");
    negotiate(&mut d, 1, tls_link(&ca, "replica-a"));
    report_at(&mut d, 0, 1, 100);
    // Its machine moved (a new address); the old connection has been silent for 11 s, within
    // housekeeping (20 s) but past two heartbeats (10 s).
    // A plain stranger on the old address evicts nothing.
    let stranger = accept_at(&mut d, 11_000, 2, "10.0.0.7:4001");
    negotiate(&mut d, 2, Link::Plain);
    report_at(&mut d, 11_000, 2, 100);
    assert!(!*old.closed.borrow(), "a plain stranger evicted a TLS replica's connection");
    accept_at(&mut d, 11_000, 3, "10.0.0.9:4000");
    negotiate(&mut d, 3, tls_link(&ca, "replica-a"));
    report_at(&mut d, 11_000, 3, 100);
    assert!(*old.closed.borrow(), "the silent connection of the same replica stayed");
    assert!(!*stranger.closed.borrow());
}
