//! Strangers on the HA port, over real loopback sockets (issues 14 and 22): stray bytes,
//! slowloris connections, strangers outside the allow-list, fake slaves, and (in the default
//! configuration, where loopback replicas are identified) a replica holding bytes the master
//! lost.

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use async_net::TcpStream;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use logship_core::BrokerRole;
use logship_core::service::Admission;
use logship_core::service::{Fence, MasterServiceConfig, SlaveServiceConfig};
use logship_core::{AckPolicy, MasterConfig, PutStatus, SlaveConfig};
use support::*;

const HEARTBEAT: Duration = Duration::from_millis(100);
const HOUSEKEEPING: Duration = Duration::from_millis(600);

fn master_config(role: BrokerRole) -> MasterServiceConfig {
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
        ..MasterServiceConfig::default()
    }
}

fn slave_config(master: SocketAddr) -> SlaveServiceConfig {
    let mut c = SlaveServiceConfig::new(master.to_string());
    c.core = SlaveConfig {
        heartbeat_interval: HEARTBEAT,
        housekeeping_interval: HOUSEKEEPING,
        reconnect_interval: Duration::from_millis(100),
        ..SlaveConfig::default()
    };
    c
}

/// A connection to `addr` from the loopback address `from` (outside an allow-list of
/// 127.0.0.1), blocking, with a read timeout.
fn stranger_from(from: &str, addr: SocketAddr) -> std::net::TcpStream {
    let rt = tokio::runtime::Builder::new_current_thread().enable_io().build().unwrap();
    let stream = rt.block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        socket.connect(addr).await.unwrap()
    });
    let stream = stream.into_std().unwrap();
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
}

