//! The AutoSwitch mode of the simulator ([`Protocol::AutoSwitch`](super::Protocol)): a group
//! of brokers, each running the production [`AutoSwitchDriver`] or [`AutoSwitchSlaveDriver`]
//! as a fake coordinator's group record says, over simulated links, logs and leases.
//!
//! The fake coordinator is the production pure logic ([`MemoryRecord`], [`choose_master`],
//! [`elected_record`], [`apply_set_change`]) run synchronously by the simulator, with leases in
//! virtual time; each broker keeps a production [`LeaseGuard`] fed by its renewals' answers.
//!
//! What ships, run as shipped: each broker acts on the record by the binary's failover rule
//! ([`decide`](crate::service::coordinator::decide)) and makes its role-change checks
//! ([`failover::check_promote`](crate::failover::check_promote),
//! [`failover::check_follow`](crate::failover::check_follow)); a master's puts go through the
//! master service's [`PutGate`] and [`PendingPut`], fenced by the broker's lease
//! ([`LeaseFence`]). Not yet: the brokers do not step [`failover::Member`](crate::failover::Member)
//! (the fake coordinator elects and answers set changes itself), and the drivers are stepped
//! directly rather than through the service's master and slave tasks.

mod coordinator;
mod draw;
mod faults;
mod log;
mod net;
mod oracle;
mod roles;
mod workload;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::{Bytes, BytesMut};

use crate::ConnId;
use crate::autoswitch::{BrokerId, SyncPolicy};
use crate::config::{AckOn, MasterConfig, SlaveConfig};
use crate::error::WaitError;
use crate::log::{EpochLog, LogRead, Offset};
use crate::service::coordinator::{
    Choice, ElectionPolicy, GroupRecord, LeaseFence, LeaseGuard, LeaseSnapshot, LocalRole, MemberState,
    MemoryRecord, Revision, SetChange, SetChangeRefusal, apply_set_change, choose_master, elected_record,
};
use crate::service::{
    Admission, AutoSwitchDriver, AutoSwitchSlaveDriver, IpNet, MasterControllerConfig, MasterServiceConfig,
    MemberAddress, MemberDirectory, PendingPut, PutGate, SlaveAction, SlaveControllerConfig,
    SlaveServiceConfig, SyncStateSetAuthority,
};
use crate::time::Instant;

use super::config::{FaultRates, SimConfig};
use super::rng::SimRng;
use super::shared::{
    DRAIN_LIMIT, MS, Nanos, Out, Outbox, Queue, SEC, SimConn, SimWait, Trace, nanos, take_all,
};
use super::stats::Stats;
use super::violation::{Failure, Outcome, Violation};
use coordinator::{CoordinatorAuthority, Proposals};
use draw::{Drawn, draw};
use log::{EpochDisk, SimMessage};
use oracle::first_difference;

/// The HA port of every broker.
const HA_PORT: u16 = 10912;

fn ip(idx: usize) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1 + idx as u8))
}

fn ha_addr(idx: usize) -> SocketAddr {
    SocketAddr::new(ip(idx), HA_PORT)
}

fn http_addr(idx: usize) -> SocketAddr {
    SocketAddr::new(ip(idx), 8080)
}

/// Broker ids are 1..=n; index `i` is broker `i + 1`.
fn id_of(idx: usize) -> BrokerId {
    idx as BrokerId + 1
}

fn idx_of(id: BrokerId) -> usize {
    (id - 1) as usize
}

// ------------------------------------------------------------------ nodes

type MDriver = AutoSwitchDriver<EpochDisk, SimConn, SimWait>;
type SDriver = AutoSwitchSlaveDriver<EpochDisk>;

struct MasterRole {
    rid: u64,
    driver: MDriver,
    epoch: i32,
    /// The master service's put gate, fenced by the lease the broker was elected under: it
    /// takes and acknowledges puts only while that lease's guard is open.
    gate: PutGate,
    /// The lease the broker was elected under.
    lease: u64,
    /// The master service's settings (what a put waits for).
    service: MasterServiceConfig,
    outbox: Outbox,
    proposals: Proposals,
}

struct SlaveRole {
    rid: u64,
    driver: SDriver,
    master: BrokerId,
    epoch: i32,
    conn: Option<u64>,
    attempt: Option<u64>,
}

