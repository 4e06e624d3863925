//! The oracle: what must hold after every step, and what convergence means once faults stop.

use super::*;

impl AutoSwitchSim {
    pub(super) fn check(&mut self) -> R {
        // (a) The current master holds every acknowledged byte.
        let (_, record) = self.coord.record.read();
        let check_master = std::mem::take(&mut self.check_master)
            || self.brokers.iter().any(|b| !b.disk.lock().cuts.is_empty());
        if let Some(record) = record.filter(|_| check_master) {
            let m = idx_of(record.master_id);
            if let Role::Master(mr) = &self.brokers[m].role {
                if mr.epoch == record.master_epoch {
                    let s = self.brokers[m].disk.lock();
                    let end = s.log.end() as usize;
                    let g = self.golden.len();
                    if end < g {
                        return Err(Violation::AckedNotOnMaster {
                            broker: record.master_id,
                            epoch: mr.epoch,
                            detail: format!("its log ends at {end}, puts were acknowledged up to {g}"),
                        });
                    }
                    if let Some(at) = first_difference(s.log.slice(0, g as u64), &self.golden) {
                        return Err(Violation::AckedNotOnMaster {
                            broker: record.master_id,
                            epoch: mr.epoch,
                            detail: format!("its log differs from the acknowledged bytes at {at}"),
                        });
                    }
                }
            }
        }
        let set: Vec<usize> =
            record.map(|r| r.sync_state_set.iter().map(|&id| idx_of(id)).collect()).unwrap_or_default();
        let mut max_confirm = (0, 0);
        for b in 0..self.brokers.len() {
            let id = id_of(b);
            let (cuts, confirm, end) = {
                let mut s = self.brokers[b].disk.lock();
                (std::mem::take(&mut s.cuts), s.confirm, s.log.end())
            };
            // (a) No truncation cuts acknowledged bytes.
            for (to, removed) in cuts {
                self.stats.truncations += u64::from(!removed.is_empty());
                self.stats.truncated_bytes += removed.len() as u64;
                self.rec(&Self::name(b), "truncated", to, removed.len() as u64);
                let g = self.golden.len() as u64;
                if to < g {
                    let overlap = (g - to).min(removed.len() as u64) as usize;
                    if overlap > 0 && removed[..overlap] == self.golden[to as usize..to as usize + overlap] {
                        return Err(Violation::AckedTruncated { broker: id, to, acked_end: g });
                    }
                }
                let br = &mut self.brokers[b];
                br.verified = br.verified.min(to);
            }
            // (c) No replica exposes bytes it does not hold.
            if confirm > end {
                return Err(Violation::ExposedBeyondHeld { broker: id, confirm, holder: id, end });
            }
            if confirm > max_confirm.0 {
                max_confirm = (confirm, b);
            }
            // (b) Every byte below a confirmOffset is the one confirmed there first.
            let verified = self.brokers[b].verified;
            if confirm > verified {
                let s = self.brokers[b].disk.lock();
                let have = s.log.slice(verified, confirm);
                let known = (self.confirmed.len() as u64).clamp(verified, confirm);
                let split = (known - verified) as usize;
                if let Some(at) =
                    first_difference(&have[..split], &self.confirmed[verified as usize..known as usize])
                {
                    return Err(Violation::ConfirmedDiffer {
                        broker: id,
                        offset: verified + at as u64,
                        confirm,
                    });
                }
                self.confirmed.extend_from_slice(&have[split..]);
                drop(s);
                self.brokers[b].verified = confirm;
            }
        }
        // (c) ... nor bytes a member of the sync-state-set lacks.
        let (confirm, holder) = max_confirm;
        for m in set {
            let end = self.brokers[m].disk.bounds().max;
            if confirm > end {
                return Err(Violation::ExposedBeyondHeld {
                    broker: id_of(holder),
                    confirm,
                    holder: id_of(m),
                    end,
                });
            }
        }
        // Acknowledged bytes are confirmed bytes.
        let common = self.golden.len().min(self.confirmed.len());
        if let Some(at) = first_difference(&self.golden[..common], &self.confirmed[..common]) {
            return Err(Violation::ConfirmedDiffer { broker: 0, offset: at as u64, confirm: common as u64 });
        }
        Ok(())
    }

    /// Once faults stop: one master in the record's epoch, every other broker following it
    /// with its whole log, and everything confirmed.
    pub(super) fn convergence(&self) -> Result<(), String> {
        let (_, record) = self.coord.record.read();
        let record = record.ok_or("no master was ever elected")?;
        let m = idx_of(record.master_id);
        let Role::Master(mr) = &self.brokers[m].role else {
            return Err(format!(
                "broker {} is the record's master but does not run as one",
                record.master_id
            ));
        };
        if mr.epoch != record.master_epoch {
            return Err(format!("master runs epoch {}, the record says {}", mr.epoch, record.master_epoch));
        }
        if mr.driver.pending_waits() > 0 {
            return Err(format!("{} waits pending", mr.driver.pending_waits()));
        }
        // Lengths and confirmOffsets suffice: the oracle checked, step by step, that every
        // byte below each broker's confirmOffset is the one confirmed there.
        let end = self.brokers[m].disk.bounds().max;
        let confirm = self.brokers[m].disk.confirm_offset();
        if confirm != end {
            return Err(format!("master's confirmOffset {confirm} is not its end {end}"));
        }
        for (b, br) in self.brokers.iter().enumerate() {
            if b == m {
                continue;
            }
            match &br.role {
                Role::Slave(s) if s.master == record.master_id && s.epoch == record.master_epoch => {}
                _ => return Err(format!("broker {} does not follow the master", br.id)),
            }
            let (slave_end, slave_confirm) = (br.disk.bounds().max, br.disk.confirm_offset());
            if slave_end != end || slave_confirm != confirm {
                return Err(format!(
                    "broker {} holds {slave_end} bytes with confirmOffset {slave_confirm}, the master {end}",
                    br.id
                ));
            }
        }
        Ok(())
    }
}

pub(super) fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    if a == b {
        return None;
    }
    a.iter().zip(b).position(|(x, y)| x != y).or_else(|| (a.len() != b.len()).then(|| a.len().min(b.len())))
}
