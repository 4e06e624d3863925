//! Drawing one cluster from a seed: configurations, fault rates and workload (swarm testing:
//! each seed gets its own mix, so some seeds hammer one fault and others never see it).

use std::time::Duration;

use crate::config::{AckOn, AckPolicy, MasterConfig, NewSlaveStart, SlaveConfig};

use super::config::{FaultRates, SimConfig};
use super::rng::SimRng;

/// The workload of one seed.
#[derive(Clone, Debug)]
pub(crate) struct Workload {
    /// Bytes to append in total.
    pub(crate) budget: u64,
    /// Messages per burst, at most.
    pub(crate) max_burst: u64,
    /// Bytes per message, at most.
    pub(crate) max_message: u64,
    /// Gap between bursts.
    pub(crate) gap: (Duration, Duration),
    /// Probability that a message gets a SYNC wait.
    pub(crate) sync_probability: f64,
    /// Probability, per burst, of a wait for an older offset (possibly replicated already).
    pub(crate) late_wait_probability: f64,
    /// At one instant, core timeouts run before queued events (else after).
    pub(crate) timeouts_first: bool,
    /// Probability that `Appended` is fed after every message rather than once per burst.
    pub(crate) appended_per_message: f64,
    /// `None`: the master flushes after every append (SYNC_FLUSH); else every so often.
    pub(crate) master_flush: Option<Duration>,
    /// How often slaves flush in the background.
    pub(crate) slave_flush: Duration,
    /// The master's log at the start: `(base, len)`.
    pub(crate) initial: (u64, u64),
    /// Per slave: the length of the master's initial log it already holds, if any.
    pub(crate) slave_prefill: Vec<Option<u64>>,
}

