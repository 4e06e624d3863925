//! The master: the production driver over simulated sinks, what it hands the network, and the
//! judging of its wait outcomes.

use super::*;

/// One call into the master's driver, for the trace.
#[derive(Copy, Clone, Debug)]
pub(super) enum MasterCall {
    Accepted {
        conn: u64,
    },
    Sent {
        conn: u64,
    },
    Closed {
        conn: u64,
    },
    LogChanged {
        min: Offset,
        max: Offset,
    },
    Await {
        id: u64,
        offset: Offset,
        deadline: Nanos,
    },
    Timeout,
    /// A graceful stop: every connection closed, every wait cancelled.
    Shutdown,
}

impl Simulation {
    /// (Re)starts the master: a production [`MasterDriver`] over the master's disk, admitting
    /// the replica allow-list, with the restart fence after a crash (`restart_fence` slaves).
    pub(super) fn start_master(&mut self, restart_fence: usize) -> R {
        let now = self.instant(self.now);
        let config = MasterServiceConfig {
            core: self.master.config.clone(),
            admission: allow_list(self.slaves.len(), self.cfg.loopback_slaves),
            restart_fence,
            ..MasterServiceConfig::default()
        };
        let driver =
            MasterDriver::for_service(&config, now, Arc::clone(&self.master.store)).map_err(|e| {
                Violation::Panic { message: format!("the master service refused its configuration: {e}") }
            })?;
        self.master.driver = Some(driver);
        self.master.shut_down = false;
        self.master.outbox = Outbox::default();
        self.master.fence = FenceModel { needed: restart_fence, ..FenceModel::default() };
        self.master_call(MasterCall::Timeout)
    }

    /// Makes one call into the master's driver, drains it, and performs what it handed over
    /// (frames, closes, wait outcomes) in order.
    pub(super) fn master_call(&mut self, call: MasterCall) -> R {
        let now = self.instant(self.now);
        if !self.master.draining {
            self.snapshot_master();
        }
        let outbox = Arc::clone(&self.master.outbox);
        let Some(driver) = self.master.driver.as_mut() else { return Ok(()) };
        let (what, a, b) = match call {
            MasterCall::Accepted { conn } => {
                let address = self.conns.get(&conn).map(|c| c.address).expect("accepting a known connection");
                driver.accept(now, ConnId(conn), address, SimConn { conn, outbox });
                ("in Accepted", conn, 0)
            }
            MasterCall::Sent { conn } => {
                driver.sent(now, ConnId(conn));
                ("in Sent", conn, 0)
            }
            MasterCall::Closed { conn } => {
                driver.closed(now, ConnId(conn));
                self.master.fence.forget(conn);
                ("in Closed", conn, 0)
            }
            MasterCall::LogChanged { min, max } => {
                driver.log_changed(now, crate::LogBounds { min, max });
                ("in LogChanged", min, max)
            }
            MasterCall::Await { id, offset, deadline } => {
                let deadline = self.epoch + Duration::from_nanos(deadline);
                driver.await_replication(now, offset, deadline, SimWait { id, outbox });
                ("in AwaitReplication", id, offset)
            }
            MasterCall::Timeout => {
                driver.handle_timeout(now);
                ("timeout", 0, 0)
            }
            MasterCall::Shutdown => {
                self.master.shut_down = true;
                driver.shutdown();
                ("shutdown", 0, 0)
            }
        };
        self.after_master_call(what, a, b)
    }

    /// Feeds report bytes to the master's driver.
    pub(super) fn master_received_call(&mut self, conn: u64, data: Bytes) -> R {
        let now = self.instant(self.now);
        if !self.master.draining {
            self.snapshot_master();
        }
        let Some(driver) = self.master.driver.as_mut() else { return Ok(()) };
        let len = data.len() as u64;
        driver.received(now, ConnId(conn), data);
        self.after_master_call("in Received", conn, len)
    }

