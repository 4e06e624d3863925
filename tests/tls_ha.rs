//! Authenticated HA links over real loopback sockets (issue 14): mutual TLS between logship
//! peers, negotiated on the classic HA port so classic plain peers still connect where allowed.

mod support;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use logship_core::BrokerRole;
use logship_core::service::Admission;
use logship_core::service::tls::{SlaveTls, TlsMode, rustls};
use logship_core::service::{Fence, MasterServiceConfig, SlaveServiceConfig};
use logship_core::{AckPolicy, MasterConfig, PutStatus, SlaveConfig};
use support::pki::{Ca, MASTER_NAME, master_tls, slave_tls};
use support::*;

const HEARTBEAT: Duration = Duration::from_millis(100);
const HOUSEKEEPING: Duration = Duration::from_millis(600);
const LIMIT: Duration = Duration::from_secs(10);

fn master_config(role: BrokerRole, admission: Admission) -> MasterServiceConfig {
    MasterServiceConfig {
        core: MasterConfig {
            mapped_file_size_commit_log: SEGMENT,
            heartbeat_interval: HEARTBEAT,
            housekeeping_interval: HOUSEKEEPING,
            ack_policy: AckPolicy::AnySlave,
            ..MasterConfig::default()
        },
        role,
        slave_timeout: Duration::from_millis(800),
        admission,
        ..MasterServiceConfig::default()
    }
}

fn tls_admission(ca: &Ca, mode: TlsMode) -> Admission {
    Admission { tls: Some(master_tls(ca, mode, &["replica-a", "replica-b"])), ..Admission::default() }
}

fn slave_config(master: SocketAddr, tls: Option<SlaveTls>) -> SlaveServiceConfig {
    let mut c = SlaveServiceConfig::new(master.to_string());
    c.core = SlaveConfig {
        heartbeat_interval: HEARTBEAT,
        housekeeping_interval: HOUSEKEEPING,
        reconnect_interval: Duration::from_millis(100),
        ..SlaveConfig::default()
    };
    c.tls = tls;
    c
}

/// Reads until EOF or an error; how many bytes came first.
fn bytes_until_eof(stream: &mut impl std::io::Read) -> usize {
    let mut total = 0;
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return total,
            Ok(n) => total += n,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                panic!("the master kept a refused connection open")
            }
            Err(_) => return total,
        }
    }
}

fn blocking_connect(addr: SocketAddr) -> std::net::TcpStream {
    let stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(LIMIT)).unwrap();
    stream
}

/// A TLS client that trusts the master's CA but presents no certificate, sends a report of
/// 0 and reads what comes back.
fn log_bytes_read_by_a_client_without_a_certificate(addr: SocketAddr, ca: &Ca) -> usize {
    use std::io::Write;
    let mut roots = rustls::RootCertStore::empty();
    let ca_der = rustls::pki_types::CertificateDer::from_pem_slice(ca.pem().as_bytes()).unwrap();
    roots.add(ca_der).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from(MASTER_NAME).unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, blocking_connect(addr));
    if tls.write_all(&0u64.to_be_bytes()).and_then(|()| tls.flush()).is_err() {
        return 0;
    }
    bytes_until_eof(&mut tls)
}

use rustls::pki_types::pem::PemObject;

