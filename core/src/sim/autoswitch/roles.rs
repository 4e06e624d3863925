//! The brokers' roles: acting on the group record, becoming master or slave (the production
//! AutoSwitch drivers), and performing what the drivers ask.

use super::*;
use crate::failover::{KnownEpochs, check_follow, check_promote};
use crate::service::coordinator::{Action, Situation, decide};

impl AutoSwitchSim {
    /// Broker `b` reads the record and acts on it by the failover rule the binary's loop
    /// applies ([`decide`]): promote when elected under its current lease, follow the record's
    /// live master once it runs, step down when it is master no longer, drop its role when its
    /// lease is gone. Campaigns are the fake coordinator's (it elects among the live members
    /// with the same election rule as a campaign).
    pub(super) fn apply_record(&mut self, b: usize) -> R {
        let (rev, record) = self.coord.record.read();
        let Some(record) = record.cloned() else { return Ok(()) };
        if self.brokers[b].down {
            return Ok(());
        }
        self.brokers[b].seen_rev = rev;
        let now = self.at();
        let br = &self.brokers[b];
        let lease = br.lease.as_ref().map(|(id, _)| *id);
        let master_live = self.coord.master_lease.is_some_and(|l| self.coord.leases.contains_key(&l));
        let m = idx_of(record.master_id);
        let master_ready = m < self.brokers.len()
            && !self.brokers[m].down
            && matches!(&self.brokers[m].role, Role::Master(r) if r.epoch == record.master_epoch);
        let situation = Situation {
            me: br.id,
            role: br.local_role(),
            record: Some(&record),
            master_live,
            elected_epoch: (record.master_id == br.id && lease.is_some() && lease == self.coord.master_lease)
                .then_some(record.master_epoch),
            lease_open: br.lease.as_ref().is_some_and(|(_, g)| g.is_open(now)),
            lease_lost: br.lease.is_none(),
            bootstrap_done: true,
            master_ready,
        };
        match decide(&situation) {
            Action::Stay | Action::Campaign => Ok(()),
            Action::StepDown | Action::NewSession => {
                if matches!(self.brokers[b].role, Role::Master(_)) {
                    self.stats.step_downs += 1;
                    self.rec(&Self::name(b), "steps down", record.master_epoch as u64, 0);
                    self.end_role(b, false)?;
                }
                Ok(())
            }
            Action::Promote { epoch, .. } => {
                // The binary's promotion check (forced: the epoch is the one won in the record).
                let known = KnownEpochs {
                    log_last: self.brokers[b].disk.epochs().last().map(|e| e.epoch),
                    given: self.brokers[b].given,
                    announced: self.announced(b),
                };
                if let Err(e) = check_promote(epoch, known, true) {
                    // The binary gives the mastership back with its lease; the coordinator
                    // elected a broker that cannot be its master.
                    return Err(Violation::DriverRefused {
                        broker: id_of(b),
                        role: "master",
                        error: format!("changeToMaster refused: {e}"),
                    });
                }
                self.brokers[b].given = epoch;
                self.become_master(b, &record, lease.expect("elected under its lease"))
            }
            Action::Follow { master, epoch, .. } => {
                // The binary's follow check: a refused follow is tried again at the next read.
                let br = &self.brokers[b];
                let log_last = br.disk.epochs().last().map(|e| e.epoch);
                if let Err(e) = check_follow(br.id, master, epoch, log_last, br.given, br.local_role()) {
                    self.stats.follows_refused += 1;
                    self.rec(&Self::name(b), "follow refused", master as u64, epoch as u64);
                    debug_assert!(!e.is_malformed(), "the record names a valid master: {e}");
                    return Ok(());
                }
                self.brokers[b].given = self.brokers[b].given.max(epoch);
                self.become_slave(b, master, epoch)
            }
        }
    }

    /// The last epoch the master broker `b` follows announced in its handshake, and that
    /// master's id (what the binary's promotion check weighs).
    fn announced(&self, b: usize) -> Option<(i32, BrokerId)> {
        let Role::Slave(s) = &self.brokers[b].role else { return None };
        let epoch = s.driver.status(self.at()).autoswitch?.master_last_epoch?;
        Some((epoch, s.master))
    }