    fn after_master_call(&mut self, what: &'static str, a: u64, b: u64) -> R {
        let driver = self.master.driver.as_mut().expect("called above");
        let next = driver.drain();
        self.master.timeout = Some(self.to_nanos(next));
        self.rec(Node::Master, what, a, b, Detail::None);
        self.observe_master()?;
        self.perform_master_outbox()
    }

    /// What the oracle learns from the core's state after a call: connections whose first
    /// report the master accepted start streaming at `start`.
    fn observe_master(&mut self) -> R {
        let Some(core) = self.master.core() else { return Ok(()) };
        let started: Vec<(u64, Offset, Option<Offset>)> = core
            .slaves()
            .filter_map(|info| info.start.map(|start| (info.conn.0, start, info.ack)))
            .filter(|(conn, ..)| self.conns.get(conn).is_some_and(|c| !c.started))
            .collect();
        for (conn, start, ack) in started {
            let c = self.conns.get_mut(&conn).expect("filtered above");
            c.started = true;
            c.next = Some(start);
            let (peer, ip) = (c.peer, c.address.ip());
            if !ip.is_loopback() {
                for (_, other) in
                    self.conns.iter_mut().filter(|(id, o)| **id != conn && o.started && o.address.ip() == ip)
                {
                    other.newer_started = true;
                }
            }
            self.rec(Node::Master, "streams", conn, start, Detail::None);
            if let Peer::Slave { idx, inc } = peer {
                let s = &self.slaves[idx];
                if s.inc == inc && s.ended_with.is_none() && !s.prefix_ok() {
                    return Err(Violation::DivergedSlaveAccepted {
                        slave: idx,
                        reported: ack.unwrap_or(start),
                        valid_end: s.valid_end,
                    });
                }
            }
        }
        Ok(())
    }

    /// Performs what the driver's sinks were handed. A call made while performing them (a
    /// `Sent` once a frame is in the pipe, a `Closed`) leaves its own output to this loop.
    fn perform_master_outbox(&mut self) -> R {
        if self.master.draining {
            return Ok(());
        }
        self.master.draining = true;
        let result = self.perform_master_outbox_inner();
        self.master.draining = false;
        result
    }

    fn perform_master_outbox_inner(&mut self) -> R {
        for _ in 0..DRAIN_LIMIT {
            let outbox = Arc::clone(&self.master.outbox);
            let Some(out) = pop(&outbox) else { return Ok(()) };
            match out {
                Out::Transmit { conn, transmit } => {
                    let header = <[u8; 12]>::try_from(&transmit.header[..]).map_err(|_| {
                        Violation::BadTransmit { conn, offset: 0, len: 0, reason: "not a push header" }
                    })?;
                    self.master_transmit(conn, header, transmit.body)?
                }
                Out::Close { conn } => {
                    self.rec(Node::Master, "out Close", conn, 0, Detail::None);
                    self.closes += 1;
                    self.master_close(conn)?;
                }
                Out::WaitDone { id, result } => {
                    self.rec(Node::Master, "ev WaitDone", id, 0, Detail::Wait(result));
                    self.wait_done(id, result)?;
                }
            }
        }
        Err(Violation::Livelock { node: "master".into(), what: "its driver's output never ended" })
    }

    pub(super) fn master_timeout(&mut self) -> R {
        self.master.timeout = None;
        let (at, n) = self.master.spin;
        self.master.spin = if at == self.now { (at, n + 1) } else { (self.now, 0) };
        if self.master.spin.1 > SPIN_LIMIT {
            return Err(Violation::Livelock { node: "master".into(), what: "timeouts at one instant" });
        }
        let closes = self.closes;
        self.master_call(MasterCall::Timeout)?;
        // Closes on a timeout are the master's housekeeping (or a first report that never came).
        self.stats.housekeeping_closes += self.closes - closes;
        Ok(())
    }

    pub(super) fn snapshot_master(&mut self) {
        self.before_input.clear();
        if let Some(core) = self.master.core() {
            self.before_input.extend(core.slaves().map(|info| (info.conn.0, info.ack)));
        }
    }

