//! Forged-ack intruders: peers that connect to the master and send honest and forged reports.

use super::*;

impl Simulation {
    pub(super) fn intruder_received(&mut self, id: u64, conn: u64, chunk: Bytes) {
        let Some(x) = self.intruders.get_mut(&id) else { return };
        x.decoder.extend(chunk);
        loop {
            match x.decoder.decode() {
                Ok(Some(push)) => {
                    let end = push.offset + push.body.len() as u64;
                    x.received = Some(x.received.map_or(end, |r| r.max(end)));
                }
                Ok(None) => return,
                Err(_) => {
                    self.peer_side_down(conn, Teardown::Fin);
                    return;
                }
            }
        }
    }

    pub(super) fn intruder_connect(&mut self) -> R {
        if self.master.driver.is_none() || self.intruders.len() >= 2 {
            return Ok(());
        }
        let id = self.next_intruder;
        self.next_intruder += 1;
        // A stranger on the replicas' network (admitted and trusted, as the allow-list says), or
        // from outside it (refused at accept).
        let fenced =
            self.master.driver.as_ref().is_some_and(|d| matches!(d.fence(), Some(Fence::Restart { .. })));
        let trusted = self.rng.chance(0.7) && (!fenced || self.cfg.trusted_strangers_during_restart);
        let ip = if trusted {
            Ipv4Addr::new(10, 0, 0, 100 + (id % 100) as u8)
        } else {
            Ipv4Addr::new(192, 0, 2, 1 + (id % 200) as u8)
        };
        let conn = self.open_conn(Peer::Intruder { id }, SocketAddr::new(IpAddr::V4(ip), 0));
        let acts_left = self.rng.range(1, 12) as u32;
        self.intruders.insert(
            id,
            Intruder {
                conn,
                decoder: PushDecoder::new(i32::MAX as u32),
                received: None,
                last_ack: None,
                acts_left,
            },
        );
        self.stats.intruders += 1;
        self.rec(Node::Intruder(id), "connects", conn, 0, Detail::None);
        let not_admitted = self.master.driver.as_ref().map_or(0, |d| d.refusals().not_admitted);
        self.master_call(MasterCall::Accepted { conn })?;
        if self.master.driver.as_ref().is_some_and(|d| d.refusals().not_admitted > not_admitted) {
            self.stats.intruders_outside_allow_list += 1;
        }
        let at = self.now + self.between(MS, 100 * MS);
        self.schedule(at, Ev::Intruder { id });
        Ok(())
    }

    pub(super) fn intruder_act(&mut self, id: u64) -> R {
        let Some(x) = self.intruders.get(&id) else { return Ok(()) };
        let conn = x.conn;
        if !self.conns.get(&conn).is_some_and(|c| c.peer_open) {
            self.intruders.remove(&id);
            return Ok(());
        }
        if x.acts_left == 0 || self.phase == Phase::Quiet {
            self.rec(Node::Intruder(id), "leaves", conn, 0, Detail::None);
            self.peer_side_down(conn, Teardown::Fin);
            self.intruders.remove(&id);
            return Ok(());
        }
        let end = self.master.store.end().max(self.master.store.min());
        let min = self.master.store.min();
        let (last, received) = (x.last_ack, x.received);
        let wire: Vec<u8> = match (last, self.rng.below(7)) {
            // First report: empty, plausible, ahead of the master, or garbage.
            (None, 0 | 1) => 0u64.to_be_bytes().to_vec(),
            (None, 2 | 3) => {
                let w = self.rng.range(min, end);
                let mut wire = w.to_be_bytes().to_vec();
                if w < end && self.rng.chance(0.5) {
                    // In the same packet, an ack of bytes not sent yet (the stream starts at `w`).
                    wire.extend_from_slice(&self.rng.range(w + 1, end).to_be_bytes());
                }
                wire
            }
            (None, 4 | 5) => (end + self.rng.range(1, 1 << 20)).to_be_bytes().to_vec(),
            (_, 6) => (0..self.rng.range(1, 20)).map(|_| self.rng.next_u64() as u8).collect(),
            (None, _) => u64::MAX.to_be_bytes().to_vec(),
            // Later: an honest ack of what it received, or a forgery the master must refute.
            (Some(a), 0 | 1) => received.unwrap_or(a).max(a).to_be_bytes().to_vec(),
            (Some(_), 2) => (end + self.rng.range(1 << 20, 1 << 30)).to_be_bytes().to_vec(),
            (Some(a), 3) if a > 0 => (a - self.rng.range(1, a)).to_be_bytes().to_vec(),
            // The master's end: beyond what it has sent, unless it is caught up (then a lie the
            // protocol cannot tell from the truth).
            (Some(_), 3 | 4) => end.to_be_bytes().to_vec(),
            // Beyond what it received, within the end: beyond what was sent, unless the rest is
            // still in flight (then a lie the protocol cannot refute).
            (Some(a), _) if self.rng.chance(0.5) && received.is_some_and(|r| r.max(a) < end) => {
                let r = received.unwrap_or(a).max(a);
                self.rng.range(r + 1, end).to_be_bytes().to_vec()
            }
            (Some(_), _) => (MAX_WIRE_OFFSET + 1 + self.rng.below(1 << 20)).to_be_bytes().to_vec(),
        };
        if wire.len() % REPORT_LEN == 0 {
            for word in wire.chunks_exact(REPORT_LEN) {
                let w = u64::from_be_bytes(word.try_into().expect("8 bytes"));
                if w <= MAX_WIRE_OFFSET {
                    let x = self.intruders.get_mut(&id).expect("present");
                    x.last_ack = Some(x.last_ack.map_or(w, |a| a.max(w)));
                }
            }
        }
        let x = self.intruders.get_mut(&id).expect("present");
        x.acts_left -= 1;
        self.stats.intruder_reports += 1;
        self.rec(Node::Intruder(id), "sends", conn, wire.len() as u64, Detail::None);
        self.send(conn, Dir::ToMaster, Bytes::from(wire));
        let at = self.now + self.between(5 * MS, 300 * MS);
        self.schedule(at, Ev::Intruder { id });
        Ok(())
    }
}