/// Reads until EOF; returns how many bytes came first (an error counts as EOF).
fn bytes_until_eof(stream: &mut std::net::TcpStream) -> usize {
    use std::io::Read;
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

fn only_127_0_0_1(mut config: MasterServiceConfig) -> MasterServiceConfig {
    config.admission = Admission::allow_list(vec!["127.0.0.1".parse().unwrap()]);
    config
}

/// Reads and discards until EOF or an error.
async fn read_until_closed(stream: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

const PROBES: [&[u8]; 4] = [
    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    // The start of a TLS ClientHello.
    b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",
    b"\r\n\r\n\r\n\r\n",
    b"*1\r\n$4\r\nPING\r\n",
];

fn stray_bytes_on_the_ha_port_never_stop_writes(side: Side) {
    run(async {
        let dir = temp();
        let store = open_store(dir.path());
        fill(&store, 0, 5, 100);
        let master = side.master(master_config(BrokerRole::AsyncMaster), store.clone()).await;
        for (i, probe) in PROBES.iter().enumerate() {
            let mut prober = TcpStream::connect(master.addr()).await.unwrap();
            prober.write_all(probe).await.unwrap();
            read_until_closed(&mut prober).await;
            let status = master.status().await;
            assert_eq!(status.fence, None, "{:?} fenced the master", String::from_utf8_lossy(probe));
            // Loopback peers are identified in the default configuration: their stray bytes
            // are no real offset (2^56 bytes or more past the end).
            assert_eq!(status.refusals.implausible_reports, i as u64 + 1, "refused and counted");
            assert_eq!(master.put(message(10 + i as u64, 100)).await.status, PutStatus::PutOk);
        }
        master.shutdown().await;
    });
}

fn slowloris_connections_do_not_outlive_housekeeping(side: Side) {
    run(async {
        let dir = temp();
        let store = open_store(dir.path());
        let master = side.master(master_config(BrokerRole::AsyncMaster), store.clone()).await;
        let addr: SocketAddr = master.addr();
        let mut conns = Vec::new();
        for _ in 0..20 {
            conns.push(Some(TcpStream::connect(addr).await.unwrap()));
        }
        // One byte per connection every third of the housekeeping interval: each byte is
        // progress of a sort, but no report ever completes in time.
        let trickle = [0u8; 64];
        // A generous bound on rounds, only so that a regression fails instead of hanging.
        for _ in 0..100 {
            for (i, slot) in conns.iter_mut().enumerate() {
                let Some(c) = slot else { continue };
                if c.write_all(&trickle[i % 8..i % 8 + 1]).await.is_err() {
                    *slot = None;
                }
            }
            if conns.iter().all(Option::is_none) {
                break;
            }
            sleep(HOUSEKEEPING / 3).await;
        }
        let open = conns.iter().filter(|c| c.is_some()).count();
        assert_eq!(open, 0, "slowloris connections still open after 100 rounds");
        master.shutdown().await;
    });
}

fn a_stranger_outside_the_allow_list_reads_nothing_and_counts_for_nothing(side: Side) {
    run(async {
        let dir = temp();
        let store = open_store(dir.path());
        fill(&store, 0, 50, 1_000);
        let master = side.master(only_127_0_0_1(master_config(BrokerRole::SyncMaster)), store.clone()).await;
        // A fake slave: reports 0, then acks everything it was never sent.
        let mut fake = stranger_from("127.0.0.5", master.addr());
        use std::io::Write;
        let _ = fake.write_all(&0u64.to_be_bytes());
        let _ = fake.write_all(&store.max_offset().to_be_bytes());
        assert_eq!(bytes_until_eof(&mut fake), 0, "the stranger read the log");
        assert_eq!(master.put(message(50, 100)).await.status, PutStatus::SlaveNotAvailable);
        let status = master.status().await;
        assert_eq!(status.refusals.not_admitted, 1);
        assert!(status.slaves.is_empty());
        master.shutdown().await;
    });
}

fn a_stalled_stranger_does_not_hold_all_in_sync_puts(master_side: Side, slave_side: Side) {
    run(async {
        let (mdir, sdir) = (temp(), temp());
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, 5, 100);
        let mut config = only_127_0_0_1(master_config(BrokerRole::SyncMaster));
        config.core.ack_policy = AckPolicy::AllInSync;
        let master = master_side.master(config, mstore.clone()).await;
        // The stranger reports the end and then stalls.
        let mut stalled = stranger_from("127.0.0.6", master.addr());
        use std::io::Write;
        let _ = stalled.write_all(&mstore.max_offset().to_be_bytes());
        let slave = slave_side.slave(slave_config(master.addr()), open_store(sdir.path())).await;
        eventually(Duration::from_secs(10), "the slave to catch up", || async {
            master.status().await.slaves.iter().any(|s| s.ack == Some(mstore.max_offset())).then_some(())
        })
        .await;
        for i in 0..5 {
            assert_eq!(master.put(message(5 + i, 100)).await.status, PutStatus::PutOk);
        }
        assert_eq!(bytes_until_eof(&mut stalled), 0);
        slave.shutdown().await;
        master.shutdown().await;
    });
}

fn a_stranger_and_a_reconnecting_slave_do_not_lift_the_restart_fence(master_side: Side, slave_side: Side) {
    run(async {
        let (mdir, sdir, sdir2) = (temp(), temp(), temp());
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, 5, 100);
        let mut config = only_127_0_0_1(master_config(BrokerRole::SyncMaster));
        config.restart_fence = 2;
        let master = master_side.master(config, mstore.clone()).await;
        let mut stranger = stranger_from("127.0.0.5", master.addr());
        use std::io::Write;
        let _ = stranger.write_all(&[0; 8]);
        assert_eq!(bytes_until_eof(&mut stranger), 0);
        // One slave reports, goes away, comes back and reports again: still one replica.
        let sstore = open_store(sdir.path());
        for _ in 0..2 {
            let slave = slave_side.slave(slave_config(master.addr()), sstore.clone()).await;
            eventually(Duration::from_secs(10), "the slave to report", || async {
                master.status().await.slaves.iter().any(|s| s.ack.is_some()).then_some(())
            })
            .await;
            slave.shutdown().await;
            eventually(Duration::from_secs(10), "the slave to leave", || async {
                master.status().await.slaves.is_empty().then_some(())
            })
            .await;
        }
        let status = master.status().await;
        assert!(matches!(status.fence, Some(Fence::Restart { waiting_for: 2 })), "{:?}", status.fence);
        assert_eq!(master.put(message(5, 100)).await.status, PutStatus::ServiceNotAvailable);
        // Two slaves connected at once are two replicas.
        let a = slave_side.slave(slave_config(master.addr()), sstore.clone()).await;
        let b = slave_side.slave(slave_config(master.addr()), open_store(sdir2.path())).await;
        eventually(Duration::from_secs(10), "the fence to lift", || async {
            master.status().await.fence.is_none().then_some(())
        })
        .await;
        assert_eq!(master.put(message(5, 100)).await.status, PutStatus::PutOk);
        a.shutdown().await;
        b.shutdown().await;
        master.shutdown().await;
    });
}

fn a_slave_whose_log_ends_inside_a_master_record_is_refused_and_keeps_its_store(
    master_side: Side,
    slave_side: Side,
) {
    run(async {
        let (mdir, sdir) = (temp(), temp());
        // The slave holds another history: three records of one size, where the master's log
        // (which lost its tail and took other puts since) has records of another size.
        let sstore = open_store(sdir.path());
        fill(&sstore, 0, 3, 100);
        let slave_end = sstore.max_offset();
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, 10, 170);
        assert!(slave_end < mstore.max_offset() && !mstore.is_record_boundary(slave_end).unwrap());
        let master =
            master_side.master(only_127_0_0_1(master_config(BrokerRole::AsyncMaster)), mstore.clone()).await;
        let slave = slave_side.slave(slave_config(master.addr()), sstore.clone()).await;
        eventually(Duration::from_secs(10), "the master to refuse the slave", || async {
            master.status().await.fence.is_some().then_some(())
        })
        .await;
        let status = master.status().await;
        assert!(
            matches!(status.fence, Some(Fence::NotOnRecordBoundary { reported, .. }) if reported == slave_end),
            "{:?}",
            status.fence
        );
        assert!(status.refusals.diverged >= 1);
        assert_eq!(master.put(message(10, 100)).await.status, PutStatus::ServiceNotAvailable);
        slave.shutdown().await;
        drop(slave);
        assert_eq!(sstore.max_offset(), slave_end, "the slave stored nothing from the master");
        drop(sstore);
        // The slave's task lets go of its store handle soon after shutdown.
        let reopened = eventually(Duration::from_secs(10), "the slave's store to open", || async {
            CommitLog::open(sdir.path(), store_config()).ok()
        })
        .await;
        assert_eq!(reopened.max_offset(), slave_end, "and its store still opens");
        master.shutdown().await;
    });
}

