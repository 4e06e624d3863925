//! Tests of what the service layer builds on an adapter's [`Runtime`]: the handles, a
//! connection's sink, the tasks' wake-ups, and the small outcomes of the adapters' socket code.
//! The runtime here is a test double: its channels are shared queues, its clock stands still,
//! and its timer either never fires or has already fired.

use std::collections::VecDeque;
use std::future::{Future, poll_fn};
use std::io;
use std::ops::ControlFlow;
use std::pin::pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use bytes::Bytes;

use super::tests::origin;
use super::tls::Link;
use super::*;
use crate::error::WaitError;
use crate::log::{LogRead, Offset, PutStatus};
use crate::memlog::MemoryLog;
use crate::time::Instant;
use crate::{BrokerRole, ConnId, FlushDiskType, FlushSettings, classic::SlaveState};

/// A channel of the test runtime: a queue, and whether its receiver is gone.
struct Queue<T> {
    items: VecDeque<T>,
    capacity: usize,
    closed: bool,
}

type Chan<T> = Arc<Mutex<Queue<T>>>;

fn chan<T>(capacity: usize) -> Chan<T> {
    Arc::new(Mutex::new(Queue { items: VecDeque::new(), capacity, closed: false }))
}

fn take<T>(chan: &Chan<T>) -> Option<T> {
    chan.lock().unwrap().items.pop_front()
}

/// The test runtime: time stands still at `now`; with `expired`, every timeout has run out
/// before its work is looked at.
#[derive(Clone)]
struct TestRt {
    now: Instant,
    expired: bool,
}

impl Runtime for TestRt {
    type Sender<T: Send + 'static> = Chan<T>;
    type ReplySender<T: Send + 'static> = Chan<T>;

    fn now(&self) -> Instant {
        self.now
    }

    async fn send<T: Send + 'static>(to: &Chan<T>, value: T) -> bool {
        Self::try_send(to, value)
    }

    fn try_send<T: Send + 'static>(to: &Chan<T>, value: T) -> bool {
        let mut queue = to.lock().unwrap();
        if queue.closed || queue.items.len() >= queue.capacity {
            return false;
        }
        queue.items.push_back(value);
        true
    }

    fn answer<T: Send + 'static>(to: Chan<T>, value: T) {
        Self::try_send(&to, value);
    }

    fn reply<T: Send + 'static>() -> (ReplySlot<Self, T>, impl Future<Output = Option<T>> + Send) {
        let slot = chan(1);
        let answer = slot.clone();
        let answered = poll_fn(move |_| match take(&answer) {
            Some(value) => Poll::Ready(Some(value)),
            None if Arc::strong_count(&answer) == 1 => Poll::Ready(None),
            None => Poll::Pending,
        });
        (ReplySlot::new(slot), answered)
    }

    async fn timeout<F: Future + Send>(&self, _limit: Duration, work: F) -> Option<F::Output> {
        if self.expired { None } else { Some(work.await) }
    }
}

/// Polls `future` once.
fn poll_once<F: Future + ?Sized>(future: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    future.poll(&mut Context::from_waker(Waker::noop()))
}

/// Runs `future`, which must finish without waiting.
fn now_or_never<F: Future>(future: F) -> F::Output {
    match poll_once(pin!(future)) {
        Poll::Ready(out) => out,
        Poll::Pending => panic!("the future waited"),
    }
}

type Handle = MasterHandle<MemoryLog, TestRt>;

struct Master {
    handle: Handle,
    task: MasterTaskOn<MemoryLog, TestRt>,
    commands: Chan<MasterCommandOn<TestRt>>,
    appended: Chan<()>,
    log: Arc<MemoryLog>,
}

fn master(config: MasterServiceConfig, rt: TestRt) -> Master {
    master_on(config, rt, MemoryLog::new())
}

fn master_on(config: MasterServiceConfig, rt: TestRt, log: MemoryLog) -> Master {
    let log = Arc::new(log);
    let task = MasterTaskOn::start(&config, rt.now, log.clone()).unwrap();
    let (commands, appended) = (chan(16), chan(1));
    let addr = "127.0.0.1:10912".parse().unwrap();
    let handle = MasterHandle::new(&task, config, addr, commands.clone(), appended.clone(), rt);
    Master { handle, task, commands, appended, log }
}

