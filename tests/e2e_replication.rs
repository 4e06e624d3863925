//! Replication over real loopback sockets with the real store, each scenario written once and
//! run on tokio, smol and async-std, and across runtimes (a tokio master with a smol slave, and
//! the reverse). Raw-socket test peers stand in for a misbehaving master or slave.

mod support;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use async_net::{TcpListener, TcpStream};
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use logship_core::BrokerRole;
use logship_core::classic::SlaveState;
use logship_core::service::{MasterServiceConfig, SlaveServiceConfig};
use logship_core::{AckPolicy, MasterConfig, NewSlaveStart, PutStatus, SlaveConfig};
use support::*;

const HEARTBEAT: Duration = Duration::from_millis(100);
const HOUSEKEEPING: Duration = Duration::from_millis(600);

fn master_config(role: BrokerRole, policy: AckPolicy) -> MasterServiceConfig {
    MasterServiceConfig {
        core: MasterConfig {
            mapped_file_size_commit_log: SEGMENT,
            heartbeat_interval: HEARTBEAT,
            housekeeping_interval: HOUSEKEEPING,
            ack_policy: policy,
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
    c.connect_timeout = Duration::from_secs(2);
    c
}

async fn wait_for_slaves<L: logship_core::MessageLog>(master: &AnyMaster<L>, count: usize) {
    eventually(Duration::from_secs(10), "slaves to report", || async {
        (master.status().await.slaves.iter().filter(|s| s.ack.is_some()).count() == count).then_some(())
    })
    .await;
}

fn report(offset: u64) -> [u8; 8] {
    offset.to_be_bytes()
}

async fn read_report(stream: &mut TcpStream) -> u64 {
    let mut buf = [0u8; 8];
    stream.read_exact(&mut buf).await.unwrap();
    u64::from_be_bytes(buf)
}

/// Reads and discards until EOF or an error; returns when the peer closed.
async fn read_until_closed(stream: &mut TcpStream) {
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
}

/// A master and one empty slave, each on its side, with their stores and directories.
struct Pair {
    master: AnyMaster<CommitLog>,
    slave: AnySlave,
    mstore: std::sync::Arc<CommitLog>,
    sstore: std::sync::Arc<CommitLog>,
    // Last: the stores close before their directories go.
    mdir: tempfile::TempDir,
    sdir: tempfile::TempDir,
}

impl Pair {
    /// Fills the master's store with `count` messages of `size` bytes, starts the master with
    /// `config`, then starts the slave with `slave_config` changed by `tweak`.
    async fn start(
        master_side: &Side,
        slave_side: &Side,
        config: MasterServiceConfig,
        (count, size): (u64, usize),
        tweak: impl FnOnce(&mut SlaveServiceConfig),
    ) -> Self {
        let (mdir, sdir) = (temp(), temp());
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, count, size);
        let master = master_side.master(config, mstore.clone()).await;
        let sstore = open_store(sdir.path());
        let mut sc = slave_config(master.addr());
        tweak(&mut sc);
        let slave = slave_side.slave(sc, sstore.clone()).await;
        Self { master, slave, mstore, sstore, mdir, sdir }
    }

    async fn stop(&self) {
        self.slave.shutdown().await;
        self.master.shutdown().await;
    }
}

fn async_master() -> MasterServiceConfig {
    master_config(BrokerRole::AsyncMaster, AckPolicy::AnySlave)
}

// ---- catch-up ---------------------------------------------------------------------------

fn empty_slave_catches_up_the_whole_log_by_default(master_side: Side, slave_side: Side) {
    run(async {
        // About four 64 KiB segments.
        let p = Pair::start(&master_side, &slave_side, async_master(), (220, 1000), |_| {}).await;
        caught_up(&p.mstore, &p.sstore).await;
        assert_eq!(p.sstore.min_offset(), 0, "Earliest replicates from the master's first byte");
        assert_same_segments(p.mdir.path(), p.sdir.path(), 0, p.mstore.max_offset());
        eventually(Duration::from_secs(5), "the slave's consume queue", || async {
            (p.sstore.queue_bounds("E2eTopic", 1).1 == 55).then_some(())
        })
        .await;
        let read = p.sstore.read_queue_messages("E2eTopic", 1, 0, 100).unwrap();
        assert_eq!(read.len(), 55);
        assert_eq!(read[0].body, message(1, 1000).body);
        p.stop().await;
    });
}

fn empty_slave_starts_at_the_last_file_with_last_file_policy(master_side: Side, slave_side: Side) {
    run(async {
        let mut config = async_master();
        config.core.new_slave_start = NewSlaveStart::LastFile;
        let p = Pair::start(&master_side, &slave_side, config, (220, 1000), |_| {}).await;
        caught_up(&p.mstore, &p.sstore).await;
        let end = p.mstore.max_offset();
        let last_file = end - end % SEGMENT;
        assert!(last_file > 0);
        assert_eq!(p.sstore.min_offset(), last_file, "RocketMQ's rule: start at the last file");
        assert_same_segments(p.mdir.path(), p.sdir.path(), last_file, end);
        p.stop().await;
    });
}

// ---- restarts ---------------------------------------------------------------------------

fn slave_resumes_after_a_clean_restart(master_side: Side, slave_side: Side) {
    run(async {
        let Pair { master, slave, mstore, sstore, mdir, sdir } =
            Pair::start(&master_side, &slave_side, async_master(), (50, 700), |_| {}).await;
        caught_up(&mstore, &sstore).await;
        slave.shutdown().await;
        close_store(sstore, false).await;
        for i in 50..150 {
            assert_eq!(master.put(message(i, 700)).await.status, PutStatus::PutOk);
        }
        let sstore = open_store(sdir.path());
        let restarted = slave_side.fresh();
        let slave = restarted.slave(slave_config(master.addr()), sstore.clone()).await;
        caught_up(&mstore, &sstore).await;
        assert_same_segments(mdir.path(), sdir.path(), 0, mstore.max_offset());
        slave.shutdown().await;
        master.shutdown().await;
    });
}

/// A relay on loopback in front of `upstream` for one connection: it passes everything the slave
/// sends, and the first `budget` bytes the master sends, then stops reading from the master. A
/// slave behind it holds part of the log however late the test looks, so "mid-stream" does not
/// depend on the scheduler.
fn stalling_relay(upstream: SocketAddr, budget: usize) -> SocketAddr {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let Ok((down, _)) = listener.accept() else { return };
        let Ok(up) = std::net::TcpStream::connect(upstream) else { return };
        let (mut from_master, mut to_slave) = (up.try_clone().unwrap(), down.try_clone().unwrap());
        // When the budget is spent this thread ends; the other one holds the connection open
        // until the slave goes away.
        std::thread::spawn(move || {
            let mut left = budget;
            let mut buf = vec![0u8; 64 * 1024];
            while left > 0 {
                let want = buf.len().min(left);
                match from_master.read(&mut buf[..want]) {
                    Ok(0) | Err(_) => return,
                    Ok(n) if to_slave.write_all(&buf[..n]).is_ok() => left -= n,
                    Ok(_) => return,
                }
            }
        });
        let (mut from_slave, mut to_master) = (down, up);
        let _ = std::io::copy(&mut from_slave, &mut to_master);
    });
    address
}

