//! The stream bookkeeping both HA masters share, the classic [`Master`](crate::classic::Master) and the
//! [`AutoSwitchMaster`](crate::autoswitch::AutoSwitchMaster): which connection sends next, how
//! far one frame from an offset may reach, when a streaming connection has a frame (or a
//! heartbeat) to send, and how long a slave has been behind. Pure functions over what each
//! core keeps; the frames themselves (headers, wire bytes) stay each protocol's.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::time::Duration;

use crate::ConnId;
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
}
