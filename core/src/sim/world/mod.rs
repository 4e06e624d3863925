//! The cluster and its deterministic event loop: the master, the slaves, intruders, the links
//! between them, the disks, the workload, the fault plan, and the oracle that checks every step.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, MutexGuard};
use std::time::Duration;

use crate::time::Instant;

use bytes::{Bytes, BytesMut};

use crate::classic::frame::{FrameError, MAX_WIRE_OFFSET, PushDecoder, PushHeader, REPORT_LEN};
use crate::config::{AckOn, AckPolicy, MasterConfig, NewSlaveStart, SlaveConfig};
use crate::log::{LogSpan, Offset};
use crate::service::{
    Admission, Fence, IpNet, MasterDriver, MasterServiceConfig, SlaveDriver, SlaveServiceConfig,
};
use crate::{
    ConnId,
    classic::{Master, Slave, SlaveEvent, SlaveOutput},
};
use crate::{
    classic::{CloseReason, PeerError},
    error::WaitError,
};

mod disk;
mod faults;
mod intruder;
mod master;
mod net;
mod oracle;
mod slave;
mod workload;

use super::config::{FaultRates, SimConfig};
use super::draw::{Drawn, Workload, draw};
use super::memlog::MemLog;
use super::rng::SimRng;
use super::shared::{DRAIN_LIMIT, MS, Nanos, Out, Outbox, Queue, SimConn, SimWait, Trace, nanos, pop};
use super::stats::Stats;
use super::violation::{Failure, Outcome, Violation};
use disk::Disk;
use master::MasterCall;
use slave::SlaveCall;

/// Timeouts at one instant, without time moving, before a node counts as spinning.
const SPIN_LIMIT: u32 = 10_000;

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Dir {
    ToMaster,
    ToPeer,
}

impl Dir {
    fn index(self) -> usize {
        match self {
            Self::ToMaster => 0,
            Self::ToPeer => 1,
        }
    }
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Peer {
    Slave { idx: usize, inc: u64 },
    Intruder { id: u64 },
}

/// How one side of a connection goes away.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Teardown {
    /// A clean close: the other side reads what is in flight, then EOF.
    Fin,
    /// A reset: in-flight bytes are lost and the other side sees the connection fail.
    Rst,
    /// A machine crash: nothing is sent; the other side finds out by housekeeping, or by a
    /// reset once the host is back and receives a packet for the dead connection.
    Silent,
}

/// One direction of a connection: ordered bytes with the instant each write becomes readable.
#[derive(Debug, Default)]
struct Pipe {
    segs: VecDeque<(Nanos, Bytes)>,
    bytes: usize,
    last_ready: Nanos,
    /// EOF (or a reset) after the bytes, readable at this instant.
    eof: Option<Nanos>,
    scheduled: Option<Nanos>,
}

impl Pipe {
    fn clear(&mut self) {
        self.segs.clear();
        self.bytes = 0;
    }
}

#[derive(Debug)]
struct Conn {
    peer: Peer,
    /// The peer's address, as the master's driver is told at accept.
    address: SocketAddr,
    master_inc: u64,
    pipes: [Pipe; 2],
    stall_until: [Nanos; 2],
    /// The master's socket is open (the driver has not torn it down).
    master_open: bool,
    /// The master's core closed it; the driver feeds `Closed` once its teardown finishes,
    /// and until then may still feed reads and writes that were under way.
    master_closing: bool,
    /// The peer's socket is open.
    peer_open: bool,
    peer_silent: bool,
    master_silent: bool,
    /// Master transmits waiting for room in the pipe (not yet `Sent`).
    pending_tx: VecDeque<Bytes>,
    // The oracle's view:
    /// Mirror of the master's report decoder: bytes of an incomplete word.
    partial: Vec<u8>,
    /// The highest report the peer sent on this connection.
    reported: Option<Offset>,
    /// The master accepted the first report.
    started: bool,
    /// A newer connection from the same (non-loopback) host started streaming after this one
    /// was accepted: the master may count the host's copy on that one only (a reboot cannot be
    /// told from a reconnect).
    newer_started: bool,
    /// Where the next span (or heartbeat) must start.
    next: Option<Offset>,
    /// Body bytes the master transmitted on it.
    body_bytes: u64,
}