fn slave_resumes_after_its_state_is_dropped_mid_stream(master_side: Side, slave_side: Side) {
    run(async {
        let mut config = async_master();
        config.core.transfer_batch_size = 4096;
        // ~4 MB in 4 KiB frames, of which the first slave gets 1 MiB through the relay.
        // Keep the first slave's handle: dropping it would stop the slave cleanly.
        let Pair { master, slave: _first, mstore, sstore, mdir, sdir } =
            Pair::start(&master_side, &slave_side, config, (4_000, 1000), |c| {
                let upstream = c.master_address.parse().unwrap();
                c.master_address = stalling_relay(upstream, 1 << 20).to_string();
            })
            .await;
        let end = mstore.max_offset();
        let started = Instant::now();
        while sstore.max_offset() == 0 {
            assert!(started.elapsed() < Duration::from_secs(20), "replication never started");
            sleep(Duration::from_millis(1)).await;
        }
        slave_side.kill().await;
        close_store(sstore, true).await;
        let sstore = open_store(sdir.path());
        assert!(sstore.max_offset() < end, "stopped mid-stream");
        let restarted = slave_side.fresh();
        let slave = restarted.slave(slave_config(master.addr()), sstore.clone()).await;
        caught_up(&mstore, &sstore).await;
        assert_same_segments(mdir.path(), sdir.path(), 0, end);
        slave.shutdown().await;
        master.shutdown().await;
    });
}

