//! What a simulation can find: broken invariants, and the failure report that carries the seed.

use std::fmt;
use std::time::Duration;

use crate::log::Offset;
use crate::{classic::PeerError, error::WaitError};

use super::stats::Stats;

/// An invariant the simulation found broken.
#[derive(thiserror::Error, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// A core or a driver panicked. A core that refuses an input its driver fed (a driver or
    /// simulator bug) panics the driver's `debug_assert` in builds with debug assertions.
    #[error("a core panicked: {message}")]
    Panic {
        /// The panic message.
        message: String,
    },
    /// A core's `poll_output` never reached `Timeout`, or it asked for timeouts at the same
    /// instant forever.
    #[error("{node} livelocked: {what}")]
    Livelock {
        /// `master` or `slave N`.
        node: String,
        /// What kept repeating.
        what: &'static str,
    },
    /// The step limit was reached.
    #[error("step limit of {0} reached")]
    StepLimit(u64),
    /// The master emitted a transmit that breaks the span rules.
    #[error("bad transmit on connection {conn}: {reason} (offset {offset}, len {len})")]
    BadTransmit {
        /// The connection.
        conn: u64,
        /// The header's offset.
        offset: Offset,
        /// The body length.
        len: u64,
        /// Which rule.
        reason: &'static str,
    },
    /// A slave asked to append at an offset that is not its log's end.
    #[error("slave {slave} asked to append at {offset}, but its log ends at {end}")]
    AppendNotAtEnd {
        /// The slave.
        slave: usize,
        /// The offset asked for.
        offset: Offset,
        /// The log's end.
        end: Offset,
    },
    /// A slave stored bytes that differ from the master's at the same offsets.
    #[error("slave {slave} stored {len} bytes at {offset} that differ from the master's log")]
    WrongBytes {
        /// The slave.
        slave: usize,
        /// Where.
        offset: Offset,
        /// How many.
        len: u64,
    },
    /// A slave whose log is not a prefix of the master's appended more bytes: a divergence was
    /// merged silently.
    #[error("slave {slave} appended at {offset} though its log diverged from the master's at {valid_end}")]
    SilentMerge {
        /// The slave.
        slave: usize,
        /// Where it appended.
        offset: Offset,
        /// Where its log stops matching the master's.
        valid_end: Offset,
    },
    /// The master started streaming to a slave whose log is not a prefix of the master's.
    #[error(
        "master accepted slave {slave} reporting {reported}, but its log diverged from the master's at {valid_end}"
    )]
    DivergedSlaveAccepted {
        /// The slave.
        slave: usize,
        /// Its first report.
        reported: Offset,
        /// Where its log stops matching the master's.
        valid_end: Offset,
    },
    /// A slave reported more than it has stored (or made durable, with `AckOn::Flushed`).
    #[error("slave {slave} reported {report}, but has stored {stored} and made {durable} durable")]
    ReportBeyondStored {
        /// The slave.
        slave: usize,
        /// The report.
        report: Offset,
        /// Its log's end.
        stored: Offset,
        /// Its durable end.
        durable: Offset,
    },
    /// A slave sent a report while it had no connection.
    #[error("slave {slave} sent a report without a connection")]
    ReportWithoutConnection {
        /// The slave.
        slave: usize,
    },
    /// The master holds an ack above what the peer reported, or sent more than its log holds.
    #[error("master's view of connection {conn} is impossible: {what} ({value} > {limit})")]
    MasterView {
        /// The connection.
        conn: u64,
        /// Which quantity.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The bound it broke.
        limit: u64,
    },
    /// A slave core believes its log holds more than it does.
    #[error("slave {slave}'s view is impossible: {what} ({value} > {limit})")]
    SlaveView {
        /// The slave.
        slave: usize,
        /// Which quantity.
        what: &'static str,
        /// Its value.
        value: u64,
        /// The bound it broke.
        limit: u64,
    },
    /// The master handled a report differently from the protocol's rules.
    #[error("connection {conn}: expected {expected:?} from the reports, the master did {got:?}")]
    ReportHandling {
        /// The connection.
        conn: u64,
        /// What the rules say: the error, or the ack.
        expected: Result<Option<Offset>, PeerError>,
        /// What the master's driver did: the new ack, or how it refused.
        got: Result<Option<Offset>, String>,
    },
    /// The master's fence differs from what the replicas' reports call for (the restart
    /// fence lifted before enough distinct replicas reported, or stayed up after they had; a
    /// trusted replica ahead of the master did not fence it).
    #[error("the master's fence is {got}, but the reports call for {expected}")]
    FenceDiffers {
        /// What the reports call for.
        expected: String,
        /// The driver's fence.
        got: String,
    },
    /// The master or a slave raised a divergence error against a slave that had not diverged.
    #[error("slave {slave} was accused of {error} though its log is a prefix of the master's")]
    FalseAccusation {
        /// The slave.
        slave: usize,
        /// The error raised.
        error: PeerError,
    },
    /// A wait ended `Ok` without enough slaves holding its offset.
    #[error(
        "wait {id} ended Ok({offset}) with {have} slave(s) holding it, {need} needed; connections: {view}"
    )]
    WaitOkTooFew {
        /// The wait.
        id: u64,
        /// Its offset.
        offset: Offset,
        /// Slaves (distinct) whose acknowledged, stored offset reached it.
        have: usize,
        /// Slaves the policy needs.
        need: usize,
        /// The master's view of its connections then: peer, ack, in sync.
        view: String,
    },
    /// A wait ended `Ok` at or after its deadline.
    #[error("wait {id} ended Ok {late:?} after its deadline")]
    WaitOkAfterDeadline {
        /// The wait.
        id: u64,
        /// How long after.
        late: Duration,
    },
    /// A wait ended with a result it cannot have at that moment.
    #[error("wait {id} ended with {result:?}: {why}")]
    WaitBadResult {
        /// The wait.
        id: u64,
        /// The result.
        result: Result<Offset, WaitError>,
        /// Why it is wrong.
        why: &'static str,
    },
    /// A `WaitDone` for an id that is not pending (never started, or already done).
    #[error("WaitDone for wait {id}, which is not pending")]
    WaitDoneNotPending {
        /// The wait.
        id: u64,
    },
    /// A wait was still pending after its deadline had passed.
    #[error("wait {id} still pending {late:?} after its deadline")]
    WaitMissedDeadline {
        /// The wait.
        id: u64,
        /// How long after.
        late: Duration,
    },
    /// Once faults stopped, the cluster did not converge in time.
    #[error("no convergence within the liveness timeout: {detail}")]
    NoConvergence {
        /// What was still wrong.
        detail: String,
    },
    /// AutoSwitch: the current master's log lacks bytes a put was acknowledged (PUT_OK) for.
    #[error("broker {broker}, master in epoch {epoch}, lacks acknowledged bytes: {detail}")]
    AckedNotOnMaster {
        /// The master.
        broker: i64,
        /// Its epoch.
        epoch: i32,
        /// What differs.
        detail: String,
    },
    /// AutoSwitch: a truncation cut bytes a put was acknowledged for.
    #[error("broker {broker} truncated to {to}, cutting acknowledged bytes up to {acked_end}")]
    AckedTruncated {
        /// The broker.
        broker: i64,
        /// Where it cut.
        to: u64,
        /// The end of the acknowledged bytes.
        acked_end: u64,
    },
    /// AutoSwitch: two replicas hold different bytes below their confirmOffsets.
    #[error(
        "broker {broker} holds other bytes at {offset} than were confirmed there (its confirmOffset {confirm})"
    )]
    ConfirmedDiffer {
        /// The broker.
        broker: i64,
        /// The first offset that differs.
        offset: u64,
        /// Its confirmOffset.
        confirm: u64,
    },
    /// AutoSwitch: a replica exposes bytes (its confirmOffset) that a holder lacks: its own log,
    /// or a member of the sync-state-set.
    #[error("broker {broker} exposes up to {confirm}, but broker {holder} holds only up to {end}")]
    ExposedBeyondHeld {
        /// The broker whose confirmOffset is too high.
        broker: i64,
        /// Its confirmOffset.
        confirm: u64,
        /// The broker lacking the bytes (itself, or a set member).
        holder: i64,
        /// That broker's log end.
        end: u64,
    },
    /// AutoSwitch: a master acknowledged a put when the coordinator no longer held the lease it
    /// was elected under (expired or gone): the group may have elected another master by then.
    #[error("broker {broker} acknowledged a put in epoch {epoch} after its lease {lease} expired")]
    AckedWithoutLease {
        /// The broker.
        broker: i64,
        /// Its master epoch.
        epoch: i32,
        /// The lease it was elected under.
        lease: u64,
    },
    /// AutoSwitch: two brokers acknowledged puts in the same master epoch.
    #[error("brokers {first} and {second} both acknowledged puts in epoch {epoch}")]
    TwoMastersInEpoch {
        /// The epoch.
        epoch: i32,
        /// The broker that acknowledged first.
        first: i64,
        /// The other.
        second: i64,
    },
    /// AutoSwitch: an acknowledgement or an election in an epoch below one seen before.
    #[error("{what} in epoch {epoch}, after epoch {previous}")]
    EpochWentBack {
        /// What happened.
        what: &'static str,
        /// Its epoch.
        epoch: i32,
        /// The highest seen before.
        previous: i32,
    },
    /// AutoSwitch: a production driver refused to start as the record told it.
    #[error("broker {broker} could not start as {role}: {error}")]
    DriverRefused {
        /// The broker.
        broker: i64,
        /// Master or slave.
        role: &'static str,
        /// The driver's error.
        error: String,
    },
    /// Two runs of the same seed produced different event traces.
    #[error("nondeterminism: trace hash {first:#018x} then {second:#018x}")]
    Nondeterministic {
        /// The first run's trace hash.
        first: u64,
        /// The second run's.
        second: u64,
    },
}

/// A failed simulation: the seed that replays it, when and what broke, and the last events.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// Virtual time of the failure.
    pub at: Duration,
    /// Step number of the failure.
    pub step: u64,
    /// What broke.
    pub violation: Violation,
    /// The drawn cluster, in one line.
    pub summary: String,
    /// The command that replays this seed.
    pub replay: String,
    /// The last events before the failure, oldest first.
    pub recent: Vec<String>,
    /// Counters up to the failure.
    pub stats: Stats,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "simulation seed {:#x} failed at t={:.6}s (step {}): {}",
            self.seed,
            self.at.as_secs_f64(),
            self.step,
            self.violation
        )?;
        writeln!(f, "cluster: {}", self.summary)?;
        writeln!(f, "replay: {}", self.replay)?;
        if !self.recent.is_empty() {
            writeln!(f, "last {} events:", self.recent.len())?;
            for line in &self.recent {
                writeln!(f, "  {line}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Failure {}

/// A passed simulation.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Its counters.
    pub stats: Stats,
    /// A hash of every event in order: equal for two runs of the same seed.
    pub trace_hash: u64,
    /// The drawn cluster, in one line.
    pub summary: String,
}
