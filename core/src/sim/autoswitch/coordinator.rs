//! The fake coordinator: the group record and leases in virtual time, elections, the
//! brokers' renewals and the sync-state-set proposals that reach it.

use super::*;

pub(super) type Proposals = Arc<Mutex<Vec<(BTreeSet<BrokerId>, i32)>>>;

/// The master's sync-state-set authority: every proposal goes to the fake coordinator, whose
/// answer comes later (a pending change).
pub(super) struct CoordinatorAuthority {
    pub(super) proposals: Proposals,
}

impl SyncStateSetAuthority for CoordinatorAuthority {
    fn propose(
        &mut self,
        proposed: &BTreeSet<BrokerId>,
        _applied: &BTreeSet<BrokerId>,
        epoch: i32,
    ) -> Option<(BTreeSet<BrokerId>, i32)> {
        self.proposals.lock().unwrap_or_else(PoisonError::into_inner).push((proposed.clone(), epoch));
        None
    }
}

impl AutoSwitchSim {
    pub(super) fn renew_tick(&mut self, b: usize, inc: u64) -> R {
        let now = self.now;
        let br = &self.brokers[b];
        if br.inc != inc || br.down {
            return Ok(());
        }
        if !br.coord_cut(now) {
            match &br.lease {
                None if !br.granting => {
                    self.brokers[b].granting = true;
                    let at = self.coord_delay(b, 0);
                    self.schedule(at, Ev::GrantArrive { b, inc, sent_at: now });
                }
                None => {}
                Some((lease, _)) => {
                    let lease = *lease;
                    let at = self.coord_delay(b, 0);
                    self.schedule(at, Ev::RenewArrive { b, inc, lease, sent_at: now });
                }
            }
            self.send_proposals(b);
        }
        let at = now + self.d.renew;
        self.schedule(at, Ev::RenewTick { b, inc });
        Ok(())
    }

    pub(super) fn coord_tick(&mut self) -> R {
        let now = self.now;
        let expired: Vec<u64> =
            self.coord.leases.iter().filter(|(_, (_, exp))| *exp <= now).map(|(&id, _)| id).collect();
        for id in expired {
            let (b, _) = self.coord.leases.remove(&id).expect("listed");
            self.stats.lease_expiries += 1;
            self.rec(&Self::name(b), "lease expired", id, 0);
        }
        let master_live = self.coord.master_lease.is_some_and(|l| self.coord.leases.contains_key(&l));
        let mut live: BTreeMap<usize, u64> = BTreeMap::new();
        for (&id, &(b, _)) in &self.coord.leases {
            live.insert(b, id);
        }
        let members: Vec<MemberState> = live
            .keys()
            .map(|&b| {
                let disk = &self.brokers[b].disk;
                MemberState {
                    broker_id: id_of(b),
                    epoch: disk.epochs().last().map_or(0, |e| e.epoch),
                    max_offset: disk.bounds().max,
                    ha_addr: ha_addr(b),
                    http_addr: http_addr(b),
                }
            })
            .collect();
        let (rev, record) = self.coord.record.read();
        let record = record.cloned();
        if let Choice::Elect { winner, .. } =
            choose_master(record.as_ref(), master_live, &members, ElectionPolicy::default())
        {
            let w = idx_of(winner);
            let state = members.iter().find(|m| m.broker_id == winner).expect("a live member won");
            let new = elected_record(record.as_ref(), state)
                .map_err(|e| Violation::Panic { message: format!("election: {e}") })?;
            if new.master_epoch <= self.max_record_epoch {
                return Err(Violation::EpochWentBack {
                    what: "election",
                    epoch: new.master_epoch,
                    previous: self.max_record_epoch,
                });
            }
            self.max_record_epoch = new.master_epoch;
            let epoch = new.master_epoch;
            self.coord
                .record
                .compare_and_swap(rev, new)
                .map_err(|e| Violation::Panic { message: format!("record: {e}") })?;
            self.coord.master_lease = Some(live[&w]);
            self.stats.elections += 1;
            self.rec(&Self::name(w), "elected", epoch as u64, state.max_offset);
            self.notify_all();
        }
        self.schedule(now + 100 * MS, Ev::CoordTick);
        Ok(())
    }

    /// Every broker the coordinator reaches learns the record soon (a watch).
    pub(super) fn notify_all(&mut self) {
        for b in 0..self.brokers.len() {
            if !self.brokers[b].coord_cut(self.now) {
                let inc = self.brokers[b].inc;
                let at = self.coord_delay(b, 1);
                self.schedule(at, Ev::RecordSeen { b, inc });
            }
        }
    }

    pub(super) fn send_proposals(&mut self, b: usize) {
        let lease = self.brokers[b].lease.as_ref().map_or(0, |(id, _)| *id);
        while let Some(change) = self.brokers[b].proposals_out.pop_front() {
            let at = self.coord_delay(b, 0);
            self.schedule(at, Ev::ProposalArrive { b, lease, change });
        }
    }

    pub(super) fn proposal_arrive(&mut self, b: usize, lease: u64, change: SetChange) -> R {
        let (rev, record) = self.coord.record.read();
        let Some(record) = record.cloned() else { return Ok(()) };
        let holds = self.coord.master_lease == Some(lease) && self.coord.leases.contains_key(&lease);
        let result = if holds {
            apply_set_change(&record, &change)
        } else {
            Err(SetChangeRefusal::MastershipLost(change.proposer))
        };
        let rid = match &self.brokers[b].role {
            Role::Master(m) if m.epoch == change.master_epoch => m.rid,
            _ => 0,
        };
        match result {
            Ok(new) => {
                let (set, epoch) = (new.sync_state_set.clone(), new.sync_state_set_epoch);
                if set.len() < record.sync_state_set.len() {
                    self.stats.set_shrinks += 1;
                } else {
                    self.stats.set_expands += 1;
                }
                self.coord
                    .record
                    .compare_and_swap(rev, new)
                    .map_err(|e| Violation::Panic { message: format!("record: {e}") })?;
                self.rec(&Self::name(b), "set committed", set.len() as u64, epoch as u64);
                let at = self.coord_delay(b, 1);
                self.schedule(at, Ev::SetAnswer { b, rid, set, epoch, refused: None });
            }
            Err(refusal) => {
                self.stats.set_proposals_refused += 1;
                self.rec(&Self::name(b), "set refused", change.new_set.len() as u64, 0);
                // The master of the record's epoch learns the set in force, which ends its
                // pending proposal; any other proposer is no master any more.
                let current =
                    record.master_id == change.proposer && record.master_epoch == change.master_epoch;
                if current && !matches!(refusal, SetChangeRefusal::MastershipLost(_)) {
                    let at = self.coord_delay(b, 1);
                    self.schedule(
                        at,
                        Ev::SetAnswer {
                            b,
                            rid,
                            set: record.sync_state_set.clone(),
                            epoch: record.sync_state_set_epoch,
                            refused: Some(change.new_set.clone()),
                        },
                    );
                }
            }
        }
        Ok(())
    }
}