fn slave_resumes_after_the_master_restarts(master_side: Side, slave_side: Side) {
    run(async {
        let Pair { master, slave, mstore, sstore, mdir, sdir } =
            Pair::start(&master_side, &slave_side, async_master(), (60, 900), |_| {}).await;
        let address = master.addr();
        caught_up(&mstore, &sstore).await;
        master.shutdown().await;
        drop(master);
        close_store(mstore, false).await;
        let mstore = open_store(mdir.path());
        let restarted = master_side.fresh();
        let master = restarted.master_on(async_master(), mstore.clone(), address).await;
        for i in 60..120 {
            assert_eq!(master.put(message(i, 900)).await.status, PutStatus::PutOk);
        }
        caught_up(&mstore, &sstore).await;
        assert_same_segments(mdir.path(), sdir.path(), 0, mstore.max_offset());
        assert!(slave.status().await.connections >= 2, "the slave reconnected");
        slave.shutdown().await;
        master.shutdown().await;
    });
}

// ---- misbehaving peers ------------------------------------------------------------------

fn slave_refuses_a_frame_at_the_wrong_offset(side: Side) {
    run(async {
        let sdir = temp();
        let sstore = open_store(sdir.path());
        fill(&sstore, 0, 10, 100);
        let end = sstore.max_offset();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let slave = side.slave(slave_config(listener.local_addr().unwrap()), sstore.clone()).await;
        let (mut peer, _) = listener.accept().await.unwrap();
        assert_eq!(read_report(&mut peer).await, end, "the first report is the slave's end");
        let mut frame = (end + 100).to_be_bytes().to_vec();
        frame.extend(5u32.to_be_bytes());
        frame.extend(b"bogus");
        peer.write_all(&frame).await.unwrap();
        read_until_closed(&mut peer).await;
        assert_eq!(sstore.max_offset(), end, "nothing appended");
        // It reconnects after the back-off and reports the same end.
        let (mut again, _) = listener.accept().await.unwrap();
        assert_eq!(read_report(&mut again).await, end);
        assert_eq!(slave.status().await.peer_errors, 1);
        slave.shutdown().await;
    });
}

fn master_closes_a_forged_ack_and_releases_no_waiter(side: Side) {
    run(async {
        let mdir = temp();
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, 10, 100);
        let end = mstore.max_offset();
        let master =
            side.master(master_config(BrokerRole::SyncMaster, AckPolicy::AnySlave), mstore.clone()).await;
        let mut intruder = TcpStream::connect(master.addr()).await.unwrap();
        intruder.write_all(&report(end)).await.unwrap();
        wait_for_slaves(&master, 1).await;
        let put = master.put(message(10, 100));
        let forge = async {
            async_io::Timer::after(Duration::from_millis(50)).await;
            intruder.write_all(&report(end + 1_000_000)).await.unwrap();
            read_until_closed(&mut intruder).await;
        };
        let (result, ()) = futures_lite::future::zip(put, forge).await;
        assert_eq!(result.status, PutStatus::FlushSlaveTimeout, "a forged ack must not release the put");
        let status = master.status().await;
        assert!(status.slaves.is_empty());
        assert_eq!(status.peer_errors, 1);
        master.shutdown().await;
    });
}

