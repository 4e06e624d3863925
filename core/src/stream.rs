//! The stream bookkeeping both HA masters share, the classic [`Master`](crate::classic::Master) and the
//! [`AutoSwitchMaster`](crate::autoswitch::AutoSwitchMaster): which connection sends next, how
//! far one frame from an offset may reach, when a streaming connection has a frame (or a
//! heartbeat) to send, and how long a slave has been behind. Likewise for both slaves, the
//! classic [`Slave`](crate::classic::Slave) and the
//! [`AutoSwitchSlave`](crate::autoswitch::AutoSwitchSlave): when to flush, what to report
//! next, and when to wake while streaming or waiting to reconnect. Pure functions over what
//! each core keeps; the frames themselves (headers, wire bytes) stay each protocol's.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use crate::ConnId;
use crate::config::AckOn;
use crate::log::Offset;
use crate::time::Instant;

/// The connection to send on next: the first after `cursor` (the last one sent on), wrapping
/// around, for which `wants` holds, so that every connection gets its turn.
pub(crate) fn next_in_turn<T>(
    conns: &BTreeMap<ConnId, T>,
    cursor: Option<ConnId>,
    mut wants: impl FnMut(&T) -> bool,
) -> Option<ConnId> {
    let after = match cursor {
        Some(c) => (Bound::Excluded(c), Bound::Unbounded),
        None => (Bound::Unbounded, Bound::Unbounded),
    };
    let upto = match cursor {
        Some(c) => (Bound::Unbounded, Bound::Included(c)),
        None => (Bound::Unbounded, Bound::Excluded(ConnId(0))),
    };
    conns.range(after).chain(conns.range(upto)).find(|(_, c)| wants(c)).map(|(&id, _)| id)
}

/// The most one frame from `next` can carry: the batch size, or the rest of the segment of
/// `segment` bytes (a frame never crosses a segment boundary, as Java's reads do not).
pub(crate) fn frame_limit(next: Offset, segment: u64, batch: u32) -> u64 {
    let segment_end = (next / segment).saturating_add(1).saturating_mul(segment);
    u64::from(batch).min(segment_end - next)
}

/// How a connection's writes stand, and how they may be paced.
#[derive(Copy, Clone, Debug)]
pub(crate) struct Pacing {
    /// Transmits handed out and not yet written.
    pub(crate) inflight: u32,
    /// At most this many unwritten.
    pub(crate) max_inflight: u32,
    /// When the last transmit was handed out.
    pub(crate) last_send: Instant,
    /// A connection with nothing to send gets a heartbeat this often.
    pub(crate) heartbeat: Duration,
}

/// Whether a connection streaming from `next`, with the log appended up to `end`, has a frame
/// to send at `now`. Full frames (`full`: as long as they can be) go out while fewer than
/// `max_inflight` transmits are unwritten. A partial frame goes out at once on an idle
/// connection, and otherwise as soon as the connection's writes have all completed: while a
/// write is under way, more appends gather into the next frame instead of one frame per put.
/// That is adaptive batching without a timer. With nothing to send, a heartbeat is due.
pub(crate) fn wants_frame(
    now: Instant,
    next: Offset,
    end: Offset,
    pacing: Pacing,
    full: impl FnOnce() -> bool,
) -> bool {
    if pacing.inflight >= pacing.max_inflight {
        return false;
    }
    if next >= end {
        return now >= pacing.last_send + pacing.heartbeat;
    }
    pacing.inflight == 0 || full()
}

/// When a connection streaming from `next` owes a heartbeat, if it does: only one with nothing
/// to send (pending data goes out when a write completes or the log grows, not on a timer)
/// and room for another write.
pub(crate) fn heartbeat_due(next: Offset, end: Offset, pacing: Pacing) -> Option<Instant> {
    (next >= end && pacing.inflight < pacing.max_inflight).then(|| pacing.last_send + pacing.heartbeat)
}

/// How long a slave has been behind at `now`: nothing if it is caught up, else since it last
/// was (`since`).
pub(crate) fn lag(caught_up: bool, now: Instant, since: Instant) -> Duration {
    if caught_up { Duration::ZERO } else { now.saturating_duration_since(since) }
}

/// Whether a slave asks for a flush now: its acks wait for durable bytes (`AckOn::Flushed`),
/// some stored bytes (below `end`) are not durable yet (`flushed`), and no flush is under way.
/// Asking marks one under way (`in_flight`) until the driver answers.
pub(crate) fn flush_due(ack_on: AckOn, flushed: Offset, end: Offset, in_flight: &mut bool) -> bool {
    let due = ack_on == AckOn::Flushed && flushed < end && !*in_flight;
    *in_flight |= due;
    due
}

/// What a slave streaming to its master reports at `now`, if anything, after `reported` (none
/// yet on this connection) went out at `last_report`. The first report is where the master
/// starts streaming, so it waits until the slave is `settled` (every store it asked for
/// answered) and all it stored may be acknowledged (`ackable` is `end`). Later ones go out
/// as soon as `ackable` passes the last, and repeat it every `heartbeat`.
pub(crate) fn next_report(
    now: Instant,
    reported: Option<Offset>,
    last_report: Instant,
    heartbeat: Duration,
    ackable: Offset,
    end: Offset,
    settled: bool,
) -> Option<Offset> {
    match reported {
        None if settled && ackable == end => Some(end),
        Some(r) if ackable > r => Some(ackable),
        Some(r) if now >= last_report + heartbeat => Some(r),
        _ => None,
    }
}

