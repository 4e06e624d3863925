//! Controller-mode (AutoSwitch) failover between logship brokers over real loopback sockets
//! and the real store, on each adapter: the old master writes a tail its slave never gets and
//! stops; the slave becomes master at the next epoch and writes; the old master rejoins as a
//! slave, cuts its divergent tail at the consistent point and ends byte-identical with the
//! new master; a third, empty broker joins and gets the whole log with both epochs.
//!
//! The masters apply their own sync-state-set proposals (the local authority, until a
//! coordinator exists): a slave that disconnects leaves the set at once, so the old master's
//! tail is confirmed by the master alone, and the test plays the controller that elects the
//! slave anyway (an unclean election). The old master then refuses to cut its confirmed tail
//! until the test, playing the operator, names exactly those bytes (`drop_confirmed`, the
//! broker key `haSlaveDropConfirmed`).

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use logship_core::service::{
    MasterControllerConfig, MasterServiceConfig, SlaveControllerConfig, SlaveServiceConfig,
};
use logship_core::{BrokerRole, EpochLog, LogRead, LogSpan, MasterConfig, PutStatus, SlaveConfig};
use logship_core::{EpochEntry, autoswitch::SyncPolicy};
use logship_store::CommitLog;
use support::*;

const HEARTBEAT: Duration = Duration::from_millis(100);

/// A SYNC_MASTER in controller mode: puts wait for every member of the sync-state-set.
fn master_config(broker_id: i64, epoch: i32) -> MasterServiceConfig {
    MasterServiceConfig {
        core: MasterConfig {
            mapped_file_size_commit_log: SEGMENT,
            heartbeat_interval: HEARTBEAT,
            ..MasterConfig::default()
        },
        role: BrokerRole::SyncMaster,
        slave_timeout: Duration::from_millis(300),
        controller: Some(MasterControllerConfig {
            broker_id,
            epoch,
            sync_state_set: BTreeSet::from([broker_id]),
            sync: SyncPolicy { all_ack_in_sync_state_set: true, ..SyncPolicy::default() },
            ..MasterControllerConfig::default()
        }),
        ..MasterServiceConfig::default()
    }
}

fn slave_config(
    master: &AnyMaster<CommitLog>,
    broker_id: i64,
    master_id: i64,
    epoch: i32,
) -> SlaveServiceConfig {
    let mut c = SlaveServiceConfig::new(master.addr().to_string());
    c.core = SlaveConfig { heartbeat_interval: HEARTBEAT, ..SlaveConfig::default() };
    c.controller = Some(SlaveControllerConfig {
        broker_id,
        master_broker_id: master_id,
        master_epoch: epoch,
        ..SlaveControllerConfig::default()
    });
    c
}

async fn put_all(
    master: &AnyMaster<CommitLog>,
    from: u64,
    count: u64,
    size: usize,
    expect: PutStatus,
) -> u64 {
    let mut end = 0;
    for i in from..from + count {
        let r = master.put(message(i, size)).await;
        assert_eq!(r.status, expect, "put {i}");
        end = r.end();
    }
    end
}

/// Waits until the slave holds `end`, with the confirmOffset at `end` too.
async fn until_caught_up(slave: &AnySlave, store: &CommitLog, end: u64) {
    eventually(Duration::from_secs(20), "the slave caught up with its confirmOffset", || async {
        let s = slave.status().await;
        let confirm = s.autoswitch.as_ref().map(|a| a.confirm_offset);
        (s.max_offset == end && confirm == Some(end) && store.confirm_offset() == end).then_some(())
    })
    .await;
}

async fn until_member(master: &AnyMaster<CommitLog>, id: i64) {
    eventually(Duration::from_secs(20), "the slave in the sync-state-set", || async {
        let s = master.status().await;
        s.autoswitch.filter(|a| a.sync_state_set.contains(&id)).map(|_| ())
    })
    .await;
}

/// Waits until the master's sync-state-set is the master alone (its slave left).
async fn until_alone(master: &AnyMaster<CommitLog>, id: i64) {
    eventually(Duration::from_secs(20), "the slave out of the sync-state-set", || async {
        let s = master.status().await.autoswitch?;
        (s.sync_state_set == BTreeSet::from([id]) && s.proposed_sync_state_set.is_none()).then_some(())
    })
    .await;
}