fn at_origin() -> TestRt {
    TestRt { now: origin(), expired: false }
}

#[test]
fn join_runs_both_futures_side_by_side_and_returns_both_outputs() {
    let (a, b) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    // `a` is ready only once `b` has been polled: a join that waited for `a` before polling `b`
    // would never end. `b` is ready on its first poll, and neither is polled once done.
    let first = poll_fn(|_| {
        a.set(a.get() + 1);
        if b.get() > 0 { Poll::Ready("first") } else { Poll::Pending }
    });
    let second = poll_fn(|_| {
        b.set(b.get() + 1);
        Poll::Ready(7)
    });
    let mut joined = pin!(join(first, second));
    assert!(poll_once(joined.as_mut()).is_pending());
    assert_eq!(poll_once(joined.as_mut()), Poll::Ready(("first", 7)));
    assert_eq!((a.get(), b.get()), (2, 1));
}

#[test]
fn a_put_through_a_closed_gate_is_refused_without_reaching_the_task() {
    let m = master(MasterServiceConfig::default(), at_origin());
    m.task.gate().stop();
    let put = now_or_never(m.handle.put(b"x".to_vec()));
    assert_eq!(put.status, PutStatus::ServiceNotAvailable);
    assert_eq!(m.log.bounds().max, 0, "nothing appended");
    assert!(take(&m.commands).is_none() && take(&m.appended).is_none());
}

#[test]
fn an_async_master_put_wakes_the_task_and_waits_for_nothing() {
    let m = master(MasterServiceConfig::default(), at_origin());
    let put = now_or_never(m.handle.put(b"hello".to_vec()));
    assert_eq!(put.status, PutStatus::PutOk);
    assert_eq!(put.end(), m.log.bounds().max);
    assert!(take(&m.appended).is_some(), "the core task is woken so the frame goes out at once");
    assert!(take(&m.commands).is_none(), "no replication wait");
    let again = now_or_never(m.handle.put(b"more".to_vec()));
    assert_eq!(again.status, PutStatus::PutOk, "a wake already queued does not hold up a put");
}

/// Starts a SYNC_MASTER put, takes the wait it queues for the task, and answers it with `answer`
/// (`None`: drops the reply unanswered).
fn sync_put_answered(answer: Option<Result<Offset, WaitError>>) -> PutStatus {
    let config = MasterServiceConfig { role: BrokerRole::SyncMaster, ..Default::default() };
    let slave_timeout = config.slave_timeout;
    let m = master(config, at_origin());
    let mut put = pin!(m.handle.put(b"abc".to_vec()));
    assert!(poll_once(put.as_mut()).is_pending(), "waits for the slaves");
    let mut queued = m.task.wait_queue().take();
    assert_eq!(queued.len(), 1, "the put did not queue a replication wait");
    let QueuedWait { offset, deadline, reply } = queued.remove(0);
    assert_eq!((offset, deadline), (m.log.bounds().max, origin() + slave_timeout));
    assert!(take(&m.appended).is_some(), "an idle task is woken for the wait");
    assert!(take(&m.commands).is_none(), "no command per put");
    match answer {
        Some(result) => reply.send(result),
        None => drop(reply),
    }
    match poll_once(put.as_mut()) {
        Poll::Ready(put) => put.status,
        Poll::Pending => panic!("answered, but the put still waits"),
    }
}

#[test]
fn a_sync_master_put_ends_with_the_outcome_of_its_replication_wait() {
    assert_eq!(sync_put_answered(Some(Ok(3))), PutStatus::PutOk);
    assert_eq!(sync_put_answered(Some(Err(WaitError::Timeout))), PutStatus::FlushSlaveTimeout);
    assert_eq!(sync_put_answered(None), PutStatus::ServiceNotAvailable, "a task gone is a cancelled wait");
}

