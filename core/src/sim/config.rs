//! What a simulation runs: cluster size, core configurations, fault rates, budgets.

use std::time::Duration;

use crate::config::{MasterConfig, SlaveConfig};

/// How a simulation is set up. Everything left `None` is drawn from the seed, so one
/// configuration explores many clusters (swarm testing).
///
/// The defaults draw everything and run 20 s of faults followed by up to 120 s of quiet for the
/// liveness check, all in virtual time.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// Number of slaves (1 to 4 make sense); `None` draws 1..=4 per seed.
    pub slaves: Option<usize>,
    /// The master's configuration; `None` draws small, fast settings per seed.
    pub master: Option<MasterConfig>,
    /// Every slave's configuration; `None` draws one per slave (including `ack_on`).
    pub slave: Option<SlaveConfig>,
    /// Fault rates; `None` draws them per seed, each kind on or off (swarm testing).
    pub faults: Option<FaultRates>,
    /// Virtual time during which the workload runs and faults are injected.
    pub fault_time: Duration,
    /// Virtual time allowed, once faults stop, for every slave to converge and every wait to
    /// finish.
    pub liveness_timeout: Duration,
    /// Upper bound on bytes the workload appends to the master's log.
    pub max_bytes: u64,
    /// Upper bound on simulation steps; reaching it is a failure (a livelock).
    pub max_steps: u64,
    /// After a master restart, run the master service with its restart fence
    /// ([`MasterServiceConfig::restart_fence`]) set to the slaves still in service: producers
    /// hold their appends until that many distinct trusted replicas have reported to the new
    /// master. The classic protocol has no epochs: a slave that holds bytes the master lost can
    /// only be told apart while the master's log is still shorter than the slave's. Turning
    /// this off shows that limit as a [`Violation::DivergedSlaveAccepted`].
    ///
    /// [`MasterServiceConfig::restart_fence`]: crate::service::MasterServiceConfig::restart_fence
    /// [`Violation::DivergedSlaveAccepted`]: super::Violation::DivergedSlaveAccepted
    pub restart_fence: bool,
    /// Run every slave on one loopback host (as tests and the demo do) instead of a host of its
    /// own. The classic protocol has no slave identity; the master's driver tells replicas apart
    /// by host, which loopback does not allow: there each connection counts on its own, so the
    /// stale connection of a slave that crashed silently and came back keeps its ack until
    /// housekeeping closes it, and a quorum can count one slave twice ([`Violation::WaitOkTooFew`]).
    ///
    /// [`Violation::WaitOkTooFew`]: super::Violation::WaitOkTooFew
    pub loopback_slaves: bool,
    /// Let intruders from the replicas' network (allow-listed, so trusted) connect while the
    /// restart fence is up (on by default). The fence counts only replicas the allow-list names
    /// exactly, so an honest report from a stranger on the network must not lift it; when it
    /// did (soak seed 0xf45ab), the master merged a diverged slave's log
    /// ([`Violation::DivergedSlaveAccepted`]). Off: strangers come only from outside the
    /// allow-list (refused at accept) while the fence is up.
    ///
    /// [`Violation::DivergedSlaveAccepted`]: super::Violation::DivergedSlaveAccepted
    pub trusted_strangers_during_restart: bool,
    /// How a failure says to replay it; `{seed}` is replaced by the seed in hex.
    pub replay_command: String,
    /// Print every simulation event to stderr as it happens (for debugging one seed).
    pub print_trace: bool,
    /// Which HA protocol the cluster runs: the classic one (one master, fixed), or AutoSwitch
    /// (controller mode: a group of brokers whose master a fake coordinator elects, in epochs).
    pub protocol: Protocol,
}

