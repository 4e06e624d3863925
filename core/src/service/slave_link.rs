//! The bookkeeping both slave drivers share, the classic [`SlaveDriver`](super::SlaveDriver)
//! and the [`AutoSwitchSlaveDriver`](super::AutoSwitchSlaveDriver): the master's address, the
//! connection count and the current connection's span, peer errors, the store's latest
//! failure, when the reports last caught up, and the status rows built from them. What each
//! protocol knows (its state, what it acked, how far the master is) comes in as a
//! [`LinkProgress`]; the protocol's own rows stay in its driver.

use std::time::Duration;

use tracing::error;

use super::spans::slave_link_span;
use super::status::SlaveStatus;
use crate::classic::SlaveState;
use crate::error::ApiMisuse;
use crate::log::{LogRead, Offset};
use crate::time::Instant;

/// What a slave driver's protocol says about the link, for a status snapshot.
pub(crate) struct LinkProgress {
    /// The connection cycle, in the classic terms every status uses.
    pub(crate) state: SlaveState,
    /// The latest offset reported to the master on this connection.
    pub(crate) ack_offset: Option<Offset>,
    /// The furthest offset the master has shown.
    pub(crate) master_offset: Option<Offset>,
    /// The end the core holds (what stands for the ack before the first report).
    pub(crate) end: Offset,
    /// When bytes last arrived on the current connection.
    pub(crate) last_read: Option<Instant>,
}

/// The counters, timing and span a slave driver keeps around its protocol core.
pub(crate) struct SlaveLink {
    master_address: String,
    connections: u64,
    peer_errors: u64,
    /// When the reports last covered everything the master had shown.
    caught_up_at: Instant,
    store_error: Option<String>,
    store_failures: u64,
    /// The current connection's span ([`slave_link_span`]), entered while the driver runs;
    /// none before the first connection.
    span: tracing::Span,
}

impl SlaveLink {
    /// A link to `master_address`, caught up at `now` (nothing is owed yet).
    pub(crate) fn new(master_address: String, now: Instant) -> Self {
        Self {
            master_address,
            connections: 0,
            peer_errors: 0,
            caught_up_at: now,
            store_error: None,
            store_failures: 0,
            span: tracing::Span::none(),
        }
    }

    /// The master's address, as configured.
    pub(crate) fn master_address(&self) -> &str {
        &self.master_address
    }

    /// Enters the current connection's span until the guard drops.
    pub(crate) fn enter(&self) -> tracing::span::EnteredSpan {
        self.span.clone().entered()
    }

    /// A connection came up: counts it and opens its span (`link{conn=N}`, 1 for the first).
    pub(crate) fn connected(&mut self) {
        self.connections += 1;
        self.span = slave_link_span(self.connections);
    }

    /// A report of `offset` went out; the master had shown `master_offset`.
    pub(crate) fn reported(&mut self, now: Instant, offset: Offset, master_offset: Option<Offset>) {
        if offset >= master_offset.unwrap_or(0) {
            self.caught_up_at = now;
        }
    }

    /// The master broke the protocol.
    pub(crate) fn peer_error(&mut self) {
        self.peer_errors += 1;
    }

    /// The store works again: the latest failure no longer stands.
    pub(crate) fn stored(&mut self) {
        self.store_error = None;
    }

    /// The store failed for `reason`: it stands in the status until [`stored`](Self::stored).
    pub(crate) fn store_failed(&mut self, reason: String) {
        self.store_error = Some(reason);
        self.store_failures += 1;
    }

    /// Logs `result` of feeding the core an input: an error is the driver's misuse (`driver`
    /// names it in the log), which only time going backwards may excuse.
    pub(crate) fn fed(&self, result: Result<(), ApiMisuse>, driver: &'static str) {
        if let Err(e) = result {
            error!(%e, "{driver} fed an invalid input");
            debug_assert!(matches!(e, ApiMisuse::TimeWentBackwards), "driver misuse: {e}");
        }
    }

    /// A status snapshot of `log` at `now` with what the protocol says; no protocol rows.
    pub(crate) fn status(&self, now: Instant, log: &impl LogRead, progress: LinkProgress) -> SlaveStatus {
        let LinkProgress { state, ack_offset, master_offset, end, last_read } = progress;
        let lag_bytes = master_offset.unwrap_or(0).saturating_sub(ack_offset.unwrap_or(end));
        SlaveStatus {
            state,
            master_address: self.master_address.clone(),
            max_offset: log.bounds().max,
            flushed_offset: log.flushed(),
            ack_offset,
            master_offset,
            lag_bytes,
            lag: if lag_bytes == 0 {
                Duration::ZERO
            } else {
                now.saturating_duration_since(self.caught_up_at)
            },
            since_last_read: last_read.map(|t| now.saturating_duration_since(t)),
            connections: self.connections,
            peer_errors: self.peer_errors,
            append_error: self.store_error.clone(),
            append_failures: self.store_failures,
            autoswitch: None,
        }
    }
}