    /// The core closed `conn`: tear it down and feed `Closed`, at once or after a lag during
    /// which writes under way still finish (`Sent`) and reads under way still arrive.
    pub(super) fn master_close(&mut self, conn: u64) -> R {
        let lag = self.rng.range(0, nanos(self.faults.close_lag));
        if lag == 0 {
            self.master_side_down(conn, Teardown::Fin);
            return self.master_call(MasterCall::Closed { conn });
        }
        let delay = self.link_delay();
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return Ok(()) };
        c.master_closing = true;
        let finishing = std::mem::take(&mut c.pending_tx).len();
        let p = &mut c.pipes[Dir::ToPeer.index()];
        let at = (now + delay).max(p.last_ready);
        p.eof = Some(at);
        self.kick(conn, Dir::ToPeer, at);
        self.stats.lagged_closes += 1;
        for _ in 0..finishing {
            self.master_call(MasterCall::Sent { conn })?;
        }
        let inc = self.master.inc;
        self.schedule(now + lag, Ev::MasterClosed { conn, inc });
        Ok(())
    }

    pub(super) fn master_transmit(&mut self, conn: u64, header: [u8; 12], body: Option<LogSpan>) -> R {
        let h = PushHeader::decode(&header, u32::MAX >> 1).map_err(|_| Violation::BadTransmit {
            conn,
            offset: 0,
            len: 0,
            reason: "header does not decode",
        })?;
        let bad =
            |reason| Violation::BadTransmit { conn, offset: h.offset, len: u64::from(h.body_len), reason };
        let Some(c) = self.conns.get(&conn) else { return Err(bad("unknown connection")) };
        if self.master.shut_down && (!c.master_open || c.master_closing) {
            // A frame for a sink the shutdown closed: its writer is gone and drops it.
            return Ok(());
        }
        if !c.master_open || c.master_closing || c.master_inc != self.master.inc {
            return Err(bad("connection already closed"));
        }
        if c.next.is_some_and(|n| n != h.offset) {
            return Err(bad("not where the stream continues"));
        }
        let cfg = &self.master.config;
        let appended_end = self.master.core().map_or(0, |m| m.log_bounds().max);
        let data = match body {
            None if h.body_len != 0 => return Err(bad("heartbeat with a body length")),
            None => Bytes::new(),
            Some(span) => {
                if (span.offset, span.len) != (h.offset, h.body_len) {
                    return Err(bad("header does not match the span"));
                }
                if span.len == 0 || span.len > cfg.transfer_batch_size {
                    return Err(bad("span length outside 1..=transfer_batch_size"));
                }
                let seg = cfg.mapped_file_size_commit_log;
                if span.offset / seg != (span.end() - 1) / seg {
                    return Err(bad("span crosses a segment"));
                }
                if span.end() > appended_end {
                    return Err(bad("span beyond the appended end"));
                }
                self.master.log().read(span).map_err(bad)?
            }
        };
        self.rec(Node::Master, "out Transmit", conn, h.offset, Detail::None);
        let mut wire = BytesMut::with_capacity(12 + data.len());
        wire.extend_from_slice(&header);
        wire.extend_from_slice(&data);
        let c = self.conns.get_mut(&conn).expect("checked above");
        c.next = Some(h.offset + u64::from(h.body_len));
        c.body_bytes += u64::from(h.body_len);
        c.pending_tx.push_back(wire.freeze());
        self.flush_tx(conn)
    }

    /// Moves master transmits into the pipe while it has room; each one moved is `Sent`.
    pub(super) fn flush_tx(&mut self, conn: u64) -> R {
        let cap = self.faults.pipe_capacity;
        loop {
            let Some(c) = self.conns.get_mut(&conn) else { return Ok(()) };
            if !c.master_open || c.master_closing {
                c.pending_tx.clear();
                return Ok(());
            }
            let Some(front) = c.pending_tx.front() else { return Ok(()) };
            let pipe = &c.pipes[Dir::ToPeer.index()];
            if pipe.bytes > 0 && pipe.bytes + front.len() > cap {
                return Ok(());
            }
            let wire = c.pending_tx.pop_front().expect("front exists");
            self.send(conn, Dir::ToPeer, wire);
            self.master_call(MasterCall::Sent { conn })?;
        }
    }

    pub(super) fn wait_done(&mut self, id: u64, result: Result<Offset, WaitError>) -> R {
        let Some(w) = self.waits.remove(&id) else { return Err(Violation::WaitDoneNotPending { id }) };
        self.wait_deadlines.remove(&(w.deadline, id));
        let bad = |why| Err(Violation::WaitBadResult { id, result, why });
        match result {
            Ok(o) => {
                self.stats.waits_ok += 1;
                if o != w.offset {
                    return bad("Ok with another offset than waited for");
                }
                if self.now >= w.deadline {
                    return Err(Violation::WaitOkAfterDeadline {
                        id,
                        late: Duration::from_nanos(self.now - w.deadline),
                    });
                }
                self.check_wait_ok(id, o)?;
            }
            Err(WaitError::Timeout) => {
                self.stats.waits_timeout += 1;
                if self.now < w.deadline {
                    return bad("Timeout before the deadline");
                }
            }
            Err(WaitError::Cancelled) => {
                self.stats.waits_cancelled += 1;
                if !w.cancel_requested {
                    return bad("Cancelled without CancelWait");
                }
            }
            Err(e) => {
                if e == WaitError::SlaveNotAvailable {
                    self.stats.waits_slave_not_available += 1;
                } else {
                    self.stats.waits_in_sync_replicas_not_enough += 1;
                }
                if self.starting_wait != Some(id) {
                    return bad("refused up front, but not when it started");
                }
                // Refused only if too few slaves are within `ha_max_gap_not_in_sync` of it.
                if let Some(core) = self.master.core() {
                    let gap = self.master.config.ha_max_gap_not_in_sync;
                    let acks: Vec<Offset> = core.slaves().filter_map(|i| i.ack).collect();
                    // Distinct peers close enough by a connection of their current incarnation
                    // (a slave that crashed since may have lost what its old connection acked)
                    // that no newer connection from its host has replaced.
                    let close: BTreeSet<Peer> = core
                        .slaves()
                        .filter(|i| i.ack.is_some_and(|a| w.offset.saturating_sub(a) < gap))
                        .filter_map(|i| self.conns.get(&i.conn.0))
                        .filter(|c| !c.newer_started)
                        .map(|c| c.peer)
                        .filter(|p| !matches!(p, Peer::Slave { idx, inc } if self.slaves[*idx].inc != *inc))
                        .collect();
                    let close = close.len();
                    let enough = match (e, self.master.config.ack_policy) {
                        (WaitError::SlaveNotAvailable, _) => !acks.is_empty() && close > 0,
                        (_, AckPolicy::Quorum { in_sync_replicas }) => {
                            close >= in_sync_replicas.saturating_sub(1) as usize
                        }
                        _ => false,
                    };
                    if enough {
                        return bad("refused up front though enough slaves were close enough");
                    }
                }
            }
        }
        Ok(())
    }

    /// `Ok(o)`: enough distinct slaves must hold `o` by their own truthful reports.
    pub(super) fn check_wait_ok(&self, id: u64, o: Offset) -> R {
        let Some(core) = self.master.core() else { return Ok(()) };
        // Every connection live at some point of this input, with its highest ack.
        let mut acks: BTreeMap<u64, Option<Offset>> = self.before_input.iter().copied().collect();
        for info in core.slaves() {
            let a = acks.entry(info.conn.0).or_insert(None);
            *a = (*a).max(info.ack);
        }
        let mut holders: BTreeSet<Peer> = BTreeSet::new();
        for (&conn, &ack) in &acks {
            let Some(c) = self.conns.get(&conn) else { continue };
            // The master's ack never exceeds the peer's report (checked every step), and a slave
            // reports only what it stored; so `ack` is a truthful holding.
            let holds = ack.is_some_and(|a| a >= o) && c.reported.is_some_and(|r| r >= o);
            if holds {
                let key = match c.peer {
                    Peer::Slave { idx, inc } => {
                        // What was acknowledged is still there: durable bytes survive crashes;
                        // written ones survive as long as the slave has not crashed since.
                        let s = &self.slaves[idx];
                        let kept = match s.config.ack_on {
                            AckOn::Flushed => s.store.durable() >= o,
                            AckOn::Written => s.inc != inc || s.store.end() >= o,
                        };
                        if !kept {
                            return Err(Violation::WaitBadResult {
                                id,
                                result: Ok(o),
                                why: "a slave counted for it no longer holds the offset",
                            });
                        }
                        Peer::Slave { idx, inc: 0 }
                    }
                    p => p,
                };
                holders.insert(key);
            }
        }
        // Connections still live were live when the wait completed, with an ack no higher. A
        // peer is one slave, however many connections it has: it is short if it is in sync on
        // a connection of its current incarnation and none of those holds `o`. A connection a
        // newer one from its host replaced is not in the set: the master counts a host on its
        // newest streaming connection (a reconnect cannot be told from a reboot).
        let mut peers: BTreeMap<Peer, (bool, Option<Offset>)> = BTreeMap::new();
        for info in core.slaves() {
            let Some(c) = self.conns.get(&info.conn.0) else { continue };
            if c.newer_started || matches!(c.peer, Peer::Slave { idx, inc } if self.slaves[idx].inc != inc) {
                continue;
            }
            let (in_sync, best) = peers.entry(c.peer).or_insert((false, None));
            *in_sync |= info.in_sync;
            *best = (*best).max(info.ack);
        }
        let in_sync_short = peers.values().any(|&(in_sync, best)| in_sync && best.is_some_and(|a| a < o));
        let need = match self.master.config.ack_policy {
            AckPolicy::AnySlave | AckPolicy::AllInSync => 1,
            AckPolicy::Quorum { in_sync_replicas } => in_sync_replicas.saturating_sub(1) as usize,
        };
        if holders.len() < need {
            let view: Vec<String> = core
                .slaves()
                .map(|info| {
                    let peer = self.conns.get(&info.conn.0).map(|c| c.peer);
                    format!("#{} {:?} ack {:?} in_sync {}", info.conn.0, peer, info.ack, info.in_sync)
                })
                .collect();
            let view = if view.is_empty() { "none".into() } else { view.join(", ") };
            return Err(Violation::WaitOkTooFew { id, offset: o, have: holders.len(), need, view });
        }
        if self.master.config.ack_policy == AckPolicy::AllInSync && in_sync_short {
            return Err(Violation::WaitBadResult {
                id,
                result: Ok(o),
                why: "an in-sync slave is below the offset",
            });
        }
        Ok(())
    }

    /// Tears down the master's side of a connection.
    pub(super) fn master_side_down(&mut self, conn: u64, how: Teardown) {
        let delay = self.link_delay();
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return };
        if !c.master_open {
            return;
        }
        c.master_open = false;
        c.pending_tx.clear();
        c.pipes[Dir::ToMaster.index()].clear();
        match how {
            Teardown::Fin => {
                let p = &mut c.pipes[Dir::ToPeer.index()];
                let at = (now + delay).max(p.last_ready);
                p.eof = Some(at);
                self.kick(conn, Dir::ToPeer, at);
            }
            Teardown::Rst => {
                let p = &mut c.pipes[Dir::ToPeer.index()];
                p.clear();
                p.eof = Some(now + delay);
                self.kick(conn, Dir::ToPeer, now + delay);
            }
            Teardown::Silent => c.master_silent = true,
        }
    }
}
