//! Message arrival notices: the hook a broker's long polling hangs on (Java's
//! `MessageArrivingListener`, which the dispatch calls for every new consume-queue entry).

use std::fmt;
use std::sync::Arc;

/// One new consume-queue entry, as the store reports it to an [`ArrivalListener`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Arrival<'a> {
    /// The entry's topic.
    pub topic: &'a str,
    /// The entry's queue.
    pub queue_id: i32,
    /// The entry's queue offset; the queue's max offset is now `queue_offset + 1`.
    pub queue_offset: u64,
    /// The entry's tag code, as indexed (the delivery time in `SCHEDULE_TOPIC_XXXX`).
    pub tags_code: i64,
    /// The message's store timestamp.
    pub store_timestamp: i64,
}

/// Told of every message the store indexes into a consume queue, on a master (from the put)
/// and on a slave (from the dispatch of replicated bytes) alike, after the entry is readable:
/// a reader that looks at the queue from the callback sees it.
///
/// The store calls it under its dispatch lock, so an implementation must be quick and must
/// not block or call back into the store's writers ([`put`](crate::CommitLog::put),
/// [`append_at`](crate::CommitLog::append_at), [`dispatch_pending`](crate::CommitLog::dispatch_pending)):
/// note what arrived and hand the work (answering held pulls) to another task. Reading
/// ([`queue_bounds`](crate::CommitLog::queue_bounds), [`get_message`](crate::CommitLog::get_message))
/// is allowed. Entries re-indexed at open (recovery) are not reported.
pub trait ArrivalListener: Send + Sync {
    /// A message arrived.
    fn message_arrived(&self, arrival: &Arrival<'_>);
}

impl<F: Fn(&Arrival<'_>) + Send + Sync> ArrivalListener for F {
    fn message_arrived(&self, arrival: &Arrival<'_>) {
        self(arrival);
    }
}

/// The listener a store holds, if any.
#[derive(Clone, Default)]
pub(crate) struct ListenerSlot(pub(crate) Option<Arc<dyn ArrivalListener>>);

impl fmt::Debug for ListenerSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() { "ListenerSlot(set)" } else { "ListenerSlot(none)" })
    }
}
