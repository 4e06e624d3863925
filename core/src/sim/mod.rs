//! A deterministic simulator of a whole cluster: one master and up to four slaves, or (in
//! AutoSwitch mode) a group of up to five brokers whose master a fake coordinator elects, in
//! virtual time, with seeded faults, checking the protocol's invariants after every step.
//!
//! Because the core is sans-IO, the simulator is only a loop (quinn's `Pair::step`, str0m's
//! `progress`, extended to N nodes): it plays the runtime adapters, the network, the disks, the
//! clock and the producers, and everything above the sockets is the code production runs: the
//! master is a [`MasterDriver`](crate::service::MasterDriver) built by `for_service` (admission,
//! restart fence, eviction of stale connections, first reports checked against the log) over
//! simulated connection and wait sinks, and each slave a
//! [`SlaveDriver`](crate::service::SlaveDriver) whose appends the simulated disk answers now or
//! late ([`SlaveDriver::poll_action`](crate::service::SlaveDriver::poll_action)). The oracle
//! that judges a run is the simulator's own: it shares no code with the drivers and reads only
//! what they expose (the cores' state, the driver's fence and counters, the wire). One [`SimRng`]
//! seeded from a `u64` makes every choice, time starts from one epoch and advances only by the
//! simulator, and no `HashMap` order is ever observed, so a seed replays exactly.
//!
//! ```
//! use logship_core::sim::{SimConfig, Simulation};
//!
//! let outcome = Simulation::new(7, SimConfig::default())?.run().map_err(|f| f.to_string())?;
//! assert_eq!(outcome.stats.seeds, 1);
//! // Same seed, same run.
//! let again = Simulation::new(7, SimConfig::default())?.run().map_err(|f| f.to_string())?;
//! assert_eq!(outcome.trace_hash, again.trace_hash);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What is simulated
//!
//! This section and the next describe the classic mode; [AutoSwitch mode](#autoswitch-mode)
//! follows them.
//!
//! - **Cluster.** A master service and 1–4 slave services, each with an in-memory log (behind
//!   the crate's [`LogRead`](crate::LogRead) / [`LogWrite`](crate::LogWrite)) that records which
//!   bytes are written and which are durable. Each slave runs on a host of its own
//!   (`10.0.0.x`, in the master's replica allow-list), or all on loopback
//!   ([`SimConfig::loopback_slaves`]). The simulated adapters follow the service layer's
//!   contract: a frame handed to a connection sink is resolved from the master's log and written
//!   to the connection (`sent` once the connection has room); a slave append is stored at the
//!   log's end (an empty log adopts the offset); a flush makes bytes durable; after the master
//!   driver closes a sink the adapter tears the connection down and reports `closed` (at once,
//!   or after a lag during which reads and writes already under way still arrive); after the
//!   slave's `Disconnect` it drops the connection and reports nothing. Every `Append` gets its own
//!   answer, in order, however late the disk is; after a failed one, the appends that follow
//!   fail too. Slaves also flush in the background, and cores get spurious `handle_timeout`
//!   calls.
//! - **Links.** Each connection direction is an ordered byte pipe with latency and jitter,
//!   reads of arbitrary size (splitting and merging writes), a bounded capacity toward the slave
//!   (so the master's flow control and the slave's `wants_read` backpressure matter), stalls,
//!   resets, and one-way or two-way partitions longer than housekeeping (connects fail while a
//!   partition lasts).
//! - **Node faults.** A crash is either a machine crash or a process crash. A machine crash
//!   keeps the durable bytes plus a random part of the unflushed suffix (a torn tail), lets
//!   bytes already on the wire arrive, and sends peers nothing: they find out by housekeeping,
//!   or by a reset once the host is back and receives a packet for the dead connection. A
//!   process crash keeps the page cache (nothing written is lost, but the durable end may lag
//!   the written end at restart) and resets its connections. Slaves crash and restart; a
//!   stopped slave stays down for several housekeeping intervals; a slow disk delivers
//!   `Appended` and `Flushed` late (in order); a disk error fails an append (possibly after
//!   writing part of it) or a flush. The master crashes and restarts, so after a machine crash
//!   a slave can hold more than the master; waits pending on the crashed master are gone with
//!   it. A forged-ack intruder connects to the master and sends first reports and acks, honest
//!   and forged. Retention advances the master's min offset past a stopped slave, or past a
//!   lagging one.
//! - **Workload.** Bursts of messages appended to the master's log (with `Appended` per
//!   message or per burst, and SYNC_FLUSH or periodic master flushes), SYNC waits
//!   (`await_replication`) with random deadlines from zero to seconds (some exactly at the
//!   instant an ack arrives), and waits for older offsets. Producers check the driver's fence
//!   before every burst, as the adapters do before every put. Each seed draws its
//!   cluster size, `AckPolicy`, `ack_on` per slave, `NewSlaveStart`, batch and segment sizes,
//!   timers, network shape, and which faults happen how often (swarm testing), unless
//!   [`SimConfig`] fixes them; and whether, at one instant, timeouts run before or after other
//!   events.
//!
//! # What is checked
//!
//! After **every** step:
//!
//! - every slave's log is a byte prefix of the master's (from where the slave's log starts), or
//!   its divergence has been reported (`PeerError::SlaveAhead` or `SlaveBehindRetention` by the
//!   master, `OffsetMismatch` by the slave), after which the slave is taken out of service and
//!   ends with that error; a slave whose log is not a prefix never appends what the master
//!   sends and is never accepted by the master ([`Violation::SilentMerge`],
//!   [`Violation::DivergedSlaveAccepted`]); every stored byte equals the byte the sending
//!   master held at that offset; every error raised against a slave is true;
//! - a slave reports only what it has stored, or made durable with `AckOn::Flushed`; the
//!   master's ack for a connection never exceeds what the peer reported, nor what it was sent;
//! - every report is handled as the protocol's rules say: the first report starts the stream
//!   or is refused as ahead or behind retention, later acks beyond the end, beyond what was
//!   sent, going backwards, or above `i64::MAX` are refused (the connection dropped with one
//!   protocol error counted; a replica ahead of the master fences it, naming its address, its
//!   report and the master's end, unless the report is no real offset);
//! - the master's fence is what the reports call for: after a restart, puts wait until as many
//!   distinct trusted replicas as the fence names have reported (a host once, however often it
//!   reconnects; on loopback each live connection while it is up), and not longer;
//! - every master transmit is a valid span: contiguous, non-empty, within the batch size, the
//!   appended end and one segment, above the min offset, on a live connection;
//! - every `WaitDone(Ok(o))` had, at that instant, enough distinct slaves whose acknowledged
//!   offset reached `o`, per the policy, each still holding it (durably with `AckOn::Flushed`,
//!   or unless it crashed since with `AckOn::Written`, whose acks mean "in the page cache");
//!   no `Ok` at or after the deadline, no `Timeout` before it, exactly one `WaitDone` per
//!   wait, `SlaveNotAvailable` and `InSyncReplicasNotEnough` only when a wait starts,
//!   `Cancelled` only after a shutdown, and no wait still pending after its deadline;
//! - the master's count of pending waits matches the waits started; no core loops on
//!   `poll_output` or on timeouts at one instant.
//!
//! **Liveness.** After the fault phase, every fault is healed and every node restarted; within
//! [`SimConfig::liveness_timeout`] of virtual time every slave must hold exactly the master's
//! log with the master's ack for it at the end (or, started by `NewSlaveStart::LastFile` at the
//! master's very end, hold nothing yet), and no wait may be left. A slave ahead of the master
//! or behind retention must instead have ended with the typed error.
//!
//! # AutoSwitch mode
//!
//! With [`SimConfig::protocol`] set to [`Protocol::AutoSwitch`] the simulator runs RocketMQ 5's
//! controller mode instead: a group of 2–5 brokers (`slaves + 1`), each with an in-memory log
//! that keeps epochs and a confirm offset (behind [`EpochLog`](crate::EpochLog)), each running
//! the production [`AutoSwitchDriver`](crate::service::AutoSwitchDriver) or
//! [`AutoSwitchSlaveDriver`](crate::service::AutoSwitchSlaveDriver) as the group record says,
//! over the same kind of simulated links (latency, jitter, reads split anywhere, resets).
//!
//! - **The fake coordinator** is the production pure logic, run synchronously:
//!   [`MemoryRecord`](crate::service::coordinator::MemoryRecord) holds the group record,
//!   [`choose_master`](crate::service::coordinator::choose_master) elects among the live
//!   members of the sync-state-set by the highest (epoch, max offset), and
//!   [`elected_record`](crate::service::coordinator::elected_record) makes the winner master
//!   at epoch + 1 with the set {winner}. Leases live in virtual time: a broker renews its lease
//!   every few hundred milliseconds; the coordinator lets a lease expire a TTL after its last
//!   renewal arrived, and elects only once the master's lease is gone. Each broker keeps a
//!   production [`LeaseGuard`](crate::service::coordinator::LeaseGuard) fed by its renewals'
//!   answers: a master takes puts and answers PUT_OK only while the guard of the lease it was
//!   elected under is open. Brokers learn the record by a watch (when the coordinator reaches
//!   them) and on every renewal: the elected one starts a master service at the record's epoch
//!   and set, the others follow it (a slave service truncates a divergent tail itself).
//! - **Sync-state-set changes** go through the record: the master driver's
//!   [`SyncStateSetAuthority`](crate::service::SyncStateSetAuthority) sends each proposal to
//!   the coordinator and answers `None`, so the change stays pending (acks count over the
//!   union) until the coordinator's answer arrives through `set_sync_state_set`. The
//!   coordinator checks it with [`apply_set_change`](crate::service::coordinator::apply_set_change)
//!   (only the master of the record's epoch, under the lease it was elected with, from the set
//!   epoch it read); a refused proposal is answered with the set in force, which the simulated
//!   broker applies only while the refused proposal is still the pending one (else a newer
//!   pending change would end before the coordinator decides it: seed 0x72).
//! - **Workload.** Puts of random sizes go to any broker running as master (so an old master
//!   whose guard is still open takes them too), flushed at once (SYNC_FLUSH), each with a SYNC
//!   wait (`allAckInSyncStateSet`) and a random deadline.
//! - **Faults.** Broker crashes (half of all faults hit the record's master, so that a tail
//!   written past confirmOffset diverges): process crashes (the page cache survives), or, for
//!   brokers whose slaves ack only flushed bytes, machine crashes (unflushed bytes lost but for
//!   a torn part); restarts later. A broker cut from everything (its lease expires and a new
//!   master is elected while it may still believe it is master), from the coordinator only, or
//!   from its peers only, for up to 6 s; connection resets.
//!
//! After every step the oracle checks:
//!
//! - every put answered PUT_OK is, byte for byte, in the log of the record's master once it
//!   runs as master (after any failover), and no truncation ever cuts it;
//! - every byte below any broker's confirmOffset equals the byte first confirmed at that
//!   offset anywhere (replicas agree up to confirmOffset), and the acknowledged bytes are
//!   among them;
//! - no broker's confirmOffset (up to which it dispatches to consumers) passes its own log's
//!   end, nor the end of any member of the record's sync-state-set;
//! - no two brokers acknowledge puts in the same master epoch, acknowledgements never come
//!   from an epoch below an earlier one, and every election raises the record's epoch.
//!
//! Liveness: once faults stop, every broker is restarted and healed, and within
//! [`SimConfig::liveness_timeout`] the record's master must run as master in the record's
//! epoch with no wait pending and its confirmOffset at its end, and every other broker must
//! follow it with the same end and confirmOffset.
//!
//! # The classic protocol's limits, and what the service layer does about them
//!
//! The classic protocol carries no epoch, no slave identity and no authentication. Three
//! consequences need the service layer's help:
//!
//! - A slave that holds bytes a crashed master lost can be recognised only while the master's
//!   log is shorter than the slave's: once the master has grown past it, its report looks like
//!   any other. So after a master restart the simulated broker runs the master service with its
//!   restart fence ([`SimConfig::restart_fence`]), and a trusted replica refused as ahead fences
//!   the master; the simulator takes such a slave (or one behind retention) out of service
//!   rather than letting it reconnect. Turn the fence off to see the silent merge it prevents.
//! - A slave whose machine crashed silently and came back within the housekeeping interval
//!   has two connections at the master, and a quorum would count it twice. The master's driver,
//!   which knows peer addresses, counts a quorum by host: once a host's new connection streams,
//!   its older ones count no more (and an older one silent for two heartbeats is evicted); on
//!   loopback ([`SimConfig::loopback_slaves`]) it cannot tell slaves apart.
//! - A peer that acknowledges only bytes it was sent cannot be told from a slave: the
//!   intruder's plausible acks count as copies. Every forgery the protocol can refute must be
//!   refuted. For the same reason the restart fence counts only replicas the allow-list names
//!   exactly: the simulated allow-list names each slave and holds their network too, and
//!   strangers from that network (trusted, so they fence the master if they report past its
//!   end) come while a fence is up ([`SimConfig::trusted_strangers_during_restart`]) without
//!   lifting it.
//!
//! Content is a pure function of (master incarnation, offset), so bytes written by different
//! master incarnations differ and the oracle can compare logs byte for byte.
//!
//! # Your own configuration
//!
//! Fix what you deploy and let the seeds draw the rest (the network, the faults, the workload):
//!
//! ```
//! use std::time::Duration;
//! use logship_core::sim::{SimConfig, run_seeds};
//! use logship_core::{AckOn, AckPolicy, MasterConfig, SlaveConfig};
//!
//! let config = SimConfig {
//!     slaves: Some(2),
//!     master: Some(MasterConfig {
//!         ack_policy: AckPolicy::Quorum { in_sync_replicas: 2 },
//!         ..MasterConfig::default()
//!     }),
//!     slave: Some(SlaveConfig { ack_on: AckOn::Flushed, ..SlaveConfig::default() }),
//!     // RocketMQ's timers (5 s heartbeats, 20 s housekeeping) need longer phases.
//!     fault_time: Duration::from_secs(300),
//!     liveness_timeout: Duration::from_secs(600),
//!     ..SimConfig::default()
//! };
//! let stats = run_seeds(0..2, &config).map_err(|failure| failure.to_string())?;
//! assert_eq!(stats.seeds, 2);
//! # Ok::<(), String>(())
//! ```
//!
//! # Reproducing
//!
//! A [`Failure`] prints the seed, the violation, the drawn cluster, the last events and a
//! one-line replay command. [`seeds_from_env`] reads `SIM_SEED` (the first seed, decimal or
//! `0x` hex) and `SIM_RUNS` (how many), following madsim's `MADSIM_TEST_SEED` /
//! `MADSIM_TEST_NUM`; [`check_determinism`] runs a seed twice and compares the hash of the
//! whole event trace.

