//! Issue 13's fault suite: a group of three `logship broker` processes on real etcd (started
//! here on private addresses), each broker in its own network namespace, under a workload of
//! SYNC puts that follows the master; one kind of fault per test (kill -9 of the master, of a
//! slave, of both; SIGSTOP of the master past its lease; one etcd member of three killed; all of
//! etcd away; the master cut off by a partition), with fixed seeds; and at the end of every run
//! the checker over the stopped stores (see `failover_support::checker`).
//!
//! The short suite runs each fault once or twice; `soak_every_fault` (`--ignored`) runs many
//! rounds: `LOGSHIP_SOAK_SEED` (first seed, 1), `LOGSHIP_SOAK_ROUNDS` (faults per run, 10),
//! `LOGSHIP_SOAK_RUNS` (runs per fault, seeds counting up, 1), `LOGSHIP_SOAK_FAULTS`
//! (comma-separated names, every fault), and `LOGSHIP_FAULT_LOG_DIR` (a failing run's logs).
//!
//! Skips with a message when `etcd` is not installed (or, for a partition, namespaces cannot be
//! made), unless `LOGSHIP_REQUIRE_ETCD=1`.

mod etcd_support;
mod failover_support;
mod process;

use std::sync::Mutex;
use std::time::Duration;

use failover_support::checker::{self, Replica, acks_sent_after, first_ack_after};
use failover_support::scenario::{self, Fault, Report, quantile};
use failover_support::workload::Ack;

/// One group at a time: the machine has two cores.
static SERIAL: Mutex<()> = Mutex::new(());

fn required() -> bool {
    std::env::var("LOGSHIP_REQUIRE_ETCD").as_deref() == Ok("1")
}

/// Runs `fault` for each seed (`rounds` faults each) and fails on any broken promise.
fn run_fault(test: &str, fault: Fault, seeds: &[u64], rounds: usize) {
    if !etcd_support::etcd_available(test) {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for &seed in seeds {
        let report = match scenario::run(fault, seed, rounds) {
            Ok(report) => report,
            Err(why) if why.starts_with("no network namespaces") && !required() => {
                eprintln!("skipping {test}: {why}");
                return;
            }
            Err(why) => panic!("{test} (seed {seed}): {why}"),
        };
        eprintln!("{}", summary(&report));
        assert!(report.problems.is_empty(), "{test} (seed {seed}):\n{}", report.problems.join("\n"));
        assert_eq!(report.lost, 0);
        assert_eq!(report.rounds, rounds);
        assert!(report.acks > 0, "no put was acknowledged");
    }
}

fn summary(r: &Report) -> String {
    format!(
        "{} seed {}: rounds {} acks {} failed {} lost {} window p50 {:?} max {:?} (namespaces: {}; failures: {:?})",
        r.fault.name(),
        r.seed,
        r.rounds,
        r.acks,
        r.failures,
        r.lost,
        quantile(&r.windows, 0.5),
        quantile(&r.windows, 1.0),
        r.namespaces,
        r.failure_kinds
    )
}

// ---- the short suite ------------------------------------------------------------------------

#[test]
fn kill_9_of_the_master_elects_a_new_one_and_loses_no_acknowledged_put() {
    run_fault(
        "kill_9_of_the_master_elects_a_new_one_and_loses_no_acknowledged_put",
        Fault::KillMaster,
        &[11],
        2,
    );
}

#[test]
fn a_master_stopped_past_its_lease_acknowledges_nothing_after_and_rejoins_as_a_slave() {
    run_fault(
        "a_master_stopped_past_its_lease_acknowledges_nothing_after_and_rejoins_as_a_slave",
        Fault::PauseMaster,
        &[21],
        1,
    );
}

#[test]
fn kill_9_of_a_slave_leaves_the_master_serving_and_the_slave_catches_up() {
    run_fault(
        "kill_9_of_a_slave_leaves_the_master_serving_and_the_slave_catches_up",
        Fault::KillSlave,
        &[31],
        1,
    );
}

#[test]
fn kill_9_of_the_master_and_a_slave_together_elects_the_last_set_member() {
    run_fault(
        "kill_9_of_the_master_and_a_slave_together_elects_the_last_set_member",
        Fault::KillMasterAndSlave,
        &[41],
        1,
    );
}

#[test]
fn kill_9_of_one_etcd_member_of_three_loses_no_acknowledged_put() {
    run_fault("kill_9_of_one_etcd_member_of_three_loses_no_acknowledged_put", Fault::KillEtcdNode, &[51], 1);
}

#[test]
fn with_all_of_etcd_away_no_put_is_acknowledged_and_none_is_lost_when_it_returns() {
    run_fault(
        "with_all_of_etcd_away_no_put_is_acknowledged_and_none_is_lost_when_it_returns",
        Fault::EtcdAway,
        &[61],
        1,
    );
}

#[test]
fn a_master_partitioned_from_the_slaves_and_etcd_is_fenced_and_replaced() {
    run_fault(
        "a_master_partitioned_from_the_slaves_and_etcd_is_fenced_and_replaced",
        Fault::Partition,
        &[71],
        1,
    );
}

#[test]
fn a_master_partitioned_from_the_slaves_only_keeps_its_place_and_nobody_else_acknowledges() {
    run_fault(
        "a_master_partitioned_from_the_slaves_only_keeps_its_place_and_nobody_else_acknowledges",
        Fault::PartitionFromSlaves,
        &[81],
        1,
    );
}

// ---- the soak -------------------------------------------------------------------------------

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map_or(default, |v| v.parse().unwrap_or_else(|_| panic!("{name}={v}: not a number")))
}