/// The HA protocol a simulation runs.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum Protocol {
    /// The classic protocol: one master and its slaves (the simulator's original mode).
    #[default]
    Classic,
    /// RocketMQ 5's AutoSwitch protocol: a group of `slaves + 1` brokers (2 to 5; `slaves: None`
    /// draws 1..=4), each running the production AutoSwitch master or slave driver as the fake
    /// coordinator's group record says, with leases, elections, epochs, sync-state-set changes
    /// committed through the record, and divergent tails. Of [`SimConfig::faults`] it uses the
    /// network shape (`latency`, `jitter`, `max_read_chunk`) and, as rates per second,
    /// `master_crash` + `slave_crash` (broker crashes), `silent_crash` (the share that are
    /// machine crashes), `partition_both_ways` (a broker cut from everything),
    /// `partition_one_way` (cut from the coordinator only), `stall` (cut from its peers only)
    /// and `reset`; `master` and `slave` give the core timers.
    AutoSwitch,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            slaves: None,
            master: None,
            slave: None,
            faults: None,
            fault_time: Duration::from_secs(20),
            liveness_timeout: Duration::from_secs(120),
            max_bytes: 96 * 1024,
            max_steps: 2_000_000,
            restart_fence: true,
            loopback_slaves: false,
            trusted_strangers_during_restart: true,
            replay_command: "SIM_SEED={seed} SIM_RUNS=1 cargo test -p logship-core --test sim -- --nocapture"
                .into(),
            print_trace: false,
            protocol: Protocol::Classic,
        }
    }
}

/// How often each fault happens, and the shape of the network. Rates are expected events per
/// second of virtual time during the fault phase; 0 turns a fault off.
#[derive(Clone, Debug, PartialEq)]
pub struct FaultRates {
    /// One-way link latency.
    pub latency: Duration,
    /// Extra random latency per write, up to this much (order within a connection is kept).
    pub jitter: Duration,
    /// Largest chunk one read returns; reads split and merge writes arbitrarily up to it.
    pub max_read_chunk: usize,
    /// Bytes a connection holds in flight toward a slave before the master's writes wait.
    pub pipe_capacity: usize,
    /// Stalls of one direction of one connection, shorter than housekeeping.
    pub stall: f64,
    /// Connection resets (both sides see the connection fail, in-flight bytes are lost).
    pub reset: f64,
    /// One-way partitions between the master and a slave, longer than housekeeping.
    pub partition_one_way: f64,
    /// Two-way partitions between the master and a slave, longer than housekeeping.
    pub partition_both_ways: f64,
    /// Slave crashes: unflushed bytes are partly lost (torn tail), restart soon after.
    pub slave_crash: f64,
    /// Slaves stopped for a long time (several housekeeping intervals).
    pub slave_stop: f64,
    /// Periods of slow slave disk: `Appended` and `Flushed` arrive late.
    pub slow_disk: f64,
    /// Failed slave appends or flushes.
    pub disk_error: f64,
    /// Master crashes: unflushed bytes are partly lost, restart soon after.
    pub master_crash: f64,
    /// Forged-ack intruders connecting to the master.
    pub intruder: f64,
    /// Attempts to advance the master's min offset past a stopped slave.
    pub retention: f64,
    /// Spurious `handle_timeout` calls, at instants no core asked for.
    pub spurious_timeout: f64,
    /// Up to this long between the master's `Close` and the driver's `Closed`, during which
    /// reads and writes that were under way still reach the core (which must ignore them).
    pub close_lag: Duration,
    /// Probability that a crash is a machine crash (unflushed bytes are lost but for a torn
    /// part; peers see no FIN or RST and find out by housekeeping) rather than a process crash
    /// (the page cache survives; peers see a reset).
    pub silent_crash: f64,
}

impl FaultRates {
    /// A perfect network and no faults.
    pub fn none() -> Self {
        Self {
            latency: Duration::from_millis(1),
            jitter: Duration::ZERO,
            max_read_chunk: usize::MAX,
            pipe_capacity: 1 << 20,
            stall: 0.0,
            reset: 0.0,
            partition_one_way: 0.0,
            partition_both_ways: 0.0,
            slave_crash: 0.0,
            slave_stop: 0.0,
            slow_disk: 0.0,
            disk_error: 0.0,
            master_crash: 0.0,
            intruder: 0.0,
            retention: 0.0,
            spurious_timeout: 0.0,
            close_lag: Duration::ZERO,
            silent_crash: 0.0,
        }
    }

    /// Every fault at a moderate rate.
    pub fn all() -> Self {
        Self {
            latency: Duration::from_millis(2),
            jitter: Duration::from_millis(2),
            max_read_chunk: 64,
            pipe_capacity: 8 * 1024,
            stall: 0.3,
            reset: 0.1,
            partition_one_way: 0.05,
            partition_both_ways: 0.05,
            slave_crash: 0.1,
            slave_stop: 0.05,
            slow_disk: 0.2,
            disk_error: 0.05,
            master_crash: 0.05,
            intruder: 0.1,
            retention: 0.3,
            spurious_timeout: 1.0,
            close_lag: Duration::from_millis(5),
            silent_crash: 0.5,
        }
    }
}
