//! Tests of what the adapters' tasks hand to the service layer: the frame writer, the read
//! buffer, the put gate, the master and slave tasks, and the in-sync wait.

use std::io::{self, IoSlice};
use std::sync::Arc;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use crate::time::Instant;

use crate::log::LogWrite;

use bytes::Bytes;

use super::tests::origin;
use super::tls::{Link, LinkKind};
use super::*;
use crate::error::WaitError;
use crate::log::{LogRead, LogSpan, MessageLog, Offset, PutStatus};
use crate::memlog::MemoryLog;
use crate::{BrokerRole, ConnId};

/// A reply channel that records what it got.
struct Got<T>(Arc<Mutex<Vec<T>>>);

impl<T> Reply<T> for Got<T> {
    fn send(self, value: T) {
        self.0.lock().unwrap().push(value);
    }
}

fn got<T>() -> (Arc<Mutex<Vec<T>>>, impl Fn() -> Got<T>) {
    let cell = Arc::new(Mutex::new(Vec::new()));
    let make = {
        let cell = cell.clone();
        move || Got(cell.clone())
    };
    (cell, make)
}

struct NoConn;

impl ConnSink for NoConn {
    fn transmit(&mut self, _: Transmit) {}
    fn close(&mut self) {}
}

type Command = TaskCommand<NoConn, Got<Result<Offset, WaitError>>, Got<MasterStatus>, Got<()>>;
type Task = MasterTask<MemoryLog, NoConn, Got<Result<Offset, WaitError>>, Got<MasterStatus>, Got<()>>;

fn poll_frame(
    frame: &mut Frame,
    out: &mut Vec<u8>,
    mut step: impl FnMut(usize) -> Poll<usize>,
) -> Poll<io::Result<()>> {
    let mut cx = Context::from_waker(Waker::noop());
    let mut call = 0;
    frame.poll_write(&mut cx, |_, bufs: &[IoSlice<'_>]| {
        call += 1;
        let n = match step(call) {
            Poll::Ready(n) => n,
            Poll::Pending => return Poll::Pending,
        };
        let mut left = n;
        for buf in bufs {
            let take = left.min(buf.len());
            out.extend_from_slice(&buf[..take]);
            left -= take;
        }
        Poll::Ready(Ok(n - left))
    })
}

#[test]
fn a_frame_goes_out_whole_across_partial_and_pending_writes() {
    let header = *b"0123456789ab";
    let mut frame = Frame::new(header, Bytes::from_static(b"the body"));
    let mut out = Vec::new();
    // Five bytes a write, and the writer is not ready on the third call: the frame remembers.
    let first =
        poll_frame(&mut frame, &mut out, |call| if call == 3 { Poll::Pending } else { Poll::Ready(5) });
    assert!(first.is_pending());
    assert_eq!(out, b"0123456789");
    let rest = poll_frame(&mut frame, &mut out, |_| Poll::Ready(5));
    assert!(matches!(rest, Poll::Ready(Ok(()))));
    assert!(frame.is_written());
    assert_eq!(out, b"0123456789abthe body");
}

#[test]
fn a_writer_that_takes_nothing_is_write_zero_not_a_spin() {
    let mut frame = Frame::new([7; 12], Bytes::new());
    let mut out = Vec::new();
    match poll_frame(&mut frame, &mut out, |_| Poll::Ready(0)) {
        Poll::Ready(Err(e)) => assert_eq!(e.kind(), io::ErrorKind::WriteZero),
        other => panic!("expected WriteZero, got {other:?}"),
    }
}

#[test]
fn a_transmit_resolves_its_body_from_the_log_and_names_a_span_it_cannot_read() {
    let log = MemoryLog::new();
    assert_eq!(log.put(b"hello".to_vec()).status, PutStatus::PutOk);
    let end = log.bounds().max;
    let ok = Transmit { header: [1; 12].into(), body: Some(LogSpan { offset: 0, len: end as u32 }) };
    let mut out = Vec::new();
    let mut frame = ok.resolve(&log).unwrap();
    assert_eq!(frame.total_len(), 12 + end as usize);
    assert!(poll_frame(&mut frame, &mut out, |_| Poll::Ready(usize::MAX)).is_ready());
    assert_eq!(&out[12..], &log.contents().1[..]);

    let heartbeat = Transmit { header: [2; 12].into(), body: None };
    assert_eq!(heartbeat.resolve(&log).unwrap().total_len(), 12);

    let beyond = Transmit { header: [3; 12].into(), body: Some(LogSpan { offset: end, len: 10 }) };
    let e = beyond.resolve(&log).unwrap_err();
    assert!(e.to_string().contains(&format!("{end}")), "{e}");
}