#[derive(Debug)]
enum DiskDone {
    Appended(Offset),
    AppendFailed(Offset),
    Flushed(Offset),
    FlushFailed,
}

struct SlaveNode {
    config: SlaveConfig,
    inc: u64,
    /// The production slave driver, while the slave runs.
    driver: Option<SlaveDriver<Disk>>,
    timeout: Option<Nanos>,
    store: Arc<Disk>,
    conn: Option<u64>,
    connecting: Option<u64>,
    disk: VecDeque<(Nanos, DiskDone)>,
    disk_last: Nanos,
    slow_until: Nanos,
    slow_max: Nanos,
    fail_next: bool,
    /// An append failed on the current connection: the core's later appends for it no longer
    /// continue the log and fail too, until the next connection.
    poisoned: bool,
    /// The oracle: `[base, valid_end)` of this slave's log equals the master's.
    valid_end: Offset,
    /// Down, and when it comes back (`None`: running).
    down_until: Option<Nanos>,
    stopped: bool,
    /// Taken out after a typed error, which it ends with.
    ended_with: Option<PeerError>,
    draining: bool,
    spin: (Nanos, u32),
}

impl SlaveNode {
    fn log(&self) -> MutexGuard<'_, MemLog> {
        self.store.lock()
    }
    fn prefix_ok(&self) -> bool {
        let log = self.log();
        log.is_empty() || self.valid_end == log.end()
    }
    fn running(&self) -> bool {
        self.driver.is_some()
    }
    /// The protocol core inside the driver (the oracle reads its state).
    fn core(&self) -> Option<&Slave> {
        self.driver.as_ref().map(SlaveDriver::slave)
    }
}

impl std::fmt::Debug for SlaveNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlaveNode")
            .field("inc", &self.inc)
            .field("core", &self.core())
            .field("log", &*self.log())
            .field("valid_end", &self.valid_end)
            .field("ended_with", &self.ended_with)
            .finish_non_exhaustive()
    }
}

/// The oracle's own model of the master's fence, kept from what it saw on the wire: after a
/// restart, puts wait until `needed` distinct slaves have reported (a slave's host counts
/// once, however often it reconnects; on loopback each live connection counts while it is up;
/// a stranger never counts, even one the allow-list trusts); a trusted replica refused as
/// ahead fences the master until it restarts.
#[derive(Debug, Default)]
struct FenceModel {
    needed: usize,
    heard: BTreeSet<Heard>,
    diverged: Option<Fence>,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Heard {
    Host(IpAddr),
    LoopbackConn(u64),
}

impl FenceModel {
    fn expected(&self) -> Option<Fence> {
        if let Some(f) = &self.diverged {
            return Some(f.clone());
        }
        let waiting_for = self.needed.saturating_sub(self.heard.len());
        (waiting_for > 0).then_some(Fence::Restart { waiting_for })
    }

    /// A loopback connection closed: it no longer counts while the fence is up.
    fn forget(&mut self, conn: u64) {
        if self.needed > 0 {
            self.heard.remove(&Heard::LoopbackConn(conn));
        }
    }

    /// A trusted replica reported. Returns whether it had reported already while the fence is
    /// still up (it reconnected and reported again: it must not count twice).
    fn hear(&mut self, who: Heard) -> bool {
        let mut again = false;
        if self.needed > 0 && self.diverged.is_none() {
            again = !self.heard.insert(who);
            if self.heard.len() >= self.needed {
                // Lifted for good: later departures do not raise it again.
                self.needed = 0;
                self.heard.clear();
            }
        }
        again
    }
}

struct MasterNode {
    config: MasterConfig,
    inc: u64,
    /// The production master driver, while the master runs.
    driver: Option<MasterDriver<SimConn, SimWait>>,
    /// Where its sinks put what it hands the simulator.
    outbox: Outbox,
    timeout: Option<Nanos>,
    store: Arc<Disk>,
    /// Each crashed incarnation's log as it was at the crash: bytes still in flight from it
    /// are checked against it.
    old_logs: BTreeMap<u64, MemLog>,
    down_until: Option<Nanos>,
    fence: FenceModel,
    /// The driver was shut down: it may still hand frames to sinks it closed, which the
    /// connections' writers drop.
    shut_down: bool,
    draining: bool,
    spin: (Nanos, u32),
}

impl MasterNode {
    fn log(&self) -> MutexGuard<'_, MemLog> {
        self.store.lock()
    }
    /// The protocol core inside the driver (the oracle reads its state).
    fn core(&self) -> Option<&Master> {
        self.driver.as_ref().map(MasterDriver::master)
    }
}