/// A controller-mode master (sync-state-set {1}) whose puts are fenced by `lease`.
fn leased_master(lease: &Arc<std::sync::atomic::AtomicBool>) -> Master {
    let open = lease.clone();
    let controller = MasterControllerConfig {
        sync_state_set: [1].into(),
        lease: Some(coordinator::LeaseFence::new(move || open.load(std::sync::atomic::Ordering::SeqCst))),
        ..MasterControllerConfig::default()
    };
    let config = MasterServiceConfig {
        role: BrokerRole::SyncMaster,
        controller: Some(controller),
        ..Default::default()
    };
    master(config, at_origin())
}

/// Issue 27: a library user with a coordinator got no lease fencing (the check lived in the
/// binary's HTTP handler). The put path itself refuses a put while the lease is closed, and
/// never acknowledges one whose lease closed while it waited.
#[test]
fn a_master_with_a_lease_refuses_puts_while_it_is_closed_and_acknowledges_none_after_it_closed() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let lease = Arc::new(AtomicBool::new(false));
    let m = leased_master(&lease);
    let refused = now_or_never(m.handle.put(b"refused".to_vec()));
    assert_eq!(refused.status, PutStatus::LeaseLost);
    assert!(!refused.status.is_stored());
    assert_eq!(m.log.bounds().max, 0, "nothing stored while the lease is closed");
    assert!(m.task.wait_queue().is_empty() && take(&m.appended).is_none(), "the task is not bothered");

    lease.store(true, Ordering::SeqCst);
    let mut put = pin!(m.handle.put(b"acked".to_vec()));
    assert!(poll_once(put.as_mut()).is_pending());
    let wait = m.task.wait_queue().take().remove(0);
    wait.reply.send(Ok(wait.offset));
    let Poll::Ready(acked) = poll_once(put.as_mut()) else { panic!("answered, but the put waits") };
    assert_eq!(acked.status, PutStatus::PutOk, "an open lease acknowledges");

    let mut put = pin!(m.handle.put(b"late".to_vec()));
    assert!(poll_once(put.as_mut()).is_pending());
    let wait = m.task.wait_queue().take().remove(0);
    lease.store(false, Ordering::SeqCst);
    wait.reply.send(Ok(wait.offset));
    let Poll::Ready(late) = poll_once(put.as_mut()) else { panic!("answered, but the put waits") };
    assert_eq!(late.status, PutStatus::LeaseLostAfterStore, "replicated, but the lease closed first");
    assert!(late.status.is_stored());
    assert_eq!(late.end(), m.log.bounds().max, "stored locally, unacknowledged");
    assert_eq!(late.status.rocketmq_name(), "SERVICE_NOT_AVAILABLE", "what a RocketMQ client is told");
}

type PutFuture<'a> = std::pin::Pin<Box<dyn Future<Output = crate::log::PutResult> + Send + 'a>>;

/// A SYNC_MASTER task with one streaming slave connection (reported 0); its writer's queue.
fn sync_master_with_a_slave() -> (Master, Chan<Transmit>) {
    let config = MasterServiceConfig { role: BrokerRole::SyncMaster, ..Default::default() };
    let mut m = master(config, at_origin());
    let frames = chan(16);
    let sink = ConnHandle::<TestRt>::new(frames.clone(), chan(1));
    let peer = "127.0.0.1:40000".parse().unwrap();
    let conn = ConnId(1);
    m.task.wake(origin(), MasterWake::Command(Some(TaskCommand::accepted(conn, peer, sink))), || None);
    let report = Bytes::copy_from_slice(&0u64.to_be_bytes());
    m.task.wake(origin(), MasterWake::Command(Some(TaskCommand::received(conn, report))), || None);
    (m, frames)
}

fn frame_spans(frames: &Chan<Transmit>) -> Vec<Option<crate::log::LogSpan>> {
    std::iter::from_fn(|| take(frames)).map(|t| t.body).collect()
}