fn a_tls_slave_with_a_listed_certificate_is_trusted(master_side: Side, slave_side: Side) {
    run(async {
        let (mdir, sdir) = (temp(), temp());
        let ca = Ca::new("logship test CA");
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, 20, 500);
        let mut config = master_config(BrokerRole::SyncMaster, tls_admission(&ca, TlsMode::Required));
        config.restart_fence = 1;
        let master = master_side.master(config, mstore.clone()).await;
        assert!(matches!(master.status().await.fence, Some(Fence::Restart { waiting_for: 1 })));
        let sstore = open_store(sdir.path());
        let tls = slave_tls(&ca, "replica-a", &ca);
        let slave = slave_side.slave(slave_config(master.addr(), Some(tls)), sstore.clone()).await;
        // It reads the log and lifts the restart fence.
        caught_up(&mstore, &sstore).await;
        eventually(LIMIT, "the fence to lift", || async {
            master.status().await.fence.is_none().then_some(())
        })
        .await;
        // It counts for SYNC puts.
        for i in 0..3 {
            assert_eq!(master.put(message(20 + i, 500)).await.status, PutStatus::PutOk);
        }
        caught_up(&mstore, &sstore).await;
        let status = master.status().await;
        assert_eq!(status.slaves.len(), 1);
        assert!(status.slaves[0].trusted);
        assert_eq!(status.slaves[0].identity.as_deref(), Some("replica-a"));
        slave.shutdown().await;
        master.shutdown().await;
    });
}

fn refused_tls_clients_read_nothing_and_count_for_nothing(master_side: Side, slave_side: Side) {
    run(async {
        let ca = Ca::new("logship test CA");
        let other_ca = Ca::new("another CA");
        let mdir = temp();
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, 20, 500);
        for restart_fence in [0, 1] {
            let mut config = master_config(BrokerRole::SyncMaster, tls_admission(&ca, TlsMode::Optional));
            config.restart_fence = restart_fence;
            let master = master_side.master(config, mstore.clone()).await;
            // No client certificate.
            assert_eq!(log_bytes_read_by_a_client_without_a_certificate(master.addr(), &ca), 0);
            // A certificate from another CA, and one from the right CA for an unlisted name.
            let (d1, d2) = (temp(), temp());
            let (s1, s2) = (open_store(d1.path()), open_store(d2.path()));
            let foreign = slave_tls(&other_ca, "replica-a", &ca);
            let unlisted = slave_tls(&ca, "replica-z", &ca);
            let a = slave_side.slave(slave_config(master.addr(), Some(foreign)), s1.clone()).await;
            let b = slave_side.slave(slave_config(master.addr(), Some(unlisted)), s2.clone()).await;
            eventually(LIMIT, "each client to be refused twice", || async {
                (master.status().await.refusals.tls_refused >= 5).then_some(())
            })
            .await;
            let status = master.status().await;
            assert!(status.slaves.is_empty(), "{:?}", status.slaves);
            if restart_fence == 1 {
                assert!(
                    matches!(status.fence, Some(Fence::Restart { waiting_for: 1 })),
                    "{:?}",
                    status.fence
                );
            } else {
                assert_eq!(status.fence, None);
                assert_eq!(master.put(message(20, 500)).await.status, PutStatus::SlaveNotAvailable);
            }
            assert!(status.refusals.last.is_some());
            a.shutdown().await;
            b.shutdown().await;
            assert_eq!((s1.max_offset(), s2.max_offset()), (0, 0), "a refused client read the log");
            master.shutdown().await;
        }
    });
}

fn in_required_mode_a_plain_stranger_reads_nothing(master_side: Side, slave_side: Side) {
    run(async {
        let ca = Ca::new("logship test CA");
        let (mdir, sdir) = (temp(), temp());
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, 20, 500);
        let master = master_side
            .master(
                master_config(BrokerRole::SyncMaster, tls_admission(&ca, TlsMode::Required)),
                mstore.clone(),
            )
            .await;
        let mut stranger = blocking_connect(master.addr());
        use std::io::Write;
        stranger.write_all(&0u64.to_be_bytes()).unwrap();
        assert_eq!(bytes_until_eof(&mut stranger), 0, "the stranger read the log");
        // A classic plain slave is refused the same way.
        let sstore = open_store(sdir.path());
        let classic = slave_side.slave(slave_config(master.addr(), None), sstore.clone()).await;
        eventually(LIMIT, "the plain slave to be refused", || async {
            (master.status().await.refusals.plain_refused >= 2).then_some(())
        })
        .await;
        assert!(master.status().await.slaves.is_empty());
        assert_eq!(master.put(message(20, 500)).await.status, PutStatus::SlaveNotAvailable);
        classic.shutdown().await;
        assert_eq!(sstore.max_offset(), 0);
        master.shutdown().await;
    });
}

