//! The synchronous halves of the adapters' tasks: what a master service's core task and a
//! slave service's task decide, written once. An adapter's task only waits (on its channel,
//! its timer, its sockets) and hands each wake-up to one of these.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::time::Instant;

use bytes::Bytes;
use tracing::{debug, info, warn};

use super::*;
use crate::log::{MessageLog, Offset};
use crate::service::tls::Link;
use crate::{BrokerRole, ConnId};

/// How long an adapter's accept loop pauses after a failed accept (out of descriptors, say)
/// before it accepts again.
pub const ACCEPT_RETRY: Duration = Duration::from_millis(100);

/// Commands a master task applies in one turn at most; the rest wait for the next turn, so
/// a flood of commands cannot keep the task from its timer and from publishing the fence.
pub const MAX_BATCH: usize = 1024;

/// What a master service's handles and connection tasks send to its core task: a driver
/// command, or the service's shutdown. `R` is the adapter's reply for a finished shutdown.
pub enum TaskCommand<C, W, S, R> {
    /// For the driver.
    Driver(MasterCommand<C, W, S>),
    /// Reply with a status once enough slaves are in sync, or with the last status when the
    /// wait's time is up ([`InSyncWait::outcome`] tells which); dropped unanswered if the
    /// service stops first.
    InSync {
        /// The wait.
        wait: InSyncWait,
        /// Where the status goes.
        reply: S,
    },
    /// Stop: stop accepting, let pending replication waits end (each by its deadline), flush
    /// the log, close every connection, then reply.
    Shutdown(R),
    /// Controller mode: apply this sync-state-set (an operator's or a coordinator's decision;
    /// the master is always a member). Ignored by a classic master.
    SetSyncStateSet {
        /// The members.
        set: std::collections::BTreeSet<crate::autoswitch::BrokerId>,
        /// The epoch of the set.
        epoch: i32,
    },
    /// [`SetSyncStateSet`](Self::SetSyncStateSet), then reply with the status as it is right
    /// after (which shows whether the set was applied).
    SetSyncStateSetAndReport {
        /// The members.
        set: std::collections::BTreeSet<crate::autoswitch::BrokerId>,
        /// The epoch of the set.
        epoch: i32,
        /// Where the status goes.
        reply: S,
    },
}

impl<C, W, S, R> From<MasterCommand<C, W, S>> for TaskCommand<C, W, S, R> {
    fn from(command: MasterCommand<C, W, S>) -> Self {
        Self::Driver(command)
    }
}

impl<C, W, S, R> TaskCommand<C, W, S, R> {
    /// [`MasterCommand::Accepted`].
    pub fn accepted(conn: ConnId, peer: SocketAddr, sink: C) -> Self {
        Self::Driver(MasterCommand::Accepted { conn, peer, sink })
    }

    /// [`MasterCommand::Negotiated`].
    pub fn negotiated(conn: ConnId, link: Link) -> Self {
        Self::Driver(MasterCommand::Negotiated { conn, link })
    }

    /// [`MasterCommand::Received`].
    pub fn received(conn: ConnId, data: Bytes) -> Self {
        Self::Driver(MasterCommand::Received { conn, data })
    }

    /// [`MasterCommand::Sent`].
    pub fn sent(conn: ConnId) -> Self {
        Self::Driver(MasterCommand::Sent { conn })
    }

    /// [`MasterCommand::Closed`].
    pub fn closed(conn: ConnId) -> Self {
        Self::Driver(MasterCommand::Closed { conn })
    }

    /// [`MasterCommand::Status`].
    pub fn status(reply: S) -> Self {
        Self::Driver(MasterCommand::Status { reply })
    }
}

/// The state a master service's core task owns: the [`MasterDriver`], the log, and the
/// [`PutGate`] it shares with the service's handles. The adapter's task loops: wait for a
/// wake-up (commands, an append, the timer), hand it over ([`apply_batch`](Self::apply_batch),
/// [`appended`](Self::appended), [`timer`](Self::timer)), stop accepting once
/// [`is_stopping`](Self::is_stopping), then [`settle`](Self::settle) and sleep until the instant
/// it returns; when it returns `None`, make the log durable up to
/// [`flush_target`](Self::flush_target) and [`finish`](Self::finish).
pub struct MasterTask<L, C, W, S, R> {
    driver: Box<dyn MasterProtocol<C, W>>,
    /// In-sync waits, answered by [`settle`](Self::settle).
    in_sync: Vec<(InSyncWait, S)>,
    log: Arc<L>,
    role: BrokerRole,
    gate: Arc<PutGate>,
    /// Shutdown replies waiting; not empty once a shutdown was asked.
    stopping: Vec<R>,
    deadline: Instant,
    /// The replication waits of the handles' puts, taken at the start of every turn.
    waits: Arc<WaitQueue<W>>,
}