fn master_refuses_puts_once_a_trusted_slave_is_ahead_of_it(side: Side) {
    run(async {
        let mdir = temp();
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, 10, 100);
        let end = mstore.max_offset();
        // Only an allow-listed replica is trusted to fence the master.
        let mut config = master_config(BrokerRole::AsyncMaster, AckPolicy::AnySlave);
        config.admission = logship_core::service::Admission::allow_list(vec!["127.0.0.1".parse().unwrap()]);
        let master = side.master(config, mstore.clone()).await;
        assert_eq!(master.put(message(10, 100)).await.status, PutStatus::PutOk);
        // A slave that kept bytes this master lost (a crash took the master's unflushed tail).
        let mut ahead = TcpStream::connect(master.addr()).await.unwrap();
        ahead.write_all(&report(end + 5_000)).await.unwrap();
        read_until_closed(&mut ahead).await;
        let status = master.status().await;
        assert!(
            matches!(status.fence, Some(logship_core::service::Fence::Diverged { reported, .. }) if reported == end + 5_000)
        );
        // Appending now would put different bytes at offsets the slave already holds.
        let before = mstore.max_offset();
        assert_eq!(master.put(message(11, 100)).await.status, PutStatus::ServiceNotAvailable);
        assert_eq!(mstore.max_offset(), before, "nothing appended");
        master.shutdown().await;
    });
}

fn restarted_master_takes_puts_once_its_slaves_report(master_side: Side, slave_side: Side) {
    run(async {
        let (mdir, sdir) = (temp(), temp());
        let mstore = open_store(mdir.path());
        let mut config = master_config(BrokerRole::SyncMaster, AckPolicy::AnySlave);
        config.restart_fence = 1;
        config.admission = logship_core::service::Admission::allow_list(vec!["127.0.0.1".parse().unwrap()]);
        let master = master_side.master(config, mstore.clone()).await;
        assert_eq!(master.put(message(0, 100)).await.status, PutStatus::ServiceNotAvailable, "fenced");
        let slave = slave_side.slave(slave_config(master.addr()), open_store(sdir.path())).await;
        eventually(Duration::from_secs(10), "the fence to lift", || async {
            master.status().await.fence.is_none().then_some(())
        })
        .await;
        assert_eq!(master.put(message(0, 100)).await.status, PutStatus::PutOk);
        slave.shutdown().await;
        master.shutdown().await;
    });
}

// ---- SYNC puts --------------------------------------------------------------------------

fn sync_put_is_put_ok_once_the_slave_acknowledges(master_side: Side, slave_side: Side) {
    run(async {
        let config = master_config(BrokerRole::SyncMaster, AckPolicy::AnySlave);
        let p = Pair::start(&master_side, &slave_side, config, (0, 0), |_| {}).await;
        wait_for_slaves(&p.master, 1).await;
        for i in 0..100 {
            let r = p.master.put(message(i, 500)).await;
            // The master flushes asynchronously: the replication wait does not depend on it.
            assert_eq!(r.status, PutStatus::PutOk);
            assert!(p.sstore.max_offset() >= r.end(), "PutOk only once the slave holds the message");
        }
        p.stop().await;
    });
}

fn sync_put_times_out_when_the_slave_stalls(side: Side) {
    run(async {
        let mdir = temp();
        let mstore = open_store(mdir.path());
        let mut config = master_config(BrokerRole::SyncMaster, AckPolicy::AnySlave);
        config.core.housekeeping_interval = Duration::from_secs(10);
        let master = side.master(config, mstore.clone()).await;
        // A slave that reports once and then stops reading and acknowledging.
        let mut stalled = TcpStream::connect(master.addr()).await.unwrap();
        stalled.write_all(&report(0)).await.unwrap();
        wait_for_slaves(&master, 1).await;
        let started = Instant::now();
        let r = master.put(message(0, 100)).await;
        assert_eq!(r.status, PutStatus::FlushSlaveTimeout);
        assert!(started.elapsed() >= Duration::from_millis(800), "waited the whole slave_timeout");
        assert_eq!(mstore.read_message(r.offset).unwrap().body, message(0, 100).body, "stored on the master");
        master.shutdown().await;
    });
}

fn sync_put_is_slave_not_available_without_a_slave_or_beyond_the_gap(side: Side) {
    run(async {
        let mdir = temp();
        let mstore = open_store(mdir.path());
        fill(&mstore, 0, 20, 1000);
        let mut config = master_config(BrokerRole::SyncMaster, AckPolicy::AnySlave);
        config.core.ha_max_gap_not_in_sync = 4096;
        config.core.housekeeping_interval = Duration::from_secs(10);
        let master = side.master(config, mstore.clone()).await;
        assert_eq!(master.put(message(20, 100)).await.status, PutStatus::SlaveNotAvailable, "no slave");
        // A slave that is ~20 KB behind, with a gap limit of 4 KiB.
        let mut behind = TcpStream::connect(master.addr()).await.unwrap();
        behind.write_all(&report(0)).await.unwrap();
        wait_for_slaves(&master, 1).await;
        assert_eq!(master.put(message(21, 100)).await.status, PutStatus::SlaveNotAvailable, "gap too large");
        drop(behind);
        master.shutdown().await;
    });
}