impl std::fmt::Debug for MasterNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MasterNode")
            .field("inc", &self.inc)
            .field("core", &self.core().map(Master::log_bounds))
            .field("log", &*self.log())
            .field("fence", &self.fence)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct Intruder {
    conn: u64,
    decoder: PushDecoder,
    received: Option<Offset>,
    last_ack: Option<Offset>,
    acts_left: u32,
}

#[derive(Debug)]
struct WaitRec {
    offset: Offset,
    deadline: Nanos,
    cancel_requested: bool,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Phase {
    Faults,
    Quiet,
}

#[derive(Debug)]
enum Ev {
    Deliver { conn: u64, dir: Dir },
    MasterClosed { conn: u64, inc: u64 },
    ConnectDone { slave: usize, inc: u64, attempt: u64, fail: bool },
    Disk { slave: usize, inc: u64 },
    SlaveRestart { slave: usize, inc: u64 },
    MasterRestart { inc: u64 },
    MasterFlush,
    SlaveFlush,
    Workload,
    FaultTick,
    Intruder { id: u64 },
    Quiet,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
enum Node {
    Master,
    Slave(usize),
    Intruder(u64),
    Net,
    Workload,
    Fault,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
enum Detail {
    None,
    Peer(PeerError),
    Close(CloseReason),
    Wait(Result<Offset, WaitError>),
}

/// One line of the event trace.
#[derive(Clone, Debug, Hash)]
struct Rec {
    t: Nanos,
    node: Node,
    what: &'static str,
    a: u64,
    b: u64,
    detail: Detail,
}

impl std::fmt::Display for Rec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let node = match self.node {
            Node::Master => "master".to_string(),
            Node::Slave(i) => format!("slave {i}"),
            Node::Intruder(i) => format!("intruder {i}"),
            Node::Net => "net".into(),
            Node::Workload => "workload".into(),
            Node::Fault => "FAULT".into(),
        };
        write!(f, "{:>11.6}s {node:<10} {:<22} {:>8} {:>8}", self.t as f64 / 1e9, self.what, self.a, self.b)?;
        match self.detail {
            Detail::None => Ok(()),
            Detail::Peer(e) => write!(f, "  {e:?}"),
            Detail::Close(r) => write!(f, "  {r:?}"),
            Detail::Wait(r) => write!(f, "  {r:?}"),
        }
    }
}

type R<T = ()> = Result<T, Violation>;

/// One deterministic run of a cluster under faults, from a seed.
///
/// Build it with [`Simulation::new`] and [`run`](Self::run) it; see the [module
/// docs](super) for what it simulates and checks.
pub struct Simulation {
    seed: u64,
    cfg: SimConfig,
    rng: SimRng,
    epoch: Instant,
    now: Nanos,
    step: u64,
    phase: Phase,
    quiet_at: Nanos,
    faults: FaultRates,
    workload: Workload,
    summary: String,
    master: MasterNode,
    slaves: Vec<SlaveNode>,
    intruders: BTreeMap<u64, Intruder>,
    conns: BTreeMap<u64, Conn>,
    queue: Queue<Ev>,
    next_conn: u64,
    next_wait: u64,
    next_attempt: u64,
    next_intruder: u64,
    partition_until: Vec<[Nanos; 2]>,
    waits: BTreeMap<u64, WaitRec>,
    wait_deadlines: BTreeSet<(Nanos, u64)>,
    /// The wait being started right now: the only one that may end as unavailable.
    starting_wait: Option<u64>,
    appended: u64,
    /// Connections the master driver closed during the current call.
    closes: u64,
    /// The master's connections and acks before the current input: one input can close
    /// several connections, and a wait it completes may rest on one closed later in it.
    before_input: Vec<(u64, Option<Offset>)>,
    quarantine: Vec<(usize, PeerError)>,
    stats: Stats,
    trace: Trace<Rec>,
}

impl std::fmt::Debug for Simulation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Simulation")
            .field("seed", &self.seed)
            .field("now", &self.now)
            .field("step", &self.step)
            .field("master", &self.master)
            .field("slaves", &self.slaves)
            .finish_non_exhaustive()
    }
}