#[test]
fn a_read_buffer_hands_out_each_read_and_refills_below_a_quarter() {
    let mut buf = ReadBuffer::new(16);
    assert_eq!(buf.spare().len(), 16);
    buf.spare()[..3].copy_from_slice(b"abc");
    assert_eq!(buf.take(3), Bytes::from_static(b"abc"));
    assert_eq!(buf.spare().len(), 13, "room is left, so no refill yet");
    let _ = buf.take(10);
    assert_eq!(buf.spare().len(), 16, "three bytes left is less than a quarter: refilled");
    assert_eq!(buf.take(100).len(), 16, "never more than the room");
}

#[test]
fn the_put_gate_refuses_while_fenced_and_for_good_once_stopped() {
    let gate = PutGate::new(false);
    assert!(!gate.refuses());
    gate.publish(Some(&Fence::Restart { waiting_for: 1 }));
    assert!(gate.refuses());
    gate.publish(None);
    assert!(!gate.refuses());
    gate.stop();
    gate.publish(None);
    assert!(gate.refuses() && gate.is_stopping());

    let log = MemoryLog::new();
    let refused = gate.start(&MasterServiceConfig::default(), &log, b"x".to_vec()).unwrap_err();
    assert_eq!(refused.status, PutStatus::ServiceNotAvailable);
    assert_eq!(log.bounds().max, 0, "a refused put appends nothing");
}

#[test]
fn a_put_wait_command_waits_for_the_puts_end_until_the_slave_timeout() {
    let now = origin();
    let log = MemoryLog::new();
    let config = MasterServiceConfig { role: BrokerRole::SyncMaster, ..Default::default() };
    let pending = PendingPut::start(&config, &log, b"abc".to_vec(), false).unwrap();
    let command: MasterCommand<NoConn, (), ()> = pending.wait_command(now, &config, ());
    match command {
        MasterCommand::Wait { offset, deadline, .. } => {
            assert_eq!(offset, pending.end());
            assert_eq!(deadline, now + config.slave_timeout);
        }
        _ => panic!("not a wait"),
    }
}

#[test]
fn a_master_task_applies_at_most_a_batch_per_turn() {
    let now = origin();
    let mut task = Task::start(&MasterServiceConfig::default(), now, Arc::new(MemoryLog::new())).unwrap();
    let (statuses, status) = got::<MasterStatus>();
    let mut queued = 0;
    task.apply_batch(now, Command::status(status()), || {
        queued += 1;
        Some(Command::status(status()))
    });
    assert_eq!(statuses.lock().unwrap().len(), MAX_BATCH);
    assert_eq!(queued, MAX_BATCH - 1, "the rest stay queued for the next turn");
}

#[test]
fn a_master_task_stops_once_shutdown_is_asked_and_no_wait_is_left() {
    let now = origin();
    let log = Arc::new(MemoryLog::new());
    let config = MasterServiceConfig { role: BrokerRole::SyncMaster, ..Default::default() };
    let mut task = Task::start(&config, now, log.clone()).unwrap();
    assert!(task.settle(now).is_some());
    let pending = task.gate().start(&config, &*log, b"m".to_vec()).unwrap();
    let (waits, wait) = got::<Result<Offset, WaitError>>();
    let (shutdowns, shutdown) = got::<()>();
    let mut more = vec![Command::Shutdown(shutdown())].into_iter();
    task.apply_batch(now, TaskCommand::Driver(pending.wait_command(now, &config, wait())), || more.next());
    assert!(task.is_stopping());
    assert!(task.gate().refuses(), "puts are refused from the shutdown on");
    // No slave is connected: the wait ends at once, and then the task may stop.
    assert_eq!(task.settle(now), None);
    assert_eq!(*waits.lock().unwrap(), vec![Err(WaitError::SlaveNotAvailable)]);
    assert_eq!(task.flush_target(), log.bounds().max);
    assert!(shutdowns.lock().unwrap().is_empty(), "answered only once finished");
    task.finish(true);
    assert_eq!(shutdowns.lock().unwrap().len(), 1);
}