enum Role {
    /// Up, waiting for the record to give it a role.
    Idle,
    Master(Box<MasterRole>),
    Slave(Box<SlaveRole>),
}

struct Broker {
    id: BrokerId,
    ack_on: AckOn,
    inc: u64,
    disk: Arc<EpochDisk>,
    role: Role,
    timeout: Option<Nanos>,
    down: bool,
    /// Its current lease (id) and the guard its renewals feed.
    lease: Option<(u64, LeaseGuard)>,
    /// What its master service's lease fence reads: the lease and the virtual time, as of the
    /// last [`AutoSwitchSim::refresh_fence`].
    fence_view: Arc<Mutex<FenceView>>,
    /// The highest master epoch a role change gave it since it started (-1: none), which the
    /// role-change checks weigh, as the binary's role changes do.
    given: i32,
    granting: bool,
    cut_peers: Nanos,
    cut_coord: Nanos,
    seen_rev: Revision,
    proposals_out: VecDeque<SetChange>,
    /// Where the oracle has checked its bytes against the confirmed ones.
    verified: Offset,
}

impl Broker {
    /// A lease fence for a master service elected under `lease`: open while that lease's
    /// guard is, at the virtual time the simulator last handed the broker.
    fn fence(&self, lease: u64) -> LeaseFence {
        let view = self.fence_view.clone();
        LeaseFence::new(move || {
            let v = view.lock().unwrap_or_else(PoisonError::into_inner);
            v.lease.is_some_and(|(id, snapshot)| id == lease && snapshot.is_open(v.now))
        })
    }
    /// Its role as the failover rules see it.
    fn local_role(&self) -> LocalRole {
        match &self.role {
            Role::Idle => LocalRole::None,
            Role::Master(m) => LocalRole::Master { epoch: m.epoch },
            Role::Slave(s) => LocalRole::Slave { master: s.master, epoch: s.epoch },
        }
    }

    fn peers_cut(&self, now: Nanos) -> bool {
        self.down || self.cut_peers > now
    }
    fn coord_cut(&self, now: Nanos) -> bool {
        self.down || self.cut_coord > now
    }
}

/// The lease and the time a broker's lease fence judges by: the binary's fence reads its guard
/// and its clock; the simulator hands them over right before the put path asks the fence.
#[derive(Copy, Clone, Debug)]
struct FenceView {
    now: Instant,
    lease: Option<(u64, LeaseSnapshot)>,
}

#[derive(Debug)]
enum Seg {
    Data(Bytes),
    Fin,
}

struct Conn {
    slave: usize,
    slave_rid: u64,
    master: usize,
    master_rid: u64,
    /// 0: toward the master, 1: toward the slave.
    pipes: [VecDeque<(Nanos, Seg)>; 2],
    last_ready: [Nanos; 2],
    scheduled: [bool; 2],
    master_open: bool,
    slave_open: bool,
}

const TO_MASTER: usize = 0;
const TO_SLAVE: usize = 1;

#[derive(Debug)]
enum Ev {
    Deliver {
        conn: u64,
        dir: usize,
    },
    MasterClosed {
        b: usize,
        rid: u64,
        conn: u64,
    },
    ConnectDone {
        b: usize,
        rid: u64,
        attempt: u64,
    },
    FlushDone {
        b: usize,
        rid: u64,
    },
    Restart {
        b: usize,
        inc: u64,
    },
    Put,
    FaultTick,
    CoordTick,
    RenewTick {
        b: usize,
        inc: u64,
    },
    GrantArrive {
        b: usize,
        inc: u64,
        sent_at: Nanos,
    },
    GrantReply {
        b: usize,
        inc: u64,
        lease: u64,
        sent_at: Nanos,
    },
    RenewArrive {
        b: usize,
        inc: u64,
        lease: u64,
        sent_at: Nanos,
    },
    RenewReply {
        b: usize,
        inc: u64,
        lease: u64,
        sent_at: Nanos,
        live: bool,
    },
    RecordSeen {
        b: usize,
        inc: u64,
    },
    ProposalArrive {
        b: usize,
        lease: u64,
        change: SetChange,
    },
    /// The coordinator's answer to a proposal: the set in force. `refused`: the proposal it
    /// refused (the answer applies only while that proposal is still the pending one).
    SetAnswer {
        b: usize,
        rid: u64,
        set: BTreeSet<BrokerId>,
        epoch: i32,
        refused: Option<BTreeSet<BrokerId>>,
    },
    Quiet,
}

