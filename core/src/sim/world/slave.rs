//! A slave: the production driver, connecting, reporting, and appending and flushing through a
//! (possibly slow or failing) disk.

use super::*;

/// One input to a slave's driver, for the trace.
#[derive(Debug)]
pub(super) enum SlaveCall {
    Connected,
    Received(Bytes),
    Closed,
    Appended(Offset),
    AppendFailed(Offset),
    Flushed(Offset),
    FlushFailed,
}

impl Simulation {
    pub(super) fn start_slave(&mut self, i: usize) -> R {
        let now = self.instant(self.now);
        let config = SlaveServiceConfig {
            core: self.slaves[i].config.clone(),
            ..SlaveServiceConfig::new(MASTER_ADDRESS)
        };
        let s = &mut self.slaves[i];
        s.down_until = None;
        s.stopped = false;
        let driver = SlaveDriver::new(&config, now, Arc::clone(&s.store)).map_err(|e| Violation::Panic {
            message: format!("the slave service refused its configuration: {e}"),
        })?;
        s.driver = Some(driver);
        let end = s.store.end();
        self.rec(Node::Slave(i), "start", end, 0, Detail::None);
        self.drain_slave(i)
    }

    /// One input to a slave's driver, then its outputs.
    pub(super) fn feed_slave(&mut self, i: usize, input: SlaveCall) -> R {
        let now = self.instant(self.now);
        let Some(driver) = self.slaves[i].driver.as_mut() else { return Ok(()) };
        let (what, a) = match input {
            SlaveCall::Connected => {
                driver.connected(now);
                ("in Connected", 0)
            }
            SlaveCall::Received(d) => {
                let len = d.len() as u64;
                driver.received(now, d);
                ("in Received", len)
            }
            SlaveCall::Closed => {
                driver.closed(now);
                ("in Closed", 0)
            }
            SlaveCall::Appended(end) => {
                driver.appended::<disk::DiskError>(now, Ok(end));
                ("in Appended", end)
            }
            SlaveCall::AppendFailed(end) => {
                driver.appended(now, Err(disk::DiskError::Fault));
                ("in AppendFailed", end)
            }
            SlaveCall::Flushed(end) => {
                driver.flushed::<disk::DiskError>(now, Ok(end));
                ("in Flushed", end)
            }
            SlaveCall::FlushFailed => {
                driver.flushed::<disk::DiskError>(now, Err(disk::DiskError::Fault));
                ("in FlushFailed", 0)
            }
        };
        self.rec(Node::Slave(i), what, a, 0, Detail::None);
        self.drain_slave(i)
    }

    pub(super) fn slave_timeout(&mut self, i: usize) -> R {
        self.slaves[i].timeout = None;
        let (at, n) = self.slaves[i].spin;
        self.slaves[i].spin = if at == self.now { (at, n + 1) } else { (self.now, 0) };
        if self.slaves[i].spin.1 > SPIN_LIMIT {
            return Err(Violation::Livelock { node: format!("slave {i}"), what: "timeouts at one instant" });
        }
        let now = self.instant(self.now);
        if let Some(driver) = self.slaves[i].driver.as_mut() {
            driver.handle_timeout(now);
            self.drain_slave(i)?;
        }
        Ok(())
    }

    pub(super) fn drain_slave(&mut self, i: usize) -> R {
        if self.slaves[i].draining {
            return Ok(());
        }
        self.slaves[i].draining = true;
        let result = self.drain_slave_inner(i);
        self.slaves[i].draining = false;
        result?;
        // Backpressure lifted: read what is waiting.
        let s = &self.slaves[i];
        if let (Some(conn), Some(driver)) = (s.conn, s.driver.as_ref()) {
            let waiting = self.conns.get(&conn).is_some_and(|c| {
                let p = &c.pipes[Dir::ToPeer.index()];
                !p.segs.is_empty() || p.eof.is_some()
            });
            if waiting && driver.wants_read() {
                let now = self.now;
                self.kick(conn, Dir::ToPeer, now);
            }
        }
        Ok(())
    }