#[test]
fn a_master_task_publishes_the_restart_fence_into_the_put_gate() {
    let now = origin();
    let config = MasterServiceConfig {
        restart_fence: 1,
        admission: Admission { allow: parse_allow_list("10.0.0.7").unwrap(), ..Default::default() },
        ..Default::default()
    };
    let mut task = Task::start(&config, now, Arc::new(MemoryLog::new())).unwrap();
    assert!(task.gate().refuses(), "fenced from the start");
    assert!(task.settle(now).is_some());
    assert!(task.gate().refuses(), "no replica reported: still fenced");
    assert!(task.driver().fence().is_some());
}

/// Runs the slave task until it asks to connect (waiting out its backoff), then connects it
/// with `result`; returns the time then.
fn connect_with<L: LogWrite>(
    task: &mut SlaveTask<L, u8>,
    mut now: Instant,
    result: io::Result<u8>,
) -> Instant {
    loop {
        match task.next_action(now) {
            SlaveIo::Connect => break,
            SlaveIo::SleepUntil(at) => {
                now = now.max(at);
                task.handle_timeout(now);
            }
            other => panic!("unexpected {other:?} before connecting"),
        }
    }
    task.connect_done(now, result);
    now
}

fn slave_task(now: Instant) -> SlaveTask<MemoryLog, u8> {
    SlaveTask::start(SlaveServiceConfig::new("127.0.0.1:1"), now, Arc::new(MemoryLog::new())).unwrap()
}

#[test]
fn a_slave_task_keeps_the_connection_only_while_its_outcomes_are_good() {
    let mut task = slave_task(origin());
    assert!(!task.wants_read());
    let now = connect_with(&mut task, origin(), Err(io::Error::other("refused")));
    assert!(task.stream().is_none());

    let now = connect_with(&mut task, now, Ok(7));
    assert_eq!(task.stream(), Some(&mut 7));
    assert!(task.wants_read());
    task.read_done(now, Ok(Bytes::new()));
    assert!(task.stream().is_none(), "end of stream drops the connection");

    let now = connect_with(&mut task, now, Ok(8));
    task.send_done(now, Some(Ok(())));
    assert!(task.stream().is_some());
    task.send_done(now, None);
    assert!(task.stream().is_none(), "a report that timed out drops the connection");

    let now = connect_with(&mut task, now, Ok(9));
    task.read_done(now, Err(io::Error::other("reset")));
    assert!(task.stream().is_none());
}

#[test]
fn a_slave_task_sends_its_first_report_on_the_connection() {
    let mut task = slave_task(origin());
    let now = connect_with(&mut task, origin(), Ok(3));
    match task.next_action(now) {
        SlaveIo::Send(report, stream) => {
            assert_eq!(report[..], 0u64.to_be_bytes(), "an empty log reports offset 0");
            assert_eq!(*stream, 3);
        }
        other => panic!("expected the first report, got {other:?}"),
    }
}

#[test]
fn a_slave_task_answers_status_and_closes_the_connection_on_shutdown() {
    let mut task = slave_task(origin());
    let now = connect_with(&mut task, origin(), Ok(1));
    let (statuses, status) = got::<SlaveStatus>();
    assert!(task.command::<_, Got<()>>(now, SlaveCommand::Status(status())).is_none());
    assert_eq!(statuses.lock().unwrap()[0].master_address, "127.0.0.1:1");
    assert_eq!(statuses.lock().unwrap()[0].connections, 1);
    let (shutdowns, shutdown) = got::<()>();
    let reply = task.command::<Got<SlaveStatus>, _>(now, SlaveCommand::Shutdown(shutdown()));
    assert!(reply.is_some());
    assert!(task.stream().is_none(), "the connection closes before the last flush");
    task.stopped(Ok::<Offset, io::Error>(0), reply);
    assert_eq!(shutdowns.lock().unwrap().len(), 1);
}