/// The master's HA port, as the slaves' configuration names it.
const MASTER_ADDRESS: &str = "10.0.0.254:10912";

/// The address of slave `idx`'s host: its own machine, or the loopback host all share.
fn slave_ip(idx: usize, loopback: bool) -> IpAddr {
    if loopback {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    } else {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1 + idx as u8))
    }
}

/// The replica allow-list: each slave's own address (or loopback, where they share it), and
/// the slaves' network, which admits and trusts strangers on it too.
fn allow_list(slaves: usize, loopback: bool) -> Admission {
    let mut nets: Vec<IpNet> =
        (0..slaves).map(|i| IpNet::new(slave_ip(i, loopback), 32).expect("valid prefix")).collect();
    nets.push(IpNet::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 0)), 24).expect("valid prefix"));
    nets.dedup();
    Admission::allow_list(nets)
}

impl Simulation {
    /// A simulation of the cluster that `seed` draws under `config`.
    ///
    /// Fails if a configuration given in `config` is invalid.
    pub fn new(seed: u64, config: SimConfig) -> Result<Self, crate::CoreConfigError> {
        if let Some(m) = &config.master {
            m.validate()?;
        }
        if let Some(s) = &config.slave {
            s.validate()?;
        }
        let mut rng = SimRng::new(seed);
        let Drawn { master: mcfg, slaves: scfgs, faults, workload } = draw(&mut rng, &config);
        let epoch = Instant::ZERO;
        let (base, len) = workload.initial;
        let master_log = if len == 0 {
            let mut l = MemLog::default();
            l.retain(base);
            l
        } else {
            MemLog::prefilled(0, base, len)
        };
        let slaves: Vec<SlaveNode> = scfgs
            .into_iter()
            .enumerate()
            .map(|(i, config)| {
                let log = match workload.slave_prefill[i] {
                    Some(n) => MemLog::copy_of(&master_log, base, base + n),
                    None => MemLog::default(),
                };
                SlaveNode {
                    config,
                    inc: 0,
                    driver: None,
                    timeout: None,
                    valid_end: log.end(),
                    store: Disk::new(log, mcfg.mapped_file_size_commit_log),
                    conn: None,
                    connecting: None,
                    disk: VecDeque::new(),
                    disk_last: 0,
                    slow_until: 0,
                    slow_max: 0,
                    fail_next: false,
                    poisoned: false,
                    down_until: None,
                    stopped: false,
                    ended_with: None,
                    draining: false,
                    spin: (0, 0),
                }
            })
            .collect();
        let summary = summarize(&mcfg, &slaves, &faults, &workload);
        let n = slaves.len();
        let mut stats = Stats { seeds: 1, slaves: n as u64, ..Stats::default() };
        match mcfg.ack_policy {
            AckPolicy::AnySlave => stats.policy_any_slave = 1,
            AckPolicy::Quorum { .. } => stats.policy_quorum = 1,
            AckPolicy::AllInSync => stats.policy_all_in_sync = 1,
        }
        for s in &slaves {
            match s.config.ack_on {
                AckOn::Written => stats.ack_on_written += 1,
                AckOn::Flushed => stats.ack_on_flushed += 1,
            }
        }
        if mcfg.new_slave_start == NewSlaveStart::LastFile {
            stats.new_slave_last_file = 1;
        }
        let quiet_at = nanos(config.fault_time);
        Ok(Self {
            seed,
            rng,
            epoch,
            now: 0,
            step: 0,
            phase: Phase::Faults,
            quiet_at,
            faults,
            workload,
            summary,
            master: MasterNode {
                store: Disk::new(master_log, mcfg.mapped_file_size_commit_log),
                config: mcfg,
                inc: 0,
                driver: None,
                outbox: Outbox::default(),
                timeout: None,
                old_logs: BTreeMap::new(),
                down_until: None,
                fence: FenceModel::default(),
                shut_down: false,
                draining: false,
                spin: (0, 0),
            },
            slaves,
            intruders: BTreeMap::new(),
            conns: BTreeMap::new(),
            queue: Queue::default(),
            next_conn: 1,
            next_wait: 1,
            next_attempt: 1,
            next_intruder: 1,
            partition_until: vec![[0, 0]; n],
            waits: BTreeMap::new(),
            wait_deadlines: BTreeSet::new(),
            starting_wait: None,
            appended: 0,
            closes: 0,
            before_input: Vec::new(),
            quarantine: Vec::new(),
            stats,
            trace: Trace::new(config.print_trace),
            cfg: config,
        })
    }

