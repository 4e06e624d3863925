//! The faults and a run of one of them: a group under the workload, `rounds` faults of one kind
//! with the seed's delays and victims, each healed and the group whole again before the next,
//! then the checker over the stopped stores.

use std::time::Duration;

use super::checker::{self, acks_sent_after};
use super::group::{Group, LEASE_TTL, PATIENCE};
use super::net::Net;
use super::rng::Rng;
use super::workload::{Ack, Outcome, Workload};

/// The faults of issue 13.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// kill -9 the master (then restart it over its store: it must rejoin as a slave).
    KillMaster,
    /// SIGSTOP the master longer than its lease, then SIGCONT: it must acknowledge nothing sent
    /// after it stopped, and rejoin as a slave.
    PauseMaster,
    /// kill -9 a slave (then restart it).
    KillSlave,
    /// kill -9 the master and a slave together.
    KillMasterAndSlave,
    /// kill -9 one etcd member of three (then restart it).
    KillEtcdNode,
    /// Every etcd member away (kill -9, or SIGSTOP) for two to three leases: no put sent after a
    /// lease acknowledged; nothing lost when they return.
    EtcdAway,
    /// The master cut off from the slaves and from etcd (the workload still reaches it): it must
    /// stop acknowledging within its lease; the slaves elect; after the heal it rejoins as a slave.
    Partition,
    /// The master cut off from the slaves only (etcd still reachable): it keeps its lease and may
    /// shrink the set to itself; nobody else may become master.
    PartitionFromSlaves,
}

impl Fault {
    /// Every fault, in the order the report lists them.
    pub const ALL: [Self; 8] = [
        Self::KillMaster,
        Self::PauseMaster,
        Self::KillSlave,
        Self::KillMasterAndSlave,
        Self::KillEtcdNode,
        Self::EtcdAway,
        Self::Partition,
        Self::PartitionFromSlaves,
    ];

    /// The fault's name in reports and in `LOGSHIP_SOAK_FAULTS`.
    pub fn name(self) -> &'static str {
        match self {
            Self::KillMaster => "kill-master",
            Self::PauseMaster => "pause-master",
            Self::KillSlave => "kill-slave",
            Self::KillMasterAndSlave => "kill-master-and-slave",
            Self::KillEtcdNode => "kill-etcd-node",
            Self::EtcdAway => "etcd-away",
            Self::Partition => "partition",
            Self::PartitionFromSlaves => "partition-from-slaves",
        }
    }

    /// Whether it is about etcd failing (those run on three etcd members).
    fn etcd_members(self) -> usize {
        match self {
            Self::KillEtcdNode | Self::EtcdAway => 3,
            _ => 1,
        }
    }

    fn needs_namespaces(self) -> bool {
        matches!(self, Self::Partition | Self::PartitionFromSlaves)
    }
}

/// What one run of a fault did and found.
#[derive(Clone, Debug)]
pub struct Report {
    pub fault: Fault,
    pub seed: u64,
    /// Faults injected.
    pub rounds: usize,
    /// Puts acknowledged (`PUT_OK`).
    pub acks: usize,
    /// Puts not acknowledged.
    pub failures: usize,
    /// Acknowledged puts missing from the final master or a set member.
    pub lost: usize,
    /// Per round: from the fault (from etcd's return for [`Fault::EtcdAway`]) to the first
    /// `PUT_OK` that shows the group serving again (on a new master when the fault removed it).
    pub windows: Vec<Duration>,
    /// Every broken promise; empty on a good run.
    pub problems: Vec<String>,
    /// Whether the brokers ran in network namespaces.
    pub namespaces: bool,
    /// How the puts that were not acknowledged were answered: `(answer, count)`.
    pub failure_kinds: Vec<(String, usize)>,
}