    /// Performs the slave driver's steps; its appends go to the simulated disk, which answers
    /// them now or late.
    pub(super) fn drain_slave_inner(&mut self, i: usize) -> R {
        for _ in 0..DRAIN_LIMIT {
            let now = self.instant(self.now);
            let Some(driver) = self.slaves[i].driver.as_mut() else { return Ok(()) };
            match driver.poll_action(now) {
                SlaveOutput::Timeout(at) => {
                    self.slaves[i].timeout = Some(self.to_nanos(at));
                    return Ok(());
                }
                SlaveOutput::Connect => {
                    let attempt = self.next_attempt;
                    self.next_attempt += 1;
                    self.slaves[i].connecting = Some(attempt);
                    self.rec(Node::Slave(i), "out Connect", attempt, 0, Detail::None);
                    let rtt = self.link_delay() + self.link_delay();
                    let inc = self.slaves[i].inc;
                    self.schedule(self.now + rtt, Ev::ConnectDone { slave: i, inc, attempt, fail: false });
                }
                SlaveOutput::Report(offset) => self.slave_report(i, offset)?,
                SlaveOutput::Append { offset, data } => self.slave_append(i, offset, data)?,
                SlaveOutput::Flush => {
                    self.rec(Node::Slave(i), "out Flush", 0, 0, Detail::None);
                    let done = if std::mem::take(&mut self.slaves[i].fail_next) {
                        self.stats.disk_errors += 1;
                        DiskDone::FlushFailed
                    } else {
                        DiskDone::Flushed(self.slaves[i].store.end())
                    };
                    self.disk_op(i, done)?;
                }
                SlaveOutput::Close(reason) => {
                    self.rec(Node::Slave(i), "out Close", 0, 0, Detail::Close(reason));
                    if reason == CloseReason::HousekeepingTimeout {
                        self.stats.housekeeping_closes += 1;
                    }
                    if let Some(conn) = self.slaves[i].conn.take() {
                        self.peer_side_down(conn, Teardown::Fin);
                    }
                }
                SlaveOutput::Event(e) => {
                    if let SlaveEvent::PeerError(error) = e {
                        self.rec(Node::Slave(i), "ev PeerError", 0, 0, Detail::Peer(error));
                        match error {
                            PeerError::OffsetMismatch { .. } => {
                                self.stats.offset_mismatches += 1;
                                self.quarantine.push((i, error));
                            }
                            PeerError::Frame(_) => self.stats.frame_errors += 1,
                            _ => {}
                        }
                    }
                }
            }
        }
        Err(Violation::Livelock { node: format!("slave {i}"), what: "poll_output never returned Timeout" })
    }

    pub(super) fn slave_report(&mut self, i: usize, r: Offset) -> R {
        self.rec(Node::Slave(i), "out Transmit", r, 0, Detail::None);
        let s = &self.slaves[i];
        let (stored, durable) = {
            let log = s.log();
            (log.end(), log.durable())
        };
        let limit = match s.config.ack_on {
            AckOn::Written => stored,
            AckOn::Flushed => durable,
        };
        if r > limit {
            return Err(Violation::ReportBeyondStored { slave: i, report: r, stored, durable });
        }
        let Some(conn) = s.conn else { return Err(Violation::ReportWithoutConnection { slave: i }) };
        self.send(conn, Dir::ToMaster, Bytes::copy_from_slice(&crate::classic::frame::encode_report(r)));
        Ok(())
    }

    pub(super) fn slave_append(&mut self, i: usize, offset: Offset, data: Bytes) -> R {
        self.rec(Node::Slave(i), "out Append", offset, data.len() as u64, Detail::None);
        if self.slaves[i].poisoned {
            // A later append of the stream that failed: it no longer continues the log, so the
            // store refuses it too. Every append gets its own answer, in order.
            let end = self.slaves[i].store.end();
            return self.disk_op(i, DiskDone::AppendFailed(end));
        }
        let failed = std::mem::take(&mut self.slaves[i].fail_next);
        let data = if failed {
            self.stats.disk_errors += 1;
            self.slaves[i].poisoned = true;
            // A failed write may leave part of its data behind (a torn append).
            let keep = if data.len() > 1 && self.rng.chance(0.5) {
                self.rng.range(1, data.len() as u64 - 1)
            } else {
                0
            };
            if keep > 0 {
                self.stats.torn_appends += 1;
            }
            data.slice(..keep as usize)
        } else {
            data
        };
        if !data.is_empty() {
            self.store(i, offset, &data)?;
        }
        let end = self.slaves[i].store.end();
        self.disk_op(i, if failed { DiskDone::AppendFailed(end) } else { DiskDone::Appended(end) })
    }

    /// Writes replicated bytes into a slave's log, checking them against the master that sent
    /// them.
    pub(super) fn store(&mut self, i: usize, offset: Offset, data: &[u8]) -> R {
        let s = &self.slaves[i];
        // Which master incarnation sent these bytes: the current one, or one that crashed while
        // they were in flight.
        let sender = s.conn.and_then(|c| self.conns.get(&c)).map_or(self.master.inc, |c| c.master_inc);
        let current = sender == self.master.inc;
        let was_prefix = s.prefix_ok();
        if current && !was_prefix {
            return Err(Violation::SilentMerge { slave: i, offset, valid_end: s.valid_end });
        }
        let len = data.len() as u64;
        let end = s.log().append_at(offset, data).map_err(|end| Violation::AppendNotAtEnd {
            slave: i,
            offset,
            end,
        })?;
        let master = self.master.log();
        let source = if current { &*master } else { &self.master.old_logs[&sender] };
        if !source.holds(offset, end) || source.slice(offset, end) != data {
            return Err(Violation::WrongBytes { slave: i, offset, len });
        }
        // The slave still matches the current master as far as these bytes equal the master's
        // (bytes from a crashed incarnation may match up to where the restarted master ends).
        let valid_end = if was_prefix {
            let upto = end.min(master.end());
            let same = if master.holds(offset, upto) {
                master.slice(offset, upto).iter().zip(data).take_while(|(a, b)| a == b).count() as u64
            } else {
                0
            };
            Some(offset + same)
        } else {
            None
        };
        drop(master);
        if let Some(v) = valid_end {
            self.slaves[i].valid_end = v;
        }
        self.stats.bytes_replicated += len;
        Ok(())
    }