#[test]
fn an_in_sync_wait_is_answered_by_the_master_task_once_over_without_polling() {
    let now = origin();
    let mut task = Task::start(&MasterServiceConfig::default(), now, Arc::new(MemoryLog::new())).unwrap();
    let (answers, answer) = got::<MasterStatus>();
    let none_wanted = InSyncWait::new(now, 0, Duration::from_secs(5));
    let one = InSyncWait::new(now, 1, Duration::from_secs(2));
    task.apply_batch(now, TaskCommand::InSync { wait: none_wanted, reply: answer() }, || None);
    task.apply_batch(now, TaskCommand::InSync { wait: one, reply: answer() }, || None);
    let wake = task.settle(now).unwrap();
    assert_eq!(answers.lock().unwrap().len(), 1, "zero slaves wanted: answered at once");
    assert!(none_wanted.outcome(answers.lock().unwrap()[0].clone()).is_ok());
    assert_eq!(wake, one.deadline(), "the task wakes for the other wait's deadline");

    let later = now + Duration::from_secs(1);
    task.timer(later);
    assert!(task.settle(later).is_some());
    assert_eq!(answers.lock().unwrap().len(), 1, "no slave yet, time not up: still waiting");

    task.timer(one.deadline());
    task.settle(one.deadline());
    assert_eq!(answers.lock().unwrap().len(), 2);
    assert_eq!(
        one.outcome(answers.lock().unwrap()[1].clone()),
        Err(InSyncError::Timeout { wanted: 1, in_sync: 0 })
    );
}

#[test]
fn an_in_sync_wait_left_at_shutdown_goes_unanswered() {
    let now = origin();
    let mut task = Task::start(&MasterServiceConfig::default(), now, Arc::new(MemoryLog::new())).unwrap();
    let (answers, answer) = got::<MasterStatus>();
    let (_, shutdown) = got::<()>();
    let wait = InSyncWait::new(now, 1, Duration::from_secs(2));
    let mut more = vec![Command::Shutdown(shutdown())].into_iter();
    task.apply_batch(now, TaskCommand::InSync { wait, reply: answer() }, || more.next());
    assert_eq!(task.settle(now), None, "an in-sync wait does not hold up a shutdown");
    task.finish(true);
    assert!(answers.lock().unwrap().is_empty(), "dropped: the handle sees the service stopped");
}

#[test]
fn a_peek_tells_tls_from_a_classic_report_and_an_empty_one_ended() {
    assert_eq!(LinkKind::from_peek(&[]), None);
    assert_eq!(LinkKind::from_peek(&[0x16]), Some(LinkKind::Tls));
    assert_eq!(LinkKind::from_peek(&[0x00, 0x16]), Some(LinkKind::Plain));
    assert_eq!(Link::failed(&"bad certificate"), Link::TlsFailed { error: "bad certificate".into() });
}

#[test]
fn connection_ids_in_task_commands_reach_the_driver() {
    let now = origin();
    let mut task = Task::start(&MasterServiceConfig::default(), now, Arc::new(MemoryLog::new())).unwrap();
    let peer = "127.0.0.1:4000".parse().unwrap();
    task.apply_batch(now, TaskCommand::accepted(ConnId(1), peer, NoConn), || None);
    let (statuses, status) = got::<MasterStatus>();
    task.apply_batch(now, Command::status(status()), || None);
    assert_eq!(statuses.lock().unwrap()[0].connections_accepted, 1);
    task.apply_batch(now, TaskCommand::closed(ConnId(1)), || None);
}

/// A master's TLS settings in `mode`, with a throwaway CA.
fn master_tls(mode: tls::TlsMode) -> tls::MasterTls {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["master.test".to_string()])
        .unwrap()
        .signed_by(&key, &ca, &ca_key)
        .unwrap();
    let (cert, key, ca) = (cert.pem(), key.serialize_pem(), ca.pem());
    let pem = tls::TlsPem { cert_chain: cert.as_bytes(), key: key.as_bytes(), ca: ca.as_bytes() };
    tls::MasterTls::new(mode, pem, &["replica-a".to_string()]).unwrap()
}

#[test]
fn a_connection_still_negotiating_tls_is_not_listed_as_a_slave() {
    let now = origin();
    let admission = Admission { tls: Some(master_tls(tls::TlsMode::Optional)), ..Default::default() };
    let config = MasterServiceConfig { admission, ..Default::default() };
    let mut task = Task::start(&config, now, Arc::new(MemoryLog::new())).unwrap();
    let peer = "127.0.0.1:4000".parse().unwrap();
    let (statuses, status) = got::<MasterStatus>();
    task.apply_batch(now, TaskCommand::accepted(ConnId(1), peer, NoConn), || None);
    task.apply_batch(now, Command::status(status()), || None);
    assert_eq!(statuses.lock().unwrap()[0].slaves, vec![], "not admitted yet: no slave to show");
    task.apply_batch(now, TaskCommand::negotiated(ConnId(1), Link::Plain), || None);
    task.apply_batch(now, Command::status(status()), || None);
    assert_eq!(statuses.lock().unwrap()[1].slaves.len(), 1, "a plain link under Optional is admitted");
}