#[test]
#[ignore = "the slow soak: cargo test --features etcd --test etcd_failover -- --ignored"]
fn soak_every_fault() {
    if !etcd_support::etcd_available("soak_every_fault") {
        return;
    }
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let first_seed = env_u64("LOGSHIP_SOAK_SEED", 1);
    let rounds = env_u64("LOGSHIP_SOAK_ROUNDS", 10) as usize;
    let runs = env_u64("LOGSHIP_SOAK_RUNS", 1);
    let faults: Vec<Fault> = match std::env::var("LOGSHIP_SOAK_FAULTS") {
        Ok(names) => names
            .split(',')
            .map(|n| {
                *Fault::ALL
                    .iter()
                    .find(|f| f.name() == n.trim())
                    .unwrap_or_else(|| panic!("unknown fault {n:?}"))
            })
            .collect(),
        Err(_) => Fault::ALL.to_vec(),
    };
    let mut table = vec![
        "| fault | runs | rounds | acknowledged puts | puts lost | window p50 | window max | problems |"
            .to_string(),
        "|---|---|---|---|---|---|---|---|".to_string(),
    ];
    let mut failed = Vec::new();
    for fault in faults {
        let (mut rounds_done, mut acks, mut lost, mut windows, mut problems) = (0, 0, 0, Vec::new(), 0);
        for seed in first_seed..first_seed + runs {
            match scenario::run(fault, seed, rounds) {
                Ok(r) => {
                    eprintln!("{}", summary(&r));
                    rounds_done += r.rounds;
                    acks += r.acks;
                    lost += r.lost;
                    windows.extend(r.windows.iter().copied());
                    if !r.problems.is_empty() {
                        problems += 1;
                        failed.push(format!("{} seed {seed}:\n{}", fault.name(), r.problems.join("\n")));
                    }
                }
                Err(e) => {
                    problems += 1;
                    failed.push(format!("{} seed {seed}: {e}", fault.name()));
                }
            }
        }
        table.push(format!(
            "| {} | {runs} | {rounds_done} | {acks} | {lost} | {:.2} s | {:.2} s | {problems} |",
            fault.name(),
            quantile(&windows, 0.5).as_secs_f64(),
            quantile(&windows, 1.0).as_secs_f64()
        ));
        eprintln!("{}", table.last().unwrap());
    }
    let table = table.join("\n");
    eprintln!("{table}");
    if let Ok(path) = std::env::var("LOGSHIP_SOAK_REPORT") {
        std::fs::write(path, format!("{table}\n")).unwrap();
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

// ---- the checker can fail -------------------------------------------------------------------

/// A real store of `bodies` (written with logship_store), read back as the checker reads one.
fn replica_of(broker: i64, bodies: &[&str], epochs: &[(i32, u64)]) -> (Replica, Vec<u64>) {
    let dir = tempfile::tempdir().unwrap();
    let mut config = logship_store::StoreConfig::default();
    config.mapped_file_size_commit_log = checker::SEGMENT;
    config.max_message_size = 262_144;
    let offsets = {
        let store = logship_store::CommitLog::open(dir.path(), config).unwrap();
        for &(epoch, start_offset) in epochs {
            store.append_epoch(logship_store::EpochEntry { epoch, start_offset }).unwrap();
        }
        let offsets: Vec<u64> = bodies
            .iter()
            .map(|b| store.put(logship_store::Message::new("FailoverTopic", 0, b.as_bytes().to_vec())).offset)
            .collect();
        store.shutdown().unwrap();
        offsets
    };
    // Reading it back failed once in a few loaded runs of this suite, with the error unseen;
    // each failure is printed, and the read is tried three times before the test fails.
    let mut failures = Vec::new();
    for _ in 0..3 {
        match checker::read_replica(broker, dir.path()) {
            Ok(replica) => return (replica, offsets),
            Err(e) => {
                eprintln!("reading back the replica written for the checker failed: {e}");
                failures.push(e);
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        }
    }
    panic!("the replica written for the checker cannot be read back: {failures:?}");
}

fn ack(body: &str, broker: i64, epoch: i64, offset: u64) -> Ack {
    Ack { body: body.into(), broker, epoch, offset, sent: Duration::ZERO, answered: Duration::ZERO }
}

fn acks_for(bodies: &[&str], offsets: &[u64], broker: i64, epoch: i64) -> Vec<Ack> {
    bodies.iter().zip(offsets).map(|(b, o)| ack(b, broker, epoch, *o)).collect()
}

/// The first `n` messages of `r` as broker `broker` holds them: a replica that is behind.
fn prefix(r: &Replica, broker: i64, n: usize) -> Replica {
    let end = r.messages.get(n).map_or(r.log.len(), |(o, _)| *o as usize);
    let log = r.log[..end].to_vec();
    Replica { broker, messages: checker::parse_messages(&log).unwrap(), log, epochs: r.epochs.clone() }
}

#[test]
fn the_checker_passes_a_run_that_kept_every_promise() {
    let bodies = ["m1", "m2", "m3"];
    let (master, offsets) = replica_of(1, &bodies, &[(1, 0)]);
    let slave = prefix(&master, 2, 2);
    assert_eq!((master.messages.len(), slave.messages.len()), (3, 2));
    let acks = acks_for(&bodies[..2], &offsets, 1, 1);
    assert_eq!(checker::check(&acks, &[master.clone(), slave.clone()], 1, &[1, 2]), Vec::<String>::new());
    assert_eq!(checker::lost(&acks, &[master, slave], 1, &[1, 2]), 0);
}

#[test]
fn the_checker_finds_a_lost_put_ok() {
    let (master, offsets) = replica_of(1, &["m1", "m2"], &[(1, 0)]);
    let mut acks = acks_for(&["m1", "m2"], &offsets, 1, 1);
    acks.push(ack("m3", 1, 1, offsets[1] + 200));
    let problems = checker::check(&acks, std::slice::from_ref(&master), 1, &[1]);
    assert!(problems.iter().any(|p| p.starts_with("LOST") && p.contains("m3")), "{problems:?}");
    assert_eq!(checker::lost(&acks, &[master], 1, &[1]), 1);
}

#[test]
fn the_checker_finds_a_put_ok_missing_from_a_set_member() {
    let (master, offsets) = replica_of(1, &["m1", "m2"], &[(1, 0)]);
    let slave = prefix(&master, 2, 1);
    let acks = acks_for(&["m1", "m2"], &offsets, 1, 1);
    let replicas = [master, slave];
    let problems = checker::check(&acks, &replicas, 1, &[1, 2]);
    assert!(problems.iter().any(|p| p.contains("not on set member 2")), "{problems:?}");
    assert_eq!(checker::lost(&acks, &replicas, 1, &[1, 2]), 1);
    // Broker 2 outside the set: a replica that is behind is fine.
    assert_eq!(checker::check(&acks, &replicas, 1, &[1]), Vec::<String>::new());
}

#[test]
fn the_checker_finds_a_diverging_replica() {
    let (full, offsets) = replica_of(1, &["m1", "m2", "m3"], &[(1, 0)]);
    let master = prefix(&full, 1, 2);
    let longer = prefix(&full, 3, 3);
    // Broker 2: the same two messages but for the last byte of the second record.
    let mut other = master.clone();
    other.broker = 2;
    let last = other.log.len() - 1;
    other.log[last] ^= 0xff;
    let acks = acks_for(&["m1"], &offsets, 1, 1);
    assert_eq!(
        checker::check(&acks, &[master.clone(), prefix(&full, 2, 1)], 1, &[1, 2]),
        Vec::<String>::new()
    );
    let problems = checker::check(&acks, &[master, other, longer], 1, &[1]);
    assert!(
        problems.iter().any(|p| p.starts_with("DIVERGED: broker 2") && p.contains(&format!("byte {last}"))),
        "{problems:?}"
    );
    assert!(
        problems.iter().any(|p| p.starts_with("DIVERGED: broker 3") && p.contains("more than")),
        "{problems:?}"
    );
}

#[test]
fn the_checker_finds_two_masters_in_one_epoch() {
    let (master, offsets) = replica_of(1, &["m1", "m2"], &[(1, 0)]);
    let acks = vec![ack("m1", 1, 1, offsets[0]), ack("m2", 2, 1, offsets[1])];
    let problems = checker::check(&acks, &[master], 1, &[1]);
    assert!(problems.iter().any(|p| p.starts_with("SPLIT BRAIN") && p.contains("epoch 1")), "{problems:?}");
}

#[test]
fn the_checker_finds_an_ack_outside_its_epoch_and_a_message_stored_twice() {
    let (master, offsets) = replica_of(1, &["m1", "m2", "m1"], &[(1, 0), (2, 1)]);
    // m2 was written in epoch 2 (from offset 1 on), but its answer said epoch 1.
    let acks = vec![ack("m1", 1, 1, offsets[0]), ack("m2", 1, 1, offsets[1])];
    let problems = checker::check(&acks, &[master], 1, &[1]);
    assert!(problems.iter().any(|p| p.starts_with("EPOCH MISMATCH")), "{problems:?}");
    assert!(problems.iter().any(|p| p.starts_with("DUPLICATE")), "{problems:?}");
}

#[test]
fn the_fencing_check_finds_an_ack_sent_after_the_master_lost_its_place() {
    let at = |sent: u64, broker: i64, epoch: i64| Ack {
        body: format!("b{sent}"),
        broker,
        epoch,
        offset: 0,
        sent: Duration::from_millis(sent),
        answered: Duration::from_millis(sent + 5),
    };
    let acks = vec![at(100, 1, 1), at(900, 1, 1), at(1000, 2, 2)];
    assert_eq!(acks_sent_after(&acks, 1, 1, Duration::from_millis(500)), vec![acks[1].clone()]);
    assert!(acks_sent_after(&acks, 1, 1, Duration::from_millis(950)).is_empty());
    let first = first_ack_after(&acks, Duration::from_millis(500), |a| a.epoch > 1).unwrap();
    assert_eq!(first, acks[2]);
}

// ---- the partition machinery ----------------------------------------------------------------

/// Whether a TCP connection from namespace `ns` (`None`: the test's own) to `addr` opens
/// within 2 s.
fn connects(ns: Option<&str>, addr: std::net::SocketAddr) -> bool {
    let probe = format!("exec 3<>/dev/tcp/{}/{}", addr.ip(), addr.port());
    let mut command = match ns {
        Some(ns) => {
            let mut c = std::process::Command::new("ip");
            c.args(["netns", "exec", ns, "timeout"]);
            c
        }
        None => std::process::Command::new("timeout"),
    };
    command.args(["2", "bash", "-c", &probe]);
    command.stderr(std::process::Stdio::null()).status().is_ok_and(|s| s.success())
}

#[test]
fn a_partition_cuts_the_master_off_from_the_slaves_etcd_and_clients_as_told_and_the_heal_undoes_it() {
    use failover_support::net::Net;
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if let Err(why) = Net::available() {
        assert!(!required(), "LOGSHIP_REQUIRE_ETCD=1 but network namespaces cannot be made: {why}");
        eprintln!("skipping: network namespaces cannot be made: {why}");
        return;
    }
    let net = Net::create(2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // A listener inside namespace 0 (a broker), and one on etcd's address in the test's own.
    let mut args: Vec<String> = ["netns", "exec", net.namespace(0), process::BIN, "master", "--store"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend([dir.path().display().to_string(), "--listen-port".into(), "10911".into()]);
    // Off loopback a master must name its replicas (protected mode): the broker in namespace 1.
    let settings =
        [format!("brokerIP1={}", net.broker_ip(0)), format!("haReplicaAllowList={}", net.broker_ip(1))];
    args.extend(process::test_settings(&settings.iter().map(String::as_str).collect::<Vec<_>>()));
    let mut child = std::process::Command::new("ip")
        .args(&args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let broker = std::net::SocketAddr::new(net.broker_ip(0), 10911);
    let etcd_listener = std::net::TcpListener::bind((net.etcd_ip(), 0)).unwrap();
    let etcd = etcd_listener.local_addr().unwrap();
    process::eventually("the broker in its namespace", || connects(None, broker));
    let reach = || {
        (
            connects(Some(net.namespace(1)), broker),
            connects(Some(net.namespace(0)), etcd),
            connects(None, broker),
        )
    };
    assert_eq!(reach(), (true, true, true), "slave, etcd, client before any cut");
    net.isolate(0, false, false).unwrap();
    assert_eq!(reach(), (false, true, true), "cut from the slaves only");
    net.heal();
    assert_eq!(reach(), (true, true, true), "healed");
    net.isolate(0, true, false).unwrap();
    assert_eq!(reach(), (false, false, true), "cut from the slaves and etcd");
    net.heal();
    net.isolate(0, true, true).unwrap();
    assert_eq!(reach(), (false, false, false), "cut from everyone");
    net.heal();
    assert_eq!(reach(), (true, true, true), "healed again");
    let _ = child.kill();
    let _ = child.wait();
}
