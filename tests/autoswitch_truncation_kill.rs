//! The controller-mode failover of `autoswitch_failover.rs` with a real kill -9 of the old
//! master A after each step of its truncation, on each adapter.
//!
//! A leads epoch 1, its slave B leaves, A writes a tail B never gets and stops; B becomes
//! master at epoch 2 and writes. A's tail was confirmed (by A alone), so A cuts it only with
//! the operator's override naming exactly those bytes (`drop_confirmed`, the broker key
//! `haSlaveDropConfirmed`). A then rejoins as B's slave in a child process (this test
//! binary, run again) whose log stops its truncation right after one [`TruncateStep`] and
//! says so; the parent SIGKILLs it there. A reopens (recovery), follows B again in the parent
//! and must end byte-identical with B: the same commit log and epoch list, consume queues never
//! past the confirmOffset, and never a byte of its old tail.
//!
//! The crash point lives in this test's log adapter ([`CrashingLog`], over the store's
//! fault-injection entry `truncate_to_crashing_after`), not in any production path: the slave
//! service runs unchanged and only sees a log whose truncation never returns.
//!
//! In its own test binary: a forked child holds the parent's descriptors, store locks
//! included, until it execs, which would make a parallel test's reopen fail with `Locked`.

mod support;

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use bytes::Bytes;
use logship_core::service::{
    MasterControllerConfig, MasterServiceConfig, SlaveControllerConfig, SlaveServiceConfig,
};
use logship_core::{
    BrokerRole, EpochLog, LogBounds, LogRead, LogSpan, LogWrite, MasterConfig, Offset, PutStatus, SlaveConfig,
};
use logship_core::{EpochEntry, autoswitch::SyncPolicy};
use logship_store::{StoreError, TruncateStep};
use support::*;

const HEARTBEAT: Duration = Duration::from_millis(100);

/// Makes [`kill_child`] run: `<side>|<store dir>|<master address>|<step index>|<from>-<to>`, the
/// last the confirmed bytes A may drop.
const CHILD_ENV: &str = "LOGSHIP_AUTOSWITCH_KILL_CHILD";
/// What the child prints once the truncation stopped after its step.
const STEP_DONE: &str = "TRUNCATION-STOPPED";

/// Broker ids: A, the old master; B, the new one.
const A: i64 = 1;
const B: i64 = 2;

/// The store config of a controller-mode broker: replicated bytes are indexed only below the
/// confirmOffset.
fn broker_store_config() -> StoreConfig {
    let mut c = store_config();
    c.dispatch_up_to_confirm = true;
    c
}

fn open_broker(dir: &std::path::Path) -> Arc<CommitLog> {
    Arc::new(CommitLog::open(dir, broker_store_config()).unwrap())
}

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

fn slave_config(master: &str, broker_id: i64, master_id: i64, epoch: i32) -> SlaveServiceConfig {
    let mut c = SlaveServiceConfig::new(master.to_string());
    c.core = SlaveConfig { heartbeat_interval: HEARTBEAT, ..SlaveConfig::default() };
    c.controller = Some(SlaveControllerConfig {
        broker_id,
        master_broker_id: master_id,
        master_epoch: epoch,
        ..SlaveControllerConfig::default()
    });
    c
}

async fn put_all(master: &AnyMaster<CommitLog>, from: u64, count: u64, size: usize) -> u64 {
    let mut end = 0;
    for i in from..from + count {
        let r = master.put(message(i, size)).await;
        assert_eq!(r.status, PutStatus::PutOk, "put {i}");
        end = r.end();
    }
    end
}

async fn until_caught_up(slave: &AnySlave, store: &CommitLog, end: u64) {
    eventually(Duration::from_secs(20), "the slave caught up with its confirmOffset", || async {
        let s = slave.status().await;
        let confirm = s.autoswitch.as_ref().map(|a| a.confirm_offset);
        (s.max_offset == end && confirm == Some(end) && store.confirm_offset() == end).then_some(())
    })
    .await;
}

async fn until_set(master: &AnyMaster<CommitLog>, set: &[i64]) {
    let want: BTreeSet<i64> = set.iter().copied().collect();
    eventually(Duration::from_secs(20), "the sync-state-set", || async {
        let s = master.status().await.autoswitch?;
        (s.sync_state_set == want && s.proposed_sync_state_set.is_none()).then_some(())
    })
    .await;
}

