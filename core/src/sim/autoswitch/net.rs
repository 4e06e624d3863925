//! The network between the brokers: connections as ordered pipes with latency, jitter and
//! reads split anywhere, partitions, and resets.

use super::*;

impl AutoSwitchSim {
    pub(super) fn connect_done(&mut self, b: usize, rid: u64, attempt: u64) -> R {
        let now = self.at();
        let Role::Slave(s) = &self.brokers[b].role else { return Ok(()) };
        if s.rid != rid || s.attempt != Some(attempt) {
            return Ok(());
        }
        let m = idx_of(s.master);
        let reachable = !self.brokers[b].peers_cut(self.now) && !self.brokers[m].peers_cut(self.now);
        let master_rid = match &self.brokers[m].role {
            Role::Master(mr) if reachable => Some(mr.rid),
            _ => None,
        };
        let Some(master_rid) = master_rid else {
            if let Role::Slave(s) = &mut self.brokers[b].role {
                s.attempt = None;
                s.driver.closed(now);
            }
            return self.slave_drive(b);
        };
        let conn = self.next_conn;
        self.next_conn += 1;
        self.conns.insert(
            conn,
            Conn {
                slave: b,
                slave_rid: rid,
                master: m,
                master_rid,
                pipes: [VecDeque::new(), VecDeque::new()],
                last_ready: [0, 0],
                scheduled: [false, false],
                master_open: true,
                slave_open: true,
            },
        );
        self.rec(&Self::name(b), "connected", id_of(m) as u64, conn);
        if let Role::Master(mr) = &mut self.brokers[m].role {
            let sink = SimConn { conn, outbox: mr.outbox.clone() };
            mr.driver.accept(now, ConnId(conn), SocketAddr::new(ip(b), 40000 + conn as u16), sink);
        }
        self.master_run(m)?;
        if let Role::Slave(s) = &mut self.brokers[b].role {
            s.attempt = None;
            s.conn = Some(conn);
            s.driver.connected(now);
        }
        self.slave_drive(b)
    }

    pub(super) fn send(&mut self, conn: u64, dir: usize, seg: Seg) {
        let delay = self.link_delay();
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return };
        let ready = (now + delay).max(c.last_ready[dir]);
        c.last_ready[dir] = ready;
        c.pipes[dir].push_back((ready, seg));
        if !c.scheduled[dir] {
            c.scheduled[dir] = true;
            self.schedule(ready, Ev::Deliver { conn, dir });
        }
    }

    pub(super) fn deliver(&mut self, conn: u64, dir: usize) -> R {
        let now = self.now;
        let Some(c) = self.conns.get_mut(&conn) else { return Ok(()) };
        c.scheduled[dir] = false;
        let (slave, master) = (c.slave, c.master);
        // The receiver is still there, on this connection.
        let alive = if dir == TO_SLAVE {
            c.slave_open
                && matches!(&self.brokers[slave].role, Role::Slave(s) if s.rid == c.slave_rid && s.conn == Some(conn))
        } else {
            c.master_open && matches!(&self.brokers[master].role, Role::Master(m) if m.rid == c.master_rid)
        };
        if !alive {
            c.pipes[dir].clear();
            if c.pipes[TO_MASTER].is_empty()
                && c.pipes[TO_SLAVE].is_empty()
                && !c.master_open
                && !c.slave_open
            {
                self.conns.remove(&conn);
            }
            return Ok(());
        }
        let cut = self.brokers[slave].cut_peers.max(self.brokers[master].cut_peers);
        let Some(&(ready, _)) = c.pipes[dir].front() else { return Ok(()) };
        let mut wait_until = ready.max(if cut > now { cut } else { 0 });
        if dir == TO_SLAVE {
            if let Role::Slave(s) = &self.brokers[slave].role {
                if !s.driver.wants_read() {
                    wait_until = wait_until.max(now + MS);
                }
            }
        }
        if wait_until > now {
            c.scheduled[dir] = true;
            self.schedule(wait_until, Ev::Deliver { conn, dir });
            return Ok(());
        }
        let (_, seg) = c.pipes[dir].pop_front().expect("peeked");
        let seg = match seg {
            Seg::Data(mut data) => {
                let chunk = self.rng.range(1, self.d.faults.max_read_chunk.min(1 << 20) as u64 + 1) as usize;
                if data.len() > chunk {
                    let rest = data.split_off(chunk);
                    c.pipes[dir].push_front((now, Seg::Data(rest)));
                }
                Seg::Data(data)
            }
            Seg::Fin => Seg::Fin,
        };
        if let Some(&(next, _)) = c.pipes[dir].front() {
            c.scheduled[dir] = true;
            self.schedule(next.max(now), Ev::Deliver { conn, dir });
        }
        let at = self.at();
        if dir == TO_SLAVE {
            let Role::Slave(s) = &mut self.brokers[slave].role else { return Ok(()) };
            match seg {
                Seg::Data(data) => s.driver.received(at, data),
                Seg::Fin => {
                    s.conn = None;
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.slave_open = false;
                    }
                    s.driver.closed(at);
                }
            }
            self.slave_drive(slave)
        } else {
            let Role::Master(m) = &mut self.brokers[master].role else { return Ok(()) };
            match seg {
                Seg::Data(data) => m.driver.received(at, ConnId(conn), data),
                Seg::Fin => {
                    if let Some(c) = self.conns.get_mut(&conn) {
                        c.master_open = false;
                    }
                    m.driver.closed(at, ConnId(conn));
                }
            }
            self.master_run(master)
        }
    }

    pub(super) fn reset(&mut self, conn: u64) -> R {
        let Some(c) = self.conns.get_mut(&conn) else { return Ok(()) };
        c.pipes[TO_MASTER].clear();
        c.pipes[TO_SLAVE].clear();
        let (slave, master, sg, mg) = (c.slave, c.master, c.slave_rid, c.master_rid);
        let (so, mo) = (c.slave_open, c.master_open);
        c.slave_open = false;
        c.master_open = false;
        self.stats.connection_resets += 1;
        self.rec("FAULT", "reset", conn, 0);
        let at = self.at();
        if so {
            if let Role::Slave(s) = &mut self.brokers[slave].role {
                if s.rid == sg && s.conn == Some(conn) {
                    s.conn = None;
                    s.driver.closed(at);
                    self.slave_drive(slave)?;
                }
            }
        }
        if mo {
            if let Role::Master(m) = &mut self.brokers[master].role {
                if m.rid == mg {
                    m.driver.closed(at, ConnId(conn));
                    self.master_run(master)?;
                }
            }
        }
        Ok(())
    }
}
