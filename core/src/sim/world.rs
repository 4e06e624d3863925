//! The cluster and its deterministic event loop: the master, the slaves, intruders, the links
//! between them, the disks, the workload, the fault plan, and the oracle that checks every step.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};

use crate::config::{AckOn, AckPolicy, MasterConfig, NewSlaveStart, SlaveConfig};
use crate::error::{CloseReason, PeerError, WaitError};
use crate::frame::{FrameError, MAX_WIRE_OFFSET, PushDecoder, PushHeader, REPORT_LEN};
use crate::log::{LogSpan, Offset};
use crate::{
    ConnId, Master, MasterEvent, MasterInput, MasterOutput, Slave, SlaveEvent, SlaveInput, SlaveOutput,
    WaitId,
};

use super::config::{FaultRates, SimConfig};
use super::draw::{Drawn, Workload, draw};
use super::memlog::MemLog;
use super::rng::SimRng;
use super::stats::Stats;
use super::violation::{Failure, Outcome, Violation};

/// Virtual time: nanoseconds since the simulation's epoch.
type Nanos = u64;

const MS: Nanos = 1_000_000;
/// A `poll_output` drain longer than this never ends.
const DRAIN_LIMIT: usize = 100_000;
/// Timeouts at one instant, without time moving, before a node counts as spinning.
const SPIN_LIMIT: u32 = 10_000;
/// Events kept for a failure report.
const RECENT: usize = 200;

fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

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

#[derive(Debug)]
struct SlaveNode {
    config: SlaveConfig,
    inc: u64,
    core: Option<Slave>,
    timeout: Option<Nanos>,
    log: MemLog,
    conn: Option<u64>,
    connecting: Option<u64>,
    disk: VecDeque<(Nanos, DiskDone)>,
    disk_last: Nanos,
    slow_until: Nanos,
    slow_max: Nanos,
    fail_next: bool,
    /// An append failed on the current connection: the core's later appends for it cannot
    /// continue the log and get no completion (one `AppendFailed` voids them all), until the
    /// next connection.
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
    fn prefix_ok(&self) -> bool {
        self.log.is_empty() || self.valid_end == self.log.end()
    }
    fn running(&self) -> bool {
        self.core.is_some()
    }
}

#[derive(Debug)]
struct MasterNode {
    config: MasterConfig,
    inc: u64,
    core: Option<Master>,
    timeout: Option<Nanos>,
    log: MemLog,
    /// Each crashed incarnation's log as it was at the crash: bytes still in flight from it
    /// are checked against it.
    old_logs: BTreeMap<u64, MemLog>,
    down_until: Option<Nanos>,
    /// Slaves that have not yet reported to the restarted master.
    fence: BTreeSet<usize>,
    draining: bool,
    spin: (Nanos, u32),
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

/// FNV-1a, 64 bits: a stable hash for the event trace.
#[derive(Debug)]
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

/// One deterministic run of a cluster under faults, from a seed.
///
/// Build it with [`Simulation::new`] and [`run`](Self::run) it; see the [module
/// docs](super) for what it simulates and checks.
#[derive(Debug)]
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
    queue: BTreeMap<(Nanos, u64), Ev>,
    seq: u64,
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
    /// Peer errors the master raised during the current input, by connection.
    peer_errors: Vec<(u64, PeerError)>,
    /// The master's connections and acks before the current input: one input can close
    /// several connections, and a wait it completes may rest on one closed later in it.
    before_input: Vec<(u64, Option<Offset>)>,
    quarantine: Vec<(usize, PeerError)>,
    stats: Stats,
    hash: Fnv,
    recent: VecDeque<Rec>,
}