fn assert_same_bytes(a: &CommitLog, b: &CommitLog, end: u64) {
    let mut at = 0;
    while at < end {
        let stop = end.min(at - at % SEGMENT + SEGMENT);
        let span = LogSpan { offset: at, len: (stop - at) as u32 };
        assert!(a.read(span).unwrap() == b.read(span).unwrap(), "the logs differ in {span:?}");
        at = stop;
    }
}

fn entries(list: &[(i32, u64)]) -> Vec<EpochEntry> {
    list.iter().map(|&(epoch, start_offset)| EpochEntry { epoch, start_offset }).collect()
}

/// Every consume-queue entry of the test topic ends at or below `limit`; returns how many.
fn assert_queues_within(store: &CommitLog, limit: u64, what: &str) -> usize {
    let mut count = 0;
    for queue_id in 0..4 {
        let (min, max) = store.queue_bounds("E2eTopic", queue_id);
        let got = store.read_queue("E2eTopic", queue_id, min, (max - min) as usize).unwrap();
        for e in &got {
            let end = e.physical_offset + u64::from(e.size);
            assert!(end <= limit, "{what}: queue {queue_id} indexes a message ending at {end}, past {limit}");
        }
        count += got.len();
    }
    count
}

/// The old master's store with a truncation that stops after `step` and never returns, as a
/// kill -9 right there would leave it. Everything else is the store's.
struct CrashingLog {
    inner: Arc<CommitLog>,
    step: TruncateStep,
}

impl LogRead for CrashingLog {
    type Error = StoreError;

    fn bounds(&self) -> LogBounds {
        self.inner.bounds()
    }

    fn flushed(&self) -> Offset {
        LogRead::flushed(&*self.inner)
    }

    fn read(&self, span: LogSpan) -> Result<Bytes, StoreError> {
        LogRead::read(&*self.inner, span)
    }

    fn is_record_boundary(&self, offset: Offset) -> Result<bool, StoreError> {
        LogRead::is_record_boundary(&*self.inner, offset)
    }

    fn segment_size(&self) -> u64 {
        LogRead::segment_size(&*self.inner)
    }

    fn epoch_log(&self) -> Option<&dyn EpochLog<Error = StoreError>> {
        Some(self)
    }
}

impl EpochLog for CrashingLog {
    type Error = StoreError;

    fn epochs(&self) -> Vec<EpochEntry> {
        EpochLog::epochs(&*self.inner)
    }

    fn append_epoch(&self, entry: EpochEntry) -> Result<(), StoreError> {
        EpochLog::append_epoch(&*self.inner, entry)
    }

    fn truncate_to(&self, offset: Offset) -> Result<(), StoreError> {
        self.inner.truncate_to_crashing_after(offset, self.step)?;
        println!("{STEP_DONE} {offset}");
        // Stay here until the parent kills the process: nothing after the step may run.
        loop {
            std::thread::sleep(Duration::from_secs(600));
        }
    }

    fn set_confirm_offset(&self, offset: Offset) -> Offset {
        EpochLog::set_confirm_offset(&*self.inner, offset)
    }

    fn confirm_offset(&self) -> Offset {
        EpochLog::confirm_offset(&*self.inner)
    }

    fn confirmed_offset(&self) -> Offset {
        EpochLog::confirmed_offset(&*self.inner)
    }
}

impl LogWrite for CrashingLog {
    fn append_at(&self, offset: Offset, data: &[u8]) -> Result<Offset, StoreError> {
        LogWrite::append_at(&*self.inner, offset, data)
    }

    fn flush(&self) -> Result<Offset, StoreError> {
        LogWrite::flush(&*self.inner)
    }
}

/// The child process: A follows B over a [`CrashingLog`], on the side named, until killed.
#[test]
#[ignore = "run as a child process by the kill -9 failover tests"]
fn kill_child() {
    let Ok(spec) = std::env::var(CHILD_ENV) else { return };
    let parts: Vec<&str> = spec.split('|').collect();
    let [side, dir, master, step, drop] = parts[..] else { panic!("bad {CHILD_ENV}: {spec}") };
    let side = match side {
        "tokio" => Side::tokio(),
        "smol" => Side::smol(),
        other => panic!("unknown side {other}"),
    };
    let step = TruncateStep::ALL[step.parse::<usize>().unwrap()];
    let log = Arc::new(CrashingLog { inner: open_broker(std::path::Path::new(dir)), step });
    let (from, to) = drop.split_once('-').expect("FROM-TO");
    let mut config = slave_config(master, A, B, 2);
    config.controller.as_mut().unwrap().drop_confirmed = Some(from.parse().unwrap()..to.parse().unwrap());
    run(async {
        let _slave = side.slave(config, log).await;
        sleep(Duration::from_secs(600)).await;
    });
}