/// Runs `rounds` faults of kind `fault` on a three-broker group with `seed`. `Err` when the run
/// could not be set up here (no namespaces for a partition) with the reason.
pub fn run(fault: Fault, seed: u64, rounds: usize) -> Result<Report, String> {
    let namespaces = match Net::available() {
        Ok(()) => true,
        Err(why) if fault.needs_namespaces() => return Err(format!("no network namespaces: {why}")),
        Err(why) => {
            eprintln!("{}: on loopback ({why})", fault.name());
            false
        }
    };
    let mut rng = Rng::new(seed);
    let mut group =
        Group::start(fault.etcd_members(), 3, namespaces, &[]).map_err(|e| format!("start: {e}"))?;
    let targets = group.brokers.iter().map(|b| (b.id, b.http_addr())).collect();
    let workload =
        Workload::start(&format!("{}-s{seed}", fault.name()), targets, 2, Duration::from_millis(5));
    let mut report = Report {
        fault,
        seed,
        rounds: 0,
        acks: 0,
        failures: 0,
        lost: 0,
        windows: Vec::new(),
        problems: Vec::new(),
        namespaces,
        failure_kinds: Vec::new(),
    };
    let result = (|| -> Result<(), String> {
        for round in 0..rounds {
            let since = workload.now();
            workload
                .wait_for_ack(PATIENCE, |a| a.sent >= since)
                .ok_or_else(|| format!("round {round}: no PUT_OK before the fault\n{}", group.logs()))?;
            std::thread::sleep(Duration::from_millis(rng.range(200, 800)));
            let window = inject(fault, &mut group, &workload, &mut rng, &mut report.problems)
                .map_err(|e| format!("round {round}: {e}"))?;
            report.windows.push(window);
            report.rounds += 1;
            workload.hold(true);
            group.wait_converged(PATIENCE).map_err(|e| format!("round {round}: after the heal: {e}"))?;
            workload.hold(false);
        }
        Ok(())
    })();
    workload.hold(true);
    let master = match result {
        Ok(()) => group.wait_converged(PATIENCE),
        Err(e) => Err(e),
    };
    let Outcome { acks, failures } = workload.stop();
    report.acks = acks.len();
    report.failures = failures.len();
    let mut kinds = std::collections::BTreeMap::<String, usize>::new();
    for f in &failures {
        // "503 \"NOT_MASTER\"", or a transport error without its address.
        let kind = f.what.split(" for url").next().unwrap_or(&f.what).to_string();
        *kinds.entry(kind).or_default() += 1;
    }
    report.failure_kinds = kinds.into_iter().collect();
    group.stop_brokers();
    let log_dir = std::env::var_os("LOGSHIP_FAULT_LOG_DIR")
        .map(|d| std::path::PathBuf::from(d).join(format!("{}-s{seed}", fault.name())));
    match master {
        Err(e) => report.problems.push(e),
        Ok(master) => {
            let set: Vec<i64> = group.brokers.iter().map(|b| b.id).collect();
            match group.replicas() {
                Err(e) => report.problems.push(e),
                Ok(replicas) => {
                    report.lost = checker::lost(&acks, &replicas, master, &set);
                    report.problems.extend(checker::check(&acks, &replicas, master, &set));
                }
            }
        }
    }
    if let Some(dir) = log_dir
        && !report.problems.is_empty()
    {
        group.save_logs(&dir);
    }
    if !report.problems.is_empty() {
        report.problems.push(group.logs());
    }
    Ok(report)
}

fn gone(group: &Group, what: &str) -> String {
    format!("no PUT_OK {what} within {PATIENCE:?}\n{}", group.logs())
}

fn master_of(group: &Group) -> Result<i64, String> {
    group.wait_for_master(PATIENCE)
}