/// When a slave streaming to its master must next act: the housekeeping deadline after the
/// last complete frame (`last_read`), and once it has reported, the next heartbeat report.
pub(crate) fn streaming_deadline(
    last_read: Instant,
    housekeeping: Duration,
    reported: Option<Offset>,
    last_report: Instant,
    heartbeat: Duration,
) -> Instant {
    let housekeeping = last_read + housekeeping;
    match reported {
        Some(_) => housekeeping.min(last_report + heartbeat),
        None => housekeeping,
    }
}

/// When a disconnected slave next connects: at `retry_at` once it is `settled`; until then
/// no sooner than `idle` (the next input, an answer to what is outstanding, wakes it).
pub(crate) fn reconnect_deadline(retry_at: Instant, settled: bool, idle: Instant) -> Instant {
    if settled { retry_at } else { retry_at.max(idle) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(ms)
    }

    #[test]
    fn turns_go_round_from_the_connection_after_the_last_one_sent_on() {
        let conns: BTreeMap<ConnId, bool> = [(ConnId(1), true), (ConnId(2), false), (ConnId(3), true)].into();
        assert_eq!(next_in_turn(&conns, None, |&w| w), Some(ConnId(1)));
        assert_eq!(next_in_turn(&conns, Some(ConnId(1)), |&w| w), Some(ConnId(3)));
        assert_eq!(next_in_turn(&conns, Some(ConnId(3)), |&w| w), Some(ConnId(1)));
        assert_eq!(next_in_turn(&conns, Some(ConnId(1)), |_| false), None);
    }

    #[test]
    fn a_frame_stops_at_the_batch_size_or_the_segment_end() {
        assert_eq!(frame_limit(0, 1000, 100), 100);
        assert_eq!(frame_limit(950, 1000, 100), 50);
        assert_eq!(frame_limit(1000, 1000, 100), 100);
        assert_eq!(frame_limit(u64::MAX - 1, 1 << 30, 100), 1, "the last segment ends at the top");
    }

    #[test]
    fn partial_frames_wait_for_the_writes_under_way_and_idle_streams_get_heartbeats() {
        let pacing =
            Pacing { inflight: 1, max_inflight: 2, last_send: at(0), heartbeat: Duration::from_secs(5) };
        assert!(!wants_frame(at(1), 0, 10, pacing, || false), "partial, a write under way");
        assert!(wants_frame(at(1), 0, 10, pacing, || true), "full");
        assert!(wants_frame(at(1), 0, 10, Pacing { inflight: 0, ..pacing }, || false), "idle");
        assert!(!wants_frame(at(1), 0, 10, Pacing { inflight: 2, ..pacing }, || true), "no room");
        assert!(!wants_frame(at(4_999), 10, 10, pacing, || true), "heartbeat not due");
        assert!(wants_frame(at(5_000), 10, 10, pacing, || true), "heartbeat due");
        assert_eq!(heartbeat_due(10, 10, pacing), Some(at(5_000)));
        assert_eq!(heartbeat_due(0, 10, pacing), None, "data to send");
        assert_eq!(heartbeat_due(10, 10, Pacing { inflight: 2, ..pacing }), None, "no room");
    }

    #[test]
    fn a_caught_up_slave_lags_by_nothing() {
        assert_eq!(lag(true, at(10), at(3)), Duration::ZERO);
        assert_eq!(lag(false, at(10), at(3)), Duration::from_millis(7));
    }

    #[test]
    fn a_flush_is_asked_for_once_while_durable_acks_wait_for_it() {
        let mut in_flight = false;
        assert!(!flush_due(AckOn::Written, 0, 10, &mut in_flight), "acks on written bytes");
        assert!(!flush_due(AckOn::Flushed, 10, 10, &mut in_flight), "all durable");
        assert!(flush_due(AckOn::Flushed, 0, 10, &mut in_flight));
        assert!(in_flight);
        assert!(!flush_due(AckOn::Flushed, 0, 10, &mut in_flight), "one under way");
    }

    #[test]
    fn the_first_report_waits_for_a_settled_store_and_later_ones_advance_or_beat() {
        let hb = Duration::from_secs(5);
        assert_eq!(next_report(at(0), None, at(0), hb, 10, 10, false), None, "not settled");
        assert_eq!(next_report(at(0), None, at(0), hb, 5, 10, true), None, "not all ackable");
        assert_eq!(next_report(at(0), None, at(0), hb, 10, 10, true), Some(10));
        assert_eq!(next_report(at(1), Some(10), at(0), hb, 12, 15, false), Some(12), "advance");
        assert_eq!(next_report(at(4_999), Some(10), at(0), hb, 10, 15, true), None);
        assert_eq!(next_report(at(5_000), Some(10), at(0), hb, 10, 15, true), Some(10), "heartbeat");
    }

    #[test]
    fn a_streaming_slave_wakes_for_housekeeping_or_its_next_heartbeat() {
        let (hk, hb) = (Duration::from_secs(20), Duration::from_secs(5));
        assert_eq!(streaming_deadline(at(0), hk, None, at(0), hb), at(20_000), "no report yet");
        assert_eq!(streaming_deadline(at(0), hk, Some(1), at(1_000), hb), at(6_000));
        assert_eq!(streaming_deadline(at(0), hk, Some(1), at(18_000), hb), at(20_000));
    }

    #[test]
    fn an_unsettled_slave_does_not_wake_to_reconnect_before_idle() {
        assert_eq!(reconnect_deadline(at(5), true, at(100)), at(5));
        assert_eq!(reconnect_deadline(at(5), false, at(100)), at(100));
        assert_eq!(reconnect_deadline(at(500), false, at(100)), at(500));
    }
}
