//! The producers: bursts of appends and SYNC waits.

use super::*;

impl Simulation {
    pub(super) fn workload_tick(&mut self) -> R {
        if self.phase != Phase::Faults {
            return Ok(());
        }
        let (lo, hi) = self.workload.gap;
        let next = self.now + self.between(nanos(lo), nanos(hi));
        if self.appended >= self.workload.budget {
            return Ok(());
        }
        self.schedule(next, Ev::Workload);
        if self.master.driver.is_none() {
            return Ok(());
        }
        // The producers check the driver's fence before every put, as the adapters do.
        if self.master.driver.as_ref().is_some_and(|d| d.fence().is_some()) {
            self.stats.appends_fenced += 1;
            return Ok(());
        }
        let burst = self.rng.range(1, self.workload.max_burst);
        let per_message = self.rng.chance(self.workload.appended_per_message);
        self.rec(Node::Workload, "burst", burst, u64::from(per_message), Detail::None);
        let mut ends = Vec::new();
        for _ in 0..burst {
            if self.appended >= self.workload.budget {
                break;
            }
            let len = self.rng.range(1, self.workload.max_message);
            let end = self.master.log().append_generated(self.master.inc, len);
            if self.workload.master_flush.is_none() {
                self.master.log().flush();
            }
            self.appended += len;
            self.stats.messages += 1;
            self.stats.bytes_appended += len;
            ends.push(end);
            if per_message {
                let min = self.master.store.min();
                self.master_call(MasterCall::LogChanged { min, max: end })?;
            }
        }
        if !per_message {
            let end = *ends.last().expect("a burst has a message");
            let min = self.master.store.min();
            self.master_call(MasterCall::LogChanged { min, max: end })?;
        }
        for end in ends {
            if self.master.driver.is_some() && self.rng.chance(self.workload.sync_probability) {
                self.start_wait(end)?;
            }
        }
        if self.master.driver.is_some() && self.rng.chance(self.workload.late_wait_probability) {
            // A late waiter: an offset slaves may already hold. Half the time, exactly the
            // offset an ack in flight carries, with the deadline exactly at its arrival: the
            // deadline must win the tie.
            let end = self.master.store.end();
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
                    let offset = self.between(end.saturating_sub(4_096).max(self.master.store.min()), end);
                    self.start_wait(offset)?;
                }
            }
        }
        Ok(())
    }

    pub(super) fn start_wait(&mut self, offset: Offset) -> R {
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

    pub(super) fn start_wait_until(&mut self, offset: Offset, deadline: Nanos) -> R {
        let id = self.next_wait;
        self.next_wait += 1;
        self.waits.insert(id, WaitRec { offset, deadline, cancel_requested: false });
        self.wait_deadlines.insert((deadline, id));
        self.stats.waits += 1;
        self.starting_wait = Some(id);
        let result = self.master_call(MasterCall::Await { id, offset, deadline });
        self.starting_wait = None;
        result
    }
}
