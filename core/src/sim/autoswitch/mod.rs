//! The AutoSwitch mode of the simulator ([`Protocol::AutoSwitch`](super::Protocol)): a group
//! of brokers, each running the production [`AutoSwitchDriver`] or [`AutoSwitchSlaveDriver`]
//! as a fake coordinator's group record says, over simulated links, logs and leases.
//!
//! The fake coordinator is the production pure logic ([`MemoryRecord`], [`choose_master`],
//! [`elected_record`], [`apply_set_change`]) run synchronously by the simulator, with leases in
//! virtual time; each broker keeps a production [`LeaseGuard`] fed by its renewals' answers.

mod log;

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
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
    Choice, ElectionPolicy, GroupRecord, LeaseGuard, MemberState, MemoryRecord, Revision, SetChange,
    SetChangeRefusal, apply_set_change, choose_master, elected_record,
};
use crate::service::{
    Admission, AutoSwitchDriver, AutoSwitchSlaveDriver, ConnSink, IpNet, MasterControllerConfig,
    MasterServiceConfig, MemberAddress, MemberDirectory, SlaveAction, SlaveControllerConfig,
    SlaveServiceConfig, SyncStateSetAuthority, Transmit, WaitSink,
};
use crate::time::Instant;

use super::config::{FaultRates, SimConfig};
use super::rng::SimRng;
use super::stats::Stats;
use super::violation::{Failure, Outcome, Violation};
use log::EpochDisk;

type Nanos = u64;
const MS: Nanos = 1_000_000;
const SEC: Nanos = 1_000_000_000;
/// Driver actions in one go before a node counts as spinning.
const DRAIN_LIMIT: usize = 100_000;
/// Events kept for a failure report.
const RECENT: usize = 200;
/// The HA port of every broker.
const HA_PORT: u16 = 10912;

fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

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

// ------------------------------------------------------------------ sinks

#[derive(Debug)]
enum Out {
    Transmit { conn: u64, transmit: Transmit },
    Close { conn: u64 },
    WaitDone { id: u64, result: Result<Offset, WaitError> },
}

type Outbox = Arc<Mutex<VecDeque<Out>>>;

fn push(outbox: &Outbox, out: Out) {
    outbox.lock().unwrap_or_else(PoisonError::into_inner).push_back(out);
}

fn take_all(outbox: &Outbox) -> Vec<Out> {
    outbox.lock().unwrap_or_else(PoisonError::into_inner).drain(..).collect()
}

struct SimConn {
    conn: u64,
    outbox: Outbox,
}

impl ConnSink for SimConn {
    fn transmit(&mut self, transmit: Transmit) {
        push(&self.outbox, Out::Transmit { conn: self.conn, transmit });
    }
    fn close(&mut self) {
        push(&self.outbox, Out::Close { conn: self.conn });
    }
}

struct SimWait {
    id: u64,
    outbox: Outbox,
}

impl WaitSink for SimWait {
    fn complete(self, result: Result<Offset, WaitError>) {
        push(&self.outbox, Out::WaitDone { id: self.id, result });
    }
}

type Proposals = Arc<Mutex<Vec<(BTreeSet<BrokerId>, i32)>>>;

/// The master's sync-state-set authority: every proposal goes to the fake coordinator, whose
/// answer comes later (a pending change).
struct CoordinatorAuthority {
    proposals: Proposals,
}

impl SyncStateSetAuthority for CoordinatorAuthority {
    fn propose(
        &mut self,
        proposed: &BTreeSet<BrokerId>,
        _applied: &BTreeSet<BrokerId>,
        epoch: i32,
    ) -> Option<(BTreeSet<BrokerId>, i32)> {
        self.proposals.lock().unwrap_or_else(PoisonError::into_inner).push((proposed.clone(), epoch));
        None
    }
}

// ------------------------------------------------------------------ nodes

type MDriver = AutoSwitchDriver<EpochDisk, SimConn, SimWait>;
type SDriver = AutoSwitchSlaveDriver<EpochDisk>;

struct MasterRole {
    rid: u64,
    driver: MDriver,
    epoch: i32,
    /// The lease the broker was elected under: it acknowledges only while that lease's guard
    /// is open.
    lease: u64,
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
    granting: bool,
    cut_peers: Nanos,
    cut_coord: Nanos,
    seen_rev: Revision,
    proposals_out: VecDeque<SetChange>,
    /// Where the oracle has checked its bytes against the confirmed ones.
    verified: Offset,
}

