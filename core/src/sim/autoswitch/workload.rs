//! The producers: puts to whichever broker runs as master, and their outcomes.

use super::*;
use crate::log::PutStatus;

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
        let len = self.rng.range(1, self.d.max_message + 1);
        self.refresh_fence(b);
        let Role::Master(m) = &self.brokers[b].role else { unreachable!("picked a master") };
        let (rid, epoch, lease) = (m.rid, m.epoch, m.lease);
        let generation = (epoch as u64) << 8 | id_of(b) as u64;
        // The shipped put path: the gate (lease fence, driver fence, shutdown), then the append.
        let pending = match m.gate.start(&m.service, &*self.brokers[b].disk, SimMessage { generation, len }) {
            Ok(pending) => pending,
            Err(refused) => {
                if refused.status == PutStatus::LeaseLost {
                    self.stats.puts_refused_guard_closed += 1;
                }
                return Ok(());
            }
        };
        let (start, end) = (pending.end() - len, pending.end());
        self.appended += len;
        self.stats.puts += 1;
        let id = self.next_wait;
        self.next_wait += 1;
        self.waits.insert(id, WaitRec { b, rid, epoch, lease, pending });
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
        // Every simulated put is flushed as it is appended.
        let flushed = w.pending.flush.then_some(true);
        self.refresh_fence(w.b);
        let status = w.pending.finish(flushed, Some(Ok(offset))).status;
        if status == PutStatus::LeaseLostAfterStore {
            self.stats.puts_unacked_guard_closed += 1;
            return Ok(());
        }
        if status != PutStatus::PutOk {
            return Err(Violation::Panic { message: format!("a replicated put ended {status:?}") });
        }
        // PUT_OK.
        self.stats.puts_acked += 1;
        let broker = id_of(w.b);
        // The lease property: a master acknowledges only while the coordinator holds the lease
        // it was elected under, so no other master can have been elected meanwhile.
        if !self
            .coord
            .leases
            .get(&w.lease)
            .is_some_and(|&(holder, expires)| holder == w.b && expires > self.now)
        {
            return Err(Violation::AckedWithoutLease { broker, epoch: w.epoch, lease: w.lease });
        }
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
