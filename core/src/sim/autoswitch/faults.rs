//! The fault plan: broker crashes, partitions from everything, from the coordinator or from the
//! peers, and connection resets.

use super::*;

impl AutoSwitchSim {
    pub(super) fn fault_tick(&mut self) -> R {
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
    pub(super) fn victim(&mut self) -> usize {
        let master = self.coord.record.read().1.map(|r| idx_of(r.master_id));
        match master {
            Some(m) if self.rng.chance(0.5) => m,
            _ => self.rng.below(self.brokers.len() as u64) as usize,
        }
    }

    pub(super) fn crash(&mut self, b: usize, machine: bool) -> R {
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
}
