//! The links: ordered byte pipes with latency, chunked reads, capacity, stalls, partitions, EOF and resets; and the check of the master's report handling.

use super::*;

impl Simulation {
    pub(super) fn send(&mut self, conn: u64, dir: Dir, data: Bytes) {
        let delay = self.link_delay();
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return };
        let p = &mut c.pipes[dir.index()];
        if p.eof.is_some() {
            // The connection is reset or closing in this direction: nothing more gets through.
            return;
        }
        let at = (now + delay).max(p.last_ready);
        p.last_ready = at;
        p.bytes += data.len();
        p.segs.push_back((at, data));
        self.kick(conn, dir, at);
    }

    pub(super) fn kick(&mut self, conn: u64, dir: Dir, at: Nanos) {
        let at = at.max(self.now);
        let Some(c) = self.conns.get_mut(&conn) else { return };
        let p = &mut c.pipes[dir.index()];
        if p.scheduled.is_none_or(|s| s > at) {
            p.scheduled = Some(at);
            self.schedule(at, Ev::Deliver { conn, dir });
        }
    }

    pub(super) fn blocked_until(&self, c: &Conn, dir: Dir) -> Nanos {
        let mut until = c.stall_until[dir.index()];
        if let Peer::Slave { idx, .. } = c.peer {
            until = until.max(self.partition_until[idx][dir.index()]);
        }
        until
    }

    pub(super) fn host_up(&self, peer: Peer) -> bool {
        match peer {
            Peer::Slave { idx, inc } => {
                let s = &self.slaves[idx];
                s.inc != inc && s.running()
            }
            Peer::Intruder { .. } => false,
        }
    }

    pub(super) fn deliver(&mut self, conn: u64, dir: Dir) -> R {
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return Ok(()) };
        let p = &mut c.pipes[dir.index()];
        if p.scheduled.is_some_and(|s| s <= now) {
            p.scheduled = None;
        }
        let open = match dir {
            Dir::ToMaster => c.master_open,
            Dir::ToPeer => c.peer_open,
        };
        if !open {
            // Bytes for a closed socket are dropped. A host that crashed silently and is back
            // answers them with a reset.
            let had_data = !c.pipes[dir.index()].segs.is_empty();
            c.pipes[dir.index()].clear();
            c.pipes[dir.index()].eof = None;
            let rst = match dir {
                Dir::ToPeer => c.peer_silent && had_data && c.master_open,
                Dir::ToMaster => c.master_silent && had_data && c.peer_open,
            };
            if rst {
                let back = if dir == Dir::ToPeer {
                    let peer = c.peer;
                    self.host_up(peer)
                } else {
                    self.master.driver.is_some()
                };
                if back {
                    self.rec(Node::Net, "reset from rebooted host", conn, 0, Detail::None);
                    let delay = self.link_delay();
                    let other = if dir == Dir::ToPeer { Dir::ToMaster } else { Dir::ToPeer };
                    let c = self.conns.get_mut(&conn).expect("present");
                    let p = &mut c.pipes[other.index()];
                    p.clear();
                    p.eof = Some(now + delay);
                    self.kick(conn, other, now + delay);
                }
            }
            return Ok(());
        }
        let c = self.conns.get(&conn).expect("present");
        let blocked = self.blocked_until(c, dir);
        if blocked > now {
            self.kick(conn, dir, blocked);
            return Ok(());
        }
        let p = &c.pipes[dir.index()];
        if let Some(&(ready, _)) = p.segs.front() {
            if ready > now {
                self.kick(conn, dir, ready);
                return Ok(());
            }
            let peer = c.peer;
            if dir == Dir::ToPeer {
                if let Peer::Slave { idx, .. } = peer {
                    if !self.slaves[idx].core().is_some_and(Slave::wants_read) {
                        return Ok(()); // drain_slave kicks once it wants to read again
                    }
                }
            }
            let available: usize = p.segs.iter().take_while(|(t, _)| *t <= now).map(|(_, b)| b.len()).sum();
            let n = match peer {
                // Intruders swallow whatever arrives (read splitting is the slaves' test).
                Peer::Intruder { .. } if dir == Dir::ToPeer => available,
                _ => {
                    let max = available.min(self.faults.max_read_chunk).max(1) as u64;
                    self.rng.range(1, max) as usize
                }
            };
            let c = self.conns.get_mut(&conn).expect("present");
            let p = &mut c.pipes[dir.index()];
            let mut chunk = BytesMut::with_capacity(n);
            let mut split = false;
            while chunk.len() < n {
                let (_, front) = p.segs.front_mut().expect("available bytes");
                let take = front.len().min(n - chunk.len());
                chunk.extend_from_slice(&front[..take]);
                if take == front.len() {
                    p.segs.pop_front();
                } else {
                    bytes::Buf::advance(front, take);
                    split = true;
                }
            }
            p.bytes -= n;
            let more = p.segs.front().map(|&(t, _)| t.max(now)).or(p.eof.map(|t| t.max(now)));
            if split {
                self.stats.split_reads += 1;
            }
            let chunk = chunk.freeze();
            match (dir, peer) {
                (Dir::ToMaster, _) => self.master_received(conn, chunk)?,
                (Dir::ToPeer, Peer::Slave { idx, .. }) => self.feed_slave(idx, SlaveCall::Received(chunk))?,
                (Dir::ToPeer, Peer::Intruder { id }) => self.intruder_received(id, conn, chunk),
            }
            if dir == Dir::ToPeer {
                self.flush_tx(conn)?;
            }
            if let Some(at) = more {
                self.kick(conn, dir, at);
            }
            return Ok(());
        }
        // No bytes left: EOF or reset, if one is due.
        let Some(at) = p.eof else { return Ok(()) };
        if at > now {
            self.kick(conn, dir, at);
            return Ok(());
        }
        let c = self.conns.get_mut(&conn).expect("present");
        c.pipes[dir.index()].eof = None;
        match dir {
            Dir::ToMaster => {
                if c.master_open && !c.master_closing && c.master_inc == self.master.inc {
                    c.master_open = false;
                    c.pending_tx.clear();
                    self.rec(Node::Net, "eof at master", conn, 0, Detail::None);
                    self.master_call(MasterCall::Closed { conn })?;
                }
            }
            Dir::ToPeer => {
                c.peer_open = false;
                let peer = c.peer;
                self.rec(Node::Net, "eof at peer", conn, 0, Detail::None);
                match peer {
                    Peer::Slave { idx, inc } => {
                        let s = &mut self.slaves[idx];
                        if s.inc == inc && s.conn == Some(conn) {
                            s.conn = None;
                            self.feed_slave(idx, SlaveCall::Closed)?;
                        }
                    }
                    Peer::Intruder { id } => {
                        self.intruders.remove(&id);
                    }
                }
            }
        }
        Ok(())
    }

    /// Feeds report bytes to the master, checking its decisions against the protocol's rules.
    pub(super) fn master_received(&mut self, conn: u64, chunk: Bytes) -> R {
        if self.conns.get(&conn).is_some_and(|c| c.master_closing) {
            // A read that was under way when the core closed it: the core must ignore it.
            return self.master_received_call(conn, chunk);
        }
        let Some(core) = self.master.core() else { return Ok(()) };
        let Some(info) = core.slaves().find(|s| s.conn.0 == conn) else {
            // Not a replica connection (refused at accept): the driver must drop the bytes.
            return self.master_received_call(conn, chunk);
        };
        let bounds = core.log_bounds();
        let cfg = &self.master.config;
        let c = self.conns.get_mut(&conn).expect("delivering on it");
        c.partial.extend_from_slice(&chunk);
        let words = c.partial.len() / REPORT_LEN;
        let mut ack = info.ack;
        let mut sent = info.sent;
        let mut changed = None;
        let mut reported = c.reported;
        let mut expected: Result<(), PeerError> = Ok(());
        for w in c.partial.chunks_exact(REPORT_LEN).take(words) {
            let w = u64::from_be_bytes(w.try_into().expect("8 bytes"));
            if w <= MAX_WIRE_OFFSET {
                reported = Some(reported.map_or(w, |r: u64| r.max(w)));
            }
            let verdict = if w > MAX_WIRE_OFFSET {
                Err(PeerError::Frame(FrameError::OffsetOutOfRange { offset: w }))
            } else {
                match ack {
                    None if w == 0 => {
                        sent = match cfg.new_slave_start {
                            NewSlaveStart::Earliest => bounds.min,
                            NewSlaveStart::LastFile => {
                                (bounds.max - bounds.max % cfg.mapped_file_size_commit_log).max(bounds.min)
                            }
                        };
                        Ok(())
                    }
                    None if w > bounds.max => Err(PeerError::SlaveAhead { reported: w, end: bounds.max }),
                    None if w < bounds.min => {
                        Err(PeerError::SlaveBehindRetention { reported: w, min: bounds.min })
                    }
                    None => {
                        sent = w;
                        Ok(())
                    }
                    Some(_) if w > bounds.max => Err(PeerError::AckBeyondEnd { ack: w, end: bounds.max }),
                    Some(_) if w > sent => Err(PeerError::AckBeyondSent { ack: w, sent }),
                    Some(a) if w < a => Err(PeerError::AckWentBackwards { ack: w, previous: a }),
                    Some(_) => Ok(()),
                }
            };
            if let Err(e) = verdict {
                expected = Err(e);
                break;
            }
            if ack.is_none_or(|a| w > a) {
                changed = Some(w);
            }
            ack = Some(ack.map_or(w, |a| a.max(w)));
        }
        c.partial.drain(..words * REPORT_LEN);
        c.reported = reported;
        let expected = expected.map(|()| changed);
        let first_report = info.ack.is_none();
        let peer_errors = self.master.driver.as_ref().map_or(0, |d| d.peer_errors());
        let implausible = self.master.driver.as_ref().map_or(0, |d| d.refusals().implausible_reports);
        let closes = self.closes;
        self.master_received_call(conn, chunk)?;
        let driver = self.master.driver.as_ref().expect("the master does not crash while receiving");
        let raised = driver.peer_errors() - peer_errors;
        let core = driver.master();
        let now_info = core.slaves().find(|s| s.conn.0 == conn);
        let got = match raised {
            0 => Ok(changed.and(now_info.and_then(|i| i.ack))),
            1 => Err("refused the connection with a protocol error"),
            _ => Err("raised several protocol errors for one read"),
        };
        let consistent = match (&expected, &got) {
            (Err(_), Err(_)) => raised == 1 && now_info.is_none(),
            (Ok(a), Ok(b)) => a == b && now_info.is_some(),
            _ => false,
        };
        if !consistent {
            return Err(Violation::ReportHandling { conn, expected, got: got.map_err(String::from) });
        }
        let c = self.conns.get(&conn).expect("delivering on it");
        let (peer, address) = (c.peer, c.address);
        // Another connection from this host closed by a first report: the driver evicted an
        // older connection of the same replica.
        if first_report && changed.is_some() {
            self.stats.stale_connections_closed += self.closes - closes;
        }
        match expected {
            Ok(Some(_)) if first_report => {
                // A trusted replica reported a position in this log: it counts for the fence.
                self.hear(conn, address);
            }
            Ok(_) => {}
            Err(error) => {
                self.rec(Node::Master, "refused report", conn, 0, Detail::Peer(error));
                self.refused_report(conn, peer, address, error, implausible)?;
            }
        }
        Ok(())
    }

    /// The fence model hears a trusted peer: a slave's host once, a loopback connection while
    /// up; a stranger is no replica, whatever the allow-list trusts.
    fn hear(&mut self, conn: u64, address: SocketAddr) {
        if !self.conns.get(&conn).is_some_and(|c| matches!(c.peer, Peer::Slave { .. })) {
            return;
        }
        let ip = address.ip();
        let who = if ip.is_loopback() { Heard::LoopbackConn(conn) } else { Heard::Host(ip) };
        if self.master.fence.hear(who) {
            self.stats.fence_reports_again += 1;
        }
    }

    /// What a refused report must have done: counted, fenced, or taken a slave out of service.
    fn refused_report(
        &mut self,
        conn: u64,
        peer: Peer,
        address: SocketAddr,
        error: PeerError,
        implausible_before: u64,
    ) -> R {
        match error {
            PeerError::SlaveAhead { .. } => self.stats.slave_ahead += 1,
            PeerError::SlaveBehindRetention { .. } => self.stats.slave_behind_retention += 1,
            PeerError::AckBeyondEnd { .. } => self.stats.ack_beyond_end += 1,
            PeerError::AckBeyondSent { .. } => self.stats.ack_beyond_sent += 1,
            PeerError::AckWentBackwards { .. } => self.stats.ack_went_backwards += 1,
            PeerError::Frame(_) => self.stats.frame_errors += 1,
            PeerError::OffsetMismatch { .. } => self.stats.offset_mismatches += 1,
            // Neither is expected from reports: records are not checked, and the slave side
            // raises the other.
            PeerError::SlaveDiverged { .. } | PeerError::FirstOffsetTooLarge { .. } => {}
        }
        match error {
            // Every admitted connection is trusted (the allow-list): one ahead of the master
            // fences it until it restarts, unless its report is no real offset.
            PeerError::SlaveAhead { reported, end } => {
                let driver = self.master.driver.as_ref().expect("receiving");
                if reported.saturating_sub(end) >= crate::service::IMPLAUSIBLE_AHEAD {
                    if driver.refusals().implausible_reports != implausible_before + 1 {
                        return Err(Violation::FenceDiffers {
                            expected: "an implausible report counted, and no fence".into(),
                            got: format!("{:?}", driver.fence()),
                        });
                    }
                } else {
                    let fence = Fence::Diverged { slave: address, reported, end };
                    self.master.fence.diverged = Some(fence);
                    self.master.fence.needed = 0;
                    self.master.fence.heard.clear();
                }
            }
            PeerError::SlaveBehindRetention { .. } => self.hear(conn, address),
            _ => {}
        }
        if let Peer::Intruder { .. } = peer {
            self.stats.intruders_refused += 1;
        }
        if let Peer::Slave { idx, inc } = peer {
            let s = &self.slaves[idx];
            if s.inc == inc && s.ended_with.is_none() {
                match error {
                    PeerError::SlaveAhead { .. } | PeerError::SlaveBehindRetention { .. } => {
                        if matches!(error, PeerError::SlaveAhead { .. }) {
                            self.stats.slaves_refused_ahead += 1;
                        } else {
                            self.stats.slaves_refused_behind_retention += 1;
                        }
                        self.quarantine.push((idx, error));
                    }
                    // An honest slave never sends these.
                    _ => return Err(Violation::FalseAccusation { slave: idx, error }),
                }
            }
        }
        Ok(())
    }
}