mod autoswitch;
mod config;
mod draw;
pub(crate) use crate::memlog;
mod rng;
mod shared;
mod stats;
mod violation;
mod world;

use std::panic::{AssertUnwindSafe, catch_unwind};

pub use config::{FaultRates, Protocol, SimConfig};
pub use rng::SimRng;
pub use stats::Stats;
pub use violation::{Failure, Outcome, Violation};
pub use world::Simulation;

/// Runs one seed, turning a panic inside a core into a [`Failure`] that names the seed.
pub fn run_seed(seed: u64, config: &SimConfig) -> Result<Outcome, Box<Failure>> {
    if config.protocol == Protocol::AutoSwitch {
        return run_autoswitch_seed(seed, config);
    }
    let sim = match Simulation::new(seed, config.clone()) {
        Ok(sim) => sim,
        Err(e) => {
            return Err(Box::new(Failure {
                seed,
                at: std::time::Duration::ZERO,
                step: 0,
                violation: Violation::Panic { message: format!("invalid configuration: {e}") },
                summary: String::new(),
                replay: config.replay_command.replace("{seed}", &format!("{seed:#x}")),
                recent: Vec::new(),
                stats: Stats::default(),
            }));
        }
    };
    let summary = sim.summary().to_string();
    match catch_unwind(AssertUnwindSafe(move || sim.run())) {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            Err(Box::new(Failure {
                seed,
                at: std::time::Duration::ZERO,
                step: 0,
                violation: Violation::Panic { message },
                summary,
                replay: config.replay_command.replace("{seed}", &format!("{seed:#x}")),
                recent: Vec::new(),
                stats: Stats::default(),
            }))
        }
    }
}