    /// Ends the broker's current role. `silent`: a machine crash, peers are told nothing.
    pub(super) fn end_role(&mut self, b: usize, silent: bool) -> R {
        let role = std::mem::replace(&mut self.brokers[b].role, Role::Idle);
        self.brokers[b].timeout = None;
        match role {
            Role::Idle => {}
            Role::Master(mut m) => {
                m.gate.stop();
                if !silent {
                    m.driver.shutdown();
                }
                for out in take_all(&m.outbox) {
                    if let Out::WaitDone { id, result } = out {
                        self.wait_done(id, result)?;
                    }
                }
                let rid = m.rid;
                let conns: Vec<u64> = self
                    .conns
                    .iter()
                    .filter(|(_, c)| c.master == b && c.master_rid == rid)
                    .map(|(&k, _)| k)
                    .collect();
                for conn in conns {
                    let c = self.conns.get_mut(&conn).expect("listed");
                    c.master_open = false;
                    c.pipes[TO_MASTER].clear();
                    if !silent {
                        self.send(conn, TO_SLAVE, Seg::Fin);
                    }
                }
                // Waits the driver still held are gone with it (a crash).
                let lost: Vec<u64> =
                    self.waits.iter().filter(|(_, w)| w.b == b && w.rid == rid).map(|(&k, _)| k).collect();
                for id in lost {
                    self.waits.remove(&id);
                    self.stats.puts_not_replicated += 1;
                }
            }
            Role::Slave(s) => {
                if let Some(conn) = s.conn {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.slave_open = false;
                        c.pipes[TO_SLAVE].clear();
                    }
                    if !silent {
                        self.send(conn, TO_MASTER, Seg::Fin);
                    }
                }
            }
        }
        Ok(())
    }

    pub(super) fn become_master(&mut self, b: usize, record: &GroupRecord, lease: u64) -> R {
        self.end_role(b, false)?;
        let controller = MasterControllerConfig {
            broker_id: id_of(b),
            epoch: record.master_epoch,
            sync_state_set: record.sync_state_set.clone(),
            sync_state_set_epoch: record.sync_state_set_epoch,
            sync: SyncPolicy {
                all_ack_in_sync_state_set: true,
                in_sync_replicas: 1,
                min_in_sync_replicas: 1,
            },
            ha_max_time_slave_not_catchup: self.d.not_catchup,
            authority: None,
            // Each broker's HA address, as a coordinator's members publish them: a slave's
            // claimed id must come from its broker's address.
            members: Some(MemberDirectory::new({
                let brokers = self.brokers.len();
                move |id| {
                    let idx = usize::try_from(id - 1).ok().filter(|&i| i < brokers)?;
                    Some(MemberAddress::Ip(ip(idx)))
                }
            })),
            // The broker's lease guard fences the service's puts, as the binary's does.
            lease: Some(self.brokers[b].fence(lease)),
        };
        let nets = (0..self.brokers.len()).map(|i| IpNet::new(ip(i), 32).expect("valid prefix")).collect();
        let config = MasterServiceConfig {
            core: self.d.master.clone(),
            admission: Admission::allow_list(nets),
            controller: Some(controller),
            ..MasterServiceConfig::default()
        };
        let outbox = Outbox::default();
        let proposals = Proposals::default();
        let authority = Box::new(CoordinatorAuthority { proposals: proposals.clone() });
        let disk = self.brokers[b].disk.clone();
        let driver = AutoSwitchDriver::with_authority(&config, self.at(), disk, authority).map_err(|e| {
            Violation::DriverRefused { broker: id_of(b), role: "master", error: e.to_string() }
        })?;
        // The gate the shipped master task builds for this service: fenced while the driver
        // fences puts, and by the lease.
        let gate = PutGate::new(driver.fence().is_some())
            .with_lease(config.controller.as_ref().and_then(|c| c.lease.clone()));
        let rid = self.next_rid;
        self.next_rid += 1;
        self.rec(
            &Self::name(b),
            "becomes master",
            record.master_epoch as u64,
            self.brokers[b].disk.bounds().max,
        );
        self.check_master = true;
        self.brokers[b].role = Role::Master(Box::new(MasterRole {
            rid,
            driver,
            epoch: record.master_epoch,
            gate,
            lease,
            service: config,
            outbox,
            proposals,
        }));
        self.master_run(b)
    }

    pub(super) fn become_slave(&mut self, b: usize, master: BrokerId, epoch: i32) -> R {
        self.end_role(b, false)?;
        let m = idx_of(master);
        let mut core = self.d.slave.clone();
        core.ack_on = self.brokers[b].ack_on;
        let config = SlaveServiceConfig {
            core,
            controller: Some(SlaveControllerConfig {
                broker_id: id_of(b),
                master_broker_id: master,
                master_epoch: epoch,
                ..SlaveControllerConfig::default()
            }),
            ..SlaveServiceConfig::new(ha_addr(m).to_string())
        };
        let disk = self.brokers[b].disk.clone();
        let driver = AutoSwitchSlaveDriver::new(&config, self.at(), disk).map_err(|e| {
            Violation::DriverRefused { broker: id_of(b), role: "slave", error: e.to_string() }
        })?;
        let rid = self.next_rid;
        self.next_rid += 1;
        self.rec(&Self::name(b), "follows", master as u64, epoch as u64);
        self.brokers[b].role =
            Role::Slave(Box::new(SlaveRole { rid, driver, master, epoch, conn: None, attempt: None }));
        self.slave_drive(b)
    }

    /// Drains the master driver and performs what it handed its sinks.
    pub(super) fn master_run(&mut self, b: usize) -> R {
        for _ in 0..DRAIN_LIMIT {
            let now = self.at();
            let Role::Master(m) = &mut self.brokers[b].role else { return Ok(()) };
            let at = m.driver.drain();
            // As the master task does after every turn.
            m.gate.publish(m.driver.fence());
            let (rid, epoch) = (m.rid, m.epoch);
            let outs = take_all(&m.outbox);
            let proposals: Vec<_> =
                m.proposals.lock().unwrap_or_else(PoisonError::into_inner).drain(..).collect();
            self.brokers[b].timeout = Some(Self::to_nanos(at));
            for (new_set, set_epoch) in proposals {
                self.brokers[b].proposals_out.push_back(SetChange {
                    proposer: id_of(b),
                    master_epoch: epoch,
                    sync_state_set_epoch: set_epoch,
                    new_set,
                });
            }
            if !self.brokers[b].coord_cut(self.now) {
                self.send_proposals(b);
            }
            if outs.is_empty() {
                return Ok(());
            }
            let mut sent = Vec::new();
            for out in outs {
                match out {
                    Out::Transmit { conn, transmit } => {
                        let open =
                            self.conns.get(&conn).is_some_and(|c| c.master_open && c.master_rid == rid);
                        if !open {
                            continue;
                        }
                        let mut bytes = BytesMut::from(&transmit.header[..]);
                        if let Some(span) = transmit.body {
                            let body = self.brokers[b].disk.read(span).map_err(|e| Violation::Panic {
                                message: format!("master {} cannot read its span {span:?}: {e}", id_of(b)),
                            })?;
                            bytes.extend_from_slice(&body);
                        }
                        self.send(conn, TO_SLAVE, Seg::Data(bytes.freeze()));
                        sent.push(conn);
                    }
                    Out::Close { conn } => {
                        if let Some(c) = self.conns.get_mut(&conn) {
                            if c.master_open && c.master_rid == rid {
                                c.master_open = false;
                                c.pipes[TO_MASTER].clear();
                                self.send(conn, TO_SLAVE, Seg::Fin);
                                let lag = self.rng.range(0, 3 * MS);
                                self.schedule(self.now + lag, Ev::MasterClosed { b, rid, conn });
                            }
                        }
                    }
                    Out::WaitDone { id, result } => self.wait_done(id, result)?,
                }
            }
            if let Role::Master(m) = &mut self.brokers[b].role {
                for conn in sent {
                    m.driver.sent(now, ConnId(conn));
                }
            }
        }
        Err(Violation::Livelock { node: Self::name(b), what: "master driver never settles" })
    }

    pub(super) fn slave_drive(&mut self, b: usize) -> R {
        for _ in 0..DRAIN_LIMIT {
            let now = self.at();
            let Role::Slave(s) = &mut self.brokers[b].role else { return Ok(()) };
            let (rid, conn) = (s.rid, s.conn);
            match s.driver.next_action(now) {
                SlaveAction::SleepUntil(at) => {
                    self.brokers[b].timeout = Some(Self::to_nanos(at));
                    return Ok(());
                }
                SlaveAction::Connect => {
                    let attempt = self.next_attempt;
                    self.next_attempt += 1;
                    s.attempt = Some(attempt);
                    let at = self.now + self.link_delay() * 2;
                    self.schedule(at, Ev::ConnectDone { b, rid, attempt });
                }
                SlaveAction::Send(bytes) => {
                    if let Some(conn) = conn {
                        self.send(conn, TO_MASTER, Seg::Data(bytes));
                    }
                }
                SlaveAction::Flush => {
                    let at = self.now + self.rng.range(0, 5 * MS);
                    self.schedule(at, Ev::FlushDone { b, rid });
                }
                SlaveAction::Disconnect => {
                    s.attempt = None;
                    if let Some(conn) = s.conn.take() {
                        if let Some(c) = self.conns.get_mut(&conn) {
                            c.slave_open = false;
                            c.pipes[TO_SLAVE].clear();
                        }
                        self.send(conn, TO_MASTER, Seg::Fin);
                    }
                }
            }
        }
        Err(Violation::Livelock { node: Self::name(b), what: "slave driver never sleeps" })
    }
}