/// Everything one seed runs with.
#[derive(Clone, Debug)]
pub(crate) struct Drawn {
    pub(crate) master: MasterConfig,
    pub(crate) slaves: Vec<SlaveConfig>,
    pub(crate) faults: FaultRates,
    pub(crate) workload: Workload,
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

pub(crate) fn draw(rng: &mut SimRng, cfg: &SimConfig) -> Drawn {
    let n = cfg.slaves.unwrap_or_else(|| rng.range(1, 4) as usize);
    let master = cfg.master.clone().unwrap_or_else(|| draw_master(rng, n));
    let ack_mode = rng.below(3); // 0: all Written, 1: all Flushed, 2: mixed
    let slaves = (0..n)
        .map(|_| match &cfg.slave {
            Some(s) => s.clone(),
            None => draw_slave(rng, &master, ack_mode),
        })
        .collect();
    let faults = cfg.faults.clone().unwrap_or_else(|| draw_faults(rng));
    let workload = draw_workload(rng, cfg, &master, &faults, n);
    Drawn { master, slaves, faults, workload }
}

fn draw_master(rng: &mut SimRng, slaves: usize) -> MasterConfig {
    let housekeeping = rng.duration(ms(400), ms(3_000));
    let heartbeat = housekeeping / rng.range(3, 8) as u32;
    let segment = rng.pick(&[1_024u64, 2_048, 4_096, 8_192, 16_384]);
    let batch = rng.pick(&[128u32, 256, 512, 1_000, 2_048, 4_096]);
    let ack_policy = match rng.below(3) {
        0 => AckPolicy::AnySlave,
        1 => {
            // Occasionally more than the cluster can give: every wait is refused up front.
            let max = slaves as u64 + if rng.chance(0.1) { 2 } else { 1 };
            AckPolicy::Quorum { in_sync_replicas: rng.range(2, max) as u32 }
        }
        _ => AckPolicy::AllInSync,
    };
    MasterConfig {
        transfer_batch_size: batch,
        heartbeat_interval: heartbeat,
        housekeeping_interval: housekeeping,
        first_report_timeout: housekeeping,
        mapped_file_size_commit_log: segment,
        new_slave_start: if rng.chance(0.25) { NewSlaveStart::LastFile } else { NewSlaveStart::Earliest },
        ack_policy,
        ha_max_gap_not_in_sync: if rng.chance(0.7) { 1 << 30 } else { rng.range(segment, 4 * segment) },
        max_inflight: rng.range(1, 8) as u32,
        verify_first_reports: false,
        identified_only: false,
    }
}

fn draw_slave(rng: &mut SimRng, master: &MasterConfig, ack_mode: u64) -> SlaveConfig {
    let housekeeping =
        if rng.chance(0.5) { master.housekeeping_interval } else { rng.duration(ms(400), ms(3_000)) };
    let heartbeat = housekeeping / rng.range(3, 8) as u32;
    let max_frame_body = master.transfer_batch_size * rng.range(1, 4) as u32;
    let ack_on = match ack_mode {
        0 => AckOn::Written,
        1 => AckOn::Flushed,
        _ => rng.pick(&[AckOn::Written, AckOn::Flushed]),
    };
    SlaveConfig {
        heartbeat_interval: heartbeat,
        housekeeping_interval: housekeeping,
        reconnect_interval: rng.duration(ms(20), ms(1_000)),
        max_frame_body,
        ack_on,
        max_unstored: (u64::from(max_frame_body) + 12) * rng.range(1, 4),
        max_first_offset: crate::config::DEFAULT_MAX_FIRST_OFFSET,
    }
}

fn draw_faults(rng: &mut SimRng) -> FaultRates {
    let latency = rng.pick(&[Duration::ZERO, Duration::from_micros(100), ms(1), ms(5), ms(20)]);
    let mut rate = |max: f64| {
        if rng.chance(0.5) { 0.0 } else { max * (0.05 + 0.95 * rng.below(1_000) as f64 / 1_000.0) }
    };
    let stall = rate(2.0);
    let reset = rate(0.3);
    let partition_one_way = rate(0.1);
    let partition_both_ways = rate(0.1);
    let slave_crash = rate(0.3);
    let slave_stop = rate(0.1);
    let slow_disk = rate(0.5);
    let disk_error = rate(0.2);
    let master_crash = rate(0.15);
    let intruder = rate(0.3);
    let retention = rate(1.0);
    let spurious_timeout = rate(3.0);
    FaultRates {
        latency,
        jitter: rng.duration(Duration::ZERO, latency),
        max_read_chunk: match rng.below(5) {
            0 => rng.range(1, 9) as usize,
            1 => 13,
            2 => 64,
            3 => 1_500,
            _ => usize::MAX,
        },
        pipe_capacity: rng.pick(&[256usize, 4_096, 65_536, 1 << 20]),
        stall,
        reset,
        partition_one_way,
        partition_both_ways,
        slave_crash,
        slave_stop,
        slow_disk,
        disk_error,
        master_crash,
        intruder,
        retention,
        spurious_timeout,
        close_lag: if rng.chance(0.5) { Duration::ZERO } else { rng.duration(Duration::ZERO, ms(50)) },
        silent_crash: rng.pick(&[0.3, 0.6, 1.0]),
    }
}

fn draw_workload(
    rng: &mut SimRng,
    cfg: &SimConfig,
    master: &MasterConfig,
    faults: &FaultRates,
    slaves: usize,
) -> Workload {
    // Tiny reads cost one step per few bytes: keep those runs short.
    let chunk_cap = (faults.max_read_chunk as u64).saturating_mul(2_048);
    let budget = rng.range(4 * 1024, cfg.max_bytes.max(4 * 1024)).min(chunk_cap).min(cfg.max_bytes);
    let segment = master.mapped_file_size_commit_log.min(1 << 20);
    let initial = if rng.chance(0.5) {
        (0, 0)
    } else {
        (segment * rng.range(0, 3), rng.range(0, (3 * segment).min(budget)))
    };
    let slave_prefill =
        (0..slaves).map(|_| (initial.1 > 0 && rng.chance(0.3)).then(|| rng.range(1, initial.1))).collect();
    let fast = rng.chance(0.5);
    Workload {
        budget,
        max_burst: rng.range(1, 16),
        max_message: rng.range(16, (2 * u64::from(master.transfer_batch_size)).min(budget / 4).max(16)),
        gap: if fast { (ms(1), ms(50)) } else { (ms(10), ms(1_000)) },
        sync_probability: rng.pick(&[0.0, 0.3, 1.0]),
        late_wait_probability: rng.pick(&[0.0, 0.2]),
        timeouts_first: rng.chance(0.5),
        appended_per_message: 0.5,
        master_flush: if rng.chance(0.3) { None } else { Some(rng.duration(ms(10), ms(1_000))) },
        slave_flush: rng.duration(ms(10), ms(1_000)),
        initial,
        slave_prefill,
    }
}