fn invalid(seed: u64, config: &SimConfig, message: String, summary: String) -> Box<Failure> {
    Box::new(Failure {
        seed,
        at: std::time::Duration::ZERO,
        step: 0,
        violation: Violation::Panic { message },
        summary,
        replay: config.replay_command.replace("{seed}", &format!("{seed:#x}")),
        recent: Vec::new(),
        stats: Stats::default(),
    })
}

fn run_autoswitch_seed(seed: u64, config: &SimConfig) -> Result<Outcome, Box<Failure>> {
    let sim = autoswitch::AutoSwitchSim::new(seed, config.clone())
        .map_err(|e| invalid(seed, config, format!("invalid configuration: {e}"), String::new()))?;
    let summary = sim.summary().to_string();
    match catch_unwind(AssertUnwindSafe(move || sim.run())) {
        Ok(result) => result,
        Err(panic) => {
            let message = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            Err(invalid(seed, config, message, summary))
        }
    }
}

/// Runs every seed in order and adds up their counters; stops at the first failure.
pub fn run_seeds(seeds: impl IntoIterator<Item = u64>, config: &SimConfig) -> Result<Stats, Box<Failure>> {
    let mut total = Stats::default();
    for seed in seeds {
        let outcome = run_seed(seed, config)?;
        total.merge(&outcome.stats);
    }
    Ok(total)
}