/// Runs [`kill_child`] for `step`, allowed to drop the confirmed bytes `drop`; returns once it
/// reported the stop, after killing it.
async fn run_child_and_kill(
    side: &Side,
    dir: &std::path::Path,
    master: &str,
    step: usize,
    drop: std::ops::Range<u64>,
) {
    let spec = format!("{}|{}|{master}|{step}|{}-{}", side.name(), dir.display(), drop.start, drop.end);
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "kill_child", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.contains(STEP_DONE) {
                let _ = tx.send(line);
            }
        }
    });
    let got = wait_line(&rx).await;
    // SIGKILL: no destructor, no flush, no clean shutdown.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(got.is_some(), "the child did not stop after step {step} ({:?})", TruncateStep::ALL[step]);
}

async fn wait_line(rx: &Receiver<String>) -> Option<String> {
    for _ in 0..3000 {
        if let Ok(line) = rx.try_recv() {
            return Some(line);
        }
        sleep(Duration::from_millis(10)).await;
    }
    None
}

/// The two tests fork children; one at a time, so that no child inherits the other's store
/// locks between its fork and its exec.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn old_master_killed_at_each_truncation_step_ends_identical_with_the_new_master(side: Side) {
    let _serial = SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for (step, name) in TruncateStep::ALL.iter().enumerate() {
        run(async {
            let (adir, bdir) = (temp(), temp());
            let (a, b) = (open_broker(adir.path()), open_broker(bdir.path()));

            // A leads epoch 1 with B in its set; B leaves and A writes a tail B never gets.
            let a_master = side.master(master_config(A, 1), a.clone()).await;
            let b_slave = side.slave(slave_config(&a_master.addr().to_string(), B, A, 1), b.clone()).await;
            put_all(&a_master, 0, 40, 900).await;
            until_set(&a_master, &[A, B]).await;
            let shared = put_all(&a_master, 40, 40, 900).await;
            until_caught_up(&b_slave, &b, shared).await;
            b_slave.shutdown().await;
            until_set(&a_master, &[A]).await;
            let tail = put_all(&a_master, 80, 10, 700).await;
            assert!(tail > shared && shared > SEGMENT);
            a_master.shutdown().await;
            drop((a_master, b_slave));
            close_store(a, false).await;

            // B is elected at epoch 2 and writes.
            let b_master = side.master(master_config(B, 2), b.clone()).await;
            let end = put_all(&b_master, 100, 30, 800).await;
            let both = entries(&[(1, 0), (2, shared)]);

            // A rejoins in a child process and is killed right after the step.
            run_child_and_kill(&side, adir.path(), &b_master.addr().to_string(), step, shared..tail).await;

            // A reopens: whatever step it died after, the cut is finished and the tail is gone.
            let a = open_broker(adir.path());
            assert_eq!(a.bounds().max, shared, "after {name:?}: A's log ends at the consistent point");
            assert_eq!(a.epochs(), entries(&[(1, 0)]), "after {name:?}: no epoch of the tail");
            assert!(
                a.confirm_offset() <= shared,
                "after {name:?}: confirmOffset {} past the cut",
                a.confirm_offset()
            );
            assert_same_bytes(&a, &b, shared);
            assert_queues_within(&a, shared, &format!("after {name:?}, reopened"));

            // A follows B again and ends byte-identical with it.
            let a_slave = side.slave(slave_config(&b_master.addr().to_string(), A, B, 2), a.clone()).await;
            until_caught_up(&a_slave, &a, end).await;
            assert_eq!(a.epochs(), both, "after {name:?}: A's epoch list is B's");
            assert_same_bytes(&a, &b, end);
            a.dispatch_pending().unwrap();
            let indexed = assert_queues_within(&a, a.confirm_offset(), &format!("after {name:?}, caught up"));
            assert_eq!(
                indexed,
                40 + 40 + 30,
                "after {name:?}: every message B holds is indexed, none of A's tail"
            );
            a_slave.shutdown().await;
            b_master.shutdown().await;
        });
    }
}

#[test]
fn tokio_old_master_killed_at_each_truncation_step_ends_identical_with_the_new_master() {
    old_master_killed_at_each_truncation_step_ends_identical_with_the_new_master(Side::tokio());
}

#[test]
fn smol_old_master_killed_at_each_truncation_step_ends_identical_with_the_new_master() {
    old_master_killed_at_each_truncation_step_ends_identical_with_the_new_master(Side::smol());
}