#[test]
fn puts_while_every_connection_writes_queue_their_waits_without_waking_the_task_and_go_in_one_frame() {
    let (mut m, frames) = sync_master_with_a_slave();
    let conn = ConnId(1);
    let mut first: PutFuture<'_> = Box::pin(m.handle.put(b"first".to_vec()));
    assert!(poll_once(first.as_mut()).is_pending());
    assert!(take(&m.appended).is_some(), "an idle connection: the first put wakes the task");
    m.task.wake(origin(), MasterWake::Appended, || None);
    let after_first = m.log.bounds().max;
    assert_eq!(frame_spans(&frames), [Some(crate::log::LogSpan { offset: 0, len: after_first as u32 })]);

    // The frame is being written: the next puts neither send a command nor wake the task.
    let mut more: Vec<PutFuture<'_>> =
        (0..3).map(|i| Box::pin(m.handle.put(format!("more {i}").into_bytes())) as PutFuture<'_>).collect();
    for put in &mut more {
        assert!(poll_once(put.as_mut()).is_pending());
    }
    assert!(take(&m.commands).is_none(), "no command per put");
    assert!(take(&m.appended).is_none(), "the task is not woken while the write is under way");
    assert_eq!(m.task.wait_queue().len(), 3);

    // The write ends: the task takes the three waits in that turn and sends their bytes at once.
    m.task.wake(origin(), MasterWake::Command(Some(TaskCommand::sent(conn))), || None);
    let end = m.log.bounds().max;
    let len = (end - after_first) as u32;
    assert_eq!(frame_spans(&frames), [Some(crate::log::LogSpan { offset: after_first, len })]);
    assert_eq!(m.task.driver().pending_waits(), 4);

    m.task.wake(origin(), MasterWake::Command(Some(TaskCommand::sent(conn))), || None);
    let ack = Bytes::copy_from_slice(&end.to_be_bytes());
    m.task.wake(origin(), MasterWake::Command(Some(TaskCommand::received(conn, ack))), || None);
    for put in std::iter::once(&mut first).chain(&mut more) {
        let Poll::Ready(put) = poll_once(put.as_mut()) else { panic!("acknowledged, but the put waits") };
        assert_eq!(put.status, PutStatus::PutOk);
    }
}

#[test]
fn a_wait_queued_when_the_task_stops_or_after_it_stopped_is_cancelled() {
    let (mut m, _frames) = sync_master_with_a_slave();
    let handle = m.handle.clone();
    let mut first: PutFuture<'_> = Box::pin(handle.put(b"first".to_vec()));
    assert!(poll_once(first.as_mut()).is_pending());
    m.task.wake(origin(), MasterWake::Appended, || None);
    let mut queued: PutFuture<'_> = Box::pin(handle.put(b"queued".to_vec()));
    assert!(poll_once(queued.as_mut()).is_pending());
    assert_eq!(m.task.wait_queue().len(), 1, "queued while the first frame is written");
    let (reply, _answer) = TestRt::reply::<()>();
    let shutdown = MasterWake::Command(Some(TaskCommand::Shutdown(reply)));
    assert!(m.task.wake(origin(), shutdown, || None).is_some(), "two waits are pending");
    assert!(m.task.wait_queue().is_empty(), "stopping: the task takes every queued wait");
    m.task.finish(true);
    for put in [&mut first, &mut queued] {
        let Poll::Ready(put) = poll_once(put.as_mut()) else {
            panic!("the task finished, but the put waits")
        };
        assert_eq!(put.status, PutStatus::ServiceNotAvailable);
    }
    assert_eq!(now_or_never(handle.put(b"late".to_vec())).status, PutStatus::ServiceNotAvailable);
}

#[test]
fn a_sync_put_after_the_task_is_gone_is_cancelled_without_waiting() {
    let config = MasterServiceConfig { role: BrokerRole::SyncMaster, ..Default::default() };
    let Master { task, handle, .. } = master(config, at_origin());
    drop(task);
    assert_eq!(now_or_never(handle.put(b"late".to_vec())).status, PutStatus::ServiceNotAvailable);
}

#[test]
fn a_put_on_a_sync_flush_log_not_durable_within_the_timeout_is_flush_disk_timeout() {
    let config = MasterServiceConfig::default();
    let sync_flush = || {
        MemoryLog::with_flush_settings(FlushSettings {
            flush_disk_type: FlushDiskType::SyncFlush,
            ..Default::default()
        })
    };
    let durable = master_on(config.clone(), at_origin(), sync_flush());
    assert_eq!(now_or_never(durable.handle.put(b"m".to_vec())).status, PutStatus::PutOk);
    let expired = TestRt { now: origin(), expired: true };
    let late = master_on(config.clone(), expired.clone(), sync_flush());
    assert_eq!(now_or_never(late.handle.put(b"m".to_vec())).status, PutStatus::FlushDiskTimeout);
    let async_flush = master_on(config, expired, MemoryLog::new());
    assert_eq!(
        now_or_never(async_flush.handle.put(b"m".to_vec())).status,
        PutStatus::PutOk,
        "an ASYNC_FLUSH log is not waited for"
    );
}

#[test]
fn status_shutdown_and_in_sync_waits_are_commands_to_the_task_and_see_it_stopped() {
    let m = master(MasterServiceConfig::default(), at_origin());
    let mut status = pin!(m.handle.status());
    assert!(poll_once(status.as_mut()).is_pending());
    let Some(TaskCommand::Driver(MasterCommand::Status { reply })) = take(&m.commands) else {
        panic!("status is not a status command")
    };
    drop(reply);
    assert_eq!(poll_once(status.as_mut()), Poll::Ready(None), "unanswered: the service stopped");

    let mut shutdown = pin!(m.handle.shutdown());
    assert!(poll_once(shutdown.as_mut()).is_pending());
    assert!(m.task.gate().refuses(), "puts are refused from the call on");
    let Some(TaskCommand::Shutdown(reply)) = take(&m.commands) else { panic!("not a shutdown") };
    reply.send(());
    assert_eq!(poll_once(shutdown.as_mut()), Poll::Ready(()));

    m.commands.lock().unwrap().closed = true;
    let waited = now_or_never(m.handle.wait_in_sync(1, Duration::from_secs(1)));
    assert_eq!(waited.unwrap_err(), InSyncError::Stopped);
    assert_eq!(now_or_never(m.handle.status()), None);
}

#[test]
fn the_handles_traits_reach_the_same_service() {
    let m = master(MasterServiceConfig::default(), at_origin());
    let service: Box<dyn MasterService<MemoryLog>> = Box::new(m.handle.clone());
    assert_eq!(service.local_addr(), m.handle.local_addr());
    assert_eq!(now_or_never(service.put(b"via the trait".to_vec())).status, PutStatus::PutOk);
    assert_eq!(m.handle.log().bounds().max, m.log.bounds().max);

    let commands = chan(4);
    let slave: Box<dyn SlaveService> = Box::new(SlaveHandle::<TestRt>::new(commands.clone()));
    let mut status = pin!(slave.status());
    assert!(poll_once(status.as_mut()).is_pending());
    let Some(SlaveCommand::Status(reply)) = take(&commands) else { panic!("not a status command") };
    drop(reply);
    assert_eq!(poll_once(status.as_mut()), Poll::Ready(None));
}

#[test]
fn a_connection_handle_queues_frames_and_closing_drops_the_close_sender() {
    let (frames, close) = (chan::<Transmit>(2), chan::<()>(1));
    let mut sink = ConnHandle::<TestRt>::new(frames.clone(), close.clone());
    let heartbeat = Transmit { header: [1; 12].into(), body: None };
    sink.transmit(heartbeat.clone());
    assert_eq!(take(&frames), Some(heartbeat));
    assert!(!sink.is_closed());
    assert_eq!(Arc::strong_count(&close), 2);
    sink.close();
    assert!(sink.is_closed());
    assert_eq!(Arc::strong_count(&close), 1, "the connection task sees every sender gone");
}

#[test]
fn a_master_task_wakes_turn_by_turn_and_stops_when_its_senders_are_gone() {
    let mut m = master(MasterServiceConfig::default(), at_origin());
    let now = origin();
    assert!(m.task.wake(now, MasterWake::Timer, || None).is_some());
    assert!(m.task.wake(now, MasterWake::Appended, || None).is_some());
    let (reply, _answer) = TestRt::reply();
    let status = TaskCommand::Driver(MasterCommand::Status { reply });
    assert!(m.task.wake(now, MasterWake::Command(Some(status)), || None).is_some());
    assert_eq!(m.task.wake(now, MasterWake::Command(None), || None), None);
}

#[test]
fn a_stopped_master_task_flushes_then_answers_its_shutdowns() {
    let mut m = master(MasterServiceConfig::default(), at_origin());
    let (reply, answer) = TestRt::reply::<()>();
    assert_eq!(m.task.wake(origin(), MasterWake::Command(Some(TaskCommand::Shutdown(reply))), || None), None);
    now_or_never(m.task.stop(&at_origin(), Duration::from_secs(1)));
    assert_eq!(now_or_never(answer), Some(()));
}

#[test]
fn accepts_are_numbered_from_one_and_a_failed_accept_pauses() {
    let mut accepts = Accepts::default();
    let peer: std::net::SocketAddr = "10.0.0.1:5000".parse().unwrap();
    assert_eq!(accepts.accepted(Ok(("a", peer))), Ok((ConnId(1), "a", peer)));
    assert_eq!(accepts.accepted::<&str>(Err(io::Error::other("EMFILE"))), Err(ACCEPT_RETRY));
    assert_eq!(accepts.accepted(Ok(("b", peer))), Ok((ConnId(2), "b", peer)), "a failure takes no number");
}

#[test]
fn a_connection_that_ended_reports_closed_either_way() {
    for ended in [Ok("end of stream"), Err(io::Error::other("reset"))] {
        let command: MasterCommandOn<TestRt> = TaskCommand::ended(ConnId(4), ended);
        assert!(matches!(command, TaskCommand::Driver(MasterCommand::Closed { conn: ConnId(4) })));
    }
}

#[test]
fn a_failed_handshake_keeps_its_kind_and_says_it_was_the_handshake() {
    let e = handshake_failed(io::Error::new(io::ErrorKind::InvalidData, "bad certificate"));
    assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    assert_eq!(e.to_string(), "TLS handshake: bad certificate");
}

#[test]
fn settled_empties_the_slot_once_done_and_keeps_a_future_it_left_early() {
    let mut slot = Some(std::future::ready(5));
    assert_eq!(now_or_never(settled(&mut slot)), 5);
    assert!(slot.is_none());

    let mut waiting = Some(poll_fn(|_| Poll::<u8>::Pending));
    assert!(poll_once(pin!(settled(&mut waiting))).is_pending());
    assert!(waiting.is_some(), "dropped before done: the future stays for the next turn");
    let mut empty: Option<std::future::Ready<u8>> = None;
    assert!(poll_once(pin!(settled(&mut empty))).is_pending(), "no future: waits forever");
}

fn slave_task(now: Instant) -> SlaveTask<MemoryLog, u8> {
    SlaveTask::start(SlaveServiceConfig::new("127.0.0.1:1"), now, Arc::new(MemoryLog::new())).unwrap()
}

/// Runs the slave task up to its first connect.
fn until_connect(task: &mut SlaveTask<MemoryLog, u8>, mut now: Instant) -> Instant {
    loop {
        match task.next_action(now) {
            SlaveIo::Connect => return now,
            SlaveIo::SleepUntil(at) => {
                now = now.max(at);
                task.handle_timeout(now);
            }
            other => panic!("unexpected {other:?} before connecting"),
        }
    }
}

type SlaveWakeOf = SlaveWake<u8, SlaveCommandOn<TestRt>>;

#[test]
fn a_slave_task_takes_each_wake_and_stops_on_shutdown_or_when_its_senders_are_gone() {
    let mut task = slave_task(origin());
    let now = until_connect(&mut task, origin());
    assert!(task.wake(now, SlaveWakeOf::Connected(Some(Ok(5)))).is_continue());
    assert_eq!(task.readable(), Some(&mut 5));
    let read = SlaveWakeOf::Read(Ok(Bytes::new()));
    assert!(task.wake(now, read).is_continue());
    assert_eq!(task.readable(), None, "end of stream: nothing to read");

    let (reply, answer) = TestRt::reply();
    assert!(task.wake(now, SlaveWakeOf::Command(Some(SlaveCommand::Status(reply)))).is_continue());
    assert_eq!(now_or_never(answer).unwrap().connections, 1);
    assert!(task.wake(now, SlaveWakeOf::Flushed(Ok(0))).is_continue());
    assert!(task.wake(now, SlaveWakeOf::Timer).is_continue());

    let (reply, _answer) = TestRt::reply();
    assert!(matches!(
        task.wake(now, SlaveWakeOf::Command(Some(SlaveCommand::Shutdown(reply)))),
        ControlFlow::Break(Some(_))
    ));
    assert!(matches!(task.wake(now, SlaveWakeOf::Command(None)), ControlFlow::Break(None)));
}

#[test]
fn a_slave_connect_that_timed_out_is_a_failed_connect() {
    let mut task = slave_task(origin());
    let now = until_connect(&mut task, origin());
    let status = |task: &mut SlaveTask<MemoryLog, u8>| {
        let (reply, answer) = TestRt::reply();
        assert!(task.wake(now, SlaveWakeOf::Command(Some(SlaveCommand::Status(reply)))).is_continue());
        now_or_never(answer).unwrap()
    };
    assert_eq!(status(&mut task).state, SlaveState::Connecting);
    assert!(task.wake(now, SlaveWakeOf::Connected(None)).is_continue());
    assert_eq!(task.readable(), None);
    let after = status(&mut task);
    assert!(matches!(after.state, SlaveState::Disconnected { .. }), "{:?}", after.state);
    assert_eq!(after.connections, 0, "never connected");
    assert!(matches!(task.next_action(now), SlaveIo::SleepUntil(_)), "backs off before the next connect");
}

#[test]
fn a_negotiation_goes_on_plain_runs_the_handshake_for_tls_and_ends_on_an_empty_peek() {
    let handshake_to = |outcome: io::Result<&'static str>| {
        move |stream: &'static str| async move {
            assert_eq!(stream, "tcp", "the handshake runs on the accepted stream");
            outcome.map(|tls| (Link::Tls { peer_certificates: Vec::new() }, tls))
        }
    };
    let ended = now_or_never(negotiate(&[], "tcp", handshake_to(Ok("tls"))));
    assert_eq!(ended, (None, Err("end of stream before the first byte")), "nothing to tell the driver");
    let plain = now_or_never(negotiate(&[0], "tcp", handshake_to(Ok("tls"))));
    assert_eq!(plain, (Some(Link::Plain), Ok("tcp")));
    let tls = now_or_never(negotiate(&[0x16], "tcp", handshake_to(Ok("tls"))));
    assert_eq!(tls, (Some(Link::Tls { peer_certificates: Vec::new() }), Ok("tls")));
    let failed = now_or_never(negotiate(&[0x16], "tcp", handshake_to(Err(io::Error::other("bad hello")))));
    assert_eq!(failed, (Some(Link::failed(&"bad hello")), Err("TLS handshake failed")));
}

#[test]
fn a_stopping_slave_task_waits_for_a_running_flush_then_flushes_once_more_and_answers() {
    let task = slave_task(origin());
    let running_done = std::cell::Cell::new(false);
    let running = async { running_done.set(true) };
    let flushes = std::cell::Cell::new(0);
    let flush = |log: &Arc<MemoryLog>| {
        assert!(running_done.get(), "the running flush ends first");
        flushes.set(flushes.get() + 1);
        std::future::ready(Ok(log.bounds().max))
    };
    let (reply, answer) = TestRt::reply::<()>();
    now_or_never(task.stop(Some(running), flush, Some(reply)));
    assert_eq!(flushes.get(), 1);
    assert_eq!(now_or_never(answer), Some(()), "the shutdown is answered");
}