#[derive(Debug)]
struct WaitRec {
    b: usize,
    rid: u64,
    epoch: i32,
    lease: u64,
    /// The shipped put path's part after the append: it says whether the put is acknowledged.
    pending: PendingPut,
}

/// The fake coordinator: the group record, and leases in virtual time.
#[derive(Debug, Default)]
struct Coord {
    record: MemoryRecord,
    /// Live leases: id -> (broker index, expiry).
    leases: BTreeMap<u64, (usize, Nanos)>,
    /// The lease the master's mastership was written under.
    master_lease: Option<u64>,
    next_lease: u64,
}

/// One line of the event trace.
#[derive(Clone, Debug, Hash)]
struct Rec {
    t: Nanos,
    who: String,
    what: String,
    a: u64,
    b: u64,
}

impl std::fmt::Display for Rec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { t, who, what, a, b } = self;
        write!(f, "{:>11.6}s {who:<9} {what:<26} {a:>8} {b:>8}", *t as f64 / 1e9)
    }
}

type R<T = ()> = Result<T, Violation>;

/// One deterministic run of an AutoSwitch group under faults, from a seed.
pub(crate) struct AutoSwitchSim {
    seed: u64,
    cfg: SimConfig,
    d: Drawn,
    rng: SimRng,
    now: Nanos,
    step: u64,
    quiet: bool,
    quiet_at: Nanos,
    summary: String,
    brokers: Vec<Broker>,
    conns: BTreeMap<u64, Conn>,
    coord: Coord,
    /// Coordinator -> broker and broker -> coordinator messages stay in order, per broker.
    coord_ready: Vec<[Nanos; 2]>,
    queue: Queue<Ev>,
    next_conn: u64,
    next_rid: u64,
    next_wait: u64,
    next_attempt: u64,
    waits: BTreeMap<u64, WaitRec>,
    appended: u64,
    // The oracle.
    /// The bytes of every acknowledged put, from offset 0: acknowledgements are cumulative.
    golden: Vec<u8>,
    /// The bytes confirmed anywhere, from offset 0: the first copy below any replica's
    /// confirmOffset; every other copy below a confirmOffset must equal it.
    confirmed: Vec<u8>,
    /// Which broker acknowledged in each epoch.
    ackers: BTreeMap<i32, BrokerId>,
    max_ack_epoch: i32,
    max_record_epoch: i32,
    /// The record's master must be checked against the acknowledged bytes: it just became
    /// master, or a log was cut. (Puts it acknowledges are checked as they are.)
    check_master: bool,
    stats: Stats,
    trace: Trace<Rec>,
}