/// Old #16 under the trust model: in the default configuration (protected mode, loopback
/// replicas identified) the master lost its unflushed tail, and the slave that returns holds 5
/// PUT_OK messages the master no longer has. It fences the master (puts get
/// SERVICE_NOT_AVAILABLE) instead of a WARN while the master keeps answering.
fn a_loopback_slave_holding_the_masters_lost_tail_fences_it_by_default(master_side: Side, slave_side: Side) {
    run(async {
        let (mdir, sdir) = (temp(), temp());
        let sstore = open_store(sdir.path());
        fill(&sstore, 0, 15, 100);
        let slave_end = sstore.max_offset();
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, 10, 100);
        let master_end = mstore.max_offset();
        assert!(slave_end > master_end);
        let master = master_side.master(master_config(BrokerRole::SyncMaster), mstore.clone()).await;
        let slave = slave_side.slave(slave_config(master.addr()), sstore.clone()).await;
        eventually(Duration::from_secs(10), "the master to fence", || async {
            master.status().await.fence.is_some().then_some(())
        })
        .await;
        let status = master.status().await;
        assert!(
            matches!(status.fence, Some(Fence::Diverged { reported, end, .. }) if reported == slave_end && end == master_end),
            "{:?}",
            status.fence
        );
        assert_eq!(master.put(message(10, 100)).await.status, PutStatus::ServiceNotAvailable);
        assert_eq!(mstore.max_offset(), master_end, "nothing appended over the slave's bytes");
        slave.shutdown().await;
        assert_eq!(sstore.max_offset(), slave_end, "the slave keeps the messages");
        master.shutdown().await;
    });
}

/// A fake master: accepts the slave, reads its first report, then runs `act`.
async fn fake_master(side: &Side, act: impl AsyncFnOnce(&mut TcpStream, &CommitLog)) {
    let sdir = temp();
    let listener = async_net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sstore = open_store(sdir.path());
    let slave = side.slave(slave_config(listener.local_addr().unwrap()), sstore.clone()).await;
    let (mut conn, _) = listener.accept().await.unwrap();
    let mut first = [0u8; 8];
    conn.read_exact(&mut first).await.unwrap();
    act(&mut conn, &sstore).await;
    slave.shutdown().await;
}

fn a_master_trickling_a_frame_body_cannot_hold_the_slave(side: Side) {
    run(fake_master(&side, async |conn, _| {
        let header = logship_core::classic::frame::PushHeader { offset: 0, body_len: 1_000 }.encode();
        conn.write_all(&header).await.unwrap();
        let mut closed = false;
        // A generous bound on rounds, only so that a regression fails instead of hanging.
        for _ in 0..100 {
            if conn.write_all(b"x").await.is_err() {
                closed = true;
                break;
            }
            sleep(HOUSEKEEPING / 3).await;
        }
        assert!(closed, "a trickled frame body held the slave for 100 rounds");
    }));
}

fn an_empty_slave_refuses_an_absurd_first_offset(side: Side) {
    run(fake_master(&side, async |conn, sstore| {
        let header =
            logship_core::classic::frame::PushHeader { offset: (1 << 62) + 12_345, body_len: 3 }.encode();
        conn.write_all(&header).await.unwrap();
        conn.write_all(b"abc").await.unwrap();
        read_until_closed(conn).await;
        assert_eq!(sstore.max_offset(), 0, "adopted the offset");
    }));
}

on_each_runtime!(
    a_master_trickling_a_frame_body_cannot_hold_the_slave,
    an_empty_slave_refuses_an_absurd_first_offset,
);

on_every_runtime!(
    a_stranger_and_a_reconnecting_slave_do_not_lift_the_restart_fence,
    a_slave_whose_log_ends_inside_a_master_record_is_refused_and_keeps_its_store,
);

on_each_runtime!(
    stray_bytes_on_the_ha_port_never_stop_writes,
    slowloris_connections_do_not_outlive_housekeeping,
    a_stranger_outside_the_allow_list_reads_nothing_and_counts_for_nothing,
);

on_every_runtime!(
    a_stalled_stranger_does_not_hold_all_in_sync_puts,
    a_loopback_slave_holding_the_masters_lost_tail_fences_it_by_default,
);