impl Broker {
    fn guard_open(&self, lease: u64, now: Instant) -> bool {
        self.lease.as_ref().is_some_and(|(id, guard)| *id == lease && guard.is_open(now))
    }
    fn peers_cut(&self, now: Nanos) -> bool {
        self.down || self.cut_peers > now
    }
    fn coord_cut(&self, now: Nanos) -> bool {
        self.down || self.cut_coord > now
    }
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

/// What one seed runs with.
#[derive(Clone, Debug)]
struct Drawn {
    brokers: usize,
    master: MasterConfig,
    slave: SlaveConfig,
    ack_on: Vec<AckOn>,
    faults: FaultRates,
    lease_ttl: Nanos,
    lease_margin: Nanos,
    renew: Nanos,
    not_catchup: Duration,
    put_gap: (Nanos, Nanos),
    max_message: u64,
    wait_max: Nanos,
    budget: u64,
}

fn draw(rng: &mut SimRng, cfg: &SimConfig) -> Drawn {
    let brokers = cfg.slaves.map_or_else(|| rng.range(2, 5) as usize, |s| s + 1).clamp(2, 5);
    let hb = rng.range(50, 300) * MS;
    let hk = hb * rng.range(4, 10);
    let master = cfg.master.clone().unwrap_or_else(|| MasterConfig {
        transfer_batch_size: rng.pick(&[64u32, 512, 4096, 32 * 1024]),
        heartbeat_interval: Duration::from_nanos(hb),
        housekeeping_interval: Duration::from_nanos(hk),
        first_report_timeout: Duration::from_nanos(hk),
        ..MasterConfig::default()
    });
    let slave = cfg.slave.clone().unwrap_or_else(|| SlaveConfig {
        heartbeat_interval: Duration::from_nanos(hb),
        housekeeping_interval: Duration::from_nanos(hk),
        reconnect_interval: Duration::from_nanos(rng.range(50, 500) * MS),
        ..SlaveConfig::default()
    });
    let ack_mode = rng.below(3);
    let ack_on = (0..brokers)
        .map(|_| match cfg.slave.as_ref().map(|s| s.ack_on) {
            Some(a) => a,
            None => match ack_mode {
                0 => AckOn::Written,
                1 => AckOn::Flushed,
                _ => rng.pick(&[AckOn::Written, AckOn::Flushed]),
            },
        })
        .collect();
    let faults = cfg.faults.clone().unwrap_or_else(|| {
        let mut f = FaultRates::none();
        f.latency = Duration::from_nanos(rng.range(1, 5) * MS);
        f.jitter = Duration::from_nanos(rng.range(0, 5) * MS);
        f.max_read_chunk = rng.pick(&[16usize, 100, 4096, usize::MAX]);
        let on = |rng: &mut SimRng, lo: u64, hi: u64| {
            if rng.chance(0.6) { rng.range(lo, hi) as f64 / 100.0 } else { 0.0 }
        };
        f.master_crash = on(rng, 2, 15);
        f.slave_crash = on(rng, 2, 15);
        f.silent_crash = rng.pick(&[0.0, 0.5, 1.0]);
        f.partition_both_ways = on(rng, 2, 15);
        f.partition_one_way = on(rng, 2, 15);
        f.stall = on(rng, 2, 15);
        f.reset = on(rng, 5, 40);
        f
    });
    let lease_ttl = rng.range(2, 3) * SEC;
    Drawn {
        brokers,
        master,
        slave,
        ack_on,
        faults,
        lease_ttl,
        lease_margin: 500 * MS,
        renew: rng.range(200, 500) * MS,
        not_catchup: Duration::from_nanos(rng.range(1, 5) * SEC),
        put_gap: (rng.range(1, 10) * MS, rng.range(10, 100) * MS),
        max_message: rng.range(8, 600),
        wait_max: rng.range(100, 3000) * MS,
        budget: cfg.max_bytes,
    }
}

/// FNV-1a, 64 bits: a stable hash for the event trace.
struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01B3);
        }
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
    queue: BTreeMap<(Nanos, u64), Ev>,
    seq: u64,
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
    hash: Fnv,
    recent: VecDeque<String>,
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
            queue: BTreeMap::new(),
            seq: 0,
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
            hash: Fnv(0xCBF2_9CE4_8422_2325),
            recent: VecDeque::new(),
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
                trace_hash: self.hash.finish(),
                summary: self.summary,
            }),
            Err(violation) => Err(Box::new(Failure {
                seed: self.seed,
                at: Duration::from_nanos(self.now),
                step: self.step,
                violation,
                summary: self.summary.clone(),
                replay: self.cfg.replay_command.replace("{seed}", &format!("{:#x}", self.seed)),
                recent: self.recent.iter().cloned().collect(),
                stats: self.stats.clone(),
            })),
        }
    }

    // ------------------------------------------------------------ plumbing

    fn instant(&self, t: Nanos) -> Instant {
        Instant::ZERO + Duration::from_nanos(t)
    }

    fn at(&self) -> Instant {
        self.instant(self.now)
    }

    fn to_nanos(at: Instant) -> Nanos {
        nanos(at.saturating_duration_since(Instant::ZERO))
    }

    fn schedule(&mut self, at: Nanos, ev: Ev) {
        self.seq += 1;
        self.queue.insert((at.max(self.now), self.seq), ev);
    }

    fn rec(&mut self, who: &str, what: &str, a: u64, b: u64) {
        (self.now, who, what, a, b).hash(&mut self.hash);
        let line = format!("{:>11.6}s {who:<9} {what:<26} {a:>8} {b:>8}", self.now as f64 / 1e9);
        if self.cfg.print_trace {
            eprintln!("{line}");
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(line);
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

    // ------------------------------------------------------------ the loop

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
        let mut best: Option<(Nanos, usize)> = self.queue.keys().next().map(|&(t, _)| (t, usize::MAX));
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
            let (_, ev) = self.queue.pop_first().expect("peeked above");
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

    // ------------------------------------------------------------ the coordinator

    fn renew_tick(&mut self, b: usize, inc: u64) -> R {
        let now = self.now;
        let br = &self.brokers[b];
        if br.inc != inc || br.down {
            return Ok(());
        }
        if !br.coord_cut(now) {
            match &br.lease {
                None if !br.granting => {
                    self.brokers[b].granting = true;
                    let at = self.coord_delay(b, 0);
                    self.schedule(at, Ev::GrantArrive { b, inc, sent_at: now });
                }
                None => {}
                Some((lease, _)) => {
                    let lease = *lease;
                    let at = self.coord_delay(b, 0);
                    self.schedule(at, Ev::RenewArrive { b, inc, lease, sent_at: now });
                }
            }
            self.send_proposals(b);
        }
        let at = now + self.d.renew;
        self.schedule(at, Ev::RenewTick { b, inc });
        Ok(())
    }

    fn coord_tick(&mut self) -> R {
        let now = self.now;
        let expired: Vec<u64> =
            self.coord.leases.iter().filter(|(_, (_, exp))| *exp <= now).map(|(&id, _)| id).collect();
        for id in expired {
            let (b, _) = self.coord.leases.remove(&id).expect("listed");
            self.stats.lease_expiries += 1;
            self.rec(&Self::name(b), "lease expired", id, 0);
        }
        let master_live = self.coord.master_lease.is_some_and(|l| self.coord.leases.contains_key(&l));
        let mut live: BTreeMap<usize, u64> = BTreeMap::new();
        for (&id, &(b, _)) in &self.coord.leases {
            live.insert(b, id);
        }
        let members: Vec<MemberState> = live
            .keys()
            .map(|&b| {
                let disk = &self.brokers[b].disk;
                MemberState {
                    broker_id: id_of(b),
                    epoch: disk.epochs().last().map_or(0, |e| e.epoch),
                    max_offset: disk.bounds().max,
                    ha_addr: ha_addr(b),
                    http_addr: http_addr(b),
                }
            })
            .collect();
        let (rev, record) = self.coord.record.read();
        let record = record.cloned();
        if let Choice::Elect { winner, .. } =
            choose_master(record.as_ref(), master_live, &members, ElectionPolicy::default())
        {
            let w = idx_of(winner);
            let state = members.iter().find(|m| m.broker_id == winner).expect("a live member won");
            let new = elected_record(record.as_ref(), state)
                .map_err(|e| Violation::Panic { message: format!("election: {e}") })?;
            if new.master_epoch <= self.max_record_epoch {
                return Err(Violation::EpochWentBack {
                    what: "election",
                    epoch: new.master_epoch,
                    previous: self.max_record_epoch,
                });
            }
            self.max_record_epoch = new.master_epoch;
            let epoch = new.master_epoch;
            self.coord
                .record
                .compare_and_swap(rev, new)
                .map_err(|e| Violation::Panic { message: format!("record: {e}") })?;
            self.coord.master_lease = Some(live[&w]);
            self.stats.elections += 1;
            self.rec(&Self::name(w), "elected", epoch as u64, state.max_offset);
            self.notify_all();
        }
        self.schedule(now + 100 * MS, Ev::CoordTick);
        Ok(())
    }

    /// Every broker the coordinator reaches learns the record soon (a watch).
    fn notify_all(&mut self) {
        for b in 0..self.brokers.len() {
            if !self.brokers[b].coord_cut(self.now) {
                let inc = self.brokers[b].inc;
                let at = self.coord_delay(b, 1);
                self.schedule(at, Ev::RecordSeen { b, inc });
            }
        }
    }

    /// Broker `b` acts on the record: becomes its master if elected under its current lease,
    /// else follows the record's master.
    fn apply_record(&mut self, b: usize) -> R {
        let (rev, record) = self.coord.record.read();
        let Some(record) = record.cloned() else { return Ok(()) };
        let br = &mut self.brokers[b];
        if br.down {
            return Ok(());
        }
        br.seen_rev = rev;
        if record.master_id == br.id {
            let lease = br.lease.as_ref().map(|(id, _)| *id);
            let elected_now = lease.is_some() && lease == self.coord.master_lease;
            let already = matches!(&br.role, Role::Master(m) if m.epoch == record.master_epoch);
            if elected_now && !already {
                return self.become_master(b, &record, lease.expect("checked"));
            }
        } else {
            let already = matches!(&br.role, Role::Slave(s) if s.master == record.master_id && s.epoch == record.master_epoch);
            if !already {
                return self.become_slave(b, record.master_id, record.master_epoch);
            }
        }
        Ok(())
    }

    fn send_proposals(&mut self, b: usize) {
        let lease = self.brokers[b].lease.as_ref().map_or(0, |(id, _)| *id);
        while let Some(change) = self.brokers[b].proposals_out.pop_front() {
            let at = self.coord_delay(b, 0);
            self.schedule(at, Ev::ProposalArrive { b, lease, change });
        }
    }

    fn proposal_arrive(&mut self, b: usize, lease: u64, change: SetChange) -> R {
        let (rev, record) = self.coord.record.read();
        let Some(record) = record.cloned() else { return Ok(()) };
        let holds = self.coord.master_lease == Some(lease) && self.coord.leases.contains_key(&lease);
        let result = if holds {
            apply_set_change(&record, &change)
        } else {
            Err(SetChangeRefusal::MastershipLost(change.proposer))
        };
        let rid = match &self.brokers[b].role {
            Role::Master(m) if m.epoch == change.master_epoch => m.rid,
            _ => 0,
        };
        match result {
            Ok(new) => {
                let (set, epoch) = (new.sync_state_set.clone(), new.sync_state_set_epoch);
                if set.len() < record.sync_state_set.len() {
                    self.stats.set_shrinks += 1;
                } else {
                    self.stats.set_expands += 1;
                }
                self.coord
                    .record
                    .compare_and_swap(rev, new)
                    .map_err(|e| Violation::Panic { message: format!("record: {e}") })?;
                self.rec(&Self::name(b), "set committed", set.len() as u64, epoch as u64);
                let at = self.coord_delay(b, 1);
                self.schedule(at, Ev::SetAnswer { b, rid, set, epoch, refused: None });
            }
            Err(refusal) => {
                self.stats.set_proposals_refused += 1;
                self.rec(&Self::name(b), "set refused", change.new_set.len() as u64, 0);
                // The master of the record's epoch learns the set in force, which ends its
                // pending proposal; any other proposer is no master any more.
                let current =
                    record.master_id == change.proposer && record.master_epoch == change.master_epoch;
                if current && !matches!(refusal, SetChangeRefusal::MastershipLost(_)) {
                    let at = self.coord_delay(b, 1);
                    self.schedule(
                        at,
                        Ev::SetAnswer {
                            b,
                            rid,
                            set: record.sync_state_set.clone(),
                            epoch: record.sync_state_set_epoch,
                            refused: Some(change.new_set.clone()),
                        },
                    );
                }
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------ roles

    /// Ends the broker's current role. `silent`: a machine crash, peers are told nothing.
    fn end_role(&mut self, b: usize, silent: bool) -> R {
        let role = std::mem::replace(&mut self.brokers[b].role, Role::Idle);
        self.brokers[b].timeout = None;
        match role {
            Role::Idle => {}
            Role::Master(mut m) => {
                if !silent {
                    m.driver.shutdown();
                }
                for out in take_all(&m.outbox) {
                    if let Out::WaitDone { id, result } = out {
                        self.wait_done(id, result)?;
                    }
                }
                let rid = m.rid;
                let conns: Vec<u64> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.master == b && c.master_rid == rid)
                    .map(|(&k, _)| k)
                    .collect();
                for conn in conns {
                    let c = self.conns.get_mut(&conn).expect("listed");
                    c.master_open = false;
                    c.pipes[TO_MASTER].clear();
                    if !silent {
                        self.send(conn, TO_SLAVE, Seg::Fin);
                    }
                }
                // Waits the driver still held are gone with it (a crash).
                let lost: Vec<u64> =
                    self.waits.iter().filter(|(_, w)| w.b == b && w.rid == rid).map(|(&k, _)| k).collect();
                for id in lost {
                    self.waits.remove(&id);
                    self.stats.puts_not_replicated += 1;
                }
            }
            Role::Slave(s) => {
                if let Some(conn) = s.conn {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.slave_open = false;
                        c.pipes[TO_SLAVE].clear();
                    }
                    if !silent {
                        self.send(conn, TO_MASTER, Seg::Fin);
                    }
                }
            }
        }
        Ok(())
    }

    fn become_master(&mut self, b: usize, record: &GroupRecord, lease: u64) -> R {
        self.end_role(b, false)?;
        let controller = MasterControllerConfig {
            broker_id: id_of(b),
            epoch: record.master_epoch,
            sync_state_set: record.sync_state_set.clone(),
            sync_state_set_epoch: record.sync_state_set_epoch,
            sync: SyncPolicy {
                all_ack_in_sync_state_set: true,
                in_sync_replicas: 1,
                min_in_sync_replicas: 1,
            },
            ha_max_time_slave_not_catchup: self.d.not_catchup,
            authority: None,
            // Each broker's HA address, as a coordinator's members publish them: a slave's
            // claimed id must come from its broker's address.
            members: Some(MemberDirectory::new({
                let brokers = self.brokers.len();
                move |id| {
                    let idx = usize::try_from(id - 1).ok().filter(|&i| i < brokers)?;
                    Some(MemberAddress::Ip(ip(idx)))
                }
            })),
        };
        let nets = (0..self.brokers.len()).map(|i| IpNet::new(ip(i), 32).expect("valid prefix")).collect();
        let config = MasterServiceConfig {
            core: self.d.master.clone(),
            admission: Admission::allow_list(nets),
            controller: Some(controller),
            ..MasterServiceConfig::default()
        };
        let outbox = Outbox::default();
        let proposals = Proposals::default();
        let authority = Box::new(CoordinatorAuthority { proposals: proposals.clone() });
        let disk = self.brokers[b].disk.clone();
        let driver = AutoSwitchDriver::with_authority(&config, self.at(), disk, authority).map_err(|e| {
            Violation::DriverRefused { broker: id_of(b), role: "master", error: e.to_string() }
        })?;
        let rid = self.next_rid;
        self.next_rid += 1;
        self.rec(
            &Self::name(b),
            "becomes master",
            record.master_epoch as u64,
            self.brokers[b].disk.bounds().max,
        );
        self.check_master = true;
        self.brokers[b].role = Role::Master(Box::new(MasterRole {
            rid,
            driver,
            epoch: record.master_epoch,
            lease,
            outbox,
            proposals,
        }));
        self.master_run(b)
    }

    fn become_slave(&mut self, b: usize, master: BrokerId, epoch: i32) -> R {
        self.end_role(b, false)?;
        let m = idx_of(master);
        let mut core = self.d.slave.clone();
        core.ack_on = self.brokers[b].ack_on;
        let config = SlaveServiceConfig {
            core,
            controller: Some(SlaveControllerConfig {
                broker_id: id_of(b),
                master_broker_id: master,
                master_epoch: epoch,
                ..SlaveControllerConfig::default()
            }),
            ..SlaveServiceConfig::new(ha_addr(m).to_string())
        };
        let disk = self.brokers[b].disk.clone();
        let driver = AutoSwitchSlaveDriver::new(&config, self.at(), disk).map_err(|e| {
            Violation::DriverRefused { broker: id_of(b), role: "slave", error: e.to_string() }
        })?;
        let rid = self.next_rid;
        self.next_rid += 1;
        self.rec(&Self::name(b), "follows", master as u64, epoch as u64);
        self.brokers[b].role =
            Role::Slave(Box::new(SlaveRole { rid, driver, master, epoch, conn: None, attempt: None }));
        self.slave_drive(b)
    }

    // ------------------------------------------------------------ drivers

    /// Drains the master driver and performs what it handed its sinks.
    fn master_run(&mut self, b: usize) -> R {
        for _ in 0..DRAIN_LIMIT {
            let now = self.at();
            let Role::Master(m) = &mut self.brokers[b].role else { return Ok(()) };
            let at = m.driver.drain();
            let (rid, epoch) = (m.rid, m.epoch);
            let outs = take_all(&m.outbox);
            let proposals: Vec<_> =
                m.proposals.lock().unwrap_or_else(PoisonError::into_inner).drain(..).collect();
            self.brokers[b].timeout = Some(Self::to_nanos(at));
            for (new_set, set_epoch) in proposals {
                self.brokers[b].proposals_out.push_back(SetChange {
                    proposer: id_of(b),
                    master_epoch: epoch,
                    sync_state_set_epoch: set_epoch,
                    new_set,
                });
            }
            if !self.brokers[b].coord_cut(self.now) {
                self.send_proposals(b);
            }
            if outs.is_empty() {
                return Ok(());
            }
            let mut sent = Vec::new();
            for out in outs {
                match out {
                    Out::Transmit { conn, transmit } => {
                        let open =
                            self.conns.get(&conn).is_some_and(|c| c.master_open && c.master_rid == rid);
                        if !open {
                            continue;
                        }
                        let mut bytes = BytesMut::from(&transmit.header[..]);
                        if let Some(span) = transmit.body {
                            let body = self.brokers[b].disk.read(span).map_err(|e| Violation::Panic {
                                message: format!("master {} cannot read its span {span:?}: {e}", id_of(b)),
                            })?;
                            bytes.extend_from_slice(&body);
                        }
                        self.send(conn, TO_SLAVE, Seg::Data(bytes.freeze()));
                        sent.push(conn);
                    }
                    Out::Close { conn } => {
                        if let Some(c) = self.conns.get_mut(&conn) {
                            if c.master_open && c.master_rid == rid {
                                c.master_open = false;
                                c.pipes[TO_MASTER].clear();
                                self.send(conn, TO_SLAVE, Seg::Fin);
                                let lag = self.rng.range(0, 3 * MS);
                                self.schedule(self.now + lag, Ev::MasterClosed { b, rid, conn });
                            }
                        }
                    }
                    Out::WaitDone { id, result } => self.wait_done(id, result)?,
                }
            }
            if let Role::Master(m) = &mut self.brokers[b].role {
                for conn in sent {
                    m.driver.sent(now, ConnId(conn));
                }
            }
        }
        Err(Violation::Livelock { node: Self::name(b), what: "master driver never settles" })
    }

    fn slave_drive(&mut self, b: usize) -> R {
        for _ in 0..DRAIN_LIMIT {
            let now = self.at();
            let Role::Slave(s) = &mut self.brokers[b].role else { return Ok(()) };
            let (rid, conn) = (s.rid, s.conn);
            match s.driver.next_action(now) {
                SlaveAction::SleepUntil(at) => {
                    self.brokers[b].timeout = Some(Self::to_nanos(at));
                    return Ok(());
                }
                SlaveAction::Connect => {
                    let attempt = self.next_attempt;
                    self.next_attempt += 1;
                    s.attempt = Some(attempt);
                    let at = self.now + self.link_delay() * 2;
                    self.schedule(at, Ev::ConnectDone { b, rid, attempt });
                }
                SlaveAction::Send(bytes) => {
                    if let Some(conn) = conn {
                        self.send(conn, TO_MASTER, Seg::Data(bytes));
                    }
                }
                SlaveAction::Flush => {
                    let at = self.now + self.rng.range(0, 5 * MS);
                    self.schedule(at, Ev::FlushDone { b, rid });
                }
                SlaveAction::Disconnect => {
                    s.attempt = None;
                    if let Some(conn) = s.conn.take() {
                        if let Some(c) = self.conns.get_mut(&conn) {
                            c.slave_open = false;
                            c.pipes[TO_SLAVE].clear();
                        }
                        self.send(conn, TO_MASTER, Seg::Fin);
                    }
                }
            }
        }
        Err(Violation::Livelock { node: Self::name(b), what: "slave driver never sleeps" })
    }

    fn connect_done(&mut self, b: usize, rid: u64, attempt: u64) -> R {
        let now = self.at();
        let Role::Slave(s) = &self.brokers[b].role else { return Ok(()) };
        if s.rid != rid || s.attempt != Some(attempt) {
            return Ok(());
        }
        let m = idx_of(s.master);
        let reachable = !self.brokers[b].peers_cut(self.now) && !self.brokers[m].peers_cut(self.now);
        let master_rid = match &self.brokers[m].role {
            Role::Master(mr) if reachable => Some(mr.rid),
            _ => None,
        };
        let Some(master_rid) = master_rid else {
            if let Role::Slave(s) = &mut self.brokers[b].role {
                s.attempt = None;
                s.driver.closed(now);
            }
            return self.slave_drive(b);
        };
        let conn = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            conn,
            Conn {
                slave: b,
                slave_rid: rid,
                master: m,
                master_rid,
                pipes: [VecDeque::new(), VecDeque::new()],
                last_ready: [0, 0],
                scheduled: [false, false],
                master_open: true,
                slave_open: true,
            },
        );
        self.rec(&Self::name(b), "connected", id_of(m) as u64, conn);
        if let Role::Master(mr) = &mut self.brokers[m].role {
            let sink = SimConn { conn, outbox: mr.outbox.clone() };
            mr.driver.accept(now, ConnId(conn), SocketAddr::new(ip(b), 40000 + conn as u16), sink);
        }
        self.master_run(m)?;
        if let Role::Slave(s) = &mut self.brokers[b].role {
            s.attempt = None;
            s.conn = Some(conn);
            s.driver.connected(now);
        }
        self.slave_drive(b)
    }

    // ------------------------------------------------------------ the network

    fn send(&mut self, conn: u64, dir: usize, seg: Seg) {
        let delay = self.link_delay();
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return };
        let ready = (now + delay).max(c.last_ready[dir]);
        c.last_ready[dir] = ready;
        c.pipes[dir].push_back((ready, seg));
        if !c.scheduled[dir] {
            c.scheduled[dir] = true;
            self.schedule(ready, Ev::Deliver { conn, dir });
        }
    }

    fn deliver(&mut self, conn: u64, dir: usize) -> R {
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return Ok(()) };
        c.scheduled[dir] = false;
        let (slave, master) = (c.slave, c.master);
        // The receiver is still there, on this connection.
        let alive = if dir == TO_SLAVE {
            c.slave_open
                && matches!(&self.brokers[slave].role, Role::Slave(s) if s.rid == c.slave_rid && s.conn == Some(conn))
        } else {
            c.master_open && matches!(&self.brokers[master].role, Role::Master(m) if m.rid == c.master_rid)
        };
        if !alive {
            c.pipes[dir].clear();
            if c.pipes[TO_MASTER].is_empty()
                && c.pipes[TO_SLAVE].is_empty()
                && !c.master_open
                && !c.slave_open
            {
                self.conns.remove(&conn);
            }
            return Ok(());
        }
        let cut = self.brokers[slave].cut_peers.max(self.brokers[master].cut_peers);
        let Some(&(ready, _)) = c.pipes[dir].front() else { return Ok(()) };
        let mut wait_until = ready.max(if cut > now { cut } else { 0 });
        if dir == TO_SLAVE {
            if let Role::Slave(s) = &self.brokers[slave].role {
                if !s.driver.wants_read() {
                    wait_until = wait_until.max(now + MS);
                }
            }
        }
        if wait_until > now {
            c.scheduled[dir] = true;
            self.schedule(wait_until, Ev::Deliver { conn, dir });
            return Ok(());
        }
        let (_, seg) = c.pipes[dir].pop_front().expect("peeked");
        let seg = match seg {
            Seg::Data(mut data) => {
                let chunk = self.rng.range(1, self.d.faults.max_read_chunk.min(1 << 20) as u64 + 1) as usize;
                if data.len() > chunk {
                    let rest = data.split_off(chunk);
                    c.pipes[dir].push_front((now, Seg::Data(rest)));
                }
                Seg::Data(data)
            }
            Seg::Fin => Seg::Fin,
        };
        if let Some(&(next, _)) = c.pipes[dir].front() {
            c.scheduled[dir] = true;
            self.schedule(next.max(now), Ev::Deliver { conn, dir });
        }
        let at = self.at();
        if dir == TO_SLAVE {
            let Role::Slave(s) = &mut self.brokers[slave].role else { return Ok(()) };
            match seg {
                Seg::Data(data) => s.driver.received(at, data),
                Seg::Fin => {
                    s.conn = None;
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.slave_open = false;
                    }
                    s.driver.closed(at);
                }
            }
            self.slave_drive(slave)
        } else {
            let Role::Master(m) = &mut self.brokers[master].role else { return Ok(()) };
            match seg {
                Seg::Data(data) => m.driver.received(at, ConnId(conn), data),
                Seg::Fin => {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.master_open = false;
                    }
                    m.driver.closed(at, ConnId(conn));
                }
            }
            self.master_run(master)
        }
    }

    fn reset(&mut self, conn: u64) -> R {
        let Some(c) = self.conns.get_mut(&conn) else { return Ok(()) };
        c.pipes[TO_MASTER].clear();
        c.pipes[TO_SLAVE].clear();
        let (slave, master, sg, mg) = (c.slave, c.master, c.slave_rid, c.master_rid);
        let (so, mo) = (c.slave_open, c.master_open);
        c.slave_open = false;
        c.master_open = false;
        self.stats.connection_resets += 1;
        self.rec("FAULT", "reset", conn, 0);
        let at = self.at();
        if so {
            if let Role::Slave(s) = &mut self.brokers[slave].role {
                if s.rid == sg && s.conn == Some(conn) {
                    s.conn = None;
                    s.driver.closed(at);
                    self.slave_drive(slave)?;
                }
            }
        }
        if mo {
            if let Role::Master(m) = &mut self.brokers[master].role {
                if m.rid == mg {
                    m.driver.closed(at, ConnId(conn));
                    self.master_run(master)?;
                }
            }
        }
        Ok(())
    }

    // ------------------------------------------------------------ workload and faults

    fn put(&mut self) -> R {
        if self.quiet || self.appended >= self.d.budget {
            return Ok(());
        }
        let gap = self.rng.range(self.d.put_gap.0, self.d.put_gap.1);
        self.schedule(self.now + gap, Ev::Put);
        let masters: Vec<usize> =
            (0..self.brokers.len()).filter(|&b| matches!(self.brokers[b].role, Role::Master(_))).collect();
        if masters.is_empty() {
            return Ok(());
        }
        let b = masters[self.rng.below(masters.len() as u64) as usize];
        let now = self.at();
        let (rid, epoch, lease) = match &self.brokers[b].role {
            Role::Master(m) => (m.rid, m.epoch, m.lease),
            _ => unreachable!("picked a master"),
        };
        if !self.brokers[b].guard_open(lease, now) {
            self.stats.puts_refused_guard_closed += 1;
            return Ok(());
        }
        let len = self.rng.range(1, self.d.max_message + 1);
        let generation = (epoch as u64) << 8 | id_of(b) as u64;
        let (start, end) = self.brokers[b].disk.put(generation, len);
        self.appended += len;
        self.stats.puts += 1;
        let id = self.next_wait;
        self.next_wait += 1;
        self.waits.insert(id, WaitRec { b, rid, epoch, lease });
        self.rec(&Self::name(b), "put", start, end);
        let wait = self.rng.range(0, self.d.wait_max);
        let deadline = self.instant(self.now + wait);
        let bounds = self.brokers[b].disk.bounds();
        if let Role::Master(m) = &mut self.brokers[b].role {
            m.driver.log_changed(now, bounds);
            let sink = SimWait { id, outbox: m.outbox.clone() };
            m.driver.await_replication(now, end, deadline, sink);
        }
        self.master_run(b)
    }

    fn wait_done(&mut self, id: u64, result: Result<Offset, WaitError>) -> R {
        let Some(w) = self.waits.remove(&id) else {
            return Err(Violation::WaitDoneNotPending { id });
        };
        let Ok(offset) = result else {
            self.stats.puts_not_replicated += 1;
            return Ok(());
        };
        let now = self.at();
        if !self.brokers[w.b].guard_open(w.lease, now) {
            self.stats.puts_unacked_guard_closed += 1;
            return Ok(());
        }
        // PUT_OK.
        self.stats.puts_acked += 1;
        let broker = id_of(w.b);
        self.rec(&Self::name(w.b), "PUT_OK", offset, w.epoch as u64);
        if let Some(&first) = self.ackers.get(&w.epoch) {
            if first != broker {
                return Err(Violation::TwoMastersInEpoch { epoch: w.epoch, first, second: broker });
            }
        }
        if w.epoch < self.max_ack_epoch {
            return Err(Violation::EpochWentBack {
                what: "PUT_OK",
                epoch: w.epoch,
                previous: self.max_ack_epoch,
            });
        }
        self.ackers.insert(w.epoch, broker);
        self.max_ack_epoch = w.epoch;
        let disk = self.brokers[w.b].disk.clone();
        let s = disk.lock();
        let end = s.log.end();
        if end < offset {
            return Err(Violation::AckedNotOnMaster {
                broker,
                epoch: w.epoch,
                detail: format!("acknowledged {offset}, but its log ends at {end}"),
            });
        }
        let common = (self.golden.len() as u64).min(offset);
        if let Some(at) = first_difference(s.log.slice(0, common), &self.golden[..common as usize]) {
            return Err(Violation::AckedNotOnMaster {
                broker,
                epoch: w.epoch,
                detail: format!(
                    "acknowledging {offset}, its log differs from earlier acknowledged bytes at {at}"
                ),
            });
        }
        if offset > common {
            self.golden.extend_from_slice(s.log.slice(common, offset));
        }
        Ok(())
    }

    fn fault_tick(&mut self) -> R {
        if self.quiet {
            return Ok(());
        }
        self.schedule(self.now + 100 * MS, Ev::FaultTick);
        let f = self.d.faults.clone();
        let p = |rate: f64| rate * 0.1;
        if self.rng.chance(p(f.master_crash + f.slave_crash)) {
            let b = self.victim();
            if !self.brokers[b].down {
                // Only a broker whose acks mean "durable" may lose its page cache: a slave
                // acking written bytes that a machine crash loses could lose acknowledged puts.
                let machine = self.brokers[b].ack_on == AckOn::Flushed && self.rng.chance(f.silent_crash);
                self.crash(b, machine)?;
            }
        }
        if self.rng.chance(p(f.partition_both_ways)) {
            let b = self.victim();
            let until = self.now + self.rng.range(SEC / 2, 6 * SEC);
            self.brokers[b].cut_peers = until;
            self.brokers[b].cut_coord = until;
            self.stats.full_partitions += 1;
            self.rec("FAULT", "cut from all", id_of(b) as u64, until / MS);
        }
        if self.rng.chance(p(f.partition_one_way)) {
            let b = self.victim();
            let until = self.now + self.rng.range(SEC / 2, 6 * SEC);
            self.brokers[b].cut_coord = until;
            self.stats.coordinator_partitions += 1;
            self.rec("FAULT", "cut from coordinator", id_of(b) as u64, until / MS);
        }
        if self.rng.chance(p(f.stall)) {
            let b = self.victim();
            let until = self.now + self.rng.range(SEC / 2, 6 * SEC);
            self.brokers[b].cut_peers = until;
            self.stats.peer_partitions += 1;
            self.rec("FAULT", "cut from peers", id_of(b) as u64, until / MS);
        }
        if self.rng.chance(p(f.reset)) && !self.conns.is_empty() {
            let keys: Vec<u64> = self.conns.keys().copied().collect();
            let conn = keys[self.rng.below(keys.len() as u64) as usize];
            self.reset(conn)?;
        }
        Ok(())
    }

    /// The broker a fault hits: half the time the record's master (a failover, and the tail
    /// it wrote past confirmOffset diverges), else any broker.
    fn victim(&mut self) -> usize {
        let master = self.coord.record.read().1.map(|r| idx_of(r.master_id));
        match master {
            Some(m) if self.rng.chance(0.5) => m,
            _ => self.rng.below(self.brokers.len() as u64) as usize,
        }
    }

    fn crash(&mut self, b: usize, machine: bool) -> R {
        self.end_role(b, machine)?;
        let lost = if machine {
            let unflushed = {
                let s = self.brokers[b].disk.lock();
                s.log.end().saturating_sub(s.log.durable())
            };
            let keep = self.rng.range(0, unflushed + 1);
            self.stats.broker_machine_crashes += 1;
            self.brokers[b].disk.crash(keep)
        } else {
            self.stats.broker_process_crashes += 1;
            0
        };
        let br = &mut self.brokers[b];
        br.verified = br.verified.min(br.disk.bounds().max);
        br.down = true;
        br.lease = None;
        br.inc += 1;
        let inc = br.inc;
        self.rec(&Self::name(b), if machine { "machine crash" } else { "process crash" }, lost, 0);
        let at = self.now + self.rng.range(SEC / 2, 5 * SEC);
        self.schedule(at, Ev::Restart { b, inc });
        Ok(())
    }

    // ------------------------------------------------------------ the oracle

    fn check(&mut self) -> R {
        // (a) The current master holds every acknowledged byte.
        let (_, record) = self.coord.record.read();
        let check_master = std::mem::take(&mut self.check_master)
            || self.brokers.iter().any(|b| !b.disk.lock().cuts.is_empty());
        if let Some(record) = record.filter(|_| check_master) {
            let m = idx_of(record.master_id);
            if let Role::Master(mr) = &self.brokers[m].role {
                if mr.epoch == record.master_epoch {
                    let s = self.brokers[m].disk.lock();
                    let end = s.log.end() as usize;
                    let g = self.golden.len();
                    if end < g {
                        return Err(Violation::AckedNotOnMaster {
                            broker: record.master_id,
                            epoch: mr.epoch,
                            detail: format!("its log ends at {end}, puts were acknowledged up to {g}"),
                        });
                    }
                    if let Some(at) = first_difference(s.log.slice(0, g as u64), &self.golden) {
                        return Err(Violation::AckedNotOnMaster {
                            broker: record.master_id,
                            epoch: mr.epoch,
                            detail: format!("its log differs from the acknowledged bytes at {at}"),
                        });
                    }
                }
            }
        }
        let set: Vec<usize> =
            record.map(|r| r.sync_state_set.iter().map(|&id| idx_of(id)).collect()).unwrap_or_default();
        let mut max_confirm = (0, 0);
        for b in 0..self.brokers.len() {
            let id = id_of(b);
            let (cuts, confirm, end) = {
                let mut s = self.brokers[b].disk.lock();
                (std::mem::take(&mut s.cuts), s.confirm, s.log.end())
            };
            // (a) No truncation cuts acknowledged bytes.
            for (to, removed) in cuts {
                self.stats.truncations += u64::from(!removed.is_empty());
                self.stats.truncated_bytes += removed.len() as u64;
                self.rec(&Self::name(b), "truncated", to, removed.len() as u64);
                let g = self.golden.len() as u64;
                if to < g {
                    let overlap = (g - to).min(removed.len() as u64) as usize;
                    if overlap > 0 && removed[..overlap] == self.golden[to as usize..to as usize + overlap] {
                        return Err(Violation::AckedTruncated { broker: id, to, acked_end: g });
                    }
                }
                let br = &mut self.brokers[b];
                br.verified = br.verified.min(to);
            }
            // (c) No replica exposes bytes it does not hold.
            if confirm > end {
                return Err(Violation::ExposedBeyondHeld { broker: id, confirm, holder: id, end });
            }
            if confirm > max_confirm.0 {
                max_confirm = (confirm, b);
            }
            // (b) Every byte below a confirmOffset is the one confirmed there first.
            let verified = self.brokers[b].verified;
            if confirm > verified {
                let s = self.brokers[b].disk.lock();
                let have = s.log.slice(verified, confirm);
                let known = (self.confirmed.len() as u64).clamp(verified, confirm);
                let split = (known - verified) as usize;
                if let Some(at) =
                    first_difference(&have[..split], &self.confirmed[verified as usize..known as usize])
                {
                    return Err(Violation::ConfirmedDiffer {
                        broker: id,
                        offset: verified + at as u64,
                        confirm,
                    });
                }
                self.confirmed.extend_from_slice(&have[split..]);
                drop(s);
                self.brokers[b].verified = confirm;
            }
        }
        // (c) ... nor bytes a member of the sync-state-set lacks.
        let (confirm, holder) = max_confirm;
        for m in set {
            let end = self.brokers[m].disk.bounds().max;
            if confirm > end {
                return Err(Violation::ExposedBeyondHeld {
                    broker: id_of(holder),
                    confirm,
                    holder: id_of(m),
                    end,
                });
            }
        }
        // Acknowledged bytes are confirmed bytes.
        let common = self.golden.len().min(self.confirmed.len());
        if let Some(at) = first_difference(&self.golden[..common], &self.confirmed[..common]) {
            return Err(Violation::ConfirmedDiffer { broker: 0, offset: at as u64, confirm: common as u64 });
        }
        Ok(())
    }

    /// Once faults stop: one master in the record's epoch, every other broker following it
    /// with its whole log, and everything confirmed.
    fn convergence(&self) -> Result<(), String> {
        let (_, record) = self.coord.record.read();
        let record = record.ok_or("no master was ever elected")?;
        let m = idx_of(record.master_id);
        let Role::Master(mr) = &self.brokers[m].role else {
            return Err(format!(
                "broker {} is the record's master but does not run as one",
                record.master_id
            ));
        };
        if mr.epoch != record.master_epoch {
            return Err(format!("master runs epoch {}, the record says {}", mr.epoch, record.master_epoch));
        }
        if mr.driver.pending_waits() > 0 {
            return Err(format!("{} waits pending", mr.driver.pending_waits()));
        }
        // Lengths and confirmOffsets suffice: the oracle checked, step by step, that every
        // byte below each broker's confirmOffset is the one confirmed there.
        let end = self.brokers[m].disk.bounds().max;
        let confirm = self.brokers[m].disk.confirm_offset();
        if confirm != end {
            return Err(format!("master's confirmOffset {confirm} is not its end {end}"));
        }
        for (b, br) in self.brokers.iter().enumerate() {
            if b == m {
                continue;
            }
            match &br.role {
                Role::Slave(s) if s.master == record.master_id && s.epoch == record.master_epoch => {}
                _ => return Err(format!("broker {} does not follow the master", br.id)),
            }
            let (slave_end, slave_confirm) = (br.disk.bounds().max, br.disk.confirm_offset());
            if slave_end != end || slave_confirm != confirm {
                return Err(format!(
                    "broker {} holds {slave_end} bytes with confirmOffset {slave_confirm}, the master {end}",
                    br.id
                ));
            }
        }
        Ok(())
    }
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    if a == b {
        return None;
    }
    a.iter().zip(b).position(|(x, y)| x != y).or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))
}