/// Injects one fault, heals it, and returns the unavailability window.
fn inject(
    fault: Fault,
    group: &mut Group,
    workload: &Workload,
    rng: &mut Rng,
    problems: &mut Vec<String>,
) -> Result<Duration, String> {
    let master = master_of(group)?;
    let slaves: Vec<i64> = group.brokers.iter().map(|b| b.id).filter(|&b| b != master).collect();
    let epoch = workload.max_epoch();
    let new_master = |a: &Ack| a.epoch > epoch && a.broker != master;
    let window = match fault {
        Fault::KillMaster => {
            group.broker(master).kill9();
            let at = workload.now();
            let ack =
                workload.wait_for_ack(PATIENCE, new_master).ok_or_else(|| gone(group, "on a new master"))?;
            group.broker(master).restart()?;
            rejoined_as_slave(group, workload, master, problems)?;
            ack.answered - at
        }
        Fault::PauseMaster => {
            group.broker(master).pause();
            let at = workload.now();
            let ack = workload.wait_for_ack(PATIENCE, new_master);
            std::thread::sleep(Duration::from_millis(rng.range(100, 1000)));
            let resumed = workload.now();
            group.broker(master).resume();
            let ack = ack.ok_or_else(|| gone(group, "on a new master while the old one is stopped"))?;
            // Let the puts that waited in its sockets be answered, then look at them.
            std::thread::sleep(Duration::from_millis(1500));
            rejoined_as_slave(group, workload, master, problems)?;
            let stale = acks_sent_after(&workload.acks(), master, epoch, at);
            if !stale.is_empty() {
                problems.push(format!(
                    "FENCING: the stopped master {master} (epoch {epoch}) acknowledged {} puts sent after SIGSTOP, first {:?}",
                    stale.len(),
                    stale[0]
                ));
            }
            // Nor may it answer PUT_OK at all once it runs again: by then a new master was
            // elected (it answered), so its lease is gone, whenever the put reached it.
            let late: Vec<Ack> = workload
                .acks()
                .into_iter()
                .filter(|a| a.broker == master && a.epoch <= epoch && a.answered > resumed)
                .collect();
            if !late.is_empty() {
                problems.push(format!(
                    "FENCING: the old master {master} (epoch {epoch}) answered {} PUT_OK after SIGCONT, after broker {} was elected; first {:?}",
                    late.len(),
                    ack.broker,
                    late[0]
                ));
            }
            ack.answered - at
        }
        Fault::KillSlave => {
            let slave = rng.pick(&slaves);
            group.broker(slave).kill9();
            let at = workload.now();
            let ack = workload
                .wait_for_ack(PATIENCE, |a| a.sent > at)
                .ok_or_else(|| gone(group, "without the slave"))?;
            std::thread::sleep(Duration::from_millis(rng.range(200, 2000)));
            group.broker(slave).restart()?;
            ack.answered - at
        }
        Fault::KillMasterAndSlave => {
            let slave = rng.pick(&slaves);
            group.broker(master).kill9();
            group.broker(slave).kill9();
            let at = workload.now();
            let ack = workload
                .wait_for_ack(PATIENCE, |a| new_master(a) && a.broker != slave)
                .ok_or_else(|| gone(group, "on the last broker"))?;
            group.broker(master).restart()?;
            group.broker(slave).restart()?;
            rejoined_as_slave(group, workload, master, problems)?;
            ack.answered - at
        }
        Fault::KillEtcdNode => {
            let member = rng.range(0, group.etcd.len() as u64 - 1) as usize;
            group.etcd.kill(member);
            let at = workload.now();
            let ack = workload
                .wait_for_ack(PATIENCE, |a| a.sent > at)
                .ok_or_else(|| gone(group, "with one etcd away"))?;
            std::thread::sleep(Duration::from_millis(rng.range(500, 2000)));
            group.etcd.restart(member);
            group.etcd.wait_healthy();
            ack.answered - at
        }
        Fault::EtcdAway => {
            // Away as a crash (kill -9: connections refused) or as a hang (SIGSTOP: requests
            // time out), as the seed says.
            let hang = rng.range(0, 1) == 1;
            for i in 0..group.etcd.len() {
                if hang {
                    group.etcd.pause(i, true);
                } else {
                    group.etcd.kill(i);
                }
            }
            let at = workload.now();
            let away = LEASE_TTL * 2 + Duration::from_millis(rng.range(0, LEASE_TTL.as_millis() as u64));
            std::thread::sleep(away);
            let back = workload.now();
            let during: Vec<Ack> =
                workload.acks().into_iter().filter(|a| a.sent > at + LEASE_TTL && a.sent < back).collect();
            if !during.is_empty() {
                problems.push(format!(
                    "FENCING: {} puts sent more than a lease after etcd went away were acknowledged, first {:?}",
                    during.len(),
                    during[0]
                ));
            }
            for i in 0..group.etcd.len() {
                if hang {
                    group.etcd.pause(i, false);
                } else {
                    group.etcd.restart(i);
                }
            }
            group.etcd.wait_healthy();
            let ack = workload
                .wait_for_ack(PATIENCE, |a| a.sent > back)
                .ok_or_else(|| gone(group, "after etcd returned"))?;
            ack.answered - back
        }
        Fault::Partition | Fault::PartitionFromSlaves => {
            let etcd_too = fault == Fault::Partition;
            let net = group.net.as_ref().ok_or("a partition needs namespaces")?;
            net.isolate((master - 1) as usize, etcd_too, false)?;
            let at = workload.now();
            let ack = if etcd_too {
                workload.wait_for_ack(PATIENCE, new_master).ok_or_else(|| gone(group, "on a new master"))
            } else {
                workload
                    .wait_for_ack(PATIENCE, |a| a.sent > at)
                    .ok_or_else(|| gone(group, "with the slaves cut off"))
            };
            std::thread::sleep(Duration::from_millis(rng.range(200, 1500)));
            if etcd_too {
                let stale = acks_sent_after(&workload.acks(), master, epoch, at + LEASE_TTL);
                if !stale.is_empty() {
                    problems.push(format!(
                        "FENCING: the cut-off master {master} (epoch {epoch}) acknowledged {} puts sent more than a lease after the cut, first {:?}",
                        stale.len(),
                        stale[0]
                    ));
                }
            } else {
                let others: Vec<Ack> =
                    workload.acks().into_iter().filter(|a| a.sent > at && a.broker != master).collect();
                if !others.is_empty() {
                    problems.push(format!(
                        "SPLIT BRAIN: with the master {master} holding its lease, broker {} acknowledged {:?}",
                        others[0].broker, others[0]
                    ));
                }
            }
            if let Some(net) = &group.net {
                net.heal();
            }
            let ack = ack?;
            if etcd_too {
                rejoined_as_slave(group, workload, master, problems)?;
            }
            ack.answered - at
        }
    };
    Ok(window)
}

/// Waits until the group is whole (the workload held meanwhile) and checks that the old master
/// `old` is not master again.
fn rejoined_as_slave(
    group: &Group,
    workload: &Workload,
    old: i64,
    problems: &mut Vec<String>,
) -> Result<(), String> {
    workload.hold(true);
    let master = group.wait_converged(PATIENCE);
    workload.hold(false);
    if master? == old {
        problems
            .push(format!("REJOIN: the old master {old} is master again instead of rejoining as a slave"));
    }
    Ok(())
}

/// The `p`-quantile (0..=1) of `windows` (nearest rank); zero when empty.
pub fn quantile(windows: &[Duration], p: f64) -> Duration {
    let mut w = windows.to_vec();
    w.sort_unstable();
    if w.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p * w.len() as f64).ceil() as usize).clamp(1, w.len());
    w[rank - 1]
}