impl Simulation {
    /// A simulation of the cluster that `seed` draws under `config`.
    ///
    /// Fails if a configuration given in `config` is invalid.
    pub fn new(seed: u64, config: SimConfig) -> Result<Self, crate::ConfigError> {
        if let Some(m) = &config.master {
            m.validate()?;
        }
        if let Some(s) = &config.slave {
            s.validate()?;
        }
        let mut rng = SimRng::new(seed);
        let Drawn { master: mcfg, slaves: scfgs, faults, workload } = draw(&mut rng, &config);
        let epoch = crate::fuzzing::epoch();
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
                    core: None,
                    timeout: None,
                    valid_end: log.end(),
                    log,
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
                config: mcfg,
                inc: 0,
                core: None,
                timeout: None,
                log: master_log,
                old_logs: BTreeMap::new(),
                down_until: None,
                fence: BTreeSet::new(),
                draining: false,
                spin: (0, 0),
            },
            slaves,
            intruders: BTreeMap::new(),
            conns: BTreeMap::new(),
            queue: BTreeMap::new(),
            seq: 0,
            next_conn: 1,
            next_wait: 1,
            next_attempt: 1,
            next_intruder: 1,
            partition_until: vec![[0, 0]; n],
            waits: BTreeMap::new(),
            wait_deadlines: BTreeSet::new(),
            starting_wait: None,
            appended: 0,
            peer_errors: Vec::new(),
            before_input: Vec::new(),
            quarantine: Vec::new(),
            stats,
            hash: Fnv(0xCBF2_9CE4_8422_2325),
            recent: VecDeque::new(),
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
                    trace_hash: self.hash.finish(),
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
            recent: self.recent.iter().map(ToString::to_string).collect(),
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
        self.seq += 1;
        self.queue.insert((at.max(self.now), self.seq), ev);
    }

    fn rec(&mut self, node: Node, what: &'static str, a: u64, b: u64, detail: Detail) {
        let r = Rec { t: self.now, node, what, a, b, detail };
        r.hash(&mut self.hash);
        if self.cfg.print_trace {
            eprintln!("{r}");
        }
        if self.recent.len() == RECENT {
            self.recent.pop_front();
        }
        self.recent.push_back(r);
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
        let bounds = self.master.log.bounds();
        self.master.core =
            Some(Master::new(self.master.config.clone(), self.instant(0), bounds).expect("config validated"));
        self.drain_master()?;
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
        consider(self.queue.keys().next().map(|&(t, _)| t), 0);
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
                let (_, ev) = self.queue.pop_first().expect("peeked above");
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
                    self.feed_master(MasterInput::Closed { conn: ConnId(conn) })?;
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
                if self.master.inc == inc && self.master.core.is_none() {
                    self.restart_master()?;
                }
                Ok(())
            }
            Ev::MasterFlush => {
                self.master.log.flush();
                if let Some(every) = self.workload.master_flush {
                    let at = self.now + nanos(every);
                    self.schedule(at, Ev::MasterFlush);
                }
                Ok(())
            }
            Ev::SlaveFlush => {
                for s in &mut self.slaves {
                    if s.running() {
                        s.log.flush();
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

    // ---------------------------------------------------------------- master driver

    fn feed_master(&mut self, input: MasterInput) -> R {
        let now = self.instant(self.now);
        if !self.master.draining {
            self.snapshot_master();
        }
        let Some(core) = self.master.core.as_mut() else { return Ok(()) };
        let (what, a, b) = match &input {
            MasterInput::Accepted { conn } => ("in Accepted", conn.0, 0),
            MasterInput::Received { conn, data } => ("in Received", conn.0, data.len() as u64),
            MasterInput::Sent { conn } => ("in Sent", conn.0, 0),
            MasterInput::Closed { conn } => ("in Closed", conn.0, 0),
            MasterInput::Appended { end } => ("in Appended", *end, 0),
            MasterInput::Retained { min } => ("in Retained", *min, 0),
            MasterInput::AwaitReplication { id, offset, .. } => ("in AwaitReplication", id.0, *offset),
            MasterInput::CancelWait { id } => ("in CancelWait", id.0, 0),
        };
        core.handle_input(now, input)
            .map_err(|error| Violation::ApiMisuse { node: "master".into(), error })?;
        self.rec(Node::Master, what, a, b, Detail::None);
        self.drain_master()
    }

    fn master_timeout(&mut self) -> R {
        self.master.timeout = None;
        let (at, n) = self.master.spin;
        self.master.spin = if at == self.now { (at, n + 1) } else { (self.now, 0) };
        if self.master.spin.1 > SPIN_LIMIT {
            return Err(Violation::Livelock { node: "master".into(), what: "timeouts at one instant" });
        }
        let now = self.instant(self.now);
        self.snapshot_master();
        if let Some(core) = self.master.core.as_mut() {
            core.handle_timeout(now);
            self.drain_master()?;
        }
        Ok(())
    }

    fn snapshot_master(&mut self) {
        self.before_input.clear();
        if let Some(core) = self.master.core.as_ref() {
            self.before_input.extend(core.slaves().map(|info| (info.conn.0, info.ack)));
        }
    }

    fn drain_master(&mut self) -> R {
        if self.master.draining {
            return Ok(());
        }
        self.master.draining = true;
        let result = self.drain_master_inner();
        self.master.draining = false;
        result
    }

    fn drain_master_inner(&mut self) -> R {
        for _ in 0..DRAIN_LIMIT {
            let Some(core) = self.master.core.as_mut() else { return Ok(()) };
            match core.poll_output() {
                MasterOutput::Timeout(at) => {
                    self.master.timeout = Some(self.to_nanos(at));
                    return Ok(());
                }
                MasterOutput::Transmit { conn, header, body } => {
                    self.master_transmit(conn.0, header, body)?
                }
                MasterOutput::Close { conn, reason } => {
                    self.rec(Node::Master, "out Close", conn.0, 0, Detail::Close(reason));
                    if reason == CloseReason::HousekeepingTimeout {
                        self.stats.housekeeping_closes += 1;
                    }
                    self.master_close(conn.0)?;
                }
                MasterOutput::Event(e) => self.master_event(e)?,
            }
        }
        Err(Violation::Livelock { node: "master".into(), what: "poll_output never returned Timeout" })
    }

    /// The core closed `conn`: tear it down and feed `Closed`, at once or after a lag during
    /// which writes under way still finish (`Sent`) and reads under way still arrive.
    fn master_close(&mut self, conn: u64) -> R {
        let lag = self.rng.range(0, nanos(self.faults.close_lag));
        if lag == 0 {
            self.master_side_down(conn, Teardown::Fin);
            return self.feed_master(MasterInput::Closed { conn: ConnId(conn) });
        }
        let delay = self.link_delay();
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return Ok(()) };
        c.master_closing = true;
        let finishing = std::mem::take(&mut c.pending_tx).len();
        let p = &mut c.pipes[Dir::ToPeer.index()];
        let at = (now + delay).max(p.last_ready);
        p.eof = Some(at);
        self.kick(conn, Dir::ToPeer, at);
        self.stats.lagged_closes += 1;
        for _ in 0..finishing {
            self.feed_master(MasterInput::Sent { conn: ConnId(conn) })?;
        }
        let inc = self.master.inc;
        self.schedule(now + lag, Ev::MasterClosed { conn, inc });
        Ok(())
    }

    fn master_transmit(&mut self, conn: u64, header: [u8; 12], body: Option<LogSpan>) -> R {
        let h = PushHeader::decode(&header, u32::MAX >> 1).map_err(|_| Violation::BadTransmit {
            conn,
            offset: 0,
            len: 0,
            reason: "header does not decode",
        })?;
        let bad =
            |reason| Violation::BadTransmit { conn, offset: h.offset, len: u64::from(h.body_len), reason };
        let Some(c) = self.conns.get(&conn) else { return Err(bad("unknown connection")) };
        if !c.master_open || c.master_closing || c.master_inc != self.master.inc {
            return Err(bad("connection already closed"));
        }
        if c.next.is_some_and(|n| n != h.offset) {
            return Err(bad("not where the stream continues"));
        }
        let cfg = &self.master.config;
        let log = &self.master.log;
        let data = match body {
            None if h.body_len != 0 => return Err(bad("heartbeat with a body length")),
            None => Bytes::new(),
            Some(span) => {
                if (span.offset, span.len) != (h.offset, h.body_len) {
                    return Err(bad("header does not match the span"));
                }
                if span.len == 0 || span.len > cfg.transfer_batch_size {
                    return Err(bad("span length outside 1..=transfer_batch_size"));
                }
                let seg = cfg.mapped_file_size_commit_log;
                if span.offset / seg != (span.end() - 1) / seg {
                    return Err(bad("span crosses a segment"));
                }
                if span.end() > self.master.core.as_ref().map_or(0, |m| m.log_bounds().max) {
                    return Err(bad("span beyond the appended end"));
                }
                log.read(span).map_err(bad)?
            }
        };
        self.rec(Node::Master, "out Transmit", conn, h.offset, Detail::None);
        let mut wire = BytesMut::with_capacity(12 + data.len());
        wire.extend_from_slice(&header);
        wire.extend_from_slice(&data);
        let c = self.conns.get_mut(&conn).expect("checked above");
        c.next = Some(h.offset + u64::from(h.body_len));
        c.body_bytes += u64::from(h.body_len);
        c.pending_tx.push_back(wire.freeze());
        self.flush_tx(conn)
    }

    /// Moves master transmits into the pipe while it has room; each one moved is `Sent`.
    fn flush_tx(&mut self, conn: u64) -> R {
        let cap = self.faults.pipe_capacity;
        loop {
            let Some(c) = self.conns.get_mut(&conn) else { return Ok(()) };
            if !c.master_open || c.master_closing {
                c.pending_tx.clear();
                return Ok(());
            }
            let Some(front) = c.pending_tx.front() else { return Ok(()) };
            let pipe = &c.pipes[Dir::ToPeer.index()];
            if pipe.bytes > 0 && pipe.bytes + front.len() > cap {
                return Ok(());
            }
            let wire = c.pending_tx.pop_front().expect("front exists");
            self.send(conn, Dir::ToPeer, wire);
            self.feed_master(MasterInput::Sent { conn: ConnId(conn) })?;
        }
    }

    fn master_event(&mut self, e: MasterEvent) -> R {
        match e {
            MasterEvent::SlaveStarted { conn, requested, start } => {
                self.rec(Node::Master, "ev SlaveStarted", conn.0, requested, Detail::None);
                let Some(c) = self.conns.get_mut(&conn.0) else { return Ok(()) };
                c.started = true;
                c.next = Some(start);
                if let Peer::Slave { idx, inc } = c.peer {
                    let s = &self.slaves[idx];
                    if s.inc == inc && s.ended_with.is_none() {
                        if !s.prefix_ok() {
                            return Err(Violation::DivergedSlaveAccepted {
                                slave: idx,
                                reported: requested,
                                valid_end: s.valid_end,
                            });
                        }
                        self.master.fence.remove(&idx);
                    }
                }
            }
            MasterEvent::SlaveAcked { conn, offset } => {
                self.rec(Node::Master, "ev SlaveAcked", conn.0, offset, Detail::None);
            }
            MasterEvent::SlaveDisconnected { conn } => {
                self.rec(Node::Master, "ev SlaveDisconnected", conn.0, 0, Detail::None);
            }
            MasterEvent::WaitDone { id, result } => {
                self.rec(Node::Master, "ev WaitDone", id.0, 0, Detail::Wait(result));
                self.wait_done(id.0, result)?;
            }
            MasterEvent::PeerError { conn, error } => {
                self.rec(Node::Master, "ev PeerError", conn.0, 0, Detail::Peer(error));
                self.peer_errors.push((conn.0, error));
                match error {
                    PeerError::SlaveAhead { .. } => self.stats.slave_ahead += 1,
                    PeerError::SlaveBehindRetention { .. } => self.stats.slave_behind_retention += 1,
                    PeerError::AckBeyondEnd { .. } => self.stats.ack_beyond_end += 1,
                    PeerError::AckBeyondSent { .. } => self.stats.ack_beyond_sent += 1,
                    PeerError::AckWentBackwards { .. } => self.stats.ack_went_backwards += 1,
                    PeerError::Frame(_) => self.stats.frame_errors += 1,
                    PeerError::OffsetMismatch { .. } => self.stats.offset_mismatches += 1,
                }
                let Some(c) = self.conns.get(&conn.0) else { return Ok(()) };
                if let Peer::Intruder { .. } = c.peer {
                    self.stats.intruders_refused += 1;
                }
                if let Peer::Slave { idx, inc } = c.peer {
                    let s = &self.slaves[idx];
                    if s.inc == inc && s.ended_with.is_none() {
                        match error {
                            PeerError::SlaveAhead { .. } | PeerError::SlaveBehindRetention { .. } => {
                                if matches!(error, PeerError::SlaveAhead { .. }) {
                                    self.stats.slaves_refused_ahead += 1;
                                } else {
                                    self.stats.slaves_refused_behind_retention += 1;
                                }
                                self.quarantine.push((idx, error));
                            }
                            // An honest slave never sends these.
                            _ => return Err(Violation::FalseAccusation { slave: idx, error }),
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn wait_done(&mut self, id: u64, result: Result<Offset, WaitError>) -> R {
        let Some(w) = self.waits.remove(&id) else { return Err(Violation::WaitDoneNotPending { id }) };
        self.wait_deadlines.remove(&(w.deadline, id));
        let bad = |why| Err(Violation::WaitBadResult { id, result, why });
        match result {
            Ok(o) => {
                self.stats.waits_ok += 1;
                if o != w.offset {
                    return bad("Ok with another offset than waited for");
                }
                if self.now >= w.deadline {
                    return Err(Violation::WaitOkAfterDeadline {
                        id,
                        late: Duration::from_nanos(self.now - w.deadline),
                    });
                }
                self.check_wait_ok(id, o)?;
            }
            Err(WaitError::Timeout) => {
                self.stats.waits_timeout += 1;
                if self.now < w.deadline {
                    return bad("Timeout before the deadline");
                }
            }
            Err(WaitError::Cancelled) => {
                self.stats.waits_cancelled += 1;
                if !w.cancel_requested {
                    return bad("Cancelled without CancelWait");
                }
            }
            Err(e) => {
                if e == WaitError::SlaveNotAvailable {
                    self.stats.waits_slave_not_available += 1;
                } else {
                    self.stats.waits_in_sync_replicas_not_enough += 1;
                }
                if self.starting_wait != Some(id) {
                    return bad("refused up front, but not when it started");
                }
                // Refused only if too few slaves are within `ha_max_gap_not_in_sync` of it.
                if let Some(core) = self.master.core.as_ref() {
                    let gap = self.master.config.ha_max_gap_not_in_sync;
                    let acks: Vec<Offset> = core.slaves().filter_map(|i| i.ack).collect();
                    let close = acks.iter().filter(|&&a| w.offset.saturating_sub(a) < gap).count();
                    let enough = match (e, self.master.config.ack_policy) {
                        (WaitError::SlaveNotAvailable, _) => !acks.is_empty() && close > 0,
                        (_, AckPolicy::Quorum { in_sync_replicas }) => {
                            close >= in_sync_replicas.saturating_sub(1) as usize
                        }
                        _ => false,
                    };
                    if enough {
                        return bad("refused up front though enough slaves were close enough");
                    }
                }
            }
        }
        Ok(())
    }

    /// `Ok(o)`: enough distinct slaves must hold `o` by their own truthful reports.
    fn check_wait_ok(&self, id: u64, o: Offset) -> R {
        let Some(core) = self.master.core.as_ref() else { return Ok(()) };
        // Every connection live at some point of this input, with its highest ack.
        let mut acks: BTreeMap<u64, Option<Offset>> = self.before_input.iter().copied().collect();
        for info in core.slaves() {
            let a = acks.entry(info.conn.0).or_insert(None);
            *a = (*a).max(info.ack);
        }
        let mut holders: BTreeSet<Peer> = BTreeSet::new();
        for (&conn, &ack) in &acks {
            let Some(c) = self.conns.get(&conn) else { continue };
            // The master's ack never exceeds the peer's report (checked every step), and a slave
            // reports only what it stored; so `ack` is a truthful holding.
            let holds = ack.is_some_and(|a| a >= o) && c.reported.is_some_and(|r| r >= o);
            if holds {
                let key = match c.peer {
                    Peer::Slave { idx, inc } => {
                        // What was acknowledged is still there: durable bytes survive crashes;
                        // written ones survive as long as the slave has not crashed since.
                        let s = &self.slaves[idx];
                        let kept = match s.config.ack_on {
                            AckOn::Flushed => s.log.durable() >= o,
                            AckOn::Written => s.inc != inc || s.log.end() >= o,
                        };
                        if !kept {
                            return Err(Violation::WaitBadResult {
                                id,
                                result: Ok(o),
                                why: "a slave counted for it no longer holds the offset",
                            });
                        }
                        Peer::Slave { idx, inc: 0 }
                    }
                    p => p,
                };
                holders.insert(key);
            }
        }
        // Connections still live were live when the wait completed, with an ack no higher.
        let in_sync_short = core.slaves().any(|info| info.in_sync && info.ack.is_some_and(|a| a < o));
        let need = match self.master.config.ack_policy {
            AckPolicy::AnySlave | AckPolicy::AllInSync => 1,
            AckPolicy::Quorum { in_sync_replicas } => in_sync_replicas.saturating_sub(1) as usize,
        };
        if holders.len() < need {
            let view: Vec<String> = core
                .slaves()
                .map(|info| {
                    let peer = self.conns.get(&info.conn.0).map(|c| c.peer);
                    format!("#{} {:?} ack {:?} in_sync {}", info.conn.0, peer, info.ack, info.in_sync)
                })
                .collect();
            let view = if view.is_empty() { "none".into() } else { view.join(", ") };
            return Err(Violation::WaitOkTooFew { id, offset: o, have: holders.len(), need, view });
        }
        if self.master.config.ack_policy == AckPolicy::AllInSync && in_sync_short {
            return Err(Violation::WaitBadResult {
                id,
                result: Ok(o),
                why: "an in-sync slave is below the offset",
            });
        }
        Ok(())
    }

    /// Tears down the master's side of a connection.
    fn master_side_down(&mut self, conn: u64, how: Teardown) {
        let delay = self.link_delay();
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return };
        if !c.master_open {
            return;
        }
        c.master_open = false;
        c.pending_tx.clear();
        c.pipes[Dir::ToMaster.index()].clear();
        match how {
            Teardown::Fin => {
                let p = &mut c.pipes[Dir::ToPeer.index()];
                let at = (now + delay).max(p.last_ready);
                p.eof = Some(at);
                self.kick(conn, Dir::ToPeer, at);
            }
            Teardown::Rst => {
                let p = &mut c.pipes[Dir::ToPeer.index()];
                p.clear();
                p.eof = Some(now + delay);
                self.kick(conn, Dir::ToPeer, now + delay);
            }
            Teardown::Silent => c.master_silent = true,
        }
    }

    // ---------------------------------------------------------------- slave driver

    fn start_slave(&mut self, i: usize) -> R {
        let now = self.instant(self.now);
        let s = &mut self.slaves[i];
        s.down_until = None;
        s.stopped = false;
        s.core =
            Some(Slave::new(s.config.clone(), now, s.log.end(), s.log.durable()).expect("config validated"));
        let end = s.log.end();
        self.rec(Node::Slave(i), "start", end, 0, Detail::None);
        self.drain_slave(i)
    }

    fn feed_slave(&mut self, i: usize, input: SlaveInput) -> R {
        let now = self.instant(self.now);
        let (what, a) = match &input {
            SlaveInput::Connected => ("in Connected", 0),
            SlaveInput::Received(d) => ("in Received", d.len() as u64),
            SlaveInput::Closed => ("in Closed", 0),
            SlaveInput::Appended { end } => ("in Appended", *end),
            SlaveInput::Flushed { end } => ("in Flushed", *end),
            SlaveInput::AppendFailed { end } => ("in AppendFailed", *end),
            SlaveInput::FlushFailed => ("in FlushFailed", 0),
        };
        let Some(core) = self.slaves[i].core.as_mut() else { return Ok(()) };
        core.handle_input(now, input)
            .map_err(|error| Violation::ApiMisuse { node: format!("slave {i}"), error })?;
        self.rec(Node::Slave(i), what, a, 0, Detail::None);
        self.drain_slave(i)
    }

    fn slave_timeout(&mut self, i: usize) -> R {
        self.slaves[i].timeout = None;
        let (at, n) = self.slaves[i].spin;
        self.slaves[i].spin = if at == self.now { (at, n + 1) } else { (self.now, 0) };
        if self.slaves[i].spin.1 > SPIN_LIMIT {
            return Err(Violation::Livelock { node: format!("slave {i}"), what: "timeouts at one instant" });
        }
        let now = self.instant(self.now);
        if let Some(core) = self.slaves[i].core.as_mut() {
            core.handle_timeout(now);
            self.drain_slave(i)?;
        }
        Ok(())
    }

    fn drain_slave(&mut self, i: usize) -> R {
        if self.slaves[i].draining {
            return Ok(());
        }
        self.slaves[i].draining = true;
        let result = self.drain_slave_inner(i);
        self.slaves[i].draining = false;
        result?;
        // Backpressure lifted: read what is waiting.
        let s = &self.slaves[i];
        if let (Some(conn), Some(core)) = (s.conn, s.core.as_ref()) {
            let waiting = self.conns.get(&conn).is_some_and(|c| {
                let p = &c.pipes[Dir::ToPeer.index()];
                !p.segs.is_empty() || p.eof.is_some()
            });
            if waiting && core.wants_read() {
                let now = self.now;
                self.kick(conn, Dir::ToPeer, now);
            }
        }
        Ok(())
    }

    fn drain_slave_inner(&mut self, i: usize) -> R {
        for _ in 0..DRAIN_LIMIT {
            let Some(core) = self.slaves[i].core.as_mut() else { return Ok(()) };
            match core.poll_output() {
                SlaveOutput::Timeout(at) => {
                    self.slaves[i].timeout = Some(self.to_nanos(at));
                    return Ok(());
                }
                SlaveOutput::Connect => {
                    let attempt = self.next_attempt;
                    self.next_attempt += 1;
                    self.slaves[i].connecting = Some(attempt);
                    self.rec(Node::Slave(i), "out Connect", attempt, 0, Detail::None);
                    let rtt = self.link_delay() + self.link_delay();
                    let inc = self.slaves[i].inc;
                    self.schedule(self.now + rtt, Ev::ConnectDone { slave: i, inc, attempt, fail: false });
                }
                SlaveOutput::Transmit(report) => self.slave_report(i, report)?,
                SlaveOutput::Append { offset, data } => self.slave_append(i, offset, data)?,
                SlaveOutput::Flush => {
                    self.rec(Node::Slave(i), "out Flush", 0, 0, Detail::None);
                    let s = &mut self.slaves[i];
                    let done = if std::mem::take(&mut s.fail_next) {
                        self.stats.disk_errors += 1;
                        DiskDone::FlushFailed
                    } else {
                        DiskDone::Flushed(s.log.end())
                    };
                    self.disk_op(i, done)?;
                }
                SlaveOutput::Close(reason) => {
                    self.rec(Node::Slave(i), "out Close", 0, 0, Detail::Close(reason));
                    if reason == CloseReason::HousekeepingTimeout {
                        self.stats.housekeeping_closes += 1;
                    }
                    if let Some(conn) = self.slaves[i].conn.take() {
                        self.peer_side_down(conn, Teardown::Fin);
                    }
                }
                SlaveOutput::Event(e) => {
                    if let SlaveEvent::PeerError(error) = e {
                        self.rec(Node::Slave(i), "ev PeerError", 0, 0, Detail::Peer(error));
                        match error {
                            PeerError::OffsetMismatch { .. } => {
                                self.stats.offset_mismatches += 1;
                                self.quarantine.push((i, error));
                            }
                            PeerError::Frame(_) => self.stats.frame_errors += 1,
                            _ => {}
                        }
                    }
                }
            }
        }
        Err(Violation::Livelock { node: format!("slave {i}"), what: "poll_output never returned Timeout" })
    }

    fn slave_report(&mut self, i: usize, report: [u8; REPORT_LEN]) -> R {
        let r = u64::from_be_bytes(report);
        self.rec(Node::Slave(i), "out Transmit", r, 0, Detail::None);
        let s = &self.slaves[i];
        let limit = match s.config.ack_on {
            AckOn::Written => s.log.end(),
            AckOn::Flushed => s.log.durable(),
        };
        if r > limit {
            return Err(Violation::ReportBeyondStored {
                slave: i,
                report: r,
                stored: s.log.end(),
                durable: s.log.durable(),
            });
        }
        let Some(conn) = s.conn else { return Err(Violation::ReportWithoutConnection { slave: i }) };
        self.send(conn, Dir::ToMaster, Bytes::copy_from_slice(&report));
        Ok(())
    }

    fn slave_append(&mut self, i: usize, offset: Offset, data: Bytes) -> R {
        self.rec(Node::Slave(i), "out Append", offset, data.len() as u64, Detail::None);
        if self.slaves[i].poisoned {
            // A later append of the stream that failed: it cannot continue the log, and the one
            // `AppendFailed` already queued voids it (the core restarts from that end).
            return Ok(());
        }
        let failed = std::mem::take(&mut self.slaves[i].fail_next);
        let data = if failed {
            self.stats.disk_errors += 1;
            self.slaves[i].poisoned = true;
            // A failed write may leave part of its data behind (a torn append).
            let keep = if data.len() > 1 && self.rng.chance(0.5) {
                self.rng.range(1, data.len() as u64 - 1)
            } else {
                0
            };
            if keep > 0 {
                self.stats.torn_appends += 1;
            }
            data.slice(..keep as usize)
        } else {
            data
        };
        if !data.is_empty() {
            self.store(i, offset, &data)?;
        }
        let end = self.slaves[i].log.end();
        self.disk_op(i, if failed { DiskDone::AppendFailed(end) } else { DiskDone::Appended(end) })
    }

    /// Writes replicated bytes into a slave's log, checking them against the master that sent
    /// them.
    fn store(&mut self, i: usize, offset: Offset, data: &[u8]) -> R {
        let s = &mut self.slaves[i];
        // Which master incarnation sent these bytes: the current one, or one that crashed while
        // they were in flight.
        let sender = s.conn.and_then(|c| self.conns.get(&c)).map_or(self.master.inc, |c| c.master_inc);
        let current = sender == self.master.inc;
        let was_prefix = s.prefix_ok();
        if current && !was_prefix {
            return Err(Violation::SilentMerge { slave: i, offset, valid_end: s.valid_end });
        }
        let len = data.len() as u64;
        let end = s.log.append_at(offset, data).map_err(|end| Violation::AppendNotAtEnd {
            slave: i,
            offset,
            end,
        })?;
        let source = if current { &self.master.log } else { &self.master.old_logs[&sender] };
        if !source.holds(offset, end) || source.slice(offset, end) != data {
            return Err(Violation::WrongBytes { slave: i, offset, len });
        }
        let m = &self.master.log;
        if was_prefix && m.holds(offset, end) && m.slice(offset, end) == data {
            s.valid_end = end;
        }
        self.stats.bytes_replicated += len;
        Ok(())
    }

    /// Completes a disk operation now, or late on a slow disk; completions keep their order.
    fn disk_op(&mut self, i: usize, done: DiskDone) -> R {
        let slow = self.now < self.slaves[i].slow_until;
        let delay = if slow { self.rng.range(0, self.slaves[i].slow_max) } else { 0 };
        let s = &mut self.slaves[i];
        let at = (self.now + delay).max(s.disk_last);
        s.disk_last = at;
        if at == self.now && s.disk.is_empty() {
            return self.disk_apply(i, done);
        }
        if at > self.now {
            self.stats.slow_disk_ops += 1;
        }
        s.disk.push_back((at, done));
        let inc = s.inc;
        self.schedule(at, Ev::Disk { slave: i, inc });
        Ok(())
    }

    fn disk_event(&mut self, i: usize, inc: u64) -> R {
        if self.slaves[i].inc != inc {
            return Ok(());
        }
        while let Some((at, _)) = self.slaves[i].disk.front() {
            if *at > self.now {
                break;
            }
            let (_, done) = self.slaves[i].disk.pop_front().expect("front exists");
            self.disk_apply(i, done)?;
        }
        Ok(())
    }

    fn disk_apply(&mut self, i: usize, done: DiskDone) -> R {
        let input = match done {
            DiskDone::Appended(end) => SlaveInput::Appended { end },
            DiskDone::AppendFailed(end) => SlaveInput::AppendFailed { end },
            DiskDone::Flushed(end) => {
                self.slaves[i].log.flush_upto(end);
                SlaveInput::Flushed { end }
            }
            DiskDone::FlushFailed => SlaveInput::FlushFailed,
        };
        self.feed_slave(i, input)
    }

    /// Tears down the peer's side of a connection (a slave or an intruder).
    fn peer_side_down(&mut self, conn: u64, how: Teardown) {
        let delay = self.link_delay();
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return };
        if !c.peer_open {
            return;
        }
        c.peer_open = false;
        c.pipes[Dir::ToPeer.index()].clear();
        match how {
            Teardown::Fin => {
                let p = &mut c.pipes[Dir::ToMaster.index()];
                let at = (now + delay).max(p.last_ready);
                p.eof = Some(at);
                self.kick(conn, Dir::ToMaster, at);
            }
            Teardown::Rst => {
                let p = &mut c.pipes[Dir::ToMaster.index()];
                p.clear();
                p.eof = Some(now + delay);
                self.kick(conn, Dir::ToMaster, now + delay);
            }
            Teardown::Silent => c.peer_silent = true,
        }
    }

    fn connect_done(&mut self, i: usize, inc: u64, attempt: u64, fail: bool) -> R {
        let s = &self.slaves[i];
        if s.inc != inc || s.connecting != Some(attempt) || !s.running() {
            return Ok(());
        }
        if fail {
            self.slaves[i].connecting = None;
            return self.feed_slave(i, SlaveInput::Closed);
        }
        let [to_master, to_slave] = self.partition_until[i];
        if self.master.core.is_none() {
            // Connection refused.
            self.slaves[i].connecting = None;
            return self.feed_slave(i, SlaveInput::Closed);
        }
        if to_master > self.now || to_slave > self.now {
            // The handshake is lost: the connect times out.
            let at = self.now + self.between(200 * MS, 2_000 * MS);
            self.schedule(at, Ev::ConnectDone { slave: i, inc, attempt, fail: true });
            return Ok(());
        }
        self.slaves[i].connecting = None;
        // Appends the core queued for the failed stream have all failed by now.
        self.slaves[i].poisoned = false;
        if self.cfg.close_stale_connections {
            // The driver knows peer hosts: an older connection from this slave's host is dead
            // (its process or machine restarted). Tear it down so it is not counted twice.
            let stale: Vec<u64> = self
                .conns
                .iter()
                .filter(|(_, c)| {
                    c.master_open
                        && !c.master_closing
                        && matches!(c.peer, Peer::Slave { idx, .. } if idx == i)
                })
                .map(|(&id, _)| id)
                .collect();
            for old in stale {
                self.rec(Node::Master, "closes stale connection", old, 0, Detail::None);
                self.stats.stale_connections_closed += 1;
                self.master_side_down(old, Teardown::Rst);
                self.feed_master(MasterInput::Closed { conn: ConnId(old) })?;
            }
        }
        let conn = self.open_conn(Peer::Slave { idx: i, inc });
        self.slaves[i].conn = Some(conn);
        self.feed_master(MasterInput::Accepted { conn: ConnId(conn) })?;
        self.feed_slave(i, SlaveInput::Connected)
    }

    fn open_conn(&mut self, peer: Peer) -> u64 {
        let id = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            id,
            Conn {
                peer,
                master_inc: self.master.inc,
                pipes: [Pipe::default(), Pipe::default()],
                stall_until: [0, 0],
                master_open: true,
                master_closing: false,
                peer_open: true,
                peer_silent: false,
                master_silent: false,
                pending_tx: VecDeque::new(),
                partial: Vec::new(),
                reported: None,
                started: false,
                next: None,
                body_bytes: 0,
            },
        );
        id
    }

    // ---------------------------------------------------------------- network

    fn send(&mut self, conn: u64, dir: Dir, data: Bytes) {
        let delay = self.link_delay();
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return };
        let p = &mut c.pipes[dir.index()];
        if p.eof.is_some() {
            // The connection is reset or closing in this direction: nothing more gets through.
            return;
        }
        let at = (now + delay).max(p.last_ready);
        p.last_ready = at;
        p.bytes += data.len();
        p.segs.push_back((at, data));
        self.kick(conn, dir, at);
    }

    fn kick(&mut self, conn: u64, dir: Dir, at: Nanos) {
        let at = at.max(self.now);
        let Some(c) = self.conns.get_mut(&conn) else { return };
        let p = &mut c.pipes[dir.index()];
        if p.scheduled.is_none_or(|s| s > at) {
            p.scheduled = Some(at);
            self.schedule(at, Ev::Deliver { conn, dir });
        }
    }

    fn blocked_until(&self, c: &Conn, dir: Dir) -> Nanos {
        let mut until = c.stall_until[dir.index()];
        if let Peer::Slave { idx, .. } = c.peer {
            until = until.max(self.partition_until[idx][dir.index()]);
        }
        until
    }

    fn host_up(&self, peer: Peer) -> bool {
        match peer {
            Peer::Slave { idx, inc } => {
                let s = &self.slaves[idx];
                s.inc != inc && s.running()
            }
            Peer::Intruder { .. } => false,
        }
    }

    fn deliver(&mut self, conn: u64, dir: Dir) -> R {
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return Ok(()) };
        let p = &mut c.pipes[dir.index()];
        if p.scheduled.is_some_and(|s| s <= now) {
            p.scheduled = None;
        }
        let open = match dir {
            Dir::ToMaster => c.master_open,
            Dir::ToPeer => c.peer_open,
        };
        if !open {
            // Bytes for a closed socket are dropped. A host that crashed silently and is back
            // answers them with a reset.
            let had_data = !c.pipes[dir.index()].segs.is_empty();
            c.pipes[dir.index()].clear();
            c.pipes[dir.index()].eof = None;
            let rst = match dir {
                Dir::ToPeer => c.peer_silent && had_data && c.master_open,
                Dir::ToMaster => c.master_silent && had_data && c.peer_open,
            };
            if rst {
                let back = if dir == Dir::ToPeer {
                    let peer = c.peer;
                    self.host_up(peer)
                } else {
                    self.master.core.is_some()
                };
                if back {
                    self.rec(Node::Net, "reset from rebooted host", conn, 0, Detail::None);
                    let delay = self.link_delay();
                    let other = if dir == Dir::ToPeer { Dir::ToMaster } else { Dir::ToPeer };
                    let c = self.conns.get_mut(&conn).expect("present");
                    let p = &mut c.pipes[other.index()];
                    p.clear();
                    p.eof = Some(now + delay);
                    self.kick(conn, other, now + delay);
                }
            }
            return Ok(());
        }
        let c = self.conns.get(&conn).expect("present");
        let blocked = self.blocked_until(c, dir);
        if blocked > now {
            self.kick(conn, dir, blocked);
            return Ok(());
        }
        let p = &c.pipes[dir.index()];
        if let Some(&(ready, _)) = p.segs.front() {
            if ready > now {
                self.kick(conn, dir, ready);
                return Ok(());
            }
            let peer = c.peer;
            if dir == Dir::ToPeer {
                if let Peer::Slave { idx, .. } = peer {
                    if !self.slaves[idx].core.as_ref().is_some_and(Slave::wants_read) {
                        return Ok(()); // drain_slave kicks once it wants to read again
                    }
                }
            }
            let available: usize = p.segs.iter().take_while(|(t, _)| *t <= now).map(|(_, b)| b.len()).sum();
            let max = available.min(self.faults.max_read_chunk).max(1) as u64;
            let n = self.rng.range(1, max) as usize;
            let c = self.conns.get_mut(&conn).expect("present");
            let p = &mut c.pipes[dir.index()];
            let mut chunk = BytesMut::with_capacity(n);
            let mut split = false;
            while chunk.len() < n {
                let (_, front) = p.segs.front_mut().expect("available bytes");
                let take = front.len().min(n - chunk.len());
                chunk.extend_from_slice(&front[..take]);
                if take == front.len() {
                    p.segs.pop_front();
                } else {
                    bytes::Buf::advance(front, take);
                    split = true;
                }
            }
            p.bytes -= n;
            let more = p.segs.front().map(|&(t, _)| t.max(now)).or(p.eof.map(|t| t.max(now)));
            if split {
                self.stats.split_reads += 1;
            }
            let chunk = chunk.freeze();
            match (dir, peer) {
                (Dir::ToMaster, _) => self.master_received(conn, chunk)?,
                (Dir::ToPeer, Peer::Slave { idx, .. }) => {
                    self.feed_slave(idx, SlaveInput::Received(chunk))?
                }
                (Dir::ToPeer, Peer::Intruder { id }) => self.intruder_received(id, conn, chunk),
            }
            if dir == Dir::ToPeer {
                self.flush_tx(conn)?;
            }
            if let Some(at) = more {
                self.kick(conn, dir, at);
            }
            return Ok(());
        }
        // No bytes left: EOF or reset, if one is due.
        let Some(at) = p.eof else { return Ok(()) };
        if at > now {
            self.kick(conn, dir, at);
            return Ok(());
        }
        let c = self.conns.get_mut(&conn).expect("present");
        c.pipes[dir.index()].eof = None;
        match dir {
            Dir::ToMaster => {
                if c.master_open && !c.master_closing && c.master_inc == self.master.inc {
                    c.master_open = false;
                    c.pending_tx.clear();
                    self.rec(Node::Net, "eof at master", conn, 0, Detail::None);
                    self.feed_master(MasterInput::Closed { conn: ConnId(conn) })?;
                }
            }
            Dir::ToPeer => {
                c.peer_open = false;
                let peer = c.peer;
                self.rec(Node::Net, "eof at peer", conn, 0, Detail::None);
                match peer {
                    Peer::Slave { idx, inc } => {
                        let s = &mut self.slaves[idx];
                        if s.inc == inc && s.conn == Some(conn) {
                            s.conn = None;
                            self.feed_slave(idx, SlaveInput::Closed)?;
                        }
                    }
                    Peer::Intruder { id } => {
                        self.intruders.remove(&id);
                    }
                }
            }
        }
        Ok(())
    }

    /// Feeds report bytes to the master, checking its decisions against the protocol's rules.
    fn master_received(&mut self, conn: u64, chunk: Bytes) -> R {
        if self.conns.get(&conn).is_some_and(|c| c.master_closing) {
            // A read that was under way when the core closed it: the core must ignore it.
            return self.feed_master(MasterInput::Received { conn: ConnId(conn), data: chunk });
        }
        let Some(core) = self.master.core.as_ref() else { return Ok(()) };
        let Some(info) = core.slaves().find(|s| s.conn.0 == conn) else { return Ok(()) };
        let bounds = core.log_bounds();
        let cfg = &self.master.config;
        let c = self.conns.get_mut(&conn).expect("delivering on it");
        c.partial.extend_from_slice(&chunk);
        let words = c.partial.len() / REPORT_LEN;
        let mut ack = info.ack;
        let mut sent = info.sent;
        let mut changed = None;
        let mut reported = c.reported;
        let mut expected: Result<(), PeerError> = Ok(());
        for w in c.partial.chunks_exact(REPORT_LEN).take(words) {
            let w = u64::from_be_bytes(w.try_into().expect("8 bytes"));
            if w <= MAX_WIRE_OFFSET {
                reported = Some(reported.map_or(w, |r: u64| r.max(w)));
            }
            let verdict = if w > MAX_WIRE_OFFSET {
                Err(PeerError::Frame(FrameError::OffsetOutOfRange { offset: w }))
            } else {
                match ack {
                    None if w == 0 => {
                        sent = match cfg.new_slave_start {
                            NewSlaveStart::Earliest => bounds.min,
                            NewSlaveStart::LastFile => {
                                (bounds.max - bounds.max % cfg.mapped_file_size_commit_log).max(bounds.min)
                            }
                        };
                        Ok(())
                    }
                    None if w > bounds.max => Err(PeerError::SlaveAhead { reported: w, end: bounds.max }),
                    None if w < bounds.min => {
                        Err(PeerError::SlaveBehindRetention { reported: w, min: bounds.min })
                    }
                    None => {
                        sent = w;
                        Ok(())
                    }
                    Some(_) if w > bounds.max => Err(PeerError::AckBeyondEnd { ack: w, end: bounds.max }),
                    Some(_) if w > sent => Err(PeerError::AckBeyondSent { ack: w, sent }),
                    Some(a) if w < a => Err(PeerError::AckWentBackwards { ack: w, previous: a }),
                    Some(_) => Ok(()),
                }
            };
            if let Err(e) = verdict {
                expected = Err(e);
                break;
            }
            if ack.is_none_or(|a| w > a) {
                changed = Some(w);
            }
            ack = Some(ack.map_or(w, |a| a.max(w)));
        }
        c.partial.drain(..words * REPORT_LEN);
        c.reported = reported;
        let expected = expected.map(|()| changed);
        self.peer_errors.clear();
        self.feed_master(MasterInput::Received { conn: ConnId(conn), data: chunk })?;
        let raised = self.peer_errors.iter().find(|(c, _)| *c == conn).map(|&(_, e)| e);
        let core = self.master.core.as_ref().expect("the master does not crash while receiving");
        let now_info = core.slaves().find(|s| s.conn.0 == conn);
        let got = match raised {
            Some(e) => Err(e),
            None => Ok(changed.and(now_info.and_then(|i| i.ack))),
        };
        let consistent = match (&expected, &got) {
            (Err(a), Err(b)) => a == b && now_info.is_none(),
            (Ok(a), Ok(b)) => a == b && now_info.is_some(),
            _ => false,
        };
        if !consistent {
            return Err(Violation::ReportHandling { conn, expected, got });
        }
        Ok(())
    }

    // ---------------------------------------------------------------- intruders

    fn intruder_received(&mut self, id: u64, conn: u64, chunk: Bytes) {
        let Some(x) = self.intruders.get_mut(&id) else { return };
        x.decoder.extend(chunk);
        loop {
            match x.decoder.decode() {
                Ok(Some(push)) => {
                    let end = push.offset + push.body.len() as u64;
                    x.received = Some(x.received.map_or(end, |r| r.max(end)));
                }
                Ok(None) => return,
                Err(_) => {
                    self.peer_side_down(conn, Teardown::Fin);
                    return;
                }
            }
        }
    }

    fn intruder_connect(&mut self) -> R {
        if self.master.core.is_none() || self.intruders.len() >= 2 {
            return Ok(());
        }
        let id = self.next_intruder;
        self.next_intruder += 1;
        let conn = self.open_conn(Peer::Intruder { id });
        let acts_left = self.rng.range(1, 12) as u32;
        self.intruders.insert(
            id,
            Intruder {
                conn,
                decoder: PushDecoder::new(i32::MAX as u32),
                received: None,
                last_ack: None,
                acts_left,
            },
        );
        self.stats.intruders += 1;
        self.rec(Node::Intruder(id), "connects", conn, 0, Detail::None);
        self.feed_master(MasterInput::Accepted { conn: ConnId(conn) })?;
        let at = self.now + self.between(MS, 100 * MS);
        self.schedule(at, Ev::Intruder { id });
        Ok(())
    }

    fn intruder_act(&mut self, id: u64) -> R {
        let Some(x) = self.intruders.get(&id) else { return Ok(()) };
        let conn = x.conn;
        if !self.conns.get(&conn).is_some_and(|c| c.peer_open) {
            self.intruders.remove(&id);
            return Ok(());
        }
        if x.acts_left == 0 || self.phase == Phase::Quiet {
            self.rec(Node::Intruder(id), "leaves", conn, 0, Detail::None);
            self.peer_side_down(conn, Teardown::Fin);
            self.intruders.remove(&id);
            return Ok(());
        }
        let end = self.master.log.end().max(self.master.log.min());
        let min = self.master.log.min();
        let (last, received) = (x.last_ack, x.received);
        let wire: Vec<u8> = match (last, self.rng.below(7)) {
            // First report: empty, plausible, ahead of the master, or garbage.
            (None, 0 | 1) => 0u64.to_be_bytes().to_vec(),
            (None, 2 | 3) => self.rng.range(min, end).to_be_bytes().to_vec(),
            (None, 4 | 5) => (end + self.rng.range(1, 1 << 20)).to_be_bytes().to_vec(),
            (_, 6) => (0..self.rng.range(1, 20)).map(|_| self.rng.next_u64() as u8).collect(),
            (None, _) => u64::MAX.to_be_bytes().to_vec(),
            // Later: an honest ack of what it received, or a forgery the master must refute.
            (Some(a), 0 | 1) => received.unwrap_or(a).max(a).to_be_bytes().to_vec(),
            (Some(_), 2) => (end + self.rng.range(1 << 20, 1 << 30)).to_be_bytes().to_vec(),
            (Some(a), 3) if a > 0 => (a - self.rng.range(1, a)).to_be_bytes().to_vec(),
            // The master's end: beyond what it has sent, unless it is caught up (then a lie the
            // protocol cannot tell from the truth).
            (Some(_), 3 | 4) => end.to_be_bytes().to_vec(),
            (Some(_), _) => (MAX_WIRE_OFFSET + 1 + self.rng.below(1 << 20)).to_be_bytes().to_vec(),
        };
        if wire.len() == REPORT_LEN {
            let w = u64::from_be_bytes(wire[..].try_into().expect("8 bytes"));
            if w <= MAX_WIRE_OFFSET {
                let x = self.intruders.get_mut(&id).expect("present");
                x.last_ack = Some(x.last_ack.map_or(w, |a| a.max(w)));
            }
        }
        let x = self.intruders.get_mut(&id).expect("present");
        x.acts_left -= 1;
        self.stats.intruder_reports += 1;
        self.rec(Node::Intruder(id), "sends", conn, wire.len() as u64, Detail::None);
        self.send(conn, Dir::ToMaster, Bytes::from(wire));
        let at = self.now + self.between(5 * MS, 300 * MS);
        self.schedule(at, Ev::Intruder { id });
        Ok(())
    }

    // ---------------------------------------------------------------- workload

    fn workload_tick(&mut self) -> R {
        if self.phase != Phase::Faults {
            return Ok(());
        }
        let (lo, hi) = self.workload.gap;
        let next = self.now + self.between(nanos(lo), nanos(hi));
        if self.appended >= self.workload.budget {
            return Ok(());
        }
        self.schedule(next, Ev::Workload);
        if self.master.core.is_none() {
            return Ok(());
        }
        if self.cfg.restart_fence && !self.master.fence.is_empty() {
            self.stats.appends_fenced += 1;
            return Ok(());
        }
        let burst = self.rng.range(1, self.workload.max_burst);
        let per_message = self.rng.chance(self.workload.appended_per_message);
        self.rec(Node::Workload, "burst", burst, u64::from(per_message), Detail::None);
        let mut ends = Vec::new();
        for _ in 0..burst {
            let len = self.rng.range(1, self.workload.max_message);
            let end = self.master.log.append_generated(self.master.inc, len);
            if self.workload.master_flush.is_none() {
                self.master.log.flush();
            }
            self.appended += len;
            self.stats.messages += 1;
            self.stats.bytes_appended += len;
            ends.push(end);
            if per_message {
                self.feed_master(MasterInput::Appended { end })?;
            }
        }
        if !per_message {
            let end = *ends.last().expect("a burst has a message");
            self.feed_master(MasterInput::Appended { end })?;
        }
        for end in ends {
            if self.master.core.is_some() && self.rng.chance(self.workload.sync_probability) {
                self.start_wait(end)?;
            }
        }
        if self.master.core.is_some() && self.rng.chance(self.workload.late_wait_probability) {
            // A late waiter: an offset slaves may already hold. Half the time, exactly the
            // offset an ack in flight carries, with the deadline exactly at its arrival: the
            // deadline must win the tie.
            let end = self.master.log.end();
            let in_flight = self
                .conns
                .values()
                .filter(|c| c.master_open && c.started)
                .filter_map(|c| c.pipes[Dir::ToMaster.index()].segs.front())
                .filter(|(t, b)| *t > self.now && b.len() == REPORT_LEN)
                .map(|(t, b)| (*t, u64::from_be_bytes(b[..].try_into().expect("8 bytes"))))
                .find(|&(_, v)| v <= end && v > 0);
            match in_flight {
                Some((at, v)) if self.rng.chance(0.5) => self.start_wait_until(v, at)?,
                _ => {
                    let offset = self.between(end.saturating_sub(4_096).max(self.master.log.min()), end);
                    self.start_wait(offset)?;
                }
            }
        }
        if self.next_wait > 1 && self.rng.chance(self.workload.cancel_probability / 2.0) {
            // Cancelling a wait that may have finished already: the core ignores unknown ids.
            let id = self.rng.range(1, self.next_wait - 1);
            if let Some(w) = self.waits.get_mut(&id) {
                w.cancel_requested = true;
            }
            self.feed_master(MasterInput::CancelWait { id: WaitId(id) })?;
        }
        if !self.waits.is_empty() && self.rng.chance(self.workload.cancel_probability) {
            let k = self.rng.below(self.waits.len() as u64) as usize;
            let id = *self.waits.keys().nth(k).expect("k < len");
            self.waits.get_mut(&id).expect("present").cancel_requested = true;
            self.feed_master(MasterInput::CancelWait { id: WaitId(id) })?;
        }
        Ok(())
    }

    fn start_wait(&mut self, offset: Offset) -> R {
        // Sometimes exactly when an ack in flight arrives: the deadline must win the tie.
        let ack_due = self
            .conns
            .values()
            .filter(|c| c.master_open)
            .filter_map(|c| c.pipes[Dir::ToMaster.index()].segs.front().map(|&(t, _)| t))
            .filter(|&t| t > self.now)
            .min();
        let ttl = match self.rng.below(12) {
            0 => 0,
            10 | 11 if ack_due.is_some() => ack_due.expect("checked") - self.now,
            1..=3 => self.between(MS, 50 * MS),
            4..=7 => self.between(50 * MS, 2_000 * MS),
            _ => self.between(2_000 * MS, 10_000 * MS),
        };
        self.start_wait_until(offset, self.now + ttl)
    }

    fn start_wait_until(&mut self, offset: Offset, deadline: Nanos) -> R {
        let id = self.next_wait;
        self.next_wait += 1;
        self.waits.insert(id, WaitRec { offset, deadline, cancel_requested: false });
        self.wait_deadlines.insert((deadline, id));
        self.stats.waits += 1;
        self.starting_wait = Some(id);
        let input =
            MasterInput::AwaitReplication { id: WaitId(id), offset, deadline: self.instant(deadline) };
        let result = self.feed_master(input);
        self.starting_wait = None;
        result
    }

    // ---------------------------------------------------------------- faults

    fn fault_tick(&mut self) -> R {
        if self.phase != Phase::Faults {
            return Ok(());
        }
        let tick = 100 * MS;
        let dt = 0.1;
        let f = self.faults.clone();
        if self.rng.chance(f.stall * dt) {
            self.fault_stall();
        }
        if self.rng.chance(f.reset * dt) {
            self.fault_reset();
        }
        if self.rng.chance(f.partition_one_way * dt) {
            self.fault_partition(false);
        }
        if self.rng.chance(f.partition_both_ways * dt) {
            self.fault_partition(true);
        }
        if self.rng.chance(f.slave_crash * dt) {
            self.fault_slave_crash(false)?;
        }
        if self.rng.chance(f.slave_stop * dt) {
            self.fault_slave_crash(true)?;
        }
        if self.rng.chance(f.slow_disk * dt) {
            self.fault_slow_disk();
        }
        if self.rng.chance(f.disk_error * dt) {
            self.fault_disk_error();
        }
        if self.rng.chance(f.master_crash * dt) {
            self.fault_master_crash();
        }
        if self.rng.chance(f.intruder * dt) {
            self.intruder_connect()?;
        }
        if self.rng.chance(f.retention * dt) {
            self.fault_retention()?;
        }
        if self.rng.chance(f.spurious_timeout * dt) {
            self.spurious_timeout()?;
        }
        self.schedule(self.now + tick, Ev::FaultTick);
        Ok(())
    }

    /// `handle_timeout` at an instant no core asked for: it must be harmless.
    fn spurious_timeout(&mut self) -> R {
        let k = self.rng.below(self.slaves.len() as u64 + 1) as usize;
        let now = self.instant(self.now);
        self.stats.spurious_timeouts += 1;
        if k == self.slaves.len() {
            self.snapshot_master();
            if let Some(core) = self.master.core.as_mut() {
                core.handle_timeout(now);
                self.rec(Node::Master, "spurious timeout", 0, 0, Detail::None);
                self.drain_master()?;
            }
        } else if let Some(core) = self.slaves[k].core.as_mut() {
            core.handle_timeout(now);
            self.rec(Node::Slave(k), "spurious timeout", 0, 0, Detail::None);
            self.drain_slave(k)?;
        }
        Ok(())
    }

    fn open_conns(&self) -> Vec<u64> {
        self.conns
            .iter()
            .filter(|(_, c)| c.master_open && !c.master_closing && c.peer_open)
            .map(|(&id, _)| id)
            .collect()
    }

    fn running_slaves(&self) -> Vec<usize> {
        (0..self.slaves.len()).filter(|&i| self.slaves[i].running()).collect()
    }

    fn fault_stall(&mut self) {
        let conns = self.open_conns();
        if conns.is_empty() {
            return;
        }
        let conn = conns[self.rng.below(conns.len() as u64) as usize];
        let dir = if self.rng.chance(0.5) { Dir::ToMaster } else { Dir::ToPeer };
        let min_hk = self
            .slaves
            .iter()
            .map(|s| nanos(s.config.housekeeping_interval))
            .min()
            .unwrap_or(u64::MAX)
            .min(self.master_hk());
        let until = self.now + self.between(MS, min_hk * 4 / 5);
        self.conns.get_mut(&conn).expect("open").stall_until[dir.index()] = until;
        self.stats.stalls += 1;
        self.rec(Node::Fault, "stall", conn, until - self.now, Detail::None);
        self.kick(conn, dir, until);
    }

    fn fault_reset(&mut self) {
        let conns = self.open_conns();
        if conns.is_empty() {
            return;
        }
        let conn = conns[self.rng.below(conns.len() as u64) as usize];
        self.stats.resets += 1;
        self.rec(Node::Fault, "reset", conn, 0, Detail::None);
        for dir in [Dir::ToMaster, Dir::ToPeer] {
            let at = self.now + self.link_delay();
            let c = self.conns.get_mut(&conn).expect("open");
            let p = &mut c.pipes[dir.index()];
            p.clear();
            p.eof = Some(at);
            self.kick(conn, dir, at);
        }
    }

    fn fault_partition(&mut self, both: bool) {
        let candidates: Vec<usize> =
            (0..self.slaves.len()).filter(|&i| self.slaves[i].ended_with.is_none()).collect();
        if candidates.is_empty() {
            return;
        }
        let i = candidates[self.rng.below(candidates.len() as u64) as usize];
        let hk = self.max_hk();
        let until = self.now + self.between(hk * 6 / 5, hk * 3);
        let dirs: &[Dir] = if both {
            self.stats.partitions_both_ways += 1;
            &[Dir::ToMaster, Dir::ToPeer]
        } else {
            self.stats.partitions_one_way += 1;
            if self.rng.chance(0.5) { &[Dir::ToMaster] } else { &[Dir::ToPeer] }
        };
        for &d in dirs {
            self.partition_until[i][d.index()] = until;
        }
        self.rec(
            Node::Fault,
            if both { "partition both" } else { "partition one-way" },
            i as u64,
            until - self.now,
            Detail::None,
        );
    }

    fn fault_slave_crash(&mut self, stop: bool) -> R {
        let running = self.running_slaves();
        if running.is_empty() {
            return Ok(());
        }
        let i = running[self.rng.below(running.len() as u64) as usize];
        let silent = self.rng.chance(self.faults.silent_crash);
        let hk = self.max_hk();
        let down = if stop { self.between(3 * hk, 8 * hk) } else { self.between(MS, 3_000 * MS) };
        self.crash_slave(i, silent, down, stop);
        Ok(())
    }

    fn crash_slave(&mut self, i: usize, silent: bool, down: Nanos, stop: bool) {
        let s = &mut self.slaves[i];
        s.core = None;
        s.timeout = None;
        s.inc += 1;
        s.connecting = None;
        s.disk.clear();
        s.disk_last = self.now;
        s.poisoned = false;
        s.fail_next = false;
        s.slow_until = 0;
        let conn = s.conn.take();
        // A machine crash (silent to peers) keeps only durable bytes plus a torn part of the
        // rest; a process crash keeps the page cache, so nothing written is lost, though the
        // durable end may lag behind it at restart.
        let lost = if silent {
            let unflushed = s.log.end().saturating_sub(s.log.durable());
            let keep = self.rng.range(0, unflushed);
            self.slaves[i].log.crash(keep)
        } else {
            self.stats.process_crashes += 1;
            0
        };
        let s = &mut self.slaves[i];
        s.valid_end = s.valid_end.min(s.log.end());
        s.down_until = Some(self.now + down);
        s.stopped = stop;
        let inc = s.inc;
        if stop {
            self.stats.slave_stops += 1;
        } else {
            self.stats.slave_crashes += 1;
        }
        if lost > 0 {
            self.stats.slave_torn_tails += 1;
            self.stats.slave_bytes_lost += lost;
        }
        self.rec(Node::Fault, if stop { "slave stop" } else { "slave crash" }, i as u64, lost, Detail::None);
        if let Some(conn) = conn {
            // A process crash resets the connection; after a machine crash, reports already on
            // the wire still reach the master.
            self.peer_side_down(conn, if silent { Teardown::Silent } else { Teardown::Rst });
        }
        self.schedule(self.now + down, Ev::SlaveRestart { slave: i, inc });
    }

    fn fault_slow_disk(&mut self) {
        let running = self.running_slaves();
        if running.is_empty() {
            return;
        }
        let i = running[self.rng.below(running.len() as u64) as usize];
        let hk = nanos(self.slaves[i].config.housekeeping_interval);
        let until = self.now + self.between(100 * MS, 2 * hk);
        let slow_max = self.between(MS, hk / 2);
        let s = &mut self.slaves[i];
        s.slow_until = until;
        s.slow_max = slow_max;
        self.stats.slow_disk_periods += 1;
        self.rec(Node::Fault, "slow disk", i as u64, slow_max, Detail::None);
    }

    fn fault_disk_error(&mut self) {
        let running = self.running_slaves();
        if running.is_empty() {
            return;
        }
        let i = running[self.rng.below(running.len() as u64) as usize];
        self.slaves[i].fail_next = true;
        self.rec(Node::Fault, "disk error armed", i as u64, 0, Detail::None);
    }

    fn fault_master_crash(&mut self) {
        if self.master.core.is_none() {
            return;
        }
        let silent = self.rng.chance(self.faults.silent_crash);
        self.master.core = None;
        self.master.timeout = None;
        self.master.inc += 1;
        self.stats.waits_lost_in_master_crash += self.waits.len() as u64;
        self.waits.clear();
        self.wait_deadlines.clear();
        let ids: Vec<u64> = self.conns.iter().filter(|(_, c)| c.master_open).map(|(&id, _)| id).collect();
        for conn in ids {
            // A process crash resets its connections (in-flight bytes are lost); after a machine
            // crash, bytes already on the wire still arrive.
            self.master_side_down(conn, if silent { Teardown::Silent } else { Teardown::Rst });
        }
        self.intruders.clear();
        let old = self.master.log.clone();
        self.master.old_logs.insert(self.master.inc - 1, old);
        // A machine crash loses unflushed bytes (all but a torn part); a process crash keeps
        // the page cache.
        let lost = if silent {
            let log = &mut self.master.log;
            let unflushed = log.end().saturating_sub(log.durable());
            let keep = self.rng.range(0, unflushed);
            self.master.log.crash(keep)
        } else {
            self.stats.process_crashes += 1;
            0
        };
        self.stats.master_crashes += 1;
        if lost > 0 {
            self.stats.master_lost_tails += 1;
            self.stats.master_bytes_lost += lost;
        }
        let end = self.master.log.end().max(self.master.log.min());
        for s in &mut self.slaves {
            s.valid_end = s.valid_end.min(end);
        }
        let down = self.between(MS, 3_000 * MS);
        self.master.down_until = Some(self.now + down);
        self.rec(Node::Fault, "master crash", lost, down, Detail::None);
        let inc = self.master.inc;
        self.schedule(self.now + down, Ev::MasterRestart { inc });
    }

    fn restart_master(&mut self) -> R {
        let bounds = self.master.log.bounds();
        let now = self.instant(self.now);
        self.master.core =
            Some(Master::new(self.master.config.clone(), now, bounds).expect("config validated"));
        self.master.down_until = None;
        self.master.spin = (0, 0);
        self.master.fence = (0..self.slaves.len()).filter(|&i| self.slaves[i].ended_with.is_none()).collect();
        if self.slaves.iter().any(|s| s.ended_with.is_none() && !s.prefix_ok()) {
            self.stats.master_restarts_with_slave_ahead += 1;
        }
        self.rec(Node::Master, "restart", bounds.min, bounds.max, Detail::None);
        self.drain_master()
    }

    fn fault_retention(&mut self) -> R {
        let Some(core) = self.master.core.as_ref() else { return Ok(()) };
        let seg = self.master.config.mapped_file_size_commit_log;
        let bounds = core.log_bounds();
        let has_bytes = |s: &SlaveNode| s.ended_with.is_none() && !s.log.is_empty();
        // Mostly past a stopped slave; sometimes past the most lagging running one (retention
        // goes by age and disk usage, not by slaves).
        let stopped = (0..self.slaves.len()).find(|&i| {
            let s = &self.slaves[i];
            s.stopped && !s.running() && has_bytes(s)
        });
        let lagging = || {
            (0..self.slaves.len())
                .filter(|&i| self.slaves[i].running() && has_bytes(&self.slaves[i]))
                .min_by_key(|&i| (self.slaves[i].log.end(), i))
        };
        let (i, past_stopped) = match stopped {
            Some(i) if self.rng.chance(0.8) => (i, true),
            _ => match lagging() {
                Some(i) if self.rng.chance(0.3) => (i, false),
                _ => return Ok(()),
            },
        };
        let min = (self.slaves[i].log.end() / seg + 1).saturating_mul(seg);
        // Only over durable bytes, and past a stopped slave without cutting off running ones.
        let spares_running = !past_stopped
            || self
                .slaves
                .iter()
                .filter(|s| s.running() && s.ended_with.is_none())
                .all(|s| s.log.end() >= min && !s.log.is_empty());
        if min <= bounds.min || min > bounds.max || min > self.master.log.durable() || !spares_running {
            return Ok(());
        }
        self.master.log.retain(min);
        if past_stopped {
            self.stats.retention_past_stopped_slave += 1;
        } else {
            self.stats.retention_past_lagging_slave += 1;
        }
        self.rec(Node::Fault, "retention", i as u64, min, Detail::None);
        self.feed_master(MasterInput::Retained { min })
    }

    /// A slave the master or the slave itself reported with a typed error is taken out of
    /// service, and ends with that error. The error must be true.
    fn end_slave(&mut self, i: usize, error: PeerError) -> R {
        let s = &self.slaves[i];
        if s.ended_with.is_some() {
            return Ok(());
        }
        let justified = match error {
            PeerError::SlaveAhead { .. } | PeerError::OffsetMismatch { .. } => !s.prefix_ok(),
            // An empty slave starts again from the min offset: nothing to end.
            PeerError::SlaveBehindRetention { .. } if s.log.is_empty() => return Ok(()),
            PeerError::SlaveBehindRetention { reported, min } => reported < min && s.log.end() < min,
            _ => false,
        };
        if !justified {
            return Err(Violation::FalseAccusation { slave: i, error });
        }
        self.rec(Node::Slave(i), "taken out", 0, 0, Detail::Peer(error));
        let s = &mut self.slaves[i];
        s.ended_with = Some(error);
        s.core = None;
        s.timeout = None;
        s.inc += 1;
        s.connecting = None;
        s.disk.clear();
        self.stats.slaves_ended_with_error += 1;
        self.master.fence.remove(&i);
        if let Some(conn) = self.slaves[i].conn.take() {
            self.peer_side_down(conn, Teardown::Fin);
        }
        Ok(())
    }

    fn quiet(&mut self) -> R {
        self.phase = Phase::Quiet;
        self.rec(Node::Fault, "faults stop", 0, 0, Detail::None);
        for p in &mut self.partition_until {
            *p = [0, 0];
        }
        for s in &mut self.slaves {
            s.slow_until = 0;
            s.fail_next = false;
        }
        let ids: Vec<u64> = self.conns.keys().copied().collect();
        for conn in &ids {
            self.conns.get_mut(conn).expect("listed").stall_until = [0, 0];
        }
        if self.master.core.is_none() {
            self.restart_master()?;
        }
        for i in 0..self.slaves.len() {
            if !self.slaves[i].running() && self.slaves[i].ended_with.is_none() {
                self.start_slave(i)?;
            }
        }
        let now = self.now;
        for conn in ids {
            self.kick(conn, Dir::ToMaster, now);
            self.kick(conn, Dir::ToPeer, now);
        }
        Ok(())
    }

    // ---------------------------------------------------------------- invariants

    /// The invariants that hold after every step.
    fn check(&mut self) -> R {
        for (i, s) in self.slaves.iter().enumerate() {
            let Some(core) = s.core.as_ref() else { continue };
            let view = |what, value: u64, limit: u64| {
                if value > limit {
                    Err(Violation::SlaveView { slave: i, what, value, limit })
                } else {
                    Ok(())
                }
            };
            view("stored end beyond the log's", core.end(), s.log.end())?;
            view("durable end beyond the log's", core.flushed(), s.log.durable())?;
            let limit = match s.config.ack_on {
                AckOn::Written => s.log.end(),
                AckOn::Flushed => s.log.durable(),
            };
            if let Some(r) = core.reported() {
                if r > limit {
                    return Err(Violation::ReportBeyondStored {
                        slave: i,
                        report: r,
                        stored: s.log.end(),
                        durable: s.log.durable(),
                    });
                }
            }
            if !s.prefix_ok() && s.ended_with.is_none() {
                if let Some(conn) = s.conn {
                    if self.conns.get(&conn).is_some_and(|c| c.started && c.master_open) {
                        return Err(Violation::DivergedSlaveAccepted {
                            slave: i,
                            reported: core.reported().unwrap_or(0),
                            valid_end: s.valid_end,
                        });
                    }
                }
            }
        }
        if let Some(core) = self.master.core.as_ref() {
            let end = core.log_bounds().max;
            for info in core.slaves() {
                let conn = info.conn.0;
                let reported = self.conns.get(&conn).and_then(|c| c.reported);
                let view = |what, value: u64, limit: u64| {
                    if value > limit {
                        Err(Violation::MasterView { conn, what, value, limit })
                    } else {
                        Ok(())
                    }
                };
                view("sent beyond the log's end", info.sent, end)?;
                let transmitted = self.conns.get(&conn).map_or(0, |c| c.body_bytes);
                if info.bytes_sent != transmitted {
                    return Err(Violation::MasterView {
                        conn,
                        what: "bytes_sent differs from the body bytes transmitted",
                        value: info.bytes_sent,
                        limit: transmitted,
                    });
                }
                view(
                    "inflight beyond max_inflight",
                    u64::from(info.inflight),
                    u64::from(self.master.config.max_inflight),
                )?;
                if let Some(ack) = info.ack {
                    view("ack beyond what the peer reported", ack, reported.unwrap_or(0))?;
                    view("ack beyond sent", ack, info.sent)?;
                }
            }
            // A wait the frontier already covers must have completed in the same input.
            if let Some(frontier) = core.replicated() {
                if let Some((&id, w)) = self.waits.iter().find(|(_, w)| w.offset <= frontier) {
                    return Err(Violation::WaitBadResult {
                        id,
                        result: Ok(w.offset),
                        why: "still pending though the master's frontier covers it",
                    });
                }
            }
            if core.pending_waits() != self.waits.len() {
                return Err(Violation::MasterView {
                    conn: 0,
                    what: "pending waits differ from the waits started",
                    value: core.pending_waits() as u64,
                    limit: self.waits.len() as u64,
                });
            }
        }
        if let Some(&(deadline, id)) = self.wait_deadlines.first() {
            if deadline < self.now {
                return Err(Violation::WaitMissedDeadline {
                    id,
                    late: Duration::from_nanos(self.now - deadline),
                });
            }
        }
        Ok(())
    }

    /// `Ok` once every slave has converged (or ended with a true typed error) and no wait is
    /// left; else what is still wrong.
    fn convergence(&self) -> Result<(), String> {
        let Some(core) = self.master.core.as_ref() else { return Err("the master is down".into()) };
        let end = core.log_bounds().max;
        if core.pending_waits() > 0 || !self.waits.is_empty() {
            return Err(format!("{} wait(s) pending", core.pending_waits().max(self.waits.len())));
        }
        for (i, s) in self.slaves.iter().enumerate() {
            if s.ended_with.is_some() {
                continue;
            }
            if !s.prefix_ok() {
                return Err(format!("slave {i} diverged at {} and was never reported", s.valid_end));
            }
            // An empty slave that `NewSlaveStart::LastFile` started exactly at the master's end
            // has nothing to hold yet, and can only report 0 until the master appends.
            let mut starts_at_end = false;
            let acked = core.slaves().any(|info| {
                let mine = self
                    .conns
                    .get(&info.conn.0)
                    .is_some_and(|c| matches!(c.peer, Peer::Slave { idx, inc } if idx == i && inc == s.inc));
                starts_at_end |= mine && s.log.is_empty() && info.start == Some(end);
                mine && (info.ack == Some(end) || (s.log.is_empty() && info.start == Some(end)))
            });
            if !s.running() || (s.log.end() != end && !starts_at_end) || !acked {
                return Err(format!(
                    "slave {i} (running {}, state {:?}) holds {}, master end {end}, master's ack for it {}",
                    s.running(),
                    s.core.as_ref().map(Slave::state),
                    s.log.end(),
                    if acked { "current" } else { "missing or behind" }
                ));
            }
        }
        Ok(())
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