impl AutoSwitchSim {
    pub(crate) fn new(seed: u64, cfg: SimConfig) -> Result<Self, crate::CoreConfigError> {
        if let Some(m) = &cfg.master {
            m.validate()?;
        }
        if let Some(s) = &cfg.slave {
            s.validate()?;
        }
        let mut rng = SimRng::new(seed);
        let d = draw(&mut rng, &cfg);
        let brokers = (0..d.brokers)
            .map(|i| Broker {
                id: id_of(i),
                ack_on: d.ack_on[i],
                inc: 0,
                disk: Arc::new(EpochDisk::default()),
                role: Role::Idle,
                timeout: None,
                down: false,
                lease: None,
                fence_view: Arc::new(Mutex::new(FenceView { now: Instant::ZERO, lease: None })),
                given: -1,
                granting: false,
                cut_peers: 0,
                cut_coord: 0,
                seen_rev: 0,
                proposals_out: VecDeque::new(),
                verified: 0,
            })
            .collect();
        let f = &d.faults;
        let acks: String = d
            .ack_on
            .iter()
            .map(|a| match a {
                AckOn::Written => 'W',
                AckOn::Flushed => 'F',
            })
            .collect();
        let summary = format!(
            "AutoSwitch, {} brokers ack_on [{acks}], batch {} B, hb {:?}, hk {:?}, lease {} s, renew {} ms, \
             not-catchup {:?}, latency {:?}+{:?}, chunk<={}, budget {} B, faults/s: crash {:.2}+{:.2} (silent {:.1}), \
             part {:.2}, coord-part {:.2}, peer-part {:.2}, reset {:.2}",
            d.brokers,
            d.master.transfer_batch_size,
            d.master.heartbeat_interval,
            d.master.housekeeping_interval,
            d.lease_ttl / SEC,
            d.renew / MS,
            d.not_catchup,
            f.latency,
            f.jitter,
            f.max_read_chunk,
            d.budget,
            f.master_crash,
            f.slave_crash,
            f.silent_crash,
            f.partition_both_ways,
            f.partition_one_way,
            f.stall,
            f.reset,
        );
        let stats = Stats { seeds: 1, brokers: d.brokers as u64, ..Stats::default() };
        let print_trace = cfg.print_trace;
        Ok(Self {
            seed,
            quiet_at: nanos(cfg.fault_time),
            cfg,
            coord_ready: vec![[0, 0]; d.brokers],
            d,
            rng,
            now: 0,
            step: 0,
            quiet: false,
            summary,
            brokers,
            conns: BTreeMap::new(),
            coord: Coord { next_lease: 1, ..Coord::default() },
            queue: Queue::default(),
            next_conn: 1,
            next_rid: 1,
            next_wait: 1,
            next_attempt: 1,
            waits: BTreeMap::new(),
            appended: 0,
            golden: Vec::new(),
            confirmed: Vec::new(),
            ackers: BTreeMap::new(),
            max_ack_epoch: 0,
            max_record_epoch: 0,
            check_master: false,
            stats,
            trace: Trace::new(print_trace),
        })
    }

    pub(crate) fn summary(&self) -> &str {
        &self.summary
    }

    pub(crate) fn run(mut self) -> Result<Outcome, Box<Failure>> {
        let result = self.start().and_then(|()| {
            while self.step()? {}
            Ok(())
        });
        self.stats.virtual_time = Duration::from_nanos(self.now);
        match result {
            Ok(()) => Ok(Outcome {
                seed: self.seed,
                stats: self.stats,
                trace_hash: self.trace.hash(),
                summary: self.summary,
            }),
            Err(violation) => Err(Box::new(Failure {
                seed: self.seed,
                at: Duration::from_nanos(self.now),
                step: self.step,
                violation,
                summary: self.summary.clone(),
                replay: self.cfg.replay_command.replace("{seed}", &format!("{:#x}", self.seed)),
                recent: self.trace.recent(),
                stats: self.stats.clone(),
            })),
        }
    }

    fn instant(&self, t: Nanos) -> Instant {
        Instant::ZERO + Duration::from_nanos(t)
    }

    fn at(&self) -> Instant {
        self.instant(self.now)
    }

    /// Hands broker `b`'s lease fence the time now and its lease's guard, as the binary's
    /// fence reads its own: called right before the put path asks the fence.
    fn refresh_fence(&self, b: usize) {
        let br = &self.brokers[b];
        let view = FenceView { now: self.at(), lease: br.lease.as_ref().map(|(id, g)| (*id, g.snapshot())) };
        *br.fence_view.lock().unwrap_or_else(PoisonError::into_inner) = view;
    }

    fn to_nanos(at: Instant) -> Nanos {
        nanos(at.saturating_duration_since(Instant::ZERO))
    }

    fn schedule(&mut self, at: Nanos, ev: Ev) {
        self.queue.schedule(self.now, at, ev);
    }

    fn rec(&mut self, who: &str, what: &str, a: u64, b: u64) {
        self.trace.record(Rec { t: self.now, who: who.into(), what: what.into(), a, b });
    }

    fn link_delay(&mut self) -> Nanos {
        nanos(self.d.faults.latency) + self.rng.range(0, nanos(self.d.faults.jitter))
    }

    /// When a message between broker `b` and the coordinator (`dir` 0: to it, 1: from it),
    /// sent now, arrives: in order per broker and direction.
    fn coord_delay(&mut self, b: usize, dir: usize) -> Nanos {
        let t = (self.now + self.link_delay()).max(self.coord_ready[b][dir]);
        self.coord_ready[b][dir] = t;
        t
    }