fn quorum_of_three_needs_both_slaves(master_side: Side, slave_side: Side) {
    run(async {
        let (mdir, s1dir, s2dir) = (temp(), temp(), temp());
        let mstore = open_store(mdir.path());
        let policy = AckPolicy::Quorum { in_sync_replicas: 3 };
        let master = master_side.master(master_config(BrokerRole::SyncMaster, policy), mstore.clone()).await;
        let (s1, s2) = (open_store(s1dir.path()), open_store(s2dir.path()));
        let slave1 = slave_side.slave(slave_config(master.addr()), s1.clone()).await;
        let second = slave_side.fresh();
        let slave2 = second.slave(slave_config(master.addr()), s2.clone()).await;
        wait_for_slaves(&master, 2).await;
        for i in 0..50 {
            let r = master.put(message(i, 400)).await;
            assert_eq!(r.status, PutStatus::PutOk);
            assert!(
                s1.max_offset() >= r.end() && s2.max_offset() >= r.end(),
                "both slaves hold a PutOk message"
            );
        }
        slave2.shutdown().await;
        wait_for_slaves(&master, 1).await;
        assert_eq!(master.put(message(50, 400)).await.status, PutStatus::InSyncReplicasNotEnough);
        slave1.shutdown().await;
        master.shutdown().await;
    });
}

fn sync_flush_put_returns_once_the_message_is_durable(side: Side) {
    run(async {
        let mdir = temp();
        let mut sc = store_config();
        sc.flush_disk_type = logship_core::FlushDiskType::SyncFlush;
        let mstore = std::sync::Arc::new(CommitLog::open(mdir.path(), sc).unwrap());
        let config = master_config(BrokerRole::AsyncMaster, AckPolicy::AnySlave);
        let master = side.master(config, mstore.clone()).await;
        for i in 0..20 {
            let r = master.put(message(i, 300)).await;
            assert_eq!(r.status, PutStatus::PutOk);
            assert!(mstore.flushed_offset() >= r.end(), "PutOk under SYNC_FLUSH only once durable");
        }
        master.shutdown().await;
    });
}

fn durable_acks_report_only_flushed_bytes(master_side: Side, slave_side: Side) {
    run(async {
        let config = master_config(BrokerRole::SyncMaster, AckPolicy::AnySlave);
        let p = Pair::start(&master_side, &slave_side, config, (0, 0), |c| {
            c.core.ack_on = logship_core::AckOn::Flushed;
        })
        .await;
        wait_for_slaves(&p.master, 1).await;
        for i in 0..30 {
            let r = p.master.put(message(i, 600)).await;
            assert_eq!(r.status, PutStatus::PutOk);
            assert!(
                p.sstore.flushed_offset() >= r.end(),
                "a durable ack means the slave flushed the message"
            );
        }
        p.stop().await;
    });
}

// ---- heartbeat and housekeeping ----------------------------------------------------------

fn idle_connection_stays_up(master_side: Side, slave_side: Side) {
    run(async {
        let p = Pair::start(&master_side, &slave_side, async_master(), (0, 0), |_| {}).await;
        wait_for_slaves(&p.master, 1).await;
        sleep(HOUSEKEEPING * 3).await;
        let status = p.master.status().await;
        assert_eq!((status.slaves.len(), status.connections_accepted), (1, 1), "heartbeats keep it up");
        let s = p.slave.status().await;
        assert_eq!((s.state, s.connections), (SlaveState::Streaming, 1));
        p.stop().await;
    });
}

