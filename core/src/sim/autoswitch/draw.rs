//! What one seed draws: the group's size, core timers, leases, network shape, fault rates and
//! workload.

use super::*;

/// What one seed runs with.
#[derive(Clone, Debug)]
pub(super) struct Drawn {
    pub(super) brokers: usize,
    pub(super) master: MasterConfig,
    pub(super) slave: SlaveConfig,
    pub(super) ack_on: Vec<AckOn>,
    pub(super) faults: FaultRates,
    pub(super) lease_ttl: Nanos,
    pub(super) lease_margin: Nanos,
    pub(super) renew: Nanos,
    pub(super) not_catchup: Duration,
    pub(super) put_gap: (Nanos, Nanos),
    pub(super) max_message: u64,
    pub(super) wait_max: Nanos,
    pub(super) budget: u64,
}

pub(super) fn draw(rng: &mut SimRng, cfg: &SimConfig) -> Drawn {
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