/// Compares the bytes of two logs over `[0, end)`, segment by segment.
fn assert_same_bytes(a: &CommitLog, b: &CommitLog, end: u64) {
    let mut at = 0;
    while at < end {
        let stop = end.min(at - at % SEGMENT + SEGMENT);
        let span = LogSpan { offset: at, len: (stop - at) as u32 };
        assert!(a.read(span).unwrap() == b.read(span).unwrap(), "the logs differ in {span:?}");
        at = stop;
    }
}

/// The old master rejoins as a slave with `config`: its tail `[shared, tail)` was confirmed (by
/// it alone, then the master), so it refuses to cut it, says so naming the override, and keeps
/// its log; restarted with the override naming exactly those bytes, it cuts them and follows.
async fn rejoin_dropping_the_confirmed_tail(
    side: &Side,
    config: SlaveServiceConfig,
    store: &Arc<CommitLog>,
    shared: u64,
    tail: u64,
) -> AnySlave {
    let refusing = side.slave(config.clone(), store.clone()).await;
    let why = eventually(Duration::from_secs(20), "the old master to refuse cutting its tail", || async {
        let refusals = refusing.status().await.autoswitch?.refusals;
        (refusals.would_truncate_confirmed > 0).then_some(refusals.current?)
    })
    .await;
    assert!(why.contains(&format!("haSlaveDropConfirmed={shared}-{tail}")), "{why}");
    assert_eq!(store.bounds().max, tail, "nothing was cut");
    refusing.shutdown().await;
    let mut config = config;
    config.controller.as_mut().expect("controller mode").drop_confirmed = Some(shared..tail);
    side.slave(config, store.clone()).await
}

fn entries(list: &[(i32, u64)]) -> Vec<EpochEntry> {
    list.iter().map(|&(epoch, start_offset)| EpochEntry { epoch, start_offset }).collect()
}

fn the_old_master_cuts_its_divergent_tail_and_a_new_broker_gets_both_epochs(side: Side) {
    run(async {
        let (adir, bdir, cdir) = (temp(), temp(), temp());
        let (a, b, c) = (open_store(adir.path()), open_store(bdir.path()), open_store(cdir.path()));

        // A leads epoch 1; B follows and joins the sync-state-set, so A's puts wait for it.
        let a_master = side.master(master_config(1, 1), a.clone()).await;
        let b_slave = side.slave(slave_config(&a_master, 2, 1, 1), b.clone()).await;
        put_all(&a_master, 0, 40, 900, PutStatus::PutOk).await;
        until_member(&a_master, 2).await;
        let shared = put_all(&a_master, 40, 40, 900, PutStatus::PutOk).await;
        assert!(shared > SEGMENT, "the log spans segments");
        until_caught_up(&b_slave, &b, shared).await;

        // B goes away and leaves A's sync-state-set; A writes a tail B never gets.
        b_slave.shutdown().await;
        until_alone(&a_master, 1).await;
        let tail = put_all(&a_master, 80, 10, 700, PutStatus::PutOk).await;
        assert!(tail > shared);
        assert_eq!(b.bounds().max, shared);
        a_master.shutdown().await;

        // B is elected at epoch 2 and writes.
        let b_master = side.master(master_config(2, 2), b.clone()).await;
        let end = put_all(&b_master, 100, 30, 800, PutStatus::PutOk).await;
        let both = entries(&[(1, 0), (2, shared)]);
        assert_eq!(b.epochs(), both);

        // A rejoins as B's slave: it cuts its epoch-1 tail at the consistent point and follows.
        let a_slave =
            rejoin_dropping_the_confirmed_tail(&side, slave_config(&b_master, 1, 2, 2), &a, shared, tail)
                .await;
        until_caught_up(&a_slave, &a, end).await;
        let status = a_slave.status().await.autoswitch.unwrap();
        assert_eq!(status.consistent_point, Some(shared));
        assert_eq!((status.truncations, status.truncated_bytes), (1, tail - shared));
        assert_eq!(a.epochs(), both, "A's epoch list is B's");
        assert_same_bytes(&a, &b, end);
        until_member(&b_master, 1).await;
        // Now B's puts wait for A too, and get it.
        let end = put_all(&b_master, 130, 5, 800, PutStatus::PutOk).await;
        until_caught_up(&a_slave, &a, end).await;

        // A third broker joins empty and gets the whole log with both epochs.
        let c_slave = side.slave(slave_config(&b_master, 3, 2, 2), c.clone()).await;
        until_caught_up(&c_slave, &c, end).await;
        assert_eq!(c.epochs(), both);
        assert_same_bytes(&c, &b, end);
        until_member(&b_master, 3).await;
        let status = b_master.status().await;
        let set = status.autoswitch.unwrap();
        assert_eq!(set.sync_state_set, BTreeSet::from([1, 2, 3]));
        assert_eq!((set.epoch, set.confirm_offset, b.confirm_offset()), (2, end, end));
        assert!(status.slaves.iter().all(|s| s.in_sync));

        c_slave.shutdown().await;
        a_slave.shutdown().await;
        b_master.shutdown().await;
    });
}