    fn name(idx: usize) -> String {
        format!("broker {}", id_of(idx))
    }

    fn start(&mut self) -> R {
        for b in 0..self.brokers.len() {
            self.boot(b);
        }
        self.schedule(0, Ev::CoordTick);
        self.schedule(0, Ev::FaultTick);
        self.schedule(50 * MS, Ev::Put);
        self.schedule(self.quiet_at, Ev::Quiet);
        self.check()
    }

    /// A broker (re)starts: it asks for a lease and renews it from then on.
    fn boot(&mut self, b: usize) {
        let br = &mut self.brokers[b];
        br.down = false;
        br.role = Role::Idle;
        br.timeout = None;
        br.lease = None;
        br.given = -1;
        br.granting = false;
        br.seen_rev = 0;
        br.proposals_out.clear();
        let inc = br.inc;
        self.schedule(self.now, Ev::RenewTick { b, inc });
    }

    fn step(&mut self) -> R<bool> {
        self.step += 1;
        self.stats.steps += 1;
        if self.step > self.cfg.max_steps {
            return Err(Violation::StepLimit(self.cfg.max_steps));
        }
        let mut best: Option<(Nanos, usize)> = self.queue.next_at().map(|t| (t, usize::MAX));
        for (i, br) in self.brokers.iter().enumerate() {
            if let Some(t) = br.timeout {
                if best.is_none_or(|(b, _)| t < b) {
                    best = Some((t, i));
                }
            }
        }
        let Some((t, who)) = best else {
            return Err(Violation::Livelock { node: "simulation".into(), what: "nothing left to do" });
        };
        let limit = self.quiet_at + nanos(self.cfg.liveness_timeout);
        if self.quiet && t > limit {
            self.now = limit;
            return Err(Violation::NoConvergence { detail: self.convergence().unwrap_err() });
        }
        self.now = self.now.max(t);
        if who == usize::MAX {
            let ev = self.queue.pop().expect("peeked above");
            self.on_event(ev)?;
        } else {
            self.on_timeout(who)?;
        }
        if std::env::var_os("NOCHECK").is_none() {
            self.check()?;
        }
        if self.quiet && self.convergence().is_ok() {
            self.stats.groups_converged += 1;
            return Ok(false);
        }
        Ok(true)
    }

    fn on_timeout(&mut self, b: usize) -> R {
        let now = self.at();
        self.brokers[b].timeout = None;
        match &mut self.brokers[b].role {
            Role::Master(m) => {
                m.driver.handle_timeout(now);
                self.master_run(b)
            }
            Role::Slave(s) => {
                s.driver.handle_timeout(now);
                self.slave_drive(b)
            }
            Role::Idle => Ok(()),
        }
    }