    /// The seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The drawn cluster, in one line.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// Runs to the end: the fault phase, then the quiet phase until the cluster converges.
    pub fn run(mut self) -> Result<Outcome, Box<Failure>> {
        let result = self.start().and_then(|()| {
            while self.step()? {}
            Ok(())
        });
        match result {
            Ok(()) => {
                self.stats.virtual_time = Duration::from_nanos(self.now);
                Ok(Outcome {
                    seed: self.seed,
                    stats: self.stats,
                    trace_hash: self.trace.hash(),
                    summary: self.summary,
                })
            }
            Err(violation) => Err(Box::new(self.failure(violation))),
        }
    }

    pub(crate) fn failure(&mut self, violation: Violation) -> Failure {
        self.stats.virtual_time = Duration::from_nanos(self.now);
        Failure {
            seed: self.seed,
            at: Duration::from_nanos(self.now),
            step: self.step,
            violation,
            summary: self.summary.clone(),
            replay: self.cfg.replay_command.replace("{seed}", &format!("{:#x}", self.seed)),
            recent: self.trace.recent(),
            stats: self.stats.clone(),
        }
    }

    // ---------------------------------------------------------------- plumbing

    fn instant(&self, t: Nanos) -> Instant {
        self.epoch + Duration::from_nanos(t)
    }

    fn to_nanos(&self, at: Instant) -> Nanos {
        nanos(at.saturating_duration_since(self.epoch))
    }

    fn schedule(&mut self, at: Nanos, ev: Ev) {
        self.queue.schedule(self.now, at, ev);
    }

    fn rec(&mut self, node: Node, what: &'static str, a: u64, b: u64, detail: Detail) {
        self.trace.record(Rec { t: self.now, node, what, a, b, detail });
    }

    fn between(&mut self, lo: Nanos, hi: Nanos) -> Nanos {
        self.rng.range(lo, hi)
    }

    fn link_delay(&mut self) -> Nanos {
        nanos(self.faults.latency) + self.rng.range(0, nanos(self.faults.jitter))
    }

    fn master_hk(&self) -> Nanos {
        nanos(self.master.config.housekeeping_interval)
    }

    fn max_hk(&self) -> Nanos {
        self.slaves
            .iter()
            .map(|s| nanos(s.config.housekeeping_interval))
            .max()
            .unwrap_or(0)
            .max(self.master_hk())
    }

    // ---------------------------------------------------------------- the loop

    fn start(&mut self) -> R {
        self.start_master(0)?;
        for i in 0..self.slaves.len() {
            self.start_slave(i)?;
        }
        self.schedule(0, Ev::Workload);
        self.schedule(0, Ev::FaultTick);
        self.schedule(0, Ev::SlaveFlush);
        if self.workload.master_flush.is_some() {
            self.schedule(0, Ev::MasterFlush);
        }
        self.schedule(self.quiet_at, Ev::Quiet);
        self.check()
    }

    /// One step: the earliest event or core timeout. `Ok(false)` once the run is over.
    fn step(&mut self) -> R<bool> {
        self.step += 1;
        self.stats.steps += 1;
        if self.step > self.cfg.max_steps {
            return Err(Violation::StepLimit(self.cfg.max_steps));
        }
        // The earliest of: queued events, the master's timeout, each slave's. At one instant,
        // this seed's tie-break order decides whether events or timeouts go first.
        let mut best: Option<(Nanos, usize)> = None;
        let timeouts_first = self.workload.timeouts_first;
        let mut consider = |t: Option<Nanos>, who: usize| {
            if let Some(t) = t {
                let wins = match best {
                    None => true,
                    Some((b, w)) => t < b || (t == b && timeouts_first && w == 0 && who != 0),
                };
                if wins {
                    best = Some((t, who));
                }
            }
        };
        consider(self.queue.next_at(), 0);
        consider(self.master.timeout, 1);
        for (i, s) in self.slaves.iter().enumerate() {
            consider(s.timeout, 2 + i);
        }
        let Some((t, who)) = best else {
            return Err(Violation::Livelock { node: "simulation".into(), what: "nothing left to do" });
        };
        let limit = self.quiet_at + nanos(self.cfg.liveness_timeout);
        if t > limit && self.phase == Phase::Quiet {
            self.now = limit;
            return Err(Violation::NoConvergence { detail: self.convergence().unwrap_err() });
        }
        self.now = self.now.max(t);
        match who {
            0 => {
                let ev = self.queue.pop().expect("peeked above");
                self.on_event(ev)?;
            }
            1 => self.master_timeout()?,
            i => self.slave_timeout(i - 2)?,
        }
        while let Some((slave, error)) = self.quarantine.pop() {
            self.end_slave(slave, error)?;
        }
        self.check()?;
        if self.phase == Phase::Quiet && self.convergence().is_ok() {
            for s in &self.slaves {
                if s.ended_with.is_none() {
                    self.stats.slaves_converged += 1;
                }
            }
            return Ok(false);
        }
        Ok(true)
    }