#[test]
fn tokio_the_old_master_cuts_its_divergent_tail_and_a_new_broker_gets_both_epochs() {
    the_old_master_cuts_its_divergent_tail_and_a_new_broker_gets_both_epochs(Side::tokio());
}

#[test]
fn smol_the_old_master_cuts_its_divergent_tail_and_a_new_broker_gets_both_epochs() {
    the_old_master_cuts_its_divergent_tail_and_a_new_broker_gets_both_epochs(Side::smol());
}

/// The store keeps nothing of the old tail across a reopen: the cut was crash-safe and the
/// epoch list on disk is the new master's.
#[test]
fn a_cut_old_master_reopens_with_the_new_masters_epochs_and_bytes() {
    let side = Side::tokio();
    run(async {
        let (adir, bdir) = (temp(), temp());
        let (a, b) = (open_store(adir.path()), open_store(bdir.path()));
        let a_master = side.master(master_config(1, 1), a.clone()).await;
        let b_slave = side.slave(slave_config(&a_master, 2, 1, 1), b.clone()).await;
        let shared = put_all(&a_master, 0, 20, 500, PutStatus::PutOk).await;
        until_caught_up(&b_slave, &b, shared).await;
        b_slave.shutdown().await;
        until_alone(&a_master, 1).await;
        let tail = put_all(&a_master, 20, 5, 500, PutStatus::PutOk).await;
        a_master.shutdown().await;
        let b_master = side.master(master_config(2, 2), b.clone()).await;
        let end = put_all(&b_master, 30, 10, 600, PutStatus::PutOk).await;
        let a_slave =
            rejoin_dropping_the_confirmed_tail(&side, slave_config(&b_master, 1, 2, 2), &a, shared, tail)
                .await;
        until_caught_up(&a_slave, &a, end).await;
        a_slave.shutdown().await;
        b_master.shutdown().await;
        drop((a_slave, b_master, a_master, b_slave));
        close_store(a, false).await;
        let a = open_store(adir.path());
        assert_eq!(a.epochs(), entries(&[(1, 0), (2, shared)]));
        assert_eq!(a.bounds().max, end);
        assert_same_bytes(&a, &b, end);
    });
}

/// A coordinator that never answers: the sync-state-set stays as the master started.
struct Silent;

impl logship_core::service::SyncStateSetAuthority for Silent {
    fn propose(&mut self, _: &BTreeSet<i64>, _: &BTreeSet<i64>, _: i32) -> Option<(BTreeSet<i64>, i32)> {
        None
    }
}