    fn on_event(&mut self, ev: Ev) -> R {
        match ev {
            Ev::Deliver { conn, dir } => self.deliver(conn, dir),
            Ev::MasterClosed { b, rid, conn } => {
                let now = self.at();
                if let Role::Master(m) = &mut self.brokers[b].role {
                    if m.rid == rid {
                        m.driver.closed(now, ConnId(conn));
                        return self.master_run(b);
                    }
                }
                Ok(())
            }
            Ev::ConnectDone { b, rid, attempt } => self.connect_done(b, rid, attempt),
            Ev::FlushDone { b, rid } => {
                let now = self.at();
                let disk = self.brokers[b].disk.clone();
                if let Role::Slave(s) = &mut self.brokers[b].role {
                    if s.rid == rid {
                        let end = crate::LogWrite::flush(&*disk);
                        s.driver.flushed(now, end);
                        return self.slave_drive(b);
                    }
                }
                Ok(())
            }
            Ev::Restart { b, inc } => {
                if self.brokers[b].inc == inc && self.brokers[b].down {
                    self.rec(&Self::name(b), "restart", 0, 0);
                    self.boot(b);
                }
                Ok(())
            }
            Ev::Put => self.put(),
            Ev::FaultTick => self.fault_tick(),
            Ev::CoordTick => self.coord_tick(),
            Ev::RenewTick { b, inc } => self.renew_tick(b, inc),
            Ev::GrantArrive { b, inc, sent_at } => {
                let lease = self.coord.next_lease;
                self.coord.next_lease += 1;
                self.coord.leases.insert(lease, (b, self.now + self.d.lease_ttl));
                let at = self.coord_delay(b, 1);
                self.schedule(at, Ev::GrantReply { b, inc, lease, sent_at });
                Ok(())
            }
            Ev::GrantReply { b, inc, lease, sent_at } => {
                let now = self.now;
                let br = &mut self.brokers[b];
                if br.inc != inc || br.down {
                    return Ok(());
                }
                br.granting = false;
                if br.coord_cut(now) {
                    // The answer is lost: the next tick asks again.
                    return Ok(());
                }
                let mut guard = LeaseGuard::new(Duration::from_nanos(self.d.lease_margin));
                guard.renewed(
                    Instant::ZERO + Duration::from_nanos(sent_at),
                    Duration::from_nanos(self.d.lease_ttl),
                );
                br.lease = Some((lease, guard));
                self.rec(&Self::name(b), "lease granted", lease, 0);
                self.apply_record(b)
            }
            Ev::RenewArrive { b, inc, lease, sent_at } => {
                let live = match self.coord.leases.get_mut(&lease) {
                    Some((_, expires)) if *expires > self.now => {
                        *expires = self.now + self.d.lease_ttl;
                        true
                    }
                    _ => false,
                };
                let at = self.coord_delay(b, 1);
                self.schedule(at, Ev::RenewReply { b, inc, lease, sent_at, live });
                Ok(())
            }
            Ev::RenewReply { b, inc, lease, sent_at, live } => {
                let now = self.now;
                let ttl = Duration::from_nanos(self.d.lease_ttl);
                let br = &mut self.brokers[b];
                if br.inc != inc || br.coord_cut(now) {
                    return Ok(());
                }
                let Some((id, guard)) = br.lease.as_mut() else { return Ok(()) };
                if *id != lease {
                    return Ok(());
                }
                if live {
                    guard.renewed(Instant::ZERO + Duration::from_nanos(sent_at), ttl);
                } else {
                    guard.lost();
                    br.lease = None;
                    self.rec(&Self::name(b), "lease lost", lease, 0);
                }
                self.apply_record(b)
            }
            Ev::RecordSeen { b, inc } => {
                let br = &self.brokers[b];
                if br.inc == inc && !br.coord_cut(self.now) {
                    self.apply_record(b)?;
                }
                Ok(())
            }
            Ev::ProposalArrive { b, lease, change } => self.proposal_arrive(b, lease, change),
            Ev::SetAnswer { b, rid, set, epoch, refused } => {
                let now = self.now;
                if self.brokers[b].coord_cut(now) && !self.brokers[b].down {
                    // Held in the connection until the broker is reachable again.
                    let at = self.brokers[b].cut_coord;
                    self.schedule(at, Ev::SetAnswer { b, rid, set, epoch, refused });
                    return Ok(());
                }
                let at = self.at();
                if let Role::Master(m) = &mut self.brokers[b].role {
                    // A refusal of a proposal the master has replaced since must not end the
                    // newer pending change (seed 0x72): the coordinator may still commit it.
                    let pending = m.driver.master().sync_state_set().pending.as_ref();
                    if m.rid == rid && refused.as_ref().is_none_or(|r| pending == Some(r)) {
                        // The coordinator's answer is the record's set: never stale, so a
                        // refusal is the driver's bug.
                        m.driver.set_sync_state_set(at, set, epoch).map_err(|e| {
                            Violation::DriverRefused {
                                broker: id_of(b),
                                role: "master",
                                error: e.to_string(),
                            }
                        })?;
                        return self.master_run(b);
                    }
                }
                Ok(())
            }
            Ev::Quiet => {
                self.quiet = true;
                self.rec("FAULT", "quiet: heal, restart all", 0, 0);
                for b in 0..self.brokers.len() {
                    self.brokers[b].cut_peers = self.now;
                    self.brokers[b].cut_coord = self.now;
                    if self.brokers[b].down {
                        self.boot(b);
                    }
                }
                Ok(())
            }
        }
    }
}
