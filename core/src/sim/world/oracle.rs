//! The invariants checked after every step, and the liveness condition.

use super::*;

impl Simulation {
    /// The invariants that hold after every step.
    pub(super) fn check(&mut self) -> R {
        for (i, s) in self.slaves.iter().enumerate() {
            let Some(core) = s.core() else { continue };
            let view = |what, value: u64, limit: u64| {
                if value > limit {
                    Err(Violation::SlaveView { slave: i, what, value, limit })
                } else {
                    Ok(())
                }
            };
            view("stored end beyond the log's", core.end(), s.store.end())?;
            view("durable end beyond the log's", core.flushed(), s.store.durable())?;
            let limit = match s.config.ack_on {
                AckOn::Written => s.store.end(),
                AckOn::Flushed => s.store.durable(),
            };
            if let Some(r) = core.reported() {
                if r > limit {
                    return Err(Violation::ReportBeyondStored {
                        slave: i,
                        report: r,
                        stored: s.store.end(),
                        durable: s.store.durable(),
                    });
                }
            }
            if !s.prefix_ok() && s.ended_with.is_none() {
                if let Some(conn) = s.conn {
                    if self.conns.get(&conn).is_some_and(|c| c.started && c.master_open) {
                        return Err(Violation::DivergedSlaveAccepted {
                            slave: i,
                            reported: core.reported().unwrap_or(0),
                            valid_end: s.valid_end,
                        });
                    }
                }
            }
        }
        if let Some(core) = self.master.core() {
            let end = core.log_bounds().max;
            for info in core.slaves() {
                let conn = info.conn.0;
                let reported = self.conns.get(&conn).and_then(|c| c.reported);
                let view = |what, value: u64, limit: u64| {
                    if value > limit {
                        Err(Violation::MasterView { conn, what, value, limit })
                    } else {
                        Ok(())
                    }
                };
                view("sent beyond the log's end", info.sent, end)?;
                let transmitted = self.conns.get(&conn).map_or(0, |c| c.body_bytes);
                if info.bytes_sent != transmitted {
                    return Err(Violation::MasterView {
                        conn,
                        what: "bytes_sent differs from the body bytes transmitted",
                        value: info.bytes_sent,
                        limit: transmitted,
                    });
                }
                view(
                    "inflight beyond max_inflight",
                    u64::from(info.inflight),
                    u64::from(self.master.config.max_inflight),
                )?;
                if let Some(ack) = info.ack {
                    view("ack beyond what the peer reported", ack, reported.unwrap_or(0))?;
                    view("ack beyond sent", ack, info.sent)?;
                }
            }
            // A wait the frontier already covers must have completed in the same input.
            if let Some(frontier) = core.replicated() {
                if let Some((&id, w)) = self.waits.iter().find(|(_, w)| w.offset <= frontier) {
                    return Err(Violation::WaitBadResult {
                        id,
                        result: Ok(w.offset),
                        why: "still pending though the master's frontier covers it",
                    });
                }
            }
            if core.pending_waits() != self.waits.len() {
                return Err(Violation::MasterView {
                    conn: 0,
                    what: "pending waits differ from the waits started",
                    value: core.pending_waits() as u64,
                    limit: self.waits.len() as u64,
                });
            }
        }
        // The fence is the production driver's; the oracle's model is built from the reports.
        if let Some(driver) = self.master.driver.as_ref() {
            let expected = self.master.fence.expected();
            if driver.fence() != expected.as_ref() {
                return Err(Violation::FenceDiffers {
                    expected: format!("{expected:?}"),
                    got: format!("{:?}", driver.fence()),
                });
            }
        }
        if let Some(&(deadline, id)) = self.wait_deadlines.first() {
            if deadline < self.now {
                return Err(Violation::WaitMissedDeadline {
                    id,
                    late: Duration::from_nanos(self.now - deadline),
                });
            }
        }
        Ok(())
    }

    /// `Ok` once every slave has converged (or ended with a true typed error) and no wait is
    /// left; else what is still wrong.
    pub(super) fn convergence(&self) -> Result<(), String> {
        let Some(core) = self.master.core() else { return Err("the master is down".into()) };
        let end = core.log_bounds().max;
        if core.pending_waits() > 0 || !self.waits.is_empty() {
            return Err(format!("{} wait(s) pending", core.pending_waits().max(self.waits.len())));
        }
        for (i, s) in self.slaves.iter().enumerate() {
            if s.ended_with.is_some() {
                continue;
            }
            if !s.prefix_ok() {
                return Err(format!("slave {i} diverged at {} and was never reported", s.valid_end));
            }
            // An empty slave that `NewSlaveStart::LastFile` started exactly at the master's end
            // has nothing to hold yet, and can only report 0 until the master appends.
            let mut starts_at_end = false;
            let acked = core.slaves().any(|info| {
                let mine = self
                    .conns
                    .get(&info.conn.0)
                    .is_some_and(|c| matches!(c.peer, Peer::Slave { idx, inc } if idx == i && inc == s.inc));
                starts_at_end |= mine && s.store.is_empty() && info.start == Some(end);
                mine && (info.ack == Some(end) || (s.store.is_empty() && info.start == Some(end)))
            });
            if !s.running() || (s.store.end() != end && !starts_at_end) || !acked {
                return Err(format!(
                    "slave {i} (running {}, state {:?}) holds {}, master end {end}, master's ack for it {}",
                    s.running(),
                    s.core().map(Slave::state),
                    s.store.end(),
                    if acked { "current" } else { "missing or behind" }
                ));
            }
        }
        Ok(())
    }
}