/// Runs `seed` twice and compares the hashes of the two event traces.
pub fn check_determinism(seed: u64, config: &SimConfig) -> Result<u64, Box<Failure>> {
    let first = run_seed(seed, config)?;
    let second = run_seed(seed, config)?;
    if first.trace_hash != second.trace_hash {
        return Err(Box::new(Failure {
            seed,
            at: second.stats.virtual_time,
            step: second.stats.steps,
            violation: Violation::Nondeterministic { first: first.trace_hash, second: second.trace_hash },
            summary: first.summary,
            replay: config.replay_command.replace("{seed}", &format!("{seed:#x}")),
            recent: Vec::new(),
            stats: second.stats,
        }));
    }
    Ok(first.trace_hash)
}

/// Which seeds to run: `start`, `start + 1`, ... (`runs` of them).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Seeds {
    /// The first seed.
    pub start: u64,
    /// How many.
    pub runs: u64,
}

impl IntoIterator for Seeds {
    type Item = u64;
    type IntoIter = std::ops::Range<u64>;

    fn into_iter(self) -> Self::IntoIter {
        self.start..self.start.saturating_add(self.runs)
    }
}

/// Parses a seed: decimal, or hex with a `0x` prefix.
pub fn parse_seed(text: &str) -> Option<u64> {
    let t = text.trim();
    match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => t.parse().ok(),
    }
}

/// The seeds to run: `SIM_SEED` (first seed) and `SIM_RUNS` (how many) from the environment,
/// else the defaults. With `SIM_SEED` set and `SIM_RUNS` unset, one seed runs.
///
/// # Panics
///
/// If either variable is set but does not parse.
pub fn seeds_from_env(default_start: u64, default_runs: u64) -> Seeds {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let seed =
        var("SIM_SEED").map(|v| parse_seed(&v).unwrap_or_else(|| panic!("SIM_SEED={v:?} is not a seed")));
    let runs =
        var("SIM_RUNS").map(|v| parse_seed(&v).unwrap_or_else(|| panic!("SIM_RUNS={v:?} is not a number")));
    match (seed, runs) {
        (Some(start), runs) => Seeds { start, runs: runs.unwrap_or(1) },
        (None, runs) => Seeds { start: default_start, runs: runs.unwrap_or(default_runs) },
    }
}