/// The tail an old master stored but no member acknowledged (its puts timed out) is no
/// confirmed data: the old master cuts it without any override when it rejoins, although its
/// own puts raised the store's confirm offset (for its consume queues) over it.
#[test]
fn an_old_masters_tail_no_member_acknowledged_is_cut_without_an_override() {
    let side = Side::tokio();
    run(async {
        let (adir, bdir) = (temp(), temp());
        // As a broker opens them in controller mode: consumers read below the confirm offset.
        let open = |dir: &std::path::Path| {
            let mut c = store_config();
            c.dispatch_up_to_confirm = true;
            Arc::new(CommitLog::open(dir, c).unwrap())
        };
        let (a, b) = (open(adir.path()), open(bdir.path()));
        let mut config = master_config(1, 1);
        let controller = config.controller.as_mut().unwrap();
        controller.sync_state_set = BTreeSet::from([1, 2]);
        controller.authority = Some(logship_core::service::AuthorityFactory::new(|| Box::new(Silent)));
        let a_master = side.master(config, a.clone()).await;
        let b_slave = side.slave(slave_config(&a_master, 2, 1, 1), b.clone()).await;
        let shared = put_all(&a_master, 0, 20, 500, PutStatus::PutOk).await;
        until_caught_up(&b_slave, &b, shared).await;
        b_slave.shutdown().await;
        let tail = put_all(&a_master, 20, 3, 500, PutStatus::FlushSlaveTimeout).await;
        assert!(tail > shared);
        assert_eq!(a.confirmed_offset(), shared, "the tail was never confirmed");
        assert!(a.confirm_offset() >= tail, "though its own puts are indexed");
        a_master.shutdown().await;
        let b_master = side.master(master_config(2, 2), b.clone()).await;
        let end = put_all(&b_master, 30, 10, 600, PutStatus::PutOk).await;
        let a_slave = side.slave(slave_config(&b_master, 1, 2, 2), a.clone()).await;
        until_caught_up(&a_slave, &a, end).await;
        let status = a_slave.status().await.autoswitch.unwrap();
        assert_eq!((status.truncations, status.truncated_bytes), (1, tail - shared));
        assert_eq!(status.refusals.would_truncate_confirmed, 0);
        assert_same_bytes(&a, &b, end);
        a_slave.shutdown().await;
        b_master.shutdown().await;
    });
}

/// The TLS name every broker of the group carries beside its own, and that every slave asks
/// the master for: it does not change when the master does.
const GROUP_NAME: &str = "ha.group-a.logship.test";

/// Broker `id`'s certificate names its own replica name and the group's.
fn broker_name(id: i64) -> String {
    format!("broker-{id}.logship.test")
}

/// Controller mode over mutual TLS through a failover: each broker's certificate carries its
/// own replica name and the group's name, every slave verifies the group's name, and every
/// master admits only the other broker's replica name. Old master A and new master B swap
/// roles without any TLS setting changing.
fn controller_mode_fails_over_over_tls_with_a_group_name(side: Side) {
    use logship_core::service::Admission;
    use logship_core::service::tls::{MasterTls, SlaveTls, TlsMode};
    use support::pki::Ca;
    run(async {
        let ca = Ca::new("logship group CA");
        let ids = [1, 2].map(|id| ca.issue(&[&broker_name(id), GROUP_NAME]));
        let master_tls = |id: i64| {
            let other = broker_name(3 - id);
            MasterTls::new(TlsMode::Required, ids[id as usize - 1].pem(&ca.pem()), &[other]).unwrap()
        };
        let slave_tls = |id: i64| SlaveTls::new(ids[id as usize - 1].pem(&ca.pem()), GROUP_NAME).unwrap();
        let tls_master = |id: i64, epoch: i32| MasterServiceConfig {
            admission: Admission { tls: Some(master_tls(id)), ..Admission::default() },
            ..master_config(id, epoch)
        };
        let tls_slave = |master: &AnyMaster<CommitLog>, id: i64, master_id: i64, epoch: i32| {
            let mut c = slave_config(master, id, master_id, epoch);
            c.tls = Some(slave_tls(id));
            c
        };
        let (adir, bdir) = (temp(), temp());
        let (a, b) = (open_store(adir.path()), open_store(bdir.path()));

        let a_master = side.master(tls_master(1, 1), a.clone()).await;
        let b_slave = side.slave(tls_slave(&a_master, 2, 1, 1), b.clone()).await;
        put_all(&a_master, 0, 20, 600, PutStatus::PutOk).await;
        until_member(&a_master, 2).await;
        let shared = put_all(&a_master, 20, 10, 600, PutStatus::PutOk).await;
        until_caught_up(&b_slave, &b, shared).await;
        let status = a_master.status().await;
        assert_eq!(status.slaves[0].identity, Some(broker_name(2)), "B came in over TLS as itself");
        b_slave.shutdown().await;
        until_alone(&a_master, 1).await;
        let tail = put_all(&a_master, 30, 5, 600, PutStatus::PutOk).await;
        a_master.shutdown().await;

        let b_master = side.master(tls_master(2, 2), b.clone()).await;
        let end = put_all(&b_master, 40, 10, 700, PutStatus::PutOk).await;
        let a_slave =
            rejoin_dropping_the_confirmed_tail(&side, tls_slave(&b_master, 1, 2, 2), &a, shared, tail).await;
        until_caught_up(&a_slave, &a, end).await;
        assert_eq!(a.epochs(), entries(&[(1, 0), (2, shared)]));
        assert_same_bytes(&a, &b, end);
        until_member(&b_master, 1).await;
        let status = b_master.status().await;
        assert_eq!(status.slaves.len(), 1);
        assert!(status.slaves[0].trusted);
        assert_eq!(status.slaves[0].identity, Some(broker_name(1)), "A came in over TLS as itself");
        a_slave.shutdown().await;
        b_master.shutdown().await;
    });
}