fn in_optional_mode_a_plain_classic_slave_still_replicates(master_side: Side, slave_side: Side) {
    run(async {
        let ca = Ca::new("logship test CA");
        let (mdir, plain_dir, tls_dir) = (temp(), temp(), temp());
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, 20, 500);
        let master = master_side
            .master(
                master_config(BrokerRole::SyncMaster, tls_admission(&ca, TlsMode::Optional)),
                mstore.clone(),
            )
            .await;
        let plain_store = open_store(plain_dir.path());
        let plain = slave_side.slave(slave_config(master.addr(), None), plain_store.clone()).await;
        caught_up(&mstore, &plain_store).await;
        // Without an allow-list a plain link is a stranger (loopback too, once TLS is
        // configured): it replicates, but its acks count for nothing.
        assert_eq!(master.put(message(20, 500)).await.status, PutStatus::SlaveNotAvailable);
        caught_up(&mstore, &plain_store).await;
        // A TLS replica alongside it counts.
        let tls_store = open_store(tls_dir.path());
        let tls = slave_tls(&ca, "replica-b", &ca);
        let secure = slave_side.slave(slave_config(master.addr(), Some(tls)), tls_store.clone()).await;
        caught_up(&mstore, &tls_store).await;
        assert_eq!(master.put(message(21, 500)).await.status, PutStatus::PutOk);
        caught_up(&mstore, &plain_store).await;
        let status = master.status().await;
        let mut links: Vec<_> =
            status.slaves.iter().map(|s| (s.identity.clone(), s.trusted, s.counted)).collect();
        links.sort();
        assert_eq!(links, [(None, false, false), (Some("replica-b".into()), true, true)]);
        plain.shutdown().await;
        secure.shutdown().await;
        master.shutdown().await;
    });
}

fn a_tls_slave_against_a_plain_master_is_refused_without_fencing(master_side: Side, slave_side: Side) {
    run(async {
        let ca = Ca::new("logship test CA");
        let (mdir, sdir) = (temp(), temp());
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, 5, 100);
        // haTlsMode=off, and the slave's address is allow-listed (trusted): its ClientHello is
        // read as a report past the end, which from a trusted replica would fence.
        let admission = Admission::allow_list(vec!["127.0.0.1".parse().unwrap()]);
        let master =
            master_side.master(master_config(BrokerRole::AsyncMaster, admission), mstore.clone()).await;
        let sstore = open_store(sdir.path());
        let tls = slave_tls(&ca, "replica-a", &ca);
        let slave = slave_side.slave(slave_config(master.addr(), Some(tls)), sstore.clone()).await;
        eventually(LIMIT, "the ClientHello to be refused", || async {
            (master.status().await.refusals.implausible_reports >= 1).then_some(())
        })
        .await;
        let status = master.status().await;
        assert_eq!(status.fence, None, "a ClientHello fenced the master");
        assert!(status.slaves.is_empty() || status.slaves.iter().all(|s| s.ack.is_none()));
        assert_eq!(master.put(message(5, 100)).await.status, PutStatus::PutOk);
        slave.shutdown().await;
        assert_eq!(sstore.max_offset(), 0);
        master.shutdown().await;
    });
}

on_every_runtime!(
    a_tls_slave_with_a_listed_certificate_is_trusted,
    refused_tls_clients_read_nothing_and_count_for_nothing,
    in_required_mode_a_plain_stranger_reads_nothing,
    in_optional_mode_a_plain_classic_slave_still_replicates,
    a_tls_slave_against_a_plain_master_is_refused_without_fencing,
);