/// A task dropped without [`finish`](MasterTask::finish) (its adapter's task panicked or was
/// cancelled) refuses later waits, and drops those queued: each put ends as cancelled.
impl<L, C, W, S, R> Drop for MasterTask<L, C, W, S, R> {
    fn drop(&mut self) {
        drop(self.waits.close());
    }
}

impl<L: MessageLog, C: ConnSink, W: WaitSink, S: Reply<MasterStatus>, R: Reply<()>>
    MasterTask<L, C, W, S, R>
{
    /// The task of a master service over `log`: `config` is checked against the log (the
    /// authority for the settings they share), the driver built, and its first outputs done.
    pub fn start(config: &MasterServiceConfig, now: Instant, log: Arc<L>) -> Result<Self, StartError>
    where
        C: Send + 'static,
        W: Send + 'static,
    {
        config.validate_with(&*log)?;
        let mut driver = master_driver(config, now, log.clone())?;
        let lease = config.controller.as_ref().and_then(|c| c.lease.clone());
        let gate = Arc::new(PutGate::new(driver.fence().is_some()).with_lease(lease));
        let deadline = driver.drain();
        let in_sync = Vec::new();
        let waits = Arc::new(WaitQueue::default());
        Ok(Self { driver, in_sync, log, role: config.role, gate, stopping: Vec::new(), deadline, waits })
    }

    /// The queue the service's handles put their replication waits in ([`WaitQueue`]); a push
    /// that asks for it wakes the task as an append does ([`MasterWake::Appended`]).
    pub fn wait_queue(&self) -> &Arc<WaitQueue<W>> {
        &self.waits
    }

    /// Registers every queued replication wait with the driver, in one go: the log's bounds are
    /// read once, after the last of their puts appended.
    pub fn take_waits(&mut self, now: Instant) {
        let waits = self.waits.take();
        self.register(now, waits);
    }

    fn register(&mut self, now: Instant, waits: Vec<QueuedWait<W>>) {
        for QueuedWait { offset, deadline, reply } in waits {
            let wait = MasterCommand::<C, W, S>::Wait { offset, deadline, reply };
            apply(&mut *self.driver, now, wait, &*self.log, self.role);
        }
    }

    /// The gate the service's handles ask before every put.
    pub fn gate(&self) -> &Arc<PutGate> {
        &self.gate
    }

    /// The driver: classic, or AutoSwitch in controller mode.
    pub fn driver(&self) -> &dyn MasterProtocol<C, W> {
        &*self.driver
    }

    /// The log.
    pub fn log(&self) -> &Arc<L> {
        &self.log
    }

    /// When to call [`timer`](Self::timer) next, as of the last [`settle`](Self::settle).
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Applies `first` and then whatever `more` yields (an adapter's non-blocking receive),
    /// until it yields `None` or [`MAX_BATCH`] commands are applied.
    pub fn apply_batch(
        &mut self,
        now: Instant,
        first: TaskCommand<C, W, S, R>,
        mut more: impl FnMut() -> Option<TaskCommand<C, W, S, R>>,
    ) {
        let mut next = Some(first);
        let mut applied = 0;
        while let Some(command) = next {
            match command {
                TaskCommand::Shutdown(reply) => {
                    self.gate.stop();
                    self.stopping.push(reply);
                }
                TaskCommand::Driver(c) => apply(&mut *self.driver, now, c, &*self.log, self.role),
                TaskCommand::InSync { wait, reply } => self.in_sync.push((wait, reply)),
                TaskCommand::SetSyncStateSet { set, epoch } => {
                    if let Err(e) = self.driver.set_sync_state_set(now, set, epoch) {
                        warn!(%e, "sync-state-set refused");
                    }
                }
                TaskCommand::SetSyncStateSetAndReport { set, epoch, reply } => {
                    if let Err(e) = self.driver.set_sync_state_set(now, set, epoch) {
                        warn!(%e, "sync-state-set refused");
                    }
                    self.driver.log_changed(now, self.log.bounds());
                    reply.send(self.driver.status(now, self.role, self.log.flushed()));
                }
            }
            applied += 1;
            next = if applied < MAX_BATCH { more() } else { None };
        }
    }

    /// A put appended to the log without waiting for slaves: the driver follows the log now,
    /// so the frame goes out at once.
    pub fn appended(&mut self, now: Instant) {
        self.driver.log_changed(now, self.log.bounds());
    }

    /// The instant [`settle`](Self::settle) returned has come (early calls are harmless).
    pub fn timer(&mut self, now: Instant) {
        self.driver.log_changed(now, self.log.bounds());
        self.driver.handle_timeout(now);
    }

    /// Whether a shutdown was asked: the adapter stops accepting connections.
    pub fn is_stopping(&self) -> bool {
        !self.stopping.is_empty()
    }

    /// Ends a turn at `now`: performs every pending output, publishes the fence into the put
    /// gate, answers the in-sync waits that are over, and returns when to call
    /// [`timer`](Self::timer), or `None` once the task should stop (a shutdown was asked and no
    /// replication wait is left).
    pub fn settle(&mut self, now: Instant) -> Option<Instant> {
        self.deadline = self.driver.drain();
        loop {
            // Puts need not wake the task while it is sure to wake anyway (see `WaitQueue`);
            // when they must, waits queued during this turn are taken now.
            let quiet = !self.is_stopping() && self.driver.wakes_without_puts();
            let missed = self.waits.rearm(!quiet);
            if missed.is_empty() {
                break;
            }
            self.register(now, missed);
            self.deadline = self.driver.drain();
        }
        self.gate.publish(self.driver.fence());
        if !self.in_sync.is_empty() {
            let status = self.driver.status(now, self.role, self.log.flushed());
            let (over, waiting) = std::mem::take(&mut self.in_sync)
                .into_iter()
                .partition(|(wait, _)| wait.is_over(now, &status));
            self.in_sync = waiting;
            for (_, reply) in over {
                reply.send(status.clone());
            }
        }
        if self.is_stopping() && self.driver.pending_waits() == 0 {
            return None;
        }
        let first_in_sync = self.in_sync.iter().map(|(wait, _)| wait.deadline()).min();
        Some(first_in_sync.map_or(self.deadline, |at| at.min(self.deadline)))
    }

    /// The offset to make durable before [`finish`](Self::finish): the end of the log.
    pub fn flush_target(&self) -> Offset {
        self.log.bounds().max
    }

    /// Stops: closes every connection, cancels what waits are left, and answers every
    /// shutdown. `flushed` tells whether the log became durable up to
    /// [`flush_target`](Self::flush_target) in time (within `sync_flush_timeout`).
    pub fn finish(mut self, flushed: bool) {
        if !flushed {
            warn!(end = self.flush_target(), "flush at shutdown did not finish in time");
        }
        self.gate.stop();
        for wait in self.waits.close() {
            wait.reply.complete(Err(crate::error::WaitError::Cancelled));
        }
        self.driver.shutdown();
        info!("HA master stopped");
        for reply in std::mem::take(&mut self.stopping) {
            reply.send(());
        }
    }
}

/// What a slave service's handles send to its task.
pub enum SlaveCommand<S, R> {
    /// A status snapshot is wanted.
    Status(S),
    /// Stop: close the connection, flush the log, then reply.
    Shutdown(R),
}

/// What a slave task must do next that needs the runtime.
#[derive(Debug, PartialEq, Eq)]
pub enum SlaveIo<'a, S> {
    /// Start connecting to the master ([`SlaveTask::config`]: address, TLS, connect timeout);
    /// hand the outcome to [`SlaveTask::connect_done`].
    Connect,
    /// Write these bytes on the connection in one write and flush it, within
    /// [`SlaveTask::send_timeout`]; hand the outcome to [`SlaveTask::send_done`]. Any length:
    /// a classic report is 8 bytes, an AutoSwitch handshake 16 and an ack 12.
    Send(Bytes, &'a mut S),
    /// Run `LogWrite::flush` off the async threads; hand the outcome to
    /// [`SlaveTask::flush_done`].
    Flush,
    /// Nothing more until this instant, a read, a connect or a flush outcome.
    SleepUntil(Instant),
}

/// The state a slave service's task owns: the driver (the classic [`SlaveDriver`], or in
/// controller mode the [`AutoSwitchSlaveDriver`], run as a [`SlaveProtocol`]) and the connection `S` (the
/// adapter's stream, which this never reads or writes). The adapter performs the
/// [`SlaveIo`]s ([`next_action`](Self::next_action)), reads from [`stream`](Self::stream) while
/// [`wants_read`](Self::wants_read), and hands every outcome back (`*_done`), which decides
/// whether the connection stays up.
pub struct SlaveTask<L, S> {
    driver: Box<dyn SlaveProtocol>,
    config: SlaveServiceConfig,
    log: Arc<L>,
    stream: Option<S>,
}

impl<L: crate::LogWrite, S> SlaveTask<L, S> {
    /// The task of a slave service that replicates from `config.master_address` into `log`,
    /// with the AutoSwitch protocol when `config.controller` is set (refused over a log that
    /// keeps no epochs: [`StartError::NoEpochLog`]).
    pub fn start(config: SlaveServiceConfig, now: Instant, log: Arc<L>) -> Result<Self, StartError> {
        let driver = slave_driver(&config, now, log.clone())?;
        Ok(Self { driver, config, log, stream: None })
    }

    /// The configuration: the master's address, the connect timeout, TLS.
    pub fn config(&self) -> &SlaveServiceConfig {
        &self.config
    }

    /// The log, for the adapter's flushes off its async threads.
    pub fn log(&self) -> &Arc<L> {
        &self.log
    }

    /// The driver.
    pub fn driver(&self) -> &dyn SlaveProtocol {
        &*self.driver
    }

    /// The connection to the master, while there is one.
    pub fn stream(&mut self) -> Option<&mut S> {
        self.stream.as_mut()
    }

    /// How long a report write may take before the connection counts as dead.
    pub fn send_timeout(&self) -> Duration {
        self.config.core.housekeeping_interval
    }

    /// The next thing to do that needs the runtime. Performs what needs none on the way:
    /// appends (see [`SlaveDriver::next_action`]), dropping the connection when the driver
    /// closes it, and dropping a report when there is no connection to send it on.
    pub fn next_action(&mut self, now: Instant) -> SlaveIo<'_, S> {
        loop {
            match self.driver.next_action(now) {
                SlaveAction::Connect => return SlaveIo::Connect,
                SlaveAction::Send(report) if self.stream.is_some() => {
                    return SlaveIo::Send(report, self.stream.as_mut().expect("checked just above"));
                }
                SlaveAction::Send(_) => {}
                SlaveAction::Flush => return SlaveIo::Flush,
                SlaveAction::Disconnect => self.stream = None,
                SlaveAction::SleepUntil(at) => return SlaveIo::SleepUntil(at),
            }
        }
    }

    /// Whether to read from the connection now: there is one, and the driver has room.
    pub fn wants_read(&self) -> bool {
        self.stream.is_some() && self.driver.wants_read()
    }

    /// Answers a status command, or, for a shutdown, closes the connection and returns the
    /// reply, which the adapter hands to [`stopped`](Self::stopped) after the last flush.
    pub fn command<T: Reply<SlaveStatus>, R>(
        &mut self,
        now: Instant,
        command: SlaveCommand<T, R>,
    ) -> Option<R> {
        match command {
            SlaveCommand::Status(reply) => {
                reply.send(self.driver.status(now));
                None
            }
            SlaveCommand::Shutdown(reply) => {
                self.stream = None;
                Some(reply)
            }
        }
    }

    /// A `Connect` ended: the connection, or why there is none.
    pub fn connect_done(&mut self, now: Instant, result: io::Result<S>) {
        match result {
            Ok(stream) => {
                debug!(tls = self.config.tls.is_some(), "connected to master");
                self.stream = Some(stream);
                self.driver.connected(now);
            }
            Err(e) => {
                warn!(error = %e, "cannot connect to master");
                self.driver.closed(now);
            }
        }
    }

    /// A read ended with these bytes (empty at the end of the stream) or an error.
    pub fn read_done(&mut self, now: Instant, result: io::Result<Bytes>) {
        match result {
            Ok(data) if !data.is_empty() => self.driver.received(now, data),
            Ok(_) => self.closed(now, "the master closed the connection"),
            Err(e) => self.closed(now, &e.to_string()),
        }
    }

    /// A `Send` ended: written, failed, or (`None`) not done within
    /// [`send_timeout`](Self::send_timeout).
    pub fn send_done(&mut self, now: Instant, result: Option<io::Result<()>>) {
        match result {
            Some(Ok(())) => {}
            Some(Err(e)) => self.closed(now, &format!("report failed: {e}")),
            None => self.closed(now, "report timed out"),
        }
    }

    /// A `Flush` ended.
    pub fn flush_done<E: std::fmt::Display>(&mut self, now: Instant, result: Result<Offset, E>) {
        self.driver.flushed(now, result.map_err(|e| e.to_string()));
    }

    /// The instant of the last `SleepUntil` has come.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.driver.handle_timeout(now);
    }

    /// The task stopped and its last flush ended with `flushed`; answers the shutdown, if one
    /// was asked.
    pub fn stopped<E: std::fmt::Display, R: Reply<()>>(self, flushed: Result<Offset, E>, reply: Option<R>) {
        match flushed {
            Ok(end) => info!(end, "slave stopped"),
            Err(e) => warn!(%e, "flush at shutdown failed"),
        }
        if let Some(reply) = reply {
            reply.send(());
        }
    }

    fn closed(&mut self, now: Instant, why: &str) {
        info!(why, "connection to master ended");
        self.stream = None;
        self.driver.closed(now);
    }
}