#[test]
fn tokio_controller_mode_fails_over_over_tls_with_a_group_name() {
    controller_mode_fails_over_over_tls_with_a_group_name(Side::tokio());
}

#[test]
fn smol_controller_mode_fails_over_over_tls_with_a_group_name() {
    controller_mode_fails_over_over_tls_with_a_group_name(Side::smol());
}

/// Controller mode over `MemoryLog`s, across adapters: the slave ends with the master's bytes
/// and epochs, and the master's SYNC puts wait for it once it is in the set.
fn memory_logs_replicate_in_controller_mode(master_side: Side, slave_side: Side) {
    use logship_core::memlog::MemoryLog;
    run(async {
        let (mlog, slog) = (Arc::new(MemoryLog::new()), Arc::new(MemoryLog::new()));
        let mut config = master_config(1, 3);
        config.core.mapped_file_size_commit_log = logship_core::DEFAULT_MAPPED_FILE_SIZE_COMMIT_LOG;
        let master = master_side.master(config, mlog.clone()).await;
        for i in 0..50u8 {
            assert_eq!(master.put(vec![i; 1000]).await.status, PutStatus::PutOk);
        }
        let mut c = SlaveServiceConfig::new(master.addr().to_string());
        c.core = SlaveConfig { heartbeat_interval: HEARTBEAT, ..SlaveConfig::default() };
        c.controller = Some(SlaveControllerConfig {
            broker_id: 2,
            master_broker_id: 1,
            master_epoch: 3,
            ..Default::default()
        });
        let slave = slave_side.slave(c, slog.clone()).await;
        eventually(Duration::from_secs(20), "the memory slave in the set", || async {
            master.status().await.autoswitch.filter(|a| a.sync_state_set.contains(&2)).map(|_| ())
        })
        .await;
        for i in 50..60u8 {
            assert_eq!(master.put(vec![i; 1000]).await.status, PutStatus::PutOk);
        }
        let end = mlog.bounds().max;
        eventually(Duration::from_secs(20), "the memory slave caught up", || async {
            let s = slave.status().await;
            (s.max_offset == end && slog.confirm_offset() == end).then_some(())
        })
        .await;
        assert_eq!(slog.contents(), mlog.contents());
        assert_eq!(slog.epochs(), entries(&[(3, 0)]));
        assert_eq!(mlog.epochs(), entries(&[(3, 0)]));
        slave.shutdown().await;
        master.shutdown().await;
    });
}

#[test]
fn memory_logs_replicate_in_controller_mode_tokio_to_smol() {
    memory_logs_replicate_in_controller_mode(Side::tokio(), Side::smol());
}

#[test]
fn memory_logs_replicate_in_controller_mode_smol_to_tokio() {
    memory_logs_replicate_in_controller_mode(Side::smol(), Side::tokio());
}
