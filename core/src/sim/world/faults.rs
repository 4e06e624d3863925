//! The fault plan: which fault hits when, and the quiet phase that heals them all.

use super::*;

impl Simulation {
    pub(super) fn fault_tick(&mut self) -> R {
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
            self.fault_master_crash()?;
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
    pub(super) fn spurious_timeout(&mut self) -> R {
        let k = self.rng.below(self.slaves.len() as u64 + 1) as usize;
        let now = self.instant(self.now);
        self.stats.spurious_timeouts += 1;
        if k == self.slaves.len() {
            if self.master.driver.is_some() {
                self.rec(Node::Master, "spurious timeout", 0, 0, Detail::None);
                self.master_call(MasterCall::Timeout)?;
            }
        } else if let Some(driver) = self.slaves[k].driver.as_mut() {
            driver.handle_timeout(now);
            self.rec(Node::Slave(k), "spurious timeout", 0, 0, Detail::None);
            self.drain_slave(k)?;
        }
        Ok(())
    }

    pub(super) fn open_conns(&self) -> Vec<u64> {
        self.conns
            .iter()
            .filter(|(_, c)| c.master_open && !c.master_closing && c.peer_open)
            .map(|(&id, _)| id)
            .collect()
    }

    pub(super) fn running_slaves(&self) -> Vec<usize> {
        (0..self.slaves.len()).filter(|&i| self.slaves[i].running()).collect()
    }

    pub(super) fn fault_stall(&mut self) {
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

    pub(super) fn fault_reset(&mut self) {
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

    pub(super) fn fault_partition(&mut self, both: bool) {
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

    pub(super) fn fault_slave_crash(&mut self, stop: bool) -> R {
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

    pub(super) fn crash_slave(&mut self, i: usize, silent: bool, down: Nanos, stop: bool) {
        let s = &mut self.slaves[i];
        s.driver = None;
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
            let unflushed = s.store.end().saturating_sub(s.store.durable());
            let keep = self.rng.range(0, unflushed);
            let mut log = self.slaves[i].log();
            let lost = log.crash(keep);
            if log.is_empty() {
                // A wiped slave store starts over: empty, reporting 0.
                *log = MemLog::default();
            }
            lost
        } else {
            self.stats.process_crashes += 1;
            0
        };
        let s = &mut self.slaves[i];
        s.valid_end = s.valid_end.min(s.store.end());
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

    pub(super) fn fault_slow_disk(&mut self) {
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

    pub(super) fn fault_disk_error(&mut self) {
        let running = self.running_slaves();
        if running.is_empty() {
            return;
        }
        let i = running[self.rng.below(running.len() as u64) as usize];
        self.slaves[i].fail_next = true;
        self.rec(Node::Fault, "disk error armed", i as u64, 0, Detail::None);
    }

    pub(super) fn fault_master_crash(&mut self) -> R {
        if self.master.driver.is_none() {
            return Ok(());
        }
        let silent = self.rng.chance(self.faults.silent_crash);
        if !silent && self.rng.chance(0.3) {
            // A graceful stop first: the driver closes every connection and cancels every wait.
            self.stats.master_shutdowns += 1;
            for w in self.waits.values_mut() {
                w.cancel_requested = true;
            }
            self.rec(Node::Fault, "master shutdown", 0, 0, Detail::None);
            self.master_call(MasterCall::Shutdown)?;
        }
        self.master.driver = None;
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
        let old = self.master.log().clone();
        self.master.old_logs.insert(self.master.inc - 1, old);
        // A machine crash loses unflushed bytes (all but a torn part); a process crash keeps
        // the page cache.
        let lost = if silent {
            let unflushed = {
                let log = self.master.log();
                log.end().saturating_sub(log.durable())
            };
            let keep = self.rng.range(0, unflushed);
            self.master.log().crash(keep)
        } else {
            self.stats.process_crashes += 1;
            0
        };
        self.stats.master_crashes += 1;
        if lost > 0 {
            self.stats.master_lost_tails += 1;
            self.stats.master_bytes_lost += lost;
        }
        let end = {
            let log = self.master.log();
            log.end().max(log.min())
        };
        for s in &mut self.slaves {
            s.valid_end = s.valid_end.min(end);
        }
        let down = self.between(MS, 3_000 * MS);
        self.master.down_until = Some(self.now + down);
        self.rec(Node::Fault, "master crash", lost, down, Detail::None);
        let inc = self.master.inc;
        self.schedule(self.now + down, Ev::MasterRestart { inc });
        Ok(())
    }

    /// The master comes back on its disk: a new driver, fenced (with `restart_fence`) until
    /// every slave still in service has reported.
    pub(super) fn restart_master(&mut self) -> R {
        self.master.down_until = None;
        self.master.spin = (0, 0);
        let fence = if self.cfg.restart_fence {
            self.slaves.iter().filter(|s| s.ended_with.is_none()).count()
        } else {
            0
        };
        if self.slaves.iter().any(|s| s.ended_with.is_none() && !s.prefix_ok()) {
            self.stats.master_restarts_with_slave_ahead += 1;
        }
        let bounds = self.master.log().bounds();
        self.rec(Node::Master, "restart", bounds.min, bounds.max, Detail::None);
        self.start_master(fence)
    }

    pub(super) fn fault_retention(&mut self) -> R {
        let Some(core) = self.master.core() else { return Ok(()) };
        let seg = self.master.config.mapped_file_size_commit_log;
        let bounds = core.log_bounds();
        let has_bytes = |s: &SlaveNode| s.ended_with.is_none() && !s.store.is_empty();
        // Mostly past a stopped slave; sometimes past the most lagging running one (retention
        // goes by age and disk usage, not by slaves).
        let stopped = (0..self.slaves.len()).find(|&i| {
            let s = &self.slaves[i];
            s.stopped && !s.running() && has_bytes(s)
        });
        let lagging = || {
            (0..self.slaves.len())
                .filter(|&i| self.slaves[i].running() && has_bytes(&self.slaves[i]))
                .min_by_key(|&i| (self.slaves[i].store.end(), i))
        };
        let (i, past_stopped) = match stopped {
            Some(i) if self.rng.chance(0.8) => (i, true),
            _ => match lagging() {
                Some(i) if self.rng.chance(0.3) => (i, false),
                _ => return Ok(()),
            },
        };
        let min = (self.slaves[i].store.end() / seg + 1).saturating_mul(seg);
        let master_durable = self.master.store.durable();
        // Only over durable bytes, and past a stopped slave without cutting off running ones.
        let spares_running = !past_stopped
            || self
                .slaves
                .iter()
                .filter(|s| s.running() && s.ended_with.is_none())
                .all(|s| s.store.end() >= min && !s.store.is_empty());
        if min <= bounds.min || min > bounds.max || min > master_durable || !spares_running {
            return Ok(());
        }
        self.master.log().retain(min);
        if past_stopped {
            self.stats.retention_past_stopped_slave += 1;
        } else {
            self.stats.retention_past_lagging_slave += 1;
        }
        self.rec(Node::Fault, "retention", i as u64, min, Detail::None);
        self.master_call(MasterCall::LogChanged { min, max: bounds.max })
    }

    /// A slave the master or the slave itself reported with a typed error is taken out of
    /// service, and ends with that error. The error must be true.
    pub(super) fn end_slave(&mut self, i: usize, error: PeerError) -> R {
        let s = &self.slaves[i];
        if s.ended_with.is_some() {
            return Ok(());
        }
        let justified = match error {
            PeerError::SlaveAhead { .. } | PeerError::OffsetMismatch { .. } => !s.prefix_ok(),
            // An empty slave starts again from the min offset: nothing to end.
            PeerError::SlaveBehindRetention { .. } if s.store.is_empty() => return Ok(()),
            PeerError::SlaveBehindRetention { reported, min } => reported < min && s.store.end() < min,
            _ => false,
        };
        if !justified {
            return Err(Violation::FalseAccusation { slave: i, error });
        }
        self.rec(Node::Slave(i), "taken out", 0, 0, Detail::Peer(error));
        let s = &mut self.slaves[i];
        s.ended_with = Some(error);
        s.driver = None;
        s.timeout = None;
        s.inc += 1;
        s.connecting = None;
        s.disk.clear();
        self.stats.slaves_ended_with_error += 1;
        if let Some(conn) = self.slaves[i].conn.take() {
            self.peer_side_down(conn, Teardown::Fin);
        }
        Ok(())
    }

    pub(super) fn quiet(&mut self) -> R {
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
        if self.master.driver.is_none() {
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
}
