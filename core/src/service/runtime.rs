//! What an adapter supplies from its async runtime ([`Runtime`]: its clock on the core's
//! timeline, its channels, its timer), and what the service layer builds on it once for every
//! adapter: the core task's handle on a connection ([`ConnHandle`]) and the command types the
//! tasks exchange.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use crate::error::WaitError;
use crate::log::Offset;
use crate::service::{
    ConnSink, MasterStatus, MasterTask, Reply, SlaveCommand, SlaveStatus, TaskCommand, Transmit,
};
use crate::time::Instant;

/// The parts of an async runtime that a service's handles and tasks need, which an adapter
/// implements over its own clock, channels and timers. Everything built on it (the handles'
/// put, status, shutdown and in-sync wait, a connection's sink) is written once, here.
pub trait Runtime: Clone + Send + Sync + 'static {
    /// The sending half of one of the runtime's bounded channels.
    type Sender<T: Send + 'static>: Clone + Send + Sync + 'static;

    /// The sending half of a reply, which carries one answer ([`reply`](Self::reply)): a
    /// oneshot where the runtime has one, since a put's replication wait makes one per put.
    type ReplySender<T: Send + 'static>: Send + 'static;

    /// Now, on the core's timeline.
    fn now(&self) -> Instant;

    /// Sends `value`, waiting for room; `false` once the receiver is gone.
    fn send<T: Send + 'static>(to: &Self::Sender<T>, value: T) -> impl Future<Output = bool> + Send;

    /// Sends `value` if there is room now; `false` when the channel is full or closed.
    fn try_send<T: Send + 'static>(to: &Self::Sender<T>, value: T) -> bool;

    /// Delivers the answer through a reply's sender; a receiver that is gone is ignored.
    fn answer<T: Send + 'static>(to: Self::ReplySender<T>, value: T);

    /// A new channel with room for one answer: the reply a command carries, and the answer
    /// (`None` once the reply is dropped unanswered).
    fn reply<T: Send + 'static>() -> (ReplySlot<Self, T>, impl Future<Output = Option<T>> + Send);

    /// `work`'s output, or `None` when it does not end within `limit`, timed by this runtime.
    /// The future may be awaited on another executor than the runtime's own.
    fn timeout<F: Future + Send>(
        &self,
        limit: Duration,
        work: F,
    ) -> impl Future<Output = Option<F::Output>> + Send;

    /// Sends the command `make` builds around a new reply, and waits for the answer; `None`
    /// when the receiving task is gone or dropped the reply.
    fn ask<C: Send + 'static, T: Send + 'static>(
        to: &Self::Sender<C>,
        make: impl FnOnce(ReplySlot<Self, T>) -> C + Send,
    ) -> impl Future<Output = Option<T>> + Send {
        async move {
            let (reply, answer) = Self::reply();
            if !Self::send(to, make(reply)).await {
                return None;
            }
            answer.await
        }
    }

    /// Whether `work` ends with `Ok` within `limit` (see [`timeout`](Self::timeout)).
    fn within<T, E>(
        &self,
        limit: Duration,
        work: impl Future<Output = Result<T, E>> + Send,
    ) -> impl Future<Output = bool> + Send {
        let timed = self.timeout(limit, work);
        async move { matches!(timed.await, Some(Ok(_))) }
    }
}

/// A reply on runtime `R`: the sending half of a channel for the one answer
/// ([`Runtime::reply`]).
pub struct ReplySlot<R: Runtime, T: Send + 'static>(R::ReplySender<T>);

impl<R: Runtime, T: Send + 'static> ReplySlot<R, T> {
    /// The reply over `sender`, whose channel has room for one value.
    pub fn new(sender: R::ReplySender<T>) -> Self {
        Self(sender)
    }
}

impl<R: Runtime, T: Send + 'static> Reply<T> for ReplySlot<R, T> {
    fn send(self, value: T) {
        R::answer(self.0, value);
    }
}

/// A replication wait's reply on runtime `R`.
pub(crate) type WaitReply<R> = ReplySlot<R, Result<Offset, WaitError>>;

/// What a master service's handles and connection tasks send its core task, on runtime `R`.
pub type MasterCommandOn<R> =
    TaskCommand<ConnHandle<R>, WaitReply<R>, ReplySlot<R, MasterStatus>, ReplySlot<R, ()>>;

/// A master service's core task on runtime `R`.
pub type MasterTaskOn<L, R> =
    MasterTask<L, ConnHandle<R>, WaitReply<R>, ReplySlot<R, MasterStatus>, ReplySlot<R, ()>>;

/// What a slave service's handles send its task, on runtime `R`.
pub type SlaveCommandOn<R> = SlaveCommand<ReplySlot<R, SlaveStatus>, ReplySlot<R, ()>>;

/// A master core task's handle on one connection: the channel into the connection's writer
/// (capacity `max_inflight`), and the sender whose drop tells the connection task to end.
pub struct ConnHandle<R: Runtime> {
    frames: R::Sender<Transmit>,
    close: Option<R::Sender<()>>,
}

impl<R: Runtime> ConnHandle<R> {
    /// A handle over a writer's channel and a close channel the connection task watches (it
    /// ends once `close`'s receiver says every sender is gone).
    pub fn new(frames: R::Sender<Transmit>, close: R::Sender<()>) -> Self {
        Self { frames, close: Some(close) }
    }

    /// Whether [`ConnSink::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.close.is_none()
    }
}

impl<R: Runtime> ConnSink for ConnHandle<R> {
    fn transmit(&mut self, transmit: Transmit) {
        // Capacity is max_inflight, which the core never exceeds; a full or closed channel means
        // the writer is gone and the teardown will report Closed.
        let _ = R::try_send(&self.frames, transmit);
    }

    fn close(&mut self) {
        self.close = None;
    }
}

/// Runs `a` and `b` side by side on the caller's task and returns both outputs once both
/// are done.
pub async fn join<A: Future, B: Future>(a: A, b: B) -> (A::Output, B::Output) {
    let (mut a, mut b) = (pin!(a), pin!(b));
    let (mut out_a, mut out_b) = (None, None);
    poll_fn(|cx| {
        if out_a.is_none() {
            if let Poll::Ready(out) = a.as_mut().poll(cx) {
                out_a = Some(out);
            }
        }
        if out_b.is_none() {
            if let Poll::Ready(out) = b.as_mut().poll(cx) {
                out_b = Some(out);
            }
        }
        match (out_a.take(), out_b.take()) {
            (Some(a), Some(b)) => Poll::Ready((a, b)),
            (a, b) => {
                (out_a, out_b) = (a, b);
                Poll::Pending
            }
        }
    })
    .await
}

/// Waits for the future in `slot`, if there is one (else forever), and empties the slot once
/// it is done; dropped before that, it leaves the future in the slot.
pub async fn settled<F: Future + Unpin>(slot: &mut Option<F>) -> F::Output {
    let out = match slot {
        Some(future) => future.await,
        None => std::future::pending().await,
    };
    *slot = None;
    out
}