    fn on_event(&mut self, ev: Ev) -> R {
        match ev {
            Ev::Deliver { conn, dir } => self.deliver(conn, dir),
            Ev::MasterClosed { conn, inc } => {
                let live = self.master.inc == inc && self.conns.get(&conn).is_some_and(|c| c.master_open);
                if live {
                    let c = self.conns.get_mut(&conn).expect("checked");
                    c.master_open = false;
                    c.pipes[Dir::ToMaster.index()].clear();
                    self.master_call(MasterCall::Closed { conn })?;
                }
                Ok(())
            }
            Ev::ConnectDone { slave, inc, attempt, fail } => self.connect_done(slave, inc, attempt, fail),
            Ev::Disk { slave, inc } => self.disk_event(slave, inc),
            Ev::SlaveRestart { slave, inc } => {
                let s = &self.slaves[slave];
                if s.inc == inc && !s.running() && s.ended_with.is_none() {
                    self.start_slave(slave)?;
                }
                Ok(())
            }
            Ev::MasterRestart { inc } => {
                if self.master.inc == inc && self.master.driver.is_none() {
                    self.restart_master()?;
                }
                Ok(())
            }
            Ev::MasterFlush => {
                self.master.log().flush();
                if let Some(every) = self.workload.master_flush {
                    let at = self.now + nanos(every);
                    self.schedule(at, Ev::MasterFlush);
                }
                Ok(())
            }
            Ev::SlaveFlush => {
                for s in &self.slaves {
                    if s.running() {
                        s.log().flush();
                    }
                }
                let at = self.now + nanos(self.workload.slave_flush);
                self.schedule(at, Ev::SlaveFlush);
                Ok(())
            }
            Ev::Workload => self.workload_tick(),
            Ev::FaultTick => self.fault_tick(),
            Ev::Intruder { id } => self.intruder_act(id),
            Ev::Quiet => self.quiet(),
        }
    }
}

fn summarize(m: &MasterConfig, slaves: &[SlaveNode], f: &FaultRates, w: &Workload) -> String {
    let acks: Vec<&str> = slaves
        .iter()
        .map(|s| match s.config.ack_on {
            AckOn::Written => "W",
            AckOn::Flushed => "F",
        })
        .collect();
    let mut on = Vec::new();
    for (name, rate) in [
        ("stall", f.stall),
        ("reset", f.reset),
        ("part1", f.partition_one_way),
        ("part2", f.partition_both_ways),
        ("scrash", f.slave_crash),
        ("sstop", f.slave_stop),
        ("slowdisk", f.slow_disk),
        ("diskerr", f.disk_error),
        ("mcrash", f.master_crash),
        ("intruder", f.intruder),
        ("retention", f.retention),
    ] {
        if rate > 0.0 {
            on.push(format!("{name}={rate:.2}"));
        }
    }
    format!(
        "{} slave(s) ack_on [{}], {:?}, {:?}, batch {} B, segment {} B, inflight {}, hk {:?}, \
         latency {:?}+{:?}, chunk<={}, budget {} B, faults/s: {}",
        slaves.len(),
        acks.join(""),
        m.ack_policy,
        m.new_slave_start,
        m.transfer_batch_size,
        m.mapped_file_size_commit_log,
        m.max_inflight,
        m.housekeeping_interval,
        f.latency,
        f.jitter,
        f.max_read_chunk,
        w.budget,
        if on.is_empty() { "none".to_string() } else { on.join(" ") }
    )
}