fn master_drops_a_silent_slave_within_the_housekeeping_interval(side: Side) {
    run(async {
        let mdir = temp();
        let master = side
            .master(master_config(BrokerRole::AsyncMaster, AckPolicy::AnySlave), open_store(mdir.path()))
            .await;
        let mut silent = TcpStream::connect(master.addr()).await.unwrap();
        silent.write_all(&report(0)).await.unwrap();
        let spoke = Instant::now();
        read_until_closed(&mut silent).await; // heartbeats arrive, then the close
        let after = spoke.elapsed();
        assert!(
            after >= HOUSEKEEPING && after < HOUSEKEEPING + Duration::from_secs(2),
            "closed after {after:?}"
        );
        eventually(Duration::from_secs(5), "the master to forget it", || async {
            master.status().await.slaves.is_empty().then_some(())
        })
        .await;
        master.shutdown().await;
    });
}

fn slave_drops_a_silent_master_within_the_housekeeping_interval(side: Side) {
    run(async {
        let sdir = temp();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        // The slave's silence clock starts when it connects, which is after this instant.
        let started = Instant::now();
        let slave = side.slave(slave_config(listener.local_addr().unwrap()), open_store(sdir.path())).await;
        let (mut silent, _) = listener.accept().await.unwrap();
        read_until_closed(&mut silent).await; // reports arrive, then the close
        let after = started.elapsed();
        assert!(
            after >= HOUSEKEEPING && after < HOUSEKEEPING + Duration::from_secs(2),
            "closed after {after:?}"
        );
        let (_again, _) = listener.accept().await.unwrap();
        slave.shutdown().await;
    });
}

// ---- segment roll-over ------------------------------------------------------------------

fn segment_end_padding_is_replicated_verbatim(master_side: Side, slave_side: Side) {
    run(async {
        // Messages of ~3 KiB do not divide a 64 KiB segment: each roll leaves a BLANK record.
        let p = Pair::start(&master_side, &slave_side, async_master(), (60, 3000), |_| {}).await;
        let entries: Vec<_> = (0..60u64)
            .map(|i| p.mstore.read_queue("E2eTopic", (i % 4) as i32, i / 4, 1).unwrap()[0])
            .collect();
        assert!(
            entries.iter().any(|e| e.physical_offset == SEGMENT),
            "a message starts exactly at the segment"
        );
        let blank_at = entries
            .iter()
            .filter(|e| e.physical_offset < SEGMENT)
            .map(|e| e.physical_offset + u64::from(e.size))
            .max()
            .unwrap() as usize;
        let segment0 = std::fs::read(p.mdir.path().join("commitlog").join(format!("{:020}", 0))).unwrap();
        assert_eq!(&segment0[blank_at + 4..blank_at + 8], &0xCBD4_3194u32.to_be_bytes(), "BLANK magic");
        caught_up(&p.mstore, &p.sstore).await;
        assert_same_segments(p.mdir.path(), p.sdir.path(), 0, p.mstore.max_offset());
        assert_eq!(
            p.sstore.read_message(SEGMENT).unwrap().body,
            p.mstore.read_message(SEGMENT).unwrap().body
        );
        p.stop().await;
    });
}

on_every_runtime!(
    empty_slave_catches_up_the_whole_log_by_default,
    empty_slave_starts_at_the_last_file_with_last_file_policy,
    slave_resumes_after_a_clean_restart,
    slave_resumes_after_its_state_is_dropped_mid_stream,
    slave_resumes_after_the_master_restarts,
    sync_put_is_put_ok_once_the_slave_acknowledges,
    quorum_of_three_needs_both_slaves,
    idle_connection_stays_up,
    segment_end_padding_is_replicated_verbatim,
    durable_acks_report_only_flushed_bytes,
    restarted_master_takes_puts_once_its_slaves_report,
);

on_each_runtime!(
    slave_refuses_a_frame_at_the_wrong_offset,
    master_closes_a_forged_ack_and_releases_no_waiter,
    sync_put_times_out_when_the_slave_stalls,
    sync_put_is_slave_not_available_without_a_slave_or_beyond_the_gap,
    sync_flush_put_returns_once_the_message_is_durable,
    master_refuses_puts_once_a_trusted_slave_is_ahead_of_it,
    master_drops_a_silent_slave_within_the_housekeeping_interval,
    slave_drops_a_silent_master_within_the_housekeeping_interval,
);
