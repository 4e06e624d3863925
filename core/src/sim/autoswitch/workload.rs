//! The producers: puts to whichever broker runs as master, and their outcomes.

use super::*;

impl AutoSwitchSim {
    pub(super) fn put(&mut self) -> R {
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

    pub(super) fn wait_done(&mut self, id: u64, result: Result<Offset, WaitError>) -> R {
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
}