    /// Completes a disk operation now, or late on a slow disk; completions keep their order.
    pub(super) fn disk_op(&mut self, i: usize, done: DiskDone) -> R {
        let slow = self.now < self.slaves[i].slow_until;
        let delay = if slow { self.rng.range(0, self.slaves[i].slow_max) } else { 0 };
        let s = &mut self.slaves[i];
        let at = (self.now + delay).max(s.disk_last);
        s.disk_last = at;
        if at == self.now && s.disk.is_empty() {
            return self.disk_apply(i, done);
        }
        if at > self.now {
            self.stats.slow_disk_ops += 1;
        }
        s.disk.push_back((at, done));
        let inc = s.inc;
        self.schedule(at, Ev::Disk { slave: i, inc });
        Ok(())
    }

    pub(super) fn disk_event(&mut self, i: usize, inc: u64) -> R {
        if self.slaves[i].inc != inc {
            return Ok(());
        }
        while let Some((at, _)) = self.slaves[i].disk.front() {
            if *at > self.now {
                break;
            }
            let (_, done) = self.slaves[i].disk.pop_front().expect("front exists");
            self.disk_apply(i, done)?;
        }
        Ok(())
    }

    pub(super) fn disk_apply(&mut self, i: usize, done: DiskDone) -> R {
        let input = match done {
            DiskDone::Appended(end) => SlaveCall::Appended(end),
            DiskDone::AppendFailed(end) => SlaveCall::AppendFailed(end),
            DiskDone::Flushed(end) => {
                self.slaves[i].log().flush_upto(end);
                SlaveCall::Flushed(end)
            }
            DiskDone::FlushFailed => SlaveCall::FlushFailed,
        };
        self.feed_slave(i, input)
    }

    /// Tears down the peer's side of a connection (a slave or an intruder).
    pub(super) fn peer_side_down(&mut self, conn: u64, how: Teardown) {
        let delay = self.link_delay();
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return };
        if !c.peer_open {
            return;
        }
        c.peer_open = false;
        c.pipes[Dir::ToPeer.index()].clear();
        match how {
            Teardown::Fin => {
                let p = &mut c.pipes[Dir::ToMaster.index()];
                let at = (now + delay).max(p.last_ready);
                p.eof = Some(at);
                self.kick(conn, Dir::ToMaster, at);
            }
            Teardown::Rst => {
                let p = &mut c.pipes[Dir::ToMaster.index()];
                p.clear();
                p.eof = Some(now + delay);
                self.kick(conn, Dir::ToMaster, now + delay);
            }
            Teardown::Silent => c.peer_silent = true,
        }
    }

    pub(super) fn connect_done(&mut self, i: usize, inc: u64, attempt: u64, fail: bool) -> R {
        let s = &self.slaves[i];
        if s.inc != inc || s.connecting != Some(attempt) || !s.running() {
            return Ok(());
        }
        if fail {
            self.slaves[i].connecting = None;
            return self.feed_slave(i, SlaveCall::Closed);
        }
        let [to_master, to_slave] = self.partition_until[i];
        if self.master.driver.is_none() {
            // Connection refused.
            self.slaves[i].connecting = None;
            return self.feed_slave(i, SlaveCall::Closed);
        }
        if to_master > self.now || to_slave > self.now {
            // The handshake is lost: the connect times out.
            let at = self.now + self.between(200 * MS, 2_000 * MS);
            self.schedule(at, Ev::ConnectDone { slave: i, inc, attempt, fail: true });
            return Ok(());
        }
        self.slaves[i].connecting = None;
        // Appends the core queued for the failed stream have all failed by now.
        self.slaves[i].poisoned = false;
        let address = SocketAddr::new(slave_ip(i, self.cfg.loopback_slaves), 0);
        let conn = self.open_conn(Peer::Slave { idx: i, inc }, address);
        self.slaves[i].conn = Some(conn);
        self.master_call(MasterCall::Accepted { conn })?;
        self.feed_slave(i, SlaveCall::Connected)
    }

    /// A new connection to the master from `address` (its port is the connection's own).
    pub(super) fn open_conn(&mut self, peer: Peer, address: SocketAddr) -> u64 {
        let id = self.next_conn;
        self.next_conn += 1;
        let address = SocketAddr::new(address.ip(), 1_024 + (id % 60_000) as u16);
        self.conns.insert(
            id,
            Conn {
                peer,
                address,
                master_inc: self.master.inc,
                pipes: [Pipe::default(), Pipe::default()],
                stall_until: [0, 0],
                master_open: true,
                master_closing: false,
                peer_open: true,
                peer_silent: false,
                master_silent: false,
                pending_tx: VecDeque::new(),
                partial: Vec::new(),
                reported: None,
                started: false,
                newer_started: false,
                next: None,
                body_bytes: 0,
            },
        );
        id
    }
}
